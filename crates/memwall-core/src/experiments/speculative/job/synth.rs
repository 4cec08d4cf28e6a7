//! `memwall spec bench --synth-acceptance`: the set-acceptance bench, its cost
//! model's predictions stored before the timed runs, stored as a `spec-synth` run.

use super::super::SpecError;
use super::{check_ks, check_max_new};
use crate::measure::guard::{GuardOptions, GuardReport};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
#[cfg(feature = "llama")]
use {
    super::super::store as sstore,
    super::{
        PairOptions, SpecProgress, begin_guard, check_cancel, file_name, limit_round_robin,
        load_sized, new_run,
    },
    crate::experiments::{JobError, blocking},
    crate::probe::hw,
    crate::store::Store,
    crate::util::now_rfc3339,
    std::path::Path,
    std::sync::Arc,
    std::sync::atomic::AtomicBool,
};

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
    /// Tree drafts measured beside the chains at every α (`--tree`), each needing
    /// its own gate ([`gate::tree_key`](super::super::gate::tree_key)).
    pub trees: Vec<super::super::tree::TreeShape>,
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
            trees: Vec::new(),
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
        for t in &self.trees {
            if let Err(e) = t.validate() {
                return bad(format!("--tree {}: {e}", t.label()));
            }
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
    pub rows: Vec<super::super::synth::SpecSynthRow>,
    /// Times and predictions made before the timed runs.
    pub calibration: super::super::synth::SynthCalibration,
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
/// target-only and every (α, k) with the [`SetAcceptance`](super::super::synth::SetAcceptance)
/// drafter ([`super::super::synth::run_synth_bench`]), checks every output against
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
    use super::super::drafter::Drafter;
    use super::super::synth::{self, SetAcceptance, SynthPlan};
    opts.validate()?;
    let draft = pair_opts
        .draft_for(true, "--synth-acceptance")?
        .expect("needed");
    let set = pair_opts.prompt_set()?;
    let started = now_rfc3339();
    let threads = pair_opts.threads();
    let ngl = pair_opts.n_gpu_layers;
    let guard = begin_guard(opts.guard, &pair_opts, Some(&draft), &cancel)?;
    let (p2, d2, s2, o2, c2) = (
        pair_opts.clone(),
        draft.clone(),
        set.clone(),
        opts.clone(),
        cancel.clone(),
    );
    let mut progress = progress;
    let (p, prompts, guard, mut progress, template_note) =
        blocking(move || -> Result<_, JobError> {
            let mut guard = guard;
            // Trees need a unified KV cache with a sequence per leaf, the main one
            // and the target's parked cells.
            let n_seq = o2
                .trees
                .iter()
                .map(|t| t.n_leaves() as u32 + 2)
                .max()
                .unwrap_or(1);
            let loaded = load_sized(
                &PairOptions {
                    n_seq,
                    ..p2.clone()
                },
                Some(&d2),
                &s2,
                o2.max_new,
                &mut guard,
                &mut progress,
                &c2,
                |toks| {
                    let prompts = limit_round_robin(toks, o2.n_prompts);
                    let longest = prompts.iter().map(|t| t.tokens.len()).max().unwrap_or(0);
                    Ok((prompts, longest))
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
    let drafter_key = p.draft.as_ref().map(|d| d.key()).unwrap_or_default();
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
        trees: opts.trees.clone(),
    };
    let target_file = file_name(&p.target_path);
    let draft_file = file_name(&draft);
    let target_sha256 = p.target_sha256.clone();
    // Calibration: the cost model's times and predictions, before any timed run.
    let (plan2, prompts2) = (plan.clone(), prompts.clone());
    let dk = drafter_key.clone();
    let (mut p, mut drafter, cal, mut progress) = blocking(move || -> Result<_, JobError> {
        let mut p = p;
        let dm = p.draft.take().expect("loaded with a draft");
        let mut drafter = SetAcceptance::new(dm.into_engine(), dk, 0.0, plan2.seed)?;
        progress(SpecProgress::Bench {
            step: format!("set acceptance: cost-model times on {}", prompts2[0].id),
        });
        let max_rows = super::super::run::max_rows_for(&p.target);
        let cal = synth::calibrate(&mut p.target, &mut drafter, &prompts2[0], &plan2, max_rows)?;
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
        let trees = opts
            .trees
            .iter()
            .map(|t| (super::super::gate::tree_key(t, &drafter_key), t.k));
        let missing: Vec<String> = ks_run
            .iter()
            .map(|&k| (drafter_key.clone(), k))
            .chain(trees)
            .filter_map(|(key, k)| sstore::unlocking_gate(&gates, &key, k, opts.max_new).err())
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
            &drafter_key,
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
    crate::experiments::live::job::idle_baseline(&marker).await;
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
            &mut |ev| marker.apply(ev),
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
        drafter_key,
        prompt_set_sha256: set.sha256.clone(),
        prompt_set: set.source.clone(),
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
            template_note.as_deref(),
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
