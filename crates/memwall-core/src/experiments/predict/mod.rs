//! Predictions in ink: the calculator's predictions for a planned benchmark are
//! written to the store, time-stamped and hashed, *before* the run starts; after it
//! they are scored against the measured rows (predicted vs measured, % error).
//!
//! **Write-once.** A sheet is one row of `prediction_sheets` (migration 0007). SQL
//! triggers refuse `UPDATE` and `DELETE` on it. Each sheet stores
//! `sha256 = SHA-256("memwall-prediction-v1\n" + prev_sha256 + "\n" + created_at +
//! "\n" + payload_json)`, where `prev_sha256` is the previous sheet's hash (a chain,
//! as in an append-only ledger). [`load_sheet`] recomputes the hash and checks both
//! chain links, so an edit made behind memwall's back (triggers dropped, the payload
//! or time changed, a sheet deleted or replaced) is reported as
//! [`PredictError::Tampered`]. It cannot stop someone who rewrites the whole chain
//! consistently; the hash printed when the sheet was written (keep it in a log or
//! commit message) catches that.
//!
//! **What is predicted.** For each test instance of the plan: the roofline ceiling
//! the bench itself uses ([`crate::roofline::instance_ceiling`]: pp = min(compute roof,
//! bandwidth roof per micro-batch), tg = bandwidth ÷ mean bytes per step at the
//! test's depth and batch), times an `efficiency` the predictor states (1.0 = "the
//! ceiling will be reached"). Roof figures come from *before* the run (stored
//! measurements or a catalogue spec); the bench's own fresh STREAM is not used. For
//! plans with several models, the tg ratio of each model to the first is predicted
//! too (e.g. Q8_0 vs Q4_K_M: the inverse ratio of bytes per step).
//!
//! [`job::sheet_job`] makes and records a sheet for a plan (what `memwall predict
//! make` and `memwall bench --predict` call); [`store`] holds the SQL.

pub mod job;
pub mod store;

pub use store::{list_sheets, load_sheet, record_sheet};

use crate::experiments::bench::{BenchPlan, Instance};
use crate::probe::model::ModelFacts;
use crate::roofline::MachineRoof;
use crate::store::record::BenchRecord;
use crate::store::{Store, StoreError};
use serde::{Deserialize, Serialize};

/// Domain tag of the hash.
pub const HASH_DOMAIN: &str = "memwall-prediction-v1";
/// `prev_sha256` of the first sheet.
pub const GENESIS: &str = "genesis";

