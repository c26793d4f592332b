//! Call chains folded to one line each (Brendan Gregg's format, read by flamegraph.pl, inferno,
//! speedscope): `thread;root;...;leaf count`. The folded chain is also the key a chain's
//! figures are compared by between runs (`compare_code::run_chain_costs`), so the exporters
//! and the comparison name a chain alike.

use std::fmt::Write as _;

use reqcost_record::{Frame, Profile, Stack};

/// A frame's name in folded stacks, with the suffixes flame graph tools color by:
/// `_[k]` kernel, `_[i]` inlined, `_[j]` JIT.
pub fn folded_name(f: &Frame) -> String {
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

/// `s` folded: its thread, then its frames root first, without its count.
pub fn folded_chain(p: &Profile, s: &Stack) -> String {
    let mut line = s.thread.replace([';', ' '], "_");
    for &f in s.frames.iter().rev() {
        line.push(';');
        line.push_str(&folded_name(&p.frames[f as usize]));
    }
    line
}

/// Folded stack lines, in the profile's stack order.
pub fn folded_lines(p: &Profile) -> Vec<String> {
    p.stacks
        .iter()
        .map(|s| {
            let mut line = folded_chain(p, s);
            let _ = write!(line, " {}", s.count);
            line
        })
        .collect()
}
