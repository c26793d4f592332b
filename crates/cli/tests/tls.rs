//! Requests inside TLS (issue 23): Debian's nginx over HTTPS with keep-alive, its plaintext read
//! through uprobes on OpenSSL; the handshake apart from the requests.

use crate::util::*;
use reqcost_record::RequestStats;
use reqcost_testkit::config::{self, NginxConf};
use reqcost_testkit::self_signed;

/// Server-side requests equal the requests sent, classed by path; the plaintext bytes the
/// server wrote are the bytes the client received (file sizes plus headers), and what it read
/// what the client sent. Each connection's handshake is counted apart, never as a request.
#[test]
fn nginx_https_keepalive_requests_are_counted_and_classed_inside_tls() {
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port("nginx-https");
    www_1k(&scratch);
    std::fs::write(scratch.join("www").join("10k.txt"), vec![b'x'; 10_000]).unwrap();
    let (cert, key) = self_signed(&scratch);
    let server = config::nginx(
        scratch.path(),
        port,
        &NginxConf {
            http: "access_log off; keepalive_timeout 65; keepalive_requests 100000;",
            tls: Some((&cert, &key)),
            ..NginxConf::default()
        },
    );
    let requests = scratch.write("paths.txt", b"/1k.txt\n/10k.txt\n");
    let url = format!("https://127.0.0.1:{port}/");
    let args = [
        "--url",
        &url,
        "--requests",
        requests.to_str().unwrap(),
        "-n",
        "400",
        "-c",
        "4",
        "--no-slow-phase",
    ];
    let (out, record) = run_saved(&scratch, &args, &server);
    assert!(out.status.success(), "{}", stderr(&out));
    let record = record.expect("record saved");
    let main = record.main_phase().unwrap();
    let stats: &RequestStats = main.requests.as_ref().expect("per-request figures");
    assert_eq!(main.client.ok, 400);
    assert_eq!(stats.requests, 400, "{stats:?}");
    let mut classes: Vec<(&str, u64)> = stats
        .by_class
        .iter()
        .map(|g| (g.name.as_str(), g.requests))
        .collect();
    classes.sort();
    assert_eq!(classes, [("GET /10k.txt", 200), ("GET /1k.txt", 200)]);
    let bytes = |f: fn(&reqcost_record::GroupCost) -> f64| {
        stats
            .by_class
            .iter()
            .map(|g| (f(g) * g.requests as f64).round() as u64)
            .sum::<u64>()
    };
    assert_eq!(
        bytes(|g| g.bytes_out_per_request),
        main.client.bytes_received
    );
    assert_eq!(bytes(|g| g.bytes_in_per_request), main.client.bytes_sent);
    let big = stats
        .by_class
        .iter()
        .find(|g| g.name == "GET /10k.txt")
        .unwrap();
    let small = stats
        .by_class
        .iter()
        .find(|g| g.name == "GET /1k.txt")
        .unwrap();
    // The files' sizes apart, and the headers that name the size: Content-Length in decimal
    // (10000, 1024) and the ETag in hex (2710, 400) each one digit longer.
    assert_eq!(
        (big.bytes_out_per_request - small.bytes_out_per_request).round(),
        (10_000 - 1024 + 1 + 1) as f64
    );
    assert_eq!(stats.tls_handshakes, main.client.connections, "{stats:?}");
    assert_eq!(stats.tls_ciphertext, 0);
    assert!(record
        .notes
        .iter()
        .any(|n| n.contains("uprobes on OpenSSL")));
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains(" handshakes, not requests: "), "{summary}");
    assert!(!summary.contains("count!"), "{summary}");
}

