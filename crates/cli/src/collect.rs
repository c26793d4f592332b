//! The measurement pipeline: target up, probes on, workload phase by phase, snapshots around
//! each measured phase, target down, one run record out.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use reqcost_analysis::requests::{RequestTally, TallyOptions};
use reqcost_probes::{ProbeOptions, Probes, RequestCounters};
use reqcost_profile::{SampleOptions, Sampler};
use reqcost_record::{
    ClientStats, FdKind, IoDirection, OtherTraffic, Outcome, PerRequest, Phase, Pinning,
    RequestStats, RunRecord, Target, TargetMode, Workload, FORMAT, FORMAT_VERSION,
};
use reqcost_server::{
    ensure_port_free, listener_of, machine_info, pin_current_thread, plan_pinning,
    remove_dead_runs, run_name, tree_listens_on, LaunchSpec, Server,
};
use reqcost_workload::{PhaseSpec, Plan};

use crate::attach::Ticker;
use crate::external::Load;
use crate::windows::{self, ProbeSchedule, Windows};
use crate::{failure, signals, Failure};

pub enum TargetSpec {
    Launch(Vec<String>),
    Attach(u32),
}

/// How to measure, whatever the workload and the server.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasureOptions {
    /// Keep reqcost and the server on different CPUs (when there are 2+).
    pub pin: bool,
    /// How long a launched server has to accept connections.
    pub startup_timeout: Duration,
    /// Attach the eBPF probes (exact syscall figures, at a CPU cost to the server).
    pub probes: bool,
    /// Call-chain sampling; `None` turns it off.
    pub sampling: Option<SampleOptions>,
    /// Follow main with a short slow-client phase.
    pub slow_phase: bool,
    /// When the probes are attached within each phase.
    pub probe_schedule: ProbeSchedule,
    /// Turn on the kernel's BPF run-time statistics: the probes' cost on the whole machine.
    pub probe_stats: bool,
}

