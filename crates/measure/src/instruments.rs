//! What watches the server during a measurement besides its CPU accounting: the eBPF probes
//! (kernel figures, per-request accounting, their windows) and the call-chain sampler.

use std::collections::HashSet;
use std::thread;
use std::time::{Duration, Instant};

use reqcost_analysis::requests::{RequestTally, TallyCounters, TallyOptions};
use reqcost_probes::{ProbeOptions, Probes, RequestCounters, TlsHooks};
use reqcost_profile::{SampleOptions, Sampler};
use reqcost_record::{
    ClientStats, HopPhase, PerRequest, Phase, RequestEvent, RequestStats, TcpBytes, TLS_HOOKED_NOTE,
};
use reqcost_report::live_metrics::BudgetGauges;
use reqcost_server::{Server, SocketBytes};

use super::budget::{Keeper, Trap};
use super::stack::{HopWindows, Stack, Upstreams};
use super::tagging::{self, RequestLabels};
use super::ticker::Ticker;
use super::windows::{self, ProbeSchedule, Windows};
use super::MeasureOptions;
use crate::stages;

/// What watches the server besides its CPU accounting, and the notes that say what is on.
pub(crate) struct Instruments {
    pub probes: Option<Probes>,
    /// Why phases have no kernel figures, when the probes are off.
    pub probes_off: Option<String>,
    schedule: ProbeSchedule,
    pub(super) sampler: Option<Sampler>,
    /// How requests are grouped in per-request accounting.
    tally: TallyOptions,
    pub(super) notes: Vec<String>,
    /// The requests that ended, for the profile to name the ones its samples served.
    pub(super) labels: RequestLabels,
    /// With [`ProbeSchedule::Budget`]: the slow syscall path's cost, calibrated at attach.
    trap: Option<Trap>,
    /// The local upstreams followed behind the server, when the probes are on.
    pub(super) stack: Option<Stack>,
}

impl Instruments {
    /// Probes and sampler as the options ask, each off with a note (and a warning) when it
    /// cannot start: the run goes on without it. `notes` are the caller's caveats;
    /// `probes_switch` the flag that turns the probes off, named in the note (None where they
    /// cannot be turned off); `full_time_why` says whether the CPU carries the probes' cost and
    /// why they stay on the whole time, or how not to (see [`windows::note`]).
    pub fn attach(
        options: &MeasureOptions,
        server: &Server,
        tally: TallyOptions,
        mut notes: Vec<String>,
        probes_switch: Option<&str>,
        full_time_why: &str,
    ) -> Instruments {
        let probes = if options.probes {
            attach_probes(options, server.pid(), full_time_why, &mut notes)
        } else {
            let why = probes_switch.unwrap_or("turned off");
            notes.push(format!("eBPF probes off: {why}"));
            None
        };
        let probes_off = probes.is_none().then(|| notes.last().cloned()).flatten();
        let sampler = options
            .sampling
            .and_then(|sampling| start_sampler(server.pid(), sampling, &mut notes));
        let labels = match (&probes, &sampler) {
            (Some(p), Some(s)) => tagging::tag_samples(p, s, server.pid(), &mut notes),
            _ => RequestLabels::default(),
        };
        notes.push(format!("server CPU source: {}", server.cpu_source()));
        let trap = match (&probes, options.probe_schedule) {
            (Some(p), ProbeSchedule::Budget(_)) => Some(calibrate(p, &mut notes)),
            _ => None,
        };
        let stack = probes
            .as_ref()
            .filter(|_| options.upstreams != Upstreams::Off)
            .map(|_| {
                let sampled = sampler.as_ref().map(Sampler::hop_trees);
                Stack::new(options.upstreams.clone(), server.pid(), sampled)
            });
        Instruments {
            stack,
            probes,
            probes_off,
            schedule: options.probe_schedule,
            sampler,
            tally,
            notes,
            labels,
            trap,
        }
    }

