//! Running the grid: each arm's cells on the arm's engine (llama.cpp, or MLX for an
//! MLX arm), opened through the engine seam.

use super::{
    ArmInfo, Arms, CellContext, FrontierError, FrontierOutcome, FrontierPlan, FrontierProgress,
    Measure, NewCell, SpeedSummary, cell_configs, config_key, find_cell, load_rows, prepare_arms,
    store::store_cell,
};
use crate::experiments::bench::{BenchError, BenchPlan, Progress, RunContext};
use crate::measure::engine::{
    ALL_LAYERS, BoxedEngine, EngineConfig, EngineError, EngineKind, Model, TokenId, Vocab,
};
use crate::measure::evals::EvalError;
use crate::measure::evals::ppl::{PplConfig, perplexity};
use crate::measure::evals::tasks::{self, TaskConfig, TaskItem, TaskKind};
use crate::probe::datasets::Datasets;
use crate::probe::model::CacheType;
use crate::roofline::MachineRoof;
use crate::store::Store;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn eval_err(e: EvalError) -> FrontierError {
    match e {
        EvalError::Cancelled => FrontierError::Cancelled,
        e => FrontierError::Eval(e),
    }
}

fn bench_err(e: BenchError) -> FrontierError {
    match e {
        BenchError::Cancelled => FrontierError::Cancelled,
        e => FrontierError::Bench(e),
    }
}

/// Runs every cell of `plan` that is not stored yet, storing each in its own
/// transaction, then reads the whole table back. `roof` gives the ceilings of the
/// speed cells (see [`crate::experiments::machine_roof::machine_roof`]). Raising `cancel` stops at the
/// next step; finished cells stay stored, the cell in progress is dropped.
///
/// # Errors
/// [`FrontierError`]; [`FrontierError::Cancelled`] after a cancel.
pub async fn run_frontier(
    store: &Store,
    plan: FrontierPlan,
    roof: MachineRoof,
    command: String,
    progress: impl FnMut(FrontierProgress) + Send + 'static,
    cancel: Arc<AtomicBool>,
) -> Result<FrontierOutcome, FrontierError> {
    plan.validate()?;
    let store = store.clone();
    let rt = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        run_blocking(&rt, &store, &plan, &roof, &command, progress, &cancel)
    })
    .await
    .map_err(|e| FrontierError::Plan(format!("the frontier task failed: {e}")))?
}

/// The frontier job (`memwall frontier`): refuses battery before STREAM runs (each
/// cell checks again, with its memory fit), takes the roof of the speed cells
/// (STREAM and compute peaks measured now at the plan's threads, or with
/// `reuse_stream` the latest stored ones), then [`run_frontier`]. A plan without
/// speed cells measures no roof: its bandwidth stays NaN, which no cell reads.
///
/// # Errors
/// As [`run_frontier`]; [`FrontierError::Roof`] when the roof cannot be measured or
/// none is stored.
pub async fn frontier_job(
    store: &Store,
    plan: FrontierPlan,
    reuse_stream: bool,
    command: String,
    mut progress: impl FnMut(FrontierProgress) + Send + 'static,
    cancel: Arc<AtomicBool>,
) -> Result<FrontierOutcome, FrontierError> {
    crate::measure::guard::Guard::begin(plan.guard)?;
    let roof = if plan.speed {
        if !reuse_stream {
            progress(FrontierProgress::Preparing {
                what: "measuring bandwidth (STREAM) and compute peaks for the ceilings…".into(),
            });
        }
        let host = crate::probe::hw::host_info();
        crate::experiments::machine_roof::machine_roof(
            store,
            &host,
            plan.n_threads as usize,
            reuse_stream,
            &command,
        )
        .await
        .map_err(|e| FrontierError::Roof(Box::new(e)))?
        .roof
    } else {
        MachineRoof {
            bandwidth: crate::units::Gbps(f64::NAN),
            stream_id: 0,
            read_bandwidth: None,
            peak_f32: None,
            peak_int8: None,
            gpu: None,
        }
    };
    run_frontier(store, plan, roof, command, progress, cancel).await
}

