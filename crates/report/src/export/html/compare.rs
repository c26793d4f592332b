//! The HTML report of an A/B comparison: both sides and their runs, the CPU per request of
//! each, every phase's verdicts with their intervals, the differential flame graph, and the
//! findings of each side. The figures are those of `compare --json`.

use std::fmt::Write;

use reqcost_analysis::compare::{Comparison, MetricComparison, PhaseComparison, SideFinding};
use reqcost_record::Unit;

use super::flame_classes::{section, GroupGraph};
use super::{esc, finding, flame_frame, page};
use crate::compare::ratio_and_interval;
use crate::export::diff_flamegraph::{class_diff_svg, DiffFlamegraph};
use crate::export::{Exporter, Subject};
use crate::format::{fmt_count, fmt_duration_ns, fmt_duration_us, fmt_metric};

pub(super) fn compare_page(c: &Comparison, subject: &Subject) -> String {
    let mut body = String::new();
    sides(&mut body, c);
    headline(&mut body, c);
    for p in &c.phases {
        phase(&mut body, p, c.unit);
    }
    client(&mut body, c);
    changes(&mut body, c);
    diff_flame_graph(&mut body, c, subject);
    class_code(&mut body, c);
    let [fa, fb] = &c.side_findings;
    side_findings(&mut body, "A", fa, c.a.runs.len());
    side_findings(&mut body, "B", fb, c.b.runs.len());
    page("reqcost · A against B", &body)
}

/// What ran as A and as B (the server command, or the record's process name), and each run.
fn sides(out: &mut String, c: &Comparison) {
    let order: Vec<&str> = c.run_order.iter().map(|s| s.label()).collect();
    let _ = write!(
        out,
        "<header><h1>A against B</h1><p class=\"meta\">runs in the order {}; per {}, \
         mean over runs; verdicts from B's point of view</p></header>\n<section><table class=\"sides\">\
         <thead><tr><th></th><th>server</th><th>runs</th></tr></thead><tbody>",
        order.join(" "),
        c.unit.name()
    );
    for (label, side) in [("A", &c.a), ("B", &c.b)] {
        let ids: Vec<String> = side
            .runs
            .iter()
            .map(|id| format!("<code>{}</code>", esc(id)))
            .collect();
        let _ = write!(
            out,
            "<tr><th>{label}</th><td><code>{}</code></td><td>{}</td></tr>",
            esc(&side.server),
            ids.join(" ")
        );
    }
    out.push_str("</tbody></table>");
    for p in &c.partial {
        let _ = write!(
            out,
            "<p class=\"note\">PARTIAL {}: record {} {}: its phases hold only what ran before.</p>",
            p.side.label(),
            esc(&p.id),
            esc(&p.outcome)
        );
    }
    out.push_str("</section>\n");
}

/// CPU per request of each side in the main phase (or the first compared), B/A and the verdict.
fn headline(out: &mut String, c: &Comparison) {
    let main = c
        .phases
        .iter()
        .find(|p| p.phase == "main")
        .or(c.phases.first());
    let Some((p, cpu)) =
        main.and_then(|p| Some((p, p.metrics.iter().find(|m| m.metric == "CPU")?)))
    else {
        out.push_str("<section><p>Neither side measured CPU in a phase both ran.</p></section>\n");
        return;
    };
    let (ratio, interval) = ratio_and_interval(cpu);
    let _ = writeln!(
        out,
        "<section class=\"headline\"><h2>Server CPU per {}</h2>\
         <p class=\"big\">A <span id=\"cpu-a\" data-us=\"{}\">{}</span> · B \
         <span id=\"cpu-b\" data-us=\"{}\">{}</span> <span class=\"unit\">in phase {}</span></p>\
         <p>B/A {ratio} (95 % interval {}): {}</p></section>",
        c.unit.name(),
        cpu.a.mean,
        fmt_duration_us(cpu.a.mean),
        cpu.b.mean,
        fmt_duration_us(cpu.b.mean),
        esc(&p.phase),
        esc(&interval),
        verdict(cpu)
    );
}

fn verdict(m: &MetricComparison) -> String {
    let label = m.verdict.label();
    format!(
        "<span class=\"verdict {}\">{label}</span>",
        label.replace(' ', "-")
    )
}

/// One phase: every metric of both sides with B/A, its interval and the verdict; then the
/// syscalls whose count per request changed.
fn phase(out: &mut String, p: &PhaseComparison, unit: Unit) {
    let runs = if p.repetitions == 1 {
        "1 run each".to_string()
    } else {
        format!("{} repetitions each", p.repetitions)
    };
    let _ = write!(
        out,
        "<section class=\"phase\" id=\"phase-{}\"><h2>Phase {} <small>{runs}</small></h2>",
        esc(&p.phase),
        esc(&p.phase),
    );
    verdict_table(out, &p.metrics, unit);
    let changed = p.changed_syscalls();
    if !changed.is_empty() {
        let _ = write!(
            out,
            "<table><caption>syscalls per {} that changed</caption><thead><tr><th>syscall</th>\
             <th>A</th><th>B</th><th>B − A</th></tr></thead><tbody>",
            unit.name()
        );
        for s in changed {
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{:+.2}</td></tr>",
                esc(&s.name),
                fmt_count(s.a_per_request),
                fmt_count(s.b_per_request),
                s.change()
            );
        }
        out.push_str("</tbody></table>");
    }
    for h in &p.hops {
        let _ = write!(
            out,
            "<h3>Hop {} {}: its tree's CPU and requests per front {}</h3>",
            h.hop,
            esc(&h.name),
            unit.name()
        );
        verdict_table(out, &h.metrics, unit);
    }
    out.push_str("</section>\n");
}

