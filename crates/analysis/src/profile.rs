//! Queries over a record's sampled call chains ([`Profile`]), one home for what the summary's
//! profile section and the findings rules both ask: self and total samples, callers, how deep
//! user chains were unwound, and which functions copy memory.

use std::borrow::Cow;
use std::collections::HashMap;

use reqcost_record::{Frame, Profile, Stack};

/// (function, module): frames of one function inlined at some sites and called at others are
/// the same function for shares.
pub type FnKey<'a> = (&'a str, &'a str);

pub fn key(f: &Frame) -> FnKey<'_> {
    (&f.function, &f.module)
}

/// Which frames of a chain a query looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Every frame: the leaf is where the CPU was, often kernel code on a network server.
    All,
    /// User-space frames only: the leaf is the innermost user function, even when it had
    /// trapped into the kernel (a copy faulting a page in), which is what a server's authors
    /// can change.
    User,
}

/// The frames of `s` in `view`, leaf first, with their index in `p.frames`. An index outside
/// the frame table (a damaged record) is skipped rather than trusted.
fn frames<'a>(
    p: &'a Profile,
    s: &'a Stack,
    view: View,
) -> impl Iterator<Item = (u32, &'a Frame)> + Clone + 'a {
    s.frames
        .iter()
        .filter_map(|&i| Some((i, p.frames.get(i as usize)?)))
        .filter(move |(_, f)| view == View::All || !f.kernel)
}

/// Samples of one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FnCount {
    /// Samples with the function as leaf.
    pub self_samples: u64,
    /// Samples with the function anywhere in the chain.
    pub total_samples: u64,
    pub kernel: bool,
}

/// Per-function sample counts, the leaf being the innermost frame of any kind.
pub fn function_counts(p: &Profile) -> HashMap<FnKey<'_>, FnCount> {
    let mut counts: HashMap<FnKey<'_>, FnCount> = HashMap::new();
    let mut seen: Vec<FnKey<'_>> = Vec::new();
    for s in &p.stacks {
        seen.clear();
        for (i, (_, frame)) in frames(p, s, View::All).enumerate() {
            let k = key(frame);
            let e = counts.entry(k).or_insert(FnCount {
                self_samples: 0,
                total_samples: 0,
                kernel: frame.kernel,
            });
            if i == 0 {
                e.self_samples += s.count;
            }
            // Recursion must not count a sample twice in a function's total.
            if !seen.contains(&k) {
                seen.push(k);
                e.total_samples += s.count;
            }
        }
    }
    counts
}

/// Samples whose leaf in `view` matches `leaf`.
pub fn self_samples(p: &Profile, view: View, leaf: impl Fn(&Frame) -> bool) -> u64 {
    p.stacks
        .iter()
        .filter(|s| frames(p, s, view).next().is_some_and(|(_, f)| leaf(f)))
        .map(|s| s.count)
        .sum()
}

/// Samples whose chain passes through a frame matching `pred`, anywhere (self + callees).
pub fn total_samples(p: &Profile, pred: impl Fn(&Frame) -> bool) -> u64 {
    p.stacks
        .iter()
        .filter(|s| frames(p, s, View::All).any(|(_, f)| pred(f)))
        .map(|s| s.count)
        .sum()
}

/// Samples whose leaf is kernel code.
pub fn kernel_samples(p: &Profile) -> u64 {
    self_samples(p, View::All, |f| f.kernel)
}

/// (samples with user frames, those of them with at least `min` named user frames).
pub fn user_depth(p: &Profile, min: usize) -> (u64, u64) {
    let (mut user, mut deep) = (0, 0);
    for s in &p.stacks {
        let mut user_frames = frames(p, s, View::User).peekable();
        if user_frames.peek().is_none() {
            continue;
        }
        user += s.count;
        if user_frames.filter(|(_, f)| f.resolved).count() >= min {
            deep += s.count;
        }
    }
    (user, deep)
}

