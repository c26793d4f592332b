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
        schedule: args
            .duty
            .map_or(ProbeSchedule::FullTime, ProbeSchedule::Duty),
        opened: None,
        probe_stats: args.probe_stats,
        upstreams: args.upstreams.upstreams(),
    }
    .run()?;
    deliver(&record, args.output, &args.stacks, output)
}
