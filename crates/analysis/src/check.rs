//! `reqcost check`: is a run's cost within bounds of a baseline's? For CI gates.

use reqcost_record::Phase;
use serde::Serialize;

use crate::metrics::{metric, syscalls_per_request};

/// Allowed increases, in percent of the baseline.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_cpu_regression_pct: f64,
    pub max_syscalls_regression_pct: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckItem {
    pub metric: String,
    pub baseline: f64,
    pub run: f64,
    pub change_pct: f64,
    pub limit_pct: f64,
    pub pass: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    pub items: Vec<CheckItem>,
}

impl CheckResult {
    pub fn passed(&self) -> bool {
        self.items.iter().all(|i| i.pass)
    }
}

/// Compares `run` with `baseline` per request. Errors name what the records lack.
pub fn check(run: &Phase, baseline: &Phase, limits: Limits) -> Result<CheckResult, String> {
    let cpu = metric("CPU").get;
    let mut items = vec![item(
        "CPU per request (µs)",
        cpu(baseline),
        cpu(run),
        limits.max_cpu_regression_pct,
    )
    .ok_or("CPU per request is missing from one of the records (see its `missing` field)")?];
    // Every syscall when both records have eBPF figures; else what /proc/PID/io counts.
    let syscalls = match (syscalls_per_request(baseline), syscalls_per_request(run)) {
        (Some(b), Some(r)) => item(
            "syscalls per request",
            Some(b),
            Some(r),
            limits.max_syscalls_regression_pct,
        ),
        _ => {
            let rw = |p: &Phase| Some(p.per_request.read_syscalls? + p.per_request.write_syscalls?);
            item(
                "read+write calls per request (procfs)",
                rw(baseline),
                rw(run),
                limits.max_syscalls_regression_pct,
            )
        }
    };
    items.push(syscalls.ok_or("syscall counts are missing from one of the records")?);
    Ok(CheckResult { items })
}

fn item(name: &str, baseline: Option<f64>, run: Option<f64>, limit_pct: f64) -> Option<CheckItem> {
    let (baseline, run) = (baseline?, run?);
    let change_pct = if baseline > 0.0 {
        (run / baseline - 1.0) * 100.0
    } else if run > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    Some(CheckItem {
        metric: name.to_string(),
        baseline,
        run,
        change_pct,
        limit_pct,
        pass: change_pct <= limit_pct,
    })
}
