/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * Commands in what a client sent, on connections of a protocol whose requests can be pipelined:
 * Redis' RESP arrays and PostgreSQL's Queries and Executes. The 128-byte head names a turn's first
 * command; this counts them all, so that a read of 16 pipelined commands is 16 requests
 * (docs/request-attribution.md, "Requests as the protocol defines them").
 *
 * Only message framing is walked, never a payload: RESP headers (`*N\r\n`, `$L\r\n`, then L
 * bytes and CRLF skipped) and PostgreSQL's 5-byte headers (a type, a length). Each turn starts
 * at a message boundary (the client waited for the answer to the last one), so the walk starts
 * afresh at every turn's first read and carries only the bytes left to skip across its later
 * reads. A header split between two reads, a read whose buffer is not known, or more headers
 * in one read than walked lose the count of that turn (`wire_lost`), never a later one's.
 */
#ifndef WIRE_BPF_H
#define WIRE_BPF_H

#include "conns.bpf.h"

/* wire_conn.kind */
#define WIRE_UNKNOWN 0
#define WIRE_RESP 1
#define WIRE_PG 2
/* The longest header walked: RESP's `*` or `$`, 19 digits, CRLF. */
#define WIRE_HEADER_MAX 24
/* Headers walked per read at most. */
#define WIRE_MAX_HEADERS 4096

/* One read's walk over its headers (bpf_loop's context). */
struct wire_walk {
	struct conn *conn;
	__u64 buf;
	__u64 n;
	__u64 pos;
};

static __always_inline long wire_lose(struct conn *conn)
{
	conn->ev.req.wire_lost = 1;
	return 1;
}

/* A RESP header at the walk's position: an array's (a command) or a bulk string's. */
static __always_inline long wire_resp(struct wire_walk *w, __u8 *hdr, __u64 len)
{
	struct conn *conn = w->conn;
	__u64 value = 0, j;
	__u8 expect = conn->wire.args ? '$' : '*';

	if (hdr[0] != expect)
		return wire_lose(conn);
	for (j = 1; j < WIRE_HEADER_MAX - 1; j++) {
		if (j + 1 >= len)
			return wire_lose(conn);
		if (hdr[j] == '\r') {
			if (j == 1 || hdr[j + 1] != '\n')
				return wire_lose(conn);
			break;
		}
		if (hdr[j] < '0' || hdr[j] > '9')
			return wire_lose(conn);
		value = value * 10 + (hdr[j] - '0');
	}
	if (j >= WIRE_HEADER_MAX - 1)
		return wire_lose(conn);
	w->pos += j + 2;
	if (expect == '*') {
		conn->ev.req.wire_requests += 1;
		conn->wire.args = value;
	} else {
		conn->wire.args -= 1;
		conn->wire.skip = value + 2;
	}
	return 0;
}

/* A PostgreSQL frontend header at the walk's position: a Query is a request, and so is each
 * Execute of an extended-protocol batch (a pipeline of them before one Sync too). */
static __always_inline long wire_pg(struct wire_walk *w, __u8 *hdr, __u64 len)
{
	struct conn *conn = w->conn;
	__u32 mlen;

	if (len < 5)
		return wire_lose(conn);
	mlen = ((__u32)hdr[1] << 24) | ((__u32)hdr[2] << 16) | ((__u32)hdr[3] << 8) | hdr[4];
	if (mlen < 4)
		return wire_lose(conn);
	if (hdr[0] == 'Q' || hdr[0] == 'E')
		conn->ev.req.wire_requests += 1;
	w->pos += 5;
	conn->wire.skip = mlen - 4;
	return 0;
}

/* The bytes left to skip, or the header at the walk's position. */
static long wire_step(__u64 i, void *ctx)
{
	struct wire_walk *w = ctx;
	struct conn *conn = w->conn;
	__u8 hdr[WIRE_HEADER_MAX] = {};
	__u64 avail, len;

	if (w->pos >= w->n)
		return 1;
	avail = w->n - w->pos;
	if (conn->wire.skip) {
		if (conn->wire.skip > avail) {
			conn->wire.skip -= avail;
			w->pos = w->n;
			return 1;
		}
		w->pos += conn->wire.skip;
		conn->wire.skip = 0;
		return 0;
	}
	len = avail < WIRE_HEADER_MAX ? avail : WIRE_HEADER_MAX;
	barrier_var(len);
	if (len > WIRE_HEADER_MAX || bpf_probe_read_user(hdr, len, (void *)(w->buf + w->pos)))
		return wire_lose(conn);
	if (conn->wire.kind == WIRE_RESP)
		return wire_resp(w, hdr, len);
	return wire_pg(w, hdr, len);
}

/*
 * A read of `bytes` into `buf` on a connection whose kind is known, from the turn's first
 * read on. Global, as h2_frames: the verifier checks it once on its own.
 */
__noinline int wire_walk_read(struct conn *conn, __u32 op, __u64 buf, __u64 bytes)
{
	struct wire_walk w = { .conn = conn, .buf = buf, .n = bytes };

	if (!conn || conn->ev.req.wire_lost)
		return 0;
	if (op != OP_READ && op != OP_RECVFROM) {
		conn->ev.req.wire_lost = 1;
		return 0;
	}
	bpf_loop(WIRE_MAX_HEADERS, wire_step, &w, 0);
	if (!conn->ev.req.wire_lost && w.pos < w.n)
		conn->ev.req.wire_lost = 1;
	return 0;
}

/* What a turn's head says of its connection: a RESP array opens a Redis turn; PostgreSQL's
 * startup packet (protocol 3.0) makes the connection's later turns typed messages. */
static __always_inline void wire_turn(struct conn *conn)
{
	struct req_stats *r = &conn->ev.req;
	__u32 code;

	conn->wire.skip = 0;
	conn->wire.args = 0;
	conn->wire.walk = 0;
	if (r->head_len >= 2 && r->head[0] == '*' && r->head[1] >= '0' && r->head[1] <= '9') {
		conn->wire.kind = WIRE_RESP;
		conn->wire.walk = 1;
		return;
	}
	if (r->head_len >= 8) {
		code = ((__u32)r->head[4] << 24) | ((__u32)r->head[5] << 16) |
		       ((__u32)r->head[6] << 8) | r->head[7];
		if (code == 0x30000) {
			conn->wire.kind = WIRE_PG;
			return;
		}
	}
	conn->wire.walk = conn->wire.kind == WIRE_PG && r->head_len > 0 && r->head[0] >= 'A' &&
			  r->head[0] <= 'z';
}

/* A read on a connection: the turn's first read decides whether the turn is walked; a walked
 * turn's reads are. One flag test on any other connection. */
static __always_inline void wire_read(struct conn *conn, __u32 op, __u64 buf, __u64 bytes,
				      bool first)
{
	if (first)
		wire_turn(conn);
	if (conn->wire.walk)
		wire_walk_read(conn, op, buf, bytes);
}

#endif
