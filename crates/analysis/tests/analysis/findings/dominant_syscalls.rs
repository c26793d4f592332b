//! dominant-syscalls: when the specific findings explain < 50 % of the CPU, system time ≥ 50 %
//! and the syscalls sampled most (each ≥ 5 % of the samples) hold ≥ 25 % of them; ranked below
//! every specific finding.

use reqcost_analysis::findings::{diagnose, Confidence};
use reqcost_record::{FdKind, IoDirection, RunRecord};

use crate::util::{
    add_stack, add_syscall_stack, assert_fires, assert_silent, assert_silent_on, edit, edited,
    fired, kernel_frame, main, set_cpu, set_io, set_syscall, socket_writes, user_frame, Expected,
};

/// Adds `count` samples inside pread64, issued by the server's `copy_file` through the C
/// library's wrapper.
fn preads_sampled(rec: &mut RunRecord, count: u64) {
    let chain = [
        kernel_frame("filemap_read"),
        kernel_frame("__x64_sys_pread64"),
        kernel_frame("do_syscall_64"),
        kernel_frame("entry_SYSCALL_64_after_hwframe"),
        user_frame("__libc_pread64", "libc.so.6"),
        user_frame("copy_file", "server"),
        user_frame("main", "server"),
    ];
    add_stack(rec, &chain, count);
}

/// The clean fixture (100 requests, 2 ms of CPU, `system_ns` of it system time, 200 samples)
/// with `preads` samples in 400 pread64 calls (250 B and 50 µs each) and `opens` in 400 openat
/// calls (2 µs each): 4 of each per request.
fn in_kernel(rec: RunRecord, system_ns: u64, preads: u64, opens: u64) -> RunRecord {
    edit(rec, |r| {
        let m = main(r);
        set_cpu(m, 2_000_000, system_ns);
        set_syscall(m, "pread64", 400, 400 * 50_000);
        set_io(m, "pread64", IoDirection::Read, FdKind::File, 400, 100_000);
        set_syscall(m, "openat", 400, 400 * 2000);
        preads_sampled(r, preads);
        if opens > 0 {
            add_syscall_stack(r, "__x64_sys_openat", opens);
        }
    })
}

#[test]
fn names_the_syscalls_their_sizes_and_the_code_issuing_them() {
    let f = fired(
        &in_kernel(edited(|_| ()), 1_900_000, 150, 100),
        "dominant-syscalls",
    );
    assert_eq!(
        f.title,
        "generic: 95 % of the CPU is in the kernel, 56 % in pread64, openat, which no rule of the catalog explains"
    );
    assert_eq!(
        f.evidence[1..],
        [
            "pread64: 33 % of CPU samples, 4.0 calls per request, 50.0 µs each; reading file fds 250 B per call; issued from copy_file [server] (150 samples)",
            "openat: 22 % of CPU samples, 4.0 calls per request, 2.0 µs each; issued from main [server] (100 samples)",
        ]
    );
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &in_kernel(edited(|_| ()), 1_000_000, 67, 0),
        "dominant-syscalls",
        Expected {
            title: "generic: 50 % of the CPU is in the kernel, 25 % in pread64",
            evidence: &[
                "system time 50 % of CPU; the catalog's specific findings explain 0 % of it: this finding is generic",
            ],
            // 67 of 267 samples, of 20 µs per request: under the 50 µs wall time in the calls.
            share: 67.0 / 267.0,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "dominant-syscalls",
        &[
            (
                "49.99995 % system time",
                in_kernel(edited(|_| ()), 999_999, 67, 0),
            ),
            (
                "24.7 % of samples in syscalls",
                in_kernel(edited(|_| ()), 1_900_000, 66, 0),
            ),
            (
                "95 % system time alone, no chain into a syscall",
                edited(|r| set_cpu(main(r), 2_000_000, 1_900_000)),
            ),
        ],
    );
}

#[test]
fn a_syscall_under_5_percent_of_the_samples_is_not_named() {
    // 100 of 310 samples in pread64, 10 (3.2 %) in openat.
    let f = fired(
        &in_kernel(edited(|_| ()), 1_900_000, 100, 10),
        "dominant-syscalls",
    );
    assert!(f.title.contains("in pread64, which"), "{}", f.title);
}

