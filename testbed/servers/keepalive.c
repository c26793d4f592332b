/* HTTP/1.1 on epoll, keep-alive honoured, header and body in one write(2): the twin of
 * conn-per-request, nagle and poll-scaling. */
#include "common.h"

static const struct tb_server srv = {.name = "keepalive", .proto = TB_HTTP, .keepalive = 1};

int main(int argc, char **argv)
{
    return tb_run(argc, argv, &srv);
}
