//! Kernel-side accounting collected by the eBPF probes (see `reqcost-probes`), documented field
//! by field in `docs/kernel-stats.md`.
//!
//! Every figure covers the whole server tree (threads and forked children) and is a total over
//! the phase; reports divide by requests. Lists hold only non-zero entries.

use crate::requests::is_zero;
use serde::{Deserialize, Serialize};

/// What the server tree asked the kernel to do during one phase.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct KernelStats {
    /// Per syscall, sorted by count, most frequent first.
    pub syscalls: Vec<SyscallStat>,
    /// Read-like and write-like calls that succeeded, per syscall and fd kind, most calls first.
    #[serde(default)]
    pub io: Vec<IoStat>,
    /// ioctl(2) calls by request code, most frequent first.
    #[serde(default)]
    pub ioctls: Vec<IoctlStat>,
    /// Opens (open, openat, openat2, failed ones included) per path as the call named it (its
    /// first 127 bytes, relative paths as given), most frequent first; up to 512 paths, opens of
    /// more in `lost_events`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub opened: Vec<OpenedPath>,
    /// epoll_ctl(2) calls by operation.
    #[serde(default)]
    pub epoll_ctl: EpollCtlOps,
    /// Readiness waits (epoll_wait, poll, select families) that returned without error.
    #[serde(default)]
    pub waits: Vec<WaitStat>,
    #[serde(default)]
    pub sched: SchedStats,
    #[serde(default)]
    pub memory: MemoryStats,
    #[serde(default)]
    pub sockets: SocketStats,
    /// Datagrams on UDP sockets (their calls and bytes are also in `io`, fd kind `udp`).
    #[serde(default)]
    pub udp: UdpStats,
    #[serde(default)]
    pub tree: TreeStats,
    /// Events not recorded because a fixed-size kernel map was full or a thread's in-flight
    /// record could not be allocated (0 in a sound run).
    #[serde(default)]
    pub lost_events: u64,
}

/// One syscall's calls, time and failures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct SyscallStat {
    /// Name on the machine's architecture, or `syscall_N` for a number without a name.
    pub name: String,
    /// Calls entered (a call still blocked when the phase ends counts in it).
    pub count: u64,
    /// Wall time between entry and return, summed over calls, in ns; includes time blocked.
    #[serde(default)]
    pub time_ns: u64,
    /// Calls that returned an error.
    #[serde(default)]
    pub errors: u64,
    /// Errors by errno name (`ENOENT`, `EAGAIN`, ...), most frequent first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errnos: Vec<ErrnoCount>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ErrnoCount {
    /// Symbolic name, or `E<number>` for an unknown one.
    pub errno: String,
    pub count: u64,
}

/// Which way data moved in an [`IoStat`].
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum IoDirection {
    Read,
    Write,
}

/// What an fd refers to, from its inode.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum FdKind {
    Socket,
    /// A regular file.
    File,
    /// A pipe or FIFO.
    Pipe,
    /// An anonymous inode: eventfd, timerfd, signalfd, epoll.
    Anon,
    /// A tty, device or directory, or an fd that was not open.
    Other,
    /// A UDP (or UDP-Lite) socket; `socket` is every other kind of socket (TCP, Unix, ...).
    Udp,
}

impl FdKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FdKind::Socket => "socket",
            FdKind::File => "file",
            FdKind::Pipe => "pipe",
            FdKind::Anon => "anon",
            FdKind::Other => "other",
            FdKind::Udp => "udp",
        }
    }
}

/// Successful calls of one read-like or write-like syscall on one kind of fd.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IoStat {
    /// `write`, `writev`, `sendto`, `sendfile`, `recvfrom`, ...
    pub syscall: String,
    pub direction: IoDirection,
    /// Kind of the fd written to (for sendfile and splice, the destination).
    pub fd_kind: FdKind,
    pub calls: u64,
    /// Bytes the calls returned as moved (for sendmmsg/recvmmsg, the sum of `msg_len`).
    pub bytes: u64,
    /// Calls by bytes moved, log2 buckets, non-empty ones only, smallest first.
    pub sizes: Vec<SizeBucket>,
}

