//! Model shapes without weights: the tensor list of a transformer architecture
//! (names, dims, types) built from a handful of hyperparameters, the named presets
//! of public models, and the quantization recipes (which ggml type each tensor gets).
//!
//! A shape becomes an in-memory GGUF header ([`ModelShape::header`]) and then
//! [`ModelFacts`] through the same code that reads real files, so the calculator
//! and `model info` of a synthesized file (see [`crate::probe::synth`]) agree by
//! construction.
//!
//! Tensor names and dims follow llama.cpp's loaders (`src/models/{llama,qwen2,qwen3,
//! qwen3moe,gemma3}.cpp`, `create_tensor(...)`); dims are GGUF order, `ne[0]` (the
//! input width) first. The recipes follow `llama_tensor_get_type_impl` and
//! `tensor_type_fallback` in llama.cpp's `src/llama-quant.cpp` (the version memwall
//! links, llama-cpp-sys-2 0.1.161). A recipe is an *estimate*: a real file's bytes
//! (which `memwall calc --model FILE` reads) beat it, because converters and
//! quantizer versions differ (see the tests against real files).

use crate::probe::gguf::{GgmlType, Gguf, GgufError, TensorInfo, Value};
use crate::probe::model::ModelFacts;
use crate::units::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Errors of shapes, presets and recipes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShapeError {
    /// No preset of that name.
    #[error("unknown preset {name:?}: use one of {known}")]
    UnknownPreset {
        /// What was asked for.
        name: String,
        /// The preset names.
        known: String,
    },
    /// No architecture of that name.
    #[error("unknown architecture {0:?}: use llama, qwen2, qwen3, qwen3moe or gemma3")]
    UnknownArch(String),
    /// No recipe of that name.
    #[error(
        "unknown precision {0:?}: use F32, F16, BF16, Q8_0, Q6_K, Q5_K_M, Q5_K_S, Q4_K_M, Q4_K_S, Q4_1, Q4_0, mlx-8bit or mlx-4bit"
    )]
    UnknownRecipe(String),
    /// A hyperparameter is missing or inconsistent.
    #[error("shape field {field}: {problem}")]
    Invalid {
        /// The flag / field (`--heads`, …).
        field: &'static str,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// The header could not be turned into facts.
    #[error(transparent)]
    Gguf(#[from] GgufError),
}

/// Architectures whose tensor lists memwall can build (llama.cpp's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// Llama 2/3 (`llama`): no biases, untied head.
    Llama,
    /// Qwen2/2.5 (`qwen2`): q/k/v biases.
    Qwen2,
    /// Qwen3 dense (`qwen3`): per-head q/k RMS norms, no biases.
    Qwen3,
    /// Qwen3 MoE (`qwen3moe`): Qwen3 attention, routed experts only.
    Qwen3Moe,
    /// Gemma 3 (`gemma3`): q/k norms, post-norms, 5 local : 1 global layers.
    Gemma3,
}

impl Arch {
    /// llama.cpp's `general.architecture` value.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Qwen3Moe => "qwen3moe",
            Arch::Gemma3 => "gemma3",
        }
    }
    /// Parses llama.cpp's name.
    ///
    /// # Errors
    /// [`ShapeError::UnknownArch`].
    pub fn parse(s: &str) -> Result<Arch, ShapeError> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "qwen3moe" | "qwen3_moe" => Arch::Qwen3Moe,
            "gemma3" => Arch::Gemma3,
            _ => return Err(ShapeError::UnknownArch(s.to_string())),
        })
    }
}

/// The hyperparameters that fix every tensor's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelShape {
    /// Architecture.
    pub arch: Arch,
    /// Transformer blocks (`num_hidden_layers`).
    pub n_layer: u32,
    /// Hidden size (`hidden_size`).
    pub n_embd: u32,
    /// Query heads (`num_attention_heads`).
    pub n_head: u32,
    /// KV heads (`num_key_value_heads`).
    pub n_head_kv: u32,
    /// Head dimension (`head_dim`); `None` = `n_embd ÷ n_head`.
    pub head_dim: Option<u32>,
    /// Dense FFN width (`intermediate_size`); unused by MoE-only layers.
    pub n_ff: u32,
    /// Vocabulary rows of the embedding (`vocab_size`).
    pub n_vocab: u64,
    /// `tie_word_embeddings`: no `output.weight`, the head reuses the embedding.
    pub tied_embeddings: bool,
    /// Routed experts per MoE layer (0 = dense).
    pub n_expert: u32,
    /// Experts each token is routed to.
    pub n_expert_used: u32,
    /// Width of one expert's FFN (`moe_intermediate_size`).
    pub n_ff_exp: u32,
    /// Sliding window of the local layers (Gemma 3), if any.
    pub sliding_window: Option<u32>,
    /// Trained context length.
    pub n_ctx_train: u64,
    /// Tensors in lexicographic name order (`blk.0`, `blk.1`, `blk.10`, …), as in
    /// Qwen's own GGUF conversions, instead of `convert_hf_to_gguf.py`'s layer order.
    /// llama.cpp's quantizer counts attn_v / ffn_down in file order, so the order
    /// decides which layers of a `_M` mix get more bits.
    #[serde(default)]
    pub lexicographic_order: bool,
}

