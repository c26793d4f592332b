//! Any client, any transport: `--load CMD` drives the server, units of work are counted on the
//! server side.

use crate::util::*;
use reqcost_record::{Outcome, RunRecord};
use reqcost_testkit::TempDir;

/// A gopher client in Python: `N` requests for the menu, one connection each, on `PORT`.
const GOPHER_CLIENT: &str = "import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
for _ in range(n):
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(b'\\r\\n')
    while s.recv(65536):
        pass
    s.close()
";

/// `reqcost run --load CMD --port PORT` against the clean gopher server, saved in `scratch`.
fn run_load(
    scratch: &TempDir,
    port: u16,
    cmd: &str,
    args: &[&str],
) -> (std::process::Output, RunRecord) {
    let port_arg = port.to_string();
    let mut argv = vec!["--load", cmd, "--port", &port_arg, "--no-sample"];
    argv.extend_from_slice(args);
    let (out, record) = run_saved(scratch, &argv, &testbed_server("clean", port));
    (out, record.expect("record saved"))
}

#[test]
fn an_external_client_is_measured_for_its_lifetime_with_requests_counted_by_the_server() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("load-cmd");
    let client = scratch.write("client.py", GOPHER_CLIENT.as_bytes());
    let cmd = format!(
        "for i in $(seq {{c}}); do python3 {} {port} 20 & done; wait",
        client.display()
    );
    let (out, record) = run_load(&scratch, port, &cmd, &["-c", "3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let load = record
        .workload
        .load
        .as_ref()
        .expect("the load command in the record");
    assert_eq!(load.command, cmd.replace("{c}", "3"));
    assert_eq!(
        (load.exit.as_deref(), load.success),
        (Some("exit status 0"), true)
    );
    assert_eq!(record.outcome, Outcome::Completed);
    let names: Vec<&str> = record.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["main"], "one phase: no warm-up, no slow clients");
    let main = &record.phases[0];
    let served = main.requests.as_ref().expect("per-request accounting");
    assert_eq!((served.requests, served.connections), (60, 60));
    assert_eq!(main.units(), 60);
    assert_eq!(main.client.requests, 0, "reqcost sent nothing");
}

#[test]
fn a_failing_load_command_fails_the_run_and_keeps_the_record() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("load-fails");
    let (out, record) = run_load(&scratch, port, "echo oops; exit 3", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("exit status 3") && err.contains("| oops"),
        "{err}"
    );
    let load = record
        .workload
        .load
        .expect("the load command in the record");
    assert_eq!(
        (load.exit.as_deref(), load.success, load.output_tail),
        (Some("exit status 3"), false, vec!["oops".to_string()])
    );
    assert!(matches!(record.outcome, Outcome::Failed { .. }));
}

#[test]
fn load_flags_are_checked_before_anything_runs() {
    let out = reqcost(&["run", "--load", "true", "-n", "5", "--", "server"]);
    assert_clean_failure(&out, "--load");
    assert_eq!(out.status.code(), Some(2));
    let out = reqcost(&[
        "run",
        "--port",
        "80",
        "--url",
        "http://127.0.0.1:80/",
        "--",
        "server",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = reqcost(&["run", "--", "server"]);
    assert_clean_failure(&out, "required arguments");
}