/// Errors of predictions.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PredictError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A sheet does not hash to its stored hash, or its chain is broken.
    #[error(
        "prediction sheet {id} was modified after it was recorded: {problem}. Its predictions cannot be trusted; make a new sheet before the next run"
    )]
    Tampered {
        /// Store id of the prediction sheet.
        id: i64,
        /// Which check failed.
        problem: String,
    },
    /// No such sheet or run.
    #[error("{0}")]
    NotFound(String),
    /// The model file could not be read.
    #[error("{0}")]
    Model(String),
    /// A model's GGUF header failed the checks.
    #[error(transparent)]
    Gguf(#[from] crate::probe::gguf::GgufError),
    /// A model file could not be hashed.
    #[error("hashing {path}")]
    Hash {
        /// The model file.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The efficiency is outside what a prediction can state.
    #[error("--efficiency {0}: give the fraction of the ceiling you expect, in (0, 1.5]")]
    Efficiency(f64),
    /// No stored roof to predict from.
    #[error("predictions use the roof measured *before* the run: run `memwall stream` once first")]
    Roof(#[source] Box<crate::experiments::JobError>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictedTest {
    /// Model file name.
    pub model_filename: String,
    /// sha256 of the model file (the match key with bench rows).
    pub model_sha256: String,
    /// Test label (`tg128 @ d512`).
    pub test: String,
    /// Prompt tokens (pp), 0 for tg.
    pub n_prompt: u32,
    /// Generated tokens (tg), 0 for pp.
    pub n_gen: u32,
    /// Tokens already in the KV cache before the test (llama-bench's `-d`).
    pub n_depth: u32,
    /// Sequences decoded in parallel, one token each per step.
    pub n_seqs: u32,
    /// CPU threads the engine ran with (llama-bench's `-t`).
    pub n_threads: u32,
    /// The roofline ceiling, tok/s; `None` (JSON `null`) when a roof it needs was
    /// not measured (see `no_ceiling`).
    pub ceiling_tps: Option<f64>,
    /// `efficiency × ceiling`, tok/s; `None` with the ceiling.
    pub predicted_tps: Option<f64>,
    /// Why there is no ceiling (e.g. no compute peak measured); absent when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_ceiling: Option<String>,
}

/// A predicted ratio of two models' tg rates at the same test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictedRatio {
    /// Test label, e.g. `tg128` or `pp512 @ d4096`.
    pub test: String,
    /// Numerator model file.
    pub numerator: String,
    pub numerator_sha256: String,
    /// Denominator model file (the plan's first model).
    pub denominator: String,
    pub denominator_sha256: String,
    /// Predicted tg(numerator) ÷ tg(denominator).
    pub predicted_ratio: f64,
}

/// What a sheet holds (hashed as JSON exactly as stored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SheetPayload {
    /// Host the predictions are for.
    pub hostname: String,
    /// Where the roof came from (`stored STREAM triad #3 …`, `spec: M4 Pro`).
    pub roof_source: String,
    /// The bandwidth and compute peak the ceilings are computed from.
    pub roof: MachineRoof,
    /// Fraction of the ceiling the predictor expects (1.0 = the ceiling).
    pub efficiency: f64,
    /// The plan's instances.
    pub tests: Vec<PredictedTest>,
    /// tg ratios against the first model.
    pub ratios: Vec<PredictedRatio>,
    /// Free text (the command line).
    pub note: String,
}

/// A stored sheet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sheet {
    /// Store id of the row.
    pub id: i64,
    /// UTC RFC 3339 with milliseconds.
    pub created_at: String,
    /// Previous sheet's hash, or [`GENESIS`].
    pub prev_sha256: String,
    /// This sheet's hash.
    pub sha256: String,
    /// The predictions.
    pub payload: SheetPayload,
}

/// The hash of a sheet's content.
pub fn sheet_hash(prev: &str, created_at: &str, payload_json: &str) -> String {
    crate::util::sha256_bytes(
        format!("{HASH_DOMAIN}\n{prev}\n{created_at}\n{payload_json}").as_bytes(),
    )
}

