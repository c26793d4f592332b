//! Fixture records and the small edits tests make to them.
//!
//! `fixtures/clean.json` is a well-behaved HTTP server (keep-alive, one writev per response,
//! 20 µs of CPU per request, a slow-client phase costing about the same, a profile without hot
//! spots). Its numbers are round per request: the main phase served 100 requests, the slow phase
//! 10, so 1 call in a main total is 0.01 per request. Tests move one figure at a time to either
//! side of a threshold.

use std::path::Path;

use reqcost_analysis::findings::{diagnose, Confidence, Finding};
use reqcost_record::{
    FdKind, Frame, IoDirection, IoStat, KernelStats, PerRequest, Phase, RunRecord, Stack,
    SyscallStat,
};

/// The fixture record `tests/fixtures/NAME` as stored.
pub fn fixture(name: &str) -> RunRecord {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    RunRecord::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The clean fixture, with what collection derives from the totals filled in.
pub fn clean() -> RunRecord {
    let mut rec = fixture("clean.json");
    derive(&mut rec);
    rec
}

/// The clean fixture changed by `change`, its derived figures recomputed afterwards.
pub fn edited(change: impl FnOnce(&mut RunRecord)) -> RunRecord {
    edit(clean(), change)
}

/// `rec` changed by `change`, its derived figures recomputed afterwards.
pub fn edit(mut rec: RunRecord, change: impl FnOnce(&mut RunRecord)) -> RunRecord {
    change(&mut rec);
    derive(&mut rec);
    rec
}

/// The fixtures keep totals only: per-request figures and the profile's sample count follow
/// from them, as they do when a run is collected.
fn derive(rec: &mut RunRecord) {
    for p in &mut rec.phases {
        p.per_request = PerRequest::from_totals(&p.server, p.client.ok as f64);
    }
    if let Some(profile) = &mut rec.profile {
        profile.samples = profile.stacks.iter().map(|s| s.count).sum();
    }
}

fn phase<'a>(rec: &'a mut RunRecord, name: &str) -> &'a mut Phase {
    rec.phases
        .iter_mut()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("the fixture has no phase {name}"))
}

pub fn main(rec: &mut RunRecord) -> &mut Phase {
    phase(rec, "main")
}

pub fn slow(rec: &mut RunRecord) -> &mut Phase {
    phase(rec, "slow-clients")
}

pub fn kernel(p: &mut Phase) -> &mut KernelStats {
    p.server
        .kernel
        .as_mut()
        .expect("the fixture has eBPF figures")
}

/// Sets one syscall's total calls and time, adding it when the phase has none.
pub fn set_syscall(p: &mut Phase, name: &str, count: u64, time_ns: u64) {
    let syscalls = &mut kernel(p).syscalls;
    match syscalls.iter_mut().find(|s| s.name == name) {
        Some(s) => {
            s.count = count;
            s.time_ns = time_ns;
        }
        None => syscalls.push(SyscallStat {
            name: name.into(),
            count,
            time_ns,
            ..Default::default()
        }),
    }
}

/// `calls` write(2) to regular files in all, 100 B and 1 µs each.
pub fn file_writes(p: &mut Phase, calls: u64) {
    set_io(
        p,
        "write",
        IoDirection::Write,
        FdKind::File,
        calls,
        calls * 100,
    );
    set_syscall(p, "write", calls, calls * 1000);
}

/// Sets the successful calls and bytes of one syscall on one kind of fd.
pub fn set_io(
    p: &mut Phase,
    syscall: &str,
    dir: IoDirection,
    kind: FdKind,
    calls: u64,
    bytes: u64,
) {
    let io = &mut kernel(p).io;
    match io
        .iter_mut()
        .find(|s| s.syscall == syscall && s.fd_kind == kind)
    {
        Some(s) => {
            s.calls = calls;
            s.bytes = bytes;
        }
        None => io.push(IoStat {
            syscall: syscall.into(),
            direction: dir,
            fd_kind: kind,
            calls,
            bytes,
            sizes: Vec::new(),
        }),
    }
}

/// The clean fixture whose main phase (100 requests) wrote its responses in `calls` writev
/// calls moving `bytes` in all, 1 µs each.
pub fn socket_writes(calls: u64, bytes: u64) -> RunRecord {
    edited(|r| {
        let m = main(r);
        set_io(
            m,
            "writev",
            IoDirection::Write,
            FdKind::Socket,
            calls,
            bytes,
        );
        set_syscall(m, "writev", calls, calls * 1000);
    })
}

/// Sets the phase's CPU time; the rest of it is user time.
pub fn set_cpu(p: &mut Phase, total_ns: u64, system_ns: u64) {
    let cpu = p.server.cpu.as_mut().expect("the fixture has CPU times");
    cpu.total_ns = total_ns;
    cpu.system_ns = system_ns;
    cpu.user_ns = total_ns - system_ns;
}

