//! The analysis as a document other programs read: what `report --json` and `run --json` print.
//!
//! The run record holds measurements; this holds reqcost's reading of them (per-request figures
//! per phase, the findings with their evidence, the cost by class and client), so a script or a
//! CI system gets the diagnosis without re-implementing it. The format is documented in
//! docs/analysis.md; bump [`VERSION`] on any change an older reader would misread.

use std::collections::BTreeMap;

use reqcost_record::{
    CostlyRequest, CpuSplit, CpuTimes, CpuWindows, GroupCost, LatencySummary, NsDistribution,
    Outcome, Phase, RequestStats, RunRecord, Unit, Workload,
};
use serde::{Deserialize, Serialize};

use crate::counting::{count_caveats, CountCaveat};
use crate::findings::{diagnose, Finding};
use crate::hot_code::{self, GroupCode};
use crate::kernel_figures::KernelFigures;
use crate::phase_metrics::{
    context_switches_per_request, from_procfs, metric, reads_per_request, syscalls_per_request,
    writes_per_request,
};
use crate::profile::{kernel_split, KernelSplit, OTHER_KERNEL};
use crate::reading::phases_in;
use crate::replay::{replay_vs_log, ReplayedFigure as Comparison};
use crate::requests;

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
    pub replay: Vec<Comparison>,
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

/// The CPU of the `--load` command's process tree (its cgroup) per unit of the headline phase's
/// work, user and system split as the kernel's ticks split it ([`ClientSplit`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClientCost {
    /// Who the client was.
    pub generator: Generator,
    pub unit: Unit,
    pub cpu_us: f64,
    /// Absent when the split is not known ([`ClientSplit::Unknown`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_user_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_system_us: Option<f64>,
    /// Where the user/system split comes from.
    pub split: ClientSplit,
    /// Its CPU over the phase's length, in % of one core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent_of_core: Option<f64>,
    /// Its syscalls per unit (eBPF); absent without the probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscalls: Option<f64>,
    /// Syscall name → calls per unit, most frequent first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub syscalls_by_name: Vec<(String, f64)>,
    /// Where in the kernel its sampled CPU went, split as the server's is; absent without the
    /// sampler, without kernel samples, and for reqcost's own load generator (its threads are
    /// not sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_split: Option<KernelSplitDoc>,
}

/// Where a client's user/system split comes from. The kernel charges each scheduler tick whole
/// to the mode it interrupted, so a split needs enough of them: a short client whose few ticks
/// all fell in the kernel would read 0 µs of user time.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", tag = "from")]
pub enum ClientSplit {
    /// The kernel's scheduler ticks, at least [`SPLIT_MIN_TICKS`] of them.
    Ticks { ticks: u64 },
    /// Too few ticks: the share of the client's samples taken in the kernel.
    Samples { ticks: u64, samples: u64 },
    /// Too few ticks, and too few samples (or none).
    Unknown { ticks: u64 },
}

/// Scheduler ticks (or samples) below which a user/system split is not given.
pub const SPLIT_MIN_TICKS: u64 = 20;

/// One scheduler tick of the kernel whose tick-based split reqcost reads: Debian's kernels
/// (and this machine's) are built with CONFIG_HZ=250. With a 100 Hz kernel 20 ticks of this
/// length are 8 real ones, still refused below 80 ms.
const TICK_NS: u64 = 4_000_000;

impl ClientSplit {
    /// The split of `cpu`, whose `user_ns` and `system_ns` are tick-based, and its user share
    /// (0..1); the client's `sampled` kernel split when its ticks are too few.
    fn of(cpu: &CpuTimes, sampled: Option<&KernelSplitDoc>) -> (ClientSplit, Option<f64>) {
        let tick_ns = cpu.user_ns + cpu.system_ns;
        let ticks = tick_ns / TICK_NS;
        if ticks >= SPLIT_MIN_TICKS {
            return (
                ClientSplit::Ticks { ticks },
                Some(cpu.user_ns as f64 / tick_ns as f64),
            );
        }
        match sampled.filter(|s| s.samples >= SPLIT_MIN_TICKS) {
            Some(s) => (
                ClientSplit::Samples {
                    ticks,
                    samples: s.samples,
                },
                Some(1.0 - s.kernel_share),
            ),
            None => (ClientSplit::Unknown { ticks }, None),
        }
    }
}

/// Scheduler ticks from which a tick-based user/system split is trusted as it is: below, down
/// to [`SPLIT_MIN_TICKS`], it is shown but marked as too coarse to trust (a second of CPU at
/// [`TICK_NS`]: a phase of a few hundred ticks can read 0 µs of system time for a server making
/// dozens of syscalls per request).
pub const SPLIT_TRUSTED_TICKS: u64 = 250;

