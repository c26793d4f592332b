//! Faults a run must survive: the port held by another process, signals, hostile servers and
//! bad inputs; after each, the right exit code and message, and nothing left behind.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::util::*;
use reqcost_record::{Outcome, RunRecord};
use reqcost_testkit::TempDir;

/// `reqcost run` against gopher on `port` launching `server`, without a record file.
fn run_on(port: u16, args: &[&str], server: &[&str]) -> std::process::Output {
    let url = format!("gopher://127.0.0.1:{port}/");
    let mut argv = vec!["run", "--url", url.as_str()];
    argv.extend_from_slice(args);
    argv.push("--");
    argv.extend_from_slice(server);
    reqcost(&argv)
}

#[test]
fn refuses_a_port_another_process_already_listens_on() {
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let server = testbed_server("clean", port);
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    let out = run_on(port, &["-n", "10"], &server);
    assert_clean_failure(&out, &format!("port {port} is already taken"));
    assert!(
        stderr(&out).contains(&format!("process {}", std::process::id())),
        "names the holder: {}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(1));
}

/// The launched server never listens; another process takes the port once the server has
/// started, which the FIFO makes certain: reqcost must not measure that process.
#[test]
fn refuses_a_listener_outside_the_launched_tree() {
    let scratch = TempDir::new("notowned");
    let fifo = scratch.join("started");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let port = reqcost_testkit::free_port();
    let url = format!("gopher://127.0.0.1:{port}/");
    let script = format!("echo up > {}; exec sleep 30", fifo.display());
    let child = Command::new(env!("CARGO_BIN_EXE_reqcost"))
        .args(["run", "--url", &url, "-n", "10", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::fs::read(&fifo).unwrap();
    let holder = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let out = child.wait_with_output().unwrap();
    drop(holder);
    assert_clean_failure(&out, "not to the launched server");
    assert!(
        stderr(&out).contains(&format!("belongs to process {}", std::process::id())),
        "{}",
        stderr(&out)
    );
    assert!(!process_alive_with(&script), "server left running");
}

/// `reqcost run` started in the background, its output captured, the stages it enters said in
/// `stages` (docs/testing.md).
fn spawn_reqcost(args: &[&str], stages: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_reqcost"))
        .args(patient(args))
        .env("REQCOST_STAGE_FILE", stages)
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("reqcost starts")
}

/// Waits until `child` says it is in `stage`.
fn wait_until_in(child: &Child, stage_file: &Path, stage: &str) {
    assert!(
        wait_for_stage(stage_file, stage, child.id()),
        "reqcost ended before {stage:?}, after {:?}",
        stages(stage_file)
    );
}

/// SIGKILL leaves reqcost no chance to clean up: its watchdog kills the server tree, detached
/// children included, and removes the cgroups; the next run removes the server log.
#[test]
fn sigkill_of_reqcost_leaves_no_process_or_cgroup() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("sigkill");
    let stages = scratch.join("stages");
    let marker = format!("{}.75", 50 + port % 50);
    let server = testbed_server("clean", port).join(" ");
    let script = format!("setsid sleep {marker} & exec {server}");
    let url = format!("gopher://127.0.0.1:{port}/");
    let mut child = spawn_reqcost(
        &[
            "run",
            "--url",
            &url,
            "--duration",
            "60s",
            "--",
            "sh",
            "-c",
            &script,
        ],
        &stages,
    );
    wait_until_in(&child, &stages, "phase main");
    child.kill().unwrap();
    child.wait().unwrap();
    let pid = child.id();
    assert!(
        eventually(|| !process_alive_with(&format!("sleep {marker}"))),
        "the detached child survived"
    );
    assert!(
        eventually(|| TcpStream::connect(("127.0.0.1", port)).is_err()),
        "the server still listens"
    );
    assert!(
        eventually(|| leftovers_of(pid).iter().all(|p| p.extension().is_some())),
        "cgroups left: {:?}",
        leftovers_of(pid)
    );
    let holder = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let out = reqcost(&["run", "--url", &url, "--", "true"]);
    drop(holder);
    assert_clean_failure(&out, "already taken");
    assert_eq!(
        leftovers_of(pid),
        Vec::<PathBuf>::new(),
        "the next run cleans up"
    );
}

/// A closed terminal (SIGHUP) or SIGQUIT ends the run as Ctrl-C does: record saved, server gone.
#[test]
fn sighup_and_sigquit_save_the_record() {
    let _shared = machine_shared();
    for signal in [libc::SIGHUP, libc::SIGQUIT] {
        let (scratch, port) = scratch_and_port("hangup");
        let record_path = scratch.join("run.json");
        let url = format!("gopher://127.0.0.1:{port}/");
        let mut argv = vec![
            "run",
            "-o",
            record_path.to_str().unwrap(),
            "--url",
            &url,
            "--duration",
            "60s",
            "--",
        ];
        let server = testbed_server("clean", port);
        argv.extend(server.iter().map(String::as_str));
        let stages = scratch.join("stages");
        let child = spawn_reqcost(&argv, &stages);
        wait_until_in(&child, &stages, "phase main");
        // SAFETY: signalling the reqcost process this test started.
        unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        assert_clean_failure(&out, "interrupted");
        let record = RunRecord::load(&record_path).expect("record saved");
        assert_eq!(record.outcome, Outcome::Interrupted);
        assert_eq!(leftovers_of(pid), Vec::<PathBuf>::new());
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    }
}

/// The server's output is a temporary file: gone after a good run, kept and named when the
/// server failed.
#[test]
fn server_log_removed_unless_the_server_failed() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("serverlog");
    let stages = scratch.join("stages");
    let url = format!("gopher://127.0.0.1:{port}/");
    let mut argv = vec!["run", "--url", &url, "-n", "20", "--no-slow-phase", "--"];
    let server = testbed_server("clean", port);
    argv.extend(server.iter().map(String::as_str));
    let good = spawn_reqcost(&argv, &stages);
    let pid = good.id();
    let out = good.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(leftovers_of(pid), Vec::<PathBuf>::new());

    let failing = spawn_reqcost(
        &[
            "run",
            "--url",
            &url,
            "--",
            "sh",
            "-c",
            "echo bad-config >&2; exit 3",
        ],
        &stages,
    );
    let pid = failing.id();
    let out = failing.wait_with_output().unwrap();
    assert_clean_failure(&out, "exited at start");
    let kept = leftovers_of(pid);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(stderr(&out).contains(&kept[0].display().to_string()));
    assert!(std::fs::read_to_string(&kept[0])
        .unwrap()
        .contains("bad-config"));
    std::fs::remove_file(&kept[0]).unwrap();
}

/// A server that accepts every connection and never answers.
const SILENT_SERVER: &str = r#"
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
held = []
while True:
    held.append(s.accept())
"#;

/// A default run (30 s request timeout, 100 warm-up requests) against a silent server gives up
/// in seconds, with the failures' kinds, instead of running for hours.
#[test]
fn a_silent_server_ends_a_default_run_in_seconds() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("silent");
    let server: Vec<String> = [PYTHON, "-c", SILENT_SERVER, &port.to_string()]
        .map(String::from)
        .into();
    // One timeout ends the warm-up (not 100 of 30 s each): bounded by counts, not by a clock.
    let (out, record) = run_saved(
        &scratch,
        &["--url", &format!("gopher://127.0.0.1:{port}/")],
        &server,
    );
    assert_clean_failure(&out, "warm-up requests failed (timeout 1)");
    assert_eq!(out.status.code(), Some(1));
    let record = record.expect("record saved");
    assert!(
        matches!(record.outcome, Outcome::Failed { .. }),
        "{:?}",
        record.outcome
    );
}

