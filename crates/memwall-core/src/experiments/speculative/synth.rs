//! Set-acceptance speculative decoding: the speedup of the verify path at an
//! acceptance rate chosen in advance, the way llama.cpp benchmarks speculation with
//! `--spec-synth-rates` / `--spec-synth-len` (llama-server, llama-cli).
//!
//! [`SetAcceptance`] is a drafter that proposes, at each drafted position
//! independently, the target's own greedy token with probability `α` and a wrong
//! token otherwise (seeded ChaCha8). It still **pays a real draft-model forward** for
//! every drafted token: it runs a draft engine on the tokens it proposes exactly as
//! [`DraftModel`](super::drafter::DraftModel) does (catch-up pass over the accepted
//! tokens, then one pass per further position, argmax of each row), and only the
//! proposal is overridden. With i.i.d. `α` per position the unconditional rate of
//! position `i` is `α^i` (llama.cpp's `P0, P1, …` are those rates).
//!
//! The target's greedy tokens come from the target-only run of the same prompt that
//! the bench does first ([`run_synth_bench`]); the verified output must equal it
//! token for token, or the bench stops with [`SpecError::OutputMismatch`].
//!
//! What is predicted and when: the cost model's speedup
//! [`cost::predicted_speedup`] at the set `α` from times measured before any timed
//! run ([`bench::measure_timings`]); the job stores it before the timed runs start.
//! After them, the same model at the realised `α̂` and draft lengths
//! ([`post_hoc`]) separates a wrong cost model from sampling noise in `α̂`.
//!
//! Rows of this experiment live in their own table (`spec_synth`), never beside
//! rows of real acceptance: a set acceptance measures the verify path and the
//! draft's cost, not how well a draft model predicts its target.

use super::bench::{self, CategoryInput};
use super::cost::TreeOverhead;
use super::cost::{self, LoopOverhead, Timings};
use super::drafter::{Draft, DraftCtx, Drafter, KvSeq, NoDraft};
use super::gate::{TokenizedPrompt, tree_key, tree_of_key};
pub use super::record::{
    SpecSynthRow, SynthCalibration, SynthPrediction, breakdown_md, pooled_energy,
};
use super::row::argmax_max;
use super::run::{IterBreakdown, SpecConfig, SpecSession, SpecStats, TieBreak};
use super::sampling::uniform;
use super::tree::{self, TreeShape};
use super::tree_loop::{TreeDraftModel, measure_draft_rows};
use super::verify::QDist;
use super::{K_MAX, SpecError};
use crate::measure::engine::{Engine, TokenId};
use crate::measure::sampler::session::{EnergySummary, PhaseEvent, Recording};
use crate::measure::stats::Observations;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// A drafter whose per-position acceptance is set: the target's greedy token with
/// probability `alpha`, a wrong token otherwise, at the cost of a real draft-model
/// forward per drafted token.
pub struct SetAcceptance<E: Engine> {
    engine: E,
    kv: KvSeq,
    drafter_key: String,
    alpha: f64,
    rng: ChaCha8Rng,
    reference: Vec<TokenId>,
    /// Positions where a draw was made (the target's token was known).
    pub n_draws: u64,
    /// Of which proposed the target's token.
    pub n_right: u64,
}

impl<E: Engine> SetAcceptance<E> {
    /// Wraps the draft engine; `drafter_key` identifies the draft model
    /// ([`DraftModel::key_for`](super::drafter::DraftModel::key_for)).
    ///
    /// # Errors
    /// [`SpecError::Config`] for `alpha` outside `[0, 1]`.
    pub fn new(engine: E, drafter_key: String, alpha: f64, seed: u64) -> Result<Self, SpecError> {
        check_alpha(alpha)?;
        Ok(SetAcceptance {
            engine,
            kv: KvSeq::default(),
            drafter_key,
            alpha,
            rng: ChaCha8Rng::seed_from_u64(seed),
            reference: Vec::new(),
            n_draws: 0,
            n_right: 0,
        })
    }

    /// Sets `α` and reseeds the draws (a new configuration or repetition).
    ///
    /// # Errors
    /// [`SpecError::Config`] for `alpha` outside `[0, 1]`.
    pub fn set(&mut self, alpha: f64, seed: u64) -> Result<(), SpecError> {
        check_alpha(alpha)?;
        self.alpha = alpha;
        self.rng = ChaCha8Rng::seed_from_u64(seed);
        Ok(())
    }

    /// The target's greedy sequence for the next prompt: the prompt followed by the
    /// target-only output.
    pub fn set_reference(&mut self, prompt_and_output: Vec<TokenId>) {
        self.reference = prompt_and_output;
    }

    /// The draft engine (call [`SetAcceptance::invalidate`] after using it directly).
    pub fn engine(&mut self) -> &mut E {
        &mut self.engine
    }

    /// Marks the draft's KV mirror unknown.
    pub fn invalidate(&mut self) {
        self.kv.invalidate();
    }

    /// The draft model's key (the pair's gate is keyed by it).
    pub fn drafter_key(&self) -> &str {
        &self.drafter_key
    }
}

fn check_alpha(alpha: f64) -> Result<(), SpecError> {
    if (0.0..=1.0).contains(&alpha) {
        Ok(())
    } else {
        Err(SpecError::Options(format!(
            "--synth-acceptance {alpha}: an acceptance rate is in [0, 1]"
        )))
    }
}

/// A token other than `right` below `n`: the draft's own argmax when it differs,
/// else the next id.
fn wrong(own: TokenId, right: TokenId, n: usize) -> TokenId {
    if own != right {
        own
    } else {
        ((right as usize + 1) % n.max(2)) as TokenId
    }
}

