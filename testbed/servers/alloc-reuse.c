/* The twin of alloc-churn: the same 256 KiB response buffer cleared for every request, but
 * allocated once per connection slot and reused, so requests cause no mmap/munmap or page faults. */
#include <string.h>

#include "common.h"

#define RESP_BUF (256u << 10)

static char *kept_buffer(struct tb_conn *c, size_t need)
{
    size_t cap = need > RESP_BUF ? need : RESP_BUF;
    char *b = tb_conn_buf(c, cap);
    if (b)
        memset(b, 0, cap);
    return b;
}

static int build_in_kept_buffer(struct tb_conn *c, const struct tb_opts *o)
{
    return tb_build_with(c, o, kept_buffer);
}

static const struct tb_server srv = {.name = "alloc-reuse", .proto = TB_GOPHER, .build = build_in_kept_buffer};

int main(int argc, char **argv)
{
    return tb_run(argc, argv, &srv);
}
