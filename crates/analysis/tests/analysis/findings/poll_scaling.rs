//! poll-scaling: select/poll hand the kernel ≥ 16 fds per call, ≤ 25 % of them ready.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{RunRecord, WaitStat};

use crate::util::{
    add_stack, assert_evidence, assert_fires, assert_share, assert_silent, assert_silent_on, edit,
    edited, fired, kernel, kernel_frame, main, set_stack, user_frame, Expected,
};

/// The main phase (100 requests) waiting in `returns` poll calls that asked for `asked` fds in
/// all and found `ready` ready.
pub(crate) fn polls(returns: u64, asked: u64, ready: u64) -> RunRecord {
    edited(|r| {
        kernel(main(r)).waits = vec![WaitStat {
            syscall: "poll".into(),
            returns,
            zero_ready: 0,
            ready,
            fds_asked: asked,
        }];
    })
}

fn without_profile(rec: RunRecord) -> RunRecord {
    edit(rec, |r| r.profile = None)
}

/// `select_samples` of 200 samples in do_select.
fn select_profile(rec: RunRecord, select_samples: u64) -> RunRecord {
    edit(rec, |r| {
        set_stack(r, "ngx_http_parse_request_line", 150 - select_samples);
        add_stack(
            r,
            &[
                kernel_frame("do_select"),
                kernel_frame("core_sys_select"),
                user_frame("select", "libc.so.6"),
                user_frame("main", "server"),
            ],
            select_samples,
        );
    })
}

#[test]
fn epoll_maxevents_is_not_a_scan() {
    // The fixture's epoll_wait asks for 512 events and gets one each time.
    let rec = edited(|r| kernel(main(r)).waits[0].fds_asked = 302 * 4096);
    assert_silent(&rec, "poll-scaling");
}

#[test]
fn the_sampled_share_in_select_replaces_the_estimate() {
    let f = fired(&select_profile(polls(300, 4800, 0), 10), "poll-scaling");
    assert_share(&f, 0.05);
    assert_eq!(f.confidence, Confidence::High);
    let f = fired(&select_profile(polls(300, 4800, 0), 9), "poll-scaling");
    assert_share(&f, 0.045);
    assert_eq!(f.confidence, Confidence::Medium);
}

#[test]
fn a_profile_without_select_frames_does_not_make_the_share_zero() {
    // The fixture's profile (200 samples) has no do_select/do_sys_poll frame: 48 fds scanned per
    // request at 50 ns each is 2 400 ns of 20 µs, not the 0 % the profile would claim.
    let f = fired(&polls(300, 4800, 0), "poll-scaling");
    assert_share(&f, 0.12);
    assert_evidence(
        &f,
        &["CPU share estimated at 50 ns per fd scanned: no sampled chain passes through do_select/do_sys_poll"],
    );
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &without_profile(polls(300, 4800, 1200)),
        "poll-scaling",
        Expected {
            title: "poll scans 16 fds per call to find 4.0 ready",
            evidence: &[
                "3.0 poll calls per request",
                "16 fds asked per call, 25.0 % ready",
                "48 fds scanned per request",
            ],
            // Without stacks, 50 ns per fd scanned: 48 × 50 ns of 20 µs.
            share: 2400.0 / 20_000.0,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "poll-scaling",
        &[
            ("15.99 fds per call, none ready", polls(300, 4797, 0)),
            (
                "16 fds per call, 25.002 % ready",
                polls(3000, 48_000, 12_001),
            ),
            (
                "1000 fds per call, 80 % ready",
                polls(300, 300_000, 240_000),
            ),
        ],
    );
}
