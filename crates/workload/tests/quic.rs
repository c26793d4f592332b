//! quic:// against real QUIC servers on loopback: Debian's ngtcp2 `gtlsserver` (HTTP/3, the
//! only application protocol it accepts) and a small hq-interop server in a thread of the test,
//! which also misbehaves on purpose so that each failure is counted under its kind.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{options, run_main};
use reqcost_testkit::{binary, self_signed, TempDir};
use reqcost_workload::WorkloadOptions;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Body size the test servers answer `/N` with.
const SIZE: u64 = 10_000;

/// A QUIC server in a thread of the test, accepting `alpn` only. It answers `GET /N` with N
/// bytes, resets the stream of `GET /reset`, and closes the connection after `/close`.
fn hq_server(alpn: &'static [u8]) -> SocketAddr {
    let dir = TempDir::new("hq");
    let (cert, key) = self_signed(&dir);
    let certs = vec![CertificateDer::from_pem_file(&cert).unwrap()];
    let key = PrivateKeyDer::from_pem_file(&key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    tls.alpn_protocols = vec![alpn.to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
    let config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let endpoint = quinn::Endpoint::new(
                quinn::EndpointConfig::default(),
                Some(config),
                socket,
                Arc::new(quinn::TokioRuntime),
            )
            .unwrap();
            while let Some(incoming) = endpoint.accept().await {
                tokio::spawn(async move {
                    if let Ok(conn) = incoming.await {
                        while let Ok((tx, rx)) = conn.accept_bi().await {
                            tokio::spawn(serve_stream(conn.clone(), tx, rx));
                        }
                    }
                });
            }
        });
    });
    addr
}

async fn serve_stream(
    conn: quinn::Connection,
    mut tx: quinn::SendStream,
    mut rx: quinn::RecvStream,
) {
    let Ok(req) = rx.read_to_end(1024).await else {
        return;
    };
    let path = req
        .strip_prefix(b"GET /")
        .and_then(|r| r.strip_suffix(b"\r\n"))
        .unwrap_or_default();
    match path {
        b"reset" => {
            let _ = tx.reset(7u32.into());
        }
        b"close" => conn.close(0u32.into(), b"bye"),
        n => {
            let n: usize = std::str::from_utf8(n).unwrap().parse().unwrap();
            let _ = tx.write_all(&vec![b'x'; n]).await;
            let _ = tx.finish();
            let _ = tx.stopped().await;
        }
    }
}

#[test]
fn hq_interop_requests_reuse_one_connection_per_slot() {
    let addr = hq_server(b"hq-interop");
    let url = format!("quic://localhost:{}/{SIZE}", addr.port());
    let s = run_main(WorkloadOptions {
        concurrency: 2,
        warmup: Some(0),
        ..options(&url, 60)
    });
    assert_eq!((s.ok, s.connections), (60, 2), "{s:?}");
    assert!(s.errors.is_empty(), "{s:?}");
    assert_eq!(s.bytes_received, 60 * SIZE);
    assert_eq!(s.bytes_sent, 60 * format!("GET /{SIZE}\r\n").len() as u64);
    assert!(s.statuses.is_empty(), "hq-interop has no status: {s:?}");
}

#[test]
fn two_load_threads_each_keep_their_quic_connections() {
    let addr = hq_server(b"hq-interop");
    let url = format!("quic://localhost:{}/{SIZE}", addr.port());
    let s = run_main(WorkloadOptions {
        concurrency: 3,
        threads: Some(2),
        warmup: Some(0),
        ..options(&url, 61)
    });
    assert_eq!((s.ok, s.connections), (61, 3), "{s:?}");
    assert_eq!(s.load_threads, Some(2));
    assert_eq!(s.bytes_received, 61 * SIZE);
}

