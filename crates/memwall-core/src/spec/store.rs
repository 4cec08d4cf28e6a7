//! The speculative-decoding tables (migration `0005_spec.sql`): gates, gated
//! prompts' token counts, bench cells. Every run is written in one transaction with
//! its `runs` row. The store itself refuses a speedup for a configuration without
//! a passed greedy gate (a SQLite trigger), so no code path can record one.

use super::gate::{GateRow, SamplingCheck, TokenizedPrompt};
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
    /// Its sha256.
    pub target_sha256: String,
    /// Prompt set sha256.
    pub prompt_set_sha256: String,
    /// Engine build (`llama-cpp-sys-2 0.1.161`).
    pub engine_build: String,
    /// Tokens generated per prompt.
    pub max_new: usize,
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
    let insert = "INSERT INTO spec_gates (run_id, mode, target_file, target_sha256, drafter_kind, drafter_key, k, prompt_set_sha256, n_prompts, n_identical, max_new, passed, first_diff_json, detail_json, engine_build, build_commit, measured_at, hostname, cpu_info)
                  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
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
            .bind(serde_json::to_string(&r.stats).expect("serialize"))
            .bind(&prov.engine_build)
            .bind(crate::BUILD_COMMIT)
            .bind(&run.finished_at)
            .bind(&run.host.hostname)
            .bind(&run.host.cpu_model)
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

/// `(drafter_key, k)` of every configuration with a passed greedy gate for this
/// target, engine build and prompt set.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn passed_gates(
    store: &Store,
    target_sha256: &str,
    engine_build: &str,
    prompt_set_sha256: &str,
) -> Result<Vec<(String, usize)>, StoreError> {
    let rows = sqlx::query(
        "SELECT DISTINCT drafter_key, k FROM spec_gates WHERE mode = 'greedy' AND passed = 1
         AND target_sha256 = ? AND engine_build = ? AND prompt_set_sha256 = ? ORDER BY drafter_key, k",
    )
    .bind(target_sha256)
    .bind(engine_build)
    .bind(prompt_set_sha256)
    .fetch_all(store.pool())
    .await
    .map_err(|e| sql(store, e))?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                r.get::<String, _>("drafter_key"),
                r.get::<i64, _>("k") as usize,
            )
        })
        .collect())
}

/// One bench cell: a (category, drafter, k) configuration measured over `reps`
/// repetitions. Units in the names; tok/s is decode tokens per second (prefill
/// excluded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecBenchRow {
    /// Row id (set on insert).
    pub id: i64,
    /// Run id (set on insert).
    pub run_id: i64,
    /// Target file name.
    pub target_file: String,
    /// Target sha256.
    pub target_sha256: String,
    /// Draft file name (draft-model cells).
    pub draft_file: Option<String>,
    /// `none` | `draft-model` | `ngram`.
    pub drafter_kind: String,
    /// Drafter identity.
    pub drafter_key: String,
    /// Draft length (0 = target-only).
    pub k: usize,
    /// This cell is `--k auto`'s choice.
    pub k_auto: bool,
    /// Category.
    pub category: String,
    /// Prompt set sha256.
    pub prompt_set_sha256: String,
    /// Prompt ids measured.
    pub prompt_ids: Vec<String>,
    /// Tokens per prompt.
    pub max_new: usize,
    /// Repetitions.
    pub reps: usize,
    /// Threads.
    pub n_threads: u32,
    /// Decode tok/s per repetition.
    pub tps_samples: Vec<f64>,
    /// Mean tok/s.
    pub tps_mean: f64,
    /// Sample std of tok/s.
    pub tps_std: f64,
    /// Speedup per repetition (vs target-only of the same repetition).
    pub speedup_samples: Option<Vec<f64>>,
    /// Mean speedup.
    pub speedup_mean: Option<f64>,
    /// Sample std of the speedup.
    pub speedup_std: Option<f64>,
    /// Cost-model prediction.
    pub predicted_speedup: Option<f64>,
    /// α̂ of the calibration run.
    pub alpha_calib: Option<f64>,
    /// Accepted ÷ drafted.
    pub acceptance_rate: Option<f64>,
    /// Accepted ÷ (accepted + rejections).
    pub alpha_hat: Option<f64>,
    /// Accepted drafted tokens per iteration.
    pub mean_accepted: Option<f64>,
    /// Tokens per target forward pass.
    pub tokens_per_target_pass: Option<f64>,
    /// Drafted tokens.
    pub n_drafted: u64,
    /// Accepted tokens.
    pub n_accepted: u64,
    /// Iterations.
    pub n_iterations: u64,
    /// Emitted tokens.
    pub n_emitted: u64,
    /// Prompts whose output differed from target-only greedy (any repetition).
    pub n_output_mismatch: u64,
    /// Discarded target mass, max.
    pub p_mass_max: f64,
    /// Discarded target mass, mean.
    pub p_mass_mean: f64,
    /// Discarded draft mass, max.
    pub q_mass_max: f64,
    /// Discarded draft mass, mean.
    pub q_mass_mean: f64,
    /// Drafting time per iteration, ns.
    pub draft_ns_per_iteration: Option<f64>,
    /// Verify time per iteration, ns.
    pub verify_ns_per_iteration: Option<f64>,
    /// Summed counters (JSON of [`super::run::SpecStats`]).
    pub stats_json: String,
    /// Cost-model timings of the category (JSON of [`super::cost::Timings`]).
    pub timings_json: Option<String>,
    /// Engine build.
    pub engine_build: String,
    /// memwall commit.
    pub build_commit: String,
    /// When (UTC RFC 3339).
    pub measured_at: String,
    /// Host.
    pub hostname: String,
    /// CPU.
    pub cpu_info: String,
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
];

