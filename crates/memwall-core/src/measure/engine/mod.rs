//! Inference engines behind one seam: which engine runs a model
//! ([`EngineKind`]), opening a model on it ([`open`], [`Model`]: the only place
//! that refuses an engine this build lacks), and two traits.
//!
//! - [`Engine`], the compute: a forward pass over a batch of `(token, position,
//!   sequence, want_logits)` items ([`Engine::decode`]), the logits of the items that
//!   asked for them ([`Engine::logits`]), KV-cache operations per sequence
//!   ([`Engine::kv_truncate`] for rollback, copies, snapshots), and sizes. Prefill in
//!   chunks and single-token decode are provided methods built on those.
//! - [`Vocab`], the vocabulary: tokenize, token bytes, end of generation, BOS, the
//!   chat template, the whole table; [`Utf8Stream`] joins token bytes into text.
//!   Every engine is a vocabulary (its model's tokenizer).
//!
//! Implementations: `llama` (llama.cpp through `llama-cpp-2`, feature `llama`) and
//! `mlx` (models written with mlx-rs ops, feature `mlx`). A third engine is one
//! file (its `Engine` and `Vocab` impls), one [`EngineKind`] arm and one arm in
//! [`Model::load`].

#[cfg(feature = "llama")]
pub mod llama;
#[cfg(feature = "mlx")]
pub mod mlx;
mod open;
mod vocab;

pub use open::{ALL_LAYERS, EngineKind, Model, open};
pub use vocab::{ChatMessage, TokenEntry, Utf8Stream, Vocab};

/// The build string of the engine compiled into this binary (see
/// [`llama::engine_build`]); `none` without the `llama` feature.
pub fn engine_build() -> String {
    #[cfg(feature = "llama")]
    {
        llama::engine_build()
    }
    #[cfg(not(feature = "llama"))]
    {
        "none".into()
    }
}

use serde::{Deserialize, Serialize};

/// A token id in the model's vocabulary.
pub type TokenId = i32;

/// One item of a forward batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchItem {
    pub token: TokenId,
    /// Position in its sequence (0-based).
    pub pos: u32,
    /// Sequence id (0 for single-sequence use).
    pub seq: i32,
    /// Whether to keep this item's logits.
    pub logits: bool,
}

