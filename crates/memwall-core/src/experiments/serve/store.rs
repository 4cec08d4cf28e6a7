//! A `memwall serve` session as a stored run (kind `serve`): the live sampler's
//! recording (`sampler_*` tables, migration `0015_live_sampler.sql`) written with the
//! `runs` row in one transaction at shutdown.

use crate::measure::sampler::session::{EnergySummary, Recording};
use crate::store::{NewRun, Store, StoreError, energy};

/// Stores `run`, its recording and the serving phase's energy (`serve_energy`) in one
/// transaction; returns the run id.
///
/// # Errors
/// [`StoreError::Sql`]; nothing is written then.
pub async fn insert_serve_run(
    store: &Store,
    run: &NewRun,
    rec: &Recording,
    energy: Option<(&str, &EnergySummary)>,
) -> Result<i64, StoreError> {
    let mut tx = store.begin().await?;
    let run_id = store.insert_run_tx(&mut tx, run).await?;
    crate::experiments::live::store::insert_tx(store, &mut tx, run_id, rec, &[]).await?;
    if let Some((phase, e)) = energy {
        let sql = format!(
            "INSERT INTO serve_energy (run_id, phase, {}) VALUES (?, ?, {})",
            energy::column_list(),
            energy::placeholders()
        );
        let q = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(run_id)
            .bind(phase);
        energy::bind(q, e)
            .execute(&mut *tx)
            .await
            .map_err(|e| store.sql(e))?;
    }
    tx.commit().await.map_err(|e| store.sql(e))?;
    Ok(run_id)
}

/// The stored energy of `serve` run `run_id` (`None`: none stored).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn serve_energy(store: &Store, run_id: i64) -> Result<Option<EnergySummary>, StoreError> {
    let row = sqlx::query("SELECT * FROM serve_energy WHERE run_id = ?")
        .bind(run_id)
        .fetch_optional(store.pool())
        .await
        .map_err(|e| store.sql(e))?;
    Ok(row.map(|r| energy::read(&r, "")))
}