/// The most frequent caller chains of the samples whose leaf in `view` matches `leaf`: (up to
/// `depth` callers in `view`, nearest first; samples), most samples first. A chain with no
/// caller is kept (empty): the unwinder stopped at the leaf.
pub fn callers(
    p: &Profile,
    view: View,
    leaf: impl Fn(&Frame) -> bool,
    depth: usize,
) -> Vec<(Vec<&Frame>, u64)> {
    let mut chains: HashMap<Vec<u32>, u64> = HashMap::new();
    for s in &p.stacks {
        let mut chain = frames(p, s, view);
        if !chain.next().is_some_and(|(_, f)| leaf(f)) {
            continue;
        }
        let callers: Vec<u32> = chain.take(depth).map(|(i, _)| i).collect();
        *chains.entry(callers).or_insert(0) += s.count;
    }
    let mut v: Vec<(Vec<u32>, u64)> = chains.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.into_iter()
        .map(|(c, n)| (c.iter().map(|&f| &p.frames[f as usize]).collect(), n))
        .collect()
}

/// The functions that called the leaf directly, over the samples whose leaf in `view` matches
/// `leaf`, as `pprof -peek` lists them: (caller, samples), most samples first, `None` for the
/// samples whose chain ends at the leaf. Unlike whole chains, these add up to every sample of
/// the leaf however varied the callers' own callers are.
pub fn immediate_callers<'a>(
    p: &'a Profile,
    view: View,
    leaf: impl Fn(&Frame) -> bool,
) -> Vec<(Option<FnKey<'a>>, u64)> {
    let mut by_caller: HashMap<Option<FnKey<'a>>, u64> = HashMap::new();
    for (chain, n) in callers(p, view, leaf, 1) {
        *by_caller.entry(chain.first().map(|f| key(f))).or_insert(0) += n;
    }
    let mut v: Vec<(Option<FnKey<'a>>, u64)> = by_caller.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// A frame at least this share of samples runs through (inclusive) is "nearly every sample's".
pub const TRUNK_SHARE: f64 = 0.95;

/// Code of the process's own scaffolding: the executable and the C library's start-up, not a
/// library a request's work calls into (zlib, libcrypto), which is never collapsed.
fn scaffolding_module(module: &str) -> bool {
    !module.is_empty()
        && !module.starts_with('[')
        && (!module.contains(".so") || module.starts_with("libc.so") || module.starts_with("ld-"))
}

/// The frames nearly every sample runs through, root first: process start-up and the main loop,
/// the root-side run of frames of the executable (and the C library's start-up) in at least
/// [`TRUNK_SHARE`] of samples each. An inclusive ranking that leaves them out starts where the
/// work differs.
pub fn trunk(p: &Profile) -> Vec<FnKey<'_>> {
    let counts = function_counts(p);
    let samples = p.samples.max(p.stacks.iter().map(|s| s.count).sum());
    let floor = TRUNK_SHARE * samples as f64;
    let mut out: Vec<FnKey<'_>> = Vec::new();
    for s in &p.stacks {
        let chain: Vec<&Frame> = frames(p, s, View::All).map(|(_, f)| f).collect();
        for f in chain.iter().rev() {
            let k = key(f);
            if f.kernel
                || !scaffolding_module(f.module.as_str())
                || (counts[&k].total_samples as f64) < floor
            {
                break;
            }
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    out
}

/// Self samples by module of the leaf frame (kernel code under its `[kernel.kallsyms]` or
/// module name, unknown code under ""), most samples first.
pub fn module_self_samples(p: &Profile) -> Vec<(&str, u64)> {
    let mut by: HashMap<&str, u64> = HashMap::new();
    for s in &p.stacks {
        if let Some((_, f)) = frames(p, s, View::All).next() {
            *by.entry(f.module.as_str()).or_insert(0) += s.count;
        }
    }
    let mut v: Vec<(&str, u64)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v
}

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

/// How the samples in some code got there: the function through which they entered it and who
/// called that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The outermost frame of the code, walking out from the leaf.
    pub entry: FnKey<'a>,
    /// The frame that called it; None where the chain ends there.
    pub caller: Option<FnKey<'a>>,
    pub samples: u64,
}

impl Entry<'_> {
    /// `entered through deflate from ngx_http_gzip_body_filter [nginx]`, as findings quote it.
    pub fn describe(&self) -> String {
        match self.caller {
            Some((caller, "")) => format!("entered through {} from {caller}", self.entry.0),
            Some((caller, module)) => {
                format!("entered through {} from {caller} [{module}]", self.entry.0)
            }
            None => format!("entered through {}", self.entry.0),
        }
    }
}

/// The ways into the code `inside` matches, over the samples whose leaf in `view` it matches:
/// `deflate` called from the server's gzip filter, for zlib's static functions. Most samples
/// first.
pub fn entries<'a>(p: &'a Profile, view: View, inside: impl Fn(&Frame) -> bool) -> Vec<Entry<'a>> {
    let mut by: HashMap<(FnKey<'a>, Option<FnKey<'a>>), u64> = HashMap::new();
    for s in &p.stacks {
        let mut chain = frames(p, s, view).map(|(_, f)| f).peekable();
        let Some(mut entry) = chain.next().filter(|f| inside(f)) else {
            continue;
        };
        while let Some(f) = chain.next_if(|f| inside(f)) {
            entry = f;
        }
        *by.entry((key(entry), chain.next().map(key))).or_insert(0) += s.count;
    }
    let mut v: Vec<Entry<'a>> = by
        .into_iter()
        .map(|((entry, caller), samples)| Entry {
            entry,
            caller,
            samples,
        })
        .collect();
    v.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.entry.cmp(&b.entry))
            .then_with(|| a.caller.cmp(&b.caller))
    });
    v
}

