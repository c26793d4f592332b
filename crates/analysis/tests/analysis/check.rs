//! `check`: each limit passes up to its percentage and fails beyond it.

use reqcost_analysis::check::{check, CheckItem, CheckResult, Limits};
use reqcost_record::RunRecord;

use crate::util::{approx, clean, edited, kernel, main, set_cpu, set_syscall};

const LIMITS: Limits = Limits {
    max_cpu_regression_pct: 25.0,
    max_syscalls_regression_pct: 5.0,
};

fn checked(run: &RunRecord, baseline: &RunRecord) -> CheckResult {
    check(
        run.main_phase().unwrap(),
        baseline.main_phase().unwrap(),
        LIMITS,
    )
    .unwrap()
}

/// The fixture (20 µs of CPU, 10.12 syscalls per request) with `cpu_ns` of CPU over its 100
/// requests and `extra` more syscalls.
fn run(cpu_ns: u64, extra: u64) -> RunRecord {
    edited(|r| {
        set_cpu(main(r), cpu_ns, cpu_ns / 2);
        set_syscall(main(r), "futex", extra, extra * 100);
    })
}

fn item<'a>(result: &'a CheckResult, name: &str) -> &'a CheckItem {
    result
        .items
        .iter()
        .find(|i| i.metric == name)
        .unwrap_or_else(|| panic!("no {name} in {:#?}", result.items))
}

#[test]
fn the_same_figures_pass() {
    let result = checked(&clean(), &clean());
    assert!(result.passed());
    for i in &result.items {
        assert_eq!(i.change_pct, 0.0, "{}", i.metric);
    }
}

/// Whether `run` passes the limit on `name` against the clean fixture; the whole check follows
/// it when the other limit passes.
fn passes(run: &RunRecord, name: &str) -> bool {
    let result = checked(run, &clean());
    let pass = item(&result, name).pass;
    assert_eq!(result.passed(), pass, "the check against {name}");
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
    let cheaper = edited(|r| {
        set_cpu(main(r), 1_000_000, 500_000);
        set_syscall(main(r), "epoll_wait", 2, 4000);
    });
    let result = checked(&cheaper, &clean());
    assert!(result.passed());
    assert!(result.items.iter().all(|i| i.change_pct < 0.0));
}

#[test]
fn one_failed_limit_fails_the_check() {
    let result = checked(&run(2_000_000, 1000), &clean());
    assert!(item(&result, CPU).pass);
    assert!(!result.passed());
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
    assert!(!result.passed());
    assert!(checked(&nothing, &nothing).passed());
}

#[test]
fn missing_figures_are_errors() {
    let no_cpu = edited(|r| main(r).server.cpu = None);
    let err = check(
        no_cpu.main_phase().unwrap(),
        clean().main_phase().unwrap(),
        LIMITS,
    )
    .unwrap_err();
    assert!(err.contains("CPU per request is missing"), "{err}");
    let no_counts = edited(|r| {
        main(r).server.kernel = None;
        main(r).server.io = None;
    });
    let err = check(
        clean().main_phase().unwrap(),
        no_counts.main_phase().unwrap(),
        LIMITS,
    )
    .unwrap_err();
    assert!(err.contains("syscall counts are missing"), "{err}");
}
