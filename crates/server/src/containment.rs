//! Nothing a launched server starts outlives reqcost, whatever ends reqcost.
//!
//! The server tree joins a cgroup v2 group beside its cpuacct one: a process group misses
//! children that call setsid, and PR_SET_PDEATHSIG reaches only the direct child, while
//! `cgroup.kill` ends every process of the group at once. A watchdog shell, started before the
//! server, waits on a pipe that only reqcost holds: when reqcost dies, even by SIGKILL, the pipe
//! closes and the watchdog kills the groups and removes them. What a dead run still left (a
//! watchdog killed too, a reboot of cgroupfs aside) is removed by the next run's
//! [`remove_dead_runs`].

use std::fs;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::accounting::CPUACCT_ROOT;

/// Where cgroup v2 is mounted beside the v1 controllers on this kind of machine.
const CGROUP2_ROOT: &str = "/sys/fs/cgroup/unified";
/// What every run's cgroups and server log are named after: `reqcost-PID-MS`.
const RUN_PREFIX: &str = "reqcost-";

/// The name of a run's cgroups and server log: unique to this process and moment, and telling
/// [`remove_dead_runs`] whose they are.
pub fn run_name(started: SystemTime) -> String {
    let ms = started
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    format!("{RUN_PREFIX}{}-{ms}", std::process::id())
}

/// Removes what runs whose reqcost process is gone left behind: their cgroups (v1 and v2,
/// killing any process still in them) and their server logs in `log_dir`.
pub fn remove_dead_runs(log_dir: &Path) {
    for root in [Path::new(CPUACCT_ROOT), Path::new(CGROUP2_ROOT)] {
        for dir in dead_runs_in(root) {
            kill_all(&dir);
            remove_when_empty(&dir);
        }
    }
    for log in dead_runs_in(log_dir) {
        if log.extension().is_some_and(|e| e == "log") {
            let _ = fs::remove_file(log);
        }
    }
}

/// Entries of `dir` named by [`run_name`] for a process that no longer exists.
fn dead_runs_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.strip_prefix(RUN_PREFIX))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok());
            pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        })
        .map(|e| e.path())
        .collect()
}

/// Kills every process in the cgroup `dir`: at once with cgroup v2's `cgroup.kill`, one by one
/// from `cgroup.procs` on v1.
pub(crate) fn kill_all(dir: &Path) {
    if fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    for pid in cgroup_pids(dir) {
        // SAFETY: these are processes of a server tree reqcost launched.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
}

/// The processes in the cgroup `dir`.
pub(crate) fn cgroup_pids(dir: &Path) -> Vec<u32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Removes the cgroup `dir`, which is only possible once its killed processes are gone.
pub(crate) fn remove_when_empty(dir: &Path) {
    for _ in 0..50 {
        if fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The cgroup v2 group of one server tree, killed and removed when dropped.
pub(crate) struct KillGroup {
    dir: PathBuf,
}

impl KillGroup {
    pub(crate) fn create(name: &str) -> io::Result<KillGroup> {
        let dir = Path::new(CGROUP2_ROOT).join(name);
        fs::create_dir(&dir)?;
        let group = KillGroup { dir };
        if !group.dir.join("cgroup.kill").exists() {
            return Err(io::Error::other(
                "this kernel's cgroup v2 has no cgroup.kill",
            ));
        }
        Ok(group)
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn kill(&self) {
        kill_all(&self.dir);
    }
}

impl Drop for KillGroup {
    fn drop(&mut self) {
        self.kill();
        remove_when_empty(&self.dir);
    }
}

/// Kills and removes the cgroups given as arguments once its stdin closes. It ignores the
/// signals a terminal sends, so that it is still there when reqcost is not.
const WATCHDOG: &str = r#"
trap '' HUP INT QUIT TERM PIPE
cat >/dev/null
for attempt in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    left=
    for group in "$@"; do
        if [ -e "$group/cgroup.kill" ]; then echo 1 >"$group/cgroup.kill"; fi
        if [ -e "$group/cgroup.procs" ]; then kill -9 $(cat "$group/cgroup.procs") 2>/dev/null; fi
        rmdir "$group" 2>/dev/null
        if [ -e "$group" ]; then left=1; fi
    done
    if [ -z "$left" ]; then exit 0; fi
    sleep 0.1
done
"#;

/// A shell that outlives reqcost only to remove its server's cgroups, killing what is in them.
pub(crate) struct Watchdog {
    child: Child,
}

impl Watchdog {
    /// Starts watching `groups`. The pipe to its stdin is close-on-exec, so the server never
    /// holds it open.
    pub(crate) fn start(groups: &[&Path]) -> io::Result<Watchdog> {
        let child = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("reqcost-watchdog")
            .args(groups)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        Ok(Watchdog { child })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}
