//! The probes' in-kernel counters as read from their maps ([`Raw`], summed over CPUs), and their
//! decoding into the record's [`KernelStats`].

use reqcost_record::{
    DelayBucket, EpollCtlOps, ErrnoCount, IoDirection, IoStat, IoctlStat, KernelStats, MemoryStats,
    OpenedPath, SchedStats, SizeBucket, SocketStats, SyscallStat, TreeStats, UdpStats, WaitStat,
};

use crate::layout::*;
use crate::names::{errno_name, syscall_name};

/// The probes' maps as read at one moment, each per-CPU value summed over CPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct Raw {
    /// `sys`: SYS_FIELDS u64 per syscall number.
    pub sys: Vec<u64>,
    /// `misc`: counters, wait fields, run-queue histogram.
    pub misc: Vec<u64>,
    /// `io_tot`: calls, then bytes, then messages per (op, kind).
    pub io_tot: Vec<u64>,
    /// `io_hist`: size buckets per (op, kind).
    pub io_hist: Vec<u64>,
    /// `errnos`: (syscall number, errno) → count.
    pub errnos: Vec<((u32, u32), u64)>,
    /// `ioctls`: request code → count.
    pub ioctls: Vec<(u32, u64)>,
    /// `opens`: path as the call named it (its first `OPEN_PATH_LEN - 1` bytes) → count.
    pub opens: Vec<(String, u64)>,
}

impl Raw {
    #[cfg(test)]
    pub fn zeroed() -> Raw {
        Raw {
            sys: vec![0; SYS_LEN],
            misc: vec![0; misc_slot::MISC_LEN.at()],
            io_tot: vec![0; IO_TOT_LEN],
            io_hist: vec![0; IO_HIST_LEN],
            errnos: Vec::new(),
            ioctls: Vec::new(),
            opens: Vec::new(),
        }
    }

    pub fn decode(&self) -> KernelStats {
        let ctr = |c: misc_slot| self.misc[c.at()];
        let closes = |k: usize| self.misc[misc_slot::CTR_CLOSES.at() + k];
        KernelStats {
            syscalls: self.syscalls(),
            io: self.io(),
            ioctls: self.ioctls(),
            opened: self.opened(),
            epoll_ctl: EpollCtlOps {
                add: ctr(misc_slot::CTR_EPOLL_ADD),
                modify: ctr(misc_slot::CTR_EPOLL_MOD),
                delete: ctr(misc_slot::CTR_EPOLL_DEL),
                other: ctr(misc_slot::CTR_EPOLL_OTHER),
            },
            waits: self.waits(),
            sched: SchedStats {
                wakeups: ctr(misc_slot::CTR_WAKEUPS),
                voluntary_switches: ctr(misc_slot::CTR_SWITCH_VOLUNTARY),
                involuntary_switches: ctr(misc_slot::CTR_SWITCH_INVOLUNTARY),
                runqueue_waits: ctr(misc_slot::CTR_RUNQ_WAITS),
                runqueue_delay_ns: ctr(misc_slot::CTR_RUNQ_NS),
                runqueue_histogram: self.runqueue_histogram(),
            },
            memory: MemoryStats {
                page_faults_user: ctr(misc_slot::CTR_FAULTS_USER),
                page_faults_kernel: ctr(misc_slot::CTR_FAULTS_KERNEL),
                mmap_bytes: ctr(misc_slot::CTR_MMAP_BYTES),
                munmap_bytes: ctr(misc_slot::CTR_MUNMAP_BYTES),
            },
            sockets: SocketStats {
                accepted: ctr(misc_slot::CTR_ACCEPTS),
                closed: closes(KIND_SOCKET) + closes(KIND_UDP),
                other_closes: (0..NR_KINDS)
                    .filter(|&k| k != KIND_SOCKET && k != KIND_UDP)
                    .map(closes)
                    .sum(),
            },
            udp: self.udp(),
            tree: self.tree(),
            lost_events: [
                misc_slot::CTR_LOST_TASKS,
                misc_slot::CTR_LOST_ERRNOS,
                misc_slot::CTR_LOST_IOCTLS,
                misc_slot::CTR_LOST_RUNQ,
                misc_slot::CTR_LOST_OPENS,
            ]
            .map(ctr)
            .iter()
            .sum(),
        }
    }