/// Stores a bench run and its cells in one transaction (sets `id`/`run_id`).
///
/// # Errors
/// [`StoreError::Sql`], including the gate trigger's refusal ("refusing a speedup
/// for a configuration without a passed greedy gate"); nothing is written then.
pub async fn insert_bench_run(
    store: &Store,
    run: &NewRun,
    rows: &mut [SpecBenchRow],
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
            .bind(js(&r.prompt_ids))
            .bind(r.max_new as i64)
            .bind(r.reps as i64)
            .bind(r.n_threads as i64)
            .bind(js(&r.tps_samples))
            .bind(r.tps_mean)
            .bind(r.tps_std)
            .bind(r.speedup_samples.as_ref().map(|s| js(s)))
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
            .execute(&mut *tx)
            .await
            .map_err(|e| sql(store, e))?;
        r.id = res.last_insert_rowid();
    }
    tx.commit().await.map_err(|e| sql(store, e))?;
    Ok(run_id)
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
                prompt_ids: serde_json::from_value(de("prompt_ids")?)
                    .map_err(|e| bad(format!("prompt_ids: {e}")))?,
                max_new: i("max_new")? as usize,
                reps: i("reps")? as usize,
                n_threads: i("n_threads")? as u32,
                tps_samples: from(de("tps_samples")?, "tps_samples")?,
                tps_mean: g("tps_mean")?.unwrap_or(f64::NAN),
                tps_std: g("tps_std")?.unwrap_or(f64::NAN),
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
            })
        })
        .collect()
}

