//! The A/B comparison: per metric, both sides, their ratio with its interval, and the verdict.

use std::fmt::Write;

use comfy_table::Cell;
use reqcost_analysis::compare::Comparison;
use reqcost_analysis::stats::Verdict;

use crate::format::{fmt_count, fmt_metric, right, table};

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
            right(fmt_metric(m.a.mean, m.unit)),
            right(fmt_metric(m.b.mean, m.unit)),
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
