//! The benchmark harness: a validated plan, expanded into test instances, run with
//! llama-bench's semantics, guarded, and turned into [`BenchRecord`](crate::store::record::BenchRecord)s.
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

use crate::measure::engine::EngineKind;
use crate::probe::hw::{self, HostInfo};
use crate::probe::model::{CacheType, ModelFacts};
use crate::roofline::{MachineRoof, Workload};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The engine a bench runs on: `--engine`'s choice, owned by the engine seam
/// ([`crate::measure::engine::EngineKind`]).
pub use crate::measure::engine::EngineKind as BenchEngine;

/// A benchmark plan as asked for (from the CLI's flags or the app's request):
/// [`BenchPlan::validate`] turns it into a [`ValidPlan`], the only plan the
/// harness runs.
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
    /// CPU thread counts to sweep (llama-bench's `-t`).
    pub n_threads: Vec<u32>,
    /// Logical batch size in tokens (llama-bench's `-b`).
    pub n_batch: u32,
    /// Physical micro-batch size in tokens (llama-bench's `-ub`).
    pub n_ubatch: u32,
    /// Layers offloaded to the GPU (llama-bench's `-ngl`).
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
    /// Engines to run every instance on, in order (`--engine llama,mlx`); empty means
    /// llama.cpp alone.
    #[serde(default)]
    pub engines: Vec<EngineKind>,
    /// Start even when the models' fit in memory cannot be checked or fails (`--skip-capacity-check`).
    #[serde(default)]
    pub skip_capacity_check: bool,
    /// Several GPUs: llama.cpp's split mode and tensor split (`--split-mode`,
    /// `--tensor-split`; llama-bench's `-sm`, `-ts`), passed to llama.cpp and recorded
    /// in every row's `split_mode` and `tensor_split` key columns.
    #[serde(default)]
    pub split: crate::roofline::multi_gpu::GpuSplit,
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

impl crate::experiments::SliceError for BenchError {}

impl BenchPlan {
    /// llama-bench's defaults (`cmd_params_defaults` in llama.cpp's
    /// `tools/llama-bench/llama-bench.cpp`): `-p 512 -n 128 -d 0 -b 2048 -ub 512
    /// -ctk f16 -ctv f16 -fa auto -r 5`, all layers offloaded (llama-bench's `-ngl -1`,
    /// [`crate::measure::engine::ALL_LAYERS`]), one sequence per tg test, and memwall's
    /// token seed 42. `models` and `n_threads` are empty: the caller names them
    /// (llama-bench's thread default is the physical core count). The CLI's flag
    /// defaults and the app's requests start from this one plan.
    pub fn llama_bench_defaults() -> BenchPlan {
        BenchPlan {
            models: Vec::new(),
            n_prompt: vec![512],
            n_gen: vec![128],
            n_depth: vec![0],
            n_seqs: vec![1],
            n_threads: Vec::new(),
            n_batch: 2048,
            n_ubatch: 512,
            n_gpu_layers: crate::measure::engine::ALL_LAYERS,
            type_k: CacheType::F16,
            type_v: CacheType::F16,
            flash_attn: None,
            reps: 5,
            seed: 42,
            allow_battery: false,
            engines: Vec::new(),
            skip_capacity_check: false,
            split: Default::default(),
        }
    }

    /// The engines to run ([`BenchPlan::engines`], llama.cpp when empty).
    pub fn engine_list(&self) -> Vec<EngineKind> {
        if self.engines.is_empty() {
            vec![EngineKind::Llama]
        } else {
            self.engines.clone()
        }
    }

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

