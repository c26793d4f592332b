// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
/*
 * Kernel-side accounting of one process tree, aggregated in the kernel.
 *
 * Only tasks whose thread group has its bit set in `tracked` are counted. The loader seeds it
 * with the root pid and its descendants; sched_process_fork adds children, sched_process_exit
 * removes thread groups that died. A bitmap in .bss costs one load to test, where a hash map
 * costs a helper call: the test runs on every syscall and context switch of the machine. Every aggregate is a single-entry per-CPU array (see reqcost.h), so
 * the hot path is lock-free and memory is fixed at load time.
 *
 * Hot path: untracked tasks cost one load (their bit), on every hook; a tracked task finds its
 * in-flight record through task-local storage, created at its first syscall, switch or wakeup,
 * which also holds when it became runnable. Each program reads the clock once, and a syscall on
 * a followed connection looks the connection up once at entry and once at exit (its fd's kind
 * is known from that: only TCP sockets are followed).
 *
 * Per-request attribution (when the loader sets `attribute`): each thread serves the TCP
 * connection of its latest socket call until a readiness wait, a write on it, or its close. Its
 * on-CPU time is charged interval by interval (syscall entries and exits, switches out and in)
 * to that connection's current request. Time while it serves none is held (see `hold`) and
 * charged to the connection its next socket call serves, or to the unattributed counter when
 * the thread exits or the probes pause first.
 *
 * One family of programs per file: the tree's own accounting (syscalls, scheduler, faults,
 * forks and exits) and the sample tagger here, each other family in its header (TLS libraries,
 * Go's crypto/tls, HTTP/3, Lua, the `--load` client). What they share is in tree.bpf.h (the
 * tree and its counters), conns.bpf.h (the connections) and attribution.bpf.h (CPU charged to
 * requests). Every header includes what it uses, so none depends on where it is included.
 */
#include "tree.bpf.h"
#include "conns.bpf.h"
#include "attribution.bpf.h"
#include "held_tags.bpf.h"
#include "h2.bpf.h"
#include "wire.bpf.h"
#include "tls.bpf.h"
#include "gotls.bpf.h"
#include "client.bpf.h"
#include "lua.bpf.h"
#include "http3.bpf.h"

/*
 * The kernel lets only a GPL-compatible program call bpf_probe_read_kernel,
 * bpf_probe_read_user, bpf_get_current_task_btf and the bpf_rdonly_cast kfunc: the program is
 * MIT or GPL-2.0, as every SPDX line of src/bpf says, which the kernel reads as "Dual MIT/GPL".
 */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

/*
 * The loader indexes `misc`, `req_ctr` and `own` (its entries and fields) by these enums as the skeleton generates them
 * (src/layout.rs), so that no slot is numbered twice. clang writes into BTF only the types a
 * global, a function or a map refers to (an enum whose constants alone are used is left out), and
 * libbpf-cargo generates Rust for what BTF holds: this global, never read or written, refers to
 * them. It takes 20 bytes of .bss: a global of no entries would take none, but the kernel
 * rejects the object's BTF then (a data section's variable may not be of size 0).
 */
struct loader_enums {
	enum misc_slot misc;
	enum req_counter req;
	enum own_prog prog;
	enum own_field own;
	enum own_tree tree;
} loader_enums;

/*
 * A socket read or write on an upstream call returned `bytes` > 0: the call's turns, which are
 * no requests of this hop. Its bytes are not the client's, so they stay out of the request
 * served; its CPU and syscalls are that request's (attribute_enter).
 */
static __always_inline void call_io(struct conn *conn, __u32 op, __u64 bytes, __u64 now)
{
	struct req_stats *r = &conn->ev.req;

	/* This end is the client: a call is its writes, then the answer it reads; a write after
	 * an answer begins the next call. */
	if (op < OP_WRITE) {
		if (r->bytes_in == 0)
			r->first_in_ns = now;
		r->bytes_in += bytes;
		r->last_ns = now;
		return;
	}
	if (r->bytes_in) {
		emit(conn, false);
		__builtin_memset(r, 0, sizeof(*r));
		conn->ev.seq += 1;
	}
	r->bytes_out += bytes;
	r->last_out_ns = now;
	r->last_ns = now;
}

/*
 * A socket read or write returned `bytes` > 0: the request's bytes, boundaries and head (on a
 * TLS connection, the plaintext draws them: tls.bpf.h). `conn` is the fd's connection when the
 * caller has it already.
 */
