//! [`RequestTally`]: one phase's request events aggregated into its [`RequestStats`] in bounded
//! memory (groups by class, client and speed, capped; the costliest requests in a heap).

use std::borrow::Borrow;
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::hash::Hash;
use std::net::IpAddr;

use hdrhistogram::Histogram;
use regex::Regex;
use reqcost_record::{
    parse_request_id, request_id, CostlyRequest, GroupCost, HopPhase, NsDistribution, RequestEvent,
    RequestRef, RequestStats, TlsPart,
};

use super::head::{write_request_label, RequestHead};
use super::speed::{speed_bucket, SPEED_BUCKETS, SPEED_UNKNOWN};
use super::stack::{add_part, Charge, HopParts, Links, Part};
use super::wire::{OpenConnections, Turn};
use super::{CONNECTION_SETUP, KEY_CAP, OTHER, TLS_HANDSHAKE, UPSTREAM_CALL};

/// Settings of a [`RequestTally`].
#[derive(Debug, Clone)]
pub struct TallyOptions {
    /// The workload's protocol as the record names it (`gopher`, `http`, ...); any other
    /// string (e.g. empty, when attached) when unknown.
    pub protocol: String,
    /// `--class NAME=REGEX` in the order given: a request belongs to the first that matches
    /// its target ([`RequestHead::target`]); requests of none go to `(other)`. Without classes,
    /// requests group by their label ([`RequestHead::write_label`]).
    pub classes: Vec<(String, Regex)>,
    /// Rows kept in the class and client tables, by CPU; the rest is merged into `(other)`.
    pub top_groups: usize,
    /// How many of the most expensive requests are kept.
    pub costliest: usize,
    /// Distinct classes, and clients, tracked at most.
    pub key_cap: usize,
    /// Names shown for client addresses instead of the addresses: the logged clients a replay's
    /// loopback addresses stand for.
    pub client_names: HashMap<IpAddr, String>,
    /// The probes follow the front's requests into upstream hops: remember each front request
    /// from the phase's start for the upstream requests that end after it (docs/stack.md).
    /// Off, the join starts at the first upstream event, and a phase without any pays nothing
    /// for it (the remembering halved the tally's rate of front events).
    pub follow_hops: bool,
}

impl TallyOptions {
    /// Options for a workload's protocol and its `--class NAME=REGEX` classes.
    pub fn new(protocol: &str, classes: &[(&str, &str)]) -> Result<TallyOptions, String> {
        let classes = classes
            .iter()
            .map(|(name, re)| {
                let regex = Regex::new(re).map_err(|e| format!("--class {name}: {e}"))?;
                Ok((name.to_string(), regex))
            })
            .collect::<Result<_, String>>()?;
        Ok(TallyOptions {
            protocol: protocol.to_string(),
            classes,
            ..TallyOptions::default()
        })
    }
}

impl Default for TallyOptions {
    fn default() -> Self {
        TallyOptions {
            protocol: String::new(),
            classes: Vec::new(),
            top_groups: 10,
            costliest: 10,
            key_cap: KEY_CAP,
            client_names: HashMap::new(),
            follow_hops: false,
        }
    }
}

/// The kernel's counters over a phase for one hop's tree: attributed and unattributed CPU
/// (their sum is the tree's CPU, the denominator of every share), and the events the ring
/// buffer could not take.
#[derive(Debug, Clone, Copy, Default)]
pub struct TallyCounters {
    pub attributed_ns: u64,
    pub unattributed_ns: u64,
    pub dropped: u64,
}

/// A phase's requests across the stack: the front's, and each upstream hop's own with its
/// `front_links` (its `cpu` left for the measurement to set).
#[derive(Debug, Clone)]
pub struct StackStats {
    pub front: RequestStats,
    pub hops: Vec<HopPhase>,
}

