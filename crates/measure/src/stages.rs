//! `REQCOST_STAGE_FILE`: where a test or script learns which stage a run is in. reqcost appends
//! one line per stage it enters (`starting`, `phase NAME`, `saving`) to the file it names, so
//! that a harness that signals reqcost at a moment waits for reqcost to be there instead of
//! guessing from the server's port or the clock (docs/testing.md).

use std::io::Write;

/// The variable naming the file; unset, reqcost writes nothing.
const STAGE_FILE: &str = "REQCOST_STAGE_FILE";

/// Says that the run enters `stage`. Best effort: a file reqcost cannot write must not cost
/// a measurement.
pub fn enter(stage: &str) {
    let Some(path) = std::env::var_os(STAGE_FILE) else {
        return;
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    if let Ok(mut file) = file {
        let _ = file.write_all(format!("{stage}\n").as_bytes());
    }
}
