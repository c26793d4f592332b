//! The sweep table: cost per request at each concurrency with its 95 % interval, the order the
//! runs took, and whether the cost grows.

use std::fmt::Write;

use reqcost_analysis::stats::{Estimate, Verdict};
use reqcost_analysis::sweep::{
    Growth, LevelStats, SweepReport, CLIENT_CORE_SHARE, CLIENT_CPU, CLIENT_KERNEL_SHARE,
    CLIENT_SYSCALLS, CORE_SHARE, GROWTH_CPU_RATIO, GROWTH_CPU_RATIO_UNCONFIRMED, MACHINE_SHARE,
    SCAN_GROWTH_RATIO, WORK_RATE,
};

use reqcost_record::{Pinning, Unit};

use crate::format::{fmt_metric, right, table};

/// (column header, metric shown in it).
const COLUMNS: [(&str, &str); 8] = [
    ("CPU", "CPU"),
    ("% of a core", CORE_SHARE),
    ("user", "CPU user"),
    ("system", "CPU system"),
    ("fds scanned", "fds scanned"),
    ("throughput", "throughput"),
    ("p50", "latency p50"),
    ("p99", "latency p99"),
];

/// The sweep: how it ran, one row per concurrency, and the verdict.
pub fn sweep(report: &SweepReport) -> String {
    let mut out = run_order_line(report);
    let mut t = table();
    let unit = report.unit();
    let mut header = vec!["connections".to_string(), "runs".to_string()];
    header.extend(COLUMNS.iter().map(|(h, _)| h.to_string()));
    header[2] = format!("CPU/{}", unit.name());
    t.set_header(header);
    for level in &report.levels {
        let mut row = vec![right(level.concurrency), right(level.runs)];
        row.extend(COLUMNS.iter().map(|(_, name)| match *name {
            // Requests per second only count requests: other units have their own rate.
            "throughput" if level.get(WORK_RATE).is_some() => right(cell(level, WORK_RATE)),
            name => right(cell(level, name)),
        }));
        t.add_row(row);
    }
    let _ = writeln!(out, "{t}");
    out.push_str("figures: mean ± half the 95 % interval over the runs of each level\n");
    if let Some(cpus) = report.records.first().map(|r| r.machine.cpus) {
        let machine: Vec<String> = report
            .levels
            .iter()
            .map(|l| format!("{} at {}", cell(l, MACHINE_SHARE), l.concurrency))
            .collect();
        let _ = writeln!(
            out,
            "server CPU over each run, % of one core (probes included); of the machine's {cpus} CPUs: {}",
            machine.join(", ")
        );
    }
    if unit != Unit::Request {
        let _ = writeln!(out, "CPU per {}", unit.label());
    }
    out.push_str(&client_line(report));
    out.push_str(&pinning_lines(report));
    out.push_str(&verdict_lines(report));
    out
}

/// The server's and the client's columns of each level, as (header, metric): the client's
/// only when some level measured it (a `--load` command's tree).
pub(crate) fn server_and_client_columns(report: &SweepReport) -> Vec<(String, &'static str)> {
    let per = report.unit().name();
    let mut columns = vec![
        (format!("server CPU/{per}"), "CPU"),
        ("server % of a core".to_string(), CORE_SHARE),
    ];
    if report.levels.iter().any(|l| l.get(CLIENT_CPU).is_some()) {
        columns.push((format!("client CPU/{per}"), CLIENT_CPU));
        columns.push(("client % of a core".to_string(), CLIENT_CORE_SHARE));
    }
    if report
        .levels
        .iter()
        .any(|l| l.get(CLIENT_SYSCALLS).is_some())
    {
        columns.push((format!("client syscalls/{per}"), CLIENT_SYSCALLS));
    }
    if report
        .levels
        .iter()
        .any(|l| l.get(CLIENT_KERNEL_SHARE).is_some())
    {
        columns.push(("client kernel %".to_string(), CLIENT_KERNEL_SHARE));
    }
    columns
}

