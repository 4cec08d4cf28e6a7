//! The MLX engine (feature `mlx`): models written with mlx-rs ops ([`qwen2`]:
//! Qwen2, and GGUF `llama` files, which differ from it only in having no q/k/v
//! biases and in their RoPE pairing), weights read from the same GGUF files llama.cpp
//! loads ([`weights`]: dequantized by llama.cpp's own `to_float`, then held as
//! f16 or quantized by MLX to 8 or 4 bits, group 64), and tokenization through
//! llama.cpp's vocabulary of that file (a vocab-only load), so both engines see
//! identical tokens.
//!
//! On Linux MLX runs on the CPU (PyPI's `mlx-cpu` build, `scripts/setup-mlx.sh`);
//! on macOS stock mlx-rs uses Metal.
//!
//! Batches: the items of one [`Engine::decode`] call are grouped by sequence, and
//! each sequence's items must continue that sequence's cache (positions
//! `len, len+1, …`). All groups run in one forward pass ([`qwen2::Qwen2::forward_batch`]):
//! the matrices multiply every sequence's rows at once, attention runs per sequence.

pub mod qwen2;
pub mod weights;

use super::llama::LlamaModelHandle;
use super::{
    BatchItem, ChatMessage, Engine, EngineError, EngineInfo, HeldModel, TokenEntry, TokenId, Vocab,
};
use qwen2::{KvCache, Qwen2, SeqInput};
use std::collections::BTreeMap;
use std::path::Path;
pub use weights::MlxQuant;

/// Version of MLX this binary links (the mlx-cpu wheel's on Linux).
pub const MLX_VERSION: &str = env!("MEMWALL_MLX_VERSION");

/// The build string rows carry: `mlx 0.32.2 (mlx-rs 0.33.0, cpu)`.
pub fn engine_build() -> String {
    format!("mlx {MLX_VERSION} (mlx-rs 0.33.0, {})", device())
}

/// MLX's default device: `cpu` or `gpu`.
pub fn device() -> &'static str {
    let gpu = mlx_rs::Device::try_default()
        .and_then(|d| d.get_type())
        .is_ok_and(|t| matches!(t, mlx_rs::DeviceType::Gpu));
    if gpu { "gpu" } else { "cpu" }
}

/// The dtype of the activations (the hidden state, q/k/v, attention, the FFN):
/// f32 where MLX's default device is the CPU (llama.cpp's CPU path keeps f32
/// activations too, and x86 has no f16 arithmetic), f16 on a GPU, as mlx-lm runs an
/// f16 model there. On a GPU f32 would cost every step: MLX's `quantized_matmul`
/// casts the scales and biases to the activations' dtype, so each matrix's scales
/// and biases would be widened again on every decode step, and the f16 KV cache
/// widened for attention. `MEMWALL_MLX_ACT=f16|f32` overrides (for experiments);
/// decided once per process, and named in every row's `system_info`.
pub fn act_dtype() -> mlx_rs::Dtype {
    static A: std::sync::OnceLock<mlx_rs::Dtype> = std::sync::OnceLock::new();
    *A.get_or_init(|| {
        if let Ok(v) = std::env::var("MEMWALL_MLX_ACT") {
            match v.trim() {
                "f16" => return mlx_rs::Dtype::Float16,
                "f32" => return mlx_rs::Dtype::Float32,
                _ => tracing::warn!(
                    "MEMWALL_MLX_ACT={v:?} is neither f16 nor f32: ignored (f32 on the CPU, f16 on a GPU)"
                ),
            }
        }
        if device() == "gpu" {
            mlx_rs::Dtype::Float16
        } else {
            mlx_rs::Dtype::Float32
        }
    })
}

/// `f16` or `f32`: the activations' dtype as rows name it.
pub fn act_name() -> &'static str {
    match act_dtype() {
        mlx_rs::Dtype::Float16 => "f16",
        _ => "f32",
    }
}

/// The BLAS libmlx's matmuls run on: OpenBLAS's configuration string on Linux
/// (e.g. `OpenBLAS 0.3.21 NO_AFFINITY Zen MAX_THREADS=64`), `Accelerate` on macOS.
pub fn blas() -> String {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: returns a pointer to a static NUL-terminated string.
        let p = unsafe { mlx_sys::openblas_get_config() };
        if p.is_null() {
            return "OpenBLAS".into();
        }
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .trim()
            .to_string()
    }
    #[cfg(not(target_os = "linux"))]
    {
        "Accelerate".into()
    }
}

/// Errors of loading a model into MLX.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MlxError {
    /// A metadata key the architecture needs is missing or wrong.
    #[error("{path}: metadata key {key} {reason}")]
    Config {
        /// The GGUF file.
        path: String,
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A tensor could not be read or converted.
    #[error("{path}: tensor `{tensor}`: {reason}")]
    Weights {
        /// The GGUF file.
        path: String,
        /// The tensor name.
        tensor: String,
        /// What went wrong.
        reason: String,
    },
}

impl From<MlxError> for EngineError {
    fn from(e: MlxError) -> Self {
        let path = match &e {
            MlxError::Config { path, .. } | MlxError::Weights { path, .. } => path.clone(),
        };
        EngineError::Load {
            path,
            reason: e.to_string(),
        }
    }
}

fn mlx_err(what: &str) -> impl Fn(mlx_rs::error::Exception) -> EngineError + '_ {
    move |e| EngineError::Decode(format!("MLX {what}: {e}"))
}

/// An MLX model with its KV caches (one per sequence) and its tokenizer.
pub struct MlxEngine {
    model: Qwen2,
    quant: MlxQuant,
    vocab: LlamaModelHandle,
    caches: BTreeMap<i32, KvCache>,
    logits: Vec<f32>,
    n_logits: usize,
    n_ctx: u32,
    n_batch: u32,
}

