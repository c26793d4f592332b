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
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "reqcost.h"

/*
 * The kernel lets only a GPL-compatible program call bpf_probe_read_kernel,
 * bpf_probe_read_user, bpf_get_current_task_btf and the bpf_rdonly_cast kfunc: the program is
 * MIT or GPL-2.0, as every SPDX line of src/bpf says, which the kernel reads as "Dual MIT/GPL".
 */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define S_IFREG 0100000
#define S_IFIFO 0010000
#define ANON_INODE_FS_MAGIC 0x09041934
#define MAX_ERRNO 4095
#define MAX_MMSG 64
#define AF_INET 2
#define AF_INET6 10
#define TCP_LISTEN 10

/* Filled by the loader: class of each syscall number (reqcost.h, CLS_*). */
const volatile __u8 sys_class[MAX_SYSCALLS] = {};
/* Set by the loader: per-request attribution on or off (its cost is measured apart). */
const volatile bool attribute = true;

/* Bit per thread group id; the loader sets bits through the memory-mapped .bss, atomically. */
__u64 tracked[TRACKED_WORDS];

/*
 * Bumped by the loader before it re-attaches the programs it detached (Probes::resume): what a
 * task's context says about a time before that is stale, since the events in between were not
 * seen (a syscall's exit, a switch out, the close of the connection it served).
 */
__u64 window;

/* Set by the loader while the probes are paused: nothing follows what threads serve then, so
 * samples get no tag (rather than "no request"), and the uprobes kept attached (tls.bpf.h) do
 * nothing. */
__u64 paused;

/*
 * The syscall in flight on a task, from sys_enter to sys_exit, and the connection it serves.
 * A new entry is all zeros, which must mean "nothing in flight, serving nothing".
 */
struct task_ctx {
	__u64 enter_ns;
	__u64 arg;        /* per class: size, nfds, mmsg vector, or read buffer */
	__u64 run_ns;     /* start of the on-CPU time not yet charged; 0 while off CPU */
	__u64 sys_cpu_ns; /* CPU charged to the connection since the syscall's entry */
	__u32 nr;         /* syscall number + 1 in flight; 0 when none */
	__s32 fd;         /* the fd of a read-like, write-like, close or shutdown call */
	__u32 conn_fd1;   /* fd + 1 of the connection served; 0 when none */
	__u8 kind;        /* fd kind of a close's fd */
	__u8 fd_conn;     /* the call's fd is a followed connection (seen at entry) */
	__u64 window;     /* the `window` this context was last used in */
	__u64 runq_ns;    /* when it became runnable (woken or preempted); 0 when not waiting */
	__u64 held_ns;    /* CPU while serving no connection, not yet charged (see `hold`) */
	__u8 served;      /* has served a connection: its time between calls is held */
	__u32 stretch;    /* held stretches ended so far: numbers the samples' (held_tags.bpf.h) */
	__u32 sampled;    /* stretch + 1 of the latest held stretch a sample was tagged with */
};

/* Each task's context (task_ctx), created at its first syscall, switch or wakeup. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctx SEC(".maps");

/* Per syscall number: SYS_FIELDS counters (calls, time, errors). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[MAX_SYSCALLS * SYS_FIELDS]);
} sys SEC(".maps");

/* The misc_slot counters, wait fields and run-queue histogram (reqcost.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[MISC_LEN]);
} misc SEC(".maps");

/* Calls, bytes and messages per (io op, fd kind) (reqcost.h, IO_TOT_LEN). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[IO_TOT_LEN]);
} io_tot SEC(".maps");

/* Size buckets per (io op, fd kind) (reqcost.h, IO_HIST_LEN). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[IO_HIST_LEN]);
} io_hist SEC(".maps");

struct errno_key {
	__u32 id;
	__u32 err;
};

/* Failed calls per (syscall, errno); a pair that finds no room is CTR_LOST_ERRNOS. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_ERRNO_KEYS);
	__type(key, struct errno_key);
	__type(value, __u64);
} errnos SEC(".maps");

/* ioctl calls per request code; a code that finds no room is CTR_LOST_IOCTLS. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_IOCTL_KEYS);
	__type(key, __u32);
	__type(value, __u64);
} ioctls SEC(".maps");

/* The probes' own runs and run time on the tree's events, per own_prog (reqcost.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[OWN_LEN]);
} own SEC(".maps");

struct conn_key {
	__u32 tgid;
	__s32 fd;
};

/* An open connection and its request in progress. */
struct conn {
	struct req_event ev;
	__u64 wrote; /* the server wrote since the request began: a read > 0 starts the next */
	struct h2_conn h2; /* HTTP/2 frames (h2.bpf.h) */
};

