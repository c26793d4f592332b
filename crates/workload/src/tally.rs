//! Client-side tallies of one phase, turned into the record's `ClientStats`.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use reqcost_record::{printable, ClientStats, HistogramBucket, LatencySummary};

/// Why a request failed; each kind is counted apart in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Refused,
    Reset,
    Timeout,
    ConnectTimeout,
    Tls,
    Protocol,
    TooLarge,
    Other,
    /// A complete HTTP response with a 5xx status: the server failed the request.
    Http5xx,
    /// A gopher response whose first item is an error (type 3): the server did not find or
    /// could not serve the selector.
    GopherError,
}

impl ErrorKind {
    const ALL: [ErrorKind; 10] = [
        ErrorKind::Refused,
        ErrorKind::Reset,
        ErrorKind::Timeout,
        ErrorKind::ConnectTimeout,
        ErrorKind::Tls,
        ErrorKind::Protocol,
        ErrorKind::TooLarge,
        ErrorKind::Other,
        ErrorKind::Http5xx,
        ErrorKind::GopherError,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Refused => "refused",
            ErrorKind::Reset => "reset",
            ErrorKind::Timeout => "timeout",
            ErrorKind::ConnectTimeout => "connect-timeout",
            ErrorKind::Tls => "tls",
            ErrorKind::Protocol => "protocol",
            ErrorKind::TooLarge => "too-large",
            ErrorKind::Other => "other",
            ErrorKind::Http5xx => "http-5xx",
            ErrorKind::GopherError => "gopher-error",
        }
    }

    /// Maps a socket error; `tls` tells whether rustls was in the path (its errors are InvalidData).
    pub fn from_io(e: &std::io::Error, tls: bool) -> ErrorKind {
        use std::io::ErrorKind as K;
        match e.kind() {
            K::ConnectionRefused => ErrorKind::Refused,
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => ErrorKind::Reset,
            K::TimedOut => ErrorKind::Timeout,
            K::InvalidData if tls => ErrorKind::Tls,
            K::UnexpectedEof => ErrorKind::Protocol,
            _ => ErrorKind::Other,
        }
    }
}

/// Latencies are recorded in nanoseconds (loopback requests take tens of µs) up to one hour.
const MAX_LATENCY_NS: u64 = 3_600_000_000_000;
/// Ratio between histogram bucket bounds in the record: at most ~100 buckets from 1 µs to 1 h.
const BUCKET_RATIO: f64 = 1.25;

pub struct Tally {
    pub ok: u64,
    errors: [u64; ErrorKind::ALL.len()],
    pub connections: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// TLS handshakes that resumed a session; `None` until a TLS request is done.
    pub tls_resumed: Option<u64>,
    statuses: BTreeMap<u16, u64>,
    /// Completed QUIC requests by path asked.
    quic_paths: BTreeMap<Vec<u8>, u64>,
    hist: Histogram<u64>,
}

