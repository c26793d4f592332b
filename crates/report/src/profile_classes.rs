//! The profile by request class and by costliest request: for the classes whose requests took
//! most samples, and for the costliest requests, the functions that took most of their CPU, each
//! with its most frequent callers (docs/profile.md, "Per request class"); the figures come from
//! `reqcost_analysis::hot_code`, as the analysis JSON's.

use std::fmt::Write as _;

use reqcost_analysis::document::PhaseAnalysis;
use reqcost_analysis::hot_code::{self, GroupCode};
use reqcost_analysis::profile::share_pct;
use reqcost_record::{CostlyRequest, Profile};

use crate::format::fmt_duration_ns;
use crate::profile::module_label;

/// Functions shown per class or request, by self samples.
const GROUP_FUNCTIONS: usize = 3;

/// The section, empty when the samples carry no request tags.
pub(crate) fn class_section(p: &Profile) -> String {
    let classes = hot_code::classes(p);
    if classes.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n  by request class (samples taken while serving its requests; self %, callers nearest \
         first)"
    );
    for g in &classes {
        let _ = writeln!(
            out,
            "    {}  {:.1}% of samples, {} sampled",
            g.name,
            share_pct(g.samples, p.samples),
            fmt_duration_ns(g.sampled_ns as f64)
        );
        functions(&mut out, g);
    }
    out
}

/// The group's hottest functions with their callers, and the probes' own share apart.
pub(crate) fn functions(out: &mut String, g: &GroupCode) {
    for f in g.by_self.iter().take(GROUP_FUNCTIONS) {
        let via = if f.callers.is_empty() {
            String::new()
        } else {
            format!("  ← {}", f.callers.join(" ← "))
        };
        let _ = writeln!(
            out,
            "      {:>5.1}%  {}  {}{via}",
            f.share_pct(),
            f.function,
            module_label(&f.module)
        );
    }
    if g.probe_samples > 0 {
        let _ = writeln!(
            out,
            "      {:>5.1}%  eBPF probes (reqcost's own cost, not this code's)",
            share_pct(g.probe_samples, g.samples)
        );
    }
}

/// "This request took 23 ms: here is where": the costliest requests' own chains (the analysis'
/// `costliest_code`), empty when none has samples.
pub(crate) fn costliest_section(code: &[GroupCode], phases: &[PhaseAnalysis]) -> String {
    if code.is_empty() {
        return String::new();
    }
    let costly = |id: &str| -> Option<&CostlyRequest> {
        phases
            .iter()
            .filter_map(|ph| ph.requests.as_ref())
            .flat_map(|r| &r.costliest)
            .find(|c| c.id == id)
    };
    let mut out = String::from(
        "\ncostliest requests' call chains (their own samples; --where request=ID draws one)\n",
    );
    for g in code {
        let what = costly(&g.name).map_or(String::new(), |c| {
            let so_far = if c.in_flight {
                " so far, in flight"
            } else {
                ""
            };
            format!(
                "{} took {} of CPU{so_far}: ",
                c.request,
                fmt_duration_ns(c.cpu_ns as f64)
            )
        });
        let _ = writeln!(
            out,
            "  [request {}] {what}{} samples, {} sampled",
            g.name,
            g.samples,
            fmt_duration_ns(g.sampled_ns as f64)
        );
        functions(&mut out, g);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::sample_profile;
    use reqcost_analysis::document::Analysis;
    use reqcost_record::RunRecord;
    use reqcost_record::SampleTag;

    /// The fixture's chains through `brigade_write` and `ap_rgetline` as class /a, the others /b.
    fn tagged() -> Profile {
        let mut p = sample_profile();
        p.tags = ["/a", "/b"]
            .map(|c| SampleTag {
                class: c.into(),
                ..SampleTag::default()
            })
            .to_vec();
        for (i, s) in p.stacks.iter_mut().enumerate() {
            s.tag = Some(if i % 2 == 0 { 0 } else { 1 });
        }
        p
    }

    #[test]
    fn each_class_names_its_own_hot_functions_and_callers() {
        let s = class_section(&tagged());
        let a = s.find("/a  60.0% of samples").expect(&s);
        let b = s.find("/b  40.0% of samples").expect(&s);
        assert!(a < b, "{s}");
        assert!(
            s[a..b].contains("100.0%  memcpy  [libc.so.6]  ← brigade_write"),
            "{s}"
        );
        assert!(
            s[b..].contains("75.0%  copy_user  [kernel.kallsyms]  ← write ← main"),
            "{s}"
        );
        assert!(!s[b..].contains("memcpy"), "{s}");
    }

    #[test]
    fn a_costliest_request_says_what_it_took_and_where() {
        let mut rec =
            RunRecord::from_json(include_str!("../../analysis/tests/fixtures/busy-wait.json"))
                .unwrap();
        let mut p = tagged();
        p.tags[0].request = "9/4/2".into();
        rec.profile = Some(p);
        let phase = rec.phases.iter_mut().find(|p| p.name == "main").unwrap();
        phase.requests.as_mut().unwrap().costliest = vec![CostlyRequest {
            request: "GET /big".into(),
            cpu_ns: 23_000_000,
            id: "9/4/2".into(),
            ..CostlyRequest::default()
        }];
        let code = hot_code::costliest(&rec);
        let phases = Analysis::of(&rec).phases;
        let s = costliest_section(&code, &phases);
        assert!(
            s.contains("[request 9/4/2] GET /big took 23.00 ms of CPU: 6 samples"),
            "{s}"
        );
        assert!(s.contains("memcpy  [libc.so.6]  ← brigade_write"), "{s}");
        assert_eq!(costliest_section(&[], &phases), "");
    }

    #[test]
    fn untagged_profiles_have_no_section() {
        assert_eq!(class_section(&sample_profile()), "");
    }
}
