//! The state of processes that existed before sampling began, read from /proc.

use std::collections::HashMap;
use std::fs;

pub struct MapLine {
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
    pub path: String,
}

/// Executable mappings of `pid`.
pub fn exec_maps(pid: u32) -> Vec<MapLine> {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    text.lines().filter_map(parse_map_line).filter(|(x, _)| *x).map(|(_, m)| m).collect()
}

fn parse_map_line(line: &str) -> Option<(bool, MapLine)> {
    let mut it = line.splitn(6, ' ');
    let (range, perms, off) = (it.next()?, it.next()?, it.next()?);
    let _dev = it.next()?;
    let _inode = it.next()?;
    let path = it.next().unwrap_or("").trim_start().to_string();
    let (s, e) = range.split_once('-')?;
    Some((
        perms.as_bytes().get(2) == Some(&b'x'),
        MapLine {
            start: u64::from_str_radix(s, 16).ok()?,
            end: u64::from_str_radix(e, 16).ok()?,
            pgoff: u64::from_str_radix(off, 16).ok()?,
            path,
        },
    ))
}

pub fn comm(pid: u32, tid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
        .ok()
        .map(|s| s.trim_end_matches('\n').to_string())
}

/// Thread ids of `pid`.
pub fn tasks(pid: u32) -> Vec<u32> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut v: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

/// `root` and its descendants, each with its threads.
pub fn tree(root: u32) -> Vec<(u32, Vec<u32>)> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // The comm field may hold spaces and parentheses: fields resume after the last ')'.
            let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
                continue;
            };
            if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        let tids = tasks(pid);
        if tids.is_empty() {
            continue;
        }
        out.push((pid, tids));
        if let Some(c) = children.get(&pid) {
            todo.extend(c);
        }
    }
    out
}

/// The vDSO image mapped into this process: the kernel maps the same one into every process.
pub fn own_vdso() -> Option<Vec<u8>> {
    let text = fs::read_to_string("/proc/self/maps").ok()?;
    let m = text
        .lines()
        .filter_map(parse_map_line)
        .map(|(_, m)| m)
        .find(|m| m.path == "[vdso]")?;
    let len = (m.end - m.start) as usize;
    let mut buf = vec![0u8; len];
    // SAFETY: the vDSO mapping is readable for the life of the process and `len` bytes long.
    unsafe { std::ptr::copy_nonoverlapping(m.start as *const u8, buf.as_mut_ptr(), len) };
    Some(buf)
}
