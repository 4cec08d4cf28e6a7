//! `memwall frontier` and `memwall perplexity`.

use super::bench::ctrlc_flag;
use super::{command_line, guard_line, open_store, physical_cores, print_guard, resolve_model};
use crate::args::{FrontierArgs, PerplexityArgs};
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use memwall_core::experiments::frontier::perplexity::{
    PerplexityRequest, ToolPerplexity, perplexity_job,
};
use memwall_core::experiments::frontier::quant::QuantType;
use memwall_core::experiments::frontier::{self, FrontierPlan, FrontierProgress, chart, table};
use memwall_core::measure::evals::ppl::PplConfig;
use memwall_core::measure::evals::sandbox::SandboxLimits;
use memwall_core::measure::evals::tasks::{TaskConfig, TaskKind};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

fn plan_of(a: &FrontierArgs) -> Result<FrontierPlan> {
    let source = resolve_model(&a.source)?;
    let arms = a
        .arms
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| QuantType::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let tc = |n: usize, max_new: u32| TaskConfig {
        n_items: n,
        seed: a.seed,
        max_new_tokens: max_new,
        sandbox: SandboxLimits {
            timeout_ms: a.sandbox_timeout_ms,
            unsafe_no_sandbox: a.unsafe_no_sandbox,
            ..Default::default()
        },
    };
    if a.humaneval > 0 && !a.table_only {
        // Refuse before measuring anything when generated code could not be isolated.
        memwall_core::measure::evals::sandbox::check_isolation(
            &tc(a.humaneval, a.humaneval_tokens).sandbox,
        )?;
    }
    let mut tasks = Vec::new();
    for (k, n, max_new) in [
        (TaskKind::Gsm8k, a.gsm8k, a.gsm8k_tokens),
        (TaskKind::Mmlu, a.mmlu, 0),
        (TaskKind::ArcEasy, a.arc, 0),
        (TaskKind::HumanEval, a.humaneval, a.humaneval_tokens),
    ] {
        if n > 0 {
            tasks.push((k, tc(n, max_new)));
        }
    }
    let plan = FrontierPlan {
        source,
        arms,
        n_threads: a.threads.unwrap_or_else(physical_cores),
        reps: a.reps,
        n_prompt: a.n_prompt,
        n_gen: a.n_gen,
        speed: !a.no_speed,
        ppl: a
            .ppl_data
            .iter()
            .filter(|d| !d.is_empty())
            .map(|d| PplConfig {
                dataset: d.clone(),
                n_ctx: a.ppl_ctx,
                n_chunks: a.ppl_chunks,
            })
            .collect(),
        kld: !a.no_kld,
        tasks,
        remeasure: a.remeasure.clone(),
        guard: a.guard.options(),
        sampler: !a.no_sampler,
    };
    plan.validate()?;
    Ok(plan)
}

pub(crate) async fn frontier(db: &std::path::Path, a: FrontierArgs) -> Result<()> {
    let plan = plan_of(&a)?;
    let store = open_store(db).await?;
    let command = command_line();
    let rows = if a.table_only {
        let frontier::Arms { source: src, arms } = frontier::existing_arms(&plan)?;
        frontier::load_rows(&store, &plan, &src, &arms).await?
    } else {
        let pb = if a.quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(0)
        };
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:25} {pos}/{len} {msg}",
            )
            .expect("valid"),
        );
        pb.enable_steady_tick(std::time::Duration::from_millis(250));
        let pb2 = pb.clone();
        let progress = move |p: FrontierProgress| match p {
            FrontierProgress::Preparing { what } => pb2.println(format!("  {what}")),
            FrontierProgress::Skipped { arm, measure } => {
                pb2.println(format!("  {arm:<7} {measure:<16} stored already, skipped"))
            }
            FrontierProgress::Started {
                arm,
                measure,
                index,
                total,
            } => {
                pb2.set_position(0);
                pb2.set_message(format!("[{index}/{total}] {arm} {measure}"));
            }
            FrontierProgress::Step { done, of } => {
                pb2.set_length(of as u64);
                pb2.set_position(done as u64);
            }
            FrontierProgress::Stored {
                arm,
                measure,
                summary,
            } => pb2.println(format!("  {arm:<7} {measure:<16} {summary}")),
        };
        let cancel = Arc::new(AtomicBool::new(false));
        ctrlc_flag(cancel.clone())?;
        let t0 = std::time::Instant::now();
        let out = frontier::frontier_job(
            &store,
            plan.clone(),
            a.reuse_stream,
            command,
            progress,
            cancel,
        )
        .await;
        pb.finish_and_clear();
        let out = out?;
        eprintln!(
            "frontier: {} cell(s) measured, {} already stored, in {:.1} min",
            out.measured,
            out.skipped,
            t0.elapsed().as_secs_f64() / 60.0
        );
        out.rows
    };
    let md = table::render_markdown(&rows);
    print!("{md}");
    write_outputs(&a.out, &plan, &rows, &md)?;
    println!(
        "stored in {}; table and charts in {}",
        store.path().display(),
        a.out.display()
    );
    Ok(())
}

