//! `check`: each limit passes up to its percentage and fails beyond it.

use reqcost_analysis::check::{
    check, check_per, refuse_partial, CheckItem, CheckResult, Limits, PhaseCheck, FORMAT, VERSION,
};
use reqcost_record::{
    CpuMethod, CpuWindows, FdKind, IoDirection, Outcome, ProbeCost, RunRecord, Unit, WindowTotals,
};

use crate::document::FINDING;
use crate::schema::{assert_documented, assert_shape, each, Schema};
use crate::util::{
    approx, clean, edit, edited, kernel, main, set_cpu, set_io, set_syscall, slow, socket_writes,
};

const LIMITS: Limits = Limits {
    max_cpu_regression_pct: 25.0,
    max_syscalls_regression_pct: 5.0,
};

fn checked(run: &RunRecord, baseline: &RunRecord) -> CheckResult {
    check(run, baseline, LIMITS).unwrap()
}

/// The fixture (20 µs of CPU, 10.12 syscalls per request) with `cpu_ns` of CPU over its 100
/// requests and `extra` more syscalls.
fn run(cpu_ns: u64, extra: u64) -> RunRecord {
    edited(|r| {
        set_cpu(main(r), cpu_ns, cpu_ns / 2);
        set_syscall(main(r), "futex", extra, extra * 100);
    })
}

fn phase<'a>(result: &'a CheckResult, name: &str) -> &'a PhaseCheck {
    result
        .phases
        .iter()
        .find(|p| p.phase == name)
        .unwrap_or_else(|| panic!("no phase {name} in {:#?}", result.phases))
}

/// The bound `name` of the main phase.
fn item<'a>(result: &'a CheckResult, name: &str) -> &'a CheckItem {
    phase_item(result, "main", name)
}

fn phase_item<'a>(result: &'a CheckResult, phase_name: &str, name: &str) -> &'a CheckItem {
    let p = phase(result, phase_name);
    p.items
        .iter()
        .find(|i| i.metric == name)
        .unwrap_or_else(|| panic!("no {name} in {p:#?}"))
}

#[test]
fn the_same_figures_pass() {
    let result = checked(&clean(), &clean());
    assert!(result.passed);
    for p in &result.phases {
        for i in &p.items {
            assert_eq!(i.change_pct, 0.0, "{}: {}", p.phase, i.metric);
        }
    }
}

/// Whether `run` passes the limit on `name` against the clean fixture; the whole check follows
/// it when the other limit passes.
fn passes(run: &RunRecord, name: &str) -> bool {
    let result = checked(run, &clean());
    let pass = item(&result, name).pass;
    assert_eq!(result.passed, pass, "the check against {name}");
    pass
}

const CPU: &str = "CPU per request (µs)";
const SYSCALLS: &str = "syscalls per request";

#[test]
fn cpu_passes_up_to_its_limit() {
    let at_limit = checked(&run(2_500_000, 0), &clean());
    let cpu = item(&at_limit, CPU);
    assert_eq!(
        (cpu.baseline, cpu.run, cpu.change_pct, cpu.limit_pct),
        (20.0, 25.0, 25.0, 25.0)
    );
    assert!(passes(&run(2_500_000, 0), CPU));
    assert!(!passes(&run(2_510_000, 0), CPU));
}

#[test]
fn a_run_exactly_at_the_limit_passes() {
    // 22 µs against 20 µs is 10.000000000000009 % in floating point.
    let limits = Limits {
        max_cpu_regression_pct: 10.0,
        max_syscalls_regression_pct: 5.0,
    };
    let result = check(&run(2_200_000, 0), &clean(), limits).unwrap();
    let cpu = item(&result, CPU);
    assert_eq!((cpu.baseline, cpu.run), (20.0, 22.0));
    assert!(cpu.pass, "{cpu:?}");
    assert!(result.passed);
    let result = check(&run(2_200_001, 0), &clean(), limits).unwrap();
    assert!(!item(&result, CPU).pass);
}

#[test]
fn syscalls_pass_up_to_their_limit() {
    // 50 calls more over 100 requests is +4.9 % of 10.12; 51 is +5.04 %.
    approx(
        item(&checked(&run(2_000_000, 50), &clean()), SYSCALLS).run,
        10.62,
    );
    assert!(passes(&run(2_000_000, 50), SYSCALLS));
    assert!(!passes(&run(2_000_000, 51), SYSCALLS));
}