/// Calls that moved between `min_bytes` and `max_bytes` bytes, both included.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct SizeBucket {
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct IoctlStat {
    /// The request code (second argument).
    pub request: u32,
    /// Its name when it is a well-known one (`SIOCOUTQ/TIOCOUTQ`, `FIONREAD/SIOCINQ`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub count: u64,
}

/// epoll_ctl(2) calls by `op`, counted when entered.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct EpollCtlOps {
    pub add: u64,
    pub modify: u64,
    pub delete: u64,
    /// Calls with an op that is none of the three.
    #[serde(default)]
    pub other: u64,
}

/// Returns of one readiness-wait syscall.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct WaitStat {
    /// `epoll_wait`, `epoll_pwait`, `epoll_pwait2`, `poll`, `ppoll`, `select`, `pselect6`.
    pub syscall: String,
    /// Calls that returned without error.
    pub returns: u64,
    /// Returns with nothing ready (timeouts).
    pub zero_ready: u64,
    /// Ready fds (or events), summed over returns.
    pub ready: u64,
    /// Size argument summed over returns: `maxevents` for epoll, `nfds` for poll and select.
    pub fds_asked: u64,
}

/// Opens of one path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OpenedPath {
    pub path: String,
    pub count: u64,
}

/// Scheduler events of the tree's threads.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct SchedStats {
    /// Times a thread of the tree was woken up (sched_wakeup).
    pub wakeups: u64,
    /// Switches away from a thread that blocked (it asked to sleep).
    pub voluntary_switches: u64,
    /// Switches away from a thread that could have kept running (preempted or yielding).
    pub involuntary_switches: u64,
    /// Waits on a run queue measured: from wakeup or preemption to running again.
    pub runqueue_waits: u64,
    /// Their total, in ns.
    pub runqueue_delay_ns: u64,
    /// Waits by delay, log2 buckets, non-empty ones only, shortest first.
    #[serde(default)]
    pub runqueue_histogram: Vec<DelayBucket>,
}

/// Run-queue waits that lasted from `min_us` up to (not including) `max_us` microseconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct DelayBucket {
    pub min_us: u64,
    pub max_us: u64,
    pub count: u64,
}

/// Memory churn; mmap, munmap, brk and mremap call counts are in `syscalls`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct MemoryStats {
    /// Page faults taken in user mode.
    pub page_faults_user: u64,
    /// Page faults taken in the kernel on the tree's behalf (copying to or from user memory).
    pub page_faults_kernel: u64,
    /// Length asked for by successful mmap calls, in bytes.
    pub mmap_bytes: u64,
    /// Length released by successful munmap calls, in bytes.
    pub munmap_bytes: u64,
}

/// Connections seen from the server's side.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct SocketStats {
    /// Successful accept/accept4 calls.
    pub accepted: u64,
    /// Successful close calls on a socket fd.
    pub closed: u64,
    /// Successful close calls on other fds: regular files, pipes, anonymous inodes, others.
    #[serde(default)]
    pub other_closes: u64,
}

/// What the tree's successful send and receive calls moved on UDP sockets. A datagram is one
/// message as the call handed it over: one per sendto/sendmsg/recvfrom/recvmsg/read/write, the
/// messages handled (the return value) per sendmmsg/recvmmsg. With UDP GSO (UDP_SEGMENT) one
/// datagram sent here leaves as several on the wire, and with UDP GRO one received here
/// arrived as several.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct UdpStats {
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    /// Payload bytes (for the mmsg calls, the `msg_len` of their first 64 messages).
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// Changes to the measured tree.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct TreeStats {
    /// New processes forked by the tree (they join it).
    pub processes_forked: u64,
    /// New threads created in the tree.
    pub threads_created: u64,
    /// Processes of the tree whose last thread exited.
    pub processes_exited: u64,
}

/// `$ty` with each counter field named `later.field - earlier.field` (saturating), and any other
/// fields given after a `;` as `name: value`.
macro_rules! counters_since {
    ($later:expr, $earlier:expr, $ty:ident {
        $($field:ident),+ $(; $($name:ident: $value:expr),+)?
    }) => {
        $ty {
            $($field: $later.$field.saturating_sub($earlier.$field),)+
            $($($name: $value,)+)?
        }
    };
}

