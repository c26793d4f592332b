//! Any client, any transport: `--load CMD` drives the server, units of work are counted on the
//! server side.

use std::collections::BTreeMap;

use crate::util::*;
use reqcost_record::{FdKind, Outcome, RunRecord, UdpStats, Unit};
use reqcost_testkit::TempDir;

/// `reqcost run --load CMD --port PORT` against the clean gopher server, saved in `scratch`.
fn run_load(
    scratch: &TempDir,
    port: u16,
    cmd: &str,
    args: &[&str],
) -> (std::process::Output, RunRecord) {
    run_load_on("clean", scratch, port, cmd, args)
}

/// [`run_load`] against testbed server `server`.
fn run_load_on(
    server: &str,
    scratch: &TempDir,
    port: u16,
    cmd: &str,
    args: &[&str],
) -> (std::process::Output, RunRecord) {
    let port_arg = port.to_string();
    let mut argv = vec!["--load", cmd, "--port", &port_arg, "--no-sample"];
    argv.extend_from_slice(args);
    let (out, record) = run_saved(scratch, &argv, &testbed_server(server, port));
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
    assert_eq!(main.units(), 60.0);
    assert_eq!(main.client.requests, 0, "reqcost sent nothing");
}

/// A client of one request costs a millisecond or two: the kernel's few ticks of it (each
/// charged whole to the mode it interrupted) cannot split it into user and system time, and
/// the summary says so rather than print 0 µs of one of them.
#[test]
fn a_short_clients_user_system_split_is_unknown_not_zero() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("load-short");
    let cmd = format!("exec 3<>/dev/tcp/127.0.0.1/{port}; printf '\\r\\n' >&3; cat <&3 >/dev/null");
    let (out, record) = run_load(&scratch, port, &format!("bash -c \"{cmd}\""), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let served = record.phases[0]
        .requests
        .as_ref()
        .expect("per-request accounting");
    assert_eq!(served.requests, 1, "{served:?}");
    let client = reqcost_analysis::document::Analysis::of(&record)
        .client
        .expect("the client's cost");
    assert_eq!((client.cpu_user_us, client.cpu_system_us), (None, None));
    let summary = String::from_utf8_lossy(&out.stdout);
    let line = summary
        .lines()
        .find(|l| l.starts_with("  client       the --load command's tree: CPU per request "))
        .unwrap_or_else(|| panic!("no client line in {summary}"));
    assert!(line.contains("(user/system split unknown: "), "{line}");
    assert!(!line.contains("user 0"), "{line}");
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

/// A UDP client in Python: `ROUNDS` rounds of 4 datagrams of varied sizes to `PORT`, each round
/// waiting for the 4 echoes (first byte `s`: echoed with sendto, `m`: with sendmmsg).
const UDP_CLIENT: &str = "import socket, sys
port, rounds = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(('127.0.0.1', port))
s.settimeout(5)
for r in range(rounds):
    batch = [(b'm' if i % 2 else b's') + bytes(100 * (i + 1) + r) for i in range(4)]
    for d in batch:
        s.send(d)
    for _ in batch:
        s.recv(65536)
";

/// Per UDP syscall in an `strace -f` log: (calls that returned, datagrams, bytes).
fn strace_udp(log: &str) -> BTreeMap<String, (u64, u64, u64)> {
    let mut calls: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for line in log.lines() {
        let Some((name, rest)) = line.split_once('(') else {
            continue;
        };
        let name = name.split_whitespace().last().unwrap_or_default();
        let Some(ret) = rest
            .rsplit_once(" = ")
            .and_then(|(_, r)| r.trim().parse::<u64>().ok())
        else {
            continue;
        };
        let (datagrams, bytes) = if name.ends_with("mmsg") {
            let lens = rest.split("msg_len=").skip(1).map(|s| {
                s.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
                    .parse::<u64>()
                    .unwrap()
            });
            (ret, lens.sum())
        } else {
            (1, ret)
        };
        let e = calls.entry(name.to_string()).or_default();
        *e = (e.0 + 1, e.1 + datagrams, e.2 + bytes);
    }
    calls
}

#[test]
fn udp_datagrams_and_bytes_match_strace_call_for_call() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("udp-echo");
    let client = scratch.write("client.py", UDP_CLIENT.as_bytes());
    let strace_log = scratch.join("strace.txt");
    let mut server: Vec<String> = [
        "strace",
        "-f",
        "-qq",
        "-e",
        "signal=none",
        "-e",
        "trace=sendto,recvfrom,sendmsg,recvmsg,sendmmsg,recvmmsg",
        "-o",
    ]
    .map(String::from)
    .to_vec();
    server.push(strace_log.display().to_string());
    server.extend(testbed_server("udp-echo", port));
    let cmd = format!("python3 {} {port} 40", client.display());
    let port_arg = port.to_string();
    // Run once: strace counts the server's whole life, and a second, unprobed run of the
    // command would be in its log too.
    let (out, record) = run_saved(
        &scratch,
        &[
            "--load",
            &cmd,
            "--port",
            &port_arg,
            "--no-sample",
            "--load-once",
        ],
        &server,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let record = record.expect("record saved");
    let k = record.phases[0].server.kernel.as_ref().expect("probes on");
    let log = std::fs::read_to_string(&strace_log).unwrap();
    let mut truth = strace_udp(&log);
    // The server waits in recvmmsg from its start: that first call began before the probes
    // were attached, so they cannot count it. It returned what had arrived when it woke, the
    // first round or part of it on a busy machine: strace says how much.
    let (_, first_datagrams, first_bytes) = log
        .lines()
        .find_map(|line| strace_udp(line).remove("recvmmsg"))
        .expect("a first recvmmsg");
    let mmsg = truth.get_mut("recvmmsg").expect("recvmmsg calls");
    *mmsg = (mmsg.0 - 1, mmsg.1 - first_datagrams, mmsg.2 - first_bytes);
    let probes: BTreeMap<String, (u64, u64)> =
        k.io.iter()
            .map(|s| {
                assert_eq!(
                    s.fd_kind == FdKind::Udp,
                    s.syscall != "write" && s.syscall != "read"
                );
                (s.syscall.clone(), (s.calls, s.bytes))
            })
            .collect();
    for (name, (calls, _, bytes)) in &truth {
        assert_eq!(
            probes.get(name),
            Some(&(*calls, *bytes)),
            "{name}: {truth:?} {probes:?}"
        );
    }
    let sum = |names: [&str; 2]| {
        names.iter().fold((0, 0), |(d, b), n| {
            let t = truth.get(*n).copied().unwrap_or_default();
            (d + t.1, b + t.2)
        })
    };
    let (sent, received) = (sum(["sendto", "sendmmsg"]), sum(["recvmmsg", "recvfrom"]));
    assert_eq!(
        k.udp,
        UdpStats {
            datagrams_sent: sent.0,
            bytes_sent: sent.1,
            datagrams_received: received.0,
            bytes_received: received.1,
        }
    );
    assert_eq!(sent.0, 160, "every datagram echoed");
}

/// nginx in the foreground with one worker, HTTP/2 without TLS (h2c) on `port`, serving `www/`
/// of `dir`: its command line.
fn nginx_h2c(dir: &TempDir, port: u16) -> Vec<String> {
    let d = dir.path().display();
    let conf = format!(
        "worker_processes 1; daemon off; pid {d}/nginx.pid; error_log {d}/error.log;
         events {{ worker_connections 1024; }}
         http {{ access_log off; client_body_temp_path {d}/tmp;
                 server {{ listen 127.0.0.1:{port} http2; root {d}/www; }} }}"
    );
    let path = dir.write("nginx.conf", conf.as_bytes());
    [
        "nginx",
        "-e",
        "stderr",
        "-p",
        &d.to_string(),
        "-c",
        path.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

/// `requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, ...` of h2load's output.
fn h2load_succeeded(output: &[String]) -> u64 {
    let line = output
        .iter()
        .find(|l| l.starts_with("requests:"))
        .unwrap_or_else(|| panic!("h2load's summary in {output:?}"));
    let field = line
        .split(", ")
        .find(|f| f.ends_with(" succeeded"))
        .unwrap();
    field.trim_end_matches(" succeeded").parse().unwrap()
}

#[test]
fn h2load_over_http2_counts_the_requests_reqcost_counts() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("h2load");
    www_1k(&scratch);
    let url = format!("http://127.0.0.1:{port}/");
    let cmd = format!("h2load -n 2000 -c {{c}} -m 1 {url}1k.txt");
    let (out, record) = run_saved(
        &scratch,
        &["--load", &cmd, "-c", "4", "--url", &url, "--no-sample"],
        &nginx_h2c(&scratch, port),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let record = record.expect("record saved");
    let load = record.workload.load.as_ref().unwrap();
    assert_eq!(h2load_succeeded(&load.output_tail), 2000, "{load:?}");
    let served = record.phases[0]
        .requests
        .as_ref()
        .expect("per-request accounting");
    // Each connection's preface and its GOAWAY before the close are HTTP/2 connection frames,
    // not requests.
    assert_eq!((served.requests, served.connections), (2000, 4));
}

/// The payload sizes of the UDP datagrams from `port` that the clients received, from the
/// `strace -e recvmsg` logs in `dir` whose names start with `prefix`.
fn received_from(dir: &std::path::Path, prefix: &str, port: u16) -> Vec<u64> {
    let from_server = format!("htons({port})");
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .flat_map(|e| {
            let log = std::fs::read_to_string(e.path()).unwrap();
            log.lines()
                .filter(|l| l.starts_with("recvmsg(") && l.contains(&from_server))
                .filter_map(|l| l.rsplit_once(" = ")?.1.trim().parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// UDP datagrams the kernel dropped on arrival since boot, machine-wide (`InErrors` of
/// /proc/net/snmp: a full receive buffer among them).
fn udp_drops() -> u64 {
    let snmp = std::fs::read_to_string("/proc/net/snmp").unwrap();
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp: "));
    let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
    let at = names
        .split_whitespace()
        .position(|n| n == "InErrors")
        .unwrap();
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

/// seeds/004 with Debian's ngtcp2: gtlsserver (QUIC over UDP) driven by gtlsclient at 5, 10
/// and 15 connections. Each client runs under strace, which counts the UDP bytes it received:
/// the server-side count must be at least theirs and within 1 % of it, plus the datagrams the
/// kernel dropped on arrival (sent, never received); its HTTP/3 requests are counted in its
/// libnghttp3, one per stream. Bounded for CI: a 128 KiB file, two
/// streams per connection (about 40 s in all).
#[test]
fn gtlsserver_sweep_counts_per_mib_the_bytes_its_clients_received() {
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port("gtls-sweep");
    let logs = scratch.join("clients");
    std::fs::create_dir_all(&logs).unwrap();
    let client = format!(
        "strace -qq -e trace=recvmsg -e signal=none -o {}/c{{c}}-$i.txt gtlsclient -q \
         --exit-on-all-streams-close -n 2 127.0.0.1 {port} https://127.0.0.1:{port}/128k",
        logs.display()
    );
    let load = format!(
        "pids=''; for i in $(seq {{c}}); do {client} & pids=\"$pids $!\"; done; \
         fail=0; for p in $pids; do wait $p || fail=1; done; exit $fail"
    );
    let server = gtlsserver(&scratch, port, ("128k", 128 << 10));
    let drops_before = udp_drops();
    let sweep = sweep_5_10_15(&load, port, &scratch.join("runs"), &server);
    let dropped = udp_drops() - drops_before;
    let records: Vec<RunRecord> = serde_json::from_value(sweep["records"].clone()).unwrap();
    assert_eq!(records.len(), 3);
    for (c, record) in [5, 10, 15].iter().zip(&records) {
        let main = record.main_phase().unwrap();
        // Its HTTP/3 requests are counted in its libnghttp3: two streams per connection.
        let served = main.requests.as_ref().expect("per-request accounting");
        assert_eq!(served.http3_requests, 2 * *c, "{c}");
        assert_eq!((main.unit, main.units()), (Unit::Request, 2.0 * *c as f64));
        let udp = main.server.kernel.as_ref().expect("probes on").udp;
        let mib = main.units_of(Unit::MiB).unwrap();
        assert!(
            main.per_request.cpu_total_us.is_some_and(|us| us > 0.0),
            "{c}: CPU per request"
        );
        assert!(
            udp.datagrams_sent > 0 && udp.datagrams_received > 0,
            "{c}: {udp:?}"
        );
        assert_eq!(mib, udp.bytes_sent as f64 / (1 << 20) as f64);
        let datagrams = received_from(&logs, &format!("c{c}-"), port);
        let received: u64 = datagrams.iter().sum();
        // A client that strace slows down can let its receive buffer fill: what the kernel
        // dropped there was sent but never received (and QUIC sent it again).
        let lost = dropped * datagrams.iter().max().copied().unwrap_or(0);
        assert!(
            udp.bytes_sent >= received && udp.bytes_sent - received <= received / 100 + lost,
            "{c} connections: server sent {} B, clients received {received} B, \
             {dropped} datagrams dropped on arrival during the sweep",
            udp.bytes_sent
        );
        // Every stream's body reached its client, through QUIC's framing.
        assert!(received >= 2 * c * (128 << 10), "{c}: {received} B");
    }
}

/// An HTTP/1.1 client in Python: `N` keep-alive requests for /200k.bin on one connection to
/// `PORT`. It then sends one byte more (whose segment acknowledges all it received at once),
/// prints the bytes it received, and exits, leaving a child that holds the connection open
/// until reqcost stops the load's tree.
const KEEPALIVE_CLIENT: &str = "import os, signal, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(('127.0.0.1', port))
got = 0
for _ in range(n):
    s.sendall(b'GET /200k.bin HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')
    head = b''
    while not head.endswith(b'\\r\\n\\r\\n'):
        head += s.recv(1)
    length = [int(l.split(b':')[1]) for l in head.split(b'\\r\\n') if l.startswith(b'Content-Length')][0]
    body = 0
    while body < length:
        body += len(s.recv(min(65536, length - body)))
    got += len(head) + length
s.sendall(b'G')
print('bytes=%d' % got, flush=True)
if os.fork() == 0:
    signal.pause()
";

/// Without the probes, a TCP server's bytes come from the kernel's per-socket counters
/// (sock_diag): exactly what its client received, so its CPU per MiB is known.
#[test]
fn without_the_probes_tcp_bytes_come_from_sock_diag() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("sockdiag");
    let client = scratch.write("client.py", KEEPALIVE_CLIENT.as_bytes());
    let cmd = format!("exec python3 {} {port} 20", client.display());
    let (out, record) = run_load_on("keepalive", &scratch, port, &cmd, &["--no-probes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let load = record.workload.load.as_ref().unwrap();
    let received: u64 = load
        .output_tail
        .iter()
        .find_map(|l| l.strip_prefix("bytes="))
        .expect("the client prints what it received")
        .parse()
        .unwrap();
    assert!(received > 20 * 200_000, "{received}");
    let main = record.main_phase().unwrap();
    assert!(main.server.kernel.is_none(), "the probes were off");
    let tcp = main.server.tcp_bytes.as_ref().expect("sock_diag's bytes");
    assert_eq!(tcp.sent, received, "{tcp:?}");
    let request = "GET /200k.bin HTTP/1.1\r\nHost: x\r\n\r\n".len() as u64;
    assert_eq!(tcp.received, 20 * request + 1, "{tcp:?}");
    assert_eq!(tcp.sockets, 1);
    assert_eq!(main.default_unit(), Unit::MiB);
    assert_eq!(main.units_of(Unit::MiB), Some(received as f64 / 1048576.0));
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("CPU per MiB"), "{summary}");
}

/// A UDP server without the probes: no byte count, and the reason says why.
#[test]
fn without_the_probes_a_udp_server_says_why_it_has_no_mib() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("sockdiag-udp");
    let client = testbed().join("build").join("udp-bulk-client");
    let cmd = format!("exec {} --port {port} -c 2 -b 65536", client.display());
    let args = ["--no-probes", "--per", "MiB"];
    let (out, mut record) = run_load_on("udp-bulk-epoll", &scratch, port, &cmd, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let main = record.phases.remove(0);
    assert!(main.server.tcp_bytes.is_none());
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains("no MiB counted: the eBPF probes count them, and they were off; the server's tree had no TCP connection"),
        "{summary}"
    );
}
