//! `serve_job`: what `memwall serve` (and the app) call. Checks the options, reads
//! the model with memwall's GGUF reader, checks that weights + KV cache fit in
//! memory, binds the port (so `/health` answers 503 while loading), loads the model
//! on the dedicated engine thread, then serves until shutdown.

use super::ServeError;
use super::facts::{ServedFacts, ServedRoof};
use super::http::{Access, Loaded, ServerState, router};
use super::scheduler::{
    Admission, BURST_GAP, IDLE_PASS_TOKENS, Metrics, PREFILL_CHUNK_TOKENS, SchedConfig, Scheduler,
};
use super::template::ChatTemplate;
use crate::measure::engine::llama::LlamaModelHandle;
use crate::measure::engine::{Engine, EngineConfig, EngineError, EngineKind, Model, Vocab};
use crate::measure::guard::Guard;
use crate::measure::prompt::fallback_note;
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
    /// Web page origins allowed to call the server (`--cors-origin`,
    /// `scheme://host[:port]`); a request with any other `Origin` is refused.
    pub cors_origins: Vec<String>,
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
    pub engine: EngineKind,
    /// The roof the server runs under, published at `/memwall/facts`: the stored
    /// STREAM of the memory its weights stream from ([`served_roof`]), or why none.
    pub roof: Result<ServedRoof, String>,
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
            cors_origins: Vec::new(),
            chunk: PREFILL_CHUNK_TOKENS,
            batch: IDLE_PASS_TOKENS,
            burst_gap: BURST_GAP,
            sampler: true,
            engine: EngineKind::Llama,
            roof: Err("the server's store was not asked for a STREAM measurement".into()),
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
        model_id: String,
        /// Where the chat format comes from.
        template: String,
        n_slots: u32,
        /// Context per slot, tokens.
        n_ctx_slot: u32,
    },
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
    /// Why chat prompts do not come from the file's own template, when they do not
    /// (stored in the run's notes).
    template_note: Option<String>,
    /// What stopped the server (`Ctrl-C (SIGINT)`, `SIGTERM`), stored in the run's
    /// notes.
    pub stopped_by: Option<&'static str>,
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
    let access = Access::new(opts.host, &opts.cors_origins).map_err(ServeError::Options)?;
    let started_at = crate::util::now_rfc3339();
    // MLX holds its own arrays (8-bit or f16 of a 4-bit file): sized as the engine holds them.
    let facts = ModelFacts::open_held(&opts.model, opts.engine.held_as())?;
    let kv = served_kv_type(opts.engine);
    let mut guard = Guard::begin(Default::default())?;
    guard.check_fit(&[(&facts, opts.ctx_size as u64)], kv)?;
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
        access,
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
                // llama.cpp's one context is shared by the slots (as llama-server's);
                // MLX keeps a cache per sequence, each slot's share long.
                let n_ctx = match opts.engine {
                    EngineKind::Llama => opts.ctx_size,
                    _ => opts.ctx_size / opts.parallel,
                };
                let cfg = EngineConfig {
                    n_ctx,
                    // One decode takes up to the logical batch and runs it as
                    // micro-batches of the chunk, as llama-server's -b/-ub.
                    n_batch: opts.batch.max(opts.chunk),
                    n_ubatch: opts.chunk,
                    n_threads: opts.threads,
                    n_threads_batch: opts.threads,
                    n_seq_max: opts.parallel,
                    ..EngineConfig::default()
                };
                // The tokenizer the handlers share is llama.cpp's vocabulary of the
                // file, whichever engine computes.
                let made = Model::load(opts.engine, &opts.model, &cfg)
                    .and_then(|mut m| Ok((m.tokenizer(), m.take_engine(&cfg)?)));
                let (handle, engine) = match made {
                    Ok(x) => x,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let n_ctx_slot = engine.n_ctx_seq();
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
    let template_note = template_src
        .is_none()
        .then(|| fallback_note(&opts.model.display().to_string()));
    let st = state.clone();
    let model_path = opts.model.clone();
    let engine = opts.engine;
    let roof = opts.roof.clone();
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
                    // The one prompt path: what the app's chat, spec and
                    // the task evaluations feed the model for the same messages.
                    let format = handle.chat_format()?;
                    let source = format.source();
                    if let Some(note) = format.fallback_note(&model_path.display().to_string()) {
                        on_status(ServeStatus::Warning(note));
                    }
                    let model_id = model_path
                        .file_stem()
                        .map_or("model".into(), |s| s.to_string_lossy().into_owned());
                    let mut aliases: Vec<String> = model_name.into_iter().collect();
                    if let Some(f) = model_path.file_name() {
                        aliases.push(f.to_string_lossy().into_owned());
                    }
                    aliases.push(model_path.display().to_string());
                    let published = ServedFacts::new(
                        engine.engine_name(),
                        engine.name(),
                        placement(engine),
                        &model_path.display().to_string(),
                        &facts,
                        kv,
                        n_ctx_slot,
                        roof.clone(),
                    );
                    let l = Loaded {
                        facts: published,
                        model_id: model_id.clone(),
                        aliases,
                        // llama.cpp keeps the old spelling; MLX names its arm.
                        fingerprint: match engine {
                            EngineKind::Llama => {
                                format!("memwall-{}-{}", crate::BUILD_COMMIT, source.tag())
                            }
                            e => format!(
                                "memwall-{}-{}-{}",
                                crate::BUILD_COMMIT,
                                e.name(),
                                source.tag()
                            ),
                        },
                        format,
                        tokenizer: Arc::new(handle),
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
                        template: source.tag().to_string(),
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
        template_note,
        stopped_by: None,
    })
}

