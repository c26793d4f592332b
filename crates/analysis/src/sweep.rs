//! Concurrency sweeps: does the cost of one request grow with the number of connections?

use serde::Serialize;

use reqcost_record::Phase;

/// CPU per request at the highest concurrency over the lowest, above which a sweep says the
/// cost grows with connections (seeds/004: select() over every connection).
pub const GROWTH_FLAG_RATIO: f64 = 1.3;
/// A step down larger than this breaks the trend: noise, not growth.
const MONOTONE_SLACK: f64 = 0.9;

#[derive(Debug, Clone, Serialize)]
pub struct Growth {
    pub from_concurrency: u32,
    pub to_concurrency: u32,
    /// CPU per request at the highest concurrency over the lowest.
    pub cpu_ratio: f64,
    /// Cost per request rises steadily with connections.
    pub grows: bool,
}

/// Judges `points` (concurrency, phase), sorted by concurrency.
pub fn growth(points: &[(u32, &Phase)]) -> Option<Growth> {
    let cpu: Vec<(u32, f64)> = points
        .iter()
        .filter_map(|(c, p)| Some((*c, p.per_request.cpu_total_us?)))
        .collect();
    let (first, last) = (cpu.first()?, cpu.last()?);
    if cpu.len() < 2 || first.1 <= 0.0 {
        return None;
    }
    let cpu_ratio = last.1 / first.1;
    let steady = cpu.windows(2).all(|w| w[1].1 >= w[0].1 * MONOTONE_SLACK);
    Some(Growth {
        from_concurrency: first.0,
        to_concurrency: last.0,
        cpu_ratio,
        grows: cpu_ratio >= GROWTH_FLAG_RATIO && steady,
    })
}
