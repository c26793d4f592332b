//! Per-request accounting: the server's cost of each connection and request, attributed in the
//! kernel, and its distribution per phase.
//!
//! The kernel attributes a thread's on-CPU time, syscalls and socket bytes to the connection of
//! its latest socket call until a readiness wait (epoll_wait, poll, select) or the connection's
//! close; one [`RequestEvent`] per finished request reaches user space. A phase keeps the
//! aggregate ([`RequestStats`]), not the events, so memory stays bounded for any duration.

use std::borrow::Cow;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// One finished request, as the probes report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestEvent {
    /// Thread group id of the server process that served it.
    pub pid: u32,
    /// Unique per accepted (or opened) connection within one probes session.
    pub conn_id: u64,
    /// Index of this request on its connection, from 0.
    pub seq: u32,
    /// The client's address and port.
    pub peer: SocketAddr,
    /// The server's port of the connection.
    pub local_port: u16,
    /// Server on-CPU time attributed to this request.
    pub cpu_ns: u64,
    /// Syscalls made by the server while serving it (all kinds, not only socket calls).
    pub syscalls: u32,
    /// The most frequent of those syscalls by name with their counts, most frequent first.
    pub top_syscalls: Vec<(Cow<'static, str>, u32)>,
    /// No syscall left out of `top_syscalls` was made more often than this (the probes count
    /// every call by syscall: docs/request-attribution.md); None where nothing bounds them.
    pub unlisted_max: Option<u32>,
    /// Bytes the server read from and wrote to the connection for this request.
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// CLOCK_MONOTONIC ns of the first byte read and of the last byte written; 0 when none.
    pub first_in_ns: u64,
    pub last_out_ns: u64,
    /// CLOCK_MONOTONIC ns when the request ended: the server read the next request on the
    /// connection, or closed it. A server that waits for a slow client to drain its response
    /// before closing ends late; one that leaves the draining to the kernel ends at its write.
    pub end_ns: u64,
    /// CLOCK_MONOTONIC ns of the last syscall that served it (or charged it CPU): past its
    /// last byte out when the server keeps working on it after its last send (a busy-wait
    /// polling the send queue); 0 when none was seen.
    pub last_ns: u64,
    /// The first bytes the server read on it (up to 128): the request line, selector or URL;
    /// ciphertext for TLS without a hook. On HTTP/2 (`http2_streams` set), `METHOD /path`
    /// decoded from the stream's header block, or empty when it could not be (docs/tls.md).
    pub head: Vec<u8>,
    /// The connection was closed with this request (it was its last one).
    pub closed: bool,
    /// What TLS its connection spoke, as far as the probes saw.
    pub tls: TlsPart,
    /// A handshake's kind, where its TLS library says: resumed an earlier session (true) or
    /// full (false). None for requests, and for handshakes of a library whose flag is not
    /// known.
    pub tls_resumed: Option<bool>,
    /// On an HTTP/2 connection whose frames the probes parsed (TLS plaintext, or h2c): the
    /// streams the client opened in this part of the connection, each a request (the probes
    /// hand over one event per stream). None elsewhere.
    pub http2_streams: Option<u32>,
    /// On a Redis or PostgreSQL connection: the commands the client sent in this turn (RESP
    /// arrays; Queries and Executes), as the probes counted them in its reads, each a request
    /// (a pipeline of 16 is 16). None where they were not counted, or their count was lost
    /// (docs/request-attribution.md).
    pub commands: Option<u32>,
    /// The probes lost this HTTP/2 connection's frames before this event ended (said on one
    /// event per connection): streams it opened afterwards are not counted.
    pub http2_lost: bool,
    /// Still open when its window ended: read from the probes' connection state, not ended by
    /// the server. Its figures are what it cost so far, `end_ns` is when it was read.
    pub in_flight: bool,
    /// In flight: bytes of `bytes_out` the client had not acknowledged yet when it was read
    /// (its connection's send queue), so that its speed so far is what the client took.
    pub unacked_out: u64,
    /// The hop of the stack whose tree served it: 0 the measured server (the front), 1.. a
    /// local upstream it was followed to ([`RunRecord::hops`](crate::RunRecord::hops)).
    pub hop: u8,
    /// On an upstream hop: the front server's request (hop 0) whose work this request did,
    /// through however many hops, as the probes linked the bytes of the calls between them
    /// (docs/stack.md). None on the front's own requests, and on an upstream's work for no
    /// front request (its timers, a pool's keep-alive, another client).
    pub caused_by: Option<RequestRef>,
    /// The server opened this connection itself (connect(2)) to call an upstream: its turns
    /// are calls made for the requests the server was serving, not requests of this hop.
    pub upstream_call: bool,
}

