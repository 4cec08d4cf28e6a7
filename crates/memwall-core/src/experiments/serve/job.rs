//! `serve_job`: what `memwall serve` (and the app) call. Checks the options, reads
//! the model with memwall's GGUF reader, checks that weights + KV cache fit in
//! memory, binds the port (so `/health` answers 503 while loading), loads the model
//! on the dedicated engine thread, then serves until shutdown.

use super::ServeError;
use super::http::{Loaded, PromptTokenizer, Prompter, ServerState, router};
use super::scheduler::{
    Admission, BURST_GAP, IDLE_PASS_TOKENS, Metrics, PREFILL_CHUNK_TOKENS, SchedConfig, Scheduler,
};
use super::template::{ChatTemplate, FALLBACK_TEMPLATE, TemplateSource};
use crate::experiments::bench::BenchEngine;
use crate::measure::engine::llama::LlamaModelHandle;
use crate::measure::engine::{ChatMessage, EngineConfig, EngineError, TokenId};
use crate::measure::guard::Guard;
use crate::measure::sampler::MachineSampler;
use crate::measure::sampler::session::{DEFAULT_HZ, EnergySummary, Recording, SamplerSession};
use crate::probe::model::{CacheType, ModelFacts};
use crate::store::{NewRun, Store};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

/// Options of `memwall serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The GGUF file.
    pub model: PathBuf,
    /// The name the model was asked for by (a catalogue name), accepted as `model`.
    pub model_name: Option<String>,
    /// Slots (`--parallel`), ≥ 1.
    pub parallel: u32,
    /// Waiting requests at most (`--queue`).
    pub queue: u32,
    /// Context of all slots together, tokens (`--ctx-size`; each slot gets
    /// `ctx_size / parallel`, as llama-server).
    pub ctx_size: u32,
    /// Threads (`--threads`), ≥ 1.
    pub threads: u32,
    /// Address to bind (`--host`, default 127.0.0.1).
    pub host: IpAddr,
    /// Port (`--port`; 0 picks a free one).
    pub port: u16,
    /// Required Bearer key (`--api-key`).
    pub api_key: Option<String>,
    /// Tokens fed per step while any request decodes ([`PREFILL_CHUNK_TOKENS`]).
    pub chunk: u32,
    /// Tokens fed by a step in which no request decodes (`--batch-size`,
    /// [`IDLE_PASS_TOKENS`]; llama-server's `-b`).
    pub batch: u32,
    /// Requests reaching an idle server this close together start in one pass
    /// (`--burst-gap-ms`, [`BURST_GAP`]).
    pub burst_gap: std::time::Duration,
    /// Run the live sampler while serving (power, temperature, bandwidth as a time
    /// series; stored by [`serve_job`] at shutdown).
    pub sampler: bool,
    /// The engine (`--engine`): llama.cpp, or MLX at 4, 8 or 16 bits (feature `mlx`);
    /// the same scheduler batches either one's slots.
    pub engine: BenchEngine,
}

impl ServeOptions {
    /// Defaults for `model`: 4 slots, queue 64, 8192 tokens of context, all cores,
    /// 127.0.0.1:8080.
    pub fn new(model: PathBuf) -> ServeOptions {
        ServeOptions {
            model,
            model_name: None,
            parallel: 4,
            queue: 64,
            ctx_size: 8192,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            host: IpAddr::from([127, 0, 0, 1]),
            port: 8080,
            api_key: None,
            chunk: PREFILL_CHUNK_TOKENS,
            batch: IDLE_PASS_TOKENS,
            burst_gap: BURST_GAP,
            sampler: true,
            engine: BenchEngine::Llama,
        }
    }

