//! One connection slot of the load generator: connects, sends a request, reads its response
//! under the protocol's framing, with buffers reused across requests.

use std::cell::Cell;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::{sleep_until, timeout, Instant};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::endpoint::Protocol;
use crate::pace::Pace;
use crate::quic::{QuicConn, QuicTarget};
use crate::source::{Method, Request};
use crate::tally::ErrorKind;

/// Everything a connection slot needs to know, shared by the slots of one phase.
pub struct ClientConfig {
    pub protocol: Protocol,
    pub addr: SocketAddr,
    pub tls: Option<(TlsConnector, ServerName<'static>)>,
    /// QUIC client of a quic:// endpoint (which has no TCP `tls`).
    pub quic: Option<QuicTarget>,
    /// `Host:` header value.
    pub authority: String,
    pub keepalive: bool,
    /// Extra request headers, on the wire (CRLF after each).
    pub headers: Vec<u8>,
    pub connect_timeout: Duration,
    pub max_response: u64,
    /// Per-connection read bandwidth in bytes per second (slow-client emulation).
    pub bandwidth: Option<u64>,
    /// SO_RCVBUF set before connecting.
    pub rcvbuf: Option<u32>,
    /// Local address to connect from (each group of a client mix has its own).
    pub source: Option<std::net::IpAddr>,
}

pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Read buffer size: large enough for a typical response in one read.
const READ_BUF: usize = 64 * 1024;
/// Longest Gemini response header: two-digit status, space, 1024-byte meta, CRLF.
const GEMINI_HEADER_MAX: usize = 1029;
/// Longest chunk-size or trailer line accepted in a chunked HTTP body.
const CHUNK_LINE_MAX: usize = 4096;

/// Failure of one exchange; `retry` marks a kept-alive connection that the server had closed
/// before this request, which is retried once on a fresh connection, as browsers do.
struct Failed {
    kind: ErrorKind,
    retry: bool,
}

impl From<ErrorKind> for Failed {
    fn from(kind: ErrorKind) -> Failed {
        Failed { kind, retry: false }
    }
}

pub struct Client {
    cfg: Rc<ClientConfig>,
    conn: Option<Stream>,
    quic: Option<QuicConn>,
    wbuf: Vec<u8>,
    rbuf: Box<[u8]>,
    /// Figures of the current request, drained by the engine after each one.
    pub sent: u64,
    pub received: u64,
    pub connects: u64,
    /// TLS handshakes that resumed a session.
    pub resumed: u64,
    pub status: Option<u16>,
    /// Read bandwidth, receive buffer and local address of the current request: the config's,
    /// or those its log line gives (`--replay-speeds`).
    bandwidth: Option<u64>,
    rcvbuf: Option<u32>,
    source: Option<IpAddr>,
    /// The current response's paced reads, under a bandwidth.
    pace: Option<Pace>,
    /// Bytes received by every slot of the phase, counted as they arrive: whether the server
    /// says anything at all, before any request completes.
    heard: Rc<Cell<u64>>,
}

impl Client {
    pub fn new(cfg: Rc<ClientConfig>, heard: Rc<Cell<u64>>) -> Client {
        Client {
            bandwidth: cfg.bandwidth,
            rcvbuf: cfg.rcvbuf,
            source: cfg.source,
            cfg,
            conn: None,
            quic: None,
            wbuf: Vec::with_capacity(512),
            rbuf: vec![0; READ_BUF].into_boxed_slice(),
            sent: 0,
            received: 0,
            connects: 0,
            resumed: 0,
            status: None,
            pace: None,
            heard,
        }
    }

    pub fn uses_tls(&self) -> bool {
        self.cfg.tls.is_some()
    }

    pub fn is_quic(&self) -> bool {
        self.cfg.protocol == Protocol::Quic
    }

    /// Forgets the connection, e.g. after a timeout left it in an unknown state.
    pub fn reset(&mut self) {
        self.conn = None;
        self.quic = None;
    }

    /// Reads the next responses at `bandwidth` through `rcvbuf`, connected from `source`. A
    /// connection made with another buffer or from another address is closed: it belongs to
    /// another client.
    pub fn set_model(
        &mut self,
        bandwidth: Option<u64>,
        rcvbuf: Option<u32>,
        source: Option<IpAddr>,
    ) {
        if (rcvbuf, source) != (self.rcvbuf, self.source) {
            self.reset();
        }
        (self.bandwidth, self.rcvbuf, self.source) = (bandwidth, rcvbuf, source);
    }

