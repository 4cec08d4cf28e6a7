//! The Serve page's operations and the chat page's URL mode, through core's jobs:
//! [`serve_start_job`] / [`ServeSession::live`] / [`serve_stop_job`] (`memwall
//! serve` in the app's process, bound to 127.0.0.1), [`loadtest_view_job`] and
//! [`stored_view_job`] (`memwall loadtest`, read back from the store), and
//! [`url_chat_job`] (one chat turn streamed from an OpenAI-compatible URL).

use crate::error::AppError;
use crate::job::JobKind;
use crate::state::AppState;
use memwall_core::experiments::loadtest::job::LoadProgress;
use memwall_core::experiments::loadtest::plan::{Endpoint, Load, LoadPlan, Slo, Target, Workload};
use memwall_core::experiments::loadtest::url_chat::{
    UrlChatEvent, UrlChatRequest, UrlChatStats, url_chat_job,
};
use memwall_core::experiments::loadtest::view::{LoadView, loadtest_view_job, stored_view_job};
use memwall_core::experiments::serve::job::{ServeOptions, ServeSummary};
use memwall_core::experiments::serve::session::{ServeLive, serve_start_job, serve_stop_job};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A server to start from the Serve page (it binds 127.0.0.1 only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct ServeRequest {
    /// Catalogue model name.
    pub model: String,
    /// Slots (`--parallel`).
    pub parallel: u32,
    /// Waiting requests at most (`--queue`).
    pub queue: u32,
    /// Port (`--port`; 0 picks a free one).
    pub port: u16,
    /// Context per slot, tokens (`--ctx-size` is this × slots); `None`: 1024.
    pub ctx_per_slot: Option<u32>,
    /// Engine (`--engine`): `llama`, `mlx-4bit`, `mlx-8bit`, `mlx-f16`; `None`: llama.
    pub engine: Option<String>,
}

/// A load test to run from the Serve page, closed loop (`memwall loadtest`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct LoadtestRequest {
    /// Base URL of any OpenAI-compatible server.
    pub url: String,
    /// `model` of the requests; `None` or empty: the first id `/v1/models` lists.
    pub model: Option<String>,
    /// Bearer key, when the server wants one.
    pub api_key: Option<String>,
    /// Concurrency levels (`--concurrency`).
    pub concurrency: Vec<u32>,
    /// Measured requests per level (`--num-requests`).
    pub num_requests: u32,
    /// Prompt words (`--input-tokens`).
    pub input_tokens: u32,
    /// `max_tokens` of each request (`--output-tokens`).
    pub output_tokens: u32,
    /// Catalogue model the server runs, for the bandwidth columns; `None`: the
    /// Serve page's own server's file when the URL is its, else matched from the
    /// server's model ids.
    pub model_file: Option<String>,
}

/// Default context per slot, tokens.
pub const CTX_PER_SLOT: u32 = 1024;

impl AppState {
    /// Starts `memwall serve` on a catalogue model, bound to 127.0.0.1; returns
    /// once bound (the model loads in the background: [`AppState::serve_live`]).
    ///
    /// # Errors
    /// [`AppError::Invalid`] when a server already runs or the model is not
    /// fetched; [`AppError::Job`] for bad options (naming the flag), the guard, a
    /// port in use.
    pub async fn serve_start(&self, r: ServeRequest) -> Result<ServeLive, AppError> {
        let mut slot = self.serve_slot().0.lock().await;
        if let Some(s) = slot.as_ref() {
            return Err(AppError::Invalid(format!(
                "a server already runs at {}: stop it first",
                s.live().url
            )));
        }
        let mut o = ServeOptions::new(self.model_path(&r.model)?);
        o.model_name = Some(r.model.clone());
        o.parallel = r.parallel;
        o.queue = r.queue;
        o.port = r.port;
        o.ctx_size = r
            .ctx_per_slot
            .unwrap_or(CTX_PER_SLOT)
            .saturating_mul(r.parallel.max(1));
        if let Some(e) = &r.engine {
            o.engine = memwall_core::experiments::bench::BenchEngine::parse(e)
                .map_err(|e| AppError::Invalid(e.to_string()))?;
        }
        let s = serve_start_job(self.store().await?, o).await?;
        let live = s.live();
        *slot = Some(s);
        Ok(live)
    }

    /// The running server's state (`None` when none runs).
    pub async fn serve_live(&self) -> Option<ServeLive> {
        self.serve_slot().0.lock().await.as_ref().map(|s| s.live())
    }

