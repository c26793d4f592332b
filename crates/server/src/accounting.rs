use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use reqcost_record::{ContextSwitches, CpuSplit, CpuTimes, ProcIo, ServerTotals};

use crate::containment::{cgroup_pids, kill_all, remove_when_empty};

pub(crate) const CPUACCT_ROOT: &str = "/sys/fs/cgroup/cpuacct";

/// A cpuacct (cgroup v1) group holding only the server tree: its counters are the scheduler's
/// nanosecond accounting, and they keep the time of tasks that have exited.
pub(crate) struct CgroupDir {
    dir: PathBuf,
}

impl CgroupDir {
    pub(crate) fn create(name: &str) -> std::io::Result<CgroupDir> {
        let dir = Path::new(CPUACCT_ROOT).join(name);
        fs::create_dir(&dir)?;
        let group = CgroupDir { dir };
        group.read_ns("cpuacct.usage")?;
        Ok(group)
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn contains(&self, pid: u32) -> bool {
        self.pids().contains(&pid)
    }

    fn pids(&self) -> Vec<u32> {
        cgroup_pids(&self.dir)
    }

    fn read_ns(&self, file: &str) -> std::io::Result<u64> {
        let text = fs::read_to_string(self.dir.join(file))?;
        text.trim()
            .parse()
            .map_err(|_| std::io::Error::other(format!("unexpected content in {file}")))
    }

    fn cpu(&self) -> Result<CpuTimes, String> {
        let read = |f| self.read_ns(f).map_err(|e| format!("cannot read {f}: {e}"));
        Ok(CpuTimes {
            total_ns: read("cpuacct.usage")?,
            user_ns: read("cpuacct.usage_user")?,
            system_ns: read("cpuacct.usage_sys")?,
            source:
                "cgroup cpuacct (scheduler ns, exited tasks included; user/system split by ticks)"
                    .into(),
            split: CpuSplit::Ticks,
        })
    }
}

impl Drop for CgroupDir {
    fn drop(&mut self) {
        // The tree was killed just before.
        remove_when_empty(&self.dir);
    }
}

/// Reads the cumulative cost of one process tree.
pub struct TreeCost {
    root: u32,
    cgroup: Option<CgroupDir>,
}

impl TreeCost {
    pub(crate) fn cgroup(root: u32, dir: CgroupDir) -> TreeCost {
        TreeCost {
            root,
            cgroup: Some(dir),
        }
    }

    pub(crate) fn procfs(root: u32) -> TreeCost {
        TreeCost { root, cgroup: None }
    }

    pub(crate) fn source(&self) -> &'static str {
        if self.cgroup.is_some() {
            "cgroup cpuacct"
        } else {
            "procfs schedstat"
        }
    }

    /// Kills whatever is left in the server's cgroup (daemonized children), so that no process
    /// outlives the run.
    pub(crate) fn kill_leftovers(&self) {
        if let Some(group) = &self.cgroup {
            kill_all(&group.dir);
        }
    }

    /// The tree's live processes, and those that left it by daemonizing but stay in its cgroup.
    pub(crate) fn members(&self) -> Vec<u32> {
        let mut pids = process_tree(self.root);
        if let Some(group) = &self.cgroup {
            let outside: Vec<u32> = group
                .pids()
                .into_iter()
                .filter(|p| !pids.contains(p))
                .collect();
            pids.extend(outside);
        }
        pids
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        let tree = process_tree(self.root);
        let cpu = match &self.cgroup {
            Some(group) => group.cpu(),
            None => procfs_cpu(&tree),
        };
        Snapshot {
            cpu,
            io: tree_io(&tree),
            context_switches: tree_switches(&tree),
        }
    }
}

/// Cumulative figures of a process tree at one instant. Each figure is either a value or the
/// reason it could not be read. In a snapshot, `cpu.total_ns` is precise while `cpu.user_ns`
/// and `cpu.system_ns` are the kernel's tick-based split; [`Snapshot::since`] reconciles them.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub cpu: Result<CpuTimes, String>,
    pub io: Result<ProcIo, String>,
    pub context_switches: Result<ContextSwitches, String>,
}

