//! The fault-injection suite: seeded random signals at random moments of `reqcost run` against
//! the testbed and nginx, and hostile servers. After every case: the exit code and record the
//! case calls for, and nothing left behind (process, cgroup, BPF program or link, temp file,
//! listener). The seed is printed; `REQCOST_FAULT_SEED=N cargo test chaos` replays a failure.

use std::net::{TcpListener, TcpStream};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqcost_record::{Outcome, RunRecord};
use reqcost_testkit::{config, free_port, TempDir};

use crate::util::*;

/// Signal cases per target: with two targets, 32 cases in CI.
const SIGNAL_CASES: usize = 16;

/// Longest start of a server on a loaded machine.
const START: Duration = Duration::from_secs(20);

const SIGNALS: [(libc::c_int, &str); 5] = [
    (libc::SIGINT, "SIGINT"),
    (libc::SIGTERM, "SIGTERM"),
    (libc::SIGHUP, "SIGHUP"),
    (libc::SIGQUIT, "SIGQUIT"),
    (libc::SIGKILL, "SIGKILL"),
];

/// When the signal comes.
#[derive(Debug, Clone, Copy)]
enum Moment {
    /// The server has not opened its port yet (it sleeps before it starts).
    StartUp,
    /// A warm-up long enough to be hit.
    WarmUp,
    /// A main phase of 20 s.
    Main,
    /// The slow-client phase: 200 KB responses at 64 KiB/s, seconds each.
    Slow,
    /// A short run: the signal lands anywhere from the end of main to after the record is saved.
    Saving,
}

const MOMENTS: [Moment; 5] = [
    Moment::StartUp,
    Moment::WarmUp,
    Moment::Main,
    Moment::Slow,
    Moment::Saving,
];

/// splitmix64: a seeded sequence, the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.next() % (to - from))
    }
}

/// `REQCOST_FAULT_SEED`, or one made from the clock; printed either way.
fn seed(suite: &str) -> Rng {
    let seed = std::env::var("REQCOST_FAULT_SEED")
        .ok()
        .map(|s| s.parse().expect("REQCOST_FAULT_SEED is a whole number"))
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("{suite}: REQCOST_FAULT_SEED={seed}");
    Rng(seed)
}

/// A server to run under reqcost: its command line (from the scratch directory and port) and
/// the `--url` path it serves a 200 KB file at.
struct Target {
    name: &'static str,
    scheme: &'static str,
    big: &'static str,
    argv: fn(&TempDir, u16) -> Vec<String>,
}

fn testbed_argv(_: &TempDir, port: u16) -> Vec<String> {
    testbed_server("clean", port)
}

fn nginx_argv(scratch: &TempDir, port: u16) -> Vec<String> {
    let www = scratch.join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::copy(testbed().join("content/200k.bin"), www.join("200k.bin")).unwrap();
    config::nginx(scratch.path(), port, &config::NginxConf::default())
}

const TESTBED: Target = Target {
    name: "testbed clean",
    scheme: "gopher",
    big: "9/200k.bin",
    argv: testbed_argv,
};

const NGINX: Target = Target {
    name: "nginx",
    scheme: "http",
    big: "200k.bin",
    argv: nginx_argv,
};

/// One case: what runs, which signal, when.
struct Case {
    signal: (libc::c_int, &'static str),
    moment: Moment,
    delay: Duration,
}

impl Case {
    fn draw(rng: &mut Rng) -> Case {
        let signal = SIGNALS[rng.below(SIGNALS.len())];
        let moment = MOMENTS[rng.below(MOMENTS.len())];
        // A short run is over in well under a second: aim at its end.
        let delay = match moment {
            Moment::Saving => rng.millis(0, 400),
            _ => rng.millis(0, 1500),
        };
        Case {
            signal,
            moment,
            delay,
        }
    }

