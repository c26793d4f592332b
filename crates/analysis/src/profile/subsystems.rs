//! Kernel time by subsystem: the parts of the kernel sampled kernel time is named after
//! (network send and receive, readiness scanning, copies, scheduling, the eBPF probes), the
//! split of a profile's kernel samples among them, and the profile without the probes' own.

use std::borrow::Cow;
use std::collections::HashMap;

use reqcost_record::{Profile, Stack};

use super::{frames, key, FnKey, View};

/// A part of the kernel that sampled kernel time is named after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subsystem {
    /// Stable id, for the analysis JSON.
    pub id: &'static str,
    /// What the summary and the findings call it.
    pub label: &'static str,
    /// Kernel function names (leading underscores and `.isra`-style suffixes removed); a
    /// trailing `*` matches a prefix.
    patterns: &'static [&'static str],
}

/// The kernel subsystems sampled kernel time is split into (docs/profile.md). A sample counts
/// for the innermost kernel frame that one of them names: a copy inside `udp_sendmsg` is a copy,
/// the rest of `udp_sendmsg` is the network send. Samples no frame names are `other`.
pub const SUBSYSTEMS: [Subsystem; 6] = [
    // The probes' own frames: their programs, the kernel's dispatch to them and the helpers
    // only they call, so that a sample in a clock read under a probe counts for the probe.
    Subsystem {
        id: "probes",
        label: "eBPF probes",
        patterns: PROBE_FRAMES,
    },
    Subsystem {
        id: "copy",
        label: "copies to/from user",
        patterns: &[
            "copy_user*",
            "copy_to_user*",
            "copy_from_user*",
            "copy_to_iter",
            "copy_from_iter",
            "copy_page_to_iter",
            "copy_page_from_iter",
            "rep_movs_alternative",
            "csum_and_copy*",
        ],
    },
    Subsystem {
        id: "readiness",
        label: "readiness scanning",
        patterns: &[
            "do_select",
            "core_sys_select",
            "kern_select",
            "x64_sys_select",
            "x64_sys_pselect6",
            "do_sys_poll",
            "do_poll*",
            "x64_sys_poll",
            "x64_sys_ppoll",
            "poll_freewait",
            "pollwake",
            "sock_poll",
            "tcp_poll",
            "udp_poll",
            "datagram_poll",
            "ep_poll*",
            "ep_send_events",
            "ep_item_poll",
            "do_epoll_wait",
            "x64_sys_epoll_wait",
            "x64_sys_epoll_pwait*",
        ],
    },
    Subsystem {
        id: "sched",
        label: "scheduling",
        patterns: &[
            "schedule*",
            "finish_task_switch*",
            "pick_next_task*",
            "try_to_wake_up",
            "ttwu_*",
            "enqueue_task*",
            "dequeue_task*",
            "wake_up*",
        ],
    },
    Subsystem {
        id: "net_receive",
        label: "network receive",
        patterns: &[
            "udp_recvmsg",
            "udpv6_recvmsg",
            "skb_recv_udp",
            "udp_rcv",
            "udp4_lib_rcv",
            "udp_queue_rcv*",
            "udp_unicast_rcv_skb",
            "tcp_recvmsg*",
            "tcp_rcv_*",
            "tcp_v4_rcv",
            "tcp_v4_do_rcv",
            "tcp_v6_rcv",
            "ip_rcv*",
            "ip_local_deliver*",
            "ip_sublist_rcv*",
            "ip6_rcv*",
            "netif_receive*",
            "net_rx_action",
            "process_backlog",
            "napi_poll",
            "skb_recv_datagram",
            "sock_recvmsg",
            "sock_read_iter",
            "inet_recvmsg",
            "sys_recvmsg",
            "sys_recvfrom",
            "sys_recvmmsg",
            "do_recvmmsg",
            "x64_sys_recv*",
        ],
    },
    Subsystem {
        id: "net_send",
        label: "network send",
        patterns: &[
            "udp_sendmsg",
            "udpv6_sendmsg",
            "udp_send_skb",
            "tcp_sendmsg*",
            "tcp_write_xmit",
            "tcp_transmit_skb",
            "tcp_push*",
            "ip_output",
            "ip_finish_output*",
            "ip_send_skb",
            "ip_make_skb",
            "ip_append_data",
            "ip_local_out",
            "ip_queue_xmit",
            "ip6_output",
            "ip6_finish_output*",
            "ip6_send_skb",
            "ip6_xmit",
            "dev_queue_xmit",
            "dev_hard_start_xmit",
            "loopback_xmit",
            "sock_sendmsg",
            "sock_write_iter",
            "inet_sendmsg",
            "sys_sendmsg",
            "sys_sendto",
            "sys_sendmmsg",
            "x64_sys_send*",
        ],
    },
];