/// A named public shape and where its numbers come from.
#[derive(Debug, Clone, Serialize)]
pub struct Preset {
    /// Name used on the command line (`qwen2.5-7b`).
    pub name: &'static str,
    /// Model it describes.
    pub title: &'static str,
    pub shape: ModelShape,
    /// The `config.json` the numbers were copied from.
    pub source: &'static str,
}

#[allow(clippy::too_many_arguments)]
fn dense(
    arch: Arch,
    n_layer: u32,
    n_embd: u32,
    n_head: u32,
    n_head_kv: u32,
    n_ff: u32,
    n_vocab: u64,
    tied: bool,
    n_ctx_train: u64,
) -> ModelShape {
    ModelShape {
        arch,
        n_layer,
        n_embd,
        n_head,
        n_head_kv,
        head_dim: None,
        n_ff,
        n_vocab,
        tied_embeddings: tied,
        n_expert: 0,
        n_expert_used: 0,
        n_ff_exp: 0,
        sliding_window: None,
        n_ctx_train,
        lexicographic_order: false,
    }
}

/// The built-in presets. Numbers are copied from each model's `config.json` on
/// Hugging Face (the `source` URL): `num_hidden_layers`, `hidden_size`,
/// `num_attention_heads`, `num_key_value_heads`, `head_dim`, `intermediate_size`,
/// `moe_intermediate_size`, `num_experts`, `num_experts_per_tok`, `vocab_size`,
/// `tie_word_embeddings`, `sliding_window`.
pub fn presets() -> Vec<Preset> {
    use Arch::*;
    let q = |name, title, n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab, tied, source| Preset {
        name,
        title,
        shape: dense(
            Qwen2, n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab, tied, 32768,
        ),
        source,
    };
    vec![
        q(
            "qwen2.5-0.5b",
            "Qwen2.5-0.5B",
            24,
            896,
            14,
            2,
            4864,
            151_936,
            true,
            "https://huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json",
        ),
        q(
            "qwen2.5-1.5b",
            "Qwen2.5-1.5B",
            28,
            1536,
            12,
            2,
            8960,
            151_936,
            true,
            "https://huggingface.co/Qwen/Qwen2.5-1.5B/blob/main/config.json",
        ),
        q(
            "qwen2.5-7b",
            "Qwen2.5-7B",
            28,
            3584,
            28,
            4,
            18944,
            152_064,
            false,
            "https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json",
        ),
        q(
            "qwen2.5-14b",
            "Qwen2.5-14B",
            48,
            5120,
            40,
            8,
            13824,
            152_064,
            false,
            "https://huggingface.co/Qwen/Qwen2.5-14B/blob/main/config.json",
        ),
        q(
            "qwen2.5-32b",
            "Qwen2.5-32B",
            64,
            5120,
            40,
            8,
            27648,
            152_064,
            false,
            "https://huggingface.co/Qwen/Qwen2.5-32B/blob/main/config.json",
        ),
        q(
            "qwen2.5-72b",
            "Qwen2.5-72B",
            80,
            8192,
            64,
            8,
            29568,
            152_064,
            false,
            "https://huggingface.co/Qwen/Qwen2.5-72B/blob/main/config.json",
        ),
        Preset {
            name: "gemma-3-270m",
            title: "Gemma-3-270M",
            shape: ModelShape {
                head_dim: Some(256),
                sliding_window: Some(512),
                ..dense(Gemma3, 18, 640, 4, 1, 2048, 262_144, true, 32_768)
            },
            source: "https://huggingface.co/google/gemma-3-270m/blob/main/config.json",
        },
        Preset {
            name: "smollm2-135m",
            title: "SmolLM2-135M",
            shape: dense(Llama, 30, 576, 9, 3, 1536, 49_152, true, 8192),
            source: "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/blob/main/config.json",
        },
        Preset {
            name: "llama-3.1-8b",
            title: "Llama-3.1-8B",
            shape: dense(Llama, 32, 4096, 32, 8, 14336, 128_256, false, 131_072),
            source: "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json",
        },
        Preset {
            name: "llama-3.1-70b",
            title: "Llama-3.1-70B",
            shape: dense(Llama, 80, 8192, 64, 8, 28672, 128_256, false, 131_072),
            source: "https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json",
        },
        Preset {
            name: "qwen3-8b",
            title: "Qwen3-8B",
            shape: ModelShape {
                head_dim: Some(128),
                ..dense(Qwen3, 36, 4096, 32, 8, 12288, 151_936, false, 40_960)
            },
            source: "https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json",
        },
        Preset {
            name: "gemma-3-27b",
            title: "Gemma-3-27B (text)",
            shape: ModelShape {
                head_dim: Some(128),
                sliding_window: Some(1024),
                ..dense(Gemma3, 62, 5376, 32, 16, 21504, 262_208, true, 131_072)
            },
            source: "https://huggingface.co/google/gemma-3-27b-it/blob/main/config.json (text_config)",
        },
        Preset {
            name: "qwen3-30b-a3b",
            title: "Qwen3-30B-A3B (MoE, 8 of 128 experts)",
            shape: ModelShape {
                head_dim: Some(128),
                n_expert: 128,
                n_expert_used: 8,
                n_ff_exp: 768,
                ..dense(Qwen3Moe, 48, 2048, 32, 4, 6144, 151_936, false, 40_960)
            },
            source: "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json",
        },
    ]
}

