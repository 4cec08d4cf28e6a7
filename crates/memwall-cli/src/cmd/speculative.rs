//! `memwall spec prompts | gate | bench`: flags → the core speculative jobs →
//! printed tables.

use super::{command_line, open_store, print_guard, resolve_model};
use crate::args::{SpecBenchArgs, SpecCmd, SpecGateArgs, SpecModelArgs, SpecPromptsArgs};
use anyhow::{Context, Result, bail};
use memwall_core::experiments::bench::BenchEngine;
use memwall_core::experiments::speculative::gate::DrafterKind;
use memwall_core::experiments::speculative::job::{
    self, GateJobOptions, PairOptions, PromptSummary, SpecBenchJobOptions, SpecProgress,
};
use memwall_core::experiments::speculative::prompts::Category;
use memwall_core::experiments::speculative::tree::TreeShape;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Runs a spec subcommand.
pub async fn spec(db: &Path, cmd: SpecCmd) -> Result<()> {
    match cmd {
        SpecCmd::Prompts(a) => prompts(a).await,
        SpecCmd::Gate(a) => gate_cmd(db, a).await,
        SpecCmd::Bench(a) => bench_cmd(db, a).await,
    }
}

fn drafters(list: &[String]) -> Result<Vec<DrafterKind>> {
    list.iter()
        .filter(|s| !s.is_empty())
        .map(|s| {
            DrafterKind::parse(s).with_context(|| {
                format!("--drafters: unknown drafter {s:?}: use draft-model or ngram")
            })
        })
        .collect()
}

/// The pair's files: the target, and the draft when the job needs it (so that an
/// n-gram-only run does not ask for a draft that is not fetched).
fn pair(m: &SpecModelArgs, need_draft: bool) -> Result<PairOptions> {
    Ok(PairOptions {
        target: resolve_model(&m.target)?,
        draft: if need_draft {
            Some(resolve_model(&m.draft)?)
        } else {
            None
        },
        prompts: m.prompts.clone(),
        n_threads: m.threads,
        n_gpu_layers: m.ngl,
        engine: BenchEngine::parse(&m.engine)?,
        n_seq: 1,
    })
}

/// Progress on stderr: loads, the gate's prompt counter, the bench's steps with
/// the seconds since the first.
fn progress() -> impl FnMut(SpecProgress) + Send + 'static {
    let mut gate_t0: Option<Instant> = None;
    let mut bench_t0: Option<Instant> = None;
    move |p| match p {
        SpecProgress::Loading {
            target,
            draft,
            n_threads,
            ..
        } => eprintln!(
            "loading target {target}{} ({n_threads} threads)",
            draft.map_or(String::new(), |d| format!(", draft {d}"))
        ),
        SpecProgress::GatePrompt { index, total, id } => {
            gate_t0.get_or_insert_with(Instant::now);
            eprint!("\rgate: prompt {}/{} ({id})        ", index + 1, total);
        }
        SpecProgress::GateDone { total } => eprintln!(
            "\rgate: {total} prompts in {:.0} s                 ",
            gate_t0.map_or(0.0, |t| t.elapsed().as_secs_f64())
        ),
        SpecProgress::SamplingCheck {
            trials,
            sampling,
            k,
        } => eprintln!("sampling check: {trials} runs at {sampling}, k = {k}"),
        SpecProgress::Bench { step } => {
            let t0 = bench_t0.get_or_insert_with(Instant::now);
            eprintln!("[{:>5.0} s] {step}", t0.elapsed().as_secs_f64());
        }
    }
}

/// Ctrl-C ends the process as usual: a job stores only at its end, in one
/// transaction, so an interrupted run leaves nothing behind.
fn no_cancel() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}

fn print_prompt_table(prompts: &[PromptSummary]) {
    println!("| prompt | category | format | n_prompt_tokens |\n|---|---|---|---|");
    for t in prompts {
        println!(
            "| {} | {} | {} | {} |",
            t.id,
            t.category.name(),
            t.format.name(),
            t.n_prompt_tokens
        );
    }
}

