//! Live figures for Prometheus: the counters `attach --metrics` serves, and their OpenMetrics
//! text exposition. Counters are cumulative since attach; the scraper computes the rates. The
//! measurement counts them (reqcost-measure's `metrics`); this only says them.

use std::collections::BTreeMap;
use std::fmt::Write;

/// The OpenMetrics media type the exposition is served as.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds (ns) of the per-request CPU histogram's buckets, `+Inf` beside them: from a
/// cheap static file (about 10 µs) to a request that burns seconds.
pub const CPU_BUCKETS_NS: [u64; 16] = [
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    1_000_000_000,
    2_500_000_000,
];

/// One class's counters since attach.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClassCounters {
    /// Events that carried a request (bytes in).
    pub requests: u64,
    /// Every event's CPU, with or without a request, as the tally's class rows count it.
    pub cpu_ns: u64,
    pub syscalls: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Requests per bucket of [`CPU_BUCKETS_NS`], not cumulative; the last is `+Inf`.
    pub cpu_buckets: [u64; CPU_BUCKETS_NS.len() + 1],
    /// The CPU of the requests the histogram counts.
    pub request_cpu_ns: u64,
}

/// What `attach --metrics` serves: per-class counters of one server.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveMetrics {
    /// The server's comm: the `service` label of every series.
    pub service: String,
    pub classes: BTreeMap<String, ClassCounters>,
    /// The tree's CPU while it served no connection.
    pub unattributed_cpu_ns: u64,
    /// Request events the ring buffer could not take.
    pub events_dropped: u64,
    /// `attach --budget`: the budget and what the probes achieved, from the first cycle's end.
    pub budget: Option<BudgetGauges>,
}

/// The probes' budget as it stands, all fractions (docs/metrics.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetGauges {
    pub budget: f64,
    /// The duty set for the next cycle.
    pub duty: f64,
    /// The share of the time probed since attach.
    pub probed: f64,
    /// The probes' cost over the server's CPU without it, since attach.
    pub cost: f64,
}

impl LiveMetrics {
    pub fn new(service: &str) -> LiveMetrics {
        LiveMetrics {
            service: service.to_string(),
            classes: BTreeMap::new(),
            unattributed_cpu_ns: 0,
            events_dropped: 0,
            budget: None,
        }
    }

    /// The OpenMetrics text exposition of every counter, `# EOF` last.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let service = escape(&self.service);
        let class_labels =
            |class: &str| format!("service=\"{service}\",class=\"{}\"", escape(class));
        for (family, value) in &CLASS_COUNTERS {
            family.write_metadata(&mut out, "counter");
            for (class, c) in &self.classes {
                let labels = class_labels(class);
                let _ = writeln!(
                    out,
                    "reqcost_{}_total{{{labels}}} {}",
                    family.name,
                    value(c)
                );
            }
        }
        REQUEST_CPU.write_metadata(&mut out, "histogram");
        for (class, c) in &self.classes {
            write_histogram(&mut out, &class_labels(class), c);
        }
        let totals = [
            (UNATTRIBUTED_CPU, seconds(self.unattributed_cpu_ns)),
            (DROPPED_EVENTS, self.events_dropped.to_string()),
        ];
        for (family, value) in totals {
            family.write_metadata(&mut out, "counter");
            let name = family.name;
            let _ = writeln!(out, "reqcost_{name}_total{{service=\"{service}\"}} {value}");
        }
        if let Some(b) = &self.budget {
            let gauges = [
                (PROBE_BUDGET, b.budget),
                (PROBE_DUTY, b.duty),
                (PROBED, b.probed),
                (PROBE_COST, b.cost),
            ];
            for (family, value) in gauges {
                family.write_metadata(&mut out, "gauge");
                let name = family.name;
                let _ = writeln!(out, "reqcost_{name}{{service=\"{service}\"}} {value}");
            }
        }
        out.push_str("# EOF\n");
        out
    }
}

/// A metric family: its name after `reqcost_`, its unit (empty for a count), its help text.
pub(crate) struct Family {
    pub name: &'static str,
    pub unit: &'static str,
    pub help: &'static str,
}

impl Family {
    /// The `# TYPE`, `# UNIT` and `# HELP` lines that precede the family's samples.
    pub(crate) fn write_metadata(&self, out: &mut String, kind: &str) {
        let name = self.name;
        let _ = writeln!(out, "# TYPE reqcost_{name} {kind}");
        if !self.unit.is_empty() {
            let _ = writeln!(out, "# UNIT reqcost_{name} {}", self.unit);
        }
        let _ = writeln!(out, "# HELP reqcost_{name} {}.", self.help);
    }
}

