//! The workload stage: what requests to send, how, and what the client saw.
//!
//! A [`Plan`] is validated from [`WorkloadOptions`] before any server starts (URL, requests file,
//! classes, limits), then run phase by phase on the calling thread: a warm-up phase that is
//! not measured, `main`, then one `class:NAME` phase per `--class` replaying only the requests of
//! that class (so that per-class server CPU is exact), and optionally `slow-clients`.
//!
//! - Protocols, picked by the `--url` scheme: `gopher` (RFC 4266 paths: `/TYPE/SELECTOR`; one
//!   connection per request, selector + CRLF, response read to close), `gemini` (TLS with rustls;
//!   any certificate accepted, as with trust on first use; SNI from the host; the status line is
//!   parsed and counted), `http`/`https` (HTTP/1.1 GET or HEAD, keep-alive by default,
//!   Content-Length, chunked and close-delimited bodies), `tcp` (the path without its leading `/`,
//!   or each line of the file, + CRLF; response read to close), `quic` (quinn; one QUIC
//!   connection per slot reused for every request, a stream per request; `hq-interop` or HTTP/3,
//!   whichever ALPN the server picks; see `quic.rs`).
//! - Requests: the `--url` alone, or `--requests FILE`: a list of selectors, paths or URLs, or an
//!   access log in Common/Combined Log Format (detected from the first non-blank line; GET and
//!   HEAD replayed in order with their method, other methods skipped and counted). The file is
//!   read as a stream, cycled until the phase has sent its requests; `plan()` reads it once to
//!   check every line (malformed lines fail with FILE:LINE unless `--skip-bad`).
//! - `--class NAME=REGEX` matches the request as sent (selector, origin-form path, Gemini URL).
//!   Each class phase sends `-n` requests (or runs `--duration`) of that class alone.
//! - Load: closed loop (`-c` slots, `-n` requests or `--duration`), or open loop (`--rate`):
//!   requests are scheduled at fixed intervals and latency counts from the scheduled time.
//! - Threads: `--threads N` load threads (default: the CPUs the calling thread may run on),
//!   each with its own runtime and share of the connections; thread `t` sends requests
//!   `t, t + N, ...` of the phase (see `engine.rs`), so counts equal a one-thread run's.
//! - Slow clients: `--client-bandwidth` paces reads per connection (small reads, sleeps so that
//!   bytes read never run ahead of the rate) through a small SO_RCVBUF (`--client-rcvbuf`).
//! - Limits: `--connect-timeout`, `--request-timeout`, `--max-response`; errors are counted as
//!   refused, reset, timeout, connect-timeout, tls, protocol, too-large or other. A response
//!   saying the server failed is not a success either: HTTP 5xx (`http-5xx`, also counted by
//!   status) and a gopher response starting with an error item, type 3 (`gopher-error`). HTTP
//!   4xx and Gemini non-2x statuses are complete exchanges: counted as ok, and by status.

pub mod background;
mod client;
mod endpoint;
mod engine;
#[doc(hidden)]
pub mod fuzzing;
mod logformat;
mod quic;
mod replay;
mod source;
mod tally;
mod tls;
pub mod units;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use regex::bytes::Regex;
use reqcost_record::{ClientStats, Workload};
use rustls::pki_types::ServerName;

pub use source::{Format, LogSummary, Method, Sample};

use endpoint::{Endpoint, Protocol};
use source::{LogFormat, Normalizer, Reading, Request, Scan, Source};
use units::{format_bandwidth, format_size};

/// What to send, how hard and how fast to read: everything a [`Plan`] is made from. The
/// defaults are those of the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadOptions {
    /// `SCHEME://HOST:PORT/PATH` with scheme gopher, gemini, http, https, tcp or quic.
    pub url: String,
    /// Requests to replay instead of the URL alone: a list or an access log.
    pub requests: Option<PathBuf>,
    /// Measured requests per phase.
    pub count: u64,
    /// Connections kept busy at once, over all load threads.
    pub concurrency: u32,
    /// Load threads; `None` for as many as the calling thread's CPUs. Never more than
    /// `concurrency`: each thread keeps at least one connection.
    pub threads: Option<u32>,
    /// Run each measured phase this long instead of `count` requests.
    pub duration: Option<Duration>,
    /// Open loop at this many requests per second.
    pub rate: Option<f64>,
    /// Unmeasured requests first; `None` for min(count/10, 100).
    pub warmup: Option<u64>,
    /// `NAME=REGEX` specs, each replayed as its own measured phase.
    pub classes: Vec<String>,
    /// Skip and count malformed lines of the requests file instead of failing.
    pub skip_bad: bool,
    /// How the access log is written: an nginx `log_format` or Apache `LogFormat` string, or
    /// `combined`, `common`, `json`; detected when None.
    pub log_format: Option<String>,
    /// Which of the log's requests to replay.
    pub sample: Option<Sample>,
    /// Read each request at the speed its log line shows, each logged client from its own
    /// loopback address.
    pub replay_speeds: bool,
    /// Show logged client addresses hashed.
    pub anonymize: bool,
    /// Send each request at its logged time, the log's time compressed by this factor (open
    /// loop, the log once).
    pub replay_timing: Option<f64>,
    /// Bytes per second each connection reads at most; unlimited when None.
    pub client_bandwidth: Option<u64>,
    /// SO_RCVBUF of each connection; [`SLOW_CLIENT_RCVBUF`] with a bandwidth, else the kernel's.
    pub client_rcvbuf: Option<u32>,
    /// Client groups sharing each phase: (percent of requests, bandwidth; None for
    /// unlimited). Empty for one group of `client_bandwidth`.
    pub client_mix: Vec<(f64, Option<u64>)>,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// Longest response accepted; longer ones are cut and counted as too-large.
    pub max_response: u64,
    /// Method of requests from the URL or a plain list (access logs carry their own).
    pub method: Method,
    /// HTTP keep-alive.
    pub keepalive: bool,
    /// TLS session resumption.
    pub tls_resume: bool,
    /// Extra HTTP request headers, `Name: value` each (`Accept-Encoding: gzip`).
    pub headers: Vec<String>,
}