/// Aggregates one phase's request events into its [`RequestStats`] in bounded memory: HDR
/// histograms overall and per group, at most `key_cap` classes and clients, a heap of the
/// costliest requests. Whatever the phase's length or the variety of its requests.
///
/// With upstream hops (docs/stack.md) the front's tally, made with
/// [`TallyOptions::follow_hops`], takes every hop's events, in the order they end:
/// [`RequestTally::add`] routes each by its `hop`, into that hop's own tally and,
/// through its `caused_by`, into the front class it served; [`RequestTally::finish_stack`]
/// gives the front's figures and each hop's.
pub struct RequestTally {
    options: TallyOptions,
    /// The hop whose events are this tally's own: 0 for the front, which routes the others.
    hop: u8,
    overall: Group,
    connections: u64,
    classes: Capped<String>,
    clients: Capped<IpAddr>,
    speeds: Vec<SpeedGroup>,
    costliest: Costliest,
    events: u64,
    tls_ciphertext: u64,
    http2_connections: u64,
    http2_unnamed: u64,
    http2_lost: u64,
    tls_handshakes: u64,
    tls_handshake_cpu_ns: u64,
    /// Handshakes and their CPU by kind, where the TLS library told: [full, resumed].
    tls_kinds: [(u64, u64); 2],
    setup_turns: u64,
    setup_cpu_ns: u64,
    unparsed_requests: u64,
    pipelined_turns: u64,
    upstream_calls: u64,
    upstream_call_cpu_ns: u64,
    /// The front's: each upstream hop's own tally, and the join of their requests to the
    /// front's.
    hops: BTreeMap<u8, RequestTally>,
    links: Links,
    /// Reused for an upstream event's class at its hop, which `add` returns.
    upstream_class: String,
    /// The open connections of a recognised protocol: what their later turns are read as.
    open: OpenConnections,
    /// Reused for each event's label, so that a request that groups with earlier ones
    /// allocates nothing.
    label: String,
}

impl RequestTally {
    pub fn new(options: TallyOptions) -> RequestTally {
        RequestTally::of_hop(0, options)
    }

    fn of_hop(hop: u8, options: TallyOptions) -> RequestTally {
        RequestTally {
            hop,
            upstream_calls: 0,
            upstream_call_cpu_ns: 0,
            hops: BTreeMap::new(),
            links: Links::new(options.costliest),
            upstream_class: String::new(),
            overall: Group::new(),
            connections: 0,
            classes: Capped::new(options.key_cap),
            clients: Capped::new(options.key_cap),
            speeds: (0..=SPEED_BUCKETS.len())
                .map(|_| SpeedGroup::new(options.key_cap))
                .collect(),
            costliest: Costliest::new(options.costliest),
            events: 0,
            tls_ciphertext: 0,
            http2_connections: 0,
            http2_unnamed: 0,
            http2_lost: 0,
            tls_handshakes: 0,
            tls_handshake_cpu_ns: 0,
            tls_kinds: [(0, 0); 2],
            setup_turns: 0,
            setup_cpu_ns: 0,
            unparsed_requests: 0,
            pipelined_turns: 0,
            open: OpenConnections::default(),
            label: String::new(),
            options,
        }
    }

    /// Tallies one event of any hop; returns the class it was filed under (its `--class`, its
    /// label without classes, or `(other)`), as its hop's class rows name it; a TLS handshake
    /// is no request and in no class: [`TLS_HANDSHAKE`]; nor is a protocol's connection
    /// set-up: [`CONNECTION_SETUP`], nor a turn on a connection the server opened to call an
    /// upstream: [`UPSTREAM_CALL`].
    ///
    /// An upstream hop's event (`hop` > 0) goes to that hop's own tally (by its own classes:
    /// `--class` is the front's) and, with `caused_by`, to the front class of the request it
    /// served, whether that request ended before it or ends later in the phase; without,
    /// it is the hop's own work (docs/stack.md).
    pub fn add(&mut self, ev: &RequestEvent) -> &str {
        if ev.hop == self.hop {
            return self.add_own(ev);
        }
        let tally = self
            .hops
            .entry(ev.hop)
            .or_insert_with(|| RequestTally::of_hop(ev.hop, hop_options(&self.options)));
        self.upstream_class.clear();
        self.upstream_class.push_str(tally.add_own(ev));
        if !ev.upstream_call {
            let mut to = FrontCharge {
                classes: &mut self.classes,
                costliest: &mut self.costliest,
            };
            self.links.upstream(ev, &self.upstream_class, &mut to);
        }
        &self.upstream_class
    }

