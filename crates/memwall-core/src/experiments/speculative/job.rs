//! The speculative jobs: the one call per `memwall spec` subcommand, made alike by
//! the CLI and the app, so that both store the same rows and write the same files.
//!
//! - [`prompts_job`]: the prompt set as the target's chat template and tokenizer
//!   turn it into tokens.
//! - [`gate_job`]: the correctness gate ([`gate::greedy_gate`] per drafter × k, and
//!   the sampling check on the real pair), stored as a `spec-gate` run.
//! - [`bench_job`]: the bench ([`bench::run_bench`]) under the gates that unlock
//!   it, stored as a `spec-bench` run, with `spec.md`, `spec.json` and the charts
//!   written to a results folder.
//!
//! Each job checks its options before any model is read ([`GateJobOptions::validate`],
//! [`SpecBenchJobOptions::validate`]), has the measuring guard check that the target
//! and the draft fit in memory, sizes the context to the longest prompt, and runs
//! the engines on tokio's blocking pool. The models come as files in
//! [`PairOptions`]: resolving catalogue names is the caller's part.

use super::SpecError;
use super::bench::CategoryReport;
use super::gate::{DrafterKind, GateRow, SamplingCheck, TokenizedPrompt};
use super::prompts::{Category, Format, PromptSet};
use super::store::SpecBenchRow;
use super::{K_MAX, bench, chart};
use crate::experiments::JobError;
use crate::measure::guard::{GuardOptions, GuardReport};
use crate::probe::hw;
use crate::store::NewRun;
use crate::util::now_rfc3339;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
// What only the engine-backed jobs use.
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(feature = "llama")]
use {
    super::bench::SpecBenchPlan,
    super::drafter::Ngram,
    super::{gate, store as sstore},
    crate::experiments::blocking,
    crate::measure::guard::Guard,
    crate::store::Store,
    std::sync::Arc,
};

/// Context of the first load, which tokenizes the prompt set; a set whose longest
/// prompt and generation need more is loaded again with enough.
pub const FIRST_N_CTX: u32 = 4096;

/// Prefix of the sampling check: a raw list continuation with a spread-out next token.
pub const SAMPLING_PREFIX: &str = "Here is a list of fruits: apple, banana,";

/// The models, prompt set and threads of a speculative job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairOptions {
    /// The target model file.
    pub target: PathBuf,
    /// The draft model file: needed by the draft-model drafter and the sampling
    /// check (`needs_draft()` of the job's options says when).
    #[serde(default)]
    pub draft: Option<PathBuf>,
    /// A prompt set (JSON Lines); `None`: the built-in `prompts/spec.jsonl`.
    #[serde(default)]
    pub prompts: Option<PathBuf>,
    /// Threads for decode and prefill; `None`: the machine's physical cores.
    #[serde(default)]
    pub n_threads: Option<u32>,
    /// Layers of each model offloaded to the GPU (llama-bench's `-ngl`; 0 = CPU).
    #[serde(default)]
    pub n_gpu_layers: u32,
    /// The engine both models run on (`memwall bench --engine`'s choices: llama,
    /// mlx-4bit, mlx-8bit, mlx-f16).
    #[serde(default)]
    pub engine: crate::experiments::bench::BenchEngine,
}

impl PairOptions {
    /// The thread count the job runs with.
    pub fn threads(&self) -> u32 {
        self.n_threads
            .unwrap_or_else(|| hw::host_info().cores_physical.max(1) as u32)
    }

    /// The prompt set: the file given, or the built-in one.
    ///
    /// # Errors
    /// [`SpecError::Prompts`] naming the file and the bad line.
    pub fn prompt_set(&self) -> Result<PromptSet, SpecError> {
        match &self.prompts {
            Some(p) => PromptSet::load(p),
            None => PromptSet::builtin(),
        }
    }

    #[cfg_attr(not(feature = "llama"), allow(dead_code))]
    fn draft_for(&self, needed: bool, why: &str) -> Result<Option<PathBuf>, SpecError> {
        match (needed, &self.draft) {
            (false, _) => Ok(None),
            (true, Some(d)) => Ok(Some(d.clone())),
            (true, None) => Err(SpecError::Options(format!(
                "{why} needs a draft model (--draft)"
            ))),
        }
    }
}

/// What a job reports while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum SpecProgress {
    /// Loading the target (and the draft) with `n_ctx` tokens of context.
    Loading {
        /// Path of the target GGUF file.
        target: String,
        /// Draft file, when one is loaded.
        draft: Option<String>,
        /// CPU threads the engine ran with (llama-bench's `-t`).
        n_threads: u32,
        /// Context size in tokens each engine is created with.
        n_ctx: u32,
    },
    /// The greedy gate starts prompt `index` (0-based) of `total`.
    GatePrompt {
        /// 0-based prompt index.
        index: usize,
        /// Prompts in the gate.
        total: usize,
        /// Id of the prompt in the frozen set, e.g. `json-01`.
        id: String,
    },
    /// The greedy gate finished its `total` prompts.
    GateDone {
        /// Prompts gated.
        total: usize,
    },
    /// The sampling check starts.
    SamplingCheck {
        /// One-iteration speculative runs tallied.
        trials: usize,
        /// Sampling settings, as a label (`T=1.00`).
        sampling: String,
        /// Draft length: tokens the drafter proposes per iteration.
        k: usize,
    },
    /// A step of the bench (`code: calibrating on code-03`, `code: repetition 2/5`).
    Bench {
        /// What starts.
        step: String,
    },
}

/// A prompt of the set after the target's template and tokenizer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct PromptSummary {
    /// Id of the prompt in the frozen set, e.g. `json-01`.
    pub id: String,
    /// Prompt category: `json`, `code` or `prose`.
    pub category: Category,
    /// Raw or chat.
    pub format: Format,
    /// Tokens after the template.
    pub n_prompt_tokens: usize,
    /// The text the tokenizer saw (the chat template applied); only from
    /// [`prompts_job`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub rendered: Option<String>,
}

impl PromptSummary {
    #[cfg_attr(not(feature = "llama"), allow(dead_code))]
    fn of(t: &TokenizedPrompt) -> PromptSummary {
        PromptSummary {
            id: t.id.clone(),
            category: t.category,
            format: t.format,
            n_prompt_tokens: t.tokens.len(),
            rendered: None,
        }
    }
}

/// What [`prompts_job`] found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptsOutcome {
    /// Where the set came from (a path, or `builtin:prompts/spec.jsonl`).
    pub prompt_set: String,
    /// The set's sha256.
    pub prompt_set_sha256: String,
    /// Target file name.
    pub target_file: String,
    /// Every prompt, in set order, with its rendered text.
    pub prompts: Vec<PromptSummary>,
}

/// Options of [`gate_job`]; `Default` gives `memwall spec gate`'s defaults, and a
/// deserialized value takes them for every field it leaves out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct GateJobOptions {
    /// Draft lengths to gate, each in `1..=K_MAX`.
    #[ts(as = "Option<Vec<usize>>", optional)]
    pub ks: Vec<usize>,
    /// Drafters to compare.
    #[ts(as = "Option<Vec<DrafterKind>>", optional)]
    pub drafters: Vec<DrafterKind>,
    /// Tokens generated per prompt; a gate unlocks benches of at most this many.
    #[ts(as = "Option<usize>", optional)]
    pub max_new: usize,
    /// Gate only this many prompts, taken round-robin over the categories; such a
    /// gate is stored as partial and unlocks no bench.
    #[ts(optional)]
    pub limit: Option<usize>,
    /// Runs of the sampling check on the real pair (0: skip it).
    #[ts(as = "Option<usize>", optional)]
    pub sampling_trials: usize,
    /// Draft length of the sampling check.
    #[ts(as = "Option<usize>", optional)]
    pub sampling_k: usize,
    /// Temperature of the sampling check.
    #[ts(as = "Option<f32>", optional)]
    pub temperature: f32,
    /// Seed of the sampling check's first run (run `i` uses `seed + i`).
    #[ts(as = "Option<u64>", optional)]
    pub seed: u64,
    /// Near-tie tolerance of the greedy gate, in logits (0: token for token;
    /// [`gate::GatePlan::tie_tolerance`]).
    #[ts(skip)]
    pub tie_tolerance: f32,
    /// Battery and memory overrides.
    #[ts(skip)]
    pub guard: GuardOptions,
    /// The command as typed (or the app's description of it), for provenance.
    #[ts(skip)]
    pub command: String,
}

