//! The caveats a measurement carries: each stored with its row and shown with
//! readable text (the way hyperfine's warnings read).

use serde::{Deserialize, Serialize};

/// A warning attached to a row, with readable text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Warning {
    /// Measured on battery (allowed by the user).
    OnBattery,
    /// Pages were swapped out during the test: it measured the disk, not memory.
    Swapping {
        /// Pages swapped out.
        pages: u64,
    },
    /// The thermal state was not nominal.
    Thermal {
        /// The state seen.
        state: String,
    },
    /// Some repetitions were outliers by MAD z-score.
    Outliers { n: usize },
    /// Coefficient of variation above 5 %.
    HighVariance {
        /// std ÷ mean.
        cv: f64,
    },
    /// Built without optimizations.
    DebugBuild,
    /// The roofline ceiling is not known (stored NULL, shown `—`).
    NoCeiling {
        /// Which roof is missing.
        reason: String,
    },
    /// Other processes (or other guests of the hypervisor) used the CPUs during the
    /// timed repetitions: the row measured a shared machine.
    Contended {
        /// What they used ([`crate::measure::sampler::session::EnergySummary::contended`]).
        what: String,
    },
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::OnBattery => write!(f, "battery: measured on battery power (--allow-battery)"),
            Warning::Swapping { pages } => write!(
                f,
                "swapping: {pages} pages swapped out during the test (a disk measurement)"
            ),
            Warning::Thermal { state } => write!(f, "thermal: {state}"),
            Warning::Outliers { n } => {
                write!(f, "outliers: {n} repetition(s) with |modified z| > 3.5")
            }
            Warning::HighVariance { cv } => {
                write!(f, "variance: std is {:.1}% of the mean", cv * 100.0)
            }
            Warning::DebugBuild => write!(f, "debug build: numbers are not representative"),
            Warning::NoCeiling { reason } => write!(f, "ceiling —: {reason}"),
            Warning::Contended { what } => write!(f, "contended: {what}"),
        }
    }
}
