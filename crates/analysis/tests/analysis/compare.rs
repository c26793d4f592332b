//! `compare`: verdicts from B's point of view, per metric, and the findings that appear or
//! vanish between A and B.

use reqcost_analysis::compare::{compare, Comparison, MetricComparison};
use reqcost_analysis::stats::Verdict;
use reqcost_record::RunRecord;

use crate::util::{clean, edit, edited, kernel, main, set_cpu, set_syscall, socket_writes};

/// A record with a small-writes finding: 8 writes of 100 B per request.
fn small_writes() -> RunRecord {
    socket_writes(800, 800 * 100)
}

/// One record per repetition, each the fixture with `cpu_us` of CPU per request (100 requests).
fn runs(cpu_us: &[f64]) -> Vec<RunRecord> {
    cpu_us
        .iter()
        .map(|&us| {
            let ns = (us * 100_000.0).round() as u64;
            edited(|r| set_cpu(main(r), ns, ns / 2))
        })
        .collect()
}

fn metric<'a>(c: &'a Comparison, name: &str) -> &'a MetricComparison {
    c.metrics
        .iter()
        .find(|m| m.metric == name)
        .unwrap_or_else(|| panic!("no {name} in the comparison"))
}

fn verdict(a: &[RunRecord], b: &[RunRecord], name: &str) -> Verdict {
    metric(&compare(a, b), name).verdict
}

/// `records` each changed by `change`.
fn each(records: Vec<RunRecord>, change: impl Fn(&mut RunRecord)) -> Vec<RunRecord> {
    records.into_iter().map(|r| edit(r, &change)).collect()
}

const A: [f64; 5] = [20.0, 21.0, 19.5, 20.2, 20.1];

#[test]
fn the_same_runs_make_no_difference() {
    let c = compare(&runs(&A), &runs(&A));
    assert_eq!(c.repetitions, 5);
    assert_eq!(metric(&c, "CPU").verdict, Verdict::NoSignificantDifference);
    for name in ["syscalls", "write calls", "bytes received", "wakeups"] {
        assert_eq!(metric(&c, name).verdict, Verdict::Identical, "{name}");
    }
    assert!(c.findings_appeared.is_empty() && c.findings_vanished.is_empty());
    assert!(c
        .syscalls
        .iter()
        .all(|s| s.a_per_request == s.b_per_request));
}

#[test]
fn twice_the_cpu_is_worse_and_half_is_better() {
    let doubled: Vec<f64> = A.iter().map(|x| x * 2.0 + 0.1).collect();
    assert_eq!(verdict(&runs(&A), &runs(&doubled), "CPU"), Verdict::Worse);
    assert_eq!(verdict(&runs(&doubled), &runs(&A), "CPU"), Verdict::Better);
    let c = compare(&runs(&A), &runs(&doubled));
    let cpu = metric(&c, "CPU");
    let ratio = cpu.ratio.unwrap();
    assert!(ratio.low > 1.9 && ratio.high < 2.1, "{ratio:?}");
    assert_eq!((cpu.a.n, cpu.b.n), (5, 5));
    assert_eq!((cpu.a.min, cpu.a.max), (19.5, 21.0));
}

#[test]
fn a_change_under_the_noise_threshold_is_no_difference() {
    let one_percent: Vec<f64> = A.iter().map(|x| x * 1.01).collect();
    assert_eq!(
        verdict(&runs(&A), &runs(&one_percent), "CPU"),
        Verdict::NoSignificantDifference
    );
}

#[test]
fn noise_larger_than_the_change_is_inconclusive() {
    let a = runs(&[20.0; 4]);
    let b = runs(&[12.0, 30.0, 16.0, 28.0]);
    assert_eq!(verdict(&a, &b, "CPU"), Verdict::Inconclusive);
}

