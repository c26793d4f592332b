//! One self-contained HTML report of a run: the headline cost per request and what it is made
//! of, the findings, the phases side by side, the distributions as charts, the cost by class and
//! client, and the interactive flame graph. Styles, script and charts are inline and nothing is
//! fetched, so the file can be mailed, attached to a ticket or opened offline, and it prints.
//!
//! The figures are those of the analysis document (`report --json`), so the page and the JSON
//! never disagree.

mod chart;
mod compare;
mod flame_classes;
mod stack;

use std::fmt::Write;

use reqcost_analysis::compare::server_command;
use reqcost_analysis::document::{Analysis, PhaseAnalysis, RequestCosts};
use reqcost_analysis::findings::Finding;
use reqcost_analysis::reading::{Reading, Run};
use reqcost_analysis::requests;
use reqcost_analysis::sweep::SweepReport;
use reqcost_record::{GroupCost, NsDistribution, Outcome};

use super::flamegraph::Flamegraph;
use super::frame_colors::CLASSES;
use super::sweep_chart::SweepChart;
use super::{Exporter, Subject};
use crate::findings::confidence_label;
use crate::format::{fmt_bytes, fmt_count, fmt_duration_ns, fmt_duration_us};
use crate::requests::{handshake_lines, setup_line};
use crate::summary::client_cost_text;
use crate::sweep::{
    cell, client_line, interval_text, pinning_lines, server_and_client_columns, verdict_lines,
};
use chart::{percentile_chart, Group};

const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("report.js");

pub struct Html;

impl Exporter for Html {
    fn serialize(&self, subject: &Subject) -> Result<Vec<u8>, String> {
        let page = match subject {
            Subject::Run(reading) => run_page(reading, subject),
            Subject::Sweep { report, title } => sweep_page(report, title, subject)?,
            Subject::Compare { comparison, .. } => compare::compare_page(comparison, subject),
        };
        Ok(page.into_bytes())
    }
}

fn run_page(reading: &Reading, subject: &Subject) -> String {
    let analysis = &reading.analysis;
    let mut body = String::new();
    header(&mut body, reading.run, analysis);
    headline(&mut body, analysis);
    findings(&mut body, &analysis.findings);
    phases(&mut body, &analysis.phases);
    distributions(&mut body, &analysis.phases);
    costs(&mut body, &analysis.phases);
    stack::stack(&mut body, &analysis.phases);
    flame_graph(&mut body, subject);
    notes(&mut body, &analysis.notes);
    page(&format!("reqcost · {}", analysis.run_id), &body)
}

/// The sweep's chart and verdict, then each level as the phases of a run are shown (side by
/// side, with their distributions and costs): the run with the level's median CPU stands for it,
/// its name giving the level's mean and interval over every run.
fn sweep_page(report: &SweepReport, title: &str, subject: &Subject) -> Result<String, String> {
    let chart = SweepChart.serialize(subject)?;
    let levels: Vec<PhaseAnalysis> = report
        .typical
        .iter()
        .map(|t| {
            let stats = report
                .levels
                .iter()
                .find(|l| l.concurrency == t.concurrency);
            let cpu =
                stats
                    .and_then(|s| Some((s, s.get("CPU")?)))
                    .map_or_else(String::new, |(s, e)| {
                        format!(
                            " · CPU/{} {} (95 %: {}) over {} run(s); run {} shown",
                            report.unit().name(),
                            fmt_duration_us(e.mean),
                            interval_text(e, "µs"),
                            s.runs,
                            t.repetition + 1
                        )
                    });
            PhaseAnalysis {
                name: format!("{} connection(s){cpu}", t.concurrency),
                ..t.figures.clone()
            }
        })
        .collect();
    let meta: String = [
        verdict_lines(report),
        client_line(report),
        pinning_lines(report),
    ]
    .iter()
    .filter(|l| !l.is_empty())
    .map(|l| format!("<p class=\"meta\">{}</p>", esc(l.trim())))
    .collect();
    let mut body = format!(
        "<header><h1>{}</h1>{meta}</header>\n<section><figure class=\"sweep\">{}</figure></section>\n",
        esc(title),
        String::from_utf8_lossy(&chart)
    );
    levels_table(&mut body, report);
    phases(&mut body, &levels);
    distributions(&mut body, &levels);
    costs(&mut body, &levels);
    Ok(page(&format!("reqcost · {title}"), &body))
}