/// The sampler's phase covering a session: from the model being ready to shutdown.
pub const SERVING_PHASE: &str = "serving";

/// What a finished `memwall serve` session measured beside itself.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, ts_rs::TS)]
pub struct ServeSummary {
    /// The stored `serve` run (`None` when the sampler was off: nothing is stored).
    pub run_id: Option<i64>,
    /// Tokens generated over the session, each counted as it was decoded (those of
    /// cancelled and failed requests included).
    pub tokens_predicted: u64,
    /// Mean power over the serving phase, and energy ÷ tokens generated (idle time
    /// included: the whole machine's counters over the whole session); `None` when
    /// the sampler was off or the phase never began (the model did not load).
    pub energy: Option<EnergySummary>,
}

/// The KV-cache type `engine` holds: llama.cpp's default F16 (serve sets none
/// other), MLX's activation dtype (f32 on a CPU, f16 on a GPU).
pub fn served_kv_type(engine: EngineKind) -> CacheType {
    match engine {
        EngineKind::Llama => crate::measure::engine::EngineConfig::default().type_k,
        _ => mlx_kv_type(),
    }
}

#[cfg(feature = "mlx")]
fn mlx_kv_type() -> CacheType {
    match crate::measure::engine::mlx::act_name() {
        "f16" => CacheType::F16,
        _ => CacheType::F32,
    }
}

#[cfg(not(feature = "mlx"))]
fn mlx_kv_type() -> CacheType {
    CacheType::F32
}

/// Where `engine` reads its weights from: `gpu` when llama.cpp has a GPU back end
/// (serve offloads every layer) or MLX's default device is a GPU, else `cpu`.
pub fn placement(engine: EngineKind) -> &'static str {
    let gpu = match engine {
        EngineKind::Llama => {
            let b = crate::measure::engine::llama::backends();
            b.contains("CUDA") || b.contains("Metal")
        }
        _ => mlx_on_gpu(),
    };
    if gpu { "gpu" } else { "cpu" }
}

#[cfg(feature = "mlx")]
fn mlx_on_gpu() -> bool {
    crate::measure::engine::mlx::device() == "gpu"
}

#[cfg(not(feature = "mlx"))]
fn mlx_on_gpu() -> bool {
    false
}

