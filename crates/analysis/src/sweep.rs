//! Concurrency sweeps: does the cost of one request grow with the number of connections?
//!
//! Every level is measured in repetitions, interleaved with the other levels' (1 16 64, 1 16 64,
//! …) so that a machine that drifts (a neighbour's build, frequency) moves every level alike.
//! Each level's figures are means with 95 % intervals, and a change across levels is claimed only
//! when the interval of the ratio between the highest and the lowest level says so.

use serde::{Deserialize, Serialize};

use reqcost_record::{Phase, Pinning, RunRecord, Unit};

use crate::document::{ClientCost, Generator, PhaseAnalysis};
use crate::phase_metrics::{cpu_percent_of_core, fds_scanned_per_request, METRICS};
use crate::stats::{paired_ratio, verdict, Estimate, Verdict};

/// CPU per request at the highest concurrency over the lowest, above which the cost is said to
/// grow — when the kernel confirms that each request makes it scan more fds.
pub const GROWTH_CPU_RATIO: f64 = 1.5;
/// Without eBPF figures to confirm, CPU alone must grow this much.
pub const GROWTH_CPU_RATIO_UNCONFIRMED: f64 = 2.0;
/// Growth of fds handed to select/poll/epoll_wait per request that confirms the CPU trend.
pub const SCAN_GROWTH_RATIO: f64 = 2.0;
/// A step down larger than this breaks the trend: noise, not growth.
const MONOTONE_SLACK: f64 = 0.9;

/// A sweep as `sweep --json` prints it (docs/sweep.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepReport {
    /// Measured runs per level.
    pub repetitions: u32,
    /// The connection count of every run in the order they ran; `records` is in this order too.
    pub run_order: Vec<u32>,
    /// Each level's figures over its repetitions, by increasing connection count.
    pub levels: Vec<LevelStats>,
    /// What the levels say about cost per request against connections.
    pub growth: Option<Growth>,
    pub records: Vec<RunRecord>,
    /// The run that stands for each level where one must (the HTML report's phases), by
    /// increasing connection count; the JSON has every run in `records`.
    #[serde(skip)]
    pub typical: Vec<TypicalRun>,
}

/// The repetition of a level with its median CPU per unit, as the analysis document shows a
/// phase.
#[derive(Debug, Clone)]
pub struct TypicalRun {
    pub concurrency: u32,
    /// Its place among the level's repetitions, from 0.
    pub repetition: usize,
    pub figures: PhaseAnalysis,
}

/// One level's per-request figures, each a mean with its 95 % interval.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LevelStats {
    pub concurrency: u32,
    /// Runs whose main phase was measured at this level.
    pub runs: usize,
    pub metrics: Vec<LevelMetric>,
    /// Repetitions (from 1) pinned otherwise than most of the level's: their client and server
    /// shared CPUs differently, so their figures are not like the others'.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinning_differs: Vec<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LevelMetric {
    /// Metric name as `compare` and `check` name it (`CPU`, `CPU user`, `syscalls`, …).
    pub metric: String,
    pub unit: String,
    #[serde(flatten)]
    pub estimate: Estimate,
}

impl LevelMetric {
    /// The metric over a level's runs, when they give an estimate.
    fn estimated(metric: &str, unit: &str, values: Vec<f64>) -> Option<LevelMetric> {
        Some(LevelMetric {
            metric: metric.into(),
            unit: unit.into(),
            estimate: Estimate::of(values)?,
        })
    }
}

impl LevelStats {
    /// The estimate of the metric `name`, when it was measured at this level.
    pub fn get(&self, name: &str) -> Option<&Estimate> {
        self.metrics
            .iter()
            .find(|m| m.metric == name)
            .map(|m| &m.estimate)
    }
}

/// One level as measured: its connection count and the main phase of each repetition, in the
/// order the repetitions ran.
#[derive(Debug, Clone)]
pub struct LevelRuns<'a> {
    pub concurrency: u32,
    pub phases: Vec<&'a Phase>,
    /// CPUs of the machine the runs ran on, which the server's CPU is a share of.
    pub cpus: u32,
}

/// Level figures that are not per unit of work: the server's CPU as a share of one core and of
/// the machine, as seeds/004 reports load.
pub const CORE_SHARE: &str = "CPU % of a core";
pub const MACHINE_SHARE: &str = "CPU % of the machine";
/// Units of work per second, when the unit is not the request.
pub const WORK_RATE: &str = "rate";
/// The `--load` command's tree: its CPU per unit and as a share of one core.
pub const CLIENT_CPU: &str = "client CPU";
pub const CLIENT_CORE_SHARE: &str = "client CPU % of a core";
pub const CLIENT_SYSCALLS: &str = "client syscalls";
pub const CLIENT_KERNEL_SHARE: &str = "client kernel share";

impl<'a> LevelRuns<'a> {
    fn stats(&self) -> LevelStats {
        let metrics = METRICS
            .iter()
            .filter_map(|m| {
                let values = self.phases.iter().filter_map(|p| (m.get)(p)).collect();
                LevelMetric::estimated(m.name, m.unit, values)
            })
            .chain(self.load_shares())
            .collect();
        LevelStats {
            concurrency: self.concurrency,
            runs: self.phases.len(),
            metrics,
            pinning_differs: Vec::new(),
        }
    }

