//! - signal 1: **≥ 20 % of requests took 35–60 ms or 190–260 ms**, Linux's delayed-ACK timeouts;
//! - signal 2: **≥ 2 socket writes per request of < 1448 B** (one MSS), the pattern Nagle holds back.
//! - CPU share: none (it costs latency, not CPU); shown as minor.

use std::ops::RangeInclusive;

use reqcost_record::{FdKind, IoDirection};

use super::facts::{Ctx, Draft};
use super::{CarriedBy, Needs, Rule};

pub(super) const RULE: Rule = Rule {
    id: "nagle",
    seed: Some("seeds/001 (TCP_NODELAY was the first suspect)"),
    needs: &[Needs::Kernel, Needs::Requests],
    carried_by: CarriedBy::SyscallClasses,
    judge,
};

/// Latency buckets (upper bounds, µs) at Linux's delayed-ACK timeouts: ~40 ms, and ~200 ms.
const DELAYED_ACK_US: [RangeInclusive<u64>; 2] = [35_000..=60_000, 190_000..=260_000];
/// Signal 1: at least this share of the requests in those buckets.
const MIN_STALLED: f64 = 0.2;
/// Signal 2: socket writes per request from this many...
const MIN_WRITES: f64 = 2.0;
/// ... each of less than one MSS on average.
const MSS_BYTES: f64 = 1448.0;

/// seeds/001: small writes meet delayed ACKs, and responses stall for 40 ms.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    if !f.usable() {
        return None;
    }
    let c = &f.phase.client;
    let stalled: u64 = c
        .latency_histogram
        .iter()
        .filter(|b| DELAYED_ACK_US.iter().any(|r| r.contains(&b.le_us)))
        .map(|b| b.count)
        .sum();
    let stalled_share = stalled as f64 / c.ok.max(1) as f64;
    let (writes, bytes) = f.io(IoDirection::Write, FdKind::Socket);
    // Signal 1: a cluster of latencies at the delayed-ACK timeouts; signal 2: several small
    // socket writes per request, the pattern Nagle holds back.
    if stalled_share < MIN_STALLED || writes < MIN_WRITES || bytes / writes >= MSS_BYTES {
        return None;
    }
    Some(Draft {
        title: format!(
            "{:.0} % of requests stall ~40 ms: small writes held back by Nagle's algorithm until the delayed ACK",
            stalled_share * 100.0
        ),
        evidence: vec![
            format!("{stalled} of {} requests took 35–60 ms or 190–260 ms (p50 {:.1} ms)", c.ok, c.latency.p50_us / 1000.0),
            format!("{writes:.1} socket writes of {:.0} B per request", bytes / writes),
        ],
        cpu_share: 0.0,
        phase: f.phase.name.clone(),
        fix: "send each response with one write (writev), or set TCP_NODELAY",
        signals: 2,
    })
}
