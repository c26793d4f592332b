//! A stack's record (nginx -> application -> PostgreSQL, the testkit's fixture tallied as the
//! measurement tallies it): the summary and the JSON document say per front class what it
//! costs across the stack and in which hop, the costliest requests with their hops, and each
//! hop's share no front request holds. No root needed.

use reqcost_analysis::document::Analysis;
use reqcost_analysis::reading::Reading;
use reqcost_analysis::requests::{RequestTally, TallyCounters, TallyOptions};
use reqcost_record::RunRecord;
use reqcost_report::export::{ExportManager, Format, Subject};
use reqcost_report::summary;
use reqcost_testkit::stack::{self, UNATTRIBUTED_US};
use reqcost_testkit::TempDir;

fn record() -> RunRecord {
    let counters = |hop: usize| TallyCounters {
        attributed_ns: stack::attributed_ns()[hop],
        unattributed_ns: UNATTRIBUTED_US[hop] * 1000,
        dropped: 0,
    };
    let mut tally = RequestTally::new(TallyOptions {
        follow_hops: true,
        ..TallyOptions::new("http", &[]).unwrap()
    });
    for ev in stack::events() {
        tally.add(&ev);
    }
    let s = tally.finish_stack(counters(0), &[(1, counters(1)), (2, counters(2))]);
    stack::record(s.front, s.hops)
}

fn line<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in\n{text}"))
}

#[test]
fn the_summary_names_each_class_cost_by_hop_and_the_hop_it_is_in() {
    let text = summary(&Reading::of(&record(), None));
    assert_eq!(
        line(&text, "      GET /orders  "),
        "      GET /orders  1.90 ms = nginx 90.0 µs + gunicorn 1.40 ms (1 request: GET /orders) + \
         postgres 410 µs (3 requests: SELECT orders, SELECT items, UPDATE stock) · dearest: gunicorn (4 \
         requests)"
    );
    assert_eq!(
        line(&text, "      GET /export  "),
        "      GET /export  2.17 ms = nginx 2.00 ms + gunicorn 150 µs (1 request: GET /export) + \
         postgres 20.0 µs (1 request: SELECT products) · dearest: nginx (2 requests)"
    );
    assert!(
        line(&text, "hops     ").ends_with(
            "0 nginx (front) · 1 gunicorn via tcp 127.0.0.1:8000 · 2 postgres via unix \
             /tmp/pg/.s.PGSQL.5432"
        ),
        "{text}"
    );
    assert!(line(&text, "costliest front requests")
        .ends_with("costliest front requests across the stack"));
    assert!(line(&text, "      1. GET /export").contains(
        "from 10.0.0.2: 2.17 ms = nginx 2.00 ms + gunicorn 150 µs (1) + postgres 20.0 µs (1)"
    ));
    // 4.465 + 6.000 + 1.800 ms, of which 325 µs for no front request.
    assert!(
        line(&text, "    CPU          12.27 ms in 3 trees")
            .ends_with("97.4 % for the front's requests, the rest for none (below)"),
        "{text}"
    );
    // Each tree's CPU no front request holds, and what it is made of.
    assert_eq!(
        line(&text, "      postgres 1"),
        "      postgres 120 µs of 1.80 ms (6.7 %): its own work 50.0 µs, for front requests the \
         phase did not tally 25.0 µs"
    );
    assert!(line(&text, "      gunicorn 1")
        .starts_with("      gunicorn 100 µs of 6.00 ms (1.7 %): its own work 30.0 µs"));
    // The hops' own requests, by their own classes; the calls to an upstream are no requests.
    assert!(line(&text, "hop 2 postgres: its own requests").starts_with("    hop 2"));
    assert!(
        line(&text, "1. 200 µs  SELECT orders").contains(" for front GET /orders [request 100/")
    );
    assert!(line(&text, "calls        1 turns").contains("not requests: 5.0 µs CPU each"));
}

#[test]
fn the_json_document_carries_the_stack() {
    let rec = record();
    let reading = Reading::of(&rec, None);
    let json: serde_json::Value = serde_json::to_value(&reading.analysis).unwrap();
    let stack = &json["phases"][0]["stack"];
    let orders = &stack["classes"][1];
    assert_eq!(orders["class"], "GET /orders");
    assert_eq!(orders["cpu_per_request_ns"], 1_900_000.0);
    assert_eq!(orders["dearest_hop"], 1);
    assert_eq!(orders["parts"][2]["name"], "postgres");
    assert_eq!(orders["parts"][2]["requests_per_request"], 3.0);
    assert_eq!(stack["classes"][0]["dearest_hop"], 0);
    assert_eq!(stack["hops"][2]["own_cpu_ns"], 50_000);
    // Every tree's CPU is the front's requests' or no front request's.
    assert_eq!(stack["cpu_ns"], 12_265_000);
    assert_eq!(stack["for_front_cpu_ns"], 12_265_000 - 325_000);
    assert_eq!(stack["hops"][2]["requests"]["requests"], 16);
    let by_class = &json["phases"][0]["requests"]["by_class"];
    let orders = by_class
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "GET /orders")
        .unwrap();
    assert_eq!(orders["by_hop"][1]["requests"], 12);
    assert_eq!(orders["stack_cpu_ns"], 7_600_000);
}