impl<E: Engine> Drafter for SetAcceptance<E> {
    fn key(&self) -> String {
        format!("synth:{}:{}", self.alpha, self.drafter_key)
    }
    fn end(&mut self, hist: &[TokenId]) -> Result<(), SpecError> {
        let n = hist.len().saturating_sub(1);
        self.kv.trim(&mut self.engine, &hist[..n])?;
        Ok(())
    }
    fn n_vocab(&self) -> Option<usize> {
        Some(self.engine.n_vocab())
    }
    fn begin(&mut self, prompt: &[TokenId]) -> Result<(), SpecError> {
        let n = prompt.len().saturating_sub(1);
        self.kv.sync_prefix(&mut self.engine, &prompt[..n])?;
        Ok(())
    }
    fn propose(
        &mut self,
        hist: &[TokenId],
        k: usize,
        cx: &DraftCtx,
        _: &mut ChaCha8Rng,
    ) -> Result<Draft, SpecError> {
        let mut d = Draft::default();
        if k == 0 {
            return Ok(d);
        }
        if k > K_MAX {
            return Err(SpecError::Config(format!("k = {k} exceeds {K_MAX}")));
        }
        // The reference is known only while the history follows it.
        let on_reference =
            hist.len() <= self.reference.len() && self.reference[..hist.len()] == *hist;
        d.passes += self.kv.feed(&mut self.engine, hist, &[], 1)?;
        let (mut fetch, mut pick, mut forward) = (0u64, 0u64, 0u64);
        for i in 0..k {
            let t0 = Instant::now();
            let logits = self.engine.logits(0)?;
            let t1 = Instant::now();
            let shared = cx.n_shared.min(logits.len());
            let own = argmax_max(&logits[..shared]).0;
            let right = on_reference
                .then(|| self.reference.get(hist.len() + i).copied())
                .flatten();
            let tok = match right {
                Some(r) => {
                    self.n_draws += 1;
                    if uniform(&mut self.rng) < self.alpha {
                        self.n_right += 1;
                        r
                    } else {
                        wrong(own, r, shared)
                    }
                }
                None => own,
            };
            fetch += (t1 - t0).as_nanos() as u64;
            pick += t1.elapsed().as_nanos() as u64;
            d.tokens.push(tok);
            d.q.push(QDist::Delta);
            if i + 1 == k || self.engine.is_eog(tok) {
                break;
            }
            let pos = self.kv.cached.len() as u32;
            let t2 = Instant::now();
            self.engine.decode_one(tok, pos, 0)?;
            self.engine.synchronize();
            forward += t2.elapsed().as_nanos() as u64;
            self.kv.cached.push(tok);
            d.passes += 1;
        }
        let kt = self.kv.take_times();
        d.times = IterBreakdown {
            draft_forward_ns: forward + kt.forward_ns,
            draft_fetch_ns: fetch,
            draft_pick_ns: pick,
            draft_rollback_ns: kt.rollback_ns,
            ..Default::default()
        };
        Ok(d)
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SynthPlan {
    /// Set acceptance rates α.
    pub alphas: Vec<f64>,
    /// Draft lengths.
    pub ks: Vec<usize>,
    /// Timed repetitions.
    pub reps: usize,
    /// Tokens generated per prompt.
    pub max_new: usize,
    /// Repetitions of each cost-model timing (median taken).
    pub timing_reps: usize,
    /// Seed of the acceptance draws.
    pub seed: u64,
    /// Measure only the `k` of `ks` with the largest predicted speedup for each α
    /// (the cost model's choice, [`chosen`]); `false`: every (α, k).
    #[serde(default)]
    pub auto_k: bool,
    /// Near-tie tolerance of the output check, in logits (0 = token for token):
    /// a verified position may take the target-only token where this run's argmax
    /// leads it by at most this much ([`TieBreak`]); such positions are counted.
    #[serde(default)]
    pub tie_tolerance: f32,
    /// Tree drafts measured beside the chains, each at every α (its `k` is its
    /// depth); the models need llama.cpp's unified KV cache.
    #[serde(default)]
    pub trees: Vec<TreeShape>,
}

/// The (α, k) configurations to measure: every pair of the plan, or with
/// [`SynthPlan::auto_k`] the `k` with the largest predicted speedup for each α (the
/// smaller `k` on a tie), from the predictions made before the timed runs.
pub fn chosen(plan: &SynthPlan, cal: &SynthCalibration) -> Vec<(f64, usize)> {
    let chains = || cal.predictions.iter().filter(|p| p.tree.is_none());
    if !plan.auto_k {
        return chains().map(|p| (p.alpha, p.k)).collect();
    }
    let mut out: Vec<(f64, usize)> = Vec::new();
    for &a in &plan.alphas {
        let best =
            chains()
                .filter(|p| p.alpha == a)
                .fold(None::<&SynthPrediction>, |b, p| match b {
                    Some(b) if b.predicted_speedup >= p.predicted_speedup => Some(b),
                    _ => Some(p),
                });
        if let Some(b) = best {
            out.push((a, b.k));
        }
    }
    out
}

/// Measures the cost model's times on `prompt` (target verify of 1…k_max+1 positions,
/// one draft step), then the loop's own costs ([`LoopOverhead`]) from untimed runs
/// of the loop on the same prompt: target-only decoding (one warm-up run, one
/// measured) and, per α of the plan, one speculative run at the `k` the forward
/// passes alone predict best (among the `k` whose verify fits one pass of
/// `max_rows` rows, when any does), with draws seeded apart from the timed runs';
/// and predicts every (α, k) of the plan from all of it. Nothing of this is a timed
/// result: the predictions exist before any timed run starts.
///
/// # Errors
/// Engine errors; [`SpecError::Config`] for an empty plan or a `k` over [`K_MAX`].
pub fn calibrate<T: Engine, D: Engine>(
    target: &mut T,
    drafter: &mut SetAcceptance<D>,
    prompt: &TokenizedPrompt,
    plan: &SynthPlan,
    max_rows: usize,
) -> Result<SynthCalibration, SpecError> {
    check_plan(plan)?;
    // A tree's verify pass has nodes + 1 rows: the timings reach them.
    let k_max = plan
        .ks
        .iter()
        .copied()
        .chain(plan.trees.iter().map(TreeShape::n_nodes))
        .max()
        .unwrap_or(1);
    let mut timings = bench::measure_timings(
        target,
        Some(drafter.engine()),
        &prompt.tokens,
        k_max,
        plan.timing_reps,
        max_rows,
    )?;
    drafter.invalidate();
    let missing =
        |k: usize| SpecError::Config(format!("no timing for k = {k} (measured up to {k_max})"));
    // The loop's own costs, before any timed run.
    let mut session = SpecSession::new();
    session.max_rows_per_pass = max_rows;
    let plain = SpecConfig::greedy(0, plan.max_new);
    session.generate(target, &mut NoDraft, &prompt.tokens, &plain)?;
    let base = session.generate(target, &mut NoDraft, &prompt.tokens, &plain)?;
    let mut full = prompt.tokens.clone();
    full.extend(&base.tokens);
    if plan.tie_tolerance > 0.0 {
        session.set_tie_break(Some(TieBreak {
            reference: full.clone(),
            tolerance: plan.tie_tolerance,
        }));
    }
    let one_pass: Vec<usize> = plan
        .ks
        .iter()
        .copied()
        .filter(|&k| k < max_rows.max(1))
        .collect();
    let candidates = if one_pass.is_empty() {
        &plan.ks
    } else {
        &one_pass
    };
    for (ai, &alpha) in plan.alphas.iter().enumerate() {
        let mut k_cal = candidates[0];
        let mut best = f64::NEG_INFINITY;
        for &k in candidates {
            let p = cost::predicted_speedup_passes_only(&timings, alpha, k)
                .ok_or_else(|| missing(k))?;
            if p > best {
                (best, k_cal) = (p, k);
            }
        }
        drafter.set(alpha, draw_seed(!plan.seed, ai, usize::MAX))?;
        drafter.set_reference(full.clone());
        let out = session.generate(
            target,
            drafter,
            &prompt.tokens,
            &SpecConfig::greedy(k_cal, plan.max_new),
        )?;
        if let Some(o) =
            LoopOverhead::from_runs(&timings, Some(alpha), k_cal, &base.stats, &out.stats)
        {
            timings.overheads.push(o);
        }
    }
    drafter.invalidate();
    if !plan.trees.is_empty() {
        // The draft's pass time by width: a tree level's parents in one pass.
        // And the catch-up: a + 1 rows after a path of a ≤ k accepted nodes.
        let max_w = plan
            .trees
            .iter()
            .flat_map(|t| t.draft_pass_widths().into_iter().chain([t.k + 1]))
            .max()
            .unwrap_or(1);
        let max_b = plan.trees.iter().map(|t| t.b).max().unwrap_or(1);
        timings.draft_rows_ns = measure_draft_rows(
            drafter.engine(),
            &prompt.tokens,
            max_w,
            max_b,
            plan.timing_reps,
        )?;
        drafter.invalidate();
        // Each tree's own loop cost at each α: one untimed run of the tree loop, its
        // placement seeded apart from the timed runs'.
        for (ai, &alpha) in plan.alphas.iter().enumerate() {
            let o = timings.overhead_at(Some(alpha));
            for (ti, shape) in plan.trees.iter().enumerate() {
                let key = drafter.drafter_key().to_string();
                let seed = draw_seed(!plan.seed, ai, usize::MAX - 1 - ti);
                let mut td = TreeDraftModel::new(drafter.engine(), key).with_set_acceptance(
                    alpha,
                    full.clone(),
                    seed,
                );
                let out = session.generate_tree(
                    target,
                    &mut td,
                    &prompt.tokens,
                    shape,
                    &SpecConfig::greedy(shape.k, plan.max_new),
                );
                drop(td);
                drafter.invalidate();
                let out = out?;
                if let Some(c) = TreeOverhead::from_run(
                    &timings,
                    &timings.draft_rows_ns,
                    shape,
                    alpha,
                    &o,
                    &out.stats,
                ) {
                    timings.tree_overheads.push(c);
                }
            }
        }
    }
    let mut predictions = Vec::new();
    for &alpha in &plan.alphas {
        for &k in &plan.ks {
            let p = cost::predicted_speedup(&timings, alpha, k).ok_or_else(|| missing(k))?;
            predictions.push(SynthPrediction {
                alpha,
                k,
                predicted_speedup: p,
                tree: None,
            });
        }
        for t in &plan.trees {
            // The chain's loop terms where the tree has no calibration run of its own.
            let chain = timings.overhead_at(Some(alpha));
            let o = timings
                .tree_overhead_at(t, alpha)
                .map_or(chain, |c| c.loop_terms(&chain));
            let p = tree::predicted_speedup(&timings, &timings.draft_rows_ns, t, alpha, &o)
                .ok_or_else(|| {
                    SpecError::Config(format!("no timing for the tree {}", t.label()))
                })?;
            predictions.push(SynthPrediction {
                alpha,
                k: t.k,
                predicted_speedup: p,
                tree: Some(*t),
            });
        }
    }
    Ok(SynthCalibration {
        prompt_id: prompt.id.clone(),
        timings,
        predictions,
    })
}

fn check_plan(plan: &SynthPlan) -> Result<(), SpecError> {
    if plan.alphas.is_empty() || plan.ks.is_empty() || plan.reps == 0 || plan.max_new == 0 {
        return Err(SpecError::Config(
            "set-acceptance bench: need at least one α, one k, one repetition and one token".into(),
        ));
    }
    if !(plan.tie_tolerance.is_finite() && plan.tie_tolerance >= 0.0) {
        return Err(SpecError::Options(format!(
            "--synth-tie-tolerance {}: a tolerance is a number of logits ≥ 0",
            plan.tie_tolerance
        )));
    }
    for &a in &plan.alphas {
        check_alpha(a)?;
    }
    if let Some(&k) = plan.ks.iter().find(|&&k| k == 0 || k > K_MAX) {
        return Err(SpecError::Options(format!(
            "-k {k}: draft lengths must be 1..={K_MAX}"
        )));
    }
    for t in &plan.trees {
        t.validate()
            .map_err(|e| SpecError::Options(format!("--tree {}: {e}", t.label())))?;
    }
    Ok(())
}

/// One measured configuration: target-only (`alpha = None`) or (α, k).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SynthCell {
    /// Set acceptance rate (`None`: target-only).
    pub alpha: Option<f64>,
    /// Draft length (0 = target-only).
    pub k: usize,
    /// Decode tok/s per repetition (all prompts of the repetition together).
    pub tps: Vec<f64>,
    /// tok/s ÷ the same repetition's target-only tok/s (speculative cells).
    pub speedup: Option<Vec<f64>>,
    /// Counters summed over repetitions and prompts.
    pub stats: SpecStats,
    /// The drafter's own draws: positions drawn, of which right.
    pub n_draws: u64,
    /// Draws that proposed the target's token.
    pub n_right: u64,
    /// The tree drafted (`None`: target-only or a chain of `k`).
    #[serde(default)]
    pub tree: Option<TreeShape>,
}

/// The seed of the draws of configuration `ci` in repetition `rep`.
fn draw_seed(seed: u64, ci: usize, rep: usize) -> u64 {
    seed ^ ((ci as u64) << 32) ^ (rep as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Runs the timed repetitions: in each, target-only decoding over `prompts` first
/// (repetition 1's outputs are the reference the drafter proposes from), then every
/// (α, k) of `pairs` ([`chosen`]) in an order rotated per repetition. Every output is compared with the
/// reference; a difference stops the bench ([`SpecError::OutputMismatch`]).
/// tok/s = emitted tokens ÷ decode wall time (prefill excluded), for both.
///
/// # Errors
/// Engine errors; [`SpecError::OutputMismatch`]; [`SpecError::Cancelled`] (read
/// before each repetition).
#[allow(clippy::too_many_arguments)]
pub fn run_synth_bench<T: Engine, D: Engine>(
    target: &mut T,
    drafter: &mut SetAcceptance<D>,
    prompts: &[TokenizedPrompt],
    plan: &SynthPlan,
    pairs: &[(f64, usize)],
    on_progress: &mut dyn FnMut(&str),
    phase: &mut dyn FnMut(PhaseEvent<'_>),
    cancel: &AtomicBool,
) -> Result<Vec<SynthCell>, SpecError> {
    check_plan(plan)?;
    if prompts.is_empty() {
        return Err(SpecError::Config("set-acceptance bench: no prompts".into()));
    }
    if let Some(&(a, k)) = pairs
        .iter()
        .find(|(a, k)| !(0.0..=1.0).contains(a) || *k == 0 || *k > K_MAX)
    {
        return Err(SpecError::Config(format!(
            "set-acceptance bench: α = {a}, k = {k} out of range"
        )));
    }
    let configs: Vec<(Option<f64>, usize, Option<TreeShape>)> = std::iter::once((None, 0, None))
        .chain(pairs.iter().map(|&(a, k)| (Some(a), k, None)))
        .chain(
            plan.alphas
                .iter()
                .flat_map(|&a| plan.trees.iter().map(move |t| (Some(a), t.k, Some(*t)))),
        )
        .collect();
    let mut cells: Vec<SynthCell> = configs
        .iter()
        .map(|&(alpha, k, tree)| SynthCell {
            alpha,
            k,
            tps: Vec::new(),
            speedup: alpha.map(|_| Vec::new()),
            stats: SpecStats::default(),
            n_draws: 0,
            n_right: 0,
            tree,
        })
        .collect();
    let mut session = SpecSession::for_target(target);
    drafter.invalidate();
    let mut reference: Vec<Vec<TokenId>> = Vec::new();
    for rep in 0..plan.reps {
        if cancel.load(Ordering::Relaxed) {
            return Err(SpecError::Cancelled);
        }
        on_progress(&format!(
            "set acceptance: repetition {}/{}",
            rep + 1,
            plan.reps
        ));
        let mut order: Vec<usize> = (1..configs.len()).collect();
        let r = rep % order.len().max(1);
        order.rotate_left(r);
        order.insert(0, 0);
        for ci in order {
            let (alpha, k, tree) = configs[ci];
            let mut st = SpecStats::default();
            let (d0, r0) = (drafter.n_draws, drafter.n_right);
            let (mut tree_draws, mut tree_hits) = (0u64, 0u64);
            if let Some(a) = alpha {
                drafter.set(a, draw_seed(plan.seed, ci, rep))?;
            }
            let label = phase_label(alpha, k, tree.as_ref(), rep);
            phase(PhaseEvent::Begin(&label));
            for (pi, p) in prompts.iter().enumerate() {
                let cfg = SpecConfig::greedy(k, plan.max_new);
                // Every run after the reference may break near-ties toward it.
                session.set_tie_break(match reference.get(pi) {
                    Some(r) if plan.tie_tolerance > 0.0 => {
                        let mut full = p.tokens.clone();
                        full.extend(r);
                        Some(TieBreak {
                            reference: full,
                            tolerance: plan.tie_tolerance,
                        })
                    }
                    _ => None,
                });
                let out = match (alpha, tree) {
                    (None, _) => session.generate(target, &mut NoDraft, &p.tokens, &cfg)?,
                    (Some(a), Some(shape)) => {
                        // The tree drafter runs on the set-acceptance drafter's engine,
                        // its placement seeded per configuration, repetition and prompt.
                        let mut full = p.tokens.clone();
                        full.extend(&reference[pi]);
                        let key = drafter.drafter_key().to_string();
                        let seed = draw_seed(plan.seed, ci, rep)
                            ^ (pi as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407);
                        let mut td = TreeDraftModel::new(drafter.engine(), key)
                            .with_set_acceptance(a, full, seed);
                        let out = session.generate_tree(target, &mut td, &p.tokens, &shape, &cfg);
                        let (d, h) = td.draws();
                        (tree_draws, tree_hits) = (tree_draws + d, tree_hits + h);
                        drop(td);
                        drafter.invalidate();
                        out?
                    }
                    (Some(_), None) => {
                        let mut full = p.tokens.clone();
                        full.extend(&reference[pi]);
                        drafter.set_reference(full);
                        session.generate(target, drafter, &p.tokens, &cfg)?
                    }
                };
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
                        category: p.category.name().to_string(),
                        config: match alpha {
                            None => format!("target-only repetition {}", rep + 1),
                            Some(a) => format!(
                                "set acceptance {}",
                                config_label(Some(a), k, tree.as_ref())
                            ),
                        },
                        prompt_id: p.id.clone(),
                        position: pos,
                        want: want.get(pos).copied(),
                        got: out.tokens.get(pos).copied(),
                    });
                }
            }
            phase(PhaseEvent::End);
            let c = &mut cells[ci];
            c.tps.push(st.decode_tps().unwrap_or(0.0));
            c.stats.merge(&st);
            c.n_draws += drafter.n_draws - d0 + tree_draws;
            c.n_right += drafter.n_right - r0 + tree_hits;
        }
    }
    let base = cells[0].tps.clone();
    for c in cells.iter_mut().skip(1) {
        c.speedup = Some(c.tps.iter().zip(&base).map(|(s, b)| s / b).collect());
    }
    Ok(cells)
}

/// The sampler's phase of configuration (α, k) in repetition `rep` (0-based):
/// `target-only #1`, `α=0.9 k=6 #2`.
pub fn phase_label(alpha: Option<f64>, k: usize, tree: Option<&TreeShape>, rep: usize) -> String {
    format!("{} #{}", config_label(alpha, k, tree), rep + 1)
}

/// A configuration's name: `target-only`, `α=0.9 k=6`, `α=0.7 tree k3 b2 m1`.
pub fn config_label(alpha: Option<f64>, k: usize, tree: Option<&TreeShape>) -> String {
    match (alpha, tree) {
        (None, _) => "target-only".to_string(),
        (Some(a), Some(t)) => format!("α={a} tree {}", t.label()),
        (Some(a), None) => format!("α={a} k={k}"),
    }
}

/// A stored row's configuration name ([`config_label`]; a tree's from its
/// drafter key).
pub fn row_label(r: &SpecSynthRow) -> String {
    match (r.alpha_set, tree_of_key(&r.drafter_key)) {
        (None, _) => "target-only".to_string(),
        (Some(a), Some(t)) => format!("α={a} tree {t}"),
        (Some(a), None) => format!("α={a} k={}", r.k),
    }
}

/// A stored row's `k` column: `target only`, `6`, or a tree's shape.
fn row_k(r: &SpecSynthRow) -> String {
    match tree_of_key(&r.drafter_key) {
        _ if r.k == 0 => "target only".to_string(),
        Some(t) => format!("tree {t}"),
        None => r.k.to_string(),
    }
}

/// A row's energy from the sampler's recording: the phases of its repetitions
/// ([`phase_label`]), each summarised over its timed decode time (tokens ÷ tok/s)
/// and its tokens, then pooled: energy summed, J/token = energy ÷ tokens, mean power
/// = energy ÷ timed time, hottest reading, throttling if any phase throttled.
/// `None` when a phase is missing. Energy stays `None` (with the sampler's reason)
/// when any phase has none: a partial sum would be too small.
pub fn row_energy(rec: &Recording, row: &SpecSynthRow) -> Option<EnergySummary> {
    let names: Vec<String> = (0..row.tps_samples.len())
        .map(|rep| format!("{} #{}", row_label(row), rep + 1))
        .collect();
    pooled_energy(rec, &names, &row.tps_samples, row.n_emitted)
}

/// The prompts a set-acceptance bench measures: every prompt of each input, in order.
pub fn prompts_of(inputs: &[CategoryInput]) -> Vec<TokenizedPrompt> {
    inputs.iter().flat_map(|i| i.measured.clone()).collect()
}

/// The cost model's speedup recomputed after the timed runs with the realised α̂
/// and draft lengths ([`cost::predicted_speedup_hist`]), with the loop overhead
/// measured at the row's set rate `alpha_set`; `None` for target-only.
pub fn post_hoc(t: &Timings, st: &SpecStats, alpha_set: Option<f64>) -> Option<f64> {
    let alpha = st.alpha_hat()?;
    cost::predicted_speedup_hist_set(t, alpha, alpha_set, &st.draft_len_hist)
}

/// Provenance shared by every row of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SynthProvenance {
    /// Target file name.
    pub target_file: String,
    /// sha256 of the target GGUF file.
    pub target_sha256: String,
    /// Draft file name.
    pub draft_file: String,
    /// The draft model's key (`draft:<sha256 prefix>`).
    pub drafter_key: String,
    pub prompt_set_sha256: String,
    /// The prompt file, as given (a path, or `builtin:prompts/spec.jsonl`).
    pub prompt_set: String,
    /// llama.cpp build the engine was compiled from.
    pub engine_build: String,
    /// CPU threads.
    pub n_threads: u32,
    /// Layers offloaded to the GPU (llama-bench's `-ngl`).
    pub n_gpu_layers: u32,
    /// When it was measured, UTC RFC 3339.
    pub measured_at: String,
    pub hostname: String,
    /// CPU model name.
    pub cpu_info: String,
    /// GPU name(s), `None` when none was used.
    pub gpu_info: Option<String>,
}

