//! Where requests come from: the `--url` alone, a plain list, or an access log, read as a stream
//! (constant memory whatever the file's size) and cycled until a phase has sent enough.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek};
use std::path::Path;
use std::sync::Arc;

use regex::bytes::Regex;

use crate::endpoint::{Endpoint, Protocol};
use crate::logformat::{read_clf, read_json, Logged, Template};
use crate::replay::Clients;
use reqcost_record::LoggedTraffic;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
}

/// One request, in the form its protocol sends: a gopher selector, an HTTP origin-form path,
/// a full Gemini URL, or a raw line.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    pub target: Vec<u8>,
    /// What the log says of this request; nothing for a list or the URL alone.
    pub logged: Logged,
    /// The number of its logged client, when the log has clients.
    pub client: Option<u32>,
    /// Seconds after the first request replayed that it was logged; never before the request
    /// ahead of it (a log written as requests end is not quite in order of their start).
    pub at: Option<f64>,
    /// The request line of a JSON or `--log-format` line, as logged.
    line: Vec<u8>,
}

impl Request {
    pub fn new() -> Request {
        Request::with(Method::Get, Vec::with_capacity(256))
    }

    pub fn with(method: Method, target: Vec<u8>) -> Request {
        Request {
            method,
            target,
            logged: Logged::default(),
            client: None,
            at: None,
            line: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One selector, path or URL a line.
    List,
    /// Apache/nginx Common or Combined Log Format, fields after the byte count passed over.
    AccessLog,
    /// One JSON object a line.
    Json,
    /// The `--log-format` template.
    Custom,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::List => "list",
            Format::AccessLog => "access-log",
            Format::Json => "json-log",
            Format::Custom => "log-format",
        }
    }

    fn is_log(self) -> bool {
        self != Format::List
    }
}

/// How the log lines are written, given with `--log-format`: a server's own format string, or
/// one of the names `combined`, `common` and `json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogFormat {
    Clf,
    Json,
    Template(Arc<Template>),
}

impl LogFormat {
    pub fn parse(text: &str) -> Result<LogFormat, String> {
        Ok(match text.trim() {
            "combined" | "common" => LogFormat::Clf,
            "json" => LogFormat::Json,
            t => LogFormat::Template(Arc::new(Template::parse(t)?)),
        })
    }

    fn format(&self) -> Format {
        match self {
            LogFormat::Clf => Format::AccessLog,
            LogFormat::Json => Format::Json,
            LogFormat::Template(_) => Format::Custom,
        }
    }
}

/// Which of the log's requests are replayed (`--sample`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sample {
    /// Every k-th line: the first, the (k+1)-th, ...; the others are not read further, so
    /// sampling a huge log is quick.
    Every(u64),
    /// Requests logged this many seconds after the first one, from..to.
    Window { from: f64, to: f64 },
}

impl Sample {
    /// `K` (every K-th line) or `FROM..TO` (durations after the first logged request, e.g.
    /// `2m..5m`).
    pub fn parse(text: &str) -> Option<Sample> {
        if let Some((from, to)) = text.split_once("..") {
            let d = |s: &str| crate::units::parse_duration(s).map(|d| d.as_secs_f64());
            let (from, to) = (d(from)?, d(to)?);
            return (to > from).then_some(Sample::Window { from, to });
        }
        text.parse().ok().filter(|k| *k > 0).map(Sample::Every)
    }

    pub fn describe(self) -> String {
        match self {
            Sample::Every(k) => format!("every {k}th line"),
            Sample::Window { from, to } => format!("logged {from}s to {to}s after the first"),
        }
    }
}

/// Applies a [`Sample`] over one pass of the input.
#[derive(Debug, Clone)]
struct Sampler {
    sample: Option<Sample>,
    seen: u64,
    first: Option<f64>,
}

enum Sampled {
    Keep,
    Drop,
    /// A window is asked for and the line has no time.
    NoTime,
}

impl Sampler {
    fn new(sample: Option<Sample>) -> Sampler {
        Sampler {
            sample,
            seen: 0,
            first: None,
        }
    }

    fn restart(&mut self) {
        *self = Sampler::new(self.sample);
    }

    /// Whether `--sample` leaves the next non-blank line out without reading it.
    fn passes_over(&mut self) -> bool {
        let Some(Sample::Every(k)) = self.sample else {
            return false;
        };
        self.seen += 1;
        !(self.seen - 1).is_multiple_of(k)
    }

    /// Whether the request of a line read is taken.
    fn take(&mut self, logged: &Logged) -> Sampled {
        match self.sample {
            None | Some(Sample::Every(_)) => Sampled::Keep,
            Some(Sample::Window { from, to }) => {
                let Some(t) = logged.time else {
                    return Sampled::NoTime;
                };
                let since = t - *self.first.get_or_insert(t);
                if (from..to).contains(&since) {
                    Sampled::Keep
                } else {
                    Sampled::Drop
                }
            }
        }
    }
}

