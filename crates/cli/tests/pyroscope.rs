//! `--push-pyroscope`: the request a Pyroscope server gets (a receiver in the test reads it),
//! a push to nowhere that keeps the record, and a real Pyroscope that answers queries on the
//! pushed labels (ignored by default: Debian packages no Pyroscope, so the bootstrap cannot
//! provide one; `REQCOST_PYROSCOPE=PATH cargo test -p reqcost --test integration -- --ignored
//! a_real_pyroscope` runs it).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::util::*;
use reqcost_record::{RunRecord, SampleTag};
use reqcost_testkit::{free_port, go, output_ok, TempDir};

/// A Pyroscope v1 single binary, where the background build puts it (`REQCOST_PYROSCOPE`
/// names another).
const PYROSCOPE: &str = "/root/pyro/pyroscope";

/// A record with a profile and two phases, measured on the busy-wait testbed server.
fn busy_wait_record() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../analysis/tests/fixtures/busy-wait.json")
}

/// What one HTTP request to the receiver held.
struct Received {
    request_line: String,
    body: Vec<u8>,
}

/// Takes one HTTP request on a loopback port and answers it with `status`; the port and the
/// thread that yields the request.
fn receiver(status: &'static str) -> (u16, JoinHandle<Received>) {
    let (port, all) = receiver_of(status, 1);
    let one = std::thread::spawn(move || all.join().unwrap().remove(0));
    (port, one)
}

/// Takes `n` HTTP requests, one after the other, on a loopback port and answers each with
/// `status`; the port and the thread that yields them in the order they came.
fn receiver_of(status: &'static str, n: usize) -> (u16, JoinHandle<Vec<Received>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let thread = std::thread::spawn(move || {
        (0..n)
            .map(|_| {
                let (stream, _) = listener.accept().unwrap();
                take_request(stream, status)
            })
            .collect()
    });
    (port, thread)
}

fn take_request(stream: TcpStream, status: &str) -> Received {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    let mut length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).unwrap();
        if header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap();
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let answer = format!("HTTP/1.1 {status}\r\nContent-Length: 4\r\n\r\nnot\n");
    reader.get_mut().write_all(answer.as_bytes()).unwrap();
    Received {
        request_line: request_line.trim_end().to_string(),
        body,
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// The query parameters of an HTTP request line, decoded.
fn query_of(request_line: &str) -> Vec<(String, String)> {
    let target = request_line.split(' ').nth(1).unwrap();
    let query = target.split_once('?').unwrap().1;
    query
        .split('&')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), percent_decode(v))
        })
        .collect()
}

