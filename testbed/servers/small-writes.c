/* seeds/001: the response goes out unbuffered, one write(2) per line (up to and including its
 * '\n'), as a line-oriented output layer without buffering does. Same work as `clean` otherwise. */
#include <string.h>

#include "common.h"

static size_t next_line(const struct tb_conn *c)
{
    const char *p = c->out + c->out_off;
    size_t rest = c->out_len - c->out_off;
    const char *nl = memchr(p, '\n', rest);
    return nl ? (size_t)(nl - p) + 1 : rest;
}

static const struct tb_server srv = {.name = "small-writes", .proto = TB_GOPHER, .chunk = next_line};

int main(int argc, char **argv)
{
    return tb_run(argc, argv, &srv);
}
