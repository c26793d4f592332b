//! - Generic, like dominant-code, and ranked below every specific rule: only **when the
//!   catalog's specific findings explain < 50 % of the CPU**, so that a cost in the kernel that
//!   no rule knows is never met with "nothing matches" (dominant-code never names the kernel).
//! - signal 1: **system time ≥ 50 % of the CPU**;
//! - signal 2: **the syscalls sampled most hold ≥ 25 % of the CPU samples** (up to three, each
//!   with ≥ 5 % of them), taken from the profile's kernel chains, which say which syscall each
//!   sample was in. Left out as work every server does: readiness waits (the event loop),
//!   calls mostly on sockets (small-writes, kernel-bound and copy-through-user judge those; on
//!   loopback they carry the client's network stack too: a healthy redis spends 84 % of its
//!   CPU in the kernel), and calls moving ≥ 64 KiB each on average (a sendfile of a whole
//!   file: the cost is the data the clients asked for).
//! - A syscall is named when it costs more than a request's own few calls: **≥ 4 calls per
//!   request, or ≥ 20 µs of CPU per call** (a clean nginx opens, closes, corks and uncorks
//!   once or twice per request, a few µs each).
//! - Silent beside a major specific finding, which names its cost's syscalls already.
//! - It names each syscall with its calls per request and time in it, the bytes per call and
//!   fd kinds where it reads or writes, and the code that issues it: the first frame of its
//!   samples' chains outside the kernel and the C library's wrappers.
//! - CPU share: the named syscalls' CPU, from their samples.

use reqcost_record::{FdKind, IoDirection, KernelStats, Profile};

use super::facts::{Ctx, Draft, Facts, PROFILE_MIN_SAMPLES};
use super::{explained_by_specific, CarriedBy, Needs, Rule, GENERIC, MAJOR_SHARE, RULES};
use crate::profile::{syscall_issuers, syscalls_sampled};

pub(super) const RULE: Rule = Rule {
    id: "dominant-syscalls",
    seed: Some("seeds/004"),
    needs: &[Needs::Kernel, Needs::Profile],
    carried_by: CarriedBy::CpuClasses,
    judge,
};

/// The specific findings explain less than this share of the CPU: name where the rest goes.
const EXPLAINED_BELOW: f64 = 0.5;
/// Signal 1: system time at least this share of the CPU.
const MIN_SYSTEM: f64 = 0.5;
/// Signal 2: the named syscalls hold at least this share of the samples...
const MIN_SHARE: f64 = 0.25;
/// ... each of them at least this share, up to [`NAMED`] of them.
const MIN_EACH: f64 = 0.05;
const NAMED: usize = 3;
/// A syscall is named from this many calls per request (a request's own are one or two: its
/// file opened and closed, its socket corked and uncorked)...
const MIN_CALLS: f64 = 4.0;
/// ... or from this much CPU per call, µs.
const MIN_CALL_US: f64 = 20.0;
/// Calls moving at least this much each on average are not named: the data is the work.
const BULK_BYTES: f64 = 65536.0;

/// The syscalls that hold the CPU when the kernel has most of it and no specific rule says why.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    let p = ctx.profile.filter(|p| p.samples >= PROFILE_MIN_SAMPLES)?;
    let system = f.system_share()?;
    if system < MIN_SYSTEM {
        return None;
    }
    let explained = explained_by_specific(ctx);
    if explained >= EXPLAINED_BELOW || major_specific(ctx) {
        return None;
    }
    let top: Vec<(&str, u64)> = syscalls_sampled(p)
        .into_iter()
        .filter(|&(name, n)| {
            n as f64 >= MIN_EACH * p.samples as f64
                && !expected(k, name)
                && costly(f, p, name, n)
        })
        .take(NAMED)
        .collect();
    let samples: u64 = top.iter().map(|(_, n)| n).sum();
    let share = samples as f64 / p.samples as f64;
    if share < MIN_SHARE {
        return None;
    }
    let mut evidence = vec![format!(
        "system time {:.0} % of CPU; the catalog's specific findings explain {:.0} % of it: this finding is generic",
        system * 100.0,
        explained * 100.0
    )];
    evidence.extend(
        top.iter()
            .map(|&(name, n)| describe_syscall(f, k, p, name, n)),
    );
    let names: Vec<&str> = top.iter().map(|(name, _)| *name).collect();
    Some(Draft {
        title: format!(
            "generic: {:.0} % of the CPU is in the kernel, {:.0} % in {}, which no rule of the catalog explains",
            system * 100.0,
            share * 100.0,
            names.join(", ")
        ),
        evidence,
        cpu_share: f.share(ctx.in_calls(f, &names).cpu_ns),
        phase: f.phase.name.clone(),
        fix: "make fewer of these calls or make each do more: larger reads and writes, \
              sendfile/splice for file data, a cache for what each request looks up again; \
              the code that issues them is named above",
        signals: 2,
    })
}

