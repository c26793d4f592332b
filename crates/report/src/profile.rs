//! The summary's call-chain section from a record's [`Profile`]: top functions, their callers,
//! the user/kernel split and the memory copies.

use std::fmt::Write as _;

use reqcost_analysis::document::KernelSplitDoc;
use reqcost_analysis::profile::{
    beyond, callers, function_counts, immediate_callers, is_copy_function, kernel_samples, key,
    library_in, module_self_samples, per_request, runtime_hint, seconds_for, self_samples_of,
    share_pct, trunk, user_depth, FnCount, FnKey, View, TRUNK_PCT,
};
use reqcost_record::{Frame, Profile};

use crate::format::{fmt_count, fmt_duration_us};
use crate::profile_classes::class_section;

/// Functions listed by self share, and by total share.
const TOP_FUNCTIONS: usize = 10;
/// Hot functions whose callers are shown, and chains shown for each.
const HOT_WITH_CALLERS: usize = 3;
const CALLER_CHAINS: usize = 3;
/// Direct callers listed for each of them; the rest are summed on one line.
const DIRECT_CALLERS: usize = 8;
/// Under this many samples a profile is thin: a 10 % share is known to about ±2 points at
/// best, and functions under a few percent come and go between runs.
const THIN_SAMPLES: u64 = 200;
/// Copy functions shown with their callers.
const COPY_FUNCTIONS: usize = 2;
/// Callers shown in one chain, nearest first.
const CALLER_DEPTH: usize = 6;
/// A user chain counts as well unwound with at least this many named user frames.
const GOOD_DEPTH: usize = 3;
/// Modules listed in the by-library line, and the least self share one needs to be listed.
const LIBRARIES: usize = 5;
const LIBRARY_MIN_SHARE: f64 = 0.5;

/// `[libc.so.6]`; kernel modules are already bracketed.
pub(crate) fn module_label(module: &str) -> String {
    if module.is_empty() {
        "[?]".to_string()
    } else if module.starts_with('[') {
        module.to_string()
    } else {
        format!("[{module}]")
    }
}

pub(crate) fn label(f: &Frame) -> String {
    let mut s = f.function.clone();
    if f.inlined {
        s.push_str(" (inlined)");
    }
    s
}

