//! CPU per request (total, user, system) against concurrency, as SVG: each level's mean over its
//! runs with its 95 % interval as an error bar.

use plotters::prelude::*;
use reqcost_analysis::stats::Estimate;
use reqcost_analysis::sweep::SweepReport;

use super::{Exporter, Subject};

pub struct SweepChart;

impl Exporter for SweepChart {
    fn serialize(&self, subject: &Subject) -> Result<Vec<u8>, String> {
        let (report, title) = subject.sweep()?;
        let mut svg = String::new();
        draw(report, title, &mut svg).map_err(|e| e.to_string())?;
        Ok(svg.into_bytes())
    }
}

/// (concurrency, estimate) of one metric at every level where it was measured.
fn series<'a>(report: &'a SweepReport, name: &str) -> Vec<(f64, &'a Estimate)> {
    report
        .levels
        .iter()
        .filter_map(|l| Some((l.concurrency as f64, l.get(name)?)))
        .collect()
}

/// The top of an error bar, or the mean when there is no interval.
fn top(e: &Estimate) -> f64 {
    e.high.unwrap_or(e.mean)
}

fn draw(
    report: &SweepReport,
    title: &str,
    svg: &mut String,
) -> Result<(), Box<dyn std::error::Error>> {
    let total = series(report, "CPU");
    let user = series(report, "CPU user");
    let system = series(report, "CPU system");
    let x_max = report
        .levels
        .iter()
        .map(|l| l.concurrency)
        .max()
        .unwrap_or(1) as f64;
    // Headroom above the highest bar keeps the legend clear of the data.
    let y_max = total.iter().map(|(_, e)| top(e)).fold(1.0, f64::max) * 1.5;
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
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("connections (concurrent clients)")
        .y_desc(format!("server CPU per {} (µs)", report.unit().name()))
        .draw()?;
    let runs = report.repetitions;
    // The three bars of a level are set a little apart so that none hides another.
    let nudge = x_max * 0.006;
    for (series, label, color, dx) in [
        (
            &total,
            format!("total CPU, mean of {runs} run(s)"),
            BLACK,
            0.0,
        ),
        (&user, "user CPU".to_string(), BLUE, -nudge),
        (&system, "system CPU".to_string(), RED, nudge),
    ] {
        let means = series.iter().map(|(x, e)| (*x, e.mean));
        chart
            .draw_series(LineSeries::new(means.clone(), color.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart.draw_series(means.map(|p| Circle::new(p, 3, color.filled())))?;
        chart.draw_series(series.iter().filter_map(|(x, e)| {
            Some(ErrorBar::new_vertical(
                x + dx,
                e.low?,
                e.mean,
                e.high?,
                color,
                10,
            ))
        }))?;
    }
    // A legend entry for the bars themselves: what they mean is not obvious from the lines.
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), u32>>())?
        .label("bars: 95 % interval of the mean")
        .legend(|(x, y)| ErrorBar::new_vertical(x + 10, y - 6, y, y + 6, BLACK, 8));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
