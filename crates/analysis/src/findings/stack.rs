//! The catalog run on each tree of a stack (docs/stack.md): the front's record as it is, and
//! each upstream hop's own figures as a record of their own, so that a finding is carried by
//! the hop it occurs in and says so.

use reqcost_record::{ClientStats, PerRequest, Phase, RequestStats, RunRecord, ServerTotals};

use super::{diagnose, Finding};

/// Every finding of the front and, when the record followed upstream hops, of each hop, each
/// naming its tree (`server`); the front's first, then each hop's, each ranked as
/// [`diagnose`] ranks them (shares of different trees' CPU do not rank against each other).
/// A hop's record holds its CPU, its requests and what the probes count of its tree (its
/// syscalls, processes and page faults), not the profile nor the other kernel figures, which
/// are the front's: the rules that need those find nothing on a hop.
pub fn diagnose_stack(rec: &RunRecord) -> Vec<Finding> {
    let mut findings = diagnose(rec);
    if rec.hops.is_empty() {
        return findings;
    }
    for f in &mut findings {
        f.server = format!("{} (hop 0)", rec.target.comm);
    }
    for hop in &rec.hops {
        let server = format!("{} (hop {})", hop.comm, hop.hop);
        findings.extend(
            diagnose(&hop_record(rec, hop.hop))
                .into_iter()
                .map(|f| Finding {
                    server: server.clone(),
                    ..f
                }),
        );
    }
    findings
}

/// Hop `hop`'s figures as a record of their own: each phase's tree CPU, kernel counts and
/// requests are the hop's, its requests are its own count.
fn hop_record(rec: &RunRecord, hop: u8) -> RunRecord {
    let info = rec.hops.iter().find(|h| h.hop == hop);
    let phases = rec
        .phases
        .iter()
        .filter_map(|p| {
            let h = p.hops.iter().find(|h| h.hop == hop)?;
            let server = ServerTotals {
                cpu: h.cpu.clone(),
                kernel: h.kernel.clone(),
                ..ServerTotals::default()
            };
            let served = h.requests.as_ref().map_or(0, |r| r.requests);
            // A hop's client is the server in front of it on loopback, and its requests' speed
            // (bytes out over serve time) is its own work's: a 10 ms query answering 70 bytes
            // reads as a client under 16 KiB/s. So no client speed is judged on a hop.
            let requests = h.requests.clone().map(|r| RequestStats {
                by_speed: Vec::new(),
                ..r
            });
            Some(Phase {
                name: p.name.clone(),
                client_model: p.client_model.clone(),
                client: ClientStats {
                    requests: served,
                    ok: served,
                    elapsed_s: p.client.elapsed_s,
                    ..ClientStats::default()
                },
                per_request: PerRequest::from_totals(&server, served as f64),
                server,
                requests,
                other_traffic: None,
                cpu_windows: None,
                missing: Default::default(),
                unit: p.unit,
                hops: Vec::new(),
            })
        })
        .collect();
    // Field by field: the front's profile is not the hop's, and may be large.
    let mut out = RunRecord {
        format: rec.format.clone(),
        version: rec.version,
        id: rec.id.clone(),
        reqcost_version: rec.reqcost_version.clone(),
        started_unix_s: rec.started_unix_s,
        target: rec.target.clone(),
        workload: rec.workload.clone(),
        machine: rec.machine.clone(),
        pinning: rec.pinning.clone(),
        phases,
        profile: None,
        outcome: rec.outcome.clone(),
        notes: rec.notes.clone(),
        hops: Vec::new(),
    };
    if let Some(info) = info {
        out.target.pid = info.pid;
        out.target.comm = info.comm.clone();
    }
    out
}
