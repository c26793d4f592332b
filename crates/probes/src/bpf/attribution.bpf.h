/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * Per-request attribution: the charging of on-CPU time to the request a thread serves, the time
 * held between socket calls, and a connection's life from its first call to its close.
 */
#ifndef ATTRIBUTION_BPF_H
#define ATTRIBUTION_BPF_H

#include "conns.bpf.h"
#include "held_tags.bpf.h"
#include "stack.bpf.h"

/*
 * Event loops (asyncio, Node, Tornado, uvloop) read a request in one loop turn and run its
 * handler in a later one, after another readiness wait; between a write and the next wait they
 * run other connections' handlers. So the CPU of a thread that serves no connection (after a
 * wait, a write or a close) is held, and goes to the connection its next socket call serves
 * (`settle`): typically the handler's response write. Held time that never meets a socket call
 * (the thread exits, the probes pause) is unattributed (`release`); what is held at a phase's
 * end is in neither counter until then, so the level held now is counted too (RCTR_HELD_NS):
 * a window takes it at both ends. Threads that never served a connection (start-up,
 * accept threads, garbage collectors, pools) hold nothing: their time is unattributed at once,
 * or it would be missing from both counters for as long as they live.
 */
static __always_inline void hold(struct task_ctx *c)
{
	c->conn_fd1 = 0;
}

static __always_inline void settle(struct task_ctx *c, struct conn *conn)
{
	__u64 *ctr;

	c->served = 1;
	if (!c->held_ns)
		return;
	held_end(c, conn);
	conn->ev.req.cpu_ns += c->held_ns;
	ctr = req_counters(ctx_hop(c));
	if (ctr) {
		ctr[RCTR_ATTRIBUTED_NS] += c->held_ns;
		ctr[RCTR_HELD_NS] -= c->held_ns;
	}
	c->held_ns = 0;
}

/* Held time that no socket call will claim: unattributed, and counted under `why` as well. */
static __always_inline void release(struct task_ctx *c, __u32 why)
{
	__u64 *ctr;

	if (!c->held_ns)
		return;
	held_end(c, NULL);
	ctr = req_counters(ctx_hop(c));
	barrier_var(why);
	if (ctr && why < RCTR_LEN) {
		ctr[RCTR_HELD_NS] -= c->held_ns;
		ctr[RCTR_UNATTRIBUTED_NS] += c->held_ns;
		if (why != RCTR_UNATTRIBUTED_NS)
			ctr[why] += c->held_ns;
	}
	c->held_ns = 0;
}

/*
 * What the probes charged a task beyond the scheduler's count of it (se.sum_exec_runtime), as
 * of its latest event. The scheduler brings a running task's count up to date at ticks (4 ms at
 * HZ 250) and switches only, while the probes charge up to each event: a busy-wait spinning
 * through syscalls when a phase ends is in the counters up to its latest call and in the
 * server's CPU up to its latest tick, 0.25-3.8 ms less on attach windows of 29-46 ms. The
 * level over the tree's tasks is read with the counters, so that a phase tells that lag from
 * a charge gone wrong (`cpu_reading_skew_ns`). Signed, as a u64 that wraps.
 */
static __always_inline void set_lead(struct task_ctx *c, __u64 lead)
{
	__u64 *ctr = req_counters(ctx_hop(c));

	if (ctr)
		ctr[RCTR_LEAD_NS] += lead - c->lead_ns;
	c->lead_ns = lead;
}

/*
 * Forgets what a task's context held from before the probes were last paused: no syscall in
 * flight, off CPU (its time starts at its next event), serving no connection.
 */
static __always_inline void fresh(struct task_ctx *c)
{
	__u64 now_window = window;

	if (c->window == now_window)
		return;
	release(c, RCTR_UNATTRIBUTED_NS);
	c->window = now_window;
	c->nr = 0;
	c->run_ns = 0;
	c->sys_cpu_ns = 0;
	c->conn_fd1 = 0;
	c->runq_ns = 0;
	c->sched_known = 0;
	c->run_charged_ns = 0;
	set_lead(c, 0);
}

