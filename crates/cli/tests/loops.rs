//! Event-loop servers (issue 31): asyncio and Node run a request's handler in a later loop
//! turn than its read, after another readiness wait. The handler's CPU still goes to its
//! request: mixed 50/50 in one phase, the dear class costs per request several times what the
//! cheap one does (compared within the phase, so the machine's other load moves both alike), and
//! almost nothing is left unattributed.
//!
//! The cheap class runs a quarter of the dear one's pbkdf2: a request that returns a bare
//! string after a 5 ms one really costs two to three times what it costs after another bare
//! one (the interpreter's caches; /proc/PID/schedstat around each request says the same), which
//! no accounting should hide.

use crate::util::*;
use reqcost_analysis::document::Analysis;
use reqcost_record::{GroupCost, RunRecord};
use reqcost_testkit::TempDir;

/// `each` dear and `each` cheap paths, interleaved, as a requests file.
fn mixed_requests(scratch: &TempDir, each: u32) -> String {
    let path = scratch.join("mixed.txt");
    let lines: String = (0..each)
        .map(|i| format!("/dear/{i}\n/cheap/{i}\n"))
        .collect();
    std::fs::write(&path, lines).unwrap();
    path.display().to_string()
}

fn class<'a>(record: &'a RunRecord, phase: &str, name: &str) -> &'a GroupCost {
    let phase = record
        .phases
        .iter()
        .find(|p| p.name == phase)
        .unwrap_or_else(|| panic!("no phase {phase}"));
    let stats = phase.requests.as_ref().unwrap_or_else(|| {
        panic!(
            "{}: no per-request figures: {:?}",
            phase.name, phase.missing
        )
    });
    stats
        .by_class
        .iter()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("{}: no class {name} in {:?}", phase.name, stats.by_class))
}

fn mean_us(g: &GroupCost) -> f64 {
    g.cpu_per_request.mean / 1000.0
}

/// The dear class's CPU per request over the cheap one's, both in the one mixed phase, where the
/// machine's other load moves both alike. Measured 2026-11-24, three runs each, beside other
/// engineers' builds: asyncio 3.65, 3.82, 3.68 and Node 3.41, 3.52, 3.44; with two more busy
/// loops on both CPUs (`taskset -c 0,1 sh -c 'while :; do :; done'` twice) asyncio 3.48, 3.57,
/// 3.52 and Node 3.14, 3.23, 3.27. Attribution's failure, the bug this guards (a handler's CPU
/// charged to the next request read), made them 1.01x apart with 98 % of the CPU unattributed;
/// comparing each class with its own class phase instead, run at another time, differed by
/// 35 % under load, as much as that bug moved it.
const DEAR_OVER_CHEAP: std::ops::RangeInclusive<f64> = 2.0..=6.0;

/// Runs `server` (given its port) on `each` dear and `each` cheap requests mixed over `clients`
/// connections, then on each class alone, with `extra` arguments after the common ones: the
/// saved record.
pub(crate) fn run_mixed_with(
    tag: &str,
    each: u32,
    clients: &str,
    extra: &[&str],
    server: impl Fn(u16) -> Vec<String>,
) -> RunRecord {
    let (scratch, port) = scratch_and_port(tag);
    let url = format!("http://127.0.0.1:{port}/");
    let requests = mixed_requests(&scratch, each);
    let n = (2 * each).to_string();
    let args = [
        "--url",
        &url,
        "--requests",
        &requests,
        "-n",
        &n,
        "-c",
        clients,
        "--class",
        "dear=^/dear/",
        "--class",
        "cheap=^/cheap/",
        "--no-slow-phase",
    ];
    let args = [&args[..], extra].concat();
    let (out, record) = run_saved(&scratch, &args, &server(port));
    assert!(out.status.success(), "{tag}: {}", stderr(&out));
    record.expect("record saved")
}

