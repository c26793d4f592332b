//! tls-handshake: on gemini:// and https://, ≥ 25 % of CPU samples with crypto code as their
//! leaf user frame and ≥ 0.9 connections accepted per request; not when the server resumed half
//! the sessions the client offered to resume.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{Frame, RunRecord};

use crate::util::{
    add_stack, assert_evidence, assert_fires, assert_share, assert_silent, assert_silent_on,
    confidences, edit, edited, fired, kernel, kernel_frame, main, set_stack, user_frame, Expected,
};

/// A handshake's chain: stripped libcrypto under libssl.
fn handshake_chain() -> [Frame; 4] {
    [
        user_frame(
            "libcrypto.so.3+0x1f2e3",
            "/usr/lib/x86_64-linux-gnu/libcrypto.so.3",
        ),
        user_frame("SSL_do_handshake", "/usr/lib/x86_64-linux-gnu/libssl.so.3"),
        user_frame("handle_connection", "server"),
        user_frame("main", "server"),
    ]
}

/// A Gemini server (100 requests) that accepted `accepted` connections, `crypto` of its 200
/// samples in `chain`.
fn gemini(chain: &[Frame], crypto: u64, accepted: u64) -> RunRecord {
    edited(|r| {
        r.workload.protocol = "gemini".into();
        r.workload.url = "gemini://127.0.0.1:1965/".into();
        kernel(main(r)).sockets.accepted = accepted;
        main(r).client.connections = accepted;
        set_stack(r, "ngx_http_parse_request_line", 150 - crypto);
        add_stack(r, chain, crypto);
    })
}

fn handshakes(crypto: u64, accepted: u64) -> RunRecord {
    gemini(&handshake_chain(), crypto, accepted)
}

/// `rec` whose client offered resumption and resumed `resumed` of its connections.
fn offered(rec: RunRecord, resumed: u64) -> RunRecord {
    edit(rec, |r| {
        r.workload
            .options
            .insert("tls-resumption".into(), "true".into());
        main(r).client.tls_resumed = Some(resumed);
    })
}

#[test]
fn only_for_tls_protocols() {
    let https = edit(handshakes(100, 100), |r| {
        r.workload.protocol = "https".into()
    });
    fired(&https, "tls-handshake");
    let http = edit(handshakes(100, 100), |r| {
        r.workload.protocol = "http".into()
    });
    assert_silent(&http, "tls-handshake");
}

#[test]
fn crypto_routines_count_by_name_in_a_static_binary() {
    let chain = [
        user_frame("ring_core_0_17_x25519_scalar_mult", "server"),
        user_frame("main", "server"),
    ];
    fired(&gemini(&chain, 50, 100), "tls-handshake");
}

#[test]
fn socket_writes_through_the_tls_library_are_not_crypto() {
    // Self time only: the leaf user frame is the write, not the library that called it.
    let chain = [
        kernel_frame("tcp_sendmsg"),
        user_frame("__write", "libc.so.6"),
        user_frame("SSL_write", "/usr/lib/x86_64-linux-gnu/libssl.so.3"),
        user_frame("main", "server"),
    ];
    assert_silent(&gemini(&chain, 100, 100), "tls-handshake");
}

#[test]
fn silent_when_the_server_resumed_half_the_offered_sessions() {
    assert_silent(&offered(handshakes(100, 100), 50), "tls-handshake");
    let f = fired(&offered(handshakes(100, 100), 49), "tls-handshake");
    assert_evidence(
        &f,
        &["the client offered session resumption; 49 % of 100 handshakes resumed"],
    );
    assert_eq!(f.confidence, Confidence::Medium);
}

#[test]
fn refused_resumption_is_high_confidence() {
    let resumed = |n| offered(handshakes(100, 100), n);
    assert_eq!(
        confidences("tls-handshake", &[resumed(9), resumed(10)]),
        [Confidence::High, Confidence::Medium]
    );
}

#[test]
fn not_judged_on_under_50_samples() {
    // 13 of 49 samples (27 %) in crypto; one more sample elsewhere makes 50.
    let small = |other: u64| {
        edit(handshakes(13, 100), |r| {
            set_stack(r, "memcpy", 0);
            set_stack(r, "tcp_sendmsg", 0);
            set_stack(r, "ngx_http_parse_request_line", other);
        })
    };
    assert_silent(&small(36), "tls-handshake");
    fired(&small(37), "tls-handshake");
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &handshakes(50, 90),
        "tls-handshake",
        Expected {
            title: "25 % of CPU is TLS crypto",
            evidence: &[
                "25.0 % of CPU samples in crypto code",
                "0.90 connections accepted per request",
                "the client did not offer session resumption (--no-tls-resume)",
            ],
            share: 0.25,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "tls-handshake",
        &[
            ("49 of 200 samples in crypto", handshakes(49, 100)),
            ("0.89 connections per request", handshakes(100, 89)),
            ("crypto over kept-alive connections", handshakes(140, 2)),
            (
                "a connection per request without crypto",
                handshakes(0, 100),
            ),
        ],
    );
}