    /// Remembers each front request from now on ([`TallyOptions::follow_hops`]): an upstream
    /// was found within the phase.
    pub fn follow_hops(&mut self) {
        self.options.follow_hops = true;
    }

    /// Whether `ev`, added next, would enter the costliest list of its hop. One that would not
    /// never will: the list only ever drops its cheapest for a costlier one.
    pub fn may_be_costliest(&self, ev: &RequestEvent) -> bool {
        if ev.hop != self.hop {
            return self
                .hops
                .get(&ev.hop)
                .map_or(ev.is_request(), |t| t.may_be_costliest(ev));
        }
        ev.is_request() && self.costliest.would_take(ev.cpu_ns)
    }

    /// Tallies an event of this tally's own hop.
    fn add_own(&mut self, ev: &RequestEvent) -> &str {
        self.events += 1;
        if ev.upstream_call {
            self.upstream_calls += 1;
            self.upstream_call_cpu_ns += ev.cpu_ns;
            self.overall.cpu_ns += ev.cpu_ns;
            return UPSTREAM_CALL;
        }
        if ev.tls == TlsPart::Handshake {
            self.tls_handshakes += 1;
            self.tls_handshake_cpu_ns += ev.cpu_ns;
            if let Some(resumed) = ev.tls_resumed {
                let kind = &mut self.tls_kinds[usize::from(resumed)];
                kind.0 += 1;
                kind.1 += ev.cpu_ns;
            }
            self.overall.cpu_ns += ev.cpu_ns;
            return TLS_HANDSHAKE;
        }
        self.connections += u64::from(ev.closed);
        self.label.clear();
        let connection = (ev.pid, ev.conn_id);
        let known = self.open.protocol(connection);
        let head = write_request_label(ev, &self.options.protocol, known, &mut self.label);
        let wire = match head {
            Some(RequestHead::Wire(wire)) => Some(wire),
            _ => None,
        };
        self.open
            .turn(connection, ev.closed, wire.as_ref(), &mut self.label);
        if wire.is_some_and(|w| w.is_setup()) || server_spoke_first(ev) {
            self.setup_turns += 1;
            self.setup_cpu_ns += ev.cpu_ns;
            self.overall.cpu_ns += ev.cpu_ns;
            return CONNECTION_SETUP;
        }
        self.overall.add(ev);
        if let Some(wire) = wire.filter(|_| ev.is_request() && !ev.in_flight) {
            self.unparsed_requests += u64::from(matches!(wire.turn, Turn::Unparsed(_)));
            // A pipeline whose commands the probes counted is that many requests already.
            self.pipelined_turns += u64::from(wire.pipelined && ev.commands.is_none());
        }
        // Counted as the requests are: one still in flight at the phase's end is not one.
        if ev.is_request() && !ev.in_flight && head == Some(RequestHead::Tls) {
            self.tls_ciphertext += 1;
        }
        if ev.http2_streams.is_none() && head.is_some_and(|h| h.is_http2_preface()) {
            self.http2_connections += 1;
        }
        if ev.http2_streams.is_some() && ev.head.is_empty() {
            self.http2_unnamed += ev.requests();
        }
        self.http2_lost += u64::from(ev.http2_lost);
        let class = class_of(&self.options.classes, head, &self.label);
        match class {
            Some(name) => self.classes.entry(name).add(ev),
            None => self.classes.other.add(ev),
        }
        let client = ev.peer.ip().to_canonical();
        self.clients.entry(&client).add(ev);
        self.speeds[speed_bucket(ev)].add(client, ev);
        let remembered = self.hop == 0 && (self.options.follow_hops || !self.hops.is_empty());
        // The row it was filed under: a class beyond the key cap went to `(other)`.
        let filed = class.filter(|name| remembered && self.classes.groups.contains_key(*name));
        let class = class.unwrap_or(OTHER);
        if ev.is_request() {
            self.costliest.consider(self.events, ev, class, &self.label);
        }
        // A front request is remembered once hops are followed, or have shown themselves.
        if remembered {
            let mut to = FrontCharge {
                classes: &mut self.classes,
                costliest: &mut self.costliest,
            };
            self.links.front(ev, filed, &mut to);
        }
        class
    }

