//! Which TLS libraries the server's processes map, read from /proc/PID/maps: the ones whose
//! plaintext reqcost reads with uprobes (OpenSSL 3's libssl and GnuTLS, shared or linked into
//! the executable; Go's crypto/tls in a Go program), with the file offsets of the functions to
//! probe, and the ones it knows but does not hook, so that the output can say why a TLS server's requests are not visible
//! (docs/tls.md).

use std::collections::HashMap;
use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSymbol};

use crate::gotls::{self, GoTls};

/// A TLS library whose plaintext functions reqcost probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library {
    OpenSsl,
    GnuTls,
    /// Go's crypto/tls, probed at its functions' entries and RET instructions (src/gotls.rs).
    Go,
}

impl Library {
    pub fn name(self) -> &'static str {
        match self {
            Library::OpenSsl => "OpenSSL",
            Library::GnuTls => "GnuTLS",
            Library::Go => "Go's crypto/tls",
        }
    }

    /// The functions that move application data, each with its kind (`Entry`). GnuTLS's
    /// gnutls_record_send is a call of gnutls_record_send2 (lib/record.c, since 3.6.3): probing
    /// both would trap twice per write.
    pub fn functions(self) -> &'static [(&'static str, Entry)] {
        match self {
            Library::OpenSsl => &[
                ("SSL_read", Entry::Read),
                ("SSL_read_ex", Entry::ReadEx),
                ("SSL_write", Entry::Write),
                ("SSL_write_ex", Entry::WriteEx),
            ],
            Library::GnuTls => &[
                ("gnutls_record_recv", Entry::Read),
                ("gnutls_record_recv_seq", Entry::Read),
                ("gnutls_record_send2", Entry::Write),
            ],
            Library::Go => &[],
        }
    }

    /// The symbol whose definition says a file is this library (linked in statically or not).
    fn marker(self) -> &'static str {
        self.functions()[0].0
    }

    /// The library's own accessor of a server session's "resumed" flag, and how to find the
    /// flag's place in its code (none for Go).
    fn resumed_accessor(self) -> Option<(&'static str, Decoder)> {
        match self {
            Library::OpenSsl => Some(("SSL_session_reused", openssl_hit)),
            Library::GnuTls => Some(("gnutls_session_is_resumed", gnutls_resumed)),
            Library::Go => None,
        }
    }
}

/// Reads where the resumed flag is from an accessor's first bytes of code.
type Decoder = fn(&[u8]) -> Option<ResumedFlag>;

/// Where a session object keeps whether its handshake resumed a session: `width` bytes (1 or
/// 4, non-zero for resumed) at `offset` from the object's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumedFlag {
    pub offset: u32,
    pub width: u8,
}

impl ResumedFlag {
    /// The uprobe cookie that hands it to the entry programs: the offset above the width.
    pub fn cookie(self) -> u64 {
        (u64::from(self.offset) << 8) | u64::from(self.width)
    }
}

/// The x86-64 endbr64 that may open a function built with CET.
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];

/// OpenSSL 3.0's `SSL_session_reused(s)` is `return s->hit;`: `mov eax, [rdi + disp]`
/// (8b 87 disp32, or 8b 47 disp8). Later versions go through SSL_CONNECTION first and do not
/// match: full and resumed are then not told apart.
fn openssl_hit(code: &[u8]) -> Option<ResumedFlag> {
    let code = code.strip_prefix(&ENDBR64).unwrap_or(code);
    let offset = match code {
        [0x8b, 0x87, d @ ..] if d.len() >= 4 => u32::from_le_bytes(d[..4].try_into().ok()?),
        [0x8b, 0x47, d, ..] => u32::from(*d),
        _ => return None,
    };
    Some(ResumedFlag { offset, width: 4 })
}