fn run_blocking(
    rt: &tokio::runtime::Handle,
    store: &Store,
    plan: &FrontierPlan,
    roof: &MachineRoof,
    command: &str,
    mut progress: impl FnMut(FrontierProgress),
    cancel: &AtomicBool,
) -> Result<FrontierOutcome, FrontierError> {
    let host = crate::probe::hw::host_info();
    // Fail fast on missing data, before quantizing anything.
    let cat = Datasets::builtin()?;
    for p in &plan.ppl {
        cat.get(&p.dataset)?.require()?;
    }
    for (k, _) in &plan.tasks {
        cat.get(k.name())?.require()?;
    }
    let Arms { source, arms } = prepare_arms(plan, &mut progress)?;
    let cx = CellContext {
        store,
        host: &host,
        source: &source,
        command,
        n_threads: plan.n_threads,
    };
    let n_measures = plan.measures().len();
    let total = arms.len() * n_measures;
    let mut state = State::default();
    let (mut measured, mut skipped) = (0, 0);
    for (ai, arm) in arms.iter().enumerate() {
        let mut handle: Option<Model> = None;
        for (mi, (m, name, cfg)) in cell_configs(plan, &source, arm)?.into_iter().enumerate() {
            if cancel.load(Ordering::Relaxed) {
                return Err(FrontierError::Cancelled);
            }
            let key = config_key(&name, &cfg);
            if !plan.remeasure.contains(&name)
                && rt
                    .block_on(find_cell(store, &arm.arm.sha256, &name, &key))?
                    .is_some()
            {
                progress(FrontierProgress::Skipped {
                    arm: arm.arm.quant.clone(),
                    measure: name,
                });
                skipped += 1;
                continue;
            }
            progress(FrontierProgress::Started {
                arm: arm.arm.quant.clone(),
                measure: name.clone(),
                index: ai * n_measures + mi + 1,
                total,
            });
            let started_at = crate::util::now_rfc3339();
            let guard = guard_cell(plan, &source, arm, &m)?;
            let mut cell = match &m {
                Measure::Speed => measure_speed(plan, arm, &host, roof, cancel, &mut progress)?,
                Measure::Ppl(c) => {
                    let mut mk = |cfg: &EngineConfig| cell_engine(&mut handle, arm, cfg);
                    measure_ppl(
                        plan,
                        &source,
                        arm,
                        &mut mk,
                        c,
                        &mut state,
                        cancel,
                        &mut progress,
                    )?
                }
                Measure::Task(k, c) => {
                    let mut mk = |cfg: &EngineConfig| cell_engine(&mut handle, arm, cfg);
                    let mut cell =
                        measure_task(plan, &mut mk, *k, c, &mut state, cancel, &mut progress)?;
                    // The task prompts went through the one prompt path: a model
                    // without a template got the fallback, and the cell's run says so.
                    if let Some(m) = &handle {
                        cell.note = m
                            .tokenizer()
                            .chat_format()
                            .map_err(|e| eval_err(EvalError::from(EngineError::from(e))))?
                            .fallback_note(&arm.arm.path.display().to_string());
                    }
                    cell
                }
            };
            cell.measure = name.clone();
            cell.config = cfg;
            cell.started_at = started_at;
            cell.guard = Some(guard.finish());
            let summary = summary_of(&cell);
            rt.block_on(store_cell(&cx, arm, cell))?;
            progress(FrontierProgress::Stored {
                arm: arm.arm.quant.clone(),
                measure: name,
                summary,
            });
            measured += 1;
        }
    }
    let rows = rt.block_on(load_rows(store, plan, &source, &arms))?;
    Ok(FrontierOutcome {
        arms,
        measured,
        skipped,
        rows,
    })
}

/// Context of a task cell's engine, tokens.
const TASK_N_CTX: u32 = 4096;

/// Starts the guard for one cell: refuses battery unless allowed, and checks the arm
/// (with the source as KLD reference for a perplexity cell of another arm) fits with
/// the cell's context.
fn guard_cell(
    plan: &FrontierPlan,
    source: &crate::experiments::frontier::quant::Source,
    arm: &ArmInfo,
    m: &Measure,
) -> Result<crate::measure::guard::Guard, FrontierError> {
    let mut guard = crate::measure::guard::Guard::begin(plan.guard)?;
    // An MLX arm of a file holds its own arrays (8-bit of a 4-bit file is larger).
    let held = arm.arm.engine_kind().held_as();
    let facts = crate::probe::model::ModelFacts::open_held(&arm.arm.path, held)?;
    let n_ctx = match m {
        Measure::Speed => (plan.n_prompt + plan.n_gen) as u64,
        Measure::Ppl(c) => c.n_ctx as u64,
        Measure::Task(..) => TASK_N_CTX as u64,
    };
    let with_ref = matches!(m, Measure::Ppl(_)) && plan.kld && arm.is_reference_target(source);
    if with_ref {
        guard.check_fit(&[(&facts, n_ctx), (&source.facts, n_ctx)], CacheType::F16)?;
    } else {
        guard.check_fit(&[(&facts, n_ctx)], CacheType::F16)?;
    }
    Ok(guard)
}

