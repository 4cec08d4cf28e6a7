//! The per-token floor: batch-1 decode time against bytes per token.
//!
//! The bandwidth ceiling says a decode step costs `bytes ÷ bandwidth`. On a GPU a
//! step also pays a fixed cost that does not shrink with the model (kernel launches,
//! synchronisation, sampling), so a small model sits far under its ceiling while a
//! large one comes close. An ordinary least-squares line through the measured points,
//!
//! ```text
//! t_token = t0 + bytes_per_token ÷ BW_eff
//! ```
//!
//! gives that floor `t0` and the bandwidth decode actually sustains, `BW_eff`, with
//! 95 % intervals (Student's t on n − 2 degrees of freedom) and each point predicted
//! from the fit of the others (leave-one-out), so the line's predictive power is
//! shown, not assumed.
//!
//! Points are single-sequence decode rows at depth 0 of one host, one weight format
//! (`quant`), one placement (GPU offload or CPU, and on the CPU one thread count):
//! across formats one line does not hold (dequantisation costs differ per byte), so
//! formats are never mixed. A model file is one point (its latest row). A format
//! needs three distinct sizes for a fit.

use crate::store::record::BenchRecord;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Two-sided 95 % Student's t quantiles for 1…30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// Two-sided 95 % Student's t quantile (normal 1.96 beyond 30 degrees of freedom).
pub fn t975(dof: usize) -> f64 {
    match dof {
        0 => f64::NAN,
        d if d <= 30 => T975[d - 1],
        _ => 1.96,
    }
}

/// What a fit was made over: one host, one weight format, one placement.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FloorScope {
    /// Host name of the rows.
    pub hostname: String,
    /// Weight format (`F16`, `Q4_K_M`, …).
    pub quant: String,
    /// `GPU` (layers offloaded; the GPU's name from the rows) or `CPU, N threads`.
    pub placement: String,
}

/// One model's point: its bytes per token and measured seconds per token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloorPoint {
    /// Model type label (`qwen2 7B F16`).
    pub model_type: String,
    /// Bytes one batch-1 step at depth 0 reads.
    pub bytes_per_token: f64,
    /// Measured seconds per token.
    pub seconds_per_token: f64,
    /// The bench row(s) behind this point.
    pub row_ids: Vec<i64>,
    /// STREAM bandwidth of the row's ceiling, GB/s.
    pub stream_gbps: f64,
}

/// A point under the fit: fitted and leave-one-out predicted seconds per token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FittedPoint {
    /// The measured point.
    pub point: FloorPoint,
    /// `t0 + bytes ÷ BW_eff` of the full fit.
    pub fit_seconds: f64,
    /// The same from a fit without this point (None below four points: two points
    /// leave no freedom to test).
    pub loo_seconds: Option<f64>,
    /// `(loo − measured) ÷ measured × 100`.
    pub loo_error_pct: Option<f64>,
    /// Measured rate ÷ the bandwidth ceiling at the rows' STREAM, %.
    pub achieved_pct: f64,
}

/// The fitted floor of one scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloorFit {
    /// Host, format, placement.
    pub scope: FloorScope,
    /// The fixed cost per token, seconds.
    pub t0_seconds: f64,
    /// Half-width of t0's 95 % interval, seconds.
    pub t0_half95_seconds: f64,
    /// Seconds per byte (1 ÷ BW_eff).
    pub slope_seconds_per_byte: f64,
    /// Half-width of the slope's 95 % interval.
    pub slope_half95: f64,
    /// The bandwidth decode sustains beyond the floor, GB/s (None: a non-positive slope).
    pub bw_eff_gbps: Option<f64>,
    /// BW_eff's 95 % interval from the slope's, GB/s (upper None: unbounded).
    pub bw_eff_95_gbps: (Option<f64>, Option<f64>),
    /// Every point with its fitted and leave-one-out values, by bytes.
    pub points: Vec<FittedPoint>,
}

