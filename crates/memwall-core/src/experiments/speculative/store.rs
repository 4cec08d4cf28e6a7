//! The speculative-decoding tables (migrations `0005_spec.sql`, `0008_spec_honesty.sql`):
//! gates, gated prompts' token counts, bench cells. Every run is written in one
//! transaction with its `runs` row. The store itself (SQLite triggers and checks), so
//! that no code path can get around it:
//! - refuses a speedup without the gate that unlocks it ([`StoredGate::lacks`]: a
//!   passed greedy gate over the whole prompt set at ≥ the bench's tokens per prompt);
//! - refuses a row whose speculative output differed from target-only decoding;
//! - keeps `--k auto`'s "off" as a decision without samples ([`SpecBenchRow::decision`]);
//! - refuses any UPDATE of a gate or bench row (write-once), and the deletion of a gate
//!   while rows it unlocked exist ([`Store::delete_run`](crate::store::Store::delete_run)).

use super::gate::{GateRow, SamplingCheck, TokenizedPrompt};
pub use super::record::{AUTO_OFF_PREDICTED, AUTO_OFF_UNGATED, SpecBenchRow};
use crate::store::{NewRun, Store, StoreError};
use serde::{Deserialize, Serialize};
use sqlx::Row;

fn sql(store: &Store, source: sqlx::Error) -> StoreError {
    StoreError::Sql {
        path: store.path().display().to_string(),
        source,
    }
}

/// Identity of what a gate run tested.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateProvenance {
    /// Target model file name.
    pub target_file: String,
    /// sha256 of the target GGUF file.
    pub target_sha256: String,
    /// Prompt set sha256: a gate unlocks benches of this prompt file only.
    pub prompt_set_sha256: String,
    /// The prompt file it covered, as given (a path, or `builtin:prompts/spec.jsonl`).
    pub prompt_set: String,
    /// Engine build (`llama-cpp-sys-2 0.1.161`).
    pub engine_build: String,
    /// Tokens generated per prompt.
    pub max_new: usize,
    /// Prompts in the frozen set the gated prompts were drawn from (a `--limit` gate
    /// runs fewer: it is stored as partial and unlocks no bench).
    pub n_prompts_set: usize,
}

/// Stores a gate run: the run row, one `spec_gates` row per greedy configuration
/// and per sampling check, and the prompts' token counts, in one transaction.
///
/// # Errors
/// [`StoreError::Sql`]; nothing is written on error.
pub async fn insert_gate_run(
    store: &Store,
    run: &NewRun,
    prov: &GateProvenance,
    prompts: &[TokenizedPrompt],
    rows: &[GateRow],
    sampling: &[SamplingCheck],
) -> Result<i64, StoreError> {
    let mut tx = store.begin().await?;
    let run_id = store.insert_run_tx(&mut tx, run).await?;
    let insert = "INSERT INTO spec_gates (run_id, mode, target_file, target_sha256, drafter_kind, drafter_key, k, prompt_set_sha256, n_prompts, n_identical, max_new, passed, first_diff_json, detail_json, engine_build, build_commit, measured_at, hostname, cpu_info, n_prompts_set, prompt_set)
                  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    for r in rows {
        sqlx::query(insert)
            .bind(run_id)
            .bind("greedy")
            .bind(&prov.target_file)
            .bind(&prov.target_sha256)
            .bind(r.drafter.name())
            .bind(&r.drafter_key)
            .bind(r.k as i64)
            .bind(&prov.prompt_set_sha256)
            .bind(r.n_prompts as i64)
            .bind(r.n_identical as i64)
            .bind(prov.max_new as i64)
            .bind(r.passed() as i64)
            .bind(
                r.first_diff
                    .as_ref()
                    .map(|d| serde_json::to_string(d).expect("serialize")),
            )
            .bind(gate_detail(r))
            .bind(&prov.engine_build)
            .bind(crate::BUILD_COMMIT)
            .bind(&run.finished_at)
            .bind(&run.host.hostname)
            .bind(&run.host.cpu_model)
            .bind(prov.n_prompts_set as i64)
            .bind(&prov.prompt_set)
            .execute(&mut *tx)
            .await
            .map_err(|e| sql(store, e))?;
    }
    for c in sampling {
        let kind = if c.drafter_key.starts_with("ngram") {
            "ngram"
        } else {
            "draft-model"
        };
        sqlx::query(insert)
            .bind(run_id)
            .bind("sampling")
            .bind(&prov.target_file)
            .bind(&prov.target_sha256)
            .bind(kind)
            .bind(&c.drafter_key)
            .bind(c.k as i64)
            .bind(&prov.prompt_set_sha256)
            .bind(c.trials as i64)
            .bind(0i64)
            .bind((c.k + 1) as i64)
            .bind(c.passed as i64)
            .bind(Option::<String>::None)
            .bind(serde_json::to_string(c).expect("serialize"))
            .bind(&prov.engine_build)
            .bind(crate::BUILD_COMMIT)
            .bind(&run.finished_at)
            .bind(&run.host.hostname)
            .bind(&run.host.cpu_model)
            .bind(Option::<i64>::None)
            .bind(&prov.prompt_set)
            .execute(&mut *tx)
            .await
            .map_err(|e| sql(store, e))?;
    }
    for p in prompts {
        sqlx::query(
            "INSERT INTO spec_gate_prompts (run_id, prompt_set_sha256, prompt_id, category, format, n_prompt_tokens) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(run_id)
        .bind(&prov.prompt_set_sha256)
        .bind(&p.id)
        .bind(p.category.name())
        .bind(match p.format {
            super::prompts::Format::Raw => "raw",
            super::prompts::Format::Chat => "chat",
        })
        .bind(p.tokens.len() as i64)
        .execute(&mut *tx)
        .await
        .map_err(|e| sql(store, e))?;
    }
    tx.commit().await.map_err(|e| sql(store, e))?;
    Ok(run_id)
}

/// One stored greedy gate row, with what the bench needs to judge it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredGate {
    /// `spec_gates.id` (what a bench row's `gate_id` names).
    pub id: i64,
    /// The gate's run.
    pub run_id: i64,
    /// The drafter's identity: kind and settings (or draft model file).
    pub drafter_key: String,
    /// Draft length: tokens the drafter proposes per iteration.
    pub k: usize,
    /// Prompts gated.
    pub n_prompts: usize,
    /// Prompts in the frozen set (`None`: stored before memwall recorded it).
    pub n_prompts_set: Option<usize>,
    /// Prompts with identical output.
    pub n_identical: usize,
    /// Tokens generated per prompt.
    pub max_new: usize,
    /// All gated prompts identical.
    pub passed: bool,
}

impl StoredGate {
    /// Covered every prompt of the frozen set (not a `--limit` gate).
    pub fn is_complete(&self) -> bool {
        self.n_prompts_set == Some(self.n_prompts) && self.n_prompts > 0
    }

    /// Why this gate does not unlock a bench at `max_new` tokens per prompt, one
    /// clause per reason; empty when it unlocks it. The same rules as the store's
    /// insert trigger (`spec_bench_requires_an_unlocking_gate`).
    pub fn lacks(&self, max_new: usize) -> Vec<String> {
        let mut why = Vec::new();
        match self.n_prompts_set {
            None => why.push(
                "it was stored before memwall recorded the prompt set's size, so its coverage is unknown"
                    .to_string(),
            ),
            Some(n) if n != self.n_prompts => why.push(format!(
                "it covered {} of the prompt set's {n} prompts (a --limit gate is partial)",
                self.n_prompts
            )),
            Some(_) => {}
        }
        if !self.passed || self.n_identical != self.n_prompts {
            why.push(format!(
                "it failed: {}/{} outputs identical",
                self.n_identical, self.n_prompts
            ));
        }
        if self.max_new < max_new {
            why.push(format!(
                "it generated {} tokens per prompt, the bench uses {max_new}",
                self.max_new
            ));
        }
        why
    }
}