impl MlxEngine {
    /// Loads the GGUF at `path` into MLX as `quant` says, with a context of `n_ctx`
    /// positions per sequence and batches of up to `n_batch` tokens.
    ///
    /// # Errors
    /// [`EngineError::Model`] when the file fails memwall's GGUF checks;
    /// [`EngineError::Load`] naming the file and key or tensor otherwise.
    pub fn load(
        path: &Path,
        quant: MlxQuant,
        n_ctx: u32,
        n_batch: u32,
    ) -> Result<MlxEngine, EngineError> {
        let gguf = crate::probe::gguf::Gguf::open(path)?;
        let model = Qwen2::load(&gguf, quant, act_dtype())?;
        let vocab = LlamaModelHandle::load_vocab_only(path)?;
        Ok(MlxEngine {
            model,
            quant,
            vocab,
            caches: BTreeMap::new(),
            logits: Vec::new(),
            n_logits: 0,
            n_ctx,
            n_batch: n_batch.max(1),
        })
    }

    /// llama.cpp's vocabulary of the file (a vocab-only load), which this engine
    /// tokenizes with.
    pub fn vocab_handle(&self) -> &LlamaModelHandle {
        &self.vocab
    }

    /// The arm: `mlx-f16`, `mlx-8bit`, `mlx-4bit`.
    pub fn quant(&self) -> MlxQuant {
        self.quant
    }

    /// Bytes of the weight arrays held (the memory the arm takes).
    pub fn weight_bytes(&self) -> u64 {
        self.model.weight_bytes()
    }

    /// Bytes one batch-1 decode step streams from the arrays held, before the KV
    /// cache: the roofline's bytes per decoded token, by the rule llama.cpp's rows
    /// use too ([`crate::probe::model::decode_step_bytes`]: an untied token
    /// embedding is a one-row gather).
    pub fn streamed_bytes(&self) -> u64 {
        self.model.streamed_bytes()
    }

    /// Every array held, under its GGUF tensor name, with its bytes.
    pub fn held_tensors(&self) -> Vec<crate::probe::model::HeldTensor> {
        self.model.held_tensors()
    }

