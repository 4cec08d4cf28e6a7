//! The roofline: pure arithmetic on model facts, bandwidth and peak compute.
//!
//! Sources: Williams, Waterman & Patterson, "Roofline: an insightful visual
//! performance model for multicore architectures", CACM 52(4), 2009 (attainable
//! FLOP/s = min(peak, intensity × bandwidth); ridge = peak ÷ bandwidth); the decode
//! bound `tok/s ≤ bandwidth ÷ bytes read per token` follows from batch-1 decode
//! reading every active weight once per token (see `model`), and the prefill bound
//! from ≈ 2 FLOPs per weight per token (Kaplan et al. 2020, arXiv 2001.08361, §2.1).

use crate::probe::model::{CacheType, ModelFacts};
use crate::units::{Bytes, Gbps, Gflops};
use serde::{Deserialize, Serialize};

/// Decode ceiling in tokens/s at batch 1: `bandwidth ÷ bytes per step`.
///
/// Example (the Day-1 lab): 120 GB/s ÷ 5.03 GB = 23.86 tok/s.
/// Returns `f64::INFINITY` for zero bytes.
pub fn decode_ceiling_tps(bandwidth: Gbps, bytes_per_step: Bytes) -> f64 {
    bandwidth.bytes_per_s() / bytes_per_step.0 as f64
}

/// Bytes one decode step of a batch of `batch` sequences reads at depth `depth`:
/// weights once (shared by the batch) plus each sequence's KV cache:
/// `W + b × kv_read(d)`.
pub fn bytes_per_step(model: &ModelFacts, depth: u64, batch: u64, cache: CacheType) -> Bytes {
    Bytes(model.streamed_bytes.0 + batch * model.kv_bytes_read_at_depth(depth, cache).0)
}

/// Aggregate decode ceiling (tokens/s summed over the batch) for `batch` sequences
/// at depth `depth`: `b × bandwidth ÷ (W + b × kv_read(d))`.
pub fn decode_ceiling_batched_tps(
    model: &ModelFacts,
    bandwidth: Gbps,
    depth: u64,
    batch: u64,
    cache: CacheType,
) -> f64 {
    batch as f64 * decode_ceiling_tps(bandwidth, bytes_per_step(model, depth, batch, cache))
}

/// FLOPs to process one token that attends to `context` earlier tokens:
/// `2 × active matmul params + attention FLOPs(context)`.
pub fn flops_per_token(model: &ModelFacts, context: u64) -> f64 {
    2.0 * model.active_matmul_params as f64 + model.attention_flops_per_token(context)
}

/// Mean FLOPs per token of a prefill of `n_prompt` tokens on top of `depth` cached
/// ones. Token `i` (0-based) attends to `depth + i + 1` tokens, so the mean context
/// is `depth + (n_prompt + 1) / 2`.
pub fn prefill_flops_per_token(model: &ModelFacts, n_prompt: u64, depth: u64) -> f64 {
    let mean_ctx = depth as f64 + (n_prompt as f64 + 1.0) / 2.0;
    2.0 * model.active_matmul_params as f64 + model.attention_flops_per_token(1) * mean_ctx
}

/// Prefill (compute) ceiling in tokens/s: `peak ÷ FLOPs per token`.
///
/// Example (Day-1 lab): 4.4 TFLOP/s ÷ 16.4 GFLOP/token ≈ 268 tok/s.
pub fn prefill_ceiling_tps(peak: Gflops, flops_per_token: f64) -> f64 {
    peak.per_s() / flops_per_token
}

/// Arithmetic intensity of batch-`b` decode in FLOP/byte:
/// `2 × active params × b ÷ bytes per step` (weights shared across the batch).
pub fn decode_intensity(model: &ModelFacts, depth: u64, batch: u64, cache: CacheType) -> f64 {
    let flops = batch as f64 * flops_per_token(model, depth);
    flops / bytes_per_step(model, depth, batch, cache).0 as f64
}

/// Ridge point in FLOP/byte: `peak ÷ bandwidth`. Left of it a kernel is
/// memory-bound, right of it compute-bound.
pub fn ridge_point(peak: Gflops, bandwidth: Gbps) -> f64 {
    peak.per_s() / bandwidth.bytes_per_s()
}

/// Attainable FLOP/s at `intensity` FLOP/byte: `min(peak, intensity × bandwidth)`.
pub fn attainable(peak: Gflops, bandwidth: Gbps, intensity: f64) -> Gflops {
    Gflops((intensity * bandwidth.0).min(peak.0))
}

