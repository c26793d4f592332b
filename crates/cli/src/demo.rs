//! `reqcost demo`: the testbed's stories, measured on this machine.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use reqcost_analysis::document::Analysis;
use reqcost_analysis::phase_metrics::{cpu_percent_of_core, fds_scanned_per_request};
use reqcost_measure::{self as measure, Collect, ExternalLoad, Load, MeasureOptions, TargetSpec};
use reqcost_record::{RunRecord, Unit};
use reqcost_report::fmt_duration_us;
use reqcost_server::{free_loopback_port, LaunchSpec, Server};
use reqcost_workload::background::{self, Reader, FAST};
use reqcost_workload::WorkloadOptions;

use crate::args::DemoArgs;
use crate::print::outln;
use crate::records::save_run;
use crate::Failure;

/// The testbed directory: `REQCOST_TESTBED`, else `testbed/` in the working directory, else
/// the source tree this binary was built from.
pub fn testbed_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("REQCOST_TESTBED") {
        return PathBuf::from(dir);
    }
    let cwd = PathBuf::from("testbed");
    if cwd.join("Makefile").exists() {
        return cwd;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testbed")
}

/// Builds the testbed servers (make is incremental, so this is cheap once built).
pub fn build_testbed(dir: &Path) -> Result<(), Failure> {
    let status = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(dir)
        .status()
        .map_err(|e| Failure::run(format!("cannot run make to build {}: {e} (install make and a C compiler: scripts/bootstrap)", dir.display())))?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure::run(format!(
            "building the testbed in {} failed ({status}); run `make -C {}` to see why",
            dir.display(),
            dir.display()
        )))
    }
}

fn free_port() -> Result<u16, Failure> {
    free_loopback_port().map_err(|e| Failure::run(format!("no free loopback port: {e}")))
}

/// The command line of testbed server `server` on `port`.
fn testbed_command(dir: &Path, server: &str, port: u16) -> Vec<String> {
    vec![
        dir.join("build").join(server).display().to_string(),
        "--port".into(),
        port.to_string(),
        "--root".into(),
        dir.join("content").display().to_string(),
    ]
}

/// Measures a gopher workload on `selector` of `requests` requests, 2 connections, against
/// `target`.
fn measure_gopher(
    target: TargetSpec,
    port: u16,
    selector: &str,
    requests: u64,
    options: &MeasureOptions,
) -> Result<RunRecord, Failure> {
    let plan = WorkloadOptions {
        url: format!("gopher://127.0.0.1:{port}/{selector}"),
        count: requests,
        concurrency: 2,
        warmup: matches!(target, TargetSpec::Attach(_)).then_some(0),
        ..Default::default()
    }
    .plan()
    .map_err(Failure::run)?;
    Collect {
        load: &Load::Engine(Box::new(plan)),
        target,
        options,
        progress: true,
    }
    .run()
    .map_err(Failure::from)
}

/// Measures one testbed server with a gopher workload on `selector` and saves its record
/// under `out_dir`.
fn measure_testbed_server(
    dir: &Path,
    server: &str,
    selector: &str,
    requests: u64,
    out_dir: &Path,
) -> Result<RunRecord, Failure> {
    let port = free_port()?;
    let command = testbed_command(dir, server, port);
    let options = MeasureOptions::default();
    let record = measure_gopher(
        TargetSpec::Launch(command),
        port,
        selector,
        requests,
        &options,
    )?;
    save_run(record, out_dir, "", server)
}

/// One seed story: a pathology server against its clean twin on the same content.
struct Story {
    seed: &'static str,
    told: &'static str,
    pathology: &'static str,
    twin: &'static str,
    selector: &'static str,
}

const STORIES: [Story; 3] = [
    Story {
        seed: "seeds/001",
        told: "A gopher server burns 17 minutes of CPU where a TLS server serving the same \
               content burns 45 seconds. Same 100-line menu, two servers:",
        pathology: "small-writes",
        twin: "clean",
        selector: "",
    },
    Story {
        seed: "seeds/002",
        told: "After buffering, still 5x the CPU: a loop polls the kernel's send queue until the \
               client has read everything. Invisible with fast loopback clients, so reqcost \
               follows the main phase with slow clients:",
        pathology: "busy-wait",
        twin: "clean",
        selector: "",
    },
    Story {
        seed: "seeds/003",
        told: "memcpy tops the profile, \"but it's not clear where all the memcpy calls are \
               happening\". A 200 KB file, binaries without frame pointers:",
        pathology: "copy-heavy",
        twin: "clean",
        selector: "9/200k.bin",
    },
];

