/* The twin of udp-bulk-select: the same UDP bulk streams, one socket per connection, served from
 * epoll (level-triggered), so each wakeup costs what is ready rather than what is open. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common.h"

int main(int argc, char **argv)
{
    struct tb_opts o;
    tb_parse_args(argc, argv, "udp-bulk-epoll", &o);
    int bfd = tb_udp_bind(&o);
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, bfd, &ev) < 0)
        tb_die(o.name, "epoll: %s", strerror(errno));
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(epfd, evs, 64, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            tb_die(o.name, "epoll_wait: %s", strerror(errno));
        }
        for (int i = 0; i < n; i++) {
            struct tb_stream *s = evs[i].data.ptr;
            if (s) {
                tb_stream_ack(s); /* closing the socket removes it from the epoll set */
                if (s->fd < 0)
                    free(s);
                continue;
            }
            s = malloc(sizeof(*s));
            struct epoll_event add = {.events = EPOLLIN, .data.ptr = s};
            if (s && tb_stream_open(bfd, s) == 0 && s->fd >= 0 &&
                epoll_ctl(epfd, EPOLL_CTL_ADD, s->fd, &add) == 0)
                continue;
            if (s && s->fd >= 0)
                close(s->fd);
            free(s);
        }
    }
}
