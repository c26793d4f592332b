//! Whether BPF can load at all, from what /proc and /sys say (checked first, so
//! that a refusal is explained in one line).

use std::fs;

/// Why BPF tracing cannot work here, as one line saying what to do, or `None` when it can.
pub fn why_not(root: u32) -> Option<String> {
    if !std::path::Path::new(&format!("/proc/{root}")).exists() {
        return Some(format!(
            "no process with pid {root} to attach the eBPF probes to"
        ));
    }
    if let Some(why) = fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .and_then(|r| too_old(r.trim()))
    {
        return Some(why);
    }
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Some(
            "the kernel exposes no BTF (/sys/kernel/btf/vmlinux is missing): eBPF probes need a \
             kernel built with CONFIG_DEBUG_INFO_BTF=y"
                .to_string(),
        );
    }
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(why) = missing_capabilities(&status) {
        return Some(why);
    }
    // Absent when the kernel has no lockdown LSM: nothing is locked down then.
    let lockdown = fs::read_to_string("/sys/kernel/security/lockdown").unwrap_or_default();
    locked_down(&lockdown)
}

/// Tracepoints with BTF arguments, task storage in tracing programs and the four-argument
/// sched_switch all came by Linux 5.18.
fn too_old(release: &str) -> Option<String> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    ((major, minor) < (5, 18))
        .then(|| format!("eBPF probes need Linux 5.18 or later; this kernel is {release}"))
}

/// CAP_BPF with CAP_PERFMON, or CAP_SYS_ADMIN, must be effective.
fn missing_capabilities(status: &str) -> Option<String> {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let has = |cap: u32| eff & (1 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return None;
    }
    Some(
        "eBPF probes need privileges: run as root or grant CAP_BPF+CAP_PERFMON \
         (sudo setcap cap_bpf,cap_perfmon+ep path/to/reqcost)"
            .to_string(),
    )
}

/// The confidentiality lockdown level forbids BPF from reading kernel memory.
fn locked_down(lockdown: &str) -> Option<String> {
    lockdown.contains("[confidentiality]").then(|| {
        "kernel lockdown (confidentiality) forbids eBPF tracing: boot with lockdown=integrity \
         or none (Secure Boot setups may force it)"
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_check() {
        let root = "Name:\tx\nCapEff:\t000001ffffffffff\n";
        assert_eq!(missing_capabilities(root), None);
        // CAP_BPF and CAP_PERFMON only.
        let bpf = format!("CapEff:\t{:016x}\n", (1u64 << 39) | (1 << 38));
        assert_eq!(missing_capabilities(&bpf), None);
        let bpf_only = format!("CapEff:\t{:016x}\n", 1u64 << 39);
        assert!(missing_capabilities(&bpf_only)
            .unwrap()
            .contains("CAP_BPF+CAP_PERFMON"));
        assert!(missing_capabilities("CapEff:\t0000000000000000\n")
            .unwrap()
            .contains("run as root"));
    }

    #[test]
    fn kernel_version_and_lockdown() {
        assert_eq!(too_old("6.18.44-fc-v669"), None);
        assert_eq!(too_old("5.18.0"), None);
        assert!(too_old("5.15.0-91-generic")
            .unwrap()
            .contains("5.18 or later"));
        assert_eq!(locked_down("none [integrity] confidentiality\n"), None);
        assert_eq!(locked_down(""), None);
        assert!(locked_down("none integrity [confidentiality]\n").is_some());
    }

    #[test]
    fn a_missing_process_is_named() {
        assert_eq!(
            why_not(u32::MAX).unwrap(),
            format!(
                "no process with pid {} to attach the eBPF probes to",
                u32::MAX
            )
        );
    }
}
