//! `check`: a CI gate that fails when a run costs more per request than its baseline allows.

use reqcost_analysis::check::{check, Limits};

use crate::args::CheckArgs;
use crate::print::PrintMode;
use crate::records::{load, main_phases};
use crate::Failure;

pub fn check_cmd(args: &CheckArgs) -> Result<(), Failure> {
    let run = load(&args.run)?;
    let base = load(&args.baseline)?;
    let (rp, bp) = (
        main_phases(std::slice::from_ref(&run))?,
        main_phases(std::slice::from_ref(&base))?,
    );
    let result = check(
        rp[0],
        bp[0],
        Limits {
            max_cpu_regression_pct: args.max_cpu_regression,
            max_syscalls_regression_pct: args.max_syscalls_regression,
        },
    )
    .map_err(Failure::bad_input)?;
    PrintMode::from_json_flag(args.json).print(&result, reqcost_report::check);
    if result.passed() {
        Ok(())
    } else {
        let worst: Vec<String> = result
            .items
            .iter()
            .filter(|i| !i.pass)
            .map(|i| {
                format!(
                    "{} {:+.1} % (limit +{:.1} %)",
                    i.metric, i.change_pct, i.limit_pct
                )
            })
            .collect();
        Err(Failure::run(format!(
            "regression against {}: {}",
            args.baseline.display(),
            worst.join("; ")
        )))
    }
}
