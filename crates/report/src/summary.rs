use std::fmt::Write;

use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, CellAlignment, Table};
use reqcost_record::{Outcome, Phase, RunRecord, TargetMode};

use reqcost_analysis::findings::diagnose;

use crate::findings::findings_section;
use crate::format::{fmt_count, fmt_duration_us};
use crate::kernel::kernel_section;
use crate::requests::requests_section;
use crate::stacks::profile_section;

/// The terminal summary of a run, as `run` prints it and `report` reprints it.
pub fn summary(rec: &RunRecord) -> String {
    let mut out = String::new();
    let status = match &rec.outcome {
        Outcome::Completed => "completed".to_string(),
        Outcome::ServerDied { detail } => format!("PARTIAL: server died ({detail})"),
        Outcome::Interrupted => "PARTIAL: interrupted".to_string(),
        Outcome::Failed { detail } => format!("FAILED: {detail}"),
    };
    let _ = writeln!(out, "reqcost run {} · {status}", rec.id);
    let target = match (&rec.target.mode, &rec.target.command) {
        (TargetMode::Launch, Some(cmd)) => format!("{} (pid {})", cmd.join(" "), rec.target.pid),
        _ => format!("{} (pid {}, attached)", rec.target.comm, rec.target.pid),
    };
    let _ = writeln!(out, "  server    {target}");
    if let Some(exit) = &rec.target.exit {
        let _ = writeln!(out, "  ended     {exit}");
    }
    let w = &rec.workload;
    let mut load = format!("{} · {} connection(s)", w.url, w.concurrency);
    if let Some(f) = &w.requests_file {
        let _ = write!(load, " · requests from {f}");
    }
    let _ = writeln!(out, "  workload  {load}");
    let pin = &rec.pinning;
    let pinning = if pin.enabled {
        let list = |c: &[u32]| c.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let server = if pin.server_cpus.is_empty() {
            "server not pinned".to_string()
        } else {
            format!("server on CPU {}", list(&pin.server_cpus))
        };
        format!("{server}, load generator on CPU {}", list(&pin.client_cpus))
    } else {
        "off".to_string()
    };
    let _ = writeln!(out, "  pinning   {pinning}");
    if let Some(note) = &pin.note {
        let _ = writeln!(out, "            ({note})");
    }
    let _ = writeln!(
        out,
        "  machine   {} · {} · {} CPUs",
        rec.machine.hostname, rec.machine.kernel, rec.machine.cpus
    );

    for phase in &rec.phases {
        out.push('\n');
        phase_block(&mut out, phase);
    }
    if rec.phases.len() > 1 {
        let columns: Vec<(String, &Phase)> =
            rec.phases.iter().map(|p| (p.name.clone(), p)).collect();
        out.push('\n');
        out.push_str(&cost_table(&columns));
        out.push('\n');
    }
    if let Some(profile) = &rec.profile {
        // The sampler also ran through the unmeasured warm-up.
        let requests =
            rec.workload.warmup_requests + rec.phases.iter().map(|p| p.client.ok).sum::<u64>();
        out.push('\n');
        out.push_str(&profile_section(profile, requests));
    }
    out.push('\n');
    out.push_str(&findings_section(&diagnose(rec)));
    if !rec.notes.is_empty() {
        out.push_str("\nnotes\n");
        for n in &rec.notes {
            let _ = writeln!(out, "  - {n}");
        }
    }
    out
}

