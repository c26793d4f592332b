//! Call-chain outputs from a record's [`Profile`]: the summary section (top functions, their
//! callers, user/kernel split), folded stacks, flame graph SVG and pprof.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use reqcost_record::{Frame, Profile};

use crate::format::{fmt_count, fmt_duration_us};

/// Functions listed by self share, and by total share.
const TOP_FUNCTIONS: usize = 10;
/// Hot functions whose callers are shown, and chains shown for each.
const HOT_WITH_CALLERS: usize = 3;
const CALLER_CHAINS: usize = 3;
/// Copy functions shown with their callers.
const COPY_FUNCTIONS: usize = 2;
/// Callers shown in one chain, nearest first.
const CALLER_DEPTH: usize = 6;
/// A user chain counts as well unwound with at least this many named user frames.
const GOOD_DEPTH: usize = 3;

/// (function, module): frames of one function inlined at some sites and called at others are
/// the same function for shares.
type FnKey<'a> = (&'a str, &'a str);

fn key(f: &Frame) -> FnKey<'_> {
    (&f.function, &f.module)
}

fn share(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * n as f64 / total as f64
    }
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

/// Per-function sample counts.
pub fn function_counts(p: &Profile) -> HashMap<FnKey<'_>, FnCount> {
    let mut counts: HashMap<FnKey<'_>, FnCount> = HashMap::new();
    let mut seen: Vec<FnKey<'_>> = Vec::new();
    for s in &p.stacks {
        seen.clear();
        for (i, &f) in s.frames.iter().enumerate() {
            let frame = &p.frames[f as usize];
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

/// Samples whose leaf is kernel code.
pub fn kernel_samples(p: &Profile) -> u64 {
    p.stacks
        .iter()
        .filter(|s| {
            s.frames
                .first()
                .is_some_and(|&f| p.frames[f as usize].kernel)
        })
        .map(|s| s.count)
        .sum()
}

/// (samples with user frames, those of them with at least `min` named user frames).
pub fn user_depth(p: &Profile, min: usize) -> (u64, u64) {
    let (mut user, mut deep) = (0, 0);
    for s in &p.stacks {
        let frames = s.frames.iter().map(|&f| &p.frames[f as usize]);
        if !frames.clone().any(|f| !f.kernel) {
            continue;
        }
        user += s.count;
        if frames.filter(|f| !f.kernel && f.resolved).count() >= min {
            deep += s.count;
        }
    }
    (user, deep)
}

/// Most frequent caller chains of `hot` when it is the leaf: (callers nearest first, samples).
pub fn callers<'a>(p: &'a Profile, hot: FnKey<'_>, depth: usize) -> Vec<(Vec<&'a Frame>, u64)> {
    let mut chains: HashMap<Vec<u32>, u64> = HashMap::new();
    for s in &p.stacks {
        let Some(&leaf) = s.frames.first() else {
            continue;
        };
        if key(&p.frames[leaf as usize]) != hot {
            continue;
        }
        let chain: Vec<u32> = s.frames.iter().skip(1).take(depth).copied().collect();
        *chains.entry(chain).or_insert(0) += s.count;
    }
    let mut v: Vec<(Vec<u32>, u64)> = chains.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.into_iter()
        .map(|(c, n)| (c.iter().map(|&f| &p.frames[f as usize]).collect(), n))
        .collect()
}

/// `[libc.so.6]`; kernel modules are already bracketed.
fn module_label(module: &str) -> String {
    if module.is_empty() {
        "[?]".to_string()
    } else if module.starts_with('[') {
        module.to_string()
    } else {
        format!("[{module}]")
    }
}

fn label(f: &Frame) -> String {
    let mut s = f.function.clone();
    if f.inlined {
        s.push_str(" (inlined)");
    }
    s
}

/// One "self % total % function" table of the first [`TOP_FUNCTIONS`] rows.
fn function_table(out: &mut String, title: &str, rows: &[(FnKey<'_>, FnCount)], samples: u64) {
    let _ = writeln!(out, "\n  {title}\n    self %  total %  function");
    for ((func, module), c) in rows.iter().take(TOP_FUNCTIONS) {
        let _ = writeln!(
            out,
            "    {:>6.1}  {:>7.1}  {func}  {}",
            share(c.self_samples, samples),
            share(c.total_samples, samples),
            module_label(module)
        );
    }
}

/// The summary's call-chain section. `requests` is the number of requests completed while the
/// sampler ran (all phases); 0 leaves out the per-request figure.
pub fn profile_section(p: &Profile, requests: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "call chains ({} sampled at {} Hz, {} samples over {:.1} s{})",
        p.event,
        p.freq_hz,
        p.samples,
        p.duration_s,
        if p.lost > 0 {
            format!(", {} lost", p.lost)
        } else {
            String::new()
        }
    );
    if p.samples == 0 {
        let _ = writeln!(
            out,
            "  no samples: the server did not run on a CPU while sampled"
        );
        return out;
    }
    let kernel = kernel_samples(p);
    let mut line = format!(
        "  user {:.1}% · kernel {:.1}%",
        share(p.samples - kernel, p.samples),
        share(kernel, p.samples)
    );
    if requests > 0 {
        let per = p.samples as f64 / requests as f64;
        let _ = write!(
            line,
            " · {} samples per request (≈ {} of CPU)",
            fmt_count(per),
            fmt_duration_us(per * p.period_ns as f64 / 1000.0)
        );
    }
    let _ = writeln!(out, "{line}");
    let (user, deep) = user_depth(p, GOOD_DEPTH);
    if user > 0 {
        let _ = writeln!(
            out,
            "  unwinding: {:.0}% of samples with user code have {GOOD_DEPTH}+ named user frames; {:.0}% stopped early",
            share(deep, user),
            share(p.truncated, p.samples)
        );
    }

    let counts = function_counts(p);
    let mut by_self: Vec<(FnKey<'_>, FnCount)> = counts.iter().map(|(k, v)| (*k, *v)).collect();
    by_self.sort_by(|a, b| {
        b.1.self_samples
            .cmp(&a.1.self_samples)
            .then_with(|| a.0.cmp(&b.0))
    });
    let mut by_total = by_self.clone();
    by_total.sort_by(|a, b| {
        b.1.total_samples
            .cmp(&a.1.total_samples)
            .then_with(|| a.0.cmp(&b.0))
    });
    let user_self: Vec<(FnKey<'_>, FnCount)> = by_self
        .iter()
        .filter(|(_, c)| !c.kernel && c.self_samples > 0)
        .copied()
        .collect();

    function_table(&mut out, "top functions by self time", &by_self, p.samples);
    let user_leaf = p.samples - kernel;
    if !user_self.is_empty() {
        let _ = writeln!(
            out,
            "\n  top user-space functions by self time\n    user %   all %  function"
        );
        for ((func, module), c) in user_self.iter().take(TOP_FUNCTIONS) {
            let _ = writeln!(
                out,
                "    {:>6.1}  {:>6.1}  {func}  {}",
                share(c.self_samples, user_leaf),
                share(c.self_samples, p.samples),
                module_label(module)
            );
        }
    }
    function_table(
        &mut out,
        "top functions by total time (self + callees)",
        &by_total,
        p.samples,
    );

    // The hottest functions overall (often kernel code on a network server) and the hottest
    // user-space ones, which are what a server's authors can change.
    let mut hot: Vec<(FnKey<'_>, FnCount)> = Vec::new();
    for h in by_self
        .iter()
        .filter(|(_, c)| c.self_samples > 0)
        .take(HOT_WITH_CALLERS)
        .chain(user_self.iter().take(HOT_WITH_CALLERS))
    {
        if !hot.iter().any(|(k, _)| *k == h.0) {
            hot.push(*h);
        }
    }
    let _ = writeln!(
        out,
        "\n  who calls the hottest functions (callers nearest first)"
    );
    for ((func, module), c) in &hot {
        let _ = writeln!(
            out,
            "    {func}  {}  {:.1}% self",
            module_label(module),
            share(c.self_samples, p.samples)
        );
        for (chain, n) in callers(p, (func, module), CALLER_DEPTH)
            .iter()
            .take(CALLER_CHAINS)
        {
            let names: Vec<String> = chain.iter().map(|f| label(f)).collect();
            let text = if names.is_empty() {
                "(no caller: chain ends here)".to_string()
            } else {
                format!("← {}", names.join(" ← "))
            };
            let _ = writeln!(out, "      {:>5.1}%  {text}", share(*n, c.self_samples));
        }
    }
    copies_section(&mut out, p, &user_self, user_leaf);
    if !p.notes.is_empty() {
        let _ = writeln!(out, "\n  profile notes");
        for n in &p.notes {
            let _ = writeln!(out, "    - {n}");
        }
    }
    out
}

/// The memcpy/memmove family, whatever variant the C library picked for this CPU.
fn is_copy_function(name: &str) -> bool {
    ["memcpy", "memmove", "mempcpy"]
        .iter()
        .any(|f| name.contains(f))
}

/// seeds/003 asked where the memcpy calls happen: the user-space copy functions with their
/// callers, however small their share.
fn copies_section(
    out: &mut String,
    p: &Profile,
    user_self: &[(FnKey<'_>, FnCount)],
    user_leaf: u64,
) {
    let copies: Vec<&(FnKey<'_>, FnCount)> = user_self
        .iter()
        .filter(|((func, _), _)| is_copy_function(func))
        .collect();
    if copies.is_empty() {
        return;
    }
    let total: u64 = copies.iter().map(|(_, c)| c.self_samples).sum();
    let _ = writeln!(
        out,
        "\n  memory copies in user space (memcpy/memmove family): {:.1}% of user time",
        share(total, user_leaf)
    );
    for ((func, module), c) in copies.iter().take(COPY_FUNCTIONS) {
        let _ = writeln!(
            out,
            "    {func}  {}  {:.1}% of user time",
            module_label(module),
            share(c.self_samples, user_leaf)
        );
        for (chain, n) in callers(p, (func, module), CALLER_DEPTH)
            .iter()
            .take(CALLER_CHAINS)
        {
            let names: Vec<String> = chain.iter().map(|f| label(f)).collect();
            let _ = writeln!(
                out,
                "      {:>5.1}%  ← {}",
                share(*n, c.self_samples),
                names.join(" ← ")
            );
        }
    }
}

/// A frame's name in folded stacks, with the suffixes flame graph tools color by:
/// `_[k]` kernel, `_[i]` inlined, `_[j]` JIT.
fn folded_name(f: &Frame) -> String {
    let mut s: String = f
        .function
        .chars()
        .map(|c| if c == ';' || c == '\n' { ':' } else { c })
        .collect();
    if f.kernel {
        s.push_str("_[k]");
    } else if f.inlined {
        s.push_str("_[i]");
    } else if f.module == "[jit]" {
        s.push_str("_[j]");
    }
    s
}

/// Folded stack lines, `thread;root;...;leaf count`, in the profile's stack order.
pub fn folded_lines(p: &Profile) -> Vec<String> {
    p.stacks
        .iter()
        .map(|s| {
            let mut line = s.thread.replace([';', ' '], "_");
            for &f in s.frames.iter().rev() {
                line.push(';');
                line.push_str(&folded_name(&p.frames[f as usize]));
            }
            let _ = write!(line, " {}", s.count);
            line
        })
        .collect()
}

/// Writes folded stacks (Brendan Gregg's format, read by flamegraph.pl, inferno, speedscope).
pub fn write_folded(p: &Profile, path: &Path) -> io::Result<()> {
    let mut w = BufWriter::new(File::create(path)?);
    for l in folded_lines(p) {
        writeln!(w, "{l}")?;
    }
    w.flush()
}

/// Writes an interactive flame graph SVG (inferno).
pub fn write_flamegraph(p: &Profile, path: &Path) -> io::Result<()> {
    use inferno::flamegraph::{self, color::MultiPalette, Options, Palette};
    if p.samples == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the profile has no samples: no flame graph to draw",
        ));
    }
    let lines = folded_lines(p);
    let mut opts = Options::default();
    opts.title = format!(
        "reqcost: on-CPU call chains ({}, {} Hz)",
        p.event, p.freq_hz
    );
    opts.count_name = "samples".into();
    opts.colors = Palette::Multi(MultiPalette::Java);
    opts.deterministic = true;
    let w = BufWriter::new(File::create(path)?);
    flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), w)
}

/// Writes a gzipped pprof protobuf (profile.proto): values `samples/count` and
/// `cpu/nanoseconds`; inlined frames share a location with one line each; thread names as the
/// `thread` label.
pub fn write_pprof(p: &Profile, path: &Path) -> io::Result<()> {
    let mut gz = flate2::write::GzEncoder::new(
        BufWriter::new(File::create(path)?),
        flate2::Compression::default(),
    );
    gz.write_all(&pprof_bytes(p))?;
    gz.finish()?.flush()
}

fn pprof_bytes(p: &Profile) -> Vec<u8> {
    let mut strings = Strings::default();
    let mut out = Vec::new();
    let samples = strings.id("samples");
    let count = strings.id("count");
    let cpu = strings.id("cpu");
    let nanos = strings.id("nanoseconds");
    let thread = strings.id("thread");
    for (t, u) in [(samples, count), (cpu, nanos)] {
        pb::message(&mut out, 1, &value_type(t, u));
    }

    // Functions: one per (name, module); mappings: one per module, the program first (pprof
    // names the profile after its first mapping): the root of the heaviest user chain.
    let main_module = p
        .stacks
        .first()
        .and_then(|s| s.frames.last())
        .map(|&f| &p.frames[f as usize])
        .filter(|f| !f.kernel)
        .map(|f| f.module.as_str());
    let mut functions: HashMap<FnKey<'_>, u64> = HashMap::new();
    let mut mappings: HashMap<&str, u64> = HashMap::new();
    let mut function_msgs = Vec::new();
    let mut mapping_msgs = Vec::new();
    let mut frame_fn = Vec::with_capacity(p.frames.len());
    let modules = main_module
        .into_iter()
        .chain(p.frames.iter().map(|f| f.module.as_str()));
    for module in modules {
        let next = mappings.len() as u64 + 1;
        mappings.entry(module).or_insert_with(|| {
            let mut m = Vec::new();
            pb::uint(&mut m, 1, next);
            pb::uint(&mut m, 5, strings.id(module));
            pb::uint(&mut m, 7, 1); // has_functions: symbolized already
            pb::uint(&mut m, 10, 1); // has_inline_frames
            pb::message(&mut mapping_msgs, 3, &m);
            next
        });
    }
    for f in &p.frames {
        let next = functions.len() as u64 + 1;
        let id = *functions.entry(key(f)).or_insert_with(|| {
            let mut m = Vec::new();
            pb::uint(&mut m, 1, next);
            pb::uint(&mut m, 2, strings.id(&f.function));
            pb::uint(&mut m, 3, strings.id(&f.function));
            pb::message(&mut function_msgs, 5, &m);
            next
        });
        frame_fn.push(id);
    }

    // Locations: a run of inlined frames plus the function they sit in.
    let mut locations: HashMap<Vec<u32>, u64> = HashMap::new();
    let mut location_msgs = Vec::new();
    for s in &p.stacks {
        let mut ids = Vec::new();
        let mut run: Vec<u32> = Vec::new();
        for (i, &f) in s.frames.iter().enumerate() {
            run.push(f);
            let last = i + 1 == s.frames.len();
            if p.frames[f as usize].inlined && !last {
                continue;
            }
            let next = locations.len() as u64 + 1;
            let id = *locations.entry(run.clone()).or_insert_with(|| {
                let mut m = Vec::new();
                pb::uint(&mut m, 1, next);
                pb::uint(&mut m, 2, mappings[p.frames[f as usize].module.as_str()]);
                for &r in &run {
                    let mut line = Vec::new();
                    pb::uint(&mut line, 1, frame_fn[r as usize]);
                    pb::message(&mut m, 4, &line);
                }
                pb::message(&mut location_msgs, 4, &m);
                next
            });
            ids.push(id);
            run.clear();
        }
        let mut m = Vec::new();
        pb::packed(&mut m, 1, &ids);
        pb::packed(&mut m, 2, &[s.count, s.count * p.period_ns]);
        let mut label = Vec::new();
        pb::uint(&mut label, 1, thread);
        pb::uint(&mut label, 2, strings.id(&s.thread));
        pb::message(&mut m, 3, &label);
        pb::message(&mut out, 2, &m);
    }
    out.extend_from_slice(&mapping_msgs);
    out.extend_from_slice(&location_msgs);
    out.extend_from_slice(&function_msgs);
    for s in &strings.list {
        pb::bytes(&mut out, 6, s.as_bytes());
    }
    pb::uint(&mut out, 10, (p.duration_s * 1e9) as u64);
    pb::message(&mut out, 11, &value_type(cpu, nanos));
    pb::uint(&mut out, 12, p.period_ns);
    out
}

fn value_type(t: u64, u: u64) -> Vec<u8> {
    let mut m = Vec::new();
    pb::uint(&mut m, 1, t);
    pb::uint(&mut m, 2, u);
    m
}

/// pprof's string table: index 0 is the empty string.
struct Strings {
    list: Vec<String>,
    ids: HashMap<String, u64>,
}

impl Default for Strings {
    fn default() -> Self {
        Strings {
            list: vec![String::new()],
            ids: HashMap::from([(String::new(), 0)]),
        }
    }
}

impl Strings {
    fn id(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.list.len() as u64;
        self.list.push(s.to_string());
        self.ids.insert(s.to_string(), i);
        i
    }
}

/// The protobuf wire format, as much as profile.proto needs.
mod pb {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// A varint field; zero is the default and is left out.
    pub fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
        if v != 0 {
            varint(out, u64::from(field) << 3);
            varint(out, v);
        }
    }

    pub fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
        varint(out, u64::from(field) << 3 | 2);
        varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }

    pub fn message(out: &mut Vec<u8>, field: u32, m: &[u8]) {
        bytes(out, field, m);
    }

    pub fn packed(out: &mut Vec<u8>, field: u32, vs: &[u64]) {
        let mut b = Vec::new();
        for &v in vs {
            varint(&mut b, v);
        }
        bytes(out, field, &b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_record::Stack;

    fn frame(function: &str, module: &str, kernel: bool, inlined: bool) -> Frame {
        Frame {
            function: function.into(),
            module: module.into(),
            kernel,
            inlined,
            resolved: true,
        }
    }

    /// 10 samples: 6 in memcpy called from two places, 3 in the kernel under write, 1 in main.
    fn sample_profile() -> Profile {
        Profile {
            event: "cpu-clock".into(),
            freq_hz: 499,
            period_ns: 2_004_008,
            duration_s: 2.0,
            samples: 10,
            lost: 0,
            truncated: 1,
            frames: vec![
                frame("memcpy", "libc.so.6", false, false),           // 0
                frame("brigade_write", "libapr-1.so.0", false, true), // 1
                frame("apr_brigade_puts", "libapr-1.so.0", false, false), // 2
                frame("main", "httpd", false, false),                 // 3
                frame("copy_user", "[kernel.kallsyms]", true, false), // 4
                frame("write", "libc.so.6", false, false),            // 5
                frame("ap_rgetline", "httpd", false, false),          // 6
            ],
            stacks: vec![
                Stack {
                    frames: vec![0, 1, 2, 3],
                    thread: "httpd".into(),
                    count: 4,
                },
                Stack {
                    frames: vec![4, 5, 3],
                    thread: "httpd".into(),
                    count: 3,
                },
                Stack {
                    frames: vec![0, 6, 3],
                    thread: "httpd".into(),
                    count: 2,
                },
                Stack {
                    frames: vec![3],
                    thread: "httpd".into(),
                    count: 1,
                },
            ],
            notes: vec![],
        }
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
        let c = callers(&p, ("memcpy", "libc.so.6"), 2);
        let names: Vec<(Vec<&str>, u64)> = c
            .iter()
            .map(|(ch, n)| (ch.iter().map(|f| f.function.as_str()).collect(), *n))
            .collect();
        assert_eq!(
            names,
            vec![
                (vec!["brigade_write", "apr_brigade_puts"], 4),
                (vec!["ap_rgetline", "main"], 2)
            ]
        );
    }

    #[test]
    fn section_names_hot_function_callers_and_split() {
        let s = profile_section(&sample_profile(), 5);
        assert!(s.contains("user 70.0% · kernel 30.0%"), "{s}");
        assert!(s.contains("2 samples per request"), "{s}");
        assert!(s.contains("    60.0     60.0  memcpy  [libc.so.6]"), "{s}");
        // memcpy is 6 of the 7 user-leaf samples.
        assert!(s.contains("      85.7    60.0  memcpy  [libc.so.6]"), "{s}");
        assert!(
            s.contains("copy_user  [kernel.kallsyms]  30.0% self"),
            "{s}"
        );
        assert!(
            s.contains("66.7%  ← brigade_write (inlined) ← apr_brigade_puts ← main"),
            "{s}"
        );
    }

    #[test]
    fn folded_lines_root_first_with_annotations() {
        let l = folded_lines(&sample_profile());
        assert_eq!(
            l[0],
            "httpd;main;apr_brigade_puts;brigade_write_[i];memcpy 4"
        );
        assert_eq!(l[1], "httpd;main;write;copy_user_[k] 3");
        assert_eq!(l[3], "httpd;main 1");
    }

    #[test]
    fn protobuf_varints() {
        let mut v = Vec::new();
        pb::uint(&mut v, 1, 300);
        pb::uint(&mut v, 2, 0);
        pb::packed(&mut v, 3, &[1, 128]);
        assert_eq!(v, [0x08, 0xac, 0x02, 0x1a, 0x03, 0x01, 0x80, 0x01]);
    }

    #[test]
    fn writers_produce_files() {
        let dir = std::env::temp_dir().join(format!("reqcost-stacks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = sample_profile();
        write_folded(&p, &dir.join("f.txt")).unwrap();
        write_flamegraph(&p, &dir.join("f.svg")).unwrap();
        write_pprof(&p, &dir.join("f.pb.gz")).unwrap();
        let svg = std::fs::read_to_string(dir.join("f.svg")).unwrap();
        assert!(svg.starts_with("<?xml") && svg.contains("memcpy"));
        let gz = std::fs::read(dir.join("f.pb.gz")).unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b]);
        let e = write_flamegraph(&Profile::default(), &dir.join("empty.svg")).unwrap_err();
        assert!(e.to_string().contains("no samples"));
        assert!(!dir.join("empty.svg").exists());
        std::fs::remove_dir_all(&dir).ok();
    }
}
