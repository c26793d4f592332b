/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * Commands in what a client sent, on connections of a protocol whose requests can be pipelined:
 * Redis' RESP arrays, PostgreSQL's Queries and Executes, and memcached's text command lines. The 128-byte head names a turn's first
 * command; this counts them all, so that a read of 16 pipelined commands is 16 requests
 * (docs/request-attribution.md, "Requests as the protocol defines them").
 *
 * Only message framing is walked, never a payload: RESP headers (`*N\r\n`, `$L\r\n`, then L
 * bytes and CRLF skipped) and PostgreSQL's 5-byte headers (a type, a length). Each turn starts
 * at a message boundary (the client waited for the answer to the last one), so the walk starts
 * afresh at every turn's first read and carries only the bytes left to skip across its later
 * reads. A header split between two reads, a read whose buffer is not known, or more headers
 * in one read than walked lose the count of that turn (`wire_lost`), never a later one's.
 *
 * memcached's commands are lines, and a storage command's line (`set k flags exptime bytes`,
 * `ms k bytes`) is followed by a data block of `bytes` and CRLF, skipped. Its `noreply`
 * commands get no answer, so a client streams them past the server's answers and a turn may
 * begin inside a line: the walk goes byte by byte through each line (a 32-byte chunk read at a
 * time) and carries the line in progress from turn to turn while it has seen every byte the
 * client sent; a line is counted in the turn that reads its end.
 */
#ifndef WIRE_BPF_H
#define WIRE_BPF_H

#include "conns.bpf.h"

/* wire_conn.kind */
#define WIRE_UNKNOWN 0
#define WIRE_RESP 1
#define WIRE_PG 2
#define WIRE_MC 3
/* The longest header walked: RESP's `*` or `$`, 19 digits, CRLF. */
#define WIRE_HEADER_MAX 24
/* Headers walked per read at most. */
#define WIRE_MAX_HEADERS 4096
/* memcached: steps per read at most (one per byte of a line, one per data block), and the
 * bytes read from the client's buffer at a time. */
#define WIRE_MC_MAX_STEPS 65536
#define WIRE_CHUNK 32

/* One read's walk over its headers (bpf_loop's context). */
struct wire_walk {
	struct conn *conn;
	__u64 buf;
	__u64 n;
	__u64 pos;
	/* memcached: the bytes at chunk_at.. of the read. */
	__u64 chunk_at;
	__u64 chunk_len;
	__u8 chunk[WIRE_CHUNK];
};

static __always_inline long wire_lose(struct conn *conn)
{
	conn->ev.req.wire_lost = 1;
	conn->wire.in_step = 0;
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

#define WIRE_NAME(a, b, c, d) \
	((__u32)(a) | (__u32)(b) << 8 | (__u32)(c) << 16 | (__u32)(d) << 24)

/* The word of a memcached storage command's line that gives its data block's length, by the
 * command's name (its first 4 bytes and its length); 0 for a command without a block. */
static __always_inline __u8 wire_mc_data_word(__u32 name, __u8 len)
{
	if (len == 3 && (name == WIRE_NAME('s', 'e', 't', 0) || name == WIRE_NAME('a', 'd', 'd', 0) ||
			 name == WIRE_NAME('c', 'a', 's', 0)))
		return 4;
	if (len == 7 && (name == WIRE_NAME('r', 'e', 'p', 'l') || name == WIRE_NAME('p', 'r', 'e', 'p')))
		return 4;
	if (len == 6 && name == WIRE_NAME('a', 'p', 'p', 'e'))
		return 4;
	if (len == 2 && name == WIRE_NAME('m', 's', 0, 0))
		return 2;
	return 0;
}

/* One byte of a memcached command line: a line with a word is a command, counted at its end,
 * and a storage command's data block is skipped after it. */
static __always_inline long wire_mc_byte(struct conn *conn, __u8 c)
{
	struct wire_conn *m = &conn->wire;

	if (c == ' ' || c == '\r' || c == '\n' || c == '\t') {
		if (m->in_word) {
			if (m->words == 0)
				m->data_word = wire_mc_data_word(m->name, m->name_len);
			if (m->words < 255)
				m->words += 1;
			m->in_word = 0;
		}
		if (c != '\n')
			return 0;
		if (m->words)
			conn->ev.req.wire_requests += 1;
		if (m->data_word && m->words > m->data_word)
			m->skip = m->args + 2;
		m->words = 0;
		m->name_len = 0;
		m->name = 0;
		m->data_word = 0;
		m->args = 0;
		return 0;
	}
	m->in_word = 1;
	if (m->words == 0) {
		if (m->name_len < 4)
			m->name |= (__u32)c << (8 * m->name_len);
		if (m->name_len < 255)
			m->name_len += 1;
	} else if (m->words == m->data_word) {
		/* memcached's items are at most 1 GB: a longer number is not its protocol. */
		if (c < '0' || c > '9' || m->args > (1ULL << 40))
			return wire_lose(conn);
		m->args = m->args * 10 + (c - '0');
	}
	return 0;
}

/*
 * Where a walk step ends before reading anything: the read is done (1), or the bytes of a
 * message an earlier read ended inside were skipped (0, step again); -1 when there is
 * nothing to skip and the step goes on.
 */
static __always_inline long wire_skipped(struct wire_walk *w, struct conn *conn)
{
	__u64 avail;

	if (w->pos >= w->n)
		return 1;
	avail = w->n - w->pos;
	if (!conn->wire.skip)
		return -1;
	if (conn->wire.skip > avail) {
		conn->wire.skip -= avail;
		w->pos = w->n;
		return 1;
	}
	w->pos += conn->wire.skip;
	conn->wire.skip = 0;
	return 0;
}

/* The bytes left to skip, or one byte of a memcached line, reading the next chunk of the
 * client's buffer when the walk has passed the last. */
static long wire_mc_step(__u64 i, void *ctx)
{
	struct wire_walk *w = ctx;
	struct conn *conn = w->conn;
	__u64 avail, len, off;
	long done;

	done = wire_skipped(w, conn);
	if (done >= 0)
		return done;
	avail = w->n - w->pos;
	if (w->pos - w->chunk_at >= w->chunk_len) {
		len = avail < WIRE_CHUNK ? avail : WIRE_CHUNK;
		barrier_var(len);
		if (len > WIRE_CHUNK || bpf_probe_read_user(w->chunk, len, (void *)(w->buf + w->pos)))
			return wire_lose(conn);
		w->chunk_at = w->pos;
		w->chunk_len = len;
	}
	off = (w->pos - w->chunk_at) & (WIRE_CHUNK - 1);
	w->pos += 1;
	return wire_mc_byte(conn, w->chunk[off]);
}

/* The bytes left to skip, or the header at the walk's position. */
static long wire_step(__u64 i, void *ctx)
{
	struct wire_walk *w = ctx;
	struct conn *conn = w->conn;
	__u8 hdr[WIRE_HEADER_MAX] = {};
	__u64 avail, len;
	long done;

	done = wire_skipped(w, conn);
	if (done >= 0)
		return done;
	avail = w->n - w->pos;
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
		wire_lose(conn);
		return 0;
	}
	if (conn->wire.kind == WIRE_MC)
		bpf_loop(WIRE_MC_MAX_STEPS, wire_mc_step, &w, 0);
	else
		bpf_loop(WIRE_MAX_HEADERS, wire_step, &w, 0);
	if (!conn->ev.req.wire_lost && w.pos < w.n)
		wire_lose(conn);
	return 0;
}