    fn check(&self) -> Result<(), ServeError> {
        let bad = |m: String| Err(ServeError::Options(m));
        if self.parallel == 0 || self.parallel > 256 {
            return bad(format!("--parallel {}: use 1..=256 slots", self.parallel));
        }
        if self.threads == 0 {
            return bad("--threads 0: use at least 1".into());
        }
        if self.ctx_size / self.parallel < 64 {
            return bad(format!(
                "--ctx-size {} over --parallel {} leaves {} tokens per slot: use at least 64 per slot",
                self.ctx_size,
                self.parallel,
                self.ctx_size / self.parallel
            ));
        }
        if self.burst_gap > std::time::Duration::from_secs(1) {
            return bad(format!(
                "--burst-gap-ms {}: use 0..=1000 ms",
                self.burst_gap.as_secs_f64() * 1e3
            ));
        }
        if !(512..=65536).contains(&self.batch) {
            return bad(format!(
                "--batch-size {}: use 512..=65536 tokens (one pass when no request decodes)",
                self.batch
            ));
        }
        if self.chunk < self.parallel + 1 {
            return bad(format!(
                "chunk {} must exceed --parallel {} (each step feeds one token per decoding slot)",
                self.chunk, self.parallel
            ));
        }
        Ok(())
    }
}

/// What the server reports while it starts and runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ServeStatus {
    /// Something the user should know (e.g. binding beyond loopback).
    Warning(String),
    /// Bound; `/health` answers 503 until [`ServeStatus::Ready`].
    Listening(SocketAddr),
    /// The model is loaded and requests are served.
    Ready {
        /// Model id.
        model_id: String,
        /// Where the chat format comes from.
        template: String,
        /// Slots.
        n_slots: u32,
        /// Context per slot, tokens.
        n_ctx_slot: u32,
    },
}

struct Tok(LlamaModelHandle);

impl PromptTokenizer for Tok {
    fn tokenize(&self, text: &str, add_special: bool) -> Result<Vec<TokenId>, EngineError> {
        self.0.tokenize(text, add_special)
    }
    fn bos(&self) -> Option<TokenId> {
        self.0.bos()
    }
    fn builtin_template(
        &self,
        name: &str,
        messages: &[ChatMessage],
    ) -> Result<String, EngineError> {
        self.0.apply_builtin_template(Some(name), messages)
    }
}

/// Loads `opts.model` into MLX at `opts.engine`'s precision with `n_ctx_slot`
/// positions per sequence, and llama.cpp's vocabulary of the same file.
#[cfg(feature = "mlx")]
fn load_mlx(
    opts: &ServeOptions,
    n_ctx_slot: u32,
) -> Result<(LlamaModelHandle, crate::measure::engine::mlx::MlxEngine), EngineError> {
    use crate::measure::engine::mlx::{MlxEngine, MlxQuant};
    let quant = match opts.engine {
        BenchEngine::Mlx8bit => MlxQuant::Q8,
        BenchEngine::MlxF16 => MlxQuant::F16,
        _ => MlxQuant::Q4,
    };
    let engine = MlxEngine::load(&opts.model, quant, n_ctx_slot, opts.batch.max(opts.chunk))?;
    Ok((LlamaModelHandle::load_vocab_only(&opts.model)?, engine))
}

/// Without the `mlx` feature an MLX engine is refused before anything loads.
#[cfg(not(feature = "mlx"))]
fn load_mlx(
    _opts: &ServeOptions,
    _n_ctx_slot: u32,
) -> Result<(LlamaModelHandle, crate::measure::engine::llama::LlamaEngine), EngineError> {
    Err(EngineError::Unsupported(
        "this memwall was built without the MLX engine: run scripts/setup-mlx.sh, then build with `--features mlx`",
    ))
}

/// A running server ([`start`]).
pub struct ServeHandle {
    /// The bound address.
    pub addr: SocketAddr,
    /// When it was started, UTC RFC 3339.
    pub started_at: String,
    sampler: Option<SamplerSession>,
    state: Arc<ServerState>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<Result<(), ServeError>>,
}

impl ServeHandle {
    /// The routes' shared state (for tests: slots busy, queue length).
    pub fn state(&self) -> &Arc<ServerState> {
        &self.state
    }

