//! Running a plan on the llama.cpp engine. The timing loops ([`measure_instance`])
//! are generic over [`Engine`]; only model loading is llama.cpp-specific.

use super::{
    BenchError, BenchPlan, Instance, Measured, ModelRun, Progress, RunContext, check_capacity,
    make_record,
};
use crate::measure::engine::llama::LlamaModelHandle;
use crate::measure::engine::{BatchItem, Engine, EngineConfig, EngineError, TokenId};
use crate::probe::hw;
use crate::probe::model::ModelFacts;
use crate::store::record::BenchRecord;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Runs every instance of the plan; returns one record per instance, in order.
/// `on_progress` sees loading, per-repetition and per-test events (a finished test's
/// record arrives as soon as it is measured, so a UI can show live rows).
///
/// # Errors
/// [`BenchError`] for a model that cannot be read, does not fit, or fails in the
/// engine, and [`BenchError::Cancelled`] when the cancel flag is raised.
pub fn run_plan(
    cx: &RunContext<'_>,
    on_progress: &mut dyn FnMut(Progress),
) -> Result<Vec<BenchRecord>, BenchError> {
    let plan = cx.plan;
    plan.validate()?;
    let instances = plan.instances();
    let total = instances.len();
    let mut records = Vec::with_capacity(total);
    for (mi, path) in plan.models.iter().enumerate() {
        let mine: Vec<(usize, Instance)> = instances
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, i)| i.model == mi)
            .collect();
        if mine.is_empty() {
            continue;
        }
        let facts = ModelFacts::open(path)?;
        let max_ctx = mine
            .iter()
            .map(|(_, i)| i.n_ctx() as u64)
            .max()
            .unwrap_or(0);
        if plan.engine_list().contains(&super::BenchEngine::Llama) {
            check_capacity(&facts, max_ctx, plan.type_k, plan.skip_capacity_check)?;
        }
        let sha256 = crate::util::sha256_file(path)?;
        let mr = ModelRun { facts, sha256 };
        for (ei, &which) in plan.engine_list().iter().enumerate() {
            on_progress(Progress::Loading {
                model: path.display().to_string(),
            });
            let offset = ei * total;
            if which == super::BenchEngine::Llama {
                let handle = LlamaModelHandle::load(path, plan.n_gpu_layers)?;
                run_llama(
                    cx,
                    &mr,
                    &handle,
                    &mine,
                    offset,
                    total,
                    &mut records,
                    on_progress,
                )?;
            } else {
                run_mlx(
                    cx,
                    &mr,
                    path,
                    which,
                    &mine,
                    offset,
                    total,
                    &mut records,
                    on_progress,
                )?;
            }
        }
    }
    Ok(records)
}

/// The instances `mine` of one model on llama.cpp.
#[allow(clippy::too_many_arguments)]
fn run_llama(
    cx: &RunContext<'_>,
    mr: &ModelRun,
    handle: &LlamaModelHandle,
    mine: &[(usize, Instance)],
    offset: usize,
    total: usize,
    records: &mut Vec<BenchRecord>,
    on_progress: &mut dyn FnMut(Progress),
) -> Result<(), BenchError> {
    let plan = cx.plan;
    let total = total * plan.engine_list().len();
    {
        for &(index, inst) in mine {
            let index = index + offset;
            if cx.cancel.load(Ordering::Relaxed) {
                return Err(BenchError::Cancelled);
            }
            on_progress(Progress::TestStarted {
                index,
                total,
                label: inst.label(),
            });
            let cfg = EngineConfig {
                n_ctx: inst.n_ctx(),
                n_batch: plan.n_batch,
                n_ubatch: plan.n_ubatch,
                n_threads: inst.n_threads,
                n_threads_batch: inst.n_threads,
                n_gpu_layers: plan.n_gpu_layers,
                n_seq_max: inst.n_seqs,
                type_k: plan.type_k,
                type_v: plan.type_v,
                flash_attn: plan.flash_attn,
            };
            let mut engine = handle.engine(&cfg)?;
            let before = hw::live_state();
            let test_time = crate::util::now_rfc3339();
            let samples = measure_instance(
                &mut engine,
                &inst,
                plan,
                plan.seed ^ index as u64,
                cx.cancel,
                &mut |rep| {
                    on_progress(Progress::Repetition {
                        index,
                        rep,
                        reps: plan.reps,
                    })
                },
            )?;
            let after = hw::live_state();
            let measured = Measured {
                engine: engine.info(),
                samples_ns: samples,
                test_time,
                before,
                after,
            };
            let rec = make_record(cx, mr, &inst, measured);
            on_progress(Progress::TestDone {
                record: Box::new(rec.clone()),
            });
            records.push(rec);
        }
    }
    Ok(())
}

