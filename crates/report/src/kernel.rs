//! The kernel figures of one phase (eBPF probes), per request: what the server asked the kernel
//! to do for each request. Field meanings: docs/kernel-stats.md.

use std::fmt::Write;

use reqcost_analysis::kernel_figures::{
    KernelFigures, ProbeCostFigures, SchedFigures, SizeFigures, UdpFigures,
};
use reqcost_record::IoDirection;

use crate::format::{bucket_label, fmt_bytes, fmt_duration_us, fmt_rate};

/// (syscall, fd kind) lines listed per direction.
const TOP_IO: usize = 6;
/// Size buckets shown per line, the most populated ones.
const TOP_BUCKETS: usize = 4;

/// `per request`, or, when the figures are totals, that they are and why.
fn per_label(per_unit: bool, unit: &str) -> String {
    match (per_unit, unit) {
        (true, unit) => format!("per {unit}"),
        (false, "request") => "totals: no successful requests".into(),
        (false, unit) => format!("totals: no {unit} counted"),
    }
}

/// The kernel block of a phase, its figures per `unit` (request, MiB, ...) or totals, said to
/// be so, when none was counted.
pub fn kernel_section(k: &KernelFigures, unit: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "  kernel ({}, from eBPF)", per_label(k.per_unit, unit));
    syscalls(&mut out, k);
    io(&mut out, k);
    ioctl_and_epoll(&mut out, k);
    waits(&mut out, k);
    scheduling(&mut out, &k.sched);
    memory(&mut out, k);
    let _ = writeln!(
        out,
        "    connections  {} accepted · {} sockets closed",
        fmt_rate(k.accepted),
        fmt_rate(k.sockets_closed)
    );
    if let Some(u) = &k.udp {
        udp(&mut out, u);
    }
    if let Some(t) = &k.tree {
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

/// Datagrams moved on UDP sockets.
fn udp(out: &mut String, u: &UdpFigures) {
    let _ = writeln!(
        out,
        "    udp          {} datagrams sent ({}) · {} received ({})",
        fmt_rate(u.datagrams_sent),
        fmt_bytes(u.bytes_sent),
        fmt_rate(u.datagrams_received),
        fmt_bytes(u.bytes_received)
    );
}

/// The last lines of the kernel block: what the probes themselves ran on the server's events
/// (inside its CPU figures), as a share of its CPU when known, and on the whole machine when
/// measured (labelled as such: other processes' events included).
pub fn probe_cost_line(cost: &ProbeCostFigures, unit: &str) -> String {
    let unit = if cost.per_unit {
        per_label(true, unit)
    } else {
        "in total".into()
    };
    let share = cost
        .percent_of_cpu
        .map(|pct| format!(", {pct:.1} % of its CPU"))
        .unwrap_or_default();
    let mut out = format!(
        "    probes' own cost on the server's events: {} {unit} ({} program runs{share})\n",
        fmt_duration_us(cost.tree.time_us),
        fmt_rate(cost.tree.program_runs)
    );
    if let Some(up) = &cost.upstream {
        out.push_str(&format!(
            "    probes' own cost on the upstream hops' events (in their trees' CPU): {} {unit} \
             ({} program runs)\n",
            fmt_duration_us(up.time_us),
            fmt_rate(up.program_runs)
        ));
    }
    if let Some(m) = &cost.machine {
        out.push_str(&format!(
            "    probes' own cost on the whole machine (other processes' events included): {} {unit} \
             ({} program runs)\n",
            fmt_duration_us(m.time_us),
            fmt_rate(m.program_runs)
        ));
    }
    if let (Some(rest), Some(pct)) = (&cost.other_processes, cost.other_processes_percent) {
        out.push_str(&format!(
            "      of which on other processes' events, not in the server's CPU: {} {unit} \
             ({} program runs, {pct:.0} % of the whole machine's time)\n",
            fmt_duration_us(rest.time_us),
            fmt_rate(rest.program_runs)
        ));
    }
    if let Some(u) = &cost.uretprobe {
        out.push_str(&format!(
            "    probes' uretprobe syscalls in the server's threads (the return probes' trap, in no \
             syscall figure nor request's CPU): {} calls {unit}, {}\n",
            fmt_rate(u.calls),
            fmt_duration_us(u.time_us)
        ));
    }
    out
}

/// All syscalls, then the busiest by name with their failures; the rest on one line.
fn syscalls(out: &mut String, k: &KernelFigures) {
    let _ = writeln!(
        out,
        "    syscalls     {} calls · {} inside them (blocked time included)",
        fmt_rate(k.syscalls),
        fmt_duration_us(k.syscall_time_us)
    );
    for s in &k.by_syscall {
        let mut line = format!(
            "      {:<18} {:>8}  {:>9}",
            s.name,
            fmt_rate(s.calls),
            fmt_duration_us(s.time_us)
        );
        if !s.failed.is_empty() {
            let named: Vec<String> = s
                .failed
                .iter()
                .map(|(errno, calls)| format!("{} {errno}", fmt_rate(*calls)))
                .collect();
            let _ = write!(line, "  failed {}", named.join(", "));
        }
        let _ = writeln!(out, "{line}");
    }
    if let Some(rest) = &k.other_syscalls {
        let _ = writeln!(
            out,
            "      {} more syscalls, {} calls",
            rest.names,
            fmt_rate(rest.calls)
        );
    }
}

/// Writes, then reads, by (syscall, fd kind), with their sizes.
fn io(out: &mut String, k: &KernelFigures) {
    for (direction, label, arrow) in [
        (IoDirection::Write, "writes", "→"),
        (IoDirection::Read, "reads", "←"),
    ] {
        let lines = k.io.iter().filter(|s| s.direction == direction);
        for (i, s) in lines.take(TOP_IO).enumerate() {
            let head = if i == 0 { label } else { "" };
            let _ = writeln!(
                out,
                "    {head:<12} {} {arrow} {}: {} calls, {} each on average ({})",
                s.syscall,
                s.fd_kind.as_str(),
                fmt_rate(s.calls),
                fmt_bytes(s.bytes_each),
                buckets(&s.sizes)
            );
        }
    }
}

fn ioctl_and_epoll(out: &mut String, k: &KernelFigures) {
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
                format!("{name} {}", fmt_rate(i.calls))
            })
            .collect();
        let _ = writeln!(out, "    ioctl        {}", codes.join(" · "));
    }
    if let Some(e) = &k.epoll_ctl {
        let mut ops = format!(
            "add {} · mod {} · del {}",
            fmt_rate(e.add),
            fmt_rate(e.modify),
            fmt_rate(e.delete)
        );
        if e.other > 0.0 {
            let _ = write!(ops, " · other {}", fmt_rate(e.other));
        }
        let _ = writeln!(out, "    epoll_ctl    {ops}");
    }
}

