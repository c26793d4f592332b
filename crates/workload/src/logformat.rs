//! What an access-log line says about its request beyond the request itself: when it came, from
//! whom, its status, the bytes sent and how long it took. Three ways of reading a line:
//! Common/Combined Log Format (extra trailing fields allowed), a template given with
//! `--log-format` in the server's own syntax (an nginx `log_format` string with `$variables`, an
//! Apache `LogFormat` string with `%directives`), and JSON lines with named fields.

use serde_json::Value;

/// The fields of one log line; each is absent when the line (or its format) has none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Logged {
    /// Unix time the request came, in seconds (as logged: some logs write when it ended).
    pub time: Option<f64>,
    /// The client's address as logged; empty when not logged.
    pub client: Vec<u8>,
    pub status: Option<u16>,
    /// Bytes the server sent: the body alone (`$body_bytes_sent`, `%b`) or with the headers
    /// (`$bytes_sent`, `%O`).
    pub bytes: Option<u64>,
    /// How long the server took over the request, in seconds.
    pub duration: Option<f64>,
}

impl Logged {
    fn clear(&mut self) {
        self.time = None;
        self.client.clear();
        self.status = None;
        self.bytes = None;
        self.duration = None;
    }
}

/// How a time field is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimeKind {
    /// `10/Oct/2000:13:55:36 -0700` (nginx `$time_local`).
    Clf,
    /// `[10/Oct/2000:13:55:36 -0700]` (Apache `%t`).
    ClfBracketed,
    /// `2000-10-10T13:55:36-07:00` (nginx `$time_iso8601`).
    Iso8601,
    /// Seconds since the epoch, with or without a fraction (nginx `$msec`, Apache `%{sec}t`).
    Epoch,
    /// Milliseconds since the epoch (Apache `%{msec}t`).
    EpochMillis,
    /// Microseconds since the epoch (Apache `%{usec}t`).
    EpochMicros,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Time(TimeKind),
    Client,
    /// `METHOD URI PROTOCOL`.
    Request,
    Method,
    /// The path, with or without its query.
    Uri,
    /// Apache `%q`: `?query` or nothing, appended to the path.
    Query,
    Status,
    /// A byte count where `-` means none sent.
    Bytes,
    /// The request's duration in seconds multiplied by this many (1 for seconds, 1e6 for µs).
    Duration(u32),
    Ignore,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(Vec<u8>),
    Field(Field),
}

/// A `--log-format` template, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<Piece>,
    /// The time logged is when the request ended (nginx writes its log line then, Apache's
    /// `%t` is when the request came): the start is that time less the request time.
    time_at_end: bool,
    /// The text given, for error messages.
    pub text: String,
}

/// The request line pieces a template line holds, kept until the whole line matched.
#[derive(Default)]
struct Parts<'a> {
    request: Option<&'a [u8]>,
    method: Option<&'a [u8]>,
    uri: Option<&'a [u8]>,
    query: Option<&'a [u8]>,
}

impl Template {
    /// Compiles an nginx `log_format` string (`$remote_addr - $remote_user [$time_local] ...`),
    /// an Apache `LogFormat` string (`%h %l %u %t \"%r\" %>s %O %D`), either pasted whole from
    /// the configuration (`log_format main '...' '...';`, `LogFormat "..." combined`).
    pub fn parse(text: &str) -> Result<Template, String> {
        let body = config_string(text.trim());
        let nginx = body.contains('$') && !looks_apache(&body);
        let pieces = if nginx {
            nginx_pieces(&body)?
        } else {
            apache_pieces(&body)?
        };
        let fields = || {
            pieces.iter().filter_map(|p| match p {
                Piece::Field(f) => Some(*f),
                Piece::Literal(_) => None,
            })
        };
        if !fields().any(|f| matches!(f, Field::Request | Field::Uri)) {
            return Err(format!(
                "--log-format \"{text}\" logs no request: it needs $request or $request_uri (nginx), %r or %U (Apache)"
            ));
        }
        for pair in pieces.windows(2) {
            if let [Piece::Field(a), Piece::Field(b)] = pair {
                if *b != Field::Query {
                    return Err(format!(
                        "--log-format \"{text}\": two fields with nothing between them ({a:?} then {b:?}) cannot be told apart"
                    ));
                }
            }
        }
        Ok(Template {
            pieces,
            time_at_end: nginx,
            text: text.to_string(),
        })
    }

