//! Sampling: turning a logit row into a probability distribution and drawing from it.
//!
//! [`SamplingParams::distribution`] applies, in this order (Hugging Face
//! `transformers`' logits-warper order): temperature, top-k, top-p (nucleus), then
//! renormalizes. The *same* function is applied to the target's logits (giving
//! `p`) and to the draft's logits (giving `q`) before the acceptance test, as the
//! speculative-sampling guarantee is about those filtered distributions: the
//! emitted tokens are distributed as the filtered `p`.
//!
//! Temperature 0 is greedy: the distribution is a point mass on the first maximal
//! logit ([`crate::measure::engine::argmax`]).
//!
//! Draws take a uniform `u ∈ [0, 1)` ([`sample_with`]) so that the verifier can be
//! checked with deterministic quadrature; [`uniform`] gets one from a seeded
//! ChaCha8 generator.

use crate::measure::engine::TokenId;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Sampling settings shared by target and draft.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SamplingParams {
    /// Temperature (> 0), or 0 for greedy.
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens (0 = off).
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose mass reaches `top_p`
    /// (1.0 = off), in (0, 1].
    pub top_p: f32,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams::greedy()
    }
}

impl SamplingParams {
    /// Greedy decoding (temperature 0).
    pub fn greedy() -> SamplingParams {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
        }
    }

    /// Temperature 0?
    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    /// Checks the ranges.
    ///
    /// # Errors
    /// A message naming the bad field and its allowed range.
    pub fn validate(&self) -> Result<(), String> {
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return Err(format!(
                "temperature {} must be ≥ 0 (0 = greedy)",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(format!("top-p {} must be in (0, 1]", self.top_p));
        }
        Ok(())
    }

    /// Short label (`greedy`, `T=1 top-k=40 top-p=0.95`).
    pub fn label(&self) -> String {
        if self.is_greedy() {
            return "greedy".into();
        }
        let mut s = format!("T={}", self.temperature);
        if self.top_k > 0 {
            s.push_str(&format!(" top-k={}", self.top_k));
        }
        if self.top_p < 1.0 {
            s.push_str(&format!(" top-p={}", self.top_p));
        }
        s
    }

    /// The filtered, normalized distribution of `logits` (length = `logits.len()`,
    /// zeros outside the kept set). Computed in f64 with the max-logit shift.
    /// Greedy gives a point mass on the first maximal logit.
    ///
    /// Cost: O(n log n) when top-k/top-p are on (a sort), else O(n).
    pub fn distribution(&self, logits: &[f32]) -> Vec<f64> {
        let n = logits.len();
        let mut p = vec![0.0f64; n];
        if n == 0 {
            return p;
        }
        if self.is_greedy() {
            p[crate::measure::engine::argmax(logits) as usize] = 1.0;
            return p;
        }
        let t = self.temperature as f64;
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let mut sum = 0.0;
        for (pi, &l) in p.iter_mut().zip(logits) {
            let e = ((l as f64 - max) / t).exp();
            *pi = e;
            sum += e;
        }
        for pi in p.iter_mut() {
            *pi /= sum;
        }
        let need_sort = (self.top_k > 0 && self.top_k < n) || self.top_p < 1.0;
        if need_sort {
            let mut order: Vec<usize> = (0..n).collect();
            // Descending probability; ties by lower id first (stable, deterministic).
            order.sort_by(|&a, &b| p[b].total_cmp(&p[a]).then(a.cmp(&b)));
            let mut keep = if self.top_k > 0 { self.top_k.min(n) } else { n };
            if self.top_p < 1.0 {
                let mut acc = 0.0;
                let mut m = 0;
                for &i in &order[..keep] {
                    acc += p[i];
                    m += 1;
                    if acc >= self.top_p as f64 {
                        break;
                    }
                }
                keep = m.max(1);
            }
            for &i in &order[keep..] {
                p[i] = 0.0;
            }
            let s: f64 = order[..keep].iter().map(|&i| p[i]).sum();
            for &i in &order[..keep] {
                p[i] /= s;
            }
        }
        p
    }
}

