//! The frontier chart: quality vs decode tok/s, one point per arm, marker **area
//! proportional to the file's bytes**, error bars on both axes (x: ±1 std of the
//! tg repetitions; y: PPL/KLD ± their standard error, accuracy: Wilson 95 %),
//! and the Pareto frontier (arms no other arm beats on both axes) as a dashed line.
//! Hollow markers are arms above the source's precision (they carry only the
//! source's information). Drawn by one function for PNG and SVG
//! ([`crate::present::chart::render_both`]).

use super::table::FrontierRow;
use crate::experiments::frontier::quant::Relation;
use crate::present::chart::{
    ChartError, ChartFiles, HEIGHT, WIDTH, draw_legend, ensure_font, render_both,
};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

type DrawResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The y axis of a frontier chart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Quality {
    /// Perplexity on a dataset (lower is better).
    Ppl(String),
    /// Mean KLD vs the source on a dataset (lower is better).
    Kld(String),
    /// Task accuracy (higher is better).
    Task(String),
}

impl Quality {
    /// File-name slug (`ppl-wiki`, `kld-wiki`, `gsm8k`).
    pub fn slug(&self) -> String {
        match self {
            Quality::Ppl(d) => format!("ppl-{d}"),
            Quality::Kld(d) => format!("kld-{d}"),
            Quality::Task(t) => t.clone(),
        }
    }

    /// Axis label.
    pub fn label(&self) -> String {
        match self {
            Quality::Ppl(d) => format!("perplexity on {d} (± std. error; lower is better)"),
            Quality::Kld(d) => {
                format!("mean KLD vs the source (not drawn) on {d}, nats (± s.e.; lower is better)")
            }
            Quality::Task(t) => format!("{t} accuracy, % (Wilson 95% CI; higher is better)"),
        }
    }

    fn higher_is_better(&self) -> bool {
        matches!(self, Quality::Task(_))
    }

    /// A row's value on this axis with its error bar, when measured.
    pub fn point(&self, r: &FrontierRow) -> Option<QualityPoint> {
        match self {
            Quality::Ppl(d) => {
                let p = r.ppl.iter().find(|(n, _)| n == d)?.1.as_ref()?;
                Some(QualityPoint {
                    value: p.ppl,
                    low: p.ppl - p.ppl_unc,
                    high: p.ppl + p.ppl_unc,
                })
            }
            Quality::Kld(d) => {
                let p = r.ppl.iter().find(|(n, _)| n == d)?.1.as_ref()?;
                let k = p.kld.as_ref()?;
                Some(QualityPoint {
                    value: k.mean,
                    low: k.mean - k.mean_unc,
                    high: k.mean + k.mean_unc,
                })
            }
            Quality::Task(t) => {
                let x = r.tasks.iter().find(|(n, _)| n == t)?.1.as_ref()?;
                Some(QualityPoint {
                    value: x.accuracy * 100.0,
                    low: x.ci_low * 100.0,
                    high: x.ci_high * 100.0,
                })
            }
        }
    }
}

/// A row's value on a quality axis with its error bar, in the axis's unit
/// (PPL; KLD in nats; task accuracy in %).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QualityPoint {
    /// The measured value (PPL, mean KLD, or accuracy).
    pub value: f64,
    /// Bottom of the error bar: value − s.e. (PPL, KLD) or the Wilson 95% low (tasks).
    pub low: f64,
    /// Top of the error bar: value + s.e. (PPL, KLD) or the Wilson 95% high (tasks).
    pub high: f64,
}

/// Every quality axis with at least one arm that has both speed and that quality.
pub fn qualities(rows: &[FrontierRow]) -> Vec<Quality> {
    let mut qs = Vec::new();
    if let Some(r) = rows.first() {
        for (d, _) in &r.ppl {
            qs.push(Quality::Ppl(d.clone()));
            qs.push(Quality::Kld(d.clone()));
        }
        for (t, _) in &r.tasks {
            qs.push(Quality::Task(t.clone()));
        }
    }
    qs.retain(|q| {
        rows.iter()
            .any(|r| r.speed.is_some() && q.point(r).is_some())
    });
    qs
}

struct Pt<'a> {
    row: &'a FrontierRow,
    x: f64,
    xs: f64,
    y: QualityPoint,
}

