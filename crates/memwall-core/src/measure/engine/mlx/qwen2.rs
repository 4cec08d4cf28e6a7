//! Qwen2 (Qwen2.5, Qwen2.5-Coder) written with MLX ops: GQA attention with q/k/v
//! biases, RoPE (NEOX style: rotate halves, as llama.cpp's `LLAMA_ROPE_TYPE_NEOX`
//! for this architecture and mlx-lm's `traditional=False`), RMSNorm, SwiGLU MLP.
//! The same decoder also runs GGUF `llama` files (SmolLM2, Llama 2): they differ
//! only in having no q/k/v biases and in RoPE rotating adjacent pairs (llama.cpp's
//! `LLAMA_ROPE_TYPE_NORM`, mlx-lm's `traditional=True`: llama.cpp's converter
//! permutes Q and K rows for it). Llama variants with RoPE scaling or frequency
//! factors (Llama 3.1 and later), partial rotary dimensions or a head width other
//! than `n_embd / n_head` are refused by [`Qwen2Config::from_gguf`].
//! Shapes follow mlx-lm's `models/qwen2.py`: activations `[B, L, D]`, attention
//! heads `[B, H, L, head_dim]`. Activations are f32 on the CPU (llama.cpp's CPU
//! path keeps f32 activations too) and f16 on a GPU, as mlx-lm ([`super::act_dtype`]);
//! weights are f16 or MLX-quantized ([`super::weights`]); the KV cache is f16
//! (llama.cpp's default), widened to the activations' dtype for the attention itself.

use super::MlxError;
use super::weights::{Matrix, MlxQuant, TensorReader};
use crate::probe::gguf::Gguf;
use crate::probe::model::{HeldTensor, decode_step_bytes};
use crate::probe::shape::Arch;
use mlx_rs::error::Exception;
use mlx_rs::fast::ScaledDotProductAttentionMask;
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::{Array, Dtype};

/// Hyper-parameters read from the GGUF's `qwen2.*` (or `llama.*`) metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct Qwen2Config {
    /// `general.architecture`: [`Arch::Qwen2`] or [`Arch::Llama`].
    pub arch: Arch,
    /// RoPE rotates adjacent pairs (`llama`) rather than halves (`qwen2`).
    pub rope_traditional: bool,
    /// `{arch}.block_count`.
    pub n_layer: usize,
    /// `{arch}.embedding_length`.
    pub n_embd: usize,
    /// `{arch}.attention.head_count`.
    pub n_head: usize,
    /// `{arch}.attention.head_count_kv`.
    pub n_head_kv: usize,
    /// `{arch}.rope.freq_base` (Qwen2.5: 1e6).
    pub rope_theta: f32,
    /// `{arch}.attention.layer_norm_rms_epsilon`.
    pub rms_eps: f32,
    /// `{arch}.context_length`.
    pub n_ctx_train: usize,
}

