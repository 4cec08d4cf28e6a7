//! The `loadtest_points` table (migration `0016_loadtest_points.sql`): one row per
//! load level, written with its `runs` row (kind `loadtest`) in one transaction,
//! with the live sampler's recording (`sampler_*` tables) and each level's energy
//! (`loadtest_energy`, migration `0017_loadtest_serve_energy.sql`) when it ran.

use super::metrics::{Bandwidth, Dist, LoadPoint, TokenSource};
use super::plan::{Endpoint, Load, Slo, Workload};
use super::run::RequestSample;
use crate::measure::sampler::session::Recording;
use crate::store::{NewRun, Store, StoreError, energy};
use serde::{Deserialize, Serialize};
use sqlx::Row;

/// Who was measured, and with what: the provenance shared by a run's points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadProvenance {
    /// Base URL.
    pub url: String,
    /// The route.
    pub endpoint: Endpoint,
    /// `model` sent in each request.
    pub request_model: String,
    /// `model` the streamed chunks named.
    pub server_model: Option<String>,
    pub server_header: Option<String>,
    /// `system_fingerprint` of the chunks.
    pub system_fingerprint: Option<String>,
    /// The model file given for the bandwidth columns.
    pub model_file: Option<String>,
    /// The workload (prompt lengths, seed).
    pub workload: Workload,
    /// Goodput bounds.
    pub slo: Slo,
}

/// A stored point with its run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredPoint {
    /// Row id.
    pub id: i64,
    pub run_id: i64,
    /// When, UTC RFC 3339.
    pub measured_at: String,
    /// memwall's commit that measured it.
    pub build_commit: String,
    /// The host.
    pub hostname: String,
    /// Target and workload.
    pub prov: LoadProvenance,
    /// The measurements.
    pub point: LoadPoint,
}

const DISTS: [&str; 4] = ["ttft", "tpot", "itl", "e2el"];
const STATS: [&str; 4] = ["mean_ms", "median_ms", "p90_ms", "p99_ms"];

fn dist_values(d: &Dist) -> [Option<f64>; 4] {
    [d.mean_ms, d.median_ms, d.p90_ms, d.p99_ms]
}

