//! Model facts derived from GGUF metadata: shape, parameters, bytes per tensor
//! class, bytes streamed per decode step and KV-cache bytes per token.
//!
//! The rules (documented on each method) follow how llama.cpp's graphs read the
//! tensors during one decode step:
//! - every weight matrix of every layer and the output head is read once;
//! - the token embedding is a `get_rows` gather of one row, *unless* the model has
//!   no separate `output.weight` (tied embeddings), in which case the output head
//!   is the embedding matrix and it is read whole;
//! - MoE expert tensors (`*_exps`) are read only for the `expert_used_count` of
//!   `expert_count` experts a token is routed to.

use crate::probe::gguf::{GgmlType, Gguf, GgufError, TensorInfo, Value};
use crate::units::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Which part of the network a tensor belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TensorClass {
    /// `token_embd.weight`: gathered one row per token (unless tied).
    TokenEmbedding,
    /// `output.weight`: the LM head, a full matrix-vector product per token.
    OutputHead,
    /// Attention projections and their biases (`attn_q/k/v/output`, `attn_qkv`).
    Attention,
    /// Feed-forward weights (`ffn_up/gate/down`, MoE experts and router).
    Ffn,
    /// Normalization weights (`*_norm`).
    Norm,
    /// Anything else (rope factors, position embeddings, …).
    Other,
}

impl TensorClass {
    /// Classifies a tensor by its llama.cpp GGUF name.
    pub fn of(name: &str) -> TensorClass {
        let base = name.rsplit_once('.').map_or(name, |(b, _)| b); // drop .weight/.bias
        let leaf = base.rsplit('.').next().unwrap_or(base);
        if name == "token_embd.weight" {
            TensorClass::TokenEmbedding
        } else if name == "output.weight" {
            TensorClass::OutputHead
        } else if leaf.ends_with("norm") {
            TensorClass::Norm
        } else if leaf.starts_with("attn") {
            TensorClass::Attention
        } else if leaf.starts_with("ffn") {
            TensorClass::Ffn
        } else {
            TensorClass::Other
        }
    }

    /// Short label for tables.
    pub fn label(self) -> &'static str {
        match self {
            TensorClass::TokenEmbedding => "token_embd",
            TensorClass::OutputHead => "output",
            TensorClass::Attention => "attention",
            TensorClass::Ffn => "ffn",
            TensorClass::Norm => "norms",
            TensorClass::Other => "other",
        }
    }
}

/// The element type of the KV cache (llama.cpp's `--cache-type-k/v`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CacheType {
    /// 16-bit float: 2 bytes per element (llama.cpp's default, even for quantized weights).
    #[default]
    F16,
    /// bfloat16: 2 bytes per element.
    Bf16,
    /// 32-bit float: 4 bytes per element.
    F32,
    /// Q8_0 blocks: 34 bytes per 32 elements = 1.0625 B/element.
    Q8_0,
    /// Q4_0 blocks: 18 bytes per 32 elements = 0.5625 B/element.
    Q4_0,
}

impl CacheType {
    /// Bytes per cached element, including block scales.
    pub fn bytes_per_element(self) -> f64 {
        match self {
            CacheType::F16 | CacheType::Bf16 => 2.0,
            CacheType::F32 => 4.0,
            CacheType::Q8_0 => 34.0 / 32.0,
            CacheType::Q4_0 => 18.0 / 32.0,
        }
    }
    /// llama.cpp's name (`f16`, `q8_0`, …).
    pub fn name(self) -> &'static str {
        match self {
            CacheType::F16 => "f16",
            CacheType::Bf16 => "bf16",
            CacheType::F32 => "f32",
            CacheType::Q8_0 => "q8_0",
            CacheType::Q4_0 => "q4_0",
        }
    }
    /// Parses llama.cpp's name.
    pub fn parse(s: &str) -> Option<CacheType> {
        Some(match s.to_ascii_lowercase().as_str() {
            "f16" => CacheType::F16,
            "bf16" => CacheType::Bf16,
            "f32" => CacheType::F32,
            "q8_0" => CacheType::Q8_0,
            "q4_0" => CacheType::Q4_0,
            _ => return None,
        })
    }
}

/// Bytes and parameter count of one tensor class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassTotals {
    pub n_tensors: u64,
    /// Elements (parameters).
    pub n_params: u64,
    /// Bytes on disk / in memory.
    pub bytes: Bytes,
}

