//! `reqcost attach` (issue 14): a testbed server's live traffic from a client that is not
//! reqcost, counted on the server side; nothing of reqcost left in the kernel after SIGKILL.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::util::*;
use reqcost_record::RunRecord;
use reqcost_testkit::{command, free_port, Server, TempDir};

/// `reqcost attach ARGS` started in the background; returns once it says the probes are on,
/// with the server's pid from that line.
fn attach(args: &[&str]) -> (Child, BufReader<ChildStderr>, u32) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_reqcost"))
        .arg("attach")
        .args(args)
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("reqcost runs");
    let mut stderr = BufReader::new(child.stderr.take().expect("piped"));
    match attached_pid(&mut stderr) {
        Ok(pid) => (child, stderr, pid),
        Err(seen) => {
            let status = child.wait();
            panic!("reqcost attach ended ({status:?}) before attaching: {seen}")
        }
    }
}

/// The pid in the `attached to NAME (pid PID)` line, or all of stderr when it ends first.
fn attached_pid(stderr: &mut impl BufRead) -> Result<u32, String> {
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            return Err(seen);
        }
        seen += &line;
        let pid = line
            .strip_prefix("attached to ")
            .and_then(|rest| rest.split("(pid ").nth(1))
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok());
        if let Some(pid) = pid {
            return Ok(pid);
        }
    }
}

/// One gopher request for the menu; a slow reader takes its response 512 bytes at a time.
fn request(port: u16, slow: bool) -> usize {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"\r\n").unwrap();
    let mut buf = [0u8; 512];
    let mut total = 0;
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            return total;
        }
        total += n;
        if slow {
            thread::sleep(Duration::from_millis(2));
        }
    }
}

/// On-CPU nanoseconds of every thread of `pid` so far (schedstat).
fn schedstat_ns(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .map(|t| {
            let text = std::fs::read_to_string(t.path().join("schedstat")).unwrap();
            text.split_whitespace()
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum()
}

fn testbed_running(name: &str) -> Server {
    let port = free_port();
    Server::start(
        command(&testbed_server(name, port)),
        port,
        TempDir::new(name),
    )
}

/// The client sends a known number of requests, fast and slow readers on 4 threads, while
/// `attach --port` watches: the server side counts exactly those, and the CPU per request is
/// the server's CPU over the window (its schedstat, read by the test) divided by that count.
#[test]
fn attach_counts_the_live_clients_requests_and_divides_the_window_cpu_by_them() {
    let _alone = machine_alone();
    let server = testbed_running("clean");
    let scratch = TempDir::new("attach");
    let record_path = scratch.join("live.json");
    let port = server.port.to_string();
    let (mut child, _stderr, pid) = attach(&[
        "--port",
        &port,
        "--duration",
        "3s",
        "-o",
        record_path.to_str().unwrap(),
    ]);
    let cpu_before = schedstat_ns(pid);
    let started = Instant::now();
    const PER_THREAD: usize = 50;
    let sent: usize = (0..4)
        .map(|t| {
            let port = server.port;
            thread::spawn(move || {
                (0..PER_THREAD)
                    .map(|i| usize::from(request(port, t % 2 == 1 && i % 5 == 0) > 0))
                    .sum::<usize>()
            })
        })
        .map(|h| h.join().unwrap())
        .sum();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the client must finish inside the window"
    );
    let status = child.wait().unwrap();
    let cpu_ns = schedstat_ns(pid) - cpu_before;
    assert!(status.success(), "reqcost attach failed: {status}");
    assert_eq!(sent, 4 * PER_THREAD);

    let record = RunRecord::load(&record_path).unwrap();
    assert_eq!(record.workload.protocol, "live");
    assert_eq!(record.workload.url, format!("live:{port}"));
    let live = record.main_phase().unwrap();
    assert_eq!(live.name, "live");
    assert_eq!(live.client.requests, 0, "reqcost sent nothing");
    let served = live.requests.as_ref().expect("per-request accounting");
    assert_eq!(served.requests, sent as u64, "{served:?}");
    assert_eq!(live.units(), sent as u64);
    let cost = live.server.probe_cost.expect("the probes' own cost");
    assert!(cost.run_ns > 0 && cost.runs > 0, "{cost:?}");
    let window_ns = live.server.cpu.as_ref().unwrap().total_ns as f64;
    let per_request_us = live.per_request.cpu_total_us.unwrap();
    let expected = window_ns / 1000.0 / sent as f64;
    assert!(
        (per_request_us - expected).abs() < expected * 1e-9,
        "{per_request_us} µs per request, window CPU / requests = {expected} µs"
    );
    let schedstat = cpu_ns as f64 / 1000.0 / sent as f64;
    assert!(
        (per_request_us - schedstat).abs() < schedstat * 0.02,
        "{per_request_us:.1} µs per request; the test's schedstat says {schedstat:.1} µs"
    );
}

/// The ids of the BPF programs and links process `pid` holds fds on (`prog_id:` and
/// `link_id:` in their fdinfo).
fn bpf_ids_held_by(pid: u32) -> (Vec<u64>, Vec<u64>) {
    let (mut progs, mut links) = (Vec::new(), Vec::new());
    for fd in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .flatten()
    {
        let info = std::fs::read_to_string(fd.path()).unwrap_or_default();
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
        };
        match (field("link_id:"), field("prog_id:")) {
            (Some(link), _) => links.push(link),
            (None, Some(prog)) => progs.push(prog),
            _ => {}
        }
    }
    (progs, links)
}

