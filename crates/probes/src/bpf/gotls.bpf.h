/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * Go's crypto/tls: uprobes at the entries of (*Conn).Read and (*Conn).Write and at each of
 * their RET instructions (src/gotls.rs finds them, in stripped binaries too), plus the RETs of
 * (*Conn).serverHandshake. They are tls.bpf.h's calls: the *tls.Conn plays the SSL object, and
 * what moved is learnt the same way.
 *
 * Go's register ABI (1.17+ on amd64): the receiver in RAX, the buffer's pointer in RBX at the
 * entry, the count returned in RAX, the running goroutine (its g) in R14 all along. A call is
 * kept by goroutine, not by thread: a Read that waits for data parks its goroutine, which may
 * resume on another thread, and a goroutine preempted mid-call may too. As ecapture and
 * Kubeshark do, the goroutine is known by its g's address. So the connection is not the
 * thread's latest socket call's, as for OpenSSL, but the socket under the *tls.Conn, read at
 * the entry (go_conn_fd); the thread a call returns on is moved to it (go_settle).
 */
#ifndef GOTLS_BPF_H
#define GOTLS_BPF_H

#include "tls.bpf.h"

struct go_key {
	__u64 g;
	__u32 tgid;
	__u32 pad;
};

struct go_call {
	struct tls_call call;
	/* The call's connection is its *tls.Conn's socket (go_conn_fd), not a guess. */
	__u8 known;
};

/* Calls in flight by goroutine. LRU: a goroutine that dies inside a call never returns. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_CONNS);
	__type(key, struct go_key);
	__type(value, struct go_call);
} go_calls SEC(".maps");

/*
 * Maps the *tls.Conn at `tls_conn` to its socket's connection (tls_fds, which tls_call_enter
 * reads). Its net.Conn (an interface, first: its data word at 8) is a *net.TCPConn, whose
 * *netFD comes first, whose poll.FD has Sysfd at 16 (after the 16-byte fdMutex): layouts
 * unchanged from Go 1.9 to 1.26, the offsets Pixie and Inspektor Gadget read. Anything else
 * (another net.Conn) is caught, in all likelihood, by the fd not being one of the process's
 * connections; the thread's latest socket call then tells the connection at the return.
 */
static __always_inline bool go_conn_fd(__u64 tls_conn, __u32 tgid)
{
	struct tls_key key = { .ssl = tls_conn, .tgid = tgid };
	struct tls_fd fd = {};
	__u64 data, netfd;
	__s64 sysfd;
	struct conn *conn;

	if (bpf_probe_read_user(&data, sizeof(data), (void *)(tls_conn + 8)) ||
	    bpf_probe_read_user(&netfd, sizeof(netfd), (void *)data) ||
	    bpf_probe_read_user(&sysfd, sizeof(sysfd), (void *)(netfd + 16)))
		return false;
	if (sysfd < 0 || sysfd > 0x7fffffff)
		return false;
	conn = conn_of(tgid, (__s32)sysfd);
	if (!conn)
		return false;
	fd.conn_id = conn->ev.conn_id;
	fd.fd = (__s32)sysfd;
	return bpf_map_update_elem(&tls_fds, &key, &fd, BPF_ANY) == 0;
}

/*
 * Moves the thread the goroutine runs on now to the call's connection, its CPU so far charged
 * to what it served: after a migration the thread's latest socket call is another goroutine's.
 */
static __always_inline void go_settle(struct task_struct *task, struct go_call *gc)
{
	struct task_ctx *c = bpf_task_storage_get(&task_ctx, task, 0, 0);
	struct tls_call *call = &gc->call;
	struct conn *conn;

	if (!c || !gc->known || !call->active || !call->fd1 || c->conn_fd1 == call->fd1)
		return;
	conn = conn_of(task->tgid, call->fd1 - 1);
	if (!conn || conn->ev.conn_id != call->conn_id)
		return;
	fresh(c);
	charge(c, serving(c, task->tgid), cpu_clock(bpf_ktime_get_ns()));
	c->conn_fd1 = call->fd1;
	settle(c, conn);
}

static __always_inline int go_enter(struct pt_regs *ctx, __u8 write)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct go_key key = { .g = ctx->r14, .tgid = task->tgid };
	static const struct go_call none;
	struct go_call *gc;

	if (!attribute || !tracked_tgid(task->tgid))
		return 0;
	tls_entered(ctx);
	if (paused)
		return 0;
	/* A Read that grows its stack runs its entry again: the call starts over, as it should. */
	bpf_map_update_elem(&go_calls, &key, &none, BPF_ANY);
	gc = bpf_map_lookup_elem(&go_calls, &key);
	if (!gc)
		return 0;
	gc->known = go_conn_fd(ctx->ax, key.tgid);
	return tls_call_enter(task, &gc->call, (void *)ctx->ax, (void *)ctx->bx, NULL, write);
}

SEC("uprobe.multi")
int go_read_enter(struct pt_regs *ctx)
{
	return go_enter(ctx, 0);
}

SEC("uprobe.multi")
int go_write_enter(struct pt_regs *ctx)
{
	return go_enter(ctx, 1);
}

/* The call in flight of the goroutine running now (its key in `key`), the thread it returns
 * on moved to the call's connection. */
static __always_inline struct go_call *go_returning(struct pt_regs *ctx, struct task_struct *task,
						    struct go_key *key)
{
	struct go_call *gc;

	key->g = ctx->r14;
	key->tgid = task->tgid;
	key->pad = 0;
	if (!tracked_tgid(task->tgid))
		return NULL;
	gc = bpf_map_lookup_elem(&go_calls, key);
	if (gc)
		go_settle(task, gc);
	return gc;
}

/* At a RET of Read or Write: RAX holds n (the error, in RBX:RCX, is not needed: n > 0 moved). */
SEC("uprobe.multi")
int go_exit(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct go_key key;
	struct go_call *gc = go_returning(ctx, task, &key);

	if (!gc)
		return 0;
	tls_call_exit(task, &gc->call, (long)ctx->ax);
	bpf_map_delete_elem(&go_calls, &key);
	return 0;
}

/*
 * The server handshake, which a connection's first Read runs, returns: the CPU the Read spent
 * so far was the handshake's, so the call's CPU mark moves here, and the plaintext read next
 * takes only what follows (tls_plaintext cuts the handshake at the mark).
 */
SEC("uprobe.multi")
int go_handshake_exit(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct go_key key;
	struct go_call *gc = go_returning(ctx, task, &key);
	struct tls_call *call;
	struct task_ctx *c;
	struct conn *conn;

	if (!gc)
		return 0;
	call = &gc->call;
	c = bpf_task_storage_get(&task_ctx, task, 0, 0);
	if (!call->active || !c)
		return 0;
	fresh(c);
	conn = serving(c, key.tgid);
	if (!conn)
		return 0;
	charge(c, conn, cpu_clock(bpf_ktime_get_ns()));
	call->conn_id = conn->ev.conn_id;
	call->cpu_ns = conn->ev.req.cpu_ns;
	call->fd1 = c->conn_fd1;
	return 0;
}

#endif
