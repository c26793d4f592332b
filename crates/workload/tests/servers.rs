//! The load generator against real servers from Debian's packages on loopback: nginx and
//! lighttpd (HTTP/1.1, HTTPS), molly-brown (Gemini), gophernicus (gopher).

mod common;

use std::path::Path;
use std::process::Command;

use common::{options, phase, plan, run, run_main, run_phase};
use reqcost_record::ClientStats;
use reqcost_testkit::config::{self, NginxConf};
use reqcost_testkit::{binary, command, free_port, self_signed, Server, TempDir};
use reqcost_workload::{Format, Method, WorkloadOptions};

/// nginx serving 1 KB, 200 KB and a server-side-include page (sent chunked).
fn nginx_www(tls: bool) -> Server {
    let dir = TempDir::new("nginx");
    dir.write("www/1k.txt", &[b'x'; 1024]);
    dir.write("www/200k.bin", &vec![b'z'; 200 * 1024]);
    dir.write(
        "www/ssi/page.html",
        b"<p><!--# set var=\"v\" value=\"chunked body\" --><!--# echo var=\"v\" --></p>",
    );
    let cert = tls.then(|| self_signed(&dir));
    let port = free_port();
    let argv = config::nginx(
        dir.path(),
        port,
        &NginxConf {
            main: "master_process off; events { worker_connections 1024; }",
            http: "access_log {dir}/access.log;",
            server: "keepalive_requests 100000; location /ssi/ { ssi on; }",
            tls: cert.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
        },
    );
    Server::start(command(&argv), port, dir)
}

#[test]
fn http_keepalive_reuses_one_connection_per_slot() {
    let srv = nginx_www(false);
    let url = format!("http://127.0.0.1:{}/1k.txt", srv.port);
    let s = run_main(WorkloadOptions {
        concurrency: 4,
        ..options(&url, 200)
    });
    assert_eq!((s.requests, s.ok), (200, 200), "{s:?}");
    assert!(s.errors.is_empty(), "{s:?}");
    assert_eq!(s.connections, 4, "keep-alive: one connection per slot");
    assert_eq!(s.statuses.get("200"), Some(&200));
    let request = format!(
        "GET /1k.txt HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nUser-Agent: reqcost\r\n\r\n",
        srv.port
    );
    assert_eq!(s.bytes_sent, 200 * request.len() as u64);
    assert_eq!(
        s.bytes_received % 200,
        0,
        "every response has the same size"
    );
    assert!(s.bytes_received / 200 > 1024);
    assert!(s.latency.p50_us > 0.0 && s.latency.max_us >= s.latency.p99_us);
    assert_eq!(
        s.latency_histogram.iter().map(|b| b.count).sum::<u64>(),
        200
    );
}

#[test]
fn http_close_head_and_statuses() {
    let srv = nginx_www(false);
    let url = format!("http://127.0.0.1:{}/1k.txt", srv.port);
    let s = run_main(WorkloadOptions {
        concurrency: 2,
        keepalive: false,
        ..options(&url, 30)
    });
    assert_eq!((s.ok, s.connections), (30, 30), "{s:?}");

    let s = run_main(WorkloadOptions {
        concurrency: 2,
        method: Method::Head,
        ..options(&url, 30)
    });
    assert_eq!((s.ok, s.connections), (30, 2), "{s:?}");
    assert!(
        s.bytes_received / 30 < 1024,
        "HEAD responses carry no body: {s:?}"
    );

    let missing = format!("http://127.0.0.1:{}/missing", srv.port);
    let s = run_main(options(&missing, 10));
    assert_eq!(
        (s.ok, s.connections),
        (10, 1),
        "a 404 is a complete exchange: {s:?}"
    );
    assert_eq!(s.statuses.get("404"), Some(&10));
}

