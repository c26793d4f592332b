//! Attaches the probes with attribution on or off to a running process tree for a while,
//! draining finished requests every 100 ms, and prints one line: `events dropped drain_ns`
//! (requests drained, requests lost to a full ring buffer, time spent draining and decoding):
//! `cargo run -p reqcost-probes --example requests -- PID SECONDS on|off [tls|no-tls]` (the
//! uprobes on the tree's TLS libraries: on by default).

use std::time::{Duration, Instant};

use reqcost_probes::{ProbeOptions, Probes};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(pid), Some(seconds), Some(attribute)) = (
        args.first().and_then(|p| p.parse::<u32>().ok()),
        args.get(1).and_then(|s| s.parse::<f64>().ok()),
        args.get(2).and_then(|a| match a.as_str() {
            "on" => Some(true),
            "off" => Some(false),
            _ => None,
        }),
    ) else {
        eprintln!("usage: requests PID SECONDS on|off [tls|no-tls]");
        std::process::exit(2);
    };
    let tls = args.get(3).is_none_or(|t| t != "no-tls");
    let probes = match Probes::attach_with(
        pid,
        &ProbeOptions {
            attribute,
            tls,
            ..ProbeOptions::default()
        },
    ) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("requests: {e}");
            std::process::exit(1);
        }
    };
    // Scripts wait for this line before starting their load.
    eprintln!("requests: attached to {pid}");
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let (mut events, mut drain) = (0u64, Duration::ZERO);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
        let start = Instant::now();
        events += probes
            .drain_requests(&mut |e| {
                std::hint::black_box(e);
            })
            .unwrap_or_else(|e| panic!("{e}"));
        drain += start.elapsed();
    }
    let dropped = probes.request_counters().dropped;
    println!("{events} {dropped} {}", drain.as_nanos());
}
