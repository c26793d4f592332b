//! `reqcost run` end to end against the testbed, and every bad input of issue 2.

use std::process::Output;

use crate::attach::testbed_running;
use crate::util::*;
use reqcost_analysis::findings::diagnose;
use reqcost_record::RunRecord;
use reqcost_testkit::{free_port, TempDir};

const MENU_LINES: f64 = 100.0;

fn gopher_url(port: u16) -> String {
    format!("gopher://127.0.0.1:{port}/")
}

/// `reqcost run --url URL` with `args`.
fn run_url(url: &str, args: &[&str]) -> Output {
    let mut argv = vec!["run", "--url", url];
    argv.extend_from_slice(args);
    reqcost(&argv)
}

/// `run_saved` into `scratch` with gopher requests to `port` and `args`.
fn run_gopher(
    scratch: &TempDir,
    port: u16,
    args: &[&str],
    server: &[String],
) -> (Output, Option<RunRecord>) {
    let url = gopher_url(port);
    let mut argv = vec!["--url", url.as_str()];
    argv.extend_from_slice(args);
    run_saved(scratch, &argv, server)
}

/// A bad command line: one clean error line and exit status 2.
fn assert_usage_error(out: &Output, expect: &str) {
    assert_clean_failure(out, expect);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn small_writes_makes_one_write_per_line_and_clean_a_few() {
    let _shared = machine_shared();
    for (server, lo, hi) in [
        ("small-writes", MENU_LINES, MENU_LINES + 2.0),
        ("clean", 1.0, 3.0),
    ] {
        let (scratch, port) = scratch_and_port(server);
        let (out, record) = run_gopher(
            &scratch,
            port,
            &["-n", "300", "-c", "2"],
            &testbed_server(server, port),
        );
        assert!(out.status.success(), "{server}: {}", stderr(&out));
        let record = record.expect("record saved");
        let main = record.main_phase().expect("main phase");
        assert_eq!(main.client.ok, 300, "{server}: every request answered");
        assert_eq!(main.client.error_count(), 0);
        let writes = main
            .per_request
            .write_syscalls
            .expect("write calls measured");
        assert!(
            (lo..=hi).contains(&writes),
            "{server}: {writes} write calls per request, expected {lo}..={hi}"
        );
        let cpu = main.server.cpu.as_ref().expect("cpu measured");
        assert!(cpu.total_ns > 0 && cpu.total_ns >= cpu.user_ns + cpu.system_ns / 2);
        assert!(main.per_request.cpu_total_us.unwrap() > 0.0);
        // reqcost's own load generator is the client: its load threads' CPU, beside the
        // server's.
        let load = main
            .client
            .load_cpu
            .as_ref()
            .expect("the load threads' CPU");
        assert_eq!(load.total_ns, load.user_ns + load.system_ns, "{load:?}");
        assert!(load.total_ns > 0, "{load:?}");
        let summary = String::from_utf8_lossy(&out.stdout);
        assert!(
            summary.contains("client       reqcost's own load generator: CPU per request "),
            "{server}: {summary}"
        );
    }
}

/// The CPU reqcost reports for an attached server is the schedstat time the kernel accounts
/// to it over the run, minus only what happened outside the measured phase.
#[test]
fn attached_cpu_agrees_with_proc_schedstat() {
    let _shared = machine_shared();
    let server = testbed_running("clean");
    let schedstat = || -> u64 {
        std::fs::read_to_string(format!("/proc/{}/schedstat", server.pid()))
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let before = schedstat();
    let pid = server.pid().to_string();
    let out = run_url(
        &gopher_url(server.port),
        // The probes on the whole time and no phase after main: the phase's CPU is then the
        // schedstat delta but for the readiness probe.
        &[
            "--record-json",
            "-n",
            "3000",
            "--probes-full-time",
            "--no-slow-phase",
            "--pid",
            &pid,
        ],
    );
    let after = schedstat();
    drop(server);
    assert!(out.status.success(), "{}", stderr(&out));
    let record = RunRecord::from_json(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let measured = record
        .main_phase()
        .unwrap()
        .server
        .cpu
        .as_ref()
        .unwrap()
        .total_ns;
    let whole = after - before;
    assert!(measured > 0);
    assert!(
        measured <= whole,
        "phase CPU {measured} ns exceeds schedstat delta {whole} ns"
    );
    // Warm-up and the readiness probe fall outside the measured phase; they are small.
    assert!(
        measured as f64 >= 0.7 * whole as f64,
        "phase CPU {measured} ns is far below schedstat delta {whole} ns"
    );
}

#[test]
fn record_round_trips_through_report() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("roundtrip");
    let (out, _) = run_gopher(
        &scratch,
        port,
        &["-n", "100"],
        &testbed_server("clean", port),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let path = scratch.join("run.json");
    let report = reqcost(&["report", path.to_str().unwrap()]);
    assert!(report.status.success());
    assert_eq!(
        String::from_utf8_lossy(&report.stdout),
        String::from_utf8_lossy(&out.stdout),
        "report prints the same summary as run"
    );
    let json = reqcost(&["report", "--record-json", path.to_str().unwrap()]);
    let reread = RunRecord::from_json(&String::from_utf8_lossy(&json.stdout)).unwrap();
    assert_eq!(reread, RunRecord::load(&path).unwrap());
    let analysis = report_json(&path);
    assert_eq!(analysis.run_id, reread.id);
    assert_eq!(analysis.findings, diagnose(&reread));
}

/// The probes' own run time is measured in every probed phase and said in the summary: the
/// part on the server's events, below the server's CPU (it is part of it), and with
/// --probe-stats the whole machine's, labelled as such, which holds at least as many runs; with
/// --no-probes there is none to state.
#[test]
fn probes_own_cost_is_split_when_probed_and_absent_without_probes() {
    let _shared = machine_shared();
    for args in [
        &["-n", "200", "--probe-stats"][..],
        &["-n", "200"][..],
        &["-n", "200", "--no-probes"][..],
    ] {
        let (scratch, port) = scratch_and_port("probe-cost");
        let (out, record) = run_gopher(&scratch, port, args, &testbed_server("clean", port));
        assert!(out.status.success(), "{}", stderr(&out));
        let record = record.expect("record saved");
        let phase = record.main_phase().unwrap();
        let cost = phase.server.probe_cost.as_ref();
        let summary = String::from_utf8_lossy(&out.stdout);
        if args.contains(&"--no-probes") {
            assert_eq!(cost, None);
            assert!(!summary.contains("probes' own cost"), "{summary}");
            continue;
        }
        let cost = cost.expect("probe cost of a probed run");
        assert!(cost.tree_ns > 0 && cost.tree_runs > 0, "{cost:?}");
        let cpu = phase.cpu_windows.as_ref().map_or_else(
            || phase.server.cpu.as_ref().unwrap().total_ns,
            |w| w.probed.cpu_ns,
        );
        assert!(
            cost.tree_ns < cpu,
            "{cost:?} against {cpu} ns of the server's CPU"
        );
        assert!(
            summary.contains("probes' own cost on the server's events: "),
            "{summary}"
        );
        let whole = "probes' own cost on the whole machine (other processes' events included)";
        let stats = args.contains(&"--probe-stats");
        assert_eq!(cost.machine_measured, stats, "{cost:?}");
        assert_eq!(summary.contains(whole), stats, "{summary}");
        if stats {
            assert!(
                cost.runs >= cost.tree_runs && cost.run_ns >= cost.tree_ns,
                "{cost:?}"
            );
        }
    }
}

/// Syscalls of the busy neighbour: `dd bs=1` reads and writes one byte per call.
const NEIGHBOUR_BYTES: u64 = 200_000;

/// A server doing nothing but syscalls (the clean gopher server) beside a busy neighbour (a
/// `dd bs=1` outside its tree, started by the load command, so that all of its 400 000
/// syscalls fall in the phase): the probes' cost on the server's events is below the server's
/// CPU per request, the whole machine's is labelled as such and holds the neighbour's syscalls,
/// and the neighbour's share is shown apart.
#[test]
fn the_probes_cost_on_a_busy_neighbour_is_shown_apart() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("neighbour");
    let client = scratch.write("client.py", GOPHER_CLIENT.as_bytes());
    let load = format!(
        "dd if=/dev/zero of=/dev/null bs=1 count={NEIGHBOUR_BYTES} 2>/dev/null & python3 {} {port} 200; wait",
        client.display()
    );
    let port_arg = port.to_string();
    let args = [
        "--load",
        &load,
        "--port",
        &port_arg,
        "--no-sample",
        "--probe-stats",
    ];
    let (out, record) = run_saved(&scratch, &args, &testbed_server("clean", port));
    assert!(out.status.success(), "{}", stderr(&out));
    let main = record.expect("record saved").phases.remove(0);
    let served = main.requests.as_ref().expect("per-request accounting");
    assert_eq!(served.requests, 200);
    let cost = main.server.probe_cost.as_ref().expect("probe cost");
    assert!(cost.machine_measured, "{cost:?}");
    let cpu = main.server.cpu.as_ref().unwrap().total_ns;
    assert!(
        cost.tree_ns / served.requests < cpu / served.requests,
        "{cost:?} against {cpu} ns of the server's CPU"
    );
    // Each of the neighbour's syscalls ran the probes at least once, outside the tree.
    let elsewhere = cost.runs - cost.tree_runs;
    assert!(elsewhere >= 2 * NEIGHBOUR_BYTES, "{cost:?}");
    assert!(elsewhere > 10 * cost.tree_runs, "{cost:?}");
    let summary = String::from_utf8_lossy(&out.stdout);
    for line in [
        "probes' own cost on the server's events: ",
        "probes' own cost on the whole machine (other processes' events included): ",
        "of which on other processes' events, not in the server's CPU: ",
    ] {
        assert!(summary.contains(line), "{line} in {summary}");
    }
}

/// A requests file mixing selectors with gopher URL paths (/0/1k.txt, which the server cannot
/// find): the paths are warned about, their error items counted apart from the successes, and
/// without the probes the summary names the rules it could not evaluate.
#[test]
fn error_items_are_not_successes_and_unprobed_rules_are_named() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("error-items");
    let requests = scratch.write("selectors.txt", b"1k.txt\n/0/1k.txt\n");
    let (out, record) = run_gopher(
        &scratch,
        port,
        &[
            "-n",
            "40",
            "-c",
            "1",
            "--requests",
            requests.to_str().unwrap(),
            "--no-probes",
            "--no-slow-phase",
        ],
        &testbed_server("clean", port),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("1 of 2 requests look like gopher URL paths (/TYPE/SELECTOR"),
        "{}",
        stderr(&out)
    );
    let record = record.expect("record saved");
    let main = record.main_phase().unwrap();
    assert_eq!(main.client.ok, 20, "{:?}", main.client);
    assert_eq!(main.client.errors.get("gopher-error"), Some(&20));
    assert!(record.notes.iter().any(|n| n.contains("gopher URL paths")));
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("20 ok · 20 errors"), "{summary}");
    assert!(summary.contains("(gopher-error 20)"), "{summary}");
    assert!(
        !summary.contains("nothing in this run matches"),
        "{summary}"
    );
    assert!(
        summary.contains("  not evaluated: small-writes, busy-wait, "),
        "{summary}"
    );
}

