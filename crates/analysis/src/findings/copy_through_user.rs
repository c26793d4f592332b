//! A file served by reading it into a buffer and writing the buffer to the socket, chunk after
//! chunk (read/pread/preadv, then write/writev/sendmsg): every byte crosses into user space and
//! back, two syscalls per chunk. A 1 MiB file served so in 4-8 KiB chunks cost 2-10x its twin
//! using sendfile, at 95 % system time; the calls are too large for kernel-bound or small-writes.
//! Debian's nginx with `sendfile off; output_buffers 1 4k;` served a 48 KiB file at 74 µs of
//! CPU per request, 2.8x its `sendfile on;` twin's 26 µs.
//!
//! - signal 1: **≥ 32 KiB per request read from regular files, and ≥ 32 KiB written to sockets by
//!   write-like calls** (write, writev, send, sendto, sendmsg, sendmmsg: not sendfile or
//!   splice, which do not come back through user space): a small response is cheap however it
//!   is sent;
//! - signal 2: **the file read in chunks: ≥ 4 reads per request, of < 64 KiB on average**;
//! - a third signal when system time is **≥ 75 % of CPU**.
//! - Yields to small-writes, which names the same writes when the chunks are under 1 KiB;
//!   kernel-bound yields to it.
//! - CPU share: the CPU in the file reads (sendfile or splice take the pages without them) and
//!   in the socket writes beyond one per 64 KiB, from the samples in those calls where the
//!   profile has kernel chains; without them, their wall time, at most the phase's system CPU.

use reqcost_record::{FdKind, IoDirection};

use super::facts::{Ctx, Draft, Facts, WRITE_CALLS};
use super::small_writes;
use super::{CarriedBy, Needs, Rule};

pub(super) const RULE: Rule = Rule {
    id: "copy-through-user",
    seed: None,
    needs: &[Needs::Kernel, Needs::Requests],
    carried_by: CarriedBy::SyscallClasses,
    judge,
};

/// Signal 1: bytes per request read from files, and written to sockets, from this many.
const MIN_BYTES: f64 = 32768.0;
/// Signal 2: file reads per request from this many...
const MIN_READS: f64 = 4.0;
/// ... moving less than this many bytes each on average.
const CHUNK_BELOW: f64 = 65536.0;
/// A third signal: system time at least this share of the CPU.
const MIN_SYSTEM: f64 = 0.75;
/// What one socket write can carry: the writes a response needs, the rest being overhead.
const BYTES_PER_NEEDED_WRITE: f64 = 65536.0;

const READ_CALLS: &[&str] = &["read", "pread64", "readv", "preadv", "preadv2"];

/// A file copied to a socket through a user-space buffer, in chunks.
pub(super) fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    if small_writes::judge(ctx).is_some() {
        return None;
    }
    let (reads, read_bytes) = f.io(IoDirection::Read, FdKind::File);
    let (writes, write_bytes) = socket_writes(f);
    // Signal 1: a large file read and as much written through write-like calls; signal 2: the
    // file read in chunks.
    if read_bytes < MIN_BYTES || write_bytes < MIN_BYTES || reads < MIN_READS {
        return None;
    }
    let chunk = read_bytes / reads;
    if chunk >= CHUNK_BELOW {
        return None;
    }
    let system = f.system_share();
    let all_reads: u64 = k
        .io
        .iter()
        .filter(|s| s.direction == IoDirection::Read && READ_CALLS.contains(&s.syscall.as_str()))
        .map(|s| s.calls)
        .sum();
    let file_part = reads * f.ok / (all_reads as f64).max(1.0);
    let in_reads = ctx.in_calls(f, READ_CALLS);
    let in_writes = ctx.in_calls(f, WRITE_CALLS);
    let needed = (write_bytes / BYTES_PER_NEEDED_WRITE).ceil().max(1.0);
    let ns = in_reads.cpu_ns * file_part + in_writes.cpu_ns * (1.0 - needed / writes).max(0.0);
    let kib = |b: f64| b / 1024.0;
    let mut evidence = vec![
        format!(
            "{reads:.1} file reads per request of {:.1} KiB each: {:.0} KiB per request read from files",
            kib(chunk),
            kib(read_bytes)
        ),
        format!(
            "{writes:.1} socket writes per request of {:.1} KiB each: {:.0} KiB per request written through user space, {:.0} KiB by sendfile/splice",
            kib(write_bytes / writes),
            kib(write_bytes),
            kib(sent_in_kernel(f))
        ),
        in_reads.describe("file and socket reads"),
        in_writes.describe("write-like syscalls"),
    ];
    evidence.extend(system.map(|s| format!("system time {:.0} % of CPU", s * 100.0)));
    let lseeks = f.calls(&["lseek"]);
    if lseeks >= 1.0 {
        evidence.push(format!("{lseeks:.1} lseek per request between the chunks"));
    }
    Some(Draft {
        title: format!(
            "files copied to sockets through user space: {reads:.0} reads and {writes:.0} writes of {:.0} KiB per request",
            kib(chunk)
        ),
        evidence,
        cpu_share: f.share(ns),
        phase: f.phase.name.clone(),
        fix: "send the file with sendfile(2) (or splice, or mmap and one write): the kernel moves \
              the pages to the socket without the copy into a buffer and back (nginx: \
              `sendfile on;`; apache2: `EnableSendfile On`)",
        signals: 2 + usize::from(system.is_some_and(|s| s >= MIN_SYSTEM)),
    })
}

/// (calls, bytes) per request of write-like calls on sockets, sendfile and splice left out.
fn socket_writes(f: &Facts) -> (f64, f64) {
    let Some(k) = f.kernel else {
        return (0.0, 0.0);
    };
    let (calls, bytes) = k
        .io
        .iter()
        .filter(|s| {
            s.direction == IoDirection::Write
                && s.fd_kind == FdKind::Socket
                && WRITE_CALLS.contains(&s.syscall.as_str())
        })
        .fold((0, 0), |(c, b), s| (c + s.calls, b + s.bytes));
    (calls as f64 / f.ok, bytes as f64 / f.ok)
}

/// Bytes per request that sendfile and splice moved to sockets.
fn sent_in_kernel(f: &Facts) -> f64 {
    let (_, all) = f.io(IoDirection::Write, FdKind::Socket);
    all - socket_writes(f).1
}
