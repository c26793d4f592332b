//! The measurement pipeline: target up, probes on, workload phase by phase, snapshots around
//! each measured phase, target down, one run record out.

use std::time::{Duration, SystemTime};

use reqcost_analysis::requests::TallyOptions;
use reqcost_record::{Pinning, RunRecord};
use reqcost_server::{
    ensure_port_free, listener_of, pin_current_thread, plan_pinning, remove_dead_runs, run_name,
    tree_listens_on, LaunchSpec, Server,
};

use super::instruments::Instruments;
use super::session::Session;
use super::{Load, MeasureOptions, ProbeSchedule, TargetSpec};
use crate::{signals, stages, MeasureError};

/// One measurement, configured.
pub struct Collect<'a> {
    pub load: &'a Load,
    pub target: TargetSpec,
    pub options: &'a MeasureOptions,
    /// Show progress bars (only ever drawn on a terminal).
    pub progress: bool,
}

impl Collect<'_> {
    /// Runs the whole pipeline. Errors before the first measured phase are returned as
    /// failures; anything later ends up in the record's outcome, so measured data is never lost.
    pub fn run(&self) -> Result<RunRecord, MeasureError> {
        signals::install();
        remove_dead_runs(&std::env::temp_dir());
        let started = SystemTime::now();
        let pinning = self.pin_reqcost()?;
        self.refuse_taken_port()?;
        let name = run_name(started);
        let mut server = self.start_target(&pinning, &name)?;
        stages::enter("starting");
        warn_if_uncontained(&server);
        self.wait_until_serving(&mut server)?;
        let instruments = self.instruments(&server);
        let (phases, outcome) = match self.load {
            Load::Engine(plan) => {
                if !self.launches() {
                    eprintln!("{}", self.announce_load(plan, server.pid()));
                }
                self.measure_phases(plan, &mut server, &instruments)
            }
            Load::External(load) => load.measure(
                &mut server,
                &instruments,
                &pinning,
                &name,
                self.options.probe_schedule,
            ),
        };
        let session = Session {
            started,
            pinning,
            server,
            instruments,
        };
        Ok(session.record(self.command(), self.load.describe(), phases, outcome))
    }

    /// The instruments, with what the workload tells about the figures: how its requests
    /// group, and loopback's caveat.
    fn instruments(&self, server: &Server) -> Instruments {
        let mut notes = match self.load {
            Load::Engine(plan) => plan.warnings(),
            Load::External(_) => Vec::new(),
        };
        for w in &notes {
            eprintln!("warning: {w}");
        }
        let tally = tally_options(self.load, &mut notes);
        if self.load.addr().is_none_or(|a| a.ip().is_loopback()) {
            notes.push(
                "loopback: the kernel delivers each response to the client within the server's \
                 send call, so system CPU includes the receiver's network stack work, and \
                 loopback clients never make the server wait: use --client-bandwidth for \
                 realistic clients"
                    .into(),
            );
        }
        // An external client's finished requests are not known window by window, so its CPU
        // cannot come from unprobed windows: the probes stay on the whole time, and the CPU
        // comes from the command's second, unprobed run (external::rerun).
        let full_time;
        let (options, full_time_why) = match self.load {
            Load::External(_) => {
                full_time = MeasureOptions {
                    probe_schedule: ProbeSchedule::FullTime,
                    count_client: true,
                    ..self.options.clone()
                };
                let why = if self.options.probe_schedule == ProbeSchedule::Alternate {
                    "--load keeps them on while the command runs (its progress is not known \
                     window by window); unless --load-once, the server CPU comes from a second \
                     run of the command without them when its work can be told, else it \
                     includes their cost (cpu_windows says which)"
                } else {
                    "server CPU includes their cost: --probes-full-time keeps the probed CPU of \
                     the --load command"
                };
                (&full_time, why)
            }
            Load::Engine(_) => (
                self.options,
                "server CPU includes their cost; without --probes-full-time, run measures CPU \
                 in windows without them",
            ),
        };
        Instruments::attach(
            options,
            server,
            tally,
            notes,
            Some("--no-probes"),
            full_time_why,
        )
    }

    fn command(&self) -> Option<Vec<String>> {
        match &self.target {
            TargetSpec::Launch(command) => Some(command.clone()),
            TargetSpec::Attach(_) => None,
        }
    }

    /// Everything reqcost runs (load generator, probe readers, this loop) stays off the
    /// server's CPUs; threads spawned later inherit this.
    fn pin_reqcost(&self) -> Result<Pinning, MeasureError> {
        let pinning = plan_pinning(self.options.pin, self.launches());
        if pinning.enabled {
            pin_current_thread(&pinning.client_cpus).map_err(|source| MeasureError::Pin {
                cpus: pinning.client_cpus.clone(),
                source,
            })?;
        }
        Ok(pinning)
    }

    /// A server launched on a taken port could not listen, and the process holding the port
    /// would be measured in its place.
    fn refuse_taken_port(&self) -> Result<(), MeasureError> {
        match self.load.port() {
            Some(port) if self.launches() => ensure_port_free(port).map_err(MeasureError::Target),
            _ => Ok(()),
        }
    }

    pub(super) fn launches(&self) -> bool {
        matches!(self.target, TargetSpec::Launch(_))
    }

    fn start_target(&self, pinning: &Pinning, run_name: &str) -> Result<Server, MeasureError> {
        match &self.target {
            TargetSpec::Launch(command) => Server::launch(&LaunchSpec {
                command: command.clone(),
                cpus: (!pinning.server_cpus.is_empty()).then(|| pinning.server_cpus.clone()),
                log_path: std::env::temp_dir().join(format!("{run_name}.log")),
                cgroup_name: run_name.to_string(),
            }),
            TargetSpec::Attach(pid) => Server::attach(*pid),
        }
        .map_err(MeasureError::Target)
    }

    /// A launched server gets the startup timeout; a running one must already accept, on a
    /// socket it holds: else reqcost would load one server and measure another.
    fn wait_until_serving(&self, server: &mut Server) -> Result<(), MeasureError> {
        let Some(addr) = self.load.addr() else {
            return super::external::wait_until_serving(
                self.load,
                server,
                self.options.startup_timeout,
            );
        };
        if self.launches() {
            return server
                .wait_until_accepting_unless(
                    addr,
                    self.options.startup_timeout,
                    &signals::interrupted,
                )
                .map_err(MeasureError::Target);
        }
        server
            .wait_until_accepting(addr, Duration::from_secs(1))
            .map_err(|_| MeasureError::NotAccepting {
                addr,
                pid: server.pid(),
            })?;
        if tree_listens_on(server.pid(), addr.port()) {
            return Ok(());
        }
        let owner = listener_of(addr.port())
            .map(|pid| format!("process {pid} does"))
            .unwrap_or_else(|e| e.to_string());
        Err(MeasureError::NotListening {
            pid: server.pid(),
            port: addr.port(),
            owner,
        })
    }
}

/// The workload's protocol and classes, for grouping requests as the server saw them.
fn tally_options(load: &Load, notes: &mut Vec<String>) -> TallyOptions {
    let protocol = load.describe().protocol;
    let (classes, client_names) = match load {
        Load::Engine(plan) => (plan.classes(), plan.client_names()),
        Load::External(_) => (Vec::new(), Vec::new()),
    };
    let options = TallyOptions::new(&protocol, &classes).unwrap_or_else(|e| {
        notes.push(format!(
            "per-request classes off: {e}; requests grouped by path"
        ));
        TallyOptions::new(&protocol, &[]).unwrap_or_default()
    });
    TallyOptions {
        client_names: client_names.into_iter().collect(),
        ..options
    }
}

/// Without a cgroup, what the server detaches from its process group escapes the final kill.
fn warn_if_uncontained(server: &Server) {
    if server.is_launched() && !server.contained() {
        eprintln!(
            "warning: no cgroup for the server (run as root): processes it detaches (setsid, \
             daemons) may survive the run"
        );
    }
}
