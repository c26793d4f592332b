//! Diagnosis in the open world (issue 24): Debian's servers in configurations their users get
//! wrong. Each verdict rests on what dominates by far (a library at 90 %+ of the samples, a fork
//! per connection), not on timing.

use std::path::Path;

use crate::util::*;
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

/// `reqcost run` of `server` with `args`, asserting it answered every request; the record and
/// the text `reqcost report` prints of it.
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
    assert!(main.client.ok > 0, "{tag}: no request answered");
    assert_eq!(
        main.client.error_count(),
        0,
        "{tag}: {:?}",
        main.client.errors
    );
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
    let (_, text) = nginx_gzip(
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
    let notes = &text[text.find("profile notes").expect("profile notes")..];
    assert!(
        notes.contains("JIT or interpreted code without names: Node.js: start it with `node --perf-basic-prof`"),
        "{text}"
    );
}
