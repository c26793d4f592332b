//! The per-request metrics that comparisons, sweeps and checks read from a phase, in one list so
//! that every command names and orders them the same way.

use reqcost_record::Phase;

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
}

fn per_ok(p: &Phase, v: u64) -> Option<f64> {
    (p.client.ok > 0).then(|| v as f64 / p.client.ok as f64)
}

/// Every syscall the tree made, per request (eBPF).
pub fn syscalls_per_request(p: &Phase) -> Option<f64> {
    let k = p.server.kernel.as_ref()?;
    per_ok(p, k.total_syscalls())
}

/// Write-like calls per request: every write/send variant from eBPF when present, else the
/// read(2)/write(2)-family count from /proc/PID/io.
pub fn writes_per_request(p: &Phase) -> Option<f64> {
    match &p.server.kernel {
        Some(k) => per_ok(
            p,
            k.io.iter()
                .filter(|s| s.direction == reqcost_record::IoDirection::Write)
                .map(|s| s.calls)
                .sum(),
        ),
        None => p.per_request.write_syscalls,
    }
}

pub const METRICS: &[Metric] = &[
    Metric {
        name: "CPU",
        unit: "µs",
        kind: Kind::Timed,
        lower_is_better: true,
        get: |p| p.per_request.cpu_total_us,
    },
    Metric {
        name: "CPU user",
        unit: "µs",
        kind: Kind::Timed,
        lower_is_better: true,
        get: |p| p.per_request.cpu_user_us,
    },
    Metric {
        name: "CPU system",
        unit: "µs",
        kind: Kind::Timed,
        lower_is_better: true,
        get: |p| p.per_request.cpu_system_us,
    },
    Metric {
        name: "latency p50",
        unit: "µs",
        kind: Kind::Timed,
        lower_is_better: true,
        get: |p| (p.client.ok > 0).then_some(p.client.latency.p50_us),
    },
    Metric {
        name: "latency p99",
        unit: "µs",
        kind: Kind::Timed,
        lower_is_better: true,
        get: |p| (p.client.ok > 0).then_some(p.client.latency.p99_us),
    },
    Metric {
        name: "throughput",
        unit: "req/s",
        kind: Kind::Timed,
        lower_is_better: false,
        get: |p| (p.client.ok > 0).then_some(p.client.throughput_rps),
    },
    Metric {
        name: "syscalls",
        unit: "calls",
        kind: Kind::Count,
        lower_is_better: true,
        get: syscalls_per_request,
    },
    Metric {
        name: "write calls",
        unit: "calls",
        kind: Kind::Count,
        lower_is_better: true,
        get: writes_per_request,
    },
    Metric {
        name: "bytes received",
        unit: "B",
        kind: Kind::Count,
        lower_is_better: true,
        get: |p| per_ok(p, p.client.bytes_received),
    },
    Metric {
        name: "wakeups",
        unit: "",
        kind: Kind::Count,
        lower_is_better: true,
        get: |p| per_ok(p, p.server.kernel.as_ref()?.sched.wakeups),
    },
];

pub fn metric(name: &str) -> &'static Metric {
    METRICS
        .iter()
        .find(|m| m.name == name)
        .expect("metric names are fixed")
}
