//! A/B comparison, phase by phase: ratios with confidence intervals for timed metrics, exact
//! figures for counts, and the per-syscall difference.
//!
//! [`Comparison`] is also the document `compare --json` prints, documented in docs/compare.md;
//! bump [`VERSION`] on any change an older reader would misread.

use std::collections::{BTreeMap, BTreeSet};

use reqcost_record::{Phase, RunRecord, Target, Unit};
use serde::{Serialize, Serializer};

use crate::compare_code::{class_code_diffs, ClassCodeDiff};
use crate::compare_hops::{compare_hops, HopComparison};
use crate::document::{ClientCost, Generator};
use crate::findings::Finding;
use crate::phase_metrics::{per_request_ratio, record_drift, Kind, Metric, METRICS};
use crate::phases;
use crate::reading::{per_request, Reading};
use crate::stats::{count_verdict, mean, paired_ratio, verdict, Ratio, Verdict};

/// Identifies the document, as `reqcost-run` identifies a record.
pub const FORMAT: &str = "reqcost-compare";
/// Version of the document layout this build writes.
pub const VERSION: u32 = 1;

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
    /// B/A; absent when a run of either side measured zero.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ratio_with_interval"
    )]
    pub ratio: Option<Ratio>,
    /// From B's point of view: `better` means B costs less (or serves more).
    pub verdict: Verdict,
    /// The interval comes from the spread of each side's requests rather than of its runs: one
    /// run each, CPU, judged from the per-request distributions.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub from_requests: bool,
}

/// B/A with its 95 % interval, the bounds left out when one run each leaves no interval: JSON
/// has no infinity, and a reader must not take a missing bound for a measured one.
fn ratio_with_interval<S: Serializer>(r: &Option<Ratio>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Shown {
        ratio: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        low: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        high: Option<f64>,
    }
    r.as_ref()
        .map(|r| {
            let bounded = r.low.is_finite() && r.high.is_finite() && r.low > 0.0;
            Shown {
                ratio: r.ratio,
                low: bounded.then_some(r.low),
                high: bounded.then_some(r.high),
            }
        })
        .serialize(s)
}

#[derive(Debug, Clone, Serialize)]
pub struct SyscallDiff {
    pub name: String,
    pub a_per_request: f64,
    pub b_per_request: f64,
}

impl SyscallDiff {
    /// B's calls per request less A's.
    pub fn change(&self) -> f64 {
        self.b_per_request - self.a_per_request
    }
}

/// One phase compared: the records of each side that measured it, paired in the order they
/// ran.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseComparison {
    /// `main`, `slow-clients`, `class:NAME`, ...
    pub phase: String,
    pub repetitions: usize,
    pub metrics: Vec<MetricComparison>,
    /// Syscalls per request, mean over repetitions, largest difference first.
    pub syscalls: Vec<SyscallDiff>,
    /// The upstream hops both sides followed (docs/stack.md); empty without.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<HopComparison>,
}

/// Most changed syscalls an output lists.
const CHANGED_SYSCALLS: usize = 15;