/// GnuTLS 3.7's `gnutls_session_is_resumed(session)` opens with the server's case:
/// `cmp dword [rdi], 2` (GNUTLS_CLIENT), `je` the client's case, then
/// `movzx eax, byte [rdi + disp32]` (internals.resumed) and `ret`.
fn gnutls_resumed(code: &[u8]) -> Option<ResumedFlag> {
    let code = code.strip_prefix(&ENDBR64).unwrap_or(code);
    match code {
        [0x83, 0x3f, 0x02, 0x74, _, 0x0f, 0xb6, 0x87, d0, d1, d2, d3, 0xc3, ..] => {
            Some(ResumedFlag {
                offset: u32::from_le_bytes([*d0, *d1, *d2, *d3]),
                width: 1,
            })
        }
        _ => None,
    }
}

/// How a probed function passes its plaintext: (ssl, buf, num) returning the bytes moved, or
/// OpenSSL's _ex form returning 1 and the bytes through a pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    Read,
    ReadEx,
    Write,
    WriteEx,
}

/// A file to probe: its library, the file as reqcost opens it (through /proc/PID/root), its
/// path as the process names it, and the file offset of each function it defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hookable {
    pub library: Library,
    pub file: PathBuf,
    pub path: String,
    pub functions: Vec<(Entry, usize)>,
    /// Where its sessions say whether they resumed, when its code was recognised.
    pub resumed: Option<ResumedFlag>,
    /// Go's crypto/tls: where its probes go (`functions` is empty).
    pub go: Option<GoTls>,
}

impl Hookable {
    /// `OpenSSL (/usr/lib/x86_64-linux-gnu/libssl.so.3)`.
    pub fn label(&self) -> String {
        format!("{} ({})", self.library.name(), self.path)
    }
}

/// The TLS libraries of one process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsLibraries {
    pub hooked: Vec<Hookable>,
    /// TLS libraries reqcost does not hook: `name (path)`.
    pub unhooked: Vec<String>,
}

/// TLS libraries known by their file name, reqcost hooks none of them.
const UNHOOKED: [(&str, &str); 4] = [
    ("libwolfssl.so", "wolfSSL"),
    ("libmbedtls.so", "Mbed TLS"),
    ("libnss3.so", "NSS"),
    ("libs2n.so", "s2n-tls"),
];

/// What one file is, as far as TLS goes.
#[derive(Debug, Clone)]
enum Kind {
    Hooked(Library, Vec<(Entry, usize)>, Option<ResumedFlag>),
    Unhooked(&'static str),
    /// A Go program linking crypto/tls (its function table, .gopclntab, survives stripping).
    Go(GoTls),
    /// A Go program whose crypto/tls could not be located: why.
    GoUnknown(String),
    None,
}

/// Reads processes' TLS libraries, each file parsed once however many processes map it.
#[derive(Default)]
pub struct Finder {
    kinds: HashMap<(u64, u64), Kind>,
}

impl Finder {
    /// The TLS libraries process `pid` maps now (none once it is gone).
    pub fn find(&mut self, pid: u32) -> TlsLibraries {
        let mut found = TlsLibraries::default();
        let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return found;
        };
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        let mut paths: Vec<&str> = mapped_files(&maps).collect();
        paths.dedup();
        for path in paths {
            let file = root.join(path.trim_start_matches('/'));
            let Ok(meta) = fs::metadata(&file) else {
                continue;
            };
            let kind = self
                .kinds
                .entry((meta.dev(), meta.ino()))
                .or_insert_with(|| kind_of(&file, path));
            match kind {
                Kind::Hooked(library, functions, resumed) => found.hooked.push(Hookable {
                    library: *library,
                    file,
                    path: path.to_string(),
                    functions: functions.clone(),
                    resumed: *resumed,
                    go: None,
                }),
                Kind::Go(points) => found.hooked.push(Hookable {
                    library: Library::Go,
                    file,
                    path: path.to_string(),
                    functions: Vec::new(),
                    resumed: None,
                    go: Some(points.clone()),
                }),
                Kind::Unhooked(lib) => found.unhooked.push(format!("{lib} ({path})")),
                Kind::GoUnknown(why) => found
                    .unhooked
                    .push(format!("Go's crypto/tls, if it serves TLS ({path}): {why}")),
                Kind::None => {}
            }
        }
        found
    }
}

