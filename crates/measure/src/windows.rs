//! Probed and unprobed windows within a measured phase: the probes are paused and resumed
//! (detached and re-attached) on a schedule, the server's CPU and the finished requests are
//! read at every boundary, and the phase's figures are rebuilt from the two kinds of window:
//! CPU from the unprobed ones (free of the probes' cost), exact counts from the probed ones,
//! scaled to the phase's requests (docs/record.md, "How CPU was measured").

use std::time::{Duration, Instant};

use reqcost_probes::Probes;
use reqcost_record::{CpuMethod, CpuTimes, CpuWindows, Phase, ProbeCost, WindowTotals};
use reqcost_server::{ReceivedBytes, Server, Snapshot};

use reqcost_report::live_metrics::BudgetGauges;

use crate::budget::{Cost, Keeper, Mark};

/// When the probes are attached during a phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ProbeSchedule {
    /// The whole phase (`--probes-full-time`, and attach without `--duty`).
    FullTime,
    /// Probed and unprobed windows in turn, each at least [`WINDOW`] and
    /// [`WINDOW_REQUESTS`] long: CPU from the unprobed ones.
    Alternate,
    /// `attach --duty`: probed this fraction of each [`DUTY_CYCLE`]; counts scaled to the
    /// whole window, CPU the whole window's.
    Duty(f64),
    /// `attach --budget`: as `Duty`, the duty set each cycle so that the probes' cost stays
    /// within this fraction of the server's CPU (crate::budget).
    Budget(f64),
}

/// Shortest window. Each boundary detaches or re-attaches seven programs and reads the
/// server's CPU (a few ms of reqcost's own time, none of the server's); at half a second they
/// are too rare to matter, and short enough that slow drifts (a cache warming, a machine
/// getting busier) hit both kinds of window alike.
pub const WINDOW: Duration = Duration::from_millis(500);
/// Fewest requests in a window (a boundary cuts at most one request per connection, in flight
/// across it: at a thousand, a cut moves a window's count by 0.1 % per connection).
pub const WINDOW_REQUESTS: u64 = 1000;
/// Fewest requests in the unprobed windows for their CPU per request to be the phase's;
/// with fewer, the probed windows' CPU (with the probes' cost) is reported, and said so.
pub const MIN_UNPROBED_REQUESTS: u64 = WINDOW_REQUESTS;
/// Fewest unprobed windows, likewise. The first window, always probed, carries the phase's
/// start (connections opened, caches warmed: at 512 connections of a select() server the probed
/// first half cost 3.5x the unprobed second half, far beyond the probes' usual 1.3x): against a single unprobed window that start-up alone would pass for the
/// probes' cost, and phases near the limit would flip between methods from one run to the next.
pub const MIN_UNPROBED_WINDOWS: u32 = 2;
/// One probed and one unprobed window with `--duty`.
pub const DUTY_CYCLE: Duration = Duration::from_secs(1);

/// The windows of one phase as they run.
pub struct Windows<'p> {
    probes: &'p Probes,
    schedule: ProbeSchedule,
    /// Start of the current window: time, server snapshot, finished requests.
    since: Instant,
    at: Snapshot,
    at_requests: u64,
    /// The probes' request events when the phase began: attach counts requests from there.
    events_at_open: u64,
    probed: WindowTotals,
    unprobed: WindowTotals,
    requests_cut: u64,
    /// Why re-attaching failed, if it did: the rest of the phase is unprobed.
    failed: Option<String>,
    /// With a budget: its duty, and the probes' own figures when the phase began.
    budget: Option<(Keeper, ProbeCost)>,
    /// With a budget: the bytes the tree received, read at each boundary (None when sock_diag
    /// cannot be read), and their totals in probed and unprobed windows.
    received: Option<ReceivedBytes>,
    bytes: (u64, u64),
}

