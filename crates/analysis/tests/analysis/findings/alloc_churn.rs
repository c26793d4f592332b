//! alloc-churn: ≥ 0.9 mmap/munmap/brk/mremap per request, with ≥ 64 KiB mapped or ≥ 8 user
//! page faults per request.

use reqcost_analysis::findings::Confidence;
use reqcost_record::RunRecord;

use crate::util::{
    add_syscall_stack, assert_evidence, assert_fires, assert_silent_on, edit, edited, fired,
    kernel, main, set_syscall, Expected,
};

/// The main phase (100 requests) with `pairs` mmap and as many munmap calls in all (1 µs each),
/// mapping `mapped` bytes, and `faults` user page faults.
fn churn(pairs: u64, mapped: u64, faults: u64) -> RunRecord {
    edited(|r| {
        set_syscall(main(r), "mmap", pairs, pairs * 1000);
        set_syscall(main(r), "munmap", pairs, pairs * 1000);
        let memory = &mut kernel(main(r)).memory;
        memory.mmap_bytes = mapped;
        memory.munmap_bytes = mapped;
        memory.page_faults_user = faults;
    })
}

const KIB_64: u64 = 65536;

/// 0.89 mapping calls per request (44 mmap, 44 munmap and 1 brk in all), far above the other
/// thresholds.
fn maps_0_89() -> RunRecord {
    edit(churn(44, 100 * 1024 * 1024, 10_000), |r| {
        set_syscall(main(r), "brk", 1, 1000)
    })
}

#[test]
fn fires_at_0_9_mapping_calls_per_request() {
    fired(&churn(45, 100 * KIB_64, 10), "alloc-churn");
}

#[test]
fn eight_page_faults_per_request_are_a_signal() {
    let f = fired(&churn(100, 0, 800), "alloc-churn");
    assert_evidence(
        &f,
        &["8 user page faults per request (0 KiB mapped per request)"],
    );
}

#[test]
fn large_mappings_and_many_faults_are_high_confidence() {
    let f = fired(&churn(100, 100 * KIB_64, 800), "alloc-churn");
    assert_eq!(f.confidence, Confidence::High);
}

#[test]
fn brk_and_mremap_count_as_mapping_calls() {
    for name in ["brk", "mremap"] {
        let rec = edited(|r| {
            set_syscall(main(r), name, 90, 90_000);
            kernel(main(r)).memory.page_faults_user = 800;
        });
        fired(&rec, "alloc-churn");
    }
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &churn(50, 100 * KIB_64, 10),
        "alloc-churn",
        Expected {
            title: "1.0 mmap/munmap/brk and 0 page faults per request",
            evidence: &[
                "0.5 mmap, 0.5 munmap, 0.0 brk per request",
                "0 user page faults per request (64 KiB mapped per request)",
            ],
            // 1 µs in mmap or munmap per request, and 0.1 faults at 0.5 µs.
            share: 1050.0 / 20_000.0,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "alloc-churn",
        &[
            ("0.89 maps per request", maps_0_89()),
            (
                "65535 B mapped per request",
                churn(100, 100 * (KIB_64 - 1), 10),
            ),
            ("7.99 page faults per request", churn(100, 0, 799)),
            ("1000 page faults per request alone", churn(0, 0, 100_000)),
        ],
    );
}

/// munmap waiting for the address space's lock waits off CPU: 1 ms per request inside
/// munmap, of which the samples put 2 µs on CPU with mmap's. The share counts those and the
/// faults' estimate, never the wait.
#[test]
fn time_blocked_in_the_mapping_calls_is_not_cpu() {
    let rec = edit(churn(100, 100 * KIB_64, 10), |r| {
        set_syscall(main(r), "munmap", 100, 100 * 1_000_000);
        add_syscall_stack(r, "ksys_mmap_pgoff", 10);
        add_syscall_stack(r, "__x64_sys_munmap", 15);
        add_syscall_stack(r, "__x64_sys_epoll_wait", 25);
    });
    assert_fires(
        &rec,
        "alloc-churn",
        Expected {
            title: "2.0 mmap/munmap/brk",
            evidence: &["1001.0 µs per request inside mmap/munmap/brk/mremap: 2.0 µs on CPU (25 of 250 samples), 999.0 µs blocked off CPU (not in the share)"],
            // 2 µs on CPU and 0.1 faults at 0.5 µs, of 20 µs.
            share: 2_050.0 / 20_000.0,
            confidence: Confidence::Medium,
        },
    );
}
