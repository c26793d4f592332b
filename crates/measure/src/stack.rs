//! The stack behind the target (docs/stack.md): the local servers its requests were followed
//! to, found where the followed trees connected to, each followed by the probes as a hop, and
//! each hop's own figures per phase.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use reqcost_probes::{monotonic_ns, Dest, Probes, RequestCounters};
use reqcost_profile::HopTrees;
use reqcost_record::{CpuTimes, Hop, KernelStats, Phase, RequestEvent};
use reqcost_server::{
    descends_from, listener_of, tree_loopback_peers, tree_unix_peers, unix_listener_of, Server,
    Snapshot,
};

/// Which local upstreams to follow.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Upstreams {
    /// Every local server the followed trees connect to.
    #[default]
    All,
    /// None: the target alone.
    Off,
    /// Only these: each a root pid, or a process name (comm).
    Only(Vec<String>),
}

/// Hops beyond the target, as the probes number them (MAX_HOPS of reqcost.h, less the target).
const MAX_UPSTREAM_HOP: u8 = 7;

/// The upstreams followed so far, and the destinations already looked at.
pub(crate) struct Stack {
    which: Upstreams,
    front: u32,
    hops: RefCell<Vec<Followed>>,
    seen: RefCell<BTreeSet<Dest>>,
    /// The trees whose connections standing when they were followed were looked at.
    scanned: RefCell<BTreeSet<u32>>,
    /// What the record must say of hops found within a phase: by phase, the hop and the note.
    notes: RefCell<Vec<(String, u8, String)>>,
    /// Where the sampler takes the hops' trees, when it samples.
    sampled: Option<HopTrees>,
}

struct Followed {
    hop: Hop,
    /// Its tree, attached to read its CPU as `attach` reads a tree's.
    tree: Server,
}

impl Stack {
    pub fn new(which: Upstreams, front: u32, sampled: Option<HopTrees>) -> Stack {
        Stack {
            sampled,
            which,
            front,
            hops: RefCell::new(Vec::new()),
            seen: RefCell::new(BTreeSet::new()),
            scanned: RefCell::new(BTreeSet::new()),
            notes: RefCell::new(Vec::new()),
        }
    }

    /// Follows the local servers the followed trees connected to since the last look, each
    /// from the hop after the one that connected, and theirs in turn; returns the hops newly
    /// followed.
    pub fn discover(&self, probes: &Probes) -> Vec<u8> {
        let mut found = Vec::new();
        loop {
            let new = self.discover_once(probes);
            if new.is_empty() {
                return found;
            }
            found.extend(new);
        }
    }

    /// One look: the hops followed from the destinations known now.
    fn discover_once(&self, probes: &Probes) -> Vec<u8> {
        let mut found = Vec::new();
        let mut dests = probes.dests();
        dests.extend(self.standing_calls());
        // The hops nearest the target first, so that a server reached from two hops is
        // numbered from the nearer.
        dests.sort_by_key(|(_, caller)| *caller);
        for (dest, caller) in dests {
            if !dest.is_local() || !self.seen.borrow_mut().insert(dest.clone()) {
                continue;
            }
            let Some(pid) = server_at(&dest) else {
                continue;
            };
            // A tree that holds the target or reqcost is no upstream: with socket activation
            // the init process holds the listener (journald's stdout stream, D-Bus), and
            // following it would follow every process of the machine.
            if descends_from(self.front, pid) || descends_from(std::process::id(), pid) {
                continue;
            }
            if !self.wanted(pid) || self.followed(pid) || caller >= MAX_UPSTREAM_HOP {
                continue;
            }
            let hop = caller + 1;
            if let Err(e) = probes.follow_hop(pid, hop) {
                eprintln!("warning: not following upstream {}: {e}", dest.via());
                continue;
            }
            let Ok(tree) = Server::attach(pid) else {
                continue;
            };
            let comm = tree.comm();
            self.hops.borrow_mut().push(Followed {
                hop: Hop {
                    hop,
                    pid,
                    comm,
                    via: dest.via(),
                    caller,
                },
                tree,
            });
            if let Some(trees) = &self.sampled {
                trees.follow(pid, hop);
            }
            found.push(hop);
        }
        found
    }

