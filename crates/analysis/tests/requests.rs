//! Request events → tally → the phase's per-request figures: classification of each protocol's
//! first bytes, percentiles, shares, the key cap and the `(other)` row; and the findings that
//! read them (client-sensitive inside one phase).

use regex::Regex;
use reqcost_analysis::findings::diagnose;
use reqcost_analysis::requests::{RequestHead, RequestTally, TallyOptions, OTHER, UNREAD};
use reqcost_record::{
    ClientStats, IoctlStat, KernelStats, Machine, Outcome, PerRequest, Phase, Pinning,
    RequestEvent, RunRecord, ServerTotals, Target, TargetMode, TlsPart, Workload,
};
use reqcost_testkit::request_event;

/// A request of `cpu_us` from `peer` whose server read `head` and wrote `bytes_out` over
/// `wall_ms` (0: no wall time).
fn event(head: &str, peer: &str, cpu_us: u64, bytes_out: u64, wall_ms: u64) -> RequestEvent {
    let first_in_ns = if wall_ms > 0 { 1_000_000_000 } else { 0 };
    RequestEvent {
        cpu_ns: cpu_us * 1000,
        syscalls: 10,
        top_syscalls: vec![("write".into(), 4), ("epoll_wait".into(), 2)],
        bytes_out,
        first_in_ns,
        last_out_ns: first_in_ns + wall_ms * 1_000_000,
        end_ns: first_in_ns + wall_ms * 1_000_000,
        ..request_event(head, peer)
    }
}

fn label(head: &[u8], protocol: &str) -> String {
    RequestHead::parse(head, protocol).label()
}

#[test]
fn gopher_selectors_end_at_cr_lf_or_tab() {
    assert_eq!(label(b"/docs/intro.txt\r\n", "gopher"), "/docs/intro.txt");
    assert_eq!(label(b"/search\tcats\r\n", "gopher"), "/search");
    assert_eq!(label(b"\r\n", "gopher"), "(empty)");
    // On gopher a selector is free text, even one that looks like HTTP.
    assert_eq!(label(b"GET / HTTP/1.0\r\n", "gopher"), "GET / HTTP/1.0");
}

#[test]
fn http_request_lines_lose_their_query() {
    let head = b"GET /search?q=cats&page=2 HTTP/1.1\r\nHost: x\r\n";
    assert_eq!(label(head, "http"), "GET /search");
    let parsed = RequestHead::parse(head, "http");
    assert_eq!(parsed.target(), Some(&b"/search?q=cats&page=2"[..]));
    assert_eq!(
        label(b"POST /api/v1/items HTTP/1.1\r\n", ""),
        "POST /api/v1/items"
    );
    assert_eq!(
        label(b"GET http://example.org/a/b?x HTTP/1.1\r\n", "http"),
        "GET /a/b"
    );
    assert_eq!(label(b"GET /?x=1 HTTP/1.1\r\n", "http"), "GET /");
}

#[test]
fn gemini_urls_give_their_path() {
    let head = b"gemini://example.org/gemlog/2024.gmi?x\r\n";
    assert_eq!(label(head, "gemini"), "/gemlog/2024.gmi");
    assert_eq!(
        RequestHead::parse(head, "gemini").target(),
        Some(&b"gemini://example.org/gemlog/2024.gmi?x"[..])
    );
    assert_eq!(label(b"gemini://example.org\r\n", "tcp"), "/");
}

#[test]
fn tls_and_silence_are_named_not_parsed() {
    let client_hello = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc];
    assert_eq!(label(&client_hello, "gemini"), "(tls)");
    assert_eq!(label(&client_hello, "gopher"), "(tls)");
    assert_eq!(RequestHead::parse(&client_hello, "https").target(), None);
    assert_eq!(label(b"", "http"), "(no request)");
    assert_eq!(label(b"\x01\x02hello\n", "tcp"), "(binary)");
}

