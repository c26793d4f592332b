//! - signal 1: **≥ 10 % of CPU samples have memcpy/memmove/mempcpy as their leaf user frame**;
//! - signal 2: **≥ 20 such samples with resolved callers** (±22 % relative sampling error at 20):
//!   samples whose nearest user caller has a name. A caller known only as `binary+0x...` (a stripped
//!   static function) does not say who copies, so its samples do not count and its chains are not
//!   listed. Up to three caller chains are listed as evidence; a third signal at ≥ 25 %.
//! - CPU share: the sampled share.

use reqcost_record::{Frame, Profile};

use super::facts::{user_self_share, Ctx, Draft};
use super::{CarriedBy, Needs, Rule};
use crate::profile::{self, View};

pub(super) const RULE: Rule = Rule {
    id: "copy-heavy",
    seed: Some("seeds/003 (memcpy on top, no call chains)"),
    needs: &[Needs::Profile],
    carried_by: CarriedBy::CpuClasses,
    judge,
};

/// Signal 1: at least this share of the samples in memcpy/memmove as their leaf user frame...
const MIN_SHARE: f64 = 0.10;
/// ... and a third signal from this share.
const LARGE_SHARE: f64 = 0.25;
/// Signal 2: at least this many of them with a named caller (±22 % relative error at 20).
const MIN_RESOLVED: u64 = 20;
/// Caller chains listed as evidence, and the callers each names.
const CALLER_CHAINS: usize = 3;
const CALLERS: usize = 3;

/// seeds/003: memcpy on top of the profile; the callers say who copies.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let p = ctx.profile?;
    let is_copy = |f: &Frame| profile::is_copy_function(&f.function);
    let (share, (callers, resolved)) = (user_self_share(p, is_copy), user_callers(p, is_copy));
    let hits = share * p.samples as f64;
    // Signal 1: copies are a large share of all CPU samples; signal 2: enough of those samples
    // (±22 % relative error at 20), with resolved callers, that it is not a sampling accident.
    if share < MIN_SHARE || resolved < MIN_RESOLVED {
        return None;
    }
    let mut evidence = vec![format!(
        "{:.1} % of CPU samples in memcpy/memmove ({hits:.0} of {})",
        share * 100.0,
        p.samples
    )];
    for (chain, n) in &callers {
        evidence.push(format!("called from {chain} ({n} samples)"));
    }
    Some(Draft {
        title: format!(
            "{:.0} % of CPU copies memory; the callers below do it",
            share * 100.0
        ),
        evidence,
        cpu_share: share,
        phase: ctx.main.phase.name.clone(),
        fix: "pass buffers by reference (iovecs, writev, sendfile, splice) instead of assembling \
              copies; cache the assembled response",
        signals: 2 + usize::from(share >= LARGE_SHARE),
    })
}

/// The most common user-space caller chains (three callers each) of the samples whose innermost
/// user frame matches `pred`, chains naming the same functions counted as one, with the samples
/// of every chain whose nearest caller is resolved. A caller known only as `binary+0x...` does
/// not say who copies, so its chains are left out.
fn user_callers(p: &Profile, pred: impl Fn(&Frame) -> bool) -> (Vec<(String, u64)>, u64) {
    let mut named: std::collections::BTreeMap<String, u64> = Default::default();
    for (chain, n) in profile::callers(p, View::User, pred, CALLERS) {
        if chain.first().is_some_and(|f| f.resolved) {
            let names: Vec<&str> = chain.iter().map(|f| f.function.as_str()).collect();
            *named.entry(names.join(" ← ")).or_default() += n;
        }
    }
    let resolved = named.values().sum();
    let mut callers: Vec<(String, u64)> = named.into_iter().collect();
    callers.sort_by_key(|c| std::cmp::Reverse(c.1));
    callers.truncate(CALLER_CHAINS);
    (callers, resolved)
}
