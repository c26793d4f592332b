//! Runs a workload alone, without measuring a server: for benchmarking the load generator
//! itself against other load generators (see bench/loadgen-vs-wrk.sh).
//!
//! `cargo run --release -p reqcost-workload --example loadgen -- --url http://127.0.0.1:8080/ -n 100000 -c 8`
//!
//! Options: `--url URL`, `-n N`, `-c N`, `--threads N`, `--duration D`, `--rate N/s`,
//! `--warmup N`, as `reqcost run` reads them; everything else keeps its default.

use std::sync::atomic::AtomicBool;

use reqcost_workload::{units, WorkloadOptions};

fn main() {
    let options = parse(std::env::args().skip(1)).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2);
    });
    let plan = options.plan().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2);
    });
    let stop = AtomicBool::new(false);
    for phase in plan.phases() {
        let s = plan.run(&phase, &stop, &|_| {});
        println!(
            "{}: {} requests, {} ok, errors {:?}, {} connections, {:.3} s, {:.0} req/s, p50 {:.1} us, p99 {:.1} us, max {:.1} us, received {} B, statuses {:?}, skipped {:?}",
            phase.name,
            s.requests,
            s.ok,
            s.errors,
            s.connections,
            s.elapsed_s,
            s.throughput_rps,
            s.latency.p50_us,
            s.latency.p99_us,
            s.latency.max_us,
            s.bytes_received,
            s.statuses,
            s.skipped,
        );
    }
}

/// The few options a benchmark varies, each followed by its value.
fn parse(mut args: impl Iterator<Item = String>) -> Result<WorkloadOptions, String> {
    let mut options = WorkloadOptions::default();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = || format!("{flag}: cannot use \"{value}\"");
        match flag.as_str() {
            "--url" => options.url = value.clone(),
            "-n" => options.count = value.parse().map_err(|_| bad())?,
            "-c" => options.concurrency = value.parse().map_err(|_| bad())?,
            "--threads" => options.threads = Some(value.parse().map_err(|_| bad())?),
            "--warmup" => options.warmup = Some(value.parse().map_err(|_| bad())?),
            "--duration" => options.duration = Some(units::parse_duration(&value).ok_or_else(bad)?),
            "--rate" => options.rate = Some(units::parse_rate(&value).ok_or_else(bad)?),
            _ => {
                return Err(format!(
                    "unknown option {flag} (see the example's doc comment)"
                ))
            }
        }
    }
    Ok(options)
}