/// Caches shared across cells: the tokenized texts, the task items, the reference model.
#[derive(Default)]
struct State {
    tokens: HashMap<String, (Vec<TokenId>, String)>,
    items: HashMap<TaskKind, Vec<TaskItem>>,
    reference: Option<Model>,
}

/// The engine of one cell of `arm`, from the arm's model opened once per arm into
/// `h` (llama.cpp on the arm's file, a context per cell; an MLX arm's source loaded
/// into MLX at the arm's precision with `cfg`'s context and batch).
fn cell_engine(
    h: &mut Option<Model>,
    arm: &ArmInfo,
    cfg: &EngineConfig,
) -> Result<BoxedEngine, FrontierError> {
    let model = match h {
        Some(m) => m,
        None => h.insert(Model::load(arm.arm.engine_kind(), &arm.arm.path, cfg)?),
    };
    Ok(model.take_engine(cfg)?)
}

fn summary_of(c: &NewCell) -> String {
    match (c.value, c.value_unc, c.ci) {
        (Some(v), _, Some((lo, hi))) => format!(
            "{:.1}% [{:.1}, {:.1}] (n={})",
            v * 100.0,
            lo * 100.0,
            hi * 100.0,
            c.n.unwrap_or(0)
        ),
        (Some(v), Some(u), None) => format!("{v:.4} ± {u:.4} (n={})", c.n.unwrap_or(0)),
        (Some(v), None, None) => format!("{v:.4}"),
        _ => "—".into(),
    }
}

fn new_cell(result: serde_json::Value) -> NewCell {
    NewCell {
        measure: String::new(),
        config: serde_json::Value::Null,
        value: None,
        value_unc: None,
        ci: None,
        n: None,
        result,
        items: vec![],
        bench: vec![],
        started_at: String::new(),
        guard: None,
        sampled: None,
        note: None,
    }
}

fn measure_speed(
    plan: &FrontierPlan,
    arm: &ArmInfo,
    host: &crate::probe::hw::HostInfo,
    roof: &MachineRoof,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(FrontierProgress),
) -> Result<NewCell, FrontierError> {
    let bp = BenchPlan {
        models: vec![arm.arm.path.clone()],
        n_prompt: vec![plan.n_prompt],
        n_gen: vec![plan.n_gen],
        n_depth: vec![0],
        n_seqs: vec![1],
        n_threads: vec![plan.n_threads],
        reps: plan.reps,
        allow_battery: plan.guard.allow_battery,
        skip_capacity_check: plan.guard.skip_capacity_check,
        engines: arm.arm.mlx_engine().into_iter().collect(),
        ..BenchPlan::llama_bench_defaults()
    }
    .validate()
    .map_err(bench_err)?;
    let rcx = RunContext {
        plan: &bp,
        host,
        roof,
        run_id: 0,
        cancel,
    };
    let of = 2 * (plan.reps as usize + 1);
    let mut done = 0;
    // The sampler beside the cell, as beside `memwall bench`: each test's timed part
    // is a phase; it stops as soon as the tests end.
    let sampler = plan
        .sampler
        .then(crate::experiments::live::job::RunSampler::start);
    let mut observe = sampler.as_ref().map(|s| s.observer());
    let recs = crate::experiments::bench::run_plan(&rcx, &mut |p| {
        if let Some(o) = observe.as_mut() {
            o(&p);
        }
        if let Progress::Repetition { .. } = p {
            done += 1;
            progress(FrontierProgress::Step { done, of });
        }
    });
    drop(observe);
    let sampled = sampler.map(|s| s.stop());
    let mut recs = recs.map_err(bench_err)?;
    if let Some((rec, phases)) = &sampled {
        crate::experiments::live::flag_contended(rec, &mut recs, phases);
    }
    let pp = recs.iter().find(|r| r.n_prompt > 0);
    let tg = recs.iter().find(|r| r.is_decode());
    let (Some(pp), Some(tg)) = (pp, tg) else {
        return Err(FrontierError::Plan(
            "the speed plan produced no pp or tg row".into(),
        ));
    };
    let s = SpeedSummary {
        tg_tps: tg.avg_ts,
        tg_std: tg.stddev_ts,
        tg_n: tg.samples_ns.len(),
        tg_ceiling: tg.ceiling_ts,
        tg_achieved: tg.achieved,
        pp_tps: pp.avg_ts,
        pp_std: pp.stddev_ts,
        pp_ceiling: pp.ceiling_ts,
        pp_achieved: pp.achieved,
        bandwidth_gbps: tg.bandwidth_gbps,
        bench_ids: vec![],
    };
    let mut c = new_cell(serde_json::to_value(&s).expect("serialize"));
    c.value = Some(s.tg_tps);
    c.value_unc = Some(s.tg_std);
    c.n = Some(s.tg_n as i64);
    c.bench = recs;
    c.sampled = sampled;
    Ok(c)
}