    /// Where the connections of the trees newly followed lead, those they opened before: a
    /// pool opened at start-up is seen by the probes only at its next call, which may come
    /// late or never before a phase, so it is read from the kernel's tables (loopback TCP,
    /// and Unix sockets through sock_diag), with each tree's hop.
    fn standing_calls(&self) -> Vec<(Dest, u8)> {
        let trees: Vec<(u32, u8)> = std::iter::once((self.front, 0))
            .chain(self.hops.borrow().iter().map(|f| (f.hop.pid, f.hop.hop)))
            .filter(|(root, _)| self.scanned.borrow_mut().insert(*root))
            .collect();
        trees
            .into_iter()
            .flat_map(|(root, hop)| {
                let tcp = tree_loopback_peers(root).into_iter().map(Dest::Tcp);
                let unix = tree_unix_peers(root).into_iter().map(Dest::Unix);
                tcp.chain(unix).map(move |dest| (dest, hop))
            })
            .collect()
    }

    /// Whether `pid`'s tree is one of the followed (the target's included).
    fn followed(&self, pid: u32) -> bool {
        descends_from(pid, self.front)
            || self
                .hops
                .borrow()
                .iter()
                .any(|f| descends_from(pid, f.hop.pid))
    }

    fn wanted(&self, pid: u32) -> bool {
        match &self.which {
            Upstreams::All => true,
            Upstreams::Off => false,
            Upstreams::Only(names) => {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                names
                    .iter()
                    .any(|n| *n == pid.to_string() || n == comm.trim_end())
            }
        }
    }

    /// The hops followed, for the record.
    pub fn hops(&self) -> Vec<Hop> {
        self.hops.borrow().iter().map(|f| f.hop.clone()).collect()
    }

    /// The record's notes on the hops found within one of `phases` (not within the warm-up,
    /// whose figures no record keeps).
    pub fn notes(&self, phases: &[Phase]) -> Vec<String> {
        let found = self
            .notes
            .borrow()
            .iter()
            .filter(|(phase, _, _)| phases.iter().any(|p| p.name == *phase))
            .map(|(_, _, note)| note.clone())
            .collect::<Vec<_>>();
        found.into_iter().chain(self.unreached()).collect()
    }

    /// A note for each tree `--follow` named that no followed tree's connections led to.
    fn unreached(&self) -> Vec<String> {
        let Upstreams::Only(names) = &self.which else {
            return Vec::new();
        };
        let hops = self.hops.borrow();
        names
            .iter()
            .filter(|n| {
                !hops
                    .iter()
                    .any(|f| f.hop.comm == **n || f.hop.pid.to_string() == **n)
            })
            .map(|n| {
                format!(
                    "--follow {n}: no tree of that name or pid was reached. Upstreams are found \
                     where the followed trees connect (the target's, then each hop's), so a \
                     server behind one not followed is not seen: name the trees in between too \
                     (--follow APP,{n}), or leave --follow out to follow every local upstream"
                )
            })
            .collect()
    }

    /// The hops found within phase `phase`, whose figures of it start late.
    pub fn found_within(&self, phase: &str) -> Vec<u8> {
        let notes = self.notes.borrow();
        notes
            .iter()
            .filter(|(p, _, _)| p == phase)
            .map(|(_, hop, _)| *hop)
            .collect()
    }

    /// Each followed hop's tree CPU now, for [`Stack::cpu_since`].
    pub fn cpu_mark(&self) -> Vec<(u8, Snapshot)> {
        let hops = self.hops.borrow();
        hops.iter()
            .map(|f| (f.hop.hop, f.tree.snapshot()))
            .collect()
    }

    /// Each hop's tree CPU since `mark`, where it could be read.
    pub fn cpu_since(&self, mark: &[(u8, Snapshot)]) -> Vec<(u8, CpuTimes)> {
        let hops = self.hops.borrow();
        mark.iter()
            .filter_map(|(hop, at)| {
                let f = hops.iter().find(|f| f.hop.hop == *hop)?;
                Some((*hop, f.tree.snapshot().since(at).0.cpu?))
            })
            .collect()
    }

    /// Each followed hop's figures from now on, for one phase.
    pub fn open(&self, probes: &Probes) -> HopWindows {
        let mut windows = HopWindows::default();
        for f in self.hops.borrow().iter() {
            windows.start(f, probes);
        }
        windows
    }

