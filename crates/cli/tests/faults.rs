//! Faults a run must survive: the port held by another process, signals, hostile servers and
//! bad inputs; after each, the right exit code and message, and nothing left behind.

use std::net::TcpListener;
use std::process::{Command, Stdio};

use crate::util::*;
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