/// Sets the samples of the profile's stack whose leaf frame is `leaf`; 0 removes the stack, as
/// a profile lists only chains that were sampled.
pub fn set_stack(rec: &mut RunRecord, leaf: &str, count: u64) {
    let p = rec.profile.as_mut().expect("the fixture has a profile");
    let frames = &p.frames;
    let i = p
        .stacks
        .iter()
        .position(|s| frames[s.frames[0] as usize].function == leaf)
        .unwrap_or_else(|| panic!("no stack with leaf {leaf}"));
    if count == 0 {
        p.stacks.remove(i);
    } else {
        p.stacks[i].count = count;
    }
}

/// Adds a call chain, leaf first, with `count` samples.
pub fn add_stack(rec: &mut RunRecord, chain: &[Frame], count: u64) {
    let p = rec.profile.as_mut().expect("the fixture has a profile");
    let frames = chain
        .iter()
        .map(|f| match p.frames.iter().position(|g| g == f) {
            Some(i) => i as u32,
            None => {
                p.frames.push(f.clone());
                (p.frames.len() - 1) as u32
            }
        })
        .collect();
    p.stacks.push(Stack {
        frames,
        thread: "server".into(),
        count,
        tag: None,
    });
}

/// Adds `count` samples taken inside a syscall whose kernel code starts at `handler`
/// (`__x64_sys_openat`, `ksys_write`), as the sampler records a chain through the syscall entry.
pub fn add_syscall_stack(rec: &mut RunRecord, handler: &str, count: u64) {
    let chain = [
        kernel_frame(handler),
        kernel_frame("do_syscall_64"),
        kernel_frame("entry_SYSCALL_64_after_hwframe"),
        user_frame("main", "server"),
    ];
    add_stack(rec, &chain, count);
}

pub fn user_frame(function: &str, module: &str) -> Frame {
    Frame {
        function: function.into(),
        module: module.into(),
        kernel: false,
        inlined: false,
        resolved: !function.contains("+0x"),
    }
}

pub fn kernel_frame(function: &str) -> Frame {
    Frame {
        function: function.into(),
        module: "[kernel.kallsyms]".into(),
        kernel: true,
        inlined: false,
        resolved: true,
    }
}

/// The finding `id` of `rec`, failing the test with every finding when it is absent.
pub fn fired(rec: &RunRecord, id: &str) -> Finding {
    let all = diagnose(rec);
    all.iter()
        .find(|f| f.id == id)
        .cloned()
        .unwrap_or_else(|| panic!("no {id} finding; findings: {all:#?}"))
}

/// The confidence of the finding `id` of each of `records`, in order.
pub fn confidences(id: &str, records: &[RunRecord]) -> Vec<Confidence> {
    records.iter().map(|r| fired(r, id).confidence).collect()
}

/// What a finding says: a part of its title, parts of its evidence lines, its CPU share and
/// confidence.
pub struct Expected<'a> {
    pub title: &'a str,
    pub evidence: &'a [&'a str],
    pub share: f64,
    pub confidence: Confidence,
}

/// The finding `id` of `rec`, saying what `expected` says.
pub fn assert_fires(rec: &RunRecord, id: &str, expected: Expected) {
    let f = fired(rec, id);
    assert!(
        f.title.contains(expected.title),
        "{id}: the title does not say {:?}: {}",
        expected.title,
        f.title
    );
    assert_evidence(&f, expected.evidence);
    assert_share(&f, expected.share);
    assert_eq!(f.confidence, expected.confidence, "{id}: confidence");
}

/// No finding `id` in any of `records`, each named by what sets it apart.
pub fn assert_silent_on(id: &str, records: &[(&str, RunRecord)]) {
    for (case, rec) in records {
        silent(rec, id, case);
    }
}

pub fn assert_silent(rec: &RunRecord, id: &str) {
    silent(rec, id, "the record");
}

fn silent(rec: &RunRecord, id: &str, case: &str) {
    let all = diagnose(rec);
    assert!(
        all.iter().all(|f| f.id != id),
        "{id} fired on {case}: {:#?}",
        all.iter().find(|f| f.id == id)
    );
}

/// Each of `needles` appears in some line of the finding's evidence.
pub fn assert_evidence(f: &Finding, needles: &[&str]) {
    for n in needles {
        assert!(
            f.evidence.iter().any(|e| e.contains(n)),
            "{}: no evidence line says {n:?}: {:#?}",
            f.id,
            f.evidence
        );
    }
}

/// The finding explains `share` of the CPU, and is major from 10 % on.
pub fn assert_share(f: &Finding, share: f64) {
    assert!(
        (f.cpu_share - share).abs() < 1e-9,
        "{}: CPU share {} instead of {share}",
        f.id,
        f.cpu_share
    );
    assert_eq!(
        f.major,
        share >= 0.10,
        "{}: major flag at share {share}",
        f.id
    );
}

pub fn approx(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() < 1e-9,
        "{actual} instead of {expected}"
    );
}
