//! A request count that cannot be trusted is said so, with the count used, in the summary, the
//! analysis JSON and the HTML report: never a silent wrong count.

use reqcost_analysis::compare_code::run_chain_costs;
use reqcost_analysis::document::Analysis;
use reqcost_analysis::reading::Reading;
use reqcost_record::{
    ClientStats, CpuMethod, CpuWindows, ExternalLoad, RequestStats, RunRecord, WindowTotals,
};
use reqcost_report::export::{ExportManager, Format, Subject};
use reqcost_report::summary;
use reqcost_testkit::TempDir;

fn record() -> RunRecord {
    RunRecord::from_json(include_str!("../../analysis/tests/fixtures/busy-wait.json")).unwrap()
}

#[test]
fn a_trusted_count_has_no_caveat() {
    let rec = record();
    assert!(!summary(&Reading::of(&rec, None)).contains("count!"));
    assert!(Analysis::of(&rec)
        .phases
        .iter()
        .all(|p| p.count_caveats.is_empty()));
}

#[test]
fn ciphertext_and_a_count_far_from_the_load_generator_are_named() {
    let mut rec = record();
    let main = rec.phases[0].requests.as_mut().unwrap();
    main.requests = 601;
    main.tls_ciphertext = 601;
    let text = summary(&Reading::of(&rec, None));
    let tls = text
        .lines()
        .find(|l| l.contains("count!") && l.contains("TLS connections"))
        .unwrap_or_else(|| panic!("no TLS caveat in\n{text}"));
    assert!(
        tls.contains("601 of the 601 requests")
            && tls.contains("could not read")
            && tls.contains("divide by the 300 requests that reqcost's load generator completed"),
        "{tls}"
    );
    assert!(text
        .contains("the server side counted 601 requests, reqcost's load generator completed 300"));
    let ids: Vec<String> = Analysis::of(&rec).phases[0]
        .count_caveats
        .iter()
        .map(|c| c.id.clone())
        .collect();
    assert_eq!(ids, ["tls-ciphertext", "far-from-load"]);
}