impl Qwen2Config {
    /// Reads the config from `gguf`; names the missing or bad key.
    pub fn from_gguf(gguf: &Gguf) -> Result<Qwen2Config, MlxError> {
        let name = gguf.architecture().unwrap_or("");
        let bad = |key: &str, why: &str| MlxError::Config {
            path: gguf.path.display().to_string(),
            key: key.to_string(),
            reason: why.to_string(),
        };
        let arch = match Arch::parse(name) {
            Ok(a @ (Arch::Qwen2 | Arch::Llama)) => a,
            _ => {
                return Err(bad(
                    "general.architecture",
                    &format!("is `{name}`; the MLX engine implements qwen2 and llama only"),
                ));
            }
        };
        let arch_name = arch.name();
        let int = |k: &str| -> Result<usize, MlxError> {
            let key = format!("{arch_name}.{k}");
            gguf.get(&key)
                .and_then(|v| v.as_u64())
                .filter(|&v| v > 0 && v < 1 << 20)
                .map(|v| v as usize)
                .ok_or_else(|| bad(&key, "missing or not a positive integer"))
        };
        let float = |k: &str, default: Option<f64>| -> Result<f32, MlxError> {
            let key = format!("{arch_name}.{k}");
            match gguf.get(&key).and_then(|v| v.as_f64()).or(default) {
                Some(v) if v.is_finite() && v > 0.0 => Ok(v as f32),
                _ => Err(bad(&key, "missing or not a positive number")),
            }
        };
        let cfg = Qwen2Config {
            arch,
            rope_traditional: arch == Arch::Llama,
            n_layer: int("block_count")?,
            n_embd: int("embedding_length")?,
            n_head: int("attention.head_count")?,
            n_head_kv: int("attention.head_count_kv")?,
            // llama.cpp's default when the key is absent.
            rope_theta: float("rope.freq_base", Some(10000.0))?,
            rms_eps: float("attention.layer_norm_rms_epsilon", None)?,
            n_ctx_train: int("context_length")?,
        };
        if !cfg.n_embd.is_multiple_of(cfg.n_head) || !cfg.n_head.is_multiple_of(cfg.n_head_kv) {
            return Err(bad(
                &format!("{arch_name}.attention.head_count"),
                "embedding length, head count and KV head count do not divide",
            ));
        }
        // What this decoder does not implement is refused, not approximated.
        let hd = cfg.head_dim() as u64;
        for k in [
            "attention.key_length",
            "attention.value_length",
            "rope.dimension_count",
        ] {
            let key = format!("{arch_name}.{k}");
            if let Some(v) = gguf.get(&key).and_then(|v| v.as_u64())
                && v != hd
            {
                return Err(bad(
                    &key,
                    &format!("is {v}, not the head width {hd}: not implemented by the MLX engine"),
                ));
            }
        }
        let scaling = format!("{arch_name}.rope.scaling.type");
        if let Some(t) = gguf.get(&scaling).and_then(|v| v.as_str())
            && t != "none"
        {
            return Err(bad(
                &scaling,
                &format!("is `{t}`: RoPE scaling is not implemented by the MLX engine"),
            ));
        }
        if gguf.tensor("rope_freqs.weight").is_some() {
            return Err(bad(
                "rope_freqs.weight",
                "RoPE frequency factors (Llama 3.1 and later) are not implemented by the MLX engine",
            ));
        }
        Ok(cfg)
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.n_embd / self.n_head
    }
}

struct Layer {
    attn_norm: Array,
    wq: Matrix,
    bq: Option<Array>,
    wk: Matrix,
    bk: Option<Array>,
    wv: Matrix,
    bv: Option<Array>,
    wo: Matrix,
    ffn_norm: Array,
    gate: Matrix,
    up: Matrix,
    down: Matrix,
}

/// One sequence's KV cache: per layer `[1, n_head_kv, len, head_dim]` keys and values.
#[derive(Default, Clone)]
pub struct KvCache {
    layers: Vec<(Array, Array)>,
    len: u32,
}

impl KvCache {
    /// Positions held.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keeps positions `< n` (speculative rollback).
    pub fn truncate(&mut self, n: u32) -> Result<(), Exception> {
        if n >= self.len {
            return Ok(());
        }
        if n == 0 {
            *self = KvCache::default();
            return Ok(());
        }
        let n = n as i32;
        for (k, v) in &mut self.layers {
            *k = k.index((.., .., ..n, ..));
            *v = v.index((.., .., ..n, ..));
        }
        mlx_rs::transforms::eval(self.layers.iter().flat_map(|(k, v)| [k, v]))?;
        self.len = n as u32;
        Ok(())
    }

    /// Bytes of the cached keys and values.
    pub fn nbytes(&self) -> u64 {
        self.layers
            .iter()
            .map(|(k, v)| (k.nbytes() + v.nbytes()) as u64)
            .sum()
    }
}

/// A Qwen2 model held in MLX arrays.
pub struct Qwen2 {
    /// Its hyper-parameters.
    pub cfg: Qwen2Config,
    embed: Matrix,
    /// `None`: tied to the embedding (Qwen2.5 0.5B/1.5B).
    output: Option<Matrix>,
    norm: Array,
    layers: Vec<Layer>,
    /// The activations' dtype (norm weights and biases are held in it too).
    act: Dtype,
}