impl Default for WorkloadOptions {
    fn default() -> WorkloadOptions {
        WorkloadOptions {
            url: String::new(),
            requests: None,
            count: 1000,
            concurrency: 1,
            threads: None,
            duration: None,
            rate: None,
            warmup: None,
            classes: Vec::new(),
            skip_bad: false,
            log_format: None,
            sample: None,
            replay_speeds: false,
            anonymize: false,
            replay_timing: None,
            client_bandwidth: None,
            client_rcvbuf: None,
            client_mix: Vec::new(),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            max_response: 64 << 20,
            method: Method::Get,
            keepalive: true,
            tls_resume: true,
            headers: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("{0}")]
    Invalid(String),
}

fn invalid(message: impl Into<String>) -> WorkloadError {
    WorkloadError::Invalid(message.into())
}

/// Receive buffer used with `--client-bandwidth` when `--client-rcvbuf` is not given: small, so
/// that the server's send queue fills as it does behind a real, distant client.
pub const SLOW_CLIENT_RCVBUF: u32 = 8 * 1024;

impl WorkloadOptions {
    /// Validates everything that can be checked before the server starts.
    pub fn plan(&self) -> Result<Plan, WorkloadError> {
        let endpoint = Endpoint::parse(&self.url).map_err(invalid)?;
        self.check_load()?;
        self.check_method(&endpoint)?;
        let headers = self.headers(&endpoint)?;
        let classes = parse_classes(&self.classes)?;
        let reading = self.reading()?;
        let normalizer = Normalizer::new(&endpoint, reading.log_format.as_ref());
        let scan = match &self.requests {
            Some(path) => Some(self.scan(path, &normalizer, &classes, &reading)?),
            None if !classes.is_empty() => {
                return Err(invalid(
                    "--class needs --requests FILE: classes group the requests of a file",
                ))
            }
            None => None,
        };
        if self.requests.is_none() && (self.log_format.is_some() || self.sample.is_some()) {
            return Err(invalid(
                "--log-format and --sample need --requests FILE: they say how to read an access log",
            ));
        }
        let single = self.single_request(&endpoint);
        let tls = self.tls(&endpoint)?;
        let quic = quic_target(&endpoint, &tls)?;
        let client = self.client_mix(&endpoint)?;
        let replay = self.replay(&endpoint, scan.as_ref())?;
        self.check_timing(scan.as_ref())?;
        Ok(Plan {
            url: self.url.clone(),
            endpoint,
            requests_file: self.requests.clone(),
            scan,
            normalizer,
            sample: self.sample,
            replay,
            anonymize: self.anonymize,
            timing: self.replay_timing,
            single,
            count: self.count,
            duration: self.duration,
            rate: self.rate,
            concurrency: self.concurrency,
            threads: self.threads,
            warmup: self.warmup.unwrap_or((self.count / 10).min(100)),
            classes,
            client,
            request_timeout: self.request_timeout,
            connect_timeout: self.connect_timeout,
            max_response: self.max_response,
            keepalive: self.keepalive,
            tls_resume: self.tls_resume,
            headers,
            tls,
            quic,
        })
    }

    fn check_load(&self) -> Result<(), WorkloadError> {
        if self.count == 0 {
            return Err(invalid("-n must be at least 1"));
        }
        if self.concurrency == 0 {
            return Err(invalid("-c must be at least 1"));
        }
        if self.threads == Some(0) {
            return Err(invalid("--threads must be at least 1"));
        }
        Ok(())
    }

    fn check_method(&self, endpoint: &Endpoint) -> Result<(), WorkloadError> {
        if self.method == Method::Head && !endpoint.protocol.is_http() {
            return Err(invalid(format!(
                "--method HEAD needs an http:// or https:// --url, not {}",
                endpoint.protocol.name()
            )));
        }
        Ok(())
    }

    /// The `--header` lines as they go on the wire, each ending in CRLF.
    fn headers(&self, endpoint: &Endpoint) -> Result<Vec<u8>, WorkloadError> {
        let mut wire = Vec::new();
        for h in &self.headers {
            if !endpoint.protocol.is_http() {
                return Err(invalid(format!(
                    "--header needs an http:// or https:// --url, not {}",
                    endpoint.protocol.name()
                )));
            }
            let valid = h.split_once(':').is_some_and(|(name, _)| {
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b':')
            }) && !h.contains(['\r', '\n']);
            if !valid {
                return Err(invalid(format!(
                    "--header {h:?}: give one header as 'Name: value' (e.g. 'Accept-Encoding: gzip'), without line breaks"
                )));
            }
            wire.extend_from_slice(h.as_bytes());
            wire.extend_from_slice(b"\r\n");
        }
        Ok(wire)
    }

