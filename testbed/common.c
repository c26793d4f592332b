#define _GNU_SOURCE
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static struct tb_conn **conns;
static int conns_cap;
static int epfd = -1;
static int spare_fd = -1; /* released when accept hits EMFILE, so the peer can be refused */

void tb_die(const char *name, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void usage(const char *name, const char *why)
{
    fprintf(stderr, "%s: %s\nusage: %s --port PORT --root DIR [--log FILE]\n", name, why, name);
    exit(2);
}

/* Nothing is buffered in user space at any time, so exiting from the handler loses nothing. */
static void on_term(int sig)
{
    (void)sig;
    _exit(0);
}

void tb_parse_args(int argc, char **argv, const char *name, struct tb_opts *o)
{
    char why[512];
    memset(o, 0, sizeof(*o));
    o->name = name;
    o->port = -1;
    o->root_fd = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: %s --port PORT --root DIR [--log FILE]\n", name);
            exit(0);
        }
        if (strcmp(a, "--port") && strcmp(a, "--root") && strcmp(a, "--log")) {
            snprintf(why, sizeof(why), "unknown argument '%s'", a);
            usage(name, why);
        }
        if (i + 1 >= argc) {
            snprintf(why, sizeof(why), "%s needs a value", a);
            usage(name, why);
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--port")) {
            char *end;
            errno = 0;
            long p = strtol(v, &end, 10);
            if (errno || *end || end == v || p < 1 || p > 65535) {
                snprintf(why, sizeof(why), "--port needs a number from 1 to 65535 (got '%s')", v);
                usage(name, why);
            }
            o->port = (int)p;
        } else if (!strcmp(a, "--root")) {
            o->root = v;
        } else {
            o->log = v;
        }
    }
    if (o->port < 0)
        usage(name, "missing --port PORT");
    if (!o->root)
        usage(name, "missing --root DIR");
    if (!realpath(o->root, o->root_real)) {
        snprintf(why, sizeof(why), "--root '%s': %s; give an existing directory", o->root,
                 strerror(errno));
        usage(name, why);
    }
    o->root_fd = open(o->root_real, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (o->root_fd < 0) {
        snprintf(why, sizeof(why), "--root '%s' is not a directory; give the content directory",
                 o->root);
        usage(name, why);
    }
    if (!o->log) {
        snprintf(o->log_default, sizeof(o->log_default), "/tmp/testbed-%s-%d.log", name, o->port);
        o->log = o->log_default;
    }

    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rlim_t want = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
        if (rl.rlim_cur < want) {
            rl.rlim_cur = want;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        getrlimit(RLIMIT_NOFILE, &rl);
        conns_cap = rl.rlim_cur > 65536 ? 65536 : (int)rl.rlim_cur;
    } else {
        conns_cap = 1024;
    }
    conns = calloc((size_t)conns_cap, sizeof(*conns));
    if (!conns)
        tb_die(name, "out of memory");
    spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

int tb_listen(const struct tb_opts *o)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        tb_die(o->name, "socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)o->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        tb_die(o->name, "cannot listen on 127.0.0.1:%d: %s; pick another --port", o->port,
               strerror(errno));
    if (listen(fd, 1024) < 0)
        tb_die(o->name, "listen on 127.0.0.1:%d: %s", o->port, strerror(errno));
    return fd;
}

/* Creates the epoll instance, registers the listening socket with `listener` as its event data,
 * and announces readiness on stderr. Dies with a message on failure. */
static int epoll_listen(const struct tb_opts *o, int lfd, epoll_data_t listener)
{
    int fd = epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0)
        tb_die(o->name, "epoll_create1: %s", strerror(errno));
    struct epoll_event ev = {.events = EPOLLIN, .data = listener};
    epoll_ctl(fd, EPOLL_CTL_ADD, lfd, &ev);
    tb_announce(o);
    return fd;
}

/* epoll_wait that retries on EINTR and dies on any other error. */
static int wait_events(int epfd, struct epoll_event *evs, int max, const char *name)
{
    for (;;) {
        int n = epoll_wait(epfd, evs, max, -1);
        if (n >= 0)
            return n;
        if (errno != EINTR)
            tb_die(name, "epoll_wait: %s", strerror(errno));
    }
}