/// Names one request within one measurement: the [`RequestEvent::id`] parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RequestRef {
    pub pid: u32,
    pub conn_id: u64,
    pub seq: u32,
}

/// A request event's place in TLS (docs/tls.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsPart {
    /// Not TLS, as far as the probes could tell.
    #[default]
    None,
    /// A TLS connection whose plaintext was not seen (no hook on its TLS library): the event
    /// is the whole connection, its bytes and head ciphertext.
    Ciphertext,
    /// A request read through a hook on the TLS library: bytes and head are plaintext.
    Plaintext,
    /// The connection's TLS handshake: everything before its first plaintext. Not a request.
    Handshake,
}

/// `PID/CONNECTION/INDEX` of request `seq` on connection `conn_id` of process `pid`.
pub fn request_id(pid: u32, conn_id: u64, seq: u32) -> String {
    format!("{pid}/{conn_id}/{seq}")
}

/// The pid, connection and index a [`request_id`] names.
pub fn parse_request_id(id: &str) -> Option<(u32, u64, u32)> {
    let mut parts = id.split('/');
    let parsed = (
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
    );
    parts.next().is_none().then_some(parsed)
}

/// The first bytes an HTTP/2 client sends on a connection (RFC 9113, 3.4).
const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// HTTP/2 frame types that belong to the connection, not to a request: PRIORITY, SETTINGS,
/// PING, GOAWAY, WINDOW_UPDATE.
const HTTP2_CONTROL: [u8; 5] = [0x2, 0x4, 0x6, 0x7, 0x8];
/// Bytes of an HTTP/2 frame header.
const HTTP2_FRAME_HEADER: usize = 9;

impl RequestEvent {
    /// `PID/CONNECTION/INDEX`: names the request within one measurement.
    pub fn id(&self) -> String {
        request_id(self.pid, self.conn_id, self.seq)
    }

    /// What an upstream request's [`RequestEvent::caused_by`] names this request by.
    pub fn reference(&self) -> RequestRef {
        RequestRef {
            pid: self.pid,
            conn_id: self.conn_id,
            seq: self.seq,
        }
    }

    /// Whether the event is a request: bytes came in, and they are not HTTP/2 connection
    /// frames alone (the preface with its SETTINGS, SETTINGS acknowledgements, PING, GOAWAY
    /// before the close, ...), which a server reads between requests, and not a TLS handshake.
    /// Over TLS without a hook the frames cannot be read, so such events count as requests.
    pub fn is_request(&self) -> bool {
        if let Some(streams) = self.http2_streams {
            return streams > 0 && self.tls != TlsPart::Handshake;
        }
        self.bytes_in > 0
            && self.tls != TlsPart::Handshake
            && !http2_control(&self.head, self.bytes_in)
    }

    /// How many requests the event holds: one, none, the HTTP/2 streams opened in it, or the
    /// commands the probes counted in it.
    pub fn requests(&self) -> u64 {
        match (self.is_request(), self.http2_streams) {
            (false, _) => 0,
            (true, Some(streams)) => u64::from(streams),
            (true, None) => self.commands.map_or(1, u64::from),
        }
    }

    /// How long the connection took to move the request: first byte in to the request's end,
    /// when a byte came in.
    pub fn serve_ns(&self) -> Option<u64> {
        (self.first_in_ns > 0 && self.end_ns >= self.first_in_ns)
            .then(|| self.end_ns - self.first_in_ns)
    }

