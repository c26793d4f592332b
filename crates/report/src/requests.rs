//! The per-request block of a phase (per-request accounting): requests as the server counted
//! them, the distribution of CPU per request, its cost by class, client and client speed, and
//! the costliest requests. Field meanings: docs/record.md (`requests`).

use std::fmt::Write;

use comfy_table::Cell;
use reqcost_analysis::document::RequestCosts;
use reqcost_analysis::requests;
use reqcost_record::{CostlyRequest, GroupCost, NsDistribution, IN_FLIGHT};

use crate::format::{fmt_bytes, fmt_count, fmt_duration_ns, indent, right, table};

/// Syscalls named per costly request.
const COSTLY_SYSCALLS: usize = 3;

/// The block of a phase whose per-request figures divide by `units`: the block's own count is
/// said as its own where it differs.
pub fn requests_section(r: &RequestCosts, units: f64) -> String {
    let mut out = String::from("  requests as the server served them (per-request accounting)\n");
    let own = if r.requests as f64 == units {
        String::new()
    } else {
        format!(" (this block divides by them; the phase's figures by its {units:.0})")
    };
    out.push_str(&counts_lines(r, &own));
    for (title, rows) in [
        ("by class", &r.by_class),
        ("by client", &r.by_client),
        (
            "by client speed (bytes out per second the connection was held)",
            &r.by_speed,
        ),
    ] {
        if !rows.is_empty() {
            let _ = writeln!(out, "    {title}");
            out.push_str(&indent(&group_table(rows), "    "));
        }
    }
    if !r.costliest.is_empty() {
        let _ = writeln!(out, "    costliest requests");
        for (n, c) in (1..).zip(&r.costliest) {
            let _ = writeln!(out, "      {n}. {}", costly(c));
        }
    }
    if r.classes_over_cap > 0 || r.clients_over_cap > 0 {
        let _ = writeln!(
            out,
            "    beyond {} distinct keys: {} requests' classes and {} requests' clients counted under (other)",
            r.key_cap, r.classes_over_cap, r.clients_over_cap
        );
    }
    out
}

/// The block's lines before its tables, `own` after the count: how many, the CPU per request
/// and who holds the CPU, and what is counted apart from requests (handshakes, set-up, calls).
pub(crate) fn counts_lines(r: &RequestCosts, own: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "    counted      {} requests{own} · {} connections closed · {} without a request · {} events dropped",
        r.requests, r.connections, r.no_request, r.events_dropped
    );
    if r.syscalls_unranked > 0 {
        let _ = writeln!(
            out,
            "    syscalls     {} counted on no syscall (the probes' table of them was full): top syscalls may miss that many",
            r.syscalls_unranked
        );
    }
    if let Some(note) = &r.in_flight {
        let _ = writeln!(out, "    in flight    {note}");
    }
    if r.requests > 0 {
        let _ = writeln!(
            out,
            "    CPU/request  {}",
            distribution(&r.cpu_per_request_ns)
        );
    }
    let _ = writeln!(out, "    CPU          {}", cpu_split(r));
    if let Some(note) = &r.unreliable {
        let _ = writeln!(out, "    note!        {note}");
    }
    if let Some((line, kinds)) = handshake_lines(r) {
        let _ = writeln!(out, "    TLS          {line}");
        if let Some(kinds) = kinds {
            let _ = writeln!(out, "                 {kinds}");
        }
    }
    if let Some(line) = setup_line(r) {
        let _ = writeln!(out, "    set-up       {line}");
    }
    if let Some(note) = &r.protocol {
        let _ = writeln!(out, "    count!       {note}");
    }
    if let Some(each) = r.upstream_call_cpu_ns {
        let _ = writeln!(
            out,
            "    calls        {} turns on connections the server opened to call an upstream, not requests: {} CPU each outside the request served",
            r.upstream_calls,
            fmt_duration_ns(each)
        );
    }
    out
}

pub(crate) fn distribution(d: &NsDistribution) -> String {
    let us = |ns: u64| fmt_duration_ns(ns as f64);
    format!(
        "p50 {} · p90 {} · p99 {} · max {} · mean {}",
        us(d.p50),
        us(d.p90),
        us(d.p99),
        us(d.max),
        fmt_duration_ns(d.mean)
    )
}

/// Attributed and unattributed shares of the tree's CPU, and what the finished requests hold.
pub(crate) fn cpu_split(r: &RequestCosts) -> String {
    let Some(cpu) = &r.cpu else {
        return "no CPU counted".into();
    };
    let made_of = &r.unattributed_made_of;
    let mut line = format!(
        "{} · attributed {:.1} % · unattributed {:.1} %{} · in requests that ended in the phase {:.1} %",
        fmt_duration_ns(cpu.total_ns as f64),
        cpu.attributed_pct,
        cpu.unattributed_pct,
        if made_of.is_empty() { String::new() } else { format!(" ({made_of})") },
        cpu.ended_pct
    );
    if r.in_flight_requests > 0 {
        let _ = write!(
            line,
            " · in requests still in flight {:.1} %",
            cpu.in_flight_pct
        );
    }
    line
}