async fn prompts(a: SpecPromptsArgs) -> Result<()> {
    let out = job::prompts_job(pair(&a.m, false)?, progress()).await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out.prompts)?);
        return Ok(());
    }
    println!(
        "prompt set {} (sha256 {}), {} prompts; token counts after the target's own chat template ({}):",
        out.prompt_set,
        &out.prompt_set_sha256[..16],
        out.prompts.len(),
        out.target_file
    );
    print_prompt_table(&out.prompts);
    Ok(())
}

async fn gate_cmd(db: &Path, a: SpecGateArgs) -> Result<()> {
    let (tie_tolerance, tie_measured) = match a.tie_tolerance.trim() {
        "measured" => (0.0, true),
        t => (
            t.parse::<f32>().map_err(|_| {
                anyhow::anyhow!(
                    "--tie-tolerance {t}: use `measured` (each k's batch-shape gap) or a number of logits ≥ 0"
                )
            })?,
            false,
        ),
    };
    let opts = GateJobOptions {
        ks: a.k.clone(),
        drafters: drafters(&a.drafters)?,
        max_new: a.max_new,
        limit: a.limit,
        sampling_trials: a.sampling_trials,
        sampling_k: a.sampling_k,
        temperature: a.temperature,
        seed: a.seed,
        tie_tolerance,
        tie_measured,
        trees: trees(&a.tree)?,
        guard: a.guard.options(),
        command: command_line(),
    };
    // Flags are checked before any model is resolved or read.
    opts.validate()?;
    let pair = pair(&a.m, opts.needs_draft())?;
    let store = if a.no_store {
        None
    } else {
        Some(open_store(db).await?)
    };
    let out = job::gate_job(store.as_ref(), pair, opts, progress(), no_cancel()).await?;
    print_guard(&out.guard);
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "prompt_set_sha256": out.prompt_set_sha256, "max_new": out.max_new,
                "n_prompts_set": out.n_prompts_set, "partial": out.partial,
                "prompts": out.prompts.iter().map(|t| serde_json::json!({"id": t.id, "n_prompt_tokens": t.n_prompt_tokens})).collect::<Vec<_>>(),
                "greedy": out.greedy, "sampling": out.sampling, "guard": out.guard,
            }))?
        );
    } else {
        println!(
            "spec gate: target {}, draft {}, prompt set {} (sha256 {}…), {} prompts, max_new {}, greedy",
            out.target_file,
            out.draft_file.as_deref().unwrap_or("—"),
            out.prompt_set,
            &out.prompt_set_sha256[..16],
            out.prompts.len(),
            out.max_new
        );
        print_prompt_table(&out.prompts);
        println!(
            "\ngreedy equality (speculative vs target-only, token for token, {} tokens per prompt):",
            out.max_new
        );
        for r in &out.greedy {
            println!("  {}", r.line());
        }
        if out.partial {
            println!(
                "  partial gate: {} of the prompt set's {} prompts (--limit); stored as partial, it unlocks no `memwall spec bench` (gate without --limit for that)",
                out.prompts.len(),
                out.n_prompts_set
            );
        }
        for (c, texts) in out.sampling.iter().zip(&out.sampling_top_text) {
            println!(
                "\nsampling check ({} at {}, k = {}, {} runs from \"{}\"): χ² = {:.2} on {} df, p = {}, critical value (α = 1e-3) {:.2} → {}; TV(empirical, p) = {:.4} (expected ≤ {:.4} under p); acceptance {}, α̂ {}; first drafted token rejected (residual draw) in {} of {} runs",
                c.drafter_key,
                c.sampling.label(),
                c.k,
                c.trials,
                out.sampling_prefix,
                c.chi2,
                c.df,
                c.p_value.map_or("—".into(), |p| format!("{p:.3}")),
                c.chi2_crit,
                if c.passed { "pass" } else { "FAIL" },
                c.tv,
                c.tv_expected_max,
                c.acceptance_rate
                    .map_or("—".into(), |x| format!("{:.1} %", x * 100.0)),
                c.alpha_hat.map_or("—".into(), |x| format!("{x:.3}")),
                c.n_first_rejected,
                c.trials
            );
            for ((t, pp, obs), text) in c.top.iter().zip(texts) {
                println!("    token {t:>6} {text:?}: p = {pp:.4}, observed {obs:.4}");
            }
        }
    }
    if let (Some(id), Some(store)) = (out.run_id, &store) {
        eprintln!("stored as run {id} in {}", store.path().display());
    }
    if !out.passed() {
        bail!("the gate failed for: {}", out.failed.join(", "));
    }
    Ok(())
}