/* Charges `delta` ns of on-CPU time to the request served (`conn`, which is serving(c)), to
 * the time held, or to no request. */
static __always_inline void charge_ns(struct task_ctx *c, struct conn *conn, __u64 delta)
{
	__u64 *ctr;

	if (conn) {
		conn->ev.req.cpu_ns += delta;
		c->sys_cpu_ns += delta;
	}
	ctr = req_counters(ctx_hop(c));
	if (!conn && c->conn_fd1 == 0 && c->served && !c->exiting) {
		c->held_ns += delta;
		/* A window's figures take what is held at its two ends from this level. */
		if (ctr)
			ctr[RCTR_HELD_NS] += delta;
		return;
	}
	if (!ctr)
		return;
	ctr[conn ? RCTR_ATTRIBUTED_NS : RCTR_UNATTRIBUTED_NS] += delta;
	if (conn)
		return;
	if (c->exiting)
		ctr[RCTR_EXIT_NS] += delta;
	else if (!c->served)
		ctr[RCTR_UNSERVED_NS] += delta;
}

/*
 * Charges the on-CPU time since c->run_ns to the request served (`conn`, which is serving(c)),
 * or to no request.
 */
static __always_inline void charge(struct task_ctx *c, struct conn *conn, __u64 now)
{
	__u64 delta;

	/* Off CPU, or preempted since `now` was read (the switches charged that time). */
	if (!c->run_ns || now < c->run_ns)
		return;
	delta = now - c->run_ns;
	c->run_ns = now;
	c->run_charged_ns += delta;
	charge_ns(c, conn, delta);
	/* `c` is the current task's: every caller charges the task it runs in. */
	if (c->sched_known)
		set_lead(c, c->sched_ns + c->run_charged_ns -
				    bpf_get_current_task_btf()->se.sum_exec_runtime);
}

/*
 * A run of the task ends (it switches out): charged up to the CPU the scheduler counted for it
 * (se.sum_exec_runtime, what the cgroup and /proc add up), not to the switch tracepoint. The
 * scheduler's clock for a run starts where the run queue's clock was last read: at the wakeup
 * that preempts the task on CPU, some µs before the switch, and the preempted task's run ends
 * there; so the intervals between switch tracepoints are a few µs a run off, either way (a
 * gopher server of the testbed, one client: 3.7 µs a run short, 16 % of its CPU; under strace,
 * whose wakeups preempt it, 7 % over). The run's last interval is what the scheduler counted
 * since the task's latest switch seen less what its intervals since charged; what they charged
 * beyond it is taken off the task's next runs. That figure is kept from switch out to switch
 * out, not read again at the switch in: on this kernel a task is now and then switched in with
 * no sched_switch event at all (bpftrace's tracepoint misses the same ones: about one switch in
 * 5 000 under strace, in bursts, once 17 in a row over 3 ms), and a run counted from its
 * switch in lost everything before its first syscall (1.5 ms of one run, 1.9 ms of a 222 ms
 * phase). A run whose start was never seen (the task was on CPU when first seen, or when the
 * probes resumed) ends at `now`.
 */
static __always_inline void end_run(struct task_ctx *c, struct task_struct *p, struct conn *conn,
				    __u64 now)
{
	__u64 sum = p->se.sum_exec_runtime, ran;

	if (!c->sched_known) {
		charge(c, conn, now);
		c->run_charged_ns = 0;
	} else {
		ran = sum - c->sched_ns;
		if (ran > c->run_charged_ns) {
			charge_ns(c, conn, ran - c->run_charged_ns);
			c->run_charged_ns = 0;
		} else {
			c->run_charged_ns -= ran;
		}
	}
	c->sched_ns = sum;
	c->sched_known = 1;
	c->run_ns = 0;
	/* An exiting task's context is freed with it: its part would stay in the level for good. */
	set_lead(c, c->exiting ? 0 : c->run_charged_ns);
}

