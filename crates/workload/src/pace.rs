//! Reads kept to a rate: a slow client's connection never drains faster than its bandwidth.

use std::time::{Duration, Instant};

/// The pace of one response's reads at `rate` bytes per second, read `piece` bytes at a time.
pub(crate) struct Pace {
    rate: f64,
    /// How long one piece takes at the rate: the most a reader may run late and still catch up.
    piece: Duration,
    start: Instant,
    bytes: u64,
}

impl Pace {
    pub fn new(rate: u64, piece: usize, now: Instant) -> Pace {
        let rate = rate.max(1) as f64;
        Pace {
            rate,
            piece: Duration::from_secs_f64(piece as f64 / rate),
            start: now,
            bytes: 0,
        }
    }

    /// `n` more bytes read at `now`: when the next read may come, if later than `now`. A reader
    /// that ran late by more than a piece (its thread not scheduled on a loaded machine) paces
    /// again from `now`, these `n` bytes its first: caught up at once, it read a 6000-byte
    /// response in two reads back to back, as fast as the server sent it (16 MiB/s where
    /// 64 KiB/s was asked), and the server's wait on a slow reader, what a slow client is
    /// there to show, was gone.
    pub fn read(&mut self, n: usize, now: Instant) -> Option<Instant> {
        self.bytes += n as u64;
        let due = self.start + Duration::from_secs_f64(self.bytes as f64 / self.rate);
        if due > now {
            return Some(due);
        }
        if now - due <= self.piece {
            return None;
        }
        self.start = now;
        self.bytes = n as u64;
        Some(now + Duration::from_secs_f64(self.bytes as f64 / self.rate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn reads_keep_to_the_rate() {
        let t0 = Instant::now();
        let mut pace = Pace::new(64 * 1024, 3276, t0);
        // 3276 bytes at 64 KiB/s: 50 ms each.
        let due = pace.read(3276, t0).unwrap();
        assert_eq!((due - t0).as_millis(), 49);
        let due = pace.read(3276, t0 + 69 * MS).unwrap();
        assert_eq!((due - t0).as_millis(), 99);
        // Late by less than a piece: no wait, and the schedule stays.
        assert_eq!(pace.read(3276, t0 + 170 * MS), None);
        let due = pace.read(3276, t0 + 170 * MS).unwrap();
        assert_eq!((due - t0).as_millis(), 199);
    }

    /// A reader stalled for a second reads one piece, then waits as the rate says: not the
    /// whole second's worth at once.
    #[test]
    fn a_stalled_reader_does_not_catch_up() {
        let t0 = Instant::now();
        let mut pace = Pace::new(64 * 1024, 3276, t0);
        let late = t0 + 1000 * MS;
        let due = pace.read(3276, late).expect("the next read waits");
        assert_eq!((due - late).as_millis(), 49);
        let due = pace.read(3276, due).expect("and the next");
        assert_eq!((due - late).as_millis(), 99);
    }
}
