//! The frontier's tables: `frontier_cells` (one row per measured cell) and
//! `frontier_items` (a task cell's items). A cell is written in one transaction with
//! its `runs` row and bench rows, so a killed run leaves no partial cell.

use super::{ArmInfo, CellContext, FrontierCell, FrontierError, NewCell, config_key};
use crate::store::{NewRun, Store};
use sqlx::Row;

/// The latest stored cell with this identity.
///
/// # Errors
/// Store errors.
pub async fn find_cell(
    store: &Store,
    arm_sha256: &str,
    measure: &str,
    key: &str,
) -> Result<Option<FrontierCell>, FrontierError> {
    let row = sqlx::query(
        "SELECT id, run_id, arm_quant, measure, value, value_unc, ci_low, ci_high, n, result_json, config_json, finished_at
         FROM frontier_cells WHERE arm_sha256 = ? AND measure = ? AND config_key = ? ORDER BY id DESC LIMIT 1",
    )
    .bind(arm_sha256)
    .bind(measure)
    .bind(key)
    .fetch_optional(store.pool())
    .await
    .map_err(|e| store.sql(e))?;
    Ok(row.map(|r| FrontierCell {
        id: r.get("id"),
        run_id: r.get("run_id"),
        arm_quant: r.get("arm_quant"),
        measure: r.get("measure"),
        value: r.get("value"),
        value_unc: r.get("value_unc"),
        ci_low: r.get("ci_low"),
        ci_high: r.get("ci_high"),
        n: r.get("n"),
        result: serde_json::from_str(r.get::<&str, _>("result_json"))
            .unwrap_or(serde_json::Value::Null),
        config: serde_json::from_str(r.get::<&str, _>("config_json"))
            .unwrap_or(serde_json::Value::Null),
        finished_at: r.get("finished_at"),
    }))
}

/// Count of stored cells (all sources).
///
/// # Errors
/// Store errors.
pub async fn count_cells(store: &Store) -> Result<i64, FrontierError> {
    sqlx::query_scalar("SELECT COUNT(*) FROM frontier_cells")
        .fetch_one(store.pool())
        .await
        .map_err(|e| store.sql(e).into())
}

/// The engine build a cell is measured with: MLX's and the arm for an MLX arm
/// (`mlx 0.32.2 (mlx-rs 0.33.0, cpu), mlx-8bit`), llama.cpp's otherwise.
fn cell_engine_build(a: &super::quant::Arm) -> String {
    #[cfg(feature = "mlx")]
    if a.mlx_engine().is_some() {
        return format!(
            "{}, {}",
            crate::measure::engine::mlx::engine_build(),
            a.quant
        );
    }
    #[cfg(not(feature = "mlx"))]
    let _ = a;
    crate::measure::engine::engine_build()
}

/// Stores one cell with its run, bench rows and items in one transaction.
pub(super) async fn store_cell(
    cx: &CellContext<'_>,
    arm: &ArmInfo,
    mut c: NewCell,
) -> Result<i64, FrontierError> {
    let store = cx.store;
    let finished = crate::util::now_rfc3339();
    let run = NewRun {
        kind: "frontier".into(),
        started_at: c.started_at.clone(),
        finished_at: finished.clone(),
        command: cx.command.to_string(),
        host: cx.host.clone(),
        notes: format!(
            "frontier cell: {} {} of {}",
            arm.arm.quant,
            c.measure,
            cx.source.path.display()
        ),
        guard: c.guard.clone(),
    };
    let mut tx = store.begin().await?;
    let run_id = store.insert_run_tx(&mut tx, &run).await?;
    if !c.bench.is_empty() {
        store
            .insert_bench_rows_tx(&mut tx, run_id, &mut c.bench)
            .await?;
        if let Some(obj) = c.result.as_object_mut() {
            obj.insert(
                "bench_ids".into(),
                c.bench.iter().map(|b| b.id).collect::<Vec<_>>().into(),
            );
        }
    }
    let key = config_key(&c.measure, &c.config);
    let a = &arm.arm;
    let r = sqlx::query(
        "INSERT INTO frontier_cells (run_id, source_file, source_sha256, source_quant, arm_quant, arm_file, arm_sha256, arm_relation,
            arm_file_bytes, arm_streamed_bytes, arm_bits_per_weight, measure, config_key, config_json, value, value_unc, ci_low, ci_high, n,
            result_json, started_at, finished_at, build_commit, engine_build, n_threads, hostname, cpu_info)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(run_id)
    .bind(cx.source.path.display().to_string())
    .bind(&cx.source.sha256)
    .bind(&cx.source.facts.quant)
    .bind(&a.quant)
    .bind(a.path.display().to_string())
    .bind(&a.sha256)
    .bind(serde_json::to_value(a.relation).expect("serialize").as_str().unwrap_or("").to_string())
    .bind(a.file_bytes as i64)
    .bind(arm.streamed_bytes as i64)
    .bind(a.bits_per_weight.is_finite().then_some(a.bits_per_weight))
    .bind(&c.measure)
    .bind(&key)
    .bind(c.config.to_string())
    .bind(c.value.filter(|v| v.is_finite()))
    .bind(c.value_unc.filter(|v| v.is_finite()))
    .bind(c.ci.map(|x| x.0))
    .bind(c.ci.map(|x| x.1))
    .bind(c.n)
    .bind(c.result.to_string())
    .bind(&c.started_at)
    .bind(&finished)
    .bind(crate::BUILD_COMMIT)
    .bind(cell_engine_build(a))
    .bind(cx.n_threads as i64)
    .bind(&cx.host.hostname)
    .bind(&cx.host.cpu_model)
    .execute(&mut *tx)
    .await
    .map_err(|e| store.sql(e))?;
    let cell_id = r.last_insert_rowid();
    for it in &c.items {
        sqlx::query(
            "INSERT INTO frontier_items (cell_id, item_id, prompt, n_prompt_tokens, output, n_gen_tokens, extracted, expected, correct)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(cell_id)
        .bind(&it.id)
        .bind(&it.prompt)
        .bind(it.n_prompt_tokens as i64)
        .bind(&it.output)
        .bind(it.n_gen_tokens as i64)
        .bind(&it.extracted)
        .bind(&it.expected)
        .bind(it.correct as i64)
        .execute(&mut *tx)
        .await
        .map_err(|e| store.sql(e))?;
    }
    tx.commit().await.map_err(|e| store.sql(e))?;
    Ok(cell_id)
}

/// Stored item rows of a cell, in order.
///
/// # Errors
/// Store errors.
pub async fn cell_items(
    store: &Store,
    cell_id: i64,
) -> Result<Vec<crate::measure::evals::tasks::ItemResult>, FrontierError> {
    let rows = sqlx::query(
        "SELECT item_id, prompt, n_prompt_tokens, output, n_gen_tokens, extracted, expected, correct FROM frontier_items WHERE cell_id = ? ORDER BY id",
    )
    .bind(cell_id)
    .fetch_all(store.pool())
    .await
    .map_err(|e| store.sql(e))?;
    Ok(rows
        .iter()
        .map(|r| crate::measure::evals::tasks::ItemResult {
            id: r.get("item_id"),
            prompt: r.get("prompt"),
            n_prompt_tokens: r.get::<i64, _>("n_prompt_tokens") as u32,
            output: r.get("output"),
            n_gen_tokens: r.get::<i64, _>("n_gen_tokens") as u32,
            extracted: r.get("extracted"),
            expected: r.get("expected"),
            correct: r.get::<i64, _>("correct") != 0,
        })
        .collect())
}