/// Every record of a TLS connection is `(tls)`, not only the ClientHello; bytes that are not
/// text never reach a class name as they are.
#[test]
fn class_names_are_always_printable() {
    let app_data = [0x17, 0x03, 0x03, 0x00, 0x45, 0xe3, 0x9b, 0xa7, 0x0d, 0x0a];
    assert_eq!(label(&app_data, "gemini"), "(tls)");
    assert_eq!(label(&[0x15, 0x03, 0x03, 0x00, 0x02], "https"), "(tls)");
    let ciphertext = [0xd0, 0x9f, 0xe3, 0x81, 0x82, 0x1b, 0x5b, 0x32, 0x4a];
    assert_eq!(label(&ciphertext, "gemini"), "(binary)");
    assert_eq!(label(&ciphertext, "gopher"), "(binary)");
    assert_eq!(label(b"caf\xc3\xa9 \xff/x\r\n", "gopher"), "(binary)");
    assert_eq!(label(b"caf\xc3\xa9\r\n", "gopher"), "caf\u{e9}");
    assert_eq!(
        label(b"GET /a\xff\x1b[2J HTTP/1.1\r\n", "http"),
        "GET /a\\xff\\u{1b}[2J"
    );
    let mut tally = RequestTally::new(TallyOptions::default());
    // The second ciphertext is still in flight at the phase's end (a forking server's parent
    // holding a handshake its child has served): not a request, so not one counted on TLS.
    for (head, in_flight) in [
        (&app_data[..], false),
        (&ciphertext, false),
        (&ciphertext, true),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", false),
    ] {
        let mut ev = event("", "192.0.2.1", 10, 100, 0);
        ev.head = head.to_vec();
        ev.bytes_in = head.len() as u64;
        ev.in_flight = in_flight;
        tally.add(&ev);
    }
    let s = tally.finish(30_000, 0, 0);
    assert_eq!((s.tls_ciphertext, s.http2_connections), (1, 1));
    for row in &s.by_class {
        assert!(row.name.chars().all(|c| !c.is_control()), "{:?}", row.name);
    }
}

fn stats_of(events: &[RequestEvent], options: TallyOptions) -> reqcost_record::RequestStats {
    let mut tally = RequestTally::new(options);
    for ev in events {
        tally.add(ev);
    }
    let tallied: u64 = events.iter().map(|e| e.cpu_ns).sum();
    tally.finish(tallied, tallied / 4, 3)
}

#[test]
fn percentiles_and_shares_of_a_known_mix() {
    // 90 cheap requests (100 µs) and 10 dear ones (10 ms), from two clients.
    let mut events = Vec::new();
    for i in 0..90 {
        events.push(event("/small\r\n", "10.0.0.1", 100 + i % 3, 1000, 1));
    }
    for _ in 0..10 {
        events.push(event("/big\r\n", "10.0.0.2", 10_000, 100_000, 1000));
    }
    let options = TallyOptions {
        protocol: "gopher".into(),
        ..TallyOptions::default()
    };
    let s = stats_of(&events, options);
    assert_eq!((s.requests, s.connections, s.no_request), (100, 100, 0));
    assert_eq!(s.events_dropped, 3);
    let d = &s.cpu_per_request;
    assert!((100_000..=103_000).contains(&d.p50), "p50 {}", d.p50);
    assert!((9_900_000..=10_000_000).contains(&d.p99), "p99 {}", d.p99);
    assert_eq!(d.max, 10_000_000);
    // The standard deviation is exact, from the values, not from the histogram's buckets.
    let values: Vec<f64> = (0..90)
        .map(|i| ((100 + i % 3) * 1000) as f64)
        .chain([10_000_000.0; 10])
        .collect();
    let stddev = reqcost_analysis::stats::stddev(&values);
    assert!((d.stddev.unwrap() - stddev).abs() < 1e-6 * stddev, "{d:?}");
    assert_eq!(s.by_class[0].cpu_per_request.stddev, Some(0.0));
    assert_eq!(s.by_class[0].name, "/big");
    assert_eq!(s.by_class[0].requests, 10);
    assert_eq!(s.by_class[1].name, "/small");
    assert_eq!(s.by_client[0].name, "10.0.0.2");
    // Every table splits the tallied CPU; with the unattributed share they make 100 %.
    let unattributed =
        100.0 * s.unattributed_cpu_ns as f64 / (s.attributed_cpu_ns + s.unattributed_cpu_ns) as f64;
    for table in [&s.by_class, &s.by_client, &s.by_speed] {
        let sum: f64 = table.iter().map(|g| g.cpu_share_pct).sum();
        assert!(
            (sum + unattributed - 100.0).abs() < 1e-9,
            "{sum} + {unattributed}"
        );
    }
    assert_eq!(s.by_class[0].syscalls_per_request, 10.0);
    assert_eq!(s.by_class[0].bytes_out_per_request, 100_000.0);
}

