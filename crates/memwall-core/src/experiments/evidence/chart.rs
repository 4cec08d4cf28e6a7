//! Charts of the roofline-evidence experiments, from stored or analysed rows.

use crate::experiments::evidence::batch::BatchRow;
use crate::experiments::evidence::depth::DepthRow;
use crate::experiments::evidence::kv::KvVerify;
use crate::experiments::evidence::threads::ThreadsRow;
use crate::present::chart::{
    ChartError, ChartFiles, DrawResult, PALETTE, draw_legend, render_both,
};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// A short model label for crowded axes: the file stem without `-instruct` and the
/// quantization suffix (`qwen2.5-coder-0.5b-instruct-q4_k_m.gguf` → `qwen2.5-coder-0.5b`).
fn short(model: &str) -> String {
    let stem = Path::new(model)
        .file_stem()
        .map_or(model.to_string(), |s| s.to_string_lossy().into_owned());
    let lower = stem.to_ascii_lowercase();
    let cut = ["-instruct", ".q", "-q", "-f16", "-bf16"]
        .iter()
        .filter_map(|p| lower.find(p))
        .min()
        .unwrap_or(stem.len());
    stem[..cut].to_string()
}

/// KV bytes per token: predicted (formula) vs measured (state growth, metadata removed)
/// vs the wrong method (peak-RSS growth), one group of bars per model × cache type.
pub fn draw_kv<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rows: &[KvVerify],
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let max = rows
        .iter()
        .flat_map(|r| {
            [
                r.predicted_bytes_per_token,
                r.measured_kv_bytes_per_token,
                r.rss_bytes_per_token.unwrap_or(0.0),
            ]
        })
        .fold(1.0f64, f64::max);
    let n = rows.len();
    // Four segments per group: three bars and a gap; the label sits under the middle bar.
    let mut chart = ChartBuilder::on(root)
        .caption(
            "KV cache bytes per token: formula vs engine state vs peak RSS",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(
            (0..4 * n.max(1)).into_segmented(),
            (1.0..max * 3.0).log_scale(),
        )?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(4 * n.max(1))
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(k) if k % 4 == 1 => rows.get(k / 4).map_or(String::new(), |r| {
                format!("{} {}", short(&r.model), r.cache_type)
            }),
            _ => String::new(),
        })
        .x_label_style(("sans-serif", 10))
        .y_desc("bytes per token (log)")
        .draw()?;
    // A series: its label, colour, and the value it plots from a row.
    type Series<'a> = (&'a str, RGBColor, fn(&KvVerify) -> Option<f64>);
    let series: [Series; 3] = [
        ("predicted (formula)", PALETTE[0], |r| {
            Some(r.predicted_bytes_per_token)
        }),
        (
            "measured (state growth − cell metadata)",
            PALETTE[2],
            |r| Some(r.measured_kv_bytes_per_token),
        ),
        (
            "peak RSS growth ÷ tokens (wrong method)",
            PALETTE[3],
            |r| r.rss_bytes_per_token,
        ),
    ];
    for (si, (label, color, get)) in series.iter().enumerate() {
        let color = *color;
        chart
            .draw_series(rows.iter().enumerate().filter_map(|(i, r)| {
                let v = get(r)?;
                let k = 4 * i + si;
                Some(Rectangle::new(
                    [
                        (SegmentValue::Exact(k), 1.0),
                        (SegmentValue::Exact(k + 1), v.max(1.0)),
                    ],
                    color.filled(),
                ))
            }))?
            .label(*label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 13)?;
    root.present()?;
    Ok(())
}

