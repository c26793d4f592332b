//! The kernel figures of one phase (eBPF probes), per request: what the server asked the kernel
//! to do for each request. Field meanings: docs/kernel-stats.md.

use std::fmt::Write;

use reqcost_analysis::profile::kernel_split;
use reqcost_record::{
    IoDirection, IoStat, KernelStats, ProbeCost, Profile, SchedStats, SizeBucket, UdpStats,
};

use crate::format::{fmt_bytes, fmt_count, fmt_duration_us};

/// Syscalls listed by name; the rest are summed on one line.
const TOP_SYSCALLS: usize = 12;
/// (syscall, fd kind) lines listed per direction.
const TOP_IO: usize = 6;
/// Size buckets shown per line, the most populated ones.
const TOP_BUCKETS: usize = 4;

/// Figures divided by the successful requests, or totals when there were none.
struct Per {
    div: f64,
}

impl Per {
    fn count(&self, v: u64) -> String {
        fmt_rate(v as f64 / self.div)
    }

    fn us(&self, ns: u64) -> String {
        fmt_duration_us(ns as f64 / 1000.0 / self.div)
    }

    fn bytes(&self, v: u64) -> String {
        fmt_bytes(v as f64 / self.div)
    }
}

impl Per {
    /// Per `unit` (`units` of them), or totals (and the label says so) when there were none.
    fn units(units: f64, unit: &str) -> (Per, String) {
        if units > 0.0 {
            (Per { div: units }, format!("per {unit}"))
        } else {
            let none = match unit {
                "request" => "no successful requests".to_string(),
                unit => format!("no {unit} counted"),
            };
            (Per { div: 1.0 }, format!("totals: {none}"))
        }
    }
}

/// Where in the kernel the sampled CPU went, over the whole run (docs/profile.md names the
/// functions of each subsystem); empty when no sample was in the kernel.
pub fn kernel_split_line(p: &Profile) -> String {
    match kernel_split(p) {
        Some(split) => format!("  kernel by subsystem: {}\n", split.parts_text()),
        None => String::new(),
    }
}

/// The kernel block of a phase, every figure divided by its `units` of work (`unit`: request,
/// MiB, ...); with none the totals are shown and said to be totals.
pub fn kernel_section(k: &KernelStats, units: f64, unit: &str) -> String {
    let mut out = String::new();
    let (per, unit) = Per::units(units, unit);
    let _ = writeln!(out, "  kernel ({unit}, from eBPF)");
    syscalls(&mut out, k, &per);
    io(&mut out, k, &per);
    ioctl_and_epoll(&mut out, k, &per);
    waits(&mut out, k, &per);
    scheduling(&mut out, &k.sched, &per);
    memory(&mut out, k, &per);
    let _ = writeln!(
        out,
        "    connections  {} accepted · {} sockets closed",
        per.count(k.sockets.accepted),
        per.count(k.sockets.closed)
    );
    udp(&mut out, &k.udp, &per);
    let t = &k.tree;
    if t.processes_forked + t.threads_created + t.processes_exited > 0 {
        let _ = writeln!(
            out,
            "    tree         {} processes forked · {} threads created · {} processes exited (totals)",
            t.processes_forked, t.threads_created, t.processes_exited
        );
    }
    if k.lost_events > 0 {
        let _ = writeln!(
            out,
            "    lost         {} events not counted: a kernel map was full (figures above are low)",
            k.lost_events
        );
    }
    out
}

/// Datagrams moved on UDP sockets, when there were any.
fn udp(out: &mut String, u: &UdpStats, per: &Per) {
    if u.datagrams_sent + u.datagrams_received == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "    udp          {} datagrams sent ({}) · {} received ({})",
        per.count(u.datagrams_sent),
        per.bytes(u.bytes_sent),
        per.count(u.datagrams_received),
        per.bytes(u.bytes_received)
    );
}