fn write_outputs(
    dir: &std::path::Path,
    plan: &FrontierPlan,
    rows: &[table::FrontierRow],
    md: &str,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    memwall_core::util::write_atomic(&dir.join("frontier.md"), md.as_bytes())?;
    memwall_core::util::write_atomic(
        &dir.join("frontier.json"),
        serde_json::to_string_pretty(rows)?.as_bytes(),
    )?;
    let name = plan
        .source
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let points = chart::energy_points(rows);
    if !points.is_empty() {
        let memwall_core::present::chart::ChartFiles { png, .. } = chart::tokens_per_joule_chart(
            &dir.join("frontier_tokens_per_joule"),
            &points,
            &format!("Decode tokens per joule against the arms of {name}"),
        )?;
        println!("chart: {} (+ .svg)", png.display());
    }
    for q in chart::qualities(rows) {
        let title = format!("Quantization frontier of {name}");
        let memwall_core::present::chart::ChartFiles { png, svg } = chart::frontier_chart(
            &dir.join(format!("frontier_{}", q.slug())),
            rows,
            &q,
            &title,
        )?;
        println!(
            "chart: {} (+ {})",
            png.display(),
            svg.file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
    }
    Ok(())
}

fn expand_home(s: &str) -> PathBuf {
    match s.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(rest),
        None => PathBuf::from(s),
    }
}

pub(crate) async fn perplexity(a: PerplexityArgs) -> Result<()> {
    let req = PerplexityRequest {
        model: resolve_model(&a.model)?,
        reference: a.reference.as_deref().map(resolve_model).transpose()?,
        config: PplConfig {
            dataset: a.data.clone(),
            n_ctx: a.ctx,
            n_chunks: a.chunks,
        },
        n_threads: a.threads.unwrap_or_else(physical_cores),
        guard: a.guard.options(),
        compare_tool: a.compare.then(|| expand_home(&a.tool)),
    };
    let mut step = |d: u32, n: u32| eprint!("\r  window {d}/{n}");
    let out = perplexity_job(&req, &mut step)?;
    eprintln!();
    print_guard(&out.guard);
    let (res, cfg, guard) = (&out.result, &req.config, &out.guard);
    if a.json {
        let v = serde_json::json!({ "memwall": res, "llama_perplexity": out.llama_perplexity, "guard": guard });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "memwall:          PPL = {:.4} +/- {:.5}  ({} tokens scored: {} windows of {}, second half of each; {} tokens in {} sha256 {}…)",
        res.ppl,
        res.ppl_unc,
        res.n_scored,
        res.n_chunks,
        cfg.n_ctx,
        res.n_tokens_file,
        out.text_file,
        &res.text_sha256[..12]
    );
    if let Some(k) = &res.kld {
        println!(
            "KLD vs reference: mean {:.6} ± {:.6}, median {:.6}, 99% {:.6}, max {:.6}; same top token {:.3} ± {:.3}%; RMS Δp {:.3}%; PPL(ref) {:.4}",
            k.mean,
            k.mean_unc,
            k.median,
            k.p99,
            k.max,
            k.same_top_pct,
            k.same_top_unc_pct,
            k.rms_dp_pct,
            k.ppl_ref
        );
    }
    println!("{}", guard_line(guard));
    if let Some(ToolPerplexity { ppl: p, unc: u }) = out.llama_perplexity {
        println!("llama-perplexity: PPL = {p:.4} +/- {u:.5}");
        println!(
            "agreement: memwall / llama-perplexity − 1 = {:+.4}%",
            (res.ppl / p - 1.0) * 100.0
        );
    }
    Ok(())
}
