//! Requests as the MySQL protocol defines them (MariaDB's and MySQL's client packets): the
//! server's greeting and the client's handshake the connection's set-up, each answered command
//! a request, COM_QUERY classed by statement verb and table, a prepared statement's executes by
//! the text it was prepared with on its connection. The packets are those MariaDB 10.11's
//! clients (libmariadb: mysqlslap, sysbench) were seen sending.

use std::collections::BTreeMap;

use reqcost_analysis::requests::wire::{Protocol, Turn, Wire};
use reqcost_analysis::requests::{RequestHead, RequestTally, TallyOptions};
use reqcost_record::{RequestEvent, RequestStats};
use reqcost_testkit::request_event;

/// A packet: 3-byte little-endian length, sequence id, payload.
fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = len.to_le_bytes()[..3].to_vec();
    out.push(seq);
    out.extend_from_slice(payload);
    out
}

fn command(code: u8, body: &[u8]) -> Vec<u8> {
    let mut payload = vec![code];
    payload.extend_from_slice(body);
    packet(0, &payload)
}

fn query(sql: &str) -> Vec<u8> {
    command(0x03, sql.as_bytes())
}

fn prepare(sql: &str) -> Vec<u8> {
    command(0x16, sql.as_bytes())
}

/// COM_STMT_EXECUTE of statement `id`: flags, iteration count, then (here) no parameters.
fn execute(id: u32) -> Vec<u8> {
    let mut body = id.to_le_bytes().to_vec();
    body.extend_from_slice(&[0, 1, 0, 0, 0]);
    command(0x17, &body)
}

fn close(id: u32) -> Vec<u8> {
    command(0x19, &id.to_le_bytes())
}

fn quit() -> Vec<u8> {
    command(0x01, b"")
}

/// mysqlslap's handshake response (libmariadb 3.3): capabilities 0x80bfa28c, maximum packet
/// size, utf8mb4, 19 reserved zero bytes and MariaDB's 4 extended capability bytes, the user,
/// its (empty) auth data, the database, the auth plugin.
fn handshake_response() -> Vec<u8> {
    let mut p = vec![0x8c, 0xa2, 0xbf, 0x80, 0, 0, 0x10, 0, 0x2d];
    p.extend_from_slice(&[0; 19]);
    p.extend_from_slice(&[0x1d, 0, 0, 0]);
    p.extend_from_slice(b"bench\0\0bench\0mysql_native_password\0");
    packet(1, &p)
}

fn ssl_request() -> Vec<u8> {
    let mut p = vec![0x8c, 0xaa, 0xbf, 0x80, 0, 0, 0x10, 0, 0x2d];
    p.extend_from_slice(&[0; 23]);
    packet(1, &p)
}

fn head_of(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.len().min(128)]
}

fn wire(bytes: &[u8], known: Option<Protocol>) -> Option<Wire<'_>> {
    Wire::parse(head_of(bytes), bytes.len() as u64, known)
}

fn label(bytes: &[u8], known: Option<Protocol>) -> String {
    RequestHead::parse_turn(head_of(bytes), bytes.len() as u64, "tcp", known).label()
}

const MYSQL: Option<Protocol> = Some(Protocol::MySql);

#[test]
fn queries_are_classed_by_verb_and_table_on_any_connection() {
    let sql = query("SELECT c FROM sbtest1 WHERE id BETWEEN 5 AND 10");
    for known in [None, MYSQL] {
        assert_eq!(label(&sql, known), "SELECT sbtest1");
        assert_eq!(wire(&sql, known).unwrap().protocol, Protocol::MySql);
    }
    assert_eq!(
        label(&query("INSERT INTO t1 VALUES (1)"), None),
        "INSERT t1"
    );
    assert_eq!(label(&prepare("BEGIN"), None), "PREPARE BEGIN");
    assert_eq!(
        label(&prepare("SELECT c FROM sbtest1 WHERE id=?"), None),
        "PREPARE SELECT sbtest1"
    );
    assert_eq!(label(&command(0x0e, b""), None), "COM_PING");
    assert_eq!(label(&command(0x02, b"bench"), None), "COM_INIT_DB");
    assert_eq!(label(&execute(3), None), "(statement 3)");
}