/// gtlsserver (QUIC over UDP, GnuTLS) serving `www/128k`, with its key and certificate.
fn gtlsserver(scratch: &reqcost_testkit::TempDir, port: u16) -> Vec<String> {
    let www = scratch.join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("128k"), vec![b'x'; 128 << 10]).unwrap();
    let (cert, key) = self_signed(scratch);
    [
        "gtlsserver",
        "-q",
        "-d",
        www.to_str().unwrap(),
        "127.0.0.1",
        &port.to_string(),
        key.to_str().unwrap(),
        cert.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

/// A quic:// URL means UDP readiness: the sweep with `--url quic://…` and `--load` runs (it
/// waited for a TCP listener before), and so does reqcost's own QUIC load.
#[test]
fn quic_urls_wait_for_the_udp_port() {
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port("quic-ready");
    let server = gtlsserver(&scratch, port);
    let url = format!("quic://127.0.0.1:{port}/128k");
    let load = format!(
        "gtlsclient -q --exit-on-all-streams-close -n 1 127.0.0.1 {port} https://127.0.0.1:{port}/128k"
    );
    let runs = scratch.join("runs");
    let mut args = vec![
        "sweep",
        "-c",
        "1,2",
        "--repeat",
        "1",
        "--url",
        &url,
        "--load",
        &load,
        "--no-sample",
        "--json",
        "--out-dir",
        runs.to_str().unwrap(),
        "--",
    ];
    args.extend(server.iter().map(String::as_str));
    let out = reqcost(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let sweep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sweep["records"].as_array().map(Vec::len), Some(2));
    let (out, record) = run_saved(
        &scratch,
        &[
            "--url",
            &url,
            "-n",
            "4",
            "-c",
            "1",
            "--no-slow-phase",
            "--no-sample",
        ],
        &server,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(record.unwrap().main_phase().unwrap().client.ok, 4);
}

/// molly-brown (Gemini, Go's crypto/tls, stripped), which reqcost does not hook: each TLS
/// connection is one request of class `(tls)` (Gemini sends one request per connection, so the
/// count is right), no ciphertext reaches a class name, and the output says the requests are
/// not visible and why.
#[test]
fn an_unhooked_tls_server_says_its_requests_are_not_visible() {
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port("molly");
    let (cert, key) = self_signed(&scratch);
    scratch.write("docs/index.gmi", b"# Hello\n=> /about.gmi About\n");
    scratch.write("docs/about.gmi", b"About this capsule.\n");
    let d = scratch.path().display();
    let conf = format!(
        "Port = {port}\nHostname = \"localhost\"\nCertPath = \"{}\"\nKeyPath = \"{}\"\n\
         DocBase = \"{d}/docs\"\nAccessLog = \"{d}/access.log\"\nErrorLog = \"{d}/error.log\"\n",
        cert.display(),
        key.display()
    );
    let conf = scratch.write("molly.conf", conf.as_bytes());
    let paths = scratch.write("paths.txt", b"/\n/about.gmi\n");
    let url = format!("gemini://localhost:{port}/");
    let args = [
        "--url",
        &url,
        "--requests",
        paths.to_str().unwrap(),
        "-n",
        "100",
        "-c",
        "2",
        "--no-slow-phase",
    ];
    let server = [
        "molly-brown".to_string(),
        "-c".into(),
        conf.display().to_string(),
    ];
    let (out, record) = run_saved(&scratch, &args, &server);
    assert!(out.status.success(), "{}", stderr(&out));
    let record = record.expect("record saved");
    let main = record.main_phase().unwrap();
    let stats = main.requests.as_ref().expect("per-request figures");
    assert_eq!(main.client.ok, 100);
    assert_eq!(stats.requests, main.client.connections, "{stats:?}");
    assert_eq!(stats.tls_ciphertext, stats.requests);
    let names: Vec<&str> = stats.by_class.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["(tls)"]);
    assert!(
        record.notes.iter().any(|n| n.contains("Go's crypto/tls")
            && n.contains("/usr/bin/molly-brown")
            && n.contains("not visible")),
        "{:?}",
        record.notes
    );
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains("count!") && summary.contains("plaintext reqcost could not read"),
        "{summary}"
    );
    assert!(
        summary.chars().all(|c| !c.is_control() || c == '\n'),
        "{summary}"
    );
}

/// Two files of different sizes in `www/`, the paths h2load is given for them, and the class
/// names the server side must give them.
fn two_paths(scratch: &reqcost_testkit::TempDir) -> [(&'static str, &'static str); 2] {
    www_1k(scratch);
    std::fs::write(scratch.join("www").join("10k.txt"), vec![b'x'; 10_000]).unwrap();
    [("1k.txt", "GET /1k.txt"), ("10k.txt", "GET /10k.txt")]
}