    /// Bytes of the KV cache of sequence `seq` (0 when it holds nothing).
    pub fn kv_bytes(&self, seq: i32) -> u64 {
        self.caches.get(&seq).map_or(0, KvCache::nbytes)
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &qwen2::Qwen2Config {
        &self.model.cfg
    }

    /// Greedy generation, pipelined as mlx-lm's `generate_step`: after `prompt`
    /// (continuing sequence `seq`'s cache), up to `n_gen` tokens, each the argmax of
    /// the last one's logits. The sampled token stays on the device, and step t + 1
    /// is built and queued (`async_eval`) before step t's token is read, so building
    /// a step's graph overlaps the device running the last. `on_token` gets each token
    /// as soon as it is read. Stops after an end-of-generation token when
    /// `stop_at_eog`. The tokens equal those of [`Engine::decode`] with a host argmax
    /// (`greedy_generation_equals_step_by_step_decoding`), and the cache ends as that
    /// loop leaves it: the prompt and every generated token but the last.
    ///
    /// # Errors
    /// [`EngineError::Decode`] for an empty prompt, a run past `n_ctx` or a failed
    /// pass; the sequence's cache is then as it was.
    pub fn generate_greedy(
        &mut self,
        seq: i32,
        prompt: &[TokenId],
        n_gen: usize,
        stop_at_eog: bool,
        mut on_token: impl FnMut(TokenId),
    ) -> Result<Vec<TokenId>, EngineError> {
        let saved = self.caches.remove(&seq).unwrap_or_default();
        let start = saved.len();
        let need = start as usize + prompt.len() + n_gen.saturating_sub(1);
        if prompt.is_empty() || need > self.n_ctx as usize {
            self.caches.insert(seq, saved);
            return Err(EngineError::Decode(if prompt.is_empty() {
                "greedy generation needs at least one prompt token".into()
            } else {
                format!(
                    "sequence {seq}: {start} cached + {} prompt + {} generated positions exceed n_ctx {}",
                    prompt.len(),
                    n_gen.saturating_sub(1),
                    self.n_ctx
                )
            }));
        }
        let mut cache = saved.clone();
        let (model, vocab) = (&self.model, &self.vocab);
        let mut run = |cache: &mut KvCache| -> Result<Vec<TokenId>, mlx_rs::error::Exception> {
            let mut out = Vec::with_capacity(n_gen);
            if n_gen == 0 {
                model.forward(prompt, cache, &[])?;
                return Ok(out);
            }
            let last = [prompt.len() as i32 - 1];
            let logits = model.forward(prompt, cache, &last)?.ok_or_else(|| {
                mlx_rs::error::Exception::custom("the prompt's last row gave no logits")
            })?;
            let mut y = mlx_rs::ops::indexing::argmax_axis(&logits, -1, None)?;
            mlx_rs::transforms::async_eval([&y])?;
            loop {
                let next = if out.len() + 1 < n_gen {
                    let nx = model.greedy_step(&y, cache)?;
                    mlx_rs::transforms::async_eval([&nx])?;
                    Some(nx)
                } else {
                    None
                };
                let t = qwen2::token_id(&y)?;
                out.push(t);
                on_token(t);
                if stop_at_eog && vocab.is_eog(t) {
                    break;
                }
                match next {
                    Some(nx) => y = nx,
                    None => break,
                }
            }
            // A step queued after the last token read (an end of generation) fed
            // that token: keep the prompt and all generated tokens but the last.
            cache.truncate(start + prompt.len() as u32 + out.len() as u32 - 1)?;
            Ok(out)
        };
        match run(&mut cache) {
            Ok(out) => {
                self.caches.insert(seq, cache);
                Ok(out)
            }
            Err(e) => {
                self.caches.insert(seq, saved);
                Err(mlx_err("greedy generation")(e))
            }
        }
    }
}

impl Engine for MlxEngine {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "mlx".into(),
            build: engine_build(),
            backends: if device() == "gpu" {
                "MLX-GPU".into()
            } else {
                "CPU".into()
            },
            system_info: if device() == "gpu" && cfg!(target_os = "linux") {
                // libmlx's CUDA build: matrices multiply on the GPU (cuBLASLt, MLX's
                // own quantized kernels); the host BLAS serves CPU-stream ops only.
                format!(
                    "MLX {MLX_VERSION} gpu (CUDA) {}, {} activations; host BLAS {}",
                    self.quant.name(),
                    act_name(),
                    blas()
                )
            } else {
                // The CPU's rows name the activations only where they are not the
                // CPU's f32 (an override).
                let act = match act_name() {
                    "f32" if device() == "cpu" => String::new(),
                    a => format!(", {a} activations"),
                };
                format!(
                    "MLX {MLX_VERSION} {} {}{act}; BLAS {}",
                    device(),
                    self.quant.name(),
                    blas()
                )
            },
        }
    }

    fn n_vocab(&self) -> usize {
        self.model.n_vocab()
    }

    fn n_ctx(&self) -> u32 {
        self.n_ctx
    }

    fn n_batch(&self) -> u32 {
        self.n_batch
    }

    fn decode(&mut self, batch: &[BatchItem]) -> Result<(), EngineError> {
        if batch.len() > self.n_batch as usize {
            return Err(EngineError::Decode(format!(
                "batch of {} tokens exceeds n_batch {}",
                batch.len(),
                self.n_batch
            )));
        }
        // Group by sequence; every sequence's items must continue its cache.
        let mut order: Vec<i32> = Vec::new();
        for it in batch {
            if !order.contains(&it.seq) {
                order.push(it.seq);
            }
        }
        let mut groups = Vec::with_capacity(order.len());
        for &seq in &order {
            let items: Vec<(usize, &BatchItem)> = batch
                .iter()
                .enumerate()
                .filter(|(_, it)| it.seq == seq)
                .collect();
            let len = self.caches.get(&seq).map_or(0, KvCache::len);
            for (j, (_, it)) in items.iter().enumerate() {
                let want = len + j as u32;
                if it.pos != want {
                    return Err(EngineError::Decode(format!(
                        "sequence {seq}: position {} given where the cache continues at {want} \
                         (truncate the KV cache first to rewrite positions)",
                        it.pos
                    )));
                }
            }
            if len + items.len() as u32 > self.n_ctx {
                return Err(EngineError::Decode(format!(
                    "sequence {seq}: {len} + {} positions exceed n_ctx {}",
                    items.len(),
                    self.n_ctx
                )));
            }
            let tokens: Vec<i32> = items.iter().map(|(_, it)| it.token).collect();
            let keep: Vec<i32> = (0..items.len() as i32)
                .filter(|&j| items[j as usize].1.logits)
                .collect();
            let at: Vec<usize> = keep.iter().map(|&j| items[j as usize].0).collect();
            groups.push((seq, tokens, keep, at));
        }
        // All sequences in one pass (the weights are read once for every row). The
        // caches are taken out for the pass; a failed pass puts the old ones back.
        let mut caches: Vec<KvCache> = order
            .iter()
            .map(|s| self.caches.get(s).cloned().unwrap_or_default())
            .collect();
        let out = {
            let mut inputs: Vec<SeqInput<'_>> = groups
                .iter()
                .zip(caches.iter_mut())
                .map(|((_, tokens, keep, _), cache)| SeqInput {
                    tokens,
                    cache,
                    keep,
                })
                .collect();
            self.model
                .forward_batch(&mut inputs)
                .map_err(mlx_err("forward pass"))?
        };
        for (&seq, cache) in order.iter().zip(caches) {
            self.caches.insert(seq, cache);
        }
        let n_vocab = self.model.n_vocab();
        // Logits rows in the caller's order of the items that asked for them.
        let mut at: Vec<(usize, usize)> = groups
            .iter()
            .flat_map(|g| g.3.iter().copied())
            .enumerate()
            .map(|(r, at)| (at, r))
            .collect();
        at.sort_unstable();
        self.n_logits = at.len();
        self.logits.clear();
        if let Some(out) = out {
            let flat = out.as_slice::<f32>();
            for (_, r) in at {
                self.logits
                    .extend_from_slice(&flat[r * n_vocab..(r + 1) * n_vocab]);
            }
        }
        Ok(())
    }

    fn logits(&self, i: usize) -> Result<&[f32], EngineError> {
        let n = self.model.n_vocab();
        if i >= self.n_logits {
            return Err(EngineError::NoLogits {
                index: i,
                kept: self.n_logits,
            });
        }
        Ok(&self.logits[i * n..(i + 1) * n])
    }

    fn kv_truncate(&mut self, seq: i32, from_pos: u32) -> Result<(), EngineError> {
        if let Some(c) = self.caches.get_mut(&seq) {
            c.truncate(from_pos)
                .map_err(|e| EngineError::Kv(format!("MLX truncate: {e}")))?;
        }
        Ok(())
    }

    fn kv_clear(&mut self) {
        self.caches.clear();
    }

    fn synchronize(&mut self) {}

    fn held_model(&self) -> Option<HeldModel> {
        Some(HeldModel {
            quant: self.quant.name(),
            weight_bytes: self.weight_bytes(),
            streamed_bytes: self.streamed_bytes(),
            n_threads: weights::n_lanes() as u32,
        })
    }

    fn kv_copy(&mut self, src: i32, dst: i32, n_tokens: u32) -> Result<(), EngineError> {
        let mut c = self.caches.get(&src).cloned().unwrap_or_default();
        c.truncate(n_tokens)
            .map_err(|e| EngineError::Kv(format!("MLX copy: {e}")))?;
        self.caches.insert(dst, c);
        Ok(())
    }
}

