/* seeds/003 (config_log_transaction): every request opens the access log, appends its line,
 * fsyncs and closes it. Twin: log-kept-open. */
#include <fcntl.h>
#include <unistd.h>

#include "common.h"

static int log_transaction(struct tb_conn *c, const struct tb_opts *o)
{
    /* A log that vanished mid-run costs this request its line, not the server its life. */
    int fd = open(o->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return TB_FINISH;
    tb_log_access(c, o, fd);
    fsync(fd);
    close(fd);
    return TB_FINISH;
}

static int check_log(const struct tb_opts *o)
{
    close(tb_open_log(o));
    return 0;
}

static const struct tb_server srv = {
    .name = "log-per-request",
    .proto = TB_GOPHER,
    .setup = check_log,
    .done = log_transaction,
};

int main(int argc, char **argv)
{
    return tb_run(argc, argv, &srv);
}
