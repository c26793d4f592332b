//! The analysis stage tested from fixture records alone: no root, eBPF or servers.

mod check;
mod compare;
mod document;
mod findings;
mod invariants;
mod kernel_split;
mod phase_metrics;
mod schema;
mod stack;
mod sweep;
mod util;
