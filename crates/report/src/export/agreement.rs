//! Every renderer shows the one reading of a record: the same record through the terminal
//! summary, the JSON document, the HTML report, the OpenMetrics file and the Pyroscope push
//! shows the same CPU per unit, request count, top finding and per-class rows.

use reqcost_analysis::reading::Reading;
use reqcost_record::{RunRecord, Unit};
use serde_json::Value;

use super::html::Html;
use super::openmetrics::OpenMetrics;
use super::pyroscope::ingest_query;
use super::{Exporter, Subject};
use crate::format::{fmt_count, fmt_duration_us};
use crate::summary::summary;

/// The outputs of one reading, each as its reader gets it.
struct Rendered {
    terminal: String,
    json: Value,
    html: String,
    openmetrics: String,
    pyroscope_query: String,
}

fn render(reading: &Reading) -> Rendered {
    let subject = Subject::Run(reading);
    let text = |e: &dyn Exporter| String::from_utf8(e.serialize(&subject).unwrap()).unwrap();
    let json = serde_json::to_string_pretty(&reading.analysis).unwrap();
    Rendered {
        terminal: summary(reading),
        json: serde_json::from_str(&json).unwrap(),
        html: text(&Html),
        openmetrics: text(&OpenMetrics),
        pyroscope_query: ingest_query(reading, None, None),
    }
}

/// The value of the OpenMetrics sample `name` whose labels end with `labels_end`.
fn sample(text: &str, name: &str, labels_end: &str) -> f64 {
    let prefix = format!("reqcost_{name}{{");
    let suffix = format!("{labels_end}}} ");
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .find_map(|l| l.split_once(&suffix)?.1.parse().ok())
        .unwrap_or_else(|| panic!("no {name} sample ending {labels_end}:\n{text}"))
}

fn record(name: &str) -> RunRecord {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../analysis/tests/fixtures")
        .join(name);
    RunRecord::load(&path).unwrap()
}

/// Checks that every output of `rec` read per `per` shows the JSON document's figures.
fn agree(rec: &RunRecord, per: Option<Unit>) {
    let reading = Reading::of(rec, per);
    let out = render(&reading);
    let doc = &out.json;
    let phases = doc["phases"].as_array().unwrap();
    assert!(!phases.is_empty());
    for p in phases {
        let name = p["name"].as_str().unwrap();
        let unit = p.get("unit").and_then(Value::as_str).unwrap_or("request");
        let ok = p["requests_ok"].as_u64().unwrap();
        let cpu = p["per_request"]["cpu_us"].as_f64().unwrap();
        let label = Unit::parse(unit).unwrap().label();

        // The terminal phase block.
        let block = out
            .terminal
            .split(&format!("\nphase {name} ("))
            .nth(1)
            .unwrap_or_else(|| panic!("no phase {name}:\n{}", out.terminal));
        assert!(
            block.contains(&format!("  requests     {ok} ok ")),
            "{block}"
        );
        let cpu_line = format!("  per {label}  CPU {} ", fmt_duration_us(cpu));
        assert!(block.contains(&cpu_line), "{cpu_line:?} in {block}");

        // The OpenMetrics gauges.
        let phase = format!("phase=\"{name}\"");
        let om = &out.openmetrics;
        assert_eq!(sample(om, "run_requests", &phase) as u64, ok);
        let om_cpu = sample(
            om,
            "run_cpu_per_unit_seconds",
            &format!("{phase},unit=\"{unit}\""),
        );
        assert!(
            (om_cpu * 1e6 - cpu).abs() <= cpu * 1e-12,
            "{om_cpu} s against {cpu} µs"
        );

        // Per-class rows, in each output that shows them.
        let classes = p["requests"]["by_class"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for c in &classes {
            let (class, requests) = (c["name"].as_str().unwrap(), c["requests"].as_u64().unwrap());
            let row = block
                .lines()
                .find(|l| l.trim_start_matches(['│', ' ']).starts_with(class))
                .unwrap_or_else(|| panic!("no class row {class} in {block}"));
            let cells: Vec<&str> = row.split_whitespace().collect();
            assert_eq!(cells[2], fmt_count(requests as f64), "{row}");
            let html_row = format!("<tr><td>{class}</td><td data-v=\"{requests}\">");
            assert!(out.html.contains(&html_row), "{html_row}");
            let labels = format!("{phase},class=\"{class}\"");
            assert_eq!(sample(om, "run_class_requests", &labels) as u64, requests);
        }
    }

    // The headline phase in the HTML report.
    let main = &phases[0];
    let cpu = main["per_request"]["cpu_us"].as_f64().unwrap();
    let headline = format!("data-us=\"{cpu}\">{}</span>", fmt_duration_us(cpu));
    assert!(out.html.contains(&headline), "{headline}");
    let over = match main["unit"].as_str() {
        None => format!("over {:.0} requests", main["units"].as_f64().unwrap()),
        Some("MiB") => format!("over {:.2} MiB", main["units"].as_f64().unwrap()),
        Some(unit) => format!("over {:.0} {unit}s", main["units"].as_f64().unwrap()),
    };
    assert!(out.html.contains(&over), "{over}");

    // The findings, the one explaining most CPU first.
    let findings = doc["findings"].as_array().unwrap();
    if let Some(top) = findings.first() {
        let (id, phase) = (top["id"].as_str().unwrap(), top["phase"].as_str().unwrap());
        assert!(
            out.terminal.contains(&format!("\n  1. {id}  [")),
            "{}",
            out.terminal
        );
        let first_html = out
            .html
            .split("<code class=\"finding-id\">")
            .nth(1)
            .unwrap();
        assert!(
            first_html.starts_with(&format!("{id}</code>")),
            "{first_html}"
        );
        let first_om = out
            .openmetrics
            .lines()
            .find(|l| l.starts_with("reqcost_run_finding_cpu_share{"))
            .unwrap();
        let labels = format!("phase=\"{phase}\",finding=\"{id}\"}} ");
        assert!(first_om.contains(&labels), "{first_om}");
    } else {
        assert!(!out.openmetrics.contains("reqcost_run_finding_cpu_share{"));
    }

    // Pyroscope labels the profile with the document's run and phases.
    let names: Vec<&str> = phases.iter().map(|p| p["name"].as_str().unwrap()).collect();
    let run_id = doc["run_id"].as_str().unwrap();
    for label in [
        format!("run_id={run_id}"),
        format!("phases={}", names.join("+")),
    ] {
        let encoded = super::pyroscope::percent_encode(&label);
        assert!(
            out.pyroscope_query.contains(&encoded),
            "{label}: {}",
            out.pyroscope_query
        );
    }
}

#[test]
fn every_renderer_shows_the_same_figures_of_a_record_with_findings() {
    agree(&record("busy-wait.json"), None);
}

#[test]
fn every_renderer_shows_the_same_figures_of_a_clean_record() {
    agree(&record("clean.json"), None);
}

#[test]
fn every_renderer_shows_the_same_figures_per_mib() {
    agree(&record("busy-wait.json"), Some(Unit::MiB));
}