impl Default for GateJobOptions {
    fn default() -> GateJobOptions {
        GateJobOptions {
            ks: (1..=8).collect(),
            drafters: vec![DrafterKind::DraftModel, DrafterKind::Ngram],
            max_new: 32,
            limit: None,
            sampling_trials: 300,
            sampling_k: 4,
            temperature: 1.0,
            seed: 1,
            tie_tolerance: 0.0,
            guard: GuardOptions::default(),
            command: String::new(),
        }
    }
}

fn check_ks(ks: &[usize]) -> Result<(), SpecError> {
    if ks.is_empty() {
        return Err(SpecError::Options(
            "-k: give at least one draft length".into(),
        ));
    }
    if let Some(k) = ks.iter().find(|&&k| k == 0 || k > K_MAX) {
        return Err(SpecError::Options(format!(
            "-k {k}: draft lengths must be 1..={K_MAX}"
        )));
    }
    Ok(())
}

fn check_drafters(ds: &[DrafterKind]) -> Result<(), SpecError> {
    if ds.is_empty() {
        return Err(SpecError::Options(
            "--drafters: give at least one of draft-model, ngram".into(),
        ));
    }
    Ok(())
}

fn check_max_new(max_new: usize) -> Result<(), SpecError> {
    if max_new == 0 {
        return Err(SpecError::Options(
            "-n must be at least 1 (tokens generated per prompt)".into(),
        ));
    }
    Ok(())
}

impl GateJobOptions {
    /// Whether the gate loads the draft model (the draft-model drafter or the
    /// sampling check).
    pub fn needs_draft(&self) -> bool {
        self.drafters.contains(&DrafterKind::DraftModel) || self.sampling_trials > 0
    }

    /// Checks the options, naming the flag to change.
    ///
    /// # Errors
    /// [`SpecError::Options`].
    pub fn validate(&self) -> Result<(), SpecError> {
        check_ks(&self.ks)?;
        check_drafters(&self.drafters)?;
        check_max_new(self.max_new)?;
        if self.limit == Some(0) {
            return Err(SpecError::Options(
                "--limit must be at least 1 (omit it to gate the whole prompt set)".into(),
            ));
        }
        if self.sampling_trials > 0 {
            if self.sampling_k == 0 || self.sampling_k > K_MAX {
                return Err(SpecError::Options(format!(
                    "--sampling-k {}: draft lengths must be 1..={K_MAX}",
                    self.sampling_k
                )));
            }
            if !(self.temperature.is_finite() && self.temperature > 0.0) {
                return Err(SpecError::Options(format!(
                    "--temperature {}: the sampling check needs a temperature above 0 (or --sampling-trials 0 to skip it)",
                    self.temperature
                )));
            }
        }
        if !(self.tie_tolerance.is_finite() && self.tie_tolerance >= 0.0) {
            return Err(SpecError::Options(format!(
                "--tie-tolerance {}: a tolerance is a number of logits ≥ 0",
                self.tie_tolerance
            )));
        }
        Ok(())
    }
}

/// A finished gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct GateOutcome {
    /// The stored run (`None`: not stored).
    pub run_id: Option<i64>,
    /// Target file name.
    pub target_file: String,
    /// Draft file name, when the draft was loaded.
    pub draft_file: Option<String>,
    /// Where the prompt set came from.
    pub prompt_set: String,
    /// The prompt set's sha256.
    pub prompt_set_sha256: String,
    /// Prompts in the set.
    pub n_prompts_set: usize,
    /// Fewer prompts than the set were gated (`limit`): unlocks no bench.
    pub partial: bool,
    /// Tokens generated per prompt.
    pub max_new: usize,
    /// The prompts gated, in gate order.
    pub prompts: Vec<PromptSummary>,
    /// Greedy equality per drafter × k.
    pub greedy: Vec<GateRow>,
    /// The sampling check (empty when skipped).
    pub sampling: Vec<SamplingCheck>,
    /// The sampling check's prefix.
    #[ts(skip)]
    pub sampling_prefix: String,
    /// The text of each sampling check's `top` tokens (lossy UTF-8), in the same order.
    #[ts(skip)]
    pub sampling_top_text: Vec<Vec<String>>,
    /// What the measuring guard saw.
    #[ts(skip)]
    pub guard: GuardReport,
    /// The configurations that failed (`draft-model k=4`, `sampling k=4`); empty
    /// when the gate passed.
    pub failed: Vec<String>,
}

impl GateOutcome {
    /// Every configuration passed.
    pub fn passed(&self) -> bool {
        self.failed.is_empty()
    }
}

/// Options of [`bench_job`]; `Default` gives `memwall spec bench`'s defaults, and a
/// deserialized value takes them for every field it leaves out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct SpecBenchJobOptions {
    /// Fixed draft lengths, each in `1..=K_MAX`; each needs a gate that unlocks it.
    #[ts(as = "Option<Vec<usize>>", optional)]
    pub ks: Vec<usize>,
    /// Also report `--k auto`'s choice (the cost model's).
    #[ts(as = "Option<bool>", optional)]
    pub auto: bool,
    /// Drafters to compare.
    #[ts(as = "Option<Vec<DrafterKind>>", optional)]
    pub drafters: Vec<DrafterKind>,
    /// Categories, in report order.
    #[ts(as = "Option<Vec<Category>>", optional)]
    pub categories: Vec<Category>,
    /// Measured prompts per category (the category's last prompt is held out for
    /// calibration).
    #[ts(as = "Option<usize>", optional)]
    pub per_category: usize,
    /// Timed repetitions (at least 2; 5 or more for a meaningful std).
    #[ts(as = "Option<usize>", optional)]
    pub reps: usize,
    /// Tokens generated per prompt.
    #[ts(as = "Option<usize>", optional)]
    pub max_new: usize,
    /// Draft length of the calibration run.
    #[ts(as = "Option<usize>", optional)]
    pub calib_k: usize,
    /// Tokens of the calibration run.
    #[ts(as = "Option<usize>", optional)]
    pub calib_max_new: usize,
    /// Repetitions of each cost-model timing (median).
    #[ts(as = "Option<usize>", optional)]
    pub timing_reps: usize,
    /// Folder for `spec.md`, `spec.json` and the charts (`None`: write no files).
    #[ts(skip)]
    pub results_dir: Option<PathBuf>,
    /// Store the run; each configuration then needs a gate that unlocks it.
    /// `false` measures without recording (the gates only guide `--k auto`).
    #[ts(as = "Option<bool>", optional)]
    pub record: bool,
    /// Battery and memory overrides.
    #[ts(skip)]
    pub guard: GuardOptions,
    /// The command as typed (or the app's description of it), for provenance.
    #[ts(skip)]
    pub command: String,
}

impl Default for SpecBenchJobOptions {
    fn default() -> SpecBenchJobOptions {
        SpecBenchJobOptions {
            ks: (1..=8).collect(),
            auto: true,
            drafters: vec![DrafterKind::DraftModel, DrafterKind::Ngram],
            categories: Category::ALL.to_vec(),
            per_category: 2,
            reps: 5,
            max_new: 32,
            calib_k: 4,
            calib_max_new: 48,
            timing_reps: 5,
            results_dir: None,
            record: true,
            guard: GuardOptions::default(),
            command: String::new(),
        }
    }
}

impl SpecBenchJobOptions {
    /// Whether the bench loads the draft model.
    pub fn needs_draft(&self) -> bool {
        self.drafters.contains(&DrafterKind::DraftModel)
    }

