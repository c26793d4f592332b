//! The one place where output options become exporters (hyperfine's `ExportManager` is the
//! model): each command names its subject, the flags name the files.

use reqcost_report::export::{ExportManager, Format};

use crate::args::{CompareArgs, StackOutputArgs, SweepArgs};

/// Folded stacks, flame graph, pprof and HTML report of one run (`run`, `report`).
pub fn stacks(args: &StackOutputArgs) -> ExportManager {
    let mut exports = ExportManager::default();
    exports.add_if_given(Format::Folded, args.folded.as_deref());
    exports.add_if_given(Format::Flamegraph, args.flamegraph.as_deref());
    exports.add_if_given(Format::Pprof, args.pprof.as_deref());
    exports.add_if_given(Format::Html, args.html.as_deref());
    exports
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
