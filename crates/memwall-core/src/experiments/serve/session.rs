//! A server the app starts, watches and stops from its window: [`serve_start_job`]
//! starts `memwall serve` in the app's own process (the same [`start`] the CLI
//! runs), [`ServeSession::live`] reads its state from the routes' own counters (the
//! numbers `/metrics` prints, [`snapshot`]), and [`serve_stop_job`] stops it, frees
//! its port, and stores the session's sampler series like `memwall serve` does at
//! Ctrl-C.

use super::http::{MetricsSnapshot, snapshot};
use super::job::{ServeHandle, ServeOptions, ServeStatus, ServeSummary, finish, start};
use crate::experiments::JobError;
use crate::store::Store;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Where a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum ServePhase {
    /// Bound; the model is loading (`/health` answers 503).
    Loading,
    /// Serving (`/health` answers 200).
    Ready,
    /// The server ended by itself (the model failed to load): stopping it shows why.
    Ended,
}

/// A running session's state, read from the server's own counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct ServeLive {
    /// Base URL clients use (`http://127.0.0.1:PORT`).
    pub url: String,
    /// The GGUF served.
    pub model_file: PathBuf,
    /// When it was started, UTC RFC 3339.
    pub started_at: String,
    /// Loading, ready or ended.
    pub phase: ServePhase,
    /// The model id `/v1/models` lists, once loaded.
    pub model_id: Option<String>,
    /// Where the chat format comes from (`gguf` or `builtin:NAME`), once loaded.
    pub template: Option<String>,
    /// Slots (`--parallel`).
    pub n_slots: u32,
    /// Context per slot, tokens, once loaded.
    pub n_ctx_slot: Option<u32>,
    /// The admission queue's bound (`--queue`).
    pub queue_capacity: u32,
    /// The counters `/metrics` prints, read now.
    pub metrics: MetricsSnapshot,
    /// What the server warned about while starting.
    pub warnings: Vec<String>,
}

#[derive(Debug, Default)]
struct Log {
    ready: Option<(String, String, u32)>,
    warnings: Vec<String>,
}

/// A server started by [`serve_start_job`].
pub struct ServeSession {
    handle: ServeHandle,
    model_file: PathBuf,
    queue_capacity: u32,
    log: Arc<Mutex<Log>>,
}

impl ServeSession {
    /// The state now: phase, slots busy, queue depth, requests served, and the
    /// prompt and predicted token rates, from the same reads as `/metrics`.
    pub fn live(&self) -> ServeLive {
        let st = self.handle.state();
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let phase = if self.handle.is_finished() {
            ServePhase::Ended
        } else if st.loaded.get().is_some() {
            ServePhase::Ready
        } else {
            ServePhase::Loading
        };
        ServeLive {
            url: format!("http://{}", self.handle.addr),
            model_file: self.model_file.clone(),
            started_at: self.handle.started_at.clone(),
            phase,
            model_id: log.ready.as_ref().map(|r| r.0.clone()),
            template: log.ready.as_ref().map(|r| r.1.clone()),
            n_slots: st.n_slots as u32,
            n_ctx_slot: log.ready.as_ref().map(|r| r.2),
            queue_capacity: self.queue_capacity,
            metrics: snapshot(st),
            warnings: log.warnings.clone(),
        }
    }

    /// The bound address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.handle.addr
    }
}

/// Starts a server on `opts` (checks, binds, loads in the background) and returns
/// once it is bound; [`ServeSession::live`] says when the model is ready. The roof it
/// publishes comes from `store` ([`super::job::served_roof`]).
///
/// # Errors
/// [`super::ServeError`] for bad options (naming the flag), a malformed model file, a
/// model that does not fit in memory, a port already in use.
pub async fn serve_start_job(
    store: &crate::store::Store,
    mut opts: ServeOptions,
) -> Result<ServeSession, JobError> {
    opts.roof = super::job::served_roof(store, opts.engine).await;
    let log = Arc::new(Mutex::new(Log::default()));
    let l2 = log.clone();
    let model_file = opts.model.clone();
    let queue_capacity = opts.queue;
    let handle = start(opts, move |s| {
        let mut l = l2.lock().unwrap_or_else(|p| p.into_inner());
        match s {
            ServeStatus::Warning(w) => l.warnings.push(w),
            ServeStatus::Listening(_) => {}
            ServeStatus::Ready {
                model_id,
                template,
                n_ctx_slot,
                ..
            } => l.ready = Some((model_id, template, n_ctx_slot)),
        }
    })
    .await?;
    Ok(ServeSession {
        handle,
        model_file,
        queue_capacity,
        log,
    })
}

/// Stops `session`: running requests end, the port is released, and the sampler's
/// series is stored as a `serve` run (as `memwall serve` does at Ctrl-C).
///
/// # Errors
/// The session's own error (a model that failed to load), the store's errors.
pub async fn serve_stop_job(
    store: &Store,
    command: &str,
    session: ServeSession,
) -> Result<ServeSummary, JobError> {
    let mut h = session.handle;
    let ended = if h.is_finished() {
        Some(h.wait().await)
    } else {
        None
    };
    Ok(finish(store, command, h, ended).await?)
}
