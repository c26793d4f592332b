//! A request count that cannot be trusted is said so, with the count used, in the summary, the
//! analysis JSON and the HTML report: never a silent wrong count.

use reqcost_analysis::document::Analysis;
use reqcost_analysis::reading::Reading;
use reqcost_record::{ClientStats, ExternalLoad, RunRecord};
use reqcost_report::summary;

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
        json.contains("the server side counted 784 requests, the --load command reports 3000; per-request figures divide by the 784 requests counted on the server side"),
        "{json}"
    );
}