/// What one input line holds.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Request(Method),
    Blank,
    /// A well-formed line not to replay (a POST in a log, a garbage request line); the reason
    /// is the key it is counted under.
    Skip(String),
    Malformed(&'static str),
}

/// How the requests of one protocol are written, so that every line becomes the bytes the
/// protocol sends.
#[derive(Debug, Clone)]
pub struct Normalizer {
    protocol: Protocol,
    authority: String,
    template: Option<Arc<Template>>,
}

impl Normalizer {
    pub fn new(endpoint: &Endpoint, log_format: Option<&LogFormat>) -> Normalizer {
        Normalizer {
            protocol: endpoint.protocol,
            authority: endpoint.authority.clone(),
            template: match log_format {
                Some(LogFormat::Template(t)) => Some(t.clone()),
                _ => None,
            },
        }
    }

    /// Writes the request target for `raw` (a selector, a path or a URL) into `out`.
    fn normalize(&self, raw: &[u8], out: &mut Vec<u8>) -> Result<(), &'static str> {
        out.clear();
        match self.protocol {
            Protocol::Gopher | Protocol::Tcp => out.extend_from_slice(raw),
            Protocol::Http | Protocol::Https | Protocol::Quic => {
                if raw.iter().any(|b| b.is_ascii_whitespace()) {
                    return Err("spaces in the request path");
                }
                if raw.starts_with(b"/") {
                    out.extend_from_slice(raw);
                } else if let Some(rest) =
                    strip_scheme(raw, b"http://").or_else(|| strip_scheme(raw, b"https://"))
                {
                    match rest.iter().position(|&b| b == b'/' || b == b'?') {
                        Some(i) if rest[i] == b'/' => out.extend_from_slice(&rest[i..]),
                        Some(i) => {
                            out.push(b'/');
                            out.extend_from_slice(&rest[i..]);
                        }
                        None => out.push(b'/'),
                    }
                } else {
                    return Err("expected a path starting with / or an http(s):// URL");
                }
            }
            Protocol::Gemini => {
                if raw.iter().any(|b| b.is_ascii_whitespace()) {
                    return Err("spaces in the request path");
                }
                if strip_scheme(raw, b"gemini://").is_some() {
                    out.extend_from_slice(raw);
                } else if raw.starts_with(b"/") {
                    out.extend_from_slice(b"gemini://");
                    out.extend_from_slice(self.authority.as_bytes());
                    out.extend_from_slice(raw);
                } else {
                    return Err("expected a path starting with / or a gemini:// URL");
                }
            }
        }
        Ok(())
    }

    fn classify(&self, format: Format, line: &[u8], req: &mut Request) -> Line {
        if trim(line).is_empty() {
            return Line::Blank;
        }
        if format == Format::List {
            return match self.normalize(trim(line), &mut req.target) {
                Ok(()) => Line::Request(Method::Get),
                Err(why) => Line::Malformed(why),
            };
        }
        let Request {
            target,
            logged,
            line: scratch,
            ..
        } = req;
        let request = match self.request_line(format, line, logged, scratch) {
            Ok(r) => r,
            Err(why) => return Line::Malformed(why),
        };
        let mut parts = request.split(|&b| b == b' ').filter(|p| !p.is_empty());
        let (Some(method), Some(uri)) = (parts.next(), parts.next()) else {
            return Line::Skip("unparsable request".into());
        };
        let method = match method {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            m if is_known_method(m) => {
                return Line::Skip(format!("method {}", String::from_utf8_lossy(m)))
            }
            _ => return Line::Skip("unparsable request".into()),
        };
        match self.normalize(uri, target) {
            Ok(()) => Line::Request(method),
            Err(_) => Line::Skip("unparsable request".into()),
        }
    }

    /// The request line of a log line, its other fields read into `logged`.
    fn request_line<'a>(
        &self,
        format: Format,
        line: &'a [u8],
        logged: &mut Logged,
        scratch: &'a mut Vec<u8>,
    ) -> Result<&'a [u8], &'static str> {
        match (format, &self.template) {
            (Format::Json, _) => read_json(line, logged, scratch)
                .map(|()| scratch.as_slice())
                .ok_or("not a JSON object with a request (request, or method and path)"),
            (Format::Custom, Some(t)) => t
                .read(line, logged, scratch)
                .map(|()| scratch.as_slice())
                .ok_or("does not match the --log-format"),
            _ => read_clf(line, logged).ok_or(
                "not in Common or Combined Log Format (HOST IDENT USER [DATE] \"REQUEST\" STATUS BYTES)",
            ),
        }
    }
}

fn is_known_method(m: &[u8]) -> bool {
    matches!(
        m,
        b"POST" | b"PUT" | b"DELETE" | b"OPTIONS" | b"PATCH" | b"CONNECT" | b"TRACE" | b"PROPFIND"
    )
}

fn strip_scheme<'a>(raw: &'a [u8], scheme: &[u8]) -> Option<&'a [u8]> {
    (raw.len() >= scheme.len() && raw[..scheme.len()].eq_ignore_ascii_case(scheme))
        .then(|| &raw[scheme.len()..])
}