/// One row per level: the server's cost and, beside it, the client's (mean ± half the 95 %
/// interval over the level's runs).
fn levels_table(out: &mut String, report: &SweepReport) {
    let columns = server_and_client_columns(report);
    out.push_str(
        "<section><table class=\"levels\" id=\"levels\"><thead><tr><th>connections</th>\
         <th>runs</th>",
    );
    for (header, _) in &columns {
        let _ = write!(out, "<th>{}</th>", esc(header));
    }
    out.push_str("</tr></thead><tbody>");
    for level in &report.levels {
        let _ = write!(
            out,
            "<tr><th>{}</th><td>{}</td>",
            level.concurrency, level.runs
        );
        for (_, metric) in &columns {
            let _ = write!(
                out,
                "<td data-metric=\"{}\">{}</td>",
                esc(metric),
                esc(&cell(level, metric))
            );
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></section>\n");
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head>\n<body><main>\n{body}</main>\
         <script>{SCRIPT}</script></body></html>\n",
        esc(title)
    )
}

/// `s` safe as HTML text and attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn opt(v: Option<f64>, fmt: fn(f64) -> String) -> String {
    v.map_or_else(|| "–".into(), fmt)
}

fn header(out: &mut String, run: Run, a: &Analysis) {
    let status = match &a.outcome {
        Outcome::Completed => String::new(),
        Outcome::ServerDied { detail } => format!(" · PARTIAL: server died ({detail})"),
        Outcome::Interrupted => " · PARTIAL: interrupted".into(),
        Outcome::Failed { detail } => format!(" · FAILED: {detail}"),
    };
    let server = server_command(run.target);
    let _ = writeln!(
        out,
        "<header><h1>What each {} costs <span class=\"server\">{}</span></h1>\
         <p class=\"meta\">run <code id=\"run-id\">{}</code>{} · {} · {} connection(s) · {} · {} · {} CPUs</p></header>",
        esc(a.unit().name()),
        esc(&a.server),
        esc(&a.run_id),
        esc(&status),
        esc(&server),
        run.workload.concurrency,
        esc(&run.workload.url),
        esc(&run.machine.kernel),
        run.machine.cpus
    );
}

/// The main phase's CPU per request, split into user and system, with where the requests' CPU
/// went: the syscalls they made most and the share no request carries.
fn headline(out: &mut String, a: &Analysis) {
    let Some(main) = a.main_phase() else {
        out.push_str("<section><p>No phase was measured.</p></section>\n");
        return;
    };
    let r = &main.per_request;
    let _ = write!(
        out,
        "<section class=\"headline\"><h2>Server CPU per {}</h2>",
        esc(main.unit.label())
    );
    match r.cpu_us {
        Some(cpu) => {
            let _ = write!(
                out,
                "<p class=\"big\"><span id=\"cpu-per-request\" data-us=\"{cpu}\">{}</span> \
                 <span class=\"unit\">in phase {} over {}</span></p>",
                fmt_duration_us(cpu),
                esc(&main.name),
                esc(&main.units_text())
            );
            split_bar(out, r.cpu_user_us, r.cpu_system_us);
        }
        None => {
            let why = main.cpu_missing();
            let _ = write!(out, "<p class=\"big\">not measured: {}</p>", esc(&why));
        }
    }
    if let Some(c) = &a.client {
        let _ = write!(
            out,
            "<p class=\"client\">Client: <span id=\"client-cpu\" data-us=\"{}\">{}</span></p>",
            c.cpu_us,
            esc(&client_cost_text(c))
        );
    }
    for c in &main.count_caveats {
        let _ = write!(
            out,
            "<p class=\"caveat\" data-id=\"{}\"><b>Count</b> {}</p>",
            esc(&c.id),
            esc(&c.text)
        );
    }
    made_of(out, main);
    out.push_str("</section>\n");
}

fn split_bar(out: &mut String, user: Option<f64>, system: Option<f64>) {
    let (Some(user), Some(system)) = (user, system) else {
        return;
    };
    let total = (user + system).max(f64::MIN_POSITIVE);
    let _ = write!(
        out,
        "<div class=\"split\"><span class=\"user\" style=\"width:{:.1}%\"></span><span class=\"system\" style=\"width:{:.1}%\"></span></div>\
         <p class=\"legend\"><span class=\"key user\"></span>user {} · <span class=\"key system\"></span>system (kernel) {}</p>",
        user / total * 100.0,
        system / total * 100.0,
        fmt_duration_us(user),
        fmt_duration_us(system)
    );
}