    /// Checks the options, naming the flag to change.
    ///
    /// # Errors
    /// [`SpecError::Options`].
    pub fn validate(&self) -> Result<(), SpecError> {
        check_ks(&self.ks)?;
        check_drafters(&self.drafters)?;
        check_max_new(self.max_new)?;
        let bad = |m: String| Err(SpecError::Options(m));
        if self.reps < 2 {
            return bad(format!(
                "-r {}: at least 2 repetitions (5 or more for a meaningful std)",
                self.reps
            ));
        }
        if self.categories.is_empty() {
            return bad("--categories: give at least one of json, code, prose".into());
        }
        if self.per_category == 0 {
            return bad("--per-category must be at least 1".into());
        }
        if self.calib_k == 0 || self.calib_k > K_MAX {
            return bad(format!(
                "--calib-k {}: draft lengths must be 1..={K_MAX}",
                self.calib_k
            ));
        }
        if self.calib_max_new == 0 || self.timing_reps == 0 {
            return bad("--calib-max-new and --timing-reps must be at least 1".into());
        }
        Ok(())
    }

    /// Each category's measured prompts and its held-out calibration prompt: the
    /// first `per_category` of the category in set order, and its last.
    ///
    /// # Errors
    /// [`SpecError::Options`] for a category with fewer than `per_category + 1`
    /// prompts.
    pub fn split(
        &self,
        prompts: &[TokenizedPrompt],
    ) -> Result<Vec<bench::CategoryInput>, SpecError> {
        let mut inputs = Vec::new();
        for c in &self.categories {
            let of: Vec<&TokenizedPrompt> = prompts.iter().filter(|t| t.category == *c).collect();
            if of.len() < self.per_category + 1 {
                return Err(SpecError::Options(format!(
                    "category {}: {} prompts, need --per-category {} + 1 held out",
                    c.name(),
                    of.len(),
                    self.per_category
                )));
            }
            inputs.push(bench::CategoryInput {
                category: *c,
                measured: of[..self.per_category]
                    .iter()
                    .map(|t| (*t).clone())
                    .collect(),
                calibration: (*of[of.len() - 1]).clone(),
            });
        }
        Ok(inputs)
    }
}

/// A finished bench.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct SpecBenchOutcome {
    /// The stored run (`None`: not stored).
    pub run_id: Option<i64>,
    /// The rows (with their unlocking gates when stored).
    #[ts(skip)]
    pub rows: Vec<SpecBenchRow>,
    /// Per category: calibrations, cost model and cells.
    #[ts(skip)]
    pub reports: Vec<CategoryReport>,
    /// What the measuring guard saw.
    #[ts(skip)]
    pub guard: GuardReport,
    /// The Markdown report (what `spec.md` holds).
    pub report_md: String,
    /// The results folder, when written.
    pub results_dir: Option<PathBuf>,
    /// Every file written there.
    pub files: Vec<PathBuf>,
    /// The chart files among them.
    pub charts: Vec<PathBuf>,
}

/// A path's file name (the whole path when it has none).
pub fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// `n` prompts taken round-robin over the categories ([`Category::ALL`] order), in
/// set order within each.
#[cfg_attr(not(feature = "llama"), allow(dead_code))]
fn limit_round_robin(toks: Vec<TokenizedPrompt>, n: usize) -> Vec<TokenizedPrompt> {
    let mut by: Vec<Vec<TokenizedPrompt>> = Category::ALL
        .iter()
        .map(|c| toks.iter().filter(|t| t.category == *c).cloned().collect())
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while out.len() < n && by.iter().any(|v| i < v.len()) {
        for v in by.iter_mut() {
            if i < v.len() && out.len() < n {
                out.push(v[i].clone());
            }
        }
        i += 1;
    }
    out
}

/// Context for prompts of up to `longest` tokens, `max_new` generated tokens and a
/// verify batch of `K_MAX + 1` positions, with a little slack.
#[cfg_attr(not(feature = "llama"), allow(dead_code))]
fn context_for(longest: usize, max_new: usize) -> u32 {
    (longest + max_new + K_MAX + 8) as u32
}

#[cfg_attr(not(feature = "llama"), allow(dead_code))]
fn check_cancel(cancel: &AtomicBool) -> Result<(), SpecError> {
    if cancel.load(Ordering::Relaxed) {
        Err(SpecError::Cancelled)
    } else {
        Ok(())
    }
}

#[cfg_attr(not(feature = "llama"), allow(dead_code))]
fn new_run(
    kind: &str,
    started_at: String,
    command: String,
    notes: String,
    guard: GuardReport,
) -> NewRun {
    NewRun {
        kind: kind.into(),
        started_at,
        finished_at: now_rfc3339(),
        command,
        host: hw::host_info(),
        notes,
        guard: Some(guard),
    }
}

#[cfg(feature = "llama")]
use llama_jobs::*;

#[cfg(feature = "llama")]
mod llama_jobs {
    use super::super::pair::{self, Pair};
    use super::*;
    use crate::measure::engine::Engine;
    use crate::probe::model::{CacheType, ModelFacts};

