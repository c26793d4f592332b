//! `reqcost`: what does each request cost your server, and why?

mod args;
mod attach;
mod check;
mod collect;
mod compare;
mod demo;
mod export;
mod external;
mod failure;
mod metrics;
mod print;
mod records;
mod signals;
mod stages;
mod sweep;
mod windows;

use std::process::ExitCode;

use std::path::PathBuf;

use clap::Parser;
use reqcost_record::{Outcome, RunRecord};
use reqcost_report::export::Subject;

use crate::args::{Cli, Command, ReportArgs, RunArgs, StackOutputArgs};
use crate::collect::{Collect, TargetSpec};
use crate::print::{PrintMode, RunOutput};

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
        Command::Attach(args) => attach::attach_cmd(args),
        Command::Report(args) => report(args),
        Command::Compare(args) => compare::compare_cmd(&args),
        Command::Sweep(args) => sweep::sweep_cmd(&args),
        Command::Check(args) => check::check_cmd(&args),
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
    let output = RunOutput::from_flags(args.json, args.record_json).per(args.per.per);
    let mode = output.mode();
    let mut workload = args.workload.clone();
    if args.pid.is_some() {
        // A running server is warm already: its warm-up would only be more load on it.
        workload.warmup.get_or_insert(0);
    }
    let load = args.load.load(args.url, args.concurrency, &workload)?;
    if let Some(path) = &args.output {
        records::check_writable(path)?;
    }
    let measure = args.measure.options(!args.no_slow_phase);
    let target = match args.pid {
        Some(pid) => TargetSpec::Attach(pid),
        None => TargetSpec::Launch(args.command),
    };
    let record = Collect {
        load: &load,
        target,
        options: &measure,
        progress: mode == PrintMode::Text,
    }
    .run()?;
    deliver(&record, args.output, &args.stacks, output)
}

/// What a measuring command does with its record: saves it (to `output` or the default path),
/// writes the stack files asked for, prints it, and exits as its outcome deserves.
fn deliver(
    record: &RunRecord,
    output: Option<PathBuf>,
    stacks: &StackOutputArgs,
    printed: RunOutput,
) -> Result<(), Failure> {
    let path = output.unwrap_or_else(|| records::default_record_path(record));
    stages::enter("saving");
    let saved = record.save(&path);
    export::stacks(stacks)
        .write(&Subject::Run(record))
        .map_err(Failure::run)?;
    let pushed = export::push(stacks, record, &path);
    printed.print(record);
    match saved {
        // A run that did not complete says "partial record saved" in its error instead.
        Ok(()) if record.outcome == Outcome::Completed => printed
            .mode()
            .note(format!("record saved to {}", path.display())),
        Ok(()) => {}
        Err(e) => {
            return Err(Failure::run(format!(
                "cannot save the run record to {}: {e} (choose another path with -o)",
                path.display()
            )))
        }
    }
    records::outcome_result(record, &path).and(pushed)
}

fn report(args: ReportArgs) -> Result<(), Failure> {
    let record = records::load(&args.record)?;
    // Nothing was measured here: a record without what a flag asks for is bad input.
    export::stacks(&args.stacks)
        .write(&Subject::Run(&record))
        .map_err(Failure::bad_input)?;
    let pushed = export::push(&args.stacks, &record, &args.record);
    RunOutput::from_flags(args.json, args.record_json)
        .per(args.per.per)
        .print(&record);
    pushed
}