    /// `--replay-speeds`: checked against the log, which must give bytes and request times,
    /// and the load's other client settings, which it replaces.
    fn replay(
        &self,
        endpoint: &Endpoint,
        scan: Option<&Scan>,
    ) -> Result<Option<ReplayModel>, WorkloadError> {
        if !self.replay_speeds {
            return Ok(None);
        }
        if self.client_bandwidth.is_some() || !self.client_mix.is_empty() {
            return Err(invalid(
                "--replay-speeds takes each client's speed from the log: drop --client-bandwidth and --client-mix",
            ));
        }
        let Some(scan) = scan.filter(|s| s.format != Format::List) else {
            return Err(invalid(
                "--replay-speeds needs --requests with an access log",
            ));
        };
        if scan.log.with_bytes == 0 || scan.log.with_duration == 0 {
            return Err(invalid(format!(
                "--replay-speeds needs the bytes sent and the request time of each request, and {} logs {}: \
                 log them ($body_bytes_sent and $request_time in nginx, %O and %D in Apache) and give the format with --log-format",
                self.requests.as_ref().map_or(String::new(), |p| p.display().to_string()),
                if scan.log.with_bytes == 0 { "no bytes" } else { "no request time" }
            )));
        }
        let loopback = matches!(endpoint.addr.ip(), IpAddr::V4(ip) if ip.is_loopback());
        Ok(Some(ReplayModel {
            aliases: loopback,
            rcvbuf: self.client_rcvbuf.unwrap_or(SLOW_CLIENT_RCVBUF),
        }))
    }

    /// `--replay-timing`: a positive factor, a log with times, and no other pace.
    fn check_timing(&self, scan: Option<&Scan>) -> Result<(), WorkloadError> {
        let Some(factor) = self.replay_timing else {
            return Ok(());
        };
        if !(factor.is_finite() && factor > 0.0) {
            return Err(invalid(format!(
                "--replay-timing {factor}: the factor must be a positive number (10 replays 10 times faster)"
            )));
        }
        if self.rate.is_some() {
            return Err(invalid(
                "--replay-timing sends at the logged times: drop --rate",
            ));
        }
        match scan {
            Some(s) if s.log.first.is_some() => Ok(()),
            _ => Err(invalid(
                "--replay-timing needs --requests with an access log that logs each request's time",
            )),
        }
    }

    fn reading(&self) -> Result<Reading, WorkloadError> {
        Ok(Reading {
            log_format: self
                .log_format
                .as_deref()
                .map(LogFormat::parse)
                .transpose()
                .map_err(invalid)?,
            sample: self.sample,
            skip_bad: self.skip_bad,
        })
    }

    /// Reads the requests file once to check every line and that each class matches some.
    fn scan(
        &self,
        path: &Path,
        normalizer: &Normalizer,
        classes: &[(String, Regex)],
        reading: &Reading,
    ) -> Result<Scan, WorkloadError> {
        let regexes: Vec<Regex> = classes.iter().map(|(_, r)| r.clone()).collect();
        let scan = source::scan(path, normalizer, &regexes, reading).map_err(invalid)?;
        for ((name, re), n) in classes.iter().zip(&scan.class_requests) {
            if *n == 0 {
                return Err(invalid(format!(
                    "--class {name}={} matches no request in {}",
                    re.as_str(),
                    path.display()
                )));
            }
        }
        Ok(scan)
    }

    /// The request the URL itself names, sent when there is no requests file.
    fn single_request(&self, endpoint: &Endpoint) -> Request {
        let target = match endpoint.protocol {
            Protocol::Gopher => endpoint.gopher_selector(),
            Protocol::Gemini => self.url.as_bytes().to_vec(),
            Protocol::Http | Protocol::Https | Protocol::Quic => endpoint.path.as_bytes().to_vec(),
            Protocol::Tcp => {
                let p = endpoint.path.as_bytes();
                p.strip_prefix(b"/").unwrap_or(p).to_vec()
            }
        };
        Request::with(self.method, target)
    }

    fn tls(&self, endpoint: &Endpoint) -> Result<Option<TlsSetup>, WorkloadError> {
        if !endpoint.protocol.uses_tls() {
            return Ok(None);
        }
        let config = tls::client_config(endpoint.protocol.alpn(), self.tls_resume)
            .map_err(|e| invalid(format!("cannot set up TLS: {e}")))?;
        let name = ServerName::try_from(endpoint.host.clone()).map_err(|_| {
            invalid(format!(
                "invalid --url \"{}\": host \"{}\" is not a valid TLS server name",
                self.url, endpoint.host
            ))
        })?;
        Ok(Some((config, name)))
    }

    fn client_model(&self, bandwidth: Option<u64>) -> ClientModel {
        ClientModel {
            bandwidth,
            rcvbuf: self.client_rcvbuf.or(bandwidth.map(|_| SLOW_CLIENT_RCVBUF)),
            source: None,
        }
    }

    /// One group of `--client-bandwidth`, or the `--client-mix` groups. On loopback each
    /// group connects from its own address (127.0.0.10, .11, ...), so the server side tells the
    /// groups apart by client address.
    fn client_mix(&self, endpoint: &Endpoint) -> Result<ClientMix, WorkloadError> {
        if self.client_mix.is_empty() {
            return Ok(ClientMix::single(self.client_model(self.client_bandwidth)));
        }
        if self.client_bandwidth.is_some() {
            return Err(invalid(
                "--client-mix and --client-bandwidth both set client speeds: give one",
            ));
        }
        let total: f64 = self.client_mix.iter().map(|(pct, _)| pct).sum();
        if self
            .client_mix
            .iter()
            .any(|(pct, _)| pct.is_nan() || *pct <= 0.0)
            || (total - 100.0).abs() > 0.01
        {
            return Err(invalid(format!(
                "--client-mix shares must be positive and add up to 100 %, not {total} %"
            )));
        }
        let loopback = matches!(endpoint.addr.ip(), IpAddr::V4(ip) if ip.is_loopback());
        let groups = self
            .client_mix
            .iter()
            .enumerate()
            .map(|(i, (pct, bandwidth))| {
                let mut model = self.client_model(*bandwidth);
                model.source = loopback.then(|| IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + i as u8)));
                (pct / 100.0, model)
            })
            .collect();
        Ok(ClientMix { groups })
    }
}

