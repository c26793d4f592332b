//! fs-storm: ≥ 6 path lookups per request, ≥ 2 of them failing with ENOENT.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{ErrnoCount, Phase, RunRecord};

use crate::util::{confidences, edited, fired, kernel, main, set_syscall};

/// `calls` of `name` in all, 1 µs each, `failed` of them with `errno`.
fn lookups_in(p: &mut Phase, name: &str, calls: u64, errno: &str, failed: u64) {
    set_syscall(p, name, calls, calls * 1000);
    let s = kernel(p)
        .syscalls
        .iter_mut()
        .find(|s| s.name == name)
        .unwrap();
    s.errors = failed;
    s.errnos = vec![ErrnoCount {
        errno: errno.into(),
        count: failed,
    }];
}

/// The main phase (100 requests, one openat each in the fixture) with `stats` newfstatat calls
/// in all, `missing` of them ENOENT.
pub(super) fn stats(stats: u64, missing: u64) -> RunRecord {
    edited(|r| lookups_in(main(r), "newfstatat", stats, "ENOENT", missing))
}

/// The main phase with `stats` newfstatat calls in all, `denied` of them EACCES.
pub(super) fn denied(stats: u64, denied: u64) -> RunRecord {
    edited(|r| lookups_in(main(r), "newfstatat", stats, "EACCES", denied))
}

#[test]
fn failed_opens_count_as_missing() {
    let rec = edited(|r| {
        lookups_in(main(r), "newfstatat", 500, "ENOENT", 100);
        lookups_in(main(r), "openat", 100, "ENOENT", 100);
    });
    fired(&rec, "fs-storm");
}

#[test]
fn five_missing_per_request_are_high_confidence() {
    assert_eq!(
        confidences("fs-storm", &[stats(500, 500), stats(500, 499)]),
        [Confidence::High, Confidence::Medium]
    );
}
