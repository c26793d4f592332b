//! The state of processes that existed before sampling began, read from /proc; the process
//! tree itself is walked by reqcost_server, as for accounting and probes.

use std::fs;
use std::io::{BufRead, BufReader};

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

/// The starts of the core kernel's functions (`_stext` to `_etext`, which does not change while
/// the system runs), from /proc/kallsyms: kernel frames are named by kallsyms alone, so every
/// address of one function names the same frame, and the sampler keeps one address per function
/// instead of one per sampled instruction. Modules and BPF programs, which come and go, are not
/// in it. Empty when kallsyms hides its addresses.
#[derive(Default)]
pub struct KernelText {
    stext: u64,
    /// `_etext` - `_stext`.
    len: u64,
    /// Offsets from `stext`, sorted: the text is well under 4 GiB.
    starts: Vec<u32>,
}

impl KernelText {
    pub fn read() -> KernelText {
        match fs::File::open("/proc/kallsyms") {
            Ok(f) => KernelText::parse(BufReader::new(f).lines().map_while(Result::ok)),
            Err(_) => KernelText::default(),
        }
    }

    pub(crate) fn parse(lines: impl Iterator<Item = String>) -> KernelText {
        let (mut stext, mut etext) = (0, 0);
        let mut addrs: Vec<u64> = Vec::new();
        for line in lines {
            let mut it = line.split_ascii_whitespace();
            let (Some(addr), Some(_kind), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            match name {
                "_stext" => stext = addr,
                "_etext" => etext = addr,
                _ => {}
            }
            // Like blazesym's kallsyms reader: every symbol with an address, whatever its type.
            if addr != 0 {
                addrs.push(addr);
            }
        }
        if stext == 0 || etext <= stext || etext - stext > u64::from(u32::MAX) {
            return KernelText::default();
        }
        let mut starts: Vec<u32> = addrs
            .into_iter()
            .filter(|a| (stext..etext).contains(a))
            .map(|a| (a - stext) as u32)
            .collect();
        starts.sort_unstable();
        starts.dedup();
        starts.shrink_to_fit();
        KernelText {
            stext,
            len: etext - stext,
            starts,
        }
    }

    /// The start of the kallsyms symbol `addr` is in, when it is in the core kernel's text:
    /// blazesym names any address by the first symbol at the greatest start not above it, so
    /// the start is named as `addr` is.
    pub fn start_of(&self, addr: u64) -> Option<u64> {
        let off = addr.checked_sub(self.stext).filter(|&o| o < self.len)?;
        let i = self
            .starts
            .partition_point(|&s| u64::from(s) <= off)
            .checked_sub(1)?;
        Some(self.stext + u64::from(self.starts[i]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_addresses_go_to_the_start_of_their_function_within_the_core_text() {
        let kallsyms = "0000000000000000 A fixed_percpu_data
ffffffff81000000 T startup_64
ffffffff81000000 T _stext
ffffffff81000100 t helper
ffffffff81000100 T helper_alias
ffffffff81000200 T _etext
ffffffffc0001000 t nf_hook [nf_conntrack]";
        let text = KernelText::parse(kallsyms.lines().map(String::from));
        assert_eq!(text.start_of(0xffffffff81000000), Some(0xffffffff81000000));
        assert_eq!(text.start_of(0xffffffff810000ff), Some(0xffffffff81000000));
        assert_eq!(text.start_of(0xffffffff81000180), Some(0xffffffff81000100));
        // Past the core text (a module, a BPF program, the text's end): kept as it is.
        assert_eq!(text.start_of(0xffffffff81000200), None);
        assert_eq!(text.start_of(0xffffffffc0001010), None);
        assert_eq!(text.start_of(0xffffffff80ffffff), None);
        let hidden = "0000000000000000 T _stext\n0000000000000000 T _etext";
        assert_eq!(
            KernelText::parse(hidden.lines().map(String::from)).start_of(0x10),
            None
        );
    }

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