/// `NAME=REGEX` specs, checked: both parts present, names distinct, regexes valid.
fn parse_classes(specs: &[String]) -> Result<Vec<(String, Regex)>, WorkloadError> {
    let mut classes: Vec<(String, Regex)> = Vec::new();
    for spec in specs {
        let (name, re) = spec
            .split_once('=')
            .filter(|(n, r)| !n.is_empty() && !r.is_empty())
            .ok_or_else(|| invalid(format!("invalid --class \"{spec}\": expected NAME=REGEX")))?;
        if classes.iter().any(|(n, _)| n == name) {
            return Err(invalid(format!(
                "--class {name} is given twice: class names must differ"
            )));
        }
        let regex = Regex::new(re).map_err(|e| {
            invalid(format!(
                "invalid --class \"{spec}\": bad regular expression: {}",
                e.to_string().lines().last().unwrap_or("")
            ))
        })?;
        classes.push((name.to_string(), regex));
    }
    Ok(classes)
}

/// The QUIC client for a quic:// endpoint, on the TLS configuration made for it.
fn quic_target(
    endpoint: &Endpoint,
    tls: &Option<TlsSetup>,
) -> Result<Option<quic::QuicTarget>, WorkloadError> {
    let (Protocol::Quic, Some((config, _))) = (endpoint.protocol, tls) else {
        return Ok(None);
    };
    quic::QuicTarget::new(config.clone(), endpoint)
        .map(Some)
        .map_err(|e| invalid(format!("cannot set up QUIC: {e}")))
}

/// A TLS client configuration with the name to present (SNI) and verify.
type TlsSetup = (Arc<rustls::ClientConfig>, ServerName<'static>);

/// A validated workload, ready to run phase by phase.
pub struct Plan {
    url: String,
    endpoint: Endpoint,
    requests_file: Option<PathBuf>,
    scan: Option<Scan>,
    normalizer: Normalizer,
    sample: Option<Sample>,
    replay: Option<ReplayModel>,
    anonymize: bool,
    timing: Option<f64>,
    single: Request,
    count: u64,
    duration: Option<Duration>,
    rate: Option<f64>,
    concurrency: u32,
    threads: Option<u32>,
    warmup: u64,
    classes: Vec<(String, Regex)>,
    client: ClientMix,
    request_timeout: Duration,
    connect_timeout: Duration,
    max_response: u64,
    keepalive: bool,
    tls_resume: bool,
    headers: Vec<u8>,
    tls: Option<TlsSetup>,
    quic: Option<quic::QuicTarget>,
}

/// How requests of a log are read under `--replay-speeds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayModel {
    /// Each logged client connects from its own loopback address (the server is on loopback).
    aliases: bool,
    /// Receive buffer of the requests read at a logged speed.
    rcvbuf: u32,
}

impl ReplayModel {
    /// Bandwidth, receive buffer and local address of a request read from the log.
    fn model(&self, req: &Request) -> (Option<u64>, Option<u32>, Option<IpAddr>) {
        let speed = replay::logged_speed(&req.logged);
        let source = req.client.filter(|_| self.aliases).map(replay::alias);
        (speed, speed.map(|_| self.rcvbuf), source)
    }
}

/// How fast each connection reads, and where it connects from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientModel {
    /// Bytes per second per connection; unlimited when None.
    pub bandwidth: Option<u64>,
    /// SO_RCVBUF of each connection; the kernel default when None.
    pub rcvbuf: Option<u32>,
    /// Local address the connections bind to; the kernel's choice when None.
    pub source: Option<IpAddr>,
}

impl ClientModel {
    pub fn describe(&self) -> String {
        let mut s = match self.bandwidth {
            Some(b) => format!("{} per connection", format_bandwidth(b)),
            None => "unlimited".to_string(),
        };
        if let Some(r) = self.rcvbuf {
            s += &format!(", rcvbuf {}", format_size(u64::from(r)));
        }
        if let Some(ip) = self.source {
            s += &format!(" from {ip}");
        }
        s
    }
}

/// The client groups of a phase: each request goes to a group in proportion to its share, so
/// fast and slow clients share the phase as they share a production server.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientMix {
    /// (share of requests in 0..=1, model), shares adding up to 1.
    groups: Vec<(f64, ClientModel)>,
}

impl ClientMix {
    fn single(model: ClientModel) -> ClientMix {
        ClientMix {
            groups: vec![(1.0, model)],
        }
    }

    /// `unlimited` for one group; `80% unlimited from 127.0.0.10 + 20% ...` for a mix.
    pub fn describe(&self) -> String {
        match self.groups.as_slice() {
            [(_, model)] => model.describe(),
            groups => groups
                .iter()
                .map(|(share, model)| format!("{}% {}", share * 100.0, model.describe()))
                .collect::<Vec<_>>()
                .join(" + "),
        }
    }

