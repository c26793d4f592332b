//! quicly's profile was topped by `select()` and the kernel stack, and CPU grew with 5, 10, 15
//! connections.
//!
//! - signal 1: **select/pselect6/poll/ppoll hand the kernel ≥ 16 fds per call** on average;
//! - signal 2: **≤ 25 % of those fds are ready** per call;
//! - a third signal when sampled stacks show ≥ 5 % in do_select/do_sys_poll.
//! - CPU share: sampled share in do_select/do_sys_poll, else 50 ns per fd scanned (also when the
//!   profile has no such frame; the evidence then says the share is estimated and why).
//! - `reqcost sweep` flags the same pathology from the other side: CPU per request at the highest
//!   concurrency ≥ 1.5x the lowest, with the 95 % interval of that ratio (over the interleaved
//!   repetitions of each level) above 1, rising steadily (no step down of more than 10 %), while
//!   the fds handed to select/poll/epoll_wait per request at least double; without eBPF figures to
//!   confirm, CPU per request must double ([sweep.md](sweep.md)).

use super::facts::{kernel_split_evidence, profile_share, unsampled, Ctx, Draft};
use super::{CarriedBy, Needs, Rule};

pub(super) const RULE: Rule = Rule {
    id: "poll-scaling",
    seed: Some("seeds/004"),
    needs: &[Needs::Kernel],
    carried_by: CarriedBy::CpuClasses,
    judge,
};

/// Signal 1: fds handed to the kernel per select/poll call, on average, from this many.
const MIN_FDS_PER_CALL: f64 = 16.0;
/// Signal 2: at most this share of them ready.
const MAX_READY: f64 = 0.25;
/// A third signal: at least this share of the samples in the kernel's scan.
const MIN_SAMPLED_SHARE: f64 = 0.05;
/// Kernel work per fd scanned, for the CPU share when no sample says it.
const NS_PER_FD_SCANNED: f64 = 50.0;

/// seeds/004: select()/poll() over every connection, each call scanning them all.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    let scans: Vec<_> = k
        .waits
        .iter()
        .filter(|w| matches!(w.syscall.as_str(), "select" | "pselect6" | "poll" | "ppoll"))
        .collect();
    let returns: u64 = scans.iter().map(|w| w.returns).sum();
    if returns == 0 {
        return None;
    }
    let asked: u64 = scans.iter().map(|w| w.fds_asked).sum();
    let ready: u64 = scans.iter().map(|w| w.ready).sum();
    let fds_per_call = asked as f64 / returns as f64;
    let ready_ratio = ready as f64 / asked.max(1) as f64;
    // Signal 1: each call hands the kernel many fds; signal 2: few of them are ever ready.
    if fds_per_call < MIN_FDS_PER_CALL || ready_ratio > MAX_READY {
        return None;
    }
    let calls = returns as f64 / f.ok;
    let scanned = asked as f64 / f.ok;
    let from_profile = ctx.profile.and_then(|p| {
        profile_share(p, |name| {
            name.contains("do_select")
                || name.contains("do_sys_poll")
                || name.contains("core_sys_select")
        })
    });
    // Without stacks: about 50 ns of kernel work per fd scanned.
    let share = from_profile.unwrap_or_else(|| f.share(scanned * NS_PER_FD_SCANNED));
    let names: Vec<&str> = scans.iter().map(|w| w.syscall.as_str()).collect();
    let estimated = ctx.profile.filter(|_| from_profile.is_none()).map(|p| {
        format!(
            "CPU share estimated at 50 ns per fd scanned: {}",
            unsampled(p, "do_select/do_sys_poll")
        )
    });
    Some(Draft {
        title: format!(
            "{} scans {fds_per_call:.0} fds per call to find {:.1} ready: cost grows with connections",
            names.join("/"),
            ready as f64 / returns as f64
        ),
        evidence: [
            format!("{calls:.1} {} calls per request", names.join("/")),
            format!("{fds_per_call:.0} fds asked per call, {:.1} % ready", ready_ratio * 100.0),
            format!("{scanned:.0} fds scanned per request"),
        ]
        .into_iter()
        .chain(estimated)
        .chain(ctx.profile.and_then(kernel_split_evidence))
        .collect(),
        cpu_share: share,
        phase: f.phase.name.clone(),
        fix: "use epoll (or io_uring), whose cost follows ready events rather than open connections",
        signals: 2 + usize::from(from_profile.is_some_and(|s| s >= MIN_SAMPLED_SHARE)),
    })
}
