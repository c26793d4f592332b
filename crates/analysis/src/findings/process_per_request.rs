//! - signal 1: **≥ 0.5 processes or threads created per request, or per connection** where
//!   connections carry several requests (keep-alive: a process forked per connection that
//!   serves 4 requests makes 0.25 per request), judged per connection on 8 connections or more
//!   (a database's backend for each of a benchmark's few long connections starts once)
//!   (fork, clone, vfork in the server's tree);
//! - signal 2: **they do not outlive the work: ≥ 0.5 processes exiting, or ≥ 0.5 execve, per
//!   request or per connection, as signal 1** (a preforking server's children retired after one
//!   connection, CGI, inetd-style launch); for threads, whose exits the probes do not count,
//!   ≥ 0.5 mmap per request or connection (each new thread's stack);
//! - a third signal when **≥ 8 user page faults per request** come with them (a new process
//!   touches its pages anew).
//! - **Recycled workers**: processes made below those rates, **≥ 2 forked and ≥ 2 exited in
//!   the phase** (workers replaced as they go) whose **creation, exit and mapping calls hold ≥ 5 %
//!   of the CPU** (from the samples or the calls, as below): a worker replaced every N requests
//!   (apache2 `MaxConnectionsPerChild N`, gunicorn `--max-requests N`, php-fpm
//!   `pm.max_requests N`), named with N in requests and in connections.
//! - Ranked as the cause of the mapping, page-fault and path-lookup storms a new process brings,
//!   not below them: its CPU share counts the process calls and the mapping calls and page faults
//!   that alloc-churn counts, or the sampled share of process creation, exit and page faults when
//!   that is larger.
//! - Debian's apache2 (prefork) with `MaxConnectionsPerChild 1`: about 1 fork and 1 exit per
//!   request, 159 user page faults and 34 mmap/munmap per request, 85 % of the CPU outside any
//!   request.
//! - CPU share: the CPU in clone/clone3/fork/vfork/execve/execveat and
//!   mmap/munmap/brk/mremap/mprotect (from the samples in those calls where the profile has
//!   kernel chains; without them, their wall time, at most the phase's system CPU, said so),
//!   plus 0.5 µs per user page fault; or the share of samples in process creation, exit and page
//!   faults (copy_process, do_exit, exit_mmap, exc_page_fault, ...), or the share of the CPU
//!   outside any request where the phase has per-request accounting (a new process starts up
//!   and exits outside any request: the interpreter or program it loads is its cost), whichever
//!   is larger. Time in wait4/waitid is the parent waiting for its children, off CPU: given
//!   apart, never in the share.

use super::facts::{profile_share, Ctx, Draft, Facts};
use super::{CarriedBy, Needs, Rule};
use reqcost_record::{KernelStats, Unit};

pub(super) const RULE: Rule = Rule {
    id: "process-per-request",
    seed: None,
    needs: &[Needs::Kernel, Needs::Requests],
    carried_by: CarriedBy::SyscallClasses,
    judge,
};

/// Signal 1: processes or threads created per request, from this many; signal 2: processes
/// exiting, programs executed, or (threads) stacks mapped per request, from as many.
const MIN_SPAWNS: f64 = 0.5;
/// A third signal: user page faults per request from this many.
const MIN_FAULTS: f64 = 8.0;
/// A process per connection is judged on this many connections or more: a few long ones (a
/// database's backend for each of its benchmark's clients) start once, however much of a short
/// phase that start is.
const MIN_CHURNED_CONNECTIONS: f64 = 8.0;
/// Recycled workers: processes forked and exited in the phase, each from this many...
const MIN_RECYCLED: u64 = 2;
/// ... whose creation, exit and mapping hold this share of the CPU.
const MIN_RECYCLING_SHARE: f64 = 0.05;
/// What a minor fault with a page zeroed costs (as alloc-churn counts it).
const NS_PER_FAULT: f64 = 500.0;