    /// The receive buffer of the first group that sets one.
    fn rcvbuf(&self) -> Option<u32> {
        self.groups.iter().find_map(|(_, m)| m.rcvbuf)
    }
}

/// When a phase ends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bound {
    Requests(u64),
    Duration(Duration),
}

/// One stretch of load; warm-up phases are run but not measured.
#[derive(Debug, Clone)]
pub struct PhaseSpec {
    pub name: String,
    pub measured: bool,
    /// Client speed model shown in reports, e.g. `unlimited`.
    pub client_model: String,
    /// Requests this phase will send, when known (for progress bars).
    pub expected_requests: Option<u64>,
    bound: Bound,
    client: ClientMix,
    /// Index into the plan's classes: only requests of that class are sent.
    class: Option<usize>,
    /// Open loop at this many requests per second; closed loop when None.
    rate: Option<f64>,
    /// Requests read as the log shows (`--replay-speeds`); the phase's clients otherwise.
    replay: Option<ReplayModel>,
    /// Requests sent at their logged times compressed by this factor (`--replay-timing`).
    timing: Option<f64>,
}

impl Plan {
    /// Where the server must accept connections before load starts.
    pub fn addr(&self) -> SocketAddr {
        self.endpoint.addr
    }

    /// Whether the load speaks QUIC: the server binds a UDP port and accepts nothing.
    pub fn is_quic(&self) -> bool {
        self.endpoint.protocol == Protocol::Quic
    }

    /// `--class` names with their regular expressions, in the order given.
    pub fn classes(&self) -> Vec<(&str, &str)> {
        self.classes
            .iter()
            .map(|(name, re)| (name.as_str(), re.as_str()))
            .collect()
    }

    /// What the user should know about the inputs before trusting the run, one line each.
    pub fn warnings(&self) -> Vec<String> {
        let (Some(scan), Some(path)) = (&self.scan, &self.requests_file) else {
            return Vec::new();
        };
        if scan.typed_paths == 0 {
            return Vec::new();
        }
        vec![format!(
            "{}: {} of {} requests look like gopher URL paths (/TYPE/SELECTOR, e.g. /0/about.txt); \
             the item type is not part of the selector, and servers answer these with error \
             items: write the selectors themselves (about.txt or /about.txt)",
            path.display(),
            scan.typed_paths,
            scan.requests
        )]
    }

    /// What the log says of the requests replayed, per class too; None for a plain list.
    fn logged_traffic(&self) -> Option<reqcost_record::LoggedTraffic> {
        let scan = self.scan.as_ref().filter(|s| s.format != Format::List)?;
        let mut log = scan.log.to_record(scan.requests);
        for ((name, _), (sum, n)) in self.classes.iter().zip(&scan.class_durations) {
            if *n > 0 {
                log.class_request_time_mean_s
                    .insert(name.clone(), sum / *n as f64);
            }
        }
        Some(log)
    }

    /// The logged client each loopback address stands for under `--replay-speeds` (as logged
    /// or hashed with `--anonymize`), so that per-client figures name the log's clients.
    pub fn client_names(&self) -> Vec<(IpAddr, String)> {
        let (Some(scan), Some(ReplayModel { aliases: true, .. })) = (&self.scan, &self.replay)
        else {
            return Vec::new();
        };
        let mut names: Vec<(IpAddr, String)> = scan
            .clients
            .order
            .iter()
            .enumerate()
            .map(|(n, addr)| {
                (
                    replay::alias(n as u32),
                    replay::client_name(addr, self.anonymize),
                )
            })
            .collect();
        if scan.clients.others > 0 {
            names.push((
                replay::alias(replay::MAX_CLIENTS),
                "(other logged clients)".into(),
            ));
        }
        names
    }

    /// Format of the requests file, when there is one.
    pub fn requests_format(&self) -> Option<Format> {
        self.scan.as_ref().map(|s| s.format)
    }

    pub fn describe(&self) -> Workload {
        let mut options = BTreeMap::new();
        let mut opt = |k: &str, v: String| options.insert(k.to_string(), v);
        if let Some(scan) = &self.scan {
            opt("requests-format", scan.format.name().into());
            opt("requests-in-file", scan.requests.to_string());
            for (reason, n) in &scan.skipped {
                opt(&format!("skipped-in-file: {reason}"), n.to_string());
            }
            if let Some(sample) = self.sample {
                opt("sample", sample.describe());
                opt("sampled-out-lines", scan.sampled_out.to_string());
            }
            if let Some(factor) = self.timing {
                opt(
                    "replay-timing",
                    format!("each request at its logged time, {factor}x faster (open loop; latency from the scheduled time)"),
                );
            }
            if let Some(r) = &self.replay {
                opt(
                    "replay-speeds",
                    format!(
                        "each request read at its logged speed (bytes over request time; unlimited under {}s), rcvbuf {}",
                        replay::SPEED_MIN_TIME_S,
                        format_size(u64::from(r.rcvbuf))
                    ),
                );
                for (ip, name) in self.client_names() {
                    opt(&format!("logged-client {ip}"), name);
                }
            }
            for ((name, re), n) in self.classes.iter().zip(&scan.class_requests) {
                opt(
                    &format!("class:{name}"),
                    format!("{} ({n} requests in file)", re.as_str()),
                );
            }
        }
        opt("client", self.client_model());
        opt("request-timeout", format!("{:?}", self.request_timeout));
        opt("connect-timeout", format!("{:?}", self.connect_timeout));
        opt("max-response", format_size(self.max_response));
        if self.endpoint.protocol.is_http() {
            opt("keepalive", self.keepalive.to_string());
        }
        if !self.headers.is_empty() {
            let text = String::from_utf8_lossy(&self.headers);
            opt("headers", text.trim_end().replace("\r\n", "; "));
        }
        if self.endpoint.protocol.uses_tls() {
            opt("tls-resumption", self.tls_resume.to_string());
        }
        Workload {
            log: self.logged_traffic(),
            url: self.url.clone(),
            protocol: self.endpoint.protocol.name().to_string(),
            requests_file: self.requests_file.as_ref().map(|p| p.display().to_string()),
            concurrency: self.concurrency,
            requests: self.duration.is_none().then_some(self.count),
            duration_s: self.duration.map(|d| d.as_secs_f64()),
            rate_per_s: self.rate,
            warmup_requests: self.warmup,
            options,
            load: None,
        }
    }

