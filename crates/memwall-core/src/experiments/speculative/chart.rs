//! Charts of `memwall spec bench` (plotters, PNG + SVG from one drawing function):
//! acceptance rate vs k per category, and speedup vs k, measured (mean ± 1 std over
//! repetitions) beside the cost model's prediction, one chart per drafter.

use super::store::SpecBenchRow;
use crate::present::chart::{ChartError, ChartFiles, DrawResult, PALETTE, render_both};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

const CATS: [&str; 3] = ["json", "code", "prose"];

fn fixed(rows: &[SpecBenchRow], drafter: &str) -> Vec<SpecBenchRow> {
    rows.iter()
        .filter(|r| !r.k_auto && r.k > 0 && r.drafter_kind == drafter)
        .cloned()
        .collect()
}

fn k_range(rows: &[SpecBenchRow]) -> (f64, f64) {
    let kmax = rows.iter().map(|r| r.k).max().unwrap_or(1) as f64;
    (0.5, kmax + 0.5)
}

/// Width (px) of the legend strip right of the plot: every series spans all k, so
/// any legend inside the plot would hide some of them.
const LEGEND_W: u32 = 210;

/// k is an integer: label whole numbers only.
fn k_label(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{}", x.round())
    } else {
        String::new()
    }
}

/// Marker drawn beside a legend entry.
#[derive(Clone, Copy)]
enum Marker {
    Circle,
    Triangle,
    None,
}

/// One legend line: a solid or dashed sample of the series' stroke, its marker, its
/// label; or (`line: false`) a line of text only.
struct Entry {
    label: String,
    color: RGBColor,
    dashed: bool,
    marker: Marker,
    line: bool,
}

impl Entry {
    /// A text-only legend line (no series drawn for it).
    fn note(label: String) -> Entry {
        Entry {
            label,
            color: BLACK,
            dashed: false,
            marker: Marker::None,
            line: false,
        }
    }
}

/// Draws `entries` top-down in `area` (the strip right of the plot).
fn draw_side_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Entry],
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    let font = ("sans-serif", 14).into_font();
    for (i, e) in entries.iter().enumerate() {
        let y = 70 + 24 * i as i32;
        let style = ShapeStyle::from(&e.color).stroke_width(2);
        if !e.line {
            area.draw(&Text::new(e.label.clone(), (8, y - 7), font.clone()))?;
            continue;
        }
        if e.dashed {
            area.draw(&PathElement::new(vec![(8, y), (18, y)], style))?;
            area.draw(&PathElement::new(vec![(24, y), (34, y)], style))?;
        } else {
            area.draw(&PathElement::new(vec![(8, y), (34, y)], style))?;
        }
        match e.marker {
            Marker::Circle => area.draw(&Circle::new((21, y), 4, e.color.filled()))?,
            Marker::Triangle => area.draw(&TriangleMarker::new((21, y), 5, e.color.filled()))?,
            Marker::None => {}
        }
        area.draw(&Text::new(e.label.clone(), (42, y - 7), font.clone()))?;
    }
    Ok(())
}

/// Acceptance rate (%) vs k; one color per category, solid = draft model,
/// dashed = n-gram.
pub fn draw_acceptance<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rows: &[SpecBenchRow],
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (w, _) = root.dim_in_pixel();
    let (plot, side) = root.split_horizontally(w.saturating_sub(LEGEND_W));
    let mut entries = Vec::new();
    let all: Vec<SpecBenchRow> = ["draft-model", "ngram"]
        .iter()
        .flat_map(|d| fixed(rows, d))
        .collect();
    let (x0, x1) = k_range(&all);
    let mut chart = ChartBuilder::on(&plot)
        .caption(
            "Acceptance rate (accepted ÷ drafted) vs draft length k",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, 0.0..100.0)?;
    chart
        .configure_mesh()
        .x_desc("draft length k")
        .y_desc("acceptance rate, %")
        .x_labels(20)
        .x_label_formatter(&k_label)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style(("sans-serif", 14))
        .draw()?;
    for (di, drafter) in ["draft-model", "ngram"].iter().enumerate() {
        let rs = fixed(rows, drafter);
        for (ci, cat) in CATS.iter().enumerate() {
            let mut pts: Vec<(f64, f64)> = rs
                .iter()
                .filter(|r| r.category == *cat)
                .filter_map(|r| r.acceptance_rate.map(|a| (r.k as f64, a * 100.0)))
                .collect();
            if pts.is_empty() {
                continue;
            }
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let color = PALETTE[ci % PALETTE.len()];
            let style = ShapeStyle::from(&color).stroke_width(2);
            entries.push(Entry {
                label: format!("{cat}, {drafter}"),
                color,
                dashed: di != 0,
                marker: if di == 0 {
                    Marker::Circle
                } else {
                    Marker::Triangle
                },
                line: true,
            });
            if di == 0 {
                chart.draw_series(LineSeries::new(pts.clone(), style))?;
                chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
            } else {
                chart.draw_series(DashedLineSeries::new(pts.clone(), 6, 4, style))?;
                chart.draw_series(
                    pts.iter()
                        .map(|&p| TriangleMarker::new(p, 5, color.filled())),
                )?;
            }
        }
    }
    draw_side_legend(&side, &entries)?;
    root.present()?;
    Ok(())
}

