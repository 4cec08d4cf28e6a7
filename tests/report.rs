//! `memwall report` end to end: a store built through real jobs (a bench on a real
//! model, a KV verification, and a speculative gate + bench through the store's own
//! functions), the report written from it, the independent verifier run on it (and
//! failing on a planted wrong number), the report following a changed row, and
//! report.html opened in Chromium.

use memwall_core::testing;
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
    let row = SpecBenchRow::example();
    let prov = GateProvenance {
        target_file: row.target_file.clone(),
        target_sha256: row.target_sha256.clone(),
        prompt_set_sha256: row.prompt_set_sha256.clone(),
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
