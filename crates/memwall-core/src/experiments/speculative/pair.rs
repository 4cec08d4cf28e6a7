//! Loading a (target, draft) pair on the llama.cpp engine for the gate and the bench.

use super::SpecError;
use super::drafter::DraftModel;
use super::gate::TokenizedPrompt;
use super::prompts::PromptSet;
use crate::measure::engine::llama::{LlamaEngine, LlamaModelHandle};
use crate::measure::engine::{Engine, EngineConfig};
use std::path::{Path, PathBuf};

/// A loaded pair (the draft is optional: the n-gram drafter needs none).
pub struct Pair {
    /// Target engine.
    pub target: LlamaEngine,
    /// Path of the target GGUF file.
    pub target_path: PathBuf,
    /// sha256 of the target GGUF file.
    pub target_sha256: String,
    /// Draft-model drafter.
    pub draft: Option<DraftModel<LlamaEngine>>,
    /// Path of the draft GGUF file (draft-model drafter only).
    pub draft_path: Option<PathBuf>,
    /// sha256 of the draft GGUF file.
    pub draft_sha256: Option<String>,
}

/// Engine settings for speculative runs: context for the longest prompt plus
/// `max_new` and a verify batch, batch 512, `n_threads` for decode and prefill.
pub fn engine_config(n_ctx: u32, n_threads: u32) -> EngineConfig {
    EngineConfig {
        n_ctx: n_ctx.next_multiple_of(256),
        n_batch: 512,
        n_ubatch: 512,
        n_threads,
        n_threads_batch: n_threads,
        n_gpu_layers: 0,
        n_seq_max: 1,
        ..Default::default()
    }
}

fn sha(p: &Path) -> Result<String, SpecError> {
    crate::util::sha256_file(p)
        .map_err(|e| SpecError::Config(format!("cannot read {}: {e}", p.display())))
}

/// Loads the target (without weight repacking, so that a row's logits do not depend
/// on how many rows share its pass) and the draft when given (as usual: its
/// numerics do not affect correctness), and checks that they tokenize
/// alike: the same ids for a probe text that mixes prose, code, JSON and the chat
/// markers, and the same bytes for the first 1000 ids.
///
/// # Errors
/// Load errors naming the file; [`SpecError::Tokenizer`] when the tokenizers differ.
pub fn load(
    target: &Path,
    draft: Option<&Path>,
    n_ctx: u32,
    n_threads: u32,
) -> Result<Pair, SpecError> {
    load_ngl(target, draft, n_ctx, n_threads, 0)
}

/// As [`load`], with `n_gpu_layers` layers of each model offloaded (llama-bench's
/// `-ngl`).
///
/// # Errors
/// As [`load`].
pub fn load_ngl(
    target: &Path,
    draft: Option<&Path>,
    n_ctx: u32,
    n_threads: u32,
    n_gpu_layers: u32,
) -> Result<Pair, SpecError> {
    let cfg = EngineConfig {
        n_gpu_layers,
        ..engine_config(n_ctx, n_threads)
    };
    // The target without weight repacking: see LlamaModelHandle::load_no_repack.
    let th = LlamaModelHandle::load_no_repack_ngl(target, n_gpu_layers)?;
    let te = th.engine(&cfg)?;
    let (draft_model, draft_sha) = match draft {
        Some(d) => {
            let dh = LlamaModelHandle::load(d, n_gpu_layers)?;
            let de = dh.engine(&cfg)?;
            let probe = "Hello, world! fn main() { println!(\"{}\", 1 + 2); } {\"a\": [1, 2.5, null]} <|im_start|>user\nÜber café 東京<|im_end|>";
            let a = te.tokenize(probe, true)?;
            let b = de.tokenize(probe, true)?;
            if a != b {
                return Err(SpecError::Tokenizer(format!(
                    "{} and {} tokenize a probe text differently ({} vs {} tokens)",
                    target.display(),
                    d.display(),
                    a.len(),
                    b.len()
                )));
            }
            if let Some(t) = (0..1000).find(|&t| te.token_bytes(t) != de.token_bytes(t)) {
                return Err(SpecError::Tokenizer(format!(
                    "token {t} decodes differently in {} and {}",
                    target.display(),
                    d.display()
                )));
            }
            let s = sha(d)?;
            (
                Some(DraftModel::new(de, DraftModel::<LlamaEngine>::key_for(&s))),
                Some(s),
            )
        }
        None => (None, None),
    };
    Ok(Pair {
        target: te,
        target_path: target.to_path_buf(),
        target_sha256: sha(target)?,
        draft: draft_model,
        draft_path: draft.map(Path::to_path_buf),
        draft_sha256: draft_sha,
    })
}

/// Renders and tokenizes every prompt of `set` with `e`'s template and tokenizer.
///
/// # Errors
/// Template or tokenizer errors, naming the prompt.
pub fn tokenize_set(e: &dyn Engine, set: &PromptSet) -> Result<Vec<TokenizedPrompt>, SpecError> {
    set.prompts
        .iter()
        .map(|p| {
            let tokens = p.tokens(e).map_err(|err| SpecError::Prompts {
                path: set.source.clone(),
                problem: format!("prompt {}: {err}", p.id),
            })?;
            Ok(TokenizedPrompt {
                id: p.id.clone(),
                category: p.category,
                format: p.format,
                tokens,
            })
        })
        .collect()
}