    /// How the main phases' clients read: the client mix's models, or the log's speeds.
    fn client_model(&self) -> String {
        match &self.replay {
            Some(r) if r.aliases => {
                "as-logged (each request at its logged speed, each logged client from its own address)".into()
            }
            Some(_) => "as-logged (each request at its logged speed)".into(),
            None => self.client.describe(),
        }
    }

    fn measured_phase(&self, name: String, class: Option<usize>) -> PhaseSpec {
        let bound = match (self.duration, self.timing, &self.scan) {
            (Some(d), _, _) => Bound::Duration(d),
            // At the logged times, the log is sent once: a second pass would start over at
            // the log's first time.
            (None, Some(_), Some(scan)) => Bound::Requests(match class {
                Some(i) => scan.class_requests[i],
                None => scan.requests,
            }),
            (None, ..) => Bound::Requests(self.count),
        };
        PhaseSpec {
            name,
            measured: true,
            client_model: self.client_model(),
            expected_requests: match bound {
                Bound::Requests(n) => Some(n),
                Bound::Duration(d) => self.rate.map(|r| (r * d.as_secs_f64()) as u64),
            },
            bound,
            client: self.client.clone(),
            class,
            rate: self.rate,
            replay: self.replay,
            timing: self.timing,
        }
    }

    /// Warm-up (when `--warmup` is not 0), `main`, then `class:NAME` for each `--class`.
    pub fn phases(&self) -> Vec<PhaseSpec> {
        let mut phases = Vec::new();
        if self.warmup > 0 {
            phases.push(PhaseSpec {
                name: "warmup".into(),
                measured: false,
                client_model: self.client_model(),
                expected_requests: Some(self.warmup),
                bound: Bound::Requests(self.warmup),
                client: self.client.clone(),
                class: None,
                rate: None,
                replay: self.replay,
                timing: None,
            });
        }
        phases.push(self.measured_phase("main".into(), None));
        for (i, (name, _)) in self.classes.iter().enumerate() {
            phases.push(self.measured_phase(format!("class:{name}"), Some(i)));
        }
        phases
    }

    /// A measured phase `slow-clients` sending `requests` requests (closed loop, `-c`
    /// connections) with each connection reading at most `bytes_per_s`, through a receive
    /// buffer of `--client-rcvbuf` or [`SLOW_CLIENT_RCVBUF`].
    pub fn slow_client_phase(&self, requests: u64, bytes_per_s: u64) -> PhaseSpec {
        let client = ClientMix::single(ClientModel {
            bandwidth: Some(bytes_per_s.max(1)),
            rcvbuf: Some(self.client.rcvbuf().unwrap_or(SLOW_CLIENT_RCVBUF)),
            source: None,
        });
        PhaseSpec {
            name: "slow-clients".into(),
            measured: true,
            client_model: client.describe(),
            expected_requests: Some(requests),
            bound: Bound::Requests(requests),
            client,
            class: None,
            rate: None,
            replay: None,
            timing: None,
        }
    }

    /// A measured phase `fast-same-rate` sending `requests` requests from unlimited clients,
    /// open loop at `rate` per second over `-c` connections: the fast reference at another
    /// phase's pace, so that only the clients' speed differs between the two.
    pub fn fast_phase_at_rate(&self, requests: u64, rate: f64) -> PhaseSpec {
        let client = ClientMix::single(ClientModel::default());
        PhaseSpec {
            name: "fast-same-rate".into(),
            measured: true,
            client_model: format!("{}, open loop at {rate:.0} req/s", client.describe()),
            expected_requests: Some(requests),
            bound: Bound::Requests(requests),
            client,
            class: None,
            rate: Some(rate),
            replay: None,
            timing: None,
        }
    }

    /// Whether `phase` replays a log at its logged clients' speeds or times
    /// (`--replay-speeds`, `--replay-timing`): a replay is held against the log afterwards.
    pub fn replays_log(&self, phase: &PhaseSpec) -> bool {
        phase.replay.is_some() || phase.timing.is_some()
    }

    /// The same phase sending only its first `requests` requests (at its rate and clients):
    /// the same work again, shortened where repeating all of it would take too long.
    pub fn repeat_phase(&self, phase: &PhaseSpec, requests: u64) -> PhaseSpec {
        PhaseSpec {
            expected_requests: Some(requests),
            bound: Bound::Requests(requests),
            ..phase.clone()
        }
    }

