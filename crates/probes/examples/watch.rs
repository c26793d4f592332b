//! Attaches the probes to a running process tree for a while and prints what they counted as
//! JSON: `cargo run -p reqcost-probes --example watch -- [--stats] PID [SECONDS [EVERY]]`.
//! With --stats, the kernel's BPF run-time statistics are on while it watches.
//!
//! With EVERY, it also reads the probes every EVERY seconds and prints one line per read on
//! stderr (seconds elapsed, calls counted so far, its own resident memory, the kernel memory of
//! its maps), which shows whether memory grows over a long run.

use std::time::{Duration, Instant};

fn number(args: &[String], i: usize, name: &str, default: f64) -> f64 {
    match args.get(i).map(|s| s.parse::<f64>()) {
        None => default,
        Some(Ok(v)) if v > 0.0 => v,
        _ => {
            eprintln!("watch: {name} must be a positive number, got {:?}", args[i]);
            std::process::exit(2);
        }
    }
}

/// A `Name:  N kB` line of /proc/self/status.
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Kernel memory charged to this process's BPF maps (the `memlock` of each map fd), in KiB.
fn maps_kib() -> u64 {
    let Ok(fds) = std::fs::read_dir("/proc/self/fdinfo") else {
        return 0;
    };
    fds.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter(|info| info.contains("map_type:"))
        .filter_map(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("memlock:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum::<u64>()
        / 1024
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let run_time_stats = args.first().is_some_and(|a| a == "--stats");
    if run_time_stats {
        args.remove(0);
    }
    let Some(pid) = args.first().and_then(|p| p.parse::<u32>().ok()) else {
        eprintln!(
            "usage: watch [--stats] PID [SECONDS [EVERY]]  (PID: the root of the process tree to watch)"
        );
        std::process::exit(2);
    };
    let seconds = number(&args, 1, "SECONDS", 1.0);
    let every = args.get(2).map(|_| number(&args, 2, "EVERY", 1.0));
    let options = reqcost_probes::ProbeOptions {
        run_time_stats,
        ..Default::default()
    };
    let probes = match reqcost_probes::Probes::attach_with(pid, &options) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("watch: {e}");
            std::process::exit(1);
        }
    };
    // Scripts wait for this line before starting their load.
    eprintln!("watch: attached to {pid}");
    let start = Instant::now();
    let before = probes.read();
    let end = Duration::from_secs_f64(seconds);
    if let Some(every) = every {
        while start.elapsed() < end {
            std::thread::sleep(Duration::from_secs_f64(every).min(end - start.elapsed().min(end)));
            let calls: u64 = probes.read().syscalls.iter().map(|s| s.count).sum();
            eprintln!(
                "watch: t={:.0}s calls={calls} rss_kib={} maps_kib={}",
                start.elapsed().as_secs_f64(),
                status_kib("VmRSS:"),
                maps_kib()
            );
        }
    } else {
        std::thread::sleep(end);
    }
    let k = probes.read().since(&before);
    println!(
        "{}",
        serde_json::to_string_pretty(&k).expect("stats serialize")
    );
}
