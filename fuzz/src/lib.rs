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

/// A turn's first bytes read as PostgreSQL, Redis, MySQL or memcached messages, and tallied as two turns of one
/// connection. The first byte chooses what the connection is known as (none, PostgreSQL,
/// Redis, MySQL, memcached) and how many bytes the turn read beyond the input; the rest is what it read. Every
/// label is printable and every turn is counted once: a request, set-up, or none.
pub fn wire(data: &[u8]) {
    use reqcost_analysis::requests::wire::Protocol;
    use reqcost_analysis::requests::{RequestHead, RequestTally, TallyOptions};

    let Some((&selector, read)) = data.split_first() else {
        return;
    };
    let known = [
        None,
        Some(Protocol::Postgres),
        Some(Protocol::Redis),
        Some(Protocol::MySql),
        Some(Protocol::Memcached),
    ][usize::from(selector % 5)];
    let bytes_in = read.len() as u64 + u64::from(selector / 5);
    let head = &read[..read.len().min(HEAD_MAX)];
    let label = RequestHead::parse_turn(head, bytes_in, "tcp", known).label();
    assert!(!label.chars().any(char::is_control), "{label:?}");
    let mut tally = RequestTally::new(TallyOptions::default());
    for closed in [false, true] {
        tally.add(&turn(head, bytes_in, closed));
    }
    let stats = tally.finish(1, 0, 0);
    assert_eq!(
        stats.requests + stats.setup_turns + stats.no_request,
        2,
        "{stats:?}"
    );
    for row in &stats.by_class {
        assert!(!row.name.chars().any(char::is_control), "{:?}", row.name);
    }
}

/// The first bytes of a turn the probes copy.
const HEAD_MAX: usize = 128;

/// A turn of connection 1 that read `bytes_in` bytes, `head` the first of them.
fn turn(head: &[u8], bytes_in: u64, closed: bool) -> reqcost_record::RequestEvent {
    reqcost_record::RequestEvent {
        seq: u32::from(closed),
        local_port: 5432,
        cpu_ns: 1000,
        syscalls: 2,
        bytes_in,
        bytes_out: 10,
        head: head.to_vec(),
        closed,
        ..reqcost_testkit::request_event("", "127.0.0.1")
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
