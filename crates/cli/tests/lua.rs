//! Lua frames (docs/interpreters.md): testbed/lua/server.lua spends each class's CPU in a Lua
//! function of its own (`wrap` in wrap_text, 5 times the loop of `links` in translate_links),
//! serves each connection from a coroutine that yields mid-request, recurses 100 calls deep for
//! `deep` and raises an error through a pcall for `fail`. Run by Debian's lua5.4 (the core
//! linked in, stripped) and by a C host embedding liblua5.4, the profile names both functions
//! with their file and line, in their own class, at their CPU ratio.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use crate::util::*;
use reqcost_record::{CpuMethod, Profile, RunRecord};
use reqcost_testkit::{free_port, go, output_ok, TempDir};

/// Requests of each class in one run: 4 of wrap and links, 1 of deep and fail per 10.
pub const PATTERN: [&str; 10] = [
    "wrap", "links", "wrap", "links", "deep", "wrap", "links", "fail", "wrap", "links",
];
const REQUESTS: usize = 300;

/// The line `function NAME` or `local function NAME` starts on in server.lua.
fn defined_at(name: &str) -> usize {
    let src = std::fs::read_to_string(testbed().join("lua/server.lua")).unwrap();
    1 + src
        .lines()
        .position(|l| {
            l.starts_with(&format!("function {name}("))
                || l.starts_with(&format!("local function {name}("))
        })
        .unwrap_or_else(|| panic!("server.lua defines no {name}"))
}

/// Measures server.lua run by `interpreter` (a command before the script) under the mixed
/// workload, `n` requests in phase main, with `extra` options of `run` (the slow-client phase's
/// or the clients'); the record, saved in `scratch`.
pub fn lua_run(scratch: &TempDir, interpreter: &str, n: usize, extra: &[&str]) -> RunRecord {
    let requests: String = PATTERN.iter().map(|r| format!("{r}\n")).collect();
    let file = scratch.write("requests.txt", requests.as_bytes());
    let port = free_port();
    let url = format!("gopher://127.0.0.1:{port}/");
    let saved = scratch.join("run.json");
    let script = testbed().join("lua/server.lua").display().to_string();
    let (file, saved_arg, n, port) = (
        file.display().to_string(),
        saved.display().to_string(),
        n.to_string(),
        port.to_string(),
    );
    let mut args = vec!["run"];
    args.extend(extra);
    args.extend([
        "--freq",
        "997",
        "--url",
        &url,
        "--requests",
        &file,
        "-n",
        &n,
        "-c",
        "2",
        "-o",
        &saved_arg,
        "--",
        interpreter,
        &script,
        &port,
    ]);
    let out = reqcost(&args);
    assert!(out.status.success(), "reqcost run failed: {}", stderr(&out));
    load_record(&saved).expect("record saved")
}

/// Per class of phase main: (samples, samples with a frame named `function`).
fn class_samples(p: &Profile, function: &str) -> HashMap<String, (u64, u64)> {
    let mut out: HashMap<String, (u64, u64)> = HashMap::new();
    for s in &p.stacks {
        let Some(tag) = s.tag.map(|t| &p.tags[t as usize]) else {
            continue;
        };
        if tag.phase != "main" {
            continue;
        }
        let has = s
            .frames
            .iter()
            .any(|&f| p.frames[f as usize].function == function);
        let e = out.entry(tag.class.clone()).or_default();
        e.0 += s.count;
        e.1 += if has { s.count } else { 0 };
    }
    out
}