    /// How long `requests` requests of `phase` take at the pace something other than the server
    /// sets: its open-loop rate, or its clients' bandwidth reading `bytes_per_request` each over
    /// the plan's connections. None for unlimited clients in a closed loop: the server's pace.
    pub fn paced_secs(
        &self,
        phase: &PhaseSpec,
        requests: u64,
        bytes_per_request: f64,
    ) -> Option<f64> {
        let by_rate = phase.rate.map(|rate| requests as f64 / rate);
        let connections = f64::from(self.concurrency.max(1));
        let by_bandwidth = phase
            .client
            .groups
            .iter()
            .filter_map(|(share, m)| {
                let read = share * requests as f64 * bytes_per_request;
                m.bandwidth.map(|b| read / b as f64 / connections)
            })
            .reduce(|a, b| a + b);
        [by_rate, by_bandwidth]
            .into_iter()
            .flatten()
            .reduce(f64::max)
    }

    fn source(&self, phase: &PhaseSpec) -> std::io::Result<Source> {
        match (&self.requests_file, &self.scan) {
            (Some(path), Some(scan)) => Source::open(
                path,
                scan.format,
                self.normalizer.clone(),
                phase
                    .class
                    .and_then(|i| self.classes.get(i))
                    .map(|(_, r)| r.clone()),
                self.sample,
            ),
            _ => Ok(Source::Single(self.single.clone())),
        }
    }

    /// Runs one phase on [`Plan::load_threads`] threads until done or `stop` is set; `progress`
    /// gets the number of finished requests, summed over the threads, as they finish (several
    /// finishing together are reported once), so it must be cheap: an atomic store.
    pub fn run(
        &self,
        phase: &PhaseSpec,
        stop: &AtomicBool,
        progress: &(dyn Fn(u64) + Sync),
    ) -> ClientStats {
        let threads = self.load_threads();
        let parts: std::io::Result<Vec<engine::PhaseRun>> = (0..threads)
            .map(|t| self.phase_part(phase, share(self.concurrency, threads, t)))
            .collect();
        let Ok(parts) = parts else {
            let mut stats = ClientStats::default();
            stats.skipped.insert("requests file unreadable".into(), 1);
            return stats;
        };
        ClientStats {
            load_threads: Some(threads),
            ..engine::run(parts, stop, progress)
        }
    }

    /// Threads a phase runs on: `--threads`, or as many as the CPUs the calling thread may
    /// run on (reqcost pins itself off the server's CPUs first), but no more than connections.
    pub fn load_threads(&self) -> u32 {
        let cpus = || {
            std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1))
        };
        self.threads
            .unwrap_or_else(cpus)
            .min(self.concurrency)
            .max(1)
    }

    /// One load thread's part of `phase`, with `concurrency` connections.
    fn phase_part(&self, phase: &PhaseSpec, concurrency: u32) -> std::io::Result<engine::PhaseRun> {
        let (limit, duration) = match phase.bound {
            Bound::Requests(n) => (Some(n), None),
            Bound::Duration(d) => (None, Some(d)),
        };
        Ok(engine::PhaseRun {
            clients: phase
                .client
                .groups
                .iter()
                .map(|(share, model)| (*share, self.client_config(model)))
                .collect(),
            source: self.source(phase)?,
            concurrency,
            limit,
            duration,
            rate: phase.rate,
            replay: phase.replay,
            timing: phase.timing,
            request_timeout: self.request_timeout,
        })
    }
}

/// Thread `t`'s share of `total` connections over `threads` threads: as even as can be.
fn share(total: u32, threads: u32, t: u32) -> u32 {
    total / threads + u32::from(t < total % threads)
}

