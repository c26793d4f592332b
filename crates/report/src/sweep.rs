//! The sweep table: cost per unit of work (request, MiB, ...) at each concurrency, and whether
//! it grows.

use std::fmt::Write;

use reqcost_analysis::metrics::metric;
use reqcost_analysis::sweep::Growth;
use reqcost_record::{Phase, Unit};

use crate::format::{fmt_bytes, fmt_count, fmt_metric_of, right, table};

/// (column header, metric shown in it); the first is CPU per unit.
const COLUMNS: [(&str, &str); 6] = [
    ("CPU", "CPU"),
    ("user", "CPU user"),
    ("system", "CPU system"),
    ("throughput", "throughput"),
    ("p50", "latency p50"),
    ("p99", "latency p99"),
];

/// The sweep table: one row per concurrency.
pub fn sweep(points: &[(u32, &Phase)], growth: Option<&Growth>) -> String {
    let mut t = table();
    let unit = points.first().map_or(Unit::Request, |(_, p)| p.unit);
    let udp = points.iter().any(|(_, p)| udp_of(p).is_some());
    let mut header = vec!["connections".to_string()];
    header.extend(COLUMNS.iter().map(|(h, _)| h.to_string()));
    header[1] = format!("CPU/{}", unit.name());
    if udp {
        header.push(format!("UDP datagrams/{}", unit.name()));
        header.push(format!("UDP bytes/{}", unit.name()));
    }
    t.set_header(header);
    for (c, p) in points {
        let mut row = vec![right(c)];
        row.extend(
            COLUMNS
                .iter()
                .map(|(_, name)| right(fmt_metric_of(metric(name), p))),
        );
        if udp {
            let (datagrams, bytes) = udp_of(p).unwrap_or((f64::NAN, f64::NAN));
            row.push(right(fmt_count(datagrams)));
            row.push(right(fmt_bytes(bytes)));
        }
        t.add_row(row);
    }
    let mut out = format!("{t}\n");
    if unit != Unit::Request {
        let _ = writeln!(out, "per {}", unit.label());
    }
    if let Some(g) = growth {
        growth_lines(&mut out, g, unit.name());
    }
    out
}

/// UDP datagrams and bytes, sent and received, per unit of work, when the server moved any.
fn udp_of(p: &Phase) -> Option<(f64, f64)> {
    let u = &p.server.kernel.as_ref()?.udp;
    let units = p.units();
    (u.datagrams_sent + u.datagrams_received > 0 && units > 0.0).then(|| {
        (
            (u.datagrams_sent + u.datagrams_received) as f64 / units,
            (u.bytes_sent + u.bytes_received) as f64 / units,
        )
    })
}

fn growth_lines(out: &mut String, g: &Growth, unit: &str) {
    if !g.grows {
        let _ = writeln!(
            out,
            "cost per {unit} does not grow with connections ({:.2}x from {} to {})",
            g.cpu_ratio, g.from_concurrency, g.to_concurrency
        );
        return;
    }
    let _ = writeln!(
        out,
        "FLAG cost per {unit} grows with connections: CPU/{unit} is {:.2}x at {} connections what it is at {}",
        g.cpu_ratio, g.to_concurrency, g.from_concurrency
    );
    if let Some(s) = g.scan_ratio {
        let _ = writeln!(
            out,
            "     and each {unit} makes the server hand the kernel {s:.1}x more fds to watch (seeds/004: select/poll over every connection)"
        );
    }
}