    /// Checks the plan and reads every model's GGUF header (milliseconds, before
    /// anything is measured, so a truncated or malformed model fails fast): the
    /// one place a plan is checked.
    ///
    /// # Errors
    /// [`BenchError::Plan`] naming the bad field; [`BenchError::Model`] when a model
    /// fails the GGUF checks.
    pub fn validate(self) -> Result<ValidPlan, BenchError> {
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
            return bad("--n-seqs (parallel sequences) must be within 1..=256");
        }
        if self.reps == 0 {
            return bad("-r must be at least 1 (5 or more for a meaningful std)");
        }
        if self.n_batch == 0 || self.n_ubatch == 0 {
            return bad("--n-batch and --n-ubatch must be positive");
        }
        self.split
            .validate()
            .map_err(|e| BenchError::Plan(e.to_string()))?;
        if !self.split.is_default() && self.engine_list().iter().any(|e| e.name() != "llama") {
            return bad(
                "--split-mode and --tensor-split are llama.cpp's settings: run the MLX engines without them (--engine llama)",
            );
        }
        let mut facts = Vec::with_capacity(self.models.len());
        for m in &self.models {
            if !m.is_file() {
                return Err(BenchError::Plan(format!(
                    "model file {} does not exist (run `memwall models fetch` for the catalogue models)",
                    m.display()
                )));
            }
            facts.push(ModelFacts::open(m)?);
        }
        Ok(ValidPlan { plan: self, facts })
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

/// A plan that passed [`BenchPlan::validate`], with each model's GGUF facts read
/// there: what the bench job and [`run_plan`] take, so nothing downstream checks
/// the plan or parses a header again. Its fields are read through `Deref` and
/// cannot be changed (go back with [`ValidPlan::into_plan`] and validate again).
#[derive(Debug, Clone)]
pub struct ValidPlan {
    plan: BenchPlan,
    facts: Vec<ModelFacts>,
}

impl ValidPlan {
    /// The facts of model `model` (index into `models`), read when validated.
    pub fn facts(&self, model: usize) -> &ModelFacts {
        &self.facts[model]
    }

    /// The plan as asked for.
    pub fn into_plan(self) -> BenchPlan {
        self.plan
    }
}

impl std::ops::Deref for ValidPlan {
    type Target = BenchPlan;
    fn deref(&self) -> &BenchPlan {
        &self.plan
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
    /// Tokens already in the KV cache before the test (llama-bench's `-d`).
    pub n_depth: u32,
    /// Sequences decoded in parallel, one token each per step.
    pub n_seqs: u32,
    /// CPU threads the engine ran with (llama-bench's `-t`).
    pub n_threads: u32,
}

impl Instance {
    /// What this instance asks of the machine under `plan`, for the roofline's
    /// per-instance ceilings.
    pub fn workload(&self, plan: &BenchPlan) -> Workload {
        Workload {
            n_prompt: self.n_prompt,
            n_gen: self.n_gen,
            n_depth: self.n_depth,
            n_seqs: self.n_seqs,
            n_ubatch: plan.n_ubatch,
            type_k: plan.type_k,
            n_gpu_layers: plan.n_gpu_layers,
        }
    }
    /// Context this instance needs: `n_seqs × (depth + prompt + gen)` tokens.
    pub fn n_ctx(&self) -> u32 {
        self.n_seqs * (self.n_depth + self.n_prompt + self.n_gen).max(1)
    }
    /// `pp512`, `tg128 x4 @ d512` ([`record::test_label`]).
    pub fn label(&self) -> String {
        let n = |v: u32| i64::from(v);
        crate::store::record::test_label(
            n(self.n_prompt),
            n(self.n_gen),
            n(self.n_seqs),
            n(self.n_depth),
        )
    }
}

/// Per-model facts the harness computes once.
#[derive(Debug, Clone)]
pub struct ModelRun {
    /// Facts read from the file's GGUF header (shape, bytes per step, quant).
    pub facts: ModelFacts,
    /// sha256 of the file.
    pub sha256: String,
}

/// Everything besides the engine that a run needs.
pub struct RunContext<'a> {
    /// The plan being run.
    pub plan: &'a ValidPlan,
    /// The machine the run is on (CPU, RAM, OS).
    pub host: &'a HostInfo,
    /// Bandwidth and peaks.
    pub roof: &'a MachineRoof,
    /// Run id in the store (0 if not stored yet).
    pub run_id: i64,
    /// Cancellation flag, checked between repetitions and decode steps.
    pub cancel: &'a std::sync::atomic::AtomicBool,
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

/// Checks a plan's GPU split against the GPUs llama.cpp sees (a tensor split naming more
/// GPUs, `row` without a GPU), before anything is measured; llama.cpp's default split
/// passes without a look.
///
/// # Errors
/// [`BenchError::Plan`] naming the flag and the fix.
#[cfg(feature = "llama")]
pub fn check_split_devices(split: &crate::roofline::multi_gpu::GpuSplit) -> Result<(), BenchError> {
    if split.is_default() {
        return Ok(());
    }
    split
        .check_devices(crate::measure::engine::llama::gpu_count())
        .map_err(|e| BenchError::Plan(e.to_string()))
}

pub mod job;
pub mod record;
pub use super::progress::Progress;
pub use record::{Measured, make_record};
#[cfg(feature = "llama")]
mod run;
#[cfg(feature = "llama")]
pub use run::run_plan;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::bench::record::{Timing, detect_warnings};
    use crate::measure::guard::Findings;
    use crate::probe::hw::LiveState;
    use crate::roofline::{self, GpuPeak, InstanceCeiling, PeakKind, PeakSource};
    use crate::store::record;
    use crate::units::{Bytes, Gbps, Gflops};