    /// The phase's figures across the stack: the front's over `front`, each upstream hop's
    /// over its own counters in `hops` (a hop with events and no counters has them at 0,
    /// which the invariants then flag).
    pub fn finish_stack(
        mut self,
        front: TallyCounters,
        hops: &[(u8, TallyCounters)],
    ) -> StackStats {
        let mut tallies = std::mem::take(&mut self.hops);
        for (hop, _) in hops {
            tallies
                .entry(*hop)
                .or_insert_with(|| RequestTally::of_hop(*hop, hop_options(&self.options)));
        }
        let mut links = std::mem::take(&mut self.links);
        let mut hop_stats: Vec<(u8, RequestStats)> = tallies
            .into_iter()
            .map(|(hop, tally)| {
                let c = hops
                    .iter()
                    .find(|(h, _)| *h == hop)
                    .map(|(_, c)| *c)
                    .unwrap_or_default();
                let mut stats = tally.finish(c.attributed_ns, c.unattributed_ns, c.dropped);
                for c in &mut stats.costliest {
                    let front = parse_request_ref(&c.caused_by);
                    if let Some(class) = front.and_then(|f| links.class_of(&f)) {
                        c.front_class = class.to_string();
                    }
                }
                (hop, stats)
            })
            .collect();
        // What still waits for a front request is unlinked once the phase is over.
        let mut front_links = links.finish();
        for (hop, stats) in &mut hop_stats {
            stats.front_links = Some(front_links.remove(hop).unwrap_or_default());
        }
        let names = &self.options.client_names;
        let dearest = links.dearest(|ip| client_name(names, ip));
        let mut front_stats =
            self.finish(front.attributed_ns, front.unattributed_ns, front.dropped);
        // Without hops the list would be `costliest` again.
        if !hop_stats.is_empty() {
            front_stats.stack_costliest = dearest;
        }
        StackStats {
            front: front_stats,
            hops: hop_stats
                .into_iter()
                .map(|(hop, stats)| HopPhase {
                    hop,
                    requests: Some(stats),
                    ..HopPhase::default()
                })
                .collect(),
        }
    }

    /// The phase's figures of this tally's own hop ([`RequestTally::finish_stack`] for the
    /// upstream hops'). `attributed_ns` and `unattributed_ns` are the kernel's counters over
    /// the phase (their sum is the tree's CPU, the denominator of every share); `dropped` the
    /// events the ring buffer could not take.
    pub fn finish(self, attributed_ns: u64, unattributed_ns: u64, dropped: u64) -> RequestStats {
        let total = attributed_ns + unattributed_ns;
        let top = self.options.top_groups;
        let classes_over_cap = self.classes.over_cap;
        let clients_over_cap = self.clients.over_cap;
        let names = &self.options.client_names;
        let mut costliest = self.costliest.into_sorted();
        for c in &mut costliest {
            if let Some(name) = c.client.parse().ok().and_then(|ip| names.get(&ip)) {
                c.client = name.clone();
            }
        }
        RequestStats {
            requests: self.overall.requests,
            connections: self.connections,
            in_flight: self.overall.in_flight,
            in_flight_cpu_ns: self.overall.in_flight_cpu_ns,
            no_request: self.overall.no_request,
            attributed_cpu_ns: attributed_ns,
            unattributed_cpu_ns: unattributed_ns,
            // Parts of the unattributed the probes' counters tell; the reader of them sets these.
            unserved_cpu_ns: 0,
            exit_cpu_ns: 0,
            cpu_reading_skew_ns: 0,
            held_before_cpu_ns: 0,
            tallied_cpu_ns: self.overall.cpu_ns,
            cpu_per_request: self.overall.distribution(),
            by_class: self.classes.rows(top, total, |name| name),
            by_client: self.clients.rows(top, total, |ip| client_name(names, &ip)),
            by_speed: speed_rows(self.speeds, total, names),
            costliest,
            events_dropped: dropped,
            // Counted by the probes: the reader of their counters sets it.
            syscalls_unranked: 0,
            key_cap: self.options.key_cap as u64,
            classes_over_cap,
            clients_over_cap,
            tls_ciphertext: self.tls_ciphertext,
            http2_connections: self.http2_connections,
            http2_unnamed: self.http2_unnamed,
            http2_lost: self.http2_lost,
            tls_handshakes: self.tls_handshakes,
            tls_handshake_cpu_ns: self.tls_handshake_cpu_ns,
            tls_full_handshakes: self.tls_kinds[0].0,
            tls_full_handshake_cpu_ns: self.tls_kinds[0].1,
            setup_turns: self.setup_turns,
            setup_cpu_ns: self.setup_cpu_ns,
            unparsed_requests: self.unparsed_requests,
            pipelined_turns: self.pipelined_turns,
            tls_resumed_handshakes: self.tls_kinds[1].0,
            tls_resumed_handshake_cpu_ns: self.tls_kinds[1].1,
            // Counted by the probes' nghttp3 uprobe, not from events: the reader sets it.
            http3_requests: 0,
            upstream_calls: self.upstream_calls,
            upstream_call_cpu_ns: self.upstream_call_cpu_ns,
            // Set by the front's tally, which joins the hops' requests to its own.
            front_links: None,
            stack_costliest: Vec::new(),
        }
    }
}

