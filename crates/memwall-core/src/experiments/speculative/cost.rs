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

use serde::{Deserialize, Serialize};

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
}

impl Timings {
    /// Largest `k` these timings cover.
    pub fn k_max(&self) -> usize {
        self.t_verify_ns.len().saturating_sub(1)
    }
    /// `T_iter(k)`, ns; `None` when `k` exceeds [`Timings::k_max`].
    pub fn iteration_ns(&self, k: usize) -> Option<f64> {
        Some(k as f64 * self.t_draft_ns + *self.t_verify_ns.get(k)?)
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

/// Predicted speedup over target-only decoding, `E[tokens] · t_verify(1) ÷ T_iter(k)`;
/// `None` when `k` is outside the timings. `k = 0` gives exactly 1.
pub fn predicted_speedup(t: &Timings, alpha: f64, k: usize) -> Option<f64> {
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
    let it = t.iteration_ns(k)?;
    let base = *t.t_verify_ns.first()?;
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
    let base = *t.t_verify_ns.first()?;
    let (mut e, mut cost) = (0.0, 0.0);
    for (m, &n) in hist.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let w = n as f64;
        e += w * expected_tokens(alpha, m);
        cost += w * t.iteration_ns(m)?;
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
        if let Some(s) = predicted_speedup_with(t, alpha, k, f) {
            if s > best.predicted {
                best = Choice { k, predicted: s };
            }
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
