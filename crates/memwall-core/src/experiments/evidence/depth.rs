//! Decode (and prefill) falloff with context depth, decomposed.
//!
//! Decode: with `t0` the measured time per token at depth 0 and `B(d)` the bytes
//! one step reads at depth d (weights W + KV at d), the bandwidth model predicts
//! `t(d) = t0 × B(d) ÷ B(0)`, i.e. an extra `t0 × (B(d) − B(0)) ÷ B(0)` from KV
//! traffic. The measured extra `t(d) − t0` minus that is the rest: attention compute
//! growing with d, softmax, cache misses, and whatever else is not bytes.
//!
//! Prefill: the same in FLOPs: the compute model predicts
//! `t(d) = t0 × F(d) ÷ F(0)` with F the mean FLOPs per prompt token
//! (2 × params + attention FLOPs ∝ context).

use crate::store::record::BenchRecord;
use serde::{Deserialize, Serialize};

/// One depth of the decomposition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DepthRow {
    /// Model type label.
    pub model_type: String,
    /// `tg` or `pp`.
    pub phase: String,
    /// Tokens already in the KV cache before the test (llama-bench's `-d`).
    pub n_depth: i64,
    /// Measured tok/s.
    pub tps: f64,
    /// Sample standard deviation of the tok/s, same unit.
    pub std: f64,
    /// Measured slowdown vs depth 0: t(d) ÷ t0 − 1 (0.25 = 25 % slower).
    pub slowdown: f64,
    /// Part of the slowdown the model explains (bytes for tg, FLOPs for pp): X(d) ÷ X(0) − 1.
    pub explained: f64,
    /// The rest: slowdown − explained.
    pub rest: f64,
    /// explained ÷ slowdown (None when there is no slowdown).
    pub explained_share: Option<f64>,
    /// Predicted tok/s from the depth-0 measurement and the model: ts0 ÷ (1 + explained).
    pub predicted_tps: f64,
}

/// Builds the decomposition for every (model, phase, threads, batch) group that has a
/// depth-0 row and at least one deeper row.
pub fn analyze(rows: &[BenchRecord]) -> Vec<DepthRow> {
    let mut out = Vec::new();
    let mut groups: Vec<(String, bool, i64, i64, i64)> = rows
        .iter()
        .filter(|r| r.n_seqs == 1)
        .map(|r| {
            (
                r.model_type.clone(),
                r.is_decode(),
                r.n_threads,
                r.n_prompt,
                r.n_gen,
            )
        })
        .collect();
    groups.sort();
    groups.dedup();
    for (model, decode, threads, p, n) in groups {
        let mut g: Vec<&BenchRecord> = rows
            .iter()
            .filter(|r| {
                r.n_seqs == 1
                    && r.model_type == model
                    && r.is_decode() == decode
                    && r.n_threads == threads
                    && r.n_prompt == p
                    && r.n_gen == n
            })
            .collect();
        g.sort_by_key(|r| r.n_depth);
        let Some(base) = g.iter().find(|r| r.n_depth == 0) else {
            continue;
        };
        if g.len() < 2 {
            continue;
        }
        let model_x = |r: &BenchRecord| {
            if decode {
                r.bytes_per_step
            } else {
                r.flops_per_token
            }
        };
        let Some(x0) = model_x(base) else {
            continue;
        };
        for r in &g {
            let Some(x) = model_x(r) else {
                continue;
            };
            let slowdown = base.avg_ts / r.avg_ts - 1.0;
            let explained = x / x0 - 1.0;
            out.push(DepthRow {
                model_type: model.clone(),
                phase: if decode { "tg".into() } else { "pp".into() },
                n_depth: r.n_depth,
                tps: r.avg_ts,
                std: r.stddev_ts,
                slowdown,
                explained,
                rest: slowdown - explained,
                explained_share: (slowdown > 0.0).then(|| explained / slowdown),
                predicted_tps: base.avg_ts / (1.0 + explained),
            });
        }
    }
    out
}

/// Markdown table of [`analyze`]'s rows.
pub fn table(rows: &[DepthRow]) -> String {
    let mut s = String::from(
        "| model | phase | depth | t/s | predicted t/s | slowdown | explained by KV bytes (tg) / FLOPs (pp) | rest (compute, other) | explained share |\n\
         | ----- | ----- | ----: | --: | ------------: | -------: | --------------------------------------: | --------------------: | --------------: |\n",
    );
    for r in rows {
        let share = r
            .explained_share
            .map_or_else(|| "—".into(), |x| format!("{:.0}%", x * 100.0));
        s.push_str(&format!(
            "| {} | {} | {} | {:.2} ± {:.2} | {:.2} | {:+.1}% | {:+.1}% | {:+.1}% | {} |\n",
            r.model_type,
            r.phase,
            r.n_depth,
            r.tps,
            r.std,
            r.predicted_tps,
            r.slowdown * 100.0,
            r.explained * 100.0,
            r.rest * 100.0,
            share
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decomposition_matches_hand_values() {
        // A measured sweep of a 5.03 GB model: depth 0 at 19.82 t/s with 5.03 GB/step;
        // at 8192 the step reads 6.24 GB and measured 15.97 t/s. Slowdown
        // 19.82/15.97 − 1 = 24.1 %; bytes explain 6.24/5.03 − 1 = 24.1 %: nearly all of it.
        let mk = |d: i64, ts: f64, bytes: f64| BenchRecord {
            n_depth: d,
            avg_ts: ts,
            bytes_per_step: Some(bytes),
            ..BenchRecord::example()
        };
        let rows = analyze(&[mk(0, 19.82, 5.03e9), mk(8192, 15.97, 6.24e9)]);
        assert_eq!(rows.len(), 2);
        let r = &rows[1];
        assert!((r.slowdown - (19.82 / 15.97 - 1.0)).abs() < 1e-12);
        assert!((r.explained - (6.24 / 5.03 - 1.0)).abs() < 1e-12);
        assert!(
            (r.predicted_tps - 19.82 * 5.03 / 6.24).abs() < 1e-9,
            "{}",
            r.predicted_tps
        );
        let share = r.explained_share.unwrap();
        assert!(share > 0.99 && share < 1.01);
        assert_eq!(rows[0].slowdown, 0.0);
    }
}
