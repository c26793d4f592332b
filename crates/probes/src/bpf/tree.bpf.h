/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * The process tree followed and its aggregates: which thread groups are tracked, each task's
 * context, the per-syscall, per-(io op, fd kind) and misc counters, the probes' own cost, what
 * an fd is. Every other file of the program builds on it.
 */
#ifndef TREE_BPF_H
#define TREE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "reqcost.h"

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
/* A task's state in its last switch out (include/linux/sched.h; macros are not in BTF). */
#define TASK_DEAD 0x00000080

/* Filled by the loader: class of each syscall number (reqcost.h, CLS_*). */
const volatile __u8 sys_class[MAX_SYSCALLS] = {};
/* Set by the loader: per-request attribution on or off (its cost is measured apart). */
const volatile bool attribute = true;

/* Bit per thread group id; the loader sets bits through the memory-mapped .bss, atomically. */
__u64 tracked[TRACKED_WORDS];
/*
 * Of the tracked: the thread groups of upstream hops (docs/stack.md), the local servers the
 * target's requests were followed to. Their requests and CPU are followed, but they stay out of
 * the target's aggregates (syscalls, I/O, scheduler, faults): those are the target's figures.
 */
__u64 upstream[TRACKED_WORDS];

/* The hop (1..MAX_HOPS-1) of each upstream thread group; forks inherit it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} tgid_hops SEC(".maps");

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
	__u64 sched_ns;   /* its se.sum_exec_runtime at its latest switch seen (see `end_run`) */
	__u64 run_charged_ns; /* CPU charged since then, and what earlier runs charged beyond theirs */
	__u64 lead_ns;    /* its part of RCTR_LEAD_NS (`set_lead`), signed */
	__u8 sched_known; /* sched_ns was read at a switch, since the context was last fresh */
	__u8 exiting;     /* past sched_process_exit: its time is its exit's */
	__u8 hop1;        /* its hop + 1 once known (`ctx_hop`); 0 not looked up yet */
};

/* Each task's context (task_ctx), created at its first syscall, switch or wakeup. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctx SEC(".maps");

/* Per syscall number: SYS_FIELDS counters (calls, time, errors); one set per hop (0: the
 * target's), so that a hop's findings are judged on its own calls (docs/stack.md). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_HOPS);
	__type(key, __u32);
	__type(value, __u64[MAX_SYSCALLS * SYS_FIELDS]);
} sys SEC(".maps");

/* The misc_slot counters, wait fields and run-queue histogram (reqcost.h); one set per hop
 * (0: the target's), of which an upstream hop's counts its processes and page faults only. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_HOPS);
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

/* Opens per path as the call named it; a path that finds no room is CTR_LOST_OPENS. */
struct open_key {
	char path[OPEN_PATH_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_OPEN_PATHS);
	__type(key, struct open_key);
	__type(value, __u64);
} opens SEC(".maps");

/* The probes' own runs and run time on the followed trees' events, per own_prog (reqcost.h):
 * entry OWN_FRONT on the target's tree, OWN_UPSTREAM on its upstream hops' (stack.bpf.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OWN_TREES);
	__type(key, __u32);
	__type(value, __u64[OWN_LEN]);
} own SEC(".maps");

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

/* `bump` on the counters of upstream hop `hop`. Hop 0's are the target's, which an upstream
 * whose hop is not known (`tgid_hop` gives 0) must not enter: it counts nowhere. */
static __always_inline void bump_hop(__u32 hop, __u64 counter, __u64 by)
{
	__u64 *m;

	if (!hop)
		return;
	m = bpf_map_lookup_elem(&misc, &hop);
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

/* Sets or clears a thread group's bit in `tracked` or `upstream`, atomically (the loader sets
 * bits too). */
static __always_inline void set_tgid_bit(__u64 *bits, __u64 tgid, bool on)
{
	__u64 word = tgid / 64;

	barrier_var(word);
	if (word >= TRACKED_WORDS)
		return;
	if (on)
		__sync_fetch_and_or(&bits[word], 1ULL << (tgid % 64));
	else
		__sync_fetch_and_and(&bits[word], ~(1ULL << (tgid % 64)));
}

static __always_inline bool upstream_tgid(__u64 tgid)
{
	__u64 word = tgid / 64;

	if (word >= TRACKED_WORDS)
		return false;
	return upstream[word] & (1ULL << (tgid % 64));
}

/* A tracked thread group whose events count in the target's aggregates: one of hop 0. */
static __always_inline bool front_tgid(__u64 tgid)
{
	return tracked_tgid(tgid) && !upstream_tgid(tgid);
}

static __always_inline bool current_tracked(void)
{
	return front_tgid(bpf_get_current_task_btf()->tgid);
}

/* The hop of a thread group: 0 for the target's, looked up only for an upstream's. */
static __always_inline __u8 tgid_hop(__u32 tgid)
{
	__u8 *hop;

	if (!upstream_tgid(tgid))
		return 0;
	hop = bpf_map_lookup_elem(&tgid_hops, &tgid);
	return hop && *hop < MAX_HOPS ? *hop : 0;
}

/* The hop of the current task, whose context `c` is: looked up once per task. */
static __always_inline __u8 ctx_hop(struct task_ctx *c)
{
	if (!c->hop1)
		c->hop1 = tgid_hop(bpf_get_current_task_btf()->tgid) + 1;
	return c->hop1 - 1;
}

/*
 * The `own` entry of the tree the running task belongs to. A program runs on the task whose
 * event it is, but for a wakeup (the waker's) and an exit's last switch: those few count in the
 * running task's tree.
 */
static __always_inline __u64 *own_entry(void)
{
	__u32 tree = upstream_tgid(bpf_get_current_task_btf()->tgid) ? OWN_UPSTREAM : OWN_FRONT;

	return bpf_map_lookup_elem(&own, &tree);
}

/* A run of program `prog` on the tree's events begins: counted, and timed when sampled. */
static __always_inline __u64 own_start(__u32 prog)
{
	__u64 *o = own_entry();
	__u64 at = prog * OWN_FIELDS + OWN_RUNS;

	if (!o || at >= OWN_LEN)
		return 0;
	o[at] += 1;
	return o[at] % OWN_SAMPLE == 0 ? bpf_ktime_get_ns() : 0;
}

/* `ns` of one sampled run of program `prog`: it stands for OWN_SAMPLE runs. */
static __always_inline void own_add(__u32 prog, __u64 ns)
{
	__u64 *o = own_entry(), at = prog * OWN_FIELDS + OWN_NS;

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
	__u64 *o, at = prog * OWN_FIELDS + OWN_RUNS;

	if (!count) {
		o = own_entry();
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

#endif