/// Everything memwall knows about a model from its GGUF header.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelFacts {
    /// Path of the GGUF file as opened.
    pub path: PathBuf,
    /// `general.name`, when present.
    pub name: Option<String>,
    /// `general.architecture` (e.g. `qwen2`, `llama`, `gemma3`).
    pub architecture: String,
    /// Quantization label from `general.file_type` (e.g. `Q4_K_M`), or the dominant tensor type.
    pub quant: String,
    /// `{arch}.block_count`.
    pub n_layer: u32,
    /// `{arch}.embedding_length`.
    pub n_embd: u32,
    /// `{arch}.attention.head_count`.
    pub n_head: u32,
    /// KV heads per layer (`{arch}.attention.head_count_kv`, scalar or per-layer array; defaults to n_head).
    pub n_head_kv: Vec<u32>,
    /// Key head dimension (`{arch}.attention.key_length`, else n_embd ÷ n_head).
    pub head_dim_k: u32,
    /// Value head dimension (`{arch}.attention.value_length`, else head_dim_k).
    pub head_dim_v: u32,
    /// `{arch}.feed_forward_length`, when present.
    pub n_ff: Option<u32>,
    /// Vocabulary size (rows of the token embedding).
    pub n_vocab: u64,
    /// `{arch}.context_length` (trained context).
    pub n_ctx_train: u64,
    /// Sliding-window size of the local-attention layers, if any.
    pub sliding_window: Option<u64>,
    /// Which layers use the sliding window (`true` = local). Empty when none do.
    pub swa_layers: Vec<bool>,
    /// `{arch}.expert_count` for MoE models.
    pub n_expert: Option<u32>,
    /// `{arch}.expert_used_count` for MoE models.
    pub n_expert_used: Option<u32>,
    /// Total parameters (elements of all tensors).
    pub n_params: u64,
    /// Size of the file.
    pub file_bytes: Bytes,
    /// Sum of all tensor data.
    pub tensor_bytes: Bytes,
    /// Per-class totals.
    pub classes: BTreeMap<TensorClass, ClassTotals>,
    /// Tensor count per ggml type name.
    pub type_counts: BTreeMap<String, u64>,
    /// `true` when there is no `output.weight`: the output head reuses the token embedding.
    pub tied_embeddings: bool,
    /// Bytes of one row of the token embedding (the gather cost).
    pub token_embd_row_bytes: Bytes,
    /// Bytes read from memory by one decode step at batch 1, weights only (see [`ModelFacts::streamed_bytes`]).
    pub streamed_bytes: Bytes,
    /// The file says it was written by `memwall model synth` (key `memwall.synthetic`):
    /// random weights, meaningless text, valid speed.
    pub synthetic: bool,
    /// Parameters multiplied in one decode step (matmul weights incl. the output head;
    /// routed experts only for MoE). FLOPs per token ≈ 2 × this.
    pub active_matmul_params: u64,
}

/// `llama_ftype` names (llama.h), indexed by `general.file_type`.
fn ftype_name(ft: u64) -> Option<&'static str> {
    Some(match ft {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4_MOE",
        _ => return None,
    })
}

/// llama.cpp's default sliding-window layer pattern per architecture, used when the
/// file has no `{arch}.attention.sliding_window_pattern` (llama-model.cpp
/// `load_swa_pattern(ml, N)`): layer `il` is local iff `il % N < N - 1`.
fn default_swa_pattern(arch: &str) -> Option<u32> {
    match arch {
        "gemma3" => Some(6),
        "gemma2" => Some(2),
        "cohere2" => Some(4),
        _ => None,
    }
}

/// One tensor as an engine holds it: the input of [`decode_step_bytes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldTensor {
    /// llama.cpp's GGUF name (`token_embd.weight`, `blk.0.ffn_up.weight`, …): it
    /// decides the tensor's [`TensorClass`] and whether a step gathers or reads it.
    pub name: String,
    /// Bytes held (a quantized matrix: its quants with their scales and biases).
    pub bytes: u64,
    /// Bytes of one row (`ne[0]` elements, the same share of scales and biases):
    /// what a gather of one token's row reads.
    pub row_bytes: u64,
}

/// Bytes one batch-1 decode step streams from memory, weights only, for an engine
/// holding `held` (llama.cpp: the GGUF's tensors as stored; MLX: its arrays at the
/// arm's precision). The one rule every engine's rows use:
/// - the token embedding is a gather of one row (`row_bytes`), unless `tied` (no
///   separate `output.weight`): the output head then is the embedding matrix, read
///   whole;
/// - `position_embd.weight` is a gather of one row;
/// - MoE expert tensors (`*_exps`) count `expert_used ÷ expert_count` of their bytes
///   (`experts = Some((used, count))`);
/// - every other tensor is read once, whole.
///
/// Example (tiny untied F16 shape of `probe::synth`'s test: 2 layers, n_embd 256,
/// vocab 300): an embedding of 300 × 256 × 2 = 153,600 bytes streams 512 (one row),
/// while its 153,600-byte `output.weight` streams whole.
pub fn decode_step_bytes(held: &[HeldTensor], tied: bool, experts: Option<(u64, u64)>) -> Bytes {
    let mut streamed: u128 = 0;
    for t in held {
        let bytes = t.bytes as u128;
        streamed += match (TensorClass::of(&t.name), experts) {
            (TensorClass::TokenEmbedding, _) if tied => bytes,
            (TensorClass::TokenEmbedding, _) => t.row_bytes as u128,
            _ if t.name == "position_embd.weight" => t.row_bytes as u128,
            (_, Some((used, count))) if t.name.contains("_exps") && count > 0 => {
                bytes * used as u128 / count as u128
            }
            _ => bytes,
        };
    }
    Bytes(streamed.min(u64::MAX as u128) as u64)
}

