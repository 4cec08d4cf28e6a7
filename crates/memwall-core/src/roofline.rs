//! The roofline: pure arithmetic on model facts, bandwidth and peak compute.
//!
//! Sources: Williams, Waterman & Patterson, "Roofline: an insightful visual
//! performance model for multicore architectures", CACM 52(4), 2009 (attainable
//! FLOP/s = min(peak, intensity × bandwidth); ridge = peak ÷ bandwidth); the decode
//! bound `tok/s ≤ bandwidth ÷ bytes read per token` follows from batch-1 decode
//! reading every active weight once per token (see `model`), and the prefill bound
//! from ≈ 2 FLOPs per weight per token (Kaplan et al. 2020, arXiv 2001.08361, §2.1).
//!
//! Every ceiling lives here: the formulas (decode, prefill, ridge, implied
//! bandwidth), the machine's roof ([`MachineRoof`]: measured bandwidth and compute
//! peaks), and the ceilings of one test instance ([`Workload`] →
//! [`instance_ceiling`], [`instance_compute`], and [`place`] for a measured rate).
//! Over several GPUs, llama.cpp's split modes: [`multi_gpu`].

pub mod multi_gpu;

use crate::probe::model::{CacheType, ModelFacts};
use crate::units::{Bytes, Gbps, Gflops};
use serde::{Deserialize, Serialize};

/// Decode ceiling in tokens/s at batch 1: `bandwidth ÷ bytes per step`.
///
/// Example: a 5.03 GB Q4_K_M model (Qwen3-8B) at 120 GB/s: 120 ÷ 5.03 = 23.86 tok/s.
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
/// Example: a 4.4 TFLOP/s peak and an 8.19e9-parameter model (2 × 8.19e9 = 16.4
/// GFLOP/token): 4.4 TFLOP/s ÷ 16.4 GFLOP/token ≈ 268 tok/s.
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

/// Bandwidth implied by a measured decode rate: `tok/s × bytes per token ÷ 10^9`
/// (the "per-token-read bandwidth"). `bytes_per_token` is a mean over a test's
/// steps, so it may be fractional. Above the measured STREAM bandwidth it proves
/// weights were shared across the batch.
pub fn implied_bandwidth(tps: f64, bytes_per_token: f64) -> Gbps {
    Gbps(tps * bytes_per_token / 1e9)
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

pub use crate::units::PeakKind;

impl PeakKind {
    /// The peak llama.cpp's CPU path runs a model's matmuls at: int8 dot when the
    /// weights are block-quantized (activations are quantized to 8 bits), f32 FMA for
    /// F16/BF16/F32 weights (and when the dominant type is unknown). A model held by
    /// MLX (`quant` = `mlx-4bit`, `mlx-8bit`, `mlx-f16`, as the MLX bench sets it)
    /// multiplies f32 activations by weights dequantized in its kernels: f32 FMA,
    /// whatever the GGUF's types were.
    pub fn for_model(facts: &ModelFacts) -> PeakKind {
        if facts.quant.starts_with("mlx-") {
            return PeakKind::F32Fma;
        }
        let quantized = facts
            .dominant_type()
            .is_some_and(|t| t.traits().is_some_and(|x| x.is_block_quantized()));
        if quantized {
            PeakKind::Int8Dot
        } else {
            PeakKind::F32Fma
        }
    }
}

/// Roofline inputs for a run: bandwidth and compute peaks. A peak that was not
/// measured is `None`, and every ceiling that needs it stays `None` (`—`, NULL) with
/// the reason ([`PrefillPeak::missing_reason`]); it never falls back to the
/// bandwidth roof alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct MachineRoof {
    /// STREAM triad (best, all threads), GB/s.
    pub bandwidth: Gbps,
    /// Store id of that STREAM row (0 when not stored).
    pub stream_id: i64,
    /// STREAM read kernel (best) of the same run and thread count, GB/s; `None` when
    /// that run measured no read kernel. Decode rows show a second ceiling with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bandwidth: Option<Gbps>,
    /// f32 FMA peak measured on this CPU (`None`: none stored).
    pub peak_f32: Option<Gflops>,
    /// int8 dot peak measured on this CPU (`None`: none stored).
    pub peak_int8: Option<Gflops>,
    /// The GPU that runs prefill when layers are offloaded and memwall has not
    /// measured its peak: Apple silicon's Metal GPU, with the device catalogue's
    /// figure labelled `spec`. `None` elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuPeak>,
}

