//! Speculative decoding, written here on top of the [`Engine`](crate::measure::engine::Engine)
//! trait so that it works with any engine and every step can be measured.
//!
//! Algorithm: Leviathan, Kalman & Matias 2023, "Fast Inference from Transformers via
//! Speculative Decoding" (arXiv 2211.17192), and Chen et al. 2023, "Accelerating
//! Large Language Model Decoding with Speculative Sampling" (arXiv 2302.01318).
//!
//! - [`sampling`]: seeded categorical sampling; temperature, top-k and top-p applied
//!   identically to the target's `p` and the drafter's `q`.
//! - [`verify`]: the acceptance / residual-resampling step as a pure function of the
//!   distributions and the uniform draws (so its output distribution can be checked
//!   exactly), plus the greedy special case.
//! - [`vocab`]: truncation of draft and target logit rows to their shared support,
//!   with the discarded probability mass recorded.
//! - [`drafter`]: the draft-model drafter (its own engine, KV rollback by prefix
//!   matching) and the prompt-lookup (n-gram) drafter.
//! - [`row`]: the host work on one logit row (the loop's argmax).
//! - [`run`]: the speculative loop ([`run::generate`]), the independent target-only
//!   greedy reference ([`run::target_greedy`]) and the per-run statistics.
//! - [`cost`]: the cost model (expected tokens per iteration, predicted speedup,
//!   `--k auto`).
//! - [`prompts`]: the frozen prompt set (`prompts/spec.jsonl`).
//! - [`gate`]: the correctness gate (greedy equality, sampling distribution test).
//! - [`tree`]: tree drafts (shapes, the verify pass's layout, greedy and sampled
//!   acceptance, expected length under set acceptance); [`tree_loop`]: the loop
//!   that drafts and verifies them.
//! - [`synth`]: set-acceptance speculation (a drafter whose acceptance rate is
//!   set, paying a real draft forward; llama.cpp's `--spec-synth-rates`).
//! - [`bench`]: the experiments; [`store`]: their tables; [`chart`]: their charts.
//! - [`job`]: the jobs the CLI (`memwall spec prompts | gate | bench`) and the app
//!   call: options → guard → load → run → store → results files.

pub mod bench;
pub mod chart;
pub mod cost;
pub mod drafter;
pub mod gate;
pub mod job;
#[cfg(test)]
mod mock;
#[cfg(feature = "llama")]
pub mod pair;
pub mod prompts;
pub mod record;
pub mod row;
pub mod run;
pub mod sampling;
pub mod shape;
pub mod store;
pub mod synth;
pub mod tree;
pub mod tree_loop;
pub mod verify;
pub mod vocab;

use crate::measure::engine::EngineError;

/// Largest draft length accepted (`k`); verify batches hold `k + 1` positions.
pub const K_MAX: usize = 16;

/// Errors of speculative decoding.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A model file's header is malformed (the error names the file and field).
    #[error(transparent)]
    Model(#[from] crate::probe::gguf::GgufError),
    /// Stopped by the caller's cancel flag; nothing was stored.
    #[error("cancelled")]
    Cancelled,
    /// A configuration value is out of range.
    #[error("speculative config: {0}")]
    Config(String),
    /// A job's option is out of range; the message names the flag to change.
    #[error("{0}")]
    Options(String),
    /// The prompt set is malformed.
    #[error("prompt set {path}: {problem}")]
    Prompts {
        /// Path of the file the error is about.
        path: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// Draft and target do not share a tokenizer.
    #[error("draft and target tokenizers differ: {0}")]
    Tokenizer(String),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A gate is missing for a configuration that is to be benchmarked.
    #[error("{0}")]
    NoGate(String),
    /// A bench run's output differed from target-only decoding's: the speedup would
    /// compare different work, so the bench stops and nothing is stored.
    #[error(
        "spec bench, {category}: the output of {config} differs from target-only decoding on prompt {prompt_id} (first difference at generated position {position}: target-only token {}, this run's {}); the bench stops and stores nothing. `memwall spec gate` with the same target, drafter, k and -n shows where the engines disagree",
        want.map_or("end".to_string(), |t| t.to_string()),
        got.map_or("end".to_string(), |t| t.to_string())
    )]
    OutputMismatch {
        /// Prompt category.
        category: String,
        /// The configuration (`draft-model k=4`, `target-only repetition 2`).
        config: String,
        /// Id of the prompt in the frozen set, e.g. `json-01`.
        prompt_id: String,
        /// 0-based generated position of the first difference.
        position: usize,
        /// Target-only token there (`None`: that output had ended).
        want: Option<crate::measure::engine::TokenId>,
        /// This run's token there (`None`: that output had ended).
        got: Option<crate::measure::engine::TokenId>,
    },
}

impl crate::experiments::SliceError for SpecError {}