    /// What the probes count of an upstream hop in its own sets of `sys` and `misc`
    /// (docs/stack.md): its calls (no errnos), its processes and its user page faults. The
    /// rest is counted for the target only, and left empty rather than read as none.
    pub fn decode_hop(&self) -> KernelStats {
        KernelStats {
            syscalls: self.syscalls(),
            memory: MemoryStats {
                page_faults_user: self.misc[misc_slot::CTR_FAULTS_USER.at()],
                ..MemoryStats::default()
            },
            tree: self.tree(),
            ..KernelStats::default()
        }
    }

    fn tree(&self) -> TreeStats {
        let ctr = |c: misc_slot| self.misc[c.at()];
        TreeStats {
            processes_forked: ctr(misc_slot::CTR_FORKS),
            threads_created: ctr(misc_slot::CTR_THREADS),
            processes_exited: ctr(misc_slot::CTR_EXITS),
        }
    }

    fn syscalls(&self) -> Vec<SyscallStat> {
        let mut out: Vec<SyscallStat> = self
            .sys
            .chunks_exact(SYS_FIELDS)
            .enumerate()
            .filter(|(_, f)| f.iter().any(|&v| v > 0))
            .map(|(nr, f)| {
                let mut errnos: Vec<ErrnoCount> = self
                    .errnos
                    .iter()
                    .filter(|((id, _), n)| *id as usize == nr && *n > 0)
                    .map(|&((_, err), count)| ErrnoCount {
                        errno: errno_name(err),
                        count,
                    })
                    .collect();
                errnos.sort_by(|a, b| b.count.cmp(&a.count).then(a.errno.cmp(&b.errno)));
                SyscallStat {
                    name: syscall_name(nr as u32),
                    count: f[SYS_COUNT],
                    time_ns: f[SYS_TIME_NS],
                    errors: f[SYS_ERRORS],
                    errnos,
                }
            })
            .collect();
        out.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)));
        out
    }

    /// Datagrams and bytes over every call on a UDP socket, by direction.
    fn udp(&self) -> UdpStats {
        let mut udp = UdpStats::default();
        for (op, (_, direction)) in IO_OPS.iter().enumerate() {
            let slot = op * NR_KINDS + KIND_UDP;
            let (messages, bytes) = (
                self.io_tot[2 * IO_SLOTS + slot],
                self.io_tot[IO_SLOTS + slot],
            );
            let (datagrams, total) = match direction {
                IoDirection::Write => (&mut udp.datagrams_sent, &mut udp.bytes_sent),
                IoDirection::Read => (&mut udp.datagrams_received, &mut udp.bytes_received),
            };
            *datagrams += messages;
            *total += bytes;
        }
        udp
    }

    fn io(&self) -> Vec<IoStat> {
        let mut out = Vec::new();
        for (op, (name, direction)) in IO_OPS.iter().enumerate() {
            for (k, kind) in KINDS.iter().enumerate() {
                let slot = op * NR_KINDS + k;
                let calls = self.io_tot[slot];
                if calls == 0 {
                    continue;
                }
                let hist = &self.io_hist[slot * NR_SIZE_BUCKETS..(slot + 1) * NR_SIZE_BUCKETS];
                out.push(IoStat {
                    syscall: (*name).to_string(),
                    direction: *direction,
                    fd_kind: *kind,
                    calls,
                    bytes: self.io_tot[IO_SLOTS + slot],
                    sizes: nonempty_buckets(hist, |b, count| {
                        let (min_bytes, max_bytes) = size_bucket_bounds(b);
                        SizeBucket {
                            min_bytes,
                            max_bytes,
                            count,
                        }
                    }),
                });
            }
        }
        out.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.syscall.cmp(&b.syscall)));
        out
    }

    fn ioctls(&self) -> Vec<IoctlStat> {
        let mut out: Vec<IoctlStat> = self
            .ioctls
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|&(request, count)| IoctlStat {
                request,
                name: ioctl_name(request).map(str::to_string),
                count,
            })
            .collect();
        out.sort_by(|a, b| b.count.cmp(&a.count).then(a.request.cmp(&b.request)));
        out
    }

    fn opened(&self) -> Vec<OpenedPath> {
        let mut out: Vec<OpenedPath> = self
            .opens
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(path, count)| OpenedPath {
                path: path.clone(),
                count: *count,
            })
            .collect();
        out.sort_by(|a, b| b.count.cmp(&a.count).then(a.path.cmp(&b.path)));
        out
    }

    fn waits(&self) -> Vec<WaitStat> {
        WAIT_OPS
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let at = misc_slot::MISC_WAITS.at() + i * WAIT_FIELDS;
                let f = &self.misc[at..at + WAIT_FIELDS];
                WaitStat {
                    syscall: (*name).to_string(),
                    returns: f[0],
                    zero_ready: f[1],
                    ready: f[2],
                    fds_asked: f[3],
                }
            })
            .filter(|w| w.returns > 0)
            .collect()
    }

    fn runqueue_histogram(&self) -> Vec<DelayBucket> {
        let at = misc_slot::MISC_RUNQ_HIST.at();
        let hist = &self.misc[at..at + NR_RUNQ_BUCKETS];
        nonempty_buckets(hist, |b, count| {
            let (min_us, max_us) = delay_bucket_bounds(b);
            DelayBucket {
                min_us,
                max_us,
                count,
            }
        })
    }
}

