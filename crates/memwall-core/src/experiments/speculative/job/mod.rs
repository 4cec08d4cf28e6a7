//! The speculative jobs: the one call per `memwall spec` subcommand, made alike by
//! the CLI and the app, so that both store the same rows and write the same files.
//! One file per job:
//!
//! - [`prompts_job`] (`prompts.rs`): the prompt set as the target's chat template
//!   and tokenizer turn it into tokens.
//! - [`gate_job`] (`gate.rs`): the correctness gate
//!   ([`greedy_gate`](super::gate::greedy_gate) per drafter × k, and the sampling
//!   check on the real pair), stored as a `spec-gate` run.
//! - [`bench_job`] (`bench.rs`): the bench ([`run_bench`](super::bench::run_bench))
//!   under the gates that unlock it, stored as a `spec-bench` run, with `spec.md`,
//!   `spec.json` and the charts written to a results folder.
//! - [`synth_job`] (`synth.rs`): the set-acceptance bench, stored as a
//!   `spec-synth` run.
//!
//! What they share lives here: the pair's options, the progress events, the option
//! checks, the fit check and the load. Each job checks its options before any model
//! is read ([`GateJobOptions::validate`], [`SpecBenchJobOptions::validate`],
//! [`SynthJobOptions::validate`]), has the measuring guard check that the target
//! and the draft fit in memory, sizes the context to the longest prompt, and runs
//! the engines on tokio's blocking pool. The models come as files in
//! [`PairOptions`]: resolving catalogue names is the caller's part.

mod bench;
mod gate;
mod prompts;
mod synth;

#[cfg(feature = "llama")]
pub use bench::bench_job;
pub use bench::{SpecBenchJobOptions, SpecBenchOutcome, SpecResultFiles, write_results};
#[cfg(feature = "llama")]
pub use gate::gate_job;
pub use gate::{GateJobOptions, GateOutcome, SAMPLING_PREFIX};
pub use prompts::PromptsOutcome;
#[cfg(feature = "llama")]
pub use prompts::prompts_job;
#[cfg(feature = "llama")]
pub use synth::synth_job;
pub use synth::{SynthJobOptions, SynthOutcome};

use super::K_MAX;
use super::SpecError;
use super::gate::{DrafterKind, TokenizedPrompt};
use super::prompts::{Category, Format, PromptSet};
use crate::measure::guard::GuardReport;
use crate::probe::hw;
use crate::store::NewRun;
use crate::util::now_rfc3339;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(feature = "llama")]
use {
    super::pair::{self, Pair},
    crate::experiments::JobError,
    crate::measure::guard::Guard,
    crate::probe::model::{CacheType, ModelFacts},
};

/// Context of the first load, which tokenizes the prompt set; a set whose longest
/// prompt and generation need more is loaded again with enough.
pub const FIRST_N_CTX: u32 = 4096;

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
    /// Sequences each model's context holds (0 or 1: one; more: llama.cpp's unified
    /// KV cache with that many, for tree drafts). Set by the job, not a flag.
    #[serde(default)]
    pub n_seq: u32,
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
    template_note: Option<&str>,
    guard: GuardReport,
) -> NewRun {
    NewRun {
        kind: kind.into(),
        started_at,
        finished_at: now_rfc3339(),
        command,
        host: hw::host_info(),
        notes: match template_note {
            Some(n) => format!("{notes}; {n}"),
            None => notes,
        },
        guard: Some(guard),
    }
}