impl FloorFit {
    /// Decode rate the fit predicts for a model reading `bytes` per token, tok/s.
    pub fn predict_tps(&self, bytes: f64) -> f64 {
        1.0 / (self.t0_seconds + bytes * self.slope_seconds_per_byte)
    }

    /// The largest |leave-one-out error| %, None when not computed.
    pub fn worst_loo_pct(&self) -> Option<f64> {
        self.points
            .iter()
            .filter_map(|p| p.loo_error_pct.map(f64::abs))
            .fold(None, |m, e| Some(m.map_or(e, |m: f64| m.max(e))))
    }

    /// The row ids behind the fit.
    pub fn row_ids(&self) -> Vec<i64> {
        let mut v: Vec<i64> = self
            .points
            .iter()
            .flat_map(|p| p.point.row_ids.iter().copied())
            .collect();
        v.sort();
        v
    }
}

/// Ordinary least squares `y = a + b x`: (a, b, sxx); None when the x values do not
/// spread (fewer than two distinct values).
fn ols(xs: &[f64], ys: &[f64]) -> Option<(f64, f64, f64)> {
    let n = xs.len() as f64;
    let mx = xs.iter().sum::<f64>() / n;
    let my = ys.iter().sum::<f64>() / n;
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    if sxx.is_nan() || sxx <= 0.0 {
        return None;
    }
    let b = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| (x - mx) * (y - my))
        .sum::<f64>()
        / sxx;
    Some((my - b * mx, b, sxx))
}

/// Fits the floor through `points` (one scope); None below three points.
pub fn fit(scope: FloorScope, mut points: Vec<FloorPoint>) -> Option<FloorFit> {
    if points.len() < 3 {
        return None;
    }
    points.sort_by(|a, b| a.bytes_per_token.total_cmp(&b.bytes_per_token));
    let xs: Vec<f64> = points.iter().map(|p| p.bytes_per_token).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.seconds_per_token).collect();
    let (t0, slope, sxx) = ols(&xs, &ys)?;
    let n = xs.len();
    let mx = xs.iter().sum::<f64>() / n as f64;
    let s2 = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| (y - t0 - slope * x).powi(2))
        .sum::<f64>()
        / (n - 2) as f64;
    let t = t975(n - 2);
    let slope_half = t * (s2 / sxx).sqrt();
    let t0_half = t * (s2 * (1.0 / n as f64 + mx * mx / sxx)).sqrt();
    let gbps = |s: f64| (s > 0.0).then(|| 1.0 / s / 1e9);
    let fitted = points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let loo = (n >= 4)
                .then(|| {
                    let (lx, ly): (Vec<f64>, Vec<f64>) = xs
                        .iter()
                        .zip(&ys)
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .map(|(_, (x, y))| (*x, *y))
                        .unzip();
                    ols(&lx, &ly).map(|(a, b, _)| a + b * p.bytes_per_token)
                })
                .flatten();
            FittedPoint {
                point: p.clone(),
                fit_seconds: t0 + slope * p.bytes_per_token,
                loo_seconds: loo,
                loo_error_pct: loo.map(|l| 100.0 * (l - p.seconds_per_token) / p.seconds_per_token),
                achieved_pct: 100.0 * p.bytes_per_token
                    / p.seconds_per_token
                    / (p.stream_gbps * 1e9),
            }
        })
        .collect();
    Some(FloorFit {
        scope,
        t0_seconds: t0,
        t0_half95_seconds: t0_half,
        slope_seconds_per_byte: slope,
        slope_half95: slope_half,
        bw_eff_gbps: gbps(slope),
        bw_eff_95_gbps: (gbps(slope + slope_half), gbps(slope - slope_half)),
        points: fitted,
    })
}

