//! Sampled on-CPU call chains of a process tree: perf_event_open, unwinding, symbolization.
//!
//! One system-wide sampling event per CPU; a background thread drains their ring buffers,
//! follows the tree through fork, exec and mmap records (so threads, children and libraries
//! loaded later are covered), keeps the tree's samples, unwinds their user stacks on the fly
//! (DWARF CFI via framehop, frame pointers where no unwind table covers the code) and keeps only
//! distinct chains with counts. `finish` symbolizes them (blazesym) into a [`Profile`].

mod arch;
mod elf;
mod interp;
mod perf;
mod procfs;
mod symbolize;
mod tracker;

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use reqcost_record::Profile;

pub use interp::lua::{LuaCall, LuaStack};
use perf::{Events, Record};
use tracker::{ClientFork, Tracker};

/// Default sampling rate: a prime, so sampling does not beat with periodic work.
pub const DEFAULT_FREQ_HZ: u64 = 499;
/// `attach`'s default rate, a prime too: production profilers sample at 19-100 Hz (Parca 19,
/// the OpenTelemetry profiler 20, Pyroscope 97). At 499 Hz the sampler raised nginx's CPU per
/// request at 13 µs a request by about 17 % under wrk on the same machine, at 97 Hz by about
/// 4 %, beyond the probes' 3 % budget, whose on/off turns cannot see it: it samples in every
/// window (bench/RESULTS.md, "The sampler's rate").
pub const ATTACH_FREQ_HZ: u64 = 47;

/// How to sample call chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleOptions {
    /// Samples per second of each thread's CPU time.
    pub freq_hz: u64,
}

impl Default for SampleOptions {
    fn default() -> SampleOptions {
        SampleOptions {
            freq_hz: DEFAULT_FREQ_HZ,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error("{0}")]
    Unavailable(String),
    #[error("--freq {freq}: above this kernel's limit of {max} samples per second (sysctl kernel.perf_event_max_sample_rate); use a lower rate")]
    FreqTooHigh { freq: u64, max: u64 },
}

/// What a sampled thread was serving when the sample was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Served {
    /// Nobody could tell (no tagger, or its record of the moment was gone).
    Unknown,
    /// No request: the thread's CPU time at that moment was charged to none.
    Nothing,
    /// The request of `pid` numbered `seq` on connection `conn_id`, as the probes number them.
    Request { pid: u32, conn_id: u64, seq: u32 },
    /// CPU thread `tid` held between an event loop's turns, in its `stretch`-th held stretch:
    /// it goes to the request its next socket call serves ([`Tagger::claimed`]); a stretch
    /// nothing claimed by the end is no request's.
    Held { pid: u32, tid: u32, stretch: u32 },
}

/// Tells what a thread served at a sample's time (CLOCK_MONOTONIC ns); the probes implement it
/// from the program they attach to the sampling events ([`Sampler::perf_fds`]).
pub trait Tagger: Send {
    fn served(&mut self, pid: u32, tid: u32, time_ns: u64) -> Served;

    /// The Lua stack the probes walked at thread `tid`'s sample stamped `time_ns`, if they
    /// did (docs/interpreters.md).
    fn lua(&mut self, _tid: u32, _time_ns: u64) -> Option<LuaStack> {
        None
    }
    /// The request that claimed a held stretch (`Served::Held`), once one did.
    fn claimed(&mut self, held: Served) -> Option<Served>;

    /// What a request's samples can be kept under from now on, when not under its own id:
    /// a request that ended and will not be among the costliest has no chains of its own in
    /// the profile, and folding it into a stand-in of its label keeps the sampler's memory
    /// flat however long it runs.
    fn folded(&mut self, request: Served) -> Option<Served>;
}

/// A running sampler following one process tree.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    /// The tagger for the reader thread to take at its next round.
    tagger: Arc<Mutex<Option<Box<dyn Tagger>>>>,
    /// The fork that starts the client tree, for the reader thread to recognise its record.
    client_fork: Arc<ClientFork>,
    /// Upstream hops' trees to sample from the reader's next round.
    hops: HopTrees,
    perf_fds: Vec<RawFd>,
    reader: Option<JoinHandle<Drained>>,
    event: &'static str,
    freq_hz: u64,
    started: Instant,
}

struct Drained {
    tracker: Tracker,
    lost: u64,
}

fn perf_error(e: io::Error) -> SampleError {
    let why = match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "permission denied: run reqcost as root, or allow it with `sysctl kernel.perf_event_paranoid=-1`".to_string()
        }
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => {
            "this kernel offers no cpu-clock sampling event".to_string()
        }
        _ => e.to_string(),
    };
    SampleError::Unavailable(format!(
        "call-chain sampling unavailable: perf_event_open: {why} (or pass --no-sample)"
    ))
}

