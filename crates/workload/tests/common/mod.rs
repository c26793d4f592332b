//! Starting real servers on loopback for the tests: each gets its own config in a temporary
//! directory and a free port, and is killed (and its directory removed) when the guard drops,
//! even when the test fails.

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use clap::Parser;
use reqcost_record::ClientStats;
use reqcost_workload::{Plan, WorkloadArgs};

pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("reqcost-wl-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        // Servers drop privileges to nobody: let them traverse and read it.
        let _ = Command::new("chmod").arg("755").arg(&dir).status();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn write(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.0.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, data).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running server; killed when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    // Dropped after the child is killed (fields drop in order after Drop::drop).
    pub dir: TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `cmd` and waits until it accepts connections on `port`.
    pub fn start(mut cmd: Command, port: u16, dir: TempDir) -> Server {
        let log = std::fs::File::create(dir.path().join("server.out")).unwrap();
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let mut server = Server { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                let out = std::fs::read_to_string(server.dir.path().join("server.out"))
                    .unwrap_or_default();
                panic!("{cmd:?} exited with {status} before accepting connections:\n{out}");
            }
            assert!(
                Instant::now() < deadline,
                "{cmd:?} did not accept connections on port {port} within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Finds a server binary; None (with a message saying the test is skipped) when absent.
/// The path of an installed program; a test that needs one fails when it is missing, rather than
/// passing without having run.
pub fn binary(name: &str) -> PathBuf {
    for dir in [
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
        "/usr/local/bin",
        "/usr/local/sbin",
    ] {
        let p = Path::new(dir).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!("{name} is not installed: run scripts/bootstrap");
}

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    workload: WorkloadArgs,
}

pub fn args(argv: &[&str]) -> WorkloadArgs {
    Wrapper::try_parse_from(std::iter::once("reqcost").chain(argv.iter().copied()))
        .unwrap_or_else(|e| panic!("bad test arguments {argv:?}: {e}"))
        .workload
}

pub fn plan(argv: &[&str]) -> Plan {
    args(argv)
        .plan()
        .unwrap_or_else(|e| panic!("plan {argv:?}: {e}"))
}

/// Runs the phase named `name` of the plan.
pub fn run(plan: &Plan, name: &str) -> ClientStats {
    let phase = plan
        .phases()
        .into_iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no phase {name}"));
    plan.run(&phase, &AtomicBool::new(false), &|_| {})
}

/// Generates a self-signed certificate for `localhost` with openssl; (cert, key).
pub fn self_signed(dir: &TempDir) -> (PathBuf, PathBuf) {
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run openssl");
    assert!(status.success(), "openssl req failed");
    let _ = Command::new("chmod").arg("644").arg(&key).status();
    (cert, key)
}

/// nginx with one worker in the foreground, serving `dir/www`; `extra` goes in the server block.
pub fn nginx(dir: TempDir, extra: &str, tls: Option<(&Path, &Path)>) -> Server {
    let bin = binary("nginx");
    let port = free_port();
    let d = dir.path().display().to_string();
    let listen = match tls {
        Some((cert, key)) => format!(
            "listen 127.0.0.1:{port} ssl; ssl_certificate {}; ssl_certificate_key {};",
            cert.display(),
            key.display()
        ),
        None => format!("listen 127.0.0.1:{port};"),
    };
    let conf = format!(
        "worker_processes 1;\ndaemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n access_log {d}/access.log;\n client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp;\n\
          fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;\n\
          server {{ {listen} root {d}/www; {extra} }}\n}}\n"
    );
    let conf_path = dir.write("nginx.conf", conf.as_bytes());
    let mut cmd = Command::new(bin);
    cmd.arg("-p").arg(dir.path()).arg("-c").arg(conf_path);
    Server::start(cmd, port, dir)
}
