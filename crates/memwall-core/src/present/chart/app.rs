//! Charts of the desktop app, drawn by the same plotters code as the CLI's, so an
//! exported chart and a CLI chart of the same rows are identical: the roofline of
//! [`RooflineView`] and the decode-vs-depth chart ([`super::draw_decode_vs_depth`]).
//! [`AppChart`] names them; [`svg`] renders one to a string for the window,
//! [`png`] and [`svg_file`] write the export files.

use super::{ChartError, DrawResult, HEIGHT, PALETTE, WIDTH, draw_legend, ensure_font};
use crate::present::views::{RooflineView, roofline_view};
use crate::store::record::BenchRecord;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The charts the app shows and exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum AppChart {
    /// Measured points against the roof (log-log).
    Roofline,
    /// Decode tok/s vs depth with ceilings.
    DecodeVsDepth,
}

/// The roofline of `v`: the roof polyline, each point at (intensity, achieved GFLOP/s),
/// pp and tg marked differently, one colour per model.
pub fn draw_roofline<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    v: &RooflineView,
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    if v.points.is_empty() {
        return Err(Box::new(ChartError::Empty("roofline")));
    }
    root.fill(&WHITE)?;
    let xs = v
        .points
        .iter()
        .map(|p| p.intensity)
        .chain(v.roofs.iter().flat_map(|r| r.roof.iter().map(|x| x.0)));
    let ys = v
        .points
        .iter()
        .map(|p| p.achieved_gflops)
        .chain(v.roofs.iter().flat_map(|r| r.roof.iter().map(|x| x.1)));
    let (x0, x1) = xs.fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
    let (y0, y1) = ys.fold((f64::INFINITY, 0.0f64), |(a, b), y| (a.min(y), b.max(y)));
    let caption = match v.roofs.as_slice() {
        [r] => match (r.bandwidth_gbps, r.peak_gflops) {
            (Some(b), Some(p)) => format!(
                "roofline of {}: STREAM {b:.1} GB/s, {} peak {p:.0} GFLOP/s",
                r.label, r.peak_kind
            ),
            (Some(b), None) => {
                format!(
                    "roofline of {}: STREAM {b:.1} GB/s (no compute peak stored)",
                    r.label
                )
            }
            _ => format!("roofline of {} (no bandwidth stored)", r.label),
        },
        rs => format!(
            "rooflines of {} machines, each point under its own",
            rs.len()
        ),
    };
    let mut chart = ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (x0 * 0.5..x1 * 2.0).log_scale(),
            (y0 * 0.5..y1 * 2.0).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("arithmetic intensity (FLOP/byte)")
        .y_desc("GFLOP/s")
        .label_style(("sans-serif", 14))
        .draw()?;
    let greys = [BLACK, RGBColor(110, 110, 110), RGBColor(170, 170, 170)];
    for (k, rf) in v.roofs.iter().enumerate() {
        if rf.roof.is_empty() {
            continue;
        }
        let c = greys[k % greys.len()];
        let bw = rf
            .bandwidth_gbps
            .map_or("—".to_string(), |b| format!("{b:.0} GB/s"));
        chart
            .draw_series(LineSeries::new(rf.roof.clone(), c.stroke_width(2)))?
            .label(match rf.ridge {
                Some(r) => format!("{}: min(peak, AI × {bw}); ridge {r:.1} FLOP/B", rf.label),
                None => format!("{}: AI × {bw}", rf.label),
            })
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    let mut series: Vec<&str> = v.points.iter().map(|p| p.series.as_str()).collect();
    series.sort();
    series.dedup();
    for (i, s) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let pts: Vec<_> = v.points.iter().filter(|p| p.series == *s).collect();
        chart
            .draw_series(pts.iter().map(|p| {
                let at = (p.intensity, p.achieved_gflops);
                if p.phase == "tg" {
                    Circle::new(at, 5, c.filled()).into_dyn()
                } else {
                    TriangleMarker::new(at, 7, c.filled()).into_dyn()
                }
            }))?
            .label(format!("{s} (● tg, ▲ pp)"))
            .legend(move |(x, y)| Circle::new((x + 10, y), 5, c.filled()));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 13)?;
    root.present()?;
    Ok(())
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: AppChart,
    rows: &[BenchRecord],
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    match chart {
        AppChart::Roofline => draw_roofline(root, &roofline_view(rows)),
        AppChart::DecodeVsDepth => super::draw_decode_vs_depth(root, rows),
    }
}