    /// One measured window named `name`: the server's figures between two snapshots around
    /// `drive`, the probes' figures and per-request accounting of the window, the probes paused
    /// and resumed on the schedule. `drive` calls the tick it is given every few milliseconds
    /// with the server and the load generator's count of finished requests (None when reqcost
    /// sends none): it drains the probes' request events, lets `ticker` show progress, and ends
    /// windows; what `drive` returns is the load generator's view.
    pub fn measure(
        &self,
        name: &str,
        server: &mut Server,
        ticker: Option<Ticker>,
        drive: impl FnOnce(&mut Server, &mut dyn FnMut(&Server, Option<u64>)) -> ClientStats,
    ) -> Phase {
        let mut window = self.request_window(name, ticker);
        // The probes' CPU counters are read next to the server's CPU at both ends: a server
        // busy across an end (a busy-wait spinning while `attach` closes its window) runs on
        // between two reads that are apart (docs/request-attribution.md, "In flight").
        let before = match window.as_mut() {
            Some(w) => w.start_around(|| server.snapshot()),
            None => server.snapshot(),
        };
        let kernel_before = self.probes.as_ref().map(Probes::read);
        let cost_before = self.probes.as_ref().map(Probes::own_cost);
        let mut windows = self
            .probes
            .as_ref()
            .map(|p| Windows::open(p, self.schedule, server, self.keeper()));
        // Without the probes, the kernel's per-socket counters give the TCP bytes.
        let mut sockets = self
            .probes
            .is_none()
            .then(|| SocketBytes::start(server.pid()));
        // Said once the phase's first snapshot is taken and its probes are on: whoever waits
        // for it loses nothing of the phase.
        stages::enter(&format!("phase {name}"));
        let client = drive(server, &mut |server, finished| {
            if let Some(Ok(s)) = sockets.as_mut() {
                s.tick();
            }
            if let Some(w) = window.as_mut() {
                w.drain();
            }
            if let Some(w) = windows.as_mut() {
                w.tick(server, finished);
                if let (Some(gauges), Some(r)) = (w.gauges(), window.as_mut()) {
                    r.budget(gauges);
                }
            }
        });
        let finished = (client.requests > 0).then_some(client.requests);
        if let (Some(w), Some(done)) = (window.as_mut(), finished) {
            if windows.as_ref().is_none_or(Windows::probed_throughout) {
                w.await_requests(done);
            }
        }
        // Read before the windows close: a last boundary may pause the probes, which forgets
        // the connections. The server's CPU right after the probes' counters (open_requests
        // reads them last): work between the two readings (a busy-wait spinning while the
        // connection table is walked, 2.7 ms of 18.6 ms on an attach window) is in one figure
        // only, and what the probes charged while the server's CPU was read is kept as skew.
        let open = window.as_ref().map(RequestWindow::open_requests);
        let after = server.snapshot();
        if let (Some(w), Some((_, end, _))) = (window.as_mut(), open.as_ref()) {
            w.skew_since(end);
        }
        let windows = windows.map(|w| w.close(server, finished));
        let (mut totals, mut missing) = after.since(&before);
        if let Some(sockets) = sockets {
            match tcp_bytes(sockets) {
                Ok(bytes) => totals.tcp_bytes = Some(bytes),
                Err(why) => {
                    missing.insert("tcp_bytes".into(), why);
                }
            }
        }
        let off = || self.probes_off.clone().unwrap_or_default();
        match (&self.probes, kernel_before) {
            (Some(p), Some(k0)) => totals.kernel = Some(p.read().since(&k0)),
            _ => {
                missing.insert("kernel".into(), off());
            }
        }
        if let (Some(p), Some(c0)) = (&self.probes, cost_before) {
            match c0.and_then(|c0| Ok(p.own_cost()?.since(&c0))) {
                Ok(cost) => totals.probe_cost = Some(cost),
                Err(why) => {
                    missing.insert("probe_cost".into(), why.to_string());
                }
            }
        }
        let (requests, hops) = match window.zip(open).map(|(w, open)| w.close(open)) {
            Some((requests, hops)) => (requests, hops),
            None => (Err(off()), vec![]),
        };
        let requests = match requests {
            Ok(stats) => Some(stats),
            Err(why) => {
                missing.insert("requests".into(), why);
                None
            }
        };
        let mut phase = Phase {
            name: name.to_string(),
            client_model: None,
            client,
            server: totals,
            per_request: PerRequest::default(),
            requests,
            other_traffic: None,
            cpu_windows: None,
            missing,
            unit: Default::default(),
            hops,
        };
        if let Some(windows) = windows {
            windows::put_into(&mut phase, windows);
        }
        phase.per_request = PerRequest::from_totals(&phase.server, phase.units());
        phase
    }

