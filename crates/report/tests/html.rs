//! The HTML reports of a real record (the busy-wait testbed server), of a comparison and of a
//! sweep opened in headless Chromium (Debian's `chromium`, installed by scripts/bootstrap): they
//! render without console messages, the DOM holds the findings' ids and the CPU per request,
//! and the page makes no network request. No root needed.

use std::path::Path;
use std::process::Output;

use reqcost_analysis::compare::compare;
use reqcost_analysis::findings::diagnose;
use reqcost_analysis::reading::Reading;
use reqcost_analysis::sweep::SweepReport;
use reqcost_record::{GroupCost, PerRequest, RunRecord, SampleTag};
use reqcost_report::export::{ExportManager, Format, Subject};
use reqcost_report::fmt_duration_us;
use reqcost_testkit::{chromium, chromium_at, TempDir};
use serde_json::Value;

fn record() -> RunRecord {
    RunRecord::from_json(include_str!("../../analysis/tests/fixtures/busy-wait.json")).unwrap()
}

/// A clean server's record (with call chains), the B of a comparison, its per-request figures
/// derived from its totals as collection does.
fn clean() -> RunRecord {
    let mut rec =
        RunRecord::from_json(include_str!("../../analysis/tests/fixtures/clean.json")).unwrap();
    for p in &mut rec.phases {
        p.per_request = PerRequest::from_totals(&p.server, p.client.ok as f64);
    }
    rec
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
    exports
        .write(&Subject::Run(&Reading::of(&rec, None)))
        .unwrap();

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
    assert_cpu_shown(&dom, "cpu-per-request", &rec);
    assert_eq!(console(&out), Vec::<String>::new(), "console messages");
    assert_eq!(page_requests(dir), Vec::<String>::new(), "network requests");

    screenshot(dir, &page);
}

/// `dom` shows the CPU per request of `rec`'s main phase in the element `id`, exact in its
/// `data-us` and formatted in its text.
fn assert_cpu_shown(dom: &str, id: &str, rec: &RunRecord) {
    let cpu = rec.main_phase().unwrap().per_request.cpu_total_us.unwrap();
    assert!(
        dom.contains(&format!(
            "<span id=\"{id}\" data-us=\"{cpu}\">{}</span>",
            fmt_duration_us(cpu)
        )),
        "the DOM lacks {id}: {cpu} µs"
    );
}

