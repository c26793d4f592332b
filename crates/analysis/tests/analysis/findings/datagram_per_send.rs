//! datagram-per-send: ≥ 0.9 send calls per UDP datagram, ≥ 8 datagrams per unit of ≤ 2 KiB
//! each, a third signal at ≥ 50 % system time.

use reqcost_analysis::findings::{diagnose, unevaluated, Confidence};
use reqcost_record::{FdKind, IoDirection, RunRecord};

use crate::util::{
    assert_fires, assert_silent_on, edit, edited, kernel, main, set_cpu, set_io, set_syscall,
    Expected,
};

/// The main phase (100 requests, 49 % system time) sending `datagrams` UDP datagrams of `size`
/// bytes in `calls` sendto calls, 1 µs each.
pub(crate) fn datagrams(datagrams: u64, size: u64, calls: u64) -> RunRecord {
    edited(|r| {
        let m = main(r);
        set_cpu(m, 2_000_000, 980_000);
        set_io(
            m,
            "sendto",
            IoDirection::Write,
            FdKind::Udp,
            calls,
            datagrams * size,
        );
        set_syscall(m, "sendto", calls, calls * 1000);
        let udp = &mut kernel(m).udp;
        udp.datagrams_sent = datagrams;
        udp.bytes_sent = datagrams * size;
    })
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &datagrams(800, 2048, 720),
        "datagram-per-send",
        Expected {
            title: "one send call per datagram: 8 datagrams of 2048 B per request",
            evidence: &[
                "0.90 send calls per UDP datagram (720 calls, 800 datagrams)",
                "8 datagrams per request, 2048 B each on average",
                "system time 49 % of CPU",
                "20 % of CPU samples in the kernel's network send",
            ],
            // The fixture's profile: 40 of its 200 samples under tcp_sendmsg.
            share: 0.2,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "datagram-per-send",
        &[
            ("0.89 calls per datagram", datagrams(1000, 1024, 890)),
            ("7.99 datagrams per request", datagrams(799, 1024, 799)),
            ("2049 B per datagram", datagrams(1000, 2049, 1000)),
            (
                "sendmmsg batches: one call per 16",
                datagrams(1600, 1024, 100),
            ),
            ("one reply per request (DNS-like)", datagrams(100, 512, 100)),
        ],
    );
}

#[test]
fn without_a_profile_the_share_is_the_time_in_the_send_calls() {
    let mut rec = datagrams(800, 2048, 720);
    rec.profile = None;
    // 7.2 µs of sendto per request against 20 µs.
    crate::util::assert_share(&crate::util::fired(&rec, "datagram-per-send"), 0.36);
}

#[test]
fn system_time_makes_it_high_confidence() {
    let mut rec = datagrams(1000, 1024, 1000);
    set_cpu(main(&mut rec), 2_000_000, 1_000_000);
    let f = crate::util::fired(&rec, "datagram-per-send");
    assert_eq!(f.confidence, Confidence::High);
}

#[test]
fn without_requests_counted_it_judges_per_mib_and_the_request_rules_say_why_not() {
    // 1024 datagrams of 1 KiB, 1 MiB, and no request counted, as under --load.
    let rec = edit(datagrams(1024, 1024, 1024), |r| {
        r.phases.retain(|p| p.name == "main");
        let m = main(r);
        set_io(m, "writev", IoDirection::Write, FdKind::Socket, 0, 0);
        m.client.ok = 0;
        m.client.requests = 0;
    });
    let f = crate::util::fired(&rec, "datagram-per-send");
    assert!(
        f.title.contains("1024 datagrams of 1024 B per MiB"),
        "{}",
        f.title
    );
    assert!(f
        .evidence
        .iter()
        .any(|e| e == "1024 datagrams per MiB, 1024 B each on average"));
    let not = unevaluated(&rec);
    let requests = not
        .iter()
        .find(|u| u.reason.contains("no requests counted"))
        .unwrap_or_else(|| panic!("{not:#?}"));
    assert!(requests.rules.contains(&"small-writes"), "{requests:?}");
    assert!(
        !requests.rules.contains(&"datagram-per-send"),
        "{requests:?}"
    );
    assert!(
        requests
            .reason
            .ends_with("; the other rules judged this run per MiB"),
        "{requests:?}"
    );
    assert!(diagnose(&rec)
        .iter()
        .all(|f| !f.title.contains("per request")));
}