/// The probes' own run time over a phase, in two parts. The programs run at every traced event
/// on the machine, the server's or not: `tree` is what they ran on the server tree's events
/// (its syscalls and faults, its threads' switches, wakeups, forks and exits), which its CPU
/// figures carry (but for wakeups of its threads made by other processes); `machine` is their
/// whole run time on the machine, the tree's part included, as the kernel's BPF statistics
/// count it (what bpftop and `bpftool prog show` read), measured only when asked for
/// (`--probe-stats`: the statistics read the clock twice per program run, on every event of
/// the machine).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ProbeCost {
    /// Whole machine: time the probes' programs ran, summed over programs and CPUs (0 when
    /// `machine_measured` is false).
    #[serde(default)]
    pub run_ns: u64,
    /// Whole machine: program runs.
    #[serde(default)]
    pub runs: u64,
    /// Whether `run_ns` and `runs` were measured (the kernel's BPF statistics were on).
    #[serde(default)]
    pub machine_measured: bool,
    /// On the tree's events: run time, timed on one run in 16 and scaled.
    #[serde(default)]
    pub tree_ns: u64,
    /// On the tree's events: program runs, counted exactly.
    #[serde(default)]
    pub tree_runs: u64,
    /// On the followed upstream hops' events (docs/stack.md), all hops together: run time as
    /// `tree_ns`, and runs. 0 when no upstream was followed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub upstream_ns: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub upstream_runs: u64,
    /// The kernel's uretprobe syscalls in the tree's threads: the return probes' trampoline
    /// makes one on every return of a hooked function (Linux 6.11+, x86-64). Counted here, in
    /// none of the server's syscall figures.
    #[serde(default)]
    pub uretprobe_calls: u64,
    /// Their time, entry to exit (the return programs' runs inside included), charged to no
    /// request.
    #[serde(default)]
    pub uretprobe_ns: u64,
    /// The same per program, busiest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<ProgramCost>,
}

/// One BPF program's part of [`ProbeCost`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ProgramCost {
    pub name: String,
    pub run_ns: u64,
    pub runs: u64,
    pub tree_ns: u64,
    pub tree_runs: u64,
}

impl ProbeCost {
    /// The cost between `earlier` and `self`, two reads of the same probes.
    pub fn since(&self, earlier: &ProbeCost) -> ProbeCost {
        let programs = self
            .programs
            .iter()
            .map(|p| {
                let e = earlier.programs.iter().find(|e| e.name == p.name);
                let zero = ProgramCost::default();
                let e = e.unwrap_or(&zero);
                ProgramCost {
                    name: p.name.clone(),
                    run_ns: p.run_ns.saturating_sub(e.run_ns),
                    runs: p.runs.saturating_sub(e.runs),
                    tree_ns: p.tree_ns.saturating_sub(e.tree_ns),
                    tree_runs: p.tree_runs.saturating_sub(e.tree_runs),
                }
            })
            .collect();
        ProbeCost {
            run_ns: self.run_ns.saturating_sub(earlier.run_ns),
            runs: self.runs.saturating_sub(earlier.runs),
            machine_measured: self.machine_measured,
            tree_ns: self.tree_ns.saturating_sub(earlier.tree_ns),
            tree_runs: self.tree_runs.saturating_sub(earlier.tree_runs),
            upstream_ns: self.upstream_ns.saturating_sub(earlier.upstream_ns),
            upstream_runs: self.upstream_runs.saturating_sub(earlier.upstream_runs),
            uretprobe_calls: self.uretprobe_calls.saturating_sub(earlier.uretprobe_calls),
            uretprobe_ns: self.uretprobe_ns.saturating_sub(earlier.uretprobe_ns),
            programs,
        }
    }

    /// Whole-machine run time spent outside the followed trees' events, when measured.
    pub fn rest_of_machine_ns(&self) -> Option<u64> {
        self.machine_measured
            .then(|| self.run_ns.saturating_sub(self.tree_ns + self.upstream_ns))
    }
}

impl KernelStats {
    /// (calls, bytes) of the read- or write-like calls on one kind of fd.
    pub fn io_total(&self, dir: IoDirection, kind: FdKind) -> (u64, u64) {
        self.io
            .iter()
            .filter(|s| s.direction == dir && s.fd_kind == kind)
            .fold((0, 0), |(c, b), s| (c + s.calls, b + s.bytes))
    }

