//! What the profile queries know of libraries and language runtimes: the well-known libraries
//! a server calls into (zlib, libcrypto, PCRE, ...), what each does and what to try when it
//! dominates, and how to make a JIT or interpreter name its frames.

use reqcost_record::{Frame, Profile};

use super::{scaffolding_module, total_samples};

/// What a well-known library does, in words a reader recognises, and what to try when it
/// dominates a server's CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownLibrary {
    /// Stable id: `compression`, `crypto`, `regex`, `xml`, `json`, `runtime`.
    pub kind: &'static str,
    /// `zlib compression (gzip/deflate)`.
    pub what: &'static str,
    pub fix: &'static str,
    /// File-name prefixes of the library's modules.
    prefixes: &'static [&'static str],
}

pub const COMPRESSION_FIX: &str = "compress once, not per response: serve precompressed files \
     (nginx gzip_static, Apache mod_deflate with precompressed variants), cache compressed \
     responses, or lower the level (zlib levels above 6 cost several times more for a few per \
     cent of size)";

pub const KNOWN_LIBRARIES: &[KnownLibrary] = &[
    KnownLibrary {
        kind: "compression",
        what: "zlib compression (gzip/deflate)",
        fix: COMPRESSION_FIX,
        prefixes: &["libz.so", "libz-ng.so"],
    },
    KnownLibrary {
        kind: "compression",
        what: "brotli compression",
        fix: COMPRESSION_FIX,
        prefixes: &["libbrotlienc.so", "libbrotlicommon.so"],
    },
    KnownLibrary {
        kind: "compression",
        what: "zstd compression",
        fix: COMPRESSION_FIX,
        prefixes: &["libzstd.so"],
    },
    KnownLibrary {
        kind: "crypto",
        what: "cryptography (TLS)",
        fix: "reuse TLS sessions and connections (keep-alive, session tickets), prefer ECDSA \
              keys and AES-GCM/ChaCha20 with hardware support; see the tls-handshake finding",
        prefixes: &[
            "libcrypto.so",
            "libssl.so",
            "libgnutls.so",
            "libnettle.so",
            "libhogweed.so",
            "libgcrypt.so",
            "libgmp.so",
        ],
    },
    KnownLibrary {
        kind: "regex",
        what: "regular expressions (PCRE)",
        fix: "fewer or simpler regular expressions per request (rewrite rules, location \
              matches), anchored patterns, PCRE's JIT (nginx pcre_jit on)",
        prefixes: &[
            "libpcre.so",
            "libpcre2-8.so",
            "libpcre2-16.so",
            "libpcre2-32.so",
        ],
    },
    KnownLibrary {
        kind: "xml",
        what: "XML parsing (libxml2)",
        fix: "parse less per request: cache parsed documents, stream instead of building trees",
        prefixes: &["libxml2.so", "libxslt.so", "libexpat.so"],
    },
    KnownLibrary {
        kind: "json",
        what: "JSON encoding/parsing",
        fix: "encode or parse less per request: cache serialized responses, smaller documents",
        prefixes: &[
            "libjson-c.so",
            "libjansson.so",
            "libyajl.so",
            "libcjson.so",
            "libsimdjson.so",
        ],
    },
    KnownLibrary {
        kind: "runtime",
        what: "the language runtime (interpreter, JIT, garbage collector)",
        fix: "profile inside the runtime to name its functions (see the profile notes for the \
              flag that names them) and look at allocation and the code the requests run",
        prefixes: &[
            "node",
            "libnode.so",
            "libv8.so",
            "python3",
            "libpython3",
            "libjvm.so",
            "liblua5",
            "lua5",
            "libperl.so",
            "perl",
            "libruby",
            "ruby",
            "php",
            "libphp",
        ],
    },
];

/// Code a server calls into rather than its own: a shared library other than the C library and
/// the dynamic loader, or a known library or language runtime (which may be the executable:
/// `node`, `python3.11`).
pub fn is_library(module: &str) -> bool {
    known_library(module).is_some()
        || (!module.is_empty() && !module.starts_with('[') && !scaffolding_module(module))
}

/// The [`KNOWN_LIBRARIES`] entry of `module` (a file name such as `libz.so.1.2.13`).
pub fn known_library(module: &str) -> Option<&'static KnownLibrary> {
    KNOWN_LIBRARIES
        .iter()
        .find(|l| l.prefixes.iter().any(|p| module.starts_with(p)))
}

/// A crypto library whose hot functions hash (a server deriving keys with PBKDF2, checking
/// passwords, signing with HMAC) does no TLS work there: its cost is the hashing.
pub const HASHING: KnownLibrary = KnownLibrary {
    kind: "hashing",
    what: "hashing (SHA, HMAC, PBKDF2 key derivation)",
    fix: "hash less per request: cache derived keys and verified credentials instead of \
          deriving them on every request, and check the key-derivation iteration count against \
          what the policy needs",
    prefixes: &[],
};

/// Function-name parts that mark hashing code (OpenSSL's `sha256_block_data_order_avx2`,
/// `HMAC_Update`, `kdf_pbkdf2_derive`; GnuTLS's and nettle's `nettle_sha256_update`), matched
/// without regard to case.
const HASH_MARKERS: &[&str] = &[
    "sha1", "sha2", "sha256", "sha512", "sha3", "keccak", "md5", "hmac", "pbkdf2", "blake2",
    "ripemd", "digest",
];

