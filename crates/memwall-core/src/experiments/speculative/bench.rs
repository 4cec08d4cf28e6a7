//! The experiments of `memwall spec bench`.
//!
//! Per prompt category (JSON, code, prose):
//!
//! 1. **Calibration, before any timed run** (on a held-out calibration prompt of the
//!    category): the cost model's times ([`measure_timings`]: target passes over
//!    `j = 1…k_max+1` positions, one draft step, one n-gram lookup; medians) and a
//!    short real speculative run per drafter at `calib_k`, whose α̂ and draft
//!    fraction feed [`cost::predicted_speedup_with`]. `--k auto` picks the best
//!    gated `k` (or off) from the predictions at the one-sided 95 % lower bound of
//!    α ([`cost::wilson_lower`]): a speculation that wins only if α̂ of one short
//!    prompt is exact is not chosen.
//! 2. **Timed runs**: `reps` repetitions; in each, target-only decoding and every
//!    (drafter, k) configuration run over the category's measured prompts (order
//!    rotated per repetition). tok/s = emitted tokens ÷ decode wall time (prefill
//!    excluded, for target-only and speculative alike). Speedup of a repetition =
//!    its tok/s ÷ the same repetition's target-only tok/s; mean ± sample std over
//!    repetitions.
//! 3. Acceptance rate, α̂, accepted length and tokens per target pass are the real
//!    counters of those timed runs ([`SpecStats`]). Every output is compared with
//!    the target-only output of the first repetition: any difference stops the bench
//!    with [`SpecError::OutputMismatch`] (a speedup over different outputs compares
//!    different work), so nothing is stored.
//!
//! `--k auto`'s cell reuses the measured cell of the `k` it chose (the same
//! configuration). When it chose off, that is a decision, not a measurement: the
//! cell has no samples and its row says [`AUTO_OFF_PREDICTED`] (or
//! [`AUTO_OFF_UNGATED`]), never a speedup of 1.

use super::SpecError;
use super::cost::{self, Choice, Timings};
use super::drafter::{DraftModel, Drafter, Ngram, NoDraft};
use super::gate::{DrafterKind, TokenizedPrompt};
use super::prompts::Category;
use super::record::{AUTO_OFF_PREDICTED, AUTO_OFF_UNGATED, SpecBenchRow};
use super::row::argmax_max;
use super::run::{SpecConfig, SpecSession, SpecStats};
use crate::measure::engine::{BatchItem, Engine, TokenId};
use crate::measure::sampler::session::PhaseEvent;
use crate::measure::stats::Observations;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecBenchPlan {
    /// Fixed draft lengths to measure.
    pub ks: Vec<usize>,
    /// Also report `--k auto`'s choice.
    pub auto: bool,
    /// Drafters to compare.
    pub drafters: Vec<DrafterKind>,
    /// Timed repetitions (≥ 5 for a meaningful std).
    pub reps: usize,
    /// Tokens generated per prompt.
    pub max_new: usize,
    /// Draft length of the calibration run.
    pub calib_k: usize,
    /// Tokens of the calibration run.
    pub calib_max_new: usize,
    /// Repetitions of each cost-model timing (median taken).
    pub timing_reps: usize,
    /// n-gram settings.
    pub ngram: Ngram,
    /// `(drafter_key, k)` with a passed gate: auto only picks among these.
    pub gated: Vec<(String, usize)>,
}

/// One category's prompts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategoryInput {
    /// Prompt category: `json`, `code` or `prose`.
    pub category: Category,
    /// Prompts measured.
    pub measured: Vec<TokenizedPrompt>,
    /// Held-out prompt for calibration.
    pub calibration: TokenizedPrompt,
}

/// A drafter's calibration in one category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Which drafter proposes the tokens.
    pub drafter: DrafterKind,
    /// The drafter's identity: kind and settings (or draft model file).
    pub drafter_key: String,
    /// α̂ of the calibration run.
    pub alpha_hat: Option<f64>,
    /// One-sided 95 % Wilson lower bound of α from the same run
    /// ([`cost::wilson_lower`]); `--k auto` decides with it.
    #[serde(default)]
    pub alpha_lo: Option<f64>,
    /// Positions tested in the calibration run (accepted + rejections): the `n` of the bound.
    #[serde(default)]
    pub n_tested: u64,
    /// Fraction of iterations with a draft.
    pub draft_fraction: f64,
    /// The timings used (the drafter's step time differs).
    pub timings: Timings,
    /// Predicted speedup per measured `k`.
    pub predicted: Vec<(usize, f64)>,
    /// `--k auto`'s choice.
    pub choice: Choice,
    /// The measured `k` that a gate unlocks for this drafter (what auto chooses from).
    #[serde(default)]
    pub allowed: Vec<usize>,
    /// Predicted speedup per allowed `k` at the lower bound of α (what auto decides on).
    #[serde(default)]
    pub predicted_lo: Vec<(usize, f64)>,
}

/// One measured configuration of the speculative bench: category × drafter × draft length `k`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecBenchCell {
    /// Prompt category: `json`, `code` or `prose`.
    pub category: Category,
    /// `None` = target-only.
    pub drafter: Option<DrafterKind>,
    /// Drafter key (`none` for target-only).
    pub drafter_key: String,
    /// Draft length (0 = target-only).
    pub k: usize,
    /// `--k auto`'s cell.
    pub k_auto: bool,
    /// `--k auto`'s decision to turn speculation off (no samples then).
    #[serde(default)]
    pub decision: Option<String>,
    /// tok/s per repetition (empty for a decision).
    pub tps: Vec<f64>,
    /// Speedup per repetition (speculative cells).
    pub speedup: Option<Vec<f64>>,
    /// Cost-model prediction.
    pub predicted: Option<f64>,
    /// α̂ of the calibration.
    pub alpha_calib: Option<f64>,
    /// Counters summed over repetitions and prompts.
    pub stats: SpecStats,
    /// Prompts whose output differed from target-only greedy: always 0 in a report
    /// ([`run_bench`] stops at the first difference; the store refuses other values).
    pub n_output_mismatch: u64,
}

