//! What the CLI's integration tests share: the binary, the testbed, and who may measure at once.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use reqcost_analysis::document::Analysis;
use reqcost_record::RunRecord;
use reqcost_testkit::{command, free_port, self_signed, Server, TempDir};
pub use reqcost_testkit::{testbed, PYTHON};

/// Tests that measure a server take this: shared by those that tolerate one another, as the
/// tests of one file did when each file was its own test binary, alone for those whose verdicts
/// another run would move (two measurements at once on a 2-core machine measure each other).
static MACHINE: RwLock<()> = RwLock::new(());

/// The machine to this test alone, until the turn drops.
pub fn machine_alone() -> Turn<RwLockWriteGuard<'static, ()>> {
    // A failed test poisons the lock; the next one may still measure.
    Turn::take("alone", || {
        MACHINE.write().unwrap_or_else(|e| e.into_inner())
    })
}

/// The machine shared with the other shared tests, none of them alone, until the turn drops.
pub fn machine_shared() -> Turn<RwLockReadGuard<'static, ()>> {
    Turn::take("shared", || {
        MACHINE.read().unwrap_or_else(|e| e.into_inner())
    })
}

/// A test's turn at the machine. With `REQCOST_TEST_TURNS` set to a path, each turn appends a
/// line there as it ends: the test, its kind of turn, the seconds it waited for the turn and
/// the seconds it held it. libtest's own times count the wait, so they cannot tell which alone
/// tests make the binary long; these can (docs/testing.md, "Where the time goes").
pub struct Turn<G> {
    _guard: G,
    kind: &'static str,
    waited: Duration,
    taken: Instant,
}

impl<G> Turn<G> {
    fn take(kind: &'static str, lock: impl FnOnce() -> G) -> Turn<G> {
        let asked = Instant::now();
        let guard = lock();
        Turn {
            _guard: guard,
            kind,
            waited: asked.elapsed(),
            taken: Instant::now(),
        }
    }
}

impl<G> Drop for Turn<G> {
    fn drop(&mut self) {
        let Some(path) = std::env::var_os("REQCOST_TEST_TURNS") else {
            return;
        };
        let line = format!(
            "{}\t{}\t{:.1}\t{:.1}\n",
            std::thread::current().name().unwrap_or("?"),
            self.kind,
            self.waited.as_secs_f64(),
            self.taken.elapsed().as_secs_f64()
        );
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        // A trace that cannot be written costs no test.
        let _ = file.and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
    }
}

/// A scratch directory named after `tag` and a free port, as every measuring test starts.
pub fn scratch_and_port(tag: &str) -> (TempDir, u16) {
    (TempDir::new(tag), free_port())
}

/// A copy of the testbed's 1 KB file in `scratch/www`, where the server configs serve from.
pub fn www_1k(scratch: &TempDir) {
    let dir = scratch.join("www");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(testbed().join("content").join("1k.txt"), dir.join("1k.txt")).unwrap();
}

/// gtlsserver (Debian's ngtcp2 example: QUIC over UDP, GnuTLS) on `port`, serving `www/NAME`
/// of `size` bytes, with a fresh key and certificate.
pub fn gtlsserver(scratch: &TempDir, port: u16, (name, size): (&str, usize)) -> Vec<String> {
    let www = scratch.join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join(name), vec![b'x'; size]).unwrap();
    let (cert, key) = self_signed(scratch);
    [
        "gtlsserver",
        "-q",
        "-d",
        www.to_str().unwrap(),
        "127.0.0.1",
        &port.to_string(),
        key.to_str().unwrap(),
        cert.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

/// The command line of testbed server `name` on `port`.
pub fn testbed_server(name: &str, port: u16) -> Vec<String> {
    let dir = testbed();
    vec![
        dir.join("build").join(name).display().to_string(),
        "--port".into(),
        port.to_string(),
        "--root".into(),
        dir.join("content").display().to_string(),
    ]
}

/// Seconds a server launched through reqcost may take to accept: on a loaded machine (builds,
/// another suite beside this one) start-up has outlasted the default 10 s, and a server that
/// never accepts fails its test all the same, only later.
pub const STARTUP_TIMEOUT: &str = "120";

/// `args` with `--startup-timeout` [`STARTUP_TIMEOUT`] after the subcommand when it launches a
/// server (`run`, `compare`, `sweep`) and the test does not choose its own.
pub fn patient<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut argv = args.to_vec();
    let launches = matches!(args.first(), Some(&("run" | "compare" | "sweep")));
    let own = args
        .iter()
        .take_while(|&&a| a != "--")
        .any(|&a| a == "--startup-timeout");
    if launches && !own {
        argv.splice(1..1, ["--startup-timeout", STARTUP_TIMEOUT]);
    }
    argv
}

