//! `attach --budget`: the probes' cost to the server's tree measured while attached, and the
//! duty set each cycle so that the cost stays within a share of the server's CPU
//! (docs/record.md, "The probes' budget").
//!
//! The cost has three parts. The programs' run time on the tree's events and the uretprobe
//! syscalls are measured by the probes themselves (`probe_cost`). The third, the slow syscall
//! path that any program on a syscall tracepoint turns on for every thread, runs outside the
//! programs: it is a per-syscall constant, calibrated at start on reqcost's own syscalls with
//! the probes attached and detached. It cannot be taken from on/off turns of the server: with
//! the probes off nothing counts its requests or syscalls, so the unprobed windows have CPU
//! but nothing to divide it by.

use std::time::Instant;

use reqcost_probes::Probes;
use reqcost_record::{ProbeBudget, ProbeCost};
use reqcost_report::live_metrics::BudgetGauges;

/// The least duty: the probes see at least this share of the traffic, whatever it costs.
pub const MIN_DUTY: f64 = 0.01;
/// Calibration rounds (off, then on) and the syscalls timed in each turn: about 40 ms.
const TRAP_ROUNDS: usize = 7;
const TRAP_CALLS: u32 = 20_000;

/// The slow syscall path's cost per syscall, calibrated at start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trap {
    /// The median over the rounds, ns per syscall (0 when attaching made syscalls no slower).
    pub ns: f64,
    /// The least and greatest round: the median is between them with 98 % confidence (seven
    /// rounds).
    pub low: f64,
    pub high: f64,
}

impl Trap {
    /// Times `getppid` on reqcost's own thread with the probes detached and attached, in
    /// alternating rounds; leaves the probes attached. Reqcost is outside the tree, so its
    /// calls pay the slow path and the programs' first test, which rejects them, and nothing
    /// more: the programs' work on the tree's calls is measured apart (`tree_ns`).
    pub fn calibrate(probes: &Probes) -> Result<Trap, String> {
        let mut rounds = Vec::with_capacity(TRAP_ROUNDS);
        for _ in 0..TRAP_ROUNDS {
            probes.pause();
            let off = syscall_ns();
            probes.resume().map_err(|e| e.to_string())?;
            rounds.push(syscall_ns() - off);
        }
        Ok(Trap::of(rounds))
    }

    /// The trap from the rounds' differences (attached minus detached, ns per call).
    fn of(mut rounds: Vec<f64>) -> Trap {
        rounds.sort_by(f64::total_cmp);
        let clamp = |ns: f64| ns.max(0.0);
        Trap {
            ns: clamp(rounds[rounds.len() / 2]),
            low: clamp(rounds[0]),
            high: clamp(rounds[rounds.len() - 1]),
        }
    }

    /// How the trap was measured, for the record.
    pub fn source(&self) -> String {
        format!(
            "calibrated at start: getppid on reqcost's own thread, probes attached minus \
             detached, median of {TRAP_ROUNDS} rounds of {TRAP_CALLS} calls (interval: their \
             range)"
        )
    }
}

/// ns per `getppid` call over [`TRAP_CALLS`] calls.
fn syscall_ns() -> f64 {
    let start = Instant::now();
    for _ in 0..TRAP_CALLS {
        // SAFETY: getppid has no preconditions.
        std::hint::black_box(unsafe { libc::getppid() });
    }
    start.elapsed().as_nanos() as f64 / f64::from(TRAP_CALLS)
}

/// The probes' cost over some probed time, in its three parts (ns).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Cost {
    pub syscalls: u64,
    pub program_ns: u64,
    pub trap_ns: u64,
    pub uretprobe_ns: u64,
}

impl Cost {
    /// The cost the probes' own figures show, with `trap_ns` per syscall of the tree.
    pub fn of(cost: &ProbeCost, trap_ns: f64) -> Cost {
        let syscalls = cost
            .programs
            .iter()
            .find(|p| p.name == "sys_enter")
            .map_or(0, |p| p.tree_runs);
        Cost {
            syscalls,
            program_ns: cost.tree_ns,
            trap_ns: (syscalls as f64 * trap_ns).round() as u64,
            uretprobe_ns: cost.uretprobe_ns,
        }
    }

