//! The flame graph of one request class or one costliest request at a time: a picker over the
//! whole run's graph, the graphs of the classes with most samples and those of the costliest
//! requests (docs/profile.md, "Per request class"); the page's address picks one too
//! (`report.html#class=/blog`, `report.html#request=PID/CONNECTION/INDEX`).

use std::fmt::Write;

use reqcost_analysis::reading::Reading;
use reqcost_analysis::tagged::{select, split, TagFilter, UNTAGGED};
use reqcost_record::Profile;

use super::{esc, svg_frame};
use crate::export::flamegraph::flamegraph_svg;
use crate::format::fmt_duration_ns;

/// Classes offered, most samples first.
const FLAME_CLASSES: usize = 8;

/// One group's flame graph: its key in the picker and the address (`class=NAME`,
/// `request=ID`), what the picker calls it, and the graph.
pub(super) struct GroupGraph {
    key: String,
    label: String,
    svg: Vec<u8>,
}

/// The flame graphs of the top classes, then of the costliest requests that have their own
/// samples (the analysis' `costliest_code`); none when the samples carry no tags.
pub(super) fn groups(reading: &Reading) -> Vec<GroupGraph> {
    let Some(p) = reading.profile else {
        return Vec::new();
    };
    let Ok(classes) = split(p, "class") else {
        return Vec::new();
    };
    let share = |g: &Profile| 100.0 * g.samples as f64 / p.samples.max(1) as f64;
    let mut out: Vec<GroupGraph> = classes
        .into_iter()
        .filter(|(name, _)| name != UNTAGGED)
        .take(FLAME_CLASSES)
        .filter_map(|(name, g)| {
            let svg = flamegraph_svg(&g, &format!(", class {name}")).ok()?;
            let label = format!("class {name} ({:.1} % of samples)", share(&g));
            Some(GroupGraph::class(&name, label, svg))
        })
        .collect();
    for code in &reading.analysis.costliest_code {
        let filter = TagFilter {
            key: "request".into(),
            value: code.name.clone(),
        };
        let Ok(g) = select(p, &[filter]) else {
            continue;
        };
        let what = reading
            .analysis
            .phases
            .iter()
            .filter_map(|ph| ph.requests.as_ref())
            .flat_map(|r| &r.costliest)
            .find(|c| c.id == code.name)
            .map_or(String::new(), |c| {
                let so_far = if c.in_flight {
                    " so far, in flight"
                } else {
                    ""
                };
                format!(
                    "{}, {} of CPU{so_far}, ",
                    c.request,
                    fmt_duration_ns(c.cpu_ns as f64)
                )
            });
        let Ok(svg) = flamegraph_svg(&g, &format!(", request {}", code.name)) else {
            continue;
        };
        out.push(GroupGraph {
            key: format!("request={}", code.name),
            label: format!("request {} ({what}{} samples)", code.name, g.samples),
            svg,
        });
    }
    out
}

impl GroupGraph {
    /// Request class `class`'s graph.
    pub(super) fn class(class: &str, label: String, svg: Vec<u8>) -> GroupGraph {
        GroupGraph {
            key: format!("class={class}"),
            label,
            svg,
        }
    }
}

/// A flame graph section titled `title` with its picker: the whole run's graph shown first.
pub(super) fn section(
    out: &mut String,
    title: &str,
    intro: &str,
    whole: &[u8],
    groups: &[GroupGraph],
) {
    let _ = write!(
        out,
        "<section class=\"flame\"><h2>{title}</h2>{intro}<p><label for=\"flame-pick\">\
         Samples of </label><select id=\"flame-pick\"><option value=\"\">the whole run</option>"
    );
    for g in groups {
        let _ = write!(
            out,
            "<option value=\"{}\">{}</option>",
            esc(&g.key),
            esc(&g.label)
        );
    }
    let _ = write!(
        out,
        "</select></p><div class=\"flame-group\" data-pick=\"\">{}</div>",
        svg_frame("flame graph", whole)
    );
    for g in groups {
        let _ = write!(
            out,
            "<div class=\"flame-group\" data-pick=\"{}\" hidden>{}</div>",
            esc(&g.key),
            svg_frame(&format!("flame graph of {}", g.label), &g.svg)
        );
    }
    out.push_str("</section>\n");
}
