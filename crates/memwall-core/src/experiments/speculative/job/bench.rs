//! `memwall spec bench`: the bench ([`run_bench`](super::super::bench::run_bench))
//! under the gates that unlock it, stored as a `spec-bench` run, with `spec.md`,
//! `spec.json` and the charts written to a results folder.

use super::super::K_MAX;
use super::super::SpecError;
use super::super::bench::{self, CategoryReport};
use super::super::chart;
use super::super::gate::{DrafterKind, TokenizedPrompt};
use super::super::prompts::Category;
use super::super::store::SpecBenchRow;
use super::{check_drafters, check_ks, check_max_new};
use crate::experiments::JobError;
use crate::measure::guard::{GuardOptions, GuardReport};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
#[cfg(feature = "llama")]
use {
    super::super::bench::SpecBenchPlan,
    super::super::drafter::Ngram,
    super::super::store as sstore,
    super::{PairOptions, SpecProgress, begin_guard, check_cancel, file_name, load_sized, new_run},
    crate::experiments::blocking,
    crate::probe::hw,
    crate::store::Store,
    crate::util::now_rfc3339,
    std::sync::Arc,
    std::sync::atomic::AtomicBool,
};

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

/// Runs the speculative bench: loads the pair, looks up the stored gates of this
/// target, engine build and prompt set (when `opts.record`, every fixed
/// configuration needs one that unlocks it before any timing starts), calibrates
/// and times per category ([`bench::run_bench`]), stores the rows as a
/// `spec-bench` run in one transaction, and writes `spec.md`, `spec.json` and the
/// charts to `opts.results_dir`. The Markdown report records the load average
/// before and after the timed runs.
///
/// # Errors
/// [`JobError::Slice`] (a `SpecError`) for bad options, a malformed model or prompt set, a missing
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
    use super::super::drafter::Drafter;
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
    let guard = begin_guard(opts.guard, &pair_opts, draft.as_deref(), &cancel)?;
    // Load, tokenize, split, and load again when the longest input needs more context.
    let (p2, d2, s2, o2, c2) = (
        pair_opts.clone(),
        draft.clone(),
        set.clone(),
        opts.clone(),
        cancel.clone(),
    );
    let mut progress = progress;
    let (p, inputs, guard, mut progress, template_note) =
        blocking(move || -> Result<_, JobError> {
            let mut guard = guard;
            let max_new = o2.max_new.max(o2.calib_max_new);
            let loaded = load_sized(
                &p2,
                d2.as_deref(),
                &s2,
                max_new,
                &mut guard,
                &mut progress,
                &c2,
                |toks| {
                    let inputs = o2.split(&toks)?;
                    let longest = inputs
                        .iter()
                        .flat_map(|i| i.measured.iter().chain(std::iter::once(&i.calibration)))
                        .map(|t| t.tokens.len())
                        .max()
                        .unwrap_or(0);
                    Ok((inputs, longest))
                },
            )?;
            Ok((
                loaded.pair,
                loaded.inputs,
                guard,
                progress,
                loaded.template_note,
            ))
        })
        .await??;
    check_cancel(&cancel)?;
    let template_note = super::super::pair::with_catch_up_note(&p, template_note);
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
    crate::experiments::live::job::idle_baseline(&marker).await;
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
            &mut |ev| marker.apply(ev),
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
        prompt_set: set.source.clone(),
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
            template_note.as_deref(),
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