/// The requests of one class, client or speed bucket.
struct Group {
    requests: u64,
    no_request: u64,
    /// Requests still open at the phase's end, and their CPU so far (in `cpu_ns` too): in no
    /// per-request figure, which are over requests that ended.
    in_flight: u64,
    in_flight_cpu_ns: u64,
    in_flight_syscalls: u64,
    /// Every event's CPU, with or without a request.
    cpu_ns: u64,
    request_cpu_ns: u64,
    max_ns: u64,
    syscalls: u64,
    bytes_in: u64,
    bytes_out: u64,
    /// CPU per request to 2 significant digits (1 %), grown to the largest value seen: about
    /// 10 KiB for requests up to 100 ms, so that a thousand groups fit in tens of MiB. Its
    /// 32-bit counts saturate at 4 billion requests in one 1 % bucket.
    hist: Histogram<u32>,
    /// Sum of the squares of the requests' CPU (ns²), for their standard deviation.
    request_cpu_sq: f64,
    /// A front class's: what its requests caused at the upstream hops.
    hops: HopParts,
}

impl Group {
    fn new() -> Group {
        Group {
            requests: 0,
            no_request: 0,
            in_flight: 0,
            in_flight_cpu_ns: 0,
            in_flight_syscalls: 0,
            cpu_ns: 0,
            request_cpu_ns: 0,
            max_ns: 0,
            syscalls: 0,
            bytes_in: 0,
            bytes_out: 0,
            hist: Histogram::new(2).expect("2 significant digits are valid"),
            request_cpu_sq: 0.0,
            hops: HopParts::default(),
        }
    }

    /// An event of several requests (HTTP/2 streams opened between two of the connection's
    /// boundaries) gives each an equal share of its CPU (docs/tls.md).
    fn add(&mut self, ev: &RequestEvent) {
        self.cpu_ns += ev.cpu_ns;
        let n = ev.requests();
        if ev.in_flight {
            // An open connection that has read nothing yet is no request in flight; its CPU
            // still counts where it was spent.
            self.in_flight += n;
            self.in_flight_cpu_ns += ev.cpu_ns;
            self.in_flight_syscalls += u64::from(ev.syscalls);
            return;
        }
        if n == 0 {
            self.no_request += 1;
            return;
        }
        let each = ev.cpu_ns / n;
        self.requests += n;
        self.request_cpu_ns += ev.cpu_ns;
        // The event's n requests count as n values of `each`, as the histogram records them.
        self.request_cpu_sq += n as f64 * (each as f64).powi(2);
        self.max_ns = self.max_ns.max(each);
        self.syscalls += u64::from(ev.syscalls);
        self.bytes_in += ev.bytes_in;
        self.bytes_out += ev.bytes_out;
        self.hist
            .record_n(each, u32::try_from(n).unwrap_or(u32::MAX))
            .expect("an auto-resizing histogram takes any u64 on a 64-bit machine");
    }