/// One item of a forward batch whose token belongs to several sequences
/// ([`Engine::decode_seqs`]): a node of a draft tree, shared by the root-to-leaf paths
/// (one sequence each) that pass through it. It attends to the positions its
/// sequences hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqItem<'a> {
    pub token: TokenId,
    /// Position in each of its sequences (0-based).
    pub pos: u32,
    /// The sequences it belongs to (at least one). Sequences that share a token in a
    /// batch must hold the same positions before it (llama.cpp's rule for coupled
    /// sequences).
    pub seqs: &'a [i32],
    /// Whether to keep this item's logits.
    pub logits: bool,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The model could not be loaded.
    #[error("cannot load model {path}: {reason}")]
    Load {
        /// Path of the file the error is about.
        path: String,
        /// What is wrong with the file.
        reason: String,
    },
    /// A context or batch could not be created.
    #[error("engine setup failed: {0}")]
    Setup(String),
    /// A forward pass failed (e.g. the KV cache is full).
    #[error("forward pass failed: {0}")]
    Decode(String),
    /// Asked for logits that the last pass did not keep.
    #[error("no logits for output {index} (the last pass kept {kept})")]
    NoLogits {
        /// The index asked for.
        index: usize,
        /// How many items kept logits.
        kept: usize,
    },
    /// KV-cache manipulation failed (e.g. partial removal on a recurrent model).
    #[error("KV cache: {0}")]
    Kv(String),
    /// Tokenization or template application failed.
    #[error("tokenizer: {0}")]
    Tokenize(String),
    /// The engine does not support this operation.
    #[error("not supported by this engine: {0}")]
    Unsupported(&'static str),
    /// This build does not include the engine (`--engine mlx-4bit` without the
    /// `mlx` feature): refused by [`Model::load`] before anything is read.
    #[error("{}", .0.not_built())]
    NotBuilt(EngineKind),
    /// An engine name that is none of [`EngineKind::ALL`].
    #[error("--engine {0:?}: use llama, mlx (= mlx-4bit), mlx-8bit or mlx-f16")]
    UnknownKind(String),
    /// The model file failed memwall's GGUF checks, so the engine never saw it
    /// (truncated, malformed, duplicate keys or tensors, …).
    #[error(transparent)]
    Model(#[from] crate::probe::gguf::GgufError),
}

/// Configuration of one engine context (llama-bench's per-instance parameters).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineConfig {
    /// Context length (tokens of KV cache per sequence group).
    pub n_ctx: u32,
    /// Logical batch size (max tokens per `decode` call).
    pub n_batch: u32,
    /// Physical micro-batch size.
    pub n_ubatch: u32,
    /// Threads for single-token decode.
    pub n_threads: u32,
    /// Threads for batched prefill.
    pub n_threads_batch: u32,
    /// Layers offloaded to the accelerator (`-ngl`; 0 = CPU only, [`ALL_LAYERS`] = all).
    pub n_gpu_layers: u32,
    /// Maximum parallel sequences.
    pub n_seq_max: u32,
    /// K cache element type.
    pub type_k: crate::probe::model::CacheType,
    /// V cache element type.
    pub type_v: crate::probe::model::CacheType,
    /// Flash attention: `None` = engine's automatic choice.
    pub flash_attn: Option<bool>,
    /// Whether llama.cpp may repack the weights into its interleaved CPU layouts
    /// (its default). `false` for speculative targets, whose logits must not depend
    /// on how many rows share a pass ([`llama::LlamaModelHandle::load_no_repack`]).
    /// Read when the model is loaded ([`Model::load`]); MLX ignores it.
    #[serde(default = "repack_default")]
    pub repack: bool,
    /// Several GPUs: llama.cpp's split mode and tensor split (`--split-mode`,
    /// `--tensor-split`). Read when the model is loaded ([`Model::load`]); MLX ignores it.
    #[serde(default)]
    pub split: crate::roofline::multi_gpu::GpuSplit,
    /// One KV buffer for all sequences (llama.cpp's `--kv-unified`) instead of one per
    /// sequence: a token may then belong to several sequences in one batch
    /// ([`Engine::decode_seqs`], a tree draft's shared nodes), and copying a sequence
    /// ([`Engine::kv_copy`]) is bookkeeping, not a copy. MLX ignores it.
    #[serde(default)]
    pub kv_unified: bool,
}

fn repack_default() -> bool {
    true
}

impl Default for EngineConfig {
    fn default() -> Self {
        let t = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        EngineConfig {
            n_ctx: 4096,
            n_batch: 2048,
            n_ubatch: 512,
            n_threads: t,
            n_threads_batch: t,
            n_gpu_layers: ALL_LAYERS,
            n_seq_max: 1,
            type_k: Default::default(),
            type_v: Default::default(),
            flash_attn: None,
            repack: true,
            split: Default::default(),
            kv_unified: false,
        }
    }
}

/// Identity of an engine build, for provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineInfo {
    /// `llama.cpp`, `mlx`.
    pub name: String,
    /// Engine version/build string (e.g. `llama-cpp-sys-2 0.1.161`).
    pub build: String,
    /// The engine's back ends other than the CPU, `,`-separated, or `CPU` when there
    /// are none (llama-bench's `backends` column: `CPU`, `CUDA`, `Metal`, …).
    pub backends: String,
    /// The engine's description of its build (llama.cpp: `llama_print_system_info()`,
    /// the CPU features compiled in).
    pub system_info: String,
}

