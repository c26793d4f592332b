/* Memory churn per request: a fresh 256 KiB response buffer is malloc'ed, cleared and freed for
 * every request. Above the mmap threshold (fixed at 128 KiB so glibc cannot raise it after the
 * first free), each request pays mmap + munmap and page faults on fresh zeroed pages.
 * Twin: alloc-reuse (same clearing, one buffer kept per connection slot). */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define RESP_BUF (256u << 10)

static int fix_threshold(const struct tb_opts *o)
{
    (void)o;
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    return 0;
}

static char *fresh_buffer(struct tb_conn *c, size_t need)
{
    free(c->priv); /* left over if the previous client on this slot vanished mid-response */
    size_t cap = need > RESP_BUF ? need : RESP_BUF;
    char *b = malloc(cap);
    if (b)
        memset(b, 0, cap);
    c->priv = b;
    return b;
}

static int build_in_fresh_buffer(struct tb_conn *c, const struct tb_opts *o)
{
    return tb_build_with(c, o, fresh_buffer);
}

static int release(struct tb_conn *c, const struct tb_opts *o)
{
    (void)o;
    free(c->priv);
    c->priv = NULL;
    return TB_FINISH;
}

static const struct tb_server srv = {
    .name = "alloc-churn",
    .proto = TB_GOPHER,
    .setup = fix_threshold,
    .build = build_in_fresh_buffer,
    .done = release,
};

int main(int argc, char **argv)
{
    return tb_run(argc, argv, &srv);
}