impl Tally {
    pub fn new() -> Tally {
        Tally {
            ok: 0,
            errors: [0; ErrorKind::ALL.len()],
            connections: 0,
            bytes_sent: 0,
            bytes_received: 0,
            tls_resumed: None,
            statuses: BTreeMap::new(),
            quic_paths: BTreeMap::new(),
            hist: Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3)
                .expect("constant histogram bounds are valid"),
        }
    }

    pub fn done(&self) -> u64 {
        self.ok + self.errors.iter().sum::<u64>()
    }

    pub fn ok(&mut self, latency: Duration) {
        self.ok += 1;
        self.hist
            .saturating_record(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
    }

    pub fn error(&mut self, kind: ErrorKind) {
        self.errors[kind as usize] += 1;
    }

    pub fn status(&mut self, code: u16) {
        *self.statuses.entry(code).or_default() += 1;
    }

    /// A QUIC request of `path` completed.
    pub fn quic_path(&mut self, path: &[u8]) {
        match self.quic_paths.get_mut(path) {
            Some(n) => *n += 1,
            None => {
                self.quic_paths.insert(path.to_vec(), 1);
            }
        }
    }

    /// Adds another load thread's tally of the same phase to this one.
    pub fn merge(&mut self, other: Tally) {
        self.ok += other.ok;
        for (mine, theirs) in self.errors.iter_mut().zip(other.errors) {
            *mine += theirs;
        }
        self.connections += other.connections;
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        if let Some(n) = other.tls_resumed {
            *self.tls_resumed.get_or_insert(0) += n;
        }
        for (code, n) in other.statuses {
            *self.statuses.entry(code).or_default() += n;
        }
        for (path, n) in other.quic_paths {
            *self.quic_paths.entry(path).or_default() += n;
        }
        self.hist
            .add(&other.hist)
            .expect("tallies' histograms share their bounds");
    }

    pub fn into_stats(self, elapsed: Duration, skipped: BTreeMap<String, u64>) -> ClientStats {
        let elapsed_s = elapsed.as_secs_f64();
        let us = |ns: u64| ns as f64 / 1000.0;
        let h = &self.hist;
        let latency = if h.is_empty() {
            LatencySummary::default()
        } else {
            LatencySummary {
                min_us: us(h.min()),
                mean_us: h.mean() / 1000.0,
                p50_us: us(h.value_at_quantile(0.5)),
                p90_us: us(h.value_at_quantile(0.9)),
                p99_us: us(h.value_at_quantile(0.99)),
                p999_us: us(h.value_at_quantile(0.999)),
                max_us: us(h.max()),
            }
        };
        let latency_histogram = if h.is_empty() {
            Vec::new()
        } else {
            h.iter_log(1000, BUCKET_RATIO)
                .filter(|v| v.count_since_last_iteration() > 0)
                .map(|v| HistogramBucket {
                    le_us: v.value_iterated_to().div_ceil(1000),
                    count: v.count_since_last_iteration(),
                })
                .collect()
        };
        let errors = ErrorKind::ALL
            .iter()
            .zip(self.errors)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| (k.name().to_string(), n))
            .collect();
        ClientStats {
            requests: self.done(),
            ok: self.ok,
            errors,
            skipped,
            connections: self.connections,
            bytes_sent: self.bytes_sent,
            bytes_received: self.bytes_received,
            elapsed_s,
            throughput_rps: if elapsed_s > 0.0 {
                self.ok as f64 / elapsed_s
            } else {
                0.0
            },
            latency,
            latency_histogram,
            statuses: self
                .statuses
                .iter()
                .map(|(code, n)| (code.to_string(), *n))
                .collect(),
            tls_resumed: self.tls_resumed,
            load_threads: None,
            load_cpu: None,
            quic_classes: self
                .quic_paths
                .iter()
                .map(|(path, n)| (format!("GET {}", printable(path)), *n))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarizes_latencies_and_errors() {
        let mut t = Tally::new();
        for i in 1..=1000u64 {
            t.ok(Duration::from_micros(i));
        }
        t.error(ErrorKind::Refused);
        t.error(ErrorKind::TooLarge);
        t.error(ErrorKind::TooLarge);
        t.status(200);
        t.status(200);
        t.status(404);
        let s = t.into_stats(Duration::from_secs(2), BTreeMap::new());
        assert_eq!((s.requests, s.ok), (1003, 1000));
        assert_eq!(s.errors.get("too-large"), Some(&2));
        assert_eq!(s.errors.get("refused"), Some(&1));
        assert_eq!(s.errors.len(), 2);
        assert_eq!(s.throughput_rps, 500.0);
        assert!((s.latency.p50_us - 500.0).abs() < 1.0, "{:?}", s.latency);
        assert!((s.latency.p99_us - 990.0).abs() < 1.0, "{:?}", s.latency);
        assert!((s.latency.max_us - 1000.0).abs() < 1.0, "{:?}", s.latency);
        assert!((s.latency.min_us - 1.0).abs() < 0.01, "{:?}", s.latency);
        let total: u64 = s.latency_histogram.iter().map(|b| b.count).sum();
        assert_eq!(total, 1000);
        assert!(s.latency_histogram.len() <= 100);
        assert!(s
            .latency_histogram
            .windows(2)
            .all(|w| w[0].le_us < w[1].le_us));
        assert_eq!(s.statuses.get("200"), Some(&2));
        assert_eq!(s.statuses.get("404"), Some(&1));
    }

    #[test]
    fn merged_tallies_add_up() {
        let mut a = Tally::new();
        let mut b = Tally::new();
        for i in 1..=10u64 {
            a.ok(Duration::from_micros(i));
            b.ok(Duration::from_micros(100 * i));
        }
        a.error(ErrorKind::Reset);
        b.error(ErrorKind::Reset);
        b.status(200);
        b.tls_resumed = Some(3);
        (a.connections, b.connections) = (1, 2);
        a.merge(b);
        let s = a.into_stats(Duration::from_secs(1), BTreeMap::new());
        assert_eq!((s.requests, s.ok, s.connections), (22, 20, 3));
        assert_eq!(s.errors.get("reset"), Some(&2));
        assert_eq!(s.statuses.get("200"), Some(&1));
        assert_eq!(s.tls_resumed, Some(3));
        let total: u64 = s.latency_histogram.iter().map(|b| b.count).sum();
        assert_eq!(total, 20);
        assert!((s.latency.max_us - 1000.0).abs() < 1.0, "{:?}", s.latency);
        assert!((s.latency.min_us - 1.0).abs() < 0.01, "{:?}", s.latency);
    }

    #[test]
    fn empty_tally_has_no_figures() {
        let s = Tally::new().into_stats(Duration::ZERO, BTreeMap::new());
        assert_eq!(s.requests, 0);
        assert_eq!(s.throughput_rps, 0.0);
        assert!(s.latency_histogram.is_empty());
    }
}
