//! The sampler's tables: `sampler_counters` (the counter list with reasons),
//! `sampler_phases`, `sampler_series` (one row per read) and `row_energy` (per
//! bench row). Written inside the run's own transaction, so a run is stored with
//! its series or not at all.

use super::{Counter, Phase, Recording, RowEnergy, Sample};
use crate::measure::sampler::session::Interval;
use crate::store::{Store, StoreError, energy};
use sqlx::{Row, Sqlite, Transaction};

/// Inserts `rec` and `energies` for run `run_id` inside `tx`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn insert_tx(
    store: &Store,
    tx: &mut Transaction<'static, Sqlite>,
    run_id: i64,
    rec: &Recording,
    energies: &[RowEnergy],
) -> Result<(), StoreError> {
    let e = |x| store.sql(x);
    for c in &rec.counters {
        sqlx::query("INSERT INTO sampler_counters (run_id, name, source, available, reason) VALUES (?, ?, ?, ?, ?)")
            .bind(run_id)
            .bind(&c.name)
            .bind(&c.source)
            .bind(c.available)
            .bind(&c.reason)
            .execute(&mut **tx)
            .await
            .map_err(e)?;
    }
    for p in &rec.phases {
        sqlx::query(
            "INSERT INTO sampler_phases (run_id, name, start_ns, end_ns) VALUES (?, ?, ?, ?)",
        )
        .bind(run_id)
        .bind(&p.name)
        .bind(p.start_ns as i64)
        .bind(p.end_ns as i64)
        .execute(&mut **tx)
        .await
        .map_err(e)?;
    }
    for i in &rec.intervals {
        sqlx::query(
            "INSERT INTO sampler_intervals (run_id, phase, rep, start_ns, end_ns) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(run_id)
        .bind(&i.phase)
        .bind(i.rep as i64)
        .bind(i.start_ns as i64)
        .bind(i.end_ns as i64)
        .execute(&mut **tx)
        .await
        .map_err(e)?;
    }
    let u = |x: Option<u64>| x.map(|v| v as i64);
    for s in &rec.samples {
        sqlx::query(
            "INSERT INTO sampler_series (run_id, hz, t_ns, cpu_energy_j, dram_energy_j, gpu_energy_j, cpu_power_w, dram_power_w, gpu_power_w,
             cpu_temp_c, gpu_temp_c, cpu_mhz, gpu_sm_mhz, gpu_mem_mhz, gpu_mem_util_pct, dram_gbps, mem_used_bytes, mem_total_bytes,
             swap_used_bytes, swap_in_pages, swap_out_pages, thermal_state, cpu_busy_s, cpu_steal_s, own_cpu_s, gpu_other_util_pct)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(run_id)
        .bind(rec.hz)
        .bind(s.t_ns as i64)
        .bind(s.cpu_energy_j)
        .bind(s.dram_energy_j)
        .bind(s.gpu_energy_j)
        .bind(s.cpu_power_w)
        .bind(s.dram_power_w)
        .bind(s.gpu_power_w)
        .bind(s.cpu_temp_c)
        .bind(s.gpu_temp_c)
        .bind(s.cpu_mhz)
        .bind(s.gpu_sm_mhz)
        .bind(s.gpu_mem_mhz)
        .bind(s.gpu_mem_util_pct)
        .bind(s.dram_gbps)
        .bind(u(s.mem_used_bytes))
        .bind(u(s.mem_total_bytes))
        .bind(u(s.swap_used_bytes))
        .bind(u(s.swap_in_pages))
        .bind(u(s.swap_out_pages))
        .bind(&s.thermal_state)
        .bind(s.cpu_busy_s)
        .bind(s.cpu_steal_s)
        .bind(s.own_cpu_s)
        .bind(s.gpu_other_util_pct)
        .execute(&mut **tx)
        .await
        .map_err(e)?;
    }
    let sql = format!(
        "INSERT INTO row_energy (row_id, run_id, phase, implied_bandwidth_gbps, {}) VALUES (?, ?, ?, ?, {})",
        energy::column_list(),
        energy::placeholders()
    );
    for r in energies {
        let q = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
            .bind(r.row_id)
            .bind(run_id)
            .bind(&r.phase)
            .bind(r.implied_bandwidth_gbps);
        energy::bind(q, &r.energy)
            .execute(&mut **tx)
            .await
            .map_err(e)?;
    }
    Ok(())
}

/// The stored recording of run `run_id`; `None` when the run has none.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn recording(store: &Store, run_id: i64) -> Result<Option<Recording>, StoreError> {
    let e = |x| store.sql(x);
    let counters: Vec<Counter> = sqlx::query(
        "SELECT name, source, available, reason FROM sampler_counters WHERE run_id = ? ORDER BY id",
    )
    .bind(run_id)
    .fetch_all(store.pool())
    .await
    .map_err(e)?
    .into_iter()
    .map(|r| Counter {
        name: r.get("name"),
        source: r.get("source"),
        available: r.get("available"),
        reason: r.get("reason"),
    })
    .collect();
    if counters.is_empty() {
        return Ok(None);
    }
    let phases = sqlx::query(
        "SELECT name, start_ns, end_ns FROM sampler_phases WHERE run_id = ? ORDER BY id",
    )
    .bind(run_id)
    .fetch_all(store.pool())
    .await
    .map_err(e)?
    .into_iter()
    .map(|r| Phase {
        name: r.get("name"),
        start_ns: r.get::<i64, _>("start_ns") as u64,
        end_ns: r.get::<i64, _>("end_ns") as u64,
    })
    .collect();
    let intervals = sqlx::query(
        "SELECT phase, rep, start_ns, end_ns FROM sampler_intervals WHERE run_id = ? ORDER BY id",
    )
    .bind(run_id)
    .fetch_all(store.pool())
    .await
    .map_err(e)?
    .into_iter()
    .map(|r| Interval {
        phase: r.get("phase"),
        rep: r.get::<i64, _>("rep") as u32,
        start_ns: r.get::<i64, _>("start_ns") as u64,
        end_ns: r.get::<i64, _>("end_ns") as u64,
    })
    .collect();
    let rows = sqlx::query("SELECT * FROM sampler_series WHERE run_id = ? ORDER BY t_ns, id")
        .bind(run_id)
        .fetch_all(store.pool())
        .await
        .map_err(e)?;
    let hz = rows.first().map(|r| r.get::<f64, _>("hz")).unwrap_or(0.0);
    let u = |r: &sqlx::sqlite::SqliteRow, c: &str| r.get::<Option<i64>, _>(c).map(|v| v as u64);
    let samples = rows
        .iter()
        .map(|r| Sample {
            t_ns: r.get::<i64, _>("t_ns") as u64,
            cpu_energy_j: r.get("cpu_energy_j"),
            dram_energy_j: r.get("dram_energy_j"),
            gpu_energy_j: r.get("gpu_energy_j"),
            cpu_power_w: r.get("cpu_power_w"),
            dram_power_w: r.get("dram_power_w"),
            gpu_power_w: r.get("gpu_power_w"),
            cpu_temp_c: r.get("cpu_temp_c"),
            gpu_temp_c: r.get("gpu_temp_c"),
            cpu_mhz: r.get("cpu_mhz"),
            gpu_sm_mhz: r.get("gpu_sm_mhz"),
            gpu_mem_mhz: r.get("gpu_mem_mhz"),
            gpu_mem_util_pct: r.get("gpu_mem_util_pct"),
            dram_gbps: r.get("dram_gbps"),
            mem_used_bytes: u(r, "mem_used_bytes"),
            mem_total_bytes: u(r, "mem_total_bytes"),
            swap_used_bytes: u(r, "swap_used_bytes"),
            swap_in_pages: u(r, "swap_in_pages"),
            swap_out_pages: u(r, "swap_out_pages"),
            thermal_state: r.get("thermal_state"),
            cpu_busy_s: r.get("cpu_busy_s"),
            cpu_steal_s: r.get("cpu_steal_s"),
            own_cpu_s: r.get("own_cpu_s"),
            gpu_other_util_pct: r.try_get("gpu_other_util_pct").ok().flatten(),
        })
        .collect();
    Ok(Some(Recording {
        hz,
        samples,
        phases,
        intervals,
        counters,
    }))
}

