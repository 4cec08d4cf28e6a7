//! Charts drawn with `plotters`, from stored records only. One drawing function per
//! chart, generic over the back end, so the PNG and the SVG (and the app's exports)
//! come from the same code.

pub mod app;

use crate::store::record::BenchRecord;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Once;

/// Chart width in pixels.
pub const WIDTH: u32 = 1000;
/// Chart height in pixels.
pub const HEIGHT: u32 = 600;

static FONT: Once = Once::new();

/// Registers the embedded DejaVu Sans as plotters' `sans-serif` (PNG text rendering
/// needs a font; the SVG back end writes text elements).
pub fn ensure_font() {
    FONT.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../../assets/DejaVuSans.ttf");
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, bytes);
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, bytes);
    });
}

/// Errors of chart drawing.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// Nothing to draw.
    #[error("chart {0}: no rows to draw")]
    Empty(&'static str),
    /// The back end failed.
    #[error("chart {path}: {msg}")]
    Draw {
        /// Output.
        path: String,
        /// Message.
        msg: String,
    },
}

pub(crate) type DrawResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The legend every memwall chart draws: translucent white box, black border,
/// sans-serif labels of `font_px`, at `pos`.
pub(crate) fn draw_legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
    font_px: u32,
) -> DrawResult<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", font_px))
        .draw()?;
    Ok(())
}

pub(crate) const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Decode (tg) tok/s vs context depth, one series per model, error bars = ±1 std,
/// with each model's roofline ceiling as a dashed line.
pub fn draw_decode_vs_depth<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rows: &[BenchRecord],
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    let tg: Vec<&BenchRecord> = rows
        .iter()
        .filter(|r| r.is_decode() && r.n_seqs == 1)
        .collect();
    if tg.is_empty() {
        return Err(Box::new(ChartError::Empty("decode vs depth")));
    }
    root.fill(&WHITE)?;
    let max_d = tg.iter().map(|r| r.n_depth).max().unwrap_or(0).max(1) as f64;
    let max_y = tg
        .iter()
        .map(|r| {
            let top = r.avg_ts + r.stddev_ts;
            r.ceiling_ts.map_or(top, |c| c.max(top))
        })
        .fold(0.0f64, f64::max)
        * 1.1;
    let mut models: Vec<String> = tg.iter().map(|r| r.model_type.clone()).collect();
    models.dedup();
    models.sort();
    models.dedup();
    let title = if tg[0].synthetic {
        "Decode tok/s vs context depth (SYNTHETIC weights)"
    } else {
        "Decode tok/s vs context depth"
    };
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 26))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(-max_d * 0.03..max_d * 1.05, 0.0..max_y)?;
    chart
        .configure_mesh()
        .x_desc("context depth (tokens)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_desc("decode tok/s")
        .label_style(("sans-serif", 15))
        .draw()?;
    for (mi, m) in models.iter().enumerate() {
        let color = PALETTE[mi % PALETTE.len()];
        let mut pts: Vec<&&BenchRecord> = tg.iter().filter(|r| &r.model_type == m).collect();
        pts.sort_by_key(|r| r.n_depth);
        let n_gen = pts[0].n_gen;
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|r| (r.n_depth as f64, r.avg_ts)),
                color.stroke_width(2),
            ))?
            .label(format!(
                "{m} tg{n_gen} (mean ± std, n={})",
                pts[0].samples_ns.len()
            ))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(
            pts.iter()
                .map(|r| Circle::new((r.n_depth as f64, r.avg_ts), 4, color.filled())),
        )?;
        chart.draw_series(pts.iter().map(|r| {
            ErrorBar::new_vertical(
                r.n_depth as f64,
                r.avg_ts - r.stddev_ts,
                r.avg_ts,
                r.avg_ts + r.stddev_ts,
                color.stroke_width(2),
                8,
            )
        }))?;
        let ceil: Vec<(f64, f64)> = pts
            .iter()
            .filter_map(|r| r.ceiling_ts.map(|c| (r.n_depth as f64, c)))
            .collect();
        if !ceil.is_empty() {
            let bw = crate::units::or_dash(pts[0].bandwidth_gbps, 1);
            chart
                .draw_series(DashedLineSeries::new(
                    ceil,
                    8,
                    5,
                    color.mix(0.7).stroke_width(2),
                ))?
                .label(format!("{m} ceiling: STREAM {bw} GB/s ÷ bytes per step"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.mix(0.7).stroke_width(1))
                });
        }
    }
    draw_legend(&mut chart, SeriesLabelPosition::LowerLeft, 14)?;
    root.present()?;
    Ok(())
}