/* Whether a turn's head opens with one of memcached's commands, in lower case (HTTP's methods
 * are upper case), then a space or the line's end. */
static __always_inline bool wire_mc_command(struct req_stats *r)
{
	__u32 name = 0, len;

	for (len = 0; len < 8 && len < r->head_len; len++) {
		__u8 c = r->head[len];

		if (c < 'a' || c > 'z')
			break;
		if (len < 4)
			name |= (__u32)c << (8 * len);
	}
	if (len == 8 || len >= r->head_len || (r->head[len & 7] != ' ' && r->head[len & 7] != '\r'))
		return false;
	if (wire_mc_data_word(name, len))
		return true;
	switch (len) {
	case 2:
		return (name & 0xff) == 'm' && ((name >> 8) == 'g' || (name >> 8) == 'd' ||
						 (name >> 8) == 'n' || (name >> 8) == 'a' ||
						 (name >> 8) == 'e');
	case 3:
		return name == WIRE_NAME('g', 'e', 't', 0) || name == WIRE_NAME('g', 'a', 't', 0);
	case 4:
		return name == WIRE_NAME('g', 'e', 't', 's') || name == WIRE_NAME('g', 'a', 't', 's') ||
		       name == WIRE_NAME('i', 'n', 'c', 'r') || name == WIRE_NAME('d', 'e', 'c', 'r');
	case 5:
		return name == WIRE_NAME('t', 'o', 'u', 'c');
	case 6:
		return name == WIRE_NAME('d', 'e', 'l', 'e');
	}
	return false;
}

/* A memcached line walk from a line's start. */
static __always_inline void wire_mc_start(struct conn *conn)
{
	conn->wire.kind = WIRE_MC;
	conn->wire.walk = 1;
	conn->wire.in_step = 1;
	conn->wire.words = 0;
	conn->wire.in_word = 0;
	conn->wire.name_len = 0;
	conn->wire.name = 0;
	conn->wire.data_word = 0;
}

/* What a turn's head says of its connection: a RESP array opens a Redis turn; PostgreSQL's
 * startup packet (protocol 3.0) makes the connection's later turns typed messages; a memcached
 * command makes them lines, walked on from where the last turn left while in step. */
static __always_inline void wire_turn(struct conn *conn)
{
	struct req_stats *r = &conn->ev.req;
	__u32 code;

	if (conn->wire.kind == WIRE_MC && conn->wire.in_step) {
		conn->wire.walk = 1;
		return;
	}
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
	if (conn->wire.kind == WIRE_MC ? r->head_len > 0 && r->head[0] >= 'a' && r->head[0] <= 'z'
				       : wire_mc_command(r)) {
		wire_mc_start(conn);
		return;
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
