//! Broken and hostile peers cannot hang the load generator: every failure ends the request and
//! is counted under its own kind. The peers are real sockets on loopback that misbehave on
//! purpose, in threads of the test.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::{options, phase, plan, run_main};
use reqcost_testkit::{free_port, TempDir};
use reqcost_workload::{Method, WorkloadOptions};

/// Accepts connections forever in a thread, handing each to `serve` in its own thread.
fn peer(serve: impl Fn(TcpStream) + Send + Sync + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let serve = Arc::new(serve);
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let serve = serve.clone();
            thread::spawn(move || serve(conn));
        }
    });
    port
}

fn read_request(conn: &mut TcpStream) {
    let mut buf = [0u8; 1024];
    let _ = conn.read(&mut buf);
}

/// A peer that reads each request and holds the connection for `hold` without a word.
fn silent(hold: Duration) -> u16 {
    peer(move |mut c| {
        read_request(&mut c);
        thread::sleep(hold);
    })
}

/// A peer that answers each request with `reply` and leaves the connection to the client.
fn answering(reply: &'static [u8]) -> u16 {
    peer(move |mut c| {
        read_request(&mut c);
        let _ = c.write_all(reply);
    })
}

/// A peer that answers each request with `head`, then bytes for as long as the client reads.
fn endless(head: &'static [u8]) -> u16 {
    peer(move |mut c| {
        read_request(&mut c);
        let _ = c.write_all(head);
        let chunk = [b'x'; 16 * 1024];
        while c.write_all(&chunk).is_ok() {}
    })
}

#[test]
fn refused() {
    let url = format!("gopher://127.0.0.1:{}/", free_port());
    let s = run_main(options(&url, 5));
    assert_eq!((s.requests, s.ok), (5, 0));
    assert_eq!(s.errors.get("refused"), Some(&5), "{s:?}");
    assert_eq!(s.connections, 0);
}

#[test]
fn a_dead_server_ends_the_phase_after_ten_failures_in_a_row() {
    let url = format!("gopher://127.0.0.1:{}/", free_port());
    let s = run_main(options(&url, 1_000_000));
    assert_eq!((s.requests, s.ok), (10, 0));
    assert_eq!(s.errors.get("refused"), Some(&10), "{s:?}");
}

/// With the default 30 s request timeout, a server that accepts and never answers ends the
/// phase once it has said nothing for 10 s; the requests it held count as timeouts.
#[test]
fn a_silent_server_ends_the_phase_in_seconds() {
    let port = silent(Duration::from_secs(60));
    let url = format!("gopher://127.0.0.1:{port}/");
    // 4 requests sent of 1000, each a timeout: the phase gave up instead of waiting 30 s a
    // request.
    let s = run_main(WorkloadOptions {
        concurrency: 4,
        ..options(&url, 1000)
    });
    assert_eq!((s.requests, s.ok), (4, 0));
    assert_eq!(s.errors.get("timeout"), Some(&4), "{s:?}");
}

#[test]
fn silent_server_times_out() {
    let port = silent(Duration::from_secs(5));
    let url = format!("http://127.0.0.1:{port}/");
    let s = run_main(WorkloadOptions {
        concurrency: 2,
        request_timeout: Duration::from_millis(200),
        ..options(&url, 2)
    });
    assert_eq!(s.errors.get("timeout"), Some(&2), "{s:?}");
}

