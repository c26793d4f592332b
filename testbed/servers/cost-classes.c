/* Requests of known CPU cost, the ground truth of per-request attribution: the selector (or HTTP
 * path) `burn/N` spins until the serving thread has used N µs of CPU, then answers
 * `burned N us\r\n`; `a/N` and `b/N` do the same in functions of their own (`burn_a`,
 * `burn_b`), the ground truth of call chains per request class. Served by the common epoll loop, or with --threads by one blocking thread
 * per connection; --http speaks keep-alive HTTP/1.1 instead of gopher. */
#define _GNU_SOURCE /* accept4 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t clock_ns(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The thread CPU clock is a syscall, the monotonic clock is not: the monotonic clock paces the
 * spin and the CPU clock confirms, so a request makes 2 clock_gettime calls, plus one per time
 * the spin was preempted. */
static inline __attribute__((always_inline)) void spin(uint64_t us)
{
    uint64_t start = clock_ns(CLOCK_THREAD_CPUTIME_ID), want = us * 1000;
    for (;;) {
        uint64_t used = clock_ns(CLOCK_THREAD_CPUTIME_ID) - start;
        if (used >= want)
            return;
        uint64_t until = clock_ns(CLOCK_MONOTONIC) + (want - used);
        while (clock_ns(CLOCK_MONOTONIC) < until)
            ;
    }
}

/* Not inlined: each is a frame of its own in the call chains. */
static __attribute__((noinline)) void burn(uint64_t us)
{
    spin(us);
}

static __attribute__((noinline)) void burn_a(uint64_t us)
{
    spin(us);
}

static __attribute__((noinline)) void burn_b(uint64_t us)
{
    spin(us);
}

static int build(struct tb_conn *c, const struct tb_opts *o)
{
    (void)o;
    char *end;
    void (*burner)(uint64_t);
    const char *digits;
    if (strncmp(c->path, "burn/", 5) == 0) {
        burner = burn;
        digits = c->path + 5;
    } else if (strncmp(c->path, "a/", 2) == 0) {
        burner = burn_a;
        digits = c->path + 2;
    } else if (strncmp(c->path, "b/", 2) == 0) {
        burner = burn_b;
        digits = c->path + 2;
    } else {
        c->status = 404;
        return -1;
    }
    errno = 0;
    unsigned long us = strtoul(digits, &end, 10);
    if (errno || end == digits || *end || us > 10000000) {
        c->status = 400;
        return -1;
    }
    burner(us);
    char *b = tb_conn_buf(c, TB_HDR_MAX + 32);
    if (!b) {
        c->status = 500;
        return -1;
    }
    char body[32];
    size_t n = (size_t)snprintf(body, sizeof(body), "burned %lu us\r\n", us);
    size_t h = tb_header(c, c->proto, n, b);
    memcpy(b + h, body, n);
    c->out = b;
    c->out_len = h + n;
    c->hdr_len = h;
    c->status = 200;
    return 0;
}

static struct tb_server srv = {.name = "cost-classes", .proto = TB_GOPHER, .build = build};
static struct tb_opts opts;

/* One connection, blocking: read until a request is whole, answer it, until the client is done
 * or the protocol closes. */
static void *serve_connection(void *arg)
{
    struct tb_conn *c = arg;
    for (;;) {
        ssize_t n = read(c->fd, c->in + c->in_len, TB_IN_MAX - c->in_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        c->in_len += (size_t)n;
        int r;
        while ((r = tb_serve(c, &srv, &opts)) == 1 && c->keep) {
            tb_next_request(c);
            if (c->in_len == 0)
                break;
        }
        if (r < 0 || (r == 1 && !c->keep))
            break;
    }
    close(c->fd);
    free(c->buf);
    free(c);
    return NULL;
}

static int run_threads(void)
{
    int lfd = tb_listen(&opts);
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) & ~O_NONBLOCK);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    tb_announce(&opts);
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE)
                continue;
            tb_die(opts.name, "accept4: %s", strerror(errno));
        }
        /* Its own slot, not the shared table: the table's slots are reused by fd number. */
        struct tb_conn *c = calloc(1, sizeof(*c));
        pthread_t t;
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->proto = srv.proto;
        c->state = TB_READING;
        if (pthread_create(&t, &attr, serve_connection, c) != 0) {
            close(fd);
            free(c);
        }
    }
}

int main(int argc, char **argv)
{
    int threads = 0;
    /* Leading flags of this server; the rest are the common arguments. */
    while (argc > 1 && (!strcmp(argv[1], "--threads") || !strcmp(argv[1], "--http"))) {
        if (!strcmp(argv[1], "--threads")) {
            threads = 1;
        } else {
            srv.proto = TB_HTTP;
            srv.keepalive = 1;
        }
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    if (!threads)
        return tb_run(argc, argv, &srv);
    tb_parse_args(argc, argv, srv.name, &opts);
    return run_threads();
}
