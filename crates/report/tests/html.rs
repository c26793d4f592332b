//! The HTML reports of a real record (the busy-wait testbed server) and of a sweep opened in
//! headless Chromium (Debian's `chromium`, installed by scripts/bootstrap): they render without
//! console messages, the DOM holds the findings' ids and the CPU per request, and the page makes
//! no network request. No root needed.

use std::path::Path;
use std::process::{Command, Output};

use reqcost_analysis::findings::diagnose;
use reqcost_analysis::sweep::SweepReport;
use reqcost_record::RunRecord;
use reqcost_report::export::{ExportManager, Format, Subject};
use reqcost_report::fmt_duration_us;
use reqcost_testkit::{output_ok, TempDir};
use serde_json::Value;

fn record() -> RunRecord {
    RunRecord::from_json(include_str!("../../analysis/tests/fixtures/busy-wait.json")).unwrap()
}

/// Headless Chromium on `page` with `args`, its profile and network log in `dir`.
fn chromium(dir: &Path, page: &Path, args: &[&str]) -> Output {
    output_ok(
        Command::new("chromium")
            .args(["--headless", "--no-sandbox", "--disable-gpu"])
            // Chromium's own update and account checks would fill the network log.
            .args(["--disable-background-networking", "--no-first-run"])
            .arg(format!("--user-data-dir={}", dir.join("profile").display()))
            .arg(format!("--log-net-log={}", dir.join("net.json").display()))
            .args(["--enable-logging=stderr", "--v=0"])
            .args(args)
            .arg(format!("file://{}", page.display())),
        "Debian's chromium (scripts/bootstrap installs it)",
    )
}

/// The console messages the page logged (errors included), as Chromium prints them.
fn console(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect()
}

/// URLs the page itself asked the network for: requests whose initiator is an origin (the
/// page's, `null` for a file), not Chromium's own (`not an origin`).
fn page_requests(dir: &Path) -> Vec<String> {
    let log: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("net.json")).unwrap()).unwrap();
    let start_job = &log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"];
    log["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| &e["type"] == start_job)
        .filter(|e| e["params"]["initiator"] != "not an origin")
        .filter_map(|e| e["params"]["url"].as_str())
        .filter(|url| url.starts_with("http"))
        .map(str::to_string)
        .collect()
}

#[test]
fn chromium_renders_the_report_offline_with_the_findings_and_cpu() {
    let scratch = TempDir::new("report");
    let dir = scratch.path();
    let page = dir.join("report.html");
    let rec = record();
    let mut exports = ExportManager::default();
    exports.add(Format::Html, &page);
    exports.write(&Subject::Run(&rec)).unwrap();

    let out = chromium(dir, &page, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    let findings = diagnose(&rec);
    assert!(!findings.is_empty());
    for f in &findings {
        assert!(
            dom.contains(&format!("<code class=\"finding-id\">{}</code>", f.id)),
            "the DOM lacks finding {}",
            f.id
        );
    }
    let cpu = rec.main_phase().unwrap().per_request.cpu_total_us.unwrap();
    assert!(
        dom.contains(&format!(
            "<span id=\"cpu-per-request\" data-us=\"{cpu}\">{}</span>",
            fmt_duration_us(cpu)
        )),
        "the DOM lacks the CPU per request {cpu} µs"
    );
    assert_eq!(console(&out), Vec::<String>::new(), "console messages");
    assert_eq!(page_requests(dir), Vec::<String>::new(), "network requests");

    let shot = dir.join("report.png");
    chromium(
        dir,
        &page,
        &[
            "--window-size=1366,768",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    let png = std::fs::read(&shot).expect("a screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // A blank page compresses to a few KiB; this one has text, bars and colours.
    assert!(png.len() > 20_000, "screenshot of {} bytes", png.len());
}

#[test]
fn chromium_renders_a_sweep_with_every_level() {
    let scratch = TempDir::new("sweep");
    let dir = scratch.path();
    let page = dir.join("sweep.html");
    // The fixture's two phases stand for two levels, each run twice: the page shows phases,
    // whatever their origin.
    let rec = record();
    let as_main = |p: &reqcost_record::Phase| RunRecord {
        phases: vec![reqcost_record::Phase {
            name: "main".into(),
            ..p.clone()
        }],
        ..rec.clone()
    };
    let points: Vec<(u32, &reqcost_record::Phase)> = rec
        .phases
        .iter()
        .zip([1, 10])
        .map(|(p, c)| (c, p))
        .collect();
    let records = [0, 1, 0, 1].map(|i| as_main(&rec.phases[i])).to_vec();
    let report = SweepReport::of(2, vec![1, 10, 1, 10], records);
    let mut exports = ExportManager::default();
    exports.add(Format::Html, &page);
    exports
        .write(&Subject::Sweep {
            report: &report,
            title: "busy-wait: server CPU per request vs connections",
        })
        .unwrap();

    let out = chromium(dir, &page, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(dom.contains("<figure class=\"sweep\"><svg"), "no chart");
    for (connections, phase) in &points {
        let cpu = fmt_duration_us(phase.per_request.cpu_total_us.unwrap());
        assert!(dom.contains(&format!("{connections} connection(s)")));
        assert!(dom.contains(&format!("<td>{cpu}</td>")), "no {cpu}");
    }
    assert!(dom.contains("over 2 run(s)"), "no run count");
    assert!(
        dom.contains("95 % interval of the mean"),
        "no interval legend"
    );
    assert_eq!(console(&out), Vec::<String>::new(), "console messages");
    assert_eq!(page_requests(dir), Vec::<String>::new(), "network requests");
}

#[test]
fn the_report_fetches_nothing() {
    let scratch = TempDir::new("offline");
    let page = scratch.join("report.html");
    let mut exports = ExportManager::default();
    exports.add(Format::Html, &page);
    exports.write(&Subject::Run(&record())).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    // Namespace names and comments may spell URLs; nothing may load one.
    for fetch in [
        "src=",
        "href=",
        "url(",
        "@import",
        "fetch(",
        "XMLHttpRequest",
    ] {
        for (at, _) in html.match_indices(fetch) {
            let after = html[at + fetch.len()..].trim_start_matches(['"', '\'', ' ']);
            assert!(
                !after.starts_with("http") && !after.starts_with("//"),
                "the report loads {}",
                html[at..].chars().take(80).collect::<String>()
            );
        }
    }
}

#[test]
fn the_network_check_sees_a_page_that_fetches() {
    let scratch = TempDir::new("fetches");
    let page = scratch.join("fetches.html");
    std::fs::write(&page, "<img src=\"http://127.0.0.1:1/x.png\">").unwrap();
    chromium(scratch.path(), &page, &["--dump-dom"]);
    assert_eq!(
        page_requests(scratch.path()),
        vec!["http://127.0.0.1:1/x.png".to_string()]
    );
}
