//! [`WorkloadOptions`], everything a [`Plan`] is made from, and their checking: what can be
//! validated before any server starts (URL, requests file, classes, limits, client speeds)
//! becomes the plan or a [`WorkloadError`].

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use regex::bytes::Regex;
use rustls::pki_types::ServerName;

use crate::client_model::{ClientMix, ClientModel, ReplayModel};
use crate::endpoint::{Endpoint, Protocol};
use crate::plan::Plan;
use crate::source::{
    self, Format, LogFormat, Method, Normalizer, ReadOptions, Request, Sample, Scan,
};
use crate::{quic, tls};

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
        let reading = self.read_options()?;
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

    fn read_options(&self) -> Result<ReadOptions, WorkloadError> {
        Ok(ReadOptions {
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
        reading: &ReadOptions,
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
pub(crate) type TlsSetup = (Arc<rustls::ClientConfig>, ServerName<'static>);