/// The last lines of the kernel block: what the probes themselves ran on the server's events
/// (inside its CPU figures), as a share of its CPU when known, and on the whole machine when
/// measured (labelled as such: other processes' events included).
pub fn probe_cost_line(
    cost: &ProbeCost,
    units: f64,
    unit: &str,
    tree_cpu_ns: Option<u64>,
) -> String {
    let (per, unit) = Per::units(units, unit);
    let unit = if units > 0.0 { &unit } else { "in total" };
    let share = tree_cpu_ns
        .filter(|c| *c > 0)
        .map(|c| {
            format!(
                ", {:.1} % of its CPU",
                100.0 * cost.tree_ns as f64 / c as f64
            )
        })
        .unwrap_or_default();
    let mut out = format!(
        "    probes' own cost on the server's events: {} {unit} ({} program runs{share})\n",
        per.us(cost.tree_ns),
        per.count(cost.tree_runs)
    );
    if cost.machine_measured {
        out.push_str(&format!(
            "    probes' own cost on the whole machine (other processes' events included): {} {unit} \
             ({} program runs)\n",
            per.us(cost.run_ns),
            per.count(cost.runs)
        ));
    }
    if let Some(rest) = cost.rest_of_machine_ns().filter(|_| cost.run_ns > 0) {
        out.push_str(&format!(
            "      of which on other processes' events, not in the server's CPU: {} {unit} \
             ({} program runs, {:.0} % of the whole machine's time)\n",
            per.us(rest),
            per.count(cost.runs.saturating_sub(cost.tree_runs)),
            100.0 * rest as f64 / cost.run_ns as f64
        ));
    }
    out
}

/// All syscalls, then the busiest by name with their failures; the rest on one line.
fn syscalls(out: &mut String, k: &KernelStats, per: &Per) {
    let time: u64 = k.syscalls.iter().map(|s| s.time_ns).sum();
    let _ = writeln!(
        out,
        "    syscalls     {} calls · {} inside them (blocked time included)",
        per.count(k.total_syscalls()),
        per.us(time)
    );
    for s in k.syscalls.iter().take(TOP_SYSCALLS) {
        let mut line = format!(
            "      {:<18} {:>8}  {:>9}",
            s.name,
            per.count(s.count),
            per.us(s.time_ns)
        );
        if s.errors > 0 {
            let named: Vec<String> = s
                .errnos
                .iter()
                .take(3)
                .map(|e| format!("{} {}", per.count(e.count), e.errno))
                .collect();
            let _ = write!(line, "  failed {}", named.join(", "));
        }
        let _ = writeln!(out, "{line}");
    }
    if k.syscalls.len() > TOP_SYSCALLS {
        let rest = &k.syscalls[TOP_SYSCALLS..];
        let _ = writeln!(
            out,
            "      {} more syscalls, {} calls",
            rest.len(),
            per.count(rest.iter().map(|s| s.count).sum())
        );
    }
}

/// Writes, then reads, by (syscall, fd kind), with their sizes.
fn io(out: &mut String, k: &KernelStats, per: &Per) {
    for (direction, label, arrow) in [
        (IoDirection::Write, "writes", "→"),
        (IoDirection::Read, "reads", "←"),
    ] {
        let lines: Vec<&IoStat> = k.io.iter().filter(|s| s.direction == direction).collect();
        for (i, s) in lines.iter().take(TOP_IO).enumerate() {
            let head = if i == 0 { label } else { "" };
            let _ = writeln!(
                out,
                "    {head:<12} {} {arrow} {}: {} calls, {} each on average ({})",
                s.syscall,
                s.fd_kind.as_str(),
                per.count(s.calls),
                fmt_bytes(s.bytes as f64 / s.calls as f64),
                buckets(&s.sizes, per.div)
            );
        }
    }
}

