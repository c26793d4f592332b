//! Folded stacks (Brendan Gregg's format, read by flamegraph.pl, inferno, speedscope): one line
//! per call chain, `thread;root;...;leaf count`.

use std::fmt::Write as _;

use reqcost_record::{Frame, Profile};

use super::{Exporter, Subject};

pub struct Folded;

impl Exporter for Folded {
    fn serialize(&self, subject: &Subject) -> Result<Vec<u8>, String> {
        Ok(folded_bytes(subject.profile()?))
    }
}

/// The folded stacks file of `p`.
pub(super) fn folded_bytes(p: &Profile) -> Vec<u8> {
    folded_lines(p)
        .into_iter()
        .map(|l| l + "\n")
        .collect::<String>()
        .into_bytes()
}

/// A frame's name in folded stacks, with the suffixes flame graph tools color by:
/// `_[k]` kernel, `_[i]` inlined, `_[j]` JIT.
pub(super) fn folded_name(f: &Frame) -> String {
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

/// Folded stack lines, in the profile's stack order.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::sample_profile;

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
}
