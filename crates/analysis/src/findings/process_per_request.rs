//! - signal 1: **≥ 0.5 processes or threads created per request** (fork, clone, vfork in the
//!   server's tree);
//! - signal 2: **they do not outlive the work: ≥ 0.5 processes exiting, or ≥ 0.5 execve, per
//!   request** (a preforking server's children retired after one connection, CGI, inetd-style
//!   launch); for threads, whose exits the probes do not count, ≥ 0.5 mmap per request (each new
//!   thread's stack);
//! - a third signal when **≥ 8 user page faults per request** come with them (a new process
//!   touches its pages anew).
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

use super::facts::{profile_share, Ctx, Draft};
use super::{CarriedBy, Needs, Rule};

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

/// A process (or thread) made for each request and thrown away after it.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    let t = &k.tree;
    let forks = t.processes_forked as f64 / f.ok;
    let threads = t.threads_created as f64 / f.ok;
    let exits = t.processes_exited as f64 / f.ok;
    let execs = f.calls(&["execve", "execveat"]);
    let maps = f.calls(&["mmap"]);
    let faults = k.memory.page_faults_user as f64 / f.ok;
    // Signal 1: new processes or threads at request rate; signal 2: they end as fast, or run a
    // new program, or (threads) each maps its stack: churn, not a pool growing once.
    let short_lived = exits >= MIN_SPAWNS
        || execs >= MIN_SPAWNS
        || (threads >= MIN_SPAWNS && maps >= MIN_SPAWNS);
    if forks + threads < MIN_SPAWNS || !short_lived {
        return None;
    }
    let inside = ctx.in_calls(f, SPAWN_CALLS);
    let from_calls = f.share(inside.cpu_ns + faults * NS_PER_FAULT);
    let waits = f.calls(WAIT_CALLS);
    let sampled = ctx
        .profile
        .and_then(|p| profile_share(p, |n| PROCESS_FRAMES.iter().any(|x| n.starts_with(x))));
    let outside = f.phase.requests.as_ref().and_then(|r| {
        let total = r.attributed_cpu_ns + r.unattributed_cpu_ns;
        (total > 0).then(|| r.unattributed_cpu_ns as f64 / total as f64)
    });
    let evidence = [
        Some(format!(
            "{forks:.2} processes forked, {threads:.2} threads created, {exits:.2} processes exited per request"
        )),
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
    Some(Draft {
        title: format!(
            "{:.2} new processes or threads per request, each retired after it: a process per connection",
            forks + threads
        ),
        evidence: evidence.into_iter().flatten().collect(),
        cpu_share: [sampled, outside]
            .into_iter()
            .flatten()
            .fold(from_calls, f64::max),
        phase: f.phase.name.clone(),
        fix: "keep workers alive across connections: Apache MaxConnectionsPerChild 0 (or \
              thousands) and an event/worker MPM, a pool of long-lived workers or threads; for \
              CGI, FastCGI or uwsgi; for inetd-style launch, a standing server",
        signals: 2 + usize::from(faults >= MIN_FAULTS),
    })
}