/// Kernel functions of eBPF programs (reqcost's probes, and any other tool's on the same
/// hooks): the programs (`bpf_prog_TAG_NAME`), the tracepoints' calls into them, the helpers;
/// and the uprobes' traps that run them in the server's threads (the breakpoint's single step,
/// the return trampoline's uretprobe syscall), which the server's code never makes itself.
const PROBE_FRAMES: &[&str] = &[
    "bpf_prog_*",
    "bpf_trace_*",
    "traceiter_*",
    "bpf_task_storage_*",
    "bpf_ringbuf_*",
    "bpf_probe_read_*",
    "do_sys_uretprobe",
    "x64_sys_uretprobe",
    "exc_debug_user",
    "asm_exc_debug",
    "uprobe_*",
    "uretprobe_*",
    "handle_swbp",
    "handle_trampoline",
    "arch_uprobe_*",
    "arch_uretprobe_*",
];

/// Whether a kernel frame is eBPF probe code (the `probes` subsystem's functions).
pub fn is_probe_frame(function: &str) -> bool {
    SUBSYSTEMS[0].names(function)
}

/// The profile of the server's own work: the samples taken in the probes' frames left out
/// (their programs run inside the server's syscalls and switches, on its CPU, but are reqcost's
/// cost, stated apart), so that no hot function, caller or share is the probes'. Borrowed when
/// no sample is in them.
pub fn without_probes(p: &Profile) -> Cow<'_, Profile> {
    let probe: Vec<bool> = p
        .frames
        .iter()
        .map(|f| f.kernel && is_probe_frame(&f.function))
        .collect();
    let in_probes = |s: &Stack| {
        s.frames
            .iter()
            .any(|&i| probe.get(i as usize).copied().unwrap_or(false))
    };
    if !p.stacks.iter().any(in_probes) {
        return Cow::Borrowed(p);
    }
    let stacks: Vec<Stack> = p.stacks.iter().filter(|s| !in_probes(s)).cloned().collect();
    Cow::Owned(Profile {
        samples: stacks.iter().map(|s| s.count).sum(),
        stacks,
        ..p.clone()
    })
}

/// Label of kernel samples no subsystem names.
pub const OTHER_KERNEL: &str = "other";

impl Subsystem {
    fn names(&self, function: &str) -> bool {
        let base = function.trim_start_matches('_');
        let base = base.split('.').next().unwrap_or(base);
        self.patterns.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => base.starts_with(prefix),
            None => base == *p,
        })
    }
}

/// The sampled kernel time of a profile by subsystem.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelSplit {
    /// Every sample of the profile.
    pub samples: u64,
    /// Samples whose leaf is kernel code.
    pub kernel_samples: u64,
    /// (subsystem, samples), most samples first, `other` last; subsystems without samples left
    /// out.
    pub parts: Vec<(Option<&'static Subsystem>, u64)>,
}

impl KernelSplit {
    /// Share of all samples.
    pub fn share(&self, samples: u64) -> f64 {
        samples as f64 / self.samples.max(1) as f64
    }

    /// `network send 30 %, readiness scanning 18 %, copies to/from user 9 %`: each a share of
    /// all samples, so the parts add up to the kernel's share.
    pub fn parts_text(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|(s, n)| {
                let label = s.map_or(OTHER_KERNEL, |s| s.label);
                format!("{label} {:.0} %", self.share(*n) * 100.0)
            })
            .collect();
        parts.join(", ")
    }

    /// `kernel 62 %: network send 30 %, ...`, as the findings quote it.
    pub fn describe(&self) -> String {
        format!(
            "kernel {:.0} %: {}",
            self.share(self.kernel_samples) * 100.0,
            self.parts_text()
        )
    }
}

/// The kernel's samples split by [`SUBSYSTEMS`]; None when no sample's leaf is kernel code.
pub fn kernel_split(p: &Profile) -> Option<KernelSplit> {
    let mut counts = [0u64; SUBSYSTEMS.len() + 1];
    let mut kernel_samples = 0;
    for s in &p.stacks {
        let mut kernel = frames(p, s, View::All)
            .take_while(|(_, f)| f.kernel)
            .peekable();
        if kernel.peek().is_none() {
            continue;
        }
        kernel_samples += s.count;
        let named =
            kernel.find_map(|(_, f)| SUBSYSTEMS.iter().position(|sub| sub.names(&f.function)));
        counts[named.unwrap_or(SUBSYSTEMS.len())] += s.count;
    }
    if kernel_samples == 0 {
        return None;
    }
    let mut parts: Vec<(Option<&'static Subsystem>, u64)> = SUBSYSTEMS
        .iter()
        .zip(counts)
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| (Some(s), n))
        .collect();
    parts.sort_by_key(|p| std::cmp::Reverse(p.1));
    if counts[SUBSYSTEMS.len()] > 0 {
        parts.push((None, counts[SUBSYSTEMS.len()]));
    }
    Some(KernelSplit {
        samples: p.samples.max(p.stacks.iter().map(|s| s.count).sum()),
        kernel_samples,
        parts,
    })
}

/// Kernel frames that dispatch a syscall to its handler: the frame one of them calls is the
/// syscall's own code (`__x64_sys_openat`, `__do_sys_newfstatat`, `ksys_write`, `do_writev`:
/// which one shows depends on what the compiler inlined or tail-called).
const SYSCALL_DISPATCH: &[&str] = &["x64_sys_call", "do_syscall_64"];

