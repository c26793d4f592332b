//! `--load CMD`: any client program drives the server (h2load, gtlsclient, redis-benchmark, curl
//! in a loop). reqcost launches the server as usual, then runs CMD through `sh -c` as a process
//! tree of its own (own process group and cgroup, pinned to the load generator's CPUs, stopped
//! with the run), and measures the server for exactly CMD's lifetime: one measured phase,
//! `main`. There is no warm-up and no slow-client phase: reqcost cannot ask CMD for fewer
//! requests or slower reads. Units of work (requests, connections, bytes, datagrams) are
//! counted on the server side, so they are right whatever CMD speaks.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use reqcost_probes::Probes;
use reqcost_profile::Sampler;
use reqcost_record::{
    ClientStats, ExternalLoad as LoadRecord, Outcome, Phase, Pinning, Workload, EXTERNAL_PROTOCOL,
};
use reqcost_server::{tree_serves, LaunchSpec, Server};
use reqcost_workload::Plan;

use super::instruments::Instruments;
use super::outcome::stopped_outcome;
use super::windows::ProbeSchedule;
use crate::{signals, MeasureError};

mod rerun;

/// What drives the server during a measurement.
pub enum Load {
    /// reqcost's own load generator.
    Engine(Box<Plan>),
    /// A client program.
    External(Box<ExternalLoad>),
}

impl Load {
    /// Where the server must accept TCP connections before load starts, when known; None for
    /// QUIC, whose server binds a UDP port and accepts nothing.
    pub fn addr(&self) -> Option<SocketAddr> {
        match self {
            Load::Engine(plan) if plan.is_quic() => None,
            Load::Engine(plan) => Some(plan.addr()),
            Load::External(load) => load.addr,
        }
    }

    /// The port the server must serve, when known: a launched server must find it free.
    pub fn port(&self) -> Option<u16> {
        match self {
            Load::Engine(plan) => Some(plan.addr().port()),
            Load::External(load) if load.addr.is_none() => load.port,
            Load::External(_) => self.addr().map(|a| a.port()),
        }
    }

    /// When the server counts as ready, in words (a server without a TCP address to accept on).
    pub fn readiness(&self) -> String {
        match self {
            Load::Engine(plan) => format!("its tree has UDP port {} bound", plan.addr().port()),
            Load::External(load) => load.readiness(),
        }
    }

    pub fn describe(&self) -> Workload {
        match self {
            Load::Engine(plan) => plan.describe(),
            Load::External(load) => load.describe(),
        }
    }
}

/// Lines of CMD's output kept in the record.
const OUTPUT_TAIL_LINES: usize = 20;
/// How long CMD has to exit after SIGTERM when the run stops early.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A client command, ready to run against the launched server.
pub struct ExternalLoad {
    /// As run through `sh -c`, `{c}` replaced.
    command: String,
    concurrency: u32,
    url: Option<String>,
    /// With `--url`: the server is ready when it accepts TCP connections there.
    addr: Option<SocketAddr>,
    /// Without `--url`: the port the server must serve (TCP listening or UDP bound); any
    /// port of its tree when None.
    port: Option<u16>,
    /// How the command ended, once it has run.
    finished: Mutex<Option<LoadRecord>>,
    /// `--load-once`: the command must not run a second time (side effects, or a run that
    /// cannot be repeated), so no unprobed pass.
    once: bool,
}

/// What watches the load command's tree beside the server's.
#[derive(Clone, Copy)]
struct Watch<'a> {
    probes: Option<&'a Probes>,
    sampler: Option<&'a Sampler>,
}

impl ExternalLoad {
    /// `template` with `{c}` replaced by `concurrency`; `url`, with the address it names, only
    /// says where the server accepts.
    pub fn new(
        template: &str,
        concurrency: u32,
        url: Option<(String, SocketAddr)>,
        port: Option<u16>,
    ) -> Result<ExternalLoad, MeasureError> {
        if template.trim().is_empty() {
            return Err(MeasureError::EmptyLoadCommand);
        }
        if concurrency == 0 {
            return Err(MeasureError::NoConcurrency);
        }
        let (url, addr) = url.unzip();
        // A QUIC server binds a UDP port and accepts nothing: ready when its tree serves it.
        let quic = url.as_deref().is_some_and(|u| u.starts_with("quic://"));
        let (addr, port) = match addr {
            Some(a) if quic => (None, port.or(Some(a.port()))),
            _ => (addr, port),
        };
        Ok(ExternalLoad {
            command: template.replace("{c}", &concurrency.to_string()),
            concurrency,
            url,
            addr,
            port,
            finished: Mutex::new(None),
            once: false,
        })
    }