/*
 * A call of a syscall beyond the request's slots: counted in `spilled`. A call that finds it
 * full is counted on the request alone, and bounds what its ranking may have missed.
 */
static __noinline void spill_call(struct conn *conn, __u32 id)
{
	struct spill_key key = { .conn_id = conn->ev.conn_id, .id = id };
	__u32 one = 1, *n;
	__u64 *ctr;

	n = bpf_map_lookup_elem(&spilled, &key);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	if (id < MAX_SYSCALLS && !bpf_map_update_elem(&spilled, &key, &one, BPF_NOEXIST)) {
		conn->spilled_ids[(id / 64) & (MAX_SYSCALLS / 64 - 1)] |= 1ULL << (id % 64);
		conn->spilled_n += 1;
		return;
	}
	/* Another thread of the request may have made the entry in between. */
	n = bpf_map_lookup_elem(&spilled, &key);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	conn->unranked += 1;
	ctr = req_counters(conn->ev.hop);
	if (ctr)
		ctr[RCTR_UNRANKED] += 1;
}

static __always_inline void count_syscall(struct conn *conn, __u32 id)
{
	struct req_stats *r = &conn->ev.req;

	r->syscalls += 1;
	for (int i = 0; i < TOP_SYSCALLS; i++) {
		struct top_slot *slot = &r->top[i];

		if (slot->id_plus_one == id + 1) {
			slot->count += 1;
			return;
		}
		if (slot->id_plus_one == 0) {
			slot->id_plus_one = id + 1;
			slot->count = 1;
			return;
		}
	}
	spill_call(conn, id);
}

static __always_inline void uncount_syscall(struct conn *conn, __u32 id)
{
	struct req_stats *r = &conn->ev.req;
	struct spill_key key = { .conn_id = conn->ev.conn_id, .id = id };
	__u32 *n;

	r->syscalls -= 1;
	for (int i = 0; i < TOP_SYSCALLS; i++) {
		if (r->top[i].id_plus_one == id + 1) {
			r->top[i].count -= 1;
			return;
		}
	}
	n = bpf_map_lookup_elem(&spilled, &key);
	if (n && *n)
		__sync_fetch_and_add(n, -1);
	else if (conn->unranked)
		conn->unranked -= 1;
}

struct ranking {
	struct conn *conn;
	__u32 unlisted_max;
};

/*
 * Takes one of the request's spilled syscalls out of `spilled` into its slots, in place of
 * the least made of them when it was made more: what stays out bounds `unlisted_max`.
 */
static long rank_one(__u64 i, struct ranking *ctx)
{
	struct conn *conn = ctx->conn;
	struct spill_key key = { .conn_id = conn->ev.conn_id };
	struct top_slot *top = conn->ev.req.top;
	__u32 word = MAX_SYSCALLS / 64, least = 0, count, *n;
	__u64 bits = 0;

	for (__u32 w = 0; w < MAX_SYSCALLS / 64; w++) {
		if (conn->spilled_ids[w]) {
			word = w;
			bits = conn->spilled_ids[w];
			break;
		}
	}
	if (word >= MAX_SYSCALLS / 64)
		return 1;
	conn->spilled_ids[word] = bits & (bits - 1);
	key.id = word * 64 + log2_bucket(bits & -bits, 65) - 1;
	n = bpf_map_lookup_elem(&spilled, &key);
	if (!n)
		return 0;
	count = *n;
	bpf_map_delete_elem(&spilled, &key);
	for (__u32 s = 1; s < TOP_SYSCALLS; s++)
		if (top[s].count < top[least].count)
			least = s;
	barrier_var(least);
	if (least >= TOP_SYSCALLS)
		return 1;
	if (count > top[least].count) {
		__u32 out = top[least].count;

		top[least].id_plus_one = key.id + 1;
		top[least].count = count;
		count = out;
	}
	if (count > ctx->unlisted_max)
		ctx->unlisted_max = count;
	return 0;
}