fn ioctl_and_epoll(out: &mut String, k: &KernelStats, per: &Per) {
    if !k.ioctls.is_empty() {
        let codes: Vec<String> = k
            .ioctls
            .iter()
            .take(5)
            .map(|i| {
                let name = i
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("{:#x}", i.request));
                format!("{name} {}", per.count(i.count))
            })
            .collect();
        let _ = writeln!(out, "    ioctl        {}", codes.join(" · "));
    }
    let e = &k.epoll_ctl;
    if e.add + e.modify + e.delete + e.other > 0 {
        let mut ops = format!(
            "add {} · mod {} · del {}",
            per.count(e.add),
            per.count(e.modify),
            per.count(e.delete)
        );
        if e.other > 0 {
            let _ = write!(ops, " · other {}", per.count(e.other));
        }
        let _ = writeln!(out, "    epoll_ctl    {ops}");
    }
}

/// Readiness waits (epoll_wait, poll, select): how often and how much each found.
fn waits(out: &mut String, k: &KernelStats, per: &Per) {
    for w in &k.waits {
        let asked = fmt_rate(w.fds_asked as f64 / w.returns as f64);
        let _ = writeln!(
            out,
            "    waits        {} {} returns, {} with nothing ready, {} ready per return, {}",
            w.syscall,
            per.count(w.returns),
            per.count(w.zero_ready),
            fmt_rate(w.ready as f64 / w.returns as f64),
            asked_text(&w.syscall, &asked)
        );
    }
}

/// What a wait's size argument is: epoll's room for events, poll's set, select's nfds (the
/// highest fd + 1, which the kernel scans in every set given, however few fds they hold).
fn asked_text(syscall: &str, asked: &str) -> String {
    if syscall.starts_with("epoll") {
        format!("{asked} events asked per call (maxevents)")
    } else if syscall.contains("select") {
        format!("nfds {asked} per call (highest fd + 1, not the sets' population)")
    } else {
        format!("{asked} fds asked per call")
    }
}

fn scheduling(out: &mut String, s: &SchedStats, per: &Per) {
    let mut sched = format!(
        "wakeups {} · switches {} voluntary, {} involuntary",
        per.count(s.wakeups),
        per.count(s.voluntary_switches),
        per.count(s.involuntary_switches)
    );
    if s.runqueue_waits > 0 {
        let _ = write!(
            sched,
            " · run-queue delay {} ({} waits, {} mean",
            per.us(s.runqueue_delay_ns),
            per.count(s.runqueue_waits),
            fmt_duration_us(s.runqueue_delay_ns as f64 / 1000.0 / s.runqueue_waits as f64)
        );
        if let Some(b) = s.runqueue_histogram.last() {
            let longest = if b.max_us == u64::MAX {
                format!("{} or more", fmt_duration_us(b.min_us as f64))
            } else {
                format!(
                    "{}-{}",
                    fmt_duration_us(b.min_us as f64),
                    fmt_duration_us(b.max_us as f64)
                )
            };
            let _ = write!(sched, ", longest {longest}");
        }
        sched.push(')');
    }
    let _ = writeln!(out, "    scheduling   {sched}");
}

fn memory(out: &mut String, k: &KernelStats, per: &Per) {
    let m = &k.memory;
    let mmaps = ["mmap", "munmap", "brk", "mremap"]
        .iter()
        .filter_map(|n| {
            let c = k.syscall_count(n);
            (c > 0).then(|| format!("{n} {}", per.count(c)))
        })
        .collect::<Vec<_>>();
    let mut memory = format!(
        "page faults {} in user mode, {} in the kernel",
        per.count(m.page_faults_user),
        per.count(m.page_faults_kernel)
    );
    if !mmaps.is_empty() {
        let _ = write!(
            memory,
            " · {} ({} mapped, {} unmapped)",
            mmaps.join(", "),
            per.bytes(m.mmap_bytes),
            per.bytes(m.munmap_bytes)
        );
    }
    let _ = writeln!(out, "    memory       {memory}");
}