/// A GPU's prefill roof taken from the device catalogue (`catalog/devices.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct GpuPeak {
    /// Catalogue name (`M4 Pro`), or the brand string when the catalogue lacks it.
    pub device: String,
    /// The catalogue's compute figure (`None` when it gives none).
    pub gflops: Option<Gflops>,
    /// What the figure is (`fp32 (spec)`, `…, derived` for catalogue arithmetic).
    pub basis: String,
}

/// Where a compute roof comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakSource {
    /// Measured on this machine (`memwall peak`).
    Measured,
    /// A spec-sheet figure from the device catalogue (not measured).
    Spec,
}

/// The compute roof of a prefill ceiling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefillPeak {
    /// The roof; `None` when nothing was measured (or catalogued).
    pub gflops: Option<Gflops>,
    /// Which roof: `int8 dot` / `f32 FMA` (measured on this CPU) or
    /// `spec: M4 Pro GPU, fp32 (spec)`.
    pub kind: String,
    /// Measured or spec.
    pub source: PeakSource,
}

impl PrefillPeak {
    /// Why there is no roof (`None` when there is one).
    pub fn missing_reason(&self) -> Option<String> {
        if self.gflops.is_some() {
            return None;
        }
        Some(match self.source {
            PeakSource::Measured => format!(
                "no compute peak measured: no {} peak is stored for this host (run `memwall peak`)",
                self.kind
            ),
            PeakSource::Spec => format!(
                "no compute peak: {} has no figure in catalog/devices.toml and memwall does not measure GPU peaks yet",
                self.kind
            ),
        })
    }
}

impl MachineRoof {
    /// The compute roof for a model's prefill. With layers offloaded to a GPU that
    /// memwall does not measure ([`MachineRoof::gpu`], Apple), the catalogue's
    /// figure labelled spec. Otherwise the CPU peak llama.cpp's CPU path uses
    /// ([`PeakKind::for_model`]).
    pub fn peak_for(&self, facts: &ModelFacts, n_gpu_layers: u32) -> PrefillPeak {
        if let Some(g) = self.gpu.as_ref().filter(|_| n_gpu_layers > 0) {
            return PrefillPeak {
                gflops: g.gflops.filter(|x| x.0.is_finite() && x.0 > 0.0),
                kind: format!("spec: {} GPU, {}", g.device, g.basis),
                source: PeakSource::Spec,
            };
        }
        let kind = PeakKind::for_model(facts);
        let peak = match kind {
            PeakKind::Int8Dot => self.peak_int8,
            PeakKind::F32Fma => self.peak_f32,
        };
        PrefillPeak {
            gflops: peak.filter(|x| x.0.is_finite() && x.0 > 0.0),
            kind: kind.label().into(),
            source: PeakSource::Measured,
        }
    }
}

/// What one test instance asks of the machine: the inputs every per-instance
/// ceiling reads (a bench instance and its plan, in llama-bench's terms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// Prompt tokens of a prefill (pp) test; 0 for a decode (tg) test.
    pub n_prompt: u32,
    /// Tokens generated per sequence (tg); 0 for pp.
    pub n_gen: u32,
    /// Tokens already in the KV cache when the test starts.
    pub n_depth: u32,
    /// Sequences decoded together (tg); 1 for pp.
    pub n_seqs: u32,
    /// Micro-batch: a prefill reads the weights once per `n_ubatch` prompt tokens.
    pub n_ubatch: u32,
    /// K cache type; the KV bytes read are counted at this type.
    pub type_k: CacheType,
    /// Layers offloaded: with a catalogued GPU ([`MachineRoof::gpu`]) any offload
    /// takes the GPU's compute roof.
    pub n_gpu_layers: u32,
}

impl Workload {
    /// A prefill (pp) test.
    pub fn is_prefill(&self) -> bool {
        self.n_prompt > 0
    }
}