/// Per metric: A, B, B/A with its interval, and the verdict for B.
fn verdict_table(out: &mut String, metrics: &[MetricComparison], unit: Unit) {
    let _ = write!(
        out,
        "<table class=\"verdicts\"><thead><tr><th>per {}</th><th>A</th><th>B</th><th>B/A</th>\
         <th>95 % interval</th><th>verdict for B</th></tr></thead><tbody>",
        unit.name()
    );
    for m in metrics {
        let (ratio, interval) = ratio_and_interval(m);
        let _ = write!(
            out,
            "<tr><th>{}</th><td>{}</td><td>{}</td><td>{ratio}</td><td>{}</td><td>{}</td></tr>",
            esc(m.metric),
            esc(&fmt_metric(m.a.mean, m.unit)),
            esc(&fmt_metric(m.b.mean, m.unit)),
            esc(&interval),
            verdict(m)
        );
    }
    out.push_str("</tbody></table>");
}

/// The client's cost on each side, beside the server's phases.
fn client(out: &mut String, c: &Comparison) {
    if c.client.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<section class=\"phase\" id=\"client\"><h2>Client <small>{}, main phase</small></h2>",
        esc(&c.client_label())
    );
    verdict_table(out, &c.client, c.unit);
    out.push_str("</section>\n");
}

/// Phases not compared, and findings that appeared or vanished.
fn changes(out: &mut String, c: &Comparison) {
    let lists = [
        ("Phases only A measured, not compared", &c.only_in_a),
        ("Phases only B measured, not compared", &c.only_in_b),
        (
            "Findings in every B run, not every A run",
            &c.findings_appeared,
        ),
        ("Findings in every A run, gone in B", &c.findings_vanished),
    ];
    if lists.iter().all(|(_, names)| names.is_empty()) {
        return;
    }
    out.push_str("<section><h2>What changed</h2>");
    for (label, names) in lists.into_iter().filter(|(_, n)| !n.is_empty()) {
        let names: Vec<String> = names
            .iter()
            .map(|n| format!("<code>{}</code>", esc(n)))
            .collect();
        let _ = write!(out, "<p>{label}: {}</p>", names.join(", "));
    }
    out.push_str("</section>\n");
}

/// The findings of one side's `runs` runs, each once (as the run where it explains most CPU
/// shows it), with how many of the runs have it.
fn side_findings(out: &mut String, label: &str, seen: &[SideFinding], runs: usize) {
    let _ = write!(
        out,
        "<section class=\"side-findings\" id=\"findings-{}\"><h2>Findings of {label}</h2>",
        label.to_lowercase()
    );
    if seen.is_empty() {
        out.push_str("<p>None: nothing in these runs matches the findings catalog.</p>");
    }
    let anchor = format!("{}-finding-", label.to_lowercase());
    for s in seen {
        let of_runs = if runs > 1 {
            format!(" · in {} of {runs} runs", s.runs)
        } else {
            String::new()
        };
        finding(out, &s.finding, &anchor, &of_runs);
    }
    out.push_str("</section>\n");
}

/// Each class's flame graph difference: its CPU per request on each side and the functions whose
/// self CPU per request changed most.
fn class_code(out: &mut String, c: &Comparison) {
    if c.class_code.is_empty() {
        return;
    }
    let us = |ns: f64| fmt_duration_ns(ns);
    out.push_str(
        "<section class=\"class-code\"><h2>Per class code</h2><p>Each request class's own samples: \
         its sampled CPU per request of the class, and the functions whose self CPU per request \
         grew or shrank most.</p>",
    );
    for d in &c.class_code {
        let side = |ns: Option<f64>| ns.map_or("-".into(), us);
        let _ = write!(
            out,
            "<h3>class <code>{}</code>: A {} · B {}</h3>",
            esc(&d.class),
            side(d.a_ns_per_request),
            side(d.b_ns_per_request)
        );
        if d.functions.is_empty() {
            out.push_str("<p>No function changed by 2 % of the class's CPU or more.</p>");
            continue;
        }
        out.push_str(
            "<table><thead><tr><th>function</th><th>A</th><th>B</th><th>B − A</th></tr></thead><tbody>",
        );
        for f in &d.functions {
            let delta = f.change_ns();
            let _ = write!(
                out,
                "<tr><td><code>{}</code> {}</td><td>{}</td><td>{}</td>\
                 <td>{}{}</td></tr>",
                esc(&f.function),
                esc(&f.module),
                us(f.a_ns),
                us(f.b_ns),
                if delta >= 0.0 { "+" } else { "−" },
                us(delta.abs())
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</section>\n");
}

/// The differential flame graph, with a picker over each request class's own when the samples
/// are tagged (the classes of `class_code`).
fn diff_flame_graph(out: &mut String, c: &Comparison, subject: &Subject) {
    let intro = "<p>B's call chains, both sides scaled to the same number of requests (a class's \
                 to its requests): red where B spends more per request than A, blue where less. \
                 Click a frame to zoom.</p>";
    let whole = DiffFlamegraph.serialize(subject);
    let groups: Vec<GroupGraph> = match subject.comparison() {
        Ok((a, b)) => c
            .class_code
            .iter()
            .filter_map(|d| {
                let svg = class_diff_svg(a, b, &d.class).ok()?;
                Some(GroupGraph::class(
                    &d.class,
                    format!("class {}", d.class),
                    svg,
                ))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    match whole {
        Ok(svg) if !groups.is_empty() => {
            section(out, "Differential flame graph", intro, &svg, &groups)
        }
        whole => flame_frame(out, "Differential flame graph", intro, whole),
    }
}
