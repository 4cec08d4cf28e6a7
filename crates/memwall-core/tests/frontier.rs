//! The quantization frontier on real models and real data:
//! - the dataset files parse to their published item counts;
//! - HumanEval's own canonical solutions pass in the sandbox, broken ones fail;
//! - memwall's quantizer wrapper writes the same bytes as llama.cpp's `llama-quantize`;
//! - memwall's perplexity agrees with llama.cpp's `llama-perplexity` within 0.5 %;
//! - a 2-arm grid with tiny subsets runs every code path (speed, PPL + KLD, all four
//!   tasks with sandboxed execution, store, table, chart), and resumes after a cancel
//!   with no partial cell.
//!
//! Models and data are skipped loudly when absent (CI sets MEMWALL_REQUIRE_MODELS=1);
//! llama.cpp's tools likewise unless MEMWALL_REQUIRE_LLAMA_TOOLS=1.
#![cfg(feature = "llama")]

use memwall_core::experiments::frontier::quant::{self, QuantType, Relation};
use memwall_core::experiments::frontier::{self, FrontierError, FrontierPlan, FrontierProgress};
use memwall_core::measure::evals::ppl::{self, PplConfig};
use memwall_core::measure::evals::sandbox::{SandboxLimits, run_python};
use memwall_core::measure::evals::tasks::{self, ItemBody, TaskConfig, TaskKind};
use memwall_core::probe::datasets::Datasets;
use memwall_core::roofline::MachineRoof;
use memwall_core::store::Store;
use memwall_core::units::{Gbps, Gflops};
use memwall_testkit as testing;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Relative agreement required between memwall's and llama-perplexity's PPL.
const PPL_AGREEMENT: f64 = 0.005;

fn dataset(name: &str) -> Option<PathBuf> {
    let d = Datasets::builtin().unwrap();
    match d.get(name).unwrap().require() {
        Ok(p) => Some(p),
        Err(e) => {
            testing::skip_or_fail(
                testing::Requirement::Models,
                &format!("dataset {name}"),
                &e.to_string(),
            );
            None
        }
    }
}

fn llama_tool(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("MEMWALL_LLAMA_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/memwall/llama-tools")
        });
    let p = dir.join("bin").join(name);
    if p.is_file() {
        return Some(p);
    }
    testing::skip_or_fail(
        testing::Requirement::LlamaTools,
        &p.display().to_string(),
        "run scripts/build-llama-tools.sh",
    );
    None
}

#[test]
fn datasets_parse_to_their_published_counts() {
    let Some(g) = dataset("gsm8k") else { return };
    let items = tasks::load(TaskKind::Gsm8k, &g).unwrap();
    assert_eq!(items.len(), 1319);
    // The first GSM8K test problem (Janet's ducks) has the answer 18.
    assert!(matches!(&items[0].body, ItemBody::Math { answer, .. } if answer == "18"));
    let Some(m) = dataset("mmlu") else { return };
    let items = tasks::load(TaskKind::Mmlu, &m).unwrap();
    assert_eq!(
        items.len(),
        14_042,
        "14,044 lines less the 2 repeated header rows"
    );
    assert!(
        items
            .iter()
            .all(|i| i.id != "mmlu/11776" && i.id != "mmlu/12793")
    );
    let Some(a) = dataset("arc-easy") else { return };
    let items = tasks::load(TaskKind::ArcEasy, &a).unwrap();
    assert_eq!(
        items.len(),
        570,
        "dataset_info.json: validation num_examples 570"
    );
    let mut ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 570);
    let Some(h) = dataset("humaneval") else {
        return;
    };
    let items = tasks::load(TaskKind::HumanEval, &h).unwrap();
    assert_eq!(items.len(), 164);
    assert_eq!(items[0].id, "HumanEval/0");
}

