//! A record whose phase ended with a slow download still open (the busy-wait fixture, its main
//! phase's requests replaced by 30 fast ones and that download): every output shows it, marked
//! in flight, with its CPU so far. No root needed.

use reqcost_analysis::reading::Reading;
use reqcost_analysis::requests::{RequestTally, TallyOptions};
use reqcost_record::{RequestEvent, RunRecord};
use reqcost_report::export::{ExportManager, Format, Subject};
use reqcost_report::summary;
use reqcost_testkit::{request_event, TempDir};

fn event(selector: &str, peer: &str, cpu_ns: u64, bytes_out: u64, serve_ns: u64) -> RequestEvent {
    RequestEvent {
        pid: 7,
        cpu_ns,
        syscalls: 12,
        top_syscalls: vec![("ioctl".into(), 6), ("epoll_ctl".into(), 3)],
        bytes_out,
        first_in_ns: 1_000_000_000,
        last_out_ns: 1_000_000_000 + serve_ns,
        end_ns: 1_000_000_000 + serve_ns,
        ..request_event(selector, peer)
    }
}

/// The fixture with 30 fast requests of 100 µs and, still open, a 64 KiB/s download that has
/// cost 900 ms so far.
fn record() -> RunRecord {
    let mut rec =
        RunRecord::from_json(include_str!("../../analysis/tests/fixtures/busy-wait.json")).unwrap();
    let mut tally = RequestTally::new(TallyOptions::new("gopher", &[]).unwrap());
    for _ in 0..30 {
        tally.add(&event("/1k.txt\r\n", "127.0.0.1", 100_000, 1024, 1_000_000));
    }
    let open = RequestEvent {
        conn_id: 2,
        closed: false,
        in_flight: true,
        ..event(
            "/200k.bin\r\n",
            "127.0.0.2",
            900_000_000,
            128 * 1024,
            2_000_000_000,
        )
    };
    tally.add(&open);
    let stats = tally.finish(903_000_000, 97_000_000, 0);
    rec.phases.retain(|p| p.name == "main");
    rec.phases[0].requests = Some(stats);
    rec
}

#[test]
fn the_summary_shows_the_request_in_flight_in_its_rows_and_first_in_the_costliest() {
    let rec = record();
    let text = summary(&Reading::of(&rec, None));
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{text}"))
    };
    assert!(line("in flight    ").contains(
        "1 request still in flight at the end, 90.0 % of the CPU so far: in the tables' CPU and \
         the costliest list, marked in flight; the per-request figures are over the 30 requests \
         that ended"
    ));
    assert!(line("in requests that ended in the phase").contains(
        "in requests that ended in the phase 0.3 % · in requests still in flight 90.0 %"
    ));
    assert!(line("127.0.0.2").contains("0 (+1 in flight)"));
    assert!(line("64-256 KiB/s").contains("0 (+1 in flight)"));
    assert!(line("1. ").contains("900.00 ms  /200k.bin (in flight) from 127.0.0.2"));
}

#[test]
fn json_html_and_openmetrics_carry_the_request_in_flight() {
    let rec = record();
    let reading = Reading::of(&rec, None);
    let json: serde_json::Value = serde_json::to_value(&reading.analysis).unwrap();
    let main = &json["phases"][0]["requests"];
    assert_eq!(main["in_flight_requests"], 1);
    assert_eq!(main["in_flight_cpu_ns"], 900_000_000);
    assert_eq!(main["requests"], 30);
    assert_eq!(main["costliest"][0]["in_flight"], true);
    assert_eq!(main["costliest"][0]["client"], "127.0.0.2");
    assert!(main["costliest"][1].get("in_flight").is_none());
    let client = main["by_client"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "127.0.0.2")
        .unwrap();
    assert_eq!(
        (client["in_flight"].as_u64(), client["requests"].as_u64()),
        (Some(1), Some(0))
    );

    let scratch = TempDir::new("inflight-html");
    let page = scratch.join("report.html");
    let mut exports = ExportManager::default();
    let prom = scratch.join("run.prom");
    exports.add(Format::Html, &page);
    exports.add(Format::OpenMetrics, &prom);
    exports.write(&Subject::Run(&reading)).unwrap();
    let gauges = std::fs::read_to_string(&prom).unwrap();
    let in_flight = |class: &str| {
        gauges
            .lines()
            .find(|l| l.starts_with("reqcost_run_class_in_flight{") && l.contains(class))
            .unwrap_or_else(|| panic!("no in-flight gauge of {class} in {gauges}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(in_flight("class=\"/200k.bin\""), "1");
    assert_eq!(in_flight("class=\"/1k.txt\""), "0");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<td data-v=\"0\">0 (+1 in flight)</td>"),
        "no in-flight row"
    );
    assert!(html.contains("1 request still in flight at the end"));
}