/// The [`known_library`] of `module` as the profile's symbols show its work: a crypto library
/// whose self samples are mostly in hashing functions is [`HASHING`]. Unnamed functions
/// (`libcrypto.so.3!0x232c20`) say nothing, and leave the library as its file name says.
pub fn library_in(p: &Profile, module: &str) -> Option<&'static KnownLibrary> {
    let known = known_library(module)?;
    if known.kind != "crypto" {
        return Some(known);
    }
    let (mut hashing, mut all) = (0, 0);
    for ((function, m), c) in super::function_counts(p) {
        if m != module {
            continue;
        }
        all += c.self_samples;
        let name = function.to_ascii_lowercase();
        if HASH_MARKERS.iter().any(|h| name.contains(h)) {
            hashing += c.self_samples;
        }
    }
    Some(if all > 0 && hashing * 2 > all {
        &HASHING
    } else {
        known
    })
}

/// A runtime that compiles or interprets code at run time, and how to make it name its frames.
struct Runtime {
    /// Module file-name prefixes that show the runtime is in the profile.
    prefixes: &'static [&'static str],
    hint: &'static str,
    /// Its frames show as `[unknown]` without a map (JIT code); an interpreter's show as its
    /// evaluation loop instead.
    jit: bool,
}

const RUNTIMES: &[Runtime] = &[
    Runtime {
        prefixes: &["node", "libnode.so"],
        hint: "Node.js: start it with `node --perf-basic-prof` (it writes /tmp/perf-PID.map, which reqcost reads) to name JavaScript functions",
        jit: true,
    },
    Runtime {
        prefixes: &["libjvm.so"],
        hint: "Java: start it with `-XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit`, or run `jcmd PID Compiler.perfmap` (JDK 17+) before the run ends, to write /tmp/perf-PID.map, which reqcost reads",
        jit: true,
    },
    Runtime {
        prefixes: &["python3", "libpython3"],
        hint: "Python ≥ 3.12: run it with `python3 -X perf` (or PYTHONPERFSUPPORT=1) to name Python functions in /tmp/perf-PID.map, which reqcost reads; older Pythons show only the interpreter's loop",
        jit: false,
    },
];

/// Share of user samples under which unnamed runtime code is not worth a hint.
pub const RUNTIME_HINT_SHARE: f64 = 0.05;

/// How to get names for the code of a JIT-compiling or interpreting runtime whose frames the
/// profile could not name (no /tmp/perf-PID.map was found): the flag for the runtime found.
pub fn runtime_hint(p: &Profile) -> Option<&'static str> {
    if p.frames.iter().any(|f| f.module == "[jit]") {
        return None;
    }
    let samples = p.samples.max(1) as f64;
    RUNTIMES.iter().find_map(|r| {
        let ours = |f: &Frame| r.prefixes.iter().any(|x| f.module.starts_with(x));
        if !p.frames.iter().any(ours) {
            return None;
        }
        let unnamed = if r.jit {
            total_samples(p, |f| !f.kernel && f.function == "[unknown]")
        } else {
            total_samples(p, ours)
        };
        (unnamed as f64 / samples >= RUNTIME_HINT_SHARE).then_some(r.hint)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::module_self_samples;
    use crate::profile::tests::{profile_of, GZIP};

    #[test]
    fn self_time_by_module_and_known_libraries() {
        let p = profile_of(GZIP);
        assert_eq!(
            module_self_samples(&p),
            vec![("libz.so.1", 96), ("[kernel.kallsyms]", 4)]
        );
        assert_eq!(known_library("libz.so.1.2.13").unwrap().kind, "compression");
        assert!(known_library("libz.so.1").unwrap().what.contains("zlib"));
        assert_eq!(known_library("libssl.so.3").unwrap().kind, "crypto");
        assert_eq!(known_library("libpcre2-8.so.0").unwrap().kind, "regex");
        assert_eq!(known_library("nginx"), None);
        assert!(is_library("libz.so.1") && is_library("node") && is_library("libapr-1.so.0"));
        for not_one in [
            "nginx",
            "libc.so.6",
            "ld-linux-x86-64.so.2",
            "[kernel.kallsyms]",
            "",
        ] {
            assert!(!is_library(not_one), "{not_one}");
        }
    }

    #[test]
    fn runtimes_without_a_perf_map_get_the_flag_that_names_their_frames() {
        let node: &[(&[&str], u64)] = &[
            (
                &[
                    "[unknown]",
                    "uv_run@libuv.so.1",
                    "node::Start@libnode.so.108",
                ],
                60,
            ),
            (&["memcpy@libc.so.6", "node::Start@libnode.so.108"], 40),
        ];
        let hint = runtime_hint(&profile_of(node)).expect("a hint for node");
        assert!(hint.contains("node --perf-basic-prof"), "{hint}");
        // With a perf map read, JIT frames are named: no hint.
        let mapped: &[(&[&str], u64)] = &[(&["LazyCompile:*f@[jit]", "x@libnode.so.108"], 10)];
        assert_eq!(runtime_hint(&profile_of(mapped)), None);
        // Unnamed code under the share: no hint.
        let few: &[(&[&str], u64)] = &[
            (&["[unknown]", "node::Start@libnode.so.108"], 4),
            (&["memcpy@libc.so.6", "node::Start@libnode.so.108"], 96),
        ];
        assert_eq!(runtime_hint(&profile_of(few)), None);
        assert_eq!(runtime_hint(&profile_of(GZIP)), None);
    }
}