/// `h2load -n 3000 -c 4 -m 4` over `base` with both paths, run against `server`: its record and
/// summary, after checking that h2load sent 3000 requests.
fn h2load_two_paths(
    scratch: &reqcost_testkit::TempDir,
    base: &str,
    server: &[String],
) -> (reqcost_record::RunRecord, String) {
    let paths = two_paths(scratch);
    let load = format!(
        "h2load -n 3000 -c 4 -m 4 {base}{} {base}{}",
        paths[0].0, paths[1].0
    );
    let url = format!("{base}{}", paths[0].0);
    let (out, record) = run_saved(scratch, &["--url", &url, "--load", &load], server);
    assert!(out.status.success(), "{}", stderr(&out));
    let record = record.expect("record saved");
    let sent = record
        .workload
        .load
        .as_ref()
        .and_then(reqcost_analysis::counting::external_count);
    assert_eq!(sent, Some(3000), "{:?}", record.workload.load);
    (record, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// 3000 requests counted on the server side, one per stream, and classed by the path each
/// stream's header block names (HPACK, with the connection's dynamic table): h2load sends each
/// connection's URIs in turn, so 1500 of each; no count caveat.
fn assert_http2_classed(record: &reqcost_record::RunRecord, summary: &str) {
    let main = record.main_phase().unwrap();
    let stats = main.requests.as_ref().expect("per-request figures");
    assert_eq!(stats.requests, 3000, "{stats:?}");
    assert_eq!(main.units(), 3000.0);
    let mut classes: Vec<(&str, u64)> = stats
        .by_class
        .iter()
        .filter(|g| g.requests > 0)
        .map(|g| (g.name.as_str(), g.requests))
        .collect();
    classes.sort();
    assert_eq!(classes, [("GET /10k.txt", 1500), ("GET /1k.txt", 1500)]);
    assert_eq!(
        (
            stats.http2_unnamed,
            stats.http2_lost,
            stats.http2_connections
        ),
        (0, 0, 0)
    );
    assert!(!summary.contains("count!"), "{summary}");
}

/// nginx over HTTPS with HTTP/2, driven by h2load: 3000 requests on 4 connections, 4 streams at
/// a time, counted and classed from the TLS plaintext's frames; the 4 handshakes apart.
#[test]
fn nginx_https_http2_requests_are_counted_and_classed_by_path() {
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port("nginx-h2");
    let (cert, key) = self_signed(&scratch);
    let server = config::nginx(
        scratch.path(),
        port,
        &NginxConf {
            http: "access_log off; keepalive_requests 100000;",
            tls: Some((&cert, &key)),
            ..NginxConf::default()
        },
    );
    let conf = server.last().unwrap().clone();
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(&conf, text.replace(" ssl;", " ssl http2;")).unwrap();
    let (record, summary) =
        h2load_two_paths(&scratch, &format!("https://127.0.0.1:{port}/"), &server);
    assert_http2_classed(&record, &summary);
    let stats = record.main_phase().unwrap().requests.as_ref().unwrap();
    assert_eq!(stats.tls_handshakes, 4);
}

/// The same over HTTP/2 in the clear (h2c with prior knowledge, as h2load speaks it to an
/// http:// URL, nginx `listen ... http2;` without ssl): the frames are parsed on the socket.
#[test]
fn nginx_h2c_requests_are_counted_and_classed_by_path() {
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port("nginx-h2c");
    let server = config::nginx(
        scratch.path(),
        port,
        &NginxConf {
            http: "access_log off; keepalive_requests 100000;",
            ..NginxConf::default()
        },
    );
    let conf = server.last().unwrap().clone();
    let text = std::fs::read_to_string(&conf).unwrap();
    let listen = format!("listen 127.0.0.1:{port}");
    assert!(text.contains(&listen), "{text}");
    std::fs::write(&conf, text.replace(&listen, &format!("{listen} http2"))).unwrap();
    let (record, summary) =
        h2load_two_paths(&scratch, &format!("http://127.0.0.1:{port}/"), &server);
    assert_http2_classed(&record, &summary);
    let stats = record.main_phase().unwrap().requests.as_ref().unwrap();
    assert_eq!(stats.tls_handshakes, 0);
}

/// A server that reads its first 30 bytes alone, then whatever comes, answering `ok` to each
/// read: after the 24-byte HTTP/2 preface, its first read ends 6 bytes into a frame header.
const SPLITTING_SERVER: &str = r#"
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
while True:
    c, _ = s.accept()
    data = c.recv(30)
    while data:
        c.sendall(b"ok")
        data = c.recv(4096)
    c.close()
"#;

/// An h2c client with prior knowledge: the preface, SETTINGS and a first request in one write,
/// then nine more requests, each a HEADERS frame that ends its stream.
const H2C_CLIENT: &str = r#"
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
headers = lambda stream: bytes([0, 0, 3, 1, 5, 0, 0, 0, stream, 0x82, 0x86, 0x84])
c.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]) + headers(1))
for stream in range(3, 21, 2):
    c.sendall(headers(stream))
c.shutdown(socket.SHUT_WR)
while c.recv(4096):
    pass
"#;

/// Where the parser cannot follow the frames (here a frame header split between two reads), the
/// `http2-unparsed` caveat still says the count cannot be trusted.
#[test]
fn lost_http2_frames_are_said_in_the_count_caveat() {
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port("h2c-split");
    let client = scratch.write("client.py", H2C_CLIENT.as_bytes());
    let url = format!("http://127.0.0.1:{port}/");
    let load = format!("python3 {} {port}", client.display());
    let server: Vec<String> = ["python3", "-c", SPLITTING_SERVER, &port.to_string()]
        .map(String::from)
        .to_vec();
    let (out, record) = run_saved(
        &scratch,
        &["--url", &url, "--load", &load, "--no-sample"],
        &server,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let record = record.expect("record saved");
    let stats = record.main_phase().unwrap().requests.as_ref().unwrap();
    assert_eq!(stats.http2_lost, 1, "{stats:?}");
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary
            .lines()
            .any(|l| l.contains("count!") && l.contains("1 HTTP/2 connections' frames were lost")),
        "{summary}"
    );
}