    /// The request's lifetime: first byte in to the last the server spent on it, its last
    /// byte out or its last syscall (or CPU charged at one), whichever came later; so the
    /// spinning of a server that polls a slow client's send queue after its last send is
    /// within it. For a request in flight, its time so far: first byte in to the reading.
    pub fn wall_ns(&self) -> Option<u64> {
        if self.in_flight {
            return self.serve_ns();
        }
        let last = self.last_out_ns.max(self.last_ns);
        (self.first_in_ns > 0 && last >= self.first_in_ns).then(|| last - self.first_in_ns)
    }
}

/// A distribution of nanosecond values (per request).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct NsDistribution {
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
    /// Sample standard deviation (n - 1), when there were two values or more: what `check`
    /// judges a change of the mean against. Absent in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stddev: Option<f64>,
}

/// The cost of one group of requests: a class, a client, or a client-speed bucket.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct GroupCost {
    /// Class name, client address, or speed bucket label.
    pub name: String,
    pub requests: u64,
    /// Server CPU attributed to the group's requests.
    pub cpu_ns: u64,
    /// Share of the phase's attributed + unattributed CPU, in percent.
    pub cpu_share_pct: f64,
    /// Connections of the group that ended without a request (no byte in): clients that sent
    /// nothing, and each keep-alive connection's end after its last request. Their CPU is in
    /// `cpu_ns`; the per-request figures below are over `requests` alone.
    #[serde(default)]
    pub no_request: u64,
    /// Requests of the group still in flight when the phase ended (not in `requests`): their
    /// CPU so far is in `cpu_ns` (and `in_flight_cpu_ns`); the per-request figures below are
    /// over the requests that ended (docs/request-attribution.md, "In flight").
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_flight: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_flight_cpu_ns: u64,
    /// Syscalls of those requests so far (not in `syscalls_per_request`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_flight_syscalls: u64,
    /// CPU per request of the group.
    pub cpu_per_request: NsDistribution,
    pub syscalls_per_request: f64,
    pub bytes_in_per_request: f64,
    pub bytes_out_per_request: f64,
    /// Speed buckets only: the clients whose requests fell in it, costliest first (a few).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<String>,
    /// Classes of the front only, when the record follows upstream hops: what the upstream
    /// requests the group's requests caused cost each hop, by hop (docs/stack.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_hop: Vec<HopCost>,
    /// `cpu_ns` plus every hop's `cpu_ns` in `by_hop`: the group's cost across the stack; 0
    /// without hops.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stack_cpu_ns: u64,
}

/// What one upstream hop spent on a front group's requests: the hop's requests linked to them
/// (`caused_by`), however many hops away.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct HopCost {
    pub hop: u8,
    /// The hop's CPU on those requests.
    pub cpu_ns: u64,
    /// The hop's requests linked to the group's (a database's statements): per front request,
    /// this over the group's `requests`.
    pub requests: u64,
    /// Those requests by the hop's own classes, costliest first (a few; the rest `(other)`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<HopClass>,
}

/// One of a hop's own classes within a [`HopCost`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct HopClass {
    pub name: String,
    pub requests: u64,
    pub cpu_ns: u64,
}

/// What a front request's upstream requests cost one hop ([`CostlyRequest::hops`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct CostlyHop {
    pub hop: u8,
    pub cpu_ns: u64,
    pub requests: u64,
}

/// One of a phase's costliest front requests across the stack: its own CPU and what its
/// upstream requests cost each hop (docs/stack.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct CostlyStackRequest {
    /// [`RequestEvent::id`], its class and its client, as [`CostlyRequest`] names them.
    pub id: String,
    pub class: String,
    pub client: String,
    /// The front's own CPU on it, and that plus its hops' parts.
    pub cpu_ns: u64,
    pub stack_cpu_ns: u64,
    pub hops: Vec<CostlyHop>,
}

