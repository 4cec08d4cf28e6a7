//! Running a plan on any engine: one loop ([`run_on`]) over the engine seam
//! ([`crate::measure::engine::Model`]); the timing loops ([`measure_instance`]) are
//! generic over [`Engine`].

use super::{
    BenchError, BenchPlan, Instance, Measured, ModelRun, Progress, RunContext, check_capacity,
    make_record,
};
use crate::measure::engine::{
    BatchItem, Engine, EngineConfig, EngineError, EngineKind, Model, TokenId,
};
use crate::measure::sampler::session::TimedSpan;
use crate::probe::hw;
use crate::probe::model::{HeldAs, ModelFacts};
use crate::store::record::BenchRecord;
use crate::units::Bytes;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Runs every instance of the plan on each of its engines; returns one record per
/// instance and engine, in order. `on_progress` sees loading, per-repetition and
/// per-test events (a finished test's record arrives as soon as it is measured, so
/// a UI can show live rows).
///
/// # Errors
/// [`BenchError`] for a model that cannot be read, does not fit, or fails in the
/// engine, and [`BenchError::Cancelled`] when the cancel flag is raised.
pub fn run_plan(
    cx: &RunContext<'_>,
    on_progress: &mut dyn FnMut(Progress),
) -> Result<Vec<BenchRecord>, BenchError> {
    let plan = cx.plan;
    let instances = plan.instances();
    let engines = plan.engine_list();
    let total = instances.len() * engines.len();
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
        let facts = plan.facts(mi).clone();
        let max_ctx = mine.iter().map(|(_, i)| i.n_ctx()).max().unwrap_or(0);
        if engines.contains(&EngineKind::Llama) {
            check_capacity(
                &facts,
                max_ctx as u64,
                plan.type_k,
                plan.skip_capacity_check,
            )?;
        }
        let sha256 = crate::util::sha256_file(path)?;
        let mr = ModelRun { facts, sha256 };
        for (ei, &kind) in engines.iter().enumerate() {
            on_progress(Progress::Loading {
                model: path.display().to_string(),
            });
            if kind.held_as() != HeldAs::File {
                // The file's size says little about what the engine holds (8-bit or
                // f16 of a 4-bit file): the guard sizes the held arrays and loading's
                // peak.
                check_capacity(
                    &ModelFacts::open_held(path, kind.held_as())?,
                    max_ctx as u64,
                    plan.type_k,
                    plan.skip_capacity_check,
                )?;
            }
            // The largest instance sizes the load (MLX's context is fixed then).
            let sizing = EngineConfig {
                n_ctx: max_ctx,
                ..instance_config(plan, &mine[0].1)
            };
            let mut model = Model::load(kind, path, &sizing)?;
            let offset = ei * instances.len();
            run_on(
                cx,
                &mr,
                &mut model,
                &mine,
                offset,
                total,
                &mut records,
                on_progress,
            )?;
        }
    }
    Ok(records)
}

/// The engine configuration of one instance: llama-bench's per-test context
/// parameters (context for every sequence, the plan's batches, cache types and
/// offload, the instance's threads).
fn instance_config(plan: &BenchPlan, inst: &Instance) -> EngineConfig {
    EngineConfig {
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
        repack: true,
        split: plan.split.clone(),
        kv_unified: false,
    }
}

/// The instances `mine` of one model on `model`'s engine, each on the engine the
/// model gives for its configuration ([`Model::engine`]: a llama.cpp context per
/// instance; MLX's one engine with its caches cleared). Where the engine holds the
/// weights otherwise than the file ([`Engine::held_model`]: MLX's requantized
/// arrays), the roofline's bytes are those a step streams from the arrays it holds
/// (by the rule llama.cpp's rows use: an untied embedding is a one-row gather), the
/// row's quant is the held format, and its `n_threads` the engine's own (MLX's
/// lanes), not the plan's.
#[allow(clippy::too_many_arguments)]
fn run_on(
    cx: &RunContext<'_>,
    mr: &ModelRun,
    model: &mut Model,
    mine: &[(usize, Instance)],
    offset: usize,
    total: usize,
    records: &mut Vec<BenchRecord>,
    on_progress: &mut dyn FnMut(Progress),
) -> Result<(), BenchError> {
    let plan = cx.plan;
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
        let engine = model.engine(&instance_config(plan, &inst))?;
        let before = hw::live_state();
        let test_time = crate::util::now_rfc3339();
        let samples = measure_instance(
            engine,
            &inst,
            plan,
            plan.seed ^ index as u64,
            cx.cancel,
            &mut |rep, timed| {
                on_progress(Progress::Repetition {
                    index,
                    rep,
                    reps: plan.reps,
                    timed,
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
        let rec = match engine.held_model() {
            None => make_record(cx, mr, &inst, measured),
            Some(held) => {
                let mut facts = mr.facts.clone();
                facts.tensor_bytes = Bytes(held.weight_bytes);
                facts.streamed_bytes = Bytes(held.streamed_bytes);
                facts.quant = held.quant.into();
                let mr = ModelRun {
                    facts,
                    sha256: mr.sha256.clone(),
                };
                let inst = Instance {
                    n_threads: held.n_threads,
                    ..inst
                };
                make_record(cx, &mr, &inst, measured)
            }
        };
        on_progress(Progress::TestDone {
            record: Box::new(rec.clone()),
        });
        records.push(rec);
    }
    Ok(())
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
/// warm-up (0, no span) and each repetition (1-based) with its timed span, whose
/// length is exactly the returned sample.
///
/// # Errors
/// Engine errors, or [`BenchError::Cancelled`].
pub fn measure_instance<E: Engine>(
    engine: &mut E,
    inst: &Instance,
    plan: &BenchPlan,
    seed: u64,
    cancel: &std::sync::atomic::AtomicBool,
    on_rep: &mut dyn FnMut(u32, Option<TimedSpan>),
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
    on_rep(0, None);
    let mut have_snapshot = false;
    let mut samples = Vec::with_capacity(plan.reps as usize);
    for rep in 1..=plan.reps {
        if cancel.load(Ordering::Relaxed) {
            return Err(BenchError::Cancelled);
        }
        engine.kv_clear();
        fill_depth(engine, inst, &mut rng, n_vocab, bos, &mut have_snapshot)?;
        let d = inst.n_depth;
        crate::util::epoch();
        let span = if inst.n_prompt > 0 {
            let toks = synth_tokens(&mut rng, inst.n_prompt as usize, n_vocab, bos);
            let t0 = Instant::now();
            engine.prefill(&toks, d, 0, true)?;
            engine.synchronize();
            TimedSpan::between(t0, Instant::now())
        } else {
            // Pre-draw every token so the timed loop does no RNG work.
            let mut next: Vec<TokenId> = (0..inst.n_gen as usize * b as usize)
                .map(|_| rng.random_range(0..n_vocab as TokenId))
                .collect();
            for t in next.iter_mut().take(b as usize) {
                *t = bos.unwrap_or(*t);
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
            TimedSpan::between(t0, Instant::now())
        };
        // The sample is the span's own length (the sampler integrates over the same
        // span); a span shorter than 1 ns is stored as 1 ns.
        let span = TimedSpan {
            end_ns: span.end_ns.max(span.start_ns + 1),
            ..span
        };
        samples.push(span.len_ns());
        on_rep(rep, Some(span));
    }
    Ok(samples)
}