#[test]
fn one_repetition_claims_no_timed_change_but_exact_counts() {
    let a = runs(&[20.0]);
    let b = each(runs(&[40.0]), |r| {
        set_syscall(main(r), "futex", 100, 10_000)
    });
    let c = compare(&a, &b);
    assert_eq!(metric(&c, "CPU").verdict, Verdict::Inconclusive);
    assert_eq!(metric(&c, "syscalls").verdict, Verdict::Worse);
    assert_eq!(metric(&c, "wakeups").verdict, Verdict::Identical);
}

#[test]
fn more_throughput_is_better() {
    let faster = |rps: f64| each(runs(&A), move |r| main(r).client.throughput_rps = rps);
    let c = compare(&faster(1000.0), &faster(2000.0));
    assert_eq!(metric(&c, "throughput").verdict, Verdict::Better);
    let c = compare(&faster(2000.0), &faster(1000.0));
    assert_eq!(metric(&c, "throughput").verdict, Verdict::Worse);
}

#[test]
fn exact_counts_differ_without_statistics() {
    let fewer = each(runs(&A), |r| {
        set_syscall(main(r), "epoll_wait", 202, 404_000)
    });
    let more_wakeups = each(runs(&A), |r| kernel(main(r)).sched.wakeups = 103);
    assert_eq!(verdict(&runs(&A), &fewer, "syscalls"), Verdict::Better);
    assert_eq!(verdict(&runs(&A), &more_wakeups, "wakeups"), Verdict::Worse);
}

#[test]
fn counts_that_vary_between_repetitions_are_judged_as_ratios() {
    // 1.00 and 1.01 extra calls per request in B: B/A varies a little around 1.1.
    let b: Vec<RunRecord> = [100, 101, 100, 101]
        .iter()
        .map(|&n| edited(|r| set_syscall(main(r), "futex", n, n * 100)))
        .collect();
    let c = compare(&runs(&[20.0; 4]), &b);
    let s = metric(&c, "syscalls");
    assert!(s.ratio.is_some());
    assert_eq!(s.verdict, Verdict::Worse);
}

#[test]
fn syscall_differences_come_largest_first() {
    // B adds 2 and 4 futex calls per request (3 on average) and drops 1 epoll_wait of 3.02.
    let b: Vec<RunRecord> = [200, 400]
        .iter()
        .map(|&n| {
            edited(|r| {
                set_syscall(main(r), "futex", n, n * 100);
                set_syscall(main(r), "epoll_wait", 202, 404_000);
            })
        })
        .collect();
    let c = compare(&runs(&[20.0, 20.0]), &b);
    let top: Vec<(&str, f64, f64)> = c.syscalls[..2]
        .iter()
        .map(|s| (s.name.as_str(), s.a_per_request, s.b_per_request))
        .collect();
    assert_eq!(top, [("futex", 0.0, 3.0), ("epoll_wait", 3.02, 2.02)]);
}

#[test]
fn findings_of_every_run_appear_or_vanish() {
    let clean_runs = vec![clean(), clean()];
    let writing = vec![small_writes(), small_writes()];
    let c = compare(&clean_runs, &writing);
    assert_eq!(c.findings_appeared, ["small-writes"]);
    assert!(c.findings_vanished.is_empty());
    let c = compare(&writing, &clean_runs);
    assert_eq!(c.findings_vanished, ["small-writes"]);
    assert!(c.findings_appeared.is_empty());
}

#[test]
fn a_finding_in_some_runs_only_is_not_claimed() {
    let mixed = vec![small_writes(), clean()];
    let c = compare(&[clean(), clean()], &mixed);
    assert!(c.findings_appeared.is_empty(), "{:?}", c.findings_appeared);
}

#[test]
fn records_without_a_measured_phase_are_left_out() {
    let mut b = runs(&A);
    b.push(edited(|r| r.phases.clear()));
    let c = compare(&runs(&A), &b);
    assert_eq!(c.repetitions, 5);
    assert_eq!(metric(&c, "CPU").b.n, 5);
}