static __always_inline void request_io(struct task_ctx *c, struct task_struct *task,
				       struct conn *conn, __u32 id, __u32 op, __u64 bytes,
				       __u64 now)
{
	struct req_stats *r;
	bool first;

	if (!conn)
		conn = conn_of(task->tgid, c->fd);
	if (!conn) {
		/* A connection opened before the probes: followed from now. */
		conn = conn_open(task, c->fd, CONN_SEEN);
		if (!conn)
			return;
		if (!conn->ev.upstream_call) {
			c->conn_fd1 = c->fd + 1;
			settle(c, conn);
		} else if (op >= OP_WRITE) {
			/* Linked after the bytes left: the other end may have read them already, and
			 * its request then stays unlinked (docs/stack.md). */
			link_write(conn, serving(c, task->tgid), c->conn_fd1 - 1);
		}
	}
	if (conn->ev.upstream_call) {
		call_io(conn, op, bytes, now);
		return;
	}
	r = &conn->ev.req;
	if (tls_socket_io(conn, op, bytes, now))
		return;
	if (op >= OP_WRITE) {
		r->bytes_out += bytes;
		r->last_out_ns = now;
		conn->wrote = 1;
		hold(c);
		return;
	}
	if (conn->wrote)
		next_request(c, conn, id);
	first = r->bytes_in == 0;
	if (first) {
		r->first_in_ns = now;
		link_read(conn);
	}
	if (op == OP_READ || op == OP_RECVFROM) {
		head_read(r, c->arg, bytes);
		if (first)
			tls_sniff(conn);
	}
	h2c_read(conn, op, c->arg, bytes);
	wire_read(conn, op, c->arg, bytes, first);
	r->bytes_in += bytes;
}

/* Calls on a connection's fd: they serve it. ioctl and epoll_ctl on a connection are work for
 * it too: seeds/002's loop polls the send queue (SIOCOUTQ) and re-arms epoll between waits
 * until a slow client drains. */
static __always_inline bool conn_class(__u8 cls)
{
	return (cls >= CLS_IO && cls < CLS_IO + NR_IO_OPS) || cls == CLS_CLOSE ||
	       cls == CLS_SHUTDOWN || cls == CLS_IOCTL || cls == CLS_EPOLL_CTL;
}

/*
 * A call on an upstream call's fd enters. A write after the call's answer (or on a call made
 * for no request yet) begins the next call, made for the request the thread serves. Every
 * other call on it (the rest of its writes, its answer, its close) works for the request it
 * was made for, which is served again: an event loop handles one connection's upstream after
 * another's request with no wait between, and a thread serving none (back from a wait) has
 * nothing else to charge. A write links the call's other end to the front request
 * (stack.bpf.h). Returns the request served.
 */
static __always_inline struct conn *call_served(struct task_ctx *c, __u32 tgid, struct conn *call,
						struct conn *served, __u8 cls)
{
	bool write = cls >= CLS_IO + OP_WRITE && cls < CLS_IO + NR_IO_OPS;
	struct conn *owner;

	if (cls == CLS_CLOSE)
		c->arg = call->ev.conn_id;
	if (write && served && (call->ev.req.bytes_in || !call->owner.conn_id)) {
		link_write(call, served, c->conn_fd1 - 1);
		return served;
	}
	if (call->owner.conn_id) {
		owner = conn_of(tgid, call->owner_fd);
		if (owner && owner != served &&
		    (owner->ev.conn_id == call->owner.conn_id ||
		     (owner->ev.hop && owner->ev.caused_by.conn_id == call->owner.conn_id))) {
			served = owner;
			c->conn_fd1 = call->owner_fd + 1;
			settle(c, served);
		}
	}
	if (write)
		link_write(call, NULL, 0);
	return served;
}

/*
 * At a syscall's entry: charges the time since the last boundary, switches the connection
 * served (a call on a connection's fd serves it, a readiness wait ends it), counts the call.
 * The connection served is looked up once; the call's fd's only when it is another one.
 */
static __always_inline void attribute_enter(struct task_ctx *c, __u32 tgid, __u32 id, __u8 cls,
					    __u64 now, __u64 wall)
{
	struct conn *served = serving(c, tgid), *conn = served;

	charge(c, served, now);
	if (served)
		served->ev.req.last_ns = wall;
	/* A task first seen in a syscall was already on CPU: its time starts now. */
	if (!c->run_ns)
		c->run_ns = now;
	c->sys_cpu_ns = 0;
	if (conn_class(cls)) {
		/* A close's fd kind is known already: a file's close needs no lookup. */
		struct conn *fd_conn = c->conn_fd1 == c->fd + 1 ? served
				       : cls == CLS_CLOSE && c->kind != KIND_SOCKET
					       ? NULL
					       : conn_of(tgid, c->fd);

		/* Looked up again only under another fd: a file's write misses once, not twice. */
		if (!fd_conn && cls >= CLS_IO && cls < CLS_IO + NR_IO_OPS) {
			__s32 alias = std_alias(tgid, c->fd);

			if (alias != c->fd) {
				c->fd = alias;
				fd_conn = conn_of(tgid, alias);
			}
		}
		if (fd_conn && cls == CLS_CLOSE && !fd_conn->ev.upstream_call &&
		    copy_of_other(fd_conn, c->fd)) {
			struct conn_key key = { .tgid = tgid, .fd = c->fd };

			if (fd_conn == served) {
				hold(c);
				conn = NULL;
			}
			rank_spilled(fd_conn);
			bpf_map_delete_elem(&conns, &key);
			fd_conn = NULL;
		}
		if (fd_conn && fd_conn->ev.upstream_call) {
			c->fd_conn = 1;
			conn = call_served(c, tgid, fd_conn, served, cls);
		} else if (fd_conn) {
			conn = fd_conn;
			c->conn_fd1 = c->fd + 1;
			c->fd_conn = 1;
			settle(c, conn);
			/* Which connection a close ends, checked at its return. */
			if (cls == CLS_CLOSE)
				c->arg = conn->ev.conn_id;
		}
	} else if (cls >= CLS_WAIT && cls < CLS_WAIT + NR_WAIT_OPS) {
		hold(c);
		conn = NULL;
	}
	if (conn) {
		count_syscall(conn, id);
		conn->last_before = conn->ev.req.last_ns;
		conn->ev.req.last_ns = wall;
	}
}

