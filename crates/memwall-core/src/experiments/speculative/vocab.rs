//! Vocabulary mismatch between draft and target.
//!
//! Two models with the same tokenizer can still have logit rows of different
//! widths: Qwen2.5-7B has 152064 logits, Qwen2.5-0.5B 151936, for a 151665-entry
//! tokenizer (the rest is padding). The verifier needs `p` and `q` on one support,
//! so both rows are truncated to the shared prefix `0..min(n_target, n_draft)` and
//! renormalized there. That changes the distributions by the mass that was cut
//! off, so it is *measured* at every step ([`discarded_mass`]) and summarized
//! ([`MassStats`]: max and mean) instead of assumed negligible. With equal widths
//! nothing is cut and the recorded mass is exactly 0.

use serde::{Deserialize, Serialize};

/// Probability mass (softmax at `temperature`, 1 when greedy) of `logits[n_shared..]`:
/// what truncating the row to the shared support throws away. 0 when
/// `n_shared >= logits.len()`.
pub fn discarded_mass(logits: &[f32], n_shared: usize, temperature: f32) -> f64 {
    if n_shared >= logits.len() {
        return 0.0;
    }
    let t = if temperature > 0.0 { temperature } else { 1.0 };
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let cut = sum_exp(&logits[n_shared..], max, 1.0 / t);
    let all = sum_exp(&logits[..n_shared], max, 1.0 / t) + cut;
    cut / all
}

/// Σ exp((x − max) · inv_t): blocks of 512 summed in 8 f32 lanes (which the
/// compiler vectorizes), the blocks in f64. It runs on every verified row inside
/// the timed loop: a scalar f64 `exp` over a 152k-wide row took about 1 ms, as
/// long as a 14B target's whole forward pass on an H200 takes per row.
fn sum_exp(xs: &[f32], max: f32, inv_t: f32) -> f64 {
    let mut total = 0f64;
    for block in xs.chunks(512) {
        let mut acc = [0f32; 8];
        let mut lanes = block.chunks_exact(8);
        for c in &mut lanes {
            for i in 0..8 {
                acc[i] += exp_neg((c[i] - max) * inv_t);
            }
        }
        let mut s: f32 = acc.iter().sum();
        for &x in lanes.remainder() {
            s += exp_neg((x - max) * inv_t);
        }
        total += f64::from(s);
    }
    total
}

/// `exp(x)` for `x ≤ 0`, branch-free (Cephes' `expf`: Cody–Waite reduction by ln 2
/// and a degree-5 polynomial, within 2 ulp); 0 below −87.
#[inline(always)]
fn exp_neg(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    // 1.5 · 2²³: adding and subtracting it rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let x = x.max(-87.0);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = x - n * C1 - n * C2;
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 5e-1;
    let e = p * r * r + r + 1.0;
    e * f32::from_bits((((n as i32) + 127) as u32) << 23)
}

/// Running max and mean of the discarded mass over steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MassStats {
    /// Rows measured.
    pub n: u64,
    /// Sum of the discarded masses.
    pub sum: f64,
    /// Largest discarded mass.
    pub max: f64,
}

impl MassStats {
    /// Records one row's discarded mass.
    pub fn add(&mut self, m: f64) {
        self.n += 1;
        self.sum += m;
        self.max = self.max.max(m);
    }
    /// Mean discarded mass (0 when nothing was recorded).
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum / self.n as f64
        }
    }
    /// Merges another summary.
    pub fn merge(&mut self, o: &MassStats) {
        self.n += o.n;
        self.sum += o.sum;
        self.max = self.max.max(o.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discarded_mass_is_the_softmax_tail() {
        // logits ln(1), ln(2), ln(3), ln(4): cutting the last two drops 7/10.
        let l = [1.0f32.ln(), 2.0f32.ln(), 3.0f32.ln(), 4.0f32.ln()];
        assert!((discarded_mass(&l, 2, 1.0) - 0.7).abs() < 1e-6);
        assert!(
            (discarded_mass(&l, 2, 0.0) - 0.7).abs() < 1e-6,
            "greedy measures at T=1"
        );
        // T = 2: weights 1, √2, √3, 2.
        let w = [1.0, 2f64.sqrt(), 3f64.sqrt(), 2.0];
        let want = (w[2] + w[3]) / w.iter().sum::<f64>();
        assert!((discarded_mass(&l, 2, 2.0) - want).abs() < 1e-6);
        assert_eq!(discarded_mass(&l, 4, 1.0), 0.0);
        assert_eq!(discarded_mass(&l, 9, 1.0), 0.0);
    }

    #[test]
    fn the_fast_sum_matches_f64_exp_on_a_wide_row() {
        // A 152064-wide row of logits in [−30, 10) from a fixed LCG, and the exact
        // f64 reference: relative error below 1e-5 at T = 1 and 0.7.
        let mut z = 12345u64;
        let row: Vec<f32> = (0..152_064)
            .map(|_| {
                z = z
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((z >> 40) as f32 / (1u64 << 24) as f32) * 40.0 - 30.0
            })
            .collect();
        for t in [1.0f32, 0.7] {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
            let e: Vec<f64> = row
                .iter()
                .map(|&l| ((l as f64 - max) / t as f64).exp())
                .collect();
            let want = e[151_936..].iter().sum::<f64>() / e.iter().sum::<f64>();
            let got = discarded_mass(&row, 151_936, t);
            assert!((got - want).abs() < 1e-5 * want, "T {t}: {got} vs {want}");
        }
        // exp itself, from 0 down to underflow.
        for i in 0..2000 {
            let x = -(i as f32) * 0.05;
            let want = (x as f64).exp();
            let got = exp_neg(x) as f64;
            assert!(
                (got - want).abs() <= 3e-7 * want + 1e-37,
                "exp({x}) = {got}, want {want}"
            );
        }
    }

    #[test]
    fn mass_stats() {
        let mut m = MassStats::default();
        assert_eq!(m.mean(), 0.0);
        m.add(0.1);
        m.add(0.3);
        assert!((m.mean() - 0.2).abs() < 1e-12);
        assert_eq!(m.max, 0.3);
    }
}