#[test]
fn humaneval_canonical_solutions_pass_and_broken_ones_fail() {
    let Some(h) = dataset("humaneval") else {
        return;
    };
    // The canonical solutions are not in our item type: read them from the file.
    let f = std::fs::File::open(&h).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(f), &mut text).unwrap();
    let limits = SandboxLimits {
        timeout_ms: 20_000,
        ..Default::default()
    };
    let mut failed = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let s = |k: &str| v[k].as_str().unwrap().to_string();
        let ok = format!(
            "{}{}\n\n{}\n\ncheck({})\n",
            s("prompt"),
            s("canonical_solution"),
            s("test"),
            s("entry_point")
        );
        let ex = run_python(&ok, &limits).unwrap();
        if !ex.passed {
            failed.push(format!(
                "{}: {} {}",
                s("task_id"),
                ex.status,
                ex.stderr_tail
            ));
        }
        if i < 5 {
            // Same program through the reply path (a fenced block holding the whole function).
            let reply = format!("```python\n{}{}```", s("prompt"), s("canonical_solution"));
            let p = tasks::humaneval_program(&s("prompt"), &s("entry_point"), &s("test"), &reply);
            assert!(run_python(&p, &limits).unwrap().passed, "{}", s("task_id"));
            let broken = format!(
                "{}    return None\n\n{}\n\ncheck({})\n",
                s("prompt"),
                s("test"),
                s("entry_point")
            );
            assert!(
                !run_python(&broken, &limits).unwrap().passed,
                "{}: a broken solution passed",
                s("task_id")
            );
        }
    }
    assert!(
        failed.is_empty(),
        "canonical solutions failed in the sandbox: {failed:#?}"
    );
}

#[test]
fn quantizer_writes_the_same_bytes_as_llama_quantize() {
    let Some(src) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let Some(tool) = llama_tool("llama-quantize") else {
        return;
    };
    let _lock = testing::engine_lock();
    let d = tempfile::tempdir().unwrap();
    for ty in [QuantType::Q8_0, QuantType::Q2K] {
        let ours = d.path().join(format!("ours-{ty}.gguf"));
        let theirs = d.path().join(format!("theirs-{ty}.gguf"));
        quant::quantize_file(&src, &ours, ty, 2).unwrap();
        let st = std::process::Command::new(&tool)
            .arg("--allow-requantize")
            .arg(&src)
            .arg(&theirs)
            .arg(ty.name())
            .arg("2")
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
        let (a, b) = (
            memwall_core::util::sha256_file(&ours).unwrap(),
            memwall_core::util::sha256_file(&theirs).unwrap(),
        );
        assert_eq!(a, b, "{ty}: memwall's arm differs from llama-quantize's");
        let f = memwall_core::probe::model::ModelFacts::open(&ours).unwrap();
        assert_eq!(f.quant, ty.name());
    }
}

