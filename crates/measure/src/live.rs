//! A running server's real traffic, measured for a window without sending it anything
//! (`attach`). The window is one phase, `live`, whose per-request figures divide by the requests
//! the server served (per-request accounting), since no load generator counted any.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use reqcost_analysis::requests::TallyOptions;
use reqcost_profile::SampleOptions;
use reqcost_record::{ClientStats, Outcome, Phase, Pinning, RunRecord, Workload, LIVE_PROTOCOL};
use reqcost_report::live_metrics::LiveMetrics;
use reqcost_server::Server;

use super::instruments::Instruments;
use super::session::Session;
use super::ticker::{ProgressLine, Ticker};
use super::{MeasureOptions, ProbeSchedule, Upstreams};
use crate::metrics::{self, MetricsFeed, SharedMetrics};
use crate::{signals, MeasureError};

/// The name of the one phase an attach run measures.
pub const LIVE_PHASE: &str = "live";
/// How often the window drains the probes' request events and checks for its end.
const TICK: Duration = Duration::from_millis(20);

/// What `attach --pid PID --duration D` records, with its progress lines: the demo's live
/// window. `opened` is set once the window is open, so that traffic started then is all in it.
pub fn watch_for(
    pid: u32,
    duration: Duration,
    opened: &AtomicBool,
) -> Result<RunRecord, MeasureError> {
    Live {
        pid,
        source: format!("pid {pid}"),
        duration: Some(duration),
        sampling: Some(SampleOptions::default()),
        progress: true,
        metrics: None,
        schedule: ProbeSchedule::FullTime,
        opened: Some(opened),
        probe_stats: false,
        upstreams: Upstreams::All,
    }
    .run()
}

/// One attach measurement, configured.
pub struct Live<'a> {
    pub pid: u32,
    /// How the server was found (`8080` for --port, `pid 1234`), for the record's URL.
    pub source: String,
    /// None: until SIGINT or SIGTERM.
    pub duration: Option<Duration>,
    pub sampling: Option<SampleOptions>,
    /// Print a progress line on stderr every few seconds.
    pub progress: bool,
    /// Serve the live figures for Prometheus at this address.
    pub metrics: Option<SocketAddr>,
    /// The whole window, `--duty` or `--budget`.
    pub schedule: ProbeSchedule,
    /// Set once the window is open.
    pub opened: Option<&'a AtomicBool>,
    /// `--probe-stats`.
    pub probe_stats: bool,
    /// The local upstreams followed behind the server (docs/stack.md).
    pub upstreams: Upstreams,
}

impl Live<'_> {
    /// Attaches, measures the window, and records it. A signal ends the window as its end
    /// would: the record is complete.
    pub fn run(&self) -> Result<RunRecord, MeasureError> {
        signals::install();
        let started = SystemTime::now();
        let mut server = Server::attach(self.pid).map_err(MeasureError::Attach)?;
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
    fn serve_metrics(&self, server: &Server) -> Result<Option<SharedMetrics>, MeasureError> {
        let Some(addr) = self.metrics else {
            return Ok(None);
        };
        let shared = Arc::new(Mutex::new(LiveMetrics::new(&server.comm())));
        let bound = metrics::serve(addr, shared.clone())?;
        eprintln!("serving metrics at http://{bound}/metrics");
        Ok(Some(shared))
    }

    /// Probes (required: they count the requests) and the sampler unless turned off.
    fn instruments(&self, server: &Server) -> Result<Instruments, MeasureError> {
        let options = MeasureOptions {
            pin: false,
            probes: true,
            sampling: self.sampling,
            slow_phase: false,
            probe_schedule: self.schedule,
            probe_stats: self.probe_stats,
            upstreams: self.upstreams.clone(),
            ..MeasureOptions::default()
        };
        let tally = TallyOptions::new(LIVE_PROTOCOL, &[]).unwrap_or_default();
        let notes = vec![
            "attached: the server's own clients; requests, connections and bytes counted on \
             the server side, reqcost sent nothing"
                .into(),
        ];
        let instruments = Instruments::attach(
            &options,
            server,
            tally,
            notes,
            None,
            "server CPU includes their cost; --budget PCT or --duty PCT keeps them on part of \
             the time",
        );
        match &instruments.probes_off {
            Some(why) => Err(MeasureError::ProbesOff(why.clone())),
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
                self.schedule_said(instruments),
                match self.duration {
                    Some(d) => format!("for {:.1} s", d.as_secs_f64()),
                    None => "until Ctrl-C".into(),
                }
            );
            if let Some(opened) = self.opened {
                opened.store(true, Ordering::Release);
            }
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

    /// How the probes are on, as the line that opens the window says it.
    fn schedule_said(&self, instruments: &Instruments) -> String {
        match self.schedule {
            ProbeSchedule::Duty(duty) => format!(" {:.0} % of the time", duty * 100.0),
            ProbeSchedule::Budget(budget) => format!(
                " part of the time, their cost kept within {:.1} % of the server's CPU (slow \
                 syscall path {:.0} ns per syscall, calibrated)",
                budget * 100.0,
                instruments.trap().map_or(0.0, |t| t.ns)
            ),
            _ => String::new(),
        }
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
