//! The eBPF probes' syscall counts against `strace -f -c`, the ground truth here.
//!
//! strace attaches to a running testbed server, `reqcost run --pid` measures N requests, strace
//! detaches. strace's window is wider than reqcost's phase by a fixed amount (reqcost's
//! readiness connection, the wait the server is blocked in at both ends), so two sessions with
//! different N are compared by difference: the extra calls cancel, and what remains must be
//! equal call for call. Needs root (eBPF and ptrace), like the probes.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};

use crate::util::*;
use reqcost_record::{RequestStats, RunRecord};
use reqcost_testkit::{free_port, TempDir};

struct Session {
    /// Calls per syscall in strace's window.
    strace: BTreeMap<String, u64>,
    /// The record reqcost wrote for the same workload.
    record: RunRecord,
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Starts `cmd` and waits for its first line on stderr, which must contain `expect`.
fn started_saying(cmd: &mut Command, expect: &str) -> Child {
    let mut child = cmd
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?} starts (scripts/bootstrap installs it): {e}"));
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains(expect), "{cmd:?}: {line}");
    child
}

/// One server, one strace, one `reqcost run --pid` of `n` gopher requests on one connection.
fn session(server: &str, n: u64) -> Session {
    let scratch = TempDir::new(&format!("probes-{server}-{n}"));
    let port = free_port();
    let cmd = testbed_server(server, port);
    // The server's one line on stderr says it listens.
    let mut srv = started_saying(Command::new(&cmd[0]).args(&cmd[1..]), "listening");

    let counts = scratch.join("strace.txt");
    let mut strace = started_saying(
        Command::new("strace")
            .args(["-f", "-c", "-o"])
            .arg(&counts)
            .args(["-p", &srv.id().to_string()]),
        "attached",
    );

    let record_path = scratch.join("run.json");
    let url = format!("gopher://127.0.0.1:{port}/0/1k.txt");
    let count = n.to_string();
    let out = reqcost(&[
        "run",
        "--url",
        &url,
        "--pid",
        &srv.id().to_string(),
        "-n",
        &count,
        "-c",
        "1",
        "--warmup",
        "0",
        "--no-slow-phase",
        "--no-sample",
        // strace counts every request the server answers: without this, a short phase is sent
        // a second time unprobed for its CPU (docs/kernel-stats.md), and strace sees it twice.
        "--probes-full-time",
        "-o",
        record_path.to_str().unwrap(),
    ]);
    // SIGINT makes strace detach and write its table.
    unsafe { libc::kill(strace.id() as i32, libc::SIGINT) };
    let status = strace.wait().unwrap();
    kill(&mut srv);
    assert!(out.status.success(), "{server}: {}", stderr(&out));
    // strace re-raises the SIGINT it handled once its table is written.
    assert!(
        status.success() || status.signal() == Some(libc::SIGINT),
        "strace failed: {status}"
    );
    let record = load_record(&record_path).expect("record saved");
    let text = std::fs::read_to_string(&counts).unwrap();
    Session {
        strace: parse_strace_c(&text),
        record,
    }
}

/// `strace -c`'s table: syscall name → calls.
fn parse_strace_c(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter(|l| !l.starts_with('%') && !l.starts_with('-'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // % time, seconds, usecs/call, calls, [errors,] syscall
            if f.len() < 5 || f.last() == Some(&"total") {
                return None;
            }
            Some((f.last()?.to_string(), f[3].parse().ok()?))
        })
        .collect()
}

fn kernel_counts(record: &RunRecord) -> BTreeMap<String, u64> {
    let main = record.main_phase().expect("main phase");
    assert!(
        !main.missing.contains_key("kernel"),
        "probes did not run: {:?}",
        main.missing
    );
    let k = main.server.kernel.as_ref().expect("kernel figures");
    k.syscalls
        .iter()
        .map(|s| (s.name.clone(), s.count))
        .collect()
}

