/* HTTP/1.1 server that answers every request with Connection: close and closes, even when the
 * client asked to keep the connection: each request pays accept, epoll registration and close
 * (and the client a new handshake). Twin: keepalive. */
#include "common.h"

static const struct tb_server srv = {.name = "conn-per-request", .proto = TB_HTTP, .keepalive = 0};

int main(int argc, char **argv)
{
    return tb_run(argc, argv, &srv);
}
