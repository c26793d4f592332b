//! `compare`, `sweep` and `check` against testbed servers.

use crate::attach::testbed_running;
use crate::util::*;
use reqcost_testkit::{free_port, TempDir};

fn compare_json(args: &[&str]) -> serde_json::Value {
    let out = reqcost(args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("compare --json prints JSON")
}

fn phase<'a>(c: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    c["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == name)
        .unwrap_or_else(|| panic!("phase {name} in {c}"))
}

/// The metric `name` of the main phase.
fn metric<'a>(c: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    phase_metric(c, "main", name)
}

fn phase_metric<'a>(
    c: &'a serde_json::Value,
    phase_name: &str,
    name: &str,
) -> &'a serde_json::Value {
    phase(c, phase_name)["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == name)
        .unwrap_or_else(|| panic!("metric {name} of phase {phase_name} in {c}"))
}

fn server_cmd(name: &str, port: u16) -> String {
    testbed_server(name, port).join(" ")
}

#[test]
fn a_server_against_itself_shows_no_difference() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("self");
    let url = format!("gopher://127.0.0.1:{port}/");
    let cmd = server_cmd("clean", port);
    let c = compare_json(&[
        "compare",
        "--json",
        "--runs",
        "3",
        "--url",
        &url,
        "-n",
        "500",
        // What is checked is the main phase's interval and counts: no slow-client phase, no
        // call chains (symbolizing them took seconds of each of the six runs).
        "--no-slow-phase",
        "--no-sample",
        "--out-dir",
        scratch.path().to_str().unwrap(),
        "--a",
        &cmd,
        "--b",
        &cmd,
    ]);
    assert_eq!(phase(&c, "main")["repetitions"], 3);
    let order: Vec<&str> = c["run_order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(order, ["A", "B", "B", "A", "A", "B"]);
    // Whether CPU is called equal depends on the machine's noise (the verdict rules have unit
    // tests); what is fixed is that three pairs give an interval around the ratio.
    let cpu = &metric(&c, "CPU")["ratio"];
    let at = |k: &str| cpu[k].as_f64().unwrap_or_else(|| panic!("CPU {k} in {c}"));
    assert!(
        at("low") <= at("ratio") && at("ratio") <= at("high"),
        "{cpu}"
    );
    assert!(
        at("high").is_finite(),
        "three pairs bound the interval: {cpu}"
    );
    assert_eq!(metric(&c, "write calls")["verdict"], "identical");
    assert_eq!(metric(&c, "bytes received")["verdict"], "identical");
}

#[test]
fn small_writes_against_clean_writes_once_per_line() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("sw");
    let url = format!("gopher://127.0.0.1:{port}/");
    let c = compare_json(&[
        "compare",
        "--json",
        "--runs",
        "1",
        "--url",
        &url,
        "-n",
        "200",
        // The main phase's write calls are the verdict.
        "--no-slow-phase",
        "--no-sample",
        "--out-dir",
        scratch.path().to_str().unwrap(),
        "--a",
        &server_cmd("clean", port),
        "--b",
        &server_cmd("small-writes", port),
    ]);
    let writes = metric(&c, "write calls");
    assert_eq!(writes["verdict"], "worse");
    // The 100-line menu: one write for clean, one per line for small-writes.
    assert_eq!(writes["ratio"]["ratio"].as_f64().unwrap().round(), 100.0);
}

#[test]
fn compare_needs_two_records_or_two_commands() {
    let out = reqcost(&["compare", "only-one.json"]);
    assert_clean_failure(&out, "two run records");
    assert_eq!(out.status.code(), Some(2));
}

fn record(scratch: &TempDir, server: &str, name: &str) -> String {
    // The gate reads the main phase's syscalls per request.
    record_with(
        scratch,
        server,
        name,
        &["-n", "300", "--no-slow-phase", "--no-sample"],
    )
}

