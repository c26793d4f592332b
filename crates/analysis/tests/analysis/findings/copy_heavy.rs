//! copy-heavy: ≥ 10 % of CPU samples with a copy function as their leaf user frame, ≥ 20 of
//! them, with callers.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{GroupCost, RequestStats, RunRecord, SampleTag};

use crate::util::{
    add_stack, assert_evidence, assert_fires, assert_silent, assert_silent_on, confidences, edit,
    edited, fired, kernel_frame, main, set_stack, user_frame, Expected,
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

/// `copies(50, 110)` with per-request accounting: the copies are class /big's samples (80 % of
/// the phase's CPU), the rest /small's (20 %).
fn two_classes() -> RunRecord {
    edit(copies(50, 110), |r| {
        main(r).requests = Some(RequestStats {
            requests: 100,
            by_class: [("/big", 800), ("/small", 200)]
                .map(|(name, cpu_ns)| GroupCost {
                    name: name.into(),
                    requests: 50,
                    cpu_ns,
                    cpu_share_pct: cpu_ns as f64 / 10.0,
                    ..GroupCost::default()
                })
                .to_vec(),
            attributed_cpu_ns: 1000,
            tallied_cpu_ns: 1000,
            ..RequestStats::default()
        });
        let p = r.profile.as_mut().unwrap();
        p.tags = ["/big", "/small"]
            .map(|c| SampleTag {
                class: c.into(),
                phase: "main".into(),
                ..SampleTag::default()
            })
            .to_vec();
        for s in &mut p.stacks {
            let copy = p.frames[s.frames[0] as usize].function == "memcpy";
            s.tag = Some(if copy { 0 } else { 1 });
        }
    })
}

#[test]
fn each_carrier_class_names_its_own_hot_code() {
    let f = fired(&two_classes(), "copy-heavy");
    assert_eq!(
        f.carriers,
        [
            "class /big: 80 % of the phase's CPU",
            "class /small: 20 % of the phase's CPU"
        ]
    );
    assert_evidence(
        &f,
        &[
            "class /big's own samples (50): memcpy 100 % self (← ngx_output_chain ← ngx_http_process_request ← main)",
            "class /small's own samples (150): ngx_http_parse_request_line 73 % self (← ngx_http_process_request ← main), tcp_sendmsg 27 % self",
        ],
    );
}

#[test]
fn an_untagged_profile_adds_no_class_code() {
    let rec = edit(two_classes(), |r| {
        let p = r.profile.as_mut().unwrap();
        p.tags.clear();
        p.stacks.iter_mut().for_each(|s| s.tag = None);
    });
    let f = fired(&rec, "copy-heavy");
    assert!(
        !f.evidence.iter().any(|e| e.contains("own samples")),
        "{f:#?}"
    );
}
