//! Kernel-side accounting of a process tree with eBPF, aggregated in the kernel.
//!
//! [`Probes::attach`] loads one BPF object (src/bpf/reqcost.bpf.c) that follows the root pid,
//! its threads and every process it forks, and counts per syscall (calls, time, errors by
//! errno), read/write sizes by fd kind, ioctl codes, epoll_ctl ops, readiness waits, scheduler
//! wakeups/switches/run-queue delay, page faults and memory mapping. Aggregation happens in
//! fixed-size per-CPU maps, so memory is bounded whatever the event rate, and [`Probes::read`]
//! copies the maps.
//!
//! With attribution on (the default), the program also charges the tree's on-CPU time, syscalls
//! and socket bytes to the TCP connection and request each thread serves, and streams one small
//! event per finished request through a bounded ring buffer: [`Probes::drain_requests`] empties
//! it, [`Probes::request_counters`] tells what was attributed, unattributed and dropped.

mod counters;
mod gotls;
mod h2;
mod http3;
mod layout;
mod lua;
mod names;
mod preflight;
mod requests;
mod stack;
mod tags;
mod tls;

#[cfg(target_arch = "x86_64")]
mod bpf;

use std::collections::BTreeMap;

use reqcost_record::{KernelStats, ProbeCost, RequestEvent};

pub use counters::ioctl_name;
pub use lua::{LuaFrames, LuaWalks};
pub use names::{errno_name, syscall_name};
pub use requests::RequestCounters;
pub use stack::Dest;
pub use tags::{SampleServed, SampleTags};

/// Loaded and attached probes following one process tree; dropping it detaches them.
pub struct Probes {
    #[cfg(target_arch = "x86_64")]
    loaded: bpf::Loaded,
    #[cfg(not(target_arch = "x86_64"))]
    never: std::convert::Infallible,
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// BPF could not be loaded; the text says what is missing and how to get it.
    #[error("{0}")]
    Unavailable(String),
}

/// The server's TLS libraries as the probes found them when they attached (docs/tls.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsHooks {
    /// Libraries whose plaintext the probes read: `OpenSSL (/usr/lib/.../libssl.so.3)`.
    pub hooked: Vec<String>,
    /// Libraries probed that the tree never called (a server that maps libssl and serves
    /// no TLS): no plaintext was read through them.
    pub uncalled: Vec<String>,
    /// TLS libraries mapped but not hooked, each with its name and path (and why, when
    /// hooking failed): the requests they carry are not visible.
    pub unhooked: Vec<String>,
}

/// What the probes do beyond the aggregates, chosen at load time.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// Per-request attribution (connections, requests, the ring buffer of events).
    pub attribute: bool,
    /// The kernel's BPF run-time statistics, on while the probes live: they give the probes'
    /// cost on the whole machine (`ProbeCost::run_ns`), but every run of every program then
    /// reads the clock twice, on every event of the machine.
    pub run_time_stats: bool,
    /// Uprobes on the tree's TLS libraries, read the plaintext (with attribution only).
    pub tls: bool,
    /// Count the syscalls of a client tree spawned through [`Probes::spawn_client`] (a
    /// `--load` command); without it, that costs the probes nothing.
    pub client: bool,
}

impl Default for ProbeOptions {
    fn default() -> ProbeOptions {
        ProbeOptions {
            attribute: true,
            run_time_stats: false,
            tls: true,
            client: false,
        }
    }
}

impl Probes {
    /// Starts counting for `root_pid`, its threads and every descendant (those alive now and
    /// those it forks from now on), with the default options.
    pub fn attach(root_pid: u32) -> Result<Probes, ProbeError> {
        Probes::attach_with(root_pid, &ProbeOptions::default())
    }

    pub fn attach_with(root_pid: u32, options: &ProbeOptions) -> Result<Probes, ProbeError> {
        if let Some(why) = preflight::why_not(root_pid) {
            return Err(ProbeError::Unavailable(why));
        }
        #[cfg(target_arch = "x86_64")]
        {
            let loaded = bpf::Loaded::attach(root_pid, options).map_err(ProbeError::Unavailable)?;
            Ok(Probes { loaded })
        }
        #[cfg(not(target_arch = "x86_64"))]
        Err(ProbeError::Unavailable(format!(
            "eBPF probes are built for x86_64 only; this is {}",
            std::env::consts::ARCH
        )))
    }

