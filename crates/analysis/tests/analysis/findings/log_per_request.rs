//! log-per-request: ≥ 0.9 writes to regular files per request, with ≥ 0.5 syncs or ≥ 1.8 opens
//! and ≥ 1.8 file closes per request.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{FdKind, IoDirection, Phase, RunRecord};

use crate::util::{
    assert_evidence, assert_share, assert_silent, edited, fired, kernel, main, set_io, set_syscall,
};

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
fn synced_log(writes: u64, synced: u64) -> RunRecord {
    edited(|r| {
        file_writes(main(r), writes);
        syncs(main(r), synced);
    })
}

/// The main phase (100 requests) with `writes` file writes, `opens` opens and `closes` file
/// closes in all.
fn reopened_log(writes: u64, opens: u64, closes: u64) -> RunRecord {
    edited(|r| {
        file_writes(main(r), writes);
        reopens(main(r), opens, closes);
    })
}

#[test]
fn fires_on_a_synced_write_per_request() {
    let f = fired(&synced_log(90, 50), "log-per-request");
    assert_evidence(
        &f,
        &[
            "0.9 writes to regular files per request",
            "0.5 fsync/fdatasync per request (2 µs each, the request waits for the disk)",
        ],
    );
    // The syncs' 1 000 ns per request, and the file's part (0.9 of 1.9 writes) of the 3 900 ns
    // inside write and writev.
    assert_share(&f, (1000.0 + 3900.0 * 0.9 / 1.9) / 20_000.0);
    assert_eq!(f.confidence, Confidence::Medium);
}

#[test]
fn silent_below_0_9_file_writes() {
    assert_silent(&synced_log(89, 100), "log-per-request");
}

#[test]
fn silent_below_0_5_syncs() {
    assert_silent(&synced_log(100, 49), "log-per-request");
}

#[test]
fn fires_on_a_log_reopened_per_request() {
    let f = fired(&reopened_log(100, 180, 180), "log-per-request");
    assert_evidence(
        &f,
        &[
            "1.0 writes to regular files per request",
            "1.8 opens and 1.8 file closes per request",
        ],
    );
    // Half of 1 write in 2 of the 4 000 ns in write and writev, and half the opens' 3 600 ns
    // and the closes' 910 ns.
    assert_share(&f, (2000.0 + 1800.0 + 455.0) / 20_000.0);
    assert_eq!(f.confidence, Confidence::Medium);
}

#[test]
fn silent_below_1_8_opens() {
    assert_silent(&reopened_log(100, 179, 300), "log-per-request");
}

#[test]
fn silent_below_1_8_file_closes() {
    assert_silent(&reopened_log(100, 300, 179), "log-per-request");
}

#[test]
fn silent_on_file_writes_alone() {
    assert_silent(&synced_log(500, 0), "log-per-request");
}

#[test]
fn silent_on_syncs_or_reopens_without_file_writes() {
    assert_silent(&synced_log(0, 100), "log-per-request");
    assert_silent(&reopened_log(0, 300, 300), "log-per-request");
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
