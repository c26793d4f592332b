//! What reqcost's tests share: a free loopback port, a scratch directory removed when the test
//! ends, real servers (nginx, apache2, lighttpd) started from the configs in `conf/`, which
//! bench/ fills in too, and the request events the probes would report.

pub mod config;
mod server;
pub mod stack;

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, Once};

use reqcost_record::{RequestEvent, TlsPart};

pub use server::{binary, command, self_signed, Server};

/// A request the server read `head` of from `peer` (an IP address; port 40000) on its port 70,
/// closed, that cost nothing yet: a test sets the figures it checks over it
/// (`RequestEvent { cpu_ns, ..request_event(head, peer) }`).
pub fn request_event(head: &str, peer: &str) -> RequestEvent {
    RequestEvent {
        pid: 1,
        conn_id: 1,
        seq: 0,
        peer: std::net::SocketAddr::new(peer.parse().expect("IP address"), 40000),
        local_port: 70,
        cpu_ns: 0,
        syscalls: 0,
        top_syscalls: Vec::new(),
        unlisted_max: None,
        bytes_in: head.len() as u64,
        bytes_out: 0,
        first_in_ns: 0,
        last_out_ns: 0,
        end_ns: 0,
        last_ns: 0,
        head: head.as_bytes().to_vec(),
        closed: true,
        tls: TlsPart::None,
        tls_resumed: None,
        http2_streams: None,
        http2_lost: false,
        commands: None,
        in_flight: false,
        unacked_out: 0,
        caused_by: None,
        hop: 0,
        upstream_call: false,
    }
}

/// Debian's Python, which the bootstrap installs, by its path: a pyenv or virtualenv shim ahead
/// of it in PATH is a shell script, and a shell started before each Python process (one per
/// connection in the per-connection servers) made those tests several times longer and measured
/// the shim with the server.
pub const PYTHON: &str = "/usr/bin/python3";

/// The testbed's directory (testbed/ at the workspace root), its servers built once per test
/// binary.
pub fn testbed() -> PathBuf {
    static BUILD: Once = Once::new();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testbed");
    BUILD.call_once(|| {
        let status = Command::new("make")
            .args(["-s", "-C"])
            .arg(&dir)
            .status()
            .expect("make runs");
        assert!(status.success(), "building the testbed failed");
    });
    dir
}

/// Go's `go` command, for `go tool pprof`: on PATH or where the Go tarball installs it.
pub fn go() -> PathBuf {
    let installed = PathBuf::from("/usr/local/go/bin/go");
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("go"))
            .find(|g| g.is_file())
    });
    on_path
        .or_else(|| installed.is_file().then_some(installed))
        .expect("this test needs Go's `go tool pprof`: install Go (golang-go) or put it on PATH")
}

/// Runs `cmd` to its end; fails the test with its stderr unless it succeeded. `what` names the
/// program and where it comes from, for the failure message.
pub fn output_ok(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Headless Chromium on `page` with `args`, its profile and network log in `dir`.
pub fn chromium(dir: &Path, page: &Path, args: &[&str]) -> Output {
    chromium_at(dir, page, "", args)
}

/// [`chromium`] on `page` with `fragment` (`#...`) in its address.
pub fn chromium_at(dir: &Path, page: &Path, fragment: &str, args: &[&str]) -> Output {
    output_ok(
        Command::new("chromium")
            .args(["--headless", "--no-sandbox", "--disable-gpu"])
            // Chromium's own update and account checks would fill the network log.
            .args(["--disable-background-networking", "--no-first-run"])
            .arg(format!("--user-data-dir={}", dir.join("profile").display()))
            .arg(format!("--log-net-log={}", dir.join("net.json").display()))
            .args(["--enable-logging=stderr", "--v=0"])
            .args(args)
            .arg(format!("file://{}{fragment}", page.display())),
        "Debian's chromium (scripts/bootstrap installs it)",
    )
}

/// A loopback TCP port that is free now and was not handed out before in this process: the
/// kernel may offer a just-released port again, and two tests starting servers on one port
/// would each find the other's server ready.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if given.insert(port) {
            return port;
        }
    }
}

/// A scratch directory, removed when dropped; kept when the test fails, so that the record a
/// rare failure left can be read afterwards (CI runs on this machine).
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory under the system's temporary directory, named after `tag`.
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("reqcost-test-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        // Servers drop privileges (to nobody, www-data): let them traverse and read it.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The path of `name` inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes `data` to `name` inside the directory, creating its parents; returns its path.
    pub fn write(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, data).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "kept the failed test's scratch directory {}",
                self.0.display()
            );
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
