/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * HTTP/2 frames in what a client sent: TLS plaintext (tls.bpf.h calls h2_frames) or the socket's
 * own bytes on a connection that opened with the client preface (h2c with prior knowledge,
 * request_io calls h2c_read).
 *
 * The kernel only walks frame headers: each HEADERS frame on a client stream above the highest
 * seen opens a stream, one request (docs/tls.md). The header blocks (HEADERS and CONTINUATION
 * payloads) are HPACK-encoded against a table that every earlier block of the connection
 * changed, so they go to user space whole and in order (src/h2.rs decodes them): each read's
 * part of such a frame is one `h2_piece` record in the `requests` ring buffer, numbered per
 * connection, so that a piece that could not be sent is a gap user space sees. Nothing of the
 * kind runs for a connection that is not HTTP/2 but one flag test per read.
 */
#ifndef H2_BPF_H
#define H2_BPF_H

#include "conns.bpf.h"

/* A piece being built before it goes to the ring buffer (too large for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct h2_piece);
} h2_scratch SEC(".maps");

/* The client preface of HTTP/2 (RFC 9113, 3.4): 24 bytes. */
#define H2_PREFACE_LEN 24
#define H2_HEADERS 1
#define H2_CONTINUATION 9
#define H2_FRAME_HEADER 9

/* Whether the first bytes read (the head) start with the HTTP/2 preface, compared as three
 * little-endian words. */
static __always_inline bool h2_preface(struct req_stats *r)
{
	__u64 w[3];

	if (r->head_len < H2_PREFACE_LEN)
		return false;
	__builtin_memcpy(w, r->head, sizeof(w));
	return w[0] == 0x5448202a20495250ULL && w[1] == 0x0a0d302e322f5054ULL &&
	       w[2] == 0x0a0d0a0d4d530a0dULL;
}

/* The scratch record of the next piece, numbered; NULL when there is none (a gap then). */
static __always_inline struct h2_piece *h2_next_piece(struct conn *conn)
{
	__u32 zero = 0;
	struct h2_piece *p = bpf_map_lookup_elem(&h2_scratch, &zero);

	conn->ev.req.h2_pieces = ++conn->h2.pieces;
	if (!p)
		return NULL;
	p->zero = 0;
	p->conn_id = conn->ev.conn_id;
	p->seq = conn->ev.seq;
	p->piece = conn->h2.pieces - 1;
	p->stream = conn->h2.stream;
	p->frame_len = conn->h2.frame_len;
	p->type = conn->h2.type;
	p->flags = conn->h2.flags;
	p->offset = 0;
	p->len = 0;
	return p;
}

/*
 * The connection's frames can no longer be followed (a frame header split between two reads,
 * more frames in one read than walked, a read whose buffer is not known): no stream is counted
 * on it any more, and user space is told so.
 */
static __always_inline void h2_sync_lost(struct conn *conn)
{
	struct h2_piece *p;

	if (conn->h2.skip == H2_LOST)
		return;
	conn->h2.skip = H2_LOST;
	conn->h2.type = H2_SYNC_LOST;
	p = h2_next_piece(conn);
	if (p)
		bpf_ringbuf_output(&requests, p, __builtin_offsetof(struct h2_piece, data),
				   BPF_RB_NO_WAKEUP);
}

/* Sends `len` bytes at `src`: what this read holds of the header frame in progress, from its
 * payload's byte `offset` on. */
static __always_inline void h2_piece(struct conn *conn, __u64 src, __u64 len, __u32 offset)
{
	struct h2_piece *p = h2_next_piece(conn);

	if (!p || len > H2_PIECE_MAX)
		return;
	barrier_var(len);
	if (len > H2_PIECE_MAX || bpf_probe_read_user(p->data, len, (void *)src))
		return;
	p->offset = offset;
	p->len = len;
	bpf_ringbuf_output(&requests, p, __builtin_offsetof(struct h2_piece, data) + len,
			   BPF_RB_NO_WAKEUP);
}

/* One read's walk over its frames (bpf_loop's context). */
struct h2_walk {
	struct conn *conn;
	__u64 buf;
	__u64 n;
	__u64 pos;
};

