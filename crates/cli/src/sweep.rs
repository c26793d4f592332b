//! `sweep`: the same workload at several concurrency levels, one fresh server each.

use std::path::Path;

use reqcost_analysis::sweep::{growth, Growth};
use reqcost_record::{Phase, RunRecord, Unit};
use reqcost_report::export::Subject;

use crate::args::SweepArgs;
use crate::collect::{Collect, TargetSpec};
use crate::export;
use crate::external::Load;
use crate::print::PrintMode;
use crate::records::save_run;
use crate::Failure;

/// A sweep as `--json` prints it.
#[derive(serde::Serialize)]
struct SweepReport {
    levels: Vec<u32>,
    growth: Option<Growth>,
    records: Vec<RunRecord>,
}

impl SweepReport {
    /// Each level with its record's main phase, for tables and charts.
    fn points(&self) -> Vec<(u32, &Phase)> {
        self.levels
            .iter()
            .zip(&self.records)
            .filter_map(|(c, r)| Some((*c, r.main_phase()?)))
            .collect()
    }
}

pub fn sweep_cmd(args: &SweepArgs) -> Result<(), Failure> {
    let mode = PrintMode::from_json_flag(args.json);
    let levels = levels(&args.levels)?;
    let loads = levels
        .iter()
        .map(|&c| args.load.load(args.url.clone(), c, &args.workload))
        .collect::<Result<Vec<_>, _>>()?;
    let mut records = measure_levels(args, &levels, &loads, mode)?;
    per_unit(&mut records, args.per.per);
    let mut report = SweepReport {
        levels,
        growth: None,
        records,
    };
    report.growth = growth(&report.points());
    let unit = report
        .records
        .first()
        .and_then(|r| Some(r.main_phase()?.unit));
    let title = format!(
        "{}: server CPU per {} vs connections",
        server_name(&args.command[0]),
        unit.unwrap_or_default().name()
    );
    let points = report.points();
    export::sweep(args)
        .write(&Subject::Sweep {
            points: &points,
            title: &title,
        })
        .map_err(Failure::run)?;
    mode.print(&report, |r| {
        reqcost_report::sweep(&r.points(), r.growth.as_ref())
    });
    if let Some(chart) = &args.chart {
        mode.note(format!("chart written to {}", chart.display()));
    }
    Ok(())
}

/// Every level per `per`, or per the first level's default unit: levels side by side must
/// share one.
fn per_unit(records: &mut [RunRecord], per: Option<Unit>) {
    let unit = per.or_else(|| Some(records.first()?.main_phase()?.default_unit()));
    for r in records {
        r.in_units(unit);
    }
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

/// One run per level, each with a fresh server and no slow-client phase: the levels compare
/// main phases.
fn measure_levels(
    args: &SweepArgs,
    levels: &[u32],
    loads: &[Load],
    mode: PrintMode,
) -> Result<Vec<RunRecord>, Failure> {
    let measure = args.measure.options(false);
    let mut records = Vec::new();
    for (c, load) in levels.iter().zip(loads) {
        eprintln!("sweep: {c} connection(s)");
        let record = Collect {
            load,
            target: TargetSpec::Launch(args.command.clone()),
            options: &measure,
            progress: mode == PrintMode::Text,
        }
        .run()?;
        let what = format!("the run at {c} connections");
        records.push(save_run(record, &args.out_dir, &format!("-c{c}"), &what)?);
    }
    Ok(records)
}

/// The server binary's file name, for the chart's title.
fn server_name(program: &str) -> String {
    Path::new(program)
        .file_name()
        .map_or(program.to_string(), |n| n.to_string_lossy().into_owned())
}
