//! `reqcost attach`: a running server's real traffic, measured for a window without sending it
//! anything (the measurement is [`reqcost_measure::Live`]).

use reqcost_measure::{Live, ProbeSchedule};
use reqcost_server::listener_of;

use crate::args::AttachArgs;
use crate::print::{PrintMode, RunOutput};
use crate::{deliver, Failure};

pub fn attach_cmd(args: AttachArgs) -> Result<(), Failure> {
    let output = RunOutput::from_flags(args.json, false);
    let mode = output.mode();
    let (pid, source) = match (args.pid, args.port) {
        (Some(pid), _) => (pid, format!("pid {pid}")),
        (None, Some(port)) => (listener_of(port).map_err(Failure::from)?, port.to_string()),
        (None, None) => unreachable!("clap requires --pid or --port"),
    };
    let record = Live {
        pid,
        source,
        duration: args.duration,
        sampling: args.sampling.options(),
        progress: mode == PrintMode::Text,
        metrics: args.metrics,
        schedule: schedule(&args),
        opened: None,
        probe_stats: args.probe_stats,
    }
    .run()?;
    deliver(&record, args.output, &args.stacks, output)
}

/// The budget unless --duty or --probes-full-time says otherwise; a budget given beside them is
/// said to be overridden.
fn schedule(args: &AttachArgs) -> ProbeSchedule {
    let (schedule, flag) = match (args.duty, args.probes_full_time) {
        (Some(duty), _) => (ProbeSchedule::Duty(duty), "--duty"),
        (None, true) => (ProbeSchedule::FullTime, "--probes-full-time"),
        (None, false) => {
            return ProbeSchedule::Budget(args.budget.unwrap_or(DEFAULT_BUDGET));
        }
    };
    let budget = args.budget.map_or_else(
        || format!("the default budget ({:.0} %)", DEFAULT_BUDGET * 100.0),
        |b| format!("--budget {}%", b * 100.0),
    );
    eprintln!("{flag} given: the probes keep no cost budget ({budget} is not used)");
    schedule
}

/// The probes' cost budget of an attach, a fraction of the server's CPU.
const DEFAULT_BUDGET: f64 = 0.03;