fn ppl_engine_cfg(plan: &FrontierPlan, c: &PplConfig) -> EngineConfig {
    EngineConfig {
        n_ctx: c.n_ctx,
        n_batch: c.n_ctx,
        n_ubatch: c.n_ctx.min(512),
        n_threads: plan.n_threads,
        n_threads_batch: plan.n_threads,
        n_gpu_layers: ALL_LAYERS,
        n_seq_max: 1,
        ..Default::default()
    }
}

#[allow(clippy::too_many_arguments)]
fn measure_ppl(
    plan: &FrontierPlan,
    source: &crate::experiments::frontier::quant::Source,
    arm: &ArmInfo,
    engine: &mut dyn FnMut(&EngineConfig) -> Result<BoxedEngine, FrontierError>,
    c: &PplConfig,
    state: &mut State,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(FrontierProgress),
) -> Result<NewCell, FrontierError> {
    let ecfg = ppl_engine_cfg(plan, c);
    let mut e = engine(&ecfg)?;
    if !state.tokens.contains_key(&c.dataset) {
        let entry = Datasets::builtin()?.get(&c.dataset)?.clone();
        let path = entry.require()?;
        let sha = crate::util::sha256_file(&path)?;
        if sha != entry.sha256 {
            return Err(FrontierError::Plan(format!(
                "{}: sha256 {sha} differs from the catalogue's {}; delete it and run `memwall datasets fetch {}`",
                path.display(),
                entry.sha256,
                entry.name
            )));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| crate::util::with_path(e, &path))?;
        state
            .tokens
            .insert(c.dataset.clone(), (e.tokenize(&text, true)?, sha));
    }
    let (tokens, sha) = &state.tokens[&c.dataset];
    let with_ref = plan.kld && arm.is_reference_target(source);
    let mut step = |d: u32, n: u32| {
        progress(FrontierProgress::Step {
            done: d as usize,
            of: n as usize,
        })
    };
    let res = if with_ref {
        let reference = match &mut state.reference {
            Some(m) => m,
            None => state
                .reference
                .insert(Model::load(EngineKind::Llama, &source.path, &ecfg)?),
        };
        let mut r = reference.take_engine(&ecfg)?;
        perplexity(&mut e, Some(&mut r), tokens, sha, c, cancel, &mut step)
    } else {
        perplexity::<BoxedEngine, BoxedEngine>(&mut e, None, tokens, sha, c, cancel, &mut step)
    }
    .map_err(eval_err)?;
    let mut cell = new_cell(serde_json::to_value(&res).expect("serialize"));
    cell.value = Some(res.ppl);
    cell.value_unc = Some(res.ppl_unc);
    cell.n = Some(res.n_scored as i64);
    Ok(cell)
}

fn measure_task(
    plan: &FrontierPlan,
    engine: &mut dyn FnMut(&EngineConfig) -> Result<BoxedEngine, FrontierError>,
    k: TaskKind,
    c: &TaskConfig,
    state: &mut State,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(FrontierProgress),
) -> Result<NewCell, FrontierError> {
    if let std::collections::hash_map::Entry::Vacant(e) = state.items.entry(k) {
        let path = Datasets::builtin()?.get(k.name())?.require()?;
        e.insert(tasks::load(k, &path).map_err(eval_err)?);
    }
    let items = &state.items[&k];
    let ecfg = EngineConfig {
        n_ctx: TASK_N_CTX,
        n_batch: 512,
        n_ubatch: 512,
        n_threads: plan.n_threads,
        n_threads_batch: plan.n_threads,
        n_gpu_layers: ALL_LAYERS,
        n_seq_max: 1,
        ..Default::default()
    };
    let mut e = engine(&ecfg)?;
    let res = tasks::run_task(&mut e, k, items, c, cancel, &mut |d, n| {
        progress(FrontierProgress::Step { done: d, of: n })
    })
    .map_err(eval_err)?;
    let mut v = serde_json::to_value(&res).expect("serialize");
    if let Some(o) = v.as_object_mut() {
        o.remove("items"); // stored row by row in frontier_items
        o.insert(
            "item_ids".into(),
            res.items
                .iter()
                .map(|i| i.id.clone())
                .collect::<Vec<_>>()
                .into(),
        );
    }
    let mut cell = new_cell(v);
    cell.value = Some(res.accuracy);
    cell.ci = Some((res.ci_low, res.ci_high));
    cell.n = Some(res.n as i64);
    cell.items = res.items;
    Ok(cell)
}
