//! A replay against the log it replayed: requests, status mix, bytes and response times, logged
//! and replayed side by side, each said to be reproduced or not, and why not.

use reqcost_record::{Phase, RunRecord};
use serde::{Deserialize, Serialize};

/// How far a replayed figure may be from the logged one and still count as reproduced.
const BYTES_TOLERANCE: f64 = 0.1;
/// HTTP response headers, which a server's byte count may leave out (`$body_bytes_sent`).
const HEADER_ALLOWANCE: f64 = 1024.0;
const TIME_TOLERANCE: f64 = 0.25;
/// Percentage points a status's share may move.
const STATUS_TOLERANCE_PCT: f64 = 5.0;

/// One figure, logged and replayed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReplayedFigure {
    pub figure: String,
    pub logged: String,
    pub replayed: String,
    pub reproduced: bool,
    /// Why the replay differs, when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

fn row(figure: &str, logged: String, replayed: String, why: Option<String>) -> ReplayedFigure {
    ReplayedFigure {
        figure: figure.into(),
        logged,
        replayed,
        reproduced: why.is_none(),
        why,
    }
}

/// The comparison of `rec`'s replay with its log; empty when it replayed none.
pub fn replay_vs_log(rec: &RunRecord) -> Vec<ReplayedFigure> {
    let (Some(log), Some(main)) = (&rec.workload.log, rec.main_phase()) else {
        return Vec::new();
    };
    let speeds = rec.workload.options.contains_key("replay-speeds");
    let c = &main.client;
    let mut rows = vec![row(
        "requests",
        log.requests.to_string(),
        c.requests.to_string(),
        (c.requests < log.requests).then(|| {
            "part of the log was sent: -n as many as it holds (or --replay-timing) sends it whole"
                .to_string()
        }),
    )];
    if !log.statuses.is_empty() {
        rows.push(statuses(log, c));
    }
    if let (Some(logged), true) = (log.bytes_mean, c.requests > 0) {
        let replayed = c.bytes_received as f64 / c.requests as f64;
        let off = (replayed - logged).abs() > logged * BYTES_TOLERANCE + HEADER_ALLOWANCE;
        rows.push(row(
            "bytes per response",
            format!("{logged:.0}"),
            format!("{replayed:.0}"),
            off.then(|| {
                "the responses differ in size: the test copy's content is not production's"
                    .to_string()
            }),
        ));
    }
    if let Some(logged) = log.request_time_mean_s {
        rows.extend(time_row("response time", logged, main, speeds));
    }
    for (class, logged) in &log.class_request_time_mean_s {
        if let Some(phase) = rec
            .phases
            .iter()
            .find(|p| p.name == format!("class:{class}"))
        {
            rows.extend(time_row(
                &format!("response time, {class}"),
                *logged,
                phase,
                speeds,
            ));
        }
    }
    rows
}

/// Status shares, logged and replayed; protocols without statuses have none to compare.
fn statuses(
    log: &reqcost_record::LoggedTraffic,
    c: &reqcost_record::ClientStats,
) -> ReplayedFigure {
    let shares = |m: &std::collections::BTreeMap<String, u64>| {
        let total: u64 = m.values().sum();
        m.iter()
            .map(|(s, n)| (s.clone(), *n as f64 * 100.0 / total.max(1) as f64))
            .collect::<Vec<_>>()
    };
    let text = |shares: &[(String, f64)]| {
        shares
            .iter()
            .map(|(s, pct)| format!("{s}: {pct:.0} %"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let logged = shares(&log.statuses);
    if c.statuses.is_empty() {
        return row(
            "status mix",
            text(&logged),
            "none (the protocol has no status)".into(),
            None,
        );
    }
    let replayed = shares(&c.statuses);
    let share = |list: &[(String, f64)], s: &str| {
        list.iter().find(|(k, _)| k == s).map_or(0.0, |(_, p)| *p)
    };
    let moved: Vec<&str> = logged
        .iter()
        .chain(&replayed)
        .map(|(s, _)| s.as_str())
        .filter(|s| (share(&logged, s) - share(&replayed, s)).abs() > STATUS_TOLERANCE_PCT)
        .collect();
    let why = (!moved.is_empty()).then(|| {
        let mut moved = moved;
        moved.sort();
        moved.dedup();
        format!(
            "statuses {} differ: the test copy's content or configuration is not production's",
            moved.join(", ")
        )
    });
    row("status mix", text(&logged), text(&replayed), why)
}

/// Mean response time, logged and as the replay's clients saw it.
fn time_row(figure: &str, logged_s: f64, phase: &Phase, speeds: bool) -> Option<ReplayedFigure> {
    let replayed_s = phase.client.latency.mean_us / 1e6;
    if phase.client.ok == 0 {
        return None;
    }
    let off = (replayed_s - logged_s).abs() > logged_s * TIME_TOLERANCE && {
        // Under a millisecond apart, the difference is the log's resolution.
        (replayed_s - logged_s).abs() > 0.001
    };
    let why = off.then(|| {
        if speeds {
            "the server answers at another pace here (other machine, load or content)".to_string()
        } else {
            "the clients' speeds were not replayed (--replay-speeds), or the server answers at another pace here".to_string()
        }
    });
    Some(row(
        figure,
        format!("{:.1} ms", logged_s * 1e3),
        format!("{:.1} ms", replayed_s * 1e3),
        why,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_record::{ClientStats, LoggedTraffic};

    #[test]
    fn status_shares_that_moved_are_named() {
        let log = LoggedTraffic {
            requests: 100,
            statuses: [("200".into(), 90), ("404".into(), 10)].into(),
            ..LoggedTraffic::default()
        };
        let mut client = ClientStats::default();
        let gopher = statuses(&log, &client);
        assert!(gopher.reproduced, "{gopher:?}");
        assert_eq!(gopher.replayed, "none (the protocol has no status)");
        client.statuses = [("200".into(), 88), ("404".into(), 12)].into();
        assert!(statuses(&log, &client).reproduced);
        client.statuses = [("200".into(), 50), ("404".into(), 50)].into();
        let moved = statuses(&log, &client);
        assert_eq!(moved.logged, "200: 90 %, 404: 10 %");
        assert_eq!(
            moved.why.as_deref(),
            Some("statuses 200, 404 differ: the test copy's content or configuration is not production's")
        );
    }
}