    /// reqcost's flags for this moment, and the server's command wrapped so that it starts late
    /// for a start-up case.
    fn argv(&self, target: &Target, scratch: &TempDir, port: u16) -> Vec<String> {
        let record = scratch.join("run.json").display().to_string();
        let mut url = format!("{}://127.0.0.1:{port}/", target.scheme);
        let flags: &[&str] = match self.moment {
            Moment::StartUp => &["--startup-timeout", "60"],
            Moment::WarmUp => &["--warmup", "10000000", "-n", "10"],
            Moment::Main => &["--warmup", "0", "--duration", "20s", "--no-slow-phase"],
            Moment::Slow => {
                url.push_str(target.big);
                &["--warmup", "0", "-n", "20"]
            }
            Moment::Saving => &["--warmup", "0", "-n", "20", "--no-slow-phase"],
        };
        let mut argv: Vec<String> = ["run", "-o", &record, "--url", &url]
            .into_iter()
            .chain(flags.iter().copied())
            .map(String::from)
            .collect();
        // Symbolizing the samples takes seconds in a debug build: only a run that will never
        // get there (SIGKILL) samples, so that its perf events are among what must not stay.
        if self.signal.0 != libc::SIGKILL {
            argv.push("--no-sample".into());
        }
        argv.push("--".into());
        let server = (target.argv)(scratch, port);
        if let Moment::StartUp = self.moment {
            let quoted: Vec<String> = server.iter().map(|a| format!("'{a}'")).collect();
            // The sleep's command line, not reqcost's (which holds this script), is the marker.
            let script = format!(
                "t={}; sleep $t; exec {}",
                start_up_secs(port),
                quoted.join(" ")
            );
            argv.extend(["sh".into(), "-c".into(), script]);
        } else {
            argv.extend(server);
        }
        argv
    }
}

/// How long a start-up case's server waits before it starts: about 3 s, naming the case's port
/// so that the test can see the server has been started.
fn start_up_secs(port: u16) -> String {
    format!("3.{port}")
}

/// The command line of a start-up case's waiting server.
fn start_up_marker(port: u16) -> String {
    format!("sleep {}", start_up_secs(port))
}

/// What a case saw: reqcost's exit, its stderr, the record, and what it held while it ran.
struct Seen {
    output: Output,
    record: Option<RunRecord>,
    bpf: (Vec<u64>, Vec<u64>),
    pid: u32,
}

/// Runs reqcost with `argv`, waits for `moment`, sends `signal` after `delay`.
fn inject(case: &Case, argv: &[String], scratch: &TempDir, port: u16) -> Seen {
    let child = Command::new(env!("CARGO_BIN_EXE_reqcost"))
        .args(argv)
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("reqcost starts");
    let pid = child.id();
    // A start-up case waits for the server's wrapper, the others for the server's port.
    let marker = start_up_marker(port);
    let started = || match case.moment {
        Moment::StartUp => process_alive_with(&marker),
        _ => TcpStream::connect(("127.0.0.1", port)).is_ok(),
    };
    within(START, || started() || exited(pid));
    let deadline = Instant::now() + case.delay;
    let mut bpf = (Vec::new(), Vec::new());
    while Instant::now() < deadline {
        let (progs, links) = bpf_ids_held_by(pid);
        bpf.0.extend(progs);
        bpf.1.extend(links);
        thread::sleep(Duration::from_millis(25));
    }
    // SAFETY: signalling the reqcost process this test started (it may have exited: ESRCH).
    unsafe { libc::kill(pid as libc::pid_t, case.signal.0) };
    let output = finish(child);
    let record = RunRecord::load(&scratch.join("run.json")).ok();
    Seen {
        output,
        record,
        bpf,
        pid,
    }
}

/// Waits for reqcost's end; a case never takes more than a minute.
fn finish(mut child: Child) -> Output {
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("reqcost did not end within 60 s of the case's start");
        }
        thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.contains(") Z "))
        .unwrap_or(true)
}

/// Processes whose cgroup is one of reqcost process `pid`'s, or whose command line names the
/// case's scratch directory or port.
fn processes_of(pid: u32, scratch: &TempDir, port: u16) -> Vec<String> {
    let group = format!("reqcost-{pid}-");
    let markers = [
        scratch.path().display().to_string(),
        format!("--port {port} "),
        start_up_marker(port),
    ];
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let cgroup = std::fs::read_to_string(e.path().join("cgroup")).ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (cgroup.contains(&group) || markers.iter().any(|m| cmdline.contains(m)))
                .then(|| format!("{}: {cmdline}", e.file_name().to_string_lossy()))
        })
        .collect()
}

