//! The uprobes on the tree's TLS libraries, attached per process: a uprobe with a pid traps in
//! that process alone (the kernel installs its breakpoint only in the address spaces its filter
//! accepts), so a load generator or any other process mapping the same libssl runs at full
//! speed. A process the tree forks later is seen when the loader next looks (the fork count
//! changed): the library it maps is then probed in every process (pid -1), as a server that
//! forks per connection needs; the TLS calls the new process made before are not seen
//! (docs/tls.md).

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use libbpf_rs::{Link, UprobeOpts};

use super::skel::ReqcostSkel;
use crate::tls::{Entry, Finder, Hookable, ResumedFlag};
use crate::TlsHooks;

/// A library's label and its uprobes in one process.
type LibLinks = (String, Vec<Link>);

pub(super) struct TlsLinks {
    root: u32,
    finder: Finder,
    /// Each probed process: its start time (a pid reused by a new process is not the one
    /// probed) and its uprobes, per library (by label).
    procs: BTreeMap<u32, (u64, Vec<LibLinks>)>,
    /// Libraries probed in every process that maps them (pid -1), by label: the tree forked a
    /// process mapping them after the probes attached. Kept across pauses, the links dropped.
    wide: BTreeMap<String, (Hookable, Vec<Link>)>,
    hooks: TlsHooks,
    /// The tree's fork count when it was last walked.
    forks: u64,
    /// The tree was walked since the uprobes were (re)attached: a process new to a walk now
    /// was forked since.
    walked: bool,
}

impl TlsLinks {
    pub fn new(root: u32) -> TlsLinks {
        TlsLinks {
            root,
            finder: Finder::default(),
            procs: BTreeMap::new(),
            wide: BTreeMap::new(),
            hooks: TlsHooks::default(),
            forks: 0,
            walked: false,
        }
    }

    /// The TLS libraries hooked and not hooked so far.
    pub fn hooks(&self) -> &TlsHooks {
        &self.hooks
    }

    /// Walks the tree again when it forked since the last walk (`forks`, its fork count).
    pub fn forked(&mut self, skel: &ReqcostSkel<'static>, forks: u64) {
        if forks != self.forks {
            self.forks = forks;
            self.follow(skel);
        }
    }

    /// Probes every process of the tree not probed yet, and lets go of those that left it.
    /// A process forked since the uprobes were attached ran unprobed until this walk: a
    /// server that forks per connection would lose its first requests in every child, so the
    /// libraries of such a process are probed in every process from then on.
    pub fn follow(&mut self, skel: &ReqcostSkel<'static>) {
        let forked = std::mem::replace(&mut self.walked, true);
        let tree: BTreeMap<u32, u64> = reqcost_server::process_tree(self.root)
            .into_iter()
            .filter_map(|pid| Some((pid, start_time(pid)?)))
            .collect();
        self.procs
            .retain(|pid, (start, _)| tree.get(pid) == Some(start));
        for (&pid, &start) in &tree {
            if self.procs.contains_key(&pid) {
                continue;
            }
            let found = self.finder.find(pid);
            for lib in &found.unhooked {
                told(&mut self.hooks.unhooked, lib.clone());
            }
            let mut links = Vec::new();
            for lib in found.hooked {
                let label = lib.label();
                match self.wide.get(&label) {
                    Some((_, wide)) if !wide.is_empty() => {}
                    Some(_) => self.widen(skel, lib),
                    None if forked => self.widen(skel, lib),
                    None => match attach(skel, pid as i32, &lib) {
                        Ok(l) => {
                            told(&mut self.hooks.hooked, label.clone());
                            links.push((label, l));
                        }
                        // The process left meanwhile: nothing to probe.
                        Err(_) if start_time(pid) != Some(start) => {}
                        Err(e) => self.failed(&label, &e),
                    },
                }
            }
            self.procs.insert(pid, (start, links));
        }
    }

    /// Probes `lib` in every process that maps it, instead of per process. The file is opened
    /// through the root process's view: the child it was found in may be gone already (then
    /// its /proc/PID/root is).
    fn widen(&mut self, skel: &ReqcostSkel<'static>, mut lib: Hookable) {
        let label = lib.label();
        lib.file = PathBuf::from(format!("/proc/{}/root", self.root))
            .join(lib.path.trim_start_matches('/'));
        match attach(skel, -1, &lib) {
            Ok(links) => {
                for (_, libs) in self.procs.values_mut() {
                    libs.retain(|(l, _)| *l != label);
                }
                told(&mut self.hooks.hooked, label.clone());
                self.wide.insert(label, (lib, links));
            }
            Err(e) => self.failed(&label, &e),
        }
    }

    fn failed(&mut self, label: &str, e: &libbpf_rs::Error) {
        told(
            &mut self.hooks.unhooked,
            format!("{label}: attaching uprobes failed: {e}"),
        );
    }

    /// Detaches every uprobe (paused windows cost nothing); [`TlsLinks::follow`] attaches them
    /// again.
    pub fn detach(&mut self) {
        self.procs.clear();
        for (_, links) in self.wide.values_mut() {
            links.clear();
        }
        self.walked = false;
    }
}

/// Adds `what` to a list of things told, once.
fn told(list: &mut Vec<String>, what: String) {
    if !list.contains(&what) {
        list.push(what);
    }
}

/// The uprobes of one library in process `pid` (-1: in every process): each function's entry program, its cookie
/// where the library's sessions say whether they resumed ([`ResumedFlag::cookie`]), and the
/// one return program that serves them all.
fn attach(
    skel: &ReqcostSkel<'static>,
    pid: i32,
    lib: &Hookable,
) -> Result<Vec<Link>, libbpf_rs::Error> {
    if let Some(points) = &lib.go {
        return super::go_links(skel, pid, &lib.file, points);
    }
    let p = &skel.progs;
    let mut links = Vec::new();
    for &(entry, offset) in &lib.functions {
        let prog = match entry {
            Entry::Read => &p.ssl_read_enter,
            Entry::ReadEx => &p.ssl_read_ex_enter,
            Entry::Write => &p.ssl_write_enter,
            Entry::WriteEx => &p.ssl_write_ex_enter,
        };
        let opts = UprobeOpts {
            cookie: lib.resumed.map_or(0, ResumedFlag::cookie),
            ..UprobeOpts::default()
        };
        links.push(prog.attach_uprobe_with_opts(pid, &lib.file, offset, opts)?);
        links.push(p.ssl_exit.attach_uprobe(true, pid, &lib.file, offset)?);
    }
    Ok(links)
}

/// A live process's start time (clock ticks after boot, /proc/PID/stat field 22).
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_has_a_start_time_and_keeps_it() {
        let me = std::process::id();
        let t = start_time(me).unwrap();
        assert_eq!(start_time(me), Some(t));
    }
}
