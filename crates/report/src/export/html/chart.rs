//! Percentiles as horizontal bars on a log scale, drawn as inline SVG: one group of bars per
//! phase. A log scale because a slow-client phase often costs hundreds of times the main one,
//! and both must stay readable on one axis.

use std::fmt::Write;

use super::esc;
use crate::format::fmt_duration_us;

/// A phase's named values, in µs.
pub struct Group {
    pub name: String,
    pub bars: Vec<(&'static str, f64)>,
}

const WIDTH: f64 = 720.0;
const LABEL: f64 = 190.0;
const BAR: f64 = 14.0;
const GAP: f64 = 10.0;
const AXIS: f64 = 24.0;

/// The chart of `groups` with `caption` as its accessible title; empty when there is no value.
pub fn percentile_chart(caption: &str, groups: &[Group]) -> String {
    let values = || groups.iter().flat_map(|g| g.bars.iter().map(|b| b.1));
    let Some((lo, hi)) = decades(values()) else {
        return String::new();
    };
    let rows: usize = groups.iter().map(|g| g.bars.len()).sum();
    let height = rows as f64 * BAR + groups.len() as f64 * GAP + AXIS;
    let x = |us: f64| {
        LABEL
            + (us.max(10f64.powi(lo)).log10() - lo as f64) / (hi - lo) as f64
                * (WIDTH - LABEL - 70.0)
    };
    let mut svg = format!(
        r#"<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{}"><title>{}</title>"#,
        esc(caption),
        esc(caption)
    );
    axis(&mut svg, lo, hi, height, &x);
    let mut y = 0.0;
    for (i, g) in groups.iter().enumerate() {
        y += GAP;
        let _ = write!(
            svg,
            r#"<text class="group" x="0" y="{:.1}">{}</text>"#,
            y + BAR - 3.0,
            esc(&g.name)
        );
        for (label, us) in &g.bars {
            let _ = write!(
                svg,
                r#"<text class="pct" x="{:.1}" y="{:.1}" text-anchor="end">{label}</text><rect class="s{}" x="{LABEL}" y="{y:.1}" width="{:.1}" height="{:.1}"><title>{} {label}: {}</title></rect><text class="val" x="{:.1}" y="{:.1}">{}</text>"#,
                LABEL - 6.0,
                y + BAR - 3.0,
                i % 4,
                (x(*us) - LABEL).max(1.0),
                BAR - 2.0,
                esc(&g.name),
                fmt_duration_us(*us),
                x(*us) + 4.0,
                y + BAR - 3.0,
                fmt_duration_us(*us)
            );
            y += BAR;
        }
    }
    svg.push_str("</svg>");
    svg
}

/// The powers of ten around the positive values, or None when there is none.
fn decades(values: impl Iterator<Item = f64>) -> Option<(i32, i32)> {
    let positive: Vec<f64> = values.filter(|v| *v > 0.0).collect();
    let min = positive.iter().copied().reduce(f64::min)?;
    let max = positive.iter().copied().reduce(f64::max)?;
    let lo = min.log10().floor() as i32;
    let hi = (max.log10().ceil() as i32).max(lo + 1);
    Some((lo, hi))
}

/// Grid lines and labels at every power of ten.
fn axis(svg: &mut String, lo: i32, hi: i32, height: f64, x: &impl Fn(f64) -> f64) {
    for d in lo..=hi {
        let us = 10f64.powi(d);
        let _ = write!(
            svg,
            r#"<line class="grid" x1="{0:.1}" x2="{0:.1}" y1="0" y2="{1:.1}"/><text class="tick" x="{0:.1}" y="{2:.1}" text-anchor="middle">{3}</text>"#,
            x(us),
            height - AXIS + 4.0,
            height - 6.0,
            fmt_duration_us(us)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decades_cover_the_values() {
        assert_eq!(decades([91.5, 30_404.0].into_iter()), Some((1, 5)));
        assert_eq!(decades([100.0].into_iter()), Some((2, 3)));
        assert_eq!(decades([0.0].into_iter()), None);
    }

    #[test]
    fn a_chart_has_a_bar_per_value_and_nothing_without_values() {
        let groups = [Group {
            name: "main <a>".into(),
            bars: vec![("p50", 90.0), ("p99", 1200.0)],
        }];
        let svg = percentile_chart("CPU per request", &groups);
        assert_eq!(svg.matches("<rect").count(), 2);
        assert!(
            svg.contains("main &lt;a&gt;") && svg.contains("1.20 ms"),
            "{svg}"
        );
        assert_eq!(percentile_chart("none", &[]), "");
    }
}
