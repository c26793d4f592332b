//! seeds/004 in the testbed: a UDP bulk server that select()s over one socket per connection,
//! and its epoll twin, swept at 5, 10 and 15 connections by the testbed's client as `--load`.
//! The client keeps one window in flight, so every count per MiB is exact whatever the load.

use crate::util::*;
use reqcost_record::{RunRecord, Unit};
use reqcost_testkit::chromium;

/// Bytes each connection asks for: 64 windows of 16 datagrams of 1 KiB.
const BYTES_PER_CONNECTION: u64 = 1 << 20;
const WINDOWS_PER_CONNECTION: u64 = BYTES_PER_CONNECTION / (16 * 1024);
const LEVELS: [u64; 3] = [5, 10, 15];

/// `reqcost sweep -c 5,10,15` of testbed server `server`, one run per level: its records.
fn sweep(server: &str) -> Vec<RunRecord> {
    let (scratch, port) = scratch_and_port(server);
    let client = testbed().join("build").join("udp-bulk-client");
    let load = format!(
        "{} --port {port} -c {{c}} -b {BYTES_PER_CONNECTION}",
        client.display()
    );
    let sweep = sweep_5_10_15(
        &load,
        port,
        &scratch.join("runs"),
        &testbed_server(server, port),
    );
    let levels: Vec<f64> = sweep["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let m = l["metrics"].as_array().unwrap();
            let scanned = m.iter().find(|m| m["metric"] == "fds scanned");
            let cpu = m.iter().find(|m| m["metric"] == "CPU");
            assert!(cpu.is_some_and(|c| c["mean"].as_f64() > Some(0.0)), "{l}");
            scanned.expect("fds scanned per level")["mean"]
                .as_f64()
                .unwrap()
        })
        .collect();
    let records: Vec<RunRecord> = serde_json::from_value(sweep["records"].clone()).unwrap();
    assert_eq!(records.len(), 3);
    for (level, (c, r)) in levels.iter().zip(LEVELS.iter().zip(&records)) {
        let main = r.main_phase().unwrap();
        assert_eq!(main.unit, Unit::MiB, "{server}: per MiB by default");
        assert_eq!(
            main.units(),
            *c as f64,
            "{server}: {c} connections of 1 MiB"
        );
        let k = main.server.kernel.as_ref().expect("probes on");
        assert_eq!(k.udp.datagrams_sent, c * 1024, "{server} at {c}");
        // One wakeup per window (the first asked by the request), each finding one socket
        // ready; the very first began before the probes were attached, which cannot count it.
        let waits = &k.waits;
        assert_eq!(waits.len(), 1, "{server}: {waits:?}");
        assert_eq!(waits[0].returns, c * WINDOWS_PER_CONNECTION - 1, "{server}");
        assert_eq!(waits[0].ready, waits[0].returns, "{server}");
        // The sweep's figure is the record's.
        let scanned = reqcost_analysis::phase_metrics::fds_scanned_per_request(main).unwrap();
        assert!((scanned - level).abs() < 1e-6, "{scanned} {level}");
    }
    records
}

/// fds scanned per MiB at each level.
fn scanned(records: &[RunRecord]) -> Vec<f64> {
    records
        .iter()
        .map(|r| {
            reqcost_analysis::phase_metrics::fds_scanned_per_request(r.main_phase().unwrap())
                .unwrap()
        })
        .collect()
}

fn findings(record: &RunRecord) -> Vec<String> {
    reqcost_analysis::findings::diagnose(record)
        .into_iter()
        .map(|f| f.id)
        .collect()
}

#[test]
fn select_scans_more_fds_per_mib_with_each_connection_and_epoll_does_not() {
    let _alone = machine_alone();
    let select = sweep("udp-bulk-select");
    let s = scanned(&select);
    // select() is handed every socket on each of the 64 wakeups per MiB: 5 connections more
    // add 5 x 64 fds per MiB (the setup wakeups, fewer fds, move it by under 1 %).
    for w in s.windows(2) {
        let added = w[1] - w[0];
        assert!((added - 320.0).abs() <= 3.2, "select: {s:?}");
    }
    let epoll = sweep("udp-bulk-epoll");
    let e = scanned(&epoll);
    // epoll returns the one ready socket per wakeup: 64 per MiB at every level.
    for v in &e {
        assert!((v - 64.0).abs() <= 0.64, "epoll: {e:?}");
    }
    let top = |records: &[RunRecord]| findings(&records[2]);
    assert!(
        top(&select).contains(&"poll-scaling".to_string()),
        "select at 15: {:?}",
        top(&select)
    );
    assert!(
        !top(&epoll).contains(&"poll-scaling".to_string()),
        "epoll at 15: {:?}",
        top(&epoll)
    );
}

