//! Which analyses apply to a set of bench rows, decided once: for the notes under
//! `memwall bench`'s table and for the charts of `results/<run>/`.
//!
//! | analysis | applies when the rows hold | table | chart |
//! | --- | --- | --- | --- |
//! | decode rate vs depth | a single-sequence decode row | — | `decode_vs_depth` |
//! | triad vs read ceilings ([`ceilings`]) | a decode row | yes | — |
//! | depth falloff ([`depth`]) | more than one depth | yes | `depth_decomposed`, when a tg row lies beyond depth 0 |
//! | batching ([`batch`]) | more than one parallel-sequence count | yes | `batch`; `batch_roofline` when a decode row gives the compute peak |
//! | implied bandwidth ([`threads`]) | more than one thread count or offload setting | yes | `threads`, only over thread counts (its x axis) |

use super::batch::{self, BatchRow};
use super::ceilings::{self, CeilingRow};
use super::depth::{self, DepthRow};
use super::threads::{self, ThreadsRow};
use crate::store::record::BenchRecord;
use serde::{Deserialize, Serialize};

/// A chart that applies to a set of bench rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "chart", rename_all = "snake_case")]
pub enum EvidenceChart {
    /// Decode tok/s against depth with its ceiling.
    DecodeVsDepth,
    /// The depth falloff split into its KV-bytes part and the rest.
    DepthDecomposed,
    /// Per-token-read bandwidth against parallel sequences.
    Batch,
    /// Batching on the roofline, under the compute peak of the first decode row.
    BatchRoofline {
        /// That row's compute peak, GFLOP/s.
        peak_gflops: f64,
        /// Which peak it is (`f32 FMA`, `int8 dot`).
        peak_kind: String,
    },
    /// Implied bandwidth against threads, beside STREAM at each thread count.
    Threads,
}

impl EvidenceChart {
    /// The file stem the chart is written under (`<stem>.png`, `<stem>.svg`).
    pub fn stem(&self) -> &'static str {
        match self {
            EvidenceChart::DecodeVsDepth => "decode_vs_depth",
            EvidenceChart::DepthDecomposed => "depth_decomposed",
            EvidenceChart::Batch => "batch",
            EvidenceChart::BatchRoofline { .. } => "batch_roofline",
            EvidenceChart::Threads => "threads",
        }
    }
}

/// The analyses that apply to a set of bench rows, with their rows; `None` where an
/// analysis does not apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analyses {
    /// Each decode rate under the triad and read ceilings.
    pub ceilings: Option<Vec<CeilingRow>>,
    /// The depth falloff, decomposed.
    pub depth: Option<Vec<DepthRow>>,
    /// The batching analysis, when the run swept parallel sequences.
    pub batch: Option<Vec<BatchRow>>,
    /// Implied bandwidth by thread count (or offload setting).
    pub threads: Option<Vec<ThreadsRow>>,
    /// The charts that apply, in the order they are written.
    pub charts: Vec<EvidenceChart>,
}