/// The syscalls behind the headline and the share of CPU no request carries.
fn made_of(out: &mut String, p: &PhaseAnalysis) {
    let calls = &p.per_request.syscalls_by_name;
    if !calls.is_empty() {
        let total = p.per_request.named_syscalls();
        let _ = write!(
            out,
            "<h3>Syscalls per {}</h3><ul class=\"calls\">",
            p.unit.name()
        );
        for (name, n) in calls.iter().take(6) {
            let _ = write!(
                out,
                "<li><code>{}</code> {} <span class=\"bar\" style=\"width:{:.1}%\"></span></li>",
                esc(name),
                fmt_count(*n),
                n / total * 100.0
            );
        }
        let _ = write!(
            out,
            "</ul><p>{} syscalls per {} in all.</p>",
            fmt_count(total),
            p.unit.name()
        );
    }
    if let Some(why) = &p.requests_not_visible {
        let _ = write!(
            out,
            "<p class=\"note\" id=\"requests-not-visible\"><b>Per-request accounting</b> {}</p>",
            esc(why)
        );
    }
    if let Some(r) = &p.requests {
        let _ = write!(
            out,
            "<p>{:.0} % of the server's CPU belongs to no request",
            r.unattributed_cpu_pct()
        );
        if !r.unattributed_made_of.is_empty() {
            let _ = write!(out, " ({})", esc(&r.unattributed_made_of));
        }
        out.push_str(".</p>");
        if let Some(note) = &r.unreliable {
            let _ = write!(out, "<p class=\"note\"><b>Note</b> {}</p>", esc(note));
        }
    }
}

fn findings(out: &mut String, findings: &[Finding]) {
    out.push_str("<section><h2>Findings</h2>");
    if findings.is_empty() {
        out.push_str(
            "<p>None: nothing in this run matches the findings catalog (docs/findings.md).</p>",
        );
    }
    for f in findings {
        finding(out, f, "finding-", "");
    }
    out.push_str("</section>\n");
}

/// One finding with its evidence; `anchor` prefixes its element id (a comparison shows the
/// same finding on both sides), `seen` is said after its share.
fn finding(out: &mut String, f: &Finding, anchor: &str, seen: &str) {
    let _ = write!(
        out,
        "<article class=\"finding{}\" id=\"{anchor}{}\"><h3><code class=\"finding-id\">{}</code> {}</h3>\
         <p class=\"share\">{:.0} % of the CPU{} in phase {} · {}{}</p><ul>",
        if f.major { " major" } else { "" },
        esc(&f.id),
        esc(&f.id),
        esc(&f.title),
        f.cpu_share_pct(),
        match f.server.as_str() {
            "" => String::new(),
            server => format!(" of {}", esc(server)),
        },
        esc(&f.phase),
        confidence_label(f.confidence),
        esc(seen)
    );
    for e in &f.evidence {
        let _ = write!(out, "<li>{}</li>", esc(e));
    }
    out.push_str("</ul>");
    if !f.carriers.is_empty() {
        let carriers: Vec<String> = f.carriers.iter().map(|c| esc(c)).collect();
        let _ = write!(out, "<p><b>Carried by</b> {}</p>", carriers.join("; "));
    }
    let _ = write!(out, "<p><b>Fix</b> {}</p></article>", esc(&f.fix));
}

