//! What the rules read off a record, shared between them: per-request views of each phase
//! ([`Facts`]), slow clients held against fast ones in one phase ([`SpeedContrast`]), shares
//! taken from the sampled profile, and the [`Draft`] a rule returns when it fires.

use reqcost_record::{
    FdKind, Frame, GroupCost, IoDirection, KernelStats, Phase, Profile, RequestStats, RunRecord,
};

use super::{Confidence, Finding, Rule, MAJOR_SHARE};
use crate::profile::{self, View};
use crate::requests::SPEED_BUCKETS;

/// The record as every rule reads it.
pub(super) struct Ctx<'a> {
    pub(super) rec: &'a RunRecord,
    pub(super) main: Facts<'a>,
    pub(super) slow: Option<Facts<'a>>,
    /// Fast clients at the slow phase's request rate: its reference, where the record has it.
    pub(super) same_rate: Option<Facts<'a>>,
    pub(super) profile: Option<&'a Profile>,
}

impl<'a> Ctx<'a> {
    /// None for a record without a main phase: there is nothing to judge. `profile` is the
    /// record's as the rules read it: the server's own samples ([`profile::without_probes`]).
    pub(super) fn of(rec: &'a RunRecord, profile: Option<&'a Profile>) -> Option<Ctx<'a>> {
        let phase = |name: &str| rec.phases.iter().find(|p| p.name == name).map(Facts::of);
        Some(Ctx {
            rec,
            main: Facts::of(rec.main_phase()?),
            slow: phase("slow-clients"),
            same_rate: phase("fast-same-rate"),
            profile,
        })
    }

    /// Time per request inside the named syscalls in phase `f`, and how much of it was CPU.
    pub(super) fn in_calls(&self, f: &Facts, names: &[&str]) -> CallTime {
        let wall_ns = f.time_ns(names);
        let sampled = self
            .profile
            .filter(|p| p.samples >= PROFILE_MIN_SAMPLES)
            .and_then(|p| Some((profile::syscall_samples(p, names)?, p.samples)));
        // No call is on CPU longer than it lasts: a share of the run's samples can say more
        // (sampling error, or phases weighing differently in the profile than in this one).
        let cpu_ns = match (sampled, f.cpu_ns) {
            (Some((n, total)), Some(cpu)) => n as f64 / total as f64 * cpu / f.ok,
            _ => f.system_ns().unwrap_or(wall_ns),
        }
        .min(wall_ns);
        CallTime {
            wall_ns,
            cpu_ns,
            sampled: sampled.filter(|_| f.cpu_ns.is_some()),
            system_ns: f.system_ns(),
        }
    }
}

/// Time per request inside some syscalls: the probes' wall time from entry to return, which
/// counts the time a call waited off CPU (on the disk, a child, a lock, the peer), and the part
/// of it on CPU, the only part a finding's CPU share may count.
pub(super) struct CallTime {
    wall_ns: f64,
    /// On CPU, ns per request: the calls' share of the run's samples (every sample is on CPU,
    /// and the rules read the run's profile as one) of the phase's CPU, where the profile's
    /// kernel chains show which syscall each sample was in, at most the wall time; else the
    /// wall time, at most the phase's system CPU (a syscall runs in the kernel): an upper
    /// bound, said so in the evidence.
    pub(super) cpu_ns: f64,
    /// (samples in the calls, samples in all) when the CPU came from the profile.
    sampled: Option<(u64, u64)>,
    /// The phase's system CPU per request, the bound without samples.
    system_ns: Option<f64>,
}

impl CallTime {
    /// Wall time in the calls not spent on CPU: waiting, never a share of the CPU. Known from
    /// the samples only.
    pub(super) fn blocked_ns(&self) -> Option<f64> {
        self.sampled.map(|_| (self.wall_ns - self.cpu_ns).max(0.0))
    }

