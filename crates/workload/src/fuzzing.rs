//! Entry points for the fuzz targets (fuzz/) and for the tests that replay their corpus: the
//! requests-file reader and the response framing, driven exactly as a run drives them, from
//! bytes alone.

use std::cell::Cell;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::client::{Client, ClientConfig};
use crate::endpoint::{Endpoint, Protocol};
use crate::source::{self, Normalizer, ReadOptions, Request, Source};

const PROTOCOLS: [Protocol; 5] = [
    Protocol::Gopher,
    Protocol::Gemini,
    Protocol::Http,
    Protocol::Https,
    Protocol::Tcp,
];

/// Requests drawn from a file that passed the scan: enough to cycle a short file a few times.
const DRAWN: usize = 64;

/// Writes `data` (its first byte picks the protocol) as a requests file at `path`, scans it as
/// `plan()` does, and when the scan accepts it, draws requests from it as a phase does. Any
/// panic is a bug; errors are the expected answer to bad files.
pub fn requests_file(data: &[u8], path: &Path) {
    let Some((&pick, text)) = data.split_first() else {
        return;
    };
    let protocol = PROTOCOLS[usize::from(pick) % PROTOCOLS.len()];
    let url = format!("{}://127.0.0.1:7/", protocol.name());
    let endpoint = Endpoint::parse(&url).expect("a fixed URL parses");
    let normalizer = Normalizer::new(&endpoint, None);
    std::fs::File::create(path)
        .and_then(|mut f| f.write_all(text))
        .expect("the fuzz scratch file is writable");
    let classes = [regex::bytes::Regex::new("^/a").expect("a fixed regex")];
    let reading = ReadOptions {
        skip_bad: pick & 0x80 != 0,
        ..ReadOptions::default()
    };
    let Ok(scan) = source::scan(path, &normalizer, &classes, &reading) else {
        return;
    };
    assert!(scan.requests > 0 && scan.requests <= scan.lines);
    let mut source =
        Source::open(path, scan.format, normalizer, None, None).expect("a scanned file opens");
    let mut req = Request::new();
    for _ in 0..DRAWN {
        assert!(source.next(&mut req), "a file with requests ran dry");
    }
}

/// The protocol and the response chunks a fuzz input stands for: the first byte picks the
/// protocol (and for HTTP, HEAD and keep-alive), the rest is the server's bytes, written in
/// chunks split at each `0xFF 0x00` so that framing is exercised across reads.
struct Scenario<'a> {
    protocol: Protocol,
    head: bool,
    keepalive: bool,
    chunks: Vec<&'a [u8]>,
}

impl<'a> Scenario<'a> {
    fn from_bytes(data: &'a [u8]) -> Option<Scenario<'a>> {
        let (&pick, rest) = data.split_first()?;
        // TLS itself is rustls's to fuzz: Gemini and HTTPS framing is read over plain TCP.
        let protocol = match pick % 4 {
            0 => Protocol::Gopher,
            1 => Protocol::Gemini,
            2 => Protocol::Http,
            _ => Protocol::Tcp,
        };
        let mut chunks = Vec::new();
        let mut start = 0;
        for i in 0..rest.len().saturating_sub(1) {
            if i >= start && rest[i] == 0xFF && rest[i + 1] == 0x00 {
                chunks.push(&rest[start..i]);
                start = i + 2;
            }
        }
        chunks.push(&rest[start.min(rest.len())..]);
        Some(Scenario {
            protocol,
            head: pick & 0x10 != 0,
            keepalive: pick & 0x20 == 0,
            chunks,
        })
    }
}

/// Serves `data` (see [`Scenario`]) as the response to one request of a reqcost client, on
/// loopback, and reads it with the client's own framing. Any panic, or an exchange that does
/// not end once the server has closed, is a bug.
pub fn response(data: &[u8]) {
    let Some(scenario) = Scenario::from_bytes(data) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime starts");
    runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("loopback listens");
        let addr = listener
            .local_addr()
            .expect("a bound listener has an address");
        let server = async {
            let (mut conn, _) = listener.accept().await.expect("the client connects");
            let mut request = [0u8; 1024];
            let _ = conn.read(&mut request).await;
            for chunk in &scenario.chunks {
                if conn.write_all(chunk).await.is_err() || conn.flush().await.is_err() {
                    break;
                }
            }
        };
        let mut client = scenario.client(addr);
        let mut req = Request::new();
        req.target.extend_from_slice(b"/");
        if scenario.head {
            req.method = crate::Method::Head;
        }
        let exchange = async {
            let _ = client.exchange(&req).await;
        };
        tokio::time::timeout(Duration::from_secs(30), async {
            tokio::join!(server, exchange)
        })
        .await
        .expect("an exchange ends when the server closes");
    });
}

impl Scenario<'_> {
    fn client(&self, addr: SocketAddr) -> Client {
        let cfg = ClientConfig {
            protocol: self.protocol,
            addr,
            tls: None,
            quic: None,
            authority: addr.to_string(),
            keepalive: self.keepalive,
            headers: Vec::new(),
            connect_timeout: Duration::from_secs(5),
            max_response: 256 * 1024,
            bandwidth: None,
            rcvbuf: None,
            source: None,
        };
        Client::new(Rc::new(cfg), Rc::new(Cell::new(0)))
    }
}