pub fn demo(args: &DemoArgs) -> Result<(), Failure> {
    let dir = testbed_dir();
    build_testbed(&dir)?;
    for story in &STORIES {
        outln!("━━ {} ━━", story.seed);
        outln!("{}\n", textwrap(story.told, 96));
        let records = [story.twin, story.pathology]
            .into_iter()
            .map(|server| {
                measure_testbed_server(&dir, server, story.selector, args.requests, &args.out_dir)
            })
            .collect::<Result<Vec<_>, _>>()?;
        outln!("{}", reqcost_report::side_by_side(&records));
        let findings = reqcost_analysis::findings::diagnose(&records[1]);
        outln!(
            "reqcost's findings for {}:\n{}",
            story.pathology,
            reqcost_report::findings_section(
                &findings,
                &reqcost_analysis::findings::unevaluated(&records[1])
            )
        );
    }
    live_and_replayed(&dir, &args.out_dir)?;
    select_and_epoll(&dir, &args.out_dir)?;
    outln!(
        "Full summaries: reqcost report {}/<record>.json (records listed above).",
        args.out_dir.display()
    );
    Ok(())
}

const SEED_000: &str = "Replaying 332 logged requests against a test copy of the server gave \
    half the CPU production had spent on them, and profiles of the copy could not say why. The \
    difference is in the clients: production's are slow, a replay's are not. A testbed server \
    (busy-wait) under live traffic from clients that are not reqcost, 300 fast requests and 30 \
    read at 64 KiB/s, watched by `reqcost attach`; then the log of that traffic (time, client, \
    bytes, request time) replayed against the same server (`reqcost run --pid`), plainly and \
    with --replay-speeds:";

/// How long the live window of seeds/000 lasts: the live traffic takes under 2 s.
const LIVE_WINDOW: Duration = Duration::from_secs(4);

/// seeds/000: the same server under live mixed traffic (measured by `attach`), and under two
/// replays of its log: plain and at the logged speeds, side by side, and why they differ.
fn live_and_replayed(dir: &Path, out_dir: &Path) -> Result<(), Failure> {
    outln!("━━ seeds/000 ━━");
    outln!("{}\n", textwrap(SEED_000, 96));
    let port = free_port()?;
    let mut server = Server::launch(&LaunchSpec {
        command: testbed_command(dir, "busy-wait", port),
        cpus: None,
        log_path: std::env::temp_dir().join(format!("reqcost-demo-{port}.log")),
        cgroup_name: format!("reqcost-demo-{port}"),
    })
    .map_err(Failure::run)?;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    server
        .wait_until_accepting(addr, Duration::from_secs(10))
        .map_err(Failure::run)?;
    let (live, log) = under_live_traffic(server.pid(), port)?;
    let live = save_run(live, out_dir, "", "live traffic")?;
    let log_path = out_dir.join("seeds-000-live.log");
    std::fs::write(&log_path, log.join("\n") + "\n")
        .map_err(|e| Failure::run(format!("cannot write {}: {e}", log_path.display())))?;
    let options = MeasureOptions {
        slow_phase: false,
        ..MeasureOptions::default()
    };
    let mut replays = Vec::new();
    for (name, replay_speeds) in [("plain replay", false), ("replay at logged speeds", true)] {
        let plan = WorkloadOptions {
            url: format!("gopher://127.0.0.1:{port}/"),
            requests: Some(log_path.clone()),
            log_format: Some(background::LOG_FORMAT.into()),
            count: log.len().max(1) as u64,
            // Two connections, as live had two slow readers at a time: the busy-wait server
            // spins while any reader is behind.
            concurrency: 2,
            warmup: Some(0),
            replay_speeds,
            ..Default::default()
        }
        .plan()
        .map_err(Failure::run)?;
        let record = Collect {
            load: &Load::Engine(Box::new(plan)),
            target: TargetSpec::Attach(server.pid()),
            options: &options,
            progress: true,
        }
        .run()?;
        replays.push(save_run(record, out_dir, "", name)?);
    }
    server.stop(Duration::from_secs(2));
    let [plain, faithful] = <[RunRecord; 2]>::try_from(replays)
        .map_err(|_| Failure::run("seeds/000: a replay is missing"))?;
    // The replays' main phases named as their columns should read.
    let column = |record: &RunRecord, name: &str| {
        let mut shown = record.clone();
        for phase in shown.phases.iter_mut().filter(|p| p.name == "main") {
            phase.name = name.into();
        }
        shown
    };
    outln!(
        "{}",
        reqcost_report::side_by_side(&[
            live.clone(),
            column(&plain, "plain replay"),
            column(&faithful, "logged speeds"),
        ])
    );
    outln!("{}", why_they_differ(&live, &plain, &faithful));
    Ok(())
}