    /// The evidence line for the time inside `what`: the wall time, the CPU the share counts
    /// and where that comes from, and the time blocked.
    pub(super) fn describe(&self, what: &str) -> String {
        let us = |ns: f64| ns / 1000.0;
        let inside = format!("{:.1} µs per request inside {what}", us(self.wall_ns));
        match (self.sampled, self.blocked_ns()) {
            (Some((n, total)), Some(blocked)) => format!(
                "{inside}: {:.1} µs on CPU ({n} of {total} samples), {:.1} µs blocked off CPU (not in the share)",
                us(self.cpu_ns),
                us(blocked)
            ),
            _ if self.cpu_ns < self.wall_ns => format!(
                "{inside} (wall time, blocked time included: no sampled kernel chains split it; the share counts at most the phase's system CPU, {:.1} µs)",
                us(self.system_ns.unwrap_or(self.cpu_ns))
            ),
            _ => format!(
                "{inside} (wall time, the share's upper bound: no sampled kernel chains tell CPU from time blocked)"
            ),
        }
    }
}

/// Per-request views of one phase.
pub(super) struct Facts<'a> {
    pub(super) phase: &'a Phase,
    pub(super) kernel: Option<&'a KernelStats>,
    pub(super) ok: f64,
    cpu_ns: Option<f64>,
}

