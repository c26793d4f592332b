//! process-per-request: ≥ 0.5 processes or threads created per request that do not outlive it
//! (≥ 0.5 exits or execve per request; for threads, ≥ 0.5 mmap), a third signal at ≥ 8 user
//! page faults per request; ranked above the alloc-churn its new processes bring.

use reqcost_analysis::findings::{diagnose, Confidence};
use reqcost_record::{RequestStats, RunRecord};

use crate::util::{
    add_syscall_stack, assert_evidence, assert_fires, assert_silent_on, edit, edited, fired,
    kernel, main, set_syscall, Expected,
};

/// The main phase (100 requests) with `forks` processes forked and `exits` exited in all, each
/// fork a 10 µs clone.
pub(crate) fn forks(forks: u64, exits: u64) -> RunRecord {
    edited(|r| {
        set_syscall(main(r), "clone", forks, forks * 10_000);
        let tree = &mut kernel(main(r)).tree;
        tree.processes_forked = forks;
        tree.processes_exited = exits;
    })
}

/// `forks` processes forked and exited, each a 1 µs clone, over 100 requests on `conns`
/// connections (the server accepted them, the client opened them).
pub(crate) fn on_connections(conns: u64, forks: u64, exits: u64) -> RunRecord {
    edited(|r| {
        set_syscall(main(r), "clone", forks, forks * 1000);
        main(r).client.connections = conns;
        let k = kernel(main(r));
        k.sockets.accepted = conns;
        k.tree.processes_forked = forks;
        k.tree.processes_exited = exits;
    })
}