impl Default for MeasureOptions {
    fn default() -> MeasureOptions {
        MeasureOptions {
            pin: true,
            startup_timeout: Duration::from_secs(10),
            probes: true,
            sampling: Some(SampleOptions::default()),
            slow_phase: true,
            probe_schedule: ProbeSchedule::Alternate,
            probe_stats: false,
        }
    }
}

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
    pub fn run(&self) -> Result<RunRecord, Failure> {
        signals::install();
        remove_dead_runs(&std::env::temp_dir());
        let started = SystemTime::now();
        let pinning = self.pin_reqcost()?;
        self.refuse_taken_port()?;
        let name = run_name(started);
        let mut server = self.start_target(&pinning, &name)?;
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
            Load::External(load) => load.measure(&mut server, &instruments, &pinning, &name),
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
        // cannot come from unprobed windows: the probes stay on the whole time.
        let full_time;
        let options = match self.load {
            Load::External(_) => {
                full_time = MeasureOptions {
                    probe_schedule: ProbeSchedule::FullTime,
                    ..self.options.clone()
                };
                &full_time
            }
            Load::Engine(_) => self.options,
        };
        Instruments::attach(options, server, tally, notes, Some("--no-probes"))
    }

    fn command(&self) -> Option<Vec<String>> {
        match &self.target {
            TargetSpec::Launch(command) => Some(command.clone()),
            TargetSpec::Attach(_) => None,
        }
    }

    /// Everything reqcost runs (load generator, probe readers, this loop) stays off the
    /// server's CPUs; threads spawned later inherit this.
    fn pin_reqcost(&self) -> Result<Pinning, Failure> {
        let pinning = plan_pinning(self.options.pin, self.launches());
        if pinning.enabled {
            pin_current_thread(&pinning.client_cpus).map_err(|e| {
                Failure::run(format!(
                    "cannot pin reqcost to CPU {:?}: {e} (use --no-pin)",
                    pinning.client_cpus
                ))
            })?;
        }
        Ok(pinning)
    }

    /// A server launched on a taken port could not listen, and the process holding the port
    /// would be measured in its place.
    fn refuse_taken_port(&self) -> Result<(), Failure> {
        match self.load.port() {
            Some(port) if self.launches() => ensure_port_free(port).map_err(Failure::run),
            _ => Ok(()),
        }
    }

    fn launches(&self) -> bool {
        matches!(self.target, TargetSpec::Launch(_))
    }

    fn start_target(&self, pinning: &Pinning, run_name: &str) -> Result<Server, Failure> {
        match &self.target {
            TargetSpec::Launch(command) => Server::launch(&LaunchSpec {
                command: command.clone(),
                cpus: (!pinning.server_cpus.is_empty()).then(|| pinning.server_cpus.clone()),
                log_path: std::env::temp_dir().join(format!("{run_name}.log")),
                cgroup_name: run_name.to_string(),
            }),
            TargetSpec::Attach(pid) => Server::attach(*pid),
        }
        .map_err(|e| match e.is_bad_input() {
            true => Failure::bad_input(e),
            false => Failure::run(e),
        })
    }

    /// A launched server gets the startup timeout; a running one must already accept, on a
    /// socket it holds: else reqcost would load one server and measure another.
    fn wait_until_serving(&self, server: &mut Server) -> Result<(), Failure> {
        let addr = match (self.load, self.load.addr()) {
            (_, Some(addr)) => addr,
            (Load::External(load), None) => {
                return load.wait_until_serving(server, self.options.startup_timeout)
            }
            (Load::Engine(_), None) => unreachable!("reqcost's own load has an address"),
        };
        if self.launches() {
            return server
                .wait_until_accepting_unless(
                    addr,
                    self.options.startup_timeout,
                    &signals::interrupted,
                )
                .map_err(Failure::run);
        }
        server
            .wait_until_accepting(addr, Duration::from_secs(1))
            .map_err(|_| {
                Failure::run(format!(
                    "nothing accepts connections on {addr} (is process {} serving that --url?)",
                    server.pid()
                ))
            })?;
        if tree_listens_on(server.pid(), addr.port()) {
            return Ok(());
        }
        let owner = listener_of(addr.port())
            .map(|pid| format!("process {pid} does"))
            .unwrap_or_else(|e| e.to_string());
        Err(Failure::run(format!(
            "process {} does not listen on port {} of --url, {owner}: pass its pid to --pid",
            server.pid(),
            addr.port()
        )))
    }

    /// The plan's phases in order, then the slow-client phase when main calls for one and its
    /// fast reference, until all are done or the run must stop.
    fn measure_phases(
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
    fn drive(
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
    fn announce_load(&self, plan: &Plan, pid: u32) -> String {
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

/// A measurement from its start to its record: the server, what watches it, where reqcost ran.
pub(crate) struct Session {
    pub started: SystemTime,
    pub pinning: Pinning,
    pub server: Server,
    pub instruments: Instruments,
}

impl Session {
    /// Stops a launched server (`command` is its command line; None when attached) and the
    /// sampler, and puts everything measured into one record.
    pub fn record(
        mut self,
        command: Option<Vec<String>>,
        workload: Workload,
        phases: Vec<Phase>,
        outcome: Outcome,
    ) -> RunRecord {
        let comm = self.server.comm();
        let exit = self.server.stop(Duration::from_secs(5));
        RunRecord {
            format: FORMAT.into(),
            version: FORMAT_VERSION,
            id: record_id(self.started, &comm),
            reqcost_version: env!("CARGO_PKG_VERSION").into(),
            started_unix_s: self
                .started
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64(),
            target: Target {
                mode: if command.is_some() {
                    TargetMode::Launch
                } else {
                    TargetMode::Attach
                },
                command,
                pid: self.server.pid(),
                comm,
                exit,
            },
            workload,
            machine: machine_info(),
            pinning: self.pinning,
            phases,
            profile: self.instruments.sampler.map(Sampler::finish),
            outcome,
            notes: self.instruments.notes,
        }
    }
}

/// What watches the server besides its CPU accounting, and the notes that say what is on.
pub(crate) struct Instruments {
    pub probes: Option<Probes>,
    /// Why phases have no kernel figures, when the probes are off.
    pub probes_off: Option<String>,
    schedule: ProbeSchedule,
    sampler: Option<Sampler>,
    /// How requests are grouped in per-request accounting.
    tally: TallyOptions,
    notes: Vec<String>,
}

impl Instruments {
    /// Probes and sampler as the options ask, each off with a note (and a warning) when it
    /// cannot start: the run goes on without it. `notes` are the caller's caveats;
    /// `probes_switch` the flag that turns the probes off, named in the note (None where they
    /// cannot be turned off).
    pub fn attach(
        options: &MeasureOptions,
        server: &Server,
        tally: TallyOptions,
        mut notes: Vec<String>,
        probes_switch: Option<&str>,
    ) -> Instruments {
        let probes = if options.probes {
            attach_probes(options, server.pid(), probes_switch, &mut notes)
        } else {
            let why = probes_switch.unwrap_or("turned off");
            notes.push(format!("eBPF probes off: {why}"));
            None
        };
        let probes_off = probes.is_none().then(|| notes.last().cloned()).flatten();
        let sampler = options
            .sampling
            .and_then(|sampling| start_sampler(server.pid(), sampling, &mut notes));
        notes.push(format!("server CPU source: {}", server.cpu_source()));
        Instruments {
            probes,
            probes_off,
            schedule: options.probe_schedule,
            sampler,
            tally,
            notes,
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
        let before = server.snapshot();
        let kernel_before = self.probes.as_ref().map(Probes::read);
        let cost_before = self.probes.as_ref().map(Probes::own_cost);
        let mut window = self.request_window(ticker);
        let mut windows = self
            .probes
            .as_ref()
            .map(|p| Windows::open(p, self.schedule, server));
        let client = drive(server, &mut |server, finished| {
            if let Some(w) = window.as_mut() {
                w.drain();
            }
            if let Some(w) = windows.as_mut() {
                w.tick(server, finished);
            }
        });
        let finished = (client.requests > 0).then_some(client.requests);
        let windows = windows.map(|w| w.close(server, finished));
        let (mut totals, mut missing) = server.snapshot().since(&before);
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
        let requests = match window
            .map(RequestWindow::close)
            .unwrap_or_else(|| Err(off()))
        {
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
        };
        if let Some(windows) = windows {
            windows::settle(&mut phase, windows);
        }
        phase.per_request = PerRequest::from_totals(&phase.server, phase.units());
        phase
    }

    /// Per-request accounting for the window about to run, when the probes are on.
    fn request_window(&self, ticker: Option<Ticker>) -> Option<RequestWindow<'_>> {
        let probes = self.probes.as_ref()?;
        Some(RequestWindow::open(probes, self.tally.clone(), ticker))
    }
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

/// The workload's protocol and classes, for grouping requests as the server saw them.
fn tally_options(load: &Load, notes: &mut Vec<String>) -> TallyOptions {
    let protocol = load.describe().protocol;
    let classes = match load {
        Load::Engine(plan) => plan.classes(),
        Load::External(_) => Vec::new(),
    };
    TallyOptions::new(&protocol, &classes).unwrap_or_else(|e| {
        notes.push(format!(
            "per-request classes off: {e}; requests grouped by path"
        ));
        TallyOptions::new(&protocol, &[]).unwrap_or_default()
    })
}

/// One phase's per-request accounting: the probes' request events drained into a tally, and
/// the CPU counters taken around it.
struct RequestWindow<'p> {
    probes: &'p Probes,
    tally: RequestTally,
    start: RequestCounters,
    /// Why draining failed, if it did: the phase then has no per-request figures.
    failed: Option<String>,
    ticker: Option<Ticker>,
}

impl<'p> RequestWindow<'p> {
    /// Starts counting: events of earlier phases (warm-up, the previous phase's stragglers)
    /// are drained and dropped first.
    fn open(
        probes: &'p Probes,
        options: TallyOptions,
        ticker: Option<Ticker>,
    ) -> RequestWindow<'p> {
        let failed = probes
            .drain_requests(&mut |_| {})
            .err()
            .map(|e| e.to_string());
        RequestWindow {
            probes,
            tally: RequestTally::new(options),
            start: probes.request_counters(),
            failed,
            ticker,
        }
    }

    fn drain(&mut self) {
        let (tally, ticker) = (&mut self.tally, &mut self.ticker);
        let drained = self.probes.drain_requests(&mut |ev| {
            let class = tally.add(&ev);
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

    fn close(mut self) -> Result<RequestStats, String> {
        self.drain();
        if let Some(why) = self.failed {
            return Err(format!("reading the probes' request events failed: {why}"));
        }
        let c = self.probes.request_counters().since(&self.start);
        Ok(self
            .tally
            .finish(c.attributed_ns, c.unattributed_ns, c.dropped))
    }
}

fn attach_probes(
    options: &MeasureOptions,
    pid: u32,
    switch: Option<&str>,
    notes: &mut Vec<String>,
) -> Option<Probes> {
    let schedule = options.probe_schedule;
    let probe_options = ProbeOptions {
        run_time_stats: options.probe_stats,
        ..ProbeOptions::default()
    };
    match Probes::attach_with(pid, &probe_options) {
        Ok(p) => {
            notes.push(windows::note(schedule, switch.is_some()));
            Some(p)
        }
        Err(e) => {
            eprintln!("warning: eBPF probes off: {e}");
            notes.push(format!("eBPF probes off: {e}"));
            None
        }
    }
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

/// Why the run must stop after this phase, if it must: a signal, a dead server, a warm-up
/// without one answer, a failed main.
fn early_outcome(
    phases: &mut [Phase],
    spec: &PhaseSpec,
    client: &ClientStats,
    server: &mut Server,
) -> Option<Outcome> {
    let crashed = !signals::interrupted() && server.exited().is_some();
    let cut = match phases.last_mut().filter(|_| crashed && spec.measured) {
        Some(phase) => failure::end_at_crash(&mut phase.client),
        None => 0,
    };
    let after = match cut {
        0 => String::new(),
        n => {
            format!(" (the phase ends there: {n} requests refused after the crash are not counted)")
        }
    };
    stopped_outcome(&spec.name, &after, server)
        .or_else(|| failed_warmup(spec, client))
        .or_else(|| failed_main(phases, spec))
}

/// A signal, or a server that died during phase `phase` (`after` says what that did to the
/// phase's figures).
pub(crate) fn stopped_outcome(phase: &str, after: &str, server: &mut Server) -> Option<Outcome> {
    if signals::interrupted() {
        return Some(Outcome::Interrupted);
    }
    let exit = server.exited()?;
    Some(Outcome::ServerDied {
        detail: format!("{exit} during phase {phase}{after}{}", server.log_tail()),
    })
}

/// A warm-up that got no answer at all: measuring after it would only measure failures.
fn failed_warmup(spec: &PhaseSpec, client: &ClientStats) -> Option<Outcome> {
    (!spec.measured && client.ok == 0 && client.requests > 0).then(|| Outcome::Failed {
        detail: failures(client, "warm-up requests"),
    })
}

/// A main phase with no answer, or refused connections, makes the run a failure.
fn failed_main(phases: &[Phase], spec: &PhaseSpec) -> Option<Outcome> {
    let main = phases
        .last()
        .filter(|p| spec.measured && p.name == "main")?;
    (main.client.ok == 0 || main.client.errors.contains_key("refused")).then(|| Outcome::Failed {
        detail: failures(&main.client, "requests"),
    })
}

/// `N of M WHAT failed (KIND COUNT, ...)`.
fn failures(client: &ClientStats, what: &str) -> String {
    format!(
        "{} of {} {what} failed ({}): {}",
        client.error_count(),
        client.requests,
        error_kinds(&client.errors),
        failure::blame(&client.errors)
    )
}

fn spec_label(spec: &PhaseSpec) -> String {
    if spec.measured {
        spec.name.clone()
    } else {
        format!("{} (unmeasured)", spec.name)
    }
}

fn error_kinds(errors: &BTreeMap<String, u64>) -> String {
    errors
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
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

/// `YYYYMMDD-HHMMSS-comm` in UTC: sortable, and says what was measured.
fn record_id(t: SystemTime, comm: &str) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let name: String = comm
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}-{}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        if name.is_empty() { "server" } else { &name }
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (era * 400 + yoe + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_ids_are_dated_and_safe() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        assert_eq!(record_id(t, "my server"), "20261118-110640-my_server");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
    }
}
