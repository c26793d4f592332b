//! small-writes: ≥ 8 socket writes per request, < 1024 B each on average.

use reqcost_analysis::findings::Confidence;

use crate::util::{
    assert_evidence, assert_share, assert_silent, edit, fired, main, set_cpu, socket_writes,
};

#[test]
fn fires_at_eight_writes_of_1023_bytes() {
    let f = fired(&socket_writes(800, 800 * 1023), "small-writes");
    assert_evidence(
        &f,
        &[
            "8.0 write-like calls on sockets per request",
            "1023 B per call on average, 8184 B per request",
            "8.0 µs per request inside write-like syscalls",
        ],
    );
    // One write per 64 KiB would do: 7 of the 8 µs are waste, of 20 µs of CPU per request.
    assert_share(&f, 7.0 / 20.0);
    assert_eq!(f.phase, "main");
    assert_eq!(f.confidence, Confidence::Medium);
}

#[test]
fn silent_below_eight_writes() {
    assert_silent(&socket_writes(799, 799 * 100), "small-writes");
}

#[test]
fn silent_at_1024_bytes_per_write() {
    assert_silent(&socket_writes(2000, 2000 * 1024), "small-writes");
}

#[test]
fn silent_on_a_few_tiny_writes() {
    assert_silent(&socket_writes(200, 200 * 10), "small-writes");
}

#[test]
fn writes_under_256_bytes_are_a_third_signal() {
    let f = fired(&socket_writes(800, 800 * 255), "small-writes");
    assert_eq!(f.confidence, Confidence::High);
    let f = fired(&socket_writes(800, 800 * 256), "small-writes");
    assert_eq!(f.confidence, Confidence::Medium);
}

#[test]
fn writes_a_large_response_needs_are_not_waste() {
    // 100 writes of 1000 B: 100 000 B need two 64 KiB writes, so 98 of 100 µs are waste, of
    // 200 µs of CPU per request.
    let rec = edit(socket_writes(10_000, 10_000 * 1000), |r| {
        set_cpu(main(r), 20_000_000, 10_000_000)
    });
    let f = fired(&rec, "small-writes");
    assert_share(&f, 98.0 / 200.0);
}