impl PhaseComparison {
    /// The syscalls whose calls per request changed by what two decimals show, largest change
    /// first, at most [`CHANGED_SYSCALLS`].
    pub fn changed_syscalls(&self) -> Vec<&SyscallDiff> {
        self.syscalls
            .iter()
            .filter(|s| s.change().abs() >= 0.005)
            .take(CHANGED_SYSCALLS)
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Side {
    A,
    B,
}

impl Side {
    pub fn label(self) -> &'static str {
        match self {
            Side::A => "A",
            Side::B => "B",
        }
    }
}

/// A record that did not complete, compared for what it holds.
#[derive(Debug, Clone, Serialize)]
pub struct PartialRun {
    pub side: Side,
    pub id: String,
    /// How it ended: `server died (...)`, `interrupted`, `failed (...)`.
    pub outcome: String,
}

/// What ran on one side.
#[derive(Debug, Clone, Serialize)]
pub struct SideRuns {
    /// The server command of its first record, or its process name when attached.
    pub server: String,
    /// Run ids of its records, in the order they ran.
    pub runs: Vec<String>,
}

impl SideRuns {
    fn of(records: &[Reading]) -> SideRuns {
        SideRuns {
            server: records
                .first()
                .map(|r| server_command(&r.record.target))
                .unwrap_or_default(),
            runs: records.iter().map(|r| r.record.id.clone()).collect(),
        }
    }
}

/// The server command a record launched, or the measured process's name when it attached.
pub fn server_command(target: &Target) -> String {
    target
        .command
        .as_ref()
        .map_or_else(|| target.comm.clone(), |c| c.join(" "))
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub format: &'static str,
    pub version: u32,
    /// What every per-unit figure divides by: absent for `request`.
    #[serde(skip_serializing_if = "Unit::is_request")]
    pub unit: Unit,
    pub a: SideRuns,
    pub b: SideRuns,
    /// The side of every record in the order they started: `A B B A …` when interleaved.
    pub run_order: Vec<Side>,
    pub partial: Vec<PartialRun>,
    /// Every phase both sides measured, in the order A ran them.
    pub phases: Vec<PhaseComparison>,
    /// The `--load` command's cost per unit in the main phase, when both sides measured it:
    /// the client's side beside the server's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub client: Vec<MetricComparison>,
    /// Who the client was on each side, A's then B's, when measured.
    #[serde(skip)]
    pub client_generators: [Option<Generator>; 2],
    /// Phases that only A's records, or only B's, measured: not compared.
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
    /// Finding ids of every B run but not every A run.
    pub findings_appeared: Vec<String>,
    /// Finding ids of every A run but not every B run.
    pub findings_vanished: Vec<String>,
    /// The findings of A's runs and of B's, for people (the HTML report); the JSON names what
    /// changed in `findings_appeared` and `findings_vanished`.
    #[serde(skip)]
    pub side_findings: [Vec<SideFinding>; 2],
    /// Each request class's flame graph difference (docs/compare.md, "Per class code"); empty
    /// when neither side's samples carry request tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub class_code: Vec<ClassCodeDiff>,
}

/// One finding of a side's runs, as the run where it explains most CPU shows it.
#[derive(Debug, Clone)]
pub struct SideFinding {
    pub finding: Finding,
    /// How many of the side's runs have it.
    pub runs: usize,
}

/// Finding ids (major or minor) that every one of `records` has.
fn steady_findings(records: &[Reading]) -> BTreeSet<String> {
    let mut sets = records.iter().map(|r| {
        r.analysis
            .findings
            .iter()
            .map(|f| f.id.clone())
            .collect::<BTreeSet<_>>()
    });
    let first = sets.next().unwrap_or_default();
    sets.fold(first, |acc, s| acc.intersection(&s).cloned().collect())
}

/// The findings of one side's runs, each once, the most CPU first.
fn side_findings(records: &[Reading]) -> Vec<SideFinding> {
    let mut seen: Vec<SideFinding> = Vec::new();
    for f in records.iter().flat_map(|r| &r.analysis.findings) {
        match seen.iter_mut().find(|s| s.finding.id == f.id) {
            Some(s) => {
                s.runs += 1;
                if f.cpu_share > s.finding.cpu_share {
                    s.finding = f.clone();
                }
            }
            None => seen.push(SideFinding {
                finding: f.clone(),
                runs: 1,
            }),
        }
    }
    seen.sort_by(|x, y| y.finding.cpu_share.total_cmp(&x.finding.cpu_share));
    seen
}

/// Compares runs of A with runs of B, each read once: per request, or per the unit every run
/// defaults to when none served requests (UDP servers, per MiB).
pub fn compare(ra: &[RunRecord], rb: &[RunRecord]) -> Comparison {
    let unit = common_unit(ra.iter().chain(rb));
    Comparison {
        unit,
        class_code: class_code_diffs(ra, rb),
        ..compare_readings(&read_in(ra, unit), &read_in(rb, unit))
    }
}

pub(crate) fn read_in(records: &[RunRecord], unit: Unit) -> Vec<Reading<'_>> {
    match unit {
        Unit::Request => per_request(records),
        unit => records.iter().map(|r| Reading::of(r, Some(unit))).collect(),
    }
}

