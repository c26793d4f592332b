//! The stack block of a phase in the analysis document ([`crate::document`]): what each front
//! class costs across the local servers its requests pass through and by hop, the costliest
//! front requests with their hops, and each hop's share that no front request holds
//! (docs/stack.md, "What the analysis does with the links").

use reqcost_record::{
    CostlyRequest, CostlyStackRequest, GroupCost, HopClass, HopPhase, Phase, RequestStats,
    RunRecord,
};
use serde::{Deserialize, Serialize};

use crate::hot_code::{self, GroupCode};
use crate::request_costs::RequestCosts;

/// A phase's requests across the stack: present when the record followed upstream hops.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StackCosts {
    /// The trees' CPU together, the part the front's requests hold (the front's classes and
    /// the upstream requests linked to them), and that part's share (0..1): the rest is the
    /// trees' `not_for_front_cpu_ns`.
    pub cpu_ns: u64,
    pub for_front_cpu_ns: u64,
    pub for_front_share: f64,
    /// Every tree of the stack, the front (hop 0) first.
    pub hops: Vec<HopFigures>,
    /// Per front class, its cost across the stack and by hop, dearest across the stack first.
    pub classes: Vec<ClassStack>,
    /// The front's costliest requests across the stack, with what they cost each hop.
    pub costliest: Vec<CostlyStack>,
    /// The own call chains of the upstream hops' costliest requests that served a front
    /// request, most CPU first: where a database spent a front class's slow query. Empty
    /// unless the profile's samples name those requests (docs/stack.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub code: Vec<UpstreamCode>,
}

/// One upstream request's own call chains, with the front request and class it served.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UpstreamCode {
    pub hop: u8,
    /// The hop's name, the request's class there (a statement class), its CPU.
    pub name: String,
    pub class: String,
    pub cpu_ns: u64,
    /// The front request it served and that request's class, where the phase tallied it.
    pub caused_by: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub front_class: String,
    /// Its samples, named by its `PID/CONNECTION/INDEX`.
    pub code: GroupCode,
}

/// One tree of the stack and how much of its CPU the front's requests hold.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HopFigures {
    pub hop: u8,
    /// Its root process's name, and where the hop in front reached it (empty for the front).
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub via: String,
    /// The tree's CPU in the phase; absent when it was not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ns: Option<u64>,
    /// CPU of its requests charged to front requests: for the front, its classes' CPU; for an
    /// upstream, its requests linked to a front request the phase tallied.
    pub for_front_cpu_ns: u64,
    /// The rest of its CPU, and that rest's share (0..1) of its CPU: its own work, work for
    /// front requests the phase did not tally, upstream calls, and what the probes charged to
    /// no request. What the front's request costs leave out of the stack's CPU.
    pub not_for_front_cpu_ns: u64,
    pub not_for_front_share: f64,
    /// Of that rest (upstream hops): its own work (timers, keep-alive, other clients), and work
    /// linked to front requests outside the phase or beyond the join's memory.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub own_cpu_ns: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unlinked_cpu_ns: u64,
    /// An upstream hop's own requests, by its own classes (a database's statements).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<RequestCosts>,
}

/// One front class across the stack.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClassStack {
    pub class: String,
    /// Its front requests: what every figure per request divides by.
    pub requests: u64,
    /// CPU per request across the stack: the sum of its parts'.
    pub cpu_per_request_ns: f64,
    /// By hop, the front first.
    pub parts: Vec<StackPart>,
    /// The hop whose part is the largest: where the class's cost is.
    pub dearest_hop: u8,
    /// The code that hop ran for the class's requests, when it is an upstream and the profile
    /// sampled it: a database's own functions for the class's slow query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dearest_code: Option<GroupCode>,
}

/// What one hop spends per front request of a class.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StackPart {
    pub hop: u8,
    pub name: String,
    pub cpu_per_request_ns: f64,
    /// The hop's requests per front request (1 for the front itself).
    pub requests_per_request: f64,
    /// Share (0..1) of the class's cost across the stack.
    pub share: f64,
    /// The hop's own classes of those requests, costliest first (a few).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<HopClass>,
}

