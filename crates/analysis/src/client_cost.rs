//! What driving the server cost: the CPU of the client (the `--load` command's tree, or
//! reqcost's own load threads) per unit of the headline phase's work. Part of the analysis
//! document ([`crate::document`]).

use reqcost_record::{Phase, RunRecord, Unit};
use serde::{Deserialize, Serialize};

use crate::cpu_split::ClientSplit;
use crate::document::KernelSplitDoc;
use crate::profile::kernel_split;

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
