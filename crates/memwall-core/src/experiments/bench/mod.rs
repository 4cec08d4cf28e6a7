//! The benchmark harness: a validated plan, expanded into test instances, run with
//! llama-bench's semantics, guarded, and turned into [`BenchRecord`]s.
//!
//! Semantics (llama.cpp `tools/llama-bench/llama-bench.cpp`):
//! - **pp*N***: one prefill of N synthetic tokens (first is BOS when the model adds
//!   one, the rest seeded random ids), logits of the last token only; time = the
//!   whole prefill.
//! - **tg*N***: N single-token decode steps (BOS first, then random ids), each
//!   synchronized; time = all N steps.
//! - **@ d*D***: before each repetition the KV cache is filled with D tokens
//!   (restored from a saved state after the first fill, as llama-bench does); the fill
//!   is not timed.
//! - One warm-up run (a full pp, or one tg step) before the timed repetitions.
//! - Tokens are generated before timing; sampling is not done (the forward pass
//!   costs the same whatever the token), so timing excludes tokenization and sampling.

use crate::measure::stats::Sample;
use crate::measure::warning::Warning;
use crate::probe::hw::{self, HostInfo, LiveState};
use crate::probe::model::{CacheType, ModelFacts};
use crate::roofline;
use crate::store::record::{self, BenchRecord};
use crate::units::{Gbps, Gflops};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A validated benchmark plan (the "HiArgs": core never sees raw CLI flags).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchPlan {
    /// Models to run, in order.
    pub models: Vec<PathBuf>,
    /// Prompt lengths for pp tests (empty: no pp tests).
    pub n_prompt: Vec<u32>,
    /// Generation lengths for tg tests (empty: no tg tests).
    pub n_gen: Vec<u32>,
    /// Context depths (each pp/tg test runs at each depth).
    pub n_depth: Vec<u32>,
    /// Parallel sequences for tg tests (1 = plain llama-bench tg).
    pub n_seqs: Vec<u32>,
    /// Thread counts.
    pub n_threads: Vec<u32>,
    /// Logical batch.
    pub n_batch: u32,
    /// Micro-batch.
    pub n_ubatch: u32,
    /// Layers offloaded.
    pub n_gpu_layers: u32,
    /// K cache type.
    pub type_k: CacheType,
    /// V cache type.
    pub type_v: CacheType,
    /// Flash attention (`None` = auto).
    pub flash_attn: Option<bool>,
    /// Timed repetitions per test (≥ 1; N ≥ 5 is the default and what reports expect).
    pub reps: u32,
    /// Seed for the synthetic tokens.
    pub seed: u64,
    /// Record even on battery power (rows are marked).
    pub allow_battery: bool,
    /// Start even when the models' fit in memory cannot be checked or fails (`--skip-capacity-check`).
    #[serde(default)]
    pub skip_capacity_check: bool,
}

/// Errors of the harness.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The plan is invalid.
    #[error("invalid benchmark plan: {0}")]
    Plan(String),
    /// The guard refused: battery power, or the model does not fit in memory.
    #[error(transparent)]
    Guard(#[from] crate::measure::guard::GuardError),
    /// The model file could not be read.
    #[error(transparent)]
    Model(#[from] crate::probe::gguf::GgufError),
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] crate::measure::engine::EngineError),
    /// I/O (hashing the model file).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The user cancelled.
    #[error("cancelled")]
    Cancelled,
}

impl BenchPlan {
    /// What the guard allows for this plan.
    pub fn guard_options(&self) -> crate::measure::guard::GuardOptions {
        crate::measure::guard::GuardOptions {
            allow_battery: self.allow_battery,
            skip_capacity_check: self.skip_capacity_check,
        }
    }

    /// The largest context any instance of model `model` (index into `models`) needs.
    pub fn max_ctx(&self, model: usize) -> u64 {
        self.instances()
            .iter()
            .filter(|i| i.model == model)
            .map(|i| i.n_ctx() as u64)
            .max()
            .unwrap_or(0)
    }