/// Builds the predictions for `plan` on `roof`. `models[i]` are the facts and
/// sha256 of `plan.models[i]`.
pub fn build_payload(
    plan: &BenchPlan,
    models: &[(ModelFacts, String)],
    roof: &MachineRoof,
    roof_source: &str,
    hostname: &str,
    efficiency: f64,
    note: &str,
) -> SheetPayload {
    let file = |i: usize| {
        plan.models[i]
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let tests: Vec<PredictedTest> = plan
        .instances()
        .iter()
        .map(|inst: &Instance| {
            let (facts, sha) = &models[inst.model];
            let c = crate::roofline::instance_ceiling(facts, &inst.workload(plan), roof);
            let (ceiling, no_ceiling) = (c.ceiling_tps, c.missing_reason);
            PredictedTest {
                model_filename: file(inst.model),
                model_sha256: sha.clone(),
                test: inst.label(),
                n_prompt: inst.n_prompt,
                n_gen: inst.n_gen,
                n_depth: inst.n_depth,
                n_seqs: inst.n_seqs,
                n_threads: inst.n_threads,
                ceiling_tps: ceiling,
                predicted_tps: ceiling.map(|c| efficiency * c),
                no_ceiling,
            }
        })
        .collect();
    let mut ratios = Vec::new();
    if models.len() > 1 {
        for t in tests
            .iter()
            .filter(|t| t.n_gen > 0 && t.model_sha256 != models[0].1)
        {
            let base = tests.iter().find(|b| {
                b.model_sha256 == models[0].1
                    && (b.n_gen, b.n_depth, b.n_seqs, b.n_threads)
                        == (t.n_gen, t.n_depth, t.n_seqs, t.n_threads)
            });
            let both = base.and_then(|b| Some((b, t.predicted_tps?, b.predicted_tps?)));
            if let Some((b, num, den)) = both {
                ratios.push(PredictedRatio {
                    test: t.test.clone(),
                    numerator: t.model_filename.clone(),
                    numerator_sha256: t.model_sha256.clone(),
                    denominator: b.model_filename.clone(),
                    denominator_sha256: b.model_sha256.clone(),
                    predicted_ratio: num / den,
                });
            }
        }
    }
    SheetPayload {
        hostname: hostname.to_string(),
        roof_source: roof_source.to_string(),
        roof: roof.clone(),
        efficiency,
        tests,
        ratios,
        note: note.to_string(),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredTest {
    /// File name of the GGUF model.
    pub model_filename: String,
    /// Test label, e.g. `tg128` or `pp512 @ d4096`.
    pub test: String,
    /// CPU threads the engine ran with (llama-bench's `-t`).
    pub n_threads: u32,
    /// Predicted tok/s (`—` when the sheet had no ceiling for this test).
    pub predicted_tps: Option<f64>,
    /// Measured mean tok/s (`—` when the run has no such row).
    pub measured_tps: Option<f64>,
    /// `(measured − predicted) ÷ predicted × 100`.
    pub error_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredRatio {
    /// Test label, e.g. `tg128`.
    pub test: String,
    /// `numerator ÷ denominator` files.
    pub pair: String,
    /// Predicted ratio.
    pub predicted: f64,
    /// Measured ratio.
    pub measured: Option<f64>,
    pub error_pct: Option<f64>,
}

/// A sheet scored against a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scorecard {
    /// Store id of the prediction sheet.
    pub sheet_id: i64,
    /// Sheet hash (verified).
    pub sheet_sha256: String,
    /// When the sheet was recorded, UTC RFC 3339.
    pub predicted_at: String,
    /// Store id of the run (a `runs` row).
    pub run_id: i64,
    /// When the run started, UTC RFC 3339.
    pub run_started_at: String,
    /// The sheet was written no later than the run started (a real prediction).
    pub recorded_before_run: bool,
    /// One score per predicted test the run measured.
    pub tests: Vec<ScoredTest>,
    /// One score per predicted ratio between two files.
    pub ratios: Vec<ScoredRatio>,
    /// Mean |% error| over the scored tests.
    pub mean_abs_error_pct: Option<f64>,
}

fn pct(measured: f64, predicted: f64) -> f64 {
    (measured - predicted) / predicted * 100.0
}

/// Scores `sheet` against a run's rows (pure). Rows match on model sha256, n_prompt,
/// n_gen, n_depth, n_seqs and n_threads.
pub fn score(sheet: &Sheet, run_id: i64, run_started_at: &str, rows: &[BenchRecord]) -> Scorecard {
    let find = |sha: &str, t: &PredictedTest| {
        rows.iter().find(|r| {
            r.model_sha256 == sha
                && (r.n_prompt, r.n_gen, r.n_depth, r.n_seqs, r.n_threads)
                    == (
                        t.n_prompt as i64,
                        t.n_gen as i64,
                        t.n_depth as i64,
                        t.n_seqs as i64,
                        t.n_threads as i64,
                    )
        })
    };
    let tests: Vec<ScoredTest> = sheet
        .payload
        .tests
        .iter()
        .map(|t| {
            let m = find(&t.model_sha256, t).map(|r| r.avg_ts);
            ScoredTest {
                model_filename: t.model_filename.clone(),
                test: t.test.clone(),
                n_threads: t.n_threads,
                predicted_tps: t.predicted_tps,
                measured_tps: m,
                error_pct: m.zip(t.predicted_tps).map(|(m, p)| pct(m, p)),
            }
        })
        .collect();
    let ratios = sheet
        .payload
        .ratios
        .iter()
        .map(|q| {
            let pick = |sha: &str| {
                sheet
                    .payload
                    .tests
                    .iter()
                    .find(|t| t.model_sha256 == sha && t.test == q.test)
                    .and_then(|t| find(sha, t))
                    .map(|r| r.avg_ts)
            };
            let m = match (pick(&q.numerator_sha256), pick(&q.denominator_sha256)) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                _ => None,
            };
            ScoredRatio {
                test: q.test.clone(),
                pair: format!("{} ÷ {}", q.numerator, q.denominator),
                predicted: q.predicted_ratio,
                measured: m,
                error_pct: m.map(|m| pct(m, q.predicted_ratio)),
            }
        })
        .collect();
    let errs: Vec<f64> = tests.iter().filter_map(|t| t.error_pct).collect();
    let parse = |s: &str| chrono::DateTime::parse_from_rfc3339(s).ok();
    let before = match (parse(&sheet.created_at), parse(run_started_at)) {
        // The run's time has whole seconds: compare at that precision.
        (Some(p), Some(r)) => p.timestamp() <= r.timestamp(),
        _ => false,
    };
    Scorecard {
        sheet_id: sheet.id,
        sheet_sha256: sheet.sha256.clone(),
        predicted_at: sheet.created_at.clone(),
        run_id,
        run_started_at: run_started_at.to_string(),
        recorded_before_run: before,
        tests,
        ratios,
        mean_abs_error_pct: (!errs.is_empty())
            .then(|| errs.iter().map(|e| e.abs()).sum::<f64>() / errs.len() as f64),
    }
}

/// Verifies sheet `sheet_id`, scores it against run `run_id`'s stored rows and
/// stores the scorecard (one row per (sheet, run); re-scoring replaces it).
///
/// # Errors
/// [`PredictError::Tampered`] when the sheet was modified; [`PredictError::NotFound`].
pub async fn score_run(
    store: &Store,
    sheet_id: i64,
    run_id: i64,
) -> Result<Scorecard, PredictError> {
    let sheet = load_sheet(store, sheet_id).await?;
    let started = store.run_started_at(run_id).await?.ok_or_else(|| {
        PredictError::NotFound(format!("no run {run_id}: `memwall history` lists runs"))
    })?;
    let rows = store
        .bench_rows(&crate::store::RowFilter {
            run_id: Some(run_id),
            ..Default::default()
        })
        .await?;
    let card = score(&sheet, run_id, &started, &rows);
    store::insert_score(store, &card).await?;
    Ok(card)
}

/// The scorecard as a Markdown table.
pub fn table(card: &Scorecard) -> String {
    use std::fmt::Write;
    let o = |v: Option<f64>, d: usize| crate::units::or_dash(v, d);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "prediction sheet {} (sha256 {}…, recorded {}) vs run {} (started {}): {}",
        card.sheet_id,
        &card.sheet_sha256[..16.min(card.sheet_sha256.len())],
        card.predicted_at,
        card.run_id,
        card.run_started_at,
        if card.recorded_before_run {
            "recorded before the run, hash verified"
        } else {
            "NOT a prediction: the sheet is newer than the run"
        }
    );
    let _ = writeln!(
        s,
        "\n| model | test | threads | predicted t/s | measured t/s | error % |"
    );
    let _ = writeln!(s, "| --- | --- | ---: | ---: | ---: | ---: |");
    for t in &card.tests {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            t.model_filename,
            t.test,
            t.n_threads,
            o(t.predicted_tps, 2),
            o(t.measured_tps, 2),
            o(t.error_pct, 1)
        );
    }
    if !card.ratios.is_empty() {
        let _ = writeln!(s, "\n| ratio | test | predicted | measured | error % |");
        let _ = writeln!(s, "| --- | --- | ---: | ---: | ---: |");
        for r in &card.ratios {
            let _ = writeln!(
                s,
                "| {} | {} | {:.3} | {} | {} |",
                r.pair,
                r.test,
                r.predicted,
                o(r.measured, 3),
                o(r.error_pct, 1)
            );
        }
    }
    let _ = writeln!(
        s,
        "\nmean |error| {} % (error = (measured − predicted) ÷ predicted)",
        o(card.mean_abs_error_pct, 1)
    );
    s
}