/// A costly front request and what it cost each hop, itself first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CostlyStack {
    pub id: String,
    pub class: String,
    pub client: String,
    /// Across the stack.
    pub cpu_ns: u64,
    /// `(hop, CPU, requests)`, the front's own first.
    pub parts: Vec<(u8, u64, u64)>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl StackCosts {
    /// The stack block of phase `p` of `rec`; None when the record followed no hop.
    pub fn of(p: &Phase, rec: &RunRecord) -> Option<StackCosts> {
        if rec.hops.is_empty() && p.hops.is_empty() {
            return None;
        }
        let front = p.requests.as_ref()?;
        let mut hops = vec![front_figures(p, front, rec)];
        hops.extend(p.hops.iter().map(|h| hop_figures(h, rec)));
        let mut classes: Vec<ClassStack> = front
            .by_class
            .iter()
            .filter(|g| g.requests > 0)
            .map(|g| class_stack(g, rec, &p.name))
            .collect();
        classes.sort_by(|a, b| {
            b.cpu_per_request_ns
                .total_cmp(&a.cpu_per_request_ns)
                .then_with(|| a.class.cmp(&b.class))
        });
        let for_front: u64 = hops.iter().map(|h| h.for_front_cpu_ns).sum();
        let total = for_front + hops.iter().map(|h| h.not_for_front_cpu_ns).sum::<u64>();
        Some(StackCosts {
            cpu_ns: total,
            for_front_cpu_ns: for_front,
            for_front_share: share(for_front, total),
            hops,
            classes,
            costliest: front.stack_costliest.iter().map(costly).collect(),
            code: upstream_code(p, rec),
        })
    }

    /// A hop's name as the outputs show it, `hop N` for one the record does not name.
    pub fn name(&self, hop: u8) -> String {
        self.hops
            .iter()
            .find(|h| h.hop == hop)
            .map_or_else(|| format!("hop {hop}"), |h| h.name.clone())
    }
}

impl StackCosts {
    /// `for_front_share` in %.
    pub fn for_front_pct(&self) -> f64 {
        self.for_front_share * 100.0
    }
}

impl StackPart {
    /// `cpu_per_request_ns` in seconds.
    pub fn cpu_per_request_s(&self) -> f64 {
        self.cpu_per_request_ns / 1e9
    }
}

impl HopFigures {
    /// `not_for_front_share` in %.
    pub fn not_for_front_pct(&self) -> f64 {
        self.not_for_front_share * 100.0
    }
}

/// The front's figures: its classes' CPU is what its requests hold.
fn front_figures(p: &Phase, front: &RequestStats, rec: &RunRecord) -> HopFigures {
    let cpu = p.server.cpu.as_ref().map(|c| c.total_ns);
    let total = cpu.unwrap_or(front.attributed_cpu_ns + front.unattributed_cpu_ns);
    let classes: u64 = front.by_class.iter().map(|g| g.cpu_ns).sum();
    let rest = total.saturating_sub(classes);
    HopFigures {
        hop: 0,
        name: hop_name(rec, 0),
        via: String::new(),
        cpu_ns: cpu,
        for_front_cpu_ns: classes,
        not_for_front_cpu_ns: rest,
        not_for_front_share: share(rest, total),
        own_cpu_ns: 0,
        unlinked_cpu_ns: 0,
        requests: None,
    }
}

/// An upstream hop's figures: its requests linked to the front's are what front requests hold.
fn hop_figures(h: &HopPhase, rec: &RunRecord) -> HopFigures {
    let r = h.requests.as_ref();
    let links = r.and_then(|r| r.front_links.clone()).unwrap_or_default();
    let cpu = h.cpu.as_ref().map(|c| c.total_ns);
    let total = cpu
        .or(r.map(|r| r.attributed_cpu_ns + r.unattributed_cpu_ns))
        .unwrap_or(0);
    let rest = total.saturating_sub(links.linked_cpu_ns);
    HopFigures {
        hop: h.hop,
        name: hop_name(rec, h.hop),
        via: rec
            .hops
            .iter()
            .find(|x| x.hop == h.hop)
            .map(|x| x.via.clone())
            .unwrap_or_default(),
        cpu_ns: cpu,
        for_front_cpu_ns: links.linked_cpu_ns,
        not_for_front_cpu_ns: rest,
        not_for_front_share: share(rest, total),
        own_cpu_ns: links.own_cpu_ns,
        unlinked_cpu_ns: links.unlinked_cpu_ns,
        requests: r.map(RequestCosts::of),
    }
}