async fn bench_cmd(db: &Path, a: SpecBenchArgs) -> Result<()> {
    if !a.synth_acceptance.is_empty() {
        return synth_cmd(db, a).await;
    }
    if !a.tree.is_empty() {
        bail!(
            "--tree applies to the set-acceptance bench only: add --synth-acceptance 0.5,0.7,0.9 (or gate trees with `memwall spec gate --tree`)"
        );
    }
    if a.synth_tie_tolerance != 0.0 {
        bail!(
            "--synth-tie-tolerance applies to the set-acceptance bench only: add --synth-acceptance (a bench of real drafters checks its output token for token)"
        );
    }
    let categories = a
        .categories
        .iter()
        .map(|c| {
            Category::parse(c)
                .with_context(|| format!("--categories: unknown {c:?}: use json, code, prose"))
        })
        .collect::<Result<Vec<_>>>()?;
    let opts = SpecBenchJobOptions {
        ks: a.k.clone(),
        auto: !a.no_auto,
        drafters: drafters(&a.drafters)?,
        categories,
        per_category: a.per_category,
        reps: a.reps,
        max_new: a.max_new,
        calib_k: a.calib_k,
        calib_max_new: a.calib_max_new,
        timing_reps: a.timing_reps,
        results_dir: Some(a.out.clone()),
        record: !a.no_store,
        guard: a.guard.options(),
        command: command_line(),
    };
    // Flags are checked before any model is resolved or read.
    opts.validate()?;
    let pair = pair(&a.m, opts.needs_draft())?;
    let store = open_store(db).await?;
    let out = job::bench_job(&store, pair, opts, progress(), no_cancel()).await?;
    print_guard(&out.guard);
    if let Some(id) = out.run_id {
        eprintln!("stored as run {id} in {}", store.path().display());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out.rows)?);
    } else {
        println!("{}", out.report_md);
        println!(
            "wrote {}/spec.md, spec.json and {} chart files",
            a.out.display(),
            out.charts.len()
        );
    }
    Ok(())
}

/// `--tree k3b2m1,k2b2m2` as shapes.
fn trees(texts: &[String]) -> Result<Vec<TreeShape>> {
    texts
        .iter()
        .map(|t| TreeShape::parse(t).map_err(|e| anyhow::anyhow!("--tree: {e}")))
        .collect()
}

/// `memwall spec bench --synth-acceptance α,…`: the set-acceptance bench.
async fn synth_cmd(db: &Path, a: SpecBenchArgs) -> Result<()> {
    let opts = job::SynthJobOptions {
        alphas: a.synth_acceptance.clone(),
        ks: a.k.clone(),
        auto_k: !a.no_auto,
        n_prompts: a.synth_prompts,
        reps: a.reps,
        max_new: a.max_new,
        timing_reps: a.timing_reps,
        seed: a.seed,
        tie_tolerance: a.synth_tie_tolerance,
        trees: trees(&a.tree)?,
        results_dir: Some(a.out.clone()),
        record: !a.no_store,
        guard: a.guard.options(),
        command: command_line(),
    };
    opts.validate()?;
    let pair = pair(&a.m, true)?;
    let store = open_store(db).await?;
    let out = job::synth_job(&store, pair, opts, progress(), no_cancel()).await?;
    print_guard(&out.guard);
    if let Some(id) = out.run_id {
        eprintln!(
            "stored as run {id} in {} (predictions {:?}, stored before the timed runs)",
            store.path().display(),
            out.prediction_ids
        );
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out.rows)?);
    } else {
        println!("{}", out.report_md);
        println!("wrote {}/synth.md and synth.json", a.out.display());
    }
    Ok(())
}