impl Qwen2 {
    /// Loads every tensor of `gguf` (dequantized by llama.cpp's `to_float`), holding
    /// matrices as `quant` says, norms and biases in `act`, the activations' dtype
    /// (f32 or f16).
    pub fn load(gguf: &Gguf, quant: MlxQuant, act: Dtype) -> Result<Qwen2, MlxError> {
        let cfg = Qwen2Config::from_gguf(gguf)?;
        let mut r = TensorReader::new(gguf)?;
        let embed = r.matrix("token_embd.weight", quant)?;
        let output = if r.has("output.weight") {
            Some(r.matrix("output.weight", quant)?)
        } else {
            None
        };
        let norm = r.vector("output_norm.weight", act)?;
        let mut layers = Vec::with_capacity(cfg.n_layer);
        // q/k/v biases: Qwen2 has them (required), Llama files may (llama.cpp loads
        // them where present).
        let optional = cfg.arch == Arch::Llama;
        let bias = |r: &mut TensorReader, name: &str| -> Result<Option<Array>, MlxError> {
            (!optional || r.has(name))
                .then(|| r.vector(name, act))
                .transpose()
        };
        for i in 0..cfg.n_layer {
            let t = |s: &str| format!("blk.{i}.{s}");
            layers.push(Layer {
                attn_norm: r.vector(&t("attn_norm.weight"), act)?,
                wq: r.matrix(&t("attn_q.weight"), quant)?,
                bq: bias(&mut r, &t("attn_q.bias"))?,
                wk: r.matrix(&t("attn_k.weight"), quant)?,
                bk: bias(&mut r, &t("attn_k.bias"))?,
                wv: r.matrix(&t("attn_v.weight"), quant)?,
                bv: bias(&mut r, &t("attn_v.bias"))?,
                wo: r.matrix(&t("attn_output.weight"), quant)?,
                ffn_norm: r.vector(&t("ffn_norm.weight"), act)?,
                gate: r.matrix(&t("ffn_gate.weight"), quant)?,
                up: r.matrix(&t("ffn_up.weight"), quant)?,
                down: r.matrix(&t("ffn_down.weight"), quant)?,
            });
        }
        Ok(Qwen2 {
            cfg,
            embed,
            output,
            norm,
            layers,
            act,
        })
    }

    /// Width of a logit row.
    pub fn n_vocab(&self) -> usize {
        self.output.as_ref().unwrap_or(&self.embed).out_rows() as usize
    }

    /// Every array held, under the GGUF tensor name it was read from, with its
    /// bytes (matrices with their scales and biases) and one row's bytes.
    pub fn held_tensors(&self) -> Vec<HeldTensor> {
        let m = |name: String, x: &Matrix| HeldTensor {
            name,
            bytes: x.nbytes(),
            row_bytes: x.row_bytes(),
        };
        let v = |name: String, a: &Array| HeldTensor {
            name,
            bytes: a.nbytes() as u64,
            row_bytes: a.nbytes() as u64,
        };
        let mut held = vec![m("token_embd.weight".into(), &self.embed)];
        if let Some(o) = &self.output {
            held.push(m("output.weight".into(), o));
        }
        held.push(v("output_norm.weight".into(), &self.norm));
        for (i, l) in self.layers.iter().enumerate() {
            let t = |s: &str| format!("blk.{i}.{s}");
            held.push(v(t("attn_norm.weight"), &l.attn_norm));
            held.push(v(t("ffn_norm.weight"), &l.ffn_norm));
            for (s, b) in [
                ("attn_q.bias", &l.bq),
                ("attn_k.bias", &l.bk),
                ("attn_v.bias", &l.bv),
            ] {
                if let Some(b) = b {
                    held.push(v(t(s), b));
                }
            }
            for (s, x) in [
                ("attn_q.weight", &l.wq),
                ("attn_k.weight", &l.wk),
                ("attn_v.weight", &l.wv),
                ("attn_output.weight", &l.wo),
                ("ffn_gate.weight", &l.gate),
                ("ffn_up.weight", &l.up),
                ("ffn_down.weight", &l.down),
            ] {
                held.push(m(t(s), x));
            }
        }
        held
    }

    /// Bytes of every weight array held (matrices with their scales and biases,
    /// norms, attention biases): what the model occupies, not what a step reads
    /// ([`Qwen2::streamed_bytes`]).
    pub fn weight_bytes(&self) -> u64 {
        self.held_tensors().iter().map(|t| t.bytes).sum()
    }

