/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * The tree's open TCP connections, each with its request in progress, and what leaves for user
 * space: the `requests` ring buffer and the `req_ctr` counters.
 */
#ifndef CONNS_BPF_H
#define CONNS_BPF_H

#include "tree.bpf.h"

struct conn_key {
	__u32 tgid;
	__s32 fd;
};

/* An open connection and its request in progress. */
struct conn {
	struct req_event ev;
	__u64 wrote; /* the server wrote since the request began: a read > 0 starts the next */
	/* The request's last_ns before the latest call on the fd: a read that brings the next
	 * request belongs to that one, and the request it ends ends where it was. */
	__u64 last_before;
	struct h2_conn h2; /* HTTP/2 frames (h2.bpf.h) */
	/* The syscalls of the request counted in `spilled`, one bit each, and how many. */
	__u64 spilled_ids[MAX_SYSCALLS / 64];
	__u32 spilled_n;
	/* Its calls counted on no syscall (`spilled` full): a bound on what `top` may miss. */
	__u32 unranked;
	struct wire_conn wire; /* Redis and PostgreSQL commands (wire.bpf.h) */
	/* The link keys (stack.bpf.h): this end's, and the other end's, which this end's writes
	 * name. */
	__u64 self_key;
	__u64 peer_key;
	/* An upstream call's: the front request its latest served write worked for, and the fd
	 * of the connection that request came on, whose CPU the call's I/O is charged to when the
	 * thread serves nothing (an event loop writing the call after a wait). */
	struct req_ref owner;
	__s32 owner_fd;
	__u32 pad;
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

/*
 * What requests made of syscalls beyond their slots, by (connection, syscall): an entry lives
 * from the request's first such call to its end, which takes it out (`rank_spilled`).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SPILLED);
	__type(key, struct spill_key);
	__type(value, __u32);
} spilled SEC(".maps");

/* A connection being built before it enters `conns` (too large for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct conn);
} conn_scratch SEC(".maps");

/* A head shorter than this is completed from the turn's next read (head_read). */
#define HEAD_SHORT 16

/*
 * `n` > 0 bytes at `buf` read in the request `r`, before they are counted in its bytes_in: its
 * first read's are its head, which names its class. A head shorter than HEAD_SHORT is completed
 * from the next read while it holds every byte read so far: Go's net/http reads one byte in
 * the background to notice a client closing, and on a kept-alive connection that byte is the
 * next request's first (`G`), the rest (`ET /...`) coming in the next read. Appended at most
 * HEAD_MAX - HEAD_SHORT bytes, so that the verifier sees the copy fit.
 */
static __always_inline void head_read(struct req_stats *r, __u64 buf, __u64 n)
{
	__u64 off = r->head_len, len;

	if (r->bytes_in == 0) {
		len = n < HEAD_MAX ? n : HEAD_MAX;
		barrier_var(len);
		if (len > 0 && len <= HEAD_MAX &&
		    bpf_probe_read_user(r->head, len, (void *)buf) == 0)
			r->head_len = len;
		return;
	}
	if (off >= HEAD_SHORT || off != r->bytes_in)
		return;
	len = n < HEAD_MAX - HEAD_SHORT ? n : HEAD_MAX - HEAD_SHORT;
	barrier_var(len);
	off &= HEAD_SHORT - 1;
	if (len > 0 && len <= HEAD_MAX - HEAD_SHORT &&
	    bpf_probe_read_user(r->head + off, len, (void *)buf) == 0)
		r->head_len = off + len;
}

/* Finished requests (req_event) and HTTP/2 header pieces (h2_piece), for the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RINGBUF_BYTES);
} requests SEC(".maps");

/* The req_counter counters of the per-request attribution (reqcost.h), one entry per hop. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_HOPS);
	__type(key, __u32);
	__type(value, __u64[RCTR_LEN]);
} req_ctr SEC(".maps");

/* Connection ids, unique within one load of the program; the first is 1. */
__u64 next_conn_id;

static __always_inline __u64 *req_counters(__u32 hop)
{
	return bpf_map_lookup_elem(&req_ctr, &hop);
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

#endif