/// The ids `bpftool -j prog|link show` lists now.
fn bpftool_ids(kind: &str) -> Vec<u64> {
    let out = Command::new("bpftool")
        .args(["-j", kind, "show"])
        .output()
        .expect("bpftool runs");
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["id"].as_u64())
        .collect()
}

/// SIGKILL gives reqcost no chance to detach: the kernel must drop its programs and links when
/// their last fd closes, and the server keeps serving.
#[test]
fn sigkill_of_attach_leaves_the_server_serving_and_no_program_loaded() {
    let _alone = machine_alone();
    let server = testbed_running("clean");
    let (mut child, _stderr, _) = attach(&["--port", &server.port.to_string()]);
    let (progs, links) = bpf_ids_held_by(child.id());
    assert!(
        progs.len() >= 2 && !links.is_empty(),
        "reqcost's programs (sys_enter, sys_exit, ...) and links while attached: {progs:?} {links:?}"
    );
    assert!(request(server.port, false) > 0);
    child.kill().unwrap();
    child.wait().unwrap();
    let still = |ours: &[u64], kind| {
        let listed = bpftool_ids(kind);
        ours.iter()
            .copied()
            .filter(|id| listed.contains(id))
            .collect::<Vec<_>>()
    };
    // The kernel frees them once the last fd is closed, which may take a moment after the exit.
    let deadline = Instant::now() + Duration::from_secs(5);
    let left = loop {
        let left = (still(&progs, "prog"), still(&links, "link"));
        if (left.0.is_empty() && left.1.is_empty()) || Instant::now() > deadline {
            break left;
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        left,
        (vec![], vec![]),
        "programs and links left after SIGKILL"
    );
    assert!(request(server.port, false) > 0, "the server still serves");
}

/// `run --pid` would load one server and measure another: it refuses, naming the one that
/// listens.
#[test]
fn run_pid_refuses_a_process_that_does_not_own_the_urls_socket() {
    let _shared = machine_shared();
    let server = testbed_running("clean");
    let mut other = Command::new("sleep").arg("30").spawn().unwrap();
    let url = format!("gopher://127.0.0.1:{}/", server.port);
    let pid = other.id().to_string();
    let out = reqcost(&["run", "--url", &url, "-n", "10", "--pid", &pid]);
    let _ = other.kill();
    let _ = other.wait();
    assert_clean_failure(&out, &format!("process {pid} does not listen on port"));
    assert!(
        stderr(&out).contains("pass its pid to --pid"),
        "{}",
        stderr(&out)
    );
}
