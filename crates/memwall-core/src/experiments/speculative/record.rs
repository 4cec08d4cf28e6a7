//! The records the speculative slice's bench, set-acceptance and store modules
//! share, below all three (so that none of them imports another to reach a row type):
//! the stored row types ([`SpecBenchRow`], [`SpecSynthRow`], the calibration made
//! before a set-acceptance run), `--k auto`'s decisions, the energy of a measured
//! configuration ([`pooled_energy`]) and the per-iteration breakdown table
//! ([`breakdown_md`]). The SQL stays in `store`, the measurement in `bench` and
//! `synth`; both re-export what they used to define.

use super::cost::Timings;
use super::run::{IterBreakdown, SpecStats};
use super::tree::TreeShape;
use crate::measure::sampler::session::{EnergySummary, Recording};
use serde::{Deserialize, Serialize};

/// One bench cell: a (category, drafter, k) configuration measured over `reps`
/// repetitions, or (`decision` set) `--k auto`'s decision to turn speculation off,
/// which is not a measurement and carries no samples. Units in the names; tok/s is
/// decode tokens per second (prefill excluded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecBenchRow {
    /// Row id (set on insert).
    pub id: i64,
    /// Run id (set on insert).
    pub run_id: i64,
    /// Target file name.
    pub target_file: String,
    /// sha256 of the target GGUF file.
    pub target_sha256: String,
    /// Draft file name (draft-model cells).
    pub draft_file: Option<String>,
    /// `none` | `draft-model` | `ngram`.
    pub drafter_kind: String,
    /// The drafter's identity: kind and settings (or draft model file).
    pub drafter_key: String,
    /// Draft length (0 = target-only).
    pub k: usize,
    /// This cell is `--k auto`'s choice.
    pub k_auto: bool,
    /// Prompt category: `json`, `code` or `prose`.
    pub category: String,
    /// Prompt set sha256 (the gate that unlocked this row covered the same).
    pub prompt_set_sha256: String,
    /// The prompt file, as given (a path, or `builtin:prompts/spec.jsonl`);
    /// `None` in rows stored before it was kept.
    pub prompt_set: Option<String>,
    /// Prompt ids measured.
    pub prompt_ids: Vec<String>,
    /// Tokens per prompt.
    pub max_new: usize,
    /// Repetitions (0 for a decision row).
    pub reps: usize,
    /// CPU threads the engine ran with (llama-bench's `-t`).
    pub n_threads: u32,
    /// Decode tok/s per repetition (`None` only for a decision row).
    pub tps_samples: Option<Vec<f64>>,
    /// Mean tok/s.
    pub tps_mean: Option<f64>,
    /// Sample std of tok/s.
    pub tps_std: Option<f64>,
    /// Speedup per repetition (vs target-only of the same repetition).
    pub speedup_samples: Option<Vec<f64>>,
    pub speedup_mean: Option<f64>,
    /// Sample std of the speedup.
    pub speedup_std: Option<f64>,
    /// Cost-model prediction.
    pub predicted_speedup: Option<f64>,
    /// α̂ of the calibration run.
    pub alpha_calib: Option<f64>,
    /// Accepted ÷ drafted.
    pub acceptance_rate: Option<f64>,
    /// Accepted ÷ (accepted + rejections).
    pub alpha_hat: Option<f64>,
    /// Accepted drafted tokens per iteration.
    pub mean_accepted: Option<f64>,
    /// Tokens per target forward pass.
    pub tokens_per_target_pass: Option<f64>,
    /// Drafted tokens.
    pub n_drafted: u64,
    /// Accepted tokens.
    pub n_accepted: u64,
    pub n_iterations: u64,
    /// Emitted tokens.
    pub n_emitted: u64,
    /// Prompts whose output differed from target-only greedy (any repetition).
    pub n_output_mismatch: u64,
    /// Discarded target mass, max.
    pub p_mass_max: f64,
    /// Discarded target mass, mean.
    pub p_mass_mean: f64,
    /// Discarded draft mass, max.
    pub q_mass_max: f64,
    /// Discarded draft mass, mean.
    pub q_mass_mean: f64,
    /// Drafting time per iteration, ns.
    pub draft_ns_per_iteration: Option<f64>,
    /// Verify time per iteration, ns.
    pub verify_ns_per_iteration: Option<f64>,
    /// Summed counters (JSON of [`super::run::SpecStats`]).
    pub stats_json: String,
    /// Cost-model timings of the category (JSON of [`super::cost::Timings`]).
    pub timings_json: Option<String>,
    /// llama.cpp build the engine was compiled from.
    pub engine_build: String,
    /// Git commit of the memwall build that measured it.
    pub build_commit: String,
    /// When (UTC RFC 3339).
    pub measured_at: String,
    /// Hostname of the machine that measured it.
    pub hostname: String,
    /// CPU model name as the OS reports it.
    pub cpu_info: String,
    /// A decision instead of a measurement: `--k auto` turning speculation off
    /// ([`AUTO_OFF_PREDICTED`], [`AUTO_OFF_UNGATED`]). `None` for measured rows.
    pub decision: Option<String>,
    /// The `spec_gates` row that unlocked this row's speedup (k > 0).
    pub gate_id: Option<i64>,
}