/*
 * The request ends: its spilled syscalls are ranked into its slots and leave `spilled`, so
 * that its slots hold its TOP_SYSCALLS most made, and `unlisted_max` bounds the rest. A global
 * function, verified once: inlined at each request's end, the syscall programs grew past what
 * the verifier takes.
 */
__noinline int rank_spilled(struct conn *conn)
{
	struct ranking ctx = { .conn = conn };

	if (!conn)
		return 0;
	if (conn->spilled_n)
		bpf_loop(conn->spilled_n, rank_one, &ctx, 0);
	conn->ev.req.unlisted_max = ctx.unlisted_max + conn->unranked;
	__builtin_memset(conn->spilled_ids, 0, sizeof(conn->spilled_ids));
	conn->spilled_n = 0;
	conn->unranked = 0;
	return 0;
}

/*
 * Where the request's lifetime ends when the latest call on its fd brought the next request:
 * at the call before it, or at its last byte out (a write's return, after that call's entry).
 */
static __always_inline __u64 lifetime_end(struct conn *conn)
{
	__u64 before = conn->last_before, out = conn->ev.req.last_out_ns;

	return before > out ? before : out;
}

/* Hands the connection's request to user space, or counts it as dropped. */
static __always_inline void emit(struct conn *conn, bool closed)
{
	__u64 *ctr = req_counters(conn->ev.hop);
	struct req_event *e;

	conn->ev.closed = closed;
	conn->ev.req.end_ns = bpf_ktime_get_ns();
	rank_spilled(conn);
	e = bpf_ringbuf_reserve(&requests, sizeof(*e), 0);
	if (!e) {
		if (ctr)
			ctr[RCTR_DROPPED] += 1;
		return;
	}
	__builtin_memcpy(e, &conn->ev, sizeof(*e));
	/* Nobody sleeps on the buffer (the loader drains it when it reads), so no wakeup is
	 * signalled: that would cost an interrupt per request. */
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	/* An upstream call's turns are no requests: the events waited for are requests. */
	if (ctr && !conn->ev.upstream_call)
		ctr[RCTR_EVENTS] += 1;
}

/* Ends the connection on the fd; with `id` non-zero, only if it is still that connection. */
static __always_inline void conn_close(__u32 tgid, __s32 fd, __u64 id)
{
	struct conn_key key = { .tgid = tgid, .fd = fd };
	struct conn *conn = bpf_map_lookup_elem(&conns, &key);

	if (!conn || (id && conn->ev.conn_id != id))
		return;
	emit(conn, true);
	bpf_map_delete_elem(&conns, &key);
}

/*
 * Starts following the fd when it is a TCP connection or a Unix stream socket (not a
 * listener), come as `how` says (CONN_*): its peer and local port come from
 * file->private_data (a struct socket)->sk; a Unix socket has neither (docs/stack.md). Returns
 * its state, or NULL.
 */