    pub fn total_ns(&self) -> u64 {
        self.program_ns + self.trap_ns + self.uretprobe_ns
    }
}

/// The duty that keeps the probes' cost within `budget` of the server's CPU: they cost
/// `cost_per_probed_s` (ns per second probed) and the server runs `server_per_s` (ns of CPU
/// per second, without their cost), so a duty `d` costs `d * cost / server`. Between
/// [`MIN_DUTY`] and 1.
pub fn next_duty(cost_per_probed_s: f64, server_per_s: f64, budget: f64) -> f64 {
    if cost_per_probed_s <= 0.0 {
        return 1.0;
    }
    (budget * server_per_s.max(0.0) / cost_per_probed_s).clamp(MIN_DUTY, 1.0)
}

/// The windows' running totals at a moment (a cycle's end), each kind of window apart.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Mark {
    /// The probes' accounted cost so far ([`Cost::total_ns`]).
    pub cost_ns: f64,
    /// The tree's CPU in probed and in unprobed windows.
    pub probed_cpu_ns: f64,
    pub unprobed_cpu_ns: f64,
    /// The bytes its TCP sockets received in each (0 when they cannot be read).
    pub probed_bytes: f64,
    pub unprobed_bytes: f64,
    pub probed_s: f64,
    pub elapsed_s: f64,
}

impl Mark {
    fn minus(&self, o: &Mark) -> Mark {
        Mark {
            cost_ns: self.cost_ns - o.cost_ns,
            probed_cpu_ns: self.probed_cpu_ns - o.probed_cpu_ns,
            unprobed_cpu_ns: self.unprobed_cpu_ns - o.unprobed_cpu_ns,
            probed_bytes: self.probed_bytes - o.probed_bytes,
            unprobed_bytes: self.unprobed_bytes - o.unprobed_bytes,
            probed_s: self.probed_s - o.probed_s,
            elapsed_s: self.elapsed_s - o.elapsed_s,
        }
    }

    fn scaled(&self, f: f64) -> Mark {
        Mark {
            cost_ns: self.cost_ns * f,
            probed_cpu_ns: self.probed_cpu_ns * f,
            unprobed_cpu_ns: self.unprobed_cpu_ns * f,
            probed_bytes: self.probed_bytes * f,
            unprobed_bytes: self.unprobed_bytes * f,
            probed_s: self.probed_s * f,
            elapsed_s: self.elapsed_s * f,
        }
    }

    fn plus(&self, o: &Mark) -> Mark {
        o.minus(&self.scaled(-1.0))
    }

    fn cpu_ns(&self) -> f64 {
        self.probed_cpu_ns + self.unprobed_cpu_ns
    }

    /// What on/off turns show the probes cost: the probed windows' CPU beyond what the same
    /// received bytes cost in the unprobed ones. None without bytes in both kinds.
    pub fn measured_ns(&self) -> Option<f64> {
        (self.probed_bytes > 0.0 && self.unprobed_bytes > 0.0).then(|| {
            let unprobed_per_byte = self.unprobed_cpu_ns / self.unprobed_bytes;
            (self.probed_cpu_ns - self.probed_bytes * unprobed_per_byte).max(0.0)
        })
    }
}

/// The duty of an attach with a budget, set at the end of each cycle from the cycles so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Keeper {
    pub budget: f64,
    pub trap: Trap,
    duty: f64,
    /// The cycles so far, each older one weighing [`KEEP`] times the next.
    recent: Mark,
    /// The on/off measurement of each cycle that had both kinds of window.
    turns: Turns,
    /// The on/off measurement over the accounted cost (at least 1), once it shows a cost
    /// beyond its noise: what the programs' time and the trap leave out (the dispatch of the
    /// other hooks, caches the programs evict), applied while the duty is 1 too.
    hidden: f64,
    at: Mark,
    cycles: u32,
    duty_low: f64,
    duty_high: f64,
}