/// `--k auto`'s decision when no gated `k` is predicted to beat target-only
/// decoding at the lower bound of α.
pub const AUTO_OFF_PREDICTED: &str = "off (predicted ≤ 1)";

/// `--k auto`'s decision when no `k` of its drafter is unlocked by a gate.
pub const AUTO_OFF_UNGATED: &str = "off (no gated k)";

impl SpecBenchRow {
    /// `k` as tables show it: `4`, `auto→4`, `auto→off (predicted ≤ 1)`, `—` for target-only.
    pub fn k_label(&self) -> String {
        match (&self.decision, self.k_auto, self.k) {
            (Some(d), _, _) => format!("auto→{d}"),
            (None, true, k) => format!("auto→{k}"),
            (None, false, 0) => "—".into(),
            (None, false, k) => k.to_string(),
        }
    }
}

impl SpecBenchRow {
    /// A filled example (tests, docs).
    pub fn example() -> SpecBenchRow {
        SpecBenchRow {
            id: 0,
            run_id: 0,
            target_file: "t.gguf".into(),
            target_sha256: "aa".repeat(32),
            draft_file: Some("d.gguf".into()),
            drafter_kind: "draft-model".into(),
            drafter_key: "draft:bbbbbbbbbbbbbbbb".into(),
            k: 4,
            k_auto: false,
            category: "code".into(),
            prompt_set_sha256: "cc".repeat(32),
            prompt_set: Some("builtin:prompts/spec.jsonl".into()),
            prompt_ids: vec!["code-01".into()],
            max_new: 32,
            reps: 5,
            n_threads: 2,
            tps_samples: Some(vec![30.0, 31.0, 29.0, 30.5, 30.2]),
            tps_mean: Some(30.14),
            tps_std: Some(0.74),
            speedup_samples: Some(vec![0.9, 0.92, 0.88, 0.91, 0.9]),
            speedup_mean: Some(0.902),
            speedup_std: Some(0.015),
            predicted_speedup: Some(0.95),
            alpha_calib: Some(0.8),
            acceptance_rate: Some(0.7),
            alpha_hat: Some(0.78),
            mean_accepted: Some(2.8),
            tokens_per_target_pass: Some(3.8),
            n_drafted: 400,
            n_accepted: 280,
            n_iterations: 100,
            n_emitted: 380,
            n_output_mismatch: 0,
            p_mass_max: 0.0,
            p_mass_mean: 0.0,
            q_mass_max: 0.0,
            q_mass_mean: 0.0,
            draft_ns_per_iteration: Some(4e7),
            verify_ns_per_iteration: Some(6e7),
            stats_json: "{}".into(),
            timings_json: None,
            engine_build: "llama-cpp-sys-2 0.1.161".into(),
            build_commit: "abc".into(),
            measured_at: "2026-01-01T00:00:00Z".into(),
            hostname: "h".into(),
            cpu_info: "cpu".into(),
            decision: None,
            gate_id: None,
        }
    }
}