/// How an engine holds the weights it reads from a GGUF file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldAs {
    /// As stored in the file (llama.cpp maps the file's tensors).
    File,
    /// Every matrix as f16, every vector as f32 (MLX's `mlx-f16` arm).
    F16,
    /// Every matrix in MLX's affine quantization of `bits` bits, an f16 scale and an
    /// f16 bias per group of 64 weights; every vector as f32 (`mlx-8bit`, `mlx-4bit`).
    Affine(u32),
}

/// Bytes `tensors` take held as `how`, and the extra bytes loading needs at its peak
/// (the largest matrix's f32 values and their f16 copy, alive together while it is
/// converted; 0 for [`HeldAs::File`]).
pub fn held_bytes(tensors: &[TensorInfo], how: HeldAs) -> (u64, u64) {
    let matrix = |n: u64| match how {
        HeldAs::File => 0,
        HeldAs::F16 => 2 * n,
        HeldAs::Affine(bits) => n * u64::from(bits) / 8 + n / 64 * 2 * 2,
    };
    if how == HeldAs::File {
        return (tensors.iter().map(|t| t.n_bytes().0).sum(), 0);
    }
    let held = tensors
        .iter()
        .map(|t| {
            let n = t.n_elements();
            if t.dims.len() == 2 { matrix(n) } else { 4 * n }
        })
        .sum();
    let largest = tensors
        .iter()
        .filter(|t| t.dims.len() == 2)
        .map(TensorInfo::n_elements)
        .max()
        .unwrap_or(0);
    (held, largest * (4 + 2))
}

impl ModelFacts {
    /// The facts of `path` as an engine holding its weights `how` sees them: the
    /// memory guard's input. `tensor_bytes` is the held weights plus loading's peak
    /// extra ([`held_bytes`]); everything else is the file's.
    ///
    /// # Errors
    /// As [`ModelFacts::open`].
    pub fn open_held(path: impl AsRef<Path>, how: HeldAs) -> Result<ModelFacts, GgufError> {
        let g = Gguf::open(path)?;
        let mut f = Self::from_gguf(&g)?;
        if how != HeldAs::File {
            let (held, extra) = held_bytes(&g.tensors, how);
            f.tensor_bytes = Bytes(held.saturating_add(extra));
        }
        Ok(f)
    }

    /// Reads the GGUF header at `path` and derives the facts. Weights are not read.
    ///
    /// # Errors
    /// [`GgufError`] when the header is malformed or a required key
    /// (`general.architecture`, `{arch}.block_count`, `{arch}.embedding_length`,
    /// `{arch}.attention.head_count`) is missing.
    pub fn open(path: impl AsRef<Path>) -> Result<ModelFacts, GgufError> {
        let g = Gguf::open(path)?;
        Self::from_gguf(&g)
    }

