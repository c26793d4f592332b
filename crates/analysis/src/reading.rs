//! reqcost's reading of one record, made once per command and handed to every renderer: the
//! terminal summary, the JSON document, the HTML report, the OpenMetrics exposition and the
//! Pyroscope push all show its figures and findings, and none derives its own.

use reqcost_record::{Machine, Phase, Pinning, Profile, RunRecord, Target, Unit, Workload};

use crate::cost_table::CostTable;
use crate::document::{Analysis, PhaseAnalysis};
use crate::findings::{unevaluated, Unevaluated};

/// One record as every output shows it. The record itself stays inside the analysis, so that
/// no renderer derives a figure of its own from it: they get its description, its samples and
/// its phases (for what each phase recorded beside the figures), and the analysis.
#[derive(Debug, Clone)]
pub struct Reading<'r> {
    pub(crate) record: &'r RunRecord,
    /// What the record says of the run beside its figures.
    pub run: Run<'r>,
    /// The sampled call chains of the whole run, which the profile exports draw.
    pub profile: Option<&'r Profile>,
    /// The record's phases with their per-unit figures per the unit shown; the profile is not
    /// copied with them.
    pub phases: Vec<Phase>,
    /// The document of `phases` (`report --json`): per-unit figures, findings, notes.
    pub analysis: Analysis,
    /// The phases side by side, which the summary shows when there are several.
    pub cost_table: CostTable,
    /// The rules the findings could not judge, so that no finding is not read as nothing wrong.
    pub not_evaluated: Vec<Unevaluated>,
    /// Requests the sampler ran through, the unmeasured warm-up included: what the profile's
    /// samples divide by.
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
            sampled_requests: record.workload.warmup_requests
                + phases
                    .iter()
                    .filter_map(|p| p.units_of(Unit::Request))
                    .sum::<f64>() as u64,
            phases,
        }
    }

    /// Each phase with its figures and its document, in the order they ran.
    pub fn phase_pairs(&self) -> impl Iterator<Item = (&Phase, &PhaseAnalysis)> {
        self.phases.iter().zip(&self.analysis.phases)
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
