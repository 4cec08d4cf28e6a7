//! # memwall-core
//!
//! Everything memwall measures, stores and draws. Data flows one way:
//!
//! ```text
//! probe (hw, gguf, model) → measure (stream, peak, engine, bench) → store → present (export, chart)
//! ```
//! and [`roofline`] is pure arithmetic any stage may call.
//!
//! The decode ceiling is `achieved bandwidth ÷ bytes streamed per token`
//! ([`roofline::decode_ceiling_tps`]); prefill has a compute roof
//! ([`roofline::prefill_ceiling_tps`]).
//!
//! ```
//! use memwall_core::{roofline, units::{Bytes, Gbps}};
//! // The Day-1 lab: 120 GB/s over a 5.03 GB Q4_K_M file.
//! let tps = roofline::decode_ceiling_tps(Gbps(120.0), Bytes(5_030_000_000));
//! assert!((tps - 23.86).abs() < 0.01);
//! ```
#![deny(missing_docs)]

pub mod bench;
pub mod calc;
pub mod catalog;
pub mod chart;
pub mod chat;
pub mod datasets;
pub mod devices;
pub mod engine;
pub mod evals;
pub mod evidence;
pub mod export;
pub mod frontier;
pub mod gguf;
pub mod guard;
pub mod hw;
pub mod jobs;
pub mod model;
pub mod peak;
pub mod predict;
pub mod quant;
pub mod roofline;
pub mod shape;
pub mod spec;
pub mod store;
pub mod stream;
pub mod synth;
pub mod testing;
pub mod units;
pub mod util;
pub mod views;

/// memwall's git commit at build time (`-dirty` when the tree had changes).
pub const BUILD_COMMIT: &str = env!("MEMWALL_GIT_COMMIT");

/// memwall's build number: the number of commits in its history at build time (`git
/// rev-list --count HEAD`, how llama.cpp numbers its builds). `None` when git could
/// not count them (no git, or a shallow clone, whose count would be too small).
pub fn build_number() -> Option<i64> {
    env!("MEMWALL_BUILD_NUMBER").parse().ok()
}