/// The access log once it has `lines` lines, or after a minute (a bound for an nginx that
/// never logs, however loaded the machine): nginx logs a request after its response has gone
/// out, so the last lines can trail the client.
fn access_log(path: &Path, lines: usize) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(path).unwrap();
        if text.lines().count() >= lines || std::time::Instant::now() >= deadline {
            return text;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn http_chunked_bodies_keep_the_connection() {
    let srv = nginx_www(false);
    let url = format!("http://127.0.0.1:{}/ssi/page.html", srv.port);
    let s = run_main(WorkloadOptions {
        concurrency: 2,
        ..options(&url, 50)
    });
    assert_eq!((s.ok, s.connections), (50, 2), "{s:?}");
    assert_eq!(s.bytes_received % 50, 0);
    let log = access_log(&srv.dir.join("access.log"), 50);
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("GET /ssi/page.html"))
            .count(),
        50
    );
}

#[test]
fn https_with_a_self_signed_certificate() {
    let srv = nginx_www(true);
    let url = format!("https://localhost:{}/1k.txt", srv.port);
    let s = run_main(WorkloadOptions {
        concurrency: 2,
        ..options(&url, 40)
    });
    assert_eq!((s.ok, s.connections), (40, 2), "{s:?}");
    assert_eq!(s.statuses.get("200"), Some(&40));
    assert!(s.bytes_received >= 40 * 1024);
}

/// Three requests to replay (GET, GET, HEAD), a POST and a malformed line.
const REPLAY_LOG: &str = concat!(
    "10.0.0.1 - - [23/Jun/2024:10:00:00 +0000] \"GET /1k.txt HTTP/1.1\" 200 1024 \"-\" \"bot\"\n",
    "10.0.0.2 - - [23/Jun/2024:10:00:01 +0000] \"POST /form HTTP/1.1\" 200 12\n",
    "10.0.0.3 - - [23/Jun/2024:10:00:02 +0000] \"GET /200k.bin HTTP/1.1\" 200 204800 \"-\" \"bot\"\n",
    "a line that is not in log format\n",
    "10.0.0.4 - - [23/Jun/2024:10:00:03 +0000] \"HEAD /1k.txt HTTP/1.0\" 200 0\n",
);

