//! Kernel-side accounting collected by the eBPF probes (see `reqcost-probes`).

use serde::{Deserialize, Serialize};

/// What the server tree asked the kernel to do during one phase.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct KernelStats {
    /// Per syscall, sorted by count, most frequent first.
    pub syscalls: Vec<SyscallStat>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct SyscallStat {
    pub name: String,
    pub count: u64,
}

impl KernelStats {
    /// Figures accumulated between `earlier` and `self` (both cumulative reads).
    pub fn since(&self, earlier: &KernelStats) -> KernelStats {
        let before = |name: &str| {
            earlier
                .syscalls
                .iter()
                .find(|s| s.name == name)
                .map_or(0, |s| s.count)
        };
        let mut syscalls: Vec<SyscallStat> = self
            .syscalls
            .iter()
            .map(|s| SyscallStat {
                name: s.name.clone(),
                count: s.count.saturating_sub(before(&s.name)),
            })
            .filter(|s| s.count > 0)
            .collect();
        syscalls.sort_by(|a, b| b.count.cmp(&a.count));
        KernelStats { syscalls }
    }
}
