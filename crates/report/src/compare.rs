//! Rendering of comparisons, regression checks and sweeps.

use std::fmt::Write;
use std::path::Path;

use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, CellAlignment, Table};
use plotters::prelude::*;
use reqcost_analysis::check::CheckResult;
use reqcost_analysis::compare::Comparison;
use reqcost_analysis::stats::Verdict;
use reqcost_analysis::sweep::Growth;
use reqcost_record::Phase;

use crate::format::{fmt_count, fmt_duration_us};

fn table() -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t
}

fn right(s: impl ToString) -> Cell {
    Cell::new(s.to_string()).set_alignment(CellAlignment::Right)
}

fn fmt_value(v: f64, unit: &str) -> String {
    match unit {
        "µs" => fmt_duration_us(v),
        "req/s" => format!("{v:.0} req/s"),
        "B" => format!("{v:.0} B"),
        _ => fmt_count(v),
    }
}

/// The A/B table: per metric, A, B, B/A with its 95 % interval, and the verdict for B.
pub fn comparison(c: &Comparison, a: &str, b: &str) -> String {
    let mut out = String::new();
    let runs = if c.repetitions > 1 {
        format!("{} repetitions each, interleaved A B A B …", c.repetitions)
    } else {
        "one run each: timed figures get no confidence interval".into()
    };
    let _ = writeln!(
        out,
        "A = {a}\nB = {b}\n{runs}; per request, mean over runs\n"
    );
    let mut t = table();
    t.set_header(vec![
        "per request",
        "A",
        "B",
        "B/A",
        "95% CI",
        "verdict for B",
    ]);
    for m in &c.metrics {
        let (ratio, ci) = match &m.ratio {
            Some(r) if m.verdict == Verdict::Identical => {
                (format!("{:.3}", r.ratio), "exact".into())
            }
            Some(r) if r.low.is_finite() && r.high.is_finite() => (
                format!("{:.3}", r.ratio),
                format!("{:.3} – {:.3}", r.low, r.high),
            ),
            Some(r) => (format!("{:.3}", r.ratio), "n/a (one run)".into()),
            None => ("-".into(), "-".into()),
        };
        t.add_row(vec![
            Cell::new(m.metric),
            right(fmt_value(m.a.mean, m.unit)),
            right(fmt_value(m.b.mean, m.unit)),
            right(ratio),
            right(ci),
            Cell::new(m.verdict.label()),
        ]);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    for (label, ids) in [
        ("findings in B, not in A", &c.findings_appeared),
        ("findings in A, gone in B", &c.findings_vanished),
    ] {
        if !ids.is_empty() {
            let _ = writeln!(out, "\n{label}: {}", ids.join(", "));
        }
    }
    let changed: Vec<_> = c
        .syscalls
        .iter()
        .filter(|s| (s.a_per_request - s.b_per_request).abs() >= 0.005)
        .take(15)
        .collect();
    if !changed.is_empty() {
        let mut t = table();
        t.set_header(vec!["syscall per request", "A", "B", "B − A"]);
        for s in changed {
            t.add_row(vec![
                Cell::new(&s.name),
                right(fmt_count(s.a_per_request)),
                right(fmt_count(s.b_per_request)),
                right(format!("{:+.2}", s.b_per_request - s.a_per_request)),
            ]);
        }
        out.push('\n');
        out.push_str(&t.to_string());
        out.push('\n');
    }
    out
}

/// `check`'s verdict, one line per bound.
pub fn check(result: &CheckResult) -> String {
    let mut t = table();
    t.set_header(vec!["", "baseline", "run", "change", "limit", ""]);
    for i in &result.items {
        t.add_row(vec![
            Cell::new(&i.metric),
            right(format!("{:.2}", i.baseline)),
            right(format!("{:.2}", i.run)),
            right(format!("{:+.1} %", i.change_pct)),
            right(format!("+{:.1} %", i.limit_pct)),
            Cell::new(if i.pass { "ok" } else { "REGRESSION" }),
        ]);
    }
    let verdict = if result.passed() {
        "check passed: within bounds of the baseline"
    } else {
        "check FAILED: cost per request regressed beyond the bounds"
    };
    format!("{t}\n{verdict}\n")
}

/// The sweep table: one row per concurrency.
pub fn sweep(points: &[(u32, &Phase)], growth: Option<&Growth>) -> String {
    let mut t = table();
    t.set_header(vec![
        "connections",
        "CPU/req",
        "user",
        "system",
        "throughput",
        "p50",
        "p99",
    ]);
    let us = |v: Option<f64>| v.map(fmt_duration_us).unwrap_or_else(|| "-".into());
    for (c, p) in points {
        t.add_row(vec![
            right(c),
            right(us(p.per_request.cpu_total_us)),
            right(us(p.per_request.cpu_user_us)),
            right(us(p.per_request.cpu_system_us)),
            right(format!("{:.0} req/s", p.client.throughput_rps)),
            right(fmt_duration_us(p.client.latency.p50_us)),
            right(fmt_duration_us(p.client.latency.p99_us)),
        ]);
    }
    let mut out = format!("{t}\n");
    match growth {
        Some(g) if g.grows => {
            let _ = writeln!(
                out,
                "FLAG cost per request grows with connections: CPU/request is {:.2}x at {} connections what it is at {}",
                g.cpu_ratio, g.to_concurrency, g.from_concurrency
            );
            if let Some(s) = g.scan_ratio {
                let _ = writeln!(
                    out,
                    "     and each request makes the server hand the kernel {s:.1}x more fds to watch (seeds/004: select/poll over every connection)"
                );
            }
        }
        Some(g) => {
            let _ = writeln!(
                out,
                "cost per request does not grow with connections ({:.2}x from {} to {})",
                g.cpu_ratio, g.from_concurrency, g.to_concurrency
            );
        }
        None => {}
    }
    out
}

/// CPU per request (user, system, total) and throughput against concurrency, as SVG.
pub fn sweep_chart(points: &[(u32, &Phase)], title: &str, path: &Path) -> Result<(), String> {
    let cpu = |f: fn(&Phase) -> Option<f64>| -> Vec<(f64, f64)> {
        points
            .iter()
            .filter_map(|(c, p)| Some((*c as f64, f(p)?)))
            .collect()
    };
    let total = cpu(|p| p.per_request.cpu_total_us);
    let user = cpu(|p| p.per_request.cpu_user_us);
    let system = cpu(|p| p.per_request.cpu_system_us);
    let x_max = points.iter().map(|(c, _)| *c).max().unwrap_or(1) as f64;
    let y_max = total.iter().map(|(_, y)| *y).fold(1.0, f64::max) * 1.15;
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..x_max * 1.05, 0f64..y_max)?;
        chart
            .configure_mesh()
            .x_desc("connections")
            .y_desc("server CPU per request (µs)")
            .draw()?;
        for (series, label, color) in [
            (&total, "total", BLACK),
            (&user, "user", BLUE),
            (&system, "system", RED),
        ] {
            chart
                .draw_series(LineSeries::new(
                    series.iter().copied(),
                    color.stroke_width(2),
                ))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            chart.draw_series(series.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| format!("cannot write chart {}: {e}", path.display()))
}

/// Folded stacks of several profiles merged, counts scaled to `per` requests' worth.
fn merged_folded(profiles: &[(&reqcost_record::Profile, u64)], per: f64) -> String {
    let mut merged: std::collections::BTreeMap<String, f64> = Default::default();
    for (p, requests) in profiles {
        let scale = per / (*requests).max(1) as f64;
        for line in crate::stacks::folded_lines(p) {
            if let Some((stack, n)) = line.rsplit_once(' ') {
                *merged.entry(stack.to_string()).or_default() +=
                    n.parse::<f64>().unwrap_or(0.0) * scale;
            }
        }
    }
    merged
        .into_iter()
        .filter(|(_, n)| n.round() > 0.0)
        .map(|(stack, n)| format!("{stack} {}\n", n.round() as u64))
        .collect()
}

/// A differential flame graph: B's call chains, red where B spends more samples per request
/// than A, blue where less. Both sides are scaled to the same number of requests, so widths
/// compare cost per request rather than run length.
pub fn write_diff_flamegraph(
    a: &[(&reqcost_record::Profile, u64)],
    b: &[(&reqcost_record::Profile, u64)],
    path: &Path,
) -> std::io::Result<()> {
    use inferno::{differential, flamegraph};
    let per = b.iter().map(|(_, r)| *r).sum::<u64>().max(1) as f64 / b.len().max(1) as f64;
    let (fa, fb) = (merged_folded(a, per), merged_folded(b, per));
    if fa.is_empty() || fb.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "both sides need sampled call chains for a differential flame graph",
        ));
    }
    let mut diff = Vec::new();
    differential::from_readers(
        differential::Options::default(),
        fa.as_bytes(),
        fb.as_bytes(),
        &mut diff,
    )?;
    let mut opts = flamegraph::Options::default();
    opts.title = "reqcost: B against A, per request (red: more in B, blue: less)".into();
    opts.count_name = "samples per request-equivalent".into();
    opts.deterministic = true;
    let w = std::io::BufWriter::new(std::fs::File::create(path)?);
    flamegraph::from_reader(&mut opts, diff.as_slice(), w)
}