/// One category's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategoryReport {
    /// Prompt category: `json`, `code` or `prose`.
    pub category: Category,
    /// Measured prompt ids.
    pub prompt_ids: Vec<String>,
    /// Calibration prompt id.
    pub calibration_id: String,
    /// Calibrations per drafter.
    pub calibrations: Vec<Calibration>,
    /// Cells: target-only first, then per drafter per k, then auto.
    pub cells: Vec<SpecBenchCell>,
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Untimed passes of the same shape before each timed pass of [`measure_timings`].
///
/// llama.cpp's CUDA back end replays a pass as a CUDA graph only once two passes in
/// a row had the same graph properties (batch shape, tensor addresses): after any
/// change it runs the next pass kernel by kernel, captures the one after, and
/// replays from then on. The loop's passes of one configuration all have one shape
/// (target-only decoding: 1 row; a verify at `k`: `k + 1` rows), so they replay.
/// Timing every `j` in turn changed the shape at each pass and timed none of them
/// replayed: on an H200, `t_verify(1)` of a 14B F16 target came out 10.40 ms
/// against the 9.21 ms per token that target-only decoding took in the loop
/// (results/h200/call12), 13 % of every prediction. Two passes of the timed shape
/// first make the timed one a replay, as in the loop; on the CPU they only warm the
/// caches.
pub const SHAPE_WARMUPS: usize = 2;

/// Measures the cost model's times at the depth of `prompt`: for `j = 1…k_max+1`,
/// the target verify of `j` positions with logits and argmax at each
/// ([`argmax_max`], the loop's pick), in passes of at most `max_rows` rows as the
/// loop runs them (`j = 1` is target-only decoding), and one draft step (one
/// position plus argmax). One untimed warm-up round, then `reps` timed rounds, each
/// timing every `j` and the draft step in turn, each timed pass after
/// [`SHAPE_WARMUPS`] untimed passes of its shape; medians. Leaves the engines'
/// caches holding only the prompt prefix (callers must invalidate their KV
/// mirrors).
///
/// # Errors
/// Engine errors.
pub fn measure_timings<T: Engine + ?Sized, D: Engine + ?Sized>(
    target: &mut T,
    draft: Option<&mut D>,
    prompt: &[TokenId],
    k_max: usize,
    reps: usize,
    max_rows: usize,
) -> Result<Timings, SpecError> {
    if prompt.len() < 2 {
        return Err(SpecError::Config(
            "timing needs a prompt of ≥ 2 tokens".into(),
        ));
    }
    let n = prompt.len() - 1;
    target.kv_clear();
    target.prefill(&prompt[..n], 0, 0, false)?;
    let mut draft = draft;
    if let Some(d) = draft.as_mut() {
        d.kv_clear();
        d.prefill(&prompt[..n], 0, 0, false)?;
    }
    let batches: Vec<Vec<BatchItem>> = (1..=k_max + 1)
        .map(|j| {
            (0..j)
                .map(|i| BatchItem {
                    token: prompt[(n + i) % prompt.len()],
                    pos: (n + i) as u32,
                    seq: 0,
                    logits: true,
                })
                .collect()
        })
        .collect();
    // Repetitions are interleaved (every j, then the draft step, per round) so a
    // drift of the machine's speed during calibration moves all times alike instead
    // of biasing the ratios t_verify(j) ÷ t_verify(1) the model rests on.
    let mut xs: Vec<Vec<f64>> = vec![Vec::with_capacity(reps); k_max + 1];
    let mut xd: Vec<f64> = Vec::with_capacity(reps);
    for r in 0..=reps {
        for (j, items) in batches.iter().enumerate() {
            for w in 0..=SHAPE_WARMUPS {
                target.kv_truncate(0, n as u32)?;
                let t0 = Instant::now();
                for chunk in items.chunks(max_rows.max(1)) {
                    target.decode(chunk)?;
                    target.synchronize();
                    for i in 0..chunk.len() {
                        std::hint::black_box(argmax_max(target.logits(i)?));
                    }
                }
                if r > 0 && w == SHAPE_WARMUPS {
                    xs[j].push(t0.elapsed().as_nanos() as f64);
                }
            }
        }
        if let Some(d) = draft.as_mut() {
            for w in 0..=SHAPE_WARMUPS {
                d.kv_truncate(0, n as u32)?;
                let t0 = Instant::now();
                d.decode_one(prompt[n], n as u32, 0)?;
                d.synchronize();
                std::hint::black_box(argmax_max(d.logits(0)?));
                if r > 0 && w == SHAPE_WARMUPS {
                    xd.push(t0.elapsed().as_nanos() as f64);
                }
            }
        }
    }
    target.kv_truncate(0, n as u32)?;
    let t_verify_ns: Vec<f64> = xs.into_iter().map(median).collect();
    let t_draft_ns = match draft {
        Some(d) => {
            d.kv_truncate(0, n as u32)?;
            median(xd)
        }
        None => 0.0,
    };
    Ok(Timings {
        t_verify_ns,
        t_draft_ns,
        depth: n as u32,
        overheads: Vec::new(),
        draft_rows_ns: Vec::new(),
        tree_overheads: Vec::new(),
    })
}

/// Median time of one n-gram lookup over `hist` (draft length `k`), ns.
pub fn ngram_lookup_ns(g: &Ngram, hist: &[TokenId], k: usize) -> f64 {
    let xs: Vec<f64> = (0..101)
        .map(|_| {
            let t0 = Instant::now();
            std::hint::black_box(g.lookup(std::hint::black_box(hist), k));
            t0.elapsed().as_nanos() as f64
        })
        .collect();
    median(xs)
}

/// Runs the bench. `draft` is needed when the plan has the draft-model drafter.
/// `cancel` is read before each category's calibration and each repetition.
///
/// # Errors
/// Engine errors; [`SpecError::Config`] for an empty plan; [`SpecError::Cancelled`]
/// once `cancel` is set.
pub fn run_bench<T: Engine, D: Engine>(
    target: &mut T,
    draft: Option<&mut DraftModel<D>>,
    inputs: &[CategoryInput],
    plan: &SpecBenchPlan,
    on_progress: &mut dyn FnMut(&str),
    cancel: &AtomicBool,
) -> Result<Vec<CategoryReport>, SpecError> {
    run_bench_phased(
        target,
        draft,
        inputs,
        plan,
        on_progress,
        &mut |_| {},
        cancel,
    )
}

/// The sampler's phase of a timed cell in repetition `rep` (0-based):
/// `code target-only #1`, `json draft-model k=4 #2`.
pub fn phase_label(category: &str, drafter_kind: &str, k: usize, rep: usize) -> String {
    if k == 0 {
        format!("{category} target-only #{}", rep + 1)
    } else {
        format!("{category} {drafter_kind} k={k} #{}", rep + 1)
    }
}