    /// Derives the facts from a parsed header.
    ///
    /// Header values are hostile input too: a count that sizes a per-layer list
    /// (`{arch}.block_count`) must not exceed the tensors present (every block has
    /// at least one tensor), so the lists never grow beyond what the file's bytes
    /// justify; values kept as `u32` must fit in 32 bits.
    ///
    /// # Errors
    /// As [`ModelFacts::open`], and [`GgufError`] naming the key whose value is out
    /// of range.
    pub fn from_gguf(g: &Gguf) -> Result<ModelFacts, GgufError> {
        let missing = |field: &str| GgufError {
            path: g.path.clone(),
            field: format!("metadata[{field}]"),
            problem: "missing or not a number".into(),
            fix: "The file lacks llama.cpp's standard keys: re-convert it with convert_hf_to_gguf.py",
        };
        let arch = g
            .architecture()
            .ok_or_else(|| missing("general.architecture"))?
            .to_string();
        let key = |k: &str| format!("{arch}.{k}");
        let corrupt = |k: &str, problem: String| GgufError {
            path: g.path.clone(),
            field: format!("metadata[{k}]"),
            problem,
            fix: "The metadata is corrupt: re-convert the model",
        };
        let small = |k: &str, v: u64| -> Result<u32, GgufError> {
            u32::try_from(v).map_err(|_| corrupt(k, format!("{k} = {v} does not fit in 32 bits")))
        };
        let req = |k: &str| -> Result<u64, GgufError> {
            g.get(&key(k))
                .and_then(Value::as_u64)
                .ok_or_else(|| missing(&key(k)))
        };
        let opt = |k: &str| g.get(&key(k)).and_then(Value::as_u64);
        let opt32 = |k: &str| opt(k).map(|v| small(&key(k), v)).transpose();
        let n_layer = small(&key("block_count"), req("block_count")?)?;
        let n_embd = small(&key("embedding_length"), req("embedding_length")?)?;
        let n_head = small(&key("attention.head_count"), req("attention.head_count")?)?;
        if n_layer == 0 {
            return Err(corrupt(&key("block_count"), "zero layers".into()));
        }
        if n_head == 0 {
            return Err(corrupt(&key("attention.head_count"), "zero heads".into()));
        }
        // Per-layer lists below have n_layer entries: bound it by what is in the file.
        if n_layer as usize > g.tensors.len() {
            let k = key("block_count");
            return Err(corrupt(
                &k,
                format!(
                    "{k} = {n_layer} exceeds the tensors present ({} tensor{}; every block has at least one)",
                    g.tensors.len(),
                    if g.tensors.len() == 1 { "" } else { "s" }
                ),
            ));
        }
        let kv_key = key("attention.head_count_kv");
        let n_head_kv: Vec<u32> = match g.get(&kv_key) {
            Some(Value::Array {
                items: Some(items), ..
            }) => items
                .iter()
                .map(|v| small(&kv_key, v.as_u64().unwrap_or(n_head as u64)))
                .collect::<Result<_, _>>()?,
            Some(Value::Array {
                items: None, len, ..
            }) => {
                return Err(corrupt(
                    &kv_key,
                    format!(
                        "a per-layer array of {len} entries was not kept (too long, or the file's array budget was spent)"
                    ),
                ));
            }
            Some(v) => vec![small(&kv_key, v.as_u64().unwrap_or(n_head as u64))?; n_layer as usize],
            None => vec![n_head; n_layer as usize],
        };
        let head_dim_k = opt32("attention.key_length")?.unwrap_or(n_embd / n_head);
        let head_dim_v = opt32("attention.value_length")?.unwrap_or(head_dim_k);
        let sliding_window = opt("attention.sliding_window").filter(|&w| w > 0);
        let swa_layers: Vec<bool> = match (
            sliding_window,
            g.get(&key("attention.sliding_window_pattern")),
        ) {
            (None, _) => vec![],
            (
                Some(_),
                Some(Value::Array {
                    items: Some(items), ..
                }),
            ) => items
                .iter()
                .map(|v| matches!(v, Value::Bool(true)) || v.as_u64().unwrap_or(0) != 0)
                .collect(),
            (
                Some(_),
                Some(Value::Array {
                    items: None, len, ..
                }),
            ) => {
                return Err(corrupt(
                    &key("attention.sliding_window_pattern"),
                    format!(
                        "a per-layer array of {len} entries was not kept (too long, or the file's array budget was spent)"
                    ),
                ));
            }
            (Some(_), p) => {
                let n = match p.and_then(Value::as_u64) {
                    Some(v) => Some(small(&key("attention.sliding_window_pattern"), v)?),
                    None => default_swa_pattern(&arch),
                };
                match n {
                    Some(n) => (0..n_layer).map(|il| n == 0 || il % n < n - 1).collect(),
                    // Unknown pattern: llama.cpp treats every layer as windowed when
                    // n_pattern = 0; we cannot know, so assume full attention (upper bound).
                    None => vec![],
                }
            }
        };

        let embd = g.tensor("token_embd.weight");
        let tied = g.tensor("output.weight").is_none();
        let n_vocab = embd
            .map(|t| t.dims.get(1).copied().unwrap_or(0))
            .or_else(|| g.get("tokenizer.ggml.tokens").and_then(Value::array_len))
            .unwrap_or(0);
        let n_expert = opt32("expert_count")?.filter(|&v| v > 0);
        let n_expert_used = opt32("expert_used_count")?.filter(|&v| v > 0);

        let mut classes: BTreeMap<TensorClass, ClassTotals> = BTreeMap::new();
        let mut type_counts: BTreeMap<String, u64> = BTreeMap::new();
        let mut active_matmul: u128 = 0;
        let expert_frac = match (n_expert, n_expert_used) {
            (Some(n), Some(u)) if u <= n => Some((u as u128, n as u128)),
            _ => None,
        };
        for t in &g.tensors {
            let class = TensorClass::of(&t.name);
            let e = classes.entry(class).or_default();
            e.n_tensors += 1;
            e.n_params += t.n_elements();
            e.bytes = e.bytes + t.n_bytes();
            *type_counts.entry(t.ggml_type.name()).or_default() += 1;
            let params = t.n_elements() as u128;
            let is_matmul = t.dims.len() >= 2 && t.name.ends_with(".weight");
            let params = match (expert_frac, t.name.contains("_exps")) {
                (Some((u, n)), true) => params * u / n,
                _ => params,
            };
            match class {
                // Tied: read whole as the output head.
                TensorClass::TokenEmbedding if tied => active_matmul += params,
                TensorClass::TokenEmbedding => {}
                _ if t.name == "position_embd.weight" => {}
                _ if is_matmul && class != TensorClass::Norm => active_matmul += params,
                _ => {}
            }
        }
        let held: Vec<HeldTensor> = g
            .tensors
            .iter()
            .map(|t| HeldTensor {
                name: t.name.clone(),
                bytes: t.n_bytes().0,
                row_bytes: t.row_bytes().0,
            })
            .collect();
        let streamed =
            decode_step_bytes(&held, tied, expert_frac.map(|(u, n)| (u as u64, n as u64)));
        let quant = g
            .get("general.file_type")
            .and_then(Value::as_u64)
            .and_then(ftype_name)
            .map(str::to_string)
            .or_else(|| {
                type_counts
                    .iter()
                    .max_by_key(|(_, c)| **c)
                    .map(|(n, _)| n.clone())
            })
            .unwrap_or_else(|| "?".into());
        Ok(ModelFacts {
            path: g.path.clone(),
            name: g
                .get("general.name")
                .and_then(Value::as_str)
                .map(str::to_string),
            architecture: arch.clone(),
            quant,
            n_layer,
            n_embd,
            n_head,
            n_head_kv,
            head_dim_k,
            head_dim_v,
            n_ff: opt32("feed_forward_length")?,
            n_vocab,
            n_ctx_train: opt("context_length").unwrap_or(0),
            sliding_window,
            swa_layers,
            n_expert,
            n_expert_used,
            n_params: g.tensors.iter().map(TensorInfo::n_elements).sum(),
            file_bytes: g.file_bytes,
            tensor_bytes: g.tensors.iter().map(TensorInfo::n_bytes).sum(),
            classes,
            type_counts,
            tied_embeddings: tied,
            token_embd_row_bytes: embd.map(TensorInfo::row_bytes).unwrap_or_default(),
            streamed_bytes: streamed,
            active_matmul_params: active_matmul as u64,
            synthetic: matches!(g.get("memwall.synthetic"), Some(Value::Bool(true))),
        })
    }