/// The memcpy/memmove/mempcpy family, whatever variant the C library picked for this CPU:
/// glibc's copies are `__memmove_avx_unaligned_erms`, `__memcpy_evex_unaligned`,
/// `__memcpy_chk`, `memcpy@plt`, and Rust paths end in `::memcpy`. The name must *start* with
/// the family (after the path and leading underscores): `my_memcpy_wrapper` does its copying
/// in the memcpy it calls, so its own self time is not a copy, and counting it would name the
/// wrapper as the copier instead of showing it as the caller.
pub fn is_copy_function(name: &str) -> bool {
    let base = name.rsplit("::").next().unwrap_or(name);
    let base = base.trim_start_matches('_');
    ["memcpy", "memmove", "mempcpy"]
        .iter()
        .any(|f| base.starts_with(f))
}

/// A part of the kernel that sampled kernel time is named after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subsystem {
    /// Stable id, for the analysis JSON.
    pub id: &'static str,
    /// What the summary and the findings call it.
    pub label: &'static str,
    /// Kernel function names (leading underscores and `.isra`-style suffixes removed); a
    /// trailing `*` matches a prefix.
    patterns: &'static [&'static str],
}

/// The kernel subsystems sampled kernel time is split into (docs/profile.md). A sample counts
/// for the innermost kernel frame that one of them names: a copy inside `udp_sendmsg` is a copy,
/// the rest of `udp_sendmsg` is the network send. Samples no frame names are `other`.
pub const SUBSYSTEMS: [Subsystem; 6] = [
    // The probes' own frames: their programs, the kernel's dispatch to them and the helpers
    // only they call, so that a sample in a clock read under a probe counts for the probe.
    Subsystem {
        id: "probes",
        label: "eBPF probes",
        patterns: PROBE_FRAMES,
    },
    Subsystem {
        id: "copy",
        label: "copies to/from user",
        patterns: &[
            "copy_user*",
            "copy_to_user*",
            "copy_from_user*",
            "copy_to_iter",
            "copy_from_iter",
            "copy_page_to_iter",
            "copy_page_from_iter",
            "rep_movs_alternative",
            "csum_and_copy*",
        ],
    },
    Subsystem {
        id: "readiness",
        label: "readiness scanning",
        patterns: &[
            "do_select",
            "core_sys_select",
            "kern_select",
            "x64_sys_select",
            "x64_sys_pselect6",
            "do_sys_poll",
            "do_poll*",
            "x64_sys_poll",
            "x64_sys_ppoll",
            "poll_freewait",
            "pollwake",
            "sock_poll",
            "tcp_poll",
            "udp_poll",
            "datagram_poll",
            "ep_poll*",
            "ep_send_events",
            "ep_item_poll",
            "do_epoll_wait",
            "x64_sys_epoll_wait",
            "x64_sys_epoll_pwait*",
        ],
    },
    Subsystem {
        id: "sched",
        label: "scheduling",
        patterns: &[
            "schedule*",
            "finish_task_switch*",
            "pick_next_task*",
            "try_to_wake_up",
            "ttwu_*",
            "enqueue_task*",
            "dequeue_task*",
            "wake_up*",
        ],
    },
    Subsystem {
        id: "net_receive",
        label: "network receive",
        patterns: &[
            "udp_recvmsg",
            "udpv6_recvmsg",
            "skb_recv_udp",
            "udp_rcv",
            "udp4_lib_rcv",
            "udp_queue_rcv*",
            "udp_unicast_rcv_skb",
            "tcp_recvmsg*",
            "tcp_rcv_*",
            "tcp_v4_rcv",
            "tcp_v4_do_rcv",
            "tcp_v6_rcv",
            "ip_rcv*",
            "ip_local_deliver*",
            "ip_sublist_rcv*",
            "ip6_rcv*",
            "netif_receive*",
            "net_rx_action",
            "process_backlog",
            "napi_poll",
            "skb_recv_datagram",
            "sock_recvmsg",
            "sock_read_iter",
            "inet_recvmsg",
            "sys_recvmsg",
            "sys_recvfrom",
            "sys_recvmmsg",
            "do_recvmmsg",
            "x64_sys_recv*",
        ],
    },
    Subsystem {
        id: "net_send",
        label: "network send",
        patterns: &[
            "udp_sendmsg",
            "udpv6_sendmsg",
            "udp_send_skb",
            "tcp_sendmsg*",
            "tcp_write_xmit",
            "tcp_transmit_skb",
            "tcp_push*",
            "ip_output",
            "ip_finish_output*",
            "ip_send_skb",
            "ip_make_skb",
            "ip_append_data",
            "ip_local_out",
            "ip_queue_xmit",
            "ip6_output",
            "ip6_finish_output*",
            "ip6_send_skb",
            "ip6_xmit",
            "dev_queue_xmit",
            "dev_hard_start_xmit",
            "loopback_xmit",
            "sock_sendmsg",
            "sock_write_iter",
            "inet_sendmsg",
            "sys_sendmsg",
            "sys_sendto",
            "sys_sendmmsg",
            "x64_sys_send*",
        ],
    },
];