#[test]
fn cheaper_runs_pass() {
    // Cheaper with slow clients too: half the CPU in main alone would make the slow phase's
    // 22 µs a client-sensitive finding.
    let cheaper = edited(|r| {
        set_cpu(main(r), 1_000_000, 500_000);
        set_cpu(slow(r), 110_000, 55_000);
        set_syscall(main(r), "epoll_wait", 2, 4000);
    });
    let result = checked(&cheaper, &clean());
    assert!(result.passed, "{:?}", result.failures());
    assert!(phase(&result, "main")
        .items
        .iter()
        .all(|i| i.change_pct < 0.0));
}

#[test]
fn one_failed_limit_fails_the_check() {
    let result = checked(&run(2_000_000, 1000), &clean());
    assert!(item(&result, CPU).pass);
    assert!(!result.passed);
}

#[test]
fn without_ebpf_on_either_side_procfs_read_and_write_calls_are_compared() {
    let without_ebpf = edited(|r| {
        main(r).server.kernel = None;
        main(r).server.io.as_mut().unwrap().syscw = 130;
    });
    let result = checked(&without_ebpf, &clean());
    let rw = item(&result, "read+write calls per request (procfs)");
    // syscr 302 and syscw 100 against 130, over 100 requests.
    approx(rw.baseline, 4.02);
    approx(rw.run, 4.32);
    assert!(!rw.pass);
}

#[test]
fn syscalls_from_nothing_are_an_unbounded_regression() {
    let nothing = edited(|r| kernel(main(r)).syscalls.clear());
    let result = checked(&clean(), &nothing);
    assert_eq!(item(&result, SYSCALLS).change_pct, f64::INFINITY);
    assert!(!result.passed);
    assert!(checked(&nothing, &nothing).passed);
}

#[test]
fn missing_figures_are_errors() {
    let no_cpu = edited(|r| main(r).server.cpu = None);
    let err = check(&no_cpu, &clean(), LIMITS).unwrap_err();
    assert!(err.contains("CPU per request is missing"), "{err}");
    let no_counts = edited(|r| {
        main(r).server.kernel = None;
        main(r).server.io = None;
    });
    let err = check(&clean(), &no_counts, LIMITS).unwrap_err();
    assert!(err.contains("syscall counts are missing"), "{err}");
}

#[test]
fn each_phase_is_held_to_the_bounds_against_its_own_baseline() {
    let result = checked(&clean(), &clean());
    let phases: Vec<&str> = result.phases.iter().map(|p| p.phase.as_str()).collect();
    assert_eq!(phases, ["main", "slow-clients"]);
    // The slow phase's own 22 µs per request (220 µs over its 10 requests), not main's 20.
    let slow_cpu = phase_item(&result, "slow-clients", CPU);
    approx(slow_cpu.baseline, 22.0);
    approx(slow_cpu.run, 22.0);
}

/// seeds/002: the loop costs nothing with fast clients and 100x with slow ones.
#[test]
fn a_slow_phase_regression_fails_the_check_while_main_passes() {
    let looping = edited(|r| {
        set_cpu(slow(r), 22_000_000, 20_000_000);
        set_syscall(slow(r), "ioctl", 10_000, 1_000_000);
    });
    let result = checked(&looping, &clean());
    assert!(phase(&result, "main").passed());
    let slow = phase(&result, "slow-clients");
    assert!(slow.items.iter().all(|i| !i.pass), "{slow:#?}");
    approx(phase_item(&result, "slow-clients", CPU).change_pct, 9900.0);
    assert!(!result.passed);
    let failures = result.failures();
    assert!(
        failures.iter().any(|f| f.starts_with("slow-clients: CPU")),
        "{failures:?}"
    );
    assert!(
        failures.iter().all(|f| !f.starts_with("main")),
        "{failures:?}"
    );
}

#[test]
fn a_phase_only_one_record_has_is_named_not_judged() {
    let without_slow = edited(|r| r.phases.retain(|p| p.name == "main"));
    let result = checked(&without_slow, &clean());
    assert!(result.passed);
    assert_eq!(result.phases.len(), 1);
    assert_eq!(result.only_in_baseline, ["slow-clients"]);
    assert!(result.only_in_run.is_empty());
    let err = check(&edited(|r| r.phases.clear()), &clean(), LIMITS).unwrap_err();
    assert!(err.contains("no measured phase in common"), "{err}");
}