/// Prefixes of a syscall handler's name before the syscall's.
const HANDLER_PREFIXES: &[&str] = &["x64_sys_", "do_sys_", "se_sys_", "ksys_", "sys_", "do_"];

/// The syscall a handler frame stands for: `__x64_sys_openat` and `__do_sys_openat` are
/// `openat`, `ksys_mmap_pgoff` is `mmap`, `__x64_sys_sendfile64` is `sendfile` (the name the
/// probes count it by on x86-64).
fn syscall_of_handler(function: &str) -> &str {
    let base = function.trim_start_matches('_');
    let base = base.split('.').next().unwrap_or(base);
    let name = HANDLER_PREFIXES
        .iter()
        .find_map(|p| base.strip_prefix(p))
        .unwrap_or(base);
    match name.strip_suffix("_pgoff").unwrap_or(name) {
        "sendfile64" => "sendfile",
        name => name,
    }
}

/// The syscall a sample was taken in, from its chain's handler frame: None for a sample in
/// user code, outside any syscall (an interrupt, a fault) or whose chain stops short of it.
fn syscall_of<'a>(p: &'a Profile, s: &'a Stack) -> Option<&'a str> {
    let kernel: Vec<&str> = frames(p, s, View::All)
        .take_while(|(_, f)| f.kernel)
        .map(|(_, f)| f.function.as_str())
        .collect();
    let dispatch = kernel
        .iter()
        .position(|f| SYSCALL_DISPATCH.contains(&f.trim_start_matches('_')))?;
    let handler = kernel.get(dispatch.checked_sub(1)?)?;
    Some(syscall_of_handler(handler))
}

/// Samples taken inside the named syscalls (on CPU, as every sample is): None when no sample of
/// the profile shows which syscall it was in (kernel chains missing), where 0 would be a guess.
pub fn syscall_samples(p: &Profile, names: &[&str]) -> Option<u64> {
    let mut any = false;
    let mut matching = 0;
    for s in &p.stacks {
        if let Some(call) = syscall_of(p, s) {
            any = true;
            if names.contains(&call) {
                matching += s.count;
            }
        }
    }
    any.then_some(matching)
}

/// Samples by the syscall they were taken in, most first (ties by name); empty when no sample
/// shows which syscall it was in (kernel chains missing).
pub fn syscalls_sampled(p: &Profile) -> Vec<(&str, u64)> {
    let mut by: HashMap<&str, u64> = HashMap::new();
    for s in &p.stacks {
        if let Some(call) = syscall_of(p, s) {
            *by.entry(call).or_insert(0) += s.count;
        }
    }
    let mut v: Vec<(&str, u64)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v
}

/// The code that issued the syscall `name`, over the samples taken inside it: the first frame
/// outside the kernel and the C library's wrappers (`__libc_pwrite64`, `writev`), which is
/// where the server decided to make the call; most samples first.
pub fn syscall_issuers<'a>(p: &'a Profile, name: &str) -> Vec<(FnKey<'a>, u64)> {
    let mut by: HashMap<FnKey<'a>, u64> = HashMap::new();
    for s in p.stacks.iter().filter(|s| syscall_of(p, s) == Some(name)) {
        let issuer = frames(p, s, View::User)
            .map(|(_, f)| f)
            .find(|f| !is_c_library(&f.module));
        if let Some(f) = issuer {
            *by.entry(key(f)).or_insert(0) += s.count;
        }
    }
    let mut v: Vec<(FnKey<'a>, u64)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

fn is_c_library(module: &str) -> bool {
    ["libc.so", "libc-", "libpthread", "ld-linux"]
        .iter()
        .any(|p| module.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_syscall_is_named_by_its_handler_frame_whatever_was_inlined() {
        for (handler, syscall) in [
            ("__x64_sys_openat", "openat"),
            ("__do_sys_newfstatat", "newfstatat"),
            ("ksys_write", "write"),
            ("ksys_mmap_pgoff", "mmap"),
            ("do_writev", "writev"),
            ("__sys_sendto", "sendto"),
            ("__x64_sys_wait4", "wait4"),
            ("__x64_sys_fsync.isra.0", "fsync"),
            ("__x64_sys_sendfile64", "sendfile"),
        ] {
            assert_eq!(syscall_of_handler(handler), syscall, "{handler}");
        }
    }

    #[test]
    fn probe_frames_are_named_apart_from_the_kernel() {
        for probe in [
            "bpf_prog_c5cf8e71cb3752ac_sys_exit",
            "bpf_trace_run2",
            "__bpf_trace_sys_enter",
            "__traceiter_sys_exit",
            "bpf_task_storage_get_recur",
            "__do_sys_uretprobe",
            "exc_debug_user",
            "asm_exc_debug",
            "uprobe_notify_resume",
            "handle_swbp",
            "arch_uprobe_skip_sstep",
        ] {
            assert!(is_probe_frame(probe), "{probe}");
        }
        for other in ["tcp_sendmsg", "do_syscall_64", "bpf_map_lookup_elem_sys"] {
            assert!(!is_probe_frame(other), "{other}");
        }
    }
}