    /// Bytes of one class (zero when absent).
    pub fn class_bytes(&self, c: TensorClass) -> Bytes {
        self.classes.get(&c).map(|t| t.bytes).unwrap_or_default()
    }

    /// KV-cache bytes added per token of context, all layers:
    /// `Σ_layers n_head_kv(l) × (head_dim_k + head_dim_v) × bytes_per_element`,
    /// which for uniform layers is the familiar
    /// `2 × n_layer × n_head_kv × head_dim × bytes_per_element`.
    /// This is *capacity* per stored token; see [`ModelFacts::kv_bytes_read_at_depth`]
    /// for the traffic of one decode step. Rounds down to whole bytes per layer.
    pub fn kv_bytes_per_token(&self, cache: CacheType) -> Bytes {
        Bytes(self.kv_layer_bytes(cache).iter().map(|&b| b as u64).sum())
    }

    /// KV bytes per cached token of each layer at `cache`.
    pub(crate) fn kv_layer_bytes(&self, cache: CacheType) -> Vec<f64> {
        (0..self.n_layer as usize)
            .map(|il| {
                let kv = *self.n_head_kv.get(il).unwrap_or(&self.n_head) as f64;
                (kv * (self.head_dim_k + self.head_dim_v) as f64 * cache.bytes_per_element())
                    .floor()
            })
            .collect()
    }

    /// KV-cache bytes one decode step reads at context depth `d`: each full-attention
    /// layer reads `d` cached tokens, each sliding-window layer `min(d, window)`.
    pub fn kv_bytes_read_at_depth(&self, depth: u64, cache: CacheType) -> Bytes {
        let per_layer = self.kv_layer_bytes(cache);
        let total: f64 = per_layer
            .iter()
            .enumerate()
            .map(|(il, b)| {
                let local = self.swa_layers.get(il).copied().unwrap_or(false);
                let n = match (local, self.sliding_window) {
                    (true, Some(w)) => depth.min(w),
                    _ => depth,
                };
                b * n as f64
            })
            .sum();
        Bytes(total as u64)
    }

    /// Attention FLOPs of one token attending to `context` cached tokens, all layers:
    /// `2 × n_head × head_dim_k × c` for QKᵀ plus `2 × n_head × head_dim_v × c` for AV,
    /// with `c = min(context, window)` on sliding-window layers. For Qwen3-8B
    /// (36 layers, 32 heads, 128) this is ≈ 589,824 × d.
    pub fn attention_flops_per_token(&self, context: u64) -> f64 {
        (0..self.n_layer as usize)
            .map(|il| {
                let local = self.swa_layers.get(il).copied().unwrap_or(false);
                let c = match (local, self.sliding_window) {
                    (true, Some(w)) => context.min(w),
                    _ => context,
                };
                2.0 * self.n_head as f64 * (self.head_dim_k + self.head_dim_v) as f64 * c as f64
            })
            .sum()
    }

