//! `compare`: two configurations or two records, side by side, with statistics.

use reqcost_analysis::compare::compare;
use reqcost_measure::{Collect, Load, MeasureOptions, TargetSpec};
use reqcost_record::RunRecord;
use reqcost_report::export::Subject;

use crate::args::CompareArgs;
use crate::print::PrintMode;
use crate::records::{load, require_phases, save_run};
use crate::Failure;

pub fn compare_cmd(args: &CompareArgs) -> Result<(), Failure> {
    if args.pid.is_some() {
        return Err(Failure::bad_input(
            "compare does not take --pid: it launches both servers (--a, --b) or reads two \
             records. To compare running servers, record each with `reqcost run --url URL --pid \
             PID -o A.json` and run `reqcost compare A.json B.json`",
        ));
    }
    let (labels, a, b) = match (&args.a, &args.b) {
        (Some(a), Some(b)) => {
            let load = args
                .load
                .load(args.url.clone(), args.concurrency, &args.workload)?;
            let measure = args.measure.options(!args.no_slow_phase);
            let (ra, rb) = run_interleaved(args, &load, &measure, a, b)?;
            ((a.clone(), b.clone()), ra, rb)
        }
        _ => {
            let [pa, pb] = args.records.as_slice() else {
                return Err(Failure::bad_input(
                    "compare needs two run records (A.json B.json) or --a CMD --b CMD with a workload",
                ));
            };
            let (ra, rb) = (load(pa)?, load(pb)?);
            (
                (pa.display().to_string(), pb.display().to_string()),
                vec![ra],
                vec![rb],
            )
        }
    };
    require_phases(&a)?;
    require_phases(&b)?;
    let comparison = compare(&a, &b);
    args.exports()
        .write(&Subject::Compare {
            a: &a,
            b: &b,
            comparison: &comparison,
        })
        .map_err(Failure::run)?;
    if let Some(path) = &args.diff_flamegraph {
        eprintln!("differential flame graph written to {}", path.display());
    }
    PrintMode::from_json_flag(args.json).print(&comparison, |c| {
        reqcost_report::comparison(c, &labels.0, &labels.1)
    });
    Ok(())
}

/// Runs A and B alternately, swapping which goes first on every repetition (A B, B A, …), so
/// that slow drift of the machine and any advantage of going first or second affect both alike.
fn run_interleaved(
    args: &CompareArgs,
    load: &Load,
    measure: &MeasureOptions,
    a: &str,
    b: &str,
) -> Result<(Vec<RunRecord>, Vec<RunRecord>), Failure> {
    if args.runs == 0 {
        return Err(Failure::bad_input("--runs must be at least 1"));
    }
    let split = |cmd: &str| {
        shell_words::split(cmd)
            .ok()
            .filter(|w| !w.is_empty())
            .ok_or_else(|| {
                Failure::bad_input(format!(
                    "cannot parse server command {cmd:?}: check its quotes"
                ))
            })
    };
    let commands = [("a", split(a)?), ("b", split(b)?)];
    let mut records: [Vec<RunRecord>; 2] = [Vec::new(), Vec::new()];
    for rep in 1..=args.runs {
        let order = if rep % 2 == 1 { [0, 1] } else { [1, 0] };
        for i in order {
            let (label, command) = &commands[i];
            eprintln!(
                "run {rep}/{} {}: {}",
                args.runs,
                label.to_uppercase(),
                command.join(" ")
            );
            let record = Collect {
                load,
                target: TargetSpec::Launch(command.clone()),
                options: measure,
                progress: true,
            }
            .run()?;
            let what = format!("run {rep} of {}", label.to_uppercase());
            let record = save_run(record, &args.out_dir, &format!("-{label}{rep}"), &what)?;
            records[i].push(record);
        }
    }
    let [ra, rb] = records;
    Ok((ra, rb))
}