    /// Checks that the target (and the draft) fit in memory with `n_ctx` tokens of
    /// context each, before llama.cpp loads them; a malformed header fails here.
    pub(super) fn fit(
        guard: &mut Guard,
        engine: crate::experiments::bench::BenchEngine,
        target: &Path,
        draft: Option<&Path>,
        n_ctx: u32,
    ) -> Result<(), JobError> {
        let n = pair::engine_config(n_ctx, 1).n_ctx as u64;
        // Both models run on `engine`: sized as it holds them (MLX's arrays).
        let held = engine.held_as();
        let t = ModelFacts::open_held(target, held).map_err(SpecError::from)?;
        let d = draft
            .map(|d| ModelFacts::open_held(d, held))
            .transpose()
            .map_err(SpecError::from)?;
        let mut parts = vec![(&t, n)];
        if let Some(d) = &d {
            parts.push((d, n));
        }
        guard.check_fit(&parts, CacheType::F16)?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn load(
        engine: crate::experiments::bench::BenchEngine,
        target: &Path,
        draft: Option<&Path>,
        n_ctx: u32,
        n_threads: u32,
        n_gpu_layers: u32,
        progress: &mut dyn FnMut(SpecProgress),
    ) -> Result<Pair, SpecError> {
        progress(SpecProgress::Loading {
            target: target.display().to_string(),
            draft: draft.map(|d| d.display().to_string()),
            n_threads,
            n_ctx,
        });
        pair::load_on(engine, target, draft, n_ctx, n_threads, n_gpu_layers)
    }

    /// What the gate's engine phase hands back.
    pub(super) struct GateRun {
        pub toks: Vec<TokenizedPrompt>,
        pub n_prompts_set: usize,
        pub rows: Vec<GateRow>,
        pub sampling: Vec<SamplingCheck>,
        pub top_text: Vec<Vec<String>>,
        pub target_sha256: String,
        pub engine_build: String,
        pub guard: Guard,
    }

    /// Loads, tokenizes, gates and runs the sampling check (blocking).
    pub(super) fn run_gate(
        pair_opts: &PairOptions,
        draft: Option<&Path>,
        set: &PromptSet,
        opts: &GateJobOptions,
        mut guard: Guard,
        progress: &mut dyn FnMut(SpecProgress),
        cancel: &AtomicBool,
    ) -> Result<GateRun, JobError> {
        let threads = pair_opts.threads();
        let target = pair_opts.target.as_path();
        // Tokenize with a first context, then size the real one.
        let mut p = load(
            pair_opts.engine,
            target,
            draft,
            FIRST_N_CTX,
            threads,
            pair_opts.n_gpu_layers,
            progress,
        )?;
        let mut toks = pair::tokenize_set(&p.target, set)?;
        let n_prompts_set = toks.len();
        if let Some(n) = opts.limit {
            toks = limit_round_robin(toks, n);
        }
        let longest = toks.iter().map(|t| t.tokens.len()).max().unwrap_or(0);
        let need_ctx = context_for(longest, opts.max_new);
        if need_ctx > FIRST_N_CTX {
            check_cancel(cancel)?;
            fit(&mut guard, pair_opts.engine, target, draft, need_ctx)?;
            drop(p);
            p = load(
                pair_opts.engine,
                target,
                draft,
                need_ctx,
                threads,
                pair_opts.n_gpu_layers,
                progress,
            )?;
        }
        let plan = gate::GatePlan {
            ks: opts.ks.clone(),
            drafters: opts.drafters.clone(),
            max_new: opts.max_new,
            ngram: Ngram::default(),
            tie_tolerance: opts.tie_tolerance,
        };
        let rows = gate::greedy_gate(
            &mut p.target,
            p.draft.as_mut(),
            &toks,
            &plan,
            &mut |index, total, id| {
                progress(SpecProgress::GatePrompt {
                    index,
                    total,
                    id: id.to_string(),
                })
            },
            cancel,
        )?;
        progress(SpecProgress::GateDone { total: toks.len() });
        let mut sampling = Vec::new();
        let mut top_text = Vec::new();
        if opts.sampling_trials > 0 {
            check_cancel(cancel)?;
            let prefix = p
                .target
                .tokenize(SAMPLING_PREFIX, true)
                .map_err(SpecError::from)?;
            let sp = super::super::sampling::SamplingParams {
                temperature: opts.temperature,
                top_k: 0,
                top_p: 1.0,
            };
            progress(SpecProgress::SamplingCheck {
                trials: opts.sampling_trials,
                sampling: sp.label(),
                k: opts.sampling_k,
            });
            let d = p.draft.as_mut().ok_or_else(|| {
                SpecError::Options("the sampling check needs the draft model".into())
            })?;
            let c = gate::sampling_check(
                &mut p.target,
                d,
                &prefix,
                opts.sampling_k,
                sp,
                opts.sampling_trials,
                opts.seed,
            )?;
            top_text.push(
                c.top
                    .iter()
                    .map(|(t, _, _)| {
                        String::from_utf8_lossy(&p.target.token_bytes(*t)).into_owned()
                    })
                    .collect(),
            );
            sampling.push(c);
        }
        Ok(GateRun {
            toks,
            n_prompts_set,
            rows,
            sampling,
            top_text,
            target_sha256: p.target_sha256.clone(),
            engine_build: p.engine_build.clone(),
            guard,
        })
    }
}

/// Renders and tokenizes the prompt set with the target's chat template and
/// tokenizer (no measurement: the guard is not involved, the header is checked
/// before llama.cpp loads the file).
///
/// # Errors
/// [`JobError::Spec`]: a malformed model or prompt set, engine errors.
#[cfg(feature = "llama")]
pub async fn prompts_job(
    pair_opts: PairOptions,
    progress: impl FnMut(SpecProgress) + Send + 'static,
) -> Result<PromptsOutcome, JobError> {
    let set = pair_opts.prompt_set()?;
    crate::probe::model::ModelFacts::open(&pair_opts.target).map_err(SpecError::from)?;
    let mut progress = progress;
    blocking(move || -> Result<PromptsOutcome, JobError> {
        let p = load(
            pair_opts.engine,
            &pair_opts.target,
            None,
            FIRST_N_CTX,
            pair_opts.threads(),
            pair_opts.n_gpu_layers,
            &mut progress,
        )?;
        let toks = super::pair::tokenize_set(&p.target, &set)?;
        let prompts = set
            .prompts
            .iter()
            .zip(&toks)
            .map(|(pr, t)| PromptSummary {
                rendered: Some(pr.render(&p.target).unwrap_or_default()),
                ..PromptSummary::of(t)
            })
            .collect();
        Ok(PromptsOutcome {
            prompt_set: set.source.clone(),
            prompt_set_sha256: set.sha256.clone(),
            target_file: file_name(&p.target_path),
            prompts,
        })
    })
    .await?
}

/// Runs the correctness gate: greedy equality of every drafter × k against
/// target-only decoding over the prompt set (or `limit` prompts of it), then the
/// sampling check on the real pair; stores the result as a `spec-gate` run in one
/// transaction when `store` is given. A gate that fails is still a result: it is
/// stored, and [`GateOutcome::failed`] names what failed.
///
/// # Errors
/// [`JobError::Spec`] for bad options, a malformed model or prompt set, engine
/// errors, or [`SpecError::Cancelled`]; [`JobError::Guard`]; [`JobError::Store`].
/// Nothing is stored on error.
#[cfg(feature = "llama")]
pub async fn gate_job(
    store: Option<&Store>,
    pair_opts: PairOptions,
    opts: GateJobOptions,
    progress: impl FnMut(SpecProgress) + Send + 'static,
    cancel: Arc<AtomicBool>,
) -> Result<GateOutcome, JobError> {
    opts.validate()?;
    let draft = pair_opts.draft_for(
        opts.needs_draft(),
        "the draft-model drafter or the sampling check",
    )?;
    let set = pair_opts.prompt_set()?;
    let started = now_rfc3339();
    let mut guard = Guard::begin(opts.guard)?;
    fit(
        &mut guard,
        pair_opts.engine,
        &pair_opts.target,
        draft.as_deref(),
        FIRST_N_CTX,
    )?;
    check_cancel(&cancel)?;
    let (p2, d2, s2, o2) = (pair_opts.clone(), draft.clone(), set.clone(), opts.clone());
    let mut progress = progress;
    let run =
        blocking(move || run_gate(&p2, d2.as_deref(), &s2, &o2, guard, &mut progress, &cancel))
            .await??;
    let guard = run.guard.finish();
    let partial = run.toks.len() < run.n_prompts_set;
    let failed: Vec<String> = run
        .rows
        .iter()
        .filter(|r| !r.passed())
        .map(|r| format!("{} k={}", r.drafter.name(), r.k))
        .chain(
            run.sampling
                .iter()
                .filter(|c| !c.passed)
                .map(|c| format!("sampling k={}", c.k)),
        )
        .collect();
    let target_file = file_name(&pair_opts.target);
    let run_id = match store {
        Some(store) => {
            let prov = sstore::GateProvenance {
                target_file: target_file.clone(),
                target_sha256: run.target_sha256.clone(),
                prompt_set_sha256: set.sha256.clone(),
                engine_build: run.engine_build.clone(),
                max_new: opts.max_new,
                n_prompts_set: run.n_prompts_set,
            };
            let notes = format!(
                "{} of {} prompts{}, {} tokens per prompt",
                run.toks.len(),
                run.n_prompts_set,
                if partial {
                    " (partial: unlocks no bench)"
                } else {
                    ""
                },
                opts.max_new
            );
            let nr = new_run(
                "spec-gate",
                started,
                opts.command.clone(),
                notes,
                guard.clone(),
            );
            Some(
                sstore::insert_gate_run(store, &nr, &prov, &run.toks, &run.rows, &run.sampling)
                    .await?,
            )
        }
        None => None,
    };
    Ok(GateOutcome {
        run_id,
        target_file,
        draft_file: draft.as_deref().map(file_name),
        prompt_set: set.source.clone(),
        prompt_set_sha256: set.sha256.clone(),
        n_prompts_set: run.n_prompts_set,
        partial,
        max_new: opts.max_new,
        prompts: run.toks.iter().map(PromptSummary::of).collect(),
        greedy: run.rows,
        sampling: run.sampling,
        sampling_prefix: SAMPLING_PREFIX.to_string(),
        sampling_top_text: run.top_text,
        guard,
        failed,
    })
}

/// Runs the speculative bench: loads the pair, looks up the stored gates of this
/// target, engine build and prompt set (when `opts.record`, every fixed
/// configuration needs one that unlocks it before any timing starts), calibrates
/// and times per category ([`bench::run_bench`]), stores the rows as a
/// `spec-bench` run in one transaction, and writes `spec.md`, `spec.json` and the
/// charts to `opts.results_dir`. The Markdown report records the load average
/// before and after the timed runs.
///
/// # Errors
/// [`JobError::Spec`] for bad options, a malformed model or prompt set, a missing
/// gate ([`SpecError::NoGate`]), engine errors, an output that differs from
/// target-only decoding, or [`SpecError::Cancelled`]; [`JobError::Guard`];
/// [`JobError::Store`]; [`JobError::Results`] naming the file. Nothing is stored
/// when the bench itself fails.
#[cfg(feature = "llama")]
pub async fn bench_job(
    store: &Store,
    pair_opts: PairOptions,
    opts: SpecBenchJobOptions,
    progress: impl FnMut(SpecProgress) + Send + 'static,
    cancel: Arc<AtomicBool>,
) -> Result<SpecBenchOutcome, JobError> {
    use super::drafter::Drafter;
    opts.validate()?;
    let draft = pair_opts.draft_for(opts.needs_draft(), "the draft-model drafter")?;
    let set = pair_opts.prompt_set()?;
    // Category sizes are known from the set: refuse a short category before loading.
    for c in &opts.categories {
        let n = set.of(*c).len();
        if n < opts.per_category + 1 {
            return Err(SpecError::Options(format!(
                "category {}: {n} prompts, need --per-category {} + 1 held out",
                c.name(),
                opts.per_category
            ))
            .into());
        }
    }
    let started = now_rfc3339();
    let threads = pair_opts.threads();
    let ngl = pair_opts.n_gpu_layers;
    let engine = pair_opts.engine;
    let mut guard = Guard::begin(opts.guard)?;
    fit(
        &mut guard,
        pair_opts.engine,
        &pair_opts.target,
        draft.as_deref(),
        FIRST_N_CTX,
    )?;
    check_cancel(&cancel)?;

    // Load, tokenize, split, and load again when the longest input needs more context.
    let (target, d2, s2, o2) = (
        pair_opts.target.clone(),
        draft.clone(),
        set.clone(),
        opts.clone(),
    );
    let mut progress = progress;
    let (p, inputs, guard, mut progress) = blocking(move || -> Result<_, JobError> {
        let mut p = load(
            engine,
            &target,
            d2.as_deref(),
            FIRST_N_CTX,
            threads,
            ngl,
            &mut progress,
        )?;
        let toks = super::pair::tokenize_set(&p.target, &s2)?;
        let inputs = o2.split(&toks)?;
        let longest = inputs
            .iter()
            .flat_map(|i| i.measured.iter().chain(std::iter::once(&i.calibration)))
            .map(|t| t.tokens.len())
            .max()
            .unwrap_or(0);
        let need_ctx = context_for(longest, o2.max_new.max(o2.calib_max_new));
        if need_ctx > FIRST_N_CTX {
            fit(&mut guard, engine, &target, d2.as_deref(), need_ctx)?;
            drop(p);
            p = load(
                engine,
                &target,
                d2.as_deref(),
                need_ctx,
                threads,
                ngl,
                &mut progress,
            )?;
        }
        Ok((p, inputs, guard, progress))
    })
    .await??;
    check_cancel(&cancel)?;
    let engine_build = p.engine_build.clone();
    let gates = sstore::greedy_gates(store, &p.target_sha256, &engine_build, &set.sha256).await?;
    // Every fixed configuration needs a gate that unlocks it (passed, the whole
    // prompt set, ≥ this bench's tokens per prompt) before any timing starts.
    let mut missing = Vec::new();
    for d in &opts.drafters {
        let key = match d {
            DrafterKind::DraftModel => p.draft.as_ref().map(|x| x.key()).unwrap_or_default(),
            DrafterKind::Ngram => Ngram::default().key(),
        };
        for &k in &opts.ks {
            if let Err(why) = sstore::unlocking_gate(&gates, &key, k, opts.max_new) {
                missing.push(format!("{} {why}", d.name()));
            }
        }
    }
    if !missing.is_empty() && opts.record {
        return Err(SpecError::NoGate(format!(
            "no gate unlocks this bench: a passed greedy gate over the whole prompt set ({} prompts, sha256 {}…) at ≥ {} tokens per prompt, same target and engine build {}, is needed for each configuration. Missing: {}. Run `memwall spec gate -k {} -n {}` (without --limit) first, or pass --no-store to measure without recording",
            set.prompts.len(),
            &set.sha256[..16],
            opts.max_new,
            engine_build,
            missing.join("; "),
            opts.ks
                .iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(","),
            opts.max_new
        ))
        .into());
    }
    let plan = SpecBenchPlan {
        ks: opts.ks.clone(),
        auto: opts.auto,
        drafters: opts.drafters.clone(),
        reps: opts.reps,
        max_new: opts.max_new,
        calib_k: opts.calib_k,
        calib_max_new: opts.calib_max_new,
        timing_reps: opts.timing_reps,
        ngram: Ngram::default(),
        gated: sstore::unlocked(&gates, opts.max_new),
    };
    let load_start = hw::load_average();
    let target_file = file_name(&p.target_path);
    let draft_file = p.draft_path.as_deref().map(file_name);
    let target_sha256 = p.target_sha256.clone();
    let c2 = cancel.clone();
    // The sampler beside the timed runs: one phase per cell and repetition.
    let sampler = crate::measure::sampler::session::SamplerSession::start(
        crate::measure::sampler::MachineSampler::detect(),
        crate::measure::sampler::session::DEFAULT_HZ,
    );
    let marker = sampler.marker();
    let reports = blocking(move || {
        let mut p = p;
        bench::run_bench_phased(
            &mut p.target,
            p.draft.as_mut(),
            &inputs,
            &plan,
            &mut |m| {
                progress(SpecProgress::Bench {
                    step: m.to_string(),
                })
            },
            &mut |ph| match ph {
                Some(name) => marker.mark(name),
                None => marker.end_phase(),
            },
            &c2,
        )
    })
    .await??;
    let recording = sampler.stop();
    let guard = guard.finish();
    let host = hw::host_info();
    let prov = bench::BenchProvenance {
        target_file,
        target_sha256,
        draft_file,
        prompt_set_sha256: set.sha256.clone(),
        engine_build,
        n_threads: threads,
        max_new: opts.max_new,
        reps: opts.reps,
        measured_at: now_rfc3339(),
        hostname: host.hostname.clone(),
        cpu_info: host.cpu_model.clone(),
    };
    let mut rows = bench::to_rows(&reports, &prov);
    if opts.record {
        sstore::attach_gates(&mut rows, &gates)
            .map_err(|e| SpecError::NoGate(format!("no gate unlocks this bench: {e}")))?;
    }
    let energy: Vec<Option<crate::measure::sampler::session::EnergySummary>> = rows
        .iter()
        .map(|r| bench::row_energy(&recording, r))
        .collect();
    let load_end = hw::load_average();
    let show = |l: Option<hw::LoadAverage>| l.map_or("—".to_string(), |l| l.to_string());
    let (load_start, load_end) = (show(load_start), show(load_end));
    let report_md = format!(
        "# memwall spec bench\n\ntarget {}, draft {}, {} threads, greedy, {} tokens per prompt, {} repetitions, prompts per category: {}; host {} ({}); load average (1/5/15 min) at start {}, at end {} (above ~0.2 on an idle machine means other work shared the cores: contended)\n\n{}\n## Cost model (measured before the timed runs)\n\n{}\n{}\n",
        prov.target_file,
        prov.draft_file.as_deref().unwrap_or("—"),
        threads,
        opts.max_new,
        opts.reps,
        opts.per_category,
        host.hostname,
        host.cpu_model,
        load_start,
        load_end,
        bench::table_md(&rows) + "\n" + &bench::energy_md(&rows, &energy, &recording),
        bench::cost_md(&reports),
        guard.line()
    );
    let run_id = if opts.record {
        let nr = new_run(
            "spec-bench",
            started,
            opts.command.clone(),
            format!("loadavg start {load_start}, end {load_end}"),
            guard.clone(),
        );
        Some(
            sstore::insert_bench_run_sampled(store, &nr, &mut rows, Some((&recording, &energy)))
                .await?,
        )
    } else {
        None
    };
    let SpecResultFiles { files, charts } = match &opts.results_dir {
        Some(dir) => write_results(dir, &report_md, &rows, &reports, &guard)?,
        None => SpecResultFiles::default(),
    };
    Ok(SpecBenchOutcome {
        run_id,
        rows,
        reports,
        guard,
        report_md,
        results_dir: opts.results_dir.clone(),
        files,
        charts,
    })
}

/// Options of [`synth_job`] (`memwall spec bench --synth-acceptance`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SynthJobOptions {
    /// Set acceptance rates α, each in `[0, 1]`.
    pub alphas: Vec<f64>,
    /// Draft lengths, each in `1..=K_MAX`; each measured one needs the draft
    /// model's gate.
    pub ks: Vec<usize>,
    /// Measure only the cost model's best `k` of `ks` for each α.
    pub auto_k: bool,
    /// Prompts measured, taken round-robin over the categories of the set.
    pub n_prompts: usize,
    /// Timed repetitions (at least 2).
    pub reps: usize,
    /// Tokens generated per prompt.
    pub max_new: usize,
    /// Repetitions of each cost-model timing (median).
    pub timing_reps: usize,
    /// Seed of the acceptance draws.
    pub seed: u64,
    /// Near-tie tolerance of the output check, in logits (0 = token for token;
    /// [`SynthPlan::tie_tolerance`]).
    pub tie_tolerance: f32,
    /// Folder for `synth.md` and `synth.json` (`None`: write no files).
    pub results_dir: Option<PathBuf>,
    /// Store the predictions (before the timed runs) and the run.
    pub record: bool,
    /// Battery and memory overrides.
    pub guard: GuardOptions,
    /// The command as typed, for provenance.
    pub command: String,
}

