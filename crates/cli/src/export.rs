//! The one place where output options become exporters (hyperfine's `ExportManager` is the
//! model): each command names its subject, the flags name the files.

use std::path::Path;

use reqcost_analysis::reading::Reading;
use reqcost_report::export::{self, ExportManager, Format};

use crate::args::{CompareArgs, StackOutputArgs, SweepArgs};
use crate::Failure;

/// Folded stacks, flame graph, pprof, HTML report and OpenMetrics file of one run (`run`,
/// `report`).
pub fn stacks(args: &StackOutputArgs) -> ExportManager {
    let mut exports = ExportManager::default();
    exports.add_if_given(Format::Folded, args.folded.as_deref());
    exports.add_if_given(Format::Flamegraph, args.flamegraph.as_deref());
    exports.add_if_given(Format::Pprof, args.pprof.as_deref());
    exports.add_if_given(Format::Html, args.html.as_deref());
    exports.add_if_given(Format::OpenMetrics, args.openmetrics.as_deref());
    exports
}

/// Pushes the profile of the run `reading` read (saved at `path`) to Pyroscope when
/// `--push-pyroscope` was given. A failed push is warned about at once; its failure, exit status 1, is for the caller
/// to return after the rest of its output.
pub fn push(args: &StackOutputArgs, reading: &Reading, path: &Path) -> Result<(), Failure> {
    let Some(url) = &args.push_pyroscope else {
        return Ok(());
    };
    export::push(url, args.service.as_deref(), reading).map_err(|why| {
        eprintln!("warning: push to Pyroscope at {url} failed: {why}");
        Failure::run(format!(
            "the profile was not pushed; push it again with `reqcost report {} \
             --push-pyroscope {url}`",
            path.display()
        ))
    })
}

/// The differential flame graph and HTML report of a comparison.
pub fn compare(args: &CompareArgs) -> ExportManager {
    let mut exports = ExportManager::default();
    exports.add_if_given(Format::DiffFlamegraph, args.diff_flamegraph.as_deref());
    exports.add_if_given(Format::Html, args.html.as_deref());
    exports
}

/// The chart and HTML report of a sweep.
pub fn sweep(args: &SweepArgs) -> ExportManager {
    let mut exports = ExportManager::default();
    exports.add_if_given(Format::SweepChart, args.chart.as_deref());
    exports.add_if_given(Format::Html, args.html.as_deref());
    exports
}