/// Batch rows grouped into one series per (model, depth, threads), in order of first
/// appearance, each sorted by b, labelled "model @ dD" (and "tT" when threads vary), so
/// that a sweep over several depths draws one line per depth instead of one zig-zag.
fn batch_groups(rows: &[BatchRow]) -> Vec<(String, Vec<&BatchRow>)> {
    let mut keys: Vec<(&str, i64, i64)> = Vec::new();
    for r in rows {
        let k = (r.model_type.as_str(), r.n_depth, r.n_threads);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let many_threads = keys.iter().any(|k| k.2 != keys[0].2);
    keys.into_iter()
        .map(|(m, d, t)| {
            let mut pts: Vec<&BatchRow> = rows
                .iter()
                .filter(|r| r.model_type == m && r.n_depth == d && r.n_threads == t)
                .collect();
            pts.sort_by_key(|r| r.n_seqs);
            let mut label = format!("{m} @ d{d}");
            if many_threads {
                label.push_str(&format!(" t{t}"));
            }
            (label, pts)
        })
        .collect()
}

/// Batching: aggregate tok/s and per-token-read bandwidth vs b, with STREAM as a
/// horizontal line on the bandwidth axis.
pub fn draw_batch<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rows: &[BatchRow],
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(root.dim_in_pixel().0 / 2);
    let max_b = rows.iter().map(|r| r.n_seqs).max().unwrap_or(1) as f64;
    let max_t = rows
        .iter()
        .map(|r| r.aggregate_tps + r.aggregate_std)
        .fold(1.0, f64::max)
        * 1.15;
    let max_bw = rows
        .iter()
        .flat_map(|r| [r.per_token_read_gbps, r.stream_gbps].into_iter().flatten())
        .fold(1.0, f64::max)
        * 1.15;
    let groups = batch_groups(rows);
    let mut c1 = ChartBuilder::on(&left)
        .caption("aggregate decode tok/s vs batch", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.5..max_b + 0.5, 0.0..max_t)?;
    c1.configure_mesh()
        .x_desc("parallel sequences b")
        .y_desc("tok/s (sum)")
        .draw()?;
    let mut c2 = ChartBuilder::on(&right)
        .caption("per-token-read bandwidth vs batch", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.5..max_b + 0.5, 0.0..max_bw)?;
    c2.configure_mesh()
        .x_desc("parallel sequences b")
        .y_desc("GB/s")
        .draw()?;
    for (mi, (m, pts)) in groups.iter().enumerate() {
        let color = PALETTE[mi % PALETTE.len()];
        c1.draw_series(LineSeries::new(
            pts.iter().map(|r| (r.n_seqs as f64, r.aggregate_tps)),
            color.stroke_width(2),
        ))?
        .label(m.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        c1.draw_series(pts.iter().map(|r| {
            ErrorBar::new_vertical(
                r.n_seqs as f64,
                r.aggregate_tps - r.aggregate_std,
                r.aggregate_tps,
                r.aggregate_tps + r.aggregate_std,
                color.stroke_width(2),
                8,
            )
        }))?;
        let read: Vec<(f64, f64)> = pts
            .iter()
            .filter_map(|r| r.per_token_read_gbps.map(|b| (r.n_seqs as f64, b)))
            .collect();
        c2.draw_series(LineSeries::new(read.clone(), color.stroke_width(2)))?
            .label(format!("{m} per-token-read"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        c2.draw_series(read.into_iter().map(|p| Circle::new(p, 4, color.filled())))?;
    }
    if let Some(s) = rows.first().and_then(|r| r.stream_gbps) {
        c2.draw_series(DashedLineSeries::new(
            vec![(0.5, s), (max_b + 0.5, s)],
            8,
            5,
            BLACK.stroke_width(2),
        ))?
        .label(format!("STREAM {s:.1} GB/s"))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    }
    for c in [&mut c1, &mut c2] {
        draw_legend(c, SeriesLabelPosition::UpperLeft, 12)?;
    }
    root.present()?;
    Ok(())
}

/// The roofline: attainable GFLOP/s = min(peak, AI × bandwidth) on log-log axes, with
/// each batch size's measured point (AI, achieved GFLOP/s) walking toward the ridge.
pub fn draw_batch_roofline<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rows: &[BatchRow],
    peak_gflops: f64,
    peak_label: &str,
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let Some(bw) = rows.first().and_then(|r| r.stream_gbps) else {
        return Err(Box::new(ChartError::Empty(
            "batch roofline: no STREAM bandwidth",
        )));
    };
    let ridge = peak_gflops / bw;
    let x_max =
        (ridge * 4.0).max(rows.iter().filter_map(|r| r.intensity).fold(1.0, f64::max) * 2.0);
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("roofline: STREAM {bw:.1} GB/s, {peak_label} peak {peak_gflops:.0} GFLOP/s"),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (0.1..x_max).log_scale(),
            (1.0..peak_gflops * 2.0).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("arithmetic intensity (FLOP/byte)")
        .y_desc("GFLOP/s")
        .draw()?;
    let roof: Vec<(f64, f64)> = (0..=200)
        .map(|i| 0.1 * (x_max / 0.1).powf(i as f64 / 200.0))
        .map(|x| (x, (x * bw).min(peak_gflops)))
        .collect();
    chart
        .draw_series(LineSeries::new(roof, BLACK.stroke_width(2)))?
        .label(format!(
            "min(peak, AI × bandwidth); ridge {ridge:.1} FLOP/B"
        ))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    for (mi, (m, pts)) in batch_groups(rows).iter().enumerate() {
        let color = PALETTE[mi % PALETTE.len()];
        let pts: Vec<(i64, f64, f64)> = pts
            .iter()
            .filter_map(|r| Some((r.n_seqs, r.intensity?, r.achieved_gflops?)))
            .collect();
        chart
            .draw_series(
                pts.iter()
                    .map(|&(_, i, g)| Circle::new((i, g), 5, color.filled())),
            )?
            .label(format!(
                "{m}: b = {}",
                pts.iter()
                    .map(|(b, _, _)| b.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .legend(move |(x, y)| Circle::new((x + 10, y), 5, color.filled()));
        chart.draw_series(pts.iter().map(|&(b, i, g)| {
            Text::new(
                format!("b={b}"),
                (i, g * 1.15),
                ("sans-serif", 12).into_font(),
            )
        }))?;
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 12)?;
    root.present()?;
    Ok(())
}

/// Decode slowdown vs depth, stacked into the part KV bytes explain and the rest.
pub fn draw_depth<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rows: &[DepthRow],
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let tg: Vec<&DepthRow> = rows
        .iter()
        .filter(|r| r.phase == "tg" && r.n_depth > 0)
        .collect();
    let n = tg.len();
    let max = tg
        .iter()
        .map(|r| r.slowdown.max(r.explained))
        .fold(0.01, f64::max)
        * 100.0
        * 1.2;
    let min = tg.iter().map(|r| r.rest.min(0.0)).fold(0.0, f64::min) * 100.0 * 1.2;
    let mut chart = ChartBuilder::on(root)
        .caption(
            "decode slowdown vs depth: KV bytes vs the rest",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(60)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..n.max(1) as f64, min..max)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        // Float ticks do not land on bar centres: each bar names its depth above it.
        .x_label_formatter(&|_| String::new())
        .x_desc("one bar per model and depth (labelled above the bar)")
        .y_desc("slowdown vs depth 0 (%)")
        .draw()?;
    let kv_color = PALETTE[0];
    let rest_color = PALETTE[1];
    chart
        .draw_series(tg.iter().enumerate().map(|(i, r)| {
            Rectangle::new(
                [(i as f64 + 0.2, 0.0), (i as f64 + 0.8, r.explained * 100.0)],
                kv_color.filled(),
            )
        }))?
        .label("explained by KV bytes ((W + d·kv) ÷ W)")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], kv_color.filled()));
    chart
        .draw_series(tg.iter().enumerate().map(|(i, r)| {
            let (a, b) = (r.explained * 100.0, (r.explained + r.rest) * 100.0);
            Rectangle::new(
                [(i as f64 + 0.2, a.min(b)), (i as f64 + 0.8, a.max(b))],
                rest_color.filled(),
            )
        }))?
        .label("rest (attention compute, other)")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], rest_color.filled()));
    chart.draw_series(tg.iter().enumerate().map(|(i, r)| {
        Text::new(
            format!(
                "{} d{}: {:.1}%",
                r.model_type,
                r.n_depth,
                r.slowdown * 100.0
            ),
            (
                i as f64 + 0.2,
                r.slowdown.max(r.explained) * 100.0 + max * 0.03,
            ),
            ("sans-serif", 12).into_font(),
        )
    }))?;
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 13)?;
    root.present()?;
    Ok(())
}

