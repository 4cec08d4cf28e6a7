//! The predictions' tables (migration 0007): `prediction_sheets`, write-once and
//! hash-chained (SQL triggers refuse `UPDATE` and `DELETE`), and `prediction_scores`,
//! one scorecard per (sheet, run).

use super::{GENESIS, PredictError, Scorecard, Sheet, SheetPayload, sheet_hash};
use crate::store::{Store, StoreError};
use sqlx::Row;

/// Writes a sheet (in one transaction, chained to the previous one) and returns it.
///
/// # Errors
/// [`PredictError::Store`].
pub async fn record_sheet(store: &Store, payload: &SheetPayload) -> Result<Sheet, PredictError> {
    let e = |x: sqlx::Error| store.sql(x);
    let mut tx = store.begin().await?;
    let prev: Option<String> =
        sqlx::query_scalar("SELECT sha256 FROM prediction_sheets ORDER BY id DESC LIMIT 1")
            .fetch_optional(&mut *tx)
            .await
            .map_err(&e)?;
    let prev = prev.unwrap_or_else(|| GENESIS.to_string());
    let created_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let payload_json = serde_json::to_string(payload).expect("payload serializes");
    let sha = sheet_hash(&prev, &created_at, &payload_json);
    let id = sqlx::query(
        "INSERT INTO prediction_sheets (created_at, hostname, prev_sha256, payload_json, sha256) VALUES (?, ?, ?, ?, ?)",
    )
    .bind(&created_at)
    .bind(&payload.hostname)
    .bind(&prev)
    .bind(&payload_json)
    .bind(&sha)
    .execute(&mut *tx)
    .await
    .map_err(&e)?
    .last_insert_rowid();
    tx.commit().await.map_err(&e)?;
    Ok(Sheet {
        id,
        created_at,
        prev_sha256: prev,
        sha256: sha,
        payload: payload.clone(),
    })
}

/// Loads sheet `id` and verifies it: its hash, the link to the previous sheet, and
/// the next sheet's link to it.
///
/// # Errors
/// [`PredictError::Tampered`] naming the failed check; [`PredictError::NotFound`].
pub async fn load_sheet(store: &Store, id: i64) -> Result<Sheet, PredictError> {
    let e = |x: sqlx::Error| store.sql(x);
    let row = sqlx::query(
        "SELECT id, created_at, prev_sha256, payload_json, sha256 FROM prediction_sheets WHERE id = ?",
    )
    .bind(id)
    .fetch_optional(store.pool())
    .await
    .map_err(&e)?
    .ok_or_else(|| {
        PredictError::NotFound(format!(
            "no prediction sheet {id}: `memwall predict list` shows the stored ones"
        ))
    })?;
    let tampered = |problem: String| PredictError::Tampered { id, problem };
    let created_at: String = row.get("created_at");
    let prev: String = row.get("prev_sha256");
    let payload_json: String = row.get("payload_json");
    let sha: String = row.get("sha256");
    if sheet_hash(&prev, &created_at, &payload_json) != sha {
        return Err(tampered(
            "its content no longer hashes to its stored sha256".into(),
        ));
    }
    let before: Option<String> = sqlx::query_scalar(
        "SELECT sha256 FROM prediction_sheets WHERE id < ? ORDER BY id DESC LIMIT 1",
    )
    .bind(id)
    .fetch_optional(store.pool())
    .await
    .map_err(&e)?;
    if before.as_deref().unwrap_or(GENESIS) != prev {
        return Err(tampered(
            "the chain link to the previous sheet is broken (a sheet was deleted or replaced)"
                .into(),
        ));
    }
    let after: Option<String> = sqlx::query_scalar(
        "SELECT prev_sha256 FROM prediction_sheets WHERE id > ? ORDER BY id ASC LIMIT 1",
    )
    .bind(id)
    .fetch_optional(store.pool())
    .await
    .map_err(&e)?;
    if after.as_ref().is_some_and(|a| *a != sha) {
        return Err(tampered(
            "the next sheet was chained to a different hash (this sheet was replaced)".into(),
        ));
    }
    let payload: SheetPayload = serde_json::from_str(&payload_json)
        .map_err(|x| tampered(format!("payload JSON does not parse: {x}")))?;
    Ok(Sheet {
        id,
        created_at,
        prev_sha256: prev,
        sha256: sha,
        payload,
    })
}

/// Every sheet id with its time and hash, newest first (not verified: [`load_sheet`] verifies).
///
/// # Errors
/// [`PredictError::Store`].
pub async fn list_sheets(store: &Store) -> Result<Vec<(i64, String, String)>, PredictError> {
    let rows = sqlx::query("SELECT id, created_at, sha256 FROM prediction_sheets ORDER BY id DESC")
        .fetch_all(store.pool())
        .await
        .map_err(|x| store.sql(x))?;
    Ok(rows
        .iter()
        .map(|r| (r.get("id"), r.get("created_at"), r.get("sha256")))
        .collect())
}

/// Stores `card` as the scorecard of its (sheet, run); re-scoring replaces its time and
/// card in place, keeping the row's `row_key` (its identity in a shared store, which
/// keeps the card it was first pushed with: rows there are only added).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn insert_score(store: &Store, card: &Scorecard) -> Result<(), StoreError> {
    let json = serde_json::to_string(card).expect("scorecard serializes");
    sqlx::query(
        "INSERT INTO prediction_scores (sheet_id, run_id, scored_at, result_json) VALUES (?, ?, ?, ?)
         ON CONFLICT (sheet_id, run_id) DO UPDATE SET scored_at = excluded.scored_at, result_json = excluded.result_json",
    )
    .bind(card.sheet_id)
    .bind(card.run_id)
    .bind(crate::util::now_rfc3339())
    .bind(json)
    .execute(store.pool())
    .await
    .map_err(|x| store.sql(x))?;
    Ok(())
}