/// `attach` for [`LIVE_WINDOW`] while the background client sends 300 fast requests and 30
/// read at 64 KiB/s (two readers in turn), started once the window is open; the record and the
/// traffic's log.
fn under_live_traffic(pid: u32, port: u16) -> Result<(RunRecord, Vec<String>), Failure> {
    let slow = Reader {
        source: Ipv4Addr::new(127, 0, 0, 2),
        bytes_per_s: Some(64 * 1024),
    };
    let mut threads = vec![vec![FAST; 300]];
    threads.extend(vec![vec![slow; 15]; 2]);
    let opened = AtomicBool::new(false);
    let never = AtomicBool::new(false);
    thread::scope(|s| {
        let traffic = s.spawn(|| {
            while !opened.load(Ordering::Acquire) {
                thread::sleep(Duration::from_millis(10));
            }
            background::traffic_logged(port, threads, &never)
        });
        let live = measure::watch_for(pid, LIVE_WINDOW, &opened);
        // A window that never opened leaves the traffic waiting: let it through to an
        // answer-less end (the server may be gone).
        opened.store(true, Ordering::Release);
        let log = traffic.join().unwrap_or_default();
        live.map(|record| (record, log)).map_err(Failure::from)
    })
}

/// The live and replayed CPU per request, and the per-speed and per-client figures of the live
/// window that account for the difference.
fn why_they_differ(live: &RunRecord, plain: &RunRecord, faithful: &RunRecord) -> String {
    let per_request = |r: &RunRecord| r.main_phase()?.per_request.cpu_total_us;
    let served = live.main_phase().and_then(|p| p.requests.as_ref());
    let (Some(live_us), Some(plain_us), Some(faithful_us), Some(served)) = (
        per_request(live),
        per_request(plain),
        per_request(faithful),
        served,
    ) else {
        return "Why they differ: a figure is missing from a record (see the notes above).".into();
    };
    let ratio = |us: f64| us / live_us.max(f64::MIN_POSITIVE);
    let said = format!(
        "Why they differ: live, the server spent {} of CPU per request; replayed plainly, {} \
         ({:.0} % of live); replayed at the logged speeds, {} ({:.0} % of live). The live \
         requests by client speed, and by client:",
        fmt_duration_us(live_us),
        fmt_duration_us(plain_us),
        ratio(plain_us) * 100.0,
        fmt_duration_us(faithful_us),
        ratio(faithful_us) * 100.0,
    );
    let mut text = textwrap(&said, 96) + "\n";
    for row in served.by_speed.iter().chain(&served.by_client) {
        text += &format!(
            "  {:<18} {:>6} requests · {:>9} CPU each · {:>5.1} % of the server's CPU\n",
            row.name,
            row.requests,
            fmt_duration_us(row.cpu_per_request.mean / 1000.0),
            row.cpu_share_pct
        );
    }
    text += &textwrap(
        "The slow readers (127.0.0.2) are few of the requests and much of the CPU: the server \
         spends CPU while each one drains its response (here seeds/002's loop polling the send \
         queue). A plain replay over loopback reads every response at once and never pays that, \
         which is the half of production's CPU seeds/000's replay could not find. The log knows \
         each client's speed (bytes over request time): `--replay-speeds` reads each response \
         at it, from one loopback address per logged client, and the server pays again what it \
         paid live.",
        96,
    );
    text + "\n"
}

const SEED_004: &str = "A QUIC server sends 100 MB to each of 5, 10, 15 clients: its CPU per MiB \
    grows with the connections, and perf shows select() and the kernel's network stack on top. \
    The testbed's UDP bulk server does the same (one socket per connection, each window of \
    datagrams released by the client's acknowledgement), once with select() over every socket \
    and once with epoll, each swept at 5, 10 and 15 connections of 4 MiB:";

/// Connection counts of the seeds/004 sweep.
const SEED_004_LEVELS: [u32; 3] = [5, 10, 15];