/// An `-o` the record could not be saved to fails before the server starts, with nothing left.
#[test]
fn unusable_output_path_fails_before_measuring() {
    let scratch = TempDir::new("output");
    let missing = scratch.join("no-such-dir/run.json");
    let dir = scratch.join("records");
    std::fs::create_dir(&dir).unwrap();
    let marker = "sleep 37.25";
    for (path, expect) in [(&missing, "no directory"), (&dir, "it is a directory")] {
        let out = reqcost(&[
            "run",
            "--url",
            "gopher://127.0.0.1:7/",
            "-o",
            path.to_str().unwrap(),
            "--",
            "sleep",
            "37.25",
        ]);
        assert_clean_failure(&out, expect);
        assert_eq!(out.status.code(), Some(2));
        assert!(!process_alive_with(marker), "the server was started");
    }
    let left: Vec<_> = std::fs::read_dir(scratch.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, ["records"], "nothing but the directory given");
}

#[test]
fn requests_file_without_line_ends_is_refused() {
    let out = reqcost(&[
        "run",
        "--url",
        "gopher://127.0.0.1:7/",
        "--requests",
        "/dev/zero",
        "--",
        "true",
    ]);
    assert_clean_failure(&out, "/dev/zero:1: line longer than 64 KiB");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn zero_startup_timeout_is_refused() {
    let out = reqcost(&[
        "run",
        "--url",
        "gopher://127.0.0.1:7/",
        "--startup-timeout",
        "0",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--startup-timeout"),
        "{}",
        stderr(&out)
    );
}

/// `reqcost report --json R | head -1`: the reader leaves early, reqcost ends quietly with 0.
#[test]
fn closed_stdout_ends_quietly() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("pipe");
    let url = format!("gopher://127.0.0.1:{port}/");
    let args = ["--url", url.as_str(), "-n", "20", "--no-slow-phase"];
    let (out, _) = run_saved(&scratch, &args, &testbed_server("clean", port));
    assert!(out.status.success(), "{}", stderr(&out));
    let path = scratch.join("run.json");
    for json in [true, false] {
        let mut argv = vec!["report", path.to_str().unwrap()];
        argv.extend(json.then_some("--json"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_reqcost"))
            .args(&argv)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stderr(&out), "");
    }
}

/// Ctrl-C (or SIGTERM, SIGHUP) while the server has not opened its port yet: reqcost stops at
/// once, with the server tree, instead of waiting out `--startup-timeout`.
#[test]
fn a_signal_during_start_up_stops_at_once() {
    let scratch = TempDir::new("startsignal");
    for (n, signal) in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP]
        .into_iter()
        .enumerate()
    {
        let stages = scratch.join(&format!("stages-{n}"));
        // reqcost's own command line holds the script, not the sleeps' command line.
        let secs = format!("43.{n}{}", std::process::id() % 1000);
        let marker = format!("sleep {secs}");
        let script = format!("t={secs}; sleep $t & exec sleep $t");
        let child = spawn_reqcost(
            &[
                "run",
                "--url",
                "gopher://127.0.0.1:7/",
                "--startup-timeout",
                "600",
                "--",
                "sh",
                "-c",
                &script,
            ],
            &stages,
        );
        wait_until_in(&child, &stages, "starting");
        // SAFETY: signalling the reqcost process this test started.
        unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        assert_clean_failure(&out, "interrupted while waiting for the server to start");
        assert_eq!(out.status.code(), Some(1));
        assert!(
            eventually(|| !process_alive_with(&marker)),
            "the server tree survived"
        );
        assert_eq!(leftovers_of(pid), Vec::<PathBuf>::new());
    }
}

/// Answers `limit` gopher requests, lets the last one reach the client, says so on stderr, and
/// dies by SIGKILL.
const CRASHING_SERVER: &str = r#"
import os, socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
for _ in range(int(sys.argv[2])):
    c, _ = s.accept()
    c.recv(1024)
    c.sendall(b"iok\r\n.\r\n")
    c.close()
time.sleep(0.5)
print("crashing-now after the last answer", file=sys.stderr, flush=True)
os.kill(os.getpid(), 9)
"#;

/// A crash mid-run: the message shows the server's last output and where all of it is kept,
/// and the requests refused after the crash are not counted as the phase's failures.
#[test]
fn a_crash_shows_the_output_and_ends_the_phase() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("crashout");
    let server: Vec<String> = [PYTHON, "-c", CRASHING_SERVER, &port.to_string(), "120"]
        .map(String::from)
        .into();
    let url = format!("gopher://127.0.0.1:{port}/");
    let args = [
        "--url",
        url.as_str(),
        "-n",
        "5000",
        "-c",
        "4",
        "--warmup",
        "0",
    ];
    let (out, record) = run_saved(&scratch, &args, &server);
    assert_clean_failure(&out, "server died mid-run, partial record saved");
    let err = stderr(&out);
    assert!(
        err.contains("| crashing-now after the last answer"),
        "{err}"
    );
    let log = err
        .split("all of it in ")
        .nth(1)
        .and_then(|rest| rest.split("):").next())
        .unwrap_or_else(|| panic!("no log path in: {err}"));
    assert!(std::fs::read_to_string(log)
        .unwrap()
        .contains("crashing-now"));
    std::fs::remove_file(log).unwrap();
    let main = record.expect("partial record saved").phases.remove(0);
    // One of the server's 120 answers went to reqcost's check that the port accepts.
    assert_eq!(main.client.ok, 119);
    assert_eq!(main.client.errors.get("refused"), None, "{main:?}");
    assert_eq!(
        main.client.requests,
        main.client.ok + main.client.error_count()
    );
}

