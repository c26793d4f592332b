//! client-sensitive: CPU per request ≥ 1.5x (and ≥ 5 µs) higher with slow clients, and syscalls
//! per request beyond each connection's own ≥ 1.3x higher.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{Phase, RunRecord};

use crate::util::{
    assert_evidence, assert_fires, assert_silent, assert_silent_on, edit, edited, fired, kernel,
    main, set_cpu, set_syscall, slow, Expected,
};

/// The slow phase (10 requests, 10 request syscalls each in the fixture) with `cpu_ns` of CPU
/// and `extra` more calls in all that no connection needs.
fn slow_phase(cpu_ns: u64, extra: u64) -> RunRecord {
    edited(|r| {
        let s = slow(r);
        set_cpu(s, cpu_ns, cpu_ns / 2);
        set_syscall(s, "futex", extra, extra * 100);
    })
}

/// `n` more connections, each with the calls every connection makes once: accept, close,
/// epoll_ctl ADD and DEL, the end-of-stream read and the listener's wakeup.
fn more_connections(p: &mut Phase, n: u64) {
    let k = kernel(p);
    k.sockets.accepted += n;
    k.sockets.closed += n;
    k.epoll_ctl.add += n;
    k.epoll_ctl.delete += n;
    k.waits[0].returns += n;
    let eof = k.io.iter_mut().find(|s| s.syscall == "read").unwrap();
    eof.calls += n;
    eof.sizes[0].count += n;
    for (name, calls) in [
        ("accept4", n),
        ("close", n),
        ("epoll_ctl", 2 * n),
        ("read", n),
        ("epoll_wait", n),
    ] {
        k.syscalls
            .iter_mut()
            .find(|s| s.name == name)
            .unwrap()
            .count += calls;
    }
}

#[test]
fn judged_in_the_slow_phase() {
    let f = fired(&slow_phase(300_000, 30), "client-sensitive");
    assert_eq!(f.phase, "slow-clients");
}

#[test]
fn the_cpu_must_grow_by_5_us() {
    let with_main_cpu = |main_ns: u64| {
        edited(|r| {
            set_cpu(main(r), main_ns, main_ns / 2);
            // 1.5x main's CPU per request over 10 requests instead of 100.
            set_cpu(slow(r), main_ns * 15 / 100, main_ns * 15 / 200);
            set_syscall(slow(r), "futex", 100, 10_000);
        })
    };
    fired(&with_main_cpu(1_000_000), "client-sensitive");
    assert_silent(&with_main_cpu(800_000), "client-sensitive");
}

#[test]
fn connections_opened_in_the_slow_phase_are_not_the_server_working_harder() {
    // 20 more connections for the same 10 requests: 1.75x the syscalls counted whole.
    let rec = edited(|r| {
        set_cpu(slow(r), 300_000, 150_000);
        more_connections(slow(r), 20);
    });
    assert_silent(&rec, "client-sensitive");
}

#[test]
fn silent_without_a_slow_phase() {
    let rec = edited(|r| r.phases.retain(|p| p.name == "main"));
    assert_silent(&rec, "client-sensitive");
}

/// Main at `main_ns` of CPU (100 requests), the slow phase at `slow_ns` with `extra` calls no
/// connection needs, and beside them a `fast-same-rate` phase: the slow phase's 10 requests and
/// connections from fast clients at its rate, with `reference_ns` of CPU and `reference_extra`
/// of those calls.
fn with_same_rate(
    main_ns: u64,
    slow_ns: u64,
    extra: u64,
    reference_ns: u64,
    reference_extra: u64,
) -> RunRecord {
    edited(|r| {
        set_cpu(main(r), main_ns, main_ns / 2);
        let mut reference = slow(r).clone();
        reference.name = "fast-same-rate".into();
        reference.client_model = Some("unlimited, open loop at 5 req/s".into());
        set_cpu(&mut reference, reference_ns, reference_ns / 2);
        set_syscall(
            &mut reference,
            "futex",
            reference_extra,
            reference_extra * 100,
        );
        let s = slow(r);
        set_cpu(s, slow_ns, slow_ns / 2);
        set_syscall(s, "futex", extra, extra * 100);
        r.phases.push(reference);
    })
}

#[test]
fn fires_when_slow_clients_cost_10x_fast_ones_at_the_same_rate() {
    // Main costs as much per request as the slow phase: only the same-rate reference shows it.
    let f = fired(
        &with_same_rate(3_000_000, 300_000, 30, 30_000, 0),
        "client-sensitive",
    );
    assert_eq!(f.phase, "slow-clients");
    assert!(
        f.title.starts_with("CPU per request is 10.0x higher"),
        "{}",
        f.title
    );
    assert_evidence(
        &f,
        &[
            "CPU per request: 3.0 µs with fast clients, 30.0 µs with slow clients",
            "fast clients at the slow phase's request rate (fast-same-rate: unlimited, open loop at 5 req/s)",
        ],
    );
}

#[test]
fn silent_when_fast_clients_at_the_same_rate_cost_as_much_though_main_is_3x_cheaper() {
    // Idle wake-ups at low load, not the clients' speed: main ran saturated at 10 µs, the slow
    // phase and its same-rate reference both at 30 µs with the same calls.
    let rec = with_same_rate(1_000_000, 300_000, 30, 300_000, 30);
    assert_silent(&rec, "client-sensitive");
    // Held against main, as records without the reference are, the same slow phase fires.
    let without = edit(rec.clone(), |r| {
        r.phases.retain(|p| p.name != "fast-same-rate")
    });
    let f = fired(&without, "client-sensitive");
    assert_evidence(
        &f,
        &["fast clients from main: this record has no fast-same-rate phase"],
    );
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(&slow_phase(300_000, 30), "client-sensitive", Expected {
                title: "CPU per request is 1.5x higher when clients read slowly",
                evidence: &[
                    "CPU per request: 20.0 µs with fast clients, 30.0 µs with slow clients (64KiB/s per connection, 8KiB receive buffer)",
                    "syscalls per request beyond connection set-up and teardown: 10.0 fast, 13.0 slow",
                ],
                share: 1.0 - 20.0 / 30.0,
                confidence: Confidence::Medium,
            });
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "client-sensitive",
        &[
            ("1.495x the CPU", slow_phase(299_000, 100)),
            ("1.29x the syscalls", slow_phase(600_000, 29)),
            ("5x the CPU alone", slow_phase(1_000_000, 0)),
            ("2x the syscalls alone", slow_phase(220_000, 100)),
        ],
    );
}