    /// Sends one request and reads its whole response.
    pub async fn exchange(&mut self, req: &Request) -> Result<(), ErrorKind> {
        self.status = None;
        match self.cfg.protocol {
            Protocol::Gopher | Protocol::Tcp => self.line_exchange(req).await,
            Protocol::Gemini => self.gemini_exchange(req).await,
            Protocol::Quic => self.quic_exchange(req).await,
            Protocol::Http | Protocol::Https => {
                self.encode_http(req);
                match self.http_exchange(req.method).await {
                    Err(Failed { retry: true, .. }) => {
                        self.http_exchange(req.method).await.map_err(|f| f.kind)
                    }
                    other => other.map_err(|f| f.kind),
                }?;
                // A server error is a complete exchange, but not a request served: counted
                // apart so that its cost is not taken for a success's.
                match self.status {
                    Some(500..=599) => Err(ErrorKind::Http5xx),
                    _ => Ok(()),
                }
            }
        }
    }

    async fn connect(&mut self) -> Result<Stream, ErrorKind> {
        let cfg = &*self.cfg;
        let socket = if cfg.addr.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        }
        .map_err(|e| ErrorKind::from_io(&e, false))?;
        if let Some(size) = self.rcvbuf {
            socket
                .set_recv_buffer_size(size)
                .map_err(|e| ErrorKind::from_io(&e, false))?;
        }
        if let Some(ip) = self.source {
            socket
                .bind(SocketAddr::new(ip, 0))
                .map_err(|e| ErrorKind::from_io(&e, false))?;
        }
        let deadline = Instant::now() + cfg.connect_timeout;
        let tcp = match timeout(cfg.connect_timeout, socket.connect(cfg.addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(ErrorKind::from_io(&e, false)),
            Err(_) => return Err(ErrorKind::ConnectTimeout),
        };
        self.connects += 1;
        // Real clients (browsers, curl, Go) disable Nagle; without it a TLS client's Finished
        // and request, written apart, wait for the server's delayed ACK (40 ms on Linux).
        tcp.set_nodelay(true)
            .map_err(|e| ErrorKind::from_io(&e, false))?;
        let Some((connector, name)) = &cfg.tls else {
            return Ok(Stream::Plain(tcp));
        };
        match tokio::time::timeout_at(deadline, connector.connect(name.clone(), tcp)).await {
            Ok(Ok(s)) => {
                if s.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                    self.resumed += 1;
                }
                Ok(Stream::Tls(Box::new(s)))
            }
            Ok(Err(e)) => Err(match ErrorKind::from_io(&e, true) {
                k @ (ErrorKind::Reset | ErrorKind::Refused) => k,
                _ => ErrorKind::Tls,
            }),
            Err(_) => Err(ErrorKind::ConnectTimeout),
        }
    }

    async fn send(&mut self, s: &mut Stream) -> Result<(), ErrorKind> {
        let tls = matches!(s, Stream::Tls(_));
        s.write_all(&self.wbuf)
            .await
            .map_err(|e| ErrorKind::from_io(&e, tls))?;
        if tls {
            s.flush().await.map_err(|e| ErrorKind::from_io(&e, true))?;
        }
        self.sent += self.wbuf.len() as u64;
        self.pace = self.paced();
        Ok(())
    }

    /// Reads into `rbuf[at..]`; 0 at end of stream. A TLS peer that closes without
    /// close_notify ends the stream too: Gemini servers commonly do, and framing is checked
    /// by the caller. Under `--client-bandwidth`, reads are small and spaced so that the
    /// connection never drains faster than the given rate.
    async fn read(&mut self, s: &mut Stream, at: usize) -> Result<usize, ErrorKind> {
        let end = self.rbuf.len().min(at + self.read_size());
        let n = match s.read(&mut self.rbuf[at..end]).await {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && matches!(s, Stream::Tls(_)) => 0,
            Err(e) => return Err(ErrorKind::from_io(&e, matches!(s, Stream::Tls(_)))),
        };
        self.arrived(n).await?;
        Ok(n)
    }

