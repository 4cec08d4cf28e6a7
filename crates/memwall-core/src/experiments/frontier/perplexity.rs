//! The perplexity job (`memwall perplexity`): one model's perplexity on a text slice
//! with llama-perplexity's method, optionally KL divergence against a reference model
//! in lockstep, and optionally llama-perplexity's own figure on the same slice for
//! comparison. Nothing is stored: a stored perplexity is a frontier cell.

use super::FrontierError;
use crate::measure::engine::{self, ALL_LAYERS, BoxedEngine, EngineConfig, EngineKind, Vocab};
use crate::measure::evals::ppl::{self, PplConfig, PplResult};
use crate::measure::guard::{Guard, GuardOptions, GuardReport};
use crate::probe::model::{CacheType, ModelFacts};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

/// What to measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerplexityRequest {
    /// Path of the GGUF file to evaluate.
    pub model: PathBuf,
    /// A reference model for KL divergence (its logits beside the model's, window by
    /// window).
    pub reference: Option<PathBuf>,
    /// The text slice: dataset name, window length and window count.
    pub config: PplConfig,
    /// Threads for the engine (and llama-perplexity).
    pub n_threads: u32,
    /// What the measuring guard allows.
    pub guard: GuardOptions,
    /// llama-perplexity to run on the same slice for comparison (`None`: not run).
    pub compare_tool: Option<PathBuf>,
}

/// llama-perplexity's final estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolPerplexity {
    /// Perplexity, exp(mean NLL per scored token).
    pub ppl: f64,
    /// Its ± as llama-perplexity prints it.
    pub unc: f64,
}

/// A finished perplexity measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerplexityOutcome {
    /// memwall's result (with KLD when a reference was given).
    pub result: PplResult,
    /// The dataset's file name.
    pub text_file: String,
    /// What the guard saw.
    pub guard: GuardReport,
    /// llama-perplexity on the same slice, when asked for.
    pub llama_perplexity: Option<ToolPerplexity>,
}

/// Measures `req` on llama.cpp (blocking: call it from a thread that may block).
/// The guard refuses battery and models that do not fit before anything loads;
/// `on_window(done, of)` reports scored windows.
///
/// # Errors
/// [`FrontierError::Catalog`] for an unknown or unfetched dataset;
/// [`FrontierError::NotText`] for a task dataset; [`FrontierError::Read`] naming
/// the text file; guard, model, engine and evaluation errors.
pub fn perplexity_job(
    req: &PerplexityRequest,
    on_window: &mut dyn FnMut(u32, u32),
) -> Result<PerplexityOutcome, FrontierError> {
    let cfg = &req.config;
    let entry = crate::probe::datasets::Datasets::builtin()?
        .get(&cfg.dataset)?
        .clone();
    if entry.kind != "text" {
        return Err(FrontierError::NotText(cfg.dataset.clone()));
    }
    let text_path = entry.require()?;
    let text = std::fs::read_to_string(&text_path).map_err(|source| FrontierError::Read {
        path: text_path.display().to_string(),
        source,
    })?;
    let mut guard = Guard::begin(req.guard)?;
    {
        let facts = ModelFacts::open(&req.model)?;
        let reference = req.reference.as_ref().map(ModelFacts::open).transpose()?;
        let mut parts = vec![(&facts, cfg.n_ctx as u64)];
        if let Some(r) = &reference {
            parts.push((r, cfg.n_ctx as u64));
        }
        guard.check_fit(&parts, CacheType::F16)?;
    }
    let ecfg = EngineConfig {
        n_ctx: cfg.n_ctx,
        n_batch: cfg.n_ctx,
        n_ubatch: cfg.n_ctx.min(512),
        n_threads: req.n_threads,
        n_threads_batch: req.n_threads,
        n_gpu_layers: ALL_LAYERS,
        n_seq_max: 1,
        ..Default::default()
    };
    let mut e = engine::open(EngineKind::Llama, &req.model, &ecfg)?;
    let tokens = e.tokenize(&text, true)?;
    let cancel = AtomicBool::new(false);
    let result = match &req.reference {
        Some(r) => {
            let mut re = engine::open(EngineKind::Llama, r, &ecfg)?;
            ppl::perplexity(
                &mut e,
                Some(&mut re),
                &tokens,
                &entry.sha256,
                cfg,
                &cancel,
                on_window,
            )?
        }
        None => ppl::perplexity::<BoxedEngine, BoxedEngine>(
            &mut e,
            None,
            &tokens,
            &entry.sha256,
            cfg,
            &cancel,
            on_window,
        )?,
    };
    let guard = guard.finish();
    let llama_perplexity = match &req.compare_tool {
        Some(tool) => {
            let crate::measure::evals::Estimate {
                value: ppl,
                uncertainty: unc,
            } = ppl::llama_perplexity_reference(tool, &req.model, &text_path, cfg, req.n_threads)?;
            Some(ToolPerplexity { ppl, unc })
        }
        None => None,
    };
    Ok(PerplexityOutcome {
        result,
        text_file: entry.file.clone(),
        guard,
        llama_perplexity,
    })
}