/// Kernel functions of eBPF programs (reqcost's probes, and any other tool's on the same
/// hooks): the programs (`bpf_prog_TAG_NAME`), the tracepoints' calls into them, the helpers.
const PROBE_FRAMES: &[&str] = &[
    "bpf_prog_*",
    "bpf_trace_*",
    "traceiter_*",
    "bpf_task_storage_*",
    "bpf_ringbuf_*",
    "bpf_probe_read_*",
];

/// Whether a kernel frame is eBPF probe code (the `probes` subsystem's functions).
pub fn is_probe_frame(function: &str) -> bool {
    SUBSYSTEMS[0].names(function)
}

/// The profile of the server's own work: the samples taken in the probes' frames left out
/// (their programs run inside the server's syscalls and switches, on its CPU, but are reqcost's
/// cost, stated apart), so that no hot function, caller or share is the probes'. Borrowed when
/// no sample is in them.
pub fn without_probes(p: &Profile) -> Cow<'_, Profile> {
    let probe: Vec<bool> = p
        .frames
        .iter()
        .map(|f| f.kernel && is_probe_frame(&f.function))
        .collect();
    let in_probes = |s: &Stack| {
        s.frames
            .iter()
            .any(|&i| probe.get(i as usize).copied().unwrap_or(false))
    };
    if !p.stacks.iter().any(in_probes) {
        return Cow::Borrowed(p);
    }
    let stacks: Vec<Stack> = p.stacks.iter().filter(|s| !in_probes(s)).cloned().collect();
    Cow::Owned(Profile {
        samples: stacks.iter().map(|s| s.count).sum(),
        stacks,
        ..p.clone()
    })
}