/// The instances `mine` of one model on MLX: one model load (weights requantized
/// as `which` says), a fresh KV cache per instance. The roofline's bytes are the
/// bytes of the arrays MLX holds ([`crate::measure::engine::mlx::MlxEngine::weight_bytes`]),
/// not the GGUF's. A row's `n_threads` is the engine's lanes (MLX CPU streams,
/// [`crate::measure::engine::mlx::weights::n_lanes`]), not the plan's.
#[allow(clippy::too_many_arguments)]
#[cfg(feature = "mlx")]
fn run_mlx(
    cx: &RunContext<'_>,
    mr: &ModelRun,
    path: &std::path::Path,
    which: super::BenchEngine,
    mine: &[(usize, Instance)],
    offset: usize,
    total: usize,
    records: &mut Vec<BenchRecord>,
    on_progress: &mut dyn FnMut(Progress),
) -> Result<(), BenchError> {
    use crate::measure::engine::mlx::{MlxEngine, MlxQuant};
    use crate::units::Bytes;
    let plan = cx.plan;
    let total = total * plan.engine_list().len();
    let quant = match which {
        super::BenchEngine::Mlx8bit => MlxQuant::Q8,
        super::BenchEngine::MlxF16 => MlxQuant::F16,
        _ => MlxQuant::Q4,
    };
    let n_ctx = mine.iter().map(|(_, i)| i.n_ctx()).max().unwrap_or(0);
    // The file's size says little about what MLX holds (8-bit or f16 of a 4-bit
    // file): the guard sizes the arm's own arrays and loading's peak.
    check_capacity(
        &crate::probe::model::ModelFacts::open_held(path, which.held_as())?,
        n_ctx as u64,
        plan.type_k,
        plan.skip_capacity_check,
    )?;
    let mut engine = MlxEngine::load(path, quant, n_ctx, plan.n_batch)?;
    let held = Bytes(engine.weight_bytes());
    let mut facts = mr.facts.clone();
    facts.tensor_bytes = held;
    facts.streamed_bytes = held;
    facts.quant = quant.name().into();
    let mr = ModelRun {
        facts,
        sha256: mr.sha256.clone(),
    };
    for &(index, inst) in mine {
        let index = index + offset;
        if cx.cancel.load(Ordering::Relaxed) {
            return Err(BenchError::Cancelled);
        }
        on_progress(Progress::TestStarted {
            index,
            total,
            label: inst.label(),
        });
        let before = hw::live_state();
        let test_time = crate::util::now_rfc3339();
        let samples = measure_instance(
            &mut engine,
            &inst,
            plan,
            plan.seed ^ index as u64,
            cx.cancel,
            &mut |rep| {
                on_progress(Progress::Repetition {
                    index,
                    rep,
                    reps: plan.reps,
                })
            },
        )?;
        let after = hw::live_state();
        let measured = Measured {
            engine: engine.info(),
            samples_ns: samples,
            test_time,
            before,
            after,
        };
        // MLX's threads are its lanes (one CPU stream each), not the plan's.
        let lanes = crate::measure::engine::mlx::weights::n_lanes() as u32;
        let rec = make_record(
            cx,
            &mr,
            &Instance {
                n_threads: lanes,
                ..inst
            },
            measured,
        );
        on_progress(Progress::TestDone {
            record: Box::new(rec.clone()),
        });
        records.push(rec);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
#[cfg(not(feature = "mlx"))]
fn run_mlx(
    _cx: &RunContext<'_>,
    _mr: &ModelRun,
    _path: &std::path::Path,
    _which: super::BenchEngine,
    _mine: &[(usize, Instance)],
    _offset: usize,
    _total: usize,
    _records: &mut Vec<BenchRecord>,
    _on_progress: &mut dyn FnMut(Progress),
) -> Result<(), BenchError> {
    Err(BenchError::Plan(
        "this memwall was built without the MLX engine: run scripts/setup-mlx.sh, then build with `--features mlx`".into(),
    ))
}

/// Synthetic prompt tokens as llama-bench makes them: BOS first when the model adds
/// one, then uniformly random ids.
fn synth_tokens(
    rng: &mut ChaCha8Rng,
    n: usize,
    n_vocab: usize,
    bos: Option<TokenId>,
) -> Vec<TokenId> {
    (0..n)
        .map(|i| match (i, bos) {
            (0, Some(b)) => b,
            _ => rng.random_range(0..n_vocab as TokenId),
        })
        .collect()
}

/// Fills the KV cache of every sequence of `inst` to its depth: from the engine's
/// snapshot when one exists (single sequence), otherwise by prefilling (and then
/// taking a snapshot).
fn fill_depth<E: Engine>(
    engine: &mut E,
    inst: &Instance,
    rng: &mut ChaCha8Rng,
    n_vocab: usize,
    bos: Option<TokenId>,
    have_snapshot: &mut bool,
) -> Result<(), EngineError> {
    if inst.n_depth == 0 {
        return Ok(());
    }
    if inst.n_seqs == 1 && *have_snapshot {
        return engine.restore_seq_state(0);
    }
    for s in 0..inst.n_seqs as i32 {
        let toks = synth_tokens(rng, inst.n_depth as usize, n_vocab, bos);
        engine.prefill(&toks, 0, s, false)?;
    }
    engine.synchronize();
    if inst.n_seqs == 1 {
        *have_snapshot = engine.save_seq_state(0).is_ok();
    }
    Ok(())
}

/// Measures one instance: a warm-up, then `plan.reps` timed repetitions. Returns
/// the time of each repetition in nanoseconds. `on_rep` is called after the
/// warm-up (0) and each repetition (1-based).
///
/// # Errors
/// Engine errors, or [`BenchError::Cancelled`].
pub fn measure_instance<E: Engine>(
    engine: &mut E,
    inst: &Instance,
    plan: &BenchPlan,
    seed: u64,
    cancel: &std::sync::atomic::AtomicBool,
    on_rep: &mut dyn FnMut(u32),
) -> Result<Vec<u64>, BenchError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n_vocab = engine.n_vocab();
    let bos = engine.bos();
    let b = inst.n_seqs as i32;
    // Warm-up (not counted): a full prompt, or one decode step per sequence.
    engine.kv_clear();
    if inst.n_prompt > 0 {
        let toks = synth_tokens(&mut rng, inst.n_prompt as usize, n_vocab, bos);
        engine.prefill(&toks, 0, 0, true)?;
    } else {
        let items: Vec<BatchItem> = (0..b)
            .map(|s| BatchItem {
                token: bos.unwrap_or(0),
                pos: 0,
                seq: s,
                logits: true,
            })
            .collect();
        engine.decode(&items)?;
    }
    engine.synchronize();
    on_rep(0);
    let mut have_snapshot = false;
    let mut samples = Vec::with_capacity(plan.reps as usize);
    for rep in 1..=plan.reps {
        if cancel.load(Ordering::Relaxed) {
            return Err(BenchError::Cancelled);
        }
        engine.kv_clear();
        fill_depth(engine, inst, &mut rng, n_vocab, bos, &mut have_snapshot)?;
        let d = inst.n_depth;
        let ns = if inst.n_prompt > 0 {
            let toks = synth_tokens(&mut rng, inst.n_prompt as usize, n_vocab, bos);
            let t0 = Instant::now();
            engine.prefill(&toks, d, 0, true)?;
            engine.synchronize();
            t0.elapsed().as_nanos() as u64
        } else {
            // Pre-draw every token so the timed loop does no RNG work.
            let mut next: Vec<TokenId> = (0..inst.n_gen as usize * b as usize)
                .map(|_| rng.random_range(0..n_vocab as TokenId))
                .collect();
            for s in 0..b as usize {
                next[s] = bos.unwrap_or(next[s]);
            }
            let mut items = vec![
                BatchItem {
                    token: 0,
                    pos: 0,
                    seq: 0,
                    logits: true
                };
                b as usize
            ];
            let t0 = Instant::now();
            for i in 0..inst.n_gen {
                for s in 0..b as usize {
                    items[s] = BatchItem {
                        token: next[i as usize * b as usize + s],
                        pos: d + i,
                        seq: s as i32,
                        logits: true,
                    };
                }
                engine.decode(&items)?;
                engine.synchronize();
                if cancel.load(Ordering::Relaxed) {
                    return Err(BenchError::Cancelled);
                }
            }
            t0.elapsed().as_nanos() as u64
        };
        samples.push(ns.max(1));
        on_rep(rep);
    }
    Ok(samples)
}
