//! Replaying 332 logged requests on loopback gave half the production CPU: real clients are slow,
//! loopback clients are not.
//!
//! The slow-client phase is held against **fast clients at its own request rate**: the
//! `fast-same-rate` phase that follows it (docs/record.md). Against main it would not be a fair
//! test: main may run saturated while the slow phase runs at a hundred requests a second, and a
//! server idle between requests pays wake-ups per request that a busy one shares (Apache with
//! `AllowOverride All` looked 3.1x costlier with slow clients for that reason alone). Records without
//! that phase (made by older versions of reqcost) are held against main, and the evidence says so.
//!
//! - signal 1: **CPU per request ≥ 1.5x higher** in the slow-client phase than in its reference
//!   (and at least 5 µs more);
//! - signal 2: **syscalls per request ≥ 1.3x higher** there, so the server's behaviour changed, not
//!   the noise. Calls each connection makes once are left out of this count (accept, the
//!   listener's wakeup, epoll_ctl ADD/DEL, the end-of-stream read, shutdown, close): the slow phase
//!   is short, so with many connections (`-c 256`) it opens about one per request where main
//!   amortized them over hundreds. Counted whole, that alone made `keepalive` look 1.6x busier
//!   with slow clients (7.0 against 11.3 syscalls per request; 6.6 against 6.6 without them).
//! - CPU share: `1 − fast/slow`.
//!
//! **Inside one phase** (per-request accounting; tried first, in every phase, and the one where the
//! slow requests' excess is largest is reported). Production traffic, or `--client-mix`, holds fast
//! and slow clients together, and the server's own count tells them apart by client speed (bytes
//! out per second of each request's wall time, docs/record.md). **Slow**: the buckets below
//! 256 KiB/s; **fast**: 1 MiB/s and above; the bucket between is left out so that the two stand
//! clearly apart, and each side needs **≥ 10 requests** so that one odd request cannot make it.
//!
//! - signal 1: **the slow side's mean CPU per request ≥ 10x the fast side's** (the mean, since CPU
//!   adds up: it is what the server pays). 10x, not 1.5x as across phases: inside one phase the
//!   two sides may also differ in what they asked for, and wall time includes the server's own
//!   work, so a request that computes long before a small answer counts as slow; seeds/002's slow
//!   readers cost hundreds of times a normal request;
//! - signal 2: **syscalls per request ≥ 2x** on the slow side: the server's work with the client
//!   grew, not only its computing;
//! - a third signal when the slow requests moved **at least half the bytes per request** of the fast
//!   ones: the same kind of responses.
//! - Evidence: both sides' CPU per request and request counts, syscalls and bytes per request, and
//!   each slow bucket with the clients in it; carriers name those clients.
//! - CPU share: `slow requests × (slow − fast CPU per request)` over the phase's attributed +
//!   unattributed CPU: what the server would save if slow clients cost what fast ones do.

use reqcost_record::{FdKind, IoDirection};

use super::facts::{Ctx, Draft, Facts, SpeedContrast};
use super::{CarriedBy, Needs, Rule};

pub(super) const RULE: Rule = Rule {
    id: "client-sensitive",
    seed: Some("seeds/000"),
    needs: &[Needs::Kernel, Needs::Requests],
    carried_by: CarriedBy::SlowClients,
    judge,
};

/// Inside one phase: slow clients' CPU per request at least this many times fast clients'.
const IN_PHASE_CONTRAST: f64 = 10.0;
/// Inside one phase: slow clients' syscalls per request at least this many times fast ones'.
const IN_PHASE_SYSCALLS: f64 = 2.0;
/// Inside one phase, a third signal: slow clients moved at least this share of fast ones' bytes
/// per request.
const SAME_RESPONSES: f64 = 0.5;
/// Across phases: slow clients' CPU per request at least this many times fast clients'...
const ACROSS_CPU: f64 = 1.5;
/// ... and at least this many microseconds more.
const ACROSS_MIN_EXTRA_US: f64 = 5.0;
/// Across phases: slow clients' syscalls per request, beyond a connection's own, at least this
/// many times fast clients'.
const ACROSS_SYSCALLS: f64 = 1.3;

/// Judged inside each phase first, then the slow phase against its fast reference.
fn judge(ctx: &Ctx) -> Option<Draft> {
    in_phase(ctx).or_else(|| across_phases(ctx))
}