/// The verdict of `report`, in its unit, with advice its options allow.
pub fn verdict_lines(report: &SweepReport) -> String {
    let external = report.records.iter().any(|r| r.workload.load.is_some());
    report
        .growth
        .as_ref()
        .map_or_else(String::new, |g| growth_lines(g, report.unit(), external))
}

/// The client's cost at each level, beside the server's in the table.
pub fn client_line(report: &SweepReport) -> String {
    let levels: Vec<String> = report
        .levels
        .iter()
        .filter(|l| l.get(CLIENT_CPU).is_some())
        .map(|l| {
            let syscalls = l
                .get(CLIENT_SYSCALLS)
                .map(|_| format!(", {} syscalls", cell(l, CLIENT_SYSCALLS)))
                .unwrap_or_default();
            let kernel = l
                .get(CLIENT_KERNEL_SHARE)
                .map(|_| {
                    format!(
                        ", {} of its samples in the kernel",
                        cell(l, CLIENT_KERNEL_SHARE)
                    )
                })
                .unwrap_or_default();
            format!(
                "{} ({} of a core{syscalls}{kernel}) at {}",
                cell(l, CLIENT_CPU),
                cell(l, CLIENT_CORE_SHARE),
                l.concurrency
            )
        })
        .collect();
    let Some(generator) = report.client_generator().filter(|_| !levels.is_empty()) else {
        return String::new();
    };
    format!(
        "client ({}), CPU per {}: {}\n",
        generator.label(),
        report.unit().name(),
        levels.join(", ")
    )
}

/// Where the load and the server ran: once when every run agrees, else each run that differs
/// from its level's others, flagged.
pub fn pinning_lines(report: &SweepReport) -> String {
    let mut out = String::new();
    let mut runs = report.records.iter().map(|r| &r.pinning);
    let Some(first) = runs.next() else {
        return out;
    };
    if runs.all(|p| pinning_text(p) == pinning_text(first)) {
        let _ = writeln!(out, "pinning: {} in every run", pinning_text(first));
        return out;
    }
    for level in &report.levels {
        let pinnings: Vec<_> = report
            .run_order
            .iter()
            .zip(&report.records)
            .filter(|(c, _)| **c == level.concurrency)
            .map(|(_, r)| &r.pinning)
            .collect();
        for &rep in &level.pinning_differs {
            let _ = writeln!(
                out,
                "FLAG run {rep} at {} connections was pinned otherwise than the level's other runs ({}): its figures do not compare with theirs",
                level.concurrency,
                pinning_text(pinnings[rep - 1])
            );
        }
    }
    out
}

/// `load on CPU 0, server on CPU 1`, or why pinning was off.
pub fn pinning_text(p: &Pinning) -> String {
    let cpus = |c: &[u32]| c.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    match (p.enabled, p.server_cpus.is_empty()) {
        (true, false) => format!(
            "load on CPU {}, server on CPU {}",
            cpus(&p.client_cpus),
            cpus(&p.server_cpus)
        ),
        (true, true) => format!(
            "load on CPU {}, server on its own CPUs",
            cpus(&p.client_cpus)
        ),
        (false, _) => p.note.clone().unwrap_or_else(|| "pinning off".into()),
    }
}

/// `mean ± half-width` in the metric's unit; the mean alone after one run, `-` when unmeasured.
pub(crate) fn cell(level: &LevelStats, name: &str) -> String {
    let Some(e) = level.get(name) else {
        return "-".into();
    };
    let unit = unit_of(level, name);
    match e.half_width() {
        Some(h) => format!("{} ± {}", fmt_metric(e.mean, unit), fmt_metric(h, unit)),
        None => fmt_metric(e.mean, unit),
    }
}

fn unit_of<'a>(level: &'a LevelStats, name: &str) -> &'a str {
    level
        .metrics
        .iter()
        .find(|m| m.metric == name)
        .map_or("", |m| m.unit.as_str())
}

