//! Stage 5, **experiments**: each a vertical slice that plans, runs the instruments
//! of [`crate::measure`], builds its records, stores them and draws them, ending in
//! a **job**: the one function the CLI and the app call per command, so both produce
//! identical rows, files and charts.
//!
//! - [`agree`]: greedy agreement of two engines (MLX vs llama.cpp) on the same weights.
//! - [`mlx_tg`]: the MLX engine's pipelined greedy decode, timed as mlx-lm's.
//! - [`roof`]: the machine's roof (STREAM + compute peaks) as a stored run.
//! - [`bench`]: llama-bench-style pp/tg tests placed on the roofline.
//! - [`evidence`]: the roofline evidence (KV bytes, batching, depth, threads).
//! - [`speculative`]: speculative decoding with its gate and cost model.
//! - [`frontier`]: the quantization frontier (bytes, speed, perplexity, KLD, tasks).
//! - [`serve`]: an OpenAI-compatible server with continuous batching.
//! - [`loadtest`]: a load tester for OpenAI-compatible servers, placed on the
//!   measured bandwidth.
//! - [`report`]: the report regenerated from the store, checked by the independent
//!   verifier (`tools/verify/verify.py`).
//! - [`live`]: the sampler beside runs (energy per token), `memwall sample`, the
//!   tray's live lines.
//! - [`progress`]: what a bench run reports while it runs (shared by the slices).
//! - [`predict`]: scored predictions; [`calc`]: the calculator; [`chat`]: a chat
//!   session with live TTFT and decode rate.
//!
//! Long, CPU-bound work runs on tokio's blocking pool; the caller's runtime thread
//! only waits, so it adds no load while measuring.

pub mod agree;
pub mod bench;
pub mod calc;
pub mod chat;
pub mod evidence;
pub mod frontier;
pub mod live;
pub mod loadtest;
pub mod machine_roof;
pub mod mlx_tg;
pub mod predict;
pub mod progress;
pub mod report;
pub mod serve;
pub mod speculative;

use crate::measure::{peak, stream};
use crate::store::StoreError;

/// Errors of a job: what jobs share (the guard, the store, the instruments of
/// [`crate::measure`], results files), and a slice's own error as
/// [`JobError::Slice`], so this module names no slice.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// The guard refused to start (battery, memory).
    #[error(transparent)]
    Guard(#[from] crate::measure::guard::GuardError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// STREAM failed.
    #[error(transparent)]
    Stream(#[from] stream::StreamError),
    /// GPU STREAM failed (no driver, no NVRTC, validation, an impossible rate).
    #[error(transparent)]
    GpuStream(#[from] crate::measure::gpu_stream::GpuStreamError),
    /// A compute peak failed (or was physically impossible).
    #[error(transparent)]
    Peak(#[from] peak::PeakError),
    /// A slice's own error ([`SliceError`]): a benchmark, a chat turn, the server,
    /// a speculative job, a load test, the KV verification.
    #[error(transparent)]
    Slice(Box<dyn std::error::Error + Send + Sync + 'static>),
    /// Writing results failed.
    #[error("writing results to {path}: {msg}")]
    Results {
        /// Path of the file or directory the error is about.
        path: String,
        /// What failed.
        msg: String,
    },
    /// Asked to reuse a stored bandwidth but none exists.
    #[error(
        "no stored STREAM triad for host {0}: run `memwall stream` first, or drop --reuse-stream"
    )]
    NoStoredStream(String),
    /// A background task died.
    #[error("background task failed: {0}")]
    Join(String),
}

/// A slice's error type, which `?` turns into [`JobError::Slice`] (its message and
/// source unchanged). Each slice implements it for its own error.
pub trait SliceError: std::error::Error + Send + Sync + 'static {}

impl<E: SliceError> From<E> for JobError {
    fn from(e: E) -> JobError {
        JobError::Slice(Box::new(e))
    }
}

pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, JobError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| JobError::Join(e.to_string()))
}
