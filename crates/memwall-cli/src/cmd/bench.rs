//! `memwall bench`.

use super::{command_line, default_model, open_store, parse_cache, physical_cores, resolve_model};
use crate::args::BenchArgs;
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use memwall_core::experiments::bench::job;
use memwall_core::experiments::bench::{BenchEngine, BenchPlan, Progress, ValidPlan};
use memwall_core::experiments::predict;
use memwall_core::present::export::Format;
use memwall_core::roofline::multi_gpu::{GpuSplit, SplitMode, TensorSplit};
use memwall_core::units::{Gbps, or_dash};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The plan `memwall bench` (and `memwall predict make`) runs.
pub(crate) fn plan_from_args(a: &BenchArgs) -> Result<ValidPlan> {
    let a = a.clone();
    let models = if a.model.is_empty() {
        vec![default_model()?]
    } else {
        a.model
            .iter()
            .map(|m| resolve_model(m))
            .collect::<Result<Vec<_>>>()?
    };
    let plan = BenchPlan {
        models,
        n_prompt: a.n_prompt.into_iter().filter(|&p| p > 0).collect(),
        n_gen: a.n_gen.into_iter().filter(|&n| n > 0).collect(),
        n_depth: a.n_depth,
        n_seqs: a.n_seqs,
        n_threads: if a.threads.is_empty() {
            vec![physical_cores()]
        } else {
            a.threads
        },
        n_batch: a.n_batch,
        n_ubatch: a.n_ubatch,
        n_gpu_layers: a.n_gpu_layers,
        type_k: parse_cache(&a.cache_type_k)?,
        type_v: parse_cache(&a.cache_type_v)?,
        flash_attn: a.flash_attn.choice(),
        reps: a.reps,
        seed: a.seed,
        allow_battery: a.guard.allow_battery,
        engines: a
            .engine
            .iter()
            .map(|e| BenchEngine::parse(e))
            .collect::<Result<_, _>>()?,
        skip_capacity_check: a.guard.skip_capacity_check,
        split: GpuSplit {
            mode: SplitMode::parse(&a.split_mode)?,
            tensor_split: match &a.tensor_split {
                Some(t) => TensorSplit::parse(t)?,
                None => TensorSplit::default(),
            },
        },
    };
    // Against the GPUs llama.cpp sees, before anything is measured.
    plan.split.validate()?;
    memwall_core::experiments::bench::check_split_devices(&plan.split)?;
    Ok(plan.validate()?)
}

pub(crate) async fn bench(db: &std::path::Path, a: BenchArgs) -> Result<()> {
    let format = Format::parse(&a.output)
        .with_context(|| format!("-o {}: use md, csv, json, jsonl or sql", a.output))?;
    let plan = plan_from_args(&a)?;
    let store = open_store(db).await?;
    // Predictions in ink: written (and hashed) before anything is measured.
    let sheet = if a.predict {
        let s = predict::job::sheet_job(&store, &plan, a.efficiency, &command_line()).await?;
        eprint!("{}", predict::sheet_text(&s));
        Some(s)
    } else {
        None
    };
    let total = plan.instances().len() as u64;
    let reps = plan.reps as u64;
    let pb = if a.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total * (reps + 1))
    };
    pb.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .expect("valid template"),
    );
    if !a.reuse_stream {
        pb.set_message("measuring bandwidth (STREAM) and compute peaks…");
    }
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    let pb2 = pb.clone();
    let quiet = a.quiet;
    let progress = move |p: Progress| match p {
        Progress::Loading { model } => pb2.set_message(format!("loading {model}")),
        Progress::TestStarted {
            label,
            index,
            total,
        } => pb2.set_message(format!("[{}/{}] {label}", index + 1, total)),
        Progress::Repetition { .. } => pb2.inc(1),
        Progress::TestDone { record } => {
            let read = match (record.decode_ceiling_ts_read, record.achieved_read) {
                (Some(c), Some(a)) => {
                    format!("   read ceiling {c:>8.1}   achieved {:>5.1}%", a * 100.0)
                }
                _ => String::new(),
            };
            let line = format!(
                "  {:<9} {:<8} {:<22} {:>9.2} ± {:<6.2} t/s   ceiling {:>8}   achieved {:>5}%{read}",
                record.engine,
                record.quant,
                record.test_label(),
                record.avg_ts,
                record.stddev_ts,
                or_dash(record.ceiling_ts, 1),
                or_dash(record.achieved.map(|a| a * 100.0), 1)
            );
            // A hidden bar (stderr not a terminal: a pipe, a CI log) prints nothing
            // through println: each row still shows as it finishes, not only in the
            // table at the end.
            if pb2.is_hidden() && !quiet {
                eprintln!("{line}");
            } else {
                pb2.println(line);
            }
        }
    };
    let cancel = Arc::new(AtomicBool::new(false));
    let c2 = cancel.clone();
    let _ = ctrlc_flag(c2);
    let opts = job::BenchJobOptions {
        reuse_stream: a.reuse_stream,
        results_dir: (!a.no_results).then(|| a.results_dir.clone()),
        command: command_line(),
        sampler: !a.no_sampler,
    };
    let out = job::bench_job(&store, plan, opts, progress, cancel).await;
    pb.finish_and_clear();
    let out = out?;
    let mut stdout = std::io::stdout().lock();
    format.exporter().write_rows(
        &memwall_core::experiments::live::export_rows(&out.records, &out.energy),
        &mut stdout,
    )?;
    let info = summary(&store, &out).await?;
    // Tables and notes go to stdout with the Markdown table; with a machine format they go
    // to stderr so stdout stays parseable.
    if format == Format::Md {
        write!(stdout, "{info}")?;
    } else {
        eprint!("{info}");
    }
    if let Some(sheet) = sheet {
        let card = predict::score_run(&store, sheet.id, out.run_id).await?;
        let t = predict::table(&card);
        if format == Format::Md {
            write!(stdout, "\n{t}")?;
        } else {
            eprint!("\n{t}");
        }
    }
    Ok(())
}

