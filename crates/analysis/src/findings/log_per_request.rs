//! - signal 1: **≥ 0.9 writes to regular files per request**;
//! - signal 2: **≥ 0.5 fsync/fdatasync per request**, and/or signal 3: **≥ 1.8 opens and ≥ 1.8 file
//!   closes per request** (serving a file needs one of each; reopening the log adds the second).
//! - or signal 4: **≥ 4 writes to regular files per request of under 32 B each**: lines
//!   written unbuffered, a few bytes a call (memcached `-vv` with its stderr in a log file: 35
//!   writes of 3 B per command), to a file kept open.
//! - Where the record keeps the paths opened (`opened`), signal 3 also needs **a file that can
//!   be a log opened ≥ 0.9 times per request**, named in the evidence: not system files (/etc,
//!   /proc, /sys, /dev, /usr, /lib; the resolver's files in /etc are hostname-lookup's), not a
//!   database's write-ahead log or journal (`pg_wal/`, `-wal`, `-journal`, `.wal`), not a hidden
//!   file (Apache's `.htaccess` looked up in each directory: fs-storm's), not the root or a bare
//!   name without a dot (`usr`, `run`, `userdb`: the components of a path walked one openat at a
//!   time, as systemd's NSS module does in each new process), and not the served
//!   file (its name is the last part of the URL or of a request class; `index.*` for a URL
//!   ending in `/`; a path the probes cut matches by its start).
//! - The title says what was seen: "opens, writes and syncs", "opens, writes and closes (no fsync
//!   seen)", or "writes and syncs (kept open: no open per request seen)".
//! - CPU share: the CPU in the file writes and the extra open/close (from the samples in those
//!   calls where the profile has kernel chains; without them, their wall time, at most the
//!   phase's system CPU). Not the syncs': a sync's time is mostly the disk's, waited for off
//!   CPU, so the evidence gives it apart.

use reqcost_record::{FdKind, IoDirection, OpenedPath};

use super::facts::{Ctx, Draft, OPEN_CALLS, SYNC_CALLS};
use super::{CarriedBy, Needs, Rule};

pub(super) const RULE: Rule = Rule {
    id: "log-per-request",
    seed: Some("seeds/003 (log transaction)"),
    needs: &[Needs::Kernel, Needs::Requests],
    carried_by: CarriedBy::SyscallClasses,
    judge,
};

/// Signal 1: writes to regular files per request from this many.
const MIN_FILE_WRITES: f64 = 0.9;
/// Signal 2: syncs per request from this many.
pub(super) const MIN_SYNCS: f64 = 0.5;
/// Signal 3: opens and file closes per request, each, from this many: serving a file needs one
/// of each, reopening the log adds the second.
const MIN_REOPENS: f64 = 1.8;
/// Signal 4: writes to regular files per request from this many...
const MIN_UNBUFFERED_WRITES: f64 = 4.0;
/// ... of fewer bytes each on average than this.
const MAX_UNBUFFERED_BYTES: f64 = 32.0;

/// Signal 3 with paths: a file that can be a log opened this many times per request.
const MIN_LOG_OPENS: f64 = 0.9;

/// Bytes of a path the probes keep: a path this long may have been cut.
const PATH_KEPT: usize = 127;
/// Directories of the system's own files: nothing a server logs to.
const SYSTEM_DIRS: &[&str] = &["/etc/", "/proc/", "/sys/", "/dev/", "/usr/", "/lib"];
/// A database's write-ahead log or journal: durable by design, not a log of requests.
const WAL_MARKS: &[&str] = &["pg_wal/", "pg_xlog/", "-wal", "-journal", ".wal"];

/// The files opened per request that can be a log; None when the record keeps no paths.
fn logs<'a>(ctx: &'a Ctx) -> Option<Vec<&'a OpenedPath>> {
    let f = &ctx.main;
    let opened = &f.kernel?.opened;
    if opened.is_empty() {
        return None;
    }
    let served = served_names(ctx);
    let not_a_log = |path: &str| {
        let name = path.rsplit('/').next().unwrap_or(path);
        let cut = path.len() >= PATH_KEPT;
        name.starts_with('.')
            || path == "/"
            || !path.contains(['/', '.'])
            || SYSTEM_DIRS.iter().any(|d| path.starts_with(d))
            || WAL_MARKS.iter().any(|m| path.contains(m))
            || served.iter().any(|s| match s.as_str() {
                "" => name.starts_with("index."),
                s => s == name || (cut && s.starts_with(name)),
            })
    };
    Some(
        opened
            .iter()
            .filter(|o| o.count as f64 / f.ok >= MIN_LOG_OPENS && !not_a_log(&o.path))
            .collect(),
    )
}

