//! Per-request accounting as the kernel hands it over: finished requests from the `requests`
//! ring buffer, decoded into [`RequestEvent`], and the cumulative counters beside them.

#[cfg(target_arch = "x86_64")]
pub(crate) use decode::{counters, event, open_request};

/// Cumulative figures of the per-request accounting since the probes were attached; a phase
/// takes the difference of two reads ([`RequestCounters::since`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestCounters {
    /// On-CPU time of the tree charged to a request.
    pub attributed_ns: u64,
    /// On-CPU time of the tree that no request was charged with: held time (after a wait, a
    /// write or a close) that no later socket call claimed, and time on a connection not followed.
    pub unattributed_ns: u64,
    /// Of `unattributed_ns`: time held after a thread's last socket call until it exited
    /// (processes and threads that never served, a per-connection process's exit).
    pub exit_ns: u64,
    /// Of `unattributed_ns`: time of threads that had not served a connection yet (process
    /// start-up, accept threads, garbage collectors, thread pools).
    pub unserved_ns: u64,
    /// Requests handed to user space.
    pub events: u64,
    /// Requests lost because the ring buffer was full (user space drained it too rarely).
    pub dropped: u64,
    /// Connections not followed because the connection table was full: their time is
    /// unattributed and their requests are missing.
    pub conn_overflow: u64,
    /// Syscalls counted on their request but on no syscall of it (the table of syscalls
    /// beyond a request's slots was full).
    pub unranked: u64,
    /// HTTP/3 responses the tree's libnghttp3 submitted (one per request stream), counted
    /// whether the probes are paused or not.
    pub http3_responses: u64,
    /// CPU held at the (later) reading: spent, and in neither `attributed_ns` nor
    /// `unattributed_ns` until a socket call claims it or it is released. A level, not a
    /// count: [`RequestCounters::since`] keeps it as read at the window's end.
    pub held_ns: u64,
    /// What was held at a window's start ([`RequestCounters::since`]; 0 on a reading): spent
    /// before the window, and in its `attributed_ns` or `unattributed_ns` once charged.
    pub held_before_ns: u64,
    /// What the counters hold beyond the scheduler's count of the tree's threads, as of each
    /// thread's latest event (attribution.bpf.h, `set_lead`): a level, signed, read at the
    /// window's end by [`RequestCounters::since`], as `held_ns`.
    pub lead_ns: i64,
    /// The lead at a window's start ([`RequestCounters::since`]; 0 on a reading).
    pub lead_before_ns: i64,
}

impl RequestCounters {
    pub fn since(&self, earlier: &RequestCounters) -> RequestCounters {
        RequestCounters {
            attributed_ns: self.attributed_ns - earlier.attributed_ns,
            unattributed_ns: self.unattributed_ns - earlier.unattributed_ns,
            exit_ns: self.exit_ns - earlier.exit_ns,
            unserved_ns: self.unserved_ns - earlier.unserved_ns,
            events: self.events - earlier.events,
            dropped: self.dropped - earlier.dropped,
            conn_overflow: self.conn_overflow - earlier.conn_overflow,
            unranked: self.unranked - earlier.unranked,
            http3_responses: self.http3_responses - earlier.http3_responses,
            held_ns: self.held_ns,
            held_before_ns: earlier.held_ns,
            lead_ns: self.lead_ns,
            lead_before_ns: earlier.lead_ns,
        }
    }

    /// Of a window ([`RequestCounters::since`]): how much more, or less, its counters grew than
    /// the scheduler's count of the tree's threads in it, which is what its CPU reads.
    pub fn lead_change_ns(&self) -> u64 {
        self.lead_ns.abs_diff(self.lead_before_ns)
    }

    /// The tree's on-CPU time, attributed or not.
    pub fn total_ns(&self) -> u64 {
        self.attributed_ns + self.unattributed_ns
    }
}

#[cfg(target_arch = "x86_64")]
mod decode {
    use std::borrow::Cow;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

    use reqcost_record::{RequestEvent, RequestRef, TlsPart};

    use super::RequestCounters;
    use crate::bpf::types::req_event;
    use crate::layout::req_counter;
    use crate::names;

    const AF_INET: u16 = 2;
    const AF_UNIX: u16 = 1;