/// The most populated size buckets, smallest first: `64-127 B 0.98, 1-2 KiB 0.02`.
fn buckets(sizes: &[SizeBucket], div: f64) -> String {
    let mut top: Vec<&SizeBucket> = sizes.iter().collect();
    top.sort_by(|a, b| b.count.cmp(&a.count).then(a.min_bytes.cmp(&b.min_bytes)));
    top.truncate(TOP_BUCKETS);
    top.sort_by_key(|b| b.min_bytes);
    let mut parts: Vec<String> = top
        .iter()
        .map(|b| format!("{} {}", bucket_label(b), fmt_rate(b.count as f64 / div)))
        .collect();
    if sizes.len() > TOP_BUCKETS {
        parts.push(format!("{} more sizes", sizes.len() - TOP_BUCKETS));
    }
    parts.join(", ")
}

/// `0 B`, `1 B`, `64-127 B`, `1-2 KiB` (1024 to 2047 bytes), `16 GiB or more`.
fn bucket_label(b: &SizeBucket) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    if b.max_bytes == u64::MAX {
        return format!("{} or more", fmt_bytes(b.min_bytes as f64));
    }
    if b.min_bytes == b.max_bytes {
        return format!("{} B", b.min_bytes);
    }
    let mut scale = 0;
    while scale + 1 < UNITS.len() && b.min_bytes >= 1 << (10 * (scale + 1)) {
        scale += 1;
    }
    if scale == 0 {
        format!("{}-{} B", b.min_bytes, b.max_bytes)
    } else {
        let unit = 1u64 << (10 * scale);
        format!(
            "{}-{} {}",
            b.min_bytes / unit,
            (b.max_bytes + 1) / unit,
            UNITS[scale]
        )
    }
}

