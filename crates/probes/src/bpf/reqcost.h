/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * Layout shared by the BPF program and its loader. The loader reads the enums through the types
 * the skeleton generates from the object's BTF (reqcost.bpf.c keeps them there); src/layout.rs
 * mirrors the #defines, and unit tests check it against them and the built object's map sizes.
 *
 * All aggregates are per-CPU arrays with a single entry whose value is a flat array of u64, so
 * user space reads each of them with one lookup and the hot path never takes a lock.
 */
#ifndef REQCOST_H
#define REQCOST_H

/* Syscall numbers at or above this are not counted (x86_64 ends near 470). */
#define MAX_SYSCALLS 512
/*
 * The kernel's uretprobe syscall (x86-64), which a return probe's trampoline makes in the
 * server's thread on every return (Linux 6.11+): the probes' cost, never the server's call.
 */
#define NR_URETPROBE 335
/* One bit per possible thread group id: PID_MAX_LIMIT on 64-bit kernels (512 KiB of bits). */
#define PID_LIMIT (4 * 1024 * 1024)
#define TRACKED_WORDS (PID_LIMIT / 64)
/* Distinct (syscall, errno) pairs and distinct ioctl request codes kept. */
#define MAX_ERRNO_KEYS 2048
#define MAX_IOCTL_KEYS 512
/* Distinct paths opened kept, and the bytes of each kept (longer ones are cut). */
#define MAX_OPEN_PATHS 512
#define OPEN_PATH_LEN 128
/* Upstream destinations kept, and the bytes of a Unix path kept. */
#define MAX_DESTS 256
#define DEST_PATH_LEN 108
/*
 * TLS library files counted apart (tls_lib_entries): the loader numbers each file it probes
 * and puts the number in the top byte of its uprobes' cookie.
 */
#define TLS_LIBS 16
#define TLS_LIB_SHIFT 56

/* fd kinds, resolved from the file's inode. */
#define KIND_SOCKET 0
#define KIND_FILE 1  /* regular file */
#define KIND_PIPE 2  /* pipe or FIFO */
#define KIND_ANON 3  /* anonymous inode: eventfd, timerfd, signalfd, epoll */
#define KIND_OTHER 4 /* tty, device, directory, or an fd not open */
#define KIND_UDP 5   /* a UDP (or UDP-Lite) socket: counted apart from the other sockets */
#define NR_KINDS 6

/* Read-like and write-like syscalls, in this order. */
#define OP_READ 0
#define OP_PREAD64 1
#define OP_READV 2
#define OP_PREADV 3
#define OP_PREADV2 4
#define OP_RECVFROM 5
#define OP_RECVMSG 6
#define OP_RECVMMSG 7
#define OP_WRITE 8
#define OP_PWRITE64 9
#define OP_WRITEV 10
#define OP_PWRITEV 11
#define OP_PWRITEV2 12
#define OP_SENDTO 13
#define OP_SENDMSG 14
#define OP_SENDMMSG 15
#define OP_SENDFILE 16
#define OP_SPLICE 17
#define NR_IO_OPS 18

/* Byte-size buckets: 0 holds zero-byte calls, k >= 1 holds sizes in [2^(k-1), 2^k). */
#define NR_SIZE_BUCKETS 36

/* Readiness waits. */
#define WAIT_EPOLL_WAIT 0
#define WAIT_EPOLL_PWAIT 1
#define WAIT_EPOLL_PWAIT2 2
#define WAIT_POLL 3
#define WAIT_PPOLL 4
#define WAIT_SELECT 5
#define WAIT_PSELECT6 6
#define NR_WAIT_OPS 7
/* u64 fields per wait op: successful returns, returns with nothing ready, ready total, fds asked. */
#define WAIT_FIELDS 4

/* Run-queue delay buckets: 0 holds < 1 µs, k >= 1 holds [2^(k-1), 2^k) µs. */
#define NR_RUNQ_BUCKETS 32

/*
 * Class of each syscall number, written by the loader into the read-only array `sys_class`
 * before load, so that the program itself carries no architecture's numbering.
 */
