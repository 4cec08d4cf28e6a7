//! Quality measurements of a model on real data: perplexity and KL divergence on
//! a fixed text slice ([`ppl`]), task accuracy with Wilson intervals ([`tasks`]),
//! and the sandbox that executes generated code ([`sandbox`]).
//!
//! Everything here is generic over [`crate::measure::engine::Engine`]; the data come from
//! the dataset catalogue ([`crate::probe::datasets`]).

pub mod ppl;
pub mod sandbox;
pub mod tasks;

/// Errors of the evaluations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// A data file is malformed.
    #[error(
        "{path}: {problem}. The file does not match the pinned dataset: delete it and run `memwall datasets fetch`"
    )]
    Data {
        /// Path of the file the error is about.
        path: String,
        /// What is wrong (line/row and field).
        problem: String,
    },
    /// The configuration cannot work.
    #[error("evaluation settings: {0}")]
    Config(String),
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] crate::measure::engine::EngineError),
    /// The dataset is missing.
    #[error(transparent)]
    Catalog(#[from] crate::probe::catalog::CatalogError),
    /// The sandbox could not run.
    #[error("sandbox: {0}")]
    Sandbox(String),
    /// A reference tool failed.
    #[error("{tool}: {problem}")]
    Tool { tool: String, problem: String },
    /// I/O.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Cancelled by the user.
    #[error("cancelled")]
    Cancelled,
}

/// The log-sum-exp of a logit row split in two parts ([`log_sum_exp`]):
/// `ln Σ exp(x) = max + ln_sum`, so a log-probability is `x − max − ln_sum`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogSumExp {
    /// The largest logit of the row.
    pub max: f32,
    /// `ln Σ exp(x − max)`, accumulated in f64.
    pub ln_sum: f64,
}

/// Numerically stable log-sum-exp of a logit row (f64 accumulation of `exp(x − max)`,
/// as llama-perplexity's `log_softmax`).
pub fn log_sum_exp(logits: &[f32]) -> LogSumExp {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&x| ((x - max) as f64).exp()).sum();
    LogSumExp {
        max,
        ln_sum: sum.ln(),
    }
}

/// An estimate with its standard error: a mean ([`mean_and_uncertainty`]) or a
/// perplexity as llama-perplexity prints it (`PPL = value +/- uncertainty`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// The estimate, in the unit of the values it was computed from.
    pub value: f64,
    /// Its standard error, same unit.
    pub uncertainty: f64,
}

/// Mean and its standard error from running sums, as llama-perplexity's
/// `mean_and_uncertainty`: value `Σx/n`, uncertainty `sqrt((Σx²/n − mean²)/(n − 1))`
/// (0 for one value, NaN for none).
pub fn mean_and_uncertainty(sum: f64, sum2: f64, n: u64) -> Estimate {
    if n == 0 {
        return Estimate {
            value: f64::NAN,
            uncertainty: f64::NAN,
        };
    }
    let mean = sum / n as f64;
    let var = sum2 / n as f64 - mean * mean;
    let unc = if n > 1 && var > 0.0 {
        (var / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    Estimate {
        value: mean,
        uncertainty: unc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_sum_exp_matches_the_closed_form() {
        // ln(e^1 + e^2 + e^3) = 3 + ln(1 + e^-1 + e^-2) = 3.40760596.
        let LogSumExp { max: m, ln_sum: l } = log_sum_exp(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 3.0);
        assert!((m as f64 + l - 3.407_605_964).abs() < 1e-8);
    }

    #[test]
    fn mean_and_uncertainty_of_known_values() {
        // 1, 2, 3: mean 2, population var 2/3, unc = sqrt((2/3)/2) = 0.57735.
        let Estimate {
            value: m,
            uncertainty: u,
        } = mean_and_uncertainty(6.0, 14.0, 3);
        assert_eq!(m, 2.0);
        assert!((u - (1.0f64 / 3.0).sqrt()).abs() < 1e-12);
    }
}