/// A stored row's energy from the sampler's recording ([`phase_label`] phases of
/// its repetitions, pooled by [`super::record::pooled_energy`]); `None` for a
/// decision row or when a phase is missing.
pub fn row_energy(
    rec: &crate::measure::sampler::session::Recording,
    row: &SpecBenchRow,
) -> Option<crate::measure::sampler::session::EnergySummary> {
    let tps = row.tps_samples.as_ref()?;
    let names: Vec<String> = (0..tps.len())
        .map(|rep| phase_label(&row.category, &row.drafter_kind, row.k, rep))
        .collect();
    super::record::pooled_energy(rec, &names, tps, row.n_emitted)
}

/// As [`run_bench`], calling `phase(Begin(name))` before each timed cell's prompts
/// in each repetition ([`phase_label`]), `phase(Timed { .. })` with each prompt's
/// timed decode, and `phase(End)` after them, so a sampler
/// beside the run can attribute its reads.
///
/// # Errors
/// As [`run_bench`].
pub fn run_bench_phased<T: Engine, D: Engine>(
    target: &mut T,
    mut draft: Option<&mut DraftModel<D>>,
    inputs: &[CategoryInput],
    plan: &SpecBenchPlan,
    on_progress: &mut dyn FnMut(&str),
    phase: &mut dyn FnMut(PhaseEvent<'_>),
    cancel: &AtomicBool,
) -> Result<Vec<CategoryReport>, SpecError> {
    let stop = || -> Result<(), SpecError> {
        if cancel.load(Ordering::Relaxed) {
            Err(SpecError::Cancelled)
        } else {
            Ok(())
        }
    };
    if plan.reps == 0 || plan.ks.is_empty() || plan.drafters.is_empty() {
        return Err(SpecError::Config(
            "need reps ≥ 1, at least one k and one drafter".into(),
        ));
    }
    if plan.drafters.contains(&DrafterKind::DraftModel) && draft.is_none() {
        return Err(SpecError::Config(
            "the draft-model drafter needs a draft model".into(),
        ));
    }
    let k_max = plan.ks.iter().copied().max().unwrap_or(1).max(plan.calib_k);
    let mut ngram = plan.ngram;
    let mut session = SpecSession::for_target(target);
    let mut reports = Vec::new();
    for input in inputs {
        stop()?;
        let cat = input.category;
        on_progress(&format!(
            "{}: calibrating on {}",
            cat.name(),
            input.calibration.id
        ));
        let timings = measure_timings(
            target,
            draft.as_mut().map(|d| d.engine()),
            &input.calibration.tokens,
            k_max,
            plan.timing_reps,
            session.max_rows_per_pass,
        )?;
        session.invalidate();
        if let Some(d) = draft.as_mut() {
            d.invalidate();
        }
        let mut calibrations = Vec::new();
        for &dk in &plan.drafters {
            let drafter: &mut dyn Drafter = match dk {
                DrafterKind::DraftModel => *draft.as_mut().expect("checked"),
                DrafterKind::Ngram => &mut ngram,
            };
            let key = drafter.key();
            let cfg = SpecConfig::greedy(plan.calib_k, plan.calib_max_new);
            let out = session.generate(target, drafter, &input.calibration.tokens, &cfg)?;
            let alpha = out.stats.alpha_hat();
            let f = out.stats.draft_fraction().unwrap_or(1.0);
            let mut t = timings.clone();
            if dk == DrafterKind::Ngram {
                let mut hist = input.calibration.tokens.clone();
                hist.extend(&out.tokens);
                t.t_draft_ns = ngram_lookup_ns(&ngram, &hist, k_max);
            }
            let predicted: Vec<(usize, f64)> = plan
                .ks
                .iter()
                .filter_map(|&k| {
                    cost::predicted_speedup_with(&t, alpha.unwrap_or(0.0), k, f).map(|s| (k, s))
                })
                .collect();
            let allowed: Vec<usize> = plan
                .ks
                .iter()
                .copied()
                .filter(|&k| plan.gated.iter().any(|(dkey, gk)| *dkey == key && *gk == k))
                .collect();
            let n_tested = out.stats.n_tested();
            let alpha_lo = cost::wilson_lower(out.stats.n_accepted, n_tested, cost::DECISION_Z);
            let choice = cost::choose_k(&t, alpha_lo.unwrap_or(0.0), f, &allowed);
            let predicted_lo = allowed
                .iter()
                .filter_map(|&k| {
                    cost::predicted_speedup_with(&t, alpha_lo.unwrap_or(0.0), k, f).map(|s| (k, s))
                })
                .collect();
            calibrations.push(Calibration {
                drafter: dk,
                drafter_key: key,
                alpha_hat: alpha,
                alpha_lo,
                n_tested,
                draft_fraction: f,
                timings: t,
                predicted,
                choice,
                allowed,
                predicted_lo,
            });
        }

        // Timed repetitions.
        let configs: Vec<(Option<DrafterKind>, usize)> = std::iter::once((None, 0))
            .chain(
                plan.drafters
                    .iter()
                    .flat_map(|&d| plan.ks.iter().map(move |&k| (Some(d), k))),
            )
            .collect();
        let mut tps: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
        let mut stats: Vec<SpecStats> = vec![SpecStats::default(); configs.len()];
        let mut reference: Vec<Vec<TokenId>> = Vec::new();
        let mut no_draft = NoDraft;
        for rep in 0..plan.reps {
            stop()?;
            on_progress(&format!(
                "{}: repetition {}/{}",
                cat.name(),
                rep + 1,
                plan.reps
            ));
            // Target-only first (it defines the reference outputs), the rest rotated.
            let mut order: Vec<usize> = (1..configs.len()).collect();
            if !order.is_empty() {
                let r = rep % order.len();
                order.rotate_left(r);
            }
            order.insert(0, 0);
            for ci in order {
                let (dk, k) = configs[ci];
                let drafter: &mut dyn Drafter = match dk {
                    None => &mut no_draft,
                    Some(DrafterKind::DraftModel) => *draft.as_mut().expect("checked"),
                    Some(DrafterKind::Ngram) => &mut ngram,
                };
                let mut st = SpecStats::default();
                let label = phase_label(cat.name(), dk.map_or("none", |d| d.name()), k, rep);
                phase(PhaseEvent::Begin(&label));
                for (pi, p) in input.measured.iter().enumerate() {
                    let out = session.generate(
                        target,
                        drafter,
                        &p.tokens,
                        &SpecConfig::greedy(k, plan.max_new),
                    )?;
                    if let Some(span) = out.decode_span {
                        phase(PhaseEvent::Timed {
                            phase: &label,
                            rep: pi as u32 + 1,
                            span,
                        });
                    }
                    st.merge(&out.stats);
                    if ci == 0 && rep == 0 {
                        reference.push(out.tokens);
                    } else if out.tokens != reference[pi] {
                        let want = &reference[pi];
                        let pos = want
                            .iter()
                            .zip(&out.tokens)
                            .take_while(|(a, b)| a == b)
                            .count();
                        return Err(SpecError::OutputMismatch {
                            category: cat.name().to_string(),
                            config: match dk {
                                None => format!("target-only repetition {}", rep + 1),
                                Some(d) => format!("{} k={k}", d.name()),
                            },
                            prompt_id: p.id.clone(),
                            position: pos,
                            want: want.get(pos).copied(),
                            got: out.tokens.get(pos).copied(),
                        });
                    }
                }
                phase(PhaseEvent::End);
                tps[ci].push(st.decode_tps().unwrap_or(0.0));
                stats[ci].merge(&st);
            }
        }
        let mut cells = Vec::new();
        for (ci, &(dk, k)) in configs.iter().enumerate() {
            let key = match dk {
                None => "none".to_string(),
                Some(d) => calibrations
                    .iter()
                    .find(|c| c.drafter == d)
                    .map(|c| c.drafter_key.clone())
                    .unwrap_or_default(),
            };
            let cal = dk.and_then(|d| calibrations.iter().find(|c| c.drafter == d));
            let speedup = dk.map(|_| tps[ci].iter().zip(&tps[0]).map(|(s, b)| s / b).collect());
            cells.push(SpecBenchCell {
                category: cat,
                drafter: dk,
                drafter_key: key,
                k,
                k_auto: false,
                decision: None,
                tps: tps[ci].clone(),
                speedup,
                predicted: cal
                    .and_then(|c| c.predicted.iter().find(|(pk, _)| *pk == k).map(|x| x.1)),
                alpha_calib: cal.and_then(|c| c.alpha_hat),
                stats: stats[ci].clone(),
                n_output_mismatch: 0,
            });
        }
        if plan.auto {
            let auto: Vec<SpecBenchCell> = calibrations
                .iter()
                .filter_map(|cal| auto_cell(cat, cal, &cells))
                .collect();
            cells.extend(auto);
        }
        reports.push(CategoryReport {
            category: cat,
            prompt_ids: input.measured.iter().map(|p| p.id.clone()).collect(),
            calibration_id: input.calibration.id.clone(),
            calibrations,
            cells,
        });
    }
    Ok(reports)
}

/// `--k auto`'s cell for one drafter's calibration. When auto speculates, the
/// measured cell of the chosen `k` (a real measurement, relabelled as auto's); when
/// it chose off, a decision without samples: [`AUTO_OFF_PREDICTED`] (every allowed
/// `k` predicted ≤ 1 at the lower bound of α; the predicted value kept is the best of
/// them) or [`AUTO_OFF_UNGATED`] (no gate unlocks any measured `k`). `None` when the
/// chosen `k` has no measured cell.
pub fn auto_cell(
    category: Category,
    cal: &Calibration,
    cells: &[SpecBenchCell],
) -> Option<SpecBenchCell> {
    if cal.choice.k == 0 {
        let best = cal
            .predicted_lo
            .iter()
            .map(|&(_, s)| s)
            .max_by(f64::total_cmp);
        return Some(SpecBenchCell {
            category,
            drafter: Some(cal.drafter),
            drafter_key: cal.drafter_key.clone(),
            k: 0,
            k_auto: true,
            decision: Some(
                if cal.allowed.is_empty() {
                    AUTO_OFF_UNGATED
                } else {
                    AUTO_OFF_PREDICTED
                }
                .to_string(),
            ),
            tps: Vec::new(),
            speedup: None,
            predicted: best,
            alpha_calib: cal.alpha_hat,
            stats: SpecStats::default(),
            n_output_mismatch: 0,
        });
    }
    let base = cells
        .iter()
        .find(|c| !c.k_auto && c.drafter == Some(cal.drafter) && c.k == cal.choice.k)?;
    Some(SpecBenchCell {
        k_auto: true,
        predicted: Some(cal.choice.predicted),
        alpha_calib: cal.alpha_hat,
        ..base.clone()
    })
}

/// Provenance shared by every row of a bench run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchProvenance {
    /// Target file name.
    pub target_file: String,
    /// sha256 of the target GGUF file.
    pub target_sha256: String,
    /// Draft file name.
    pub draft_file: Option<String>,
    pub prompt_set_sha256: String,
    /// The prompt file, as given (a path, or `builtin:prompts/spec.jsonl`).
    pub prompt_set: String,
    /// llama.cpp build the engine was compiled from.
    pub engine_build: String,
    /// CPU threads the engine ran with (llama-bench's `-t`).
    pub n_threads: u32,
    /// Tokens per prompt.
    pub max_new: usize,
    /// Timed repetitions per prompt.
    pub reps: usize,
    /// When it was measured, UTC RFC 3339.
    pub measured_at: String,
    /// Hostname of the machine that measured it.
    pub hostname: String,
    /// CPU model name as the OS reports it.
    pub cpu_info: String,
}

