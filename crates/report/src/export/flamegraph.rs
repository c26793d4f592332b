//! An interactive flame graph SVG of one run's call chains (inferno).

use inferno::flamegraph::{self, color::MultiPalette, Options, Palette};

use super::{folded_lines, Exporter, Subject};

pub struct Flamegraph;

impl Exporter for Flamegraph {
    fn serialize(&self, subject: &Subject) -> Result<Vec<u8>, String> {
        let p = subject.profile()?;
        if p.samples == 0 {
            return Err("the profile has no samples: no flame graph to draw".into());
        }
        let lines = folded_lines(p);
        let mut opts = Options::default();
        opts.title = format!(
            "reqcost: on-CPU call chains ({}, {} Hz)",
            p.event, p.freq_hz
        );
        opts.count_name = "samples".into();
        opts.colors = Palette::Multi(MultiPalette::Java);
        opts.deterministic = true;
        let mut svg = Vec::new();
        flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut svg)
            .map_err(|e| e.to_string())?;
        Ok(svg)
    }
}
