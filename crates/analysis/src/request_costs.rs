//! The per-request block of a phase in the analysis document ([`crate::document`]): the
//! distribution of CPU per request, who carries it, and what belongs to no request.

use reqcost_record::{CostlyRequest, GroupCost, NsDistribution, RequestStats};
use serde::{Deserialize, Serialize};

use crate::requests;

/// Per-request accounting of one phase: the distribution of CPU per request and who carries it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RequestCosts {
    /// Requests the server served (counted on the server side).
    pub requests: u64,
    /// Connections that closed in the phase, and request events without a request.
    #[serde(default)]
    pub connections: u64,
    #[serde(default)]
    pub no_request: u64,
    pub cpu_per_request_ns: NsDistribution,
    /// The tree's CPU in the phase and who holds it; absent when none was counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<RequestsCpu>,
    /// Share (0..1) of the tree's CPU that belongs to no request.
    pub unattributed_cpu_share: f64,
    /// What that share is made of, where the probes tell (`requests::unattributed_made_of`).
    #[serde(default)]
    pub unattributed_made_of: String,
    /// Above a third of the CPU: the per-request figures are unreliable, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreliable: Option<String>,
    /// Requests still open at the phase's end and how the figures treat them
    /// (`requests::in_flight_note`): in the groups' CPU and the costliest list, not in
    /// `requests` nor any per-request figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_flight_requests: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_flight_cpu_ns: u64,
    pub by_class: Vec<GroupCost>,
    pub by_client: Vec<GroupCost>,
    pub by_speed: Vec<GroupCost>,
    /// The costliest requests by CPU, each with its lifetime (`RequestEvent::wall_ns`).
    pub costliest: Vec<CostlyRequest>,
    pub events_dropped: u64,
    /// [`RequestStats::syscalls_unranked`]: the costliest requests' top syscalls are bounds
    /// when it is not 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub syscalls_unranked: u64,
    /// Most distinct classes, and clients, kept apart, and the requests of further ones
    /// counted under `(other)`.
    #[serde(default)]
    pub key_cap: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub classes_over_cap: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub clients_over_cap: u64,
    /// TLS handshakes seen apart from requests, and the mean CPU of one (docs/tls.md).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tls_handshakes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_cpu_ns: Option<f64>,
    /// Their CPU's share (0..1) of the tree's CPU, in no class; absent without any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_cpu_share: Option<f64>,
    /// Of them, the full and the resumed ones where the TLS library told, and the mean CPU of
    /// one of each kind.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tls_full_handshakes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_full_handshake_cpu_ns: Option<f64>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tls_resumed_handshakes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_resumed_handshake_cpu_ns: Option<f64>,
    /// A protocol's connection set-up turns seen apart from requests (PostgreSQL's startup,
    /// authentication, Terminate; MySQL's greeting, handshake, COM_QUIT), the mean CPU of one, and their share (0..1) of the tree's
    /// CPU, in no class; absent without any.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub setup_turns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_cpu_ns: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_cpu_share: Option<f64>,
    /// Turns on connections the server opened to call an upstream, not requests, and the mean
    /// CPU the probes charged to one rather than to the request being served (docs/stack.md).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub upstream_calls: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_call_cpu_ns: Option<f64>,
    /// What the count of a protocol's requests leaves out or could not read
    /// (`requests::protocol_note`): unparsed requests, pipelines counted as one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// A phase's tree CPU and its shares, in % of it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RequestsCpu {
    pub total_ns: u64,
    pub attributed_pct: f64,
    pub unattributed_pct: f64,
    /// In the requests that ended in the phase, and in those still in flight at its end.
    pub ended_pct: f64,
    pub in_flight_pct: f64,
}