    /// The server's CPU as a share of one core and of the machine and, in a unit other than the
    /// request (whose rate is `throughput`), the units of work per second.
    fn load_shares(&self) -> impl Iterator<Item = LevelMetric> {
        let rates: Vec<f64> = self
            .phases
            .iter()
            .filter(|p| !p.unit.is_request() && p.client.elapsed_s > 0.0)
            .map(|p| p.units() / p.client.elapsed_s)
            .collect();
        let rate_unit = self.phases.first().map_or("", |p| p.unit.rate());
        let cores: Vec<f64> = self
            .phases
            .iter()
            .filter_map(|p| cpu_percent_of_core(p))
            .collect();
        let cpus = f64::from(self.cpus.max(1));
        let machine = cores.iter().map(|c| c / cpus).collect();
        [
            (CORE_SHARE, "%", cores),
            (MACHINE_SHARE, "%", machine),
            (WORK_RATE, rate_unit, rates),
        ]
        .into_iter()
        .filter_map(|(name, unit, values)| LevelMetric::estimated(name, unit, values))
    }

    /// The repetition with the median CPU per request, and its index: the one to show where
    /// one run must stand for the level.
    pub fn typical(&self) -> Option<(usize, &'a Phase)> {
        let mut by_cpu: Vec<(usize, &'a Phase)> = self.phases.iter().copied().enumerate().collect();
        by_cpu.sort_by(|(_, a), (_, b)| {
            let cpu = |p: &Phase| p.per_request.cpu_total_us.unwrap_or(0.0);
            cpu(a).total_cmp(&cpu(b))
        });
        by_cpu.get(by_cpu.len().saturating_sub(1) / 2).copied()
    }
}

impl SweepReport {
    /// The sweep of `records`, run at the connection counts `run_order` in that order, every
    /// level per `per`, or per the first run's default unit: levels side by side share one.
    pub fn of(
        repetitions: u32,
        run_order: Vec<u32>,
        mut records: Vec<RunRecord>,
        per: Option<Unit>,
    ) -> SweepReport {
        let unit = per
            .or_else(|| Some(records.first()?.main_phase()?.default_unit()))
            .unwrap_or_default();
        for r in &mut records {
            r.in_units(Some(unit));
        }
        let mut report = SweepReport {
            repetitions,
            run_order,
            levels: Vec::new(),
            growth: None,
            records,
            typical: Vec::new(),
        };
        let runs = report.level_runs();
        let levels = runs
            .iter()
            .map(|l| {
                let mut stats = LevelStats {
                    pinning_differs: report.pinning_differs(l.concurrency),
                    ..l.stats()
                };
                stats.metrics.extend(report.client_metrics(l.concurrency));
                stats
            })
            .collect();
        let growth = growth(&runs);
        let typical = runs
            .iter()
            .filter_map(|l| {
                let (repetition, phase) = l.typical()?;
                Some(TypicalRun {
                    concurrency: l.concurrency,
                    repetition,
                    figures: PhaseAnalysis::of(phase),
                })
            })
            .collect();
        report.levels = levels;
        report.growth = growth;
        report.typical = typical;
        report
    }

    /// The unit every level's per-unit figures divide by.
    pub fn unit(&self) -> Unit {
        self.records
            .first()
            .and_then(|r| Some(r.main_phase()?.unit))
            .unwrap_or_default()
    }

    /// Who the client of the sweep's runs was, when their CPU was measured.
    pub fn client_generator(&self) -> Option<Generator> {
        self.records
            .iter()
            .find_map(|r| Some(ClientCost::of(r, r.main_phase()?)?.generator))
    }

    /// The client's CPU and syscalls per unit, its CPU in % of a core and its samples' kernel
    /// share over the runs at `concurrency`, beside the server's.
    fn client_metrics(&self, concurrency: u32) -> Vec<LevelMetric> {
        let costs: Vec<ClientCost> = self
            .run_order
            .iter()
            .zip(&self.records)
            .filter(|(c, _)| **c == concurrency)
            .filter_map(|(_, r)| ClientCost::of(r, r.main_phase()?))
            .collect();
        let cpu = costs.iter().map(|c| c.cpu_us).collect();
        let core = costs.iter().filter_map(|c| c.percent_of_core).collect();
        let syscalls = costs.iter().filter_map(|c| c.syscalls).collect();
        let kernel = costs
            .iter()
            .filter_map(|c| Some(c.kernel_split.as_ref()?.kernel_share * 100.0))
            .collect();
        [
            (CLIENT_CPU, "µs", cpu),
            (CLIENT_CORE_SHARE, "%", core),
            (CLIENT_SYSCALLS, "", syscalls),
            (CLIENT_KERNEL_SHARE, "%", kernel),
        ]
        .into_iter()
        .filter_map(|(name, unit, values)| LevelMetric::estimated(name, unit, values))
        .collect()
    }