/// llama.cpp's vocabulary of the same file (a vocab-only load), so both engines
/// see identical tokens.
impl Vocab for MlxEngine {
    fn tokenize(&self, text: &str, add_special: bool) -> Result<Vec<TokenId>, EngineError> {
        self.vocab.tokenize(text, add_special)
    }
    fn token_bytes(&self, token: TokenId) -> Vec<u8> {
        self.vocab.token_bytes(token)
    }
    fn is_eog(&self, token: TokenId) -> bool {
        self.vocab.is_eog(token)
    }
    fn bos(&self) -> Option<TokenId> {
        self.vocab.bos()
    }
    fn apply_builtin_template(
        &self,
        name: &str,
        messages: &[ChatMessage],
    ) -> Result<String, EngineError> {
        self.vocab.apply_builtin_template(name, messages)
    }
    fn vocabulary(&self) -> Result<Vec<TokenEntry>, EngineError> {
        self.vocab.vocabulary()
    }
    fn tokenize_plain(&self, text: &str) -> Result<Vec<TokenId>, EngineError> {
        self.vocab.tokenize_plain(text)
    }
    fn prompt_vocab(&self) -> Result<crate::measure::prompt::PromptVocab, EngineError> {
        self.vocab.prompt_vocab()
    }
}

/// Decode speed of pipelined greedy generation ([`MlxEngine::generate_greedy`], as
/// mlx-lm's `generate_step` decodes), `memwall mlx generate`'s rows: tokens after
/// the first ÷ the time from the first token read to the last. The bench's tg
/// (llama-bench's) instead steps synchronously, each step's logits on the host.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GreedyTiming {
    /// `mlx-4bit`, `mlx-8bit`, `mlx-f16`.
    pub engine: String,
    /// The engine's build and device line.
    pub system_info: String,
    /// Prompt tokens before the first generated one.
    pub n_prompt: usize,
    /// Tokens timed after the first.
    pub n_gen: usize,
    /// tok/s per repetition.
    pub samples_ts: Vec<f64>,
    /// Their mean.
    pub avg_ts: f64,
    /// Their sample standard deviation.
    pub stddev_ts: f64,
    /// Time to the first token per repetition, ms (the prompt's prefill and one
    /// argmax).
    pub samples_ttft_ms: Vec<f64>,
}

/// The one-token prompt of a tg run, as the peer (bench/vs_mlx_lm.py) takes it:
/// the GGUF's `tokenizer.ggml.bos_token_id`, else token 0 (Qwen2.5 names a BOS id
/// but does not add it, so the vocabulary reports none).
///
/// # Errors
/// [`EngineError::Model`] when the file fails memwall's GGUF checks.
pub fn start_token(path: &Path) -> Result<TokenId, EngineError> {
    let gguf = crate::probe::gguf::Gguf::open(path)?;
    Ok(gguf
        .get("tokenizer.ggml.bos_token_id")
        .and_then(|v| v.as_u64())
        .map_or(0, |t| t as TokenId))
}

/// Times `reps` pipelined greedy generations of `n_gen` + 1 tokens after `prompt`
/// on a cleared cache, after one untimed 8-token warm-up.
///
/// # Errors
/// [`EngineError::Decode`] from the generation; a repetition too fast to time.
pub fn time_greedy(
    e: &mut MlxEngine,
    prompt: &[TokenId],
    n_gen: usize,
    reps: usize,
) -> Result<GreedyTiming, EngineError> {
    use std::time::Instant;
    e.kv_clear();
    e.generate_greedy(0, prompt, 8.min(n_gen + 1), false, |_| {})?;
    let (mut ts, mut ttft) = (Vec::new(), Vec::new());
    for _ in 0..reps.max(1) {
        e.kv_clear();
        let mut at = Vec::with_capacity(n_gen + 1);
        let t0 = Instant::now();
        e.generate_greedy(0, prompt, n_gen + 1, false, |_| at.push(Instant::now()))?;
        ttft.push(at[0].duration_since(t0).as_secs_f64() * 1e3);
        let dt = at[at.len() - 1].duration_since(at[0]).as_secs_f64();
        ts.push(n_gen as f64 / dt);
    }
    e.kv_clear();
    let s = crate::measure::stats::Observations::new(ts)
        .map_err(|err| EngineError::Decode(format!("pipelined tg: {err}")))?;
    Ok(GreedyTiming {
        engine: e.quant.name().into(),
        system_info: e.info().system_info,
        n_prompt: prompt.len(),
        n_gen,
        avg_ts: s.mean(),
        stddev_ts: s.std_dev(),
        samples_ts: s.values().to_vec(),
        samples_ttft_ms: ttft,
    })
}

/// Where `scripts/setup-mlx.sh` writes the F16 GGUF of the default model (llama.cpp's
/// `llama-quantize --allow-requantize … F16` of qwen2.5-coder-0.5b-instruct Q4_K_M:
/// the Q4_K_M values exactly, held at f16), the agreement check's input.
pub fn derived_f16_path() -> std::path::PathBuf {
    crate::probe::catalog::env_dir("MEMWALL_DERIVED", "derived")
        .join("qwen2.5-coder-0.5b-instruct-f16.gguf")
}

