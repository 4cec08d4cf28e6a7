//! `memwall spec prompts | gate | bench`: flags → core `spec` plans → printed tables.

use super::{command_line, guard_line, open_store, physical_cores, print_guard, resolve_model};
use crate::args::{SpecBenchArgs, SpecCmd, SpecGateArgs, SpecModelArgs, SpecPromptsArgs};
use anyhow::{Context, Result, bail};
use memwall_core::experiments::speculative::bench::{
    self, BenchProvenance, CategoryInput, SpecBenchPlan,
};
use memwall_core::experiments::speculative::drafter::Ngram;
use memwall_core::experiments::speculative::gate::{self, DrafterKind, GatePlan, TokenizedPrompt};
use memwall_core::experiments::speculative::prompts::{Category, Format, PromptSet};
use memwall_core::experiments::speculative::sampling::SamplingParams;
use memwall_core::experiments::speculative::{chart, pair, store as sstore};
use memwall_core::measure::engine::Engine;
use memwall_core::measure::guard::{Guard, GuardReport};
use memwall_core::probe::model::{CacheType, ModelFacts};
use memwall_core::store::NewRun;
use memwall_core::util::now_rfc3339;
use std::path::Path;

/// Runs a spec subcommand.
pub async fn spec(db: &Path, cmd: SpecCmd) -> Result<()> {
    match cmd {
        SpecCmd::Prompts(a) => prompts(a),
        SpecCmd::Gate(a) => gate_cmd(db, a).await,
        SpecCmd::Bench(a) => bench_cmd(db, a).await,
    }
}

fn prompt_set(m: &SpecModelArgs) -> Result<PromptSet> {
    Ok(match &m.prompts {
        Some(p) => PromptSet::load(p)?,
        None => PromptSet::builtin()?,
    })
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

fn check_ks(ks: &[usize]) -> Result<()> {
    if ks.is_empty() {
        bail!("-k: give at least one draft length");
    }
    if let Some(k) = ks
        .iter()
        .find(|&&k| k == 0 || k > memwall_core::experiments::speculative::K_MAX)
    {
        bail!(
            "-k {k}: draft lengths must be 1..={}",
            memwall_core::experiments::speculative::K_MAX
        );
    }
    Ok(())
}

fn fmt_name(f: Format) -> &'static str {
    match f {
        Format::Raw => "raw",
        Format::Chat => "chat",
    }
}

fn load_pair(m: &SpecModelArgs, need_draft: bool, n_ctx: u32) -> Result<pair::Pair> {
    let target = resolve_model(&m.target)?;
    let draft = if need_draft {
        Some(resolve_model(&m.draft)?)
    } else {
        None
    };
    let threads = m.threads.unwrap_or_else(physical_cores);
    eprintln!(
        "loading target {}{} ({} threads)",
        target.display(),
        draft
            .as_ref()
            .map_or(String::new(), |d| format!(", draft {}", d.display())),
        threads
    );
    Ok(pair::load(&target, draft.as_deref(), n_ctx, threads)?)
}

