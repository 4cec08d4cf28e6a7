//! The frontier's tables: `frontier_cells` (one row per measured cell) and
//! `frontier_items` (a task cell's items). A cell is written in one transaction with
//! its `runs` row and bench rows, so a killed run leaves no partial cell.

use super::chart::EnergyPoint;
use super::table::ArmEnergy;
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

/// The decode energy of the speed cell stored as run `run_id`: its tg row's
/// `row_energy` (J/token, tokens per Wh, or the sampler's reason for none), or,
/// for a cell measured without the sampler, a reason saying so.
///
/// # Errors
/// Store errors.
pub async fn speed_energy(store: &Store, run_id: i64) -> Result<ArmEnergy, FrontierError> {
    let (e, recorded) = crate::experiments::live::store::decode_energy(store, run_id).await?;
    Ok(ArmEnergy::from_stored(run_id, e.as_ref(), recorded))
}

/// Decode rows of `memwall bench` runs as "arms" for the tokens-per-joule chart where
/// a host has no frontier cells: per host and model size (`model_n_params`), the
/// latest single-sequence tg row at depth 0 of each model (weight format) that has an
/// energy row, largest streamed bytes first. Each group is `(label, points)`, the
/// label `host: model`; only groups with at least two formats are returned.
///
/// # Errors
/// Store errors.
pub async fn bench_energy_arms(
    store: &Store,
) -> Result<Vec<(String, Vec<EnergyPoint>)>, FrontierError> {
    let rows = sqlx::query(
        "SELECT b.hostname AS host, b.run_id AS run_id, b.model_n_params AS n_params, b.model_type AS model_type,
                b.quant AS quant, b.streamed_bytes AS streamed, e.j_per_token AS j, e.tokens_per_wh AS wh, e.reason AS reason
         FROM bench_results b JOIN runs r ON r.id = b.run_id JOIN row_energy e ON e.row_id = b.id
         WHERE r.kind = 'bench' AND b.n_prompt = 0 AND b.n_gen > 0 AND b.n_depth = 0 AND b.n_seqs = 1
         AND b.id = (SELECT MAX(b2.id) FROM bench_results b2 JOIN runs r2 ON r2.id = b2.run_id
                     JOIN row_energy e2 ON e2.row_id = b2.id
                     WHERE r2.kind = 'bench' AND b2.hostname = b.hostname AND b2.model_type = b.model_type
                     AND b2.n_prompt = 0 AND b2.n_gen > 0 AND b2.n_depth = 0 AND b2.n_seqs = 1)
         ORDER BY b.hostname, b.model_n_params, b.streamed_bytes DESC, b.id",
    )
    .fetch_all(store.pool())
    .await
    .map_err(|e| store.sql(e))?;
    let mut groups: Vec<((String, i64), String, Vec<EnergyPoint>)> = Vec::new();
    for r in &rows {
        let key = (r.get::<String, _>("host"), r.get::<i64, _>("n_params"));
        let quant: String = r.get("quant");
        let model: String = r.get("model_type");
        let model = model
            .strip_suffix(quant.as_str())
            .map_or(model.clone(), |m| m.trim_end().to_string());
        let p = EnergyPoint::new(
            quant,
            r.get("run_id"),
            r.get::<i64, _>("streamed").max(0) as u64,
            r.get("j"),
            r.get("wh"),
            r.get("reason"),
        );
        match groups.last_mut() {
            Some(g) if g.0 == key => g.2.push(p),
            _ => {
                let label = format!("{}: {model}", key.0);
                groups.push((key, label, vec![p]))
            }
        }
    }
    Ok(groups
        .into_iter()
        .filter(|g| g.2.len() > 1)
        .map(|(_, l, p)| (l, p))
        .collect())
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
            "frontier cell: {} {} of {}{}",
            arm.arm.quant,
            c.measure,
            cx.source.path.display(),
            c.note
                .as_deref()
                .map(|n| format!("; {n}"))
                .unwrap_or_default()
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
    if let Some((rec, phases)) = &c.sampled {
        let energies = crate::experiments::live::row_energies(rec, &c.bench, phases);
        crate::experiments::live::store::insert_tx(store, &mut tx, run_id, rec, &energies).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::frontier::quant::{Arm, Relation, Source};
    use crate::experiments::frontier::table::{NO_RECORDING, render_markdown};
    use crate::experiments::frontier::{
        FrontierPlan, Measure, SpeedSummary, chart, config_json, load_rows,
    };
    use crate::experiments::live::{Counter, Phase, Recording, Sample, phase_name};
    use crate::store::record::BenchRecord;

    /// Tolerance of the hand-computed energy figures (f64 rounding only).
    const EXACT: f64 = 1e-12;

    fn source() -> Source {
        Source {
            path: "src.gguf".into(),
            facts: crate::probe::model::one_layer_test_facts("src.gguf"),
            sha256: "source-sha".into(),
        }
    }

    fn arm(quant: &str, streamed_bytes: u64) -> ArmInfo {
        ArmInfo {
            arm: Arm {
                key: quant.into(),
                quant: quant.into(),
                path: format!("{quant}.gguf").into(),
                sha256: format!("sha-{quant}"),
                file_bytes: streamed_bytes,
                streamed_bytes: None,
                bits_per_weight: 4.0,
                source_path: "src.gguf".into(),
                source_sha256: "source-sha".into(),
                source_quant: "F16".into(),
                source_bits_per_weight: 16.0,
                relation: Relation::Below,
                made_at: String::new(),
                quantize_ns: 0,
                engine_build: String::new(),
            },
            streamed_bytes,
        }
    }

    fn plan() -> FrontierPlan {
        FrontierPlan {
            source: "src.gguf".into(),
            arms: vec![],
            n_threads: 2,
            reps: 3,
            n_prompt: 512,
            n_gen: 128,
            speed: true,
            ppl: vec![],
            kld: false,
            tasks: vec![],
            remeasure: vec![],
            guard: Default::default(),
            sampler: true,
        }
    }

    /// A speed cell: pp512 and tg128, 3 timed reps of 2 s each. With `joules`, a
    /// recording whose CPU package counter rises by `joules` over the tg phase's 2 s.
    fn cell(joules: Option<f64>) -> NewCell {
        let pp = BenchRecord {
            n_prompt: 512,
            n_gen: 0,
            samples_ns: vec![2_000_000_000; 3],
            ..BenchRecord::example()
        };
        let tg = BenchRecord {
            n_prompt: 0,
            n_gen: 128,
            n_seqs: 1,
            samples_ns: vec![2_000_000_000; 3],
            ..BenchRecord::example()
        };
        let s = SpeedSummary {
            tg_tps: 64.0,
            tg_std: 0.0,
            tg_n: 3,
            tg_ceiling: Some(100.0),
            tg_achieved: Some(0.64),
            pp_tps: 256.0,
            pp_std: 0.0,
            pp_ceiling: None,
            pp_achieved: None,
            bandwidth_gbps: Some(40.0),
            bench_ids: vec![],
        };
        let sampled = joules.map(|j| {
            let at = |t: u64, e: f64| Sample {
                t_ns: t,
                cpu_energy_j: Some(e),
                ..Sample::default()
            };
            // The tg phase 1–7 s: three timed repetitions of 2 s (1–3, 3–5, 5–7 s),
            // a read at each edge, `j` joules in each.
            let rec = Recording {
                hz: 10.0,
                samples: (0..4u64)
                    .map(|i| at((1 + 2 * i) * 1_000_000_000, j * i as f64))
                    .collect(),
                phases: vec![Phase {
                    name: phase_name(1, "tg128"),
                    start_ns: 1_000_000_000,
                    end_ns: 7_000_000_000,
                }],
                intervals: (0..3u64)
                    .map(|i| crate::measure::sampler::session::Interval {
                        phase: phase_name(1, "tg128"),
                        rep: i as u32 + 1,
                        start_ns: (1 + 2 * i) * 1_000_000_000,
                        end_ns: (3 + 2 * i) * 1_000_000_000,
                    })
                    .collect(),
                counters: vec![Counter::available("cpu_package_energy", "fixture")],
            };
            (rec, vec![phase_name(0, "pp512"), phase_name(1, "tg128")])
        });
        NewCell {
            measure: "speed".into(),
            config: config_json(&Measure::Speed, &plan(), None, None),
            value: Some(s.tg_tps),
            value_unc: Some(0.0),
            ci: None,
            n: Some(3),
            result: serde_json::to_value(&s).expect("serialize"),
            items: vec![],
            bench: vec![pp, tg],
            started_at: crate::util::now_rfc3339(),
            guard: None,
            sampled,
            note: None,
        }
    }

    /// A throwaway store with the test source and host, for [`store_cell`].
    struct Fixture {
        _dir: tempfile::TempDir,
        store: Store,
        src: Source,
        host: crate::probe::hw::HostInfo,
    }

    impl Fixture {
        async fn new() -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(&dir.path().join("f.db")).await.unwrap();
            Fixture {
                _dir: dir,
                store,
                src: source(),
                host: crate::testing::host(),
            }
        }
        fn cx(&self) -> CellContext<'_> {
            CellContext {
                store: &self.store,
                host: &self.host,
                source: &self.src,
                command: "test",
                n_threads: 2,
            }
        }
    }

    #[tokio::test]
    async fn a_cells_note_is_stored_in_its_runs_notes() {
        let f = Fixture::new().await;
        let cx = f.cx();
        let a = arm("Q8_0", 800_000_000);
        let note = crate::measure::prompt::fallback_note("q8.gguf");
        let with = store_cell(
            &cx,
            &a,
            NewCell {
                note: Some(note.clone()),
                ..cell(None)
            },
        )
        .await
        .unwrap();
        let without = store_cell(&cx, &arm("Q4_K_M", 450_000_000), cell(None))
            .await
            .unwrap();
        let notes = |id: i64| {
            sqlx::query_scalar::<_, String>(
                "SELECT r.notes FROM runs r JOIN frontier_cells c ON c.run_id = r.id WHERE c.id = ?",
            )
            .bind(id)
            .fetch_one(f.store.pool())
        };
        let n = notes(with).await.unwrap();
        assert!(n.starts_with("frontier cell: Q8_0 speed of "), "{n}");
        assert!(n.ends_with(&format!("; {note}")), "{n}");
        assert!(!notes(without).await.unwrap().contains("chat_template"));
    }

    #[tokio::test]
    async fn planted_energy_gives_the_hand_computed_tokens_per_joule_and_a_missing_one_says_why() {
        let f = Fixture::new().await;
        let cx = f.cx();
        let arms = vec![
            arm("Q8_0", 800_000_000),
            arm("Q4_K_M", 450_000_000),
            arm("Q2_K", 300_000_000),
        ];
        // Q8_0: 100 J in each 2 s repetition = 50 W; 3 × 100 = 300 J over 3 × 128
        // tokens → 300 / 384 = 0.78125 J/token, 1.28 tokens/J, 3600 / 0.78125 = 4608
        // tokens/Wh. Q4_K_M: 60 J per repetition = 30 W; 180 J; 180 / 384 = 0.46875
        // J/token, 2.1333… tokens/J, 7680 tokens/Wh. Q2_K: measured without the sampler.
        store_cell(&cx, &arms[0], cell(Some(100.0))).await.unwrap();
        store_cell(&cx, &arms[1], cell(Some(60.0))).await.unwrap();
        store_cell(&cx, &arms[2], cell(None)).await.unwrap();

        let rows = load_rows(&f.store, &plan(), &f.src, &arms).await.unwrap();
        let e: Vec<_> = rows.iter().map(|r| r.energy.clone().unwrap()).collect();
        let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < EXACT * b.max(1.0);
        assert!(close(e[0].j_per_token, 0.78125), "{:?}", e[0]);
        assert!(close(e[0].tokens_per_wh, 4608.0), "{:?}", e[0]);
        assert!(close(e[0].tokens_per_joule(), 1.28), "{:?}", e[0]);
        assert!(close(e[0].mean_power_w, 50.0), "{:?}", e[0]);
        assert!(close(e[1].j_per_token, 0.46875), "{:?}", e[1]);
        assert!(close(e[1].tokens_per_wh, 7680.0), "{:?}", e[1]);
        assert!(close(e[1].tokens_per_joule(), 384.0 / 180.0), "{:?}", e[1]);
        assert_eq!(
            (e[2].j_per_token, e[2].tokens_per_wh, e[2].row_id),
            (None, None, None)
        );
        assert_eq!(e[2].reason.as_deref(), Some(NO_RECORDING));
        // The energy row is the cell's tg row, written with the cell.
        let tg_id: i64 =
            sqlx::query_scalar("SELECT id FROM bench_results WHERE run_id = ? AND n_prompt = 0")
                .bind(e[0].run_id)
                .fetch_one(f.store.pool())
                .await
                .unwrap();
        assert_eq!(e[0].row_id, Some(tg_id));
        let series = |run: i64| {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM sampler_series WHERE run_id = ?")
                .bind(run)
                .fetch_one(f.store.pool())
        };
        assert_eq!(series(e[0].run_id).await.unwrap(), 4);
        assert_eq!(series(e[2].run_id).await.unwrap(), 0);

        // The table: J/token and tokens/Wh beside tok/s; — and the reason once.
        let md = render_markdown(&rows);
        let line = |arm: &str| {
            md.lines()
                .find(|l| l.starts_with(&format!("| {arm} |")))
                .unwrap()
                .to_string()
        };
        assert!(
            line("Q8_0").contains("| 64.00 ± 0.00 (3) | 64.0% | 0.7812 | 4608 |"),
            "{md}"
        );
        assert!(line("Q4_K_M").contains("| 64.0% | 0.4688 | 7680 |"), "{md}");
        assert!(line("Q2_K").contains("| 64.0% | — | — |"), "{md}");
        assert_eq!(md.matches(NO_RECORDING).count(), 1, "{md}");

        // The chart's data: exactly those tokens per joule, — for Q2_K with its reason.
        let pts = chart::energy_points(&rows);
        assert_eq!(
            pts.iter().map(|p| p.arm.as_str()).collect::<Vec<_>>(),
            ["Q8_0", "Q4_K_M", "Q2_K"]
        );
        assert!(close(pts[0].tokens_per_joule, 1.28));
        assert!(close(pts[1].tokens_per_joule, 384.0 / 180.0));
        assert_eq!(pts[2].tokens_per_joule, None);
        assert_eq!(pts[2].reason.as_deref(), Some(NO_RECORDING));
        let svg = chart::tokens_per_joule_svg(&pts, "t").unwrap();
        assert!(
            svg.contains("Q8_0 1.280 tok/J") && svg.contains("Q4_K_M 2.133 tok/J"),
            "{svg}"
        );
        // The reason is wrapped onto lines, never cut: every word of it is drawn.
        let drawn = |svg: &str, text: &str| text.split_whitespace().all(|w| svg.contains(w));
        assert!(svg.contains("Q2_K: not measured: no live sampler") && drawn(&svg, NO_RECORDING));
        // Nothing measured: the chart says so instead of drawing an empty axis.
        let svg = chart::tokens_per_joule_svg(&pts[2..], "t").unwrap();
        assert!(
            svg.contains("Tokens per joule (tg): not measured")
                && svg.contains("not measured: no live sampler")
                && drawn(&svg, NO_RECORDING),
            "{svg}"
        );

        // Bench rows are not frontier arms: none of these runs is a `bench` run.
        assert!(bench_energy_arms(&f.store).await.unwrap().is_empty());
    }
}
