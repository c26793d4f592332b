//! The profile by request class: for the classes whose requests took most samples, the
//! functions that took most of their CPU, each with its most frequent callers (docs/profile.md,
//! "Per request class").

use std::fmt::Write as _;

use reqcost_analysis::profile::{callers, function_counts, key, View};
use reqcost_analysis::tagged::{split, UNTAGGED};
use reqcost_record::Profile;

use crate::format::fmt_duration_us;
use crate::profile::{label, module_label, share};

/// Classes shown, most samples first.
const TOP_CLASSES: usize = 5;
/// Functions shown per class, by self samples.
const CLASS_FUNCTIONS: usize = 3;
/// Callers shown after each function.
const CLASS_CALLER_DEPTH: usize = 4;

/// The section, empty when the samples carry no request tags.
pub(crate) fn class_section(p: &Profile) -> String {
    let Ok(groups) = split(p, "class") else {
        return String::new();
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n  by request class (samples taken while serving its requests; self %, callers nearest \
         first)"
    );
    for (class, g) in groups
        .iter()
        .filter(|(c, _)| c != UNTAGGED)
        .take(TOP_CLASSES)
    {
        let _ = writeln!(
            out,
            "    {class}  {:.1}% of samples, {} sampled",
            share(g.samples, p.samples),
            fmt_duration_us(g.samples as f64 * g.period_ns as f64 / 1e3)
        );
        let mut hot: Vec<_> = function_counts(g).into_iter().collect();
        hot.sort_by(|a, b| {
            b.1.self_samples
                .cmp(&a.1.self_samples)
                .then_with(|| a.0.cmp(&b.0))
        });
        for (f, c) in hot
            .iter()
            .filter(|(_, c)| c.self_samples > 0)
            .take(CLASS_FUNCTIONS)
        {
            let chain = callers(g, View::All, |fr| key(fr) == *f, CLASS_CALLER_DEPTH);
            let via = chain
                .first()
                .filter(|(frames, _)| !frames.is_empty())
                .map(|(frames, _)| {
                    let names: Vec<String> = frames.iter().map(|f| label(f)).collect();
                    format!("  ← {}", names.join(" ← "))
                })
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "      {:>5.1}%  {}  {}{via}",
                share(c.self_samples, g.samples),
                f.0,
                module_label(f.1)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::sample_profile;
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
    fn untagged_profiles_have_no_section() {
        assert_eq!(class_section(&sample_profile()), "");
    }
}
