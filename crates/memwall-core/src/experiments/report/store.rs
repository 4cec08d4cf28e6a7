//! The report's reads: every table it draws from, as plain rows, oldest first. The
//! bench rows come through [`Store::bench_rows`]; the rest are read here.

use crate::store::host::HostKey;
use crate::store::{Store, StoreError};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use std::collections::BTreeMap;

/// A `runs` row, as the report's table of contents and host list need it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct RunRow {
    /// Store id.
    pub id: i64,
    /// `bench`, `stream`, `spec-gate`, …
    pub kind: String,
    /// UTC RFC 3339.
    pub started_at: String,
    /// Machine that measured it.
    pub hostname: String,
    pub cpu_info: String,
    /// Logical CPUs of its machine.
    pub cores_logical: i64,
    /// Its machine's facts (`HostInfo` as JSON; the GPU list is read from it).
    pub host_json: String,
}

/// A `stream_results` row.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct StreamRow {
    /// Store id.
    pub id: i64,
    pub run_id: i64,
    /// Machine.
    pub hostname: String,
    /// `copy`, `scale`, `add`, `triad`, `read`.
    pub kernel: String,
    pub threads: i64,
    /// Best rate, GB/s (1e9 B/s).
    pub best_gbps: f64,
}

/// A `peak_results` row.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct PeakRow {
    /// Store id.
    pub id: i64,
    pub run_id: i64,
    /// Machine.
    pub hostname: String,
    /// `f32 FMA` | `int8 dot`.
    pub kind: String,
    pub threads: i64,
    /// Measured GFLOP/s (GOP/s).
    pub gflops: f64,
    /// Plausibility bound (cores × clock × lanes × ops × ports); `None` for rows
    /// stored before bounds were recorded.
    pub bound_gflops: Option<f64>,
}

/// A `kv_verify_results` row.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct KvRow {
    /// Store id.
    pub id: i64,
    pub run_id: i64,
    /// Model file.
    pub model_filename: String,
    /// KV cache type.
    pub cache_type: String,
    /// Tokens in the first state.
    pub n: i64,
    /// Formula bytes per token, all layers.
    pub formula_bytes_per_token: i64,
    /// Formula, sliding-window aware, growth n → 2n.
    pub predicted_bytes_per_token: f64,
    /// State size after n tokens.
    pub state_n: i64,
    /// State size after 2n tokens.
    pub state_2n: i64,
    /// State growth per token, n → 2n.
    pub measured_state_bytes_per_token: f64,
    /// Cell metadata per token.
    pub metadata_bytes_per_token: f64,
    pub measured_kv_bytes_per_token: f64,
    /// Measured ÷ predicted.
    pub ratio: f64,
    /// Peak-RSS growth per token (the wrong method, shown beside).
    pub rss_bytes_per_token: Option<f64>,
    /// RSS ÷ predicted.
    pub rss_ratio: Option<f64>,
}

/// A `spec_gates` row.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct GateRow {
    /// Store id.
    pub id: i64,
    pub run_id: i64,
    /// `greedy` | `sampling`.
    pub mode: String,
    pub target_file: String,
    pub drafter_key: String,
    /// Draft length.
    pub k: i64,
    /// Prompts gated.
    pub n_prompts: i64,
    /// Prompts in the set (`None`: coverage unknown).
    pub n_prompts_set: Option<i64>,
    /// Identical outputs.
    pub n_identical: i64,
    pub passed: bool,
}

/// A `spec_bench` row.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct SpecRow {
    /// Store id.
    pub id: i64,
    pub run_id: i64,
    pub target_file: String,
    /// `none` | `draft-model` | `ngram`.
    pub drafter_kind: String,
    pub drafter_key: String,
    /// Draft length (0: target only).
    pub k: i64,
    /// `--k auto`'s choice.
    pub k_auto: bool,
    /// `json` | `code` | `prose`.
    pub category: String,
    /// Decode tok/s, mean over repetitions (`None` for decision rows).
    pub tps_mean: Option<f64>,
    /// Speedup over target-only, mean of per-repetition ratios.
    pub speedup_mean: Option<f64>,
    /// Cost model's prediction.
    pub predicted_speedup: Option<f64>,
    /// Accepted ÷ drafted.
    pub acceptance_rate: Option<f64>,
    /// The unlocking gate.
    pub gate_id: Option<i64>,
    /// A decision instead of a measurement.
    pub decision: Option<String>,
}