/// Flattens reports into store rows.
pub fn to_rows(reports: &[CategoryReport], prov: &BenchProvenance) -> Vec<SpecBenchRow> {
    let mut rows = Vec::new();
    for r in reports {
        for c in &r.cells {
            // The cost model's times of this cell's drafter: the draft step differs
            // (a draft-model pass vs an n-gram lookup); target-only rows carry the
            // first calibration's (their t_verify is the same measurement).
            let timings = r
                .calibrations
                .iter()
                .find(|cal| Some(cal.drafter) == c.drafter)
                .or(r.calibrations.first())
                .map(|cal| serde_json::to_string(&cal.timings).expect("serialize"));
            let decided = c.decision.is_some();
            let tps = Observations::new(c.tps.clone()).ok();
            let sp = c
                .speedup
                .as_ref()
                .and_then(|s| Observations::new(s.clone()).ok());
            let st = &c.stats;
            let per_iter =
                |ns: u64| (st.n_iterations > 0).then(|| ns as f64 / st.n_iterations as f64);
            rows.push(SpecBenchRow {
                id: 0,
                run_id: 0,
                target_file: prov.target_file.clone(),
                target_sha256: prov.target_sha256.clone(),
                draft_file: (c.drafter == Some(DrafterKind::DraftModel))
                    .then(|| prov.draft_file.clone())
                    .flatten(),
                drafter_kind: c.drafter.map_or("none", |d| d.name()).to_string(),
                drafter_key: c.drafter_key.clone(),
                k: c.k,
                k_auto: c.k_auto,
                category: r.category.name().to_string(),
                prompt_set_sha256: prov.prompt_set_sha256.clone(),
                prompt_set: Some(prov.prompt_set.clone()),
                prompt_ids: r.prompt_ids.clone(),
                max_new: prov.max_new,
                reps: if decided { 0 } else { prov.reps },
                n_threads: prov.n_threads,
                tps_samples: (!decided).then(|| c.tps.clone()),
                tps_mean: tps.as_ref().map(|s| s.mean()),
                tps_std: tps.as_ref().map(|s| s.std_dev()),
                speedup_samples: c.speedup.clone(),
                speedup_mean: sp.as_ref().map(|s| s.mean()),
                speedup_std: sp.as_ref().map(|s| s.std_dev()),
                predicted_speedup: c.predicted,
                alpha_calib: c.alpha_calib,
                acceptance_rate: st.acceptance_rate(),
                alpha_hat: st.alpha_hat(),
                mean_accepted: if c.k > 0 {
                    st.mean_accepted_per_iteration()
                } else {
                    None
                },
                tokens_per_target_pass: st.tokens_per_target_pass(),
                n_drafted: st.n_drafted,
                n_accepted: st.n_accepted,
                n_iterations: st.n_iterations,
                n_emitted: st.n_emitted,
                n_output_mismatch: c.n_output_mismatch,
                p_mass_max: st.p_mass.max,
                p_mass_mean: st.p_mass.mean(),
                q_mass_max: st.q_mass.max,
                q_mass_mean: st.q_mass.mean(),
                draft_ns_per_iteration: per_iter(st.draft_ns),
                verify_ns_per_iteration: per_iter(st.verify_ns),
                stats_json: serde_json::to_string(st).expect("serialize"),
                timings_json: timings,
                engine_build: prov.engine_build.clone(),
                build_commit: crate::BUILD_COMMIT.to_string(),
                measured_at: prov.measured_at.clone(),
                hostname: prov.hostname.clone(),
                cpu_info: prov.cpu_info.clone(),
                decision: c.decision.clone(),
                gate_id: None,
            });
        }
    }
    rows
}

