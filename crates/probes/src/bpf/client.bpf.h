/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * The `--load` client's tree, counted beside the server's: its syscalls by number, nothing else.
 *
 * The server's hooks reject an untracked task first; only then, and only when the loader set
 * `count_client` at load time, do they ask whether the task belongs to the client tree. With it
 * unset the verifier drops that branch: an untracked syscall costs one load more (the flag; 806
 * translated instructions in sys_enter before, 803 after). With it set, an untracked syscall
 * costs a call and its bit in `client_tracked`, and a client syscall one map lookup.
 *
 * The tree is followed from birth: the loader names the thread that is about to spawn the
 * client (`client_parent`), whose next fork is the client's root; the root's forks, and theirs,
 * join the tree. Exits leave it, as the server's do.
 */
#ifndef CLIENT_BPF_H
#define CLIENT_BPF_H

#include "tree.bpf.h"

const volatile bool count_client = false;

/* Bit per thread group id of the client tree; set by the fork hook only. */
__u64 client_tracked[TRACKED_WORDS];
/* Thread id of the loader's thread that spawns the client; 0 when none is spawning. */
__u64 client_parent;

/* The client tree's calls per syscall number. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[MAX_SYSCALLS]);
} client_sys SEC(".maps");

static __always_inline bool client_tgid(__u64 tgid)
{
	__u64 word = tgid / 64;

	if (word >= TRACKED_WORDS)
		return false;
	return client_tracked[word] & (1ULL << (tgid % 64));
}

/* Not inlined, and given the task rather than what it reads from it: the compiler would
 * otherwise hoist those reads above the `count_client` test, where they cost even without a
 * client. */
static __noinline void client_count(struct task_struct *task, long id)
{
	__u32 zero = 0;
	__u64 *s;

	if (!client_tgid(task->tgid))
		return;
	s = bpf_map_lookup_elem(&client_sys, &zero);
	if (s && id >= 0 && id < MAX_SYSCALLS)
		s[id] += 1;
}

static __always_inline void client_enter(struct task_struct *task, long id)
{
	if (count_client)
		client_count(task, id);
}

/* Not inlined: the compiler would merge its bound checks with the caller's, and the verifier
 * then finds the caller's bitmap index unbounded. Forks and exits are rare. */
static __noinline void client_fork(struct task_struct *parent, __u64 ctgid)
{
	__u64 word = ctgid / 64;

	if (!count_client || ctgid == parent->tgid || word >= TRACKED_WORDS)
		return;
	if (client_tgid(parent->tgid) || (client_parent && (__u64)parent->pid == client_parent))
		__sync_fetch_and_or(&client_tracked[word], 1ULL << (ctgid % 64));
}

static __noinline void client_exit(struct task_struct *p)
{
	__u64 tgid = p->tgid, word = tgid / 64;

	if (!count_client || !client_tgid(tgid))
		return;
	if (BPF_CORE_READ(p, signal, live.counter) == 0 && word < TRACKED_WORDS)
		__sync_fetch_and_and(&client_tracked[word], ~(1ULL << (tgid % 64)));
}

#endif
