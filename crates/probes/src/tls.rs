//! Which TLS libraries the server's tree maps, read from /proc/PID/maps when the probes attach:
//! the ones whose plaintext reqcost reads with uprobes (OpenSSL 3's libssl, shared or linked
//! into the executable), and the ones it knows but does not hook, so that the output can say
//! why a TLS server's requests are not visible (docs/tls.md).

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSymbol};

/// The TLS libraries of a process tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsLibraries {
    /// Files exporting OpenSSL's SSL_read/SSL_write (libssl, or an executable linked with it
    /// statically): the file as reqcost opens it (through /proc/PID/root), and its path as
    /// the tree names it.
    pub openssl: Vec<(PathBuf, String)>,
    /// TLS libraries reqcost does not hook: `name (path)`.
    pub unhooked: Vec<String>,
}

/// TLS libraries known by their file name, reqcost hooks none of them.
const UNHOOKED: [(&str, &str); 5] = [
    ("libgnutls.so", "GnuTLS"),
    ("libwolfssl.so", "wolfSSL"),
    ("libmbedtls.so", "Mbed TLS"),
    ("libnss3.so", "NSS"),
    ("libs2n.so", "s2n-tls"),
];

/// What the processes `pids` map (each file once, however many processes map it).
pub fn find(pids: &[u32]) -> TlsLibraries {
    let mut found = TlsLibraries::default();
    let mut seen = BTreeSet::new();
    for &pid in pids {
        let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        for path in mapped_files(&maps) {
            let file = root.join(path.trim_start_matches('/'));
            let Ok(meta) = fs::metadata(&file) else {
                continue;
            };
            if !seen.insert((meta.dev(), meta.ino())) {
                continue;
            }
            let name = Path::new(path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name.starts_with("libssl.so") {
                found.openssl.push((file, path.to_string()));
            } else if let Some((_, lib)) = UNHOOKED.iter().find(|(p, _)| name.starts_with(p)) {
                found.unhooked.push(format!("{lib} ({path})"));
            } else {
                match linked_in(&file) {
                    Some(Linked::OpenSsl) => found.openssl.push((file, path.to_string())),
                    Some(Linked::Go) => found
                        .unhooked
                        .push(format!("Go's crypto/tls, if it serves TLS ({path})")),
                    None => {}
                }
            }
        }
    }
    found
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

/// A TLS implementation linked into an executable.
enum Linked {
    /// It defines SSL_read (OpenSSL linked in statically), as opposed to calling libssl's.
    OpenSsl,
    /// A Go program (its function table, .gopclntab, survives stripping): TLS would be Go's
    /// own crypto/tls, which reqcost does not hook.
    Go,
}

fn linked_in(path: &Path) -> Option<Linked> {
    let cache = object::ReadCache::new(File::open(path).ok()?);
    let obj = object::File::parse(&cache).ok()?;
    if obj
        .symbols()
        .chain(obj.dynamic_symbols())
        .any(|s| s.is_definition() && s.name() == Ok("SSL_read"))
    {
        return Some(Linked::OpenSsl);
    }
    obj.section_by_name(".gopclntab").map(|_| Linked::Go)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let found = find(&[std::process::id()]);
        assert!(found.openssl.is_empty(), "{found:?}");
    }
}