fn difference(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> BTreeMap<String, i64> {
    a.keys()
        .chain(b.keys())
        .map(|k| {
            let d = *b.get(k).unwrap_or(&0) as i64 - *a.get(k).unwrap_or(&0) as i64;
            (k.clone(), d)
        })
        .filter(|(_, d)| *d != 0)
        .collect()
}

#[test]
fn syscall_counts_per_request_equal_strace() {
    // Alone, as it ran when it was its own test binary: the counts must match call for call.
    let _alone = machine_alone();
    for server in ["clean", "small-writes"] {
        let (n_a, n_b) = (100, 300);
        let a = session(server, n_a);
        let b = session(server, n_b);
        let strace_diff = difference(&a.strace, &b.strace);
        let probes_diff = difference(&kernel_counts(&a.record), &kernel_counts(&b.record));
        assert_eq!(
            probes_diff,
            strace_diff,
            "{server}: calls for {} more requests, probes (left) vs strace (right)",
            n_b - n_a
        );
        // And per request: reqcost's own per-request figures are strace's difference / 200.
        for (name, d) in &strace_diff {
            let per_strace = *d as f64 / (n_b - n_a) as f64;
            let main = b.record.main_phase().unwrap();
            let per_probes = main.per_request.syscalls.get(name).copied().unwrap_or(0.0);
            assert_eq!(main.client.ok, n_b);
            assert!(
                (per_probes - per_strace).abs() < 1e-9,
                "{server}: {name} {per_probes} per request, strace says {per_strace}"
            );
        }
        assert!(strace_diff.get("write").copied().unwrap_or(0) >= (n_b - n_a) as i64);
    }
}

#[test]
fn strace_table_parses() {
    let text = "% time     seconds  usecs/call     calls    errors syscall\n\
        ------ ----------- ----------- --------- --------- ----------------\n \
        31.39    0.005179          25       200           write\n \
        7.04    0.001162           5       200       200 openat\n\
        ------ ----------- ----------- --------- --------- ----------------\n\
        100.00    0.016501          10      1606       200 total\n";
    let t = parse_strace_c(text);
    assert_eq!(t.len(), 2);
    assert_eq!(t["write"], 200);
    assert_eq!(t["openat"], 200);
}

/// A Python server forking a child per connection, every process mapping libssl (`import
/// ssl`) and none calling it: the first child makes the probes take libssl's uprobes off each
/// process and put them on the file (pid -1), and every later fork has the links' thread walk
/// the tree again, while the drain goes on taking the request events. Every connection must
/// be seen and no event dropped. It holds the fork path; it does not show the drain's
/// independence from the links: with one process probed at the start, the code before the
/// links' thread passed it too (a few hundred connections fill no ring buffer). Each
/// connection is one request whichever process closes first: a child often serves its
/// connection and closes before the parent has closed its copy, and its request was dropped
/// with the copy a launcher hands over (about 40 % of them, counted as connections without a
/// request).
#[test]
fn a_server_forking_per_connection_loses_no_request_event() {
    let handle = "\x20   def handle(self):\n\
                  \x20       self.rfile.readline()\n\
                  \x20       self.wfile.write(b'iok\\r\\n.\\r\\n')\n";
    let stats = forking_python_server_counts("fork-per-connection", "gopher", handle, 300);
    assert_eq!(stats.connections, 300, "{stats:?}");
    assert_eq!(stats.no_request, 0, "{stats:?}");
}

/// A Python server forking a child per connection, every process mapping libssl (`import
/// ssl`) and none calling it, each child serving its connection's HTTP requests kept alive:
/// 20 000 requests, more request events than the ring buffer holds (about 14 000), on 8
/// connections forked at the start. Each fork has the TLS links' thread walk the tree, attach
/// libssl's uprobes file-wide and close the per-process ones (each close waits for an RCU grace
/// period, seconds in all on a loaded machine). Were that done on the thread that drains the
/// request events, the ring buffer would fill and events would be lost: a sleep of 10 s put in
/// the drain's hand-off of the fork count (`TlsWorker::forked`) made this test count 13 797 of
/// the 20 000 requests, 6 203 events dropped (the 13 797 too: a full ring buffer). The
/// code before the links' thread passes it on a quiet machine: its closes there took less than
/// the server needs to fill the ring buffer (about 3.6 s at its 3 800 requests a second).
#[test]
fn forks_of_a_server_mapping_libssl_never_stall_the_drain() {
    let handle = "\x20   def handle(self):\n\
                  \x20       while True:\n\
                  \x20           if not self.rfile.readline():\n\
                  \x20               return\n\
                  \x20           while self.rfile.readline() not in (b'\\r\\n', b''):\n\
                  \x20               pass\n\
                  \x20           self.wfile.write(b'HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok')\n";
    forking_python_server_counts("fork-keepalive", "http", handle, 20_000);
}

/// Runs a Python `ForkingTCPServer` (every process mapping libssl through `import ssl`, none
/// calling it) whose handler is `handle`, with `requests` requests on 8 connections and the
/// probes on throughout; checks that every request was answered and counted and no event was
/// dropped, and returns the server side's figures.
fn forking_python_server_counts(
    tag: &str,
    scheme: &str,
    handle: &str,
    requests: u32,
) -> RequestStats {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port(tag);
    let script = format!(
        "import socketserver, ssl\n\
         class H(socketserver.StreamRequestHandler):\n\
         {handle}\
         class S(socketserver.ForkingTCPServer):\n\
         \x20   allow_reuse_address = True\n\
         \x20   request_queue_size = 128\n\
         S(('127.0.0.1', {port}), H).serve_forever()\n"
    );
    let script = scratch.write("server.py", script.as_bytes());
    let url = format!("{scheme}://127.0.0.1:{port}/");
    let n = requests.to_string();
    let args = [
        "--url",
        &url,
        "-n",
        &n,
        "-c",
        "8",
        "--warmup",
        "0",
        "--probes-full-time",
        "--no-slow-phase",
        "--no-sample",
    ];
    let server = [PYTHON.to_string(), script.display().to_string()];
    let (out, record) = run_saved(&scratch, &args, &server);
    assert!(out.status.success(), "{tag}: {}", stderr(&out));
    let record = record.expect("record saved");
    let main = record.main_phase().unwrap();
    let stats = main.requests.clone().expect("per-request figures");
    assert_eq!(main.client.ok, u64::from(requests), "{tag}");
    assert_eq!(stats.events_dropped, 0, "{tag}: {stats:?}");
    assert_eq!(stats.requests, u64::from(requests), "{tag}: {stats:?}");
    stats
}

/// Debian's PostgreSQL 15, forking a backend per connection and mapping libssl and libgnutls
/// in every process without calling them, under pgbench through `--load`: a connection per
/// transaction (`-C`), 1 000 transactions of `SELECT 1`. No event is dropped; the requests are
/// the Queries, one per transaction; the SSLRequest, startup packet and Terminate of each
/// transaction's connection and of pgbench's first one are its set-up, apart. No TLS library
/// is said to carry plaintext.
#[test]
fn postgresql_under_pgbench_with_a_connection_per_transaction_drops_no_event() {
    const TRANSACTIONS: u64 = 1_000;
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("postgresql");
    let server = postgresql(&scratch, port);
    let sql = scratch.write("select1.sql", b"SELECT 1;\n");
    let load = format!(
        "pgbench -h 127.0.0.1 -p {port} -U postgres -n -C -c 2 -t {} -f {} postgres",
        TRANSACTIONS / 2,
        sql.display()
    );
    let url = format!("tcp://127.0.0.1:{port}/");
    let args = ["--url", &url, "--load", &load, "--load-once", "--no-sample"];
    let (out, record) = run_saved(&scratch, &args, &server);
    assert!(out.status.success(), "{}", stderr(&out));
    let record = record.expect("record saved");
    let main = record.main_phase().unwrap();
    let stats = main.requests.as_ref().expect("per-request figures");
    assert_eq!(stats.events_dropped, 0, "{stats:?}");
    assert_eq!(stats.connections, TRANSACTIONS + 1, "{stats:?}");
    assert_eq!(stats.requests, TRANSACTIONS, "{stats:?}");
    assert_eq!(stats.setup_turns, 3 * (TRANSACTIONS + 1), "{stats:?}");
    let notes = record.notes.join("\n");
    assert!(!notes.contains("TLS plaintext read"), "{notes}");
    for lib in ["libssl.so.3", "libgnutls.so.30"] {
        assert!(
            record
                .notes
                .iter()
                .any(|n| n.starts_with("TLS library mapped but never called") && n.contains(lib)),
            "{notes}"
        );
    }
}
