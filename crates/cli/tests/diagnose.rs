//! Diagnosis in the open world (issue 24): Debian's servers in configurations their users get
//! wrong. Each verdict rests on what dominates by far (a library at 90 %+ of the samples, a fork
//! per connection), not on timing.

use std::path::Path;

use crate::util::*;
use reqcost_analysis::findings::{diagnose, Finding};
use reqcost_record::RunRecord;
use reqcost_testkit::config::{self, NginxConf};
use reqcost_testkit::TempDir;

/// Size of the text file the gzip runs serve, as in the issue's table.
const TEXT_BYTES: usize = 234 * 1024;

/// `scratch/www/234k.txt`: lines of words from a fixed-seed generator, text that compresses as
/// a web page does (about 3:1), the same bytes every run.
fn www_text(scratch: &TempDir) -> std::path::PathBuf {
    const WORDS: [&str; 16] = [
        "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "server", "request",
        "cost", "kernel", "socket", "buffer", "compress", "level",
    ];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut text = String::with_capacity(TEXT_BYTES + 128);
    while text.len() < TEXT_BYTES {
        for i in 0..12 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            text.push_str(WORDS[(state % 16) as usize]);
            text.push(if i == 11 { '\n' } else { ' ' });
        }
    }
    text.truncate(TEXT_BYTES);
    let dir = scratch.join("www");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("234k.txt");
    std::fs::write(&path, text).unwrap();
    path
}

/// `reqcost run` of `server` with `args`, asserting it answered every request of reqcost's own
/// load; the record and the text `reqcost report` prints of it.
fn run_and_report(
    tag: &str,
    scratch: &TempDir,
    args: &[&str],
    server: &[String],
) -> (RunRecord, String) {
    let (out, record) = run_saved(scratch, args, server);
    assert!(out.status.success(), "{tag}: {}", stderr(&out));
    let record = record.unwrap_or_else(|| panic!("{tag}: no record saved"));
    let main = record.main_phase().expect("main phase");
    // Under --load the client is not reqcost's and counts nothing here.
    if record.workload.load.is_none() {
        assert!(main.client.ok > 0, "{tag}: no request answered");
        assert_eq!(
            main.client.error_count(),
            0,
            "{tag}: {:?}",
            main.client.errors
        );
    }
    let path = scratch.join("run.json");
    let report = reqcost(&["report", path.to_str().unwrap()]);
    assert!(report.status.success(), "{tag}: {}", stderr(&report));
    let text = String::from_utf8_lossy(&report.stdout).into_owned();
    eprintln!("{tag}:\n{text}");
    (record, text)
}

/// The rows of one table of the profile section, by its title.
fn table<'a>(text: &'a str, title: &str) -> Vec<&'a str> {
    let start = text
        .find(title)
        .unwrap_or_else(|| panic!("no {title:?} in:\n{text}"));
    text[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with("     ") && !l.trim().is_empty())
        .collect()
}

/// nginx serving the text file with `http` directives, under a client asking for gzip.
fn nginx_gzip(tag: &str, http: &str, prepare: impl FnOnce(&Path)) -> (RunRecord, String) {
    let (scratch, port) = scratch_and_port(tag);
    let file = www_text(&scratch);
    prepare(&file);
    let server = config::nginx(
        scratch.path(),
        port,
        &NginxConf {
            http,
            ..NginxConf::default()
        },
    );
    let url = format!("http://127.0.0.1:{port}/234k.txt");
    let args = [
        "--url",
        &url,
        "--header",
        "Accept-Encoding: gzip",
        "-n",
        "60",
        "--no-slow-phase",
    ];
    run_and_report(tag, &scratch, &args, &server)
}

#[test]
fn nginx_gzip_level_9_profile_shows_zlib() {
    let _alone = machine_alone();
    let (record, text) = nginx_gzip(
        "nginx-gzip9",
        "access_log off; gzip on; gzip_comp_level 9; gzip_types text/plain;",
        |_| {},
    );
    // Compressed: the client received about a third of the file per request.
    let main = record.main_phase().unwrap();
    let per = main.client.bytes_received / main.client.ok;
    assert!(per < TEXT_BYTES as u64 / 2, "{per} bytes per response");

    // libz's hot static function is one row, named by its .eh_frame start, not one row per
    // instruction address.
    let by_self = table(&text, "top functions by self time");
    let libz: Vec<&&str> = by_self.iter().filter(|l| l.contains("libz.so")).collect();
    assert!(
        by_self[0].contains("libz.so.1.2.13!0x") && by_self[0].ends_with("[libz.so.1.2.13]"),
        "{text}"
    );
    assert!(!libz.iter().any(|l| l.contains("+0x")), "{text}");
    let first = by_self[0].split_whitespace().nth(2).unwrap();
    assert_eq!(by_self.iter().filter(|l| l.contains(first)).count(), 1);
    // The library line names zlib, and deflate leads the inclusive list once start-up and the
    // main loop are left out.
    assert!(
        text.contains("by library (self time): libz.so.1.2.13 ")
            && text.contains("(zlib compression (gzip/deflate))"),
        "{text}"
    );
    let by_total = table(&text, "top functions by total time");
    assert!(
        by_total
            .iter()
            .take(3)
            .any(|l| l.contains(" deflate  [libz.so.1.2.13]")),
        "{text}"
    );
    assert!(!by_total.iter().any(|l| l.contains(" _start ")), "{text}");
    assert!(
        text.contains("frames of start-up and the main loop"),
        "{text}"
    );
}