/* The open TCP connections of the tree, by (tgid, fd): what each request costs so far. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	/* Entries come and go with connections: allocated on demand, not 16 MiB up front. */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MAX_CONNS);
	__type(key, struct conn_key);
	__type(value, struct conn);
} conns SEC(".maps");

/* A connection being built before it enters `conns` (too large for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct conn);
} conn_scratch SEC(".maps");

/* Finished requests (req_event) and HTTP/2 header pieces (h2_piece), for the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RINGBUF_BYTES);
} requests SEC(".maps");

/* The req_counter counters of the per-request attribution (reqcost.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[RCTR_LEN]);
} req_ctr SEC(".maps");

/*
 * The loader indexes `misc`, `req_ctr` and `own` by these enums as the skeleton generates them
 * (src/layout.rs), so that no slot is numbered twice. clang writes into BTF only the types a
 * global, a function or a map refers to (an enum whose constants alone are used is left out), and
 * libbpf-cargo generates Rust for what BTF holds: this global refers to them, with no entries, so
 * it takes no space in .bss.
 */
struct loader_enums {
	enum misc_slot misc;
	enum req_counter req;
	enum own_prog prog;
	enum own_field own;
} loader_enums[0];

/* Connection ids, unique within one load of the program; the first is 1. */
__u64 next_conn_id;

static __always_inline __u64 *misc_counters(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&misc, &zero);
}

static __always_inline void bump(__u64 counter, __u64 by)
{
	__u64 *m = misc_counters();
	barrier_var(counter);
	if (m && counter < MISC_LEN)
		m[counter] += by;
}

static __always_inline bool tracked_tgid(__u64 tgid)
{
	__u64 word = tgid / 64;

	if (word >= TRACKED_WORDS)
		return false;
	return tracked[word] & (1ULL << (tgid % 64));
}

static __always_inline bool current_tracked(void)
{
	return tracked_tgid(bpf_get_current_task_btf()->tgid);
}

/* A run of program `prog` on the tree's events begins: counted, and timed when sampled. */
static __always_inline __u64 own_start(__u32 prog)
{
	__u32 zero = 0;
	__u64 *o = bpf_map_lookup_elem(&own, &zero);
	__u64 at = prog * OWN_FIELDS + OWN_RUNS;

	if (!o || at >= OWN_LEN)
		return 0;
	o[at] += 1;
	return o[at] % OWN_SAMPLE == 0 ? bpf_ktime_get_ns() : 0;
}

/* `ns` of one sampled run of program `prog`: it stands for OWN_SAMPLE runs. */
static __always_inline void own_add(__u32 prog, __u64 ns)
{
	__u32 zero = 0;
	__u64 *o = bpf_map_lookup_elem(&own, &zero), at = prog * OWN_FIELDS + OWN_NS;

	if (o && at < OWN_LEN)
		o[at] += ns * OWN_SAMPLE;
}

/*
 * The run that own_start began ends. The span between the two clock reads holds one clock read
 * too (about 40 ns here, a quarter of a tracked syscall's run), which the run does not cost: a
 * third read measures it and takes it off.
 */
static __always_inline void own_end(__u32 prog, __u64 start)
{
	__u64 end, read;

	if (!start)
		return;
	end = bpf_ktime_get_ns();
	read = bpf_ktime_get_ns() - end;
	if (end - start > read)
		own_add(prog, end - start - read);
}

