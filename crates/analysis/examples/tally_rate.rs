//! How many request events per second `RequestTally` takes on this machine, and the memory it
//! holds at its key cap. Synthetic HTTP events: 5000 paths and 3000 clients (both beyond the
//! 1024 cap), CPU from 5 µs to 50 ms, client speeds across every bucket.
//!
//! `cargo run --release -p reqcost-analysis --example tally_rate -- [EVENTS] [--class]
//! [--follow-hops]`: with `--follow-hops`, each front request is remembered for the upstream
//! requests of a stack (docs/stack.md), though none comes: the join's cost on the front.

use std::net::Ipv4Addr;
use std::time::Instant;

use regex::Regex;
use reqcost_analysis::requests::{RequestTally, TallyOptions};
use reqcost_record::RequestEvent;
use reqcost_testkit::request_event;

/// Distinct events generated; the run cycles through them.
const POOL: usize = 100_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let events: u64 = args
        .iter()
        .find_map(|a| a.parse().ok())
        .unwrap_or(5_000_000);
    let classes = if args.iter().any(|a| a == "--class") {
        ["api=^/api/", "static=\\.(css|js|png)$", "pages=^/p/"]
            .iter()
            .map(|spec| {
                let (name, re) = spec.split_once('=').expect("NAME=REGEX");
                (name.to_string(), Regex::new(re).expect("valid regex"))
            })
            .collect()
    } else {
        Vec::new()
    };
    let pool = synthetic_events();
    let before = rss_kib("VmRSS:");
    let mut tally = RequestTally::new(TallyOptions {
        protocol: "http".into(),
        classes,
        follow_hops: args.iter().any(|a| a == "--follow-hops"),
        ..TallyOptions::default()
    });
    let start = Instant::now();
    for ev in pool.iter().cycle().take(events as usize) {
        tally.add(ev);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let held = rss_kib("VmRSS:") - before;
    let stats = tally.finish(1, 1, 0);
    println!(
        "{events} events in {elapsed:.3} s: {:.0} events/s (beyond the key cap: {} by class, {} by client)",
        events as f64 / elapsed,
        stats.classes_over_cap,
        stats.clients_over_cap
    );
    println!("the tally holds {held} KiB of RSS at its key cap");
}

fn synthetic_events() -> Vec<RequestEvent> {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    (0..POOL)
        .map(|_| {
            let path = match rng.below(4) {
                0 => format!("/api/v1/items?id={}", rng.below(5000)),
                1 => format!("/static/{}.css", rng.below(5000)),
                _ => format!("/p/{}", rng.below(5000)),
            };
            let head = format!("GET {path} HTTP/1.1\r\nHost: example.org\r\n");
            let ip = Ipv4Addr::from(0x0a00_0000 + rng.below(3000) as u32);
            // Log-uniform from 5 µs to 50 ms.
            let cpu_ns = (5_000.0 * 10f64.powf(rng.below(4000) as f64 / 1000.0)) as u64;
            let bytes_out = 200 + rng.below(1_000_000);
            let wall_ns = 10_000 + rng.below(5_000_000_000);
            RequestEvent {
                conn_id: rng.next(),
                local_port: 80,
                cpu_ns,
                syscalls: 6 + rng.below(50) as u32,
                top_syscalls: vec![("write".into(), 3), ("read".into(), 2)],
                bytes_out,
                first_in_ns: 1_000_000_000,
                last_out_ns: 1_000_000_000 + wall_ns,
                end_ns: 1_000_000_000 + wall_ns,
                last_ns: 0,
                closed: rng.below(8) == 0,
                ..request_event(&head, &ip.to_string())
            }
        })
        .collect()
}

/// A deterministic generator, so that runs are comparable.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A `/proc/self/status` line's value in KiB.
fn rss_kib(field: &str) -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
