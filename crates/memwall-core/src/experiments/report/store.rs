//! The report's reads: every table it draws from, as plain rows, oldest first. The
//! bench rows come through [`Store::bench_rows`]; the rest are read here.

use crate::store::{Store, StoreError};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

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
    /// Its CPU.
    pub cpu_info: String,
}

/// A `stream_results` row.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct StreamRow {
    /// Store id.
    pub id: i64,
    /// Its run.
    pub run_id: i64,
    /// Machine.
    pub hostname: String,
    /// `copy`, `scale`, `add`, `triad`, `read`.
    pub kernel: String,
    /// Threads.
    pub threads: i64,
    /// Best rate, GB/s (1e9 B/s).
    pub best_gbps: f64,
}

/// A `peak_results` row.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct PeakRow {
    /// Store id.
    pub id: i64,
    /// Its run.
    pub run_id: i64,
    /// Machine.
    pub hostname: String,
    /// `f32 FMA` | `int8 dot`.
    pub kind: String,
    /// Threads.
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
    /// Its run.
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
    /// Measured KV bytes per token.
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
    /// Its run.
    pub run_id: i64,
    /// `greedy` | `sampling`.
    pub mode: String,
    /// Target file.
    pub target_file: String,
    /// Drafter key.
    pub drafter_key: String,
    /// Draft length.
    pub k: i64,
    /// Prompts gated.
    pub n_prompts: i64,
    /// Prompts in the set (`None`: coverage unknown).
    pub n_prompts_set: Option<i64>,
    /// Identical outputs.
    pub n_identical: i64,
    /// Passed.
    pub passed: bool,
}

/// A `spec_bench` row.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct SpecRow {
    /// Store id.
    pub id: i64,
    /// Its run.
    pub run_id: i64,
    /// Target file.
    pub target_file: String,
    /// `none` | `draft-model` | `ngram`.
    pub drafter_kind: String,
    /// Drafter key.
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
    /// Its run.
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
    /// The sheet.
    pub sheet_id: i64,
    /// The run scored.
    pub run_id: i64,
    /// The scorecard as stored (JSON).
    pub result_json: String,
}

/// Everything the report draws from.
#[derive(Debug, Clone, Default)]
pub struct ReportRows {
    /// `runs`.
    pub runs: Vec<RunRow>,
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

/// Reads every table the report draws from.
///
/// # Errors
/// [`StoreError`] naming the table, row and column that could not be read.
pub async fn report_rows(store: &Store) -> Result<ReportRows, StoreError> {
    let runs = rows(
        store,
        "runs",
        "SELECT id, kind, started_at, hostname, cpu_info FROM runs ORDER BY id",
    )
    .await?;
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
    let bench = store.bench_rows(&Default::default()).await?;
    Ok(ReportRows {
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