/// The histogram's non-empty buckets, each made by `bucket(index, count)`.
fn nonempty_buckets<B>(counts: &[u64], bucket: impl Fn(usize, u64) -> B) -> Vec<B> {
    counts
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(b, &n)| bucket(b, n))
        .collect()
}

/// Sizes counted in byte-size bucket `b` (inclusive): 0 for bucket 0, else [2^(b-1), 2^b - 1];
/// the last bucket is open-ended.
pub fn size_bucket_bounds(b: usize) -> (u64, u64) {
    match b {
        0 => (0, 0),
        _ if b == NR_SIZE_BUCKETS - 1 => (1 << (b - 1), u64::MAX),
        _ => (1 << (b - 1), (1 << b) - 1),
    }
}

/// Delays counted in run-queue bucket `b`, in µs, as [min, max): the last one is open-ended.
pub fn delay_bucket_bounds(b: usize) -> (u64, u64) {
    let min = if b == 0 { 0 } else { 1 << (b - 1) };
    let max = if b == NR_RUNQ_BUCKETS - 1 {
        u64::MAX
    } else {
        1 << b
    };
    (min, max)
}

/// Names of the request codes servers commonly issue (x86_64 values).
pub fn ioctl_name(request: u32) -> Option<&'static str> {
    Some(match request {
        0x5401 => "TCGETS",
        0x5402 => "TCSETS",
        0x540F => "TIOCGPGRP",
        0x5410 => "TIOCSPGRP",
        0x5411 => "SIOCOUTQ/TIOCOUTQ",
        0x5413 => "TIOCGWINSZ",
        0x541B => "FIONREAD/SIOCINQ",
        0x5421 => "FIONBIO",
        0x5450 => "FIONCLEX",
        0x5451 => "FIOCLEX",
        0x5452 => "FIOASYNC",
        0x8905 => "SIOCATMARK",
        0x8912 => "SIOCGIFCONF",
        0x8915 => "SIOCGIFADDR",
        0x8927 => "SIOCGIFHWADDR",
        0x8933 => "SIOCGIFINDEX",
        0x894B => "SIOCOUTQNSD",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::syscall_number;
    use reqcost_record::{FdKind, IoDirection};

    fn nr(name: &str) -> usize {
        syscall_number(name).unwrap() as usize
    }

    #[test]
    fn bucket_bounds_cover_sizes_without_gaps() {
        assert_eq!(size_bucket_bounds(0), (0, 0));
        assert_eq!(size_bucket_bounds(1), (1, 1));
        assert_eq!(size_bucket_bounds(2), (2, 3));
        assert_eq!(size_bucket_bounds(11), (1024, 2047));
        for b in 1..NR_SIZE_BUCKETS {
            assert_eq!(size_bucket_bounds(b).0, size_bucket_bounds(b - 1).1 + 1);
        }
        assert_eq!(size_bucket_bounds(NR_SIZE_BUCKETS - 1).1, u64::MAX);
        assert_eq!(delay_bucket_bounds(0), (0, 1));
        assert_eq!(delay_bucket_bounds(4), (8, 16));
        assert_eq!(delay_bucket_bounds(NR_RUNQ_BUCKETS - 1).1, u64::MAX);
    }

    #[test]
    fn decode_names_and_orders_everything() {
        let mut raw = Raw::zeroed();
        raw.sys[nr("write") * SYS_FIELDS + SYS_COUNT] = 7;
        raw.sys[nr("write") * SYS_FIELDS + SYS_TIME_NS] = 700;
        raw.sys[nr("openat") * SYS_FIELDS + SYS_COUNT] = 9;
        raw.sys[nr("openat") * SYS_FIELDS + SYS_ERRORS] = 4;
        raw.errnos = vec![
            ((nr("openat") as u32, 2), 3),
            ((nr("openat") as u32, 13), 1),
        ];
        // writev to a socket (op 10, kind 0): three calls, 2 of 100 bytes and 1 of 4096.
        let slot = 10 * NR_KINDS;
        raw.io_tot[slot] = 3;
        raw.io_tot[IO_SLOTS + slot] = 4296;
        raw.io_hist[slot * NR_SIZE_BUCKETS + 7] = 2;
        raw.io_hist[slot * NR_SIZE_BUCKETS + 13] = 1;
        raw.ioctls = vec![(0x5411, 5), (0x1234, 6)];
        raw.opens = vec![
            ("/etc/hosts".into(), 2),
            ("/var/log/a.log".into(), 7),
            ("gone".into(), 0),
        ];
        raw.misc[misc_slot::CTR_EPOLL_MOD.at()] = 4;
        let closes = misc_slot::CTR_CLOSES.at();
        raw.misc[closes] = 2;
        raw.misc[closes + 1] = 1;
        raw.misc[closes + KIND_UDP] = 1;
        // sendmmsg on a UDP socket (op 15): 2 calls, 10 datagrams of 1200 bytes; recvfrom
        // (op 5): 4 calls of 30 bytes.
        let (mmsg, recv) = (15 * NR_KINDS + KIND_UDP, 5 * NR_KINDS + KIND_UDP);
        raw.io_tot[mmsg] = 2;
        raw.io_tot[IO_SLOTS + mmsg] = 12_000;
        raw.io_tot[2 * IO_SLOTS + mmsg] = 10;
        raw.io_tot[recv] = 4;
        raw.io_tot[IO_SLOTS + recv] = 120;
        raw.io_tot[2 * IO_SLOTS + recv] = 4;
        raw.misc[misc_slot::CTR_LOST_TASKS.at()] = 1;
        raw.misc[misc_slot::MISC_WAITS.at()] = 10;
        raw.misc[misc_slot::MISC_WAITS.at() + 1] = 3;
        raw.misc[misc_slot::MISC_RUNQ_HIST.at() + 2] = 5;

        let k = raw.decode();
        let names: Vec<_> = k
            .syscalls
            .iter()
            .map(|s| (s.name.as_str(), s.count))
            .collect();
        assert_eq!(names, [("openat", 9), ("write", 7)]);
        assert_eq!(k.syscalls[0].errors, 4);
        assert_eq!(
            k.syscalls[0].errnos[0],
            ErrnoCount {
                errno: "ENOENT".into(),
                count: 3
            }
        );
        assert_eq!(k.syscalls[0].errnos[1].errno, "EACCES");
        assert_eq!(k.syscalls[1].time_ns, 700);
        assert_eq!(k.io.len(), 3);
        assert_eq!(
            k.udp,
            UdpStats {
                datagrams_sent: 10,
                datagrams_received: 4,
                bytes_sent: 12_000,
                bytes_received: 120
            }
        );
        let udp: Vec<_> =
            k.io.iter()
                .filter(|s| s.fd_kind == FdKind::Udp)
                .map(|s| (s.syscall.as_str(), s.calls))
                .collect();
        assert_eq!(udp, [("recvfrom", 4), ("sendmmsg", 2)]);
        let io = &k.io[1];
        assert_eq!(
            (io.syscall.as_str(), io.direction, io.fd_kind),
            ("writev", IoDirection::Write, FdKind::Socket)
        );
        assert_eq!((io.calls, io.bytes), (3, 4296));
        assert_eq!(
            io.sizes,
            [
                SizeBucket {
                    min_bytes: 64,
                    max_bytes: 127,
                    count: 2
                },
                SizeBucket {
                    min_bytes: 4096,
                    max_bytes: 8191,
                    count: 1
                }
            ]
        );
        assert_eq!(k.ioctls[0].request, 0x1234);
        assert_eq!(k.ioctls[0].name, None);
        assert_eq!(k.ioctls[1].name.as_deref(), Some("SIOCOUTQ/TIOCOUTQ"));
        let opened: Vec<(&str, u64)> = k
            .opened
            .iter()
            .map(|o| (o.path.as_str(), o.count))
            .collect();
        assert_eq!(opened, [("/var/log/a.log", 7), ("/etc/hosts", 2)]);
        assert_eq!(k.epoll_ctl.modify, 4);
        assert_eq!((k.sockets.closed, k.sockets.other_closes), (3, 1));
        assert_eq!(k.lost_events, 1);
        assert_eq!(k.waits.len(), 1);
        assert_eq!(
            (
                k.waits[0].syscall.as_str(),
                k.waits[0].returns,
                k.waits[0].zero_ready
            ),
            ("epoll_wait", 10, 3)
        );
        assert_eq!(
            k.sched.runqueue_histogram,
            [DelayBucket {
                min_us: 2,
                max_us: 4,
                count: 5
            }]
        );
    }

    #[test]
    fn nothing_counted_decodes_to_the_default() {
        assert_eq!(Raw::zeroed().decode(), KernelStats::default());
        assert_eq!(Raw::zeroed().decode_hop(), KernelStats::default());
    }

    /// An upstream hop's sets hold its calls, processes and user page faults; what its
    /// `misc` set would hold of the rest is none of its figures (the probes count it for the
    /// target only).
    #[test]
    fn a_hop_decodes_its_calls_processes_and_faults_only() {
        let mut raw = Raw::zeroed();
        raw.sys[nr("clone") * SYS_FIELDS + SYS_COUNT] = 3;
        raw.sys[nr("clone") * SYS_FIELDS + SYS_TIME_NS] = 300;
        raw.misc[misc_slot::CTR_FORKS.at()] = 3;
        raw.misc[misc_slot::CTR_EXITS.at()] = 2;
        raw.misc[misc_slot::CTR_FAULTS_USER.at()] = 900;
        raw.misc[misc_slot::CTR_ACCEPTS.at()] = 5;
        let k = raw.decode_hop();
        let calls: Vec<(&str, u64, u64)> = k
            .syscalls
            .iter()
            .map(|s| (s.name.as_str(), s.count, s.time_ns))
            .collect();
        assert_eq!(calls, [("clone", 3, 300)]);
        assert_eq!((k.tree.processes_forked, k.tree.processes_exited), (3, 2));
        assert_eq!(k.memory.page_faults_user, 900);
        assert_eq!(k.sockets, SocketStats::default());
    }
}
