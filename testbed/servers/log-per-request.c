/* seeds/003 (config_log_transaction): every request opens the access log, appends its line,
 * fsyncs and closes it. Twin: log-kept-open. */
#include <fcntl.h>
#include <unistd.h>

#include "common.h"

static int log_transaction(struct tb_conn *c, const struct tb_opts *o)
{
    char line[TB_IN_MAX + 256];
    size_t n = tb_access_line(c, line, sizeof(line));
    int fd = open(o->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return TB_FINISH;
    if (write(fd, line, n) < 0)
        tb_die(o->name, "write %s failed; check the --log file's disk", o->log);
    fsync(fd);
    close(fd);
    return TB_FINISH;
}

static int check_log(const struct tb_opts *o)
{
    int fd = open(o->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        tb_die(o->name, "cannot open --log '%s' for appending; give a writable file", o->log);
    close(fd);
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