    /// Checks the plan.
    ///
    /// # Errors
    /// [`BenchError::Plan`] naming the bad field; [`BenchError::Model`] when a model
    /// fails the GGUF checks (read here, before anything is measured).
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: &str| Err(BenchError::Plan(m.to_string()));
        if self.models.is_empty() {
            return bad(
                "no model given (--model FILE, or fetch the default with `memwall models fetch`)",
            );
        }
        if self.n_prompt.is_empty() && self.n_gen.is_empty() {
            return bad("nothing to run: give -p and/or -n");
        }
        if self.n_prompt.contains(&0) || self.n_gen.contains(&0) {
            return bad("-p/-n values must be positive (omit a list to skip those tests)");
        }
        if self.n_threads.is_empty() || self.n_threads.contains(&0) {
            return bad("-t needs positive thread counts");
        }
        if self.n_seqs.is_empty()
            || self.n_seqs.contains(&0)
            || self.n_seqs.iter().any(|&s| s > 256)
        {
            return bad("-b (parallel sequences) must be within 1..=256");
        }
        if self.reps == 0 {
            return bad("-r must be at least 1 (5 or more for a meaningful std)");
        }
        if self.n_batch == 0 || self.n_ubatch == 0 {
            return bad("--n-batch and --n-ubatch must be positive");
        }
        for m in &self.models {
            if !m.is_file() {
                return Err(BenchError::Plan(format!(
                    "model file {} does not exist (run `memwall models fetch` for the catalogue models)",
                    m.display()
                )));
            }
            // The header is read here, before STREAM is measured or a run stored, so
            // a truncated or malformed model fails fast (milliseconds).
            crate::probe::model::ModelFacts::open(m)?;
        }
        Ok(())
    }

    /// Expands the plan into instances, llama-bench's order: per model, per thread
    /// count, per depth: the pp tests, then the tg tests (one per parallel-sequence count).
    pub fn instances(&self) -> Vec<Instance> {
        let mut out = Vec::new();
        for (mi, _) in self.models.iter().enumerate() {
            for &t in &self.n_threads {
                for &d in &self.n_depth {
                    for &p in &self.n_prompt {
                        out.push(Instance {
                            model: mi,
                            n_prompt: p,
                            n_gen: 0,
                            n_depth: d,
                            n_seqs: 1,
                            n_threads: t,
                        });
                    }
                    for &n in &self.n_gen {
                        for &s in &self.n_seqs {
                            out.push(Instance {
                                model: mi,
                                n_prompt: 0,
                                n_gen: n,
                                n_depth: d,
                                n_seqs: s,
                                n_threads: t,
                            });
                        }
                    }
                }
            }
        }
        out
    }
}

/// One test instance of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// Index into `BenchPlan::models`.
    pub model: usize,
    /// Prompt tokens (pp), 0 for tg.
    pub n_prompt: u32,
    /// Generated tokens per sequence (tg), 0 for pp.
    pub n_gen: u32,
    /// Depth.
    pub n_depth: u32,
    /// Parallel sequences.
    pub n_seqs: u32,
    /// Threads.
    pub n_threads: u32,
}

impl Instance {
    /// Context this instance needs: `n_seqs × (depth + prompt + gen)` tokens.
    pub fn n_ctx(&self) -> u32 {
        self.n_seqs * (self.n_depth + self.n_prompt + self.n_gen).max(1)
    }
    /// `pp512`, `tg128 x4 @ d512`.
    pub fn label(&self) -> String {
        let mut s = if self.n_prompt > 0 {
            format!("pp{}", self.n_prompt)
        } else {
            format!("tg{}", self.n_gen)
        };
        if self.n_seqs > 1 {
            s.push_str(&format!(" x{}", self.n_seqs));
        }
        if self.n_depth > 0 {
            s.push_str(&format!(" @ d{}", self.n_depth));
        }
        s
    }
}

/// What the harness reports while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Progress {
    /// A model is being loaded.
    Loading {
        /// Path.
        model: String,
    },
    /// A test started.
    TestStarted {
        /// Index in the plan.
        index: usize,
        /// Total instances.
        total: usize,
        /// Label.
        label: String,
    },
    /// One repetition done (`rep` is 0 for the warm-up).
    Repetition {
        /// Instance index.
        index: usize,
        /// Repetition number, 1-based; 0 = warm-up.
        rep: u32,
        /// Of how many.
        reps: u32,
    },
    /// A test finished with its record.
    TestDone {
        /// The record.
        record: Box<BenchRecord>,
    },
}

/// Roofline inputs for a run: bandwidth and compute peaks. A peak that was not
/// measured is `None`, and every ceiling that needs it stays `None` (`—`, NULL) with
/// the reason ([`PrefillPeak::missing_reason`]); it never falls back to the
/// bandwidth roof alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// figure labelled spec. Otherwise the CPU peak llama.cpp's CPU path uses: int8
    /// dot when the weights are block-quantized (activations are quantized to 8
    /// bits), f32 FMA for F16/BF16/F32 weights.
    pub fn peak_for(&self, facts: &ModelFacts, n_gpu_layers: u32) -> PrefillPeak {
        if let Some(g) = self.gpu.as_ref().filter(|_| n_gpu_layers > 0) {
            return PrefillPeak {
                gflops: g.gflops.filter(|x| x.0.is_finite() && x.0 > 0.0),
                kind: format!("spec: {} GPU, {}", g.device, g.basis),
                source: PeakSource::Spec,
            };
        }
        let quantized = facts
            .dominant_type()
            .is_some_and(|t| t.traits().is_some_and(|x| x.is_block_quantized()));
        let (peak, kind) = if quantized {
            (self.peak_int8, crate::measure::peak::PeakKind::Int8Dot)
        } else {
            (self.peak_f32, crate::measure::peak::PeakKind::F32Fma)
        };
        PrefillPeak {
            gflops: peak.filter(|x| x.0.is_finite() && x.0 > 0.0),
            kind: kind.label().into(),
            source: PeakSource::Measured,
        }
    }
}

