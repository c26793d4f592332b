//! - signal 1: **≥ 0.5 connections accepted by the server per request**;
//! - signal 2: **the client, which asked for keep-alive, opened ≥ 0.5 connections per request**, so
//!   the server closed them.
//! - Only for http:// and https:// (gopher and Gemini close per request by design).
//! - CPU share: the CPU in accept, close, shutdown, epoll_ctl, setsockopt, getsockname; a
//!   blocking accept waits off CPU for the next client, and that wait is given apart. The CPU
//!   is taken from the samples in those calls where the profile has kernel chains; without them,
//!   the calls' wall time, at most the phase's system CPU, said so.

use super::facts::{Ctx, Draft};
use super::{CarriedBy, Needs, Rule};

pub(super) const RULE: Rule = Rule {
    id: "conn-per-request",
    seed: None,
    needs: &[Needs::Kernel, Needs::Requests],
    carried_by: CarriedBy::SyscallClasses,
    judge,
};

/// Signal 1: connections the server accepted per request, from this many...
const MIN_ACCEPTS: f64 = 0.5;
/// ... signal 2: connections the client opened per request, keep-alive on, from this many.
const MIN_CLIENT_CONNECTIONS: f64 = 0.5;

/// What setting up and tearing down a connection costs the server.
const CONNECTION_CALLS: &[&str] = &[
    "accept",
    "accept4",
    "close",
    "shutdown",
    "epoll_ctl",
    "setsockopt",
    "getsockname",
];

/// A connection per request on a protocol that can keep them alive.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    let w = &ctx.rec.workload;
    // Gopher, Gemini and raw TCP close after each response by design; only HTTP can reuse.
    let keepalive_asked = matches!(w.protocol.as_str(), "http" | "https")
        && w.options.get("keepalive").is_none_or(|v| v != "false");
    if !keepalive_asked {
        return None;
    }
    let accepts = k.sockets.accepted as f64 / f.ok;
    let client_conns = f.phase.client.connections as f64 / f.ok;
    // Signal 1: the server accepts a connection per request; signal 2: the client, which
    // asked for keep-alive, had to open one per request too, so the server closed them.
    if accepts < MIN_ACCEPTS || client_conns < MIN_CLIENT_CONNECTIONS {
        return None;
    }
    let inside = ctx.in_calls(f, CONNECTION_CALLS);
    Some(Draft {
        title: format!(
            "{accepts:.2} connections per request although the client asked for keep-alive"
        ),
        evidence: vec![
            format!(
                "{accepts:.2} accepts and {:.2} socket closes per request",
                k.sockets.closed as f64 / f.ok
            ),
            format!(
                "the client opened {client_conns:.2} connections per request with keep-alive on"
            ),
            inside.describe("accept, close, shutdown, epoll_ctl and setsockopt"),
        ],
        cpu_share: f.share(inside.cpu_ns),
        phase: f.phase.name.clone(),
        fix: "honour HTTP/1.1 keep-alive (Connection header, Content-Length or chunked bodies) \
              so clients reuse connections",
        signals: 2,
    })
}
