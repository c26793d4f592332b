/* HTTP/1.1 keep-alive with Nagle's algorithm on (no TCP_NODELAY) and the response written as two
 * small writes, header then body: write-write-read. The body waits in the kernel until the header
 * is acknowledged, and the client delays that ACK, so each response stalls for the delayed-ACK
 * timeout. Twin: keepalive (one write). */
#include "common.h"

static size_t header_then_body(const struct tb_conn *c)
{
    if (c->out_off < c->hdr_len)
        return c->hdr_len - c->out_off;
    return c->out_len - c->out_off;
}

static const struct tb_server srv = {
    .name = "nagle",
    .proto = TB_HTTP,
    .keepalive = 1,
    .chunk = header_then_body,
};

int main(int argc, char **argv)
{
    return tb_run(argc, argv, &srv);
}