/// Per-model facts the harness computes once.
#[derive(Debug, Clone)]
pub struct ModelRun {
    /// GGUF facts.
    pub facts: ModelFacts,
    /// sha256 of the file.
    pub sha256: String,
}

/// Everything besides the engine that a run needs.
pub struct RunContext<'a> {
    /// The plan.
    pub plan: &'a BenchPlan,
    /// Host facts.
    pub host: &'a HostInfo,
    /// Bandwidth and peaks.
    pub roof: &'a MachineRoof,
    /// Run id in the store (0 if not stored yet).
    pub run_id: i64,
    /// Cancellation flag, checked between repetitions and decode steps.
    pub cancel: &'a std::sync::atomic::AtomicBool,
}

/// Ceiling (tok/s) and bytes per step of one instance. The ceiling is `None` when
/// a roof it needs is missing: a pp ceiling without a compute peak (see
/// [`PrefillPeak::missing_reason`]), any ceiling without a bandwidth.
pub fn instance_ceiling(
    facts: &ModelFacts,
    inst: &Instance,
    roof: &MachineRoof,
    plan: &BenchPlan,
) -> (Option<f64>, f64) {
    let finite = |v: f64| Some(v).filter(|v| v.is_finite());
    if inst.n_prompt > 0 {
        // Compute roof, or the bandwidth roof of reading the weights once per micro-batch
        // when the prompt is short, whichever is lower. Both are needed: the lower of
        // one known roof and one unknown is unknown.
        let p = inst.n_prompt as u64;
        let n_ub = p.div_ceil(plan.n_ubatch.max(1) as u64);
        let kv = facts
            .kv_bytes_read_at_depth(inst.n_depth as u64 + p, plan.type_k)
            .0 as f64;
        let bytes = n_ub as f64 * (facts.streamed_bytes.0 as f64 + kv);
        let ceiling = roof
            .peak_for(facts, plan.n_gpu_layers)
            .gflops
            .and_then(|peak| {
                let flops =
                    p as f64 * roofline::prefill_flops_per_token(facts, p, inst.n_depth as u64);
                let t_compute = flops / peak.per_s();
                let t_mem = bytes / roof.bandwidth.bytes_per_s();
                finite(p as f64 / t_compute.max(t_mem))
            });
        (ceiling, bytes / n_ub as f64)
    } else {
        (
            finite(decode_ceiling_at(facts, inst, plan, roof.bandwidth)),
            mean_step_bytes(facts, inst, inst.n_seqs as u64, plan.type_k),
        )
    }
}

/// Decode ceiling of a tg instance at `bandwidth`, tokens/s summed over the batch.
/// Each step reads the weights once plus every sequence's KV at its depth; the
/// ceiling is steps × b tokens over the summed time bytes ÷ bandwidth:
/// `b × bandwidth ÷ mean bytes per step`.
pub fn decode_ceiling_at(
    facts: &ModelFacts,
    inst: &Instance,
    plan: &BenchPlan,
    bandwidth: Gbps,
) -> f64 {
    let mean = mean_step_bytes(facts, inst, inst.n_seqs as u64, plan.type_k);
    inst.n_seqs as f64 * bandwidth.bytes_per_s() / mean
}

/// Mean FLOPs per token and arithmetic intensity (FLOP per byte read) of an instance.
/// pp: FLOPs of the whole prefill over the bytes of reading the weights once per
/// micro-batch plus the KV cache; tg: each step's `b` tokens over that step's bytes.
pub fn instance_compute(facts: &ModelFacts, inst: &Instance, plan: &BenchPlan) -> (f64, f64) {
    if inst.n_prompt > 0 {
        let p = inst.n_prompt as u64;
        let fpt = roofline::prefill_flops_per_token(facts, p, inst.n_depth as u64);
        let n_ub = p.div_ceil(plan.n_ubatch.max(1) as u64) as f64;
        let kv = facts
            .kv_bytes_read_at_depth(inst.n_depth as u64 + p, plan.type_k)
            .0 as f64;
        (
            fpt,
            fpt * p as f64 / (n_ub * (facts.streamed_bytes.0 as f64 + kv)),
        )
    } else {
        let n = inst.n_gen.max(1) as u64;
        let fpt = (0..n)
            .map(|i| roofline::flops_per_token(facts, inst.n_depth as u64 + i + 1))
            .sum::<f64>()
            / n as f64;
        let bytes = mean_step_bytes(facts, inst, inst.n_seqs as u64, plan.type_k);
        (fpt, fpt * inst.n_seqs as f64 / bytes)
    }
}

