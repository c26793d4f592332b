//! The phase loop of a measurement that drives the server itself: the plan's phases in order,
//! each between two snapshots with a progress bar, then the slow-client phase and its fast
//! reference when main calls for them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use reqcost_record::{ClientStats, FdKind, IoDirection, OtherTraffic, Outcome, PerRequest, Phase};
use reqcost_server::Server;
use reqcost_workload::{PhaseSpec, Plan};

use super::instruments::Instruments;
use super::outcome::early_outcome;
use super::Collect;
use crate::signals;

impl Collect<'_> {
    /// The plan's phases in order, then the slow-client phase when main calls for one and its
    /// fast reference, until all are done or the run must stop.
    pub(super) fn measure_phases(
        &self,
        plan: &Plan,
        server: &mut Server,
        instruments: &Instruments,
    ) -> (Vec<Phase>, Outcome) {
        let mut phases: Vec<Phase> = Vec::new();
        let mut queue: VecDeque<PhaseSpec> = plan.phases().into();
        while let Some(spec) = queue.pop_front() {
            let (client, phase) = self.measure_phase(plan, &spec, server, instruments);
            phases.extend(phase);
            if let Some(outcome) = early_outcome(&mut phases, &spec, &client, server) {
                return (phases, outcome);
            }
            if let Some(phase) = phases.last_mut().filter(|_| spec.measured) {
                self.unprobed_pass(plan, &spec, phase, server, instruments);
            }
            queue.extend(self.follow_up(plan, &spec.name, phases.last()));
        }
        (phases, Outcome::Completed)
    }

    /// Drives one phase between two snapshots of the server: what the client saw, and the
    /// phase unless it is unmeasured.
    fn measure_phase(
        &self,
        plan: &Plan,
        spec: &PhaseSpec,
        server: &mut Server,
        instruments: &Instruments,
    ) -> (ClientStats, Option<Phase>) {
        let phase = instruments.measure(&spec.name, server, None, |server, tick| {
            self.drive(plan, spec, server, tick)
        });
        let client = phase.client.clone();
        let measured = spec.measured.then(|| {
            let phase = Phase {
                client_model: Some(spec.client_model.clone()),
                ..phase
            };
            if self.launches() {
                phase
            } else {
                with_other_traffic(phase)
            }
        });
        (client, measured)
    }

    /// Runs one phase on a worker thread while this thread watches for a dead server or a
    /// signal, either of which stops the phase early, and calls `tick` every few milliseconds.
    pub(super) fn drive(
        &self,
        plan: &Plan,
        spec: &PhaseSpec,
        server: &mut Server,
        tick: &mut dyn FnMut(&Server, Option<u64>),
    ) -> ClientStats {
        let stop = AtomicBool::new(false);
        let bar = self.progress_bar(spec_label(spec), spec.expected_requests);
        let finished = AtomicU64::new(0);
        let progress = |done: u64| finished.store(done, Ordering::Relaxed);
        thread::scope(|s| {
            let worker = s.spawn(|| plan.run(spec, &stop, &progress));
            while !worker.is_finished() {
                if signals::interrupted() || server.exited().is_some() {
                    stop.store(true, Ordering::SeqCst);
                }
                let done = finished.load(Ordering::Relaxed);
                bar.set_position(done);
                tick(server, Some(done));
                thread::sleep(Duration::from_millis(20));
            }
            bar.finish_and_clear();
            worker.join().unwrap_or_default()
        })
    }

    fn progress_bar(&self, label: String, len: Option<u64>) -> ProgressBar {
        if !self.progress {
            return ProgressBar::hidden();
        }
        let bar = match len {
            Some(n) => ProgressBar::new(n).with_style(
                ProgressStyle::with_template(
                    "{prefix:>12} [{bar:30}] {pos}/{len} requests ({per_sec}, {eta})",
                )
                .expect("valid template")
                .progress_chars("=> "),
            ),
            None => ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template(
                    "{prefix:>12} {spinner} {pos} requests ({per_sec}) {elapsed}",
                )
                .expect("valid template"),
            ),
        };
        // indicatif draws only when stderr is a terminal, so scripts and CI see no bars.
        bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(10));
        bar.with_prefix(label)
    }
}

