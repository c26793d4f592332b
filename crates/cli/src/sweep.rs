//! `sweep`: the same workload at several concurrency levels, one fresh server each.

use std::path::PathBuf;
use std::time::Duration;

use reqcost_analysis::sweep::growth;
use reqcost_record::RunRecord;
use reqcost_report::export::{ExportManager, Format, Subject};
use reqcost_workload::WorkloadArgs;

use crate::collect::{save_run, Collect, TargetSpec};
use crate::Failure;

#[derive(clap::Args)]
// The sweep sets the connection count itself: the workload's own -c/--concurrency gives way.
#[command(mut_arg("concurrency", |a| a.short(None).long("single-concurrency").hide(true)))]
#[command(after_help = "Example:\n  \
    reqcost sweep --concurrency 1,5,10,15 --url gopher://127.0.0.1:7070/ -n 2000 --chart sweep.svg -- ./server --port 7070")]
pub struct SweepArgs {
    /// Connection counts to measure, comma-separated
    #[arg(
        id = "levels",
        short = 'c',
        long = "concurrency",
        value_delimiter = ',',
        required = true,
        value_name = "N,N,..."
    )]
    levels: Vec<u32>,
    /// Write an SVG chart of CPU per request against connections
    #[arg(long, value_name = "FILE")]
    chart: Option<PathBuf>,
    /// Directory for the run record of every level
    #[arg(long, default_value = "reqcost-runs", value_name = "DIR")]
    out_dir: PathBuf,
    /// Let the load generator and the server share CPUs
    #[arg(long)]
    no_pin: bool,
    /// Seconds to wait for the server to accept connections
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    startup_timeout: u64,
    /// Print the sweep as JSON (every level's run record)
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    workload: WorkloadArgs,
    /// The server command line, after `--`
    #[arg(last = true, required = true, value_name = "SERVER CMD")]
    command: Vec<String>,
}

pub fn sweep_cmd(args: &SweepArgs) -> Result<(), Failure> {
    let mut levels = args.levels.clone();
    levels.sort_unstable();
    levels.dedup();
    if levels.first() == Some(&0) {
        return Err(Failure::bad_input(
            "--concurrency levels must be at least 1",
        ));
    }
    let plans = levels
        .iter()
        .map(|&c| {
            let mut w = args.workload.clone();
            w.concurrency = c;
            w.plan().map_err(Failure::bad_input)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut records: Vec<RunRecord> = Vec::new();
    for (c, plan) in levels.iter().zip(&plans) {
        eprintln!("sweep: {c} connection(s)");
        let record = Collect {
            plan,
            target: TargetSpec::Launch(args.command.clone()),
            pin: !args.no_pin,
            startup_timeout: Duration::from_secs(args.startup_timeout),
            progress: !args.json,
            slow_clients: false,
            sample_hz: Some(reqcost_profile::DEFAULT_FREQ_HZ),
            probes: true,
        }
        .run()?;
        let what = format!("the run at {c} connections");
        let record = save_run(record, &args.out_dir, &format!("-c{c}"), &what)?;
        records.push(record);
    }
    let points: Vec<(u32, &reqcost_record::Phase)> = levels
        .iter()
        .zip(&records)
        .filter_map(|(c, r)| Some((*c, r.main_phase()?)))
        .collect();
    let trend = growth(&points);
    if let Some(chart) = &args.chart {
        let server = std::path::Path::new(&args.command[0])
            .file_name()
            .map_or(args.command[0].clone(), |n| {
                n.to_string_lossy().into_owned()
            });
        let title = format!("{server}: server CPU per request vs connections");
        let mut exports = ExportManager::default();
        exports.add(Format::SweepChart, chart);
        let sweep = Subject::Sweep {
            points: &points,
            title: &title,
        };
        exports.write(&sweep).map_err(Failure::run)?;
    }
    if args.json {
        let json = serde_json::json!({
            "levels": levels,
            "growth": trend,
            "records": records,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&json).expect("sweeps serialize")
        );
    } else {
        print!("{}", reqcost_report::sweep(&points, trend.as_ref()));
        if let Some(chart) = &args.chart {
            eprintln!("chart written to {}", chart.display());
        }
    }
    Ok(())
}