impl RequestsCpu {
    fn of(r: &RequestStats) -> Option<RequestsCpu> {
        let total = r.attributed_cpu_ns + r.unattributed_cpu_ns;
        let pct = |ns: u64| ns as f64 * 100.0 / total as f64;
        (total > 0).then(|| RequestsCpu {
            total_ns: total,
            attributed_pct: pct(r.attributed_cpu_ns),
            unattributed_pct: pct(r.unattributed_cpu_ns),
            ended_pct: pct(r.tallied_cpu_ns.saturating_sub(r.in_flight_cpu_ns)),
            in_flight_pct: pct(r.in_flight_cpu_ns),
        })
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `total` over `count`, when there is any.
fn mean(total: u64, count: u64) -> Option<f64> {
    (count > 0).then(|| total as f64 / count as f64)
}

impl RequestCosts {
    /// `unattributed_cpu_share` in %.
    pub fn unattributed_cpu_pct(&self) -> f64 {
        self.unattributed_cpu_share * 100.0
    }

    /// `tls_handshake_cpu_share` in %.
    pub fn tls_handshake_cpu_pct(&self) -> Option<f64> {
        self.tls_handshake_cpu_share.map(|s| s * 100.0)
    }

    /// `setup_cpu_share` in %.
    pub fn setup_cpu_pct(&self) -> Option<f64> {
        self.setup_cpu_share.map(|s| s * 100.0)
    }

    /// Handshakes the TLS library told neither full nor resumed, when it told any apart.
    pub fn tls_not_told_apart(&self) -> u64 {
        match self.tls_full_handshakes + self.tls_resumed_handshakes {
            0 => 0,
            told => self.tls_handshakes.saturating_sub(told),
        }
    }

    /// The reading of one phase's per-request accounting.
    pub fn of(r: &RequestStats) -> RequestCosts {
        let total = r.attributed_cpu_ns + r.unattributed_cpu_ns;
        RequestCosts {
            requests: r.requests,
            connections: r.connections,
            no_request: r.no_request,
            cpu_per_request_ns: r.cpu_per_request.clone(),
            cpu: RequestsCpu::of(r),
            unattributed_cpu_share: if total == 0 {
                0.0
            } else {
                r.unattributed_cpu_ns as f64 / total as f64
            },
            by_class: r.by_class.clone(),
            by_client: r.by_client.clone(),
            unattributed_made_of: requests::unattributed_made_of(r),
            unreliable: requests::unreliable_note(r),
            in_flight: requests::in_flight_note(r),
            in_flight_requests: r.in_flight,
            in_flight_cpu_ns: r.in_flight_cpu_ns,
            by_speed: r.by_speed.clone(),
            costliest: r.costliest.clone(),
            events_dropped: r.events_dropped,
            syscalls_unranked: r.syscalls_unranked,
            key_cap: r.key_cap,
            classes_over_cap: r.classes_over_cap,
            clients_over_cap: r.clients_over_cap,
            tls_handshakes: r.tls_handshakes,
            tls_handshake_cpu_ns: mean(r.tls_handshake_cpu_ns, r.tls_handshakes),
            tls_handshake_cpu_share: (r.tls_handshakes > 0)
                .then(|| r.tls_handshake_cpu_ns as f64 / total.max(1) as f64),
            tls_full_handshakes: r.tls_full_handshakes,
            tls_full_handshake_cpu_ns: mean(r.tls_full_handshake_cpu_ns, r.tls_full_handshakes),
            tls_resumed_handshakes: r.tls_resumed_handshakes,
            tls_resumed_handshake_cpu_ns: mean(
                r.tls_resumed_handshake_cpu_ns,
                r.tls_resumed_handshakes,
            ),
            setup_turns: r.setup_turns,
            setup_cpu_ns: mean(r.setup_cpu_ns, r.setup_turns),
            setup_cpu_share: (r.setup_turns > 0)
                .then(|| r.setup_cpu_ns as f64 / total.max(1) as f64),
            protocol: requests::protocol_note(r),
            upstream_calls: r.upstream_calls,
            upstream_call_cpu_ns: mean(r.upstream_call_cpu_ns, r.upstream_calls),
        }
    }
}