#[test]
fn speed_buckets_split_by_bytes_out_per_second_of_wall_time() {
    let events = [
        event("/a\r\n", "10.0.0.1", 50, 10_000, 1000), // 10 kB/s
        event("/a\r\n", "10.0.0.1", 50, 100_000, 1000), // 98 KiB/s
        event("/a\r\n", "10.0.0.3", 50, 100_000, 1),   // 95 MiB/s
        event("/a\r\n", "10.0.0.3", 50, 100_000, 0),   // no wall time
    ];
    let s = stats_of(&events, TallyOptions::default());
    let names: Vec<&str> = s.by_speed.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(
        names,
        ["< 16 KiB/s", "64-256 KiB/s", "≥ 16 MiB/s", "unknown"]
    );
    assert_eq!(s.by_speed[0].clients, ["10.0.0.1"]);
    assert_eq!(s.by_speed[2].clients, ["10.0.0.3"]);
}

#[test]
fn connections_without_a_request_are_not_requests() {
    let mut tail = event("", "10.0.0.1", 7, 0, 0);
    tail.top_syscalls.clear();
    let mut first = event("GET / HTTP/1.1\r\n", "10.0.0.1", 30, 500, 1);
    first.closed = false;
    let mut unread = event("", "10.0.0.1", 5, 500, 1);
    unread.bytes_in = 40;
    let s = stats_of(&[first, tail, unread], TallyOptions::default());
    assert_eq!((s.requests, s.no_request, s.connections), (2, 1, 2));
    let none = s
        .by_class
        .iter()
        .find(|g| g.name == "(no request)")
        .unwrap();
    assert_eq!((none.requests, none.no_request, none.cpu_ns), (0, 1, 7000));
    assert!(s.by_class.iter().any(|g| g.name == UNREAD));
    let client = &s.by_client[0];
    assert_eq!(
        (client.requests, client.no_request, client.cpu_ns),
        (2, 1, 42_000)
    );
    assert_eq!(client.cpu_per_request.max, 30_000);
    assert!(s.costliest.iter().all(|c| c.class != "(no request)"));
}

#[test]
fn classes_match_the_target_first_match_wins() {
    let events = [
        event("GET /api/items?id=3 HTTP/1.1\r\n", "10.0.0.1", 100, 10, 1),
        event("GET /api/static/x.css HTTP/1.1\r\n", "10.0.0.1", 100, 10, 1),
        event("GET /index.html HTTP/1.1\r\n", "10.0.0.1", 100, 10, 1),
        event("\x16\x03\x01", "10.0.0.1", 100, 10, 1),
    ];
    let options = TallyOptions {
        protocol: "http".into(),
        classes: vec![
            ("items".into(), Regex::new(r"^/api/items\?id=").unwrap()),
            ("api".into(), Regex::new("^/api/").unwrap()),
            ("never".into(), Regex::new("^/api/items").unwrap()),
        ],
        ..TallyOptions::default()
    };
    let s = stats_of(&events, options);
    let mut names: Vec<&str> = s.by_class.iter().map(|g| g.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["(other)", "(tls)", "api", "items"]);
}