    /// `--load-once`: run the command once only; its CPU then keeps the probes' cost.
    pub fn run_once(mut self, once: bool) -> ExternalLoad {
        self.once = once;
        self
    }

    fn describe(&self) -> Workload {
        let finished = self.finished.lock().map(|f| f.clone()).unwrap_or_default();
        let mut options = std::collections::BTreeMap::new();
        options.insert("ready-when".into(), self.readiness());
        Workload {
            url: self.url.clone().unwrap_or_default(),
            protocol: EXTERNAL_PROTOCOL.into(),
            concurrency: self.concurrency,
            options,
            load: Some(finished.unwrap_or_else(|| LoadRecord {
                command: self.command.clone(),
                ..LoadRecord::default()
            })),
            ..Workload::default()
        }
    }

    /// When the server counts as ready, in words.
    pub fn readiness(&self) -> String {
        match (self.addr, self.port) {
            (Some(addr), _) => format!("it accepts TCP connections on {addr}"),
            (None, Some(port)) => {
                format!("its tree listens on TCP port {port} or has UDP port {port} bound")
            }
            (None, None) => "its tree listens on a TCP port or has a UDP port bound".into(),
        }
    }
}

impl ExternalLoad {
    /// Runs CMD as the measured phase `main` and says how the run ended: interrupted, the
    /// server dead, CMD failed (its exit status and last output), or completed. When
    /// `schedule` asks for CPU free of the probes, CMD then runs a second time without them
    /// (see [`rerun`]).
    pub(crate) fn measure(
        &self,
        server: &mut Server,
        instruments: &Instruments,
        pinning: &Pinning,
        run_name: &str,
        schedule: ProbeSchedule,
    ) -> (Vec<Phase>, Outcome) {
        let probes = instruments.probes.as_ref();
        let sampler = instruments.sampler.as_ref();
        let mut tree = None;
        let mut phase = instruments.measure("main", server, None, |server, tick| {
            let watch = Watch { probes, sampler };
            let (client, record) = self.drive(server, watch, pinning, run_name, tick, &mut tree);
            self.finish(record);
            client
        });
        // Stopped once the phase's last snapshot is taken: a connection the command's tree
        // still holds is then still there to be counted (sock_diag, without the probes).
        drop(tree);
        phase.client_model = Some("the load command's clients".into());
        let outcome = stopped_outcome("main", "", server).unwrap_or_else(|| self.outcome());
        if let Some(probes) = probes.filter(|_| schedule == ProbeSchedule::Alternate) {
            let run = rerun::Run {
                probes,
                pinning,
                run_name,
                completed: outcome == Outcome::Completed,
            };
            self.unprobed_pass(&run, &mut phase, server);
        }
        (vec![phase], outcome)
    }