/// The scope a row belongs to, or None when the row is not a batch-1 decode at
/// depth 0 with a positive time and byte count and a STREAM bandwidth.
pub fn scope_of(r: &BenchRecord) -> Option<FloorScope> {
    if !(r.is_decode()
        && r.n_seqs == 1
        && r.n_depth == 0
        && r.avg_ns > 0
        && r.bytes_per_step.is_some_and(|b| b > 0.0)
        && r.bandwidth_gbps.is_some())
    {
        return None;
    }
    let placement = if r.n_gpu_layers > 0 && !r.gpu_info.trim().is_empty() {
        format!("GPU {}", r.gpu_info.trim())
    } else {
        format!("CPU, {} threads", r.n_threads)
    };
    Some(FloorScope {
        hostname: r.hostname.clone(),
        quant: r.quant.clone(),
        placement,
    })
}

/// Every floor the rows allow: one fit per scope with at least three distinct
/// models (model files), in scope order. Each model is one point: its latest row in
/// the scope (the highest id), so every point is one stored row and can be checked
/// against it.
pub fn analyze(rows: &[BenchRecord]) -> Vec<FloorFit> {
    // scope → model file → its latest row.
    let mut by: BTreeMap<FloorScope, BTreeMap<String, &BenchRecord>> = BTreeMap::new();
    for r in rows {
        if let Some(s) = scope_of(r) {
            let e = by
                .entry(s)
                .or_default()
                .entry(r.model_sha256.clone())
                .or_insert(r);
            if r.id > e.id {
                *e = r;
            }
        }
    }
    by.into_iter()
        .filter_map(|(scope, models)| {
            let points = models.into_values().filter_map(point).collect();
            fit(scope, points)
        })
        .collect()
}

/// One row as a point: seconds per token = the mean time of a repetition ÷ n_gen;
/// None for a row without its bytes per step or STREAM bandwidth.
pub fn point(r: &BenchRecord) -> Option<FloorPoint> {
    Some(FloorPoint {
        model_type: r.model_type.clone(),
        bytes_per_token: r.bytes_per_step?,
        seconds_per_token: r.avg_ns as f64 / 1e9 / r.n_gen as f64,
        row_ids: vec![r.id],
        stream_gbps: r.bandwidth_gbps?,
    })
}

/// The fit that applies to a model of format `quant` on `hostname` (GPU placement
/// when `gpu`), if the rows hold one.
pub fn for_model<'a>(
    fits: &'a [FloorFit],
    hostname: &str,
    quant: &str,
    gpu: bool,
) -> Option<&'a FloorFit> {
    fits.iter().find(|f| {
        f.scope.hostname == hostname
            && f.scope.quant.eq_ignore_ascii_case(quant)
            && f.scope.placement.starts_with("GPU") == gpu
    })
}

/// The floor fits of `rows` as the app's Roofline page shows them, one machine at
/// a time ([`crate::store::host::HostKey`]: two machines that share a hostname never
/// mix).
pub fn views(rows: &[BenchRecord]) -> Vec<crate::present::views::FloorView> {
    use crate::present::views::FloorPointView;
    use crate::store::host::HostKey;
    let mut per_host: std::collections::BTreeMap<String, Vec<BenchRecord>> =
        std::collections::BTreeMap::new();
    for r in rows {
        per_host
            .entry(HostKey::of_bench(r).label())
            .or_default()
            .push(r.clone());
    }
    per_host
        .into_iter()
        .flat_map(|(host, v)| {
            analyze(&v)
                .into_iter()
                .map(move |f| crate::present::views::FloorView {
                    host: host.clone(),
                    quant: f.scope.quant.clone(),
                    placement: f.scope.placement.clone(),
                    t0_ms: f.t0_seconds * 1e3,
                    t0_half95_ms: f.t0_half95_seconds * 1e3,
                    bw_eff_gbps: f.bw_eff_gbps,
                    bw_eff_95_gbps: f.bw_eff_95_gbps,
                    worst_loo_pct: f.worst_loo_pct(),
                    points: f
                        .points
                        .iter()
                        .map(|p| FloorPointView {
                            model_type: p.point.model_type.clone(),
                            gb_per_token: p.point.bytes_per_token / 1e9,
                            measured_ms: p.point.seconds_per_token * 1e3,
                            fit_ms: p.fit_seconds * 1e3,
                            loo_ms: p.loo_seconds.map(|s| s * 1e3),
                            loo_error_pct: p.loo_error_pct,
                            achieved_pct: p.achieved_pct,
                            row_ids: p.point.row_ids.clone(),
                        })
                        .collect(),
                })
        })
        .collect()
}

