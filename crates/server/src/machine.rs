use std::fs;
use std::sync::OnceLock;

use reqcost_record::Machine;

pub use reqcost_record::Pinning;

/// Facts about this machine that a reader of the record needs to compare runs.
pub fn machine_info() -> Machine {
    let read = |p: &str| {
        fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let cpu_model = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default();
    Machine {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        arch: std::env::consts::ARCH.to_string(),
        // Not the affinity mask: reqcost pins itself before it describes the machine.
        // SAFETY: sysconf has no preconditions.
        cpus: unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32,
        cpu_model,
    }
}

/// CPUs this process was allowed to run on when it started. Read once, before reqcost pins its
/// own thread: afterwards that thread's affinity is the client's one CPU, and a sweep's later runs
/// would find a single CPU and leave client and server sharing it.
pub fn online_cpus() -> Vec<u32> {
    static ALLOWED: OnceLock<Vec<u32>> = OnceLock::new();
    ALLOWED.get_or_init(thread_affinity).clone()
}

fn thread_affinity() -> Vec<u32> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as u32)
            .filter(|&c| libc::CPU_ISSET(c as usize, &set))
            .collect()
    }
}

/// Decides where the load generator and the server run. With two or more CPUs they get
/// different ones, so the client's work never lands in the server's figures by preemption.
pub fn plan_pinning(enabled: bool, launched: bool) -> Pinning {
    let cpus = online_cpus();
    if !enabled {
        return Pinning {
            enabled: false,
            note: Some("pinning off (--no-pin): client and server share CPUs".into()),
            ..Pinning::default()
        };
    }
    if cpus.len() < 2 {
        return Pinning {
            enabled: false,
            note: Some("one CPU only: client and server share it".into()),
            ..Pinning::default()
        };
    }
    let client = vec![cpus[0]];
    let server = cpus[1..].to_vec();
    Pinning {
        enabled: true,
        server_cpus: if launched { server } else { Vec::new() },
        client_cpus: client,
        note: (!launched).then(|| {
            "attached server left on its own CPUs; only the load generator is pinned".into()
        }),
    }
}

pub(crate) fn cpu_set(cpus: &[u32]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c as usize, &mut set);
        }
        set
    }
}

/// Pins the calling thread to `cpus`.
pub fn pin_current_thread(cpus: &[u32]) -> std::io::Result<()> {
    online_cpus();
    let set = cpu_set(cpus);
    // SAFETY: pid 0 is the calling thread; `set` is a valid cpu_set_t.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
