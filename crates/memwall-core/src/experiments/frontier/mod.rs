//! The quantization frontier: for each arm of one source (see [`crate::experiments::frontier::quant`]),
//! bytes, decode and prefill speed against the roofline, perplexity and KL
//! divergence on a fixed text slice, and task accuracy with Wilson intervals —
//! one grid, stored cell by cell, drawn as quality vs decode tok/s.
//!
//! **Cells.** A cell is `(arm, measure, settings)`: `speed` (pp512 + tg128 with
//! llama-bench semantics through [`crate::experiments::bench::run_plan`], N ≥ 5 repetitions),
//! `ppl:<dataset>` (perplexity and, when the arm is not the reference, KLD in
//! lockstep, [`crate::measure::evals::ppl`]), `task:<name>` ([`crate::measure::evals::tasks`]). Its
//! identity is the arm's sha256, the measure and `config_key` = 16 hex digits of
//! the sha256 of the settings JSON (which include the data's sha256 and, for KLD,
//! the reference's sha256). A finished cell is never run again with the same
//! identity; each cell is written in **one transaction** (its `runs` row, bench
//! rows, cell row, item rows), so a killed run leaves no partial cell and a rerun
//! resumes where it stopped.
//!
//! **Reference.** KLD is measured against the source file itself: for a Q4_K_M
//! source, arms above it carry only its information, so their KLD shows pure
//! rounding; arms below show damage.

pub mod chart;
#[cfg(feature = "llama")]
pub mod perplexity;
pub mod quant;
pub mod store;
pub mod table;

use crate::experiments::frontier::quant::{Arm, QuantType, Relation, Source};
use crate::measure::evals::ppl::{PplConfig, PplResult};
use crate::measure::evals::tasks::{TaskConfig, TaskKind, TaskResult};
use crate::probe::hw::HostInfo;
use crate::store::Store;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub use store::{cell_items, count_cells, find_cell};

/// Version of the task prompts; part of every task cell's identity, so changing a
/// prompt never mixes old and new cells.
pub const PROMPT_VERSION: u32 = 1;

