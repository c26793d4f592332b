//! conn-per-request: on http:// and https:// with keep-alive asked, ≥ 0.5 connections accepted
//! by the server and ≥ 0.5 opened by the client per request.

use reqcost_analysis::findings::Confidence;
use reqcost_record::RunRecord;

use crate::util::{
    add_syscall_stack, assert_fires, assert_silent, assert_silent_on, edit, edited, fired, kernel,
    main, set_syscall, Expected,
};

/// The main phase (100 requests) with `accepted` connections accepted and closed by the server
/// and `opened` opened by the client.
fn connections(accepted: u64, opened: u64) -> RunRecord {
    edited(|r| {
        let sockets = &mut kernel(main(r)).sockets;
        sockets.accepted = accepted;
        sockets.closed = accepted;
        main(r).client.connections = opened;
    })
}

#[test]
fn silent_when_keep_alive_was_not_asked() {
    let rec = edit(connections(100, 100), |r| {
        r.workload
            .options
            .insert("keepalive".into(), "false".into());
    });
    assert_silent(&rec, "conn-per-request");
}

#[test]
fn only_for_http() {
    let https = edit(connections(100, 100), |r| {
        r.workload.protocol = "https".into()
    });
    fired(&https, "conn-per-request");
    for protocol in ["gopher", "gemini", "tcp"] {
        let rec = edit(connections(100, 100), |r| {
            r.workload.protocol = protocol.into()
        });
        assert_silent(&rec, "conn-per-request");
    }
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &connections(50, 50),
        "conn-per-request",
        Expected {
            title: "0.50 connections per request although the client asked for keep-alive",
            evidence: &[
                "0.50 accepts and 0.50 socket closes per request",
                "the client opened 0.50 connections per request with keep-alive on",
            ],
            // accept4 (4 000 ns), close (51 000 ns) and epoll_ctl (2 000 ns) over 100
            // requests.
            share: 570.0 / 20_000.0,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "conn-per-request",
        &[
            ("0.49 accepts per request", connections(49, 100)),
            ("0.49 client connections per request", connections(100, 49)),
            ("accepts alone", connections(100, 2)),
        ],
    );
}

/// A blocking server waits in accept for its next client: 1 s per request inside accept4, of
/// which the samples put 2 µs on CPU, and close's 0.4 µs. The share counts the CPU only.
#[test]
fn time_blocked_in_accept_is_not_cpu() {
    let idle = edit(connections(50, 50), |r| {
        set_syscall(main(r), "accept4", 50, 50 * 2_000_000_000)
    });
    // 10 of 250 samples in accept4, 2 in close: 12 of 250 of 20 µs.
    let sampled = edit(idle.clone(), |r| {
        add_syscall_stack(r, "__x64_sys_accept4", 10);
        add_syscall_stack(r, "__x64_sys_close", 2);
        add_syscall_stack(r, "__x64_sys_epoll_wait", 38);
    });
    assert_fires(
        &sampled,
        "conn-per-request",
        Expected {
            title: "0.50 connections per request",
            evidence: &["µs per request inside accept, close, shutdown, epoll_ctl and setsockopt: 1.0 µs on CPU (12 of 250 samples)"],
            share: 12.0 / 250.0,
            confidence: Confidence::Medium,
        },
    );
    // Without samples in syscalls, at most the phase's system CPU (10 of 20 µs).
    assert_fires(
        &idle,
        "conn-per-request",
        Expected {
            title: "0.50 connections per request",
            evidence: &["the share counts at most the phase's system CPU, 10.0 µs"],
            share: 0.5,
            confidence: Confidence::Medium,
        },
    );
}