void tb_announce(const struct tb_opts *o)
{
    fprintf(stderr, "%s: listening on 127.0.0.1:%d, root %s\n", o->name, o->port, o->root_real);
}

struct tb_conn *tb_conn_get(int fd, enum tb_proto proto)
{
    if (fd < 0 || fd >= conns_cap)
        return NULL;
    struct tb_conn *c = conns[fd];
    if (!c) {
        c = calloc(1, sizeof(*c));
        if (!c)
            return NULL;
        conns[fd] = c;
    }
    c->fd = fd;
    c->proto = proto;
    c->state = TB_READING;
    c->want_out = 0;
    c->keep = 0;
    c->status = 0;
    c->in_len = 0;
    c->req_len = 0;
    c->out = NULL;
    c->out_len = c->out_off = c->hdr_len = 0;
    c->peer[0] = 0;
    return c;
}

struct tb_conn *tb_accept(int lfd, enum tb_proto proto)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int fd = accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        if ((errno == EMFILE || errno == ENFILE) && spare_fd >= 0) {
            close(spare_fd);
            fd = accept(lfd, NULL, NULL);
            if (fd >= 0)
                close(fd);
            spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        }
        return NULL;
    }
    struct tb_conn *c = tb_conn_get(fd, proto);
    if (!c) {
        close(fd);
        return NULL;
    }
    if (sa.sin_family == AF_INET)
        inet_ntop(AF_INET, &sa.sin_addr, c->peer, sizeof(c->peer));
    return c;
}

void tb_conn_close(struct tb_conn *c)
{
    close(c->fd);
    c->fd = -1;
    c->state = TB_READING;
    c->in_len = 0;
}

void tb_interest(struct tb_conn *c, int out)
{
    c->want_out = out;
    if (epfd < 0)
        return; /* a select() loop derives interest from want_out each time */
    struct epoll_event ev = {.events = out ? EPOLLOUT : EPOLLIN, .data.fd = c->fd};
    epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Rejects ".." components and NUL bytes; strips leading slashes. 0 = ok. */
static int set_path(struct tb_conn *c, const char *p, size_t n)
{
    while (n > 0 && *p == '/') {
        p++;
        n--;
    }
    if (memchr(p, '\0', n))
        return -1;
    memcpy(c->path, p, n);
    c->path[n] = 0;
    for (const char *s = c->path; *s;) {
        const char *e = strchr(s, '/');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 2 && s[0] == '.' && s[1] == '.')
            return -1;
        s += len;
        if (*s == '/')
            s++;
    }
    return 0;
}

static int parse_gopher(struct tb_conn *c)
{
    char *nl = memchr(c->in, '\n', c->in_len);
    if (!nl) {
        if (c->in_len >= TB_IN_MAX) {
            c->status = 414;
            return -1;
        }
        return 0;
    }
    size_t n = (size_t)(nl - c->in);
    c->req_len = n + 1;
    if (n > 0 && c->in[n - 1] == '\r')
        n--;
    char *tab = memchr(c->in, '\t', n);
    if (tab)
        n = (size_t)(tab - c->in);
    c->keep = 0;
    c->status = set_path(c, c->in, n) ? 400 : 200;
    return 1;
}

static int header_has(const char *v, size_t n, const char *token)
{
    size_t t = strlen(token);
    for (size_t i = 0; i + t <= n; i++)
        if (!strncasecmp(v + i, token, t))
            return 1;
    return 0;
}

