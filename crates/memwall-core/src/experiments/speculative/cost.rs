//! The cost model of speculative decoding (Leviathan et al. 2023, §3.3–3.4),
//! with measured times instead of the paper's cost coefficient `c`.
//!
//! With per-position acceptance probability `α` (i.i.d. model) and draft length `k`,
//! the expected tokens emitted per iteration are
//! `E[tokens] = (1 − α^(k+1)) ÷ (1 − α)` (= `k + 1` at `α = 1`).
//! One iteration costs `k` draft forward passes plus one target pass over `k + 1`
//! positions: `T_iter(k) = k · t_draft + t_verify(k + 1)`; target-only decoding
//! costs `t_verify(1)` per token. The predicted speedup is
//! `S(k) = E[tokens] · t_verify(1) ÷ T_iter(k)`.
//!
//! The paper assumes `t_verify(k + 1) ≈ t_verify(1)` (verification is memory-bound
//! and nearly free). On a small CPU that is false: a pass over `k + 1` positions
//! costs noticeably more than one over a single position, so `S(k)` can fall below
//! 1 for every `k`; then [`choose_k`] answers "off".
//!
//! **The loop's own costs.** The forward-pass times leave out what the loop does
//! around them (per iteration: the verify rows' fetch and host work, accept/reject,
//! KV rollback, bookkeeping; per draft step: what a step costs in the loop beyond
//! the timed one, per drafted token), and target-only decoding in the loop differs from `t_verify(1)`
//! the same way. [`LoopOverhead`] measures those three terms from untimed runs of
//! the loop made before the timed runs ([`LoopOverhead::from_runs`]); with them
//! `T_iter(k) = k · (t_draft + δ_step) + t_verify(k + 1) + c_iter` and target-only
//! decoding costs `t_verify(1) + c_base` per token. Timings without them give the
//! paper's model above.

use super::run::SpecStats;
use serde::{Deserialize, Serialize};

/// What the loop costs beyond the timed forward passes, measured from untimed runs
/// of the loop on the calibration prompt before any timed run
/// ([`LoopOverhead::from_runs`]). Each term may be negative (a pass that runs
/// faster in the loop than when timed alone).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoopOverhead {
    /// The set acceptance rate of the calibration run (`None`: the drafter's own
    /// acceptance), [`Timings::overhead_at`] picks by it.
    pub alpha: Option<f64>,
    /// The draft length of the calibration run.
    pub k: usize,
    /// `c_iter`: fixed time per iteration beyond `t_verify(m + 1)` and the draft
    /// steps, ns.
    pub iter_ns: f64,
    /// `δ_step`: time per drafted token in the loop beyond `t_draft`, ns.
    pub draft_step_ns: f64,
    /// `c_base`: time per token of target-only decoding in the loop beyond
    /// `t_verify(1)`, ns.
    pub base_ns: f64,
}