pub fn reqcost(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reqcost"))
        .args(patient(args))
        .current_dir(std::env::temp_dir())
        .output()
        .expect("reqcost runs")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `reqcost run` with `-o` into `scratch` and returns the output and the saved record.
pub fn run_saved(
    scratch: &TempDir,
    args: &[&str],
    server: &[String],
) -> (Output, Option<RunRecord>) {
    let record_path = scratch.join("run.json");
    let mut argv: Vec<&str> = vec!["run", "-o", record_path.to_str().unwrap()];
    argv.extend_from_slice(args);
    argv.push("--");
    argv.extend(server.iter().map(String::as_str));
    let out = reqcost(&argv);
    (out, load_record(&record_path))
}

/// The record saved at `path`, None when there is none; one that breaks its invariants
/// (docs/analysis.md, "Record invariants") fails the test that made it.
pub fn load_record(path: &Path) -> Option<RunRecord> {
    let record = RunRecord::load(path).ok()?;
    let violations: Vec<String> = reqcost_analysis::invariants::check(&record)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        violations.is_empty(),
        "{}: the record breaks its invariants:\n{}",
        path.display(),
        violations.join("\n")
    );
    Some(record)
}

/// `reqcost sweep -c 5,10,15 --repeat 1 --load LOAD --port PORT --no-sample --json` of
/// `server`, its records saved in `out_dir`: the sweep document, after asserting success.
pub fn sweep_5_10_15(
    load: &str,
    port: u16,
    out_dir: &Path,
    server: &[String],
) -> serde_json::Value {
    sweep_5_10_15_repeated(load, port, out_dir, server, 1, &[])
}

/// [`sweep_5_10_15`] with `repeat` runs per level and `extra` options.
pub fn sweep_5_10_15_repeated(
    load: &str,
    port: u16,
    out_dir: &Path,
    server: &[String],
    repeat: u32,
    extra: &[&str],
) -> serde_json::Value {
    let port_arg = port.to_string();
    let repeat = repeat.to_string();
    let mut args = vec![
        "sweep",
        "-c",
        "5,10,15",
        "--repeat",
        &repeat,
        "--load",
        load,
        "--port",
        &port_arg,
        "--no-sample",
        "--json",
        "--out-dir",
        out_dir.to_str().unwrap(),
    ];
    args.extend(extra);
    args.push("--");
    args.extend(server.iter().map(String::as_str));
    let out = reqcost(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The analysis document `reqcost report --json` prints of the record at `path`.
pub fn report_json(path: &Path) -> Analysis {
    let out = reqcost(&["report", "--json", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not an analysis document ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// True if any live process has `marker` in its command line.
pub fn process_alive_with(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(marker)
            })
            .unwrap_or(false)
    })
}

/// The stages a reqcost run with `REQCOST_STAGE_FILE=file` has said it entered, in order
/// (docs/testing.md).
pub fn stages(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

/// Waits until reqcost process `pid`, run with `REQCOST_STAGE_FILE=file`, says it entered
/// `stage`: true then, false if it ended first. The minute is a bound for a reqcost that hangs,
/// never a moment a test relies on.
pub fn wait_for_stage(file: &Path, stage: &str, pid: u32) -> bool {
    within(Duration::from_secs(60), || {
        stages(file).iter().any(|s| s == stage) || exited(pid)
    });
    stages(file).iter().any(|s| s == stage)
}

/// Whether process `pid` has ended (a zombie not yet reaped, or gone).
pub fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.contains(") Z "))
        .unwrap_or(true)
}

/// One line, non-zero exit, no panic: what every bad input must produce.
pub fn assert_clean_failure(out: &Output, expect: &str) {
    let err = stderr(out);
    assert!(
        !out.status.success(),
        "expected failure, got success; stderr: {err}"
    );
    assert!(!err.contains("panicked"), "reqcost panicked: {err}");
    let error_lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(
        error_lines.len(),
        1,
        "expected exactly one error line: {err}"
    );
    assert!(
        error_lines[0].contains(expect),
        "error line should mention {expect:?}: {err}"
    );
}

/// What a run of reqcost process `pid` may leave: its cgroups and its server log.
pub fn leftovers_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("reqcost-{pid}-");
    ["/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/unified"]
        .iter()
        .map(Path::new)
        .chain([std::env::temp_dir().as_path()])
        .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// Polls `done` for a few seconds: the kernel reaps killed processes asynchronously.
