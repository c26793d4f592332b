//! Concurrency sweeps: does the cost of one request grow with the number of connections?

use serde::Serialize;

use reqcost_record::Phase;

/// CPU per request at the highest concurrency over the lowest, above which the cost is said to
/// grow — when the kernel confirms that each request makes it scan more fds.
pub const GROWTH_CPU_RATIO: f64 = 1.5;
/// Without eBPF figures to confirm, CPU alone must grow this much.
pub const GROWTH_CPU_RATIO_UNCONFIRMED: f64 = 2.0;
/// Growth of fds handed to select/poll/epoll_wait per request that confirms the CPU trend.
pub const SCAN_GROWTH_RATIO: f64 = 2.0;
/// A step down larger than this breaks the trend: noise, not growth.
const MONOTONE_SLACK: f64 = 0.9;

#[derive(Debug, Clone, Serialize)]
pub struct Growth {
    pub from_concurrency: u32,
    pub to_concurrency: u32,
    /// CPU per request at the highest concurrency over the lowest.
    pub cpu_ratio: f64,
    /// Fds handed to readiness waits per request, highest concurrency over lowest (eBPF).
    pub scan_ratio: Option<f64>,
    /// Cost per request rises steadily with connections, and the kernel shows why.
    pub grows: bool,
}

/// Fds the server asked the kernel to watch, per request (select/poll nfds, epoll maxevents).
fn fds_scanned_per_request(p: &Phase) -> Option<f64> {
    let k = p.server.kernel.as_ref()?;
    (p.client.ok > 0)
        .then(|| k.waits.iter().map(|w| w.fds_asked).sum::<u64>() as f64 / p.client.ok as f64)
}

/// Judges `points` (concurrency, phase), sorted by concurrency. Two signals must agree: CPU
/// per request rises steadily, and each request makes the server scan more fds (seeds/004:
/// select over every connection). Without eBPF only a larger CPU rise counts.
pub fn growth(points: &[(u32, &Phase)]) -> Option<Growth> {
    let cpu: Vec<(u32, f64)> = points
        .iter()
        .filter_map(|(c, p)| Some((*c, p.per_request.cpu_total_us?)))
        .collect();
    if cpu.len() < 2 || cpu[0].1 <= 0.0 {
        return None;
    }
    let (first, last) = (cpu[0], cpu[cpu.len() - 1]);
    let cpu_ratio = last.1 / first.1;
    let steady = cpu.windows(2).all(|w| w[1].1 >= w[0].1 * MONOTONE_SLACK);
    let scan = |i: usize| points.get(i).and_then(|(_, p)| fds_scanned_per_request(p));
    let scan_ratio = match (scan(0), scan(points.len() - 1)) {
        (Some(a), Some(b)) if a > 0.0 => Some(b / a),
        _ => None,
    };
    let grows = steady
        && match scan_ratio {
            Some(s) => cpu_ratio >= GROWTH_CPU_RATIO && s >= SCAN_GROWTH_RATIO,
            None => cpu_ratio >= GROWTH_CPU_RATIO_UNCONFIRMED,
        };
    Some(Growth {
        from_concurrency: first.0,
        to_concurrency: last.0,
        cpu_ratio,
        scan_ratio,
        grows,
    })
}