    fn plan() -> BenchPlan {
        BenchPlan {
            models: vec!["a.gguf".into()],
            n_depth: vec![0, 512],
            n_threads: vec![2],
            n_gpu_layers: 0,
            ..BenchPlan::llama_bench_defaults()
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

    /// A plan validates into a `ValidPlan` holding each model's facts, read once from
    /// its header (here a GGUF written by memwall's synthesizer, two layers); a
    /// malformed header is refused there, naming the file.
    #[test]
    fn validation_reads_each_header_once_into_the_valid_plan() {
        use crate::probe::shape::{Arch, ModelShape, Recipe};
        let shape = ModelShape {
            arch: Arch::Qwen2,
            n_layer: 2,
            n_embd: 64,
            n_head: 2,
            n_head_kv: 1,
            head_dim: None,
            n_ff: 128,
            n_vocab: 300,
            tied_embeddings: true,
            n_expert: 0,
            n_expert_used: 0,
            n_ff_exp: 0,
            sliding_window: None,
            n_ctx_train: 256,
            lexicographic_order: false,
        };
        let d = tempfile::tempdir().unwrap();
        let good = d.path().join("tiny.gguf");
        let made = crate::probe::synth::write(
            &shape,
            &Recipe::parse("F16").unwrap(),
            "tiny",
            3,
            &good,
            |_, _| {},
        )
        .unwrap();
        let p = BenchPlan {
            models: vec![good.clone()],
            ..plan()
        };
        let v = p.clone().validate().unwrap();
        assert_eq!(v.facts(0).n_layer, 2);
        assert_eq!(v.facts(0).tensor_bytes, made.tensor_bytes);
        assert_eq!(*v, p, "the plan reads through unchanged");
        assert_eq!(v.into_plan(), p);
        let bad = d.path().join("truncated.gguf");
        let bytes = std::fs::read(&good).unwrap();
        std::fs::write(&bad, &bytes[..bytes.len() / 3]).unwrap();
        let e = BenchPlan {
            models: vec![bad],
            ..plan()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("truncated.gguf"), "{e}");
    }

    #[test]
    fn a_model_that_cannot_fit_is_refused_with_its_numbers() {
        let mut f = one_layer_facts();
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

    /// `m.gguf`: one llama layer, 4 KV heads of dim 16, a 2560-byte embedding.
    fn one_layer_facts() -> ModelFacts {
        crate::probe::model::one_layer_test_facts("m.gguf")
    }

    /// One layer, 4 KV heads of dim 16 (f16 cache: 4 × (16 + 16) × 2 = 256 B per
    /// token), with 400 MB of weights streamed per step.
    fn facts_400mb() -> ModelFacts {
        let mut f = one_layer_facts();
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
            let InstanceCeiling {
                ceiling_tps: c,
                bytes_per_step: bytes,
                ..
            } = roofline::instance_ceiling(&f, &pp512().workload(&plan), &roof(missing));
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
        assert!(
            roofline::instance_ceiling(&f, &tg.workload(&plan), &roof(None))
                .ceiling_tps
                .is_some()
        );
        // With a peak: pp512 / max(t_compute, t_mem), by hand.
        let c =
            roofline::instance_ceiling(&f, &pp512().workload(&plan), &roof(Some(Gflops(100.0))))
                .ceiling_tps;
        let flops = 512.0 * roofline::prefill_flops_per_token(&f, 512, 0);
        let kv = f.kv_bytes_read_at_depth(512, CacheType::F16).0 as f64;
        let t_mem = (f.streamed_bytes.0 as f64 + kv) / 40e9; // one micro-batch of 512
        let want = 512.0 / (flops / 100e9).max(t_mem);
        assert!((c.unwrap() - want).abs() <= 1e-9 * want, "{c:?} vs {want}");
    }

    /// llama.cpp runs block-quantized weights on the int8 dot peak; MLX's arms of the
    /// same file compute in f32 and get the f32 FMA peak.
    #[test]
    fn an_mlx_arm_gets_the_f32_peak_and_its_gguf_the_int8_peak() {
        let mut f = q8_facts();
        let mut r = roof(Some(Gflops(100.0)));
        r.peak_f32 = Some(Gflops(30.0));
        assert_eq!(r.peak_for(&f, 0).gflops, Some(Gflops(100.0)));
        for arm in ["mlx-4bit", "mlx-8bit", "mlx-f16"] {
            f.quant = arm.into();
            let p = r.peak_for(&f, 0);
            assert_eq!(p.gflops, Some(Gflops(30.0)), "{arm}");
            assert_eq!(p.kind, PeakKind::F32Fma.label(), "{arm}");
        }
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
            plan: &ValidPlan {
                plan: plan.clone(),
                facts: vec![],
            },
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
        let measured = |samples_ns: Vec<u64>| Measured {
            engine: engine.clone(),
            samples_ns,
            test_time: "t".into(),
            before: live.clone(),
            after: live.clone(),
        };
        let rec = make_record(&cx, &mr, &pp512(), measured(samples));
        assert_eq!(
            (rec.ceiling_ts, rec.achieved, rec.peak_gflops),
            (None, None, None)
        );
        assert_eq!(rec.peak_kind, "int8 dot");
        let cell = |name: &str| {
            rec.fields()
                .into_iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, _, c)| c)
                .unwrap()
        };
        assert_eq!(cell("ceiling_ts"), record::ColumnValue::Null);
        assert_eq!(cell("achieved"), record::ColumnValue::Null);
        assert_eq!(cell("peak_gflops"), record::ColumnValue::Null);
        assert!(
            rec.warnings.iter().any(|w| w
                == "ceiling —: no compute peak measured: no int8 dot peak is stored for this host (run `memwall peak`)"),
            "{:?}",
            rec.warnings
        );
        // A decode row of the same run has its ceiling and no such warning.
        let tg = Instance {
            n_prompt: 0,
            n_gen: 128,
            ..pp512()
        };
        let rec = make_record(&cx, &mr, &tg, measured(vec![1_000_000_000; 3]));
        assert!(rec.ceiling_ts.is_some() && !rec.warnings.iter().any(|w| w.contains("ceiling —")));
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
        assert_eq!(plan.type_k, CacheType::F16);
        assert_eq!(
            roofline::mean_step_bytes(&facts, &tg.workload(&plan), 1),
            mean
        );
        // Read at 48 GB/s: 48e9 ÷ 400,016,512 = 119.995 t/s; triad at 40 GB/s: 99.996.
        let read = roofline::decode_ceiling_at(&facts, &tg.workload(&plan), Gbps(48.0));
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
        let InstanceCeiling {
            ceiling_tps: triad,
            bytes_per_step: bytes,
            ..
        } = roofline::instance_ceiling(&facts, &tg.workload(&plan), &roof);
        let triad = triad.unwrap();
        assert_eq!(bytes, mean);
        assert!(
            (read / triad - 1.2).abs() < REL,
            "same bytes, 48/40 the bandwidth"
        );
        // Four sequences: each step reads W + 4 × 256 × (i + 1); ceiling = 4 × bw ÷ mean.
        let x4 = Instance { n_seqs: 4, ..tg };
        let mean4 = 400_000_000.0 + 4.0 * 256.0 * 64.5;
        let read4 = roofline::decode_ceiling_at(&facts, &x4.workload(&plan), Gbps(48.0));
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
                plan: &ValidPlan {
                    plan: plan.clone(),
                    facts: vec![],
                },
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
                Measured {
                    engine: engine.clone(),
                    samples_ns: vec![2_000_000_000, 2_000_000_000],
                    test_time: "2026-01-01T00:00:00Z".into(),
                    before: live.clone(),
                    after: live.clone(),
                },
            )
        };
        let [pp, tg, ..] = plan.instances()[..] else {
            panic!("plan has pp512 and tg128 first")
        };
        let r = rec(&with_read, &tg);
        let ceiling = 48e9 / 400_016_512.0;
        assert_eq!(r.bandwidth_kernel, "triad");
        assert_eq!(r.bandwidth_gbps, Some(40.0));
        assert_eq!(r.read_bandwidth_gbps, Some(48.0));
        let c = r.decode_ceiling_ts_read.unwrap();
        assert!((c - ceiling).abs() < REL * c, "{c}");
        let a = r.achieved_read.unwrap();
        assert!((a - 64.0 / ceiling).abs() < REL, "{a}");
        let c = r.ceiling_ts.unwrap();
        assert!((c - 40e9 / 400_016_512.0).abs() < REL * c);
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

