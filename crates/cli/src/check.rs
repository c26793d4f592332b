//! `check`: a CI gate that fails when a run costs more per request (or per `--per` unit) than its
//! baseline allows, in any phase, or shows a major finding its baseline does not.

use std::path::Path;

use reqcost_analysis::check::{check_per, refuse_partial, Limits};
use reqcost_record::RunRecord;

use crate::args::CheckArgs;
use crate::print::PrintMode;
use crate::records::load;
use crate::Failure;

pub fn check_cmd(args: &CheckArgs) -> Result<(), Failure> {
    let run = judged(&args.run, args.allow_partial)?;
    let base = judged(&args.baseline, args.allow_partial)?;
    let result = check_per(
        &run,
        &base,
        args.per.per,
        Limits {
            max_cpu_regression_pct: args.max_cpu_regression,
            max_syscalls_regression_pct: args.max_syscalls_regression,
        },
    )
    .map_err(Failure::bad_input)?;
    PrintMode::from_json_flag(args.json).print(&result, reqcost_report::check);
    if result.passed {
        Ok(())
    } else {
        Err(Failure::run(format!(
            "regression against {}: {}",
            args.baseline.display(),
            result.failures().join("; ")
        )))
    }
}

/// The record at `path`, refused when partial unless `allow_partial`.
fn judged(path: &Path, allow_partial: bool) -> Result<RunRecord, Failure> {
    let record = load(path)?;
    if !allow_partial {
        refuse_partial(&record).map_err(|e| {
            Failure::bad_input(format!(
                "{}: {e} (rerun it, or pass --allow-partial to judge what it holds)",
                path.display()
            ))
        })?;
    }
    Ok(record)
}