/// A `frontier_cells` row.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct FrontierRow {
    /// Store id.
    pub id: i64,
    pub run_id: i64,
    /// Machine.
    pub hostname: String,
    /// Source model file.
    pub source_file: String,
    /// Arm's quantization.
    pub arm_quant: String,
    /// Weight bytes read per decode step.
    pub arm_streamed_bytes: i64,
    /// `speed` | `ppl:<dataset>` | `task:<name>`.
    pub measure: String,
    /// Cell identity (measure and settings).
    pub config_key: String,
    /// Headline value.
    pub value: Option<f64>,
    /// Its uncertainty.
    pub value_unc: Option<f64>,
}

/// A `prediction_scores` row.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ScoreRow {
    pub sheet_id: i64,
    /// The run scored.
    pub run_id: i64,
    /// The scorecard as stored (JSON).
    pub result_json: String,
}

/// A `loadtest_points` row: one load level of a load test.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct LoadtestRow {
    /// Store id.
    pub id: i64,
    /// Store id of the run.
    pub run_id: i64,
    /// Machine that measured it.
    pub hostname: String,
    /// Target server URL.
    pub url: String,
    /// `/v1/chat/completions` or `/v1/completions`.
    pub endpoint: String,
    /// `closed` (concurrency) or `open` (rate).
    pub mode: String,
    /// Clients in flight (closed loop).
    pub concurrency: Option<i64>,
    /// Request rate (open loop).
    pub rate_rps: Option<f64>,
    /// Prompt tokens per request.
    pub input_tokens: i64,
    /// Requested output tokens per request.
    pub output_tokens: i64,
    /// Tokens of a prefix shared by every request.
    pub shared_prefix_tokens: i64,
    /// Requests sent.
    pub n_sent: i64,
    /// Requests completed.
    pub n_completed: i64,
    /// Requests the server refused (429).
    pub n_rejected: i64,
    /// Output tokens per second over the level.
    pub output_throughput_tps: f64,
    pub ttft_median_ms: Option<f64>,
    pub tpot_median_ms: Option<f64>,
    pub itl_median_ms: Option<f64>,
    pub e2el_median_ms: Option<f64>,
    /// Requests per second within the SLO.
    pub goodput_rps: Option<f64>,
    /// Output tok/s × bytes per token, GB/s.
    pub implied_gbps: Option<f64>,
    /// Implied ÷ STREAM, %.
    pub pct_of_stream: Option<f64>,
    /// Why a bandwidth column is empty.
    pub bandwidth_note: Option<String>,
    /// The model the server reported.
    pub server_model: Option<String>,
}

/// A `row_energy` row (the live sampler's figures for one bench row) with the bench
/// row's labels.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct EnergyRow {
    /// The bench row (`bench_results.id`).
    pub row_id: i64,
    /// Store id of the run.
    pub run_id: i64,
    /// Machine that measured it.
    pub hostname: String,
    /// Model type label.
    pub model_type: String,
    /// Prompt tokens of the test.
    pub n_prompt: i64,
    /// Generated tokens of the test.
    pub n_gen: i64,
    /// Parallel sequences.
    pub n_seqs: i64,
    /// Depth (tokens already cached).
    pub n_depth: i64,
    /// Measured tok/s.
    pub avg_ts: f64,
    /// Sampler readings in the phase.
    pub samples: i64,
    pub mean_power_w: Option<f64>,
    /// Energy over the phase, J.
    pub energy_j: Option<f64>,
    /// Energy per token, J.
    pub j_per_token: Option<f64>,
    /// 3600 ÷ J/token.
    pub tokens_per_wh: Option<f64>,
    /// The counter that gave the energy.
    pub energy_source: String,
    /// Why a figure is missing.
    pub reason: Option<String>,
    /// Peak temperature, °C.
    pub peak_temp_c: Option<f64>,
    /// 1 when the clock dropped while hot.
    pub throttled: Option<i64>,
    /// Live DRAM bandwidth from an uncore counter, GB/s.
    pub live_dram_gbps: Option<f64>,
    /// GPU memory-controller utilisation, %.
    pub gpu_mem_util_pct: Option<f64>,
    /// tok/s × bytes per token, GB/s.
    pub implied_bandwidth_gbps: Option<f64>,
}

