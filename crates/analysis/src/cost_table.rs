//! Phases side by side: a few per-unit metrics of each phase in columns, so a slow-client or
//! per-class phase reads against the main one, and several runs' phases against each other
//! (`demo`). Computed here, with where each figure came from, so the report only lays it out.

use reqcost_record::{Phase, RunRecord, Unit};

use crate::phase_metrics::{from_procfs, metric};

/// Metrics shown side by side, after the units of work each column counted.
const COST_ROWS: [&str; 4] = ["CPU", "CPU system", "write calls", "latency p50"];

/// The columns' figures, one row per metric.
#[derive(Debug, Clone, PartialEq)]
pub struct CostTable {
    /// The unit of the first column's figures, which the table is headed by.
    pub unit: Unit,
    /// Each column's name.
    pub columns: Vec<String>,
    /// Units of work each column's phase counted.
    pub units: Vec<f64>,
    pub rows: Vec<CostRow>,
}

/// One metric of every column.
#[derive(Debug, Clone, PartialEq)]
pub struct CostRow {
    pub name: &'static str,
    /// Its unit, as [`crate::phase_metrics::Metric::unit`] names it.
    pub unit: &'static str,
    pub cells: Vec<CostCell>,
}

/// One metric of one column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostCell {
    /// Absent where it could not be measured.
    pub value: Option<f64>,
    /// The value comes from /proc/PID/io, the probes being off, which does not count socket
    /// send*/recv* calls.
    pub from_procfs: bool,
}

impl CostTable {
    /// The table of `columns`, each a name and its phase.
    pub fn of(columns: &[(String, &Phase)]) -> CostTable {
        let rows = COST_ROWS.map(metric).map(|m| CostRow {
            name: m.name,
            unit: m.unit,
            cells: columns
                .iter()
                .map(|(_, p)| {
                    let value = (m.get)(p);
                    CostCell {
                        value,
                        from_procfs: m.procfs_fallback && from_procfs(p) && value.is_some(),
                    }
                })
                .collect(),
        });
        CostTable {
            unit: columns.first().map_or(Unit::Request, |(_, p)| p.unit),
            columns: columns.iter().map(|(name, _)| name.clone()).collect(),
            units: columns.iter().map(|(_, p)| p.units()).collect(),
            rows: rows.to_vec(),
        }
    }

    /// The table of one run's phases, each column named after its phase.
    pub fn of_phases(phases: &[Phase]) -> CostTable {
        let columns: Vec<(String, &Phase)> = phases.iter().map(|p| (p.name.clone(), p)).collect();
        CostTable::of(&columns)
    }

    /// The phases of several runs side by side, each column named after its server (and
    /// phase, beyond main).
    pub fn of_runs(records: &[RunRecord]) -> CostTable {
        let columns: Vec<(String, &Phase)> = records
            .iter()
            .flat_map(|r| {
                r.phases.iter().map(|p| {
                    let name = if p.name == "main" {
                        r.target.comm.clone()
                    } else {
                        format!("{} {}", r.target.comm, p.name)
                    };
                    (name, p)
                })
            })
            .collect();
        CostTable::of(&columns)
    }

    /// Some figure comes from /proc/PID/io, which the table's footnote says.
    pub fn any_from_procfs(&self) -> bool {
        self.rows
            .iter()
            .any(|r| r.cells.iter().any(|c| c.from_procfs))
    }
}