    fn live(power: hw::PowerSource, swap_out_pages: Option<u64>) -> LiveState {
        LiveState {
            power,
            thermal: hw::Thermal {
                state: hw::ThermalState::Nominal,
                max_celsius: None,
            },
            mem: hw::MemState {
                total: Bytes(1),
                available: Bytes(1),
                swap_total: Bytes(0),
                swap_used: Bytes(0),
            },
            swap_out_pages,
        }
    }

    #[test]
    fn warnings_are_detected_in_order_with_the_missing_roof_first() {
        use crate::measure::warning::Warning;
        let plan = plan();
        let tg = Instance {
            n_prompt: 0,
            n_gen: 128,
            ..pp512()
        }
        .workload(&plan);
        // Six repetitions, one three times slower: median 1.005 s, MAD 0.01 s, so the
        // 3 s one has |modified z| = 0.6745 × 1.995 ÷ 0.01 = 134.6 > 3.5 and the 1.02 s
        // one 1.01 (not an outlier).
        let ns = [
            1_000_000_000,
            1_010_000_000,
            990_000_000,
            1_000_000_000,
            1_020_000_000,
            3_000_000_000,
        ];
        let timing = Timing::new(&tg, &ns);
        let ts: Vec<f64> = ns.iter().map(|&t| 128e9 / t as f64).collect();
        assert_eq!(timing.samples_ts, ts);
        let mean = ts.iter().sum::<f64>() / 6.0;
        let sd = (ts.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 5.0).sqrt();
        let f = facts_400mb();
        let placed = roofline::place(&f, &tg, &roof(None), mean);
        let Findings {
            warnings: w,
            swap_out_pages: swapped,
        } = detect_warnings(
            &timing,
            &placed,
            &live(hw::PowerSource::Battery { percent: None }, Some(10)),
            &live(hw::PowerSource::Ac, Some(13)),
        );
        assert_eq!(swapped, Some(3));
        let mut want = vec![
            Warning::OnBattery,
            Warning::Swapping { pages: 3 },
            Warning::Outliers { n: 1 },
        ];
        let Warning::HighVariance { cv } = w[3] else {
            panic!("{w:?}")
        };
        assert!((cv - sd / mean).abs() < 1e-12 && cv > 0.05, "{cv}");
        want.push(Warning::HighVariance { cv });
        if cfg!(debug_assertions) {
            want.push(Warning::DebugBuild);
        }
        assert_eq!(w, want);
        // A pp row with no compute peak: the missing roof comes first, naming the peak.
        let pp = pp512().workload(&plan);
        let q8 = q8_facts();
        let timing = Timing::new(&pp, &[1_000_000_000; 3]);
        let placed = roofline::place(&q8, &pp, &roof(None), timing.ts.mean());
        let same = live(hw::PowerSource::Ac, Some(0));
        let w = detect_warnings(&timing, &placed, &same, &same).warnings;
        assert_eq!(
            w[0].to_string(),
            "ceiling —: no compute peak measured: no int8 dot peak is stored for this host (run `memwall peak`)"
        );
        assert_eq!(w.len(), 1 + cfg!(debug_assertions) as usize, "{w:?}");
    }

