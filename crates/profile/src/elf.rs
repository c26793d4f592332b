//! What the unwinder needs from a binary: its load segments and unwind sections.

use std::fs::File;
use std::ops::{Deref, Range};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use framehop::{ExplicitModuleSectionInfo, Module};
use object::{Object, ObjectSection, ObjectSegment};

/// Above this, `.text` is not kept for prologue/epilogue analysis (unwind tables suffice).
const MAX_TEXT: u64 = 32 << 20;

/// Section bytes shared by every process that maps the same binary.
#[derive(Clone, Default)]
pub struct Bytes(Arc<[u8]>);

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

struct Section {
    svma: Range<u64>,
    data: Option<Bytes>,
}

/// Unwind information of one ELF file.
pub struct ElfInfo {
    /// PT_LOAD segments: (file offset, virtual address, file size).
    segments: Vec<(u64, u64, u64)>,
    text: Option<Section>,
    eh_frame: Option<Section>,
    eh_frame_hdr: Option<Section>,
    got: Option<Range<u64>>,
    /// Bytes of DWARF in the file or in its separate debug file under /usr/lib/debug.
    pub dwarf_bytes: u64,
}

impl ElfInfo {
    pub fn from_path(path: &Path) -> Option<ElfInfo> {
        let cache = object::ReadCache::new(File::open(path).ok()?);
        let obj = object::File::parse(&cache).ok()?;
        let mut info = Self::from_object(&obj)?;
        info.dwarf_bytes += separate_debug_size(path, &obj);
        Some(info)
    }

    pub fn from_bytes(data: &[u8]) -> Option<ElfInfo> {
        Self::from_object(&object::File::parse(data).ok()?)
    }

    fn from_object<'d, R: object::ReadRef<'d>>(obj: &object::File<'d, R>) -> Option<ElfInfo> {
        let section = |name: &str, keep: bool| {
            let s = obj.section_by_name(name)?;
            let svma = s.address()..s.address() + s.size();
            let data = if keep {
                Some(Bytes(Arc::from(s.data().ok()?)))
            } else {
                None
            };
            Some(Section { svma, data })
        };
        let text_size = obj.section_by_name(".text").map_or(0, |s| s.size());
        let dwarf_bytes = obj
            .sections()
            .filter(|s| s.name().is_ok_and(|n| n.starts_with(".debug_")))
            .map(|s| s.compressed_file_range().map_or(0, |r| r.compressed_size))
            .sum();
        Some(ElfInfo {
            segments: obj
                .segments()
                .filter_map(|s| {
                    let (off, size) = s.file_range();
                    (size > 0).then_some((off, s.address(), size))
                })
                .collect(),
            text: section(".text", text_size <= MAX_TEXT),
            eh_frame: section(".eh_frame", true),
            eh_frame_hdr: section(".eh_frame_hdr", true),
            got: obj
                .section_by_name(".got")
                .map(|s| s.address()..s.address() + s.size()),
            dwarf_bytes,
        })
    }

    /// Link-address ranges of the functions `.eh_frame` describes, sorted by start: the
    /// compiler writes one FDE per function, static ones included, so they name the function
    /// containing an address even where a stripped binary's symbol table does not.
    pub fn function_ranges(&self) -> Vec<Range<u64>> {
        use gimli::UnwindSection;
        let Some(Section {
            svma,
            data: Some(data),
        }) = &self.eh_frame
        else {
            return Vec::new();
        };
        let mut bases = gimli::BaseAddresses::default().set_eh_frame(svma.start);
        if let Some(text) = &self.text {
            bases = bases.set_text(text.svma.start);
        }
        if let Some(got) = &self.got {
            bases = bases.set_got(got.start);
        }
        if let Some(hdr) = &self.eh_frame_hdr {
            bases = bases.set_eh_frame_hdr(hdr.svma.start);
        }
        let eh = gimli::EhFrame::new(data, gimli::LittleEndian);
        let mut entries = eh.entries(&bases);
        let mut ranges = Vec::new();
        while let Ok(Some(entry)) = entries.next() {
            if let gimli::CieOrFde::Fde(partial) = entry {
                if let Ok(fde) = partial.parse(gimli::EhFrame::cie_from_offset) {
                    if fde.len() > 0 {
                        ranges.push(fde.initial_address()..fde.end_address());
                    }
                }
            }
        }
        ranges.sort_by_key(|r| (r.start, r.end));
        ranges
    }

