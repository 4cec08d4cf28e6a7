//! `memwall spec prompts`: the prompt set as the target's chat template and
//! tokenizer turn it into tokens.

use super::PromptSummary;
use serde::{Deserialize, Serialize};
#[cfg(feature = "llama")]
use {
    super::super::SpecError,
    super::{FIRST_N_CTX, PairOptions, SpecProgress, file_name, load},
    crate::experiments::{JobError, blocking},
};

/// What [`prompts_job`] found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptsOutcome {
    /// Where the set came from (a path, or `builtin:prompts/spec.jsonl`).
    pub prompt_set: String,
    pub prompt_set_sha256: String,
    /// Target file name.
    pub target_file: String,
    /// Every prompt, in set order, with its rendered text.
    pub prompts: Vec<PromptSummary>,
}

/// Renders and tokenizes the prompt set with the target's chat template and
/// tokenizer (no measurement: the guard is not involved, the header is checked
/// before llama.cpp loads the file).
///
/// # Errors
/// [`JobError::Slice`] (a `SpecError`): a malformed model or prompt set, engine errors.
#[cfg(feature = "llama")]
pub async fn prompts_job(
    pair_opts: PairOptions,
    progress: impl FnMut(SpecProgress) + Send + 'static,
) -> Result<PromptsOutcome, JobError> {
    let set = pair_opts.prompt_set()?;
    crate::probe::model::ModelFacts::open(&pair_opts.target).map_err(SpecError::from)?;
    let mut progress = progress;
    blocking(move || -> Result<PromptsOutcome, JobError> {
        let p = load(
            pair_opts.engine,
            &pair_opts.target,
            None,
            FIRST_N_CTX,
            pair_opts.threads(),
            pair_opts.n_gpu_layers,
            pair_opts.n_seq,
            &mut progress,
        )?;
        let toks = super::super::pair::tokenize_set(&p.target, &set)?;
        let prompts = set
            .prompts
            .iter()
            .zip(&toks)
            .map(|(pr, t)| PromptSummary {
                rendered: Some(pr.render(&p.target).unwrap_or_default()),
                ..PromptSummary::of(t)
            })
            .collect();
        Ok(PromptsOutcome {
            prompt_set: set.source.clone(),
            prompt_set_sha256: set.sha256.clone(),
            target_file: file_name(&p.target_path),
            prompts,
        })
    })
    .await?
}
