#define _GNU_SOURCE
#include "tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common.h"

#define GEMINI_URL_MAX 1024 /* the spec's limit, CRLF excluded */

enum stage { HANDSHAKE, REQUEST, RESPONSE, CLOSING };

struct tls_conn {
    SSL *ssl;
    enum stage stage;
    int want_out; /* epoll interest is EPOLLOUT */
};

static int epfd = -1;

static void die_ssl(const char *name, const char *what)
{
    char err[256];
    ERR_error_string_n(ERR_get_error(), err, sizeof(err));
    tb_die(name, "%s: %s", what, err);
}

/* A self-signed certificate for 127.0.0.1, valid for a day, and its key. */
static X509 *self_signed(const char *name, int rsa_bits, EVP_PKEY **keyp)
{
    EVP_PKEY *key = rsa_bits ? EVP_RSA_gen((unsigned)rsa_bits) : EVP_EC_gen("P-256");
    if (!key)
        die_ssl(name, "generating the key");
    X509 *x = X509_new();
    if (!x)
        die_ssl(name, "X509_new");
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"127.0.0.1", -1, -1,
                               0);
    X509_set_issuer_name(x, n);
    if (!X509_sign(x, key, EVP_sha256()))
        die_ssl(name, "signing the certificate");
    *keyp = key;
    return x;
}

/* The PEM text a memory BIO holds, copied out. */
static char *bio_text(const char *name, BIO *b, size_t *len)
{
    char *data;
    long n = BIO_get_mem_data(b, &data);
    char *copy = malloc((size_t)n);
    if (n <= 0 || !copy)
        tb_die(name, "writing PEM");
    memcpy(copy, data, (size_t)n);
    *len = (size_t)n;
    BIO_free(b);
    return copy;
}

void tls_self_signed_pem(const char *name, char **cert, size_t *cert_len, char **key,
                         size_t *key_len)
{
    EVP_PKEY *k;
    X509 *x = self_signed(name, 0, &k);
    BIO *c = BIO_new(BIO_s_mem()), *p = BIO_new(BIO_s_mem());
    if (!c || !p || !PEM_write_bio_X509(c, x) ||
        !PEM_write_bio_PrivateKey(p, k, NULL, NULL, 0, NULL, NULL))
        die_ssl(name, "writing PEM");
    *cert = bio_text(name, c, cert_len);
    *key = bio_text(name, p, key_len);
    X509_free(x);
    EVP_PKEY_free(k);
}

static SSL_CTX *make_ctx(const struct tls_server *s)
{
    EVP_PKEY *key;
    X509 *x = self_signed(s->name, s->rsa_bits, &key);

    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        die_ssl(s->name, "SSL_CTX_new");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate(ctx, x) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1)
        die_ssl(s->name, "loading the certificate");
    X509_free(x);
    EVP_PKEY_free(key);
    if (s->resume) {
        /* One ticket per handshake: each resumption hands the client the next one. */
        SSL_CTX_set_num_tickets(ctx, 1);
    } else {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(ctx, 0);
    }
    return ctx;
}

