//! Queries over a record's sampled call chains ([`Profile`]), one home for what the summary's
//! profile section and the findings rules both ask: self and total samples, callers, how deep
//! user chains were unwound, and which functions copy memory; what is known of libraries and
//! runtimes (`libraries`) and of the kernel's subsystems (`subsystems`) beside them, and the
//! chains folded to one line each (`folded`).

use std::collections::HashMap;

use reqcost_record::{Frame, Profile, Stack};

mod folded;
mod libraries;
mod subsystems;

pub use folded::{folded_chain, folded_lines, folded_name};
pub use libraries::{
    is_library, known_library, library_in, runtime_hint, KnownLibrary, COMPRESSION_FIX, HASHING,
    KNOWN_LIBRARIES, RUNTIME_HINT_SHARE,
};
pub use subsystems::{
    is_probe_frame, kernel_split, syscall_issuers, syscall_samples, syscalls_sampled,
    without_probes, KernelSplit, Subsystem, OTHER_KERNEL, SUBSYSTEMS,
};

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
/// The same in %, as the summary says it.
pub const TRUNK_PCT: f64 = TRUNK_SHARE * 100.0;

/// The CPU time `s`'s samples stand for, ns: each one sampling period.
pub fn stack_cpu_ns(p: &Profile, s: &Stack) -> u64 {
    s.count * p.period_ns
}

/// How long `p` sampled, ns.
pub fn duration_ns(p: &Profile) -> u64 {
    (p.duration_s * 1e9) as u64
}

/// Samples per second at a sampling period of `period_ns` (taken as 1 ns when 0).
pub fn sample_rate_hz(period_ns: u64) -> f64 {
    1e9 / period_ns.max(1) as f64
}

/// `n` samples in % of `total`; 0 of none.
pub fn share_pct(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * n as f64 / total as f64
    }
}

/// The seconds a run sampling at `p`'s rate would take to gather `samples`, rounded up.
pub fn seconds_for(p: &Profile, samples: u64) -> f64 {
    (p.duration_s * samples as f64 / p.samples as f64).ceil()
}

/// `p`'s samples per request over `requests`, and the CPU they stand for in µs; None without
/// requests.
pub fn per_request(p: &Profile, requests: u64) -> Option<(f64, f64)> {
    (requests > 0).then(|| {
        let per = p.samples as f64 / requests as f64;
        (per, per * p.period_ns as f64 / 1000.0)
    })
}

/// Of counts ranked most first, how many come after the first `shown`, and their sum.
pub fn beyond<T>(ranked: &[(T, u64)], shown: usize) -> (usize, u64) {
    let rest = ranked.get(shown..).unwrap_or_default();
    (rest.len(), rest.iter().map(|(_, n)| n).sum())
}

/// The self samples of `functions`, summed.
pub fn self_samples_of(functions: &[&(FnKey<'_>, FnCount)]) -> u64 {
    functions.iter().map(|(_, c)| c.self_samples).sum()
}

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
            "../../tests/fixtures/profile-run.json"
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
    pub(super) fn profile_of(chains: &[(&[&str], u64)]) -> Profile {
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

    pub(super) const GZIP: &[(&[&str], u64)] = &[
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
}
