//! SVG plot of GPU allocation against GPU arrivals, one line per policy: the
//! whole run on the left, the saturated end (where policies differ) on the right.
use std::path::Path;

use plotters::prelude::*;

use super::report::PolicyReport;

const COLORS: [RGBColor; 8] = [
    RGBColor(150, 150, 150),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(214, 39, 40),
    RGBColor(0, 0, 0),
    RGBColor(140, 86, 75),
];

/// Draw `reports` (one trace) into an SVG file at `path`.
pub fn draw(path: &Path, title: &str, reports: &[PolicyReport]) -> Result<(), String> {
    let root = SVGBackend::new(path, (1200, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled(title, ("sans-serif", 22))
        .map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(600);
    let x_max = reports
        .iter()
        .flat_map(|r| r.curve.last().map(|p| p.0))
        .fold(100.0, f64::max)
        + 2.0;
    panel(&left, "whole run", reports, (0.0, x_max), (0.0, 100.0))?;
    let y_min = reports
        .iter()
        .flat_map(|r| r.curve.iter().filter(|(a, _)| *a >= 80.0).map(|p| p.1))
        .fold(100.0, f64::min)
        .floor()
        - 1.0;
    panel(
        &right,
        "saturation (zoom)",
        reports,
        (80.0, x_max),
        (y_min.max(0.0), 100.0),
    )?;
    root.present().map_err(|e| e.to_string())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    reports: &[PolicyReport],
    x: (f64, f64),
    y: (f64, f64),
) -> Result<(), String> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("GPU requests arrived (% of cluster GPUs)")
        .y_desc("GPUs allocated (% of cluster GPUs)")
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, r) in reports.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<(f64, f64)> = r.curve.iter().copied().filter(|(a, _)| *a >= x.0).collect();
        let label = format!("{} ({:.2}% @130)", r.policy, r.alloc_pct_at_130);
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(label)
            .legend(move |(lx, ly)| {
                PathElement::new(vec![(lx, ly), (lx + 20, ly)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}