/// Every run of a sweep is pinned as its first is: reqcost pins its own thread to the client's
/// CPU, and the CPUs it may use are the process's when it started, not that thread's afterwards.
/// Its HTML page speaks per MiB, the server's and the client's columns side by side.
#[test]
fn every_run_of_a_repeated_sweep_is_pinned_apart() {
    let _alone = machine_alone();
    // The suite's machine has two cores or more; on one, pinning apart is not there to check,
    // and a pass would claim what was never seen.
    let cpus = reqcost_server::online_cpus().len();
    assert!(cpus >= 2, "{cpus} CPU online: pinning apart needs two");
    let (scratch, port) = scratch_and_port("udp-bulk-pinned");
    let client = testbed().join("build").join("udp-bulk-client");
    let load = format!("{} --port {port} -c {{c}} -b 65536", client.display());
    let page = scratch.join("sweep.html");
    let sweep = sweep_5_10_15_repeated(
        &load,
        port,
        &scratch.join("runs"),
        &testbed_server("udp-bulk-epoll", port),
        3,
        &["--html", page.to_str().unwrap()],
    );
    sweep_page_speaks_per_mib(scratch.path(), &page);
    let records: Vec<RunRecord> = serde_json::from_value(sweep["records"].clone()).unwrap();
    assert_eq!(records.len(), 9);
    for (i, r) in records.iter().enumerate() {
        let p = &r.pinning;
        assert!(p.enabled, "run {i}: {p:?}");
        assert!(
            !p.client_cpus.is_empty() && !p.server_cpus.is_empty(),
            "run {i}: {p:?}"
        );
        assert!(
            p.client_cpus.iter().all(|c| !p.server_cpus.contains(c)),
            "run {i}: {p:?}"
        );
        assert_eq!(p, &records[0].pinning, "run {i}");
    }
    for level in sweep["levels"].as_array().unwrap() {
        assert!(level.get("pinning_differs").is_none(), "{level}");
        let metric = |name: &str| {
            level["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["metric"] == name)
                .unwrap_or_else(|| panic!("no {name}: {level}"))["values"]
                .as_array()
                .unwrap()
                .len()
        };
        // The server's and the client's side, each from all three runs.
        for name in ["CPU % of a core", "client CPU", "client CPU % of a core"] {
            assert_eq!(metric(name), 3, "{name}");
        }
    }
}

/// The sweep's HTML page as Chromium reads it: its headline and every label per MiB, the
/// server's and the client's cost per level side by side, and no word of requests.
fn sweep_page_speaks_per_mib(scratch: &std::path::Path, page: &std::path::Path) {
    let dom = chromium(scratch, page, &["--dump-dom"]).stdout;
    let dom = String::from_utf8_lossy(&dom);
    let text = visible_text(&dom);
    assert!(
        text.contains("udp-bulk-epoll: server CPU per MiB vs connections"),
        "{text}"
    );
    for header in [
        "<th>server CPU/MiB</th>",
        "<th>server % of a core</th>",
        "<th>client CPU/MiB</th>",
        "<th>client % of a core</th>",
        "<th>client syscalls/MiB</th>",
    ] {
        assert!(dom.contains(header), "{header}: {dom}");
    }
    let table = dom
        .split("id=\"levels\"")
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .expect("the levels table");
    for level in LEVELS {
        assert!(
            table.contains(&format!("<tr><th>{level}</th><td>3</td>")),
            "{table}"
        );
    }
    // Every level measured both sides: no cell is left unmeasured.
    for metric in ["CPU", "client CPU", "client syscalls"] {
        let cells = table.matches(&format!("data-metric=\"{metric}\">")).count();
        assert_eq!(cells, 3, "{metric}: {table}");
    }
    assert!(!table.contains(">-</td>"), "{table}");
    assert!(!text.to_lowercase().contains("request"), "{text}");
}

/// `reqcost run` of testbed server `server` on `port` driven by `load`, with `options`, its
/// record saved to `record`: its summary and its record.
fn run_with_load(
    server: &str,
    load: &str,
    port: u16,
    record: &std::path::Path,
    options: &[&str],
) -> (String, RunRecord) {
    let port_arg = port.to_string();
    let mut args = vec!["run", "--load", load, "--port", &port_arg];
    args.extend(options);
    args.extend(["-o", record.to_str().unwrap(), "--"]);
    let server = testbed_server(server, port);
    args.extend(server.iter().map(String::as_str));
    let out = reqcost(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let rec = serde_json::from_slice(&std::fs::read(record).unwrap()).unwrap();
    (String::from_utf8_lossy(&out.stdout).into_owned(), rec)
}

/// A run of the UDP bulk server per MiB reads as one: the HTML report's headline is its CPU per
/// MiB, and nothing in the page speaks of requests, which it has none of.
#[test]
fn html_reports_per_mib_datagram_and_connection_speak_their_unit() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("udp-bulk-html");
    let client = testbed().join("build").join("udp-bulk-client");
    // `exec`: the client replaces the shell, so the schedstat it prints covers the whole tree.
    let load = format!("exec {} --port {port} -c 5 -b 1048576", client.display());
    let page = scratch.join("report.html");
    let record = scratch.join("run.json");
    let html = ["--no-sample", "--html", page.to_str().unwrap()];
    let (summary, rec) = run_with_load("udp-bulk-select", &load, port, &record, &html);
    for wrong in [
        "start-up, timers, accept",
        "no request succeeded",
        "CPU in windows",
    ] {
        assert!(!summary.contains(wrong), "{wrong}: {summary}");
    }
    let phases = reqcost_analysis::reading::phases_in(&rec, None);
    let main = phases.iter().find(|p| p.name == "main").unwrap();
    assert_eq!(main.unit, Unit::MiB, "per MiB by default");
    let dom = chromium(scratch.path(), &page, &["--dump-dom"]).stdout;
    let dom = String::from_utf8_lossy(&dom);
    assert!(dom.contains("Server CPU per MiB"), "{dom}");
    let cpu = main.per_request.cpu_total_us.expect("CPU per MiB");
    assert!(
        dom.contains(&format!(
            "id=\"cpu-per-request\" data-us=\"{cpu}\">{}</span>",
            reqcost_report::fmt_duration_us(cpu)
        )),
        "{dom}"
    );
    assert!(dom.contains("over 5.00 MiB"), "{dom}");
    let text = visible_text(&dom);
    assert!(!text.to_lowercase().contains("request"), "{text}");
    // The client's CPU per MiB: its tree's cgroup against what the scheduler gave the client
    // process (it prints its own schedstat, the shell's start-up included since it execs).
    let load = rec.workload.load.as_ref().unwrap();
    let schedstat_ns: f64 = load
        .output_tail
        .iter()
        .find_map(|l| l.split("cpu_ns=").nth(1))
        .expect("the client prints its CPU")
        .trim()
        .parse()
        .unwrap();
    let client_us = load.cpu.as_ref().expect("the load tree's CPU").total_ns as f64 / 1000.0 / 5.0;
    let truth_us = schedstat_ns / 1000.0 / 5.0;
    assert!(
        (client_us - truth_us).abs() <= truth_us * 0.1,
        "client CPU per MiB {client_us} µs, schedstat {truth_us} µs"
    );
    let shown = format!(
        "id=\"client-cpu\" data-us=\"{client_us}\">the --load command's tree: CPU per MiB {}",
        reqcost_report::fmt_duration_us(client_us)
    );
    assert!(dom.contains(&shown), "{shown}: {dom}");
    // The client's syscalls, as it makes them: per connection one request, then one
    // acknowledgement per later window (send(3) is sendto on x86_64), one recvfrom per datagram.
    let calls = load.syscalls.as_ref().expect("the load tree's syscalls");
    let count = |name: &str| calls.get(name).copied().unwrap_or(0);
    assert_eq!(count("sendto"), 5 * WINDOWS_PER_CONNECTION, "{calls:?}");
    assert_eq!(count("recvfrom"), 5 * 1024, "{calls:?}");
    let client = reqcost_analysis::document::ClientCost::of(&rec, main).unwrap();
    let total: u64 = calls.values().sum();
    assert_eq!(client.syscalls, Some(total as f64 / 5.0));
    assert!(dom.contains(" syscalls per MiB (recvfrom 1024, "), "{dom}");
    // The same record per datagram and per connection (UDP has none: said so, in its unit).
    for (unit, headline) in [
        ("datagram", "Server CPU per datagram"),
        ("connection", "not measured: no connections counted"),
    ] {
        let page = scratch.join(&format!("report-{unit}.html"));
        let out = reqcost(&[
            "report",
            "--per",
            unit,
            "--html",
            page.to_str().unwrap(),
            record.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let dom = chromium(scratch.path(), &page, &["--dump-dom"]).stdout;
        let text = visible_text(&String::from_utf8_lossy(&dom));
        assert!(text.contains(headline), "{unit}: {text}");
        assert!(!text.to_lowercase().contains("request"), "{unit}: {text}");
    }
    // So is a check of it against itself, per MiB by default and per datagram when asked.
    for (per, metric) in [
        (None, "CPU per MiB (µs)"),
        (Some("datagram"), "CPU per datagram (µs)"),
    ] {
        let rec = record.to_str().unwrap();
        let mut args = vec!["check", rec, "--baseline", rec];
        args.extend(per.iter().flat_map(|u| ["--per", *u]));
        let out = reqcost(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let verdict = String::from_utf8_lossy(&out.stdout);
        assert!(verdict.contains(metric), "{verdict}");
        assert!(verdict.contains("check passed"), "{verdict}");
        assert!(!verdict.contains("request"), "{verdict}");
    }
    // A comparison of runs that served no request is per MiB too.
    let page = scratch.join("compare.html");
    let (a, b) = (record.to_str().unwrap(), page.to_str().unwrap());
    let out = reqcost(&["compare", "--html", b, a, a]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("per MiB, mean over runs"), "{table}");
    let client_rows = table
        .split("client (the --load command's tree)")
        .nth(1)
        .expect("the client's side");
    assert!(client_rows.contains("client syscalls"), "{table}");
    assert!(client_rows.contains("client CPU"), "{table}");
    assert!(!table.contains("request"), "{table}");
    let dom = chromium(scratch.path(), &page, &["--dump-dom"]).stdout;
    let text = visible_text(&String::from_utf8_lossy(&dom));
    assert!(text.contains("Server CPU per MiB"), "{text}");
    assert!(text.contains("client syscalls"), "{text}");
    assert!(!text.to_lowercase().contains("request"), "{text}");
}

/// The text a reader sees in `dom`: without tags, styles and scripts (whose identifiers, as the
/// headline's `cpu-per-request` id, are not wording).
fn visible_text(dom: &str) -> String {
    let mut page = dom.to_string();
    for hidden in ["style", "script"] {
        let (open, close) = (format!("<{hidden}"), format!("</{hidden}>"));
        while let Some(at) = page.find(&open) {
            let end = page[at..]
                .find(&close)
                .map_or(page.len(), |e| at + e + close.len());
            page.replace_range(at..end, "");
        }
    }
    let mut text = String::new();
    let mut in_tag = false;
    for c in page.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}

/// The `--load` command's tree is sampled beside the server's: its kernel time split as the
/// server's is, where the UDP bulk client's system time goes to sendto and recvfrom.
#[test]
fn the_load_commands_kernel_time_is_split_by_subsystem() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("udp-bulk-client-split");
    let client = testbed().join("build").join("udp-bulk-client");
    let load = format!("{} --port {port} -c 5 -b 4194304", client.display());
    let record = scratch.join("run.json");
    let (summary, rec) = run_with_load("udp-bulk-epoll", &load, port, &record, &["--freq", "4999"]);
    let phases = reqcost_analysis::reading::phases_in(&rec, None);
    let main = phases.iter().find(|p| p.name == "main").unwrap();
    let client = reqcost_analysis::document::ClientCost::of(&rec, main).unwrap();
    let split = client.kernel_split.expect("the client's kernel split");
    assert!(split.samples > 0 && split.kernel_samples > 0, "{split:?}");
    // 1024 recvfrom per MiB against 64 sendto: over 20 MiB the receive side cannot go
    // unsampled, nor fall behind the send side. (Scheduling often leads the whole split: the
    // client sleeps once per window, and cpu-clock samples land as it is switched back in.)
    let samples = |id: &str| {
        split
            .subsystems
            .iter()
            .find(|s| s.id == id)
            .map_or(0, |s| s.samples)
    };
    assert!(samples("net_receive") > samples("net_send"), "{split:?}");
    assert!(
        summary.contains("  client kernel by subsystem: ") && summary.contains("network receive"),
        "{summary}"
    );
}