/// The two files one chart is written to ([`render_both`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartFiles {
    /// `<stem>.png`, [`WIDTH`] × [`HEIGHT`] pixels.
    pub png: PathBuf,
    /// `<stem>.svg`, the same drawing as vector text.
    pub svg: PathBuf,
}

/// Draws with `f` into `<stem>.png` and `<stem>.svg`; returns both paths.
///
/// # Errors
/// [`ChartError`] naming the file.
pub fn render_both(
    stem: &Path,
    f: impl Fn(&DrawingArea<BitMapBackend<'_>, Shift>) -> DrawResult<()>,
    g: impl Fn(&DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult<()>,
) -> Result<ChartFiles, ChartError> {
    ensure_font();
    let png = stem.with_extension("png");
    let svg = stem.with_extension("svg");
    if let Some(d) = png.parent() {
        std::fs::create_dir_all(d).map_err(|e| ChartError::Draw {
            path: d.display().to_string(),
            msg: e.to_string(),
        })?;
    }
    {
        let root = BitMapBackend::new(&png, (WIDTH, HEIGHT)).into_drawing_area();
        f(&root).map_err(|e| ChartError::Draw {
            path: png.display().to_string(),
            msg: e.to_string(),
        })?;
    }
    {
        let root = SVGBackend::new(&svg, (WIDTH, HEIGHT)).into_drawing_area();
        g(&root).map_err(|e| ChartError::Draw {
            path: svg.display().to_string(),
            msg: e.to_string(),
        })?;
    }
    Ok(ChartFiles { png, svg })
}

/// Renders the decode-vs-depth chart to `<stem>.png` and `<stem>.svg`.
///
/// # Errors
/// [`ChartError`].
pub fn decode_vs_depth(stem: &Path, rows: &[BenchRecord]) -> Result<ChartFiles, ChartError> {
    render_both(
        stem,
        |r| draw_decode_vs_depth(r, rows),
        |r| draw_decode_vs_depth(r, rows),
    )
}

/// Renders the decode-vs-depth chart to an in-memory SVG string (for the app).
///
/// # Errors
/// [`ChartError`].
pub fn decode_vs_depth_svg(rows: &[BenchRecord]) -> Result<String, ChartError> {
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (WIDTH, HEIGHT)).into_drawing_area();
        draw_decode_vs_depth(&root, rows).map_err(|e| ChartError::Draw {
            path: "<svg>".into(),
            msg: e.to_string(),
        })?;
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<BenchRecord> {
        [0, 512, 1024]
            .iter()
            .map(|&d| BenchRecord {
                n_depth: d,
                avg_ts: 60.0 - d as f64 / 100.0,
                ceiling_ts: Some(100.0 - d as f64 / 50.0),
                ..BenchRecord::example()
            })
            .collect()
    }

    #[test]
    fn png_and_svg_are_written_with_the_expected_size() {
        let d = tempfile::tempdir().unwrap();
        let ChartFiles { png, svg } = decode_vs_depth(&d.path().join("c"), &rows()).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR width and height, big-endian, at offsets 16 and 20.
        assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), WIDTH);
        assert_eq!(
            u32::from_be_bytes(bytes[20..24].try_into().unwrap()),
            HEIGHT
        );
        let s = std::fs::read_to_string(&svg).unwrap();
        assert!(s.contains("<svg") && s.contains("Decode tok/s vs context depth"));
        assert!(s.contains("ceiling: STREAM 40.0 GB/s"));
    }

    #[test]
    fn empty_input_is_an_error() {
        let e = decode_vs_depth_svg(&[]).unwrap_err().to_string();
        assert!(e.contains("no rows to draw"), "{e}");
    }
}