impl Default for SynthJobOptions {
    fn default() -> SynthJobOptions {
        SynthJobOptions {
            alphas: vec![0.5, 0.7, 0.9],
            ks: (1..=8).collect(),
            auto_k: true,
            n_prompts: 3,
            reps: 5,
            max_new: 32,
            timing_reps: 5,
            seed: 1,
            tie_tolerance: 0.0,
            results_dir: None,
            record: true,
            guard: GuardOptions::default(),
            command: String::new(),
        }
    }
}

impl SynthJobOptions {
    /// Checks the options, naming the flag to change.
    ///
    /// # Errors
    /// [`SpecError::Options`].
    pub fn validate(&self) -> Result<(), SpecError> {
        check_ks(&self.ks)?;
        check_max_new(self.max_new)?;
        let bad = |m: String| Err(SpecError::Options(m));
        if self.alphas.is_empty() {
            return bad("--synth-acceptance: give at least one rate, e.g. 0.5,0.7,0.9".into());
        }
        if let Some(a) = self.alphas.iter().find(|a| !(0.0..=1.0).contains(*a)) {
            return bad(format!(
                "--synth-acceptance {a}: an acceptance rate is in [0, 1]"
            ));
        }
        if self.reps < 2 {
            return bad(format!("-r {}: at least 2 repetitions", self.reps));
        }
        if self.n_prompts == 0 || self.timing_reps == 0 {
            return bad("--synth-prompts and --timing-reps must be at least 1".into());
        }
        if !(self.tie_tolerance.is_finite() && self.tie_tolerance >= 0.0) {
            return bad(format!(
                "--synth-tie-tolerance {}: a tolerance is a number of logits ≥ 0",
                self.tie_tolerance
            ));
        }
        Ok(())
    }
}