/*
 * The arguments are loaded from `regs` directly (a BTF pointer in a tp_btf program): the CO-RE
 * variants would cost a helper call each.
 */
static __always_inline void enter_class(struct task_struct *task, struct pt_regs *regs,
					struct task_ctx *c, __u8 cls, bool front)
{
	if (cls >= CLS_IO && cls < CLS_IO + NR_IO_OPS) {
		__u32 op = cls - CLS_IO;
		/* Its kind is resolved on return, when the call has just brought the fd table,
		 * file and inode into the cache: before, they are often cold. */
		c->fd = op == OP_SPLICE ? (int)PT_REGS_PARM3_SYSCALL(regs)
					: (int)PT_REGS_PARM1_SYSCALL(regs);
		/* The mmsg vector, or the buffer whose first bytes name the request. */
		if (op == OP_RECVMMSG || op == OP_SENDMMSG || op == OP_READ || op == OP_RECVFROM)
			c->arg = PT_REGS_PARM2_SYSCALL(regs);
		return;
	}
	if (cls >= CLS_WAIT && cls < CLS_WAIT + NR_WAIT_OPS) {
		__u32 op = cls - CLS_WAIT;
		if (op <= WAIT_EPOLL_PWAIT2)
			c->arg = (int)PT_REGS_PARM3_SYSCALL(regs);
		else if (op <= WAIT_PPOLL)
			c->arg = (unsigned int)PT_REGS_PARM2_SYSCALL(regs);
		else
			c->arg = (int)PT_REGS_PARM1_SYSCALL(regs);
		return;
	}
	switch (cls) {
	case CLS_CLOSE:
		c->fd = (int)PT_REGS_PARM1_SYSCALL(regs);
		c->kind = fd_kind(task, c->fd);
		return;
	case CLS_CONNECT:
		c->fd = (int)PT_REGS_PARM1_SYSCALL(regs);
		return;
	case CLS_SHUTDOWN:
		c->fd = (int)PT_REGS_PARM1_SYSCALL(regs);
		return;
	case CLS_MMAP:
	case CLS_MUNMAP:
		c->arg = PT_REGS_PARM2_SYSCALL(regs);
		return;
	case CLS_IOCTL:
	case CLS_EPOLL_CTL:
		/* The fd it works on: a connection's, the request served. */
		c->fd = (int)PT_REGS_PARM1_SYSCALL(regs);
		if (cls == CLS_EPOLL_CTL)
			c->fd = (int)PT_REGS_PARM3_SYSCALL(regs);
		break;
	}
	/* The rest counts in the target's aggregates only. */
	if (!front)
		return;
	switch (cls) {
	case CLS_IOCTL: {
		__u32 cmd = (unsigned int)PT_REGS_PARM2_SYSCALL(regs);
		__u64 one = 1, *n = bpf_map_lookup_elem(&ioctls, &cmd);
		if (n)
			*n += 1;
		else if (bpf_map_update_elem(&ioctls, &cmd, &one, BPF_NOEXIST))
			bump(CTR_LOST_IOCTLS, 1);
		return;
	}
	case CLS_OPEN:
	case CLS_OPENAT: {
		/* Read at entry: the path names what the server opens per request (a resolver's
		 * files, a log, the served file), which the fd kind alone cannot tell. */
		struct open_key key = {};
		const char *path = (const char *)(cls == CLS_OPEN ? PT_REGS_PARM1_SYSCALL(regs)
								  : PT_REGS_PARM2_SYSCALL(regs));
		__u64 one = 1, *n;

		if (bpf_probe_read_user_str(key.path, sizeof(key.path), path) <= 0)
			return;
		n = bpf_map_lookup_elem(&opens, &key);
		if (n)
			*n += 1;
		else if (bpf_map_update_elem(&opens, &key, &one, BPF_NOEXIST))
			bump(CTR_LOST_OPENS, 1);
		return;
	}
	case CLS_EPOLL_CTL: {
		int op = (int)PT_REGS_PARM2_SYSCALL(regs);
		/* EPOLL_CTL_ADD 1, DEL 2, MOD 3 */
		bump(op == 1 ? CTR_EPOLL_ADD : op == 2 ? CTR_EPOLL_DEL
				   : op == 3 ? CTR_EPOLL_MOD : CTR_EPOLL_OTHER, 1);
		return;
	}
	}
}

/* A tracked call `id` (in range) enters; `front`: of hop 0, counted in the aggregates. */
static __always_inline void enter_tracked(struct task_struct *task, struct pt_regs *regs, __u32 id,
					  bool front)
{
	struct task_ctx *c;
	__u64 now;
	__u8 cls;

	c = bpf_task_storage_get(&task_ctx, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!c) {
		bump(CTR_LOST_TASKS, 1);
		return;
	}
	fresh(c);
	c->nr = id + 1;
	c->kind = KIND_OTHER;
	c->fd_conn = 0;
	c->arg = 0;
	cls = sys_class[id];
	if (cls != CLS_NONE)
		enter_class(task, regs, c, cls, front);
	/* Taken last so that the time of the argument reads above is not charged to the call. */
	now = bpf_ktime_get_ns();
	c->enter_ns = now;
	if (attribute)
		attribute_enter(c, task->tgid, id, cls, cpu_clock(now), now);
}

