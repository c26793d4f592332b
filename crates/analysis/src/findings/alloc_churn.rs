//! - signal 1: **≥ 0.9 mmap/munmap/brk/mremap per request**;
//! - signal 2: **≥ 64 KiB mapped per request, or ≥ 8 user page faults per request**; both make a
//!   third signal.
//! - CPU share: the CPU in those syscalls plus 0.5 µs per fault; a munmap waiting for the
//!   address space's lock waits off CPU, given apart. The CPU is taken from the samples in those
//!   calls where the profile has kernel chains; without them, the calls' wall time, at most the
//!   phase's system CPU, said so.

use super::facts::{Ctx, Draft};
use super::{CarriedBy, Needs, Rule};

pub(super) const RULE: Rule = Rule {
    id: "alloc-churn",
    seed: None,
    needs: &[Needs::Kernel, Needs::Requests],
    carried_by: CarriedBy::SyscallClasses,
    judge,
};

/// Signal 1: calls that map or unmap memory per request, from this many.
const MIN_MAPS: f64 = 0.9;
/// Signal 2: at least this many bytes mapped per request...
const MIN_MAPPED: f64 = 65536.0;
/// ... or at least this many user page faults per request; both make a third signal.
const MIN_FAULTS: f64 = 8.0;
/// What a minor fault with a page zeroed costs.
const NS_PER_FAULT: f64 = 500.0;

const MEM_CALLS: &[&str] = &["mmap", "munmap", "brk", "mremap"];

/// Memory mapped and unmapped, and fresh pages faulted in, on every request.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    let maps = f.calls(MEM_CALLS);
    let faults = k.memory.page_faults_user as f64 / f.ok;
    let mapped = k.memory.mmap_bytes as f64 / f.ok;
    // Signal 1: mmap/munmap/brk on (nearly) every request; signal 2: large mappings (≥ 64 KiB a
    // request) or many fresh pages faulted in, so it is not the odd small allocation.
    if maps < MIN_MAPS || (mapped < MIN_MAPPED && faults < MIN_FAULTS) {
        return None;
    }
    let inside = ctx.in_calls(f, MEM_CALLS);
    let ns = inside.cpu_ns + faults * NS_PER_FAULT;
    Some(Draft {
        title: format!("{maps:.1} mmap/munmap/brk and {faults:.0} page faults per request: memory is mapped anew each time"),
        evidence: vec![
            format!("{:.1} mmap, {:.1} munmap, {:.1} brk per request", f.calls(&["mmap"]), f.calls(&["munmap"]), f.calls(&["brk"])),
            format!("{faults:.0} user page faults per request ({:.0} KiB mapped per request)", k.memory.mmap_bytes as f64 / f.ok / 1024.0),
            inside.describe("mmap/munmap/brk/mremap"),
        ],
        cpu_share: f.share(ns),
        phase: f.phase.name.clone(),
        fix: "reuse buffers across requests (a pool or per-connection arena); raise \
              M_MMAP_THRESHOLD / M_TRIM_THRESHOLD so glibc keeps large blocks",
        signals: 2 + usize::from(faults >= MIN_FAULTS && mapped >= MIN_MAPPED),
    })
}