    /// Reads `line` into `logged`, returning the request line (`METHOD URI`) written into
    /// `request`; None when the line does not fit the template.
    pub fn read(&self, line: &[u8], logged: &mut Logged, request: &mut Vec<u8>) -> Option<()> {
        logged.clear();
        let mut parts = Parts::default();
        if !match_pieces(&self.pieces, line, logged, &mut parts) {
            return None;
        }
        if let (true, Some(t), Some(d)) = (self.time_at_end, logged.time, logged.duration) {
            logged.time = Some(t - d);
        }
        request.clear();
        match (parts.request, parts.uri) {
            (Some(r), _) => request.extend_from_slice(r),
            (None, Some(uri)) => {
                request.extend_from_slice(parts.method.unwrap_or(b"GET"));
                request.push(b' ');
                request.extend_from_slice(uri);
                request.extend_from_slice(parts.query.unwrap_or_default());
            }
            (None, None) => return None,
        }
        Some(())
    }
}

/// Apache's directives start with `%` followed by a letter, `{`, `>` or `<`; an nginx template
/// may hold a `%` too (in a literal), but not in that form before its first `$`.
fn looks_apache(body: &str) -> bool {
    let b = body.as_bytes();
    b.windows(2)
        .any(|w| w[0] == b'%' && (w[1].is_ascii_alphabetic() || b"{<>".contains(&w[1])))
}

/// The format string of a pasted configuration line, or the text itself: `log_format NAME
/// [escape=...] 'A' 'B';` joins its quoted parts, `LogFormat "..." NAME` takes its quoted
/// string with `\"` unescaped.
fn config_string(text: &str) -> String {
    let quoted = |s: &str| -> Vec<String> {
        let mut parts = Vec::new();
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '\'' && c != '"' {
                continue;
            }
            let mut part = String::new();
            while let Some(d) = chars.next() {
                match d {
                    '\\' => {
                        if let Some(e) = chars.next() {
                            part.push(e);
                        }
                    }
                    d if d == c => break,
                    d => part.push(d),
                }
            }
            parts.push(part);
        }
        parts
    };
    if let Some(rest) = text.strip_prefix("log_format ") {
        quoted(rest).concat()
    } else if let Some(rest) = text.strip_prefix("LogFormat ") {
        quoted(rest).into_iter().next().unwrap_or_default()
    } else {
        text.replace("\\\"", "\"")
    }
}

fn push_literal(pieces: &mut Vec<Piece>, text: &[u8]) {
    if let Some(Piece::Literal(l)) = pieces.last_mut() {
        l.extend_from_slice(text);
    } else if !text.is_empty() {
        pieces.push(Piece::Literal(text.to_vec()));
    }
}

/// Adds the text of `b` from `i` to the next `marker` (or the end) as a literal; where it ended.
fn literal_until(pieces: &mut Vec<Piece>, b: &[u8], i: usize, marker: u8) -> usize {
    let end = b[i..]
        .iter()
        .position(|&c| c == marker)
        .map_or(b.len(), |p| i + p);
    push_literal(pieces, &b[i..end]);
    end
}

fn nginx_field(name: &str) -> Field {
    match name {
        "remote_addr" | "realip_remote_addr" => Field::Client,
        "time_local" => Field::Time(TimeKind::Clf),
        "time_iso8601" => Field::Time(TimeKind::Iso8601),
        "msec" => Field::Time(TimeKind::Epoch),
        "request" => Field::Request,
        "request_method" => Field::Method,
        "request_uri" | "uri" => Field::Uri,
        "status" => Field::Status,
        "body_bytes_sent" | "bytes_sent" => Field::Bytes,
        "request_time" => Field::Duration(1),
        _ => Field::Ignore,
    }
}

fn nginx_pieces(body: &str) -> Result<Vec<Piece>, String> {
    let b = body.as_bytes();
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'$' {
            i = literal_until(&mut pieces, b, i, b'$');
            continue;
        }
        let (name, next) = if b.get(i + 1) == Some(&b'{') {
            let close = body[i..]
                .find('}')
                .ok_or_else(|| format!("--log-format: unclosed ${{ at \"{}\"", &body[i..]))?;
            (&body[i + 2..i + close], i + close + 1)
        } else {
            let len = b[i + 1..]
                .iter()
                .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
                .unwrap_or(b.len() - i - 1);
            (&body[i + 1..i + 1 + len], i + 1 + len)
        };
        if name.is_empty() {
            push_literal(&mut pieces, b"$");
        } else {
            pieces.push(Piece::Field(nginx_field(name)));
        }
        i = next;
    }
    Ok(pieces)
}