/* A call whose id no slot of `sys` holds: nothing in flight. */
static __always_inline void enter_untallied(struct task_struct *task)
{
	struct task_ctx *c;

	c = bpf_task_storage_get(&task_ctx, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (c) {
		fresh(c);
		c->nr = 0;
	}
}

/*
 * A return probe's trap enters (NR_URETPROBE): counted and timed as the probes' cost, in no
 * syscall figure of the server's and no request's. The server's time so far is charged now;
 * with run_ns 0 no charge happens inside the trap (the return program's own included) until
 * its exit restarts the clock, so the trap's CPU is charged to no request (unattributed).
 */
static __always_inline void uretprobe_enter(struct task_struct *task)
{
	struct task_ctx *c;
	__u64 now;

	bump(CTR_URETPROBE_CALLS, 1);
	c = bpf_task_storage_get(&task_ctx, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!c) {
		bump(CTR_LOST_TASKS, 1);
		return;
	}
	fresh(c);
	now = cpu_clock(bpf_ktime_get_ns());
	if (attribute) {
		charge(c, serving(c, task->tgid), now);
		c->run_ns = 0;
	}
	c->nr = NR_URETPROBE + 1;
	c->enter_ns = now;
}

/*
 * The trap's exit: its span counted apart, and the server's clock restarted after it. Unless
 * the task switched out inside (its time since the switch in was charged as any other), the
 * span is CPU of the tree that no request is charged with: unattributed.
 */
static __always_inline void uretprobe_exit(struct task_ctx *c, __u64 now)
{
	__u64 at = cpu_clock(now), span = at > c->enter_ns ? at - c->enter_ns : 0, *ctr;

	if (span)
		bump(CTR_URETPROBE_NS, span);
	if (!attribute)
		return;
	if (!c->run_ns && span) {
		c->run_charged_ns += span;
		ctr = req_counters(ctx_hop(c));
		if (ctr)
			ctr[RCTR_UNATTRIBUTED_NS] += span;
	}
	c->run_ns = at;
}

/* Every hook rejects a task outside the tree first, with one load and no helper call. */
SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 t, count = 0, *s;
	__u32 hop;
	bool front;

	if (!tracked_tgid(task->tgid)) {
		client_enter(task, id);
		return 0;
	}
	/* Its run is counted in `own`, as no count in `sys` covers it. */
	if (id == NR_URETPROBE) {
		t = own_start(PROG_SYS_ENTER);
		uretprobe_enter(task);
		own_end(PROG_SYS_ENTER, t);
		return 0;
	}
	if (id < 0 || id >= MAX_SYSCALLS) {
		t = own_start(PROG_SYS_ENTER);
		enter_untallied(task);
		own_end(PROG_SYS_ENTER, t);
		return 0;
	}
	/* An upstream hop's calls are counted in its own `sys` set; one whose hop is not known,
	 * in none. */
	front = !upstream_tgid(task->tgid);
	hop = front ? 0 : tgid_hop(task->tgid);
	s = front || hop ? bpf_map_lookup_elem(&sys, &hop) : NULL;
	if (s) {
		s[id * SYS_FIELDS + SYS_COUNT] += 1;
		if (front)
			count = s[id * SYS_FIELDS + SYS_COUNT];
	}
	/* One call in OWN_SAMPLE of each syscall is timed: its count in `sys` counts the run. An
	 * upstream hop's runs are counted and timed in `own`'s upstream entry, as their exits'
	 * (own_sys_end), so that the probes' cost covers every followed tree. */
	if (count)
		t = count % OWN_SAMPLE == 0 ? bpf_ktime_get_ns() : 0;
	else
		t = own_start(PROG_SYS_ENTER);
	enter_tracked(task, regs, id, front);
	own_end(PROG_SYS_ENTER, t);
	return 0;
}

/*
 * A call's return is about to change what its thread serves: its time so far is charged first.
 * Returns the connection served. A return that changes nothing leaves its time to the next
 * charge (the next call's entry, a switch out), which finds the same connection and charges
 * the same total.
 */
static __always_inline struct conn *exit_charge(struct task_ctx *c, __u32 tgid, __u64 now)
{
	struct conn *served = serving(c, tgid);

	charge(c, served, cpu_clock(now));
	return served;
}