static void interest(struct tb_conn *c, struct tls_conn *t, int out)
{
    if (t->want_out == out)
        return;
    t->want_out = out;
    struct epoll_event ev = {.events = out ? EPOLLOUT : EPOLLIN, .data.ptr = c};
    epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void finish(struct tb_conn *c, struct tls_conn *t)
{
    SSL_free(t->ssl);
    t->ssl = NULL;
    tb_conn_close(c);
}

static void respond_status(struct tb_conn *c, const char *line)
{
    size_t n = strlen(line);
    char *b = tb_conn_buf(c, n);
    if (b)
        memcpy(b, line, n);
    c->out = b ? b : (char *)"";
    c->out_len = b ? n : 0;
    c->out_off = 0;
}

/* Builds the response to the request line c->in[0..len) (CR/LF stripped). */
static void respond(struct tb_conn *c, const struct tb_opts *o, size_t len)
{
    static const char scheme[] = "gemini://";
    if (len < sizeof(scheme) - 1 || strncasecmp(c->in, scheme, sizeof(scheme) - 1)) {
        respond_status(c, "59 Bad request\r\n");
        return;
    }
    /* The path starts at the first '/' after the host; the query is ignored. */
    const char *host = c->in + sizeof(scheme) - 1, *end = c->in + len;
    const char *p = memchr(host, '/', (size_t)(end - host));
    if (!p)
        p = end;
    const char *q = memchr(p, '?', (size_t)(end - p));
    if (q)
        end = q;
    /* Reuse the gopher selector rules: leading '/' stripped, '..' and NUL refused, an empty
     * path is the gophermap. */
    size_t plen = (size_t)(end - p);
    memmove(c->in, p, plen);
    c->in[plen] = '\n';
    c->in_len = plen + 1;
    tb_parse_request(c, TB_GOPHER, 0);
    size_t size;
    int fd = c->status == 200 ? tb_open_path(c, o, &size) : -1;
    if (fd < 0) {
        respond_status(c, c->status == 404   ? "51 Not found\r\n"
                          : c->status == 413 ? "50 File too large\r\n"
                                             : "59 Bad request\r\n");
        return;
    }
    static const char ok[] = "20 text/gemini\r\n";
    size_t h = sizeof(ok) - 1;
    char *b = tb_conn_buf(c, h + size);
    if (!b) {
        close(fd);
        respond_status(c, "40 Server error\r\n");
        return;
    }
    memcpy(b, ok, h);
    if (tb_read_body(c, fd, b + h, size) < 0) {
        respond_status(c, "40 Server error\r\n");
        return;
    }
    c->out = b;
    c->out_len = h + size;
    c->out_off = 0;
}

int tls_gemini_request(struct tb_conn *c, const struct tb_opts *o)
{
    char *nl = memchr(c->in, '\n', c->in_len);
    if (nl) {
        size_t len = (size_t)(nl - c->in);
        if (len > 0 && c->in[len - 1] == '\r')
            len--;
        if (len > GEMINI_URL_MAX)
            respond_status(c, "59 Request too long\r\n");
        else
            respond(c, o, len);
        return 1;
    }
    if (c->in_len >= GEMINI_URL_MAX + 2) {
        respond_status(c, "59 Request too long\r\n");
        return 1;
    }
    return 0;
}

/* Runs the connection as far as it goes without blocking. */
static void step(struct tb_conn *c, struct tls_conn *t, const struct tb_opts *o)
{
    for (;;) {
        int r;
        switch (t->stage) {
        case HANDSHAKE:
            r = SSL_accept(t->ssl);
            if (r == 1) {
                t->stage = REQUEST;
                continue;
            }
            break;
        case REQUEST:
            r = SSL_read(t->ssl, c->in + c->in_len, (int)(GEMINI_URL_MAX + 2 - c->in_len));
            if (r > 0) {
                c->in_len += (size_t)r;
                if (tls_gemini_request(c, o))
                    t->stage = RESPONSE;
                continue;
            }
            break;
        case RESPONSE:
            if (c->out_off == c->out_len) {
                t->stage = CLOSING;
                continue;
            }
            r = SSL_write(t->ssl, c->out + c->out_off, (int)(c->out_len - c->out_off));
            if (r > 0) {
                c->out_off += (size_t)r;
                continue;
            }
            break;
        case CLOSING:
        default:
            /* close_notify, without waiting for the client's: the response is complete. */
            SSL_shutdown(t->ssl);
            finish(c, t);
            return;
        }
        switch (SSL_get_error(t->ssl, r)) {
        case SSL_ERROR_WANT_READ:
            interest(c, t, 0);
            return;
        case SSL_ERROR_WANT_WRITE:
            interest(c, t, 1);
            return;
        default: /* peer gone, failed handshake: drop this connection only */
            ERR_clear_error();
            finish(c, t);
            return;
        }
    }
}

static SSL_CTX *ctx;

/* A new connection gets its TLS state, reused with its slot; 0 = ready for the handshake. */
static int accepted(struct tb_conn *c)
{
    struct tls_conn *t = c->priv;
    if (!t && !(t = c->priv = calloc(1, sizeof(*t)))) {
        tb_conn_close(c);
        return -1;
    }
    t->ssl = SSL_new(ctx);
    if (!t->ssl || !SSL_set_fd(t->ssl, c->fd)) {
        finish(c, t);
        return -1;
    }
    t->stage = HANDSHAKE;
    t->want_out = 0;
    return 0;
}

static void ready(struct tb_conn *c, const struct tb_opts *o)
{
    step(c, c->priv, o);
}

int tls_gemini_run(int argc, char **argv, const struct tls_server *s)
{
    struct tb_opts o;
    tb_parse_args(argc, argv, s->name, &o);
    ctx = make_ctx(s);
    tb_serve_conns(&o, TB_GOPHER, &epfd, accepted, ready);
}