static int parse_http(struct tb_conn *c, int keepalive)
{
    char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end) {
        if (c->in_len >= TB_IN_MAX) {
            c->status = 431;
            c->keep = 0;
            return -1;
        }
        return 0;
    }
    c->req_len = (size_t)(end - c->in) + 4;
    char *line_end = memmem(c->in, c->req_len, "\r\n", 2);
    char *sp1 = memchr(c->in, ' ', (size_t)(line_end - c->in));
    char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(line_end - sp1 - 1)) : NULL;
    c->keep = 0;
    if (!sp2) {
        c->status = 400;
        return 1;
    }
    size_t vlen = (size_t)(line_end - sp2 - 1);
    if (vlen == 8 && !memcmp(sp2 + 1, "HTTP/1.1", 8))
        c->keep = 1;
    else if (!(vlen == 8 && !memcmp(sp2 + 1, "HTTP/1.0", 8))) {
        c->status = 400;
        return 1;
    }
    for (char *h = line_end + 2; h < end;) {
        char *e = memmem(h, (size_t)(end + 2 - h), "\r\n", 2);
        size_t hl = (size_t)(e - h);
        if (hl > 11 && !strncasecmp(h, "connection:", 11)) {
            if (header_has(h + 11, hl - 11, "close"))
                c->keep = 0;
            else if (header_has(h + 11, hl - 11, "keep-alive"))
                c->keep = 1;
        }
        h = e + 2;
    }
    if (!keepalive)
        c->keep = 0;
    if (sp1 - c->in != 3 || memcmp(c->in, "GET", 3)) {
        c->status = 405;
        return 1;
    }
    char *target = sp1 + 1;
    size_t tlen = (size_t)(sp2 - target);
    char *q = memchr(target, '?', tlen);
    if (q)
        tlen = (size_t)(q - target);
    if (tlen == 0 || target[0] != '/') {
        c->status = 400;
        return 1;
    }
    c->status = set_path(c, target, tlen) ? 400 : 200;
    return 1;
}

int tb_parse_request(struct tb_conn *c, enum tb_proto proto, int keepalive)
{
    return proto == TB_GOPHER ? parse_gopher(c) : parse_http(c, keepalive);
}

int tb_open_path(struct tb_conn *c, const struct tb_opts *o, size_t *size)
{
    const char *p = c->path[0] ? c->path : "gophermap";
    struct stat st;
    int fd = openat(o->root_fd, p, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0)
        goto notfound;
    if (S_ISDIR(st.st_mode)) {
        int f = openat(fd, "gophermap", O_RDONLY | O_CLOEXEC);
        close(fd);
        fd = f;
        if (fd < 0 || fstat(fd, &st) < 0)
            goto notfound;
    }
    if (!S_ISREG(st.st_mode))
        goto notfound;
    if ((size_t)st.st_size > TB_FILE_MAX) {
        close(fd);
        c->status = 413;
        return -1;
    }
    *size = (size_t)st.st_size;
    return fd;
notfound:
    if (fd >= 0)
        close(fd);
    c->status = 404;
    return -1;
}

int tb_read_body(struct tb_conn *c, int fd, char *dst, size_t size)
{
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, dst + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(fd);
            c->status = 500;
            return -1;
        }
        got += (size_t)n;
    }
    close(fd);
    return 0;
}

size_t tb_header(const struct tb_conn *c, enum tb_proto proto, size_t size, char *dst)
{
    if (proto == TB_GOPHER)
        return 0;
    int n = snprintf(dst, TB_HDR_MAX,
                     "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                     "Content-Length: %zu\r\nConnection: %s\r\n\r\n",
                     size, c->keep ? "keep-alive" : "close");
    return (size_t)n;
}

char *tb_conn_buf(struct tb_conn *c, size_t n)
{
    if (n > c->buf_cap) {
        char *b = realloc(c->buf, n);
        if (!b)
            return NULL;
        c->buf = b;
        c->buf_cap = n;
    }
    return c->buf;
}

void tb_error_response(struct tb_conn *c, enum tb_proto proto)
{
    const char *text, *reason;
    switch (c->status) {
    case 400: text = "Bad selector"; reason = "Bad Request"; break;
    case 405: text = "Method not allowed"; reason = "Method Not Allowed"; break;
    case 413: text = "File too large"; reason = "Payload Too Large"; break;
    case 414: text = "Selector too long"; reason = "URI Too Long"; break;
    case 431: text = "Request too long"; reason = "Request Header Fields Too Large"; break;
    case 500: text = "Server error"; reason = "Internal Server Error"; break;
    default: c->status = 404; text = "Not found"; reason = "Not Found"; break;
    }
    char *b = tb_conn_buf(c, 512);
    if (!b) {
        c->out = (char *)"";
        c->out_len = c->out_off = c->hdr_len = 0;
        return;
    }
    int n;
    if (proto == TB_GOPHER) {
        n = snprintf(b, 512, "3%s\tfake\t(NULL)\t0\r\n.\r\n", text);
        c->hdr_len = 0;
    } else {
        size_t body = strlen(reason) + 1;
        n = snprintf(b, 512,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Connection: %s\r\n\r\n",
                     c->status, reason, body, c->keep ? "keep-alive" : "close");
        c->hdr_len = (size_t)n;
        n += snprintf(b + n, 512 - (size_t)n, "%s\n", reason);
    }
    c->out = b;
    c->out_len = (size_t)n;
    c->out_off = 0;
}

