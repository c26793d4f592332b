//! The per-request metrics that summaries, comparisons, sweeps and checks read from a phase, in
//! one list so that every command names, orders and sources them the same way.

use reqcost_record::{IoDirection, Phase, RequestStats};

use crate::document::server_split_too_few_ticks;
use crate::stats::{t_975, Ratio};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Depends on timing: compared as ratios with confidence intervals.
    Timed,
    /// Counted exactly (syscalls, bytes, wakeups): the same workload gives the same number.
    Count,
}

pub struct Metric {
    pub name: &'static str,
    pub unit: &'static str,
    pub kind: Kind,
    /// Throughput is the one metric where more is better.
    pub lower_is_better: bool,
    pub get: fn(&Phase) -> Option<f64>,
    /// Without the probes the figure falls back to /proc/PID/io, which counts read(2)/write(2)
    /// family calls only (socket send*/recv* are missing): see [`from_procfs`].
    pub procfs_fallback: bool,
}

/// The phase's call counts come from /proc/PID/io because the probes were off.
pub fn from_procfs(p: &Phase) -> bool {
    p.server.kernel.is_none()
}

fn per_ok(p: &Phase, v: u64) -> Option<f64> {
    let units = p.units();
    (units > 0.0).then(|| v as f64 / units)
}

/// Every syscall the tree made, per request (eBPF).
pub fn syscalls_per_request(p: &Phase) -> Option<f64> {
    let k = p.server.kernel.as_ref()?;
    per_ok(p, k.total_syscalls())
}

/// Write-like calls per request: every write/send variant from eBPF when present, else the
/// write(2)-family count from /proc/PID/io.
pub fn writes_per_request(p: &Phase) -> Option<f64> {
    match &p.server.kernel {
        Some(_) => io_calls_per_request(p, IoDirection::Write),
        None => p.per_request.write_syscalls,
    }
}

/// Read-like calls per request: every read/recv variant from eBPF when present, else the
/// read(2)-family count from /proc/PID/io.
pub fn reads_per_request(p: &Phase) -> Option<f64> {
    match &p.server.kernel {
        Some(_) => io_calls_per_request(p, IoDirection::Read),
        None => p.per_request.read_syscalls,
    }
}

fn io_calls_per_request(p: &Phase, direction: IoDirection) -> Option<f64> {
    let k = p.server.kernel.as_ref()?;
    let calls = k.io.iter().filter(|s| s.direction == direction);
    per_ok(p, calls.map(|s| s.calls).sum())
}

/// Fds the kernel looked at in readiness waits, per request: every fd of select/poll's set
/// (nfds), but only the ready events of epoll, whose cost follows them (eBPF). seeds/004's
/// select over every connection makes this grow with connections.
pub fn fds_scanned_per_request(p: &Phase) -> Option<f64> {
    let k = p.server.kernel.as_ref()?;
    let scanned = k.waits.iter().map(|w| {
        if w.syscall.starts_with("epoll") {
            w.ready
        } else {
            w.fds_asked
        }
    });
    per_ok(p, scanned.sum())
}

/// Context switches per request, voluntary and involuntary: the scheduler probe's when present,
/// else /proc/PID/status.
pub fn context_switches_per_request(p: &Phase) -> Option<f64> {
    match &p.server.kernel {
        Some(k) => per_ok(p, k.sched.voluntary_switches + k.sched.involuntary_switches),
        None => p.per_request.context_switches,
    }
}

/// The server tree's CPU over the phase's length, in % of one core (seeds/004 reports it so):
/// 100 % is one core kept busy, probes' cost included.
pub fn cpu_percent_of_core(p: &Phase) -> Option<f64> {
    let cpu = p.server.cpu.as_ref()?;
    (p.client.elapsed_s > 0.0).then(|| cpu.total_ns as f64 / 1e9 / p.client.elapsed_s * 100.0)
}