    /// Counts `n` bytes of response; under `--client-bandwidth`, waits until reading them
    /// keeps to the rate.
    async fn arrived(&mut self, n: usize) -> Result<(), ErrorKind> {
        self.received += n as u64;
        self.heard.set(self.heard.get() + n as u64);
        if self.received > self.cfg.max_response {
            return Err(ErrorKind::TooLarge);
        }
        if let (Some(pace), true) = (self.pace.as_mut(), n > 0) {
            if let Some(due) = pace.read(n, std::time::Instant::now()) {
                sleep_until(Instant::from_std(due)).await;
            }
        }
        Ok(())
    }

    /// A response's pace from now, under a bandwidth.
    fn paced(&self) -> Option<Pace> {
        let rate = self.bandwidth?;
        Some(Pace::new(rate, self.read_size(), std::time::Instant::now()))
    }

    /// Largest piece read at once: small under `--client-bandwidth`, so that pacing is smooth.
    fn read_size(&self) -> usize {
        match self.bandwidth {
            Some(rate) => (rate / 20).clamp(512, READ_BUF as u64) as usize,
            None => READ_BUF,
        }
    }

    /// QUIC: the slot's connection (opened when there is none or the server closed it), one
    /// stream per request, the response read until its end. A connection that failed is
    /// dropped; a stream that failed leaves the connection for the next request.
    async fn quic_exchange(&mut self, req: &Request) -> Result<(), ErrorKind> {
        let cfg = self.cfg.clone();
        let Some(target) = &cfg.quic else {
            return Err(ErrorKind::Other);
        };
        let mut conn = match self.quic.take().filter(QuicConn::is_open) {
            Some(c) => c,
            None => {
                let deadline = Instant::now() + cfg.connect_timeout;
                let c = QuicConn::connect(target, self.source, deadline).await?;
                self.connects += 1;
                c
            }
        };
        let result = self.quic_request(&mut conn, &target.authority, req).await;
        if conn.is_open() {
            self.quic = Some(conn);
        }
        result
    }

    async fn quic_request(
        &mut self,
        conn: &mut QuicConn,
        authority: &str,
        req: &Request,
    ) -> Result<(), ErrorKind> {
        let (mut response, status) = conn.request(authority, &req.target, &mut self.sent).await?;
        self.status = status;
        self.pace = self.paced();
        while let Some(n) = response.next(self.read_size()).await? {
            self.arrived(n).await?;
        }
        Ok(())
    }

    /// Gopher and raw TCP: one connection per request, the request line, then all the server
    /// sends until it closes.
    async fn line_exchange(&mut self, req: &Request) -> Result<(), ErrorKind> {
        self.wbuf.clear();
        self.wbuf.extend_from_slice(&req.target);
        self.wbuf.extend_from_slice(b"\r\n");
        let mut s = self.connect().await?;
        self.send(&mut s).await?;
        let mut total = 0;
        let mut error_item = false;
        loop {
            let n = self.read(&mut s, 0).await?;
            if n == 0 {
                break;
            }
            if total == 0 && self.cfg.protocol == Protocol::Gopher {
                error_item = is_gopher_error(&self.rbuf[..n]);
            }
            total += n;
        }
        if total == 0 {
            return Err(ErrorKind::Protocol);
        }
        if error_item {
            return Err(ErrorKind::GopherError);
        }
        Ok(())
    }

    /// Gemini: TLS connection per request, URL line, `<STATUS> <META>\r\n`, then the body until
    /// the server closes.
    async fn gemini_exchange(&mut self, req: &Request) -> Result<(), ErrorKind> {
        self.wbuf.clear();
        self.wbuf.extend_from_slice(&req.target);
        self.wbuf.extend_from_slice(b"\r\n");
        let mut s = self.connect().await?;
        self.send(&mut s).await?;
        let mut end = 0;
        let header_end = loop {
            let n = self.read(&mut s, end).await?;
            if n == 0 {
                return Err(ErrorKind::Protocol);
            }
            end += n;
            if let Some(i) = find_crlf(&self.rbuf[..end]) {
                break i;
            }
            if end >= GEMINI_HEADER_MAX {
                return Err(ErrorKind::Protocol);
            }
        };
        let header = &self.rbuf[..header_end];
        let status = match header {
            [a, b, rest @ ..]
                if a.is_ascii_digit()
                    && b.is_ascii_digit()
                    && matches!(rest.first(), None | Some(b' ')) =>
            {
                u16::from(a - b'0') * 10 + u16::from(b - b'0')
            }
            _ => return Err(ErrorKind::Protocol),
        };
        self.status = Some(status);
        while self.read(&mut s, 0).await? > 0 {}
        Ok(())
    }