    /// The repetitions (from 1) at `concurrency` whose pinning is not the one most of the level's
    /// runs had.
    fn pinning_differs(&self, concurrency: u32) -> Vec<usize> {
        let pinnings: Vec<&Pinning> = self
            .run_order
            .iter()
            .zip(&self.records)
            .filter(|(c, _)| **c == concurrency)
            .map(|(_, r)| &r.pinning)
            .collect();
        let same = |p: &Pinning| pinnings.iter().filter(|q| same_pinning(p, q)).count();
        let Some(usual) = pinnings.iter().copied().max_by_key(|p| same(p)) else {
            return Vec::new();
        };
        pinnings
            .iter()
            .enumerate()
            .filter(|(_, p)| !same_pinning(p, usual))
            .map(|(i, _)| i + 1)
            .collect()
    }

    /// Each level's main phases, by increasing connection count.
    pub fn level_runs(&self) -> Vec<LevelRuns<'_>> {
        let mut levels = self.run_order.clone();
        levels.sort_unstable();
        levels.dedup();
        levels
            .into_iter()
            .map(|c| LevelRuns {
                cpus: self.records.first().map_or(1, |r| r.machine.cpus),
                concurrency: c,
                phases: self
                    .run_order
                    .iter()
                    .zip(&self.records)
                    .filter(|(rc, _)| **rc == c)
                    .filter_map(|(_, r)| r.main_phase())
                    .collect(),
            })
            .collect()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Growth {
    pub from_concurrency: u32,
    pub to_concurrency: u32,
    /// CPU per request at the highest concurrency over the lowest: the geometric mean of the
    /// ratios of runs of the same repetition.
    pub cpu_ratio: f64,
    /// Its 95 % interval; absent with one repetition.
    pub cpu_ratio_low: Option<f64>,
    pub cpu_ratio_high: Option<f64>,
    /// What the interval says: `worse` (CPU per request rises), `better` (falls),
    /// `no-significant-difference` (flat within ±5 %) or `inconclusive` (noise larger than the
    /// difference).
    pub change: Verdict,
    /// Fds scanned in readiness waits per request (per unit of work), highest concurrency over
    /// lowest (eBPF; [`crate::phase_metrics::fds_scanned_per_request`]).
    pub scan_ratio: Option<f64>,
    /// Cost per request rises significantly and steadily with connections, and the kernel
    /// shows why.
    pub grows: bool,
}

/// Whether two runs put their client and server on the same CPUs (the notes may word it apart).
fn same_pinning(a: &Pinning, b: &Pinning) -> bool {
    (a.enabled, &a.server_cpus, &a.client_cpus) == (b.enabled, &b.server_cpus, &b.client_cpus)
}

/// The mean of `f` over a level's repetitions that have it.
fn level_mean(level: &LevelRuns, f: impl Fn(&Phase) -> Option<f64>) -> Option<f64> {
    Some(Estimate::of(level.phases.iter().filter_map(|p| f(p)).collect())?.mean)
}

/// Judges `levels`, sorted by concurrency. Three things must agree: CPU per request at the
/// highest level is above the lowest's beyond the noise (the interval of their paired ratio),
/// it rises steadily level by level, and each request makes the server scan more fds (seeds/004:
/// select over every connection). Without eBPF only a larger CPU rise counts.
pub fn growth(levels: &[LevelRuns]) -> Option<Growth> {
    let cpu = |p: &Phase| p.per_request.cpu_total_us;
    let measured: Vec<(&LevelRuns, f64)> = levels
        .iter()
        .filter_map(|l| Some((l, level_mean(l, cpu)?)))
        .collect();
    let (&(first, _), &(last, _)) = (measured.first()?, measured.last()?);
    if measured.len() < 2 {
        return None;
    }
    // Runs of the same repetition ran next to each other: pairing them cancels slow drift.
    let (a, b): (Vec<f64>, Vec<f64>) = first
        .phases
        .iter()
        .zip(&last.phases)
        .filter_map(|(x, y)| Some((cpu(x)?, cpu(y)?)))
        .unzip();
    let ratio = paired_ratio(&a, &b)?;
    let change = verdict(&ratio);
    let steady = measured
        .windows(2)
        .all(|w| w[1].1 >= w[0].1 * MONOTONE_SLACK);
    let scan_ratio = match (
        level_mean(first, fds_scanned_per_request),
        level_mean(last, fds_scanned_per_request),
    ) {
        (Some(a), Some(b)) if a > 0.0 => Some(b / a),
        _ => None,
    };
    let grows = change == Verdict::Worse
        && steady
        && match scan_ratio {
            Some(s) => ratio.ratio >= GROWTH_CPU_RATIO && s >= SCAN_GROWTH_RATIO,
            None => ratio.ratio >= GROWTH_CPU_RATIO_UNCONFIRMED,
        };
    let repeated = a.len() > 1;
    Some(Growth {
        from_concurrency: first.concurrency,
        to_concurrency: last.concurrency,
        cpu_ratio: ratio.ratio,
        cpu_ratio_low: repeated.then_some(ratio.low),
        cpu_ratio_high: repeated.then_some(ratio.high),
        change,
        scan_ratio,
        grows,
    })
}