impl<'a> Facts<'a> {
    pub(super) fn of(phase: &'a Phase) -> Facts<'a> {
        Facts {
            phase,
            kernel: phase.server.kernel.as_ref(),
            ok: phase.units(),
            cpu_ns: phase.server.cpu.as_ref().map(|c| c.total_ns as f64),
        }
    }

    pub(super) fn usable(&self) -> bool {
        self.ok >= 1.0
    }

    /// Calls per request of the named syscalls.
    pub(super) fn calls(&self, names: &[&str]) -> f64 {
        self.sum(names, |s| s.count)
    }

    /// Nanoseconds per request spent inside the named syscalls (wall time in the call).
    pub(super) fn time_ns(&self, names: &[&str]) -> f64 {
        self.sum(names, |s| s.time_ns)
    }

    pub(super) fn errno(&self, names: &[&str], errno: &str) -> f64 {
        self.sum(names, |s| {
            s.errnos
                .iter()
                .filter(|e| e.errno == errno)
                .map(|e| e.count)
                .sum()
        })
    }

    fn sum(&self, names: &[&str], f: impl Fn(&reqcost_record::SyscallStat) -> u64) -> f64 {
        let Some(k) = self.kernel else { return 0.0 };
        k.syscalls
            .iter()
            .filter(|s| names.contains(&s.name.as_str()))
            .map(f)
            .sum::<u64>() as f64
            / self.ok
    }

    /// (calls, bytes) per request of write- or read-like calls on one kind of fd.
    pub(super) fn io(&self, dir: IoDirection, kind: FdKind) -> (f64, f64) {
        let Some(k) = self.kernel else {
            return (0.0, 0.0);
        };
        let (calls, bytes) = k.io_total(dir, kind);
        (calls as f64 / self.ok, bytes as f64 / self.ok)
    }

    /// Bytes per request that reached the client: what the load generator received, or, when
    /// reqcost sent nothing (attach) or the server had other clients too (`run --pid`), what
    /// the server wrote on its sockets.
    pub(super) fn bytes_out(&self) -> f64 {
        if self.phase.client.requests > 0 && self.phase.other_traffic.is_none() {
            self.phase.client.bytes_received as f64 / self.ok
        } else {
            self.io(IoDirection::Write, FdKind::Socket).1
        }
    }

    pub(super) fn cpu_us(&self) -> Option<f64> {
        self.phase.per_request.cpu_total_us
    }

    /// The phase's system CPU per request, ns.
    fn system_ns(&self) -> Option<f64> {
        let c = self.phase.server.cpu.as_ref()?;
        Some(c.system_ns as f64 / self.ok)
    }

    pub(super) fn system_share(&self) -> Option<f64> {
        let c = self.phase.server.cpu.as_ref()?;
        (c.total_ns > 0).then(|| c.system_ns as f64 / c.total_ns as f64)
    }

    /// Share of this phase's CPU that `ns_per_request` of work stands for.
    pub(super) fn share(&self, ns_per_request: f64) -> f64 {
        match self.cpu_ns {
            Some(cpu) if cpu > 0.0 => (ns_per_request * self.ok / cpu).clamp(0.0, 1.0),
            _ => 0.0,
        }
    }
}

/// What a rule found, before the catalog adds the rule's id and the finding's carriers.
pub(super) struct Draft {
    pub(super) title: String,
    pub(super) evidence: Vec<String>,
    pub(super) cpu_share: f64,
    pub(super) phase: String,
    pub(super) fix: &'static str,
    /// Independent signals that agreed; rules return nothing with fewer than two.
    pub(super) signals: usize,
}

impl Draft {
    pub(super) fn finish(self, rule: &Rule) -> Finding {
        Finding {
            id: rule.id.into(),
            title: self.title,
            evidence: self.evidence,
            cpu_share: self.cpu_share,
            phase: self.phase,
            fix: self.fix.into(),
            confidence: if self.signals >= 3 {
                Confidence::High
            } else {
                Confidence::Medium
            },
            major: self.cpu_share >= MAJOR_SHARE,
            carriers: Vec::new(),
            server: String::new(),
        }
    }
}

/// Write-like syscalls: what a response can go out with.
pub(super) const WRITE_CALLS: &[&str] = &[
    "write", "writev", "pwrite64", "pwritev", "pwritev2", "send", "sendto", "sendmsg", "sendmmsg",
];
pub(super) const OPEN_CALLS: &[&str] = &["open", "openat", "openat2"];
/// Calls that wait for written data to reach the disk.
pub(super) const SYNC_CALLS: &[&str] = &["fsync", "fdatasync", "sync_file_range"];

/// Samples a profile needs before a rule takes a share from it.
pub(super) const PROFILE_MIN_SAMPLES: u64 = 50;

/// Total share of the profile in chains passing through a function matching `pred` (self and
/// callees alike), when there are enough samples to judge and some chain passes there. None
/// matching says nothing about the share: the profile may lack kernel frames or their names, so
/// a rule estimates it some other way rather than claim 0 %.
pub(super) fn profile_share(p: &Profile, pred: impl Fn(&str) -> bool) -> Option<f64> {
    let matching = profile::total_samples(p, |f| pred(&f.function));
    (p.samples >= PROFILE_MIN_SAMPLES && matching > 0).then(|| matching as f64 / p.samples as f64)
}

/// Why a share could not be taken from a profile, for the rule's evidence: without this line a
/// reader would take the estimate for a measured share.
pub(super) fn unsampled(p: &Profile, frames: &str) -> String {
    if p.samples < PROFILE_MIN_SAMPLES {
        format!(
            "the profile has only {} samples (under {PROFILE_MIN_SAMPLES})",
            p.samples
        )
    } else {
        format!("no sampled chain passes through {frames} (kernel frames missing?)")
    }
}

/// Where in the kernel the sampled CPU went, as `CPU samples: kernel 62 %: network send 30 %,
/// ...`, from a profile large enough for shares ([`profile_share`]'s bound).
pub(super) fn kernel_split_evidence(p: &Profile) -> Option<String> {
    let split = profile::kernel_split(p).filter(|_| p.samples >= PROFILE_MIN_SAMPLES)?;
    Some(format!("CPU samples: {}", split.describe()))
}

/// Self share of the samples whose innermost user frame matches `pred`: kernel frames a copy or
/// a cipher trapped into count for the user function that caused them.
pub(super) fn user_self_share(p: &Profile, pred: impl Fn(&Frame) -> bool) -> f64 {
    profile::self_samples(p, View::User, pred) as f64 / p.samples.max(1) as f64
}

/// Requests each side of the contrast needs, so that one odd request does not make it.
const MIN_SIDE_REQUESTS: u64 = 10;
/// Slow clients: speed buckets below 256 KiB/s; fast ones: from 1 MiB/s. The bucket between
/// is on neither side, so that the two stand clearly apart.
const SLOW_BELOW: u64 = 256 * 1024;
const FAST_FROM: u64 = 1024 * 1024;

/// A phase's slow-client requests against its fast-client ones (`unknown` speed on neither side).
pub(super) struct SpeedContrast<'a> {
    pub(super) phase: &'a str,
    stats: &'a RequestStats,
    pub(super) slow: SpeedSide<'a>,
    pub(super) fast: SpeedSide<'a>,
}