    fn encode_http(&mut self, req: &Request) {
        let w = &mut self.wbuf;
        w.clear();
        w.extend_from_slice(match req.method {
            Method::Get => b"GET ",
            Method::Head => b"HEAD ",
        });
        w.extend_from_slice(&req.target);
        w.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        w.extend_from_slice(self.cfg.authority.as_bytes());
        w.extend_from_slice(b"\r\nUser-Agent: reqcost\r\n");
        w.extend_from_slice(&self.cfg.headers);
        if !self.cfg.keepalive {
            w.extend_from_slice(b"Connection: close\r\n");
        }
        w.extend_from_slice(b"\r\n");
    }

    async fn http_exchange(&mut self, method: Method) -> Result<(), Failed> {
        let (mut s, reused) = match self.conn.take() {
            Some(s) => (s, true),
            None => (self.connect().await?, false),
        };
        if let Err(kind) = self.send(&mut s).await {
            return Err(Failed {
                kind,
                retry: reused && kind == ErrorKind::Reset,
            });
        }
        let keep = self.http_response(&mut s, method, reused).await?;
        if keep {
            self.conn = Some(s);
        }
        Ok(())
    }

    /// Reads one response; Ok(true) when the connection may carry the next request.
    async fn http_response(
        &mut self,
        s: &mut Stream,
        method: Method,
        reused: bool,
    ) -> Result<bool, Failed> {
        let mut end = 0;
        let head = loop {
            let n = match self.read(s, end).await {
                Ok(n) => n,
                Err(kind) => {
                    return Err(Failed {
                        kind,
                        retry: reused && end == 0 && kind == ErrorKind::Reset,
                    })
                }
            };
            if n == 0 {
                return Err(Failed {
                    kind: ErrorKind::Protocol,
                    retry: reused && end == 0,
                });
            }
            end += n;
            match parse_head(&self.rbuf[..end]) {
                Ok(Some(head)) if (100..200).contains(&head.status) && head.status != 101 => {
                    self.rbuf.copy_within(head.len..end, 0);
                    end -= head.len;
                }
                Ok(Some(head)) => break head,
                Ok(None) if end == self.rbuf.len() => return Err(ErrorKind::TooLarge.into()),
                Ok(None) => {}
                Err(()) => return Err(ErrorKind::Protocol.into()),
            }
        };
        self.status = Some(head.status);
        let mut keep = head.keepalive && self.cfg.keepalive;
        let no_body = method == Method::Head || head.status == 204 || head.status == 304;
        let pos = head.len;
        if no_body {
            keep &= pos == end;
        } else if head.chunked {
            keep &= self.read_chunked(s, pos, end).await?;
        } else if let Some(mut left) = head.content_length {
            let have = (end - pos) as u64;
            if have > left {
                return Ok(false);
            }
            left -= have;
            while left > 0 {
                let n = self.read(s, 0).await?;
                if n == 0 {
                    return Err(ErrorKind::Protocol.into());
                }
                if n as u64 > left {
                    return Ok(false);
                }
                left -= n as u64;
            }
        } else {
            keep = false;
            while self.read(s, 0).await? > 0 {}
        }
        Ok(keep)
    }