impl<'p> Windows<'p> {
    /// Starts the first window, probed, before the phase's first request.
    /// `keeper` keeps the budget of [`ProbeSchedule::Budget`].
    pub fn open(
        probes: &'p Probes,
        schedule: ProbeSchedule,
        server: &Server,
        keeper: Option<Keeper>,
    ) -> Windows<'p> {
        let budget = keeper.zip(probes.own_cost().ok());
        let received = budget
            .as_ref()
            .and_then(|_| ReceivedBytes::start(server.pid(), &probes.listener_traffic()).ok());
        Windows {
            probes,
            schedule,
            since: Instant::now(),
            at: server.snapshot(),
            at_requests: 0,
            events_at_open: probes.request_counters().events,
            probed: WindowTotals::default(),
            unprobed: WindowTotals::default(),
            requests_cut: 0,
            failed: probes.paused().then(|| {
                "the probes could not be re-attached after the previous phase's unprobed pass"
                    .to_string()
            }),
            budget,
            received,
            bytes: (0, 0),
        }
    }

    /// Ends the current window and starts the other kind when it is due. `finished` is the
    /// load generator's count of finished requests, None when reqcost sends none.
    pub fn tick(&mut self, server: &Server, finished: Option<u64>) {
        if self.schedule == ProbeSchedule::FullTime || self.failed.is_some() {
            return;
        }
        if !self.due(self.served(finished)) {
            return;
        }
        self.boundary(server, finished);
        if self.budget.is_some() {
            self.budget_boundary(server, finished);
        } else {
            self.toggle(server, finished);
        }
    }

    /// A budget's boundary: the end of a cycle after its unprobed window (or its probed one,
    /// at a duty of 1, which stays probed), then the turn the new duty asks for.
    fn budget_boundary(&mut self, server: &Server, finished: Option<u64>) {
        let probed = !self.probes.paused();
        if !probed || self.duty() >= 1.0 {
            self.end_cycle();
        }
        if !(probed && self.duty() >= 1.0) {
            self.toggle(server, finished);
        }
    }

    /// Hands the cycle's figures to the budget's keeper, which sets the next duty.
    fn end_cycle(&mut self) {
        let mark = self.mark();
        if let (Some((keeper, _)), Some(mark)) = (self.budget.as_mut(), mark) {
            keeper.end_cycle(mark);
        }
    }

    /// The windows' running totals and the probes' cost so far, None when it cannot be read.
    fn mark(&self) -> Option<Mark> {
        let (keeper, open) = self.budget.as_ref()?;
        let cost = self.probes.own_cost().ok()?.since(open);
        Some(self.mark_with(&cost, keeper.trap.ns))
    }

    fn mark_with(&self, cost: &ProbeCost, trap_ns: f64) -> Mark {
        Mark {
            cost_ns: Cost::of(cost, trap_ns).total_ns() as f64,
            probed_cpu_ns: self.probed.cpu_ns as f64,
            unprobed_cpu_ns: self.unprobed.cpu_ns as f64,
            probed_bytes: self.bytes.0 as f64,
            unprobed_bytes: self.bytes.1 as f64,
            probed_s: self.probed.elapsed_s,
            elapsed_s: self.probed.elapsed_s + self.unprobed.elapsed_s,
        }
    }

    /// The budget's gauges as they stand, with a budget.
    pub fn gauges(&self) -> Option<BudgetGauges> {
        self.budget.as_ref()?.0.gauges()
    }

    /// The share of the cycle probed now.
    fn duty(&self) -> f64 {
        match (&self.budget, self.schedule) {
            (Some((keeper, _)), _) => keeper.duty(),
            (None, ProbeSchedule::Duty(duty) | ProbeSchedule::Budget(duty)) => duty,
            _ => 1.0,
        }
    }

    /// Requests finished in the phase so far: the load generator's count, or when reqcost sends
    /// none (attach), the request events of per-request accounting (in unprobed windows only
    /// those counted while the probes paused or re-attached).
    fn served(&self, finished: Option<u64>) -> u64 {
        finished.unwrap_or_else(|| self.probes.request_counters().events - self.events_at_open)
    }

    fn due(&self, requests: u64) -> bool {
        let elapsed = self.since.elapsed();
        let probed = !self.probes.paused();
        match self.schedule {
            ProbeSchedule::FullTime => false,
            ProbeSchedule::Alternate => {
                elapsed >= WINDOW && requests - self.at_requests >= WINDOW_REQUESTS
            }
            ProbeSchedule::Duty(_) | ProbeSchedule::Budget(_) => {
                let duty = self.duty();
                let share = if probed { duty } else { 1.0 - duty };
                elapsed >= DUTY_CYCLE.mul_f64(share)
            }
        }
    }

    /// Adds the window ending now to its kind, and starts the next at this instant. The
    /// requests are read right after the bytes, so that both end the window at one moment.
    fn boundary(&mut self, server: &Server, finished: Option<u64>) {
        let probed = !self.probes.paused();
        self.count_bytes(probed);
        let requests = self.served(finished);
        self.cut(server, requests, probed, WindowTotals::add);
    }

    /// Ends the stretch since the last cut: `add` puts its requests, time and CPU into the
    /// probed or the unprobed windows.
    fn cut(
        &mut self,
        server: &Server,
        requests: u64,
        probed: bool,
        add: fn(&mut WindowTotals, u64, f64, &CpuTimes),
    ) {
        let now = server.snapshot();
        let cpu = now.since(&self.at).0.cpu.unwrap_or_default();
        let totals = if probed {
            &mut self.probed
        } else {
            &mut self.unprobed
        };
        add(
            totals,
            requests - self.at_requests,
            self.since.elapsed().as_secs_f64(),
            &cpu,
        );
        self.since = Instant::now();
        self.at = now;
        self.at_requests = requests;
    }

    /// Adds the bytes the tree received since the last reading to the probed or the
    /// unprobed windows.
    fn count_bytes(&mut self, probed: bool) {
        let Some(received) = self.received.as_mut() else {
            return;
        };
        let total = received
            .read(&self.probes.listener_traffic())
            .unwrap_or(self.bytes.0 + self.bytes.1);
        let new = total.saturating_sub(self.bytes.0 + self.bytes.1);
        if probed {
            self.bytes.0 += new;
        } else {
            self.bytes.1 += new;
        }
    }

    fn toggle(&mut self, server: &Server, finished: Option<u64>) {
        if !self.probes.paused() {
            self.requests_cut += self.probes.pause();
            return;
        }
        if let Err(e) = self.probes.resume() {
            self.failed = Some(e.to_string());
        } else if self.budget.is_some() {
            self.reattached(server, finished);
        }
    }

    /// The probes count from the end of re-attaching (tens of ms on nginx, its bytes about 3 %
    /// of a probed window's), the programs counting as each comes on: what the server
    /// received meanwhile, the CPU it spent and the requests counted go to the unprobed window
    /// before. Counted as probed, the CPU of a 30 ms re-attach in a 30-190 ms probed window,
    /// without its bytes, read as the probes' cost to the on/off turns.
    fn reattached(&mut self, server: &Server, finished: Option<u64>) {
        self.count_bytes(false);
        let requests = self.served(finished);
        self.cut(server, requests, false, WindowTotals::extend_last);
    }

    /// The probes were on for the whole phase so far, so their request events are all of it.
    pub fn probed_throughout(&self) -> bool {
        self.unprobed.windows == 0 && !self.probes.paused() && self.failed.is_none()
    }

    /// Ends the last window, leaves the probes attached for what follows, and says what the
    /// windows were. `finished` as for [`Windows::tick`], at the phase's end.
    pub fn close(mut self, server: &Server, finished: Option<u64>) -> Result<CpuWindows, String> {
        self.boundary(server, finished);
        if self.probes.paused() {
            self.probes.resume().map_err(|e| e.to_string())?;
        }
        if let Some(why) = self.failed {
            return Err(format!("re-attaching the probes failed midway: {why}"));
        }
        let (method, reason) = self.method();
        let budget = self.budget.as_ref().and_then(|(keeper, open)| {
            let cost = self.probes.own_cost().ok()?.since(open);
            Some(keeper.figures(&cost, &self.mark_with(&cost, keeper.trap.ns)))
        });
        let mut windows = CpuWindows {
            method,
            reason,
            probed: self.probed,
            unprobed: self.unprobed,
            count_scale: 1.0,
            requests_cut: self.requests_cut,
            pass_work: None,
            pass_requests: 0,
            budget,
        };
        let probed = windows.probed.requests;
        let by_bytes = windows.budget.as_ref().and_then(|b| {
            scale_by_bytes(
                (b.probed_bytes, b.unprobed_bytes),
                probed + windows.unprobed.requests,
                probed + windows.requests_cut,
            )
        });
        windows.count_scale = match method {
            // The probes slow the server down: a closed-loop client sends fewer requests
            // while they are on, so the probed windows' share of the work is below their
            // share of the time (at 17 µs a request, 0.82 of it).
            CpuMethod::Sampled if by_bytes.is_some() => by_bytes.unwrap_or(1.0),
            CpuMethod::Sampled => 1.0 / windows.probed_fraction(),
            _ if probed > 0 => (probed + windows.unprobed.requests) as f64 / probed as f64,
            _ => 1.0,
        };
        Ok(windows)
    }

    fn method(&self) -> (CpuMethod, String) {
        match self.schedule {
            ProbeSchedule::FullTime => (
                CpuMethod::Probed,
                "probes attached the whole phase: counts exact, CPU with their cost".into(),
            ),
            ProbeSchedule::Duty(duty) => (
                CpuMethod::Sampled,
                format!(
                    "--duty {:.0}%: probes attached {:.0} % of each {} s; counts scaled to the \
                     whole window",
                    duty * 100.0,
                    duty * 100.0,
                    DUTY_CYCLE.as_secs_f64()
                ),
            ),
            ProbeSchedule::Budget(budget) => (
                CpuMethod::Sampled,
                format!(
                    "--budget {}%: probes attached part of each {} s, the part set each cycle \
                     to keep their cost within {} % of the server's CPU; counts scaled to the \
                     whole window by the bytes the server received ({}; by time without them)",
                    budget * 100.0,
                    DUTY_CYCLE.as_secs_f64(),
                    budget * 100.0,
                    self.received.as_ref().map_or_else(
                        || "sock_diag could not be read".to_string(),
                        ReceivedBytes::source
                    )
                ),
            ),
            ProbeSchedule::Alternate
                if self.unprobed.requests >= MIN_UNPROBED_REQUESTS
                    && self.unprobed.windows >= MIN_UNPROBED_WINDOWS =>
            {
                (
                    CpuMethod::UnprobedWindows,
                    format!(
                        "CPU from {} unprobed windows ({} requests), counts from {} probed ones",
                        self.unprobed.windows, self.unprobed.requests, self.probed.windows
                    ),
                )
            }
            ProbeSchedule::Alternate => (
                CpuMethod::Probed,
                format!(
                    "phase too short for unprobed windows ({} windows, {} requests without \
                     probes; {MIN_UNPROBED_WINDOWS} and {MIN_UNPROBED_REQUESTS} needed): CPU \
                     includes the probes' cost",
                    self.unprobed.windows, self.unprobed.requests
                ),
            ),
        }
    }
}

