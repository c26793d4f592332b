//! After buffering, the gopher server still used 5x the CPU of Gemini: a four-line loop polled the
//! send queue with `ioctl(SIOCOUTQ)` and flipped epoll interest until the client had read everything.
//! 275 requests: 18 s of CPU before the fix, 0 s after. Judged in the slow-client phase when there is
//! one, since that is where it burns.
//!
//! - **≥ 3 ioctl per request** (the SIOCOUTQ count is shown);
//! - **≥ 3 epoll_ctl(MOD) per request**;
//! - **≥ 10 readiness-wait returns or wakeups per request**;
//! - **CPU per request ≥ 2x higher with slow clients** than with fast ones: the slow-client phase
//!   against main, or, without it, slow against fast clients inside the judged phase (per-request
//!   accounting, as for client-sensitive below).
//! - Fires with two of these, one of which must be the ioctl or epoll_ctl churn. CPU share: with a
//!   slow phase, `1 − fast/slow` of the slow phase's CPU; with slow and fast clients inside the
//!   phase, what the slow requests cost beyond fast ones' (below); otherwise (`--no-slow-phase`)
//!   the loop's share of the phase's syscalls: ioctl, epoll_ctl(MOD) and the readiness-wait returns
//!   beyond one per request, over all syscalls, and never less than the time inside ioctl and
//!   epoll_ctl. Time inside the calls misses most of a loop (each iteration's kernel entry and exit,
//!   its wait, the user code between calls): it gave 33 % for a loop that was 99.5 % of the CPU; a
//!   loop that does nothing else is its syscalls.

use super::facts::{Ctx, Draft, Facts, SpeedContrast};
use super::{CarriedBy, Needs, Rule};

pub(super) const RULE: Rule = Rule {
    id: "busy-wait",
    seed: Some("seeds/002"),
    needs: &[Needs::Kernel, Needs::Requests],
    carried_by: CarriedBy::SlowClients,
    judge,
};

/// Send-queue polls (ioctl) per request from which they are a signal.
const MIN_IOCTLS: f64 = 3.0;
/// epoll_ctl(MOD) per request from which interest is bouncing.
const MIN_MODS: f64 = 3.0;
/// Readiness-wait returns or wakeups per request from which the server is woken in a loop.
const MIN_WAKES: f64 = 10.0;
/// How many times fast clients' CPU per request slow clients' must cost.
const MIN_GROWTH: f64 = 2.0;

/// seeds/002: polling the send queue and bouncing epoll interest until the peer has read.
fn judge(ctx: &Ctx) -> Option<Draft> {
    // The pathology shows most when clients are slow: judge the slow phase when there is one.
    let f = ctx
        .slow
        .as_ref()
        .filter(|s| s.usable())
        .unwrap_or(&ctx.main);
    if !f.usable() || f.kernel.is_none() {
        return None;
    }
    let k = f.kernel?;
    let ioctl: u64 = k.ioctls.iter().map(|i| i.count).sum();
    let outq: u64 = k
        .ioctls
        .iter()
        .filter(|i| i.name.as_deref().is_some_and(|n| n.contains("OUTQ")))
        .map(|i| i.count)
        .sum();
    let ioctl = ioctl as f64 / f.ok;
    let outq = outq as f64 / f.ok;
    let mods = k.epoll_ctl.modify as f64 / f.ok;
    let wakeups = k.sched.wakeups as f64 / f.ok;
    let waits: f64 = k.waits.iter().map(|w| w.returns).sum::<u64>() as f64 / f.ok;
    let mut evidence = Vec::new();
    let mut signals = 0;
    if ioctl >= MIN_IOCTLS {
        signals += 1;
        evidence.push(format!(
            "{ioctl:.1} ioctl calls per request ({outq:.1} of them SIOCOUTQ: polling the send queue)"
        ));
    }
    if mods >= MIN_MODS {
        signals += 1;
        evidence.push(format!(
            "{mods:.1} epoll_ctl(MOD) per request: interest bounced"
        ));
    }
    if waits >= MIN_WAKES || wakeups >= MIN_WAKES {
        signals += 1;
        evidence.push(format!(
            "{waits:.1} readiness-wait returns and {wakeups:.1} wakeups per request for {:.0} B sent",
            f.bytes_out()
        ));
    }
    let growth = client_growth(ctx);
    if let Some((ratio, main_us, slow_us)) = growth.filter(|(r, _, _)| *r >= MIN_GROWTH) {
        signals += 1;
        evidence.push(format!(
            "CPU per request {main_us:.1} µs with fast clients, {slow_us:.1} µs with slow ones ({ratio:.1}x)"
        ));
    }
    let contrast = SpeedContrast::of(f.phase).filter(|c| c.ratio() >= MIN_GROWTH);
    if let (None, Some(c)) = (growth.filter(|(r, _, _)| *r >= MIN_GROWTH), &contrast) {
        signals += 1;
        evidence.push(c.cpu_evidence());
    }
    if signals < 2 || (ioctl < MIN_IOCTLS && mods < MIN_MODS) {
        return None;
    }
    let share = match growth {
        Some((ratio, _, _)) if ratio > 1.0 && f.phase.name == "slow-clients" => 1.0 - 1.0 / ratio,
        _ => contrast.map_or_else(|| loop_share(f, ioctl + mods, waits), |c| c.excess_share()),
    };
    Some(Draft {
        title: "the server spins on the kernel while clients drain their responses (send-queue polling, epoll churn)".into(),
        evidence,
        cpu_share: share,
        phase: f.phase.name.clone(),
        fix: "after writing, wait for EPOLLOUT (or just close/shutdown and let the kernel finish \
              sending); never poll SIOCOUTQ or toggle epoll interest in a loop",
        signals,
    })
}

/// Share of the phase's CPU that a send-queue loop of `churn` ioctl and epoll_ctl(MOD) calls and
/// `waits` readiness-wait returns per request stands for, when no fast-client figure says what a
/// request costs without it. The time measured inside ioctl and epoll_ctl misses most of the
/// loop: each iteration's kernel entry and exit, its wait and the user code between calls (33 %
/// for a loop that was 99.5 % of the CPU). A loop that does nothing else is its syscalls, so it
/// counts for its share of the phase's calls (waits beyond one per request being the loop's),
/// never less than the time inside them.
fn loop_share(f: &Facts, churn: f64, waits: f64) -> f64 {
    let calls = f.kernel.map_or(0.0, |k| k.total_syscalls() as f64 / f.ok);
    let looping = churn + (waits - 1.0).max(0.0);
    let by_calls = if calls > 0.0 {
        (looping / calls).min(1.0)
    } else {
        0.0
    };
    by_calls.max(f.share(f.time_ns(&["ioctl", "epoll_ctl"])))
}

/// (slow/main CPU ratio, main µs, slow µs) when both phases have CPU per request.
fn client_growth(ctx: &Ctx) -> Option<(f64, f64, f64)> {
    let main = ctx.main.cpu_us()?;
    let slow = ctx.slow.as_ref()?.cpu_us()?;
    (main > 0.0).then(|| (slow / main, main, slow))
}
