//! `attach --metrics ADDR`: the live figures at http://ADDR/metrics for Prometheus to scrape.
//! A tiny HTTP/1.1 responder on its own thread, one connection at a time (a scraper asks once
//! every few seconds), reading the snapshot the attach loop keeps up to date.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use reqcost_probes::{Probes, RequestCounters};
use reqcost_record::RequestEvent;
use reqcost_report::live_metrics::{LiveMetrics, OPENMETRICS_CONTENT_TYPE};

use crate::Failure;

/// How long a client has to send its request: a stuck one must not block the next scrape.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Request head lines read at most; a scraper sends a handful.
const MAX_HEAD_LINES: usize = 100;

/// The live figures, shared between the attach loop that counts and the responder.
pub type SharedMetrics = Arc<Mutex<LiveMetrics>>;

/// Listens on `addr` and serves `metrics` from a background thread for the rest of the
/// process; returns the address bound (its port when `addr` asked for any).
pub fn serve(addr: SocketAddr, metrics: SharedMetrics) -> Result<SocketAddr, Failure> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| Failure::run(format!("--metrics {addr}: cannot listen: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::run(e.to_string()))?;
    thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                // A client that hangs up or misbehaves only loses its own answer.
                let _ = respond(stream, &metrics);
            }
        })
        .map_err(|e| Failure::run(format!("--metrics: cannot start its thread: {e}")))?;
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
        self.lock().add(class, ev);
    }

    pub fn tick(&self, probes: &Probes) {
        let since = probes.request_counters().since(&self.start);
        let mut metrics = self.lock();
        metrics.unattributed_cpu_ns = since.unattributed_ns;
        metrics.events_dropped = since.dropped;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LiveMetrics> {
        lock(&self.shared)
    }
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
    use std::io::Read;

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    }

    #[test]
    fn serves_the_snapshot_at_metrics_and_nothing_elsewhere() {
        let metrics = Arc::new(Mutex::new(LiveMetrics::new("srv", 8)));
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
