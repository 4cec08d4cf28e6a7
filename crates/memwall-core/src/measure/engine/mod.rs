//! Inference engines behind one small trait.
//!
//! The trait is shaped by what measurement and speculative decoding need:
//! a forward pass over a batch of `(token, position, sequence, want_logits)`
//! items ([`Engine::decode`]), the logits of the items that asked for them
//! ([`Engine::logits`]), and KV-cache truncation per sequence
//! ([`Engine::kv_truncate`]) for rollback. Everything else (prefill in chunks,
//! single-token decode, greedy argmax) is a provided method built on those.
//!
//! Implementations: `llama` (llama.cpp through `llama-cpp-2`, feature `llama`) and
//! `mlx` (models written with mlx-rs ops, feature `mlx`).

#[cfg(feature = "llama")]
pub mod llama;
#[cfg(feature = "mlx")]
pub mod mlx;

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
    /// Token id.
    pub token: TokenId,
    /// Position in its sequence (0-based).
    pub pos: u32,
    /// Sequence id (0 for single-sequence use).
    pub seq: i32,
    /// Whether to keep this item's logits.
    pub logits: bool,
}

/// Errors of an engine.
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
    /// Layers offloaded to the accelerator (`-ngl`; 0 = CPU only, a large value = all).
    pub n_gpu_layers: u32,
    /// Maximum parallel sequences.
    pub n_seq_max: u32,
    /// K cache element type.
    pub type_k: crate::probe::model::CacheType,
    /// V cache element type.
    pub type_v: crate::probe::model::CacheType,
    /// Flash attention: `None` = engine's automatic choice.
    pub flash_attn: Option<bool>,
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
            n_gpu_layers: 999,
            n_seq_max: 1,
            type_k: Default::default(),
            type_v: Default::default(),
            flash_attn: None,
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

/// A chat message for template application.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The message text.
    pub content: String,
}

/// An inference engine holding one model and one context.
pub trait Engine {
    /// Engine identity for provenance.
    fn info(&self) -> EngineInfo;
    /// Width of a logit row (may exceed the tokenizer's vocabulary, e.g. Qwen2.5-7B's
    /// 152064 logits for a 151936-token vocabulary).
    fn n_vocab(&self) -> usize;
    /// Context length of the current context.
    fn n_ctx(&self) -> u32;
    /// Largest batch `decode` accepts.
    fn n_batch(&self) -> u32;
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
    /// Tokenizes `text`; `add_special` adds BOS where the model wants it; special
    /// tokens written in the text (`<|im_start|>`) are parsed.
    ///
    /// # Errors
    /// [`EngineError::Tokenize`].
    fn tokenize(&self, text: &str, add_special: bool) -> Result<Vec<TokenId>, EngineError>;
    /// The bytes of one token (may be a partial UTF-8 sequence).
    fn token_bytes(&self, token: TokenId) -> Vec<u8>;
    /// End-of-generation token?
    fn is_eog(&self, token: TokenId) -> bool;
    /// BOS token when the model adds one.
    fn bos(&self) -> Option<TokenId>;
    /// Applies the model's own chat template (from the GGUF) to `messages`, ending
    /// with the assistant's opening tag.
    ///
    /// # Errors
    /// [`EngineError::Tokenize`] when the model has no template or it fails.
    fn apply_chat_template(&self, messages: &[ChatMessage]) -> Result<String, EngineError>;
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

/// A boxed engine is an engine: code that picks its engine at run time (llama.cpp or
/// MLX, `--engine`) holds a `Box<dyn Engine + Send>` and hands it to the generic
/// code unchanged. Every method forwards, the provided ones included, so an
/// engine's own overrides are kept.
impl<E: Engine + ?Sized> Engine for Box<E> {
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
    fn tokenize(&self, text: &str, add_special: bool) -> Result<Vec<TokenId>, EngineError> {
        (**self).tokenize(text, add_special)
    }
    fn token_bytes(&self, token: TokenId) -> Vec<u8> {
        (**self).token_bytes(token)
    }
    fn is_eog(&self, token: TokenId) -> bool {
        (**self).is_eog(token)
    }
    fn bos(&self) -> Option<TokenId> {
        (**self).bos()
    }
    fn apply_chat_template(&self, messages: &[ChatMessage]) -> Result<String, EngineError> {
        (**self).apply_chat_template(messages)
    }
    fn kv_copy(&mut self, src: i32, dst: i32, n_tokens: u32) -> Result<(), EngineError> {
        (**self).kv_copy(src, dst, n_tokens)
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