/// Looks a preset up by name (case-insensitive; `_` and `.` optional).
///
/// # Errors
/// [`ShapeError::UnknownPreset`] listing the names.
pub fn preset(name: &str) -> Result<Preset, ShapeError> {
    let norm = |s: &str| {
        s.to_ascii_lowercase()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
    };
    let all = presets();
    let want = norm(name);
    let known = all.iter().map(|p| p.name).collect::<Vec<_>>().join(", ");
    all.into_iter()
        .find(|p| norm(p.name) == want)
        .ok_or(ShapeError::UnknownPreset {
            name: name.to_string(),
            known,
        })
}

/// How the k-quant mixes raise some tensors (llama.cpp's `_M`/`_S` variants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mix {
    /// Every quantizable weight gets the base type (output/tied head rules still apply).
    Plain,
    /// `Q4_K_M` / `Q5_K_M`: attn_v and ffn_down of "more bits" layers → Q6_K.
    Medium,
    /// `Q4_K_S` / `Q5_K_S`: first attn_v / first eighth of ffn_down one step up.
    Small,
}

/// A precision recipe: the base type, the mix rules, and what it is called.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recipe {
    /// Name as typed (`Q4_K_M`, `mlx-4bit`).
    pub name: String,
    /// ggml type of ordinary weight matrices.
    pub base: GgmlType,
    /// Mix rules.
    pub mix: Mix,
    /// `general.file_type` (llama_ftype), when a GGUF recipe.
    pub ftype: Option<u32>,
    /// MLX affine quantization (group 64, f16 scale + f16 bias): not a GGUF; bytes
    /// are counted with a ggml type of the same bits per weight.
    pub mlx: bool,
}

const F32: GgmlType = GgmlType(0);
const F16: GgmlType = GgmlType(1);
const Q4_0: GgmlType = GgmlType(2);
const Q5_0: GgmlType = GgmlType(6);
const Q5_1: GgmlType = GgmlType(7);
const Q8_0: GgmlType = GgmlType(8);
const Q4_K: GgmlType = GgmlType(12);
const Q5_K: GgmlType = GgmlType(13);
const Q6_K: GgmlType = GgmlType(14);
const BF16: GgmlType = GgmlType(30);