#[test]
fn nginx_gzip_static_profile_has_no_zlib() {
    let _alone = machine_alone();
    let (record, text) = nginx_gzip(
        "nginx-gzip-static",
        "access_log off; gzip_static on; sendfile on;",
        |file| {
            let status = std::process::Command::new("gzip")
                .args(["-9", "-k", "-n"])
                .arg(file)
                .status()
                .expect("gzip runs");
            assert!(status.success());
        },
    );
    assert!(!text.contains("zlib compression"), "{text}");
    let findings = diagnose(&record);
    assert!(
        findings
            .iter()
            .all(|f| f.id != "compress-per-request" && !f.title.contains("zlib")),
        "{findings:#?}"
    );
}

/// A Node.js `http` server whose response is 2000 lines, each its own `res.write`.
const NODE_LINE_BY_LINE: &str = r#"
const http = require('http');
const lines = [];
for (let i = 0; i < 2000; i++) lines.push(`line ${i} of the response, written on its own\n`);
http.createServer((req, res) => {
  res.writeHead(200, {'Content-Type': 'text/plain'});
  for (const l of lines) res.write(l);
  res.end();
}).listen(+process.argv[2], '127.0.0.1');
"#;

#[test]
fn node_without_a_perf_map_says_how_to_name_js_frames() {
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port("node-lines");
    let script = scratch.join("server.js");
    std::fs::write(&script, NODE_LINE_BY_LINE).unwrap();
    let server = vec![
        "/usr/bin/node".to_string(),
        script.display().to_string(),
        port.to_string(),
    ];
    let url = format!("http://127.0.0.1:{port}/");
    let (record, text) = run_and_report(
        "node-lines",
        &scratch,
        &["--url", &url, "-n", "300", "--no-slow-phase"],
        &server,
    );
    let main = record.main_phase().unwrap();
    assert!(main.client.bytes_received / main.client.ok > 90_000);
    // The generic finding names the runtime, with the same hint.
    let findings = diagnose(&record);
    assert!(
        findings.iter().any(|f| f
            .evidence
            .iter()
            .any(|e| e.contains("`node --perf-basic-prof`"))),
        "{findings:#?}"
    );
    let notes = &text[text.find("profile notes").expect("profile notes")..];
    assert!(
        notes.contains("JIT or interpreted code without names: Node.js: start it with `node --perf-basic-prof`"),
        "{text}"
    );
}

/// Debian's apache2 (prefork) serving 1 KB, a connection per request, with `extra` directives
/// and reqcost's `more` arguments: the record and its findings. 200 requests: a child per
/// connection spends most of the CPU starting and ending processes at any count, and 500 made
/// this the longest alone test.
fn apache2_prefork(tag: &str, extra: &str, more: &[&str]) -> (RunRecord, Vec<Finding>) {
    let (scratch, port) = scratch_and_port(tag);
    scratch.write("htdocs/1k.txt", &[b'x'; 1024]);
    let server = config::apache2(scratch.path(), port, extra);
    let url = format!("http://127.0.0.1:{port}/1k.txt");
    let mut args = vec![
        "--url",
        &url,
        "-n",
        "200",
        "--no-keepalive",
        "--no-slow-phase",
    ];
    args.extend(more);
    let (record, _) = run_and_report(tag, &scratch, &args, &server);
    let findings = diagnose(&record);
    (record, findings)
}