/// Calls that make a process or thread and map its memory: CPU the churn costs.
const SPAWN_CALLS: &[&str] = &[
    "clone", "clone3", "fork", "vfork", "execve", "execveat", "mmap", "munmap", "brk", "mremap",
    "mprotect",
];
/// Calls in which a parent waits for its children: their time is the children's lifetime.
const WAIT_CALLS: &[&str] = &["wait4", "waitid"];
/// Kernel functions of creating, starting and retiring a process, and of faulting its pages in.
const PROCESS_FRAMES: &[&str] = &[
    "copy_process",
    "kernel_clone",
    "begin_new_exec",
    "load_elf_binary",
    "do_exit",
    "do_group_exit",
    "exit_mmap",
    "exc_page_fault",
];

/// How often processes are made and retired: per request, per connection, or now and then.
#[derive(Clone, Copy)]
enum Churn {
    Request,
    /// Connections per request (under 1).
    Connection(f64),
    Recycled,
}

impl Churn {
    /// Requests (or connections) per request: what the per-request figures are divided by.
    fn scale(self) -> f64 {
        match self {
            Churn::Connection(c) => c,
            Churn::Request | Churn::Recycled => 1.0,
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Churn::Connection(_) => "connection",
            Churn::Request | Churn::Recycled => "request",
        }
    }
}

/// Signals 1 and 2 at a unit `scale` requests long: processes or threads made and retired as
/// often as that unit.
fn churns(f: &Facts, k: &KernelStats, scale: f64) -> bool {
    let per = |n: u64| n as f64 / f.ok / scale;
    let t = &k.tree;
    let spawns = per(t.processes_forked) + per(t.threads_created);
    let short_lived = per(t.processes_exited) >= MIN_SPAWNS
        || f.calls(&["execve", "execveat"]) / scale >= MIN_SPAWNS
        || (per(t.threads_created) >= MIN_SPAWNS && f.calls(&["mmap"]) / scale >= MIN_SPAWNS);
    spawns >= MIN_SPAWNS && short_lived
}

/// The unit at which processes churn, if they do: per request, else per connection where
/// connections carry several requests, else workers recycled now and then.
fn churn(f: &Facts, k: &KernelStats) -> Option<Churn> {
    let conns = f.phase.units_of(Unit::Connection).unwrap_or(0.0) / f.ok;
    if churns(f, k, 1.0) {
        Some(Churn::Request)
    } else if conns > 0.0
        && conns < 1.0
        && conns * f.ok >= MIN_CHURNED_CONNECTIONS
        && churns(f, k, conns)
    {
        Some(Churn::Connection(conns))
    } else {
        // Made as often as requests or connections but not retired as fast: not recycling.
        let t = &k.tree;
        let unit = if conns > 0.0 { conns.min(1.0) } else { 1.0 };
        let rare = (t.processes_forked + t.threads_created) as f64 / f.ok / unit < MIN_SPAWNS;
        (rare && t.processes_forked >= MIN_RECYCLED && t.processes_exited >= MIN_RECYCLED)
            .then_some(Churn::Recycled)
    }
}

/// `one worker replaced every 25 requests (12.5 connections)`, from the processes exited.
fn every(f: &Facts, k: &KernelStats) -> Option<String> {
    let exited = k.tree.processes_exited;
    (exited > 0).then(|| {
        let requests = f.ok / exited as f64;
        let conns = f
            .phase
            .units_of(Unit::Connection)
            .map(|c| c / exited as f64)
            .filter(|&per| per >= 1.0 && per < requests)
            .map(|per| format!(" ({per:.1} connections)"))
            .unwrap_or_default();
        format!("one worker replaced every {requests:.1} requests{conns}")
    })
}