/// Label of kernel samples no subsystem names.
pub const OTHER_KERNEL: &str = "other";

impl Subsystem {
    fn names(&self, function: &str) -> bool {
        let base = function.trim_start_matches('_');
        let base = base.split('.').next().unwrap_or(base);
        self.patterns.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => base.starts_with(prefix),
            None => base == *p,
        })
    }
}

/// The sampled kernel time of a profile by subsystem.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelSplit {
    /// Every sample of the profile.
    pub samples: u64,
    /// Samples whose leaf is kernel code.
    pub kernel_samples: u64,
    /// (subsystem, samples), most samples first, `other` last; subsystems without samples left
    /// out.
    pub parts: Vec<(Option<&'static Subsystem>, u64)>,
}

impl KernelSplit {
    /// Share of all samples.
    pub fn share(&self, samples: u64) -> f64 {
        samples as f64 / self.samples.max(1) as f64
    }

    /// `network send 30 %, readiness scanning 18 %, copies to/from user 9 %`: each a share of
    /// all samples, so the parts add up to the kernel's share.
    pub fn parts_text(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|(s, n)| {
                let label = s.map_or(OTHER_KERNEL, |s| s.label);
                format!("{label} {:.0} %", self.share(*n) * 100.0)
            })
            .collect();
        parts.join(", ")
    }

    /// `kernel 62 %: network send 30 %, ...`, as the findings quote it.
    pub fn describe(&self) -> String {
        format!(
            "kernel {:.0} %: {}",
            self.share(self.kernel_samples) * 100.0,
            self.parts_text()
        )
    }
}