#[test]
fn apache2_prefork_with_a_child_per_connection_names_process_creation_first() {
    let _alone = machine_alone();
    let (record, findings) =
        apache2_prefork("apache2-child-per-conn", "MaxConnectionsPerChild 1", &[]);
    let tree = record
        .main_phase()
        .unwrap()
        .server
        .kernel
        .as_ref()
        .unwrap()
        .tree;
    // A child ends with each connection; the children already spare as the phase began (a
    // few) served its first connections unforked.
    assert!(
        tree.processes_exited >= 200 && tree.processes_forked >= 150,
        "{tree:?}"
    );
    assert_eq!(
        findings.first().map(|f| f.id.as_str()),
        Some("process-per-request"),
        "{findings:#?}"
    );
    // The mapping storm the new processes bring ranks below its cause.
    let rank = |id: &str| findings.iter().position(|f| f.id == id);
    if let Some(churn) = rank("alloc-churn") {
        assert!(churn > 0, "{findings:#?}");
    }
}

#[test]
fn apache2_prefork_with_lasting_children_has_no_process_finding() {
    let _alone = machine_alone();
    let (_, findings) =
        apache2_prefork("apache2-lasting-children", "MaxConnectionsPerChild 0", &[]);
    assert!(
        findings.iter().all(|f| f.id != "process-per-request"),
        "{findings:#?}"
    );
    // HostnameLookups is Off by default: the twin of the lookup per request below.
    assert!(
        findings.iter().all(|f| f.id != "hostname-lookup"),
        "{findings:#?}"
    );
}

/// Debian's apache2 (prefork) serving 1 KB over keep-alive connections it closes after a few
/// requests (`MaxKeepAliveRequests 4`: 5 requests each), with `extra` directives: the record and its findings.
fn apache2_kept_alive(tag: &str, extra: &str) -> (RunRecord, Vec<Finding>) {
    let (scratch, port) = scratch_and_port(tag);
    scratch.write("htdocs/1k.txt", &[b'x'; 1024]);
    let extra = format!("KeepAlive On\nMaxKeepAliveRequests 4\n{extra}");
    let server = config::apache2(scratch.path(), port, &extra);
    let url = format!("http://127.0.0.1:{port}/1k.txt");
    let args = ["--url", &url, "-n", "400", "--no-slow-phase"];
    let (record, _) = run_and_report(tag, &scratch, &args, &server);
    let findings = diagnose(&record);
    (record, findings)
}

/// A child per connection whose connections carry 5 requests each: 0.2 forks per request, one
/// per connection, judged per connection.
#[test]
fn apache2_prefork_with_a_child_per_kept_alive_connection_names_it_per_connection() {
    let _alone = machine_alone();
    let (record, findings) =
        apache2_kept_alive("apache2-child-per-keepalive", "MaxConnectionsPerChild 1");
    // apache2 closed its connections after 5 requests here (MaxKeepAliveRequests counts the
    // ones after the first): 80 connections for 400 requests.
    let main = record.main_phase().unwrap();
    let accepted = main.server.kernel.as_ref().unwrap().sockets.accepted;
    let carried = main.units() / accepted as f64;
    assert!(
        (3.0..=6.0).contains(&carried),
        "{carried} requests per connection ({accepted} accepted)"
    );
    let first = findings.first().expect("a finding");
    assert_eq!(first.id, "process-per-request", "{findings:#?}");
    assert!(first.title.contains("per connection"), "{}", first.title);
    // Each new child walks / and systemd's userdb by components (openat of `usr`, `run`, ...)
    // beside the access log it keeps open: no log is reopened.
    assert!(
        findings.iter().all(|f| f.id != "log-per-request"),
        "{findings:#?}"
    );
}

/// Workers recycled every 10 connections of 5 requests (`MaxConnectionsPerChild 10`): named
/// with how often; the twin keeping its children has no process finding.
#[test]
fn apache2_prefork_recycling_its_children_is_named_with_how_often() {
    let _alone = machine_alone();
    let (_, findings) = apache2_kept_alive("apache2-recycled", "MaxConnectionsPerChild 10");
    let f = findings
        .iter()
        .find(|f| f.id == "process-per-request")
        .unwrap_or_else(|| panic!("{findings:#?}"));
    assert!(
        f.title
            .starts_with("recycled workers: one worker replaced every"),
        "{}",
        f.title
    );
    let (_, findings) = apache2_kept_alive("apache2-kept-children", "MaxConnectionsPerChild 0");
    assert!(
        findings.iter().all(|f| f.id != "process-per-request"),
        "{findings:#?}"
    );
}

