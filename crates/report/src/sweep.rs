//! The sweep table: cost per request at each concurrency, and whether it grows.

use std::fmt::Write;

use reqcost_analysis::metrics::metric;
use reqcost_analysis::sweep::Growth;
use reqcost_record::Phase;

use crate::format::{fmt_metric_of, right, table};

/// (column header, metric shown in it).
const COLUMNS: [(&str, &str); 6] = [
    ("CPU/req", "CPU"),
    ("user", "CPU user"),
    ("system", "CPU system"),
    ("throughput", "throughput"),
    ("p50", "latency p50"),
    ("p99", "latency p99"),
];

/// The sweep table: one row per concurrency.
pub fn sweep(points: &[(u32, &Phase)], growth: Option<&Growth>) -> String {
    let mut t = table();
    let mut header = vec!["connections"];
    header.extend(COLUMNS.iter().map(|(h, _)| *h));
    t.set_header(header);
    for (c, p) in points {
        let mut row = vec![right(c)];
        row.extend(
            COLUMNS
                .iter()
                .map(|(_, name)| right(fmt_metric_of(metric(name), p))),
        );
        t.add_row(row);
    }
    let mut out = format!("{t}\n");
    if let Some(g) = growth {
        growth_lines(&mut out, g);
    }
    out
}

fn growth_lines(out: &mut String, g: &Growth) {
    if !g.grows {
        let _ = writeln!(
            out,
            "cost per request does not grow with connections ({:.2}x from {} to {})",
            g.cpu_ratio, g.from_concurrency, g.to_concurrency
        );
        return;
    }
    let _ = writeln!(
        out,
        "FLAG cost per request grows with connections: CPU/request is {:.2}x at {} connections what it is at {}",
        g.cpu_ratio, g.to_concurrency, g.from_concurrency
    );
    if let Some(s) = g.scan_ratio {
        let _ = writeln!(
            out,
            "     and each request makes the server hand the kernel {s:.1}x more fds to watch (seeds/004: select/poll over every connection)"
        );
    }
}