    fn merge(&mut self, other: Group) {
        self.requests += other.requests;
        self.no_request += other.no_request;
        self.in_flight += other.in_flight;
        self.in_flight_cpu_ns += other.in_flight_cpu_ns;
        self.in_flight_syscalls += other.in_flight_syscalls;
        self.cpu_ns += other.cpu_ns;
        self.request_cpu_ns += other.request_cpu_ns;
        self.request_cpu_sq += other.request_cpu_sq;
        self.max_ns = self.max_ns.max(other.max_ns);
        self.syscalls += other.syscalls;
        self.bytes_in += other.bytes_in;
        self.bytes_out += other.bytes_out;
        self.hist
            .add(&other.hist)
            .expect("auto-resizing histograms take any other's values");
        self.hops.merge(other.hops);
    }

    fn is_empty(&self) -> bool {
        self.requests + self.no_request + self.in_flight == 0
            && self.cpu_ns == 0
            && self.hops.is_empty()
    }

    fn distribution(&self) -> NsDistribution {
        if self.requests == 0 {
            return NsDistribution::default();
        }
        // The histogram reports the top of a value's bucket, which may lie above the largest
        // value recorded.
        let at = |q: f64| self.hist.value_at_quantile(q).min(self.max_ns);
        let n = self.requests as f64;
        let mean = self.request_cpu_ns as f64 / n;
        NsDistribution {
            mean,
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            max: self.max_ns,
            stddev: (self.requests > 1)
                .then(|| ((self.request_cpu_sq - n * mean * mean).max(0.0) / (n - 1.0)).sqrt()),
        }
    }

    fn cost(&self, name: String, total_ns: u64) -> GroupCost {
        let per_request = |v: u64| v as f64 / self.requests.max(1) as f64;
        GroupCost {
            name,
            requests: self.requests,
            cpu_ns: self.cpu_ns,
            cpu_share_pct: percent(self.cpu_ns, total_ns),
            no_request: self.no_request,
            in_flight: self.in_flight,
            in_flight_cpu_ns: self.in_flight_cpu_ns,
            in_flight_syscalls: self.in_flight_syscalls,
            cpu_per_request: self.distribution(),
            syscalls_per_request: per_request(self.syscalls),
            bytes_in_per_request: per_request(self.bytes_in),
            bytes_out_per_request: per_request(self.bytes_out),
            clients: Vec::new(),
            by_hop: self.hops.rows(),
            stack_cpu_ns: if self.hops.is_empty() {
                0
            } else {
                self.cpu_ns + self.hops.cpu_ns()
            },
        }
    }
}

fn percent(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 * 100.0 / total as f64
    }
}

/// Groups by key, at most `cap` of them; events of any further key go to `other`.
struct Capped<K> {
    groups: HashMap<K, Group>,
    other: Group,
    over_cap: u64,
    cap: usize,
}

impl<K: Hash + Eq> Capped<K> {
    fn new(cap: usize) -> Capped<K> {
        Capped {
            groups: HashMap::new(),
            other: Group::new(),
            over_cap: 0,
            cap,
        }
    }

    fn entry<Q>(&mut self, key: &Q) -> &mut Group
    where
        K: Borrow<Q>,
        Q: ToOwned<Owned = K> + Hash + Eq + ?Sized,
    {
        // Looked up twice: returning the first lookup's borrow would keep the map borrowed
        // for the insert below (a known limit of the borrow checker).
        if self.groups.contains_key(key) {
            return self.groups.get_mut(key).expect("just found");
        }
        if self.groups.len() < self.cap {
            return self.groups.entry(key.to_owned()).or_insert_with(Group::new);
        }
        self.over_cap += 1;
        &mut self.other
    }

