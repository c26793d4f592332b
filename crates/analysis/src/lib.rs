//! The analysis stage: per-request tallies, statistics over repeated measurements, comparisons,
//! regression checks, and (from the record alone) the findings that explain a server's cost.

pub mod check;
mod client_cost;
pub mod compare;
pub mod compare_code;
pub mod compare_hops;
pub mod cost_table;
pub mod counting;
mod cpu_split;
pub mod document;
pub mod findings;
pub mod hot_code;
pub mod invariants;
pub mod kernel_figures;
pub mod phase_metrics;
pub mod phases;
pub mod profile;
pub mod reading;
pub mod replay;
mod request_costs;
pub mod requests;
pub mod stack_costs;
pub mod stats;
pub mod sweep;
pub mod tagged;