#[test]
fn access_log_replay_with_classes() {
    let srv = nginx_www(false);
    let dir = TempDir::new("log");
    let log = dir.write("access.log", REPLAY_LOG.as_bytes());
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let base = WorkloadOptions {
        requests: Some(log),
        ..options(&url, 6)
    };

    let err = base.plan().err().expect("a malformed line is an error");
    assert!(
        err.to_string()
            .contains("access.log:4: malformed access-log line"),
        "{err}"
    );

    let p = plan(WorkloadOptions {
        skip_bad: true,
        classes: vec!["small=\\.txt$".into(), "big=^/200k".into()],
        ..base
    });
    assert_eq!(p.requests_format(), Some(Format::AccessLog));
    let names: Vec<String> = p.phases().into_iter().map(|ph| ph.name).collect();
    assert_eq!(names, ["main", "class:small", "class:big"]);
    let d = p.describe();
    assert_eq!(
        d.options.get("requests-in-file").map(String::as_str),
        Some("3")
    );

    let main = run(&p, "main");
    assert_eq!(main.ok, 6, "{main:?}");
    // Two passes over the file: each skips the POST and the malformed line.
    assert_eq!(main.skipped.get("method POST"), Some(&2));
    assert_eq!(main.skipped.get("malformed"), Some(&2));
    let served = access_log(&srv.dir.join("access.log"), 6);
    let order: Vec<&str> = served
        .lines()
        .map(|l| l.split('"').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(
        order,
        [
            "GET /1k.txt HTTP/1.1",
            "GET /200k.bin HTTP/1.1",
            "HEAD /1k.txt HTTP/1.1",
            "GET /1k.txt HTTP/1.1",
            "GET /200k.bin HTTP/1.1",
            "HEAD /1k.txt HTTP/1.1"
        ],
        "replayed in order, with each line's method"
    );

    let big = run(&p, "class:big");
    assert_eq!(big.ok, 6);
    assert!(big.bytes_received >= 6 * 200 * 1024, "{big:?}");
    let small = run(&p, "class:small");
    assert_eq!(small.ok, 6);
    assert!(small.bytes_received < 6 * 2048, "{small:?}");
}

#[test]
fn open_loop_keeps_its_schedule() {
    let srv = nginx_www(false);
    let url = format!("http://127.0.0.1:{}/1k.txt", srv.port);
    let p = plan(WorkloadOptions {
        concurrency: 2,
        rate: Some(200.0),
        ..options(&url, 50)
    });
    let s = run(&p, "main");
    assert_eq!(s.ok, 50, "{s:?}");
    // Request 49 is scheduled 49/200 s after the start: no run can be shorter.
    assert!(s.elapsed_s >= 0.245, "{s:?}");
    assert_eq!(p.describe().rate_per_s, Some(200.0));
}

#[test]
fn slow_clients_take_as_long_as_their_bandwidth_says() {
    let srv = nginx_www(false);
    let url = format!("http://127.0.0.1:{}/200k.bin", srv.port);
    let p = plan(WorkloadOptions {
        client_bandwidth: Some(100 * 1024),
        ..options(&url, 1)
    });
    let main = phase(&p, "main");
    assert_eq!(main.client_model, "100 KiB/s per connection, rcvbuf 8 KiB");
    let s = run(&p, "main");
    assert_eq!(s.ok, 1, "{s:?}");
    assert!(s.bytes_received > 200 * 1024);
    // 200 KiB read at 100 KiB/s: at least ~2 s whatever the machine's speed.
    assert!(s.latency.min_us >= 1.5e6, "{:?}", s.latency);

    let fast = plan(options(&url, 1));
    let slow_phase = fast.slow_client_phase(1, 100 * 1024);
    assert_eq!(
        (slow_phase.name.as_str(), slow_phase.measured),
        ("slow-clients", true)
    );
    let s = run_phase(&fast, &slow_phase);
    assert_eq!(s.ok, 1);
    assert!(s.latency.min_us >= 1.5e6, "{:?}", s.latency);
}

#[test]
fn lighttpd_http() {
    let dir = TempDir::new("lighttpd");
    dir.write("www/index.html", b"<h1>lighttpd</h1>\n");
    let port = free_port();
    let argv = config::lighttpd(dir.path(), port, "index-file.names = (\"index.html\")");
    let srv = Server::start(command(&argv), port, dir);
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let s = run_main(WorkloadOptions {
        concurrency: 2,
        ..options(&url, 100)
    });
    assert_eq!((s.ok, s.connections), (100, 2), "{s:?}");
    assert_eq!(s.statuses.get("200"), Some(&100));
}

/// 30 requests over 3 connections, taking the paths of a three-line `list` in turn; none fails.
fn replay_list(url: &str, list: &Path) -> ClientStats {
    let s = run_main(WorkloadOptions {
        requests: Some(list.to_path_buf()),
        concurrency: 3,
        ..options(url, 30)
    });
    assert!(s.errors.is_empty(), "{s:?}");
    s
}

#[test]
fn molly_brown_gemini() {
    let bin = binary("molly-brown");
    let dir = TempDir::new("molly");
    let (cert, key) = self_signed(&dir);
    dir.write("docs/index.gmi", b"# Hello\n=> /about.gmi About\n");
    dir.write("docs/about.gmi", b"About this capsule.\n");
    let port = free_port();
    let d = dir.path().display();
    let conf = format!(
        "Port = {port}\nHostname = \"localhost\"\nCertPath = \"{}\"\nKeyPath = \"{}\"\n\
         DocBase = \"{d}/docs\"\nAccessLog = \"{d}/access.log\"\nErrorLog = \"{d}/error.log\"\n",
        cert.display(),
        key.display()
    );
    let conf = dir.write("molly.conf", conf.as_bytes());
    let list = dir.write("paths.txt", b"/\n/about.gmi\n/missing.gmi\n");
    let mut cmd = Command::new(bin);
    cmd.arg("-c").arg(conf);
    let srv = Server::start(cmd, port, dir);

    let url = format!("gemini://localhost:{}/", srv.port);
    let s = replay_list(&url, &list);
    assert_eq!(
        (s.ok, s.connections),
        (30, 30),
        "one TLS connection per request: {s:?}"
    );
    assert_eq!(s.statuses.get("20"), Some(&20));
    assert_eq!(
        s.statuses.get("51"),
        Some(&10),
        "missing file is status 51: {s:?}"
    );

    let s = run_main(WorkloadOptions {
        tls_resume: false,
        ..options(&url, 10)
    });
    assert_eq!(s.statuses.get("20"), Some(&10), "{s:?}");
}

#[test]
fn gophernicus_gopher() {
    let (gophernicus, activate) = (binary("gophernicus"), binary("systemd-socket-activate"));
    let dir = TempDir::new("gopher");
    dir.write("root/hello.txt", b"hello gopher\n");
    dir.write("root/big.bin", &vec![7u8; 64 * 1024]);
    let list = dir.write("selectors.txt", b"/hello.txt\n/big.bin\n/\n");
    let _ = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(dir.path())
        .status();
    let port = free_port();
    // gophernicus is an inetd server and refuses to run as root.
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    let mut cmd = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(activate);
        c
    } else {
        Command::new(activate)
    };
    cmd.args(["--inetd", "-l"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("-a")
        .arg(gophernicus)
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-nv", "-r"])
        .arg(dir.path().join("root"));
    let srv = Server::start(cmd, port, dir);

    let url = format!("gopher://127.0.0.1:{}/", srv.port);
    let s = replay_list(&url, &list);
    assert_eq!((s.ok, s.connections), (30, 30), "{s:?}");
    assert!(s.bytes_received >= 10 * (64 * 1024 + 13), "{s:?}");
    assert_eq!(
        s.bytes_sent,
        10 * (b"/hello.txt\r\n".len() + b"/big.bin\r\n".len() + b"/\r\n".len()) as u64
    );

    let s = run_main(options(
        &format!("gopher://127.0.0.1:{}/9/big.bin", srv.port),
        5,
    ));
    assert_eq!(
        s.bytes_received,
        5 * 64 * 1024,
        "type 9 is sent as is: {s:?}"
    );
}

/// What nginx served after its first `skip` requests, as a sorted list of
/// "CLIENT REQUEST-LINE" from its access log.
fn served_requests(srv: &Server, skip: usize, lines: usize) -> Vec<String> {
    let log = access_log(&srv.dir.join("access.log"), skip + lines);
    let mut served: Vec<String> = log
        .lines()
        .skip(skip)
        .map(|l| {
            let client = l.split(' ').next().unwrap_or("");
            format!("{client} {}", l.split('"').nth(1).unwrap_or(""))
        })
        .collect();
    served.sort();
    served
}

/// Runs `phases` of `options` against nginx with one load thread, then two: returns each
/// run's stats by phase and what nginx served.
fn one_then_two_threads(
    options: WorkloadOptions,
    phases: &[&str],
) -> [(Vec<ClientStats>, Vec<String>); 2] {
    let srv = nginx_www(false);
    let mut served_before = 0;
    [1, 2].map(|threads| {
        let p = plan(WorkloadOptions {
            url: options.url.replace("PORT", &srv.port.to_string()),
            threads: Some(threads),
            ..options.clone()
        });
        let stats: Vec<ClientStats> = phases.iter().map(|name| run(&p, name)).collect();
        for s in &stats {
            assert_eq!(s.load_threads, Some(threads), "{s:?}");
        }
        let sent = stats.iter().map(|s| s.requests as usize).sum();
        let served = served_requests(&srv, served_before, sent);
        served_before += sent;
        (stats, served)
    })
}

/// The counts that must not depend on the number of load threads. (Connections can: with a
/// client mix, a slot connects once for each group it happens to send requests of.)
fn counts(s: &ClientStats) -> impl PartialEq + std::fmt::Debug + '_ {
    (
        (s.requests, s.ok),
        (s.bytes_sent, s.bytes_received),
        (&s.errors, &s.statuses, &s.skipped),
    )
}

#[test]
fn two_threads_send_what_one_sends_closed_loop_with_classes() {
    let dir = TempDir::new("log");
    let not_found = "10.0.0.5 - - [23/Jun/2024:10:00:04 +0000] \"GET /nothing HTTP/1.1\" 404 0\n";
    let log = dir.write("access.log", format!("{REPLAY_LOG}{not_found}").as_bytes());
    let options = WorkloadOptions {
        requests: Some(log),
        skip_bad: true,
        concurrency: 3,
        classes: vec!["small=\\.txt$".into(), "big=^/200k".into()],
        ..options("http://127.0.0.1:PORT/", 11)
    };
    let phases = ["main", "class:small", "class:big"];
    let [(one, served_one), (two, served_two)] = one_then_two_threads(options, &phases);
    for (name, (a, b)) in phases.iter().zip(one.iter().zip(&two)) {
        assert_eq!(a.requests, 11, "{name}: {a:?}");
        assert_eq!(counts(a), counts(b), "{name}");
    }
    assert_eq!(one[0].statuses.get("404"), Some(&2), "{:?}", one[0]);
    assert_eq!(one[0].skipped.get("method POST"), Some(&3));
    for s in [&one[0], &two[0]] {
        assert_eq!(s.connections, 3, "keep-alive: one connection per slot");
    }
    assert_eq!(served_one.len(), 33);
    assert_eq!(served_one, served_two, "the same requests, class by class");
}

#[test]
fn two_threads_send_what_one_sends_open_loop() {
    let options = WorkloadOptions {
        concurrency: 2,
        rate: Some(400.0),
        ..options("http://127.0.0.1:PORT/1k.txt", 31)
    };
    let [(one, served_one), (two, served_two)] = one_then_two_threads(options, &["main"]);
    assert_eq!((one[0].requests, one[0].ok), (31, 31), "{:?}", one[0]);
    assert_eq!(counts(&one[0]), counts(&two[0]));
    assert_eq!(served_one, served_two);
    // Request 30 is scheduled 30/400 s after the start, whichever thread sends it.
    assert!(two[0].elapsed_s >= 0.075, "{:?}", two[0]);
}

#[test]
fn two_threads_keep_the_client_mix() {
    let options = WorkloadOptions {
        concurrency: 4,
        client_mix: vec![(70.0, None), (30.0, None)],
        ..options("http://127.0.0.1:PORT/1k.txt", 23)
    };
    let [(one, served_one), (two, served_two)] = one_then_two_threads(options, &["main"]);
    assert_eq!(counts(&one[0]), counts(&two[0]));
    let from = |served: &[String], ip: &str| served.iter().filter(|l| l.starts_with(ip)).count();
    assert_eq!(
        (
            from(&served_one, "127.0.0.10 "),
            from(&served_one, "127.0.0.11 ")
        ),
        (16, 7),
        "{served_one:?}"
    );
    assert_eq!(served_one, served_two, "each group the same requests");
}

#[test]
fn threads_never_outnumber_connections() {
    let url = "http://127.0.0.1:8080/";
    let p = plan(WorkloadOptions {
        concurrency: 2,
        threads: Some(4),
        ..options(url, 10)
    });
    assert_eq!(p.load_threads(), 2);
    let e = WorkloadOptions {
        threads: Some(0),
        ..options(url, 10)
    }
    .plan()
    .err()
    .expect("--threads 0 is refused");
    assert_eq!(e.to_string(), "--threads must be at least 1");
}
