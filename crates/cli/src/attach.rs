//! `reqcost attach`: a running server's real traffic, measured for a window without sending it
//! anything. The window is one phase, `live`, whose per-request figures divide by the requests
//! the server served (per-request accounting), since no load generator counted any.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use reqcost_analysis::requests::{TallyOptions, KEY_CAP, OTHER};
use reqcost_probes::{Probes, RequestCounters};
use reqcost_profile::SampleOptions;
use reqcost_record::{
    ClientStats, Outcome, Phase, Pinning, RequestEvent, RunRecord, Workload, LIVE_PROTOCOL,
};
use reqcost_report::fmt_duration_us;
use reqcost_report::metrics::LiveMetrics;
use reqcost_server::{listener_of, Server};

use crate::args::AttachArgs;
use crate::collect::{Instruments, MeasureOptions, Session};
use crate::metrics::{self, MetricsFeed, SharedMetrics};
use crate::print::{PrintMode, RunOutput};
use crate::windows::ProbeSchedule;
use crate::{deliver, signals, Failure};

/// The name of the one phase an attach run measures.
pub const LIVE_PHASE: &str = "live";
/// How often the window drains the probes' request events and checks for its end.
const TICK: Duration = Duration::from_millis(20);
/// How often the progress line is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

pub fn attach_cmd(args: AttachArgs) -> Result<(), Failure> {
    let output = RunOutput::from_flags(args.json, false);
    let mode = output.mode();
    let (pid, source) = match (args.pid, args.port) {
        (Some(pid), _) => (pid, format!("pid {pid}")),
        (None, Some(port)) => (listener_of(port).map_err(Failure::run)?, port.to_string()),
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
        probe_stats: args.probe_stats,
    }
    .run()?;
    deliver(&record, args.output, &args.stacks, output)
}

/// What `attach --pid PID --duration D` records, with its progress lines: the demo's live
/// window.
pub fn watch_for(pid: u32, duration: Duration) -> Result<RunRecord, Failure> {
    Live {
        pid,
        source: format!("pid {pid}"),
        duration: Some(duration),
        sampling: Some(SampleOptions::default()),
        progress: true,
        metrics: None,
        schedule: ProbeSchedule::FullTime,
        probe_stats: false,
    }
    .run()
}

/// One attach measurement, configured.
struct Live {
    pid: u32,
    /// How the server was found (`8080` for --port, `pid 1234`), for the record's URL.
    source: String,
    /// None: until SIGINT or SIGTERM.
    duration: Option<Duration>,
    sampling: Option<SampleOptions>,
    /// Print a progress line on stderr every few seconds.
    progress: bool,
    /// Serve the live figures for Prometheus at this address.
    metrics: Option<SocketAddr>,
    /// The whole window, or `--duty`.
    schedule: ProbeSchedule,
    /// `--probe-stats`.
    probe_stats: bool,
}

impl Live {
    /// Attaches, measures the window, and records it. A signal ends the window as its end
    /// would: the record is complete.
    fn run(&self) -> Result<RunRecord, Failure> {
        signals::install();
        let started = SystemTime::now();
        let mut server = Server::attach(self.pid).map_err(Failure::run)?;
        let metrics = self.serve_metrics(&server)?;
        let instruments = self.instruments(&server)?;
        let (phase, window) = self.watch(&mut server, &instruments, metrics);
        let outcome = match server.exited() {
            Some(exit) => Outcome::ServerDied {
                detail: format!("{exit} during the live window"),
            },
            None => Outcome::Completed,
        };
        let session = Session {
            started,
            pinning: Pinning {
                note: Some(
                    "attached: the server and reqcost run where the system puts them".into(),
                ),
                ..Pinning::default()
            },
            server,
            instruments,
        };
        Ok(session.record(None, self.workload(window), vec![phase], outcome))
    }

    /// The figures `--metrics` serves, once its address listens.
    fn serve_metrics(&self, server: &Server) -> Result<Option<SharedMetrics>, Failure> {
        let Some(addr) = self.metrics else {
            return Ok(None);
        };
        let shared = Arc::new(Mutex::new(LiveMetrics::new(&server.comm(), KEY_CAP)));
        let bound = metrics::serve(addr, shared.clone())?;
        eprintln!("serving metrics at http://{bound}/metrics");
        Ok(Some(shared))
    }

    /// Probes (required: they count the requests) and the sampler unless turned off.
    fn instruments(&self, server: &Server) -> Result<Instruments, Failure> {
        let options = MeasureOptions {
            pin: false,
            probes: true,
            sampling: self.sampling,
            slow_phase: false,
            probe_schedule: self.schedule,
            probe_stats: self.probe_stats,
            ..MeasureOptions::default()
        };
        let tally = TallyOptions::new(LIVE_PROTOCOL, &[]).unwrap_or_default();
        let notes = vec![
            "attached: the server's own clients; requests, connections and bytes counted on \
             the server side, reqcost sent nothing"
                .into(),
        ];
        let instruments = Instruments::attach(&options, server, tally, notes, None);
        match &instruments.probes_off {
            Some(why) => Err(Failure::run(format!(
                "attach counts requests with the eBPF probes, and they cannot run: {why}"
            ))),
            None => Ok(instruments),
        }
    }