/// The cost model's speedup for a stored cell, recomputed **after** the timed runs
/// with the α̂ and the draft lengths those runs measured (instead of the calibration
/// run's): separates "the model of the cost is wrong" from "α was mispredicted".
/// Uses the runs' draft-length histogram ([`cost::predicted_speedup_hist`]); rows
/// stored before the histogram existed fall back to the draft fraction with
/// full-length drafts ([`cost::predicted_speedup_with`]).
/// `None` for target-only cells or when the timings are missing.
pub fn post_hoc_prediction(r: &SpecBenchRow) -> Option<f64> {
    if r.k == 0 {
        return None;
    }
    let t: Timings = serde_json::from_str(r.timings_json.as_deref()?).ok()?;
    let st: SpecStats = serde_json::from_str(&r.stats_json).ok()?;
    let alpha = st.alpha_hat()?;
    if st.draft_len_hist.iter().any(|&n| n > 0) {
        return cost::predicted_speedup_hist(&t, alpha, &st.draft_len_hist);
    }
    cost::predicted_speedup_with(&t, alpha, r.k, st.draft_fraction()?)
}

fn or_dash(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("—".to_string(), f)
}

/// Markdown table of bench rows (what `memwall spec bench` prints).
pub fn table_md(rows: &[SpecBenchRow]) -> String {
    let mut s = String::from(
        "| category | drafter | k | tok/s (mean ± std) | speedup measured | speedup predicted (before) | predicted with timed α̂ and draft lengths (after) | acceptance (acc/drafted) | α̂ | mean accepted / iter | tokens / target pass | outputs ≠ target |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.category,
            if r.drafter_kind == "none" {
                "target only"
            } else {
                &r.drafter_kind
            },
            r.k_label(),
            match (r.tps_mean, r.tps_std) {
                (Some(m), Some(sd)) => format!("{m:.2} ± {sd:.2}"),
                _ => "—".into(),
            },
            match (r.speedup_mean, r.speedup_std) {
                (Some(m), Some(sd)) => format!("{m:.3} ± {sd:.3}"),
                _ => "—".into(),
            },
            or_dash(r.predicted_speedup, |x| format!("{x:.3}")),
            or_dash(post_hoc_prediction(r), |x| format!("{x:.3}")),
            or_dash(r.acceptance_rate, |x| format!(
                "{:.1} % ({}/{})",
                x * 100.0,
                r.n_accepted,
                r.n_drafted
            )),
            or_dash(r.alpha_hat, |x| format!("{x:.3}")),
            or_dash(r.mean_accepted, |x| format!("{x:.2}")),
            or_dash(r.tokens_per_target_pass, |x| format!("{x:.2}")),
            if r.decision.is_some() {
                "—".to_string()
            } else {
                r.n_output_mismatch.to_string()
            }
        ));
    }
    let cols: Vec<(String, SpecStats)> = rows
        .iter()
        .filter(|r| r.decision.is_none())
        .filter_map(|r| {
            let st = serde_json::from_str::<SpecStats>(&r.stats_json).ok()?;
            let who = if r.drafter_kind == "none" {
                "target only".to_string()
            } else {
                format!("{} k={}", r.drafter_kind, r.k_label())
            };
            Some((format!("{} {who}", r.category), st))
        })
        .collect();
    let bd = super::record::breakdown_md(&cols);
    if !bd.is_empty() {
        s.push('\n');
        s.push_str(&bd);
    }
    s
}

