//! `compare` and `check`: two configurations or two records, side by side, with statistics.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqcost_analysis::check::{check, Limits};
use reqcost_analysis::compare::compare;
use reqcost_record::{Phase, RunRecord};
use reqcost_report::export::{ExportManager, Format, Subject};
use reqcost_workload::{Plan, WorkloadArgs};

use crate::collect::{save_run, Collect, TargetSpec};
use crate::Failure;

#[derive(clap::Args)]
// Comparing two records needs no workload, so --url is only checked when --a/--b are given.
#[command(mut_arg("url", |a| a.required(false).default_value("")))]
#[command(after_help = "Examples:\n  \
    reqcost compare --a \"./server --no-cache\" --b \"./server --cache\" --url http://127.0.0.1:8080/ -n 2000\n  \
    reqcost compare before.json after.json")]
pub struct CompareArgs {
    /// Two run records to compare (A then B), instead of --a/--b
    #[arg(value_name = "RECORD", num_args = 0..=2, conflicts_with_all = ["a", "b"])]
    records: Vec<PathBuf>,
    /// Server command line A (quoted, split like a shell would)
    #[arg(long, value_name = "CMD", requires = "b")]
    a: Option<String>,
    /// Server command line B
    #[arg(long, value_name = "CMD", requires = "a")]
    b: Option<String>,
    /// Measured repetitions of each, interleaved A B B A A B …
    #[arg(long, default_value_t = 5, value_name = "N")]
    runs: u32,
    /// Let the load generator and the servers share CPUs
    #[arg(long)]
    no_pin: bool,
    /// Seconds to wait for each server to accept connections
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    startup_timeout: u64,
    /// Directory for the run records of every repetition
    #[arg(long, default_value = "reqcost-runs", value_name = "DIR")]
    out_dir: PathBuf,
    /// Write a differential flame graph SVG (B against A, per request) to FILE
    #[arg(long, value_name = "FILE")]
    diff_flamegraph: Option<PathBuf>,
    /// Print the comparison as JSON
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    workload: WorkloadArgs,
}

pub fn compare_cmd(args: &CompareArgs) -> Result<(), Failure> {
    let (labels, a, b) = match (&args.a, &args.b) {
        (Some(a), Some(b)) => {
            if args.workload.url.is_empty() {
                return Err(Failure::bad_input(
                    "compare --a/--b needs a workload: give at least --url",
                ));
            }
            let plan = args.workload.plan().map_err(Failure::bad_input)?;
            let (ra, rb) = run_interleaved(args, &plan, a, b)?;
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
    main_phases(&a)?;
    main_phases(&b)?;
    let comparison = compare(&a, &b);
    if let Some(path) = &args.diff_flamegraph {
        let mut exports = ExportManager::default();
        exports.add(Format::DiffFlamegraph, path);
        exports
            .write(&Subject::Compare { a: &a, b: &b })
            .map_err(Failure::run)?;
        eprintln!("differential flame graph written to {}", path.display());
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&comparison).expect("comparisons serialize")
        );
    } else {
        print!(
            "{}",
            reqcost_report::comparison(&comparison, &labels.0, &labels.1)
        );
    }
    Ok(())
}

/// Runs A and B alternately, swapping which goes first on every repetition (A B, B A, …), so
/// that slow drift of the machine and any advantage of going first or second affect both alike.
fn run_interleaved(
    args: &CompareArgs,
    plan: &Plan,
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
                plan,
                target: TargetSpec::Launch(command.clone()),
                pin: !args.no_pin,
                startup_timeout: Duration::from_secs(args.startup_timeout),
                progress: true,
                slow_clients: true,
                sample_hz: Some(reqcost_profile::DEFAULT_FREQ_HZ),
                probes: true,
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

fn load(path: &Path) -> Result<RunRecord, Failure> {
    RunRecord::load(path)
        .map_err(|e| Failure::bad_input(format!("cannot read run record {}: {e}", path.display())))
}

/// Every record's main phase, or a bad-input failure naming the record without one.
fn main_phases(records: &[RunRecord]) -> Result<Vec<&Phase>, Failure> {
    records
        .iter()
        .map(|r| {
            r.main_phase().ok_or_else(|| {
                Failure::bad_input(format!("run record {} has no measured phase", r.id))
            })
        })
        .collect()
}

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 within bounds, 1 regression, 2 bad input.\n\n\
    Example:\n  reqcost check reqcost-runs/new.json --baseline baseline.json --max-cpu-regression 10"
)]
pub struct CheckArgs {
    /// The run record to judge
    run: PathBuf,
    /// The run record it must not be worse than
    #[arg(long, value_name = "RECORD")]
    baseline: PathBuf,
    /// Largest allowed increase of CPU per request, in percent
    #[arg(long, default_value_t = 10.0, value_name = "PCT")]
    max_cpu_regression: f64,
    /// Largest allowed increase of syscalls per request, in percent
    #[arg(long, default_value_t = 5.0, value_name = "PCT")]
    max_syscalls_regression: f64,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
}

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
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&result).expect("results serialize")
        );
    } else {
        print!("{}", reqcost_report::check(&result));
    }
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
