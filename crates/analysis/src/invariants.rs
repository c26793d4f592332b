//! The invariants every record's figures obey (docs/analysis.md, "Record invariants"): what
//! `reqcost report --check-record` checks, and the CLI tests on every record they produce. A
//! violation is a figure the outputs would show in contradiction with another.

use std::fmt;

use reqcost_record::{CostlyRequest, CpuTimes, GroupCost, Phase, RequestStats, RunRecord};

use crate::requests::OTHER;

/// Attributed + unattributed against the phase's CPU: each run of a thread is charged what the
/// scheduler counted for it, and the counters are read next to the server's CPU, but what a
/// thread holds at the phase's ends (one loop turn, docs/request-attribution.md) and what a
/// thread on CPU at a reading ran since its latest event are in one figure and not the other:
/// 2 % of the CPU, or 2 ms on a phase too short for 2 % to cover one loop turn (measured on
/// the CLI tests' records: 0.32 % at most over 10 ms, docs/analysis.md).
pub const CPU_TOLERANCE_SHARE: f64 = 0.02;
pub const CPU_TOLERANCE_NS: u64 = 2_000_000;
/// A share as stored against the share its figures give: shares are kept as f64 percentages
/// of rounded nanoseconds (a scaled phase rounds each figure once), so they agree to far below
/// what any output prints.
pub const SHARE_TOLERANCE_PCT: f64 = 0.001;
/// Per-request figures against their totals over the count: f64 division, relative.
pub const PER_UNIT_TOLERANCE: f64 = 1e-9;
/// Top syscalls the summary shows of a costly request: these must be provably the largest.
pub const SHOWN_SYSCALLS: usize = 3;

/// One invariant a record breaks, in one phase.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub phase: String,
    /// Which invariant: `cpu-total`, `class-shares`, `costliest`, `top-syscalls`,
    /// `share-over-100`, `per-unit-count`; with upstream hops (docs/stack.md) `hop-links` and
    /// `stack-sum`, and the others on each hop's own figures, their detail starting `hop N: `.
    pub invariant: &'static str,
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "phase {}: {}: {}",
            self.phase, self.invariant, self.detail
        )
    }
}

/// Every violation of the record's invariants, phase by phase; empty when they all hold.
pub fn check(rec: &RunRecord) -> Vec<Violation> {
    let mut out = Vec::new();
    for phase in &rec.phases {
        let mut say = |invariant: &'static str, detail: String| {
            out.push(Violation {
                phase: phase.name.clone(),
                invariant,
                detail,
            })
        };
        per_unit_count(phase, &mut say);
        if let Some(r) = phase.requests.as_ref() {
            requests(phase.server.cpu.as_ref(), r, &mut say);
            stack_sum(r, &mut say);
        }
        for h in &phase.hops {
            let Some(r) = h.requests.as_ref() else {
                continue;
            };
            let mut say_hop = |invariant: &'static str, detail: String| {
                say(invariant, format!("hop {}: {detail}", h.hop))
            };
            requests(h.cpu.as_ref(), r, &mut say_hop);
            if let Some(front) = phase.requests.as_ref() {
                hop_links(h.hop, front, r, &mut say_hop);
            }
        }
    }
    out
}

