use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::accounting::{comm, CgroupDir, TreeCost};
use crate::containment::{KillGroup, Watchdog};
use crate::machine::cpu_set;
use crate::sockets::{describe_holder, holds_any_socket, listening_inodes};

/// How to start the server.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    pub command: Vec<String>,
    /// CPUs the server tree may use; `None` leaves affinity alone.
    pub cpus: Option<Vec<u32>>,
    /// File receiving the server's stdout and stderr, shown when it fails to start.
    pub log_path: PathBuf,
    /// Name for the server's own cpuacct cgroup, unique per run.
    pub cgroup_name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("server command not found: {0} (check the path, or install it)")]
    NotFound(String),
    #[error("cannot start server command {command}: {err}")]
    Spawn {
        command: String,
        err: std::io::Error,
    },
    #[error("server exited at start ({status}) before accepting on {addr}{tail}")]
    ExitedAtStart {
        status: String,
        addr: SocketAddr,
        tail: String,
    },
    /// The message's hint names no flag: the command adds how to wait longer.
    #[error("server did not accept connections on {addr} within {secs} s (is it listening on that port?){tail}")]
    PortNeverOpened {
        addr: SocketAddr,
        secs: u64,
        tail: String,
    },
    #[error("port {port} is already taken by {holder}: a server launched now could not listen on it, and reqcost would measure the wrong process (stop that process, or choose another port)")]
    PortTaken { port: u16, holder: String },
    #[error("the socket listening on port {port} belongs to {holder}, not to the launched server (pid {pid}) or its children: reqcost would measure the wrong process")]
    ListenerNotOwned { port: u16, holder: String, pid: u32 },
    #[error("no process with pid {0} (check the pid with `pgrep NAME`)")]
    NoSuchPid(u32),
    #[error("cannot read process {pid}: {err} (run as root or as the process's owner)")]
    NoAccess { pid: u32, err: std::io::Error },
    #[error("no process listens on TCP port {0} (check the port with `ss -ltnp`)")]
    NoListener(u16),
    #[error("several unrelated processes listen on TCP port {port} (pids {pids:?})")]
    SeveralListeners { port: u16, pids: Vec<u32> },
    #[error("interrupted while waiting for the server to start")]
    Interrupted,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl TargetError {
    /// Whether the user named something that is not there (a command, a process): bad input,
    /// as opposed to a server that failed.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            TargetError::NotFound(_) | TargetError::NoSuchPid(_) | TargetError::NoAccess { .. }
        )
    }
}

/// The server under measurement, launched by reqcost or attached to.
pub struct Server {
    pid: u32,
    child: Option<Child>,
    log_path: Option<PathBuf>,
    /// The server failed on its own: its log stays for the user to read.
    keep_log: bool,
    cost: TreeCost,
    exit: Option<String>,
    kill_group: Option<KillGroup>,
    /// Dropped last: by then the groups it watches are gone.
    watchdog: Option<Watchdog>,
}

impl Server {
    /// Starts the command in its own process group, pinned and in its own cgroups when
    /// possible, with a watchdog that kills the tree if reqcost dies.
    pub fn launch(spec: &LaunchSpec) -> Result<Server, TargetError> {
        Server::launch_around(spec, &mut |spawn| spawn())
    }