    /// Human label for the model: `general.name` or the file stem.
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            self.path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
    }

    /// llama-bench's `model_type` string: `"{arch} {size} {quant}"`, e.g. `qwen2 0.5B Q4_K_M`.
    pub fn model_type(&self) -> String {
        let b = self.n_params as f64 / 1e9;
        let size = if b < 1.0 {
            format!("{:.0}M", b * 1000.0)
        } else {
            format!("{b:.1}B")
        };
        format!("{} {} {}", self.architecture, size, self.quant)
    }

    /// Dominant weight type (most tensors among quantized types).
    pub fn dominant_type(&self) -> Option<GgmlType> {
        self.type_counts
            .iter()
            .filter(|(n, _)| n.as_str() != "F32")
            .max_by_key(|(_, c)| **c)
            .and_then(|(n, _)| GgmlType::from_name(n))
    }
}

/// The one-layer llama's header: 4 heads of 16 dims, one f32 `token_embd.weight` of
/// 64 × 10 at offset 0 (more tensors and the data are the caller's).
#[cfg(test)]
fn one_layer_builder() -> crate::probe::gguf::testutil::GgufBuilder {
    crate::probe::gguf::testutil::GgufBuilder::default()
        .kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", 1)
        .kv_u32("llama.embedding_length", 64)
        .kv_u32("llama.attention.head_count", 4)
        .tensor("token_embd.weight", &[64, 10], 0, 0)
}

/// The GGUF bytes of [`one_layer_test_facts`]'s model (for a test that needs a file).
#[cfg(test)]
pub(crate) fn one_layer_test_file() -> Vec<u8> {
    one_layer_builder().data(2560).build()
}

/// A 1-layer llama of 2,560 weight bytes whose KV cache is 256 B/token at F16
/// (4 KV heads × (16 + 16) dims × 2 B), named `name`: the tests' smallest model.
#[cfg(test)]
pub(crate) fn one_layer_test_facts(name: &str) -> ModelFacts {
    let b = one_layer_builder().data(2560).build();
    let g = crate::probe::gguf::Gguf::parse(&b[..], b.len() as u64, name.into())
        .expect("the one-layer fixture parses");
    ModelFacts::from_gguf(&g).expect("the one-layer fixture has facts")
}

#[cfg(test)]
mod tests {

    #[test]
    fn held_bytes_follow_the_arms_closed_forms() {
        // One f32 matrix of 64 × 10 = 640 weights and one f32 vector of 64.
        let b = one_layer_builder()
            .tensor("output_norm.weight", &[64], 0, 2560)
            .data(2816)
            .build();
        let g = crate::probe::gguf::Gguf::parse(&b[..], b.len() as u64, "t".into()).unwrap();
        let t = &g.tensors;
        // File: 640 × 4 + 64 × 4 bytes, nothing extra.
        assert_eq!(held_bytes(t, HeldAs::File), (2816, 0));
        // f16: 640 × 2 + the vector as f32 (256); loading holds 640 × (4 + 2) more.
        assert_eq!(held_bytes(t, HeldAs::F16), (1280 + 256, 3840));
        // 8-bit: 640 + 10 groups × (2 + 2) = 680, + 256.
        assert_eq!(held_bytes(t, HeldAs::Affine(8)), (680 + 256, 3840));
        // 4-bit: 320 + 40, + 256.
        assert_eq!(held_bytes(t, HeldAs::Affine(4)), (360 + 256, 3840));
    }
    use super::*;
    use crate::probe::gguf::testutil::GgufBuilder;

    fn facts(b: &GgufBuilder) -> ModelFacts {
        let bytes = b.build();
        let g = Gguf::parse(&bytes[..], bytes.len() as u64, PathBuf::from("m.gguf")).unwrap();
        ModelFacts::from_gguf(&g).unwrap()
    }

    fn tiny(tied: bool) -> GgufBuilder {
        // 2 layers, n_embd 64, 4 heads, 2 KV heads (head_dim 16), vocab 10, all F32.
        let mut b = GgufBuilder::default()
            .kv_str("general.architecture", "llama")
            .kv_u32("llama.block_count", 2)
            .kv_u32("llama.embedding_length", 64)
            .kv_u32("llama.attention.head_count", 4)
            .kv_u32("llama.attention.head_count_kv", 2)
            .tensor("token_embd.weight", &[64, 10], 0, 0);
        let mut off = 64 * 10 * 4;
        if !tied {
            b = b.tensor("output.weight", &[64, 10], 0, off);
            off += 64 * 10 * 4;
        }
        for il in 0..2 {
            b = b
                .tensor(&format!("blk.{il}.attn_q.weight"), &[64, 64], 0, off)
                .tensor(
                    &format!("blk.{il}.attn_norm.weight"),
                    &[64],
                    0,
                    off + 64 * 64 * 4,
                );
            off += 64 * 64 * 4 + 256;
        }
        b.data(off)
    }

