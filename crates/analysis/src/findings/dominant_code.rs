//! - Generic, and judged last: only **when the catalog's findings explain < 50 % of the CPU**, so
//!   that a big cost no rule knows is never met with "nothing matches".
//! - signal 1: **a library holds ≥ 25 % of the CPU samples as their leaf**: a shared library
//!   other than the C library and the dynamic loader, or a language runtime. A server's own
//!   executable and the kernel are not named: a well-behaved server spends most of its time
//!   there, and the kernel rules and the profile section cover them;
//! - signal 2: **≥ 50 samples**, enough for the share to mean something.
//! - Crypto libraries are not named under a gemini:// or https:// workload, or where the
//!   server's TLS library counted handshakes (`--load`, `attach`): tls-handshake judges them
//!   there, and a TLS server that resumes its sessions still spends about half its CPU in them
//!   (testbed `tls-resumed`).
//! - It names the module in words a person recognises for the common libraries (compression:
//!   zlib, brotli, zstd; crypto; regular expressions; XML and JSON parsing; the language runtime),
//!   by what its hot functions do where the symbols say (a crypto library whose self samples
//!   are mostly in SHA, HMAC or PBKDF2 functions is hashing, named under TLS too), its hottest
//!   function, the function through which the samples entered it and that function's
//!   caller, and for a JIT runtime without a perf map the flag that names its frames.
//! - CPU share: the module's sampled self share.
//! - Ranked below any finding whose evidence explains the same CPU: one whose share and its own
//!   add up to more than the whole, and a set-up rule (a process, connection or TLS handshake per
//!   connection, whose cost is paid outside any request) when most of the module's samples were
//!   taken outside any request (a new worker's interpreter starting up is its process' cost).

use reqcost_record::{Profile, UNATTRIBUTED};

use super::facts::{Ctx, Draft, PROFILE_MIN_SAMPLES};
use super::{explained_by_specific, tls_handshake, CarriedBy, Finding, Needs, Rule};
use crate::profile::{
    entries, function_counts, is_library, library_in, module_self_samples, runtime_hint, View,
};

pub(super) const RULE: Rule = Rule {
    id: "dominant-code",
    seed: None,
    needs: &[Needs::Profile],
    carried_by: CarriedBy::CpuClasses,
    judge,
};

/// The other findings explain less than this share of the CPU: name where the rest goes.
const EXPLAINED_BELOW: f64 = 0.5;
/// Signal 1: a module with at least this share of the samples as their leaf.
const MIN_MODULE_SHARE: f64 = 0.25;
/// Ranked below a set-up finding when at least this share of its samples are outside requests.
const MOSTLY_OUTSIDE: f64 = 0.5;
/// Rules whose cost is the set-up of a process, a connection or a TLS session.
const SET_UP_RULES: &[&str] = &["process-per-request", "conn-per-request", "tls-handshake"];

const GENERIC_FIX: &str = "look at what calls it on every request (the profile section lists \
     its callers and chains) and whether each request needs it: cache the result, do it once \
     at start-up, or do less of it";

/// The library that holds most of the CPU when the other rules' findings explain less than half
/// of it.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let p = ctx.profile.filter(|p| p.samples >= PROFILE_MIN_SAMPLES)?;
    let explained = explained_by_specific(ctx);
    if explained >= EXPLAINED_BELOW {
        return None;
    }
    let (module, n) = module(ctx, p)?;
    let share = n as f64 / p.samples as f64;
    if share < MIN_MODULE_SHARE {
        return None;
    }
    let known = library_in(p, module);
    let named = match known {
        Some(l) => format!("{module} ({})", l.what),
        None => module.to_string(),
    };
    let mut evidence = vec![
        format!(
            "{:.0} % of CPU samples have their leaf in {named}{}",
            share * 100.0,
            hottest(p, module)
        ),
        format!(
            "the catalog's findings explain {:.0} % of the CPU: this finding is generic",
            explained * 100.0
        ),
    ];
    if let Some(e) = entries(p, View::All, |f| f.module == module).first() {
        evidence.push(e.describe());
    }
    evidence.extend(outside_requests(p, module).map(|o| {
        format!(
            "{:.0} % of its samples were taken outside any request (start-up, connections, handshakes)",
            o * 100.0
        )
    }));
    evidence.extend(runtime_hint(p).map(str::to_string));
    let fix = known.map_or(GENERIC_FIX, |l| l.fix);
    Some(Draft {
        title: format!(
            "generic: {named} holds {:.0} % of the CPU, which no rule of the catalog explains",
            share * 100.0
        ),
        evidence,
        cpu_share: share,
        phase: ctx.main.phase.name.clone(),
        fix,
        signals: 2,
    })
}

/// The library holding most of the samples as their leaf, with its samples; crypto is left to
/// tls-handshake where the run is TLS.
fn module<'p>(ctx: &Ctx, p: &'p Profile) -> Option<(&'p str, u64)> {
    let tls = tls_handshake::is_tls(ctx);
    module_self_samples(p).into_iter().find(|(m, _)| {
        is_library(m) && !(tls && library_in(p, m).is_some_and(|l| l.kind == "crypto"))
    })
}

/// Share of `module`'s leaf samples whose thread served no request, where the samples carry
/// request tags.
fn outside_requests(p: &Profile, module: &str) -> Option<f64> {
    if p.tags.is_empty() {
        return None;
    }
    let (mut outside, mut all) = (0, 0);
    for s in &p.stacks {
        let leaf = s.frames.first().and_then(|&i| p.frames.get(i as usize));
        if leaf.is_none_or(|f| f.module != module || f.kernel) {
            continue;
        }
        all += s.count;
        let tag = s.tag.and_then(|t| p.tags.get(t as usize));
        if tag.is_some_and(|t| t.class == UNATTRIBUTED) {
            outside += s.count;
        }
    }
    (all > 0).then(|| outside as f64 / all as f64)
}

/// Whether the generic finding `generic` names CPU that `specific`'s evidence explains too, so
/// that it ranks below it.
pub(super) fn defers_to(ctx: &Ctx, generic: f64, specific: &Finding) -> bool {
    let set_up = SET_UP_RULES.contains(&specific.id.as_str());
    generic + specific.cpu_share > 1.0
        || set_up
            && ctx
                .profile
                .and_then(|p| outside_requests(p, module(ctx, p)?.0))
                .is_some_and(|o| o >= MOSTLY_OUTSIDE)
}

/// `; its hottest function libz.so.1.2.13!0x4970 95 % self`.
fn hottest(p: &Profile, module: &str) -> String {
    function_counts(p)
        .into_iter()
        .filter(|((_, m), _)| *m == module)
        .max_by(|a, b| a.1.self_samples.cmp(&b.1.self_samples).then(b.0.cmp(&a.0)))
        .map(|((f, _), c)| {
            format!(
                "; its hottest function {f} {:.0} % self",
                100.0 * c.self_samples as f64 / p.samples.max(1) as f64
            )
        })
        .unwrap_or_default()
}
