//! The analysis as a document other programs read: what `report --json` and `run --json` print.
//!
//! The run record holds measurements; this holds reqcost's reading of them (per-request figures
//! per phase, the findings with their evidence, the cost by class and client), so a script or a
//! CI system gets the diagnosis without re-implementing it. The format is documented in
//! docs/analysis.md; bump [`VERSION`] on any change an older reader would misread.

use std::collections::BTreeMap;

use reqcost_record::{CpuWindows, LatencySummary, Outcome, Phase, ProbeBudget, RunRecord, Unit};
use serde::{Deserialize, Serialize};

pub use crate::client_cost::{ClientCost, Generator};
use crate::counting::{count_caveats, CountCaveat};
pub use crate::cpu_split::{
    server_split_too_few_ticks, ClientSplit, ServerSplit, TickTrust, SPLIT_MIN_TICKS,
    SPLIT_TRUSTED_TICKS,
};
use crate::findings::Finding;
use crate::hot_code::{self, GroupCode};
use crate::kernel_figures::KernelFigures;
use crate::phase_metrics::{
    context_switches_per_request, from_procfs, metric, reads_per_request, syscalls_per_request,
    writes_per_request,
};
use crate::profile::{kernel_split, KernelSplit, OTHER_KERNEL};
use crate::reading::phases_in;
use crate::replay::{replay_vs_log, ReplayedFigure};
pub use crate::request_costs::{RequestCosts, RequestsCpu};
use crate::requests;
pub use crate::stack_costs::StackCosts;

/// Identifies the document, as `reqcost-run` identifies a record.
pub const FORMAT: &str = "reqcost-analysis";
/// Version of the document layout this build writes.
pub const VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Analysis {
    pub format: String,
    pub version: u32,
    /// The analysed record's run id.
    pub run_id: String,
    /// Name of the measured server's root process.
    pub server: String,
    /// Anything but `completed` means the record is partial.
    pub outcome: Outcome,
    /// Every measured phase in the order it ran; the one named `main` is the headline.
    pub phases: Vec<PhaseAnalysis>,
    /// Where in the kernel the sampled CPU went (the record's profile, whole run); absent
    /// without a profile or without kernel samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_split: Option<KernelSplitDoc>,
    /// The hottest code of the classes with most samples (docs/profile.md, "Per request
    /// class"); empty when the samples carry no request tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub class_code: Vec<GroupCode>,
    /// The own call chains of the costliest requests that have samples, most CPU first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub costliest_code: Vec<GroupCode>,
    /// A replay of an access log against the log: what it reproduced and what not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replay: Vec<ReplayedFigure>,
    /// The `--load` command's cost per unit of the headline phase, beside the server's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientCost>,
    /// What explains the cost, the findings explaining most CPU first.
    pub findings: Vec<Finding>,
    /// The record's caveats for the reader.
    pub notes: Vec<String>,
}

/// One phase's figures per successful request.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PhaseAnalysis {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_model: Option<String>,
    pub requests_ok: u64,
    /// What the per-unit figures divide by: `request` unless `--per` or a phase without
    /// requests (a UDP server's, per MiB) says otherwise.
    #[serde(default, skip_serializing_if = "Unit::is_request")]
    pub unit: Unit,
    /// Units of work the per-unit figures divide by (requests, connections, MiB, datagrams).
    #[serde(default)]
    pub units: f64,
    /// Units of work per second of the phase, when the unit is not the request (whose rate is
    /// `throughput_rps`), some were counted, and the phase's length is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units_per_s: Option<f64>,
    /// Error kind → count.
    pub errors: BTreeMap<String, u64>,
    /// Absent when no request succeeded, as every figure below.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_rps: Option<f64>,
    /// Requests the server served per second of the run, when reqcost sent none (its clients'
    /// own, counted on the server side) and the run's length is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<LatencySummary>,
    pub per_request: PerRequestFigures,
    /// The figures of how the CPU was measured, when the probes ran in windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_windows: Option<WindowsFigures>,
    /// How far the server's user/system split can be read; absent without its CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_split: Option<ServerSplit>,
    /// What the server asked the kernel per unit (eBPF); absent without the probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelFigures>,
    /// The phase's requests as the server served them, when the probes ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<RequestCosts>,
    /// The phase's requests across the local servers they passed through, when the record
    /// followed upstream hops (docs/stack.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<StackCosts>,
    /// Why `requests` is absent though the probes ran: the requests were inside QUIC
    /// (`requests::not_visible_over_quic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_not_visible: Option<String>,
    /// Figure → why it could not be collected.
    pub missing: BTreeMap<String, String>,
    /// Why the request count may be wrong, each naming the count used (docs/tls.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub count_caveats: Vec<CountCaveat>,
}

