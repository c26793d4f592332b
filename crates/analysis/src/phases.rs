//! What `compare` and `check` judge side by side: the phases both sides measured, each on its
//! own (a regression can live in one phase only, as seeds/002's lives in the slow-client one),
//! and whether a record is whole.

use reqcost_record::{Outcome, Phase, RunRecord};

use crate::reading::Reading;

/// Phase names in the order they first ran in `records`, each once.
fn names<'a>(records: &'a [Reading]) -> Vec<&'a str> {
    let mut names: Vec<&str> = Vec::new();
    for p in records.iter().flat_map(|r| &r.phases) {
        if !names.contains(&p.name.as_str()) {
            names.push(&p.name);
        }
    }
    names
}

/// The phases of `a` that some record of `b` also measured, and the others, each in the order
/// `a` ran them.
fn partition(a: &[Reading], b: &[Reading]) -> (Vec<String>, Vec<String>) {
    let in_b = names(b);
    names(a)
        .into_iter()
        .map(String::from)
        .partition(|n| in_b.contains(&n.as_str()))
}

/// The phases some record of `a` and some record of `b` measured, in the order `a` ran them.
pub fn shared(a: &[Reading], b: &[Reading]) -> Vec<String> {
    partition(a, b).0
}

/// The phases of `a` that no record of `b` has: they cannot be judged, and the reader must
/// know they were not.
pub fn only_in(a: &[Reading], b: &[Reading]) -> Vec<String> {
    partition(a, b).1
}

/// The record's phase `name`, as read.
pub fn find<'a>(rec: &'a Reading, name: &str) -> Option<&'a Phase> {
    rec.raw_phases.iter().find(|p| p.name == name)
}

/// The phase `name` of each record that has it, in the records' order.
pub fn named<'a>(records: &'a [Reading], name: &str) -> Vec<&'a Phase> {
    records.iter().filter_map(|r| find(r, name)).collect()
}

/// How a partial record ended (its outcome when not `completed`): it holds only what was
/// measured before, so its phases may be short or missing.
pub fn partial(rec: &RunRecord) -> Option<String> {
    match &rec.outcome {
        Outcome::Completed => None,
        Outcome::ServerDied { detail } => Some(format!("server died ({detail})")),
        Outcome::Interrupted => Some("interrupted".into()),
        Outcome::Failed { detail } => Some(format!("failed ({detail})")),
    }
}
