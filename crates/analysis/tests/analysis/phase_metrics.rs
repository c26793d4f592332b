//! Per-request metrics divide a phase's totals by its successful requests.

use reqcost_analysis::phase_metrics::{metric, METRICS};
use reqcost_record::{FdKind, IoDirection, Phase, RunRecord};

use crate::util::{approx, edit, edited, main, set_io};

/// The fixture whose main phase attempted 125 requests, 100 of them answered.
fn with_errors() -> RunRecord {
    edited(|r| {
        let c = &mut main(r).client;
        c.requests = 125;
        c.errors.insert("reset".into(), 25);
    })
}

fn get(name: &str, p: &Phase) -> Option<f64> {
    (metric(name).get)(p)
}

fn main_of(rec: &RunRecord) -> &Phase {
    rec.main_phase().unwrap()
}

#[test]
fn figures_are_per_successful_request() {
    let rec = with_errors();
    let m = main_of(&rec);
    for (name, value) in [
        ("CPU", 20.0),
        ("CPU user", 10.0),
        ("CPU system", 10.0),
        ("syscalls", 10.12),
        ("write calls", 1.0),
        ("bytes received", 1100.0),
        ("wakeups", 1.02),
    ] {
        let got = get(name, m).unwrap_or_else(|| panic!("no {name}"));
        assert!(
            (got - value).abs() < 1e-9,
            "{name}: {got} instead of {value}"
        );
    }
}

#[test]
fn client_figures_come_from_the_client() {
    let rec = with_errors();
    let m = main_of(&rec);
    approx(get("latency p50", m).unwrap(), 190.0);
    approx(get("latency p99", m).unwrap(), 400.0);
    approx(get("throughput", m).unwrap(), 1000.0);
}

#[test]
fn write_calls_count_every_ebpf_write_over_procfs() {
    // procfs says 2.5 writes per request, but eBPF sees 1 socket writev and 0.5 file write.
    let rec = edited(|r| {
        set_io(main(r), "write", IoDirection::Write, FdKind::File, 50, 5000);
        main(r).server.io.as_mut().unwrap().syscw = 250;
    });
    approx(get("write calls", main_of(&rec)).unwrap(), 1.5);
    let without_ebpf = edit(rec, |r| main(r).server.kernel = None);
    approx(get("write calls", main_of(&without_ebpf)).unwrap(), 2.5);
}

#[test]
fn ebpf_figures_are_absent_without_ebpf() {
    let rec = edited(|r| main(r).server.kernel = None);
    assert_eq!(get("syscalls", main_of(&rec)), None);
    assert_eq!(get("wakeups", main_of(&rec)), None);
}

#[test]
fn nothing_is_per_request_without_a_successful_request() {
    let rec = edited(|r| main(r).client.ok = 0);
    for m in METRICS {
        assert_eq!((m.get)(main_of(&rec)), None, "{}", m.name);
    }
}

#[test]
fn only_throughput_is_better_when_higher() {
    let higher: Vec<&str> = METRICS
        .iter()
        .filter(|m| !m.lower_is_better)
        .map(|m| m.name)
        .collect();
    assert_eq!(higher, ["throughput"]);
}
