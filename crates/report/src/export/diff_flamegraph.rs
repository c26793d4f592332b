//! A differential flame graph of A and B in CPU per request: every call chain either side ran,
//! as wide as the larger of its two costs, red where B spends more per request than A, blue
//! where less. A chain gone from B (a directory walk the fix removed) keeps A's width in blue
//! instead of vanishing, as it would in a graph drawn with B's widths alone.

use std::collections::BTreeMap;

use inferno::flamegraph;
use reqcost_analysis::compare_code::{class_chain_costs, run_chain_costs};
use reqcost_record::RunRecord;

use super::{Exporter, Subject};

pub struct DiffFlamegraph;

/// What the colours and widths mean, under the title.
const LEGEND: &str = "width: CPU per request, the larger of A and B · red: more in B than in A · \
                      blue: less in B (only in A: blue at A's width) · white: unchanged · deeper \
                      colour, larger change";

impl Exporter for DiffFlamegraph {
    fn serialize(&self, subject: &Subject) -> Result<Vec<u8>, String> {
        let (a, b) = subject.comparison()?;
        diff_svg(
            &run_chain_costs(a),
            &run_chain_costs(b),
            "reqcost: B against A, CPU per request",
        )
    }
}

/// The differential flame graph of one request class: each side's samples of the class (in
/// its runs' measured phases) per request of the class.
pub(crate) fn class_diff_svg(
    a: &[RunRecord],
    b: &[RunRecord],
    class: &str,
) -> Result<Vec<u8>, String> {
    let title = format!("reqcost: B against A, class {class}, CPU per request of the class");
    diff_svg(
        &class_chain_costs(a, class),
        &class_chain_costs(b, class),
        &title,
    )
}

/// The differential flame graph of each side's folded chains with their CPU per request in ns.
fn diff_svg(
    ca: &BTreeMap<String, f64>,
    cb: &BTreeMap<String, f64>,
    title: &str,
) -> Result<Vec<u8>, String> {
    if ca.is_empty() || cb.is_empty() {
        return Err("both sides need sampled call chains for a differential flame graph".into());
    }
    let lines = differential_lines(ca, cb);
    let mut opts = flamegraph::Options::default();
    opts.title = title.into();
    opts.subtitle = Some(LEGEND.into());
    opts.count_name = "ns of CPU per request".into();
    opts.deterministic = true;
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut svg)
        .map_err(|e| e.to_string())?;
    Ok(svg)
}

/// Differential folded lines `stack BEFORE AFTER`: inferno draws AFTER's width and colours by
/// AFTER − BEFORE. AFTER is the larger cost of the two and BEFORE is chosen so that the
/// difference is B − A, so chains of either side are drawn and coloured by what B changed.
fn differential_lines(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> Vec<String> {
    let mut stacks: Vec<&String> = a.keys().chain(b.keys()).collect();
    stacks.sort();
    stacks.dedup();
    stacks
        .into_iter()
        .filter_map(|stack| {
            let ns = |side: &BTreeMap<String, f64>| side.get(stack).map_or(0, |v| v.round() as i64);
            let (na, nb) = (ns(a), ns(b));
            let width = na.max(nb);
            (width > 0).then(|| format!("{stack} {} {width}", width - (nb - na)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::profile_run;

    /// The fixture's profile (10 samples over no phase: one request's worth each), its chain
    /// through ap_rgetline left out of B.
    fn without_rgetline() -> (RunRecord, RunRecord) {
        let a = profile_run();
        let mut b = a.clone();
        let p = b.profile.as_mut().unwrap();
        let frames = p.frames.clone();
        p.stacks.retain(|s| {
            s.frames
                .iter()
                .all(|&i| frames[i as usize].function != "ap_rgetline")
        });
        (a, b)
    }

    #[test]
    fn chains_of_either_side_are_drawn_in_cpu_per_request_with_a_legend() {
        let (a, b) = without_rgetline();
        let period = a.profile.as_ref().unwrap().period_ns as i64;
        let (a, b) = (std::slice::from_ref(&a), std::slice::from_ref(&b));
        let lines = differential_lines(&run_chain_costs(a), &run_chain_costs(b));
        let gone = lines
            .iter()
            .find(|l| l.contains("ap_rgetline"))
            .expect("the chain only A ran is drawn");
        // 2 samples in A, none in B: A's width, and B − A = −2 samples' worth.
        assert!(
            gone.ends_with(&format!(" {} {}", 4 * period, 2 * period)),
            "{gone}"
        );
        let same = lines
            .iter()
            .find(|l| l.contains("apr_brigade_puts"))
            .unwrap();
        assert!(
            same.ends_with(&format!(" {} {}", 4 * period, 4 * period)),
            "{same}"
        );

        let comparison = reqcost_analysis::compare::compare(a, b);
        let subject = Subject::Compare {
            a,
            b,
            comparison: &comparison,
        };
        let svg = String::from_utf8(DiffFlamegraph.serialize(&subject).unwrap()).unwrap();
        assert!(
            svg.contains("ap_rgetline"),
            "the chain gone in B is missing"
        );
        assert!(svg.contains("ns of CPU per request"));
        assert!(svg.contains("red: more in B than in A"), "no legend");
    }
}