/// `reqcost run` of testbed server `server` on its gopher menu, with `options`, saved as `name`.
fn record_with(scratch: &TempDir, server: &str, name: &str, options: &[&str]) -> String {
    let port = free_port();
    let url = format!("gopher://127.0.0.1:{port}/");
    let path = scratch.join(name);
    let cmd = testbed_server(server, port);
    let mut args = vec!["run", "-o", path.to_str().unwrap(), "--url", &url];
    args.extend_from_slice(options);
    args.push("--");
    args.extend(cmd.iter().map(String::as_str));
    let out = reqcost(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    path.display().to_string()
}

#[test]
fn check_gates_on_syscalls_per_request() {
    let _shared = machine_shared();
    let scratch = TempDir::new("check");
    let clean = record(&scratch, "clean", "clean.json");
    let small = record(&scratch, "small-writes", "small.json");

    let same = reqcost(&["check", &clean, "--baseline", &clean]);
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));
    assert!(String::from_utf8_lossy(&same.stdout).contains("check passed"));

    // CPU bound opened wide: the syscall bound alone must catch the regression.
    let worse = reqcost(&[
        "check",
        &small,
        "--baseline",
        &clean,
        "--max-cpu-regression",
        "100000",
    ]);
    assert_eq!(worse.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&worse.stdout).contains("REGRESSION"));
    assert_clean_failure(&worse, "regression against");

    let bad = reqcost(&["check", "/nonexistent/run.json", "--baseline", &clean]);
    assert_eq!(bad.status.code(), Some(2));
    assert_clean_failure(&bad, "/nonexistent/run.json");
}

/// seeds/002 as a CI gate: the send-queue polling loop costs little with fast clients and 100x
/// with slow ones, so only the slow-client phase (on by default) shows the regression.
#[test]
fn check_fails_the_busy_wait_regression_by_its_slow_client_phase() {
    let _shared = machine_shared();
    let scratch = TempDir::new("seed002");
    let baseline = record_with(&scratch, "clean", "baseline.json", &[]);
    let current = record_with(&scratch, "busy-wait", "current.json", &[]);

    let out = reqcost(&["check", &current, "--baseline", &baseline]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_clean_failure(&out, "slow-clients: CPU per request");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.contains("slow-clients") && l.contains("REGRESSION")),
        "{table}"
    );

    // The other way, the fix judged against the buggy baseline, at the default bounds: every
    // count improved and no finding appeared. Where the two builds do the same work (fast
    // clients) their CPU drifts with what else runs on a shared machine, up to 2x; each
    // record's drift between the two passes of its phases is in the interval, so that passes.
    let fixed = reqcost(&["check", &baseline, "--baseline", &current]);
    let table = String::from_utf8_lossy(&fixed.stdout);
    assert_eq!(fixed.status.code(), Some(0), "{table}{}", stderr(&fixed));
    assert!(table.contains("check passed"), "{table}");
    let judged: serde_json::Value = serde_json::from_slice(
        &reqcost(&["check", "--json", &baseline, "--baseline", &current]).stdout,
    )
    .expect("check --json prints its document");
    assert_eq!(
        judged["new_major_findings"],
        serde_json::json!([]),
        "{judged}"
    );
    let slow = judged["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == "slow-clients")
        .expect("both records measured the slow-client phase");
    let change = slow["items"][0]["change_pct"].as_f64().unwrap();
    assert!(change <= -90.0, "the fix's slow-client CPU: {slow}");

    let page = scratch.join("compare.html");
    let out = reqcost(&[
        "compare",
        &baseline,
        &current,
        "--html",
        page.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("phase slow-clients"), "{text}");
    let html = std::fs::read_to_string(&page).expect("compare --html writes its page");
    assert!(
        html.contains("id=\"phase-slow-clients\""),
        "no slow-clients section"
    );
    assert!(
        html.contains("id=\"b-finding-busy-wait\""),
        "no busy-wait finding on B's side"
    );
    let c = compare_json(&["compare", "--json", &baseline, &current]);
    let ratio = phase_metric(&c, "slow-clients", "CPU")["ratio"]["ratio"]
        .as_f64()
        .unwrap();
    assert!(ratio >= 10.0, "busy-wait/clean with slow clients: {ratio}");
    // One run each: the verdict comes from the two runs' per-request distributions.
    let cpu = phase_metric(&c, "slow-clients", "CPU");
    assert_eq!(cpu["verdict"], "worse", "{cpu}");
    assert_eq!(cpu["from_requests"], true, "{cpu}");
    assert!(
        text.contains("CPU judged from each run's per-request distribution"),
        "{text}"
    );

    // Cut short, the same run is refused: it might lack the phase the loop shows in.
    let mut died: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&current).unwrap()).unwrap();
    died["outcome"] = serde_json::json!({"status": "server_died", "detail": "exit status 1"});
    let partial = scratch.join("partial.json");
    std::fs::write(&partial, died.to_string()).unwrap();
    let partial = partial.to_str().unwrap();
    let out = reqcost(&["check", partial, "--baseline", &baseline]);
    assert_eq!(out.status.code(), Some(2));
    assert_clean_failure(&out, "partial: server died (exit status 1)");
    assert!(stderr(&out).contains(partial), "{}", stderr(&out));
}