/// One Apache directive: its letter and its `{argument}`.
fn apache_field(letter: u8, arg: Option<&str>) -> Result<Field, String> {
    Ok(match (letter, arg) {
        (b'h' | b'a', _) => Field::Client,
        (b't', None) => Field::Time(TimeKind::ClfBracketed),
        (b't', Some("sec")) => Field::Time(TimeKind::Epoch),
        (b't', Some("msec")) => Field::Time(TimeKind::EpochMillis),
        (b't', Some("usec")) => Field::Time(TimeKind::EpochMicros),
        (b'r', _) => Field::Request,
        (b'm', _) => Field::Method,
        (b'U', _) => Field::Uri,
        (b'q', _) => Field::Query,
        (b's', _) => Field::Status,
        (b'b' | b'B' | b'O', _) => Field::Bytes,
        (b'D', _) | (b'T', Some("us")) => Field::Duration(1_000_000),
        (b'T', Some("ms")) => Field::Duration(1000),
        (b'T', None | Some("s")) => Field::Duration(1),
        (b'T', Some(unit)) => return Err(format!("--log-format: %{{{unit}}}T: unknown unit")),
        (c, _) if c.is_ascii_alphabetic() => Field::Ignore,
        (c, _) => return Err(format!("--log-format: unknown directive %{}", c as char)),
    })
}

fn apache_pieces(body: &str) -> Result<Vec<Piece>, String> {
    let b = body.as_bytes();
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            i = literal_until(&mut pieces, b, i, b'%');
            continue;
        }
        i += 1;
        if b.get(i) == Some(&b'%') {
            push_literal(&mut pieces, b"%");
            i += 1;
            continue;
        }
        // Conditions (`%400,501{...}i`, `%!200...`) and `<`/`>` (original or final request)
        // change when and which request a field is logged for, not how it is written.
        while i < b.len() && (b"<>!,".contains(&b[i]) || b[i].is_ascii_digit()) {
            i += 1;
        }
        let mut arg = None;
        if b.get(i) == Some(&b'{') {
            let close = body[i..]
                .find('}')
                .ok_or_else(|| format!("--log-format: unclosed %{{ at \"{}\"", &body[i..]))?;
            arg = Some(&body[i + 1..i + close]);
            i += close + 1;
        }
        let letter = *b
            .get(i)
            .ok_or_else(|| "--log-format: ends in the middle of a % directive".to_string())?;
        pieces.push(Piece::Field(apache_field(letter, arg)?));
        i += 1;
    }
    Ok(pieces)
}

/// Matches `pieces` against the whole of `line`. A field ends where the next literal
/// occurs; when several occurrences could end it (a quote inside a logged request), the first
/// one with which the rest of the line matches wins.
fn match_pieces<'a>(
    pieces: &[Piece],
    line: &'a [u8],
    logged: &mut Logged,
    parts: &mut Parts<'a>,
) -> bool {
    match pieces {
        [] => true,
        [Piece::Literal(l), rest @ ..] => line
            .strip_prefix(l.as_slice())
            .is_some_and(|tail| match_pieces(rest, tail, logged, parts)),
        [Piece::Field(f), Piece::Field(Field::Query), rest @ ..] => {
            // `%U%q`: the query starts at the first `?` of the path.
            let end = match rest.first() {
                Some(Piece::Literal(l)) => find(line, l),
                _ => Some(line.len()),
            };
            let Some(end) = end else { return false };
            let value = &line[..end];
            let q = value.iter().position(|&c| c == b'?').unwrap_or(value.len());
            set_field(*f, &value[..q], logged, parts)
                && set_field(Field::Query, &value[q..], logged, parts)
                && match_pieces(rest, &line[end..], logged, parts)
        }
        [Piece::Field(f)] => set_field(*f, trailing_value(*f, line), logged, parts),
        [Piece::Field(f), Piece::Literal(l), ..] => {
            let mut from = 0;
            while let Some(at) = find(&line[from..], l) {
                let end = from + at;
                if set_field(*f, &line[..end], logged, parts)
                    && match_pieces(&pieces[1..], &line[end..], logged, parts)
                {
                    return true;
                }
                from = end + 1;
            }
            false
        }
        [Piece::Field(_), Piece::Field(_), ..] => false,
    }
}