fn phase_block(out: &mut String, p: &Phase) {
    let c = &p.client;
    let model = p.client_model.as_deref().unwrap_or("unlimited clients");
    let _ = writeln!(out, "phase {} ({model})", p.name);
    let mut requests = format!(
        "{} ok · {} errors · {:.0} req/s over {:.2} s",
        c.ok,
        c.error_count(),
        c.throughput_rps,
        c.elapsed_s
    );
    if !c.errors.is_empty() {
        let kinds: Vec<String> = c.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = write!(requests, " ({})", kinds.join(", "));
    }
    let _ = writeln!(out, "  requests     {requests}");
    if let Some(resumed) = c.tls_resumed {
        let _ = writeln!(
            out,
            "  tls          {resumed} of {} connections resumed a session",
            c.connections
        );
    }
    if !c.skipped.is_empty() {
        let kinds: Vec<String> = c.skipped.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(out, "  skipped      {}", kinds.join(", "));
    }
    if c.ok > 0 {
        let l = &c.latency;
        let _ = writeln!(
            out,
            "  latency      p50 {} · p90 {} · p99 {} · p99.9 {} · max {}",
            fmt_duration_us(l.p50_us),
            fmt_duration_us(l.p90_us),
            fmt_duration_us(l.p99_us),
            fmt_duration_us(l.p999_us),
            fmt_duration_us(l.max_us)
        );
    }
    let r = &p.per_request;
    let _ = write!(out, "  per request  CPU ");
    match (r.cpu_total_us, r.cpu_user_us, r.cpu_system_us) {
        (Some(t), Some(u), Some(s)) => {
            let _ = writeln!(
                out,
                "{} (user {}, system {})",
                fmt_duration_us(t),
                fmt_duration_us(u),
                fmt_duration_us(s)
            );
        }
        _ => {
            let reason = p
                .missing
                .get("cpu")
                .map(String::as_str)
                .unwrap_or("no successful requests");
            let _ = writeln!(out, "not measured: {reason}");
        }
    }
    let mut calls = Vec::new();
    if let Some(v) = r.read_syscalls {
        calls.push(format!("read calls {}", fmt_count(v)));
    }
    if let Some(v) = r.write_syscalls {
        calls.push(format!("write calls {}", fmt_count(v)));
    }
    if let Some(v) = r.context_switches {
        calls.push(format!("context switches {}", fmt_count(v)));
    }
    if !calls.is_empty() {
        let _ = writeln!(out, "               {}", calls.join(" · "));
        if p.server.kernel.is_none() {
            // /proc/PID/io counts read(2)/write(2)-family calls only: a server using
            // send/recv on its sockets would look as if it wrote nothing.
            let _ = writeln!(
                out,
                "               (read/write from /proc/PID/io: socket send*/recv* calls are not counted there)"
            );
        }
    }
    if let Some(k) = &p.server.kernel {
        out.push_str(&kernel_section(k, c.ok));
    }
    if let Some(r) = &p.requests {
        out.push_str(&requests_section(r));
    }
    for (field, reason) in &p.missing {
        if field != "cpu" {
            let _ = writeln!(out, "  not measured {field}: {reason}");
        }
    }
}

/// The phases of several runs side by side, each column named after its server (and phase,
/// beyond main).
pub fn side_by_side(records: &[RunRecord]) -> String {
    let columns: Vec<(String, &Phase)> = records
        .iter()
        .flat_map(|r| {
            r.phases.iter().map(|p| {
                let name = if p.name == "main" {
                    r.target.comm.clone()
                } else {
                    format!("{} {}", r.target.comm, p.name)
                };
                (name, p)
            })
        })
        .collect();
    cost_table(&columns)
}

/// Phases side by side, so a slow-client or per-class phase reads against the main one.
fn cost_table(columns: &[(String, &Phase)]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    let mut header = vec![Cell::new("per request")];
    header.extend(columns.iter().map(|(name, _)| Cell::new(name)));
    t.set_header(header);
    fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
        v.map(f).unwrap_or_else(|| "-".into())
    }
    type Row = (&'static str, fn(&Phase) -> String);
    let rows: [Row; 5] = [
        ("requests ok", |p| p.client.ok.to_string()),
        ("CPU", |p| opt(p.per_request.cpu_total_us, fmt_duration_us)),
        ("CPU system", |p| {
            opt(p.per_request.cpu_system_us, fmt_duration_us)
        }),
        ("write calls", |p| {
            opt(p.per_request.write_syscalls, fmt_count)
        }),
        ("latency p50", |p| fmt_duration_us(p.client.latency.p50_us)),
    ];
    for (name, f) in rows.iter() {
        let mut row = vec![Cell::new(name)];
        row.extend(
            columns
                .iter()
                .map(|(_, p)| Cell::new(f(p)).set_alignment(CellAlignment::Right)),
        );
        t.add_row(row);
    }
    t.to_string()
}
