//! Data made durable (fsync, fdatasync, sync_file_range) every time the server writes, where a
//! sync every second or once per group of commits would do. A server that synced its log once
//! per event-loop turn made 0.49 fdatasync per request under 4 clients, at 3.6x the CPU and a
//! fifth of the throughput; a database flushing its WAL per transaction of 5 round trips made
//! 0.29 per request. Per request, neither reaches log-per-request's 0.5: they are judged per
//! write batch.
//!
//! - signal 1: **≥ 0.1 syncs per request**: a sync every second under load is far fewer;
//! - signal 2: **≥ 0.25 syncs per write batch**, a batch being the file writes of one
//!   event-loop turn: the writes to regular files or the readiness-wait returns with something
//!   ready, whichever are fewer (a loop turn writes once for all its requests; a database
//!   writes its WAL once per commit and waits for the client at each statement);
//! - a third signal when **the requests wait longer in the syncs than they take CPU**.
//! - Yields to log-per-request where that names the syncs (≥ 0.5 per request with a file write
//!   per request): one finding for one cost.
//! - Writes to files opened with O_SYNC or O_DSYNC are not seen: the probes do not record the
//!   flags a file was opened with; their time shows in the file writes.
//! - CPU share: the CPU in the sync calls, from the samples in them where the profile has
//!   kernel chains; without them, their wall time, at most the phase's system CPU. The time
//!   blocked in them, waiting for the disk off CPU, is given apart and is not in the share.

use reqcost_record::{FdKind, IoDirection};

use super::facts::{Ctx, Draft, Facts, SYNC_CALLS};
use super::log_per_request;
use super::{CarriedBy, Needs, Rule};

pub(super) const RULE: Rule = Rule {
    id: "durable-syncs",
    seed: None,
    needs: &[Needs::Kernel, Needs::Requests],
    carried_by: CarriedBy::SyscallClasses,
    judge,
};

/// Signal 1: syncs per request from this many.
const MIN_SYNCS: f64 = 0.1;
/// Signal 2: syncs per write batch from this many.
const MIN_PER_BATCH: f64 = 0.25;

/// Syncs on every batch of writes, per request or per event-loop turn.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    let syncs = f.calls(SYNC_CALLS);
    if syncs < MIN_SYNCS {
        return None;
    }
    if syncs >= log_per_request::MIN_SYNCS && log_per_request::judge(ctx).is_some() {
        return None;
    }
    let (file_writes, _) = f.io(IoDirection::Write, FdKind::File);
    let turns = k
        .waits
        .iter()
        .map(|w| w.returns.saturating_sub(w.zero_ready))
        .sum::<u64>() as f64
        / f.ok;
    // A server without a readiness loop (a thread or process per connection) has no turns:
    // its writes are the batches.
    let batches = if turns > 0.0 {
        file_writes.min(turns)
    } else {
        file_writes
    };
    if batches <= 0.0 || syncs / batches < MIN_PER_BATCH {
        return None;
    }
    let inside = ctx.in_calls(f, SYNC_CALLS);
    let waited = f.time_ns(SYNC_CALLS);
    let longer_than_cpu = f.cpu_us().is_some_and(|cpu| waited / 1000.0 >= cpu);
    let per_sync_us = waited / syncs / 1000.0;
    let mut evidence = vec![
        format!(
            "{syncs:.2} syncs per request ({}), {per_sync_us:.0} µs each",
            named_syncs(f)
        ),
        format!(
            "{:.2} syncs per write batch: {file_writes:.2} file writes and {turns:.2} loop turns (readiness waits with something ready) per request",
            syncs / batches
        ),
        inside.describe("the syncs"),
    ];
    if let Some(cpu) = f.cpu_us() {
        evidence.push(format!(
            "{:.1} µs per request in the syncs against {cpu:.1} µs of CPU per request",
            waited / 1000.0
        ));
    }
    Some(Draft {
        title: format!(
            "{syncs:.2} syncs per request, {:.2} per write batch: every batch of writes waits for the disk",
            syncs / batches
        ),
        evidence,
        cpu_share: f.share(inside.cpu_ns),
        phase: f.phase.name.clone(),
        fix: "sync less often than every write: once a second (redis `appendfsync everysec`), \
              per group of commits (PostgreSQL `commit_delay`, or `synchronous_commit = off` \
              where losing the last commits on a crash is acceptable), or from a background \
              thread; a log needs no fsync per line",
        signals: 2 + usize::from(longer_than_cpu),
    })
}

/// Each sync call seen, per request, most first: `fdatasync 0.48, fsync 0.01`.
fn named_syncs(f: &Facts) -> String {
    let Some(k) = f.kernel else {
        return String::new();
    };
    // The record lists syscalls most frequent first.
    k.syscalls
        .iter()
        .filter(|s| SYNC_CALLS.contains(&s.name.as_str()) && s.count > 0)
        .map(|s| format!("{} {:.2}", s.name, s.count as f64 / f.ok))
        .collect::<Vec<_>>()
        .join(", ")
}