/// Mean bytes read per decode step of a tg instance with `batch` sequences: step `i`
/// (0-based) attends to `depth + i + 1` cached tokens.
pub fn mean_step_bytes(facts: &ModelFacts, inst: &Instance, batch: u64, cache: CacheType) -> f64 {
    let n = inst.n_gen.max(1) as u64;
    let total: f64 = (0..n)
        .map(|i| {
            roofline::bytes_per_step(facts, inst.n_depth as u64 + i + 1, batch, cache).0 as f64
        })
        .sum();
    total / n as f64
}

/// The memory a run on `facts` with `n_ctx` tokens of context needs, checked
/// against what is available now ([`crate::measure::guard::check_fit`]; `skip` is
/// `--skip-capacity-check`).
///
/// # Errors
/// [`BenchError::Guard`] naming every number, or the missing memory reading.
pub fn check_capacity(
    facts: &ModelFacts,
    n_ctx: u64,
    cache: CacheType,
    skip: bool,
) -> Result<crate::measure::guard::CapacityFinding, BenchError> {
    Ok(crate::measure::guard::check_fit(
        &[(facts, n_ctx)],
        cache,
        hw::available_memory(),
        skip,
    )?)
}

/// Builds the record for a finished instance from its samples and context.
#[allow(clippy::too_many_arguments)]
pub fn make_record(
    cx: &RunContext<'_>,
    mr: &ModelRun,
    inst: &Instance,
    engine: &crate::measure::engine::EngineInfo,
    samples_ns: Vec<u64>,
    test_time: String,
    before: &LiveState,
    after: &LiveState,
) -> BenchRecord {
    let plan = cx.plan;
    let facts = &mr.facts;
    let tokens = if inst.n_prompt > 0 {
        inst.n_prompt as f64
    } else {
        (inst.n_gen * inst.n_seqs) as f64
    };
    let samples_ts: Vec<f64> = samples_ns
        .iter()
        .map(|&ns| tokens * 1e9 / ns as f64)
        .collect();
    let ns = Sample::new(samples_ns.iter().map(|&x| x as f64).collect()).expect("reps ≥ 1, finite");
    let ts = Sample::new(samples_ts.clone()).expect("finite");
    let (ceiling, bytes_per_step) = instance_ceiling(facts, inst, cx.roof, plan);
    let peak = cx.roof.peak_for(facts, plan.n_gpu_layers);
    let (mut warnings, swapped) = crate::measure::guard::findings(before, after);
    if ceiling.is_none() {
        let reason = match (inst.n_prompt > 0, peak.missing_reason()) {
            (true, Some(r)) => r,
            _ => "no STREAM bandwidth".to_string(),
        };
        warnings.insert(0, Warning::NoCeiling { reason });
    }
    let outliers = ns.outliers().len();
    if outliers > 0 {
        warnings.push(Warning::Outliers { n: outliers });
    }
    let cv = ts.std_dev() / ts.mean();
    if ts.len() > 1 && cv > 0.05 {
        warnings.push(Warning::HighVariance { cv });
    }
    if cfg!(debug_assertions) {
        warnings.push(Warning::DebugBuild);
    }
    // Per-token-read bandwidth: aggregate tok/s × the bytes one token reads when decoded
    // alone (weights + its own KV). Above STREAM only if the batch shared the weight read.
    let implied =
        (inst.n_gen > 0).then(|| ts.mean() * mean_step_bytes(facts, inst, 1, plan.type_k) / 1e9);
    let (flops_per_token, intensity) = instance_compute(facts, inst, plan);
    // The same decode ceiling with the read kernel's bandwidth (decode writes almost
    // nothing, triad writes a third of its bytes).
    let ceiling_read = cx
        .roof
        .read_bandwidth
        .filter(|_| inst.n_prompt == 0)
        .map(|bw| decode_ceiling_at(facts, inst, plan, bw));
    BenchRecord {
        id: 0,
        run_id: cx.run_id,
        build_commit: crate::BUILD_COMMIT.to_string(),
        build_number: crate::build_number(),
        engine: engine.name.clone(),
        engine_build: engine.build.clone(),
        backends: engine.backends.clone(),
        system_info: engine.system_info.clone(),
        cpu_info: cx.host.cpu_model.clone(),
        gpu_info: cx.host.gpus.join(", "),
        model_filename: facts.path.display().to_string(),
        model_type: facts.model_type(),
        model_size: facts.tensor_bytes.0 as i64,
        model_n_params: facts.n_params as i64,
        model_sha256: mr.sha256.clone(),
        model_file_bytes: facts.file_bytes.0 as i64,
        quant: facts.quant.clone(),
        synthetic: facts.synthetic,
        n_batch: plan.n_batch as i64,
        n_ubatch: plan.n_ubatch as i64,
        n_threads: inst.n_threads as i64,
        n_gpu_layers: plan.n_gpu_layers as i64,
        llama: record::LlamaDefaults::default(),
        type_k: plan.type_k.name().into(),
        type_v: plan.type_v.name().into(),
        flash_attn: record::flash_attn_value(plan.flash_attn),
        n_prompt: inst.n_prompt as i64,
        n_gen: inst.n_gen as i64,
        n_depth: inst.n_depth as i64,
        n_seqs: inst.n_seqs as i64,
        test_time,
        avg_ns: ns.mean().round() as i64,
        stddev_ns: ns.std_dev().round() as i64,
        avg_ts: ts.mean(),
        stddev_ts: ts.std_dev(),
        min_ts: ts.min(),
        max_ts: ts.max(),
        samples_ns,
        samples_ts,
        bandwidth_gbps: cx.roof.bandwidth.0,
        stream_id: cx.roof.stream_id,
        peak_gflops: peak.gflops.map_or(f64::NAN, |g| g.0),
        peak_kind: peak.kind,
        streamed_bytes: facts.streamed_bytes.0 as i64,
        kv_bytes_per_token: facts.kv_bytes_per_token(plan.type_k).0 as i64,
        bytes_per_step,
        ceiling_ts: ceiling.unwrap_or(f64::NAN),
        achieved: ceiling.map_or(f64::NAN, |c| ts.mean() / c),
        implied_bandwidth_gbps: implied,
        flops_per_token,
        intensity,
        achieved_gflops: ts.mean() * flops_per_token / 1e9,
        bandwidth_kernel: "triad".into(),
        read_bandwidth_gbps: cx.roof.read_bandwidth.map(|b| b.0),
        decode_ceiling_ts_read: ceiling_read,
        achieved_read: ceiling_read.map(|c| ts.mean() / c),
        cores_logical: cx.host.cores_logical as i64,
        ram_bytes: cx.host.ram.0 as i64,
        os: cx.host.os.clone(),
        kernel: cx.host.kernel.clone(),
        hostname: cx.host.hostname.clone(),
        thermal_before: before.thermal.label(),
        thermal_after: after.thermal.label(),
        power_source: after.power.label().into(),
        swap_out_pages: swapped.map(|p| p as i64),
        warnings: warnings
            .iter()
            .map(|w| w.to_string())
            .collect::<Vec<_>>()
            .join("; "),
    }
}