    /// Cumulative figures since [`Probes::attach`]; phase figures are
    /// `after.since(&before)` of two reads.
    pub fn read(&self) -> KernelStats {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded.read().decode()
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// Upstream hop `hop`'s cumulative figures since it was followed: its calls, processes
    /// and user page faults ([`Probes::read`] holds the target's); a window's figures are
    /// `after.since(&before)`.
    pub fn read_hop(&self, hop: u8) -> KernelStats {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded.read_hop(hop).decode_hop()
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// The probes' own run time and runs since [`Probes::attach`]: on the tree's events always,
    /// on the whole machine when [`ProbeOptions::run_time_stats`] turned the kernel's BPF
    /// run-time statistics on; phase figures are `after.since(&before)`. An error says why
    /// they cannot be read.
    pub fn own_cost(&self) -> Result<ProbeCost, ProbeError> {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded.own_cost().map_err(ProbeError::Unavailable)
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// Follows `root`'s process tree as hop `hop` of the stack (docs/stack.md): its requests
    /// are followed and linked to the target's, its CPU counted per hop
    /// ([`Probes::hop_counters`]), and none of its events counts in the target's figures.
    pub fn follow_hop(&self, root: u32, hop: u8) -> Result<(), ProbeError> {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded
                .follow_hop(root, hop)
                .map_err(ProbeError::Unavailable)
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// Where the followed trees connected to since [`Probes::attach`], with the hop of the
    /// tree that connected.
    pub fn dests(&self) -> Vec<(Dest, u8)> {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded.dests()
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// Cumulative per-request counters of hop `hop` (1..: an upstream followed with
    /// [`Probes::follow_hop`]); hop 0's are [`Probes::request_counters`].
    pub fn hop_counters(&self, hop: u8) -> RequestCounters {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded.hop_counters(hop)
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// What the probes keep of the connections on the TCP ports the followed trees listen on,
    /// paused or not: by port, what those closed since [`Probes::attach`] received, and
    /// those established since and still open. With the open ones' bytes
    /// (`reqcost_server::ReceivedBytes`), what the tree received up to now.
    pub fn listener_traffic(&self) -> reqcost_server::ListenerTraffic {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded.listener_traffic()
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// Cumulative per-request counters since [`Probes::attach`] (all zero with attribution
    /// off); phase figures are `after.since(&before)`.
    pub fn request_counters(&self) -> RequestCounters {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded.request_counters()
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// Detaches the programs that run on the server's syscalls, switches, wakeups and faults
    /// (and on everyone else's: their floor cost is per event on the machine), and the uprobes
    /// on its TLS libraries, so that the server runs at no probe cost until [`Probes::resume`]. The fork and exit tracepoints stay:
    /// the tree stays followed. Counts stop; per-request accounting forgets the connections it
    /// followed, so the request each had in flight is never reported: returns how many (see
    /// docs/request-attribution.md, "Paused probes"). Nothing happens when already paused.
    pub fn pause(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded.pause()
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// Re-attaches what [`Probes::pause`] detached; counts resume where they stopped. A thread
    /// busy at this instant is charged from its next event on, and a connection from its next
    /// socket call (as one opened before the probes).
    pub fn resume(&self) -> Result<(), ProbeError> {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded.resume().map_err(ProbeError::Unavailable)
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// Runs `spawn`, whose process and its descendants are the client tree whose syscalls
    /// the probes count (with [`ProbeOptions::client`]).
    pub fn spawn_client<R>(&self, spawn: impl FnOnce() -> R) -> R {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded.spawn_client(spawn)
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// The client tree's calls by syscall name since [`Probes::attach`] (none without
    /// [`ProbeOptions::client`]); a phase's are the difference of two reads.
    pub fn client_syscalls(&self) -> BTreeMap<String, u64> {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded
                .client_syscalls()
                .into_iter()
                .enumerate()
                .filter(|&(_, n)| n > 0)
                .map(|(nr, n)| (names::syscall_name(nr as u32), n))
                .collect()
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// Whether the probes are paused.
    pub fn paused(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded.paused()
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// The TLS libraries the tree's processes mapped, hooked and called so far, hooked and
    /// never called, or not hooked (none hooked with attribution off).
    pub fn tls(&self) -> TlsHooks {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded.tls()
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// Hands `f` every request finished since the last call, oldest first; returns how many.
    /// Call it often enough that the ring buffer (4 MiB, about 16 000 requests) does not fill:
    /// what does not fit is counted in [`RequestCounters::dropped`].
    pub fn drain_requests(&self, f: &mut dyn FnMut(RequestEvent)) -> Result<u64, ProbeError> {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded
                .drain_requests(f)
                .map_err(ProbeError::Unavailable)
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// The request each connection the probes follow has open now, marked in flight, with
    /// what it cost so far (its CPU up to its thread's latest event): requests that a phase's
    /// or a window's end leaves unreported. Empty with attribution off or while paused. With
    /// them, the counters read at once, so that a phase ending there adds up, and the moment
    /// they were read (CLOCK_MONOTONIC ns, the clock of events' `end_ns`).
    pub fn open_requests(&self) -> (Vec<RequestEvent>, RequestCounters, u64) {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded.open_requests()
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// Tags every call-chain sample of the events `perf_fds` (the sampler's) with the request
    /// its thread serves, by the rule that charges CPU to requests; the tags are read back
    /// through the returned reader.
    pub fn tag_samples(&self, perf_fds: &[i32]) -> Result<SampleTags, ProbeError> {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded
                .tag_samples(perf_fds)
                .map_err(ProbeError::Unavailable)
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// Has the call-chain samples (those [`Probes::tag_samples`] tags) walk the Lua 5.4 stacks
    /// of the tree's Lua cores (docs/interpreters.md), and names those of another version,
    /// which keep their native frames; an error when hooking a Lua core failed.
    pub fn lua_frames(&self, root_pid: u32) -> Result<LuaFrames, ProbeError> {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded
                .lua_frames(root_pid)
                .map_err(ProbeError::Unavailable)
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }
}

/// CLOCK_MONOTONIC now, in ns: the clock of request events' times (bpf_ktime_get_ns).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime with a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
