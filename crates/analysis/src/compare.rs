//! A/B comparison of phases: ratios with confidence intervals for timed metrics, exact figures
//! for counts, and the per-syscall difference.

use std::collections::BTreeMap;

use reqcost_record::{Phase, RunRecord};

use crate::findings::diagnose;
use serde::Serialize;

use crate::metrics::{Kind, Metric, METRICS};
use crate::stats::{mean, paired_ratio, verdict, Ratio, Verdict};

#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Series {
    fn of(xs: &[f64]) -> Option<Series> {
        (!xs.is_empty()).then(|| Series {
            mean: mean(xs),
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            n: xs.len(),
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct MetricComparison {
    pub metric: &'static str,
    pub unit: &'static str,
    pub a: Series,
    pub b: Series,
    pub ratio: Option<Ratio>,
    /// From B's point of view: `better` means B costs less (or serves more).
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Serialize)]
pub struct SyscallDiff {
    pub name: String,
    pub a_per_request: f64,
    pub b_per_request: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub repetitions: usize,
    pub metrics: Vec<MetricComparison>,
    /// Syscalls per request, mean over repetitions, largest difference first.
    pub syscalls: Vec<SyscallDiff>,
    /// Finding ids of every B run but not every A run.
    pub findings_appeared: Vec<String>,
    /// Finding ids of every A run but not every B run.
    pub findings_vanished: Vec<String>,
}

/// Finding ids (major or minor) that every one of `records` has.
fn steady_findings(records: &[RunRecord]) -> std::collections::BTreeSet<String> {
    let mut sets = records.iter().map(|r| {
        diagnose(r)
            .into_iter()
            .map(|f| f.id)
            .collect::<std::collections::BTreeSet<_>>()
    });
    let first = sets.next().unwrap_or_default();
    sets.fold(first, |acc, s| acc.intersection(&s).cloned().collect())
}

/// Compares runs of A with runs of B by their main phases, paired in the order they ran.
/// Records without a measured phase are left out.
pub fn compare(ra: &[RunRecord], rb: &[RunRecord]) -> Comparison {
    let a: Vec<&Phase> = ra.iter().filter_map(RunRecord::main_phase).collect();
    let b: Vec<&Phase> = rb.iter().filter_map(RunRecord::main_phase).collect();
    let (fa, fb) = (steady_findings(ra), steady_findings(rb));
    let (a, b) = (a.as_slice(), b.as_slice());
    let metrics = METRICS
        .iter()
        .filter_map(|m| compare_metric(m, a, b))
        .collect();
    let per_syscall = |phases: &[&Phase]| {
        let mut sums: BTreeMap<String, f64> = BTreeMap::new();
        for p in phases {
            for (name, v) in &p.per_request.syscalls {
                *sums.entry(name.clone()).or_default() += v / phases.len() as f64;
            }
        }
        sums
    };
    let (sa, sb) = (per_syscall(a), per_syscall(b));
    let mut syscalls: Vec<SyscallDiff> = sa
        .keys()
        .chain(sb.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|name| SyscallDiff {
            name: name.clone(),
            a_per_request: sa.get(name).copied().unwrap_or(0.0),
            b_per_request: sb.get(name).copied().unwrap_or(0.0),
        })
        .collect();
    syscalls.sort_by(|x, y| {
        let d = |s: &SyscallDiff| (s.b_per_request - s.a_per_request).abs();
        d(y).total_cmp(&d(x)).then(x.name.cmp(&y.name))
    });
    Comparison {
        repetitions: a.len().min(b.len()),
        metrics,
        syscalls,
        findings_appeared: fb.difference(&fa).cloned().collect(),
        findings_vanished: fa.difference(&fb).cloned().collect(),
    }
}

fn compare_metric(m: &'static Metric, a: &[&Phase], b: &[&Phase]) -> Option<MetricComparison> {
    let xa: Vec<f64> = a.iter().filter_map(|p| (m.get)(p)).collect();
    let xb: Vec<f64> = b.iter().filter_map(|p| (m.get)(p)).collect();
    let (sa, sb) = (Series::of(&xa)?, Series::of(&xb)?);
    let ratio = paired_ratio(&xa, &xb);
    let verdict = if m.kind == Kind::Count && sa.min == sa.max && sb.min == sb.max {
        // Exact counts need no statistics: equal is equal, and any difference is real.
        if sa.mean == sb.mean {
            Verdict::Identical
        } else if (sb.mean < sa.mean) == m.lower_is_better {
            Verdict::Better
        } else {
            Verdict::Worse
        }
    } else {
        let v = ratio.as_ref().map_or(Verdict::Inconclusive, verdict);
        if m.lower_is_better {
            v
        } else {
            v.flipped()
        }
    };
    Some(MetricComparison {
        metric: m.name,
        unit: m.unit,
        a: sa,
        b: sb,
        ratio,
        verdict,
    })
}