/// Indices of the Pareto-optimal points: faster-or-equal and better-or-equal
/// than every other point on at least one axis.
fn pareto(pts: &[(f64, f64)], higher_better: bool) -> Vec<usize> {
    let better = |a: f64, b: f64| if higher_better { a >= b } else { a <= b };
    let strictly = |a: f64, b: f64| if higher_better { a > b } else { a < b };
    (0..pts.len())
        .filter(|&i| {
            !pts.iter().enumerate().any(|(j, p)| {
                j != i
                    && p.0 >= pts[i].0
                    && better(p.1, pts[i].1)
                    && (p.0 > pts[i].0 || strictly(p.1, pts[i].1))
            })
        })
        .collect()
}

/// The corner whose legend-sized box (the outer 45 % of the width × 30 % of the
/// height) covers the fewest points, error bars and labels (a label runs about 15 %
/// of the width right of its point), so the legend hides no arm; with the count of
/// what it still covers.
fn emptiest_corner(
    pts: &[Pt],
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> (usize, SeriesLabelPosition) {
    let (w, h) = (0.45 * (x1 - x0), 0.30 * (y1 - y0));
    let label_w = 0.15 * (x1 - x0);
    let label_h = 0.05 * (y1 - y0);
    let covered = |left: bool, top: bool| {
        let (xa, xb) = if left { (x0, x0 + w) } else { (x1 - w, x1) };
        let (ya, yb) = if top { (y1 - h, y1) } else { (y0, y0 + h) };
        pts.iter()
            .filter(|p| {
                p.x + p.xs.max(label_w) >= xa
                    && p.x - p.xs <= xb
                    && p.y.high.max(p.y.value + label_h) >= ya
                    && p.y.low <= yb
            })
            .count()
    };
    [
        (covered(false, true), SeriesLabelPosition::UpperRight),
        (covered(true, true), SeriesLabelPosition::UpperLeft),
        (covered(false, false), SeriesLabelPosition::LowerRight),
        (covered(true, false), SeriesLabelPosition::LowerLeft),
    ]
    .into_iter()
    .min_by_key(|(n, _)| *n)
    .unwrap_or((0, SeriesLabelPosition::UpperRight))
}

/// Draws the frontier for `quality`.
pub fn draw_frontier<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rows: &[FrontierRow],
    quality: &Quality,
    title: &str,
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    let pts: Vec<Pt> = rows
        .iter()
        .filter_map(|r| {
            let s = r.speed.as_ref()?;
            Some(Pt {
                row: r,
                x: s.tg_tps,
                xs: s.tg_std,
                y: quality.point(r)?,
            })
        })
        .collect();
    if pts.is_empty() {
        return Err(Box::new(ChartError::Empty("frontier")));
    }
    root.fill(&WHITE)?;
    let (mut x0, mut x1) = pts.iter().fold((f64::INFINITY, 0.0f64), |(a, b), p| {
        (a.min(p.x - p.xs), b.max(p.x + p.xs))
    });
    let (mut y0, mut y1) = pts
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.y.low), b.max(p.y.high))
        });
    let (dx, dy) = ((x1 - x0).max(1.0), (y1 - y0).max(y1.abs() * 0.02).max(1e-6));
    x0 = (x0 - 0.12 * dx).max(0.0);
    x1 += 0.12 * dx;
    y0 -= 0.15 * dy;
    y1 += 0.15 * dy;
    if matches!(quality, Quality::Task(_)) {
        y0 = y0.max(0.0);
        y1 = y1.min(100.0);
    }
    // Every corner holds an arm: add headroom above them for the legend.
    let (hidden, _) = emptiest_corner(&pts, (x0, x1), (y0, y1));
    if hidden > 0 && !matches!(quality, Quality::Task(_)) {
        y1 += 0.5 * (y1 - y0);
    }
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    let n = pts[0].row.speed.as_ref().map_or(0, |s| s.tg_n);
    chart
        .configure_mesh()
        .x_desc(format!("decode tok/s (tg, mean ± 1 std, n={n})"))
        .y_desc(quality.label())
        .label_style(("sans-serif", 14))
        .draw()?;
    let max_bytes = pts
        .iter()
        .map(|p| p.row.file_bytes)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let blue = RGBColor(31, 119, 180);
    let red = RGBColor(214, 39, 40);
    let grey = RGBColor(110, 110, 110);
    // Pareto line first, under the markers.
    let xy: Vec<(f64, f64)> = pts.iter().map(|p| (p.x, p.y.value)).collect();
    let mut front: Vec<(f64, f64)> = pareto(&xy, quality.higher_is_better())
        .into_iter()
        .map(|i| xy[i])
        .collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    if front.len() > 1 {
        chart
            .draw_series(DashedLineSeries::new(front, 6, 4, grey.stroke_width(2)))?
            .label("Pareto frontier (no arm is both faster and better)")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], grey.stroke_width(2))
            });
    }
    for p in &pts {
        let color = match p.row.relation {
            Relation::Source => red,
            _ => blue,
        };
        chart.draw_series(std::iter::once(ErrorBar::new_horizontal(
            p.y.value,
            p.x - p.xs,
            p.x,
            p.x + p.xs,
            color.stroke_width(2),
            8,
        )))?;
        chart.draw_series(std::iter::once(ErrorBar::new_vertical(
            p.x,
            p.y.low,
            p.y.value,
            p.y.high,
            color.stroke_width(2),
            8,
        )))?;
        // Area ∝ bytes: radius ∝ sqrt(bytes).
        let r = (26.0 * (p.row.file_bytes as f64 / max_bytes).sqrt()).max(3.0) as i32;
        let style = if p.row.relation == Relation::Above {
            color.stroke_width(2)
        } else {
            color.mix(0.45).filled()
        };
        chart.draw_series(std::iter::once(Circle::new((p.x, p.y.value), r, style)))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("{} {:.2} GB", p.row.arm, p.row.file_bytes as f64 / 1e9),
            (p.x, p.y.value),
            ("sans-serif", 14).into_font().color(&BLACK).pos(
                plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Left,
                    plotters::style::text_anchor::VPos::Bottom,
                ),
            ),
        )))?;
    }
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
        .label("source (filled red)")
        .legend(move |(x, y)| Circle::new((x + 10, y), 6, red.mix(0.45).filled()));
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
        .label("below source: real damage (filled)")
        .legend(move |(x, y)| Circle::new((x + 10, y), 6, blue.mix(0.45).filled()));
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
        .label("above source: source's information only (hollow)")
        .legend(move |(x, y)| Circle::new((x + 10, y), 6, blue.stroke_width(2)));
    draw_legend(&mut chart, emptiest_corner(&pts, (x0, x1), (y0, y1)).1, 13)?;
    root.draw(&Text::new(
        "marker area ∝ file bytes",
        (80, HEIGHT as i32 - 18),
        ("sans-serif", 13).into_font().color(&grey),
    ))?;
    root.present()?;
    Ok(())
}