/// Bounds wide open, so that only the findings can fail the check.
const OPEN: Limits = Limits {
    max_cpu_regression_pct: 1e9,
    max_syscalls_regression_pct: 1e9,
};

/// A major small-writes finding: 8 writes of 1023 B per request, 35 % of the CPU.
fn small_writes() -> RunRecord {
    socket_writes(800, 800 * 1023)
}

#[test]
fn a_new_major_finding_fails_the_check() {
    let result = check(&small_writes(), &clean(), OPEN).unwrap();
    assert!(result.phases.iter().all(PhaseCheck::passed));
    let ids: Vec<&str> = result
        .new_major_findings
        .iter()
        .map(|f| f.id.as_str())
        .collect();
    assert_eq!(ids, ["small-writes"]);
    assert!(!result.passed);
    assert_eq!(
        result.failures(),
        ["new major finding small-writes in main (35 % of its CPU)"]
    );
}

#[test]
fn a_finding_the_baseline_has_is_not_new() {
    let result = check(&small_writes(), &small_writes(), OPEN).unwrap();
    assert!(result.new_major_findings.is_empty());
    assert!(result.passed);
    let gone = check(&clean(), &small_writes(), OPEN).unwrap();
    assert!(gone.passed);
}

/// A generic dominant-code finding (regular expressions, 200 of 400 samples: 50 %) in a run
/// whose main phase costs `cpu_ns` over its 100 requests, against the clean fixture's 20 µs.
fn regex_bound(cpu_ns: u64) -> RunRecord {
    let mut rec = crate::findings::dominant_code::hot("pcre2_match", "libpcre2-8.so.0", 200);
    set_cpu(main(&mut rec), cpu_ns, cpu_ns / 2);
    rec
}

#[test]
fn a_new_generic_finding_fails_only_when_its_cost_grew_beyond_the_cpu_bound() {
    // A fix that cut CPU tenfold brings out the library left: 50 % of 2 µs is 5 % of the
    // baseline's 20 µs, within its 25 % bound.
    let fixed = check(&regex_bound(200_000), &clean(), LIMITS).unwrap();
    assert!(fixed.new_major_findings.is_empty(), "{fixed:#?}");
    assert!(fixed.passed, "{:?}", fixed.failures());
    // At the baseline's CPU, the same 50 % is half its CPU per request newly in one library.
    let grown = check(&regex_bound(2_000_000), &clean(), LIMITS).unwrap();
    assert!(grown.phases.iter().all(PhaseCheck::passed));
    let ids: Vec<&str> = grown
        .new_major_findings
        .iter()
        .map(|f| f.id.as_str())
        .collect();
    assert_eq!(ids, ["dominant-code"]);
    assert!(!grown.passed);
}

#[test]
fn partial_records_are_refused_by_name_and_outcome() {
    assert!(refuse_partial(&clean()).is_ok());
    let died = edited(|r| {
        r.outcome = Outcome::ServerDied {
            detail: "killed by signal 9".into(),
        }
    });
    let err = refuse_partial(&died).unwrap_err();
    assert!(err.contains(&died.id), "{err}");
    assert!(err.contains("server died (killed by signal 9)"), "{err}");
    let interrupted = edited(|r| r.outcome = Outcome::Interrupted);
    assert!(refuse_partial(&interrupted)
        .unwrap_err()
        .contains("interrupted"));
    // Allowed, a partial record is judged for what it holds.
    assert!(checked(&died, &clean()).passed);
}

const CHECK: Schema = &[
    ("format", "string"),
    ("version", "integer"),
    ("unit", "string?"),
    ("run", "string"),
    ("baseline", "string"),
    ("limits", "object"),
    ("passed", "bool"),
    ("phases", "array"),
    ("new_major_findings", "array"),
    ("only_in_run", "array"),
    ("only_in_baseline", "array"),
];
const LIMITS_SCHEMA: Schema = &[
    ("max_cpu_regression_pct", "number"),
    ("max_syscalls_regression_pct", "number"),
];
const PHASE: Schema = &[("phase", "string"), ("items", "array")];
const ITEM: Schema = &[
    ("metric", "string"),
    ("baseline", "number"),
    ("run", "number"),
    ("change_pct", "number"),
    ("limit_pct", "number"),
    ("interval_pct", "array?"),
    ("pass", "bool"),
];

