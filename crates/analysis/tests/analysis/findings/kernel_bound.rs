//! kernel-bound: system time ≥ 75 % of CPU and ≥ 30 socket reads/writes per request moving
//! < 2 KiB each; yields to small-writes.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{FdKind, IoDirection, RunRecord};

use crate::util::{
    assert_evidence, assert_fires, assert_share, assert_silent, assert_silent_on, clean,
    confidences, edit, fired, main, set_cpu, set_io, set_stack, set_syscall, socket_writes,
    Expected,
};

/// `rec`'s main phase (100 requests, 2 ms of CPU) with `reads` socket reads moving `bytes` in
/// all and `system_ns` of system time.
fn per_packet(rec: RunRecord, reads: u64, bytes: u64, system_ns: u64) -> RunRecord {
    edit(rec, |r| {
        let m = main(r);
        set_io(m, "read", IoDirection::Read, FdKind::Socket, reads, bytes);
        set_syscall(m, "read", reads, reads * 500);
        set_cpu(m, 2_000_000, system_ns);
    })
}

/// One byte-sized read after another: 29 reads of 16 B per request beside the fixture's one
/// 1100 B writev.
pub(crate) fn byte_reads(system_ns: u64) -> RunRecord {
    per_packet(clean(), 2900, 2900 * 16, system_ns)
}

/// 29 socket reads per request moving `read_bytes` in all, at 95 % system time.
fn moving(read_bytes: u64) -> RunRecord {
    per_packet(clean(), 2900, read_bytes, 1_900_000)
}

/// 95 % system time, without socket calls to explain it.
fn system_alone() -> RunRecord {
    edit(clean(), |r| set_cpu(main(r), 2_000_000, 1_900_000))
}

#[test]
fn without_a_profile_half_the_system_time_is_the_share() {
    let rec = edit(byte_reads(1_500_000), |r| r.profile = None);
    let f = fired(&rec, "kernel-bound");
    assert_eq!(f.evidence.len(), 2, "{:?}", f.evidence);
    assert_share(&f, 0.375);
}

#[test]
fn a_profile_topped_by_the_network_stack_is_high_confidence() {
    let net = |samples: u64| {
        edit(byte_reads(1_500_000), |r| {
            set_stack(r, "tcp_sendmsg", samples);
            set_stack(r, "ngx_http_parse_request_line", 190 - samples);
        })
    };
    assert_eq!(
        confidences("kernel-bound", &[net(60), net(59)]),
        [Confidence::High, Confidence::Medium]
    );
}

#[test]
fn fires_just_under_2_kib_per_socket_call() {
    // With the fixture's 100 writes of 1100 B: 3000 calls moving one byte less than 2048 B each.
    fired(&moving(3000 * 2048 - 110_000 - 1), "kernel-bound");
}

#[test]
fn yields_to_small_writes() {
    let rec = per_packet(socket_writes(1000, 1000 * 100), 2900, 2900 * 16, 1_900_000);
    fired(&rec, "small-writes");
    assert_silent(&rec, "kernel-bound");
}

#[test]
fn a_profile_without_network_frames_does_not_make_the_share_zero() {
    // 200 samples, none in the network stack (a user-only profile): the share is estimated as
    // without a profile, and the evidence says so, rather than 0 % taken from the profile.
    let rec = edit(byte_reads(1_500_000), |r| {
        set_stack(r, "tcp_sendmsg", 0);
        set_stack(r, "ngx_http_parse_request_line", 190);
    });
    let f = fired(&rec, "kernel-bound");
    assert_share(&f, 0.375);
    assert_evidence(
        &f,
        &["CPU share estimated as half the system time: no sampled chain passes through the network stack"],
    );
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &byte_reads(1_500_000),
        "kernel-bound",
        Expected {
            title:
                "75 % of CPU is in the kernel: 30 socket reads/writes per request moving 52 B each",
            evidence: &[
                "system time 75 % of CPU",
                "30.0 socket reads/writes per request moving 52 B each, of 37.1 syscalls",
                "20 % of CPU samples in the network stack",
            ],
            // The fixture's profile has 40 of 200 samples under tcp_sendmsg.
            share: 0.2,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "kernel-bound",
        &[
            ("74.99995 % system time", byte_reads(1_499_999)),
            (
                "29.99 socket calls",
                per_packet(clean(), 2899, 2899 * 16, 1_900_000),
            ),
            ("2048 B per socket call", moving(3000 * 2048 - 110_000)),
            ("95 % system time alone", system_alone()),
            ("30 socket calls at 50 % system time", byte_reads(1_000_000)),
        ],
    );
}