/// How far a phase's server user/system split can be read: judged here once, from what the
/// record says the split is made of ([`CpuSplit`]), for every output.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case", tag = "from")]
pub enum ServerSplit {
    /// As the CPU source reported it: shown as it is.
    Reported,
    /// The kernel's scheduler ticks, about `ticks` of them over the phase's `cpu_us`,
    /// estimated from the precise total since each tick samples the CPU that is running.
    Ticks {
        ticks: u64,
        cpu_us: f64,
        trust: TickTrust,
    },
}

/// What a tick-based split's count of ticks allows.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TickTrust {
    /// [`SPLIT_TRUSTED_TICKS`] or more.
    Enough,
    /// At least [`SPLIT_MIN_TICKS`]: shown, marked as too coarse to trust.
    Coarse,
    /// Fewer than [`SPLIT_MIN_TICKS`]: the user and system figures are left out, as the
    /// client's are.
    TooFew,
}

impl ServerSplit {
    /// The split of `p`'s server CPU; None without it.
    pub fn of(p: &Phase) -> Option<ServerSplit> {
        let cpu = p.server.cpu.as_ref()?;
        Some(match cpu.split {
            CpuSplit::Reported => ServerSplit::Reported,
            CpuSplit::Ticks => {
                let ticks = cpu.total_ns / TICK_NS;
                let trust = match ticks {
                    t if t < SPLIT_MIN_TICKS => TickTrust::TooFew,
                    t if t < SPLIT_TRUSTED_TICKS => TickTrust::Coarse,
                    _ => TickTrust::Enough,
                };
                ServerSplit::Ticks {
                    ticks,
                    cpu_us: cpu.total_ns as f64 / 1000.0,
                    trust,
                }
            }
        })
    }

    /// The ticks, when too few to split by.
    pub fn too_few_ticks(self) -> Option<u64> {
        match self {
            ServerSplit::Ticks {
                ticks,
                trust: TickTrust::TooFew,
                ..
            } => Some(ticks),
            _ => None,
        }
    }
}

/// About how many scheduler ticks a phase's server CPU spans when they are too few to split it
/// by ([`TickTrust::TooFew`]); None when there are enough, or when the split is not the
/// kernel's ticks'.
pub fn server_split_too_few_ticks(p: &Phase) -> Option<u64> {
    ServerSplit::of(p).and_then(ServerSplit::too_few_ticks)
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
}

impl WindowsFigures {
    fn of(w: &CpuWindows) -> WindowsFigures {
        WindowsFigures {
            probed_cpu_us: w.probed.cpu_per_request_us(),
            probe_cost_ratio: w.probe_cost_ratio(),
            probed_percent: w.probed_fraction() * 100.0,
            elapsed_s: w.probed.elapsed_s + w.unprobed.elapsed_s,
        }
    }
}

/// What drove the server: the client whose cost [`ClientCost`] is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Generator {
    /// The `--load` command's process tree.
    LoadCommand,
    /// reqcost's own load generator: its load threads.
    Reqcost,
}

impl Generator {
    pub fn label(self) -> &'static str {
        match self {
            Generator::LoadCommand => "the --load command's tree",
            Generator::Reqcost => "reqcost's own load generator",
        }
    }
}

impl ClientCost {
    /// The cost of what drove `main` per unit of it, its phase converted to the units shown:
    /// `rec`'s load command, else reqcost's own load threads; None without their CPU or
    /// without units.
    pub fn of(rec: &RunRecord, main: &Phase) -> Option<ClientCost> {
        let load = rec.workload.load.as_ref();
        let (generator, cpu) = match load.and_then(|l| l.cpu.as_ref()) {
            Some(cpu) => (Generator::LoadCommand, cpu),
            None => (Generator::Reqcost, main.client.load_cpu.as_ref()?),
        };
        let syscalls = load.and_then(|l| l.syscalls.as_ref());
        let units = main.units();
        if units <= 0.0 {
            return None;
        }
        let total = cpu.total_ns as f64;
        let per_us = |ns: f64| ns / 1000.0 / units;
        let elapsed = main.client.elapsed_s;
        let kernel_split = load
            .and_then(|l| l.profile.as_ref())
            .and_then(kernel_split)
            .map(|s| KernelSplitDoc::of(&s));
        let (split, user_share) = ClientSplit::of(cpu, kernel_split.as_ref());
        Some(ClientCost {
            generator,
            unit: main.unit,
            cpu_us: per_us(total),
            cpu_user_us: user_share.map(|u| per_us(total * u)),
            cpu_system_us: user_share.map(|u| per_us(total * (1.0 - u))),
            split,
            percent_of_core: (elapsed > 0.0).then(|| total / 1e9 / elapsed * 100.0),
            syscalls: syscalls.map(|s| s.values().sum::<u64>() as f64 / units),
            syscalls_by_name: by_count(syscalls.into_iter().flatten(), units),
            kernel_split,
        })
    }
}

