//! `reqcost attach` (issue 14): a testbed server's live traffic from a client that is not
//! reqcost, counted on the server side; nothing of reqcost left in the kernel after SIGKILL.

use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::thread;
use std::time::{Duration, Instant};

use crate::util::*;
use reqcost_analysis::compare_code::class_code_diffs;
use reqcost_analysis::findings::diagnose;
use reqcost_record::{CpuMethod, RunRecord};
use reqcost_testkit::{command, free_port, Server, TempDir};
use reqcost_workload::background::{self, Reader, FAST};

/// `reqcost attach ARGS` started in the background; returns once it says the probes are on,
/// with the server's pid from that line. Probes full time unless ARGS give `--duty` or
/// `--budget`: the tests count every request the client sent.
pub fn attach(args: &[&str]) -> (Child, BufReader<ChildStderr>, u32) {
    let scheduled = args.iter().any(|a| ["--duty", "--budget"].contains(a));
    let mut child = Command::new(env!("CARGO_BIN_EXE_reqcost"))
        .arg("attach")
        .args(args)
        .args((!scheduled).then_some("--probes-full-time"))
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
    first_line_where(stderr, |line| {
        line.strip_prefix("attached to ")
            .and_then(|rest| rest.split("(pid ").nth(1))
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
    })
}

/// What `found` makes of the first line of `stderr` it accepts, or all of stderr when it ends
/// first.
fn first_line_where<T>(
    stderr: &mut impl BufRead,
    found: impl Fn(&str) -> Option<T>,
) -> Result<T, String> {
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            return Err(seen);
        }
        if let Some(value) = found(&line) {
            return Ok(value);
        }
        seen += &line;
    }
}

/// One request for the menu, read as `reader` reads; the bytes received.
fn request(port: u16, reader: Reader) -> usize {
    background::request(port, reader).unwrap()
}