/// A front class's cost per request across the stack, by hop.
fn class_stack(g: &GroupCost, rec: &RunRecord, phase: &str) -> ClassStack {
    let per = |ns: u64| ns as f64 / g.requests as f64;
    let stack = g.cpu_ns + g.by_hop.iter().map(|h| h.cpu_ns).sum::<u64>();
    let mut parts = vec![StackPart {
        hop: 0,
        name: hop_name(rec, 0),
        cpu_per_request_ns: per(g.cpu_ns),
        requests_per_request: 1.0,
        share: share(g.cpu_ns, stack),
        classes: Vec::new(),
    }];
    parts.extend(g.by_hop.iter().map(|h| StackPart {
        hop: h.hop,
        name: hop_name(rec, h.hop),
        cpu_per_request_ns: per(h.cpu_ns),
        requests_per_request: h.requests as f64 / g.requests as f64,
        share: share(h.cpu_ns, stack),
        classes: h.classes.clone(),
    }));
    let dearest_hop = parts
        .iter()
        .max_by(|a, b| a.cpu_per_request_ns.total_cmp(&b.cpu_per_request_ns))
        .map_or(0, |p| p.hop);
    ClassStack {
        class: g.name.clone(),
        requests: g.requests,
        cpu_per_request_ns: per(stack),
        parts,
        dearest_hop,
        dearest_code: rec
            .profile
            .as_ref()
            .filter(|_| dearest_hop > 0)
            .and_then(|p| hot_code::hop_class(p, dearest_hop, phase, &g.name)),
    }
}

fn costly(c: &CostlyStackRequest) -> CostlyStack {
    let mut parts = vec![(0, c.cpu_ns, 1)];
    parts.extend(c.hops.iter().map(|h| (h.hop, h.cpu_ns, h.requests)));
    CostlyStack {
        id: c.id.clone(),
        class: c.class.clone(),
        client: c.client.clone(),
        cpu_ns: c.stack_cpu_ns,
        parts,
    }
}

/// The own chains of the hops' costliest requests that served a front request, where the
/// profile's samples name them.
fn upstream_code(p: &Phase, rec: &RunRecord) -> Vec<UpstreamCode> {
    let Some(profile) = rec.profile.as_ref() else {
        return Vec::new();
    };
    let mut costly: Vec<(u8, &CostlyRequest)> = p
        .hops
        .iter()
        .filter_map(|h| Some((h.hop, h.requests.as_ref()?)))
        .flat_map(|(hop, r)| r.costliest.iter().map(move |c| (hop, c)))
        .filter(|(_, c)| !c.caused_by.is_empty())
        .collect();
    costly.sort_by(|a, b| {
        b.1.cpu_ns
            .cmp(&a.1.cpu_ns)
            .then_with(|| a.1.id.cmp(&b.1.id))
    });
    let hops = hot_code::hops(profile, |_| true);
    let code = hot_code::requests(&hops, costly.iter().map(|(_, c)| c.id.as_str()));
    code.into_iter()
        .filter_map(|g| {
            let (hop, c) = costly.iter().find(|(_, c)| c.id == g.name)?;
            Some(UpstreamCode {
                hop: *hop,
                name: hop_name(rec, *hop),
                class: c.class.clone(),
                cpu_ns: c.cpu_ns,
                caused_by: c.caused_by.clone(),
                front_class: c.front_class.clone(),
                code: g,
            })
        })
        .collect()
}

/// The front's name is the target's; an upstream's, its root process's.
pub fn hop_name(rec: &RunRecord, hop: u8) -> String {
    if hop == 0 {
        return rec.target.comm.clone();
    }
    rec.hops
        .iter()
        .find(|h| h.hop == hop)
        .map_or_else(|| format!("hop {hop}"), |h| h.comm.clone())
}

fn share(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 / total as f64
    }
}
