//! What the outputs say beside a phase's per-request figures: what its unattributed CPU is made
//! of, when the figures are unreliable or invisible (QUIC), the requests still in flight, a
//! group's request count as the tables show it.

use reqcost_record::{GroupCost, Phase, RequestStats, Workload};

/// Share of the tree's CPU in no request above which the per-request figures are unreliable.
pub const UNRELIABLE_UNATTRIBUTED_SHARE: f64 = 1.0 / 3.0;

/// The parts of a phase's unattributed CPU the probes tell apart, each with its share of the
/// tree's CPU: "start-up and threads that never served 2.0 %, ...". Empty without any.
pub fn unattributed_made_of(r: &RequestStats) -> String {
    let total = (r.attributed_cpu_ns + r.unattributed_cpu_ns).max(1) as f64;
    let known = r.unserved_cpu_ns + r.exit_cpu_ns;
    [
        (
            "process start-up and threads that never served a connection",
            r.unserved_cpu_ns,
        ),
        (
            "work after a thread's last socket call until its exit",
            r.exit_cpu_ns,
        ),
        (
            "connections not followed, or work held across a probe pause",
            r.unattributed_cpu_ns.saturating_sub(known),
        ),
    ]
    .iter()
    .filter(|(_, ns)| *ns > 0)
    .map(|(what, ns)| format!("{what} {:.1} %", *ns as f64 * 100.0 / total))
    .collect::<Vec<_>>()
    .join(", ")
}

/// What a phase's count of a protocol's requests (PostgreSQL, Redis, MySQL) leaves out or could not
/// read: requests whose messages were not readable, turns that held a pipeline. None when the
/// count is the protocol's own.
pub fn protocol_note(r: &RequestStats) -> Option<String> {
    let mut parts = Vec::new();
    if r.unparsed_requests > 0 {
        parts.push(format!(
            "{} requests of a recognised protocol could not be read (broken framing, or cut before what names them): counted under `(unparsed ...)`, in no class of their own",
            r.unparsed_requests
        ));
    }
    if r.pipelined_turns > 0 {
        parts.push(format!(
            "{} requests held more than one command or query (a pipeline): each is counted as one request of its first command's class, so the client counts more",
            r.pipelined_turns
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// When more than a third of the CPU is in no request: that the per-request figures are
/// unreliable for this server, and the likely reason, from the largest part.
pub fn unreliable_note(r: &RequestStats) -> Option<String> {
    let total = r.attributed_cpu_ns + r.unattributed_cpu_ns;
    let share = r.unattributed_cpu_ns as f64 / total.max(1) as f64;
    if total == 0 || share <= UNRELIABLE_UNATTRIBUTED_SHARE {
        return None;
    }
    let rest = r
        .unattributed_cpu_ns
        .saturating_sub(r.unserved_cpu_ns + r.exit_cpu_ns);
    let reason = if r.unserved_cpu_ns >= r.exit_cpu_ns.max(rest) {
        "most of it runs in processes or threads that serve no connection: a process started per connection (its start-up), or work handed to a thread pool"
    } else if r.exit_cpu_ns >= rest {
        "most of it is work threads did after their last socket call, until they exited: a process per connection, or threads that compute for others"
    } else {
        "most of it ran on connections the probes did not follow (a full connection table) or across probe pauses"
    };
    Some(format!(
        "{:.0} % of the server's CPU belongs to no request, so the per-request figures are unreliable for this server: {reason}",
        share * 100.0
    ))
}

/// What a phase's requests still open at its end are, and how the figures treat them: one line
/// every output shows, None without any.
pub fn in_flight_note(r: &RequestStats) -> Option<String> {
    (r.in_flight > 0).then(|| {
        let total = (r.attributed_cpu_ns + r.unattributed_cpu_ns).max(1) as f64;
        format!(
            "{} still in flight at the end, {:.1} % of the CPU so far: in the tables' CPU and \
             the costliest list, marked in flight; the per-request figures are over the {} \
             that ended",
            plural(r.in_flight, "request"),
            r.in_flight_cpu_ns as f64 * 100.0 / total,
            plural(r.requests, "request"),
        )
    })
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("{n} {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Why a phase's per-request accounting shows nothing though the probes ran: its requests were
/// inside QUIC (a `quic://` workload, or HTTP/3 responses counted in libnghttp3) and none on a
/// TCP connection. Its tally would read as 0 requests with all of the CPU "in no request", when
/// the CPU was not attributed because the requests were invisible. None otherwise.
pub fn not_visible_over_quic(p: &Phase, workload: Option<&Workload>) -> Option<String> {
    let r = p.requests.as_ref()?;
    let quic = workload.is_some_and(|w| w.url.starts_with("quic://")) || r.http3_requests > 0;
    (quic && r.requests == 0).then(|| {
        "not available over QUIC: its requests travel inside encrypted UDP datagrams, which \
         per-request accounting (it follows TCP connections' reads and writes) cannot split \
         into requests, so no CPU is attributed to a request, a class or a client, nor counted \
         as belonging to none; the CPU figures divide the phase's whole CPU by the count above"
            .to_string()
    })
}

/// A group's share of its phase's CPU, 0..1, as the OpenMetrics gauges give shares.
pub fn group_cpu_share(g: &GroupCost) -> f64 {
    g.cpu_share_pct / 100.0
}

/// A group's request count as every table shows it: the requests that ended, then the
/// connections without a request and the requests in flight beside them.
pub fn group_requests(g: &GroupCost) -> String {
    let mut beside = Vec::new();
    if g.no_request > 0 {
        beside.push(format!("+{} no request", g.no_request));
    }
    if g.in_flight > 0 {
        beside.push(format!("+{} in flight", g.in_flight));
    }
    if beside.is_empty() {
        g.requests.to_string()
    } else {
        format!("{} ({})", g.requests, beside.join(", "))
    }
}