/// Checks that the target (and the draft, when loaded) fit in memory together with
/// `n_ctx` tokens of context each, before llama.cpp loads them.
fn fit_pair(guard: &mut Guard, m: &SpecModelArgs, need_draft: bool, n_ctx: u32) -> Result<()> {
    let n = pair::engine_config(n_ctx, 1).n_ctx as u64;
    let target = ModelFacts::open(&resolve_model(&m.target)?)?;
    let draft = if need_draft {
        Some(ModelFacts::open(&resolve_model(&m.draft)?)?)
    } else {
        None
    };
    let mut parts = vec![(&target, n)];
    if let Some(d) = &draft {
        parts.push((d, n));
    }
    guard.check_fit(&parts, CacheType::F16)?;
    Ok(())
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

fn prompts(a: SpecPromptsArgs) -> Result<()> {
    let set = prompt_set(&a.m)?;
    let p = load_pair(&a.m, false, 4096)?;
    let toks = pair::tokenize_set(&p.target, &set)?;
    if a.json {
        let v: Vec<_> = set
            .prompts
            .iter()
            .zip(&toks)
            .map(|(pr, t)| {
                serde_json::json!({
                    "id": pr.id, "category": pr.category.name(), "format": fmt_name(pr.format),
                    "n_prompt_tokens": t.tokens.len(),
                    "rendered": pr.render(&p.target).unwrap_or_default(),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "prompt set {} (sha256 {}), {} prompts; token counts after the target's own chat template ({}):",
        set.source,
        &set.sha256[..16],
        toks.len(),
        file_name(&p.target_path)
    );
    print_prompt_table(&toks);
    Ok(())
}

fn print_prompt_table(toks: &[TokenizedPrompt]) {
    println!("| prompt | category | format | n_prompt_tokens |\n|---|---|---|---|");
    for t in toks {
        println!(
            "| {} | {} | {} | {} |",
            t.id,
            t.category.name(),
            fmt_name(t.format),
            t.tokens.len()
        );
    }
}

/// Round-robin over categories, in set order within each.
fn limit_round_robin(toks: Vec<TokenizedPrompt>, n: usize) -> Vec<TokenizedPrompt> {
    let mut by: Vec<Vec<TokenizedPrompt>> = Category::ALL
        .iter()
        .map(|c| toks.iter().filter(|t| t.category == *c).cloned().collect())
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while out.len() < n && by.iter().any(|v| i < v.len()) {
        for v in by.iter_mut() {
            if i < v.len() && out.len() < n {
                out.push(v[i].clone());
            }
        }
        i += 1;
    }
    out
}

fn new_run(kind: &str, started_at: String, notes: String, guard: GuardReport) -> NewRun {
    NewRun {
        kind: kind.into(),
        started_at,
        finished_at: now_rfc3339(),
        command: command_line(),
        host: memwall_core::probe::hw::host_info(),
        notes,
        guard: Some(guard),
    }
}

/// Prefix of the sampling check: a raw list continuation with a spread-out next token.
const SAMPLING_PREFIX: &str = "Here is a list of fruits: apple, banana,";

async fn gate_cmd(db: &Path, a: SpecGateArgs) -> Result<()> {
    check_ks(&a.k)?;
    let ds = drafters(&a.drafters)?;
    if ds.is_empty() {
        bail!("--drafters: give at least one of draft-model, ngram");
    }
    let set = prompt_set(&a.m)?;
    let need_draft = ds.contains(&DrafterKind::DraftModel) || a.sampling_trials > 0;
    let started = now_rfc3339();
    let mut guard = Guard::begin(a.guard.options())?;
    fit_pair(&mut guard, &a.m, need_draft, 4096)?;
    // Tokenize with a throwaway context first to size the real one.
    let mut p = load_pair(&a.m, need_draft, 4096)?;
    let mut toks = pair::tokenize_set(&p.target, &set)?;
    let n_prompts_set = toks.len();
    if let Some(n) = a.limit {
        toks = limit_round_robin(toks, n);
    }
    let partial = toks.len() < n_prompts_set;
    let longest = toks.iter().map(|t| t.tokens.len()).max().unwrap_or(0);
    let need_ctx = (longest + a.max_new + memwall_core::experiments::speculative::K_MAX + 8) as u32;
    if need_ctx > 4096 {
        fit_pair(&mut guard, &a.m, need_draft, need_ctx)?;
        p = load_pair(&a.m, need_draft, need_ctx)?;
    }
    let plan = GatePlan {
        ks: a.k.clone(),
        drafters: ds.clone(),
        max_new: a.max_new,
        ngram: Ngram::default(),
    };
    if !a.json {
        println!(
            "spec gate: target {}, draft {}, prompt set {} (sha256 {}…), {} prompts, max_new {}, greedy",
            file_name(&p.target_path),
            p.draft_path.as_deref().map_or("—".into(), file_name),
            set.source,
            &set.sha256[..16],
            toks.len(),
            a.max_new
        );
        print_prompt_table(&toks);
    }
    let t0 = std::time::Instant::now();
    let rows = gate::greedy_gate(
        &mut p.target,
        p.draft.as_mut(),
        &toks,
        &plan,
        &mut |i, n, id| {
            eprint!("\rgate: prompt {}/{} ({id})        ", i + 1, n);
        },
    )?;
    eprintln!(
        "\rgate: {} prompts in {:.0} s                 ",
        toks.len(),
        t0.elapsed().as_secs_f64()
    );
    let mut sampling = Vec::new();
    if a.sampling_trials > 0 {
        let prefix = p.target.tokenize(SAMPLING_PREFIX, true)?;
        let sp = SamplingParams {
            temperature: a.temperature,
            top_k: 0,
            top_p: 1.0,
        };
        eprintln!(
            "sampling check: {} runs at {}, k = {}",
            a.sampling_trials,
            sp.label(),
            a.sampling_k
        );
        let d = p
            .draft
            .as_mut()
            .context("the sampling check needs the draft model")?;
        sampling.push(gate::sampling_check(
            &mut p.target,
            d,
            &prefix,
            a.sampling_k,
            sp,
            a.sampling_trials,
            a.seed,
        )?);
    }
    let info = p.target.info();
    let guard = guard.finish();
    print_guard(&guard);
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "prompt_set_sha256": set.sha256, "max_new": a.max_new,
                "n_prompts_set": n_prompts_set, "partial": partial,
                "prompts": toks.iter().map(|t| serde_json::json!({"id": t.id, "n_prompt_tokens": t.tokens.len()})).collect::<Vec<_>>(),
                "greedy": rows, "sampling": sampling, "guard": guard,
            }))?
        );
    } else {
        println!(
            "\ngreedy equality (speculative vs target-only, token for token, {} tokens per prompt):",
            a.max_new
        );
        for r in &rows {
            println!("  {}", r.line());
        }
        if partial {
            println!(
                "  partial gate: {} of the prompt set's {} prompts (--limit); stored as partial, it unlocks no `memwall spec bench` (gate without --limit for that)",
                toks.len(),
                n_prompts_set
            );
        }
        for c in &sampling {
            println!(
                "\nsampling check ({} at {}, k = {}, {} runs from \"{}\"): χ² = {:.2} on {} df, critical value (α = 1e-3) {:.2} → {}; TV(empirical, p) = {:.4} (expected ≤ {:.4} under p); acceptance {}",
                c.drafter_key,
                c.sampling.label(),
                c.k,
                c.trials,
                SAMPLING_PREFIX,
                c.chi2,
                c.df,
                c.chi2_crit,
                if c.passed { "pass" } else { "FAIL" },
                c.tv,
                c.tv_expected_max,
                c.acceptance_rate
                    .map_or("—".into(), |x| format!("{:.1} %", x * 100.0))
            );
            for (t, pp, obs) in &c.top {
                let text = String::from_utf8_lossy(&p.target.token_bytes(*t)).into_owned();
                println!("    token {t:>6} {text:?}: p = {pp:.4}, observed {obs:.4}");
            }
        }
    }
    if !a.no_store {
        let store = open_store(db).await?;
        let prov = sstore::GateProvenance {
            target_file: file_name(&p.target_path),
            target_sha256: p.target_sha256.clone(),
            prompt_set_sha256: set.sha256.clone(),
            engine_build: info.build.clone(),
            max_new: a.max_new,
            n_prompts_set,
        };
        let run = new_run(
            "spec-gate",
            started,
            format!(
                "{} of {} prompts{}, {} tokens per prompt",
                toks.len(),
                n_prompts_set,
                if partial {
                    " (partial: unlocks no bench)"
                } else {
                    ""
                },
                a.max_new
            ),
            guard,
        );
        let id = sstore::insert_gate_run(&store, &run, &prov, &toks, &rows, &sampling).await?;
        eprintln!("stored as run {id} in {}", store.path().display());
    }
    let failed: Vec<String> = rows
        .iter()
        .filter(|r| !r.passed())
        .map(|r| format!("{} k={}", r.drafter.name(), r.k))
        .chain(
            sampling
                .iter()
                .filter(|c| !c.passed)
                .map(|c| format!("sampling k={}", c.k)),
        )
        .collect();
    if !failed.is_empty() {
        bail!("the gate failed for: {}", failed.join(", "));
    }
    Ok(())
}