/// How an engine holds a model where that differs from the file and from the
/// configuration it was asked for ([`Engine::held_model`]): MLX's requantized
/// arrays and its own CPU lanes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldModel {
    /// The held format as rows name it (`mlx-4bit`, `mlx-8bit`, `mlx-f16`).
    pub quant: &'static str,
    /// Bytes of the weight arrays held.
    pub weight_bytes: u64,
    /// Bytes one batch-1 decode step streams from them, before the KV cache
    /// ([`crate::probe::model::decode_step_bytes`]'s rule).
    pub streamed_bytes: u64,
    /// CPU threads it decodes with (MLX: its lanes, one CPU stream each).
    pub n_threads: u32,
}

/// The compute of an inference engine holding one model and one context; its
/// vocabulary is the [`Vocab`] supertrait.
pub trait Engine: Vocab {
    /// Engine identity for provenance.
    fn info(&self) -> EngineInfo;
    /// Width of a logit row (may exceed the tokenizer's vocabulary, e.g. Qwen2.5-7B's
    /// 152064 logits for a 151936-token vocabulary).
    fn n_vocab(&self) -> usize;
    /// Context length of the current context.
    fn n_ctx(&self) -> u32;
    /// Largest batch `decode` accepts.
    fn n_batch(&self) -> u32;
    /// Positions one sequence can hold: [`Engine::n_ctx`] by default (a cache per
    /// sequence); llama.cpp splits its context among `n_seq_max` sequences unless
    /// the cache is unified ([`EngineConfig::kv_unified`]).
    fn n_ctx_seq(&self) -> u32 {
        self.n_ctx()
    }
    /// Runs one forward pass over `batch`; afterwards the logits of the items with
    /// `logits = true` are readable in order through [`Engine::logits`].
    ///
    /// # Errors
    /// [`EngineError::Decode`] when the pass fails (e.g. no KV slot is left).
    fn decode(&mut self, batch: &[BatchItem]) -> Result<(), EngineError>;
    /// Logits (length [`Engine::n_vocab`]) of the `i`-th item that asked for logits
    /// in the last [`Engine::decode`].
    ///
    /// # Errors
    /// [`EngineError::NoLogits`] when `i` is out of range.
    fn logits(&self, i: usize) -> Result<&[f32], EngineError>;
    /// Removes positions `>= from_pos` of sequence `seq` from the KV cache (rollback).
    ///
    /// # Errors
    /// [`EngineError::Kv`] when the engine cannot remove a partial sequence.
    fn kv_truncate(&mut self, seq: i32, from_pos: u32) -> Result<(), EngineError>;
    /// Empties the whole KV cache.
    fn kv_clear(&mut self);
    /// Waits for queued device work (a no-op on synchronous back ends).
    fn synchronize(&mut self);
    /// Whether a pass of another shape (number of rows) than the last one costs more
    /// than its own work: false by default; llama.cpp with layers on a CUDA device
    /// re-captures its CUDA graph after a change of shape and runs the next passes
    /// without one. A drafter then keeps its passes one row each
    /// ([`crate::experiments::speculative::drafter::CatchUp`]).
    fn shape_change_is_costly(&self) -> bool {
        false
    }
    /// How the engine holds the model where that is not the file as it is with the
    /// configuration's threads: `None` by default (llama.cpp maps the file).
    fn held_model(&self) -> Option<HeldModel> {
        None
    }
    /// Makes sequence `dst`'s cache the first `n_tokens` positions of sequence `src`'s
    /// (whatever `dst` held before is dropped): a shared prompt prefix is then
    /// prefilled once and reused by other sequences.
    ///
    /// # Errors
    /// [`EngineError::Unsupported`] by default; [`EngineError::Kv`] when the engine
    /// refuses.
    fn kv_copy(&mut self, _src: i32, _dst: i32, _n_tokens: u32) -> Result<(), EngineError> {
        Err(EngineError::Unsupported("copying a sequence's KV cache"))
    }