/// The record's note on the probes' cost, as the schedule deals with it; `full_time_why` says
/// whether the server CPU then includes their cost, and why they stayed on the whole time or how
/// to keep them off part of it.
pub fn note(schedule: ProbeSchedule, full_time_why: &str) -> String {
    let cost = "their cost on the server's events measured in each phase (probe_cost; \
                bench/RESULTS.md)";
    match schedule {
        ProbeSchedule::Alternate => format!(
            "eBPF probes on in alternate windows: CPU figures from the windows without them, \
             or from an unprobed pass of a phase too short for them (cpu_windows in each \
             phase), {cost}"
        ),
        ProbeSchedule::FullTime => {
            format!("eBPF probes on the whole time: {full_time_why}; {cost}")
        }
        ProbeSchedule::Duty(duty) => format!(
            "eBPF probes on {:.0} % of the time (--duty): counts are sampled and scaled, \
             server CPU is the whole window's, with {cost}",
            duty * 100.0
        ),
        ProbeSchedule::Budget(budget) => format!(
            "eBPF probes on part of the time, set to keep their cost within {} % of the \
             server's CPU (--budget; cpu_windows.budget): counts are sampled and scaled, \
             server CPU is the whole window's, with {cost}",
            budget * 100.0
        ),
    }
}