/// Markdown table of each measured row's energy from the sampler beside the run
/// (`—` where no counter was readable; the reasons below).
pub fn energy_md(
    rows: &[SpecBenchRow],
    energy: &[Option<crate::measure::sampler::session::EnergySummary>],
    rec: &crate::measure::sampler::session::Recording,
) -> String {
    let mut s = String::from(
        "| category | drafter | k | mean power W | J/token | tokens/Wh | peak °C | throttled | energy source |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for (r, e) in rows.iter().zip(energy) {
        let Some(e) = e else { continue };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.category,
            r.drafter_kind,
            r.k_label(),
            or_dash(e.mean_power_w, |x| format!("{x:.1}")),
            or_dash(e.j_per_token, |x| format!("{x:.4}")),
            or_dash(e.tokens_per_wh, |x| format!("{x:.0}")),
            or_dash(e.peak_temp_c, |x| format!("{x:.0}")),
            e.throttled.map_or("—", |t| if t { "yes" } else { "no" }),
            e.energy_source,
        ));
    }
    let reasons: Vec<String> = rec
        .counters
        .iter()
        .filter(|c| !c.available)
        .map(|c| {
            format!(
                "{}: {}",
                c.name,
                c.reason.as_deref().unwrap_or("not available")
            )
        })
        .collect();
    if !reasons.is_empty() {
        s.push_str(&format!("\nNot measured: {}\n", reasons.join("; ")));
    }
    s
}

