//! small-writes: ≥ 8 socket writes per request, < 1024 B each on average.

use reqcost_analysis::findings::Confidence;

use crate::util::{assert_share, confidences, edit, fired, main, set_cpu, socket_writes};

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