/// Runs `server` (given its port) on 200 dear and 200 cheap requests mixed over 4 connections,
/// each class one path, so that the server's own classes (by path) tell them apart without a
/// `--class` and its replay phases; checks the must-shows.
fn mixed_classes_keep_their_cost(tag: &str, server: impl Fn(u16) -> Vec<String>) {
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port(tag);
    let url = format!("http://127.0.0.1:{port}/");
    let requests = scratch.join("mixed.txt");
    std::fs::write(&requests, "/dear/x\n/cheap/x\n".repeat(200)).unwrap();
    // Attribution is what is compared: the probed CPU, not the CPU rescaled by an unprobed pass.
    let args = [
        "--url",
        &url,
        "--requests",
        requests.to_str().unwrap(),
        "-n",
        "400",
        "-c",
        "4",
        "--no-slow-phase",
        "--probes-full-time",
    ];
    let (out, record) = run_saved(&scratch, &args, &server(port));
    assert!(out.status.success(), "{tag}: {}", stderr(&out));
    let record = record.expect("record saved");
    let stats = record.main_phase().unwrap().requests.as_ref().unwrap();
    assert_eq!(stats.requests, 400, "{stats:?}");
    let total = stats.attributed_cpu_ns + stats.unattributed_cpu_ns;
    let unattributed = stats.unattributed_cpu_ns as f64 * 100.0 / total as f64;
    let (dear, cheap) = (
        class(&record, "main", "GET /dear/x"),
        class(&record, "main", "GET /cheap/x"),
    );
    assert_eq!((dear.requests, cheap.requests), (200, 200));
    let ratio = mean_us(dear) / mean_us(cheap);
    eprintln!(
        "{tag}: dear {:.1} µs, cheap {:.1} µs, dear/cheap {ratio:.2}, unattributed {unattributed:.1} %",
        mean_us(dear),
        mean_us(cheap)
    );
    assert!(
        unattributed < 10.0,
        "{tag}: {unattributed:.1} % unattributed"
    );
    assert!(
        DEAR_OVER_CHEAP.contains(&ratio),
        "{tag}: dear/cheap CPU per request {ratio:.2}, outside {DEAR_OVER_CHEAP:?}"
    );
}

pub(crate) fn loop_server(interpreter: &str, script: &str, port: u16) -> Vec<String> {
    let script = testbed().join("loops").join(script);
    [
        interpreter,
        &script.display().to_string(),
        "--port",
        &port.to_string(),
        "--cheap-iterations",
        "5000",
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn asyncio_handlers_charged_to_their_requests() {
    mixed_classes_keep_their_cost("asyncio", |port| {
        loop_server(PYTHON, "asyncio_http.py", port)
    });
}

#[test]
fn node_handlers_charged_to_their_requests() {
    mixed_classes_keep_their_cost("node", |port| loop_server("node", "node_http.js", port));
}

/// A server run per connection by socat: `nofork` hands the connection to it as fd 0 and 1
/// (inetd style), the default relays it through a socketpair from socat's per-connection
/// child. Either way, every request the load sent is counted once, in its class: the
/// launcher's copy of the socket ends without a request, and the process that serves it ends
/// it by exiting, not by closing it. Its verdicts are counts, and a process start-up per
/// connection that dwarfs the requests whatever runs beside it: it shares the machine.
fn per_connection_requests_counted(tag: &str, exec_options: &str) {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port(tag);
    let url = format!("gopher://127.0.0.1:{port}/");
    let selectors = mixed_requests(&scratch, 20);
    let args = [
        "--url",
        &url,
        "--requests",
        &selectors,
        "-n",
        "40",
        "-c",
        "2",
        "--warmup",
        "0",
        "--class",
        "dear=^/dear/",
        "--class",
        "cheap=^/cheap/",
        "--no-slow-phase",
    ];
    let script = testbed().join("loops").join("per_connection.py");
    let server = [
        "socat".to_string(),
        format!("TCP-LISTEN:{port},reuseaddr,fork"),
        format!("EXEC:{}{exec_options}", script.display()),
    ];
    let (out, record) = run_saved(&scratch, &args, &server);
    assert!(out.status.success(), "{tag}: {}", stderr(&out));
    let record = record.expect("record saved");
    let main = record.main_phase().unwrap();
    let stats = main.requests.as_ref().expect("per-request figures");
    assert_eq!(main.client.ok, 40);
    assert_eq!(stats.requests, 40, "{stats:?}");
    assert_eq!(stats.no_request, 0, "{stats:?}");
    assert_eq!(stats.events_dropped, 0);
    for name in ["dear", "cheap"] {
        assert_eq!(class(&record, "main", name).requests, 20);
    }
    // A Python start-up per connection dwarfs the requests: the reading says so and why.
    assert!(
        stats.unserved_cpu_ns * 2 > stats.unattributed_cpu_ns,
        "{stats:?}"
    );
    let reading = Analysis::of(&record);
    let costs = reading.main_phase().unwrap().requests.as_ref().unwrap();
    let note = costs.unreliable.as_deref().expect("an unreliable note");
    assert!(note.contains("a process started per connection"), "{note}");
    assert!(
        costs.unattributed_made_of.starts_with("process start-up"),
        "{}",
        costs.unattributed_made_of
    );
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains(note), "{summary}");
}

#[test]
fn inetd_style_server_counts_each_request_in_its_class() {
    per_connection_requests_counted("socat-nofork", ",nofork");
}

#[test]
fn socat_relayed_server_counts_each_request_in_its_class() {
    per_connection_requests_counted("socat-relay", "");
}
