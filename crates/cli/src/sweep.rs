//! `sweep`: the same workload at several concurrency levels, each level run `--repeat` times,
//! interleaved across levels, one fresh server per run.

use std::path::Path;
use std::time::Duration;

use reqcost_analysis::sweep::SweepReport;
use reqcost_measure::{Collect, Load, TargetSpec};
use reqcost_record::RunRecord;
use reqcost_report::export::Subject;

use crate::args::{SweepArgs, WorkloadArgs};
use crate::print::PrintMode;
use crate::records::save_run;
use crate::Failure;

/// Length of each run's main phase when neither `-n` nor `--duration` bounds it: the phase's
/// edges (its first requests, a timer's wakeup, a neighbour's time slice) then weigh under 1 %
/// of its CPU, where the 1000 requests `run` defaults to last a quarter of a second on a fast
/// server; and 3 runs of 4 levels still take about a minute.
const RUN_LENGTH: Duration = Duration::from_secs(2);

pub fn sweep_cmd(args: &SweepArgs) -> Result<(), Failure> {
    let mode = PrintMode::from_json_flag(args.json);
    let levels = levels(&args.levels)?;
    let workload = bounded(&args.workload);
    let loads = levels
        .iter()
        .map(|&c| args.load.load(args.url.clone(), c, &workload))
        .collect::<Result<Vec<_>, _>>()?;
    let (order, records) = measure_levels(args, &levels, &loads, mode)?;
    let report = SweepReport::of(args.repeat, order, records, args.per.per);
    let title = format!(
        "{}: server CPU per {} vs connections",
        server_name(args, &report.records),
        report.unit().name()
    );
    args.exports()
        .write(&Subject::Sweep {
            report: &report,
            title: &title,
        })
        .map_err(Failure::run)?;
    mode.print(&report, reqcost_report::sweep);
    if let Some(chart) = &args.chart {
        mode.note(format!("chart written to {}", chart.display()));
    }
    Ok(())
}

/// The workload with each run bounded: by `-n` or `--duration` when given, else [`RUN_LENGTH`].
fn bounded(workload: &WorkloadArgs) -> WorkloadArgs {
    let mut workload = workload.clone();
    if workload.count.is_none() && workload.duration.is_none() {
        workload.duration = Some(RUN_LENGTH);
    }
    workload
}

/// The connection counts in increasing order, each once.
fn levels(given: &[u32]) -> Result<Vec<u32>, Failure> {
    let mut levels = given.to_vec();
    levels.sort_unstable();
    levels.dedup();
    if levels.first() == Some(&0) {
        return Err(Failure::bad_input(
            "--concurrency levels must be at least 1",
        ));
    }
    Ok(levels)
}

/// `--repeat` rounds of one run per level (1 16 64, 1 16 64, …), each with a fresh server and
/// no slow-client phase: the levels compare main phases, and a machine that drifts during the
/// sweep moves every level alike. Returns the level of each run, in the order they ran, with
/// its record.
fn measure_levels(
    args: &SweepArgs,
    levels: &[u32],
    loads: &[Load],
    mode: PrintMode,
) -> Result<(Vec<u32>, Vec<RunRecord>), Failure> {
    let measure = args.measure.options(false);
    let (mut order, mut records) = (Vec::new(), Vec::new());
    for rep in 1..=args.repeat {
        for (&c, load) in levels.iter().zip(loads) {
            eprintln!("sweep: run {rep}/{} at {c} connection(s)", args.repeat);
            let record = Collect {
                load,
                target: target(args),
                options: &measure,
                progress: mode == PrintMode::Text,
            }
            .run()?;
            let what = format!("run {rep} at {c} connections");
            records.push(save_run(
                record,
                &args.out_dir,
                &format!("-c{c}-r{rep}"),
                &what,
            )?);
            order.push(c);
        }
    }
    Ok((order, records))
}

/// The running server of `--pid`, else a fresh one launched from the command line.
fn target(args: &SweepArgs) -> TargetSpec {
    match args.pid {
        Some(pid) => TargetSpec::Attach(pid),
        None => TargetSpec::Launch(args.command.clone()),
    }
}

/// The server binary's file name, or the measured process's name with `--pid`, for the chart's
/// title.
fn server_name(args: &SweepArgs, records: &[RunRecord]) -> String {
    match args.command.first() {
        Some(program) => Path::new(program)
            .file_name()
            .map_or(program.to_string(), |n| n.to_string_lossy().into_owned()),
        None => records
            .first()
            .map_or_else(|| "server".into(), |r| r.target.comm.clone()),
    }
}
