//! Run records on disk: reading them back for the commands that judge them, saving the ones
//! a command measures, and the exit status a record's outcome deserves.

use std::path::{Path, PathBuf};

use reqcost_record::{Outcome, RunRecord};

use crate::Failure;

/// Reads a record given on the command line: one that cannot be read is bad input.
pub fn load(path: &Path) -> Result<RunRecord, Failure> {
    RunRecord::load(path)
        .map_err(|e| Failure::bad_input(format!("cannot read run record {}: {e}", path.display())))
}

/// A bad-input failure naming the first record without a measured phase.
pub fn require_phases(records: &[RunRecord]) -> Result<(), Failure> {
    match records.iter().find(|r| r.phases.is_empty()) {
        Some(r) => Err(Failure::bad_input(format!(
            "run record {} has no measured phase",
            r.id
        ))),
        None => Ok(()),
    }
}

/// Turns a record's outcome into the command's exit status and one-line error.
pub fn outcome_result(record: &RunRecord, path: &Path) -> Result<(), Failure> {
    let saved = format!("partial record saved to {}", path.display());
    match &record.outcome {
        Outcome::Completed => Ok(()),
        Outcome::ServerDied { detail } => Err(Failure::run(format!(
            "server died mid-run, {saved}: {detail}"
        ))),
        Outcome::Interrupted => Err(Failure::run(format!("interrupted; {saved}"))),
        Outcome::Failed { detail } if record.workload.load.is_some() => {
            Err(Failure::run(format!("{detail}\n{saved}")))
        }
        Outcome::Failed { detail } => Err(Failure::run(format!(
            "{}: {detail}; {saved}",
            record.workload.url
        ))),
    }
}

/// Saves one run of a multi-run command (compare, sweep, demo) as `DIR/ID{suffix}.json`. A run
/// that did not complete stops the command, with its partial record saved.
pub fn save_run(
    record: RunRecord,
    dir: &Path,
    suffix: &str,
    what: &str,
) -> Result<RunRecord, Failure> {
    let path = dir.join(format!("{}{suffix}.json", record.id));
    record.save(&path).map_err(|e| {
        Failure::run(format!(
            "cannot save {}: {e} (choose --out-dir)",
            path.display()
        ))
    })?;
    eprintln!("{what}: record {}", path.display());
    match outcome_result(&record, &path) {
        Ok(()) => Ok(record),
        Err(f) => Err(Failure::run(format!("{what}: {}", f.message))),
    }
}

/// Refuses, before anything is measured, an `-o` path the record could not be saved to: a
/// directory, a missing directory, or one that may not be written in. The probe is the
/// temporary file that saving writes first.
pub fn check_writable(path: &Path) -> Result<(), Failure> {
    let cannot = |why: String| {
        Failure::bad_input(format!(
            "cannot save the run record to {}: {why} (choose another path with -o)",
            path.display()
        ))
    };
    if path.is_dir() {
        return Err(cannot("it is a directory".into()));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(cannot(format!("no directory {}", dir.display())));
    }
    let probe = path.with_extension("json.tmp");
    std::fs::File::create(&probe).map_err(|e| cannot(e.to_string()))?;
    std::fs::remove_file(&probe).map_err(|e| cannot(e.to_string()))
}

pub fn default_record_path(record: &RunRecord) -> PathBuf {
    let dir = Path::new("reqcost-runs");
    let mut path = dir.join(format!("{}.json", record.id));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{}-{n}.json", record.id));
        n += 1;
    }
    path
}
