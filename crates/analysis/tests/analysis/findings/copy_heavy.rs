//! copy-heavy: ≥ 10 % of CPU samples with a copy function as their leaf user frame, ≥ 20 of
//! them, with callers.

use reqcost_analysis::findings::Confidence;
use reqcost_record::RunRecord;

use crate::util::{
    add_stack, assert_evidence, assert_fires, assert_silent, assert_silent_on, confidences, edited,
    fired, kernel_frame, set_stack, user_frame, Expected,
};

/// The fixture's profile with `copies` samples in memcpy (called from ngx_output_chain ←
/// ngx_http_process_request ← main), 40 in the network stack and `other` elsewhere.
fn copies(copies: u64, other: u64) -> RunRecord {
    edited(|r| {
        set_stack(r, "memcpy", copies);
        set_stack(r, "ngx_http_parse_request_line", other);
    })
}

/// A profile of 20 samples, half of them in memcpy.
fn tiny_profile() -> RunRecord {
    edited(|r| {
        set_stack(r, "memcpy", 10);
        set_stack(r, "tcp_sendmsg", 0);
        set_stack(r, "ngx_http_parse_request_line", 10);
    })
}

/// 100 of 290 samples in a memcpy with no caller in its chain.
fn without_callers() -> RunRecord {
    edited(|r| {
        set_stack(r, "memcpy", 0);
        add_stack(r, &[user_frame("memcpy", "libc.so.6")], 100);
    })
}

#[test]
fn a_quarter_of_the_samples_is_high_confidence() {
    assert_eq!(
        confidences("copy-heavy", &[copies(50, 110), copies(49, 111)]),
        [Confidence::High, Confidence::Medium]
    );
}

#[test]
fn a_copy_that_faulted_into_the_kernel_is_still_a_copy() {
    let rec = edited(|r| {
        set_stack(r, "memcpy", 0);
        add_stack(
            r,
            &[
                kernel_frame("asm_exc_page_fault"),
                user_frame("__memmove_avx_unaligned_erms", "libc.so.6"),
                user_frame("ngx_output_chain", "nginx"),
                user_frame("main", "nginx"),
            ],
            20,
        );
        set_stack(r, "ngx_http_parse_request_line", 140);
    });
    let f = fired(&rec, "copy-heavy");
    assert_evidence(&f, &["called from ngx_output_chain ← main (20 samples)"]);
}

#[test]
fn callers_known_only_by_address_do_not_count() {
    // 30 of 200 samples in memcpy, called from a stripped function but for `named` of them:
    // the stripped caller does not say who copies. Each side of the 20 named samples it needs.
    let unresolved = |named: u64| {
        edited(|r| {
            set_stack(r, "memcpy", named);
            add_stack(
                r,
                &[
                    user_frame("memcpy", "libc.so.6"),
                    user_frame("nginx+0x4f2a0", "nginx"),
                    user_frame("main", "nginx"),
                ],
                30 - named,
            );
            set_stack(r, "ngx_http_parse_request_line", 130);
        })
    };
    assert_silent(&unresolved(0), "copy-heavy");
    assert_silent(&unresolved(19), "copy-heavy");
    let f = fired(&unresolved(20), "copy-heavy");
    assert_evidence(
        &f,
        &[
            "15.0 % of CPU samples in memcpy/memmove (30 of 200)",
            "called from ngx_output_chain ← ngx_http_process_request ← main (20 samples)",
        ],
    );
    assert!(
        f.evidence.iter().all(|e| !e.contains("+0x")),
        "{:#?}",
        f.evidence
    );
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &copies(20, 140),
        "copy-heavy",
        Expected {
            title: "10 % of CPU copies memory",
            evidence: &[
                "10.0 % of CPU samples in memcpy/memmove (20 of 200)",
                "called from ngx_output_chain ← ngx_http_process_request ← main (20 samples)",
            ],
            share: 0.10,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "copy-heavy",
        &[
            ("20 of 201 samples", copies(20, 141)),
            // A tenth, but too few samples to tell from chance.
            ("19 of 190 samples", copies(19, 131)),
            ("10 of 20 samples", tiny_profile()),
            ("100 of 290 samples without callers", without_callers()),
        ],
    );
}
