/* seeds/004 (kernel-bound): an HTTP/1.1 keep-alive server that reads each request one byte per
 * recv(2), trying to parse after every byte, as a naive line reader does. A request of N bytes
 * costs N + 1 recv calls (the last one EAGAIN) of one byte each: the CPU goes to syscall entry
 * and the socket layer, not to serving. Otherwise it is keepalive: epoll, header and body in one
 * write(2). Twin: keepalive. */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "common.h"

static const struct tb_server srv = {.name = "byte-reads", .proto = TB_HTTP, .keepalive = 1};

static int epfd;

static void interest(struct tb_conn *c, int out)
{
    c->want_out = out;
    struct epoll_event ev = {.events = out ? EPOLLOUT : EPOLLIN, .data.ptr = c};
    epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Serves the connection as far as it goes without blocking. */
static void on_event(struct tb_conn *c, const struct tb_opts *o)
{
    for (;;) {
        int r = c->in_len > 0 || c->state != TB_READING ? tb_serve(c, &srv, o) : 0;
        if (r < 0) {
            tb_conn_close(c);
            return;
        }
        if (r == 0) {
            if (c->state == TB_WRITING) {
                if (!c->want_out)
                    interest(c, 1);
                return;
            }
            /* The request is not complete yet: one more byte. */
            ssize_t n = recv(c->fd, c->in + c->in_len, 1, 0);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
            if (n <= 0) {
                tb_conn_close(c);
                return;
            }
            c->in_len++;
            continue;
        }
        if (!c->keep) {
            tb_conn_close(c);
            return;
        }
        tb_next_request(c);
        if (c->want_out)
            interest(c, 0);
    }
}

int main(int argc, char **argv)
{
    struct tb_opts o;
    tb_parse_args(argc, argv, srv.name, &o);
    tb_serve_conns(&o, srv.proto, &epfd, NULL, on_event);
}
