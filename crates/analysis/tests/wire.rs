//! Requests as PostgreSQL and Redis define them: recognised from their messages, classed by
//! statement verb and table or command name, the connection's set-up apart, and broken or cut
//! framing counted as unparsed, never classed by guess.

use regex::Regex;
use reqcost_analysis::requests::wire::{Protocol, Turn, Wire};
use reqcost_analysis::requests::{RequestHead, RequestTally, TallyOptions};
use reqcost_record::{RequestEvent, RequestStats};
use reqcost_testkit::request_event;

/// A PostgreSQL frontend message: its type, then its length (counting itself) and body.
fn pg(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn query(sql: &str) -> Vec<u8> {
    pg(b'Q', &[sql.as_bytes(), b"\0"].concat())
}

fn ssl_request() -> Vec<u8> {
    [8u32.to_be_bytes(), 80_877_103u32.to_be_bytes()].concat()
}

fn startup() -> Vec<u8> {
    let params = b"user\0postgres\0database\0postgres\0\0";
    let mut out = (params.len() as u32 + 8).to_be_bytes().to_vec();
    out.extend_from_slice(&(3u32 << 16).to_be_bytes());
    out.extend_from_slice(params);
    out
}

/// Parse (when `text` is given), Bind, Describe, Execute, Sync of statement `name`.
fn extended(name: &str, text: Option<&str>) -> Vec<u8> {
    let name0 = [name.as_bytes(), b"\0"].concat();
    let mut out = Vec::new();
    if let Some(text) = text {
        out.extend(pg(b'P', &[&name0[..], text.as_bytes(), b"\0\0\0"].concat()));
    }
    out.extend(pg(b'B', &[b"\0", &name0[..], b"\0\0\0\0\0\0"].concat()));
    out.extend(pg(b'D', b"P\0"));
    out.extend(pg(b'E', b"\0\0\0\0\0"));
    out.extend(pg(b'S', b""));
    out
}

/// A RESP array of bulk strings, as redis-benchmark and every client library send commands.
fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n{a}\r\n", a.len()).into_bytes());
    }
    out
}

/// The head of a turn that read `bytes`: its first 128.
fn head_of(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.len().min(128)]
}

fn wire(bytes: &[u8], known: Option<Protocol>) -> Option<Wire<'_>> {
    Wire::parse(head_of(bytes), bytes.len() as u64, known)
}

fn label(bytes: &[u8], known: Option<Protocol>) -> String {
    RequestHead::parse_turn(head_of(bytes), bytes.len() as u64, "tcp", known).label()
}

#[test]
fn postgresql_queries_are_classed_by_verb_and_first_table() {
    let cases = [
        (
            "SELECT abalance FROM pgbench_accounts WHERE aid = 42;",
            "SELECT pgbench_accounts",
        ),
        (
            "UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1;",
            "UPDATE pgbench_branches",
        ),
        (
            "INSERT INTO pgbench_history (tid, bid) VALUES (1, 2);",
            "INSERT pgbench_history",
        ),
        ("delete from public.t where x = 1", "DELETE public.t"),
        (
            "  -- a comment\n/* another */ select * FROM \"Odd Name\"",
            "SELECT \"Odd Name\"",
        ),
        ("BEGIN;", "BEGIN"),
        ("END;", "END"),
        ("SELECT 1;", "SELECT"),
        ("SELECT (SELECT 1)", "SELECT"),
        ("", "(empty query)"),
        (";", "(empty query)"),
    ];
    for (sql, class) in cases {
        assert_eq!(label(&query(sql), None), class, "{sql:?}");
    }
}

#[test]
fn postgresql_set_up_and_terminate_are_not_requests() {
    let password = pg(b'p', b"secret\0");
    for bytes in [ssl_request(), startup(), pg(b'X', b""), password] {
        let w = wire(&bytes, None).unwrap_or_else(|| panic!("{bytes:?} not recognised"));
        assert_eq!(w.turn, Turn::Setup(Protocol::Postgres), "{bytes:?}");
        assert!(w.is_setup());
    }
    // The set-up codes with a length that is not theirs are not set-up.
    let mut odd = ssl_request();
    odd[3] = 9;
    assert_eq!(wire(&odd, None), None);
}

