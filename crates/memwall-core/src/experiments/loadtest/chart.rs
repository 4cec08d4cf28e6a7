//! Charts of a load test (plotters, PNG + SVG): latency vs throughput, TTFT and TPOT
//! percentiles vs concurrency, goodput vs request rate. Each draws points already
//! computed in [`LoadPoint`]s.

use super::metrics::LoadPoint;
use super::plan::Load;
use crate::present::chart::{ChartError, ChartFiles, DrawResult, PALETTE, render_both};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// One line of a chart: its label and `(x, y)` points.
struct Series {
    label: String,
    points: Vec<(f64, f64)>,
}

fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    let xmax = all.iter().map(|p| p.0).fold(0.0, f64::max).max(1e-9) * 1.1;
    let ymax = all.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.1;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()?;
    for (i, s) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(s.points.clone(), color.stroke_width(2)))?
            .label(s.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}

fn closed(points: &[LoadPoint]) -> Vec<(f64, &LoadPoint)> {
    let mut v: Vec<(f64, &LoadPoint)> = points
        .iter()
        .filter_map(|p| match p.load {
            Load::Closed { concurrency } => Some((concurrency as f64, p)),
            Load::Open { .. } => None,
        })
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

fn series_of(
    label: &str,
    pts: &[(f64, &LoadPoint)],
    y: impl Fn(&LoadPoint) -> Option<f64>,
) -> Series {
    Series {
        label: label.to_string(),
        points: pts
            .iter()
            .filter_map(|(x, p)| y(p).map(|v| (*x, v)))
            .collect(),
    }
}

/// One chart: file stem, title, axis names and its lines.
struct Spec {
    stem: &'static str,
    title: &'static str,
    x: &'static str,
    y: &'static str,
    series: Vec<Series>,
}

/// A chart drawn as SVG text (for the app's window).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, ts_rs::TS)]
pub struct LoadChart {
    /// File stem of the same chart in a results folder (`percentiles-vs-concurrency`).
    pub stem: String,
    /// The title drawn on it.
    pub title: String,
    pub svg: String,
}

/// The charts `points` have something to draw on, in order: latency vs throughput,
/// TTFT and TPOT percentiles vs concurrency, implied bandwidth vs STREAM by
/// concurrency, goodput vs rate.
fn specs(points: &[LoadPoint]) -> Vec<Spec> {
    let mut by_tput: Vec<(f64, &LoadPoint)> = points
        .iter()
        .map(|p| (p.output_throughput_tps, p))
        .collect();
    by_tput.sort_by(|a, b| a.0.total_cmp(&b.0));
    let c = closed(points);
    let mut open: Vec<(f64, &LoadPoint)> = points
        .iter()
        .filter_map(|p| match p.load {
            Load::Open { rate_rps, .. } => Some((rate_rps, p)),
            Load::Closed { .. } => None,
        })
        .collect();
    open.sort_by(|a, b| a.0.total_cmp(&b.0));
    let all = vec![
        Spec {
            stem: "latency-vs-throughput",
            title: "Latency vs output throughput",
            x: "output tok/s (all requests)",
            y: "ms",
            series: vec![
                series_of("TTFT p50", &by_tput, |p| p.ttft.median_ms),
                series_of("TPOT p50", &by_tput, |p| p.tpot.median_ms),
                series_of("E2EL p50", &by_tput, |p| p.e2el.median_ms),
            ],
        },
        Spec {
            stem: "percentiles-vs-concurrency",
            title: "TTFT and TPOT percentiles vs concurrency",
            x: "concurrency (closed loop)",
            y: "ms",
            series: vec![
                series_of("TTFT p50", &c, |p| p.ttft.median_ms),
                series_of("TTFT p90", &c, |p| p.ttft.p90_ms),
                series_of("TTFT p99", &c, |p| p.ttft.p99_ms),
                series_of("TPOT p50", &c, |p| p.tpot.median_ms),
                series_of("TPOT p90", &c, |p| p.tpot.p90_ms),
                series_of("TPOT p99", &c, |p| p.tpot.p99_ms),
            ],
        },
        Spec {
            stem: "bandwidth-vs-concurrency",
            title: "Implied bandwidth vs measured STREAM",
            x: "concurrency (closed loop)",
            y: "GB/s",
            series: if c.iter().any(|(_, p)| p.bandwidth.implied_gbps.is_some()) {
                vec![
                    series_of("implied (output tok/s × bytes/token)", &c, |p| {
                        p.bandwidth.implied_gbps
                    }),
                    series_of("STREAM triad (stored)", &c, |p| p.bandwidth.stream_gbps),
                ]
            } else {
                vec![]
            },
        },
        Spec {
            stem: "goodput-vs-rate",
            title: "Goodput vs request rate",
            x: "offered rate, req/s (open loop)",
            y: "req/s",
            series: vec![
                series_of("goodput", &open, |p| p.goodput_rps),
                series_of("completed", &open, |p| Some(p.request_throughput_rps)),
            ],
        },
    ];
    all.into_iter()
        .filter(|s| s.series.iter().any(|s| !s.points.is_empty()))
        .collect()
}

/// Writes every chart [`specs`] gives as PNG and SVG into `dir`: `latency-vs-throughput`,
/// `percentiles-vs-concurrency` (closed-loop points), `bandwidth-vs-concurrency`
/// (closed-loop points with the bandwidth columns) and `goodput-vs-rate` (open-loop
/// points with an SLO); returns the paths written.
///
/// # Errors
/// [`ChartError::Empty`] without points; drawing errors naming the file.
pub fn write_charts(dir: &Path, points: &[LoadPoint]) -> Result<Vec<PathBuf>, ChartError> {
    if points.is_empty() {
        return Err(ChartError::Empty("loadtest"));
    }
    let mut out = Vec::new();
    for c in specs(points) {
        let ChartFiles { png, svg } = render_both(
            &dir.join(c.stem),
            |r| draw_lines(r, c.title, c.x, c.y, &c.series),
            |r| draw_lines(r, c.title, c.x, c.y, &c.series),
        )?;
        out.extend([png, svg]);
    }
    Ok(out)
}

/// The same charts as [`write_charts`], as SVG text.
///
/// # Errors
/// [`ChartError::Empty`] without points; drawing errors.
pub fn svg_charts(points: &[LoadPoint]) -> Result<Vec<LoadChart>, ChartError> {
    if points.is_empty() {
        return Err(ChartError::Empty("loadtest"));
    }
    let mut out = Vec::new();
    for c in specs(points) {
        let mut s = String::new();
        {
            let root = SVGBackend::with_string(&mut s, (900, 480)).into_drawing_area();
            let drawn: DrawResult<()> = (|| {
                draw_lines(&root, c.title, c.x, c.y, &c.series)?;
                root.present()?;
                Ok(())
            })();
            drawn.map_err(|e| ChartError::Draw {
                path: format!("<svg {}>", c.stem),
                msg: e.to_string(),
            })?;
        }
        out.push(LoadChart {
            stem: c.stem.to_string(),
            title: c.title.to_string(),
            svg: s,
        });
    }
    Ok(out)
}
