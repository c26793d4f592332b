//! How far a user/system split of CPU can be read, the server's and the client's: the kernel
//! charges each scheduler tick whole to the mode it interrupted, so a split made of too few
//! ticks says little. Part of the analysis document ([`crate::document`]).

use reqcost_record::{CpuSplit, CpuTimes, Phase};
use serde::{Deserialize, Serialize};

use crate::document::KernelSplitDoc;

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
    pub(crate) fn of(
        cpu: &CpuTimes,
        sampled: Option<&KernelSplitDoc>,
    ) -> (ClientSplit, Option<f64>) {
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
