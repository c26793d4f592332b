//! The join of upstream hops' requests to the front requests that caused them
//! (docs/stack.md, "What the analysis does with the links"), in bounded memory whatever the
//! order events arrive in: an upstream request often ends after the front request it served (a
//! pooled connection's request ends when the next one arrives), or before it (the application
//! answers before the proxy's request ends).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;

use reqcost_record::{
    request_id, CostlyHop, CostlyStackRequest, FrontLinks, HopClass, HopCost, RequestEvent,
    RequestRef,
};

use super::{CONNECTION_SETUP, OTHER};

/// Front requests whose class is kept for upstream requests that end after them; the oldest
/// is forgotten first, and an upstream request that names it later is unlinked.
pub const RECENT_FRONT: usize = 1 << 16;
/// Front requests not seen yet whose upstream costs are kept; beyond it the oldest is given
/// up as unlinked (`links_dropped`).
pub const PENDING_FRONT: usize = 1 << 14;
/// A hop's own classes kept apart per front class (and per pending front request); the rest
/// are merged into `(other)`.
const HOP_CLASSES: usize = 16;
/// A hop's own classes shown per front class.
const HOP_CLASSES_SHOWN: usize = 3;

/// One upstream request's cost as charged to a front request.
#[derive(Debug, Clone, Copy)]
pub(super) struct Part<'a> {
    pub hop: u8,
    pub cpu_ns: u64,
    pub requests: u64,
    /// The request's class at its own hop (a database's statement class).
    pub class: &'a str,
}

/// What a front class's requests caused at each upstream hop.
#[derive(Debug, Clone, Default)]
pub(super) struct HopParts {
    hops: BTreeMap<u8, HopPart>,
}

#[derive(Debug, Clone, Default)]
struct HopPart {
    cpu_ns: u64,
    requests: u64,
    classes: HashMap<String, (u64, u64)>,
    other: (u64, u64),
}

impl HopPart {
    fn add(&mut self, requests: u64, cpu_ns: u64, class: &str) {
        self.cpu_ns += cpu_ns;
        self.requests += requests;
        if !self.classes.contains_key(class) && self.classes.len() < HOP_CLASSES {
            self.classes.insert(class.to_string(), (0, 0));
        }
        let slot = self.classes.get_mut(class).unwrap_or(&mut self.other);
        slot.0 += requests;
        slot.1 += cpu_ns;
    }
}

impl HopParts {
    pub fn add(&mut self, part: Part<'_>) {
        self.hops
            .entry(part.hop)
            .or_default()
            .add(part.requests, part.cpu_ns, part.class);
    }