    /// The figures accumulated between `earlier` and `self`, two reads of the same probes.
    pub fn since(&self, earlier: &KernelStats) -> KernelStats {
        KernelStats {
            syscalls: syscalls_since(&self.syscalls, &earlier.syscalls),
            io: io_since(&self.io, &earlier.io),
            ioctls: diff_by(
                &self.ioctls,
                &earlier.ioctls,
                |i| i.request,
                |i| i.count,
                |i, count| IoctlStat { count, ..i.clone() },
            ),
            opened: diff_by(
                &self.opened,
                &earlier.opened,
                |o| o.path.clone(),
                |o| o.count,
                |o, count| OpenedPath { count, ..o.clone() },
            ),
            epoll_ctl: counters_since!(
                self.epoll_ctl,
                earlier.epoll_ctl,
                EpollCtlOps {
                    add,
                    modify,
                    delete,
                    other
                }
            ),
            waits: diff_matched(
                &self.waits,
                &earlier.waits,
                |w, e| w.syscall == e.syscall,
                WaitStat::since,
            ),
            sched: self.sched.since(&earlier.sched),
            memory: counters_since!(
                self.memory,
                earlier.memory,
                MemoryStats {
                    page_faults_user,
                    page_faults_kernel,
                    mmap_bytes,
                    munmap_bytes
                }
            ),
            sockets: counters_since!(
                self.sockets,
                earlier.sockets,
                SocketStats {
                    accepted,
                    closed,
                    other_closes
                }
            ),
            udp: counters_since!(
                self.udp,
                earlier.udp,
                UdpStats {
                    datagrams_sent,
                    datagrams_received,
                    bytes_sent,
                    bytes_received
                }
            ),
            tree: counters_since!(
                self.tree,
                earlier.tree,
                TreeStats {
                    processes_forked,
                    threads_created,
                    processes_exited
                }
            ),
            lost_events: self.lost_events.saturating_sub(earlier.lost_events),
        }
    }

    /// Bytes the tree sent on its sockets, TCP and UDP alike.
    pub fn socket_bytes_sent(&self) -> u64 {
        self.io
            .iter()
            .filter(|s| s.direction == IoDirection::Write)
            .filter(|s| matches!(s.fd_kind, FdKind::Socket | FdKind::Udp))
            .map(|s| s.bytes)
            .sum()
    }

    /// Calls of every syscall together.
    pub fn total_syscalls(&self) -> u64 {
        self.syscalls.iter().map(|s| s.count).sum()
    }

    /// Calls of one syscall by name, 0 when it was not called.
    pub fn syscall_count(&self, name: &str) -> u64 {
        self.syscalls
            .iter()
            .find(|s| s.name == name)
            .map_or(0, |s| s.count)
    }
}

/// Entry-wise `later - earlier` of two lists keyed by `key`, keeping the order of `later` and
/// dropping entries that did not grow.
fn diff_by<T, K: PartialEq>(
    later: &[T],
    earlier: &[T],
    key: impl Fn(&T) -> K,
    count: impl Fn(&T) -> u64,
    with_count: impl Fn(&T, u64) -> T,
) -> Vec<T> {
    later
        .iter()
        .filter_map(|l| {
            let k = key(l);
            let before = earlier.iter().find(|e| key(e) == k).map_or(0, &count);
            let n = count(l).saturating_sub(before);
            (n > 0).then(|| with_count(l, n))
        })
        .collect()
}

/// Entry-wise `later - earlier` of two lists of records, matching entries with `same`: an entry
/// new in `later` is kept whole, a matched one becomes `minus(later, earlier)` or is dropped.
fn diff_matched<T: Clone>(
    later: &[T],
    earlier: &[T],
    same: impl Fn(&T, &T) -> bool,
    minus: impl Fn(&T, &T) -> Option<T>,
) -> Vec<T> {
    later
        .iter()
        .filter_map(|l| match earlier.iter().find(|e| same(l, e)) {
            Some(e) => minus(l, e),
            None => Some(l.clone()),
        })
        .collect()
}

/// Syscalls that were entered, took time or failed between the two reads, most frequent first.
fn syscalls_since(later: &[SyscallStat], earlier: &[SyscallStat]) -> Vec<SyscallStat> {
    let mut syscalls = diff_matched(
        later,
        earlier,
        |s, e| s.name == e.name,
        |s, e| Some(s.since(e)),
    );
    syscalls.retain(|s| s.count > 0 || s.time_ns > 0 || s.errors > 0);
    syscalls.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)));
    syscalls
}