/// The roof a server on this host runs under: the latest stored STREAM triad of the
/// memory `engine` reads its weights from (this host's CPU STREAM, or CUDA device
/// 0's GPU STREAM), or why there is none.
pub async fn served_roof(store: &Store, engine: EngineKind) -> Result<ServedRoof, String> {
    let host = crate::probe::hw::host_info();
    let (row, device) = if placement(engine) == "gpu" {
        let devs = crate::probe::cuda::cuda_devices().map_err(|e| e.to_string())?;
        let d = devs
            .first()
            .ok_or("the engine reads from a GPU, but CUDA lists no device")?;
        let label = format!("CUDA{} {}", d.ordinal, d.name);
        (
            store
                .latest_device_triad(&host.hostname, &label)
                .await
                .map_err(|e| e.to_string())?,
            label,
        )
    } else {
        (
            store
                .latest_triad(&host.hostname, None)
                .await
                .map_err(|e| e.to_string())?,
            "cpu".to_string(),
        )
    };
    let s = row.ok_or_else(|| {
        format!(
            "no STREAM triad of {device} stored for host {} (run `memwall stream{}` before `memwall serve`)",
            host.hostname,
            if device == "cpu" { "" } else { " --gpu" }
        )
    })?;
    Ok(ServedRoof {
        device,
        kernel: s.kernel,
        gbps: s.best_gbps,
        threads: s.threads,
        stream_id: s.id,
        measured_at: s.measured_at,
        hostname: s.hostname,
    })
}

/// `memwall serve`: [`start`], then serve until Ctrl-C (SIGINT) or SIGTERM (what
/// `kill`, systemd and docker send); at either the live sampler's recording is stored
/// as a `serve` run in `store` (one transaction) and the summary returned.
///
/// # Errors
/// As [`start`], a failed load, and the store's errors.
pub async fn serve_job(
    store: &Store,
    command: &str,
    opts: ServeOptions,
    on_status: impl Fn(ServeStatus) + Send + Sync + 'static,
) -> Result<ServeSummary, ServeError> {
    let mut opts = opts;
    opts.roof = served_roof(store, opts.engine).await;
    let mut h = start(opts, on_status).await?;
    // Without a signal handler (none can be installed) only a failure ends it.
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let ended = tokio::select! {
        r = h.wait() => Some(r),
        _ = ctrl_c => {
            h.stopped_by = Some("Ctrl-C (SIGINT)");
            None
        }
        _ = sigterm() => {
            h.stopped_by = Some("SIGTERM");
            None
        }
    };
    finish(store, command, h, ended).await
}

/// Resolves when the process gets SIGTERM (never where none can be caught).
async fn sigterm() {
    #[cfg(unix)]
    if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        s.recv().await;
        return;
    }
    std::future::pending::<()>().await;
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
    let mut notes_extra: Vec<String> = h
        .stopped_by
        .map(|s| format!("stopped by {s}"))
        .into_iter()
        .collect();
    notes_extra.extend(h.template_note.clone());
    let rec = h.take_recording();
    let started_at = h.started_at.clone();
    let served = match ended {
        Some(r) => r,
        None => h.stop().await,
    };
    // Every token generated, for requests that completed, were cancelled or failed:
    // the energy of all of them is in the serving phase.
    let tokens = metrics
        .tokens_predicted_total
        .load(std::sync::atomic::Ordering::Relaxed);
    // Nothing to store without a recording, or when the model never loaded.
    let Some(mut rec) = rec.filter(|r| r.phase(SERVING_PHASE).is_some()) else {
        served?;
        return Ok(ServeSummary {
            run_id: None,
            tokens_predicted: tokens,
            energy: None,
        });
    };
    // The serving phase (ready → stop) is the server's timed window: a server's
    // J/token counts its idle time between requests too, as its electricity bill
    // does; the idle baseline is not taken (the model loads first).
    if let Some(p) = rec.phase(SERVING_PHASE).cloned() {
        rec.intervals
            .push(crate::measure::sampler::session::Interval {
                phase: SERVING_PHASE.into(),
                rep: 0,
                start_ns: p.start_ns,
                end_ns: p.end_ns,
            });
    }
    let energy = Some(rec.energy(SERVING_PHASE, tokens));
    let run = NewRun {
        kind: "serve".into(),
        started_at,
        finished_at: crate::util::now_rfc3339(),
        command: command.to_string(),
        host: crate::probe::hw::host_info(),
        notes: std::iter::once(format!("{tokens} tokens generated"))
            .chain(notes_extra)
            .collect::<Vec<_>>()
            .join("; "),
        guard: None,
    };
    // The recording is stored even when serving later ended in an error.
    let run_id = super::store::insert_serve_run(
        store,
        &run,
        &rec,
        energy.as_ref().map(|e| (SERVING_PHASE, e)),
    )
    .await?;
    served?;
    Ok(ServeSummary {
        run_id: Some(run_id),
        tokens_predicted: tokens,
        energy,
    })
}
