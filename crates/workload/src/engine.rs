//! Runs one phase on one or more load threads, each with its own current-thread runtime,
//! connection slots and request source, until the phase's bound is reached, `stop` is set, or
//! the server fails too often or stays silent (then the phase gives up).
//!
//! The phase's requests are numbered as if one thread sent them all; thread `t` of `T` takes
//! requests `t, t + T, t + 2T, ...`: the same request from the file, the same client group and
//! (open loop) the same scheduled time as in a one-thread run, so counts do not depend on `T`.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use reqcost_record::{ClientStats, CpuSplit, CpuTimes};
use tokio::sync::Notify;
use tokio::task::LocalSet;
use tokio::time::{sleep_until, Instant};

use crate::client::{Client, ClientConfig};
use crate::source::{Request, Source};
use crate::tally::{ErrorKind, Tally};
use crate::ReplayModel;

/// How often `stop` is checked.
const TICK: Duration = Duration::from_millis(100);
/// A phase gives up on a server after this many failed requests in a row: a dead server
/// fails fast, and there is nothing to measure in failures.
const GIVE_UP_FAILURES: u64 = 10;
/// A phase also gives up when the server has sent not one byte this long after the phase
/// started: a server that accepts and never answers would otherwise hold each connection for
/// the whole request timeout.
const GIVE_UP_SILENCE: Duration = Duration::from_secs(10);

/// One load thread's part of a phase.
pub struct PhaseRun {
    /// Client groups with their share of the requests (adding up to 1).
    pub clients: Vec<(f64, ClientConfig)>,
    pub source: Source,
    /// This thread's connection slots.
    pub concurrency: u32,
    /// Requests in the whole phase, over all threads.
    pub limit: Option<u64>,
    pub duration: Option<Duration>,
    /// Open-loop rate of the whole phase in requests per second; closed loop when None.
    pub rate: Option<f64>,
    /// Each request read as its log line shows (`--replay-speeds`).
    pub replay: Option<ReplayModel>,
    /// Requests sent at their logged times compressed by this factor.
    pub timing: Option<f64>,
    pub request_timeout: Duration,
}

/// Which of the phase's requests one load thread takes: every `stride`-th, from `offset`.
#[derive(Clone, Copy)]
struct Deal {
    offset: u64,
    stride: u64,
}

impl Deal {
    /// The phase-wide number of this thread's `k`-th request.
    fn global(self, k: u64) -> u64 {
        self.offset + k * self.stride
    }

    /// Requests of the other threads that come before this thread's `k`-th (after its
    /// `k-1`-th) in the phase's sequence.
    fn skip_before(self, k: u64) -> u64 {
        if k == 0 {
            self.offset
        } else {
            self.stride - 1
        }
    }
}

/// A request slot claimed by a connection slot.
struct Ticket {
    /// This thread's request number.
    k: u64,
    /// When the request is scheduled (open loop).
    intended: Option<Instant>,
}

struct Shared {
    deal: Deal,
    groups: Vec<(f64, Rc<ClientConfig>)>,
    /// Requests given to each group so far.
    assigned: RefCell<Vec<u64>>,
    source: RefCell<Source>,
    limit: Option<u64>,
    deadline: Option<Instant>,
    start: Instant,
    rate: Option<f64>,
    replay: Option<ReplayModel>,
    timing: Option<f64>,
    request_timeout: Duration,
    next_ticket: Cell<u64>,
    tally: RefCell<Tally>,
    active: Cell<u32>,
    all_done: Notify,
    /// A request finished: the phase's loop reports progress, so that whoever counts
    /// requests over a stretch of the phase (probed and unprobed windows) gets exact counts.
    finished: Notify,
    last_done: Cell<Instant>,
    failures_in_row: Cell<u64>,
    /// Requests sent and not finished.
    in_flight: Cell<u32>,
    /// Bytes received so far in the phase, by all slots.
    heard: Rc<Cell<u64>>,
}

impl Shared {
    /// Claims the next request slot. In open loop, it carries the time it was scheduled for:
    /// latency counts from then, so a server that falls behind shows its queueing delay
    /// (no coordinated omission).
    fn ticket(&self) -> Option<Ticket> {
        let k = self.next_ticket.get();
        let i = self.deal.global(k);
        if self.limit.is_some_and(|l| i >= l) || self.failures_in_row.get() >= GIVE_UP_FAILURES {
            return None;
        }
        let intended = self
            .rate
            .map(|r| self.start + Duration::from_secs_f64(i as f64 / r));
        let at = intended.unwrap_or_else(Instant::now);
        if self.deadline.is_some_and(|d| at >= d) {
            return None;
        }
        self.next_ticket.set(k + 1);
        Some(Ticket { k, intended })
    }

