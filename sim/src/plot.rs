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

/// The plot could not be drawn or written; the words are the drawing
/// backend's (an SVG file that cannot be written names the io error).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PlotError(#[source] Box<dyn std::error::Error + Send + Sync>);

impl PlotError {
    fn drawing<E: std::error::Error + Send + Sync + 'static>(e: E) -> PlotError {
        PlotError(Box::new(e))
    }
}

/// Draw `reports` (one trace) into an SVG file at `path`.
pub fn draw(path: &Path, title: &str, reports: &[PolicyReport]) -> Result<(), PlotError> {
    let root = SVGBackend::new(path, (1200, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(PlotError::drawing)?;
    let root = root
        .titled(title, ("sans-serif", 22))
        .map_err(PlotError::drawing)?;
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
    root.present().map_err(PlotError::drawing)
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    reports: &[PolicyReport],
    x: (f64, f64),
    y: (f64, f64),
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)
        .map_err(PlotError::drawing)?;
    chart
        .configure_mesh()
        .x_desc("GPU requests arrived (% of cluster GPUs)")
        .y_desc("GPUs allocated (% of cluster GPUs)")
        .draw()
        .map_err(PlotError::drawing)?;
    for (i, r) in reports.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<(f64, f64)> = r.curve.iter().copied().filter(|(a, _)| *a >= x.0).collect();
        let label = format!("{} ({:.2}% @130)", r.policy, r.alloc_pct_at_130);
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(PlotError::drawing)?
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
        .map_err(PlotError::drawing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plot_that_cannot_be_written_says_why_with_the_io_error_as_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("alloc.svg");
        draw(&good, "GPU allocation", &[]).unwrap();
        assert!(std::fs::read_to_string(&good).unwrap().contains("<svg"));
        let nowhere = dir.path().join("missing-dir/alloc.svg");
        let e = draw(&nowhere, "GPU allocation", &[]).unwrap_err();
        assert!(std::error::Error::source(&e).is_some(), "{e:?}");
        assert!(!e.to_string().is_empty());
    }
}