/// The invariants of one tree's requests against its CPU: the front's, or a hop's.
fn requests(cpu: Option<&CpuTimes>, r: &RequestStats, say: &mut impl FnMut(&'static str, String)) {
    if let Some(cpu) = cpu {
        cpu_total(cpu, r, say);
    }
    class_shares(r, say);
    shares_within_100(r, say);
    costliest(r, say);
    for c in &r.costliest {
        top_syscalls(c, say);
    }
}

/// A front class's cost across the stack is its own CPU and its hops' parts, to a nanosecond a
/// part (each rounded once when a phase is scaled); so is a costly request's, and the
/// costliest across the stack are by that cost, most first.
fn stack_sum(r: &RequestStats, say: &mut impl FnMut(&'static str, String)) {
    for c in &r.stack_costliest {
        let sum = c.cpu_ns + c.hops.iter().map(|h| h.cpu_ns).sum::<u64>();
        if sum.abs_diff(c.stack_cpu_ns) > c.hops.len() as u64 + 1 {
            say(
                "stack-sum",
                format!(
                    "request {}: {} ns across the stack, its own {} ns + its hops' = {sum} ns",
                    c.id, c.stack_cpu_ns, c.cpu_ns
                ),
            );
        }
    }
    if let Some(w) = r
        .stack_costliest
        .windows(2)
        .find(|w| w[0].stack_cpu_ns < w[1].stack_cpu_ns)
    {
        say(
            "stack-sum",
            format!(
                "the costliest across the stack not by its CPU: {} ({} ns) before {} ({} ns)",
                w[0].id, w[0].stack_cpu_ns, w[1].id, w[1].stack_cpu_ns
            ),
        );
    }
    for g in r.by_class.iter().filter(|g| !g.by_hop.is_empty()) {
        let hops: u64 = g.by_hop.iter().map(|h| h.cpu_ns).sum();
        let sum = g.cpu_ns + hops;
        if sum.abs_diff(g.stack_cpu_ns) > g.by_hop.len() as u64 + 1 {
            say(
                "stack-sum",
                format!(
                    "class {}: {} ns across the stack, its own {} ns + its hops' {hops} ns = {sum} ns",
                    g.name, g.stack_cpu_ns, g.cpu_ns
                ),
            );
        }
    }
}

/// How hop `hop`'s requests met the front's: each event in one of linked, own and unlinked
/// (so the three add up to its events' CPU, upstream calls apart); the front classes' parts
/// at the hop add up to the linked; and they are no more than the hop's attributed CPU.
fn hop_links(
    hop: u8,
    front: &RequestStats,
    r: &RequestStats,
    say: &mut impl FnMut(&'static str, String),
) {
    let Some(links) = r.front_links.as_ref() else {
        return say(
            "hop-links",
            "no front_links: the hop's requests were not joined to the front's".into(),
        );
    };
    let parts = links.linked_cpu_ns + links.own_cpu_ns + links.unlinked_cpu_ns;
    let events = r.tallied_cpu_ns.saturating_sub(r.upstream_call_cpu_ns);
    if parts.abs_diff(events) > 3 {
        say(
            "hop-links",
            format!(
                "linked {} + own {} + unlinked {} = {parts} ns, its requests tallied {events} ns",
                links.linked_cpu_ns, links.own_cpu_ns, links.unlinked_cpu_ns
            ),
        );
    }
    let classes: Vec<u64> = front
        .by_class
        .iter()
        .flat_map(|g| g.by_hop.iter().filter(|h| h.hop == hop).map(|h| h.cpu_ns))
        .collect();
    let charged: u64 = classes.iter().sum();
    if charged.abs_diff(links.linked_cpu_ns) > classes.len() as u64 + 1 {
        say(
            "hop-links",
            format!(
                "the front classes' parts at this hop {charged} ns, its linked requests {} ns",
                links.linked_cpu_ns
            ),
        );
    }
    let allowed = r.attributed_cpu_ns
        + CPU_TOLERANCE_NS.max((r.attributed_cpu_ns as f64 * CPU_TOLERANCE_SHARE) as u64);
    if charged > allowed {
        say(
            "hop-links",
            format!(
                "the front classes' parts at this hop {charged} ns, more than its attributed {} ns",
                r.attributed_cpu_ns
            ),
        );
    }
}

/// attributed + unattributed, less the CPU held from before the phase (`held_before_cpu_ns`),
/// = the phase's CPU, within [`CPU_TOLERANCE_SHARE`] or [`CPU_TOLERANCE_NS`], and what the
/// probes charged while the server's CPU was read (`cpu_reading_skew_ns`).
fn cpu_total(cpu: &CpuTimes, r: &RequestStats, say: &mut impl FnMut(&'static str, String)) {
    let charged = r.attributed_cpu_ns + r.unattributed_cpu_ns;
    if charged == 0 {
        return;
    }
    let sum = charged.saturating_sub(r.held_before_cpu_ns);
    let gap = sum.abs_diff(cpu.total_ns);
    let allowed = CPU_TOLERANCE_NS.max((cpu.total_ns as f64 * CPU_TOLERANCE_SHARE) as u64)
        + r.cpu_reading_skew_ns;
    if gap > allowed {
        let held = match r.held_before_cpu_ns {
            0 => String::new(),
            h => format!(" - held before the phase {h}"),
        };
        say(
            "cpu-total",
            format!(
                "attributed {} + unattributed {}{held} = {sum} ns, the phase's CPU {} ns ({gap} ns apart, {allowed} allowed)",
                r.attributed_cpu_ns, r.unattributed_cpu_ns, cpu.total_ns
            ),
        );
    }
}

/// Shares of the one denominator, attributed + unattributed: each class's is its CPU over it;
/// the classes' CPU and the handshakes' add up to the CPU of the events tallied (to a
/// nanosecond a row, each rounded once when a phase is scaled).
fn class_shares(r: &RequestStats, say: &mut impl FnMut(&'static str, String)) {
    let total = r.attributed_cpu_ns + r.unattributed_cpu_ns;
    if total == 0 {
        return;
    }
    for g in r.by_class.iter().chain(&r.by_client).chain(&r.by_speed) {
        let share = g.cpu_ns as f64 * 100.0 / total as f64;
        if (share - g.cpu_share_pct).abs() > SHARE_TOLERANCE_PCT {
            say(
                "class-shares",
                format!(
                    "{}: {:.3} % stored, its {} ns of {total} ns are {share:.3} %",
                    g.name, g.cpu_share_pct, g.cpu_ns
                ),
            );
        }
    }
    let classes: u64 = r.by_class.iter().map(|g| g.cpu_ns).sum();
    let sum = classes + r.tls_handshake_cpu_ns + r.setup_cpu_ns + r.upstream_call_cpu_ns;
    let rows = r.by_class.len() as u64 + 3;
    if !r.by_class.is_empty() && sum.abs_diff(r.tallied_cpu_ns) > rows {
        say(
            "class-shares",
            format!(
                "the classes' CPU {classes} ns + handshakes {} ns + set-up {} ns + upstream calls {} ns = {sum} ns, the requests tallied {} ns",
                r.tls_handshake_cpu_ns, r.setup_cpu_ns, r.upstream_call_cpu_ns, r.tallied_cpu_ns
            ),
        );
    }
}

/// No share over 100 %: a group's, the TLS handshakes'.
fn shares_within_100(r: &RequestStats, say: &mut impl FnMut(&'static str, String)) {
    let over = |pct: f64| pct > 100.0 + SHARE_TOLERANCE_PCT;
    let groups: [(&str, &[GroupCost]); 3] = [
        ("class", &r.by_class),
        ("client", &r.by_client),
        ("speed", &r.by_speed),
    ];
    for (what, rows) in groups {
        for g in rows.iter().filter(|g| over(g.cpu_share_pct)) {
            say(
                "share-over-100",
                format!("{what} {}: {:.1} % of the CPU", g.name, g.cpu_share_pct),
            );
        }
    }
    let total = r.attributed_cpu_ns + r.unattributed_cpu_ns;
    if r.tls_handshake_cpu_ns > total {
        say(
            "share-over-100",
            format!(
                "TLS handshakes: {} ns of a phase of {total} ns",
                r.tls_handshake_cpu_ns
            ),
        );
    }
}

/// The costliest list holds the top requests by CPU: most expensive first, none cheaper than a
/// class's costliest request left out.
fn costliest(r: &RequestStats, say: &mut impl FnMut(&'static str, String)) {
    let list = &r.costliest;
    if let Some(w) = list.windows(2).find(|w| w[0].cpu_ns < w[1].cpu_ns) {
        say(
            "costliest",
            format!(
                "not by CPU: {} ({} ns) before {} ({} ns)",
                w[0].id, w[0].cpu_ns, w[1].id, w[1].cpu_ns
            ),
        );
    }
    let Some(last) = list.last() else {
        return;
    };
    // A class's costliest request of those that ended: listed when it costs more than the last
    // listed (an event of n HTTP/2 streams lists its whole CPU, its class's figures n shares).
    for g in r
        .by_class
        .iter()
        .filter(|g| g.name != OTHER && g.requests > 0)
    {
        let max = g.cpu_per_request.max;
        let listed = list.iter().any(|c| c.class == g.name && c.cpu_ns >= max);
        if max > last.cpu_ns && !listed {
            say(
                "costliest",
                format!(
                    "class {}'s costliest request ({max} ns) is not listed, the last listed costs {} ns",
                    g.name, last.cpu_ns
                ),
            );
        }
    }
}

/// Top syscalls are the largest: by count, most first, within the request's syscalls, and
/// none left out made more often than one listed. The probes bound what they left out
/// (`unlisted_max`); a record without the bound (its probes kept a request's first syscalls
/// only) proves it when the calls in no slot (`syscalls` less the listed) are fewer than the
/// smallest of the [`SHOWN_SYSCALLS`] shown.
fn top_syscalls(c: &CostlyRequest, say: &mut impl FnMut(&'static str, String)) {
    let counts: Vec<u64> = c.top_syscalls.iter().map(|(_, n)| u64::from(*n)).collect();
    if counts.windows(2).any(|w| w[0] < w[1]) {
        say(
            "top-syscalls",
            format!("request {}: not by count: {:?}", c.id, c.top_syscalls),
        );
    }
    let listed: u64 = counts.iter().sum();
    let Some(rest) = u64::from(c.syscalls).checked_sub(listed) else {
        say(
            "top-syscalls",
            format!(
                "request {}: {listed} listed, more than its {} syscalls",
                c.id, c.syscalls
            ),
        );
        return;
    };
    let (bound, listed_smallest) = match c.unlisted_max {
        Some(max) if u64::from(max) > rest => {
            return say(
                "top-syscalls",
                format!(
                    "request {}: a syscall left out made {max} times, more than the {rest} calls left out",
                    c.id
                ),
            );
        }
        Some(max) => (u64::from(max), counts.iter().min()),
        None => (rest, counts.iter().take(SHOWN_SYSCALLS).min()),
    };
    if let Some(smallest) = listed_smallest.filter(|s| bound > **s) {
        say(
            "top-syscalls",
            format!(
                "request {}: syscalls left out ({bound}) could outrank a listed one ({smallest}): {:?}",
                c.id, c.top_syscalls
            ),
        );
    }
}

/// The per-request figures divide by the phase's count of units: the CPU per request times
/// the units is the phase's CPU.
fn per_unit_count(phase: &Phase, say: &mut impl FnMut(&'static str, String)) {
    let units = phase.units();
    let (Some(cpu), Some(per)) = (phase.server.cpu.as_ref(), phase.per_request.cpu_total_us) else {
        return;
    };
    if units <= 0.0 {
        return;
    }
    let expected = cpu.total_ns as f64 / 1000.0 / units;
    if (per - expected).abs() > PER_UNIT_TOLERANCE * expected.abs().max(1.0) {
        say(
            "per-unit-count",
            format!(
                "CPU per {} {per} µs, the phase's CPU over its {units} is {expected} µs",
                phase.unit.name()
            ),
        );
    }
}