#[test]
fn report_pushes_the_pprof_with_its_labels() {
    let scratch = TempDir::new("pyro-push");
    let record = busy_wait_record();
    let rec = RunRecord::load(&record).unwrap();
    let (port, received) = receiver("200 OK");
    let url = format!("http://127.0.0.1:{port}");
    let out = reqcost(&["report", record.to_str().unwrap(), "--push-pyroscope", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    let got = received.join().unwrap();

    assert!(
        got.request_line.starts_with("POST /ingest?") && got.request_line.ends_with(" HTTP/1.1"),
        "{}",
        got.request_line
    );
    let profile = rec.profile.as_ref().unwrap();
    let from = rec.started_unix_s.floor() as u64;
    let until = (rec.started_unix_s + profile.duration_s).ceil() as u64;
    let expected = [
        (
            "name",
            format!(
                "busy-wait{{run_id={},phases=main+slow-clients,reqcost_version={}}}",
                rec.id, rec.reqcost_version
            ),
        ),
        ("from", from.to_string()),
        ("until", until.to_string()),
        ("format", "pprof".into()),
        ("sampleRate", profile.freq_hz.to_string()),
        ("spyName", "reqcost".into()),
    ]
    .map(|(k, v)| (k.to_string(), v));
    assert_eq!(query_of(&got.request_line), expected);

    let body = scratch.write("pushed.pb.gz", &got.body);
    let raw = output_ok(
        Command::new(go())
            .args(["tool", "pprof", "-raw"])
            .arg(&body),
        "go tool pprof",
    );
    let raw = String::from_utf8_lossy(&raw.stdout);
    assert!(raw.contains("PeriodType: cpu nanoseconds"), "{raw}");
    assert!(raw.contains("samples/count cpu/nanoseconds"), "{raw}");
    let hottest = &profile.frames[profile.stacks[0].frames[0] as usize].function;
    assert!(
        raw.contains(hottest.as_str()),
        "{hottest} missing from:\n{raw}"
    );
}

/// A tagged profile goes as one series per class: each push's name carries its `class` label,
/// and its pprof holds that class's samples only (with the class as sample labels too).
#[test]
fn the_push_sends_one_series_per_class() {
    let scratch = TempDir::new("pyro-push-class");
    let mut rec = RunRecord::load(&busy_wait_record()).unwrap();
    let p = rec.profile.as_mut().unwrap();
    let classes = ["gopher 1m.bin", "(unattributed)"];
    p.tags = classes
        .map(|c| SampleTag {
            class: c.into(),
            phase: "main".into(),
            ..SampleTag::default()
        })
        .to_vec();
    for (i, s) in p.stacks.iter_mut().enumerate() {
        s.tag = Some((i % 2) as u32);
    }
    let samples_of = |tag: u32| -> u64 {
        p.stacks
            .iter()
            .filter(|s| s.tag == Some(tag))
            .map(|s| s.count)
            .sum()
    };
    let expected_samples = [samples_of(0), samples_of(1)];
    let record = scratch.join("tagged.json");
    rec.save(&record).unwrap();
    let (port, received) = receiver_of("200 OK", 2);
    let url = format!("http://127.0.0.1:{port}");
    let out = reqcost(&["report", record.to_str().unwrap(), "--push-pyroscope", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut pushed: Vec<(String, u64, String)> = received
        .join()
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, got)| {
            let query = query_of(&got.request_line);
            let name = query.iter().find(|(k, _)| k == "name").unwrap().1.clone();
            let body = scratch.write(&format!("pushed{i}.pb.gz"), &got.body);
            let pprof = |arg: &str| {
                let out = output_ok(
                    Command::new(go()).args(["tool", "pprof", arg]).arg(&body),
                    "go tool pprof",
                );
                String::from_utf8_lossy(&out.stdout).into_owned()
            };
            let samples = pprof("-raw")
                .lines()
                .skip_while(|l| !l.starts_with("Samples:"))
                .skip(2)
                .take_while(|l| !l.starts_with("Locations"))
                .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
                .sum();
            (name, samples, pprof("-tags"))
        })
        .collect();
    pushed.sort();
    let prefix = format!(
        "busy-wait{{run_id={},phases=main+slow-clients,reqcost_version={}",
        rec.id, rec.reqcost_version
    );
    let mut want: Vec<(String, u64)> = classes
        .iter()
        .zip(expected_samples)
        .map(|(c, n)| (format!("{prefix},class={c}}}"), n))
        .collect();
    want.sort();
    let got: Vec<(String, u64)> = pushed.iter().map(|(n, s, _)| (n.clone(), *s)).collect();
    assert_eq!(got, want);
    for ((name, _, tags), other) in pushed.iter().zip(pushed.iter().rev()) {
        let class = name.rsplit_once("class=").unwrap().1.trim_end_matches('}');
        let other = other
            .0
            .rsplit_once("class=")
            .unwrap()
            .1
            .trim_end_matches('}');
        assert!(tags.contains(class), "{class} missing from:\n{tags}");
        assert!(
            !tags.contains(other),
            "{other} in the series of {class}:\n{tags}"
        );
    }
}

#[test]
fn a_refused_push_names_the_url_and_the_answer() {
    let (port, received) = receiver("400 Bad Request");
    let url = format!("http://127.0.0.1:{port}/");
    let record = busy_wait_record();
    let args = [
        "report",
        record.to_str().unwrap(),
        "--push-pyroscope",
        &url,
        "--service",
        "busy wait",
    ];
    let out = reqcost(&args);
    let got = received.join().unwrap();
    assert!(
        got.request_line
            .starts_with("POST /ingest?name=busy_wait%7Brun_id%3D"),
        "{}",
        got.request_line
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let warning = format!(
        "warning: push to Pyroscope at http://127.0.0.1:{port} failed: 400 Bad Request: not"
    );
    assert!(err.contains(&warning), "{err}");
    // The summary is printed all the same.
    assert!(!out.stdout.is_empty());
}

#[test]
fn https_is_refused_before_anything_is_measured() {
    let out = reqcost(&[
        "run",
        "--url",
        "http://127.0.0.1:9/",
        "--push-pyroscope",
        "https://127.0.0.1:4040",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("https is not supported"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_push_to_nowhere_warns_and_keeps_the_record() {
    let _turn = machine_shared();
    let (scratch, port) = scratch_and_port("pyro-nowhere");
    let nowhere = free_port();
    let url = format!("gopher://127.0.0.1:{port}/9/200k.bin");
    let pyroscope = format!("http://127.0.0.1:{nowhere}");
    let args = [
        "--url",
        url.as_str(),
        "-n",
        "200",
        "-c",
        "1",
        "--no-slow-phase",
        "--push-pyroscope",
        pyroscope.as_str(),
    ];
    let (out, record) = run_saved(&scratch, &args, &testbed_server("copy-heavy", port));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let warning = format!("warning: push to Pyroscope at {pyroscope} failed: cannot connect");
    assert!(err.contains(&warning), "{err}");
    assert!(err.contains("push it again with `reqcost report"), "{err}");
    let record = record.expect("the record is saved despite the failed push");
    assert!(record.profile.is_some());
}

/// A Pyroscope single binary on loopback ports, with its storage in `dir`, killed on drop.
struct Pyroscope {
    child: Child,
    port: u16,
}

impl Pyroscope {
    fn start(binary: &Path, dir: &TempDir) -> Pyroscope {
        let (port, grpc, gossip) = (free_port(), free_port(), free_port());
        let flag = |k: &str, v: &dyn std::fmt::Display| format!("-{k}={v}");
        // Every component would advertise the machine's first interface address otherwise, and
        // reach for it while listening on loopback only.
        let loopback = [
            "compactor.ring.instance-addr",
            "distributor.ring.instance-addr",
            "ingester.lifecycler.addr",
            "overrides-exporter.ring.instance-addr",
            "query-frontend.instance-addr",
            "query-scheduler.ring.instance-addr",
            "store-gateway.sharding-ring.instance-addr",
        ]
        .map(|k| flag(k, &"127.0.0.1"));
        let args = [
            flag("server.http-listen-address", &"127.0.0.1"),
            flag("server.http-listen-port", &port),
            flag("server.grpc-listen-address", &"127.0.0.1"),
            flag("server.grpc-listen-port", &grpc),
            flag("memberlist.bind-addr", &"127.0.0.1"),
            flag("memberlist.bind-port", &gossip),
            flag("memberlist.advertise-addr", &"127.0.0.1"),
            flag("ingester.min-ready-duration", &"0s"),
            flag("pyroscopedb.data-path", &dir.join("data").display()),
            flag("storage.backend", &"filesystem"),
            flag("storage.filesystem.dir", &dir.join("shared").display()),
            flag("self-profiling.disable-push", &true),
            flag("tracing.enabled", &false),
        ];
        let child = Command::new(binary)
            .args(args)
            .args(loopback)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("pyroscope.log")).unwrap())
            .spawn()
            .expect("pyroscope starts");
        Pyroscope { child, port }
    }

    /// One HTTP/1.0 request; the status code and the body.
    fn http(&self, method: &str, path: &str, json: &str) -> Option<(u16, String)> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        let head = format!(
            "{method} {path} HTTP/1.0\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{json}",
            json.len()
        );
        s.write_all(head.as_bytes()).ok()?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).ok()?;
        let (status, body) = answer.split_once("\r\n\r\n")?;
        let code = status.split(' ').nth(1)?.parse().ok()?;
        Some((code, body.to_string()))
    }

    /// The values of label `name` on the series of `service` between `start` and `end` (Unix
    /// milliseconds), as the querier answers them.
    fn label_values(&self, name: &str, service: &str, start: u64, end: u64) -> String {
        let query = format!(
            r#"{{"name":"{name}","matchers":["{{service_name=\"{service}\"}}"],"start":{start},"end":{end}}}"#
        );
        self.http("POST", "/querier.v1.QuerierService/LabelValues", &query)
            .map(|(_, body)| body)
            .unwrap_or_default()
    }
}

impl Drop for Pyroscope {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

#[test]
#[ignore = "needs a Pyroscope binary, which Debian does not package: set REQCOST_PYROSCOPE to one and run with --ignored"]
fn a_real_pyroscope_answers_queries_on_the_pushed_labels() {
    let binary = std::env::var_os("REQCOST_PYROSCOPE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(PYROSCOPE));
    // Asked for by name, a test without its receiver fails rather than passing unchecked.
    assert!(
        binary.is_file(),
        "no Pyroscope binary at {}: set REQCOST_PYROSCOPE to one",
        binary.display()
    );
    let _turn = machine_shared();
    let (scratch, port) = scratch_and_port("pyro-real");
    let pyroscope = Pyroscope::start(&binary, &scratch);
    let ready = within(Duration::from_secs(120), || {
        matches!(pyroscope.http("GET", "/ready", ""), Some((200, _)))
    });
    let log = || std::fs::read_to_string(scratch.join("pyroscope.log")).unwrap_or_default();
    assert!(ready, "Pyroscope did not become ready:\n{}", log());

    let url = format!("gopher://127.0.0.1:{port}/9/200k.bin");
    let push = format!("http://127.0.0.1:{}", pyroscope.port);
    let args = [
        "--url",
        url.as_str(),
        "-n",
        "300",
        "-c",
        "1",
        "--push-pyroscope",
        push.as_str(),
        "--service",
        "reqcost-test",
    ];
    let (out, record) = run_saved(&scratch, &args, &testbed_server("copy-heavy", port));
    assert!(out.status.success(), "{}\n{}", stderr(&out), log());
    let record = record.unwrap();

    let start = (record.started_unix_s as u64 - 60) * 1000;
    let end = (record.started_unix_s as u64 + 600) * 1000;
    let run_ids = || pyroscope.label_values("run_id", "reqcost-test", start, end);
    let found = within(Duration::from_secs(60), || run_ids().contains(&record.id));
    assert!(found, "run {} not in {}:\n{}", record.id, run_ids(), log());
    let phases = pyroscope.label_values("phases", "reqcost-test", start, end);
    assert!(phases.contains("main+slow-clients"), "{phases}");
    // One series per class: the main phase's costliest class is a value of `class`.
    let class = &record
        .main_phase()
        .unwrap()
        .requests
        .as_ref()
        .unwrap()
        .by_class[0]
        .name;
    let classes = pyroscope.label_values("class", "reqcost-test", start, end);
    assert!(classes.contains(class.as_str()), "{class} not in {classes}");
}
