//! `memwall spec gate`: the correctness gate
//! ([`greedy_gate`](super::super::gate::greedy_gate) per drafter × k, and the
//! sampling check on the real pair), stored as a `spec-gate` run.

use super::super::K_MAX;
use super::super::SpecError;
use super::super::gate::{DrafterKind, GateRow, SamplingCheck};
use super::super::tree::TreeShape;
use super::{PromptSummary, check_drafters, check_ks, check_max_new};
use crate::measure::guard::{GuardOptions, GuardReport};
use serde::{Deserialize, Serialize};
#[cfg(feature = "llama")]
use {
    super::super::drafter::{DraftModel, Drafter, Ngram},
    super::super::gate::{self, TokenizedPrompt},
    super::super::prompts::PromptSet,
    super::super::store as sstore,
    super::super::tree_loop::TreeDraftModel,
    super::{
        LoadedPair, PairOptions, SpecProgress, begin_guard, check_cancel, file_name,
        limit_round_robin, load_sized, new_run,
    },
    crate::experiments::{JobError, blocking},
    crate::measure::guard::Guard,
    crate::store::Store,
    crate::util::now_rfc3339,
    std::path::Path,
    std::sync::Arc,
    std::sync::atomic::AtomicBool,
};

/// Prefix of the sampling check: a raw list continuation with a spread-out next token.
pub const SAMPLING_PREFIX: &str = "Here is a list of fruits: apple, banana,";

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
    /// The near-tie tolerance is each k's measured batch-shape gap
    /// (`--tie-tolerance measured`, [`gate::GatePlan::tie_measured`]).
    #[ts(skip)]
    pub tie_measured: bool,
    /// Tree shapes to gate with the draft model (`--tree k3b2m1,k2b2m2`), each
    /// against target-only decoding token for token ([`gate::tree_gate`]); the
    /// models then run on llama.cpp's unified KV cache.
    #[ts(skip)]
    pub trees: Vec<TreeShape>,
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
            tie_measured: false,
            trees: Vec::new(),
            guard: GuardOptions::default(),
            command: String::new(),
        }
    }
}

impl GateJobOptions {
    /// Whether the gate loads the draft model (the draft-model drafter or the
    /// sampling check).
    pub fn needs_draft(&self) -> bool {
        self.drafters.contains(&DrafterKind::DraftModel)
            || self.sampling_trials > 0
            || !self.trees.is_empty()
    }

    /// Sequences each model's context needs: 1, or for trees the most leaves + 2
    /// (the paths, the main sequence and the target's parked cells).
    pub fn n_seq(&self) -> u32 {
        self.trees
            .iter()
            .map(|t| t.n_leaves() as u32 + 2)
            .max()
            .unwrap_or(1)
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
        for t in &self.trees {
            t.validate()
                .map_err(|e| SpecError::Options(format!("--tree {}: {e}", t.label())))?;
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
    pub prompt_set_sha256: String,
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

#[cfg(feature = "llama")]
/// What the gate's engine phase hands back.
struct GateRun {
    pub toks: Vec<TokenizedPrompt>,
    pub n_prompts_set: usize,
    /// The fallback-template warning ([`template_note`](super::super::pair::template_note)).
    pub template_note: Option<String>,
    pub rows: Vec<GateRow>,
    pub sampling: Vec<SamplingCheck>,
    pub top_text: Vec<Vec<String>>,
    pub target_sha256: String,
    pub engine_build: String,
    pub guard: Guard,
}

/// The gate's progress for prompt `index` of `total`.
#[cfg(feature = "llama")]
fn on_prompt(progress: &mut dyn FnMut(SpecProgress), index: usize, total: usize, id: &str) {
    progress(SpecProgress::GatePrompt {
        index,
        total,
        id: id.to_string(),
    })
}

/// Loads, tokenizes, gates and runs the sampling check (blocking).
fn run_gate(
    pair_opts: &PairOptions,
    draft: Option<&Path>,
    set: &PromptSet,
    opts: &GateJobOptions,
    mut guard: Guard,
    progress: &mut dyn FnMut(SpecProgress),
    cancel: &AtomicBool,
) -> Result<GateRun, JobError> {
    let LoadedPair {
        pair: mut p,
        inputs: (toks, n_prompts_set),
        template_note,
    } = load_sized(
        &PairOptions {
            n_seq: opts.n_seq(),
            ..pair_opts.clone()
        },
        draft,
        set,
        opts.max_new,
        &mut guard,
        progress,
        cancel,
        |toks| {
            let n_prompts_set = toks.len();
            let toks = match opts.limit {
                Some(n) => limit_round_robin(toks, n),
                None => toks,
            };
            let longest = toks.iter().map(|t| t.tokens.len()).max().unwrap_or(0);
            Ok(((toks, n_prompts_set), longest))
        },
    )?;
    let plan = gate::GatePlan {
        ks: opts.ks.clone(),
        drafters: opts.drafters.clone(),
        max_new: opts.max_new,
        ngram: Ngram::default(),
        tie_tolerance: opts.tie_tolerance,
        tie_measured: opts.tie_measured,
    };
    let rows = gate::greedy_gate(
        &mut p.target,
        p.draft.as_mut(),
        &toks,
        &plan,
        &mut |index, total, id| on_prompt(progress, index, total, id),
        cancel,
    )?;
    let mut rows = rows;
    if !opts.trees.is_empty() {
        check_cancel(cancel)?;
        // The draft engine goes to a tree drafter and back.
        let d = p
            .draft
            .take()
            .ok_or_else(|| SpecError::Options("--tree needs the draft model".into()))?;
        let key = d.key();
        let mut td = TreeDraftModel::new(d.into_engine(), key.clone());
        let tree_rows = gate::tree_gate(
            &mut p.target,
            &mut td,
            &toks,
            &opts.trees,
            &plan,
            &mut |index, total, id| on_prompt(progress, index, total, id),
            cancel,
        );
        p.draft = Some(DraftModel::new(td.into_engine(), key));
        rows.extend(tree_rows?);
    }
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
        let d = p
            .draft
            .as_mut()
            .ok_or_else(|| SpecError::Options("the sampling check needs the draft model".into()))?;
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
                .map(|(t, _, _)| String::from_utf8_lossy(&p.target.token_bytes(*t)).into_owned())
                .collect(),
        );
        sampling.push(c);
    }
    Ok(GateRun {
        toks,
        n_prompts_set,
        template_note,
        rows,
        sampling,
        top_text,
        target_sha256: p.target_sha256.clone(),
        engine_build: p.engine_build.clone(),
        guard,
    })
}

/// Runs the correctness gate: greedy equality of every drafter × k against
/// target-only decoding over the prompt set (or `limit` prompts of it), then the
/// sampling check on the real pair; stores the result as a `spec-gate` run in one
/// transaction when `store` is given. A gate that fails is still a result: it is
/// stored, and [`GateOutcome::failed`] names what failed.
///
/// # Errors
/// [`JobError::Slice`] (a `SpecError`) for bad options, a malformed model or prompt set, engine
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
    let guard = begin_guard(opts.guard, &pair_opts, draft.as_deref(), &cancel)?;
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
        .map(|r| match gate::tree_of_key(&r.drafter_key) {
            Some(t) => format!("tree {t}"),
            None => format!("{} k={}", r.drafter.name(), r.k),
        })
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
                prompt_set: set.source.clone(),
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
                run.template_note.as_deref(),
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
