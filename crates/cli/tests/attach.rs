//! `reqcost attach` (issue 14): a testbed server's live traffic from a client that is not
//! reqcost, counted on the server side; nothing of reqcost left in the kernel after SIGKILL.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::fd::FromRawFd;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::util::*;
use reqcost_analysis::findings::diagnose;
use reqcost_record::RunRecord;
use reqcost_testkit::{command, free_port, Server, TempDir};

/// `reqcost attach ARGS` started in the background; returns once it says the probes are on,
/// with the server's pid from that line.
pub fn attach(args: &[&str]) -> (Child, BufReader<ChildStderr>, u32) {
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

/// How a test client reads its responses, and the loopback address it connects from (which
/// names it in per-client figures).
#[derive(Clone, Copy)]
struct Reader {
    source: Ipv4Addr,
    /// None: as fast as it can; else paced at this rate through a small receive buffer, as the
    /// load generator's slow clients read.
    bytes_per_s: Option<u64>,
}

const FAST: Reader = Reader {
    source: Ipv4Addr::LOCALHOST,
    bytes_per_s: None,
};

/// The receive buffer of a paced reader: small, so that the server's send queue fills.
const SLOW_RCVBUF: libc::c_int = 8 * 1024;

/// A TCP connection to `port` on 127.0.0.1 from `source`, with `rcvbuf` set before connecting
/// (it bounds the window the peer announces, which is fixed at connect time).
fn connect_from(source: Ipv4Addr, port: u16, rcvbuf: Option<libc::c_int>) -> TcpStream {
    let sockaddr = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a socket this function owns; every pointer is to a local
    // of the size given with it.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
        let stream = TcpStream::from_raw_fd(fd);
        if let Some(size) = rcvbuf {
            let set = libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
            assert_eq!(set, 0, "SO_RCVBUF: {}", io::Error::last_os_error());
        }
        let local = sockaddr(source, 0);
        let bound = libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len);
        assert_eq!(bound, 0, "bind {source}: {}", io::Error::last_os_error());
        let peer = sockaddr(Ipv4Addr::LOCALHOST, port);
        let connected = libc::connect(fd, (&peer as *const libc::sockaddr_in).cast(), len);
        assert_eq!(connected, 0, "connect: {}", io::Error::last_os_error());
        stream
    }
}

/// One gopher request for the menu, read as `reader` reads; the bytes received.
fn request(port: u16, reader: Reader) -> usize {
    let rcvbuf = reader.bytes_per_s.map(|_| SLOW_RCVBUF);
    let mut s = connect_from(reader.source, port, rcvbuf);
    s.write_all(b"\r\n").unwrap();
    // A paced reader reads a twentieth of a second's worth at a time, never ahead of its rate.
    let chunk = reader
        .bytes_per_s
        .map_or(64 * 1024, |rate| (rate / 20).max(512) as usize);
    let mut buf = vec![0u8; chunk];
    let started = Instant::now();
    let mut total = 0;
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            return total;
        }
        total += n;
        if let Some(rate) = reader.bytes_per_s {
            let due = Duration::from_secs_f64(total as f64 / rate as f64);
            thread::sleep(due.saturating_sub(started.elapsed()));
        }
    }
}

/// Live traffic from a client that is not reqcost: one thread per list, each sending its
/// requests in order; the requests answered.
fn live_traffic(port: u16, threads: Vec<Vec<Reader>>) -> usize {
    threads
        .into_iter()
        .map(|readers| {
            thread::spawn(move || {
                readers
                    .into_iter()
                    .map(|reader| usize::from(request(port, reader) > 0))
                    .sum::<usize>()
            })
        })
        .map(|h| h.join().unwrap())
        .sum()
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

/// `reqcost attach --port` over `server` for a few seconds while `threads` of live traffic
/// run; the record, and the requests the client had answered.
fn attached_over(server: &Server, threads: Vec<Vec<Reader>>) -> (RunRecord, usize) {
    let scratch = TempDir::new("attach-live");
    let record_path = scratch.join("live.json");
    let (mut child, _stderr, _) = attach(&[
        "--port",
        &server.port.to_string(),
        "--duration",
        "4s",
        "-o",
        record_path.to_str().unwrap(),
    ]);
    let answered = live_traffic(server.port, threads);
    let status = child.wait().unwrap();
    assert!(status.success(), "reqcost attach failed: {status}");
    (RunRecord::load(&record_path).unwrap(), answered)
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
