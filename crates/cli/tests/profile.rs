//! Call chains on binaries without frame pointers: Debian's apache2 serving a 1 KB file to one
//! client (seeds/003), and the testbed's copy-heavy server; the kernel time of a syscall-heavy
//! testbed server named by subsystem.

use crate::util::*;
use reqcost_analysis::document::Analysis;
use reqcost_analysis::profile::kernel_split;
use reqcost_record::{CpuMethod, Profile, RunRecord};
use reqcost_report::profile_section;
use reqcost_testkit::{config, free_port};

/// Runs `reqcost run --record-json` and returns the record it printed.
fn run_json(args: &[&str], server: &[String]) -> RunRecord {
    let mut argv: Vec<&str> = vec!["run", "--record-json", "--no-slow-phase"];
    argv.extend_from_slice(args);
    argv.push("--");
    argv.extend(server.iter().map(String::as_str));
    let out = reqcost(&argv);
    assert!(out.status.success(), "reqcost run failed: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not a run record ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// (samples with user frames, those with 3+ named user frames).
fn user_depth(p: &Profile) -> (u64, u64) {
    let (mut user, mut deep) = (0, 0);
    for s in &p.stacks {
        let frames: Vec<_> = s.frames.iter().map(|&f| &p.frames[f as usize]).collect();
        if frames.iter().all(|f| f.kernel) {
            continue;
        }
        user += s.count;
        if frames.iter().filter(|f| !f.kernel && f.resolved).count() >= 3 {
            deep += s.count;
        }
    }
    (user, deep)
}

/// The summary's copy section: the first copy function named and the caller chains under it.
fn copy_section(text: &str) -> (String, Vec<String>) {
    let start = text
        .find("memory copies in user space")
        .unwrap_or_else(|| panic!("no copy section in the summary:\n{text}"));
    let mut lines = text[start..].lines().skip(1);
    let func = lines
        .next()
        .and_then(|l| l.split_whitespace().next())
        .expect("a copy function")
        .to_string();
    // Past the direct callers, to the chains.
    let chains = lines
        .skip_while(|l| !l.contains("most frequent chains"))
        .skip(1)
        .take_while(|l| l.contains('←'))
        .map(str::to_string)
        .collect();
    (func, chains)
}

#[test]
fn apache2_one_client_1k_file_names_the_copy_function_and_its_callers() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("apache2-profile");
    scratch.write("htdocs/1k.txt", &[b'x'; 1024]);
    let apache2 = config::apache2(scratch.path(), port, "");
    let url = format!("http://127.0.0.1:{port}/1k.txt");
    // Like seeds/003's `ab -c1`: one client, a connection per request. The copy share is
    // small (about 2 % of user time, 13 % of the samples being user time): at 499 Hz it got
    // about 4 samples, and none in one run in a loaded suite; at 1999 Hz about 16.
    let rec = run_json(
        &[
            "--url",
            &url,
            "-n",
            "40000",
            "-c",
            "1",
            "--no-keepalive",
            "--freq",
            "1999",
        ],
        &apache2,
    );
    let p = rec.profile.expect("the record keeps the profile");
    let (user, deep) = user_depth(&p);
    assert!(user > 0, "no user samples");
    assert!(
        deep as f64 >= 0.9 * user as f64,
        "only {deep} of {user} user samples have 3+ named user frames"
    );

    let text = profile_section(&p, rec.phases.iter().map(|ph| ph.client.ok).sum(), None);
    let (func, chains) = copy_section(&text);
    assert!(
        ["memcpy", "memmove"].iter().any(|f| func.contains(f)),
        "{func} is not a copy function:\n{text}"
    );
    assert!(!chains.is_empty(), "no callers of {func}:\n{text}");
    // Callers reach the server's own code: httpd (ap_*) or APR (apr_*).
    assert!(
        chains
            .iter()
            .any(|c| c.contains("← ap_") || c.contains("← apr_")),
        "callers of {func} do not reach httpd/apr code:\n{text}"
    );
}

#[test]
fn testbed_copy_heavy_names_the_hot_function_and_its_callers() {
    let _shared = machine_shared();
    let port = free_port();
    let url = format!("gopher://127.0.0.1:{port}/9/200k.bin");
    let rec = run_json(
        &["--url", &url, "-n", "1000", "-c", "1"],
        &testbed_server("copy-heavy", port),
    );
    let p = rec.profile.expect("the record keeps the profile");
    let text = profile_section(&p, 1000, None);
    // The hottest user-space function is the copy, called through the server's own chain
    // (built with -fomit-frame-pointer: DWARF unwinding is what finds these callers).
    let top_user = text
        .split("top user-space functions by self time")
        .nth(1)
        .and_then(|t| t.lines().nth(2))
        .unwrap_or_else(|| panic!("no user-space table:\n{text}"));
    assert!(
        top_user.contains("mem"),
        "hottest user function is not a copy:\n{text}"
    );
    let (_, chains) = copy_section(&text);
    assert!(
        chains[0].contains("← copy_chunk ← copy_pass ← assemble_response"),
        "copy callers not named:\n{text}"
    );
}

#[test]
fn testbed_byte_reads_kernel_time_is_named_by_subsystem() {
    let _shared = machine_shared();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let rec = run_json(
        &["--url", &url, "-n", "2000", "-c", "1"],
        &testbed_server("byte-reads", port),
    );
    let doc = Analysis::of(&rec);
    let p = rec.profile.expect("the record keeps the profile");
    let split = kernel_split(&p).expect("a syscall-heavy server has kernel samples");
    // One recv(2) per request byte: the receive path is sampled, and named.
    let named: Vec<&str> = split
        .parts
        .iter()
        .filter_map(|(s, _)| s.map(|s| s.id))
        .collect();
    assert!(named.contains(&"net_receive"), "{}", split.describe());
    let text = profile_section(&p, 2000, doc.kernel_split.as_ref());
    assert!(
        text.contains(&format!("kernel by subsystem: {}", split.parts_text())),
        "{text}"
    );
}

/// A default run of 1000 requests is too short for unprobed windows: its unprobed pass sends
/// them again (warm-up and pass) while the sampler samples. The CPU the samples stand for per
/// request agrees with the phase's CPU per request within sampling noise (0.5x-2x); divided by
/// the phases' requests alone it read 3.8x on burn/200.
#[test]
fn a_default_runs_samples_per_request_count_its_unprobed_pass() {
    let _shared = machine_shared();
    let port = free_port();
    let url = format!("gopher://127.0.0.1:{port}/0burn/200");
    let rec = run_json(
        &["--url", &url, "-n", "1000", "-c", "1"],
        &testbed_server("cost-classes", port),
    );
    let main = rec.main_phase().expect("a main phase");
    let windows = main.cpu_windows.as_ref().expect("the main phase's windows");
    assert_eq!(
        windows.method,
        CpuMethod::UnprobedPass,
        "{}",
        windows.reason
    );
    assert!(
        windows.pass_requests >= 2000,
        "the pass and its warm-up sent {}",
        windows.pass_requests
    );
    let cpu_us = main.per_request.cpu_total_us.expect("the phase's CPU");
    let p = rec.profile.as_ref().expect("the record keeps the profile");
    let sampled_us = (p.samples * p.period_ns) as f64 / 1000.0 / rec.sampled_requests() as f64;
    let ratio = sampled_us / cpu_us;
    assert!(
        (0.5..=2.0).contains(&ratio),
        "samples stand for {sampled_us:.0} µs per request, the phase's CPU {cpu_us:.0} µs"
    );
}