/// Server figures per unit of work (per successful request unless the phase says otherwise);
/// each absent when it could not be collected.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PerRequestFigures {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_user_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_system_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscalls: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_calls: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_calls: Option<f64>,
    /// Read and write calls come from /proc/PID/io (the probes were off), which does not count
    /// socket send*/recv* calls.
    pub calls_from_procfs: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_switches: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wakeups: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_received: Option<f64>,
    /// Syscall name → calls per request (eBPF), most frequent first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub syscalls_by_name: Vec<(String, f64)>,
}

/// The figures of a phase's CPU windows (docs/record.md, "How CPU was measured").
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WindowsFigures {
    /// CPU per request in the probed windows, and its ratio to the unprobed ones', when both
    /// kinds ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probed_cpu_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_cost_ratio: Option<f64>,
    /// Share of the windows' time the probes were on, in %.
    pub probed_percent: f64,
    /// The windows' time, probed and unprobed.
    pub elapsed_s: f64,
    /// `attach --budget`: the budget, what the probes cost and how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetFigures>,
}

/// The probes' budget of an attach (the record's `cpu_windows.budget`), shares in %.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BudgetFigures {
    pub budget_percent: f64,
    /// The cost achieved over the server's CPU without it, and its interval.
    pub cost_percent: f64,
    pub cost_interval_percent: [f64; 2],
    /// Share of the window probed, as a fraction (for OpenMetrics' ratios).
    pub probed_ratio: f64,
    pub min_duty_percent: f64,
    pub duty_low_percent: f64,
    pub duty_high_percent: f64,
    /// What the least duty would have cost, and by how many points it is over the budget
    /// when it is.
    pub floor_percent: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_points: Option<f64>,
    /// The record's figures, as measured.
    pub measured: ProbeBudget,
}

impl BudgetFigures {
    fn of(b: &ProbeBudget, w: &CpuWindows) -> BudgetFigures {
        let pct = |f: f64| f * 100.0;
        BudgetFigures {
            budget_percent: pct(b.budget),
            cost_percent: pct(b.cost_share),
            cost_interval_percent: b.cost_share_interval.map(pct),
            probed_ratio: w.probed_fraction(),
            min_duty_percent: pct(b.min_duty),
            duty_low_percent: pct(b.duty_low),
            duty_high_percent: pct(b.duty_high),
            floor_percent: pct(b.floor_share),
            over_points: b.over_by().map(pct),
            measured: b.clone(),
        }
    }
}

impl WindowsFigures {
    fn of(w: &CpuWindows) -> WindowsFigures {
        WindowsFigures {
            probed_cpu_us: w.probed.cpu_per_request_us(),
            probe_cost_ratio: w.probe_cost_ratio(),
            probed_percent: w.probed_fraction() * 100.0,
            elapsed_s: w.probed.elapsed_s + w.unprobed.elapsed_s,
            budget: w.budget.as_ref().map(|b| BudgetFigures::of(b, w)),
        }
    }
}

/// The sampled kernel time by subsystem (docs/profile.md); shares are of all samples.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelSplitDoc {
    pub samples: u64,
    pub kernel_samples: u64,
    pub kernel_share: f64,
    /// Most samples first, `other` last.
    pub subsystems: Vec<SubsystemShare>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SubsystemShare {
    /// `net_send`, `net_receive`, `readiness`, `copy`, `sched` or `other`.
    pub id: String,
    pub label: String,
    pub samples: u64,
    pub share: f64,
}

