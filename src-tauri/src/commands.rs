//! Tauri commands: adapters that deserialize the arguments, call [`AppState`] (and
//! through it memwall-core) and return serializable records. Long work streams its
//! progress over a typed [`Channel`] passed to each call; after a write,
//! [`events::store_changed`] tells every page (and the tray) to reload.

use crate::error::AppError;
use crate::events::{self, ChatEvent, FetchProgress, LoadProgress, Progress, UrlChatEvent};
use crate::job::JobKind;
use crate::serve::{LoadtestRequest, ServeRequest};
use crate::speculative::{SpecBenchRequest, SpecGateRequest};
use crate::state::{
    AppState, BenchRequest, ChatRequest, Exported, MachineView, ModelItem, ReportExport,
};
use memwall_core::experiments::bench::job::BenchOutcome;
use memwall_core::experiments::chat::ChatStats;
use memwall_core::experiments::loadtest::url_chat::{UrlChatRequest, UrlChatStats};
use memwall_core::experiments::loadtest::view::LoadView;
use memwall_core::experiments::machine_roof::StreamOutcome;
use memwall_core::experiments::serve::job::ServeSummary;
use memwall_core::experiments::serve::session::ServeLive;
use memwall_core::experiments::speculative::job::{GateOutcome, SpecBenchOutcome, SpecProgress};
use memwall_core::present::chart::app::AppChart;
use memwall_core::present::views::{BenchRow, CompareRow, FrontierView, RooflineView, TrayStatus};
use memwall_core::store::{RunFilter, RunSummary};
use tauri::ipc::Channel;
use tauri::{AppHandle, State};

type R<T> = Result<T, AppError>;

/// The Machine page.
#[tauri::command]
pub async fn machine(state: State<'_, AppState>) -> R<MachineView> {
    state.machine().await
}

/// Live status lines (also the tray's).
#[tauri::command]
pub async fn live(state: State<'_, AppState>) -> R<TrayStatus> {
    state.tray_status().await
}

/// Catalogue models.
#[tauri::command]
pub fn models(state: State<'_, AppState>) -> R<Vec<ModelItem>> {
    state.models()
}

/// Fetches a catalogue model; progress on `on_progress`.
#[tauri::command]
pub async fn fetch_model(
    app: AppHandle,
    state: State<'_, AppState>,
    name: String,
    on_progress: Channel<FetchProgress>,
) -> R<String> {
    let p = state
        .fetch_model(&name, move |e| {
            let _ = on_progress.send(e);
        })
        .await?;
    events::store_changed(&app);
    Ok(p.display().to_string())
}

/// A quick STREAM triad, stored.
#[tauri::command]
pub async fn measure_bandwidth(app: AppHandle, state: State<'_, AppState>) -> R<StreamOutcome> {
    let out = state.measure_bandwidth().await?;
    events::store_changed(&app);
    Ok(out)
}

/// Runs a benchmark; progress on `on_progress`.
#[tauri::command]
pub async fn run_bench(
    app: AppHandle,
    state: State<'_, AppState>,
    request: BenchRequest,
    on_progress: Channel<Progress>,
) -> R<BenchOutcome> {
    let out = state
        .run_bench(request, move |p| {
            let _ = on_progress.send(p);
        })
        .await?;
    events::store_changed(&app);
    Ok(out)
}

/// Runs the speculative correctness gate; progress on `on_progress`.
#[tauri::command]
pub async fn spec_gate(
    app: AppHandle,
    state: State<'_, AppState>,
    request: SpecGateRequest,
    on_progress: Channel<SpecProgress>,
) -> R<GateOutcome> {
    let out = state
        .spec_gate(request, move |p| {
            let _ = on_progress.send(p);
        })
        .await?;
    events::store_changed(&app);
    Ok(out)
}

/// Runs the speculative bench; progress on `on_progress`.
#[tauri::command]
pub async fn spec_bench(
    app: AppHandle,
    state: State<'_, AppState>,
    request: SpecBenchRequest,
    on_progress: Channel<SpecProgress>,
) -> R<SpecBenchOutcome> {
    let out = state
        .spec_bench(request, move |p| {
            let _ = on_progress.send(p);
        })
        .await?;
    events::store_changed(&app);
    Ok(out)
}

/// Cancels the running job of `kind`.
#[tauri::command]
pub fn cancel_job(state: State<'_, AppState>, kind: JobKind) -> bool {
    state.cancel(kind)
}

/// One chat turn; tokens and live figures on `on_event`.
#[tauri::command]
pub async fn chat_start(
    state: State<'_, AppState>,
    request: ChatRequest,
    on_event: Channel<ChatEvent>,
) -> R<ChatStats> {
    state
        .chat(request, move |e| {
            let _ = on_event.send(e);
        })
        .await
}