/// The names of the files requests ask for: the last part of the URL's path and of each
/// class's, empty for one ending in `/`.
fn served_names(ctx: &Ctx) -> Vec<String> {
    let url = &ctx.rec.workload.url;
    let path = url.split("://").nth(1).and_then(|rest| rest.find('/').map(|i| &rest[i..]));
    let classes = ctx.main.phase.requests.iter().flat_map(|r| &r.by_class);
    path.into_iter()
        .chain(classes.map(|g| g.name.as_str()))
        .filter(|p| p.starts_with('/'))
        .map(|p| {
            let p = p.split(['?', ' ']).next().unwrap_or(p);
            p.rsplit('/').next().unwrap_or_default().to_string()
        })
        .collect()
}

/// seeds/003: an open/write/fsync/close "log transaction" per request.
pub(super) fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    if !f.usable() || f.kernel.is_none() {
        return None;
    }
    let (file_writes, file_bytes) = f.io(IoDirection::Write, FdKind::File);
    let syncs = f.calls(SYNC_CALLS);
    let opens = f.calls(OPEN_CALLS);
    let closes = f
        .kernel
        .map_or(0.0, |k| k.sockets.other_closes as f64 / f.ok);
    // Signal 1: a file write on every request. Signal 2: it is synced, or the file is opened
    // and closed around it (more opens and closes than serving one file needs).
    if file_writes < MIN_FILE_WRITES {
        return None;
    }
    let logs = logs(ctx);
    let reopened = opens >= MIN_REOPENS
        && closes >= MIN_REOPENS
        && logs.as_ref().is_none_or(|l| !l.is_empty());
    let unbuffered = file_writes >= MIN_UNBUFFERED_WRITES
        && file_bytes / file_writes < MAX_UNBUFFERED_BYTES;
    if syncs < MIN_SYNCS && !reopened && !unbuffered {
        return None;
    }
    let file_part =
        file_writes / (file_writes + f.io(IoDirection::Write, FdKind::Socket).0).max(1.0);
    let ns = ctx.in_calls(f, &["write", "pwrite64", "writev"]).cpu_ns * file_part
        + if reopened {
            ctx.in_calls(f, OPEN_CALLS).cpu_ns / 2.0 + ctx.in_calls(f, &["close"]).cpu_ns / 2.0
        } else {
            0.0
        };
    let mut evidence = vec![format!(
        "{file_writes:.1} writes to regular files per request"
    )];
    if syncs >= MIN_SYNCS {
        evidence.push(format!(
            "{syncs:.1} fsync/fdatasync per request ({:.0} µs each, the request waits for the disk: off CPU, not in the share)",
            f.time_ns(SYNC_CALLS) / 1000.0 / syncs
        ));
    }
    if unbuffered {
        evidence.push(format!(
            "{:.0} B per write: lines written unbuffered, a few bytes a call",
            file_bytes / file_writes
        ));
    }
    if reopened {
        evidence.push(format!(
            "{opens:.1} opens and {closes:.1} file closes per request"
        ));
        evidence.extend(logs.iter().flatten().map(|o| {
            format!(
                "{} opened {:.2} times per request",
                o.path,
                o.count as f64 / f.ok
            )
        }));
    }
    let title = match (reopened, syncs >= MIN_SYNCS) {
        (true, true) => "every request opens, writes and syncs a log file",
        (true, false) => "every request opens, writes and closes a log file (no fsync seen)",
        (false, true) => {
            "every request writes and syncs a log file (kept open: no open per request seen)"
        }
        (false, false) => {
            "every request writes a log file a few bytes a call, unbuffered (kept open, no fsync seen)"
        }
    };
    Some(Draft {
        title: title.into(),
        evidence,
        cpu_share: f.share(ns),
        phase: f.phase.name.clone(),
        fix: "keep the log open and buffer lines (write every N requests or every second); sync \
              periodically, not per request",
        signals: 1
            + usize::from(syncs >= MIN_SYNCS)
            + usize::from(reopened)
            + usize::from(unbuffered),
    })
    .filter(|d| d.signals >= 2)
}