fn assert_lua_classes(rec: &RunRecord) {
    let p = rec.profile.as_ref().expect("the record keeps the profile");
    let wrap = format!("wrap_text @ server.lua:{}", defined_at("wrap_text"));
    let links = format!(
        "translate_links @ server.lua:{}",
        defined_at("translate_links")
    );
    assert!(
        p.frames
            .iter()
            .any(|f| f.function == wrap && f.module == "[lua]"),
        "no frame {wrap}: {:?}",
        p.frames
            .iter()
            .filter(|f| f.module == "[lua]")
            .collect::<Vec<_>>()
    );
    let main = rec.phases.iter().find(|ph| ph.name == "main").unwrap();
    let stats = main.requests.as_ref().expect("per-request accounting");
    let requests = |class: &str| {
        stats
            .by_class
            .iter()
            .find(|g| g.name == class)
            .map_or(0, |g| g.requests)
    };
    // Every request answered, whatever raised or yielded: the counts add up.
    let per_cycle = |c: &str| PATTERN.iter().filter(|&&r| r == c).count() as u64;
    for class in ["wrap", "links", "deep", "fail"] {
        assert_eq!(
            requests(class),
            per_cycle(class) * (REQUESTS / PATTERN.len()) as u64,
            "{class}: {:?}",
            stats.by_class
        );
    }
    let in_wrap = class_samples(p, &wrap);
    let in_links = class_samples(p, &links);
    let (wrap_all, wrap_own) = in_wrap["wrap"];
    let (links_all, links_own) = in_links["links"];
    assert!(
        wrap_own * 100 >= wrap_all * 90,
        "wrap: {wrap_own} of {wrap_all} samples in {wrap}"
    );
    assert!(
        links_own * 100 >= links_all * 90,
        "links: {links_own} of {links_all} samples in {links}"
    );
    // 5 times the loop per request: the ratio of samples per request, within 15 %.
    let ratio =
        (wrap_own as f64 / requests("wrap") as f64) / (links_own as f64 / requests("links") as f64);
    // The figures bench/RESULTS.md quotes (`-- --nocapture`).
    eprintln!(
        "wrap: {wrap_own} of {wrap_all} samples in wrap_text; links: {links_own} of {links_all} in translate_links; ratio per request {ratio:.2}"
    );
    assert!(
        (4.25..=5.75).contains(&ratio),
        "CPU per request in wrap_text / translate_links: {ratio:.2} ({wrap_own} and {links_own} samples)"
    );
    // 100 calls deep: the walk is cut, its leaf still named by its caller.
    let (_, deep_in_wrap) = in_wrap.get("deep").copied().unwrap_or_default();
    assert!(deep_in_wrap > 0, "deep: no sample in {wrap}");
    assert!(
        p.notes.iter().any(|n| n.starts_with("Lua frames: ")),
        "{:?}",
        p.notes
    );
}

#[test]
fn lua_interpreter_names_each_class_function() {
    let _alone = machine_alone();
    let scratch = TempDir::new("lua-static");
    let rec = lua_run(&scratch, "lua5.4", REQUESTS, &["--no-slow-phase"]);
    assert_lua_classes(&rec);

    // The Lua frames travel with the chains: pprof's class labels pick one class's function.
    let pb = scratch.join("p.pb.gz");
    let out = reqcost(&[
        "report",
        &scratch.join("run.json").display().to_string(),
        "--pprof",
        &pb.display().to_string(),
    ]);
    assert!(
        out.status.success(),
        "reqcost report failed: {}",
        stderr(&out)
    );
    let top = output_ok(
        Command::new(go())
            .args(["tool", "pprof", "-top", "-tagfocus", "class=links"])
            .arg(&pb),
        "go tool pprof",
    );
    let top = String::from_utf8_lossy(&top.stdout);
    assert!(top.contains("translate_links @ server.lua"), "{top}");
    assert!(!top.contains("wrap_text @ server.lua"), "{top}");
}

#[test]
fn embedded_lua_names_each_class_function() {
    let _alone = machine_alone();
    let scratch = TempDir::new("lua-embedded");
    let host = testbed().join("build/lua-host").display().to_string();
    let rec = lua_run(&scratch, &host, REQUESTS, &["--no-slow-phase"]);
    assert_lua_classes(&rec);
}

