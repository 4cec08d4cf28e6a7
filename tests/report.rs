//! `memwall report` end to end: a store built through real jobs (a bench on a real
//! model, a KV verification, and a speculative gate + bench through the store's own
//! functions), the report written from it, the independent verifier run on it (and
//! failing on a planted wrong number), the report following a changed row, and
//! report.html opened in Chromium.

use memwall_testkit as testing;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn memwall(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memwall"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("MEMWALL_DB")
        .output()
        .expect("run memwall")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn verify(db: &Path, report: &Path) -> Output {
    Command::new("python3")
        .arg(repo().join("tools/verify/verify.py"))
        .arg("--db")
        .arg(db)
        .arg("--report")
        .arg(report)
        .output()
        .expect("python3 runs (the verifier needs only its standard library)")
}

/// Runs SQL on a copy of a store with Python's sqlite3 (the test links no SQLite client).
fn sql(db: &Path, statement: &str) {
    let o = Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3,sys; d=sqlite3.connect(sys.argv[1]); n=d.execute(sys.argv[2]).rowcount; d.commit(); assert n == 1, n",
        )
        .arg(db)
        .arg(statement)
        .output()
        .unwrap();
    assert!(o.status.success(), "{statement}: {}", text(&o.stderr));
}

/// A speculative gate and a gated bench cell, stored through the speculative slice's
/// own store functions (the same rows `memwall spec gate` / `spec bench` write).
fn gate_and_bench(db: &Path) {
    use memwall_core::experiments::speculative::gate::{DrafterKind, GateRow, TokenizedPrompt};
    use memwall_core::experiments::speculative::prompts::{Category, Format};
    use memwall_core::experiments::speculative::run::SpecStats;
    use memwall_core::experiments::speculative::store::{self as ss, GateProvenance, SpecBenchRow};
    use memwall_core::store::{NewRun, Store};
    let run = |kind: &str| NewRun {
        kind: kind.into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        finished_at: "2026-01-01T00:01:00Z".into(),
        command: "memwall spec".into(),
        host: memwall_core::probe::hw::host_info(),
        notes: String::new(),
        guard: None,
    };
    let mut row = SpecBenchRow::example();
    // The example's means and standard deviations as the bench computes them from its
    // per-repetition samples (the verifier recomputes them).
    let stats = |x: &Option<Vec<f64>>| {
        memwall_core::measure::stats::Observations::new(x.clone().unwrap()).unwrap()
    };
    let (tps, sp) = (stats(&row.tps_samples), stats(&row.speedup_samples));
    row.tps_mean = Some(tps.mean());
    row.tps_std = Some(tps.std_dev());
    row.speedup_mean = Some(sp.mean());
    row.speedup_std = Some(sp.std_dev());
    let prov = GateProvenance {
        target_file: row.target_file.clone(),
        target_sha256: row.target_sha256.clone(),
        prompt_set_sha256: row.prompt_set_sha256.clone(),
        prompt_set: "builtin:prompts/spec.jsonl".into(),
        engine_build: row.engine_build.clone(),
        max_new: row.max_new,
        n_prompts_set: 2,
    };
    let prompts: Vec<TokenizedPrompt> = ["code-01", "code-02"]
        .iter()
        .map(|id| TokenizedPrompt {
            id: (*id).into(),
            category: Category::Code,
            format: Format::Raw,
            tokens: vec![1, 2, 3],
        })
        .collect();
    let gate = GateRow {
        drafter_key: row.drafter_key.clone(),
        drafter: DrafterKind::DraftModel,
        k: row.k,
        n_prompts: 2,
        n_identical: 2,
        first_diff: None,
        stats: SpecStats::default(),
        shape_gap: None,
        tie_tolerance: 0.0,
    };
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let s = Store::open(db).await.unwrap();
        ss::insert_gate_run(&s, &run("spec-gate"), &prov, &prompts, &[gate], &[])
            .await
            .unwrap();
        let gates = ss::greedy_gates(
            &s,
            &prov.target_sha256,
            &prov.engine_build,
            &prov.prompt_set_sha256,
        )
        .await
        .unwrap();
        let mut rows = vec![row];
        ss::attach_gates(&mut rows, &gates).unwrap();
        ss::insert_bench_run(&s, &run("spec-bench"), &mut rows)
            .await
            .unwrap();
    })
}