/// The value of a template's last field: the rest of the line, but for a number, which stops
/// at the first space so that fields logged after it do not spoil it.
fn trailing_value(f: Field, line: &[u8]) -> &[u8] {
    match f {
        Field::Status | Field::Bytes | Field::Duration(_) => {
            let end = line.iter().position(|&c| c == b' ').unwrap_or(line.len());
            &line[..end]
        }
        _ => line,
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Stores one field's value; false when it cannot be that field (a status that is no number).
fn set_field<'a>(f: Field, value: &'a [u8], logged: &mut Logged, parts: &mut Parts<'a>) -> bool {
    match f {
        Field::Time(kind) => {
            logged.time = parse_time(kind, value);
            logged.time.is_some() || value == b"-"
        }
        Field::Client => {
            logged.client.clear();
            logged.client.extend_from_slice(value);
            !value.is_empty() && !value.contains(&b' ')
        }
        Field::Request => {
            parts.request = Some(value);
            true
        }
        Field::Method => {
            parts.method = Some(value);
            !value.is_empty() && !value.contains(&b' ')
        }
        Field::Uri => {
            parts.uri = Some(value);
            !value.is_empty() && !value.contains(&b' ')
        }
        Field::Query => {
            parts.query = Some(value);
            true
        }
        Field::Status => {
            logged.status = parse_u64(value).and_then(|s| u16::try_from(s).ok());
            logged.status.is_some()
        }
        Field::Bytes => {
            logged.bytes = if value == b"-" {
                Some(0)
            } else {
                parse_u64(value)
            };
            logged.bytes.is_some()
        }
        Field::Duration(per_second) => {
            logged.duration = parse_f64(value).map(|d| d / f64::from(per_second));
            logged.duration.is_some() || value == b"-"
        }
        Field::Ignore => true,
    }
}

fn parse_u64(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

fn parse_f64(value: &[u8]) -> Option<f64> {
    if value.is_empty() || !value.iter().all(|c| c.is_ascii_digit() || *c == b'.') {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn number(s: &str) -> Option<i64> {
    (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// `+HHMM`, `-HH:MM` or `Z` as seconds east of UTC.
fn parse_offset(s: &str) -> Option<i64> {
    if s == "Z" {
        return Some(0);
    }
    let sign = match s.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits = s[1..].replace(':', "");
    if digits.len() != 4 {
        return None;
    }
    Some(sign * (number(&digits[..2])? * 3600 + number(&digits[2..])? * 60))
}

/// `DD/Mon/YYYY:HH:MM:SS +ZZZZ`.
fn parse_clf_time(s: &str) -> Option<f64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (datetime, offset) = s.split_once(' ')?;
    let mut p = datetime.splitn(3, '/');
    let (day, month, rest) = (p.next()?, p.next()?, p.next()?);
    let month = MONTHS.iter().position(|m| *m == month)? as i64 + 1;
    let mut t = rest.split(':');
    let (year, h, m, sec) = (t.next()?, t.next()?, t.next()?, t.next()?);
    let days = days_from_civil(number(year)?, month, number(day)?);
    let secs = days * 86_400 + number(h)? * 3600 + number(m)? * 60 + number(sec)?;
    Some((secs - parse_offset(offset)?) as f64)
}

/// `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`.
fn parse_iso_time(s: &str) -> Option<f64> {
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-');
    let (y, mo, day) = (number(d.next()?)?, number(d.next()?)?, number(d.next()?)?);
    let zone_at = time.find(['Z', '+', '-'])?;
    let (clock, zone) = time.split_at(zone_at);
    let mut c = clock.split(':');
    let (h, m, sec) = (number(c.next()?)?, number(c.next()?)?, c.next()?);
    let (whole, frac) = sec.split_once('.').unwrap_or((sec, ""));
    let frac = if frac.is_empty() {
        0.0
    } else {
        format!("0.{frac}").parse::<f64>().ok()?
    };
    let secs = days_from_civil(y, mo, day) * 86_400 + h * 3600 + m * 60 + number(whole)?;
    Some((secs - parse_offset(zone)?) as f64 + frac)
}

fn parse_time(kind: TimeKind, value: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(value).ok()?;
    match kind {
        TimeKind::Clf => parse_clf_time(s),
        TimeKind::ClfBracketed => parse_clf_time(s.strip_prefix('[')?.strip_suffix(']')?),
        TimeKind::Iso8601 => parse_iso_time(s),
        TimeKind::Epoch => parse_f64(value),
        TimeKind::EpochMillis => parse_f64(value).map(|t| t / 1e3),
        TimeKind::EpochMicros => parse_f64(value).map(|t| t / 1e6),
    }
}

/// The fields of a Common/Combined Log Format line, `HOST IDENT USER [DATE] "REQUEST" STATUS
/// BYTES ...`, with its request line; anything after BYTES (referer, user agent, fields a
/// server adds) is passed over.
pub fn read_clf<'a>(line: &'a [u8], logged: &mut Logged) -> Option<&'a [u8]> {
    logged.clear();
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
    let date = &rest[1..close];
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
            logged.client.extend_from_slice(host);
            logged.time = parse_time(TimeKind::Clf, date);
            logged.status = parse_u64(&tail[1..4]).map(|s| s as u16);
            let bytes = tail[4..].strip_prefix(b" ").unwrap_or_default();
            let bytes = &bytes[..bytes.iter().position(|&c| c == b' ').unwrap_or(bytes.len())];
            logged.bytes = match bytes {
                b"-" => Some(0),
                b => parse_u64(b),
            };
            return Some(&after[..end]);
        }
        i = end + 1;
    }
    None
}

/// JSON field names servers and log shippers commonly use, by what they hold.
const JSON_TIME: [&str; 6] = [
    "time",
    "time_local",
    "time_iso8601",
    "timestamp",
    "@timestamp",
    "msec",
];
const JSON_CLIENT: [&str; 5] = [
    "remote_addr",
    "client",
    "client_ip",
    "remote_ip",
    "remote_host",
];
const JSON_STATUS: [&str; 2] = ["status", "status_code"];
const JSON_BYTES: [&str; 5] = [
    "bytes_sent",
    "body_bytes_sent",
    "bytes",
    "size",
    "response_size",
];
const JSON_METHOD: [&str; 2] = ["method", "request_method"];
const JSON_URI: [&str; 4] = ["request_uri", "uri", "path", "url"];

/// A JSON line's fields, by the names of [`JSON_TIME`] and its siblings: `request` (or
/// `method` and `request_uri`), `status`, `request_time` in seconds or `duration_us`/
/// `request_time_us` in µs (`duration_ms` in ms). Numbers may be written as strings.
pub fn read_json(line: &[u8], logged: &mut Logged, request: &mut Vec<u8>) -> Option<()> {
    logged.clear();
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(line) else {
        return None;
    };
    let get = |names: &[&str]| names.iter().find_map(|n| map.get(*n));
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let num = |v: &Value| text(v).and_then(|s| parse_f64(s.as_bytes()));
    logged.time = get(&JSON_TIME).and_then(text).and_then(|t| {
        let t = t.as_bytes();
        parse_time(TimeKind::Epoch, t)
            .or_else(|| parse_time(TimeKind::Iso8601, t))
            .or_else(|| parse_time(TimeKind::Clf, t))
    });
    if let Some(c) = get(&JSON_CLIENT).and_then(text) {
        logged.client.extend_from_slice(c.as_bytes());
    }
    logged.status = get(&JSON_STATUS)
        .and_then(num)
        .map(|s| s as u16)
        .filter(|s| *s > 0);
    logged.bytes = get(&JSON_BYTES).and_then(num).map(|b| b as u64);
    logged.duration = map
        .get("request_time")
        .and_then(num)
        .or_else(|| map.get("duration_ms").and_then(num).map(|d| d / 1e3))
        .or_else(|| {
            get(&["duration_us", "request_time_us"])
                .and_then(num)
                .map(|d| d / 1e6)
        });
    request.clear();
    match (
        map.get("request").and_then(text),
        get(&JSON_URI).and_then(text),
    ) {
        (Some(r), _) => request.extend_from_slice(r.as_bytes()),
        (None, Some(uri)) => {
            let method = get(&JSON_METHOD)
                .and_then(text)
                .unwrap_or_else(|| "GET".into());
            request.extend_from_slice(format!("{method} {uri}").as_bytes());
        }
        (None, None) => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(template: &str, line: &str) -> Option<(Logged, String)> {
        let t = Template::parse(template).unwrap();
        let mut logged = Logged::default();
        let mut request = Vec::new();
        t.read(line.as_bytes(), &mut logged, &mut request)?;
        Some((logged, String::from_utf8(request).unwrap()))
    }

    #[test]
    fn reads_clf_times() {
        assert_eq!(
            parse_clf_time("10/Oct/2000:13:55:36 -0700"),
            Some(971_211_336.0)
        );
        assert_eq!(
            parse_iso_time("2000-10-10T13:55:36-07:00"),
            Some(971_211_336.0)
        );
        assert_eq!(
            parse_iso_time("2000-10-10T20:55:36.250Z"),
            Some(971_211_336.25)
        );
        assert_eq!(parse_clf_time("10/Oct/2000:13:55:36"), None);
    }

    #[test]
    fn reads_an_apache_log_format() {
        let (l, r) = read(
            r#"%h %l %u %t "%r" %>s %O %D"#,
            r#"192.0.2.7 - - [10/Oct/2000:13:55:36 -0700] "GET /a "b" HTTP/1.1" 200 2326 1500"#,
        )
        .unwrap();
        assert_eq!(r, r#"GET /a "b" HTTP/1.1"#);
        assert_eq!(
            l,
            Logged {
                time: Some(971_211_336.0),
                client: b"192.0.2.7".to_vec(),
                status: Some(200),
                bytes: Some(2326),
                duration: Some(0.0015),
            }
        );
        let pasted = r#"LogFormat "%h %l %u %t \"%r\" %>s %b \"%{Referer}i\" %{ms}T" timed"#;
        let (l, _) = read(
            pasted,
            r#"::1 - bob [10/Oct/2000:13:55:36 -0700] "HEAD / HTTP/1.0" 304 - "-" 12"#,
        )
        .unwrap();
        assert_eq!((l.bytes, l.duration), (Some(0), Some(0.012)));
        let (_, r) = read("%a %m %U%q %s", "10.0.0.1 GET /x?y=1 200").unwrap();
        assert_eq!(r, "GET /x?y=1");
        assert!(read(r#"%h %t "%r" %>s"#, r#"h [bad date] "GET / HTTP/1.1" 200"#).is_none());
        assert!(Template::parse("%h %>s %b").is_err());
    }

    #[test]
    fn reads_an_nginx_log_format() {
        let conf = r#"log_format timed '$remote_addr - $remote_user [$time_local] '
                         '"$request" $status $body_bytes_sent "$http_referer" '
                         '"$http_user_agent" $request_time';"#;
        let (l, r) = read(
            conf,
            r#"127.0.0.11 - - [24/Nov/2026:16:00:00 +0000] "GET /big.bin HTTP/1.1" 200 1048576 "-" "curl/7.88.1" 16.001"#,
        )
        .unwrap();
        assert_eq!(r, "GET /big.bin HTTP/1.1");
        assert_eq!(l.client, b"127.0.0.11");
        assert_eq!(
            (l.status, l.bytes, l.duration),
            (Some(200), Some(1_048_576), Some(16.001))
        );
        // nginx logs when the request ended: it came 16.001 s before.
        assert_eq!(l.time, Some(1_795_536_000.0 - 16.001));
        let (l, _) = read(
            "${msec} $request_method ${request_uri} $status",
            "1795536000.125 GET /a 404",
        )
        .unwrap();
        assert_eq!(l.time, Some(1_795_536_000.125));
        assert!(Template::parse("$remote_addr$status $request").is_err());
    }

    #[test]
    fn reads_clf_with_trailing_fields_and_json() {
        let mut l = Logged::default();
        let line = br#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 512 "-" "ua" 0.004 extra"#;
        assert_eq!(read_clf(line, &mut l), Some(&b"GET / HTTP/1.1"[..]));
        assert_eq!((l.status, l.bytes), (Some(200), Some(512)));
        let mut r = Vec::new();
        let json = br#"{"time":"2000-10-10T13:55:36-07:00","remote_addr":"1.2.3.4","method":"HEAD","path":"/x","status":"301","bytes_sent":0,"duration_us":250}"#;
        read_json(json, &mut l, &mut r).unwrap();
        assert_eq!(r, b"HEAD /x");
        assert_eq!(
            l,
            Logged {
                time: Some(971_211_336.0),
                client: b"1.2.3.4".to_vec(),
                status: Some(301),
                bytes: Some(0),
                duration: Some(0.00025),
            }
        );
        assert!(read_json(br#"{"status":200}"#, &mut l, &mut r).is_none());
        assert!(read_json(b"[1]", &mut l, &mut r).is_none());
    }
}