static __always_inline void exit_io(struct task_ctx *c, struct task_struct *task, __u32 id,
				    __u32 op, long ret, __u64 now, bool front)
{
	__u32 zero = 0;
	/* 64-bit indexes: clang 14 re-derives 32-bit ones from copies the verifier cannot bound. */
	__u64 slot, bucket, bytes = ret, messages = 1, *tot, *hist;
	__u8 kind;

	/* Only TCP sockets are followed as connections: their fds need no walk to the inode. */
	if (attribute && c->fd_conn) {
		kind = KIND_SOCKET;
	} else {
		/* Even the send and recv calls, which succeed on sockets only, resolve the fd: a
		 * UDP socket is counted apart. */
		kind = fd_kind(task, c->fd);
	}
	if (op == OP_RECVMMSG || op == OP_SENDMMSG) {
		bytes = mmsg_bytes(c->arg, ret);
		messages = ret;
	}
	if (attribute && kind == KIND_SOCKET && bytes > 0) {
		struct conn *served = exit_charge(c, task->tgid, now);

		request_io(c, task, c->fd_conn && c->conn_fd1 == c->fd + 1 ? served : NULL, id, op,
			   bytes, now);
	}
	if (!front)
		return;
	slot = op * NR_KINDS + (kind < NR_KINDS ? kind : KIND_OTHER);
	/* The compiler knows these bounds hold and would drop the checks the verifier needs. */
	barrier_var(slot);
	if (slot >= IO_SLOTS)
		return;
	tot = bpf_map_lookup_elem(&io_tot, &zero);
	if (tot) {
		tot[slot] += 1;
		tot[IO_SLOTS + slot] += bytes;
		tot[2 * IO_SLOTS + slot] += messages;
	}
	bucket = slot * NR_SIZE_BUCKETS + log2_bucket(bytes, NR_SIZE_BUCKETS);
	barrier_var(bucket);
	hist = bpf_map_lookup_elem(&io_hist, &zero);
	if (hist && bucket < IO_HIST_LEN)
		hist[bucket] += 1;
}

static __always_inline void exit_class(struct task_ctx *c, struct task_struct *task,
				       __u32 id, __u8 cls, long ret, __u64 now, bool front)
{
	if (cls >= CLS_IO && cls < CLS_IO + NR_IO_OPS) {
		exit_io(c, task, id, cls - CLS_IO, ret, now, front);
		return;
	}
	if (cls >= CLS_WAIT && cls < CLS_WAIT + NR_WAIT_OPS) {
		if (!front)
			return;
		__u64 *m = misc_counters();
		__u64 at = MISC_WAITS + (cls - CLS_WAIT) * WAIT_FIELDS;
		barrier_var(at);
		if (!m || at + 3 >= MISC_LEN)
			return;
		m[at] += 1;
		if (ret == 0)
			m[at + 1] += 1;
		m[at + 2] += ret;
		m[at + 3] += c->arg;
		return;
	}
	switch (cls) {
	case CLS_ACCEPT:
		if (front)
			bump(CTR_ACCEPTS, 1);
		if (attribute) {
			exit_charge(c, task->tgid, now);
			conn_accepted(ret);
		}
		return;
	case CLS_CLOSE:
		if (front)
			bump(CTR_CLOSES + (c->kind < NR_KINDS ? c->kind : KIND_OTHER), 1);
		if (attribute && c->kind == KIND_SOCKET) {
			exit_charge(c, task->tgid, now);
			close_served(c);
		}
		return;
	case CLS_MMAP:
		if (front)
			bump(CTR_MMAP_BYTES, c->arg);
		return;
	case CLS_MUNMAP:
		if (front)
			bump(CTR_MUNMAP_BYTES, c->arg);
		return;
	}
}

/* Returns the call's count in `sys`, or 0 for an exit that no entry's count covers (or one
 * of an upstream hop, `front` false, counted in its hop's `sys` set without its errnos). */
