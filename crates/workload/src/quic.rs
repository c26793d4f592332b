//! QUIC for `quic://`: one QUIC connection per slot, reused for request after request as
//! HTTP keep-alive is, each request on its own bidirectional stream.
//!
//! The client offers two application protocols and speaks the one the server picks:
//! `hq-interop` (the request protocol of QUIC servers' example programs and interop runners:
//! `GET /path\r\n`, the response is everything until the stream's FIN) and `h3` (HTTP/3, the
//! one Debian's ngtcp2 `gtlsserver` accepts). Certificates are accepted as for https
//! (see `tls.rs`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use bytes::{Buf, Bytes};
use quinn::crypto::rustls::{HandshakeData, QuicClientConfig};
use tokio::time::{timeout_at, Instant};

use crate::endpoint::Endpoint;
use crate::tally::ErrorKind;

/// Application protocols offered, in order of preference.
pub const ALPN: [&[u8]; 2] = [b"hq-interop", b"h3"];

/// What every QUIC connection of a phase shares.
#[derive(Clone)]
pub struct QuicTarget {
    pub config: quinn::ClientConfig,
    pub addr: SocketAddr,
    /// Server name for SNI.
    pub name: String,
    /// `host[:port]`, the HTTP/3 `:authority`.
    pub authority: String,
}

impl QuicTarget {
    pub fn new(tls: Arc<rustls::ClientConfig>, endpoint: &Endpoint) -> Result<QuicTarget, String> {
        let crypto = QuicClientConfig::try_from(tls).map_err(|e| e.to_string())?;
        Ok(QuicTarget {
            config: quinn::ClientConfig::new(Arc::new(crypto)),
            addr: endpoint.addr,
            name: endpoint.host.clone(),
            authority: endpoint.authority.clone(),
        })
    }
}

type H3Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;
type H3Stream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// One established QUIC connection and the protocol negotiated on it.
pub struct QuicConn {
    conn: quinn::Connection,
    /// HTTP/3 request sender when `h3` was negotiated; `hq-interop` otherwise.
    h3: Option<H3Sender>,
    /// Keeps the connection's UDP socket open.
    _endpoint: quinn::Endpoint,
}

/// The response stream of one request.
pub enum Response {
    Hq(quinn::RecvStream),
    H3(Box<H3Stream>),
}

impl QuicConn {
    /// Handshakes from `source` (or the kernel's choice) until `deadline`.
    pub async fn connect(
        target: &QuicTarget,
        source: Option<IpAddr>,
        deadline: Instant,
    ) -> Result<QuicConn, ErrorKind> {
        let local = source.unwrap_or(match target.addr {
            SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        });
        let endpoint = quinn::Endpoint::client(SocketAddr::new(local, 0))
            .map_err(|e| ErrorKind::from_io(&e, false))?;
        let connecting = endpoint
            .connect_with(target.config.clone(), target.addr, &target.name)
            .map_err(|_| ErrorKind::Other)?;
        let conn = match timeout_at(deadline, connecting).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(connection_error(&e)),
            Err(_) => return Err(ErrorKind::ConnectTimeout),
        };
        let alpn = conn
            .handshake_data()
            .and_then(|d| d.downcast::<HandshakeData>().ok())
            .and_then(|d| d.protocol);
        let h3 = if alpn.as_deref() == Some(b"h3") {
            let h3_conn = h3_quinn::Connection::new(conn.clone());
            let (mut driver, sender) = match timeout_at(deadline, h3::client::new(h3_conn)).await {
                Ok(Ok(pair)) => pair,
                Ok(Err(e)) => return Err(h3_connection_error(&e)),
                Err(_) => return Err(ErrorKind::ConnectTimeout),
            };
            // The HTTP/3 control streams need polling for the connection's whole life.
            tokio::task::spawn_local(async move {
                std::future::poll_fn(|cx| driver.poll_close(cx)).await
            });
            Some(sender)
        } else {
            None
        };
        Ok(QuicConn {
            conn,
            h3,
            _endpoint: endpoint,
        })
    }

    /// Whether the connection can carry another request.
    pub fn is_open(&self) -> bool {
        self.conn.close_reason().is_none()
    }

    /// Sends a GET of `path` on a new stream; returns the response to read and, for HTTP/3,
    /// its status. `sent` gets the bytes of the request as written.
    pub async fn request(
        &mut self,
        authority: &str,
        path: &[u8],
        sent: &mut u64,
    ) -> Result<(Response, Option<u16>), ErrorKind> {
        match &mut self.h3 {
            None => {
                let (mut tx, rx) = self
                    .conn
                    .open_bi()
                    .await
                    .map_err(|e| connection_error(&e))?;
                let line = [b"GET ", path, b"\r\n"].concat();
                tx.write_all(&line).await.map_err(|e| write_error(&e))?;
                tx.finish().map_err(|_| ErrorKind::Protocol)?;
                *sent += line.len() as u64;
                Ok((Response::Hq(rx), None))
            }
            Some(sender) => {
                let uri = format!("https://{authority}{}", String::from_utf8_lossy(path));
                let req = http::Request::get(uri)
                    .header("user-agent", "reqcost")
                    .body(())
                    .map_err(|_| ErrorKind::Protocol)?;
                let mut stream = sender
                    .send_request(req)
                    .await
                    .map_err(|e| h3_stream_error(&e))?;
                stream.finish().await.map_err(|e| h3_stream_error(&e))?;
                *sent += path.len() as u64;
                let head = stream
                    .recv_response()
                    .await
                    .map_err(|e| h3_stream_error(&e))?;
                Ok((Response::H3(Box::new(stream)), Some(head.status().as_u16())))
            }
        }
    }
}

