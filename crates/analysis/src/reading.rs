//! reqcost's reading of one record, made once per command and handed to every renderer: the
//! terminal summary, the JSON document, the HTML report, the OpenMetrics exposition and the
//! Pyroscope push all show its figures and findings, and none derives its own.

use reqcost_record::{Phase, RunRecord, Unit};

use crate::document::{Analysis, PhaseAnalysis};
use crate::findings::{unevaluated, Unevaluated};

/// One record as every output shows it.
#[derive(Debug, Clone)]
pub struct Reading<'r> {
    /// What was measured: the descriptive fields (server, workload, machine) and the profile.
    pub record: &'r RunRecord,
    /// The record's phases with their per-unit figures per the unit shown; the profile is not
    /// copied with them.
    pub phases: Vec<Phase>,
    /// The document of `phases` (`report --json`): per-unit figures, findings, notes.
    pub analysis: Analysis,
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
            analysis: Analysis::of_phases(record, &phases),
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
