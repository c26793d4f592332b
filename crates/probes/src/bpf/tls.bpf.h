/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * TLS plaintext: uprobes on the server's TLS library, attached by the loader (src/tls.rs finds
 * the libraries the tree maps) to OpenSSL 3's SSL_read, SSL_read_ex, SSL_write and
 * SSL_write_ex, and GnuTLS's gnutls_record_recv, gnutls_record_recv_seq and
 * gnutls_record_send2 (same arguments and return as SSL_read and SSL_write), per process of the
 * tree (src/bpf/tls_links.rs): no other process traps into them. request_io (reqcost.bpf.c)
 * hands each socket read and write to tls_socket_io.
 *
 * As Pixie and Beyla do, the entry saves the buffer (and the _ex variants' byte count pointer)
 * and the return reads how much plaintext moved. Which connection an SSL object drives is
 * learnt at the return of its first call that moved bytes: the socket of the thread's latest
 * socket call (the call read or wrote it). From then on its calls switch the thread to that
 * connection at their entry, so encryption before the write is charged to the right request in
 * an event loop.
 */
#ifndef TLS_BPF_H
#define TLS_BPF_H

#include "attribution.bpf.h"
#include "h2.bpf.h"

/* The TLS call in flight on a thread, from its entry to its return. */
struct tls_call {
	__u64 buf;
	__u64 len_ptr;	  /* SSL_read_ex/SSL_write_ex: where the byte count goes; else 0 */
	__u64 ssl;
	__u64 conn_id;	  /* the connection served at the entry, and its request's CPU then */
	__u64 cpu_ns;
	__u64 cookie;	  /* the uprobe's: see tls_lib_entries and tls_resumed */
	__u8 write;
	__u8 active;
	__u32 fd1; /* the connection's fd + 1 at the entry: the write inside ends serving it */
};

/* The TLS call in flight on each thread. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tls_call);
} tls_calls SEC(".maps");

struct tls_key {
	__u64 ssl;
	__u32 tgid;
	__u32 pad;
};

struct tls_fd {
	__u64 conn_id;
	__s32 fd;
	__u32 pad;
};

/* SSL object → its connection. LRU: objects freed with their connection are never deleted. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_CONNS);
	__type(key, struct tls_key);
	__type(value, struct tls_fd);
} tls_fds SEC(".maps");

/*
 * Whether a connection's first read is a TLS client hello (record type 22, version 3.x). It
 * may be a 1-byte peek: nginx peeks at the first byte to tell TLS from plain HTTP, and no text
 * protocol starts with byte 22.
 */
static __always_inline void tls_sniff(struct conn *conn)
{
	struct req_stats *r = &conn->ev.req;

	if (conn->ev.seq != 0 || r->head_len < 1 || r->head[0] != 0x16)
		return;
	if (r->head_len >= 3 && (r->head[1] != 0x03 || r->head[2] > 0x04))
		return;
	conn->ev.tls = TLS_SEEN;
}

/*
 * A socket read or write of `bytes` on a TLS connection: ciphertext, which draws no boundary.
 * Before the plaintext is seen it is the request's bytes (the handshake's, or the whole
 * connection's when the library is not hooked); after, the plaintext counts instead. Returns
 * whether the connection is TLS (the caller then does nothing more).
 */
static __always_inline bool tls_socket_io(struct conn *conn, __u32 op, __u64 bytes, __u64 now)
{
	struct req_stats *r = &conn->ev.req;

	/* Not any flag: TLS_H2 alone is HTTP/2 in the clear. */
	if (!(conn->ev.tls & TLS_SEEN))
		return false;
	if (conn->ev.tls & TLS_PLAIN)
		return true;
	if (op >= OP_WRITE) {
		r->bytes_out += bytes;
		r->last_out_ns = now;
	} else {
		if (!r->first_in_ns)
			r->first_in_ns = now;
		r->bytes_in += bytes;
	}
	return true;
}

/*
 * Ends the connection's current part (`flag` TLS_HANDSHAKE for the handshake) and starts the
 * next request with `moved` ns of CPU: what the call that brought it spent so far.
 */
static __always_inline void tls_cut(struct conn *conn, __u64 moved, __u8 flag)
{
	struct req_stats *r = &conn->ev.req;
	__u64 latest = r->last_ns;

	r->cpu_ns -= moved;
	/* The socket call under the library call that brought the next request is that one's. */
	r->last_ns = lifetime_end(conn);
	conn->ev.tls |= flag;
	emit(conn, false);
	conn->ev.tls &= ~flag;
	__builtin_memset(r, 0, sizeof(*r));
	conn->ev.seq += 1;
	conn->wrote = 0;
	r->cpu_ns = moved;
	r->last_ns = latest;
}

/*
 * Whether the call's session resumed an earlier one (TLS_RESUMED) or made a full handshake
 * (TLS_FULL), from the library's own flag: OpenSSL 3.0's `hit` (read by SSL_session_reused)
 * or GnuTLS's internals.resumed (gnutls_session_is_resumed), at the offset the loader read
 * from that accessor's code (src/tls.rs). 0 when the offset is not known.
 */
static __always_inline __u8 tls_resumed(struct tls_call *call)
{
	__u64 offset = (call->cookie & ((1ULL << TLS_LIB_SHIFT) - 1)) >> 8;
	void *at = (void *)(call->ssl + offset);
	__u32 flag = 0;
	__u8 byte = 0;
	long err;

	switch (call->cookie & 0xff) {
	case 1:
		err = bpf_probe_read_user(&byte, 1, at);
		flag = byte;
		break;
	case 4:
		err = bpf_probe_read_user(&flag, 4, at);
		break;
	default:
		return 0;
	}
	if (err)
		return 0;
	return flag ? TLS_RESUMED : TLS_FULL;
}

/* `n` > 0 bytes of plaintext moved by the call on the connection: bytes, boundaries, head. */
static __always_inline void tls_plaintext(struct tls_call *call, struct conn *conn, __u64 n,
					  __u64 now)
{
	struct req_stats *r = &conn->ev.req;
	__u64 moved = 0;

	if (!call->write && call->conn_id == conn->ev.conn_id && r->cpu_ns >= call->cpu_ns)
		moved = r->cpu_ns - call->cpu_ns;
	if (!(conn->ev.tls & TLS_PLAIN)) {
		if (conn->ev.tls & TLS_SEEN) {
			tls_cut(conn, call->write ? 0 : moved, TLS_HANDSHAKE | tls_resumed(call));
		} else {
			/* Followed from the middle of the connection (opened before the probes, or
			 * before a resume): the ciphertext so far is no request's head. */
			r->bytes_in = 0;
			r->bytes_out = 0;
			r->head_len = 0;
			r->first_in_ns = 0;
		}
		conn->ev.tls |= TLS_SEEN | TLS_PLAIN;
	} else if (!call->write && conn->wrote) {
		tls_cut(conn, moved, 0);
	}
	if (call->write) {
		r->bytes_out += n;
		r->last_out_ns = now;
		conn->wrote = 1;
		return;
	}
	head_read(r, call->buf, n);
	if (r->bytes_in == 0) {
		r->first_in_ns = now;
		if (!(conn->ev.tls & TLS_READ) && h2_preface(r)) {
			conn->ev.tls |= TLS_H2 | TLS_READ;
			h2_frames(conn, call->buf, n, H2_PREFACE_LEN);
			r->bytes_in += n;
			return;
		}
	}
	conn->ev.tls |= TLS_READ;
	if (conn->ev.tls & TLS_H2)
		h2_frames(conn, call->buf, n, 0);
	r->bytes_in += n;
}

/* A TLS call begins on the current thread; `call` is where its state is kept until it returns
 * (the thread's for a C library, the goroutine's for Go: gotls.bpf.h). */
static __always_inline int tls_call_enter(struct task_struct *task, struct tls_call *call,
					  void *ssl, void *buf, void *len_ptr, __u8 write)
{
	struct tls_key key = { .ssl = (__u64)ssl, .tgid = task->tgid };
	struct task_ctx *c;
	struct tls_fd *fd;
	struct conn *conn;

	c = bpf_task_storage_get(&task_ctx, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!c)
		return 0;
	fresh(c);
	charge(c, serving(c, key.tgid), cpu_clock(bpf_ktime_get_ns()));
	fd = bpf_map_lookup_elem(&tls_fds, &key);
	if (fd) {
		conn = conn_of(key.tgid, fd->fd);
		if (conn && conn->ev.conn_id == fd->conn_id) {
			c->conn_fd1 = fd->fd + 1;
			settle(c, conn);
		} else
			bpf_map_delete_elem(&tls_fds, &key);
	}
	conn = serving(c, key.tgid);
	call->buf = (__u64)buf;
	call->len_ptr = (__u64)len_ptr;
	call->ssl = key.ssl;
	call->write = write;
	call->conn_id = conn ? conn->ev.conn_id : 0;
	call->fd1 = conn ? c->conn_fd1 : 0;
	call->cpu_ns = conn ? conn->ev.req.cpu_ns : 0;
	call->active = 1;
	return 0;
}

/*
 * The tree's calls into its TLS libraries so far. A pause detaches the uprobes only when this
 * moved since the last pause: closing a uprobe waits for the kernel's grace periods (0.1 s
 * each, one after another), and the churn costs the server about 5 % at a pause a second
 * (bench/RESULTS.md). Uprobes of functions the tree does not call stay attached, paused, and
 * cost nothing until it does.
 */
__u64 tls_entries;

/*
 * The same per library file, by the number in the top byte of the uprobe's cookie (the low
 * bytes say where the session tells it resumed: offset << 8 | width, 0 when unknown). A library
 * the tree maps but never calls (PostgreSQL's libssl and libgnutls without TLS) is not said to
 * carry plaintext.
 */
__u64 tls_lib_entries[TLS_LIBS];

static __always_inline void tls_entered(void *ctx)
{
	__u32 lib = bpf_get_attach_cookie(ctx) >> TLS_LIB_SHIFT;

	__sync_fetch_and_add(&tls_entries, 1);
	if (lib < TLS_LIBS)
		__sync_fetch_and_add(&tls_lib_entries[lib], 1);
}

/* `prog`: the entry program's PROG_* (its own cost, counted on the tree's calls alone). */
static __always_inline int tls_enter(void *ctx, __u32 prog, void *ssl, void *buf, void *len_ptr,
				     __u8 write)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct tls_call *call;
	__u64 t;

	if (!attribute || !tracked_tgid(task->tgid))
		return 0;
	tls_entered(ctx);
	if (paused)
		return 0;
	t = own_start(prog);
	call = bpf_task_storage_get(&tls_calls, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (call) {
		tls_call_enter(task, call, ssl, buf, len_ptr, write);
		call->cookie = bpf_get_attach_cookie(ctx);
	}
	own_end(prog, t);
	return 0;
}

/* The TLS call `call` returns on the current thread. `ret`: SSL_read/SSL_write's byte count,
 * or the _ex variants' 1 for success. */
static __always_inline int tls_call_exit(struct task_struct *task, struct tls_call *call,
					 long ret)
{
	struct tls_key key = { .tgid = task->tgid };
	struct task_ctx *c;
	struct tls_fd fd = {};
	struct conn *conn;
	__u64 n = ret, now;

	if (!call || !call->active)
		return 0;
	call->active = 0;
	if (call->len_ptr) {
		n = 0;
		if (ret != 1 || bpf_probe_read_user(&n, sizeof(n), (void *)call->len_ptr))
			return 0;
	}
	if (ret <= 0 || n == 0)
		return 0;
	c = bpf_task_storage_get(&task_ctx, task, 0, 0);
	if (!c)
		return 0;
	fresh(c);
	now = bpf_ktime_get_ns();
	conn = serving(c, key.tgid);
	charge(c, conn, cpu_clock(now));
	/* The socket write inside SSL_write ended serving (held time): the call was still its. */
	if (!conn && call->fd1) {
		conn = conn_of(key.tgid, call->fd1 - 1);
		if (!conn || conn->ev.conn_id != call->conn_id)
			return 0;
		c->conn_fd1 = call->fd1;
		settle(c, conn);
	}
	if (!conn)
		return 0;
	key.ssl = call->ssl;
	fd.conn_id = conn->ev.conn_id;
	fd.fd = c->conn_fd1 - 1;
	bpf_map_update_elem(&tls_fds, &key, &fd, BPF_ANY);
	tls_plaintext(call, conn, n, now);
	if (call->write)
		hold(c);
	return 0;
}

SEC("uprobe.multi")
int BPF_KPROBE(ssl_read_enter, void *ssl, void *buf)
{
	return tls_enter(ctx, PROG_SSL_READ_ENTER, ssl, buf, NULL, 0);
}

SEC("uprobe.multi")
int BPF_KPROBE(ssl_read_ex_enter, void *ssl, void *buf, __u64 num, void *readbytes)
{
	return tls_enter(ctx, PROG_SSL_READ_EX_ENTER, ssl, buf, readbytes, 0);
}

SEC("uprobe.multi")
int BPF_KPROBE(ssl_write_enter, void *ssl, void *buf)
{
	return tls_enter(ctx, PROG_SSL_WRITE_ENTER, ssl, buf, NULL, 1);
}

SEC("uprobe.multi")
int BPF_KPROBE(ssl_write_ex_enter, void *ssl, void *buf, __u64 num, void *written)
{
	return tls_enter(ctx, PROG_SSL_WRITE_EX_ENTER, ssl, buf, written, 1);
}

/* One return program for all four: the call's kind was saved at its entry. */
SEC("uretprobe.multi")
int BPF_KRETPROBE(ssl_exit, int ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct tls_call *call = bpf_task_storage_get(&tls_calls, task, 0, 0);
	__u64 t;

	if (!call || !call->active)
		return 0;
	t = own_start(PROG_SSL_EXIT);
	tls_call_exit(task, call, ret);
	own_end(PROG_SSL_EXIT, t);
	return 0;
}

#endif