impl<'a> SpeedContrast<'a> {
    pub(super) fn of(phase: &'a Phase) -> Option<SpeedContrast<'a>> {
        let stats = phase.requests.as_ref()?;
        // A bucket's bounds: (from, below) bytes per second.
        let bounds = SPEED_BUCKETS.iter().scan(0, |from, b| {
            Some((b.label, std::mem::replace(from, b.below), b.below))
        });
        let side = |pick: fn(u64, u64) -> bool| SpeedSide {
            buckets: stats
                .by_speed
                .iter()
                .filter(|g| {
                    bounds
                        .clone()
                        .any(|(label, from, below)| label == g.name && pick(from, below))
                })
                .collect(),
        };
        let slow = side(|_, below| below <= SLOW_BELOW);
        let fast = side(|from, _| from >= FAST_FROM);
        let enough = |s: &SpeedSide| s.requests() >= MIN_SIDE_REQUESTS;
        (enough(&slow) && enough(&fast) && fast.cpu_ns() > 0.0).then_some(SpeedContrast {
            phase: &phase.name,
            stats,
            slow,
            fast,
        })
    }

    /// Mean CPU per request, slow over fast: CPU adds up, so the mean is what the server pays.
    pub(super) fn ratio(&self) -> f64 {
        self.slow.cpu_ns() / self.fast.cpu_ns()
    }

    /// Share of the phase's CPU the slow requests cost beyond what fast ones would have.
    pub(super) fn excess_share(&self) -> f64 {
        let total = self.stats.attributed_cpu_ns + self.stats.unattributed_cpu_ns;
        let extra = self.slow.requests() as f64 * (self.slow.cpu_ns() - self.fast.cpu_ns());
        if total == 0 {
            0.0
        } else {
            (extra / total as f64).clamp(0.0, 1.0)
        }
    }

    pub(super) fn cpu_evidence(&self) -> String {
        format!(
            "CPU per request {:.1} µs over {} requests of fast clients (≥ 1 MiB/s), {:.1} µs over {} of slow clients ({}): {:.0}x, in phase {}",
            self.fast.cpu_ns() / 1000.0,
            self.fast.requests(),
            self.slow.cpu_ns() / 1000.0,
            self.slow.requests(),
            self.slow.labels(),
            self.ratio(),
            self.phase
        )
    }
}

/// Speed buckets taken together.
pub(super) struct SpeedSide<'a> {
    pub(super) buckets: Vec<&'a GroupCost>,
}

impl SpeedSide<'_> {
    pub(super) fn requests(&self) -> u64 {
        self.buckets.iter().map(|g| g.requests).sum()
    }

    /// The side's mean of a per-request figure, each bucket weighted by its requests.
    pub(super) fn mean(&self, f: impl Fn(&GroupCost) -> f64) -> f64 {
        let weighted: f64 = self.buckets.iter().map(|g| f(g) * g.requests as f64).sum();
        weighted / self.requests().max(1) as f64
    }

    pub(super) fn cpu_ns(&self) -> f64 {
        self.mean(|g| g.cpu_per_request.mean)
    }

    fn labels(&self) -> String {
        let labels: Vec<&str> = self.buckets.iter().map(|g| g.name.as_str()).collect();
        labels.join(", ")
    }

    /// Each bucket with the clients in it: `< 16 KiB/s: 10.0.0.7, 10.0.0.9`.
    pub(super) fn describe(&self) -> Vec<String> {
        self.buckets
            .iter()
            .map(|g| format!("{} ({} requests): {}", g.name, g.requests, clients_of(g)))
            .collect()
    }
}

fn clients_of(g: &GroupCost) -> String {
    if g.clients.is_empty() {
        "clients not recorded".into()
    } else {
        g.clients.join(", ")
    }
}