impl Recipe {
    /// Parses a precision name: `F32 F16 BF16 Q8_0 Q6_K Q5_K_M Q5_K_S Q4_K_M Q4_K_S
    /// Q4_0`, or `mlx-4bit` / `mlx-8bit` (MLX affine, group 64).
    ///
    /// # Errors
    /// [`ShapeError::UnknownRecipe`].
    pub fn parse(s: &str) -> Result<Recipe, ShapeError> {
        let up = s.trim().to_ascii_uppercase().replace('-', "_");
        let (base, mix, ftype, mlx) = match up.as_str() {
            "F32" => (F32, Mix::Plain, Some(0), false),
            "F16" => (F16, Mix::Plain, Some(1), false),
            "BF16" => (BF16, Mix::Plain, Some(32), false),
            "Q8_0" => (Q8_0, Mix::Plain, Some(7), false),
            "Q6_K" => (Q6_K, Mix::Plain, Some(18), false),
            "Q5_K_M" => (Q5_K, Mix::Medium, Some(17), false),
            "Q5_K_S" => (Q5_K, Mix::Small, Some(16), false),
            "Q4_K_M" => (Q4_K, Mix::Medium, Some(15), false),
            "Q4_K_S" => (Q4_K, Mix::Small, Some(14), false),
            "Q4_0" => (Q4_0, Mix::Plain, Some(2), false),
            "Q4_1" => (GgmlType(3), Mix::Plain, Some(3), false),
            // MLX affine g64: 4-bit = 4 + (16 + 16)/64 = 4.5 bpw = Q4_0's 18 B / 32;
            // 8-bit = 8.5 bpw = Q8_0's 34 B / 32.
            "MLX_4BIT" | "MLX4" | "MLX_4" => (Q4_0, Mix::Plain, None, true),
            "MLX_8BIT" | "MLX8" | "MLX_8" => (Q8_0, Mix::Plain, None, true),
            _ => return Err(ShapeError::UnknownRecipe(s.to_string())),
        };
        Ok(Recipe {
            name: if mlx {
                up.to_ascii_lowercase().replace('_', "-")
            } else {
                up
            },
            base,
            mix,
            ftype,
            mlx,
        })
    }

    /// Bits per weight of the base format including its scales (Q4_K 4.5, Q6_K
    /// 6.5625, Q8_0 8.5, MLX 4-bit g64 4.5, …). A mixed recipe's file averages higher.
    pub fn base_bits_per_weight(&self) -> f64 {
        self.base.bits_per_weight().unwrap_or(f64::NAN)
    }

    fn is_quantized(&self) -> bool {
        self.base.traits().is_some_and(|t| t.is_block_quantized())
    }
}

/// `use_more_bits` of llama-quant.cpp: the first and last eighth of the layers and
/// every third layer in between get more bits.
pub fn use_more_bits(i_layer: i64, n_layers: i64) -> bool {
    i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2
}

/// One tensor of a shape, before a type is chosen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShapeTensor {
    /// llama.cpp name.
    pub name: String,
    /// Dims, `ne[0]` first.
    pub dims: Vec<u64>,
}

impl ModelShape {
    /// Head dimension.
    pub fn head_dim(&self) -> u32 {
        self.head_dim.unwrap_or(self.n_embd / self.n_head.max(1))
    }

    /// Checks the hyperparameters.
    ///
    /// # Errors
    /// [`ShapeError::Invalid`] naming the flag.
    pub fn validate(&self) -> Result<(), ShapeError> {
        let bad = |field, problem: &str| {
            Err(ShapeError::Invalid {
                field,
                problem: problem.to_string(),
            })
        };
        if self.n_layer == 0 {
            return bad("--layers", "must be ≥ 1");
        }
        if self.n_embd == 0 || self.n_head == 0 || self.n_head_kv == 0 {
            return bad("--hidden/--heads/--kv-heads", "must all be ≥ 1");
        }
        if !self.n_head.is_multiple_of(self.n_head_kv) {
            return bad(
                "--kv-heads",
                &format!(
                    "{} query heads are not a multiple of {} KV heads",
                    self.n_head, self.n_head_kv
                ),
            );
        }
        if self.head_dim.is_none() && !self.n_embd.is_multiple_of(self.n_head) {
            return bad(
                "--head-dim",
                "hidden size is not a multiple of the head count: give --head-dim",
            );
        }
        if self.n_vocab == 0 {
            return bad("--vocab", "must be ≥ 1");
        }
        if self.arch == Arch::Qwen3Moe {
            if self.n_expert == 0 || self.n_expert_used == 0 || self.n_ff_exp == 0 {
                return bad(
                    "--experts/--experts-used/--ffn-expert",
                    "an MoE shape needs all three",
                );
            }
            if self.n_expert_used > self.n_expert {
                return bad("--experts-used", "more than --experts");
            }
        } else if self.n_ff == 0 {
            return bad("--ffn", "must be ≥ 1");
        }
        if self.arch == Arch::Gemma3 && self.sliding_window.is_none() {
            return bad(
                "--sliding-window",
                "gemma3 needs its local window (1024 for Gemma 3)",
            );
        }
        Ok(())
    }

