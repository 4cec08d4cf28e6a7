//! `memwall serve`: an OpenAI-compatible server on memwall's own engine, with
//! continuous batching and prefix-cache reuse, so what a server gets out of the
//! memory wall can be measured against the same roofline as a single stream.
//!
//! - [`scheduler`]: slots, continuous batching, chunked prefill
//!   ([`scheduler::PREFILL_CHUNK_TOKENS`]), the bounded strict-FIFO admission queue,
//!   prefix reuse (a slot's own history, or a shared prefix copied between
//!   sequences), cancellation within one step; greedy sampling.
//! - [`template`]: the GGUF's Jinja chat template through minijinja, now
//!   [`crate::measure::prompt::template`]: chat and completion prompts become tokens
//!   through [`crate::measure::prompt::ChatFormat`], the path every command takes.
//! - [`api`]: OpenAI's request and response objects and the SSE framing.
//! - [`facts`]: what the server publishes about itself at `/memwall/facts` (engine,
//!   placement, bytes per token at its KV type, the roof it runs under).
//! - [`http`]: the axum routes (`/v1/models`, `/v1/completions`,
//!   `/v1/chat/completions`, `/health`, `/metrics`), authentication, errors.
//! - [`job`]: `serve_job`, the one call of the CLI and the app; the live sampler
//!   runs beside the server and its recording is stored at shutdown.
//! - [`store`]: the `serve` run with its recording.
//! - [`session`]: a server the app starts, watches and stops from its window
//!   ([`session::serve_start_job`], [`session::ServeSession::live`],
//!   [`session::serve_stop_job`]).
//!
//! The engine (a llama.cpp context is not shared across threads) runs on one
//! dedicated thread; handlers reach it only through the admission queue and a
//! per-request event channel.

pub mod api;
pub mod facts;
pub mod http;
#[cfg(feature = "llama")]
pub mod job;
pub mod scheduler;
#[cfg(feature = "llama")]
pub mod session;
pub mod store;
pub use crate::measure::prompt::template;

/// Errors of starting or running a server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// An option is out of range; the message names the flag.
    #[error("{0}")]
    Options(String),
    /// The model file failed memwall's GGUF checks.
    #[error(transparent)]
    Model(#[from] crate::probe::gguf::GgufError),
    /// The guard refused (the model and its KV cache do not fit in memory).
    #[error(transparent)]
    Guard(#[from] crate::measure::guard::GuardError),
    /// The engine failed to load the model or create the context.
    #[error(transparent)]
    Engine(#[from] crate::measure::engine::EngineError),
    /// The GGUF's chat template does not compile.
    #[error(transparent)]
    Template(#[from] template::TemplateError),
    /// The model's chat format could not be read.
    #[error(transparent)]
    Prompt(#[from] crate::measure::prompt::PromptError),
    /// Binding or serving failed.
    #[error("{0}")]
    Io(String),
    /// Storing the session's recording failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl crate::experiments::SliceError for ServeError {}