    /// Looks again for upstreams, and opens the windows of those newly followed within
    /// phase `phase`, whose figures then start late: the record says so.
    /// Returns whether it found any.
    pub fn refresh(&self, probes: &Probes, windows: &mut HopWindows, phase: &str) -> bool {
        let new = self.discover(probes);
        for f in self
            .hops
            .borrow()
            .iter()
            .filter(|f| new.contains(&f.hop.hop))
        {
            windows.start(f, probes);
            let note = format!(
                "upstream hop {} ({}, {}) found within phase {phase}: its figures of that phase \
                 start when it was found, and requests of the hops in front made before then \
                 are not linked to it (a longer --warmup finds it before)",
                f.hop.hop, f.hop.comm, f.hop.via
            );
            self.notes
                .borrow_mut()
                .push((phase.to_string(), f.hop.hop, note));
        }
        !new.is_empty()
    }

    /// Whether any upstream is followed.
    pub fn any(&self) -> bool {
        !self.hops.borrow().is_empty()
    }

    /// Each hop's window read to its end: its counters, its tree's CPU, and what the probes
    /// charged while that CPU was read, at both ends (the target's `cpu_reading_skew_ns`).
    pub fn close(&self, probes: &Probes, windows: &HopWindows) -> Vec<HopReading> {
        let hops = self.hops.borrow();
        windows
            .open
            .iter()
            .map(|(hop, w)| {
                let tree = hops.iter().find(|f| f.hop.hop == *hop).map(|f| &f.tree);
                let end = probes.hop_counters(*hop);
                let cpu = tree.and_then(|t| t.snapshot().since(&w.cpu).0.cpu);
                let skew = probes.hop_counters(*hop).since(&end).total_ns();
                HopReading {
                    hop: *hop,
                    counters: end.since(&w.counters),
                    cpu,
                    skew_ns: w.skew_ns + skew,
                    kernel: probes.read_hop(*hop).since(&w.kernel),
                }
            })
            .collect()
    }
}

/// A hop's window read at its end ([`Stack::close`]).
pub(crate) struct HopReading {
    pub hop: u8,
    pub counters: RequestCounters,
    pub cpu: Option<CpuTimes>,
    pub skew_ns: u64,
    pub kernel: KernelStats,
}

/// The process tree behind a local destination: the topmost process holding its listener.
fn server_at(dest: &Dest) -> Option<u32> {
    match dest {
        Dest::Tcp(addr) => listener_of(addr.port()).ok(),
        Dest::Unix(path) => unix_listener_of(path),
    }
}

/// The followed hops' windows in one phase: where each hop's CPU and counters start.
#[derive(Default)]
pub(crate) struct HopWindows {
    open: BTreeMap<u8, HopWindow>,
}

struct HopWindow {
    /// When it opened (CLOCK_MONOTONIC ns): its requests are those that began since.
    since_ns: u64,
    cpu: Snapshot,
    counters: RequestCounters,
    /// What the probes charged while the tree's CPU was read at the start.
    skew_ns: u64,
    kernel: KernelStats,
}

impl HopWindows {
    fn start(&mut self, f: &Followed, probes: &Probes) {
        let kernel = probes.read_hop(f.hop.hop);
        let before = probes.hop_counters(f.hop.hop);
        let cpu = f.tree.snapshot();
        let counters = probes.hop_counters(f.hop.hop);
        self.open.insert(
            f.hop.hop,
            HopWindow {
                since_ns: monotonic_ns(),
                cpu,
                skew_ns: counters.since(&before).total_ns(),
                counters,
                kernel,
            },
        );
    }

    /// Whether the event is the window's: the target's always; an upstream hop's when it
    /// began since its hop's window opened. An upstream's request on a kept connection ends
    /// only at the next one's first read, so the last of an earlier phase ends in this one,
    /// for a front request of that phase.
    pub fn began_in(&self, ev: &RequestEvent) -> bool {
        ev.hop == 0
            || self
                .open
                .get(&ev.hop)
                .is_some_and(|w| ev.first_in_ns >= w.since_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--follow redis-server` behind an application it does not name: nothing leads there,
    /// and the record says so, naming what to add.
    #[test]
    fn a_named_tree_no_followed_tree_reached_is_noted() {
        let which = Upstreams::Only(vec!["redis-server".into(), "4242".into()]);
        let stack = Stack::new(which, std::process::id(), None);
        let notes = stack.notes(&[]);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].starts_with("--follow redis-server: no tree of that name or pid was reached")
        );
        assert!(notes[0].contains("--follow APP,redis-server"));
        assert!(notes[1].starts_with("--follow 4242: "));
        let all = Stack::new(Upstreams::All, std::process::id(), None);
        assert!(all.notes(&[]).is_empty());
    }
}