fn trim(line: &[u8]) -> &[u8] {
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &line[start..end]
}

/// Longest line of a requests file, end of line included: a request is a few KiB at most, and
/// a file without line ends (a binary, /dev/zero) must not be read whole into memory.
pub const MAX_LINE: usize = 64 * 1024;

/// Reads the next line into `line`; false at end of file. A line longer than [`MAX_LINE`] is
/// an `InvalidData` error.
fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<bool> {
    line.clear();
    let n = Read::take(&mut *reader, MAX_LINE as u64 + 1).read_until(b'\n', line)?;
    if line.len() > MAX_LINE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("line longer than {} KiB", MAX_LINE / 1024),
        ));
    }
    Ok(n > 0)
}

/// Opens the file and reads its first non-blank line to tell a log (Common/Combined or JSON)
/// from a list.
fn detect(path: &Path) -> Result<Format, String> {
    let mut reader = BufReader::new(File::open(path).map_err(|e| cannot_read(path, e))?);
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        number += 1;
        if !read_line(&mut reader, &mut line).map_err(|e| line_error(path, number, e))? {
            return Ok(Format::List);
        }
        let first = strip_eol(&line);
        if trim(first).is_empty() {
            continue;
        }
        let mut logged = Logged::default();
        return Ok(if read_clf(first, &mut logged).is_some() {
            Format::AccessLog
        } else if trim(first).starts_with(b"{")
            && read_json(first, &mut logged, &mut Vec::new()).is_some()
        {
            Format::Json
        } else {
            Format::List
        });
    }
}

fn cannot_read(path: &Path, e: std::io::Error) -> String {
    format!("cannot read requests file {}: {e}", path.display())
}

/// A read error at line `number`: a line too long is named by FILE:LINE.
fn line_error(path: &Path, number: u64, e: std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::InvalidData {
        format!("{}:{number}: {e} (is it a requests file?)", path.display())
    } else {
        cannot_read(path, e)
    }
}

fn strip_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// What the log says of the requests replayed: the figures a replay is compared with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogSummary {
    pub statuses: BTreeMap<u16, u64>,
    /// Bytes sent over the requests that log them, and how many do.
    pub bytes: u64,
    pub with_bytes: u64,
    /// Seconds the server took over the requests that log it, and how many do.
    pub duration_s: f64,
    pub with_duration: u64,
    /// Earliest and latest logged time.
    pub first: Option<f64>,
    pub last: Option<f64>,
}

impl LogSummary {
    /// The log's figures as the run record keeps them; `requests` is the requests replayed.
    pub fn to_record(&self, requests: u64) -> LoggedTraffic {
        let mean = |sum: f64, n: u64| (n > 0).then(|| sum / n as f64);
        LoggedTraffic {
            requests,
            statuses: self
                .statuses
                .iter()
                .map(|(s, n)| (s.to_string(), *n))
                .collect(),
            bytes_mean: mean(self.bytes as f64, self.with_bytes),
            request_time_mean_s: mean(self.duration_s, self.with_duration),
            span_s: self.first.zip(self.last).map(|(f, l)| l - f),
            class_request_time_mean_s: BTreeMap::new(),
        }
    }

    fn add(&mut self, l: &Logged) {
        if let Some(s) = l.status {
            *self.statuses.entry(s).or_default() += 1;
        }
        if let Some(b) = l.bytes {
            self.bytes += b;
            self.with_bytes += 1;
        }
        if let Some(d) = l.duration {
            self.duration_s += d;
            self.with_duration += 1;
        }
        if let Some(t) = l.time {
            self.first = Some(self.first.map_or(t, |f| f.min(t)));
            self.last = Some(self.last.map_or(t, |f| f.max(t)));
        }
    }
}

/// What one pass over a requests file found; plan() makes it before any server starts.
#[derive(Debug, Clone)]
pub struct Scan {
    pub format: Format,
    pub lines: u64,
    /// Requests to replay: those `--sample` keeps.
    pub requests: u64,
    pub skipped: BTreeMap<String, u64>,
    /// Lines `--sample` left out.
    pub sampled_out: u64,
    /// Requests matching each `--class`, in the order given.
    pub class_requests: Vec<u64>,
    /// Logged request time of each class's requests: (seconds, requests that log it).
    pub class_durations: Vec<(f64, u64)>,
    /// Gopher requests written as URL paths, `/TYPE/SELECTOR` (`/0/about.txt`): the item type
    /// belongs to the URL, not the selector, so servers answer them with an error item.
    pub typed_paths: u64,
    pub log: LogSummary,
    /// The logged clients of the requests replayed, numbered as a phase numbers them.
    pub clients: Clients,
}

/// A gopher request that looks like a URL path with its item type (RFC 4266), `/0/about.txt`:
/// one item-type character between slashes.
fn is_typed_path(target: &[u8]) -> bool {
    const ITEM_TYPES: &[u8] = b"0123456789+gIThis:;<dpw";
    matches!(target, [b'/', t, b'/', ..] if ITEM_TYPES.contains(t))
}

