//! An interactive flame graph SVG of one run's call chains (inferno), coloured by what each
//! frame is (frame_colors.rs), the legend in its subtitle.

use inferno::flamegraph::{self, Options};
use reqcost_record::Profile;

use super::frame_colors::{legend_text, palette};
use super::{folded_lines, Exporter, Subject};

pub struct Flamegraph;

impl Exporter for Flamegraph {
    fn serialize(&self, subject: &Subject) -> Result<Vec<u8>, String> {
        flamegraph_svg(subject.profile()?, "")
    }
}

/// The flame graph of `p`; `of` says which samples it draws when not all (", class /blog").
pub(super) fn flamegraph_svg(p: &Profile, of: &str) -> Result<Vec<u8>, String> {
    if p.samples == 0 {
        return Err("the profile has no samples: no flame graph to draw".into());
    }
    let lines = folded_lines(p);
    let mut colours = palette(p);
    let mut opts = Options::default();
    opts.title = format!(
        "reqcost: on-CPU call chains{of} ({}, {} Hz)",
        p.event, p.freq_hz
    );
    opts.subtitle = Some(legend_text());
    opts.count_name = "samples".into();
    opts.palette_map = Some(&mut colours);
    opts.deterministic = true;
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut svg)
        .map_err(|e| e.to_string())?;
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::frame_colors::{kind, FrameKind, CLASSES};
    use crate::testing::profile_run;
    use reqcost_analysis::reading::Reading;
    use reqcost_record::{Frame, Stack};

    /// The `rgb(...)` fill of the frame titled `name` in `svg`.
    fn fill<'a>(svg: &'a str, name: &str) -> &'a str {
        let at = svg
            .find(&format!("<title>{name} ("))
            .unwrap_or_else(|| panic!("no frame {name}"));
        let rest = &svg[at..];
        let start = rest.find("fill=\"").unwrap() + "fill=\"".len();
        &rest[start..start + rest[start..].find('"').unwrap()]
    }

    fn rgb_of(f: &str) -> [u8; 3] {
        let inner = f.trim_start_matches("rgb(").trim_end_matches(')');
        let v: Vec<u8> = inner
            .split(',')
            .map(|x| x.trim().parse().unwrap())
            .collect();
        [v[0], v[1], v[2]]
    }

    /// The class whose colour `rgb` is a shade of.
    fn class_of(rgb: [u8; 3]) -> FrameKind {
        CLASSES
            .iter()
            .find(|c| {
                (0..3).all(|i| {
                    rgb[i] >= c.rgb[i]
                        && f64::from(rgb[i] - c.rgb[i]) <= f64::from(255 - c.rgb[i]) * 0.25 + 1.0
                }) && {
                    // The same amount of white in each channel.
                    let t: Vec<f64> = (0..3)
                        .filter(|&i| c.rgb[i] < 255)
                        .map(|i| f64::from(rgb[i] - c.rgb[i]) / f64::from(255 - c.rgb[i]))
                        .collect();
                    t.iter().all(|x| (x - t[0]).abs() < 0.02)
                }
            })
            .map(|c| c.kind)
            .unwrap_or_else(|| panic!("rgb{rgb:?} is no class's colour"))
    }

    #[test]
    fn frames_are_drawn_in_the_colour_of_their_class() {
        let mut rec = profile_run();
        let p = rec.profile.as_mut().unwrap();
        p.frames.push(Frame {
            function: "mod_mpm_event.so+0xc599".into(),
            module: "mod_mpm_event.so".into(),
            kernel: false,
            inlined: false,
            resolved: false,
        });
        p.frames.push(Frame {
            function: "jitted_handler".into(),
            module: "[jit]".into(),
            kernel: false,
            inlined: false,
            resolved: true,
        });
        p.stacks.push(Stack {
            frames: vec![7, 8, 3],
            thread: "httpd".into(),
            count: 2,
            tag: None,
        });
        p.samples += 2;
        let svg = String::from_utf8(
            Flamegraph
                .serialize(&Subject::Run(&Reading::of(&rec, None)))
                .unwrap(),
        )
        .unwrap();
        let p = rec.profile.as_ref().unwrap();
        // Titles show names without their folded annotation (`_[k]`, `_[i]`).
        for f in &p.frames {
            let drawn = class_of(rgb_of(fill(&svg, &f.function)));
            assert_eq!(drawn, kind(f), "{}", f.function);
        }
        assert_eq!(
            class_of(rgb_of(fill(&svg, "mod_mpm_event.so+0xc599"))),
            FrameKind::Unresolved
        );
        assert_eq!(class_of(rgb_of(fill(&svg, "httpd"))), FrameKind::Thread);
        assert!(svg.contains(&legend_text()), "no legend in the subtitle");
    }
}