/// The paths of the files a maps listing maps executable code from.
pub(crate) fn mapped_files(maps: &str) -> impl Iterator<Item = &str> {
    maps.lines().filter_map(|line| {
        let mut fields = line.splitn(6, ' ');
        let perms = fields.nth(1)?;
        let path = fields.nth(3)?.trim_start();
        (perms.contains('x') && path.starts_with('/')).then_some(path)
    })
}

fn kind_of(file: &Path, path: &str) -> Kind {
    let name = Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some((_, lib)) = UNHOOKED.iter().find(|(p, _)| name.starts_with(p)) {
        return Kind::Unhooked(lib);
    }
    let Ok(f) = File::open(file) else {
        return Kind::None;
    };
    let cache = object::ReadCache::new(f);
    let Ok(obj) = object::File::parse(&cache) else {
        return Kind::None;
    };
    for library in [Library::OpenSsl, Library::GnuTls] {
        let functions = offsets(&obj, library);
        if functions
            .iter()
            .any(|(_, name, _)| *name == library.marker())
        {
            let resumed = library
                .resumed_accessor()
                .and_then(|(accessor, decode)| decode(code_of(&obj, accessor)?));
            return Kind::Hooked(
                library,
                functions.into_iter().map(|(e, _, off)| (e, off)).collect(),
                resumed,
            );
        }
    }
    if obj.section_by_name(".gopclntab").is_none() {
        return Kind::None;
    }
    match gotls::probe_points(file) {
        Ok(Some(points)) => Kind::Go(points),
        Ok(None) => Kind::None,
        Err(e) => Kind::GoUnknown(e),
    }
}