impl KernelSplitDoc {
    /// `network send 30 %, readiness scanning 18 %`, as [`KernelSplit::parts_text`] says it.
    pub fn parts_text(&self) -> String {
        let parts: Vec<String> = self
            .subsystems
            .iter()
            .map(|s| format!("{} {:.0} %", s.label, s.share * 100.0))
            .collect();
        parts.join(", ")
    }

    pub(crate) fn of(s: &KernelSplit) -> KernelSplitDoc {
        KernelSplitDoc {
            samples: s.samples,
            kernel_samples: s.kernel_samples,
            kernel_share: s.share(s.kernel_samples),
            subsystems: s
                .parts
                .iter()
                .map(|(sub, n)| SubsystemShare {
                    id: sub.map_or(OTHER_KERNEL, |s| s.id).into(),
                    label: sub.map_or(OTHER_KERNEL, |s| s.label).into(),
                    samples: *n,
                    share: s.share(*n),
                })
                .collect(),
        }
    }
}

impl Analysis {
    /// reqcost's reading of `rec`, each phase per its default unit (requests when it had any).
    pub fn of(rec: &RunRecord) -> Analysis {
        Analysis::of_phases(rec, &phases_in(rec, None))
    }

    /// The document of `rec` whose phases, converted to the units shown, are `phases`.
    pub(crate) fn of_phases(rec: &RunRecord, phases: &[Phase]) -> Analysis {
        Analysis {
            format: FORMAT.into(),
            version: VERSION,
            run_id: rec.id.clone(),
            server: rec.target.comm.clone(),
            outcome: rec.outcome.clone(),
            phases: phases
                .iter()
                .map(|p| PhaseAnalysis::in_run(p, Some(rec)))
                .collect(),
            kernel_split: rec
                .profile
                .as_ref()
                .and_then(kernel_split)
                .map(|s| KernelSplitDoc::of(&s)),
            class_code: rec
                .profile
                .as_ref()
                .map(hot_code::classes)
                .unwrap_or_default(),
            costliest_code: hot_code::costliest(rec),
            replay: replay_vs_log(rec),
            client: phases
                .iter()
                .find(|p| p.name == "main")
                .and_then(|main| ClientCost::of(rec, main)),
            findings: crate::findings::diagnose_stack(rec),
            notes: rec.notes.clone(),
        }
    }

    /// The headline phase: the one named `main`, or the first.
    pub fn main_phase(&self) -> Option<&PhaseAnalysis> {
        self.phases
            .iter()
            .find(|p| p.name == "main")
            .or(self.phases.first())
    }

    /// The unit the headline's figures divide by.
    pub fn unit(&self) -> Unit {
        self.main_phase().map(|p| p.unit).unwrap_or_default()
    }
}

impl PhaseAnalysis {
    /// The figures of one phase, alone (a sweep's levels have no run of their own).
    pub fn of(p: &Phase) -> PhaseAnalysis {
        PhaseAnalysis::in_run(p, None)
    }

