//! nagle: ≥ 20 % of requests at the delayed-ACK timeouts (35–60 ms, 190–260 ms) and ≥ 2 socket
//! writes per request of < 1448 B.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{HistogramBucket, RunRecord};

use crate::util::{
    assert_fires, assert_silent, assert_silent_on, clean, edit, fired, main, socket_writes,
    Expected,
};

/// `rec` with `stalled` of its 100 main-phase requests in the latency bucket up to `le_us`, the
/// rest under 256 µs.
fn stalls(rec: RunRecord, le_us: u64, stalled: u64) -> RunRecord {
    edit(rec, |r| {
        main(r).client.latency_histogram = vec![
            HistogramBucket {
                le_us: 255,
                count: 100 - stalled,
            },
            HistogramBucket {
                le_us,
                count: stalled,
            },
        ];
    })
}

/// Two socket writes per request of `bytes_each`, `stalled` requests of 100 at about 40 ms.
fn nagled(bytes_each: u64, stalled: u64) -> RunRecord {
    stalls(socket_writes(200, 200 * bytes_each), 40_959, stalled)
}

#[test]
fn fires_on_writes_one_byte_under_the_mss() {
    fired(&nagled(1447, 50), "nagle");
}

#[test]
fn only_the_delayed_ack_timeouts_count() {
    for le_us in [35_000, 60_000, 190_000, 260_000] {
        fired(&stalls(socket_writes(200, 200 * 700), le_us, 20), "nagle");
    }
    for le_us in [34_999, 60_001, 189_999, 260_001] {
        assert_silent(&stalls(socket_writes(200, 200 * 700), le_us, 20), "nagle");
    }
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &nagled(700, 20),
        "nagle",
        Expected {
            title: "20 % of requests stall ~40 ms",
            evidence: &[
                "20 of 100 requests took 35–60 ms or 190–260 ms (p50 0.2 ms)",
                "2.0 socket writes of 700 B per request",
            ],
            // It costs latency, not CPU.
            share: 0.0,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "nagle",
        &[
            ("19 % stalled", nagled(700, 19)),
            (
                "1.99 writes per request",
                stalls(socket_writes(199, 199 * 100), 40_959, 50),
            ),
            ("writes of one MSS", nagled(1448, 50)),
            // The fixture writes each 1100 B response with one writev.
            ("stalls with one large write", stalls(clean(), 40_959, 80)),
            ("small writes without stalls", socket_writes(200, 200 * 700)),
        ],
    );
}