fn row_energy_of(r: &sqlx::sqlite::SqliteRow) -> RowEnergy {
    RowEnergy {
        row_id: r.get("row_id"),
        run_id: r.get("run_id"),
        phase: r.get("phase"),
        energy: energy::read(r, ""),
        implied_bandwidth_gbps: r.get("implied_bandwidth_gbps"),
    }
}

/// The energy rows of run `run_id`, in row order.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn row_energy(store: &Store, run_id: i64) -> Result<Vec<RowEnergy>, StoreError> {
    Ok(
        sqlx::query("SELECT * FROM row_energy WHERE run_id = ? ORDER BY row_id")
            .bind(run_id)
            .fetch_all(store.pool())
            .await
            .map_err(|x| store.sql(x))?
            .iter()
            .map(row_energy_of)
            .collect(),
    )
}

/// Every stored energy row, in row order (the app's Frontier page).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn all_row_energy(store: &Store) -> Result<Vec<RowEnergy>, StoreError> {
    Ok(sqlx::query("SELECT * FROM row_energy ORDER BY row_id")
        .fetch_all(store.pool())
        .await
        .map_err(|x| store.sql(x))?
        .iter()
        .map(row_energy_of)
        .collect())
}

/// `rows` rendered in `format` with each row's stored energy (the energy columns
/// follow the record's; a row stored without a recording says so).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn render_with_energy(
    store: &Store,
    rows: &[crate::store::record::BenchRecord],
    format: crate::present::export::Format,
) -> Result<String, StoreError> {
    let energy = all_row_energy(store).await?;
    Ok(format
        .exporter()
        .render_rows(&super::export_rows(rows, &energy)))
}

