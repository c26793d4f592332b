//! fs-storm: ≥ 6 path lookups per request, ≥ 2 of them failing with ENOENT.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{ErrnoCount, Phase, RunRecord};

use crate::util::{
    add_syscall_stack, assert_fires, assert_silent_on, confidences, edit, edited, fired, kernel,
    main, set_syscall, Expected,
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

/// The main phase with `stats` newfstatat calls in all, `denied` of them EACCES.
fn denied(stats: u64, denied: u64) -> RunRecord {
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

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &stats(500, 200),
        "fs-storm",
        Expected {
            title: "6 path lookups per request, 2 of them for files that do not exist",
            evidence: &[
                "5.0 stat-family and 1.0 open calls per request",
                "2.0 ENOENT per request",
                "7.0 µs per request inside them",
            ],
            share: 7000.0 / 20_000.0,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "fs-storm",
        &[
            ("5.99 lookups, all missing", stats(499, 499)),
            ("31 lookups, 1.99 missing", stats(3000, 199)),
            ("4 lookups, 3 missing", stats(300, 300)),
            ("31 lookups, 10 denied", denied(3000, 1000)),
        ],
    );
}

/// A lookup waiting for a cold disk waits off CPU: 5 ms per request inside newfstatat, of
/// which the samples put 4 µs on CPU. The share counts those, never the wait.
#[test]
fn time_blocked_in_the_lookups_is_not_cpu() {
    let cold = edit(stats(500, 200), |r| {
        set_syscall(main(r), "newfstatat", 500, 500 * 1_000_000)
    });
    // 50 of 250 samples in newfstatat: 20 % of 20 µs.
    let sampled = edit(cold.clone(), |r| {
        add_syscall_stack(r, "__do_sys_newfstatat", 50)
    });
    assert_fires(
        &sampled,
        "fs-storm",
        Expected {
            title: "6 path lookups per request",
            evidence: &["5002.0 µs per request inside them: 4.0 µs on CPU (50 of 250 samples), 4998.0 µs blocked off CPU (not in the share)"],
            share: 0.2,
            confidence: Confidence::Medium,
        },
    );
    // Without samples in syscalls, the wall time is a bound: at most the system CPU, 10 µs.
    assert_fires(
        &cold,
        "fs-storm",
        Expected {
            title: "6 path lookups per request",
            evidence: &["5002.0 µs per request inside them (wall time, blocked time included: no sampled kernel chains split it; the share counts at most the phase's system CPU, 10.0 µs)"],
            share: 0.5,
            confidence: Confidence::Medium,
        },
    );
}

/// A share of the run's samples can say more than the calls lasted (sampling error, phases
/// weighing differently): no call is on CPU longer than it lasts. 100 of 300 samples would be
/// 6.7 µs per request; the lookups took 7 µs, so they stand. 200 of 400 would be 10 µs: 7.
#[test]
fn the_cpu_inside_the_lookups_is_at_most_their_wall_time() {
    let sampled = |n: u64| {
        edit(stats(500, 200), |r| {
            add_syscall_stack(r, "__do_sys_newfstatat", n)
        })
    };
    let share = |n: u64| fired(&sampled(n), "fs-storm").cpu_share;
    assert!((share(100) - 100.0 / 300.0).abs() < 1e-9, "{}", share(100));
    assert!(
        (share(200) - 7000.0 / 20_000.0).abs() < 1e-9,
        "{}",
        share(200)
    );
}
