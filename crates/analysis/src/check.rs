//! `reqcost check`: is a run's cost within bounds of a baseline's, in every phase both measured,
//! and has no major finding appeared? For CI gates.
//!
//! [`CheckResult`] is also the document `check --json` prints, documented in docs/ci.md; bump
//! [`VERSION`] on any change an older reader would misread.

use std::slice;

use reqcost_record::{HopPhase, Phase, RunRecord, Unit};
use serde::Serialize;

use crate::compare::{common_unit, read_in};
use crate::findings::Finding;
use crate::phase_metrics::{
    metric, per_request_ratio, record_drift, stats_ratio, syscalls_per_request,
};
use crate::phases;
use crate::reading::Reading;
use crate::stack_costs::hop_name;

/// Identifies the document, as `reqcost-run` identifies a record.
pub const FORMAT: &str = "reqcost-check";
/// Version of the document layout this build writes.
pub const VERSION: u32 = 1;

/// Allowed increases, in percent of the baseline, in each phase.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Limits {
    pub max_cpu_regression_pct: f64,
    pub max_syscalls_regression_pct: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckItem {
    pub metric: String,
    pub baseline: f64,
    pub run: f64,
    pub change_pct: f64,
    pub limit_pct: f64,
    /// The upstream hop whose tree's CPU per unit of the front's work this bound judges
    /// (docs/stack.md); absent for the front's own figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hop: Option<u8>,
    /// 95 % confidence interval of `change_pct` (low, high), from the spread of each run's
    /// per-request CPU: CPU only, when both phases counted enough requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_pct: Option<[f64; 2]>,
    pub pass: bool,
}

impl CheckItem {
    /// Beyond the limit by the point change, but not by its interval: noise, not a regression.
    pub fn within_noise(&self) -> bool {
        self.pass && !within_pct(self.change_pct, self.limit_pct)
    }
}

/// One phase's bounds.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseCheck {
    /// `main`, `slow-clients`, `class:NAME`, ...
    pub phase: String,
    pub items: Vec<CheckItem>,
}

