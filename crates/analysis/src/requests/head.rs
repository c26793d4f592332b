//! What a request asked for, read from the first bytes the server read on it ([`RequestHead`]),
//! and the label every per-request table names an event by.

use reqcost_record::RequestEvent;

use super::wire::{Protocol, Wire};
use super::{HTTP2, UNREAD};

/// What a request asked for, read from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestHead<'a> {
    /// Nothing was read: the connection carried no request.
    Nothing,
    /// A TLS record: the request is encrypted on the socket.
    Tls,
    /// Bytes that are not text (a binary protocol, or ciphertext of an unknown kind): nothing
    /// of them is printed.
    Binary,
    /// An HTTP request line: its method and target as sent (query included).
    Http { method: &'a [u8], target: &'a [u8] },
    /// A Gemini request: the URL line.
    Gemini { url: &'a [u8] },
    /// A gopher selector, or the first line of anything else (up to CR, LF or TAB).
    Line(&'a [u8]),
    /// A turn of a protocol whose requests are its messages (PostgreSQL, Redis).
    Wire(Wire<'a>),
}

impl<'a> RequestHead<'a> {
    /// Reads `head` as a request of `protocol`, the workload's protocol as the record names it
    /// (`gopher`, `gemini`, `http`, `https`, `tcp`; anything else when unknown). HTTP request
    /// lines and Gemini URLs are recognised by their shape whatever the protocol, except on
    /// gopher, where the selector is free text and is taken as it is.
    pub fn parse(head: &'a [u8], protocol: &str) -> RequestHead<'a> {
        RequestHead::parse_turn(head, head.len() as u64, protocol, None)
    }

    /// Reads `head`, the first bytes of the `bytes_in` a turn read, as [`RequestHead::parse`]
    /// does, and as a PostgreSQL or Redis turn ([`Wire`]) when it is one; `known` is the
    /// protocol its connection was recognised as by an earlier turn.
    pub fn parse_turn(
        head: &'a [u8],
        bytes_in: u64,
        protocol: &str,
        known: Option<Protocol>,
    ) -> RequestHead<'a> {
        if head.is_empty() {
            return RequestHead::Nothing;
        }
        if tls_record(head) {
            return RequestHead::Tls;
        }
        if protocol == "gopher" {
            return text_line(head);
        }
        if let Some(wire) = Wire::parse(head, bytes_in, known) {
            return RequestHead::Wire(wire);
        }
        http_line(head)
            .or_else(|| gemini_url(head))
            .unwrap_or_else(|| text_line(head))
    }

    /// Whether the head is an HTTP/2 client's connection preface (h2c, RFC 9113 3.4).
    pub fn is_http2_preface(&self) -> bool {
        matches!(
            self,
            RequestHead::Http {
                method: b"PRI",
                target: b"*"
            }
        )
    }

    /// The text `--class` regexes match: the request as a client sends it (selector, path with
    /// its query, Gemini URL), the same text the workload's `--class` matches in a requests
    /// file, so one `--class` means the same on both sides. None when there is no text, and
    /// for a protocol's messages, whose `--class` matches their label (the command's name,
    /// the statement's verb and table).
    pub fn target(&self) -> Option<&'a [u8]> {
        match *self {
            RequestHead::Nothing
            | RequestHead::Tls
            | RequestHead::Binary
            | RequestHead::Wire(_) => None,
            RequestHead::Http { target, .. } => Some(target),
            RequestHead::Gemini { url } => Some(url),
            RequestHead::Line(line) => Some(line),
        }
    }

    /// The name requests group under without `--class`: `(no request)`, `(tls)`, `(binary)`,
    /// `METHOD /path` (no query), the Gemini URL's path, the selector (`(empty)` when empty).
    /// Always printable: bytes that are not are escaped.
    pub fn write_label(&self, out: &mut String) {
        match *self {
            RequestHead::Nothing => out.push_str("(no request)"),
            RequestHead::Tls => out.push_str("(tls)"),
            RequestHead::Binary => out.push_str("(binary)"),
            RequestHead::Http { method, target } => {
                push_text(out, method);
                out.push(' ');
                push_text(out, without_query(url_path(target)));
            }
            RequestHead::Gemini { url } => push_text(out, without_query(url_path(url))),
            RequestHead::Line([]) => out.push_str("(empty)"),
            RequestHead::Line(line) => push_text(out, line),
            RequestHead::Wire(wire) => wire.write_label(out),
        }
    }

    pub fn label(&self) -> String {
        let mut out = String::new();
        self.write_label(&mut out);
        out
    }
}

/// A TLS record header: content type (change_cipher_spec, alert, handshake, application data),
/// then a 3.x version. Every record of a connection has one, not only its first.
fn tls_record(head: &[u8]) -> bool {
    matches!(head, [0x14..=0x17, 0x03, 0x00..=0x04, ..])
}

/// The first line, when it is text: UTF-8 without control characters.
fn text_line(head: &[u8]) -> RequestHead<'_> {
    let line = first_line(head);
    match std::str::from_utf8(line) {
        Ok(text) if !text.chars().any(char::is_control) => RequestHead::Line(line),
        _ => RequestHead::Binary,
    }
}