impl Drop for QuicConn {
    /// Closes at once: the HTTP/3 driver task holds the connection too, and would otherwise keep
    /// it (and the server's state for it) until the idle timeout.
    fn drop(&mut self) {
        self.conn.close(0u32.into(), b"");
    }
}

impl Response {
    /// Reads the next piece of the body, at most `max` bytes for hq-interop; its length, or
    /// None at the end of the response.
    pub async fn next(&mut self, max: usize) -> Result<Option<usize>, ErrorKind> {
        match self {
            Response::Hq(rx) => match rx.read_chunk(max, true).await {
                Ok(chunk) => Ok(chunk.map(|c| c.bytes.len())),
                Err(e) => Err(read_error(&e)),
            },
            Response::H3(stream) => match stream.recv_data().await {
                Ok(data) => Ok(data.map(|d| d.remaining())),
                Err(e) => Err(h3_stream_error(&e)),
            },
        }
    }
}

/// TLS alerts travel as QUIC CRYPTO_ERROR codes 0x100 + alert (RFC 9001 4.8).
fn connection_error(e: &quinn::ConnectionError) -> ErrorKind {
    use quinn::ConnectionError as E;
    match e {
        E::TimedOut => ErrorKind::Timeout,
        E::ConnectionClosed(close) if is_crypto(u64::from(close.error_code)) => ErrorKind::Tls,
        E::TransportError(t) if is_crypto(u64::from(t.code)) => ErrorKind::Tls,
        E::ConnectionClosed(_) | E::ApplicationClosed(_) | E::Reset => ErrorKind::Reset,
        E::TransportError(_) | E::VersionMismatch => ErrorKind::Protocol,
        E::LocallyClosed | E::CidsExhausted => ErrorKind::Other,
    }
}

fn is_crypto(code: u64) -> bool {
    (0x100..0x200).contains(&code)
}

fn read_error(e: &quinn::ReadError) -> ErrorKind {
    match e {
        quinn::ReadError::Reset(_) => ErrorKind::Reset,
        quinn::ReadError::ConnectionLost(c) => connection_error(c),
        _ => ErrorKind::Protocol,
    }
}

fn write_error(e: &quinn::WriteError) -> ErrorKind {
    match e {
        quinn::WriteError::Stopped(_) => ErrorKind::Reset,
        quinn::WriteError::ConnectionLost(c) => connection_error(c),
        _ => ErrorKind::Protocol,
    }
}

fn h3_connection_error(e: &h3::error::ConnectionError) -> ErrorKind {
    use h3::error::ConnectionError as E;
    use h3::quic::ConnectionErrorIncoming as In;
    match e {
        E::Timeout { .. } | E::Remote { 0: In::Timeout, .. } => ErrorKind::Timeout,
        E::Remote {
            0: In::ApplicationClose { .. },
            ..
        } => ErrorKind::Reset,
        E::Remote {
            0: In::Undefined(inner),
            ..
        } => inner
            .downcast_ref::<quinn::ConnectionError>()
            .map_or(ErrorKind::Protocol, connection_error),
        _ => ErrorKind::Protocol,
    }
}

fn h3_stream_error(e: &h3::error::StreamError) -> ErrorKind {
    use h3::error::StreamError as E;
    match e {
        E::RemoteTerminate { .. } | E::RemoteClosing { .. } => ErrorKind::Reset,
        E::ConnectionError { 0: c, .. } => h3_connection_error(c),
        E::HeaderTooBig { .. } => ErrorKind::TooLarge,
        _ => ErrorKind::Protocol,
    }
}