/// How an upstream hop's request events met the front's requests in a phase: each event's
/// CPU is in exactly one of linked, own and unlinked (docs/stack.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct FrontLinks {
    /// Linked to a front request the phase tallied: charged to its class (`by_hop`).
    pub linked_requests: u64,
    pub linked_cpu_ns: u64,
    /// The hop's own work, caused by no front request: its timers, a pool's keep-alive,
    /// other clients.
    pub own_requests: u64,
    pub own_cpu_ns: u64,
    /// Linked to a front request the phase did not tally: it ended outside the phase, was
    /// no request (a TLS handshake, a protocol's set-up), or its link outlived the bounded
    /// memory of the join (`links_dropped` of them).
    pub unlinked_requests: u64,
    pub unlinked_cpu_ns: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub links_dropped: u64,
}

/// One of a phase's most expensive requests, with what it was and who asked.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct CostlyRequest {
    pub class: String,
    /// What the request was (selector, `METHOD /path`, Gemini path), `(tls)` when encrypted.
    pub request: String,
    pub client: String,
    pub cpu_ns: u64,
    pub syscalls: u32,
    pub top_syscalls: Vec<(String, u32)>,
    /// [`RequestEvent::unlisted_max`]: what proves `top_syscalls` the most made; absent in
    /// records whose probes kept a request's first syscalls only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unlisted_max: Option<u32>,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// [`RequestEvent::wall_ns`]: its lifetime, first byte in to the last the server spent
    /// on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ns: Option<u64>,
    /// [`RequestEvent::id`]: the profile's `request` tag of its samples (docs/profile.md).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Still open when the phase ended: its figures are what it cost so far.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_flight: bool,
    /// A front request's: what its upstream requests cost each hop, as far as they were
    /// linked by the phase's end (it is ranked by the front's CPU, `cpu_ns`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<CostlyHop>,
    /// An upstream hop's request: [`CostlyRequest::id`] of the front request it served, and
    /// that request's class when the phase tallied it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub caused_by: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub front_class: String,
}

