//! Pushing a run's profile to Pyroscope (`--push-pyroscope`). The files made from a record are
//! named by the flags, which become exporters in args.rs (hyperfine's `ExportManager` is the
//! model).

use std::path::Path;

use reqcost_analysis::reading::Reading;
use reqcost_report::export::{self, PyroscopeUrl};

use crate::Failure;

/// Pushes the profile of the run `reading` read (saved at `path`) to Pyroscope at `url` under
/// `service`, when a URL was given. A failed push is warned about at once; its failure, exit
/// status 1, is for the caller to return after the rest of its output.
pub fn push(
    url: Option<&PyroscopeUrl>,
    service: Option<&str>,
    reading: &Reading,
    path: &Path,
) -> Result<(), Failure> {
    let Some(url) = url else {
        return Ok(());
    };
    export::push(url, service, reading).map_err(|why| {
        eprintln!("warning: push to Pyroscope at {url} failed: {why}");
        Failure::run(format!(
            "the profile was not pushed; push it again with `reqcost report {} \
             --push-pyroscope {url}`",
            path.display()
        ))
    })
}