pub fn eventually(done: impl Fn() -> bool) -> bool {
    within(Duration::from_secs(5), done)
}

/// Polls `done` until it holds or `limit` has passed; whether it held.
pub fn within(limit: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while !done() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// The ids of the BPF programs and links process `pid` holds fds on (`prog_id:` and
/// `link_id:` in their fdinfo).
pub fn bpf_ids_held_by(pid: u32) -> (Vec<u64>, Vec<u64>) {
    let (mut progs, mut links) = (Vec::new(), Vec::new());
    // A process that has exited holds nothing.
    let fds = std::fs::read_dir(format!("/proc/{pid}/fdinfo"));
    for fd in fds.into_iter().flatten().flatten() {
        let info = std::fs::read_to_string(fd.path()).unwrap_or_default();
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
        };
        match (field("link_id:"), field("prog_id:")) {
            (Some(link), _) => links.push(link),
            (None, Some(prog)) => progs.push(prog),
            _ => {}
        }
    }
    (progs, links)
}

/// The ids `bpftool -j prog|link show` lists now.
pub fn bpftool_ids(kind: &str) -> Vec<u64> {
    let out = Command::new("bpftool")
        .args(["-j", kind, "show"])
        .output()
        .expect("bpftool runs");
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["id"].as_u64())
        .collect()
}

/// A gopher client in Python: `N` requests for the menu, one connection each, on `PORT`.
pub const GOPHER_CLIENT: &str = "import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
for _ in range(n):
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(b'\\r\\n')
    while s.recv(65536):
        pass
    s.close()
";

/// Debian 12's PostgreSQL.
const POSTGRESQL_BIN: &str = "/usr/lib/postgresql/15/bin";

/// A fresh PostgreSQL cluster in `scratch` (initdb as the postgres user, trust authentication)
/// and the command that runs it on loopback `port`, its socket in `scratch` too.
pub fn postgresql(scratch: &TempDir, port: u16) -> Vec<String> {
    let (data, sockets) = (scratch.join("data"), scratch.join("sockets"));
    for dir in [&data, &sockets] {
        std::fs::create_dir_all(dir).unwrap();
        let chown = Command::new("chown")
            .arg("postgres:postgres")
            .arg(dir)
            .status()
            .expect("chown runs");
        assert!(chown.success(), "chown postgres {}", dir.display());
    }
    let initdb = Command::new("runuser")
        .args([
            "-u",
            "postgres",
            "--",
            &format!("{POSTGRESQL_BIN}/initdb"),
            "-A",
            "trust",
            "-D",
        ])
        .arg(&data)
        .current_dir(scratch.path())
        .output()
        .expect("initdb runs (scripts/bootstrap installs postgresql)");
    assert!(initdb.status.success(), "initdb: {}", stderr(&initdb));
    [
        "runuser",
        "-u",
        "postgres",
        "--",
        &format!("{POSTGRESQL_BIN}/postgres"),
        "-D",
        &data.display().to_string(),
        "-p",
        &port.to_string(),
        "-k",
        &sockets.display().to_string(),
        "-c",
        "listen_addresses=127.0.0.1",
    ]
    .map(String::from)
    .to_vec()
}