    #[test]
    fn no_warning_text_contains_the_separator_older_rows_were_joined_with() {
        use crate::measure::warning::Warning;
        let f = q8_facts();
        let mut r = roof(None);
        let measured = r.peak_for(&f, 0).missing_reason().unwrap();
        r.gpu = Some(GpuPeak {
            device: "M4 Pro".into(),
            gflops: None,
            basis: "fp32 (spec)".into(),
        });
        let spec = r.peak_for(&f, 999).missing_reason().unwrap();
        let thermal = hw::Thermal {
            state: hw::ThermalState::Throttling,
            max_celsius: Some(97.5),
        };
        let all = [
            Warning::OnBattery,
            Warning::Swapping { pages: 3 },
            Warning::Thermal {
                state: thermal.label(),
            },
            Warning::Outliers { n: 2 },
            Warning::HighVariance { cv: 0.07 },
            Warning::DebugBuild,
            Warning::NoCeiling { reason: measured },
            Warning::NoCeiling { reason: spec },
            Warning::NoCeiling {
                reason: "no STREAM bandwidth".into(),
            },
        ];
        for w in all {
            let t = w.to_string();
            assert!(!t.contains(record::WARNINGS_SEPARATOR), "{t}");
        }
    }

    #[test]
    fn a_decode_row_is_placed_by_hand_arithmetic() {
        let f = facts_400mb();
        let plan = plan();
        let [pp, tg, ..] = plan.instances()[..] else {
            panic!("plan has pp512 and tg128 first")
        };
        let r = MachineRoof {
            read_bandwidth: Some(Gbps(48.0)),
            ..roof(Some(Gflops(100.0)))
        };
        // tg128 at 64 t/s: one sequence reads 400,016,512 B per token on average, so the
        // implied bandwidth is 64 × 400,016,512 ÷ 1e9 = 25.601056768 GB/s.
        let p = roofline::place(&f, &tg.workload(&plan), &r, 64.0);
        let implied = p.implied_bandwidth.unwrap().0;
        assert!(
            (implied - 25.601_056_768).abs() < REL * implied,
            "{implied}"
        );
        let triad = p.triad.unwrap();
        assert!((triad.ceiling_tps - 40e9 / 400_016_512.0).abs() < REL * triad.ceiling_tps);
        assert!((triad.achieved - 64.0 / triad.ceiling_tps).abs() < REL);
        let read = p.read.unwrap();
        assert!((read.ceiling_tps - 48e9 / 400_016_512.0).abs() < REL * read.ceiling_tps);
        let fpt = p.compute.flops_per_token;
        assert!((p.achieved_compute.0 - 64.0 * fpt / 1e9).abs() < REL * p.achieved_compute.0);
        assert!(
            (p.compute.arithmetic_intensity - fpt / 400_016_512.0).abs()
                < REL * p.compute.arithmetic_intensity
        );
        // A pp row has no implied bandwidth and no read ceiling.
        let p = roofline::place(&f, &pp.workload(&plan), &r, 256.0);
        assert_eq!((p.implied_bandwidth, p.read), (None, None));
    }
}