static __always_inline __u64 exit_tracked(struct task_struct *task, long ret, __u64 now,
					  bool front)
{
	struct task_ctx *c;
	__u32 zero = 0;
	__u64 *s, count;
	__u32 id;
	__u8 cls;

	c = bpf_task_storage_get(&task_ctx, task, 0, 0);
	if (!c)
		return 0;
	fresh(c);
	/* Unsigned, so that one comparison bounds it (nothing in flight wraps to the maximum). */
	id = c->nr - 1;
	if (id >= MAX_SYSCALLS)
		return 0;
	c->nr = 0;
	if (id == NR_URETPROBE) {
		uretprobe_exit(c, now);
		return 0;
	}
	cls = sys_class[id];
	/* EINPROGRESS: a non-blocking connect under way, the connection opened all the same. */
	if (attribute && cls == CLS_CONNECT && (ret == 0 || ret == -EINPROGRESS))
		conn_connected(c->fd, exit_charge(c, task->tgid, now), c->conn_fd1 - 1);
	if (!front) {
		bool failed = ret < 0 && ret >= -MAX_ERRNO && cls != CLS_NO_ERRORS;
		__u32 hop = ctx_hop(c);

		s = hop ? bpf_map_lookup_elem(&sys, &hop) : NULL;
		if (s) {
			s[id * SYS_FIELDS + SYS_TIME_NS] += now - c->enter_ns;
			s[id * SYS_FIELDS + SYS_ERRORS] += failed;
		}
		if (cls != CLS_NONE && !failed)
			exit_class(c, task, id, cls, ret, now, front);
		return 0;
	}
	s = bpf_map_lookup_elem(&sys, &zero);
	if (!s)
		return 0;
	s[id * SYS_FIELDS + SYS_TIME_NS] += now - c->enter_ns;
	/* The entry may have been counted on another CPU: this one's count stands in for it (if
	 * none, 1: never 0, which would count the run again, and never timed). */
	count = s[id * SYS_FIELDS + SYS_COUNT] ?: 1;
	if (ret < 0 && ret >= -MAX_ERRNO && cls != CLS_NO_ERRORS) {
		struct errno_key key = { .id = id, .err = -ret };
		__u64 one = 1, *n;

		s[id * SYS_FIELDS + SYS_ERRORS] += 1;
		n = bpf_map_lookup_elem(&errnos, &key);
		if (n)
			*n += 1;
		else if (bpf_map_update_elem(&errnos, &key, &one, BPF_NOEXIST))
			bump(CTR_LOST_ERRNOS, 1);
		return count;
	}
	if (cls != CLS_NONE)
		exit_class(c, task, id, cls, ret, now, front);
	return count;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 now;

	if (!tracked_tgid(task->tgid))
		return 0;
	now = bpf_ktime_get_ns();
	if (upstream_tgid(task->tgid)) {
		exit_tracked(task, ret, now, false);
		return 0;
	}
	own_sys_end(PROG_SYS_EXIT, exit_tracked(task, ret, now, true), now);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u64 ptgid = parent->tgid, ctgid = child->tgid, t;
	bool front;

	if (!tracked_tgid(ptgid)) {
		client_fork(parent, ctgid);
		return 0;
	}
	t = own_start(PROG_SCHED_PROCESS_FORK);
	front = !upstream_tgid(ptgid);
	if (ctgid == ptgid) {
		if (front)
			bump(CTR_THREADS, 1);
		else
			bump_hop(tgid_hop(ptgid), CTR_THREADS, 1);
	} else if (front) {
		set_tgid_bit(tracked, ctgid, true);
		bump(CTR_FORKS, 1);
	} else {
		/* An upstream's child is of its hop: a PostgreSQL backend, a gunicorn worker. */
		__u32 key = ctgid;
		__u8 hop = tgid_hop(ptgid);

		bpf_map_update_elem(&tgid_hops, &key, &hop, BPF_ANY);
		set_tgid_bit(upstream, ctgid, true);
		set_tgid_bit(tracked, ctgid, true);
		bump_hop(hop, CTR_FORKS, 1);
	}
	own_end(PROG_SCHED_PROCESS_FORK, t);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *p)
{
	__u64 tgid = p->tgid, t;

	if (!tracked_tgid(tgid)) {
		client_exit(p);
		return 0;
	}
	t = own_start(PROG_SCHED_PROCESS_EXIT);
	/* The last switch of the group's last thread comes after its bit is cleared below. */
	if (attribute) {
		struct task_ctx *c = bpf_task_storage_get(&task_ctx, p, 0, 0);
		if (c) {
			fresh(c);
			charge(c, serving(c, tgid), cpu_clock(bpf_ktime_get_ns()));
			release(c, RCTR_EXIT_NS);
			/* What it runs until its last switch out (freeing its memory and files) is its
			 * exit's: unattributed, never held (`exit_switch_out`). */
			c->exiting = 1;
			c->conn_fd1 = 0;
		}
	}
	/* The last thread of the group is leaving: forget the group, its pid may be reused. */
	if (BPF_CORE_READ(p, signal, live.counter) == 0) {
		if (attribute)
			conns_exited(tgid);
		if (upstream_tgid(tgid)) {
			__u32 key = tgid;

			bump_hop(tgid_hop(tgid), CTR_EXITS, 1);
			bpf_map_delete_elem(&tgid_hops, &key);
			set_tgid_bit(tracked, tgid, false);
			set_tgid_bit(upstream, tgid, false);
		} else {
			set_tgid_bit(tracked, tgid, false);
			bump(CTR_EXITS, 1);
		}
	}
	own_end(PROG_SCHED_PROCESS_EXIT, t);
	return 0;
}

/*
 * The bytes received by the connections on each port a followed tree listens on, summed as each
 * closes (its final bytes_received): with sock_diag's counts of the open ones, what the tree
 * received up to any moment (`attach --budget` reads it at every window's end, and scales the
 * probed windows' counts by it). Counted at the close itself: the kernel's destroy broadcast
 * carries the same figure, but from a work queue that a loaded machine held up to 2 s, past the
 * window the bytes came in. The loader enters each listening port at 0; other ports are not
 * counted. Never detached: it runs on a TCP state change (a few per connection), not per call.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);
	__type(value, __u64);
} closed_received SEC(".maps");

/*
 * The open connections on those ports, by socket, entered as each is established and removed as
 * it closes: `attach --budget` asks sock_diag for each one by its addresses (a hash probe in the
 * kernel) instead of dumping them all, which walks the kernel's whole table of connections
 * (262 144 buckets here: 2.2 ms of CPU a dump, three dumps a second). Those open before the
 * probes loaded are found by one dump at the start. Full once, it sets `open_conns_full` and the
 * reads dump from then on: a connection left out would be missed.
 */
struct conn_addr {
	__u8 family;
	__u8 pad;
	__be16 remote_port;
	__u16 local_port;
	__u16 pad2;
	__u32 local[4];
	__u32 remote[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 512);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct conn_addr);
} open_conns SEC(".maps");

__u64 open_conns_full;