/// The default unit of every record's main phase when they all agree, else the request.
pub(crate) fn common_unit<'r>(records: impl Iterator<Item = &'r RunRecord>) -> Unit {
    let mut units = records.filter_map(|r| Some(r.main_phase()?.default_unit()));
    let Some(first) = units.next() else {
        return Unit::Request;
    };
    match units.all(|u| u == first) {
        true => first,
        false => Unit::Request,
    }
}

/// Compares runs of A with runs of B phase by phase, each phase paired in the order the runs
/// ran. Records without a phase are left out of its comparison.
fn compare_readings(ra: &[Reading], rb: &[Reading]) -> Comparison {
    let (fa, fb) = (steady_findings(ra), steady_findings(rb));
    Comparison {
        format: FORMAT,
        version: VERSION,
        unit: Unit::Request,
        a: SideRuns::of(ra),
        b: SideRuns::of(rb),
        run_order: run_order(ra, rb),
        partial: partial_runs(Side::A, ra)
            .chain(partial_runs(Side::B, rb))
            .collect(),
        phases: phases::shared(ra, rb)
            .into_iter()
            .map(|name| compare_phase(name, ra, rb))
            .collect(),
        client: compare_clients(ra, rb),
        client_generators: [ra, rb].map(|records| {
            records
                .iter()
                .find_map(|r| Some(r.analysis.client.as_ref()?.generator))
        }),
        only_in_a: phases::only_in(ra, rb),
        only_in_b: phases::only_in(rb, ra),
        findings_appeared: fb.difference(&fa).cloned().collect(),
        findings_vanished: fa.difference(&fb).cloned().collect(),
        side_findings: [side_findings(ra), side_findings(rb)],
        class_code: Vec::new(),
    }
}

/// Which side ran when, from the records' start times (a stable sort keeps each side's order
/// when the times are equal).
fn run_order(ra: &[Reading], rb: &[Reading]) -> Vec<Side> {
    let mut runs: Vec<(f64, Side)> = ra
        .iter()
        .map(|r| (r.record.started_unix_s, Side::A))
        .chain(rb.iter().map(|r| (r.record.started_unix_s, Side::B)))
        .collect();
    runs.sort_by(|x, y| x.0.total_cmp(&y.0));
    runs.into_iter().map(|(_, side)| side).collect()
}

fn partial_runs<'a>(side: Side, records: &'a [Reading]) -> impl Iterator<Item = PartialRun> + 'a {
    records.iter().filter_map(move |r| {
        Some(PartialRun {
            side,
            id: r.record.id.clone(),
            outcome: phases::partial(r.record)?,
        })
    })
}

fn compare_phase(name: String, ra: &[Reading], rb: &[Reading]) -> PhaseComparison {
    let (a, b) = (phases::named(ra, &name), phases::named(rb, &name));
    let mut metrics: Vec<MetricComparison> = METRICS
        .iter()
        .filter_map(|m| compare_metric(m, &a, &b))
        .collect();
    if let ([a], [b], [ra], [rb]) = (&a[..], &b[..], ra, rb) {
        let drift = [record_drift(&ra.raw_phases), record_drift(&rb.raw_phases)];
        judge_cpu_from_requests(&mut metrics, a, b, drift);
    }
    PhaseComparison {
        phase: name,
        repetitions: a.len().min(b.len()),
        syscalls: syscall_diffs(&a, &b),
        hops: compare_hops(&a, &b, ra.first().map(|r| r.record)),
        metrics,
    }
}

