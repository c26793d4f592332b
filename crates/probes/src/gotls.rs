//! Go's crypto/tls in Go programs, stripped or not (docs/tls.md): where to put the uprobes that
//! read its plaintext. A stripped Go binary keeps its function table, `.gopclntab` (the runtime
//! needs it for stack traces), so the functions are found there by name. Go moves goroutine
//! stacks, so a uretprobe (which rewrites the return address on the stack) would crash the
//! program: the returns are probed instead at each RET instruction of the function, found by
//! decoding its machine code.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::path::Path;

use iced_x86::{Decoder, DecoderOptions, Mnemonic};
use object::{Object, ObjectSection, SectionKind};

/// The probe points of Go's crypto/tls in one executable, as file offsets (what a uprobe is
/// attached at).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoTls {
    /// `crypto/tls.(*Conn).Read`: entry and returns.
    pub read: GoFunc,
    /// `crypto/tls.(*Conn).Write`: entry and returns.
    pub write: GoFunc,
    /// The returns of `crypto/tls.(*Conn).serverHandshake`: where a connection's handshake
    /// ends inside the first Read, which runs it.
    pub handshake_returns: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoFunc {
    pub entry: u64,
    pub returns: Vec<u64>,
}

const READ: &str = "crypto/tls.(*Conn).Read";
const WRITE: &str = "crypto/tls.(*Conn).Write";
const HANDSHAKE: &str = "crypto/tls.(*Conn).serverHandshake";
/// Present from Go 1.17 on amd64, with the register ABI the probes read arguments by (the
/// receiver in RAX, the buffer in RBX, the goroutine in R14, the count returned in RAX).
const REGABI: &str = "runtime.spillArgs";

/// The probe points of the Go program at `path`; `Ok(None)` when it does not link crypto/tls.
/// An error says why a Go program's crypto/tls cannot be hooked.
pub fn probe_points(path: &Path) -> Result<Option<GoTls>, String> {
    let cache = object::ReadCache::new(File::open(path).map_err(|e| e.to_string())?);
    let obj = object::File::parse(&cache).map_err(|e| e.to_string())?;
    if obj.architecture() != object::Architecture::X86_64 {
        return Err("only x86-64 Go programs are hooked".into());
    }
    let table = obj
        .section_by_name(".gopclntab")
        .ok_or("no .gopclntab")?
        .data()
        .map_err(|e| format!(".gopclntab unreadable: {e}"))?;
    let mut table = Pclntab::parse(table)?;
    if table.text_start == Some(0) {
        let text = module_text(&obj, &table).ok_or(
            "the text start is neither in the function table's header nor in the runtime's \
             module data",
        )?;
        table.text_start = Some(text);
    }
    let [read, write, handshake, regabi] = table.find([READ, WRITE, HANDSHAKE, REGABI]);
    let (Some(read), Some(write)) = (read, write) else {
        return Ok(None);
    };
    if regabi.is_none() {
        return Err("built with Go before 1.17, whose stack-based calls are not read".into());
    }
    let code = |range: Range<u64>| -> Result<(u64, Vec<u8>), String> {
        let text = obj
            .sections()
            .find(|s| s.address() <= range.start && range.end <= s.address() + s.size())
            .ok_or_else(|| format!("{range:x?} is in no section"))?;
        let data = text.data().map_err(|e| e.to_string())?;
        let (file_start, _) = text.file_range().ok_or("code not in the file")?;
        let at = (range.start - text.address()) as usize;
        let bytes = data[at..at + (range.end - range.start) as usize].to_vec();
        Ok((file_start + range.start - text.address(), bytes))
    };
    let func = |range: Range<u64>| -> Result<GoFunc, String> {
        let (entry, bytes) = code(range.clone())?;
        let returns = returns(&bytes, range.start)
            .into_iter()
            .map(|at| entry + (at - range.start))
            .collect::<Vec<_>>();
        if returns.is_empty() {
            return Err(format!(
                "no RET found in the function at {:#x}",
                range.start
            ));
        }
        Ok(GoFunc { entry, returns })
    };
    Ok(Some(GoTls {
        read: func(read)?,
        write: func(write)?,
        handshake_returns: match handshake {
            Some(range) => func(range)?.returns,
            None => Vec::new(),
        },
    }))
}