impl PhaseCheck {
    pub fn passed(&self) -> bool {
        self.items.iter().all(|i| i.pass)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    pub format: &'static str,
    pub version: u32,
    /// What every bound's figures divide by: absent for `request`.
    #[serde(skip_serializing_if = "Unit::is_request")]
    pub unit: Unit,
    /// Run ids of the judged record and of its baseline.
    pub run: String,
    pub baseline: String,
    pub limits: Limits,
    /// Every phase within its bounds and no new major finding.
    pub passed: bool,
    /// Every phase both records measured, in the order the run measured them.
    pub phases: Vec<PhaseCheck>,
    /// Major findings of the run whose id the baseline's findings do not have at all; a generic
    /// one only when its cost grew beyond the CPU bound.
    pub new_major_findings: Vec<Finding>,
    /// Phases that only the run, or only the baseline, measured: not judged.
    pub only_in_run: Vec<String>,
    pub only_in_baseline: Vec<String>,
}

impl CheckResult {
    /// What failed, one line each, naming its phase or finding.
    pub fn failures(&self) -> Vec<String> {
        let limits = self.phases.iter().flat_map(|p| {
            p.items.iter().filter(|i| !i.pass).map(|i| {
                format!(
                    "{}: {} {} (limit {})",
                    p.phase,
                    i.metric,
                    fmt_change_pct(i.change_pct),
                    fmt_change_pct(i.limit_pct)
                )
            })
        });
        let findings = self.new_major_findings.iter().map(|f| {
            format!(
                "new major finding {} in {} ({:.0} % of its CPU)",
                f.id,
                f.phase,
                f.cpu_share * 100.0
            )
        });
        limits.chain(findings).collect()
    }
}

/// Compares `run` with `baseline` phase by phase, each read once: per request, or per the unit
/// both default to when neither served requests (UDP servers, per MiB), as `compare` does.
/// Errors name what the records lack.
pub fn check(run: &RunRecord, baseline: &RunRecord, limits: Limits) -> Result<CheckResult, String> {
    check_per(run, baseline, None, limits)
}

/// [`check`] per `per` (`--per`), or per the unit both records default to.
pub fn check_per(
    run: &RunRecord,
    baseline: &RunRecord,
    per: Option<Unit>,
    limits: Limits,
) -> Result<CheckResult, String> {
    let unit = per.unwrap_or_else(|| common_unit([run, baseline].into_iter()));
    let (runs, baselines) = (slice::from_ref(run), slice::from_ref(baseline));
    check_readings(
        &read_in(runs, unit)[0],
        &read_in(baselines, unit)[0],
        unit,
        limits,
    )
}

/// [`check`] of the two records as read per `unit`.
fn check_readings(
    run: &Reading,
    baseline: &Reading,
    unit: Unit,
    limits: Limits,
) -> Result<CheckResult, String> {
    let pairs: Vec<(&Phase, &Phase)> = run
        .raw_phases
        .iter()
        .filter_map(|r| Some((r, phases::find(baseline, &r.name)?)))
        .collect();
    if pairs.is_empty() {
        return Err(format!(
            "run records {} and {} have no measured phase in common",
            run.analysis.run_id, baseline.analysis.run_id
        ));
    }
    let drift = [
        record_drift(&baseline.raw_phases),
        record_drift(&run.raw_phases),
    ];
    let phases = pairs
        .into_iter()
        .map(|(r, b)| {
            let mut judged = check_phase(r, b, unit, limits, drift)?;
            let records = [run.record, baseline.record];
            judged
                .items
                .extend(hop_items(r, b, records, unit, limits, drift));
            Ok(judged)
        })
        .collect::<Result<Vec<_>, String>>()?;
    let (runs, baselines) = (slice::from_ref(run), slice::from_ref(baseline));
    let new_major_findings = new_major_findings(run, baseline, limits);
    Ok(CheckResult {
        format: FORMAT,
        version: VERSION,
        unit,
        run: run.analysis.run_id.clone(),
        baseline: baseline.analysis.run_id.clone(),
        limits,
        passed: phases.iter().all(PhaseCheck::passed) && new_major_findings.is_empty(),
        phases,
        new_major_findings,
        only_in_run: phases::only_in(runs, baselines),
        only_in_baseline: phases::only_in(baselines, runs),
    })
}

/// Refuses a partial record: a run cut short may lack the very phase a regression lives in
/// (seeds/002's lives in the slow-client phase, which runs last), and a gate must not pass it
/// unawares.
pub fn refuse_partial(rec: &RunRecord) -> Result<(), String> {
    match phases::partial(rec) {
        Some(outcome) => Err(format!("run record {} is partial: {outcome}", rec.id)),
        None => Ok(()),
    }
}

/// A finding that the baseline has as minor and the run as major is not new: its cost is
/// judged by the bounds, and a rule near its threshold would otherwise flip the gate. A generic
/// finding names where the CPU goes, not a pathology: it stands out when a fix removes what
/// hid it, so it is new only when its cost grew beyond the CPU bound ([`generic_cost_grew`]).
fn new_major_findings(run: &Reading, baseline: &Reading, limits: Limits) -> Vec<Finding> {
    let known = |id: &str| baseline.analysis.findings.iter().any(|f| f.id == id);
    run.analysis
        .findings
        .iter()
        .filter(|f| f.major && !known(&f.id))
        .filter(|f| !f.is_generic() || generic_cost_grew(f, run, baseline, limits))
        .cloned()
        .collect()
}

/// Whether generic finding `f`, new in the run, costs more per unit than the CPU bound allows
/// to grow, in percent of the baseline's CPU per unit of the finding's phase: the baseline had
/// no such finding, so its cost there counts as nothing, and the run's share is taken at the
/// low end of its sampling interval (95 %). A phase whose CPU one side lacks cannot be judged,
/// and fails as any new finding does.
fn generic_cost_grew(f: &Finding, run: &Reading, baseline: &Reading, limits: Limits) -> bool {
    let cpu = metric("CPU").get;
    let Some((run_cpu, base_cpu)) = phases::find(run, &f.phase)
        .and_then(cpu)
        .zip(phases::find(baseline, &f.phase).and_then(cpu))
        .filter(|(_, b)| *b > 0.0)
    else {
        return true;
    };
    let samples = run.profile.map_or(0, |p| p.samples) as f64;
    let low_share =
        f.cpu_share - 1.96 * (f.cpu_share * (1.0 - f.cpu_share) / samples.max(1.0)).sqrt();
    low_share.max(0.0) * run_cpu > base_cpu * limits.max_cpu_regression_pct / 100.0
}

/// The 95 % interval of a change of CPU per request of `change_pct`, in %, from each phase's
/// per-request distribution and each record's drift, the baseline's first
/// ([`per_request_ratio`]).
fn cpu_interval(
    run: &Phase,
    baseline: &Phase,
    change_pct: f64,
    drift: [f64; 2],
) -> Option<[f64; 2]> {
    let r = per_request_ratio(baseline, run, 1.0 + change_pct / 100.0, drift)?;
    Some([(r.low - 1.0) * 100.0, (r.high - 1.0) * 100.0])
}

fn check_phase(
    run: &Phase,
    baseline: &Phase,
    unit: Unit,
    limits: Limits,
    drift: [f64; 2],
) -> Result<PhaseCheck, String> {
    let name = &run.name;
    let per = unit.name();
    let cpu = metric("CPU").get;
    let mut cpu_item = item(
        &format!("CPU per {per} (µs)"),
        cpu(baseline),
        cpu(run),
        limits.max_cpu_regression_pct,
    )
    .ok_or_else(|| {
        format!(
            "phase {name}: CPU per {per} is missing from one of the records (see its \
             `missing` field)"
        )
    })?;
    // A regression only when the whole interval is beyond the bound: one run's difference
    // within its noise is not one. The spread is known per request only.
    if unit == Unit::Request {
        cpu_item.interval_pct = cpu_interval(run, baseline, cpu_item.change_pct, drift);
    }
    if let Some([low, _]) = cpu_item.interval_pct {
        cpu_item.pass |= within_pct(low, cpu_item.limit_pct);
    }
    let mut items = vec![cpu_item];
    // Every syscall when both records have eBPF figures; else what /proc/PID/io counts.
    let syscalls = match (syscalls_per_request(baseline), syscalls_per_request(run)) {
        (Some(b), Some(r)) => item(
            &format!("syscalls per {per}"),
            Some(b),
            Some(r),
            limits.max_syscalls_regression_pct,
        ),
        _ => {
            let rw = |p: &Phase| Some(p.per_request.read_syscalls? + p.per_request.write_syscalls?);
            item(
                &format!("read+write calls per {per} (procfs)"),
                rw(baseline),
                rw(run),
                limits.max_syscalls_regression_pct,
            )
        }
    };
    items.push(syscalls.ok_or_else(|| {
        format!("phase {name}: syscall counts are missing from one of the records")
    })?);
    Ok(PhaseCheck {
        phase: name.clone(),
        items,
    })
}

/// Each upstream hop both records followed in the phase, under the same name: its tree's CPU
/// per unit of the front's work, held to the CPU bound. A slower database behind an unchanged
/// front fails the check in its own row. Its interval comes from the hop's own requests' spread
/// and each record's drift. A hop only one record followed, or under another name, is not
/// judged: hops are numbered in the order they were found.
fn hop_items(
    run: &Phase,
    baseline: &Phase,
    records: [&RunRecord; 2],
    unit: Unit,
    limits: Limits,
    drift: [f64; 2],
) -> Vec<CheckItem> {
    run.hops
        .iter()
        .filter(|h| hop_name(records[0], h.hop) == hop_name(records[1], h.hop))
        .filter_map(|h| {
            let (r, run_hop) = hop_cpu_per_unit(run, h.hop, unit)?;
            let (b, base_hop) = hop_cpu_per_unit(baseline, h.hop, unit)?;
            let name = format!(
                "{} (hop {}) CPU per {} (µs)",
                hop_name(records[0], h.hop),
                h.hop,
                unit.name()
            );
            let mut judged = item(&name, Some(b), Some(r), limits.max_cpu_regression_pct)?;
            judged.hop = Some(h.hop);
            let spread = base_hop.requests.as_ref().zip(run_hop.requests.as_ref());
            judged.interval_pct = spread
                .and_then(|(b, r)| stats_ratio(b, r, 1.0 + judged.change_pct / 100.0, drift))
                .map(|r| [(r.low - 1.0) * 100.0, (r.high - 1.0) * 100.0]);
            if let Some([low, _]) = judged.interval_pct {
                judged.pass |= within_pct(low, judged.limit_pct);
            }
            Some(judged)
        })
        .collect()
}

/// Hop `hop`'s tree CPU in phase `p`, in µs per `unit` of the front's work, with its figures.
fn hop_cpu_per_unit(p: &Phase, hop: u8, unit: Unit) -> Option<(f64, &HopPhase)> {
    let h = p.hops.iter().find(|h| h.hop == hop)?;
    let units = p.units_of(unit).filter(|u| *u > 0.0)?;
    Some((h.cpu.as_ref()?.total_ns as f64 / 1000.0 / units, h))
}

/// A relative change for people: `+12.3 %`; `new` where the baseline had none (an infinite
/// change); `>+1000x` beyond a thousandfold, where digits stop meaning anything; `n/a` for NaN.
pub fn fmt_change_pct(pct: f64) -> String {
    if pct.is_nan() {
        "n/a".into()
    } else if pct == f64::INFINITY {
        "new".into()
    } else if pct >= 100_000.0 {
        ">+1000x".into()
    } else {
        format!("{pct:+.1} %")
    }
}

fn item(name: &str, baseline: Option<f64>, run: Option<f64>, limit_pct: f64) -> Option<CheckItem> {
    let (baseline, run) = (baseline?, run?);
    let change_pct = if baseline > 0.0 {
        (run / baseline - 1.0) * 100.0
    } else if run > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    Some(CheckItem {
        metric: name.to_string(),
        baseline,
        run,
        change_pct,
        limit_pct,
        hop: None,
        interval_pct: None,
        pass: within(baseline, run, limit_pct),
    })
}

/// A change of `change_pct` within `limit_pct`, the bound included (to a relative 1e-12, as
/// [`within`]).
fn within_pct(change_pct: f64, limit_pct: f64) -> bool {
    within(100.0, 100.0 + change_pct, limit_pct)
}

/// `run` at most `limit_pct` above `baseline`, the bound included. Computed as a ratio in
/// floating point, 22 µs against 20 µs is 10.000000000000009 % and would fail a 10 % limit: a
/// run within a relative 1e-12 of the bound is on it.
fn within(baseline: f64, run: f64, limit_pct: f64) -> bool {
    let bound = baseline * (1.0 + limit_pct / 100.0);
    run <= bound || (run - bound) <= bound.abs() * 1e-12
}

#[cfg(test)]
mod tests {
    use super::fmt_change_pct;

    #[test]
    fn changes_print_without_infinities_or_runs_of_digits() {
        assert_eq!(fmt_change_pct(12.34), "+12.3 %");
        assert_eq!(fmt_change_pct(-50.0), "-50.0 %");
        assert_eq!(fmt_change_pct(f64::INFINITY), "new");
        assert_eq!(fmt_change_pct(1e160), ">+1000x");
        assert_eq!(fmt_change_pct(f64::NAN), "n/a");
    }
}