/*
 * The syscall programs' runs are counted by `sys` (a call's count at its entry; its exit runs
 * once for each), which sys_enter looks up anyway: `own` counts only the runs that no call's
 * count covers (an id out of range, an exit with no entry seen). One run in OWN_SAMPLE is timed
 * (by the call's count). A sys_exit run is timed from its first clock read, which it makes
 * anyway (the call's end): the span to the end's read holds one read, as the run itself does,
 * so nothing is taken off. `count` is the call's count in `sys`, or 0 when it has none.
 */
static __always_inline void own_sys_end(__u32 prog, __u64 count, __u64 start)
{
	__u32 zero = 0;
	__u64 *o, at = prog * OWN_FIELDS + OWN_RUNS;

	if (!count) {
		o = bpf_map_lookup_elem(&own, &zero);
		if (!o || at >= OWN_LEN)
			return;
		o[at] += 1;
		count = o[at];
	}
	if (count % OWN_SAMPLE == 0)
		own_add(prog, bpf_ktime_get_ns() - start);
}

/* 0 for 0, else floor(log2(v)) + 1, capped to the last bucket. */
static __always_inline __u32 log2_bucket(__u64 v, __u32 buckets)
{
	__u32 r, shift;

	if (v == 0)
		return 0;
	r = (v > 0xFFFFFFFFULL) << 5;
	v >>= r;
	shift = (v > 0xFFFF) << 4;
	v >>= shift;
	r |= shift;
	shift = (v > 0xFF) << 3;
	v >>= shift;
	r |= shift;
	shift = (v > 0xF) << 2;
	v >>= shift;
	r |= shift;
	shift = (v > 0x3) << 1;
	v >>= shift;
	r |= shift;
	r |= (v >> 1);
	r += 1;
	return r < buckets ? r : buckets - 1;
}

/* Turns a plain kernel pointer into one the program may load through directly (Linux 6.3+). */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/* A socket's kind: UDP sockets apart from the others (TCP, Unix, ...). */
static __always_inline __u8 socket_kind(struct file *file)
{
	struct socket *sock = BPF_CORE_READ(file, private_data);
	__u16 proto = BPF_CORE_READ(sock, sk, sk_protocol);

	return proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE ? KIND_UDP : KIND_SOCKET;
}

static __always_inline __u8 kind_of_mode(umode_t fmt)
{
	if (fmt == S_IFSOCK)
		return KIND_SOCKET;
	if (fmt == S_IFIFO)
		return KIND_PIPE;
	return fmt == S_IFREG ? KIND_FILE : KIND_OTHER;
}

/* task->files->fdt->fd[fd], or NULL when the fd is not open. */
static __always_inline struct file *fd_file(struct task_struct *task, __s64 fd)
{
	struct fdtable *fdt;
	struct file **fds;
	struct file *file = NULL;

	if (fd < 0)
		return NULL;
	fdt = task->files->fdt;
	if ((__u64)fd >= fdt->max_fds)
		return NULL;
	fds = fdt->fd;
	bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]);
	return file;
}

/*
 * What an open file is: its f_inode->i_mode. Direct loads through BTF pointers cost a few
 * instructions each where bpf_probe_read_kernel costs a helper call, so only the fd array slot
 * is read with the helper; kernels without bpf_rdonly_cast take the helper-only path.
 */
static __always_inline __u8 file_kind(struct file *file)
{
	struct inode *inode;
	umode_t fmt;

	if (!file)
		return KIND_OTHER;
	if (bpf_ksym_exists(bpf_rdonly_cast)) {
		struct file *f = bpf_rdonly_cast(file, bpf_core_type_id_kernel(struct file));
		inode = f->f_inode;
		fmt = inode->i_mode & S_IFMT;
		/* Anonymous inodes have no file type on older kernels and S_IFREG on newer ones. */
		if ((fmt == S_IFREG || fmt == 0) && inode->i_sb->s_magic == ANON_INODE_FS_MAGIC)
			return KIND_ANON;
		return fmt == S_IFSOCK ? socket_kind(file) : kind_of_mode(fmt);
	}
	inode = BPF_CORE_READ(file, f_inode);
	fmt = BPF_CORE_READ(inode, i_mode) & S_IFMT;
	if ((fmt == S_IFREG || fmt == 0) && BPF_CORE_READ(inode, i_sb, s_magic) == ANON_INODE_FS_MAGIC)
		return KIND_ANON;
	return fmt == S_IFSOCK ? socket_kind(file) : kind_of_mode(fmt);
}

