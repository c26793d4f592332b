// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Kernel-side accounting of one process tree, aggregated in the kernel.
 *
 * Only tasks whose thread group has its bit set in `tracked` are counted. The loader seeds it
 * with the root pid and its descendants; sched_process_fork adds children, sched_process_exit
 * removes thread groups that died. A bitmap in .bss costs one load to test, where a hash map
 * costs a helper call: the test runs on every syscall and context switch of the machine. Every aggregate is a single-entry per-CPU array (see reqcost.h), so
 * the hot path is lock-free and memory is fixed at load time.
 *
 * Hot path: untracked tasks cost one load (their bit); a tracked task finds its in-flight
 * record through task-local storage, created at its first syscall.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "reqcost.h"

/* The kernel requires a GPL-compatible license for the tracing helpers used here. */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define S_IFREG 0100000
#define S_IFIFO 0010000
#define ANON_INODE_FS_MAGIC 0x09041934
#define MAX_ERRNO 4095
#define MAX_MMSG 64

/* Filled by the loader: class of each syscall number (reqcost.h, CLS_*). */
const volatile __u8 sys_class[MAX_SYSCALLS] = {};

/* Bit per thread group id; the loader sets bits through the memory-mapped .bss, atomically. */
__u64 tracked[TRACKED_WORDS];

/* The syscall in flight on a task, from sys_enter to sys_exit. */
struct task_ctx {
	__u64 enter_ns;
	__u64 arg;  /* per class: size, nfds, or mmsg vector */
	__s32 id;   /* -1 when no syscall is in flight */
	__s32 fd;   /* the fd of a read-like or write-like call */
	__u8 kind;  /* fd kind of a close's fd */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[MAX_SYSCALLS * SYS_FIELDS]);
} sys SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[MISC_LEN]);
} misc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[IO_TOT_LEN]);
} io_tot SEC(".maps");

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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_ERRNO_KEYS);
	__type(key, struct errno_key);
	__type(value, __u64);
} errnos SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_IOCTL_KEYS);
	__type(key, __u32);
	__type(value, __u64);
} ioctls SEC(".maps");

/* When each waiting thread became runnable (woken, or preempted while runnable). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_RUNQ);
	__type(key, __u32);
	__type(value, __u64);
} runq_start SEC(".maps");

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

static __always_inline __u8 kind_of_mode(umode_t fmt)
{
	if (fmt == S_IFSOCK)
		return KIND_SOCKET;
	if (fmt == S_IFIFO)
		return KIND_PIPE;
	return fmt == S_IFREG ? KIND_FILE : KIND_OTHER;
}

/*
 * What the fd refers to: task->files->fdt->fd[fd]->f_inode->i_mode. Direct loads through BTF
 * pointers cost a few instructions each where bpf_probe_read_kernel costs a helper call, so only
 * the fd array slot is read with the helper; kernels without bpf_rdonly_cast take the
 * helper-only path.
 */
static __always_inline __u8 fd_kind(struct task_struct *task, __s64 fd)
{
	struct fdtable *fdt;
	struct file **fds;
	struct file *file = NULL;
	struct inode *inode;
	umode_t fmt;

	if (fd < 0)
		return KIND_OTHER;
	fdt = task->files->fdt;
	if ((__u64)fd >= fdt->max_fds)
		return KIND_OTHER;
	fds = fdt->fd;
	bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]);
	if (!file)
		return KIND_OTHER;
	if (bpf_ksym_exists(bpf_rdonly_cast)) {
		struct file *f = bpf_rdonly_cast(file, bpf_core_type_id_kernel(struct file));
		inode = f->f_inode;
		fmt = inode->i_mode & S_IFMT;
		/* Anonymous inodes have no file type on older kernels and S_IFREG on newer ones. */
		if ((fmt == S_IFREG || fmt == 0) && inode->i_sb->s_magic == ANON_INODE_FS_MAGIC)
			return KIND_ANON;
		return kind_of_mode(fmt);
	}
	inode = BPF_CORE_READ(file, f_inode);
	fmt = BPF_CORE_READ(inode, i_mode) & S_IFMT;
	if ((fmt == S_IFREG || fmt == 0) && BPF_CORE_READ(inode, i_sb, s_magic) == ANON_INODE_FS_MAGIC)
		return KIND_ANON;
	return kind_of_mode(fmt);
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

