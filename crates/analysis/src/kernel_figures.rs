//! The kernel figures of one phase (eBPF probes) per its unit of work: what the server asked the
//! kernel to do for each request, and what the probes themselves cost. The terminal's kernel
//! block prints these and `report --json` gives them (docs/analysis.md, "Kernel figures");
//! field meanings: docs/kernel-stats.md.

use reqcost_record::{
    FdKind, IoDirection, KernelStats, Phase, ProbeCost, SchedStats, SizeBucket, TreeStats,
};
use serde::{Deserialize, Serialize};

/// Syscalls listed by name; the rest are summed into [`OtherSyscalls`].
pub const TOP_SYSCALLS: usize = 12;

/// Counts per unit of work, or totals when no unit was counted.
#[derive(Debug, Clone, Copy)]
struct Per {
    div: f64,
}

impl Per {
    fn of(units: f64) -> Per {
        Per {
            div: if units > 0.0 { units } else { 1.0 },
        }
    }

    fn count(self, v: u64) -> f64 {
        v as f64 / self.div
    }

    fn us(self, ns: u64) -> f64 {
        ns as f64 / 1000.0 / self.div
    }
}

/// A phase's kernel figures, each per its unit unless `per_unit` is false.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelFigures {
    /// False when no unit of work was counted: the figures are then the phase's totals.
    pub per_unit: bool,
    pub syscalls: f64,
    /// Time inside syscalls, blocked time included.
    pub syscall_time_us: f64,
    /// The [`TOP_SYSCALLS`] busiest syscalls, most calls first.
    pub by_syscall: Vec<SyscallFigures>,
    /// The syscalls beyond them, summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_syscalls: Option<OtherSyscalls>,
    /// Read- and write-like calls by (syscall, fd kind), busiest first.
    pub io: Vec<IoFigures>,
    /// ioctl requests, most calls first.
    pub ioctls: Vec<IoctlFigures>,
    /// epoll_ctl operations; absent when there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoll_ctl: Option<EpollCtlFigures>,
    /// Readiness waits (epoll_wait, poll, select).
    pub waits: Vec<WaitFigures>,
    pub sched: SchedFigures,
    pub memory: MemoryFigures,
    pub accepted: f64,
    pub sockets_closed: f64,
    /// Datagrams on UDP sockets; absent when there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpFigures>,
    /// Changes to the tree, in totals (never per unit); absent when there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<TreeStats>,
    /// Events not counted because a kernel map was full: every figure is low by them.
    pub lost_events: u64,
    /// What the probes ran on the server's events; absent when it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_cost: Option<ProbeCostFigures>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SyscallFigures {
    pub name: String,
    pub calls: f64,
    pub time_us: f64,
    /// The three commonest errnos and their calls, when some calls failed.
    pub failed: Vec<(String, f64)>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OtherSyscalls {
    /// How many syscalls by name.
    pub names: usize,
    pub calls: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IoFigures {
    pub syscall: String,
    pub direction: IoDirection,
    pub fd_kind: FdKind,
    pub calls: f64,
    /// Mean bytes of one call.
    pub bytes_each: f64,
    /// Calls by size, as recorded (smallest first).
    pub sizes: Vec<SizeFigures>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SizeFigures {
    pub min_bytes: u64,
    pub max_bytes: u64,
    /// The calls of this size over the phase, which rank the sizes.
    pub count: u64,
    pub calls: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IoctlFigures {
    pub request: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub calls: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EpollCtlFigures {
    pub add: f64,
    pub modify: f64,
    pub delete: f64,
    pub other: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WaitFigures {
    pub syscall: String,
    pub returns: f64,
    pub nothing_ready: f64,
    /// Fds (or events) ready per return.
    pub ready_per_return: f64,
    /// The size argument per call: epoll's maxevents, poll's set, select's nfds.
    pub asked_per_call: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SchedFigures {
    pub wakeups: f64,
    pub voluntary_switches: f64,
    pub involuntary_switches: f64,
    /// Time runnable threads waited for a CPU; absent when none waited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runqueue: Option<RunQueueFigures>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunQueueFigures {
    pub delay_us: f64,
    pub waits: f64,
    /// Mean delay of one wait.
    pub mean_us: f64,
    /// The longest delays' histogram bucket: (min, max) µs, max `u64::MAX` when unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_us: Option<(u64, u64)>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemoryFigures {
    pub page_faults_user: f64,
    pub page_faults_kernel: f64,
    /// The mapping syscalls called (mmap, munmap, brk, mremap) and their calls.
    pub mapping_calls: Vec<(String, f64)>,
    pub mapped_bytes: f64,
    pub unmapped_bytes: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UdpFigures {
    pub datagrams_sent: f64,
    pub bytes_sent: f64,
    pub datagrams_received: f64,
    pub bytes_received: f64,
}

/// The probes' own cost, per unit of the probed part of the phase (its probed windows' when
/// the CPU came from unprobed ones), or totals when it has none.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProbeCostFigures {
    pub per_unit: bool,
    /// Run on the server tree's events, inside its CPU figures.
    pub tree: ProbeRuns,
    /// `tree`'s share of the server's CPU, in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent_of_cpu: Option<f64>,
    /// Run on the followed upstream hops' events, all hops together, inside their trees' CPU
    /// (docs/stack.md), per unit of the front's work; None when no upstream was followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<ProbeRuns>,
    /// Run on the whole machine (`--probe-stats`), the followed trees' part included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<ProbeRuns>,
    /// Of `machine`, run on other processes' events: not in the server's CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_processes: Option<ProbeRuns>,
    /// `other_processes`' share of `machine`, in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_processes_percent: Option<f64>,
    /// The return probes' uretprobe syscalls in the server's threads, when it made any: the
    /// probes' cost, in none of its syscall figures nor any request's CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uretprobe: Option<UretprobeFigures>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UretprobeFigures {
    pub calls: f64,
    /// Entry to exit, the return programs' runs inside included.
    pub time_us: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProbeRuns {
    pub time_us: f64,
    pub program_runs: f64,
}

impl KernelFigures {
    /// The kernel figures of `p` (converted to the unit shown); None without the probes.
    pub fn of(p: &Phase) -> Option<KernelFigures> {
        let k = p.server.kernel.as_ref()?;
        let per = Per::of(p.units());
        let syscall_time: u64 = k.syscalls.iter().map(|s| s.time_ns).sum();
        let t = k.tree;
        Some(KernelFigures {
            per_unit: p.units() > 0.0,
            syscalls: per.count(k.total_syscalls()),
            syscall_time_us: per.us(syscall_time),
            by_syscall: by_syscall(k, per),
            other_syscalls: k.syscalls.get(TOP_SYSCALLS..).and_then(|rest| {
                (!rest.is_empty()).then(|| OtherSyscalls {
                    names: rest.len(),
                    calls: per.count(rest.iter().map(|s| s.count).sum()),
                })
            }),
            io: k
                .io
                .iter()
                .map(|s| IoFigures {
                    syscall: s.syscall.clone(),
                    direction: s.direction,
                    fd_kind: s.fd_kind,
                    calls: per.count(s.calls),
                    bytes_each: s.bytes as f64 / s.calls as f64,
                    sizes: s.sizes.iter().map(|b| SizeFigures::of(b, per)).collect(),
                })
                .collect(),
            ioctls: k
                .ioctls
                .iter()
                .map(|i| IoctlFigures {
                    request: i.request,
                    name: i.name.clone(),
                    calls: per.count(i.count),
                })
                .collect(),
            epoll_ctl: epoll_ctl(k, per),
            waits: waits(k, per),
            sched: SchedFigures::of(&k.sched, per),
            memory: memory(k, per),
            accepted: per.count(k.sockets.accepted),
            sockets_closed: per.count(k.sockets.closed),
            udp: udp(k, per),
            tree: (t.processes_forked + t.threads_created + t.processes_exited > 0).then_some(t),
            lost_events: k.lost_events,
            probe_cost: p.server.probe_cost.as_ref().map(|c| probe_cost(c, p)),
        })
    }
}

fn by_syscall(k: &KernelStats, per: Per) -> Vec<SyscallFigures> {
    k.syscalls
        .iter()
        .take(TOP_SYSCALLS)
        .map(|s| SyscallFigures {
            name: s.name.clone(),
            calls: per.count(s.count),
            time_us: per.us(s.time_ns),
            failed: if s.errors > 0 {
                s.errnos
                    .iter()
                    .take(3)
                    .map(|e| (e.errno.clone(), per.count(e.count)))
                    .collect()
            } else {
                Vec::new()
            },
        })
        .collect()
}

impl SizeFigures {
    fn of(b: &SizeBucket, per: Per) -> SizeFigures {
        SizeFigures {
            min_bytes: b.min_bytes,
            max_bytes: b.max_bytes,
            count: b.count,
            calls: per.count(b.count),
        }
    }
}

fn epoll_ctl(k: &KernelStats, per: Per) -> Option<EpollCtlFigures> {
    let e = &k.epoll_ctl;
    (e.add + e.modify + e.delete + e.other > 0).then(|| EpollCtlFigures {
        add: per.count(e.add),
        modify: per.count(e.modify),
        delete: per.count(e.delete),
        other: per.count(e.other),
    })
}

fn waits(k: &KernelStats, per: Per) -> Vec<WaitFigures> {
    k.waits
        .iter()
        .map(|w| WaitFigures {
            syscall: w.syscall.clone(),
            returns: per.count(w.returns),
            nothing_ready: per.count(w.zero_ready),
            ready_per_return: w.ready as f64 / w.returns as f64,
            asked_per_call: w.fds_asked as f64 / w.returns as f64,
        })
        .collect()
}

impl SchedFigures {
    fn of(s: &SchedStats, per: Per) -> SchedFigures {
        SchedFigures {
            wakeups: per.count(s.wakeups),
            voluntary_switches: per.count(s.voluntary_switches),
            involuntary_switches: per.count(s.involuntary_switches),
            runqueue: (s.runqueue_waits > 0).then(|| RunQueueFigures {
                delay_us: per.us(s.runqueue_delay_ns),
                waits: per.count(s.runqueue_waits),
                mean_us: s.runqueue_delay_ns as f64 / 1000.0 / s.runqueue_waits as f64,
                longest_us: s.runqueue_histogram.last().map(|b| (b.min_us, b.max_us)),
            }),
        }
    }
}

fn memory(k: &KernelStats, per: Per) -> MemoryFigures {
    let m = &k.memory;
    MemoryFigures {
        page_faults_user: per.count(m.page_faults_user),
        page_faults_kernel: per.count(m.page_faults_kernel),
        mapping_calls: ["mmap", "munmap", "brk", "mremap"]
            .iter()
            .filter_map(|n| {
                let c = k.syscall_count(n);
                (c > 0).then(|| (n.to_string(), per.count(c)))
            })
            .collect(),
        mapped_bytes: per.count(m.mmap_bytes),
        unmapped_bytes: per.count(m.munmap_bytes),
    }
}

fn udp(k: &KernelStats, per: Per) -> Option<UdpFigures> {
    let u = &k.udp;
    (u.datagrams_sent + u.datagrams_received > 0).then(|| UdpFigures {
        datagrams_sent: per.count(u.datagrams_sent),
        bytes_sent: per.count(u.bytes_sent),
        datagrams_received: per.count(u.datagrams_received),
        bytes_received: per.count(u.bytes_received),
    })
}

/// The probes' cost in `p`: the probed windows' only, so divided by their units and their CPU
/// when the phase's CPU came from unprobed ones.
fn probe_cost(cost: &ProbeCost, p: &Phase) -> ProbeCostFigures {
    let units = p.probed_part(p.units());
    let cpu = match &p.cpu_windows {
        Some(w) if w.count_scale > 0.0 => Some(w.probed.cpu_ns),
        _ => p.server.cpu.as_ref().map(|c| c.total_ns),
    };
    let per = Per::of(units);
    let rest = cost.rest_of_machine_ns().filter(|_| cost.run_ns > 0);
    ProbeCostFigures {
        per_unit: units > 0.0,
        tree: ProbeRuns {
            time_us: per.us(cost.tree_ns),
            program_runs: per.count(cost.tree_runs),
        },
        percent_of_cpu: cpu
            .filter(|c| *c > 0)
            .map(|c| 100.0 * cost.tree_ns as f64 / c as f64),
        upstream: (cost.upstream_runs > 0).then(|| ProbeRuns {
            time_us: per.us(cost.upstream_ns),
            program_runs: per.count(cost.upstream_runs),
        }),
        machine: cost.machine_measured.then(|| ProbeRuns {
            time_us: per.us(cost.run_ns),
            program_runs: per.count(cost.runs),
        }),
        other_processes: rest.map(|rest| ProbeRuns {
            time_us: per.us(rest),
            program_runs: per.count(
                cost.runs
                    .saturating_sub(cost.tree_runs + cost.upstream_runs),
            ),
        }),
        other_processes_percent: rest.map(|rest| 100.0 * rest as f64 / cost.run_ns as f64),
        uretprobe: (cost.uretprobe_calls > 0).then(|| UretprobeFigures {
            calls: per.count(cost.uretprobe_calls),
            time_us: per.us(cost.uretprobe_ns),
        }),
    }
}