/// Stores a load-test run, its points, and (when the sampler ran) its recording and
/// each point's energy, in one transaction; returns the run id.
///
/// # Errors
/// [`StoreError::Sql`] (also when a row breaks the table's checks: a point with no
/// completed request, counts that do not add up, a negative energy); nothing is
/// written then.
pub async fn insert_loadtest_run(
    store: &Store,
    run: &NewRun,
    prov: &LoadProvenance,
    points: &[LoadPoint],
    recording: Option<&Recording>,
) -> Result<i64, StoreError> {
    let mut tx = store.begin().await?;
    let run_id = store.insert_run_tx(&mut tx, run).await?;
    if let Some(rec) = recording {
        crate::experiments::live::store::insert_tx(store, &mut tx, run_id, rec, &[]).await?;
    }
    let dist_cols: Vec<String> = DISTS
        .iter()
        .flat_map(|d| STATS.iter().map(move |s| format!("{d}_{s}")))
        .collect();
    let cols = format!(
        "run_id, url, endpoint, request_model, mode, concurrency, rate_rps, burstiness, input_tokens, output_tokens, shared_prefix_tokens, ignore_eos, seed, slo, server_model, server_header, system_fingerprint, model_file, build_commit, measured_at, hostname, n_sent, n_completed, n_rejected, n_failed, retry_after_max_s, duration_s, total_input_tokens, total_output_tokens, token_source, request_throughput_rps, output_throughput_tps, {}, goodput_rps, mean_cached_tokens, bytes_per_token, implied_gbps, stream_gbps, pct_of_stream, bandwidth_note, roof_source, kv_type, first_error, samples_json",
        dist_cols.join(", ")
    );
    let n = cols.split(',').count();
    let sql_text = format!(
        "INSERT INTO loadtest_points ({cols}) VALUES ({})",
        vec!["?"; n].join(", ")
    );
    let w = &prov.workload;
    for (index, p) in points.iter().enumerate() {
        let (mode, conc, rate, burst) = match p.load {
            Load::Closed { concurrency } => ("closed", Some(concurrency as i64), None, None),
            Load::Open {
                rate_rps,
                burstiness,
            } => ("open", None, Some(rate_rps), Some(burstiness)),
        };
        // Built from the constant column names above; values are bound.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql_text.clone()))
            .bind(run_id)
            .bind(&prov.url)
            .bind(
                serde_json::to_value(prov.endpoint)
                    .expect("enum")
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
            .bind(&prov.request_model)
            .bind(mode)
            .bind(conc)
            .bind(rate)
            .bind(burst)
            .bind(w.input_tokens as i64)
            .bind(w.output_tokens as i64)
            .bind(w.shared_prefix_tokens as i64)
            .bind(w.ignore_eos as i64)
            .bind(w.seed as i64)
            .bind(prov.slo.label())
            .bind(&prov.server_model)
            .bind(&prov.server_header)
            .bind(&prov.system_fingerprint)
            .bind(&prov.model_file)
            .bind(crate::BUILD_COMMIT)
            .bind(&run.finished_at)
            .bind(&run.host.hostname)
            .bind(p.n_sent as i64)
            .bind(p.n_completed as i64)
            .bind(p.n_rejected as i64)
            .bind(p.n_failed as i64)
            .bind(p.retry_after_max_s)
            .bind(p.duration_s)
            .bind(p.total_input_tokens.map(|x| x as i64))
            .bind(p.total_output_tokens as i64)
            .bind(p.token_source.name())
            .bind(p.request_throughput_rps)
            .bind(p.output_throughput_tps);
        for d in [&p.ttft, &p.tpot, &p.itl, &p.e2el] {
            for v in dist_values(d) {
                q = q.bind(v);
            }
        }
        let b = &p.bandwidth;
        q.bind(p.goodput_rps)
            .bind(p.mean_cached_tokens)
            .bind(b.bytes_per_token)
            .bind(b.implied_gbps)
            .bind(b.stream_gbps)
            .bind(b.pct_of_stream)
            .bind(&b.note)
            .bind(&b.roof_source)
            .bind(&b.kv_type)
            .bind(&p.first_error)
            .bind(serde_json::to_string(&p.samples).expect("samples serialize"))
            .execute(&mut *tx)
            .await
            .map_err(|e| store.sql(e))?;
        if let Some(x) = &p.energy {
            // The level's phase in the recording, as the job named it.
            let phase = crate::experiments::live::phase_name(index, &p.load.label());
            let sql = format!(
                "INSERT INTO loadtest_energy (point_id, run_id, phase, {}) VALUES (last_insert_rowid(), ?, ?, {})",
                energy::column_list(),
                energy::placeholders()
            );
            let q = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(run_id)
                .bind(phase);
            energy::bind(q, x)
                .execute(&mut *tx)
                .await
                .map_err(|e| store.sql(e))?;
        }
    }
    tx.commit().await.map_err(|e| store.sql(e))?;
    Ok(run_id)
}

/// Stored points, oldest first; only run `run_id`'s when given.
///
/// # Errors
/// [`StoreError::Sql`]; [`StoreError::Decode`] for a row whose JSON or enum columns
/// do not parse.
pub async fn points(store: &Store, run_id: Option<i64>) -> Result<Vec<StoredPoint>, StoreError> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT p.*, {}
         FROM loadtest_points p LEFT JOIN loadtest_energy e ON e.point_id = p.id
         WHERE (? IS NULL OR p.run_id = ?) ORDER BY p.id",
        energy::aliased("e")
    )))
    .bind(run_id)
    .bind(run_id)
    .fetch_all(store.pool())
    .await
    .map_err(|e| store.sql(e))?;
    rows.iter().map(|r| decode(store, r)).collect()
}

