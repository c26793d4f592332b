//! Per-request accounting end to end (issue 13): the requests the server served, counted on
//! the server side, and what each group of clients costs inside one phase.

use crate::util::*;
use reqcost_analysis::findings::diagnose;
use reqcost_record::{CpuMethod, GroupCost, RequestStats, RunRecord};
use reqcost_testkit::config::{self, NginxConf};
use reqcost_testkit::TempDir;

/// `reqcost run` that must succeed; its record.
fn run_ok(tag: &str, scratch: &TempDir, args: &[&str], server: &[String]) -> RunRecord {
    let (out, record) = run_saved(scratch, args, server);
    assert!(out.status.success(), "{tag}: {}", stderr(&out));
    record.unwrap_or_else(|| panic!("{tag}: no record saved"))
}

fn main_requests(record: &RunRecord) -> &RequestStats {
    let main = record.main_phase().expect("main phase");
    main.requests
        .as_ref()
        .unwrap_or_else(|| panic!("no per-request figures: {:?}", main.missing))
}

fn client<'a>(stats: &'a RequestStats, addr: &str) -> &'a GroupCost {
    stats
        .by_client
        .iter()
        .find(|g| g.name == addr)
        .unwrap_or_else(|| panic!("no client {addr} in {:?}", stats.by_client))
}

/// seeds/002 inside one phase: 20 % of the clients read at 64 KiB/s through an 8 KiB receive
/// buffer, and the busy-wait server polls each of their send queues until it drains. Their
/// requests cost far more than the fast clients' in the same traffic, and the finding says who
/// carries the cost (each group connects from its own loopback address).
#[test]
fn client_mix_shows_slow_clients_costing_fifty_times_the_fast_ones() {
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port("client-mix");
    let url = format!("gopher://127.0.0.1:{port}/");
    let args = [
        "--url",
        &url,
        "-n",
        "300",
        "-c",
        "4",
        "--client-mix",
        "80%:unlimited,20%:64KiB/s",
        "--no-slow-phase",
    ];
    let record = run_ok(
        "busy-wait",
        &scratch,
        &args,
        &testbed_server("busy-wait", port),
    );
    let stats = main_requests(&record);
    assert_eq!(stats.requests, 300, "{stats:?}");
    let (fast, slow) = (client(stats, "127.0.0.10"), client(stats, "127.0.0.11"));
    assert_eq!((fast.requests, slow.requests), (240, 60));
    let ratio = slow.cpu_per_request.mean / fast.cpu_per_request.mean;
    assert!(
        ratio > 50.0,
        "slow/fast CPU per request {ratio:.1}: {stats:?}"
    );

    let findings = diagnose(&record);
    let first = findings.first().expect("a finding");
    assert_eq!(first.id, "busy-wait", "{findings:?}");
    assert!(
        first.carriers.iter().any(|c| c.contains("127.0.0.11"))
            && !first.carriers.iter().any(|c| c.contains("127.0.0.10")),
        "busy-wait names the slow group only: {:?}",
        first.carriers
    );
}

/// Keep-alive HTTP against Debian's nginx: the server side counts the requests the load
/// generator sent, one by one on a few connections, each named by its request line.
#[test]
fn nginx_keepalive_requests_counted_on_the_server_side() {
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port("nginx-requests");
    www_1k(&scratch);
    let server = config::nginx(
        scratch.path(),
        port,
        &NginxConf {
            http: "access_log off; keepalive_timeout 65; keepalive_requests 100000;",
            ..NginxConf::default()
        },
    );
    let url = format!("http://127.0.0.1:{port}/1k.txt");
    let args = ["--url", &url, "-n", "500", "-c", "4", "--no-slow-phase"];
    let record = run_ok("nginx", &scratch, &args, &server);
    let main = record.main_phase().unwrap();
    let stats = main_requests(&record);
    assert_eq!(main.client.ok, 500);
    assert_eq!(stats.requests, main.client.ok, "{stats:?}");
    assert_eq!(stats.by_class.len(), 1, "{:?}", stats.by_class);
    assert_eq!(stats.by_class[0].name, "GET /1k.txt");
    assert_eq!(stats.by_class[0].requests, 500);
    assert_eq!(stats.events_dropped, 0);
}