/// The cost model's prediction for one (α, k), made before the timed runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SynthPrediction {
    /// Set acceptance rate.
    pub alpha: f64,
    /// Draft length.
    pub k: usize,
    /// `cost::predicted_speedup(timings, α, k)`, or for a tree
    /// `tree::predicted_speedup(timings, timings.draft_rows_ns, tree, α, overhead)`.
    pub predicted_speedup: f64,
    /// The tree drafted (`None`: a chain of `k`; a tree's `k` is its depth).
    #[serde(default)]
    pub tree: Option<TreeShape>,
}

/// The times and predictions made before the timed runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SynthCalibration {
    /// Prompt whose depth the times were measured at.
    pub prompt_id: String,
    /// Measured t_verify(j) and t_draft.
    pub timings: Timings,
    /// One prediction per (α, k), α-major.
    pub predictions: Vec<SynthPrediction>,
}

/// The energy of one measured configuration pooled over its repetitions: phase
/// `names[i]` holds repetition `i`, whose prompts' timed decodes are its intervals;
/// `n_emitted` tokens in all. Integrated over every interval of those phases
/// ([`Recording::energy_over`]): the prompts' prefills between them are left out.
/// `None` when a phase is missing or there are no repetitions.
pub fn pooled_energy(
    rec: &Recording,
    names: &[String],
    tps: &[f64],
    n_emitted: u64,
) -> Option<EnergySummary> {
    if tps.is_empty() || names.len() != tps.len() {
        return None;
    }
    let mut windows = Vec::new();
    for name in names {
        rec.phase(name)?;
        windows.extend(rec.windows(name));
    }
    Some(rec.energy_over(&windows, n_emitted))
}

/// One stored row of `spec_synth`: a (α, k) configuration or the target-only
/// baseline of a set-acceptance run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecSynthRow {
    /// Row id (set on insert).
    pub id: i64,
    /// Run id (set on insert).
    pub run_id: i64,
    /// The `spec_synth_predictions` row stored before the timed runs (`None` for
    /// target-only).
    pub prediction_id: Option<i64>,
    /// Set acceptance rate (`None`: target-only).
    pub alpha_set: Option<f64>,
    /// Draft length (0 = target-only).
    pub k: usize,
    /// Target file name.
    pub target_file: String,
    /// sha256 of the target GGUF file.
    pub target_sha256: String,
    /// Draft file name.
    pub draft_file: String,
    /// The draft model's key (the pair's gate is keyed by it).
    pub drafter_key: String,
    /// Seed of the acceptance draws.
    pub seed: u64,
    pub prompt_set_sha256: String,
    /// The prompt file, as given (a path, or `builtin:prompts/spec.jsonl`);
    /// `None` in rows stored before it was kept.
    pub prompt_set: Option<String>,
    /// Prompt ids measured.
    pub prompt_ids: Vec<String>,
    /// Tokens per prompt.
    pub max_new: usize,
    /// Repetitions.
    pub reps: usize,
    /// CPU threads.
    pub n_threads: u32,
    /// Layers offloaded to the GPU.
    pub n_gpu_layers: u32,
    /// Decode tok/s per repetition.
    pub tps_samples: Vec<f64>,
    /// Mean tok/s.
    pub tps_mean: Option<f64>,
    /// Sample std of tok/s.
    pub tps_std: Option<f64>,
    /// Speedup per repetition.
    pub speedup_samples: Option<Vec<f64>>,
    pub speedup_mean: Option<f64>,
    /// Sample std of the speedup.
    pub speedup_std: Option<f64>,
    /// The prediction made before the timed runs (copied from `prediction_id`).
    pub predicted_speedup: Option<f64>,
    /// The cost model at the realised α̂ and draft lengths ([`post_hoc`]).
    pub predicted_after: Option<f64>,
    /// Realised α̂ = accepted ÷ (accepted + rejections).
    pub alpha_hat: Option<f64>,
    /// Positions tested (accepted + rejections).
    pub n_tested: u64,
    /// Drafted tokens.
    pub n_drafted: u64,
    /// Accepted tokens.
    pub n_accepted: u64,
    /// Iterations (target passes of the loop).
    pub n_iterations: u64,
    /// Emitted tokens.
    pub n_emitted: u64,
    /// Draft-model forward passes.
    pub n_draft_passes: u64,
    /// Drafter draws made, of which right (`n_right ÷ n_draws` estimates α over
    /// every drafted position, tested or not).
    pub n_draws: u64,
    /// Draws that proposed the target's token.
    pub n_right: u64,
    /// Summed counters (JSON of [`SpecStats`]).
    pub stats_json: String,
    /// Cost-model timings (JSON of [`Timings`]).
    pub timings_json: String,
    /// llama.cpp build.
    pub engine_build: String,
    /// memwall's git commit.
    pub build_commit: String,
    /// When (UTC RFC 3339).
    pub measured_at: String,
    pub hostname: String,
    /// CPU model name.
    pub cpu_info: String,
    /// GPU name(s).
    pub gpu_info: Option<String>,
    /// The greedy gate of the draft model at this k that unlocks the speedup.
    pub gate_id: Option<i64>,
}