/// Implied decode bandwidth vs threads, with STREAM at each thread count.
pub fn draw_threads<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rows: &[ThreadsRow],
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let max_t = rows.iter().map(|r| r.n_threads).max().unwrap_or(1) as f64;
    let max = rows
        .iter()
        .flat_map(|r| [r.implied_gbps.unwrap_or(0.0), r.stream_gbps.unwrap_or(0.0)])
        .fold(1.0, f64::max)
        * 1.2;
    let mut chart = ChartBuilder::on(root)
        .caption(
            "achievable bandwidth depends on who asks",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0.5..max_t + 0.5, 0.0..max)?;
    chart
        .configure_mesh()
        .x_desc("threads")
        .y_desc("GB/s")
        // Thread counts are integers: label only the ticks that are.
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 {
                format!("{x:.0}")
            } else {
                String::new()
            }
        })
        .draw()?;
    let mut models: Vec<String> = rows.iter().map(|r| r.model_type.clone()).collect();
    models.sort();
    models.dedup();
    for (mi, m) in models.iter().enumerate() {
        let color = PALETTE[mi % PALETTE.len()];
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| &r.model_type == m)
            .filter_map(|r| Some((r.n_threads as f64, r.implied_gbps?)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(format!("{m}: decode tok/s × bytes/token"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled())))?;
    }
    let mut s: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| Some((r.n_threads as f64, r.stream_gbps?)))
        .collect();
    s.sort_by(|a, b| a.0.total_cmp(&b.0));
    s.dedup();
    chart
        .draw_series(DashedLineSeries::new(
            s.clone(),
            8,
            5,
            BLACK.stroke_width(2),
        ))?
        .label("STREAM triad at the same threads")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    chart.draw_series(s.iter().map(|p| Circle::new(*p, 4, BLACK.filled())))?;
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 13)?;
    root.present()?;
    Ok(())
}

