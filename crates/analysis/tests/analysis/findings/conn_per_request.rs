//! conn-per-request: on http:// and https:// with keep-alive asked, ≥ 0.5 connections accepted
//! by the server and ≥ 0.5 opened by the client per request.

use reqcost_record::RunRecord;

use crate::util::{assert_silent, edit, edited, fired, kernel, main};

/// The main phase (100 requests) with `accepted` connections accepted and closed by the server
/// and `opened` opened by the client.
pub(super) fn connections(accepted: u64, opened: u64) -> RunRecord {
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
