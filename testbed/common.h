/* Shared machinery for the testbed servers: argument parsing, the listening socket, request
 * parsing (gopher selector or HTTP/1.1 request), file loading, and one epoll event loop with
 * hooks. Each server in servers/ only supplies the hooks that make it differ from `clean`. */
#ifndef TESTBED_COMMON_H
#define TESTBED_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/types.h>

#define TB_IN_MAX 8192            /* request bytes buffered per connection */
#define TB_FILE_MAX (8u << 20)    /* larger files get an error response */

enum tb_proto { TB_GOPHER, TB_HTTP };

struct tb_opts {
    const char *name;   /* server name, for messages */
    int port;
    const char *root;   /* as given */
    char root_real[4096]; /* realpath of root */
    int root_fd;        /* O_PATH directory fd of root */
    const char *log;    /* --log FILE, or a default under /tmp */
    char log_default[256];
};

enum tb_state { TB_READING, TB_WRITING, TB_LINGER };

struct tb_conn {
    int fd;
    enum tb_proto proto;
    char peer[48];       /* client address, for access logs */
    enum tb_state state;
    int want_out;        /* interest currently EPOLLOUT (else EPOLLIN) */
    int keep;            /* keep the connection open after this response */
    int status;          /* HTTP status, or 0 / 3 for a gopher success / error item */
    char in[TB_IN_MAX];
    size_t in_len;
    size_t req_len;      /* bytes of `in` taken by the request being answered */
    char path[TB_IN_MAX]; /* selector or HTTP path, relative to root, NUL-terminated */
    char *out;           /* response bytes: out[0..out_len) */
    size_t out_len, out_off;
    size_t hdr_len;      /* HTTP: bytes of `out` that are the header */
    char *buf;           /* connection-owned buffer that `out` points into by default */
    size_t buf_cap;
    void *priv;          /* server-specific; stays with the slot across connections */
};

/* Return values of the done() hook. */
#define TB_FINISH 0   /* close, or wait for the next request on a kept-alive connection */
#define TB_LINGER 1   /* the server keeps the connection; linger() gets its events */

struct tb_server {
    const char *name;
    enum tb_proto proto;
    int keepalive;    /* HTTP: honour keep-alive; 0 answers every request with Connection: close */
    /* All hooks are optional; NULL means the behaviour of `clean`. */
    int (*setup)(const struct tb_opts *o);                 /* once, before listening; 0 = ok */
    int (*build)(struct tb_conn *c, const struct tb_opts *o); /* fill c->out/out_len */
    size_t (*chunk)(const struct tb_conn *c);              /* bytes for the next write(2) */
    int (*done)(struct tb_conn *c, const struct tb_opts *o); /* response fully written */
    int (*linger)(struct tb_conn *c, uint32_t events);     /* events while TB_LINGER; 1 = close */
};

/* Parses --port PORT --root DIR [--log FILE]; exits 2 with one clear line on bad input.
 * Also ignores SIGPIPE, makes SIGTERM/SIGINT exit 0, raises RLIMIT_NOFILE. */
void tb_parse_args(int argc, char **argv, const char *name, struct tb_opts *o);

/* Non-blocking listening socket on 127.0.0.1:port with SO_REUSEADDR; exits 1 on failure. */
int tb_listen(const struct tb_opts *o);

/* Prints "NAME: listening on 127.0.0.1:PORT, root DIR" to stderr. */
void tb_announce(const struct tb_opts *o);

void tb_die(const char *name, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));

/* Splits the request at the start of c->in: 1 = complete (c->path, c->keep, c->req_len set, or
 * c->status set to an error), 0 = need more bytes, -1 = too long / malformed (c->status set). */
int tb_parse_request(struct tb_conn *c, enum tb_proto proto, int keepalive);

/* Opens c->path under root: returns an fd of a regular file and its size, or -1 with c->status
 * set (404 / 400 / 413). A directory maps to its gophermap. */
int tb_open_path(struct tb_conn *c, const struct tb_opts *o, size_t *size);

/* Reads exactly `size` bytes of fd into dst (one read(2) for a regular file), then closes fd.
 * Returns 0, or -1 with c->status = 500. */
int tb_read_body(struct tb_conn *c, int fd, char *dst, size_t size);

/* Writes the protocol header for a success of `size` body bytes into dst (HTTP only; gopher has
 * none). Returns its length. dst must hold TB_HDR_MAX. */
#define TB_HDR_MAX 256
size_t tb_header(const struct tb_conn *c, enum tb_proto proto, size_t size, char *dst);

/* Puts the error response for c->status into c->out. */
void tb_error_response(struct tb_conn *c, enum tb_proto proto);