#[test]
fn the_json_document_has_the_documented_fields_and_types() {
    let (run, baseline) = (small_writes(), clean());
    let doc = serde_json::to_value(check(&run, &baseline, OPEN).unwrap()).unwrap();
    assert_shape(&doc, CHECK, "check");
    assert_eq!(doc["format"], FORMAT);
    assert_eq!(doc["version"], VERSION);
    assert_eq!(doc["run"], run.id.as_str());
    assert_eq!(doc["baseline"], baseline.id.as_str());
    assert_shape(&doc["limits"], LIMITS_SCHEMA, "limits");
    assert_eq!(doc["passed"], false);
    for phase in each(&doc, "phases") {
        assert_shape(phase, PHASE, "phase");
        for item in each(phase, "items") {
            assert_shape(item, ITEM, "item");
        }
    }
    let findings = each(&doc, "new_major_findings");
    assert_eq!(findings.len(), 1);
    assert_shape(&findings[0], FINDING, "new major finding");
}

#[test]
fn every_json_field_is_documented() {
    assert_documented("ci.md", &[CHECK, LIMITS_SCHEMA, PHASE, ITEM]);
}

/// The main phase's per-request accounting: `n` requests averaging 20 µs (the fixture's CPU per
/// request) with standard deviation `sd_ns`.
fn spread(r: &mut RunRecord, n: u64, sd_ns: f64) {
    let stats = main(r).requests.get_or_insert_with(Default::default);
    stats.requests = n;
    stats.cpu_per_request = reqcost_record::NsDistribution {
        mean: 20_000.0,
        stddev: Some(sd_ns),
        ..Default::default()
    };
}

#[test]
fn a_cpu_change_within_its_interval_of_the_bound_is_noise_not_a_regression() {
    let limits = Limits {
        max_cpu_regression_pct: 10.0,
        max_syscalls_regression_pct: 5.0,
    };
    let judged = |n: u64, sd_ns: f64| {
        let baseline = edited(|r| spread(r, n, sd_ns));
        let run = edit(run(2_300_000, 0), |r| spread(r, n, sd_ns));
        let result = check(&run, &baseline, limits).unwrap();
        item(&result, CPU).clone()
    };
    // +15 % with requests spread at half their mean: the interval reaches down to about 0 %.
    let noisy = judged(100, 10_000.0);
    let [low, high] = noisy
        .interval_pct
        .expect("an interval from 100 requests a side");
    assert!(low < 10.0 && high > 15.0, "{noisy:?}");
    assert!(noisy.pass && noisy.within_noise(), "{noisy:?}");
    // The same change with a tight spread (5 %): the whole interval is beyond the bound.
    let tight = judged(100, 1_000.0);
    assert!(tight.interval_pct.unwrap()[0] > 10.0, "{tight:?}");
    assert!(!tight.pass, "{tight:?}");
    // Under 10 requests a side, the point change decides, as without accounting.
    let few = judged(9, 10_000.0);
    assert_eq!(few.interval_pct, None);
    assert!(!few.pass);
    let at = judged(10, 10_000.0);
    assert!(at.interval_pct.is_some() && at.pass, "{at:?}");
}

/// The main phase measured twice, its probed pass (less the probes' 100 µs) `apart` times its
/// unprobed pass's CPU per request, as a loaded machine moves a phase between two passes.
fn measured_twice(r: &mut RunRecord, apart: f64) {
    let m = main(r);
    let unprobed = m.server.cpu.as_ref().unwrap().total_ns;
    let pass = |cpu_ns: u64| WindowTotals {
        windows: 1,
        requests: 100,
        elapsed_s: 1.0,
        cpu_ns,
        ..Default::default()
    };
    m.cpu_windows = Some(CpuWindows {
        method: CpuMethod::UnprobedPass,
        reason: "a pass of each".into(),
        probed: pass((unprobed as f64 * apart) as u64 + 100_000),
        unprobed: pass(unprobed),
        count_scale: 1.0,
        requests_cut: 0,
        pass_work: None,
        pass_requests: 0,
        budget: None,
    });
    m.server.probe_cost = Some(ProbeCost {
        tree_ns: 100_000,
        ..Default::default()
    });
}