/// The notes under the table: where the ceilings came from, the evidence tables
/// that apply to this run (core decides which: `job::analyses`), where it is stored.
async fn summary(store: &memwall_core::store::Store, out: &job::BenchOutcome) -> Result<String> {
    use memwall_core::experiments::evidence::{batch, ceilings, depth, threads};
    use std::fmt::Write as _;
    let mut s = String::new();
    let r = &out.roof.roof;
    let first = out.records.first();
    writeln!(
        s,
        "\nceilings: decode = {} ({}) ÷ bytes per step; prefill = min({} peak {} GFLOP/s ÷ FLOPs per token, bandwidth ÷ bytes per micro-batch)",
        Gbps(r.bandwidth.0),
        out.roof.provenance,
        first.map_or("", |x| x.peak_kind.as_str()),
        or_dash(first.and_then(|x| x.peak_gflops), 1),
    )?;
    match r.read_bandwidth {
        Some(bw) => writeln!(
            s,
            "read ceilings: decode = {bw} (STREAM read kernel, same run and threads) ÷ bytes per step: decode reads weights and writes almost nothing, while triad writes a third of its bytes"
        )?,
        None => writeln!(
            s,
            "read ceilings: — (the STREAM run used has no read kernel; run `memwall stream` or drop --reuse-stream)"
        )?,
    }
    let analyses = job::analyses(store, out).await?;
    if !out.energy.is_empty() {
        writeln!(
            s,
            "\nenergy and machine state over each test's timed repetitions (live sampler, 10 Hz):\n{}",
            memwall_core::experiments::live::table(&out.records, &out.energy)
        )?;
    }
    if !out.contended.is_empty() {
        writeln!(
            s,
            "\nCONTENDED: these rows shared the CPUs with other processes while they were timed; their rates measure a busy machine, rerun them on a quiet one:"
        )?;
        for line in &out.contended {
            writeln!(s, "  {line}")?;
        }
    }
    if let Some(rows) = &analyses.ceilings {
        writeln!(
            s,
            "\ndecode under the triad and read ceilings:\n{}",
            ceilings::table(rows)
        )?;
    }
    if let Some(rows) = &analyses.batch {
        writeln!(
            s,
            "\nbatching (per-token-read bandwidth above STREAM proves the weight read is shared):\n{}",
            batch::table(rows)
        )?;
    }
    if let Some(rows) = &analyses.depth {
        writeln!(s, "\ndepth falloff, decomposed:\n{}", depth::table(rows))?;
    }
    if let Some(rows) = &analyses.threads {
        writeln!(
            s,
            "\nimplied bandwidth by thread count:\n{}",
            threads::table(rows)
        )?;
    }
    writeln!(
        s,
        "stored: run {} in {}",
        out.run_id,
        store.path().display()
    )?;
    if let Some(d) = &out.results_dir {
        writeln!(s, "results: {}", d.display())?;
    }
    Ok(s)
}

/// Sets `flag` on Ctrl-C so a run stops between steps and stores nothing partial.
pub(crate) fn ctrlc_flag(flag: Arc<AtomicBool>) -> Result<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nmemwall: cancelling after the current step…");
            flag.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    Ok(())
}