/// Where the function table's offsets start, when its header leaves it zero (Go 1.22 and
/// later; for Go 1.18 to 1.21 the header has it): the `text` field of the runtime's module
/// data, which starts with the address of the table's header. In a PIE that address is a
/// relative relocation's addend. A candidate is kept only if its `minpc` is the text start plus
/// the first function's offset, as in the runtime.
fn module_text<'d, R: object::ReadRef<'d>>(
    obj: &object::File<'d, R>,
    table: &Pclntab,
) -> Option<u64> {
    /// Offsets in the runtime's moduledata (64-bit): after the header pointer, six slices and
    /// findfunctab come minpc, maxpc and text.
    const MINPC: u64 = 160;
    const TEXT: u64 = 176;
    let header = obj.section_by_name(".gopclntab")?.address();
    let relocated: HashMap<u64, u64> = obj
        .dynamic_relocations()
        .into_iter()
        .flatten()
        .filter(|(_, r)| r.kind() == object::RelocationKind::Relative)
        .map(|(at, r)| (at, r.addend() as u64))
        .collect();
    let data: Vec<(u64, &[u8])> = obj
        .sections()
        .filter(|s| matches!(s.kind(), SectionKind::Data | SectionKind::ReadOnlyData))
        .filter_map(|s| Some((s.address(), s.data().ok()?)))
        .collect();
    let word = |at: u64| -> Option<u64> {
        if let Some(&v) = relocated.get(&at) {
            return Some(v);
        }
        data.iter().find_map(|&(start, bytes)| {
            let i = usize::try_from(at.checked_sub(start)?).ok()?;
            Some(u64::from_le_bytes(bytes.get(i..i + 8)?.try_into().ok()?))
        })
    };
    let first = table.u32(table.functab)? as u64;
    let found_in_data = data.iter().flat_map(|&(start, bytes)| {
        bytes
            .chunks_exact(8)
            .enumerate()
            .filter(move |(_, w)| u64::from_le_bytes((*w).try_into().unwrap()) == header)
            .map(move |(i, _)| start + 8 * i as u64)
    });
    let found_relocated = relocated
        .iter()
        .filter(|(_, &v)| v == header)
        .map(|(&at, _)| at);
    found_in_data.chain(found_relocated).find_map(|at| {
        let text = word(at + TEXT)?;
        (text != 0 && word(at + MINPC)? == text + first).then_some(text)
    })
}

/// The addresses of the RET instructions in `code`, which starts at address `start`.
pub fn returns(code: &[u8], start: u64) -> Vec<u64> {
    let mut decoder = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
    decoder
        .iter()
        .filter(|i| i.mnemonic() == Mnemonic::Ret)
        .map(|i| i.ip())
        .collect()
}

/// Go's function table (the runtime's pcHeader and functab, 64-bit, little-endian): the layout
/// of Go 1.16-1.17 (magic 0xfffffffa) and of Go 1.18 and later (0xfffffff0, 0xfffffff1), which
/// added the text start and made entries 32-bit offsets from it.
pub struct Pclntab<'a> {
    data: &'a [u8],
    nfunc: usize,
    /// The text start entries are offsets from (Go 1.18+); None when entries are addresses.
    text_start: Option<u64>,
    funcnames: usize,
    functab: usize,
}