/* The frame that starts at w->pos: counted, and sent when it is part of a header block. */
static long h2_frame(__u64 i, void *ctx)
{
	struct h2_walk *w = ctx;
	struct conn *conn = w->conn;
	__u8 hdr[H2_FRAME_HEADER];
	__u64 len, avail;
	__u32 stream;

	if (w->pos >= w->n)
		return 1;
	if (w->pos + sizeof(hdr) > w->n ||
	    bpf_probe_read_user(hdr, sizeof(hdr), (void *)(w->buf + w->pos))) {
		h2_sync_lost(conn);
		return 1;
	}
	len = ((__u32)hdr[0] << 16) | ((__u32)hdr[1] << 8) | hdr[2];
	stream = (((__u32)hdr[5] & 0x7f) << 24) | ((__u32)hdr[6] << 16) | ((__u32)hdr[7] << 8) |
		 hdr[8];
	if (hdr[3] == H2_HEADERS && (stream & 1) && stream > conn->h2.last_stream) {
		conn->h2.last_stream = stream;
		conn->ev.req.h2_streams += 1;
	}
	conn->h2.type = hdr[3];
	conn->h2.flags = hdr[4];
	conn->h2.stream = stream;
	conn->h2.frame_len = len;
	w->pos += sizeof(hdr);
	if (hdr[3] == H2_HEADERS || hdr[3] == H2_CONTINUATION) {
		avail = w->n - w->pos;
		h2_piece(conn, w->buf + w->pos, len < avail ? len : avail, 0);
	}
	w->pos += len;
	return 0;
}

/*
 * The `n` bytes read at `buf`, from `pos` on: the rest of the frame the last read ended inside
 * (sent too if it is a header frame), then whole frames. Frames span reads; a frame header
 * split between two reads loses the sync. A global function: the verifier checks it once on its
 * own, not again along every path of the programs that call it (sys_exit would exceed its
 * limit).
 */
__noinline int h2_frames(struct conn *conn, __u64 buf, __u64 n, __u64 pos)
{
	struct h2_walk w = { .conn = conn, .buf = buf, .n = n };
	__u32 skip;

	if (!conn)
		return 0;
	skip = conn->h2.skip;
	if (skip == H2_LOST || pos > n)
		return 0;
	if (skip) {
		__u64 part = skip < n - pos ? skip : n - pos;

		if (conn->h2.type == H2_HEADERS || conn->h2.type == H2_CONTINUATION)
			h2_piece(conn, buf + pos, part, conn->h2.frame_len - skip);
		pos += skip;
	}
	w.pos = pos;
	bpf_loop(H2_MAX_FRAMES, h2_frame, &w, 0);
	if (conn->h2.skip == H2_LOST)
		return 0;
	if (w.pos < n) {
		h2_sync_lost(conn);
		return 0;
	}
	conn->h2.skip = w.pos - n;
	return 0;
}

/*
 * A read of `bytes` on a connection's socket into `buf` (the call's buffer for read and
 * recvfrom; other reads' buffers are not known) on a connection whose first bytes were the
 * HTTP/2 preface (h2c with prior knowledge): its frames. Global, as h2_frames.
 */
__noinline int h2c_frames(struct conn *conn, __u32 op, __u64 buf, __u64 bytes)
{
	__u64 pos = 0;

	if (!conn)
		return 0;
	if (!(conn->ev.tls & TLS_H2)) {
		if (!h2_preface(&conn->ev.req))
			return 0;
		conn->ev.tls |= TLS_H2;
		pos = H2_PREFACE_LEN;
	}
	if (op != OP_READ && op != OP_RECVFROM) {
		h2_sync_lost(conn);
		return 0;
	}
	return h2_frames(conn, buf, bytes, pos);
}

/* Before a connection's first read is over, and on HTTP/2 connections, its frames; on any other
 * connection, a flag test and no call. */
static __always_inline void h2c_read(struct conn *conn, __u32 op, __u64 buf, __u64 bytes)
{
	if (!(conn->ev.tls & TLS_H2) && (conn->ev.seq || conn->ev.req.bytes_in))
		return;
	h2c_frames(conn, op, buf, bytes);
}

#endif
