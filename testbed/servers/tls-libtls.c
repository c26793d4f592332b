/* Gemini over libtls (Debian's libretls: libtls on top of OpenSSL 3), written the way small
 * Gemini servers are: blocking, one connection at a time, tls_accept_socket, tls_read until the
 * request line, tls_write the response, tls_close. Its plaintext moves through libssl's
 * SSL_read and SSL_write under tls_read and tls_write, which is what reqcost hooks. The request
 * and response are tls.c's (same paths, same statuses). */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <tls.h>
#include <unistd.h>

#include "common.h"
#include "tls.h"

#define NAME "tls-libtls"

/* Reads the request line and writes the response; a peer gone drops the connection only. */
static void serve(struct tls *t, struct tb_conn *c, const struct tb_opts *o)
{
    c->in_len = 0;
    for (;;) {
        ssize_t r = tls_read(t, c->in + c->in_len, TB_IN_MAX - c->in_len);
        if (r == TLS_WANT_POLLIN || r == TLS_WANT_POLLOUT)
            continue;
        if (r <= 0)
            return;
        c->in_len += (size_t)r;
        if (tls_gemini_request(c, o))
            break;
    }
    while (c->out_off < c->out_len) {
        ssize_t w = tls_write(t, c->out + c->out_off, c->out_len - c->out_off);
        if (w == TLS_WANT_POLLIN || w == TLS_WANT_POLLOUT)
            continue;
        if (w <= 0)
            return;
        c->out_off += (size_t)w;
    }
}

int main(int argc, char **argv)
{
    struct tb_opts o;
    tb_parse_args(argc, argv, NAME, &o);
    char *cert, *key;
    size_t cert_len, key_len;
    tls_self_signed_pem(NAME, &cert, &cert_len, &key, &key_len);
    struct tls_config *cfg = tls_config_new();
    struct tls *server = tls_server();
    if (!cfg || !server || tls_config_set_keypair_mem(cfg, (const uint8_t *)cert, cert_len,
                                                      (const uint8_t *)key, key_len) ||
        tls_configure(server, cfg))
        tb_die(NAME, "configuring libtls: %s",
               server && tls_error(server) ? tls_error(server) : tls_config_error(cfg));
    int lfd = tb_listen(&o);
    tb_announce(&o);
    static struct tb_conn c;
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            continue;
        struct tls *t;
        if (tls_accept_socket(server, &t, fd) == 0) {
            serve(t, &c, &o);
            /* close_notify, without waiting for the client's: the response is complete. */
            while (tls_close(t) == TLS_WANT_POLLOUT)
                ;
            tls_free(t);
        }
        close(fd);
    }
}
