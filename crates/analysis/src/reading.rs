//! reqcost's reading of one record, made once per command and handed to every renderer: the
//! terminal summary, the JSON document, the HTML report, the OpenMetrics exposition and the
//! Pyroscope push all show its figures and findings, and none derives its own.

use reqcost_record::{
    ClientStats, CpuMethod, CpuWindows, Machine, OtherTraffic, Phase, Pinning, Profile, RunRecord,
    Target, Unit, WindowTotals, Workload,
};

use crate::cost_table::CostTable;
use crate::document::{Analysis, PhaseAnalysis};
use crate::findings::{unevaluated, Unevaluated};

/// One record as every output shows it. The record itself stays inside the analysis, so that
/// no renderer derives a figure of its own from it: they get its description, its samples,
/// what each phase recorded beside its figures ([`PhaseRecord`]), and the analysis.
#[derive(Debug, Clone)]
pub struct Reading<'r> {
    pub(crate) record: &'r RunRecord,
    /// What the record says of the run beside its figures.
    pub run: Run<'r>,
    /// The sampled call chains of the whole run, which the profile exports draw.
    pub profile: Option<&'r Profile>,
    /// What each phase recorded beside its figures, in the order they ran.
    pub phases: Vec<PhaseRecord>,
    /// The record's phases with their per-unit figures per the unit shown (the profile is not
    /// copied with them): what the analysis's comparisons compute from, out of renderers' reach.
    pub(crate) raw_phases: Vec<Phase>,
    /// The document of `phases` (`report --json`): per-unit figures, findings, notes.
    pub analysis: Analysis,
    /// The phases side by side, which the summary shows when there are several.
    pub cost_table: CostTable,
    /// The rules the findings could not judge, so that no finding is not read as nothing wrong.
    pub not_evaluated: Vec<Unevaluated>,
    /// Requests the sampler ran through, the unmeasured warm-up and unprobed passes included
    /// (`RunRecord::sampled_requests`): what the profile's samples divide by.
    pub sampled_requests: u64,
}

impl<'r> Reading<'r> {
    /// The reading of `record` with its per-unit figures per `per`, or per each phase's default
    /// unit (requests when it had any). Findings are judged per request whatever the unit, or,
    /// when no request was counted, per the main phase's default unit.
    pub fn of(record: &'r RunRecord, per: Option<Unit>) -> Reading<'r> {
        let phases = phases_in(record, per);
        Reading {
            record,
            run: Run {
                target: &record.target,
                workload: &record.workload,
                machine: &record.machine,
                pinning: &record.pinning,
                reqcost_version: &record.reqcost_version,
                started_unix_s: record.started_unix_s,
            },
            profile: record.profile.as_ref(),
            analysis: Analysis::of_phases(record, &phases),
            cost_table: CostTable::of_phases(&phases),
            not_evaluated: unevaluated(record),
            sampled_requests: record.sampled_requests(),
            phases: phases.iter().map(PhaseRecord::of).collect(),
            raw_phases: phases,
        }
    }

    /// Each phase with its figures and its document, in the order they ran.
    pub fn phase_pairs(&self) -> impl Iterator<Item = (&PhaseRecord, &PhaseAnalysis)> {
        self.phases.iter().zip(&self.analysis.phases)
    }
}

/// What one phase recorded beside its figures, which the summary describes it by: its client
/// model, the load generator's own counts, the traffic of other clients and how its CPU was
/// measured. The server's figures are not here: renderers read them from the document, so the
/// report cannot run a computation of its own on a raw phase.
#[derive(Debug, Clone)]
pub struct PhaseRecord {
    pub name: String,
    pub client_model: Option<String>,
    /// What reqcost's load generator counted and timed.
    pub client: ClientStats,
    /// Requests the server served, counted on its side, when reqcost sent none (attached to a
    /// server its own clients drive); requests inside QUIC are not among them.
    pub served: Option<f64>,
    /// The server's other clients' traffic, when it served any beside reqcost's.
    pub other_traffic: Option<OtherTraffic>,
    /// Units of work the per-unit figures divide by.
    pub units: f64,
    /// How the phase's CPU was measured, when the probes ran in windows.
    pub cpu_windows: Option<WindowsRecord>,
}

/// How a phase's CPU was measured (docs/record.md, "How CPU was measured"): the record's
/// description of its windows, without their CPU, whose figures are the document's.
#[derive(Debug, Clone)]
pub struct WindowsRecord {
    pub method: CpuMethod,
    pub reason: String,
    pub probed: WindowCounts,
    pub unprobed: WindowCounts,
    /// What the probed windows' counts were scaled by.
    pub count_scale: f64,
    /// The unprobed pass's work against the probed run's, by the server's reads and writes,
    /// when it was measured.
    pub pass_factor: Option<f64>,
}

/// The windows of one kind: how many, the requests they served and their time.
#[derive(Debug, Clone, Copy)]
pub struct WindowCounts {
    pub windows: u32,
    pub requests: u64,
    pub elapsed_s: f64,
}

impl PhaseRecord {
    /// What `p` recorded beside its figures.
    pub fn of(p: &Phase) -> PhaseRecord {
        PhaseRecord {
            name: p.name.clone(),
            client_model: p.client_model.clone(),
            client: p.client.clone(),
            served: (p.client.requests == 0 && p.requests.is_some())
                .then(|| p.units_of(Unit::Request).unwrap_or(0.0)),
            other_traffic: p.other_traffic.filter(|o| o.requests > 0),
            units: p.units(),
            cpu_windows: p.cpu_windows.as_ref().map(WindowsRecord::of),
        }
    }
}

impl WindowsRecord {
    fn of(w: &CpuWindows) -> WindowsRecord {
        WindowsRecord {
            method: w.method,
            reason: w.reason.clone(),
            probed: WindowCounts::of(&w.probed),
            unprobed: WindowCounts::of(&w.unprobed),
            count_scale: w.count_scale,
            pass_factor: w.pass_work.as_ref().map(|p| p.factor),
        }
    }
}

impl WindowCounts {
    fn of(t: &WindowTotals) -> WindowCounts {
        WindowCounts {
            windows: t.windows,
            requests: t.requests,
            elapsed_s: t.elapsed_s,
        }
    }
}

/// What a record says of the run itself: who was measured, under what load, on which machine,
/// and when.
#[derive(Debug, Clone, Copy)]
pub struct Run<'r> {
    pub target: &'r Target,
    pub workload: &'r Workload,
    pub machine: &'r Machine,
    pub pinning: &'r Pinning,
    pub reqcost_version: &'r str,
    /// Start of the measurement, seconds since the Unix epoch.
    pub started_unix_s: f64,
}

/// Each of `records` read per request, as `compare` and `check` judge them.
pub(crate) fn per_request(records: &[RunRecord]) -> Vec<Reading<'_>> {
    records
        .iter()
        .map(|r| Reading::of(r, Some(Unit::Request)))
        .collect()
}

/// The phases of `record` per `per`, or per each one's default unit.
pub fn phases_in(record: &RunRecord, per: Option<Unit>) -> Vec<Phase> {
    record
        .phases
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p.in_units(per.unwrap_or_else(|| p.default_unit()));
            p
        })
        .collect()
}