#[test]
fn html_and_openmetrics_carry_the_stack_by_hop() {
    let rec = record();
    let reading = Reading::of(&rec, None);
    let scratch = TempDir::new("stack-exports");
    let (page, prom) = (scratch.join("report.html"), scratch.join("run.prom"));
    let mut exports = ExportManager::default();
    exports.add(Format::Html, &page);
    exports.add(Format::OpenMetrics, &prom);
    exports.write(&Subject::Run(&reading)).unwrap();
    let gauges = std::fs::read_to_string(&prom).unwrap();
    let run = "service=\"nginx\",run_id=\"stack\",phase=\"main\"";
    for (hop, server, seconds, requests) in [
        (0, "nginx", "0.00009", "1"),
        (1, "gunicorn", "0.0014", "1"),
        (2, "postgres", "0.00041", "3"),
    ] {
        let labels = format!("{{{run},class=\"GET /orders\",hop=\"{hop}\",server=\"{server}\"}}");
        assert!(
            gauges.contains(&format!(
                "reqcost_run_class_stack_cpu_per_request_seconds{labels} {seconds}\n"
            )),
            "hop {hop} in\n{gauges}"
        );
        assert!(
            gauges.contains(&format!(
                "reqcost_run_class_stack_requests_per_request{labels} {requests}\n"
            )),
            "hop {hop} in\n{gauges}"
        );
    }
    assert!(gauges.contains(&format!(
        "reqcost_run_hop_not_for_front_share{{{run},hop=\"2\",server=\"postgres\"}} 0.0666"
    )));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h2>The stack</h2>"));
    assert!(html.contains(
        "<td>nginx 90.0 µs + gunicorn 1.40 ms (1 request: GET /orders) + postgres 410 µs (3 requests: SELECT orders, SELECT items, UPDATE stock)</td><td>gunicorn</td>"
    ), "{html}");
}

#[test]
fn a_record_without_hops_has_no_stack_anywhere() {
    let mut rec = record();
    rec.hops.clear();
    rec.phases[0].hops.clear();
    let reading = Reading::of(&rec, None);
    assert!(reading.analysis.phases[0].stack.is_none());
    let text = summary(&reading);
    assert!(!text.contains("the stack"), "{text}");
    let scratch = TempDir::new("no-stack-exports");
    let prom = scratch.join("run.prom");
    let mut exports = ExportManager::default();
    exports.add(Format::OpenMetrics, &prom);
    exports.write(&Subject::Run(&reading)).unwrap();
    let gauges = std::fs::read_to_string(&prom).unwrap();
    assert!(
        !gauges.contains("_stack_") && !gauges.contains("hop"),
        "{gauges}"
    );
}

#[test]
fn the_comparison_has_a_table_per_hop() {
    let (a, b) = ([record()], [record()]);
    let c = reqcost_analysis::compare::compare(&a, &b);
    let text = reqcost_report::comparison(&c, "a.json", "b.json");
    let at = text
        .find("  hop 2 postgres: its tree's CPU and requests per front request\n")
        .unwrap_or_else(|| panic!("{text}"));
    let table = &text[at..];
    assert!(line(table, "│ requests").contains("2.67"), "{text}");
    assert!(line(table, "│ requests").contains("identical"), "{text}");
    let scratch = TempDir::new("stack-compare-html");
    let page = scratch.join("compare.html");
    let mut exports = ExportManager::default();
    exports.add(Format::Html, &page);
    let subject = Subject::Compare {
        a: &a,
        b: &b,
        comparison: &c,
    };
    exports.write(&subject).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h3>Hop 2 postgres: its tree's CPU and requests per front request</h3>"));
}

#[test]
fn the_summary_shows_an_upstream_requests_own_chains_with_its_front_class() {
    let mut rec = record();
    let db = rec.phases[0].hops[1].requests.clone().unwrap();
    let top = &db.costliest[0];
    rec.profile = Some(stack::profile(&top.id));
    let text = summary(&Reading::of(&rec, None));
    let head = format!(
        "      postgres SELECT orders for front GET /orders [request {}, front {}]: 200 µs, 9 samples",
        top.id, top.caused_by
    );
    let at = text.find(&head).unwrap_or_else(|| panic!("{text}"));
    let next = text[at + head.len() + 1..].lines().next().unwrap();
    assert!(
        next.contains("ExecSeqScan") && next.contains("← exec_simple_query ← PostgresMain"),
        "{next}"
    );
}

#[test]
fn the_summary_names_a_class_with_its_dearest_hops_code() {
    let mut rec = record();
    let db = rec.phases[0].hops[1].requests.clone().unwrap();
    rec.profile = Some(stack::profile(&db.costliest[0].id));
    let text = summary(&Reading::of(&rec, None));
    let head = "        gunicorn's code for it (self %, callers nearest first): 4 samples";
    let at = text.find(head).unwrap_or_else(|| panic!("{text}"));
    assert!(
        text[..at].lines().last().unwrap().contains("GET /orders"),
        "{text}"
    );
    let next = text[at + head.len() + 1..].lines().next().unwrap();
    assert!(
        next.contains("100.0%  render_orders") && next.contains("← handle_request"),
        "{next}"
    );
    let json = serde_json::to_value(Analysis::of(&rec)).unwrap();
    let classes = &json["phases"][0]["stack"]["classes"];
    let orders = classes
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["class"] == "GET /orders")
        .unwrap();
    assert_eq!(
        orders["dearest_code"]["by_self"][0]["function"],
        "render_orders"
    );
    let scratch = TempDir::new("stack-dearest-html");
    let page = scratch.join("report.html");
    let mut exports = ExportManager::default();
    exports.add(Format::Html, &page);
    exports
        .write(&Subject::Run(&Reading::of(&rec, None)))
        .unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<td>gunicorn</td><td>render_orders 100.0 % (4 samples)</td>"),
        "{html}"
    );
}