/// The energy row of run `run_id`'s decode row (`n_prompt` = 0, `n_gen` > 0; the
/// latest when there are several), and whether the run has a sampler recording at
/// all (`sampler_counters` rows): `(None, false)` for a run measured without it.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn decode_energy(
    store: &Store,
    run_id: i64,
) -> Result<(Option<RowEnergy>, bool), StoreError> {
    let e = |x| store.sql(x);
    let row = sqlx::query(
        "SELECT e.* FROM row_energy e JOIN bench_results b ON b.id = e.row_id
         WHERE e.run_id = ? AND b.n_prompt = 0 AND b.n_gen > 0 ORDER BY e.row_id DESC LIMIT 1",
    )
    .bind(run_id)
    .fetch_optional(store.pool())
    .await
    .map_err(e)?;
    let recorded: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM sampler_counters WHERE run_id = ?")
            .bind(run_id)
            .fetch_one(store.pool())
            .await
            .map_err(e)?;
    Ok((row.as_ref().map(row_energy_of), recorded > 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::hw::host_info;
    use crate::store::NewRun;
    use crate::store::record::BenchRecord;

    #[tokio::test]
    async fn a_recording_and_row_energy_round_trip_with_their_nulls() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("m.db")).await.unwrap();
        let run = NewRun {
            kind: "bench".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: "2026-01-01T00:01:00Z".into(),
            command: "memwall test".into(),
            host: host_info(),
            notes: String::new(),
            guard: None,
        };
        let mut rows = [BenchRecord::example()];
        let rec = Recording {
            hz: 10.0,
            samples: vec![
                Sample {
                    t_ns: 0,
                    cpu_energy_j: Some(0.0),
                    cpu_mhz: Some(2600.0),
                    mem_used_bytes: Some(5 << 30),
                    cpu_busy_s: Some(0.0),
                    cpu_steal_s: Some(0.0),
                    own_cpu_s: Some(0.0),
                    ..Sample::default()
                },
                Sample {
                    t_ns: 100_000_000,
                    cpu_energy_j: Some(3.5),
                    cpu_power_w: Some(35.0),
                    swap_out_pages: Some(2),
                    thermal_state: Some("nominal".into()),
                    cpu_busy_s: Some(0.2),
                    cpu_steal_s: Some(0.0),
                    own_cpu_s: Some(0.15),
                    ..Sample::default()
                },
            ],
            phases: vec![Phase {
                name: "#0 tg128".into(),
                start_ns: 0,
                end_ns: 100_000_000,
            }],
            intervals: vec![Interval {
                phase: "#0 tg128".into(),
                rep: 1,
                start_ns: 0,
                end_ns: 100_000_000,
            }],
            counters: vec![
                Counter::available("cpu_package_energy", "fixture"),
                Counter::unavailable("dram_bandwidth", "x", "no PMU"),
            ],
        };
        let mut tx = store.begin().await.unwrap();
        let run_id = store.insert_run_tx(&mut tx, &run).await.unwrap();
        store
            .insert_bench_rows_tx(&mut tx, run_id, &mut rows)
            .await
            .unwrap();
        let energy = super::super::row_energies(&rec, &rows, &["#0 tg128".into()]);
        insert_tx(&store, &mut tx, run_id, &rec, &energy)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let back = recording(&store, run_id).await.unwrap().unwrap();
        assert_eq!(back, rec);
        let e = row_energy(&store, run_id).await.unwrap();
        assert_eq!(e, energy);
        // 3.5 J in 0.1 s = 35 W over the one timed interval; 2 reps × 128 tokens.
        assert!((e[0].energy.mean_power_w.unwrap() - 35.0).abs() < 1e-9);
        assert!((e[0].energy.j_per_token.unwrap() - 3.5 / 256.0).abs() < 1e-12);
        assert_eq!(e[0].energy.live_dram_gbps, None);
        // (0.2 − 0.15) s of others' CPU in 0.1 s.
        assert!((e[0].energy.other_cpu_cores.unwrap() - 0.5).abs() < 1e-9);
        assert!(recording(&store, run_id + 1).await.unwrap().is_none());
    }
}