/// The roofline ceiling of one instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceCeiling {
    /// Ceiling in tokens/s (summed over the sequences); `None` when a roof it needs
    /// is missing: a pp ceiling without a compute peak (see
    /// [`PrefillPeak::missing_reason`]), any ceiling without a bandwidth.
    pub ceiling_tps: Option<f64>,
    /// Mean bytes read per step: per micro-batch for pp (weights + KV cache), per
    /// decode step for tg (weights + every sequence's KV at the step's depth).
    pub bytes_per_step: f64,
    /// Why `ceiling_tps` is `None`: the missing compute peak of a pp test, otherwise
    /// the missing bandwidth. `None` when there is a ceiling.
    pub missing_reason: Option<String>,
}

/// Ceiling of one instance under `roof`.
///
/// - pp: `n_prompt ÷ max(t_compute, t_mem)` with `t_compute = n_prompt × FLOPs per
///   token ÷ peak` ([`prefill_flops_per_token`]) and `t_mem = ⌈n_prompt ÷ n_ubatch⌉ ×
///   (W + kv_read(depth + n_prompt)) ÷ bandwidth`: the compute roof, or reading the
///   weights once per micro-batch when the prompt is short, whichever is lower. Both
///   roofs are needed: the lower of one known roof and one unknown is unknown.
/// - tg: [`decode_ceiling_at`] the triad bandwidth.
pub fn instance_ceiling(facts: &ModelFacts, w: &Workload, roof: &MachineRoof) -> InstanceCeiling {
    let finite = |v: f64| Some(v).filter(|v| v.is_finite());
    let peak = roof.peak_for(facts, w.n_gpu_layers);
    let missing_reason = |ceiling: Option<f64>| {
        ceiling
            .is_none()
            .then(|| match (w.is_prefill(), peak.missing_reason()) {
                (true, Some(r)) => r,
                _ => "no STREAM bandwidth".to_string(),
            })
    };
    if w.is_prefill() {
        let p = w.n_prompt as u64;
        let n_ub = p.div_ceil(w.n_ubatch.max(1) as u64);
        let kv = facts
            .kv_bytes_read_at_depth(w.n_depth as u64 + p, w.type_k)
            .0 as f64;
        let bytes = n_ub as f64 * (facts.streamed_bytes.0 as f64 + kv);
        let ceiling_tps = peak.gflops.and_then(|peak| {
            let flops = p as f64 * prefill_flops_per_token(facts, p, w.n_depth as u64);
            let t_compute = flops / peak.per_s();
            let t_mem = bytes / roof.bandwidth.bytes_per_s();
            finite(p as f64 / t_compute.max(t_mem))
        });
        InstanceCeiling {
            ceiling_tps,
            bytes_per_step: bytes / n_ub as f64,
            missing_reason: missing_reason(ceiling_tps),
        }
    } else {
        let ceiling_tps = finite(decode_ceiling_at(facts, w, roof.bandwidth));
        InstanceCeiling {
            ceiling_tps,
            bytes_per_step: mean_step_bytes(facts, w, w.n_seqs as u64),
            missing_reason: missing_reason(ceiling_tps),
        }
    }
}

/// Decode ceiling of a tg instance at `bandwidth`, tokens/s summed over the batch of
/// `n_seqs` sequences. Each step reads the weights once plus every sequence's KV at
/// its depth; the ceiling is steps × b tokens over the summed time bytes ÷ bandwidth:
/// `b × bandwidth ÷ mean bytes per step` ([`mean_step_bytes`]).
pub fn decode_ceiling_at(facts: &ModelFacts, w: &Workload, bandwidth: Gbps) -> f64 {
    let mean = mean_step_bytes(facts, w, w.n_seqs as u64);
    w.n_seqs as f64 * bandwidth.bytes_per_s() / mean
}

/// Mean FLOPs per token and arithmetic intensity of an instance.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InstanceCompute {
    /// Mean FLOPs per token over the test.
    pub flops_per_token: f64,
    /// FLOP per byte read from memory.
    pub arithmetic_intensity: f64,
}

