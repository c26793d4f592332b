/* seeds/004: a UDP bulk server (QUIC-like: one socket per connection, the sender paced by the
 * receiver's acknowledgements) whose loop rebuilds an fd_set over the request socket and every
 * connection's socket, calls select(), then scans every connection for readiness. Each wakeup
 * costs time proportional to the connections held open, in the kernel (select polls every fd)
 * and in user space (the scan), while it serves one acknowledgement. Twin: udp-bulk-epoll. */
#include <errno.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include "common.h"

static struct tb_stream streams[FD_SETSIZE];
static int nopen;

int main(int argc, char **argv)
{
    struct tb_opts o;
    tb_parse_args(argc, argv, "udp-bulk-select", &o);
    int bfd = tb_udp_bind(&o);
    for (;;) {
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(bfd, &rd);
        int maxfd = bfd;
        for (int i = 0; i < nopen; i++) {
            FD_SET(streams[i].fd, &rd);
            if (streams[i].fd > maxfd)
                maxfd = streams[i].fd;
        }
        if (select(maxfd + 1, &rd, NULL, NULL, NULL) < 0) {
            if (errno == EINTR)
                continue;
            tb_die(o.name, "select: %s", strerror(errno));
        }
        for (int i = 0; i < nopen; i++) {
            if (FD_ISSET(streams[i].fd, &rd))
                tb_stream_ack(&streams[i]);
            if (streams[i].fd < 0)
                streams[i--] = streams[--nopen];
        }
        if (FD_ISSET(bfd, &rd)) {
            struct tb_stream s;
            if (tb_stream_open(bfd, &s) == 0 && s.fd >= 0) {
                if (s.fd >= FD_SETSIZE)
                    close(s.fd); /* select() cannot watch it */
                else
                    streams[nopen++] = s;
            }
        }
    }
}