#[test]
fn tables_keep_the_top_n_and_merge_the_rest() {
    let events: Vec<RequestEvent> = (1..=15)
        .map(|i| {
            event(
                &format!("/page{i}\r\n"),
                &format!("10.0.0.{i}"),
                i * 100,
                10,
                1,
            )
        })
        .collect();
    let options = TallyOptions {
        top_groups: 10,
        ..TallyOptions::default()
    };
    let s = stats_of(&events, options);
    assert_eq!(s.by_class.len(), 11);
    assert_eq!(s.by_class[0].name, "/page15");
    let other = &s.by_class[10];
    assert_eq!((other.name.as_str(), other.requests), (OTHER, 5));
    assert_eq!(other.cpu_ns, (1..=5).sum::<u64>() * 100_000);
    assert_eq!(other.cpu_per_request.max, 500_000);
    assert_eq!(s.by_client.len(), 11);
    assert_eq!((s.classes_over_cap, s.clients_over_cap), (0, 0));
}

#[test]
fn keys_beyond_the_cap_are_counted_under_other() {
    let events: Vec<RequestEvent> = (0..10)
        .map(|i| event(&format!("/p{i}\r\n"), &format!("10.0.1.{i}"), 100, 10, 1))
        .collect();
    let options = TallyOptions {
        key_cap: 4,
        top_groups: 100,
        ..TallyOptions::default()
    };
    let s = stats_of(&events, options);
    assert_eq!(
        (s.key_cap, s.classes_over_cap, s.clients_over_cap),
        (4, 6, 6)
    );
    assert_eq!(s.by_class.len(), 5);
    assert_eq!(s.by_class.last().unwrap().requests, 6);
    assert_eq!(s.by_speed[0].clients.len(), 4);
}

#[test]
fn costliest_requests_come_with_their_evidence() {
    let events: Vec<RequestEvent> = (1..=30)
        .map(|i| event("GET /x?y HTTP/1.1\r\n", "::ffff:192.0.2.7", i, 10, 1))
        .collect();
    let options = TallyOptions {
        costliest: 3,
        ..TallyOptions::default()
    };
    let s = stats_of(&events, options);
    let cpu: Vec<u64> = s.costliest.iter().map(|c| c.cpu_ns).collect();
    assert_eq!(cpu, [30_000, 29_000, 28_000]);
    let top = &s.costliest[0];
    assert_eq!(
        (top.class.as_str(), top.request.as_str()),
        ("GET /x", "GET /x")
    );
    assert_eq!(top.client, "192.0.2.7");
    assert_eq!(top.top_syscalls[0], ("write".to_string(), 4));
    assert_eq!(top.wall_ns, Some(1_000_000));
}

/// A busy-wait polls a slow client's send queue after its last send: its lifetime runs to its
/// last syscall, so a request charged 40 ms of spinning is shown with 50 ms of wall time, not
/// the 1 ms to its last byte out, and leads the costliest list.
#[test]
fn a_request_lives_until_its_last_syscall_past_its_last_send() {
    let spinner = RequestEvent {
        last_ns: 1_000_000_000 + 50_000_000,
        ..event("/big.txt\r\n", "192.0.2.7", 40_000, 200_000, 1)
    };
    assert_eq!(spinner.wall_ns(), Some(50_000_000));
    let quiet = RequestEvent {
        last_ns: 1_000_000_000 + 500_000,
        ..event("/small.txt\r\n", "192.0.2.8", 300, 1_000, 1)
    };
    assert_eq!(quiet.wall_ns(), Some(1_000_000));
    let s = stats_of(&[quiet, spinner], TallyOptions::default());
    let top = &s.costliest[0];
    assert_eq!(
        (top.request.as_str(), top.wall_ns),
        ("/big.txt", Some(50_000_000))
    );
    assert_eq!(s.costliest.len(), 2);
}