    /// Stops the server (its port is free when this returns) and stores its
    /// sampler series as a `serve` run; `None` when none ran.
    ///
    /// # Errors
    /// [`AppError::Job`]: the session's own error (a model that failed to load),
    /// the store's.
    pub async fn serve_stop(&self) -> Result<Option<ServeSummary>, AppError> {
        let Some(s) = self.serve_slot().0.lock().await.take() else {
            return Ok(None);
        };
        let store = self.store().await?;
        let cmd = format!(
            "app: serve {} --host 127.0.0.1 --port {}",
            s.live().model_file.display(),
            s.addr().port()
        );
        Ok(Some(serve_stop_job(store, &cmd, s).await?))
    }

    /// Runs a closed-loop load test and stores it; charts and `loadtest.md` go to
    /// `results/loadtest-<UTC time>/` under the exports folder.
    ///
    /// # Errors
    /// [`AppError::Busy`], [`AppError::Invalid`] (a model name that is not fetched),
    /// [`AppError::Job`] (options naming the field, an unreachable server, a level
    /// whose requests all failed).
    pub async fn loadtest(
        &self,
        r: LoadtestRequest,
        progress: impl Fn(LoadProgress) + Send + Sync + 'static,
    ) -> Result<LoadView, AppError> {
        let model_file = match r.model_file.as_deref().filter(|m| !m.is_empty()) {
            Some(name) => Some(self.model_path(name)?),
            None => self.serve_live().await.and_then(|l| {
                let same = l.url.trim_end_matches('/') == r.url.trim().trim_end_matches('/');
                same.then_some(l.model_file)
            }),
        };
        let plan = LoadPlan {
            target: Target {
                url: r.url.trim().to_string(),
                model: r.model.clone().filter(|m| !m.trim().is_empty()),
                api_key: r.api_key.clone().filter(|k| !k.is_empty()),
                endpoint: Endpoint::Chat,
                timeout_s: 300.0,
            },
            workload: Workload {
                input_tokens: r.input_tokens as usize,
                output_tokens: r.output_tokens as usize,
                shared_prefix_tokens: 0,
                ignore_eos: true,
                seed: 1,
            },
            loads: r
                .concurrency
                .iter()
                .map(|&c| Load::Closed {
                    concurrency: c as usize,
                })
                .collect(),
            num_requests: r.num_requests as usize,
            duration_s: None,
            warmup: 1,
            slo: Slo::default(),
            model_file,
            sampler: true,
            // The app load-tests memwall serve, which publishes its own roof and KV type.
            roof: Default::default(),
            cache_type: None,
        };
        let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let command = format!(
            "app: loadtest --url {} --concurrency {} --num-requests {} --input-tokens {} --output-tokens {}",
            r.url,
            list(&r.concurrency),
            r.num_requests,
            r.input_tokens,
            r.output_tokens
        );
        let stamp = memwall_core::util::now_rfc3339().replace([':', '-'], "");
        let dir = self
            .exports_dir()
            .join("results")
            .join(format!("loadtest-{stamp}"));
        let _g = self.start_job(JobKind::Loadtest)?;
        let store = self.store().await?;
        Ok(loadtest_view_job(store, plan, &command, Some(&dir), Arc::new(progress)).await?)
    }

    /// A stored load-test run as the Serve page draws it (the latest when `run_id`
    /// is `None`; `None` when there is none).
    ///
    /// # Errors
    /// [`AppError::Job`] (the store, charts).
    pub async fn loadtest_view(&self, run_id: Option<i64>) -> Result<Option<LoadView>, AppError> {
        Ok(stored_view_job(self.store().await?, run_id).await?)
    }

    /// One chat turn streamed from an OpenAI-compatible URL, timed at the client;
    /// holds the chat slot, so "Stop" (`chat_stop`) ends it.
    ///
    /// # Errors
    /// [`AppError::Busy`], [`AppError::Job`] (a bad URL, an unreachable or
    /// non-OpenAI server, an HTTP error with the server's message).
    pub async fn chat_url(
        &self,
        r: UrlChatRequest,
        on_event: impl FnMut(UrlChatEvent) + Send + 'static,
    ) -> Result<UrlChatStats, AppError> {
        let g = self.start_job(JobKind::Chat)?;
        Ok(url_chat_job(r, g.cancel.clone(), on_event).await?)
    }
}