    #[test]
    fn classes_follow_llama_cpp_names() {
        assert_eq!(
            TensorClass::of("token_embd.weight"),
            TensorClass::TokenEmbedding
        );
        assert_eq!(TensorClass::of("output.weight"), TensorClass::OutputHead);
        assert_eq!(TensorClass::of("output_norm.weight"), TensorClass::Norm);
        assert_eq!(TensorClass::of("blk.3.attn_k.bias"), TensorClass::Attention);
        assert_eq!(
            TensorClass::of("blk.3.attn_q_norm.weight"),
            TensorClass::Norm
        );
        assert_eq!(
            TensorClass::of("blk.3.ffn_down_exps.weight"),
            TensorClass::Ffn
        );
        assert_eq!(
            TensorClass::of("blk.3.post_ffw_norm.weight"),
            TensorClass::Norm
        );
        assert_eq!(TensorClass::of("rope_freqs.weight"), TensorClass::Other);
    }

    #[test]
    fn untied_embedding_is_a_one_row_gather() {
        let f = facts(&tiny(false));
        // layers: 2 × (64×64×4 + 64×4) = 33,280; output 2,560; one embd row 256.
        assert_eq!(f.streamed_bytes, Bytes(33_280 + 2_560 + 256));
        assert!(!f.tied_embeddings);
        assert_eq!(f.active_matmul_params, 2 * 64 * 64 + 640);
    }

    #[test]
    fn a_step_gathers_one_embedding_row_unless_tied_and_routes_experts() {
        let t = |name: &str, bytes: u64, row_bytes: u64| HeldTensor {
            name: name.into(),
            bytes,
            row_bytes,
        };
        let held = [
            t("token_embd.weight", 153_600, 512),
            t("position_embd.weight", 4_096, 64),
            t("blk.0.attn_q.weight", 131_072, 512),
            t("blk.0.ffn_up_exps.weight", 80_000, 100),
            t("output_norm.weight", 1_024, 1_024),
        ];
        // Untied, no experts: 512 + 64 + 131,072 + 80,000 + 1,024 = 212,672.
        assert_eq!(decode_step_bytes(&held, false, None), Bytes(212_672));
        // Tied: the embedding is read whole (+ 153,600 − 512).
        assert_eq!(decode_step_bytes(&held, true, None), Bytes(365_760));
        // 2 of 8 experts: 80,000 × 2 ÷ 8 = 20,000 instead of 80,000.
        assert_eq!(
            decode_step_bytes(&held, false, Some((2, 8))),
            Bytes(152_672)
        );
    }

    #[test]
    fn tied_embedding_is_read_whole_as_the_head() {
        let f = facts(&tiny(true));
        assert_eq!(f.streamed_bytes, Bytes(33_280 + 2_560));
        assert!(f.tied_embeddings);
    }

    #[test]
    fn kv_formula_known_values() {
        // Qwen2.5-7B shape: 28 layers, 4 KV heads, head_dim 128, f16 → 57,344 B/token.
        let mut f = facts(&tiny(false));
        f.n_layer = 28;
        f.n_head = 28;
        f.n_head_kv = vec![4; 28];
        f.head_dim_k = 128;
        f.head_dim_v = 128;
        assert_eq!(f.kv_bytes_per_token(CacheType::F16), Bytes(57_344));
        // Qwen3-8B shape: 36 layers, 8 KV heads, 128 → 147,456.
        f.n_layer = 36;
        f.n_head = 32;
        f.n_head_kv = vec![8; 36];
        assert_eq!(f.kv_bytes_per_token(CacheType::F16), Bytes(147_456));
        // q8_0: 34/32 bytes per element: 36 × 8 × 256 × 1.0625 = 78,336.
        assert_eq!(f.kv_bytes_per_token(CacheType::Q8_0), Bytes(78_336));
        // At depth 8192 the cache adds 8192 × 147,456 = 1,207,959,552 bytes.
        assert_eq!(
            f.kv_bytes_read_at_depth(8192, CacheType::F16),
            Bytes(1_207_959_552)
        );
        // Attention FLOPs ≈ 589,824 × d (the seed's figure).
        assert_eq!(f.attention_flops_per_token(1), 589_824.0);
    }

    #[test]
    fn sliding_window_layers_read_at_most_the_window() {
        let b = tiny(false)
            .kv_u32("llama.attention.sliding_window", 4)
            .kv_raw("llama.attention.sliding_window_pattern", 9, &{
                let mut p = 7u32.to_le_bytes().to_vec();
                p.extend(2u64.to_le_bytes());
                p.extend([1u8, 0u8]); // layer 0 local, layer 1 global
                p
            });
        let f = facts(&b);
        assert_eq!(f.swa_layers, vec![true, false]);
        let per_layer = 2 * 32 * 2; // 2 kv heads × (16+16) × 2 bytes = 128
        assert_eq!(f.kv_bytes_per_token(CacheType::F16), Bytes(2 * per_layer));
        assert_eq!(
            f.kv_bytes_read_at_depth(100, CacheType::F16),
            Bytes(per_layer * (4 + 100))
        );
    }