/// A phase's requests as the server served them, counted on the server side.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RequestStats {
    /// Requests the server served in the phase (a request finishes when the server reads the
    /// next one on its connection, or at close). Only those with at least one byte in count,
    /// an HTTP/2 connection's preface alone excepted ([`RequestEvent::is_request`]).
    pub requests: u64,
    /// Connections that closed in the phase.
    pub connections: u64,
    /// Requests still open when the phase (or attach window) ended, read from the probes'
    /// connection state: not in `requests` nor in the per-request distributions, their CPU so
    /// far in `in_flight_cpu_ns`, in their groups' CPU and in the costliest list.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_flight: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_flight_cpu_ns: u64,
    /// Request events without a byte in: connections that sent nothing, and the end of each
    /// keep-alive connection after its last request (its end-of-stream read and close); and
    /// HTTP/2 connection prefaces without a request.
    #[serde(default)]
    pub no_request: u64,
    /// Server CPU attributed to requests, and CPU of the tree that belongs to none. Their sum
    /// is the tree's on-CPU time in the phase (docs/request-attribution.md).
    pub attributed_cpu_ns: u64,
    pub unattributed_cpu_ns: u64,
    /// Of the unattributed: threads that had not served a connection (process start-up,
    /// accept threads, garbage collectors, thread pools).
    #[serde(default)]
    pub unserved_cpu_ns: u64,
    /// Of the unattributed: work after a thread's last socket call until it exited, the exit
    /// included (a process freeing its memory and files).
    #[serde(default)]
    pub exit_cpu_ns: u64,
    /// What the probes charged while the server's CPU was being read, at the phase's two ends
    /// together: the server's CPU and the probes' counters cannot be read at one instant, and
    /// reqcost preempted between them (a scheduler slice, ms on a loaded machine) lets a busy
    /// server run in one figure and not the other. With it, how far the probes' lead on the
    /// scheduler's count moved over the phase: the scheduler brings a running thread's count
    /// up to date at ticks only (4 ms at HZ 250) and the probes charge up to its latest event,
    /// so a busy-wait spinning through syscalls at the phase's end is up to a tick further in
    /// the probes' figures than in the server's CPU. The `cpu-total` invariant allows it.
    #[serde(default)]
    pub cpu_reading_skew_ns: u64,
    /// CPU held at the phase's start (docs/request-attribution.md, "Held time"): spent before
    /// the phase and charged in it, to the request whose socket call claimed it or, released,
    /// unattributed. What is held at the phase's end, spent in it for no request of it, is in
    /// `unattributed_cpu_ns`. So attributed + unattributed - this is the phase's CPU.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub held_before_cpu_ns: u64,
    /// CPU of the request events tallied, requests in flight at the end included. Less than
    /// `attributed_cpu_ns` by the CPU of dropped events and of what the in-flight reading
    /// could not see; more when requests that finished in the phase began before it.
    #[serde(default)]
    pub tallied_cpu_ns: u64,
    /// CPU per request over all requests of the phase.
    pub cpu_per_request: NsDistribution,
    /// By request class (`--class` or the request's path), most expensive first.
    pub by_class: Vec<GroupCost>,
    /// By client address, most expensive first.
    pub by_client: Vec<GroupCost>,
    /// By client speed: bytes out per second of wall time, in buckets, slowest first.
    pub by_speed: Vec<GroupCost>,
    /// The most expensive requests, most expensive first.
    pub costliest: Vec<CostlyRequest>,
    /// Events the kernel could not hand over (ring buffer full): counted, never silent.
    pub events_dropped: u64,
    /// Syscalls counted on their request but on no syscall of it: the probes' table of
    /// syscalls beyond a request's slots was full. Each widens its request's `unlisted_max`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub syscalls_unranked: u64,
    /// Most distinct classes, and clients, kept apart; requests of any further one are
    /// counted under `(other)` (`classes_over_cap`, `clients_over_cap` of them), so memory
    /// stays bounded for any duration.
    #[serde(default)]
    pub key_cap: u64,
    #[serde(default)]
    pub classes_over_cap: u64,
    #[serde(default)]
    pub clients_over_cap: u64,
    /// Requests counted on TLS records: the server's TLS library was not hooked, so their
    /// boundaries follow the ciphertext (a handshake counts as a request) and what they asked
    /// for cannot be read (docs/tls.md).
    #[serde(default)]
    pub tls_ciphertext: u64,
    /// Connections that opened with the HTTP/2 preface on the socket (h2c): their streams are
    /// multiplexed, and requests follow reads after writes, not streams.
    #[serde(default)]
    pub http2_connections: u64,
    /// HTTP/2 requests counted from their frames whose header block could not be decoded (a
    /// piece of the connection's header blocks was lost, so its HPACK table is not trusted):
    /// class `(http2)`, not their path.
    #[serde(default)]
    pub http2_unnamed: u64,
    /// HTTP/2 connections whose frames the probes lost (a frame header split between reads, a
    /// read whose buffer is not known): streams they opened afterwards are not counted.
    #[serde(default)]
    pub http2_lost: u64,
    /// TLS handshakes seen apart from requests (everything on a connection before its first
    /// plaintext, with a hook on its TLS library): neither requests nor a class. Their CPU is
    /// in `tallied_cpu_ns` and the shares' denominator, in no class or client row.
    #[serde(default)]
    pub tls_handshakes: u64,
    #[serde(default)]
    pub tls_handshake_cpu_ns: u64,
    /// Of `tls_handshakes`, those the TLS library said resumed an earlier session, and those it
    /// said were full, each with their CPU; the rest were not told apart (docs/tls.md).
    #[serde(default)]
    pub tls_resumed_handshakes: u64,
    #[serde(default)]
    pub tls_resumed_handshake_cpu_ns: u64,
    #[serde(default)]
    pub tls_full_handshakes: u64,
    #[serde(default)]
    pub tls_full_handshake_cpu_ns: u64,
    /// A protocol's connection set-up turns (PostgreSQL's SSLRequest, startup packet,
    /// authentication and Terminate; a greeting the server wrote before reading anything, and
    /// MySQL's handshake response, authentication rounds and COM_QUIT): neither requests nor
    /// a class, like TLS handshakes; their
    /// CPU is in `tallied_cpu_ns` and the shares' denominator, in no class or client row.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub setup_turns: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub setup_cpu_ns: u64,
    /// Requests on a connection of a recognised protocol (PostgreSQL, Redis, MySQL) whose
    /// messages could not be read (broken framing, or cut before what names them): counted, in
    /// the class `(unparsed PROTOCOL)`, never classed by guess.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unparsed_requests: u64,
    /// Requests (turns) that held more than one command or query of their protocol (a
    /// pipeline) whose commands the probes could not count: each counted as one request,
    /// classed by its first.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pipelined_turns: u64,
    /// HTTP/3 requests the server answered, counted by a uprobe on its libnghttp3 (one per
    /// response submitted): requests inside QUIC, which the socket probes cannot see. Exact
    /// over the whole phase (never scaled: the uprobe stays while the other probes pause).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub http3_requests: u64,
    /// Turns on connections the server opened itself to call an upstream
    /// ([`RequestEvent::upstream_call`]): calls made for its requests, no requests of its own
    /// (not in `requests` nor `no_request`, in no class or client row). Their CPU, what the
    /// probes did not charge to the request being served, is in `tallied_cpu_ns`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub upstream_calls: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub upstream_call_cpu_ns: u64,
    /// With upstream hops: the front's most expensive requests across the stack, most
    /// expensive first (docs/stack.md); `costliest` stays ranked by the front's own CPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stack_costliest: Vec<CostlyStackRequest>,
    /// An upstream hop's figures only: how its requests met the front's (docs/stack.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub front_links: Option<FrontLinks>,
}

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Whether `head`, the first bytes of `bytes_in` read, is HTTP/2 connection frames alone
/// (after the connection preface, if it starts with one): whole frames of the control types
/// that cover every byte read, as far as `head` holds them.
fn http2_control(head: &[u8], bytes_in: u64) -> bool {
    let (mut frames, preface) = match head.strip_prefix(HTTP2_PREFACE) {
        Some(rest) => (rest, true),
        None => (head, false),
    };
    let truncated = (head.len() as u64) < bytes_in;
    if frames.is_empty() {
        return preface && !truncated;
    }
    while frames.len() >= HTTP2_FRAME_HEADER {
        if !HTTP2_CONTROL.contains(&frames[3]) {
            return false;
        }
        let len = u32::from_be_bytes([0, frames[0], frames[1], frames[2]]) as usize;
        match frames.get(HTTP2_FRAME_HEADER + len..) {
            Some(rest) => frames = rest,
            None => return truncated,
        }
    }
    frames.is_empty() && !truncated
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_parse_back() {
        assert_eq!(parse_request_id(&request_id(7, 12, 3)), Some((7, 12, 3)));
        for bad in ["", "7/12", "7/12/3/4", "7/x/3", "-1/2/3"] {
            assert_eq!(parse_request_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn http2_connection_frames_alone_are_no_request() {
        let control = |head: &[u8]| http2_control(head, head.len() as u64);
        let settings = [0, 0, 6, 0x4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100];
        let headers = [0, 0, 2, 0x1, 0x5, 0, 0, 0, 1, 0x82, 0x84];
        let goaway = [0, 0, 8, 0x7, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        let setup = [HTTP2_PREFACE, &settings[..]].concat();
        assert!(control(&setup));
        assert!(control(&goaway));
        assert!(!control(&[setup.as_slice(), &headers[..]].concat()));
        assert!(!control(&headers));
        assert!(!control(b"GET / HTTP/1.1\r\n"));
        assert!(!control(&goaway[..12]), "a frame cut short is not HTTP/2");
        assert!(!http2_control(&goaway, 40), "bytes beyond whole frames");
    }
}