impl Collect<'_> {
    /// What reqcost is about to send to a server it did not launch, said before it sends
    /// anything: that server may have clients of its own.
    pub(super) fn announce_load(&self, plan: &Plan, pid: u32) -> String {
        let w = plan.describe();
        let phases: Vec<String> = plan
            .phases()
            .iter()
            .map(|spec| {
                let size = match (w.duration_s, spec.expected_requests) {
                    (Some(secs), _) if spec.measured => format!("{secs:.1} s"),
                    (_, Some(n)) => format!("{n} requests"),
                    _ => "until stopped".into(),
                };
                let unmeasured = if spec.measured { "" } else { " (unmeasured)" };
                format!("{} {size}{unmeasured}", spec.name)
            })
            .collect();
        let rate = w
            .rate_per_s
            .map(|r| format!(" at {r} req/s"))
            .unwrap_or_default();
        let slow = if self.options.slow_phase {
            format!(
                "; then slow-clients: up to {} requests read at {} KiB/s per connection, about \
                 {SLOW_PHASE_SECS} s (--no-slow-phase to skip)",
                SLOW_PHASE_REQUESTS.1,
                SLOW_CLIENT_BYTES_PER_S / 1024
            )
        } else {
            String::new()
        };
        format!(
            "reqcost will send to pid {pid} at {}: {}, on {} connection(s){rate}, {} clients{slow}",
            w.url,
            phases.join(", "),
            w.concurrency,
            w.options.get("client").map_or("unlimited", String::as_str),
        )
    }
}

/// Bandwidth of each connection in the default slow-client phase: a distant client on a
/// modest link, slow enough that a response outlives the socket buffers.
const SLOW_CLIENT_BYTES_PER_S: u64 = 64 * 1024;
/// Target length of the slow-client phase, and bounds on its request count.
const SLOW_PHASE_SECS: f64 = 2.0;
const SLOW_PHASE_REQUESTS: (u64, u64) = (4, 200);

impl Collect<'_> {
    /// The phase that follows the one named `done` (measured as `last`), if one does: the
    /// slow-client phase after main, its fast reference at the same rate after it.
    fn follow_up(&self, plan: &Plan, done: &str, last: Option<&Phase>) -> Option<PhaseSpec> {
        match done {
            "main" if self.options.slow_phase => slow_phase(plan, last),
            "slow-clients" => same_rate_phase(plan, last),
            _ => None,
        }
    }
}

/// Fast clients, open loop at the rate the slow phase achieved, for as many requests: the
/// slow phase runs at its clients' pace (a hundred requests a second where main may run
/// saturated), and a server idle between requests pays wake-ups that a busy one shares, so
/// held against main they would pass for the slow clients' cost (Apache at 3.1x).
fn same_rate_phase(plan: &Plan, slow: Option<&Phase>) -> Option<PhaseSpec> {
    let slow = slow.filter(|p| p.name == "slow-clients" && p.client.ok > 0)?;
    let rate = slow.client.throughput_rps;
    (rate > 0.0).then(|| plan.fast_phase_at_rate(slow.client.ok, rate))
}

/// The short slow-client phase run after main: its cost per request against main's is
/// what exposes servers that burn CPU while clients drain responses (seeds/000, 002).
/// None when main already ran with slow clients, or moved nothing.
fn slow_phase(plan: &Plan, main: Option<&Phase>) -> Option<PhaseSpec> {
    let main = main.filter(|m| m.name == "main" && m.client.ok > 0)?;
    if main.client_model.as_deref() != Some("unlimited") {
        return None;
    }
    let bytes = main.client.bytes_received as f64 / main.client.ok as f64;
    let per_conn_secs = SLOW_PHASE_SECS * plan.describe().concurrency.max(1) as f64;
    let requests = (per_conn_secs * SLOW_CLIENT_BYTES_PER_S as f64 / bytes.max(1.0)) as u64;
    let (lo, hi) = SLOW_PHASE_REQUESTS;
    Some(plan.slow_client_phase(requests.clamp(lo, hi), SLOW_CLIENT_BYTES_PER_S))
}

/// A phase reqcost drove against a server it did not launch, which may have other clients:
/// what they made of the phase beyond reqcost's own requests, and its per-request figures over
/// every request the server served.
fn with_other_traffic(mut phase: Phase) -> Phase {
    let Some(served) = &phase.requests else {
        return phase;
    };
    let own = &phase.client;
    let socket = |dir| {
        let kernel = phase.server.kernel.as_ref()?;
        Some(kernel.io_total(dir, FdKind::Socket).1)
    };
    phase.other_traffic = Some(OtherTraffic {
        requests: served.requests.saturating_sub(own.ok),
        bytes_in: socket(IoDirection::Read).map(|b| b.saturating_sub(own.bytes_sent)),
        bytes_out: socket(IoDirection::Write).map(|b| b.saturating_sub(own.bytes_received)),
    });
    phase.per_request = PerRequest::from_totals(&phase.server, phase.units());
    phase
}

fn spec_label(spec: &PhaseSpec) -> String {
    if spec.measured {
        spec.name.clone()
    } else {
        format!("{} (unmeasured)", spec.name)
    }
}
