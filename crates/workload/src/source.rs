//! Where requests come from: the `--url` alone, a plain list, or an access log, read as a stream
//! (constant memory whatever the file's size) and cycled until a phase has sent enough.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek};
use std::path::Path;

use regex::bytes::Regex;

use crate::endpoint::{Endpoint, Protocol};

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
}

impl Request {
    pub fn new() -> Request {
        Request {
            method: Method::Get,
            target: Vec::with_capacity(256),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One selector, path or URL a line.
    List,
    /// Apache/nginx Common or Combined Log Format.
    AccessLog,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::List => "list",
            Format::AccessLog => "access-log",
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
}

impl Normalizer {
    pub fn new(endpoint: &Endpoint) -> Normalizer {
        Normalizer {
            protocol: endpoint.protocol,
            authority: endpoint.authority.clone(),
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

    fn classify(&self, format: Format, line: &[u8], out: &mut Vec<u8>) -> Line {
        match format {
            Format::List => {
                let l = trim(line);
                if l.is_empty() {
                    return Line::Blank;
                }
                match self.normalize(l, out) {
                    Ok(()) => Line::Request(Method::Get),
                    Err(why) => Line::Malformed(why),
                }
            }
            Format::AccessLog => {
                if trim(line).is_empty() {
                    return Line::Blank;
                }
                let Some(request) = clf_request(line) else {
                    return Line::Malformed(
                        "not in Common or Combined Log Format (HOST IDENT USER [DATE] \"REQUEST\" STATUS BYTES)",
                    );
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
                match self.normalize(uri, out) {
                    Ok(()) => Line::Request(method),
                    Err(_) => Line::Skip("unparsable request".into()),
                }
            }
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

/// The quoted request field of a Common/Combined Log Format line:
/// `HOST IDENT USER [DATE] "REQUEST" STATUS BYTES ...`.
fn clf_request(line: &[u8]) -> Option<&[u8]> {
    let mut fields = line.splitn(4, |&b| b == b' ');
    let (host, _ident, _user, rest) = (
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
    );
    if host.is_empty() || !rest.starts_with(b"[") {
        return None;
    }
    let close = rest.iter().position(|&b| b == b']')?;
    let after = rest[close + 1..].strip_prefix(b" \"")?;
    // The request ends at the quote followed by the status: a quote inside the request (logged
    // unescaped by some servers) does not end it.
    let mut i = 0;
    while let Some(q) = after[i..].iter().position(|&b| b == b'"') {
        let end = i + q;
        let tail = &after[end + 1..];
        if tail.len() >= 4
            && tail[0] == b' '
            && tail[1..4].iter().all(u8::is_ascii_digit)
            && (tail.len() == 4 || tail[4] == b' ')
        {
            return Some(&after[..end]);
        }
        i = end + 1;
    }
    None
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

/// Opens the file and reads its first non-blank line to tell a log from a list.
fn detect(path: &Path) -> Result<Format, String> {
    let mut reader = BufReader::new(File::open(path).map_err(|e| cannot_read(path, e))?);
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        number += 1;
        if !read_line(&mut reader, &mut line).map_err(|e| line_error(path, number, e))? {
            return Ok(Format::List);
        }
        if !trim(&line).is_empty() {
            return Ok(if clf_request(strip_eol(&line)).is_some() {
                Format::AccessLog
            } else {
                Format::List
            });
        }
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

/// What one pass over a requests file found; plan() makes it before any server starts.
#[derive(Debug, Clone)]
pub struct Scan {
    pub format: Format,
    pub lines: u64,
    pub requests: u64,
    pub skipped: BTreeMap<String, u64>,
    /// Requests matching each `--class`, in the order given.
    pub class_requests: Vec<u64>,
    /// Gopher requests written as URL paths, `/TYPE/SELECTOR` (`/0/about.txt`): the item type
    /// belongs to the URL, not the selector, so servers answer them with an error item.
    pub typed_paths: u64,
}

/// A gopher request that looks like a URL path with its item type (RFC 4266), `/0/about.txt`:
/// one item-type character between slashes.
fn is_typed_path(target: &[u8]) -> bool {
    const ITEM_TYPES: &[u8] = b"0123456789+gIThis:;<dpw";
    matches!(target, [b'/', t, b'/', ..] if ITEM_TYPES.contains(t))
}

/// Reads the whole file once: detects its format, checks every line, counts requests per class.
pub fn scan(
    path: &Path,
    normalizer: &Normalizer,
    classes: &[Regex],
    skip_bad: bool,
) -> Result<Scan, String> {
    let shown = path.display();
    let format = detect(path)?;
    let file = File::open(path).map_err(|e| cannot_read(path, e))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut scan = Scan {
        format,
        lines: 0,
        requests: 0,
        skipped: BTreeMap::new(),
        class_requests: vec![0; classes.len()],
        typed_paths: 0,
    };
    let gopher = normalizer.protocol == Protocol::Gopher;
    let mut line = Vec::with_capacity(1024);
    let mut target = Vec::with_capacity(1024);
    while read_line(&mut reader, &mut line).map_err(|e| line_error(path, scan.lines + 1, e))? {
        scan.lines += 1;
        match normalizer.classify(format, strip_eol(&line), &mut target) {
            Line::Request(_) => {
                scan.requests += 1;
                scan.typed_paths += u64::from(gopher && is_typed_path(&target));
                for (count, class) in scan.class_requests.iter_mut().zip(classes) {
                    *count += u64::from(class.is_match(&target));
                }
            }
            Line::Blank => {}
            Line::Skip(reason) => *scan.skipped.entry(reason).or_default() += 1,
            Line::Malformed(_) if skip_bad => {
                *scan.skipped.entry("malformed".into()).or_default() += 1
            }
            Line::Malformed(why) => {
                return Err(format!(
                    "{shown}:{}: malformed {} line: {why} (fix the line or pass --skip-bad)",
                    scan.lines,
                    format.name()
                ))
            }
        }
    }
    if scan.requests == 0 {
        let detail = if scan.lines == 0 {
            "it is empty".to_string()
        } else {
            format!("none of its {} lines is a request to replay", scan.lines)
        };
        return Err(format!("requests file {shown} has no requests: {detail}"));
    }
    Ok(scan)
}

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
    ) -> std::io::Result<Source> {
        Ok(Source::File(FileSource {
            reader: BufReader::with_capacity(1 << 16, File::open(path)?),
            format,
            normalizer,
            filter,
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
    fn next(&mut self, req: &mut Request) -> bool {
        loop {
            match read_line(&mut self.reader, &mut self.line) {
                Ok(false) => {
                    if !self.produced_this_pass || self.reader.rewind().is_err() {
                        return false;
                    }
                    self.produced_this_pass = false;
                    continue;
                }
                Ok(true) => {}
                Err(_) => return false,
            }
            match self
                .normalizer
                .classify(self.format, strip_eol(&self.line), &mut req.target)
            {
                Line::Request(method) => {
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
        Normalizer::new(&Endpoint::parse(url).unwrap())
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

    const COMBINED: &str = r#"127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)""#;

    #[test]
    fn parses_log_lines() {
        assert_eq!(
            clf_request(COMBINED.as_bytes()),
            Some(&b"GET /apache_pb.gif HTTP/1.0"[..])
        );
        let common = br#"::1 - frank [10/Oct/2000:13:55:36 -0700] "HEAD /a?b="c" HTTP/1.1" 304 -"#;
        assert_eq!(clf_request(common), Some(&br#"HEAD /a?b="c" HTTP/1.1"#[..]));
        assert_eq!(clf_request(b"/just/a/path"), None);
        assert_eq!(clf_request(b"1.2.3.4 - - [date] \"GET / HTTP/1.0\""), None);

        let n = normalizer("http://127.0.0.1:8080/");
        let mut out = Vec::new();
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
        assert_eq!(out, b"/x?y");
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
        let scan = scan(&path, &n, &[Regex::new("^/[ab]$").unwrap()], false).unwrap();
        assert_eq!(
            (scan.format, scan.lines, scan.requests),
            (Format::List, 4, 3)
        );
        assert_eq!(scan.class_requests, vec![2]);

        let mut src = Source::open(&path, scan.format, n.clone(), None).unwrap();
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
            Source::open(&path, scan.format, n, Some(Regex::new("c").unwrap())).unwrap();
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
        let err = scan(&path, &n, &[], false).unwrap_err();
        assert!(
            err.contains("access.log:3: malformed access-log line"),
            "{err}"
        );
        assert!(err.contains("--skip-bad"), "{err}");
        let s = scan(&path, &n, &[], true).unwrap();
        assert_eq!((s.format, s.requests), (Format::AccessLog, 2));
        assert_eq!(s.skipped.get("method POST"), Some(&1));
        assert_eq!(s.skipped.get("malformed"), Some(&1));

        let mut src = Source::open(&path, s.format, n, None).unwrap();
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
        let err = scan(&path, &n, &[], false).unwrap_err();
        assert!(
            err.ends_with("long.txt:3: line longer than 64 KiB (is it a requests file?)"),
            "{err}"
        );
        let err = scan(Path::new("/dev/zero"), &n, &[], false).unwrap_err();
        assert_eq!(
            err,
            "/dev/zero:1: line longer than 64 KiB (is it a requests file?)"
        );
        let fits = format!("/{}\n", "x".repeat(MAX_LINE - 2));
        let path = temp_file("fits.txt", &fits);
        assert_eq!(scan(&path, &n, &[], false).unwrap().requests, 1);
    }

    #[test]
    fn rejects_empty_and_missing_files() {
        let n = normalizer("gopher://127.0.0.1:70/");
        let empty = temp_file("empty.txt", "\n\n");
        let err = scan(&empty, &n, &[], false).unwrap_err();
        assert!(
            err.starts_with("requests file ") && err.contains("empty.txt has no requests"),
            "{err}"
        );
        let err = scan(Path::new("/nonexistent/req.txt"), &n, &[], false).unwrap_err();
        assert!(
            err.starts_with("cannot read requests file /nonexistent/req.txt: "),
            "{err}"
        );
    }
}