#[test]
fn perplexity_agrees_with_llama_perplexity() {
    let Some(model) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let Some(tool) = llama_tool("llama-perplexity") else {
        return;
    };
    let Some(wiki) = dataset("wiki") else { return };
    let _lock = testing::engine_lock();
    let cfg = PplConfig {
        dataset: "wiki".into(),
        n_ctx: 512,
        n_chunks: 3,
    };
    let h = memwall_core::measure::engine::llama::LlamaModelHandle::load(&model, 0).unwrap();
    let ecfg = memwall_core::measure::engine::EngineConfig {
        n_ctx: 512,
        n_batch: 512,
        n_ubatch: 512,
        n_threads: 2,
        n_threads_batch: 2,
        ..Default::default()
    };
    let mut e = h.engine(&ecfg).unwrap();
    let text = std::fs::read_to_string(&wiki).unwrap();
    let toks = memwall_core::measure::engine::Vocab::tokenize(&e, &text, true).unwrap();
    let res = ppl::perplexity::<_, memwall_core::measure::engine::llama::LlamaEngine>(
        &mut e,
        None,
        &toks,
        "x",
        &cfg,
        &AtomicBool::new(false),
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(
        res.n_scored,
        3 * 255,
        "second half of each 512-token window: 255 tokens"
    );
    let theirs = ppl::llama_perplexity_reference(&tool, &model, &wiki, &cfg, 2)
        .unwrap()
        .value;
    let rel = (res.ppl / theirs - 1.0).abs();
    eprintln!(
        "memwall PPL {:.4}, llama-perplexity {theirs:.4}, relative difference {:.5}%",
        res.ppl,
        rel * 100.0
    );
    assert!(
        rel < PPL_AGREEMENT,
        "memwall {} vs llama-perplexity {theirs}: {:.3}% apart",
        res.ppl,
        rel * 100.0
    );
}

fn tiny_plan(source: PathBuf) -> FrontierPlan {
    let tc = |n, max_new| TaskConfig {
        n_items: n,
        seed: 7,
        max_new_tokens: max_new,
        sandbox: SandboxLimits::default(),
    };
    FrontierPlan {
        source,
        arms: vec![QuantType::Q8_0],
        n_threads: 2,
        reps: 2,
        n_prompt: 32,
        n_gen: 8,
        speed: true,
        ppl: vec![PplConfig {
            dataset: "wiki".into(),
            n_ctx: 128,
            n_chunks: 2,
        }],
        kld: true,
        tasks: vec![
            (TaskKind::Gsm8k, tc(2, 24)),
            (TaskKind::Mmlu, tc(2, 0)),
            (TaskKind::ArcEasy, tc(2, 0)),
            (TaskKind::HumanEval, tc(1, 48)),
        ],
        remeasure: vec![],
        guard: memwall_core::measure::guard::GuardOptions {
            allow_battery: true,
            skip_capacity_check: false,
        },
        sampler: true,
    }
}

/// Speed cells without a stored roof, asked to reuse one: the job stops before
/// STREAM, quantizing or any engine work, and stores nothing.
#[test]
fn the_frontier_job_needs_a_roof_for_its_speed_cells() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let d = tempfile::tempdir().unwrap();
    let store = rt.block_on(Store::open(&d.path().join("f.db"))).unwrap();
    let mut events = Vec::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let r = rt.block_on(frontier::frontier_job(
        &store,
        tiny_plan(d.path().join("never-opened.gguf")),
        true,
        "test".into(),
        move |p| tx.send(p).unwrap(),
        Arc::new(AtomicBool::new(false)),
    ));
    events.extend(rx.try_iter());
    let e = r.unwrap_err();
    assert!(matches!(e, FrontierError::Roof(_)), "{e:?}");
    assert!(
        e.to_string().starts_with("no stored STREAM triad for host"),
        "{e}"
    );
    assert!(
        events.is_empty(),
        "reusing a roof announces no STREAM run: {events:?}"
    );
    assert_eq!(rt.block_on(frontier::count_cells(&store)).unwrap(), 0);
    assert!(rt.block_on(store.runs()).unwrap().is_empty());
}