impl LoopOverhead {
    /// The three terms from a target-only run (`base`, `k = 0` through the loop) and
    /// a speculative run (`spec`) of the loop, against the timed passes `t`:
    /// - `c_base = base.decode_ns ÷ base.n_iterations − t_verify(1)`;
    /// - `δ_step = spec.draft_ns ÷ spec.n_drafted − t_draft` (0 when nothing was
    ///   drafted): the drafter's whole time per drafted token (its catch-up pass
    ///   included) beyond one timed draft step;
    /// - `c_iter = (spec.decode_ns − spec.draft_ns − Σ_{m ≥ 1} h[m] · t_verify(m + 1)
    ///   − h[0] · (t_verify(1) + c_base)) ÷ Σ_{m ≥ 1} h[m]`, `h` the draft-length
    ///   histogram (an iteration without a draft costs a target-only step).
    ///
    /// With these, [`Timings::iteration_ns_at`] summed over the calibration run's
    /// iterations is its decode time again. `None` when a run has no iterations, no
    /// iteration had a draft, or a length is beyond the timings.
    pub fn from_runs(
        t: &Timings,
        alpha: Option<f64>,
        k: usize,
        base: &SpecStats,
        spec: &SpecStats,
    ) -> Option<LoopOverhead> {
        let t1 = *t.t_verify_ns.first()?;
        if base.n_iterations == 0 || spec.n_iterations == 0 {
            return None;
        }
        let base_ns = base.decode_ns as f64 / base.n_iterations as f64 - t1;
        let draft_step_ns = if spec.n_drafted > 0 {
            spec.draft_ns as f64 / spec.n_drafted as f64 - t.t_draft_ns
        } else {
            0.0
        };
        let h = &spec.draft_len_hist;
        let plain = h.first().copied().unwrap_or(0) as f64;
        let mut verify = plain * (t1 + base_ns);
        let mut with_draft = 0.0;
        for (m, &n) in h.iter().enumerate().skip(1) {
            if n > 0 {
                verify += n as f64 * t.t_verify_ns.get(m)?;
                with_draft += n as f64;
            }
        }
        if with_draft == 0.0 {
            return None;
        }
        let iter_ns = (spec.decode_ns as f64 - spec.draft_ns as f64 - verify) / with_draft;
        Some(LoopOverhead {
            alpha,
            k,
            iter_ns,
            draft_step_ns,
            base_ns,
        })
    }
}

/// A tree shape's own loop cost, from an untimed run of the tree loop on the
/// calibration prompt before any timed run (`TreeOverhead::from_run`, in tree.rs with
/// the rest of the tree model): what an iteration costs beyond its timed passes (the
/// draft's catch-up and passes by width, the `nodes + 1`-row verify). It holds what the chain's `c_iter` and `δ_step` hold
/// for a chain, and what only a tree does: the leaves' sequence copies and parking,
/// the compaction re-prefills, and a pass over several sequences costing more than
/// the one-sequence pass the timings measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeOverhead {
    /// The shape of the calibration run, by its label (`k3 b2 m1`, as
    /// `TreeShape::label` writes it).
    pub shape: String,
    /// Its set acceptance rate.
    pub alpha: f64,
    /// `c_tree`: time per iteration with a draft beyond its timed passes, ns.
    pub iter_ns: f64,
}

/// Measured times of the pieces of an iteration, ns (medians of repetitions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// `t_verify_ns[j − 1]`: one target pass over `j` positions with logits at all
    /// of them, plus their argmax (`j = 1` is plain target decoding).
    pub t_verify_ns: Vec<f64>,
    /// One drafter step (one draft-model pass of one token plus its argmax; the
    /// n-gram lookup's time for the n-gram drafter).
    pub t_draft_ns: f64,
    /// Depth (cached positions) at which these were measured.
    pub depth: u32,
    /// The loop's own costs, one per calibration run (empty: the forward passes
    /// alone, the paper's model; so are timings stored before they were kept).
    #[serde(default)]
    pub overheads: Vec<LoopOverhead>,
    /// Tree drafts: `draft_rows_ns[w − 1]`, one draft pass over `w` rows (a tree
    /// level's parents) with the top tokens of each taken
    /// ([`super::tree_loop::measure_draft_rows`]; empty without trees).
    #[serde(default)]
    pub draft_rows_ns: Vec<f64>,
    /// Tree drafts: each shape's own loop cost per iteration, one per calibration run
    /// ([`TreeOverhead`]; empty without trees, and in timings stored
    /// before it was kept).
    #[serde(default)]
    pub tree_overheads: Vec<TreeOverhead>,
}

