//! Apache's per-request directory walk: stat and open of every parent directory looking for
//! `.htaccess` files that are not there.
//!
//! - signal 1: **≥ 6 path lookups per request** (stat-family, access, readlink, open, openat);
//! - signal 2: **≥ 2 of them fail with ENOENT per request**; a third signal at ≥ 5.
//! - CPU share: the CPU inside those syscalls, from the samples taken in them where the profile
//!   has kernel chains; a lookup's wait for the disk (a cold cache) is off CPU, given apart.
//!   Without such samples, their wall time, at most the phase's system CPU, said so.

use super::facts::{Ctx, Draft, OPEN_CALLS};
use super::{CarriedBy, Needs, Rule};

pub(super) const RULE: Rule = Rule {
    id: "fs-storm",
    seed: Some("seeds/003 (directory walk)"),
    needs: &[Needs::Kernel, Needs::Requests],
    carried_by: CarriedBy::SyscallClasses,
    judge,
};

/// Signal 1: path lookups (stat-family and open calls) per request from this many.
const MIN_LOOKUPS: f64 = 6.0;
/// Signal 2: lookups failing with ENOENT per request from this many...
const MIN_MISSING: f64 = 2.0;
/// ... and a third signal from this many.
const MANY_MISSING: f64 = 5.0;

/// Calls that look a path up without opening it.
const STAT_CALLS: &[&str] = &[
    "stat",
    "lstat",
    "newfstatat",
    "statx",
    "access",
    "faccessat",
    "faccessat2",
    "readlink",
    "readlinkat",
];

/// seeds/003: a directory walk per request, stat-ing and opening paths, many of them missing.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    if !f.usable() || f.kernel.is_none() {
        return None;
    }
    let lookups = f.calls(STAT_CALLS) + f.calls(OPEN_CALLS);
    let enoent = f.errno(STAT_CALLS, "ENOENT") + f.errno(OPEN_CALLS, "ENOENT");
    // Signal 1: many path lookups per request; signal 2: many fail with ENOENT.
    if lookups < MIN_LOOKUPS || enoent < MIN_MISSING {
        return None;
    }
    let inside = ctx.in_calls(f, &[STAT_CALLS, OPEN_CALLS].concat());
    Some(Draft {
        title: format!(
            "{lookups:.0} path lookups per request, {enoent:.0} of them for files that do not exist"
        ),
        evidence: vec![
            format!(
                "{:.1} stat-family and {:.1} open calls per request",
                f.calls(STAT_CALLS),
                f.calls(OPEN_CALLS)
            ),
            format!("{enoent:.1} ENOENT per request"),
            inside.describe("them"),
        ],
        cpu_share: f.share(inside.cpu_ns),
        phase: f.phase.name.clone(),
        fix:
            "cache per-directory lookups (e.g. Apache: AllowOverride None), resolve paths once at \
              startup, keep file descriptors open",
        signals: 2 + usize::from(enoent >= MANY_MISSING),
    })
}
