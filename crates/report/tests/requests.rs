//! The per-request block shows what the record holds: counts, the distribution, one row per
//! group with its share and per-request figures, the slow bucket's clients, the costliest
//! requests with their evidence.

use reqcost_analysis::document::RequestCosts;
use reqcost_record::{CostlyRequest, GroupCost, NsDistribution, RequestStats};
use reqcost_report::requests_section;

fn group(name: &str, requests: u64, share: f64, p50_ns: u64) -> GroupCost {
    GroupCost {
        name: name.into(),
        requests,
        cpu_ns: requests * p50_ns,
        cpu_share_pct: share,
        no_request: 0,
        in_flight: 0,
        in_flight_cpu_ns: 0,
        in_flight_syscalls: 0,
        cpu_per_request: NsDistribution {
            mean: p50_ns as f64,
            p50: p50_ns,
            p90: p50_ns,
            p99: p50_ns * 2,
            max: p50_ns * 3,
            stddev: None,
        },
        syscalls_per_request: 12.0,
        bytes_in_per_request: 20.0,
        bytes_out_per_request: 204_800.0,
        clients: Vec::new(),
        by_hop: Vec::new(),
        stack_cpu_ns: 0,
    }
}

fn stats() -> RequestStats {
    let no_request = GroupCost {
        requests: 0,
        no_request: 7,
        ..group("(no request)", 0, 0.5, 0)
    };
    let slow = GroupCost {
        clients: vec!["192.0.2.9".into(), "192.0.2.10".into()],
        ..group("< 16 KiB/s", 20, 70.0, 150_000_000)
    };
    RequestStats {
        requests: 100,
        connections: 100,
        in_flight: 0,
        in_flight_cpu_ns: 0,
        no_request: 7,
        attributed_cpu_ns: 9_000_000_000,
        unattributed_cpu_ns: 1_000_000_000,
        unserved_cpu_ns: 600_000_000,
        exit_cpu_ns: 0,
        cpu_reading_skew_ns: 0,
        held_before_cpu_ns: 0,
        tallied_cpu_ns: 9_000_000_000,
        cpu_per_request: NsDistribution {
            mean: 30_000_000.0,
            p50: 200_000,
            p90: 150_000_000,
            p99: 160_000_000,
            max: 170_000_000,
            stddev: None,
        },
        by_class: vec![group("/200k.bin", 100, 89.5, 200_000), no_request],
        by_client: vec![group("192.0.2.9", 10, 40.0, 150_000_000)],
        by_speed: vec![slow, group("1-16 MiB/s", 80, 20.0, 200_000)],
        costliest: vec![CostlyRequest {
            class: "/200k.bin".into(),
            request: "/200k.bin".into(),
            client: "192.0.2.9".into(),
            cpu_ns: 170_000_000,
            syscalls: 40_210,
            top_syscalls: vec![("ioctl".into(), 20_000), ("epoll_ctl".into(), 20_000)],
            unlisted_max: Some(200),
            bytes_in: 11,
            bytes_out: 204_800,
            wall_ns: Some(12_500_000_000),
            id: String::new(),
            in_flight: false,
            hops: Vec::new(),
            caused_by: String::new(),
            front_class: String::new(),
        }],
        events_dropped: 0,
        syscalls_unranked: 0,
        key_cap: 1024,
        classes_over_cap: 0,
        clients_over_cap: 0,
        tls_ciphertext: 0,
        http2_connections: 0,
        http2_unnamed: 0,
        http2_lost: 0,
        tls_handshakes: 0,
        tls_handshake_cpu_ns: 0,
        tls_resumed_handshakes: 0,
        tls_resumed_handshake_cpu_ns: 0,
        tls_full_handshakes: 0,
        tls_full_handshake_cpu_ns: 0,
        setup_turns: 0,
        setup_cpu_ns: 0,
        unparsed_requests: 0,
        pipelined_turns: 0,
        http3_requests: 0,
        upstream_calls: 0,
        upstream_call_cpu_ns: 0,
        front_links: None,
        stack_costliest: Vec::new(),
    }
}

fn line_with<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in\n{text}"))
}

#[test]
fn section_shows_counts_distribution_and_shares() {
    let text = requests_section(&RequestCosts::of(&stats()), 100.0);
    assert!(text.contains("100 requests · 100 connections closed · 7 without a request"));
    assert!(line_with(&text, "CPU/request")
        .contains("p50 200 µs · p90 150.00 ms · p99 160.00 ms · max 170.00 ms"));
    assert!(line_with(&text, "unattributed").contains(
        "attributed 90.0 % · unattributed 10.0 % (process start-up and threads that never served \
         a connection 6.0 %, connections not followed, or work held across a probe pause 4.0 %)"
    ));
    assert!(!text.contains("note!"), "{text}");
}

#[test]
fn a_count_other_than_the_phases_is_said_as_the_blocks_own() {
    // The phase's figures divide by 100 requests: the block's own count shows as a caveat only
    // where it differs.
    let same = requests_section(&RequestCosts::of(&stats()), 100.0);
    assert!(!same.contains("this block divides"), "{same}");
    let other = requests_section(&RequestCosts::of(&stats()), 102.0);
    assert!(
        line_with(&other, "counted").contains(
            "100 requests (this block divides by them; the phase's figures by its 102) · 100 \
             connections closed"
        ),
        "{other}"
    );
}

#[test]
fn every_group_has_its_row() {
    let text = requests_section(&RequestCosts::of(&stats()), 100.0);
    let class = line_with(&text, "/200k.bin ");
    for cell in ["100", "89.5", "200 µs", "400 µs", "12", "20 B", "200.0 KiB"] {
        assert!(class.contains(cell), "{cell:?} missing in {class:?}");
    }
    let empty = line_with(&text, "(no request)");
    assert!(
        empty.contains("0 (+7 no request)") && empty.contains(" - "),
        "{empty:?}"
    );
    let slow = line_with(&text, "< 16 KiB/s");
    assert!(
        slow.contains("150.00 ms") && slow.contains("192.0.2.9, 192.0.2.10"),
        "{slow:?}"
    );
    assert!(line_with(&text, "by client").starts_with("    by client"));
}

#[test]
fn costliest_requests_carry_their_evidence() {
    let text = requests_section(&RequestCosts::of(&stats()), 100.0);
    let top = line_with(&text, "1. ");
    assert_eq!(
        top.trim(),
        "1. 170.00 ms  /200k.bin from 192.0.2.9: 40210 syscalls (ioctl 20000, epoll_ctl 20000), 11 B in, 200.0 KiB out, 12.50 s wall"
    );
}

/// The handshake line, and under it each kind's count and CPU where the TLS library told.
#[test]
fn handshakes_are_shown_by_kind() {
    let mut s = stats();
    s.tls_handshakes = 10;
    s.tls_handshake_cpu_ns = 8_000_000;
    let text = requests_section(&RequestCosts::of(&s), 100.0);
    assert!(
        line_with(&text, "TLS").contains("10 handshakes, not requests: 800 µs CPU per handshake")
    );
    assert!(!text.contains(" full"), "{text}");
    s.tls_full_handshakes = 2;
    s.tls_full_handshake_cpu_ns = 4_000_000;
    s.tls_resumed_handshakes = 7;
    s.tls_resumed_handshake_cpu_ns = 3_500_000;
    let text = requests_section(&RequestCosts::of(&s), 100.0);
    assert_eq!(
        line_with(&text, " full").trim(),
        "2 full: 2.00 ms CPU each · 7 resumed: 500 µs CPU each · 1 not told apart"
    );
}