/// The on/off measurements of the cycles, cycle by cycle: one cycle's is noisy (a few
/// hundred requests in its shorter window), so they count only once the cycles together show
/// a cost above zero beyond their spread, and then as measured. Taking each as it came, its
/// noise alone raised the cost of a 1 ms request from 1 % to 5 %. Taking only the interval's
/// low end, as before, left nginx's measured 1.4-1.7x the accounted cost out of most 10 s
/// attaches (the low end clears the accounted cost only once many cycles narrowed it): probed
/// 4.0 % of the time at a 1 % budget; as measured, 2.9-3.0 %.
#[derive(Debug, Clone, PartialEq, Default)]
struct Turns {
    n: f64,
    sum: f64,
    squares: f64,
    accounted: f64,
}

/// Standard errors the on/off sum is taken down (or up) by for its interval: about 95 %.
const SPREAD: f64 = 2.0;

impl Turns {
    fn add(&mut self, measured_ns: f64, accounted_ns: f64) {
        self.n += 1.0;
        self.sum += measured_ns;
        self.squares += measured_ns * measured_ns;
        self.accounted += accounted_ns;
    }

    /// The sum over the cycles, and its interval, once three cycles measured it.
    fn interval(&self) -> Option<(f64, f64, f64)> {
        (self.n >= 3.0).then(|| {
            let var = ((self.squares - self.sum * self.sum / self.n) / (self.n - 1.0)).max(0.0);
            let half = SPREAD * (var * self.n).sqrt();
            (self.sum, (self.sum - half).max(0.0), self.sum + half)
        })
    }

    fn hidden(&self) -> f64 {
        match self.interval() {
            Some((sum, low, _)) if self.accounted > 0.0 && low > 0.0 => {
                (sum / self.accounted).max(1.0)
            }
            _ => 1.0,
        }
    }
}

/// The weight of the cycles before the last in the figures the duty is set from: the duty
/// follows a change of traffic within a few cycles without swinging on one noisy cycle.
const KEEP: f64 = 0.7;
/// How many times wider than the last the next duty may be (see [`Keeper::widened`]): from
/// a budget of 3 % to full time in three cycles.
const GROWTH: f64 = 4.0;
/// How many times the estimated cost full time must keep within the budget to be taken at
/// once, however narrow the last duty (see [`Keeper::widened`]).
const FULL_TIME_MARGIN: f64 = 2.0;

impl Keeper {
    /// Starts at a duty equal to the budget: right for probes that double the server's CPU,
    /// and the first cycle corrects it.
    pub fn new(budget: f64, trap: Trap) -> Keeper {
        let duty = budget.clamp(MIN_DUTY, 1.0);
        Keeper {
            budget,
            trap,
            duty,
            recent: Mark::default(),
            turns: Turns::default(),
            hidden: 1.0,
            at: Mark::default(),
            cycles: 0,
            duty_low: duty,
            duty_high: duty,
        }
    }

    pub fn duty(&self) -> f64 {
        self.duty
    }

    /// The budget as it stands at the last cycle's end, None before the first.
    pub fn gauges(&self) -> Option<BudgetGauges> {
        let at = self.at;
        let cost = at.cost_ns * self.hidden;
        (self.cycles > 0 && at.elapsed_s > 0.0).then(|| BudgetGauges {
            budget: self.budget,
            duty: self.duty,
            probed: at.probed_s / at.elapsed_s,
            cost: cost / (at.cpu_ns() - cost).max(1.0),
        })
    }

    /// Ends a cycle at `now` and sets the next one's duty from the recent cycles' probed
    /// windows: their cost (the accounted cost, raised to the on/off measurement where it is
    /// higher) against the server's CPU in them without it.
    pub fn end_cycle(&mut self, now: Mark) {
        let cycle = now.minus(&self.at);
        self.at = now;
        self.cycles += 1;
        self.recent = self.recent.scaled(KEEP).plus(&cycle);
        let r = &self.recent;
        if r.probed_s <= 0.0 || r.elapsed_s <= 0.0 {
            return;
        }
        if let Some(measured) = cycle.measured_ns() {
            self.turns.add(measured, cycle.cost_ns);
            self.hidden = self.turns.hidden();
        }
        // The server's CPU of the probed windows, as the cost is theirs: a probed window that
        // began before the traffic did saw little of both, where against the whole cycle's
        // CPU its cost read a quarter of its share (nginx under `Connection: close`).
        let cost = r.cost_ns * self.hidden;
        let server = (r.probed_cpu_ns - cost).max(0.0);
        let aim = self.budget * self.correction();
        self.duty = self.widened(cost / r.probed_s, server / r.probed_s, aim);
        self.duty_low = self.duty_low.min(self.duty);
        self.duty_high = self.duty_high.max(self.duty);
    }