static __always_inline void conn_opened(const struct sock *sk, __u16 port)
{
	struct conn_addr a = { .local_port = port };
	__u64 key = (__u64)sk;

	a.family = BPF_CORE_READ(sk, __sk_common.skc_family);
	a.remote_port = BPF_CORE_READ(sk, __sk_common.skc_dport);
	/* Sized by the field: the macros' sizeof(*dst) of an array would copy its first word. */
	if (a.family == AF_INET) {
		bpf_core_read(a.local, sizeof(sk->__sk_common.skc_rcv_saddr),
			      &sk->__sk_common.skc_rcv_saddr);
		bpf_core_read(a.remote, sizeof(sk->__sk_common.skc_daddr),
			      &sk->__sk_common.skc_daddr);
	} else if (a.family == AF_INET6) {
		bpf_core_read(a.local, sizeof(sk->__sk_common.skc_v6_rcv_saddr),
			      &sk->__sk_common.skc_v6_rcv_saddr);
		bpf_core_read(a.remote, sizeof(sk->__sk_common.skc_v6_daddr),
			      &sk->__sk_common.skc_v6_daddr);
	} else {
		return;
	}
	if (bpf_map_update_elem(&open_conns, &key, &a, BPF_ANY))
		open_conns_full = 1;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(tcp_closed, const struct sock *sk, int oldstate, int newstate)
{
	__u16 port;
	__u64 *sum;
	__u64 key = (__u64)sk;

	if (sk->sk_protocol != IPPROTO_TCP)
		return 0;
	if (newstate != TCP_ESTABLISHED && (newstate != TCP_CLOSE || oldstate == TCP_CLOSE))
		return 0;
	/* Not skc_num: unhashing the socket, just before a close, zeroed it. */
	port = bpf_ntohs(BPF_CORE_READ((struct inet_sock *)sk, inet_sport));
	sum = bpf_map_lookup_elem(&closed_received, &port);
	if (!sum)
		return 0;
	if (newstate == TCP_ESTABLISHED) {
		conn_opened(sk, port);
		return 0;
	}
	bpf_map_delete_elem(&open_conns, &key);
	__sync_fetch_and_add(sum, BPF_CORE_READ((struct tcp_sock *)sk, bytes_received));
	return 0;
}

/* The thread became runnable now: kept in its context, created if it has none yet. */
static __always_inline void runq_enter(struct task_struct *p)
{
	struct task_ctx *c =
		bpf_task_storage_get(&task_ctx, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!c) {
		bump(CTR_LOST_RUNQ, 1);
		return;
	}
	/* Known here, where the task is not the current one (`ctx_hop`). */
	if (!c->hop1)
		c->hop1 = tgid_hop(p->tgid) + 1;
	fresh(c);
	c->runq_ns = bpf_ktime_get_ns();
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	__u64 t;

	if (!tracked_tgid(p->tgid))
		return 0;
	t = own_start(PROG_SCHED_WAKEUP);
	if (!upstream_tgid(p->tgid))
		bump(CTR_WAKEUPS, 1);
	runq_enter(p);
	own_end(PROG_SCHED_WAKEUP, t);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	__u64 t;

	if (!tracked_tgid(p->tgid))
		return 0;
	t = own_start(PROG_SCHED_WAKEUP_NEW);
	runq_enter(p);
	own_end(PROG_SCHED_WAKEUP_NEW, t);
	return 0;
}

/*
 * The clock stops; the connection served stays (a thread blocked in read still serves it). A
 * preempted thread stays runnable: its wait on the run queue starts.
 */
static __always_inline void switch_out(struct task_struct *prev, bool runnable, __u64 now)
{
	struct task_ctx *c;

	if (!attribute && !runnable)
		return;
	c = bpf_task_storage_get(&task_ctx, prev, 0, runnable ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!c) {
		if (runnable)
			bump(CTR_LOST_RUNQ, 1);
		return;
	}
	fresh(c);
	if (runnable)
		c->runq_ns = now;
	if (attribute) {
		end_run(c, prev, serving(c, prev->tgid), cpu_clock(now));
	}
}

/*
 * A thread's last switch out (TASK_DEAD). The last thread of a group leaves the tree at its
 * sched_process_exit, before it frees its memory and files: that time, in the cgroup's figure
 * too, is charged here to its exit. Its switches since were not seen, so its clock (run_ns) may
 * have run off CPU: only the scheduler's figure since its latest switch seen is charged.
 * Looked up only for dying tasks, which few switches are.
 */
static __always_inline void exit_switch_out(struct task_struct *prev)
{
	struct task_ctx *c = bpf_task_storage_get(&task_ctx, prev, 0, 0);

	if (!c || !c->exiting)
		return;
	fresh(c);
	if (!c->sched_known)
		c->run_ns = 0;
	end_run(c, prev, NULL, 0);
}

/*
 * The clock starts, and the run-queue wait, if one was seen starting, ends. Created here too,
 * so that a thread that never makes a syscall is still charged.
 */
static __always_inline void switch_in(struct task_struct *next, __u64 now)
{
	struct task_ctx *c =
		bpf_task_storage_get(&task_ctx, next, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	__u64 delay, b, *m;

	if (!c)
		return;
	if (!c->hop1)
		c->hop1 = tgid_hop(next->tgid) + 1;
	fresh(c);
	if (attribute) {
		c->run_ns = cpu_clock(now);
		/* Counted from its latest switch out when one was seen (`end_run`). */
		if (!c->sched_known) {
			c->sched_ns = next->se.sum_exec_runtime;
			c->sched_known = 1;
		}
	}
	if (!c->runq_ns || now < c->runq_ns)
		return;
	delay = now - c->runq_ns;
	c->runq_ns = 0;
	if (c->hop1 > 1)
		return;
	m = misc_counters();
	if (!m)
		return;
	m[CTR_RUNQ_WAITS] += 1;
	m[CTR_RUNQ_NS] += delay;
	b = MISC_RUNQ_HIST + log2_bucket(delay / 1000, NR_RUNQ_BUCKETS);
	barrier_var(b);
	if (b < MISC_LEN)
		m[b] += 1;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	bool out = tracked_tgid(prev->tgid), in = tracked_tgid(next->tgid);
	/* The last thread of a group that left the tree at its exit. */
	bool dead = !out && attribute && (prev_state & TASK_DEAD);
	__u64 now, t;

	if (!out && !in && !dead)
		return 0;
	t = own_start(PROG_SCHED_SWITCH);
	now = bpf_ktime_get_ns();
	if (out) {
		/* As the scheduler counts nvcsw: blocking without preemption is voluntary. */
		bool voluntary = !preempt && prev_state != 0;

		if (!upstream_tgid(prev->tgid))
			bump(voluntary ? CTR_SWITCH_VOLUNTARY : CTR_SWITCH_INVOLUNTARY, 1);
		switch_out(prev, !voluntary, now);
	} else if (dead) {
		exit_switch_out(prev);
	}
	if (in)
		switch_in(next, now);
	own_end(PROG_SCHED_SWITCH, t);
	return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	__u64 t, tgid = bpf_get_current_task_btf()->tgid;

	if (!tracked_tgid(tgid))
		return 0;
	t = own_start(PROG_PAGE_FAULT_USER);
	/* An upstream hop's faults are its own, as its calls are. */
	if (upstream_tgid(tgid))
		bump_hop(tgid_hop(tgid), CTR_FAULTS_USER, 1);
	else
		bump(CTR_FAULTS_USER, 1);
	own_end(PROG_PAGE_FAULT_USER, t);
	return 0;
}

SEC("tp_btf/page_fault_kernel")
int BPF_PROG(page_fault_kernel, unsigned long address, struct pt_regs *regs,
	     unsigned long error_code)
{
	__u64 t;

	if (!current_tracked())
		return 0;
	t = own_start(PROG_PAGE_FAULT_KERNEL);
	bump(CTR_FAULTS_KERNEL, 1);
	own_end(PROG_PAGE_FAULT_KERNEL, t);
	return 0;
}

/*
 * What each thread served at its latest call-chain samples, so that a sample is charged to the
 * request its CPU time is charged to (same task context, same connection table). crates/profile
 * opens the sampling events; Probes::tag_samples attaches `tag_sample` to them. The program runs
 * in the overflow handler before the kernel stamps and writes the sample, so user space matches
 * a sample with the thread's latest entry stamped just before it (src/tags.rs).
 */
struct sample_tag {
	__u64 ns;
	__u64 conn_id; /* 0: the thread served no request */
	__u32 seq;
	__u32 tid;
};

struct sample_ring {
	__u64 next;
	struct sample_tag tags[SAMPLE_TAGS];
};

/* Per sampled thread: its latest sample tags, a ring the loader reads (src/tags.rs). */
struct {
	/* Threads that stop being sampled leave on their own. */
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_SAMPLED_THREADS);
	__type(key, __u32);
	__type(value, struct sample_ring);
} sample_tags SEC(".maps");

/* A new thread's ring before it enters `sample_tags` (too large for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sample_ring);
} sample_scratch SEC(".maps");

SEC("perf_event")
int tag_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tid = task->pid, tgid = task->tgid, zero = 0;
	struct sample_ring *ring;
	struct sample_tag *tag;
	struct task_ctx *c;
	struct conn *conn = NULL;

	lua_sample(tid, tgid);
	if (!attribute || paused || !tracked_tgid(tgid))
		return 1;
	ring = bpf_map_lookup_elem(&sample_tags, &tid);
	if (!ring) {
		/* Entries of another thread may sit in the scratch: user space checks `tid`. */
		ring = bpf_map_lookup_elem(&sample_scratch, &zero);
		if (!ring)
			return 1;
		ring->next = 0;
		bpf_map_update_elem(&sample_tags, &tid, ring, BPF_NOEXIST);
		ring = bpf_map_lookup_elem(&sample_tags, &tid);
		if (!ring)
			return 1;
	}
	c = bpf_task_storage_get(&task_ctx, task, 0, 0);
	if (c && c->window == window)
		conn = serving(c, tgid);
	tag = &ring->tags[ring->next & (SAMPLE_TAGS - 1)];
	tag->ns = bpf_ktime_get_ns();
	tag->conn_id = conn ? conn->ev.conn_id : held_tag(c, window);
	tag->seq = conn ? conn->ev.seq : 0;
	tag->tid = tid;
	ring->next++;
	return 1;
}