/// How a requests file is read: its format when `--log-format` says it (else detected), and
/// the `--sample` to take.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    pub log_format: Option<LogFormat>,
    pub sample: Option<Sample>,
    pub skip_bad: bool,
}

/// Reads the whole file once: detects its format, checks every line, counts requests per class.
pub fn scan(
    path: &Path,
    normalizer: &Normalizer,
    classes: &[Regex],
    reading: &ReadOptions,
) -> Result<Scan, String> {
    let format = match &reading.log_format {
        Some(f) => f.format(),
        None => detect(path)?,
    };
    if reading.sample.is_some() && !format.is_log() {
        return Err(format!(
            "--sample needs an access log; {} is a plain list of requests",
            path.display()
        ));
    }
    let file = File::open(path).map_err(|e| cannot_read(path, e))?;
    let reader = BufReader::with_capacity(1 << 16, file);
    let scan = scan_lines(reader, format, normalizer, classes, reading)
        .map_err(|(line, e)| match e {
            ScanError::Io(e) => line_error(path, line, e),
            ScanError::Malformed(why) => format!(
                "{}:{line}: malformed {} line: {why} (fix the line, give its format with --log-format, or pass --skip-bad)",
                path.display(),
                format.name()
            ),
        })?;
    if scan.requests == 0 {
        let detail = if scan.lines == 0 {
            "it is empty".to_string()
        } else if scan.sampled_out > 0 {
            format!("--sample keeps none of its {} lines", scan.lines)
        } else {
            format!("none of its {} lines is a request to replay", scan.lines)
        };
        return Err(format!(
            "requests file {} has no requests: {detail}",
            path.display()
        ));
    }
    Ok(scan)
}

enum ScanError {
    Io(std::io::Error),
    Malformed(&'static str),
}

/// One pass over the lines of `reader`, in constant memory: one line and one request are held
/// at a time, and what is kept of them are counts.
fn scan_lines(
    mut reader: impl BufRead,
    format: Format,
    normalizer: &Normalizer,
    classes: &[Regex],
    reading: &ReadOptions,
) -> Result<Scan, (u64, ScanError)> {
    let mut scan = Scan {
        format,
        lines: 0,
        requests: 0,
        skipped: BTreeMap::new(),
        sampled_out: 0,
        class_requests: vec![0; classes.len()],
        class_durations: vec![(0.0, 0); classes.len()],
        typed_paths: 0,
        log: LogSummary::default(),
        clients: Clients::default(),
    };
    let gopher = normalizer.protocol == Protocol::Gopher;
    let mut sampler = Sampler::new(reading.sample);
    let mut line = Vec::with_capacity(1024);
    let mut req = Request::new();
    loop {
        match read_line(&mut reader, &mut line) {
            Ok(true) => scan.lines += 1,
            Ok(false) => return Ok(scan),
            Err(e) => return Err((scan.lines + 1, ScanError::Io(e))),
        }
        if !trim(&line).is_empty() && sampler.passes_over() {
            scan.sampled_out += 1;
            continue;
        }
        match normalizer.classify(format, strip_eol(&line), &mut req) {
            Line::Request(_) => match sampler.take(&req.logged) {
                Sampled::Keep => {
                    scan.requests += 1;
                    scan.log.add(&req.logged);
                    if !req.logged.client.is_empty() {
                        scan.clients.number(&req.logged.client);
                    }
                    scan.typed_paths += u64::from(gopher && is_typed_path(&req.target));
                    for (i, class) in classes.iter().enumerate() {
                        if class.is_match(&req.target) {
                            scan.class_requests[i] += 1;
                            if let Some(d) = req.logged.duration {
                                scan.class_durations[i].0 += d;
                                scan.class_durations[i].1 += 1;
                            }
                        }
                    }
                }
                Sampled::Drop => scan.sampled_out += 1,
                Sampled::NoTime => *scan.skipped.entry(NO_TIME.into()).or_default() += 1,
            },
            Line::Blank => {}
            Line::Skip(reason) => *scan.skipped.entry(reason).or_default() += 1,
            Line::Malformed(_) if reading.skip_bad => {
                *scan.skipped.entry("malformed".into()).or_default() += 1
            }
            Line::Malformed(why) => return Err((scan.lines, ScanError::Malformed(why))),
        }
    }
}

/// Why a request is not replayed when `--sample` takes a time window and its line has no time.
const NO_TIME: &str = "no time for the --sample window";

/// A stream of requests for one phase, cycling through its input.
pub enum Source {
    /// The `--url` itself, again and again.
    Single(Request),
    File(FileSource),
}

pub struct FileSource {
    reader: BufReader<File>,
    format: Format,
    normalizer: Normalizer,
    filter: Option<Regex>,
    sampler: Sampler,
    clients: Clients,
    /// Logged time of the pass's first request, and the latest schedule given.
    first: Option<f64>,
    last_at: f64,
    line: Vec<u8>,
    produced_this_pass: bool,
    pub skipped: BTreeMap<String, u64>,
}

impl Source {
    pub fn open(
        path: &Path,
        format: Format,
        normalizer: Normalizer,
        filter: Option<Regex>,
        sample: Option<Sample>,
    ) -> std::io::Result<Source> {
        Ok(Source::File(FileSource {
            reader: BufReader::with_capacity(1 << 16, File::open(path)?),
            format,
            normalizer,
            filter,
            sampler: Sampler::new(sample),
            clients: Clients::default(),
            first: None,
            last_at: 0.0,
            line: Vec::with_capacity(1024),
            produced_this_pass: false,
            skipped: BTreeMap::new(),
        }))
    }