    /// [`Server::launch`], `around` running the fork of the command alone (not the watchdog's):
    /// for whoever must know which fork starts the tree, as the probes following a client.
    pub fn launch_around(
        spec: &LaunchSpec,
        around: &mut dyn FnMut(&mut dyn FnMut()),
    ) -> Result<Server, TargetError> {
        let program = spec
            .command
            .first()
            .filter(|p| !p.trim().is_empty())
            .ok_or_else(|| TargetError::NotFound("(empty command)".into()))?;
        let log = File::create(&spec.log_path)?;
        let cgroup = CgroupDir::create(&spec.cgroup_name).ok();
        let kill_group = KillGroup::create(&spec.cgroup_name).ok();
        let groups: Vec<&Path> = cgroup
            .iter()
            .map(CgroupDir::dir)
            .chain(kill_group.iter().map(KillGroup::dir))
            .collect();
        let watchdog = (!groups.is_empty())
            .then(|| Watchdog::start(&groups))
            .transpose()?;
        let mut cmd = Command::new(program);
        cmd.args(&spec.command[1..])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        confine(&mut cmd, spec.cpus.as_deref(), &groups);
        let mut spawned = None;
        around(&mut || spawned = Some(cmd.spawn()));
        let spawned = spawned.unwrap_or_else(|| {
            Err(std::io::Error::other(
                "the command was not spawned (a launch_around that did not call its spawn)",
            ))
        });
        let child = spawned.map_err(|err| match err.kind() {
            std::io::ErrorKind::NotFound => TargetError::NotFound(program.clone()),
            _ => TargetError::Spawn {
                command: program.clone(),
                err,
            },
        })?;
        let pid = child.id();
        let cost = match cgroup {
            Some(dir) if dir.contains(pid) => TreeCost::cgroup(pid, dir),
            _ => TreeCost::procfs(pid),
        };
        Ok(Server {
            pid,
            child: Some(child),
            log_path: Some(spec.log_path.clone()),
            keep_log: false,
            cost,
            exit: None,
            kill_group,
            watchdog,
        })
    }

    /// Whether every process the server starts, detached ones included, is killed with it:
    /// only a cgroup (root's) keeps track of processes that leave the process group.
    pub fn contained(&self) -> bool {
        self.watchdog.is_some()
    }