impl Snapshot {
    /// The totals between `earlier` and `self`, with the reason for each figure left out.
    pub fn since(&self, earlier: &Snapshot) -> (ServerTotals, BTreeMap<String, String>) {
        let mut missing = BTreeMap::new();
        let cpu = pick(
            &mut missing,
            "cpu",
            both(&earlier.cpu, &self.cpu).map(|(a, b)| {
                let total_ns = b.total_ns.saturating_sub(a.total_ns);
                let user = b.user_ns.saturating_sub(a.user_ns);
                let system = b.system_ns.saturating_sub(a.system_ns);
                // The kernel splits user/system by ticks but sums runtime in ns: apply the
                // phase's tick proportion to its precise total.
                let user_ns = if user + system == 0 {
                    0
                } else {
                    (total_ns as u128 * user as u128 / (user + system) as u128) as u64
                };
                CpuTimes {
                    total_ns,
                    user_ns,
                    system_ns: total_ns - user_ns,
                    source: b.source.clone(),
                    split: b.split,
                }
            }),
        );
        let io = pick(
            &mut missing,
            "io",
            both(&earlier.io, &self.io).map(|(a, b)| ProcIo {
                syscr: b.syscr.saturating_sub(a.syscr),
                syscw: b.syscw.saturating_sub(a.syscw),
                rchar: b.rchar.saturating_sub(a.rchar),
                wchar: b.wchar.saturating_sub(a.wchar),
            }),
        );
        let context_switches = pick(
            &mut missing,
            "context_switches",
            both(&earlier.context_switches, &self.context_switches).map(|(a, b)| ContextSwitches {
                voluntary: b.voluntary.saturating_sub(a.voluntary),
                involuntary: b.involuntary.saturating_sub(a.involuntary),
            }),
        );
        let totals = ServerTotals {
            cpu,
            io,
            context_switches,
            ..ServerTotals::default()
        };
        (totals, missing)
    }
}

fn pick<T>(missing: &mut BTreeMap<String, String>, name: &str, r: Result<T, String>) -> Option<T> {
    r.map_err(|reason| missing.insert(name.to_string(), reason))
        .ok()
}

fn both<'a, T>(
    a: &'a Result<T, String>,
    b: &'a Result<T, String>,
) -> Result<(&'a T, &'a T), String> {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        (Err(e), _) | (_, Err(e)) => Err(e.clone()),
    }
}

/// `root` and every live descendant process of it (thread group ids), root first. A process
/// exiting meanwhile is simply left out.
pub fn process_tree(root: u32) -> Vec<u32> {
    tree_by_children(root).unwrap_or_else(|| tree_by_parents(root))
}

/// The tree from the kernel's list of each thread's children: a file per thread of the tree,
/// where walking every process's parent reads one per process of the machine (140 here, five
/// times a second under `attach --budget`: a third of reqcost's own CPU samples on a busy
/// machine). None when the kernel keeps no such list (CONFIG_PROC_CHILDREN).
fn tree_by_children(root: u32) -> Option<Vec<u32>> {
    if !Path::new("/proc/thread-self/children").exists() {
        return None;
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let pid = tree[i];
        let kids: Vec<u32> = threads(pid)
            .into_iter()
            .filter_map(|tid| fs::read_to_string(format!("/proc/{pid}/task/{tid}/children")).ok())
            .flat_map(|list| {
                list.split_whitespace()
                    .filter_map(|k| k.parse().ok())
                    .collect::<Vec<u32>>()
            })
            .collect();
        for kid in kids {
            if !tree.contains(&kid) {
                tree.push(kid);
            }
        }
        i += 1;
    }
    Some(tree)
}

/// The tree found by walking every process's parent in /proc.
fn tree_by_parents(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for pid in all_pids() {
        if let Some(parent) = parent(pid) {
            children.entry(parent).or_default().push(pid);
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        if let Some(kids) = children.get(&tree[i]) {
            tree.extend(kids.iter().copied().filter(|k| *k != root));
        }
        i += 1;
    }
    tree
}

/// Every live process (thread group ids) in /proc.
pub(crate) fn all_pids() -> impl Iterator<Item = u32> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
}

