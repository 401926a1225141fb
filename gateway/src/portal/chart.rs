//! Line charts as SVG, drawn on the server: no chart library, no script, so
//! a curve renders the same with no network and costs a few KB. Each series
//! is a polyline over a shared time axis and a y axis from 0 to the largest
//! value (or `y_max`, e.g. a capacity), with its last value in the legend.
//! The time axis is labelled at round UTC times (every 10 s up to every
//! day, at most six labels), so a reader sees when each part of a curve was.
use std::fmt::Write;

/// One curve: its label, CSS class (its colour) and `(time ms, value)` points.
pub struct Series<'a> {
    pub label: &'a str,
    pub class: &'a str,
    pub points: Vec<(u64, f64)>,
}

/// The drawing's size in px.
pub const WIDTH: f64 = 560.0;
pub const HEIGHT: f64 = 160.0;
const PAD_LEFT: f64 = 44.0;
const PAD_BOTTOM: f64 = 18.0;
/// Steps the time axis may be labelled at, ms: the first that gives at
/// most [`MAX_TIME_TICKS`] labels over the chart's span is used.
const TIME_STEPS_MS: &[u64] = &[
    10_000,
    30_000,
    60_000,
    300_000,
    600_000,
    1_800_000,
    3_600_000,
    10_800_000,
    21_600_000,
    43_200_000,
    86_400_000,
    604_800_000,
];
const MAX_TIME_TICKS: u64 = 6;
/// Most points one polyline draws (a longer curve is thinned evenly): a
/// chart stays a few KB whatever the history holds.
pub const MAX_POINTS: usize = 240;

/// Where a point lands: x from `[from_ms, to_ms]` to the plot's width, y
/// from `[0, y_max]` to its height (y grows downwards in SVG).
fn place(at_ms: u64, v: f64, from_ms: u64, to_ms: u64, y_max: f64) -> (f64, f64) {
    let span = to_ms.saturating_sub(from_ms).max(1) as f64;
    let x = PAD_LEFT + (at_ms.saturating_sub(from_ms) as f64 / span) * (WIDTH - PAD_LEFT);
    let plot_h = HEIGHT - PAD_BOTTOM;
    let y = plot_h - (v.max(0.0) / y_max).min(1.0) * plot_h;
    (x, y)
}

/// The time axis's labels over `[from_ms, to_ms]`: `(at ms, text)` at the
/// multiples of the first step giving at most [`MAX_TIME_TICKS`], as UTC
/// `HH:MM:SS` (steps under a minute), `HH:MM` (under a day) or `MM-DD`.
fn time_ticks(from_ms: u64, to_ms: u64) -> Vec<(u64, String)> {
    let span = to_ms.saturating_sub(from_ms);
    let step = TIME_STEPS_MS
        .iter()
        .copied()
        .find(|s| span / s < MAX_TIME_TICKS)
        .unwrap_or(span.div_ceil(MAX_TIME_TICKS).max(1));
    let mut out = Vec::new();
    let mut at = from_ms.div_ceil(step) * step;
    while at <= to_ms && out.len() < (MAX_TIME_TICKS + 1) as usize {
        let t = caldera_spec::time::rfc3339(at);
        let text = if step < 60_000 {
            t[11..19].to_string()
        } else if step < 86_400_000 {
            t[11..16].to_string()
        } else {
            t[5..10].to_string()
        };
        out.push((at, text));
        at += step;
    }
    if out.is_empty() && to_ms > from_ms {
        // Shorter than one step and no round time inside: its two ends.
        for at in [from_ms, to_ms] {
            out.push((at, caldera_spec::time::rfc3339(at)[11..19].to_string()));
        }
    }
    out
}

/// Every `step`th point so at most [`MAX_POINTS`] remain, the last kept.
fn thinned(points: &[(u64, f64)]) -> Vec<(u64, f64)> {
    let step = points.len().div_ceil(MAX_POINTS).max(1);
    let mut out: Vec<(u64, f64)> = points.iter().step_by(step).copied().collect();
    if let (Some(last), Some(kept)) = (points.last(), out.last()) {
        if last != kept {
            out.push(*last);
        }
    }
    out
}

