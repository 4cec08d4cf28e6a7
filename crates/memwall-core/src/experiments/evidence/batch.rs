//! Batching amortizes the weight read.
//!
//! For `b` sequences decoded together (one batched forward per step), the
//! *per-token-read bandwidth* is `aggregate tok/s × bytes one token reads alone`
//! (weights + its KV). If every token re-read the weights this could not exceed
//! the measured STREAM bandwidth; above it, the weights must have been read once per
//! step and shared — the proof of amortization. The effective arithmetic intensity
//! `2 × params × b ÷ bytes per step` walks along the roofline toward the ridge.

use crate::store::record::BenchRecord;
use crate::units::or_dash;
use serde::{Deserialize, Serialize};

/// One row of the batching table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchRow {
    /// Model type label.
    pub model_type: String,
    /// Tokens already in the KV cache before the test (llama-bench's `-d`).
    pub n_depth: i64,
    /// CPU threads the engine ran with (llama-bench's `-t`).
    pub n_threads: i64,
    /// Sequences decoded in parallel, one token each per step.
    pub n_seqs: i64,
    /// Aggregate tok/s (all sequences), mean.
    pub aggregate_tps: f64,
    pub aggregate_std: f64,
    /// Per-sequence tok/s = aggregate ÷ b.
    pub per_seq_tps: f64,
    /// Per-token-read bandwidth, GB/s.
    pub per_token_read_gbps: Option<f64>,
    /// STREAM bandwidth of the run, GB/s.
    pub stream_gbps: Option<f64>,
    /// per-token-read > STREAM: weights were shared across the batch.
    pub amortized: bool,
    /// Effective arithmetic intensity, FLOP/byte.
    pub intensity: Option<f64>,
    pub achieved_gflops: Option<f64>,
    /// Aggregate ceiling tok/s (b × bandwidth ÷ (W + b × KV)).
    pub ceiling_tps: Option<f64>,
    /// The same ceiling with the STREAM read kernel's bandwidth (None: not measured).
    #[serde(default)]
    pub ceiling_read_tps: Option<f64>,
    /// Aggregate speedup over b = 1 (same model, depth, threads), when a b = 1 row exists.
    pub speedup_vs_b1: Option<f64>,
    /// Store id of the row.
    pub row_id: i64,
}

/// Builds the batching table from decode rows (any `n_seqs`), grouped by model,
/// depth and threads, ordered by `n_seqs`.
pub fn analyze(rows: &[BenchRecord]) -> Vec<BatchRow> {
    let mut tg: Vec<&BenchRecord> = rows.iter().filter(|r| r.is_decode()).collect();
    tg.sort_by(|a, b| {
        (&a.model_type, a.n_depth, a.n_threads, a.n_seqs).cmp(&(
            &b.model_type,
            b.n_depth,
            b.n_threads,
            b.n_seqs,
        ))
    });
    tg.iter()
        .map(|r| {
            let base = tg.iter().find(|x| {
                x.n_seqs == 1
                    && x.model_type == r.model_type
                    && x.n_depth == r.n_depth
                    && x.n_threads == r.n_threads
            });
            let bw = r.implied_bandwidth_gbps;
            BatchRow {
                model_type: r.model_type.clone(),
                n_depth: r.n_depth,
                n_threads: r.n_threads,
                n_seqs: r.n_seqs,
                aggregate_tps: r.avg_ts,
                aggregate_std: r.stddev_ts,
                per_seq_tps: r.avg_ts / r.n_seqs as f64,
                per_token_read_gbps: bw,
                stream_gbps: r.bandwidth_gbps,
                amortized: matches!((bw, r.bandwidth_gbps), (Some(b), Some(s)) if b > s),
                intensity: r.intensity,
                achieved_gflops: r.achieved_gflops,
                ceiling_tps: r.ceiling_ts,
                ceiling_read_tps: r.decode_ceiling_ts_read,
                speedup_vs_b1: base.map(|b| r.avg_ts / b.avg_ts),
                row_id: r.id,
            }
        })
        .collect()
}

/// Markdown table of [`analyze`]'s rows.
pub fn table(rows: &[BatchRow]) -> String {
    let mut s = String::from(
        "| model | b | aggregate t/s | per-seq t/s | ×b=1 | per-token-read GB/s | STREAM GB/s | amortized | AI FLOP/B | GFLOP/s | ceiling t/s | read ceiling t/s |\n\
         | ----- | -: | ------------: | ----------: | ---: | ------------------: | ----------: | --------- | --------: | ------: | ----------: | ---------------: |\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {}{} | {} | {:.2} ± {:.2} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.model_type,
            if r.n_depth > 0 {
                format!(" @ d{}", r.n_depth)
            } else {
                String::new()
            },
            r.n_seqs,
            r.aggregate_tps,
            r.aggregate_std,
            r.per_seq_tps,
            r.speedup_vs_b1.map_or("—".into(), |x| format!("{x:.2}")),
            or_dash(r.per_token_read_gbps, 1),
            or_dash(r.stream_gbps, 1),
            if r.amortized { "YES (> STREAM)" } else { "no" },
            or_dash(r.intensity, 2),
            or_dash(r.achieved_gflops, 1),
            or_dash(r.ceiling_tps, 1),
            or_dash(r.ceiling_read_tps, 1)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amortization_is_flagged_only_above_stream() {
        let mk = |b: i64, ts: f64, implied: f64| BenchRecord {
            n_seqs: b,
            avg_ts: ts,
            implied_bandwidth_gbps: Some(implied),
            bandwidth_gbps: Some(40.0),
            ..BenchRecord::example()
        };
        let rows = analyze(&[mk(4, 200.0, 80.0), mk(1, 64.0, 25.6)]);
        assert_eq!(rows.iter().map(|r| r.n_seqs).collect::<Vec<_>>(), [1, 4]);
        assert!(!rows[0].amortized && rows[1].amortized);
        assert_eq!(rows[1].per_seq_tps, 50.0);
        assert_eq!(rows[1].speedup_vs_b1, Some(200.0 / 64.0));
        assert!(table(&rows).contains("YES (> STREAM)"));
    }
}