    /// The figures of one phase of run `rec` (its URL, its `--load` command, the TLS libraries
    /// it hooked), if any.
    pub fn in_run(p: &Phase, rec: Option<&RunRecord>) -> PhaseAnalysis {
        let workload = rec.map(|r| &r.workload);
        let answered = p.client.ok > 0;
        let not_visible = requests::not_visible_over_quic(p, workload);
        PhaseAnalysis {
            name: p.name.clone(),
            client_model: p.client_model.clone(),
            requests_ok: p.client.ok,
            unit: p.unit,
            units: p.units(),
            units_per_s: (!p.unit.is_request() && p.units() > 0.0 && p.client.elapsed_s > 0.0)
                .then(|| p.units() / p.client.elapsed_s),
            errors: p.client.errors.clone(),
            throughput_rps: answered.then_some(p.client.throughput_rps),
            served_per_s: workload
                .and_then(|w| w.duration_s)
                .filter(|s| *s > 0.0 && p.client.requests == 0 && p.requests.is_some())
                .map(|s| p.units_of(Unit::Request).unwrap_or(0.0) / s),
            latency_us: answered.then_some(p.client.latency),
            per_request: PerRequestFigures::of(p),
            cpu_windows: p.cpu_windows.as_ref().map(WindowsFigures::of),
            cpu_split: ServerSplit::of(p),
            kernel: KernelFigures::of(p),
            // A phase counted in other units that served no request, or whose requests were
            // invisible, has no request to split its CPU among: all of it would read as
            // "belongs to no request".
            requests: p
                .requests
                .as_ref()
                .filter(|r| r.requests > 0 || (p.unit.is_request() && not_visible.is_none()))
                .map(RequestCosts::of),
            requests_not_visible: not_visible,
            stack: rec.and_then(|rec| StackCosts::of(p, rec)),
            missing: missing_of(p),
            count_caveats: count_caveats(p, workload, &rec.map_or(Vec::new(), |r| r.tls_hooked())),
        }
    }

    /// Errors of every kind.
    pub fn errors_total(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Why the CPU per unit is absent: the reason recorded, else that no unit was counted.
    pub fn cpu_missing(&self) -> String {
        match self.missing.get("cpu") {
            Some(why) => why.clone(),
            None if self.unit.is_request() => "no request succeeded".into(),
            // Bytes and datagrams the server sent are the probes' counts.
            None if self.per_request.calls_from_procfs => format!(
                "no {} counted: the eBPF probes count them, and they were off{}",
                self.unit.plural(),
                self.missing
                    .get("tcp_bytes")
                    .filter(|_| self.unit == Unit::MiB)
                    .map(|why| format!("; {why}"))
                    .unwrap_or_default()
            ),
            None => format!("no {} counted", self.unit.plural()),
        }
    }

    /// `5.00 MiB`, `1000 requests`: the units of work the figures divide by.
    pub fn units_text(&self) -> String {
        match self.unit {
            Unit::MiB => format!("{:.2} MiB", self.units),
            u => format!("{:.0} {}", self.units, u.plural()),
        }
    }
}

/// The record's missing figures, and the server's user/system split when too few ticks make it.
fn missing_of(p: &Phase) -> BTreeMap<String, String> {
    let mut missing = p.missing.clone();
    if let Some(ticks) = server_split_too_few_ticks(p) {
        missing.insert(
            "cpu_user_system".into(),
            format!(
                "the kernel splits CPU into user and system time by its scheduler ticks, each \
                 charged whole to the mode it interrupted, and the phase's CPU spans about \
                 {ticks} of them (fewer than {SPLIT_MIN_TICKS}): too few to split by"
            ),
        );
    }
    missing
}

impl PerRequestFigures {
    /// The calls of `syscalls_by_name`, summed in its order.
    pub fn named_syscalls(&self) -> f64 {
        self.syscalls_by_name.iter().map(|(_, n)| n).sum()
    }

    /// CPU per unit in seconds.
    pub fn cpu_s(&self) -> Option<f64> {
        self.cpu_us.map(|us| us / 1e6)
    }

    fn of(p: &Phase) -> PerRequestFigures {
        let r = &p.per_request;
        let split = server_split_too_few_ticks(p).is_none();
        let mut by_name: Vec<(String, f64)> =
            r.syscalls.iter().map(|(n, v)| (n.clone(), *v)).collect();
        by_name.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        PerRequestFigures {
            cpu_us: r.cpu_total_us,
            cpu_user_us: r.cpu_user_us.filter(|_| split),
            cpu_system_us: r.cpu_system_us.filter(|_| split),
            syscalls: syscalls_per_request(p),
            read_calls: reads_per_request(p),
            write_calls: writes_per_request(p),
            calls_from_procfs: from_procfs(p),
            context_switches: context_switches_per_request(p),
            wakeups: (metric("wakeups").get)(p),
            bytes_received: (metric("bytes received").get)(p),
            syscalls_by_name: by_name,
        }
    }
}
