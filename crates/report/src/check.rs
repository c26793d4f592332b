//! `check`'s verdict against a baseline.

use comfy_table::Cell;
use reqcost_analysis::check::CheckResult;

use crate::format::{right, table};

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