/// How a per-class counter reads a class's figures, as exposition text.
type ClassValue = fn(&ClassCounters) -> String;

const CLASS_COUNTERS: [(Family, ClassValue); 5] = [
    (
        Family {
            name: "requests",
            unit: "",
            help: "Requests the server served, counted on the server side",
        },
        |c| c.requests.to_string(),
    ),
    (
        Family {
            name: "cpu_seconds",
            unit: "seconds",
            help: "Server CPU time attributed to the class's connections",
        },
        |c| seconds(c.cpu_ns),
    ),
    (
        Family {
            name: "syscalls",
            unit: "",
            help: "Syscalls the server made while serving the class's requests",
        },
        |c| c.syscalls.to_string(),
    ),
    (
        Family {
            name: "received_bytes",
            unit: "bytes",
            help: "Bytes the server read for the class's requests",
        },
        |c| c.bytes_in.to_string(),
    ),
    (
        Family {
            name: "sent_bytes",
            unit: "bytes",
            help: "Bytes the server wrote for the class's requests",
        },
        |c| c.bytes_out.to_string(),
    ),
];

const REQUEST_CPU: Family = Family {
    name: "request_cpu_seconds",
    unit: "seconds",
    help: "Server CPU time per request",
};

const UNATTRIBUTED_CPU: Family = Family {
    name: "unattributed_cpu_seconds",
    unit: "seconds",
    help: "Server CPU time while it served no connection (start-up, accept, timers)",
};

const DROPPED_EVENTS: Family = Family {
    name: "dropped_events",
    unit: "",
    help: "Request events lost because the ring buffer was full",
};

const PROBE_BUDGET: Family = Family {
    name: "probe_budget_ratio",
    unit: "ratio",
    help: "The probes' cost budget (attach --budget), a fraction of the server's CPU",
};

const PROBE_DUTY: Family = Family {
    name: "probe_duty_ratio",
    unit: "ratio",
    help: "Share of each cycle the probes are attached, as the budget set it last",
};

const PROBED: Family = Family {
    name: "probed_ratio",
    unit: "ratio",
    help: "Share of the time since attach the probes were attached",
};

const PROBE_COST: Family = Family {
    name: "probe_cost_ratio",
    unit: "ratio",
    help: "The probes' cost to the server since attach over the server's CPU without it",
};

/// One class's cumulative `le` buckets, `+Inf` equal to `_count`, and `_sum`.
fn write_histogram(out: &mut String, labels: &str, c: &ClassCounters) {
    let bounds = CPU_BUCKETS_NS
        .iter()
        .map(|&ns| seconds(ns))
        .chain(["+Inf".to_string()]);
    let mut cumulative = 0;
    for (le, count) in bounds.zip(c.cpu_buckets) {
        cumulative += count;
        let _ = writeln!(
            out,
            "reqcost_request_cpu_seconds_bucket{{{labels},le=\"{le}\"}} {cumulative}"
        );
    }
    let _ = writeln!(
        out,
        "reqcost_request_cpu_seconds_count{{{labels}}} {cumulative}"
    );
    let _ = writeln!(
        out,
        "reqcost_request_cpu_seconds_sum{{{labels}}} {}",
        seconds(c.request_cpu_ns)
    );
}

fn seconds(ns: u64) -> String {
    (ns as f64 / 1e9).to_string()
}

