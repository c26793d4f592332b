//! Driving the load generator from the tests: a plan from workload options, one phase run.

use std::sync::atomic::AtomicBool;

use reqcost_record::ClientStats;
use reqcost_workload::{PhaseSpec, Plan, WorkloadOptions};

/// The workload of `count` requests to `url`, with every other option at its default.
pub fn options(url: &str, count: u64) -> WorkloadOptions {
    WorkloadOptions {
        url: url.into(),
        count,
        ..Default::default()
    }
}

pub fn plan(options: WorkloadOptions) -> Plan {
    options
        .plan()
        .unwrap_or_else(|e| panic!("plan {options:?}: {e}"))
}

/// The phase named `name` of the plan.
pub fn phase(plan: &Plan, name: &str) -> PhaseSpec {
    plan.phases()
        .into_iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no phase {name}"))
}

/// Runs the phase named `name` of the plan.
pub fn run(plan: &Plan, name: &str) -> ClientStats {
    run_phase(plan, &phase(plan, name))
}

/// Runs `phase` of the plan to its end.
pub fn run_phase(plan: &Plan, phase: &PhaseSpec) -> ClientStats {
    plan.run(phase, &AtomicBool::new(false), &|_| {})
}

/// Plans `options` and runs its main phase.
pub fn run_main(options: WorkloadOptions) -> ClientStats {
    run(&plan(options), "main")
}