static __always_inline struct conn *conn_open(struct task_struct *task, __s32 fd, __u8 how)
{
	struct conn_key key = { .tgid = task->tgid, .fd = fd };
	struct file *file = fd_file(task, fd);
	struct socket *sock;
	struct sock *sk;
	struct conn *conn;
	__u32 zero = 0;
	__u16 family;
	bool opened;

	if (!file || file_kind(file) != KIND_SOCKET)
		return NULL;
	sock = BPF_CORE_READ(file, private_data);
	sk = BPF_CORE_READ(sock, sk);
	if (!sk || BPF_CORE_READ(sk, __sk_common.skc_state) == TCP_LISTEN)
		return NULL;
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family == AF_UNIX) {
		if (BPF_CORE_READ(sk, sk_type) != SOCK_STREAM)
			return NULL;
	} else if (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP ||
		   (family != AF_INET && family != AF_INET6)) {
		return NULL;
	}
	conn = bpf_map_lookup_elem(&conn_scratch, &zero);
	if (!conn)
		return NULL;
	__builtin_memset(conn, 0, sizeof(*conn));
	conn->ev.conn_id = __sync_fetch_and_add(&next_conn_id, 1) + 1;
	conn->ev.pid = key.tgid;
	conn->ev.family = family;
	conn->ev.hop = tgid_hop(key.tgid);
	if (family != AF_UNIX) {
		conn->ev.peer_port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
		conn->ev.local_port = BPF_CORE_READ(sk, __sk_common.skc_num);
	}
	/* Sized by the field: the macros' sizeof(*dst) of a byte array would copy one byte. */
	if (family == AF_INET)
		bpf_core_read(conn->ev.peer_addr, sizeof(sk->__sk_common.skc_daddr),
			      &sk->__sk_common.skc_daddr);
	else if (family == AF_INET6)
		bpf_core_read(conn->ev.peer_addr, sizeof(sk->__sk_common.skc_v6_daddr),
			      &sk->__sk_common.skc_v6_daddr);
	opened = conn_keys(conn, sk, how == CONN_SEEN);
	conn->ev.upstream_call = how == CONN_CONNECTED || opened;
	if (conn->ev.upstream_call)
		dest_note(conn, sk);
	if (bpf_map_update_elem(&conns, &key, conn, BPF_ANY)) {
		__u64 *ctr = req_counters(conn->ev.hop);
		if (ctr)
			ctr[RCTR_CONN_OVERFLOW] += 1;
		return NULL;
	}
	return bpf_map_lookup_elem(&conns, &key);
}

/*
 * Servers run per connection (inetd, socat, systemd's Accept=yes, CGI) inherit it as fd 0 and 1:
 * both name one connection, kept under the lowest std fd it was first seen on. Returns that fd,
 * or `fd` itself.
 */
static __always_inline __s32 std_alias(__u32 tgid, __s32 fd)
{
	struct task_struct *task;
	struct file *file;

	if (fd < 1 || fd > 2)
		return fd;
	task = bpf_get_current_task_btf();
	file = fd_file(task, fd);
	for (__s32 i = 0; i < 2 && i < fd; i++)
		if (file && fd_file(task, i) == file && conn_of(tgid, i))
			return i;
	return fd;
}

struct file___old {
	atomic_long_t f_count;
} __attribute__((preserve_access_index));

/*
 * Another process holds the fd's file too: a launcher that accepted the connection and forked
 * the process that serves it (socat fork, inetd) is closing its copy.
 */
static __always_inline bool handed_over(__s32 fd)
{
	struct file *file = fd_file(bpf_get_current_task_btf(), fd);

	if (!file)
		return false;
	/* Linux 6.13+ counts references from 0 for one; before, f_count from 1. */
	if (bpf_core_field_exists(struct file, f_ref)) {
		__s64 refs = BPF_CORE_READ(file, f_ref.refcnt.counter);
		return refs > 0 && refs < (1LL << 62);
	}
	return BPF_CORE_READ((struct file___old *)file, f_count.counter) > 1;
}

/*
 * Sockets a process of the tree ended a request on while another process still held them, by
 * struct sock: a child that served its connection and closed before its parent closed the
 * parent's copy (Python's ForkingMixIn, whichever process the scheduler runs first). The copy
 * closed last then carried no request of its own (the accept, or a TLS handshake made before
 * the fork) and is none. LRU: an entry the last close did not take is outlived.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, __u8);
} served_socks SEC(".maps");

/* The struct sock of the current task's socket fd, as a key; 0 when there is none. */
static __always_inline __u64 fd_sock(__s32 fd)
{
	struct file *file = fd_file(bpf_get_current_task_btf(), fd);
	struct socket *sock;

	if (!file)
		return 0;
	sock = BPF_CORE_READ(file, private_data);
	return sock ? (__u64)BPF_CORE_READ(sock, sk) : 0;
}

