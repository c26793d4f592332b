//! - signal 1: **≥ 0.9 send calls per UDP datagram sent** (sendto, sendmsg, send or write on a
//!   UDP socket: no sendmmsg batch, no UDP GSO);
//! - signal 2: **≥ 8 datagrams sent per unit of work, ≤ 2 KiB each on average**: a bulk transfer
//!   cut into packet-sized datagrams (a DNS-like server's one reply per request is not one);
//! - a third signal when **system time is ≥ 50 % of the CPU**.
//! - Judged on totals: it runs per MiB or per datagram when no request was counted (`--load`).
//! - Testbed `udp-bulk-select` (seeds/004): 1024 sendto per MiB, 1 KiB each, ~85 % system time.
//! - CPU share: the sampled share of the kernel's network send, else the time in the syscalls
//!   that sent the datagrams.

use reqcost_record::{FdKind, IoDirection};

use super::facts::{Ctx, Draft, PROFILE_MIN_SAMPLES};
use super::{CarriedBy, Needs, Rule};
use crate::profile::kernel_split;

pub(super) const RULE: Rule = Rule {
    id: "datagram-per-send",
    seed: Some("seeds/004"),
    needs: &[Needs::Kernel],
    carried_by: CarriedBy::SyscallClasses,
    judge,
};

/// Signal 1: send calls per datagram sent, from this many.
const MIN_CALLS_PER_DATAGRAM: f64 = 0.9;
/// Signal 2: datagrams sent per unit of work from this many...
const MIN_DATAGRAMS: f64 = 8.0;
/// ... of at most this many bytes on average.
const MAX_DATAGRAM: f64 = 2048.0;
/// A third signal: system time at least this share of the CPU.
const MIN_SYSTEM: f64 = 0.5;

/// One syscall per datagram where a batch or GSO would send many.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    let sent = k.udp.datagrams_sent as f64;
    let (calls, bytes) = k.io_total(IoDirection::Write, FdKind::Udp);
    if sent == 0.0 {
        return None;
    }
    let per_datagram = calls as f64 / sent;
    let datagrams = sent / f.ok;
    let size = bytes as f64 / sent;
    // Signal 1: a call per datagram; signal 2: many small datagrams per unit of work.
    if per_datagram < MIN_CALLS_PER_DATAGRAM || datagrams < MIN_DATAGRAMS || size > MAX_DATAGRAM {
        return None;
    }
    let system = f.system_share();
    let net_send = ctx
        .profile
        .filter(|p| p.samples >= PROFILE_MIN_SAMPLES)
        .and_then(kernel_split)
        .and_then(|s| {
            let n = s.parts.iter().find(|(sub, _)| sub.is_some_and(|x| x.id == "net_send"))?.1;
            Some(s.share(n))
        });
    let unit = f.phase.unit.name();
    // The time in the syscalls that sent datagrams (they may have sent on TCP too).
    let udp_calls: Vec<&str> = k
        .io
        .iter()
        .filter(|s| s.direction == IoDirection::Write && s.fd_kind == FdKind::Udp)
        .map(|s| s.syscall.as_str())
        .collect();
    let time_share = f.share(f.time_ns(&udp_calls));
    Some(Draft {
        title: format!(
            "one send call per datagram: {datagrams:.0} datagrams of {size:.0} B per {unit}, each its own syscall"
        ),
        evidence: [
            Some(format!(
                "{:.2} send calls per UDP datagram ({calls} calls, {} datagrams)",
                per_datagram, k.udp.datagrams_sent
            )),
            Some(format!("{datagrams:.0} datagrams per {unit}, {size:.0} B each on average")),
            system.map(|s| format!("system time {:.0} % of CPU", s * 100.0)),
            net_send.map(|s| format!("{:.0} % of CPU samples in the kernel's network send", s * 100.0)),
        ]
        .into_iter()
        .flatten()
        .collect(),
        cpu_share: net_send.unwrap_or(time_share),
        phase: f.phase.name.clone(),
        fix: "send datagrams in batches: sendmmsg(2) (many per call) or UDP GSO (UDP_SEGMENT: one \
              large buffer the kernel cuts into datagrams, as ngtcp2's servers do), and \
              recvmmsg or GRO on the receive side",
        signals: 2 + usize::from(system.is_some_and(|s| s >= MIN_SYSTEM)),
    })
}