/// The PostgreSQL of `argv` ([`postgresql`]) started as the postgres user directly (no runuser
/// between), so that killing it stops the cluster; its output in `dir`.
pub fn postgresql_server(scratch: &TempDir, argv: &[String], port: u16, dir: TempDir) -> Server {
    let server_argv = &argv[argv.iter().position(|a| a == "--").unwrap() + 1..];
    let ids = |flag: &str| -> u32 {
        let out = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    let mut cmd = command(server_argv);
    cmd.uid(ids("-u"))
        .gid(ids("-g"))
        .current_dir(scratch.path());
    Server::start(cmd, port, dir)
}

/// [`postgresql`] with pgbench's tables (scale 1) made in it first, by a server of its own
/// that is stopped before this returns.
pub fn postgresql_with_pgbench_tables(scratch: &TempDir, port: u16) -> Vec<String> {
    let server = postgresql(scratch, port);
    let pg_ctl = |args: &[&str]| {
        let out = Command::new("runuser")
            .args([
                "-u",
                "postgres",
                "--",
                &format!("{POSTGRESQL_BIN}/pg_ctl"),
                "-w",
                "-D",
            ])
            .arg(scratch.join("data"))
            .args(args)
            .current_dir(scratch.path())
            .output()
            .expect("pg_ctl runs");
        assert!(out.status.success(), "pg_ctl {args:?}: {}", stderr(&out));
    };
    let options = format!(
        "-p {port} -k {} -c listen_addresses=127.0.0.1",
        scratch.join("sockets").display()
    );
    // A log file, so that the server holds none of pg_ctl's output open.
    let log = scratch.join("sockets").join("init.log");
    pg_ctl(&["-o", &options, "-l", log.to_str().unwrap(), "start"]);
    let init = Command::new("pgbench")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres"])
        .args(["-i", "-s", "1", "-q", "postgres"])
        .output()
        .expect("pgbench runs");
    pg_ctl(&["-m", "fast", "stop"]);
    assert!(init.status.success(), "pgbench -i: {}", stderr(&init));
    server
}

/// Debian's MariaDB in `scratch`: a data directory made by mariadb-install-db (root by
/// password, none set), a database `bench` and a passwordless user `bench` for clients over TCP
/// from 127.0.0.1, made by `setup` (SQL) and then `prepare` (a shell command line, run with the
/// server up: sysbench's tables) on a server of its own; the argv that runs mariadbd on
/// `port`, as the mysql user (mariadbd's own --user), its socket and pid file in `scratch/run`
/// (the mysql user's).
pub fn mariadb(scratch: &TempDir, port: u16, setup: &str, prepare: Option<&str>) -> Vec<String> {
    let (data, run, tmp) = (
        scratch.join("data"),
        scratch.join("run"),
        scratch.join("tmp"),
    );
    for dir in [&data, &run, &tmp] {
        std::fs::create_dir_all(dir).unwrap();
        let chown = Command::new("chown")
            .arg("mysql:mysql")
            .arg(dir)
            .status()
            .expect("chown runs");
        assert!(chown.success(), "chown mysql {}", dir.display());
    }
    let install = Command::new("mariadb-install-db")
        .args(["--no-defaults", "--user=mysql", "--skip-test-db"])
        .arg("--auth-root-authentication-method=normal")
        .arg(format!("--datadir={}", data.display()))
        // Its own temporary directory: a mariadbd starting meanwhile removes the `#sql` files
        // of /tmp, the bootstrap's temporary tables among them ("Unknown table
        // 'mysql.tmp_user_sys'" when two tests ran at once).
        .arg(format!("--tmpdir={}", tmp.display()))
        .current_dir(scratch.path())
        .output()
        .expect("mariadb-install-db runs (scripts/bootstrap installs mariadb-server)");
    assert!(
        install.status.success(),
        "mariadb-install-db: {}",
        stderr(&install)
    );
    let socket = run.join("mariadb.sock");
    let server: Vec<String> = [
        "mariadbd".into(),
        "--no-defaults".into(),
        format!("--datadir={}", data.display()),
        format!("--port={port}"),
        "--bind-address=127.0.0.1".into(),
        format!("--socket={}", socket.display()),
        format!("--pid-file={}", run.join("mariadb.pid").display()),
        format!("--tmpdir={}", tmp.display()),
        "--user=mysql".into(),
        // Readiness probes connect and close: no host is blocked for them.
        "--skip-name-resolve".into(),
        "--max-connect-errors=1000000".into(),
    ]
    .to_vec();
    let init = reqcost_testkit::Server::start(
        reqcost_testkit::command(&server),
        port,
        TempDir::new("mariadb-init"),
    );
    let sql = format!(
        "CREATE DATABASE bench; CREATE USER 'bench'@'127.0.0.1'; \
         GRANT ALL ON bench.* TO 'bench'@'127.0.0.1'; USE bench; {setup}"
    );
    let root = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(["--no-defaults", "-uroot"])
            .arg(format!("--socket={}", socket.display()))
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program} runs: {e}"))
    };
    let made = root("mariadb", &["-e", &sql]);
    let prepared = prepare.map(|cmd| Command::new("sh").args(["-c", cmd]).output().unwrap());
    // Waits for the server to have stopped (its pid file gone), so that its data is whole.
    let stopped = root("mariadb-admin", &["shutdown"]);
    drop(init);
    assert!(made.status.success(), "mariadb: {}", stderr(&made));
    if let Some(out) = prepared {
        assert!(out.status.success(), "{prepare:?}: {}", stderr(&out));
    }
    assert!(
        stopped.status.success(),
        "mariadb-admin shutdown: {}",
        stderr(&stopped)
    );
    server
}

/// One HTTP/1.1 response read from `reader` to the end of its body (as its Content-Length
/// says, 0 without one): its bytes in all, head included, and its body.
pub fn read_http_response(reader: &mut impl std::io::BufRead) -> (usize, Vec<u8>) {
    let (mut head, mut length) = (0, 0);
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        head += line.len();
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    (head + length, body)
}
