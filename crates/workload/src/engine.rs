//! Runs one phase: `concurrency` connection slots on a current-thread runtime on the calling
//! thread, fed from one request source, until the phase's bound is reached, `stop` is set, or
//! the server fails too often or stays silent (then the phase gives up).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqcost_record::ClientStats;
use tokio::sync::Notify;
use tokio::task::LocalSet;
use tokio::time::{sleep_until, Instant};

use crate::client::{Client, ClientConfig};
use crate::source::{Request, Source};
use crate::tally::{ErrorKind, Tally};

/// How often `stop` is checked.
const TICK: Duration = Duration::from_millis(100);
/// A phase gives up on a server after this many failed requests in a row: a dead server
/// fails fast, and there is nothing to measure in failures.
const GIVE_UP_FAILURES: u64 = 10;
/// A phase also gives up when the server has sent not one byte this long after the phase
/// started: a server that accepts and never answers would otherwise hold each connection for
/// the whole request timeout.
const GIVE_UP_SILENCE: Duration = Duration::from_secs(10);

pub struct PhaseRun {
    /// Client groups with their share of the requests (adding up to 1).
    pub clients: Vec<(f64, ClientConfig)>,
    pub source: Source,
    pub concurrency: u32,
    pub limit: Option<u64>,
    pub duration: Option<Duration>,
    /// Open-loop rate in requests per second; closed loop when None.
    pub rate: Option<f64>,
    pub request_timeout: Duration,
}

struct Shared {
    groups: Vec<(f64, Rc<ClientConfig>)>,
    /// Requests given to each group so far.
    assigned: RefCell<Vec<u64>>,
    source: RefCell<Source>,
    limit: Option<u64>,
    deadline: Option<Instant>,
    start: Instant,
    rate: Option<f64>,
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
    /// Claims the next request slot. In open loop, returns the time it was scheduled for:
    /// latency counts from then, so a server that falls behind shows its queueing delay
    /// (no coordinated omission).
    fn ticket(&self) -> Option<Option<Instant>> {
        let i = self.next_ticket.get();
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
        self.next_ticket.set(i + 1);
        Some(intended)
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
    fn settle(&self, ok: bool) {
        self.in_flight.set(self.in_flight.get() - 1);
        self.failures_in_row.set(if ok {
            0
        } else {
            self.failures_in_row.get() + 1
        });
    }

    /// The group the next request goes to: the one furthest behind its share, so that every
    /// prefix of the phase holds the mix's proportions (no randomness to make a test flaky).
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
    while let Some(intended) = sh.ticket() {
        if !sh.source.borrow_mut().next(&mut req) {
            break;
        }
        let client = &mut clients[sh.next_group()];
        if let Some(t) = intended {
            if t > Instant::now() {
                sleep_until(t).await;
            }
        }
        let began = intended.unwrap_or_else(Instant::now);
        sh.in_flight.set(sh.in_flight.get() + 1);
        let result = tokio::time::timeout(sh.request_timeout, client.exchange(&req)).await;
        sh.settle(matches!(result, Ok(Ok(()))));
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
            Ok(Ok(())) => tally.ok(end - began),
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

/// Runs the phase to its end; never panics on network trouble, returns what was measured.
pub fn run(phase: PhaseRun, stop: &AtomicBool, progress: &(dyn Fn(u64) + Sync)) -> ClientStats {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => {
            let mut tally = Tally::new();
            tally.error(ErrorKind::Other);
            return tally.into_stats(Duration::ZERO, Default::default());
        }
    };
    let local = LocalSet::new();
    let (sh, stopped_at) = local.block_on(&runtime, async {
        let start = Instant::now();
        let sh = Rc::new(Shared {
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
    let end = stopped_at.unwrap_or_else(|| sh.last_done.get());
    let elapsed = end.saturating_duration_since(sh.start);
    let tally = sh.tally.replace(Tally::new());
    progress(tally.done());
    let skipped = sh.source.borrow().skipped();
    tally.into_stats(elapsed, skipped)
}