pub(crate) fn group_table(rows: &[GroupCost]) -> String {
    let mut t = table();
    let with_clients = rows.iter().any(|g| !g.clients.is_empty());
    let mut header = vec![
        "", "requests", "CPU %", "CPU p50", "CPU p99", "syscalls", "in", "out",
    ];
    if with_clients {
        header.push("clients");
    }
    t.set_header(header);
    for g in rows {
        t.add_row(group_row(g, with_clients));
    }
    t.to_string()
}

/// One group's row; per-request columns are `-` for a group with no request (connections that
/// sent nothing), and such connections are counted beside the requests.
fn group_row(g: &GroupCost, with_clients: bool) -> Vec<Cell> {
    let has = g.requests > 0;
    let per = |v: String| if has { v } else { "-".into() };
    let us = |ns: u64| fmt_duration_ns(ns as f64);
    let mut row = vec![
        Cell::new(&g.name),
        right(requests::group_requests(g)),
        right(format!("{:.1}", g.cpu_share_pct)),
        right(per(us(g.cpu_per_request.p50))),
        right(per(us(g.cpu_per_request.p99))),
        right(per(fmt_count(g.syscalls_per_request))),
        right(per(fmt_bytes(g.bytes_in_per_request))),
        right(per(fmt_bytes(g.bytes_out_per_request))),
    ];
    if with_clients {
        row.push(Cell::new(g.clients.join(", ")));
    }
    row
}

pub(crate) fn costly(c: &CostlyRequest) -> String {
    let mut line = format!("{}  {}", fmt_duration_ns(c.cpu_ns as f64), c.request);
    if c.in_flight {
        let _ = write!(line, " {IN_FLIGHT}");
    }
    if c.class != c.request {
        let _ = write!(line, " (class {})", c.class);
    }
    let calls: Vec<String> = c
        .top_syscalls
        .iter()
        .take(COSTLY_SYSCALLS)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    let _ = write!(line, " from {}: {} syscalls", c.client, c.syscalls);
    if !calls.is_empty() {
        let _ = write!(line, " ({})", calls.join(", "));
    }
    let _ = write!(
        line,
        ", {} in, {} out",
        fmt_bytes(c.bytes_in as f64),
        fmt_bytes(c.bytes_out as f64)
    );
    if let Some(wall) = c.wall_ns {
        let so_far = if c.in_flight { " so far" } else { "" };
        let _ = write!(line, ", {} wall{so_far}", fmt_duration_ns(wall as f64));
    }
    // Its call chains: `--where request=ID` (docs/profile.md).
    if !c.id.is_empty() {
        let _ = write!(line, " [request {}]", c.id);
    }
    // An upstream hop's request: the front request it did the work of (docs/stack.md).
    if !c.caused_by.is_empty() {
        let class = match c.front_class.as_str() {
            "" => String::new(),
            class => format!("{class} "),
        };
        let _ = write!(line, " for front {class}[request {}]", c.caused_by);
    }
    line
}

/// The phase's TLS handshakes as every output shows them: `30 handshakes, not requests: 550 µs
/// CPU per handshake, 4.2 % of the CPU (in no class)`, then, where the TLS library told them
/// apart, `1 full: 2.73 ms CPU each · 29 resumed: 490 µs CPU each` (and how many were not told
/// apart). None without a handshake.
pub(crate) fn handshake_lines(c: &RequestCosts) -> Option<(String, Option<String>)> {
    let (Some(each), Some(pct)) = (c.tls_handshake_cpu_ns, c.tls_handshake_cpu_pct()) else {
        return None;
    };
    let line = format!(
        "{} handshakes, not requests: {} CPU per handshake, {:.1} % of the CPU (in no class)",
        c.tls_handshakes,
        fmt_duration_ns(each),
        pct
    );
    Some((line, handshake_kinds(c)))
}

/// A protocol's connection set-up as every output shows it: `2001 connection set-up turns, not
/// requests: 95 µs CPU each, 31.0 % of the CPU (in no class)`. None without any.
pub(crate) fn setup_line(c: &RequestCosts) -> Option<String> {
    let (Some(each), Some(pct)) = (c.setup_cpu_ns, c.setup_cpu_pct()) else {
        return None;
    };
    Some(format!(
        "{} connection set-up turns (startup, authentication, terminate), not requests: {} CPU each, {:.1} % of the CPU (in no class)",
        c.setup_turns,
        fmt_duration_ns(each),
        pct
    ))
}

fn handshake_kinds(c: &RequestCosts) -> Option<String> {
    if c.tls_full_handshakes == 0 && c.tls_resumed_handshakes == 0 {
        return None;
    }
    let kind = |n: u64, each_ns: Option<f64>, name: &str| match each_ns {
        Some(ns) if n > 0 => format!("{n} {name}: {} CPU each", fmt_duration_ns(ns)),
        _ => format!("0 {name}"),
    };
    let mut line = format!(
        "{} · {}",
        kind(c.tls_full_handshakes, c.tls_full_handshake_cpu_ns, "full"),
        kind(
            c.tls_resumed_handshakes,
            c.tls_resumed_handshake_cpu_ns,
            "resumed"
        )
    );
    let untold = c.tls_not_told_apart();
    if untold > 0 {
        line.push_str(&format!(" · {untold} not told apart"));
    }
    Some(line)
}
