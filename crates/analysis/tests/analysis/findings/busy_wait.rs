//! busy-wait: two of ≥ 3 ioctl, ≥ 3 epoll_ctl(MOD), ≥ 10 wait returns or wakeups, and ≥ 2x CPU
//! with slow clients, one of them the ioctl or epoll_ctl churn; judged in the slow phase.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{IoctlStat, Phase, RunRecord};

use crate::util::{
    assert_evidence, assert_fires, assert_share, assert_silent_on, edit, edited, fired, kernel,
    main, set_cpu, set_syscall, slow, Expected,
};

/// `calls` ioctl(SIOCOUTQ) in all, 100 ns each.
fn poll_send_queue(p: &mut Phase, calls: u64) {
    kernel(p).ioctls = vec![IoctlStat {
        request: 0x5411,
        name: Some("SIOCOUTQ/TIOCOUTQ".into()),
        count: calls,
    }];
    set_syscall(p, "ioctl", calls, calls * 100);
}

/// `mods` epoll_ctl(MOD) in all beside the phase's ADD and DEL, 100 ns each.
fn bounce_interest(p: &mut Phase, mods: u64) {
    let k = kernel(p);
    k.epoll_ctl.modify = mods;
    let calls = k.epoll_ctl.add + k.epoll_ctl.delete + mods;
    set_syscall(p, "epoll_ctl", calls, calls * 100);
}

/// The slow phase (10 requests) with `ioctls` SIOCOUTQ polls and `mods` epoll_ctl(MOD) in all.
fn slow_churn(ioctls: u64, mods: u64) -> RunRecord {
    edited(|r| {
        poll_send_queue(slow(r), ioctls);
        bounce_interest(slow(r), mods);
    })
}

/// Send-queue polling (3 per request) with `returns` wait returns in the slow phase.
fn waiting(returns: u64) -> RunRecord {
    edit(slow_churn(30, 0), |r| {
        kernel(slow(r)).waits[0].returns = returns
    })
}

/// Epoll churn (3 per request) with `wakeups` wakeups in the slow phase.
fn woken(wakeups: u64) -> RunRecord {
    edit(slow_churn(0, 30), |r| {
        kernel(slow(r)).sched.wakeups = wakeups
    })
}

/// Send-queue polling (3 per request) with `cpu_ns` of CPU in the slow phase.
fn slow_cpu(cpu_ns: u64) -> RunRecord {
    edit(slow_churn(30, 0), |r| set_cpu(slow(r), cpu_ns, cpu_ns / 2))
}

/// Waits, wakeups and CPU growth together in the slow phase, without churn: what any slow
/// client causes.
fn slow_and_wakeful() -> RunRecord {
    edited(|r| {
        let s = slow(r);
        kernel(s).waits[0].returns = 1000;
        kernel(s).sched.wakeups = 1000;
        set_cpu(s, 1_000_000, 500_000);
    })
}

#[test]
fn judged_in_the_slow_phase() {
    assert_eq!(
        fired(&slow_churn(30, 30), "busy-wait").phase,
        "slow-clients"
    );
}

#[test]
fn wait_returns_wakeups_and_cpu_growth_are_signals_from_their_thresholds() {
    let f = fired(&waiting(100), "busy-wait");
    assert_evidence(
        &f,
        &["10.0 readiness-wait returns and 4.0 wakeups per request for 1100 B sent"],
    );
    let f = fired(&woken(100), "busy-wait");
    assert_evidence(
        &f,
        &["4.0 readiness-wait returns and 10.0 wakeups per request"],
    );
    let f = fired(&slow_cpu(400_000), "busy-wait");
    assert_evidence(
        &f,
        &["CPU per request 20.0 µs with fast clients, 40.0 µs with slow ones (2.0x)"],
    );
    assert_share(&f, 0.5);
}

#[test]
fn three_signals_are_high_confidence() {
    let rec = edit(slow_churn(30, 30), |r| kernel(slow(r)).sched.wakeups = 100);
    assert_eq!(fired(&rec, "busy-wait").confidence, Confidence::High);
}

#[test]
fn judged_in_main_without_a_slow_phase() {
    let rec = edited(|r| {
        r.phases.retain(|p| p.name == "main");
        poll_send_queue(main(r), 300);
        bounce_interest(main(r), 300);
    });
    let f = fired(&rec, "busy-wait");
    assert_eq!(f.phase, "main");
    // The loop's calls per request: 3 ioctl, 3 epoll_ctl(MOD) and the 2.02 wait returns beyond
    // one, of 16.12 syscalls (the fixture's 10.12, the churn's 6).
    assert_share(&f, 8.02 / 16.12);
}

#[test]
fn a_loop_that_is_all_the_cpu_explains_all_of_it() {
    // The seeds/002 loop with the slow phase skipped: 500 ioctl(SIOCOUTQ), 500 epoll_ctl(MOD)
    // and 500 wait returns per request, 100 ns each inside the kernel: 12.5 % of the 1 ms of CPU
    // per request by the time inside ioctl, epoll_ctl and half of epoll_wait's, which is what
    // the share was.
    let rec = edited(|r| {
        r.phases.retain(|p| p.name == "main");
        let m = main(r);
        poll_send_queue(m, 50_000);
        bounce_interest(m, 50_000);
        kernel(m).waits[0].returns = 50_000;
        set_syscall(m, "epoll_wait", 50_000, 50_000 * 100);
        set_cpu(m, 100_000_000, 90_000_000);
    });
    let f = fired(&rec, "busy-wait");
    // 1499 of the 1507.1 calls per request are the loop's: 500 + 500 + 499 wait returns.
    assert_share(&f, 1499.0 / 1507.1);
    assert!(f.cpu_share > 0.99, "{}", f.cpu_share);
}

#[test]
fn fires_just_above_its_thresholds() {
    assert_fires(
        &slow_churn(30, 30),
        "busy-wait",
        Expected {
            title: "the server spins on the kernel while clients drain their responses",
            evidence: &[
                "3.0 ioctl calls per request (3.0 of them SIOCOUTQ: polling the send queue)",
                "3.0 epoll_ctl(MOD) per request: interest bounced",
            ],
            // With a slow phase, the share is what slow clients add: 1 − 20 µs / 22 µs.
            share: 1.0 - 20.0 / 22.0,
            confidence: Confidence::Medium,
        },
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "busy-wait",
        &[
            ("2.9 ioctls", slow_churn(29, 30)),
            ("2.9 epoll mods", slow_churn(30, 29)),
            ("9.9 wait returns", waiting(99)),
            ("9.9 wakeups", woken(99)),
            ("1.995x the CPU", slow_cpu(399_000)),
            ("100 ioctls", slow_churn(1000, 0)),
            ("100 epoll mods", slow_churn(0, 1000)),
            ("waits, wakeups and 5x the CPU", slow_and_wakeful()),
        ],
    );
}
