//! `attach --metrics ADDR`: the live figures at http://ADDR/metrics for Prometheus to scrape.
//! A tiny HTTP/1.1 responder on its own thread, one connection at a time (a scraper asks once
//! every few seconds), reading the snapshot the attach loop keeps up to date by counting each
//! request event into it (the exposition is reqcost-report's).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use reqcost_analysis::requests::{counts_as_request, KEY_CAP, OTHER};
use reqcost_probes::{Probes, RequestCounters};
use reqcost_record::RequestEvent;
use reqcost_report::live_metrics::{
    BudgetGauges, ClassCounters, LiveMetrics, CPU_BUCKETS_NS, OPENMETRICS_CONTENT_TYPE,
};

use crate::MeasureError;

/// How long a client has to send its request: a stuck one must not block the next scrape.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Request head lines read at most; a scraper sends a handful.
const MAX_HEAD_LINES: usize = 100;

/// The live figures, shared between the attach loop that counts and the responder.
pub type SharedMetrics = Arc<Mutex<LiveMetrics>>;

/// Listens on `addr` and serves `metrics` from a background thread for the rest of the
/// process; returns the address bound (its port when `addr` asked for any).
pub fn serve(addr: SocketAddr, metrics: SharedMetrics) -> Result<SocketAddr, MeasureError> {
    let listener =
        TcpListener::bind(addr).map_err(|source| MeasureError::MetricsListen { addr, source })?;
    let bound = listener.local_addr().map_err(MeasureError::MetricsAddr)?;
    thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                // A client that hangs up or misbehaves only loses its own answer.
                let _ = respond(stream, &metrics);
            }
        })
        .map_err(MeasureError::MetricsThread)?;
    Ok(bound)
}

/// The attach loop's side: counts each request event into the shared figures, and the
/// probes' counters (since the feed started) at each tick.
pub struct MetricsFeed {
    shared: SharedMetrics,
    start: RequestCounters,
}

impl MetricsFeed {
    pub fn new(shared: SharedMetrics, start: RequestCounters) -> MetricsFeed {
        MetricsFeed { shared, start }
    }

    pub fn add(&self, class: &str, ev: &RequestEvent) {
        add(&mut self.lock(), KEY_CAP, class, ev);
    }

    pub fn tick(&self, probes: &Probes) {
        let since = probes.request_counters().since(&self.start);
        let mut metrics = self.lock();
        metrics.unattributed_cpu_ns = since.unattributed_ns;
        metrics.events_dropped = since.dropped;
    }

    pub fn budget(&self, gauges: BudgetGauges) {
        self.lock().budget = Some(gauges);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LiveMetrics> {
        lock(&self.shared)
    }
}

/// Counts one request event under `class`, in bounded memory: at most `key_cap` classes, later
/// ones counted as `(other)`, as the tally does.
fn add(metrics: &mut LiveMetrics, key_cap: usize, class: &str, ev: &RequestEvent) {
    let classes = &mut metrics.classes;
    let key = if classes.len() < key_cap || classes.contains_key(class) {
        class
    } else {
        OTHER
    };
    if let Some(counters) = classes.get_mut(key) {
        count(counters, class, ev);
        return;
    }
    count(classes.entry(key.to_string()).or_default(), class, ev);
}

fn count(c: &mut ClassCounters, class: &str, ev: &RequestEvent) {
    c.cpu_ns += ev.cpu_ns;
    if !counts_as_request(ev, class) {
        return;
    }
    // An event of n requests (pipelined commands) is n requests of an equal share, as the
    // phase's tally counts it.
    let n = ev.requests().max(1);
    c.requests += n;
    c.request_cpu_ns += ev.cpu_ns;
    c.syscalls += u64::from(ev.syscalls);
    c.bytes_in += ev.bytes_in;
    c.bytes_out += ev.bytes_out;
    let bucket = CPU_BUCKETS_NS
        .iter()
        .position(|&le| ev.cpu_ns / n <= le)
        .unwrap_or(CPU_BUCKETS_NS.len());
    c.cpu_buckets[bucket] += n;
}

/// The figures, even after a panic elsewhere: counters stay consistent event by event.
fn lock(metrics: &Mutex<LiveMetrics>) -> std::sync::MutexGuard<'_, LiveMetrics> {
    metrics.lock().unwrap_or_else(|e| e.into_inner())
}