/// Every greedy gate row stored for this target, engine build and prompt set, in
/// storage order (oldest first).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn greedy_gates(
    store: &Store,
    target_sha256: &str,
    engine_build: &str,
    prompt_set_sha256: &str,
) -> Result<Vec<StoredGate>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, run_id, drafter_key, k, n_prompts, n_prompts_set, n_identical, max_new, passed
         FROM spec_gates WHERE mode = 'greedy'
         AND target_sha256 = ? AND engine_build = ? AND prompt_set_sha256 = ? ORDER BY id",
    )
    .bind(target_sha256)
    .bind(engine_build)
    .bind(prompt_set_sha256)
    .fetch_all(store.pool())
    .await
    .map_err(|e| sql(store, e))?;
    Ok(rows
        .iter()
        .map(|r| StoredGate {
            id: r.get("id"),
            run_id: r.get("run_id"),
            drafter_key: r.get("drafter_key"),
            k: r.get::<i64, _>("k") as usize,
            n_prompts: r.get::<i64, _>("n_prompts") as usize,
            n_prompts_set: r.get::<Option<i64>, _>("n_prompts_set").map(|n| n as usize),
            n_identical: r.get::<i64, _>("n_identical") as usize,
            max_new: r.get::<i64, _>("max_new") as usize,
            passed: r.get::<i64, _>("passed") != 0,
        })
        .collect())
}

/// The gate that unlocks `(drafter_key, k)` for a bench at `max_new` tokens per
/// prompt: the latest gate with nothing in [`StoredGate::lacks`].
///
/// # Errors
/// A sentence naming every gate run stored for that configuration and what each
/// lacked, or saying there is none.
pub fn unlocking_gate<'a>(
    gates: &'a [StoredGate],
    drafter_key: &str,
    k: usize,
    max_new: usize,
) -> Result<&'a StoredGate, String> {
    let same: Vec<&StoredGate> = gates
        .iter()
        .filter(|g| g.drafter_key == drafter_key && g.k == k)
        .collect();
    if let Some(g) = same.iter().rev().find(|g| g.lacks(max_new).is_empty()) {
        return Ok(g);
    }
    if same.is_empty() {
        return Err(format!("{drafter_key} k={k}: no gate run stored"));
    }
    Err(format!(
        "{drafter_key} k={k}: {}",
        same.iter()
            .map(|g| format!("gate run {}: {}", g.run_id, g.lacks(max_new).join("; ")))
            .collect::<Vec<_>>()
            .join("; ")
    ))
}

/// `(drafter_key, k)` of every configuration that some gate in `gates` unlocks at
/// `max_new` tokens per prompt (what `--k auto` may choose from), sorted.
pub fn unlocked(gates: &[StoredGate], max_new: usize) -> Vec<(String, usize)> {
    let mut v: Vec<(String, usize)> = gates
        .iter()
        .filter(|g| g.lacks(max_new).is_empty())
        .map(|g| (g.drafter_key.clone(), g.k))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Sets `gate_id` on every row that carries a speedup of a speculative
/// configuration (k > 0) to the gate that unlocks it.
///
/// # Errors
/// The [`unlocking_gate`] sentences of the rows no gate unlocks (nothing is set then).
pub fn attach_gates(rows: &mut [SpecBenchRow], gates: &[StoredGate]) -> Result<(), String> {
    let ids = unlocking_gate_ids(
        rows.iter().map(|r| {
            (
                r.speedup_mean.is_some(),
                r.drafter_key.as_str(),
                r.k,
                r.max_new,
            )
        }),
        gates,
    )?;
    for (r, id) in rows.iter_mut().zip(ids) {
        r.gate_id = id;
    }
    Ok(())
}

/// The gate id of each row (`has_speedup`, drafter key, k, max_new), `None` for a row
/// without a speculative speedup (k = 0 or none measured); all or nothing.
///
/// # Errors
/// The [`unlocking_gate`] sentences of the rows no gate unlocks, each once.
fn unlocking_gate_ids<'a>(
    rows: impl Iterator<Item = (bool, &'a str, usize, usize)>,
    gates: &[StoredGate],
) -> Result<Vec<Option<i64>>, String> {
    let mut ids = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    for (has_speedup, key, k, max_new) in rows {
        if k == 0 || !has_speedup {
            ids.push(None);
            continue;
        }
        match unlocking_gate(gates, key, k, max_new) {
            Ok(g) => ids.push(Some(g.id)),
            Err(e) => {
                if !missing.contains(&e) {
                    missing.push(e);
                }
                ids.push(None);
            }
        }
    }
    if !missing.is_empty() {
        return Err(missing.join(". "));
    }
    Ok(ids)
}

const BENCH_COLS: &[&str] = &[
    "run_id",
    "target_file",
    "target_sha256",
    "draft_file",
    "drafter_kind",
    "drafter_key",
    "k",
    "k_auto",
    "category",
    "prompt_set_sha256",
    "prompt_set",
    "prompt_ids",
    "max_new",
    "reps",
    "n_threads",
    "tps_samples",
    "tps_mean",
    "tps_std",
    "speedup_samples",
    "speedup_mean",
    "speedup_std",
    "predicted_speedup",
    "alpha_calib",
    "acceptance_rate",
    "alpha_hat",
    "mean_accepted",
    "tokens_per_target_pass",
    "n_drafted",
    "n_accepted",
    "n_iterations",
    "n_emitted",
    "n_output_mismatch",
    "p_mass_max",
    "p_mass_mean",
    "q_mass_max",
    "q_mass_mean",
    "draft_ns_per_iteration",
    "verify_ns_per_iteration",
    "stats_json",
    "timings_json",
    "engine_build",
    "build_commit",
    "measured_at",
    "hostname",
    "cpu_info",
    "decision",
    "gate_id",
];

/// Stores a bench run and its cells in one transaction (sets `id`/`run_id`). Rows
/// with a speedup (k > 0) need `gate_id` set ([`attach_gates`]).
///
/// # Errors
/// [`StoreError::Sql`], including the triggers' refusals ("refusing a speedup
/// without the gate that unlocks it", "refusing a row whose speculative output
/// differed") and the checks of decision rows; nothing is written then.
pub async fn insert_bench_run(
    store: &Store,
    run: &NewRun,
    rows: &mut [SpecBenchRow],
) -> Result<i64, StoreError> {
    insert_bench_run_sampled(store, run, rows, None).await
}

/// As [`insert_bench_run`], with the sampler's recording (`sampler_*` tables) and
/// each row's energy (`spec_bench_energy`, rows in order) in the same transaction.
///
/// # Errors
/// As [`insert_bench_run`].
pub async fn insert_bench_run_sampled(
    store: &Store,
    run: &NewRun,
    rows: &mut [SpecBenchRow],
    sampler: Option<SynthSampler<'_>>,
) -> Result<i64, StoreError> {
    let mut tx = store.begin().await?;
    let run_id = store.insert_run_tx(&mut tx, run).await?;
    let q = format!(
        "INSERT INTO spec_bench ({}) VALUES ({})",
        BENCH_COLS.join(", "),
        vec!["?"; BENCH_COLS.len()].join(", ")
    );
    for r in rows.iter_mut() {
        r.run_id = run_id;
        let res = sqlx::query(sqlx::AssertSqlSafe(q.clone()))
            .bind(run_id)
            .bind(&r.target_file)
            .bind(&r.target_sha256)
            .bind(&r.draft_file)
            .bind(&r.drafter_kind)
            .bind(&r.drafter_key)
            .bind(r.k as i64)
            .bind(r.k_auto as i64)
            .bind(&r.category)
            .bind(&r.prompt_set_sha256)
            .bind(&r.prompt_set)
            .bind(js(&r.prompt_ids))
            .bind(r.max_new as i64)
            .bind(r.reps as i64)
            .bind(r.n_threads as i64)
            .bind(r.tps_samples.as_ref().map(js))
            .bind(r.tps_mean)
            .bind(r.tps_std)
            .bind(r.speedup_samples.as_ref().map(js))
            .bind(r.speedup_mean)
            .bind(r.speedup_std)
            .bind(r.predicted_speedup)
            .bind(r.alpha_calib)
            .bind(r.acceptance_rate)
            .bind(r.alpha_hat)
            .bind(r.mean_accepted)
            .bind(r.tokens_per_target_pass)
            .bind(r.n_drafted as i64)
            .bind(r.n_accepted as i64)
            .bind(r.n_iterations as i64)
            .bind(r.n_emitted as i64)
            .bind(r.n_output_mismatch as i64)
            .bind(r.p_mass_max)
            .bind(r.p_mass_mean)
            .bind(r.q_mass_max)
            .bind(r.q_mass_mean)
            .bind(r.draft_ns_per_iteration)
            .bind(r.verify_ns_per_iteration)
            .bind(&r.stats_json)
            .bind(&r.timings_json)
            .bind(&r.engine_build)
            .bind(&r.build_commit)
            .bind(&r.measured_at)
            .bind(&r.hostname)
            .bind(&r.cpu_info)
            .bind(&r.decision)
            .bind(r.gate_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| sql(store, e))?;
        r.id = res.last_insert_rowid();
    }
    if let Some((rec, energy)) = sampler {
        crate::experiments::live::store::insert_tx(store, &mut tx, run_id, rec, &[]).await?;
        for (r, e) in rows.iter().zip(energy) {
            if let Some(e) = e {
                insert_energy_tx(store, &mut tx, "spec_bench_energy", r.id, run_id, e).await?;
            }
        }
    }
    tx.commit().await.map_err(|e| sql(store, e))?;
    Ok(run_id)
}

/// A greedy gate row's `detail_json`: its counters ([`super::run::SpecStats`], what
/// readers parse) and, where a near-tie tolerance was asked for, the batch-shape gap
/// measured before the gate ran and the tolerance the row used.
fn gate_detail(r: &GateRow) -> String {
    let mut v = serde_json::to_value(&r.stats).expect("serialize");
    if let (Some(o), Some(g)) = (v.as_object_mut(), &r.shape_gap) {
        o.insert("shape_gap".into(), serde_json::json!(g));
        o.insert("tie_tolerance".into(), serde_json::json!(r.tie_tolerance));
    }
    v.to_string()
}

fn js<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("plain data serializes")
}