/// A frontier speed cell with its tg row's energy (`row_energy` of the cell's run's
/// decode row; all energy fields NULL when the cell has no energy row).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct FrontierEnergyRow {
    /// The cell (`frontier_cells.id`).
    pub id: i64,
    pub run_id: i64,
    /// Machine.
    pub hostname: String,
    /// Source model file.
    pub source_file: String,
    /// Arm's quantization.
    pub arm_quant: String,
    /// Weight bytes read per decode step.
    pub arm_streamed_bytes: i64,
    /// Decode tok/s (the cell's value).
    pub value: Option<f64>,
    /// The tg bench row with an energy row (`row_energy.row_id`).
    pub energy_row_id: Option<i64>,
    /// Energy per generated token, J.
    pub j_per_token: Option<f64>,
    /// 3600 ÷ J/token.
    pub tokens_per_wh: Option<f64>,
    /// Mean power over the tg phase, W.
    pub mean_power_w: Option<f64>,
    /// The counters the energy sums.
    pub energy_source: Option<String>,
    /// Why a figure is missing.
    pub reason: Option<String>,
    /// Sampler counters stored with the cell's run (0: measured without the sampler).
    pub n_counters: i64,
}

/// Everything the report draws from.
#[derive(Debug, Clone, Default)]
pub struct ReportRows {
    pub runs: Vec<RunRow>,
    /// The machine of each run (by run id), from its stored host facts: machines
    /// are told apart by hostname, CPU, logical cores and GPUs, not hostname alone.
    pub hosts: BTreeMap<i64, HostKey>,
    /// `stream_results`.
    pub stream: Vec<StreamRow>,
    /// `peak_results`.
    pub peaks: Vec<PeakRow>,
    /// `bench_results`.
    pub bench: Vec<crate::store::record::BenchRecord>,
    /// `kv_verify_results`.
    pub kv: Vec<KvRow>,
    /// `spec_gates`.
    pub gates: Vec<GateRow>,
    /// `spec_bench`.
    pub spec: Vec<SpecRow>,
    /// `frontier_cells`.
    pub frontier: Vec<FrontierRow>,
    /// `prediction_scores`.
    pub scores: Vec<ScoreRow>,
    /// `loadtest_points`.
    pub loadtest: Vec<LoadtestRow>,
    /// `row_energy` joined with its bench row.
    pub energy: Vec<EnergyRow>,
    /// Frontier speed cells with their tg row's energy.
    pub frontier_energy: Vec<FrontierEnergyRow>,
}

async fn all(store: &Store, sql: &'static str) -> Result<Vec<SqliteRow>, StoreError> {
    sqlx::query(sql)
        .fetch_all(store.pool())
        .await
        .map_err(|e| store.sql(e))
}

/// Every row `sql` returns from `table`, decoded by column name; a value that does
/// not decode is an error naming the table, the row id and the column.
async fn rows<T: for<'r> sqlx::FromRow<'r, SqliteRow>>(
    store: &Store,
    table: &'static str,
    sql: &'static str,
) -> Result<Vec<T>, StoreError> {
    all(store, sql)
        .await?
        .iter()
        .map(|r| {
            T::from_row(r).map_err(|e| StoreError::Decode {
                path: store.path().display().to_string(),
                table,
                id: r.try_get::<i64, _>("id").unwrap_or(-1),
                problem: e.to_string(),
            })
        })
        .collect()
}

/// The machine of each run; a `host_json` that does not read is an error naming the
/// run.
fn run_hosts(store: &Store, runs: &[RunRow]) -> Result<BTreeMap<i64, HostKey>, StoreError> {
    runs.iter()
        .map(|r| {
            HostKey::of_run(&r.hostname, &r.cpu_info, r.cores_logical, &r.host_json)
                .map(|k| (r.id, k))
                .map_err(|problem| StoreError::Decode {
                    path: store.path().display().to_string(),
                    table: "runs",
                    id: r.id,
                    problem: format!("{problem}: the run's machine cannot be told apart from others (fix or delete the run)"),
                })
        })
        .collect()
}