int tb_build_with(struct tb_conn *c, const struct tb_opts *o,
                  char *(*alloc)(struct tb_conn *c, size_t need))
{
    size_t size;
    int fd = tb_open_path(c, o, &size);
    if (fd < 0)
        return -1;
    char *b = alloc(c, size + TB_HDR_MAX);
    if (!b) {
        close(fd);
        c->status = 500;
        return -1;
    }
    size_t h = tb_header(c, c->proto, size, b);
    if (tb_read_body(c, fd, b + h, size) < 0)
        return -1;
    c->out = b;
    c->out_len = h + size;
    c->hdr_len = h;
    c->status = 200;
    return 0;
}

int tb_build_default(struct tb_conn *c, const struct tb_opts *o)
{
    return tb_build_with(c, o, tb_conn_buf);
}

int tb_write_out(struct tb_conn *c, const struct tb_server *srv)
{
    while (c->out_off < c->out_len) {
        size_t n = srv->chunk ? srv->chunk(c) : c->out_len - c->out_off;
        ssize_t w = write(c->fd, c->out + c->out_off, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -1;
        }
        c->out_off += (size_t)w;
    }
    return 1;
}

int tb_serve(struct tb_conn *c, const struct tb_server *srv, const struct tb_opts *o)
{
    if (c->state == TB_READING) {
        int r = tb_parse_request(c, c->proto, srv->keepalive);
        if (r == 0)
            return 0;
        if (r < 0) {
            c->keep = 0;
            tb_error_response(c, c->proto);
        } else if (c->status != 200) {
            tb_error_response(c, c->proto);
        } else {
            int b = srv->build ? srv->build(c, o) : tb_build_default(c, o);
            if (b < 0)
                tb_error_response(c, c->proto);
        }
        c->out_off = 0;
        c->state = TB_WRITING;
    }
    return tb_write_out(c, srv);
}

void tb_next_request(struct tb_conn *c)
{
    memmove(c->in, c->in + c->req_len, c->in_len - c->req_len);
    c->in_len -= c->req_len;
    c->req_len = 0;
    c->state = TB_READING;
}

static size_t access_line(const struct tb_conn *c, char *dst, size_t cap)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char date[40];
    strftime(date, sizeof(date), "%d/%b/%Y:%H:%M:%S +0000", &tm);
    size_t body = c->out_len - c->hdr_len;
    int n = snprintf(dst, cap, "%s - - [%s] \"GET /%s\" %d %zu\n", c->peer[0] ? c->peer : "-",
                     date, c->path, c->status, body);
    if (n < 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

int tb_open_log(const struct tb_opts *o)
{
    int fd = open(o->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        tb_die(o->name, "cannot open --log '%s' for appending; give a writable file", o->log);
    return fd;
}

void tb_log_access(const struct tb_conn *c, const struct tb_opts *o, int fd)
{
    char line[TB_IN_MAX + 256];
    size_t n = access_line(c, line, sizeof(line));
    if (write(fd, line, n) < 0)
        tb_die(o->name, "write %s failed; check the --log file's disk", o->log);
}

/* Serves what c->in holds, as far as it goes without blocking. 1 = closed. */
static int progress(struct tb_conn *c, const struct tb_server *srv, const struct tb_opts *o)
{
    for (;;) {
        int r = tb_serve(c, srv, o);
        if (r < 0) {
            tb_conn_close(c);
            return 1;
        }
        if (r == 0) {
            if (c->state == TB_WRITING && !c->want_out)
                tb_interest(c, 1);
            return 0;
        }
        if (srv->done && srv->done(c, o) == TB_LINGER) {
            c->state = TB_LINGER;
            return 0;
        }
        if (!c->keep) {
            tb_conn_close(c);
            return 1;
        }
        tb_next_request(c);
        if (c->want_out)
            tb_interest(c, 0);
        if (c->in_len == 0)
            return 0;
    }
}

void tb_on_event(struct tb_conn *c, uint32_t events, const struct tb_server *srv,
                 const struct tb_opts *o)
{
    if (c->state == TB_LINGER) {
        if (srv->linger(c, events))
            tb_conn_close(c);
        return;
    }
    if (c->state == TB_READING) {
        ssize_t n = read(c->fd, c->in + c->in_len, TB_IN_MAX - c->in_len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            tb_conn_close(c);
            return;
        }
        c->in_len += (size_t)n;
    }
    progress(c, srv, o);
}

int tb_run(int argc, char **argv, const struct tb_server *srv)
{
    struct tb_opts o;
    tb_parse_args(argc, argv, srv->name, &o);
    if (srv->setup && srv->setup(&o) != 0)
        exit(1);
    int lfd = tb_listen(&o);
    epfd = epoll_listen(&o, lfd, (epoll_data_t){.fd = lfd});

    struct epoll_event evs[64];
    for (;;) {
        int n = wait_events(epfd, evs, 64, o.name);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == lfd) {
                /* One accept per wakeup keeps the syscall count per connection exact. */
                struct tb_conn *c = tb_accept(lfd, srv->proto);
                if (c) {
                    struct epoll_event cev = {.events = EPOLLIN, .data.fd = c->fd};
                    epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &cev);
                }
                continue;
            }
            struct tb_conn *c = conns[fd];
            if (c && c->fd == fd)
                tb_on_event(c, evs[i].events, srv, &o);
        }
    }
}