    /// Notes what the probes found of the server's TLS libraries over the whole measurement:
    /// called once it is measured, so that a library is said to carry plaintext only when the
    /// server called it.
    pub(super) fn note_tls(&mut self) {
        if let Some(p) = &self.probes {
            self.notes.extend(tls_notes(&p.tls()));
        }
    }

    /// When the probes are attached within each phase.
    pub(super) fn schedule(&self) -> ProbeSchedule {
        self.schedule
    }

    /// The trap calibrated at attach, when the probes keep a budget.
    pub(super) fn trap(&self) -> Option<Trap> {
        self.trap
    }

    /// A phase's budget keeper, with the schedule's budget.
    fn keeper(&self) -> Option<Keeper> {
        match self.schedule {
            ProbeSchedule::Budget(budget) => Some(Keeper::new(budget, self.trap?)),
            _ => None,
        }
    }

    /// Per-request accounting for the window about to run, when the probes are on.
    fn request_window(&self, name: &str, ticker: Option<Ticker>) -> Option<RequestWindow<'_>> {
        let probes = self.probes.as_ref()?;
        Some(RequestWindow::open(
            probes,
            self.tally.clone(),
            ticker,
            (&self.labels, name),
            self.stack.as_ref(),
        ))
    }
}

/// The TCP bytes of the phase from sock_diag, or why there are none.
fn tcp_bytes(sockets: std::io::Result<SocketBytes>) -> Result<TcpBytes, String> {
    sockets
        .and_then(SocketBytes::finish)
        .map_err(|e| format!("sock_diag failed: {e}"))?
        .ok_or_else(|| NO_TCP.into())
}

/// Why a phase without the probes has no byte count when its server had no TCP connection.
const NO_TCP: &str = "the server's tree had no TCP connection: sock_diag counts TCP bytes only, \
                      and UDP datagrams are the eBPF probes' count";

/// How often a window looks for upstreams the server connected to since the last look.
const LOOK_EVERY: Duration = Duration::from_millis(10);

/// Longest wait at a phase's end for the server to report the requests the client finished
/// (a server that counts fewer, e.g. one request per QUIC connection, is not waited for longer).
const SETTLE: Duration = Duration::from_millis(500);