    /// Link address of file offset `offset`, inside a loaded segment.
    pub fn vaddr_of(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(off, _, size)| offset >= off && offset < off + size)
            .map(|&(off, vaddr, _)| offset - off + vaddr)
    }

    /// File offset of link address `vaddr`, inside a loaded segment.
    pub fn offset_of(&self, vaddr: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(_, va, size)| vaddr >= va && vaddr < va + size)
            .map(|&(off, va, _)| vaddr - va + off)
    }

    /// Address where virtual address 0 of the file lands, for a mapping of file offset `pgoff`
    /// at `start`.
    fn bias(&self, start: u64, pgoff: u64) -> u64 {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
        let seg = self
            .segments
            .iter()
            .find(|&&(off, _, size)| pgoff >= off - off % page && pgoff < off + size);
        match seg {
            Some(&(off, vaddr, _)) => start
                .wrapping_sub(pgoff)
                .wrapping_add(off)
                .wrapping_sub(vaddr),
            None => start.wrapping_sub(pgoff),
        }
    }

    /// A framehop module for one executable mapping of this file.
    pub fn module(&self, name: &str, range: Range<u64>, pgoff: u64) -> Module<Bytes> {
        let take = |s: &Option<Section>| {
            (
                s.as_ref().map(|s| s.svma.clone()),
                s.as_ref().and_then(|s| s.data.clone()),
            )
        };
        let (text_svma, text) = take(&self.text);
        let (eh_frame_svma, eh_frame) = take(&self.eh_frame);
        let (eh_frame_hdr_svma, eh_frame_hdr) = take(&self.eh_frame_hdr);
        let bias = self.bias(range.start, pgoff);
        Module::new(
            name.to_string(),
            range,
            bias,
            ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma,
                text,
                got_svma: self.got.clone(),
                eh_frame_svma,
                eh_frame,
                eh_frame_hdr_svma,
                eh_frame_hdr,
                ..Default::default()
            },
        )
    }
}

/// Size of the separate debug file Debian's -dbg/-dbgsym packages install, if any.
fn separate_debug_size<'d, R: object::ReadRef<'d>>(path: &Path, obj: &object::File<'d, R>) -> u64 {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Ok(Some(id)) = obj.build_id() {
        if id.len() > 1 {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            candidates
                .push(format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..]).into());
        }
    }
    if let (Ok(Some((link, _))), Some(dir)) = (obj.gnu_debuglink(), path.parent()) {
        let link = String::from_utf8_lossy(link).into_owned();
        candidates.push(dir.join(&link));
        candidates.push(dir.join(".debug").join(&link));
        candidates.push(
            Path::new("/usr/lib/debug")
                .join(dir.strip_prefix("/").unwrap_or(dir))
                .join(&link),
        );
    }
    candidates
        .iter()
        .filter(|c| c.as_path() != path)
        .find_map(|c| std::fs::metadata(c).ok())
        .map_or(0, |m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(segments: Vec<(u64, u64, u64)>) -> ElfInfo {
        ElfInfo {
            segments,
            text: None,
            eh_frame: None,
            eh_frame_hdr: None,
            got: None,
            dwarf_bytes: 0,
        }
    }

    #[test]
    fn bias_maps_file_offsets_to_link_addresses() {
        // A PIE's text segment: file offset 0x1040 linked at 0x1040, mapped from page 0x1000.
        let pie = info(vec![(0, 0, 0x5f8), (0x1040, 0x1040, 0x2000)]);
        assert_eq!(pie.bias(0x5555_5555_5000, 0x1000), 0x5555_5555_4000);
        // A non-PIE executable: text at file offset 0x1000 linked at 0x401000, mapped there.
        let exe = info(vec![(0, 0x400000, 0x500), (0x1000, 0x401000, 0x3000)]);
        assert_eq!(exe.bias(0x401000, 0x1000), 0);
    }
}