static __always_inline __u8 fd_kind(struct task_struct *task, __s64 fd)
{
	return file_kind(fd_file(task, fd));
}

/* Bytes moved by sendmmsg/recvmmsg: the sum of msg_len over the `n` messages handled. */
static __always_inline __u64 mmsg_bytes(__u64 vec, long n)
{
	__u64 total = 0;

	for (int i = 0; i < MAX_MMSG && i < n; i++) {
		unsigned int len = 0;
		void *at = (void *)(vec + i * sizeof(struct mmsghdr) +
				    __builtin_offsetof(struct mmsghdr, msg_len));
		bpf_probe_read_user(&len, sizeof(len), at);
		total += len;
	}
	return total;
}

static __always_inline __u64 *req_counters(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&req_ctr, &zero);
}

static __always_inline struct conn *conn_of(__u32 tgid, __s32 fd)
{
	struct conn_key key = { .tgid = tgid, .fd = fd };
	return bpf_map_lookup_elem(&conns, &key);
}

static __always_inline struct conn *serving(struct task_ctx *c, __u32 tgid)
{
	return c->conn_fd1 ? conn_of(tgid, c->conn_fd1 - 1) : NULL;
}

/*
 * The clock that on-CPU time is charged with: monotonic time minus the steal time (the
 * hypervisor running something else on this vCPU) that this CPU's run queue has accounted,
 * which the scheduler leaves out of tasks' CPU time and so of the cgroup's. The run queue is
 * reached through the current task (the per-CPU symbol is not resolvable without
 * KALLSYMS_ALL). Its steal figure is refreshed at every schedule, so the total of a run from
 * switch-in to switch-out is exact; its split among the run's intervals may lag by the steal
 * since the last refresh. Only differences on one CPU within one run mean anything.
 */
static __always_inline __u64 cpu_clock(__u64 now)
{
	struct rq *rq;

	if (!bpf_core_field_exists(struct rq, prev_steal_time_rq))
		return now;
	rq = bpf_get_current_task_btf()->se.cfs_rq->rq;
	return now - rq->prev_steal_time_rq;
}

#include "held_tags.bpf.h"

/*
 * Event loops (asyncio, Node, Tornado, uvloop) read a request in one loop turn and run its
 * handler in a later one, after another readiness wait; between a write and the next wait they
 * run other connections' handlers. So the CPU of a thread that serves no connection (after a
 * wait, a write or a close) is held, and goes to the connection its next socket call serves
 * (`settle`): typically the handler's response write. Held time that never meets a socket call
 * (the thread exits, the probes pause) is unattributed (`release`); what is held at a phase's
 * end is in neither counter until then. Threads that never served a connection (start-up,
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
	ctr = req_counters();
	if (ctr)
		ctr[RCTR_ATTRIBUTED_NS] += c->held_ns;
	c->held_ns = 0;
}

/* Held time that no socket call will claim: unattributed, and counted under `why` as well. */
static __always_inline void release(struct task_ctx *c, __u32 why)
{
	__u64 *ctr;

	if (!c->held_ns)
		return;
	held_end(c, NULL);
	ctr = req_counters();
	barrier_var(why);
	if (ctr && why < RCTR_LEN) {
		ctr[RCTR_UNATTRIBUTED_NS] += c->held_ns;
		if (why != RCTR_UNATTRIBUTED_NS)
			ctr[why] += c->held_ns;
	}
	c->held_ns = 0;
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
}

/*
 * Charges the on-CPU time since c->run_ns to the request served (`conn`, which is serving(c)),
 * or to no request.
 */