/// Answers one request: the exposition for `GET /metrics`, an error status for anything else.
fn respond(stream: TcpStream, metrics: &Mutex<LiveMetrics>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut reader = BufReader::new(&stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    skip_headers(&mut reader)?;
    let mut parts = request_line.split_whitespace();
    let (status, content_type, body) = match (parts.next(), parts.next()) {
        (Some("GET"), Some(target)) if target.split('?').next() == Some("/metrics") => {
            let text = lock(metrics).render();
            ("200 OK", OPENMETRICS_CONTENT_TYPE, text)
        }
        (Some("GET"), Some(_)) => ("404 Not Found", "text/plain", "see /metrics\n".into()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "GET /metrics\n".into(),
        ),
    };
    let mut out = &stream;
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}

/// Reads the request's header lines up to the blank line that ends them.
fn skip_headers(reader: &mut impl BufRead) -> std::io::Result<()> {
    for _ in 0..MAX_HEAD_LINES {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_analysis::requests::CONNECTION_SETUP;
    use std::io::Read;

    fn event(head: &str, cpu_us: u64) -> RequestEvent {
        RequestEvent {
            cpu_ns: cpu_us * 1000,
            syscalls: 10,
            bytes_out: 2000,
            ..reqcost_testkit::request_event(head, "127.0.0.1")
        }
    }

    /// An event without a byte in counts its CPU in its class, and no request.
    #[test]
    fn events_are_counted_per_class() {
        let mut m = LiveMetrics::new("nginx");
        add(&mut m, 1024, "GET /", &event("GET / HTTP/1.1\r\n", 20));
        add(&mut m, 1024, "GET /", &event("GET / HTTP/1.1\r\n", 30));
        add(&mut m, 1024, "(no request)", &event("", 5));
        let get = &m.classes["GET /"];
        assert_eq!(
            (get.requests, get.cpu_ns, get.request_cpu_ns),
            (2, 50_000, 50_000)
        );
        assert_eq!((get.syscalls, get.bytes_in, get.bytes_out), (20, 32, 4000));
        let none = &m.classes["(no request)"];
        assert_eq!((none.requests, none.cpu_ns, none.syscalls), (0, 5000, 0));
    }

    #[test]
    fn each_request_falls_in_the_first_bucket_that_holds_its_cpu() {
        let mut m = LiveMetrics::new("gopher");
        for cpu_us in [5, 10, 20, 400, 5_000_000] {
            add(&mut m, 1024, "/", &event("/\r\n", cpu_us));
        }
        let c = &m.classes["/"];
        let mut buckets = [0; CPU_BUCKETS_NS.len() + 1];
        (buckets[0], buckets[1], buckets[5], buckets[16]) = (2, 1, 1, 1);
        assert_eq!(c.cpu_buckets, buckets);
        assert_eq!(c.request_cpu_ns, 5_000_435_000);
    }

    /// A read of 16 pipelined commands the probes counted: 16 requests of an equal share, each
    /// in the bucket of its share; a protocol's connection set-up is no request.
    #[test]
    fn counted_commands_are_requests_each_and_set_up_none() {
        let mut m = LiveMetrics::new("redis");
        let pipeline = RequestEvent {
            commands: Some(16),
            ..event("*1\r\n$4\r\nPING\r\n", 320)
        };
        add(&mut m, 1024, "PING", &pipeline);
        add(&mut m, 1024, CONNECTION_SETUP, &event("X\0\0\0\x04", 30));
        let ping = &m.classes["PING"];
        let mut buckets = [0; CPU_BUCKETS_NS.len() + 1];
        buckets[1] = 16;
        assert_eq!((ping.requests, ping.cpu_buckets), (16, buckets));
        assert_eq!(m.classes[CONNECTION_SETUP].requests, 0);
    }

    #[test]
    fn classes_beyond_the_cap_count_as_other() {
        let mut m = LiveMetrics::new("srv");
        for head in ["/a", "/b", "/c", "/a", "/e"] {
            add(&mut m, 2, head, &event(head, 10));
        }
        let requests: Vec<(&str, u64)> = m
            .classes
            .iter()
            .map(|(class, c)| (class.as_str(), c.requests))
            .collect();
        assert_eq!(requests, [(OTHER, 2), ("/a", 2), ("/b", 1)]);
    }

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    }

    #[test]
    fn serves_the_snapshot_at_metrics_and_nothing_elsewhere() {
        let metrics = Arc::new(Mutex::new(LiveMetrics::new("srv")));
        let Ok(addr) = serve("127.0.0.1:0".parse().unwrap(), metrics.clone()) else {
            panic!("cannot listen on loopback");
        };
        metrics.lock().unwrap().events_dropped = 7;
        let answer = get(
            addr,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text\r\n\r\n",
        );
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains(&format!("Content-Length: {}\r\n", body.len())));
        assert!(head.contains(OPENMETRICS_CONTENT_TYPE));
        assert!(body.contains("reqcost_dropped_events_total{service=\"srv\"} 7\n"));
        assert!(body.ends_with("# EOF\n"));
        assert!(get(addr, "GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(addr, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    }
}
