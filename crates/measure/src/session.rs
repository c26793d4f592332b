//! A measurement from its start to its record.

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqcost_record::{
    Outcome, Phase, Pinning, RunRecord, Target, TargetMode, Workload, FORMAT, FORMAT_VERSION,
};
use reqcost_server::{machine_info, Server};

use super::instruments::Instruments;

/// A measurement from its start to its record: the server, what watches it, where reqcost ran.
pub(crate) struct Session {
    pub started: SystemTime,
    pub pinning: Pinning,
    pub server: Server,
    pub instruments: Instruments,
}

impl Session {
    /// Stops a launched server (`command` is its command line; None when attached) and the
    /// sampler, and puts everything measured into one record.
    pub fn record(
        mut self,
        command: Option<Vec<String>>,
        mut workload: Workload,
        phases: Vec<Phase>,
        outcome: Outcome,
    ) -> RunRecord {
        self.instruments.note_tls();
        let hops = self
            .instruments
            .stack
            .as_ref()
            .map(|s| s.hops())
            .unwrap_or_default();
        if let Some(stack) = &self.instruments.stack {
            self.instruments.notes.extend(stack.notes(&phases));
        }
        let comm = self.server.comm();
        let exit = self.server.stop(Duration::from_secs(5));
        // The upstream hops' costliest too, so that a slow query's own chains show.
        let costliest: HashSet<&str> = phases
            .iter()
            .flat_map(|p| {
                let hops = p.hops.iter().filter_map(|h| h.requests.as_ref());
                p.requests.iter().chain(hops)
            })
            .flat_map(|r| r.costliest.iter().map(|c| c.id.as_str()))
            .collect();
        let profile = self.instruments.sampler.map(|s| {
            let (mut p, client) = s.finish();
            self.instruments.labels.name(&mut p, &costliest);
            if let Some(load) = workload.load.as_mut() {
                load.profile = client;
            }
            p
        });
        RunRecord {
            format: FORMAT.into(),
            version: FORMAT_VERSION,
            id: record_id(self.started, &comm),
            reqcost_version: env!("CARGO_PKG_VERSION").into(),
            started_unix_s: self
                .started
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64(),
            target: Target {
                mode: if command.is_some() {
                    TargetMode::Launch
                } else {
                    TargetMode::Attach
                },
                command,
                pid: self.server.pid(),
                comm,
                exit,
            },
            workload,
            machine: machine_info(),
            pinning: self.pinning,
            phases,
            profile,
            outcome,
            notes: self.instruments.notes,
            hops,
        }
    }
}

/// `YYYYMMDD-HHMMSS-comm` in UTC: sortable, and says what was measured.
fn record_id(t: SystemTime, comm: &str) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let name: String = comm
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}-{}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        if name.is_empty() { "server" } else { &name }
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (era * 400 + yoe + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_ids_are_dated_and_safe() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        assert_eq!(record_id(t, "my server"), "20261118-110640-my_server");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
    }
}
