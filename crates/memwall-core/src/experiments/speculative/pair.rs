//! Loading a (target, draft) pair for the gate and the bench, on llama.cpp or MLX
//! ([`EngineKind`], the same choice and spelling as `memwall bench --engine`).
//! Both models run on the same engine; the pair holds them boxed, so the gate,
//! the drafters and the bench (generic over [`Engine`]) run unchanged on either.

use super::SpecError;
use super::drafter::DraftModel;
use super::gate::TokenizedPrompt;
use super::prompts::PromptSet;
use crate::measure::engine::{Engine, EngineConfig, EngineKind, Vocab};
use std::path::{Path, PathBuf};

pub use crate::measure::engine::BoxedEngine;

/// A loaded pair (the draft is optional: the n-gram drafter needs none).
pub struct Pair {
    /// Target engine.
    pub target: BoxedEngine,
    /// The engine both models run on.
    pub engine: EngineKind,
    /// The engine identity gates and bench rows are keyed by: the engine's build
    /// string, plus the MLX arm (`mlx-4bit`, …) on MLX, since each arm computes
    /// different logits from the same file.
    pub engine_build: String,
    /// Path of the target GGUF file.
    pub target_path: PathBuf,
    /// sha256 of the target GGUF file.
    pub target_sha256: String,
    /// Draft-model drafter.
    pub draft: Option<DraftModel<BoxedEngine>>,
    /// Path of the draft GGUF file (draft-model drafter only).
    pub draft_path: Option<PathBuf>,
    /// sha256 of the draft GGUF file.
    pub draft_sha256: Option<String>,
}

/// The run note that names how the draft model catches up
/// ([`super::drafter::CatchUp`]), joined after `note` (e.g. the fallback-template
/// warning); `note` alone without a draft model.
pub fn with_catch_up_note(p: &Pair, note: Option<String>) -> Option<String> {
    let Some(d) = &p.draft else { return note };
    let c = format!("draft catch-up: {}", d.catch_up().name());
    Some(match note {
        Some(n) => format!("{n}; {c}"),
        None => c,
    })
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

/// Loads the target and the draft when given on llama.cpp, CPU only; see
/// [`load_on`].
///
/// # Errors
/// As [`load_on`].
pub fn load(
    target: &Path,
    draft: Option<&Path>,
    n_ctx: u32,
    n_threads: u32,
) -> Result<Pair, SpecError> {
    load_on(EngineKind::Llama, target, draft, n_ctx, n_threads, 0)
}

/// As [`load_on`] on llama.cpp, with `n_gpu_layers` layers of each model offloaded
/// (llama-bench's `-ngl`).
///
/// # Errors
/// As [`load_on`].
pub fn load_ngl(
    target: &Path,
    draft: Option<&Path>,
    n_ctx: u32,
    n_threads: u32,
    n_gpu_layers: u32,
) -> Result<Pair, SpecError> {
    load_on(
        EngineKind::Llama,
        target,
        draft,
        n_ctx,
        n_threads,
        n_gpu_layers,
    )
}

/// Loads the target and the draft when given on `engine`, and checks that they
/// tokenize alike: the same ids for a probe text that mixes prose, code, JSON and
/// the chat markers, and the same vocabulary over the whole shared id range (each
/// id's text, rendered bytes, special-token attributes and end flag,
/// [`super::vocab::compare_vocabularies`]); a refusal names the first differing id.
///
/// On llama.cpp the target is loaded without weight repacking (so that a row's
/// logits do not depend on how many rows share its pass), the draft as usual (its
/// numerics do not affect correctness), each with `n_gpu_layers` layers offloaded.
/// On MLX both are loaded at the arm's precision (`mlx-4bit`, `mlx-8bit`,
/// `mlx-f16`) on MLX's default device; MLX picks its own CPU threads, so
/// `n_threads` and `n_gpu_layers` do not apply.
///
/// # Errors
/// Load errors naming the file; [`SpecError::Tokenizer`] when the tokenizers
/// differ; [`SpecError::Options`] for MLX in a build without it.
pub fn load_on(
    engine: EngineKind,
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
    load_with(engine, target, draft, &cfg)
}

/// [`load_on`] with both models' engine settings given (e.g. a unified KV cache
/// for tree drafts).
///
/// # Errors
/// As [`load_on`].
pub fn load_with(
    engine: EngineKind,
    target: &Path,
    draft: Option<&Path>,
    cfg: &EngineConfig,
) -> Result<Pair, SpecError> {
    let te = load_one(engine, target, cfg, true)?;
    let engine_build = match engine {
        EngineKind::Llama => te.info().build,
        mlx => format!("{}, {}", te.info().build, mlx.name()),
    };
    let (draft_model, draft_sha) = match draft {
        Some(d) => {
            let de = load_one(engine, d, cfg, false)?;
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
            super::vocab::compare_vocabularies(&te.vocabulary()?, &de.vocabulary()?).map_err(
                |m| {
                    SpecError::Tokenizer(format!(
                        "{} (target) and {} (draft): {m}",
                        target.display(),
                        d.display()
                    ))
                },
            )?;
            let s = sha(d)?;
            (Some(DraftModel::new(de, drafter_key(engine, &s))), Some(s))
        }
        None => (None, None),
    };
    Ok(Pair {
        target: te,
        engine,
        engine_build,
        target_path: target.to_path_buf(),
        target_sha256: sha(target)?,
        draft: draft_model,
        draft_path: draft.map(Path::to_path_buf),
        draft_sha256: draft_sha,
    })
}

/// The drafter key of a draft model file with this sha256 on `engine`: llama.cpp's
/// is [`DraftModel::key_for`]; an MLX arm's adds the arm (`draft:…:mlx-4bit`), since
/// its drafts differ from the file's on llama.cpp.
pub fn drafter_key(engine: EngineKind, sha256: &str) -> String {
    let key = DraftModel::<BoxedEngine>::key_for(sha256);
    match engine {
        EngineKind::Llama => key,
        mlx => format!("{key}:{}", mlx.name()),
    }
}

/// One model on `engine` (`target`: llama.cpp without weight repacking, see
/// [`crate::measure::engine::llama::LlamaModelHandle::load_no_repack`]).
fn load_one(
    engine: EngineKind,
    path: &Path,
    cfg: &EngineConfig,
    target: bool,
) -> Result<BoxedEngine, SpecError> {
    let cfg = EngineConfig {
        repack: !target,
        ..cfg.clone()
    };
    crate::measure::engine::open(engine, path, &cfg).map_err(|e| match e {
        e @ crate::measure::engine::EngineError::NotBuilt(_) => {
            SpecError::Options(format!("--engine {e}"))
        }
        e => e.into(),
    })
}

/// The warning a run stores in its notes when `set` has chat prompts and the target
/// `e` (the file `model`) has no chat template: those prompts went through the
/// fallback template ([`crate::measure::prompt::fallback_note`]).
///
/// # Errors
/// The target's template does not compile.
pub fn template_note(
    e: &dyn Engine,
    model: &Path,
    set: &PromptSet,
) -> Result<Option<String>, SpecError> {
    if !set
        .prompts
        .iter()
        .any(|p| p.format == super::prompts::Format::Chat)
    {
        return Ok(None);
    }
    let f = e
        .chat_format()
        .map_err(crate::measure::engine::EngineError::from)?;
    Ok(f.fallback_note(&model.display().to_string()))
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
