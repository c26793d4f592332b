//! A gopher server whose responses were written one line per `write(2)`: 17 minutes of CPU against
//! 45 seconds for the TLS server that buffered.
//!
//! - signal 1: **≥ 8 write-like calls on sockets per request** (write, writev, send, sendto,
//!   sendmsg, sendmmsg);
//! - signal 2: **< 1024 B per call** on average; a third signal when < 256 B.
//! - CPU share: the CPU inside write-like syscalls beyond one call per 64 KiB actually needed;
//!   a write waiting for room in a slow peer's send buffer waits off CPU, given apart. The CPU
//!   is taken from the samples in those calls where the profile has kernel chains; without them,
//!   the calls' wall time, at most the phase's system CPU, said so.

use reqcost_record::{FdKind, IoDirection};

use super::facts::{Ctx, Draft, WRITE_CALLS};
use super::{CarriedBy, Needs, Rule};

pub(super) const RULE: Rule = Rule {
    id: "small-writes",
    seed: Some("seeds/001"),
    needs: &[Needs::Kernel, Needs::Requests],
    carried_by: CarriedBy::SyscallClasses,
    judge,
};

/// Signal 1: at least this many write-like calls on sockets per request.
const MIN_WRITES: f64 = 8.0;
/// Signal 2: bytes per call on average below this.
const SMALL_BYTES: f64 = 1024.0;
/// A third signal: bytes per call on average below this.
const TINY_BYTES: f64 = 256.0;
/// What one write can carry: the writes a response needs, the rest being overhead.
const BYTES_PER_NEEDED_WRITE: f64 = 65536.0;

/// seeds/001: a response written in many small pieces, each a syscall.
pub(super) fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    if !f.usable() {
        return None;
    }
    let (calls, bytes) = f.io(IoDirection::Write, FdKind::Socket);
    let mean = if calls > 0.0 { bytes / calls } else { 0.0 };
    // Signal 1: many socket writes per request; signal 2: each carries little data.
    if calls < MIN_WRITES || mean >= SMALL_BYTES {
        return None;
    }
    let mut signals = 2;
    if mean < TINY_BYTES {
        signals += 1;
    }
    // One write per 64 KiB would do; the rest is overhead.
    let needed = (bytes / BYTES_PER_NEEDED_WRITE).ceil().max(1.0);
    let inside = ctx.in_calls(f, WRITE_CALLS);
    let wasted = inside.cpu_ns * (1.0 - needed / calls).max(0.0);
    Some(Draft {
        title: format!(
            "{calls:.0} socket writes per request of {mean:.0} B each: the response goes out in tiny pieces"
        ),
        evidence: vec![
            format!("{calls:.1} write-like calls on sockets per request"),
            format!("{mean:.0} B per call on average, {bytes:.0} B per request"),
            inside.describe("write-like syscalls"),
        ],
        cpu_share: f.share(wasted),
        phase: f.phase.name.clone(),
        fix: "buffer the response in user space and write it with one write/writev (or sendfile); \
              on sockets, cork (TCP_CORK/MSG_MORE) while assembling",
        signals,
    })
}