    /// The tensor list in the order `convert_hf_to_gguf.py` writes it (token
    /// embedding, blocks 0…n-1, output norm, output head), which is also the order
    /// llama.cpp's quantizer counts layers in.
    pub fn tensors(&self) -> Vec<ShapeTensor> {
        let (e, v) = (self.n_embd as u64, self.n_vocab);
        let hd = self.head_dim() as u64;
        let (q, kv) = (self.n_head as u64 * hd, self.n_head_kv as u64 * hd);
        let mut out = Vec::new();
        let mut t = |name: String, dims: &[u64]| {
            out.push(ShapeTensor {
                name,
                dims: dims.to_vec(),
            })
        };
        t("token_embd.weight".into(), &[e, v]);
        for i in 0..self.n_layer {
            let b = |s: &str| format!("blk.{i}.{s}");
            t(b("attn_norm.weight"), &[e]);
            t(b("attn_q.weight"), &[e, q]);
            if self.arch == Arch::Qwen2 {
                t(b("attn_q.bias"), &[q]);
            }
            t(b("attn_k.weight"), &[e, kv]);
            if self.arch == Arch::Qwen2 {
                t(b("attn_k.bias"), &[kv]);
            }
            t(b("attn_v.weight"), &[e, kv]);
            if self.arch == Arch::Qwen2 {
                t(b("attn_v.bias"), &[kv]);
            }
            if matches!(self.arch, Arch::Qwen3 | Arch::Qwen3Moe | Arch::Gemma3) {
                t(b("attn_q_norm.weight"), &[hd]);
                t(b("attn_k_norm.weight"), &[hd]);
            }
            t(b("attn_output.weight"), &[q, e]);
            if self.arch == Arch::Gemma3 {
                t(b("post_attention_norm.weight"), &[e]);
            }
            t(b("ffn_norm.weight"), &[e]);
            if self.arch == Arch::Qwen3Moe {
                let (x, f) = (self.n_expert as u64, self.n_ff_exp as u64);
                t(b("ffn_gate_inp.weight"), &[e, x]);
                t(b("ffn_gate_exps.weight"), &[e, f, x]);
                t(b("ffn_up_exps.weight"), &[e, f, x]);
                t(b("ffn_down_exps.weight"), &[f, e, x]);
            } else {
                let f = self.n_ff as u64;
                t(b("ffn_gate.weight"), &[e, f]);
                t(b("ffn_up.weight"), &[e, f]);
                t(b("ffn_down.weight"), &[f, e]);
            }
            if self.arch == Arch::Gemma3 {
                t(b("post_ffw_norm.weight"), &[e]);
            }
        }
        t("output_norm.weight".into(), &[e]);
        if !self.tied_embeddings {
            t("output.weight".into(), &[e, v]);
        }
        if self.lexicographic_order {
            out.sort_by(|a, b| a.name.cmp(&b.name));
        }
        out
    }

    /// llama.cpp's `LLM_TYPE_70B` (80-layer llama with GQA, 80-layer qwen2): the
    /// quantizer gives its attn_v one more step of bits.
    fn is_type_70b(&self) -> bool {
        self.n_layer == 80
            && match self.arch {
                Arch::Llama => self.n_head != self.n_head_kv,
                Arch::Qwen2 => true,
                _ => false,
            }
    }

