/* The twin of log-per-request: the access log is opened once at start and each request appends
 * its line with one write(2); no fsync (the kernel writes it back). */
#include "common.h"

static int log_fd = -1;

static int open_log(const struct tb_opts *o)
{
    log_fd = tb_open_log(o);
    return 0;
}

static int log_line(struct tb_conn *c, const struct tb_opts *o)
{
    tb_log_access(c, o, log_fd);
    return TB_FINISH;
}

static const struct tb_server srv = {
    .name = "log-kept-open",
    .proto = TB_GOPHER,
    .setup = open_log,
    .done = log_line,
};

int main(int argc, char **argv)
{
    return tb_run(argc, argv, &srv);
}
