//! Runs a workload alone, without measuring a server: for benchmarking the load generator
//! itself against other load generators (see bench/loadgen-vs-wrk.sh).
//!
//! `cargo run --release -p reqcost-workload --example loadgen -- --url http://127.0.0.1:8080/ -n 100000 -c 8`

use std::sync::atomic::AtomicBool;

use clap::Parser;
use reqcost_workload::WorkloadArgs;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    workload: WorkloadArgs,
}

fn main() {
    let cli = Cli::parse();
    let plan = match cli.workload.plan() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
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