#[test]
fn report_rejects_what_is_not_a_record() {
    let scratch = TempDir::new("notrecord");
    let path = scratch.join("x.json");
    std::fs::write(&path, "{\"hello\": 1}").unwrap();
    let out = reqcost(&["report", path.to_str().unwrap()]);
    assert_usage_error(&out, "not a reqcost run record");
}

#[test]
fn command_not_found() {
    let out = run_url(
        &gopher_url(free_port()),
        &["-n", "10", "--", "/nonexistent/reqcost-server"],
    );
    assert_clean_failure(&out, "/nonexistent/reqcost-server");
    assert!(stderr(&out).contains("not found"));
}

#[test]
fn server_exits_at_start() {
    let out = run_url(
        &gopher_url(free_port()),
        &[
            "-n",
            "10",
            "--",
            "sh",
            "-c",
            "echo cannot-bind-here >&2; exit 3",
        ],
    );
    assert_clean_failure(&out, "exited at start (exit status 3)");
    assert!(
        stderr(&out).contains("cannot-bind-here"),
        "shows the server's output"
    );
}

#[test]
fn port_never_opens_and_no_orphan_is_left() {
    let port = free_port();
    let marker = format!("{}.25", 40 + port % 50);
    let out = run_url(
        &gopher_url(port),
        &["-n", "10", "--startup-timeout", "1", "--", "sleep", &marker],
    );
    assert_clean_failure(&out, "did not accept connections");
    assert!(
        !process_alive_with(&format!("sleep {marker}")),
        "server left running"
    );
}