/* Grows the connection-owned buffer to at least n bytes (kept across requests). */
char *tb_conn_buf(struct tb_conn *c, size_t n);

/* The default build: header + file read into the connection buffer, one read(2). */
int tb_build_default(struct tb_conn *c, const struct tb_opts *o);
/* The same, with the buffer (at least `need` bytes) taken from alloc (NULL = out of memory). */
int tb_build_with(struct tb_conn *c, const struct tb_opts *o,
                  char *(*alloc)(struct tb_conn *c, size_t need));

/* Writes the rest of c->out, each write(2) sized by srv->chunk (or all the rest).
 * 1 = all written, 0 = socket full (EAGAIN), -1 = peer gone. */
int tb_write_out(struct tb_conn *c, const struct tb_server *srv);

/* The epoll event loop used by all servers except poll-scaling. Never returns. */
int tb_run(int argc, char **argv, const struct tb_server *srv);

/* The epoll loop of a server that drives its connections itself (byte-reads, the TLS servers),
 * with each connection's pointer as its event data. Listens, then for ever: accepted() (if
 * given) takes each new connection and returns 0 to have it registered for EPOLLIN, or nonzero
 * once it has closed it; ready() handles each event of a registered connection. Sets *epfd
 * before serving, for the server's own epoll_ctl(MOD) calls. Never returns. */
void tb_serve_conns(const struct tb_opts *o, enum tb_proto proto, int *epfd,
                    int (*accepted)(struct tb_conn *c),
                    void (*ready)(struct tb_conn *c, const struct tb_opts *o))
    __attribute__((noreturn));

/* Connection slots indexed by fd, reused with their buffers; NULL if fd is out of range. */
struct tb_conn *tb_conn_get(int fd, enum tb_proto proto);
/* Accepts one connection on the listening socket (non-blocking, peer recorded); NULL if none. */
struct tb_conn *tb_accept(int lfd, enum tb_proto proto);
/* Closes the connection; its slot and buffer stay for the next one on that fd. */
void tb_conn_close(struct tb_conn *c);
/* One epoll_ctl(MOD) to EPOLLOUT (out = 1) or EPOLLIN (out = 0), unconditionally; without an
 * epoll loop (select servers) it only records c->want_out. */
void tb_interest(struct tb_conn *c, int out);
/* Opens the --log file for appending, creating it; dies with one clear line if it cannot. */
int tb_open_log(const struct tb_opts *o);
/* Appends the common-log-format access line of the request just answered to fd, with one
 * write(2); dies if the write fails. */
void tb_log_access(const struct tb_conn *c, const struct tb_opts *o, int fd);
/* Handles one request once c->in holds bytes: parse, build, write.
 * Returns 1 = response done (caller closes or keeps), 0 = wait (more input or socket full),
 * -1 = close now. */
int tb_serve(struct tb_conn *c, const struct tb_server *srv, const struct tb_opts *o);
/* Handles one readiness event of a connection: reads if it is reading, serves, writes, and
 * closes it (c->fd becomes -1) when done or gone. Calls the server's hooks. */
void tb_on_event(struct tb_conn *c, uint32_t events, const struct tb_server *srv,
                 const struct tb_opts *o);
/* After a response on a kept-alive connection: drops the answered request from c->in. */
void tb_next_request(struct tb_conn *c);

/* UDP bulk streams (seeds/004; udp-bulk-select, udp-bulk-epoll, clients/udp-bulk-client): a
 * client asks for BYTES with one datagram ("BYTES" in decimal) to the server's bound port; the
 * server answers from a socket of its own, connect()ed to the client, in windows of
 * TB_UDP_WINDOW datagrams of TB_UDP_DGRAM bytes (the last one shorter), and sends each next
 * window when the client acknowledges the previous one with a 1-byte datagram, as QUIC's flow
 * control makes a sender wait for the receiver. 64 windows make a MiB. */
#define TB_UDP_DGRAM 1024
#define TB_UDP_WINDOW 16

struct tb_stream {
    int fd;          /* the connect()ed socket; -1 once the stream is done and closed */
    uint64_t left;   /* bytes still to send */
};

/* Binds the request socket on UDP 127.0.0.1:PORT (blocking, so each readiness is one recvfrom)
 * and announces "NAME: listening on UDP 127.0.0.1:PORT" on stderr; exits 1 if it cannot. */
int tb_udp_bind(const struct tb_opts *o);
/* Reads one request from the bound socket, opens its stream and sends the first window.
 * Returns 0, or -1 when the request was malformed or the socket could not be made. */
int tb_stream_open(int bfd, struct tb_stream *s);
/* Reads the client's acknowledgement and sends the next window; closes the stream (s->fd = -1)
 * after its last window or when the client is gone. */
void tb_stream_ack(struct tb_stream *s);

#endif
