//! # memwall-core
//!
//! Everything memwall measures, stores and draws. Data flows one way, through five
//! stage folders in this order; a stage never imports a later one (checked by
//! `tests/layout.rs`):
//!
//! ```text
//! probe ─→ measure ─→ store ─→ present ─→ experiments
//! what the   the         SQLite,    exports,    slices: plan → run → record →
//! machine    instruments the shared charts,     store → chart → job (the one
//! and model  (STREAM,    record     views       call per CLI command or app
//! are        peak, engine,                      command)
//!            evals, guard)
//! ```
//! [`roofline`] is pure arithmetic over model facts and units that any stage may
//! call; [`units`] and [`util`] are leaves. Test support (the GGUF fuzzer, models,
//! locks, throwaway PostgreSQL clusters) is the `memwall-testkit` crate, no part of
//! this API.
//!
//! - [`probe`]: hardware, the GGUF reader, model facts, shapes, synthetic models,
//!   catalogues.
//! - [`measure`]: STREAM, compute peaks, engines, statistics, evaluations, guards.
//! - [`store`]: the SQLite handle, every SQL statement, and the shared record
//!   (`BenchRecord` with its column roles).
//! - [`present`]: exporters, charts, the app's and tray's views.
//! - [`experiments`]: roof, bench, evidence, speculative, frontier, loadtest, predict, calc,
//!   chat.
//!
//! The decode ceiling is `achieved bandwidth ÷ bytes streamed per token`
//! ([`roofline::decode_ceiling_tps`]); prefill has a compute roof
//! ([`roofline::prefill_ceiling_tps`]).
//!
//! ```
//! use memwall_core::{roofline, units::{Bytes, Gbps}};
//! // 120 GB/s over a 5.03 GB Q4_K_M file.
//! let tps = roofline::decode_ceiling_tps(Gbps(120.0), Bytes(5_030_000_000));
//! assert!((tps - 23.86).abs() < 0.01);
//! ```

pub mod roofline;
pub mod units;
pub mod util;

pub mod experiments;
pub mod measure;
pub mod present;
pub mod probe;
pub mod store;

#[cfg(test)]
mod testing;

/// memwall's git commit at build time (`-dirty` when the tree had changes).
pub const BUILD_COMMIT: &str = env!("MEMWALL_GIT_COMMIT");

/// memwall's build number: the number of commits in its history at build time (`git
/// rev-list --count HEAD`, how llama.cpp numbers its builds). `None` when git could
/// not count them (no git, or a shallow clone, whose count would be too small).
pub fn build_number() -> Option<i64> {
    env!("MEMWALL_BUILD_NUMBER").parse().ok()
}