    /// Fills `req` with this thread's `k`-th request, passing over the other threads' ones.
    fn request(&self, k: u64, req: &mut Request) -> bool {
        let mut source = self.source.borrow_mut();
        (0..=self.deal.skip_before(k)).all(|_| source.next(req))
    }

    /// Whether the server has said nothing at all for [`GIVE_UP_SILENCE`]; the requests
    /// still waiting for it then count as timeouts.
    fn give_up_on_silence(&self) -> bool {
        let silent = self.heard.get() == 0 && self.start.elapsed() >= GIVE_UP_SILENCE;
        if silent {
            let mut tally = self.tally.borrow_mut();
            for _ in 0..self.in_flight.get() {
                tally.error(ErrorKind::Timeout);
            }
        }
        silent
    }

    /// Counts one finished request's outcome towards giving up.
    fn count_outcome(&self, ok: bool) {
        self.in_flight.set(self.in_flight.get() - 1);
        self.failures_in_row.set(if ok {
            0
        } else {
            self.failures_in_row.get() + 1
        });
    }

    /// The group this thread's `k`-th request goes to: the group the phase-wide sequence
    /// gives that request.
    fn group(&self, k: u64) -> usize {
        let mut g = 0;
        for _ in 0..=self.deal.skip_before(k) {
            g = self.next_group();
        }
        g
    }

    /// The group the next request of the phase goes to: the one furthest behind its share, so
    /// that every prefix of the phase holds the mix's proportions (no randomness to make a test
    /// flaky).
    fn next_group(&self) -> usize {
        let mut assigned = self.assigned.borrow_mut();
        let next: u64 = assigned.iter().sum::<u64>() + 1;
        let behind = |g: usize| self.groups[g].0 * next as f64 - assigned[g] as f64;
        let g = (0..self.groups.len())
            .max_by(|&a, &b| behind(a).total_cmp(&behind(b)).then(b.cmp(&a)))
            .unwrap_or(0);
        assigned[g] += 1;
        g
    }
}

async fn slot(sh: Rc<Shared>) {
    let mut clients: Vec<Client> = sh
        .groups
        .iter()
        .map(|(_, cfg)| Client::new(cfg.clone(), sh.heard.clone()))
        .collect();
    let mut req = Request::new();
    while let Some(Ticket { k, intended }) = sh.ticket() {
        if !sh.request(k, &mut req) {
            break;
        }
        // At the logged time, compressed: latency counts from then, as in any open loop.
        let intended = match (sh.timing, req.at) {
            (Some(factor), Some(at)) => Some(sh.start + Duration::from_secs_f64(at / factor)),
            _ => intended,
        };
        let client = &mut clients[sh.group(k)];
        if let Some(replay) = &sh.replay {
            let (bandwidth, rcvbuf, source) = replay.model(&req);
            client.set_model(bandwidth, rcvbuf, source);
        }
        if let Some(t) = intended {
            if t > Instant::now() {
                sleep_until(t).await;
            }
        }
        let began = intended.unwrap_or_else(Instant::now);
        sh.in_flight.set(sh.in_flight.get() + 1);
        let result = tokio::time::timeout(sh.request_timeout, client.exchange(&req)).await;
        sh.count_outcome(matches!(result, Ok(Ok(()))));
        let end = Instant::now();
        let mut tally = sh.tally.borrow_mut();
        tally.bytes_sent += std::mem::take(&mut client.sent);
        tally.bytes_received += std::mem::take(&mut client.received);
        tally.connections += std::mem::take(&mut client.connects);
        if client.uses_tls() {
            *tally.tls_resumed.get_or_insert(0) += std::mem::take(&mut client.resumed);
        }
        if let Some(code) = client.status.take() {
            tally.status(code);
        }
        match result {
            Ok(Ok(())) => {
                tally.ok(end - began);
                if client.is_quic() {
                    tally.quic_path(&req.target);
                }
            }
            Ok(Err(kind)) => tally.error(kind),
            Err(_) => {
                client.reset();
                tally.error(ErrorKind::Timeout);
            }
        }
        sh.last_done.set(end);
        sh.finished.notify_one();
    }
    sh.active.set(sh.active.get() - 1);
    if sh.active.get() == 0 {
        sh.all_done.notify_one();
    }
}

/// What one load thread measured.
struct ThreadRun {
    tally: Tally,
    /// When its last request finished, or when it stopped.
    end: Instant,
    skipped: BTreeMap<String, u64>,
    /// Its own CPU, user and system, in ns, when the kernel told it.
    cpu: Option<(u64, u64)>,
}

/// The calling thread's CPU so far, user and system, in ns.
fn thread_cpu() -> Option<(u64, u64)> {
    // SAFETY: getrusage fills the struct it is given; an all-zero rusage is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
        return None;
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    Some((ns(usage.ru_utime), ns(usage.ru_stime)))
}

