//! The A/B comparison, phase by phase: per metric, both sides, their ratio with its interval,
//! and the verdict.

use std::fmt::Write;

use comfy_table::Cell;
use reqcost_analysis::compare::{Comparison, MetricComparison, PhaseComparison};
use reqcost_analysis::compare_code::ClassCodeDiff;
use reqcost_analysis::stats::Verdict;
use reqcost_record::Unit;

use crate::format::{fmt_count, fmt_duration_ns, fmt_metric, indent, right, table};
use crate::profile::module_label;

/// The A/B tables, one per phase both sides measured: per metric, A, B, B/A with its 95 %
/// interval, and the verdict for B; then what changed in syscalls and findings.
pub fn comparison(c: &Comparison, a: &str, b: &str) -> String {
    let mut out = header(c, a, b);
    for p in &c.phases {
        let _ = writeln!(out, "\nphase {} ({})", p.phase, repetitions(p.repetitions));
        out.push_str(&metric_rows(&p.metrics, c.unit));
        out.push_str(&syscalls_table(p, c.unit));
        for h in &p.hops {
            let _ = writeln!(
                out,
                "  hop {} {}: its tree's CPU and requests per front {}",
                h.hop,
                h.name,
                c.unit.name()
            );
            out.push_str(&indent(&metric_rows(&h.metrics, c.unit), "  "));
        }
    }
    if !c.client.is_empty() {
        let _ = writeln!(out, "\nclient ({})", c.client_label());
        out.push_str(&metric_rows(&c.client, c.unit));
    }
    for (label, names) in [
        ("phases only A measured, not compared", &c.only_in_a),
        ("phases only B measured, not compared", &c.only_in_b),
        ("findings in B, not in A", &c.findings_appeared),
        ("findings in A, gone in B", &c.findings_vanished),
    ] {
        if !names.is_empty() {
            let _ = writeln!(out, "\n{label}: {}", names.join(", "));
        }
    }
    out.push_str(&class_code_section(&c.class_code));
    out
}

/// Each class's flame graph difference: its sampled CPU per request on each side, and the
/// functions whose self CPU per request of the class grew or shrank most.
fn class_code_section(classes: &[ClassCodeDiff]) -> String {
    if classes.is_empty() {
        return String::new();
    }
    let us = |ns: Option<f64>| ns.map_or("-".into(), fmt_duration_ns);
    let mut out = String::from(
        "\nper class code (sampled CPU per request of the class; self CPU of the functions that \
         changed most)\n",
    );
    for c in classes {
        let _ = writeln!(
            out,
            "  class {}: A {} · B {}",
            c.class,
            us(c.a_ns_per_request),
            us(c.b_ns_per_request)
        );
        if c.functions.is_empty() {
            let _ = writeln!(
                out,
                "    no function changed by 2 % of the class's CPU or more"
            );
            continue;
        }
        let mut t = table();
        t.set_header(vec!["function", "A", "B", "B − A"]);
        for f in &c.functions {
            let delta = f.change_ns();
            let sign = if delta >= 0.0 { "+" } else { "−" };
            t.add_row(vec![
                Cell::new(format!("{} {}", f.function, module_label(&f.module))),
                right(fmt_duration_ns(f.a_ns)),
                right(fmt_duration_ns(f.b_ns)),
                right(format!("{sign}{}", fmt_duration_ns(delta.abs()))),
            ]);
        }
        out.push_str(&indent(&format!("{t}\n"), "    "));
    }
    out
}

/// What was compared, how the runs were ordered, and which records are partial.
fn header(c: &Comparison, a: &str, b: &str) -> String {
    let mut out = format!("A = {a}\nB = {b}\n");
    let runs = if c.run_order.len() > 2 {
        let order: Vec<&str> = c.run_order.iter().map(|s| s.label()).collect();
        format!("runs in the order {}", order.join(" "))
    } else if c
        .phases
        .iter()
        .any(|p| p.metrics.iter().any(|m| m.from_requests))
    {
        "one run each: CPU judged from each run's per-request distribution and what the machine \
         moved each run's figures by between the two passes of its phases (its interval marked \
         \"requests\"), other timed figures get no confidence interval"
            .into()
    } else {
        "one run each: timed figures get no confidence interval".into()
    };
    let _ = writeln!(out, "{runs}; per {}, mean over runs", c.unit.name());
    for p in &c.partial {
        let _ = writeln!(
            out,
            "PARTIAL {}: record {} {}: its phases hold only what ran before",
            p.side.label(),
            p.id,
            p.outcome
        );
    }
    out
}

fn repetitions(n: usize) -> String {
    if n == 1 {
        "1 run each".into()
    } else {
        format!("{n} repetitions each")
    }
}

/// Per metric: A, B, B/A with its 95 % interval, and the verdict for B.
fn metric_rows(metrics: &[MetricComparison], unit: Unit) -> String {
    let mut t = table();
    let per = format!("per {}", unit.name());
    t.set_header(vec![
        per.as_str(),
        "A",
        "B",
        "B/A",
        "95% CI",
        "verdict for B",
    ]);
    for m in metrics {
        let (ratio, ci) = ratio_and_interval(m);
        t.add_row(vec![
            Cell::new(m.metric),
            right(fmt_metric(m.a.mean, m.unit)),
            right(fmt_metric(m.b.mean, m.unit)),
            right(ratio),
            right(ci),
            Cell::new(m.verdict.label()),
        ]);
    }
    format!("{t}\n")
}

/// B/A and its 95 % interval as text: `exact` for counts equal in every run, `(requests)` after
/// an interval from the per-request distributions, `n/a (one run)` when one run each leaves no
/// interval.
pub(crate) fn ratio_and_interval(m: &MetricComparison) -> (String, String) {
    match &m.ratio {
        Some(r) if m.verdict == Verdict::Identical => (format!("{:.3}", r.ratio), "exact".into()),
        Some(r) if m.from_requests => (
            format!("{:.3}", r.ratio),
            format!("{:.3} – {:.3} (requests)", r.low, r.high),
        ),
        Some(r) if r.low.is_finite() && r.high.is_finite() => (
            format!("{:.3}", r.ratio),
            format!("{:.3} – {:.3}", r.low, r.high),
        ),
        Some(r) => (format!("{:.3}", r.ratio), "n/a (one run)".into()),
        None => ("-".into(), "-".into()),
    }
}

/// The syscalls whose calls per request changed, largest change first; empty when none did.
fn syscalls_table(p: &PhaseComparison, unit: Unit) -> String {
    let changed = p.changed_syscalls();
    if changed.is_empty() {
        return String::new();
    }
    let mut t = table();
    let per = format!("syscall per {}", unit.name());
    t.set_header(vec![per.as_str(), "A", "B", "B − A"]);
    for s in changed {
        t.add_row(vec![
            Cell::new(&s.name),
            right(fmt_count(s.a_per_request)),
            right(fmt_count(s.b_per_request)),
            right(format!("{:+.2}", s.change())),
        ]);
    }
    format!("{t}\n")
}