#define CLS_NONE 0
#define CLS_IO 1 /* CLS_IO + io op */
#define CLS_WAIT (CLS_IO + NR_IO_OPS) /* CLS_WAIT + wait op */
#define CLS_CLOSE (CLS_WAIT + NR_WAIT_OPS)
#define CLS_IOCTL (CLS_CLOSE + 1)
#define CLS_EPOLL_CTL (CLS_CLOSE + 2)
#define CLS_MMAP (CLS_CLOSE + 3)
#define CLS_MUNMAP (CLS_CLOSE + 4)
#define CLS_ACCEPT (CLS_CLOSE + 5)
#define CLS_NO_ERRORS (CLS_CLOSE + 6) /* rt_sigreturn returns a restored register, not an error */
#define CLS_SHUTDOWN (CLS_CLOSE + 7)
#define CLS_OPEN (CLS_CLOSE + 8) /* open: the path is the first argument */
#define CLS_OPENAT (CLS_CLOSE + 9) /* openat, openat2: the second */
#define CLS_CONNECT (CLS_CLOSE + 10) /* the tree opens a connection: an upstream call */

/* u64 fields per syscall in the `sys` map. */
#define SYS_COUNT 0
#define SYS_TIME_NS 1
#define SYS_ERRORS 2
#define SYS_FIELDS 3

/* Slots of the `misc` map: counters, then the wait fields and the run-queue histogram. */
enum misc_slot {
	CTR_WAKEUPS,
	CTR_SWITCH_VOLUNTARY,
	CTR_SWITCH_INVOLUNTARY,
	CTR_RUNQ_WAITS,
	CTR_RUNQ_NS,
	CTR_FAULTS_USER,
	CTR_FAULTS_KERNEL,
	CTR_ACCEPTS,
	CTR_MMAP_BYTES,
	CTR_MUNMAP_BYTES,
	CTR_FORKS,
	CTR_THREADS,
	CTR_EXITS,
	CTR_EPOLL_ADD,
	CTR_EPOLL_DEL,
	CTR_EPOLL_MOD,
	CTR_EPOLL_OTHER,
	CTR_LOST_TASKS,
	CTR_LOST_ERRNOS,
	CTR_LOST_IOCTLS,
	CTR_LOST_RUNQ,
	CTR_LOST_OPENS,
	CTR_URETPROBE_CALLS, /* the uretprobe syscalls of the tree's threads */
	CTR_URETPROBE_NS,    /* their time, entry to exit: charged to no request */
	CTR_CLOSES, /* CTR_CLOSES + fd kind */
	NR_COUNTERS = CTR_CLOSES + NR_KINDS,
	MISC_WAITS = NR_COUNTERS,
	MISC_RUNQ_HIST = MISC_WAITS + NR_WAIT_OPS * WAIT_FIELDS,
	MISC_LEN = MISC_RUNQ_HIST + NR_RUNQ_BUCKETS,
};

/*
 * `io_tot` holds calls, then bytes, then messages per (op, kind): a message is one per call,
 * or the messages handled (the return value) for sendmmsg/recvmmsg. `io_hist` holds the size
 * buckets per (op, kind).
 */
#define IO_SLOTS (NR_IO_OPS * NR_KINDS)
#define IO_TOT_LEN (3 * IO_SLOTS)
#define IO_HIST_LEN (IO_SLOTS * NR_SIZE_BUCKETS)

/*
 * Per-request attribution: a hash of open TCP connections per (tgid, fd), one `req_event` per
 * finished request through the `requests` ring buffer, and the cumulative counters `req_ctr`.
 */
#define MAX_CONNS 65536
/* Call-chain sample tags kept per thread (a power of two), and threads followed at once. */
#define SAMPLE_TAGS 128
#define MAX_SAMPLED_THREADS 2048
#define RINGBUF_BYTES (4 * 1024 * 1024)
#define HEAD_MAX 128
/*
 * Syscalls of a request kept in its event, with exact counts: its TOP_SYSCALLS most made. Its
 * first distinct ones are counted in slots of its own (the hot path); any further one in
 * `spilled` by (connection, syscall), which the request's end ranks into the slots and empties,
 * so a busy-wait's ioctl, made after its set-up calls, is counted whatever came first (issue 40).
 */
#define TOP_SYSCALLS 16
/* (connection, syscall) counts past the slots of the requests open at once. */
#define MAX_SPILLED 32768

/* Hops of a stack followed (docs/stack.md): 0 the target, 1.. its local upstreams. */
#define MAX_HOPS 8