/// `run order: 1 16 64 | 1 16 64 | 1 16 64 (3 runs per level, interleaved)`.
fn run_order_line(report: &SweepReport) -> String {
    let per_rep = report.levels.len().max(1);
    let reps: Vec<String> = report
        .run_order
        .chunks(per_rep)
        .map(|rep| rep.iter().map(u32::to_string).collect::<Vec<_>>().join(" "))
        .collect();
    let length = report
        .records
        .first()
        .map(|r| match (r.workload.duration_s, r.workload.requests) {
            (Some(s), _) => format!("; each run's main phase {s} s"),
            (None, Some(n)) => format!("; each run's main phase {n} requests"),
            (None, None) => String::new(),
        })
        .unwrap_or_default();
    format!(
        "run order: {} ({} run(s) per level, interleaved{length})\n",
        reps.join(" | "),
        report.repetitions
    )
}

/// The verdict on cost per `unit` against connections, as the interval of the ratio between
/// the highest and the lowest level allows; `external` (`--load`) runs are lengthened by their
/// command, not by `--duration`.
pub fn growth_lines(g: &Growth, unit: Unit, external: bool) -> String {
    let (from, to) = (g.from_concurrency, g.to_concurrency);
    let per = unit.name();
    let repeated = g.cpu_ratio_low.is_some() && g.cpu_ratio_high.is_some();
    let ratio = match (g.cpu_ratio_low, g.cpu_ratio_high) {
        (Some(lo), Some(hi)) => format!("{:.2}x (95 % interval {lo:.2}–{hi:.2}x)", g.cpu_ratio),
        _ => format!("{:.2}x (one run per level: no interval)", g.cpu_ratio),
    };
    let mut out = String::new();
    if g.grows {
        let _ = writeln!(
            out,
            "FLAG cost per {per} grows with connections: CPU/{per} at {to} connections is {ratio} what it is at {from}"
        );
        if let Some(s) = g.scan_ratio {
            let _ = writeln!(
                out,
                "     and each {per} makes the server hand the kernel {s:.1}x more fds to watch (seeds/004: select/poll over every connection)"
            );
        }
        return out;
    }
    let longer = match external {
        true => "a longer-running --load command",
        false => "a longer --duration",
    };
    let _ = match g.change {
        Verdict::Worse => writeln!(
            out,
            "CPU/{per} rises from {from} to {to} connections, {ratio}, but does not grow as poll-scaling does: {}",
            short_of_growth(g, per)
        ),
        Verdict::Better => writeln!(
            out,
            "CPU/{per} falls from {from} to {to} connections: {ratio}"
        ),
        Verdict::NoSignificantDifference | Verdict::Identical => writeln!(
            out,
            "cost per {per} does not grow with connections: {ratio} from {from} to {to}, within ±5 %"
        ),
        Verdict::Inconclusive if !repeated => writeln!(
            out,
            "no verdict from {from} to {to} connections: {ratio}; --repeat 3 or more tells the levels' difference from the runs' noise"
        ),
        Verdict::Inconclusive => writeln!(
            out,
            "no significant change from {from} to {to} connections: {ratio}; the runs vary more than the levels differ (more --repeat or {longer} narrows the interval)"
        ),
    };
    out
}

/// Why a significant rise is not called growth.
fn short_of_growth(g: &Growth, per: &str) -> String {
    match g.scan_ratio {
        Some(s) if g.cpu_ratio < GROWTH_CPU_RATIO => {
            format!("less than {GROWTH_CPU_RATIO}x (fds scanned per {per} {s:.1}x)")
        }
        Some(s) if s < SCAN_GROWTH_RATIO => format!(
            "the fds scanned per {per} grow {s:.1}x, less than {SCAN_GROWTH_RATIO}x: the kernel does not show why"
        ),
        None if g.cpu_ratio < GROWTH_CPU_RATIO_UNCONFIRMED => format!(
            "less than the {GROWTH_CPU_RATIO_UNCONFIRMED}x asked without eBPF figures to confirm it"
        ),
        _ => "it does not rise steadily level by level (a step down of more than 10 %)".into(),
    }
}