type Row = (&'static str, fn(&PhaseAnalysis) -> String);

/// The figures of the phases side by side, one row each.
const PHASE_ROWS: [Row; 13] = [
    // Without reqcost's own load, the requests are those the server side counted.
    ("work", |p| match p.unit.is_request() && p.requests_ok > 0 {
        true => format!("{} requests ok", p.requests_ok),
        false => p.units_text(),
    }),
    ("errors", |p| p.errors_total().to_string()),
    ("throughput", |p| match p.units_per_s {
        Some(v) => format!("{v:.1} {}", p.unit.rate()),
        None => opt(p.throughput_rps, |v| format!("{v:.0} req/s")),
    }),
    ("CPU", |p| opt(p.per_request.cpu_us, fmt_duration_us)),
    ("CPU user", |p| {
        opt(p.per_request.cpu_user_us, fmt_duration_us)
    }),
    ("CPU system", |p| {
        opt(p.per_request.cpu_system_us, fmt_duration_us)
    }),
    ("syscalls", |p| opt(p.per_request.syscalls, fmt_count)),
    ("read calls", |p| procfs_marked(p, p.per_request.read_calls)),
    ("write calls", |p| {
        procfs_marked(p, p.per_request.write_calls)
    }),
    ("context switches", |p| {
        opt(p.per_request.context_switches, fmt_count)
    }),
    ("wakeups", |p| opt(p.per_request.wakeups, fmt_count)),
    ("latency p50", |p| {
        opt(p.latency_us.map(|l| l.p50_us), fmt_duration_us)
    }),
    ("latency p99", |p| {
        opt(p.latency_us.map(|l| l.p99_us), fmt_duration_us)
    }),
];

fn procfs_marked(p: &PhaseAnalysis, calls: Option<f64>) -> String {
    let mark = if p.per_request.calls_from_procfs {
        " ¹"
    } else {
        ""
    };
    format!("{}{mark}", opt(calls, fmt_count))
}

fn phases(out: &mut String, phases: &[PhaseAnalysis]) {
    let per = match phases.first().map(|p| p.unit) {
        Some(u) if !u.is_request() => u.label(),
        _ => "successful request",
    };
    let _ = write!(
        out,
        "<section><h2>Phases side by side</h2><p>Per {}.</p><table class=\"phases\"><thead><tr><th></th>",
        esc(per)
    );
    for p in phases {
        let model = p.client_model.as_deref().unwrap_or("unlimited clients");
        let _ = write!(
            out,
            "<th>{}<br><small>{}</small></th>",
            esc(&p.name),
            esc(model)
        );
    }
    out.push_str("</tr></thead><tbody>");
    for (name, value) in PHASE_ROWS {
        let _ = write!(out, "<tr><th>{name}</th>");
        for p in phases {
            let _ = write!(out, "<td>{}</td>", esc(&value(p)));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    if phases.iter().any(|p| p.per_request.calls_from_procfs) {
        out.push_str("<p class=\"note\">¹ from /proc/PID/io, the probes being off: socket send*/recv* calls are not counted.</p>");
    }
    for p in phases.iter().filter(|p| !p.missing.is_empty()) {
        for (field, why) in &p.missing {
            let _ = write!(
                out,
                "<p class=\"note\">{}: {} not measured: {}</p>",
                esc(&p.name),
                esc(field),
                esc(why)
            );
        }
    }
    out.push_str("</section>\n");
}

fn ns_bars(d: &NsDistribution) -> Vec<(&'static str, f64)> {
    let us = |ns: u64| ns as f64 / 1000.0;
    vec![
        ("p50", us(d.p50)),
        ("p90", us(d.p90)),
        ("p99", us(d.p99)),
        ("max", us(d.max)),
    ]
}

/// CPU per request as the server counted each request (or the phase's mean without the
/// probes), and the clients' latency percentiles.
fn distributions(out: &mut String, phases: &[PhaseAnalysis]) {
    let cpu: Vec<Group> = phases
        .iter()
        .filter_map(|p| {
            let bars = match (&p.requests, p.per_request.cpu_us) {
                (Some(r), _) if r.requests > 0 => ns_bars(&r.cpu_per_request_ns),
                (_, Some(mean)) => vec![("mean", mean)],
                _ => return None,
            };
            Some(Group {
                name: p.name.clone(),
                bars,
            })
        })
        .collect();
    let latency: Vec<Group> = phases
        .iter()
        .filter_map(|p| {
            let l = p.latency_us?;
            Some(Group {
                name: p.name.clone(),
                bars: vec![
                    ("p50", l.p50_us),
                    ("p90", l.p90_us),
                    ("p99", l.p99_us),
                    ("p99.9", l.p999_us),
                    ("max", l.max_us),
                ],
            })
        })
        .collect();
    let per = phases.first().map(|p| p.unit).unwrap_or_default().name();
    let _ = writeln!(
        out,
        "<section><h2>Distributions</h2>\
         <figure>{}<figcaption>Server CPU per {per} (log scale)</figcaption></figure>\
         <figure>{}<figcaption>Latency as the clients saw it (log scale)</figcaption></figure></section>",
        percentile_chart(&format!("Server CPU per {per}"), &cpu),
        percentile_chart("Latency", &latency)
    );
}

/// Per-request accounting: who and what carries the CPU, per phase that has it.
fn costs(out: &mut String, phases: &[PhaseAnalysis]) {
    let with: Vec<(&PhaseAnalysis, &RequestCosts)> = phases
        .iter()
        .filter_map(|p| Some((p, p.requests.as_ref()?)))
        .collect();
    if with.is_empty() {
        return;
    }
    out.push_str("<section><h2>Cost by class and by client</h2><p>Requests as the server served them (per-request accounting). Click a column to sort.</p>");
    for (p, r) in with {
        let _ = write!(out, "<h3>Phase {}</h3>", esc(&p.name));
        if let Some(note) = &r.in_flight {
            let _ = write!(out, "<p class=\"in-flight\">{}</p>", esc(note));
        }
        if let Some((line, kinds)) = handshake_lines(r) {
            let kinds = kinds
                .map(|k| format!("<br>{}", esc(&k)))
                .unwrap_or_default();
            let _ = write!(out, "<p class=\"tls\"><b>TLS</b> {}{kinds}</p>", esc(&line));
        }
        if let Some(line) = setup_line(r) {
            let _ = write!(out, "<p class=\"tls\"><b>Set-up</b> {}</p>", esc(&line));
        }
        if let Some(note) = &r.protocol {
            let _ = write!(out, "<p class=\"in-flight\"><b>Count</b> {}</p>", esc(note));
        }
        for (title, rows) in [
            ("by class", &r.by_class),
            ("by client", &r.by_client),
            ("by client speed", &r.by_speed),
        ] {
            if !rows.is_empty() {
                group_table(out, title, rows);
            }
        }
    }
    out.push_str("</section>\n");
}

/// Length of the bar of a group that carries all of the phase's CPU.
const SHARE_BAR_REM: f64 = 6.0;

fn group_table(out: &mut String, title: &str, rows: &[GroupCost]) {
    let _ = write!(
        out,
        "<table class=\"groups sortable\"><caption>{title}</caption><thead><tr>\
         <th>name</th><th>requests</th><th>share of CPU</th><th>CPU/request p50</th>\
         <th>p99</th><th>max</th><th>syscalls/request</th><th>bytes out/request</th></tr></thead><tbody>"
    );
    for g in rows {
        let d = &g.cpu_per_request;
        let us = |ns: u64| fmt_duration_ns(ns as f64);
        let _ = write!(
            out,
            "<tr><td>{}</td><td data-v=\"{}\">{}</td>\
             <td data-v=\"{}\"><span class=\"bar\" style=\"width:{:.2}rem\"></span> {:.1} %</td>\
             <td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td>\
             <td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td></tr>",
            esc(&g.name),
            g.requests,
            esc(&requests::group_requests(g)),
            g.cpu_share_pct,
            g.cpu_share_pct.clamp(0.0, 100.0) * SHARE_BAR_REM / 100.0,
            g.cpu_share_pct,
            d.p50,
            us(d.p50),
            d.p99,
            us(d.p99),
            d.max,
            us(d.max),
            g.syscalls_per_request,
            fmt_count(g.syscalls_per_request),
            g.bytes_out_per_request,
            fmt_bytes(g.bytes_out_per_request)
        );
    }
    out.push_str("</tbody></table>");
}

/// The interactive flame graph of the run, with the legend of its colours.
fn flame_graph(out: &mut String, subject: &Subject) {
    let mut intro = String::from(
        "<p>On-CPU call chains of the whole run: click a frame to zoom, Ctrl-F to search.</p>\
         <p class=\"legend\">",
    );
    for c in &CLASSES {
        let [r, g, b] = c.rgb;
        let _ = write!(
            intro,
            "<span class=\"key\" style=\"background:rgb({r},{g},{b})\"></span>{} ",
            esc(c.label)
        );
    }
    intro.push_str("</p>");
    let svg = Flamegraph.serialize(subject);
    let groups = match subject {
        Subject::Run(reading) => flame_classes::groups(reading),
        _ => Vec::new(),
    };
    match groups {
        groups if !groups.is_empty() && svg.is_ok() => flame_classes::section(
            out,
            "Flame graph",
            &intro,
            &svg.unwrap_or_default(),
            &groups,
        ),
        _ => flame_frame(out, "Flame graph", &intro, svg),
    }
}

/// A flame graph in a frame of its own, after `intro` (HTML): its script finds "the first svg
/// of the document" and its ids are generic, so it must not share a document with the charts.
fn flame_frame(out: &mut String, title: &str, intro: &str, svg: Result<Vec<u8>, String>) {
    let _ = write!(out, "<section class=\"flame\"><h2>{title}</h2>");
    match svg {
        Ok(svg) => {
            let _ = write!(out, "{intro}{}", svg_frame(&title.to_lowercase(), &svg));
        }
        Err(why) => {
            let _ = write!(out, "<p>No {}: {}.</p>", title.to_lowercase(), esc(&why));
        }
    }
    out.push_str("</section>\n");
}

/// An SVG in an iframe of its own, as tall as the SVG.
fn svg_frame(title: &str, svg: &[u8]) -> String {
    let svg = String::from_utf8_lossy(svg);
    let root = svg.find("<svg").map_or(&svg[..], |at| &svg[at..]);
    let doc = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>body{{margin:0}}svg{{width:100%}}</style></head><body>{root}</body></html>"
    );
    format!(
        "<iframe title=\"{}\" style=\"height:{}px\" srcdoc=\"{}\"></iframe>",
        esc(title),
        svg_height(root).unwrap_or(FLAME_HEIGHT),
        esc(&doc)
    )
}

/// A frame's height when the flame graph does not say its own.
const FLAME_HEIGHT: u32 = 600;

/// The `height` of the SVG's root element: the frame holding it shows all of it.
fn svg_height(svg: &str) -> Option<u32> {
    let tag = &svg[..svg.find('>')?];
    let (_, value) = tag.split_once(" height=\"")?;
    value.split_once('"')?.0.parse().ok()
}

fn notes(out: &mut String, notes: &[String]) {
    if notes.is_empty() {
        return;
    }
    out.push_str("<section><h2>Notes</h2><ul class=\"notes\">");
    for n in notes {
        let _ = write!(out, "<li>{}</li>", esc(n));
    }
    out.push_str("</ul></section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::profile_run;

    fn html(subject: &Subject) -> Result<String, String> {
        Html.serialize(subject)
            .map(|b| String::from_utf8(b).expect("UTF-8"))
    }

    #[test]
    fn a_run_without_phases_or_samples_says_so() {
        let mut rec = profile_run();
        rec.profile = None;
        let page = html(&Subject::Run(&Reading::of(&rec, None))).unwrap();
        assert!(page.contains("No phase was measured."), "{page}");
        assert!(
            page.contains("No flame graph: run fixture-profile has no sampled call chains"),
            "{page}"
        );
        assert!(!page.contains("Cost by class"), "{page}");
    }

    #[test]
    fn the_flame_graph_sits_in_a_frame_as_tall_as_it() {
        let rec = profile_run();
        let page = html(&Subject::Run(&Reading::of(&rec, None))).unwrap();
        let frame = &page[page.find("<iframe").unwrap()..];
        assert!(
            frame.starts_with("<iframe title=\"flame graph\" style=\"height:"),
            "{frame}"
        );
        assert!(
            frame.contains("memcpy") && !frame.contains("<?xml"),
            "{frame}"
        );
        assert_eq!(
            svg_height("<svg width=\"1200\" height=\"694\" x=\"1\">"),
            Some(694)
        );
        assert_eq!(svg_height("<svg>"), None);
    }

    #[test]
    fn a_comparison_shows_both_sides_verdicts_and_the_differential_flame_graph() {
        let a = [profile_run()];
        let mut b = profile_run();
        b.id = "fixture-profile-b".into();
        let b = [b];
        let comparison = reqcost_analysis::compare::compare(&a, &b);
        let page = html(&Subject::Compare {
            a: &a,
            b: &b,
            comparison: &comparison,
        })
        .unwrap();
        assert!(page.contains("<h1>A against B</h1>"), "{page}");
        assert!(page.contains("<code>fixture-profile-b</code>"), "{page}");
        // Records without phases: nothing to judge, said once; both profiles still diff.
        assert!(
            page.contains("Neither side measured CPU in a phase both ran."),
            "{page}"
        );
        assert!(
            page.contains("<iframe title=\"differential flame graph\""),
            "{page}"
        );
        assert!(page.contains("<h2>Findings of A</h2>") && page.contains("<h2>Findings of B</h2>"));
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
