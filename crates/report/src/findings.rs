//! The findings section: ranked, with evidence, minor ones kept short.

use std::fmt::Write;

use reqcost_analysis::findings::{Confidence, Finding, Unevaluated};

/// The findings, then the rules that could not be judged and why: without them, "none" would
/// read as a clean bill of health for a run that never measured what the rules look at.
pub fn findings_section(findings: &[Finding], unevaluated: &[Unevaluated]) -> String {
    let mut out = String::from("findings (ranked by the share of server CPU they explain)\n");
    if findings.is_empty() && unevaluated.is_empty() {
        out.push_str(
            "  none: nothing in this run matches the findings catalog (docs/findings.md)\n",
        );
    } else if findings.is_empty() {
        out.push_str("  none among the rules this run could evaluate (docs/findings.md)\n");
    }
    ranked(&mut out, findings);
    for u in unevaluated {
        let _ = writeln!(
            out,
            "  not evaluated: {} ({})",
            u.rules.join(", "),
            u.reason
        );
    }
    out
}

fn ranked(out: &mut String, findings: &[Finding]) {
    let (major, minor): (Vec<&Finding>, Vec<&Finding>) = findings.iter().partition(|f| f.major);
    for (n, f) in (1..).zip(major) {
        let confidence = confidence_label(f.confidence);
        let _ = writeln!(
            out,
            "  {n}. {}  [{:.0} % of {}CPU in phase {} · {confidence}]",
            f.id,
            f.cpu_share_pct(),
            server_of(f),
            f.phase
        );
        let _ = writeln!(out, "     {}", f.title);
        for e in &f.evidence {
            let _ = writeln!(out, "       · {e}");
        }
        if !f.carriers.is_empty() {
            let _ = writeln!(out, "     carried by: {}", f.carriers.join("; "));
        }
        let _ = writeln!(out, "     fix: {}", f.fix);
    }
    for f in minor {
        let _ = writeln!(
            out,
            "  minor: {} ({:.0} % of {}CPU) — {}",
            f.id,
            f.cpu_share_pct(),
            server_of(f),
            f.title
        );
    }
}

/// `postgres (hop 2)'s `: whose CPU a finding's share is of, when the record has hops.
fn server_of(f: &Finding) -> String {
    match f.server.as_str() {
        "" => String::new(),
        server => format!("{server}'s "),
    }
}

pub fn confidence_label(c: Confidence) -> &'static str {
    match c {
        Confidence::High => "high confidence",
        Confidence::Medium => "medium confidence",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_not_evaluated_are_named_instead_of_nothing_matching() {
        let off = [Unevaluated {
            rules: vec!["small-writes", "busy-wait"],
            reason: "they read the eBPF probes' syscall counts: eBPF probes off: --no-probes"
                .into(),
        }];
        let text = findings_section(&[], &off);
        assert!(!text.contains("nothing in this run matches"), "{text}");
        assert!(
            text.contains("  none among the rules this run could evaluate"),
            "{text}"
        );
        assert!(
            text.contains(
                "  not evaluated: small-writes, busy-wait (they read the eBPF probes' syscall \
                 counts: eBPF probes off: --no-probes)"
            ),
            "{text}"
        );
        assert!(findings_section(&[], &[]).contains("nothing in this run matches"));
    }
}
