/* udp-echo: echoes UDP datagrams on 127.0.0.1:PORT, moving them in batches with recvmmsg and
 * sendmmsg (up to 8 a call); a datagram that starts with 's' is echoed on its own with sendto.
 * For the probes' UDP accounting: datagrams per call, bytes as the sum of msg_len. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common.h"

#define BATCH 8
#define DGRAM_MAX 65536

static char bufs[BATCH][DGRAM_MAX];

int main(int argc, char **argv)
{
    struct tb_opts o;
    tb_parse_args(argc, argv, "udp-echo", &o);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)o.port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        tb_die(o.name, "cannot bind UDP 127.0.0.1:%d: %s; pick another --port", o.port,
               strerror(errno));
    fprintf(stderr, "udp-echo: listening on UDP 127.0.0.1:%d\n", o.port);

    struct mmsghdr in[BATCH], out[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_in peers[BATCH];
    for (;;) {
        for (int i = 0; i < BATCH; i++) {
            iov[i].iov_base = bufs[i];
            iov[i].iov_len = DGRAM_MAX;
            memset(&in[i], 0, sizeof(in[i]));
            in[i].msg_hdr.msg_name = &peers[i];
            in[i].msg_hdr.msg_namelen = sizeof(peers[i]);
            in[i].msg_hdr.msg_iov = &iov[i];
            in[i].msg_hdr.msg_iovlen = 1;
        }
        int n = recvmmsg(fd, in, BATCH, MSG_WAITFORONE, NULL);
        if (n <= 0)
            continue;
        int m = 0;
        for (int i = 0; i < n; i++) {
            iov[i].iov_len = in[i].msg_len;
            if (in[i].msg_len > 0 && bufs[i][0] == 's') {
                sendto(fd, bufs[i], in[i].msg_len, 0, (struct sockaddr *)&peers[i],
                       in[i].msg_hdr.msg_namelen);
                continue;
            }
            memset(&out[m], 0, sizeof(out[m]));
            out[m++].msg_hdr = in[i].msg_hdr;
        }
        if (m > 0)
            sendmmsg(fd, out, m, 0);
    }
}