/// One run each leaves the runs no spread to judge by, but each run's requests have one, and
/// each record its drift between two measurements of a phase: the CPU's interval and verdict
/// then come from those, where both phases counted enough requests.
fn judge_cpu_from_requests(
    metrics: &mut [MetricComparison],
    a: &Phase,
    b: &Phase,
    drift: [f64; 2],
) {
    let Some(cpu) = metrics.iter_mut().find(|m| m.metric == "CPU") else {
        return;
    };
    let Some(ratio) = cpu
        .ratio
        .and_then(|r| per_request_ratio(a, b, r.ratio, drift))
    else {
        return;
    };
    cpu.ratio = Some(ratio);
    cpu.verdict = verdict(&ratio);
    cpu.from_requests = true;
}

/// Every syscall either side made, per request, largest difference first.
fn syscall_diffs(a: &[&Phase], b: &[&Phase]) -> Vec<SyscallDiff> {
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
        .collect::<BTreeSet<_>>()
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
    syscalls
}

impl Comparison {
    /// Who the client was: one label when both sides had the same, else each side's.
    pub fn client_label(&self) -> String {
        match self.client_generators {
            [Some(a), Some(b)] if a != b => format!("A: {}; B: {}", a.label(), b.label()),
            [Some(g), _] | [_, Some(g)] => g.label().into(),
            [None, None] => "client".into(),
        }
    }
}

/// A figure of the client's cost: (name, unit, kind, how to read it).
type ClientMetric = (
    &'static str,
    &'static str,
    Kind,
    fn(&ClientCost) -> Option<f64>,
);

/// The client's CPU (timed), syscalls (counted) per unit and kernel share (sampled), side by
/// side.
fn compare_clients(ra: &[Reading], rb: &[Reading]) -> Vec<MetricComparison> {
    let values = |records: &[Reading], get: fn(&ClientCost) -> Option<f64>| -> Vec<f64> {
        records
            .iter()
            .filter_map(|r| get(r.analysis.client.as_ref()?))
            .collect()
    };
    let client_metrics: [ClientMetric; 4] = [
        ("client CPU", "µs", Kind::Timed, |c| Some(c.cpu_us)),
        ("client CPU % of a core", "%", Kind::Timed, |c| {
            c.percent_of_core
        }),
        ("client syscalls", "calls", Kind::Count, |c| c.syscalls),
        // Sampled, as the CPU is: its share of the client's samples.
        ("client kernel share", "%", Kind::Timed, |c| {
            c.kernel_split.as_ref().map(|s| s.kernel_share * 100.0)
        }),
    ];
    client_metrics
        .into_iter()
        .filter_map(|(name, unit, kind, get)| {
            compare_values(name, unit, kind, true, &values(ra, get), &values(rb, get))
        })
        .collect()
}

fn compare_metric(m: &'static Metric, a: &[&Phase], b: &[&Phase]) -> Option<MetricComparison> {
    let xa: Vec<f64> = a.iter().filter_map(|p| (m.get)(p)).collect();
    let xb: Vec<f64> = b.iter().filter_map(|p| (m.get)(p)).collect();
    compare_values(m.name, m.unit, m.kind, m.lower_is_better, &xa, &xb)
}

/// One metric's values on each side, one per run, compared.
pub(crate) fn compare_values(
    name: &'static str,
    unit: &'static str,
    kind: Kind,
    lower_is_better: bool,
    xa: &[f64],
    xb: &[f64],
) -> Option<MetricComparison> {
    let (sa, sb) = (Series::of(xa)?, Series::of(xb)?);
    let ratio = paired_ratio(xa, xb);
    let exact = kind == Kind::Count && sa.min == sa.max && sb.min == sb.max;
    let cost_verdict = if exact {
        count_verdict(sa.mean, sb.mean)
    } else {
        ratio.as_ref().map_or(Verdict::Inconclusive, verdict)
    };
    let verdict = if lower_is_better {
        cost_verdict
    } else {
        cost_verdict.flipped()
    };
    Some(MetricComparison {
        metric: name,
        unit,
        a: sa,
        b: sb,
        ratio,
        verdict,
        from_requests: false,
    })
}
