//! A differential flame graph: B's call chains, red where B spends more samples per request
//! than A, blue where less. Both sides are scaled to the same number of requests, so widths
//! compare cost per request rather than run length.

use std::collections::BTreeMap;

use inferno::{differential, flamegraph};
use reqcost_record::{Phase, Profile, RunRecord};

use super::{folded_lines, Exporter, Subject};

pub struct DiffFlamegraph;

impl Exporter for DiffFlamegraph {
    fn serialize(&self, subject: &Subject) -> Result<Vec<u8>, String> {
        let (a, b) = subject.comparison()?;
        let (a, b) = (sampled(a), sampled(b));
        let per = b.iter().map(|(_, r)| *r).sum::<u64>().max(1) as f64 / b.len().max(1) as f64;
        let (fa, fb) = (merged_folded(&a, per), merged_folded(&b, per));
        if fa.is_empty() || fb.is_empty() {
            return Err(
                "both sides need sampled call chains for a differential flame graph".into(),
            );
        }
        let mut diff = Vec::new();
        differential::from_readers(
            differential::Options::default(),
            fa.as_bytes(),
            fb.as_bytes(),
            &mut diff,
        )
        .map_err(|e| e.to_string())?;
        let mut opts = flamegraph::Options::default();
        opts.title = "reqcost: B against A, per request (red: more in B, blue: less)".into();
        opts.count_name = "samples per request-equivalent".into();
        opts.deterministic = true;
        let mut svg = Vec::new();
        flamegraph::from_reader(&mut opts, diff.as_slice(), &mut svg).map_err(|e| e.to_string())?;
        Ok(svg)
    }
}

/// Each sampled record's profile with the requests it covers (every phase: the sampler ran
/// through all of them).
fn sampled(records: &[RunRecord]) -> Vec<(&Profile, u64)> {
    records
        .iter()
        .filter_map(|r| {
            let ok = r.phases.iter().map(Phase::units).sum::<f64>() as u64;
            Some((r.profile.as_ref()?, ok))
        })
        .collect()
}

/// Folded stacks of several profiles merged, counts scaled to `per` requests' worth.
fn merged_folded(profiles: &[(&Profile, u64)], per: f64) -> String {
    let mut merged: BTreeMap<String, f64> = BTreeMap::new();
    for (p, requests) in profiles {
        let scale = per / (*requests).max(1) as f64;
        for line in folded_lines(p) {
            if let Some((stack, n)) = line.rsplit_once(' ') {
                *merged.entry(stack.to_string()).or_default() +=
                    n.parse::<f64>().unwrap_or(0.0) * scale;
            }
        }
    }
    merged
        .into_iter()
        .filter(|(_, n)| n.round() > 0.0)
        .map(|(stack, n)| format!("{stack} {}\n", n.round() as u64))
        .collect()
}
