//! `--load CMD` CPU free of the probes' cost: the command runs a second time without them, and
//! its work against the probed run's (the server's reads and writes) scales that run's CPU.
//! nginx's access log is the ground truth of what each run served.

use crate::util::*;
use reqcost_record::{CpuMethod, CpuWindows, Outcome, RunRecord};
use reqcost_testkit::{config, TempDir};

/// `reqcost run --load CMD` (`{url}` in it replaced) against nginx serving the 1 KB file and
/// logging every request: the record and the access log's requests answered 200.
fn run_nginx(tag: &str, cmd: &str, args: &[&str]) -> (RunRecord, u64) {
    let (scratch, port) = scratch_and_port(tag);
    www_1k(&scratch);
    let log = scratch.join("access.log");
    let http = format!("access_log {};", log.display());
    let conf = config::NginxConf {
        http: &http,
        ..config::NginxConf::default()
    };
    let server = config::nginx(scratch.path(), port, &conf);
    let url = format!("http://127.0.0.1:{port}/");
    let cmd = cmd.replace("{url}", &format!("{url}1k.txt"));
    let mut argv = vec!["--load", &cmd, "-c", "4", "--url", &url, "--no-sample"];
    argv.extend_from_slice(args);
    let (out, record) = run_saved(&scratch, &argv, &server);
    assert!(out.status.success(), "{}", stderr(&out));
    let served = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\" 200 "))
        .count() as u64;
    (record.expect("record saved"), served)
}

fn windows(record: &RunRecord) -> &CpuWindows {
    record.phases[0].cpu_windows.as_ref().expect("cpu_windows")
}

/// The requests the probes counted in the probed run.
fn probed_requests(record: &RunRecord) -> u64 {
    record.phases[0]
        .requests
        .as_ref()
        .expect("requests")
        .requests
}

#[test]
fn a_fixed_command_runs_twice_and_its_work_scales_by_one() {
    let _shared = machine_shared();
    let (record, served) = run_nginx("loadpass-fixed", "h2load --h1 -n 3000 -c {c} {url}", &[]);
    let w = windows(&record);
    assert_eq!(w.method, CpuMethod::UnprobedPass, "{w:?}");
    assert_eq!(served, 6000, "the command ran twice");
    assert_eq!(probed_requests(&record), 3000);
    let work = w.pass_work.as_ref().expect("the two runs' work");
    // nginx reads the file, writes the response and its log line: three counted calls each.
    assert_eq!(
        (work.probed_calls, work.pass_calls),
        (9000, 9000),
        "{work:?}"
    );
    assert_eq!(work.probed_bytes, work.pass_bytes);
    assert_eq!(work.factor, 1.0);
    assert_eq!(w.unprobed.requests, 3000);
    let cpu = record.phases[0].server.cpu.as_ref().unwrap();
    assert_eq!(cpu.total_ns, w.unprobed.cpu_ns, "CPU from the unprobed run");
}

#[test]
fn a_connection_per_request_is_measured_alike() {
    let _shared = machine_shared();
    let cmd = "for i in $(seq 100); do curl -sf -o /dev/null {url} || exit 1; done";
    let (record, served) = run_nginx("loadpass-curl", cmd, &[]);
    let w = windows(&record);
    assert_eq!(w.method, CpuMethod::UnprobedPass, "{w:?}");
    assert_eq!(served, 200);
    let work = w.pass_work.as_ref().expect("the two runs' work");
    assert_eq!((work.probed_calls, work.pass_calls), (300, 300), "{work:?}");
    assert_eq!(w.unprobed.requests, 100);
}

#[test]
fn a_timed_command_is_scaled_to_the_requests_its_second_run_served() {
    let _shared = machine_shared();
    let (record, served) = run_nginx("loadpass-timed", "wrk -d 1s -t 1 -c {c} {url}", &[]);
    let w = windows(&record);
    assert_eq!(w.method, CpuMethod::UnprobedPass, "{w:?}");
    let work = w.pass_work.as_ref().expect("the two runs' work");
    let truth = served - probed_requests(&record);
    // wrk stops mid-request on each of its 4 connections: those are not logged as answered,
    // and neither run's work counts them.
    let estimate = w.unprobed.requests;
    assert!(
        estimate.abs_diff(truth) <= 4,
        "{estimate} for {truth}: {work:?}"
    );
}

#[test]
fn a_command_that_fails_or_must_run_once_keeps_the_probed_cpu() {
    let _shared = machine_shared();
    let mark = TempDir::new("loadpass-mark");
    let flag = mark.join("ran");
    let cmd = format!(
        "test -e {0} && exit 3; touch {0}; h2load --h1 -n 500 -c {{c}} {{url}}",
        flag.display()
    );
    let (record, served) = run_nginx("loadpass-fails", &cmd, &[]);
    assert_eq!(
        record.outcome,
        Outcome::Completed,
        "the measured run succeeded"
    );
    assert_eq!(served, 500);
    let w = windows(&record);
    assert_eq!(w.method, CpuMethod::Probed);
    assert!(w.reason.contains("it ended with exit status 3"), "{w:?}");
    assert!(w.pass_work.is_none());

    let (record, served) = run_nginx(
        "loadpass-once",
        "h2load --h1 -n 500 -c {c} {url}",
        &["--load-once"],
    );
    assert_eq!(served, 500, "run once");
    let w = windows(&record);
    assert_eq!(w.method, CpuMethod::Probed);
    assert!(w.reason.contains("--load-once"), "{w:?}");
}

/// gtlsserver reads and writes its QUIC datagrams with recvmsg/sendmsg, which /proc/PID/io
/// does not count: the command is not run again, and the record says why.
#[test]
fn a_quic_server_keeps_the_probed_cpu_and_says_why() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("loadpass-quic");
    let server = gtlsserver(&scratch, port, ("1k", 1024));
    let cmd = format!(
        "gtlsclient -q --exit-on-all-streams-close -n 4 127.0.0.1 {port} https://127.0.0.1:{port}/1k"
    );
    let (out, record) = run_saved(
        &scratch,
        &["--load", &cmd, "--port", &port.to_string(), "--no-sample"],
        &server,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let record = record.expect("record saved");
    let w = windows(&record);
    assert_eq!(w.method, CpuMethod::Probed);
    assert!(
        w.reason.contains("not run a second time") && w.reason.contains("recvmsg"),
        "{w:?}"
    );
}