/// The cells of report.md's table rows (header and separator rows left out).
fn md_cells(md: &str) -> Vec<String> {
    md.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| ---") && l.contains("[^"))
        .flat_map(|l| {
            l.trim()
                .trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn report_from_real_runs_passes_the_verifier_and_a_planted_error_fails_it() {
    let Some(model) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let m = model.to_str().unwrap();
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("m.db");
    {
        let _lock = testing::engine_lock();
        let o = memwall(
            &db,
            &[
                "bench",
                "-m",
                m,
                "-p",
                "16",
                "-n",
                "4",
                "-d",
                "0,16",
                "--n-seqs",
                "1,2",
                "-r",
                "2",
                "--quiet",
                "--results-dir",
            ]
            .into_iter()
            .chain([d.path().join("results").to_str().unwrap()])
            .collect::<Vec<_>>(),
        );
        assert!(o.status.success(), "bench: {}", text(&o.stderr));
        let o = memwall(&db, &["kv", "verify", "-m", m, "-n", "32", "--ctk", "f16"]);
        assert!(o.status.success(), "kv verify: {}", text(&o.stderr));
    }
    gate_and_bench(&db);

    // The report, verified by the independent script through `--verify`.
    let out = d.path().join("report");
    let o = memwall(&db, &["report", "--out", out.to_str().unwrap(), "--verify"]);
    assert!(o.status.success(), "report --verify: {}", text(&o.stderr));
    let stdout = text(&o.stdout);
    for s in [
        "| [1. Machines and their measured roofs](#machines) | 7 |",
        "Bench: pp/tg rates under their ceilings](#bench) | 6 |",
        "Speculative decoding: gate, bench and cost model](#speculative) | 2 |",
        "bench: decode ceiling = n_seqs x bandwidth / bytes per step",
        "spec: each speedup has a passed greedy gate behind it",
        "kv: measured / formula",
        "report: each printed number is its value, rounded",
    ] {
        assert!(stdout.contains(s), "missing {s:?} in:\n{stdout}");
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for s in [
        "**Not measured:** no load test stored: run `memwall serve` and `memwall loadtest --url URL`",
        // The bench ran with the live sampler: its rows have energy figures, or say
        // why not (a VM without readable counters).
        "**Energy per token**",
        "[^row_energy-1]: row_energy row 1, run 2",
        "**Not measured:** no frontier cells",
        "[^bench_results-1]: bench_results row 1, run 2",
        "![Roofline of",
    ] {
        assert!(md.contains(s), "missing {s:?} in report.md");
    }
    // No NaN, inf, undefined or empty cell: a missing value prints "—".
    let cells = md_cells(&md);
    assert!(cells.len() > 100, "{} cells", cells.len());
    for c in &cells {
        assert!(
            !c.is_empty() && !["NaN", "inf", "-inf", "undefined", "null"].contains(&c.as_str()),
            "cell {c:?}"
        );
    }
    assert!(
        cells.iter().any(|c| c == "—"),
        "prefill rows have no read ceiling: —"
    );
    // Every chart as PNG + SVG, each PNG a PNG.
    let charts: Vec<_> = std::fs::read_dir(out.join("charts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let svgs = charts
        .iter()
        .filter(|p| p.extension().unwrap() == "svg")
        .count();
    let pngs: Vec<_> = charts
        .iter()
        .filter(|p| p.extension().unwrap() == "png")
        .collect();
    assert!(svgs >= 5 && svgs == pngs.len(), "{charts:?}");
    for p in pngs {
        assert_eq!(&std::fs::read(p).unwrap()[1..4], b"PNG", "{}", p.display());
    }

    // The same verifier on a copy with one planted wrong number fails, naming the row.
    let planted = d.path().join("planted.db");
    std::fs::copy(&db, &planted).unwrap();
    sql(
        &planted,
        "UPDATE bench_results SET ceiling_ts = ceiling_ts * 1.02 WHERE id = (SELECT MIN(id) FROM bench_results WHERE n_prompt = 0)",
    );
    let o = verify(&planted, &out);
    assert!(!o.status.success(), "{}", text(&o.stdout));
    let v = text(&o.stdout);
    assert!(
        v.contains(
            "FAILED bench: decode ceiling = n_seqs x bandwidth / bytes per step: bench_results row"
        ),
        "{v}"
    );
    assert!(
        v.contains("FAILED report: each figure equals its row's value"),
        "{v}"
    );
    // And on the untouched store it passes.
    let o = verify(&db, &out);
    assert!(o.status.success(), "{}", text(&o.stdout));

    // Change a stored row: the regenerated report changes with it.
    let changed = d.path().join("changed.db");
    std::fs::copy(&db, &changed).unwrap();
    sql(
        &changed,
        "UPDATE stream_results SET best_gbps = 123.456 WHERE kernel = 'copy'",
    );
    let out2 = d.path().join("report2");
    let o = memwall(&changed, &["report", "--out", out2.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let md2 = std::fs::read_to_string(out2.join("report.md")).unwrap();
    assert!(
        md2.contains("| copy | 2 | 123.46 | — |") || md2.contains("| 123.46 |"),
        "{md2}"
    );
    assert!(!md.contains("123.46"));
    // Regenerating from the unchanged store gives the same bytes (deterministic).
    let out3 = d.path().join("report3");
    assert!(
        memwall(&db, &["report", "--out", out3.to_str().unwrap()])
            .status
            .success()
    );
    assert_eq!(
        std::fs::read_to_string(out3.join("report.md")).unwrap(),
        md.replace(&out.display().to_string(), &out3.display().to_string())
    );

    // report.html in Chromium: every chart decodes (skips loudly without node/chromium).
    if Command::new("node").arg("--version").output().is_ok() {
        let shot = repo().join("target/e2e/report-screenshot.png");
        std::fs::create_dir_all(shot.parent().unwrap()).unwrap();
        let o = Command::new("node")
            .arg(repo().join("tests/e2e/report-html.mjs"))
            .arg(&out)
            .arg(&shot)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
        eprintln!("{}{}", text(&o.stdout), text(&o.stderr));
    } else {
        eprintln!(
            "\n!!!!!!!! SKIP: node not installed: report.html not opened in Chromium !!!!!!!!\n"
        );
        assert_ne!(std::env::var("MEMWALL_REQUIRE_E2E").as_deref(), Ok("1"));
    }
}

#[test]
fn rerun_names_the_manifest_and_the_experiment_that_failed() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("m.db");
    let manifest = d.path().join("m.toml");
    std::fs::write(
        &manifest,
        "[[experiment]]\nname = \"broken\"\nargs = [\"bench\", \"-m\", \"/nonexistent/model.gguf\"]\n",
    )
    .unwrap();
    let o = memwall(
        &db,
        &[
            "report",
            "--out",
            d.path().join("r").to_str().unwrap(),
            "--rerun",
            manifest.to_str().unwrap(),
        ],
    );
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(e.contains("m.toml: experiment \"broken\" failed"), "{e}");
    assert!(e.contains("/nonexistent/model.gguf"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    // The example manifest in bench/ parses.
    let m = memwall_core::experiments::report::manifest::Manifest::load(
        &repo().join("bench/report-manifest.toml"),
    )
    .unwrap();
    assert!(m.experiment.iter().any(|e| e.args[0] == "bench"));
}

// ---------------------------------------------------------------------------------------
// The verifier on a store that covers every family it recomputes: a real bench run, and
// fixture runs written through memwall's own store functions and computed by memwall's
// own code (energy over a synthetic sampler recording with RAPL counters, a load test
// from synthetic per-request samples, a speculative bench from synthetic timed decodes,
// a serve run). tools/verify/plant.py then plants one error per family in copies of it.

mod fixture {
    use memwall_core::measure::sampler::session::{Interval, Phase, Recording};
    use memwall_core::measure::sampler::{Counter, Sample};
    use memwall_core::store::NewRun;

    /// A run on this machine (bench rows cloned from the real run keep its host facts).
    pub fn run(kind: &str, notes: &str) -> NewRun {
        NewRun {
            kind: kind.into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: "2026-01-01T00:01:00Z".into(),
            command: format!("memwall test fixture: {kind}"),
            host: memwall_core::probe::hw::host_info(),
            notes: notes.into(),
            guard: None,
        }
    }

    /// Builds a sampler recording on a synthetic machine with RAPL package and DRAM
    /// energy counters (package power 20 W + 4 W × sin(t / 0.5 s), DRAM 3 W), CPU time
    /// counters (1.4 cores busy, 1.1 of them memwall's own, 0.02 stolen) and a CPU
    /// temperature; its reads come every 10 ms, 1.234567 ms after each 10 ms mark.
    pub struct Rec {
        t: u64,
        phases: Vec<Phase>,
        intervals: Vec<Interval>,
    }

    const STEP: u64 = 10_000_000;
    const OFFSET: u64 = 1_234_567;

    impl Rec {
        pub fn new() -> Rec {
            Rec {
                t: 50_000_000,
                phases: vec![],
                intervals: vec![],
            }
        }

        /// The idle baseline: phase `idle`, one interval of `len` ns.
        pub fn idle(&mut self, len: u64) {
            self.phase("idle", &[len], 0);
            self.intervals.last_mut().unwrap().rep = 0;
        }

        /// Phase `name`: an untimed 30 ms, then one interval per length (rep 1, 2, …)
        /// with `gap` ns of untimed work after each. Returns the phase's intervals.
        pub fn phase(&mut self, name: &str, lens: &[u64], gap: u64) -> Vec<(u64, u64)> {
            let start = self.t;
            self.t += 30_000_000;
            let mut out = vec![];
            for (i, &l) in lens.iter().enumerate() {
                self.intervals.push(Interval {
                    phase: name.into(),
                    rep: i as u32 + 1,
                    start_ns: self.t,
                    end_ns: self.t + l,
                });
                out.push((self.t, self.t + l));
                self.t += l + gap;
            }
            self.phases.push(Phase {
                name: name.into(),
                start_ns: start,
                end_ns: self.t,
            });
            self.t += 20_000_000;
            out
        }

        pub fn finish(self) -> Recording {
            let counter = |name: &str, ok: bool| Counter {
                name: name.into(),
                source: if ok { "fixture" } else { "absent" }.into(),
                available: ok,
                reason: (!ok).then(|| format!("{name}: not on this fixture machine")),
            };
            let mut samples = vec![];
            let mut k = 0;
            while k * STEP + OFFSET <= self.t + STEP {
                let t_ns = k * STEP + OFFSET;
                let t = t_ns as f64 / 1e9;
                samples.push(Sample {
                    t_ns,
                    cpu_energy_j: Some(20.0 * t + 4.0 * 0.5 * (1.0 - (t / 0.5).cos())),
                    dram_energy_j: Some(3.0 * t),
                    cpu_power_w: Some(20.0 + 4.0 * (t / 0.5).sin()),
                    dram_power_w: Some(3.0),
                    cpu_temp_c: Some(55.0 + 5.0 * t.sin()),
                    cpu_mhz: Some(2450.0),
                    mem_used_bytes: Some(1 << 30),
                    mem_total_bytes: Some(4 << 30),
                    cpu_busy_s: Some(1.4 * t),
                    own_cpu_s: Some(1.1 * t),
                    cpu_steal_s: Some(0.02 * t),
                    ..Sample::default()
                });
                k += 1;
            }
            Recording {
                hz: 100.0,
                samples,
                phases: self.phases,
                intervals: self.intervals,
                counters: vec![
                    counter("cpu_package_energy", true),
                    counter("dram_energy", true),
                    counter("cpu_temperature", true),
                    counter("cpu_time", true),
                    counter("gpu_power", false),
                    counter("gpu_energy", false),
                ],
            }
        }
    }
}

/// A bench run of the real run's rows under a synthetic recording with energy
/// counters: each row's phase holds intervals exactly as long as its samples_ns, and
/// its energy is computed by memwall (`live::row_energies`), as `memwall bench` does.
async fn fixture_bench_energy(s: &memwall_core::store::Store) {
    {
        let mut rows = s
            .bench_rows(&memwall_core::store::RowFilter::default())
            .await
            .unwrap();
        assert!(!rows.is_empty());
        let mut rec = fixture::Rec::new();
        rec.idle(2_000_000_000);
        let mut names = vec![];
        for (i, r) in rows.iter().enumerate() {
            let name = format!("#{i} {}", r.test_label());
            rec.phase(&name, &r.samples_ns, 40_000_000);
            names.push(name);
        }
        let rec = rec.finish();
        let mut tx = s.begin().await.unwrap();
        let run = fixture::run(
            "bench",
            "fixture: the real bench run's rows under a synthetic sampler recording with RAPL counters",
        );
        let run_id = s.insert_run_tx(&mut tx, &run).await.unwrap();
        s.insert_bench_rows_tx(&mut tx, run_id, &mut rows)
            .await
            .unwrap();
        let energy = memwall_core::experiments::live::row_energies(&rec, &rows, &names);
        assert!(
            energy.iter().all(|e| e.energy.j_per_token.is_some()),
            "{energy:?}"
        );
        memwall_core::experiments::live::store::insert_tx(s, &mut tx, run_id, &rec, &energy)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
}

/// A load-test run of two levels from synthetic per-request samples, summarised by
/// memwall (`loadtest::metrics::summarize`, `add_bandwidth` at the model file's bytes
/// per token), each level's energy over its measured span: the first level long
/// enough to integrate, the second 8 ms (too short: `—` with the reason).
async fn fixture_loadtest(s: &memwall_core::store::Store, model: &Path) {
    use memwall_core::experiments::loadtest::metrics::{
        BytesFrom, ServerRoof, add_bandwidth, summarize,
    };
    use memwall_core::experiments::loadtest::plan::{Endpoint, Load, Slo, Workload};
    use memwall_core::experiments::loadtest::run::{Outcome, RequestSample};
    use memwall_core::experiments::loadtest::store::{LoadProvenance, insert_loadtest_run};
    let req =
        |index: usize, start: f64, chunks: &[f64], end: f64, usage: Option<u64>| RequestSample {
            index,
            start_ms: start,
            outcome: Outcome::Ok,
            chunk_ms: chunks.to_vec(),
            e2el_ms: end,
            usage_prompt_tokens: usage.map(|_| 17),
            usage_completion_tokens: usage,
            cached_tokens: usage.map(|_| index as u64 % 3),
            text: String::new(),
            finish_reason: Some("length".into()),
            retry_after_s: None,
            error: None,
        };
    let failed = RequestSample {
        outcome: Outcome::Failed,
        chunk_ms: vec![],
        usage_prompt_tokens: None,
        usage_completion_tokens: None,
        cached_tokens: None,
        error: Some("fixture: connection reset".into()),
        ..req(5, 300.0, &[], 12.5, None)
    };
    let slo = Slo::parse("ttft:60,tpot:25").unwrap();
    let facts = memwall_core::probe::model::ModelFacts::open(model).unwrap();
    let roof = ServerRoof {
        gbps: 24.5,
        source: "--roof 24.5 GB/s (declared)".into(),
    };
    let mut rec = fixture::Rec::new();
    rec.idle(1_500_000_000);
    // Level 1: 2 clients, 5 completed requests and one failed, 1.2 s.
    let level1 = vec![
        req(0, 0.0, &[41.0, 60.0, 83.5, 101.0, 130.0], 131.0, Some(8)),
        req(1, 0.5, &[55.0, 70.0, 99.0, 120.0], 121.5, Some(8)),
        req(2, 131.5, &[30.0, 52.0, 70.0], 71.0, Some(4)),
        req(3, 122.0, &[75.5, 91.0], 140.0, Some(2)),
        req(
            4,
            203.0,
            &[22.0, 40.0, 61.0, 79.0, 97.0, 120.0],
            125.0,
            Some(9),
        ),
        failed,
    ];
    let ns1: u64 = 1_200_000_000;
    rec.phase("#0 concurrency 2", &[ns1], 0);
    let mut p1 = summarize(
        Load::Closed { concurrency: 2 },
        level1,
        ns1 as f64 / 1e9,
        &slo,
        None,
    )
    .unwrap();
    add_bandwidth(
        &mut p1,
        Ok(BytesFrom::File(&facts, Default::default())),
        16,
        Ok(&roof),
    );
    // Level 2: no usage from the server (tokens counted as chunks), no roof named, 8 ms.
    let level2 = vec![
        req(0, 0.0, &[1.5, 3.0, 4.5], 5.0, None),
        req(1, 0.1, &[2.0, 3.5, 5.0, 6.0], 7.5, None),
    ];
    let ns2: u64 = 8_000_000;
    rec.phase("#1 concurrency 4", &[ns2], 0);
    let mut p2 = summarize(
        Load::Closed { concurrency: 4 },
        level2,
        ns2 as f64 / 1e9,
        &slo,
        None,
    )
    .unwrap();
    add_bandwidth(
        &mut p2,
        Ok(BytesFrom::File(&facts, Default::default())),
        16,
        Err("the server's roof is unknown: it publishes none and --roof was not given"),
    );
    let rec = rec.finish();
    p1.energy = Some(rec.energy("#0 concurrency 2", p1.total_output_tokens));
    p2.energy = Some(rec.energy("#1 concurrency 4", p2.total_output_tokens));
    assert!(p1.energy.as_ref().unwrap().j_per_token.is_some());
    assert!(p2.energy.as_ref().unwrap().j_per_token.is_none());
    let prov = LoadProvenance {
        url: "http://127.0.0.1:9/fixture".into(),
        endpoint: Endpoint::Completions,
        request_model: "fixture".into(),
        server_model: None,
        server_header: None,
        system_fingerprint: None,
        model_file: Some(model.display().to_string()),
        workload: Workload {
            input_tokens: 16,
            output_tokens: 8,
            shared_prefix_tokens: 0,
            ignore_eos: true,
            seed: 1,
        },
        slo,
    };
    let run = fixture::run(
        "loadtest",
        "fixture: synthetic per-request samples and sampler recording",
    );
    insert_loadtest_run(s, &run, &prov, &[p1, p2], Some(&rec))
        .await
        .unwrap();
}

/// A speculative gate and bench: a target-only row and a draft-model k = 4 row, 3
/// repetitions of 2 prompts each (20 + 12 tokens), whose tok/s come from synthetic
/// timed decodes recorded as the sampler's intervals; energy by memwall
/// (`speculative::bench::row_energy`).
async fn fixture_spec(s: &memwall_core::store::Store) {
    use memwall_core::experiments::speculative::bench::{phase_label, row_energy};
    use memwall_core::experiments::speculative::gate::{DrafterKind, GateRow, TokenizedPrompt};
    use memwall_core::experiments::speculative::prompts::{Category, Format};
    use memwall_core::experiments::speculative::run::SpecStats;
    use memwall_core::experiments::speculative::store::{self as ss, GateProvenance, SpecBenchRow};
    use memwall_core::measure::stats::Observations;
    let emitted_per_rep = 32u64;
    // Decode ns of each prompt in each repetition.
    let base_ns = [
        [610_000_000u64, 402_000_000],
        [598_500_000, 415_250_000],
        [620_125_000, 399_000_000],
    ];
    let spec_ns = [
        [480_000_000u64, 355_500_000],
        [470_000_250, 349_000_000],
        [501_000_000, 362_750_000],
    ];
    let mut rec = fixture::Rec::new();
    rec.idle(1_000_000_000);
    let tps = |ns: &[[u64; 2]; 3]| -> Vec<f64> {
        ns.iter()
            .map(|r| emitted_per_rep as f64 / ((r[0] + r[1]) as f64 * 1e-9))
            .collect()
    };
    for rep in 0..3 {
        rec.phase(
            &phase_label("code", "none", 0, rep),
            &base_ns[rep],
            25_000_000,
        );
        rec.phase(
            &phase_label("code", "draft-model", 4, rep),
            &spec_ns[rep],
            25_000_000,
        );
    }
    let rec = rec.finish();
    let (t0, t1) = (tps(&base_ns), tps(&spec_ns));
    let sp: Vec<f64> = t1.iter().zip(&t0).map(|(a, b)| a / b).collect();
    let st = |x: &[f64]| Observations::new(x.to_vec()).unwrap();
    let example = SpecBenchRow::example();
    let base = SpecBenchRow {
        draft_file: None,
        drafter_kind: "none".into(),
        drafter_key: "none".into(),
        k: 0,
        reps: 3,
        prompt_ids: vec!["code-01".into(), "code-02".into()],
        tps_samples: Some(t0.clone()),
        tps_mean: Some(st(&t0).mean()),
        tps_std: Some(st(&t0).std_dev()),
        speedup_samples: None,
        speedup_mean: None,
        speedup_std: None,
        predicted_speedup: None,
        acceptance_rate: None,
        alpha_hat: None,
        mean_accepted: None,
        tokens_per_target_pass: None,
        n_drafted: 0,
        n_accepted: 0,
        n_iterations: 3 * emitted_per_rep,
        n_emitted: 3 * emitted_per_rep,
        draft_ns_per_iteration: None,
        verify_ns_per_iteration: None,
        ..example.clone()
    };
    let spec = SpecBenchRow {
        reps: 3,
        prompt_ids: vec!["code-01".into(), "code-02".into()],
        tps_samples: Some(t1.clone()),
        tps_mean: Some(st(&t1).mean()),
        tps_std: Some(st(&t1).std_dev()),
        speedup_samples: Some(sp.clone()),
        speedup_mean: Some(st(&sp).mean()),
        speedup_std: Some(st(&sp).std_dev()),
        // 56 target passes, each emitting its accepted drafts and one token of its own.
        n_drafted: 60,
        n_accepted: 40,
        n_iterations: 56,
        n_emitted: 3 * emitted_per_rep,
        acceptance_rate: Some(40.0 / 60.0),
        mean_accepted: Some(40.0 / 56.0),
        tokens_per_target_pass: Some(96.0 / 56.0),
        ..example.clone()
    };
    let prov = GateProvenance {
        target_file: example.target_file.clone(),
        target_sha256: example.target_sha256.clone(),
        prompt_set_sha256: example.prompt_set_sha256.clone(),
        prompt_set: "builtin:prompts/spec.jsonl".into(),
        engine_build: example.engine_build.clone(),
        max_new: example.max_new,
        n_prompts_set: 2,
    };
    let prompts: Vec<TokenizedPrompt> = ["code-01", "code-02"]
        .iter()
        .map(|id| TokenizedPrompt {
            id: (*id).into(),
            category: Category::Code,
            format: Format::Raw,
            tokens: vec![1, 2, 3],
        })
        .collect();
    let gate = GateRow {
        drafter_key: example.drafter_key.clone(),
        drafter: DrafterKind::DraftModel,
        k: example.k,
        n_prompts: 2,
        n_identical: 2,
        first_diff: None,
        stats: SpecStats::default(),
        shape_gap: None,
        tie_tolerance: 0.0,
    };
    ss::insert_gate_run(
        s,
        &fixture::run("spec-gate", "fixture"),
        &prov,
        &prompts,
        &[gate],
        &[],
    )
    .await
    .unwrap();
    let gates = ss::greedy_gates(
        s,
        &prov.target_sha256,
        &prov.engine_build,
        &prov.prompt_set_sha256,
    )
    .await
    .unwrap();
    let mut rows = vec![base, spec];
    ss::attach_gates(&mut rows, &gates).unwrap();
    let energy: Vec<_> = rows.iter().map(|r| row_energy(&rec, r)).collect();
    assert!(
        energy
            .iter()
            .all(|e| e.as_ref().unwrap().j_per_token.is_some()),
        "{energy:?}"
    );
    let run = fixture::run(
        "spec-bench",
        "fixture: synthetic timed decodes and sampler recording",
    );
    ss::insert_bench_run_sampled(s, &run, &mut rows, Some((&rec, &energy)))
        .await
        .unwrap();
}

/// A set-acceptance run (α = 0.75, k = 3) beside its target-only baseline: its
/// prediction stored first, its pair's greedy gate, 3 repetitions of 2 prompts (24
/// tokens each repetition) from synthetic timed decodes; energy by memwall
/// (`speculative::synth::row_energy`, phases named by `synth::phase_label`).
async fn fixture_synth(s: &memwall_core::store::Store) {
    use memwall_core::experiments::speculative::cost::Timings;
    use memwall_core::experiments::speculative::gate::{DrafterKind, GateRow, TokenizedPrompt};
    use memwall_core::experiments::speculative::prompts::{Category, Format};
    use memwall_core::experiments::speculative::run::SpecStats;
    use memwall_core::experiments::speculative::store::{self as ss, GateProvenance};
    use memwall_core::experiments::speculative::synth::{
        SpecSynthRow, SynthCalibration, SynthPrediction, phase_label, row_energy,
    };
    use memwall_core::measure::stats::Observations;
    let (alpha, k, per_rep) = (0.75, 3usize, 24u64);
    let (target, drafter_key, build, set) = (
        "ab".repeat(32),
        "draft:cdcdcdcdcdcdcdcd",
        "llama-cpp-sys-2 fixture",
        "ef".repeat(32),
    );
    let base_ns = [
        [300_000_000u64, 205_500_000],
        [310_250_000, 199_000_000],
        [295_000_000, 201_000_000],
    ];
    let spec_ns = [
        [240_000_000u64, 170_000_000],
        [236_500_000, 168_250_000],
        [251_000_000, 166_000_000],
    ];
    let tps = |ns: &[[u64; 2]; 3]| -> Vec<f64> {
        ns.iter()
            .map(|r| per_rep as f64 / ((r[0] + r[1]) as f64 * 1e-9))
            .collect()
    };
    let mut rec = fixture::Rec::new();
    rec.idle(1_000_000_000);
    for rep in 0..3 {
        rec.phase(&phase_label(None, 0, None, rep), &base_ns[rep], 25_000_000);
        rec.phase(
            &phase_label(Some(alpha), k, None, rep),
            &spec_ns[rep],
            25_000_000,
        );
    }
    let rec = rec.finish();
    let host = memwall_core::probe::hw::host_info().hostname;
    let cal = SynthCalibration {
        prompt_id: "code-01".into(),
        timings: Timings {
            t_verify_ns: vec![9e6, 9.5e6, 10e6, 10.5e6, 11e6],
            t_draft_ns: 2e6,
            depth: 40,
            overheads: Vec::new(),
            draft_rows_ns: Vec::new(),
            tree_overheads: Vec::new(),
        },
        predictions: vec![SynthPrediction {
            alpha,
            k,
            predicted_speedup: 1.3,
            tree: None,
        }],
    };
    let pred = ss::insert_synth_predictions(s, &host, &target, drafter_key, build, &cal)
        .await
        .unwrap();
    let prov = GateProvenance {
        target_file: "t.gguf".into(),
        target_sha256: target.clone(),
        prompt_set_sha256: set.clone(),
        prompt_set: "builtin:prompts/spec.jsonl".into(),
        engine_build: build.into(),
        max_new: 32,
        n_prompts_set: 2,
    };
    let prompts: Vec<TokenizedPrompt> = ["code-01", "code-02"]
        .iter()
        .map(|id| TokenizedPrompt {
            id: (*id).into(),
            category: Category::Code,
            format: Format::Raw,
            tokens: vec![1, 2, 3],
        })
        .collect();
    let gate = GateRow {
        drafter_key: drafter_key.into(),
        drafter: DrafterKind::DraftModel,
        k,
        n_prompts: 2,
        n_identical: 2,
        first_diff: None,
        stats: SpecStats::default(),
        shape_gap: None,
        tie_tolerance: 0.0,
    };
    ss::insert_gate_run(
        s,
        &fixture::run("spec-gate", "fixture"),
        &prov,
        &prompts,
        &[gate],
        &[],
    )
    .await
    .unwrap();
    let gate_id = ss::greedy_gates(s, &target, build, &set)
        .await
        .unwrap()
        .iter()
        .find(|g| g.drafter_key == drafter_key && g.k == k)
        .unwrap()
        .id;
    let (t0, t1) = (tps(&base_ns), tps(&spec_ns));
    let sp: Vec<f64> = t1.iter().zip(&t0).map(|(a, b)| a / b).collect();
    let st = |x: &[f64]| Observations::new(x.to_vec()).unwrap();
    let base = SpecSynthRow {
        id: 0,
        run_id: 0,
        prediction_id: None,
        alpha_set: None,
        k: 0,
        target_file: "t.gguf".into(),
        target_sha256: target.clone(),
        draft_file: "d.gguf".into(),
        drafter_key: drafter_key.into(),
        seed: 7,
        prompt_set_sha256: set.clone(),
        prompt_set: Some("builtin:prompts/spec.jsonl".into()),
        prompt_ids: vec!["code-01".into(), "code-02".into()],
        max_new: 32,
        reps: 3,
        n_threads: 2,
        n_gpu_layers: 0,
        tps_samples: t0.clone(),
        tps_mean: Some(st(&t0).mean()),
        tps_std: Some(st(&t0).std_dev()),
        speedup_samples: None,
        speedup_mean: None,
        speedup_std: None,
        predicted_speedup: None,
        predicted_after: None,
        alpha_hat: None,
        n_tested: 0,
        n_drafted: 0,
        n_accepted: 0,
        n_iterations: 3 * per_rep,
        n_emitted: 3 * per_rep,
        n_draft_passes: 0,
        n_draws: 0,
        n_right: 0,
        stats_json: "{}".into(),
        timings_json: "{}".into(),
        engine_build: build.into(),
        build_commit: "fixture".into(),
        measured_at: "2099-01-01T00:00:00Z".into(),
        hostname: host.clone(),
        cpu_info: "cpu".into(),
        gpu_info: None,
        gate_id: None,
    };
    let spec = SpecSynthRow {
        prediction_id: Some(pred[0]),
        alpha_set: Some(alpha),
        k,
        tps_samples: t1.clone(),
        tps_mean: Some(st(&t1).mean()),
        tps_std: Some(st(&t1).std_dev()),
        speedup_samples: Some(sp.clone()),
        speedup_mean: Some(st(&sp).mean()),
        speedup_std: Some(st(&sp).std_dev()),
        predicted_speedup: Some(1.3),
        alpha_hat: Some(0.74),
        n_tested: 50,
        n_drafted: 54,
        n_accepted: 37,
        n_iterations: 35,
        n_draft_passes: 54,
        n_draws: 54,
        n_right: 40,
        gate_id: Some(gate_id),
        ..base.clone()
    };
    let mut rows = vec![base, spec];
    let energy: Vec<_> = rows.iter().map(|r| row_energy(&rec, r)).collect();
    assert!(
        energy
            .iter()
            .all(|e| e.as_ref().unwrap().j_per_token.is_some()),
        "{energy:?}"
    );
    let run = fixture::run(
        "spec-synth",
        "fixture: synthetic timed decodes and sampler recording",
    );
    ss::insert_synth_run(s, &run, &mut rows, Some((&rec, &energy)))
        .await
        .unwrap();
}

/// A serve run: 6.5 s of serving, 700 tokens generated; energy by memwall.
async fn fixture_serve(s: &memwall_core::store::Store) {
    let mut rec = fixture::Rec::new();
    rec.phase("serving", &[6_500_000_000], 0);
    let rec = rec.finish();
    let energy = rec.energy("serving", 700);
    assert!(energy.j_per_token.is_some());
    memwall_core::experiments::serve::store::insert_serve_run(
        s,
        &fixture::run("serve", "fixture: 700 tokens generated"),
        &rec,
        Some(("serving", &energy)),
    )
    .await
    .unwrap();
}

/// The family table of verify.py's output (its header to the first FAILED or
/// NOT CHECKABLE line).
fn family_table(out: &str) -> Vec<String> {
    out.lines()
        .skip_while(|l| !l.starts_with("family "))
        .take_while(|l| {
            !l.starts_with("FAILED") && !l.starts_with("NOT CHECKABLE") && !l.starts_with("...")
        })
        .map(str::to_string)
        .collect()
}

/// `family: passed failed not-checkable` of one family line.
fn family_counts(table: &[String], family: &str) -> (i64, i64, i64) {
    let line = table
        .iter()
        .find(|l| l.starts_with(&format!("{family}  ")))
        .unwrap_or_else(|| panic!("no family {family} in {table:?}"));
    let n: Vec<i64> = line[family.len()..]
        .split_whitespace()
        .take(4)
        .map(|x| x.parse().unwrap())
        .collect();
    (n[1], n[2], n[3])
}

#[test]
fn the_verifier_recomputes_every_family_from_raw_samples_and_each_planted_error_fails_it() {
    let kept = repo().join("target/e2e/verify-store.db");
    let _ = std::fs::remove_file(&kept);
    let Some(model) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("m.db");
    {
        let _lock = testing::engine_lock();
        let o = memwall(
            &db,
            &[
                "bench",
                "-m",
                model.to_str().unwrap(),
                "-p",
                "16",
                "-n",
                "4",
                "-d",
                "0",
                "--n-seqs",
                "1,2",
                "-r",
                "3",
                "--quiet",
                "--no-results",
            ],
        );
        assert!(o.status.success(), "bench: {}", text(&o.stderr));
    }
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let s = memwall_core::store::Store::open(&db).await.unwrap();
        fixture_bench_energy(&s).await;
        fixture_loadtest(&s, &model).await;
        fixture_spec(&s).await;
        fixture_synth(&s).await;
        fixture_serve(&s).await;
    });

    let run_verify = |store: &str| {
        Command::new("python3")
            .arg(repo().join("tools/verify/verify.py"))
            .arg("--db")
            .arg(store)
            .output()
            .expect("python3 runs")
    };
    let o = run_verify(db.to_str().unwrap());
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    eprintln!("{out}");
    let table = family_table(&out);
    for fam in ["bench", "implied bandwidth", "energy", "loadtest", "spec"] {
        let (passed, failed, _) = family_counts(&table, fam);
        assert!(passed > 0 && failed == 0, "{fam}: {table:?}");
    }
    for check in [
        "bench: avg_ts from samples_ns",
        "bench: samples_ns are the lengths of the row's timed intervals (sampler_intervals)",
        "energy: row_energy.j_per_token from sampler_series+sampler_intervals",
        "energy: loadtest_energy.j_per_token from sampler_series+sampler_intervals",
        "energy: spec_bench_energy.j_per_token from sampler_series+sampler_intervals",
        "energy: spec_synth_energy.j_per_token from sampler_series+sampler_intervals",
        "energy: serve_energy.j_per_token from sampler_series+sampler_intervals",
        "loadtest: ttft_p90_ms from samples_json",
        "loadtest: duration_s is its level's timed interval (sampler_intervals)",
        "spec: tps_samples from sampler_intervals",
        "spec: speedup_samples from sampler_intervals",
        "implied bandwidth: loadtest_points.implied_gbps from samples_json x bytes_per_token",
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(check))
            .unwrap_or_else(|| panic!("{check} not in\n{out}"));
        // passed, failed, not checkable: the line's last three numbers.
        let n: Vec<i64> = line
            .split_whitespace()
            .rev()
            .take(3)
            .map(|x| x.parse().unwrap())
            .collect();
        assert!(n[2] >= 1 && n[1] == 0, "{line}");
    }

    // One error planted per family, each in its own copy: every one fails the verifier.
    // The store is kept (`--save`, a consistent copy) for scripts/test.sh's step.
    std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
    let o = Command::new("python3")
        .arg(repo().join("tools/verify/plant.py"))
        .arg("--db")
        .arg(&db)
        .arg("--save")
        .arg(&kept)
        .output()
        .unwrap();
    let planted = text(&o.stdout);
    eprintln!("{planted}");
    assert!(o.status.success(), "{planted}{}", text(&o.stderr));
    assert!(
        planted.contains("every planted error failed the verifier"),
        "{planted}"
    );

    // The report of this store passes the verifier through `memwall report --verify`.
    let out_dir = d.path().join("report");
    let o = memwall(
        &db,
        &["report", "--out", out_dir.to_str().unwrap(), "--verify"],
    );
    assert!(
        o.status.success(),
        "report --verify: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );

    // The same store pushed to PostgreSQL, verified there through psql: the same counts
    // per family; a planted percentile in the database fails it.
    let Some(pg) = testing::PgCluster::start() else {
        return;
    };
    let url = pg.database("verify");
    let o = memwall(&db, &["push", "--to", &url]);
    assert!(
        o.status.success(),
        "push: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let o = run_verify(&url);
    let pg_out = text(&o.stdout);
    assert!(o.status.success(), "{pg_out}{}", text(&o.stderr));
    assert!(
        pg_out.contains("store: postgres://memwall@127.0.0.1:"),
        "{pg_out}"
    );
    assert_eq!(family_table(&pg_out), table, "{pg_out}");
    let o = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &url, "-c"])
        .arg("UPDATE loadtest_points SET ttft_p90_ms = ttft_p90_ms * 1.05 WHERE id = (SELECT MIN(id) FROM loadtest_points)")
        .output()
        .expect("psql (PostgreSQL's client) runs");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run_verify(&url);
    let v = text(&o.stdout);
    assert!(!o.status.success(), "{v}");
    assert!(
        v.contains("FAILED loadtest: ttft_p90_ms from samples_json: loadtest_points row"),
        "{v}"
    );
}
