//! The analysis of one run as OpenMetrics text, for Prometheus' node exporter textfile
//! collector or a Pushgateway: each phase's requests and cost per unit, the cost of each request
//! class, and the findings with the share of CPU they explain. Gauges of a finished run, where
//! `attach --metrics` serves live counters.

use std::fmt::Write;

use reqcost_analysis::document::{Analysis, PhaseAnalysis};
use reqcost_analysis::requests::group_cpu_share;
use reqcost_analysis::stack_costs::{StackCosts, StackPart};

use super::{Exporter, Subject};
use crate::live_metrics::{escape, Family};

pub struct OpenMetrics;

impl Exporter for OpenMetrics {
    fn serialize(&self, subject: &Subject) -> Result<Vec<u8>, String> {
        match subject {
            Subject::Run(reading) => Ok(exposition(&reading.analysis).into_bytes()),
            _ => Err(subject.refuse("one run's analysis")),
        }
    }
}

const REQUESTS: Family = Family {
    name: "run_requests",
    unit: "",
    help: "Requests answered completely in the phase: those the per-request figures divide by",
};

const CPU_PER_UNIT: Family = Family {
    name: "run_cpu_per_unit_seconds",
    unit: "seconds",
    help: "Server CPU time per unit of work (the unit label) in the phase",
};

const SYSCALLS_PER_UNIT: Family = Family {
    name: "run_syscalls_per_unit",
    unit: "",
    help: "Server syscalls per unit of work (the unit label) in the phase, from eBPF",
};

const CLASS_REQUESTS: Family = Family {
    name: "run_class_requests",
    unit: "",
    help: "Requests of the class the server served in the phase",
};

const CLASS_IN_FLIGHT: Family = Family {
    name: "run_class_in_flight",
    unit: "",
    help: "Requests of the class still open when the phase ended (not in its requests)",
};

const CLASS_CPU_SHARE: Family = Family {
    name: "run_class_cpu_share",
    unit: "",
    help: "Share (0 to 1) of the phase's server CPU spent on the class's requests",
};

const FINDING_CPU_SHARE: Family = Family {
    name: "run_finding_cpu_share",
    unit: "",
    help: "Share (0 to 1) of its phase's server CPU that the finding explains",
};

const STACK_CPU_PER_REQUEST: Family = Family {
    name: "run_class_stack_cpu_per_request_seconds",
    unit: "seconds",
    help: "CPU per request of the front class spent in the hop's tree (hop 0: the front), with upstream hops followed",
};

const STACK_REQUESTS_PER_REQUEST: Family = Family {
    name: "run_class_stack_requests_per_request",
    unit: "",
    help: "The hop's requests per request of the front class (1 for the front), with upstream hops followed",
};

const HOP_NOT_FOR_FRONT_SHARE: Family = Family {
    name: "run_hop_not_for_front_share",
    unit: "",
    help: "Share (0 to 1) of the hop's tree CPU that no front request holds: its own work, work for front requests outside the phase, upstream calls, unattributed",
};

/// The exposition of `a`, `# EOF` last; a figure the document lacks has no sample.
fn exposition(a: &Analysis) -> String {
    let run = format!(
        "service=\"{}\",run_id=\"{}\"",
        escape(&a.server),
        escape(&a.run_id)
    );
    let phase_labels = |phase: &str| format!("{run},phase=\"{}\"", escape(phase));
    let mut out = String::new();
    gauge(
        &mut out,
        &REQUESTS,
        a.phases
            .iter()
            .map(|p| (phase_labels(&p.name), requests_answered(p))),
    );
    let per_unit =
        |p: &PhaseAnalysis| format!("{},unit=\"{}\"", phase_labels(&p.name), p.unit.name());
    gauge(
        &mut out,
        &CPU_PER_UNIT,
        a.phases
            .iter()
            .map(|p| (per_unit(p), p.per_request.cpu_s())),
    );
    gauge(
        &mut out,
        &SYSCALLS_PER_UNIT,
        a.phases
            .iter()
            .map(|p| (per_unit(p), p.per_request.syscalls)),
    );
    let classes = a.phases.iter().flat_map(|p| {
        let rows = p.requests.iter().flat_map(|r| &r.by_class);
        rows.map(move |c| {
            (
                format!("{},class=\"{}\"", phase_labels(&p.name), escape(&c.name)),
                c,
            )
        })
    });
    let classes: Vec<_> = classes.collect();
    gauge(
        &mut out,
        &CLASS_REQUESTS,
        classes
            .iter()
            .map(|(l, c)| (l.clone(), Some(c.requests as f64))),
    );
    gauge(
        &mut out,
        &CLASS_IN_FLIGHT,
        classes
            .iter()
            .map(|(l, c)| (l.clone(), Some(c.in_flight as f64))),
    );
    gauge(
        &mut out,
        &CLASS_CPU_SHARE,
        classes
            .iter()
            .map(|(l, c)| (l.clone(), Some(group_cpu_share(c)))),
    );
    gauge(
        &mut out,
        &FINDING_CPU_SHARE,
        a.findings.iter().map(|f| {
            let mut labels = format!("{},finding=\"{}\"", phase_labels(&f.phase), escape(&f.id));
            // With hops, findings of different trees may share a phase and an id.
            if !f.server.is_empty() {
                let _ = write!(labels, ",server=\"{}\"", escape(&f.server));
            }
            (labels, Some(f.cpu_share))
        }),
    );
    budget_gauges(&mut out, a, &phase_labels);
    stack_gauges(&mut out, a, &phase_labels);
    out.push_str("# EOF\n");
    out
}