/// The profile's functions in the orders the section lists them.
struct Ranked<'a> {
    by_self: Vec<(FnKey<'a>, FnCount)>,
    by_total: Vec<(FnKey<'a>, FnCount)>,
    /// User-space functions with self samples, by self samples.
    user_self: Vec<(FnKey<'a>, FnCount)>,
    /// Samples whose leaf is user code.
    user_leaf: u64,
}

impl<'a> Ranked<'a> {
    fn of(p: &'a Profile) -> Ranked<'a> {
        let mut by_self: Vec<(FnKey<'_>, FnCount)> = function_counts(p).into_iter().collect();
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
        let user_self = by_self
            .iter()
            .filter(|(_, c)| !c.kernel && c.self_samples > 0)
            .copied()
            .collect();
        Ranked {
            by_self,
            by_total,
            user_self,
            user_leaf: p.samples.saturating_sub(kernel_samples(p)),
        }
    }
}

/// The summary's call-chain section. `requests` is the number of requests completed while the
/// sampler ran (all phases); 0 leaves out the per-request figure. `kernel` is the analysis's
/// split of the same samples by kernel subsystem.
pub fn profile_section(p: &Profile, requests: u64, kernel: Option<&KernelSplitDoc>) -> String {
    let mut out = String::new();
    heading(&mut out, p);
    if p.samples == 0 {
        let _ = writeln!(
            out,
            "  no samples: the server did not run on a CPU while sampled"
        );
        return out;
    }
    thin_line(&mut out, p);
    split_line(&mut out, p, requests);
    if let Some(split) = kernel {
        let _ = writeln!(out, "  kernel by subsystem: {}", split.parts_text());
    }
    library_line(&mut out, p);
    unwinding_line(&mut out, p);
    let ranked = Ranked::of(p);
    function_table(
        &mut out,
        "top functions by self time",
        &ranked.by_self,
        p.samples,
    );
    user_table(&mut out, p, &ranked);
    inclusive_table(&mut out, p, &ranked);
    hot_callers(&mut out, p, &ranked);
    copies_section(&mut out, p, &ranked);
    out.push_str(&class_section(p));
    let hint = runtime_hint(p).map(|h| format!("JIT or interpreted code without names: {h}"));
    if !p.notes.is_empty() || hint.is_some() {
        let _ = writeln!(out, "\n  profile notes");
        for n in p.notes.iter().chain(&hint) {
            let _ = writeln!(out, "    - {n}");
        }
    }
    out
}

/// `by library (self time): libz.so.1.2.13 95.5 % (zlib compression (gzip/deflate)), ...`:
/// where the leaves are, one line, so that a library whose static functions have no names
/// still shows as the cost.
fn library_line(out: &mut String, p: &Profile) {
    let parts: Vec<String> = module_self_samples(p)
        .into_iter()
        .filter(|(_, n)| share_pct(*n, p.samples) >= LIBRARY_MIN_SHARE)
        .take(LIBRARIES)
        .map(|(m, n)| {
            let name = if m.is_empty() { "[unknown]" } else { m };
            match library_in(p, m) {
                Some(l) => format!("{name} {:.1} % ({})", share_pct(n, p.samples), l.what),
                None => format!("{name} {:.1} %", share_pct(n, p.samples)),
            }
        })
        .collect();
    if !parts.is_empty() {
        let _ = writeln!(out, "  by library (self time): {}", parts.join(", "));
    }
}

/// The functions by total time, without the start-up and main-loop frames nearly every sample
/// has: the list starts where the work differs, and one line says what was left out.
fn inclusive_table(out: &mut String, p: &Profile, ranked: &Ranked) {
    let trunk = trunk(p);
    let rows: Vec<(FnKey<'_>, FnCount)> = ranked
        .by_total
        .iter()
        .filter(|(k, _)| !trunk.contains(k))
        .copied()
        .collect();
    function_table(
        out,
        "top functions by total time (self + callees)",
        &rows,
        p.samples,
    );
    if let (Some(first), Some(last)) = (trunk.first(), trunk.last()) {
        let _ = writeln!(
            out,
            "    (left out: {} frames of start-up and the main loop that {:.0} %+ of samples run \
             through, {} … {})",
            trunk.len(),
            TRUNK_PCT,
            first.0,
            last.0
        );
    }
}

fn heading(out: &mut String, p: &Profile) {
    let lost = if p.lost > 0 {
        format!(", {} lost", p.lost)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "call chains ({} sampled at {} Hz, {} samples over {:.1} s{lost})",
        p.event, p.freq_hz, p.samples, p.duration_s,
    );
}

/// Says a profile is thin, and how long a run at its rate would sample enough.
fn thin_line(out: &mut String, p: &Profile) {
    if p.samples >= THIN_SAMPLES {
        return;
    }
    let seconds = seconds_for(p, THIN_SAMPLES);
    let _ = writeln!(
        out,
        "  thin profile: {} samples, under {THIN_SAMPLES}: shares below are rough. For more, \
         sample longer (--duration {seconds:.0}s would take about {THIN_SAMPLES} at this rate) or \
         faster (--freq, now {} Hz)",
        p.samples, p.freq_hz
    );
}

/// User/kernel split, and what one request costs in samples.
fn split_line(out: &mut String, p: &Profile, requests: u64) {
    let kernel = kernel_samples(p);
    let mut line = format!(
        "  user {:.1}% · kernel {:.1}%",
        share_pct(p.samples.saturating_sub(kernel), p.samples),
        share_pct(kernel, p.samples)
    );
    if let Some((samples, cpu_us)) = per_request(p, requests) {
        let _ = write!(
            line,
            " · {} samples per request (≈ {} of CPU)",
            fmt_count(samples),
            fmt_duration_us(cpu_us)
        );
    }
    let _ = writeln!(out, "{line}");
}

/// How well user chains were unwound: shallow chains hide the callers.
fn unwinding_line(out: &mut String, p: &Profile) {
    let (user, deep) = user_depth(p, GOOD_DEPTH);
    if user > 0 {
        let _ = writeln!(
            out,
            "  unwinding: {:.0}% of samples with user code have {GOOD_DEPTH}+ named user frames; {:.0}% stopped early",
            share_pct(deep, user),
            share_pct(p.truncated, p.samples)
        );
    }
}

/// One "self % total % function" table of the first [`TOP_FUNCTIONS`] rows.
fn function_table(out: &mut String, title: &str, rows: &[(FnKey<'_>, FnCount)], samples: u64) {
    let _ = writeln!(out, "\n  {title}\n    self %  total %  function");
    for ((func, module), c) in rows.iter().take(TOP_FUNCTIONS) {
        let _ = writeln!(
            out,
            "    {:>6.1}  {:>7.1}  {func}  {}",
            share_pct(c.self_samples, samples),
            share_pct(c.total_samples, samples),
            module_label(module)
        );
    }
}

/// The user-space functions by self time, as shares of user time and of all samples.
fn user_table(out: &mut String, p: &Profile, ranked: &Ranked) {
    if ranked.user_self.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n  top user-space functions by self time\n    user %   all %  function"
    );
    for ((func, module), c) in ranked.user_self.iter().take(TOP_FUNCTIONS) {
        let _ = writeln!(
            out,
            "    {:>6.1}  {:>6.1}  {func}  {}",
            share_pct(c.self_samples, ranked.user_leaf),
            share_pct(c.self_samples, p.samples),
            module_label(module)
        );
    }
}

/// The hottest functions overall (often kernel code on a network server) and the hottest
/// user-space ones, which are what a server's authors can change, with their callers.
fn hot_callers(out: &mut String, p: &Profile, ranked: &Ranked) {
    let mut hot: Vec<(FnKey<'_>, FnCount)> = Vec::new();
    for h in ranked
        .by_self
        .iter()
        .filter(|(_, c)| c.self_samples > 0)
        .take(HOT_WITH_CALLERS)
        .chain(ranked.user_self.iter().take(HOT_WITH_CALLERS))
    {
        if !hot.iter().any(|(k, _)| *k == h.0) {
            hot.push(*h);
        }
    }
    let _ = writeln!(
        out,
        "\n  who calls the hottest functions (callers nearest first)"
    );
    for h in &hot {
        let figure = format!("{:.1}% self", share_pct(h.1.self_samples, p.samples));
        with_callers(out, p, h, &figure);
    }
}

/// One function, a figure about it, its direct callers (which add up to all its self samples)
/// and its most frequent caller chains, each as a share of the function's self samples.
fn with_callers(out: &mut String, p: &Profile, (hot, c): &(FnKey<'_>, FnCount), figure: &str) {
    let _ = writeln!(out, "    {}  {}  {figure}", hot.0, module_label(hot.1));
    let direct = immediate_callers(p, View::All, |f| key(f) == *hot);
    let _ = writeln!(out, "      called directly by");
    for (caller, n) in direct.iter().take(DIRECT_CALLERS) {
        let name = match caller {
            Some((func, module)) => format!("{func}  {}", module_label(module)),
            None => "(no caller: chain ends here)".into(),
        };
        let _ = writeln!(out, "      {:>5.1}%  {name}", share_pct(*n, c.self_samples));
    }
    let (others, rest) = beyond(&direct, DIRECT_CALLERS);
    if rest > 0 {
        let _ = writeln!(
            out,
            "      {:>5.1}%  {others} other callers",
            share_pct(rest, c.self_samples)
        );
    }
    let _ = writeln!(out, "      most frequent chains");
    let chains = callers(p, View::All, |f| key(f) == *hot, CALLER_DEPTH);
    for (chain, n) in chains.iter().take(CALLER_CHAINS) {
        let text = if chain.is_empty() {
            "(no caller: chain ends here)".to_string()
        } else {
            let names: Vec<String> = chain.iter().map(|f| label(f)).collect();
            format!("← {}", names.join(" ← "))
        };
        let _ = writeln!(out, "      {:>5.1}%  {text}", share_pct(*n, c.self_samples));
    }
}

/// seeds/003 asked where the memcpy calls happen: the user-space copy functions with their
/// callers, however small their share.
fn copies_section(out: &mut String, p: &Profile, ranked: &Ranked) {
    let copies: Vec<&(FnKey<'_>, FnCount)> = ranked
        .user_self
        .iter()
        .filter(|((func, _), _)| is_copy_function(func))
        .collect();
    if copies.is_empty() {
        return;
    }
    let total = self_samples_of(&copies);
    let _ = writeln!(
        out,
        "\n  memory copies in user space (memcpy/memmove family): {:.1}% of user time",
        share_pct(total, ranked.user_leaf)
    );
    for copy in copies.iter().take(COPY_FUNCTIONS) {
        let figure = format!(
            "{:.1}% of user time",
            share_pct(copy.1.self_samples, ranked.user_leaf)
        );
        with_callers(out, p, copy, &figure);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::sample_profile;

    #[test]
    fn section_names_hot_function_callers_and_split() {
        let s = profile_section(&sample_profile(), 5, None);
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
    fn direct_callers_cover_every_sample_of_the_hot_function() {
        let s = profile_section(&sample_profile(), 5, None);
        let memcpy = s
            .split("    memcpy  [libc.so.6]  60.0% self\n")
            .nth(1)
            .expect("memcpy among the hottest functions");
        assert!(
            memcpy.starts_with(
                "      called directly by\n\
                 \x20      66.7%  brigade_write  [libapr-1.so.0]\n\
                 \x20      33.3%  ap_rgetline  [httpd]\n\
                 \x20     most frequent chains\n"
            ),
            "{s}"
        );
    }

    #[test]
    fn a_thin_profile_says_how_to_get_more_samples() {
        let mut p = sample_profile();
        let s = profile_section(&p, 5, None);
        assert!(
            s.contains(&format!(
                "  thin profile: 10 samples, under 200: shares below are rough. For more, sample \
                 longer (--duration {:.0}s would take about 200 at this rate) or faster (--freq, \
                 now {} Hz)",
                (p.duration_s * 20.0).ceil(),
                p.freq_hz
            )),
            "{s}"
        );
        p.stacks[0].count += 190;
        p.samples += 190;
        assert!(!profile_section(&p, 5, None).contains("thin profile"));
    }
}