impl Plan {
    fn client_config(&self, model: &ClientModel) -> client::ClientConfig {
        client::ClientConfig {
            protocol: self.endpoint.protocol,
            addr: self.endpoint.addr,
            tls: self
                .tls
                .as_ref()
                .filter(|_| self.quic.is_none())
                .map(|(c, n)| (tokio_rustls::TlsConnector::from(c.clone()), n.clone())),
            quic: self.quic.clone(),
            authority: self.endpoint.authority.clone(),
            keepalive: self.keepalive,
            headers: self.headers.clone(),
            connect_timeout: self.connect_timeout,
            max_response: self.max_response,
            bandwidth: model.bandwidth,
            rcvbuf: model.rcvbuf,
            source: model.source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(options: WorkloadOptions) -> Plan {
        options.plan().unwrap()
    }

    #[test]
    fn headers_go_on_the_wire_and_bad_ones_are_refused() {
        let with = |url: &str, headers: &[&str]| {
            WorkloadOptions {
                url: url.into(),
                headers: headers.iter().map(|h| h.to_string()).collect(),
                ..Default::default()
            }
            .plan()
        };
        let p = with("http://127.0.0.1:80/a", &["Accept-Encoding: gzip", "X-A:b"]).unwrap();
        assert_eq!(p.headers, b"Accept-Encoding: gzip\r\nX-A:b\r\n");
        assert_eq!(
            p.describe().options.get("headers").map(String::as_str),
            Some("Accept-Encoding: gzip; X-A:b")
        );
        for bad in ["no colon", ": empty name", "A: b\r\nC: d", "Sp ace: x"] {
            let e = with("http://127.0.0.1:80/a", &[bad]).err().unwrap();
            assert!(e.to_string().contains("'Name: value'"), "{bad}: {e}");
        }
        let e = with("gopher://127.0.0.1:70/", &["A: b"]).err().unwrap();
        assert!(e.to_string().contains("--header needs an http://"), "{e}");
    }

    #[test]
    fn phases_and_description() {
        let p = plan(WorkloadOptions {
            url: "gopher://127.0.0.1:7070/1/menu".into(),
            count: 500,
            concurrency: 4,
            ..Default::default()
        });
        let phases = p.phases();
        let names: Vec<(&str, bool, Option<u64>)> = phases
            .iter()
            .map(|ph| (ph.name.as_str(), ph.measured, ph.expected_requests))
            .collect();
        assert_eq!(
            names,
            [("warmup", false, Some(50)), ("main", true, Some(500))]
        );
        assert_eq!(phases[1].client_model, "unlimited");
        assert_eq!(p.single.target, b"/menu");
        let d = p.describe();
        assert_eq!(
            (
                d.protocol.as_str(),
                d.concurrency,
                d.requests,
                d.warmup_requests
            ),
            ("gopher", 4, Some(500), 50)
        );
        assert_eq!(
            d.options.get("client").map(String::as_str),
            Some("unlimited")
        );

        let p = plan(WorkloadOptions {
            url: "http://127.0.0.1:8080/".into(),
            duration: Some(Duration::from_secs(10)),
            rate: Some(100.0),
            warmup: Some(0),
            ..Default::default()
        });
        let phases = p.phases();
        assert_eq!(phases.len(), 1);
        assert_eq!(phases[0].expected_requests, Some(1000));
        let d = p.describe();
        assert_eq!(
            (d.requests, d.duration_s, d.rate_per_s),
            (None, Some(10.0), Some(100.0))
        );

        let p = plan(WorkloadOptions {
            url: "http://127.0.0.1:8080/".into(),
            client_bandwidth: Some(64 * 1024),
            client_rcvbuf: Some(4 * 1024),
            ..Default::default()
        });
        assert_eq!(
            p.phases()[1].client_model,
            "64 KiB/s per connection, rcvbuf 4 KiB"
        );
        let slow = p.slow_client_phase(20, 1024);
        assert_eq!(slow.client_model, "1 KiB/s per connection, rcvbuf 4 KiB");
        assert_eq!(slow.expected_requests, Some(20));
        let same_rate = p.fast_phase_at_rate(20, 98.4);
        assert_eq!(same_rate.client_model, "unlimited, open loop at 98 req/s");
        assert_eq!(
            (same_rate.rate, same_rate.expected_requests),
            (Some(98.4), Some(20))
        );
    }

    #[test]
    fn client_mix_groups_connect_from_their_own_addresses() {
        let mix = |groups: Vec<(f64, Option<u64>)>| WorkloadOptions {
            url: "gopher://127.0.0.1:7070/".into(),
            client_mix: groups,
            ..Default::default()
        };
        let p = plan(mix(vec![(80.0, None), (20.0, Some(20 * 1024))]));
        assert_eq!(
            p.phases()[1].client_model,
            "80% unlimited from 127.0.0.10 + 20% 20 KiB/s per connection, rcvbuf 8 KiB from 127.0.0.11"
        );
        let e = mix(vec![(80.0, None), (30.0, None)]).plan().err().unwrap();
        assert!(e.to_string().contains("add up to 100 %, not 110 %"), "{e}");
        let mut both = mix(vec![(50.0, None), (50.0, Some(1024))]);
        both.client_bandwidth = Some(1024);
        assert!(both.plan().is_err());
    }

    fn log_file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("reqcost-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn replay_needs_what_the_log_must_say() {
        let timed = log_file(
            "timed.log",
            "192.0.2.1 - - [24/Nov/2026:16:00:00 +0000] \"GET /a HTTP/1.1\" 200 100000 0.5\n\
             192.0.2.2 - - [24/Nov/2026:16:00:01 +0000] \"GET /b HTTP/1.1\" 200 10 0.000\n",
        );
        let options = |path: &Path| WorkloadOptions {
            url: "http://127.0.0.1:8080/".into(),
            requests: Some(path.to_path_buf()),
            log_format: Some("%h %l %u %t \"%r\" %>s %b %T".into()),
            replay_speeds: true,
            ..Default::default()
        };
        let p = plan(WorkloadOptions {
            anonymize: true,
            ..options(&timed)
        });
        let names = p.client_names();
        assert_eq!(names.len(), 2);
        assert_eq!(names[0].0, replay::alias(0));
        assert_eq!(names[0].1, replay::client_name(b"192.0.2.1", true));
        assert!(names[0].1.starts_with("client-"), "{names:?}");
        let log = p.describe().log.unwrap();
        assert_eq!((log.requests, log.bytes_mean), (2, Some(50005.0)));

        let untimed = log_file(
            "untimed.log",
            "192.0.2.1 - - [24/Nov/2026:16:00:00 +0000] \"GET /a HTTP/1.1\" 200 100000\n",
        );
        let e = WorkloadOptions {
            log_format: None,
            ..options(&untimed)
        }
        .plan()
        .err()
        .unwrap();
        assert!(e.to_string().contains("logs no request time"), "{e}");
        let e = WorkloadOptions {
            client_mix: vec![(100.0, None)],
            ..options(&timed)
        }
        .plan()
        .err()
        .unwrap();
        assert!(
            e.to_string()
                .contains("drop --client-bandwidth and --client-mix"),
            "{e}"
        );
        let e = WorkloadOptions {
            replay_timing: Some(0.0),
            ..options(&timed)
        }
        .plan()
        .err()
        .unwrap();
        assert!(e.to_string().contains("must be a positive number"), "{e}");
        let timing = plan(WorkloadOptions {
            replay_timing: Some(10.0),
            ..options(&timed)
        });
        assert_eq!(timing.phases().last().unwrap().expected_requests, Some(2));
    }
}