/// A phase of 80 fast requests (100 µs, 10 syscalls, 100 kB at ~10 MB/s) from one client and
/// 20 slow ones (10 kB/s) from two others, costing `slow_factor` times as much CPU with
/// `slow_syscalls` each.
fn mixed_phase(slow_factor: u64, slow_syscalls: u32) -> RunRecord {
    record_of(mixed_events(slow_factor, slow_syscalls))
}

/// The events of [`mixed_phase`].
fn mixed_events(slow_factor: u64, slow_syscalls: u32) -> Vec<RequestEvent> {
    let mut events = Vec::new();
    for _ in 0..80 {
        events.push(event("/file\r\n", "10.0.0.1", 100, 100_000, 10));
    }
    for i in 0..20 {
        let peer = if i % 2 == 0 { "10.0.0.9" } else { "10.0.0.10" };
        let mut ev = event("/file\r\n", peer, 100 * slow_factor, 100_000, 10_000);
        ev.syscalls = slow_syscalls;
        events.push(ev);
    }
    events
}

/// A record of one phase, `main`, that served `events`.
fn record_of(events: Vec<RequestEvent>) -> RunRecord {
    let stats = stats_of(&events, TallyOptions::default());
    RunRecord {
        format: reqcost_record::FORMAT.into(),
        version: 1,
        id: "test".into(),
        reqcost_version: "0".into(),
        started_unix_s: 0.0,
        target: Target {
            mode: TargetMode::Attach,
            command: None,
            pid: 1,
            comm: "server".into(),
            exit: None,
        },
        workload: Workload::default(),
        machine: Machine::default(),
        pinning: Pinning::default(),
        phases: vec![Phase {
            name: "main".into(),
            client_model: None,
            client: ClientStats::default(),
            server: ServerTotals::default(),
            per_request: PerRequest::default(),
            requests: Some(stats),
            other_traffic: None,
            cpu_windows: None,
            missing: Default::default(),
            unit: Default::default(),
            hops: vec![],
        }],
        profile: None,
        outcome: Outcome::Completed,
        notes: Vec::new(),
        hops: vec![],
    }
}

#[test]
fn client_sensitive_fires_in_one_phase_at_ten_times_and_names_the_slow_clients() {
    let findings = diagnose(&mixed_phase(10, 40));
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!(
        (f.id.as_str(), f.phase.as_str()),
        ("client-sensitive", "main")
    );
    assert!(f.evidence[0].contains("10x"), "{:?}", f.evidence);
    assert!(
        f.evidence
            .iter()
            .any(|e| e.contains("< 16 KiB/s") && e.contains("10.0.0.9") && e.contains("10.0.0.10")),
        "{:?}",
        f.evidence
    );
    assert_eq!(
        f.carriers,
        [
            "client 10.0.0.9 (< 16 KiB/s)",
            "client 10.0.0.10 (< 16 KiB/s)"
        ]
    );
    // Slow requests cost 20 × 900 µs beyond the fast ones' 100 µs, of 10 ms tallied + 2.5 ms
    // unattributed.
    let total = (80.0 * 100.0 + 20.0 * 1000.0) * 1.25;
    assert!(
        (f.cpu_share - 20.0 * 900.0 / total).abs() < 1e-9,
        "{}",
        f.cpu_share
    );
}

#[test]
fn client_sensitive_stays_silent_below_ten_times_or_without_more_syscalls() {
    assert!(diagnose(&mixed_phase(9, 40)).is_empty());
    assert!(diagnose(&mixed_phase(50, 15)).is_empty());
}

/// The busy-wait finding of `rec` once its main phase answered 100 requests and polled its
/// send queues 2000 times: SIOCOUTQ polling alone is one signal; the in-phase contrast is the
/// second.
fn busy_wait_of(mut rec: RunRecord) -> reqcost_analysis::findings::Finding {
    let main = &mut rec.phases[0];
    main.client.ok = 100;
    main.server.kernel = Some(send_queue_polls());
    diagnose(&rec)
        .into_iter()
        .find(|f| f.id == "busy-wait")
        .expect("busy-wait")
}

