//! The stack section of the HTML report (docs/stack.md): per phase with upstream hops, each
//! front class's cost per request across the stack and by hop, and each tree's CPU that no
//! front request holds, as the summary says them.

use std::fmt::Write;

use reqcost_analysis::document::PhaseAnalysis;
use reqcost_analysis::hot_code::GroupCode;

use super::esc;
use crate::format::fmt_duration_ns;
use crate::stack::{parts_text, unattributed_line};

pub(super) fn stack(out: &mut String, phases: &[PhaseAnalysis]) {
    let with: Vec<_> = phases
        .iter()
        .filter_map(|p| Some((p, p.stack.as_ref()?)))
        .collect();
    if with.is_empty() {
        return;
    }
    out.push_str(
        "<section id=\"stack\"><h2>The stack</h2><p>The front server's requests followed into \
         the local servers they called: each front class's CPU per request in every tree.</p>",
    );
    for (p, s) in with {
        let _ = write!(out, "<h3>Phase {}</h3>", esc(&p.name));
        out.push_str(
            "<table class=\"groups sortable stack\"><caption>per front request, by hop</caption>\
             <thead><tr><th>class</th><th>requests</th><th>across the stack</th><th>by hop</th>\
             <th>dearest</th><th>its code there (self)</th></tr></thead><tbody>",
        );
        for c in &s.classes {
            let _ = write!(
                out,
                "<tr><td>{}</td><td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&c.class),
                c.requests,
                c.requests,
                c.cpu_per_request_ns,
                fmt_duration_ns(c.cpu_per_request_ns),
                esc(&parts_text(c)),
                esc(&s.name(c.dearest_hop)),
                c.dearest_code.as_ref().map_or_else(String::new, dearest_code)
            );
        }
        out.push_str("</tbody></table><p><b>Not for a front request</b></p><ul>");
        for h in &s.hops {
            let _ = write!(out, "<li>{}</li>", esc(&unattributed_line(h)));
        }
        out.push_str("</ul>");
    }
    out.push_str("</section>\n");
}

/// An upstream hop's code for a class (`dearest_code`): its hottest functions by self
/// samples, with their share, as the summary lists them.
fn dearest_code(code: &GroupCode) -> String {
    let functions: Vec<String> = code
        .by_self
        .iter()
        .take(3)
        .map(|f| format!("{} {:.1} %", esc(&f.function), f.share_pct()))
        .collect();
    format!("{} ({} samples)", functions.join("<br>"), code.samples)
}