    /// Bytes one batch-1 decode step streams from the arrays held, by the rule every
    /// engine's rows use ([`decode_step_bytes`]): an untied embedding is a gather
    /// of one row, a tied one is read whole as the output head.
    pub fn streamed_bytes(&self) -> u64 {
        decode_step_bytes(&self.held_tensors(), self.output.is_none(), None).0
    }

    /// Runs `tokens` (consecutive positions from `cache.len()`) through the model,
    /// appending to `cache`; returns the logits `[n, n_vocab]` (f32) of the rows in
    /// `keep` (indices into `tokens`), evaluated; `None` when `keep` is empty (the
    /// output projection is then skipped, as llama.cpp skips unrequested rows).
    pub fn forward(
        &self,
        tokens: &[i32],
        cache: &mut KvCache,
        keep: &[i32],
    ) -> Result<Option<Array>, Exception> {
        self.forward_batch(&mut [SeqInput {
            tokens,
            cache,
            keep,
        }])
    }

    /// One forward pass over several sequences: every matrix (the weights one decode
    /// step streams) multiplies the rows of all sequences at once, so `n` sequences
    /// read the weights once per step, as llama.cpp's batched decode does; RoPE and
    /// attention run per sequence against its own cache and positions. Returns the
    /// logits of every sequence's `keep` rows, sequence after sequence, as one
    /// `[Σ keep, n_vocab]` array (f32, evaluated); `None` when no row is kept.
    pub fn forward_batch(&self, seqs: &mut [SeqInput<'_>]) -> Result<Option<Array>, Exception> {
        let d = self.cfg.n_embd as i32;
        let mut ids = Vec::new();
        for s in seqs.iter() {
            ids.extend_from_slice(s.tokens);
        }
        let n = ids.len() as i32;
        if n == 0 {
            return Ok(None);
        }
        let x = self.embed.rows(&ids, self.act)?.reshape(&[1, n, d])?;
        let x = {
            let mut parts: Vec<(&mut KvCache, i32)> = seqs
                .iter_mut()
                .map(|s| (&mut *s.cache, s.tokens.len() as i32))
                .collect();
            self.blocks(x, &mut parts)?
        };
        let mut rows = Vec::new();
        let mut a = 0i32;
        for s in seqs.iter() {
            rows.extend(s.keep.iter().map(|&j| a + j));
            a += s.tokens.len() as i32;
        }
        let caches = || {
            seqs.iter()
                .flat_map(|s| s.cache.layers.iter().flat_map(|(k, v)| [k, v]))
        };
        if rows.is_empty() {
            mlx_rs::transforms::eval(caches())?;
            return Ok(None);
        }
        let x = x.reshape(&[n, d])?;
        let x = if rows.len() as i32 == n {
            x
        } else {
            x.take_axis(Array::from_slice(&rows, &[rows.len() as i32]), 0)?
        };
        let logits = self.head(&x)?.as_dtype(Dtype::Float32)?;
        mlx_rs::transforms::eval(std::iter::once(&logits).chain(caches()))?;
        Ok(Some(logits))
    }

    /// One greedy decode step, built and not evaluated: `token` (a `[1]` integer
    /// array, which may itself be a step's unevaluated output) at position
    /// `cache.len()`, appended to `cache`; returns the argmax of its logits, `[1]`
    /// (u32). Nothing leaves the device, so the caller can queue this step
    /// (`async_eval`) before the last one has finished, as mlx-lm's `generate_step`
    /// does. The argmax is taken over the logits in the activations' dtype: the f32
    /// cast of [`Qwen2::forward_batch`] is exact, so it picks the same token.
    pub fn greedy_step(&self, token: &Array, cache: &mut KvCache) -> Result<Array, Exception> {
        let d = self.cfg.n_embd as i32;
        let x = match self.embed.rows_on_device(token, self.act)? {
            Some(x) => x,
            // A matrix split across the CPU's lanes looks its rows up on the host.
            None => self.embed.rows(&[token_id(token)?], self.act)?,
        };
        let x = self.blocks(x.reshape(&[1, 1, d])?, &mut [(cache, 1)])?;
        let logits = self.head(&x.reshape(&[1, d])?)?;
        mlx_rs::ops::indexing::argmax_axis(&logits, -1, None)
    }

    /// The final norm and the output projection (tied to the embedding where the
    /// file has no `output.weight`), in the activations' dtype.
    fn head(&self, x: &Array) -> Result<Array, Exception> {
        let x = mlx_rs::fast::rms_norm(x, Some(&self.norm), self.cfg.rms_eps)?;
        self.output.as_ref().unwrap_or(&self.embed).apply(&x)
    }

    /// The transformer blocks over `x` (`[1, Σ l, n_embd]`: each sequence's `l` new
    /// rows, sequence after sequence), each sequence attending to its own cache,
    /// which it extends by its `l` rows.
    fn blocks(&self, mut x: Array, seqs: &mut [(&mut KvCache, i32)]) -> Result<Array, Exception> {
        let c = &self.cfg;
        let (h, hkv, hd) = (c.n_head as i32, c.n_head_kv as i32, c.head_dim() as i32);
        let mut spans = Vec::with_capacity(seqs.len());
        let mut a = 0i32;
        for (_, l) in seqs.iter() {
            spans.push((a, a + l));
            a += l;
        }
        let one = seqs.len() == 1;
        let scale = 1.0 / (hd as f32).sqrt();
        for (i, layer) in self.layers.iter().enumerate() {
            let hn = mlx_rs::fast::rms_norm(&x, Some(&layer.attn_norm), c.rms_eps)?;
            let q_all = with_bias(layer.wq.apply(&hn)?, &layer.bq)?;
            let k_all = with_bias(layer.wk.apply(&hn)?, &layer.bk)?;
            let v_all = with_bias(layer.wv.apply(&hn)?, &layer.bv)?;
            let mut outs = Vec::with_capacity(seqs.len());
            for ((cache, _), &(a, b)) in seqs.iter_mut().zip(&spans) {
                let l = b - a;
                let offset = cache.len as i32;
                let heads = |all: &Array, nh: i32| -> Result<Array, Exception> {
                    let rows = if one {
                        all.clone()
                    } else {
                        all.index((.., a..b, ..))
                    };
                    rows.reshape(&[1, l, nh, hd])?.transpose_axes(&[0, 2, 1, 3])
                };
                let rope = |x: &Array| {
                    mlx_rs::fast::rope(x, hd, c.rope_traditional, c.rope_theta, 1.0, offset, None)
                };
                let q = rope(&heads(&q_all, h)?)?;
                // The cache holds f16 keys and values, as llama.cpp's default F16 KV cache.
                let k = rope(&heads(&k_all, hkv)?)?.as_dtype(Dtype::Float16)?;
                let v = heads(&v_all, hkv)?.as_dtype(Dtype::Float16)?;
                let first = cache.layers.len() <= i;
                let (k, v) = if first {
                    (k, v)
                } else {
                    let (ck, cv) = &cache.layers[i];
                    (
                        mlx_rs::ops::concatenate(&[ck, &k], 2)?,
                        mlx_rs::ops::concatenate(&[cv, &v], 2)?,
                    )
                };
                let mask = (l > 1).then_some(ScaledDotProductAttentionMask::Causal);
                let o = mlx_rs::fast::scaled_dot_product_attention(
                    &q,
                    k.as_dtype(self.act)?,
                    v.as_dtype(self.act)?,
                    scale,
                    mask,
                    None,
                )?;
                if first {
                    cache.layers.push((k, v));
                } else {
                    cache.layers[i] = (k, v);
                }
                outs.push(o.transpose_axes(&[0, 2, 1, 3])?.reshape(&[1, l, h * hd])?);
            }
            let o = if one {
                outs.pop().expect("one sequence")
            } else {
                mlx_rs::ops::concatenate(&outs, 1)?
            };
            x = x.add(layer.wo.apply(&o)?)?;
            let hn = mlx_rs::fast::rms_norm(&x, Some(&layer.ffn_norm), c.rms_eps)?;
            let g = layer.gate.apply(&hn)?;
            let u = layer.up.apply(&hn)?;
            let m = mlx_rs::nn::silu(&g)?.multiply(&u)?;
            x = x.add(layer.down.apply(&m)?)?;
        }
        for ((cache, l), _) in seqs.iter_mut().zip(&spans) {
            cache.len += *l as u32;
        }
        Ok(x)
    }
}

/// `x + b`, or `x` where the architecture has no bias.
fn with_bias(x: Array, b: &Option<Array>) -> Result<Array, Exception> {
    match b {
        Some(b) => x.add(b),
        None => Ok(x),
    }
}

/// The token id held by a one-element array (a greedy step's argmax), read back to
/// the host (evaluating it).
pub fn token_id(a: &Array) -> Result<i32, Exception> {
    a.try_item_cast::<u32>()
        .map(|t| t as i32)
        .map_err(|e| Exception::custom(format!("reading a token id back: {e}")))
}

/// One sequence of a [`Qwen2::forward_batch`]: its new tokens (continuing its
/// cache), its cache, and which of the new rows' logits to keep.
pub struct SeqInput<'a> {
    /// Token ids at positions `cache.len()`, `cache.len() + 1`, ….
    pub tokens: &'a [i32],
    /// The sequence's KV cache, appended to.
    pub cache: &'a mut KvCache,
    /// Indices into `tokens` whose logits are returned.
    pub keep: &'a [i32],
}