static __always_inline void charge(struct task_ctx *c, struct conn *conn, __u64 now)
{
	__u64 delta, *ctr;

	/* Off CPU, or preempted since `now` was read (the switches charged that time). */
	if (!c->run_ns || now < c->run_ns)
		return;
	delta = now - c->run_ns;
	c->run_ns = now;
	if (conn) {
		conn->ev.req.cpu_ns += delta;
		c->sys_cpu_ns += delta;
	} else if (c->conn_fd1 == 0 && c->served) {
		c->held_ns += delta;
		return;
	}
	ctr = req_counters();
	if (!ctr)
		return;
	ctr[conn ? RCTR_ATTRIBUTED_NS : RCTR_UNATTRIBUTED_NS] += delta;
	if (!c->served)
		ctr[RCTR_UNSERVED_NS] += delta;
}

static __always_inline void count_syscall(struct req_stats *r, __u32 id)
{
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
}

static __always_inline void uncount_syscall(struct req_stats *r, __u32 id)
{
	r->syscalls -= 1;
	for (int i = 0; i < TOP_SYSCALLS; i++) {
		if (r->top[i].id_plus_one == id + 1) {
			r->top[i].count -= 1;
			return;
		}
	}
}

/* Hands the connection's request to user space, or counts it as dropped. */
static __always_inline void emit(struct conn *conn, bool closed)
{
	__u64 *ctr = req_counters();
	struct req_event *e;

	conn->ev.closed = closed;
	conn->ev.req.end_ns = bpf_ktime_get_ns();
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
	if (ctr)
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
 * Starts following the fd when it is a TCP connection (not a listener): its peer and local
 * port come from file->private_data (a struct socket)->sk. Returns its state, or NULL.
 */
static __always_inline struct conn *conn_open(struct task_struct *task, __s32 fd)
{
	struct conn_key key = { .tgid = task->tgid, .fd = fd };
	struct file *file = fd_file(task, fd);
	struct socket *sock;
	struct sock *sk;
	struct conn *conn;
	__u32 zero = 0;
	__u16 family;

	if (!file || file_kind(file) != KIND_SOCKET)
		return NULL;
	sock = BPF_CORE_READ(file, private_data);
	sk = BPF_CORE_READ(sock, sk);
	if (!sk || BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP ||
	    BPF_CORE_READ(sk, __sk_common.skc_state) == TCP_LISTEN)
		return NULL;
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family != AF_INET && family != AF_INET6)
		return NULL;
	conn = bpf_map_lookup_elem(&conn_scratch, &zero);
	if (!conn)
		return NULL;
	__builtin_memset(conn, 0, sizeof(*conn));
	conn->ev.conn_id = __sync_fetch_and_add(&next_conn_id, 1) + 1;
	conn->ev.pid = key.tgid;
	conn->ev.family = family;
	conn->ev.peer_port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	conn->ev.local_port = BPF_CORE_READ(sk, __sk_common.skc_num);
	/* Sized by the field: the macros' sizeof(*dst) of a byte array would copy one byte. */
	if (family == AF_INET)
		bpf_core_read(conn->ev.peer_addr, sizeof(sk->__sk_common.skc_daddr),
			      &sk->__sk_common.skc_daddr);
	else
		bpf_core_read(conn->ev.peer_addr, sizeof(sk->__sk_common.skc_v6_daddr),
			      &sk->__sk_common.skc_v6_daddr);
	if (bpf_map_update_elem(&conns, &key, conn, BPF_ANY)) {
		__u64 *ctr = req_counters();
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
	conn_open(task, fd);
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
	uncount_syscall(r, id);
	emit(conn, false);
	__builtin_memset(r, 0, sizeof(*r));
	conn->ev.seq += 1;
	conn->wrote = 0;
	r->cpu_ns = moved;
	count_syscall(r, id);
}

#include "h2.bpf.h"
#include "tls.bpf.h"
#include "gotls.bpf.h"
#include "client.bpf.h"
#include "lua.bpf.h"
#include "http3.bpf.h"

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

	if (!conn)
		conn = conn_of(task->tgid, c->fd);
	if (!conn) {
		/* A connection opened before the probes, or by connect(2): followed from now. */
		conn = conn_open(task, c->fd);
		if (!conn)
			return;
		c->conn_fd1 = c->fd + 1;
		settle(c, conn);
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
	if (r->bytes_in == 0) {
		r->first_in_ns = now;
		if (op == OP_READ || op == OP_RECVFROM) {
			__u64 len = bytes < HEAD_MAX ? bytes : HEAD_MAX;

			barrier_var(len);
			if (len > 0 && len <= HEAD_MAX &&
			    bpf_probe_read_user(r->head, len, (void *)c->arg) == 0)
				r->head_len = len;
			tls_sniff(conn);
		}
	}
	h2c_read(conn, op, c->arg, bytes);
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
 * At a syscall's entry: charges the time since the last boundary, switches the connection
 * served (a call on a connection's fd serves it, a readiness wait ends it), counts the call.
 * The connection served is looked up once; the call's fd's only when it is another one.
 */
static __always_inline void attribute_enter(struct task_ctx *c, __u32 tgid, __u32 id, __u8 cls,
					    __u64 now)
{
	struct conn *served = serving(c, tgid), *conn = served;

	charge(c, served, now);
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
		/* The process it was handed to serves it: followed there, not ended here. */
		if (fd_conn && cls == CLS_CLOSE && handed_over(c->fd)) {
			struct conn_key key = { .tgid = tgid, .fd = c->fd };

			if (fd_conn == served) {
				hold(c);
				conn = NULL;
			}
			bpf_map_delete_elem(&conns, &key);
			fd_conn = NULL;
		}
		if (fd_conn) {
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
	if (conn)
		count_syscall(&conn->ev.req, id);
}

/*
 * The arguments are loaded from `regs` directly (a BTF pointer in a tp_btf program): the CO-RE
 * variants would cost a helper call each.
 */
static __always_inline void enter_class(struct task_struct *task, struct pt_regs *regs,
					struct task_ctx *c, __u8 cls)
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
	case CLS_SHUTDOWN:
		c->fd = (int)PT_REGS_PARM1_SYSCALL(regs);
		return;
	case CLS_MMAP:
	case CLS_MUNMAP:
		c->arg = PT_REGS_PARM2_SYSCALL(regs);
		return;
	case CLS_IOCTL: {
		__u32 cmd = (unsigned int)PT_REGS_PARM2_SYSCALL(regs);
		c->fd = (int)PT_REGS_PARM1_SYSCALL(regs);
		__u64 one = 1, *n = bpf_map_lookup_elem(&ioctls, &cmd);
		if (n)
			*n += 1;
		else if (bpf_map_update_elem(&ioctls, &cmd, &one, BPF_NOEXIST))
			bump(CTR_LOST_IOCTLS, 1);
		return;
	}
	case CLS_EPOLL_CTL: {
		int op = (int)PT_REGS_PARM2_SYSCALL(regs);
		c->fd = (int)PT_REGS_PARM3_SYSCALL(regs);
		/* EPOLL_CTL_ADD 1, DEL 2, MOD 3 */
		bump(op == 1 ? CTR_EPOLL_ADD : op == 2 ? CTR_EPOLL_DEL
				   : op == 3 ? CTR_EPOLL_MOD : CTR_EPOLL_OTHER, 1);
		return;
	}
	}
}

/* A tracked call `id` (in range) enters. */
static __always_inline void enter_tracked(struct task_struct *task, struct pt_regs *regs, __u32 id)
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
		enter_class(task, regs, c, cls);
	/* Taken last so that the time of the argument reads above is not charged to the call. */
	now = bpf_ktime_get_ns();
	c->enter_ns = now;
	if (attribute)
		attribute_enter(c, task->tgid, id, cls, cpu_clock(now));
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

/* Every hook rejects a task outside the tree first, with one load and no helper call. */
SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 t, count = 0, *s;
	__u32 zero = 0;

	if (!tracked_tgid(task->tgid)) {
		client_enter(task, id);
		return 0;
	}
	if (id < 0 || id >= MAX_SYSCALLS) {
		t = own_start(PROG_SYS_ENTER);
		enter_untallied(task);
		own_end(PROG_SYS_ENTER, t);
		return 0;
	}
	s = bpf_map_lookup_elem(&sys, &zero);
	if (s) {
		s[id * SYS_FIELDS + SYS_COUNT] += 1;
		count = s[id * SYS_FIELDS + SYS_COUNT];
	}
	/* One call in OWN_SAMPLE of each syscall is timed: its count in `sys` counts the run. */
	t = count && count % OWN_SAMPLE == 0 ? bpf_ktime_get_ns() : 0;
	enter_tracked(task, regs, id);
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
				    __u32 op, long ret, __u64 now)
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
				       __u32 id, __u8 cls, long ret, __u64 now)
{
	if (cls >= CLS_IO && cls < CLS_IO + NR_IO_OPS) {
		exit_io(c, task, id, cls - CLS_IO, ret, now);
		return;
	}
	if (cls >= CLS_WAIT && cls < CLS_WAIT + NR_WAIT_OPS) {
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
		bump(CTR_ACCEPTS, 1);
		if (attribute) {
			exit_charge(c, task->tgid, now);
			conn_accepted(ret);
		}
		return;
	case CLS_CLOSE:
		bump(CTR_CLOSES + (c->kind < NR_KINDS ? c->kind : KIND_OTHER), 1);
		if (attribute && c->kind == KIND_SOCKET) {
			exit_charge(c, task->tgid, now);
			close_served(c);
		}
		return;
	case CLS_MMAP:
		bump(CTR_MMAP_BYTES, c->arg);
		return;
	case CLS_MUNMAP:
		bump(CTR_MUNMAP_BYTES, c->arg);
		return;
	}
}

