//! The state of processes that existed before sampling began, read from /proc; the process
//! tree itself is walked by reqcost_server, as for accounting and probes.

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
    text.lines()
        .filter_map(parse_map_line)
        .filter(|(x, _)| *x)
        .map(|(_, m)| m)
        .collect()
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

/// Address and bytes of the vDSO image mapped into this process: the kernel maps the same
/// image into every process.
pub fn own_vdso() -> Option<(u64, Vec<u8>)> {
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
    Some((m.start, buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_lines() {
        let (x, m) = parse_map_line(
            "7f12a4c28000-7f12a4d9d000 r-xp 00028000 fd:01 1835 /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert!(x);
        assert_eq!(
            (m.start, m.end, m.pgoff),
            (0x7f12a4c28000, 0x7f12a4d9d000, 0x28000)
        );
        assert_eq!(m.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        let (x, m) = parse_map_line(
            "7ffd1e5f0000-7ffd1e5f2000 r-xp 00000000 00:00 0                          [vdso]",
        )
        .unwrap();
        assert!(x);
        assert_eq!(m.path, "[vdso]");
        let (x, m) = parse_map_line("7f0000000000-7f0000001000 rw-p 00000000 00:00 0 ").unwrap();
        assert!(!x);
        assert_eq!(m.path, "");
    }
}