/// Markdown table of where the decode time went ([`IterBreakdown`]), one column per
/// configuration: each part in ms per iteration (summed over repetitions and
/// prompts, ÷ iterations), then the parts' sum against the decode clock. A
/// configuration without a breakdown (a row stored before it was kept) is left out.
pub fn breakdown_md(cols: &[(String, SpecStats)]) -> String {
    let cols: Vec<&(String, SpecStats)> = cols
        .iter()
        .filter(|(_, st)| st.breakdown.sum_ns() > 0 && st.n_iterations > 0)
        .collect();
    if cols.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "Per iteration (ms), each part timed with the engines synchronised at its edges:\n\n| part |",
    );
    for (l, _) in &cols {
        s.push_str(&format!(" {l} |"));
    }
    s.push_str("\n|---|");
    s.push_str(&"---|".repeat(cols.len()));
    s.push('\n');
    let per_iter = |st: &SpecStats, ns: u64| ns as f64 / 1e6 / st.n_iterations as f64;
    let line = |name: &str, f: &dyn Fn(&SpecStats) -> String| {
        let mut l = format!("| {name} |");
        for (_, st) in &cols {
            l.push_str(&format!(" {} |", f(st)));
        }
        l.push('\n');
        l
    };
    s.push_str(&line("iterations", &|st: &SpecStats| {
        st.n_iterations.to_string()
    }));
    s.push_str(&line("draft passes per iteration", &|st: &SpecStats| {
        format!("{:.2}", st.n_draft_passes as f64 / st.n_iterations as f64)
    }));
    for (i, (name, _)) in IterBreakdown::default().parts().iter().enumerate() {
        s.push_str(&line(name, &|st: &SpecStats| {
            format!("{:.3}", per_iter(st, st.breakdown.parts()[i].1))
        }));
    }
    s.push_str(&line("draft forward per draft pass", &|st: &SpecStats| {
        if st.n_draft_passes > 0 {
            format!(
                "{:.3}",
                st.breakdown.draft_forward_ns as f64 / 1e6 / st.n_draft_passes as f64
            )
        } else {
            "—".into()
        }
    }));
    s.push_str(&line("**sum of parts**", &|st: &SpecStats| {
        format!("{:.3}", per_iter(st, st.breakdown.sum_ns()))
    }));
    s.push_str(&line("**decode clock**", &|st: &SpecStats| {
        format!("{:.3}", per_iter(st, st.decode_ns))
    }));
    s.push_str(&line("sum ÷ clock", &|st: &SpecStats| {
        st.breakdown
            .coverage(st.decode_ns)
            .map_or("—".into(), |c| format!("{c:.4}"))
    }));
    s
}