/// Runs the phase to its end, one load thread per part, and merges what they measured; never
/// panics on network trouble.
pub fn run(
    parts: Vec<PhaseRun>,
    stop: &AtomicBool,
    progress: &(dyn Fn(u64) + Sync),
) -> ClientStats {
    let start = Instant::now();
    let stride = parts.len() as u64;
    let done: Vec<AtomicU64> = parts.iter().map(|_| AtomicU64::new(0)).collect();
    let report = |t: usize, n: u64| {
        done[t].store(n, Ordering::Relaxed);
        progress(done.iter().map(|d| d.load(Ordering::Relaxed)).sum());
    };
    let runs: Vec<ThreadRun> = std::thread::scope(|s| {
        let threads: Vec<_> = parts
            .into_iter()
            .enumerate()
            .map(|(t, part)| {
                let report = &report;
                let deal = Deal {
                    offset: t as u64,
                    stride,
                };
                s.spawn(move || run_thread(part, deal, start, stop, &|n| report(t, n)))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    merge(runs, start)
}

/// One tally of the whole phase, timed from its start to the last thread's end.
fn merge(runs: Vec<ThreadRun>, start: Instant) -> ClientStats {
    let mut tally = Tally::new();
    let mut end = start;
    let mut skipped: BTreeMap<String, u64> = BTreeMap::new();
    let cpu = runs
        .iter()
        .map(|r| r.cpu)
        .collect::<Option<Vec<_>>>()
        .map(|cpus| {
            cpus.into_iter()
                .fold((0, 0), |(u, s), (tu, ts)| (u + tu, s + ts))
        });
    for run in runs {
        tally.merge(run.tally);
        end = end.max(run.end);
        // Every thread reads the same input from its start, so the one that read furthest
        // passed over every line the others did: its counts are the phase's.
        for (reason, n) in run.skipped {
            let count = skipped.entry(reason).or_default();
            *count = (*count).max(n);
        }
    }
    ClientStats {
        load_cpu: cpu.map(|(user_ns, system_ns)| CpuTimes {
            total_ns: user_ns + system_ns,
            user_ns,
            system_ns,
            source: "getrusage(RUSAGE_THREAD) of each load thread at its end".into(),
            split: CpuSplit::Reported,
        }),
        ..tally.into_stats(end.saturating_duration_since(start), skipped)
    }
}

/// Runs one thread's part of the phase on a runtime of its own.
fn run_thread(
    phase: PhaseRun,
    deal: Deal,
    start: Instant,
    stop: &AtomicBool,
    progress: &dyn Fn(u64),
) -> ThreadRun {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => {
            let mut tally = Tally::new();
            tally.error(ErrorKind::Other);
            return ThreadRun {
                tally,
                end: start,
                skipped: BTreeMap::new(),
                cpu: thread_cpu(),
            };
        }
    };
    let local = LocalSet::new();
    let (sh, stopped_at) = local.block_on(&runtime, async {
        let sh = Rc::new(Shared {
            deal,
            assigned: RefCell::new(vec![0; phase.clients.len()]),
            groups: phase
                .clients
                .into_iter()
                .map(|(share, cfg)| (share, Rc::new(cfg)))
                .collect(),
            source: RefCell::new(phase.source),
            limit: phase.limit,
            deadline: phase.duration.map(|d| start + d),
            start,
            rate: phase.rate,
            replay: phase.replay,
            timing: phase.timing,
            request_timeout: phase.request_timeout,
            next_ticket: Cell::new(0),
            tally: RefCell::new(Tally::new()),
            active: Cell::new(phase.concurrency),
            all_done: Notify::new(),
            finished: Notify::new(),
            last_done: Cell::new(start),
            failures_in_row: Cell::new(0),
            in_flight: Cell::new(0),
            heard: Rc::new(Cell::new(0)),
        });
        for _ in 0..phase.concurrency {
            tokio::task::spawn_local(slot(sh.clone()));
        }
        let mut tick = tokio::time::interval_at(start + TICK, TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let stopped_at = loop {
            tokio::select! {
                _ = sh.all_done.notified() => break None,
                _ = sh.finished.notified() => progress(sh.tally.borrow().done()),
                _ = tick.tick() => {
                    if stop.load(Ordering::Relaxed) || sh.give_up_on_silence() {
                        break Some(Instant::now());
                    }
                }
            }
        };
        (sh, stopped_at)
    });
    // Dropping the set cancels requests still in flight after a stop.
    drop(local);
    let tally = sh.tally.replace(Tally::new());
    progress(tally.done());
    let skipped = sh.source.borrow().skipped();
    ThreadRun {
        tally,
        end: stopped_at.unwrap_or_else(|| sh.last_done.get()),
        skipped,
        cpu: thread_cpu(),
    }
}