/// Read and write calls made between the two reads, most calls first.
fn io_since(later: &[IoStat], earlier: &[IoStat]) -> Vec<IoStat> {
    let mut io = diff_matched(
        later,
        earlier,
        |s, e| s.syscall == e.syscall && s.fd_kind == e.fd_kind,
        IoStat::since,
    );
    io.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.syscall.cmp(&b.syscall)));
    io
}

impl SyscallStat {
    fn since(&self, earlier: &SyscallStat) -> SyscallStat {
        SyscallStat {
            name: self.name.clone(),
            count: self.count.saturating_sub(earlier.count),
            time_ns: self.time_ns.saturating_sub(earlier.time_ns),
            errors: self.errors.saturating_sub(earlier.errors),
            errnos: diff_by(
                &self.errnos,
                &earlier.errnos,
                |x| x.errno.clone(),
                |x| x.count,
                |x, count| ErrnoCount { count, ..x.clone() },
            ),
        }
    }
}

impl IoStat {
    /// None when no call was made in between.
    fn since(&self, earlier: &IoStat) -> Option<IoStat> {
        let calls = self.calls.saturating_sub(earlier.calls);
        (calls > 0).then(|| IoStat {
            syscall: self.syscall.clone(),
            direction: self.direction,
            fd_kind: self.fd_kind,
            calls,
            bytes: self.bytes.saturating_sub(earlier.bytes),
            sizes: diff_by(
                &self.sizes,
                &earlier.sizes,
                |b| b.min_bytes,
                |b| b.count,
                |b, count| SizeBucket { count, ..*b },
            ),
        })
    }
}

impl WaitStat {
    /// None when no call returned in between.
    fn since(&self, earlier: &WaitStat) -> Option<WaitStat> {
        let returns = self.returns.saturating_sub(earlier.returns);
        (returns > 0).then(|| WaitStat {
            syscall: self.syscall.clone(),
            returns,
            zero_ready: self.zero_ready.saturating_sub(earlier.zero_ready),
            ready: self.ready.saturating_sub(earlier.ready),
            fds_asked: self.fds_asked.saturating_sub(earlier.fds_asked),
        })
    }
}

