//! What a live window shows while it runs: a progress line every few seconds, and the figures
//! `--metrics` serves.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use reqcost_analysis::requests::{counts_as_request, KEY_CAP, OTHER};
use reqcost_probes::{Probes, RequestCounters};
use reqcost_record::RequestEvent;
use reqcost_report::live_metrics::BudgetGauges;
use reqcost_report::{fmt_duration_ns, fmt_duration_us};

use crate::metrics::MetricsFeed;

/// How often the progress line is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// What a live window does with each request event besides tallying it: the progress line,
/// and the figures `--metrics` serves, each when asked for.
pub struct Ticker {
    line: Option<ProgressLine>,
    metrics: Option<MetricsFeed>,
}

impl Ticker {
    /// None when there is nothing to do.
    pub fn new(line: Option<ProgressLine>, metrics: Option<MetricsFeed>) -> Option<Ticker> {
        (line.is_some() || metrics.is_some()).then_some(Ticker { line, metrics })
    }

    /// One event, of the `class` the phase's tally filed it under: the live line and the
    /// metrics name the record's class rows.
    pub fn add(&mut self, ev: &RequestEvent, class: &str) {
        if let Some(m) = &self.metrics {
            m.add(class, ev);
        }
        if let Some(line) = self.line.as_mut() {
            line.add(ev, class);
        }
    }

    /// The probes' budget as it stands: served with the metrics, and on the progress line.
    pub fn budget(&mut self, gauges: BudgetGauges) {
        if let Some(m) = &self.metrics {
            m.budget(gauges);
        }
        if let Some(line) = self.line.as_mut() {
            line.budget = Some(gauges);
        }
    }

    pub fn tick(&mut self, probes: &Probes) {
        if let Some(m) = &self.metrics {
            m.tick(probes);
        }
        if let Some(line) = self.line.as_mut() {
            line.tick(probes);
        }
    }
}

/// The progress line of a live window, like `top`'s: over the last few seconds, requests per
/// second, the tree's CPU per request, and the class that took the most of the CPU of the
/// requests that ended.
pub struct ProgressLine {
    since: Instant,
    counters: RequestCounters,
    requests: u64,
    class_cpu: HashMap<String, u64>,
    /// The probes' budget as it stands, with one.
    budget: Option<BudgetGauges>,
}

impl ProgressLine {
    /// Starts an interval at the probes' `counters`.
    pub fn new(counters: RequestCounters) -> ProgressLine {
        ProgressLine {
            since: Instant::now(),
            counters,
            requests: 0,
            class_cpu: HashMap::new(),
            budget: None,
        }
    }

    fn add(&mut self, ev: &RequestEvent, class: &str) {
        if !counts_as_request(ev, class) {
            return;
        }
        self.requests += ev.requests().max(1);
        if let Some(cpu) = self.class_cpu.get_mut(class) {
            *cpu += ev.cpu_ns;
            return;
        }
        let key = if self.class_cpu.len() < KEY_CAP {
            class
        } else {
            OTHER
        };
        *self.class_cpu.entry(key.to_string()).or_default() += ev.cpu_ns;
    }

    /// Prints the line when an interval is over, and starts the next.
    fn tick(&mut self, probes: &Probes) {
        let elapsed = self.since.elapsed();
        if elapsed < PROGRESS_EVERY {
            return;
        }
        let counters = probes.request_counters();
        let cpu_ns = counters.since(&self.counters).total_ns();
        eprintln!("{}", self.line(elapsed, cpu_ns));
        let budget = self.budget;
        *self = ProgressLine {
            budget,
            ..ProgressLine::new(counters)
        };
    }
    fn line(&self, elapsed: Duration, cpu_ns: u64) -> String {
        // With no request ended, a rate of 0 reads as an idle server while slow requests may
        // be spinning: say where the interval's CPU went instead.
        if self.requests == 0 {
            return format!(
                "live  no request ended in {:.1} s · server CPU {} over it (requests in flight, or none)",
                elapsed.as_secs_f64(),
                fmt_duration_ns(cpu_ns as f64)
            );
        }
        let rate = self.requests as f64 / elapsed.as_secs_f64();
        let per_request_us = cpu_ns as f64 / 1000.0 / self.requests as f64;
        let mut line = format!(
            "live  {rate:.0} req/s · CPU/request {}",
            fmt_duration_us(per_request_us)
        );
        // A request that ends now carries the CPU of its whole life, which may span many
        // intervals: its share is of the ended requests' CPU, never of this interval's.
        let ended: u64 = self.class_cpu.values().sum();
        let top = self.class_cpu.iter().max_by_key(|(_, cpu)| **cpu);
        if let Some((class, cpu)) = top.filter(|_| ended > 0) {
            let share = *cpu as f64 * 100.0 / ended as f64;
            line += &format!(" · top class {class} ({share:.0} % of the ended requests' CPU)");
        }
        if let Some(b) = &self.budget {
            line += &format!(
                " · probes on {:.0} % of the time, cost {:.1} % (budget {:.0} %)",
                b.probed * 100.0,
                b.cost * 100.0,
                b.budget * 100.0
            );
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_testkit::request_event;

    /// Slow requests that spun for many intervals end in this one: their class's share is of
    /// the ended requests' CPU (75 %), not of the interval's 10 ms (which would read 600 %).
    #[test]
    fn the_top_class_share_is_of_the_ended_requests_cpu() {
        let mut line = ProgressLine::new(RequestCounters::default());
        let big = reqcost_record::RequestEvent {
            cpu_ns: 30_000_000,
            bytes_in: 10,
            ..request_event("/big.txt\r\n", "127.0.0.1")
        };
        let small = reqcost_record::RequestEvent {
            cpu_ns: 10_000_000,
            bytes_in: 10,
            ..request_event("/small.txt\r\n", "127.0.0.1")
        };
        for (ev, class) in [
            (&big, "/big.txt"),
            (&big, "/big.txt"),
            (&small, "/small.txt"),
        ] {
            line.add(ev, class);
        }
        line.add(&small, "/small.txt");
        let text = line.line(Duration::from_secs(2), 10_000_000);
        assert!(
            text.ends_with(" · top class /big.txt (75 % of the ended requests' CPU)"),
            "{text}"
        );
    }

    /// An interval in which no request ended (slow requests spinning) says where its CPU went,
    /// not "0 req/s".
    #[test]
    fn an_interval_without_an_ended_request_names_its_cpu() {
        let line = ProgressLine::new(RequestCounters::default());
        assert_eq!(
            line.line(Duration::from_secs(2), 1_950_000_000),
            "live  no request ended in 2.0 s · server CPU 1.95 s over it (requests in flight, or none)"
        );
    }
}