/// Kernel figures of a phase whose server polled its send queues 2000 times.
fn send_queue_polls() -> KernelStats {
    KernelStats {
        ioctls: vec![IoctlStat {
            request: 0x5411,
            name: Some("SIOCOUTQ/TIOCOUTQ".into()),
            count: 2000,
        }],
        ..KernelStats::default()
    }
}

#[test]
fn busy_wait_takes_its_growth_signal_from_the_phase_and_names_the_slow_clients() {
    let busy = busy_wait_of(mixed_phase(100, 400));
    assert!(
        busy.evidence.iter().any(|e| e.contains("100x")),
        "{:?}",
        busy.evidence
    );
    assert_eq!(busy.carriers[0], "client 10.0.0.9 (< 16 KiB/s)");
    let mut without = mixed_phase(100, 400);
    without.phases[0].requests = None;
    without.phases[0].client.ok = 100;
    without.phases[0].server.kernel = Some(send_queue_polls());
    assert!(diagnose(&without).iter().all(|f| f.id != "busy-wait"));
}

/// The unattributed share says what it is made of; above a third of the CPU it is a note that
/// the per-request figures are unreliable, with the largest part as the reason.
#[test]
fn unattributed_share_is_explained() {
    use reqcost_analysis::requests::{unattributed_made_of, unreliable_note};

    let mut r = reqcost_record::RequestStats {
        attributed_cpu_ns: 600,
        unattributed_cpu_ns: 400,
        unserved_cpu_ns: 300,
        exit_cpu_ns: 50,
        cpu_reading_skew_ns: 0,
        ..Default::default()
    };
    assert_eq!(
        unattributed_made_of(&r),
        "process start-up and threads that never served a connection 30.0 %, \
         work after a thread's last socket call until its exit 5.0 %, \
         connections not followed, or work held across a probe pause 5.0 %"
    );
    let note = unreliable_note(&r).expect("40 % unattributed");
    assert!(
        note.starts_with("40 % of the server's CPU belongs to no request"),
        "{note}"
    );
    assert!(note.contains("a process started per connection"), "{note}");
    r.attributed_cpu_ns = 1000;
    r.unattributed_cpu_ns = 300;
    assert_eq!(unreliable_note(&r), None);
}

/// Handshakes are no requests; those whose library told their kind are counted and costed as
/// full or resumed, the rest only as handshakes.
#[test]
fn handshakes_are_tallied_by_kind_where_told() {
    let handshake = |cpu_us, resumed| RequestEvent {
        tls: TlsPart::Handshake,
        tls_resumed: resumed,
        ..event("", "10.0.0.1", cpu_us, 0, 0)
    };
    let request = RequestEvent {
        tls: TlsPart::Plaintext,
        ..event("GET / HTTP/1.1\r\n", "10.0.0.1", 50, 100, 1)
    };
    let events = [
        handshake(2000, Some(false)),
        handshake(300, Some(true)),
        handshake(500, Some(true)),
        handshake(700, None),
        request,
    ];
    let s = stats_of(&events, TallyOptions::default());
    assert_eq!(s.requests, 1);
    assert_eq!(s.tls_handshakes, 4);
    assert_eq!(s.tls_handshake_cpu_ns, 3_500_000);
    assert_eq!(
        (s.tls_full_handshakes, s.tls_full_handshake_cpu_ns),
        (1, 2_000_000)
    );
    assert_eq!(
        (s.tls_resumed_handshakes, s.tls_resumed_handshake_cpu_ns),
        (2, 800_000)
    );
}