/// Bandwidth implied by a measured decode rate: `tok/s × bytes per token`
/// (the seeds' "per-token-read bandwidth"). Above the measured STREAM bandwidth it
/// proves weights were shared across the batch.
pub fn implied_bandwidth(tps: f64, bytes_per_token: Bytes) -> Gbps {
    Gbps(tps * bytes_per_token.0 as f64 / 1e9)
}

/// Whether a model fits: weights + KV cache for `n_ctx` tokens + headroom must not
/// exceed the available memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// Weight bytes (the file's tensor data).
    pub weights: Bytes,
    /// KV cache bytes for the context.
    pub kv: Bytes,
    /// Headroom kept free for the OS, runtime buffers and activations.
    pub headroom: Bytes,
    /// Memory available now.
    pub available: Bytes,
}

impl Capacity {
    /// Total the run needs: weights + KV + headroom.
    pub fn needed(&self) -> Bytes {
        self.weights + self.kv + self.headroom
    }
    /// `needed ≤ available`.
    pub fn fits(&self) -> bool {
        self.needed() <= self.available
    }
}

/// Default headroom: 1 GiB plus 10 % of the weights (compute buffers, the OS).
pub fn default_headroom(weights: Bytes) -> Bytes {
    Bytes((1u64 << 30) + weights.0 / 10)
}

/// One row's roofline placement: ceiling and achieved fraction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// Ceiling in tok/s.
    pub ceiling_tps: f64,
    /// measured ÷ ceiling.
    pub achieved: f64,
}

impl Placement {
    /// Places `measured_tps` under `ceiling_tps`.
    pub fn new(measured_tps: f64, ceiling_tps: f64) -> Placement {
        Placement {
            ceiling_tps,
            achieved: measured_tps / ceiling_tps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tolerance for hand-computed reference values (relative).
    const REL: f64 = 5e-3;

    fn close(a: f64, b: f64) -> bool {
        ((a - b) / b).abs() < REL
    }

    #[test]
    fn day1_decode_ceiling() {
        // 120 GB/s ÷ 5.03 GB = 23.857 tok/s (hand: 120/5.03).
        let t = decode_ceiling_tps(Gbps(120.0), Bytes(5_030_000_000));
        assert!(close(t, 23.857), "{t}");
    }

    #[test]
    fn explainer_values() {
        // 27B dense at 8 bits, weights only, 273 GB/s → ≈ 10 tok/s.
        let t = decode_ceiling_tps(Gbps(273.0), Bytes(27_000_000_000));
        assert!(close(t, 10.111), "{t}");
        // 3B active at 4 bits = 1.5 GB/token → 182 tok/s.
        let t = decode_ceiling_tps(Gbps(273.0), Bytes(1_500_000_000));
        assert!(close(t, 182.0), "{t}");
    }

    #[test]
    fn day1_prefill_ceiling_and_ridge() {
        // 4.4 TFLOP/s ÷ (2 × 8.19e9) = 268.6 tok/s.
        let t = prefill_ceiling_tps(Gflops(4400.0), 2.0 * 8.19e9);
        assert!(close(t, 268.6), "{t}");
        // ~37 FLOP per byte: 4.4e12 / 120e9 = 36.67.
        assert!(close(ridge_point(Gflops(4400.0), Gbps(120.0)), 36.667));
        // Under the ridge attainable = I × BW; over it, the peak.
        assert_eq!(attainable(Gflops(4400.0), Gbps(120.0), 2.0), Gflops(240.0));
        assert_eq!(
            attainable(Gflops(4400.0), Gbps(120.0), 100.0),
            Gflops(4400.0)
        );
    }

    #[test]
    fn implied_bandwidth_inverts_the_ceiling() {
        // CPU-only Day-1 control: 12.69 tok/s × 5.03 GB = 63.8 GB/s.
        assert!(close(
            implied_bandwidth(12.69, Bytes(5_030_000_000)).0,
            63.83
        ));
    }

    #[test]
    fn capacity_names_its_parts() {
        let c = Capacity {
            weights: Bytes(15_200_000_000),
            kv: Bytes(0),
            headroom: default_headroom(Bytes(15_200_000_000)),
            available: Bytes(16 << 30),
        };
        // 15.2 GB + 1 GiB + 1.52 GB = 17.79 GB > 17.18 GB: the fp16 7B does not fit.
        assert!(!c.fits());
        assert_eq!(
            c.needed(),
            Bytes(15_200_000_000 + (1 << 30) + 1_520_000_000)
        );
    }
}