/// h2load's 3000 requests multiplexed on 4 connections, 784 counted on the socket.
#[test]
fn an_external_load_generators_count_is_the_cross_check() {
    let mut rec = record();
    rec.phases.truncate(1);
    rec.phases[0].client = ClientStats::default();
    rec.phases[0].requests.as_mut().unwrap().requests = 784;
    rec.workload.load = Some(ExternalLoad {
        command: "h2load -n 3000 -c 4 -m 4 https://127.0.0.1:8443/".into(),
        output_tail: vec![
            "requests: 3000 total, 3000 started, 3000 done, 3000 succeeded, 0 failed".into(),
        ],
        ..ExternalLoad::default()
    });
    let json = serde_json::to_string(&Analysis::of(&rec)).unwrap();
    assert!(json.contains(r#""id":"far-from-load""#), "{json}");
    assert!(
        json.contains("the server side counted 784 requests, the --load command reports 3000 (more than twice apart: the server's turns are not the client's requests; --per connection divides by connections instead); per-request figures divide by the 784 requests counted on the server side"),
        "{json}"
    );
}

/// pgbench's default script under `--load` on a server whose protocol is counted by turns:
/// 300 transactions of 7 statements, 600 turns on the server side. The summary's `count!`
/// line says both counts and suggests counting by connection.
#[test]
fn a_pgbench_count_far_from_the_servers_suggests_counting_by_connection() {
    let mut rec = record();
    rec.phases.truncate(1);
    rec.phases[0].client = ClientStats::default();
    rec.phases[0].requests.as_mut().unwrap().requests = 600;
    rec.workload.load = Some(ExternalLoad {
        command: "pgbench -h 127.0.0.1 -p 5432 -U postgres -n -c 2 -t 150 postgres".into(),
        output_tail: [
            "transaction type: <builtin: TPC-B (sort of)>",
            "number of transactions actually processed: 300/300",
        ]
        .map(String::from)
        .to_vec(),
        ..ExternalLoad::default()
    });
    let text = summary(&Reading::of(&rec, None));
    let line = text
        .lines()
        .find(|l| l.contains("count!"))
        .unwrap_or_else(|| panic!("no count! line in\n{text}"));
    assert!(
        line.contains("the server side counted 600 requests, the --load command reports 2100")
            && line.contains("--per connection divides by connections instead"),
        "{line}"
    );
}

/// gtlsserver driven over QUIC: per-request accounting saw no request on a TCP connection, and
/// 60 HTTP/3 requests were counted in libnghttp3. No output shows 0 requests with all of the
/// CPU "in no request": each says per-request accounting is not available over QUIC, and why.
#[test]
fn quic_requests_are_not_shown_as_zero_with_all_cpu_in_none() {
    let mut rec = record();
    rec.phases.truncate(1);
    rec.workload.url = "quic://127.0.0.1:4433/".into();
    let main = &mut rec.phases[0];
    main.client.quic_classes.insert("GET /1k".into(), 300);
    let served = main.requests.as_mut().unwrap();
    let cpu = served.attributed_cpu_ns + served.unattributed_cpu_ns;
    *served = RequestStats {
        http3_requests: 300,
        unattributed_cpu_ns: cpu,
        unserved_cpu_ns: cpu,
        key_cap: served.key_cap,
        ..RequestStats::default()
    };
    let reading = Reading::of(&rec, None);

    let doc = &reading.analysis.phases[0];
    assert!(doc.requests.is_none(), "{:?}", doc.requests);
    let why = doc.requests_not_visible.as_deref().expect("a reason");
    assert!(why.starts_with("not available over QUIC"), "{why}");
    let json = serde_json::to_string(&reading.analysis).unwrap();
    assert!(
        json.contains(r#""requests_not_visible":"not available over QUIC"#),
        "{json}"
    );

    let text = summary(&reading);
    assert!(
        text.contains(&format!("  requests as the server served them: {why}\n")),
        "{text}"
    );
    for wrong in [
        "counted      0 requests",
        "belongs to no request",
        "unattributed 100",
    ] {
        assert!(!text.contains(wrong), "{wrong:?} in\n{text}");
    }

    let scratch = TempDir::new("quic-outputs");
    let (page, prom) = (scratch.join("report.html"), scratch.join("run.prom"));
    let mut exports = ExportManager::default();
    exports.add(Format::Html, &page);
    exports.add(Format::OpenMetrics, &prom);
    exports.write(&Subject::Run(&reading)).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<p class=\"note\" id=\"requests-not-visible\"><b>Per-request accounting</b> not available over QUIC"),
        "{html}"
    );
    assert!(!html.contains("belongs to no request"), "{html}");
    assert!(!html.contains("Cost by class"), "{html}");

    let metrics = std::fs::read_to_string(&prom).unwrap();
    assert!(!metrics.contains("\nreqcost_run_class_"), "{metrics}");
    assert!(
        metrics.contains("reqcost_run_requests{service=\"busy-wait\""),
        "{metrics}"
    );
    assert!(metrics.contains("phase=\"main\"} 300\n"), "{metrics}");
}

/// A default run's unprobed pass sends the main phase's requests again, warm-up and pass, while
/// the sampler keeps sampling: the profile's samples per request, in the summary and the
/// whole-run differential flame graph, divide by every request it ran through (the record's
/// 30 warm-up, 300 + 21 in the phases, 600 in the pass: 951), not by the phases' alone.
#[test]
fn samples_per_request_count_the_unprobed_pass() {
    let mut rec = record();
    let pass = WindowTotals {
        windows: 1,
        requests: 300,
        elapsed_s: 0.5,
        ..WindowTotals::default()
    };
    rec.phases[0].cpu_windows = Some(CpuWindows {
        method: CpuMethod::UnprobedPass,
        reason: "phase too short for unprobed windows".into(),
        probed: pass.clone(),
        unprobed: pass,
        count_scale: 1.0,
        requests_cut: 0,
        pass_work: None,
        pass_requests: 600,
        budget: None,
    });
    let reading = Reading::of(&rec, None);
    assert_eq!(reading.sampled_requests, 951);
    // 326 samples of 2.004 ms over 951 requests.
    let text = summary(&reading);
    assert!(
        text.contains(" · 0.34 samples per request (≈ 687 µs of CPU)"),
        "{text}"
    );
    let per_request_ns: f64 = run_chain_costs(std::slice::from_ref(&rec)).values().sum();
    let expected = 326.0 * 2_004_008.0 / 951.0;
    assert!((per_request_ns - expected).abs() < 1.0, "{per_request_ns}");
}