impl SchedStats {
    fn since(&self, earlier: &SchedStats) -> SchedStats {
        counters_since!(self, earlier, SchedStats {
            wakeups, voluntary_switches, involuntary_switches, runqueue_waits, runqueue_delay_ns;
            runqueue_histogram: diff_by(
                &self.runqueue_histogram,
                &earlier.runqueue_histogram,
                |b| b.min_us,
                |b| b.count,
                |b, count| DelayBucket { count, ..*b },
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sc(name: &str, count: u64, errnos: &[(&str, u64)]) -> SyscallStat {
        SyscallStat {
            name: name.to_string(),
            count,
            time_ns: count * 10,
            errors: errnos.iter().map(|e| e.1).sum(),
            errnos: errnos
                .iter()
                .map(|(e, n)| ErrnoCount {
                    errno: e.to_string(),
                    count: *n,
                })
                .collect(),
        }
    }

    fn io(calls: u64, small: u64) -> IoStat {
        IoStat {
            syscall: "write".to_string(),
            direction: IoDirection::Write,
            fd_kind: FdKind::Socket,
            calls,
            bytes: small + (calls - small) * 1024,
            sizes: [(1, 1, small), (1024, 2047, calls - small)]
                .iter()
                .filter(|b| b.2 > 0)
                .map(|&(min_bytes, max_bytes, count)| SizeBucket {
                    min_bytes,
                    max_bytes,
                    count,
                })
                .collect(),
        }
    }

    #[test]
    fn probe_cost_since_splits_per_program() {
        let program = |name: &str, run_ns, tree_ns| ProgramCost {
            name: name.into(),
            run_ns,
            runs: run_ns / 100,
            tree_ns,
            tree_runs: tree_ns / 100,
        };
        let earlier = ProbeCost {
            run_ns: 1_000,
            runs: 10,
            machine_measured: true,
            tree_ns: 400,
            tree_runs: 4,
            upstream_ns: 100,
            upstream_runs: 1,
            uretprobe_calls: 3,
            uretprobe_ns: 900,
            programs: vec![program("sys_enter", 1_000, 400)],
        };
        let later = ProbeCost {
            run_ns: 5_000,
            runs: 50,
            machine_measured: true,
            tree_ns: 1_400,
            tree_runs: 14,
            upstream_ns: 600,
            upstream_runs: 6,
            uretprobe_calls: 8,
            uretprobe_ns: 2_400,
            programs: vec![
                program("sys_enter", 4_000, 1_200),
                program("sys_exit", 1_000, 200),
            ],
        };
        let d = later.since(&earlier);
        assert_eq!(
            (d.run_ns, d.runs, d.tree_ns, d.tree_runs),
            (4_000, 40, 1_000, 10)
        );
        assert_eq!((d.uretprobe_calls, d.uretprobe_ns), (5, 1_500));
        assert_eq!((d.upstream_ns, d.upstream_runs), (500, 5));
        // Neither the front's nor the upstream hops' part.
        assert_eq!(d.rest_of_machine_ns(), Some(2_500));
        assert_eq!(
            d.programs,
            vec![
                program("sys_enter", 3_000, 800),
                program("sys_exit", 1_000, 200)
            ]
        );
        let unmeasured = ProbeCost {
            machine_measured: false,
            ..d
        };
        assert_eq!(unmeasured.rest_of_machine_ns(), None);
    }

    #[test]
    fn since_subtracts_matching_entries_and_keeps_new_ones() {
        let earlier = KernelStats {
            syscalls: vec![sc("read", 5, &[("EAGAIN", 2)]), sc("openat", 3, &[])],
            io: vec![io(4, 4)],
            epoll_ctl: EpollCtlOps {
                add: 1,
                ..Default::default()
            },
            sched: SchedStats {
                wakeups: 7,
                ..Default::default()
            },
            ..Default::default()
        };
        let later = KernelStats {
            syscalls: vec![
                sc("read", 9, &[("EAGAIN", 3), ("EINTR", 1)]),
                sc("openat", 3, &[]),
                sc("close", 2, &[]),
            ],
            io: vec![io(10, 4)],
            epoll_ctl: EpollCtlOps {
                add: 4,
                modify: 2,
                ..Default::default()
            },
            sched: SchedStats {
                wakeups: 10,
                ..Default::default()
            },
            ..Default::default()
        };
        let d = later.since(&earlier);
        let names: Vec<_> = d
            .syscalls
            .iter()
            .map(|s| (s.name.as_str(), s.count))
            .collect();
        assert_eq!(names, [("read", 4), ("close", 2)]);
        assert_eq!(d.syscalls[0].errors, 2);
        assert_eq!(d.syscalls[0].time_ns, 40);
        let errnos: Vec<_> = d.syscalls[0]
            .errnos
            .iter()
            .map(|e| (e.errno.as_str(), e.count))
            .collect();
        assert_eq!(errnos, [("EAGAIN", 1), ("EINTR", 1)]);
        assert_eq!(d.io.len(), 1);
        assert_eq!(d.io[0].calls, 6);
        assert_eq!(d.io[0].bytes, 6 * 1024);
        assert_eq!(
            d.io[0].sizes,
            [SizeBucket {
                min_bytes: 1024,
                max_bytes: 2047,
                count: 6
            }]
        );
        assert_eq!(
            d.epoll_ctl,
            EpollCtlOps {
                add: 3,
                modify: 2,
                delete: 0,
                other: 0
            }
        );
        assert_eq!(d.sched.wakeups, 3);
        assert_eq!(d.syscall_count("close"), 2);
        assert_eq!(d.syscall_count("openat"), 0);
    }

    #[test]
    fn since_itself_is_empty() {
        let k = KernelStats {
            syscalls: vec![sc("write", 3, &[("EPIPE", 1)])],
            io: vec![io(3, 1)],
            ..Default::default()
        };
        assert_eq!(k.since(&k), KernelStats::default());
    }

    #[test]
    fn a_record_with_syscall_counts_only_still_reads() {
        let k: KernelStats =
            serde_json::from_str(r#"{"syscalls":[{"name":"write","count":3}]}"#).unwrap();
        assert_eq!(k.syscall_count("write"), 3);
        assert_eq!(k.sched, SchedStats::default());
    }
}
