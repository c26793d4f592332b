//! log-per-request: ≥ 0.9 writes to regular files per request, with ≥ 0.5 syncs or ≥ 1.8 opens
//! and ≥ 1.8 file closes per request.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{FdKind, IoDirection, OpenedPath, Phase, RunRecord};

use crate::util::{
    assert_evidence, assert_fires, assert_silent_on, edit, edited, file_writes, fired, kernel,
    main, set_io, set_syscall, Expected,
};

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

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &synced_log(90, 50),
        "log-per-request",
        Expected {
            title: "every request writes and syncs a log file",
            evidence: &[
                "0.9 writes to regular files per request",
                "0.5 fsync/fdatasync per request (2 µs each, the request waits for the disk: off CPU, not in the share)",
            ],
            // The file's part (0.9 of 1.9 writes) of the 3 900 ns inside write and writev;
            // not the syncs' 1 000 ns per request, waited for off CPU.
            share: 3900.0 * 0.9 / 1.9 / 20_000.0,
            confidence: Confidence::Medium,
        },
    );
    assert_fires(
        &reopened_log(100, 180, 180),
        "log-per-request",
        Expected {
            title: "every request opens, writes and closes a log file",
            evidence: &[
                "1.0 writes to regular files per request",
                "1.8 opens and 1.8 file closes per request",
            ],
            // Half of 1 write in 2 of the 4 000 ns in write and writev, and half the opens'
            // 3 600 ns and the closes' 910 ns.
            share: (2000.0 + 1800.0 + 455.0) / 20_000.0,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "log-per-request",
        &[
            ("0.89 file writes, synced", synced_log(89, 100)),
            ("0.49 syncs", synced_log(100, 49)),
            ("1.79 opens", reopened_log(100, 179, 300)),
            ("1.79 file closes", reopened_log(100, 300, 179)),
            ("5 file writes", synced_log(500, 0)),
            ("1 sync without file writes", synced_log(0, 100)),
            ("3 reopens without file writes", reopened_log(0, 300, 300)),
        ],
    );
}

/// A log reopened on every request, as `reopened_log(100, 200, 200)`, with the paths opened:
/// the served file and `other`, each on every request.
fn with_paths(other: &str) -> RunRecord {
    edit(reopened_log(100, 200, 200), |r| {
        kernel(main(r)).opened = [(other, 100), ("/srv/www/1k.html", 100)]
            .map(|(path, count)| OpenedPath {
                path: path.into(),
                count,
            })
            .to_vec();
    })
}

/// Where the record keeps the paths opened, the reopened file must be able to be a log, and
/// is named: not the resolver's files, a system file, a database's WAL or the served file.
#[test]
fn the_file_reopened_is_named_and_must_be_able_to_be_a_log() {
    let f = fired(&with_paths("/var/log/app/access.log"), "log-per-request");
    assert_evidence(
        &f,
        &["/var/log/app/access.log opened 1.00 times per request"],
    );
    assert!(
        !f.evidence.iter().any(|e| e.contains("1k.html")),
        "{:?}",
        f.evidence
    );
    assert_silent_on(
        "log-per-request",
        &[
            ("/etc/hosts", with_paths("/etc/hosts")),
            ("/etc/localtime", with_paths("/etc/localtime")),
            (
                "PostgreSQL's WAL",
                with_paths("pg_wal/000000010000000000000001"),
            ),
            ("SQLite's WAL", with_paths("/srv/app/db.sqlite-wal")),
            ("the served file twice", with_paths("/srv/www/1k.html")),
            ("Apache's .htaccess", with_paths("/srv/www/.htaccess")),
            ("the root", with_paths("/")),
            ("a directory walked by components", with_paths("userdb")),
            (
                "the served file, its path cut at 127 bytes",
                with_paths(&format!("/srv/{}/1k.h", "d".repeat(118))),
            ),
        ],
    );
}

/// `writes` writes of `each` bytes to regular files in all, over the 100 requests, and nothing
/// else: a log kept open, written unbuffered a few bytes a call (memcached `-vv` with its stderr
/// in a file: 35 writes of 3 B per command).
fn unbuffered_log(writes: u64, each: u64) -> RunRecord {
    edited(|r| {
        file_writes(main(r), writes);
        set_io(
            main(r),
            "write",
            IoDirection::Write,
            FdKind::File,
            writes,
            writes * each,
        );
    })
}

#[test]
fn a_log_written_a_few_bytes_a_call_is_one() {
    assert_fires(
        &unbuffered_log(400, 31),
        "log-per-request",
        Expected {
            title: "every request writes a log file a few bytes a call, unbuffered (kept open, no fsync seen)",
            evidence: &[
                "4.0 writes to regular files per request",
                "31 B per write: lines written unbuffered, a few bytes a call",
            ],
            // The file's part (4 of 5 writes) of the 7 000 ns inside write and writev.
            share: 7000.0 * 4.0 / 5.0 / 20_000.0,
            confidence: Confidence::Medium,
        },
    );
    assert_silent_on(
        "log-per-request",
        &[
            ("3.99 writes of 3 B", unbuffered_log(399, 3)),
            ("4 writes of 32 B", unbuffered_log(400, 32)),
        ],
    );
}