#[test]
fn fires_at_half_a_process_per_request_that_exits_as_often() {
    assert_fires(
        &forks(50, 50),
        "process-per-request",
        Expected {
            title: "0.50 new processes or threads per request, each retired after it",
            evidence: &[
                "0.50 processes forked, 0.00 threads created, 0.50 processes exited per request",
                "0 user page faults and 0.0 mmap/munmap per request come with them",
            ],
            // 5 µs of clone per request, and the fixture's 0.1 faults at 0.5 µs, against 20 µs.
            share: 5_050.0 / 20_000.0,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "process-per-request",
        &[
            ("0.49 forks per request", on_connections(100, 49, 100)),
            ("0.49 exits per request", on_connections(100, 100, 49)),
            (
                "0.49 forks per connection of 4 requests",
                on_connections(25, 12, 25),
            ),
            (
                "0.49 exits per connection of 4 requests",
                on_connections(25, 25, 12),
            ),
            (
                "workers recycled, their creation 4.8 % of the CPU",
                edit(on_connections(25, 9, 9), |r| {
                    set_syscall(main(r), "clone", 9, 9 * 10_000)
                }),
            ),
            ("one worker replaced alone", on_connections(25, 1, 1)),
            ("forks alone (a pool growing)", forks(100, 0)),
            ("exits alone", forks(0, 100)),
            (
                "threads without stacks mapped",
                edited(|r| kernel(main(r)).tree.threads_created = 100),
            ),
        ],
    );
}

#[test]
fn a_new_program_or_a_thread_with_its_stack_per_request_fires_too() {
    let exec = edited(|r| {
        kernel(main(r)).tree.processes_forked = 50;
        set_syscall(main(r), "execve", 50, 50 * 100_000);
    });
    let f = fired(&exec, "process-per-request");
    assert_evidence(&f, &["0.50 execve per request: a new program each time"]);
    let threads = edited(|r| {
        kernel(main(r)).tree.threads_created = 50;
        set_syscall(main(r), "mmap", 50, 50 * 1000);
    });
    fired(&threads, "process-per-request");
}

#[test]
fn page_faults_make_it_high_confidence_and_it_ranks_above_the_churn_it_brings() {
    let storm = edited(|r| {
        let m = main(r);
        set_syscall(m, "clone", 100, 100 * 10_000);
        set_syscall(m, "mmap", 100, 100 * 1000);
        set_syscall(m, "munmap", 100, 100 * 1000);
        let k = kernel(m);
        k.tree.processes_forked = 100;
        k.tree.processes_exited = 100;
        k.memory.page_faults_user = 800;
        k.memory.mmap_bytes = 100 * 65536;
    });
    let findings = diagnose(&storm);
    let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(
        ids[..2],
        ["process-per-request", "alloc-churn"],
        "{findings:#?}"
    );
    assert_eq!(findings[0].confidence, Confidence::High);
}

/// A server that forks a child per request and waits for it spends the child's lifetime in
/// wait4, off CPU: 30 ms per request, never in the share, and said apart.
#[test]
fn waiting_for_the_children_is_not_cpu() {
    let waits = edit(forks(50, 50), |r| {
        set_syscall(main(r), "wait4", 50, 50 * 60_000_000)
    });
    assert_fires(
        &waits,
        "process-per-request",
        Expected {
            title: "0.50 new processes or threads per request",
            evidence: &["30000.0 µs per request in wait4/waitid, 0.50 calls: the parent waiting for its children, off CPU, not in the share"],
            // The 5 µs of clone (under the phase's 10 µs of system CPU) and 0.1 faults.
            share: 5_050.0 / 20_000.0,
            confidence: Confidence::Medium,
        },
    );
    // With samples: 20 of 250 in clone, 8 % of 20 µs, the faults' 0.05 µs beside.
    let sampled = edit(waits, |r| {
        add_syscall_stack(r, "__do_sys_clone", 20);
        add_syscall_stack(r, "__x64_sys_wait4", 30);
    });
    assert_fires(
        &sampled,
        "process-per-request",
        Expected {
            title: "0.50 new processes or threads per request",
            evidence: &["5.0 µs per request inside process creation and mapping calls: 1.6 µs on CPU (20 of 250 samples)"],
            share: 20.0 / 250.0 + 50.0 / 20_000.0,
            confidence: Confidence::Medium,
        },
    );
}

/// A new process starts up and exits outside any request: the phase's CPU outside requests is
/// what the finding explains when it is more than its calls (96 % in a pre-fork server recycling
/// its workers whose interpreter loads at each start).
#[test]
fn the_cpu_outside_any_request_is_the_processes_cost() {
    let outside = |unattributed: u64| {
        edit(forks(50, 50), |r| {
            main(r).requests = Some(RequestStats {
                attributed_cpu_ns: 2_000_000 - unattributed,
                unattributed_cpu_ns: unattributed,
                ..RequestStats::default()
            })
        })
    };
    assert_fires(
        &outside(1_920_000),
        "process-per-request",
        Expected {
            title: "0.50 new processes or threads per request",
            evidence: &["96 % of the CPU outside any request (the processes' start-up and exit)"],
            share: 0.96,
            confidence: Confidence::Medium,
        },
    );
    // Under the calls' share, the calls' share stands.
    let f = fired(&outside(100_000), "process-per-request");
    crate::util::approx(f.cpu_share, 5_050.0 / 20_000.0);
}

/// A server forking per connection whose connections carry 4 requests each: 0.25 forks per
/// request, one per connection.
#[test]
fn a_process_per_keep_alive_connection_is_judged_per_connection() {
    let rec = on_connections(25, 13, 13);
    assert_fires(
        &rec,
        "process-per-request",
        Expected {
            title: "0.52 new processes or threads per connection, each retired after it",
            evidence: &[
                "0.13 processes forked, 0.00 threads created, 0.13 processes exited per request",
                "0.52 processes or threads per connection, 4.0 requests per connection",
                "one worker replaced every 7.7 requests (1.9 connections)",
            ],
            // 13 µs of clone and the fixture's 0.1 faults per request, against 2 ms.
            share: (13_000.0 + 5_000.0) / 2_000_000.0,
            confidence: Confidence::Medium,
        },
    );
}

/// Workers replaced every few connections (apache2 MaxConnectionsPerChild 10, gunicorn
/// --max-requests): named with N, when starting them costs.
#[test]
fn recycled_workers_are_named_with_how_often() {
    let recycled = edit(on_connections(25, 3, 3), |r| {
        set_syscall(main(r), "clone", 3, 3 * 40_000)
    });
    assert_fires(
        &recycled,
        "process-per-request",
        Expected {
            title: "recycled workers: one worker replaced every 33.3 requests (8.3 connections), each start-up and exit paid again",
            evidence: &["0.03 processes forked, 0.00 threads created, 0.03 processes exited per request"],
            share: (120_000.0 + 5_000.0) / 2_000_000.0,
            confidence: Confidence::Medium,
        },
    );
    assert!(fired(&recycled, "process-per-request")
        .fix
        .contains("gunicorn --max-requests 0"));
}

/// A process per connection that exits with its connection is judged on 8 connections or
/// more: PostgreSQL's backend for each of pgbench's clients (hundreds of requests each) starts
/// once, however much of a short phase its start-up holds.
#[test]
fn a_process_for_each_of_a_few_long_connections_is_not_churn() {
    let costly = |conns, forks| {
        edit(on_connections(conns, forks, forks), |r| {
            set_syscall(main(r), "clone", forks, forks * 40_000)
        })
    };
    assert_silent_on(
        "process-per-request",
        &[("a backend for each of 7 connections", costly(7, 7))],
    );
    assert!(fired(&costly(8, 8), "process-per-request")
        .title
        .ends_with("a process per connection"));
}