impl<'a> Pclntab<'a> {
    pub fn parse(data: &'a [u8]) -> Result<Pclntab<'a>, String> {
        let word = |at: usize| -> Result<u64, String> {
            data.get(at..at + 8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
                .ok_or_else(|| ".gopclntab truncated".to_string())
        };
        let magic = u32::from_le_bytes(
            data.get(..4)
                .ok_or(".gopclntab truncated")?
                .try_into()
                .unwrap(),
        );
        if data.get(7) != Some(&8) {
            return Err(".gopclntab is not of a 64-bit program".into());
        }
        let (text_start, offsets) = match magic {
            0xffff_fff0 | 0xffff_fff1 => (Some(word(24)?), 32),
            0xffff_fffa => (None, 24),
            _ => return Err(format!(".gopclntab magic {magic:#x}: Go before 1.16")),
        };
        let table = Pclntab {
            data,
            nfunc: word(8)? as usize,
            text_start,
            funcnames: word(offsets)? as usize,
            functab: word(offsets + 32)? as usize,
        };
        let entry = if text_start.is_some() { 8 } else { 16 };
        if table.functab + (table.nfunc + 1) * entry > data.len() || table.funcnames > data.len() {
            return Err(".gopclntab truncated".into());
        }
        Ok(table)
    }

    /// Each function's name and code range, in address order.
    pub fn functions(&self) -> impl Iterator<Item = (&'a [u8], Range<u64>)> + '_ {
        (0..self.nfunc).filter_map(|i| {
            let (start, func) = self.entry(i)?;
            let (end, _) = self.entry(i + 1)?;
            let name_off = self.functab + func + if self.text_start.is_some() { 4 } else { 8 };
            let name = self.funcnames + self.u32(name_off)? as usize;
            let name = self.data.get(name..)?;
            let len = name.iter().position(|&b| b == 0)?;
            Some((&name[..len], start..end))
        })
    }

    /// The code ranges of the functions named `names`, each found once.
    pub fn find<const N: usize>(&self, names: [&str; N]) -> [Option<Range<u64>>; N] {
        let mut found = [const { None }; N];
        for (name, range) in self.functions() {
            if let Some(i) = names.iter().position(|n| n.as_bytes() == name) {
                found[i].get_or_insert(range);
            }
        }
        found
    }

    /// The functab's entry `i`: the function's address and its _func's offset from the functab.
    fn entry(&self, i: usize) -> Option<(u64, usize)> {
        match self.text_start {
            Some(text) => {
                let at = self.functab + i * 8;
                Some((text + self.u32(at)? as u64, self.u32(at + 4)? as usize))
            }
            None => {
                let at = self.functab + i * 16;
                Some((self.u64(at)?, self.u64(at + 8)? as usize))
            }
        }
    }

    fn u32(&self, at: usize) -> Option<u32> {
        Some(u32::from_le_bytes(
            self.data.get(at..at + 4)?.try_into().ok()?,
        ))
    }

    fn u64(&self, at: usize) -> Option<u64> {
        Some(u64::from_le_bytes(
            self.data.get(at..at + 8)?.try_into().ok()?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debian's molly-brown: a stripped Go 1.19 program serving Gemini with crypto/tls.
    const MOLLY: &str = "/usr/bin/molly-brown";

    /// molly-brown's bytes and the address its text starts at.
    fn molly() -> (Vec<u8>, u64) {
        let data = std::fs::read(MOLLY).expect("molly-brown installed (scripts/bootstrap)");
        let text = {
            let obj = object::File::parse(&*data).unwrap();
            assert!(
                obj.section_by_name(".symtab").is_none(),
                "molly-brown is stripped"
            );
            obj.section_by_name(".text").unwrap().address()
        };
        (data, text)
    }

    #[test]
    fn a_byte_like_ret_inside_an_instruction_is_not_a_return() {
        // mov eax, 0xc3c3c3c3; ret; int3; ret 8
        let code = [0xb8, 0xc3, 0xc3, 0xc3, 0xc3, 0xc3, 0xcc, 0xc2, 0x08, 0x00];
        assert_eq!(returns(&code, 0x1000), [0x1005, 0x1007]);
    }

    #[test]
    fn the_function_table_of_a_stripped_go_binary_names_its_functions() {
        let (data, text) = molly();
        let obj = object::File::parse(&*data).unwrap();
        let table = obj.section_by_name(".gopclntab").unwrap().data().unwrap();
        let table = Pclntab::parse(table).unwrap();
        let funcs: Vec<_> = table.functions().collect();
        assert!(funcs.len() > 1000, "{}", funcs.len());
        // Externally linked: the C start-up code comes first in the text.
        assert!(funcs[0].1.start >= text, "{:x?}", funcs[0]);
        assert!(funcs.windows(2).all(|w| w[0].1.end == w[1].1.start));
        let [read, main] = table.find([READ, "main.main"]);
        assert!(read.is_some() && main.is_some());
    }

    /// The entries found are Go functions' entries (the stack check every non-leaf Go function
    /// of the register ABI starts with: `cmp rsp, [r14+0x10]` or, with a large frame, `lea r12,
    /// [rsp-N]` first), and each return is a RET byte.
    #[test]
    fn the_probe_points_of_molly_brown_are_entries_and_returns() {
        let (data, _) = molly();
        let points = probe_points(Path::new(MOLLY))
            .unwrap()
            .expect("crypto/tls linked");
        for func in [&points.read, &points.write] {
            let entry = &data[func.entry as usize..][..4];
            assert!(
                entry == [0x49, 0x3b, 0x66, 0x10] || entry[..3] == [0x4c, 0x8d, 0x64],
                "{entry:x?}"
            );
            assert!(func.returns.iter().all(|&r| data[r as usize] == 0xc3));
            assert!(func.returns.iter().all(|&r| r > func.entry));
        }
        assert!(!points.handshake_returns.is_empty());
    }

    #[test]
    fn a_program_that_is_not_go_has_no_function_table() {
        let e = probe_points(Path::new("/bin/true")).unwrap_err();
        assert_eq!(e, "no .gopclntab");
    }
}
