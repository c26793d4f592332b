//! small-writes: ≥ 8 socket writes per request, < 1024 B each on average.

use reqcost_analysis::findings::Confidence;

use crate::util::{
    add_syscall_stack, assert_fires, assert_share, assert_silent_on, confidences, edit, fired,
    main, set_cpu, set_syscall, socket_writes, Expected,
};

#[test]
fn judged_in_the_main_phase() {
    let f = fired(&socket_writes(800, 800 * 1023), "small-writes");
    assert_eq!(f.phase, "main");
}

#[test]
fn writes_under_256_bytes_are_a_third_signal() {
    let writes = [socket_writes(800, 800 * 255), socket_writes(800, 800 * 256)];
    assert_eq!(
        confidences("small-writes", &writes),
        [Confidence::High, Confidence::Medium]
    );
}

#[test]
fn writes_a_large_response_needs_are_not_waste() {
    // 100 writes of 1000 B: 100 000 B need two 64 KiB writes, so 98 of 100 µs are waste, of
    // 200 µs of CPU per request.
    let rec = edit(socket_writes(10_000, 10_000 * 1000), |r| {
        set_cpu(main(r), 20_000_000, 10_000_000)
    });
    assert_share(&fired(&rec, "small-writes"), 98.0 / 200.0);
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &socket_writes(800, 800 * 1023),
        "small-writes",
        Expected {
            title: "8 socket writes per request of 1023 B each",
            evidence: &[
                "8.0 write-like calls on sockets per request",
                "1023 B per call on average, 8184 B per request",
                "8.0 µs per request inside write-like syscalls",
            ],
            // One write per 64 KiB would do: 7 of the 8 µs are waste, of 20 µs of CPU.
            share: 7.0 / 20.0,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "small-writes",
        &[
            ("7.99 tiny writes", socket_writes(799, 799 * 100)),
            ("20 writes of 1024 B", socket_writes(2000, 2000 * 1024)),
            ("2 tiny writes", socket_writes(200, 200 * 10)),
        ],
    );
}

/// A blocking server writing to a slow reader waits in its writes for room in the send buffer:
/// 8 ms per request inside writev, of which the samples put 4 µs on CPU. The waste counted is
/// of those 4 µs, never of the wait.
#[test]
fn time_blocked_in_the_writes_is_not_cpu() {
    let rec = edit(socket_writes(800, 800 * 100), |r| {
        set_syscall(main(r), "writev", 800, 800 * 1_000_000);
        add_syscall_stack(r, "do_writev", 50);
    });
    assert_fires(
        &rec,
        "small-writes",
        Expected {
            title: "8 socket writes per request of 100 B each",
            evidence: &["8000.0 µs per request inside write-like syscalls: 4.0 µs on CPU (50 of 250 samples), 7996.0 µs blocked off CPU (not in the share)"],
            // 7 of 8 writes are waste: 7/8 of 4 µs, of 20 µs of CPU.
            share: 3.5 / 20.0,
            confidence: Confidence::High,
        },
    );
}