/// Markdown: one summary line and one table per fit.
pub fn table(fits: &[FloorFit]) -> String {
    use crate::units::or_dash;
    let mut s = String::new();
    for f in fits {
        s.push_str(&format!(
            "Per-token floor, {} · {} · {}: t = t0 + bytes ÷ BW_eff, {} models: t0 = {:.3} ms ± {:.3}, BW_eff = {} GB/s (95 %: {} – {}), worst leave-one-out error {} % (rows {})\n\n",
            f.scope.hostname,
            f.scope.quant,
            f.scope.placement,
            f.points.len(),
            f.t0_seconds * 1e3,
            f.t0_half95_seconds * 1e3,
            or_dash(f.bw_eff_gbps, 0),
            or_dash(f.bw_eff_95_gbps.0, 0),
            f.bw_eff_95_gbps.1.map_or("unbounded".to_string(), |v| format!("{v:.0}")),
            or_dash(f.worst_loo_pct(), 1),
            f.row_ids()
                .iter()
                .map(|i| format!("#{i}"))
                .collect::<Vec<_>>()
                .join(" "),
        ));
        s.push_str("| model | bytes per token (GB) | measured ms/token | fit ms/token | leave-one-out ms/token | LOO error % | achieved % of STREAM ceiling |\n");
        s.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for p in &f.points {
            s.push_str(&format!(
                "| {} | {:.3} | {:.3} | {:.3} | {} | {} | {:.1} |\n",
                p.point.model_type,
                p.point.bytes_per_token / 1e9,
                p.point.seconds_per_token * 1e3,
                p.fit_seconds * 1e3,
                or_dash(p.loo_seconds.map(|x| x * 1e3), 3),
                or_dash(p.loo_error_pct, 1),
                p.achieved_pct,
            ));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_floor_is_fitted_per_machine_from_the_rows_alone() {
        // Two machines called the same (2 and 16 cores), three Q4_K_M models each,
        // timed exactly on t = t0 + bytes ÷ BW: 1 ms + bytes ÷ 1000 GB/s on the
        // first, 2 ms + bytes ÷ 500 GB/s on the second. Mixed, no line fits all six.
        let mut rows = Vec::new();
        for (cores, t0, bw) in [(2, 1e-3, 1000e9), (16, 2e-3, 500e9)] {
            for (k, gb) in [1.0, 2.0, 4.0].into_iter().enumerate() {
                let mut r = BenchRecord::example();
                r.id = rows.len() as i64 + 1;
                (r.n_prompt, r.n_depth, r.n_seqs) = (0, 0, 1);
                r.bandwidth_gbps = Some(40.0);
                r.cores_logical = cores;
                r.model_sha256 = format!("m{k}");
                r.model_type = format!("model {gb} GB");
                r.bytes_per_step = Some(gb * 1e9);
                r.n_gen = 128;
                r.avg_ns = ((t0 + gb * 1e9 / bw) * 128.0 * 1e9).round() as i64;
                rows.push(r);
            }
        }
        let floors = views(&rows);
        assert_eq!(floors.len(), 2, "{floors:#?}");
        for (f, (cores, t0_ms, bw)) in floors.iter().zip([(16, 2.0, 500.0), (2, 1.0, 1000.0)]) {
            assert!(f.host.contains(&format!("{cores} cores")), "{}", f.host);
            assert_eq!(
                (f.quant.as_str(), f.placement.as_str()),
                ("Q4_K_M", "CPU, 2 threads")
            );
            assert!((f.t0_ms - t0_ms).abs() < 1e-6, "{} vs {t0_ms}", f.t0_ms);
            assert!(
                (f.bw_eff_gbps.unwrap() - bw).abs() < 1e-3,
                "{:?}",
                f.bw_eff_gbps
            );
            let gbs: Vec<f64> = f.points.iter().map(|p| p.gb_per_token).collect();
            assert_eq!(gbs, [1.0, 2.0, 4.0]);
            for p in &f.points {
                let want = t0_ms + p.gb_per_token * 1e3 / bw;
                assert!((p.measured_ms - want).abs() < 1e-6 && (p.fit_ms - want).abs() < 1e-6);
                // Three models leave no freedom for leave-one-out.
                assert_eq!((p.loo_ms, p.loo_error_pct), (None, None));
            }
        }
        // Two models of a format fit nothing.
        assert!(views(&rows[..2]).is_empty());
    }

    use super::*;

    fn scope() -> FloorScope {
        FloorScope {
            hostname: "h".into(),
            quant: "F16".into(),
            placement: "GPU x".into(),
        }
    }

    fn pt(b: f64, t: f64) -> FloorPoint {
        FloorPoint {
            model_type: format!("{b}"),
            bytes_per_token: b,
            seconds_per_token: t,
            row_ids: vec![b as i64],
            stream_gbps: 4000.0,
        }
    }

    #[test]
    fn points_on_a_line_give_the_line_back_and_zero_loo_error() {
        // t = 1 ms + bytes ÷ 3000 GB/s, exactly.
        let line = |b: f64| 1e-3 + b / 3000e9;
        let pts = [1e9, 3e9, 14e9, 28e9]
            .iter()
            .map(|&b| pt(b, line(b)))
            .collect();
        let f = fit(scope(), pts).unwrap();
        assert!((f.t0_seconds - 1e-3).abs() < 1e-12, "{}", f.t0_seconds);
        assert!((f.bw_eff_gbps.unwrap() - 3000.0).abs() < 1e-6);
        assert!(f.t0_half95_seconds < 1e-12);
        for p in &f.points {
            assert!(p.loo_error_pct.unwrap().abs() < 1e-6);
        }
        // 14 GB at 3000 GB/s = 4.667 ms + 1 ms = 5.667 ms → 176.47 tok/s.
        assert!((f.predict_tps(14e9) - 1.0 / (1e-3 + 14e9 / 3000e9)).abs() < 1e-9);
        // Achieved: 14e9 ÷ 5.667e-3 = 2470.6 GB/s of 4000 = 61.76 %.
        let p14 = &f.points[2];
        assert!((p14.achieved_pct - 100.0 * 14e9 / line(14e9) / 4000e9).abs() < 1e-9);
    }

    #[test]
    fn three_points_match_a_hand_computed_fit_and_interval() {
        // x = 1, 2, 3; y = 1, 3, 2 → slope 0.5, intercept 1.0 (by hand);
        // residuals −0.5, 1, −0.5 → s² = 1.5 ÷ 1; sxx = 2; se(slope) = √0.75;
        // t(0.975, 1 dof) = 12.706 → half-width 12.706 × 0.8660 = 11.004.
        // se(t0) = √(1.5 × (1/3 + 4/2)) = √3.5 = 1.8708 → half 23.771.
        let f = fit(scope(), vec![pt(1.0, 1.0), pt(2.0, 3.0), pt(3.0, 2.0)]).unwrap();
        assert!((f.slope_seconds_per_byte - 0.5).abs() < 1e-12);
        assert!((f.t0_seconds - 1.0).abs() < 1e-12);
        assert!((f.slope_half95 - 12.706 * 0.75f64.sqrt()).abs() < 1e-9);
        assert!((f.t0_half95_seconds - 12.706 * 3.5f64.sqrt()).abs() < 1e-9);
        // Three points leave no leave-one-out test.
        assert!(f.points.iter().all(|p| p.loo_seconds.is_none()));
        // Lower bound of the slope is negative → BW_eff's upper bound is unbounded.
        assert_eq!(f.bw_eff_95_gbps.1, None);
    }

    #[test]
    fn leave_one_out_predicts_each_point_from_the_others() {
        // Four points; drop (4, 9): the other three (0,1), (1,2), (2,3) lie on y = 1 + x,
        // which predicts 5 at x = 4: error (5 − 9) ÷ 9 = −44.4 %.
        let f = fit(
            scope(),
            vec![pt(0.0, 1.0), pt(1.0, 2.0), pt(2.0, 3.0), pt(4.0, 9.0)],
        )
        .unwrap();
        let last = f.points.last().unwrap();
        assert!((last.loo_seconds.unwrap() - 5.0).abs() < 1e-12);
        assert!((last.loo_error_pct.unwrap() + 400.0 / 9.0).abs() < 1e-9);
        assert!(f.worst_loo_pct().unwrap() >= 400.0 / 9.0 - 1e-9);
    }

    #[test]
    fn fewer_than_three_models_or_no_spread_is_no_fit() {
        assert!(fit(scope(), vec![pt(1.0, 1.0), pt(2.0, 2.0)]).is_none());
        assert!(fit(scope(), vec![pt(1.0, 1.0), pt(1.0, 2.0), pt(1.0, 3.0)]).is_none());
    }

    #[test]
    fn rows_group_by_host_format_and_placement_one_latest_row_per_model() {
        let row = |id: i64, sha: &str, quant: &str, bytes: f64, ns: i64, ngl: i64| BenchRecord {
            id,
            model_sha256: sha.into(),
            quant: quant.into(),
            bytes_per_step: Some(bytes),
            avg_ns: ns,
            n_prompt: 0,
            n_gen: 100,
            n_depth: 0,
            n_seqs: 1,
            n_gpu_layers: ngl,
            gpu_info: "NVIDIA H200".into(),
            hostname: "gpu1".into(),
            bandwidth_gbps: Some(4000.0),
            ..BenchRecord::example()
        };
        let rows = vec![
            // Model a twice: the later row (id 2: 100 tokens in 0.4 s → 4 ms) is its point.
            row(2, "a", "F16", 1e9, 400_000_000, 99),
            row(1, "a", "F16", 1e9, 200_000_000, 99),
            row(3, "b", "F16", 2e9, 500_000_000, 99),
            row(4, "c", "F16", 4e9, 900_000_000, 99),
            // Another format, and a CPU row of the same format: not in the GPU F16 fit.
            row(5, "d", "Q4_K_M", 1e9, 100_000_000, 99),
            row(6, "e", "F16", 8e9, 900_000_000, 0),
        ];
        let fits = analyze(&rows);
        assert_eq!(fits.len(), 1, "{fits:?}");
        let f = &fits[0];
        assert_eq!(f.scope.quant, "F16");
        assert!(f.scope.placement.starts_with("GPU"));
        assert_eq!(f.points.len(), 3);
        assert!((f.points[0].point.seconds_per_token - 4e-3).abs() < 1e-15);
        assert_eq!(f.points[0].point.row_ids, vec![2]);
        assert!(for_model(&fits, "gpu1", "f16", true).is_some());
        assert!(for_model(&fits, "gpu1", "F16", false).is_none());
        assert!(for_model(&fits, "other", "F16", true).is_none());
    }

    #[test]
    fn t_quantiles_fall_to_the_normal() {
        assert_eq!(t975(1), 12.706);
        assert_eq!(t975(30), 2.042);
        assert_eq!(t975(31), 1.96);
        assert!(t975(0).is_nan());
    }
}