/// Flattens cells into rows; `prediction_ids` are the stored predictions in the
/// order of `cal.predictions` (`None` when not stored).
pub fn to_rows(
    cells: &[SynthCell],
    cal: &SynthCalibration,
    prediction_ids: Option<&[i64]>,
    plan: &SynthPlan,
    prompt_ids: &[String],
    prov: &SynthProvenance,
) -> Vec<SpecSynthRow> {
    let timings_json = serde_json::to_string(&cal.timings).expect("serialize");
    cells
        .iter()
        .map(|c| {
            let pi = c.alpha.and_then(|a| {
                cal.predictions
                    .iter()
                    .position(|p| p.alpha == a && p.k == c.k && p.tree == c.tree)
            });
            let tps = Observations::new(c.tps.clone()).ok();
            let sp = c
                .speedup
                .as_ref()
                .and_then(|s| Observations::new(s.clone()).ok());
            let st = &c.stats;
            SpecSynthRow {
                id: 0,
                run_id: 0,
                prediction_id: pi.and_then(|i| prediction_ids.map(|ids| ids[i])),
                alpha_set: c.alpha,
                k: c.k,
                target_file: prov.target_file.clone(),
                target_sha256: prov.target_sha256.clone(),
                draft_file: prov.draft_file.clone(),
                drafter_key: match &c.tree {
                    Some(t) => tree_key(t, &prov.drafter_key),
                    None => prov.drafter_key.clone(),
                },
                seed: plan.seed,
                prompt_set_sha256: prov.prompt_set_sha256.clone(),
                prompt_set: Some(prov.prompt_set.clone()),
                prompt_ids: prompt_ids.to_vec(),
                max_new: plan.max_new,
                reps: plan.reps,
                n_threads: prov.n_threads,
                n_gpu_layers: prov.n_gpu_layers,
                tps_samples: c.tps.clone(),
                tps_mean: tps.as_ref().map(|s| s.mean()),
                tps_std: tps.as_ref().map(|s| s.std_dev()),
                speedup_samples: c.speedup.clone(),
                speedup_mean: sp.as_ref().map(|s| s.mean()),
                speedup_std: sp.as_ref().map(|s| s.std_dev()),
                predicted_speedup: pi.map(|i| cal.predictions[i].predicted_speedup),
                // The after-the-run model is the chain's (realised α̂ and draft
                // lengths); a tree has none.
                predicted_after: if c.k > 0 && c.tree.is_none() {
                    post_hoc(&cal.timings, st, c.alpha)
                } else {
                    None
                },
                alpha_hat: if c.k > 0 { st.alpha_hat() } else { None },
                n_tested: st.n_tested(),
                n_drafted: st.n_drafted,
                n_accepted: st.n_accepted,
                n_iterations: st.n_iterations,
                n_emitted: st.n_emitted,
                n_draft_passes: st.n_draft_passes,
                n_draws: c.n_draws,
                n_right: c.n_right,
                stats_json: serde_json::to_string(st).expect("serialize"),
                timings_json: timings_json.clone(),
                engine_build: prov.engine_build.clone(),
                build_commit: crate::BUILD_COMMIT.to_string(),
                measured_at: prov.measured_at.clone(),
                hostname: prov.hostname.clone(),
                cpu_info: prov.cpu_info.clone(),
                gpu_info: prov.gpu_info.clone(),
                gate_id: None,
            }
        })
        .collect()
}