impl Timings {
    /// Largest `k` these timings cover.
    pub fn k_max(&self) -> usize {
        self.t_verify_ns.len().saturating_sub(1)
    }
    /// `T_iter(k)` from the forward passes alone, ns; `None` when `k` exceeds
    /// [`Timings::k_max`].
    pub fn iteration_ns(&self, k: usize) -> Option<f64> {
        Some(k as f64 * self.t_draft_ns + *self.t_verify_ns.get(k)?)
    }
    /// The loop overhead measured at the acceptance rate nearest `alpha` (a drafter's
    /// own, `alpha = None`, first; else the nearest set rate); zero when none was
    /// measured.
    pub fn overhead_at(&self, alpha: Option<f64>) -> LoopOverhead {
        let zero = LoopOverhead {
            alpha,
            k: 0,
            iter_ns: 0.0,
            draft_step_ns: 0.0,
            base_ns: 0.0,
        };
        let dist = |o: &LoopOverhead| match (o.alpha, alpha) {
            (None, None) => 0.0,
            (Some(a), Some(b)) => (a - b).abs(),
            _ => 2.0,
        };
        self.overheads
            .iter()
            .min_by(|a, b| dist(a).total_cmp(&dist(b)))
            .copied()
            .unwrap_or(zero)
    }
    /// `T_iter(m)` in the loop with `o`'s terms, ns: `m · (t_draft + δ_step) +
    /// t_verify(m + 1) + c_iter` for `m ≥ 1`, a target-only step
    /// ([`Timings::base_ns_at`]) for `m = 0`; `None` beyond [`Timings::k_max`].
    pub fn iteration_ns_at(&self, m: usize, o: &LoopOverhead) -> Option<f64> {
        if m == 0 {
            return self.base_ns_at(o);
        }
        Some(m as f64 * (self.t_draft_ns + o.draft_step_ns) + self.t_verify_ns.get(m)? + o.iter_ns)
    }
    /// One target-only token in the loop, `t_verify(1) + c_base`, ns.
    pub fn base_ns_at(&self, o: &LoopOverhead) -> Option<f64> {
        Some(self.t_verify_ns.first()? + o.base_ns)
    }
}

/// Expected tokens emitted per iteration, `(1 − α^(k+1)) ÷ (1 − α)`.
pub fn expected_tokens(alpha: f64, k: usize) -> f64 {
    let a = alpha.clamp(0.0, 1.0);
    if (1.0 - a).abs() < 1e-12 {
        return (k + 1) as f64;
    }
    (1.0 - a.powi(k as i32 + 1)) / (1.0 - a)
}

/// Predicted speedup over target-only decoding, `E[tokens] · t_verify(1) ÷ T_iter(k)`
/// (with the loop's own costs when `t` has them: `t_verify(1) + c_base` and
/// [`Timings::iteration_ns_at`], the overhead measured at the set rate nearest
/// `alpha`); `None` when `k` is outside the timings. `k = 0` gives exactly 1.
pub fn predicted_speedup(t: &Timings, alpha: f64, k: usize) -> Option<f64> {
    predicted_speedup_set(t, alpha, Some(alpha), k)
}

/// [`predicted_speedup`] with the loop overhead measured at `overhead_alpha`
/// ([`Timings::overhead_at`]; `None`: the drafter's own acceptance).
pub fn predicted_speedup_set(
    t: &Timings,
    alpha: f64,
    overhead_alpha: Option<f64>,
    k: usize,
) -> Option<f64> {
    if k == 0 {
        t.iteration_ns(0)?;
        return Some(1.0);
    }
    let o = t.overhead_at(overhead_alpha);
    let it = t.iteration_ns_at(k, &o)?;
    let base = t.base_ns_at(&o)?;
    Some(expected_tokens(alpha, k) * base / it)
}

/// The paper's model from the forward passes alone (the loop's own costs left out),
/// for comparison with [`predicted_speedup`].
pub fn predicted_speedup_passes_only(t: &Timings, alpha: f64, k: usize) -> Option<f64> {
    let it = t.iteration_ns(k)?;
    let base = *t.t_verify_ns.first()?;
    Some(expected_tokens(alpha, k) * base / it)
}

