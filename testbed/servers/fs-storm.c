/* seeds/003 (ap_directory_walk): before serving, walk every directory from "/" down to the file,
 * lstat() each one (symlink checks) and try to open its per-directory config file (.htaccess),
 * which does not exist (ENOENT); then lstat() the file itself. Twin: clean. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

/* One directory of the walk: its lstat and its per-directory config file. */
static void check_directory(const char *dir, size_t len)
{
    char p[PATH_MAX + 16];
    struct stat st;
    memcpy(p, dir, len);
    p[len] = 0;
    lstat(len ? p : "/", &st);
    snprintf(p + len, sizeof(p) - len, "/.htaccess");
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        close(fd);
}

static void directory_walk(const struct tb_conn *c, const struct tb_opts *o)
{
    char full[PATH_MAX];
    struct stat st;
    int n = snprintf(full, sizeof(full), "%s/%s", o->root_real, c->path[0] ? c->path : "gophermap");
    if (n <= 0 || (size_t)n >= sizeof(full))
        return;
    /* Every '/' ends a directory: "" stands for "/", then "/work", "/work/main", ... */
    for (char *s = full; (s = strchr(s, '/')) != NULL; s++)
        check_directory(full, (size_t)(s - full));
    lstat(full, &st);
}

static int walk_then_serve(struct tb_conn *c, const struct tb_opts *o)
{
    directory_walk(c, o);
    return tb_build_default(c, o);
}

static const struct tb_server srv = {.name = "fs-storm", .proto = TB_GOPHER, .build = walk_then_serve};

int main(int argc, char **argv)
{
    return tb_run(argc, argv, &srv);
}
