//! Roofline evidence: experiments that test the ceilings instead of assuming them.
//!
//! - [`kv`]: KV-cache bytes per token measured from the engine's own state size.
//! - [`batch`]: batching amortizes the weight read (per-token-read bandwidth above
//!   STREAM is impossible unless weights are shared).
//! - [`depth`]: decode slowdown with depth split into the KV-bytes part and the rest.
//! - [`threads`]: achievable bandwidth depends on who asks (implied bandwidth per
//!   thread count, beside STREAM at that thread count).
//! - [`floor`]: the per-token floor, `t = t0 + bytes ÷ BW_eff`, fitted per format.
//! - [`ceilings`]: each decode rate under the triad ceiling and the read-kernel
//!   ceiling, and which of the two it sits closer to.
//!
//! Batch, depth, thread and ceiling analyses are computed from stored bench rows only;
//! [`analyses`] decides which of them apply to a set of rows.
//! [`store`] holds the `kv_verify_results` table's SQL.

pub mod analyses;
pub mod batch;
pub mod ceilings;
pub mod chart;
pub mod depth;
pub mod floor;
pub mod kv;
pub mod store;
pub mod threads;

pub use store::store_kv_run;

/// Errors of the KV verification ([`kv_verify_job`], [`run_kv_verify`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvidenceError {
    /// An option is out of range; the message names the flag.
    #[error("invalid benchmark plan: {0}")]
    Plan(String),
    /// The guard refused: battery power, or the model does not fit in memory.
    #[error(transparent)]
    Guard(#[from] crate::measure::guard::GuardError),
    /// The model file could not be read.
    #[error(transparent)]
    Model(#[from] crate::probe::gguf::GgufError),
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] crate::measure::engine::EngineError),
}

impl crate::experiments::SliceError for EvidenceError {}

/// What `memwall kv verify` (and any other adapter) asks of [`kv_verify_job`].
#[derive(Debug, Clone)]
pub struct KvVerifyOptions {
    /// GGUF files to verify.
    pub models: Vec<std::path::PathBuf>,
    /// KV cache types to verify each model with.
    pub caches: Vec<crate::probe::model::CacheType>,
    /// Tokens per measuring step: the state is read after `n` and `2n` cached tokens
    /// (at least 16).
    pub n: u64,
    /// Engine threads.
    pub threads: u32,
    /// Battery and memory overrides.
    pub guard: crate::measure::guard::GuardOptions,
    /// The command as typed, for provenance.
    pub command: String,
}

/// A finished KV verification: the stored run, its rows and what the guard saw.
#[derive(Debug, Clone)]
pub struct KvVerifyOutcome {
    /// The stored `kv` run.
    pub run_id: i64,
    /// One row per (model, cache type).
    pub rows: Vec<kv::KvVerify>,
    /// The guard's findings over the whole run.
    pub guard: crate::measure::guard::GuardReport,
}

/// The `kv verify` job: checks the options and the guard, runs [`run_kv_verify`] on
/// tokio's blocking pool, and stores the rows with the run in one transaction.
/// `progress` gets one line per (model, cache type) as it starts.
///
/// # Errors
/// [`crate::experiments::JobError`]: bad options (`n` below 16, no model or cache
/// type), the guard's refusal, model or engine errors, the store; on error nothing
/// is stored.
#[cfg(feature = "llama")]
pub async fn kv_verify_job(
    store: &crate::store::Store,
    opts: KvVerifyOptions,
    mut progress: impl FnMut(&str) + Send + 'static,
) -> Result<KvVerifyOutcome, crate::experiments::JobError> {
    if opts.n < 16 {
        return Err(
            EvidenceError::Plan(format!("-n {}: must be at least 16 tokens", opts.n)).into(),
        );
    }
    if opts.models.is_empty() || opts.caches.is_empty() {
        return Err(EvidenceError::Plan(
            "kv verify needs at least one model and one cache type".into(),
        )
        .into());
    }
    let started_at = crate::util::now_rfc3339();
    let mut guard = crate::measure::guard::Guard::begin(opts.guard)?;
    let (models, caches, n, threads) = (opts.models, opts.caches, opts.n, opts.threads);
    let (rows, guard) = crate::experiments::blocking(move || {
        let rows = run_kv_verify(&models, &caches, n, threads, &mut guard, &mut |m| {
            progress(m)
        });
        rows.map(|r| (r, guard.finish()))
    })
    .await??;
    let run = crate::store::NewRun {
        kind: "kv".into(),
        started_at,
        finished_at: crate::util::now_rfc3339(),
        command: opts.command,
        host: crate::probe::hw::host_info(),
        notes: String::new(),
        guard: Some(guard.clone()),
    };
    let run_id = store_kv_run(store, &run, &rows).await?;
    Ok(KvVerifyOutcome {
        run_id,
        rows,
        guard,
    })
}

/// Runs the KV verification for each model and cache type on llama.cpp: a fresh
/// context per (model, cache type) with room for `2n` tokens; `guard` checks each
/// model fits before it is loaded.
///
/// # Errors
/// Model or engine errors, naming the model.
#[cfg(feature = "llama")]
pub fn run_kv_verify(
    models: &[std::path::PathBuf],
    caches: &[crate::probe::model::CacheType],
    n: u64,
    threads: u32,
    guard: &mut crate::measure::guard::Guard,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<kv::KvVerify>, EvidenceError> {
    use crate::measure::engine::{Engine, EngineConfig, EngineKind, Model};
    let mut out = Vec::new();
    for path in models {
        let facts = crate::probe::model::ModelFacts::open(path)?;
        guard.check_fit(&[(&facts, 2 * n + 64)], crate::probe::model::CacheType::F16)?;
        let cfg = |c, n_ctx: u64| EngineConfig {
            n_ctx: n_ctx as u32,
            n_batch: n_ctx as u32,
            n_ubatch: 512,
            n_threads: threads,
            n_threads_batch: threads,
            n_gpu_layers: 0,
            n_seq_max: 1,
            type_k: c,
            type_v: c,
            flash_attn: None,
            repack: true,
            split: Default::default(),
            kv_unified: false,
        };
        let warm = cfg(crate::probe::model::CacheType::F16, 64);
        let mut model = Model::load(EngineKind::Llama, path, &warm)?;
        // Page the memory-mapped weights in first, so RSS growth is not weight paging.
        {
            let mut w = model.take_engine(&warm)?;
            w.prefill(&[1, 2, 3, 4, 5, 6, 7, 8], 0, 0, true)?;
        }
        for &c in caches {
            progress(&format!("{} ({})", facts.label(), c.name()));
            let rss = kv::rss_growth_per_token(|| model.take_engine(&cfg(c, n)), n)?;
            let mut e = model.take_engine(&cfg(c, 2 * n + 64))?;
            out.push(kv::verify(&mut e, &facts, c, n, rss)?);
        }
    }
    Ok(out)
}
