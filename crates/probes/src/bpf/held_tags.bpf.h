/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * Samples taken while a thread holds CPU (see `hold`): that CPU goes to the request its next
 * socket call serves (`settle`), or to none (`release`), which nobody knows at the sample. So
 * `tag_sample` tags such a sample with the thread's held stretch (HELD_TAG | the stretch's
 * number), and the end of the stretch records here which request claimed it; user space
 * (src/tags.rs) resolves the stretch's samples from this map, so that a class's samples and
 * its attributed CPU agree on event loops too. A stretch no socket call claimed has no entry:
 * its samples are no request's, as its CPU.
 */
#ifndef HELD_TAGS_BPF_H
#define HELD_TAGS_BPF_H

#include "conns.bpf.h"

#define HELD_TAG (1ULL << 63)
/* Stretches claimed since the sampler last read them (it reads every 100 ms or so). */
#define HELD_STRETCHES 65536

struct held_key {
	__u32 tid;
	__u32 stretch;
};

struct held_claim {
	__u64 conn_id;
	__u32 seq;
	__u32 pad;
};

/* Which request claimed each held stretch, by (thread, stretch); read by src/tags.rs. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HELD_STRETCHES);
	__type(key, struct held_key);
	__type(value, struct held_claim);
} held_claims SEC(".maps");

/*
 * The current task's held stretch ends, claimed by `conn`'s current request or by none. Only a
 * stretch a sample was tagged with is written: a claim is an LRU hash update (a lock and a list
 * move) that would otherwise cost one to three per request, sampled or not. `tag_sample` runs on
 * the task's own CPU, between two instructions of this function at worst: a sample before the
 * stretch moves on marked the old stretch (and is claimed), one after it marks the new one.
 */
static __always_inline void held_end(struct task_ctx *c, struct conn *conn)
{
	__u32 stretch = c->stretch;

	c->stretch = stretch + 1;
	if (conn && c->sampled == stretch + 1) {
		struct held_key k = { .tid = (__u32)bpf_get_current_pid_tgid(),
				      .stretch = stretch };
		struct held_claim v = { .conn_id = conn->ev.conn_id, .seq = conn->ev.seq };

		bpf_map_update_elem(&held_claims, &k, &v, BPF_ANY);
	}
}

/* A sample's tag while the thread serves no connection: its held stretch (marked as sampled),
 * or 0 (no request) when its time is not held (it never served one, or its context is from
 * before a pause). */
static __always_inline __u64 held_tag(struct task_ctx *c, __u64 now_window)
{
	__u32 stretch;

	if (!c || c->window != now_window || !c->served || c->conn_fd1)
		return 0;
	stretch = c->stretch;
	c->sampled = stretch + 1;
	return HELD_TAG | stretch;
}

#endif
