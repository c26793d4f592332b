//! copy-heavy: ≥ 10 % of CPU samples with a copy function as their leaf user frame, ≥ 20 of
//! them, with callers.

use reqcost_analysis::findings::Confidence;
use reqcost_record::RunRecord;

use crate::util::{
    add_stack, assert_evidence, assert_share, assert_silent, edited, fired, kernel_frame,
    set_stack, user_frame,
};

/// The fixture's profile with `copies` samples in memcpy (called from ngx_output_chain ←
/// ngx_http_process_request ← main), 40 in the network stack and `other` elsewhere.
fn copies(copies: u64, other: u64) -> RunRecord {
    edited(|r| {
        set_stack(r, "memcpy", copies);
        set_stack(r, "ngx_http_parse_request_line", other);
    })
}

#[test]
fn fires_at_a_tenth_of_the_samples() {
    let f = fired(&copies(20, 140), "copy-heavy");
    assert!(
        f.title.starts_with("10 % of CPU copies memory"),
        "{}",
        f.title
    );
    assert_evidence(
        &f,
        &[
            "10.0 % of CPU samples in memcpy/memmove (20 of 200)",
            "called from ngx_output_chain ← ngx_http_process_request ← main (20 samples)",
        ],
    );
    assert_share(&f, 0.10);
    assert_eq!(f.confidence, Confidence::Medium);
}

#[test]
fn silent_below_a_tenth_of_the_samples() {
    assert_silent(&copies(20, 141), "copy-heavy");
}

#[test]
fn silent_below_20_samples() {
    // 19 of 190: a tenth, but too few samples to tell from chance.
    assert_silent(&copies(19, 131), "copy-heavy");
}

#[test]
fn silent_on_a_large_share_of_a_tiny_profile() {
    let rec = edited(|r| {
        set_stack(r, "memcpy", 10);
        set_stack(r, "tcp_sendmsg", 0);
        set_stack(r, "ngx_http_parse_request_line", 10);
    });
    assert_silent(&rec, "copy-heavy");
}

#[test]
fn silent_without_callers() {
    let rec = edited(|r| {
        set_stack(r, "memcpy", 0);
        add_stack(r, &[user_frame("memcpy", "libc.so.6")], 100);
    });
    assert_silent(&rec, "copy-heavy");
}

#[test]
fn a_quarter_of_the_samples_is_high_confidence() {
    assert_eq!(
        fired(&copies(50, 110), "copy-heavy").confidence,
        Confidence::High
    );
    assert_eq!(
        fired(&copies(49, 111), "copy-heavy").confidence,
        Confidence::Medium
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