/// seeds/000 and 002 inside one phase: the same traffic, slow clients' requests cost many
/// times fast ones'. From per-request accounting, in the phase where the excess is largest.
fn in_phase(ctx: &Ctx) -> Option<Draft> {
    let c = ctx
        .rec
        .phases
        .iter()
        .filter_map(SpeedContrast::of)
        .filter(|c| c.ratio() >= IN_PHASE_CONTRAST)
        .max_by(|a, b| a.excess_share().total_cmp(&b.excess_share()))?;
    // Signal 1: CPU per request far above; signal 2: the server made twice the syscalls for
    // them, so its own work grew, not only the time it computed; signal 3: they moved as much
    // data, so they asked for the same kind of response.
    let (slow_calls, fast_calls) = (
        c.slow.mean(|g| g.syscalls_per_request),
        c.fast.mean(|g| g.syscalls_per_request),
    );
    if slow_calls < IN_PHASE_SYSCALLS * fast_calls {
        return None;
    }
    let (slow_out, fast_out) = (
        c.slow.mean(|g| g.bytes_out_per_request),
        c.fast.mean(|g| g.bytes_out_per_request),
    );
    Some(Draft {
        title: format!(
            "requests of slow clients cost {:.0}x those of fast ones in the same traffic: a loopback benchmark underestimates production",
            c.ratio()
        ),
        evidence: vec![
            c.cpu_evidence(),
            format!("syscalls per request: {fast_calls:.1} fast, {slow_calls:.1} slow"),
            format!("bytes out per request: {fast_out:.0} fast, {slow_out:.0} slow"),
        ]
        .into_iter()
        .chain(c.slow.describe().into_iter().map(|d| format!("slow clients, {d}")))
        .collect(),
        cpu_share: c.excess_share(),
        phase: c.phase.to_string(),
        fix: "find what the server does while a response is in flight (see busy-wait); measure \
              with --client-mix to reproduce production costs",
        signals: 2 + usize::from(slow_out >= SAME_RESPONSES * fast_out),
    })
}

/// seeds/000: CPU per request depends on how fast clients read; loopback replays hide it.
/// The slow phase is held against fast clients at its own request rate (`fast-same-rate`), so
/// that only the clients' speed differs: against a saturated main phase, the wake-ups a server
/// idle between requests pays would pass for slow-client cost. Records without that phase are
/// held against main, and the evidence says so.
fn across_phases(ctx: &Ctx) -> Option<Draft> {
    let slow = ctx.slow.as_ref()?;
    let (fast, reference) = match &ctx.same_rate {
        Some(r) => (
            r,
            format!(
                "fast clients at the slow phase's request rate ({}: {}), so only the clients' speed differs",
                r.phase.name,
                client_model(r)
            ),
        ),
        None => (
            &ctx.main,
            "fast clients from main: this record has no fast-same-rate phase, and main's load \
             differs from the slow phase's, so part of the difference may be idle wake-ups at low load"
                .to_string(),
        ),
    };
    let (fast_us, slow_us) = (fast.cpu_us()?, slow.cpu_us()?);
    if fast_us <= 0.0 {
        return None;
    }
    let ratio = slow_us / fast_us;
    // Signal 1: CPU per request grows markedly; signal 2: the kernel work (syscalls) grows too,
    // so it is the server's behaviour that changed, not noise.
    if ratio < ACROSS_CPU || slow_us - fast_us < ACROSS_MIN_EXTRA_US {
        return None;
    }
    let (sf, ss) = (request_syscalls(fast)?, request_syscalls(slow)?);
    if ss < sf * ACROSS_SYSCALLS {
        return None;
    }
    Some(Draft {
        title: format!(
            "CPU per request is {ratio:.1}x higher when clients read slowly: a loopback benchmark underestimates production"
        ),
        evidence: vec![
            format!("CPU per request: {fast_us:.1} µs with fast clients, {slow_us:.1} µs with slow clients ({})", client_model(slow)),
            format!("syscalls per request beyond connection set-up and teardown: {sf:.1} fast, {ss:.1} slow"),
            reference,
        ],
        cpu_share: 1.0 - 1.0 / ratio,
        phase: slow.phase.name.clone(),
        fix: "find what the server does while a response is in flight (see busy-wait); measure with \
              --client-bandwidth to reproduce production costs",
        signals: 2,
    })
}

fn client_model<'a>(f: &Facts<'a>) -> &'a str {
    f.phase.client_model.as_deref().unwrap_or("unknown clients")
}

/// Syscalls per request beyond those every connection costs once: its accept, the listener's
/// wakeup, epoll_ctl ADD/DEL, the end-of-stream read, shutdown and close. A short phase with
/// many connections opens about one per request where a long one amortizes them; that is not
/// the server behaving differently.
fn request_syscalls(f: &Facts) -> Option<f64> {
    let k = f.kernel?;
    let total = k.total_syscalls();
    let accepted = k.sockets.accepted;
    let eof_reads: u64 =
        k.io.iter()
            .filter(|s| s.direction == IoDirection::Read && s.fd_kind == FdKind::Socket)
            .flat_map(|s| &s.sizes)
            .filter(|b| b.max_bytes == 0)
            .map(|b| b.count)
            .sum();
    let wait_returns: u64 = k.waits.iter().map(|w| w.returns).sum();
    let per_connection = accepted
        + k.sockets.closed
        + k.epoll_ctl.add
        + k.epoll_ctl.delete
        + eof_reads
        + wait_returns.min(accepted)
        + k.syscalls
            .iter()
            .filter(|s| s.name == "shutdown")
            .map(|s| s.count)
            .sum::<u64>();
    Some(total.saturating_sub(per_connection) as f64 / f.ok)
}