const PROBE_BUDGET: Family = Family {
    name: "run_probe_budget_ratio",
    unit: "ratio",
    help: "The probes' cost budget of the phase (attach --budget), a fraction of the server's CPU",
};

const PROBE_COST: Family = Family {
    name: "run_probe_cost_ratio",
    unit: "ratio",
    help: "The probes' cost over the server's CPU without it, the estimate and its interval's bounds (bound label)",
};

const PROBED: Family = Family {
    name: "run_probed_ratio",
    unit: "ratio",
    help: "Share of the phase's time the probes were attached",
};

/// The budget of the phases that kept one: the budget, the cost achieved with its interval,
/// the share probed.
fn budget_gauges(out: &mut String, a: &Analysis, phase_labels: &dyn Fn(&str) -> String) {
    let budgets: Vec<_> = a
        .phases
        .iter()
        .filter_map(|p| {
            let w = p.cpu_windows.as_ref()?;
            Some((phase_labels(&p.name), w.budget.as_ref()?))
        })
        .collect();
    if budgets.is_empty() {
        return;
    }
    gauge(
        out,
        &PROBE_BUDGET,
        budgets
            .iter()
            .map(|(l, b)| (l.clone(), Some(b.measured.budget))),
    );
    gauge(
        out,
        &PROBE_COST,
        budgets.iter().flat_map(|(l, b)| {
            let m = &b.measured;
            let [low, high] = m.cost_share_interval;
            [("estimate", m.cost_share), ("low", low), ("high", high)]
                .map(|(bound, v)| (format!("{l},bound=\"{bound}\""), Some(v)))
        }),
    );
    gauge(
        out,
        &PROBED,
        budgets
            .iter()
            .map(|(l, b)| (l.clone(), Some(b.probed_ratio))),
    );
}

/// The stack's series, when the run followed upstream hops: per front class and hop (a `hop`
/// label, and `server` its tree's name), and each hop's share no front request holds. A run
/// without hops has none of these families.
fn stack_gauges(out: &mut String, a: &Analysis, phase_labels: &dyn Fn(&str) -> String) {
    let stacks: Vec<(&str, &StackCosts)> = a
        .phases
        .iter()
        .filter_map(|p| Some((p.name.as_str(), p.stack.as_ref()?)))
        .collect();
    if stacks.is_empty() {
        return;
    }
    let parts: Vec<(String, &StackPart)> = stacks
        .iter()
        .flat_map(|(phase, s)| {
            s.classes.iter().flat_map(move |c| {
                c.parts.iter().map(move |p| {
                    let labels = format!(
                        "{},class=\"{}\",hop=\"{}\",server=\"{}\"",
                        phase_labels(phase),
                        escape(&c.class),
                        p.hop,
                        escape(&p.name)
                    );
                    (labels, p)
                })
            })
        })
        .collect();
    gauge(
        out,
        &STACK_CPU_PER_REQUEST,
        parts
            .iter()
            .map(|(l, p)| (l.clone(), Some(p.cpu_per_request_s()))),
    );
    gauge(
        out,
        &STACK_REQUESTS_PER_REQUEST,
        parts
            .iter()
            .map(|(l, p)| (l.clone(), Some(p.requests_per_request))),
    );
    gauge(
        out,
        &HOP_NOT_FOR_FRONT_SHARE,
        stacks.iter().flat_map(|(phase, s)| {
            s.hops.iter().map(move |h| {
                let labels = format!(
                    "{},hop=\"{}\",server=\"{}\"",
                    phase_labels(phase),
                    h.hop,
                    escape(&h.name)
                );
                (labels, Some(h.not_for_front_share))
            })
        }),
    );
}

/// The phase's requests: those its per-request figures divide by (the server side's count when
/// reqcost sent none, e.g. HTTP/3 requests under `--load`), else the load generator's; none
/// when neither counted any, rather than a 0 that reads as measured.
fn requests_answered(p: &PhaseAnalysis) -> Option<f64> {
    if p.unit.is_request() {
        Some(p.units)
    } else {
        (p.requests_ok > 0).then_some(p.requests_ok as f64)
    }
}

/// One gauge family: its metadata, then a sample per (labels, value) that has a value.
fn gauge(out: &mut String, family: &Family, samples: impl Iterator<Item = (String, Option<f64>)>) {
    family.write_metadata(out, "gauge");
    for (labels, value) in samples {
        if let Some(v) = value {
            let _ = writeln!(out, "reqcost_{}{{{labels}}} {v}", family.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_analysis::reading::Reading;
    use reqcost_record::RunRecord;

    #[test]
    fn every_phase_class_and_finding_is_a_labelled_gauge() {
        let rec = RunRecord::from_json(include_str!(
            "../../../analysis/tests/fixtures/busy-wait.json"
        ))
        .unwrap();
        let text = String::from_utf8(
            OpenMetrics
                .serialize(&Subject::Run(&Reading::of(&rec, None)))
                .unwrap(),
        )
        .unwrap();
        let run = format!("service=\"busy-wait\",run_id=\"{}\"", rec.id);
        assert!(
            text.contains(&format!(
                "reqcost_run_requests{{{run},phase=\"main\"}} 300\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "reqcost_run_class_requests{{{run},phase=\"slow-clients\",class=\"(empty)\"}} 21\n"
            )),
            "{text}"
        );
        assert!(text.contains(&format!("reqcost_run_finding_cpu_share{{{run},phase=\"slow-clients\",finding=\"busy-wait\"}} 0.99")), "{text}");
        assert!(
            text.contains("# UNIT reqcost_run_cpu_per_unit_seconds seconds\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"));
    }
}
