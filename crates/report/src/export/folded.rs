//! Folded stacks (Brendan Gregg's format, read by flamegraph.pl, inferno, speedscope): one line
//! per call chain, `thread;root;...;leaf count`.

use reqcost_analysis::profile::folded_lines;
use reqcost_record::Profile;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::sample_profile;

    #[test]
    fn folded_file_root_first_with_annotations() {
        let text = String::from_utf8(folded_bytes(&sample_profile())).unwrap();
        let l: Vec<&str> = text.lines().collect();
        assert_eq!(
            l[0],
            "httpd;main;apr_brigade_puts;brigade_write_[i];memcpy 4"
        );
        assert_eq!(l[1], "httpd;main;write;copy_user_[k] 3");
        assert_eq!(l[3], "httpd;main 1");
    }
}