#[test]
fn handshake_authentication_and_quit_are_set_up() {
    for bytes in [handshake_response(), ssl_request()] {
        let w = wire(&bytes, None).expect("recognised without a known connection");
        assert_eq!(w.turn, Turn::Setup(Protocol::MySql));
        assert_eq!(label(&bytes, None), "(mysql set-up)");
    }
    // An auth switch response continues the handshake's sequence: set-up on a known connection,
    // not recognised on another.
    let auth = packet(3, &[0x5a; 20]);
    assert_eq!(
        wire(&auth, MYSQL).unwrap().turn,
        Turn::Setup(Protocol::MySql)
    );
    assert_eq!(wire(&auth, None), None);
    assert!(wire(&quit(), None).unwrap().is_setup());
    // sysbench closes its statements one by one, then quits: no answer to any of them.
    let closes: Vec<u8> = (1..=7).flat_map(close).chain(quit()).collect();
    assert!(wire(&closes, MYSQL).unwrap().is_setup());
    // A handshake with its reserved bytes set is not one.
    let mut odd = handshake_response();
    odd[4 + 9] = 1;
    assert_eq!(wire(&odd, None), None);
}

#[test]
fn closes_before_a_command_leave_it_the_request() {
    let turn: Vec<u8> = close(4).into_iter().chain(prepare("COMMIT")).collect();
    let w = wire(&turn, MYSQL).unwrap();
    assert_eq!(w.turn, Turn::Prepare(b"COMMIT"));
    assert!(!w.pipelined);
}

#[test]
fn commands_in_one_turn_are_a_pipeline_and_one_query_of_many_statements_is_not() {
    let two: Vec<u8> = query("SELECT 1")
        .into_iter()
        .chain(query("SELECT 2"))
        .collect();
    assert!(wire(&two, MYSQL).unwrap().pipelined);
    let multi = query("UPDATE t SET a = 1; SELECT a FROM t");
    let w = wire(&multi, MYSQL).unwrap();
    assert!(!w.pipelined);
    assert_eq!(label(&multi, MYSQL), "UPDATE t");
}

/// A command over 16 MiB: a packet of 0xffffff bytes, continued by packets of the next sequence
/// ids: one request, classed by its first bytes.
#[test]
fn a_command_over_16_mib_is_one_request() {
    let mut head = vec![0xff, 0xff, 0xff, 0, 0x03];
    head.extend_from_slice(b"INSERT INTO blobs VALUES ('");
    head.resize(128, b'x');
    let bytes_in = 4 + 0xff_ffff + 4 + 10;
    let w = Wire::parse(&head, bytes_in, None).unwrap();
    assert_eq!(w.turn, Turn::Query(&head[5..]));
    assert!(!w.pipelined);
    // Longer than its length says the turn read: not this protocol.
    assert_eq!(Wire::parse(&head, 200, None), None);
}

#[test]
fn broken_framing_is_unparsed_on_a_known_connection_and_not_recognised_elsewhere() {
    let mut bad = query("SELECT 1");
    bad[0] += 3;
    assert_eq!(label(&bad, MYSQL), "(unparsed mysql)");
    assert_ne!(wire(&bad, None).map(|w| w.protocol), MYSQL);
    let unknown_command = command(0x42, b"abc");
    assert_eq!(label(&unknown_command, MYSQL), "(unparsed mysql)");
    assert_eq!(wire(&unknown_command, None), None);
    assert_eq!(label(b"GET / HTTP/1.1\r\n\r\n", None), "GET /");
}

/// Every prefix of a valid turn, read as the whole turn, is classed as the whole one, unparsed,
/// or set-up (a prefix holding closes only): never another class.
#[test]
fn a_truncated_turn_is_never_another_class() {
    let turns = [
        (query("SELECT c FROM sbtest1 WHERE id=1"), "SELECT sbtest1"),
        (prepare("DELETE FROM t2 WHERE a=?"), "PREPARE DELETE t2"),
        (execute(9), "(statement 9)"),
        (
            close(2).into_iter().chain(query("COMMIT")).collect(),
            "COMMIT",
        ),
    ];
    for (bytes, class) in &turns {
        for n in 1..=bytes.len() {
            let got = label(&bytes[..n], MYSQL);
            assert!(
                got == *class || got == "(unparsed mysql)" || got == "(mysql set-up)",
                "{n} of {} bytes of {class:?}: {got:?}",
                bytes.len()
            );
        }
        assert_eq!(label(bytes, MYSQL), *class);
    }
}

