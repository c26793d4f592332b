/* The client of the UDP bulk servers (udp-bulk-select, udp-bulk-epoll): opens N connections,
 * each one UDP socket asking for BYTES, and takes the streams in turns: it acknowledges one
 * connection's window, receives that connection's next window whole, then moves to the next
 * connection. One window is in flight at a time, so a server wakes up for exactly one ready
 * socket per window whatever the machine's load: counts per MiB are exact. Prints
 * "connections=N bytes=TOTAL cpu_ns=NS" on stdout, NS its own CPU time as the scheduler counted
 * it (/proc/self/schedstat), the ground truth of tests of the client's measured cost; exits 1 if
 * a datagram is lost (5 s without one). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common.h"

#define USAGE "usage: udp-bulk-client --port PORT -c CONNECTIONS -b BYTES_PER_CONNECTION\n"

struct conn {
    int fd;
    unsigned long long got, want;
};

static void fail(const char *what)
{
    fprintf(stderr, "udp-bulk-client: %s: %s\n", what, strerror(errno));
    exit(1);
}

static unsigned long long number(const char *flag, const char *v, unsigned long long max)
{
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end || end == v || n < 1 || n > max) {
        fprintf(stderr, "udp-bulk-client: %s needs a number from 1 to %llu (got '%s')\n" USAGE,
                flag, max, v);
        exit(2);
    }
    return n;
}

/* Receives one window of c (the first one also tells the stream's server address, which c
 * then connects to). */
static void receive_window(struct conn *c)
{
    static char buf[TB_UDP_DGRAM];
    for (int i = 0; i < TB_UDP_WINDOW && c->got < c->want; i++) {
        struct sockaddr_in from;
        socklen_t len = sizeof(from);
        ssize_t n = recvfrom(c->fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len);
        if (n < 0)
            fail(errno == EAGAIN ? "no datagram for 5 s (lost?)" : "recvfrom");
        if (c->got == 0 && connect(c->fd, (struct sockaddr *)&from, len) < 0)
            fail("connect");
        c->got += (unsigned long long)n;
    }
}

int main(int argc, char **argv)
{
    unsigned long long port = 0, nconn = 0, bytes = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port"))
            port = number("--port", argv[i + 1], 65535);
        else if (!strcmp(argv[i], "-c"))
            nconn = number("-c", argv[i + 1], 1000);
        else if (!strcmp(argv[i], "-b"))
            bytes = number("-b", argv[i + 1], 1ULL << 40);
    }
    if (argc % 2 != 1 || !port || !nconn || !bytes) {
        fprintf(stderr, "udp-bulk-client: --port, -c and -b are needed, each once with a value\n"
                        USAGE);
        return 2;
    }
    struct sockaddr_in server = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval timeout = {.tv_sec = 5};
    struct conn *conns = calloc(nconn, sizeof(*conns));
    char req[32];
    int reqlen = snprintf(req, sizeof(req), "%llu", bytes);
    for (unsigned long long i = 0; i < nconn; i++) {
        struct conn *c = &conns[i];
        c->want = bytes;
        c->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0 || setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)))
            fail("socket");
        if (sendto(c->fd, req, (size_t)reqlen, 0, (struct sockaddr *)&server, sizeof(server)) < 0)
            fail("sendto");
        receive_window(c);
    }
    for (int active = 1; active;) {
        active = 0;
        for (unsigned long long i = 0; i < nconn; i++) {
            struct conn *c = &conns[i];
            if (c->got >= c->want)
                continue;
            if (send(c->fd, "a", 1, 0) < 0)
                fail("send");
            receive_window(c);
            active = 1;
        }
    }
    unsigned long long cpu_ns = 0;
    FILE *sched = fopen("/proc/self/schedstat", "r");
    if (!sched || fscanf(sched, "%llu", &cpu_ns) != 1)
        fail("/proc/self/schedstat");
    fclose(sched);
    printf("connections=%llu bytes=%llu cpu_ns=%llu\n", nconn, nconn * bytes, cpu_ns);
    return 0;
}