/// Renders `<stem>.png` and `<stem>.svg` for `quality`.
///
/// # Errors
/// [`ChartError`] naming the file, or `Empty` when no arm has both figures.
pub fn frontier_chart(
    stem: &Path,
    rows: &[FrontierRow],
    quality: &Quality,
    title: &str,
) -> Result<ChartFiles, ChartError> {
    render_both(
        stem,
        |r| draw_frontier(r, rows, quality, title),
        |r| draw_frontier(r, rows, quality, title),
    )
}

/// Renders the chart to an SVG string (for the app's Frontier page).
///
/// # Errors
/// [`ChartError`].
pub fn frontier_svg(
    rows: &[FrontierRow],
    quality: &Quality,
    title: &str,
) -> Result<String, ChartError> {
    ensure_font();
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (WIDTH, HEIGHT)).into_drawing_area();
        draw_frontier(&root, rows, quality, title).map_err(|e| ChartError::Draw {
            path: "<svg>".into(),
            msg: e.to_string(),
        })?;
    }
    Ok(s)
}

/// One arm on the tokens-per-joule chart: its decode energy, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub struct EnergyPoint {
    /// The arm's weight format (`Q4_K_M`).
    pub arm: String,
    /// The run that measured it (the speed cell's or the bench run's).
    pub run_id: i64,
    /// Weight bytes streamed per decode step.
    pub streamed_bytes: u64,
    /// Generated tokens per joule (1 ÷ J/token); `None`: not measured.
    pub tokens_per_joule: Option<f64>,
    /// Tokens per watt-hour as stored (3600 ÷ J/token).
    pub tokens_per_wh: Option<f64>,
    /// Why there is no figure, when there is none.
    pub reason: Option<String>,
}