/// One phase's per-request accounting: the probes' request events drained into a tally, and
/// the CPU counters taken around it.
struct RequestWindow<'p> {
    probes: &'p Probes,
    tally: RequestTally,
    start: RequestCounters,
    /// What the probes charged while the server's CPU was read (`cpu_reading_skew_ns`).
    skew_ns: u64,
    /// Why draining failed, if it did: the phase then has no per-request figures.
    failed: Option<String>,
    ticker: Option<Ticker>,
    /// Where the requests that end are named, and the phase's name.
    labels: (&'p RequestLabels, String),
    /// The upstreams followed, and their figures in this window.
    stack: Option<(&'p Stack, HopWindows)>,
    /// When the upstreams were last looked for.
    looked: Instant,
}

impl<'p> RequestWindow<'p> {
    /// Opens the window: events of earlier phases (warm-up, the previous phase's stragglers)
    /// are drained and dropped; it counts from [`RequestWindow::start`].
    fn open(
        probes: &'p Probes,
        mut options: TallyOptions,
        ticker: Option<Ticker>,
        labels: (&'p RequestLabels, &str),
        stack: Option<&'p Stack>,
    ) -> RequestWindow<'p> {
        let failed = probes
            .drain_requests(&mut |_| {})
            .err()
            .map(|e| e.to_string());
        let stack = stack.map(|s| {
            s.discover(probes);
            (s, s.open(probes))
        });
        // Front requests are remembered for the upstream events that come after them, once an
        // upstream is followed: the remembered requests of a server with none took 28 MiB.
        options.follow_hops = stack.as_ref().is_some_and(|(s, _)| s.any());
        RequestWindow {
            probes,
            tally: RequestTally::new(options),
            start: RequestCounters::default(),
            skew_ns: 0,
            failed,
            ticker,
            labels: (labels.0, labels.1.to_string()),
            stack,
            looked: Instant::now(),
        }
    }

    /// Counts from the server's first snapshot, `read`, with the counters read on both sides
    /// of it: what they charged in between is skew.
    fn start_around<T>(&mut self, read: impl FnOnce() -> T) -> T {
        let before = self.probes.request_counters();
        let snapshot = read();
        self.start = self.probes.request_counters();
        self.skew_ns += self.start.since(&before).total_ns();
        snapshot
    }

    /// Adds what the probes charged since `end`, read just before the server's last snapshot.
    fn skew_since(&mut self, end: &RequestCounters) {
        self.skew_ns += self.probes.request_counters().since(end).total_ns();
    }

    fn drain(&mut self) {
        self.drain_seeing(&mut |_| {});
    }

    /// Shows the budget as it stands to the ticker.
    fn budget(&mut self, gauges: BudgetGauges) {
        if let Some(t) = self.ticker.as_mut() {
            t.budget(gauges);
        }
    }

    /// Drains the events waiting, showing each to `seen` first.
    fn drain_seeing(&mut self, seen: &mut dyn FnMut(&RequestEvent)) {
        self.drain_seeing_until(u64::MAX, seen);
    }

    /// Drains the events waiting, counting those that ended by `until_ns` (CLOCK_MONOTONIC)
    /// and showing each to `seen` first.
    fn drain_seeing_until(&mut self, until_ns: u64, seen: &mut dyn FnMut(&RequestEvent)) {
        self.look_for_upstreams();
        let (tally, ticker) = (&mut self.tally, &mut self.ticker);
        let (labels, phase) = (self.labels.0, self.labels.1.as_str());
        let hops = self.stack.as_ref().map(|(_, w)| w);
        let drained = self.probes.drain_requests(&mut |ev| {
            if ev.end_ns > until_ns {
                return;
            }
            if hops.is_some_and(|w| !w.began_in(&ev)) {
                // Not the phase's, but its samples still name the front request it served.
                if !ev.upstream_call {
                    labels.add(&ev, "", phase, false);
                }
                return;
            }
            seen(&ev);
            let costly = tally.may_be_costliest(&ev);
            let class = tally.add(&ev);
            // The server's calls to an upstream are no requests; an upstream's requests name
            // their samples by the front request they served, and are no requests of the
            // target's live figures.
            if ev.upstream_call {
                return;
            }
            labels.add(&ev, class, phase, costly);
            if ev.hop > 0 {
                return;
            }
            if let Some(t) = ticker.as_mut() {
                t.add(&ev, class);
            }
        });
        if let Err(e) = drained {
            self.failed.get_or_insert(e.to_string());
        }
        if let Some(t) = self.ticker.as_mut() {
            t.tick(self.probes);
        }
    }

    /// Follows the upstreams the server connected to since the last look, at most every
    /// [`LOOK_EVERY`]: a server connects to its upstreams as its first requests need them.
    fn look_for_upstreams(&mut self) {
        if self.looked.elapsed() < LOOK_EVERY {
            return;
        }
        self.looked = Instant::now();
        if let Some((stack, hops)) = self.stack.as_mut() {
            if stack.refresh(self.probes, hops, &self.labels.1) {
                self.tally.follow_hops();
            }
        }
    }

    /// Waits, at most [`SETTLE`], until the server has reported as many requests as the load
    /// generator `finished`: a request ends on the server's side when it reads the client's
    /// close, which a busy machine can run after the client has counted the request.
    fn await_requests(&mut self, finished: u64) {
        let deadline = Instant::now() + SETTLE;
        while self.probes.request_counters().since(&self.start).events < finished
            && Instant::now() < deadline
        {
            thread::sleep(Duration::from_millis(5));
        }
        self.drain();
    }

    /// The requests open now, in flight (docs/request-attribution.md, "In flight"), the
    /// counters read with them (the phase's CPU ends where their CPU so far does), and when.
    fn open_requests(&self) -> (Vec<RequestEvent>, RequestCounters, u64) {
        self.probes.open_requests()
    }

    /// The phase's figures, with `open` (read at its end, `read_ns`) in flight. A request that
    /// ended after that reading is counted as it was read, in flight, and one that began after
    /// it is not the phase's: its CPU is past the counters the phase ends at (closing duty
    /// windows may resume the probes), and counting it put a class at 101 % of the CPU.
    fn close(
        mut self,
        (open, end, read_ns): (Vec<RequestEvent>, RequestCounters, u64),
    ) -> (Result<RequestStats, String>, Vec<HopPhase>) {
        let mut ended = HashSet::new();
        self.drain_seeing_until(read_ns, &mut |ev| {
            ended.insert((ev.pid, ev.conn_id, ev.seq));
        });
        let phase = self.labels.1.as_str();
        let hops = self.stack.as_ref().map(|(_, w)| w);
        for ev in open.iter().filter(|ev| {
            !ended.contains(&(ev.pid, ev.conn_id, ev.seq)) && hops.is_none_or(|w| w.began_in(ev))
        }) {
            let costly = self.tally.may_be_costliest(ev);
            let class = self.tally.add(ev);
            if !ev.upstream_call {
                self.labels.0.add(ev, class, phase, costly);
            }
        }
        self.stack_stats(end)
    }

    /// The target's figures of the window, counted from [`RequestWindow::start`] to `end`,
    /// and each upstream hop's over its own counters and CPU.
    fn stack_stats(self, end: RequestCounters) -> (Result<RequestStats, String>, Vec<HopPhase>) {
        if let Some(why) = self.failed {
            return (
                Err(format!("reading the probes' request events failed: {why}")),
                vec![],
            );
        }
        let readings = self
            .stack
            .as_ref()
            .map(|(stack, windows)| stack.close(self.probes, windows))
            .unwrap_or_default();
        let hop_counters: Vec<(u8, TallyCounters)> = readings
            .iter()
            .map(|r| (r.hop, tally_counters(&r.counters)))
            .collect();
        let front_counters = end.since(&self.start);
        let mut stacked = self
            .tally
            .finish_stack(tally_counters(&front_counters), &hop_counters);
        counted_apart(&mut stacked.front, &front_counters, self.skew_ns);
        for hop in &mut stacked.hops {
            let Some(r) = readings.iter().find(|r| r.hop == hop.hop) else {
                continue;
            };
            if let Some(stats) = hop.requests.as_mut() {
                counted_apart(stats, &r.counters, r.skew_ns);
            }
            hop.cpu = r.cpu.clone();
            hop.kernel = Some(r.kernel.clone());
        }
        (Ok(stacked.front), stacked.hops)
    }
}

/// The tally's view of a tree's counters over a window.
fn tally_counters(c: &RequestCounters) -> TallyCounters {
    TallyCounters {
        attributed_ns: c.attributed_ns,
        // Spent in the window for none of its requests: the time held at its end among it.
        unattributed_ns: c.unattributed_ns + c.held_ns,
        dropped: c.dropped,
    }
}

/// The parts of a tree's unattributed CPU and the counts the probes keep apart from its
/// requests, over its counters `c` of the window; and how far its CPU reading may stand from
/// them: what the probes charged while that CPU was read (`skew_ns`), and how far their lead
/// on the scheduler's count moved.
fn counted_apart(stats: &mut RequestStats, c: &RequestCounters, skew_ns: u64) {
    stats.cpu_reading_skew_ns = skew_ns + c.lead_change_ns();
    stats.unserved_cpu_ns = c.unserved_ns;
    stats.exit_cpu_ns = c.exit_ns;
    stats.held_before_cpu_ns = c.held_before_ns;
    stats.syscalls_unranked = c.unranked;
    stats.http3_requests = c.http3_responses;
}

fn attach_probes(
    options: &MeasureOptions,
    pid: u32,
    full_time_why: &str,
    notes: &mut Vec<String>,
) -> Option<Probes> {
    let schedule = options.probe_schedule;
    let probe_options = ProbeOptions {
        run_time_stats: options.probe_stats,
        client: options.count_client,
        ..ProbeOptions::default()
    };
    match Probes::attach_with(pid, &probe_options) {
        Ok(p) => {
            notes.push(windows::note(schedule, full_time_why));
            Some(p)
        }
        Err(e) => {
            eprintln!("warning: eBPF probes off: {e}");
            notes.push(format!("eBPF probes off: {e}"));
            None
        }
    }
}

/// What the record says of the server's TLS libraries once it is measured: whose plaintext
/// was read, which were probed and never called, and which requests cannot be seen
/// (docs/tls.md).
fn tls_notes(tls: &TlsHooks) -> Vec<String> {
    let hooked = tls
        .hooked
        .iter()
        .map(|lib| format!("{TLS_HOOKED_NOTE}{lib}: requests counted and classed inside TLS"));
    let uncalled = tls.uncalled.iter().map(|lib| {
        format!("TLS library mapped but never called: {lib}: no plaintext read through it")
    });
    let unhooked = tls.unhooked.iter().map(|lib| {
        format!(
            "TLS library not hooked: {lib}: requests inside its TLS are not visible, each of its \
             connections counts as one request"
        )
    });
    hooked.chain(uncalled).chain(unhooked).collect()
}

/// The trap for a budget; when calibrating fails (the probes would not re-attach), none is
/// counted, and the record says so.
fn calibrate(probes: &Probes, notes: &mut Vec<String>) -> Trap {
    Trap::calibrate(probes).unwrap_or_else(|e| {
        notes.push(format!(
            "the slow syscall path could not be calibrated ({e}): the budget counts the \
             probes' program time only"
        ));
        Trap {
            ns: 0.0,
            low: 0.0,
            high: 0.0,
        }
    })
}

fn start_sampler(pid: u32, options: SampleOptions, notes: &mut Vec<String>) -> Option<Sampler> {
    match Sampler::start(pid, options) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("warning: call-chain sampling off: {e}");
            notes.push(format!("call-chain sampling off: {e}"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window's figures make its CPU with what was held at its two ends: held at its end
    /// (spent in it, for no request of it) is unattributed, held at its start (spent before it,
    /// charged in it) is kept apart for `cpu-total` to take off.
    #[test]
    fn a_windows_figures_take_the_time_held_at_both_ends() {
        let reading = |attributed_ns, unattributed_ns, held_ns| RequestCounters {
            attributed_ns,
            unattributed_ns,
            held_ns,
            ..RequestCounters::default()
        };
        let start = reading(10_000, 2_000, 3_000);
        let end = reading(20_000, 4_000, 5_000);
        // The tree ran 10 µs for requests, 2 µs for none, and held 2 µs more than it had.
        let cpu = 14_000;
        let window = end.since(&start);
        let counters = tally_counters(&window);
        let mut stats = RequestStats::default();
        counted_apart(&mut stats, &window, 0);
        assert_eq!(counters.unattributed_ns, 7_000);
        assert_eq!(stats.held_before_cpu_ns, 3_000);
        assert_eq!(
            counters.attributed_ns + counters.unattributed_ns - stats.held_before_cpu_ns,
            cpu
        );
    }

    /// The probes charge a running thread up to its latest syscall, the scheduler counts it up
    /// to its latest tick: how far that lead moved over a window is in its reading's skew, with
    /// what the probes charged while its CPU was read, whichever way it moved.
    #[test]
    fn a_windows_skew_takes_how_far_the_counters_lead_on_the_scheduler_moved() {
        let reading = |lead_ns| RequestCounters {
            lead_ns,
            ..RequestCounters::default()
        };
        for (start, end, skew) in [(-200, 3_000, 3_700), (3_000, 500, 3_000), (0, 0, 500)] {
            let mut stats = RequestStats::default();
            counted_apart(&mut stats, &reading(end).since(&reading(start)), 500);
            assert_eq!(stats.cpu_reading_skew_ns, skew, "lead {start} to {end}");
        }
    }
}
