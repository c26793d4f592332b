//! What a measurement is given besides its load: the server to measure, and how to measure it.

use std::time::Duration;

use reqcost_profile::SampleOptions;

use super::{ProbeSchedule, Upstreams};

pub enum TargetSpec {
    Launch(Vec<String>),
    Attach(u32),
}

/// How to measure, whatever the workload and the server.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasureOptions {
    /// Keep reqcost and the server on different CPUs (when there are 2+).
    pub pin: bool,
    /// How long a launched server has to accept connections.
    pub startup_timeout: Duration,
    /// Attach the eBPF probes (exact syscall figures, at a CPU cost to the server).
    pub probes: bool,
    /// Call-chain sampling; `None` turns it off.
    pub sampling: Option<SampleOptions>,
    /// Follow main with a short slow-client phase.
    pub slow_phase: bool,
    /// When the probes are attached within each phase.
    pub probe_schedule: ProbeSchedule,
    /// Turn on the kernel's BPF run-time statistics: the probes' cost on the whole machine.
    pub probe_stats: bool,
    /// Count the syscalls of the `--load` command's tree beside the server's.
    pub count_client: bool,
    /// The local upstream servers whose requests are followed too (docs/stack.md).
    pub upstreams: Upstreams,
}

impl Default for MeasureOptions {
    fn default() -> MeasureOptions {
        MeasureOptions {
            pin: true,
            startup_timeout: Duration::from_secs(10),
            probes: true,
            sampling: Some(SampleOptions::default()),
            slow_phase: true,
            probe_schedule: ProbeSchedule::Alternate,
            probe_stats: false,
            count_client: false,
            upstreams: Upstreams::All,
        }
    }
}