/// Nothing of the case is left: process, cgroup, BPF object, temp file, listener. After a
/// SIGKILL only the server log may stay, for the next run to remove.
fn assert_nothing_left(what: &str, seen: &Seen, scratch: &TempDir, port: u16, killed: bool) {
    assert!(
        eventually(|| processes_of(seen.pid, scratch, port).is_empty()),
        "{what}: processes left: {:?}",
        processes_of(seen.pid, scratch, port)
    );
    let stale = |p: &PathBuf| !(killed && p.extension().is_some_and(|e| e == "log"));
    assert!(
        eventually(|| !leftovers_of(seen.pid).iter().any(stale)),
        "{what}: cgroups or temp files left: {:?}",
        leftovers_of(seen.pid)
    );
    let held = |ours: &[u64], kind| {
        let listed = bpftool_ids(kind);
        ours.iter().any(|id| listed.contains(id))
    };
    assert!(
        eventually(|| !held(&seen.bpf.0, "prog") && !held(&seen.bpf.1, "link")),
        "{what}: BPF programs or links left ({:?})",
        seen.bpf
    );
    assert!(
        eventually(|| TcpStream::connect(("127.0.0.1", port)).is_err()),
        "{what}: something still listens on port {port}"
    );
    let tmp: Vec<_> = std::fs::read_dir(scratch.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(
        tmp.is_empty(),
        "{what}: temp files in the record's directory: {tmp:?}"
    );
}

/// The exit and record a case calls for: a start-up case ends with no record; a caught signal
/// saves a partial record (or a whole one if the run had already completed) and says "saved"
/// once; SIGKILL leaves whatever had been saved, whole.
fn assert_outcome(what: &str, case: &Case, seen: &Seen) {
    let err = stderr(&seen.output);
    assert!(!err.contains("panicked"), "{what}: {err}");
    let code = seen.output.status.code();
    if case.signal.0 == libc::SIGKILL {
        assert!(
            seen.output.status.signal() == Some(libc::SIGKILL) || code == Some(0),
            "{what}: {:?} {err}",
            seen.output.status
        );
        return;
    }
    let outcome = seen.record.as_ref().map(|r| &r.outcome);
    match (case.moment, code, outcome) {
        (Moment::StartUp, Some(1), None) => {
            assert!(
                err.contains("interrupted while waiting for the server to start"),
                "{what}: {err}"
            );
        }
        (Moment::StartUp, ..) => panic!("{what}: {code:?} {outcome:?} {err}"),
        (_, Some(1), Some(Outcome::Interrupted)) => {
            assert_eq!(err.matches("record saved").count(), 1, "{what}: {err}");
            assert!(
                err.contains("interrupted; partial record saved"),
                "{what}: {err}"
            );
        }
        (Moment::Slow | Moment::Saving, Some(0), Some(Outcome::Completed)) => {
            assert_eq!(err.matches("record saved").count(), 1, "{what}: {err}");
            assert!(!err.contains("partial"), "{what}: {err}");
        }
        _ => panic!("{what}: exit {code:?}, outcome {outcome:?}: {err}"),
    }
}

fn signal_cases(suite: &str, target: &Target) {
    let _shared = machine_shared();
    let mut rng = seed(suite);
    for n in 0..SIGNAL_CASES {
        let case = Case::draw(&mut rng);
        let (scratch, port) = (TempDir::new("chaos"), free_port());
        let argv = case.argv(target, &scratch, port);
        let what = format!(
            "{suite} case {n}: {} at {:?} +{:?} against {}",
            case.signal.1, case.moment, case.delay, target.name
        );
        let started = Instant::now();
        let seen = inject(&case, &argv, &scratch, port);
        eprintln!("{what}: {:?}", started.elapsed());
        assert_outcome(&what, &case, &seen);
        let killed = case.signal.0 == libc::SIGKILL;
        assert_nothing_left(&what, &seen, &scratch, port, killed);
        if killed {
            remove_dead_runs_now();
            assert_eq!(leftovers_of(seen.pid), Vec::<PathBuf>::new(), "{what}");
        }
    }
}

/// What a SIGKILLed run leaves (its server log) is removed by the next run, at its start; a run
/// refused at once for a taken port is such a run.
fn remove_dead_runs_now() {
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "gopher://127.0.0.1:{}/",
        holder.local_addr().unwrap().port()
    );
    let out = reqcost(&["run", "--url", &url, "--", "true"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

#[test]
fn random_signals_against_the_testbed() {
    signal_cases("testbed", &TESTBED);
}

#[test]
fn random_signals_against_nginx() {
    signal_cases("nginx", &NGINX);
}

/// Python servers that misbehave, each given its port as its first argument.
const HOSTILE_PRELUDE: &str = r#"
import os, socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
"#;

/// (name, scheme, the server's loop after the prelude, exit code, what the error says)
const HOSTILE: [(&str, &str, &str, u8, &str); 6] = [
    (
        "endless response",
        "gopher",
        "while True:\n    c, _ = s.accept()\n    c.recv(1024)\n    try:\n        while True: c.sendall(b'x' * 65536)\n    except OSError: c.close()",
        1,
        "larger than --max-response",
    ),
    (
        "silent",
        "gopher",
        "held = []\nwhile True: held.append(s.accept())",
        1,
        "stopped answering",
    ),
    (
        "garbage",
        "http",
        "while True:\n    c, _ = s.accept()\n    c.recv(1024)\n    c.sendall(os.urandom(300) + b'\\r\\n\\r\\n')\n    c.close()",
        1,
        "do not follow the --url scheme's protocol",
    ),
    (
        "close at once",
        "http",
        "while True: s.accept()[0].close()",
        1,
        "requests failed",
    ),
    (
        "listen only",
        "gopher",
        "time.sleep(600)",
        1,
        "stopped answering",
    ),
    (
        "fork bomb within limits",
        "gopher",
        "for _ in range(40):\n    if os.fork() == 0:\n        os.setsid()\n        if os.fork() == 0: time.sleep(600)\n        os._exit(0)\nwhile True:\n    c, _ = s.accept()\n    c.recv(1024)\n    c.sendall(b'iok\\r\\n.\\r\\n')\n    c.close()",
        0,
        "",
    ),
];

/// Hostile servers end a default-length run in bounded time with the failure named by its
/// kind, and leave nothing: not even the detached grandchildren of a fork bomb.
#[test]
fn hostile_servers() {
    let _shared = machine_shared();
    for (name, scheme, body, code, says) in HOSTILE {
        let (scratch, port) = (TempDir::new("hostile"), free_port());
        let url = format!("{scheme}://127.0.0.1:{port}/");
        let script = format!("{HOSTILE_PRELUDE}{body}\n");
        // The marker lets processes_of find every descendant by its command line.
        let server = [
            "python3".to_string(),
            "-c".into(),
            script,
            port.to_string(),
            format!("--port {port} "),
        ];
        let record = scratch.join("run.json").display().to_string();
        let mut argv = vec![
            "run",
            "-o",
            &record,
            "--url",
            &url,
            "-n",
            "50",
            "--request-timeout",
            "1s",
            "--max-response",
            "1MiB",
            "--no-sample",
        ];
        argv.push("--");
        argv.extend(server.iter().map(String::as_str));
        let child = Command::new(env!("CARGO_BIN_EXE_reqcost"))
            .args(&argv)
            .current_dir(std::env::temp_dir())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let started = Instant::now();
        let output = finish(child);
        eprintln!("hostile {name}: {:?}", started.elapsed());
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(i32::from(code)), "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
        let record = RunRecord::load(Path::new(&record)).ok();
        assert!(record.is_some(), "{name}: no record: {err}");
        let seen = Seen {
            output,
            record,
            bpf: (Vec::new(), Vec::new()),
            pid,
        };
        assert_nothing_left(name, &seen, &scratch, port, false);
    }
}