/// 30 fast requests that ended and one slow download still open at the phase's end (50 ms of
/// CPU so far, 64 KiB out in its first second): the in-flight one is in its client's and its
/// speed bucket's CPU and first in the costliest list, marked, and in no per-request figure.
#[test]
fn requests_in_flight_count_apart_in_every_table_and_lead_the_costliest() {
    let mut events: Vec<RequestEvent> = (0..30)
        .map(|_| event("/1k.txt\r\n", "10.0.0.1", 100, 1024, 1))
        .collect();
    let mut open = event("/200k.bin\r\n", "10.0.0.9", 50_000, 64 * 1024, 1000);
    open.in_flight = true;
    open.closed = false;
    events.push(open);
    let s = stats_of(&events, TallyOptions::default());

    assert_eq!((s.requests, s.in_flight), (30, 1));
    assert_eq!(s.in_flight_cpu_ns, 50_000_000);
    assert_eq!(s.tallied_cpu_ns, 30 * 100_000 + 50_000_000);
    assert_eq!(
        s.cpu_per_request.max, 100_000,
        "over the requests that ended"
    );
    let client = s.by_client.iter().find(|g| g.name == "10.0.0.9").unwrap();
    assert_eq!((client.requests, client.in_flight), (0, 1));
    assert_eq!(
        (client.cpu_ns, client.in_flight_cpu_ns),
        (50_000_000, 50_000_000)
    );
    assert_eq!(
        s.by_client[0].name, "10.0.0.9",
        "the costliest client first"
    );
    let speed = s.by_speed.iter().find(|g| g.in_flight == 1).unwrap();
    assert_eq!(speed.name, "64-256 KiB/s", "64 KiB in its first second");
    assert_eq!(speed.clients, ["10.0.0.9"]);
    let class = s.by_class.iter().find(|g| g.name == "/200k.bin").unwrap();
    assert_eq!((class.requests, class.in_flight), (0, 1));
    assert!(s.costliest[0].in_flight, "{:?}", s.costliest[0]);
    assert_eq!(s.costliest[0].request, "/200k.bin");
    assert_eq!(s.costliest[0].cpu_ns, 50_000_000);
    assert!(s.costliest[1..].iter().all(|c| !c.in_flight));

    let note = reqcost_analysis::requests::in_flight_note(&s).unwrap();
    assert!(
        note.starts_with("1 request still in flight at the end")
            && note.contains("the per-request figures are over the 30 requests that ended"),
        "{note}"
    );
}

/// A finding's carriers name a request still in flight that holds a large share of the phase's
/// CPU, and the classes that hold some say how many are in flight.
#[test]
fn findings_name_the_requests_in_flight_among_their_carriers() {
    let mut events = mixed_events(100, 400);
    let mut open = event("/file\r\n", "10.0.0.20", 200_000, 100_000, 10_000);
    open.in_flight = true;
    events.push(open);
    let busy = busy_wait_of(record_of(events));
    let carried = busy.carriers.join("; ");
    assert!(
        carried.contains("request /file from client 10.0.0.20 (in flight): "),
        "{carried}"
    );
    assert!(
        carried.starts_with("client 10.0.0.20 (< 16 KiB/s); "),
        "the in-flight client costs its bucket most: {carried}"
    );
}

/// Without slow clients that ended to contrast with, busy-wait's carriers are the classes
/// holding the syscalls: the syscalls of requests in flight count for their class.
#[test]
fn syscall_carriers_count_the_requests_in_flight() {
    let mut events: Vec<RequestEvent> = (0..100)
        .map(|_| event("/menu\r\n", "10.0.0.1", 100, 1000, 1))
        .collect();
    let mut open = event("/file\r\n", "10.0.0.9", 100_000, 100_000, 10_000);
    open.in_flight = true;
    open.syscalls = 9000;
    events.push(open);
    let mut rec = record_of(events);
    let main = &mut rec.phases[0];
    main.client.ok = 100;
    let mut kernel = send_queue_polls();
    kernel.epoll_ctl.modify = 2000;
    main.server.kernel = Some(kernel);
    let busy = diagnose(&rec)
        .into_iter()
        .find(|f| f.id == "busy-wait")
        .expect("busy-wait");
    assert_eq!(
        busy.carriers,
        [
            "class /file (+1 in flight): 90 % of the syscalls of the phase's requests",
            "class /menu: 10 % of the syscalls of the phase's requests",
            "request /file from client 10.0.0.9 (in flight): 73 % of the phase's CPU so far"
        ]
    );
}
