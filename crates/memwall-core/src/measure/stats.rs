//! Summary statistics of repeated timings.
//!
//! [`Observations`] checks its invariants once (≥ 1 point, all finite) and computes
//! variance in two passes (mean first, then squared deviations), which avoids the
//! cancellation of the one-pass formula (criterion's `univariate::Sample`).
//! Standard deviation is the sample (n − 1) estimate, as llama-bench's `stdev`.
//! Outliers use the modified z-score of Iglewicz & Hoaglin (1993):
//! `z = 0.6745 × (x − median) ÷ MAD`, |z| > 3.5 is an outlier (hyperfine's
//! `outlier_detection.rs` uses the same rule).

use serde::{Deserialize, Serialize};

/// Modified z-score threshold for outliers (Iglewicz & Hoaglin).
pub const OUTLIER_Z: f64 = 3.5;

/// A non-empty set of finite observations.
#[derive(Debug, Clone, PartialEq)]
pub struct Observations(Vec<f64>);

/// Why a sample could not be built.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ObservationsError {
    /// No observations.
    #[error("a sample needs at least one observation")]
    Empty,
    /// NaN or infinite observation.
    #[error("observation {0} is not finite")]
    NotFinite(usize),
}

impl Observations {
    /// Checks the invariants and keeps the observations.
    ///
    /// # Errors
    /// [`ObservationsError`] when empty or when a value is not finite.
    pub fn new(xs: Vec<f64>) -> Result<Observations, ObservationsError> {
        if xs.is_empty() {
            return Err(ObservationsError::Empty);
        }
        if let Some(i) = xs.iter().position(|x| !x.is_finite()) {
            return Err(ObservationsError::NotFinite(i));
        }
        Ok(Observations(xs))
    }
    /// The observations.
    pub fn values(&self) -> &[f64] {
        &self.0
    }
    /// Number of observations.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Always false (a sample is non-empty by construction).
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Arithmetic mean.
    pub fn mean(&self) -> f64 {
        self.0.iter().sum::<f64>() / self.0.len() as f64
    }
    /// Sample standard deviation (n − 1); 0 for a single observation.
    pub fn std_dev(&self) -> f64 {
        if self.0.len() < 2 {
            return 0.0;
        }
        let m = self.mean();
        let ss: f64 = self.0.iter().map(|x| (x - m) * (x - m)).sum();
        (ss / (self.0.len() - 1) as f64).sqrt()
    }
    /// Smallest observation.
    pub fn min(&self) -> f64 {
        self.0.iter().copied().fold(f64::INFINITY, f64::min)
    }
    /// Largest observation.
    pub fn max(&self) -> f64 {
        self.0.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    }
    /// Median (mean of the two middle values for even n).
    pub fn median(&self) -> f64 {
        median(&self.0)
    }
    /// Median absolute deviation (unscaled).
    pub fn mad(&self) -> f64 {
        let m = self.median();
        median(&self.0.iter().map(|x| (x - m).abs()).collect::<Vec<_>>())
    }
    /// Indices of outliers by modified z-score > [`OUTLIER_Z`]. Empty when MAD = 0.
    pub fn outliers(&self) -> Vec<usize> {
        let (m, mad) = (self.median(), self.mad());
        if mad == 0.0 {
            return vec![];
        }
        self.0
            .iter()
            .enumerate()
            .filter(|(_, x)| (0.6745 * (*x - m) / mad).abs() > OUTLIER_Z)
            .map(|(i, _)| i)
            .collect()
    }
    /// Mean, std, min, max together.
    pub fn summary(&self) -> Summary {
        Summary {
            mean: self.mean(),
            std_dev: self.std_dev(),
            min: self.min(),
            max: self.max(),
            n: self.len(),
        }
    }
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Mean ± std with range.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Arithmetic mean, in the samples' unit.
    pub mean: f64,
    /// Sample standard deviation (n − 1).
    pub std_dev: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Number of samples.
    pub n: usize,
}

/// A confidence interval for a proportion, both ends in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// Lower end.
    pub low: f64,
    /// Upper end.
    pub high: f64,
}

/// Wilson score interval for a binomial proportion (Wilson 1927) at the normal
/// quantile `z` (1.96 for 95 %); `[0, 1]` when `n` is 0.
pub fn wilson_interval(successes: u64, n: u64, z: f64) -> Interval {
    if n == 0 {
        return Interval {
            low: 0.0,
            high: 1.0,
        };
    }
    let n_f = n as f64;
    let p = successes as f64 / n_f;
    let z2 = z * z;
    let denom = 1.0 + z2 / n_f;
    let center = (p + z2 / (2.0 * n_f)) / denom;
    let half = z * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt() / denom;
    Interval {
        low: (center - half).max(0.0),
        high: (center + half).min(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_std_match_hand_values() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sample std = sqrt(32/7) = 2.13809.
        let s = Observations::new(vec![2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.mean(), 5.0);
        assert!((s.std_dev() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(s.median(), 4.5);
        assert_eq!((s.min(), s.max()), (2.0, 9.0));
    }

    #[test]
    fn two_pass_variance_survives_a_large_offset() {
        // One-pass E[x²]−E[x]² loses everything here; two-pass gives exactly 1.
        let s = Observations::new(vec![1e9 + 1.0, 1e9 + 2.0, 1e9 + 3.0]).unwrap();
        assert!((s.std_dev() - 1.0).abs() < 1e-6, "{}", s.std_dev());
    }

    #[test]
    fn invariants_are_checked() {
        assert_eq!(Observations::new(vec![]), Err(ObservationsError::Empty));
        assert_eq!(
            Observations::new(vec![1.0, f64::NAN]),
            Err(ObservationsError::NotFinite(1))
        );
        assert_eq!(Observations::new(vec![3.0]).unwrap().std_dev(), 0.0);
    }

    #[test]
    fn mad_outliers() {
        // median 10, MAD 1 → z(30) = 0.6745 × 20 = 13.5 > 3.5.
        let s = Observations::new(vec![9.0, 10.0, 11.0, 10.0, 30.0]).unwrap();
        assert_eq!(s.mad(), 1.0);
        assert_eq!(s.outliers(), vec![4]);
        assert!(
            Observations::new(vec![1.0, 1.0, 1.0])
                .unwrap()
                .outliers()
                .is_empty()
        );
    }

    #[test]
    fn wilson_matches_published_example() {
        // 81/263 at 95 %: (0.2553, 0.3662) (Wikipedia's Wilson example, computed by hand).
        let Interval { low: lo, high: hi } = wilson_interval(81, 263, 1.96);
        assert!(
            (lo - 0.2553).abs() < 5e-4 && (hi - 0.3662).abs() < 5e-4,
            "{lo} {hi}"
        );
        let Interval { low: lo, high: hi } = wilson_interval(0, 10, 1.96);
        assert_eq!(lo, 0.0);
        assert!((hi - 0.2775).abs() < 5e-4, "{hi}");
    }
}