/// The sheet as the lines printed when it is recorded: its id, time and hash, the
/// roof it used, then each predicted test and ratio.
pub fn sheet_text(sheet: &Sheet) -> String {
    use std::fmt::Write;
    let p = &sheet.payload;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "predictions recorded before the run: sheet {} at {}\n  sha256 {}\n  roof: {} ({:.1} GB/s); efficiency {}",
        sheet.id, sheet.created_at, sheet.sha256, p.roof_source, p.roof.bandwidth.0, p.efficiency
    );
    for t in &p.tests {
        let o = |v: Option<f64>| crate::units::or_dash(v, 2);
        let _ = writeln!(
            s,
            "  {:<40} {:<16} t{:<3} predicted {:>9} t/s (ceiling {}){}",
            t.model_filename,
            t.test,
            t.n_threads,
            o(t.predicted_tps),
            o(t.ceiling_tps),
            t.no_ceiling
                .as_ref()
                .map_or(String::new(), |r| format!(": {r}"))
        );
    }
    for r in &p.ratios {
        let _ = writeln!(
            s,
            "  ratio {} ÷ {} {:<12} predicted {:.3}",
            r.numerator, r.denominator, r.test, r.predicted_ratio
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{Gbps, Gflops};

    fn payload(eff: f64) -> SheetPayload {
        SheetPayload {
            hostname: "h".into(),
            roof_source: "given".into(),
            roof: MachineRoof {
                bandwidth: Gbps(40.0),
                stream_id: 0,
                read_bandwidth: None,
                peak_f32: Some(Gflops(100.0)),
                peak_int8: Some(Gflops(200.0)),
                gpu: None,
            },
            efficiency: eff,
            tests: vec![PredictedTest {
                model_filename: "m.gguf".into(),
                model_sha256: "aa".into(),
                test: "tg128".into(),
                n_prompt: 0,
                n_gen: 128,
                n_depth: 0,
                n_seqs: 1,
                n_threads: 2,
                ceiling_tps: Some(100.0),
                predicted_tps: Some(100.0 * eff),
                no_ceiling: None,
            }],
            ratios: vec![],
            note: String::new(),
        }
    }

    /// A one-layer llama GGUF whose one weight tensor is Q8_0.
    pub(super) fn q8_gguf() -> Vec<u8> {
        crate::probe::gguf::testutil::GgufBuilder::default()
            .kv_str("general.architecture", "llama")
            .kv_u32("llama.block_count", 1)
            .kv_u32("llama.embedding_length", 64)
            .kv_u32("llama.attention.head_count", 4)
            .tensor("token_embd.weight", &[64, 10], 0, 0)
            .tensor("blk.0.attn_q.weight", &[64, 64], 8, 2560)
            .data(2560 + 128 * 34)
            .build()
    }

    /// A plan of `model` with pp `n_prompt`, tg128, at depth 0, one sequence, at
    /// each of `n_threads`; llama-bench's defaults otherwise.
    pub(super) fn plan_of(
        model: std::path::PathBuf,
        n_prompt: Vec<u32>,
        n_threads: Vec<u32>,
    ) -> BenchPlan {
        BenchPlan {
            models: vec![model],
            n_prompt,
            n_threads,
            n_gpu_layers: 0,
            ..BenchPlan::llama_bench_defaults()
        }
    }

    async fn store() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("t.db")).await.unwrap();
        (d, s)
    }

    #[tokio::test]
    async fn sheets_chain_and_verify() {
        let (_d, s) = store().await;
        let a = record_sheet(&s, &payload(1.0)).await.unwrap();
        let b = record_sheet(&s, &payload(0.8)).await.unwrap();
        assert_eq!(a.prev_sha256, GENESIS);
        assert_eq!(b.prev_sha256, a.sha256);
        // Independent recomputation of the hash from the stored parts.
        let json = serde_json::to_string(&payload(0.8)).unwrap();
        let hand = crate::util::sha256_bytes(
            format!(
                "memwall-prediction-v1\n{}\n{}\n{json}",
                a.sha256, b.created_at
            )
            .as_bytes(),
        );
        assert_eq!(b.sha256, hand);
        assert_eq!(load_sheet(&s, a.id).await.unwrap().payload, payload(1.0));
        assert_eq!(load_sheet(&s, b.id).await.unwrap().payload.efficiency, 0.8);
    }

    #[tokio::test]
    async fn updates_are_refused_and_tampering_is_detected() {
        let (_d, s) = store().await;
        let a = record_sheet(&s, &payload(1.0)).await.unwrap();
        let b = record_sheet(&s, &payload(1.0)).await.unwrap();
        // The trigger refuses an ordinary edit.
        let e = sqlx::query("UPDATE prediction_sheets SET payload_json = '{}' WHERE id = ?")
            .bind(a.id)
            .execute(s.pool())
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("write-once"), "{e}");
        let e = sqlx::query("DELETE FROM prediction_sheets WHERE id = ?")
            .bind(a.id)
            .execute(s.pool())
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("write-once"), "{e}");
        // Behind memwall's back: drop the trigger, raise the prediction to the result.
        sqlx::query("DROP TRIGGER prediction_sheets_no_update")
            .execute(s.pool())
            .await
            .unwrap();
        let forged = serde_json::to_string(&payload(0.5)).unwrap();
        sqlx::query("UPDATE prediction_sheets SET payload_json = ? WHERE id = ?")
            .bind(&forged)
            .bind(a.id)
            .execute(s.pool())
            .await
            .unwrap();
        let e = load_sheet(&s, a.id).await.unwrap_err().to_string();
        assert!(
            e.contains("sheet 1 was modified") && e.contains("hash"),
            "{e}"
        );
        // Re-hashing the forged sheet does not help: the next sheet's link breaks.
        let rehash = sheet_hash(&a.prev_sha256, &a.created_at, &forged);
        sqlx::query("UPDATE prediction_sheets SET sha256 = ? WHERE id = ?")
            .bind(&rehash)
            .bind(a.id)
            .execute(s.pool())
            .await
            .unwrap();
        let e = load_sheet(&s, a.id).await.unwrap_err().to_string();
        assert!(e.contains("next sheet"), "{e}");
        let e = load_sheet(&s, b.id).await.unwrap_err().to_string();
        assert!(e.contains("previous sheet"), "{e}");
    }

    /// A sheet made without any compute peak (the app's "Measure bandwidth now"
    /// stores none) records its pp predictions as `null` with the reason, loads back
    /// verified and equal, and scores as `—`.
    #[tokio::test]
    async fn a_sheet_without_peaks_round_trips() {
        let b = q8_gguf();
        let g = crate::probe::gguf::Gguf::parse(&b[..], b.len() as u64, "q8.gguf".into()).unwrap();
        let facts = ModelFacts::from_gguf(&g).unwrap();
        let plan = plan_of("q8.gguf".into(), vec![512], vec![2]);
        let roof = MachineRoof {
            bandwidth: Gbps(40.0),
            stream_id: 3,
            read_bandwidth: None,
            peak_f32: None,
            peak_int8: None,
            gpu: None,
        };
        let p = build_payload(
            &plan,
            &[(facts, "aa".into())],
            &roof,
            "stored",
            "h",
            1.0,
            "",
        );
        let pp = &p.tests[0];
        assert_eq!(
            (pp.test.as_str(), pp.ceiling_tps, pp.predicted_tps),
            ("pp512", None, None)
        );
        assert!(
            pp.no_ceiling
                .as_deref()
                .unwrap()
                .starts_with("no compute peak measured"),
            "{pp:?}"
        );
        let tg = &p.tests[1];
        assert!(tg.ceiling_tps.is_some_and(f64::is_finite) && tg.no_ceiling.is_none());
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains(r#""ceiling_tps":null"#) && json.contains(r#""peak_int8":null"#));
        let (_d, s) = store().await;
        let sheet = record_sheet(&s, &p).await.unwrap();
        let back = load_sheet(&s, sheet.id).await.unwrap();
        assert_eq!(back.payload, p);
        let mut r = BenchRecord::example();
        r.model_sha256 = "aa".into();
        (r.n_prompt, r.n_gen, r.n_depth, r.n_seqs, r.n_threads) = (512, 0, 0, 1, 2);
        let card = score(&back, 1, "2099-01-01T00:00:00Z", &[r]);
        assert_eq!(card.tests[0].predicted_tps, None);
        assert_eq!(card.tests[0].error_pct, None);
        assert!(
            table(&card).contains("| q8.gguf | pp512 | 2 | — |"),
            "{}",
            table(&card)
        );
    }

    #[test]
    fn scoring_computes_percent_error_and_ratios() {
        let mut p = payload(1.0);
        let mut t2 = p.tests[0].clone();
        t2.model_filename = "q8.gguf".into();
        t2.model_sha256 = "bb".into();
        t2.predicted_tps = Some(60.0);
        p.tests.push(t2);
        p.ratios.push(PredictedRatio {
            test: "tg128".into(),
            numerator: "q8.gguf".into(),
            numerator_sha256: "bb".into(),
            denominator: "m.gguf".into(),
            denominator_sha256: "aa".into(),
            predicted_ratio: 0.6,
        });
        let sheet = Sheet {
            id: 1,
            created_at: "2026-11-30T10:00:00.000Z".into(),
            prev_sha256: GENESIS.into(),
            sha256: "x".repeat(64),
            payload: p,
        };
        let mut r = BenchRecord::example();
        r.model_sha256 = "aa".into();
        (r.n_prompt, r.n_gen, r.n_depth, r.n_seqs, r.n_threads) = (0, 128, 0, 1, 2);
        r.avg_ts = 80.0;
        let mut r2 = r.clone();
        r2.model_sha256 = "bb".into();
        r2.avg_ts = 50.0;
        let c = score(&sheet, 7, "2026-11-30T10:00:05Z", &[r, r2]);
        assert!(c.recorded_before_run);
        // (80 − 100) / 100 = −20 %; (50 − 60) / 60 = −16.67 %.
        assert!((c.tests[0].error_pct.unwrap() + 20.0).abs() < 1e-9);
        assert!((c.tests[1].error_pct.unwrap() + 16.666_666).abs() < 1e-4);
        // Measured ratio 50/80 = 0.625 vs 0.6: +4.17 %.
        assert!((c.ratios[0].measured.unwrap() - 0.625).abs() < 1e-12);
        assert!((c.ratios[0].error_pct.unwrap() - 4.1667).abs() < 1e-3);
        let late = score(&sheet, 7, "2026-11-30T09:59:59Z", &[]);
        assert!(!late.recorded_before_run);
        assert_eq!(late.tests[0].measured_tps, None);
        assert!(table(&late).contains("NOT a prediction"));
    }
}
