//! log-per-request: ≥ 0.9 writes to regular files per request, with ≥ 0.5 syncs or ≥ 1.8 opens
//! and ≥ 1.8 file closes per request.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{FdKind, IoDirection, Phase, RunRecord};

use crate::util::{edited, fired, kernel, main, set_io, set_syscall};

/// `calls` write(2) to regular files in all, 100 B and 1 µs each.
fn file_writes(p: &mut Phase, calls: u64) {
    set_io(
        p,
        "write",
        IoDirection::Write,
        FdKind::File,
        calls,
        calls * 100,
    );
    set_syscall(p, "write", calls, calls * 1000);
}

/// `calls` fdatasync in all, 2 µs each.
fn syncs(p: &mut Phase, calls: u64) {
    set_syscall(p, "fdatasync", calls, calls * 2000);
}

/// `opens` openat (2 µs each) and `closes` closes of files (0.5 µs each) in all.
fn reopens(p: &mut Phase, opens: u64, closes: u64) {
    set_syscall(p, "openat", opens, opens * 2000);
    let sockets = &mut kernel(p).sockets;
    sockets.other_closes = closes;
    let calls = sockets.closed + closes;
    set_syscall(p, "close", calls, calls * 500);
}

/// The main phase (100 requests) with `writes` file writes and `synced` syncs in all.
pub(super) fn synced_log(writes: u64, synced: u64) -> RunRecord {
    edited(|r| {
        file_writes(main(r), writes);
        syncs(main(r), synced);
    })
}

/// The main phase (100 requests) with `writes` file writes, `opens` opens and `closes` file
/// closes in all.
pub(super) fn reopened_log(writes: u64, opens: u64, closes: u64) -> RunRecord {
    edited(|r| {
        file_writes(main(r), writes);
        reopens(main(r), opens, closes);
    })
}

#[test]
fn synced_and_reopened_is_high_confidence() {
    let rec = edited(|r| {
        file_writes(main(r), 100);
        syncs(main(r), 100);
        reopens(main(r), 200, 200);
    });
    assert_eq!(fired(&rec, "log-per-request").confidence, Confidence::High);
}

#[test]
fn the_title_says_what_was_seen() {
    let title = |rec: &RunRecord| fired(rec, "log-per-request").title;
    assert_eq!(
        title(&synced_log(100, 100)),
        "every request writes and syncs a log file (kept open: no open per request seen)"
    );
    assert_eq!(
        title(&reopened_log(100, 200, 200)),
        "every request opens, writes and closes a log file (no fsync seen)"
    );
    let both = edited(|r| {
        file_writes(main(r), 100);
        syncs(main(r), 100);
        reopens(main(r), 200, 200);
    });
    assert_eq!(
        title(&both),
        "every request opens, writes and syncs a log file"
    );
}
