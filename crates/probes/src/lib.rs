//! Kernel-side accounting of a process tree with eBPF, aggregated in the kernel.
//!
//! [`Probes::attach`] loads one BPF object (src/bpf/reqcost.bpf.c) that follows the root pid,
//! its threads and every process it forks, and counts per syscall (calls, time, errors by
//! errno), read/write sizes by fd kind, ioctl codes, epoll_ctl ops, readiness waits, scheduler
//! wakeups/switches/run-queue delay, page faults and memory mapping. Aggregation happens in
//! fixed-size per-CPU maps, so memory is bounded whatever the event rate: nothing is streamed to
//! user space, and [`Probes::read`] copies the maps.

mod counters;
mod layout;
mod names;
mod procfs;

#[cfg(target_arch = "x86_64")]
mod bpf;

use reqcost_record::KernelStats;

pub use counters::ioctl_name;
pub use names::{errno_name, syscall_name};

/// Loaded and attached probes following one process tree; dropping it detaches them.
pub struct Probes {
    #[cfg(target_arch = "x86_64")]
    loaded: bpf::Loaded,
    #[cfg(not(target_arch = "x86_64"))]
    never: std::convert::Infallible,
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// BPF could not be loaded; the text says what is missing and how to get it.
    #[error("{0}")]
    Unavailable(String),
}

impl Probes {
    /// Starts counting for `root_pid`, its threads and every descendant (those alive now and
    /// those it forks from now on).
    pub fn attach(root_pid: u32) -> Result<Probes, ProbeError> {
        if let Some(why) = procfs::preflight(root_pid) {
            return Err(ProbeError::Unavailable(why));
        }
        #[cfg(target_arch = "x86_64")]
        {
            let loaded = bpf::Loaded::attach(root_pid).map_err(ProbeError::Unavailable)?;
            Ok(Probes { loaded })
        }
        #[cfg(not(target_arch = "x86_64"))]
        Err(ProbeError::Unavailable(format!(
            "eBPF probes are built for x86_64 only; this is {}",
            std::env::consts::ARCH
        )))
    }

    /// Cumulative figures since [`Probes::attach`]; phase figures are
    /// `after.since(&before)` of two reads.
    pub fn read(&self) -> KernelStats {
        #[cfg(target_arch = "x86_64")]
        {
            self.loaded.read().decode()
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }
}