/// A label value as the exposition quotes it.
pub(crate) fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A class's counters of `requests` that took `cpu_us` (µs) in all: 10 syscalls, a 16-byte
    /// request and a 2000-byte response each.
    fn counters(cpu_us: u64, requests: u64) -> ClassCounters {
        ClassCounters {
            requests,
            cpu_ns: cpu_us * 1000,
            syscalls: 10 * requests,
            bytes_in: 16 * requests,
            bytes_out: 2000 * requests,
            request_cpu_ns: cpu_us * 1000,
            ..ClassCounters::default()
        }
    }

    fn lines(text: &str, prefix: &str) -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .map(String::from)
            .collect()
    }

    #[test]
    fn counters_per_class_with_units_and_labels() {
        let mut m = LiveMetrics::new("nginx");
        m.classes.insert("GET /".into(), counters(50, 2));
        m.classes.insert("GET /big".into(), counters(3000, 1));
        m.classes.insert("(no request)".into(), counters(5, 0));
        m.unattributed_cpu_ns = 1_500_000_000;
        m.events_dropped = 2;
        let text = m.render();
        assert_eq!(
            lines(&text, "reqcost_requests_total"),
            [
                "reqcost_requests_total{service=\"nginx\",class=\"(no request)\"} 0",
                "reqcost_requests_total{service=\"nginx\",class=\"GET /\"} 2",
                "reqcost_requests_total{service=\"nginx\",class=\"GET /big\"} 1",
            ]
        );
        assert!(
            text.contains("reqcost_cpu_seconds_total{service=\"nginx\",class=\"GET /\"} 0.00005\n")
        );
        assert!(text.contains(
            "reqcost_cpu_seconds_total{service=\"nginx\",class=\"(no request)\"} 0.000005\n"
        ));
        assert!(text.contains("reqcost_syscalls_total{service=\"nginx\",class=\"GET /\"} 20\n"));
        assert!(
            text.contains("reqcost_received_bytes_total{service=\"nginx\",class=\"GET /\"} 32\n")
        );
        assert!(
            text.contains("reqcost_sent_bytes_total{service=\"nginx\",class=\"GET /big\"} 2000\n")
        );
        assert!(text.contains("reqcost_unattributed_cpu_seconds_total{service=\"nginx\"} 1.5\n"));
        assert!(text.contains("reqcost_dropped_events_total{service=\"nginx\"} 2\n"));
        assert!(text.contains(
            "# TYPE reqcost_cpu_seconds counter\n# UNIT reqcost_cpu_seconds seconds\n# HELP reqcost_cpu_seconds "
        ));
        assert!(
            text.contains("# TYPE reqcost_sent_bytes counter\n# UNIT reqcost_sent_bytes bytes\n")
        );
        assert!(text.ends_with("\n# EOF\n"));
    }

    #[test]
    fn the_histogram_is_cumulative_and_ends_at_the_count() {
        let mut m = LiveMetrics::new("gopher");
        // 5 µs, 20 µs twice, 400 µs and 5 s.
        let mut buckets = [0; CPU_BUCKETS_NS.len() + 1];
        (buckets[0], buckets[1], buckets[5], buckets[16]) = (1, 2, 1, 1);
        let c = ClassCounters {
            cpu_buckets: buckets,
            ..counters(5_000_445, 5)
        };
        m.classes.insert("/".into(), c);
        let text = m.render();
        let buckets = lines(&text, "reqcost_request_cpu_seconds_bucket");
        assert_eq!(buckets.len(), CPU_BUCKETS_NS.len() + 1);
        let labels = "service=\"gopher\",class=\"/\"";
        for expected in [
            format!("reqcost_request_cpu_seconds_bucket{{{labels},le=\"0.00001\"}} 1"),
            format!("reqcost_request_cpu_seconds_bucket{{{labels},le=\"0.000025\"}} 3"),
            format!("reqcost_request_cpu_seconds_bucket{{{labels},le=\"0.0005\"}} 4"),
            format!("reqcost_request_cpu_seconds_bucket{{{labels},le=\"2.5\"}} 4"),
            format!("reqcost_request_cpu_seconds_bucket{{{labels},le=\"+Inf\"}} 5"),
            format!("reqcost_request_cpu_seconds_count{{{labels}}} 5"),
            format!("reqcost_request_cpu_seconds_sum{{{labels}}} 5.000445"),
        ] {
            assert!(
                text.contains(&format!("{expected}\n")),
                "{expected} in\n{text}"
            );
        }
        assert!(text.contains("# TYPE reqcost_request_cpu_seconds histogram\n"));
    }

    #[test]
    fn labels_are_escaped() {
        let mut m = LiveMetrics::new("my \"srv\"");
        m.classes.insert("/c\\d".into(), counters(10, 1));
        assert_eq!(
            lines(&m.render(), "reqcost_requests_total"),
            ["reqcost_requests_total{service=\"my \\\"srv\\\"\",class=\"/c\\\\d\"} 1"]
        );
        assert_eq!(escape("a\\b\nc"), "a\\\\b\\nc");
    }

    /// The budget's gauges appear once a cycle has ended, as typed gauges with their unit.
    #[test]
    fn the_budget_is_four_gauges() {
        let mut m = LiveMetrics::new("nginx");
        assert!(!m.render().contains("probe"));
        m.budget = Some(BudgetGauges {
            budget: 0.03,
            duty: 0.075,
            probed: 0.07,
            cost: 0.029,
        });
        let text = m.render();
        assert_eq!(
            lines(&text, "reqcost_probe"),
            [
                "reqcost_probe_budget_ratio{service=\"nginx\"} 0.03",
                "reqcost_probe_duty_ratio{service=\"nginx\"} 0.075",
                "reqcost_probed_ratio{service=\"nginx\"} 0.07",
                "reqcost_probe_cost_ratio{service=\"nginx\"} 0.029",
            ]
        );
        assert!(
            text.contains("# TYPE reqcost_probed_ratio gauge\n# UNIT reqcost_probed_ratio ratio\n")
        );
    }
}