#[test]
fn endless_response_is_cut() {
    let port = endless(b"");
    let url = format!("gopher://127.0.0.1:{port}/");
    let s = run_main(WorkloadOptions {
        max_response: 256 * 1024,
        ..options(&url, 3)
    });
    assert_eq!(s.errors.get("too-large"), Some(&3), "{s:?}");
    assert!(s.bytes_received <= 3 * (256 * 1024 + 64 * 1024), "{s:?}");

    let http = endless(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n");
    let url = format!("http://127.0.0.1:{http}/");
    let s = run_main(WorkloadOptions {
        max_response: 1024 * 1024,
        ..options(&url, 2)
    });
    assert_eq!(s.errors.get("too-large"), Some(&2), "{s:?}");
}

#[test]
fn garbage_is_a_protocol_error() {
    let cases = [
        (
            "an SSH banner",
            "http",
            answering(b"SSH-2.0-OpenSSH_9.2\r\n\r\n"),
            3,
            "protocol",
        ),
        (
            "plain text for TLS",
            "gemini",
            answering(b"hello, I am not TLS\r\n"),
            2,
            "tls",
        ),
        (
            "an empty gopher response",
            "gopher",
            peer(|mut c| read_request(&mut c)),
            2,
            "protocol",
        ),
        (
            "a body shorter than its length",
            "http",
            answering(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"),
            2,
            "protocol",
        ),
    ];
    for (case, scheme, port, count, kind) in cases {
        let s = run_main(options(&format!("{scheme}://127.0.0.1:{port}/"), count));
        assert_eq!(s.errors.get(kind), Some(&count), "{case}: {s:?}");
    }
}

#[test]
fn closed_keepalive_connection_is_retried_once() {
    // Answers one request per connection without saying so, as a server whose keep-alive
    // timeout expired: the next request on it fails before any byte and is sent again.
    let port = answering(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    let url = format!("http://127.0.0.1:{port}/");
    let s = run_main(options(&url, 5));
    assert!(s.errors.is_empty(), "{s:?}");
    assert_eq!((s.ok, s.connections), (5, 5), "{s:?}");
}

#[test]
fn reset_by_peer() {
    // Closing with unread data in the receive queue makes the kernel send a RST: the peer
    // waits for the request to be there (peek leaves it unread), however late it comes.
    let port = peer(|c| {
        let _ = c.peek(&mut [0u8; 1]);
        drop(c);
    });
    let url = format!("tcp://127.0.0.1:{port}/hello");
    let s = run_main(options(&url, 2));
    assert_eq!(s.errors.get("reset"), Some(&2), "{s:?}");
}

#[test]
fn full_accept_queue_is_a_connect_timeout() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let listener = rt.block_on(async {
        let s = tokio::net::TcpSocket::new_v4().unwrap();
        s.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        s.listen(0).unwrap()
    });
    let addr = listener.local_addr().unwrap();
    // Fill the accept queue; later SYNs are dropped, so connecting never completes.
    let _held: Vec<TcpStream> = (0..3)
        .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok())
        .collect();
    let url = format!("http://{addr}/");
    let s = run_main(WorkloadOptions {
        connect_timeout: Duration::from_millis(300),
        ..options(&url, 2)
    });
    assert_eq!(s.errors.get("connect-timeout"), Some(&2), "{s:?}");
    drop(listener);
}

#[test]
fn stop_ends_a_phase_early_with_partial_figures() {
    let served = Arc::new(AtomicU64::new(0));
    let count = served.clone();
    let port = peer(move |mut c| {
        read_request(&mut c);
        if count.fetch_add(1, Ordering::SeqCst) < 5 {
            let _ =
                c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        } else {
            thread::sleep(Duration::from_secs(60));
        }
    });
    let url = format!("http://127.0.0.1:{port}/");
    let p = plan(WorkloadOptions {
        request_timeout: Duration::from_secs(60),
        ..options(&url, 1_000_000)
    });
    let main = phase(&p, "main");
    let stop = AtomicBool::new(false);
    let reports = AtomicU64::new(0);
    let s = thread::scope(|scope| {
        let worker = scope.spawn(|| {
            p.run(&main, &stop, &|_| {
                reports.fetch_add(1, Ordering::Relaxed);
            })
        });
        while served.load(Ordering::SeqCst) < 6 {
            thread::sleep(Duration::from_millis(10));
        }
        stop.store(true, Ordering::SeqCst);
        worker.join().unwrap()
    });
    assert_eq!(
        (s.requests, s.ok),
        (5, 5),
        "the request in flight is dropped: {s:?}"
    );
    assert!(reports.load(Ordering::Relaxed) >= 1);
}

#[test]
fn bad_input_is_one_clear_line() {
    let e = |o: WorkloadOptions| o.plan().err().expect("must fail").to_string();
    let gopher = || options("gopher://127.0.0.1:70/", 1000);
    let http = || options("http://127.0.0.1:80/", 1000);
    let messages = [
        e(options("gopher//x", 1000)),
        e(WorkloadOptions {
            requests: Some("/nonexistent/sel.txt".into()),
            ..gopher()
        }),
        e(WorkloadOptions {
            classes: vec!["x".into()],
            ..http()
        }),
        e(WorkloadOptions {
            classes: vec!["x=a".into()],
            ..http()
        }),
        e(WorkloadOptions {
            method: Method::Head,
            ..gopher()
        }),
        e(WorkloadOptions {
            concurrency: 0,
            ..gopher()
        }),
    ];
    assert_eq!(
        messages[0],
        "invalid --url \"gopher//x\": expected SCHEME://HOST:PORT/PATH with scheme gopher, gemini, http, https, tcp or quic"
    );
    assert!(
        messages[1].starts_with("cannot read requests file /nonexistent/sel.txt: "),
        "{}",
        messages[1]
    );
    assert_eq!(messages[2], "invalid --class \"x\": expected NAME=REGEX");
    assert!(
        messages[3].starts_with("--class needs --requests FILE"),
        "{}",
        messages[3]
    );
    assert!(
        messages[4].starts_with("--method HEAD needs an http"),
        "{}",
        messages[4]
    );
    assert_eq!(messages[5], "-c must be at least 1");
    assert!(messages.iter().all(|m| !m.contains('\n')), "{messages:?}");
}

#[test]
fn error_responses_are_counted_apart_from_successes() {
    let cases = [
        (
            "a gopher error item",
            "gopher",
            answering(b"3Not found\tfake\t(NULL)\t0\r\n.\r\n"),
            "gopher-error",
        ),
        (
            "an HTTP 503",
            "http",
            answering(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
            "http-5xx",
        ),
    ];
    for (case, scheme, port, kind) in cases {
        let s = run_main(options(&format!("{scheme}://127.0.0.1:{port}/"), 3));
        assert_eq!((s.requests, s.ok), (3, 0), "{case}: {s:?}");
        assert_eq!(s.errors.get(kind), Some(&3), "{case}: {s:?}");
    }
    // The status is still counted; text that merely starts with a 3 is a success.
    let s = run_main(options(
        &format!(
            "http://127.0.0.1:{}/",
            answering(b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        ),
        2,
    ));
    assert_eq!(s.statuses.get("500"), Some(&2), "{s:?}");
    let s = run_main(options(
        &format!("gopher://127.0.0.1:{}/", answering(b"3 little pigs\r\n")),
        2,
    ));
    assert_eq!((s.ok, s.error_count()), (2, 0), "{s:?}");
}

#[test]
fn gopher_url_paths_in_a_requests_file_are_warned_about() {
    let dir = TempDir::new("typed-paths");
    let typed = dir.write("typed.txt", b"/0/about.txt\n/1/menu\nplain.txt\n");
    let plain = dir.write("plain.txt", b"/about.txt\n/a/b.txt\nmenu\n");
    let warnings = |file: &std::path::Path, url: &str| {
        plan(WorkloadOptions {
            requests: Some(file.to_path_buf()),
            ..options(url, 1)
        })
        .warnings()
    };
    let w = warnings(&typed, "gopher://127.0.0.1:70/");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("typed.txt: 2 of 3 requests look like gopher URL paths (/TYPE/SELECTOR"),
        "{}",
        w[0]
    );
    assert_eq!(
        warnings(&plain, "gopher://127.0.0.1:70/"),
        Vec::<String>::new()
    );
    // In HTTP, /0/about.txt is just a path.
    let paths = dir.write("paths.txt", b"/0/about.txt\n/1/menu\n");
    assert_eq!(
        warnings(&paths, "http://127.0.0.1:80/"),
        Vec::<String>::new()
    );
}