/// A default run (1000 requests, then the slow-client phase and its fast reference) is too
/// short for unprobed windows: every phase's CPU comes from an unprobed pass of its requests
/// (all of main's, the first of the paced phases'), and the record says so; the counts stay the
/// probed pass's, exact (the clean server writes once per request). `--probes-full-time` keeps
/// the probed CPU and says so.
#[test]
fn short_phases_take_their_cpu_from_an_unprobed_pass() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("pass");
    let url = format!("gopher://127.0.0.1:{port}/0/1k.txt");
    let record = run_ok(
        "clean",
        &scratch,
        &["--url", &url],
        &testbed_server("clean", port),
    );
    let names: Vec<&str> = record.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["main", "slow-clients", "fast-same-rate"]);
    for phase in &record.phases {
        let w = phase.cpu_windows.as_ref().expect("how CPU was measured");
        assert_eq!(w.method, CpuMethod::UnprobedPass, "{}: {w:?}", phase.name);
        assert!(w.reason.contains("unprobed pass"), "{}", w.reason);
        assert_eq!((w.probed.windows, w.unprobed.windows), (1, 1), "{w:?}");
        assert_eq!(w.probed.requests, phase.client.requests, "{w:?}");
        assert_eq!(w.count_scale, 1.0);
        let cpu = phase.server.cpu.as_ref().unwrap();
        assert!(
            cpu.source.contains("from an unprobed pass"),
            "{}",
            cpu.source
        );
        let stats = phase.requests.as_ref().expect("per-request accounting");
        assert_eq!(stats.requests, phase.client.ok, "{}", phase.name);
        assert_eq!(phase.per_request.syscalls["write"], 1.0, "{}", phase.name);
        // Less what the tree held from before the phase, which its requests' CPU includes.
        let tree_ns =
            stats.attributed_cpu_ns + stats.unattributed_cpu_ns - stats.held_before_cpu_ns;
        assert!(tree_ns.abs_diff(cpu.total_ns) <= 2, "{tree_ns} vs {cpu:?}");
    }
    let main = record.main_phase().unwrap();
    let w = main.cpu_windows.as_ref().unwrap();
    // Sent again whole, as many times over as make a quarter of a second at its probed pace.
    let times = w.unprobed.requests / 1000;
    assert_eq!(w.unprobed.requests, 1000 * times, "{w:?}");
    assert!((1..=20).contains(&times), "{w:?}");
    assert_eq!(
        main.server.cpu.as_ref().unwrap().total_ns,
        (w.unprobed.cpu_ns as f64 / times as f64).round() as u64
    );
    let slow = &record.phases[1];
    let part = slow.cpu_windows.as_ref().unwrap().unprobed.requests;
    assert!(
        part >= 20.min(slow.client.requests) && part <= slow.client.requests,
        "{part} of {}",
        slow.client.requests
    );

    let (scratch, port) = scratch_and_port("pass-full-time");
    let url = format!("gopher://127.0.0.1:{port}/0/1k.txt");
    let args = [
        "--url",
        &url,
        "-n",
        "200",
        "--no-slow-phase",
        "--probes-full-time",
    ];
    let record = run_ok("clean", &scratch, &args, &testbed_server("clean", port));
    let w = record.main_phase().unwrap().cpu_windows.as_ref().unwrap();
    assert_eq!(w.method, CpuMethod::Probed, "{w:?}");
    assert_eq!(w.unprobed.windows, 0, "{w:?}");
    assert!(
        w.reason.contains("probes attached the whole phase"),
        "{}",
        w.reason
    );
}

/// A phase long enough for windows (issue 16): probed and unprobed windows in turn, their
/// requests adding up to the phase's; the CPU per request is the windows' the method names
/// (the unprobed ones when they had enough requests), the counts per request the probed
/// windows' (the clean server writes once per request), and per-request accounting is scaled
/// to the phase's CPU with its shares intact.
#[test]
fn long_phases_alternate_probed_and_unprobed_windows() {
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port("windows");
    let url = format!("gopher://127.0.0.1:{port}/0/1k.txt");
    let args = [
        "--url",
        &url,
        "--duration",
        "6s",
        "-c",
        "2",
        "--no-slow-phase",
        "--no-sample",
    ];
    let record = run_ok("clean", &scratch, &args, &testbed_server("clean", port));
    let main = record.main_phase().unwrap();
    let w = main.cpu_windows.as_ref().expect("how CPU was measured");
    assert!(w.probed.windows >= 1 && w.unprobed.windows >= 1, "{w:?}");
    assert_eq!(
        w.probed.requests + w.unprobed.requests,
        main.client.requests
    );
    let from = match w.method {
        CpuMethod::UnprobedWindows => &w.unprobed,
        CpuMethod::Probed => &w.probed,
        CpuMethod::UnprobedPass | CpuMethod::Sampled => panic!("a long phase has windows: {w:?}"),
    };
    let expected =
        from.cpu_per_request_us().unwrap() * main.client.requests as f64 / main.client.ok as f64;
    let per_request = main.per_request.cpu_total_us.unwrap();
    assert!(
        (per_request - expected).abs() < expected * 1e-6,
        "{per_request} µs per request, {expected} from the {:?} windows",
        w.method
    );
    let stats = main_requests(&record);
    let tree_ns = stats.attributed_cpu_ns + stats.unattributed_cpu_ns;
    let cpu_ns = main.server.cpu.as_ref().unwrap().total_ns;
    // Less what the tree held from before the phase, which its requests' CPU includes.
    let phase_ns = tree_ns - stats.held_before_cpu_ns;
    assert!(phase_ns.abs_diff(cpu_ns) <= 2, "{phase_ns} vs {cpu_ns}");
    let shares: f64 = stats.by_class.iter().map(|g| g.cpu_share_pct).sum();
    let of_ns: f64 = stats
        .by_class
        .iter()
        .map(|g| g.cpu_ns as f64 * 100.0 / tree_ns as f64)
        .sum();
    assert!((shares - of_ns).abs() < 0.01, "{shares} % vs {of_ns} %");
    // Writes and served requests are both the probed windows' counts scaled by one factor, so
    // their ratio is exact. The factor itself compares the client's count at each switch with
    // the probes' state, and a busy machine delays the one behind the other by a few requests
    // per switch: the served count is held to 5 %, the ratio to 1 %.
    let served = stats.requests as f64;
    let sent = main.client.ok as f64;
    let writes = main.per_request.syscalls["write"] * sent / served;
    assert!(
        (writes - 1.0).abs() < 0.01,
        "{writes} writes per served request"
    );
    assert!(
        (served - sent).abs() < sent * 0.05,
        "{served} served, {sent} sent, {w:?}"
    );
}
