//! compress-per-request: ≥ 20 % of the samples in zlib/brotli/zstd, the same response asked
//! again and again (one class with ≥ 10 requests and ≥ 50 % of the CPU, or one URL), a third
//! signal at ≥ 50 %.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{GroupCost, RequestStats, RunRecord};

use crate::util::{
    add_stack, assert_fires, assert_silent_on, edit, edited, fired, main, user_frame, Expected,
};

/// The clean fixture (200 samples, no compression) with `samples` more in zlib's static
/// function under deflate, called from nginx's gzip filter.
pub(crate) fn gzip(samples: u64) -> RunRecord {
    edited(|r| {
        let chain = [
            user_frame("libz.so.1.2.13!0x4970", "libz.so.1.2.13"),
            user_frame("deflate", "libz.so.1.2.13"),
            user_frame("ngx_http_gzip_body_filter", "nginx"),
            user_frame("main", "nginx"),
        ];
        add_stack(r, &chain, samples);
    })
}

/// `rec` with per-request accounting whose costliest class has `requests` requests and
/// `share_pct` of the phase's CPU.
fn one_class(rec: RunRecord, requests: u64, share_pct: f64) -> RunRecord {
    edit(rec, |r| {
        main(r).requests = Some(RequestStats {
            requests: 100,
            by_class: vec![GroupCost {
                name: "GET /234k.txt".into(),
                requests,
                cpu_share_pct: share_pct,
                ..GroupCost::default()
            }],
            ..RequestStats::default()
        });
    })
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &gzip(50),
        "compress-per-request",
        Expected {
            title: "20 % of the CPU compresses responses (zlib compression (gzip/deflate), libz.so.1.2.13)",
            evidence: &[
                "20 % of CPU samples in libz.so.1.2.13 (zlib compression (gzip/deflate))",
                "entered through deflate from ngx_http_gzip_body_filter [nginx]",
                "100 requests for http://127.0.0.1:8080/1k.html: the same response compressed each time",
            ],
            share: 0.2,
            confidence: Confidence::Medium,
        },
    );
    let f = fired(&one_class(gzip(50), 10, 50.0), "compress-per-request");
    assert!(
        f.evidence
            .iter()
            .any(|e| e == "class GET /234k.txt: 10 requests, 50 % of the phase's CPU: the same response compressed each time"),
        "{f:#?}"
    );
    assert_eq!(
        fired(&gzip(200), "compress-per-request").confidence,
        Confidence::High
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "compress-per-request",
        &[
            ("19.7 % of the samples", gzip(49)),
            ("9 requests in the class", one_class(gzip(200), 9, 90.0)),
            (
                "49.9 % of the CPU in the class",
                one_class(gzip(200), 50, 49.9),
            ),
            (
                "a requests file of many URLs, no accounting",
                edit(gzip(200), |r| {
                    r.workload.requests_file = Some("urls.txt".into())
                }),
            ),
            ("the same URL without compression", edited(|_| {})),
        ],
    );
}

/// Node.js carries its own zlib, linked into the `node` binary: its compressor is known by its
/// functions' names (`longest_match` under `deflate_slow`), not by a library's file name; the
/// program's other functions are not compression.
#[test]
fn a_compressor_linked_into_the_program_is_known_by_its_functions() {
    let node = |leaf: &str, samples| {
        edited(|r| {
            let chain = [
                user_frame(leaf, "node"),
                user_frame("deflate_slow", "node"),
                user_frame("node::ZlibContext::DoThreadPoolWork", "node"),
            ];
            add_stack(r, &chain, samples);
        })
    };
    let f = fired(&node("longest_match", 50), "compress-per-request");
    assert_eq!(
        f.title,
        "20 % of the CPU compresses responses (compression linked into the program, node), the same ones on every request"
    );
    assert_silent_on(
        "compress-per-request",
        &[("node's own code, not its zlib", node("uv_run", 50))],
    );
}