/// Speedup vs k for one drafter: measured (solid, ±1 std error bars) and predicted
/// (dashed), one color per category, with the break-even line at 1.
pub fn draw_speedup<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rows: &[SpecBenchRow],
    drafter: &str,
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (w, _) = root.dim_in_pixel();
    let (plot, side) = root.split_horizontally(w.saturating_sub(LEGEND_W));
    let mut entries = Vec::new();
    let rs = fixed(rows, drafter);
    let (x0, x1) = k_range(&rs);
    let mut ymax: f64 = 1.2;
    for r in &rs {
        if let (Some(m), Some(s)) = (r.speedup_mean, r.speedup_std) {
            ymax = ymax.max(m + s);
        }
        if let Some(p) = r.predicted_speedup {
            ymax = ymax.max(p);
        }
    }
    let mut chart = ChartBuilder::on(&plot)
        .caption(
            format!("Speedup vs target-only decoding, {drafter}: measured vs cost model"),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, 0.0..ymax * 1.1)?;
    chart
        .configure_mesh()
        .x_desc("draft length k")
        .y_desc("speedup (× target-only tok/s)")
        .x_labels(20)
        .x_label_formatter(&k_label)
        .label_style(("sans-serif", 14))
        .draw()?;
    chart.draw_series(DashedLineSeries::new(
        vec![(x0, 1.0), (x1, 1.0)],
        3,
        3,
        ShapeStyle::from(&BLACK),
    ))?;
    for (ci, cat) in CATS.iter().enumerate() {
        let mut pts: Vec<&SpecBenchRow> = rs.iter().filter(|r| r.category == *cat).collect();
        if pts.is_empty() {
            continue;
        }
        pts.sort_by_key(|r| r.k);
        let color = PALETTE[ci % PALETTE.len()];
        let style = ShapeStyle::from(&color).stroke_width(2);
        let meas: Vec<(f64, f64)> = pts
            .iter()
            .filter_map(|r| r.speedup_mean.map(|m| (r.k as f64, m)))
            .collect();
        chart.draw_series(LineSeries::new(meas.clone(), style))?;
        entries.push(Entry {
            label: format!("{cat}: measured ± 1 std"),
            color,
            dashed: false,
            marker: Marker::None,
            line: true,
        });
        chart.draw_series(pts.iter().filter_map(|r| {
            let (m, s) = (r.speedup_mean?, r.speedup_std?);
            Some(ErrorBar::new_vertical(
                r.k as f64,
                m - s,
                m,
                m + s,
                color.filled(),
                8,
            ))
        }))?;
        let pred: Vec<(f64, f64)> = pts
            .iter()
            .filter_map(|r| r.predicted_speedup.map(|p| (r.k as f64, p)))
            .collect();
        if !pred.is_empty() {
            chart.draw_series(DashedLineSeries::new(pred, 6, 4, style))?;
            entries.push(Entry {
                label: format!("{cat}: predicted"),
                color,
                dashed: true,
                marker: Marker::None,
                line: true,
            });
        }
    }
    // `--k auto`'s choice per category: a measured k is plotted above as that k's
    // point; "off" is a decision without a measurement, so it is named, not plotted.
    for cat in CATS {
        if let Some(r) = rows
            .iter()
            .find(|r| r.k_auto && r.drafter_kind == drafter && r.category == cat)
        {
            entries.push(Entry::note(format!("{cat}: {}", r.k_label())));
        }
    }
    entries.push(Entry {
        label: "break-even (1×)".into(),
        color: BLACK,
        dashed: true,
        marker: Marker::None,
        line: true,
    });
    draw_side_legend(&side, &entries)?;
    root.present()?;
    Ok(())
}

