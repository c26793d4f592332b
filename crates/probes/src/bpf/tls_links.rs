//! The uprobes on the tree's TLS libraries, attached per process: a uprobe with a pid traps in
//! that process alone (the kernel installs its breakpoint only in the address spaces its filter
//! accepts), so a load generator or any other process mapping the same libssl runs at full
//! speed. A process the tree forks later is seen when the loader next looks (the fork count
//! changed): the library it maps is then probed in every process (pid -1), as a server that
//! forks per connection needs; the TLS calls the new process made before are not seen
//! (docs/tls.md).
//!
//! The links live on a thread of their own ([`TlsWorker`]): closing a uprobe link waits for RCU
//! grace periods (about 100 ms each), and the thread that drains the request events must never
//! wait for that, or the ring buffer fills and events are lost. Each program's uprobes in one
//! file and process are one uprobe-multi link where the kernel has them (Linux 6.6+: one grace
//! period for all of them), a link per function where it has not.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use std::ptr::NonNull;

use libbpf_rs::{libbpf_sys, AsRawLibbpf, Link, ProgramMut, UprobeMultiOpts, UprobeOpts};

use super::skel::ReqcostSkel;
use crate::gotls::GoTls;
use crate::layout::{TLS_LIBS, TLS_LIB_SHIFT};
use crate::tls::{Entry, Finder, Hookable, ResumedFlag};
use crate::TlsHooks;

/// A program of the loaded object, for the links' thread.
#[derive(Clone, Copy)]
struct Prog(NonNull<libbpf_sys::bpf_program>);

// SAFETY: attaching reads the program (its fd, type and name) and writes nothing in it, and
// no thread writes the programs once the object is loaded; `Loaded` joins the links' thread
// before it frees the object.
unsafe impl Send for Prog {}

impl Prog {
    fn of(prog: &ProgramMut<'static>) -> Prog {
        Prog(prog.as_libbpf_object())
    }

    /// libbpf-rs attaches through a `ProgramMut` only, though attaching changes nothing in it.
    fn get(&self) -> ProgramMut<'_> {
        // SAFETY: the program lives as long as the object (see `Send` above); the reference is
        // handed to libbpf-rs, which keeps it as a pointer and only reads through it.
        ProgramMut::new_mut(unsafe { &mut *self.0.as_ptr() })
    }
}

/// The programs the TLS uprobes run.
#[derive(Clone, Copy)]
pub(super) struct TlsPrograms {
    read: Prog,
    read_ex: Prog,
    write: Prog,
    write_ex: Prog,
    exit: Prog,
    go_read: Prog,
    go_write: Prog,
    go_exit: Prog,
    go_handshake_exit: Prog,
}

impl TlsPrograms {
    pub fn of(skel: &ReqcostSkel<'static>) -> TlsPrograms {
        let p = &skel.progs;
        TlsPrograms {
            read: Prog::of(&p.ssl_read_enter),
            read_ex: Prog::of(&p.ssl_read_ex_enter),
            write: Prog::of(&p.ssl_write_enter),
            write_ex: Prog::of(&p.ssl_write_ex_enter),
            exit: Prog::of(&p.ssl_exit),
            go_read: Prog::of(&p.go_read_enter),
            go_write: Prog::of(&p.go_write_enter),
            go_exit: Prog::of(&p.go_exit),
            go_handshake_exit: Prog::of(&p.go_handshake_exit),
        }
    }
}

enum Order {
    /// The tree forked: walk it again if the fork count moved since the last walk.
    Forked,
    /// Attach the uprobes again (resume), then say so.
    Follow(Sender<()>),
    /// Detach the uprobes of the libraries called since the last pause, then say so.
    Detach(Sender<()>, Called),
}

/// The libraries the tree called since the last pause, by number (`libs[n]`), and whether it
/// called any beyond the counters (`tls_lib_entries`): a pause detaches their uprobes alone,
/// those of a library nothing calls cost nothing and stay.
pub(super) struct Called {
    pub libs: Vec<bool>,
    pub unnumbered: bool,
}

