//! `reqcost`: what does each request cost your server, and why?

mod ab;
mod collect;
mod demo;
mod signals;
mod sweep;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use reqcost_profile::ProfileArgs;
use reqcost_record::RunRecord;
use reqcost_report::export::{ExportManager, Format, Subject};
use reqcost_workload::WorkloadArgs;

use crate::collect::{Collect, TargetSpec};

#[derive(Parser)]
#[command(
    name = "reqcost",
    version,
    about = "What does each request cost your server, and why?",
    long_about = "What does each request cost your server, and why?\n\n\
        reqcost launches (or attaches to) a network server, drives it with a workload, measures \
        the whole server process tree (CPU in scheduler nanoseconds, syscalls, I/O) and prints \
        the cost per request. Every run is saved as a JSON run record that `report` can read \
        back later.",
    after_help = "Examples:\n  \
        reqcost demo\n  \
        reqcost run --url gopher://127.0.0.1:7070/ --requests selectors.txt -n 500 -c 4 -- ./myserver --port 7070\n  \
        reqcost run --url gopher://127.0.0.1:7070/ --pid 1234\n  \
        reqcost report reqcost-runs/<id>.json"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Launch (or attach to) a server, drive it with a workload, and measure each request's cost
    Run(RunArgs),
    /// Print the summary of a saved run record
    Report(ReportArgs),
    /// A/B: two server configurations (interleaved repetitions) or two run records
    Compare(ab::CompareArgs),
    /// The same workload at several concurrency levels: does cost per request grow?
    Sweep(sweep::SweepArgs),
    /// CI gate: fail when a run costs more per request than a baseline allows
    Check(ab::CheckArgs),
    /// Build the testbed servers, measure them, and show how they differ
    Demo(DemoArgs),
}

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    reqcost run --url gopher://127.0.0.1:7070/ -n 500 -c 4 -- ./myserver --port 7070\n  \
    reqcost run --url gopher://127.0.0.1:7070/ --requests selectors.txt --pid 1234 --json")]
struct RunArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Measure this already running server (and its descendants) instead of launching one
    #[arg(long, conflicts_with = "command")]
    pid: Option<u32>,
    /// Let the load generator and the server share CPUs (default: pinned apart when there are 2+)
    #[arg(long)]
    no_pin: bool,
    /// Save the run record here [default: reqcost-runs/<id>.json]
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Print the run record as JSON on stdout instead of the summary
    #[arg(long)]
    json: bool,
    /// Seconds to wait for a launched server to accept connections
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    startup_timeout: u64,
    /// Skip the short slow-client phase that follows main (64 KiB/s per connection, ~2 s),
    /// which reveals servers whose cost depends on how fast clients read
    #[arg(long)]
    no_slow_phase: bool,
    /// Do not attach the eBPF probes: no syscall figures or findings that need them, but no
    /// probe cost in the server's CPU either (about 0.5 µs per syscall)
    #[arg(long)]
    no_probes: bool,
    #[command(flatten)]
    profile: ProfileArgs,
    /// The server command line, after `--`
    #[arg(
        last = true,
        value_name = "SERVER CMD",
        required_unless_present = "pid"
    )]
    command: Vec<String>,
}

#[derive(Args)]
// A record's stacks are already sampled: only the output options apply.
#[command(mut_arg("freq", |a| a.hide(true)), mut_arg("no_sample", |a| a.hide(true)))]
struct ReportArgs {
    /// A run record written by `reqcost run`
    record: PathBuf,
    #[command(flatten)]
    profile: ProfileArgs,
    /// Print the record as JSON instead of the summary
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct DemoArgs {
    /// Requests per server
    #[arg(short = 'n', long, default_value_t = 2000)]
    requests: u64,
    /// Directory for the demo's run records
    #[arg(long, default_value = "reqcost-runs", value_name = "DIR")]
    out_dir: PathBuf,
}

/// A failure with the exit code it deserves: 2 for input reqcost could not use, 1 for a run
/// that went wrong.
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn bad_input(message: impl ToString) -> Failure {
        Failure {
            code: 2,
            message: message.to_string(),
        }
    }

    pub fn run(message: impl ToString) -> Failure {
        Failure {
            code: 1,
            message: message.to_string(),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Report(args) => report(args),
        Command::Compare(args) => ab::compare_cmd(&args),
        Command::Sweep(args) => sweep::sweep_cmd(&args),
        Command::Check(args) => ab::check_cmd(&args),
        Command::Demo(args) => demo::demo(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn run(args: RunArgs) -> Result<(), Failure> {
    let plan = args.workload.plan().map_err(Failure::bad_input)?;
    let target = match args.pid {
        Some(pid) => TargetSpec::Attach(pid),
        None => TargetSpec::Launch(args.command.clone()),
    };
    let collect = Collect {
        plan: &plan,
        target,
        pin: !args.no_pin,
        startup_timeout: std::time::Duration::from_secs(args.startup_timeout),
        progress: !args.json,
        slow_clients: !args.no_slow_phase,
        sample_hz: (!args.profile.no_sample).then_some(args.profile.freq),
        probes: !args.no_probes,
    };
    let record = collect.run()?;
    let path = args
        .output
        .clone()
        .unwrap_or_else(|| collect::default_record_path(&record));
    let saved = record.save(&path);
    write_stack_outputs(&record, &args.profile)?;
    if args.json {
        println!("{}", record.to_json());
    } else {
        print!("{}", reqcost_report::summary(&record));
    }
    match saved {
        Ok(()) if !args.json => eprintln!("record saved to {}", path.display()),
        Ok(()) => {}
        Err(e) => {
            return Err(Failure::run(format!(
                "cannot save the run record to {}: {e} (choose another path with -o)",
                path.display()
            )))
        }
    }
    collect::outcome_result(&record, &path)
}

fn report(args: ReportArgs) -> Result<(), Failure> {
    let record = RunRecord::load(&args.record).map_err(|e| {
        Failure::bad_input(format!(
            "cannot read run record {}: {e}",
            args.record.display()
        ))
    })?;
    write_stack_outputs(&record, &args.profile)?;
    if args.json {
        println!("{}", record.to_json());
    } else {
        print!("{}", reqcost_report::summary(&record));
    }
    Ok(())
}

/// Folded stacks, flame graph and pprof, from the record's aggregated stacks.
fn write_stack_outputs(record: &RunRecord, args: &ProfileArgs) -> Result<(), Failure> {
    let mut exports = ExportManager::default();
    exports.add_if_given(Format::Folded, args.folded.as_deref());
    exports.add_if_given(Format::Flamegraph, args.flamegraph.as_deref());
    exports.add_if_given(Format::Pprof, args.pprof.as_deref());
    exports.write(&Subject::Run(record)).map_err(Failure::run)
}
