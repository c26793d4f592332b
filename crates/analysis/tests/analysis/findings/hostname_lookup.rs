//! hostname-lookup: ≥ 0.9 opens of the resolver's files per request (or per connection where
//! connections carry several), with the resolver's code on ≥ 2 % of the samples, a second
//! resolver file as often, or ≥ 0.9 UDP datagrams sent as often.

use reqcost_analysis::findings::{diagnose, Confidence};
use reqcost_record::{FdKind, IoDirection, OpenedPath, RunRecord};

use crate::util::{
    add_stack, assert_evidence, assert_fires, assert_silent_on, edit, edited, fired, kernel, main,
    set_io, user_frame, Expected,
};

/// The main phase (100 requests on 2 connections, 100 openat of 2 µs) with these opens by path.
pub(crate) fn opened(paths: &[(&str, u64)]) -> RunRecord {
    edited(|r| {
        kernel(main(r)).opened = paths
            .iter()
            .map(|&(path, count)| OpenedPath {
                path: path.into(),
                count,
            })
            .collect();
    })
}

/// `rec` with `samples` in glibc's reverse lookup, under getnameinfo.
fn resolving(rec: RunRecord, samples: u64) -> RunRecord {
    edit(rec, |r| {
        let chain = [
            user_frame("libc.so.6!0x12f3a0", "libc.so.6"),
            user_frame("_nss_files_gethostbyaddr2_r", "libc.so.6"),
            user_frame("apr_getnameinfo", "libapr-1.so.0"),
            user_frame("main", "server"),
        ];
        add_stack(r, &chain, samples);
    })
}

/// `rec` with `datagrams` UDP datagrams sent in all.
fn querying(rec: RunRecord, datagrams: u64) -> RunRecord {
    edit(rec, |r| {
        set_io(
            main(r),
            "sendto",
            IoDirection::Write,
            FdKind::Udp,
            datagrams,
            datagrams * 40,
        )
    })
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &opened(&[
            ("/etc/hosts", 90),
            ("/etc/resolv.conf", 90),
            ("/srv/www/1k.html", 100),
        ]),
        "hostname-lookup",
        Expected {
            title: "a hostname lookup on every request: /etc/hosts opened 0.90 times per request",
            evidence: &[
                "/etc/hosts opened 0.90 times per request",
                "/etc/resolv.conf opened 0.90 times per request",
            ],
            // The resolver's 180 of 280 opens, of the opens' 2 µs per request.
            share: 2000.0 * 180.0 / 280.0 / 20_000.0,
            confidence: Confidence::Medium,
        },
    );
    // 5 of 205 samples under getnameinfo: 2.4 %, the share.
    let sampled = resolving(opened(&[("/etc/hosts", 100)]), 5);
    let f = fired(&sampled, "hostname-lookup");
    assert_evidence(&f, &["2 % of CPU samples in the resolver's code"]);
    crate::util::approx(f.cpu_share, 5.0 / 205.0);
    let queries = querying(opened(&[("/etc/hosts", 90)]), 90);
    assert_evidence(
        &fired(&queries, "hostname-lookup"),
        &["0.90 UDP datagrams sent per request: DNS queries"],
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "hostname-lookup",
        &[
            (
                "0.89 opens of /etc/hosts",
                opened(&[("/etc/hosts", 89), ("/etc/resolv.conf", 100)]),
            ),
            (
                "the second file 0.89 times",
                opened(&[("/etc/hosts", 100), ("/etc/resolv.conf", 89)]),
            ),
            (
                "1.96 % of the samples in the resolver",
                resolving(opened(&[("/etc/hosts", 100)]), 4),
            ),
            (
                "0.89 datagrams",
                querying(opened(&[("/etc/hosts", 100)]), 89),
            ),
            ("/etc/hosts alone", opened(&[("/etc/hosts", 100)])),
            (
                "the resolver's code without its files",
                resolving(opened(&[("/srv/www/1k.html", 100)]), 50),
            ),
            (
                "other files under /etc",
                opened(&[("/etc/passwd", 100), ("/etc/group", 100)]),
            ),
        ],
    );
}

/// A server resolving each client once per connection (Apache caches the name on it): 25
/// connections of 4 requests, /etc/hosts opened on each.
#[test]
fn a_lookup_per_kept_alive_connection_is_judged_per_connection() {
    let rec = edit(
        opened(&[("/etc/hosts", 25), ("/etc/resolv.conf", 25)]),
        |r| {
            kernel(main(r)).sockets.accepted = 25;
            main(r).client.connections = 25;
        },
    );
    let f = fired(&rec, "hostname-lookup");
    assert_eq!(
        f.title,
        "a hostname lookup on every connection: /etc/hosts opened 1.00 times per connection"
    );
}

/// Per-request opens of /etc/hosts beside an access log written on every request (kept open)
/// are a lookup, not a log reopened: hostname-lookup fires, log-per-request does not.
#[test]
fn the_resolvers_files_are_not_a_log() {
    let rec = edit(
        opened(&[
            ("/etc/hosts", 100),
            ("/etc/resolv.conf", 100),
            ("/srv/www/1k.html", 100),
        ]),
        |r| {
            let m = main(r);
            crate::util::set_syscall(m, "openat", 300, 300 * 2000);
            set_io(m, "write", IoDirection::Write, FdKind::File, 100, 10_000);
            kernel(m).sockets.other_closes = 300;
        },
    );
    let ids: Vec<String> = diagnose(&rec).into_iter().map(|f| f.id).collect();
    assert!(ids.contains(&"hostname-lookup".to_string()), "{ids:?}");
    assert!(!ids.contains(&"log-per-request".to_string()), "{ids:?}");
}