    /// Stops accepting, ends running requests, and waits for the engine thread.
    ///
    /// # Errors
    /// [`ServeError`] when serving failed.
    pub async fn stop(mut self) -> Result<(), ServeError> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.wait().await
    }

    /// Waits until the server ends (a load failure or [`ServeHandle::stop`]).
    ///
    /// # Errors
    /// [`ServeError`].
    pub async fn wait(&mut self) -> Result<(), ServeError> {
        (&mut self.server)
            .await
            .map_err(|e| ServeError::Io(format!("server task: {e}")))?
    }

    /// Stops the live sampler (when it ran) and hands back its recording: one phase,
    /// [`SERVING_PHASE`], from the model being ready to now.
    pub fn take_recording(&mut self) -> Option<Recording> {
        self.sampler.take().map(SamplerSession::stop)
    }

    /// Whether the server has ended (a failed load, or after a stop); its result is
    /// what [`ServeHandle::wait`] returns.
    pub fn is_finished(&self) -> bool {
        self.server.is_finished()
    }

    /// Asks the server to stop (see [`ServeHandle::stop`]).
    pub fn request_stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Starts a server: checks, binds, and loads the model in the background. Returns
/// once bound.
///
/// # Errors
/// [`ServeError`] for bad options, a malformed model file, a model that does not fit
/// in memory, or a port that cannot be bound.
pub async fn start(
    opts: ServeOptions,
    on_status: impl Fn(ServeStatus) + Send + Sync + 'static,
) -> Result<ServeHandle, ServeError> {
    opts.check()?;
    let started_at = crate::util::now_rfc3339();
    // MLX holds its own arrays (8-bit or f16 of a 4-bit file): sized as the engine holds them.
    let facts = ModelFacts::open_held(&opts.model, opts.engine.held_as())?;
    let mut guard = Guard::begin(Default::default())?;
    guard.check_fit(&[(&facts, opts.ctx_size as u64)], CacheType::F16)?;
    drop(guard);
    let template_src = ChatTemplate::source_of(&opts.model)?;
    if !opts.host.is_loopback() {
        on_status(ServeStatus::Warning(format!(
            "binding to {}: any host that can reach this machine can use the server{}",
            opts.host,
            if opts.api_key.is_some() {
                ""
            } else {
                " (no --api-key set)"
            }
        )));
    }
    let addr = SocketAddr::new(opts.host, opts.port);
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        ServeError::Io(format!(
            "cannot bind {addr}: {e} (another server on that port? pick one with --port)"
        ))
    })?;
    let addr = listener
        .local_addr()
        .map_err(|e| ServeError::Io(e.to_string()))?;
    on_status(ServeStatus::Listening(addr));

    let admission = Arc::new(Admission::new(opts.queue as usize));
    let metrics = Arc::new(Metrics::default());
    let state = Arc::new(ServerState::new(
        admission.clone(),
        metrics.clone(),
        opts.api_key.clone(),
        opts.parallel as usize,
    ));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (ready_tx, ready_rx) =
        tokio::sync::oneshot::channel::<Result<(LlamaModelHandle, u32), EngineError>>();

    // The engine thread: loads, then runs the scheduler until shutdown.
    let engine_thread = {
        let admission = admission.clone();
        let metrics = metrics.clone();
        let opts = opts.clone();
        std::thread::Builder::new()
            .name("memwall-serve-engine".into())
            .spawn(move || {
                let sched = |n_ctx_slot| SchedConfig {
                    n_slots: opts.parallel as usize,
                    n_ctx_slot,
                    chunk: opts.chunk,
                    batch: opts.batch,
                    burst_gap: opts.burst_gap,
                };
                if opts.engine != BenchEngine::Llama {
                    // MLX: the model in MLX arrays, the tokenizer from llama.cpp's
                    // vocabulary of the same file; each slot's cache holds its share.
                    let n_ctx_slot = opts.ctx_size / opts.parallel;
                    match load_mlx(&opts, n_ctx_slot) {
                        Ok((handle, engine)) => {
                            let _ = ready_tx.send(Ok((handle, n_ctx_slot)));
                            Scheduler::new(engine, sched(n_ctx_slot), metrics).run(&admission);
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                    return;
                }
                let made = LlamaModelHandle::load(&opts.model, 999).and_then(|h| {
                    let cfg = EngineConfig {
                        n_ctx: opts.ctx_size,
                        // One decode takes up to the logical batch and runs it
                        // as micro-batches of the chunk, as llama-server's -b/-ub.
                        n_batch: opts.batch.max(opts.chunk),
                        n_ubatch: opts.chunk,
                        n_threads: opts.threads,
                        n_threads_batch: opts.threads,
                        n_seq_max: opts.parallel,
                        ..EngineConfig::default()
                    };
                    let e = h.engine(&cfg)?;
                    Ok((h, e))
                });
                let (handle, engine) = match made {
                    Ok(x) => x,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                use crate::measure::engine::Engine;
                let n_ctx_slot = engine.n_ctx() / opts.parallel;
                let _ = ready_tx.send(Ok((handle, n_ctx_slot)));
                let mut s = Scheduler::new(engine, sched(n_ctx_slot), metrics);
                s.run(&admission);
            })
            .map_err(|e| ServeError::Io(format!("cannot start the engine thread: {e}")))?
    };

    let sampler = opts
        .sampler
        .then(|| SamplerSession::start(MachineSampler::detect(), DEFAULT_HZ));
    let marker = sampler.as_ref().map(|s| s.marker());
    let st = state.clone();
    let model_path = opts.model.clone();
    let engine = opts.engine;
    let model_name = opts.model_name.clone();
    let server = tokio::spawn(async move {
        let app = router(st.clone());
        let adm = admission.clone();
        let (load_fail_tx, load_fail_rx) = tokio::sync::oneshot::channel::<()>();
        let serving = axum::serve(listener, app).with_graceful_shutdown(async move {
            tokio::select! {
                _ = stop_rx => {}
                // A dropped sender means the model loaded: keep serving.
                Ok(()) = load_fail_rx => {}
            }
            adm.shutdown();
        });
        let loader = async {
            let r = ready_rx
                .await
                .map_err(|_| ServeError::Io("the engine thread ended while loading".into()))
                .and_then(|r| r.map_err(ServeError::from));
            match r {
                Ok((handle, n_ctx_slot)) => {
                    let (bos, eos) = handle.bos_eos();
                    let (prompter, source) = match &template_src {
                        Some(src) => (
                            Prompter::Jinja(ChatTemplate::new(
                                src,
                                &handle.token_text(bos),
                                &handle.token_text(eos),
                            )?),
                            TemplateSource::Gguf,
                        ),
                        None => (
                            Prompter::Builtin(FALLBACK_TEMPLATE),
                            TemplateSource::Builtin(FALLBACK_TEMPLATE),
                        ),
                    };
                    if let TemplateSource::Builtin(n) = source {
                        on_status(ServeStatus::Warning(format!(
                            "{} has no tokenizer.chat_template: chat uses llama.cpp's built-in `{n}` format",
                            model_path.display()
                        )));
                    }
                    let model_id = model_path
                        .file_stem()
                        .map_or("model".into(), |s| s.to_string_lossy().into_owned());
                    let mut aliases: Vec<String> = model_name.into_iter().collect();
                    if let Some(f) = model_path.file_name() {
                        aliases.push(f.to_string_lossy().into_owned());
                    }
                    aliases.push(model_path.display().to_string());
                    let l = Loaded {
                        model_id: model_id.clone(),
                        aliases,
                        // llama.cpp keeps the old spelling; MLX names its arm.
                        fingerprint: match engine {
                            BenchEngine::Llama => {
                                format!("memwall-{}-{}", crate::BUILD_COMMIT, source.tag())
                            }
                            e => format!(
                                "memwall-{}-{}-{}",
                                crate::BUILD_COMMIT,
                                e.name(),
                                source.tag()
                            ),
                        },
                        prompter,
                        tokenizer: Arc::new(Tok(handle)),
                        n_ctx_slot,
                        created: std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_secs()),
                    };
                    let _ = st.loaded.set(Arc::new(l));
                    if let Some(m) = &marker {
                        m.mark(SERVING_PHASE);
                    }
                    on_status(ServeStatus::Ready {
                        model_id,
                        template: source.tag(),
                        n_slots: st.n_slots as u32,
                        n_ctx_slot,
                    });
                    Ok(())
                }
                Err(e) => Err(e),
            }
        };
        let (served, loaded) = tokio::join!(async { serving.await }, async {
            let r = loader.await;
            if r.is_err() {
                let _ = load_fail_tx.send(());
            }
            r
        });
        admission.shutdown();
        let _ = tokio::task::spawn_blocking(move || engine_thread.join()).await;
        loaded?;
        served.map_err(|e| ServeError::Io(format!("serving: {e}")))
    });
    Ok(ServeHandle {
        addr,
        started_at,
        sampler,
        state,
        shutdown: Some(stop_tx),
        server,
    })
}

/// The sampler's phase covering a session: from the model being ready to shutdown.
pub const SERVING_PHASE: &str = "serving";

/// What a finished `memwall serve` session measured beside itself.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, ts_rs::TS)]
pub struct ServeSummary {
    /// The stored `serve` run (`None` when the sampler was off: nothing is stored).
    pub run_id: Option<i64>,
    /// Tokens generated over the session.
    pub tokens_predicted: u64,
    /// Mean power over the serving phase, and energy ÷ tokens generated (idle time
    /// included: the whole machine's counters over the whole session); `None` when
    /// the sampler was off or the phase never began (the model did not load).
    pub energy: Option<EnergySummary>,
}

/// `memwall serve`: [`start`], then serve until Ctrl-C; at shutdown the live
/// sampler's recording is stored as a `serve` run in `store` (one transaction).
///
/// # Errors
/// As [`start`], a failed load, and the store's errors.
pub async fn serve_job(
    store: &Store,
    command: &str,
    opts: ServeOptions,
    on_status: impl Fn(ServeStatus) + Send + Sync + 'static,
) -> Result<ServeSummary, ServeError> {
    let mut h = start(opts, on_status).await?;
    // Without a signal handler (none can be installed) only a failure ends it.
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let ended = tokio::select! {
        r = h.wait() => Some(r),
        _ = ctrl_c => None,
    };
    finish(store, command, h, ended).await
}

/// Ends a session: stops `h` (unless it already `ended`, with that result), then
/// stores the live sampler's recording as a `serve` run in `store` (one transaction)
/// when the sampler ran and the model had loaded. The summary's energy is the
/// serving phase's (ready → now), divided among the tokens generated.
///
/// # Errors
/// The session's own error (after its recording is stored), the store's errors.
pub async fn finish(
    store: &Store,
    command: &str,
    mut h: ServeHandle,
    ended: Option<Result<(), ServeError>>,
) -> Result<ServeSummary, ServeError> {
    let metrics = h.state().metrics.clone();
    let rec = h.take_recording();
    let started_at = h.started_at.clone();
    let served = match ended {
        Some(r) => r,
        None => h.stop().await,
    };
    let tokens = metrics
        .tokens_predicted_total
        .load(std::sync::atomic::Ordering::Relaxed);
    // Nothing to store without a recording, or when the model never loaded.
    let Some(rec) = rec.filter(|r| r.phase(SERVING_PHASE).is_some()) else {
        served?;
        return Ok(ServeSummary {
            run_id: None,
            tokens_predicted: tokens,
            energy: None,
        });
    };
    let energy = rec.phase(SERVING_PHASE).map(|p| {
        let span = p.end_ns.saturating_sub(p.start_ns);
        rec.summary(p, span, tokens)
    });
    let run = NewRun {
        kind: "serve".into(),
        started_at,
        finished_at: crate::util::now_rfc3339(),
        command: command.to_string(),
        host: crate::probe::hw::host_info(),
        notes: format!("{tokens} tokens generated"),
        guard: None,
    };
    // The recording is stored even when serving later ended in an error.
    let run_id = super::store::insert_serve_run(store, &run, &rec).await?;
    served?;
    Ok(ServeSummary {
        run_id: Some(run_id),
        tokens_predicted: tokens,
        energy,
    })
}