impl Called {
    fn label(&self, numbers: &[String], label: &str) -> bool {
        match numbers.iter().position(|l| l == label) {
            Some(n) if n < TLS_LIBS => self.libs.get(n).copied().unwrap_or(false),
            _ => self.unnumbered,
        }
    }
}

/// What the links' thread has told: the libraries hooked (called or not) and not hooked, and
/// each library's number, its index in `numbers`, which its uprobes carry in their cookie.
#[derive(Clone, Default, PartialEq)]
struct Told {
    hooks: TlsHooks,
    numbers: Vec<String>,
}

/// The thread that owns the TLS links: the loader hands it orders and never waits for a link
/// to close, except while paused (no event is made then, so none can be lost).
pub(super) struct TlsWorker {
    orders: Option<Sender<Order>>,
    /// The latest fork count the loader read.
    forks: Arc<AtomicU64>,
    told: Arc<Mutex<Told>>,
    thread: Option<JoinHandle<()>>,
}

impl TlsWorker {
    /// Starts the thread and has it probe the tree's processes, then returns.
    pub fn start(root: u32, progs: TlsPrograms) -> TlsWorker {
        let (orders, received) = mpsc::channel();
        let forks = Arc::new(AtomicU64::new(0));
        let told = Arc::new(Mutex::new(Told::default()));
        let links = TlsLinks::new(root, progs);
        let (f, h) = (Arc::clone(&forks), Arc::clone(&told));
        let thread = std::thread::Builder::new()
            .name("reqcost-tls-links".into())
            .spawn(move || links.serve(&received, &f, &h))
            .expect("spawning the TLS links' thread");
        let worker = TlsWorker {
            orders: Some(orders),
            forks,
            told,
            thread: Some(thread),
        };
        worker.follow();
        worker
    }

    /// The TLS libraries hooked and not hooked so far, the hooked ones split by `calls`, the
    /// tree's calls into each library by its number: a library whose number has no count
    /// (more libraries than counters) is taken as called.
    pub fn hooks(&self, calls: &[u64]) -> TlsHooks {
        let told = self.told.lock().unwrap_or_else(|e| e.into_inner());
        let called = |label: &String| {
            let number = told.numbers.iter().position(|l| l == label);
            number.and_then(|n| calls.get(n)).is_none_or(|&c| c > 0)
        };
        let (hooked, uncalled) = told.hooks.hooked.iter().cloned().partition(called);
        TlsHooks {
            hooked,
            uncalled,
            unhooked: told.hooks.unhooked.clone(),
        }
    }

    /// Tells the thread the tree's fork count, without waiting.
    pub fn forked(&self, forks: u64) {
        if self.forks.swap(forks, Ordering::SeqCst) != forks {
            self.send(Order::Forked);
        }
    }

    /// Has the uprobes attached again, and waits for it: call it before the window starts.
    pub fn follow(&self) {
        self.wait(Order::Follow);
    }

    /// Has the uprobes of the libraries `called` detached, and waits for it: call it once the
    /// window ended.
    pub fn detach(&self, called: Called) {
        self.wait(|done| Order::Detach(done, called));
    }

    fn wait(&self, order: impl FnOnce(Sender<()>) -> Order) {
        let (done, wait) = mpsc::channel();
        self.send(order(done));
        // The thread answers every order it takes; an error means it is gone.
        let _ = wait.recv();
    }

    fn send(&self, order: Order) {
        if let Some(orders) = &self.orders {
            // Only a panicked thread hangs up; its panic is raised when it is joined.
            let _ = orders.send(order);
        }
    }
}