    fn outcome(&self) -> Outcome {
        let finished = self.finished.lock().ok().and_then(|f| f.clone());
        match finished {
            Some(done) if done.success => Outcome::Completed,
            Some(done) => Outcome::Failed {
                detail: format!(
                    "the load command ended with {}; its last output:\n{}",
                    done.exit.as_deref().unwrap_or("no exit status"),
                    done.output_tail
                        .iter()
                        .map(|l| format!("  | {l}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                ),
            },
            None => Outcome::Failed {
                detail: "the load command did not run".into(),
            },
        }
    }

    /// Launches CMD on the load generator's CPUs and waits for it, stopping it early on a
    /// signal or when the server dies; `tick` is called every few milliseconds meanwhile. What
    /// is left of its tree once it exited is parked in `tree`, for the caller to stop. Returns
    /// the client's view and how the command ended.
    fn drive(
        &self,
        server: &mut Server,
        watch: Watch,
        pinning: &Pinning,
        run_name: &str,
        tick: &mut dyn FnMut(&Server, Option<u64>),
        tree: &mut Option<Server>,
    ) -> (ClientStats, LoadRecord) {
        let probes = watch.probes;
        let started = Instant::now();
        let spec = LaunchSpec {
            command: vec!["sh".into(), "-c".into(), self.command.clone()],
            cpus: pinning.enabled.then(|| pinning.client_cpus.clone()),
            log_path: std::env::temp_dir().join(format!("{run_name}-load.log")),
            cgroup_name: format!("{run_name}-load"),
        };
        let syscalls_before = probes.map(Probes::client_syscalls);
        let launched = Server::launch_around(&spec, &mut |spawn| {
            if let Some(s) = watch.sampler {
                s.follow_next_fork();
            }
            match probes {
                Some(p) => p.spawn_client(spawn),
                None => spawn(),
            }
        });
        let mut client = match launched {
            Ok(client) => client,
            Err(e) => {
                let record = LoadRecord {
                    command: self.command.clone(),
                    exit: Some(format!("not started: {e}")),
                    ..LoadRecord::default()
                };
                return (ClientStats::default(), record);
            }
        };
        while client.exited().is_none() {
            if signals::interrupted() || server.exited().is_some() {
                client.stop(STOP_GRACE);
                break;
            }
            tick(server, None);
            thread::sleep(Duration::from_millis(20));
        }
        let exit = client.exited();
        let record = LoadRecord {
            command: self.command.clone(),
            success: exit.as_deref() == Some(SUCCESS),
            exit,
            output_tail: client.output_tail(OUTPUT_TAIL_LINES),
            // Its cgroup was made for it: what it holds is all the command ran. Without one,
            // the exited tree has nothing left to read.
            cpu: client.snapshot().cpu.ok().filter(|c| c.total_ns > 0),
            syscalls: probes
                .zip(syscalls_before)
                .map(|(p, before)| counts_since(p.client_syscalls(), &before)),
            // The sampler's, once it stops.
            profile: None,
        };
        *tree = Some(client);
        // Its tail is in the record.
        let _ = std::fs::remove_file(&spec.log_path);
        let elapsed_s = started.elapsed().as_secs_f64();
        let client = ClientStats {
            elapsed_s,
            ..ClientStats::default()
        };
        (client, record)
    }

    fn finish(&self, record: LoadRecord) {
        if let Ok(mut finished) = self.finished.lock() {
            *finished = Some(record);
        }
    }
}

/// Waits until the server's tree serves the load's port (TCP listening or UDP bound; any port
/// when the load names none); a running server (`--pid`) must already.
pub fn wait_until_serving(
    load: &Load,
    server: &mut Server,
    timeout: Duration,
) -> Result<(), MeasureError> {
    let deadline = Instant::now() + timeout;
    let port = load.port();
    loop {
        if tree_serves(server.pid(), port) {
            return Ok(());
        }
        if let Some(status) = server.exited() {
            return Err(MeasureError::ExitedAtStart {
                status,
                readiness: load.readiness(),
                tail: server.log_tail(),
            });
        }
        if !server.is_launched() {
            return Err(MeasureError::NotReady {
                pid: server.pid(),
                readiness: load.readiness(),
            });
        }
        if Instant::now() >= deadline {
            return Err(MeasureError::NotReadyInTime {
                secs: timeout.as_secs(),
                readiness: load.readiness(),
                tail: server.log_tail(),
            });
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Each name's calls in `now` beyond those in `before`, names with none left out.
fn counts_since(
    now: BTreeMap<String, u64>,
    before: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    now.into_iter()
        .map(|(name, n)| {
            let n = n - before.get(&name).copied().unwrap_or(0);
            (name, n)
        })
        .filter(|&(_, n)| n > 0)
        .collect()
}

/// How the target crate describes a clean exit.
const SUCCESS: &str = "exit status 0";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_concurrency_fills_in_the_command() {
        let load = ExternalLoad::new("h2load -c {c} -n {c}00 http://x/", 5, None, Some(8443))
            .ok()
            .unwrap();
        assert_eq!(load.command, "h2load -c 5 -n 500 http://x/");
        let w = load.describe();
        assert_eq!(w.protocol, EXTERNAL_PROTOCOL);
        assert_eq!(w.load.unwrap().command, "h2load -c 5 -n 500 http://x/");
        assert!(ExternalLoad::new(" ", 1, None, None).is_err());
    }
}
