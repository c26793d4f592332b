//! The uprobes on the tree's TLS libraries, attached per process: a uprobe with a pid traps in
//! that process alone (the kernel installs its breakpoint only in the address spaces its filter
//! accepts), so a load generator or any other process mapping the same libssl runs at full
//! speed. Processes the tree forks later are probed when the loader next looks (the fork
//! count changed); the TLS calls a new process makes before that are not seen (docs/tls.md).

use std::collections::BTreeMap;
use std::fs;

use libbpf_rs::{Link, UprobeOpts};

use super::skel::ReqcostSkel;
use crate::tls::{Entry, Finder, Hookable, ResumedFlag};
use crate::TlsHooks;

pub(super) struct TlsLinks {
    root: u32,
    finder: Finder,
    /// Each probed process: its start time (a pid reused by a new process is not the one
    /// probed) and its uprobes.
    procs: BTreeMap<u32, (u64, Vec<Link>)>,
    hooks: TlsHooks,
    /// The tree's fork count when it was last walked.
    forks: u64,
}

impl TlsLinks {
    pub fn new(root: u32) -> TlsLinks {
        TlsLinks {
            root,
            finder: Finder::default(),
            procs: BTreeMap::new(),
            hooks: TlsHooks::default(),
            forks: 0,
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
    pub fn follow(&mut self, skel: &ReqcostSkel<'static>) {
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
                if !self.hooks.unhooked.contains(lib) {
                    self.hooks.unhooked.push(lib.clone());
                }
            }
            let mut links = Vec::new();
            for lib in &found.hooked {
                match attach(skel, pid, lib) {
                    Ok(l) => {
                        links.extend(l);
                        let label = lib.label();
                        if !self.hooks.hooked.contains(&label) {
                            self.hooks.hooked.push(label);
                        }
                    }
                    // The process left meanwhile: nothing to probe.
                    Err(_) if start_time(pid) != Some(start) => {}
                    Err(e) => {
                        let why = format!("{}: attaching uprobes failed: {e}", lib.label());
                        if !self.hooks.unhooked.contains(&why) {
                            self.hooks.unhooked.push(why);
                        }
                    }
                }
            }
            self.procs.insert(pid, (start, links));
        }
    }

    /// Detaches every uprobe (paused windows cost nothing); [`TlsLinks::follow`] attaches them
    /// again.
    pub fn detach(&mut self) {
        self.procs.clear();
    }
}

/// The uprobes of one library in process `pid`: each function's entry program, its cookie
/// where the library's sessions say whether they resumed ([`ResumedFlag::cookie`]), and the
/// one return program that serves them all.
fn attach(
    skel: &ReqcostSkel<'static>,
    pid: u32,
    lib: &Hookable,
) -> Result<Vec<Link>, libbpf_rs::Error> {
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
        links.push(prog.attach_uprobe_with_opts(pid as i32, &lib.file, offset, opts)?);
        links.push(
            p.ssl_exit
                .attach_uprobe(true, pid as i32, &lib.file, offset)?,
        );
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