async fn bench_cmd(db: &Path, a: SpecBenchArgs) -> Result<()> {
    check_ks(&a.k)?;
    let ds = drafters(&a.drafters)?;
    if ds.is_empty() {
        bail!("--drafters: give at least one of draft-model, ngram");
    }
    if a.reps < 2 {
        bail!(
            "-r {}: at least 2 repetitions (5 for the issue's numbers)",
            a.reps
        );
    }
    let cats = a
        .categories
        .iter()
        .map(|c| {
            Category::parse(c)
                .with_context(|| format!("--categories: unknown {c:?}: use json, code, prose"))
        })
        .collect::<Result<Vec<_>>>()?;
    let set = prompt_set(&a.m)?;
    let started = now_rfc3339();
    let need_draft = ds.contains(&DrafterKind::DraftModel);
    let mut guard = Guard::begin(a.guard.options())?;
    fit_pair(&mut guard, &a.m, need_draft, 4096)?;
    let mut p = load_pair(&a.m, need_draft, 4096)?;
    let toks = pair::tokenize_set(&p.target, &set)?;
    let mut inputs = Vec::new();
    for c in &cats {
        let of: Vec<&TokenizedPrompt> = toks.iter().filter(|t| t.category == *c).collect();
        if of.len() < a.per_category + 1 {
            bail!(
                "category {}: {} prompts, need --per-category {} + 1 held out",
                c.name(),
                of.len(),
                a.per_category
            );
        }
        inputs.push(CategoryInput {
            category: *c,
            measured: of[..a.per_category].iter().map(|t| (*t).clone()).collect(),
            calibration: (*of[of.len() - 1]).clone(),
        });
    }
    let longest = inputs
        .iter()
        .flat_map(|i| i.measured.iter().chain(std::iter::once(&i.calibration)))
        .map(|t| t.tokens.len())
        .max()
        .unwrap_or(0);
    let need_ctx = (longest
        + a.max_new.max(a.calib_max_new)
        + memwall_core::experiments::speculative::K_MAX
        + 8) as u32;
    if need_ctx > 4096 {
        fit_pair(&mut guard, &a.m, need_draft, need_ctx)?;
        p = load_pair(&a.m, need_draft, need_ctx)?;
    }
    let info = p.target.info();
    let store = open_store(db).await?;
    let gates = sstore::greedy_gates(&store, &p.target_sha256, &info.build, &set.sha256).await?;
    // Every fixed configuration needs a gate that unlocks it (passed, the whole
    // prompt set, ≥ this bench's tokens per prompt) before any timing starts.
    let mut missing = Vec::new();
    for d in &ds {
        let key = match d {
            DrafterKind::DraftModel => p
                .draft
                .as_ref()
                .map(|x| memwall_core::experiments::speculative::drafter::Drafter::key(x))
                .unwrap_or_default(),
            DrafterKind::Ngram => {
                memwall_core::experiments::speculative::drafter::Drafter::key(&Ngram::default())
            }
        };
        for &k in &a.k {
            if let Err(why) = sstore::unlocking_gate(&gates, &key, k, a.max_new) {
                missing.push(format!("{} {why}", d.name()));
            }
        }
    }
    if !missing.is_empty() && !a.no_store {
        bail!(
            "no gate unlocks this bench: a passed greedy gate over the whole prompt set ({} prompts, sha256 {}…) at ≥ {} tokens per prompt, same target and engine build {}, is needed for each configuration. Missing: {}. Run `memwall spec gate -k {} -n {}` (without --limit) first, or pass --no-store to measure without recording",
            set.prompts.len(),
            &set.sha256[..16],
            a.max_new,
            info.build,
            missing.join("; "),
            a.k.iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(","),
            a.max_new
        );
    }
    let gated = sstore::unlocked(&gates, a.max_new);
    let plan = SpecBenchPlan {
        ks: a.k.clone(),
        auto: !a.no_auto,
        drafters: ds,
        reps: a.reps,
        max_new: a.max_new,
        calib_k: a.calib_k,
        calib_max_new: a.calib_max_new,
        timing_reps: a.timing_reps,
        ngram: Ngram::default(),
        gated,
    };
    let load_start = loadavg();
    let t0 = std::time::Instant::now();
    let reports = bench::run_bench(&mut p.target, p.draft.as_mut(), &inputs, &plan, &mut |m| {
        eprintln!("[{:>5.0} s] {m}", t0.elapsed().as_secs_f64());
    })?;
    let guard = guard.finish();
    print_guard(&guard);
    let threads = a.m.threads.unwrap_or_else(physical_cores);
    let host = memwall_core::probe::hw::host_info();
    let prov = BenchProvenance {
        target_file: file_name(&p.target_path),
        target_sha256: p.target_sha256.clone(),
        draft_file: p.draft_path.as_deref().map(file_name),
        prompt_set_sha256: set.sha256.clone(),
        engine_build: info.build.clone(),
        n_threads: threads,
        max_new: a.max_new,
        reps: a.reps,
        measured_at: now_rfc3339(),
        hostname: host.hostname.clone(),
        cpu_info: host.cpu_model.clone(),
    };
    let mut rows = bench::to_rows(&reports, &prov);
    if !a.no_store {
        sstore::attach_gates(&mut rows, &gates)
            .map_err(|e| anyhow::anyhow!("no gate unlocks this bench: {e}"))?;
    }
    let load_end = loadavg();
    let md = format!(
        "# memwall spec bench\n\ntarget {}, draft {}, {} threads, greedy, {} tokens per prompt, {} repetitions, prompts per category: {}; host {} ({}); load average (1/5/15 min) at start {}, at end {} (above ~0.2 on an idle machine means other work shared the cores: contended)\n\n{}\n## Cost model (measured before the timed runs)\n\n{}",
        prov.target_file,
        prov.draft_file.as_deref().unwrap_or("—"),
        threads,
        a.max_new,
        a.reps,
        a.per_category,
        host.hostname,
        host.cpu_model,
        load_start,
        load_end,
        bench::table_md(&rows),
        bench::cost_md(&reports)
    );
    let md = format!("{md}\n{}\n", guard_line(&guard));
    if !a.no_store {
        let run = new_run(
            "spec-bench",
            started,
            format!("loadavg start {load_start}, end {load_end}"),
            guard.clone(),
        );
        let id = sstore::insert_bench_run(&store, &run, &mut rows).await?;
        eprintln!("stored as run {id} in {}", store.path().display());
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    std::fs::write(a.out.join("spec.md"), &md)
        .with_context(|| format!("writing {}/spec.md", a.out.display()))?;
    std::fs::write(
        a.out.join("spec.json"),
        serde_json::to_string_pretty(
            &serde_json::json!({"rows": rows, "reports": reports, "guard": guard}),
        )?,
    )
    .with_context(|| format!("writing {}/spec.json", a.out.display()))?;
    let charts = chart::write_charts(&a.out, &rows)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!("{md}");
        println!(
            "wrote {}/spec.md, spec.json and {} chart files",
            a.out.display(),
            charts.len()
        );
    }
    Ok(())
}

/// `/proc/loadavg`'s three averages, or `—` where there is none.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join("/"))
        .unwrap_or_else(|| "—".into())
}
