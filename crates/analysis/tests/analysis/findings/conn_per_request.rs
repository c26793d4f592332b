//! conn-per-request: on http:// and https:// with keep-alive asked, ≥ 0.5 connections accepted
//! by the server and ≥ 0.5 opened by the client per request.

use reqcost_analysis::findings::Confidence;
use reqcost_record::RunRecord;

use crate::util::{
    assert_evidence, assert_share, assert_silent, edit, edited, fired, kernel, main,
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
fn fires_at_half_a_connection_per_request() {
    let f = fired(&connections(50, 50), "conn-per-request");
    assert!(
        f.title
            .starts_with("0.50 connections per request although the client asked for keep-alive"),
        "{}",
        f.title
    );
    assert_evidence(
        &f,
        &[
            "0.50 accepts and 0.50 socket closes per request",
            "the client opened 0.50 connections per request with keep-alive on",
        ],
    );
    // accept4 (4 000 ns), close (51 000 ns) and epoll_ctl (2 000 ns) over 100 requests.
    assert_share(&f, 570.0 / 20_000.0);
    assert_eq!(f.confidence, Confidence::Medium);
}

#[test]
fn silent_below_half_an_accept_per_request() {
    assert_silent(&connections(49, 100), "conn-per-request");
}

#[test]
fn silent_below_half_a_client_connection_per_request() {
    assert_silent(&connections(100, 49), "conn-per-request");
}

#[test]
fn silent_on_accepts_alone() {
    assert_silent(&connections(100, 2), "conn-per-request");
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