/* Returns the call's count in `sys`, or 0 for an exit that no entry's count covers. */
static __always_inline __u64 exit_tracked(struct task_struct *task, long ret, __u64 now)
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
	cls = sys_class[id];
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
		exit_class(c, task, id, cls, ret, now);
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
	own_sys_end(PROG_SYS_EXIT, exit_tracked(task, ret, now), now);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u64 ptgid = parent->tgid, ctgid = child->tgid, word = ctgid / 64, t;

	if (!tracked_tgid(ptgid)) {
		client_fork(parent, ctgid);
		return 0;
	}
	t = own_start(PROG_SCHED_PROCESS_FORK);
	if (ctgid == ptgid) {
		bump(CTR_THREADS, 1);
	} else {
		if (word < TRACKED_WORDS)
			__sync_fetch_and_or(&tracked[word], 1ULL << (ctgid % 64));
		bump(CTR_FORKS, 1);
	}
	own_end(PROG_SCHED_PROCESS_FORK, t);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *p)
{
	__u64 tgid = p->tgid, word = tgid / 64, t;

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
			/* Its last switch out comes after this: unattributed, never held. */
			c->served = 0;
		}
	}
	/* The last thread of the group is leaving: forget the group, its pid may be reused. */
	if (BPF_CORE_READ(p, signal, live.counter) == 0) {
		if (attribute)
			conns_exited(tgid);
		if (word < TRACKED_WORDS)
			__sync_fetch_and_and(&tracked[word], ~(1ULL << (tgid % 64)));
		bump(CTR_EXITS, 1);
	}
	own_end(PROG_SCHED_PROCESS_EXIT, t);
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
		charge(c, serving(c, prev->tgid), cpu_clock(now));
		c->run_ns = 0;
	}
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
	fresh(c);
	if (attribute)
		c->run_ns = cpu_clock(now);
	if (!c->runq_ns || now < c->runq_ns)
		return;
	delay = now - c->runq_ns;
	c->runq_ns = 0;
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
	__u64 now, t;

	if (!out && !in)
		return 0;
	t = own_start(PROG_SCHED_SWITCH);
	now = bpf_ktime_get_ns();
	if (out) {
		/* As the scheduler counts nvcsw: blocking without preemption is voluntary. */
		bool voluntary = !preempt && prev_state != 0;

		bump(voluntary ? CTR_SWITCH_VOLUNTARY : CTR_SWITCH_INVOLUNTARY, 1);
		switch_out(prev, !voluntary, now);
	}
	if (in)
		switch_in(next, now);
	own_end(PROG_SCHED_SWITCH, t);
	return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	__u64 t;

	if (!current_tracked())
		return 0;
	t = own_start(PROG_PAGE_FAULT_USER);
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