/// One chat turn streamed from an OpenAI-compatible URL; chunks and the figures
/// measured at the client on `on_event`. "Stop" is `chat_stop`.
#[tauri::command]
pub async fn chat_url_start(
    state: State<'_, AppState>,
    request: UrlChatRequest,
    on_event: Channel<UrlChatEvent>,
) -> R<UrlChatStats> {
    state
        .chat_url(request, move |e| {
            let _ = on_event.send(e);
        })
        .await
}

/// Starts `memwall serve` on a catalogue model (127.0.0.1).
#[tauri::command]
pub async fn serve_start(state: State<'_, AppState>, request: ServeRequest) -> R<ServeLive> {
    state.serve_start(request).await
}

/// The running server's state (null when none runs).
#[tauri::command]
pub async fn serve_state(state: State<'_, AppState>) -> R<Option<ServeLive>> {
    Ok(state.serve_live().await)
}

/// Stops the server (its port is free when this returns); its sampler series is
/// stored.
#[tauri::command]
pub async fn serve_stop(app: AppHandle, state: State<'_, AppState>) -> R<Option<ServeSummary>> {
    let out = state.serve_stop().await?;
    events::store_changed(&app);
    Ok(out)
}

/// Runs a load test against a URL; progress on `on_progress`.
#[tauri::command]
pub async fn loadtest_run(
    app: AppHandle,
    state: State<'_, AppState>,
    request: LoadtestRequest,
    on_progress: Channel<LoadProgress>,
) -> R<LoadView> {
    let out = state
        .loadtest(request, move |p| {
            let _ = on_progress.send(p);
        })
        .await?;
    events::store_changed(&app);
    Ok(out)
}

/// A stored load-test run (the latest when `run_id` is null) as the Serve page draws it.
#[tauri::command]
pub async fn loadtest_view(state: State<'_, AppState>, run_id: Option<i64>) -> R<Option<LoadView>> {
    state.loadtest_view(run_id).await
}

/// Stops the chat turn (within one token).
#[tauri::command]
pub fn chat_stop(state: State<'_, AppState>) -> bool {
    state.cancel(JobKind::Chat)
}

/// Stored runs, filtered.
#[tauri::command]
pub async fn runs(state: State<'_, AppState>, filter: RunFilter) -> R<Vec<RunSummary>> {
    state.runs(&filter).await
}

/// Rows of a run (all when `run_id` is null), each with its test label.
#[tauri::command]
pub async fn run_rows(state: State<'_, AppState>, run_id: Option<i64>) -> R<Vec<BenchRow>> {
    state.bench_rows(run_id).await
}

/// Two runs side by side.
#[tauri::command]
pub async fn compare_runs(state: State<'_, AppState>, a: i64, b: i64) -> R<Vec<CompareRow>> {
    state.compare(a, b).await
}

/// Deletes a run (the UI asks for confirmation first).
#[tauri::command]
pub async fn delete_run(app: AppHandle, state: State<'_, AppState>, id: i64) -> R<()> {
    state.delete_run(id).await?;
    events::store_changed(&app);
    Ok(())
}

/// The Roofline page's data.
#[tauri::command]
pub async fn roofline_view(state: State<'_, AppState>, run_id: Option<i64>) -> R<RooflineView> {
    state.roofline(run_id).await
}

/// The Frontier page's data.
#[tauri::command]
pub async fn frontier_view(state: State<'_, AppState>) -> R<FrontierView> {
    state.frontier().await
}

/// A plotters chart as SVG text.
#[tauri::command]
pub async fn chart_svg(
    state: State<'_, AppState>,
    chart: AppChart,
    run_id: Option<i64>,
) -> R<String> {
    state.chart_svg(chart, run_id).await
}

/// Writes the report (report.md, report.html, charts) into the exports folder and
/// returns its HTML for the History page to show.
#[tauri::command]
pub async fn export_report(state: State<'_, AppState>) -> R<ReportExport> {
    state.export_report().await
}

/// Exports a chart (PNG/SVG by extension) into the exports folder.
#[tauri::command]
pub async fn export_chart(
    state: State<'_, AppState>,
    chart: AppChart,
    run_id: Option<i64>,
    name: String,
) -> R<Exported> {
    state.export_chart(chart, run_id, &name).await
}

/// Exports rows (CSV/JSON/Markdown by extension) into the exports folder.
#[tauri::command]
pub async fn export_rows(
    state: State<'_, AppState>,
    run_id: Option<i64>,
    name: String,
) -> R<Exported> {
    state.export_rows(run_id, &name).await
}