/// A uniform draw in [0, 1) from the seeded generator.
pub fn uniform(rng: &mut ChaCha8Rng) -> f64 {
    rng.random::<f64>()
}

/// Inverse-CDF draw from the (possibly unnormalized, non-negative) weights `w` with
/// uniform `u ∈ [0, 1)`: the first index whose cumulative weight exceeds
/// `u × Σw`. Zero-weight entries are never chosen. Returns `None` when `Σw = 0`.
pub fn sample_with(w: &[f64], u: f64) -> Option<TokenId> {
    let total: f64 = w.iter().sum();
    if total <= 0.0 || total.is_nan() {
        return None;
    }
    let target = u * total;
    let mut acc = 0.0;
    let mut last_pos = None;
    for (i, &x) in w.iter().enumerate() {
        if x > 0.0 {
            acc += x;
            last_pos = Some(i);
            if acc > target {
                return Some(i as TokenId);
            }
        }
    }
    // Rounding left `acc` ≤ target: the last positive weight.
    last_pos.map(|i| i as TokenId)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temperature_one_is_softmax() {
        let p = SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
        }
        .distribution(&[0.0, (2.0f32).ln(), (5.0f32).ln()]);
        // softmax(ln 1, ln 2, ln 5) = (1, 2, 5) / 8.
        for (a, b) in p.iter().zip([0.125, 0.25, 0.625]) {
            assert!((a - b).abs() < 1e-7, "{p:?}");
        }
    }

    #[test]
    fn temperature_two_halves_the_logits() {
        let p = SamplingParams {
            temperature: 2.0,
            top_k: 0,
            top_p: 1.0,
        }
        .distribution(&[0.0, (4.0f32).ln()]);
        // exp(ln4 / 2) = 2 → (1, 2) / 3.
        assert!((p[0] - 1.0 / 3.0).abs() < 1e-7 && (p[1] - 2.0 / 3.0).abs() < 1e-7);
    }

    #[test]
    fn top_k_and_top_p_keep_the_right_sets() {
        let logits = [1.0f32.ln(), 2.0f32.ln(), 3.0f32.ln(), 4.0f32.ln()]; // (.1,.2,.3,.4)
        let k2 = SamplingParams {
            temperature: 1.0,
            top_k: 2,
            top_p: 1.0,
        }
        .distribution(&logits);
        // {3,4} renormalized: 3/7, 4/7.
        assert_eq!(k2[0], 0.0);
        assert_eq!(k2[1], 0.0);
        assert!((k2[2] - 3.0 / 7.0).abs() < 1e-7 && (k2[3] - 4.0 / 7.0).abs() < 1e-7);
        // top-p 0.65: 0.4 < 0.65, 0.4+0.3 = 0.7 ≥ 0.65 → {3,4}.
        let p65 = SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 0.65,
        }
        .distribution(&logits);
        assert_eq!(p65, k2);
        // top-p 0.3: only the largest.
        let p3 = SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 0.3,
        }
        .distribution(&logits);
        assert_eq!(p3, vec![0.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn greedy_is_a_point_mass_on_the_first_max() {
        let p = SamplingParams::greedy().distribution(&[1.0, 3.0, 3.0]);
        assert_eq!(p, vec![0.0, 1.0, 0.0]);
    }

    #[test]
    fn inverse_cdf_draws() {
        let w = [0.0, 1.0, 0.0, 3.0];
        assert_eq!(sample_with(&w, 0.0), Some(1));
        assert_eq!(sample_with(&w, 0.2499), Some(1));
        assert_eq!(sample_with(&w, 0.25), Some(3));
        assert_eq!(sample_with(&w, 0.999_999), Some(3));
        assert_eq!(sample_with(&[0.0, 0.0], 0.5), None);
    }

    #[test]
    fn bad_params_are_named() {
        let e = SamplingParams {
            temperature: -1.0,
            top_k: 0,
            top_p: 1.0,
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("temperature"), "{e}");
        let e = SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 0.0,
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("top-p"), "{e}");
    }
}
