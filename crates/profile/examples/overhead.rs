//! Benchmark driver for bench/profile-overhead.sh.
//!
//! `overhead pairs PID URL SECONDS REPS`: server CPU per request (schedstat time of PID's tree
//! divided by the requests wrk completed) with and without sampling, interleaved (off/on,
//! on/off, ...), then the paired on/off ratio with a 95 % confidence interval.
//!
//! `overhead spin REPS`: the same for a CPU-bound child on CPU 1 doing fixed work (its own CPU time),
//! which isolates the cost of taking samples from everything a server does around them.
//!
//! `overhead finish PID URL SECONDS`: samples SECONDS of load, then times `Sampler::finish`
//! (draining, unwinding leftovers, symbolization) and reports the profile's size, the sampler
//! thread's CPU time and peak RSS.

use std::process::Command;
use std::time::Instant;

use reqcost_profile::{SampleOptions, Sampler};

/// On-CPU nanoseconds of `root` and its descendants, all threads.
fn tree_cpu_ns(root: u32) -> u64 {
    let mut children: Vec<(u32, u32)> = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
        {
            children.push((ppid, pid));
        }
    }
    let mut todo = vec![root];
    let mut total = 0;
    while let Some(pid) = todo.pop() {
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for t in tasks.flatten() {
                let path = t.path().join("schedstat");
                if let Some(ns) = std::fs::read_to_string(path)
                    .ok()
                    .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                {
                    total += ns;
                }
            }
        }
        todo.extend(children.iter().filter(|(p, _)| *p == pid).map(|(_, c)| *c));
    }
    total
}

/// On-CPU time of this process's sampler thread.
fn sampler_thread_cpu_ns() -> u64 {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.trim() == "reqcost-sampler")
        })
        .filter_map(|t| {
            std::fs::read_to_string(t.path().join("schedstat"))
                .ok()?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Runs wrk with one connection and returns the requests it completed.
fn wrk(url: &str, seconds: u64) -> u64 {
    let out = Command::new("wrk")
        .args(["-t1", "-c1", &format!("-d{seconds}s"), url])
        .output()
        .expect("run wrk (apt-get install wrk)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && !text.contains("Non-2xx"),
        "wrk failed:\n{text}"
    );
    text.lines()
        .find(|l| l.contains("requests in"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no request count in wrk output:\n{text}"))
}

/// Two-sided 95 % Student t quantile for `df` degrees of freedom.
fn t95(df: usize) -> f64 {
    const T: [f64; 20] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    ];
    T.get(df.wrapping_sub(1)).copied().unwrap_or(1.96)
}

fn cpu_per_request(pid: u32, url: &str, seconds: u64, sample: bool) -> f64 {
    let before = tree_cpu_ns(pid);
    let sampler =
        sample.then(|| Sampler::start(pid, SampleOptions::default()).expect("start sampler"));
    let requests = wrk(url, seconds);
    let after = tree_cpu_ns(pid);
    // Symbolization runs in reqcost, after the measured window.
    if let Some(s) = sampler {
        s.finish();
    }
    (after - before) as f64 / 1000.0 / requests as f64
}

/// Mean and 95 % confidence half-width of paired ratios.
fn summarize(what: &str, ratios: &[f64]) {
    let n = ratios.len() as f64;
    let mean = ratios.iter().sum::<f64>() / n;
    let sd = (ratios.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let half = t95(ratios.len() - 1) * sd / n.sqrt();
    println!(
        "{what}: {mean:.4} (95% CI {:.4} .. {:.4}, {} pairs)",
        mean - half,
        mean + half,
        ratios.len()
    );
}

/// Runs `measure(sampled)` in interleaved pairs (off/on, then on/off, ...) and prints each
/// pair and the ratio's mean and confidence interval.
fn pairs(reps: usize, what: &str, mut measure: impl FnMut(bool) -> f64) {
    let mut ratios = Vec::new();
    println!("rep\toff\ton\tratio");
    for rep in 0..reps {
        let (off, on) = if rep % 2 == 0 {
            let off = measure(false);
            (off, measure(true))
        } else {
            let on = measure(true);
            (measure(false), on)
        };
        println!("{rep}\t{off:.3}\t{on:.3}\t{:.4}", on / off);
        ratios.push(on / off);
    }
    summarize(what, &ratios);
}

/// Fixed CPU-bound work; prints the CPU seconds it took.
fn spin_child() {
    let mut x: u64 = 0;
    for i in 0..3_000_000_000u64 {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    std::hint::black_box(x);
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime with a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    println!("{}", ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9);
}

fn spin_seconds(sample: bool) -> f64 {
    // On the CPU the servers get; the sampler stays on this one.
    let exe = std::env::current_exe().expect("own path");
    let child = Command::new("taskset")
        .args(["-c", "1"])
        .arg(exe)
        .arg("spin-child")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn spin child");
    let sampler = sample
        .then(|| Sampler::start(child.id(), SampleOptions::default()).expect("start sampler"));
    let out = child.wait_with_output().expect("spin child");
    if let Some(s) = sampler {
        s.finish();
    }
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("spin child output")
}

fn finish_time(pid: u32, url: &str, seconds: u64) {
    let sampler = Sampler::start(pid, SampleOptions::default()).expect("start sampler");
    let requests = wrk(url, seconds);
    let reader_ms = sampler_thread_cpu_ns() as f64 / 1e6;
    let t = Instant::now();
    let (p, _) = sampler.finish();
    let elapsed = t.elapsed();
    let hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_string())
        })
        .unwrap_or_default();
    println!(
        "{seconds} s profile: {requests} requests, {} samples, {} lost, {} distinct chains, {} frames; finish() took {:.2} s; sampler thread CPU {reader_ms:.0} ms ({:.2}% of one CPU); peak RSS {hwm} kB",
        p.samples,
        p.lost,
        p.stacks.len(),
        p.frames.len(),
        elapsed.as_secs_f64(),
        reader_ms / 10.0 / seconds as f64
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: overhead (pairs PID URL SECONDS REPS | finish PID URL SECONDS | spin REPS)";
    let arg = |i: usize| {
        args.get(i)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("{usage}"))
    };
    let num = |i: usize| arg(i).parse::<u64>().unwrap_or_else(|_| panic!("{usage}"));
    match arg(1) {
        "pairs" => {
            let (pid, url, secs) = (num(2) as u32, arg(3), num(4));
            println!("# server CPU per request, µs");
            pairs(
                num(5) as usize,
                "sampled/unsampled server CPU per request",
                |s| cpu_per_request(pid, url, secs, s),
            );
        }
        "finish" => finish_time(num(2) as u32, arg(3), num(4)),
        "spin" => {
            println!("# CPU seconds for fixed work");
            pairs(
                num(2) as usize,
                "sampled/unsampled CPU for fixed work",
                spin_seconds,
            );
        }
        "spin-child" => spin_child(),
        _ => panic!("{usage}"),
    }
}