    /// Decodes a chunked body starting at `rbuf[pos..end]`; Ok(false) when bytes follow it
    /// (the connection is then not reused).
    async fn read_chunked(
        &mut self,
        s: &mut Stream,
        mut pos: usize,
        mut end: usize,
    ) -> Result<bool, Failed> {
        enum State {
            Size,
            Data(u64),
            DataEnd,
            Trailer,
        }
        let mut state = State::Size;
        loop {
            // Consume what is buffered.
            loop {
                match state {
                    State::Size | State::Trailer => {
                        let Some(i) = find_crlf(&self.rbuf[pos..end]) else {
                            break;
                        };
                        let line = &self.rbuf[pos..pos + i];
                        pos += i + 2;
                        state = match state {
                            State::Size => match parse_chunk_size(line) {
                                Some(0) => State::Trailer,
                                Some(n) => State::Data(n),
                                None => return Err(ErrorKind::Protocol.into()),
                            },
                            _ if line.is_empty() => return Ok(pos == end),
                            _ => State::Trailer,
                        };
                    }
                    State::Data(left) => {
                        if pos == end {
                            break;
                        }
                        let take = left.min((end - pos) as u64);
                        pos += take as usize;
                        state = if take == left {
                            State::DataEnd
                        } else {
                            State::Data(left - take)
                        };
                    }
                    State::DataEnd => {
                        if end - pos < 2 {
                            break;
                        }
                        if &self.rbuf[pos..pos + 2] != b"\r\n" {
                            return Err(ErrorKind::Protocol.into());
                        }
                        pos += 2;
                        state = State::Size;
                    }
                }
            }
            // Keep a partial line, drop consumed bytes, read more.
            self.rbuf.copy_within(pos..end, 0);
            end -= pos;
            pos = 0;
            if end > CHUNK_LINE_MAX {
                return Err(ErrorKind::Protocol.into());
            }
            let n = self.read(s, end).await?;
            if n == 0 {
                return Err(ErrorKind::Protocol.into());
            }
            end += n;
        }
    }
}

/// A gopher response that starts with an error item: `3`, the message, then the tab-separated
/// fields of a menu line (RFC 1436), as servers answer a selector they cannot serve. A text
/// file that starts with a `3` has no tab on its first line.
fn is_gopher_error(start: &[u8]) -> bool {
    let first_line = start.split(|&b| b == b'\n').next().unwrap_or_default();
    start.first() == Some(&b'3') && first_line.contains(&b'\t')
}

fn find_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

fn parse_chunk_size(line: &[u8]) -> Option<u64> {
    let digits = line.split(|&b| b == b';').next()?;
    let digits = std::str::from_utf8(digits).ok()?.trim();
    if digits.is_empty() || digits.len() > 15 {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

struct Head {
    len: usize,
    status: u16,
    content_length: Option<u64>,
    chunked: bool,
    keepalive: bool,
}

/// Parses a response head; Ok(None) while incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<Head>, ()> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(()),
    };
    let mut head = Head {
        len,
        status: resp.code.ok_or(())?,
        content_length: None,
        chunked: false,
        keepalive: resp.version == Some(1),
    };
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value).map_err(|_| ())?;
            head.content_length = Some(v.trim().parse().map_err(|_| ())?);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            head.chunked = contains_token(h.value, b"chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            if contains_token(h.value, b"close") {
                head.keepalive = false;
            } else if contains_token(h.value, b"keep-alive") {
                head.keepalive = true;
            }
        }
    }
    Ok(Some(head))
}

fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gopher_error_item_is_told_from_text_starting_with_3() {
        assert!(is_gopher_error(b"3Not found\tfake\t(NULL)\t0\r\n.\r\n"));
        assert!(is_gopher_error(
            b"3 '/1/x' doesn't exist!\t\terror.host\t1\r\n"
        ));
        assert!(!is_gopher_error(b"3 little pigs\r\nbuilt\thouses\r\n"));
        assert!(!is_gopher_error(b"0About\t/about.txt\thost\t70\r\n"));
        assert!(!is_gopher_error(b""));
    }

    #[test]
    fn parses_response_heads() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhello")
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.status, h.content_length, h.chunked, h.keepalive),
            (200, Some(12), false, true)
        );
        assert_eq!(h.len, 39);
        let h = parse_head(b"HTTP/1.0 404 Not Found\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((h.status, h.chunked, h.keepalive), (404, true, false));
        let h = parse_head(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.keepalive);
        let h = parse_head(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!h.keepalive);
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le")
            .unwrap()
            .is_none());
        assert!(parse_head(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
    }

    #[test]
    fn parses_chunk_sizes() {
        assert_eq!(parse_chunk_size(b"1a"), Some(26));
        assert_eq!(parse_chunk_size(b"0;ext=1"), Some(0));
        assert_eq!(parse_chunk_size(b"zz"), None);
        assert_eq!(parse_chunk_size(b""), None);
    }
}