/// A finished set-acceptance bench.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SynthOutcome {
    /// The stored run (`None`: not stored).
    pub run_id: Option<i64>,
    /// Ids of the predictions stored before the timed runs.
    pub prediction_ids: Vec<i64>,
    /// The rows.
    pub rows: Vec<super::synth::SpecSynthRow>,
    /// Times and predictions made before the timed runs.
    pub calibration: super::synth::SynthCalibration,
    /// What the measuring guard saw.
    pub guard: GuardReport,
    /// The Markdown report.
    pub report_md: String,
    /// Every file written.
    pub files: Vec<PathBuf>,
}

/// Runs `memwall spec bench --synth-acceptance`: loads the pair, checks that the
/// draft model's greedy gate unlocks every `k` (when recording), measures the cost
/// model's times and **stores its predictions before the timed runs**, then runs
/// target-only and every (α, k) with the [`SetAcceptance`](super::synth::SetAcceptance)
/// drafter ([`super::synth::run_synth_bench`]), checks every output against
/// target-only, and stores the rows as a `spec-synth` run.
///
/// # Errors
/// As [`bench_job`].
#[cfg(feature = "llama")]
pub async fn synth_job(
    store: &Store,
    pair_opts: PairOptions,
    opts: SynthJobOptions,
    progress: impl FnMut(SpecProgress) + Send + 'static,
    cancel: Arc<AtomicBool>,
) -> Result<SynthOutcome, JobError> {
    use super::drafter::Drafter;
    use super::synth::{self, SetAcceptance, SynthPlan};
    opts.validate()?;
    let draft = pair_opts
        .draft_for(true, "--synth-acceptance")?
        .expect("needed");
    let set = pair_opts.prompt_set()?;
    let started = now_rfc3339();
    let threads = pair_opts.threads();
    let ngl = pair_opts.n_gpu_layers;
    let engine = pair_opts.engine;
    let mut guard = Guard::begin(opts.guard)?;
    fit(
        &mut guard,
        pair_opts.engine,
        &pair_opts.target,
        Some(&draft),
        FIRST_N_CTX,
    )?;
    check_cancel(&cancel)?;
    let (target, d2, s2, o2) = (
        pair_opts.target.clone(),
        draft.clone(),
        set.clone(),
        opts.clone(),
    );
    let mut progress = progress;
    let (p, prompts, guard, mut progress) = blocking(move || -> Result<_, JobError> {
        let mut p = load(
            engine,
            &target,
            Some(&d2),
            FIRST_N_CTX,
            threads,
            ngl,
            &mut progress,
        )?;
        let toks = super::pair::tokenize_set(&p.target, &s2)?;
        let prompts = limit_round_robin(toks, o2.n_prompts);
        let longest = prompts.iter().map(|t| t.tokens.len()).max().unwrap_or(0);
        let need_ctx = context_for(longest, o2.max_new);
        if need_ctx > FIRST_N_CTX {
            fit(&mut guard, engine, &target, Some(&d2), need_ctx)?;
            drop(p);
            p = load(
                engine,
                &target,
                Some(&d2),
                need_ctx,
                threads,
                ngl,
                &mut progress,
            )?;
        }
        Ok((p, prompts, guard, progress))
    })
    .await??;
    check_cancel(&cancel)?;
    let engine_build = p.engine_build.clone();
    let draft_key = p.draft.as_ref().map(|d| d.key()).unwrap_or_default();
    let gates = sstore::greedy_gates(store, &p.target_sha256, &engine_build, &set.sha256).await?;
    let plan = SynthPlan {
        alphas: opts.alphas.clone(),
        ks: opts.ks.clone(),
        reps: opts.reps,
        max_new: opts.max_new,
        timing_reps: opts.timing_reps,
        seed: opts.seed,
        auto_k: opts.auto_k,
        tie_tolerance: opts.tie_tolerance,
    };
    let target_file = file_name(&p.target_path);
    let draft_file = file_name(&draft);
    let target_sha256 = p.target_sha256.clone();
    // Calibration: the cost model's times and predictions, before any timed run.
    let (plan2, prompts2) = (plan.clone(), prompts.clone());
    let dk = draft_key.clone();
    let (mut p, mut drafter, cal, mut progress) = blocking(move || -> Result<_, JobError> {
        let mut p = p;
        let dm = p.draft.take().expect("loaded with a draft");
        let mut drafter = SetAcceptance::new(dm.into_engine(), dk, 0.0, plan2.seed)?;
        progress(SpecProgress::Bench {
            step: format!("set acceptance: cost-model times on {}", prompts2[0].id),
        });
        let cal = synth::calibrate(
            &mut p.target,
            &mut drafter,
            &prompts2[0],
            &plan2,
            super::run::DEFAULT_MAX_ROWS_PER_PASS,
        )?;
        Ok((p, drafter, cal, progress))
    })
    .await??;
    let pairs = synth::chosen(&plan, &cal);
    let mut ks_run: Vec<usize> = pairs.iter().map(|&(_, k)| k).collect();
    ks_run.sort_unstable();
    ks_run.dedup();
    // Speedups are claimed only under the pair's gate at each measured k: checked
    // before the predictions are stored and the timed runs start.
    if opts.record {
        let missing: Vec<String> = ks_run
            .iter()
            .filter_map(|&k| sstore::unlocking_gate(&gates, &draft_key, k, opts.max_new).err())
            .collect();
        if !missing.is_empty() {
            return Err(SpecError::NoGate(format!(
                "no gate unlocks this set-acceptance bench: its speedups are claimed only where the real draft model passed the greedy gate at the same k (the verify path reproduced target-only decoding over the whole prompt set, {} prompts, at ≥ {} tokens per prompt, same target and engine build {}). Missing: {}. Run `memwall spec gate --drafters draft-model -k {} -n {} --sampling-trials 0` with the same models and prompts first, or pass --no-store",
                set.prompts.len(),
                opts.max_new,
                engine_build,
                missing.join("; "),
                ks_run.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(","),
                opts.max_new
            ))
            .into());
        }
    }
    let host = hw::host_info();
    let prediction_ids = if opts.record {
        sstore::insert_synth_predictions(
            store,
            &host.hostname,
            &target_sha256,
            &draft_key,
            &engine_build,
            &cal,
        )
        .await?
    } else {
        Vec::new()
    };
    check_cancel(&cancel)?;
    let load_start = hw::load_average();
    // The sampler beside the timed runs: one phase per configuration and repetition.
    let sampler = crate::measure::sampler::session::SamplerSession::start(
        crate::measure::sampler::MachineSampler::detect(),
        crate::measure::sampler::session::DEFAULT_HZ,
    );
    let marker = sampler.marker();
    let (plan2, prompts2, c2, pairs2) =
        (plan.clone(), prompts.clone(), cancel.clone(), pairs.clone());
    let cells = blocking(move || {
        synth::run_synth_bench(
            &mut p.target,
            &mut drafter,
            &prompts2,
            &plan2,
            &pairs2,
            &mut |m| {
                progress(SpecProgress::Bench {
                    step: m.to_string(),
                })
            },
            &mut |ph| match ph {
                Some(name) => marker.mark(name),
                None => marker.end_phase(),
            },
            &c2,
        )
    })
    .await??;
    let recording = sampler.stop();
    let guard = guard.finish();
    let prov = synth::SynthProvenance {
        target_file,
        target_sha256,
        draft_file,
        draft_key,
        prompt_set_sha256: set.sha256.clone(),
        engine_build,
        n_threads: threads,
        n_gpu_layers: ngl,
        measured_at: now_rfc3339(),
        hostname: host.hostname.clone(),
        cpu_info: host.cpu_model.clone(),
        gpu_info: (!host.gpus.is_empty()).then(|| host.gpus.join(", ")),
    };
    let prompt_ids: Vec<String> = prompts.iter().map(|p| p.id.clone()).collect();
    let mut rows = synth::to_rows(
        &cells,
        &cal,
        opts.record.then_some(prediction_ids.as_slice()),
        &plan,
        &prompt_ids,
        &prov,
    );
    if opts.record {
        sstore::attach_synth_gates(&mut rows, &gates)
            .map_err(|e| SpecError::NoGate(format!("no gate unlocks this bench: {e}")))?;
    }
    let energy: Vec<Option<crate::measure::sampler::session::EnergySummary>> = rows
        .iter()
        .map(|r| synth::row_energy(&recording, r))
        .collect();
    let load_end = hw::load_average();
    let show = |l: Option<hw::LoadAverage>| l.map_or("—".to_string(), |l| l.to_string());
    let report_md = format!(
        "# memwall spec bench --synth-acceptance\n\nSet acceptance: the drafter proposes the target's own greedy token with probability α per position (seed {}), a wrong one otherwise, and pays a real forward of the draft model {} per drafted token. Not a measurement of how well that draft predicts the target.\n\ntarget {}, {} threads, -ngl {}, greedy, {} tokens per prompt, {} repetitions, prompts {}; every output equal to target-only decoding; host {} ({}{}); load average at start {}, at end {}\n\n{}\n## Cost model (measured and predicted before the timed runs{})\n\n{}\n{}\n",
        opts.seed,
        prov.draft_file,
        prov.target_file,
        threads,
        ngl,
        opts.max_new,
        opts.reps,
        prompt_ids.join(", "),
        host.hostname,
        host.cpu_model,
        prov.gpu_info
            .as_deref()
            .map(|g| format!(", {g}"))
            .unwrap_or_default(),
        show(load_start),
        show(load_end),
        synth::table_md(&rows) + "\n" + &synth::energy_md(&rows, &energy, &recording),
        if opts.record {
            format!(", stored as predictions {:?}", prediction_ids)
        } else {
            String::new()
        },
        synth::calibration_md(&cal),
        guard.line()
    );
    let run_id = if opts.record {
        let nr = new_run(
            "spec-synth",
            started,
            opts.command.clone(),
            format!("set acceptance {:?}, k {:?}", opts.alphas, opts.ks),
            guard.clone(),
        );
        Some(sstore::insert_synth_run(store, &nr, &mut rows, Some((&recording, &energy))).await?)
    } else {
        None
    };
    let mut files = Vec::new();
    if let Some(dir) = &opts.results_dir {
        let err = |p: &Path, e: String| JobError::Results {
            path: p.display().to_string(),
            msg: e,
        };
        let md = dir.join("synth.md");
        crate::util::write_atomic(&md, report_md.as_bytes())
            .map_err(|e| err(&md, e.to_string()))?;
        let json = dir.join("synth.json");
        let text = serde_json::to_string_pretty(
            &serde_json::json!({"rows": rows, "calibration": cal, "energy": energy, "sampler_counters": recording.counters, "guard": guard}),
        )
        .map_err(|e| err(&json, e.to_string()))?;
        crate::util::write_atomic(&json, text.as_bytes()).map_err(|e| err(&json, e.to_string()))?;
        files = vec![md, json];
    }
    Ok(SynthOutcome {
        run_id,
        prediction_ids,
        rows,
        calibration: cal,
        guard,
        report_md,
        files,
    })
}

