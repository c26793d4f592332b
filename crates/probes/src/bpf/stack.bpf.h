/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * The stack (docs/stack.md): the connections a tree opened to call upstream servers, where they
 * lead, and the links between a front request and the upstream requests it caused.
 *
 * Both ends of a loopback TCP connection or a Unix socket pair are in the kernel, so the end
 * that writes a call can name the other end by a key that end computes for itself: for TCP its
 * (local port, peer port), which is the writer's (peer port, local port); for a Unix socket its
 * struct sock, which is the writer's unix_sk(sk)->peer. A write on an upstream call records,
 * under the other end's key, the front request the writing thread works for; the request that
 * begins on the other end (its first read) takes it as caused_by. The entry is overwritten per
 * call, so a pooled connection serving many front requests in turn is linked call by call; a
 * pipelined or multiplexed one links each request to the latest writer before its read.
 */
#ifndef STACK_BPF_H
#define STACK_BPF_H

#include "conns.bpf.h"

#define AF_UNIX 1
#define EINPROGRESS 115
#define SOCK_STREAM 1
/* How a connection came to be followed (conn_open). */
#define CONN_SEEN 0      /* its first socket call seen: opened before the probes, or handed */
#define CONN_ACCEPTED 1  /* accept(2): a client of the tree's */
#define CONN_CONNECTED 2 /* connect(2): the tree calls an upstream */

/* Key tags: a TCP key is a port pair under this tag; a Unix key is a kernel pointer, whose top
 * bits are all ones, never this tag. */
#define LINK_TCP (1ULL << 40)

/* The front request (hop 0) whose work each call is, under the key of the call's other end. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct req_ref);
} links SEC(".maps");

/* Where the tree connected to, with the hop that connected (the loader follows them). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_DESTS);
	__type(key, struct dest_key);
	__type(value, __u8);
} dests SEC(".maps");

/* A destination being built (too large for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dest_key);
} dest_scratch SEC(".maps");

/*
 * The TCP ports the followed trees listen on, filled by the loader (`listen_known` set once it
 * is): a connection first seen in a socket call, opened before the probes, is an upstream call
 * when its local port is none of them.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);
	__type(value, __u8);
} listen_ports SEC(".maps");

__u64 listen_known;

struct unix_address___stack {
	int len;
	struct sockaddr_un name[];
} __attribute__((preserve_access_index));

struct unix_sock___stack {
	struct sock sk;
	struct unix_address___stack *addr;
	struct sock *peer;
} __attribute__((preserve_access_index));

/*
 * The link keys of a connection, and, when `seen` (CONN_SEEN: its first socket call was seen,
 * not how it was opened), whether the tree opened it: for TCP, its local port is no port the
 * trees listen on; for Unix, it has no address (an accepted socket has its listener's).
 */
static __always_inline bool conn_keys(struct conn *conn, struct sock *sk, bool seen)
{
	__u64 local = conn->ev.local_port, peer = conn->ev.peer_port;
	struct unix_sock___stack *u = (void *)sk;

	if (conn->ev.family != AF_UNIX) {
		conn->self_key = LINK_TCP | local << 16 | peer;
		conn->peer_key = LINK_TCP | peer << 16 | local;
		return seen && listen_known &&
		       !bpf_map_lookup_elem(&listen_ports, &conn->ev.local_port);
	}
	conn->self_key = (__u64)sk;
	conn->peer_key = (__u64)BPF_CORE_READ(u, peer);
	return seen && !BPF_CORE_READ(u, addr);
}

/* The front request that `r`'s connection serves: the request itself on hop 0, else its cause
 * (none when it has none). */
static __always_inline struct req_ref root_of(struct conn *served)
{
	struct req_ref ref = {};

	if (served->ev.hop)
		return served->ev.caused_by;
	ref.conn_id = served->ev.conn_id;
	ref.pid = served->ev.pid;
	ref.seq = served->ev.seq;
	return ref;
}

/*
 * A write on the upstream call `call` enters, from a thread serving `served` (NULL: none, then
 * the call's owner stands). Recorded before the bytes can reach the other end, whose read may
 * run on another CPU before this call returns.
 */
static __always_inline void link_write(struct conn *call, struct conn *served, __s32 served_fd)
{
	if (served) {
		call->owner = root_of(served);
		call->owner_fd = served_fd;
	}
	if (call->owner.conn_id)
		bpf_map_update_elem(&links, &call->peer_key, &call->owner, BPF_ANY);
	else
		bpf_map_delete_elem(&links, &call->peer_key);
}

/* A request begins on an upstream hop's connection: the front request its caller worked for. */
static __always_inline void link_read(struct conn *conn)
{
	struct req_ref *ref;

	if (!conn->ev.hop || conn->ev.upstream_call)
		return;
	ref = bpf_map_lookup_elem(&links, &conn->self_key);
	if (ref)
		conn->ev.caused_by = *ref;
	else
		__builtin_memset(&conn->ev.caused_by, 0, sizeof(conn->ev.caused_by));
}

/*
 * Where the upstream call `conn` leads, kept for the loader to follow (loopback or not, it
 * decides): its peer's address, or the path the peer of a Unix socket is bound to, which a
 * connection opened before the probes tells as well as a new one.
 */
static __always_inline void dest_note(struct conn *conn, struct sock *sk)
{
	struct unix_sock___stack *peer;
	struct unix_address___stack *a;
	struct dest_key *d;
	__u32 zero = 0;
	__u64 n;

	d = bpf_map_lookup_elem(&dest_scratch, &zero);
	if (!d)
		return;
	__builtin_memset(d, 0, sizeof(*d));
	d->family = conn->ev.family;
	if (d->family != AF_UNIX) {
		d->port = conn->ev.peer_port;
		__builtin_memcpy(d->addr, conn->ev.peer_addr, sizeof(d->addr));
	} else {
		peer = (void *)BPF_CORE_READ((struct unix_sock___stack *)sk, peer);
		a = BPF_CORE_READ(peer, addr);
		if (!a)
			return;
		/* The address's length counts sun_family's 2 bytes; an abstract name is its whole
		 * length, NULs and all. */
		n = BPF_CORE_READ(a, len);
		n = n > 2 ? n - 2 : 0;
		n = n < DEST_PATH_LEN ? n : DEST_PATH_LEN;
		barrier_var(n);
		if (n == 0 || n > DEST_PATH_LEN ||
		    bpf_probe_read_kernel(d->path, n,
					  __builtin_preserve_access_index(&a->name[0].sun_path)))
			return;
	}
	if (!bpf_map_lookup_elem(&dests, d))
		bpf_map_update_elem(&dests, d, &conn->ev.hop, BPF_NOEXIST);
}

#endif
