//! `sweep::growth`: cost per request grows with concurrency when CPU rises steadily and, with
//! eBPF, each request makes the server scan more fds.

use reqcost_analysis::sweep::{growth, Growth};
use reqcost_record::Phase;

use crate::util::{approx, edited, kernel, main, set_cpu};

/// The fixture's main phase (100 requests) with `cpu_us` of CPU and `fds` fds handed to
/// readiness waits per request.
fn point(cpu_us: f64, fds: u64) -> Phase {
    let ns = (cpu_us * 100_000.0).round() as u64;
    let rec = edited(|r| {
        set_cpu(main(r), ns, ns / 2);
        kernel(main(r)).waits[0].fds_asked = fds * 100;
    });
    rec.main_phase().unwrap().clone()
}

/// Without eBPF figures.
fn unconfirmed(cpu_us: f64) -> Phase {
    let mut p = point(cpu_us, 0);
    p.server.kernel = None;
    p
}

fn judge(points: &[(u32, Phase)]) -> Option<Growth> {
    let points: Vec<(u32, &Phase)> = points.iter().map(|(c, p)| (*c, p)).collect();
    growth(&points)
}

fn grows(points: &[(u32, Phase)]) -> bool {
    judge(points).expect("a judgement").grows
}

#[test]
fn grows_at_1_5_times_the_cpu_with_twice_the_fds_scanned() {
    let g = judge(&[
        (1, point(20.0, 512)),
        (16, point(25.0, 768)),
        (64, point(30.0, 1024)),
    ])
    .unwrap();
    assert!(g.grows);
    assert_eq!((g.from_concurrency, g.to_concurrency), (1, 64));
    approx(g.cpu_ratio, 1.5);
    approx(g.scan_ratio.unwrap(), 2.0);
}

#[test]
fn no_growth_just_below_each_threshold_or_on_one_signal_alone() {
    for (case, last) in [
        ("1.495x the CPU", point(29.9, 4096)),
        ("1.998x the fds scanned", point(60.0, 1023)),
        ("3x the CPU, the same fds scanned", point(60.0, 512)),
        ("10x the fds scanned, the same CPU", point(20.0, 5120)),
    ] {
        assert!(!grows(&[(1, point(20.0, 512)), (64, last)]), "{case}");
    }
}

#[test]
fn a_step_down_beyond_a_tenth_breaks_the_trend() {
    let with_middle = |cpu_us| {
        grows(&[
            (1, point(20.0, 512)),
            (16, point(40.0, 768)),
            (64, point(cpu_us, 1024)),
        ])
    };
    assert!(with_middle(37.0));
    assert!(!with_middle(35.0));
}

#[test]
fn without_ebpf_the_cpu_must_double() {
    let g = judge(&[(1, unconfirmed(20.0)), (64, unconfirmed(40.0))]).unwrap();
    assert!(g.grows);
    assert_eq!(g.scan_ratio, None);
    assert!(!grows(&[(1, unconfirmed(20.0)), (64, unconfirmed(39.9))]));
}

#[test]
fn no_judgement_without_two_cpu_figures() {
    assert!(judge(&[(1, point(20.0, 512))]).is_none());
    let mut no_cpu = point(20.0, 512);
    no_cpu.per_request.cpu_total_us = None;
    assert!(judge(&[(1, point(20.0, 512)), (64, no_cpu)]).is_none());
    assert!(judge(&[(1, point(0.0, 512)), (64, point(20.0, 512))]).is_none());
}