/// Writes `acceptance.{png,svg}` and `speedup-<drafter>.{png,svg}` (for each drafter
/// with rows) into `dir`; returns the paths.
///
/// # Errors
/// [`ChartError::Empty`] without speculative rows; drawing errors.
pub fn write_charts(dir: &Path, rows: &[SpecBenchRow]) -> Result<Vec<PathBuf>, ChartError> {
    if !rows.iter().any(|r| r.k > 0 && !r.k_auto) {
        return Err(ChartError::Empty("spec"));
    }
    let mut out = Vec::new();
    let ChartFiles { png: a, svg: b } = render_both(
        &dir.join("acceptance"),
        |r| draw_acceptance(r, rows),
        |r| draw_acceptance(r, rows),
    )?;
    out.extend([a, b]);
    for d in ["draft-model", "ngram"] {
        if fixed(rows, d).is_empty() {
            continue;
        }
        let ChartFiles { png: a, svg: b } = render_both(
            &dir.join(format!("speedup-{d}")),
            |r| draw_speedup(r, rows, d),
            |r| draw_speedup(r, rows, d),
        )?;
        out.extend([a, b]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_written() {
        let mut rows = Vec::new();
        for cat in CATS {
            for k in 1..=4 {
                rows.push(SpecBenchRow {
                    category: cat.into(),
                    k,
                    acceptance_rate: Some(0.9 - 0.05 * k as f64),
                    speedup_mean: Some(1.0 - 0.05 * k as f64),
                    predicted_speedup: Some(1.02 - 0.05 * k as f64),
                    ..SpecBenchRow::example()
                });
            }
        }
        let d = tempfile::tempdir().unwrap();
        let files = write_charts(d.path(), &rows).unwrap();
        assert_eq!(
            files.len(),
            4,
            "acceptance + draft-model speedup, png and svg"
        );
        let svg = std::fs::read_to_string(d.path().join("speedup-draft-model.svg")).unwrap();
        assert!(svg.contains("code: predicted") && svg.contains("json: measured"));
        // k is an integer axis: whole-number labels only.
        assert!(
            svg.contains(">\n3\n<") && !svg.contains(">\n1.5\n<") && !svg.contains(">\n2.0\n<")
        );
        assert!(write_charts(d.path(), &[]).is_err());
    }

    #[test]
    fn auto_off_is_named_in_the_speedup_chart_not_plotted() {
        let mut rows: Vec<SpecBenchRow> = (1..=3)
            .map(|k| SpecBenchRow {
                k,
                speedup_mean: Some(0.9 - 0.1 * k as f64),
                speedup_std: Some(0.01),
                predicted_speedup: Some(0.95 - 0.1 * k as f64),
                ..SpecBenchRow::example()
            })
            .collect();
        rows.push(SpecBenchRow {
            k: 0,
            k_auto: true,
            reps: 0,
            decision: Some(crate::experiments::speculative::store::AUTO_OFF_PREDICTED.into()),
            tps_samples: None,
            tps_mean: None,
            tps_std: None,
            speedup_samples: None,
            speedup_mean: None,
            speedup_std: None,
            predicted_speedup: Some(0.91),
            ..SpecBenchRow::example()
        });
        let d = tempfile::tempdir().unwrap();
        write_charts(d.path(), &rows).unwrap();
        let svg = std::fs::read_to_string(d.path().join("speedup-draft-model.svg")).unwrap();
        assert!(
            svg.contains("code: auto→off (predicted ≤ 1)"),
            "legend names the decision"
        );
        // Nothing is plotted for it: the x axis still starts at k = 1 (no k = 0 tick),
        // and no "1.000" value appears anywhere.
        assert!(!svg.contains(">\n0\n<") && !svg.contains("1.000"));
    }
}
