//! CPU per request (user, system, total) against concurrency, as SVG.

use plotters::prelude::*;
use reqcost_analysis::metrics::metric;

use super::{Exporter, Subject, SweepPoint};

pub struct SweepChart;

impl Exporter for SweepChart {
    fn serialize(&self, subject: &Subject) -> Result<Vec<u8>, String> {
        let (points, title) = subject.sweep()?;
        let mut svg = String::new();
        draw(points, title, &mut svg).map_err(|e| e.to_string())?;
        Ok(svg.into_bytes())
    }
}

/// (concurrency, value) of one metric at every point where it was measured.
fn series(points: &[SweepPoint], name: &str) -> Vec<(f64, f64)> {
    let get = metric(name).get;
    points
        .iter()
        .filter_map(|(c, p)| Some((*c as f64, get(p)?)))
        .collect()
}

fn draw(
    points: &[SweepPoint],
    title: &str,
    svg: &mut String,
) -> Result<(), Box<dyn std::error::Error>> {
    let total = series(points, "CPU");
    let user = series(points, "CPU user");
    let system = series(points, "CPU system");
    let x_max = points.iter().map(|(c, _)| *c).max().unwrap_or(1) as f64;
    let y_max = total.iter().map(|(_, y)| *y).fold(1.0, f64::max) * 1.15;
    let root = SVGBackend::with_string(svg, (800, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max * 1.05, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc("connections")
        .y_desc("server CPU per request (µs)")
        .draw()?;
    for (series, label, color) in [
        (&total, "total", BLACK),
        (&user, "user", BLUE),
        (&system, "system", RED),
    ] {
        chart
            .draw_series(LineSeries::new(
                series.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart.draw_series(series.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