    /// [`next_duty`], at most [`GROWTH`] times the last duty unless full time keeps the
    /// budget at [`FULL_TIME_MARGIN`] times the estimated cost: the first cycles' estimate can
    /// be below the truth (a window that began before the traffic did, with no cost at all),
    /// and a cycle at a duty widened on it costs its overshoot all at once.
    fn widened(&self, cost_per_probed_s: f64, server_per_s: f64, aim: f64) -> f64 {
        let margin = cost_per_probed_s * FULL_TIME_MARGIN;
        if cost_per_probed_s > 0.0 && next_duty(margin, server_per_s, aim) >= 1.0 {
            return 1.0;
        }
        next_duty(cost_per_probed_s, server_per_s, aim).min(self.duty * GROWTH)
    }

    /// What to aim at below the budget so that the whole window keeps it: a noisy estimate of
    /// the cost overshoots on average (the duty goes as its inverse), and the pauses cost
    /// something too. The budget over the cost share so far, within [0.5, 1]: never above,
    /// since spending what the first cycles left unspent would concentrate the probes' cost
    /// in a few cycles (a 10 s attach of nginx ended at 3.7 % for a 3 % budget that way).
    fn correction(&self) -> f64 {
        let so_far = self.gauges().map_or(0.0, |g| g.cost);
        if so_far > 0.0 {
            (self.budget / so_far).clamp(0.5, 1.0)
        } else {
            1.0
        }
    }