/// Predicted speedup when only a fraction `f` of iterations has a draft (the n-gram
/// drafter finds no match in the others, which then cost one plain target step and
/// emit one token): `E = (1 − f) + f·E[tokens]`, `T = (1 − f)·t_verify(1) + f·T_iter(k)`,
/// `S = E · t_verify(1) ÷ T`. `f = 1` is [`predicted_speedup`].
pub fn predicted_speedup_with(t: &Timings, alpha: f64, k: usize, f: f64) -> Option<f64> {
    let f = f.clamp(0.0, 1.0);
    let o = t.overhead_at(None);
    let it = t.iteration_ns_at(k, &o)?;
    let base = t.base_ns_at(&o)?;
    let e = (1.0 - f) + f * expected_tokens(alpha, k);
    Some(e * base / ((1.0 - f) * base + f * it))
}

/// Predicted speedup from the distribution of draft lengths actually proposed:
/// `hist[m]` iterations proposed `m` tokens (`m = 0`: no draft, one plain target
/// step). An iteration with `m` drafted tokens emits `E(α, m)` tokens on average and
/// costs `m · t_draft + t_verify(m + 1)`, so
/// `S = Σ_m hist[m] · E(α, m) · t_verify(1) ÷ Σ_m hist[m] · (m · t_draft + t_verify(m + 1))`.
///
/// [`predicted_speedup_with`] is the case where every draft has the full length `k`;
/// this form also counts the n-gram drafter's short matches (a match near the end of
/// the history has fewer than `k` tokens after it) and the iterations near the end
/// of a generation, whose `k` is cut to the tokens left. `None` when `hist` is empty
/// (all zero) or names an `m` beyond [`Timings::k_max`].
pub fn predicted_speedup_hist(t: &Timings, alpha: f64, hist: &[u64]) -> Option<f64> {
    predicted_speedup_hist_set(t, alpha, None, hist)
}

/// [`predicted_speedup_hist`] with the loop overhead measured at `overhead_alpha`
/// ([`Timings::overhead_at`]).
pub fn predicted_speedup_hist_set(
    t: &Timings,
    alpha: f64,
    overhead_alpha: Option<f64>,
    hist: &[u64],
) -> Option<f64> {
    let o = t.overhead_at(overhead_alpha);
    let base = t.base_ns_at(&o)?;
    let (mut e, mut cost) = (0.0, 0.0);
    for (m, &n) in hist.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let w = n as f64;
        e += w * expected_tokens(alpha, m);
        cost += w * t.iteration_ns_at(m, &o)?;
    }
    (cost > 0.0).then(|| e * base / cost)
}

/// z of the one-sided 95 % bound `--k auto` decides with (`Φ⁻¹(0.95)` = 1.6449).
pub const DECISION_Z: f64 = 1.644_853_626_951_472_2;

/// Wilson score lower bound of a binomial proportion (Wilson 1927; Agresti & Coull
/// 1998): `(p̂ + z²/2n − z·√(p̂(1 − p̂)/n + z²/4n²)) ÷ (1 + z²/n)` with `p̂ = s/n`.
/// `None` for `n = 0`.
///
/// `--k auto` decides with the lower bound of α rather than α̂: α̂ comes from one
/// short calibration prompt, and α̂ = 1 (every tested position accepted, seen on
/// json-18) predicts `E[tokens] = k + 1`, the largest value possible, from a sample of
/// a few dozen positions. At `s = n` the bound is `1 ÷ (1 + z²/n)` (0.937 for n = 40).
pub fn wilson_lower(successes: u64, trials: u64, z: f64) -> Option<f64> {
    if trials == 0 {
        return None;
    }
    let n = trials as f64;
    let p = (successes.min(trials)) as f64 / n;
    let z2 = z * z;
    let centre = p + z2 / (2.0 * n);
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    Some(((centre - half) / (1.0 + z2 / n)).clamp(0.0, 1.0))
}

/// `--k auto`'s decision.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// Chosen draft length; 0 = speculation off (target-only decoding).
    pub k: usize,
    /// Its predicted speedup (1 for off).
    pub predicted: f64,
}