impl EnergyPoint {
    /// A point from a stored J/token (`None`, zero or negative: not measured, with
    /// `reason`).
    pub fn new(
        arm: String,
        run_id: i64,
        streamed_bytes: u64,
        j_per_token: Option<f64>,
        tokens_per_wh: Option<f64>,
        reason: Option<String>,
    ) -> EnergyPoint {
        let tpj = j_per_token
            .filter(|j| j.is_finite() && *j > 0.0)
            .map(|j| 1.0 / j);
        EnergyPoint {
            arm,
            run_id,
            streamed_bytes,
            tokens_per_joule: tpj,
            tokens_per_wh: tpj.and(tokens_per_wh),
            reason: if tpj.is_some() {
                None
            } else {
                Some(reason.unwrap_or_else(|| "no energy figure stored".into()))
            },
        }
    }
}

/// The chart's points: every arm with a speed cell, in row order.
pub fn energy_points(rows: &[FrontierRow]) -> Vec<EnergyPoint> {
    rows.iter()
        .filter(|r| r.speed.is_some())
        .map(|r| {
            let e = r.energy.as_ref();
            EnergyPoint::new(
                r.arm.clone(),
                e.map_or(0, |e| e.run_id),
                r.streamed_bytes,
                e.and_then(|e| e.j_per_token),
                e.and_then(|e| e.tokens_per_wh),
                Some(
                    e.and_then(|e| e.reason.clone())
                        .unwrap_or_else(|| super::table::NO_RECORDING.to_string()),
                ),
            )
        })
        .collect()
}

/// The distinct reasons of the points without a figure, joined.
pub fn energy_reasons(points: &[EnergyPoint]) -> String {
    let mut r: Vec<&str> = Vec::new();
    for p in points {
        if let Some(w) = p.reason.as_deref().filter(|w| !r.contains(w)) {
            r.push(w);
        }
    }
    r.join("; ")
}

/// Characters per line of a chart's wrapped reason text (13–14 px sans-serif on a
/// 1000 px wide chart).
const WRAP_CHARS: usize = 120;