fn or_dash(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("—".to_string(), f)
}

/// Markdown table of a set-acceptance run (what `memwall spec bench
/// --synth-acceptance` prints).
pub fn table_md(rows: &[SpecSynthRow]) -> String {
    let mut s = String::from(
        "| α set | k | tok/s (mean ± std) | speedup measured | predicted before the run | measured ÷ predicted | predicted at realised α̂ (after) | realised α̂ (tested) | tokens / target pass |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let tpp = (r.n_iterations > 0).then(|| r.n_emitted as f64 / r.n_iterations as f64);
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            or_dash(r.alpha_set, |a| format!("{a}")),
            row_k(r),
            match (r.tps_mean, r.tps_std) {
                (Some(m), Some(sd)) => format!("{m:.2} ± {sd:.2}"),
                _ => "—".into(),
            },
            match (r.speedup_mean, r.speedup_std) {
                (Some(m), Some(sd)) => format!("{m:.3} ± {sd:.3}"),
                _ => "—".into(),
            },
            or_dash(r.predicted_speedup, |x| format!("{x:.3}")),
            match (r.speedup_mean, r.predicted_speedup) {
                (Some(m), Some(p)) => format!("{:.3}", m / p),
                _ => "—".into(),
            },
            or_dash(r.predicted_after, |x| format!("{x:.3}")),
            or_dash(r.alpha_hat, |x| format!("{x:.3} ({})", r.n_tested)),
            or_dash(tpp, |x| format!("{x:.2}")),
        ));
    }
    let labelled: Vec<(String, SpecStats)> = rows
        .iter()
        .filter_map(|r| {
            let st = serde_json::from_str::<SpecStats>(&r.stats_json).ok()?;
            Some((row_label(r), st))
        })
        .collect();
    let bd = breakdown_md(&labelled);
    if !bd.is_empty() {
        s.push('\n');
        s.push_str(&bd);
    }
    for r in rows {
        let Ok(st) = serde_json::from_str::<SpecStats>(&r.stats_json) else {
            continue;
        };
        if st.n_tie_breaks > 0 {
            s.push_str(&format!(
                "\n{}: {} of {} emitted tokens took the target-only token where this run's argmax led it by at most {:.3e} logits (near-ties, --synth-tie-tolerance)\n",
                row_label(r),
                st.n_tie_breaks,
                st.n_emitted,
                st.tie_gap_max
            ));
        }
    }
    s
}