    /// The `top` costliest groups, then `(other)` with the rest, if any.
    fn rows<N: Into<String>>(
        self,
        top: usize,
        total: u64,
        name: impl Fn(K) -> N,
    ) -> Vec<GroupCost> {
        let mut named: Vec<(String, Group)> = self
            .groups
            .into_iter()
            .map(|(k, g)| (name(k).into(), g))
            .collect();
        named.sort_by(|a, b| b.1.cpu_ns.cmp(&a.1.cpu_ns).then_with(|| a.0.cmp(&b.0)));
        let mut other = self.other;
        for (_, g) in named.drain(top.min(named.len())..) {
            other.merge(g);
        }
        let mut rows: Vec<GroupCost> = named.into_iter().map(|(n, g)| g.cost(n, total)).collect();
        if !other.is_empty() {
            rows.push(other.cost(OTHER.to_string(), total));
        }
        rows
    }
}

/// A speed bucket, with its clients' CPU so that it can say who is slow.
struct SpeedGroup {
    group: Group,
    clients: HashMap<IpAddr, u64>,
    cap: usize,
}

/// Clients named per speed bucket.
const SPEED_CLIENTS: usize = 5;

impl SpeedGroup {
    fn new(cap: usize) -> SpeedGroup {
        SpeedGroup {
            group: Group::new(),
            clients: HashMap::new(),
            cap,
        }
    }

    fn add(&mut self, client: IpAddr, ev: &RequestEvent) {
        self.group.add(ev);
        if self.clients.len() < self.cap || self.clients.contains_key(&client) {
            *self.clients.entry(client).or_default() += ev.cpu_ns;
        }
    }

    fn cost(self, name: &str, total: u64, names: &HashMap<IpAddr, String>) -> GroupCost {
        let mut clients: Vec<(IpAddr, u64)> = self.clients.into_iter().collect();
        clients.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        GroupCost {
            clients: clients
                .into_iter()
                .take(SPEED_CLIENTS)
                .map(|(ip, _)| client_name(names, &ip))
                .collect(),
            ..self.group.cost(name.to_string(), total)
        }
    }
}

/// Non-empty speed buckets, slowest first, `unknown` last.
/// How a client is named in the tables: by the name given for its address, else the address.
fn client_name(names: &HashMap<IpAddr, String>, ip: &IpAddr) -> String {
    names.get(ip).cloned().unwrap_or_else(|| ip.to_string())
}

fn speed_rows(
    speeds: Vec<SpeedGroup>,
    total: u64,
    names: &HashMap<IpAddr, String>,
) -> Vec<GroupCost> {
    let labels = SPEED_BUCKETS.iter().map(|b| b.label).chain([SPEED_UNKNOWN]);
    speeds
        .into_iter()
        .zip(labels)
        .filter(|(s, _)| !s.group.is_empty())
        .map(|(s, label)| s.cost(label, total, names))
        .collect()
}

/// The `--class` a request belongs to, or its label without classes; None for `(other)`.
fn class_of<'l>(
    classes: &'l [(String, Regex)],
    head: Option<RequestHead<'_>>,
    label: &'l str,
) -> Option<&'l str> {
    if classes.is_empty() {
        return Some(label);
    }
    let text = match head {
        // A protocol's class text is its label: the command, the statement's verb and table.
        Some(RequestHead::Wire(_)) => label.into(),
        _ => match head.and_then(|h| h.target()) {
            Some(target) => String::from_utf8_lossy(target),
            None => return Some(label),
        },
    };
    classes
        .iter()
        .find(|(_, re)| re.is_match(&text))
        .map(|(name, _)| name.as_str())
}

/// The `k` most expensive requests: a min-heap whose top is the cheapest kept, so that most
/// requests are turned away by one comparison, before anything is copied.
struct Costliest {
    heap: BinaryHeap<Reverse<Costly>>,
    k: usize,
}

impl Costliest {
    fn new(k: usize) -> Costliest {
        Costliest {
            heap: BinaryHeap::with_capacity(k + 1),
            k,
        }
    }

    fn would_take(&self, cpu_ns: u64) -> bool {
        let cheapest_kept = self.heap.peek().map(|Reverse(c)| c.cpu_ns);
        self.k > 0 && (self.heap.len() < self.k || cheapest_kept < Some(cpu_ns))
    }