/// `text` broken at spaces into lines of at most `width` characters (a longer word
/// stays whole on its own line): a reason is drawn whole, never cut off.
fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Draws generated tokens per joule (tg) against the bytes each arm streams per
/// token, one labelled point per arm, from measured energy only. Arms without a
/// figure are listed below the plot with the reason; with none measured the chart
/// says "not measured: <reason>" instead of an empty axis.
pub fn draw_tokens_per_joule<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    points: &[EnergyPoint],
    title: &str,
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    if points.is_empty() {
        return Err(Box::new(ChartError::Empty("tokens per joule")));
    }
    root.fill(&WHITE)?;
    let grey = RGBColor(110, 110, 110);
    let measured: Vec<(&EnergyPoint, f64, f64)> = points
        .iter()
        .filter_map(|p| Some((p, p.streamed_bytes as f64 / 1e9, p.tokens_per_joule?)))
        .collect();
    let missing: Vec<&EnergyPoint> = points
        .iter()
        .filter(|p| p.tokens_per_joule.is_none())
        .collect();
    let (_, h) = root.dim_in_pixel();
    if measured.is_empty() {
        root.draw(&Text::new(
            title.to_string(),
            (20, 30),
            ("sans-serif", 22).into_font().color(&BLACK),
        ))?;
        root.draw(&Text::new(
            "Tokens per joule (tg): not measured".to_string(),
            (20, h as i32 / 2 - 20),
            ("sans-serif", 22),
        ))?;
        let why = format!("not measured: {}", energy_reasons(points));
        for (i, line) in wrap_words(&why, WRAP_CHARS).iter().enumerate() {
            root.draw(&Text::new(
                line.clone(),
                (20, h as i32 / 2 + 12 + 18 * i as i32),
                ("sans-serif", 14),
            ))?;
        }
        root.present()?;
        return Ok(());
    }
    let foot_lines: Vec<String> = missing
        .iter()
        .flat_map(|p| {
            wrap_words(
                &format!(
                    "{}: not measured: {}",
                    p.arm,
                    p.reason.as_deref().unwrap_or("no energy figure stored")
                ),
                WRAP_CHARS,
            )
        })
        .collect();
    let (plot, foot) = root.split_vertically(h.saturating_sub(30 + 18 * foot_lines.len() as u32));
    let (x0, x1) = measured.iter().fold((f64::INFINITY, 0.0f64), |(a, b), m| {
        (a.min(m.1), b.max(m.1))
    });
    let y1 = measured.iter().map(|m| m.2).fold(0.0f64, f64::max);
    let dx = (x1 - x0).max(x1 * 0.1).max(1e-3);
    let mut chart = ChartBuilder::on(&plot)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((x0 - 0.15 * dx).max(0.0)..x1 + 0.25 * dx, 0.0..y1 * 1.2)?;
    chart
        .configure_mesh()
        .x_desc("weight GB streamed per generated token (10^9 B)")
        .y_desc("generated tokens per joule (tg; 1 ÷ J/token)")
        .label_style(("sans-serif", 14))
        .draw()?;
    let blue = RGBColor(31, 119, 180);
    for (p, x, y) in &measured {
        chart.draw_series(std::iter::once(Circle::new((*x, *y), 6, blue.filled())))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("{} {:.3} tok/J", p.arm, y),
            (*x, *y),
            ("sans-serif", 14).into_font().color(&BLACK).pos(
                plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Left,
                    plotters::style::text_anchor::VPos::Bottom,
                ),
            ),
        )))?;
    }
    for (i, line) in foot_lines.iter().enumerate() {
        foot.draw(&Text::new(
            line.clone(),
            (80, 4 + 18 * i as i32),
            ("sans-serif", 13).into_font().color(&grey),
        ))?;
    }
    root.present()?;
    Ok(())
}

/// Renders `<stem>.png` and `<stem>.svg` of [`draw_tokens_per_joule`].
///
/// # Errors
/// [`ChartError`] naming the file, or `Empty` without points.
pub fn tokens_per_joule_chart(
    stem: &Path,
    points: &[EnergyPoint],
    title: &str,
) -> Result<ChartFiles, ChartError> {
    render_both(
        stem,
        |r| draw_tokens_per_joule(r, points, title),
        |r| draw_tokens_per_joule(r, points, title),
    )
}