/// One run each: what the machine moves a phase's CPU by between runs, no request's spread
/// shows. Each record measures it on itself, its phases' two passes apart, and it widens the
/// interval: +91 % from 20 requests a side spread at 10 % of their mean is a regression beyond
/// their means' error, and noise when each record's passes came out 2x apart; a tenfold change
/// fails all the same.
#[test]
fn each_records_drift_between_its_passes_widens_the_cpu_interval() {
    let limits = Limits {
        max_cpu_regression_pct: 10.0,
        max_syscalls_regression_pct: 5.0,
    };
    let judged = |run_cpu: u64, apart: f64| {
        let baseline = edited(|r| {
            spread(r, 20, 2_000.0);
            measured_twice(r, apart);
        });
        let run = edit(run(run_cpu, 0), |r| {
            spread(r, 20, 0.0);
            let d = &mut main(r).requests.as_mut().unwrap().cpu_per_request;
            d.mean = run_cpu as f64 / 100.0;
            d.stddev = Some(0.1 * d.mean);
            measured_twice(r, apart);
        });
        let result = check(&run, &baseline, limits).unwrap();
        item(&result, CPU).clone()
    };
    let steady = judged(3_820_000, 1.0);
    assert!(
        steady.interval_pct.unwrap()[0] > 10.0 && !steady.pass,
        "{steady:?}"
    );
    let drifting = judged(3_820_000, 2.0);
    let [low, _] = drifting.interval_pct.unwrap();
    // t(19) 2.093 times √(2 · 0.1² / 20 + 2 · ln² 2) on the log scale.
    let half = 2.093 * (0.001f64 + 2.0 * 2f64.ln().powi(2)).sqrt();
    approx(low, (1.91 * (-half).exp() - 1.0) * 100.0);
    assert!(drifting.pass && drifting.within_noise(), "{drifting:?}");
    let tenfold = judged(20_000_000, 2.0);
    assert!(
        tenfold.interval_pct.unwrap()[0] > 10.0 && !tenfold.pass,
        "{tenfold:?}"
    );
}

/// A UDP server's record: one phase that served no request and sent 2 MiB in 2048 datagrams
/// (4 connections, as accepted sockets), with `cpu_ns` of CPU and `extra` futex calls beside
/// its sendmsg calls.
fn udp(cpu_ns: u64, extra: u64) -> RunRecord {
    edited(|r| {
        r.phases.retain(|p| p.name == "main");
        let m = main(r);
        m.client = Default::default();
        m.requests = None;
        let k = kernel(m);
        k.io.clear();
        k.syscalls.clear();
        k.udp.datagrams_sent = 2048;
        k.sockets.accepted = 4;
        k.udp.bytes_sent = 2 << 20;
        set_io(m, "sendmsg", IoDirection::Write, FdKind::Udp, 2048, 2 << 20);
        set_syscall(m, "sendmsg", 2048, 0);
        set_syscall(m, "futex", extra, 0);
        set_cpu(m, cpu_ns, cpu_ns / 2);
    })
}

#[test]
fn a_run_without_requests_is_judged_per_mib() {
    // 2 ms per MiB against 2.5 ms: +25 %, on the CPU limit; 64 more calls per MiB: +6.25 %.
    let result = checked(&udp(5_000_000, 128), &udp(4_000_000, 0));
    assert_eq!(result.unit, Unit::MiB);
    let cpu = item(&result, "CPU per MiB (µs)");
    approx(cpu.baseline, 2000.0);
    approx(cpu.run, 2500.0);
    assert!(cpu.pass);
    assert_eq!(
        cpu.interval_pct, None,
        "no per-MiB spread to judge noise by"
    );
    let syscalls = item(&result, "syscalls per MiB");
    approx(syscalls.baseline, 1024.0);
    approx(syscalls.run, 1088.0);
    assert!(!syscalls.pass);
    assert!(!result.passed);
    assert_eq!(
        result.failures(),
        vec!["main: syscalls per MiB +6.2 % (limit +5.0 %)".to_string()]
    );
    let doc = serde_json::to_value(&result).unwrap();
    assert_eq!(doc["unit"], "MiB");
    // Just beyond the CPU limit: a regression per MiB.
    let over = checked(&udp(5_100_000, 0), &udp(4_000_000, 0));
    assert!(!item(&over, "CPU per MiB (µs)").pass);
    // A record with requests on either side: per request, as before.
    assert_eq!(checked(&clean(), &clean()).unit, Unit::Request);
}