/// Checks that the target (and the draft) fit in memory with `n_ctx` tokens of
/// context each, before llama.cpp loads them; a malformed header fails here.
#[cfg(feature = "llama")]
fn fit(
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

/// The guard every job starts under: begun with `guard_opts`, the target and the
/// draft checked to fit at [`FIRST_N_CTX`] before anything is loaded.
#[cfg(feature = "llama")]
fn begin_guard(
    guard_opts: crate::measure::guard::GuardOptions,
    pair_opts: &PairOptions,
    draft: Option<&Path>,
    cancel: &AtomicBool,
) -> Result<Guard, JobError> {
    let mut guard = Guard::begin(guard_opts)?;
    fit(
        &mut guard,
        pair_opts.engine,
        &pair_opts.target,
        draft,
        FIRST_N_CTX,
    )?;
    check_cancel(cancel)?;
    Ok(guard)
}

/// The pair loaded at a context that holds the inputs a job chose, with the
/// fallback-template note of the one prompt path.
#[cfg(feature = "llama")]
struct LoadedPair<T> {
    pair: Pair,
    inputs: T,
    template_note: Option<String>,
}

/// What every job does before it measures (blocking): loads the pair at
/// [`FIRST_N_CTX`], tokenizes the set ([`pair::tokenize_set`]), lets `choose` pick
/// the inputs (returning them and their longest prompt in tokens), and loads the
/// pair again, once the guard has checked it fits, where that prompt plus `max_new`
/// generated tokens needs more context.
#[cfg(feature = "llama")]
#[allow(clippy::too_many_arguments)]
fn load_sized<T>(
    pair_opts: &PairOptions,
    draft: Option<&Path>,
    set: &PromptSet,
    max_new: usize,
    guard: &mut Guard,
    progress: &mut dyn FnMut(SpecProgress),
    cancel: &AtomicBool,
    choose: impl FnOnce(Vec<TokenizedPrompt>) -> Result<(T, usize), JobError>,
) -> Result<LoadedPair<T>, JobError> {
    let threads = pair_opts.threads();
    let (engine, ngl) = (pair_opts.engine, pair_opts.n_gpu_layers);
    let target = pair_opts.target.as_path();
    let n_seq = pair_opts.n_seq;
    let mut p = load(
        engine,
        target,
        draft,
        FIRST_N_CTX,
        threads,
        ngl,
        n_seq,
        progress,
    )?;
    let toks = pair::tokenize_set(&p.target, set)?;
    let template_note = pair::template_note(&*p.target, target, set)?;
    let (inputs, longest) = choose(toks)?;
    let need_ctx = context_for(longest, max_new);
    if need_ctx > FIRST_N_CTX {
        check_cancel(cancel)?;
        fit(guard, engine, target, draft, need_ctx)?;
        drop(p);
        p = load(
            engine, target, draft, need_ctx, threads, ngl, n_seq, progress,
        )?;
    }
    Ok(LoadedPair {
        pair: p,
        inputs,
        template_note,
    })
}

#[cfg(feature = "llama")]
#[allow(clippy::too_many_arguments)]
fn load(
    engine: crate::experiments::bench::BenchEngine,
    target: &Path,
    draft: Option<&Path>,
    n_ctx: u32,
    n_threads: u32,
    n_gpu_layers: u32,
    n_seq: u32,
    progress: &mut dyn FnMut(SpecProgress),
) -> Result<Pair, SpecError> {
    progress(SpecProgress::Loading {
        target: target.display().to_string(),
        draft: draft.map(|d| d.display().to_string()),
        n_threads,
        n_ctx,
    });
    let cfg = crate::measure::engine::EngineConfig {
        n_gpu_layers,
        n_seq_max: n_seq.max(1),
        kv_unified: n_seq > 1,
        ..pair::engine_config(n_ctx, n_threads)
    };
    pair::load_with(engine, target, draft, &cfg)
}

#[cfg(test)]
mod tests {
    use super::super::store::SpecBenchRow;
    use super::*;
    use crate::measure::engine::TokenId;
    use crate::measure::guard::{Guard, GuardOptions};

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
            n_seq: 1,
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
        let SpecResultFiles { files, charts } = write_results(
            &dir,
            "# memwall spec bench\n",
            std::slice::from_ref(&row),
            &[],
            &report,
        )
        .unwrap();
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