/// Whether `name` is work every server does: a readiness wait (the event loop), mostly socket
/// reads and writes (small-writes, kernel-bound and copy-through-user judge those, and on
/// loopback they carry the client's network stack too), or data moved in large pieces (a
/// sendfile of a whole file, 64 KiB reads: the bytes the clients asked for, not the calls).
fn expected(k: &KernelStats, name: &str) -> bool {
    let io = || k.io.iter().filter(|s| s.syscall == name);
    let (calls, bytes) = io().fold((0, 0), |(c, b), s| (c + s.calls, b + s.bytes));
    let on_sockets: u64 = io()
        .filter(|s| matches!(s.fd_kind, FdKind::Socket | FdKind::Udp))
        .map(|s| s.calls)
        .sum();
    k.waits.iter().any(|w| w.syscall == name)
        || (calls > 0 && (2 * on_sockets >= calls || bytes as f64 / calls as f64 >= BULK_BYTES))
}

/// Whether `name`'s calls cost more than a request's own few: many of them per request, or much
/// CPU in each (from its `samples`).
fn costly(f: &Facts, p: &Profile, name: &str, samples: u64) -> bool {
    let calls = f.calls(&[name]);
    let cpu_us = f.cpu_us().unwrap_or(0.0) * samples as f64 / p.samples as f64;
    calls >= MIN_CALLS || (calls > 0.0 && cpu_us / calls >= MIN_CALL_US)
}

/// Whether a specific rule found a major cost: its finding names that cost's syscalls already.
fn major_specific(ctx: &Ctx) -> bool {
    RULES
        .iter()
        .filter(|r| !GENERIC.contains(&r.id))
        .filter_map(|r| (r.judge)(ctx))
        .any(|d| d.cpu_share >= MAJOR_SHARE)
}

/// `pread64: 30 % of CPU samples, 128.0 calls per request, 2.0 µs each; on files 8.0 KiB per
/// call; issued from ngx_output_chain [nginx] (40 samples)`.
fn describe_syscall(f: &Facts, k: &KernelStats, p: &Profile, name: &str, samples: u64) -> String {
    let calls = f.calls(&[name]);
    let mut line = format!(
        "{name}: {:.0} % of CPU samples, {calls:.1} calls per request",
        samples as f64 * 100.0 / p.samples as f64
    );
    if calls > 0.0 {
        line += &format!(", {:.1} µs each", f.time_ns(&[name]) / calls / 1000.0);
    }
    for io in k.io.iter().filter(|s| s.syscall == name && s.calls > 0) {
        let verb = match io.direction {
            IoDirection::Read => "reading",
            IoDirection::Write => "writing",
        };
        line += &format!(
            "; {verb} {} fds {:.0} B per call",
            io.fd_kind.as_str(),
            io.bytes as f64 / io.calls as f64
        );
    }
    match syscall_issuers(p, name).first() {
        Some(((function, ""), n)) => line += &format!("; issued from {function} ({n} samples)"),
        Some(((function, module), n)) => {
            line += &format!("; issued from {function} [{module}] ({n} samples)")
        }
        None => line += "; no user frame in its chains says what issues it",
    }
    line
}