/// `rec` whose server's TLS library told `full` full and `resumed` resumed handshakes.
fn told(rec: RunRecord, full: u64, resumed: u64) -> RunRecord {
    edit(rec, |r| {
        let stats = main(r).requests.get_or_insert_with(Default::default);
        stats.tls_handshakes = full + resumed;
        stats.tls_full_handshakes = full;
        stats.tls_resumed_handshakes = resumed;
    })
}

/// The server's own count of resumed handshakes decides, whoever the client is: half resumed
/// is silent, with or without a client's count; all full fires, naming the server's count,
/// high confidence when the client offered resumption.
#[test]
fn the_servers_own_count_of_resumed_handshakes_is_used_where_told() {
    assert_silent(&told(handshakes(100, 100), 50, 50), "tls-handshake");
    assert_silent(
        &told(offered(handshakes(100, 100), 0), 50, 50),
        "tls-handshake",
    );
    let f = fired(&told(handshakes(100, 100), 100, 0), "tls-handshake");
    assert_evidence(
        &f,
        &["the server's TLS library: 100 full and 0 resumed of 100 handshakes"],
    );
    assert_eq!(f.confidence, Confidence::Medium);
    let f = fired(
        &told(offered(handshakes(100, 100), 100), 95, 5),
        "tls-handshake",
    );
    assert_evidence(
        &f,
        &[
            "the server's TLS library: 95 full and 5 resumed of 100 handshakes, the client \
           offered session resumption",
        ],
    );
    assert_eq!(f.confidence, Confidence::High);
}

/// A TLS server under a client reqcost does not speak for (`--load`, `attach`): the server's
/// TLS library counted its handshakes, so the rule judges it like its own https client's run.
#[test]
fn judged_from_the_servers_count_under_any_client() {
    let external = |rec: RunRecord| {
        edit(rec, |r| {
            r.workload.protocol = "external".into();
            r.workload.url = "tcp://127.0.0.1:8443".into();
        })
    };
    let f = fired(
        &external(told(handshakes(100, 100), 100, 0)),
        "tls-handshake",
    );
    assert_eq!(
        f.title,
        "50 % of CPU is TLS crypto: a full handshake on every request"
    );
    // Without the server's count, a client reqcost cannot see says nothing of TLS.
    assert_silent(&external(handshakes(100, 100)), "tls-handshake");
}

/// `full` full and `resumed` resumed handshakes on 25 connections of 4 requests each, the full
/// ones `cpu_ns` of the phase's 2 ms; 40 of 200 samples in crypto.
fn kept_alive(full: u64, resumed: u64, cpu_ns: u64) -> RunRecord {
    edit(told(handshakes(40, 25), full, resumed), |r| {
        r.workload.protocol = "external".into();
        main(r).requests.as_mut().unwrap().tls_full_handshake_cpu_ns = cpu_ns;
    })
}

/// Connections carrying 4 requests each, a full handshake on every one: judged per connection
/// from the server's figures (0.25 accepts per request, under the 0.9 of the per-request case).
#[test]
fn a_full_handshake_per_kept_alive_connection_is_judged_per_connection() {
    assert_fires(
        &kept_alive(25, 0, 500_000),
        "tls-handshake",
        Expected {
            title: "25 % of CPU is TLS crypto: a full handshake on every connection (4.0 requests each)",
            evidence: &[
                "0.25 connections accepted per request",
                "the server's TLS library: 25 full and 0 resumed of 25 handshakes; the full ones 25 % of the CPU",
            ],
            share: 0.25,
            confidence: Confidence::Medium,
        },
    );
    // The full ones at 89 % of the CPU: their share, over the crypto samples' 20 %.
    fired(&kept_alive(25, 0, 1_780_000), "tls-handshake");
    assert_share(&fired(&kept_alive(25, 0, 1_780_000), "tls-handshake"), 0.89);
    assert_silent_on(
        "tls-handshake",
        &[
            (
                "the full handshakes 24.9 % of the CPU",
                kept_alive(25, 0, 498_000),
            ),
            ("89 % of the handshakes full", kept_alive(89, 11, 1_000_000)),
            ("no CPU told for them", kept_alive(25, 0, 0)),
            ("most resumed", kept_alive(5, 20, 1_000_000)),
        ],
    );
}
