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
    let t = if temperature > 0.0 {
        temperature as f64
    } else {
        1.0
    };
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let mut all = 0.0;
    let mut cut = 0.0;
    for (i, &l) in logits.iter().enumerate() {
        let e = ((l as f64 - max) / t).exp();
        all += e;
        if i >= n_shared {
            cut += e;
        }
    }
    cut / all
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
        assert!((discarded_mass(&l, 2, 1.0) - 0.7).abs() < 1e-7);
        assert!(
            (discarded_mass(&l, 2, 0.0) - 0.7).abs() < 1e-7,
            "greedy measures at T=1"
        );
        // T = 2: weights 1, √2, √3, 2.
        let w = [1.0, 2f64.sqrt(), 3f64.sqrt(), 2.0];
        let want = (w[2] + w[3]) / w.iter().sum::<f64>();
        assert!((discarded_mass(&l, 2, 2.0) - want).abs() < 1e-7);
        assert_eq!(discarded_mass(&l, 4, 1.0), 0.0);
        assert_eq!(discarded_mass(&l, 9, 1.0), 0.0);
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