    /// Adds sequence `dst` to every cell of sequence `src`, keeping what `dst`
    /// already holds: in a unified cache ([`EngineConfig::kv_unified`]) the cells stay
    /// occupied where they are after `src` is dropped. A tree's rejected nodes are
    /// parked this way instead of freed, because llama.cpp (CPU, flash attention on)
    /// decodes a token placed in a freed cell below a kept cell of its sequence wrongly
    /// (docs/speculative.md, "Tree drafts").
    ///
    /// # Errors
    /// [`EngineError::Unsupported`] by default; [`EngineError::Kv`] without a unified
    /// cache.
    fn kv_park(&mut self, _src: i32, _dst: i32) -> Result<(), EngineError> {
        Err(EngineError::Unsupported("parking a sequence's KV cells"))
    }

    /// Decodes items that may each belong to several sequences (a draft tree's
    /// nodes; [`SeqItem`]); logits as [`Engine::decode`]. Needs a context made with
    /// [`EngineConfig::kv_unified`] and enough [`EngineConfig::n_seq_max`].
    ///
    /// # Errors
    /// [`EngineError::Unsupported`] for an engine without shared-token batches;
    /// [`EngineError::Decode`] when the engine refuses the batch.
    fn decode_seqs(&mut self, _items: &[SeqItem<'_>]) -> Result<(), EngineError> {
        Err(EngineError::Unsupported(
            "tokens shared by several sequences",
        ))
    }

    /// Bytes of the serialized state of one sequence (KV cache + bookkeeping).
    ///
    /// # Errors
    /// [`EngineError::Unsupported`] by default.
    fn seq_state_bytes(&self, _seq: i32) -> Result<u64, EngineError> {
        Err(EngineError::Unsupported("per-sequence state size"))
    }

    /// Saves sequence `seq`'s state into the engine's single snapshot slot (llama-bench
    /// caches the depth fill this way).
    ///
    /// # Errors
    /// [`EngineError::Unsupported`] by default.
    fn save_seq_state(&mut self, _seq: i32) -> Result<(), EngineError> {
        Err(EngineError::Unsupported("sequence state snapshots"))
    }
    /// Restores the snapshot into sequence `seq` (replacing its cache).
    ///
    /// # Errors
    /// [`EngineError::Unsupported`] by default; [`EngineError::Kv`] when there is no snapshot.
    fn restore_seq_state(&mut self, _seq: i32) -> Result<(), EngineError> {
        Err(EngineError::Unsupported("sequence state snapshots"))
    }

    /// Prefills `tokens` into sequence `seq` starting at `start_pos`, in chunks of
    /// [`Engine::n_batch`]; keeps the logits of the last token only when `last_logits`.
    ///
    /// # Errors
    /// As [`Engine::decode`].
    fn prefill(
        &mut self,
        tokens: &[TokenId],
        start_pos: u32,
        seq: i32,
        last_logits: bool,
    ) -> Result<(), EngineError> {
        let n_batch = self.n_batch().max(1) as usize;
        let mut batch = Vec::with_capacity(n_batch.min(tokens.len()));
        for (ci, chunk) in tokens.chunks(n_batch).enumerate() {
            batch.clear();
            let base = start_pos + (ci * n_batch) as u32;
            let last_chunk = (ci + 1) * n_batch >= tokens.len();
            for (i, &t) in chunk.iter().enumerate() {
                let is_last = last_chunk && i + 1 == chunk.len();
                batch.push(BatchItem {
                    token: t,
                    pos: base + i as u32,
                    seq,
                    logits: is_last && last_logits,
                });
            }
            self.decode(&batch)?;
        }
        Ok(())
    }

    /// Decodes one token at `pos` in sequence `seq`, keeping its logits.
    ///
    /// # Errors
    /// As [`Engine::decode`].
    fn decode_one(&mut self, token: TokenId, pos: u32, seq: i32) -> Result<(), EngineError> {
        self.decode(&[BatchItem {
            token,
            pos,
            seq,
            logits: true,
        }])
    }
}

/// An engine chosen at run time (llama.cpp or MLX).
pub type BoxedEngine = Box<dyn Engine + Send>;

/// Implements [`Engine`] for a pointer type to an engine by forwarding every method,
/// the provided ones included, so an engine's own overrides are kept.
macro_rules! forward_engine {
    ($($ptr:tt)*) => {
        impl<E: Engine + ?Sized> Engine for $($ptr)* {
            fn info(&self) -> EngineInfo {
                (**self).info()
            }
            fn n_vocab(&self) -> usize {
                (**self).n_vocab()
            }
            fn n_ctx(&self) -> u32 {
                (**self).n_ctx()
            }
            fn n_batch(&self) -> u32 {
                (**self).n_batch()
            }
            fn n_ctx_seq(&self) -> u32 {
                (**self).n_ctx_seq()
            }
            fn decode(&mut self, batch: &[BatchItem]) -> Result<(), EngineError> {
                (**self).decode(batch)
            }
            fn logits(&self, i: usize) -> Result<&[f32], EngineError> {
                (**self).logits(i)
            }
            fn kv_truncate(&mut self, seq: i32, from_pos: u32) -> Result<(), EngineError> {
                (**self).kv_truncate(seq, from_pos)
            }
            fn kv_clear(&mut self) {
                (**self).kv_clear()
            }
            fn synchronize(&mut self) {
                (**self).synchronize()
            }
            fn shape_change_is_costly(&self) -> bool {
                (**self).shape_change_is_costly()
            }
            fn held_model(&self) -> Option<HeldModel> {
                (**self).held_model()
            }
            fn kv_copy(&mut self, src: i32, dst: i32, n_tokens: u32) -> Result<(), EngineError> {
                (**self).kv_copy(src, dst, n_tokens)
            }
            fn kv_park(&mut self, src: i32, dst: i32) -> Result<(), EngineError> {
                (**self).kv_park(src, dst)
            }
            fn decode_seqs(&mut self, items: &[SeqItem<'_>]) -> Result<(), EngineError> {
                (**self).decode_seqs(items)
            }
            fn seq_state_bytes(&self, seq: i32) -> Result<u64, EngineError> {
                (**self).seq_state_bytes(seq)
            }
            fn save_seq_state(&mut self, seq: i32) -> Result<(), EngineError> {
                (**self).save_seq_state(seq)
            }
            fn restore_seq_state(&mut self, seq: i32) -> Result<(), EngineError> {
                (**self).restore_seq_state(seq)
            }
            fn prefill(
                &mut self,
                tokens: &[TokenId],
                start_pos: u32,
                seq: i32,
                last_logits: bool,
            ) -> Result<(), EngineError> {
                (**self).prefill(tokens, start_pos, seq, last_logits)
            }
            fn decode_one(&mut self, token: TokenId, pos: u32, seq: i32) -> Result<(), EngineError> {
                (**self).decode_one(token, pos, seq)
            }
        }
    };
}
// A boxed engine is an engine: code that picks its engine at run time (llama.cpp or
// MLX, `--engine`) holds a `Box<dyn Engine + Send>` and hands it to the generic code
// unchanged.
forward_engine!(Box<E>);
// A borrowed engine is an engine: a drafter that owns its engine can run on one
// that another drafter holds (tree drafts on the set-acceptance drafter's engine).
forward_engine!(&mut E);

/// Index of the largest logit (first on ties), the greedy choice.
pub fn argmax(logits: &[f32]) -> TokenId {
    let mut best = 0usize;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as TokenId
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_maximum() {
        assert_eq!(argmax(&[0.0, 3.0, 1.0, 3.0]), 1);
        assert_eq!(argmax(&[-1.0]), 0);
    }
}