fn draw_err(path: &str, e: Box<dyn std::error::Error>) -> ChartError {
    match e.downcast::<ChartError>() {
        Ok(c) => *c,
        Err(e) => ChartError::Draw {
            path: path.to_string(),
            msg: e.to_string(),
        },
    }
}

/// Renders `chart` of `rows` to an SVG string (`WIDTH × HEIGHT`).
///
/// # Errors
/// [`ChartError::Empty`] when the rows have nothing to draw.
pub fn svg(chart: AppChart, rows: &[BenchRecord]) -> Result<String, ChartError> {
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, chart, rows).map_err(|e| draw_err("<svg>", e))?;
    }
    Ok(s)
}

/// Writes `chart` of `rows` as an SVG file at `path`.
///
/// # Errors
/// [`ChartError`] naming the file.
pub fn svg_file(path: &Path, chart: AppChart, rows: &[BenchRecord]) -> Result<(), ChartError> {
    let s = svg(chart, rows)?;
    crate::util::write_atomic(path, s.as_bytes()).map_err(|e| ChartError::Draw {
        path: path.display().to_string(),
        msg: e.to_string(),
    })
}

/// Writes `chart` of `rows` as a `WIDTH × HEIGHT` PNG at `path`.
///
/// # Errors
/// [`ChartError`] naming the file.
pub fn png(path: &Path, chart: AppChart, rows: &[BenchRecord]) -> Result<(), ChartError> {
    ensure_font();
    let p = path.display().to_string();
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| ChartError::Draw {
            path: d.display().to_string(),
            msg: e.to_string(),
        })?;
    }
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    draw(&root, chart, rows).map_err(|e| draw_err(&p, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<BenchRecord> {
        let mut tg = BenchRecord::example();
        tg.n_prompt = 0;
        tg.n_gen = 128;
        tg.intensity = Some(2.0);
        tg.achieved_gflops = Some(30.0);
        tg.bandwidth_gbps = Some(40.0);
        tg.peak_gflops = Some(400.0);
        let mut pp = tg.clone();
        pp.n_prompt = 512;
        pp.n_gen = 0;
        pp.intensity = Some(200.0);
        pp.achieved_gflops = Some(250.0);
        vec![tg, pp]
    }

    #[test]
    fn roofline_png_has_the_chart_size_and_svg_the_caption() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.png");
        png(&p, AppChart::Roofline, &rows()).unwrap();
        let b = std::fs::read(&p).unwrap();
        assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(u32::from_be_bytes(b[16..20].try_into().unwrap()), WIDTH);
        assert_eq!(u32::from_be_bytes(b[20..24].try_into().unwrap()), HEIGHT);
        let s = svg(AppChart::Roofline, &rows()).unwrap();
        // One machine: the caption names its roof (host and placement) and the STREAM
        // bandwidth the diagonal is drawn at.
        assert!(
            s.contains("roofline of ") && s.contains(": STREAM 40.0 GB/s"),
            "{}",
            &s[..600]
        );
        assert!(s.contains("ridge 10.0 FLOP/B"));
    }

    #[test]
    fn nothing_to_draw_is_an_error_not_a_blank_chart() {
        let e = svg(AppChart::Roofline, &[]).unwrap_err().to_string();
        assert!(e.contains("no rows to draw"), "{e}");
        let e = svg(AppChart::DecodeVsDepth, &[]).unwrap_err().to_string();
        assert!(e.contains("no rows to draw"), "{e}");
    }
}
