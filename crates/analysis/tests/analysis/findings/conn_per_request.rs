//! conn-per-request: on http:// and https:// with keep-alive asked, ≥ 0.5 connections accepted
//! by the server and ≥ 0.5 opened by the client per request.

use reqcost_analysis::findings::Confidence;
use reqcost_record::RunRecord;

use crate::util::{
    assert_fires, assert_silent, assert_silent_on, edit, edited, fired, kernel, main, Expected,
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
