//! KV-cache bytes per token, measured directly from the engine.
//!
//! Method: in a fresh context, prefill `n` tokens into sequence 0 and read the size
//! of that sequence's serialized state (`llama_state_seq_get_size`); repeat with
//! `2n` tokens. The difference divided by `n` is the state's growth per token, in
//! which constant overheads (headers, RNG, layer descriptors) cancel. llama.cpp's
//! state writes, per cached cell and per KV cache, the cell's position, its
//! sequence count and its sequence id (3 × 4 bytes; `llama_kv_cache::state_write_meta`
//! in llama-kv-cache.cpp) before the K/V rows, so the KV payload per token is the
//! growth minus that metadata. Sliding-window layers keep only their window of
//! cells, so with `n` and `2n` beyond the window only full-attention layers grow.
//!
//! The wrong method, shown beside it: peak process RSS from just before the context
//! is created until a prefill of `n` tokens ends, divided by `n` (a context sized for
//! exactly `n` tokens, weights already paged in). Besides the cache it counts the
//! compute (activation) buffers, which scale with the prompt length, so it overstates
//! the cache; and memory the allocator reuses from earlier work in the same process
//! (a previous, larger model's freed buffers) never shows up as growth, so after such
//! work it can understate it (`memwall kv verify` over four models: 0.60× to 11.5×).

use crate::measure::engine::{Engine, EngineError};
use crate::probe::model::{CacheType, ModelFacts};
use serde::{Deserialize, Serialize};

/// Bytes of per-cell metadata llama.cpp writes per cached token per KV cache
/// (`pos: i32`, `n_seq_id: u32`, `seq_id: i32`; llama-kv-cache.cpp `state_write_meta`).
pub const STATE_META_BYTES_PER_CELL: u64 = 12;

/// One KV verification: predicted vs measured bytes per token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvVerify {
    /// File name of the GGUF model.
    pub model: String,
    /// Cache type of K and V.
    pub cache_type: String,
    /// Tokens in the first state (the second has 2n).
    pub n: u64,
    /// Formula: growth of the cache from n to 2n tokens, per token (sliding-window aware).
    pub predicted_bytes_per_token: f64,
    /// Formula at full attention, all layers: 2 × layers × kv_heads × head_dim × bytes.
    pub formula_bytes_per_token: u64,
    /// Sequence state size after n tokens.
    pub state_n: u64,
    /// Sequence state size after 2n tokens.
    pub state_2n: u64,
    /// (state_2n − state_n) ÷ n.
    pub measured_state_bytes_per_token: f64,
    /// Cell metadata in that growth: caches that grew × [`STATE_META_BYTES_PER_CELL`].
    pub metadata_bytes_per_token: f64,
    /// measured − metadata: the K/V payload per token.
    pub measured_kv_bytes_per_token: f64,
    /// measured_kv ÷ predicted (goal 1.000 for full-attention models).
    pub ratio: f64,
    /// Peak-RSS growth during a prefill of n tokens, ÷ n (the wrong method). None when the
    /// OS does not expose peak RSS.
    pub rss_bytes_per_token: Option<f64>,
    /// rss ÷ predicted.
    pub rss_ratio: Option<f64>,
}

/// Peak resident set size of this process (Linux `VmHWM`).
pub fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|k| k * 1024)
}

/// Resets the peak RSS to the current RSS (Linux: write 5 to `/proc/self/clear_refs`).
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Peak-RSS growth per token across creating a context with `make` and prefilling
/// `n` tokens into it (the wrong method). `None` when the OS has no peak-RSS counter.
///
/// # Errors
/// Engine errors from `make` or the prefill.
pub fn rss_growth_per_token<E: Engine>(
    make: impl FnOnce() -> Result<E, EngineError>,
    n: u64,
) -> Result<Option<f64>, EngineError> {
    let ok = reset_peak_rss();
    let before = peak_rss_bytes();
    let mut e = make()?;
    let vocab = e.n_vocab() as i32;
    let toks: Vec<i32> = (0..n as i32)
        .map(|i| 1 + (i * 7919) % (vocab - 1))
        .collect();
    e.prefill(&toks, 0, 0, true)?;
    e.synchronize();
    let after = peak_rss_bytes();
    Ok(match (ok, before, after) {
        (true, Some(b), Some(a)) => Some(a.saturating_sub(b) as f64 / n as f64),
        _ => None,
    })
}

/// Runs the direct measurement on `engine` (a fresh context with room for `2n` tokens
/// and `n_batch ≥ n`), whose model is described by `facts`, with cache type `cache`;
/// `rss_bytes_per_token` comes from [`rss_growth_per_token`] (the caller runs it in
/// its own context).
///
/// # Errors
/// Engine errors, or [`EngineError::Unsupported`] when the engine cannot report state sizes.
pub fn verify<E: Engine>(
    engine: &mut E,
    facts: &ModelFacts,
    cache: CacheType,
    n: u64,
    rss_bytes_per_token: Option<f64>,
) -> Result<KvVerify, EngineError> {
    let vocab = engine.n_vocab() as i32;
    // Deterministic filler tokens (their identity does not change the cache size).
    let toks: Vec<i32> = (0..2 * n as i32)
        .map(|i| 1 + (i * 7919) % (vocab - 1))
        .collect();
    engine.kv_clear();
    engine.prefill(&toks[..n as usize], 0, 0, true)?;
    engine.synchronize();
    let state_n = engine.seq_state_bytes(0)?;
    engine.kv_clear();
    engine.prefill(&toks, 0, 0, true)?;
    engine.synchronize();
    let state_2n = engine.seq_state_bytes(0)?;
    let predicted = (facts.kv_bytes_read_at_depth(2 * n, cache).0 as f64
        - facts.kv_bytes_read_at_depth(n, cache).0 as f64)
        / n as f64;
    // Which caches gained cells between n and 2n: the full-attention cache always; the
    // sliding-window cache only while 2n is within its window.
    let any_global = facts.swa_layers.is_empty() || facts.swa_layers.iter().any(|l| !l);
    let any_swa = facts.swa_layers.iter().any(|l| *l);
    let swa_grows = facts.sliding_window.is_some_and(|w| 2 * n <= w);
    let caches_growing = any_global as u64 + (any_swa && swa_grows) as u64;
    let meta = (caches_growing * STATE_META_BYTES_PER_CELL) as f64;
    let measured = (state_2n as f64 - state_n as f64) / n as f64;
    let kv = measured - meta;
    Ok(KvVerify {
        model: facts.path.display().to_string(),
        cache_type: cache.name().into(),
        n,
        predicted_bytes_per_token: predicted,
        formula_bytes_per_token: facts.kv_bytes_per_token(cache).0,
        state_n,
        state_2n,
        measured_state_bytes_per_token: measured,
        metadata_bytes_per_token: meta,
        measured_kv_bytes_per_token: kv,
        ratio: kv / predicted,
        rss_bytes_per_token,
        rss_ratio: rss_bytes_per_token.map(|r| r / predicted),
    })
}