    /// Measures an already running process and its descendants; reqcost never stops it.
    pub fn attach(pid: u32) -> Result<Server, TargetError> {
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        if !proc_dir.exists() {
            return Err(TargetError::NoSuchPid(pid));
        }
        std::fs::read_to_string(proc_dir.join("io"))
            .map_err(|err| TargetError::NoAccess { pid, err })?;
        Ok(Server {
            pid,
            child: None,
            log_path: None,
            keep_log: false,
            cost: TreeCost::procfs(pid),
            exit: None,
            kill_group: None,
            watchdog: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn is_launched(&self) -> bool {
        self.child.is_some()
    }

    /// The root process's command name.
    pub fn comm(&self) -> String {
        comm(self.pid)
    }

    /// Where the CPU figures come from, for the record.
    pub fn cpu_source(&self) -> &'static str {
        self.cost.source()
    }

    /// Cumulative cost of the whole tree now.
    pub fn snapshot(&self) -> crate::Snapshot {
        self.cost.snapshot()
    }

    /// Waits until `addr` accepts a TCP connection, failing early if the server exits.
    pub fn wait_until_accepting(
        &mut self,
        addr: SocketAddr,
        timeout: Duration,
    ) -> Result<(), TargetError> {
        self.wait_until_accepting_unless(addr, timeout, &|| false)
    }

    /// [`Server::wait_until_accepting`], giving up at once when `stop` turns true (a signal to
    /// reqcost): a server that starts slowly must not hold Ctrl-C for the whole timeout.
    pub fn wait_until_accepting_unless(
        &mut self,
        addr: SocketAddr,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<(), TargetError> {
        let deadline = Instant::now() + timeout;
        loop {
            if stop() {
                return Err(TargetError::Interrupted);
            }
            if let Some(status) = self.exited() {
                return Err(TargetError::ExitedAtStart {
                    status,
                    addr,
                    tail: self.log_tail(),
                });
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return self.check_listener(addr.port());
            }
            if Instant::now() >= deadline {
                self.keep_log = true;
                return Err(TargetError::PortNeverOpened {
                    addr,
                    secs: timeout.as_secs(),
                    tail: self.log_tail(),
                });
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Refuses a launched server whose port is answered by a process outside its tree (an
    /// orphan of an earlier run, say). A port with no listener visible here (not a local
    /// address) is not judged.
    fn check_listener(&self, port: u16) -> Result<(), TargetError> {
        let inodes = listening_inodes(port);
        if !self.is_launched() || inodes.is_empty() {
            return Ok(());
        }
        if self
            .cost
            .members()
            .into_iter()
            .any(|pid| holds_any_socket(pid, &inodes))
        {
            return Ok(());
        }
        Err(TargetError::ListenerNotOwned {
            port,
            holder: describe_holder(port),
            pid: self.pid,
        })
    }

    /// `Some(description)` once the server has exited.
    pub fn exited(&mut self) -> Option<String> {
        if self.exit.is_some() {
            return self.exit.clone();
        }
        match &mut self.child {
            Some(child) => {
                if let Ok(Some(status)) = child.try_wait() {
                    self.exit = Some(describe_exit(status));
                    self.keep_log = true;
                }
            }
            None => {
                if !Path::new(&format!("/proc/{}", self.pid)).exists() {
                    self.exit = Some("process is gone".into());
                }
            }
        }
        self.exit.clone()
    }

    /// Stops a launched server (SIGTERM to its group, then SIGKILL after `grace`) and says how
    /// it ended. An attached server is left running.
    pub fn stop(&mut self, grace: Duration) -> Option<String> {
        let child = self.child.as_mut()?;
        if self.exit.is_none() {
            let pgid = child.id() as libc::pid_t;
            // SAFETY: signalling our own child's process group.
            unsafe { libc::kill(-pgid, libc::SIGTERM) };
            let deadline = Instant::now() + grace;
            let status = loop {
                match child.try_wait() {
                    Ok(Some(status)) => break Some(status),
                    Ok(None) if Instant::now() < deadline => {
                        thread::sleep(Duration::from_millis(10))
                    }
                    _ => break None,
                }
            };
            let status = status.or_else(|| {
                // SAFETY: as above.
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
                child.wait().ok()
            });
            self.exit = status.map(describe_exit);
        }
        self.cost.kill_leftovers();
        if let Some(group) = &self.kill_group {
            group.kill();
        }
        self.exit.clone()
    }

    /// The last lines the server wrote to stdout/stderr, formatted for an error message.
    pub fn log_tail(&self) -> String {
        let Some(path) = &self.log_path else {
            return String::new();
        };
        let tail = self
            .output_tail(8)
            .iter()
            .map(|l| format!("  | {l}"))
            .collect::<Vec<_>>()
            .join("\n");
        if tail.is_empty() {
            "; the server printed nothing".into()
        } else {
            format!(
                "; its last output (all of it in {}):\n{tail}",
                path.display()
            )
        }
    }

    /// The last `lines` lines the launched command wrote to stdout/stderr (at most 4 KiB).
    pub fn output_tail(&self, lines: usize) -> Vec<String> {
        self.log_path
            .as_deref()
            .map(|path| read_tail(path, lines))
            .unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.stop(Duration::from_secs(2));
        }
        if let Some(log) = self.log_path.as_ref().filter(|_| !self.keep_log) {
            let _ = std::fs::remove_file(log);
        }
    }
}

/// Makes the server die with reqcost, run on `cpus` and join the cgroups `groups` (each
/// given as its directory) between fork and exec.
fn confine(cmd: &mut Command, cpus: Option<&[u32]>, groups: &[&Path]) {
    let affinity = cpus.map(cpu_set);
    let procs_files: Vec<CString> = groups
        .iter()
        .map(|dir| {
            CString::new(
                dir.join("cgroup.procs")
                    .into_os_string()
                    .into_encoded_bytes(),
            )
            .expect("cgroup paths have no NUL")
        })
        .collect();
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe calls
    // (prctl, sched_setaffinity, open, write, close) on data prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            // The direct child dies with reqcost even without a cgroup.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(set) = &affinity {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
            }
            // Joining before exec makes every task of the tree, exited ones included, count
            // in the cpuacct group, and puts all of them in reach of cgroup.kill.
            for path in &procs_files {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
                if fd >= 0 {
                    libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                }
            }
            Ok(())
        });
    }
}

fn describe_exit(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "unknown exit".into(),
    }
}

fn read_tail(path: &Path, lines: usize) -> Vec<String> {
    let Ok(mut f) = File::open(path) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(4096)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

/// Refuses a port something already listens on, before launching a server for it.
pub fn ensure_port_free(port: u16) -> Result<(), TargetError> {
    if listening_inodes(port).is_empty() {
        return Ok(());
    }
    Err(TargetError::PortTaken {
        port,
        holder: describe_holder(port),
    })
}

/// A loopback port that was free a moment ago, for demos and tests.
pub fn free_loopback_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