/// A laptop-sized screenshot of `page`, beside it: a real picture, not a blank page.
fn screenshot(dir: &Path, page: &Path) {
    let shot = page.with_extension("png");
    chromium(
        dir,
        page,
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
    let report = SweepReport::of(2, vec![1, 10, 1, 10], records, None);
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
fn chromium_renders_a_comparison_with_verdicts_both_cpu_figures_and_the_diff() {
    let scratch = TempDir::new("compare");
    let dir = scratch.path();
    let page = dir.join("compare.html");
    let (a, b) = ([record()], [clean()]);
    let mut exports = ExportManager::default();
    exports.add(Format::Html, &page);
    let c = compare(&a, &b);
    exports
        .write(&Subject::Compare {
            a: &a,
            b: &b,
            comparison: &c,
        })
        .unwrap();

    let out = chromium(dir, &page, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert_cpu_shown(&dom, "cpu-a", &a[0]);
    assert_cpu_shown(&dom, "cpu-b", &b[0]);
    assert!(!c.phases.is_empty());
    for p in &c.phases {
        let at = dom
            .find(&format!(
                "<section class=\"phase\" id=\"phase-{}\">",
                p.phase
            ))
            .unwrap_or_else(|| panic!("no section for phase {}", p.phase));
        let section = &dom[at..at + dom[at..].find("</section>").unwrap()];
        for m in &p.metrics {
            let row = format!("<tr><th>{}</th>", m.metric);
            let row = &section[section.find(&row).unwrap_or_else(|| panic!("no {row}"))..];
            let row = &row[..row.find("</tr>").unwrap()];
            assert!(
                row.contains(&format!(">{}</span></td>", m.verdict.label())),
                "phase {} {}: {row}",
                p.phase,
                m.metric
            );
        }
    }
    assert!(dom.contains("<iframe title=\"differential flame graph\""));
    for f in diagnose(&a[0]) {
        assert!(
            dom.contains(&format!("id=\"a-finding-{}\"", f.id)),
            "{}",
            f.id
        );
    }
    assert_eq!(console(&out), Vec::<String>::new(), "console messages");
    assert_eq!(page_requests(dir), Vec::<String>::new(), "network requests");
    screenshot(dir, &page);
}

/// The costliest request of [`tagged_record`] that keeps its own chains.
const COSTLY: &str = "41/7/0";

/// The busy-wait record with its samples tagged: even stacks class `/big`, odd ones `/small`,
/// the second stack the main phase's costliest request's ([`COSTLY`], class `/small`).
fn tagged_record() -> RunRecord {
    let mut rec = record();
    let main = rec.phases.iter_mut().find(|p| p.name == "main").unwrap();
    main.requests.as_mut().unwrap().costliest[0].id = COSTLY.into();
    let p = rec.profile.as_mut().unwrap();
    let tag = |class: &str, request: &str| SampleTag {
        class: class.into(),
        request: request.into(),
        ..SampleTag::default()
    };
    p.tags = vec![tag("/big", ""), tag("/small", ""), tag("/small", COSTLY)];
    for (i, s) in p.stacks.iter_mut().enumerate() {
        s.tag = Some(if i == 1 { 2 } else { (i % 2) as u32 });
    }
    rec
}

/// The element of `dom` that starts with `start`, to its closing `</div>`.
fn div<'a>(dom: &'a str, start: &str) -> &'a str {
    let at = dom
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in the DOM"));
    let rest = &dom[at..];
    &rest[..rest.find("</div>").unwrap()]
}

/// The HTML report of [`tagged_record`] in a new scratch directory: the directory, the page
/// and the record.
fn tagged_report(name: &str) -> (TempDir, std::path::PathBuf, RunRecord) {
    let scratch = TempDir::new(name);
    let page = scratch.join("report.html");
    let rec = tagged_record();
    let mut exports = ExportManager::default();
    exports.add(Format::Html, &page);
    exports
        .write(&Subject::Run(&Reading::of(&rec, None)))
        .unwrap();
    (scratch, page, rec)
}

#[test]
fn chromium_shows_the_flame_graph_of_the_class_picked() {
    let (scratch, page, rec) = tagged_report("report-class");
    let dir = scratch.path();
    let p = rec.profile.as_ref().unwrap();
    // A function of /small's chains whose name is in none of /big's.
    let in_class = |tag: u32| -> Vec<&str> {
        p.stacks
            .iter()
            .filter(|s| s.tag == Some(tag) || (tag == 1 && s.tag == Some(2)))
            .flat_map(|s| {
                s.frames
                    .iter()
                    .map(|&f| p.frames[f as usize].function.as_str())
            })
            .collect()
    };
    let (big, small) = (in_class(0), in_class(1));
    let only_small = small
        .iter()
        .find(|f| !big.iter().any(|b| b.contains(*f)))
        .expect("a function only /small ran");

    let out = chromium_at(dir, &page, "#class=%2Fsmall", &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    let shown = div(
        &dom,
        "<div class=\"flame-group\" data-pick=\"class=/small\"",
    );
    assert!(
        !shown.contains(" hidden"),
        "/small is not shown: {}",
        &shown[..80]
    );
    assert!(
        shown.contains(only_small),
        "{only_small} missing from /small's graph"
    );
    let other = div(&dom, "<div class=\"flame-group\" data-pick=\"class=/big\"");
    assert!(other.contains(" hidden"), "/big is shown too");
    assert!(
        !other.contains(only_small),
        "/big's graph holds {only_small}"
    );
    let whole = div(&dom, "<div class=\"flame-group\" data-pick=\"\"");
    assert!(
        whole.contains(" hidden"),
        "the whole run's graph is shown too"
    );
    assert!(
        dom.contains("<option value=\"class=/small\">class /small"),
        "no picker"
    );
    assert_eq!(console(&out), Vec::<String>::new(), "console messages");
    assert_eq!(page_requests(dir), Vec::<String>::new(), "network requests");
}

#[test]
fn chromium_shows_the_flame_graph_of_a_costliest_request_picked() {
    let (scratch, page, rec) = tagged_report("report-request");
    let dir = scratch.path();
    let p = rec.profile.as_ref().unwrap();
    let leaf = &p.frames[p.stacks[1].frames[0] as usize].function;

    let out = chromium_at(dir, &page, "#request=41%2F7%2F0", &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    let start = format!("<div class=\"flame-group\" data-pick=\"request={COSTLY}\"");
    let shown = div(&dom, &start);
    assert!(!shown.contains(" hidden"), "the request is not shown");
    assert!(
        shown.contains(leaf.as_str()),
        "{leaf} missing from its graph"
    );
    for other in ["", "class=/small", "class=/big"] {
        let start = format!("<div class=\"flame-group\" data-pick=\"{other}\"");
        assert!(
            div(&dom, &start).contains(" hidden"),
            "{other:?} is shown too"
        );
    }
    let cpu = rec
        .main_phase()
        .unwrap()
        .requests
        .as_ref()
        .unwrap()
        .costliest[0]
        .cpu_ns;
    let option = format!(
        "<option value=\"request={COSTLY}\">request {COSTLY} ({}, {} of CPU, ",
        rec.main_phase()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()
            .costliest[0]
            .request,
        fmt_duration_us(cpu as f64 / 1e3)
    );
    assert!(dom.contains(&option), "no {option} in the picker");
    assert_eq!(console(&out), Vec::<String>::new(), "console messages");
    assert_eq!(page_requests(dir), Vec::<String>::new(), "network requests");
}

/// [`tagged_record`] whose main phase counted 150 requests of each class, with `/small`'s
/// samples multiplied by `small`.
fn classes_record(small: u64) -> RunRecord {
    let mut rec = tagged_record();
    let main = rec.phases.iter_mut().find(|p| p.name == "main").unwrap();
    main.requests.as_mut().unwrap().by_class = ["/big", "/small"]
        .map(|name| GroupCost {
            name: name.into(),
            requests: 150,
            ..GroupCost::default()
        })
        .to_vec();
    let p = rec.profile.as_mut().unwrap();
    p.tags.iter_mut().for_each(|t| t.phase = "main".into());
    for s in p.stacks.iter_mut().filter(|s| s.tag != Some(0)) {
        s.count *= small;
    }
    p.samples = p.stacks.iter().map(|s| s.count).sum();
    rec
}

#[test]
fn a_comparison_shows_each_classs_code_difference() {
    let scratch = TempDir::new("compare-classes");
    let page = scratch.join("compare.html");
    let (a, b) = ([classes_record(1)], [classes_record(2)]);
    let c = compare(&a, &b);
    let small = c.class_code.iter().find(|d| d.class == "/small").unwrap();
    let (ns_a, ns_b) = (
        small.a_ns_per_request.unwrap(),
        small.b_ns_per_request.unwrap(),
    );
    assert!((ns_b - 2.0 * ns_a).abs() < 1e-6 * ns_b, "{small:?}");
    assert!(!small.functions.is_empty());
    for f in &small.functions {
        assert!((f.b_ns - 2.0 * f.a_ns).abs() < 1e-6 * f.b_ns, "{f:?}");
    }
    let big = c.class_code.iter().find(|d| d.class == "/big").unwrap();
    assert!(big.functions.is_empty(), "{big:?}");

    let text = reqcost_report::comparison(&c, "a", "b");
    let line = format!(
        "  class /small: A {} · B {}",
        fmt_duration_us(ns_a / 1e3),
        fmt_duration_us(ns_b / 1e3)
    );
    assert!(text.contains(&line), "{text}");
    assert!(text.contains(&small.functions[0].function), "{text}");
    assert!(text.contains("no function changed by 2 % of the class's CPU or more"));
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["class_code"].as_array().unwrap().len(), 2);

    let mut exports = ExportManager::default();
    exports.add(Format::Html, &page);
    exports
        .write(&Subject::Compare {
            a: &a,
            b: &b,
            comparison: &c,
        })
        .unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<h3>class <code>/small</code>: A "),
        "no class section"
    );
    // Each class's differential flame graph, picked by the address.
    let out = chromium_at(scratch.path(), &page, "#class=%2Fsmall", &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    let shown = div(
        &dom,
        "<div class=\"flame-group\" data-pick=\"class=/small\"",
    );
    assert!(!shown.contains(" hidden"), "/small's graph is not shown");
    assert!(shown.contains("class /small, CPU per request of the class"));
    assert!(shown.contains(&small.functions[0].function));
    let whole = div(&dom, "<div class=\"flame-group\" data-pick=\"\"");
    assert!(whole.contains(" hidden"), "the whole graph is shown too");
    assert_eq!(console(&out), Vec::<String>::new(), "console messages");
    assert_eq!(page_requests(scratch.path()), Vec::<String>::new());
}

#[test]
fn the_report_fetches_nothing() {
    let scratch = TempDir::new("offline");
    let page = scratch.join("report.html");
    let mut exports = ExportManager::default();
    exports.add(Format::Html, &page);
    let rec = record();
    exports
        .write(&Subject::Run(&Reading::of(&rec, None)))
        .unwrap();
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

/// A TLS server's handshakes (1 full, 29 resumed) are shown in the HTML report as in the
/// terminal summary: the same two lines, from the same analysis figures.
#[test]
fn chromium_shows_the_tls_handshake_line_of_the_summary() {
    let mut rec = record();
    let r = rec.phases[0].requests.as_mut().unwrap();
    r.tls_handshakes = 30;
    r.tls_handshake_cpu_ns = 2_730_000 + 29 * 490_000;
    r.tls_full_handshakes = 1;
    r.tls_full_handshake_cpu_ns = 2_730_000;
    r.tls_resumed_handshakes = 29;
    r.tls_resumed_handshake_cpu_ns = 29 * 490_000;
    let reading = Reading::of(&rec, None);
    let summary = reqcost_report::summary(&reading);
    let kinds = "1 full: 2.73 ms CPU each · 29 resumed: 490 µs CPU each";
    let line = summary
        .lines()
        .find(|l| {
            l.trim_start()
                .starts_with("TLS          30 handshakes, not requests: ")
        })
        .unwrap_or_else(|| panic!("no handshake line in\n{summary}"))
        .trim_start()
        .trim_start_matches("TLS")
        .trim_start();
    assert!(
        summary.contains(&format!("                 {kinds}\n")),
        "{summary}"
    );

    let scratch = TempDir::new("tls-report");
    let page = scratch.join("report.html");
    let mut exports = ExportManager::default();
    exports.add(Format::Html, &page);
    exports.write(&Subject::Run(&reading)).unwrap();
    let out = chromium(scratch.path(), &page, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains(&format!(
            "<p class=\"tls\"><b>TLS</b> {line}<br>{kinds}</p>"
        )),
        "no `{line}` / `{kinds}` in the DOM:\n{dom}"
    );
    assert_eq!(console(&out), Vec::<String>::new(), "console messages");
}
