//! Requests as the protocol defines them, on Debian's servers under their own benchmark
//! clients through `--load`: PostgreSQL's statements under pgbench, Redis' commands under
//! redis-benchmark, MariaDB's under mysqlslap and sysbench, and memcached's under testbed's
//! memcache_load.py and memcslap, counted as the client sent them, classed by verb and table or
//! by command name, the connection's set-up apart.

use std::collections::BTreeMap;
use std::process::Command;

use crate::attach::{attach, end_window};
use crate::util::*;
use reqcost_record::RequestStats;
use reqcost_testkit::{command, Server, TempDir};

/// Runs `load` against `server` on `port` once (`--load-once`) and returns the main phase's
/// per-request figures, after checking that nothing was dropped and every class is printable.
fn served(tag: &str, port: u16, load: &str, server: &[String]) -> (RequestStats, String) {
    let scratch = reqcost_testkit::TempDir::new(tag);
    let url = format!("tcp://127.0.0.1:{port}/");
    let args = ["--url", &url, "--load", load, "--load-once", "--no-sample"];
    let (out, record) = run_saved(&scratch, &args, server);
    assert!(out.status.success(), "{tag}: {}", stderr(&out));
    let record = record.expect("record saved");
    let stats = record
        .main_phase()
        .unwrap()
        .requests
        .clone()
        .expect("per-request figures");
    assert_eq!(stats.events_dropped, 0, "{tag}: {stats:?}");
    for row in &stats.by_class {
        assert!(
            !row.name.chars().any(char::is_control),
            "{tag}: {:?}",
            row.name
        );
    }
    (stats, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn classes(stats: &RequestStats) -> BTreeMap<&str, u64> {
    stats
        .by_class
        .iter()
        .map(|g| (g.name.as_str(), g.requests))
        .collect()
}

/// What pgbench's built-in scripts send on its first connection before the transactions:
/// the scale (`select count(*) from pgbench_branches`) and a look at pgbench_accounts'
/// partitions (a query on `pg_catalog.pg_class`).
fn pgbench_own_queries() -> [(&'static str, u64); 2] {
    [
        ("SELECT pgbench_branches", 1),
        ("SELECT pg_catalog.pg_class", 1),
    ]
}

/// `pgbench -n FLAGS -c CLIENTS -t (TRANSACTIONS / CLIENTS)` on a fresh PostgreSQL with
/// pgbench's tables: the server's request figures, run as `tag`.
fn pgbench(tag: &str, flags: &str, transactions: u64, clients: u64) -> RequestStats {
    let (scratch, port) = scratch_and_port(tag);
    let server = postgresql_with_pgbench_tables(&scratch, port);
    let load = format!(
        "pgbench -h 127.0.0.1 -p {port} -U postgres -n {flags} -c {clients} -t {} postgres",
        transactions / clients
    );
    served(tag, port, &load, &server).0
}

/// pgbench's select-only script (`-S`) with a connection per transaction (`-C`): one request
/// per statement it sent, classed `SELECT pgbench_accounts`; each connection's SSLRequest,
/// startup packet and Terminate are its set-up, three per connection, no request.
#[test]
fn postgresql_select_only_with_a_connection_per_transaction_counts_each_query() {
    const TRANSACTIONS: u64 = 500;
    let _shared = machine_shared();
    let stats = pgbench("pg-select", "-S -C", TRANSACTIONS, 2);
    let mut expected: BTreeMap<&str, u64> = pgbench_own_queries().into();
    expected.insert("SELECT pgbench_accounts", TRANSACTIONS);
    assert_eq!(classes(&stats), expected, "{stats:?}");
    assert_eq!(stats.requests, TRANSACTIONS + 2, "{stats:?}");
    assert_eq!(stats.connections, TRANSACTIONS + 1, "{stats:?}");
    assert_eq!(stats.setup_turns, 3 * (TRANSACTIONS + 1), "{stats:?}");
    assert!(stats.setup_cpu_ns > 0, "{stats:?}");
    assert_eq!((stats.unparsed_requests, stats.pipelined_turns), (0, 0));
}

/// The classes of the statements of pgbench's default script (TPC-B like), one each per
/// transaction.
const TPCB_STATEMENTS: [&str; 7] = [
    "BEGIN",
    "UPDATE pgbench_accounts",
    "SELECT pgbench_accounts",
    "UPDATE pgbench_tellers",
    "UPDATE pgbench_branches",
    "INSERT pgbench_history",
    "END",
];

/// pgbench's default script (TPC-B like) on pooled connections: its seven statements per
/// transaction each counted and classed by verb and table.
#[test]
fn postgresql_tpcb_counts_every_statement_by_verb_and_table() {
    const TRANSACTIONS: u64 = 300;
    let _shared = machine_shared();
    let stats = pgbench("pg-tpcb", "", TRANSACTIONS, 2);
    let mut expected: BTreeMap<&str, u64> = pgbench_own_queries().into();
    for statement in TPCB_STATEMENTS {
        expected.insert(statement, TRANSACTIONS);
    }
    assert_eq!(classes(&stats), expected, "{stats:?}");
    assert_eq!(stats.requests, 7 * TRANSACTIONS + 2, "{stats:?}");
    // pgbench's first connection and one per client.
    assert_eq!(stats.connections, 3, "{stats:?}");
    assert_eq!(stats.setup_turns, 3 * 3, "{stats:?}");
}

/// pgbench's default script with prepared statements (`-M prepared`): each client prepares
/// the seven statements once (a Parse and Sync each) and then runs them by name; every run
/// and every prepare is a request of the class of the statement's text, not its name.
#[test]
fn postgresql_prepared_statements_are_classed_by_the_text_they_were_prepared_with() {
    const TRANSACTIONS: u64 = 200;
    const CLIENTS: u64 = 2;
    let _shared = machine_shared();
    let stats = pgbench("pg-prepared", "-M prepared", TRANSACTIONS, CLIENTS);
    let mut expected: BTreeMap<&str, u64> = pgbench_own_queries().into();
    for statement in TPCB_STATEMENTS {
        expected.insert(statement, TRANSACTIONS + CLIENTS);
    }
    assert_eq!(classes(&stats), expected, "{stats:?}");
    assert_eq!(stats.setup_turns, 3 * (CLIENTS + 1), "{stats:?}");
}

/// A pgbench script of three statements in one pipeline (`\startpipeline`, extended protocol):
/// each transaction's statements reach the server in one write, ended by one Sync; the probes
/// count each Execute in it, so each statement is a request.
#[test]
fn postgresql_pipelined_statements_count_one_each() {
    const TRANSACTIONS: u64 = 200;
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("pg-pipeline");
    let server = postgresql(&scratch, port);
    let script = scratch.write(
        "pipeline.sql",
        b"\\startpipeline\nSELECT 1;\nSELECT 2;\nSELECT 3;\n\\endpipeline\n",
    );
    let load = format!(
        "pgbench -h 127.0.0.1 -p {port} -U postgres -n -M extended -c 2 -t {} -f {} postgres",
        TRANSACTIONS / 2,
        script.display()
    );
    let (stats, _) = served("pg-pipeline", port, &load, &server);
    assert_eq!(
        classes(&stats),
        BTreeMap::from([("SELECT", 3 * TRANSACTIONS)]),
        "{stats:?}"
    );
    assert_eq!(stats.pipelined_turns, 0, "{stats:?}");
}

/// redis-server on loopback without persistence.
fn redis_server(port: u16) -> Vec<String> {
    let port = port.to_string();
    [
        "redis-server",
        "--port",
        &port,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    .map(String::from)
    .to_vec()
}

/// redis-benchmark's SET, GET and LPUSH: each command one request of its name, as many as the
/// client sent; its two CONFIG GETs, sent in one write, two requests.
#[test]
fn redis_commands_are_counted_and_classed_by_name() {
    const EACH: u64 = 1_000;
    let _shared = machine_shared();
    let port = reqcost_testkit::free_port();
    let load =
        format!("redis-benchmark -h 127.0.0.1 -p {port} -t set,get,lpush -n {EACH} -c 10 -q");
    let (stats, _) = served("redis", port, &load, &redis_server(port));
    let expected = BTreeMap::from([("CONFIG", 2), ("GET", EACH), ("LPUSH", EACH), ("SET", EACH)]);
    assert_eq!(classes(&stats), expected, "{stats:?}");
    assert_eq!((stats.unparsed_requests, stats.pipelined_turns), (0, 0));
    assert_eq!(stats.setup_turns, 0);
}

/// redis-benchmark with 16 commands per write (`-P 16`): the probes count the commands in each
/// read, so each is a request, as many per class as the client sent, and nothing is said to
/// be counted short.
#[test]
fn redis_pipelined_commands_count_one_each() {
    const EACH: u64 = 1_600;
    let _shared = machine_shared();
    let port = reqcost_testkit::free_port();
    let load =
        format!("redis-benchmark -h 127.0.0.1 -p {port} -t set,get,lpush -n {EACH} -c 10 -P 16 -q");
    let (stats, summary) = served("redis-pipelined", port, &load, &redis_server(port));
    let expected = BTreeMap::from([("CONFIG", 2), ("GET", EACH), ("LPUSH", EACH), ("SET", EACH)]);
    assert_eq!(classes(&stats), expected, "{stats:?}");
    assert_eq!(stats.pipelined_turns, 0, "{stats:?}");
    assert!(!summary.contains("count!"), "{summary}");
}

/// `reqcost attach --port` over `server` while `load` (a shell command line) runs to its end:
/// the window's per-request figures, checked as [`served`] checks them.
fn attached_over(tag: &str, server: &Server, load: &str) -> RequestStats {
    let scratch = TempDir::new(tag);
    let record_path = scratch.join("live.json");
    let port = server.port.to_string();
    let (mut child, _stderr, _) = attach(&["--port", &port, "-o", record_path.to_str().unwrap()]);
    let client = Command::new("sh")
        .args(["-c", load])
        .output()
        .expect("sh runs");
    let status = end_window(&mut child);
    assert!(
        client.status.success(),
        "{tag}: {load}: {}",
        stderr(&client)
    );
    assert!(status.success(), "{tag}: reqcost attach failed: {status}");
    let record = load_record(&record_path).expect("record saved");
    let stats = record
        .main_phase()
        .unwrap()
        .requests
        .clone()
        .expect("per-request figures");
    assert_eq!(stats.events_dropped, 0, "{tag}: {stats:?}");
    stats
}

/// The PostgreSQL of [`postgresql_with_pgbench_tables`], running.
fn postgresql_running(scratch: &TempDir, port: u16) -> Server {
    let argv = postgresql_with_pgbench_tables(scratch, port);
    postgresql_server(scratch, &argv, port, TempDir::new("pg-attach-server"))
}

/// `attach` to a running PostgreSQL under pgbench's select-only script with a connection per
/// transaction: the same count, classes and set-up as a launched run.
#[test]
fn attach_to_postgresql_counts_each_query_and_its_set_up_apart() {
    const TRANSACTIONS: u64 = 300;
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("pg-attach");
    let server = postgresql_running(&scratch, port);
    let load = format!(
        "pgbench -h 127.0.0.1 -p {port} -U postgres -n -S -C -c 2 -t {} postgres",
        TRANSACTIONS / 2
    );
    let stats = attached_over("pg-attach", &server, &load);
    let mut expected: BTreeMap<&str, u64> = pgbench_own_queries().into();
    expected.insert("SELECT pgbench_accounts", TRANSACTIONS);
    assert_eq!(classes(&stats), expected, "{stats:?}");
    assert_eq!(stats.setup_turns, 3 * (TRANSACTIONS + 1), "{stats:?}");
}

/// `attach` to a running redis-server under redis-benchmark's pipelines of 16: every command
/// counted, by name.
#[test]
fn attach_to_redis_counts_pipelined_commands_one_each() {
    const EACH: u64 = 1_600;
    let _shared = machine_shared();
    let port = reqcost_testkit::free_port();
    let server = Server::start(
        command(&redis_server(port)),
        port,
        TempDir::new("redis-attach"),
    );
    let load =
        format!("redis-benchmark -h 127.0.0.1 -p {port} -t set,get,lpush -n {EACH} -c 10 -P 16 -q");
    let stats = attached_over("redis-attach", &server, &load);
    let expected = BTreeMap::from([("CONFIG", 2), ("GET", EACH), ("LPUSH", EACH), ("SET", EACH)]);
    assert_eq!(classes(&stats), expected, "{stats:?}");
}

/// memcached on loopback, TCP only, one worker thread.
fn memcached_server(port: u16) -> Vec<String> {
    let port = port.to_string();
    [
        "memcached",
        "-p",
        &port,
        "-l",
        "127.0.0.1",
        "-U",
        "0",
        "-u",
        "nobody",
        "-t",
        "1",
    ]
    .map(String::from)
    .to_vec()
}

/// Connections of testbed's memcached client, KEYS keys each.
const MEMCACHED_CONNECTIONS: u64 = 2;
const MEMCACHED_KEYS: u64 = 200;

/// testbed's memcached client on `port`: each connection sets its keys, then gets them,
/// `flags` saying how many commands per write and whether the sets ask for an answer.
fn memcache_load(port: u16, flags: &str) -> String {
    format!(
        "python3 {} --port {port} --connections {MEMCACHED_CONNECTIONS} --keys {MEMCACHED_KEYS} {flags}",
        testbed().join("clients").join("memcache_load.py").display()
    )
}

/// memcached's `set` and `get`, one command per write and eight per write: each command one
/// request of its name (a `get` of several keys would be one too), the data block after a
/// `set`'s line (which holds `get x` and a CRLF) none.
#[test]
fn memcached_commands_are_counted_and_classed_by_name() {
    const EACH: u64 = MEMCACHED_CONNECTIONS * MEMCACHED_KEYS;
    let _shared = machine_shared();
    for pipeline in [1, 8] {
        let port = reqcost_testkit::free_port();
        let load = memcache_load(port, &format!("--pipeline {pipeline}"));
        let (stats, summary) = served("memcached", port, &load, &memcached_server(port));
        let expected = BTreeMap::from([("get", EACH), ("set", EACH)]);
        assert_eq!(
            classes(&stats),
            expected,
            "--pipeline {pipeline}: {stats:?}"
        );
        assert_eq!((stats.unparsed_requests, stats.pipelined_turns), (0, 0));
        assert!(!summary.contains("count!"), "{summary}");
    }
}

/// Debian's memcslap (libmemcached-tools) `--test=get`: its initial load's sets and its two
/// threads' gets, each one request of its name, as many as it reports (read by the `count!`
/// check, which stays quiet), and each thread's connection's `quit`.
#[test]
fn memcached_under_memcslap_counts_what_it_reports() {
    let _shared = machine_shared();
    let port = reqcost_testkit::free_port();
    let load = format!(
        "memcslap --servers=127.0.0.1:{port} --concurrency=2 --execute-number=100 --test=get"
    );
    let (stats, summary) = served("memcslap", port, &load, &memcached_server(port));
    let expected = BTreeMap::from([("get", 200), ("quit", 2), ("set", 100)]);
    assert_eq!(classes(&stats), expected, "{stats:?}");
    assert!(!summary.contains("count!"), "{summary}");
}

/// `set … noreply` gets no answer, so the sets of a connection and its first write of gets are
/// one turn: every command is counted from the reads, the turn's under its first command's
/// class, so `set` holds each connection's first eight gets.
#[test]
fn memcached_noreply_commands_are_counted_from_the_reads() {
    const EACH: u64 = MEMCACHED_CONNECTIONS * MEMCACHED_KEYS;
    const PIPELINE: u64 = 8;
    let _shared = machine_shared();
    let port = reqcost_testkit::free_port();
    let load = memcache_load(port, &format!("--pipeline {PIPELINE} --noreply"));
    let (stats, _) = served("memcached-noreply", port, &load, &memcached_server(port));
    let riding = MEMCACHED_CONNECTIONS * PIPELINE;
    let expected = BTreeMap::from([("get", EACH - riding), ("set", EACH + riding)]);
    assert_eq!(classes(&stats), expected, "{stats:?}");
    assert_eq!(stats.requests, 2 * EACH, "{stats:?}");
}

/// `attach` to a running memcached under the client's pipelines of eight: every command
/// counted, by name.
#[test]
fn attach_to_memcached_counts_pipelined_commands_one_each() {
    const EACH: u64 = MEMCACHED_CONNECTIONS * MEMCACHED_KEYS;
    let _shared = machine_shared();
    let port = reqcost_testkit::free_port();
    let server = Server::start(
        command(&memcached_server(port)),
        port,
        TempDir::new("memcached-attach"),
    );
    let load = memcache_load(port, "--pipeline 8");
    let stats = attached_over("memcached-attach", &server, &load);
    let expected = BTreeMap::from([("get", EACH), ("set", EACH)]);
    assert_eq!(classes(&stats), expected, "{stats:?}");
}

/// A Go net/http server that answers, flushes and works on (testbed/go/flush_then_work.go)
/// under h2load's kept-alive HTTP/1.1: its background one-byte read takes each next request's
/// `G`, the rest (`ET / HTTP/1.1`) coming in the next read. The head is completed from that
/// read, so every request is `GET /` (none `G`), one per request h2load sent.
#[test]
fn go_net_http_one_byte_reads_leave_no_one_letter_class() {
    const REQUESTS: u64 = 400;
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("go-http");
    let binary = scratch.join("flush_then_work");
    let source = testbed().join("go").join("flush_then_work.go");
    let built = Command::new(reqcost_testkit::go())
        .arg("build")
        .arg("-o")
        .args([&binary, &source])
        .output()
        .expect("go runs");
    assert!(built.status.success(), "go build: {}", stderr(&built));
    let load = format!("h2load --h1 -n {REQUESTS} -c 2 http://127.0.0.1:{port}/");
    let server = [
        binary.display().to_string(),
        "--port".into(),
        port.to_string(),
    ];
    let (stats, summary) = served("go-http", port, &load, &server);
    assert_eq!(
        classes(&stats),
        BTreeMap::from([("GET /", REQUESTS)]),
        "{stats:?}"
    );
    assert_eq!(stats.requests, REQUESTS, "{stats:?}");
    assert!(!summary.contains("count!"), "{summary}");
}

/// testbed's byte-reads server reads each request one byte per recv(2): its head is completed
/// read by read up to 16 bytes, enough for the method and path (`G` before), one request per
/// request reqcost's client completed.
#[test]
fn one_byte_reads_of_a_request_make_one_request_of_its_method_and_path() {
    const REQUESTS: u64 = 300;
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("byte-reads-head");
    let url = format!("http://127.0.0.1:{port}/1k.txt");
    let n = REQUESTS.to_string();
    let args = [
        "--url",
        &url,
        "-n",
        &n,
        "-c",
        "2",
        "--no-sample",
        "--no-slow-phase",
        "--probes-full-time",
    ];
    let (out, record) = run_saved(&scratch, &args, &testbed_server("byte-reads", port));
    assert!(out.status.success(), "{}", stderr(&out));
    let main = record.expect("record saved").main_phase().unwrap().clone();
    let stats = main.requests.expect("per-request figures");
    assert_eq!(main.client.ok, REQUESTS);
    assert_eq!(
        classes(&stats),
        BTreeMap::from([("GET /1k.txt", REQUESTS)]),
        "{stats:?}"
    );
}

/// The table mysqlslap's query reads, made with the server.
const MYSQLSLAP_TABLE: &str = "CREATE TABLE t1 (a INT PRIMARY KEY, b INT); \
                               INSERT INTO t1 VALUES (1, 10), (2, 20);";

/// mysqlslap with one query of its own (`--query`) over `--concurrency` connections, each
/// iteration on fresh ones, and its control connection: one request per query it sent (its
/// report's clients times queries per client, times the iterations), classed by verb and
/// table; each connection's greeting, handshake and COM_QUIT are its set-up, no request.
#[test]
fn mariadb_under_mysqlslap_counts_each_query_and_its_set_up_apart() {
    const QUERIES: u64 = 400;
    const ITERATIONS: u64 = 3;
    const CLIENTS: u64 = 2;
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("mysqlslap");
    let server = mariadb(&scratch, port, MYSQLSLAP_TABLE, None);
    let load = format!(
        "mysqlslap --no-defaults -h 127.0.0.1 -P {port} -u bench --create-schema=bench \
         --concurrency={CLIENTS} --iterations={ITERATIONS} --number-of-queries={QUERIES} \
         --query='SELECT b FROM t1 WHERE a = 2'"
    );
    let (stats, summary) = served("mysqlslap", port, &load, &server);
    assert_eq!(
        classes(&stats),
        BTreeMap::from([("SELECT t1", ITERATIONS * QUERIES)]),
        "{stats:?}"
    );
    let connections = 1 + ITERATIONS * CLIENTS;
    assert_eq!(stats.connections, connections, "{stats:?}");
    assert_eq!(stats.setup_turns, 3 * connections, "{stats:?}");
    assert!(stats.setup_cpu_ns > 0, "{stats:?}");
    assert_eq!((stats.unparsed_requests, stats.pipelined_turns), (0, 0));
    assert!(!summary.contains("count!"), "{summary}");
}

/// sysbench's oltp_read_only on its table of `rows` rows, made by `sysbench prepare` with the
/// server: its command line for `action` with `flags`.
fn sysbench(port: u16, action: &str, flags: &str) -> String {
    format!(
        "sysbench oltp_read_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port={port} \
         --mysql-user=bench --mysql-db=bench --tables=1 --table-size=1000 {flags} {action}"
    )
}

/// What sysbench's oltp_read_only sends over `threads` connections for `events` transactions:
/// each connection prepares its seven statements once (five SELECTs on sbtest1, BEGIN, COMMIT)
/// and each transaction executes BEGIN, ten point selects, four range selects, COMMIT; the
/// executes are classed by the text their statement was prepared with.
fn sysbench_classes(events: u64, threads: u64) -> BTreeMap<&'static str, u64> {
    BTreeMap::from([
        ("PREPARE SELECT sbtest1", 5 * threads),
        ("PREPARE BEGIN", threads),
        ("PREPARE COMMIT", threads),
        ("SELECT sbtest1", 14 * events),
        ("BEGIN", events),
        ("COMMIT", events),
    ])
}

/// sysbench's oltp_read_only (prepared statements) bounded by `--events`: every execute a
/// request of its statement's class, as many as sysbench's report counts queries, plus the
/// prepares; each connection's closes and COM_QUIT, greeting and handshake its set-up.
#[test]
fn mariadb_under_sysbench_classes_executes_by_their_prepared_text() {
    const EVENTS: u64 = 300;
    const THREADS: u64 = 2;
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("sysbench");
    let server = mariadb(&scratch, port, "", Some(&sysbench(port, "prepare", "")));
    let load = sysbench(
        port,
        "run",
        &format!("--threads={THREADS} --events={EVENTS} --time=0"),
    );
    let (stats, summary) = served("sysbench", port, &load, &server);
    assert_eq!(
        classes(&stats),
        sysbench_classes(EVENTS, THREADS),
        "{stats:?}"
    );
    assert_eq!(stats.connections, THREADS, "{stats:?}");
    assert_eq!(stats.setup_turns, 3 * THREADS, "{stats:?}");
    assert_eq!((stats.unparsed_requests, stats.pipelined_turns), (0, 0));
    assert!(!summary.contains("count!"), "{summary}");
}

/// `attach` to a running MariaDB under the same sysbench run: the same classes and set-up.
#[test]
fn attach_to_mariadb_classes_sysbench_executes_by_their_prepared_text() {
    const EVENTS: u64 = 200;
    const THREADS: u64 = 2;
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("sysbench-attach");
    let argv = mariadb(&scratch, port, "", Some(&sysbench(port, "prepare", "")));
    let server = Server::start(command(&argv), port, TempDir::new("mariadb-attach"));
    let load = sysbench(
        port,
        "run",
        &format!("--threads={THREADS} --events={EVENTS} --time=0"),
    );
    let stats = attached_over("sysbench-attach", &server, &load);
    assert_eq!(
        classes(&stats),
        sysbench_classes(EVENTS, THREADS),
        "{stats:?}"
    );
    assert_eq!(stats.setup_turns, 3 * THREADS, "{stats:?}");
}

/// A client that writes four `DO 1` queries at a time before reading their answers
/// (testbed/clients/mysql_pipeline.py): MariaDB reads each packet's header and then its body
/// with their exact lengths, answering each command before it reads the next, so every query
/// is a turn of its own and a request, and no turn holds a pipeline.
#[test]
fn mariadb_reads_pipelined_queries_one_turn_each() {
    const ROUNDS: u64 = 150;
    const DEPTH: u64 = 4;
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("mysql-pipeline");
    let server = mariadb(&scratch, port, "", None);
    let client = testbed().join("clients").join("mysql_pipeline.py");
    let load = format!("{PYTHON} {} {port} {ROUNDS} {DEPTH}", client.display());
    let (stats, _) = served("mysql-pipeline", port, &load, &server);
    assert_eq!(
        classes(&stats),
        BTreeMap::from([("DO", ROUNDS * DEPTH)]),
        "{stats:?}"
    );
    assert_eq!(stats.setup_turns, 3, "{stats:?}");
    assert_eq!((stats.unparsed_requests, stats.pipelined_turns), (0, 0));
}