fn decode(store: &Store, r: &sqlx::sqlite::SqliteRow) -> Result<StoredPoint, StoreError> {
    let id: i64 = r.get("id");
    let bad = |problem: String| StoreError::Decode {
        path: store.path().display().to_string(),
        table: "loadtest_points",
        id,
        problem,
    };
    let f = |c: &str| r.get::<Option<f64>, _>(c);
    let dist = |d: &str| Dist {
        mean_ms: f(&format!("{d}_mean_ms")),
        median_ms: f(&format!("{d}_median_ms")),
        p90_ms: f(&format!("{d}_p90_ms")),
        p99_ms: f(&format!("{d}_p99_ms")),
    };
    let load = match r.get::<String, _>("mode").as_str() {
        "closed" => Load::Closed {
            concurrency: r.get::<i64, _>("concurrency") as usize,
        },
        _ => Load::Open {
            rate_rps: r.get("rate_rps"),
            burstiness: r.get("burstiness"),
        },
    };
    let token_source = match r.get::<String, _>("token_source").as_str() {
        "usage" => TokenSource::Usage,
        "tokenizer" => TokenSource::Tokenizer,
        _ => TokenSource::Chunks,
    };
    let endpoint =
        Endpoint::parse(&r.get::<String, _>("endpoint")).map_err(|e| bad(e.to_string()))?;
    let samples: Vec<RequestSample> = serde_json::from_str(&r.get::<String, _>("samples_json"))
        .map_err(|e| bad(format!("samples_json: {e}")))?;
    let slo = Slo::parse(&r.get::<String, _>("slo")).map_err(|e| bad(e.to_string()))?;
    Ok(StoredPoint {
        id,
        run_id: r.get("run_id"),
        measured_at: r.get("measured_at"),
        build_commit: r.get("build_commit"),
        hostname: r.get("hostname"),
        prov: LoadProvenance {
            url: r.get("url"),
            endpoint,
            request_model: r.get("request_model"),
            server_model: r.get("server_model"),
            server_header: r.get("server_header"),
            system_fingerprint: r.get("system_fingerprint"),
            model_file: r.get("model_file"),
            workload: Workload {
                input_tokens: r.get::<i64, _>("input_tokens") as usize,
                output_tokens: r.get::<i64, _>("output_tokens") as usize,
                shared_prefix_tokens: r.get::<i64, _>("shared_prefix_tokens") as usize,
                ignore_eos: r.get::<i64, _>("ignore_eos") != 0,
                seed: r.get::<i64, _>("seed") as u64,
            },
            slo,
        },
        point: LoadPoint {
            load,
            n_sent: r.get::<i64, _>("n_sent") as u64,
            n_completed: r.get::<i64, _>("n_completed") as u64,
            n_rejected: r.get::<i64, _>("n_rejected") as u64,
            n_failed: r.get::<i64, _>("n_failed") as u64,
            retry_after_max_s: f("retry_after_max_s"),
            duration_s: r.get("duration_s"),
            total_input_tokens: r
                .get::<Option<i64>, _>("total_input_tokens")
                .map(|x| x as u64),
            total_output_tokens: r.get::<i64, _>("total_output_tokens") as u64,
            token_source,
            request_throughput_rps: r.get("request_throughput_rps"),
            output_throughput_tps: r.get("output_throughput_tps"),
            ttft: dist("ttft"),
            tpot: dist("tpot"),
            itl: dist("itl"),
            e2el: dist("e2el"),
            goodput_rps: f("goodput_rps"),
            mean_cached_tokens: f("mean_cached_tokens"),
            bandwidth: Bandwidth {
                bytes_per_token: f("bytes_per_token"),
                implied_gbps: f("implied_gbps"),
                stream_gbps: f("stream_gbps"),
                pct_of_stream: f("pct_of_stream"),
                note: r.get("bandwidth_note"),
                roof_source: r.get("roof_source"),
                kv_type: r.get("kv_type"),
            },
            first_error: r.get("first_error"),
            energy: r
                .get::<Option<i64>, _>("e_samples")
                .map(|_| energy::read(r, "e_")),
            samples,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::super::metrics::summarize;
    use super::super::run::Outcome;
    use super::*;

    fn sample(i: usize, chunks: &[f64], end: f64) -> RequestSample {
        RequestSample {
            index: i,
            start_ms: 0.0,
            outcome: Outcome::Ok,
            chunk_ms: chunks.to_vec(),
            e2el_ms: end,
            usage_prompt_tokens: Some(10),
            usage_completion_tokens: Some(chunks.len() as u64),
            cached_tokens: Some(4),
            text: String::new(),
            finish_reason: Some("length".into()),
            retry_after_s: None,
            error: None,
        }
    }

    #[tokio::test]
    async fn a_run_round_trips_and_bad_rows_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("m.db")).await.unwrap();
        let slo = Slo::parse("ttft:150").unwrap();
        let mut p = summarize(
            Load::Closed { concurrency: 2 },
            vec![
                sample(0, &[100.0, 120.0], 130.0),
                sample(1, &[200.0, 230.0, 250.0], 260.0),
            ],
            0.5,
            &slo,
            None,
        )
        .unwrap();
        p.bandwidth.note = Some("no STREAM".into());
        let prov = LoadProvenance {
            url: "http://127.0.0.1:1".into(),
            endpoint: Endpoint::Chat,
            request_model: "m".into(),
            server_model: Some("m.gguf".into()),
            server_header: Some("llama.cpp".into()),
            system_fingerprint: None,
            model_file: None,
            workload: Workload {
                input_tokens: 8,
                output_tokens: 3,
                shared_prefix_tokens: 0,
                ignore_eos: true,
                seed: 5,
            },
            slo,
        };
        let run = NewRun {
            kind: "loadtest".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: "2026-01-01T00:00:01Z".into(),
            command: "memwall loadtest".into(),
            host: crate::probe::hw::host_info(),
            notes: String::new(),
            guard: None,
        };
        let id = insert_loadtest_run(&s, &run, &prov, std::slice::from_ref(&p), None)
            .await
            .unwrap();
        let got = points(&s, Some(id)).await.unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].prov, prov);
        // Chunk times here are exact in binary, so even the JSON samples compare equal.
        assert_eq!(got[0].point, p);
        // Counts that do not add up are refused by the table, with nothing written.
        let mut bad = p.clone();
        bad.n_failed += 1;
        let e = insert_loadtest_run(&s, &run, &prov, &[bad], None)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("CHECK constraint failed"), "{e}");
        assert_eq!(s.runs().await.unwrap().len(), 1);
    }
}