const PY_SERVER: &str = r#"
import os, socket, sys, time
port, limit, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(64)
served = 0
while True:
    c, _ = s.accept()
    try:
        if c.recv(1024):
            c.sendall(b"iHello\tfake\t(NULL)\t0\r\n.\r\n")
            served += 1
    except OSError:
        pass
    c.close()
    if served == limit:
        if mode == "crash":
            os.kill(os.getpid(), 9)
        s.close()
        time.sleep(120)
"#;

fn python_server(port: u16, limit: u32, mode: &str) -> Vec<String> {
    vec![
        PYTHON.into(),
        "-c".into(),
        PY_SERVER.into(),
        port.to_string(),
        limit.to_string(),
        mode.into(),
    ]
}

#[test]
fn server_crash_mid_run_saves_partial_record() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("crash");
    let (out, record) = run_gopher(
        &scratch,
        port,
        &["-n", "2000", "--warmup", "0"],
        &python_server(port, 150, "crash"),
    );
    assert_clean_failure(&out, "server died");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("partial record saved"));
    let record = record.expect("partial record saved");
    assert!(matches!(
        record.outcome,
        reqcost_record::Outcome::ServerDied { .. }
    ));
    let main = record.main_phase().expect("the interrupted phase is kept");
    assert_eq!(
        main.client.ok, 150,
        "requests answered before the crash are kept"
    );
}