impl SpecBenchRow {
    /// A filled example (tests, docs).
    pub fn example() -> SpecBenchRow {
        SpecBenchRow {
            id: 0,
            run_id: 0,
            target_file: "t.gguf".into(),
            target_sha256: "aa".repeat(32),
            draft_file: Some("d.gguf".into()),
            drafter_kind: "draft-model".into(),
            drafter_key: "draft:bbbbbbbbbbbbbbbb".into(),
            k: 4,
            k_auto: false,
            category: "code".into(),
            prompt_set_sha256: "cc".repeat(32),
            prompt_ids: vec!["code-01".into()],
            max_new: 32,
            reps: 5,
            n_threads: 2,
            tps_samples: vec![30.0, 31.0, 29.0, 30.5, 30.2],
            tps_mean: 30.14,
            tps_std: 0.74,
            speedup_samples: Some(vec![0.9, 0.92, 0.88, 0.91, 0.9]),
            speedup_mean: Some(0.902),
            speedup_std: Some(0.015),
            predicted_speedup: Some(0.95),
            alpha_calib: Some(0.8),
            acceptance_rate: Some(0.7),
            alpha_hat: Some(0.78),
            mean_accepted: Some(2.8),
            tokens_per_target_pass: Some(3.8),
            n_drafted: 400,
            n_accepted: 280,
            n_iterations: 100,
            n_emitted: 380,
            n_output_mismatch: 0,
            p_mass_max: 0.0,
            p_mass_mean: 0.0,
            q_mass_max: 0.0,
            q_mass_mean: 0.0,
            draft_ns_per_iteration: Some(4e7),
            verify_ns_per_iteration: Some(6e7),
            stats_json: "{}".into(),
            timings_json: None,
            engine_build: "llama-cpp-sys-2 0.1.161".into(),
            build_commit: "abc".into(),
            measured_at: "2026-01-01T00:00:00Z".into(),
            hostname: "h".into(),
            cpu_info: "cpu".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::HostInfo;
    use crate::spec::gate::DrafterKind;
    use crate::spec::prompts::{Category, Format};
    use crate::spec::run::SpecStats;
    use crate::units::Bytes;

    fn run(kind: &str) -> NewRun {
        NewRun {
            kind: kind.into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: "2026-01-01T00:01:00Z".into(),
            command: "memwall spec".into(),
            host: HostInfo {
                cpu_model: "cpu".into(),
                cores_physical: 2,
                cores_logical: 2,
                ram: Bytes(1 << 30),
                os: "os".into(),
                kernel: "k".into(),
                arch: "x86_64".into(),
                llc: None,
                gpus: vec![],
                hostname: "h".into(),
            },
            notes: String::new(),
            guard: None,
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
        }
    }

    fn prov() -> GateProvenance {
        let e = SpecBenchRow::example();
        GateProvenance {
            target_file: e.target_file,
            target_sha256: e.target_sha256,
            prompt_set_sha256: e.prompt_set_sha256,
            engine_build: e.engine_build,
            max_new: 24,
        }
    }

    #[tokio::test]
    async fn the_store_refuses_a_speedup_without_a_passed_gate() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("m.db")).await.unwrap();
        // No gate at all → refused, and nothing (not even the run) is written.
        let e = insert_bench_run(&s, &run("spec-bench"), &mut [SpecBenchRow::example()])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("without a passed greedy gate"), "{e}");
        assert!(s.runs().await.unwrap().is_empty());
        // A failed gate (53/54) → still refused.
        let tp = vec![TokenizedPrompt {
            id: "code-01".into(),
            category: Category::Code,
            format: Format::Chat,
            tokens: vec![1, 2, 3],
        }];
        insert_gate_run(&s, &run("spec-gate"), &prov(), &tp, &[gate_row(4, 53)], &[])
            .await
            .unwrap();
        let e = insert_bench_run(&s, &run("spec-bench"), &mut [SpecBenchRow::example()])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("without a passed greedy gate"), "{e}");
        // A passed gate for k = 8 does not cover k = 4.
        insert_gate_run(&s, &run("spec-gate"), &prov(), &tp, &[gate_row(8, 54)], &[])
            .await
            .unwrap();
        assert!(
            insert_bench_run(&s, &run("spec-bench"), &mut [SpecBenchRow::example()])
                .await
                .is_err()
        );
        // Target-only rows (k = 0) and rows without a speedup need no gate.
        let mut base = SpecBenchRow {
            k: 0,
            drafter_kind: "none".into(),
            drafter_key: "none".into(),
            speedup_samples: None,
            speedup_mean: None,
            speedup_std: None,
            ..SpecBenchRow::example()
        };
        let mut acc_only = SpecBenchRow {
            speedup_samples: None,
            speedup_mean: None,
            speedup_std: None,
            ..SpecBenchRow::example()
        };
        insert_bench_run(
            &s,
            &run("spec-bench"),
            &mut [base.clone(), acc_only.clone()],
        )
        .await
        .unwrap();
        // A passed gate for k = 4 → accepted; round trip is exact.
        insert_gate_run(&s, &run("spec-gate"), &prov(), &tp, &[gate_row(4, 54)], &[])
            .await
            .unwrap();
        let mut rows = vec![SpecBenchRow::example()];
        let rid = insert_bench_run(&s, &run("spec-bench"), &mut rows)
            .await
            .unwrap();
        let back = bench_rows(&s, Some(rid)).await.unwrap();
        assert_eq!(back, rows);
        let gates = passed_gates(
            &s,
            &prov().target_sha256,
            &prov().engine_build,
            &prov().prompt_set_sha256,
        )
        .await
        .unwrap();
        assert_eq!(
            gates,
            vec![
                ("draft:bbbbbbbbbbbbbbbb".to_string(), 4),
                ("draft:bbbbbbbbbbbbbbbb".to_string(), 8)
            ]
        );
        // Another engine build is not covered.
        let other = SpecBenchRow {
            engine_build: "llama-cpp-sys-2 9.9.9".into(),
            ..SpecBenchRow::example()
        };
        assert!(
            insert_bench_run(&s, &run("spec-bench"), &mut [other])
                .await
                .is_err()
        );
        base.id = 0;
        acc_only.id = 0;
        let n: i64 = sqlx::query("SELECT COUNT(*) AS n FROM spec_gate_prompts")
            .fetch_one(s.pool())
            .await
            .unwrap()
            .get("n");
        assert_eq!(n, 3, "one prompt row per gate run");
    }
}