impl Analyses {
    /// Decides which analyses apply to `rows` (see the module's table) and computes
    /// them; `stream_at(threads)` gives the STREAM triad measured at a thread count,
    /// GB/s, for the thread analysis.
    pub fn for_rows(rows: &[BenchRecord], stream_at: &dyn Fn(i64) -> Option<f64>) -> Analyses {
        let distinct = |f: &dyn Fn(&BenchRecord) -> i64| {
            let mut v: Vec<i64> = rows.iter().map(f).collect();
            v.sort();
            v.dedup();
            v.len()
        };
        let first_decode = rows.iter().find(|r| r.is_decode());
        let mut charts = Vec::new();
        if rows.iter().any(|r| r.is_decode() && r.n_seqs == 1) {
            charts.push(EvidenceChart::DecodeVsDepth);
        }
        let ceilings = first_decode.map(|_| ceilings::analyze(rows));
        let depth = (distinct(&|r| r.n_depth) > 1).then(|| depth::analyze(rows));
        if let Some(d) = &depth
            && d.iter().any(|r| r.phase == "tg" && r.n_depth > 0)
        {
            charts.push(EvidenceChart::DepthDecomposed);
        }
        let batch = (distinct(&|r| r.n_seqs) > 1).then(|| batch::analyze(rows));
        if batch.is_some() {
            charts.push(EvidenceChart::Batch);
            if let Some((r0, peak)) = first_decode.and_then(|r| r.peak_gflops.map(|p| (r, p))) {
                charts.push(EvidenceChart::BatchRoofline {
                    peak_gflops: peak,
                    peak_kind: r0.peak_kind.clone(),
                });
            }
        }
        let thread_sweep = distinct(&|r| r.n_threads) > 1;
        let threads = (thread_sweep || distinct(&|r| r.n_gpu_layers) > 1)
            .then(|| threads::analyze(rows, stream_at));
        if thread_sweep {
            charts.push(EvidenceChart::Threads);
        }
        Analyses {
            ceilings,
            depth,
            batch,
            threads,
            charts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(n_gen: i64, n_depth: i64, n_seqs: i64, n_threads: i64, ngl: i64) -> BenchRecord {
        BenchRecord {
            n_prompt: if n_gen > 0 { 0 } else { 512 },
            n_gen,
            n_depth,
            n_seqs,
            n_threads,
            n_gpu_layers: ngl,
            ..BenchRecord::example()
        }
    }

    fn stems(a: &Analyses) -> Vec<&'static str> {
        a.charts.iter().map(EvidenceChart::stem).collect()
    }

    const NO_STREAM: &dyn Fn(i64) -> Option<f64> = &|_| None;

    #[test]
    fn one_prefill_test_gets_no_analysis() {
        let a = Analyses::for_rows(&[row(0, 0, 1, 2, 0)], NO_STREAM);
        assert_eq!(
            (&a.ceilings, &a.depth, &a.batch, &a.threads),
            (&None, &None, &None, &None)
        );
        assert!(a.charts.is_empty());
        assert_eq!(Analyses::for_rows(&[], NO_STREAM), a);
    }

    #[test]
    fn a_depth_sweep_gets_the_ceilings_and_the_decomposition() {
        let rows = [
            row(0, 0, 1, 2, 0),
            row(128, 0, 1, 2, 0),
            row(128, 512, 1, 2, 0),
        ];
        let a = Analyses::for_rows(&rows, NO_STREAM);
        assert_eq!(a.ceilings.as_ref().map(Vec::len), Some(2));
        assert!(a.depth.is_some() && a.batch.is_none() && a.threads.is_none());
        assert_eq!(stems(&a), ["decode_vs_depth", "depth_decomposed"]);
        // Depths swept by prefill only: the table, but no decode falloff to chart.
        let a = Analyses::for_rows(&[row(0, 0, 1, 2, 0), row(0, 512, 1, 2, 0)], NO_STREAM);
        assert!(a.depth.is_some() && a.ceilings.is_none());
        assert!(a.charts.is_empty(), "{:?}", a.charts);
    }

    #[test]
    fn a_batch_sweep_draws_its_roofline_under_the_first_decode_peak() {
        let mut rows = [
            row(0, 0, 2, 2, 0),
            row(128, 0, 1, 2, 0),
            row(128, 0, 4, 2, 0),
        ];
        rows[1].peak_gflops = Some(123.0);
        rows[1].peak_kind = "int8 dot".into();
        rows[2].peak_gflops = Some(999.0);
        let a = Analyses::for_rows(&rows, NO_STREAM);
        assert!(a.batch.is_some() && a.depth.is_none());
        assert_eq!(
            a.charts,
            [
                EvidenceChart::DecodeVsDepth,
                EvidenceChart::Batch,
                EvidenceChart::BatchRoofline {
                    peak_gflops: 123.0,
                    peak_kind: "int8 dot".into()
                }
            ]
        );
        // Prefill only: batching applies, its roofline has no decode row to draw.
        let a = Analyses::for_rows(&[row(0, 0, 1, 2, 0), row(0, 0, 4, 2, 0)], NO_STREAM);
        assert_eq!(stems(&a), ["batch"]);
    }

    #[test]
    fn threads_chart_needs_a_thread_sweep_and_the_table_an_offload_sweep_too() {
        let at = |t: i64| Some(t as f64 * 10.0);
        let a = Analyses::for_rows(&[row(128, 0, 1, 1, 0), row(128, 0, 1, 2, 0)], &at);
        let t = a.threads.as_ref().unwrap();
        assert_eq!(
            t.iter()
                .map(|r| (r.n_threads, r.stream_gbps))
                .collect::<Vec<_>>(),
            [(1, Some(10.0)), (2, Some(20.0))]
        );
        assert_eq!(stems(&a), ["decode_vs_depth", "threads"]);
        // One thread count, two offload settings: the table only (the chart's x axis is threads).
        let a = Analyses::for_rows(&[row(128, 0, 1, 2, 0), row(128, 0, 1, 2, 99)], &at);
        assert_eq!(a.threads.as_ref().map(Vec::len), Some(2));
        assert_eq!(stems(&a), ["decode_vs_depth"]);
    }
}