#[test]
fn tiny_frontier_runs_every_path_and_resumes_without_partial_cells() {
    let Some(src) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    for d in ["wiki", "gsm8k", "mmlu", "arc-easy", "humaneval"] {
        if dataset(d).is_none() {
            return;
        }
    }
    let _lock = testing::engine_lock();
    let qdir = tempfile::tempdir().unwrap();
    // SAFETY: the only test in this binary that reads MEMWALL_QUANTS; set before any arm is made.
    unsafe { std::env::set_var("MEMWALL_QUANTS", qdir.path()) };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dbdir = tempfile::tempdir().unwrap();
    let store = rt
        .block_on(Store::open(&dbdir.path().join("f.db")))
        .unwrap();
    // A fixed roof keeps the test off STREAM; the ceilings are not asserted against it.
    let roof = MachineRoof {
        bandwidth: Gbps(40.0),
        stream_id: 0,
        read_bandwidth: None,
        peak_f32: Some(Gflops(500.0)),
        peak_int8: Some(Gflops(1000.0)),
        gpu: None,
    };
    let plan = tiny_plan(src.clone());
    let n_cells = 2 * plan.measures().len();

    // 1. Cancel as soon as the second cell starts: the first is stored, the second not.
    let cancel = Arc::new(AtomicBool::new(false));
    let c2 = cancel.clone();
    let r = rt.block_on(frontier::run_frontier(
        &store,
        plan.clone(),
        roof.clone(),
        "test".into(),
        move |p| {
            if let FrontierProgress::Started { index: 2, .. } = p {
                c2.store(true, Ordering::Relaxed);
            }
        },
        cancel,
    ));
    assert!(matches!(r, Err(FrontierError::Cancelled)), "{r:?}");
    assert_eq!(
        rt.block_on(frontier::count_cells(&store)).unwrap(),
        1,
        "exactly the finished cell is stored"
    );

    // 2. Resume: the stored cell is skipped, every other cell runs.
    let out = rt
        .block_on(frontier::run_frontier(
            &store,
            plan.clone(),
            roof.clone(),
            "test".into(),
            |_| {},
            Arc::new(AtomicBool::new(false)),
        ))
        .unwrap();
    assert_eq!((out.measured, out.skipped), (n_cells - 1, 1));
    assert_eq!(
        rt.block_on(frontier::count_cells(&store)).unwrap(),
        n_cells as i64
    );

    // 3. Nothing left to do.
    let again = rt
        .block_on(frontier::run_frontier(
            &store,
            plan.clone(),
            roof,
            "test".into(),
            |_| {},
            Arc::new(AtomicBool::new(false)),
        ))
        .unwrap();
    assert_eq!((again.measured, again.skipped), (0, n_cells));
    // Every cell's run carries the guard's findings, with the arm's capacity check.
    let guards: Vec<Option<String>> = rt
        .block_on(
            sqlx::query_scalar("SELECT guard_json FROM runs WHERE kind = 'frontier' ORDER BY id")
                .fetch_all(store.pool()),
        )
        .unwrap();
    assert_eq!(guards.len(), n_cells);
    for g in &guards {
        let g: memwall_core::measure::guard::GuardReport =
            serde_json::from_str(g.as_deref().expect("guard_json stored")).unwrap();
        assert_eq!(g.capacity.len(), 1, "{g:?}");
        assert!(
            !g.capacity[0].skipped && g.capacity[0].needed_bytes > 0,
            "{g:?}"
        );
    }

    // The arms: the Q4_1 source and a Q8_0 arm above it (cached by key).
    let rows = &out.rows;
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0].arm.as_str(), rows[0].relation),
        ("Q8_0", Relation::Above)
    );
    assert_eq!(
        (rows[1].arm.as_str(), rows[1].relation),
        ("Q4_1", Relation::Source)
    );
    assert_eq!(quant::list().unwrap().len(), 1);
    for r in rows {
        let s = r.speed.as_ref().expect("speed measured");
        assert!(s.tg_tps > 0.0 && s.pp_tps > 0.0 && s.tg_n == 2, "{s:?}");
        let p = r.ppl[0].1.as_ref().expect("ppl measured");
        assert_eq!(p.n_scored, 2 * 63);
        assert!(p.ppl > 1.0 && p.ppl < 1000.0, "{}", p.ppl);
        for (name, t) in &r.tasks {
            let t = t.as_ref().unwrap_or_else(|| panic!("{name} measured"));
            assert!(
                t.n >= 1 && t.ci_low <= t.accuracy && t.accuracy <= t.ci_high,
                "{name}: {t:?}"
            );
        }
    }
    // KLD only for the non-reference arm; Q8_0 requantized from Q4_1 is nearly lossless.
    assert!(rows[1].ppl[0].1.as_ref().unwrap().kld.is_none());
    let k = rows[0].ppl[0]
        .1
        .as_ref()
        .unwrap()
        .kld
        .as_ref()
        .expect("KLD vs the source");
    assert!(
        k.mean >= 0.0 && k.mean < 0.05 && k.same_top_pct > 80.0,
        "{k:?}"
    );
    // PPL of the two arms agree closely (same information).
    let (a, b) = (
        rows[0].ppl[0].1.as_ref().unwrap().ppl,
        rows[1].ppl[0].1.as_ref().unwrap().ppl,
    );
    assert!((a / b - 1.0).abs() < 0.05, "{a} vs {b}");

    // Identical items across arms, with prompts and token counts stored.
    let ids = |arm: &str, task: &str| -> Vec<(String, u32)> {
        let frontier::Arms { source: src_, arms } = frontier::existing_arms(&plan).unwrap();
        let a = arms.iter().find(|x| x.arm.quant == arm).unwrap();
        let cfgs = frontier::cell_configs(&plan, &src_, a).unwrap();
        let (_, name, cfg) = cfgs
            .into_iter()
            .find(|(_, n, _)| n == &format!("task:{task}"))
            .unwrap();
        let cell = rt
            .block_on(frontier::find_cell(
                &store,
                &a.arm.sha256,
                &name,
                &frontier::config_key(&name, &cfg),
            ))
            .unwrap()
            .unwrap();
        let items = rt.block_on(frontier::cell_items(&store, cell.id)).unwrap();
        assert!(
            items
                .iter()
                .all(|i| i.n_prompt_tokens > 10 && i.prompt.contains("<|im_start|>user")),
            "{items:?}"
        );
        items
            .into_iter()
            .map(|i| (i.id, i.n_prompt_tokens))
            .collect()
    };
    for t in ["gsm8k", "mmlu", "arc-easy", "humaneval"] {
        assert_eq!(
            ids("Q8_0", t),
            ids("Q4_1", t),
            "{t}: arms must see identical items and prompts"
        );
    }
    let he = ids("Q4_1", "humaneval");
    assert!(he[0].0.starts_with("HumanEval/"));

    // Table and chart from the stored cells.
    let md = frontier::table::render_markdown(rows);
    assert!(
        md.contains("| Q8_0 | above |") && md.contains("| Q4_1 | source |"),
        "{md}"
    );
    let qs = frontier::chart::qualities(rows);
    assert!(qs.contains(&frontier::chart::Quality::Ppl("wiki".into())));
    let d = tempfile::tempdir().unwrap();
    let memwall_core::present::chart::ChartFiles { png, svg } =
        frontier::chart::frontier_chart(&d.path().join("f"), rows, &qs[0], "tiny").unwrap();
    assert!(png.is_file() && std::fs::read_to_string(svg).unwrap().contains("Q8_0"));
}