#[cfg(test)]
mod tests {
    use super::*;
    use memwall_testkit::fuzz::GgufBuilder;
    use std::path::PathBuf;

    /// A header-only GGUF of `arch` with SmolLM2-135M's shape (head width 64).
    fn header(arch: &str) -> GgufBuilder {
        let k = |s: &str| format!("{arch}.{s}");
        GgufBuilder::default()
            .kv_str("general.architecture", arch)
            .kv_u32(&k("block_count"), 30)
            .kv_u32(&k("embedding_length"), 576)
            .kv_u32(&k("attention.head_count"), 9)
            .kv_u32(&k("attention.head_count_kv"), 3)
            .kv_u32(&k("context_length"), 8192)
            .kv_raw(
                &k("attention.layer_norm_rms_epsilon"),
                6,
                &1e-5f32.to_le_bytes(),
            )
    }

    fn config(b: &GgufBuilder) -> Result<Qwen2Config, MlxError> {
        let bytes = b.clone().data(256).build();
        let g = Gguf::parse(&bytes[..], bytes.len() as u64, PathBuf::from("m.gguf")).unwrap();
        Qwen2Config::from_gguf(&g)
    }

    #[test]
    fn llama_rotates_adjacent_pairs_and_qwen2_halves() {
        // llama.cpp: LLM_ARCH_LLAMA → LLAMA_ROPE_TYPE_NORM, LLM_ARCH_QWEN2 → NEOX.
        let l = config(&header("llama").kv_u32("llama.rope.dimension_count", 64)).unwrap();
        assert_eq!((l.arch, l.rope_traditional), (Arch::Llama, true));
        assert_eq!((l.head_dim(), l.rope_theta), (64, 10000.0));
        let q = config(&header("qwen2")).unwrap();
        assert_eq!((q.arch, q.rope_traditional), (Arch::Qwen2, false));
    }

    #[test]
    fn what_the_decoder_does_not_implement_is_refused_by_key() {
        let err = |b: GgufBuilder| config(&b).unwrap_err().to_string();
        let e = err(header("gemma3"));
        assert!(
            e.contains("general.architecture") && e.contains("gemma3"),
            "{e}"
        );
        let e = err(header("llama").kv_str("llama.rope.scaling.type", "linear"));
        assert!(
            e.contains("llama.rope.scaling.type") && e.contains("linear"),
            "{e}"
        );
        let e = err(header("llama").kv_u32("llama.rope.dimension_count", 32));
        assert!(
            e.contains("llama.rope.dimension_count") && e.contains("32"),
            "{e}"
        );
        let e = err(header("llama").kv_u32("llama.attention.key_length", 128));
        assert!(e.contains("llama.attention.key_length"), "{e}");
        let e = err(header("llama").tensor("rope_freqs.weight", &[32], 0, 0));
        assert!(e.contains("rope_freqs.weight"), "{e}");
        // Scaling type "none" is no scaling.
        assert!(config(&header("llama").kv_str("llama.rope.scaling.type", "none")).is_ok());
    }
}