    /// Fills `req` with the next request; false when the input holds none (or became
    /// unreadable), which ends the phase.
    pub fn next(&mut self, req: &mut Request) -> bool {
        match self {
            Source::Single(r) => {
                req.method = r.method;
                req.target.clear();
                req.target.extend_from_slice(&r.target);
                true
            }
            Source::File(f) => f.next(req),
        }
    }

    pub fn skipped(&self) -> BTreeMap<String, u64> {
        match self {
            Source::Single(_) => BTreeMap::new(),
            Source::File(f) => f.skipped.clone(),
        }
    }
}

impl FileSource {
    /// When a request logged at `time` is due, in seconds after the pass's first one; a line
    /// without a time goes with the one before it.
    fn schedule(&mut self, time: Option<f64>) -> Option<f64> {
        if let Some(t) = time {
            let first = *self.first.get_or_insert(t);
            self.last_at = self.last_at.max(t - first);
        }
        self.first.map(|_| self.last_at)
    }

    fn next(&mut self, req: &mut Request) -> bool {
        loop {
            match read_line(&mut self.reader, &mut self.line) {
                Ok(false) => {
                    if !self.produced_this_pass || self.reader.rewind().is_err() {
                        return false;
                    }
                    self.produced_this_pass = false;
                    self.sampler.restart();
                    (self.first, self.last_at) = (None, 0.0);
                    continue;
                }
                Ok(true) => {}
                Err(_) => return false,
            }
            if !trim(&self.line).is_empty() && self.sampler.passes_over() {
                continue;
            }
            match self
                .normalizer
                .classify(self.format, strip_eol(&self.line), req)
            {
                Line::Request(method) => {
                    match self.sampler.take(&req.logged) {
                        Sampled::Keep => {}
                        Sampled::Drop => continue,
                        Sampled::NoTime => {
                            *self.skipped.entry(NO_TIME.into()).or_default() += 1;
                            continue;
                        }
                    }
                    // Numbered before the class filter, as the scan numbers them, so that a
                    // client has the same number (and address) in every phase.
                    req.client = (!req.logged.client.is_empty())
                        .then(|| self.clients.number(&req.logged.client));
                    req.at = self.schedule(req.logged.time);
                    if self
                        .filter
                        .as_ref()
                        .is_some_and(|f| !f.is_match(&req.target))
                    {
                        continue;
                    }
                    req.method = method;
                    self.produced_this_pass = true;
                    return true;
                }
                Line::Blank => {}
                Line::Skip(reason) => *self.skipped.entry(reason).or_default() += 1,
                Line::Malformed(_) => *self.skipped.entry("malformed".into()).or_default() += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::path::PathBuf;

    fn normalizer(url: &str) -> Normalizer {
        Normalizer::new(&Endpoint::parse(url).unwrap(), None)
    }

    fn normalizer_with(url: &str, reading: &ReadOptions) -> Normalizer {
        Normalizer::new(&Endpoint::parse(url).unwrap(), reading.log_format.as_ref())
    }

    fn temp_file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("reqcost-source-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::File::create(&path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        path
    }

    fn skip_bad() -> ReadOptions {
        ReadOptions {
            skip_bad: true,
            ..ReadOptions::default()
        }
    }

    const COMBINED: &str = r#"127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)""#;

    #[test]
    fn parses_log_lines() {
        let clf_request = |line: &'static [u8]| read_clf(line, &mut Logged::default());
        assert_eq!(
            clf_request(COMBINED.as_bytes()),
            Some(&b"GET /apache_pb.gif HTTP/1.0"[..])
        );
        let common = br#"::1 - frank [10/Oct/2000:13:55:36 -0700] "HEAD /a?b="c" HTTP/1.1" 304 -"#;
        assert_eq!(clf_request(common), Some(&br#"HEAD /a?b="c" HTTP/1.1"#[..]));
        assert_eq!(clf_request(b"/just/a/path"), None);
        assert_eq!(clf_request(b"1.2.3.4 - - [date] \"GET / HTTP/1.0\""), None);

        let n = normalizer("http://127.0.0.1:8080/");
        let mut out = Request::new();
        let post = br#"1.2.3.4 - - [d] "POST /form HTTP/1.1" 200 5"#;
        assert_eq!(
            n.classify(Format::AccessLog, post, &mut out),
            Line::Skip("method POST".into())
        );
        let junk = br#"1.2.3.4 - - [d] "\x16\x03\x01" 400 150"#;
        assert_eq!(
            n.classify(Format::AccessLog, junk, &mut out),
            Line::Skip("unparsable request".into())
        );
        let head = br#"1.2.3.4 - - [d] "HEAD http://example.org/x?y HTTP/1.1" 200 5"#;
        assert_eq!(
            n.classify(Format::AccessLog, head, &mut out),
            Line::Request(Method::Head)
        );
        assert_eq!(out.target, b"/x?y");
    }

    #[test]
    fn normalizes_per_protocol() {
        let (gemini, http) = ("gemini://localhost:1965/", "http://127.0.0.1:80/");
        for (url, raw, normal) in [
            (gemini, "/a.gmi", Some("gemini://localhost:1965/a.gmi")),
            (gemini, "gemini://other/b", Some("gemini://other/b")),
            (gemini, "a.gmi", None),
            (http, "https://x.org", Some("/")),
            (http, "http://x.org?q", Some("/?q")),
            (http, "index.html", None),
            (
                "gopher://127.0.0.1:70/",
                "/phlog\tsearch words",
                Some("/phlog\tsearch words"),
            ),
        ] {
            let mut out = Vec::new();
            let got = normalizer(url).normalize(raw.as_bytes(), &mut out);
            assert_eq!(
                got.ok().map(|()| out),
                normal.map(|n| n.as_bytes().to_vec()),
                "{url} {raw}"
            );
        }
    }

    #[test]
    fn scans_and_cycles_a_list() {
        let path = temp_file("list.txt", "/a\n\n/b\r\n/c\n");
        let n = normalizer("gopher://127.0.0.1:70/");
        let scan = scan(
            &path,
            &n,
            &[Regex::new("^/[ab]$").unwrap()],
            &ReadOptions::default(),
        )
        .unwrap();
        assert_eq!(
            (scan.format, scan.lines, scan.requests),
            (Format::List, 4, 3)
        );
        assert_eq!(scan.class_requests, vec![2]);

        let mut src = Source::open(&path, scan.format, n.clone(), None, None).unwrap();
        let mut req = Request::new();
        let got: Vec<Vec<u8>> = (0..7)
            .map(|_| {
                assert!(src.next(&mut req));
                req.target.clone()
            })
            .collect();
        let expect: Vec<&[u8]> = vec![b"/a", b"/b", b"/c", b"/a", b"/b", b"/c", b"/a"];
        assert_eq!(got, expect);

        let mut only_c =
            Source::open(&path, scan.format, n, Some(Regex::new("c").unwrap()), None).unwrap();
        for _ in 0..3 {
            assert!(only_c.next(&mut req));
            assert_eq!(req.target, b"/c");
        }
    }

    #[test]
    fn scans_a_log_and_reports_bad_lines() {
        let log = format!(
            "{COMBINED}\n1.2.3.4 - - [d] \"POST /f HTTP/1.1\" 200 1\ntruncated line\n{COMBINED}\n"
        );
        let path = temp_file("access.log", &log);
        let n = normalizer("http://127.0.0.1:80/");
        let err = scan(&path, &n, &[], &ReadOptions::default()).unwrap_err();
        assert!(
            err.contains("access.log:3: malformed access-log line"),
            "{err}"
        );
        assert!(err.contains("--skip-bad"), "{err}");
        let s = scan(&path, &n, &[], &skip_bad()).unwrap();
        assert_eq!((s.format, s.requests), (Format::AccessLog, 2));
        assert_eq!(s.skipped.get("method POST"), Some(&1));
        assert_eq!(s.skipped.get("malformed"), Some(&1));

        let mut src = Source::open(&path, s.format, n, None, None).unwrap();
        let mut req = Request::new();
        for _ in 0..4 {
            assert!(src.next(&mut req));
            assert_eq!(req.target, b"/apache_pb.gif");
        }
        assert_eq!(src.skipped().get("method POST"), Some(&2));
    }

    #[test]
    fn rejects_lines_longer_than_64_kib_by_file_and_line() {
        let n = normalizer("gopher://127.0.0.1:70/");
        let long = format!("/a\n/b\n/{}\n", "x".repeat(MAX_LINE));
        let path = temp_file("long.txt", &long);
        let err = scan(&path, &n, &[], &ReadOptions::default()).unwrap_err();
        assert!(
            err.ends_with("long.txt:3: line longer than 64 KiB (is it a requests file?)"),
            "{err}"
        );
        let err = scan(Path::new("/dev/zero"), &n, &[], &ReadOptions::default()).unwrap_err();
        assert_eq!(
            err,
            "/dev/zero:1: line longer than 64 KiB (is it a requests file?)"
        );
        let fits = format!("/{}\n", "x".repeat(MAX_LINE - 2));
        let path = temp_file("fits.txt", &fits);
        assert_eq!(
            scan(&path, &n, &[], &ReadOptions::default())
                .unwrap()
                .requests,
            1
        );
    }

    #[test]
    fn rejects_empty_and_missing_files() {
        let n = normalizer("gopher://127.0.0.1:70/");
        let empty = temp_file("empty.txt", "\n\n");
        let err = scan(&empty, &n, &[], &ReadOptions::default()).unwrap_err();
        assert!(
            err.starts_with("requests file ") && err.contains("empty.txt has no requests"),
            "{err}"
        );
        let err = scan(
            Path::new("/nonexistent/req.txt"),
            &n,
            &[],
            &ReadOptions::default(),
        )
        .unwrap_err();
        assert!(
            err.starts_with("cannot read requests file /nonexistent/req.txt: "),
            "{err}"
        );
    }

    /// A log of `lines` Combined lines made as it is read, each with its own client, time,
    /// path and size, so that nothing in it repeats for a reader to keep. Digits are written
    /// into a fixed line: formatting each line anew would make the test ten times longer.
    struct GeneratedLog {
        lines: u64,
        made: u64,
        buf: Vec<u8>,
        pos: usize,
    }

    const GENERATED: &[u8] = b"10.0.000.000 - - [24/Nov/2026:00:00:00 +0000] \"GET /f/00000000 HTTP/1.1\" 200 0000 \"-\" \"ua\" 0.000\n";

    /// Writes `value` as `width` decimal digits ending before `end`.
    fn put(buf: &mut [u8], end: usize, width: usize, mut value: u64) {
        for b in buf[end - width..end].iter_mut().rev() {
            *b = b'0' + (value % 10) as u8;
            value /= 10;
        }
    }

    impl GeneratedLog {
        fn new(lines: u64) -> GeneratedLog {
            GeneratedLog {
                lines,
                made: 0,
                buf: GENERATED.to_vec(),
                pos: GENERATED.len(),
            }
        }

        fn make(&mut self, i: u64) {
            let b = &mut self.buf;
            put(b, 8, 3, (i >> 8) & 255);
            put(b, 12, 3, i & 255);
            put(b, 32, 2, (i / 3600) % 24);
            put(b, 35, 2, (i / 60) % 60);
            put(b, 38, 2, i % 60);
            put(b, 62, 8, i);
            let status = if i.is_multiple_of(10) { 404 } else { 200 };
            put(b, 76, 3, status);
            put(b, 81, 4, i % 5000);
            put(b, 96, 3, i % 1000);
        }
    }

    impl Read for GeneratedLog {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.pos == self.buf.len() {
                if self.made == self.lines {
                    return Ok(0);
                }
                self.make(self.made);
                self.pos = 0;
                self.made += 1;
            }
            let n = out.len().min(self.buf.len() - self.pos);
            out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    #[test]
    fn generated_lines_are_combined_lines() {
        let mut log = GeneratedLog::new(20);
        log.make(12_345);
        let line = strip_eol(&log.buf);
        let mut logged = Logged::default();
        assert_eq!(
            read_clf(line, &mut logged),
            Some(&b"GET /f/00012345 HTTP/1.1"[..])
        );
        assert_eq!(logged.client, b"10.0.048.057");
        assert_eq!((logged.status, logged.bytes), (Some(200), Some(2345)));
        assert_eq!(
            logged.time,
            Some(1_795_478_400.0 + 3.0 * 3600.0 + 25.0 * 60.0 + 45.0)
        );
        assert!(line.ends_with(b"\"ua\" 0.345"));
    }

    #[test]
    fn ten_million_lines_stream_through_one_line_buffer() {
        let lines = 10_000_000;
        let log = GeneratedLog::new(lines);
        let n = normalizer("http://127.0.0.1:80/");
        let reading = ReadOptions {
            sample: Some(Sample::Every(1000)),
            ..ReadOptions::default()
        };
        let reader = std::io::BufReader::with_capacity(1 << 16, log);
        let Ok(scan) = scan_lines(reader, Format::AccessLog, &n, &[], &reading) else {
            panic!("the generated log scans");
        };
        assert_eq!((scan.lines, scan.requests), (lines, lines / 1000));
        assert_eq!(scan.sampled_out, lines - lines / 1000);
        // What the pass keeps grows with the kinds of status, not with lines, clients or paths.
        assert_eq!(scan.log.statuses, BTreeMap::from([(404, lines / 1000)]));
        assert!(scan.skipped.is_empty());
    }

    #[test]
    fn samples_every_kth_line_or_a_time_window() {
        let log: String = (0..20)
            .map(|i| {
                format!(
                    "10.0.0.{} - - [24/Nov/2026:16:00:{i:02} +0000] \"GET /{i} HTTP/1.1\" 200 10\n",
                    i % 2
                )
            })
            .collect();
        let path = temp_file("sampled.log", &log);
        let n = normalizer("http://127.0.0.1:80/");
        let targets = |sample: Sample, count: usize| {
            let reading = ReadOptions {
                sample: Some(sample),
                ..ReadOptions::default()
            };
            let s = scan(&path, &n, &[], &reading).unwrap();
            let mut src = Source::open(&path, s.format, n.clone(), None, Some(sample)).unwrap();
            let mut req = Request::new();
            let got: Vec<String> = (0..count)
                .map(|_| {
                    assert!(src.next(&mut req));
                    String::from_utf8(req.target.clone()).unwrap()
                })
                .collect();
            (s.requests, s.sampled_out, s.log.first, got)
        };
        assert_eq!(Sample::parse("5"), Some(Sample::Every(5)));
        let (requests, out, _, got) = targets(Sample::Every(7), 4);
        assert_eq!((requests, out), (3, 17));
        assert_eq!(got, ["/0", "/7", "/14", "/0"]);
        let window = Sample::parse("5s..8s").unwrap();
        let (requests, out, first, got) = targets(window, 4);
        assert_eq!((requests, out, first), (3, 17, Some(1_795_536_005.0)));
        assert_eq!(got, ["/5", "/6", "/7", "/5"]);
        assert_eq!(Sample::parse("8s..5s"), None);
        let list = temp_file("sampled-list.txt", "/a\n/b\n");
        let reading = ReadOptions {
            sample: Some(Sample::Every(2)),
            ..ReadOptions::default()
        };
        let err = scan(&list, &n, &[], &reading).unwrap_err();
        assert!(err.contains("--sample needs an access log"), "{err}");
    }

    #[test]
    fn reads_json_and_apache_logs_with_their_fields() {
        let n = normalizer("http://127.0.0.1:80/");
        let json = temp_file(
            "access.json",
            "{\"remote_addr\":\"192.0.2.1\",\"request\":\"GET /j HTTP/1.1\",\"status\":200,\"body_bytes_sent\":100,\"request_time\":\"0.500\"}\n\
             {\"remote_addr\":\"192.0.2.2\",\"method\":\"POST\",\"uri\":\"/p\",\"status\":201}\n\
             not json\n",
        );
        let err = scan(&json, &n, &[], &ReadOptions::default()).unwrap_err();
        assert!(
            err.contains("access.json:3: malformed json-log line"),
            "{err}"
        );
        let s = scan(&json, &n, &[], &skip_bad()).unwrap();
        assert_eq!((s.format, s.requests), (Format::Json, 1));
        assert_eq!(s.skipped.get("method POST"), Some(&1));
        assert_eq!((s.log.bytes, s.log.duration_s), (100, 0.5));

        let apache = temp_file(
            "apache.log",
            "192.0.2.1 - - [24/Nov/2026:16:00:00 +0000] \"GET /a HTTP/1.1\" 200 4096 250000\n\
             192.0.2.1 - - [24/Nov/2026:16:00:20 +0000] \"GET /b HTTP/1.1\" 404 300 1000\n",
        );
        let reading = ReadOptions {
            log_format: Some(LogFormat::parse(r#"%h %l %u %t "%r" %>s %O %D"#).unwrap()),
            ..ReadOptions::default()
        };
        let template = normalizer_with("http://127.0.0.1:80/", &reading);
        let s = scan(&apache, &template, &[], &reading).unwrap();
        assert_eq!((s.format, s.requests), (Format::Custom, 2));
        assert_eq!(s.log.statuses, BTreeMap::from([(200, 1), (404, 1)]));
        assert_eq!((s.log.bytes, s.log.with_duration), (4396, 2));
        assert!((s.log.duration_s - 0.251).abs() < 1e-9);
        assert_eq!(s.log.last.zip(s.log.first).map(|(l, f)| l - f), Some(20.0));
        let mut src = Source::open(&apache, s.format, template, None, None).unwrap();
        let mut req = Request::new();
        assert!(src.next(&mut req));
        assert_eq!(
            (req.target.as_slice(), req.logged.duration),
            (&b"/a"[..], Some(0.25))
        );
        let err = scan(
            &json,
            &normalizer_with("http://127.0.0.1:80/", &reading),
            &[],
            &reading,
        )
        .unwrap_err();
        assert!(err.contains("does not match the --log-format"), "{err}");
    }

    #[test]
    fn schedules_requests_at_their_logged_offsets_never_backwards() {
        let log: String = [10, 12, 11, 20]
            .iter()
            .map(|s| {
                format!("h - - [24/Nov/2026:16:00:{s:02} +0000] \"GET /{s} HTTP/1.1\" 200 1\n")
            })
            .collect();
        let path = temp_file("scheduled.log", &log);
        let n = normalizer("http://127.0.0.1:80/");
        let mut src = Source::open(&path, Format::AccessLog, n, None, None).unwrap();
        let mut req = Request::new();
        let at: Vec<Option<f64>> = (0..5)
            .map(|_| {
                assert!(src.next(&mut req));
                req.at
            })
            .collect();
        assert_eq!(at, [Some(0.0), Some(2.0), Some(2.0), Some(10.0), Some(0.0)]);
    }
}
