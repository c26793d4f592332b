/* The twin of log-per-request: the access log is opened once at start and each request appends
 * its line with one write(2); no fsync (the kernel writes it back). */
#include <fcntl.h>
#include <unistd.h>

#include "common.h"

static int log_fd = -1;

static int open_log(const struct tb_opts *o)
{
    log_fd = open(o->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd < 0)
        tb_die(o->name, "cannot open --log '%s' for appending; give a writable file", o->log);
    return 0;
}

static int log_line(struct tb_conn *c, const struct tb_opts *o)
{
    char line[TB_IN_MAX + 256];
    size_t n = tb_access_line(c, line, sizeof(line));
    if (write(log_fd, line, n) < 0)
        tb_die(o->name, "write %s failed; check the --log file's disk", o->log);
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