/// A validated frontier plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrontierPlan {
    /// The source GGUF.
    pub source: PathBuf,
    /// Arm types; the source is always an arm too (as its own type).
    pub arms: Vec<QuantType>,
    /// Threads for every engine (and the quantizer).
    pub n_threads: u32,
    /// Timed repetitions of pp and tg (≥ 5 for reports).
    pub reps: u32,
    /// pp test length.
    pub n_prompt: u32,
    /// tg test length.
    pub n_gen: u32,
    /// Run the speed cells.
    pub speed: bool,
    /// Perplexity slices (one cell each).
    pub ppl: Vec<PplConfig>,
    /// Measure KLD vs the source in the perplexity cells.
    pub kld: bool,
    /// Tasks and their settings.
    pub tasks: Vec<(TaskKind, TaskConfig)>,
    /// Measures (`speed`, `ppl:wiki`, `task:gsm8k`) to measure again even when a
    /// cell is stored (e.g. speed on a quieter machine); the newest cell wins.
    #[serde(default)]
    pub remeasure: Vec<String>,
    /// What the measuring guard allows (battery, skipping the capacity check).
    #[serde(default)]
    pub guard: crate::measure::guard::GuardOptions,
    /// Run the live sampler beside each speed cell (power, energy per token,
    /// temperature; stored in the cell's transaction). Off only to measure its
    /// overhead.
    #[serde(default = "yes")]
    pub sampler: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrontierError {
    /// Bad plan.
    #[error("frontier plan: {0}")]
    Plan(String),
    /// Quantization.
    #[error(transparent)]
    Quant(#[from] crate::experiments::frontier::quant::QuantError),
    /// Benchmark.
    #[error(transparent)]
    Bench(#[from] crate::experiments::bench::BenchError),
    /// The guard refused to start a cell (battery, memory).
    #[error(transparent)]
    Guard(#[from] crate::measure::guard::GuardError),
    /// Evaluation.
    #[error(transparent)]
    Eval(#[from] crate::measure::evals::EvalError),
    #[error(transparent)]
    Engine(#[from] crate::measure::engine::EngineError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// Dataset catalogue.
    #[error(transparent)]
    Catalog(#[from] crate::probe::catalog::CatalogError),
    /// Model header.
    #[error(transparent)]
    Gguf(#[from] crate::probe::gguf::GgufError),
    /// I/O.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A dataset that is not a text slice where one is needed.
    #[error("--data {0}: not a text dataset (use wiki, code or c4)")]
    NotText(String),
    /// A file could not be read.
    #[error("reading {path}")]
    Read {
        /// Path of the file the error is about.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The roof of the speed cells could not be measured or found.
    #[error(transparent)]
    Roof(Box<crate::experiments::JobError>),
    /// Cancelled: finished cells are stored, the one in progress is not.
    #[error("cancelled: finished cells are stored; run the same command again to resume")]
    Cancelled,
}

/// One measure of the grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Measure {
    /// pp + tg.
    Speed,
    /// Perplexity (+ KLD) on a slice.
    Ppl(PplConfig),
    Task(TaskKind, TaskConfig),
}

impl Measure {
    /// `speed`, `ppl:wiki`, `task:gsm8k`.
    pub fn name(&self) -> String {
        match self {
            Measure::Speed => "speed".into(),
            Measure::Ppl(c) => format!("ppl:{}", c.dataset),
            Measure::Task(k, _) => format!("task:{}", k.name()),
        }
    }
}

/// An arm with the facts the table needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmInfo {
    /// The arm as stored: file, type and relation to the source.
    pub arm: Arm,
    /// Weight bytes read per decode step (ModelFacts' rule).
    pub streamed_bytes: u64,
}

impl ArmInfo {
    /// Whether this arm's perplexity cells measure KLD against the source: every
    /// arm but the source file on llama.cpp (an MLX arm of the source file is
    /// measured against it).
    pub fn is_reference_target(&self, source: &Source) -> bool {
        self.arm.sha256 != source.sha256 || self.arm.mlx_engine().is_some()
    }
}

/// What the frontier reports while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum FrontierProgress {
    /// Hashing the source or making an arm.
    Preparing {
        /// What is being prepared, e.g. `hashing <file>` or `quantizing Q8_0 → Q4_K_M`.
        what: String,
    },
    /// A cell was already stored.
    Skipped {
        /// Quantization type of the arm, e.g. `Q4_K_M`.
        arm: String,
        /// Measure name: speed, a perplexity dataset or a task.
        measure: String,
    },
    /// A cell started.
    Started {
        /// Quantization type of the arm, e.g. `Q4_K_M`.
        arm: String,
        /// Measure name: speed, a perplexity dataset or a task.
        measure: String,
        /// Cell number (1-based).
        index: usize,
        /// Cells in the grid.
        total: usize,
    },
    /// Steps within a cell (windows, items, repetitions).
    Step {
        /// Steps finished in this cell.
        done: usize,
        /// Steps in this cell.
        of: usize,
    },
    /// A cell was stored.
    Stored {
        /// Quantization type of the arm, e.g. `Q4_K_M`.
        arm: String,
        /// Measure name: speed, a perplexity dataset or a task.
        measure: String,
        /// One-line summary.
        summary: String,
    },
}

/// Decode and prefill figures of a speed cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedSummary {
    /// tg mean tok/s.
    pub tg_tps: f64,
    /// Sample standard deviation of the decode tok/s.
    pub tg_std: f64,
    /// Timed decode repetitions behind the mean.
    pub tg_n: usize,
    /// tg roofline ceiling, tok/s.
    pub tg_ceiling: Option<f64>,
    /// tg ÷ ceiling.
    pub tg_achieved: Option<f64>,
    /// pp mean tok/s.
    pub pp_tps: f64,
    /// Sample standard deviation of the prefill tok/s.
    pub pp_std: f64,
    /// pp ceiling, tok/s (`None`: no compute peak was measured).
    pub pp_ceiling: Option<f64>,
    /// pp ÷ ceiling (`None` with the ceiling).
    pub pp_achieved: Option<f64>,
    /// STREAM bandwidth behind the ceilings, GB/s.
    pub bandwidth_gbps: Option<f64>,
    /// Store ids of the bench rows (pp, tg).
    pub bench_ids: Vec<i64>,
}

/// One stored cell of the frontier table: one arm (a quantization of the model) × one measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrontierCell {
    /// Store id of the row.
    pub id: i64,
    /// Store id of the run (a `runs` row).
    pub run_id: i64,
    /// Quantization type of the arm, e.g. `Q4_K_M`.
    pub arm_quant: String,
    /// Measure name: speed, a perplexity dataset or a task.
    pub measure: String,
    /// The cell's headline figure: decode tok/s, PPL, or task accuracy (0–1).
    pub value: Option<f64>,
    /// Its ± (std or uncertainty).
    pub value_unc: Option<f64>,
    /// Low end of the Wilson 95 % interval (task cells).
    pub ci_low: Option<f64>,
    /// High end of the Wilson 95 % interval (task cells).
    pub ci_high: Option<f64>,
    /// Repetitions, scored tokens or items behind the value.
    pub n: Option<i64>,
    /// The measure's whole result, as JSON.
    pub result: serde_json::Value,
    /// The settings that identify the cell ([`config_json`]).
    pub config: serde_json::Value,
    /// When the cell finished, UTC RFC 3339.
    pub finished_at: String,
}

/// The identity of a cell's settings.
pub fn config_json(
    m: &Measure,
    plan: &FrontierPlan,
    text_sha: Option<&str>,
    reference_sha: Option<&str>,
) -> serde_json::Value {
    match m {
        Measure::Speed => serde_json::json!({
            "n_prompt": plan.n_prompt, "n_gen": plan.n_gen, "reps": plan.reps, "n_threads": plan.n_threads,
            "n_batch": 2048, "n_ubatch": 512, "n_depth": 0,
        }),
        Measure::Ppl(c) => serde_json::json!({
            "dataset": c.dataset, "n_ctx": c.n_ctx, "n_chunks": c.n_chunks, "text_sha256": text_sha,
            "kld_reference_sha256": reference_sha,
        }),
        Measure::Task(k, c) => serde_json::json!({
            "task": k.name(), "n_items": c.n_items, "seed": c.seed, "max_new_tokens": if k.generates() { Some(c.max_new_tokens) } else { None },
            "sandbox": if *k == TaskKind::HumanEval { Some(&c.sandbox) } else { None },
            "data_sha256": text_sha, "prompt_version": PROMPT_VERSION,
        }),
    }
}

/// 16 hex digits of sha256(measure ‖ settings JSON).
pub fn config_key(measure: &str, config: &serde_json::Value) -> String {
    crate::util::sha256_bytes(format!("{measure}\0{config}").as_bytes())[..16].to_string()
}

/// A measured cell ready to store.
struct NewCell {
    measure: String,
    config: serde_json::Value,
    value: Option<f64>,
    value_unc: Option<f64>,
    ci: Option<(f64, f64)>,
    n: Option<i64>,
    result: serde_json::Value,
    items: Vec<crate::measure::evals::tasks::ItemResult>,
    bench: Vec<crate::store::record::BenchRecord>,
    started_at: String,
    guard: Option<crate::measure::guard::GuardReport>,
    /// The live sampler's recording beside the bench rows and the phase names of
    /// their tests, in the order they finished (speed cells).
    sampled: Option<(crate::experiments::live::Recording, Vec<String>)>,
    /// What the run's notes add (the fallback-template warning of a task cell whose
    /// model has no chat template).
    note: Option<String>,
}

struct CellContext<'a> {
    store: &'a Store,
    host: &'a HostInfo,
    source: &'a Source,
    command: &'a str,
    n_threads: u32,
}

impl FrontierPlan {
    /// Checks the plan.
    ///
    /// # Errors
    /// [`FrontierError::Plan`] naming the bad setting; [`FrontierError::Gguf`] when
    /// the source model fails the GGUF checks.
    pub fn validate(&self) -> Result<(), FrontierError> {
        let bad = |m: String| Err(FrontierError::Plan(m));
        if !self.source.is_file() {
            return bad(format!(
                "source {} does not exist (`memwall models fetch qwen2.5-coder-1.5b-q4_k_m`)",
                self.source.display()
            ));
        }
        // Read the header before anything is measured or quantized.
        crate::probe::model::ModelFacts::open(&self.source)?;
        if self.reps == 0 || self.n_threads == 0 {
            return bad("--reps and --threads must be positive".into());
        }
        if self.n_prompt == 0 || self.n_gen == 0 {
            return bad("pp and tg lengths must be positive".into());
        }
        for p in &self.ppl {
            if p.n_ctx < 16 {
                return bad(format!("--ppl-ctx {} is too small", p.n_ctx));
            }
        }
        for (k, c) in &self.tasks {
            if c.n_items == 0 {
                return bad(format!("{}: 0 items (omit the task instead)", k.name()));
            }
            if k.generates() && c.max_new_tokens == 0 {
                return bad(format!(
                    "{}: the generation budget must be positive",
                    k.name()
                ));
            }
        }
        Ok(())
    }

    /// The measures of the grid, in run order.
    pub fn measures(&self) -> Vec<Measure> {
        let mut m = Vec::new();
        if self.speed {
            m.push(Measure::Speed);
        }
        m.extend(self.ppl.iter().cloned().map(Measure::Ppl));
        m.extend(self.tasks.iter().map(|(k, c)| Measure::Task(*k, c.clone())));
        m
    }
}

/// A finished (or resumed) frontier.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FrontierOutcome {
    /// Arms, most bits per weight first.
    pub arms: Vec<ArmInfo>,
    /// Cells measured in this invocation.
    pub measured: usize,
    /// Cells found stored and skipped.
    pub skipped: usize,
    /// The table rows.
    pub rows: Vec<table::FrontierRow>,
}

/// The source model and its arms, sorted by bits per weight, highest first
/// ([`prepare_arms`], [`existing_arms`]).
#[derive(Debug)]
pub struct Arms {
    /// The source GGUF every arm was quantized from, opened and hashed.
    pub source: Source,
    /// The arms, the source's own arm among them.
    pub arms: Vec<ArmInfo>,
}

/// Prepares the arms: hashes the source, makes missing arms (the source is always
/// one), sorted by bits per weight, highest first.
///
/// # Errors
/// [`FrontierError::Quant`].
pub fn prepare_arms(
    plan: &FrontierPlan,
    progress: &mut dyn FnMut(FrontierProgress),
) -> Result<Arms, FrontierError> {
    arms_of(plan, true, progress)
}

/// The arms that exist already (the source and cached arms), without quantizing;
/// for reading the table back.
///
/// # Errors
/// [`FrontierError::Quant`].
pub fn existing_arms(plan: &FrontierPlan) -> Result<Arms, FrontierError> {
    arms_of(plan, false, &mut |_| {})
}

fn arms_of(
    plan: &FrontierPlan,
    make: bool,
    progress: &mut dyn FnMut(FrontierProgress),
) -> Result<Arms, FrontierError> {
    progress(FrontierProgress::Preparing {
        what: format!("hashing {}", plan.source.display()),
    });
    let source = Source::open(&plan.source)?;
    let mut arms: Vec<ArmInfo> = Vec::new();
    let mut types: Vec<Option<QuantType>> = plan.arms.iter().copied().map(Some).collect();
    if !plan.arms.iter().any(|t| t.name() == source.facts.quant) {
        types.insert(0, None); // the source, of a type outside the grid
    }
    for t in types {
        let arm = match t {
            None => source_arm(&source),
            Some(t) => match source.cached(t)? {
                Some(a) => a,
                None if !make => continue,
                None => {
                    progress(FrontierProgress::Preparing {
                        what: format!("quantizing {} → {t}", source.facts.quant),
                    });
                    source.arm(t, plan.n_threads)?
                }
            },
        };
        let facts = crate::probe::model::ModelFacts::open(&arm.path)?;
        // An MLX arm streams what its arrays give by the rule of every engine's
        // rows (measured when the arm was made); a llama.cpp arm, its GGUF's facts.
        let streamed_bytes = match arm.mlx_engine() {
            Some(_) => arm.streamed_bytes.ok_or_else(|| {
                crate::experiments::frontier::quant::QuantError::Sidecar {
                    path: arm.sidecar_path().display().to_string(),
                    problem: "an MLX arm without streamed_bytes (made before they were kept)"
                        .into(),
                }
            })?,
            None => facts.streamed_bytes.0,
        };
        arms.push(ArmInfo {
            arm,
            streamed_bytes,
        });
    }
    arms.sort_by(|a, b| b.arm.bits_per_weight.total_cmp(&a.arm.bits_per_weight));
    Ok(Arms { source, arms })
}

fn source_arm(s: &Source) -> Arm {
    let b = if s.facts.n_params == 0 {
        f64::NAN
    } else {
        s.facts.tensor_bytes.0 as f64 * 8.0 / s.facts.n_params as f64
    };
    Arm {
        key: String::new(),
        quant: s.facts.quant.clone(),
        path: s.path.clone(),
        sha256: s.sha256.clone(),
        file_bytes: s.facts.file_bytes.0,
        streamed_bytes: None,
        bits_per_weight: b,
        source_path: s.path.clone(),
        source_sha256: s.sha256.clone(),
        source_quant: s.facts.quant.clone(),
        source_bits_per_weight: b,
        relation: Relation::Source,
        made_at: String::new(),
        quantize_ns: 0,
        engine_build: String::new(),
    }
}

/// The settings identity of every cell of `plan` for `arm`: `(measure name, config JSON)`.
///
/// # Errors
/// [`FrontierError::Catalog`] when a dataset is not fetched.
pub fn cell_configs(
    plan: &FrontierPlan,
    source: &Source,
    arm: &ArmInfo,
) -> Result<Vec<(Measure, String, serde_json::Value)>, FrontierError> {
    let cat = crate::probe::datasets::Datasets::builtin()?;
    let mut out = Vec::new();
    for m in plan.measures() {
        let (data_sha, ref_sha) = match &m {
            Measure::Speed => (None, None),
            Measure::Ppl(c) => {
                let d = cat.get(&c.dataset)?;
                let refsha =
                    (plan.kld && arm.is_reference_target(source)).then(|| source.sha256.clone());
                (Some(d.sha256.clone()), refsha)
            }
            Measure::Task(k, _) => (Some(cat.get(k.name())?.sha256.clone()), None),
        };
        let mut cfg = config_json(&m, plan, data_sha.as_deref(), ref_sha.as_deref());
        // An MLX arm's file is the source's: the engine tells its cells apart.
        if let (Some(e), Some(o)) = (arm.arm.mlx_engine(), cfg.as_object_mut()) {
            o.insert("engine".into(), e.name().into());
        }
        out.push((m.clone(), m.name(), cfg));
    }
    Ok(out)
}

/// Reads the table rows of `arms` from the store (no measuring).
///
/// # Errors
/// Store and catalogue errors.
pub async fn load_rows(
    store: &Store,
    plan: &FrontierPlan,
    source: &Source,
    arms: &[ArmInfo],
) -> Result<Vec<table::FrontierRow>, FrontierError> {
    let mut rows = Vec::new();
    for a in arms {
        let mut cells = Vec::new();
        let mut energy = None;
        for (m, name, cfg) in cell_configs(plan, source, a)? {
            let c = find_cell(store, &a.arm.sha256, &name, &config_key(&name, &cfg)).await?;
            if let (Measure::Speed, Some(c)) = (&m, &c) {
                energy = Some(store::speed_energy(store, c.run_id).await?);
            }
            cells.push((m, c));
        }
        let mut row = table::FrontierRow::from_cells(a, &cells);
        row.energy = energy.filter(|_| row.speed.is_some());
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(feature = "llama")]
mod run;
#[cfg(feature = "llama")]
pub use run::{frontier_job, run_frontier};

/// Parsed speed summary of a speed cell.
pub fn speed_of(c: &FrontierCell) -> Option<SpeedSummary> {
    serde_json::from_value(c.result.clone()).ok()
}

/// Parsed perplexity result of a ppl cell.
pub fn ppl_of(c: &FrontierCell) -> Option<PplResult> {
    serde_json::from_value(c.result.clone()).ok()
}

/// Parsed task result (without items) of a task cell.
pub fn task_of(c: &FrontierCell) -> Option<TaskResult> {
    serde_json::from_value(c.result.clone()).ok()
}