    /// The ggml type of every tensor under `recipe`, in [`ModelShape::tensors`] order,
    /// following llama-quant.cpp for the GGUF recipes (see the module docs).
    pub fn types(&self, recipe: &Recipe) -> Vec<GgmlType> {
        let tensors = self.tensors();
        let n_layer = self.n_layer as i64;
        let n_attn_v = tensors
            .iter()
            .filter(|t| t.name.contains("attn_v.weight"))
            .count() as i64;
        let (mut i_attn_v, mut i_ffn_down) = (0i64, 0i64);
        let float_source = if recipe.base == BF16 { BF16 } else { F16 };
        tensors
            .iter()
            .map(|t| {
                let n = t.name.as_str();
                let is_norm = n.contains("_norm.weight");
                let quantizable = t.dims.len() >= 2
                    && n.ends_with("weight")
                    && !is_norm
                    && !n.contains("ffn_gate_inp.weight");
                if !quantizable {
                    // Norms, biases, the MoE router: converters write them as F32
                    // (MLX keeps them at 16 bits).
                    return if recipe.mlx { F16 } else { F32 };
                }
                if !recipe.is_quantized() {
                    return if recipe.base == F32 {
                        F32
                    } else {
                        float_source
                    };
                }
                if recipe.mlx {
                    return recipe.base;
                }
                let mut ty = recipe.base;
                let is_output = n == "output.weight";
                let is_embd = n == "token_embd.weight";
                if is_output || (self.tied_embeddings && is_embd) {
                    let blck = ty.traits().map_or(1, |x| x.block_size);
                    if t.dims[0] % blck != 0 {
                        ty = Q8_0;
                    } else if ty != Q8_0 {
                        ty = Q6_K;
                    }
                } else if is_embd {
                    // untied embedding: base type (fallback below)
                } else if n.contains("attn_v.weight") {
                    match recipe.mix {
                        Mix::Medium if use_more_bits(i_attn_v, n_attn_v) => ty = Q6_K,
                        Mix::Small if recipe.base == Q4_K && i_attn_v < 4 => ty = Q5_K,
                        _ => {}
                    }
                    if self.is_type_70b() && (ty == Q4_K || ty == GgmlType(11)) {
                        ty = Q5_K;
                    }
                    if self.n_expert == 8 {
                        ty = Q8_0;
                    }
                    i_attn_v += 1;
                } else if n.contains("attn_k.weight") {
                    if self.n_expert == 8 {
                        ty = Q8_0;
                    }
                } else if n.contains("ffn_down") {
                    let i_layer = if self.n_expert > 1 {
                        layer_of(n).unwrap_or(i_ffn_down)
                    } else {
                        i_ffn_down
                    };
                    match recipe.mix {
                        Mix::Medium if use_more_bits(i_layer, n_layer) => ty = Q6_K,
                        Mix::Small if recipe.base == Q4_K && i_layer < n_layer / 8 => ty = Q5_K,
                        _ => {}
                    }
                    i_ffn_down += 1;
                } else if n.contains("attn_output.weight")
                    && self.n_expert == 8
                    && recipe.base == Q4_K
                {
                    ty = Q5_K;
                }
                fallback(ty, t.dims[0])
            })
            .collect()
    }

    /// The in-memory GGUF header of this shape under `recipe`: llama.cpp's metadata
    /// keys and every tensor with its type and (32-aligned) offset. `file_bytes` is
    /// the tensor data only (a real file adds a tokenizer of a few MB).
    pub fn header(&self, recipe: &Recipe, name: &str) -> Result<Gguf, ShapeError> {
        self.validate()?;
        let mut md: BTreeMap<String, Value> = BTreeMap::new();
        for (k, v) in self.metadata(recipe, name) {
            md.insert(k, v);
        }
        let mut tensors = Vec::new();
        let mut off = 0u64;
        for (t, ty) in self.tensors().into_iter().zip(self.types(recipe)) {
            let info = TensorInfo {
                name: t.name,
                dims: t.dims,
                ggml_type: ty,
                offset: off,
            };
            off += info.n_bytes().0.div_ceil(32) * 32;
            tensors.push(info);
        }
        Ok(Gguf {
            path: PathBuf::from(format!("<shape {name} {}>", recipe.name)),
            file_bytes: Bytes(off),
            version: 3,
            metadata: md,
            tensors,
            data_offset: 0,
            alignment: 32,
        })
    }

    /// llama.cpp metadata for this shape (what the synthesizer writes, less the
    /// tokenizer). Values use the reader's [`Value`] so the header and the file agree.
    pub fn metadata(&self, recipe: &Recipe, name: &str) -> Vec<(String, Value)> {
        let a = self.arch.name();
        let k = |s: &str| format!("{a}.{s}");
        let u = |x: u64| Value::U64(x);
        let mut v = vec![
            ("general.architecture".to_string(), Value::Str(a.into())),
            ("general.name".to_string(), Value::Str(name.into())),
            (k("block_count"), u(self.n_layer as u64)),
            (k("context_length"), u(self.n_ctx_train)),
            (k("embedding_length"), u(self.n_embd as u64)),
            (k("feed_forward_length"), u(self.n_ff as u64)),
            (k("attention.head_count"), u(self.n_head as u64)),
            (k("attention.head_count_kv"), u(self.n_head_kv as u64)),
            (k("attention.layer_norm_rms_epsilon"), Value::F64(1e-6)),
            (k("rope.freq_base"), Value::F64(1_000_000.0)),
        ];
        if let Some(ft) = recipe.ftype {
            v.push(("general.file_type".into(), u(ft as u64)));
        }
        if self.head_dim.is_some() {
            v.push((k("attention.key_length"), u(self.head_dim() as u64)));
            v.push((k("attention.value_length"), u(self.head_dim() as u64)));
        }
        if self.n_expert > 0 {
            v.push((k("expert_count"), u(self.n_expert as u64)));
            v.push((k("expert_used_count"), u(self.n_expert_used as u64)));
            v.push((k("expert_feed_forward_length"), u(self.n_ff_exp as u64)));
        }
        if let Some(w) = self.sliding_window {
            v.push((k("attention.sliding_window"), u(w as u64)));
        }
        v
    }