/* Counters of the `req_ctr` map, one set per hop. */
enum req_counter {
	RCTR_ATTRIBUTED_NS,
	RCTR_UNATTRIBUTED_NS,
	RCTR_EVENTS,
	RCTR_DROPPED,
	RCTR_CONN_OVERFLOW,
	/* Of the unattributed: time held after a thread's last socket call, released at its exit. */
	RCTR_EXIT_NS,
	/* Of the unattributed: time of threads that never served a connection (start-up, pools). */
	RCTR_UNSERVED_NS,
	/* Syscalls counted on their request but on no syscall of it: `spilled` was full. */
	RCTR_UNRANKED,
	/* CPU held now, in neither counter above until a socket call claims it or it is released:
	 * a level, not a count (a per-CPU entry may wrap below zero; their sum does not). */
	RCTR_HELD_NS,
	/* What the counters hold beyond the scheduler's count of the tree's threads, as of each
	 * thread's latest event (attribution.bpf.h, `set_lead`): a level, signed, wrapping too. */
	RCTR_LEAD_NS,
	RCTR_LEN,
};

/*
 * req_event.tls: what a connection's TLS is (src/bpf/tls.bpf.h, docs/tls.md). A connection a
 * client hello opened reads ciphertext on its socket: no request boundary is drawn there. Once
 * its plaintext is seen through a hook on the TLS library, the plaintext draws them, and what
 * came before (the handshake) is one event of its own.
 */
#define TLS_SEEN 1
#define TLS_PLAIN 2
#define TLS_HANDSHAKE 4
/* Its plaintext (TLS, or the socket's own bytes for h2c) began with the HTTP/2 preface: streams
 * are counted from its frames (h2.bpf.h). */
#define TLS_H2 8
/* Plaintext was read on it: only its first plaintext can be the HTTP/2 preface. */
#define TLS_READ 16
/* A handshake event whose session, as its TLS library keeps it, resumed an earlier one, or
 * did not (a full handshake); neither when the library's flag is not known. */
#define TLS_RESUMED 32
#define TLS_FULL 64
/* Frames parsed per plaintext read at most. */
#define H2_MAX_FRAMES 1024
/* The largest part of a HEADERS or CONTINUATION frame one read hands to user space: the
 * default SETTINGS_MAX_FRAME_SIZE, so a whole frame of any client that keeps to it. */
#define H2_PIECE_MAX 16384
/* h2_piece.type of the record that says the connection's frames can no longer be followed. */
#define H2_SYNC_LOST 0xff
/* h2_conn.skip once the frames can no longer be followed. */
#define H2_LOST 0xffffffff

/*
 * The probes' own cost on the tree's events, per program (`own`): runs on an event of a tree
 * thread (its syscalls and faults, its switches in or out, its wakeups, its forks and exits),
 * and their run time, timed on one run in OWN_SAMPLE and scaled (the clock reads would cost
 * more than a fault's or a wakeup's program).
 */
enum own_prog {
	PROG_SYS_ENTER,
	PROG_SYS_EXIT,
	PROG_SCHED_SWITCH,
	PROG_SCHED_WAKEUP,
	PROG_SCHED_WAKEUP_NEW,
	PROG_PAGE_FAULT_USER,
	PROG_PAGE_FAULT_KERNEL,
	PROG_SCHED_PROCESS_FORK,
	PROG_SCHED_PROCESS_EXIT,
	/* The TLS uprobes (tls.bpf.h): a run on a tree thread's call of the TLS library. */
	PROG_SSL_READ_ENTER,
	PROG_SSL_READ_EX_ENTER,
	PROG_SSL_WRITE_ENTER,
	PROG_SSL_WRITE_EX_ENTER,
	PROG_SSL_EXIT,
	NR_PROGS,
};
/* u64 fields per program in the `own` map. */
enum own_field {
	OWN_RUNS,
	OWN_NS,
	OWN_FIELDS,
};
#define OWN_LEN (NR_PROGS * OWN_FIELDS)
/* The `own` map's entries: the target's tree, and its upstream hops' trees together. */
enum own_tree {
	OWN_FRONT,
	OWN_UPSTREAM,
	OWN_TREES,
};
#define OWN_SAMPLE 16

/* A syscall of the request and its count; id_plus_one is 0 in a slot not taken. */
struct top_slot {
	__u32 id_plus_one;
	__u32 count;
};