    /// The record's figures: `cost` the probes' own figures over the phase, `phase` the
    /// windows' totals over it.
    pub fn figures(&self, cost: &ProbeCost, phase: &Mark) -> ProbeBudget {
        let split = Cost::of(cost, self.trap.ns);
        let server_cpu_ns = phase.cpu_ns();
        let accounted = |trap_ns: f64| Cost::of(cost, trap_ns).total_ns() as f64;
        let measured = self.turns.interval();
        // Whole ns, as the record keeps it: its share is then the record's cost over its CPU
        // exactly (a 22 ms window moves by 2e-8 for half a ns).
        let estimate = (accounted(self.trap.ns) * self.hidden).round();
        let bounds = [
            accounted(self.trap.low),
            accounted(self.trap.high),
            estimate,
        ]
        .into_iter()
        .chain(measured.map(|(_, _, high)| high));
        let (low, high) = bounds.fold((f64::MAX, 0.0_f64), |(l, h), v| (l.min(v), h.max(v)));
        let share = |cost_ns: f64| cost_ns / (server_cpu_ns - cost_ns).max(1.0);
        let cost_share = share(estimate);
        // Probed the whole window at the same rate, then at the least duty.
        let floor_share = if phase.probed_s > 0.0 {
            cost_share * phase.elapsed_s / phase.probed_s * MIN_DUTY
        } else {
            0.0
        };
        ProbeBudget {
            budget: self.budget,
            min_duty: MIN_DUTY,
            cycles: self.cycles,
            duty_low: self.duty_low,
            duty_high: self.duty_high,
            trap_ns: self.trap.ns,
            trap_interval_ns: [self.trap.low, self.trap.high],
            trap_source: self.trap.source(),
            syscalls: split.syscalls,
            program_ns: split.program_ns,
            syscall_trap_ns: split.trap_ns,
            uretprobe_ns: split.uretprobe_ns,
            accounted_ns: split.total_ns(),
            probed_bytes: phase.probed_bytes as u64,
            unprobed_bytes: phase.unprobed_bytes as u64,
            measured_ns: measured.map(|(m, _, _)| m.round() as u64),
            measured_interval_ns: measured.map(|(_, l, h)| [l.round() as u64, h.round() as u64]),
            cost_ns: estimate.round() as u64,
            server_cpu_ns: server_cpu_ns.round() as u64,
            cost_share,
            cost_share_interval: [share(low), share(high)],
            floor_share,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_record::ProgramCost;

    /// nginx under wrk: full-time probes cost 40 % of its CPU, so a 3 % budget allows 7.5 %
    /// of the time.
    #[test]
    fn cheap_requests_get_a_narrow_duty() {
        let duty = next_duty(400e6, 1e9, 0.03);
        assert!((duty - 0.075).abs() < 1e-12, "{duty}");
    }

    /// A server at 1 ms a request makes few syscalls per CPU second: 2 % full time is within
    /// 3 %, so it is probed all the time.
    #[test]
    fn costly_requests_are_probed_full_time() {
        assert_eq!(next_duty(20e6, 1e9, 0.03), 1.0);
    }

    /// Probes that cost 5x the server's CPU: even the least duty costs 5 %, over a 3 % budget.
    #[test]
    fn the_duty_never_goes_below_the_least() {
        assert_eq!(next_duty(5e9, 1e9, 0.03), MIN_DUTY);
        assert_eq!(next_duty(1e6, 0.0, 0.03), MIN_DUTY);
        assert_eq!(next_duty(0.0, 1e9, 0.03), 1.0);
    }

    #[test]
    fn the_trap_is_the_median_round_and_the_range_its_interval() {
        let trap = Trap::of(vec![310.0, 290.0, -20.0, 305.0, 300.0, 280.0, 400.0]);
        assert_eq!(
            trap,
            Trap {
                ns: 300.0,
                low: 0.0,
                high: 400.0
            }
        );
    }

    fn probe_cost(syscalls: u64, tree_ns: u64, uretprobe_ns: u64) -> ProbeCost {
        ProbeCost {
            tree_ns,
            uretprobe_ns,
            programs: vec![ProgramCost {
                name: "sys_enter".into(),
                tree_runs: syscalls,
                ..ProgramCost::default()
            }],
            ..ProbeCost::default()
        }
    }

    fn trap() -> Trap {
        Trap {
            ns: 300.0,
            low: 250.0,
            high: 350.0,
        }
    }

    /// A cycle of 1 s with 0.1 s probed: `cost_ms` accounted, the tree's CPU in each kind of
    /// window, and 1 MB received per probed 0.1 s, 9 MB in the rest (the same work rate).
    fn cycle(cost_ms: f64, probed_cpu_ms: f64, unprobed_cpu_ms: f64) -> Mark {
        Mark {
            cost_ns: cost_ms * 1e6,
            probed_cpu_ns: probed_cpu_ms * 1e6,
            unprobed_cpu_ns: unprobed_cpu_ms * 1e6,
            probed_bytes: 1e6,
            unprobed_bytes: 9e6,
            probed_s: 0.1,
            elapsed_s: 1.0,
        }
    }

    /// The accounted cost per probed second against the server's CPU per second without it
    /// sets the duty; older cycles weigh 0.7 of the next.
    #[test]
    fn each_cycle_sets_the_duty_from_the_recent_cycles() {
        let mut keeper = Keeper::new(0.03, trap());
        assert_eq!(keeper.duty(), 0.03);
        // 20 ms of cost in 0.1 s probed; 70 + 450 ms of server CPU: the unprobed 0.9 s cost
        // 50 ms per 1 MB, the probed 0.1 s 70 ms, 20 ms more, as accounted. 200 ms/s of cost
        // against 500 ms/s of server: 0.03 * 0.5 / 0.2 = 7.5 %, times 3/4 since the window
        // so far cost 4 % (20 ms over 500).
        let first = cycle(20.0, 70.0, 450.0);
        keeper.end_cycle(first);
        assert!(
            (keeper.duty() - 0.075 * 0.75).abs() < 1e-9,
            "{}",
            keeper.duty()
        );
        // The next cycle's figures are added to 0.7 of the first's. The window so far cost
        // 2.1 % (30 ms over 1400): below the budget, the aim stays the budget.
        let second = cycle(10.0, 100.0, 810.0);
        keeper.end_cycle(first.plus(&second));
        let recent = first.scaled(0.7).plus(&second);
        let cost = recent.cost_ns;
        let want = 0.03 * ((recent.cpu_ns() - cost) / 1.7) / (cost / 0.17);
        assert!(
            (keeper.duty() - want).abs() < 1e-9,
            "{} {want}",
            keeper.duty()
        );
        assert_eq!(keeper.gauges().map(|g| g.probed), Some(0.1));
    }

    /// A first cycle that cost 1 ms in 0.1 s probed against 500 ms of server CPU asks for a
    /// duty of 1.5: the duty widens fourfold, to 12 %, since at twice that cost full time
    /// would not keep the budget. At a tenth of it, it would: full time at once.
    #[test]
    fn the_duty_widens_at_most_fourfold_unless_full_time_keeps_the_budget() {
        let mut keeper = Keeper::new(0.03, trap());
        keeper.end_cycle(cycle(1.0, 51.0, 450.0));
        assert!((keeper.duty() - 0.12).abs() < 1e-12, "{}", keeper.duty());
        let mut keeper = Keeper::new(0.03, trap());
        keeper.end_cycle(cycle(0.1, 50.1, 450.0));
        assert_eq!(keeper.duty(), 1.0);
        // A probed window without a syscall (the traffic had not begun) is no evidence of a
        // cheap server.
        let mut keeper = Keeper::new(0.03, trap());
        keeper.end_cycle(cycle(0.0, 50.0, 450.0));
        assert!((keeper.duty() - 0.12).abs() < 1e-12, "{}", keeper.duty());
    }

    /// The probed 0.1 s began before the traffic did: 5 ms of cost against 10 ms of the
    /// server's own CPU in it, while the unprobed rest had 450 ms. The duty is set from the
    /// probed window's ratio (0.1 x 10 / 5 = 20 %), not from the whole cycle's CPU, which
    /// would have read the probes at a fifth of their share and widened the duty fourfold.
    #[test]
    fn the_cost_is_weighed_against_the_cpu_of_its_own_windows() {
        let mut keeper = Keeper::new(0.1, trap());
        keeper.end_cycle(Mark {
            probed_bytes: 0.1e6,
            ..cycle(5.0, 15.0, 450.0)
        });
        assert!((keeper.duty() - 0.2).abs() < 1e-12, "{}", keeper.duty());
    }

    /// On/off turns show twice the accounted cost three cycles running (the unprobed windows'
    /// CPU per byte says each probed 0.1 s should have cost 50 ms, it cost 90): the duty
    /// halves, and the cost stays doubled at a duty of 1, where no unprobed window measures
    /// it.
    #[test]
    fn a_cost_measured_beyond_the_accounted_one_narrows_the_duty() {
        let mut keeper = Keeper::new(0.03, trap());
        let one = cycle(20.0, 90.0, 450.0);
        let mut at = Mark::default();
        for _ in 0..3 {
            at = at.plus(&one);
            keeper.end_cycle(at);
        }
        assert_eq!(keeper.hidden, 2.0);
        // 400 ms of cost per probed second against 500 ms/s of server: 3.75 %, halved (at
        // most) since the window so far cost 8 %.
        assert!(
            (keeper.duty() - 0.0375 * 0.5).abs() < 1e-9,
            "{}",
            keeper.duty()
        );
        let full = Mark {
            unprobed_bytes: 0.0,
            unprobed_cpu_ns: 0.0,
            probed_s: 1.0,
            ..cycle(2.0, 500.0, 0.0)
        };
        keeper.end_cycle(at.plus(&full));
        assert_eq!(keeper.hidden, 2.0);
    }

    /// A keeper at a 3 % budget after cycles of 20 ms accounted cost, 450 ms unprobed CPU and
    /// these probed CPUs (ms; 50 of each is what its bytes cost unprobed, as in [`cycle`]).
    fn turned(probed_cpus: &[f64]) -> Keeper {
        let mut keeper = Keeper::new(0.03, trap());
        let mut at = Mark::default();
        for &probed_cpu in probed_cpus {
            at = at.plus(&cycle(20.0, probed_cpu, 450.0));
            keeper.end_cycle(at);
        }
        keeper
    }

    /// Turns that measure 60, 0 and 60 ms (40 on average, as much as they are apart) against
    /// 20 ms accounted each: their interval reaches zero, and the accounted cost stands.
    #[test]
    fn noisy_turns_leave_the_accounted_cost() {
        let keeper = turned(&[110.0, 50.0, 110.0]);
        assert_eq!(keeper.hidden, 1.0);
        let (sum, low, high) = keeper.turns.interval().unwrap();
        assert_eq!(sum, 120e6);
        assert!(low < 60e6 && high > 180e6, "{low} {high}");
    }

    /// Turns that measure 60, 20 and 40 ms against 20 ms accounted each: their interval's low
    /// end (51 ms) is above zero though below the 60 ms accounted, so they count as measured,
    /// twice the accounted cost.
    #[test]
    fn turns_beyond_their_noise_count_as_measured() {
        let keeper = turned(&[110.0, 70.0, 90.0]);
        let (sum, low, _) = keeper.turns.interval().unwrap();
        assert!(sum == 120e6 && low > 0.0 && low < 60e6, "{sum} {low}");
        assert_eq!(keeper.hidden, 2.0);
    }

    /// The record's parts add up to the accounted cost, and the interval spans the trap's.
    #[test]
    fn the_figures_add_up_and_the_interval_spans_the_trap() {
        let keeper = Keeper::new(0.03, trap());
        let cost = probe_cost(100_000, 10_000_000, 1_000_000);
        let phase = Mark {
            probed_s: 0.2,
            elapsed_s: 2.0,
            ..cycle(41.0, 141.0, 900.0)
        };
        let b = keeper.figures(&cost, &phase);
        assert_eq!(
            (b.syscalls, b.program_ns, b.syscall_trap_ns, b.uretprobe_ns),
            (100_000, 10_000_000, 30_000_000, 1_000_000)
        );
        assert_eq!(b.accounted_ns, 41_000_000);
        // No cycle ended: nothing measured on/off.
        assert_eq!((b.measured_ns, b.measured_interval_ns), (None, None));
        assert_eq!((b.probed_bytes, b.unprobed_bytes), (1_000_000, 9_000_000));
        assert_eq!((b.cost_ns, b.server_cpu_ns), (41_000_000, 1_041_000_000));
        assert_eq!(b.cost_share, 0.041);
        let [low, high] = b.cost_share_interval;
        assert!((low - 36.0 / 1005.0).abs() < 1e-12 && (high - 46.0 / 995.0).abs() < 1e-12);
        assert!((b.floor_share - 0.0041).abs() < 1e-12);
        assert_eq!(b.over_by(), None);
    }

    /// A cost raised by the on/off turns is a fraction of a ns off whole: the record's share
    /// is its cost over its server CPU as the record keeps them, in whole ns.
    #[test]
    fn the_share_is_of_the_cost_the_record_keeps() {
        let mut keeper = Keeper::new(0.03, trap());
        keeper.hidden = 1.177;
        let phase = Mark {
            probed_s: 0.2,
            elapsed_s: 2.0,
            ..cycle(0.778_95, 7.0, 15.8)
        };
        let b = keeper.figures(&probe_cost(1012, 624_048, 0), &phase);
        assert_eq!(b.cost_ns, (b.accounted_ns as f64 * 1.177).round() as u64);
        let share = b.cost_ns as f64 / (b.server_cpu_ns - b.cost_ns) as f64;
        assert_eq!(b.cost_share, share);
    }

    /// Probes costing 2x the server's CPU full time: at 1 % they cost 2 %, over a 1 % budget
    /// by one point.
    #[test]
    fn a_budget_that_cannot_hold_says_by_how_much() {
        let keeper = Keeper::new(
            0.01,
            Trap {
                ns: 0.0,
                low: 0.0,
                high: 0.0,
            },
        );
        let phase = Mark {
            probed_s: 0.01,
            unprobed_bytes: 0.0,
            ..cycle(20.0, 30.0, 990.0)
        };
        let b = keeper.figures(&probe_cost(0, 20_000_000, 0), &phase);
        assert_eq!(b.measured_ns, None);
        assert!((b.cost_share - 0.02).abs() < 1e-12);
        assert!((b.floor_share - 0.02).abs() < 1e-12);
        assert!((b.over_by().unwrap() - 0.01).abs() < 1e-12);
    }
}
