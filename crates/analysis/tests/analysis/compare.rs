//! `compare`: verdicts from B's point of view, per metric, and the findings that appear or
//! vanish between A and B.

use reqcost_analysis::compare::{
    compare, Comparison, MetricComparison, PhaseComparison, Side, FORMAT, VERSION,
};
use reqcost_analysis::stats::Verdict;
use reqcost_record::{CpuSplit, CpuTimes, ExternalLoad, Outcome, RunRecord};

use crate::schema::{self, assert_documented, assert_shape, Schema};
use crate::util::{
    approx, clean, edit, edited, fixture, kernel, main, set_cpu, set_syscall, slow, socket_writes,
};

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

fn phase<'a>(c: &'a Comparison, name: &str) -> &'a PhaseComparison {
    c.phases
        .iter()
        .find(|p| p.phase == name)
        .unwrap_or_else(|| panic!("no phase {name} in the comparison"))
}

fn main_phase(c: &Comparison) -> &PhaseComparison {
    phase(c, "main")
}

/// The metric `name` of the main phase.
fn metric<'a>(c: &'a Comparison, name: &str) -> &'a MetricComparison {
    phase_metric(c, "main", name)
}

fn phase_metric<'a>(c: &'a Comparison, phase_name: &str, name: &str) -> &'a MetricComparison {
    phase(c, phase_name)
        .metrics
        .iter()
        .find(|m| m.metric == name)
        .unwrap_or_else(|| panic!("no {name} in phase {phase_name} of the comparison"))
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
    assert_eq!(main_phase(&c).repetitions, 5);
    assert_eq!(metric(&c, "CPU").verdict, Verdict::NoSignificantDifference);
    for name in ["syscalls", "write calls", "bytes received", "wakeups"] {
        assert_eq!(metric(&c, name).verdict, Verdict::Identical, "{name}");
    }
    assert!(c.findings_appeared.is_empty() && c.findings_vanished.is_empty());
    assert!(main_phase(&c)
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

/// One run of `cpu_us` per request whose 100 requests' CPU spreads as wide as its mean.
fn one_run_of_requests(cpu_us: f64) -> Vec<RunRecord> {
    each(runs(&[cpu_us]), move |r| {
        let stats = main(r).requests.get_or_insert_with(Default::default);
        stats.requests = 100;
        stats.cpu_per_request = reqcost_record::NsDistribution {
            mean: cpu_us * 1000.0,
            stddev: Some(cpu_us * 1000.0),
            ..Default::default()
        };
    })
}

#[test]
fn one_run_each_judges_cpu_from_the_per_request_distributions() {
    let c = compare(&one_run_of_requests(20.0), &one_run_of_requests(2.0));
    let cpu = metric(&c, "CPU");
    assert!(cpu.from_requests, "{cpu:?}");
    let r = cpu.ratio.unwrap();
    approx(r.ratio, 0.1);
    // Each mean's standard error is a tenth of it: the interval is 0.1 e^(±1.96·0.1414).
    approx(r.high, 0.1 * (1.96f64 * 0.02f64.sqrt()).exp());
    assert_eq!(cpu.verdict, Verdict::Better);
    let back = compare(&one_run_of_requests(2.0), &one_run_of_requests(20.0));
    assert_eq!(metric(&back, "CPU").verdict, Verdict::Worse);
    // 10 % more with requests that spread so wide is within the noise.
    let close = compare(&one_run_of_requests(20.0), &one_run_of_requests(22.0));
    assert_eq!(metric(&close, "CPU").verdict, Verdict::Inconclusive);
    assert!(metric(&close, "CPU").from_requests);
    // The other timed figures have no per-request spread.
    assert!(!metric(&c, "CPU user").from_requests);
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
    let top: Vec<(&str, f64, f64)> = main_phase(&c).syscalls[..2]
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
    assert_eq!(main_phase(&c).repetitions, 5);
    assert_eq!(metric(&c, "CPU").b.n, 5);
}

#[test]
fn every_phase_both_sides_measured_gets_its_own_verdict() {
    // B's slow phase costs 10x, its main phase the same as A's.
    let b = each(runs(&A), |r| set_cpu(slow(r), 2_200_000, 1_100_000));
    let c = compare(&runs(&A), &b);
    let phases: Vec<&str> = c.phases.iter().map(|p| p.phase.as_str()).collect();
    assert_eq!(phases, ["main", "slow-clients"]);
    assert_eq!(phase(&c, "slow-clients").repetitions, 5);
    let slow_cpu = phase_metric(&c, "slow-clients", "CPU");
    approx(slow_cpu.ratio.unwrap().ratio, 10.0);
    assert_eq!(slow_cpu.verdict, Verdict::Worse);
    assert_eq!(metric(&c, "syscalls").verdict, Verdict::Identical);
    assert!(c.only_in_a.is_empty() && c.only_in_b.is_empty());
}

#[test]
fn a_phase_one_side_lacks_is_named_not_compared() {
    let without_slow = each(runs(&A), |r| r.phases.retain(|p| p.name == "main"));
    let c = compare(&runs(&A), &without_slow);
    assert_eq!(c.phases.len(), 1);
    assert_eq!(c.only_in_a, ["slow-clients"]);
    assert!(c.only_in_b.is_empty());
}

#[test]
fn a_count_differing_by_a_hundred_thousandth_is_no_difference() {
    // 1 byte more over 100 requests of 1100 B: 0.0009 %.
    let b = each(runs(&A), |r| main(r).client.bytes_received += 1);
    let c = compare(&runs(&A), &b);
    assert_eq!(
        metric(&c, "bytes received").verdict,
        Verdict::NoSignificantDifference
    );
}

#[test]
fn the_run_order_is_the_order_the_records_started() {
    // Interleaved as compare runs them: A B, then B A.
    let started = |records: Vec<RunRecord>, times: [f64; 2]| {
        records
            .into_iter()
            .zip(times)
            .map(|(r, t)| edit(r, |r| r.started_unix_s = t))
            .collect::<Vec<_>>()
    };
    let a = started(runs(&[20.0, 20.0]), [1.0, 4.0]);
    let b = started(runs(&[20.0, 20.0]), [2.0, 3.0]);
    assert_eq!(
        compare(&a, &b).run_order,
        [Side::A, Side::B, Side::B, Side::A]
    );
}

#[test]
fn partial_records_are_marked() {
    let died = edited(|r| {
        r.outcome = Outcome::ServerDied {
            detail: "exit status 1".into(),
        }
    });
    let c = compare(&[clean()], std::slice::from_ref(&died));
    assert_eq!(c.partial.len(), 1);
    let p = &c.partial[0];
    assert_eq!((p.side, p.id.as_str()), (Side::B, died.id.as_str()));
    assert_eq!(p.outcome, "server died (exit status 1)");
    assert!(compare(&[clean()], &[clean()]).partial.is_empty());
}

const COMPARISON: Schema = &[
    ("format", "string"),
    ("version", "integer"),
    ("a", "object"),
    ("b", "object"),
    ("run_order", "array"),
    ("partial", "array"),
    ("phases", "array"),
    ("client", "array?"),
    ("only_in_a", "array"),
    ("only_in_b", "array"),
    ("findings_appeared", "array"),
    ("findings_vanished", "array"),
    ("class_code", "array?"),
];
const SIDE: Schema = &[("server", "string"), ("runs", "array")];
const PARTIAL: Schema = &[("side", "string"), ("id", "string"), ("outcome", "string")];
const PHASE: Schema = &[
    ("phase", "string"),
    ("repetitions", "integer"),
    ("metrics", "array"),
    ("syscalls", "array"),
    ("hops", "array?"),
];
const METRIC: Schema = &[
    ("metric", "string"),
    ("unit", "string"),
    ("a", "object"),
    ("b", "object"),
    ("ratio", "object?"),
    ("verdict", "string"),
];
const SERIES: Schema = &[
    ("mean", "number"),
    ("min", "number"),
    ("max", "number"),
    ("n", "integer"),
];
const RATIO: Schema = &[("ratio", "number"), ("low", "number?"), ("high", "number?")];
const SYSCALL: Schema = &[
    ("name", "string"),
    ("a_per_request", "number"),
    ("b_per_request", "number"),
];

/// The `compare --json` document of `a` against `b`, checked against the schema.
fn checked_document(a: &[RunRecord], b: &[RunRecord]) -> serde_json::Value {
    let doc = serde_json::to_value(compare(a, b)).unwrap();
    assert_shape(&doc, COMPARISON, "comparison");
    assert_eq!(doc["format"], FORMAT);
    assert_eq!(doc["version"], VERSION);
    assert_shape(&doc["a"], SIDE, "a");
    assert_shape(&doc["b"], SIDE, "b");
    for p in schema::each(&doc, "partial") {
        assert_shape(p, PARTIAL, "partial");
    }
    if doc.get("client").is_some() {
        for m in schema::each(&doc, "client") {
            assert_shape(m, METRIC, "client metric");
        }
    }
    for phase in schema::each(&doc, "phases") {
        assert_shape(phase, PHASE, "phase");
        for m in schema::each(phase, "metrics") {
            assert_shape(m, METRIC, "metric");
            assert_shape(&m["a"], SERIES, "a");
            assert_shape(&m["b"], SERIES, "b");
            if let Some(ratio) = m.get("ratio") {
                assert_shape(ratio, RATIO, "ratio");
            }
        }
        for s in schema::each(phase, "syscalls") {
            assert_shape(s, SYSCALL, "syscall");
        }
    }
    doc
}

#[test]
fn the_json_document_has_the_documented_fields_and_types() {
    let busy = fixture("busy-wait.json");
    let died = edit(clean(), |r| {
        r.outcome = Outcome::ServerDied {
            detail: "exit status 1".into(),
        }
    });
    let doc = checked_document(std::slice::from_ref(&busy), &[died]);
    assert_eq!(doc["a"]["runs"][0], busy.id.as_str());
    assert_eq!(
        doc["a"]["server"],
        busy.target.command.as_ref().unwrap().join(" ")
    );
    assert_eq!(doc["partial"][0]["side"], "B");
    assert_eq!(doc["findings_vanished"][0], "busy-wait");
    // One run each: a ratio, and no interval rather than an infinite one.
    let cpu = &doc["phases"][0]["metrics"][0];
    assert_eq!(cpu["metric"], "CPU");
    assert!(cpu["ratio"]["ratio"].is_number() && cpu["ratio"].get("high").is_none());

    let doubled: Vec<f64> = A.iter().map(|x| x * 2.0 + 0.1).collect();
    let doc = checked_document(&runs(&A), &runs(&doubled));
    let cpu = &doc["phases"][0]["metrics"][0];
    assert_eq!(cpu["verdict"], "worse");
    let r = |bound: &str| cpu["ratio"][bound].as_f64().unwrap();
    assert!(r("low") < r("ratio") && r("ratio") < r("high"), "{cpu}");
}

#[test]
fn every_json_field_is_documented() {
    assert_documented(
        "compare.md",
        &[
            COMPARISON, SIDE, PARTIAL, PHASE, METRIC, SERIES, RATIO, SYSCALL,
        ],
    );
}

/// The clean fixture as if driven by a `--load` command whose tree used `cpu_ns` of CPU and
/// made `sendto` calls.
fn with_client(cpu_ns: u64, sendto: u64) -> RunRecord {
    edited(|r| {
        r.workload.load = Some(ExternalLoad {
            command: "client".into(),
            cpu: Some(CpuTimes {
                total_ns: cpu_ns,
                user_ns: cpu_ns / 2,
                system_ns: cpu_ns / 2,
                source: "cgroup".into(),
                split: CpuSplit::Ticks,
            }),
            syscalls: Some([("sendto".to_string(), sendto)].into()),
            ..Default::default()
        });
    })
}

#[test]
fn the_clients_are_compared_side_by_side() {
    let (a, b) = ([with_client(1_000_000, 100)], [with_client(1_000_000, 200)]);
    let c = compare(&a, &b);
    let client = |name: &str| {
        c.client
            .iter()
            .find(|m| m.metric == name)
            .unwrap_or_else(|| panic!("no {name} in {:#?}", c.client))
    };
    // The fixture's main phase served 100 requests.
    let syscalls = client("client syscalls");
    assert_eq!((syscalls.a.mean, syscalls.b.mean), (1.0, 2.0));
    assert_eq!(syscalls.verdict, Verdict::Worse);
    let cpu = client("client CPU");
    assert_eq!((cpu.a.mean, cpu.b.mean), (10.0, 10.0));
    let doc = checked_document(&a, &b);
    assert_eq!(doc["client"].as_array().map(Vec::len), Some(3));
    // Without a client on one side there is nothing to set beside it.
    assert!(compare(&a, &[clean()]).client.is_empty());
}