pub mod job;
#[cfg(feature = "llama")]
mod run;
#[cfg(feature = "llama")]
pub use run::run_plan;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Bytes;

    fn plan() -> BenchPlan {
        BenchPlan {
            models: vec!["a.gguf".into()],
            n_prompt: vec![512],
            n_gen: vec![128],
            n_depth: vec![0, 512],
            n_seqs: vec![1],
            n_threads: vec![2],
            n_batch: 2048,
            n_ubatch: 512,
            n_gpu_layers: 0,
            type_k: CacheType::F16,
            type_v: CacheType::F16,
            flash_attn: None,
            reps: 5,
            seed: 42,
            allow_battery: false,
            skip_capacity_check: false,
        }
    }

    #[test]
    fn instances_follow_llama_bench_order() {
        let labels: Vec<String> = plan().instances().iter().map(Instance::label).collect();
        assert_eq!(labels, ["pp512", "tg128", "pp512 @ d512", "tg128 @ d512"]);
        let mut p = plan();
        p.n_seqs = vec![1, 4];
        p.n_prompt = vec![];
        p.n_depth = vec![0];
        let labels: Vec<String> = p.instances().iter().map(Instance::label).collect();
        assert_eq!(labels, ["tg128", "tg128 x4"]);
        assert_eq!(p.instances()[1].n_ctx(), 4 * 128);
    }

    #[test]
    fn invalid_plans_name_the_field() {
        let mut p = plan();
        p.reps = 0;
        assert!(
            p.validate()
                .unwrap_err()
                .to_string()
                .contains("-r must be at least 1")
        );
        let mut p = plan();
        p.n_threads = vec![0];
        assert!(
            p.validate()
                .unwrap_err()
                .to_string()
                .contains("-t needs positive")
        );
        let p = plan(); // a.gguf does not exist
        assert!(
            p.validate()
                .unwrap_err()
                .to_string()
                .contains("model file a.gguf does not exist")
        );
    }

    #[test]
    fn a_model_that_cannot_fit_is_refused_with_its_numbers() {
        let b = crate::probe::gguf::testutil::GgufBuilder::default()
            .kv_str("general.architecture", "llama")
            .kv_u32("llama.block_count", 1)
            .kv_u32("llama.embedding_length", 64)
            .kv_u32("llama.attention.head_count", 4)
            .tensor("token_embd.weight", &[64, 10], 0, 0)
            .data(2560)
            .build();
        let g = crate::probe::gguf::Gguf::parse(&b[..], b.len() as u64, "m.gguf".into()).unwrap();
        let mut f = ModelFacts::from_gguf(&g).unwrap();
        f.tensor_bytes = Bytes(1 << 50); // 1 PiB of weights
        let avail = Bytes(16 << 30);
        let fit = |f: &ModelFacts| {
            crate::measure::guard::check_fit(&[(f, 4096)], CacheType::F16, avail, false)
        };
        let e = fit(&f).unwrap_err().to_string();
        assert!(e.starts_with("m.gguf: needs "), "{e}");
        assert!(e.contains("weights 1125899.91 GB (1048576.00 GiB)"), "{e}");
        assert!(
            e.contains("KV cache 1.0 MB (1.0 MiB) for 4096 tokens"),
            "{e}"
        ); // 1 layer × 4 KV heads × (16 + 16) × 2 B × 4096 tokens
        assert!(e.contains("is available"), "{e}");
        f.tensor_bytes = Bytes(2560);
        assert!(fit(&f).is_ok());
    }

    /// Relative tolerance for hand-computed ceilings.
    const REL: f64 = 1e-12;

    /// One layer, 4 KV heads of dim 16 (f16 cache: 4 × (16 + 16) × 2 = 256 B per
    /// token), with 400 MB of weights streamed per step.
    fn facts_400mb() -> ModelFacts {
        let b = crate::probe::gguf::testutil::GgufBuilder::default()
            .kv_str("general.architecture", "llama")
            .kv_u32("llama.block_count", 1)
            .kv_u32("llama.embedding_length", 64)
            .kv_u32("llama.attention.head_count", 4)
            .tensor("token_embd.weight", &[64, 10], 0, 0)
            .data(2560)
            .build();
        let g = crate::probe::gguf::Gguf::parse(&b[..], b.len() as u64, "m.gguf".into()).unwrap();
        let mut f = ModelFacts::from_gguf(&g).unwrap();
        f.streamed_bytes = Bytes(400_000_000);
        assert_eq!(f.kv_bytes_per_token(CacheType::F16), Bytes(256));
        f
    }

    /// A one-layer model whose matmul weight is Q8_0 (so its prefill roof is the
    /// int8 dot peak): 64 × 64 Q8_0 = 128 blocks × 34 B.
    fn q8_facts() -> ModelFacts {
        let b = crate::probe::gguf::testutil::GgufBuilder::default()
            .kv_str("general.architecture", "llama")
            .kv_u32("llama.block_count", 1)
            .kv_u32("llama.embedding_length", 64)
            .kv_u32("llama.attention.head_count", 4)
            .tensor("token_embd.weight", &[64, 10], 0, 0)
            .tensor("blk.0.attn_q.weight", &[64, 64], 8, 2560)
            .data(2560 + 128 * 34)
            .build();
        let g = crate::probe::gguf::Gguf::parse(&b[..], b.len() as u64, "q8.gguf".into()).unwrap();
        ModelFacts::from_gguf(&g).unwrap()
    }

    fn roof(peak_int8: Option<Gflops>) -> MachineRoof {
        MachineRoof {
            bandwidth: Gbps(40.0),
            stream_id: 7,
            read_bandwidth: None,
            peak_f32: None,
            peak_int8,
            gpu: None,
        }
    }

    fn pp512() -> Instance {
        Instance {
            model: 0,
            n_prompt: 512,
            n_gen: 0,
            n_depth: 0,
            n_seqs: 1,
            n_threads: 2,
        }
    }

    #[test]
    fn a_missing_or_nan_peak_never_yields_a_prefill_ceiling() {
        let f = q8_facts();
        let plan = plan();
        for missing in [None, Some(Gflops(f64::NAN)), Some(Gflops(0.0))] {
            let (c, bytes) = instance_ceiling(&f, &pp512(), &roof(missing), &plan);
            assert_eq!(c, None, "peak {missing:?}");
            assert!(bytes > 0.0);
            let p = roof(missing).peak_for(&f, 0);
            assert_eq!(p.kind, "int8 dot");
            assert!(
                p.missing_reason()
                    .unwrap()
                    .starts_with("no compute peak measured: no int8 dot peak is stored"),
                "{p:?}"
            );
        }
        // The decode ceiling does not need a compute peak.
        let tg = Instance {
            n_prompt: 0,
            n_gen: 128,
            ..pp512()
        };
        assert!(instance_ceiling(&f, &tg, &roof(None), &plan).0.is_some());
        // With a peak: pp512 / max(t_compute, t_mem), by hand.
        let (c, _) = instance_ceiling(&f, &pp512(), &roof(Some(Gflops(100.0))), &plan);
        let flops = 512.0 * roofline::prefill_flops_per_token(&f, 512, 0);
        let kv = f.kv_bytes_read_at_depth(512, CacheType::F16).0 as f64;
        let t_mem = (f.streamed_bytes.0 as f64 + kv) / 40e9; // one micro-batch of 512
        let want = 512.0 / (flops / 100e9).max(t_mem);
        assert!((c.unwrap() - want).abs() <= 1e-9 * want, "{c:?} vs {want}");
    }

    #[test]
    fn a_gpu_spec_peak_is_used_only_with_offload_and_labelled_spec() {
        let f = q8_facts();
        let mut r = roof(Some(Gflops(100.0)));
        r.gpu = Some(GpuPeak {
            device: "M4 Pro".into(),
            gflops: Some(Gflops(9200.0)),
            basis: "fp32 (spec)".into(),
        });
        let p = r.peak_for(&f, 999);
        assert_eq!(p.gflops, Some(Gflops(9200.0)));
        assert_eq!(p.source, PeakSource::Spec);
        assert_eq!(p.kind, "spec: M4 Pro GPU, fp32 (spec)");
        assert_eq!(r.peak_for(&f, 0).gflops, Some(Gflops(100.0)));
        // A catalogued GPU without a figure: no ceiling, and it says why.
        r.gpu.as_mut().unwrap().gflops = None;
        let p = r.peak_for(&f, 999);
        assert!(p.gflops.is_none());
        assert!(
            p.missing_reason()
                .unwrap()
                .contains("no figure in catalog/devices.toml")
        );
    }

    #[test]
    fn a_record_without_peaks_has_no_prefill_ceiling_and_says_why() {
        let f = q8_facts();
        let mut plan = plan();
        plan.n_gpu_layers = 0;
        let host = hw::host_info();
        let r = roof(None);
        let cancel = std::sync::atomic::AtomicBool::new(false);
        let cx = RunContext {
            plan: &plan,
            host: &host,
            roof: &r,
            run_id: 1,
            cancel: &cancel,
        };
        let mr = ModelRun {
            facts: f,
            sha256: "aa".into(),
        };
        let live = LiveState {
            power: hw::PowerSource::Ac,
            thermal: hw::Thermal {
                state: hw::ThermalState::Unknown,
                max_celsius: None,
            },
            mem: hw::MemState {
                total: Bytes(1),
                available: Bytes(1),
                swap_total: Bytes(0),
                swap_used: Bytes(0),
            },
            swap_out_pages: None,
        };
        let engine = crate::measure::engine::EngineInfo {
            name: "llama.cpp".into(),
            build: "test".into(),
            backends: "CPU".into(),
            system_info: String::new(),
        };
        let samples = vec![1_000_000_000, 1_000_000_000, 1_000_000_000];
        let rec = make_record(
            &cx,
            &mr,
            &pp512(),
            &engine,
            samples,
            "t".into(),
            &live,
            &live,
        );
        assert!(rec.ceiling_ts.is_nan() && rec.achieved.is_nan() && rec.peak_gflops.is_nan());
        assert_eq!(rec.peak_kind, "int8 dot");
        let cell = |name: &str| {
            rec.fields()
                .into_iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, _, c)| c)
                .unwrap()
        };
        assert_eq!(cell("ceiling_ts"), record::Cell::Null);
        assert_eq!(cell("achieved"), record::Cell::Null);
        assert_eq!(cell("peak_gflops"), record::Cell::Null);
        assert!(
            rec.warnings.contains(
                "ceiling —: no compute peak measured: no int8 dot peak is stored for this host (run `memwall peak`)"
            ),
            "{}",
            rec.warnings
        );
        // A decode row of the same run has its ceiling and no such warning.
        let tg = Instance {
            n_prompt: 0,
            n_gen: 128,
            ..pp512()
        };
        let rec = make_record(
            &cx,
            &mr,
            &tg,
            &engine,
            vec![1_000_000_000; 3],
            "t".into(),
            &live,
            &live,
        );
        assert!(rec.ceiling_ts.is_finite() && !rec.warnings.contains("ceiling —"));
    }

    #[test]
    fn read_ceiling_matches_hand_arithmetic() {
        let facts = facts_400mb();
        let plan = plan();
        let tg = plan.instances()[1];
        assert_eq!(tg.label(), "tg128");
        // tg128 at depth 0: step i reads W + 256 × (i + 1) bytes; the mean over
        // i = 0..127 is 400,000,000 + 256 × 64.5 = 400,016,512 B.
        let mean = 400_016_512.0;
        assert_eq!(mean_step_bytes(&facts, &tg, 1, CacheType::F16), mean);
        // Read at 48 GB/s: 48e9 ÷ 400,016,512 = 119.995 t/s; triad at 40 GB/s: 99.996.
        let read = decode_ceiling_at(&facts, &tg, &plan, Gbps(48.0));
        assert!((read - 48e9 / mean).abs() < REL * read, "{read}");
        assert!((read - 119.995).abs() < 1e-3, "{read}");
        let roof = MachineRoof {
            bandwidth: Gbps(40.0),
            stream_id: 1,
            read_bandwidth: Some(Gbps(48.0)),
            peak_f32: Some(Gflops(100.0)),
            peak_int8: Some(Gflops(200.0)),
            gpu: None,
        };
        let (triad, bytes) = instance_ceiling(&facts, &tg, &roof, &plan);
        let triad = triad.unwrap();
        assert_eq!(bytes, mean);
        assert!(
            (read / triad - 1.2).abs() < REL,
            "same bytes, 48/40 the bandwidth"
        );
        // Four sequences: each step reads W + 4 × 256 × (i + 1); ceiling = 4 × bw ÷ mean.
        let x4 = Instance { n_seqs: 4, ..tg };
        let mean4 = 400_000_000.0 + 4.0 * 256.0 * 64.5;
        let read4 = decode_ceiling_at(&facts, &x4, &plan, Gbps(48.0));
        assert!((read4 - 4.0 * 48e9 / mean4).abs() < REL * read4, "{read4}");
    }

    #[test]
    fn records_carry_the_read_ceiling_on_decode_rows_only() {
        let facts = facts_400mb();
        let plan = plan();
        let host = hw::host_info();
        let live = hw::live_state();
        let engine = crate::measure::engine::EngineInfo {
            name: "llama.cpp".into(),
            build: "test".into(),
            backends: "CPU".into(),
            system_info: String::new(),
        };
        let mr = ModelRun {
            facts,
            sha256: "00".into(),
        };
        let cancel = std::sync::atomic::AtomicBool::new(false);
        let with_read = MachineRoof {
            bandwidth: Gbps(40.0),
            stream_id: 1,
            read_bandwidth: Some(Gbps(48.0)),
            peak_f32: Some(Gflops(100.0)),
            peak_int8: Some(Gflops(200.0)),
            gpu: None,
        };
        let without = MachineRoof {
            read_bandwidth: None,
            ..with_read.clone()
        };
        let rec = |roof: &MachineRoof, inst: &Instance| {
            let cx = RunContext {
                plan: &plan,
                host: &host,
                roof,
                run_id: 0,
                cancel: &cancel,
            };
            // Two repetitions of 2 s: 128 tokens ÷ 2 s = 64 t/s (pp512: 256 t/s).
            make_record(
                &cx,
                &mr,
                inst,
                &engine,
                vec![2_000_000_000, 2_000_000_000],
                "2026-01-01T00:00:00Z".into(),
                &live,
                &live,
            )
        };
        let [pp, tg, ..] = plan.instances()[..] else {
            panic!("plan has pp512 and tg128 first")
        };
        let r = rec(&with_read, &tg);
        let ceiling = 48e9 / 400_016_512.0;
        assert_eq!(r.bandwidth_kernel, "triad");
        assert_eq!(r.bandwidth_gbps, 40.0);
        assert_eq!(r.read_bandwidth_gbps, Some(48.0));
        let c = r.decode_ceiling_ts_read.unwrap();
        assert!((c - ceiling).abs() < REL * c, "{c}");
        let a = r.achieved_read.unwrap();
        assert!((a - 64.0 / ceiling).abs() < REL, "{a}");
        assert!((r.ceiling_ts - 40e9 / 400_016_512.0).abs() < REL * r.ceiling_ts);
        // pp rows: no decode ceiling with read; the read bandwidth is still recorded.
        let p = rec(&with_read, &pp);
        assert_eq!((p.decode_ceiling_ts_read, p.achieved_read), (None, None));
        assert_eq!(p.read_bandwidth_gbps, Some(48.0));
        // A STREAM run without the read kernel: NULL, never a number.
        let o = rec(&without, &tg);
        assert_eq!(
            (
                o.read_bandwidth_gbps,
                o.decode_ceiling_ts_read,
                o.achieved_read
            ),
            (None, None, None)
        );
    }
}