/// The files [`write_results`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecResultFiles {
    /// Every file written: `spec.md`, `spec.json`, then the charts.
    pub files: Vec<PathBuf>,
    /// The chart files alone (PNG and SVG of each chart).
    pub charts: Vec<PathBuf>,
}

/// Writes `spec.md`, `spec.json` (rows, reports, guard) and the charts into `dir`,
/// each file atomically; returns every file and, apart, the charts.
///
/// # Errors
/// [`JobError::Results`] naming the file.
pub fn write_results(
    dir: &Path,
    report_md: &str,
    rows: &[SpecBenchRow],
    reports: &[CategoryReport],
    guard: &GuardReport,
) -> Result<SpecResultFiles, JobError> {
    let err = |p: &Path, e: String| JobError::Results {
        path: p.display().to_string(),
        msg: e,
    };
    let md = dir.join("spec.md");
    crate::util::write_atomic(&md, report_md.as_bytes()).map_err(|e| err(&md, e.to_string()))?;
    let json = dir.join("spec.json");
    let text = serde_json::to_string_pretty(
        &serde_json::json!({"rows": rows, "reports": reports, "guard": guard}),
    )
    .map_err(|e| err(&json, e.to_string()))?;
    crate::util::write_atomic(&json, text.as_bytes()).map_err(|e| err(&json, e.to_string()))?;
    let charts = chart::write_charts(dir, rows).map_err(|e| err(dir, e.to_string()))?;
    let mut files = vec![md, json];
    files.extend(charts.iter().cloned());
    Ok(SpecResultFiles { files, charts })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::engine::TokenId;
    use crate::measure::guard::Guard;

    fn tp(id: &str, category: Category, n: usize) -> TokenizedPrompt {
        TokenizedPrompt {
            id: id.into(),
            category,
            format: Format::Raw,
            tokens: vec![1 as TokenId; n],
        }
    }

    #[test]
    fn limit_takes_prompts_round_robin_over_the_categories() {
        use Category::*;
        let set = vec![
            tp("p1", Prose, 1),
            tp("c1", Code, 1),
            tp("c2", Code, 1),
            tp("c3", Code, 1),
            tp("j1", Json, 1),
            tp("p2", Prose, 1),
        ];
        let ids = |v: Vec<TokenizedPrompt>| v.into_iter().map(|t| t.id).collect::<Vec<_>>();
        // json, code, prose, then the second of each that has one.
        assert_eq!(
            ids(limit_round_robin(set.clone(), 5)),
            ["j1", "c1", "p1", "c2", "p2"]
        );
        assert_eq!(ids(limit_round_robin(set.clone(), 1)), ["j1"]);
        // More than the set: every prompt once.
        assert_eq!(limit_round_robin(set.clone(), 99).len(), 6);
    }

    #[test]
    fn the_split_holds_out_each_categorys_last_prompt() {
        let set = vec![
            tp("c1", Category::Code, 3),
            tp("j1", Category::Json, 4),
            tp("c2", Category::Code, 5),
            tp("c3", Category::Code, 6),
        ];
        let o = SpecBenchJobOptions {
            categories: vec![Category::Code],
            per_category: 2,
            ..Default::default()
        };
        let s = o.split(&set).unwrap();
        assert_eq!(s.len(), 1);
        let ids: Vec<&str> = s[0].measured.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["c1", "c2"]);
        assert_eq!(s[0].calibration.id, "c3");
        let o = SpecBenchJobOptions {
            categories: vec![Category::Json],
            per_category: 1,
            ..Default::default()
        };
        assert_eq!(
            o.split(&set).unwrap_err().to_string(),
            "category json: 1 prompts, need --per-category 1 + 1 held out"
        );
    }

    #[test]
    fn options_name_the_flag_to_fix() {
        let gate = |f: &dyn Fn(&mut GateJobOptions)| {
            let mut o = GateJobOptions::default();
            f(&mut o);
            o.validate().err().map(|e| e.to_string())
        };
        assert_eq!(gate(&|_| {}), None);
        assert_eq!(
            gate(&|o| o.ks = vec![1, 0]).as_deref(),
            Some("-k 0: draft lengths must be 1..=16")
        );
        assert_eq!(
            gate(&|o| o.ks = vec![17]).as_deref(),
            Some("-k 17: draft lengths must be 1..=16")
        );
        assert_eq!(
            gate(&|o| o.ks.clear()).as_deref(),
            Some("-k: give at least one draft length")
        );
        assert_eq!(
            gate(&|o| o.drafters.clear()).as_deref(),
            Some("--drafters: give at least one of draft-model, ngram")
        );
        assert!(
            gate(&|o| o.temperature = 0.0)
                .unwrap()
                .starts_with("--temperature 0:")
        );
        // Without the sampling check, its settings do not matter.
        assert_eq!(
            gate(&|o| {
                o.sampling_trials = 0;
                o.temperature = 0.0;
            }),
            None
        );
        assert!(gate(&|o| o.limit = Some(0)).unwrap().starts_with("--limit"));
        let bench = |f: &dyn Fn(&mut SpecBenchJobOptions)| {
            let mut o = SpecBenchJobOptions::default();
            f(&mut o);
            o.validate().err().map(|e| e.to_string())
        };
        assert_eq!(bench(&|_| {}), None);
        assert_eq!(
            bench(&|o| o.reps = 1).as_deref(),
            Some("-r 1: at least 2 repetitions (5 or more for a meaningful std)")
        );
        assert!(
            bench(&|o| o.categories.clear())
                .unwrap()
                .starts_with("--categories")
        );
        assert!(
            bench(&|o| o.calib_k = 0)
                .unwrap()
                .starts_with("--calib-k 0")
        );
    }

    #[test]
    fn the_draft_is_needed_only_by_the_draft_model_drafter_and_the_sampling_check() {
        let ngram_only = GateJobOptions {
            drafters: vec![DrafterKind::Ngram],
            sampling_trials: 0,
            ..Default::default()
        };
        assert!(!ngram_only.needs_draft());
        assert!(
            GateJobOptions {
                sampling_trials: 1,
                ..ngram_only.clone()
            }
            .needs_draft()
        );
        assert!(GateJobOptions::default().needs_draft());
        let p = PairOptions {
            target: "t.gguf".into(),
            draft: None,
            prompts: None,
            n_threads: Some(1),
            n_gpu_layers: 0,
            engine: Default::default(),
        };
        assert_eq!(p.draft_for(false, "x").unwrap(), None);
        assert_eq!(
            p.draft_for(true, "the draft-model drafter")
                .unwrap_err()
                .to_string(),
            "the draft-model drafter needs a draft model (--draft)"
        );
    }

    #[test]
    fn app_requests_take_the_cli_defaults_for_what_they_leave_out() {
        let o: GateJobOptions = serde_json::from_str(r#"{"max_new": 8, "limit": 6}"#).unwrap();
        assert_eq!(
            o,
            GateJobOptions {
                max_new: 8,
                limit: Some(6),
                ..Default::default()
            }
        );
        let o: SpecBenchJobOptions =
            serde_json::from_str(r#"{"ks": [2], "drafters": ["ngram"]}"#).unwrap();
        assert_eq!((o.ks, o.reps, o.record), (vec![2], 5, true));
        assert_eq!(o.drafters, [DrafterKind::Ngram]);
    }

    #[test]
    fn results_files_are_written_and_named_in_the_outcome() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("spec");
        let row = SpecBenchRow::example();
        let guard = Guard::begin_at(
            hw::LiveState {
                power: hw::PowerSource::Ac,
                thermal: hw::Thermal {
                    state: hw::ThermalState::Nominal,
                    max_celsius: None,
                },
                mem: hw::MemState {
                    total: crate::units::Bytes(1 << 30),
                    available: crate::units::Bytes(1 << 29),
                    swap_total: crate::units::Bytes(0),
                    swap_used: crate::units::Bytes(0),
                },
                swap_out_pages: Some(0),
            },
            GuardOptions::default(),
        )
        .unwrap();
        let report = guard.finish();
        let SpecResultFiles { files, charts } =
            write_results(&dir, "# memwall spec bench\n", &[row.clone()], &[], &report).unwrap();
        assert_eq!(files[0], dir.join("spec.md"));
        assert_eq!(files[1], dir.join("spec.json"));
        assert_eq!(&files[2..], &charts[..]);
        assert!(
            charts.iter().any(|c| c.ends_with("acceptance.png")),
            "{charts:?}"
        );
        for f in &files {
            assert!(f.is_file(), "{}", f.display());
        }
        assert_eq!(
            std::fs::read_to_string(dir.join("spec.md")).unwrap(),
            "# memwall spec bench\n"
        );
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("spec.json")).unwrap()).unwrap();
        assert_eq!(j["rows"][0]["drafter_key"], row.drafter_key.as_str());
        assert_eq!(j["guard"]["power_before"], report.power_before.as_str());
    }
}