/// Markdown table of each row's energy from the sampler beside the run (`—` where
/// a counter was not readable, with the reasons below).
pub fn energy_md(
    rows: &[SpecSynthRow],
    energy: &[Option<EnergySummary>],
    rec: &Recording,
) -> String {
    let mut s = String::from(
        "| α set | k | mean power W | J/token | tokens/Wh | peak °C | throttled | GPU memory-controller % | energy source |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for (r, e) in rows.iter().zip(energy) {
        let Some(e) = e else { continue };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            or_dash(r.alpha_set, |a| format!("{a}")),
            row_k(r),
            or_dash(e.mean_power_w, |x| format!("{x:.1}")),
            or_dash(e.j_per_token, |x| format!("{x:.4}")),
            or_dash(e.tokens_per_wh, |x| format!("{x:.0}")),
            or_dash(e.peak_temp_c, |x| format!("{x:.0}")),
            e.throttled.map_or("—", |t| if t { "yes" } else { "no" }),
            or_dash(e.gpu_mem_util_pct, |x| format!("{x:.0}")),
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

/// Markdown lines of the times the predictions rest on.
pub fn calibration_md(cal: &SynthCalibration) -> String {
    let t = &cal.timings;
    let base = t.t_verify_ns.first().copied().unwrap_or(f64::NAN);
    let mut s = format!(
        "measured on {} at depth {}: target t_verify(1) = {:.3} ms, draft step = {:.3} ms\n\n| positions j | t_verify(j) ms | ÷ t_verify(1) |\n|---|---|---|\n",
        cal.prompt_id,
        t.depth,
        base / 1e6,
        t.t_draft_ns / 1e6
    );
    for (j, v) in t.t_verify_ns.iter().enumerate() {
        s.push_str(&format!(
            "| {} | {:.3} | {:.3} |\n",
            j + 1,
            v / 1e6,
            v / base
        ));
    }
    if !t.overheads.is_empty() {
        s.push_str("\nThe loop's own costs, from untimed runs of the loop on the same prompt before the timed runs (c_base: per target-only token beyond t_verify(1); c_iter: per iteration beyond t_verify(m + 1) and the draft steps; δ_step: per drafted token beyond t_draft, the catch-up pass included):\n\n| calibration run | c_base ms | c_iter ms | δ_step ms |\n|---|---|---|---|\n");
        for o in &t.overheads {
            s.push_str(&format!(
                "| {} k={} | {:.3} | {:.3} | {:.3} |\n",
                o.alpha.map_or("own α".to_string(), |a| format!("α={a}")),
                o.k,
                o.base_ns / 1e6,
                o.iter_ns / 1e6,
                o.draft_step_ns / 1e6
            ));
        }
    }
    if !t.draft_rows_ns.is_empty() {
        s.push_str("\nTree drafts: one draft pass over w rows (a tree level's parents; the catch-up of a + 1 rows after a path of a accepted nodes), top tokens of each taken:\n\n| w | draft pass ms |\n|---|---|\n");
        for (i, v) in t.draft_rows_ns.iter().enumerate() {
            s.push_str(&format!("| {} | {:.3} |\n", i + 1, v / 1e6));
        }
    }
    if !t.tree_overheads.is_empty() {
        s.push_str("\nEach tree's own loop cost, from an untimed run of the tree loop on the same prompt before the timed runs (c_tree: per iteration beyond its draft passes by width and its nodes + 1-row verify):\n\n| calibration run | c_tree ms |\n|---|---|\n");
        for o in &t.tree_overheads {
            s.push_str(&format!(
                "| α={} tree {} | {:.3} |\n",
                o.alpha,
                o.shape,
                o.iter_ns / 1e6
            ));
        }
    }
    s.push_str("\n| α | k | predicted, forward passes only | predicted with the loop's costs (stored) |\n|---|---|---|---|\n");
    for p in &cal.predictions {
        let (k, passes) = match &p.tree {
            // A tree's passes alone: its model with the loop's terms at zero.
            Some(tr) => (
                format!("tree {} ({} nodes)", tr.label(), tr.n_nodes()),
                tree::predicted_speedup(
                    t,
                    &t.draft_rows_ns,
                    tr,
                    p.alpha,
                    &LoopOverhead {
                        alpha: None,
                        k: 0,
                        iter_ns: 0.0,
                        draft_step_ns: 0.0,
                        base_ns: 0.0,
                    },
                ),
            ),
            None => (
                p.k.to_string(),
                cost::predicted_speedup_passes_only(t, p.alpha, p.k),
            ),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {:.3} |\n",
            p.alpha,
            k,
            passes.map_or("—".into(), |x| format!("{x:.3}")),
            p.predicted_speedup
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::speculative::mock::Mock;
    use crate::experiments::speculative::prompts::{Category, Format};
    use crate::experiments::speculative::run::target_greedy;

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

    /// z of the two-sided bound the acceptance tests use: a seeded run falls
    /// outside it with probability ≈ 6e-5 (4.0 standard deviations).
    const Z: f64 = 4.0;

    #[test]
    fn realised_acceptance_matches_the_set_rate_within_a_binomial_bound() {
        // Target and draft are different toys (the draft's own argmax is often
        // wrong), so every accepted token is the drafter's draw, not luck.
        let prompts: Vec<TokenizedPrompt> = (0..6).map(|i| tp(&format!("p{i}"), 6, i)).collect();
        for &(alpha, k) in &[(0.5, 4), (0.7, 6), (0.9, 8), (0.0, 3), (1.0, 5)] {
            let mut target = Mock::new(30, 4.0);
            let mut draft = Mock::new(30, 4.0);
            draft.noise = 8.0;
            let mut d = SetAcceptance::new(draft, "draft:mock".into(), alpha, 7).unwrap();
            let mut s = SpecSession::new();
            let (mut st, mut draws, mut right) = (SpecStats::default(), 0u64, 0u64);
            for p in &prompts {
                let want = target_greedy(&mut target, &p.tokens, 200).unwrap().tokens;
                s.invalidate();
                let mut full = p.tokens.clone();
                full.extend(&want);
                d.set_reference(full);
                let (d0, r0) = (d.n_draws, d.n_right);
                let out = s
                    .generate(&mut target, &mut d, &p.tokens, &SpecConfig::greedy(k, 200))
                    .unwrap();
                assert_eq!(
                    out.tokens, want,
                    "α = {alpha}, k = {k}: output = target-only"
                );
                st.merge(&out.stats);
                draws += d.n_draws - d0;
                right += d.n_right - r0;
            }
            // Every tested position is one Bernoulli(α) draw: α̂ lies within
            // Z·√(α(1 − α)/n) of α (exactly α at α ∈ {0, 1}).
            let n = st.n_tested() as f64;
            let a_hat = st.alpha_hat().unwrap();
            let bound = Z * (alpha * (1.0 - alpha) / n).sqrt();
            assert!(
                (a_hat - alpha).abs() <= bound,
                "α = {alpha}, k = {k}: α̂ = {a_hat} over {n} tested positions, bound ±{bound}"
            );
            assert!(n >= 300.0, "enough positions tested: {n}");
            // The drafter's own draws, tested or not: Binomial(draws, α).
            let bound = Z * (draws as f64 * alpha * (1.0 - alpha)).sqrt();
            assert!(
                (right as f64 - alpha * draws as f64).abs() <= bound,
                "draws {right}/{draws} vs α = {alpha}"
            );
            if alpha == 0.0 {
                assert_eq!(st.n_accepted, 0);
            }
            if alpha == 1.0 {
                assert_eq!(st.n_rejections, 0);
            }
            // A real draft pass per drafted token: one catch-up pass per iteration
            // plus one per further drafted position (k' − 1 each).
            assert!(st.n_draft_passes >= st.n_drafted, "{st:?}");
        }
    }

    #[test]
    fn the_drafter_pays_the_draft_models_forward_passes() {
        // Same passes as the real draft-model drafter would take for the same
        // proposals: feed (1) + k − 1 decodes per full-length proposal.
        let mut target = Mock::new(30, 4.0);
        let p = tp("a", 6, 1);
        let want = target_greedy(&mut target, &p.tokens, 40).unwrap().tokens;
        let mut d = SetAcceptance::new(Mock::new(30, 4.0), "draft:mock".into(), 0.5, 3).unwrap();
        let mut full = p.tokens.clone();
        full.extend(&want);
        d.set_reference(full);
        let mut s = SpecSession::new();
        let out = s
            .generate(&mut target, &mut d, &p.tokens, &SpecConfig::greedy(4, 40))
            .unwrap();
        assert_eq!(out.tokens, want);
        let st = &out.stats;
        // Every iteration but the last few proposes min(4, left − 1) tokens with
        // one feed pass and (m − 1) decodes: passes = Σ m over iterations with m > 0.
        let passes: u64 = st
            .draft_len_hist
            .iter()
            .enumerate()
            .map(|(m, &n)| n * m as u64)
            .sum();
        assert_eq!(st.n_draft_passes, passes);
        assert!(
            d.engine().passes >= passes,
            "the draft engine ran the passes"
        );
    }

    #[test]
    fn bench_stores_predictions_and_speedups_and_checks_outputs() {
        let mut target = Mock::new(30, 4.0);
        let mut d = SetAcceptance::new(Mock::new(30, 4.0), "draft:mock".into(), 0.5, 1).unwrap();
        let plan = SynthPlan {
            alphas: vec![0.5, 0.9],
            ks: vec![2, 4],
            reps: 2,
            max_new: 24,
            timing_reps: 1,
            seed: 11,
            auto_k: false,
            tie_tolerance: 0.0,
            trees: Vec::new(),
        };
        let prompts = vec![tp("a", 6, 1), tp("b", 7, 2)];
        let cal = calibrate(&mut target, &mut d, &prompts[0], &plan, 7).unwrap();
        assert_eq!(cal.predictions.len(), 4);
        // The prediction is the closed form on the measured times and the loop's
        // own costs, measured once per α by an untimed run before any timed one.
        let t = &cal.timings;
        let alphas: Vec<Option<f64>> = t.overheads.iter().map(|o| o.alpha).collect();
        assert_eq!(alphas, [Some(0.5), Some(0.9)]);
        assert!(t.overheads.iter().all(|o| plan.ks.contains(&o.k)));
        let o = t.overhead_at(Some(0.9));
        assert_eq!(o.alpha, Some(0.9));
        let p = &cal.predictions[3];
        let e = (1.0 - 0.9f64.powi(5)) / 0.1;
        let want = e * (t.t_verify_ns[0] + o.base_ns)
            / (4.0 * (t.t_draft_ns + o.draft_step_ns) + t.t_verify_ns[4] + o.iter_ns);
        assert!((p.predicted_speedup - want).abs() < 1e-9 * want.abs());
        // Without them, the forward passes alone (the paper's model).
        let plain = e * t.t_verify_ns[0] / (4.0 * t.t_draft_ns + t.t_verify_ns[4]);
        let got = cost::predicted_speedup_passes_only(t, 0.9, 4).unwrap();
        assert!((got - plain).abs() < 1e-9 * plain.abs());
        let pairs = chosen(&plan, &cal);
        assert_eq!(pairs, [(0.5, 2), (0.5, 4), (0.9, 2), (0.9, 4)]);
        let mut phases: Vec<Option<String>> = Vec::new();
        let cells = run_synth_bench(
            &mut target,
            &mut d,
            &prompts,
            &plan,
            &pairs,
            &mut |_| {},
            &mut |e| {
                if let Some(p) = e.mark() {
                    phases.push(p.map(str::to_string))
                }
            },
            &AtomicBool::new(false),
        )
        .unwrap();
        // One phase per configuration and repetition, each closed.
        assert_eq!(phases.len(), 2 * 5 * 2);
        assert_eq!(phases[0].as_deref(), Some("target-only #1"));
        assert!(phases.iter().skip(1).step_by(2).all(Option::is_none));
        assert!(phases.contains(&Some("α=0.9 k=4 #2".to_string())));
        assert_eq!(cells.len(), 5);
        assert_eq!(cells[0].alpha, None);
        for c in &cells {
            assert_eq!(c.tps.len(), 2);
            assert_eq!(c.stats.n_emitted, 2 * 2 * 24);
        }
        let prov = SynthProvenance {
            target_file: "t".into(),
            target_sha256: "s".into(),
            draft_file: "d".into(),
            drafter_key: "draft:mock".into(),
            prompt_set_sha256: "p".into(),
            prompt_set: "p.jsonl".into(),
            engine_build: "mock".into(),
            n_threads: 1,
            n_gpu_layers: 0,
            measured_at: "now".into(),
            hostname: "h".into(),
            cpu_info: "c".into(),
            gpu_info: None,
        };
        let ids = [10, 11, 12, 13];
        let rows = to_rows(
            &cells,
            &cal,
            Some(&ids),
            &plan,
            &["a".into(), "b".into()],
            &prov,
        );
        assert_eq!(rows[0].prediction_id, None);
        assert_eq!(rows[0].speedup_mean, None);
        let r = rows
            .iter()
            .find(|r| r.alpha_set == Some(0.9) && r.k == 4)
            .unwrap();
        assert_eq!(r.prediction_id, Some(13));
        assert_eq!(r.predicted_speedup, Some(p.predicted_speedup));
        let sp = r.speedup_samples.as_ref().unwrap();
        assert!((sp[0] - r.tps_samples[0] / rows[0].tps_samples[0]).abs() < 1e-12);
        let md = table_md(&rows);
        assert!(md.contains("| — | target only |"), "{md}");
        assert!(md.contains("| 0.9 | 4 |"), "{md}");
    }

    #[test]
    fn auto_k_takes_the_best_predicted_k_per_alpha() {
        // t_verify = 10, 11, 11.5, 12, 30 ms (a kernel switch at 5 positions), draft
        // 1 ms. α = 0.9: k = 3 → E = 3.439, T = 3 + 12 = 15 → 2.293; k = 2 → 2.71 ×
        // 10 / 13.5 = 2.007; k = 4 → 4.0951 × 10 / 34 = 1.204. α = 0.2: k = 1 →
        // 1.2 × 10 / 12 = 1.0; k = 2 → 1.24 × 10 / 13.5 = 0.919: k = 1.
        let t = Timings {
            t_verify_ns: vec![10e6, 11e6, 11.5e6, 12e6, 30e6],
            t_draft_ns: 1e6,
            depth: 8,
            overheads: Vec::new(),
            draft_rows_ns: Vec::new(),
            tree_overheads: Vec::new(),
        };
        let plan = SynthPlan {
            alphas: vec![0.9, 0.2],
            ks: vec![1, 2, 3, 4],
            reps: 2,
            max_new: 8,
            timing_reps: 1,
            seed: 0,
            auto_k: true,
            tie_tolerance: 0.0,
            trees: Vec::new(),
        };
        let predictions = plan
            .alphas
            .iter()
            .flat_map(|&a| {
                let t = &t;
                plan.ks.iter().map(move |&k| SynthPrediction {
                    alpha: a,
                    k,
                    predicted_speedup: cost::predicted_speedup(t, a, k).unwrap(),
                    tree: None,
                })
            })
            .collect();
        let cal = SynthCalibration {
            prompt_id: "x".into(),
            timings: t,
            predictions,
        };
        assert_eq!(chosen(&plan, &cal), [(0.9, 3), (0.2, 1)]);
        let p = cal
            .predictions
            .iter()
            .find(|p| p.alpha == 0.9 && p.k == 3)
            .unwrap();
        assert!((p.predicted_speedup - 3.439 * 10.0 / 15.0).abs() < 1e-9);
    }

    #[test]
    fn row_energy_needs_every_repetitions_phase_and_never_sums_a_part() {
        use crate::measure::sampler::session::Phase;
        let mut row = row();
        row.tps_samples = vec![100.0, 100.0];
        row.n_emitted = 200;
        let ph = |name: &str, a: u64| Phase {
            name: name.into(),
            start_ns: a,
            end_ns: a + 1_000_000_000,
        };
        let mut rec = Recording {
            hz: 10.0,
            samples: Vec::new(),
            phases: vec![ph("α=0.9 k=4 #1", 0)],
            intervals: Vec::new(),
            counters: Vec::new(),
        };
        // Repetition 2's phase is missing: no figure at all.
        assert_eq!(row_energy(&rec, &row), None);
        rec.phases.push(ph("α=0.9 k=4 #2", 2_000_000_000));
        // No energy counter on this machine: energy is unmeasured, with a reason.
        let e = row_energy(&rec, &row).unwrap();
        assert_eq!(
            (e.energy_j, e.j_per_token, e.tokens_per_wh),
            (None, None, None)
        );
        assert!(e.reason.is_some(), "{e:?}");
        assert_eq!(e.samples, 0);
    }

    fn row() -> SpecSynthRow {
        let cal = SynthCalibration {
            prompt_id: "a".into(),
            timings: Timings {
                t_verify_ns: vec![1e6; 5],
                t_draft_ns: 1e5,
                depth: 4,
                overheads: Vec::new(),
                draft_rows_ns: Vec::new(),
                tree_overheads: Vec::new(),
            },
            predictions: vec![SynthPrediction {
                alpha: 0.9,
                k: 4,
                predicted_speedup: 2.0,
                tree: None,
            }],
        };
        let cell = SynthCell {
            alpha: Some(0.9),
            k: 4,
            tps: vec![100.0],
            speedup: Some(vec![2.0]),
            stats: SpecStats::default(),
            n_draws: 0,
            n_right: 0,
            tree: None,
        };
        let plan = SynthPlan {
            alphas: vec![0.9],
            ks: vec![4],
            reps: 1,
            max_new: 8,
            timing_reps: 1,
            seed: 0,
            auto_k: false,
            tie_tolerance: 0.0,
            trees: Vec::new(),
        };
        let prov = SynthProvenance {
            target_file: "t".into(),
            target_sha256: "s".into(),
            draft_file: "d".into(),
            drafter_key: "draft:x".into(),
            prompt_set_sha256: "p".into(),
            prompt_set: "p.jsonl".into(),
            engine_build: "b".into(),
            n_threads: 1,
            n_gpu_layers: 0,
            measured_at: "now".into(),
            hostname: "h".into(),
            cpu_info: "c".into(),
            gpu_info: None,
        };
        to_rows(&[cell], &cal, None, &plan, &["a".into()], &prov).remove(0)
    }

    #[test]
    fn near_ties_flipped_by_batched_passes_pass_only_within_the_tolerance_and_are_counted() {
        // The target's passes of ≥ 2 rows (every verify pass with a draft) raise each
        // row's runner-up to lead the argmax by 1e-4 logits; its 1-row passes
        // (target-only decoding) are exact.
        let prompts = vec![tp("a", 6, 1), tp("b", 7, 2)];
        let run = |tolerance: f32| {
            let mut target = Mock::new(30, 4.0);
            target.batched_flip = Some(1e-4);
            let mut d =
                SetAcceptance::new(Mock::new(30, 4.0), "draft:mock".into(), 0.9, 1).unwrap();
            let plan = SynthPlan {
                alphas: vec![0.9],
                ks: vec![4],
                reps: 2,
                max_new: 24,
                timing_reps: 1,
                seed: 11,
                auto_k: false,
                tie_tolerance: tolerance,
                trees: Vec::new(),
            };
            run_synth_bench(
                &mut target,
                &mut d,
                &prompts,
                &plan,
                &[(0.9, 4)],
                &mut |_| {},
                &mut |_| {},
                &AtomicBool::new(false),
            )
        };
        // Token for token (the default), and with a tolerance below the lead: the
        // flipped runner-up is emitted and the check stops the bench.
        for tolerance in [0.0, 5e-5] {
            match run(tolerance) {
                Err(SpecError::OutputMismatch { config, .. }) => {
                    assert_eq!(config, "set acceptance α=0.9 k=4")
                }
                other => panic!("tolerance {tolerance}: want OutputMismatch, got {other:?}"),
            }
        }
        // A tolerance above it: the outputs are target-only's, and each flip is
        // counted with its lead.
        let cells = run(1e-3).unwrap();
        let st = &cells[1].stats;
        assert!(st.n_tie_breaks > 0, "{st:?}");
        assert!(st.n_tie_breaks <= st.n_tested() + st.n_iterations);
        assert!((st.tie_gap_max - 1e-4).abs() < 1e-5, "{}", st.tie_gap_max);
        assert_eq!(cells[0].stats.n_tie_breaks, 0, "1-row passes are exact");
        assert_eq!(cells[1].stats.n_emitted, 2 * 2 * 24);
        // α is still what was set: the drafter stayed on the reference throughout.
        assert!(st.n_accepted > st.n_rejections, "{st:?}");
    }

    #[test]
    fn a_bad_rate_names_the_flag() {
        let e = SetAcceptance::new(Mock::new(30, 4.0), "d".into(), 1.5, 0)
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "--synth-acceptance 1.5: an acceptance rate is in [0, 1]"
        );
    }
}
