//! `reqcost`: what does each request cost your server, and why?

mod args;
mod attach;
mod check;
mod compare;
mod demo;
mod export;
mod failure;
mod print;
mod records;
mod sweep;

use std::process::ExitCode;

use std::path::PathBuf;

use clap::Parser;
use reqcost_analysis::invariants;
use reqcost_measure::{stages, Collect, TargetSpec};
use reqcost_record::{Outcome, RunRecord};
use reqcost_report::export::Subject;

use crate::args::{Cli, Command, ReportArgs, RunArgs, StackOutputArgs};
use crate::print::{PrintMode, RunOutput};

pub use crate::failure::Failure;

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
    failure::exit_status(result)
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
    let reading = printed.read(record);
    stacks
        .exports()
        .write(&Subject::Run(&reading))
        .map_err(Failure::run)?;
    let pushed = export::push(
        stacks.push_pyroscope.as_ref(),
        stacks.service.as_deref(),
        &reading,
        &path,
    );
    printed.print(record, &reading);
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
    if args.check_record {
        return check_record(&record);
    }
    let printed = RunOutput::from_flags(args.json, args.record_json).per(args.per.per);
    let reading = printed.read(&record);
    // Nothing was measured here: a record without what a flag asks for is bad input.
    args.stacks
        .exports()
        .write(&Subject::Run(&reading))
        .map_err(Failure::bad_input)?;
    let pushed = export::push(
        args.stacks.push_pyroscope.as_ref(),
        args.stacks.service.as_deref(),
        &reading,
        &args.record,
    );
    printed.print(&record, &reading);
    pushed
}

/// `report --check-record`: the record's invariants, one line on stdout per violation.
fn check_record(record: &RunRecord) -> Result<(), Failure> {
    let violations = invariants::check(record);
    let mut out = String::new();
    for v in &violations {
        out += &format!("{v}\n");
    }
    if violations.is_empty() {
        let phases = match record.phases.len() {
            1 => "its phase".to_string(),
            n => format!("its {n} phases"),
        };
        out += &format!("the record's invariants hold in {phases}\n");
    }
    print::write_out(&out);
    match violations.len() {
        0 => Ok(()),
        n => Err(Failure::run(format!(
            "the record breaks its invariants {n} times"
        ))),
    }
}