/// Like `fmt_count`, but a rare event keeps two significant digits instead of showing as 0:
/// one accept per 8000 requests is `0.00012`.
fn fmt_rate(v: f64) -> String {
    if v > 0.0 && v < 0.005 {
        let decimals = 1 - v.log10().floor() as i32;
        format!("{v:.*}", decimals.max(0) as usize)
    } else {
        fmt_count(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_record::{
        EpollCtlOps, ErrnoCount, FdKind, IoctlStat, SchedStats, SyscallStat, WaitStat,
    };

    fn sc(name: &str, count: u64, time_ns: u64) -> SyscallStat {
        SyscallStat {
            name: name.into(),
            count,
            time_ns,
            ..Default::default()
        }
    }

    fn small_writes() -> KernelStats {
        let mut openat = sc("openat", 100, 500_000);
        openat.errors = 50;
        openat.errnos = vec![ErrnoCount {
            errno: "ENOENT".into(),
            count: 50,
        }];
        KernelStats {
            syscalls: vec![
                sc("write", 10_000, 20_000_000),
                sc("epoll_wait", 200, 1_000_000),
                openat,
            ],
            io: vec![IoStat {
                syscall: "write".into(),
                direction: IoDirection::Write,
                fd_kind: FdKind::Socket,
                calls: 10_000,
                bytes: 120_000,
                sizes: vec![
                    SizeBucket {
                        min_bytes: 8,
                        max_bytes: 15,
                        count: 9_900,
                    },
                    SizeBucket {
                        min_bytes: 1024,
                        max_bytes: 2047,
                        count: 100,
                    },
                ],
            }],
            ioctls: vec![IoctlStat {
                request: 0x5411,
                name: Some("SIOCOUTQ/TIOCOUTQ".into()),
                count: 300,
            }],
            epoll_ctl: EpollCtlOps {
                add: 100,
                modify: 400,
                delete: 100,
                other: 0,
            },
            waits: vec![WaitStat {
                syscall: "epoll_wait".into(),
                returns: 200,
                zero_ready: 20,
                ready: 360,
                fds_asked: 200 * 512,
            }],
            sched: SchedStats {
                wakeups: 300,
                voluntary_switches: 250,
                involuntary_switches: 50,
                runqueue_waits: 300,
                runqueue_delay_ns: 3_000_000,
                runqueue_histogram: vec![],
            },
            ..Default::default()
        }
    }

    #[test]
    fn figures_are_per_request() {
        let text = kernel_section(&small_writes(), 100.0, "request");
        assert!(text.contains("kernel (per request, from eBPF)"), "{text}");
        assert!(text.contains("103 calls · 215 µs inside them"), "{text}");
        assert!(text
            .lines()
            .any(|l| l.trim_start().starts_with("write") && l.contains(" 100 ")));
        assert!(text.contains("failed 0.50 ENOENT"), "{text}");
        assert!(
            text.contains("write → socket: 100 calls, 12 B each on average (8-15 B 99, 1-2 KiB 1)"),
            "{text}"
        );
        assert!(text.contains("SIOCOUTQ/TIOCOUTQ 3"), "{text}");
        assert!(text.contains("add 1 · mod 4 · del 1"), "{text}");
        assert!(text.contains("epoll_wait 2 returns, 0.20 with nothing ready, 1.80 ready per return, 512 events asked per call (maxevents)"), "{text}");
        assert!(text.contains("wakeups 3 · switches 2.50 voluntary, 0.50 involuntary · run-queue delay 30.0 µs (3 waits, 10.0 µs mean)"), "{text}");
        assert!(!text.contains("lost"));
    }

    #[test]
    fn no_successful_request_shows_totals() {
        let text = kernel_section(&small_writes(), 0.0, "request");
        assert!(text.contains("totals: no successful requests"), "{text}");
        assert!(text.contains("10300 calls"), "{text}");
    }

    #[test]
    fn probe_cost_is_per_request_and_split() {
        let mut cost = ProbeCost {
            tree_ns: 50_000,
            tree_runs: 1_000,
            ..ProbeCost::default()
        };
        let text = probe_cost_line(&cost, 100.0, "request", Some(1_000_000));
        assert_eq!(
            text,
            "    probes' own cost on the server's events: 0.5 µs per request (10 program runs, \
             5.0 % of its CPU)\n"
        );
        cost.machine_measured = true;
        cost.run_ns = 250_000;
        cost.runs = 4_000;
        let text = probe_cost_line(&cost, 100.0, "request", None);
        assert!(
            text.contains("on the whole machine (other processes' events included): 2.5 µs per request (40 program runs)"),
            "{text}"
        );
        assert!(
            text.contains("of which on other processes' events, not in the server's CPU: 2.0 µs per request (30 program runs, 80 % of the whole machine's time)"),
            "{text}"
        );
        assert!(
            probe_cost_line(&cost, 0.0, "request", None).contains("in total (4000 program runs)")
        );
    }

    #[test]
    fn lost_events_are_flagged() {
        let k = KernelStats {
            lost_events: 7,
            ..Default::default()
        };
        assert!(kernel_section(&k, 1.0, "request").contains("7 events not counted"));
    }

    #[test]
    fn rare_events_do_not_round_to_zero() {
        assert_eq!(fmt_rate(0.0), "0");
        assert_eq!(fmt_rate(0.000_123), "0.00012");
        assert_eq!(fmt_rate(0.0049), "0.0049");
        assert_eq!(fmt_rate(0.25), "0.25");
        assert_eq!(fmt_rate(3.0), "3");
    }

    #[test]
    fn bucket_labels() {
        let b = |min_bytes, max_bytes| SizeBucket {
            min_bytes,
            max_bytes,
            count: 1,
        };
        assert_eq!(bucket_label(&b(0, 0)), "0 B");
        assert_eq!(bucket_label(&b(1, 1)), "1 B");
        assert_eq!(bucket_label(&b(64, 127)), "64-127 B");
        assert_eq!(bucket_label(&b(1024, 2047)), "1-2 KiB");
        assert_eq!(bucket_label(&b(1 << 20, (2 << 20) - 1)), "1-2 MiB");
        assert_eq!(bucket_label(&b(1 << 34, u64::MAX)), "16.0 GiB or more");
    }
}