/// The kernel's samples split by [`SUBSYSTEMS`]; None when no sample's leaf is kernel code.
pub fn kernel_split(p: &Profile) -> Option<KernelSplit> {
    let mut counts = [0u64; SUBSYSTEMS.len() + 1];
    let mut kernel_samples = 0;
    for s in &p.stacks {
        let mut kernel = frames(p, s, View::All)
            .take_while(|(_, f)| f.kernel)
            .peekable();
        if kernel.peek().is_none() {
            continue;
        }
        kernel_samples += s.count;
        let named =
            kernel.find_map(|(_, f)| SUBSYSTEMS.iter().position(|sub| sub.names(&f.function)));
        counts[named.unwrap_or(SUBSYSTEMS.len())] += s.count;
    }
    if kernel_samples == 0 {
        return None;
    }
    let mut parts: Vec<(Option<&'static Subsystem>, u64)> = SUBSYSTEMS
        .iter()
        .zip(counts)
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| (Some(s), n))
        .collect();
    parts.sort_by_key(|p| std::cmp::Reverse(p.1));
    if counts[SUBSYSTEMS.len()] > 0 {
        parts.push((None, counts[SUBSYSTEMS.len()]));
    }
    Some(KernelSplit {
        samples: p.samples.max(p.stacks.iter().map(|s| s.count).sum()),
        kernel_samples,
        parts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(frames: &[u32], count: u64) -> Stack {
        Stack {
            frames: frames.to_vec(),
            thread: "httpd".into(),
            count,
            tag: None,
        }
    }

    /// 10 samples: 6 in memcpy called from two places (4 through an inlined frame), 3 in the
    /// kernel under write, 1 in main.
    fn sample_profile() -> Profile {
        let rec = reqcost_record::RunRecord::from_json(include_str!(
            "../tests/fixtures/profile-run.json"
        ));
        rec.expect("the fixture is a run record")
            .profile
            .expect("the fixture has a profile")
    }

    fn names<'a>(chains: &[(Vec<&'a Frame>, u64)]) -> Vec<(Vec<&'a str>, u64)> {
        chains
            .iter()
            .map(|(ch, n)| (ch.iter().map(|f| f.function.as_str()).collect(), *n))
            .collect()
    }

    /// A profile from chains of `function@module` names (leaf first; `k:` marks kernel code).
    fn profile_of(chains: &[(&[&str], u64)]) -> Profile {
        let mut p = Profile::default();
        for (chain, count) in chains {
            let mut ids = Vec::new();
            for name in *chain {
                let (kernel, name) = match name.strip_prefix("k:") {
                    Some(n) => (true, n),
                    None => (false, *name),
                };
                let (function, module) = name.split_once('@').unwrap_or((name, ""));
                let f = Frame {
                    function: function.into(),
                    module: module.into(),
                    kernel,
                    inlined: false,
                    resolved: !function.starts_with('['),
                };
                let i = p.frames.iter().position(|g| *g == f).unwrap_or_else(|| {
                    p.frames.push(f);
                    p.frames.len() - 1
                });
                ids.push(i as u32);
            }
            p.stacks.push(stack(&ids, *count));
            p.samples += count;
        }
        p
    }

    const GZIP: &[(&[&str], u64)] = &[
        (
            &[
                "lib!0x4970@libz.so.1",
                "deflate@libz.so.1",
                "loop@srv",
                "main@srv",
                "__libc_start_main@libc.so.6",
                "_start@srv",
            ],
            96,
        ),
        (
            &[
                "k:do_epoll_wait@[kernel.kallsyms]",
                "epoll_wait@libc.so.6",
                "loop@srv",
                "main@srv",
                "__libc_start_main@libc.so.6",
                "_start@srv",
            ],
            4,
        ),
    ];

    #[test]
    fn the_trunk_is_the_executables_start_up_and_loop_not_the_library_it_calls() {
        let p = profile_of(GZIP);
        assert_eq!(
            trunk(&p),
            vec![
                ("_start", "srv"),
                ("__libc_start_main", "libc.so.6"),
                ("main", "srv"),
                ("loop", "srv")
            ]
        );
        // Just under the share, the loop is no longer nearly every sample's.
        let mut thin = profile_of(GZIP);
        thin.stacks.push(stack(&[0], 6));
        thin.samples += 6;
        assert_eq!(trunk(&thin), Vec::<FnKey>::new());
    }

    #[test]
    fn code_is_entered_through_its_outermost_frame() {
        let p = profile_of(GZIP);
        let e = entries(&p, View::User, |f| f.module == "libz.so.1");
        assert_eq!(
            e,
            vec![Entry {
                entry: ("deflate", "libz.so.1"),
                caller: Some(("loop", "srv")),
                samples: 96,
            }]
        );
        // The kernel leaf of the wait chain is skipped in the user view: libc is entered there.
        let e = entries(&p, View::User, |f| f.module == "libc.so.6");
        assert_eq!(e[0].entry, ("epoll_wait", "libc.so.6"));
        assert_eq!(e[0].samples, 4);
        assert!(entries(&p, View::All, |f| f.module == "libc.so.6").is_empty());
    }

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

    #[test]
    fn self_and_total_shares() {
        let p = sample_profile();
        let c = function_counts(&p);
        let sc = |f, m| {
            let c = c[&(f, m)];
            (c.self_samples, c.total_samples)
        };
        assert_eq!(sc("memcpy", "libc.so.6"), (6, 6));
        assert_eq!(sc("main", "httpd"), (1, 10));
        assert_eq!(sc("apr_brigade_puts", "libapr-1.so.0"), (0, 4));
        assert!(c[&("copy_user", "[kernel.kallsyms]")].kernel);
        assert_eq!(kernel_samples(&p), 3);
        // Stacks with user frames: all 10; with 3+ named user frames: the first and third.
        assert_eq!(user_depth(&p, 3), (10, 6));
    }

    #[test]
    fn callers_of_the_hot_function_nearest_first() {
        let p = sample_profile();
        let c = callers(&p, View::All, |f| key(f) == ("memcpy", "libc.so.6"), 2);
        assert_eq!(
            names(&c),
            vec![
                (vec!["brigade_write", "apr_brigade_puts"], 4),
                (vec!["ap_rgetline", "main"], 2)
            ]
        );
    }

    #[test]
    fn immediate_callers_add_up_to_every_sample_of_the_leaf() {
        let p = sample_profile();
        let c = immediate_callers(&p, View::All, |f| f.function == "memcpy");
        assert_eq!(
            c,
            vec![
                (Some(("brigade_write", "libapr-1.so.0")), 4),
                (Some(("ap_rgetline", "httpd")), 2)
            ]
        );
        let c = immediate_callers(&p, View::All, |f| f.function == "main");
        assert_eq!(c, vec![(None, 1)]);
    }

    #[test]
    fn the_user_view_sees_through_kernel_leaves() {
        let p = sample_profile();
        // The kernel copy under write counts for write, the innermost user function.
        assert_eq!(self_samples(&p, View::All, |f| f.function == "write"), 0);
        assert_eq!(self_samples(&p, View::User, |f| f.function == "write"), 3);
        let c = callers(&p, View::User, |f| f.function == "write", 3);
        assert_eq!(names(&c), vec![(vec!["main"], 3)]);
        assert_eq!(total_samples(&p, |f| f.function == "main"), 10);
        assert_eq!(total_samples(&p, |f| f.function == "write"), 3);
    }

    #[test]
    fn damaged_frame_indices_are_skipped() {
        let mut p = sample_profile();
        p.stacks.push(stack(&[99, 3], 5));
        assert_eq!(function_counts(&p)[&("main", "httpd")].self_samples, 6);
        assert_eq!(total_samples(&p, |f| f.function == "main"), 15);
    }

    #[test]
    fn copy_functions_are_named_by_their_family_prefix() {
        for copy in [
            "memcpy",
            "memmove",
            "mempcpy",
            "__memmove_avx_unaligned_erms",
            "__memcpy_avx_unaligned_erms",
            "__memmove_evex_unaligned_erms",
            "__memcpy_chk",
            "memcpy@plt",
            "compiler_builtins::mem::memcpy",
        ] {
            assert!(is_copy_function(copy), "{copy}");
        }
        for other in ["my_memcpy_wrapper", "copy_user", "memset"] {
            assert!(!is_copy_function(other), "{other}");
        }
    }

    #[test]
    fn probe_frames_are_named_apart_from_the_kernel() {
        for probe in [
            "bpf_prog_c5cf8e71cb3752ac_sys_exit",
            "bpf_trace_run2",
            "__bpf_trace_sys_enter",
            "__traceiter_sys_exit",
            "bpf_task_storage_get_recur",
        ] {
            assert!(is_probe_frame(probe), "{probe}");
        }
        for other in ["tcp_sendmsg", "do_syscall_64", "bpf_map_lookup_elem_sys"] {
            assert!(!is_probe_frame(other), "{other}");
        }
    }
}