fn first_line(head: &[u8]) -> &[u8] {
    let end = head
        .iter()
        .position(|b| matches!(b, b'\r' | b'\n' | b'\t'))
        .unwrap_or(head.len());
    &head[..end]
}

/// `METHOD SP target`, the method in capitals as every HTTP method is.
fn http_line(head: &[u8]) -> Option<RequestHead<'_>> {
    let space = head.iter().position(|&b| b == b' ')?;
    let method = &head[..space];
    if method.is_empty() || method.len() > 16 || !method.iter().all(u8::is_ascii_uppercase) {
        return None;
    }
    let rest = &head[space + 1..];
    let end = rest
        .iter()
        .position(|b| matches!(b, b' ' | b'\r' | b'\n'))
        .unwrap_or(rest.len());
    (end > 0).then(|| RequestHead::Http {
        method,
        target: &rest[..end],
    })
}

fn gemini_url(head: &[u8]) -> Option<RequestHead<'_>> {
    const SCHEME: &[u8] = b"gemini://";
    let url = first_line(head);
    (url.len() >= SCHEME.len() && url[..SCHEME.len()].eq_ignore_ascii_case(SCHEME))
        .then_some(RequestHead::Gemini { url })
}

/// The path of an absolute URL (`scheme://authority/path`); other targets are paths already.
fn url_path(target: &[u8]) -> &[u8] {
    let Some(scheme_end) = target.windows(3).position(|w| w == b"://") else {
        return target;
    };
    let after = &target[scheme_end + 3..];
    match after.iter().position(|&b| b == b'/') {
        Some(slash) => &after[slash..],
        None => b"/",
    }
}

fn without_query(path: &[u8]) -> &[u8] {
    let end = path
        .iter()
        .position(|b| matches!(b, b'?' | b'#'))
        .unwrap_or(path.len());
    if end == 0 {
        b"/"
    } else {
        &path[..end]
    }
}

fn push_text(out: &mut String, bytes: &[u8]) {
    out.push_str(&reqcost_record::printable(bytes));
}

/// Writes the label every table names `ev` by into `out`: its head's label, or `(unread)` when
/// the server read bytes the probes could not copy. Returns the parsed head, None when unread.
/// `known` is the protocol `ev`'s connection was recognised as by an earlier turn.
pub fn write_request_label<'e>(
    ev: &'e RequestEvent,
    protocol: &str,
    known: Option<Protocol>,
    out: &mut String,
) -> Option<RequestHead<'e>> {
    if ev.http2_streams.is_some() {
        if ev.head.is_empty() {
            out.push_str(HTTP2);
            return None;
        }
        // `METHOD /path` as the probes decoded it from the stream's header block.
        let head = RequestHead::parse(&ev.head, "http");
        head.write_label(out);
        return Some(head);
    }
    match RequestHead::parse_turn(&ev.head, ev.bytes_in, protocol, known) {
        RequestHead::Nothing if ev.bytes_in > 0 => {
            out.push_str(UNREAD);
            None
        }
        head => {
            head.write_label(out);
            Some(head)
        }
    }
}