    #[test]
    fn gemma3_default_pattern_is_five_local_one_global() {
        let mut b = GgufBuilder::default()
            .kv_str("general.architecture", "gemma3")
            .kv_u32("gemma3.block_count", 12)
            .kv_u32("gemma3.embedding_length", 64)
            .kv_u32("gemma3.attention.head_count", 4)
            .kv_u32("gemma3.attention.sliding_window", 512);
        b = b.tensor("token_embd.weight", &[64, 10], 0, 0);
        for il in 0..12 {
            b = b.tensor(
                &format!("blk.{il}.attn_norm.weight"),
                &[64],
                0,
                2560 + 256 * il,
            );
        }
        let b = b.data(2560 + 256 * 12);
        let f = facts(&b);
        let globals: Vec<usize> = f
            .swa_layers
            .iter()
            .enumerate()
            .filter(|(_, l)| !**l)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(globals, vec![5, 11]);
    }

    #[test]
    fn missing_keys_name_the_field() {
        let b = GgufBuilder::default()
            .kv_str("general.architecture", "qwen2")
            .data(0)
            .build();
        let g = Gguf::parse(&b[..], b.len() as u64, PathBuf::from("m.gguf")).unwrap();
        let e = ModelFacts::from_gguf(&g).unwrap_err().to_string();
        assert!(
            e.contains("m.gguf: metadata[qwen2.block_count]: missing"),
            "{e}"
        );
    }

    fn facts_err(b: &GgufBuilder) -> String {
        let bytes = b.build();
        let g = Gguf::parse(&bytes[..], bytes.len() as u64, PathBuf::from("m.gguf")).unwrap();
        ModelFacts::from_gguf(&g).unwrap_err().to_string()
    }

    #[test]
    fn block_count_beyond_the_tensors_present_is_refused_before_allocating() {
        // A hostile file: ~500 bytes, llama.block_count = 4,000,000,000. Per-layer
        // lists of that length would take 16 GB; it must fail at once, naming the key.
        let b = GgufBuilder::default()
            .kv_str("general.architecture", "llama")
            .kv_u32("llama.block_count", 4_000_000_000)
            .kv_u32("llama.embedding_length", 64)
            .kv_u32("llama.attention.head_count", 4)
            .tensor("token_embd.weight", &[64, 10], 0, 0)
            .data(2560);
        let t = std::time::Instant::now();
        let e = facts_err(&b);
        assert_eq!(
            e,
            "m.gguf: metadata[llama.block_count]: llama.block_count = 4000000000 exceeds the tensors present (1 tensor; every block has at least one). The metadata is corrupt: re-convert the model"
        );
        assert!(t.elapsed().as_secs_f64() < 1.0, "{:?}", t.elapsed());
        // The bound itself: as many layers as tensors is accepted, one more is not.
        let one = |n: u32| {
            GgufBuilder::default()
                .kv_str("general.architecture", "llama")
                .kv_u32("llama.block_count", n)
                .kv_u32("llama.embedding_length", 64)
                .kv_u32("llama.attention.head_count", 4)
                .tensor("token_embd.weight", &[64, 10], 0, 0)
                .data(2560)
        };
        assert_eq!(facts(&one(1)).n_layer, 1);
        assert!(
            facts_err(&one(2))
                .contains("llama.block_count = 2 exceeds the tensors present (1 tensor;")
        );
    }

    #[test]
    fn values_kept_as_u32_must_fit() {
        let b = GgufBuilder::default()
            .kv_str("general.architecture", "llama")
            .kv_u32("llama.block_count", 1)
            .kv_u64("llama.embedding_length", 1 << 33)
            .kv_u32("llama.attention.head_count", 4)
            .tensor("token_embd.weight", &[64, 10], 0, 0)
            .data(2560);
        assert!(
            facts_err(&b).contains(
                "m.gguf: metadata[llama.embedding_length]: llama.embedding_length = 8589934592 does not fit in 32 bits"
            ),
            "{}",
            facts_err(&b)
        );
        let b = tiny(false).kv_u64("llama.expert_count", u64::MAX);
        assert!(
            facts_err(&b).contains("llama.expert_count = 18446744073709551615 does not fit"),
            "{}",
            facts_err(&b)
        );
    }

    #[test]
    fn a_per_layer_array_that_was_not_kept_is_an_error_not_a_default() {
        // head_count_kv as an array longer than the reader keeps: using n_head for
        // every layer would silently overstate the KV cache.
        let mut p = 4u32.to_le_bytes().to_vec();
        p.extend(5000u64.to_le_bytes());
        p.extend(std::iter::repeat_n(0u8, 4 * 5000));
        let b = GgufBuilder::default()
            .kv_str("general.architecture", "llama")
            .kv_u32("llama.block_count", 1)
            .kv_u32("llama.embedding_length", 64)
            .kv_u32("llama.attention.head_count", 4)
            .kv_raw("llama.attention.head_count_kv", 9, &p)
            .tensor("token_embd.weight", &[64, 10], 0, 0)
            .data(2560);
        assert!(
            facts_err(&b).contains(
                "metadata[llama.attention.head_count_kv]: a per-layer array of 5000 entries was not kept"
            ),
            "{}",
            facts_err(&b)
        );
    }
}
