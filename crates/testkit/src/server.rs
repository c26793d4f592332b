//! Starting servers on loopback for a test, and what they need: their binary, a certificate.

use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::TempDir;

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

/// The command that runs `argv`, as the config writers return it.
pub fn command(argv: &[String]) -> Command {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

/// A running server; killed when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    // Dropped after the child is killed (fields drop in order after Drop::drop).
    pub dir: TempDir,
}

impl Drop for Server {
    /// Kills the server's process group, not only its first process: killed alone, nginx's
    /// master left its workers running, each holding its listening socket (69 of them on this
    /// machine after a day of test runs).
    fn drop(&mut self) {
        // SAFETY: kill(2) on the group this Server started; its leader is not reaped yet,
        // so the group's id is no one else's.
        unsafe { libc::kill(-(self.child.id() as libc::pid_t), libc::SIGKILL) };
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts `cmd` and waits until it accepts connections on `port`; its output goes to
    /// `dir/server.out`.
    pub fn start(cmd: Command, port: u16, dir: TempDir) -> Server {
        let at = format!("port {port}");
        Server::start_until(cmd, port, dir, &at, || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
    }

    /// Starts `cmd` and waits until it accepts connections on the Unix socket `path`; its
    /// output goes to `dir/server.out`. `port` is 0.
    pub fn start_unix(cmd: Command, path: &Path, dir: TempDir) -> Server {
        let at = path.display().to_string();
        Server::start_until(cmd, 0, dir, &at, || UnixStream::connect(path).is_ok())
    }

    fn start_until(
        mut cmd: Command,
        port: u16,
        dir: TempDir,
        at: &str,
        accepts: impl Fn() -> bool,
    ) -> Server {
        let log = std::fs::File::create(dir.join("server.out")).unwrap();
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let mut server = Server { child, port, dir };
        // A bound for a server that never listens, not a start-up time anything relies on.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if accepts() {
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                let out =
                    std::fs::read_to_string(server.dir.join("server.out")).unwrap_or_default();
                panic!("{cmd:?} exited with {status} before accepting connections:\n{out}");
            }
            assert!(
                Instant::now() < deadline,
                "{cmd:?} did not accept connections on {at} within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Generates a self-signed certificate for `localhost` with openssl; (cert, key).
pub fn self_signed(dir: &TempDir) -> (PathBuf, PathBuf) {
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
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
    // Servers that drop privileges read the key after doing so.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    (cert, key)
}
