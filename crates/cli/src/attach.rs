//! `reqcost attach`: a running server's real traffic, measured for a window without sending it
//! anything (the measurement is [`reqcost_measure::Live`]).

use reqcost_measure::{Live, ProbeSchedule};
use reqcost_profile::ATTACH_FREQ_HZ;
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
        sampling: args.sampling.options(ATTACH_FREQ_HZ),
        progress: mode == PrintMode::Text,
        metrics: args.metrics,
        schedule: schedule(&args),
        opened: None,
        probe_stats: args.probe_stats,
        upstreams: args.upstreams.upstreams(),
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

/// The probes' cost budget of an attach, a fraction of the server's CPU: the overhead
/// production profilers promise. What attach costs beyond its probes (the sampler, reqcost's
/// own work, the slow syscall path of other processes) is outside it: under wrk, nginx's 13 µs
/// requests paid 8-11 % in all at 3 %, 5-8 % at 1 % (bench/RESULTS.md).
const DEFAULT_BUDGET: f64 = 0.01;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Command};
    use clap::Parser;

    fn schedule_of(argv: &[&str]) -> ProbeSchedule {
        let argv = ["reqcost", "attach", "--pid", "1"].iter().chain(argv);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Attach(args) => schedule(&args),
            _ => unreachable!("parsed as attach"),
        }
    }

    #[test]
    fn the_budget_is_the_default_and_duty_or_full_time_override_it() {
        assert_eq!(schedule_of(&[]), ProbeSchedule::Budget(0.01));
        assert_eq!(
            schedule_of(&["--budget", "0.5%"]),
            ProbeSchedule::Budget(0.005)
        );
        assert_eq!(
            schedule_of(&["--budget", "5%", "--duty", "20%"]),
            ProbeSchedule::Duty(0.2)
        );
        assert_eq!(
            schedule_of(&["--probes-full-time"]),
            ProbeSchedule::FullTime
        );
        let refused = |argv: &[&str]| {
            Cli::try_parse_from(["reqcost", "attach", "--pid", "1"].iter().chain(argv)).is_err()
        };
        assert!(refused(&["--budget", "0%"]));
        assert!(refused(&["--budget", "101%"]));
        assert!(refused(&["--duty", "20%", "--probes-full-time"]));
    }
}
