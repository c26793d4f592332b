//! `go tool pprof` reads what the pprof export writes: functions, flat and cumulative counts,
//! inlined frames and thread labels survive the trip.

use std::path::PathBuf;
use std::process::Command;

use reqcost_record::{Frame, Profile, RunRecord, SampleTag, Stack};
use reqcost_report::export::{ExportManager, Format, Subject};
use reqcost_testkit::{go, output_ok, TempDir};

fn frame(function: &str, module: &str, kernel: bool, inlined: bool) -> Frame {
    Frame {
        function: function.into(),
        module: module.into(),
        kernel,
        inlined,
        resolved: true,
    }
}

fn profile() -> Profile {
    Profile {
        event: "cpu-clock".into(),
        freq_hz: 499,
        period_ns: 2_004_008,
        duration_s: 2.0,
        samples: 10,
        lost: 0,
        truncated: 0,
        frames: vec![
            frame("__memmove_avx_unaligned_erms", "libc.so.6", false, false),
            frame("brigade_write", "libapr-1.so.0", false, true),
            frame("apr_brigade_puts", "libapr-1.so.0", false, false),
            frame("main", "apache2", false, false),
            frame("copy_user_generic", "[kernel.kallsyms]", true, false),
            frame("__libc_write", "libc.so.6", false, false),
        ],
        stacks: vec![
            Stack {
                frames: vec![0, 1, 2, 3],
                thread: "apache2".into(),
                count: 6,
                tag: None,
            },
            Stack {
                frames: vec![4, 5, 3],
                thread: "apache2".into(),
                count: 3,
                tag: None,
            },
            Stack {
                frames: vec![3],
                thread: "apache2".into(),
                count: 1,
                tag: None,
            },
        ],
        notes: vec![],
        tags: vec![],
        hop_stacks: vec![],
    }
}

/// The profile-run fixture (attached to `httpd`) with `profile`.
fn record(profile: Profile) -> RunRecord {
    let mut rec = RunRecord::from_json(include_str!(
        "../../analysis/tests/fixtures/profile-run.json"
    ))
    .unwrap();
    rec.profile = Some(profile);
    rec
}

/// `rec`'s pprof export, written in `scratch`.
fn exported(rec: &RunRecord, scratch: &TempDir) -> PathBuf {
    let file = scratch.join("profile.pb.gz");
    let mut exports = ExportManager::default();
    exports.add(Format::Pprof, &file);
    exports
        .write(&Subject::Run(&reqcost_analysis::reading::Reading::of(
            rec, None,
        )))
        .unwrap();
    file
}

fn pprof(args: &[&str], file: &std::path::Path) -> String {
    let out = output_ok(
        Command::new(go())
            .arg("tool")
            .arg("pprof")
            .args(args)
            .arg(file),
        "go tool pprof",
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn go_tool_pprof_reads_it() {
    let scratch = TempDir::new("pprof");
    let file = exported(&record(profile()), &scratch);

    let top = pprof(&["-top", "-sample_index=samples"], &file);
    assert!(top.starts_with("File: apache2\n"), "{top}");
    let line = |name: &str| {
        top.lines()
            .find(|l| l.trim_end().ends_with(name))
            .unwrap_or_else(|| panic!("{name} missing from:\n{top}"))
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    // flat, flat%, sum%, cum, cum%, name
    assert_eq!(line("__memmove_avx_unaligned_erms")[0], "6");
    assert_eq!(line("copy_user_generic")[0], "3");
    let main = line(" main");
    assert_eq!((main[0].as_str(), main[3].as_str()), ("1", "10"));
    // The inlined frame is its own function in pprof's view, under its caller.
    assert_eq!(line("brigade_write (inline)")[3], "6");

    let cpu = pprof(&["-top", "-sample_index=cpu", "-unit=ms"], &file);
    assert!(
        cpu.contains("12.02ms"),
        "6 samples of 2.004 ms each:\n{cpu}"
    );
    let tags = pprof(&["-tags"], &file);
    assert!(tags.contains("apache2"), "thread label missing:\n{tags}");
}

/// Stacks rooted in libc's start routine, as a binary without frame pointers unwinds: the
/// profile is still named after the server's binary, which is mapping 1 (Pyroscope's main
/// binary), not after libc.
#[test]
fn the_main_mapping_is_the_servers_binary() {
    let mut p = profile();
    p.frames
        .push(frame("__libc_start_call_main", "libc.so.6", false, false));
    for s in &mut p.stacks {
        s.frames.push(6);
    }
    let mut rec = record(p);
    rec.target.command = Some(vec!["/usr/sbin/apache2".into(), "-DFOREGROUND".into()]);
    let scratch = TempDir::new("pprof-main");
    let file = exported(&rec, &scratch);

    let top = pprof(&["-top"], &file);
    assert!(top.starts_with("File: apache2\n"), "{top}");
    let raw = pprof(&["-raw"], &file);
    let mappings = &raw[raw.find("Mappings").expect("a mapping list")..];
    let first = mappings.lines().nth(1).unwrap_or_default();
    assert!(
        first.trim_start().starts_with("1:") && first.contains("apache2"),
        "{mappings}"
    );
    assert!(raw.contains("PeriodType: cpu nanoseconds"), "{raw}");
    assert!(raw.contains("samples/count cpu/nanoseconds"), "{raw}");
}

/// What the thread served is each sample's labels: `-tagfocus class=...` keeps that class.
#[test]
fn sample_tags_are_labels() {
    let mut p = profile();
    p.tags = vec![
        SampleTag {
            class: "/blog".into(),
            client: "127.0.0.1".into(),
            speed: "< 16 KiB/s".into(),
            phase: "main".into(),
            request: String::new(),
            hop: 0,
        },
        SampleTag {
            class: "(unattributed)".into(),
            ..SampleTag::default()
        },
    ];
    p.stacks[0].tag = Some(0);
    p.stacks[1].tag = Some(1);
    let scratch = TempDir::new("pprof-tags");
    let file = exported(&record(p), &scratch);
    let tags = pprof(&["-tags"], &file);
    for want in [
        "class",
        "/blog",
        "(unattributed)",
        "client",
        "127.0.0.1",
        "phase",
        "main",
    ] {
        assert!(tags.contains(want), "{want} missing:\n{tags}");
    }
    let blog = pprof(
        &["-top", "-sample_index=samples", "-tagfocus", "class=/blog"],
        &file,
    );
    assert!(blog.contains("__memmove_avx_unaligned_erms"), "{blog}");
    assert!(!blog.contains("copy_user_generic"), "{blog}");
}