#[test]
fn a_check_per_datagram_or_connection_judges_in_that_unit() {
    let (run, baseline) = (udp(5_000_000, 128), udp(4_000_000, 0));
    for (unit, name, cpu_us, syscalls) in [
        (
            Unit::Datagram,
            "datagram",
            [1.953125, 2.44140625],
            [1.0, 1.0625],
        ),
        (
            Unit::Connection,
            "connection",
            [1000.0, 1250.0],
            [512.0, 544.0],
        ),
    ] {
        let result = check_per(&run, &baseline, Some(unit), LIMITS).unwrap();
        assert_eq!(result.unit, unit);
        let cpu = item(&result, &format!("CPU per {name} (µs)"));
        approx(cpu.baseline, cpu_us[0]);
        approx(cpu.run, cpu_us[1]);
        assert!(cpu.pass, "{name}: +25 % is on the limit");
        let calls = item(&result, &format!("syscalls per {name}"));
        approx(calls.baseline, syscalls[0]);
        approx(calls.run, syscalls[1]);
        assert!(!calls.pass, "{name}: +6.25 % is beyond 5 %");
        assert_eq!(
            result.failures(),
            vec![format!("main: syscalls per {name} +6.2 % (limit +5.0 %)")]
        );
    }
}

/// The stack fixture (nginx -> application -> PostgreSQL), its front's syscalls counted, with
/// the database's tree CPU times `db_times`, the front's figures unchanged.
fn stack_with_db(db_times: f64) -> RunRecord {
    let mut rec = crate::stack::record();
    main(&mut rec).server.kernel = Some(Default::default());
    set_syscall(main(&mut rec), "writev", 12, 1_000);
    let db = rec.phases[0]
        .hops
        .iter_mut()
        .find(|h| h.hop == 2)
        .expect("the database's hop");
    let cpu = db.cpu.as_mut().expect("its tree's CPU");
    cpu.total_ns = (cpu.total_ns as f64 * db_times) as u64;
    rec
}

#[test]
fn a_slower_database_behind_an_unchanged_front_fails_in_its_own_row() {
    let db_row = "postgres (hop 2) CPU per request (µs)";
    let base = stack_with_db(1.0);
    let same = checked(&base, &base);
    assert!(same.passed, "{:#?}", same.phases);
    let hops: Vec<(Option<u8>, &str)> = phase(&same, "main")
        .items
        .iter()
        .filter(|i| i.hop.is_some())
        .map(|i| (i.hop, i.metric.as_str()))
        .collect();
    assert_eq!(
        hops,
        [
            (Some(1), "gunicorn (hop 1) CPU per request (µs)"),
            (Some(2), db_row)
        ]
    );

    let slower = checked(&stack_with_db(2.0), &base);
    assert!(!slower.passed);
    let failed: Vec<&str> = phase(&slower, "main")
        .items
        .iter()
        .filter(|i| !i.pass)
        .map(|i| i.metric.as_str())
        .collect();
    assert_eq!(failed, [db_row]);
    approx(item(&slower, db_row).change_pct, 100.0);
    assert!(slower.failures()[0].starts_with(&format!("main: {db_row} +100.0 %")));
    // Within the bound (25 %), the database's row passes.
    assert!(checked(&stack_with_db(1.2), &base).passed);
}

#[test]
fn a_hop_under_another_name_in_the_baseline_is_not_judged() {
    let base = stack_with_db(1.0);
    let mut run = stack_with_db(3.0);
    run.hops.iter_mut().find(|h| h.hop == 2).unwrap().comm = "mariadbd".into();
    let result = checked(&run, &base);
    assert!(result.passed, "{:#?}", result.phases);
    assert!(phase(&result, "main")
        .items
        .iter()
        .all(|i| i.hop != Some(2)));
}
