//! The stack block of a phase (docs/stack.md): per front class its cost across the local
//! servers its requests passed through and by hop, the costliest front requests with their
//! hops, each hop's share that no front request holds, and each upstream hop's own requests.

use std::fmt::Write;

use reqcost_analysis::document::RequestCosts;
use reqcost_analysis::stack_costs::{
    ClassStack, CostlyStack, HopFigures, StackCosts, UpstreamCode,
};

use crate::format::{fmt_count, fmt_duration_ns, indent};
use crate::profile_classes::functions;
use crate::requests::{costly, counts_lines, group_table};

pub fn stack_section(s: &StackCosts) -> String {
    let mut out = String::from("  the stack: the front's requests followed into local upstreams\n");
    let hops: Vec<String> = s
        .hops
        .iter()
        .map(|h| match h.via.as_str() {
            "" => format!("{} {} (front)", h.hop, h.name),
            via => format!("{} {} via {via}", h.hop, h.name),
        })
        .collect();
    let _ = writeln!(out, "    hops         {}", hops.join(" · "));
    let _ = writeln!(
        out,
        "    CPU          {} in {} trees · {:.1} % for the front's requests, the rest for none (below)",
        fmt_duration_ns(s.cpu_ns as f64),
        s.hops.len(),
        s.for_front_pct()
    );
    if !s.classes.is_empty() {
        let _ = writeln!(out, "    per front request, across the stack = by hop");
        for c in &s.classes {
            let _ = writeln!(out, "      {}", class_line(c, s));
            if let Some(code) = &c.dearest_code {
                let _ = writeln!(
                    out,
                    "        {}'s code for it (self %, callers nearest first): {} samples",
                    s.name(c.dearest_hop),
                    code.samples
                );
                let mut chains = String::new();
                functions(&mut chains, code);
                out.push_str(&indent(&chains, "    "));
            }
        }
    }
    if !s.costliest.is_empty() {
        let _ = writeln!(out, "    costliest front requests across the stack");
        for (n, c) in (1..).zip(&s.costliest) {
            let _ = writeln!(out, "      {n}. {}", costly_line(c, s));
        }
    }
    if !s.code.is_empty() {
        out.push_str("    upstream requests' own call chains (self %, callers nearest first)\n");
        for c in &s.code {
            out.push_str(&upstream_code_line(c));
            let mut chains = String::new();
            functions(&mut chains, &c.code);
            out.push_str(&indent(&chains, "  "));
        }
    }
    let _ = writeln!(
        out,
        "    not for a front request (each tree's CPU no front request holds)"
    );
    for h in &s.hops {
        let _ = writeln!(out, "      {}", unattributed_line(h));
    }
    for h in &s.hops {
        if let Some(r) = &h.requests {
            out.push_str(&hop_requests(h, r));
        }
    }
    out
}

/// Costly requests of a hop shown: each names the front request it served.
const HOP_COSTLY: usize = 3;

/// An upstream hop's own requests, as the phase's block shows the front's but its classes and
/// its costliest only: its clients are the hops in front of it.
fn hop_requests(h: &HopFigures, r: &RequestCosts) -> String {
    let mut out = format!("    hop {} {}: its own requests\n", h.hop, h.name);
    out.push_str(&indent(&counts_lines(r, ""), "  "));
    if !r.by_class.is_empty() {
        out.push_str("      by class\n");
        out.push_str(&indent(&group_table(&r.by_class), "      "));
    }
    if !r.costliest.is_empty() {
        out.push_str("      costliest requests\n");
        for (n, c) in (1..).zip(r.costliest.iter().take(HOP_COSTLY)) {
            let _ = writeln!(out, "        {n}. {}", costly(c));
        }
    }
    out
}

/// `GET /orders  1.90 ms = nginx 90.0 µs + gunicorn 1.40 ms (1 request) + postgres 410 µs (3
/// requests: SELECT orders, ...) · dearest: gunicorn`.
fn class_line(c: &ClassStack, s: &StackCosts) -> String {
    format!(
        "{}  {} = {} · dearest: {} ({} requests)",
        c.class,
        fmt_duration_ns(c.cpu_per_request_ns),
        parts_text(c),
        s.name(c.dearest_hop),
        c.requests
    )
}

/// A class's parts per request, by hop: `nginx 90.0 µs + gunicorn 1.40 ms (1 request) + ...`.
pub(crate) fn parts_text(c: &ClassStack) -> String {
    let parts: Vec<String> = c
        .parts
        .iter()
        .map(|p| {
            let cpu = format!("{} {}", p.name, fmt_duration_ns(p.cpu_per_request_ns));
            if p.hop == 0 {
                return cpu;
            }
            let n = fmt_count(p.requests_per_request);
            let noun = if n == "1" { "request" } else { "requests" };
            let classes: Vec<&str> = p.classes.iter().map(|c| c.name.as_str()).collect();
            match classes.is_empty() {
                true => format!("{cpu} ({n} {noun})"),
                false => format!("{cpu} ({n} {noun}: {})", classes.join(", ")),
            }
        })
        .collect();
    parts.join(" + ")
}

fn costly_line(c: &CostlyStack, s: &StackCosts) -> String {
    let parts: Vec<String> = c
        .parts
        .iter()
        .map(|&(hop, cpu, requests)| match hop {
            0 => format!("{} {}", s.name(hop), fmt_duration_ns(cpu as f64)),
            _ => format!(
                "{} {} ({requests})",
                s.name(hop),
                fmt_duration_ns(cpu as f64)
            ),
        })
        .collect();
    format!(
        "{} from {}: {} = {} [request {}]",
        c.class,
        c.client,
        fmt_duration_ns(c.cpu_ns as f64),
        parts.join(" + "),
        c.id
    )
}

/// `postgres SELECT orders for front GET /orders [request 300/1/4, front 100/1/0]: 9.00 ms,
/// 9 samples`.
fn upstream_code_line(c: &UpstreamCode) -> String {
    let front = match c.front_class.as_str() {
        "" => String::new(),
        class => format!(" for front {class}"),
    };
    format!(
        "      {} {}{front} [request {}, front {}]: {}, {} samples\n",
        c.name,
        c.class,
        c.code.name,
        c.caused_by,
        fmt_duration_ns(c.cpu_ns as f64),
        c.code.samples
    )
}

/// `postgres  120 µs of 1.80 ms (6.7 %): its own work 50.0 µs, for front requests the phase
/// did not tally 25.0 µs`.
pub(crate) fn unattributed_line(h: &HopFigures) -> String {
    let of = h
        .cpu_ns
        .map(|c| format!(" of {}", fmt_duration_ns(c as f64)))
        .unwrap_or_default();
    let mut line = format!(
        "{} {}{of} ({:.1} %)",
        h.name,
        fmt_duration_ns(h.not_for_front_cpu_ns as f64),
        h.not_for_front_pct()
    );
    let mut made_of = Vec::new();
    if h.own_cpu_ns > 0 {
        made_of.push(format!(
            "its own work {}",
            fmt_duration_ns(h.own_cpu_ns as f64)
        ));
    }
    if h.unlinked_cpu_ns > 0 {
        made_of.push(format!(
            "for front requests the phase did not tally {}",
            fmt_duration_ns(h.unlinked_cpu_ns as f64)
        ));
    }
    if !made_of.is_empty() {
        let _ = write!(line, ": {}", made_of.join(", "));
    }
    line
}
