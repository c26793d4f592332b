//! The flame graph of one request class at a time: a picker over the whole run's graph and the
//! graphs of the classes with most samples (docs/profile.md, "Per request class"); the page's
//! address picks one too (`report.html#class=/blog`).

use std::fmt::Write;

use reqcost_analysis::tagged::{split, UNTAGGED};
use reqcost_record::Profile;

use super::{esc, svg_frame};
use crate::export::flamegraph::flamegraph_svg;

/// Classes offered, most samples first.
const FLAME_CLASSES: usize = 8;

/// A class's name, its share of the samples (%) and its flame graph.
pub(super) struct ClassGraph {
    name: String,
    share: f64,
    svg: Vec<u8>,
}

/// The flame graphs of the top classes; none when the samples carry no tags.
pub(super) fn groups(p: &Profile) -> Vec<ClassGraph> {
    let Ok(groups) = split(p, "class") else {
        return Vec::new();
    };
    groups
        .into_iter()
        .filter(|(name, _)| name != UNTAGGED)
        .take(FLAME_CLASSES)
        .filter_map(|(name, g)| {
            let svg = flamegraph_svg(&g, &format!(", class {name}")).ok()?;
            Some(ClassGraph {
                share: 100.0 * g.samples as f64 / p.samples.max(1) as f64,
                name,
                svg,
            })
        })
        .collect()
}

/// The flame graph section with its class picker: the whole run's graph shown first.
pub(super) fn section(out: &mut String, intro: &str, whole: &[u8], classes: &[ClassGraph]) {
    let _ = write!(
        out,
        "<section class=\"flame\"><h2>Flame graph</h2>{intro}<p><label for=\"flame-pick\">\
         Samples of </label><select id=\"flame-pick\"><option value=\"\">the whole run</option>"
    );
    for c in classes {
        let _ = write!(
            out,
            "<option value=\"{0}\">class {0} ({1:.1} % of samples)</option>",
            esc(&c.name),
            c.share
        );
    }
    let _ = write!(
        out,
        "</select></p><div class=\"flame-group\" data-class=\"\">{}</div>",
        svg_frame("flame graph", whole)
    );
    for c in classes {
        let _ = write!(
            out,
            "<div class=\"flame-group\" data-class=\"{}\" hidden>{}</div>",
            esc(&c.name),
            svg_frame(&format!("flame graph of class {}", c.name), &c.svg)
        );
    }
    out.push_str("</section>\n");
}