impl ReportRows {
    /// The label of the machine run `run_id` was measured on; `fallback` (the row's
    /// own hostname) for a run the store does not hold.
    pub fn host(&self, run_id: i64, fallback: &str) -> String {
        self.hosts
            .get(&run_id)
            .map_or_else(|| fallback.to_string(), HostKey::label)
    }
}

/// Reads every table the report draws from.
///
/// # Errors
/// [`StoreError`] naming the table, row and column that could not be read.
pub async fn report_rows(store: &Store) -> Result<ReportRows, StoreError> {
    let runs: Vec<RunRow> = rows(
        store,
        "runs",
        "SELECT id, kind, started_at, hostname, cpu_info, cores_logical, host_json FROM runs ORDER BY id",
    )
    .await?;
    let hosts = run_hosts(store, &runs)?;
    let stream = rows(
        store,
        "stream_results",
        "SELECT id, run_id, hostname, kernel, threads, best_gbps FROM stream_results ORDER BY id",
    )
    .await?;
    let peaks = rows(
        store,
        "peak_results",
        "SELECT id, run_id, hostname, kind, threads, gflops, bound_gflops FROM peak_results ORDER BY id",
    )
    .await?;
    let kv = rows(
        store,
        "kv_verify_results",
        "SELECT * FROM kv_verify_results ORDER BY id",
    )
    .await?;
    let gates = rows(store, "spec_gates", "SELECT * FROM spec_gates ORDER BY id");
    let gates = gates.await?;
    let spec = rows(store, "spec_bench", "SELECT * FROM spec_bench ORDER BY id");
    let spec = spec.await?;
    let frontier = rows(
        store,
        "frontier_cells",
        "SELECT id, run_id, hostname, source_file, arm_quant, arm_streamed_bytes, measure, config_key, value, value_unc FROM frontier_cells ORDER BY id",
    )
    .await?;
    let scores = rows(
        store,
        "prediction_scores",
        "SELECT sheet_id, run_id, result_json FROM prediction_scores ORDER BY sheet_id, run_id",
    )
    .await?;
    let loadtest = rows(
        store,
        "loadtest_points",
        "SELECT id, run_id, hostname, url, endpoint, mode, concurrency, rate_rps, input_tokens, output_tokens, shared_prefix_tokens, n_sent, n_completed, n_rejected, output_throughput_tps, ttft_median_ms, tpot_median_ms, itl_median_ms, e2el_median_ms, goodput_rps, implied_gbps, pct_of_stream, bandwidth_note, server_model FROM loadtest_points ORDER BY id",
    )
    .await?;
    let energy = rows(
        store,
        "row_energy",
        "SELECT e.row_id, e.run_id, b.hostname, b.model_type, b.n_prompt, b.n_gen, b.n_seqs, b.n_depth, b.avg_ts, e.samples, e.mean_power_w, e.energy_j, e.j_per_token, e.tokens_per_wh, e.energy_source, e.reason, e.peak_temp_c, e.throttled, e.live_dram_gbps, e.gpu_mem_util_pct, e.implied_bandwidth_gbps FROM row_energy e JOIN bench_results b ON b.id = e.row_id ORDER BY e.row_id",
    )
    .await?;
    let frontier_energy = rows(
        store,
        "frontier_cells",
        "SELECT c.id, c.run_id, c.hostname, c.source_file, c.arm_quant, c.arm_streamed_bytes, c.value,
                e.row_id AS energy_row_id, e.j_per_token, e.tokens_per_wh, e.mean_power_w, e.energy_source, e.reason,
                (SELECT COUNT(*) FROM sampler_counters s WHERE s.run_id = c.run_id) AS n_counters
         FROM frontier_cells c
         LEFT JOIN row_energy e ON e.run_id = c.run_id AND e.row_id = (
             SELECT MAX(b.id) FROM bench_results b JOIN row_energy e2 ON e2.row_id = b.id
             WHERE b.run_id = c.run_id AND b.n_prompt = 0 AND b.n_gen > 0)
         WHERE c.measure = 'speed' ORDER BY c.id",
    )
    .await?;
    let bench = store.bench_rows(&Default::default()).await?;
    Ok(ReportRows {
        frontier_energy,
        hosts,
        loadtest,
        energy,
        runs,
        stream,
        peaks,
        bench,
        kv,
        gates,
        spec,
        frontier,
        scores,
    })
}