/// Puts the windows' outcome into the phase: the figures rebuilt, or, when the probes could
/// not be re-attached midway, their partial counts left out with the reason.
pub fn put_into(phase: &mut Phase, windows: Result<CpuWindows, String>) {
    match windows {
        Ok(windows) => apply(phase, windows),
        Err(why) => {
            phase.server.kernel = None;
            for hop in &mut phase.hops {
                hop.kernel = None;
            }
            phase.requests = None;
            for field in ["kernel", "requests"] {
                phase.missing.insert(field.into(), why.clone());
            }
        }
    }
}

/// What scales a budgeted window's counts to the whole window: the bytes the tree received in
/// all over those received while probed (`bytes`), times the requests those probed bytes were
/// of (`of_probed`) over all the `counted` ones. The requests of the probed bytes are those the
/// probed windows counted, and those a pause forgot: a request open when the probes pause (on
/// a keep-alive connection, each one's last, which ends at the next request's read) is
/// forgotten (`requests_cut`), while the bytes it received were probed: nginx under wrk -c8
/// lost 8 a pause, 1 % of the requests counted. The unprobed windows' requests had their
/// bytes counted unprobed: those counted between a boundary's reading and the pause, and
/// while re-attaching (nginx at 500 one-connection requests a second, debug build, counted 4
/// to 6 in each re-attach, 2 % of its probed windows' requests). None without bytes on both
/// sides.
fn scale_by_bytes(bytes: (u64, u64), counted: u64, of_probed: u64) -> Option<f64> {
    let (probed, unprobed) = bytes;
    if probed == 0 || unprobed == 0 || of_probed == 0 || counted == 0 {
        return None;
    }
    Some((probed + unprobed) as f64 / probed as f64 * of_probed as f64 / counted as f64)
}

