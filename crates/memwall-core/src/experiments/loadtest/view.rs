//! A load test as the app's Serve page shows it: the stored points of one run as
//! table rows (vLLM's metrics and the bandwidth columns, exactly as stored) and the
//! run's charts as SVG; [`loadtest_view_job`] runs a test and reads its points back
//! from the store, [`stored_view_job`] reads an earlier run.

use super::chart::{LoadChart, svg_charts};
use super::job::{LoadOutcome, LoadProgress, loadtest_job};
use super::metrics::{Bandwidth, Dist, LoadPoint, TokenSource};
use super::plan::{Load, LoadPlan};
use super::store::{self as lstore, StoredPoint};
use crate::experiments::JobError;
use crate::store::Store;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// One load level as a table row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct LoadRow {
    /// `concurrency 4` or `rate 2/s (burstiness 1)`.
    pub label: String,
    /// Closed-loop clients, when closed loop.
    pub concurrency: Option<u32>,
    /// Offered requests per second, when open loop.
    pub rate_rps: Option<f64>,
    /// Measured requests sent.
    pub n_sent: u64,
    pub n_completed: u64,
    /// Refused with 429.
    pub n_rejected: u64,
    /// Failed otherwise.
    pub n_failed: u64,
    /// Output tokens per second, all requests together.
    pub output_throughput_tps: f64,
    /// Completed requests per second.
    pub request_throughput_rps: f64,
    /// Where output token counts came from.
    pub token_source: TokenSource,
    pub ttft: Dist,
    pub tpot: Dist,
    pub itl: Dist,
    pub e2el: Dist,
    /// Mean prefix-cache hits the server reported, tokens.
    pub mean_cached_tokens: Option<f64>,
    /// The bandwidth columns (implied GB/s, the stored STREAM, % of STREAM, or why not).
    pub bandwidth: Bandwidth,
    /// The first error of a failed or rejected request.
    pub first_error: Option<String>,
}

impl From<&LoadPoint> for LoadRow {
    fn from(p: &LoadPoint) -> LoadRow {
        let (concurrency, rate_rps) = match p.load {
            Load::Closed { concurrency } => (Some(concurrency as u32), None),
            Load::Open { rate_rps, .. } => (None, Some(rate_rps)),
        };
        LoadRow {
            label: p.load.label(),
            concurrency,
            rate_rps,
            n_sent: p.n_sent,
            n_completed: p.n_completed,
            n_rejected: p.n_rejected,
            n_failed: p.n_failed,
            output_throughput_tps: p.output_throughput_tps,
            request_throughput_rps: p.request_throughput_rps,
            token_source: p.token_source,
            ttft: p.ttft,
            tpot: p.tpot,
            itl: p.itl,
            e2el: p.e2el,
            mean_cached_tokens: p.mean_cached_tokens,
            bandwidth: p.bandwidth.clone(),
            first_error: p.first_error.clone(),
        }
    }
}

/// A stored load-test run as the app draws it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct LoadView {
    /// The stored run.
    pub run_id: i64,
    /// The server's base URL.
    pub url: String,
    /// The `model` the chunks named (what answered), when sent.
    pub server_model: Option<String>,
    /// The `Server` header, when sent.
    pub server_header: Option<String>,
    /// The model file behind the bandwidth columns, when known.
    pub model_file: Option<String>,
    /// One row per load level, in order.
    pub rows: Vec<LoadRow>,
    /// Latency vs throughput, percentiles vs concurrency, bandwidth vs STREAM,
    /// goodput vs rate (those the points can draw).
    pub charts: Vec<LoadChart>,
    /// The Markdown report (`memwall loadtest`'s printout), when the run was just made.
    pub report: Option<String>,
}

/// The view of one run's stored points.
///
/// # Errors
/// [`JobError::Slice`] (a `LoadtestError`) when the run has no points; chart errors.
pub fn view_of(stored: &[StoredPoint], report: Option<String>) -> Result<LoadView, JobError> {
    let first = stored
        .first()
        .ok_or_else(|| super::LoadtestError::Options("that run has no load-test points".into()))?;
    let points: Vec<LoadPoint> = stored.iter().map(|s| s.point.clone()).collect();
    let charts = svg_charts(&points).map_err(|e| JobError::Results {
        path: "<svg>".into(),
        msg: e.to_string(),
    })?;
    Ok(LoadView {
        run_id: first.run_id,
        url: first.prov.url.clone(),
        server_model: first.prov.server_model.clone(),
        server_header: first.prov.server_header.clone(),
        model_file: first.prov.model_file.clone(),
        rows: points.iter().map(LoadRow::from).collect(),
        charts,
        report,
    })
}

/// Runs a load test ([`loadtest_job`]: stored as one `loadtest` run, charts and
/// `loadtest.md` in `results_dir`), then reads its points back from the store and
/// returns them as a [`LoadView`].
///
/// # Errors
/// As [`loadtest_job`].
pub async fn loadtest_view_job(
    store: &Store,
    plan: LoadPlan,
    command: &str,
    results_dir: Option<&Path>,
    progress: Arc<dyn Fn(LoadProgress) + Send + Sync>,
) -> Result<LoadView, JobError> {
    let LoadOutcome { run_id, report, .. } =
        loadtest_job(store, plan, command, results_dir, progress).await?;
    let stored = lstore::points(store, Some(run_id)).await?;
    view_of(&stored, Some(report))
}

/// The latest stored load-test run (`run_id` `None`) or the one asked for; `None`
/// when there is none.
///
/// # Errors
/// The store's errors, chart errors.
pub async fn stored_view_job(
    store: &Store,
    run_id: Option<i64>,
) -> Result<Option<LoadView>, JobError> {
    let all = lstore::points(store, run_id).await?;
    let Some(last) = all.last().map(|p| p.run_id) else {
        return Ok(None);
    };
    let run: Vec<StoredPoint> = all.into_iter().filter(|p| p.run_id == last).collect();
    Ok(Some(view_of(&run, None)?))
}