/// A real speed cell on the default model with the live sampler beside it: the cell's
/// transaction holds the sampler's counters, series and the tg row's energy; where no
/// energy counter is readable (this VM: no RAPL) J/token is NULL with the reason.
#[test]
fn a_speed_cell_stores_the_samplers_recording_in_its_transaction() {
    let Some(src) = testing::model("qwen2.5-coder-0.5b-q4_k_m") else {
        return;
    };
    let _lock = testing::engine_lock();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dbdir = tempfile::tempdir().unwrap();
    let store = rt
        .block_on(Store::open(&dbdir.path().join("f.db")))
        .unwrap();
    let roof = MachineRoof {
        bandwidth: Gbps(40.0),
        stream_id: 0,
        read_bandwidth: None,
        peak_f32: None,
        peak_int8: None,
        gpu: None,
    };
    let plan = FrontierPlan {
        arms: vec![],
        reps: 2,
        n_prompt: 16,
        n_gen: 16,
        ppl: vec![],
        kld: false,
        tasks: vec![],
        ..tiny_plan(src)
    };
    let out = rt
        .block_on(frontier::run_frontier(
            &store,
            plan,
            roof,
            "test".into(),
            |_| {},
            Arc::new(AtomicBool::new(false)),
        ))
        .unwrap();
    assert_eq!((out.measured, out.rows.len()), (1, 1));
    let e = out.rows[0]
        .energy
        .clone()
        .expect("a speed cell has energy or its reason");
    let q = |sql: &'static str| -> i64 {
        rt.block_on(
            sqlx::query_scalar(sql)
                .bind(e.run_id)
                .fetch_one(store.pool()),
        )
        .unwrap()
    };
    assert!(q("SELECT COUNT(*) FROM sampler_series WHERE run_id = ?") >= 1);
    assert!(q("SELECT COUNT(*) FROM sampler_counters WHERE run_id = ?") >= 1);
    // One phase per test (pp16, tg16), each with an energy row naming its bench row.
    assert_eq!(q("SELECT COUNT(*) FROM sampler_phases WHERE run_id = ?"), 2);
    assert_eq!(
        q(
            "SELECT COUNT(*) FROM row_energy e JOIN bench_results b ON b.id = e.row_id WHERE e.run_id = ? AND b.run_id = e.run_id"
        ),
        2
    );
    let tg: i64 = q("SELECT id FROM bench_results WHERE run_id = ? AND n_prompt = 0");
    assert_eq!(e.row_id, Some(tg));
    let energy_readable = q(
        "SELECT COUNT(*) FROM sampler_counters WHERE run_id = ? AND name LIKE '%energy%' AND available",
    ) > 0;
    match e.j_per_token {
        Some(j) => {
            assert!(energy_readable && j > 0.0, "{e:?}");
            let wh = e.tokens_per_wh.expect("tokens per Wh beside J/token");
            assert!((wh - 3600.0 / j).abs() < 1e-9 * wh, "{e:?}");
        }
        None => {
            assert_eq!(e.tokens_per_wh, None);
            let why = e.reason.as_deref().unwrap_or_default();
            assert!(!why.is_empty(), "a missing J/token says why: {e:?}");
            eprintln!("tg J/token not measured here: {why}");
        }
    }
    if !energy_readable {
        assert_eq!(e.j_per_token, None, "no energy counter, no J/token");
    }
    let md = frontier::table::render_markdown(&out.rows);
    assert!(
        md.contains("tg J/token") && md.contains("tg tokens/Wh"),
        "{md}"
    );
}

