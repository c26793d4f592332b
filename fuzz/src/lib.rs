//! What each fuzz target runs on one input, shared by the libFuzzer binaries (fuzz_targets/)
//! and by the tests that replay the kept corpus (tests/corpus.rs).

use std::path::PathBuf;

/// The requests-file reader: scan as `plan()` does, then draw requests as a phase does.
pub fn requests_file(data: &[u8]) {
    reqcost_workload::fuzzing::requests_file(data, &scratch_file());
}

/// The response framing of gopher, gemini, HTTP and raw TCP, over loopback.
pub fn response(data: &[u8]) {
    reqcost_workload::fuzzing::response(data);
}

/// The record reader, and the summary `reqcost report` prints of whatever it accepts.
pub fn record(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(record) = reqcost_record::RunRecord::from_json(text) {
        reqcost_report::summary(&reqcost_analysis::reading::Reading::of(&record, None));
    }
}

/// One scratch file per process (per test thread), reused for every input.
fn scratch_file() -> PathBuf {
    let thread = format!("{:?}", std::thread::current().id());
    let name: String = thread.chars().filter(char::is_ascii_digit).collect();
    std::env::temp_dir().join(format!("fuzz-requests-{}-{name}.txt", std::process::id()))
}

/// Removes this thread's scratch file once its inputs are replayed.
pub fn remove_scratch_file() {
    let _ = std::fs::remove_file(scratch_file());
}
