//! Turns raw chains into named frames with blazesym: ELF symbol tables and DWARF (separate
//! debug files under /usr/lib/debug found by build id or debuglink), inlined functions, kernel
//! symbols from kallsyms, the vDSO, and /tmp/perf-PID.map files for JIT code.

use std::collections::HashMap;
use std::ops::Range;

use blazesym::symbolize::source::{Elf, Kernel, Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::{MaybeDefault, Pid};
use reqcost_record::{request_id, Frame, Profile, SampleTag, Stack, UNATTRIBUTED};

use crate::elf::ElfInfo;
use crate::procfs;
use crate::tracker::{Aggregate, ModuleEntry, ModuleKind, RawFrame};
use crate::Served;

/// DWARF larger than this is not loaded (symbol tables only): parsing it costs memory in
/// proportion, and names from symbol tables are enough to find hot functions.
const DWARF_CAP: u64 = 256 << 20;

/// Share of samples with unnamed frames in one binary above which the profile says so.
const NOTE_UNRESOLVED_SHARE: f64 = 0.01;

pub struct Meta {
    pub event: String,
    pub freq_hz: u64,
    pub duration_s: f64,
    pub lost: u64,
}

fn user_frame(function: String, module: &str, inlined: bool, resolved: bool) -> Frame {
    Frame {
        function,
        module: module.to_string(),
        kernel: false,
        inlined,
        resolved,
    }
}

/// Frames (leaf first) a symbolization result stands for.
fn frames_of(
    sym: Option<blazesym::symbolize::Sym<'_>>,
    module: &str,
    kernel: bool,
    fallback: String,
) -> Vec<Frame> {
    let Some(sym) = sym else {
        return vec![Frame {
            function: fallback,
            module: module.to_string(),
            kernel,
            inlined: false,
            resolved: false,
        }];
    };
    let mut v: Vec<Frame> = sym
        .inlined
        .iter()
        .rev()
        .map(|f| Frame {
            function: f.name.to_string(),
            module: module.to_string(),
            kernel,
            inlined: true,
            resolved: true,
        })
        .collect();
    v.push(Frame {
        function: sym.name.to_string(),
        module: module.to_string(),
        kernel,
        inlined: false,
        resolved: true,
    });
    v
}

pub fn build(agg: Aggregate, modules: &[ModuleEntry], meta: Meta) -> Profile {
    let symbolizer = Symbolizer::builder()
        .enable_code_info(true)
        .enable_inlined_fns(true)
        .enable_demangling(true)
        .build();
    let mut notes = Vec::new();
    let mut named: Vec<Vec<Frame>> = vec![Vec::new(); agg.frames.len()];

    let mut kernel: Vec<(usize, u64)> = Vec::new();
    let mut by_module: HashMap<u32, Vec<(usize, u64)>> = HashMap::new();
    let mut by_pid: HashMap<u32, Vec<(usize, u64)>> = HashMap::new();
    for (i, f) in agg.frames.iter().enumerate() {
        match *f {
            RawFrame::Kernel(a) => kernel.push((i, a)),
            RawFrame::User { module, offset } => {
                by_module.entry(module).or_default().push((i, offset))
            }
            RawFrame::Anon { pid, addr } => by_pid.entry(pid).or_default().push((i, addr)),
            RawFrame::Interp(f) => {
                let f = &agg.interp[f as usize];
                named[i] = vec![user_frame(f.function.clone(), &f.module, false, true)];
            }
            RawFrame::Unknown => {
                named[i] = vec![user_frame("[unknown]".into(), "", false, false)];
            }
        }
    }

    if !kernel.is_empty() {
        let src = Source::Kernel(Kernel {
            vmlinux: MaybeDefault::None,
            debug_syms: false,
            ..Kernel::default()
        });
        let addrs: Vec<u64> = kernel.iter().map(|&(_, a)| a).collect();
        let syms = symbolizer
            .symbolize(&src, Input::AbsAddr(&addrs))
            .unwrap_or_default();
        for (k, &(i, a)) in kernel.iter().enumerate() {
            let sym = syms.get(k).cloned().and_then(Symbolized::into_sym);
            let module = sym
                .as_ref()
                .and_then(|s| s.module.as_ref())
                .map(|m| m.to_string_lossy().into_owned())
                .filter(|m| m.starts_with('['))
                .unwrap_or_else(|| "[kernel.kallsyms]".to_string());
            named[i] = frames_of(sym, &module, true, format!("[kernel]+0x{a:x}"));
        }
    }

    let vdso_start = procfs::own_vdso().map(|(start, _)| start);
    let mut module_ids: Vec<&u32> = by_module.keys().collect();
    module_ids.sort();
    for &m in module_ids {
        let list = &by_module[&m];
        let e = &modules[m as usize];
        let offsets: Vec<u64> = list.iter().map(|&(_, o)| o).collect();
        let syms = match &e.kind {
            ModuleKind::File(path) => {
                let dwarf = e.info.as_ref().map_or(0, |i| i.dwarf_bytes);
                let debug_syms = dwarf <= DWARF_CAP;
                if !debug_syms {
                    notes.push(format!(
                        "{}: {} MiB of debug info not loaded (over {} MiB): symbol tables only, no inlined functions",
                        path.display(),
                        dwarf >> 20,
                        DWARF_CAP >> 20
                    ));
                }
                let src = Source::Elf(Elf {
                    debug_syms,
                    ..Elf::new(path)
                });
                symbolizer
                    .symbolize(&src, Input::FileOffset(&offsets))
                    .unwrap_or_default()
            }
            ModuleKind::Vdso => match vdso_start {
                Some(start) => {
                    let src = Source::Process(Process {
                        perf_map: false,
                        map_files: false,
                        ..Process::new(Pid::Slf)
                    });
                    let addrs: Vec<u64> = offsets.iter().map(|o| start + o).collect();
                    symbolizer
                        .symbolize(&src, Input::AbsAddr(&addrs))
                        .unwrap_or_default()
                }
                None => Vec::new(),
            },
        };
        let mut functions: Option<Vec<Range<u64>>> = None;
        for (k, &(i, off)) in list.iter().enumerate() {
            let sym = syms.get(k).cloned().and_then(Symbolized::into_sym);
            let fallback = match (&sym, &e.info) {
                (None, Some(info)) => {
                    let ranges = functions.get_or_insert_with(|| info.function_ranges());
                    unnamed_function(info, ranges, &e.name, off)
                }
                _ => format!("{}+0x{off:x}", e.name),
            };
            named[i] = frames_of(sym, &e.name, false, fallback);
        }
    }

    for (pid, list) in by_pid {
        let map = PerfMap::read(pid);
        for (i, addr) in list {
            named[i] = match map.as_ref().and_then(|m| m.lookup(addr)) {
                Some(name) => vec![user_frame(name.to_string(), "[jit]", false, true)],
                None => vec![user_frame("[unknown]".into(), "", false, false)],
            };
        }
    }

    assemble(agg, named, modules, meta, notes)
}

/// `libz.so.1.2.13!0x49f0`: the function (by its `.eh_frame` range) that contains file offset
/// `off`, named by the file offset of its start, so that every sampled instruction of one
/// static function of a stripped binary counts for one frame. `MODULE+0xOFFSET` when no FDE
/// covers it.
fn unnamed_function(info: &ElfInfo, ranges: &[Range<u64>], module: &str, off: u64) -> String {
    let start = info.vaddr_of(off).and_then(|va| {
        let i = ranges.partition_point(|r| r.start <= va).checked_sub(1)?;
        ranges[i].contains(&va).then_some(ranges[i].start)
    });
    match start.and_then(|va| info.offset_of(va)) {
        Some(start) => format!("{module}!0x{start:x}"),
        None => format!("{module}+0x{off:x}"),
    }
}

fn assemble(
    agg: Aggregate,
    named: Vec<Vec<Frame>>,
    modules: &[ModuleEntry],
    meta: Meta,
    mut notes: Vec<String>,
) -> Profile {
    let mut frames: Vec<Frame> = Vec::new();
    let mut frame_ids: HashMap<Frame, u32> = HashMap::new();
    let ids: Vec<Vec<u32>> = named
        .into_iter()
        .map(|fs| {
            fs.into_iter()
                .map(|f| {
                    *frame_ids.entry(f.clone()).or_insert_with(|| {
                        frames.push(f);
                        frames.len() as u32 - 1
                    })
                })
                .collect()
        })
        .collect();

    let (mut tags, tag_of) = sample_tags(&agg.served);
    let mut hop_tags: HashMap<(u32, u8), u32> = HashMap::new();
    let mut merged: HashMap<(u32, Option<u32>, bool, Vec<u32>), u64> = HashMap::new();
    for ((thread, served, hop, raw), count) in agg.stacks {
        let chain: Vec<u32> = raw
            .iter()
            .flat_map(|&r| ids[r as usize].iter().copied())
            .collect();
        let tag = tag_of[served as usize].map(|t| match hop {
            0 => t,
            _ => *hop_tags.entry((t, hop)).or_insert_with(|| {
                tags.push(SampleTag {
                    hop,
                    ..tags[t as usize].clone()
                });
                tags.len() as u32 - 1
            }),
        });
        *merged.entry((thread, tag, hop > 0, chain)).or_insert(0) += count;
    }
    let (mut stacks, mut hop_stacks) = (Vec::new(), Vec::new());
    for ((thread, tag, upstream, frames), count) in merged {
        let s = Stack {
            frames,
            thread: agg.threads[thread as usize].clone(),
            count,
            tag,
        };
        if upstream {
            hop_stacks.push(s);
        } else {
            stacks.push(s);
        }
    }
    Stack::sort(&mut stacks);
    Stack::sort(&mut hop_stacks);
    let samples = agg.samples - hop_stacks.iter().map(|s| s.count).sum::<u64>();

    // Binaries whose code the samples hit but no symbol named.
    let mut unresolved: HashMap<&str, u64> = HashMap::new();
    for s in &stacks {
        let mut seen: Vec<&str> = Vec::new();
        for &f in &s.frames {
            let f = &frames[f as usize];
            if !f.resolved
                && !f.kernel
                && !f.module.is_empty()
                && !seen.contains(&f.module.as_str())
            {
                seen.push(&f.module);
            }
        }
        for m in seen {
            *unresolved.entry(m).or_insert(0) += s.count;
        }
    }
    let mut unresolved: Vec<(&str, u64)> = unresolved.into_iter().collect();
    unresolved.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    for (m, n) in unresolved {
        if (n as f64) < NOTE_UNRESOLVED_SHARE * samples as f64 {
            continue;
        }
        let path = modules.iter().find(|e| e.name == m).map_or_else(
            || m.to_string(),
            |e| match &e.kind {
                ModuleKind::File(p) => p.display().to_string(),
                ModuleKind::Vdso => m.to_string(),
            },
        );
        notes.push(format!(
            "{path}: {:.0}% of samples run through code of it that no symbol names (static functions of a stripped binary); its debug symbols (Debian: the -dbgsym package) would name them",
            100.0 * n as f64 / samples.max(1) as f64
        ));
    }

    Profile {
        event: meta.event,
        freq_hz: meta.freq_hz,
        period_ns: 1_000_000_000 / meta.freq_hz.max(1),
        duration_s: meta.duration_s,
        samples,
        lost: meta.lost,
        truncated: agg.truncated,
        frames,
        stacks,
        notes,
        tags,
        hop_stacks,
    }
}

/// The record's tags of what sampled threads served, and each `served` entry's tag. A request
/// is named by its `PID/CONNECTION/INDEX` with no class yet: the caller, which knows the
/// requests that ended, names their class, client and speed (see `Profile::tags`).
fn sample_tags(served: &[Served]) -> (Vec<SampleTag>, Vec<Option<u32>>) {
    let mut tags = Vec::new();
    let of = served
        .iter()
        .map(|s| {
            let tag = match *s {
                Served::Unknown => return None,
                // A stretch no socket call claimed: its CPU was no request's either.
                Served::Nothing | Served::Held { .. } => SampleTag {
                    class: UNATTRIBUTED.into(),
                    ..SampleTag::default()
                },
                Served::Request { pid, conn_id, seq } => SampleTag {
                    request: request_id(pid, conn_id, seq),
                    ..SampleTag::default()
                },
            };
            tags.push(tag);
            Some(tags.len() as u32 - 1)
        })
        .collect();
    (tags, of)
}

/// A /tmp/perf-PID.map written by a JIT or interpreter: `START SIZE NAME` per line, hex.
struct PerfMap {
    entries: Vec<(u64, u64, String)>,
}

impl PerfMap {
    fn read(pid: u32) -> Option<PerfMap> {
        Some(Self::parse(
            &std::fs::read_to_string(format!("/tmp/perf-{pid}.map")).ok()?,
        ))
    }

    fn parse(text: &str) -> PerfMap {
        let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
        let mut entries: Vec<(u64, u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.splitn(3, ' ');
                let start = hex(it.next()?)?;
                let size = hex(it.next()?)?;
                Some((start, size, it.next()?.to_string()))
            })
            .collect();
        // Stable: of two entries at one address, the later line (recompiled code) wins.
        entries.sort_by_key(|e| e.0);
        PerfMap { entries }
    }

    fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self
            .entries
            .partition_point(|e| e.0 <= addr)
            .checked_sub(1)?;
        let (start, size, name) = &self.entries[i];
        (addr < start + size).then_some(name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unnamed_addresses_are_grouped_by_the_function_containing_them() {
        let path = std::path::Path::new("/lib/x86_64-linux-gnu/libz.so.1");
        let info = ElfInfo::from_path(path).expect("zlib1g is installed");
        let ranges = info.function_ranges();
        assert!(ranges.len() > 50, "{} FDEs", ranges.len());
        let f = ranges
            .iter()
            .find(|r| r.end - r.start > 64)
            .expect("a function of more than 64 bytes");
        let at = |va: u64| {
            let off = info.offset_of(va).expect("inside a segment");
            unnamed_function(&info, &ranges, "libz.so.1", off)
        };
        let start = info.offset_of(f.start).expect("inside a segment");
        assert_eq!(at(f.start + 1), format!("libz.so.1!0x{start:x}"));
        assert_eq!(at(f.end - 1), at(f.start + 1));
        // Offset 0 is the ELF header: no function, the address itself.
        assert_eq!(
            unnamed_function(&info, &ranges, "libz.so.1", 0),
            "libz.so.1+0x0"
        );
    }

    #[test]
    fn perf_map_lookup() {
        let m = PerfMap::parse(
            "7f00001000 40 LazyCompile:*hot [eval]:1:17\n0x7f00002000 10 stub\n7f00001000 20 JS:*hot again\nbad line\n",
        );
        assert_eq!(m.lookup(0x7f00001000), Some("JS:*hot again"));
        // The recompiled code replaced the old entry, which covered more.
        assert_eq!(m.lookup(0x7f0000103f), None);
        assert_eq!(m.lookup(0x7f0000200f), Some("stub"));
        assert_eq!(m.lookup(0x7f00002010), None);
        assert_eq!(m.lookup(0x10), None);
    }
}