/// Each name's count per unit, most frequent first (then by name).
fn by_count<'a>(
    counts: impl Iterator<Item = (&'a String, &'a u64)>,
    units: f64,
) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = counts
        .map(|(name, n)| (name.clone(), *n as f64 / units))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v
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

    fn of(s: &KernelSplit) -> KernelSplitDoc {
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

/// Per-request accounting of one phase: the distribution of CPU per request and who carries it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RequestCosts {
    /// Requests the server served (counted on the server side).
    pub requests: u64,
    pub cpu_per_request_ns: NsDistribution,
    /// Share (0..1) of the tree's CPU that belongs to no request.
    pub unattributed_cpu_share: f64,
    /// What that share is made of, where the probes tell (`requests::unattributed_made_of`).
    #[serde(default)]
    pub unattributed_made_of: String,
    /// Above a third of the CPU: the per-request figures are unreliable, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreliable: Option<String>,
    /// Requests still open at the phase's end and how the figures treat them
    /// (`requests::in_flight_note`): in the groups' CPU and the costliest list, not in
    /// `requests` nor any per-request figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_flight_requests: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_flight_cpu_ns: u64,
    pub by_class: Vec<GroupCost>,
    pub by_client: Vec<GroupCost>,
    pub by_speed: Vec<GroupCost>,
    /// The costliest requests whose CPU is plausible for their wall time.
    pub costliest: Vec<CostlyRequest>,
    /// Costly requests left out of `costliest`: CPU far above their wall time
    /// (`requests::implausible`), charged with work not their own.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub costliest_implausible: u64,
    pub events_dropped: u64,
    /// TLS handshakes seen apart from requests, and the mean CPU of one (docs/tls.md).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tls_handshakes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_cpu_ns: Option<f64>,
    /// Their CPU's share (0..1) of the tree's CPU, in no class; absent without any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_cpu_share: Option<f64>,
    /// Of them, the full and the resumed ones where the TLS library told, and the mean CPU of
    /// one of each kind.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tls_full_handshakes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_full_handshake_cpu_ns: Option<f64>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tls_resumed_handshakes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_resumed_handshake_cpu_ns: Option<f64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `total` over `count`, when there is any.
fn mean(total: u64, count: u64) -> Option<f64> {
    (count > 0).then(|| total as f64 / count as f64)
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
                .map(|p| PhaseAnalysis::in_run(p, Some(&rec.workload)))
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
            findings: diagnose(rec),
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

    /// The figures of one phase of a run with `workload` (its URL, its `--load` command), if any.
    pub fn in_run(p: &Phase, workload: Option<&Workload>) -> PhaseAnalysis {
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
            missing: missing_of(p),
            count_caveats: count_caveats(p, workload),
        }
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

impl RequestCosts {
    /// The reading of one phase's per-request accounting.
    pub fn of(r: &RequestStats) -> RequestCosts {
        let total = r.attributed_cpu_ns + r.unattributed_cpu_ns;
        RequestCosts {
            requests: r.requests,
            cpu_per_request_ns: r.cpu_per_request.clone(),
            unattributed_cpu_share: if total == 0 {
                0.0
            } else {
                r.unattributed_cpu_ns as f64 / total as f64
            },
            by_class: r.by_class.clone(),
            by_client: r.by_client.clone(),
            unattributed_made_of: requests::unattributed_made_of(r),
            unreliable: requests::unreliable_note(r),
            in_flight: requests::in_flight_note(r),
            in_flight_requests: r.in_flight,
            in_flight_cpu_ns: r.in_flight_cpu_ns,
            by_speed: r.by_speed.clone(),
            costliest: r
                .costliest
                .iter()
                .filter(|c| !requests::implausible(c))
                .cloned()
                .collect(),
            costliest_implausible: r
                .costliest
                .iter()
                .filter(|c| requests::implausible(c))
                .count() as u64,
            events_dropped: r.events_dropped,
            tls_handshakes: r.tls_handshakes,
            tls_handshake_cpu_ns: mean(r.tls_handshake_cpu_ns, r.tls_handshakes),
            tls_handshake_cpu_share: (r.tls_handshakes > 0)
                .then(|| r.tls_handshake_cpu_ns as f64 / total.max(1) as f64),
            tls_full_handshakes: r.tls_full_handshakes,
            tls_full_handshake_cpu_ns: mean(r.tls_full_handshake_cpu_ns, r.tls_full_handshakes),
            tls_resumed_handshakes: r.tls_resumed_handshakes,
            tls_resumed_handshake_cpu_ns: mean(
                r.tls_resumed_handshake_cpu_ns,
                r.tls_resumed_handshakes,
            ),
        }
    }
}