/// The first bytes of function `name`'s code, if `obj` defines it.
fn code_of<'d, R: object::ReadRef<'d>>(obj: &object::File<'d, R>, name: &str) -> Option<&'d [u8]> {
    const LEN: u64 = 16;
    let symbol = obj
        .dynamic_symbols()
        .chain(obj.symbols())
        .find(|s| s.is_definition() && s.name() == Ok(name))?;
    let section = obj.section_by_index(symbol.section_index()?).ok()?;
    section.data_range(symbol.address(), LEN).ok()?
}

/// The library's functions `obj` defines, with their offsets in the file (what a uprobe is
/// attached at), from the symbol table or the dynamic one.
fn offsets<'d, R: object::ReadRef<'d>>(
    obj: &object::File<'d, R>,
    library: Library,
) -> Vec<(Entry, &'static str, usize)> {
    let mut found = Vec::new();
    for &(name, entry) in library.functions() {
        let symbol = obj
            .dynamic_symbols()
            .chain(obj.symbols())
            .find(|s| s.is_definition() && s.name() == Ok(name));
        let Some(symbol) = symbol else { continue };
        let Some(section) = symbol
            .section_index()
            .and_then(|i| obj.section_by_index(i).ok())
        else {
            continue;
        };
        let Some((file_start, _)) = section.file_range() else {
            continue;
        };
        let offset = symbol.address() - section.address() + file_start;
        found.push((entry, name, offset as usize));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resumed_flag_is_read_from_the_accessors_code() {
        // OpenSSL 3.0.19 (Debian 12): mov 0x4d0(%rdi),%eax; xor %edi,%edi; ret.
        let hit = [0x8b, 0x87, 0xd0, 0x04, 0x00, 0x00, 0x31, 0xff, 0xc3];
        assert_eq!(
            openssl_hit(&hit),
            Some(ResumedFlag {
                offset: 0x4d0,
                width: 4
            })
        );
        let cet = [0xf3, 0x0f, 0x1e, 0xfa, 0x8b, 0x47, 0x38, 0xc3];
        assert_eq!(
            openssl_hit(&cet),
            Some(ResumedFlag {
                offset: 0x38,
                width: 4
            })
        );
        // OpenSSL 3.2's form goes through a call: not recognised.
        assert_eq!(openssl_hit(&[0x48, 0x83, 0xec, 0x08, 0xe8]), None);
        let gnutls = [
            0x83, 0x3f, 0x02, 0x74, 0x0b, 0x0f, 0xb6, 0x87, 0xb0, 0x01, 0x00, 0x00, 0xc3,
        ];
        assert_eq!(
            gnutls_resumed(&gnutls),
            Some(ResumedFlag {
                offset: 0x1b0,
                width: 1
            })
        );
        assert_eq!(gnutls_resumed(&hit), None);
        assert_eq!(
            ResumedFlag {
                offset: 0x1b0,
                width: 1
            }
            .cookie(),
            0x1b001
        );
    }

    #[test]
    fn executable_mappings_give_their_files() {
        let maps = "\
55d0c0a00000-55d0c0a2a000 r--p 00000000 08:01 1234   /usr/sbin/nginx
55d0c0a2a000-55d0c0b00000 r-xp 0002a000 08:01 1234   /usr/sbin/nginx
7f0000000000-7f0000010000 r-xp 00000000 08:01 99     /usr/lib/x86_64-linux-gnu/libssl.so.3
7f0000020000-7f0000030000 rw-p 00000000 00:00 0 
7ffd00000000-7ffd00021000 r-xp 00000000 00:00 0      [vdso]";
        let files: Vec<&str> = mapped_files(maps).collect();
        assert_eq!(
            files,
            ["/usr/sbin/nginx", "/usr/lib/x86_64-linux-gnu/libssl.so.3"]
        );
    }

    /// This test binary calls no TLS library; its own maps hold libc, never libssl.
    #[test]
    fn a_process_without_tls_has_no_tls_library() {
        let found = Finder::default().find(std::process::id());
        assert!(found.hooked.is_empty(), "{found:?}");
    }

    /// Debian's libssl (OpenSSL 3.0): its four functions, and `hit` where SSL_session_reused
    /// reads it.
    #[test]
    fn openssl_functions_and_resumed_flag_are_found() {
        let path = "/usr/lib/x86_64-linux-gnu/libssl.so.3";
        let Kind::Hooked(library, functions, resumed) = kind_of(Path::new(path), path) else {
            panic!("{path} is not OpenSSL");
        };
        assert_eq!(library, Library::OpenSsl);
        let entries: Vec<Entry> = functions.iter().map(|(e, _)| *e).collect();
        assert_eq!(
            entries,
            [Entry::Read, Entry::ReadEx, Entry::Write, Entry::WriteEx]
        );
        assert_eq!(resumed.map(|r| r.width), Some(4));
    }

    /// Debian's GnuTLS (libgnutls30, which gnutls-bin of scripts/bootstrap needs) defines the three functions that
    /// move its plaintext, at the offsets its symbols give.
    #[test]
    fn gnutls_functions_are_found_at_their_file_offsets() {
        let path = "/usr/lib/x86_64-linux-gnu/libgnutls.so.30";
        let Kind::Hooked(library, functions, resumed) = kind_of(Path::new(path), path) else {
            panic!("{path} is not GnuTLS");
        };
        // Debian 12's GnuTLS 3.7.9: internals.resumed, one byte (objdump of the accessor).
        assert_eq!(
            resumed,
            Some(ResumedFlag {
                offset: 0x1b0,
                width: 1
            })
        );
        assert_eq!(library, Library::GnuTls);
        let entries: Vec<Entry> = functions.iter().map(|(e, _)| *e).collect();
        assert_eq!(entries, [Entry::Read, Entry::Read, Entry::Write]);
        // A function's first bytes in the file: x86-64 code, never the ELF header.
        let bytes = fs::read(path).unwrap();
        for (_, off) in functions {
            assert!(off > 64 && off < bytes.len(), "{off}");
        }
    }
}