void tb_serve_conns(const struct tb_opts *o, enum tb_proto proto, int *epfd,
                    int (*accepted)(struct tb_conn *c),
                    void (*ready)(struct tb_conn *c, const struct tb_opts *o))
{
    int lfd = tb_listen(o);
    *epfd = epoll_listen(o, lfd, (epoll_data_t){.ptr = NULL}); /* NULL: the listener */

    struct epoll_event evs[64];
    for (;;) {
        int n = wait_events(*epfd, evs, 64, o->name);
        for (int i = 0; i < n; i++) {
            struct tb_conn *c = evs[i].data.ptr;
            if (c) {
                ready(c, o);
                continue;
            }
            /* The listener: one accept per wakeup, as tb_run does. */
            c = tb_accept(lfd, proto);
            if (!c || (accepted && accepted(c)))
                continue;
            struct epoll_event cev = {.events = EPOLLIN, .data.ptr = c};
            epoll_ctl(*epfd, EPOLL_CTL_ADD, c->fd, &cev);
        }
    }
}

int tb_udp_bind(const struct tb_opts *o)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        tb_die(o->name, "cannot bind UDP 127.0.0.1:%d: %s; pick another --port", o->port,
               strerror(errno));
    fprintf(stderr, "%s: listening on UDP 127.0.0.1:%d\n", o->name, o->port);
    return fd;
}

/* Sends the next window of s, and closes s after the last one or when the client is gone
 * (ECONNREFUSED from an earlier ICMP port unreachable). */
static void send_window(struct tb_stream *s)
{
    static const char payload[TB_UDP_DGRAM];
    for (int i = 0; i < TB_UDP_WINDOW && s->left > 0; i++) {
        size_t n = s->left < TB_UDP_DGRAM ? (size_t)s->left : TB_UDP_DGRAM;
        if (send(s->fd, payload, n, 0) < 0) {
            s->left = 0;
            break;
        }
        s->left -= n;
    }
    if (s->left == 0) {
        close(s->fd);
        s->fd = -1;
    }
}

int tb_stream_open(int bfd, struct tb_stream *s)
{
    char req[32];
    struct sockaddr_in peer;
    s->fd = -1;
    socklen_t len = sizeof(peer);
    ssize_t n = recvfrom(bfd, req, sizeof(req) - 1, 0, (struct sockaddr *)&peer, &len);
    if (n <= 0)
        return -1;
    req[n] = 0;
    char *end;
    unsigned long long bytes = strtoull(req, &end, 10);
    if (end == req || bytes == 0)
        return -1;
    s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s->fd < 0)
        return -1;
    if (connect(s->fd, (struct sockaddr *)&peer, len) < 0) {
        close(s->fd);
        s->fd = -1;
        return -1;
    }
    s->left = bytes;
    send_window(s);
    return 0;
}

void tb_stream_ack(struct tb_stream *s)
{
    char ack;
    if (recv(s->fd, &ack, 1, 0) < 0)
        s->left = 0;
    send_window(s);
}