    /// The counters of the `req_ctr` map, summed over CPUs.
    pub(crate) fn counters(raw: &[u64]) -> RequestCounters {
        let ctr = |c: req_counter| raw[c.at()];
        RequestCounters {
            attributed_ns: ctr(req_counter::RCTR_ATTRIBUTED_NS),
            unattributed_ns: ctr(req_counter::RCTR_UNATTRIBUTED_NS),
            events: ctr(req_counter::RCTR_EVENTS),
            dropped: ctr(req_counter::RCTR_DROPPED),
            conn_overflow: ctr(req_counter::RCTR_CONN_OVERFLOW),
            unranked: ctr(req_counter::RCTR_UNRANKED),
            exit_ns: ctr(req_counter::RCTR_EXIT_NS),
            unserved_ns: ctr(req_counter::RCTR_UNSERVED_NS),
            http3_responses: 0,
            held_ns: ctr(req_counter::RCTR_HELD_NS),
            held_before_ns: 0,
            lead_ns: ctr(req_counter::RCTR_LEAD_NS) as i64,
            lead_before_ns: 0,
        }
    }

    pub(crate) fn event(e: &req_event) -> RequestEvent {
        let r = &e.req;
        let mut top_syscalls: Vec<(Cow<'static, str>, u32)> = r
            .top
            .iter()
            .filter(|s| s.id_plus_one != 0 && s.count != 0)
            .map(|s| (names::syscall_label(s.id_plus_one - 1), s.count))
            .collect();
        // Stable: equal counts keep the order in which the request first made them.
        top_syscalls.sort_by_key(|s| std::cmp::Reverse(s.1));
        RequestEvent {
            pid: e.pid,
            conn_id: e.conn_id,
            seq: e.seq,
            peer: SocketAddr::new(peer_ip(e), e.peer_port),
            local_port: e.local_port,
            cpu_ns: r.cpu_ns,
            syscalls: r.syscalls,
            top_syscalls,
            unlisted_max: Some(r.unlisted_max),
            bytes_in: r.bytes_in,
            bytes_out: r.bytes_out,
            first_in_ns: r.first_in_ns,
            last_out_ns: r.last_out_ns,
            end_ns: r.end_ns,
            last_ns: r.last_ns,
            head: r.head[..(r.head_len as usize).min(r.head.len())].to_vec(),
            closed: e.closed != 0,
            tls: tls_part(e.tls),
            tls_resumed: resumed(e.tls),
            http2_streams: (e.tls & H2 != 0).then_some(r.h2_streams),
            http2_lost: false,
            commands: (r.wire_requests > 0 && r.wire_lost == 0).then_some(r.wire_requests),
            in_flight: false,
            unacked_out: 0,
            caused_by: (e.caused_by.conn_id != 0).then_some(RequestRef {
                pid: e.caused_by.pid,
                conn_id: e.caused_by.conn_id,
                seq: e.caused_by.seq,
            }),
            hop: e.hop,
            upstream_call: e.upstream_call != 0,
        }
    }

    /// The request a connection has open, read at `now` (CLOCK_MONOTONIC ns): in flight, its
    /// end the reading.
    pub(crate) fn open_request(e: &req_event, now: u64) -> RequestEvent {
        RequestEvent {
            end_ns: now,
            closed: false,
            in_flight: true,
            ..event(e)
        }
    }

    /// TLS_H2 of reqcost.h.
    const H2: u8 = 8;

    /// The TLS_* flags of reqcost.h.
    fn tls_part(flags: u8) -> TlsPart {
        const SEEN: u8 = 1;
        const PLAIN: u8 = 2;
        const HANDSHAKE: u8 = 4;
        if flags & HANDSHAKE != 0 {
            TlsPart::Handshake
        } else if flags & PLAIN != 0 {
            TlsPart::Plaintext
        } else if flags & SEEN != 0 {
            TlsPart::Ciphertext
        } else {
            TlsPart::None
        }
    }

    /// TLS_RESUMED and TLS_FULL of reqcost.h: a handshake's kind, when its library told.
    fn resumed(flags: u8) -> Option<bool> {
        const RESUMED: u8 = 32;
        const FULL: u8 = 64;
        if flags & RESUMED != 0 {
            Some(true)
        } else if flags & FULL != 0 {
            Some(false)
        } else {
            None
        }
    }

    /// IPv4 peers of IPv6 sockets (::ffff:a.b.c.d) are given as IPv4, as clients know them.
    /// A Unix socket's peer has no address: 0.0.0.0, port 0 (docs/stack.md).
    fn peer_ip(e: &req_event) -> IpAddr {
        if e.family == AF_UNIX {
            return IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        }
        if e.family == AF_INET {
            let [a, b, c, d, ..] = e.peer_addr;
            return IpAddr::V4(Ipv4Addr::new(a, b, c, d));
        }
        IpAddr::V6(Ipv6Addr::from(e.peer_addr)).to_canonical()
    }
}