/// Readiness waits (epoll_wait, poll, select): how often and how much each found.
fn waits(out: &mut String, k: &KernelFigures) {
    for w in &k.waits {
        let asked = fmt_rate(w.asked_per_call);
        let _ = writeln!(
            out,
            "    waits        {} {} returns, {} with nothing ready, {} ready per return, {}",
            w.syscall,
            fmt_rate(w.returns),
            fmt_rate(w.nothing_ready),
            fmt_rate(w.ready_per_return),
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

fn scheduling(out: &mut String, s: &SchedFigures) {
    let mut sched = format!(
        "wakeups {} · switches {} voluntary, {} involuntary",
        fmt_rate(s.wakeups),
        fmt_rate(s.voluntary_switches),
        fmt_rate(s.involuntary_switches)
    );
    if let Some(q) = &s.runqueue {
        let _ = write!(
            sched,
            " · run-queue delay {} ({} waits, {} mean",
            fmt_duration_us(q.delay_us),
            fmt_rate(q.waits),
            fmt_duration_us(q.mean_us)
        );
        if let Some((min_us, max_us)) = q.longest_us {
            let longest = if max_us == u64::MAX {
                format!("{} or more", fmt_duration_us(min_us as f64))
            } else {
                format!(
                    "{}-{}",
                    fmt_duration_us(min_us as f64),
                    fmt_duration_us(max_us as f64)
                )
            };
            let _ = write!(sched, ", longest {longest}");
        }
        sched.push(')');
    }
    let _ = writeln!(out, "    scheduling   {sched}");
}

fn memory(out: &mut String, k: &KernelFigures) {
    let m = &k.memory;
    let mut memory = format!(
        "page faults {} in user mode, {} in the kernel",
        fmt_rate(m.page_faults_user),
        fmt_rate(m.page_faults_kernel)
    );
    if !m.mapping_calls.is_empty() {
        let mmaps: Vec<String> = m
            .mapping_calls
            .iter()
            .map(|(n, calls)| format!("{n} {}", fmt_rate(*calls)))
            .collect();
        let _ = write!(
            memory,
            " · {} ({} mapped, {} unmapped)",
            mmaps.join(", "),
            fmt_bytes(m.mapped_bytes),
            fmt_bytes(m.unmapped_bytes)
        );
    }
    let _ = writeln!(out, "    memory       {memory}");
}

/// The most populated size buckets, smallest first: `64-127 B 0.98, 1-2 KiB 0.02`.
fn buckets(sizes: &[SizeFigures]) -> String {
    let mut top: Vec<&SizeFigures> = sizes.iter().collect();
    top.sort_by(|a, b| b.count.cmp(&a.count).then(a.min_bytes.cmp(&b.min_bytes)));
    top.truncate(TOP_BUCKETS);
    top.sort_by_key(|b| b.min_bytes);
    let mut parts: Vec<String> = top
        .iter()
        .map(|b| {
            format!(
                "{} {}",
                bucket_label(b.min_bytes, b.max_bytes),
                fmt_rate(b.calls)
            )
        })
        .collect();
    if sizes.len() > TOP_BUCKETS {
        parts.push(format!("{} more sizes", sizes.len() - TOP_BUCKETS));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_record::{
        ClientStats, CpuTimes, EpollCtlOps, ErrnoCount, FdKind, IoStat, IoctlStat, KernelStats,
        PerRequest, Phase, ProbeCost, SchedStats, ServerTotals, SizeBucket, SyscallStat, WaitStat,
    };

    /// A phase of `ok` requests whose server made the calls of `k`.
    fn phase(k: KernelStats, ok: u64) -> Phase {
        Phase {
            name: "main".into(),
            client_model: None,
            client: ClientStats {
                ok,
                ..Default::default()
            },
            server: ServerTotals {
                kernel: Some(k),
                ..Default::default()
            },
            per_request: PerRequest::default(),
            missing: Default::default(),
            requests: None,
            other_traffic: None,
            cpu_windows: None,
            unit: Default::default(),
            hops: vec![],
        }
    }

    /// The kernel block of `k` over `ok` requests.
    fn section(k: KernelStats, ok: u64) -> String {
        kernel_section(&KernelFigures::of(&phase(k, ok)).unwrap(), "request")
    }

    /// The probes' lines of `cost` over `ok` requests of a server that used `cpu_ns`.
    fn probe_lines(cost: &ProbeCost, ok: u64, cpu_ns: Option<u64>) -> String {
        let mut p = phase(KernelStats::default(), ok);
        p.server.probe_cost = Some(cost.clone());
        p.server.cpu = cpu_ns.map(|total_ns| CpuTimes {
            total_ns,
            ..Default::default()
        });
        let figures = KernelFigures::of(&p).unwrap();
        probe_cost_line(figures.probe_cost.as_ref().unwrap(), "request")
    }

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
        let text = section(small_writes(), 100);
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
        let text = section(small_writes(), 0);
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
        let text = probe_lines(&cost, 100, Some(1_000_000));
        assert_eq!(
            text,
            "    probes' own cost on the server's events: 0.5 µs per request (10 program runs, \
             5.0 % of its CPU)\n"
        );
        cost.machine_measured = true;
        cost.run_ns = 250_000;
        cost.runs = 4_000;
        let text = probe_lines(&cost, 100, None);
        assert!(
            text.contains("on the whole machine (other processes' events included): 2.5 µs per request (40 program runs)"),
            "{text}"
        );
        assert!(
            text.contains("of which on other processes' events, not in the server's CPU: 2.0 µs per request (30 program runs, 80 % of the whole machine's time)"),
            "{text}"
        );
        assert!(probe_lines(&cost, 0, None).contains("in total (4000 program runs)"));
        assert!(!text.contains("uretprobe"), "{text}");
        cost.uretprobe_calls = 300;
        cost.uretprobe_ns = 120_000;
        let text = probe_lines(&cost, 100, None);
        assert!(
            text.contains("probes' uretprobe syscalls in the server's threads (the return probes' trap, in no syscall figure nor request's CPU): 3 calls per request, 1.2 µs"),
            "{text}"
        );
    }

    #[test]
    fn lost_events_are_flagged() {
        let k = KernelStats {
            lost_events: 7,
            ..Default::default()
        };
        assert!(section(k, 1).contains("7 events not counted"));
    }
}