/// A live process's command name; empty once it is gone.
pub(crate) fn comm(pid: u32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Whether `pid` is `root` or one of its descendants now, walking up its parents.
pub fn descends_from(mut pid: u32, root: u32) -> bool {
    for _ in 0..256 {
        if pid == root {
            return true;
        }
        match parent(pid) {
            Some(p) if p > 1 => pid = p,
            _ => return false,
        }
    }
    false
}

/// The parent of a live process.
fn parent(pid: u32) -> Option<u32> {
    ppid(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Fields of /proc/PID/stat after the command name, so field 0 is the state (stat field 3).
fn read_stat(pid: u32) -> Option<Vec<String>> {
    stat_fields(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The command name may hold spaces and parentheses: fields start after the last ')'.
fn stat_fields(stat: &str) -> Option<Vec<String>> {
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The parent pid in a /proc/PID/stat line.
fn ppid(stat: &str) -> Option<u32> {
    stat_fields(stat)?.get(1)?.parse().ok()
}

/// The thread ids of a live process.
pub fn threads(pid: u32) -> Vec<u32> {
    fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// Sum over live threads of schedstat's on-CPU nanoseconds, plus the tick-based time of waited
/// children; threads that exited between snapshots are lost, which the source string says.
fn procfs_cpu(tree: &[u32]) -> Result<CpuTimes, String> {
    let tick_ns = 1_000_000_000 / clock_ticks();
    let mut total = 0u64;
    let (mut user_ticks, mut sys_ticks) = (0u64, 0u64);
    for &pid in tree {
        for tid in threads(pid) {
            let Ok(text) = fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")) else {
                continue;
            };
            total += text
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or("unexpected /proc schedstat format")?;
        }
        if let Some(f) = read_stat(pid) {
            // stat fields 14-17: utime stime cutime cstime, here at index 11-14.
            let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            user_ticks += n(11) + n(13);
            sys_ticks += n(12) + n(14);
            total += (n(13) + n(14)) * tick_ns;
        }
    }
    if total == 0 && tree.iter().all(|p| threads(*p).is_empty()) {
        return Err("process tree is gone".into());
    }
    Ok(CpuTimes {
        total_ns: total,
        user_ns: user_ticks * tick_ns,
        system_ns: sys_ticks * tick_ns,
        source: "procfs schedstat of live threads (ns), waited children at tick resolution; threads exiting mid-run are missed".into(),
        split: CpuSplit::Ticks,
    })
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// /proc/PID/io summed over the tree; a reaped child's counts roll into its parent's, so the
/// sum stays whole across exits.
fn tree_io(tree: &[u32]) -> Result<ProcIo, String> {
    let mut io = ProcIo::default();
    let mut any = false;
    for &pid in tree {
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/io")) else {
            continue;
        };
        any = true;
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value: u64 = value.trim().parse().unwrap_or(0);
            match key {
                "syscr" => io.syscr += value,
                "syscw" => io.syscw += value,
                "rchar" => io.rchar += value,
                "wchar" => io.wchar += value,
                _ => {}
            }
        }
    }
    if any {
        Ok(io)
    } else {
        Err("/proc/PID/io unreadable (process gone, or no permission: run as root)".into())
    }
}

fn tree_switches(tree: &[u32]) -> Result<ContextSwitches, String> {
    let mut cs = ContextSwitches::default();
    let mut any = false;
    for &pid in tree {
        for tid in threads(pid) {
            let Ok(text) = fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")) else {
                continue;
            };
            any = true;
            for line in text.lines() {
                if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
                    cs.voluntary += v.trim().parse::<u64>().unwrap_or(0);
                } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
                    cs.involuntary += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    if any {
        Ok(cs)
    } else {
        Err("/proc/PID/task/*/status unreadable (process gone)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_pid_survives_odd_command_names() {
        assert_eq!(ppid("42 (a b) S 17 42 42 0"), Some(17));
        assert_eq!(ppid("42 (x) (y)) R 1 42"), Some(1));
        assert_eq!(ppid("garbage"), None);
    }

    #[test]
    fn tree_holds_spawned_children_and_grandchildren() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30; :"])
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut found = Vec::new();
        // The shell forks its two sleeps right away; wait until both show up in /proc.
        for _ in 0..200 {
            found = process_tree(pid);
            if found.len() == 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let mut by_parents = tree_by_parents(pid);
        by_parents.sort();
        for p in &found[1..] {
            unsafe { libc::kill(*p as i32, libc::SIGKILL) };
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(found[0], pid);
        assert!(!process_tree(std::process::id()).contains(&1));
        found.sort();
        assert_eq!(
            by_parents, found,
            "the kernel's children lists and the parents agree"
        );
    }

    #[test]
    fn this_process_descends_from_itself_not_from_its_child() {
        let me = std::process::id();
        assert!(descends_from(me, me));
        assert!(!descends_from(me, me + 1_000_000));
        assert!(process_tree(me).contains(&me) && !threads(me).is_empty());
    }
}