/// seeds/004: the UDP bulk pair swept by the testbed's client; CPU and fds scanned per MiB side
/// by side, the select server's kernel split at the highest level, and why.
fn select_and_epoll(dir: &Path, out_dir: &Path) -> Result<(), Failure> {
    outln!("━━ seeds/004 ━━");
    outln!("{}\n", textwrap(SEED_004, 96));
    let servers = ["udp-bulk-epoll", "udp-bulk-select"];
    let mut sweeps = Vec::new();
    for server in servers {
        let mut records = Vec::new();
        for c in SEED_004_LEVELS {
            records.push(measure_udp_bulk(dir, server, c, out_dir)?);
        }
        sweeps.push(records);
    }
    outln!("connections   CPU/MiB epoll   CPU/MiB select   fds scanned/MiB epoll   select");
    for (i, c) in SEED_004_LEVELS.iter().enumerate() {
        let cpu = |s: usize| {
            sweeps[s][i]
                .main_phase()
                .and_then(|p| p.per_request.cpu_total_us)
                .map_or("-".into(), fmt_duration_us)
        };
        let fds = |s: usize| {
            sweeps[s][i]
                .main_phase()
                .and_then(fds_scanned_per_request)
                .map_or("-".into(), |n| format!("{n:.0}"))
        };
        outln!(
            "{c:>11}   {:>13}   {:>14}   {:>21}   {:>6}",
            cpu(0),
            cpu(1),
            fds(0),
            fds(1)
        );
    }
    server_and_client(&sweeps[1]);
    let top = &sweeps[1][SEED_004_LEVELS.len() - 1];
    if let Some(split) = top
        .profile
        .as_ref()
        .and_then(reqcost_analysis::profile::kernel_split)
    {
        outln!(
            "udp-bulk-select at {} connections, the kernel by subsystem: {}",
            SEED_004_LEVELS[SEED_004_LEVELS.len() - 1],
            split.parts_text()
        );
    }
    outln!("{}\n", textwrap(SEED_004_WHY, 96));
    Ok(())
}

/// The select server's CPU beside its client's at each level, per MiB and as % of a core, as
/// seeds/004's table has both sides.
fn server_and_client(records: &[RunRecord]) {
    outln!("udp-bulk-select and its client (the --load command's tree), per MiB and % of a core:");
    outln!("connections   server CPU/MiB   % of a core   client CPU/MiB   % of a core");
    for (c, record) in SEED_004_LEVELS.iter().zip(records) {
        let main = record.main_phase();
        let client = Analysis::of(record).client;
        let cpu = |v: Option<f64>| v.map_or("-".into(), fmt_duration_us);
        let core = |v: Option<f64>| v.map_or("-".into(), |p| format!("{p:.0} %"));
        outln!(
            "{c:>11}   {:>14}   {:>11}   {:>14}   {:>11}",
            cpu(main.and_then(|p| p.per_request.cpu_total_us)),
            core(main.and_then(cpu_percent_of_core)),
            cpu(client.as_ref().map(|c| c.cpu_us)),
            core(client.and_then(|c| c.percent_of_core))
        );
    }
}

const SEED_004_WHY: &str = "Why: every wakeup serves one acknowledgement, but select() makes the \
    kernel poll every connection's socket and the server scan them all again: the fds scanned \
    per MiB grow by 64 with each connection, where epoll hands back only the ready socket, 64 \
    per MiB at any count. How much CPU that is depends on what the rest costs: over loopback \
    the network stack (each datagram sent is also received) outweighs the scanning at 15 \
    connections, so the CPU per MiB moves less than the scans; with hundreds of connections, \
    or cheaper sends, the scanning takes over as in seeds/004. reqcost names it poll-scaling \
    (the fix: epoll or io_uring). Your own server: reqcost sweep -c 5,10,15 --load 'CLIENT -c {c}'.";

/// One run of testbed server `server` loaded by the testbed's UDP client with `connections`,
/// per MiB, saved under `out_dir`.
fn measure_udp_bulk(
    dir: &Path,
    server: &str,
    connections: u32,
    out_dir: &Path,
) -> Result<RunRecord, Failure> {
    let port = free_port()?;
    let client = dir.join("build").join("udp-bulk-client");
    let template = format!("{} --port {port} -c {{c}} -b 4194304", client.display());
    let load = ExternalLoad::new(&template, connections, None, Some(port))?;
    let options = MeasureOptions {
        slow_phase: false,
        ..MeasureOptions::default()
    };
    let mut record = Collect {
        load: &Load::External(Box::new(load)),
        target: TargetSpec::Launch(testbed_command(dir, server, port)),
        options: &options,
        progress: true,
    }
    .run()?;
    record.in_units(Some(Unit::MiB));
    save_run(record, out_dir, &format!("-c{connections}"), server)
}

/// Wraps prose at word boundaries for the terminal.
fn textwrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split_whitespace() {
        if line > 0 && line + 1 + word.len() > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += word.chars().count();
    }
    out
}