/// Of the samples in the Lua VM: (all, with Lua frames), of those tagged with a phase and of
/// those taken while the probes were paused (untagged: the unprobed passes).
fn vm_samples(p: &Profile) -> [(u64, u64); 2] {
    let mut out = [(0, 0); 2];
    for s in &p.stacks {
        let frames = || s.frames.iter().map(|&f| &p.frames[f as usize]);
        if !frames().any(|f| f.function == "luaV_execute") {
            continue;
        }
        let e = &mut out[usize::from(s.tag.is_none())];
        e.0 += s.count;
        e.1 += if frames().any(|f| f.module == "[lua]") {
            s.count
        } else {
            0
        };
    }
    out
}

/// A default run, its CPU from unprobed passes of each phase (the slow-client phases
/// included): the samples of the passes, taken with the Lua uprobes detached, name their Lua
/// functions as the probed phases' do, and the summary names the function of the costliest
/// class. What is left without frames is what the walk cannot see whatever the timing: samples
/// before the thread's first lua_resume, and walks overwritten before they were read.
#[test]
fn default_runs_name_lua_functions_in_unprobed_passes() {
    let _alone = machine_alone();
    let scratch = TempDir::new("lua-default");
    let rec = lua_run(&scratch, "lua5.4", 50, &[]);
    let main = rec.phases.iter().find(|ph| ph.name == "main").unwrap();
    let windows = main.cpu_windows.as_ref().expect("probes on");
    assert_eq!(
        windows.method,
        CpuMethod::UnprobedPass,
        "{}",
        windows.reason
    );
    let costliest = main
        .requests
        .as_ref()
        .and_then(|r| r.by_class.iter().max_by_key(|g| g.cpu_ns))
        .map(|g| g.name.as_str());
    assert_eq!(costliest, Some("wrap"));
    let p = rec.profile.as_ref().expect("the record keeps the profile");
    let [probed, unprobed] = vm_samples(p);
    eprintln!("VM samples with Lua frames: probed {probed:?}, unprobed passes {unprobed:?}");
    assert!(unprobed.0 > 0, "no sample of the unprobed passes");
    for (what, (all, lua)) in [("probed", probed), ("unprobed", unprobed)] {
        assert!(
            lua * 100 >= all * 90,
            "{what}: {lua} of {all} VM samples with Lua frames"
        );
    }
    let out = reqcost(&["report", &scratch.join("run.json").display().to_string()]);
    assert!(
        out.status.success(),
        "reqcost report failed: {}",
        stderr(&out)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let classes = text
        .split_once("by request class")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no per-class profile: {text}"));
    let wrap = format!("wrap_text @ server.lua:{}", defined_at("wrap_text"));
    let mut lines = classes
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("wrap "));
    assert!(lines.next().is_some(), "no class wrap: {classes}");
    assert!(
        lines.next().is_some_and(|l| l.contains(&wrap)),
        "wrap's top function is not {wrap}: {classes}"
    );
}

/// A server without Lua: nothing hooked, nothing said.
#[test]
fn a_server_without_lua_gets_no_lua_frames() {
    let _shared = machine_shared();
    let (scratch, port) = scratch_and_port("lua-none");
    let url = format!("gopher://127.0.0.1:{port}/");
    let saved = scratch.join("run.json").display().to_string();
    let mut argv: Vec<String> = [
        "run",
        "--no-slow-phase",
        "--url",
        &url,
        "-n",
        "50",
        "-o",
        &saved,
        "--",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.extend(testbed_server("clean", port));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let out = reqcost(&argv);
    assert!(out.status.success(), "reqcost run failed: {}", stderr(&out));
    assert!(!stderr(&out).contains("Lua"), "{}", stderr(&out));
    let rec = load_record(Path::new(&saved)).expect("record saved");
    let p = rec.profile.expect("the record keeps the profile");
    assert!(p.frames.iter().all(|f| f.module != "[lua]"));
    assert!(p.notes.iter().all(|n| !n.contains("Lua")), "{:?}", p.notes);
    assert!(
        rec.notes.iter().all(|n| !n.contains("Lua")),
        "{:?}",
        rec.notes
    );
}
