//! Small hand-made phases for the unit tests of the window and pass arithmetic.

use std::collections::BTreeMap;

use reqcost_record::{
    ClientStats, CpuMethod, CpuSplit, CpuTimes, CpuWindows, KernelStats, PerRequest, Phase,
    RequestStats, ServerTotals, SocketStats, WindowTotals,
};

pub const SOURCE: &str = "cgroup";

pub fn cpu(total_ns: u64, user_ns: u64) -> CpuTimes {
    CpuTimes {
        total_ns,
        user_ns,
        system_ns: total_ns - user_ns,
        source: SOURCE.into(),
        split: CpuSplit::Ticks,
    }
}

/// `windows` windows that finished `requests` in `elapsed_s`, using `cpu`.
pub fn totals(windows: u32, requests: u64, elapsed_s: f64, cpu: &CpuTimes) -> WindowTotals {
    WindowTotals {
        windows,
        requests,
        elapsed_s,
        cpu_ns: cpu.total_ns,
        user_ns: cpu.user_ns,
        system_ns: cpu.system_ns,
    }
}

pub fn windows(method: CpuMethod, probed: WindowTotals, unprobed: WindowTotals) -> CpuWindows {
    CpuWindows {
        method,
        reason: String::new(),
        probed,
        unprobed,
        count_scale: 1.0,
        requests_cut: 0,
        pass_work: None,
        pass_requests: 0,
        budget: None,
    }
}

/// Per-request accounting of `requests` requests that split the tree's CPU into
/// `attributed_ns` and `unattributed_ns`.
pub fn served(requests: u64, attributed_ns: u64, unattributed_ns: u64) -> RequestStats {
    RequestStats {
        requests,
        attributed_cpu_ns: attributed_ns,
        unattributed_cpu_ns: unattributed_ns,
        ..RequestStats::default()
    }
}

/// A phase whose load generator finished `requests` (all answered), with `cpu` measured, the
/// probes' `accepted` connections and per-request accounting `served`.
pub fn phase(requests: u64, cpu: CpuTimes, accepted: u64, served: Option<RequestStats>) -> Phase {
    let kernel = KernelStats {
        sockets: SocketStats {
            accepted,
            ..SocketStats::default()
        },
        ..KernelStats::default()
    };
    Phase {
        name: "main".into(),
        client_model: None,
        client: ClientStats {
            requests,
            ok: requests,
            ..ClientStats::default()
        },
        server: ServerTotals {
            cpu: Some(cpu),
            kernel: Some(kernel),
            ..ServerTotals::default()
        },
        per_request: PerRequest::default(),
        requests: served,
        other_traffic: None,
        cpu_windows: None,
        missing: BTreeMap::new(),
        unit: Default::default(),
        hops: vec![],
    }
}

pub fn accepted(phase: &Phase) -> u64 {
    phase
        .server
        .kernel
        .as_ref()
        .map_or(0, |k| k.sockets.accepted)
}

/// Per-request accounting's requests, and its attributed and unattributed CPU.
pub fn accounting(phase: &Phase) -> (u64, u64, u64) {
    let r = phase.requests.as_ref().expect("per-request accounting");
    (r.requests, r.attributed_cpu_ns, r.unattributed_cpu_ns)
}