/* What a request cost, zeroed when the next request on the connection starts. */
struct req_stats {
	__u64 cpu_ns;
	__u64 bytes_in;
	__u64 bytes_out;
	__u64 first_in_ns;
	__u64 last_out_ns;
	__u64 end_ns; /* when the request ended: the next request's read, or the close */
	/* The entry of the last syscall that served it, or that charged it CPU: its lifetime
	 * ends there, past its last byte out when a server polls a slow client's send queue. */
	__u64 last_ns;
	__u32 syscalls;
	__u32 head_len;
	/* The TOP_SYSCALLS syscalls the request made most, with exact counts (in no order). */
	struct top_slot top[TOP_SYSCALLS];
	/* No syscall outside `top` was made more often than this: the most made of them, plus
	 * the calls counted on no syscall when `spilled` was full (RCTR_UNRANKED). */
	__u32 unlisted_max;
	__u32 pad;
	__u8 head[HEAD_MAX];
	/* HTTP/2 connections (TLS_H2): streams the client opened in this part of the connection,
	 * and the header pieces (h2_piece) the connection had sent by its end. */
	__u32 h2_streams;
	__u32 h2_pieces;
	/* Redis and PostgreSQL connections (wire.bpf.h): the commands the client sent in this
	 * turn, and whether their count was lost (a header split between reads). */
	__u32 wire_requests;
	__u32 wire_lost;
};

/* A request's count of one syscall beyond its slots, in `spilled`. */
struct spill_key {
	__u64 conn_id;
	__u32 id;
	__u32 pad;
};

/* Names one request: the front request (hop 0) an upstream's request worked for. */
struct req_ref {
	__u64 conn_id; /* 0: none */
	__u32 pid;
	__u32 seq;
};

/* One finished request, as the ring buffer carries it (src/layout.rs decodes it). */
struct req_event {
	__u64 conn_id;
	__u32 pid;
	__u32 seq;
	__u8 peer_addr[16]; /* IPv4 in the first 4 bytes, network order */
	__u16 family;       /* AF_INET, AF_INET6 or AF_UNIX */
	__u16 peer_port;
	__u16 local_port;
	__u8 closed;
	__u8 tls; /* TLS_* flags */
	__u8 hop; /* the hop of the tree that serves it (docs/stack.md) */
	/* The tree opened the connection (connect(2)): its turns are calls to an upstream. */
	__u8 upstream_call;
	__u8 pad[6];
	struct req_ref caused_by; /* on an upstream hop, the front request it worked for */
	struct req_stats req;
};

/* Where the trees' upstream calls lead: the upstream servers to follow. */
struct dest_key {
	__u16 family; /* AF_INET, AF_INET6 or AF_UNIX */
	__u16 port;
	__u32 pad;
	__u8 addr[16];
	char path[DEST_PATH_LEN]; /* the path a Unix socket's peer is bound to (abstract: NUL first) */
};

/* What wire.bpf.h knows of a connection's commands: its kind (WIRE_*), whether this turn is
 * walked, the bytes of a message the last read ended inside, and the bulk strings left in the
 * RESP array in progress (on memcached, the data block's length read so far). On memcached,
 * the line in progress: its words so far, whether a word is open, the command's name (its
 * first 4 bytes and its length), the word that gives its data block's length, and whether
 * the walk is in step with the client's bytes since an earlier turn. */
struct wire_conn {
	__u64 skip;
	__u64 args;
	__u8 kind;
	__u8 walk;
	__u8 words;
	__u8 in_word;
	__u8 name_len;
	__u8 data_word;
	__u8 in_step;
	__u8 pad;
	__u32 name;
	__u32 pad2;
};

/* What h2.bpf.h knows of an HTTP/2 connection's frames. */
struct h2_conn {
	__u32 skip;        /* bytes of the frame the last read ended inside; H2_LOST: sync lost */
	__u32 last_stream; /* the highest stream the client opened */
	__u32 pieces;      /* header pieces numbered so far (sent, or lost: a gap) */
	/* The frame in progress: */
	__u32 stream;
	__u32 frame_len;
	__u8 type;
	__u8 flags;
	__u16 pad;
};

/*
 * A piece of a HEADERS or CONTINUATION frame the client sent: what one read held of its payload,
 * from `offset` on. It goes through the `requests` ring buffer, before the request event of the
 * part (`seq`) it was read in, so user space decodes the header blocks in order, whole.
 */
struct h2_piece {
	__u64 zero; /* 0 where a req_event has its conn_id, never 0: tells the records apart */
	__u64 conn_id;
	__u32 seq;
	__u32 piece;
	__u32 stream;
	__u32 frame_len;
	__u32 offset;
	__u32 len;
	__u8 type;
	__u8 flags;
	__u8 pad[6];
	__u8 data[H2_PIECE_MAX];
};

#endif