    pub fn merge(&mut self, other: HopParts) {
        for (hop, part) in other.hops {
            let mine = self.hops.entry(hop).or_default();
            for (class, (requests, cpu)) in part.classes {
                mine.add(requests, cpu, &class);
            }
            if part.other != (0, 0) {
                mine.add(part.other.0, part.other.1, OTHER);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.hops.is_empty()
    }

    pub fn cpu_ns(&self) -> u64 {
        self.hops.values().map(|h| h.cpu_ns).sum()
    }

    /// The rows of `by_hop`, by hop, each with its costliest [`HOP_CLASSES_SHOWN`] classes.
    pub fn rows(&self) -> Vec<HopCost> {
        self.hops
            .iter()
            .map(|(&hop, part)| {
                let mut classes: Vec<HopClass> = part
                    .classes
                    .iter()
                    .map(|(name, &(requests, cpu_ns))| HopClass {
                        name: name.clone(),
                        requests,
                        cpu_ns,
                    })
                    .collect();
                classes.sort_by(|a, b| b.cpu_ns.cmp(&a.cpu_ns).then_with(|| a.name.cmp(&b.name)));
                let mut other = part.other;
                for c in classes.drain(HOP_CLASSES_SHOWN.min(classes.len())..) {
                    other.0 += c.requests;
                    other.1 += c.cpu_ns;
                }
                if other != (0, 0) {
                    classes.push(HopClass {
                        name: OTHER.to_string(),
                        requests: other.0,
                        cpu_ns: other.1,
                    });
                }
                HopCost {
                    hop,
                    cpu_ns: part.cpu_ns,
                    requests: part.requests,
                    classes,
                }
            })
            .collect()
    }
}

/// Where an upstream request's cost goes once its front request is known.
pub(super) trait Charge {
    /// Charges `part` to front request `front`, filed under class `class` (None: `(other)`).
    fn charge(&mut self, front: RequestRef, class: Option<&str>, part: Part<'_>);
}

/// A remembered front request: its class's index in [`Links::names`] ([`OTHER_SLOT`]:
/// `(other)`) and, for a request, its cost so far across the stack.
struct Front {
    slot: u32,
    cost: Option<FrontCost>,
}

/// A front request's own CPU and its hops' parts so far, by hop.
struct FrontCost {
    client: IpAddr,
    cpu_ns: u64,
    hops: Vec<CostlyHop>,
    /// Its place among the front requests, which breaks ties: the earlier first.
    order: u64,
}

impl FrontCost {
    fn stack_cpu_ns(&self) -> u64 {
        self.cpu_ns + self.hops.iter().map(|h| h.cpu_ns).sum::<u64>()
    }

    fn add(&mut self, part: Part<'_>) {
        add_part(&mut self.hops, part);
    }
}

/// Adds `part` to a costly front request's `hops`, kept by hop.
pub(super) fn add_part(hops: &mut Vec<CostlyHop>, part: Part<'_>) {
    let at = match hops.iter().position(|h| h.hop >= part.hop) {
        Some(i) if hops[i].hop == part.hop => i,
        at => {
            let i = at.unwrap_or(hops.len());
            let hop = CostlyHop {
                hop: part.hop,
                ..CostlyHop::default()
            };
            hops.insert(i, hop);
            i
        }
    };
    hops[at].cpu_ns += part.cpu_ns;
    hops[at].requests += part.requests;
}

/// The join: front requests' classes kept for a while, upstream costs kept until their front
/// request comes, and each hop's [`FrontLinks`]; and the front requests dearest across the
/// stack, each judged once its upstream costs are in (when the join forgets it, or at the
/// phase's end).
#[derive(Default)]
pub(super) struct Links {
    recent: HashMap<RequestRef, Front>,
    recent_order: VecDeque<RequestRef>,
    names: Vec<String>,
    name_index: HashMap<String, u32>,
    pending: HashMap<RequestRef, Vec<(u8, String, u64, u64)>>,
    pending_order: VecDeque<RequestRef>,
    by_hop: BTreeMap<u8, FrontLinks>,
    /// The dearest front requests across the stack, at most `keep`, unordered.
    dearest: Vec<(RequestRef, u32, FrontCost)>,
    keep: usize,
    fronts: u64,
}

const OTHER_SLOT: u32 = u32::MAX;

impl Links {
    /// A join that keeps the `keep` front requests dearest across the stack.
    pub fn new(keep: usize) -> Links {
        Links {
            keep,
            ..Links::default()
        }
    }

    /// A front request's event `ev` filed under `class` (None: `(other)`): upstream costs
    /// waiting for it are charged now, later ones as they come.
    pub fn front(&mut self, ev: &RequestEvent, class: Option<&str>, to: &mut impl Charge) {
        let front = ev.reference();
        let slot = class.map_or(OTHER_SLOT, |name| self.intern(name));
        self.fronts += 1;
        let mut cost = ev.is_request().then(|| FrontCost {
            client: ev.peer.ip().to_canonical(),
            cpu_ns: ev.cpu_ns,
            hops: Vec::new(),
            order: self.fronts,
        });
        if let Some(parts) = self.pending.remove(&front) {
            // Its place in the order stays behind; dropped here once they outnumber the
            // pending, so the order stays within twice the cap.
            if self.pending_order.len() > 2 * self.pending.len().max(PENDING_FRONT) {
                let pending = &self.pending;
                self.pending_order.retain(|r| pending.contains_key(r));
            }
            for (hop, class_at_hop, requests, cpu_ns) in parts {
                let part = Part {
                    hop,
                    cpu_ns,
                    requests,
                    class: &class_at_hop,
                };
                self.linked(part);
                to.charge(front, class, part);
                if let Some(cost) = cost.as_mut() {
                    cost.add(part);
                }
            }
        }
        if self.recent.insert(front, Front { slot, cost }).is_none() {
            self.recent_order.push_back(front);
        }
        if self.recent_order.len() > RECENT_FRONT {
            let oldest = self.recent_order.pop_front().expect("over the cap");
            if let Some(gone) = self.recent.remove(&oldest) {
                self.judge(oldest, gone);
            }
        }
    }

    /// Keeps `front` among the dearest across the stack if it is one.
    fn judge(&mut self, front: RequestRef, remembered: Front) {
        let Some(cost) = remembered.cost else {
            return;
        };
        let rank = |c: &FrontCost| (c.stack_cpu_ns(), std::cmp::Reverse(c.order));
        if self.dearest.len() < self.keep {
            self.dearest.push((front, remembered.slot, cost));
            return;
        }
        let cheapest = self.dearest.iter_mut().min_by_key(|(_, _, c)| rank(c));
        if let Some(kept) = cheapest.filter(|(_, _, c)| rank(c) < rank(&cost)) {
            *kept = (front, remembered.slot, cost);
        }
    }

    /// The front requests dearest across the stack, dearest first, each client named by
    /// `client`.
    pub fn dearest(&mut self, client: impl Fn(&IpAddr) -> String) -> Vec<CostlyStackRequest> {
        let remembered: Vec<(RequestRef, Front)> = self.recent.drain().collect();
        for (front, f) in remembered {
            self.judge(front, f);
        }
        self.dearest.sort_by_key(|(_, _, c)| {
            std::cmp::Reverse((c.stack_cpu_ns(), std::cmp::Reverse(c.order)))
        });
        self.dearest
            .drain(..)
            .map(|(r, slot, c)| CostlyStackRequest {
                id: request_id(r.pid, r.conn_id, r.seq),
                class: match slot {
                    OTHER_SLOT => OTHER.to_string(),
                    slot => self.names[slot as usize].clone(),
                },
                client: client(&c.client),
                cpu_ns: c.cpu_ns,
                stack_cpu_ns: c.stack_cpu_ns(),
                hops: c.hops,
            })
            .collect()
    }

    /// An upstream request (`ev.hop` > 0) of class `class` at its hop: charged to its front
    /// request if the phase has tallied it, kept until it comes otherwise; the hop's own work
    /// when it has no front request. A protocol's connection set-up (PostgreSQL's startup for
    /// an application that connects per request) is charged its CPU but is no request, as at
    /// its hop.
    pub fn upstream(&mut self, ev: &RequestEvent, class: &str, to: &mut impl Charge) {
        let part = Part {
            hop: ev.hop,
            cpu_ns: ev.cpu_ns,
            requests: if class == CONNECTION_SETUP {
                0
            } else {
                ev.requests()
            },
            class,
        };
        let Some(front) = ev.caused_by else {
            let links = self.by_hop.entry(ev.hop).or_default();
            links.own_requests += part.requests;
            links.own_cpu_ns += part.cpu_ns;
            return;
        };
        if let Some(remembered) = self.recent.get_mut(&front) {
            if let Some(cost) = remembered.cost.as_mut() {
                cost.add(part);
            }
            let slot = remembered.slot;
            self.linked(part);
            let name = (slot != OTHER_SLOT).then(|| self.names[slot as usize].as_str());
            to.charge(front, name, part);
            return;
        }
        let parts = self.pending.entry(front).or_insert_with(|| {
            self.pending_order.push_back(front);
            Vec::new()
        });
        let class = if parts.len() < HOP_CLASSES || parts.iter().any(|p| p.1 == class) {
            class
        } else {
            OTHER
        };
        match parts.iter_mut().find(|p| p.0 == ev.hop && p.1 == class) {
            Some(p) => {
                p.2 += part.requests;
                p.3 += part.cpu_ns;
            }
            None => parts.push((ev.hop, class.to_string(), part.requests, part.cpu_ns)),
        }
        self.bound_pending();
    }

    /// The class a front request was filed under, while it is remembered.
    pub fn class_of(&self, front: &RequestRef) -> Option<&str> {
        let slot = self.recent.get(front)?.slot;
        Some(if slot == OTHER_SLOT {
            OTHER
        } else {
            &self.names[slot as usize]
        })
    }

    /// Each hop's links at the phase's end: what still waits for a front request is unlinked.
    pub fn finish(&mut self) -> BTreeMap<u8, FrontLinks> {
        for (_, parts) in self.pending.drain() {
            for (hop, _, requests, cpu_ns) in parts {
                let links = self.by_hop.entry(hop).or_default();
                links.unlinked_requests += requests;
                links.unlinked_cpu_ns += cpu_ns;
            }
        }
        std::mem::take(&mut self.by_hop)
    }

    fn linked(&mut self, part: Part<'_>) {
        let links = self.by_hop.entry(part.hop).or_default();
        links.linked_requests += part.requests;
        links.linked_cpu_ns += part.cpu_ns;
    }

    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.name_index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.name_index.insert(name.to_string(), i);
        i
    }

    /// Gives up the oldest pending front requests beyond [`PENDING_FRONT`]: their costs are
    /// unlinked, and counted as dropped links.
    fn bound_pending(&mut self) {
        while self.pending.len() > PENDING_FRONT {
            let Some(oldest) = self.pending_order.pop_front() else {
                return;
            };
            // A front request that came meanwhile left its place in the order behind.
            let Some(parts) = self.pending.remove(&oldest) else {
                continue;
            };
            for (i, (hop, _, requests, cpu_ns)) in parts.iter().enumerate() {
                let links = self.by_hop.entry(*hop).or_default();
                links.unlinked_requests += requests;
                links.unlinked_cpu_ns += cpu_ns;
                // One dropped link per front request and hop, whatever its classes there.
                links.links_dropped += u64::from(!parts[..i].iter().any(|p| p.0 == *hop));
            }
        }
    }
}