fn event(bytes: &[u8], conn_id: u64, seq: u32, cpu_us: u64) -> RequestEvent {
    RequestEvent {
        conn_id,
        seq,
        closed: false,
        cpu_ns: cpu_us * 1000,
        bytes_in: bytes.len() as u64,
        bytes_out: 11,
        head: head_of(bytes).to_vec(),
        ..request_event("", "10.0.0.1")
    }
}

/// A sysbench connection: the greeting (the server writes first, nothing read), the handshake,
/// the statements prepared in order (the server numbers them from 1), `runs` transactions of
/// executes, then closes and COM_QUIT.
fn sysbench_connection(conn_id: u64, runs: u32) -> Vec<RequestEvent> {
    let statements = [
        "SELECT c FROM sbtest1 WHERE id=?",
        "BEGIN",
        "COMMIT",
        "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?",
    ];
    let mut turns = vec![Vec::new(), handshake_response()];
    turns.extend(statements.iter().map(|s| prepare(s)));
    for _ in 0..runs {
        turns.extend([execute(2), execute(1), execute(1), execute(4), execute(3)]);
    }
    turns.push((1..=4).flat_map(close).chain(quit()).collect());
    let mut events: Vec<RequestEvent> = turns
        .iter()
        .enumerate()
        .map(|(seq, t)| event(t, conn_id, seq as u32, 20))
        .collect();
    events.last_mut().unwrap().closed = true;
    events
}

fn stats_of(events: &[RequestEvent]) -> RequestStats {
    let mut tally = RequestTally::new(TallyOptions::default());
    for ev in events {
        tally.add(ev);
    }
    tally.finish(1_000_000_000, 0, 0)
}

fn classes(stats: &RequestStats) -> BTreeMap<&str, u64> {
    stats
        .by_class
        .iter()
        .map(|g| (g.name.as_str(), g.requests))
        .collect()
}

#[test]
fn executes_take_the_class_of_the_statement_their_connection_prepared_under_that_number() {
    let events: Vec<RequestEvent> = (0..3).flat_map(|c| sysbench_connection(c, 10)).collect();
    let s = stats_of(&events);
    let expected = BTreeMap::from([
        ("PREPARE SELECT sbtest1", 6),
        ("PREPARE BEGIN", 3),
        ("PREPARE COMMIT", 3),
        ("SELECT sbtest1", 3 * 10 * 3),
        ("BEGIN", 30),
        ("COMMIT", 30),
    ]);
    assert_eq!(classes(&s), expected, "{s:?}");
    assert_eq!(s.requests, 3 * (4 + 10 * 5));
    // Greeting, handshake, closes with COM_QUIT.
    assert_eq!(s.setup_turns, 3 * 3);
    assert_eq!(s.setup_cpu_ns, 3 * 3 * 20_000);
    assert_eq!(s.connections, 3);
    assert_eq!(
        (s.unparsed_requests, s.pipelined_turns, s.no_request),
        (0, 0, 0)
    );
}

/// A connection first seen after its handshake (an attach) does not know how many statements
/// it prepared before: its executes are classed by number, never by a guessed text; so are a
/// connection's after COM_RESET_CONNECTION.
#[test]
fn executes_are_classed_by_number_where_the_numbering_is_not_known() {
    let mut events = sysbench_connection(1, 1);
    events.drain(..2);
    let s = stats_of(&events);
    assert_eq!(classes(&s)["(statement 1)"], 2, "{s:?}");
    assert!(!classes(&s).contains_key("SELECT sbtest1"), "{s:?}");

    let mut events = sysbench_connection(2, 1);
    let last = events.len() - 1;
    events.insert(last, event(&command(0x1f, b""), 2, 0, 5));
    events.insert(last + 1, event(&execute(1), 2, 0, 5));
    let s = stats_of(&events);
    assert_eq!(classes(&s)["COM_RESET_CONNECTION"], 1, "{s:?}");
    assert_eq!(classes(&s)["(statement 1)"], 1, "{s:?}");
}