pub const METRICS: &[Metric] = &[
    Metric {
        name: "CPU",
        unit: "µs",
        kind: Kind::Timed,
        lower_is_better: true,
        get: |p| p.per_request.cpu_total_us,
        procfs_fallback: false,
    },
    Metric {
        name: "CPU user",
        unit: "µs",
        kind: Kind::Timed,
        lower_is_better: true,
        get: |p| {
            p.per_request
                .cpu_user_us
                .filter(|_| server_split_too_few_ticks(p).is_none())
        },
        procfs_fallback: false,
    },
    Metric {
        name: "CPU system",
        unit: "µs",
        kind: Kind::Timed,
        lower_is_better: true,
        get: |p| {
            p.per_request
                .cpu_system_us
                .filter(|_| server_split_too_few_ticks(p).is_none())
        },
        procfs_fallback: false,
    },
    Metric {
        name: "latency p50",
        unit: "µs",
        kind: Kind::Timed,
        lower_is_better: true,
        get: |p| (p.client.ok > 0).then_some(p.client.latency.p50_us),
        procfs_fallback: false,
    },
    Metric {
        name: "latency p99",
        unit: "µs",
        kind: Kind::Timed,
        lower_is_better: true,
        get: |p| (p.client.ok > 0).then_some(p.client.latency.p99_us),
        procfs_fallback: false,
    },
    Metric {
        name: "throughput",
        unit: "req/s",
        kind: Kind::Timed,
        lower_is_better: false,
        get: |p| (p.client.ok > 0).then_some(p.client.throughput_rps),
        procfs_fallback: false,
    },
    Metric {
        name: "syscalls",
        unit: "calls",
        kind: Kind::Count,
        lower_is_better: true,
        get: syscalls_per_request,
        procfs_fallback: false,
    },
    Metric {
        name: "write calls",
        unit: "calls",
        kind: Kind::Count,
        lower_is_better: true,
        get: writes_per_request,
        procfs_fallback: true,
    },
    Metric {
        name: "bytes received",
        unit: "B",
        kind: Kind::Count,
        lower_is_better: true,
        // What the load generator received: none when reqcost sent nothing (attach).
        get: |p| (p.client.ok > 0).then(|| p.client.bytes_received as f64 / p.client.ok as f64),
        procfs_fallback: false,
    },
    Metric {
        name: "fds scanned",
        unit: "",
        kind: Kind::Count,
        lower_is_better: true,
        get: fds_scanned_per_request,
        procfs_fallback: false,
    },
    Metric {
        name: "wakeups",
        unit: "",
        kind: Kind::Count,
        lower_is_better: true,
        get: |p| per_ok(p, p.server.kernel.as_ref()?.sched.wakeups),
        procfs_fallback: false,
    },
];

pub fn metric(name: &str) -> &'static Metric {
    METRICS
        .iter()
        .find(|m| m.name == name)
        .expect("metric names are fixed")
}

/// Fewer requests than this on either side, and a CPU change is judged on its point value: the
/// spread of so few says little about the mean. Student's t widens the interval of the few above
/// it; a slow-client phase (about 2 s, some 20 requests) is above it, so that its 80x change
/// gets a verdict and its noise is not taken for a regression.
pub const MIN_REQUESTS_FOR_INTERVAL: u64 = 10;

/// How far apart one phase's two measurements of its CPU per request came out, as the log of
/// their ratio: the probed pass or windows, less the probes' own run time on the server's
/// events, against the unprobed ones. The same requests measured twice in one record, apart in
/// time: what the machine moved the figure by between the two, which no request's spread shows
/// (a ~20-request phase measured 2.3x apart on a loaded machine). None without both
/// measurements or the probes' cost.
fn pass_drift(p: &Phase) -> Option<f64> {
    let w = p.cpu_windows.as_ref()?;
    let unprobed = w.unprobed.cpu_per_request_us().filter(|u| *u > 0.0)?;
    let probes_us = p.server.probe_cost.as_ref()?.tree_ns as f64 / 1000.0;
    let own = w.probed.cpu_per_request_us()? - probes_us / w.probed.requests as f64;
    (own > 0.0).then(|| (own / unprobed).ln())
}

/// A record's drift: the root mean square of its phases' [`pass_drift`]s, the standard
/// deviation on the log scale that the machine adds to any one measurement of CPU per request
/// in it; 0 when no phase was measured twice.
pub fn record_drift(phases: &[Phase]) -> f64 {
    let drifts: Vec<f64> = phases.iter().filter_map(pass_drift).collect();
    if drifts.is_empty() {
        return 0.0;
    }
    (drifts.iter().map(|d| d * d).sum::<f64>() / drifts.len() as f64).sqrt()
}

/// B/A of CPU per request `ratio` with its 95 % interval from one run each: the standard error
/// of each mean from its phase's per-request distribution (coefficient of variation over √n),
/// and each record's [`record_drift`] (`drift`, A's then B's: what the machine moved its
/// figures by, however many requests), combined on the log scale, as paired repetitions'
/// ratios are. The distributions cover the CPU attributed to requests; their relative spread
/// stands for that of the whole CPU per request. None when either phase counted under
/// [`MIN_REQUESTS_FOR_INTERVAL`] requests or kept no spread (records from before `stddev`).
pub fn per_request_ratio(a: &Phase, b: &Phase, ratio: f64, drift: [f64; 2]) -> Option<Ratio> {
    stats_ratio(a.requests.as_ref()?, b.requests.as_ref()?, ratio, drift)
}

/// [`per_request_ratio`] from two tallies of requests: a phase's, or an upstream hop's, whose
/// requests' spread stands for that of its CPU per front request.
pub fn stats_ratio(
    a: &RequestStats,
    b: &RequestStats,
    ratio: f64,
    drift: [f64; 2],
) -> Option<Ratio> {
    let variance = |r: &RequestStats| {
        let d = &r.cpu_per_request;
        let sd = d
            .stddev
            .filter(|_| r.requests >= MIN_REQUESTS_FOR_INTERVAL && d.mean > 0.0)?;
        Some((sd / d.mean).powi(2) / r.requests as f64)
    };
    let se = (variance(a)? + variance(b)? + drift[0].powi(2) + drift[1].powi(2)).sqrt();
    if !ratio.is_finite() || ratio <= 0.0 {
        return None;
    }
    let n = a.requests.min(b.requests) as usize;
    let half = t_975(n - 1) * se;
    Some(Ratio {
        ratio,
        low: ratio * (-half).exp(),
        high: ratio * half.exp(),
    })
}
