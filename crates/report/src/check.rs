//! `check`'s verdict against a baseline.

use std::fmt::Write;

use comfy_table::Cell;
use reqcost_analysis::check::{fmt_change_pct, CheckResult};

use crate::format::{right, table};

/// `check`'s verdict: one line per bound of each phase, then the new major findings and the
/// phases that could not be judged.
pub fn check(result: &CheckResult) -> String {
    let mut t = table();
    t.set_header(vec!["phase", "", "baseline", "run", "change", "limit", ""]);
    for p in &result.phases {
        for i in &p.items {
            t.add_row(vec![
                Cell::new(&p.phase),
                Cell::new(&i.metric),
                right(format!("{:.2}", i.baseline)),
                right(format!("{:.2}", i.run)),
                right(match i.interval_pct {
                    Some([low, high]) => format!(
                        "{} ({} … {})",
                        fmt_change_pct(i.change_pct),
                        fmt_change_pct(low),
                        fmt_change_pct(high)
                    ),
                    None => fmt_change_pct(i.change_pct),
                }),
                right(fmt_change_pct(i.limit_pct)),
                Cell::new(if !i.pass {
                    "REGRESSION"
                } else if i.within_noise() {
                    "ok (within noise)"
                } else {
                    "ok"
                }),
            ]);
        }
    }
    let mut out = format!("{t}\n");
    for f in &result.new_major_findings {
        let _ = writeln!(
            out,
            "NEW MAJOR FINDING {} in {} ({:.0} % of its CPU): {}",
            f.id,
            f.phase,
            f.cpu_share_pct(),
            f.title
        );
    }
    for (side, names) in [
        ("the run", &result.only_in_run),
        ("the baseline", &result.only_in_baseline),
    ] {
        if !names.is_empty() {
            let _ = writeln!(out, "not judged, only {side} has: {}", names.join(", "));
        }
    }
    if result.passed {
        out.push_str("check passed: within bounds of the baseline in every phase both measured\n");
    } else {
        let _ = writeln!(
            out,
            "check FAILED: cost per {} regressed beyond the bounds, or a major finding appeared",
            result.unit.name()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use reqcost_analysis::check::{CheckItem, Limits, PhaseCheck, FORMAT, VERSION};
    use reqcost_record::Unit;

    use super::*;

    #[test]
    fn a_check_per_mib_speaks_of_mib_only() {
        let result = CheckResult {
            format: FORMAT,
            version: VERSION,
            unit: Unit::MiB,
            run: "b".into(),
            baseline: "a".into(),
            limits: Limits {
                max_cpu_regression_pct: 10.0,
                max_syscalls_regression_pct: 5.0,
            },
            passed: false,
            phases: vec![PhaseCheck {
                phase: "main".into(),
                items: vec![CheckItem {
                    metric: "CPU per MiB (µs)".into(),
                    baseline: 2000.0,
                    run: 3000.0,
                    change_pct: 50.0,
                    limit_pct: 10.0,
                    hop: None,
                    interval_pct: None,
                    pass: false,
                }],
            }],
            new_major_findings: Vec::new(),
            only_in_run: Vec::new(),
            only_in_baseline: Vec::new(),
        };
        let text = check(&result);
        assert!(text.contains("CPU per MiB (µs)"), "{text}");
        assert!(text.contains("REGRESSION"), "{text}");
        assert!(
            text.contains("check FAILED: cost per MiB regressed"),
            "{text}"
        );
        assert!(!text.contains("request"), "{text}");
    }
}