    fn consider(&mut self, order: u64, ev: &RequestEvent, class: &str, label: &str) {
        if !self.would_take(ev.cpu_ns) {
            return;
        }
        self.heap.push(Reverse(Costly {
            cpu_ns: ev.cpu_ns,
            order,
            reference: ev.reference(),
            request: CostlyRequest {
                class: class.to_string(),
                request: label.to_string(),
                client: ev.peer.ip().to_canonical().to_string(),
                cpu_ns: ev.cpu_ns,
                syscalls: ev.syscalls,
                top_syscalls: ev
                    .top_syscalls
                    .iter()
                    .map(|(name, n)| (name.to_string(), *n))
                    .collect(),
                unlisted_max: ev.unlisted_max,
                bytes_in: ev.bytes_in,
                bytes_out: ev.bytes_out,
                wall_ns: ev.wall_ns(),
                id: ev.id(),
                in_flight: ev.in_flight,
                hops: Vec::new(),
                caused_by: ev
                    .caused_by
                    .map(|r| request_id(r.pid, r.conn_id, r.seq))
                    .unwrap_or_default(),
                front_class: String::new(),
            },
        }));
        if self.heap.len() > self.k {
            self.heap.pop();
        }
    }

    /// Adds an upstream request's cost to the hops of front request `front`, if it is kept.
    fn charge(&mut self, front: RequestRef, part: Part<'_>) {
        if !self.heap.iter().any(|Reverse(c)| c.reference == front) {
            return;
        }
        // The order is by the front's CPU, which this leaves as it was.
        let mut kept = std::mem::take(&mut self.heap).into_vec();
        for Reverse(c) in kept.iter_mut().filter(|c| c.0.reference == front) {
            add_part(&mut c.request.hops, part);
        }
        self.heap = BinaryHeap::from(kept);
    }

    /// Most expensive first.
    fn into_sorted(self) -> Vec<CostlyRequest> {
        // Ascending order of `Reverse` is descending order of cost.
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|Reverse(c)| c.request)
            .collect()
    }
}

/// A request in the costliest heap: ordered by CPU, the earlier first among equals.
struct Costly {
    cpu_ns: u64,
    order: u64,
    reference: RequestRef,
    request: CostlyRequest,
}

impl Ord for Costly {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cpu_ns
            .cmp(&other.cpu_ns)
            .then(other.order.cmp(&self.order))
    }
}

impl PartialOrd for Costly {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Costly {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Costly {}

/// An upstream hop's tally settings: the front's bounds, none of its naming (`--class`, the
/// protocol, the replay's client names are the front's; a hop's requests are named by what
/// they read, a database's by its statements).
fn hop_options(front: &TallyOptions) -> TallyOptions {
    TallyOptions {
        protocol: String::new(),
        classes: Vec::new(),
        top_groups: front.top_groups,
        costliest: front.costliest,
        key_cap: front.key_cap,
        client_names: HashMap::new(),
        follow_hops: false,
    }
}

/// Where the front's tally charges an upstream request: its front request's class (the row
/// it was filed under, `(other)` included) and, if kept, its place in the costliest list.
struct FrontCharge<'t> {
    classes: &'t mut Capped<String>,
    costliest: &'t mut Costliest,
}

impl Charge for FrontCharge<'_> {
    fn charge(&mut self, front: RequestRef, class: Option<&str>, part: Part<'_>) {
        let group = match class.and_then(|name| self.classes.groups.get_mut(name)) {
            Some(group) => group,
            None => &mut self.classes.other,
        };
        group.hops.add(part);
        self.costliest.charge(front, part);
    }
}

/// The front request a [`CostlyRequest::caused_by`] names.
fn parse_request_ref(id: &str) -> Option<RequestRef> {
    let (pid, conn_id, seq) = parse_request_id(id)?;
    Some(RequestRef { pid, conn_id, seq })
}

/// A connection's first event in which the server wrote and read nothing: the greeting of a
/// protocol whose server speaks first (MySQL's handshake packet), the connection's set-up.
fn server_spoke_first(ev: &RequestEvent) -> bool {
    ev.seq == 0 && ev.bytes_in == 0 && ev.bytes_out > 0 && ev.http2_streams.is_none()
}