/// `HostnameLookups On`: apache2 reverse-resolves each client, reading /etc/hosts on every
/// connection (one request each here): a hostname lookup, not a log reopened. Sampled at
/// 1999 Hz: at 499 Hz the 200 requests make about 50 samples, the least a share is taken from.
#[test]
fn apache2_resolving_each_client_names_the_hostname_lookup() {
    let _alone = machine_alone();
    let (record, findings) = apache2_prefork(
        "apache2-hostname-lookups",
        "HostnameLookups On",
        &["--freq", "1999"],
    );
    let main = record.main_phase().unwrap();
    let opened = &main.server.kernel.as_ref().unwrap().opened;
    let f = findings
        .iter()
        .find(|f| f.id == "hostname-lookup")
        .unwrap_or_else(|| {
            panic!(
                "{} requests, opened {opened:#?}: {findings:#?}",
                main.units()
            )
        });
    assert!(f.title.contains("/etc/hosts"), "{}", f.title);
    assert!(
        findings.iter().all(|f| f.id != "log-per-request"),
        "{findings:#?}"
    );
}

/// seeds/004's UDP bulk server driven by the testbed's client as `--load`: no request is
/// counted, so the rules that run on totals judge it per MiB, and those that need requests say
/// so.
#[test]
fn the_udp_bulk_server_under_load_gets_findings_per_mib() {
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port("udp-bulk-load");
    let client = testbed().join("build").join("udp-bulk-client");
    let load = format!("{} --port {port} -c 10 -b 4194304", client.display());
    let server = testbed_server("udp-bulk-select", port);
    let port_arg = port.to_string();
    let (record, text) = run_and_report(
        "udp-bulk-load",
        &scratch,
        &["--load", &load, "--port", &port_arg],
        &server,
    );
    let main = record.main_phase().unwrap();
    assert_eq!(main.units_of(reqcost_record::Unit::MiB), Some(40.0));
    let findings = diagnose(&record);
    let send = findings
        .iter()
        .find(|f| f.id == "datagram-per-send")
        .unwrap_or_else(|| panic!("{findings:#?}"));
    assert!(
        send.title.contains("1024 datagrams of 1024 B per MiB"),
        "{}",
        send.title
    );
    assert!(
        text.contains("not evaluated: ") && text.contains("no requests counted"),
        "{text}"
    );
    assert!(!text.contains("nothing in this run matches"), "{text}");
}

/// Debian's nginx over TLS (its session cache on) under `openssl s_time` as `--load`, a new
/// connection per request: with `-new` each is a full handshake, with `-reuse` each resumes the
/// first session. The record and its findings.
fn nginx_tls_under_s_time(tag: &str, mode: &str) -> (RunRecord, Vec<Finding>) {
    let (scratch, port) = scratch_and_port(tag);
    scratch.write("www/1k.txt", &[b'x'; 1024]);
    let (cert, key) = reqcost_testkit::self_signed(&scratch);
    let conf = NginxConf {
        http: "access_log off; ssl_session_cache shared:SSL:1m;",
        tls: Some((&cert, &key)),
        ..NginxConf::default()
    };
    let server = config::nginx(scratch.path(), port, &conf);
    let load = format!("openssl s_time -connect 127.0.0.1:{port} {mode} -time 2 -www /1k.txt");
    let port_arg = port.to_string();
    let args = ["--load", &load, "--port", &port_arg, "--load-once"];
    let (record, _) = run_and_report(tag, &scratch, &args, &server);
    let findings = diagnose(&record);
    (record, findings)
}

/// A full handshake per connection under a client reqcost does not speak for: the server's
/// TLS library counted them, so tls-handshake names them first (not dominant-code's libcrypto);
/// resumed, they get no finding.
#[test]
fn nginx_doing_a_full_handshake_per_connection_under_load_names_it() {
    let _alone = machine_alone();
    let (record, findings) = nginx_tls_under_s_time("nginx-tls-new", "-new");
    let stats = record.main_phase().unwrap().requests.clone().unwrap();
    assert!(stats.tls_full_handshakes >= 20, "{stats:?}");
    assert_eq!(stats.tls_resumed_handshakes, 0, "{stats:?}");
    let first = findings.first().expect("a finding");
    assert_eq!(first.id, "tls-handshake", "{findings:#?}");
    let told = format!(
        "the server's TLS library: {} full and 0 resumed",
        stats.tls_full_handshakes
    );
    assert!(
        first.evidence.iter().any(|e| e.starts_with(&told)),
        "{told}: {:?}",
        first.evidence
    );
    let (record, findings) = nginx_tls_under_s_time("nginx-tls-reuse", "-reuse");
    let stats = record.main_phase().unwrap().requests.clone().unwrap();
    assert!(
        stats.tls_resumed_handshakes >= stats.tls_handshakes / 2,
        "{stats:?}"
    );
    assert!(
        findings
            .iter()
            .all(|f| f.id != "tls-handshake" && f.id != "dominant-code"),
        "{findings:#?}"
    );
}