static __always_inline void enter_class(struct task_struct *task, struct pt_regs *regs,
					struct task_ctx *c, __u8 cls)
{
	if (cls >= CLS_IO && cls < CLS_IO + NR_IO_OPS) {
		__u32 op = cls - CLS_IO;
		/* Its kind is resolved on return, when the call has just brought the fd table,
		 * file and inode into the cache: before, they are often cold. */
		c->fd = op == OP_SPLICE ? (int)PT_REGS_PARM3_CORE_SYSCALL(regs)
					: (int)PT_REGS_PARM1_CORE_SYSCALL(regs);
		if (op == OP_RECVMMSG || op == OP_SENDMMSG)
			c->arg = PT_REGS_PARM2_CORE_SYSCALL(regs);
		return;
	}
	if (cls >= CLS_WAIT && cls < CLS_WAIT + NR_WAIT_OPS) {
		__u32 op = cls - CLS_WAIT;
		if (op <= WAIT_EPOLL_PWAIT2)
			c->arg = (int)PT_REGS_PARM3_CORE_SYSCALL(regs);
		else if (op <= WAIT_PPOLL)
			c->arg = (unsigned int)PT_REGS_PARM2_CORE_SYSCALL(regs);
		else
			c->arg = (int)PT_REGS_PARM1_CORE_SYSCALL(regs);
		return;
	}
	switch (cls) {
	case CLS_CLOSE:
		c->kind = fd_kind(task, (int)PT_REGS_PARM1_CORE_SYSCALL(regs));
		return;
	case CLS_MMAP:
	case CLS_MUNMAP:
		c->arg = PT_REGS_PARM2_CORE_SYSCALL(regs);
		return;
	case CLS_IOCTL: {
		__u32 cmd = (unsigned int)PT_REGS_PARM2_CORE_SYSCALL(regs);
		__u64 one = 1, *n = bpf_map_lookup_elem(&ioctls, &cmd);
		if (n)
			*n += 1;
		else if (bpf_map_update_elem(&ioctls, &cmd, &one, BPF_NOEXIST))
			bump(CTR_LOST_IOCTLS, 1);
		return;
	}
	case CLS_EPOLL_CTL: {
		int op = (int)PT_REGS_PARM2_CORE_SYSCALL(regs);
		/* EPOLL_CTL_ADD 1, DEL 2, MOD 3 */
		bump(op == 1 ? CTR_EPOLL_ADD : op == 2 ? CTR_EPOLL_DEL
				   : op == 3 ? CTR_EPOLL_MOD : CTR_EPOLL_OTHER, 1);
		return;
	}
	}
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct task_ctx *c;
	__u32 zero = 0;
	__u64 *s;
	__u8 cls;

