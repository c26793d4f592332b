/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Go's crypto/tls: uprobes at the entries of (*Conn).Read and (*Conn).Write and at each of
 * their RET instructions (src/gotls.rs finds them, in stripped binaries too), plus the RETs of
 * (*Conn).serverHandshake. Part of reqcost.bpf.c, after tls.bpf.h, whose calls these are: the
 * *tls.Conn plays the SSL object, and what moved is learnt the same way.
 *
 * Go's register ABI (1.17+ on amd64): the receiver in RAX, the buffer's pointer in RBX at the
 * entry, the count returned in RAX, the running goroutine (its g) in R14 all along. A call is
 * kept by goroutine, not by thread: a Read that waits for data parks its goroutine, which may
 * resume on another thread (the socket read it then makes there tells the connection). As
 * ecapture and Kubeshark do, the goroutine is known by its g's address.
 */

struct go_key {
	__u64 g;
	__u32 tgid;
	__u32 pad;
};

/* Calls in flight by goroutine. LRU: a goroutine that dies inside a call never returns. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_CONNS);
	__type(key, struct go_key);
	__type(value, struct tls_call);
} go_calls SEC(".maps");

static __always_inline int go_enter(struct pt_regs *ctx, __u8 write)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct go_key key = { .g = ctx->r14, .tgid = task->tgid };
	static const struct tls_call none;
	struct tls_call *call;

	if (!attribute || !tracked_tgid(task->tgid))
		return 0;
	/* A Read that grows its stack runs its entry again: the call starts over, as it should. */
	bpf_map_update_elem(&go_calls, &key, &none, BPF_ANY);
	call = bpf_map_lookup_elem(&go_calls, &key);
	if (!call)
		return 0;
	return tls_call_enter(task, call, (void *)ctx->ax, (void *)ctx->bx, NULL, write);
}

SEC("uprobe")
int go_read_enter(struct pt_regs *ctx)
{
	return go_enter(ctx, 0);
}

SEC("uprobe")
int go_write_enter(struct pt_regs *ctx)
{
	return go_enter(ctx, 1);
}

/* At a RET of Read or Write: RAX holds n (the error, in RBX:RCX, is not needed: n > 0 moved). */
SEC("uprobe")
int go_exit(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct go_key key = { .g = ctx->r14, .tgid = task->tgid };
	struct tls_call *call;

	if (!tracked_tgid(task->tgid))
		return 0;
	call = bpf_map_lookup_elem(&go_calls, &key);
	if (!call)
		return 0;
	tls_call_exit(task, call, (long)ctx->ax);
	bpf_map_delete_elem(&go_calls, &key);
	return 0;
}

/*
 * The server handshake, which a connection's first Read runs, returns: the CPU the Read spent
 * so far was the handshake's, so the call's CPU mark moves here, and the plaintext read next
 * takes only what follows (tls_plaintext cuts the handshake at the mark).
 */
SEC("uprobe")
int go_handshake_exit(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct go_key key = { .g = ctx->r14, .tgid = task->tgid };
	struct tls_call *call;
	struct task_ctx *c;
	struct conn *conn;

	if (!tracked_tgid(task->tgid))
		return 0;
	call = bpf_map_lookup_elem(&go_calls, &key);
	c = bpf_task_storage_get(&task_ctx, task, 0, 0);
	if (!call || !call->active || !c)
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