impl Sampler {
    /// Starts sampling `root_pid`'s tree (every thread, child process and later exec) at
    /// `options.freq_hz` samples per second of on-CPU time per thread.
    pub fn start(root_pid: u32, options: SampleOptions) -> Result<Sampler, SampleError> {
        let freq_hz = options.freq_hz;
        if let Some(max) = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
        {
            if freq_hz > max {
                return Err(SampleError::FreqTooHigh { freq: freq_hz, max });
            }
        }
        if reqcost_server::threads(root_pid).is_empty() {
            return Err(SampleError::Unavailable(format!(
                "pid {root_pid}: no such process to sample"
            )));
        }
        let kernel_text = procfs::KernelText::read();
        let started = Instant::now();
        let events = Events::open(freq_hz.max(1)).map_err(perf_error)?;
        // Processes that existed before sampling: their threads' names and mappings. Later ones
        // come as records.
        let client_fork = Arc::new(ClientFork::default());
        let mut tracker = Tracker::new(root_pid, Arc::clone(&client_fork));
        tracker.kernel_text = kernel_text;
        for pid in reqcost_server::process_tree(root_pid) {
            let tids = reqcost_server::threads(pid);
            if !tids.is_empty() {
                tracker.add_existing(pid, &tids);
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let event = events.event.name();
        let flag = Arc::clone(&stop);
        let perf_fds = events.rings.iter().map(|r| r.fd()).collect();
        let tagger = Arc::new(Mutex::new(None));
        let handoff = Arc::clone(&tagger);
        let hops = HopTrees::default();
        let hops_handoff = hops.clone();
        let reader = std::thread::Builder::new()
            .name("reqcost-sampler".into())
            .spawn(move || read_loop(events, tracker, &flag, (&handoff, &hops_handoff)))
            .map_err(|e| {
                SampleError::Unavailable(format!(
                    "call-chain sampling: cannot start its thread: {e}"
                ))
            })?;
        Ok(Sampler {
            stop,
            tagger,
            client_fork,
            hops,
            perf_fds,
            reader: Some(reader),
            event,
            freq_hz,
            started,
        })
    }

    /// The sampling events, one per CPU, open until [`Sampler::finish`]: for the probes to
    /// attach the program that tags samples.
    pub fn perf_fds(&self) -> &[RawFd] {
        &self.perf_fds
    }

    /// Tags the samples from now on with what their threads served.
    pub fn tag_with(&self, tagger: Box<dyn Tagger>) {
        *self.tagger.lock().unwrap_or_else(|e| e.into_inner()) = Some(tagger);
    }

    /// Where to hand the upstream hops' trees to sample, as they are followed.
    pub fn hop_trees(&self) -> HopTrees {
        self.hops.clone()
    }

    /// Also keeps, apart, the kernel frames of the next process the calling thread forks and of
    /// its descendants (the `--load` command's tree): the sampling events see every CPU, so
    /// their samples are there to keep. Named by its fork record, not by pid, so that a client
    /// that ends before the reader's next round is followed all the same.
    pub fn follow_next_fork(&self) {
        self.client_fork.ask_here();
    }

    /// Stops sampling, unwinds and symbolizes, and returns the aggregated stacks, then those
    /// of the client tree (kernel frames only) when one was followed.
    pub fn finish(mut self) -> (Profile, Option<Profile>) {
        self.stop.store(true, Ordering::Release);
        let duration_s = self.started.elapsed().as_secs_f64();
        let meta = |lost| symbolize::Meta {
            event: self.event.to_string(),
            freq_hz: self.freq_hz,
            duration_s,
            lost,
        };
        match self.reader.take().map(JoinHandle::join) {
            Some(Ok(d)) => {
                let lua = d.tracker.lua.notes();
                let client = d
                    .tracker
                    .client
                    .map(|c| symbolize::build(c.agg, &[], meta(d.lost)));
                let mut p = symbolize::build(d.tracker.agg, &d.tracker.modules, meta(d.lost));
                p.notes.extend(lua);
                (p, client)
            }
            _ => {
                let mut p = symbolize::build(Default::default(), &[], meta(0));
                p.notes
                    .push("the sampler thread failed: no call chains".into());
                (p, None)
            }
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// The upstream hops' trees (root, hop) to sample beside the target's, handed to the
/// sampler's thread: samples of every CPU reach it, the tracker keeps those of the trees it
/// knows.
#[derive(Clone, Default)]
pub struct HopTrees(Arc<Mutex<Vec<(u32, u8)>>>);

impl HopTrees {
    /// Samples `root`'s tree, upstream hop `hop`, from the sampler's next round on.
    pub fn follow(&self, root: u32, hop: u8) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((root, hop));
    }

    fn take(&self) -> Vec<(u32, u8)> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

fn read_loop(
    mut events: Events,
    mut tracker: Tracker,
    stop: &AtomicBool,
    (tagger, hops): (&Mutex<Option<Box<dyn Tagger>>>, &HopTrees),
) -> Drained {
    let mut recs = Vec::new();
    let mut lost = 0;
    loop {
        if let Some(t) = tagger.lock().unwrap_or_else(|e| e.into_inner()).take() {
            tracker.tagger = Some(t);
        }
        for (root, hop) in hops.take() {
            tracker.follow_hop(root, hop);
        }
        let stopping = stop.load(Ordering::Acquire);
        if stopping {
            events.disable();
        } else {
            events.wait(100);
        }
        for ring in &mut events.rings {
            ring.drain(&mut recs, &mut lost, &mut |pid| tracker.wanted(pid));
        }
        // Records of one CPU are in order; across CPUs, order by time so that a mapping or
        // fork is known before samples that depend on it.
        recs.sort_by_key(Record::time);
        for r in recs.drain(..) {
            tracker.handle(r);
        }
        tracker.end_round();
        if stopping {
            return Drained { tracker, lost };
        }
    }
}
