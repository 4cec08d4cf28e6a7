//! Achievable bandwidth depends on who asks: implied bandwidth (tg tok/s × bytes
//! per token) per thread count (or per offload setting), beside STREAM measured at
//! the same thread count. The CPU-only control: prefill scales with compute, decode
//! only with the bandwidth the threads can pull.

use crate::store::record::BenchRecord;
use serde::{Deserialize, Serialize};

/// One row: a thread count (or offload setting) and what it pulled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadsRow {
    /// Model type label.
    pub model_type: String,
    /// CPU threads the engine ran with (llama-bench's `-t`).
    pub n_threads: i64,
    /// Layers offloaded to the GPU (llama-bench's `-ngl`).
    pub n_gpu_layers: i64,
    /// Decode tok/s (tg at depth 0), when measured.
    pub tg_tps: Option<f64>,
    /// Prefill tok/s (pp at depth 0), when measured.
    pub pp_tps: Option<f64>,
    /// Implied bandwidth of decode, GB/s.
    pub implied_gbps: Option<f64>,
    /// STREAM triad at this thread count, GB/s, when measured.
    pub stream_gbps: Option<f64>,
    /// implied ÷ STREAM at this thread count.
    pub share_of_stream: Option<f64>,
    /// tg relative to the row with the most threads.
    pub tg_vs_max: Option<f64>,
    /// pp relative to the row with the most threads.
    pub pp_vs_max: Option<f64>,
}

/// Builds the table from depth-0, single-sequence rows; `stream_at(threads)` gives the
/// STREAM triad measured at a thread count (from the store).
pub fn analyze(rows: &[BenchRecord], stream_at: &dyn Fn(i64) -> Option<f64>) -> Vec<ThreadsRow> {
    let base: Vec<&BenchRecord> = rows
        .iter()
        .filter(|r| r.n_depth == 0 && r.n_seqs == 1)
        .collect();
    let mut keys: Vec<(String, i64, i64)> = base
        .iter()
        .map(|r| (r.model_type.clone(), r.n_gpu_layers, r.n_threads))
        .collect();
    keys.sort();
    keys.dedup();
    let mut out: Vec<ThreadsRow> = keys
        .iter()
        .map(|(m, ngl, t)| {
            let pick = |decode: bool| {
                base.iter().find(|r| {
                    &r.model_type == m
                        && r.n_gpu_layers == *ngl
                        && r.n_threads == *t
                        && r.is_decode() == decode
                })
            };
            let tg = pick(true);
            let pp = pick(false);
            let implied = tg.and_then(|r| r.implied_bandwidth_gbps);
            let stream = stream_at(*t);
            ThreadsRow {
                model_type: m.clone(),
                n_threads: *t,
                n_gpu_layers: *ngl,
                tg_tps: tg.map(|r| r.avg_ts),
                pp_tps: pp.map(|r| r.avg_ts),
                implied_gbps: implied,
                stream_gbps: stream,
                share_of_stream: implied.zip(stream).map(|(i, s)| i / s),
                tg_vs_max: None,
                pp_vs_max: None,
            }
        })
        .collect();
    for i in 0..out.len() {
        let top = out
            .iter()
            .filter(|r| r.model_type == out[i].model_type && r.n_gpu_layers == out[i].n_gpu_layers)
            .max_by_key(|r| r.n_threads)
            .cloned();
        if let Some(top) = top {
            out[i].tg_vs_max = out[i].tg_tps.zip(top.tg_tps).map(|(a, b)| a / b);
            out[i].pp_vs_max = out[i].pp_tps.zip(top.pp_tps).map(|(a, b)| a / b);
        }
    }
    out
}

/// Markdown table.
pub fn table(rows: &[ThreadsRow]) -> String {
    let f = |v: Option<f64>, d: usize| crate::units::or_dash(v, d);
    let mut s = String::from(
        "| model | ngl | threads | tg t/s | pp t/s | implied GB/s | STREAM GB/s (same threads) | implied ÷ STREAM | tg ÷ max threads | pp ÷ max threads |\n\
         | ----- | --: | ------: | -----: | -----: | -----------: | -------------------------: | ---------------: | ---------------: | ---------------: |\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.model_type,
            r.n_gpu_layers,
            r.n_threads,
            f(r.tg_tps, 2),
            f(r.pp_tps, 2),
            f(r.implied_gbps, 1),
            f(r.stream_gbps, 1),
            f(r.share_of_stream, 2),
            f(r.tg_vs_max, 2),
            f(r.pp_vs_max, 2)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_pair_tg_pp_and_stream_per_thread_count() {
        let mk = |t: i64, decode: bool, ts: f64| BenchRecord {
            n_threads: t,
            n_prompt: if decode { 0 } else { 512 },
            n_gen: if decode { 128 } else { 0 },
            avg_ts: ts,
            implied_bandwidth_gbps: decode.then_some(ts * 0.4),
            ..BenchRecord::example()
        };
        let rows = analyze(
            &[
                mk(1, true, 40.0),
                mk(1, false, 150.0),
                mk(2, true, 64.0),
                mk(2, false, 300.0),
            ],
            &|t| Some(if t == 1 { 25.0 } else { 45.0 }),
        );
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].n_threads, 1);
        assert_eq!(rows[0].tg_vs_max, Some(40.0 / 64.0));
        assert_eq!(rows[0].pp_vs_max, Some(0.5));
        assert_eq!(rows[0].share_of_stream, Some(16.0 / 25.0));
        assert!(table(&rows).contains("| 1 |"));
        // No STREAM at a thread count → shown as not measured.
        let rows = analyze(&[mk(3, true, 10.0)], &|_| None);
        assert!(table(&rows).contains("| — |"));
    }
}
