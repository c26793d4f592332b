//! `sweep::growth`: cost per request grows with concurrency when CPU rises beyond the noise of
//! the repetitions and steadily and, with eBPF, each request makes the server scan more fds.

use reqcost_analysis::stats::Verdict;
use reqcost_analysis::sweep::{growth, Growth, LevelRuns, SweepReport, CORE_SHARE, MACHINE_SHARE};
use reqcost_record::{Phase, Pinning};

use crate::util::{approx, edited, kernel, main, set_cpu};

/// The fixture's main phase (100 requests) with `cpu_us` of CPU and `fds` fds handed to
/// readiness waits per request.
fn point(cpu_us: f64, fds: u64) -> Phase {
    let ns = (cpu_us * 100_000.0).round() as u64;
    let rec = edited(|r| {
        set_cpu(main(r), ns, ns / 2);
        let wait = &mut kernel(main(r)).waits[0];
        wait.syscall = "pselect6".into();
        wait.fds_asked = fds * 100;
    });
    rec.main_phase().unwrap().clone()
}

/// Without eBPF figures.
fn unconfirmed(cpu_us: f64) -> Phase {
    let mut p = point(cpu_us, 0);
    p.server.kernel = None;
    p
}

/// Each level measured three times alike: the interval is as narrow as it gets.
fn judge(points: &[(u32, Phase)]) -> Option<Growth> {
    let levels: Vec<LevelRuns> = points
        .iter()
        .map(|(c, p)| LevelRuns {
            cpus: 2,
            concurrency: *c,
            phases: vec![p, p, p],
        })
        .collect();
    growth(&levels)
}

/// Levels whose repetitions measured the CPU figures given, in repetition order.
fn judge_repeated(levels: &[(u32, &[f64])]) -> Growth {
    let phases: Vec<(u32, Vec<Phase>)> = levels
        .iter()
        .map(|(c, cpu)| (*c, cpu.iter().map(|&us| point(us, 512)).collect()))
        .collect();
    let levels: Vec<LevelRuns> = phases
        .iter()
        .map(|(c, ps)| LevelRuns {
            cpus: 2,
            concurrency: *c,
            phases: ps.iter().collect(),
        })
        .collect();
    growth(&levels).expect("a judgement")
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

#[test]
fn growth_is_claimed_only_when_the_interval_excludes_noise() {
    let with_fds =
        |cpu: &[f64], fds| -> Vec<Phase> { cpu.iter().map(|&us| point(us, fds)).collect() };
    let low = with_fds(&[20.0, 21.0, 19.0], 512);
    let steady = with_fds(&[40.0, 41.0, 39.0], 1024);
    let noisy = with_fds(&[20.0, 80.0, 25.0], 1024);
    let judge = |high: &[Phase]| {
        growth(&[
            LevelRuns {
                cpus: 2,
                concurrency: 1,
                phases: low.iter().collect(),
            },
            LevelRuns {
                cpus: 2,
                concurrency: 64,
                phases: high.iter().collect(),
            },
        ])
        .unwrap()
    };
    let g = judge(&steady);
    assert!(g.grows, "{g:?}");
    assert_eq!(g.change, Verdict::Worse);
    assert!(g.cpu_ratio_low.unwrap() > 1.5, "{g:?}");
    // A mean 2x higher, but one repetition of three carries it: no claim.
    let g = judge(&noisy);
    assert!(!g.grows, "{g:?}");
    assert_eq!(g.change, Verdict::Inconclusive);
    assert!(g.cpu_ratio_low.unwrap() < 1.0, "{g:?}");
}

#[test]
fn flat_when_the_interval_fits_within_five_percent() {
    let g = judge_repeated(&[(1, &[20.0, 22.0, 19.0]), (64, &[20.2, 22.1, 19.3])]);
    assert_eq!(g.change, Verdict::NoSignificantDifference, "{g:?}");
    assert!(!g.grows);
    let g = judge_repeated(&[(1, &[20.0, 22.0, 19.0]), (64, &[10.0, 11.0, 9.6])]);
    assert_eq!(g.change, Verdict::Better, "{g:?}");
}

#[test]
fn one_repetition_gives_no_interval_and_no_claim() {
    let g = judge_repeated(&[(1, &[20.0]), (64, &[60.0])]);
    assert_eq!((g.cpu_ratio_low, g.cpu_ratio_high), (None, None));
    assert_eq!(g.change, Verdict::Inconclusive);
    assert!(!g.grows);
}

#[test]
fn the_report_groups_runs_by_level_in_the_order_they_ran() {
    let rec = |cpu_us: f64| {
        let ns = (cpu_us * 100_000.0).round() as u64;
        edited(|r| set_cpu(main(r), ns, ns / 2))
    };
    let order = vec![5, 10, 5, 10, 5, 10];
    let records = [10.0, 30.0, 12.0, 33.0, 11.0, 30.0].map(rec).to_vec();
    let report = SweepReport::of(3, order.clone(), records, None);
    assert_eq!(report.run_order, order);
    let levels: Vec<(u32, usize)> = report
        .levels
        .iter()
        .map(|l| (l.concurrency, l.runs))
        .collect();
    assert_eq!(levels, [(5, 3), (10, 3)]);
    let cpu = report.levels[0].get("CPU").unwrap();
    assert_eq!(cpu.values, [10.0, 12.0, 11.0]);
    approx(cpu.mean, 11.0);
    // sd 1, n 3: 4.303 / sqrt(3)
    approx(cpu.half_width().unwrap(), 4.303 / 3f64.sqrt());
    let runs = report.level_runs();
    let (i, typical) = runs[1].typical().unwrap();
    assert_eq!((i, typical.per_request.cpu_total_us), (2, Some(30.0)));
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["levels"][0]["metrics"][0]["metric"], "CPU");
    assert_eq!(json["growth"]["change"], "worse");
    let back: SweepReport = serde_json::from_value(json).unwrap();
    assert_eq!(back.levels.len(), 2);
}

#[test]
fn a_run_pinned_otherwise_than_its_level_is_flagged() {
    let pinned = |client: u32, server: u32| {
        edited(|r| {
            r.pinning = Pinning {
                enabled: true,
                client_cpus: vec![client],
                server_cpus: vec![server],
                note: None,
            }
        })
    };
    let order = vec![5, 10, 5, 10, 5, 10];
    let mut records: Vec<_> = (0..6).map(|_| pinned(0, 1)).collect();
    records[3] = edited(|r| r.pinning = Pinning::default());
    let report = SweepReport::of(3, order, records, None);
    assert_eq!(report.levels[0].pinning_differs, Vec::<usize>::new());
    assert_eq!(report.levels[1].pinning_differs, [2]);
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["levels"][0].get("pinning_differs").is_none());
    assert_eq!(json["levels"][1]["pinning_differs"], serde_json::json!([2]));
}

#[test]
fn each_level_has_the_servers_cpu_as_a_share_of_a_core_and_of_the_machine() {
    // The fixture's main phase: its CPU over its client's elapsed time.
    let rec = edited(|r| r.machine.cpus = 4);
    let main = rec.main_phase().unwrap();
    let core =
        main.server.cpu.as_ref().unwrap().total_ns as f64 / 1e9 / main.client.elapsed_s * 100.0;
    let report = SweepReport::of(1, vec![5], vec![rec], None);
    approx(report.levels[0].get(CORE_SHARE).unwrap().mean, core);
    approx(
        report.levels[0].get(MACHINE_SHARE).unwrap().mean,
        core / 4.0,
    );
}
