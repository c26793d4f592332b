//! nagle: ≥ 20 % of requests at the delayed-ACK timeouts (35–60 ms, 190–260 ms) and ≥ 2 socket
//! writes per request of < 1448 B.

use reqcost_record::{HistogramBucket, RunRecord};

use crate::util::{assert_silent, edit, fired, main, socket_writes};

/// `rec` with `stalled` of its 100 main-phase requests in the latency bucket up to `le_us`, the
/// rest under 256 µs.
pub(super) fn stalls(rec: RunRecord, le_us: u64, stalled: u64) -> RunRecord {
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
pub(super) fn nagled(bytes_each: u64, stalled: u64) -> RunRecord {
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