/// Tolerances of the mlx-8bit arm against its source (a Q4_K_M file: the 8-bit
/// arm requantizes the source's own values, so it carries the source's
/// information up to 8-bit rounding, and runs on another engine's kernels).
const MLX8_PPL_REL: f64 = 0.03;
const MLX8_KLD_MAX: f64 = 0.02;

/// The mlx-8bit arm of the default model on a tiny wiki slice: its speed cell runs
/// on MLX, its perplexity is within a few % of the source's on llama.cpp and its KLD
/// against the source (llama.cpp, in lockstep) is small and positive; its bytes
/// are the arrays MLX holds, checked against the closed form of MLX's affine 8-bit
/// layout (1 byte a weight plus an f16 scale and bias per group of 64, vectors f32).
#[cfg(feature = "mlx")]
#[test]
fn the_mlx_8bit_arm_is_close_to_its_source() {
    let Some(src) = testing::model("qwen2.5-coder-0.5b-q4_k_m") else {
        return;
    };
    if dataset("wiki").is_none() {
        return;
    }
    let _lock = testing::engine_lock();
    let qdir = tempfile::tempdir().unwrap();
    // SAFETY: the tests of this binary that read MEMWALL_QUANTS set it while they
    // hold the engine lock, before any arm is made.
    unsafe { std::env::set_var("MEMWALL_QUANTS", qdir.path()) };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dbdir = tempfile::tempdir().unwrap();
    let store = rt
        .block_on(Store::open(&dbdir.path().join("f.db")))
        .unwrap();
    let roof = MachineRoof {
        bandwidth: Gbps(40.0),
        stream_id: 0,
        read_bandwidth: None,
        peak_f32: Some(Gflops(500.0)),
        peak_int8: Some(Gflops(1000.0)),
        gpu: None,
    };
    let plan = FrontierPlan {
        source: src.clone(),
        arms: vec![QuantType::Mlx8bit],
        n_threads: 2,
        reps: 2,
        n_prompt: 32,
        n_gen: 8,
        speed: true,
        ppl: vec![PplConfig {
            dataset: "wiki".into(),
            n_ctx: 128,
            n_chunks: 3,
        }],
        kld: true,
        tasks: vec![],
        remeasure: vec![],
        sampler: false,
        guard: memwall_core::measure::guard::GuardOptions {
            allow_battery: true,
            skip_capacity_check: false,
        },
    };
    let out = rt
        .block_on(frontier::run_frontier(
            &store,
            plan.clone(),
            roof.clone(),
            "test".into(),
            |_| {},
            Arc::new(AtomicBool::new(false)),
        ))
        .unwrap();
    eprintln!("{}", frontier::table::render_markdown(&out.rows));
    assert_eq!(out.rows.len(), 2, "the source and the mlx-8bit arm");
    let source = out.rows.iter().find(|r| r.arm == "Q4_K_M").unwrap();
    let mlx = out.rows.iter().find(|r| r.arm == "mlx-8bit").unwrap();

    // Bytes: the closed form over the file's tensors.
    let gguf = memwall_core::probe::gguf::Gguf::open(&src).unwrap();
    let want: u64 = gguf
        .tensors
        .iter()
        .map(|t| {
            let n = t.n_elements();
            if t.dims.len() == 2 {
                n + n / 64 * 2 * 2
            } else {
                n * 4
            }
        })
        .sum();
    assert_eq!(mlx.file_bytes, want, "bytes MLX holds");
    // Streamed: the same, except that an untied token embedding (the file has its
    // own output.weight) is a gather of one row per step (probe::model's rule).
    let at8 = |n: u64| n + n / 64 * 2 * 2;
    let untied = gguf.tensors.iter().any(|t| t.name == "output.weight");
    let embd = gguf
        .tensors
        .iter()
        .find(|t| t.name == "token_embd.weight")
        .unwrap();
    let want_streamed = if untied {
        want - at8(embd.n_elements()) + at8(embd.dims[0])
    } else {
        want
    };
    assert_eq!(mlx.streamed_bytes, want_streamed, "bytes a step streams");
    assert!(
        (8.4..8.7).contains(&mlx.bits_per_weight),
        "{}",
        mlx.bits_per_weight
    );
    assert_eq!(mlx.relation, Relation::Above, "8.5 bits over Q4_K_M's");
    assert_eq!(mlx.sha256, source.sha256, "an MLX arm's file is its source");

    // Speed on MLX.
    let s = mlx.speed.as_ref().expect("speed cell");
    assert!(s.tg_tps > 0.0 && s.pp_tps > 0.0, "{s:?}");

    // Quality against the source.
    let p_src = source.ppl[0].1.as_ref().expect("source ppl");
    let p_mlx = mlx.ppl[0].1.as_ref().expect("mlx ppl");
    assert!(p_src.kld.is_none(), "the source is the KLD reference");
    let rel = (p_mlx.ppl / p_src.ppl - 1.0).abs();
    assert!(
        rel < MLX8_PPL_REL,
        "mlx-8bit PPL {} vs source {}",
        p_mlx.ppl,
        p_src.ppl
    );
    let k = p_mlx.kld.as_ref().expect("KLD vs the source");
    assert!(k.mean > 0.0 && k.mean < MLX8_KLD_MAX, "KLD mean {}", k.mean);
    // The reference's own PPL, from its logits in lockstep, is the source cell's.
    assert!(
        (k.ppl_ref / p_src.ppl - 1.0).abs() < 1e-6,
        "{} vs {}",
        k.ppl_ref,
        p_src.ppl
    );
    assert_eq!(p_mlx.n_scored, p_src.n_scored);

    // Stored under MLX's build; a second run finds every cell and measures nothing.
    let again = rt
        .block_on(frontier::run_frontier(
            &store,
            plan,
            roof,
            "test".into(),
            |_| {},
            Arc::new(AtomicBool::new(false)),
        ))
        .unwrap();
    assert_eq!(again.measured, 0);
    assert_eq!(again.skipped, 4);
    let builds: Vec<String> = rt
        .block_on(
            sqlx::query_scalar::<_, String>(
                "SELECT engine_build FROM frontier_cells WHERE arm_quant = 'mlx-8bit'",
            )
            .fetch_all(store.pool()),
        )
        .unwrap();
    assert_eq!(builds.len(), 2);
    for b in builds {
        assert!(b.starts_with("mlx ") && b.ends_with(", mlx-8bit"), "{b}");
    }
}
