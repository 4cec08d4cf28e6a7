//! What a bench run reports while it runs: the events the harness sends its caller,
//! and that the live sampler ([`super::live`]) reads its phases from. Shared by the
//! slices, below all of them.

use serde::{Deserialize, Serialize};

/// What the harness reports while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Progress {
    /// A model is being loaded.
    Loading {
        /// Path of the GGUF file being loaded.
        model: String,
    },
    TestStarted {
        /// Index in the plan.
        index: usize,
        /// Instances in the whole plan.
        total: usize,
        /// The test's label as tables show it, e.g. `pp512` or `tg128 @ d512`.
        label: String,
    },
    /// One repetition done (`rep` is 0 for the warm-up).
    Repetition {
        /// Instance index.
        index: usize,
        /// Repetition number, 1-based; 0 = warm-up.
        rep: u32,
        reps: u32,
        /// The repetition's timed part (`None` for the warm-up), for the live sampler:
        /// energy is integrated over exactly these spans.
        #[serde(default)]
        timed: Option<crate::measure::sampler::session::TimedSpan>,
    },
    /// A test finished with its record.
    TestDone {
        /// The row as stored, with its store id.
        record: Box<crate::store::record::BenchRecord>,
    },
}