/// The SVG of `series` over `[from_ms, to_ms]`; `y_max` fixes the top of the
/// y axis (otherwise the largest value); `unit` labels it; `id` is the
/// element's id.
pub fn line_chart(
    id: &str,
    series: &[Series],
    from_ms: u64,
    to_ms: u64,
    y_max: Option<f64>,
    unit: &str,
) -> String {
    let top = y_max
        .unwrap_or_else(|| {
            series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.1))
                .fold(0.0, f64::max)
        })
        .max(f64::MIN_POSITIVE);
    let mut svg = String::with_capacity(4096);
    let _ = write!(
        svg,
        r#"<svg id="{id}" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" xmlns="http://www.w3.org/2000/svg">"#
    );
    let base = HEIGHT - PAD_BOTTOM;
    let _ = write!(
        svg,
        r#"<line class="axis" x1="{PAD_LEFT}" y1="{base}" x2="{WIDTH}" y2="{base}"/><line class="axis" x1="{PAD_LEFT}" y1="0" x2="{PAD_LEFT}" y2="{base}"/>"#
    );
    let _ = write!(
        svg,
        r#"<text class="tick" x="2" y="10">{}</text><text class="tick" x="2" y="{base}">0 {}</text>"#,
        short(top),
        escape(unit)
    );
    let ticks = time_ticks(from_ms, to_ms);
    let last = ticks.len().saturating_sub(1);
    for (i, (at, text)) in ticks.iter().enumerate() {
        let (x, _) = place(*at, 0.0, from_ms, to_ms, top);
        // The last label says the zone, and hangs left of the right edge.
        let (anchor, zone) = if i == last {
            ("end", " UTC")
        } else {
            ("middle", "")
        };
        let _ = write!(
            svg,
            r#"<line class="axis tick" x1="{x:.1}" y1="{base}" x2="{x:.1}" y2="{}"/><text class="tick time" x="{x:.1}" y="{}" text-anchor="{anchor}" data-at="{at}">{text}{zone}</text>"#,
            base + 3.0,
            HEIGHT - 3.0,
        );
    }
    if series.iter().all(|s| s.points.is_empty()) {
        let _ = write!(
            svg,
            r#"<text class="empty" x="{}" y="{}">no samples in this range yet</text>"#,
            WIDTH / 2.0 - 80.0,
            base / 2.0
        );
    }
    for s in series {
        let pts = thinned(&s.points);
        let mut line = String::with_capacity(pts.len() * 14);
        for (at, v) in &pts {
            let (x, y) = place(*at, *v, from_ms, to_ms, top);
            let _ = write!(line, "{x:.1},{y:.1} ");
        }
        let _ = write!(
            svg,
            r#"<polyline class="series {}" data-series="{}" points="{}"><title>{}</title></polyline>"#,
            escape(s.class),
            escape(s.label),
            line.trim_end(),
            escape(s.label)
        );
        // The latest point as a dot: a curve of one or two samples (a
        // cluster just started) sits on the right edge and would not show.
        if let Some((at, v)) = pts.last() {
            let (x, y) = place(*at, *v, from_ms, to_ms, top);
            let _ = write!(
                svg,
                r#"<circle class="series {}" cx="{x:.1}" cy="{y:.1}" r="2.5"/>"#,
                escape(s.class)
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// A value for an axis label: 1.2k, 35, 0.5.
fn short(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Text for SVG content or an attribute.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coords(svg: &str, series: &str) -> Vec<(f64, f64)> {
        let at = svg.find(&format!("data-series=\"{series}\"")).unwrap();
        let pts = &svg[at..];
        let start = pts.find("points=\"").unwrap() + 8;
        let end = start + pts[start..].find('"').unwrap();
        pts[start..end]
            .split_whitespace()
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn points_span_the_time_axis_and_the_largest_value_touches_the_top() {
        // 0..100 s: the first point at the left edge of the plot (x = 44),
        // the last at the right (560); value 8 of top 8 at y = 0, 4 halfway
        // down the 142 px plot (71), 0 on the axis (142).
        let s = [Series {
            label: "used",
            class: "used",
            points: vec![(0, 0.0), (50_000, 4.0), (100_000, 8.0)],
        }];
        let svg = line_chart("c", &s, 0, 100_000, None, "GPUs");
        assert_eq!(
            coords(&svg, "used"),
            [(44.0, 142.0), (302.0, 71.0), (560.0, 0.0)]
        );
        assert!(svg.starts_with("<svg id=\"c\"") && svg.ends_with("</svg>"));
    }

    #[test]
    fn a_fixed_top_scales_values_and_caps_what_passes_it() {
        // Capacity 10: 5 is halfway (71); 20 is drawn at the top, not above it.
        let s = [Series {
            label: "a",
            class: "a",
            points: vec![(0, 5.0), (10, 20.0)],
        }];
        let svg = line_chart("c", &s, 0, 10, Some(10.0), "");
        assert_eq!(coords(&svg, "a"), [(44.0, 71.0), (560.0, 0.0)]);
    }

    #[test]
    fn long_curves_are_thinned_keeping_the_last_point_and_empty_ones_say_so() {
        let points: Vec<(u64, f64)> = (0..10_000).map(|i| (i, i as f64)).collect();
        let s = [Series {
            label: "a",
            class: "a",
            points,
        }];
        let svg = line_chart("c", &s, 0, 9_999, None, "");
        let c = coords(&svg, "a");
        assert!(c.len() <= MAX_POINTS + 1, "{}", c.len());
        assert_eq!(c.last(), Some(&(560.0, 0.0)));
        let empty = line_chart("e", &[], 0, 1, None, "");
        assert!(empty.contains("no samples"));
    }

    #[test]
    fn the_time_axis_is_labelled_at_round_utc_times() {
        // 12:00:05 to 12:10:05 UTC on 2026-12-03 (10 min): every 5 minutes
        // is the first step with fewer than 6 labels: 12:05, 12:10.
        let day = 1_796_256_000_000; // 2026-12-03T00:00:00Z
        let from = day + 12 * 3_600_000 + 5_000;
        let to = from + 600_000;
        assert_eq!(caldera_spec::time::rfc3339(day), "2026-12-03T00:00:00.000Z");
        let ticks: Vec<String> = time_ticks(from, to).into_iter().map(|t| t.1).collect();
        assert_eq!(ticks, ["12:05", "12:10"]);
        // 40 s: every 10 s, with seconds.
        let ticks: Vec<String> = time_ticks(day, day + 40_000)
            .into_iter()
            .map(|t| t.1)
            .collect();
        assert_eq!(
            ticks,
            ["00:00:00", "00:00:10", "00:00:20", "00:00:30", "00:00:40"]
        );
        // 3 s with no round 10 s inside: both ends, with seconds.
        let ticks: Vec<String> = time_ticks(day + 1_000, day + 4_000)
            .into_iter()
            .map(|t| t.1)
            .collect();
        assert_eq!(ticks, ["00:00:01", "00:00:04"]);
        // A week: every day, as the date.
        let ticks: Vec<String> = time_ticks(day, day + 5 * 86_400_000)
            .into_iter()
            .map(|t| t.1)
            .collect();
        assert_eq!(
            ticks,
            ["12-03", "12-04", "12-05", "12-06", "12-07", "12-08"]
        );
        // Drawn on the chart, the last with its zone.
        let s = [Series {
            label: "a",
            class: "a",
            points: vec![(from, 1.0)],
        }];
        let svg = line_chart("c", &s, from, to, None, "GPUs");
        assert!(
            svg.contains(">12:05</text>") && svg.contains(">12:10 UTC</text>"),
            "{svg}"
        );
    }

    #[test]
    fn labels_are_escaped() {
        let s = [Series {
            label: "<b>",
            class: "x\"y",
            points: vec![(0, 1.0)],
        }];
        let svg = line_chart("c", &s, 0, 1, None, "a&b");
        assert!(!svg.contains("<b>") && svg.contains("&lt;b&gt;") && svg.contains("a&amp;b"));
    }
}