/// The `k` in `allowed` with the largest predicted speedup (with draft fraction `f`,
/// see [`predicted_speedup_with`]), or off (`k = 0`) when no `k` is predicted to beat
/// target-only decoding.
pub fn choose_k(t: &Timings, alpha: f64, f: f64, allowed: &[usize]) -> Choice {
    let mut best = Choice {
        k: 0,
        predicted: 1.0,
    };
    for &k in allowed {
        if k == 0 {
            continue;
        }
        if let Some(s) = predicted_speedup_with(t, alpha, k, f)
            && s > best.predicted
        {
            best = Choice { k, predicted: s };
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_lower_bound_matches_hand_values() {
        // s = n: 1 / (1 + z²/n); n = 40 → 1 / (1 + 2.705544/40) = 0.936647.
        let lo = wilson_lower(40, 40, DECISION_Z).unwrap();
        assert!((lo - 1.0 / (1.0 + DECISION_Z * DECISION_Z / 40.0)).abs() < 1e-12);
        assert!((lo - 0.936_647).abs() < 1e-6, "{lo}");
        // p̂ = 0.5, n = 100, z = 1.644854 (computed independently with Python):
        // (0.513528 − 1.644854·√(0.0025 + 0.0000676)) / 1.027055 = 0.418848.
        let lo = wilson_lower(50, 100, DECISION_Z).unwrap();
        assert!((lo - 0.418_848).abs() < 1e-5, "{lo}");
        // s = 0: bound 0; no trials: none; the bound is below p̂.
        assert_eq!(wilson_lower(0, 10, DECISION_Z), Some(0.0));
        assert_eq!(wilson_lower(0, 0, DECISION_Z), None);
        assert!(wilson_lower(30, 40, DECISION_Z).unwrap() < 0.75);
    }

    #[test]
    fn expected_tokens_closed_form() {
        // α = 0.8, k = 4: (1 − 0.8⁵)/(0.2) = (1 − 0.32768)/0.2 = 3.3616.
        assert!((expected_tokens(0.8, 4) - 3.3616).abs() < 1e-12);
        // Sum of the geometric series 1 + α + … + α^k.
        let s: f64 = (0..=6).map(|i| 0.55f64.powi(i)).sum();
        assert!((expected_tokens(0.55, 6) - s).abs() < 1e-12);
        assert_eq!(expected_tokens(1.0, 7), 8.0);
        assert_eq!(expected_tokens(0.0, 7), 1.0);
    }

    fn timings(verify_ms: &[f64], draft_ms: f64) -> Timings {
        Timings {
            t_verify_ns: verify_ms.iter().map(|m| m * 1e6).collect(),
            t_draft_ns: draft_ms * 1e6,
            depth: 0,
            overheads: Vec::new(),
            draft_rows_ns: Vec::new(),
            tree_overheads: Vec::new(),
        }
    }

    #[test]
    fn free_verification_is_the_papers_case() {
        // t_verify flat at 30 ms, draft 3 ms, α = 0.8, k = 4:
        // 3.3616 × 30 / (4·3 + 30) = 100.848 / 42 = 2.40114…
        let t = timings(&[30.0; 9], 3.0);
        let s = predicted_speedup(&t, 0.8, 4).unwrap();
        assert!((s - 100.848 / 42.0).abs() < 1e-9, "{s}");
        assert_eq!(predicted_speedup(&t, 0.8, 0), Some(1.0));
    }

    #[test]
    fn costly_verification_turns_speculation_off() {
        // A 2-core CPU: the 1.5B target at 28 ms per token, verify grows 8 ms per
        // extra position, the 0.5B draft at 16 ms. α = 0.8, k = 8:
        // E = (1 − 0.8⁹)/0.2 = 4.3290…, T = 8·16 + (28 + 64) = 220 → S = 0.551.
        let v: Vec<f64> = (0..9).map(|j| 28.0 + 8.0 * j as f64).collect();
        let t = timings(&v, 16.0);
        let s8 = predicted_speedup(&t, 0.8, 8).unwrap();
        let e = (1.0 - 0.8f64.powi(9)) / 0.2;
        assert!((s8 - e * 28.0 / 220.0).abs() < 1e-9);
        let c = choose_k(&t, 0.8, 1.0, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(c.k, 0, "every k loses: {c:?}");
        assert_eq!(c.predicted, 1.0);
        // A cheap drafter (n-gram: no model) wins at the best k.
        let t = timings(&v, 0.01);
        let c = choose_k(&t, 0.8, 1.0, &[1, 2, 4, 8]);
        assert!(c.k > 0 && c.predicted > 1.0, "{c:?}");
        let best = [1usize, 2, 4, 8]
            .iter()
            .map(|&k| predicted_speedup(&t, 0.8, k).unwrap())
            .fold(0.0, f64::max);
        assert!((c.predicted - best).abs() < 1e-12);
    }

    #[test]
    fn draft_length_histogram_model() {
        let v: Vec<f64> = (0..9).map(|j| 28.0 + 8.0 * j as f64).collect();
        let t = timings(&v, 2.0);
        // Only full-length drafts and plain steps: the draft-fraction formula.
        let f = predicted_speedup_with(&t, 0.6, 4, 0.25).unwrap();
        let h = predicted_speedup_hist(&t, 0.6, &[3, 0, 0, 0, 1]).unwrap();
        assert!((f - h).abs() < 1e-12, "{f} {h}");
        // By hand: α = 0.5, 2 iterations with m = 0, 1 with m = 1, 1 with m = 3.
        // E: 2·1 + 1.5 + 1.875 = 5.375; T: 2·28 + (2 + 36) + (6 + 52) = 152;
        // S = 5.375 · 28 / 152 = 0.990131…
        let s = predicted_speedup_hist(&t, 0.5, &[2, 1, 0, 1]).unwrap();
        assert!((s - 5.375 * 28.0 / 152.0).abs() < 1e-12, "{s}");
        // Empty, or a length beyond the timings: no prediction.
        assert_eq!(predicted_speedup_hist(&t, 0.5, &[0, 0]), None);
        assert_eq!(predicted_speedup_hist(&t, 0.5, &[]), None);
        let mut far = vec![0; 10];
        far[9] = 1;
        assert_eq!(predicted_speedup_hist(&t, 0.5, &far), None);
    }

    #[test]
    fn loop_overhead_by_hand() {
        // t_verify = 10, 14, 14.5 ms; t_draft = 1.5 ms.
        let t = timings(&[10.0, 14.0, 14.5], 1.5);
        // Target-only in the loop: 64 tokens in 588.8 ms = 9.2 ms each → c_base = −0.8 ms.
        let base = SpecStats {
            n_iterations: 64,
            decode_ns: 588_800_000,
            ..Default::default()
        };
        // 23 iterations: 1 without a draft, 2 with m = 1, 20 with m = 2; 42 draft
        // drafted tokens in 75.6 ms (1.8 ms each → δ_step = 0.3 ms); decode 420 ms.
        // Verify side: 1·(10 − 0.8) + 2·14 + 20·14.5 = 327.2 ms;
        // c_iter = (420 − 75.6 − 327.2) ÷ 22 = 17.2 ÷ 22 = 0.781818… ms.
        let spec = SpecStats {
            n_iterations: 23,
            n_draft_passes: 42,
            n_drafted: 42,
            draft_ns: 75_600_000,
            decode_ns: 420_000_000,
            draft_len_hist: vec![1, 2, 20],
            ..Default::default()
        };
        let o = LoopOverhead::from_runs(&t, Some(0.8), 2, &base, &spec).unwrap();
        assert!((o.base_ns - (-0.8e6)).abs() < 1e-3, "{o:?}");
        assert!((o.draft_step_ns - 0.3e6).abs() < 1e-3, "{o:?}");
        assert!((o.iter_ns - 17.2e6 / 22.0).abs() < 1e-3, "{o:?}");
        // Summed over the calibration run's iterations, the model is its decode time.
        let mut t = t;
        t.overheads.push(o);
        let o = t.overhead_at(Some(0.8));
        let total: f64 = spec
            .draft_len_hist
            .iter()
            .enumerate()
            .map(|(m, &n)| n as f64 * t.iteration_ns_at(m, &o).unwrap())
            .sum();
        assert!((total - 420e6).abs() < 1e-3, "{total}");
        // α = 0.8, k = 2: E = 1 + 0.8 + 0.64 = 2.44; base 9.2 ms; iteration
        // 2·1.8 + 14.5 + 0.781818 = 18.881818 ms → 2.44 · 9.2 ÷ 18.881818 = 1.188868…
        let s = predicted_speedup(&t, 0.8, 2).unwrap();
        let want = 2.44 * 9.2 / (2.0 * 1.8 + 14.5 + 17.2 / 22.0);
        assert!((s - want).abs() < 1e-9, "{s} vs {want}");
        // The forward passes alone: 2.44 · 10 ÷ (2·1.5 + 14.5) = 1.394285…
        let p = predicted_speedup_passes_only(&t, 0.8, 2).unwrap();
        assert!((p - 24.4 / 17.5).abs() < 1e-12, "{p}");
        assert_eq!(predicted_speedup(&t, 0.8, 0), Some(1.0));
    }

    #[test]
    fn loop_overhead_is_picked_by_the_nearest_set_rate() {
        let mut t = timings(&[10.0, 14.0], 1.0);
        assert_eq!(t.overhead_at(Some(0.5)).iter_ns, 0.0, "none measured: zero");
        let o = |a: f64, c: f64| LoopOverhead {
            alpha: Some(a),
            k: 1,
            iter_ns: c,
            draft_step_ns: 0.0,
            base_ns: 0.0,
        };
        t.overheads = vec![o(0.5, 1.0), o(0.7, 2.0), o(0.9, 3.0)];
        assert_eq!(t.overhead_at(Some(0.9)).iter_ns, 3.0);
        assert_eq!(t.overhead_at(Some(0.62)).iter_ns, 2.0);
        assert_eq!(t.overhead_at(Some(0.1)).iter_ns, 1.0);
        // No run without a draft, or none at all: no overhead.
        let base = SpecStats {
            n_iterations: 2,
            decode_ns: 20,
            ..Default::default()
        };
        let plain = SpecStats {
            n_iterations: 2,
            decode_ns: 20,
            draft_len_hist: vec![2],
            ..Default::default()
        };
        assert_eq!(LoopOverhead::from_runs(&t, None, 1, &base, &plain), None);
        assert_eq!(
            LoopOverhead::from_runs(&t, None, 1, &SpecStats::default(), &plain),
            None
        );
    }

    #[test]
    fn draft_fraction_mixes_plain_steps() {
        let v: Vec<f64> = (0..9).map(|j| 28.0 + 8.0 * j as f64).collect();
        let t = timings(&v, 0.0);
        // f = 1 is the plain formula; f = 0 is target-only (exactly 1).
        assert_eq!(
            predicted_speedup_with(&t, 0.7, 4, 1.0),
            predicted_speedup(&t, 0.7, 4)
        );
        assert!((predicted_speedup_with(&t, 0.7, 4, 0.0).unwrap() - 1.0).abs() < 1e-12);
        // f = 0.5, α = 0.5, k = 2: E = 0.5 + 0.5·1.75 = 1.375; T = 0.5·28 + 0.5·44 = 36;
        // S = 1.375·28/36 = 1.069444…
        let s = predicted_speedup_with(&t, 0.5, 2, 0.5).unwrap();
        assert!((s - 1.375 * 28.0 / 36.0).abs() < 1e-12, "{s}");
    }
}
