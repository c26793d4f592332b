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
    use reqcost_record::{Frame, SampleTag, Stack};

    fn profile(tagged: bool) -> Profile {
        let frame = |f: &str| Frame {
            function: f.into(),
            module: "srv".into(),
            kernel: false,
            inlined: false,
            resolved: true,
        };
        let stack = |frames: Vec<u32>, count, tag| Stack {
            frames,
            thread: "srv".into(),
            count,
            tag: tagged.then_some(tag),
        };
        let class = |c: &str| SampleTag {
            class: c.into(),
            ..SampleTag::default()
        };
        Profile {
            period_ns: 1_000_000,
            frames: vec![frame("burn_a"), frame("burn_b"), frame("main")],
            stacks: vec![stack(vec![0, 2], 6, 0), stack(vec![1, 2], 4, 1)],
            samples: 10,
            tags: if tagged {
                vec![class("/a"), class("/b")]
            } else {
                vec![]
            },
            ..Profile::default()
        }
    }

    #[test]
    fn each_class_names_its_own_hot_function_and_callers() {
        let s = class_section(&profile(true));
        let a = s.find("/a  60.0% of samples, 6.00 ms sampled").expect(&s);
        let b = s.find("/b  40.0% of samples").expect(&s);
        assert!(a < b, "{s}");
        assert!(s[a..b].contains("100.0%  burn_a  [srv]  ← main"), "{s}");
        assert!(s[b..].contains("100.0%  burn_b  [srv]  ← main"), "{s}");
    }

    #[test]
    fn untagged_profiles_have_no_section() {
        assert_eq!(class_section(&profile(false)), "");
    }
}
