//! End-to-end tests of the `memwall` binary: real models, a temporary database and
//! results folder, stdout/stderr and exit codes as a user sees them.

use memwall_core::testing;
use std::path::Path;
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

fn fixture() -> serde_json::Value {
    serde_json::from_str(include_str!("fixtures/model_facts.json")).unwrap()
}

#[test]
fn model_info_json_matches_gguf_py() {
    let d = tempfile::tempdir().unwrap();
    for (name, file) in [
        ("smollm2-135m-q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf"),
        ("gemma-3-270m-q4_k_m", "gemma-3-270m-q4_k_m.gguf"),
    ] {
        let Some(path) = testing::model(name) else {
            continue;
        };
        let o = memwall(
            &d.path().join("x.db"),
            &["model", "info", "--json", path.to_str().unwrap()],
        );
        assert!(o.status.success(), "{}", text(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let r = &fixture()[file];
        assert_eq!(v["streamed_bytes"], r["streamed_bytes"], "{file}");
        assert_eq!(v["tensor_bytes"], r["tensor_bytes"], "{file}");
        assert_eq!(v["n_params"], r["n_params"], "{file}");
        assert_eq!(
            v["kv_bytes_per_token"], r["kv_bytes_per_token_f16"],
            "{file}"
        );
        assert_eq!(v["tied_embeddings"], r["tied_embeddings"], "{file}");
    }
}

#[test]
fn bad_input_gives_a_clear_error_and_no_panic() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("x.db");
    // Missing file.
    let o = memwall(&db, &["model", "info", "/nonexistent/m.gguf"]);
    assert_eq!(o.status.code(), Some(1));
    let e = text(&o.stderr);
    assert!(
        e.contains("memwall: error: /nonexistent/m.gguf: no such file"),
        "{e}"
    );
    // Not a GGUF.
    let junk = d.path().join("junk.gguf");
    std::fs::write(&junk, b"this is not a model").unwrap();
    let o = memwall(&db, &["model", "info", junk.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = text(&o.stderr);
    assert!(
        e.contains("junk.gguf: header.magic: expected \"GGUF\""),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
    // A truncated real model names the field that runs past the end.
    if let Some(p) = testing::model("smollm2-135m-q4_1") {
        let bytes = std::fs::read(p).unwrap();
        let cut = d.path().join("cut.gguf");
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
        let o = memwall(&db, &["model", "info", cut.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1));
        let e = text(&o.stderr);
        assert!(
            e.contains("cut.gguf: tensor[") && e.contains("runs past the end of the file"),
            "{e}"
        );
        // bench refuses it before loading anything, and stores nothing.
        let o = memwall(
            &db,
            &[
                "bench",
                "-m",
                cut.to_str().unwrap(),
                "-p",
                "8",
                "-n",
                "0",
                "-d",
                "0",
                "-r",
                "1",
                "--no-results",
            ],
        );
        assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
        assert!(!text(&o.stderr).contains("panicked"));
    }
    // Invalid flags are explained.
    let o = memwall(&db, &["bench", "-r", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("-r must be at least 1")
            || text(&o.stderr).contains("not fetched"),
        "{}",
        text(&o.stderr)
    );
    let o = memwall(&db, &["export", "--format", "xml"]);
    assert!(
        text(&o.stderr).contains("--format xml: use csv, json, jsonl, md or sql"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn roofline_with_given_numbers_matches_the_closed_form() {
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let o = memwall(
        &d.path().join("x.db"),
        &[
            "roofline",
            "-m",
            path.to_str().unwrap(),
            "--bandwidth",
            "100",
            "--peak",
            "1000",
            "-d",
            "0,1024",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &fixture()["SmolLM2-135M-Instruct.Q4_1.gguf"];
    let w = r["streamed_bytes"].as_f64().unwrap();
    let kv = r["kv_bytes_per_token_f16"].as_f64().unwrap();
    for (i, depth) in [0.0, 1024.0].iter().enumerate() {
        let expected = 100e9 / (w + depth * kv);
        let got = v["rows"][i]["decode_ceiling_tps"].as_f64().unwrap();
        assert!(
            (got - expected).abs() / expected < 1e-9,
            "d={depth}: {got} vs {expected}"
        );
    }
    assert_eq!(v["ridge_flop_per_byte"].as_f64().unwrap(), 10.0);
}

#[test]
fn bench_stores_exports_and_charts_a_real_run() {
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let _lock = testing::engine_lock();
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("m.db");
    let results = d.path().join("results");
    let o = memwall(
        &db,
        &[
            "bench",
            "-m",
            path.to_str().unwrap(),
            "-p",
            "32",
            "-n",
            "8",
            "-d",
            "0,32",
            "-r",
            "2",
            "--quiet",
            "--results-dir",
            results.to_str().unwrap(),
            "-o",
            "json",
        ],
    );
    assert!(o.status.success(), "stderr: {}", text(&o.stderr));
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&o.stdout).expect("stdout is pure JSON with -o json");
    assert!(
        text(&o.stderr).contains("depth falloff, decomposed"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert_eq!(r["samples_ns"].as_array().unwrap().len(), 2);
        assert!(r["avg_ts"].as_f64().unwrap() > 0.0);
        assert!(
            r["stream_id"].as_i64().unwrap() > 0,
            "rows reference the STREAM measurement"
        );
        assert!(r["bandwidth_gbps"].as_f64().unwrap() > 0.0);
    }
    // results/<run>/ holds CSV, JSON, Markdown and the chart as PNG + SVG.
    let run_dir = std::fs::read_dir(&results)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    for f in [
        "bench.csv",
        "bench.json",
        "bench.md",
        "decode_vs_depth.png",
        "decode_vs_depth.svg",
    ] {
        assert!(run_dir.join(f).is_file(), "missing {f}");
    }
    let png = std::fs::read(run_dir.join("decode_vs_depth.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    // The store: export with llama-bench's column names, history lists the runs.
    let o = memwall(&db, &["export", "--format", "csv"]);
    assert!(o.status.success());
    let csv = text(&o.stdout);
    let header = csv.lines().next().unwrap();
    for c in [
        "build_commit",
        "model_filename",
        "n_prompt",
        "n_gen",
        "n_depth",
        "avg_ts",
        "stddev_ts",
        "samples_ns",
        "samples_ts",
    ] {
        assert!(header.split(',').any(|h| h == c), "missing column {c}");
    }
    assert_eq!(csv.lines().count(), 5);
    let o = memwall(&db, &["history", "--json"]);
    let runs: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let kinds: Vec<&str> = runs.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["bench", "stream"]);
    // Delete the bench run: its rows go with it, in one transaction.
    let id = runs[0]["id"].as_i64().unwrap().to_string();
    let o = memwall(&db, &["history", "--delete", &id, "--yes"]);
    assert!(o.status.success());
    let o = memwall(&db, &["export", "--format", "jsonl"]);
    assert_eq!(text(&o.stdout).lines().count(), 0);
}

#[test]
fn models_list_shows_the_catalogue() {
    let d = tempfile::tempdir().unwrap();
    let o = memwall(&d.path().join("x.db"), &["models", "list", "--json"]);
    assert!(o.status.success());
    let v: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.len(), 4);
    assert!(
        v.iter()
            .any(|m| m["default"] == true && m["name"] == "qwen2.5-coder-0.5b-q4_k_m")
    );
}

#[test]
fn spec_gate_then_bench_and_the_store_refuses_ungated_speedups() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("x.db");
    // Flags are checked before any model is loaded.
    let o = memwall(&db, &["spec", "gate", "-k", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("-k 0: draft lengths must be 1..=16"),
        "{}",
        text(&o.stderr)
    );
    if testing::model("qwen2.5-coder-1.5b-q4_k_m").is_none() {
        return;
    }
    let _lock = testing::engine_lock();
    let out = d.path().join("spec");
    let bench = [
        "spec",
        "bench",
        "-k",
        "1",
        "--drafters",
        "ngram",
        "--categories",
        "code",
        "--per-category",
        "1",
        "-r",
        "2",
        "-n",
        "4",
        "--calib-max-new",
        "8",
        "--timing-reps",
        "1",
        "-t",
        "2",
        "--out",
        out.to_str().unwrap(),
    ];
    // No gate yet: refused before any timing.
    let o = memwall(&db, &bench);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("no passed greedy gate"),
        "{}",
        text(&o.stderr)
    );
    // Gate the n-gram drafter at k = 1 on 3 prompts.
    let o = memwall(
        &db,
        &[
            "spec",
            "gate",
            "-k",
            "1",
            "--drafters",
            "ngram",
            "--limit",
            "3",
            "-n",
            "4",
            "--sampling-trials",
            "0",
            "-t",
            "2",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    assert!(s.contains("ngram       k=1: 3/3 identical"), "{s}");
    assert!(s.contains("| json-01 | json | raw |"), "{s}");
    // Now the bench runs and stores.
    let o = memwall(&db, &bench);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    assert!(
        s.contains("| code | target only | — |") && s.contains("| code | ngram | 1 |"),
        "{s}"
    );
    assert!(out.join("spec.md").is_file() && out.join("acceptance.png").is_file());
}

#[test]
fn calc_and_synth_agree_with_gguf_py_facts_of_the_real_file() {
    // Reference: tests/fixtures/model_facts.json, computed by llama.cpp's gguf-py from
    // the real SmolLM2-135M Q4_1 file; the preset + recipe must reproduce it exactly.
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("x.db");
    let r = &fixture()["SmolLM2-135M-Instruct.Q4_1.gguf"];
    let o = memwall(
        &db,
        &[
            "calc",
            "--preset",
            "smollm2-135m",
            "-q",
            "Q4_1",
            "--bandwidth",
            "100",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["weight_bytes"], r["tensor_bytes"]);
    assert_eq!(v["model"]["streamed_bytes"], r["streamed_bytes"]);
    assert_eq!(v["kv_bytes_per_token"], r["kv_bytes_per_token_f16"]);
    // Closed form: 100 GB/s ÷ streamed bytes.
    let want = 100e9 / r["streamed_bytes"].as_f64().unwrap();
    let got = v["decode_b1_tps"].as_f64().unwrap();
    assert!((got - want).abs() / want < 1e-12, "{got} vs {want}");

    let out = d.path().join("synth.gguf");
    let o = memwall(
        &db,
        &[
            "model",
            "synth",
            "--preset",
            "smollm2-135m",
            "-q",
            "Q4_1",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("SYNTHETIC"), "{}", text(&o.stdout));
    let o = memwall(&db, &["model", "info", "--json", out.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in [
        "streamed_bytes",
        "tensor_bytes",
        "n_params",
        "tied_embeddings",
    ] {
        assert_eq!(v[k], r[k], "{k}");
    }
    assert_eq!(v["kv_bytes_per_token"], r["kv_bytes_per_token_f16"]);
    assert_eq!(v["synthetic"], true);
    // Refuses to overwrite without --force.
    let o = memwall(
        &db,
        &[
            "model",
            "synth",
            "--preset",
            "smollm2-135m",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("--force"), "{}", text(&o.stderr));
}

#[test]
fn calc_devices_and_predict_errors_are_clear() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("x.db");
    let o = memwall(
        &db,
        &["calc", "--preset", "qwen2.5-7b", "--device", "M4 Pro"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    // 273 GB/s ÷ the recipe's streamed bytes; the memory sizes of the M4 Pro.
    assert!(s.contains("273.0 GB/s") && s.contains("24.0 GiB"), "{s}");
    assert!(s.contains("ESTIMATE"), "{s}");
    let o = memwall(
        &db,
        &["calc", "--preset", "qwen2.5-7b", "--device", "M9 Mega"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("M4 Pro"), "{}", text(&o.stderr));
    let o = memwall(&db, &["calc", "--preset", "qwen2.5-7b", "--device", "this"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("not measured"),
        "{}",
        text(&o.stdout)
    );
    let o = memwall(&db, &["predict", "score", "9", "--run", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("no prediction sheet 9"),
        "{}",
        text(&o.stderr)
    );
    let o = memwall(&db, &["calc", "--preset", "qwen2.5-7b", "--params", "1e9"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("exactly one model"),
        "{}",
        text(&o.stderr)
    );
}

/// `memwall peak --isa scalar` prints each peak with its bound and stores nothing (a
/// forced lower path is not the roof); a path this CPU lacks is refused by name.
#[test]
fn peak_forced_paths_print_their_bounds_and_are_not_the_roof() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("p.db");
    let o = memwall(&db, &["peak", "--isa", "scalar", "-t", "1", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let peaks = v.as_array().unwrap();
    assert_eq!(peaks.len(), 2);
    for p in peaks {
        assert_eq!(p["isa"], "scalar");
        let (g, b) = (
            p["gflops"].as_f64().unwrap(),
            p["bound"]["gflops"].as_f64().unwrap(),
        );
        assert!(g > 0.0 && g <= b, "{p}");
    }
    let o = memwall(&db, &["history"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stdout).contains(" peak "), "{}", text(&o.stdout));
    let missing = if cfg!(target_arch = "x86_64") {
        "neon"
    } else {
        "avx2"
    };
    let o = memwall(&db, &["peak", "--isa", missing]);
    assert_eq!(o.status.code(), Some(1));
    let e = text(&o.stderr);
    assert!(
        e.contains(&format!("on the {missing} path here")) && e.contains("paths on this CPU:"),
        "{e}"
    );
}