#[test]
fn extended_batches_are_classed_by_statement_name_or_parsed_text() {
    assert_eq!(label(&extended("P_0", Some("SELECT 1")), None), "P_0");
    assert_eq!(label(&extended("P_0", None), None), "P_0");
    let unnamed = extended("", Some("UPDATE pgbench_tellers SET tbalance = 0"));
    assert_eq!(label(&unnamed, None), "UPDATE pgbench_tellers");
    assert_eq!(label(&extended("", None), None), "(unnamed statement)");
    let batch = extended("P_1", None);
    assert!(!wire(&batch, None).unwrap().pipelined);
}

#[test]
fn pipelines_count_as_one_and_say_so() {
    let two_queries = [query("SELECT 1"), query("SELECT 2")].concat();
    assert!(wire(&two_queries, None).unwrap().pipelined);
    let two_batches = [extended("a", None), extended("b", None)].concat();
    let w = wire(&two_batches, None).unwrap();
    assert_eq!((w.turn, w.pipelined), (Turn::Prepared(b"a"), true));
    let sixteen: Vec<u8> = (0..16)
        .flat_map(|i| resp(&["SET", &format!("key:{i}"), "xxx"]))
        .collect();
    let w = wire(&sixteen, None).unwrap();
    assert_eq!((w.turn, w.pipelined), (Turn::Command(b"SET"), true));
    assert!(!wire(&resp(&["GET", "k"]), None).unwrap().pipelined);
}

#[test]
fn redis_commands_are_classed_by_name_upper_cased() {
    assert_eq!(label(&resp(&["SET", "key:1", "xxx"]), None), "SET");
    assert_eq!(label(&resp(&["lpush", "mylist", "x"]), None), "LPUSH");
    assert_eq!(label(&resp(&["CONFIG", "GET", "save"]), None), "CONFIG");
    // Inline commands are plain text: read as commands where the connection spoke RESP.
    assert_eq!(label(b"ping\r\n", Some(Protocol::Redis)), "PING");
    assert_eq!(label(b"ping\r\n", None), "ping");
    // A long value cut by the head still names its command.
    let long = resp(&["SET", "k", &"v".repeat(500)]);
    assert_eq!(label(&long, None), "SET");
}

#[test]
fn broken_framing_is_unparsed_on_a_known_connection_and_not_guessed() {
    let broken_resp = b"*3\r\n$3\r\nSETX\r\n".to_vec();
    assert_eq!(label(&broken_resp, None), "(unparsed redis)");
    // A frame whose length runs past what the turn read is cut: not PostgreSQL unless the
    // connection spoke it, then unparsed.
    let mut cut = query("SELECT 1");
    cut.truncate(cut.len() - 3);
    assert_eq!(wire(&cut, None), None);
    assert_eq!(
        label(&cut, Some(Protocol::Postgres)),
        "(unparsed postgresql)"
    );
    let junk = b"\x01\x02\x03\x04\x05\x06".to_vec();
    assert_eq!(
        label(&junk, Some(Protocol::Postgres)),
        "(unparsed postgresql)"
    );
    assert_eq!(label(&junk, None), "(binary)");
}

/// Every prefix of a valid turn, read as the whole turn, is either classed as the whole one or
/// unparsed (or not recognised at all without a known connection): never another class.
#[test]
fn a_truncated_turn_is_never_another_class() {
    let turns: [(Vec<u8>, Protocol, &str); 4] = [
        (
            query("SELECT abalance FROM pgbench_accounts WHERE aid = 7"),
            Protocol::Postgres,
            "SELECT pgbench_accounts",
        ),
        (extended("P_0", Some("SELECT 1")), Protocol::Postgres, "P_0"),
        (
            extended("", Some("INSERT INTO pgbench_history VALUES (1)")),
            Protocol::Postgres,
            "INSERT pgbench_history",
        ),
        (resp(&["LPUSH", "mylist", "xxx"]), Protocol::Redis, "LPUSH"),
    ];
    for (bytes, protocol, class) in &turns {
        let unparsed = format!("(unparsed {})", protocol.name());
        for n in 1..=bytes.len() {
            let got = label(&bytes[..n], Some(*protocol));
            assert!(
                got == *class || got == unparsed,
                "{} of {} bytes of {class:?}: {got:?}",
                n,
                bytes.len()
            );
        }
        assert_eq!(label(bytes, Some(*protocol)), *class);
    }
}

