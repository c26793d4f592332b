//! `attach --metrics` (issue 14): Debian's Prometheus scrapes reqcost while it watches a testbed
//! server's live traffic, and its query API returns reqcost's per-class series.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::attach::{attach, testbed_running};
use crate::util::*;
use reqcost_testkit::{binary, free_port, TempDir};

/// A process killed and reaped when the test ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Prometheus scraping `target` every second, its API on `port`, its storage in `dir`.
fn prometheus(dir: &TempDir, port: u16, target: &str) -> Reaped {
    let config = dir.write(
        "prometheus.yml",
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  \
             - job_name: reqcost\n    static_configs:\n      - targets: ['{target}']\n"
        )
        .as_bytes(),
    );
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new(binary("prometheus"))
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("prometheus runs");
    Reaped(child)
}

/// `GET path` on loopback `port`: the body, or None while nothing answers.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
}

/// The series Prometheus returns for `query` now, by their `class` label, with their values.
fn series(port: u16, query: &str) -> Vec<(String, String, f64)> {
    let Some(body) = http_get(port, &format!("/api/v1/query?query={query}")) else {
        return Vec::new();
    };
    let answer: Value = serde_json::from_str(&body).unwrap_or_default();
    let mut found: Vec<(String, String, f64)> = answer["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let label = |name: &str| s["metric"][name].as_str().unwrap_or_default().to_string();
            let value = s["value"][1].as_str().and_then(|v| v.parse().ok());
            (label("class"), label("service"), value.unwrap_or(f64::NAN))
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// One gopher request for `selector`, read to the end.
fn fetch(port: u16, selector: &str) -> usize {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "{selector}\r\n").unwrap();
    let mut response = Vec::new();
    s.read_to_end(&mut response).unwrap();
    response.len()
}

/// A test client's requests of two classes while `attach --metrics` watches; Prometheus,
/// scraping every second, ends up with one `reqcost_requests_total` series per class at the
/// client's counts, and the per-request CPU histogram counts the same requests.
#[test]
fn prometheus_scrapes_the_live_per_class_series() {
    let _shared = machine_shared();
    let server = testbed_running("clean");
    let scratch = TempDir::new("metrics");
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    let (child, _stderr, _) = attach(&[
        "--port",
        &server.port.to_string(),
        "--metrics",
        &metrics_addr,
        "--no-sample",
    ]);
    let _attached = Reaped(child);
    let api_port = free_port();
    let _prometheus = prometheus(&scratch, api_port, &metrics_addr);
    const MENUS: usize = 12;
    const FILES: usize = 30;
    for _ in 0..MENUS {
        assert!(fetch(server.port, "") > 0);
    }
    for _ in 0..FILES {
        assert!(fetch(server.port, "1k.txt") >= 1024);
    }

    let expected = vec![
        ("(empty)".to_string(), "clean".to_string(), MENUS as f64),
        ("1k.txt".to_string(), "clean".to_string(), FILES as f64),
    ];
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut requests = series(api_port, "reqcost_requests_total");
    while requests != expected && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(250));
        requests = series(api_port, "reqcost_requests_total");
    }
    let targets = http_get(api_port, "/api/v1/targets").unwrap_or_default();
    assert_eq!(requests, expected, "Prometheus's targets: {targets}");
    assert_eq!(
        series(api_port, "reqcost_request_cpu_seconds_count"),
        expected,
        "the histogram counts the requests"
    );
}