/// Bench cells of one run (all runs when `None`), in insertion order.
///
/// # Errors
/// [`StoreError`] when a row cannot be read back.
pub async fn bench_rows(
    store: &Store,
    run_id: Option<i64>,
) -> Result<Vec<SpecBenchRow>, StoreError> {
    let rows = sqlx::query("SELECT * FROM spec_bench WHERE (? IS NULL OR run_id = ?) ORDER BY id")
        .bind(run_id)
        .bind(run_id)
        .fetch_all(store.pool())
        .await
        .map_err(|e| sql(store, e))?;
    rows.iter()
        .map(|r| {
            let id: i64 = r.get("id");
            let bad = |problem: String| StoreError::Decode {
                path: store.path().display().to_string(),
                table: "spec_bench",
                id,
                problem,
            };
            let de = |col: &str| -> Result<serde_json::Value, StoreError> {
                let s: Option<String> = r.try_get(col).map_err(|e| bad(e.to_string()))?;
                match s {
                    None => Ok(serde_json::Value::Null),
                    Some(s) => serde_json::from_str(&s).map_err(|e| bad(format!("{col}: {e}"))),
                }
            };
            let g = |c: &str| -> Result<Option<f64>, StoreError> {
                r.try_get::<Option<f64>, _>(c)
                    .map_err(|e| bad(e.to_string()))
            };
            let i = |c: &str| -> Result<i64, StoreError> {
                r.try_get::<i64, _>(c).map_err(|e| bad(e.to_string()))
            };
            let s = |c: &str| -> Result<String, StoreError> {
                r.try_get::<String, _>(c).map_err(|e| bad(e.to_string()))
            };
            let from = |v: serde_json::Value, c: &str| -> Result<Vec<f64>, StoreError> {
                serde_json::from_value(v).map_err(|e| bad(format!("{c}: {e}")))
            };
            let sp = de("speedup_samples")?;
            let ts = de("tps_samples")?;
            Ok(SpecBenchRow {
                id,
                run_id: i("run_id")?,
                target_file: s("target_file")?,
                target_sha256: s("target_sha256")?,
                draft_file: r.try_get("draft_file").map_err(|e| bad(e.to_string()))?,
                drafter_kind: s("drafter_kind")?,
                drafter_key: s("drafter_key")?,
                k: i("k")? as usize,
                k_auto: i("k_auto")? != 0,
                category: s("category")?,
                prompt_set_sha256: s("prompt_set_sha256")?,
                prompt_set: r.try_get("prompt_set").map_err(|e| bad(e.to_string()))?,
                prompt_ids: serde_json::from_value(de("prompt_ids")?)
                    .map_err(|e| bad(format!("prompt_ids: {e}")))?,
                max_new: i("max_new")? as usize,
                reps: i("reps")? as usize,
                n_threads: i("n_threads")? as u32,
                tps_samples: if ts.is_null() {
                    None
                } else {
                    Some(from(ts, "tps_samples")?)
                },
                tps_mean: g("tps_mean")?,
                tps_std: g("tps_std")?,
                speedup_samples: if sp.is_null() {
                    None
                } else {
                    Some(from(sp, "speedup_samples")?)
                },
                speedup_mean: g("speedup_mean")?,
                speedup_std: g("speedup_std")?,
                predicted_speedup: g("predicted_speedup")?,
                alpha_calib: g("alpha_calib")?,
                acceptance_rate: g("acceptance_rate")?,
                alpha_hat: g("alpha_hat")?,
                mean_accepted: g("mean_accepted")?,
                tokens_per_target_pass: g("tokens_per_target_pass")?,
                n_drafted: i("n_drafted")? as u64,
                n_accepted: i("n_accepted")? as u64,
                n_iterations: i("n_iterations")? as u64,
                n_emitted: i("n_emitted")? as u64,
                n_output_mismatch: i("n_output_mismatch")? as u64,
                p_mass_max: g("p_mass_max")?.unwrap_or(0.0),
                p_mass_mean: g("p_mass_mean")?.unwrap_or(0.0),
                q_mass_max: g("q_mass_max")?.unwrap_or(0.0),
                q_mass_mean: g("q_mass_mean")?.unwrap_or(0.0),
                draft_ns_per_iteration: g("draft_ns_per_iteration")?,
                verify_ns_per_iteration: g("verify_ns_per_iteration")?,
                stats_json: s("stats_json")?,
                timings_json: r.try_get("timings_json").map_err(|e| bad(e.to_string()))?,
                engine_build: s("engine_build")?,
                build_commit: s("build_commit")?,
                measured_at: s("measured_at")?,
                hostname: s("hostname")?,
                cpu_info: s("cpu_info")?,
                decision: r.try_get("decision").map_err(|e| bad(e.to_string()))?,
                gate_id: r.try_get("gate_id").map_err(|e| bad(e.to_string()))?,
            })
        })
        .collect()
}

