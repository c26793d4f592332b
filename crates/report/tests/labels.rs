//! The summary names what took the record: `run` drove the server, `attach` watched its own
//! clients.

use reqcost_analysis::reading::Reading;
use reqcost_record::{RunRecord, LIVE_PROTOCOL};
use reqcost_report::summary;

fn record() -> RunRecord {
    RunRecord::from_json(include_str!("../../analysis/tests/fixtures/busy-wait.json")).unwrap()
}

fn heading(rec: &RunRecord) -> String {
    let text = summary(&Reading::of(rec, None));
    text.lines().next().unwrap_or_default().to_string()
}

#[test]
fn the_summary_is_headed_by_the_command_that_took_the_record() {
    let mut rec = record();
    assert!(
        heading(&rec).starts_with("reqcost run "),
        "{}",
        heading(&rec)
    );
    rec.workload.protocol = LIVE_PROTOCOL.into();
    assert!(
        heading(&rec).starts_with(&format!("reqcost attach {} · ", rec.id)),
        "{}",
        heading(&rec)
    );
}