    /// The live phase and the window's length: until the duration, a signal, or the server's
    /// exit.
    fn watch(
        &self,
        server: &mut Server,
        instruments: &Instruments,
        metrics: Option<SharedMetrics>,
    ) -> (Phase, Duration) {
        let ticker = instruments.probes.as_ref().and_then(|p| {
            let counters = p.request_counters();
            Ticker::new(
                self.progress.then(|| ProgressLine::new(counters)),
                metrics.map(|m| MetricsFeed::new(m, counters)),
            )
        });
        let mut window = Duration::ZERO;
        let phase = instruments.measure(LIVE_PHASE, server, ticker, |server, tick| {
            // Said once the window is open, so that whoever waits for it loses no request.
            eprintln!(
                "attached to {} (pid {}): probes on{}, measuring its traffic {}",
                server.comm(),
                self.pid,
                match self.schedule {
                    ProbeSchedule::Duty(duty) => format!(" {:.0} % of the time", duty * 100.0),
                    _ => String::new(),
                },
                match self.duration {
                    Some(d) => format!("for {:.1} s", d.as_secs_f64()),
                    None => "until Ctrl-C".into(),
                }
            );
            let start = Instant::now();
            let deadline = self.duration.map(|d| start + d);
            while !signals::interrupted()
                && server.exited().is_none()
                && deadline.is_none_or(|d| Instant::now() < d)
            {
                tick(server, None);
                thread::sleep(TICK);
            }
            window = start.elapsed();
            ClientStats::default()
        });
        let phase = Phase {
            client_model: Some("the server's own clients".into()),
            ..phase
        };
        (phase, window)
    }

    fn workload(&self, window: Duration) -> Workload {
        Workload {
            url: format!("{LIVE_PROTOCOL}:{}", self.source),
            protocol: LIVE_PROTOCOL.into(),
            duration_s: Some(window.as_secs_f64()),
            ..Workload::default()
        }
    }
}

/// What a live window does with each request event besides tallying it: the progress line,
/// and the figures `--metrics` serves, each when asked for.
pub struct Ticker {
    line: Option<ProgressLine>,
    metrics: Option<MetricsFeed>,
}

impl Ticker {
    /// None when there is nothing to do.
    fn new(line: Option<ProgressLine>, metrics: Option<MetricsFeed>) -> Option<Ticker> {
        (line.is_some() || metrics.is_some()).then_some(Ticker { line, metrics })
    }

    /// One event, of the `class` the phase's tally filed it under: the live line and the
    /// metrics name the record's class rows.
    pub fn add(&mut self, ev: &RequestEvent, class: &str) {
        if let Some(m) = &self.metrics {
            m.add(class, ev);
        }
        if let Some(line) = self.line.as_mut() {
            line.add(ev, class);
        }
    }

    pub fn tick(&mut self, probes: &Probes) {
        if let Some(m) = &self.metrics {
            m.tick(probes);
        }
        if let Some(line) = self.line.as_mut() {
            line.tick(probes);
        }
    }
}

/// The progress line of a live window, like `top`'s: over the last few seconds, requests per
/// second, the tree's CPU per request, and the class that took the most CPU.
struct ProgressLine {
    since: Instant,
    counters: RequestCounters,
    requests: u64,
    class_cpu: HashMap<String, u64>,
}

impl ProgressLine {
    /// Starts an interval at the probes' `counters`.
    fn new(counters: RequestCounters) -> ProgressLine {
        ProgressLine {
            since: Instant::now(),
            counters,
            requests: 0,
            class_cpu: HashMap::new(),
        }
    }

    fn add(&mut self, ev: &RequestEvent, class: &str) {
        if ev.bytes_in == 0 {
            return;
        }
        self.requests += 1;
        if let Some(cpu) = self.class_cpu.get_mut(class) {
            *cpu += ev.cpu_ns;
            return;
        }
        let key = if self.class_cpu.len() < KEY_CAP {
            class
        } else {
            OTHER
        };
        *self.class_cpu.entry(key.to_string()).or_default() += ev.cpu_ns;
    }

    /// Prints the line when an interval is over, and starts the next.
    fn tick(&mut self, probes: &Probes) {
        let elapsed = self.since.elapsed();
        if elapsed < PROGRESS_EVERY {
            return;
        }
        let counters = probes.request_counters();
        let cpu_ns = counters.since(&self.counters).total_ns();
        eprintln!("{}", self.line(elapsed, cpu_ns));
        *self = ProgressLine::new(counters);
    }
    fn line(&self, elapsed: Duration, cpu_ns: u64) -> String {
        let rate = self.requests as f64 / elapsed.as_secs_f64();
        let mut line = format!("live  {rate:.0} req/s");
        if self.requests > 0 {
            let per_request_us = cpu_ns as f64 / 1000.0 / self.requests as f64;
            line += &format!(" · CPU/request {}", fmt_duration_us(per_request_us));
        }
        let top = self.class_cpu.iter().max_by_key(|(_, cpu)| **cpu);
        if let Some((class, cpu)) = top.filter(|_| cpu_ns > 0) {
            let share = *cpu as f64 * 100.0 / cpu_ns as f64;
            line += &format!(" · top class {class} ({share:.0} % of CPU)");
        }
        line
    }
}
