//! Stage 2, **measure**: the instruments. Each returns typed results and writes
//! nothing to the store and draws nothing.
//!
//! - [`stream`]: STREAM copy/scale/add/triad and the read kernel; [`peak`]: compute
//!   peaks with their plausibility bounds.
//! - [`gpu_stream`]: STREAM on an NVIDIA GPU (CUDA events, NVRTC kernels);
//!   [`peer_copy`]: GPU-to-GPU copy bandwidth and small-copy time per pair.
//! - [`engine`]: the `Engine` trait and llama.cpp behind it.
//! - [`stats`]: `Sample` (mean, std, MAD outliers) and intervals.
//! - [`evals`]: perplexity, KL divergence and task accuracy, with the code sandbox.
//! - [`prompt`]: chat messages to tokens, the one path every command takes (the
//!   GGUF's Jinja template, one BOS, special tokens parsed in the template's text only).
//! - [`sampler`]: live machine state (power, energy, temperatures, clocks, memory,
//!   swap, DRAM bandwidth) read at ≥ 10 Hz beside a run.
//! - [`guard`]: the preconditions every measuring command checks (power, thermal
//!   state, swap, memory capacity); [`warning`]: the caveats a measurement carries.
//!
//! Imports only [`crate::probe`], [`crate::roofline`], [`crate::units`] and [`crate::util`].

pub mod engine;
pub mod evals;
pub mod gpu_stream;
pub mod guard;
pub mod peak;
pub mod peer_copy;
pub mod prompt;
pub mod sampler;
pub mod stats;
pub mod stream;
pub mod warning;