impl Drop for TlsWorker {
    fn drop(&mut self) {
        // Hanging up ends the thread once it has taken the orders sent; it drops the links.
        self.orders.take();
        if let Some(thread) = self.thread.take() {
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

/// A library and its uprobes in one process (none while a pause let go of them).
type LibLinks = (Hookable, Vec<Link>);

struct TlsLinks {
    root: u32,
    progs: TlsPrograms,
    finder: Finder,
    /// Each probed process: its start time (a pid reused by a new process is not the one
    /// probed) and its uprobes, per library (by label).
    procs: BTreeMap<u32, (u64, Vec<LibLinks>)>,
    /// Libraries probed in every process that maps them (pid -1), by label: the tree forked a
    /// process mapping them after the probes attached. Kept across pauses, the links dropped.
    wide: BTreeMap<String, (Hookable, Vec<Link>)>,
    told: Told,
    /// The tree's fork count when it was last walked.
    forks: u64,
    /// The tree was walked since the uprobes were (re)attached: a process new to a walk now
    /// was forked since.
    walked: bool,
}

impl TlsLinks {
    fn new(root: u32, progs: TlsPrograms) -> TlsLinks {
        TlsLinks {
            root,
            progs,
            finder: Finder::default(),
            procs: BTreeMap::new(),
            wide: BTreeMap::new(),
            told: Told::default(),
            forks: 0,
            walked: false,
        }
    }

    /// Takes orders until the loader hangs up. Forks seen while a walk or a detach lasted are
    /// one walk: each `Forked` reads the latest count, and a count already walked is not.
    fn serve(mut self, orders: &Receiver<Order>, forks: &AtomicU64, told: &Mutex<Told>) {
        for order in orders {
            let done = match order {
                Order::Forked => {
                    let forks = forks.load(Ordering::SeqCst);
                    if forks != self.forks {
                        self.forks = forks;
                        self.follow();
                        self.widen_forked();
                    }
                    None
                }
                Order::Follow(done) => {
                    self.follow();
                    Some(done)
                }
                Order::Detach(done, called) => {
                    self.detach(&called);
                    Some(done)
                }
            };
            // Told before the answer: whoever waited for this order reads what it found (a
            // test reads the libraries hooked as soon as the probes are attached).
            {
                let mut told = told.lock().unwrap_or_else(|e| e.into_inner());
                if *told != self.told {
                    *told = self.told.clone();
                }
            }
            if let Some(done) = done {
                let _ = done.send(());
            }
        }
    }

    /// Probes every process of the tree not probed yet, and lets go of those that left it.
    /// A process forked since the uprobes were attached ran unprobed until this walk: a
    /// server that forks per connection would lose its first requests in every child, so the
    /// libraries of such a process are probed in every process from then on.
    fn follow(&mut self) {
        let forked = std::mem::replace(&mut self.walked, true);
        let tree: BTreeMap<u32, u64> = reqcost_server::process_tree(self.root)
            .into_iter()
            .filter_map(|pid| Some((pid, start_time(pid)?)))
            .collect();
        self.procs
            .retain(|pid, (start, _)| tree.get(pid) == Some(start));
        self.reattach();
        for (&pid, &start) in &tree {
            if self.procs.contains_key(&pid) {
                continue;
            }
            let found = self.finder.find(pid);
            for lib in &found.unhooked {
                told(&mut self.told.hooks.unhooked, lib.clone());
            }
            let mut links = Vec::new();
            for lib in found.hooked {
                let label = lib.label();
                match self.wide.get(&label) {
                    Some((_, wide)) if !wide.is_empty() => {}
                    Some(_) => self.widen(lib),
                    None if forked => self.widen(lib),
                    None => {
                        let number = self.numbered(&label);
                        match attach(&self.progs, pid as i32, &lib, number) {
                            Ok(l) => {
                                told(&mut self.told.hooks.hooked, label.clone());
                                links.push((lib, l));
                            }
                            // The process left meanwhile: nothing to probe.
                            Err(_) if start_time(pid) != Some(start) => {}
                            Err(e) => self.failed(&label, &e),
                        }
                    }
                }
            }
            self.procs.insert(pid, (start, links));
        }
    }

    /// The tree forked since the last walk: its libraries are probed in every process from
    /// now on, whether or not the walk found the child. A child that serves one connection
    /// and exits (a server forking per connection, a loaded machine delaying the walk) is
    /// often gone before the walk, and its requests were read as ciphertext.
    fn widen_forked(&mut self) {
        let libs: Vec<Hookable> = self
            .procs
            .values()
            .flat_map(|(_, libs)| libs.iter().map(|(lib, _)| lib.clone()))
            .collect();
        for lib in libs {
            if !self.wide.contains_key(&lib.label()) {
                self.widen(lib);
            }
        }
    }

    /// Probes `lib` in every process that maps it, instead of per process. The file is opened
    /// through the root process's view: the child it was found in may be gone already (then
    /// its /proc/PID/root is).
    fn widen(&mut self, mut lib: Hookable) {
        let label = lib.label();
        lib.file = PathBuf::from(format!("/proc/{}/root", self.root))
            .join(lib.path.trim_start_matches('/'));
        let number = self.numbered(&label);
        match attach(&self.progs, -1, &lib, number) {
            Ok(links) => {
                for (_, libs) in self.procs.values_mut() {
                    libs.retain(|(l, _)| l.label() != label);
                }
                told(&mut self.told.hooks.hooked, label.clone());
                self.wide.insert(label, (lib, links));
            }
            Err(e) => self.failed(&label, &e),
        }
    }

    /// Attaches again the uprobes a pause let go of, in the processes already walked and
    /// file-wide.
    fn reattach(&mut self) {
        let wide: Vec<Hookable> = self
            .wide
            .values()
            .filter(|(_, links)| links.is_empty())
            .map(|(lib, _)| lib.clone())
            .collect();
        for lib in wide {
            self.widen(lib);
        }
        let mut failed = Vec::new();
        for (&pid, (start, libs)) in &mut self.procs {
            for (lib, links) in libs.iter_mut().filter(|(_, links)| links.is_empty()) {
                let number = number(&self.told.numbers, &lib.label());
                match attach(&self.progs, pid as i32, lib, number) {
                    Ok(l) => *links = l,
                    // The process left meanwhile: its entry goes at the next walk.
                    Err(_) if start_time(pid) != Some(*start) => {}
                    Err(e) => failed.push((lib.label(), e)),
                }
            }
        }
        for (label, e) in failed {
            self.failed(&label, &e);
        }
    }

    /// The cookie bits that number `label`'s uprobes (see [`number`]), numbering it first.
    fn numbered(&mut self, label: &str) -> u64 {
        told(&mut self.told.numbers, label.to_string());
        number(&self.told.numbers, label)
    }

    fn failed(&mut self, label: &str, e: &libbpf_rs::Error) {
        told(
            &mut self.told.hooks.unhooked,
            format!("{label}: attaching uprobes failed: {e}"),
        );
    }

    /// Detaches the uprobes of the libraries `called` (paused windows cost nothing);
    /// [`TlsLinks::follow`] attaches them again.
    fn detach(&mut self, called: &Called) {
        let numbers = &self.told.numbers;
        let mut gone = Vec::new();
        for (_, libs) in self.procs.values_mut() {
            for (lib, links) in libs.iter_mut() {
                if called.label(numbers, &lib.label()) {
                    gone.append(links);
                }
            }
        }
        for (label, (_, links)) in self.wide.iter_mut() {
            if called.label(numbers, label) {
                gone.append(links);
            }
        }
        super::detach_together(gone);
        self.walked = false;
    }
}

/// The cookie bits that number a library's uprobes, `numbers` holding its label, so that its
/// calls are counted apart (`tls_lib_entries`): none past the counters there are.
fn number(numbers: &[String], label: &str) -> u64 {
    let n = numbers.iter().position(|l| l == label);
    n.filter(|&n| n < TLS_LIBS)
        .map_or(u64::MAX << TLS_LIB_SHIFT, |n| (n as u64) << TLS_LIB_SHIFT)
}

/// Adds `what` to a list of things told, once.
fn told(list: &mut Vec<String>, what: String) {
    if !list.contains(&what) {
        list.push(what);
    }
}

/// The uprobes of one library in process `pid` (-1: in every process): each function's entry
/// program, its cookie the library's `number` and where the library's sessions say whether
/// they resumed ([`ResumedFlag::cookie`]), and the one return program that serves them all.
fn attach(
    progs: &TlsPrograms,
    pid: i32,
    lib: &Hookable,
    number: u64,
) -> Result<Vec<Link>, libbpf_rs::Error> {
    if let Some(points) = &lib.go {
        return go_links(progs, pid, &lib.file, points, number);
    }
    let cookie = number | lib.resumed.map_or(0, ResumedFlag::cookie);
    let mut links = Vec::new();
    for (entry, prog) in [
        (Entry::Read, progs.read),
        (Entry::ReadEx, progs.read_ex),
        (Entry::Write, progs.write),
        (Entry::WriteEx, progs.write_ex),
    ] {
        let offsets: Vec<usize> = lib
            .functions
            .iter()
            .filter(|(e, _)| *e == entry)
            .map(|&(_, offset)| offset)
            .collect();
        links.extend(uprobes(prog, pid, &lib.file, &offsets, cookie, false)?);
    }
    let all: Vec<usize> = lib.functions.iter().map(|&(_, offset)| offset).collect();
    links.extend(uprobes(progs.exit, pid, &lib.file, &all, 0, true)?);
    Ok(links)
}

/// Go's crypto/tls: uprobes at the entries of Read and Write (their cookie the library's
/// `number`) and at every RET of them and of the server handshake (src/gotls.rs says why not
/// uretprobes), at file offsets.
fn go_links(
    progs: &TlsPrograms,
    pid: i32,
    file: &Path,
    points: &GoTls,
    number: u64,
) -> Result<Vec<Link>, libbpf_rs::Error> {
    let rets: Vec<usize> = points
        .read
        .returns
        .iter()
        .chain(&points.write.returns)
        .map(|&r| r as usize)
        .collect();
    let handshake: Vec<usize> = points
        .handshake_returns
        .iter()
        .map(|&r| r as usize)
        .collect();
    let mut links = Vec::new();
    for (prog, offsets) in [
        (progs.go_read, vec![points.read.entry as usize]),
        (progs.go_write, vec![points.write.entry as usize]),
        (progs.go_exit, rets),
        (progs.go_handshake_exit, handshake),
    ] {
        links.extend(uprobes(prog, pid, file, &offsets, number, false)?);
    }
    Ok(links)
}

/// `prog` at each of `offsets` in `file`: one uprobe-multi link, or where the kernel has none
/// (before Linux 6.6) a link per offset.
fn uprobes(
    prog: Prog,
    pid: i32,
    file: &Path,
    offsets: &[usize],
    cookie: u64,
    retprobe: bool,
) -> Result<Vec<Link>, libbpf_rs::Error> {
    if offsets.is_empty() {
        return Ok(Vec::new());
    }
    let prog = &prog.get();
    let multi = UprobeMultiOpts {
        offsets: offsets.to_vec(),
        cookies: vec![cookie; offsets.len()],
        retprobe,
        ..UprobeMultiOpts::default()
    };
    if let Ok(link) = prog.attach_uprobe_multi_with_opts(pid, file, "", multi) {
        return Ok(vec![link]);
    }
    offsets
        .iter()
        .map(|&offset| {
            let opts = UprobeOpts {
                cookie,
                retprobe,
                ..UprobeOpts::default()
            };
            prog.attach_uprobe_with_opts(pid, file, offset, opts)
        })
        .collect()
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