/// Live traffic from a client that is not reqcost, each list on its own thread; the requests
/// answered.
fn live_traffic(port: u16, threads: Vec<Vec<Reader>>) -> usize {
    background::traffic(port, threads, &AtomicBool::new(false))
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

pub fn testbed_running(name: &str) -> Server {
    let port = free_port();
    Server::start(
        command(&testbed_server(name, port)),
        port,
        TempDir::new(name),
    )
}

/// The client sends a known number of requests, fast and slow readers on 4 threads, while
/// `attach --port` watches until Ctrl-C: the server side counts exactly those, and the CPU per
/// request is the server's CPU over the window (its schedstat, read by the test) divided by
/// that count.
#[test]
fn attach_counts_the_live_clients_requests_and_divides_the_window_cpu_by_them() {
    let _alone = machine_alone();
    let server = testbed_running("clean");
    let scratch = TempDir::new("attach");
    let record_path = scratch.join("live.json");
    let port = server.port.to_string();
    let (mut child, _stderr, pid) = attach(&["--port", &port, "-o", record_path.to_str().unwrap()]);
    let cpu_before = schedstat_ns(pid);
    const PER_THREAD: usize = 50;
    let slowish = Reader {
        bytes_per_s: Some(256 * 1024),
        ..FAST
    };
    let threads = (0..4)
        .map(|t| {
            (0..PER_THREAD)
                .map(|i| {
                    if t % 2 == 1 && i % 5 == 0 {
                        slowish
                    } else {
                        FAST
                    }
                })
                .collect()
        })
        .collect();
    let sent = live_traffic(server.port, threads);
    let status = end_window(&mut child);
    let cpu_ns = schedstat_ns(pid) - cpu_before;
    assert!(status.success(), "reqcost attach failed: {status}");
    assert_eq!(sent, 4 * PER_THREAD);

    let record = load_record(&record_path).unwrap();
    assert_eq!(record.workload.protocol, "live");
    assert_eq!(record.workload.url, format!("live:{port}"));
    let live = record.main_phase().unwrap();
    assert_eq!(live.name, "live");
    assert_eq!(live.client.requests, 0, "reqcost sent nothing");
    let served = live.requests.as_ref().expect("per-request accounting");
    assert_eq!(served.requests, sent as u64, "{served:?}");
    assert_eq!(live.units(), sent as f64);
    let cost = live
        .server
        .probe_cost
        .as_ref()
        .expect("the probes' own cost");
    assert!(cost.tree_ns > 0 && cost.tree_runs > 0, "{cost:?}");
    assert!(!cost.machine_measured, "{cost:?}");
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

/// `attach --duty 20%` under a client at a constant 200 requests per second for the whole
/// window: the record is marked sampled with the fraction probed, and its requests, counted in
/// the probed fifth and scaled, are the client's count within 25 % (a fifth of 4 s at 200/s is
/// about 160 requests counted, each window boundary cutting at most one).
#[test]
fn attach_duty_probes_part_of_the_time_and_scales_the_requests() {
    let _alone = machine_alone();
    let server = testbed_running("clean");
    let mut attached = attach_live(&server, &["--duration", "4s", "--duty", "20%"]);
    let answered = at_200_per_s_while_attached(&mut attached, server.port);
    assert!(
        attached.child.wait().unwrap().success(),
        "reqcost attach failed"
    );

    let record = load_record(&attached.record).unwrap();
    // The client's requests answered within the window (reqcost exits some time after it).
    let window = Duration::from_secs_f64(record.workload.duration_s.unwrap());
    let sent = answered.iter().filter(|t| **t <= window).count() as f64;
    let live = record.main_phase().unwrap();
    let windows = live.cpu_windows.as_ref().expect("how the probes ran");
    assert_eq!(windows.method, CpuMethod::Sampled);
    let probed = windows.probed_fraction();
    assert!((0.1..0.3).contains(&probed), "probed {probed}");
    let counted = live.requests.as_ref().unwrap().requests as f64;
    assert!(
        (counted - sent).abs() < 0.25 * sent,
        "{counted} requests scaled from a {probed:.2} sample, the client sent {sent}"
    );
    assert_eq!(live.units(), counted);
    let summary = reqcost(&["report", attached.record.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&summary.stdout);
    assert!(text.contains("sampled      probes on "), "{text}");
}

/// Requests to `port` at 200 per second until `attached` exits; when each was answered.
fn at_200_per_s_while_attached(attached: &mut Attached, port: u16) -> Vec<Duration> {
    let every = Duration::from_millis(5);
    let start = Instant::now();
    let mut answered = Vec::new();
    while attached.child.try_wait().unwrap().is_none() {
        request(port, FAST);
        answered.push(start.elapsed());
        let next = start + every * answered.len() as u32;
        thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    answered
}

/// cost-classes' request that spins 2 ms of its thread's CPU in `burn_a`, its class label.
const BURN_2MS: &str = "a/2000";

/// `attach --duty 20%` under a client sending [`BURN_2MS`] 100 times a second: samples are
/// tagged only in the probed fifth while the class's requests are scaled to the whole window,
/// and the class's sampled CPU per request (compare's per class code) is still the 2 ms each
/// request burns (dividing by the scaled requests read a fifth of it). At 2999 Hz the probed
/// fifth of 4 s has about 480 of the class's samples: 5 % of sampling noise.
#[test]
fn attach_duty_samples_cost_a_class_what_its_requests_burn() {
    let _shared = machine_shared();
    let server = testbed_running("cost-classes");
    let args = ["--duration", "4s", "--duty", "20%", "--freq", "2999"];
    let mut attached = attach_live(&server, &args);
    let every = Duration::from_millis(10);
    let start = Instant::now();
    let mut sent = 0;
    while attached.child.try_wait().unwrap().is_none() {
        let mut s = std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, server.port)).unwrap();
        std::io::Write::write_all(&mut s, format!("{BURN_2MS}\r\n").as_bytes()).unwrap();
        std::io::Read::read_to_end(&mut s, &mut Vec::new()).unwrap();
        sent += 1;
        thread::sleep((start + every * sent).saturating_duration_since(Instant::now()));
    }
    assert!(
        attached.child.wait().unwrap().success(),
        "reqcost attach failed"
    );

    let record = [load_record(&attached.record).unwrap()];
    let windows = record[0].main_phase().unwrap().cpu_windows.as_ref();
    let windows = windows.expect("how the probes ran");
    assert_eq!(windows.method, CpuMethod::Sampled);
    assert!(windows.count_scale > 2.0, "{windows:?}");
    let code = class_code_diffs(&record, &record);
    let burn = code.iter().find(|c| c.class == BURN_2MS);
    let per_request = burn.and_then(|c| c.a_ns_per_request);
    let ratio = per_request.expect("the class's sampled CPU per request") / 2e6;
    assert!(
        (0.8..1.3).contains(&ratio),
        "{BURN_2MS}: sampled {ratio:.2}x the 2 ms it burns, {sent} sent: {code:?}"
    );
}

/// `attach --budget 3%` under a client at 200 requests per second: the record keeps the
/// budget's figures, and they agree with the windows they were measured over (the share
/// probed at least the least duty, the cost's parts adding up to it, the cost share its
/// ratio to the server's CPU, within its interval); the summary says them.
#[test]
fn attach_budget_keeps_its_figures_consistent_with_the_record() {
    let _alone = machine_alone();
    let server = testbed_running("clean");
    let mut attached = attach_live(&server, &["--duration", "4s", "--budget", "3%"]);
    at_200_per_s_while_attached(&mut attached, server.port);
    assert!(
        attached.child.wait().unwrap().success(),
        "reqcost attach failed"
    );

    let record = load_record(&attached.record).unwrap();
    let live = record.main_phase().unwrap();
    let windows = live.cpu_windows.as_ref().expect("how the probes ran");
    assert_eq!(windows.method, CpuMethod::Sampled);
    let b = windows.budget.as_ref().expect("the budget's figures");
    assert_eq!((b.budget, b.min_duty), (0.03, reqcost_measure::MIN_DUTY));
    let probed = windows.probed_fraction();
    assert!((b.min_duty..=1.0).contains(&probed), "probed {probed}");
    assert!(b.cycles >= 2, "{b:?}");
    assert!(b.min_duty <= b.duty_low && b.duty_low <= b.duty_high && b.duty_high <= 1.0);
    assert!(b.trap_interval_ns[0] <= b.trap_ns && b.trap_ns <= b.trap_interval_ns[1]);
    assert_eq!(
        b.program_ns + b.syscall_trap_ns + b.uretprobe_ns,
        b.accounted_ns,
        "{b:?}"
    );
    assert_eq!(
        b.syscall_trap_ns,
        (b.syscalls as f64 * b.trap_ns).round() as u64
    );
    assert!(b.syscalls > 0 && b.program_ns > 0, "{b:?}");
    let cost = live
        .server
        .probe_cost
        .as_ref()
        .expect("the probes' own cost");
    assert!(b.program_ns <= cost.tree_ns, "{b:?} {cost:?}");
    assert!(b.cost_ns >= b.accounted_ns, "{b:?}");
    if let (Some(m), Some([low, high])) = (b.measured_ns, b.measured_interval_ns) {
        assert!(low <= m && m <= high, "{b:?}");
    }
    assert_eq!(
        b.server_cpu_ns,
        windows.probed.cpu_ns + windows.unprobed.cpu_ns
    );
    let share = b.cost_ns as f64 / (b.server_cpu_ns - b.cost_ns) as f64;
    assert!((b.cost_share - share).abs() < 1e-9, "{b:?}");
    let [low, high] = b.cost_share_interval;
    assert!(low <= b.cost_share && b.cost_share <= high, "{b:?}");
    let summary = reqcost(&["report", attached.record.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&summary.stdout);
    assert!(text.contains("  budget       probes' cost "), "{text}");
    assert!(text.contains(", budget 3.0 %: probes on "), "{text}");
}

/// The requests of [`paced_clients`]: the same bytes every time, on a connection of its own
/// or on one kept alive.
const CLOSE_REQUEST: &[u8] = b"GET /1k.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
const KEEP_ALIVE_REQUEST: &[u8] = b"GET /1k.txt HTTP/1.1\r\nHost: t\r\n\r\n";

/// `per_thread` requests on each of `threads` threads at `per_s` a thread, each on its own
/// connection, or with `keep_alive` all of a thread's on one, closed after the last; the
/// responses' bytes.
fn paced_clients(
    port: u16,
    threads: usize,
    per_thread: u32,
    per_s: u32,
    keep_alive: bool,
) -> Vec<usize> {
    let every = Duration::from_secs(1) / per_s;
    let connect = move || std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
    let one = move || {
        let start = Instant::now();
        let mut kept = keep_alive.then(|| BufReader::new(connect()));
        (1..=per_thread)
            .map(|i| {
                let n = match kept.as_mut() {
                    Some(s) => {
                        std::io::Write::write_all(s.get_mut(), KEEP_ALIVE_REQUEST).unwrap();
                        read_http_response(s).0
                    }
                    None => {
                        let mut s = connect();
                        std::io::Write::write_all(&mut s, CLOSE_REQUEST).unwrap();
                        let mut response = Vec::new();
                        std::io::Read::read_to_end(&mut s, &mut response).unwrap();
                        response.len()
                    }
                };
                thread::sleep((start + every * i).saturating_duration_since(Instant::now()));
                n
            })
            .collect::<Vec<_>>()
    };
    let all: Vec<_> = (0..threads).map(|_| thread::spawn(one)).collect();
    all.into_iter().flat_map(|t| t.join().unwrap()).collect()
}

/// `attach` with the default budget to nginx while 2 client threads send 750 requests each,
/// on a connection per request or on one kept alive each (closed before the window ends):
/// the bytes that scale the probed windows' count are those of every request, though no
/// connection of one lives from one window boundary to the next and the last bytes of the
/// others come after the last read before their close (each server end also received the
/// client's FIN, one byte of its sequence); the count scaled by them is the client's. What a
/// boundary can misplace is the requests in flight across it, at most one a client thread, in
/// bytes or in the probes' count: the count's error is bounded by that.
fn attach_budget_counts_what_nginx_received(keep_alive: bool) {
    const THREADS: usize = 2;
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port("budget-bytes");
    www_1k(&scratch);
    let argv = reqcost_testkit::config::nginx(scratch.path(), port, &Default::default());
    let server = Server::start(command(&argv), port, scratch);
    // The default budget, said so that `attach` leaves the probes to it.
    let mut attached = attach_live(&server, &["--budget", "3%"]);
    let responses = paced_clients(server.port, THREADS, 750, 250, keep_alive);
    let status = end_window(&mut attached.child);
    assert!(status.success(), "reqcost attach failed: {status}");
    let sent = responses.len() as u64;
    assert!(responses.iter().all(|&n| n == responses[0] && n > 1024));

    let record = load_record(&attached.record).unwrap();
    let live = record.main_phase().unwrap();
    let windows = live.cpu_windows.as_ref().expect("how the probes ran");
    assert_eq!(windows.method, CpuMethod::Sampled);
    assert!(
        windows
            .reason
            .contains("summed at its close by an eBPF program"),
        "{}",
        windows.reason
    );
    // The probes saw every connection established: each read after the start looked them up.
    assert!(
        windows.reason.contains("dumped in 1)"),
        "{}",
        windows.reason
    );
    let b = windows.budget.as_ref().expect("the budget's figures");
    assert!(b.probed_bytes > 0 && b.unprobed_bytes > 0, "{b:?}");
    let (request, connections) = match keep_alive {
        true => (KEEP_ALIVE_REQUEST.len() as u64, THREADS as u64),
        false => (CLOSE_REQUEST.len() as u64, sent),
    };
    let all = sent * request + connections;
    // Those in flight when the window closed may be left out in part (the last client's FIN,
    // after the last read).
    let bytes = b.probed_bytes + b.unprobed_bytes;
    assert!(
        all - THREADS as u64 * (request + 1) <= bytes && bytes <= all,
        "{bytes} bytes for {sent} requests of {request} on {connections} connections"
    );
    let probed = windows.probed.requests + windows.requests_cut;
    let boundaries = u64::from(windows.probed.windows + windows.unprobed.windows);
    let misplaced = 2 * THREADS as u64 * boundaries;
    let counted = live.requests.as_ref().unwrap().requests as f64;
    let allowed = sent as f64 * misplaced as f64 / probed.saturating_sub(misplaced).max(1) as f64;
    assert!(
        (counted - sent as f64).abs() <= allowed,
        "{counted} requests scaled from {probed} probed in {boundaries} windows, the client \
         sent {sent}: {windows:?}"
    );
}

#[test]
fn attach_budget_counts_connections_that_close_between_boundaries() {
    attach_budget_counts_what_nginx_received(false);
}

#[test]
fn attach_budget_counts_the_last_bytes_of_keep_alive_clients_that_end_in_the_window() {
    attach_budget_counts_what_nginx_received(true);
}

/// A started `reqcost attach --port` over `server` with `extra` arguments, and where its record
/// will be.
pub struct Attached {
    pub child: Child,
    /// Held open: reqcost writes progress lines there until it exits.
    _stderr: BufReader<ChildStderr>,
    _scratch: TempDir,
    pub record: PathBuf,
}

pub fn attach_live(server: &Server, extra: &[&str]) -> Attached {
    let scratch = TempDir::new("attach-live");
    let record_path = scratch.join("live.json");
    let port = server.port.to_string();
    let mut args = vec!["--port", &port];
    args.extend(extra);
    args.extend(["-o", record_path.to_str().unwrap()]);
    let (child, _stderr, _) = attach(&args);
    Attached {
        child,
        _stderr,
        _scratch: scratch,
        record: record_path,
    }
}

/// Ends an attach window as Ctrl-C does, once the traffic it must see is over: however slow
/// the machine, no request falls outside it. The exit status.
pub fn end_window(child: &mut Child) -> std::process::ExitStatus {
    // SAFETY: signalling the reqcost process this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    child.wait().unwrap()
}

/// `reqcost attach --port` over `server` while `threads` of live traffic run, until they are
/// done; the record, and the requests the client had answered.
pub fn attached_over(server: &Server, threads: Vec<Vec<Reader>>) -> (RunRecord, usize) {
    let mut attached = attach_live(server, &[]);
    let answered = live_traffic(server.port, threads);
    let status = end_window(&mut attached.child);
    assert!(status.success(), "reqcost attach failed: {status}");
    (load_record(&attached.record).unwrap(), answered)
}

/// seeds/002 in production: live clients, most fast, some reading at 64 KiB/s through an
/// 8 KiB receive buffer from their own address. The busy-wait server polls each slow
/// client's send queue until it drains; attach names the busy-wait first and the slow clients
/// as its carriers. The same server with fast clients only does not spin: no busy-wait.
#[test]
fn attach_finds_busy_wait_under_live_mixed_traffic_and_names_the_slow_clients() {
    let _alone = machine_alone();
    let server = testbed_running("busy-wait");
    let slow = Reader {
        source: Ipv4Addr::new(127, 0, 0, 2),
        bytes_per_s: Some(64 * 1024),
    };
    let fast_only = vec![vec![FAST; 60]; 2];
    let mut mixed = fast_only.clone();
    mixed.extend(vec![vec![slow; 8]; 2]);

    let (record, answered) = attached_over(&server, mixed);
    assert_eq!(answered, 2 * 60 + 2 * 8);
    let served = record.main_phase().unwrap().requests.as_ref().unwrap();
    assert_eq!(served.requests, answered as u64, "{served:?}");
    let findings = diagnose(&record);
    let first = findings.first().expect("a finding");
    assert_eq!(first.id, "busy-wait", "{findings:?}");
    assert!(
        first
            .carriers
            .iter()
            .any(|c| c.contains("client 127.0.0.2 "))
            && !first
                .carriers
                .iter()
                .any(|c| c.contains("client 127.0.0.1 ")),
        "busy-wait names the slow clients only: {:?}",
        first.carriers
    );

    let (record, answered) = attached_over(&server, fast_only);
    assert_eq!(answered, 2 * 60);
    let findings = diagnose(&record);
    assert!(
        findings.iter().all(|f| f.id != "busy-wait"),
        "fast clients only: {findings:?}"
    );
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
    assert!(request(server.port, FAST) > 0);
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
    assert!(request(server.port, FAST) > 0, "the server still serves");
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

/// `run --pid` against a server that has clients of its own: a test client (not reqcost) makes
/// a known number of requests from 127.0.0.3 while reqcost's main phase runs. The record's
/// per-request figures divide the phase's CPU by every request the server served, and the
/// other clients' traffic is named with its size, in the record and the summary.
#[test]
fn run_pid_divides_by_every_request_served_and_names_the_other_traffic() {
    let _alone = machine_alone();
    let server = testbed_running("clean");
    let scratch = TempDir::new("run-pid-others");
    let record_path = scratch.join("run.json");
    let url = format!("gopher://127.0.0.1:{}/", server.port);
    let pid = server.pid().to_string();
    let stage_file = scratch.join("stages");
    let mut child = Command::new(env!("CARGO_BIN_EXE_reqcost"))
        .args(["run", "--url", &url, "--pid", &pid, "--duration", "5s"])
        .args(["--rate", "40", "--no-slow-phase", "-o"])
        .arg(&record_path)
        .env("REQCOST_STAGE_FILE", &stage_file)
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("reqcost runs");
    let mut stderr = BufReader::new(child.stderr.take().expect("piped"));
    let announced = said_before_sending(&mut stderr);
    assert!(
        announced.contains("main 5.0 s") && !announced.contains("warmup"),
        "what reqcost will send, no warm-up for a running server: {announced}"
    );
    assert!(
        wait_for_stage(&stage_file, "phase main", child.id()),
        "reqcost ended before its main phase"
    );
    let other = Reader {
        source: Ipv4Addr::new(127, 0, 0, 3),
        bytes_per_s: None,
    };
    const OTHERS: u64 = 2 * 20;
    let received: Vec<usize> = (0..OTHERS).map(|_| request(server.port, other)).collect();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert!(received.iter().all(|&n| n > 0));

    let record = load_record(&record_path).unwrap();
    let main = record.main_phase().unwrap();
    let served = main.requests.as_ref().expect("per-request accounting");
    let others = main.other_traffic.expect("other traffic");
    assert!(main.client.ok > 0);
    assert_eq!(others.requests, OTHERS, "{others:?}");
    assert_eq!(served.requests, main.client.ok + OTHERS, "{served:?}");
    assert_eq!(main.units(), served.requests as f64);
    let from_3 = served
        .by_client
        .iter()
        .find(|c| c.name == "127.0.0.3")
        .expect("the other client's row");
    assert_eq!(from_3.requests, OTHERS);
    assert_eq!(others.bytes_in, Some(OTHERS * 2), "one CRLF each");
    let bytes_out: usize = received.iter().sum();
    assert_eq!(others.bytes_out, Some(bytes_out as u64));
    let cpu_ns = main.server.cpu.as_ref().unwrap().total_ns as f64;
    let per_request_us = main.per_request.cpu_total_us.unwrap();
    let expected = cpu_ns / 1000.0 / served.requests as f64;
    assert!(
        (per_request_us - expected).abs() < expected * 1e-9,
        "{per_request_us} µs per request; phase CPU / requests served = {expected} µs"
    );
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains(&format!(
            "others       {OTHERS} requests ({} B in, ",
            OTHERS * 2
        )) && summary.contains(&format!(
            "from the server's other clients besides reqcost's {}",
            main.client.ok
        )),
        "{summary}"
    );
}

/// The `reqcost will send` line `run --pid` prints before sending anything.
fn said_before_sending(stderr: &mut impl BufRead) -> String {
    first_line_where(stderr, |line| {
        line.starts_with("reqcost will send")
            .then(|| line.to_string())
    })
    .unwrap_or_else(|seen| panic!("reqcost ended before saying what it would send: {seen}"))
}