	/* Every helper call counts on the hot path: the tgid is read from the task directly. */
	if (!tracked_tgid(task->tgid))
		return 0;
	c = bpf_task_storage_get(&task_ctx, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (id < 0 || id >= MAX_SYSCALLS) {
		if (c)
			c->id = -1;
		return 0;
	}
	s = bpf_map_lookup_elem(&sys, &zero);
	if (s)
		s[id * SYS_FIELDS + SYS_COUNT] += 1;
	if (!c) {
		bump(CTR_LOST_TASKS, 1);
		return 0;
	}
	c->id = id;
	c->kind = KIND_OTHER;
	c->arg = 0;
	cls = sys_class[id];
	if (cls != CLS_NONE)
		enter_class(task, regs, c, cls);
	/* Taken last so that the time of the argument reads above is not charged to the call. */
	c->enter_ns = bpf_ktime_get_ns();
	return 0;
}

static __always_inline void exit_io(struct task_ctx *c, __u32 op, long ret)
{
	__u32 zero = 0;
	/* 64-bit indexes: clang 14 re-derives 32-bit ones from copies the verifier cannot bound. */
	__u64 slot, bucket, bytes = ret, *tot, *hist;
	__u8 kind;

	switch (op) {
	case OP_RECVFROM:
	case OP_RECVMSG:
	case OP_RECVMMSG:
	case OP_SENDTO:
	case OP_SENDMSG:
	case OP_SENDMMSG:
		/* These succeed on sockets only. */
		kind = KIND_SOCKET;
		break;
	default:
		kind = fd_kind(bpf_get_current_task_btf(), c->fd);
	}
	if (op == OP_RECVMMSG || op == OP_SENDMMSG)
		bytes = mmsg_bytes(c->arg, ret);
	slot = op * NR_KINDS + (kind < NR_KINDS ? kind : KIND_OTHER);
	/* The compiler knows these bounds hold and would drop the checks the verifier needs. */
	barrier_var(slot);
	if (slot >= IO_SLOTS)
		return;
	tot = bpf_map_lookup_elem(&io_tot, &zero);
	if (tot) {
		tot[slot] += 1;
		tot[IO_SLOTS + slot] += bytes;
	}
	bucket = slot * NR_SIZE_BUCKETS + log2_bucket(bytes, NR_SIZE_BUCKETS);
	barrier_var(bucket);
	hist = bpf_map_lookup_elem(&io_hist, &zero);
	if (hist && bucket < IO_HIST_LEN)
		hist[bucket] += 1;
}

static __always_inline void exit_class(struct task_ctx *c, __u8 cls, long ret)
{
	if (cls >= CLS_IO && cls < CLS_IO + NR_IO_OPS) {
		exit_io(c, cls - CLS_IO, ret);
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
		return;
	case CLS_CLOSE:
		bump(CTR_CLOSES + (c->kind < NR_KINDS ? c->kind : KIND_OTHER), 1);
		return;
	case CLS_MMAP:
		bump(CTR_MMAP_BYTES, c->arg);
		return;
	case CLS_MUNMAP:
		bump(CTR_MUNMAP_BYTES, c->arg);
		return;
	}
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	struct task_ctx *c;
	__u32 zero = 0;
	__u64 now, *s;
	__u32 id;
	__u8 cls;

	c = bpf_task_storage_get(&task_ctx, bpf_get_current_task_btf(), 0, 0);
	if (!c)
		return 0;
	/* Unsigned, so that one comparison bounds it (-1: nothing in flight). */
	id = c->id;
	if (id >= MAX_SYSCALLS)
		return 0;
	now = bpf_ktime_get_ns();
	c->id = -1;
	cls = sys_class[id];
	s = bpf_map_lookup_elem(&sys, &zero);
	if (s)
		s[id * SYS_FIELDS + SYS_TIME_NS] += now - c->enter_ns;
	if (ret < 0 && ret >= -MAX_ERRNO && cls != CLS_NO_ERRORS) {
		struct errno_key key = { .id = id, .err = -ret };
		__u64 one = 1, *n;

		if (s)
			s[id * SYS_FIELDS + SYS_ERRORS] += 1;
		n = bpf_map_lookup_elem(&errnos, &key);
		if (n)
			*n += 1;
		else if (bpf_map_update_elem(&errnos, &key, &one, BPF_NOEXIST))
			bump(CTR_LOST_ERRNOS, 1);
		return 0;
	}
	if (cls != CLS_NONE)
		exit_class(c, cls, ret);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u64 ptgid = parent->tgid, ctgid = child->tgid, word = ctgid / 64;

	if (!tracked_tgid(ptgid))
		return 0;
	if (ctgid == ptgid) {
		bump(CTR_THREADS, 1);
		return 0;
	}
	if (word < TRACKED_WORDS)
		__sync_fetch_and_or(&tracked[word], 1ULL << (ctgid % 64));
	bump(CTR_FORKS, 1);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *p)
{
	__u64 tgid = p->tgid, word = tgid / 64;
	__u32 tid = p->pid;

	if (!tracked_tgid(tgid))
		return 0;
	bpf_map_delete_elem(&runq_start, &tid);
	/* The last thread of the group is leaving: forget the group, its pid may be reused. */
	if (BPF_CORE_READ(p, signal, live.counter) == 0) {
		if (word < TRACKED_WORDS)
			__sync_fetch_and_and(&tracked[word], ~(1ULL << (tgid % 64)));
		bump(CTR_EXITS, 1);
	}
	return 0;
}

static __always_inline void runq_enter(struct task_struct *p)
{
	__u32 tid = p->pid;
	__u64 now = bpf_ktime_get_ns();

	if (bpf_map_update_elem(&runq_start, &tid, &now, BPF_ANY))
		bump(CTR_LOST_RUNQ, 1);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	if (!tracked_tgid(p->tgid))
		return 0;
	bump(CTR_WAKEUPS, 1);
	runq_enter(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	if (tracked_tgid(p->tgid))
		runq_enter(p);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	if (tracked_tgid(prev->tgid)) {
		/* As the scheduler counts nvcsw: blocking without preemption is voluntary. */
		if (!preempt && prev_state != 0) {
			bump(CTR_SWITCH_VOLUNTARY, 1);
		} else {
			bump(CTR_SWITCH_INVOLUNTARY, 1);
			runq_enter(prev);
		}
	}
	if (tracked_tgid(next->tgid)) {
		__u32 tid = next->pid;
		__u64 *start = bpf_map_lookup_elem(&runq_start, &tid);
		__u64 *m;

		if (!start)
			return 0;
		__u64 delay = bpf_ktime_get_ns() - *start;
		bpf_map_delete_elem(&runq_start, &tid);
		m = misc_counters();
		if (!m)
			return 0;
		m[CTR_RUNQ_WAITS] += 1;
		m[CTR_RUNQ_NS] += delay;
		__u64 b = MISC_RUNQ_HIST + log2_bucket(delay / 1000, NR_RUNQ_BUCKETS);
		barrier_var(b);
		if (b < MISC_LEN)
			m[b] += 1;
	}
	return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	if (current_tracked())
		bump(CTR_FAULTS_USER, 1);
	return 0;
}

SEC("tp_btf/page_fault_kernel")
int BPF_PROG(page_fault_kernel, unsigned long address, struct pt_regs *regs,
	     unsigned long error_code)
{
	if (current_tracked())
		bump(CTR_FAULTS_KERNEL, 1);
	return 0;
}
