/* seeds/002: after the response is written, wait for the kernel to have sent it all by polling
 * the send queue with ioctl(SIOCOUTQ) (twice per check, as the seed's Lua did) and flipping epoll
 * interest: EPOLLOUT to be woken, back to EPOLLIN on the wakeup since there is nothing to write,
 * check again, EPOLLOUT again... until the peer has acknowledged everything. A writable socket
 * wakes at once, so the loop spins for as long as the client takes to read: the slower the client,
 * the more CPU per request. Twin: clean. */
#include <linux/sockios.h>
#include <sys/ioctl.h>

#include "common.h"

static int sendqueue(int fd)
{
    int n = 0;
    if (ioctl(fd, SIOCOUTQ, &n) < 0)
        return -1;
    return n;
}

/* `while sock.sendqueue and sock.sendqueue > 0`: both operands are an ioctl. */
static int unsent(int fd)
{
    int known = sendqueue(fd);
    int n = sendqueue(fd);
    return known >= 0 && n > 0;
}

static int wait_sent(struct tb_conn *c, const struct tb_opts *o)
{
    (void)o;
    if (!unsent(c->fd))
        return TB_FINISH;
    tb_interest(c, 1);
    return TB_LINGER;
}

static int on_write_event(struct tb_conn *c, uint32_t events)
{
    (void)events;
    /* Nothing left to write: back to read interest, resume the waiting loop. */
    tb_interest(c, 0);
    if (!unsent(c->fd))
        return 1;
    tb_interest(c, 1);
    return 0;
}

static const struct tb_server srv = {
    .name = "busy-wait",
    .proto = TB_GOPHER,
    .done = wait_sent,
    .linger = on_write_event,
};

int main(int argc, char **argv)
{
    return tb_run(argc, argv, &srv);
}
