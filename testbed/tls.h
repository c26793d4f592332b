/* Gemini over TLS (OpenSSL) for the tls-* servers: an epoll loop of non-blocking TLS connections,
 * one request line (`gemini://HOST/PATH\r\n`) per connection, answered with `20 text/gemini\r\n`
 * and the file, then close_notify and close. A self-signed certificate for 127.0.0.1 / localhost
 * is generated at start. Paths map to files exactly as gopher selectors do (common.c). */
#ifndef TESTBED_TLS_H
#define TESTBED_TLS_H

#include <stddef.h>

struct tls_server {
    const char *name;
    int rsa_bits;  /* RSA key of this many bits; 0 = ECDSA P-256 */
    int resume;    /* 1 = session tickets (and the server session cache); 0 = every handshake full */
};

/* Parses the usual arguments (common.h), listens, serves forever. */
int tls_gemini_run(int argc, char **argv, const struct tls_server *s);

struct tb_conn;
struct tb_opts;

/* The Gemini request read so far is c->in[0..c->in_len): 1 when it is complete (or refused)
 * and the response is in c->out[0..c->out_len), 0 when more bytes are needed. */
int tls_gemini_request(struct tb_conn *c, const struct tb_opts *o);

/* A self-signed ECDSA certificate for 127.0.0.1 and its key, as PEM (malloc'd), for TLS
 * libraries configured from PEM (libtls). */
void tls_self_signed_pem(const char *name, char **cert, size_t *cert_len, char **key,
                         size_t *key_len);

#endif
