//! A `memwall serve` session as a stored run (kind `serve`): the live sampler's
//! recording (`sampler_*` tables, migration `0015_live_sampler.sql`) written with the
//! `runs` row in one transaction at shutdown.

use crate::measure::sampler::session::Recording;
use crate::store::{NewRun, Store, StoreError};

/// Stores `run` and its recording in one transaction; returns the run id.
///
/// # Errors
/// [`StoreError::Sql`]; nothing is written then.
pub async fn insert_serve_run(
    store: &Store,
    run: &NewRun,
    rec: &Recording,
) -> Result<i64, StoreError> {
    let mut tx = store.begin().await?;
    let run_id = store.insert_run_tx(&mut tx, run).await?;
    crate::experiments::live::store::insert_tx(store, &mut tx, run_id, rec, &[]).await?;
    tx.commit().await.map_err(|e| store.sql(e))?;
    Ok(run_id)
}