/// Mean FLOPs per token and arithmetic intensity (FLOP per byte read) of an instance.
/// pp: FLOPs of the whole prefill over the bytes of reading the weights once per
/// micro-batch plus the KV cache; tg: each step's `b` tokens over that step's bytes.
pub fn instance_compute(facts: &ModelFacts, w: &Workload) -> InstanceCompute {
    if w.is_prefill() {
        let p = w.n_prompt as u64;
        let fpt = prefill_flops_per_token(facts, p, w.n_depth as u64);
        let n_ub = p.div_ceil(w.n_ubatch.max(1) as u64) as f64;
        let kv = facts
            .kv_bytes_read_at_depth(w.n_depth as u64 + p, w.type_k)
            .0 as f64;
        InstanceCompute {
            flops_per_token: fpt,
            arithmetic_intensity: fpt * p as f64 / (n_ub * (facts.streamed_bytes.0 as f64 + kv)),
        }
    } else {
        let n = w.n_gen.max(1) as u64;
        let fpt = (0..n)
            .map(|i| flops_per_token(facts, w.n_depth as u64 + i + 1))
            .sum::<f64>()
            / n as f64;
        let bytes = mean_step_bytes(facts, w, w.n_seqs as u64);
        InstanceCompute {
            flops_per_token: fpt,
            arithmetic_intensity: fpt * w.n_seqs as f64 / bytes,
        }
    }
}

/// Mean bytes read per decode step of a tg instance with `batch` sequences: step `i`
/// (0-based) attends to `n_depth + i + 1` cached tokens ([`bytes_per_step`]).
pub fn mean_step_bytes(facts: &ModelFacts, w: &Workload, batch: u64) -> f64 {
    let n = w.n_gen.max(1) as u64;
    let total: f64 = (0..n)
        .map(|i| bytes_per_step(facts, w.n_depth as u64 + i + 1, batch, w.type_k).0 as f64)
        .sum();
    total / n as f64
}

/// A measured instance placed under the roofline: every ceiling of a bench row and
/// the measured rate's share of each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstancePlacement {
    /// The compute roof a prefill ceiling uses ([`MachineRoof::peak_for`]).
    pub peak: PrefillPeak,
    /// The ceiling with the triad bandwidth (and, for pp, the compute peak) and the
    /// achieved fraction; `None` when a roof is missing ([`instance_ceiling`]).
    pub triad: Option<Placement>,
    /// Why `triad` is `None` ([`InstanceCeiling::missing_reason`]).
    pub missing_reason: Option<String>,
    /// Mean bytes read per step ([`InstanceCeiling::bytes_per_step`]).
    pub bytes_per_step: f64,
    /// The decode ceiling with the STREAM read kernel's bandwidth (decode writes almost
    /// nothing, triad writes a third of its bytes); tg rows with a read bandwidth only.
    pub read: Option<Placement>,
    /// [`implied_bandwidth`] of the measured rate over the bytes one token reads when
    /// decoded alone (weights + its own KV); tg rows only. Above STREAM only if the
    /// batch shared the weight read.
    pub implied_bandwidth: Option<Gbps>,
    /// FLOPs per token and arithmetic intensity ([`instance_compute`]).
    pub compute: InstanceCompute,
    /// Achieved compute: measured tok/s × FLOPs per token.
    pub achieved_compute: Gflops,
}

/// Places a measured rate (`measured_tps`, tokens/s summed over the sequences) of
/// workload `w` under `roof`.
pub fn place(
    facts: &ModelFacts,
    w: &Workload,
    roof: &MachineRoof,
    measured_tps: f64,
) -> InstancePlacement {
    let ceiling = instance_ceiling(facts, w, roof);
    let compute = instance_compute(facts, w);
    let is_decode = w.n_gen > 0;
    InstancePlacement {
        peak: roof.peak_for(facts, w.n_gpu_layers),
        triad: ceiling.ceiling_tps.map(|c| Placement::new(measured_tps, c)),
        bytes_per_step: ceiling.bytes_per_step,
        missing_reason: ceiling.missing_reason,
        read: roof
            .read_bandwidth
            .filter(|_| !w.is_prefill())
            .map(|bw| Placement::new(measured_tps, decode_ceiling_at(facts, w, bw))),
        implied_bandwidth: is_decode
            .then(|| implied_bandwidth(measured_tps, mean_step_bytes(facts, w, 1))),
        compute,
        achieved_compute: Gflops(measured_tps * compute.flops_per_token / 1e9),
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
    fn decode_ceiling_of_5_03_gb_at_120_gbps() {
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
    fn prefill_ceiling_and_ridge_at_4_4_tflops_and_120_gbps() {
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
        // A CPU-only decode of the 5.03 GB model at 12.69 tok/s: 12.69 × 5.03 GB = 63.8 GB/s.
        assert!(close(implied_bandwidth(12.69, 5_030_000_000.0).0, 63.83));
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
