//! A phase's upstream hops compared (docs/stack.md): per hop both sides followed, its tree's
//! CPU and its requests per unit of the front's work, so that a change in the database behind
//! the application shows in the database's row, not only in the stack's total.

use reqcost_record::{Phase, RunRecord};
use serde::Serialize;

use crate::compare::{compare_values, MetricComparison};
use crate::phase_metrics::Kind;
use crate::stack_costs::hop_name;

/// One upstream hop of a phase, compared.
#[derive(Debug, Clone, Serialize)]
pub struct HopComparison {
    pub hop: u8,
    /// Its root process's name, as side A's record names it.
    pub name: String,
    /// `CPU` (µs) and `requests` of the hop per unit of the front's phase.
    pub metrics: Vec<MetricComparison>,
}

/// The hops both sides' phases `a` and `b` followed, by hop, named from `rec` (side A's first
/// record); empty when either side followed none.
pub(crate) fn compare_hops(
    a: &[&Phase],
    b: &[&Phase],
    rec: Option<&RunRecord>,
) -> Vec<HopComparison> {
    let Some(first) = a.first() else {
        return Vec::new();
    };
    first
        .hops
        .iter()
        .map(|h| h.hop)
        .filter(|hop| b.iter().any(|p| p.hops.iter().any(|h| h.hop == *hop)))
        .map(|hop| {
            let cpu_us = |p: &Phase| {
                let h = p.hops.iter().find(|h| h.hop == hop)?;
                per_unit(p, h.cpu.as_ref()?.total_ns as f64 / 1000.0)
            };
            let requests = |p: &Phase| {
                let h = p.hops.iter().find(|h| h.hop == hop)?;
                per_unit(p, h.requests.as_ref()?.requests as f64)
            };
            let values = |side: &[&Phase], get: &dyn Fn(&Phase) -> Option<f64>| -> Vec<f64> {
                side.iter().filter_map(|p| get(p)).collect()
            };
            let metrics = [
                (
                    "CPU",
                    "µs",
                    Kind::Timed,
                    &cpu_us as &dyn Fn(&Phase) -> Option<f64>,
                ),
                ("requests", "", Kind::Count, &requests),
            ]
            .into_iter()
            .filter_map(|(name, unit, kind, get)| {
                compare_values(name, unit, kind, true, &values(a, get), &values(b, get))
            })
            .collect();
            HopComparison {
                hop,
                name: rec.map_or_else(|| format!("hop {hop}"), |r| hop_name(r, hop)),
                metrics,
            }
        })
        .collect()
}

/// `v` per unit of the front's work in phase `p`, when it counted any.
fn per_unit(p: &Phase, v: f64) -> Option<f64> {
    let units = p.units();
    (units > 0.0).then(|| v / units)
}