/// `llama-quantize --allow-requantize … F16` of SmolLM2-135M-Instruct Q4_1 (a GGUF
/// `llama`: the agreement check of the second architecture), made by
/// `scripts/setup-mlx.sh` beside [`derived_f16_path`].
pub fn derived_llama_f16_path() -> std::path::PathBuf {
    crate::probe::catalog::env_dir("MEMWALL_DERIVED", "derived")
        .join("smollm2-135m-instruct-f16.gguf")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::engine::argmax;

    /// Tolerance of a quantized matmul against the same matmul on the dequantized
    /// weights: both see identical weight values, only summation order differs.
    const QMM_TOL: f32 = 1e-4;

    #[test]
    fn q8_0_block_decodes_to_scale_times_quants() {
        // One Q8_0 block: f16 scale 0.5 (0x3800) then 32 signed bytes q[i] = i - 16;
        // value[i] = 0.5 · (i - 16), worked out by hand.
        let mut raw = vec![0x00u8, 0x38];
        raw.extend((0..32).map(|i| (i as i8 - 16) as u8));
        let mut out = [0f32; 32];
        weights::to_f32(8, &raw, &mut out).unwrap();
        for (i, v) in out.iter().enumerate() {
            assert_eq!(*v, 0.5 * (i as f32 - 16.0), "element {i}");
        }
        // F16 (type 1): 1.0 = 0x3C00, -2.0 = 0xC000.
        let mut out = [0f32; 2];
        weights::to_f32(1, &[0x00, 0x3C, 0x00, 0xC0], &mut out).unwrap();
        assert_eq!(out, [1.0, -2.0]);
        // A short buffer is refused, not read past.
        let e = weights::to_f32(8, &raw[..20], &mut [0f32; 32]).unwrap_err();
        assert!(e.contains("20 bytes for 32 values"), "{e}");
    }

    #[test]
    fn quantized_matmul_matches_the_dequantized_matmul() {
        use mlx_rs::Array;
        // A deterministic 128×256 weight and a 2×256 input.
        let w: Vec<f32> = (0..128 * 256)
            .map(|i| ((i * 7919 % 1000) as f32 / 1000.0) - 0.5)
            .collect();
        let x: Vec<f32> = (0..2 * 256)
            .map(|i| ((i * 104729 % 997) as f32 / 997.0) - 0.5)
            .collect();
        let w = Array::from_slice(&w, &[128, 256]);
        let x = Array::from_slice(&x, &[2, 256]);
        for bits in [4, 8] {
            let (q, s, b) = mlx_rs::ops::quantize(&w, weights::GROUP_SIZE, bits).unwrap();
            let y = mlx_rs::ops::quantized_matmul(&x, &q, &s, &b, true, weights::GROUP_SIZE, bits)
                .unwrap();
            let wd = mlx_rs::ops::dequantize(&q, &s, &b, weights::GROUP_SIZE, bits).unwrap();
            let r = x.matmul(wd.t()).unwrap();
            let (y, r) = (y.as_slice::<f32>().to_vec(), r.as_slice::<f32>().to_vec());
            assert_eq!(y.len(), 2 * 128);
            for (a, b) in y.iter().zip(&r) {
                assert!(
                    (a - b).abs() <= QMM_TOL * (1.0 + b.abs()),
                    "{bits}-bit: {a} vs {b}"
                );
            }
            // 4-bit packs 8 weights per u32, 8-bit 4: the packed width is 256·bits/32.
            assert_eq!(q.shape(), &[128, 256 * bits / 32]);
        }
    }

    /// libmlx's matmuls go to OpenBLAS, not the wheel's bundled reference BLAS.
    #[cfg(target_os = "linux")]
    #[test]
    fn cblas_resolves_to_openblas() {
        unsafe extern "C" {
            fn cblas_sgemm();
        }
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        let addr = cblas_sgemm as *const libc::c_void;
        assert_ne!(unsafe { libc::dladdr(addr, &mut info) }, 0);
        let lib = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned();
        assert!(lib.contains("openblas"), "cblas_sgemm comes from {lib}");
        assert!(blas().starts_with("OpenBLAS"), "{}", blas());
    }

    /// Two sequences in one pass (a prefill beside a prefill, then a decode step
    /// beside a decode step) give the logits each gets alone: the batch shares the
    /// weight reads, not the attention.
    #[test]
    fn greedy_generation_equals_step_by_step_decoding() {
        let Some(path) = crate::testing::model("qwen2.5-coder-0.5b-q4_k_m") else {
            return;
        };
        let _lock = crate::testing::engine_lock();
        let mut e = MlxEngine::load(&path, MlxQuant::Q4, 128, 128).unwrap();
        // A chat turn the model answers in a few tokens, so an end of generation
        // falls inside n_gen and the early stop is exercised too.
        let prompt = e
            .chat_format()
            .unwrap()
            .chat(
                &e,
                &[ChatMessage {
                    role: "user".into(),
                    content: "Reply with the single word OK.".into(),
                }],
            )
            .unwrap()
            .tokens;
        let n_gen = 12;
        // The reference: Engine::decode one token at a time, argmax on the host.
        e.kv_clear();
        e.prefill(&prompt, 0, 0, true).unwrap();
        let mut reference = vec![argmax(e.logits(0).unwrap())];
        while reference.len() < n_gen {
            let pos = (prompt.len() + reference.len() - 1) as u32;
            e.decode_one(*reference.last().unwrap(), pos, 0).unwrap();
            reference.push(argmax(e.logits(0).unwrap()));
        }
        let eog = reference.iter().position(|&t| e.is_eog(t));
        assert!(
            eog.is_some_and(|i| i >= 1),
            "the fixture wants a short answer ending in an end of generation: {reference:?}"
        );
        let kv_reference = e.kv_bytes(0);
        // Pipelined, without the stop: every token, the cache as the loop left it.
        e.kv_clear();
        let mut seen = Vec::new();
        let got = e
            .generate_greedy(0, &prompt, n_gen, false, |t| seen.push(t))
            .unwrap();
        assert_eq!(got, reference);
        assert_eq!(seen, reference, "on_token sees every token in order");
        assert_eq!(e.caches[&0].len() as usize, prompt.len() + n_gen - 1);
        assert_eq!(e.kv_bytes(0), kv_reference);
        // The caches hold the same keys and values: one more step gives the same logits.
        e.decode_one(reference[n_gen - 1], (prompt.len() + n_gen - 1) as u32, 0)
            .unwrap();
        let after_pipelined = e.logits(0).unwrap().to_vec();
        e.kv_clear();
        e.prefill(&prompt, 0, 0, false).unwrap();
        for (i, &t) in reference.iter().enumerate() {
            e.decode_one(t, (prompt.len() + i) as u32, 0).unwrap();
        }
        let after_reference = e.logits(0).unwrap();
        let worst = after_pipelined
            .iter()
            .zip(after_reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst <= 1e-4, "logits after the caches differ by {worst}");
        // With the stop: up to and including the end of generation; the cache holds
        // the prompt and the tokens before it, although the step after it was queued.
        let i = eog.unwrap();
        e.kv_clear();
        let got = e.generate_greedy(0, &prompt, n_gen, true, |_| {}).unwrap();
        assert_eq!(got, reference[..=i]);
        assert_eq!(e.caches[&0].len() as usize, prompt.len() + i);
        // Refused: an empty prompt, and a run past n_ctx; the cache is kept.
        let held = e.caches[&0].len();
        assert!(e.generate_greedy(0, &[], 4, false, |_| {}).is_err());
        assert!(e.generate_greedy(0, &prompt, 128, false, |_| {}).is_err());
        assert_eq!(e.caches[&0].len(), held);
    }

    #[test]
    fn sequences_batched_in_one_pass_match_each_run_alone() {
        let Some(path) = crate::testing::model("qwen2.5-coder-0.5b-q4_k_m") else {
            return;
        };
        let _lock = crate::testing::engine_lock();
        let mut e = MlxEngine::load(&path, MlxQuant::Q4, 256, 256).unwrap();
        let a = e.tokenize("fn main() { println!(", true).unwrap();
        let b = e
            .tokenize("The memory wall of decoding is the bandwidth", true)
            .unwrap();
        assert_ne!(a.len(), b.len());
        // Alone: each sequence prefilled, then one decode step.
        let mut alone = Vec::new();
        for (seq, toks) in [(0, &a), (1, &b)] {
            e.kv_clear();
            e.prefill(toks, 0, seq, true).unwrap();
            let pre = e.logits(0).unwrap().to_vec();
            let next = argmax(&pre);
            e.decode_one(next, toks.len() as u32, seq).unwrap();
            alone.push((pre, next, e.logits(0).unwrap().to_vec()));
        }
        // Together: both prompts in one decode call, then both next tokens in one call,
        // the items in the order b before a so the rows' order is the caller's.
        e.kv_clear();
        let mut batch: Vec<BatchItem> = Vec::new();
        for (seq, toks) in [(1, &b), (0, &a)] {
            batch.extend(toks.iter().enumerate().map(|(i, &t)| BatchItem {
                token: t,
                pos: i as u32,
                seq,
                logits: i + 1 == toks.len(),
            }));
        }
        e.decode(&batch).unwrap();
        let (pre_b, pre_a) = (e.logits(0).unwrap().to_vec(), e.logits(1).unwrap().to_vec());
        assert!(e.logits(2).is_err(), "two rows kept");
        e.decode(&[
            BatchItem {
                token: alone[0].1,
                pos: a.len() as u32,
                seq: 0,
                logits: true,
            },
            BatchItem {
                token: alone[1].1,
                pos: b.len() as u32,
                seq: 1,
                logits: true,
            },
        ])
        .unwrap();
        let (step_a, step_b) = (e.logits(0).unwrap().to_vec(), e.logits(1).unwrap().to_vec());
        use crate::experiments::agree::cosine;
        for (what, together, by_itself) in [
            ("a prefill", &pre_a, &alone[0].0),
            ("b prefill", &pre_b, &alone[1].0),
            ("a step", &step_a, &alone[0].2),
            ("b step", &step_b, &alone[1].2),
        ] {
            let c = cosine(together, by_itself);
            assert!(c > 0.9999, "{what}: cosine {c}");
            assert_eq!(argmax(together), argmax(by_itself), "{what}");
        }
        // Each cache holds its prompt + 1 positions: layers × (K + V) × KV heads ×
        // head width × 2 bytes (f16) per position.
        let c = e.config();
        let per_pos = (c.n_layer * 2 * c.n_head_kv * c.head_dim() * 2) as u64;
        assert_eq!(e.kv_bytes(0), (a.len() as u64 + 1) * per_pos);
        assert_eq!(e.kv_bytes(1), (b.len() as u64 + 1) * per_pos);
        // A batch whose second sequence skips a position is refused and changes no cache.
        let held = (e.kv_bytes(0), e.kv_bytes(1));
        let bad = [
            BatchItem {
                token: 1,
                pos: a.len() as u32 + 1,
                seq: 0,
                logits: true,
            },
            BatchItem {
                token: 1,
                pos: b.len() as u32 + 5,
                seq: 1,
                logits: true,
            },
        ];
        assert!(e.decode(&bad).is_err());
        assert_eq!((e.kv_bytes(0), e.kv_bytes(1)), held);
    }

    /// The default model's F16 GGUF, or `None` after a loud skip (a failure where
    /// `MEMWALL_REQUIRE_MODELS=1`, as in CI).
    fn f16_model_or_skip() -> Option<std::path::PathBuf> {
        derived_or_skip(derived_f16_path())
    }

    /// A derived file, or `None` after a loud skip (a failure in CI).
    fn derived_or_skip(path: std::path::PathBuf) -> Option<std::path::PathBuf> {
        if path.is_file() {
            return Some(path);
        }
        assert_ne!(
            std::env::var("MEMWALL_REQUIRE_MODELS").as_deref(),
            Ok("1"),
            "{} is required: run scripts/setup-mlx.sh",
            path.display()
        );
        eprintln!(
            "\n!!!!!!!! SKIP: {} missing — run scripts/setup-mlx.sh !!!!!!!!\n",
            path.display()
        );
        None
    }

    /// Greedy agreement of MLX (holding `path` at f16) with llama.cpp on the first
    /// `per_category` prompts of each category, `n_gen` tokens each; asserts every
    /// first-position cosine ≥ `agree::MIN_COSINE` and equal vocabularies. The
    /// caller holds the engine lock.
    fn agree_at_f16(
        path: &std::path::Path,
        per_category: usize,
        n_gen: usize,
    ) -> (MlxEngine, Vec<crate::experiments::agree::AgreeRow>) {
        use crate::experiments::agree;
        use crate::experiments::speculative::prompts::{Category, PromptSet};
        let cfg = crate::measure::engine::EngineConfig {
            n_ctx: 1024,
            n_batch: 512,
            n_gpu_layers: 0,
            ..Default::default()
        };
        let mut llama = crate::measure::engine::llama::LlamaModelHandle::load_no_repack(path)
            .unwrap()
            .engine(&cfg)
            .unwrap();
        let mut mlx = MlxEngine::load(path, MlxQuant::F16, 1024, 512).unwrap();
        assert_eq!(mlx.n_vocab(), llama.n_vocab());
        let set = PromptSet::builtin().unwrap();
        let mut picked = PromptSet {
            prompts: Vec::new(),
            ..set.clone()
        };
        for c in Category::ALL {
            picked
                .prompts
                .extend(set.of(c).into_iter().take(per_category).cloned());
        }
        let n = picked.prompts.len();
        let rows = agree::run(&mut llama, &mut mlx, &picked, n, n_gen, |_| {}).unwrap();
        eprintln!("{}", agree::table(&rows));
        for r in &rows {
            assert!(
                r.cosine >= agree::MIN_COSINE,
                "{}: cosine {}",
                r.id,
                r.cosine
            );
        }
        (mlx, rows)
    }

    #[test]
    fn f16_engine_agrees_with_llama_cpp_on_a_few_prompts() {
        let Some(path) = f16_model_or_skip() else {
            return;
        };
        use crate::experiments::agree;
        let _lock = crate::testing::engine_lock();
        // Three prompts, one per category, 8 tokens each (MLX's CPU back end decodes
        // the 0.5B at f16 slowly; the 135M Llama test below goes to 16 tokens).
        let (mut mlx, rows) = agree_at_f16(&path, 1, 8);
        let table = agree::table(&rows);
        assert!(
            rows.iter().filter(|r| r.first_diff.is_none()).count() >= 2,
            "{table}"
        );

        // KV truncation: decode 4 tokens, roll back 2, redo them: same logits.
        let toks = mlx.tokenize("fn main() {", true).unwrap();
        mlx.kv_clear();
        mlx.prefill(&toks, 0, 0, true).unwrap();
        let t1 = argmax(mlx.logits(0).unwrap());
        let p = toks.len() as u32;
        mlx.decode_one(t1, p, 0).unwrap();
        let t2 = argmax(mlx.logits(0).unwrap());
        mlx.decode_one(t2, p + 1, 0).unwrap();
        let after: Vec<f32> = mlx.logits(0).unwrap().to_vec();
        mlx.kv_truncate(0, p + 1).unwrap();
        mlx.decode_one(t2, p + 1, 0).unwrap();
        assert!(agree::cosine(&after, mlx.logits(0).unwrap()) > 0.99999);
        // A position that does not continue the cache is refused.
        assert!(mlx.decode_one(t2, p + 5, 0).is_err());
        // Held bytes: every f16 matrix at 2 bytes a weight; the file's tensors are f16
        // matrices plus f32 vectors, so the held bytes equal the file's tensor bytes.
        let gguf = crate::probe::gguf::Gguf::open(&path).unwrap();
        let file_bytes: u64 = gguf.tensors.iter().map(|t| t.n_bytes().0).sum();
        assert_eq!(mlx.weight_bytes(), file_bytes);
    }

    #[test]
    fn llama_architecture_agrees_with_llama_cpp_on_a_few_prompts() {
        // SmolLM2-135M (GGUF `llama`: no q/k/v biases, RoPE on adjacent pairs) at F16,
        // both engines from the same values; the reference is llama.cpp.
        let Some(path) = derived_or_skip(derived_llama_f16_path()) else {
            return;
        };
        let _lock = crate::testing::engine_lock();
        let (mlx, rows) = agree_at_f16(&path, 2, 16);
        assert_eq!(mlx.config().arch, crate::probe::shape::Arch::Llama);
        let table = crate::experiments::agree::table(&rows);
        assert!(
            rows.iter().filter(|r| r.first_diff.is_none()).count() >= 5,
            "{table}"
        );
        // No biases held: the held bytes are the file's tensor bytes (f16 matrices,
        // f32 norms), as for Qwen2 where the biases are file tensors too.
        let gguf = crate::probe::gguf::Gguf::open(&path).unwrap();
        let file_bytes: u64 = gguf.tensors.iter().map(|t| t.n_bytes().0).sum();
        assert_eq!(mlx.weight_bytes(), file_bytes);
    }

    #[test]
    fn f16_activations_agree_with_f32_activations() {
        // The GPU's f16 activations against the CPU's f32 on the same 4-bit weights:
        // the same top token and cosine ≥ agree::MIN_COSINE at every position of a
        // short prefill (below DEQUANT_ROWS, so quantized_matmul serves both, as on a
        // GPU) and 4 greedy steps; the held bytes differ by exactly the norm weights
        // and biases, 2 bytes less per element (counted from the file's 1-D tensors).
        // The model is SmolLM2-135M (MLX's CPU back end computes f16 activations
        // slowly; the rule does not depend on the model's size).
        use crate::experiments::agree;
        let Some(path) = derived_or_skip(derived_llama_f16_path()) else {
            return;
        };
        let _lock = crate::testing::engine_lock();
        let gguf = crate::probe::gguf::Gguf::open(&path).unwrap();
        let m32 = Qwen2::load(&gguf, MlxQuant::Q4, mlx_rs::Dtype::Float32).unwrap();
        let m16 = Qwen2::load(&gguf, MlxQuant::Q4, mlx_rs::Dtype::Float16).unwrap();
        let vector_elems: u64 = gguf
            .tensors
            .iter()
            .filter(|t| t.dims.len() == 1)
            .map(|t| t.dims[0])
            .sum();
        assert!(vector_elems > 0);
        assert_eq!(m32.weight_bytes() - m16.weight_bytes(), 2 * vector_elems);

        let vocab = super::super::llama::LlamaModelHandle::load_vocab_only(&path).unwrap();
        let prompt: Vec<i32> = vocab.tokenize("def fib(n):", true).unwrap();
        assert!(prompt.len() < weights::DEQUANT_ROWS as usize, "{prompt:?}");
        let (mut c32, mut c16) = (KvCache::default(), KvCache::default());
        let last = [prompt.len() as i32 - 1];
        let row = |a: mlx_rs::Array| a.as_slice::<f32>().to_vec();
        let mut l32 = row(m32.forward(&prompt, &mut c32, &last).unwrap().unwrap());
        let mut l16 = row(m16.forward(&prompt, &mut c16, &last).unwrap().unwrap());
        for step in 0..5 {
            let c = agree::cosine(&l32, &l16);
            assert!(c >= agree::MIN_COSINE, "step {step}: cosine {c}");
            let t = argmax(&l32);
            assert_eq!(t, argmax(&l16), "step {step}: top token differs");
            if step == 4 {
                break;
            }
            l32 = row(m32.forward(&[t], &mut c32, &[0]).unwrap().unwrap());
            l16 = row(m16.forward(&[t], &mut c16, &[0]).unwrap().unwrap());
        }
        assert_eq!(
            c16.nbytes(),
            c32.nbytes(),
            "both caches hold f16 keys and values"
        );
    }

    /// Bytes per decode step on an untied file: MLX (its arrays, through
    /// `probe::model::decode_step_bytes`) and the llama.cpp path (`ModelFacts` of
    /// the same GGUF) count the embedding as a one-row gather, the separate output
    /// head whole. At F16 both hold the same bytes (f16 matrices, f32 norms and
    /// biases), so the two counts are equal, and equal to the hand count below.
    /// Equality is expected only for the same held format: the 4-bit arm holds
    /// MLX's affine 4-bit arrays, not the GGUF's blocks, so there the check is the
    /// rule itself (held bytes less the embedding plus one embedding row).
    #[test]
    fn an_untied_file_streams_the_same_bytes_per_step_on_both_engines() {
        use crate::probe::shape::{Arch, ModelShape, Recipe};
        let shape = ModelShape {
            arch: Arch::Qwen2,
            n_layer: 2,
            n_embd: 256,
            n_head: 4,
            n_head_kv: 2,
            head_dim: None,
            n_ff: 512,
            n_vocab: 300,
            tied_embeddings: false,
            n_expert: 0,
            n_expert_used: 0,
            n_ff_exp: 0,
            sliding_window: None,
            n_ctx_train: 2048,
            lexicographic_order: false,
        };
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("untied-f16.gguf");
        let recipe = Recipe::parse("F16").unwrap();
        let facts =
            crate::probe::synth::write(&shape, &recipe, "untied", 3, &path, |_, _| {}).unwrap();
        assert!(!facts.tied_embeddings);
        // By hand, per layer: norms 2 × 256 × 4 = 2,048; q 256×256×2 = 131,072 and
        // o 131,072; k, v 256×128×2 = 65,536 each; biases (256 + 128 + 128) × 4 =
        // 2,048; gate, up, down 256×512×2 = 262,144 each: 1,183,744. Two layers
        // 2,367,488; output_norm 1,024; output.weight 300×256×2 = 153,600; one
        // embedding row 256×2 = 512 (not the table's 153,600): 2,522,624.
        const BY_HAND: u64 = 2_522_624;
        assert_eq!(facts.streamed_bytes.0, BY_HAND, "llama.cpp path");
        let gguf = crate::probe::gguf::Gguf::open(&path).unwrap();
        let _lock = crate::testing::engine_lock();
        let f16 = Qwen2::load(&gguf, MlxQuant::F16, mlx_rs::Dtype::Float32).unwrap();
        eprintln!(
            "untied F16 file: llama.cpp path {} B/step, MLX mlx-f16 {} B/step (held {} B)",
            facts.streamed_bytes.0,
            f16.streamed_bytes(),
            f16.weight_bytes()
        );
        assert_eq!(f16.streamed_bytes(), BY_HAND, "MLX at f16");
        assert_eq!(f16.weight_bytes(), facts.tensor_bytes.0, "same bytes held");
        // 4-bit: the embedding holds 300 × 256 / 2 = 38,400 bytes of quants and
        // 1,200 groups × (2 + 2) = 4,800 of scales and biases, 144 per row.
        let q4 = Qwen2::load(&gguf, MlxQuant::Q4, mlx_rs::Dtype::Float32).unwrap();
        let embd = q4
            .held_tensors()
            .into_iter()
            .find(|t| t.name == "token_embd.weight")
            .unwrap();
        assert_eq!((embd.bytes, embd.row_bytes), (43_200, 144));
        assert_eq!(q4.streamed_bytes(), q4.weight_bytes() - 43_200 + 144);
    }
}