#[test]
fn quic_failures_are_counted_by_kind() {
    let addr = hq_server(b"hq-interop");
    let run = |path: &str, max_response: u64| {
        run_main(WorkloadOptions {
            warmup: Some(0),
            max_response,
            ..options(&format!("quic://127.0.0.1:{}/{path}", addr.port()), 3)
        })
    };
    let s = run("reset", 1 << 20);
    assert_eq!((s.ok, s.errors.get("reset")), (0, Some(&3)), "{s:?}");
    // A stream reset leaves the connection usable: one handshake for the three requests.
    assert_eq!(s.connections, 1, "{s:?}");
    let s = run(&SIZE.to_string(), SIZE / 2);
    assert_eq!(s.errors.get("too-large"), Some(&3), "{s:?}");
    // A closed connection is replaced by a new one for the next request.
    let s = run("close", 1 << 20);
    assert_eq!((s.ok, s.errors.get("reset")), (0, Some(&3)), "{s:?}");
    assert_eq!(s.connections, 3, "{s:?}");
}

#[test]
fn a_server_without_our_alpn_fails_the_handshake() {
    let addr = hq_server(b"spdy/3");
    let s = run_main(WorkloadOptions {
        warmup: Some(0),
        ..options(&format!("quic://127.0.0.1:{}/1", addr.port()), 3)
    });
    assert_eq!((s.ok, s.errors.get("tls")), (0, Some(&3)), "{s:?}");
}

#[test]
fn a_udp_port_where_nothing_answers_times_out() {
    // Bound and never read: nothing answers, and no ICMP error tells the client so.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let url = format!("quic://127.0.0.1:{}/1", silent.local_addr().unwrap().port());
    let s = run_main(WorkloadOptions {
        warmup: Some(0),
        concurrency: 2,
        connect_timeout: Duration::from_millis(300),
        ..options(&url, 2)
    });
    assert_eq!(
        (s.ok, s.errors.get("connect-timeout")),
        (0, Some(&2)),
        "{s:?}"
    );
    assert_eq!(s.connections, 0);
}

/// Debian's gtlsserver, killed when dropped.
struct Gtlsserver {
    child: Child,
    _dir: TempDir,
}

impl Drop for Gtlsserver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts gtlsserver on a free loopback UDP port serving `files`; waits until the port is bound.
fn gtlsserver(files: &[(&str, &[u8])]) -> (Gtlsserver, u16) {
    let dir = TempDir::new("gtlsserver");
    let (cert, key) = self_signed(&dir);
    for (name, data) in files {
        dir.write(&format!("www/{name}"), data);
    }
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(binary("gtlsserver"))
        .arg("-q")
        .arg("-d")
        .arg(dir.join("www"))
        .args(["127.0.0.1", &port.to_string()])
        .arg(&key)
        .arg(&cert)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gtlsserver");
    let server = Gtlsserver { child, _dir: dir };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !udp_bound(port) {
        assert!(
            Instant::now() < deadline,
            "gtlsserver did not bind port {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (server, port)
}

/// Whether a UDP socket is bound to `port` on this machine (/proc/net/udp).
fn udp_bound(port: u16) -> bool {
    let needle = format!(":{port:04X} ");
    std::fs::read_to_string("/proc/net/udp")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .any(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| format!("{a} ").ends_with(&needle))
        })
}

#[test]
fn http3_against_gtlsserver() {
    let body = vec![b'q'; SIZE as usize];
    let (_server, port) = gtlsserver(&[("f.bin", &body)]);
    let s = run_main(WorkloadOptions {
        concurrency: 2,
        warmup: Some(0),
        ..options(&format!("quic://localhost:{port}/f.bin"), 40)
    });
    assert_eq!((s.ok, s.connections), (40, 2), "{s:?}");
    assert!(s.errors.is_empty(), "{s:?}");
    assert_eq!(s.bytes_received, 40 * SIZE);
    assert_eq!(s.statuses.get("200"), Some(&40), "{s:?}");
    let s = run_main(WorkloadOptions {
        warmup: Some(0),
        ..options(&format!("quic://localhost:{port}/missing"), 5)
    });
    assert_eq!((s.ok, s.statuses.get("404")), (5, Some(&5)), "{s:?}");
}
