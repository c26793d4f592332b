/* seeds/004: an HTTP/1.1 keep-alive server whose loop rebuilds fd_sets over every open connection,
 * calls select(), then scans every connection for readiness. Each wakeup costs time proportional
 * to the number of connections held open (idle keep-alive clients included), in the kernel
 * (select polls every fd) and in user space (the scans). Twin: keepalive (epoll). */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "common.h"

static const struct tb_server srv = {.name = "poll-scaling", .proto = TB_HTTP, .keepalive = 1};

static struct tb_conn *open_conns[FD_SETSIZE];
static int nopen;

int main(int argc, char **argv)
{
    struct tb_opts o;
    tb_parse_args(argc, argv, srv.name, &o);
    int lfd = tb_listen(&o);
    tb_announce(&o);

    for (;;) {
        fd_set rd, wr;
        FD_ZERO(&rd);
        FD_ZERO(&wr);
        FD_SET(lfd, &rd);
        int maxfd = lfd;
        for (int i = 0; i < nopen; i++) {
            struct tb_conn *c = open_conns[i];
            FD_SET(c->fd, c->want_out ? &wr : &rd);
            if (c->fd > maxfd)
                maxfd = c->fd;
        }
        int n = select(maxfd + 1, &rd, &wr, NULL, NULL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            tb_die(o.name, "select: %s", strerror(errno));
        }
        for (int i = 0; i < nopen; i++) {
            struct tb_conn *c = open_conns[i];
            if (FD_ISSET(c->fd, &rd))
                tb_on_event(c, EPOLLIN, &srv, &o);
            else if (FD_ISSET(c->fd, &wr))
                tb_on_event(c, EPOLLOUT, &srv, &o);
            if (c->fd < 0) {
                open_conns[i--] = open_conns[--nopen];
            }
        }
        if (FD_ISSET(lfd, &rd)) {
            struct tb_conn *c = tb_accept(lfd, srv.proto);
            if (c && (c->fd >= FD_SETSIZE || nopen >= FD_SETSIZE)) {
                tb_conn_close(c); /* select() cannot watch it */
            } else if (c) {
                open_conns[nopen++] = c;
            }
        }
    }
}