fn sweep_growth(server: &str) -> serde_json::Value {
    let (scratch, port) = scratch_and_port(server);
    let url = format!("http://127.0.0.1:{port}/1k.txt");
    let cmd = testbed_server(server, port);
    let mut args = vec![
        "sweep",
        "--json",
        "--concurrency",
        "16,512",
        "--rate",
        "2000",
        "-n",
        "2000",
        // Growth is claimed only when the CPU ratio's 95 % interval clears the noise: with the
        // default three pairs (t = 4.3) one pair disturbed by a loaded machine made it
        // inconclusive (0.98 to 5.7 around 2.4); five pairs (t = 2.8) hold it. No sampler:
        // the verdict reads CPU and fds scanned, and the sampler's interrupts are noise.
        "--repeat",
        "5",
        "--no-sample",
        "--url",
        &url,
        "--out-dir",
        scratch.path().to_str().unwrap(),
        "--",
    ];
    args.extend(cmd.iter().map(String::as_str));
    let out = reqcost(&args);
    assert!(out.status.success(), "{server}: {}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["growth"].clone()
}

/// seeds/004: with mostly idle connections (open loop at a fixed rate), select() scans every
/// connection on each wakeup, so its cost per request grows with connections; epoll's does not.
#[test]
fn sweep_flags_select_but_not_epoll() {
    let _alone = machine_alone();
    let select = sweep_growth("poll-scaling");
    assert_eq!(select["grows"], true, "select server: {select}");
    // 32x the connections: fds scanned per request grow about 10x on an idle machine, less
    // when a loaded one batches more requests per wakeup (9.6x seen in CI); 4x is still twice
    // what the rule asks and far from epoll's 1x.
    assert!(select["scan_ratio"].as_f64().unwrap() >= 4.0, "{select}");
    let epoll = sweep_growth("keepalive");
    assert_eq!(epoll["grows"], false, "epoll server: {epoll}");
}

/// `sweep --pid` loads the running server at every level, interleaved, and reads the sweep back
/// as a typed report: each level's runs, the run order, the records attached to that pid.
#[test]
fn sweep_measures_a_running_server_with_pid() {
    let _shared = machine_shared();
    let scratch = TempDir::new("sweep-pid");
    let server = testbed_running("clean");
    let pid = server.pid().to_string();
    let url = format!("gopher://127.0.0.1:{}/0/1k.txt", server.port);
    let out = reqcost(&[
        "sweep",
        "--json",
        "-c",
        "4,1",
        "--repeat",
        "2",
        "-n",
        "300",
        "--no-sample",
        "--url",
        &url,
        "--out-dir",
        scratch.path().to_str().unwrap(),
        "--pid",
        &pid,
    ]);
    let alive = !exited(server.pid());
    drop(server);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(alive, "sweep --pid leaves the server running");
    let report: reqcost_analysis::sweep::SweepReport =
        serde_json::from_slice(&out.stdout).expect("sweep --json prints a sweep report");
    assert_eq!(report.run_order, [1, 4, 1, 4]);
    let levels: Vec<(u32, usize)> = report
        .levels
        .iter()
        .map(|l| (l.concurrency, l.runs))
        .collect();
    assert_eq!(levels, [(1, 2), (4, 2)]);
    for rec in &report.records {
        assert_eq!(rec.target.pid.to_string(), pid);
        assert_eq!(rec.target.command, None);
        assert_eq!(rec.main_phase().unwrap().client.ok, 300);
        assert!(rec.profile.is_none(), "--no-sample reaches every run");
    }
    let cpu = report.levels[0].get("CPU").expect("CPU per request at 1");
    assert_eq!(cpu.values.len(), 2);
    assert!(cpu.low.is_some() && cpu.high.is_some());
}

#[test]
fn compare_refuses_pid_and_says_how_to_compare_running_servers() {
    let out = reqcost(&["compare", "a.json", "b.json", "--pid", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("compare does not take --pid"), "{e}");
    assert!(e.contains("reqcost run --url URL --pid PID"), "{e}");
}