#[test]
fn connection_refused_mid_run() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("refused");
    let (out, record) = run_gopher(
        &scratch,
        port,
        &["-n", "400", "--warmup", "0"],
        &python_server(port, 100, "stop-listening"),
    );
    assert_clean_failure(&out, "requests failed");
    assert!(stderr(&out).contains("refused"));
    let record = record.expect("partial record saved");
    let main = record.main_phase().unwrap();
    assert_eq!(main.client.ok, 100);
    assert!(main.client.errors.get("refused").copied().unwrap_or(0) > 0);
    assert!(
        !process_alive_with(&format!("{port} 100 stop-listening")),
        "server left running"
    );
}

#[test]
fn malformed_url() {
    let out = run_url("gopher//127.0.0.1", &["--", "true"]);
    assert_usage_error(&out, "gopher//127.0.0.1");
}

#[test]
fn unreadable_requests_file() {
    let out = run_url(
        "gopher://127.0.0.1:7/",
        &["--requests", "/nonexistent/selectors.txt", "--", "true"],
    );
    assert_usage_error(&out, "/nonexistent/selectors.txt");
}

#[test]
fn empty_requests_file() {
    let scratch = TempDir::new("empty");
    let path = scratch.join("empty.txt");
    std::fs::write(&path, "").unwrap();
    let out = run_url(
        "gopher://127.0.0.1:7/",
        &["--requests", path.to_str().unwrap(), "--", "true"],
    );
    assert_usage_error(&out, "empty.txt");
}

#[test]
fn pid_that_does_not_exist() {
    let out = run_url("gopher://127.0.0.1:7/", &["--pid", "999999999"]);
    assert_clean_failure(&out, "no process with pid 999999999");
}

/// Without privileges reqcost still measures what procfs offers, says once what is missing
/// and how to get it, and records the reason in the record instead of a zero.
#[test]
fn without_privileges_probes_are_off_and_reasons_recorded() {
    let _shared = machine_shared();
    let scratch = TempDir::new("unpriv");
    std::fs::set_permissions(
        scratch.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let port = free_port();
    let url = gopher_url(port);
    let record_path = scratch.join("run.json");
    let server = testbed_server("clean", port);
    let mut args: Vec<&str> = vec![
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        env!("CARGO_BIN_EXE_reqcost"),
        "run",
        "-o",
        record_path.to_str().unwrap(),
        "--url",
        &url,
        "-n",
        "200",
        "--",
    ];
    args.extend(server.iter().map(String::as_str));
    let out = std::process::Command::new("setpriv")
        .args(&args)
        .current_dir(scratch.path())
        .output()
        .expect("setpriv runs");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("warning: eBPF probes off").count(), 1, "{err}");
    assert!(
        err.contains("root"),
        "says how to get the privileges: {err}"
    );
    let record = RunRecord::load(&record_path).unwrap();
    let main = record.main_phase().unwrap();
    assert_eq!(main.client.ok, 200);
    assert!(main.server.kernel.is_none());
    assert!(main.missing.contains_key("kernel"), "{:?}", main.missing);
    assert!(
        main.server.cpu.as_ref().unwrap().total_ns > 0,
        "procfs CPU still measured"
    );
}