/*
 * The closing process's copy of a connection another process serves: followed there, not
 * ended here. Its own request (plaintext read, a request already ended, or bytes in without
 * TLS) is always ended here, or a child done before its parent closed would lose it; a copy
 * without one is another's while another process holds the connection (a launcher that
 * accepted and forked, closing its copy), or once another process ended a request on it.
 */
static __always_inline bool copy_of_other(struct conn *conn, __s32 fd)
{
	bool tls = conn->ev.tls & TLS_SEEN;
	bool own = (conn->ev.tls & TLS_PLAIN) || conn->ev.seq > 0 ||
		   (!tls && conn->ev.req.bytes_in > 0);
	__u8 one = 1;
	__u64 sk;

	/* The socket is looked up only where it decides: most closes end a request of their own
	 * on a connection no other process holds. */
	if (!own) {
		sk = fd_sock(fd);
		if (sk && bpf_map_lookup_elem(&served_socks, &sk)) {
			bpf_map_delete_elem(&served_socks, &sk);
			return true;
		}
	}
	if (!handed_over(fd))
		return false;
	if (own) {
		sk = fd_sock(fd);
		if (sk)
			bpf_map_update_elem(&served_socks, &sk, &one, BPF_ANY);
	}
	return !own;
}

static long emit_exited(struct bpf_map *map, struct conn_key *key, struct conn *conn, __u32 *tgid)
{
	if (key->tgid == *tgid) {
		emit(conn, true);
		bpf_map_delete_elem(map, key);
	}
	return 0;
}

/* The thread group is gone: its connections end (a per-connection process exits, not closes). */
static __always_inline void conns_exited(__u32 tgid)
{
	bpf_for_each_map_elem(&conns, emit_exited, &tgid, 0);
}

/* The fd of an accepted connection may still be in the map if its close was not seen. */
static __always_inline void conn_accepted(__s32 fd)
{
	struct task_struct *task = bpf_get_current_task_btf();

	conn_close(task->tgid, fd, 0);
	conn_open(task, fd, CONN_ACCEPTED);
}

/*
 * The tree connected the fd (connect(2) returned 0, or EINPROGRESS): an upstream call, made
 * for the request the thread serves (`served`, on fd `served_fd`), if any: an event loop
 * connects while it serves the request, and writes the call later, serving none.
 */
static __always_inline void conn_connected(__s32 fd, struct conn *served, __s32 served_fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct conn *call;

	conn_close(task->tgid, fd, 0);
	call = conn_open(task, fd, CONN_CONNECTED);
	if (call && served) {
		call->owner = root_of(served);
		call->owner_fd = served_fd;
	}
}

/*
 * The fd is closed: its connection ends, and the thread serves none. Another thread may have
 * been given the same fd number by accept between the close and its return: that newer
 * connection is left alone (the accept ended the closed one).
 */
static __always_inline void close_served(struct task_ctx *c)
{
	if (c->arg)
		conn_close(bpf_get_current_task_btf()->tgid, c->fd, c->arg);
	if (c->conn_fd1 == c->fd + 1)
		hold(c);
}

/*
 * The read that brings the next request on a kept-alive connection was entered, and counted,
 * while the previous request was current: it moves to the new one with its CPU so far.
 */
static __always_inline void next_request(struct task_ctx *c, struct conn *conn, __u32 id)
{
	struct req_stats *r = &conn->ev.req;
	__u64 moved = c->sys_cpu_ns < r->cpu_ns ? c->sys_cpu_ns : r->cpu_ns;

	r->cpu_ns -= moved;
	uncount_syscall(conn, id);
	r->last_ns = lifetime_end(conn);
	emit(conn, false);
	__builtin_memset(r, 0, sizeof(*r));
	conn->ev.seq += 1;
	conn->wrote = 0;
	r->cpu_ns = moved;
	r->last_ns = c->enter_ns;
	count_syscall(conn, id);
}

#endif