/// [`draw_tokens_per_joule`] to an SVG string.
///
/// # Errors
/// [`ChartError`], or `Empty` without points.
pub fn tokens_per_joule_svg(points: &[EnergyPoint], title: &str) -> Result<String, ChartError> {
    if points.is_empty() {
        return Err(ChartError::Empty("tokens per joule"));
    }
    ensure_font();
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (WIDTH, HEIGHT)).into_drawing_area();
        draw_tokens_per_joule(&root, points, title).map_err(|e| ChartError::Draw {
            path: "<svg>".into(),
            msg: e.to_string(),
        })?;
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::frontier::SpeedSummary;
    use crate::measure::evals::ppl::{PplConfig, PplResult};

    fn row(arm: &str, rel: Relation, bytes: u64, tps: f64, ppl: f64) -> FrontierRow {
        FrontierRow {
            arm: arm.into(),
            relation: rel,
            file_bytes: bytes,
            streamed_bytes: bytes,
            bits_per_weight: 4.0,
            sha256: arm.into(),
            speed: Some(SpeedSummary {
                tg_tps: tps,
                tg_std: 0.5,
                tg_n: 5,
                tg_ceiling: Some(2.0 * tps),
                tg_achieved: Some(0.5),
                pp_tps: 100.0,
                pp_std: 1.0,
                pp_ceiling: Some(200.0),
                pp_achieved: Some(0.5),
                bandwidth_gbps: Some(40.0),
                bench_ids: vec![],
            }),
            ppl: vec![(
                "wiki".into(),
                Some(PplResult {
                    config: PplConfig {
                        dataset: "wiki".into(),
                        n_ctx: 512,
                        n_chunks: 4,
                    },
                    text_sha256: String::new(),
                    n_tokens_file: 1,
                    n_chunks: 4,
                    n_scored: 1020,
                    ppl,
                    ppl_unc: 0.1,
                    nll_mean: ppl.ln(),
                    kld: None,
                    elapsed_ns: 1,
                }),
            )],
            tasks: vec![],
            energy: None,
        }
    }

    #[test]
    fn pareto_keeps_non_dominated_points() {
        // (speed, ppl): b is faster and better than c; a is slow but best.
        let pts = [(10.0, 9.0), (30.0, 9.5), (20.0, 9.8)];
        assert_eq!(pareto(&pts, false), vec![0, 1]);
        assert_eq!(pareto(&[(1.0, 50.0), (2.0, 40.0)], true), vec![0, 1]);
    }

    #[test]
    fn the_legend_gets_a_corner_with_no_arm_or_headroom_above_them() {
        // Arms in all four corners (the MLX frontier's shape: slow and fast arms at
        // both low and high damage).
        let rows = [
            row("a", Relation::Below, 1, 3.0, 9.0),
            row("b", Relation::Below, 1, 3.0, 12.0),
            row("c", Relation::Below, 1, 30.0, 9.0),
            row("d", Relation::Below, 1, 30.0, 12.0),
        ];
        let q = Quality::Ppl("wiki".into());
        let pts: Vec<Pt> = rows
            .iter()
            .map(|r| Pt {
                row: r,
                x: r.speed.as_ref().unwrap().tg_tps,
                xs: 0.5,
                y: q.point(r).unwrap(),
            })
            .collect();
        let (x, y) = ((0.0, 34.0), (8.5, 12.5));
        assert_eq!(emptiest_corner(&pts, x, y).0, 1);
        // The chart's headroom: half the range again above.
        let (hidden, _) = emptiest_corner(&pts, x, (8.5, 12.5 + 0.5 * 4.0));
        assert_eq!(hidden, 0);
        // One empty corner is found without headroom.
        let (n, pos) = emptiest_corner(&pts[..3], x, y);
        assert_eq!(n, 0);
        assert!(matches!(pos, SeriesLabelPosition::UpperRight));
    }

    #[test]
    fn chart_files_are_written_and_name_the_axes() {
        let rows = vec![
            row("F16", Relation::Above, 3_000_000_000, 12.0, 9.0),
            row("Q4_K_M", Relation::Source, 1_000_000_000, 30.0, 9.0),
            row("Q2_K", Relation::Below, 700_000_000, 38.0, 12.0),
        ];
        assert_eq!(qualities(&rows), vec![Quality::Ppl("wiki".into())]);
        let d = tempfile::tempdir().unwrap();
        let ChartFiles { png, svg } = frontier_chart(
            &d.path().join("f"),
            &rows,
            &Quality::Ppl("wiki".into()),
            "t",
        )
        .unwrap();
        assert_eq!(&std::fs::read(&png).unwrap()[..4], b"\x89PNG");
        let s = std::fs::read_to_string(&svg).unwrap();
        assert!(
            s.contains("perplexity on wiki")
                && s.contains("Q2_K 0.70 GB")
                && s.contains("Pareto frontier"),
            "{}",
            &s[..200]
        );
        assert!(frontier_svg(&rows, &Quality::Task("gsm8k".into()), "t").is_err());
    }
}

#[cfg(test)]
mod wrap_tests {
    use super::wrap_words;

    #[test]
    fn wrapping_keeps_every_word_in_order_within_the_width() {
        let text = "not measured: RAPL not readable here: /sys/class/powercap absent; gpu_energy: no NVIDIA driver";
        let lines = wrap_words(text, 30);
        assert_eq!(lines.join(" "), text);
        assert!(lines.iter().all(|l| l.chars().count() <= 30), "{lines:?}");
        assert_eq!(
            lines[0], "not measured: RAPL not",
            "the first line breaks before the word that would pass 30"
        );
        // A word longer than the width stays whole.
        assert_eq!(
            wrap_words("a /a/very/long/path b", 5),
            ["a", "/a/very/long/path", "b"]
        );
        assert!(wrap_words("", 10).is_empty());
    }
}