/// Markdown explanation of each category's cost model: the measured times, the
/// verify-cost ratio `t_verify(k+1) ÷ t_verify(1)` that the paper assumes ≈ 1, and
/// `--k auto`'s choice.
pub fn cost_md(reports: &[CategoryReport]) -> String {
    let mut s = String::new();
    for r in reports {
        s.push_str(&format!(
            "### {} (calibrated on {})\n\n",
            r.category.name(),
            r.calibration_id
        ));
        if let Some(c) = r.calibrations.first() {
            let t = &c.timings;
            let base = t.t_verify_ns[0];
            s.push_str(&format!(
                "target decode t_verify(1) = {:.2} ms at depth {}; draft step = {:.2} ms ({:.2}× of a target step)\n\n| positions j | t_verify(j) ms | ÷ t_verify(1) |\n|---|---|---|\n",
                base / 1e6,
                t.depth,
                t.t_draft_ns / 1e6,
                t.t_draft_ns / base
            ));
            for (j, v) in t.t_verify_ns.iter().enumerate() {
                s.push_str(&format!(
                    "| {} | {:.2} | {:.2} |\n",
                    j + 1,
                    v / 1e6,
                    v / base
                ));
            }
            s.push('\n');
        }
        for c in &r.calibrations {
            s.push_str(&format!(
                "- {}: α̂ = {} (one-sided 95 % lower bound {} from {} tested positions), draft fraction {:.2}, draft step {:.3} ms; predicted speedup at α̂ {}; auto (decided at the lower bound) → {}\n",
                c.drafter.name(),
                or_dash(c.alpha_hat, |x| format!("{x:.3}")),
                or_dash(c.alpha_lo, |x| format!("{x:.3}")),
                c.n_tested,
                c.draft_fraction,
                c.timings.t_draft_ns / 1e6,
                c.predicted
                    .iter()
                    .map(|(k, p)| format!("k={k}: {p:.3}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if c.choice.k == 0 && c.allowed.is_empty() {
                    format!("{AUTO_OFF_UNGATED}: no gate unlocks a measured k of this drafter")
                } else if c.choice.k == 0 {
                    format!(
                        "{AUTO_OFF_PREDICTED}: no gated k is predicted to beat target-only decoding at the lower bound of α ({})",
                        c.predicted_lo
                            .iter()
                            .map(|(k, p)| format!("k={k}: {p:.3}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                } else {
                    format!("k = {} (predicted {:.3} at the lower bound)", c.choice.k, c.choice.predicted)
                }
            ));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::speculative::mock::Mock;
    use crate::experiments::speculative::prompts::Format;

    fn tp(id: &str, n: usize, seed: usize) -> TokenizedPrompt {
        TokenizedPrompt {
            id: id.into(),
            category: Category::Code,
            format: Format::Raw,
            tokens: (0..n)
                .map(|j| ((seed * 13 + j * 7) % 30) as TokenId)
                .collect(),
        }
    }

    #[test]
    fn post_hoc_prediction_uses_the_timed_alpha() {
        // t_verify = 30, 40 ms; draft 10 ms; timed runs: 3 accepted, 1 rejection over
        // 4 iterations all with drafts → α̂ = 0.75, f = 1; k = 1:
        // E = 1.75, T = 10 + 40 = 50 → S = 1.75 × 30 / 50 = 1.05.
        let t = Timings {
            t_verify_ns: vec![30e6, 40e6],
            t_draft_ns: 10e6,
            depth: 10,
            overheads: Vec::new(),
            draft_rows_ns: Vec::new(),
            tree_overheads: Vec::new(),
        };
        let st = SpecStats {
            n_iterations: 4,
            n_draft_iterations: 4,
            n_drafted: 4,
            n_accepted: 3,
            n_rejections: 1,
            ..Default::default()
        };
        let r = SpecBenchRow {
            k: 1,
            timings_json: Some(serde_json::to_string(&t).unwrap()),
            stats_json: serde_json::to_string(&st).unwrap(),
            ..SpecBenchRow::example()
        };
        assert!((post_hoc_prediction(&r).unwrap() - 1.05).abs() < 1e-12);
        assert_eq!(
            post_hoc_prediction(&SpecBenchRow { k: 0, ..r.clone() }),
            None
        );
        // With the draft-length histogram: k = 1, 2 iterations drafted 1 token (1
        // accepted, 1 rejected → α̂ = 0.5), 2 had no draft. E = 2·1 + 2·1.5 = 5,
        // T = 2·30 + 2·(10 + 40) = 160 → S = 5 × 30 / 160 = 0.9375.
        let st = SpecStats {
            n_iterations: 4,
            n_draft_iterations: 2,
            n_drafted: 2,
            n_accepted: 1,
            n_rejections: 1,
            draft_len_hist: vec![2, 2],
            ..Default::default()
        };
        let r = SpecBenchRow {
            stats_json: serde_json::to_string(&st).unwrap(),
            ..r
        };
        assert!((post_hoc_prediction(&r).unwrap() - 0.9375).abs() < 1e-12);
    }

    #[test]
    fn bench_on_the_toy_counts_real_acceptance_and_matches_outputs() {
        let mut t = Mock::new(30, 4.0);
        let mut dm = DraftModel::new(
            {
                let mut m = Mock::new(30, 4.0);
                m.noise = 1.0;
                m
            },
            "draft:mock".into(),
        );
        let plan = SpecBenchPlan {
            ks: vec![1, 4],
            auto: true,
            drafters: vec![DrafterKind::DraftModel, DrafterKind::Ngram],
            reps: 3,
            max_new: 20,
            calib_k: 4,
            calib_max_new: 16,
            timing_reps: 2,
            ngram: Ngram::default(),
            gated: vec![("draft:mock".into(), 1), ("draft:mock".into(), 4)],
        };
        let input = CategoryInput {
            category: Category::Code,
            measured: vec![tp("a", 5, 1), tp("b", 7, 2)],
            calibration: tp("c", 6, 3),
        };
        let reps = run_bench(
            &mut t,
            Some(&mut dm),
            &[input],
            &plan,
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .unwrap();
        let r = &reps[0];
        // target-only + 2 drafters × 2 k + auto for each drafter.
        assert_eq!(r.cells.len(), 1 + 4 + 2);
        for c in &r.cells {
            assert_eq!(c.n_output_mismatch, 0, "{c:?}");
            if c.decision.is_some() {
                // auto → off: a decision, nothing measured under its name.
                assert!(c.tps.is_empty() && c.speedup.is_none(), "{c:?}");
                assert_eq!(c.stats, SpecStats::default());
                continue;
            }
            assert_eq!(c.tps.len(), 3);
            // 2 prompts × 20 tokens × 3 reps.
            assert_eq!(c.stats.n_emitted, 120);
        }
        // The draft-model k=4 cell: acceptance is accepted/drafted of the real runs.
        let c = r
            .cells
            .iter()
            .find(|c| c.drafter == Some(DrafterKind::DraftModel) && c.k == 4 && !c.k_auto)
            .unwrap();
        let st = &c.stats;
        assert_eq!(st.n_emitted, st.n_accepted + st.n_iterations);
        assert!(st.n_drafted > 0);
        // n-gram auto only picks gated k: none gated → off.
        let auto_ng = r
            .cells
            .iter()
            .find(|c| c.k_auto && c.drafter == Some(DrafterKind::Ngram))
            .unwrap();
        assert_eq!(auto_ng.k, 0);
        assert_eq!(auto_ng.decision.as_deref(), Some(AUTO_OFF_UNGATED));
        // Distinct draft-step times per drafter (the measured ones could coincide on
        // the toy), so rows carrying the wrong drafter's timings are caught below.
        let mut reps = reps;
        for (i, c) in reps[0].calibrations.iter_mut().enumerate() {
            c.timings.t_draft_ns = 1000.0 * (i + 1) as f64;
        }
        let r = &reps[0];
        let rows = to_rows(
            &reps,
            &BenchProvenance {
                target_file: "t".into(),
                target_sha256: "s".into(),
                draft_file: Some("d".into()),
                prompt_set_sha256: "p".into(),
                prompt_set: "p.jsonl".into(),
                engine_build: "mock".into(),
                n_threads: 1,
                max_new: 20,
                reps: 3,
                measured_at: "now".into(),
                hostname: "h".into(),
                cpu_info: "c".into(),
            },
        );
        assert_eq!(rows.len(), 7);
        // Each drafter's rows carry that drafter's calibration times (the n-gram
        // lookup, not the draft model's step), so the post-hoc prediction is its own.
        for row in rows.iter().filter(|x| x.k > 0) {
            let cal = r
                .calibrations
                .iter()
                .find(|c| c.drafter_key == row.drafter_key)
                .unwrap();
            let t: Timings = serde_json::from_str(row.timings_json.as_deref().unwrap()).unwrap();
            assert_eq!(t, cal.timings, "{}", row.drafter_key);
        }
        let md = table_md(&rows);
        assert!(md.contains("| code | target only | — |"), "{md}");
        assert!(
            md.contains("| code | ngram | auto→off (no gated k) | — | — |"),
            "{md}"
        );
        assert!(cost_md(&reps).contains("t_verify(1)"));
    }

    fn plan_k2(auto: bool) -> SpecBenchPlan {
        SpecBenchPlan {
            ks: vec![2],
            auto,
            drafters: vec![DrafterKind::DraftModel],
            reps: 2,
            max_new: 12,
            calib_k: 2,
            calib_max_new: 8,
            timing_reps: 1,
            ngram: Ngram::default(),
            gated: vec![("draft:mock".into(), 2)],
        }
    }

    #[test]
    fn the_phased_bench_marks_one_closed_phase_per_cell_and_repetition() {
        let mut t = Mock::new(30, 4.0);
        let mut dm = DraftModel::new(Mock::new(30, 4.0), "draft:mock".into());
        let input = CategoryInput {
            category: Category::Code,
            measured: vec![tp("a", 5, 1)],
            calibration: tp("c", 6, 3),
        };
        let mut phases: Vec<Option<String>> = Vec::new();
        let reps = run_bench_phased(
            &mut t,
            Some(&mut dm),
            &[input],
            &plan_k2(false),
            &mut |_| {},
            &mut |e| {
                if let Some(p) = e.mark() {
                    phases.push(p.map(str::to_string))
                }
            },
            &AtomicBool::new(false),
        )
        .unwrap();
        // 2 cells (target-only, draft-model k=2) × 2 repetitions, each opened and closed.
        assert_eq!(
            phases,
            [
                Some("code target-only #1"),
                None,
                Some("code draft-model k=2 #1"),
                None,
                Some("code target-only #2"),
                None,
                Some("code draft-model k=2 #2"),
                None
            ]
            .map(|p| p.map(str::to_string))
        );
        assert_eq!(reps[0].cells.len(), 2);
    }

    #[test]
    fn the_bench_stops_before_the_next_repetition_once_cancelled() {
        let mut t = Mock::new(30, 4.0);
        let mut dm = DraftModel::new(Mock::new(30, 4.0), "draft:mock".into());
        let input = CategoryInput {
            category: Category::Code,
            measured: vec![tp("a", 5, 1)],
            calibration: tp("c", 6, 3),
        };
        let stop = AtomicBool::new(false);
        let mut seen = Vec::new();
        let r = run_bench(
            &mut t,
            Some(&mut dm),
            &[input],
            &plan_k2(false),
            &mut |m| {
                seen.push(m.to_string());
                if m.contains("repetition 1/") {
                    stop.store(true, Ordering::Relaxed);
                }
            },
            &stop,
        );
        assert!(matches!(r, Err(SpecError::Cancelled)), "{r:?}");
        assert_eq!(
            seen,
            ["code: calibrating on c", "code: repetition 1/2"],
            "the second repetition never started"
        );
    }

    #[test]
    fn spec_bench_fails_loudly_when_speculative_output_diverges() {
        // The target's batched verify passes are rigged to disagree with its
        // one-position passes: target-only decoding is right, speculative is not.
        let mut t = crate::experiments::speculative::mock::Diverging(Mock::new(30, 4.0));
        let mut dm = DraftModel::new(Mock::new(30, 4.0), "draft:mock".into());
        let input = CategoryInput {
            category: Category::Code,
            measured: vec![tp("a", 5, 1), tp("b", 7, 2)],
            calibration: tp("c", 6, 3),
        };
        let mut seen = Vec::new();
        let e = run_bench(
            &mut t,
            Some(&mut dm),
            &[input],
            &plan_k2(true),
            &mut |m| seen.push(m.to_string()),
            &AtomicBool::new(false),
        )
        .unwrap_err();
        match &e {
            SpecError::OutputMismatch {
                category,
                config,
                prompt_id,
                position,
                got,
                ..
            } => {
                assert_eq!(
                    (category.as_str(), config.as_str(), prompt_id.as_str()),
                    ("code", "draft-model k=2", "a")
                );
                assert_eq!(*position, 0, "the first verify pass is batched");
                assert_eq!(*got, Some(0), "the rigged pass moves the argmax to 0");
            }
            other => panic!("want OutputMismatch, got {other:?}"),
        }
        let msg = e.to_string();
        assert!(
            msg.contains("differs from target-only decoding on prompt a")
                && msg.contains("stores nothing"),
            "{msg}"
        );
        // It stopped in the first repetition: no report exists to be stored.
        assert_eq!(
            seen.last().map(String::as_str),
            Some("code: repetition 1/2")
        );
    }

    fn calibration(choice_k: usize, allowed: Vec<usize>, lo: Vec<(usize, f64)>) -> Calibration {
        Calibration {
            drafter: DrafterKind::DraftModel,
            drafter_key: "draft:mock".into(),
            alpha_hat: Some(0.6),
            alpha_lo: Some(0.45),
            n_tested: 40,
            draft_fraction: 1.0,
            timings: Timings {
                t_verify_ns: vec![30e6, 45e6, 60e6],
                t_draft_ns: 12e6,
                depth: 10,
                overheads: Vec::new(),
                draft_rows_ns: Vec::new(),
                tree_overheads: Vec::new(),
            },
            predicted: vec![(2, 0.95)],
            choice: Choice {
                k: choice_k,
                predicted: if choice_k == 0 { 1.0 } else { 1.2 },
            },
            allowed,
            predicted_lo: lo,
        }
    }

    fn measured_k2() -> SpecBenchCell {
        SpecBenchCell {
            category: Category::Code,
            drafter: Some(DrafterKind::DraftModel),
            drafter_key: "draft:mock".into(),
            k: 2,
            k_auto: false,
            decision: None,
            tps: vec![20.0, 22.0],
            speedup: Some(vec![0.8, 0.9]),
            predicted: Some(0.95),
            alpha_calib: Some(0.6),
            stats: SpecStats {
                n_iterations: 4,
                n_draft_iterations: 4,
                n_drafted: 8,
                n_accepted: 5,
                n_rejections: 3,
                n_emitted: 9,
                ..Default::default()
            },
            n_output_mismatch: 0,
        }
    }

    #[test]
    fn auto_off_is_a_decision_without_samples_and_never_shows_a_speedup() {
        let cells = vec![measured_k2()];
        // Every gated k predicted ≤ 1 at the lower bound of α → off (predicted ≤ 1);
        // the prediction kept is the best of them (0.91), not a placeholder 1.
        let cal = calibration(0, vec![2, 4], vec![(2, 0.91), (4, 0.87)]);
        let c = auto_cell(Category::Code, &cal, &cells).unwrap();
        assert_eq!(c.decision.as_deref(), Some(AUTO_OFF_PREDICTED));
        assert_eq!(c.decision.as_deref(), Some("off (predicted ≤ 1)"));
        assert!(c.tps.is_empty() && c.speedup.is_none());
        assert_eq!((c.k, c.k_auto, c.predicted), (0, true, Some(0.91)));
        // No gate for any k of the drafter → off (no gated k), no prediction.
        let un = auto_cell(Category::Code, &calibration(0, vec![], vec![]), &cells).unwrap();
        assert_eq!(un.decision.as_deref(), Some(AUTO_OFF_UNGATED));
        assert_eq!(un.predicted, None);
        // When auto speculates, its cell is the measured cell of the chosen k.
        let on = auto_cell(
            Category::Code,
            &calibration(2, vec![2], vec![(2, 1.2)]),
            &cells,
        )
        .unwrap();
        assert_eq!(on.decision, None);
        assert_eq!((on.k, on.k_auto), (2, true));
        assert_eq!((&on.tps, &on.speedup), (&cells[0].tps, &cells[0].speedup));
        assert_eq!(on.stats, cells[0].stats);

        let report = CategoryReport {
            category: Category::Code,
            prompt_ids: vec!["code-01".into()],
            calibration_id: "code-18".into(),
            calibrations: vec![cal],
            cells: vec![cells[0].clone(), c],
        };
        let rows = to_rows(
            &[report],
            &BenchProvenance {
                target_file: "t".into(),
                target_sha256: "s".into(),
                draft_file: Some("d".into()),
                prompt_set_sha256: "p".into(),
                prompt_set: "p.jsonl".into(),
                engine_build: "mock".into(),
                n_threads: 2,
                max_new: 12,
                reps: 2,
                measured_at: "now".into(),
                hostname: "h".into(),
                cpu_info: "c".into(),
            },
        );
        let off = &rows[1];
        assert_eq!(off.decision.as_deref(), Some("off (predicted ≤ 1)"));
        assert_eq!(off.reps, 0);
        assert_eq!(
            (off.tps_samples.as_ref(), off.tps_mean, off.tps_std),
            (None, None, None)
        );
        assert_eq!(
            (
                off.speedup_samples.as_ref(),
                off.speedup_mean,
                off.speedup_std
            ),
            (None, None, None)
        );
        assert_eq!(
            (off.n_emitted, off.n_iterations, off.acceptance_rate),
            (0, 0, None)
        );
        let md = table_md(&rows);
        assert!(
            md.contains("| code | draft-model | auto→off (predicted ≤ 1) | — | — | 0.910 |"),
            "{md}"
        );
        assert!(!md.contains("1.000 ± 0.000"), "{md}");
        // The measured row keeps its samples.
        assert_eq!(rows[0].tps_samples, Some(vec![20.0, 22.0]));
        assert!(
            md.contains("| code | draft-model | 2 | 21.00 ± 1.41 | 0.850 ± 0.071 |"),
            "{md}"
        );
    }
}
