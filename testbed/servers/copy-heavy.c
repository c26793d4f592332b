/* seeds/003 (memcpy on top of the profile): the response is assembled by copying it through
 * intermediate buffers, 32 times in all, in 8 KiB pieces (as a bucket brigade would), so memcpy
 * dominates user CPU under a clear chain: assemble_response -> copy_pass -> copy_chunk -> memcpy.
 * The buffers are kept per connection slot: no allocation per request. Twin: clean. */
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define COPIES 32
#define PIECE 8192

struct stages {
    char *buf[2];
    size_t cap;
};

/* Called through a pointer the compiler cannot see through: with the piece size bounded, GCC
 * would otherwise expand memcpy inline (rep movsq) and libc's memcpy would vanish from profiles. */
static void *(*volatile memcpy_fn)(void *, const void *, size_t) = memcpy;

/* Returns the end of what it wrote, so the call to memcpy cannot become a tail call and this
 * frame stays on the stack. */
__attribute__((noipa)) static char *copy_chunk(char *dst, const char *src, size_t n)
{
    return (char *)memcpy_fn(dst, src, n) + n;
}

__attribute__((noipa)) static void copy_pass(char *dst, const char *src, size_t len)
{
    for (size_t off = 0; off < len; off += PIECE)
        copy_chunk(dst + off, src + off, len - off < PIECE ? len - off : PIECE);
}

__attribute__((noipa)) static int assemble_response(struct tb_conn *c, const struct tb_opts *o)
{
    if (tb_build_default(c, o) < 0)
        return -1;
    struct stages *s = c->priv;
    if (!s && !(s = c->priv = calloc(1, sizeof(*s)))) {
        c->status = 500;
        return -1;
    }
    if (s->cap < c->out_len) {
        for (int i = 0; i < 2; i++) {
            char *b = realloc(s->buf[i], c->out_len);
            if (!b) {
                c->status = 500;
                return -1;
            }
            s->buf[i] = b;
        }
        s->cap = c->out_len;
    }
    const char *src = c->out;
    for (int i = 0; i < COPIES; i++) {
        copy_pass(s->buf[i & 1], src, c->out_len);
        src = s->buf[i & 1];
    }
    c->out = (char *)src;
    return 0;
}

static const struct tb_server srv = {.name = "copy-heavy", .proto = TB_GOPHER, .build = assemble_response};

int main(int argc, char **argv)
{
    return tb_run(argc, argv, &srv);
}