/// Stores the cost model's predictions of a set-acceptance run, in one transaction,
/// **before** its timed runs; returns their ids in the order of
/// `cal.predictions`.
///
/// # Errors
/// [`StoreError::Sql`]; nothing is written then.
pub async fn insert_synth_predictions(
    store: &Store,
    hostname: &str,
    target_sha256: &str,
    drafter_key: &str,
    engine_build: &str,
    cal: &super::record::SynthCalibration,
) -> Result<Vec<i64>, StoreError> {
    let created_at = crate::util::now_rfc3339();
    let timings = js(&cal.timings);
    let mut tx = store.begin().await?;
    let mut ids = Vec::with_capacity(cal.predictions.len());
    for p in &cal.predictions {
        let key = match &p.tree {
            Some(t) => super::gate::tree_key(t, drafter_key),
            None => drafter_key.to_string(),
        };
        let res = sqlx::query(
            "INSERT INTO spec_synth_predictions (created_at, hostname, target_sha256, drafter_key, engine_build, alpha_set, k, predicted_speedup, timings_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&created_at)
        .bind(hostname)
        .bind(target_sha256)
        .bind(&key)
        .bind(engine_build)
        .bind(p.alpha)
        .bind(p.k as i64)
        .bind(p.predicted_speedup)
        .bind(&timings)
        .execute(&mut *tx)
        .await
        .map_err(|e| sql(store, e))?;
        ids.push(res.last_insert_rowid());
    }
    tx.commit().await.map_err(|e| sql(store, e))?;
    Ok(ids)
}

const SYNTH_COLS: &[&str] = &[
    "run_id",
    "prediction_id",
    "alpha_set",
    "k",
    "target_file",
    "target_sha256",
    "draft_file",
    "drafter_key",
    "seed",
    "prompt_set_sha256",
    "prompt_set",
    "prompt_ids",
    "max_new",
    "reps",
    "n_threads",
    "n_gpu_layers",
    "tps_samples",
    "tps_mean",
    "tps_std",
    "speedup_samples",
    "speedup_mean",
    "speedup_std",
    "predicted_speedup",
    "predicted_after",
    "alpha_hat",
    "n_tested",
    "n_drafted",
    "n_accepted",
    "n_iterations",
    "n_emitted",
    "n_draft_passes",
    "n_draws",
    "n_right",
    "stats_json",
    "timings_json",
    "engine_build",
    "build_commit",
    "measured_at",
    "hostname",
    "cpu_info",
    "gpu_info",
    "gate_id",
];

/// Stores a set-acceptance run and its rows in one transaction (sets `id`/`run_id`).
/// Rows with a speedup need `prediction_id` and `gate_id` set.
///
/// # Errors
/// [`StoreError::Sql`], including the triggers' refusals (a row without the
/// prediction stored before it, or without the pair's gate); nothing is written then.
pub async fn insert_synth_run(
    store: &Store,
    run: &NewRun,
    rows: &mut [super::record::SpecSynthRow],
    sampler: Option<SynthSampler<'_>>,
) -> Result<i64, StoreError> {
    let mut tx = store.begin().await?;
    let run_id = store.insert_run_tx(&mut tx, run).await?;
    let q = format!(
        "INSERT INTO spec_synth ({}) VALUES ({})",
        SYNTH_COLS.join(", "),
        vec!["?"; SYNTH_COLS.len()].join(", ")
    );
    for r in rows.iter_mut() {
        r.run_id = run_id;
        let res = sqlx::query(sqlx::AssertSqlSafe(q.clone()))
            .bind(run_id)
            .bind(r.prediction_id)
            .bind(r.alpha_set)
            .bind(r.k as i64)
            .bind(&r.target_file)
            .bind(&r.target_sha256)
            .bind(&r.draft_file)
            .bind(&r.drafter_key)
            .bind(r.seed as i64)
            .bind(&r.prompt_set_sha256)
            .bind(&r.prompt_set)
            .bind(js(&r.prompt_ids))
            .bind(r.max_new as i64)
            .bind(r.reps as i64)
            .bind(r.n_threads as i64)
            .bind(r.n_gpu_layers as i64)
            .bind(js(&r.tps_samples))
            .bind(r.tps_mean)
            .bind(r.tps_std)
            .bind(r.speedup_samples.as_ref().map(js))
            .bind(r.speedup_mean)
            .bind(r.speedup_std)
            .bind(r.predicted_speedup)
            .bind(r.predicted_after)
            .bind(r.alpha_hat)
            .bind(r.n_tested as i64)
            .bind(r.n_drafted as i64)
            .bind(r.n_accepted as i64)
            .bind(r.n_iterations as i64)
            .bind(r.n_emitted as i64)
            .bind(r.n_draft_passes as i64)
            .bind(r.n_draws as i64)
            .bind(r.n_right as i64)
            .bind(&r.stats_json)
            .bind(&r.timings_json)
            .bind(&r.engine_build)
            .bind(&r.build_commit)
            .bind(&r.measured_at)
            .bind(&r.hostname)
            .bind(&r.cpu_info)
            .bind(&r.gpu_info)
            .bind(r.gate_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| sql(store, e))?;
        r.id = res.last_insert_rowid();
    }
    if let Some((rec, energy)) = sampler {
        crate::experiments::live::store::insert_tx(store, &mut tx, run_id, rec, &[]).await?;
        for (r, e) in rows.iter().zip(energy) {
            if let Some(e) = e {
                insert_energy_tx(store, &mut tx, "spec_synth_energy", r.id, run_id, e).await?;
            }
        }
    }
    tx.commit().await.map_err(|e| sql(store, e))?;
    Ok(run_id)
}

/// One row's energy into `table` (`spec_bench_energy` or `spec_synth_energy`).
async fn insert_energy_tx(
    store: &Store,
    tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>,
    table: &'static str,
    row_id: i64,
    run_id: i64,
    e: &crate::measure::sampler::session::EnergySummary,
) -> Result<(), StoreError> {
    use crate::store::energy;
    let q = sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {table} (row_id, run_id, {}) VALUES (?, ?, {})",
        energy::column_list(),
        energy::placeholders()
    )))
    .bind(row_id)
    .bind(run_id);
    energy::bind(q, e)
        .execute(&mut **tx)
        .await
        .map_err(|e| sql(store, e))?;
    Ok(())
}

/// The sampler's recording beside a set-acceptance run and each row's energy (in
/// row order; `None`: the row's phases are missing).
pub type SynthSampler<'a> = (
    &'a crate::measure::sampler::session::Recording,
    &'a [Option<crate::measure::sampler::session::EnergySummary>],
);

/// Each row's stored energy (`spec_synth_energy`) of a set-acceptance run, by row id.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn synth_energy(
    store: &Store,
    run_id: i64,
) -> Result<Vec<(i64, crate::measure::sampler::session::EnergySummary)>, StoreError> {
    energy_rows(store, "spec_synth_energy", run_id).await
}

/// Each row's stored energy (`spec_bench_energy`) of a spec-bench run, by row id.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn bench_energy(
    store: &Store,
    run_id: i64,
) -> Result<Vec<(i64, crate::measure::sampler::session::EnergySummary)>, StoreError> {
    energy_rows(store, "spec_bench_energy", run_id).await
}

async fn energy_rows(
    store: &Store,
    table: &'static str,
    run_id: i64,
) -> Result<Vec<(i64, crate::measure::sampler::session::EnergySummary)>, StoreError> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT * FROM {table} WHERE run_id = ? ORDER BY row_id"
    )))
    .bind(run_id)
    .fetch_all(store.pool())
    .await
    .map_err(|e| sql(store, e))?;
    Ok(rows
        .iter()
        .map(|r| (r.get("row_id"), crate::store::energy::read(r, "")))
        .collect())
}

/// Sets `gate_id` on every set-acceptance row with a speedup to the draft model's
/// gate at that `k` ([`unlocking_gate`]).
///
/// # Errors
/// The sentences of the rows no gate unlocks (nothing is set then).
pub fn attach_synth_gates(
    rows: &mut [super::record::SpecSynthRow],
    gates: &[StoredGate],
) -> Result<(), String> {
    let ids = unlocking_gate_ids(
        rows.iter().map(|r| {
            (
                r.speedup_mean.is_some(),
                r.drafter_key.as_str(),
                r.k,
                r.max_new,
            )
        }),
        gates,
    )?;
    for (r, id) in rows.iter_mut().zip(ids) {
        r.gate_id = id;
    }
    Ok(())
}

