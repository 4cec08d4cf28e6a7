//! A load tester for any OpenAI-compatible server (memwall's own, llama-server, vLLM,
//! LM Studio), with vLLM's metric definitions (`vllm bench serve`,
//! `vllm/benchmarks/serve.py`) and one thing the usual tools lack: each load point is
//! placed against this machine's measured memory bandwidth.
//!
//! - [`plan`]: the validated plan (target, workload, load levels, SLOs), the seeded
//!   open-loop arrival schedule (Poisson or gamma) and the synthetic prompts.
//! - [`sse`]: an incremental Server-Sent Events parser (events may split anywhere
//!   across reads; each event is stamped when its last byte arrived).
//! - [`run`]: one streamed request ([`run::send`]) and the closed-loop / open-loop
//!   drivers, one thread per in-flight request.
//! - [`metrics`]: per-request samples → TTFT, TPOT, ITL, E2EL statistics, throughput
//!   and goodput ([`metrics::LoadPoint`]), and the bandwidth-normalised columns.
//! - [`store`]: the `loadtest_points` table; [`report`]: the printed tables;
//!   [`chart`]: the charts; [`job`]: the call the CLI makes.
//! - [`url_chat`]: one chat turn streamed from any OpenAI-compatible URL, timed at
//!   the client (the app's chat page pointed at a server).
//! - [`view`]: a load test as the app's Serve page draws it (rows, charts as SVG).

pub mod chart;
#[cfg(test)]
mod fake;
pub mod job;
pub mod metrics;
pub mod plan;
pub mod report;
pub mod run;
pub mod sse;
pub mod store;
pub mod url_chat;
pub mod view;

/// Errors of a load test.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadtestError {
    /// An option is out of range; the message names the flag and the fix.
    #[error("{0}")]
    Options(String),
    /// The server could not be reached at all.
    #[error("cannot reach {url}: {msg}. Is the server running and listening there? (check --url)")]
    Unreachable {
        /// The URL tried.
        url: String,
        /// The transport's error.
        msg: String,
    },
    /// The server answered, but not as an OpenAI-compatible server does.
    #[error("{url} did not answer like an OpenAI-compatible server: {problem}")]
    NotOpenAi {
        /// The URL asked.
        url: String,
        /// What came back and what was expected.
        problem: String,
    },
    /// Every measured request of a load point failed; nothing is stored.
    #[error("{level}: all {n} requests failed; the first error: {first}")]
    AllFailed {
        /// The load level (`concurrency 4`, `rate 2.0/s`).
        level: String,
        /// Requests sent.
        n: usize,
        /// The first request's error.
        first: String,
    },
    /// A measured value is physically impossible (an error, not a row).
    #[error("impossible measurement: {0}")]
    Impossible(String),
    /// The model file could not be read.
    #[error(transparent)]
    Model(#[from] crate::probe::gguf::GgufError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// Writing charts or results failed.
    #[error("writing {path}: {msg}")]
    Write {
        /// The file.
        path: String,
        /// What failed.
        msg: String,
    },
    /// A background thread died.
    #[error("background task failed: {0}")]
    Join(String),
}

impl crate::experiments::SliceError for LoadtestError {}
