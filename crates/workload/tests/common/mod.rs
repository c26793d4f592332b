//! Driving the load generator from the tests: a plan from command-line arguments, one phase run.

use std::sync::atomic::AtomicBool;

use clap::Parser;
use reqcost_record::ClientStats;
use reqcost_workload::{Plan, WorkloadArgs};

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    workload: WorkloadArgs,
}

pub fn args(argv: &[&str]) -> WorkloadArgs {
    Wrapper::try_parse_from(std::iter::once("reqcost").chain(argv.iter().copied()))
        .unwrap_or_else(|e| panic!("bad test arguments {argv:?}: {e}"))
        .workload
}

pub fn plan(argv: &[&str]) -> Plan {
    args(argv)
        .plan()
        .unwrap_or_else(|e| panic!("plan {argv:?}: {e}"))
}

/// Runs the phase named `name` of the plan.
pub fn run(plan: &Plan, name: &str) -> ClientStats {
    let phase = plan
        .phases()
        .into_iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no phase {name}"));
    plan.run(&phase, &AtomicBool::new(false), &|_| {})
}
