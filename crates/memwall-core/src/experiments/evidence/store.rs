//! The `kv_verify_results` table: one `kv` run per verification, in one transaction.

use super::kv::KvVerify;
use crate::store::{NewRun, Store, StoreError};

/// Stores KV verifications as one `kv` run in one transaction; returns the run id.
///
/// # Errors
/// [`StoreError`]; nothing is written on error.
pub async fn store_kv_run(
    store: &Store,
    run: &NewRun,
    rows: &[KvVerify],
) -> Result<i64, StoreError> {
    let mut tx = store.begin().await?;
    let run_id = store.insert_run_tx(&mut tx, run).await?;
    for r in rows {
        sqlx::query(
            "INSERT INTO kv_verify_results (run_id, model_filename, cache_type, n, predicted_bytes_per_token, formula_bytes_per_token,
               state_n, state_2n, measured_state_bytes_per_token, metadata_bytes_per_token, measured_kv_bytes_per_token, ratio,
               rss_bytes_per_token, rss_ratio, build_commit)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(run_id)
        .bind(&r.model)
        .bind(&r.cache_type)
        .bind(r.n as i64)
        .bind(r.predicted_bytes_per_token)
        .bind(r.formula_bytes_per_token as i64)
        .bind(r.state_n as i64)
        .bind(r.state_2n as i64)
        .bind(r.measured_state_bytes_per_token)
        .bind(r.metadata_bytes_per_token)
        .bind(r.measured_kv_bytes_per_token)
        .bind(r.ratio)
        .bind(r.rss_bytes_per_token)
        .bind(r.rss_ratio)
        .bind(crate::BUILD_COMMIT)
        .execute(&mut *tx)
        .await
        .map_err(|e| store.sql(e))?;
    }
    tx.commit().await.map_err(|e| store.sql(e))?;
    Ok(run_id)
}