/// The interval of `e` as `low–high` in `unit`, for charts and pages.
pub fn interval_text(e: &Estimate, unit: &str) -> String {
    match (e.low, e.high) {
        (Some(lo), Some(hi)) => format!("{}–{}", fmt_metric(lo, unit), fmt_metric(hi, unit)),
        _ => "one run".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_analysis::sweep::LevelMetric;

    fn level(concurrency: u32, cpu: &[f64]) -> LevelStats {
        LevelStats {
            concurrency,
            runs: cpu.len(),
            metrics: vec![LevelMetric {
                metric: "CPU".into(),
                unit: "µs".into(),
                estimate: Estimate::of(cpu.to_vec()).unwrap(),
            }],
            pinning_differs: Vec::new(),
        }
    }

    fn growth(change: Verdict, grows: bool) -> Growth {
        Growth {
            from_concurrency: 5,
            to_concurrency: 15,
            cpu_ratio: 1.8,
            cpu_ratio_low: Some(1.6),
            cpu_ratio_high: Some(2.0),
            change,
            scan_ratio: Some(3.0),
            grows,
        }
    }

    #[test]
    fn table_shows_order_intervals_and_verdict() {
        let report = SweepReport {
            repetitions: 2,
            run_order: vec![5, 15, 5, 15],
            levels: vec![level(5, &[10.0, 12.0]), level(15, &[20.0])],
            growth: Some(growth(Verdict::Worse, true)),
            records: Vec::new(),
            typical: Vec::new(),
        };
        let out = sweep(&report);
        assert!(
            out.starts_with("run order: 5 15 | 5 15 (2 run(s) per level, interleaved)\n"),
            "{out}"
        );
        // sd 1.414, n 2: 12.706 * 1.414 / sqrt(2) = 12.7
        assert!(out.contains("11.0 µs ± 12.7 µs"), "{out}");
        assert!(out.contains("20.0 µs "), "{out}");
        assert!(out.contains("-  "), "unmeasured columns: {out}");
        assert!(
            out.contains("FLAG cost per request grows with connections: CPU/request at 15 connections is 1.80x (95 % interval 1.60–2.00x)"),
            "{out}"
        );
    }

    #[test]
    fn each_verdict_says_what_the_interval_allows() {
        let say = |change| growth_lines(&growth(change, false), Unit::Request, false);
        assert!(say(Verdict::Inconclusive).starts_with("no significant change from 5 to 15"));
        assert!(say(Verdict::NoSignificantDifference).contains("does not grow"));
        assert!(say(Verdict::Better).starts_with("CPU/request falls"));
        let short = say(Verdict::Worse);
        assert!(
            short.contains("does not grow as poll-scaling does"),
            "{short}"
        );
        let mut once = growth(Verdict::Inconclusive, false);
        (once.cpu_ratio_low, once.cpu_ratio_high) = (None, None);
        let once = growth_lines(&once, Unit::Request, false);
        assert!(once.contains("one run per level: no interval"), "{once}");
        assert!(!once.contains("the runs vary more"), "{once}");
        let external = growth_lines(&growth(Verdict::Inconclusive, false), Unit::MiB, true);
        assert!(!external.contains("--duration"), "{external}");
        assert!(external.contains("no significant change"), "{external}");
    }

    #[test]
    fn the_table_says_where_runs_ran_and_flags_one_pinned_otherwise() {
        let rec = |enabled: bool| {
            let mut r = reqcost_record::RunRecord::from_json(include_str!(
                "../../analysis/tests/fixtures/clean.json"
            ))
            .unwrap();
            r.pinning = Pinning {
                enabled,
                client_cpus: vec![0],
                server_cpus: vec![1],
                note: (!enabled).then(|| "one CPU only: client and server share it".into()),
            };
            r
        };
        let alike = SweepReport::of(2, vec![5, 5], vec![rec(true), rec(true)], None);
        assert!(
            sweep(&alike).contains("pinning: load on CPU 0, server on CPU 1 in every run\n"),
            "{}",
            sweep(&alike)
        );
        let mixed = SweepReport::of(
            3,
            vec![5, 5, 5],
            vec![rec(true), rec(false), rec(true)],
            None,
        );
        assert!(
            sweep(&mixed).contains("FLAG run 2 at 5 connections was pinned otherwise than the level's other runs (one CPU only: client and server share it)"),
            "{}",
            sweep(&mixed)
        );
    }
}