/// Renders [`draw_kv`] to `<stem>.png/.svg`.
///
/// # Errors
/// [`ChartError`].
pub fn kv(stem: &Path, rows: &[KvVerify]) -> Result<ChartFiles, ChartError> {
    render_both(stem, |r| draw_kv(r, rows), |r| draw_kv(r, rows))
}

/// Renders [`draw_batch`] to `<stem>.png/.svg`.
///
/// # Errors
/// [`ChartError`].
pub fn batch(stem: &Path, rows: &[BatchRow]) -> Result<ChartFiles, ChartError> {
    render_both(stem, |r| draw_batch(r, rows), |r| draw_batch(r, rows))
}

/// Renders [`draw_batch_roofline`] to `<stem>.png/.svg`.
///
/// # Errors
/// [`ChartError`].
pub fn batch_roofline(
    stem: &Path,
    rows: &[BatchRow],
    peak: f64,
    label: &str,
) -> Result<ChartFiles, ChartError> {
    render_both(
        stem,
        |r| draw_batch_roofline(r, rows, peak, label),
        |r| draw_batch_roofline(r, rows, peak, label),
    )
}

/// Renders [`draw_depth`] to `<stem>.png/.svg`.
///
/// # Errors
/// [`ChartError`].
pub fn depth(stem: &Path, rows: &[DepthRow]) -> Result<ChartFiles, ChartError> {
    render_both(stem, |r| draw_depth(r, rows), |r| draw_depth(r, rows))
}

/// Renders [`draw_threads`] to `<stem>.png/.svg`.
///
/// # Errors
/// [`ChartError`].
pub fn threads(stem: &Path, rows: &[ThreadsRow]) -> Result<ChartFiles, ChartError> {
    render_both(stem, |r| draw_threads(r, rows), |r| draw_threads(r, rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::evidence::{batch, depth, threads};

    fn kv_rows() -> Vec<KvVerify> {
        [
            "a/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            "b/SmolLM2-135M-Instruct.Q4_1.gguf",
        ]
        .iter()
        .flat_map(|m| {
            ["f16", "q8_0"].map(|c| KvVerify {
                model: m.to_string(),
                cache_type: c.into(),
                n: 1024,
                predicted_bytes_per_token: 12288.0,
                formula_bytes_per_token: 12288,
                state_n: 1,
                state_2n: 2,
                measured_state_bytes_per_token: 12300.0,
                metadata_bytes_per_token: 12.0,
                measured_kv_bytes_per_token: 12288.0,
                ratio: 1.0,
                rss_bytes_per_token: Some(40000.0),
                rss_ratio: Some(3.2),
            })
        })
        .collect()
    }

    fn png_size(p: &Path) -> (u32, u32) {
        let b = std::fs::read(p).unwrap();
        assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
        (
            u32::from_be_bytes(b[16..20].try_into().unwrap()),
            u32::from_be_bytes(b[20..24].try_into().unwrap()),
        )
    }

    #[test]
    fn evidence_charts_render_png_and_svg() {
        let d = tempfile::tempdir().unwrap();
        let ChartFiles { png, svg } = kv(&d.path().join("kv"), &kv_rows()).unwrap();
        assert_eq!(
            png_size(&png),
            (crate::present::chart::WIDTH, crate::present::chart::HEIGHT)
        );
        let s = std::fs::read_to_string(svg).unwrap();
        assert!(
            s.contains("qwen2.5-coder-0.5b f16") && s.contains("SmolLM2-135M q8_0"),
            "short labels under each group"
        );
        let recs: Vec<crate::store::record::BenchRecord> =
            [(1, 0, 60.0), (2, 0, 100.0), (4, 0, 150.0), (1, 512, 50.0)]
                .iter()
                .map(|&(b, d, ts)| crate::store::record::BenchRecord {
                    n_seqs: b,
                    n_depth: d,
                    avg_ts: ts,
                    bytes_per_step: Some(4e8 + d as f64 * 12288.0),
                    implied_bandwidth_gbps: Some(ts * 0.4),
                    ..crate::store::record::BenchRecord::example()
                })
                .collect();
        let b = batch::analyze(&recs);
        assert!(batch(&d.path().join("b"), &b).is_ok());
        assert!(batch_roofline(&d.path().join("r"), &b, 900.0, "int8 dot").is_ok());
        assert!(depth(&d.path().join("d"), &depth::analyze(&recs)).is_ok());
        let t = threads::analyze(&recs, &|_| Some(40.0));
        assert!(threads(&d.path().join("t"), &t).is_ok());
        if let Ok(dir) = std::env::var("MEMWALL_CHART_PREVIEW") {
            for f in std::fs::read_dir(d.path()).unwrap() {
                let f = f.unwrap().path();
                std::fs::copy(&f, Path::new(&dir).join(f.file_name().unwrap())).unwrap();
            }
        }
    }
}