/// A process (or thread) made for each request or connection and thrown away after it, or
/// workers recycled every few requests.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    let churn = churn(f, k)?;
    let t = &k.tree;
    let forks = t.processes_forked as f64 / f.ok;
    let threads = t.threads_created as f64 / f.ok;
    let exits = t.processes_exited as f64 / f.ok;
    let execs = f.calls(&["execve", "execveat"]);
    let faults = k.memory.page_faults_user as f64 / f.ok;
    let inside = ctx.in_calls(f, SPAWN_CALLS);
    let from_calls = f.share(inside.cpu_ns + faults * NS_PER_FAULT);
    let sampled = ctx
        .profile
        .and_then(|p| profile_share(p, |n| PROCESS_FRAMES.iter().any(|x| n.starts_with(x))));
    let own = sampled.map_or(from_calls, |s| s.max(from_calls));
    // Workers replaced now and then cost little unless starting one is dear.
    if matches!(churn, Churn::Recycled) && own < MIN_RECYCLING_SHARE {
        return None;
    }
    let outside = f.phase.requests.as_ref().and_then(|r| {
        let total = r.attributed_cpu_ns + r.unattributed_cpu_ns;
        (total > 0).then(|| r.unattributed_cpu_ns as f64 / total as f64)
    });
    let waits = f.calls(WAIT_CALLS);
    let unit = churn.unit();
    let evidence = [
        Some(format!(
            "{forks:.2} processes forked, {threads:.2} threads created, {exits:.2} processes exited per request"
        )),
        match churn {
            Churn::Connection(c) => Some(format!(
                "{:.2} processes or threads per connection, {:.1} requests per connection",
                (forks + threads) / c,
                1.0 / c
            )),
            Churn::Request | Churn::Recycled => None,
        },
        every(f, k),
        (execs > 0.0).then(|| format!("{execs:.2} execve per request: a new program each time")),
        Some(format!(
            "{faults:.0} user page faults and {:.1} mmap/munmap per request come with them",
            f.calls(&["mmap", "munmap"])
        )),
        Some(inside.describe("process creation and mapping calls")),
        (waits > 0.0).then(|| {
            format!(
                "{:.1} µs per request in wait4/waitid, {waits:.2} calls: the parent waiting for its children, off CPU, not in the share",
                f.time_ns(WAIT_CALLS) / 1000.0
            )
        }),
        outside.map(|o| {
            format!(
                "{:.0} % of the CPU outside any request (the processes' start-up and exit)",
                o * 100.0
            )
        }),
        sampled.map(|s| {
            format!(
                "{:.0} % of CPU samples in process creation, exit and page faults",
                s * 100.0
            )
        }),
    ];
    let (title, fix) = match churn {
        Churn::Recycled => (
            format!(
                "recycled workers: {}, each start-up and exit paid again",
                every(f, k).unwrap_or_default()
            ),
            RECYCLING_FIX,
        ),
        _ => (
            format!(
                "{:.2} new processes or threads per {unit}, each retired after it: a process per connection",
                (forks + threads) / churn.scale()
            ),
            PER_CONNECTION_FIX,
        ),
    };
    Some(Draft {
        title,
        evidence: evidence.into_iter().flatten().collect(),
        cpu_share: outside.map_or(own, |o| o.max(own)),
        phase: f.phase.name.clone(),
        fix,
        signals: 2 + usize::from(faults / churn.scale() >= MIN_FAULTS),
    })
}

const PER_CONNECTION_FIX: &str = "keep workers alive across connections: Apache \
     MaxConnectionsPerChild 0 (or thousands) and an event/worker MPM, a pool of long-lived \
     workers or threads; for CGI, FastCGI or uwsgi; for inetd-style launch, a standing server";
const RECYCLING_FIX: &str = "raise the recycling limit to thousands of requests, or remove \
     it: apache2 MaxConnectionsPerChild 0, gunicorn --max-requests 0, php-fpm pm.max_requests \
     0; where a leak is why it is set, fix the leak or recycle rarely";
