//! The Speculative page's operations: a correctness gate or a bench on two
//! catalogue models, through core's speculative jobs ([`job::gate_job`],
//! [`job::bench_job`]), holding the single measuring slot like every other
//! measurement.

use crate::error::AppError;
use crate::job::JobKind;
use crate::state::AppState;
use memwall_core::experiments::speculative::job::{
    self, GateJobOptions, GateOutcome, PairOptions, SpecBenchJobOptions, SpecBenchOutcome,
    SpecProgress,
};
use serde::{Deserialize, Serialize};

/// A gate request from the Speculative page: catalogue names (the UI never sends
/// paths) and the options to change; every option left out takes
/// `memwall spec gate`'s default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct SpecGateRequest {
    /// Target model (catalogue name).
    pub target: String,
    /// Draft model (catalogue name).
    pub draft: String,
    /// Gate options.
    #[serde(default)]
    #[ts(as = "Option<GateJobOptions>", optional)]
    pub options: GateJobOptions,
}

/// A bench request from the Speculative page; options as in [`SpecGateRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct SpecBenchRequest {
    /// Target model (catalogue name).
    pub target: String,
    /// Draft model (catalogue name).
    pub draft: String,
    /// Bench options (`results_dir` is set by the app).
    #[serde(default)]
    #[ts(as = "Option<SpecBenchJobOptions>", optional)]
    pub options: SpecBenchJobOptions,
}

fn list(ks: &[usize]) -> String {
    ks.iter()
        .map(|k| k.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl AppState {
    fn spec_pair(
        &self,
        target: &str,
        draft: &str,
        need_draft: bool,
    ) -> Result<PairOptions, AppError> {
        Ok(PairOptions {
            target: self.model_path(target)?,
            draft: if need_draft {
                Some(self.model_path(draft)?)
            } else {
                None
            },
            prompts: None,
            n_threads: None,
            n_gpu_layers: 0,
            engine: Default::default(),
            n_seq: 1,
        })
    }

    /// Runs the speculative correctness gate on the built-in prompt set and stores
    /// it (a failed gate is stored too; [`GateOutcome::failed`] names what failed).
    ///
    /// # Errors
    /// [`AppError::Job`] for bad options (naming the flag), engine, guard and store
    /// errors, `cancelled`; [`AppError::Busy`]; [`AppError::Catalog`] /
    /// [`AppError::Invalid`] for a model that is unknown or not fetched.
    pub async fn spec_gate(
        &self,
        r: SpecGateRequest,
        progress: impl FnMut(SpecProgress) + Send + 'static,
    ) -> Result<GateOutcome, AppError> {
        let mut opts = r.options;
        opts.validate()
            .map_err(memwall_core::experiments::JobError::from)?;
        opts.guard = Default::default();
        opts.command = format!(
            "app: spec gate --target {} --draft {} -k {} -n {}{} --sampling-trials {}",
            r.target,
            r.draft,
            list(&opts.ks),
            opts.max_new,
            opts.limit
                .map_or(String::new(), |l| format!(" --limit {l}")),
            opts.sampling_trials
        );
        let g = self.start_job(JobKind::SpecGate)?;
        let pair = self.spec_pair(&r.target, &r.draft, opts.needs_draft())?;
        let store = self.store().await?;
        Ok(job::gate_job(Some(store), pair, opts, progress, g.cancel.clone()).await?)
    }

    /// Runs the speculative bench (each configuration needs a stored gate that
    /// unlocks it), stores it, and writes `spec.md`, `spec.json` and the charts to
    /// `results/spec-<UTC time>/` under the exports folder.
    ///
    /// # Errors
    /// As [`AppState::spec_gate`], plus the missing-gate refusal and results-file
    /// errors naming the file.
    pub async fn spec_bench(
        &self,
        r: SpecBenchRequest,
        progress: impl FnMut(SpecProgress) + Send + 'static,
    ) -> Result<SpecBenchOutcome, AppError> {
        let mut opts = r.options;
        opts.validate()
            .map_err(memwall_core::experiments::JobError::from)?;
        opts.guard = Default::default();
        opts.command = format!(
            "app: spec bench --target {} --draft {} -k {} -n {} -r {}",
            r.target,
            r.draft,
            list(&opts.ks),
            opts.max_new,
            opts.reps
        );
        let stamp = memwall_core::util::now_rfc3339().replace([':', '-'], "");
        opts.results_dir = Some(
            self.exports_dir()
                .join("results")
                .join(format!("spec-{stamp}")),
        );
        let g = self.start_job(JobKind::SpecBench)?;
        let pair = self.spec_pair(&r.target, &r.draft, opts.needs_draft())?;
        let store = self.store().await?;
        Ok(job::bench_job(store, pair, opts, progress, g.cancel.clone()).await?)
    }
}