/// Each failure is blamed on its kind, not on a server that stopped answering.
#[test]
fn each_failure_is_blamed_on_its_kind() {
    let _shared = machine_shared();
    for (scheme, extra, blamed) in [
        ("gopher", "--max-response=10", "larger than --max-response"),
        (
            "http",
            "--no-pin",
            "do not follow the --url scheme's protocol",
        ),
        ("gemini", "--no-pin", "TLS handshakes failed"),
    ] {
        let (scratch, port) = scratch_and_port("blame");
        let url = format!("{scheme}://127.0.0.1:{port}/");
        let args = ["--url", url.as_str(), extra, "-n", "5", "--no-slow-phase"];
        let (out, record) = run_saved(&scratch, &args, &testbed_server("clean", port));
        assert_clean_failure(&out, blamed);
        assert!(!stderr(&out).contains("stopped"), "{}", stderr(&out));
        assert_eq!(out.status.code(), Some(1));
        assert!(matches!(
            record.expect("record saved").outcome,
            Outcome::Failed { .. }
        ));
    }
}

/// What the user named that is not there, or a value that means nothing, is bad input: 2.
#[test]
fn bad_inputs_exit_2() {
    let scratch = TempDir::new("badinput");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../analysis/tests/fixtures/clean.json");
    let mut record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    record.as_object_mut().unwrap().remove("profile");
    let no_profile = scratch.join("no-profile.json");
    std::fs::write(&no_profile, record.to_string()).unwrap();
    record.as_object_mut().unwrap().remove("version");
    let no_version = scratch.join("no-version.json");
    std::fs::write(&no_version, record.to_string()).unwrap();
    let pprof = scratch.join("cpu.pb.gz");
    let (no_profile, no_version) = (no_profile.to_str().unwrap(), no_version.to_str().unwrap());
    let url = "gopher://127.0.0.1:7/";
    for (args, expect) in [
        (
            vec!["run", "--url", url, "--", ""],
            "server command not found",
        ),
        (
            vec!["run", "--url", url, "--", "/no/such/server"],
            "not found",
        ),
        (
            vec!["run", "--url", url, "--pid", "0"],
            "no process with pid 0",
        ),
        (
            vec!["run", "--url", url, "--pid", "999999999"],
            "no process with pid",
        ),
        (
            vec!["report", "--pprof", pprof.to_str().unwrap(), no_profile],
            "no sampled call chains",
        ),
        (vec!["report", no_version], "without a \"version\" field"),
        (
            vec![
                "check",
                no_profile,
                "--baseline",
                no_profile,
                "--max-cpu-regression",
                "NaN",
            ],
            "not a percentage",
        ),
        (
            vec![
                "check",
                no_profile,
                "--baseline",
                no_profile,
                "--max-syscalls-regression=-5",
            ],
            "not a percentage",
        ),
    ] {
        let out = reqcost(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(expect), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    }
}

/// `report --check-record`: exit 0 on a record whose invariants hold, 1 with one line per
/// violation on one that breaks them (an old busy-wait record whose probes counted 19 % less
/// CPU than its cgroup, and the same record with a class given the issue's 97 % share).
#[test]
fn check_record_exits_1_with_a_line_per_violation() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../analysis/tests/fixtures");
    let check = |path: &Path| {
        let out = reqcost(&["report", "--check-record", path.to_str().unwrap()]);
        let stdout = String::from_utf8(out.stdout).unwrap();
        (out.status.code(), stdout)
    };
    assert_eq!(
        check(&fixtures.join("clean.json")),
        (
            Some(0),
            "the record's invariants hold in its 2 phases\n".into()
        )
    );
    let (code, stdout) = check(&fixtures.join("busy-wait.json"));
    assert_eq!(code, Some(1));
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.starts_with("phase main: cpu-total: "), "{stdout}");

    let scratch = TempDir::new("check-record");
    let mut record = RunRecord::load(&fixtures.join("busy-wait.json")).unwrap();
    let slow = &mut record.phases[1];
    slow.requests.as_mut().unwrap().by_class[0].cpu_share_pct = 97.0;
    let broken = scratch.join("broken.json");
    std::fs::write(&broken, serde_json::to_string(&record).unwrap()).unwrap();
    let (code, stdout) = check(&broken);
    assert_eq!(code, Some(1));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[1].starts_with("phase slow-clients: class-shares: "),
        "{stdout}"
    );
}
