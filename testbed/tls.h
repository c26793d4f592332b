/* Gemini over TLS (OpenSSL) for the tls-* servers: an epoll loop of non-blocking TLS connections,
 * one request line (`gemini://HOST/PATH\r\n`) per connection, answered with `20 text/gemini\r\n`
 * and the file, then close_notify and close. A self-signed certificate for 127.0.0.1 / localhost
 * is generated at start. Paths map to files exactly as gopher selectors do (common.c). */
#ifndef TESTBED_TLS_H
#define TESTBED_TLS_H

struct tls_server {
    const char *name;
    int rsa_bits;  /* RSA key of this many bits; 0 = ECDSA P-256 */
    int resume;    /* 1 = session tickets (and the server session cache); 0 = every handshake full */
};

/* Parses the usual arguments (common.h), listens, serves forever. */
int tls_gemini_run(int argc, char **argv, const struct tls_server *s);

#endif