#[test]
fn is_silent_when_specific_findings_explain_half_the_cpu() {
    // A MiB copied through user space per request in 8 KiB chunks, most samples in its calls.
    let rec = edit(socket_writes(12_800, 100 << 20), |r| {
        let m = main(r);
        set_cpu(m, 100_000_000, 95_000_000);
        set_syscall(m, "pread64", 12_800, 12_800 * 2000);
        set_syscall(m, "writev", 12_800, 12_800 * 5000);
        set_io(
            m,
            "pread64",
            IoDirection::Read,
            FdKind::File,
            12_800,
            100 << 20,
        );
        preads_sampled(r, 400);
        add_syscall_stack(r, "do_writev", 400);
    });
    assert!(fired(&rec, "copy-through-user").cpu_share >= 0.5);
    assert_silent(&rec, "dominant-syscalls");
}

#[test]
fn ranks_below_every_specific_finding() {
    // 800 writes of 1023 B per 100 requests: small-writes, explaining little of the CPU.
    let rec = in_kernel(socket_writes(800, 800 * 1023), 1_900_000, 150, 100);
    let ids: Vec<String> = diagnose(&rec).into_iter().map(|f| f.id).collect();
    let small = ids.iter().position(|id| id == "small-writes");
    let generic = ids.iter().position(|id| id == "dominant-syscalls");
    assert!(
        small.is_some() && generic.is_some() && small < generic,
        "{ids:?}"
    );
    assert!(fired(&rec, "dominant-syscalls").cpu_share > fired(&rec, "small-writes").cpu_share);
}

#[test]
fn calls_moving_64_kib_each_are_not_named() {
    // pread64 reading 64 KiB per call holds 150 of 450 samples: the data is the work, and
    // openat's 100 alone are under 25 %.
    let reading = |bytes: u64| {
        edit(in_kernel(edited(|_| ()), 1_900_000, 150, 100), |r| {
            set_io(
                main(r),
                "pread64",
                IoDirection::Read,
                FdKind::File,
                400,
                bytes,
            )
        })
    };
    assert_silent(&reading(400 * 65_536), "dominant-syscalls");
    fired(&reading(400 * 65_535), "dominant-syscalls");
}

#[test]
fn readiness_waits_and_socket_calls_are_not_named() {
    // 150 of 450 samples in epoll_wait, 100 in writev (socket writes): the loop and the
    // responses, which every server makes.
    let rec = edit(edited(|r| set_cpu(main(r), 2_000_000, 1_900_000)), |r| {
        add_syscall_stack(r, "__x64_sys_epoll_wait", 150);
        add_syscall_stack(r, "do_writev", 100);
    });
    assert_silent(&rec, "dominant-syscalls");
    let with_opens = edit(rec, |r| {
        set_syscall(main(r), "openat", 400, 400 * 2000);
        add_syscall_stack(r, "__x64_sys_openat", 200);
    });
    assert!(fired(&with_opens, "dominant-syscalls")
        .title
        .contains("in openat, which"));
}

#[test]
fn is_silent_beside_a_major_specific_finding() {
    // log-per-request: a file write (20 µs) and a sync per request, `samples` samples in the
    // writes, half of them the file's (one socket writev per request beside): 113 of 563
    // make a major finding, 112 of 562 not, though either explains under half the CPU.
    let log = |samples: u64| {
        edit(in_kernel(edited(|_| ()), 1_900_000, 150, 100), |r| {
            let m = main(r);
            set_io(m, "write", IoDirection::Write, FdKind::File, 100, 10_000);
            set_syscall(m, "write", 100, 100 * 20_000);
            set_syscall(m, "fdatasync", 100, 100 * 2000);
            add_syscall_stack(r, "ksys_write", samples);
        })
    };
    assert!(fired(&log(113), "log-per-request").major);
    assert_silent(&log(113), "dominant-syscalls");
    assert!(!fired(&log(112), "log-per-request").major);
    fired(&log(112), "dominant-syscalls");
}

#[test]
fn a_syscall_is_named_from_4_calls_per_request_or_20_us_of_cpu_each() {
    // 100 of 300 samples in openat, of 20 µs of CPU per request: 6.7 µs per request.
    let opening = |calls: u64| {
        edit(edited(|r| set_cpu(main(r), 2_000_000, 1_900_000)), |r| {
            set_syscall(main(r), "openat", calls, calls * 2000);
            add_syscall_stack(r, "__x64_sys_openat", 100);
        })
    };
    fired(&opening(400), "dominant-syscalls");
    assert_silent(&opening(399), "dominant-syscalls");
    // One call per request: from 20 µs of CPU in each (120 of 320 samples of 53.3 µs).
    let heavy = |cpu_ns: u64| {
        edit(opening(100), |r| {
            set_cpu(main(r), cpu_ns, cpu_ns * 95 / 100);
            add_syscall_stack(r, "__x64_sys_openat", 20);
        })
    };
    fired(&heavy(5_333_334), "dominant-syscalls");
    assert_silent(&heavy(5_333_332), "dominant-syscalls");
}
