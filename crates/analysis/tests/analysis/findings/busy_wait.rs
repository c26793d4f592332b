//! busy-wait: two of ≥ 3 ioctl, ≥ 3 epoll_ctl(MOD), ≥ 10 wait returns or wakeups, and ≥ 2x CPU
//! with slow clients, one of them the ioctl or epoll_ctl churn; judged in the slow phase.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{IoctlStat, Phase, RunRecord};

use crate::util::{
    assert_evidence, assert_share, assert_silent, edit, edited, fired, kernel, main, set_cpu,
    set_syscall, slow,
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

#[test]
fn fires_on_send_queue_polling_with_epoll_churn() {
    let f = fired(&slow_churn(30, 30), "busy-wait");
    assert_eq!(f.phase, "slow-clients");
    assert_evidence(
        &f,
        &[
            "3.0 ioctl calls per request (3.0 of them SIOCOUTQ: polling the send queue)",
            "3.0 epoll_ctl(MOD) per request: interest bounced",
        ],
    );
    // With a slow phase, the share is what slow clients add: 1 − 20 µs / 22 µs.
    assert_share(&f, 1.0 - 20.0 / 22.0);
    assert_eq!(f.confidence, Confidence::Medium);
}

#[test]
fn silent_below_three_ioctls() {
    assert_silent(&slow_churn(29, 30), "busy-wait");
}

#[test]
fn silent_below_three_epoll_mods() {
    assert_silent(&slow_churn(30, 29), "busy-wait");
}

#[test]
fn ten_wait_returns_per_request_are_a_signal() {
    let returns = |n| edit(slow_churn(30, 0), |r| kernel(slow(r)).waits[0].returns = n);
    let f = fired(&returns(100), "busy-wait");
    assert_evidence(
        &f,
        &["10.0 readiness-wait returns and 4.0 wakeups per request for 1100 B sent"],
    );
    assert_silent(&returns(99), "busy-wait");
}

#[test]
fn ten_wakeups_per_request_are_a_signal() {
    let wakeups = |n| edit(slow_churn(0, 30), |r| kernel(slow(r)).sched.wakeups = n);
    let f = fired(&wakeups(100), "busy-wait");
    assert_evidence(
        &f,
        &["4.0 readiness-wait returns and 10.0 wakeups per request"],
    );
    assert_silent(&wakeups(99), "busy-wait");
}

#[test]
fn twice_the_cpu_with_slow_clients_is_a_signal() {
    let slow_cpu = |ns| edit(slow_churn(30, 0), |r| set_cpu(slow(r), ns, ns / 2));
    let f = fired(&slow_cpu(400_000), "busy-wait");
    assert_evidence(
        &f,
        &["CPU per request 20.0 µs with fast clients, 40.0 µs with slow ones (2.0x)"],
    );
    assert_share(&f, 0.5);
    assert_silent(&slow_cpu(399_000), "busy-wait");
}

#[test]
fn three_signals_are_high_confidence() {
    let rec = edit(slow_churn(30, 30), |r| kernel(slow(r)).sched.wakeups = 100);
    assert_eq!(fired(&rec, "busy-wait").confidence, Confidence::High);
}

#[test]
fn silent_without_churn_however_slow_and_wakeful() {
    // Waits, wakeups and CPU growth alone are what any slow client causes.
    let rec = edited(|r| {
        let s = slow(r);
        kernel(s).waits[0].returns = 1000;
        kernel(s).sched.wakeups = 1000;
        set_cpu(s, 1_000_000, 500_000);
    });
    assert_silent(&rec, "busy-wait");
}

#[test]
fn silent_on_ioctls_alone() {
    assert_silent(&slow_churn(1000, 0), "busy-wait");
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
    // Time in ioctl (30 000 ns) and epoll_ctl (30 400 ns) plus half of epoll_wait's 604 000 ns,
    // over 100 requests: 3 624 ns of 20 µs.
    assert_share(&f, 3624.0 / 20_000.0);
}