/// Set-acceptance rows of one run (all runs when `None`), in insertion order.
///
/// # Errors
/// [`StoreError`] naming the table, row and column that cannot be read back.
pub async fn synth_rows(
    store: &Store,
    run_id: Option<i64>,
) -> Result<Vec<super::record::SpecSynthRow>, StoreError> {
    let rows = sqlx::query("SELECT * FROM spec_synth WHERE (? IS NULL OR run_id = ?) ORDER BY id")
        .bind(run_id)
        .bind(run_id)
        .fetch_all(store.pool())
        .await
        .map_err(|e| sql(store, e))?;
    rows.iter()
        .map(|r| {
            let id: i64 = r.get("id");
            let bad = |problem: String| StoreError::Decode {
                path: store.path().display().to_string(),
                table: "spec_synth",
                id,
                problem,
            };
            let i = |c: &str| r.try_get::<i64, _>(c).map_err(|e| bad(format!("{c}: {e}")));
            let s = |c: &str| {
                r.try_get::<String, _>(c)
                    .map_err(|e| bad(format!("{c}: {e}")))
            };
            let f = |c: &str| {
                r.try_get::<Option<f64>, _>(c)
                    .map_err(|e| bad(format!("{c}: {e}")))
            };
            let o = |c: &str| {
                r.try_get::<Option<i64>, _>(c)
                    .map_err(|e| bad(format!("{c}: {e}")))
            };
            let os = |c: &str| {
                r.try_get::<Option<String>, _>(c)
                    .map_err(|e| bad(format!("{c}: {e}")))
            };
            let speedup_samples = match os("speedup_samples")? {
                None => None,
                Some(t) => Some(
                    serde_json::from_str(&t).map_err(|e| bad(format!("speedup_samples: {e}")))?,
                ),
            };
            Ok(super::record::SpecSynthRow {
                id,
                run_id: i("run_id")?,
                prediction_id: o("prediction_id")?,
                alpha_set: f("alpha_set")?,
                k: i("k")? as usize,
                target_file: s("target_file")?,
                target_sha256: s("target_sha256")?,
                draft_file: s("draft_file")?,
                drafter_key: s("drafter_key")?,
                seed: i("seed")? as u64,
                prompt_set_sha256: s("prompt_set_sha256")?,
                prompt_set: r.try_get("prompt_set").map_err(|e| bad(e.to_string()))?,
                prompt_ids: serde_json::from_str(&s("prompt_ids")?)
                    .map_err(|e| bad(format!("prompt_ids: {e}")))?,
                max_new: i("max_new")? as usize,
                reps: i("reps")? as usize,
                n_threads: i("n_threads")? as u32,
                n_gpu_layers: i("n_gpu_layers")? as u32,
                tps_samples: serde_json::from_str(&s("tps_samples")?)
                    .map_err(|e| bad(format!("tps_samples: {e}")))?,
                tps_mean: f("tps_mean")?,
                tps_std: f("tps_std")?,
                speedup_samples,
                speedup_mean: f("speedup_mean")?,
                speedup_std: f("speedup_std")?,
                predicted_speedup: f("predicted_speedup")?,
                predicted_after: f("predicted_after")?,
                alpha_hat: f("alpha_hat")?,
                n_tested: i("n_tested")? as u64,
                n_drafted: i("n_drafted")? as u64,
                n_accepted: i("n_accepted")? as u64,
                n_iterations: i("n_iterations")? as u64,
                n_emitted: i("n_emitted")? as u64,
                n_draft_passes: i("n_draft_passes")? as u64,
                n_draws: i("n_draws")? as u64,
                n_right: i("n_right")? as u64,
                stats_json: s("stats_json")?,
                timings_json: s("timings_json")?,
                engine_build: s("engine_build")?,
                build_commit: s("build_commit")?,
                measured_at: s("measured_at")?,
                hostname: s("hostname")?,
                cpu_info: s("cpu_info")?,
                gpu_info: os("gpu_info")?,
                gate_id: o("gate_id")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::speculative::gate::DrafterKind;
    use crate::experiments::speculative::prompts::{Category, Format};
    use crate::experiments::speculative::run::SpecStats;

    fn run(kind: &str) -> NewRun {
        NewRun {
            command: "memwall spec".into(),
            ..crate::testing::new_run(kind)
        }
    }

    fn gate_row(k: usize, identical: usize) -> GateRow {
        GateRow {
            drafter_key: "draft:bbbbbbbbbbbbbbbb".into(),
            drafter: DrafterKind::DraftModel,
            k,
            n_prompts: 54,
            n_identical: identical,
            first_diff: None,
            stats: SpecStats::default(),
            shape_gap: None,
            tie_tolerance: 0.0,
        }
    }

    fn prov() -> GateProvenance {
        let e = SpecBenchRow::example();
        GateProvenance {
            target_file: e.target_file,
            target_sha256: e.target_sha256,
            prompt_set_sha256: e.prompt_set_sha256,
            prompt_set: e.prompt_set.unwrap_or_default(),
            engine_build: e.engine_build,
            max_new: 32,
            n_prompts_set: 54,
        }
    }

    fn prompts(n: usize) -> Vec<TokenizedPrompt> {
        (0..n)
            .map(|i| TokenizedPrompt {
                id: format!("code-{:02}", i + 1),
                category: Category::Code,
                format: Format::Chat,
                tokens: vec![1, 2, 3],
            })
            .collect()
    }

    /// Stores a gate run of `n` prompts (of the 54-prompt set) at `max_new` tokens,
    /// `identical` of them identical; returns (run id, its greedy gates).
    async fn gate(
        s: &Store,
        k: usize,
        n: usize,
        identical: usize,
        max_new: usize,
    ) -> (i64, Vec<StoredGate>) {
        let row = GateRow {
            n_prompts: n,
            ..gate_row(k, identical)
        };
        let p = GateProvenance { max_new, ..prov() };
        let id = insert_gate_run(s, &run("spec-gate"), &p, &prompts(n), &[row], &[])
            .await
            .unwrap();
        let gates = greedy_gates(s, &p.target_sha256, &p.engine_build, &p.prompt_set_sha256)
            .await
            .unwrap();
        (id, gates)
    }

    async fn store() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("m.db")).await.unwrap();
        (d, s)
    }

    async fn count(s: &Store, table: &str) -> i64 {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) AS n FROM {table}"
        )))
        .fetch_one(s.pool())
        .await
        .unwrap()
        .get("n")
    }

    #[tokio::test]
    async fn a_gates_measured_batch_shape_gap_is_stored_with_its_row() {
        use crate::experiments::speculative::shape::ShapeGap;
        let (_d, s) = store().await;
        let g = ShapeGap {
            rows: 5,
            n_positions: 64,
            max_abs: 6.5e-3,
        };
        let row = GateRow {
            shape_gap: Some(g),
            tie_tolerance: 6.5e-3,
            stats: SpecStats {
                n_tie_breaks: 2,
                ..SpecStats::default()
            },
            ..gate_row(4, 54)
        };
        let p = prov();
        insert_gate_run(
            &s,
            &run("spec-gate"),
            &p,
            &prompts(54),
            &[row, gate_row(2, 54)],
            &[],
        )
        .await
        .unwrap();
        let details: Vec<String> =
            sqlx::query_scalar("SELECT detail_json FROM spec_gates ORDER BY k DESC")
                .fetch_all(s.pool())
                .await
                .unwrap();
        let d: serde_json::Value = serde_json::from_str(&details[0]).unwrap();
        assert_eq!(d["shape_gap"]["max_abs"], 6.5e-3);
        assert_eq!(d["shape_gap"]["rows"], 5);
        assert_eq!(d["shape_gap"]["n_positions"], 64);
        assert!((d["tie_tolerance"].as_f64().unwrap() - 6.5e-3).abs() < 1e-9);
        assert_eq!(d["n_tie_breaks"], 2);
        // A row without a tolerance stores its counters alone.
        let d: serde_json::Value = serde_json::from_str(&details[1]).unwrap();
        assert!(d.get("shape_gap").is_none() && d.get("tie_tolerance").is_none());
        // Readers still parse the counters, and the gates still unlock.
        let gates = greedy_gates(&s, &p.target_sha256, &p.engine_build, &p.prompt_set_sha256)
            .await
            .unwrap();
        assert_eq!(gates.len(), 2);
    }

    #[tokio::test]
    async fn set_acceptance_rows_need_their_prediction_and_the_pairs_gate() {
        use crate::experiments::speculative::cost::Timings;
        use crate::experiments::speculative::synth::{
            self, SynthCalibration, SynthCell, SynthPlan, SynthPrediction, SynthProvenance,
        };
        let (_d, s) = store().await;
        let e = SpecBenchRow::example();
        let cal = SynthCalibration {
            prompt_id: "code-01".into(),
            timings: Timings {
                t_verify_ns: vec![9.0e6, 12.9e6, 13.3e6],
                t_draft_ns: 1.3e6,
                depth: 40,
                overheads: Vec::new(),
                draft_rows_ns: Vec::new(),
                tree_overheads: Vec::new(),
            },
            predictions: vec![SynthPrediction {
                alpha: 0.9,
                k: 2,
                predicted_speedup: 1.5,
                tree: None,
            }],
        };
        let key = "draft:bbbbbbbbbbbbbbbb";
        let ids = insert_synth_predictions(&s, "h", &e.target_sha256, key, &e.engine_build, &cal)
            .await
            .unwrap();
        let plan = SynthPlan {
            alphas: vec![0.9],
            ks: vec![2],
            reps: 2,
            max_new: 32,
            timing_reps: 1,
            seed: 1,
            auto_k: false,
            tie_tolerance: 0.0,
            trees: Vec::new(),
        };
        let st = SpecStats {
            n_iterations: 10,
            n_drafted: 20,
            n_accepted: 17,
            n_rejections: 2,
            n_emitted: 27,
            draft_len_hist: vec![0, 0, 10],
            ..Default::default()
        };
        let cells = vec![
            SynthCell {
                alpha: None,
                k: 0,
                tps: vec![100.0, 102.0],
                speedup: None,
                stats: SpecStats::default(),
                n_draws: 0,
                n_right: 0,
                tree: None,
            },
            SynthCell {
                alpha: Some(0.9),
                k: 2,
                tps: vec![150.0, 160.0],
                speedup: Some(vec![1.5, 1.625]),
                stats: st,
                n_draws: 20,
                n_right: 18,
                tree: None,
            },
        ];
        let prov = SynthProvenance {
            target_file: e.target_file.clone(),
            target_sha256: e.target_sha256.clone(),
            draft_file: "d.gguf".into(),
            drafter_key: key.into(),
            prompt_set_sha256: e.prompt_set_sha256.clone(),
            prompt_set: "builtin:prompts/spec.jsonl".into(),
            engine_build: e.engine_build.clone(),
            n_threads: 16,
            n_gpu_layers: 99,
            measured_at: crate::util::now_rfc3339(),
            hostname: "h".into(),
            cpu_info: "c".into(),
            gpu_info: Some("NVIDIA H200".into()),
        };
        let rows = synth::to_rows(&cells, &cal, Some(&ids), &plan, &["code-01".into()], &prov);
        // No gate → refused by the store itself, nothing written.
        let err = insert_synth_run(&s, &run("spec-synth"), &mut rows.clone(), None)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("without the passed greedy gate"), "{err}");
        assert!(s.runs().await.unwrap().is_empty());
        // The pair's gate at k = 2 unlocks it; the helper finds it.
        let (_, gates) = gate(&s, 2, 54, 54, 32).await;
        let mut gated = rows.clone();
        attach_synth_gates(&mut gated, &gates).unwrap();
        assert_eq!(gated[1].gate_id, Some(gates[0].id));
        // Without the prediction stored before it → refused.
        let mut unpredicted = gated.clone();
        unpredicted[1].prediction_id = None;
        let err = insert_synth_run(&s, &run("spec-synth"), &mut unpredicted, None)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("without the prediction stored before its run"),
            "{err}"
        );
        // A prediction that says something else than the row → refused.
        let mut forged = gated.clone();
        forged[1].predicted_speedup = Some(2.2);
        assert!(
            insert_synth_run(&s, &run("spec-synth"), &mut forged, None)
                .await
                .is_err()
        );
        // With the sampler's recording: no energy counter in it, so energy is NULL
        // with the reason, and the row count is the recording's.
        let rec = crate::measure::sampler::session::Recording {
            hz: 10.0,
            samples: Vec::new(),
            phases: Vec::new(),
            intervals: Vec::new(),
            counters: Vec::new(),
        };
        let none = crate::measure::sampler::session::EnergySummary {
            samples: 0,
            mean_power_w: None,
            energy_j: None,
            j_per_token: None,
            tokens_per_wh: None,
            energy_source: "none".into(),
            reason: Some("RAPL not readable in this VM".into()),
            peak_temp_c: None,
            throttled: None,
            live_dram_gbps: None,
            gpu_mem_util_pct: None,
            ..Default::default()
        };
        let energy = vec![None, Some(none.clone())];
        let run_id = insert_synth_run(&s, &run("spec-synth"), &mut gated, Some((&rec, &energy)))
            .await
            .unwrap();
        let stored = synth_energy(&s, run_id).await.unwrap();
        assert_eq!(stored, vec![(gated[1].id, none)]);
        let back = synth_rows(&s, Some(run_id)).await.unwrap();
        assert_eq!(back, gated);
        assert_eq!(back[1].alpha_set, Some(0.9));
        assert_eq!(back[0].alpha_set, None);
        // Real-acceptance tables never see these rows.
        assert_eq!(count(&s, "spec_bench").await, 0);
        // Predictions are write-once.
        let err = sqlx::query("UPDATE spec_synth_predictions SET predicted_speedup = 3")
            .execute(s.pool())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("never edited"), "{err}");
    }

    #[tokio::test]
    async fn the_store_refuses_a_speedup_without_a_passed_gate() {
        let (_d, s) = store().await;
        // No gate at all → refused, and nothing (not even the run) is written.
        let e = insert_bench_run(&s, &run("spec-bench"), &mut [SpecBenchRow::example()])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("without the gate that unlocks it"), "{e}");
        assert!(s.runs().await.unwrap().is_empty());
        // A failed gate (53/54) → nothing unlocked; naming it points at that gate → refused.
        let (r53, gates) = gate(&s, 4, 54, 53, 32).await;
        assert!(unlocked(&gates, 32).is_empty());
        let e = unlocking_gate(&gates, "draft:bbbbbbbbbbbbbbbb", 4, 32).unwrap_err();
        assert_eq!(
            e,
            format!(
                "draft:bbbbbbbbbbbbbbbb k=4: gate run {r53}: it failed: 53/54 outputs identical"
            )
        );
        let forged = SpecBenchRow {
            gate_id: Some(gates[0].id),
            ..SpecBenchRow::example()
        };
        let e = insert_bench_run(&s, &run("spec-bench"), &mut [forged])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("without the gate that unlocks it"), "{e}");
        // A passed gate for k = 8 does not cover k = 4.
        let (_, gates) = gate(&s, 8, 54, 54, 32).await;
        let mut rows = [SpecBenchRow::example()];
        let e = attach_gates(&mut rows, &gates).unwrap_err();
        assert!(e.contains("k=4: gate run"), "{e}");
        let k8 = gates.iter().find(|g| g.k == 8).unwrap().id;
        let forged = SpecBenchRow {
            gate_id: Some(k8),
            ..SpecBenchRow::example()
        };
        assert!(
            insert_bench_run(&s, &run("spec-bench"), &mut [forged])
                .await
                .is_err()
        );
        // Target-only rows (k = 0) and rows without a speedup need no gate.
        let base = SpecBenchRow {
            k: 0,
            drafter_kind: "none".into(),
            drafter_key: "none".into(),
            speedup_samples: None,
            speedup_mean: None,
            speedup_std: None,
            ..SpecBenchRow::example()
        };
        let acc_only = SpecBenchRow {
            speedup_samples: None,
            speedup_mean: None,
            speedup_std: None,
            ..SpecBenchRow::example()
        };
        insert_bench_run(&s, &run("spec-bench"), &mut [base, acc_only])
            .await
            .unwrap();
        // A complete passed gate for k = 4 → unlocked; the row names it; exact round trip.
        let (_, gates) = gate(&s, 4, 54, 54, 32).await;
        assert_eq!(
            unlocked(&gates, 32),
            vec![
                ("draft:bbbbbbbbbbbbbbbb".to_string(), 4),
                ("draft:bbbbbbbbbbbbbbbb".to_string(), 8)
            ]
        );
        let mut rows = vec![SpecBenchRow::example()];
        attach_gates(&mut rows, &gates).unwrap();
        let g4 = gates.iter().rfind(|g| g.k == 4).unwrap();
        assert!(g4.is_complete() && g4.passed);
        assert_eq!(rows[0].gate_id, Some(g4.id));
        let rid = insert_bench_run(&s, &run("spec-bench"), &mut rows)
            .await
            .unwrap();
        let back = bench_rows(&s, Some(rid)).await.unwrap();
        assert_eq!(back, rows);
        // Another engine build is not covered by that gate.
        let other = SpecBenchRow {
            engine_build: "llama-cpp-sys-2 9.9.9".into(),
            gate_id: Some(g4.id),
            ..SpecBenchRow::example()
        };
        assert!(
            insert_bench_run(&s, &run("spec-bench"), &mut [other])
                .await
                .is_err()
        );
        // Nor another prompt file: the gate covered the bytes of its own (by
        // sha256), whatever a file is called. The lookup finds no gate for it, and a
        // row naming that gate anyway is refused by the store.
        let e = SpecBenchRow::example();
        let other_set = "dd".repeat(32);
        assert!(
            greedy_gates(&s, &e.target_sha256, &e.engine_build, &other_set)
                .await
                .unwrap()
                .is_empty()
        );
        let other = SpecBenchRow {
            prompt_set_sha256: other_set,
            prompt_set: Some("builtin:prompts/spec.jsonl".into()),
            gate_id: Some(g4.id),
            ..SpecBenchRow::example()
        };
        let err = insert_bench_run(&s, &run("spec-bench"), &mut [other])
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("without the gate that unlocks it"), "{err}");
        // Gate rows name the file they covered.
        let named: Vec<Option<String>> =
            sqlx::query_scalar("SELECT DISTINCT prompt_set FROM spec_gates")
                .fetch_all(s.pool())
                .await
                .unwrap();
        assert_eq!(named, [Some("builtin:prompts/spec.jsonl".to_string())]);
        assert_eq!(
            count(&s, "spec_gate_prompts").await,
            54 * 3,
            "one prompt row per gated prompt"
        );
    }

    #[tokio::test]
    async fn a_limit_gate_is_stored_partial_and_unlocks_nothing() {
        let (_d, s) = store().await;
        // `memwall spec gate --limit 6`: 6/6 identical, but 6 of the set's 54 prompts.
        let (partial, gates) = gate(&s, 4, 6, 6, 32).await;
        let g = &gates[0];
        assert_eq!(
            (g.n_prompts, g.n_prompts_set, g.passed),
            (6, Some(54), true)
        );
        assert!(!g.is_complete());
        assert_eq!(
            g.lacks(32),
            vec!["it covered 6 of the prompt set's 54 prompts (a --limit gate is partial)"]
        );
        assert!(unlocked(&gates, 32).is_empty(), "auto may not choose it");
        let mut rows = [SpecBenchRow::example()];
        let e = attach_gates(&mut rows, &gates).unwrap_err();
        assert_eq!(
            e,
            format!(
                "draft:bbbbbbbbbbbbbbbb k=4: gate run {partial}: it covered 6 of the prompt set's 54 prompts (a --limit gate is partial)"
            )
        );
        assert_eq!(rows[0].gate_id, None);
        // Naming the partial gate anyway: the store's trigger refuses it too.
        let forged = SpecBenchRow {
            gate_id: Some(g.id),
            ..SpecBenchRow::example()
        };
        let e = insert_bench_run(&s, &run("spec-bench"), &mut [forged])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("without the gate that unlocks it"), "{e}");
        assert_eq!(s.runs().await.unwrap().len(), 1, "only the gate run");
    }

    #[tokio::test]
    async fn a_gate_at_fewer_tokens_than_the_bench_unlocks_nothing() {
        let (_d, s) = store().await;
        // The whole set, all identical, but 16 tokens per prompt; the bench uses 32.
        let (short, gates) = gate(&s, 4, 54, 54, 16).await;
        assert!(gates[0].is_complete());
        assert!(unlocked(&gates, 32).is_empty());
        assert_eq!(unlocked(&gates, 16).len(), 1, "a 16-token bench is covered");
        let mut rows = [SpecBenchRow::example()];
        assert_eq!(rows[0].max_new, 32);
        let e = attach_gates(&mut rows, &gates).unwrap_err();
        assert_eq!(
            e,
            format!(
                "draft:bbbbbbbbbbbbbbbb k=4: gate run {short}: it generated 16 tokens per prompt, the bench uses 32"
            )
        );
        let forged = SpecBenchRow {
            gate_id: Some(gates[0].id),
            ..SpecBenchRow::example()
        };
        assert!(
            insert_bench_run(&s, &run("spec-bench"), &mut [forged])
                .await
                .is_err()
        );
        // Gates stored before the set size was recorded (NULL) unlock nothing either.
        let old = StoredGate {
            n_prompts_set: None,
            max_new: 32,
            ..gates[0].clone()
        };
        assert_eq!(
            old.lacks(32),
            vec![
                "it was stored before memwall recorded the prompt set's size, so its coverage is unknown"
            ]
        );
    }

    #[tokio::test]
    async fn the_store_refuses_a_row_whose_output_differed() {
        let (_d, s) = store().await;
        let (_, gates) = gate(&s, 4, 54, 54, 32).await;
        let mut rows = [SpecBenchRow {
            n_output_mismatch: 1,
            ..SpecBenchRow::example()
        }];
        attach_gates(&mut rows, &gates).unwrap();
        let e = insert_bench_run(&s, &run("spec-bench"), &mut rows)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("speculative output differed from target-only"),
            "{e}"
        );
        assert_eq!(
            s.runs().await.unwrap().len(),
            1,
            "the bench run was rolled back"
        );
        assert_eq!(count(&s, "spec_bench").await, 0);
    }

    fn auto_off() -> SpecBenchRow {
        SpecBenchRow {
            k: 0,
            k_auto: true,
            reps: 0,
            decision: Some(AUTO_OFF_PREDICTED.into()),
            tps_samples: None,
            tps_mean: None,
            tps_std: None,
            speedup_samples: None,
            speedup_mean: None,
            speedup_std: None,
            predicted_speedup: Some(0.91),
            acceptance_rate: None,
            alpha_hat: None,
            mean_accepted: None,
            tokens_per_target_pass: None,
            n_drafted: 0,
            n_accepted: 0,
            n_iterations: 0,
            n_emitted: 0,
            draft_ns_per_iteration: None,
            verify_ns_per_iteration: None,
            ..SpecBenchRow::example()
        }
    }

    #[tokio::test]
    async fn auto_off_is_stored_as_a_decision_without_samples() {
        let (_d, s) = store().await;
        let mut rows = vec![auto_off()];
        let rid = insert_bench_run(&s, &run("spec-bench"), &mut rows)
            .await
            .unwrap();
        let back = bench_rows(&s, Some(rid)).await.unwrap();
        assert_eq!(back, rows);
        let raw =
            sqlx::query("SELECT decision, tps_samples, tps_mean, speedup_mean FROM spec_bench")
                .fetch_one(s.pool())
                .await
                .unwrap();
        assert_eq!(
            raw.get::<Option<String>, _>("decision").as_deref(),
            Some("off (predicted ≤ 1)")
        );
        assert_eq!(raw.get::<Option<String>, _>("tps_samples"), None);
        assert_eq!(raw.get::<Option<f64>, _>("tps_mean"), None);
        assert_eq!(raw.get::<Option<f64>, _>("speedup_mean"), None);
        assert_eq!(back[0].k_label(), "auto→off (predicted ≤ 1)");
        // A decision carrying samples (the old "1.000 ± 0.000" row) is refused …
        let forged = SpecBenchRow {
            speedup_samples: Some(vec![1.0, 1.0]),
            speedup_mean: Some(1.0),
            speedup_std: Some(0.0),
            ..auto_off()
        };
        let e = insert_bench_run(&s, &run("spec-bench"), &mut [forged])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("a_decision_row_has_no_samples"), "{e}");
        // … and so is a measurement without samples.
        let empty = SpecBenchRow {
            k: 0,
            drafter_kind: "none".into(),
            drafter_key: "none".into(),
            speedup_samples: None,
            speedup_mean: None,
            speedup_std: None,
            tps_samples: None,
            tps_mean: None,
            ..SpecBenchRow::example()
        };
        let e = insert_bench_run(&s, &run("spec-bench"), &mut [empty])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("a_measured_row_has_samples"), "{e}");
        assert_eq!(s.runs().await.unwrap().len(), 1);
    }

    /// A store written before schema 8: its "auto → off" row (target-only samples
    /// and a speedup of 1 by construction) becomes a decision row; its speedup row
    /// is linked to the gate that unlocked it, and that gate's coverage is unknown.
    #[tokio::test]
    async fn migration_8_turns_old_auto_off_rows_into_decisions() {
        use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("old.db");
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(
                SqliteConnectOptions::new()
                    .filename(&path)
                    .create_if_missing(true)
                    .foreign_keys(true),
            )
            .await
            .unwrap();
        sqlx::migrate!("./migrations")
            .run_to(7, &pool)
            .await
            .unwrap();
        let runs = "INSERT INTO runs (kind, started_at, finished_at, build_commit, command, cpu_info, cores_logical, ram_bytes, os, kernel, hostname, host_json) VALUES
            ('spec-gate','a','a','c','x','cpu',2,1,'os','k','h','{}'), ('spec-bench','a','a','c','x','cpu',2,1,'os','k','h','{}')";
        let gate = "INSERT INTO spec_gates (run_id, mode, target_file, target_sha256, drafter_kind, drafter_key, k, prompt_set_sha256, n_prompts, n_identical, max_new, passed, detail_json, engine_build, build_commit, measured_at, hostname, cpu_info)
            VALUES (1,'greedy','t','T','draft-model','dk',4,'P',6,6,16,1,'{}','B','c','m','h','c')";
        let bench = "INSERT INTO spec_bench (run_id,target_file,target_sha256,drafter_kind,drafter_key,k,k_auto,category,prompt_set_sha256,prompt_ids,max_new,reps,n_threads,tps_samples,tps_mean,tps_std,speedup_samples,speedup_mean,speedup_std,predicted_speedup,n_drafted,n_accepted,n_iterations,n_emitted,n_output_mismatch,p_mass_max,p_mass_mean,q_mass_max,q_mass_mean,stats_json,engine_build,build_commit,measured_at,hostname,cpu_info) VALUES
            (2,'t','T','none','none',0,0,'code','P','[]',32,2,2,'[30,31]',30.5,0.7,NULL,NULL,NULL,NULL,0,0,10,10,0,0,0,0,0,'{}','B','c','m','h','c'),
            (2,'t','T','draft-model','dk',4,0,'code','P','[]',32,2,2,'[27,28]',27.5,0.7,'[0.9,0.9]',0.9,0.0,0.95,8,4,3,7,0,0,0,0,0,'{}','B','c','m','h','c'),
            (2,'t','T','draft-model','dk',0,1,'code','P','[]',32,2,2,'[30,31]',30.5,0.7,'[1,1]',1.0,0.0,1.0,0,0,10,10,0,0,0,0,0,'{}','B','c','m','h','c')";
        for q in [runs, gate, bench] {
            sqlx::query(q).execute(&pool).await.unwrap();
        }
        pool.close().await;
        let s = Store::open(&path).await.unwrap();
        let rows = bench_rows(&s, Some(2)).await.unwrap();
        let off = &rows[2];
        assert_eq!(off.decision.as_deref(), Some(AUTO_OFF_PREDICTED));
        assert_eq!((off.k, off.k_auto, off.reps), (0, true, 0));
        assert_eq!((off.tps_samples.as_ref(), off.tps_mean), (None, None));
        assert_eq!(
            (off.speedup_samples.as_ref(), off.speedup_mean),
            (None, None)
        );
        assert_eq!((off.predicted_speedup, off.n_emitted), (None, 0));
        // Measured rows keep their samples; the speedup row names its gate.
        assert_eq!(rows[0].tps_samples, Some(vec![30.0, 31.0]));
        assert_eq!(
            (rows[1].speedup_mean, rows[1].gate_id),
            (Some(0.9), Some(1))
        );
        assert_eq!((rows[0].gate_id, rows[2].gate_id), (None, None));
        let gates = greedy_gates(&s, "T", "B", "P").await.unwrap();
        assert_eq!(gates[0].n_prompts_set, None);
        assert!(
            unlocked(&gates, 16).is_empty(),
            "unknown coverage unlocks nothing"
        );
        assert_eq!(s.dependent_runs(1).await.unwrap(), vec![2]);
    }

    #[tokio::test]
    async fn spec_rows_are_write_once() {
        let (_d, s) = store().await;
        let (_, gates) = gate(&s, 4, 54, 54, 32).await;
        let mut rows = vec![SpecBenchRow::example()];
        attach_gates(&mut rows, &gates).unwrap();
        insert_bench_run(&s, &run("spec-bench"), &mut rows)
            .await
            .unwrap();
        for (q, want) in [
            (
                "UPDATE spec_bench SET speedup_mean = 1.5",
                "spec_bench: rows are write-once",
            ),
            (
                "UPDATE spec_bench SET gate_id = NULL",
                "spec_bench: rows are write-once",
            ),
            (
                "UPDATE spec_gates SET passed = 1, n_identical = 54",
                "spec_gates: rows are write-once",
            ),
            (
                "UPDATE spec_gates SET n_prompts_set = n_prompts",
                "spec_gates: rows are write-once",
            ),
        ] {
            let e = sqlx::query(q)
                .execute(s.pool())
                .await
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{q}: {e}");
        }
        assert_eq!(bench_rows(&s, None).await.unwrap(), rows, "unchanged");
    }

    #[tokio::test]
    async fn a_gate_cannot_be_deleted_while_rows_it_unlocked_exist() {
        let (_d, s) = store().await;
        let (gate_run, gates) = gate(&s, 4, 54, 54, 32).await;
        let bench = |n: usize| {
            let mut rows = vec![SpecBenchRow::example(); n];
            attach_gates(&mut rows, &gates).unwrap();
            rows
        };
        let b1 = insert_bench_run(&s, &run("spec-bench"), &mut bench(1))
            .await
            .unwrap();
        let b2 = insert_bench_run(&s, &run("spec-bench"), &mut bench(2))
            .await
            .unwrap();
        assert_eq!(s.dependent_runs(gate_run).await.unwrap(), vec![b1, b2]);
        assert!(s.dependent_runs(b1).await.unwrap().is_empty());
        // The store API refuses, naming the dependent runs; nothing is deleted.
        let e = s.delete_run(gate_run).await.unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "run {gate_run} is a speculative gate that unlocked the speedup rows of spec-bench run(s) {b1}, {b2}"
            )) && e.contains(&format!("memwall history --delete {gate_run} --cascade")),
            "{e}"
        );
        assert_eq!(s.runs().await.unwrap().len(), 3);
        // Plain SQL cannot get around it either: the trigger refuses the cascade.
        let e = sqlx::query("DELETE FROM runs WHERE id = ?")
            .bind(gate_run)
            .execute(s.pool())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("refusing to delete a gate whose spec-bench speedup rows still exist"),
            "{e}"
        );
        // Deleting a dependent run first is fine; the gate still has one.
        s.delete_run(b1).await.unwrap();
        assert!(s.delete_run(gate_run).await.is_err());
        // The cascading delete removes the gate run and the runs resting on it, and says which.
        assert_eq!(s.delete_run_cascade(gate_run).await.unwrap(), vec![b2]);
        assert!(s.runs().await.unwrap().is_empty());
        assert_eq!(count(&s, "spec_bench").await, 0);
        assert_eq!(count(&s, "spec_gates").await, 0);
        // A gate run nothing rests on deletes plainly.
        let (g2, _) = gate(&s, 4, 6, 6, 32).await;
        s.delete_run(g2).await.unwrap();
    }
}