    /// Model facts of this shape under `recipe`, through [`ModelFacts::from_gguf`].
    ///
    /// # Errors
    /// [`ShapeError::Invalid`] for inconsistent hyperparameters.
    pub fn facts(&self, recipe: &Recipe, name: &str) -> Result<ModelFacts, ShapeError> {
        let g = self.header(recipe, name)?;
        let mut f = ModelFacts::from_gguf(&g)?;
        if recipe.mlx {
            f.quant = recipe.name.clone();
        }
        Ok(f)
    }
}

fn layer_of(name: &str) -> Option<i64> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

/// `tensor_type_fallback` of llama-quant.cpp: a row length not divisible by the
/// block size demotes to a 32-block type, else F16.
fn fallback(ty: GgmlType, ncols: u64) -> GgmlType {
    let blck = ty.traits().map_or(1, |x| x.block_size);
    if ncols.is_multiple_of(blck) {
        return ty;
    }
    let alt = match ty {
        GgmlType(10) | GgmlType(11) => Q4_0, // Q2_K, Q3_K
        GgmlType(12) => Q5_0,                // Q4_K
        GgmlType(13) => Q5_1,                // Q5_K
        GgmlType(14) => Q8_0,                // Q6_K
        other => other,
    };
    let b2 = alt.traits().map_or(1, |x| x.block_size);
    if !ncols.is_multiple_of(b2) { F16 } else { alt }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::model::{CacheType, TensorClass};

    /// Relative tolerance for sizes compared with published file sizes (converter
    /// and tokenizer differences are well under 1 %).
    const FILE_REL: f64 = 0.01;

    #[test]
    fn more_bits_layers_match_llama_cpp() {
        // n = 24: first 3, last 3 (≥ 21) and (i - 3) % 3 == 2 → 5, 8, 11, 14, 17, 20.
        let got: Vec<i64> = (0..24).filter(|&i| use_more_bits(i, 24)).collect();
        assert_eq!(got, vec![0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23]);
    }

    #[test]
    fn qwen3_8b_kv_is_147456_bytes_per_token() {
        let p = preset("Qwen3-8B").unwrap();
        let f = p
            .shape
            .facts(&Recipe::parse("Q4_K_M").unwrap(), "x")
            .unwrap();
        // 2 (K and V) × 36 layers × 8 KV heads × 128 × 2 bytes (f16), by hand.
        assert_eq!(
            f.kv_bytes_per_token(CacheType::F16),
            Bytes(2 * 36 * 8 * 128 * 2)
        );
        assert_eq!(f.kv_bytes_per_token(CacheType::F16), Bytes(147_456));
    }

    #[test]
    fn qwen3_8b_q4_k_m_matches_the_published_file() {
        // Qwen/Qwen3-8B-GGUF Qwen3-8B-Q4_K_M.gguf: 5.03 GB (Hugging Face file list).
        let p = preset("qwen3-8b").unwrap();
        let f = p
            .shape
            .facts(&Recipe::parse("Q4_K_M").unwrap(), "x")
            .unwrap();
        let gb = f.tensor_bytes.gb();
        assert!((gb - 5.03).abs() / 5.03 < FILE_REL, "{gb}");
        // 8.19 B parameters (model card).
        let b = f.n_params as f64 / 1e9;
        assert!((b - 8.19).abs() < 0.01, "{b}");
    }

    #[test]
    fn moe_streams_only_routed_experts() {
        let p = preset("qwen3-30b-a3b").unwrap();
        let f = p.shape.facts(&Recipe::parse("Q8_0").unwrap(), "x").unwrap();
        // Model card: 30.5 B total, 3.3 B activated.
        let total = f.n_params as f64 / 1e9;
        assert!((total - 30.5).abs() < 0.1, "{total}");
        // Active ≈ total − (1 − 8/128) × expert params.
        let e = 3.0 * 2048.0 * 768.0 * 128.0 * 48.0;
        let active = (f.n_params as f64 - e * (1.0 - 8.0 / 128.0)) / 1e9;
        assert!((active - 3.3).abs() < 0.1, "{active}");
        assert!(f.streamed_bytes.0 < f.tensor_bytes.0 / 5);
    }

    #[test]
    fn tied_head_is_read_whole_and_fallbacks_apply() {
        let p = preset("qwen2.5-0.5b").unwrap();
        let r = Recipe::parse("Q4_K_M").unwrap();
        let g = p.shape.header(&r, "x").unwrap();
        let ty = |n: &str| g.tensor(n).unwrap().ggml_type.name();
        // 896 % 256 ≠ 0: the tied head falls to Q8_0, Q4_K rows of 896 to Q5_0,
        // Q6_K ffn_down rows of 4864 (= 19 × 256) stay Q6_K.
        assert_eq!(ty("token_embd.weight"), "Q8_0");
        assert_eq!(ty("blk.0.attn_q.weight"), "Q5_0");
        assert_eq!(ty("blk.0.ffn_down.weight"), "Q6_K");
        assert_eq!(ty("blk.3.ffn_down.weight"), "Q4_K");
        assert_eq!(ty("blk.0.attn_q.bias"), "F32");
        let f = p.shape.facts(&r, "x").unwrap();
        assert!(f.tied_embeddings);
        assert_eq!(
            f.class_bytes(TensorClass::TokenEmbedding),
            Bytes(896 * 151_936 / 32 * 34)
        );
    }

    /// Compares a preset under a recipe with a real GGUF tensor by tensor; returns
    /// the differences as readable lines.
    fn diff_with_file(shape: &ModelShape, recipe: &str, file: &std::path::Path) -> Vec<String> {
        let real = Gguf::open(file).unwrap();
        let ours = shape.header(&Recipe::parse(recipe).unwrap(), "x").unwrap();
        let mut out = Vec::new();
        for t in &real.tensors {
            match ours.tensor(&t.name) {
                None => out.push(format!("{} only in the file", t.name)),
                Some(o) if o.dims != t.dims || o.ggml_type != t.ggml_type => out.push(format!(
                    "{}: file {:?} {} vs recipe {:?} {}",
                    t.name, t.dims, t.ggml_type, o.dims, o.ggml_type
                )),
                _ => {}
            }
        }
        for o in &ours.tensors {
            if real.tensor(&o.name).is_none() {
                out.push(format!("{} only in the recipe", o.name));
            }
        }
        out
    }

    #[test]
    fn recipes_match_real_files_tensor_by_tensor() {
        // The catalogue's Qwen2.5-Coder GGUFs (Qwen's own conversions) differ from
        // convert_hf_to_gguf.py's layout in two known ways: a separate output.weight
        // although the model ties it (tie_word_embeddings = true), and tensors stored in
        // lexicographic order (which moves the Q4_K_M "more bits" layers).
        for (name, p) in [
            ("qwen2.5-coder-0.5b-q4_k_m", "qwen2.5-0.5b"),
            ("qwen2.5-coder-1.5b-q4_k_m", "qwen2.5-1.5b"),
            ("gemma-3-270m-q4_k_m", "gemma-3-270m"),
            ("smollm2-135m-q4_1", "smollm2-135m"),
        ] {
            let Some(file) = crate::testing::model(name) else {
                continue;
            };
            let mut shape = preset(p).unwrap().shape;
            if p.starts_with("qwen") {
                // Qwen's GGUFs: separate output.weight, tensors in lexicographic order.
                shape.tied_embeddings = false;
                shape.lexicographic_order = true;
            }
            let q = if p.starts_with("smollm") {
                "Q4_1"
            } else {
                "Q4_K_M"
            };
            let d = diff_with_file(&shape, q, &file);
            assert!(d.is_empty(), "{name} vs {p} {q}:\n{}", d.join("\n"));
            // With the tie as in config.json, streamed bytes differ by exactly one row of
            // the token embedding (the gather the separate head adds).
            let tied = preset(p).unwrap().shape;
            let f_real = ModelFacts::open(&file).unwrap();
            let f_tied = tied.facts(&Recipe::parse(q).unwrap(), "x").unwrap();
            assert_eq!(
                f_real.streamed_bytes.0 - f_tied.streamed_bytes.0,
                f_real.token_embd_row_bytes.0 * p.starts_with("qwen") as u64,
                "{name}"
            );
        }
    }

    #[test]
    fn bad_shapes_name_the_flag() {
        let mut s = preset("qwen2.5-7b").unwrap().shape;
        s.n_head_kv = 5;
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("--kv-heads"), "{e}");
        assert!(
            preset("gpt-9")
                .unwrap_err()
                .to_string()
                .contains("qwen2.5-7b")
        );
        assert!(
            Recipe::parse("Q3_X")
                .unwrap_err()
                .to_string()
                .contains("Q4_K_M")
        );
    }
}
