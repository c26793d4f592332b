//! Client-speed buckets: the rate each request's bytes left the server at, as the speed rows
//! group requests.

use reqcost_record::RequestEvent;

/// A client-speed bucket: bytes out per second of the request's wall time below `below`.
pub struct SpeedBucket {
    pub label: &'static str,
    pub below: u64,
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// Client-speed buckets, slowest first; requests without a wall time go to [`SPEED_UNKNOWN`].
pub const SPEED_BUCKETS: [SpeedBucket; 6] = [
    SpeedBucket {
        label: "< 16 KiB/s",
        below: 16 * KIB,
    },
    SpeedBucket {
        label: "16-64 KiB/s",
        below: 64 * KIB,
    },
    SpeedBucket {
        label: "64-256 KiB/s",
        below: 256 * KIB,
    },
    SpeedBucket {
        label: "256 KiB/s-1 MiB/s",
        below: MIB,
    },
    SpeedBucket {
        label: "1-16 MiB/s",
        below: 16 * MIB,
    },
    SpeedBucket {
        label: "≥ 16 MiB/s",
        below: u64::MAX,
    },
];
pub const SPEED_UNKNOWN: &str = "unknown";

/// The label of the client-speed bucket a request falls in, as the speed rows name it.
pub fn speed_label(ev: &RequestEvent) -> &'static str {
    SPEED_BUCKETS
        .get(speed_bucket(ev))
        .map_or(SPEED_UNKNOWN, |b| b.label)
}

/// Index into [`SPEED_BUCKETS`], or `SPEED_BUCKETS.len()` for unknown.
pub(super) fn speed_bucket(ev: &RequestEvent) -> usize {
    let Some(serve_ns) = ev.serve_ns() else {
        return SPEED_BUCKETS.len();
    };
    // Everything left within the same nanosecond: as fast as it gets.
    let taken = ev.bytes_out.saturating_sub(ev.unacked_out);
    let per_s = (u128::from(taken) * 1_000_000_000)
        .checked_div(u128::from(serve_ns))
        .map_or(u64::MAX, |v| u64::try_from(v).unwrap_or(u64::MAX));
    SPEED_BUCKETS
        .iter()
        .position(|b| per_s < b.below)
        .unwrap_or(SPEED_BUCKETS.len() - 1)
}