fn event(head: &[u8], conn_id: u64, closed: bool, cpu_us: u64) -> RequestEvent {
    RequestEvent {
        conn_id,
        closed,
        cpu_ns: cpu_us * 1000,
        bytes_in: head.len() as u64,
        head: head_of(head).to_vec(),
        ..request_event("", "10.0.0.1")
    }
}

fn stats_of(events: &[RequestEvent], options: TallyOptions) -> RequestStats {
    let mut tally = RequestTally::new(options);
    for ev in events {
        tally.add(ev);
    }
    tally.finish(1_000_000_000, 0, 0)
}

/// A pgbench `-C` connection: SSLRequest, startup, the query, Terminate (which closes it).
fn pgbench_connection(conn_id: u64, sql: &str) -> Vec<RequestEvent> {
    vec![
        event(&ssl_request(), conn_id, false, 10),
        event(&startup(), conn_id, false, 200),
        event(&query(sql), conn_id, false, 50),
        event(&pg(b'X', b""), conn_id, true, 30),
    ]
}

#[test]
fn a_connection_per_transaction_counts_its_queries_and_its_set_up_apart() {
    let events: Vec<RequestEvent> = (0..10)
        .flat_map(|c| pgbench_connection(c, "SELECT abalance FROM pgbench_accounts WHERE aid = 1"))
        .collect();
    let s = stats_of(&events, TallyOptions::default());
    assert_eq!(s.requests, 10);
    assert_eq!(s.connections, 10);
    assert_eq!((s.setup_turns, s.setup_cpu_ns), (30, 10 * 240_000));
    let classes: Vec<(&str, u64)> = s
        .by_class
        .iter()
        .map(|g| (g.name.as_str(), g.requests))
        .collect();
    assert_eq!(classes, [("SELECT pgbench_accounts", 10)]);
    assert_eq!(s.tallied_cpu_ns, 10 * 290_000);
    assert_eq!((s.unparsed_requests, s.pipelined_turns), (0, 0));
}

/// Once a connection spoke PostgreSQL, a turn whose frames do not chain is unparsed there, and
/// counted so; another connection's same bytes stay `(binary)`.
#[test]
fn a_known_connection_says_unparsed_where_another_says_binary() {
    let junk = b"\x01\x02\x03\x04\x05\x06";
    let mut events = pgbench_connection(1, "BEGIN;");
    events.insert(3, event(junk, 1, false, 5));
    events.push(event(junk, 2, true, 5));
    let s = stats_of(&events, TallyOptions::default());
    let mut classes: Vec<(&str, u64)> = s
        .by_class
        .iter()
        .map(|g| (g.name.as_str(), g.requests))
        .collect();
    classes.sort();
    assert_eq!(
        classes,
        [("(binary)", 1), ("(unparsed postgresql)", 1), ("BEGIN", 1)]
    );
    assert_eq!(s.unparsed_requests, 1);
}

#[test]
fn class_regexes_match_the_protocol_class_text() {
    let events = [
        event(&resp(&["SET", "k", "v"]), 1, false, 10),
        event(&resp(&["GET", "k"]), 1, false, 10),
        event(&resp(&["LPUSH", "l", "v"]), 1, true, 10),
    ];
    let options = TallyOptions {
        classes: vec![("writes".into(), Regex::new("^(SET|LPUSH)$").unwrap())],
        ..TallyOptions::default()
    };
    let s = stats_of(&events, options);
    let mut classes: Vec<(&str, u64)> = s
        .by_class
        .iter()
        .map(|g| (g.name.as_str(), g.requests))
        .collect();
    classes.sort();
    assert_eq!(classes, [("(other)", 1), ("writes", 2)]);
}
