/* The well-behaved gopher server every pathology is compared with: epoll, one read of the file,
 * one write(2) of the whole response when the socket buffer takes it, close. */
#include "common.h"

static const struct tb_server srv = {.name = "clean", .proto = TB_GOPHER};

int main(int argc, char **argv)
{
    return tb_run(argc, argv, &srv);
}