/// Rebuilds a phase measured in windows: CPU per the method, the probed windows' counts scaled
/// to the phase, per-request accounting keeping its shares of the new CPU.
fn apply(phase: &mut Phase, windows: CpuWindows) {
    if let Some(cpu) = phase.server.cpu.as_mut() {
        *cpu = phase_cpu(&windows, cpu);
    }
    let count = windows.count_scale;
    if count != 1.0 {
        phase.server.kernel = phase.server.kernel.as_ref().map(|k| k.scaled(count));
    }
    // An upstream hop was probed in the same windows as the target (docs/stack.md).
    if count != 1.0 {
        phase.scale_requests_to_cpu(count);
        for hop in &mut phase.hops {
            hop.kernel = hop.kernel.as_ref().map(|k| k.scaled(count));
        }
    }
    phase.cpu_windows = Some(windows);
}

/// The phase's CPU: the unprobed (or probed) windows' CPU per request times the phase's
/// requests, or the whole phase's as measured (sampled, or one window only).
fn phase_cpu(windows: &CpuWindows, measured: &CpuTimes) -> CpuTimes {
    let (from, kind) = match windows.method {
        CpuMethod::UnprobedWindows => (&windows.unprobed, "unprobed"),
        CpuMethod::Probed if windows.unprobed.windows > 0 => (&windows.probed, "probed"),
        _ => return measured.clone(),
    };
    let requests = windows.probed.requests + windows.unprobed.requests;
    let per = |ns: u64| (ns as f64 * requests as f64 / from.requests.max(1) as f64).round() as u64;
    CpuTimes {
        total_ns: per(from.cpu_ns),
        user_ns: per(from.user_ns),
        system_ns: per(from.system_ns),
        source: format!(
            "{}, {kind} windows ({} requests) scaled to the phase's {requests}",
            measured.source, from.requests
        ),
        split: measured.split,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{accepted, accounting, cpu, phase, served, totals, windows, SOURCE};

    /// 1000 requests probed for 3 ms of CPU, 3000 unprobed for 6 ms: 2 µs a request without
    /// the probes, over the phase's 4000.
    fn alternate() -> CpuWindows {
        let probed = totals(2, 1000, 0.5, &cpu(3_000_000, 2_000_000));
        let unprobed = totals(2, 3000, 1.5, &cpu(6_000_000, 4_000_000));
        CpuWindows {
            count_scale: 4.0,
            ..windows(CpuMethod::UnprobedWindows, probed, unprobed)
        }
    }

    #[test]
    fn unprobed_windows_give_their_cpu_per_request_to_the_whole_phase() {
        let got = phase_cpu(&alternate(), &cpu(9_000_000, 6_000_000));
        assert_eq!(
            (got.total_ns, got.user_ns, got.system_ns),
            (8_000_000, 5_333_333, 2_666_667)
        );
        assert_eq!(
            got.source,
            format!("{SOURCE}, unprobed windows (3000 requests) scaled to the phase's 4000")
        );
    }

    #[test]
    fn a_phase_too_short_scales_its_probed_windows() {
        let probed = totals(1, 1500, 0.5, &cpu(4_500_000, 3_000_000));
        let unprobed = totals(1, 500, 0.5, &cpu(1_000_000, 500_000));
        let got = phase_cpu(
            &windows(CpuMethod::Probed, probed, unprobed),
            &cpu(5_500_000, 3_500_000),
        );
        assert_eq!((got.total_ns, got.user_ns), (6_000_000, 4_000_000));
        assert!(got
            .source
            .ends_with(", probed windows (1500 requests) scaled to the phase's 2000"));
    }

    #[test]
    fn cpu_measured_whole_stays_as_measured() {
        let measured = cpu(5_000_000, 1_000_000);
        let full_time = windows(
            CpuMethod::Probed,
            totals(1, 2000, 1.0, &measured),
            WindowTotals::default(),
        );
        assert_eq!(phase_cpu(&full_time, &measured), measured);
        let probed = totals(3, 300, 0.6, &cpu(2_000_000, 0));
        let unprobed = totals(3, 0, 2.4, &cpu(3_000_000, 0));
        let duty = windows(CpuMethod::Sampled, probed, unprobed);
        assert_eq!(phase_cpu(&duty, &measured), measured);
    }

    /// The probed windows' counts cover the phase; per-request accounting keeps its shares
    /// of the new CPU: 3 ms split 4:1 becomes 8 ms split 4:1.
    #[test]
    fn applied_windows_scale_counts_and_keep_the_cpu_shares() {
        let served = served(1000, 2_400_000, 600_000);
        let mut p = phase(4000, cpu(9_000_000, 6_000_000), 10, Some(served));
        apply(&mut p, alternate());
        assert_eq!(p.server.cpu.as_ref().map(|c| c.total_ns), Some(8_000_000));
        assert_eq!(accepted(&p), 40);
        assert_eq!(accounting(&p), (4000, 6_400_000, 1_600_000));
        assert_eq!(p.cpu_windows, Some(alternate()));
    }

    /// An upstream hop was probed in the same windows: its kernel counts (what its findings
    /// are judged on) scale with the target's, its forks and exits (counted whether the probes
    /// are paused or not) stay; they are left out with the target's when the windows failed.
    #[test]
    fn a_hops_kernel_counts_scale_and_fail_with_the_targets() {
        let counts = |p: &Phase| {
            p.hops[0]
                .kernel
                .as_ref()
                .map(|k| (k.tree.processes_forked, k.memory.page_faults_user))
        };
        let mut p = phase(4000, cpu(9_000_000, 6_000_000), 10, None);
        p.hops = vec![reqcost_record::HopPhase {
            hop: 2,
            kernel: Some(reqcost_record::KernelStats {
                tree: reqcost_record::TreeStats {
                    processes_forked: 1000,
                    ..Default::default()
                },
                memory: reqcost_record::MemoryStats {
                    page_faults_user: 150_000,
                    ..Default::default()
                },
                ..Default::default()
            }),
            ..Default::default()
        }];
        let mut failed = p.clone();
        apply(&mut p, alternate());
        assert_eq!(counts(&p), Some((1000, 600_000)));
        put_into(&mut failed, Err("re-attaching failed".into()));
        assert_eq!(counts(&failed), None);
    }

    #[test]
    fn sampled_windows_scale_counts_but_not_the_cpu() {
        let probed = totals(2, 500, 0.5, &cpu(2_000_000, 1_000_000));
        let unprobed = totals(2, 0, 1.5, &cpu(6_000_000, 3_000_000));
        let duty = CpuWindows {
            count_scale: 4.0,
            ..windows(CpuMethod::Sampled, probed, unprobed)
        };
        let mut p = phase(
            0,
            cpu(8_000_000, 4_000_000),
            5,
            Some(served(500, 1_000_000, 1_000_000)),
        );
        apply(&mut p, duty);
        assert_eq!(p.server.cpu, Some(cpu(8_000_000, 4_000_000)));
        assert_eq!(accepted(&p), 20);
        assert_eq!(accounting(&p), (2000, 4_000_000, 4_000_000));
    }

    #[test]
    fn probes_on_throughout_leave_the_phase_as_measured() {
        let measured = cpu(5_000_000, 1_000_000);
        let mut p = phase(
            2000,
            measured.clone(),
            10,
            Some(served(2000, 4_000_000, 1_000_000)),
        );
        let before = p.clone();
        let full_time = windows(
            CpuMethod::Probed,
            totals(1, 2000, 1.0, &measured),
            WindowTotals::default(),
        );
        apply(&mut p, full_time.clone());
        assert_eq!(
            p,
            Phase {
                cpu_windows: Some(full_time),
                ..before
            }
        );
    }

    #[test]
    fn windows_that_failed_midway_leave_their_counts_out() {
        let mut p = phase(
            2000,
            cpu(5_000_000, 1_000_000),
            10,
            Some(served(2000, 1, 1)),
        );
        put_into(&mut p, Err("re-attaching failed".into()));
        assert!(p.server.kernel.is_none() && p.requests.is_none());
        assert_eq!(p.missing["kernel"], "re-attaching failed");
        assert_eq!(p.missing["requests"], "re-attaching failed");
        assert!(p.server.cpu.is_some());
    }

    /// nginx under wrk -c8, one budgeted window of 12 s: 8656 events counted, 8 requests
    /// forgotten at each of 10 pauses, 0.41 MB received while probed and 1.36 MB not.
    #[test]
    fn budgeted_counts_add_the_requests_cut_at_a_pause() {
        let scale = scale_by_bytes((407_913, 1_358_911), 8656, 8736).unwrap();
        let bytes_alone = 1_766_824.0 / 407_913.0;
        assert!((scale / bytes_alone - 8736.0 / 8656.0).abs() < 1e-12);
        assert_eq!(scale_by_bytes((407_913, 0), 8656, 8736), None);
        assert_eq!(scale_by_bytes((0, 1_358_911), 8656, 8736), None);
        assert_eq!(scale_by_bytes((407_913, 1_358_911), 0, 0), None);
    }

    /// 120 requests counted, 30 of them with their bytes unprobed: the probed bytes were of
    /// 90 requests, a ninth of all of them.
    #[test]
    fn budgeted_counts_scale_by_the_requests_of_the_probed_bytes() {
        let scale = scale_by_bytes((90 * 53, 810 * 53), 120, 90).unwrap();
        assert!((scale * 120.0 - 900.0).abs() < 1e-9, "{scale}");
        assert_eq!(scale_by_bytes((90 * 53, 810 * 53), 120, 0), None);
    }
}
