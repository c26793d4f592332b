//! fs-storm: ≥ 6 path lookups per request, ≥ 2 of them failing with ENOENT.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{ErrnoCount, Phase, RunRecord};

use crate::util::{
    assert_evidence, assert_share, assert_silent, edited, fired, kernel, main, set_syscall,
};

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
fn stats(stats: u64, missing: u64) -> RunRecord {
    edited(|r| lookups_in(main(r), "newfstatat", stats, "ENOENT", missing))
}

#[test]
fn fires_at_six_lookups_two_missing() {
    let f = fired(&stats(500, 200), "fs-storm");
    assert!(
        f.title
            .contains("6 path lookups per request, 2 of them for files that do not exist"),
        "{}",
        f.title
    );
    assert_evidence(
        &f,
        &[
            "5.0 stat-family and 1.0 open calls per request",
            "2.0 ENOENT per request",
            "7.0 µs per request inside them",
        ],
    );
    assert_share(&f, 7000.0 / 20_000.0);
    assert_eq!(f.confidence, Confidence::Medium);
}

#[test]
fn silent_below_six_lookups() {
    assert_silent(&stats(499, 499), "fs-storm");
}

#[test]
fn silent_below_two_missing() {
    assert_silent(&stats(3000, 199), "fs-storm");
}

#[test]
fn silent_on_a_few_lookups_of_missing_files() {
    assert_silent(&stats(300, 300), "fs-storm");
}

#[test]
fn other_errors_are_not_missing_files() {
    let rec = edited(|r| lookups_in(main(r), "newfstatat", 3000, "EACCES", 1000));
    assert_silent(&rec, "fs-storm");
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
        fired(&stats(500, 500), "fs-storm").confidence,
        Confidence::High
    );
    assert_eq!(
        fired(&stats(500, 499), "fs-storm").confidence,
        Confidence::Medium
    );
}
