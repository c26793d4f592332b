//! durable-syncs: ≥ 0.1 syncs per request and ≥ 0.25 per write batch (the file writes or the
//! loop turns, whichever are fewer); yields to log-per-request where that names the syncs.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{Phase, RunRecord};

use crate::util::{
    add_syscall_stack, assert_evidence, assert_fires, assert_share, assert_silent,
    assert_silent_on, confidences, edit, edited, file_writes, fired, kernel, main, set_syscall,
    Expected,
};

/// `turns` epoll_wait returns with something ready, in all.
fn loop_turns(p: &mut Phase, turns: u64) {
    let wait = &mut kernel(p).waits[0];
    wait.returns = turns;
    wait.ready = turns;
    set_syscall(p, "epoll_wait", turns, turns * 2000);
}

/// The main phase (100 requests, 20 µs of CPU each) with `syncs` fdatasync of `ns` each,
/// `writes` file writes and `turns` loop turns, in all.
fn synced(syncs: u64, ns: u64, writes: u64, turns: u64) -> RunRecord {
    edited(|r| {
        let m = main(r);
        set_syscall(m, "fdatasync", syncs, syncs * ns);
        file_writes(m, writes);
        loop_turns(m, turns);
    })
}

#[test]
fn fires_on_a_sync_per_loop_turn_under_4_clients() {
    // 0.49 syncs per request, one per turn of 2 requests, a log line written per request:
    // under log-per-request's 0.5 per request.
    let rec = synced(49, 50_000, 100, 50);
    assert_silent(&rec, "log-per-request");
    let f = fired(&rec, "durable-syncs");
    assert_eq!(
        f.title,
        "0.49 syncs per request, 0.98 per write batch: every batch of writes waits for the disk"
    );
}

#[test]
fn fires_on_a_database_syncing_per_transaction_of_5_round_trips() {
    // 0.29 syncs per counted request: one WAL write and one sync per transaction, one loop
    // turn per statement.
    let f = fired(&synced(29, 50_000, 29, 100), "durable-syncs");
    assert_evidence(
        &f,
        &["1.00 syncs per write batch: 0.29 file writes and 1.00 loop turns"],
    );
}

#[test]
fn a_server_without_a_readiness_loop_batches_per_write() {
    let rec = edit(synced(10, 2000, 40, 0), |r| kernel(main(r)).waits.clear());
    fired(&rec, "durable-syncs");
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &synced(10, 2000, 40, 302),
        "durable-syncs",
        Expected {
            title: "0.10 syncs per request, 0.25 per write batch",
            evidence: &[
                "0.10 syncs per request (fdatasync 0.10), 2 µs each",
                "0.25 syncs per write batch: 0.40 file writes and 3.02 loop turns",
                "0.2 µs per request inside the syncs (wall time, the share's upper bound",
                "0.2 µs per request in the syncs against 20.0 µs of CPU per request",
            ],
            // The syncs' 0.2 µs wall time per request of 20 µs: no kernel chain splits it.
            share: 0.01,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn waiting_in_the_syncs_longer_than_the_cpu_is_high_confidence() {
    assert_eq!(
        confidences(
            "durable-syncs",
            &[synced(10, 200_000, 40, 302), synced(10, 199_999, 40, 302)]
        ),
        [Confidence::High, Confidence::Medium]
    );
}

#[test]
fn sampled_kernel_chains_split_cpu_from_time_blocked() {
    // 20 of 220 samples inside fdatasync: 1.8 µs of CPU per request of the 20 µs in the calls.
    let rec = edit(synced(10, 200_000, 40, 302), |r| {
        add_syscall_stack(r, "__x64_sys_fdatasync", 20)
    });
    let f = fired(&rec, "durable-syncs");
    assert_share(&f, 20.0 / 220.0);
    assert_evidence(
        &f,
        &["20.0 µs per request inside the syncs: 1.8 µs on CPU (20 of 220 samples), 18.2 µs blocked off CPU (not in the share)"],
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "durable-syncs",
        &[
            ("0.09 syncs per request", synced(9, 2000, 36, 302)),
            ("0.244 syncs per write batch", synced(10, 2000, 41, 302)),
            ("syncs without file writes", synced(10, 2000, 0, 302)),
            ("a sync a second under load", synced(1, 2000, 100, 100)),
            (
                "0.1 syncs per request, many writes per turn",
                synced(10, 2000, 1000, 100),
            ),
        ],
    );
}

#[test]
fn yields_to_log_per_request_naming_the_syncs() {
    let rec = synced(100, 2000, 100, 100);
    fired(&rec, "log-per-request");
    assert_silent(&rec, "durable-syncs");
}
