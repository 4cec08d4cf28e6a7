//! End-to-end tests of the `memwall` binary: real models, a temporary database and
//! results folder, stdout/stderr and exit codes as a user sees them.

use memwall_testkit as testing;
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

/// A valid one-layer llama GGUF of 512 bytes, built byte by byte: 256 header bytes
/// (padded) and one F32 tensor `token_embd.weight` [32, 2] of 256 bytes.
fn tiny_gguf(block_count: u32) -> Vec<u8> {
    let b = memwall_testkit::fuzz::GgufBuilder::default()
        .kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", block_count)
        .kv_u32("llama.embedding_length", 32)
        .kv_u32("llama.attention.head_count", 4)
        .tensor("token_embd.weight", &[32, 2], 0, 0)
        .data(256)
        .build();
    assert_eq!(b.len(), 512);
    b
}

#[test]
#[cfg(target_os = "linux")]
fn a_huge_layer_count_fails_at_once_inside_256_mib() {
    // 512 bytes claiming 4,000,000,000 layers: memwall once built per-layer lists
    // of that length (16 GB) and aborted. Under a 256 MiB address-space limit (room
    // for the shared libraries an MLX build maps at load, OpenBLAS and libmlx; 64 MiB
    // no longer loads them) it must exit 1 with the key named.
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("layers.gguf");
    std::fs::write(&f, tiny_gguf(4_000_000_000)).unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 262144 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_memwall"))
        .args(["--db", d.path().join("x.db").to_str().unwrap()])
        .args(["model", "info", f.to_str().unwrap()])
        .env_remove("MEMWALL_DB")
        .output()
        .unwrap();
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains(
            "layers.gguf: metadata[llama.block_count]: llama.block_count = 4000000000 exceeds the tensors present (1 tensor; every block has at least one)"
        ),
        "{e}"
    );
}

#[test]
fn a_truncated_model_is_refused_before_anything_runs_or_is_stored() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("x.db");
    let cut = d.path().join("cut.gguf");
    std::fs::write(&cut, &tiny_gguf(1)[..412]).unwrap();
    let m = cut.to_str().unwrap();
    let want = "cut.gguf: tensor[0:token_embd.weight]: the file is truncated: tensor data ends at byte 512 but the file has 412 bytes";
    // bench reads the header before STREAM: no stream run, no bench run.
    let o = memwall(
        &db,
        &[
            "bench",
            "-m",
            m,
            "-p",
            "8",
            "-n",
            "0",
            "-d",
            "0",
            "-r",
            "1",
            "-t",
            "1",
            "--no-results",
        ],
    );
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains(want), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    let o = memwall(&db, &["history", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let runs: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(runs.is_empty(), "stored: {runs:?}");
    // Every other command that hands a model to llama.cpp passes the same gate.
    for args in [
        &["kv", "verify", "-m", m, "-n", "16", "-t", "1"][..],
        &["spec", "bench", "--target", m, "--draft", m, "-t", "1"][..],
        &["frontier", "--source", m, "--reuse-stream"][..],
    ] {
        let o = memwall(&db, args);
        let e = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {e}");
    }
    let o = memwall(&db, &["history", "--json"]);
    let runs: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(runs.is_empty(), "stored: {runs:?}");
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
            e.contains("cut.gguf: tensor[")
                && e.contains("the file is truncated: tensor data ends at byte"),
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
fn stream_below_the_sizing_rule_prints_all_kernels_and_stores_nothing() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("m.db");
    let o = memwall(
        &db,
        &["stream", "-t", "1,2", "--array-size", "20000", "--json"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("below STREAM's rule"),
        "{}",
        text(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["stored"], false);
    for r in v["results"].as_array().unwrap() {
        assert_eq!(r["config"]["n_elements"], 20000);
        let kernels: Vec<&str> = r["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kernel"].as_str().unwrap())
            .collect();
        assert_eq!(kernels, ["copy", "scale", "add", "triad", "read"]);
    }
    let o = memwall(&db, &["history", "--json"]);
    let runs: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(runs.is_empty(), "nothing stored: {runs:?}");
    let o = memwall(&db, &["stream", "--array-size", "0"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--array-size must be at least 1"));
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
        // The bench measured STREAM now, read kernel included: every row carries it,
        // decode rows a second ceiling with it, prefill rows none.
        assert_eq!(r["bandwidth_kernel"], "triad");
        assert!(r["read_bandwidth_gbps"].as_f64().unwrap() > 0.0);
        let decode = r["n_gen"].as_i64().unwrap() > 0;
        assert_eq!(r["decode_ceiling_ts_read"].is_f64(), decode, "{r}");
        assert_eq!(r["achieved_read"].is_f64(), decode, "{r}");
    }
    assert!(
        text(&o.stderr).contains("decode under the triad and read ceilings"),
        "{}",
        text(&o.stderr)
    );
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
        "sampler.png",
        "sampler.svg",
    ] {
        assert!(run_dir.join(f).is_file(), "missing {f}");
    }
    // The live sampler ran beside it: one energy line per row (— with the reason
    // where this machine has no power counter).
    let e = text(&o.stderr);
    let table = e
        .split("energy and machine state")
        .nth(1)
        .unwrap_or_else(|| panic!("no energy table: {e}"));
    assert_eq!(
        table
            .lines()
            .filter(|l| l.starts_with("| pp") || l.starts_with("| tg"))
            .count(),
        4,
        "{table}"
    );
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
        "bandwidth_kernel",
        "read_bandwidth_gbps",
        "decode_ceiling_ts_read",
        "achieved_read",
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
fn sample_lists_every_counter_with_a_source_or_a_reason() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("x.db");
    let o = memwall(&db, &["sample", "--seconds", "1.2", "--hz", "20"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    let names = [
        "cpu_package_energy",
        "dram_energy",
        "cpu_temperature",
        "cpu_frequency",
        "memory",
        "swap",
        "dram_bandwidth",
        "gpu_power",
        "gpu_energy",
        "gpu_temperature",
        "gpu_clocks",
        "gpu_memory_utilisation",
    ];
    for n in names {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(n))
            .unwrap_or_else(|| panic!("no {n} line:\n{out}"));
        // Available: `yes` and its source; unavailable: `—`, the reason, [where looked].
        assert!(
            line.contains(" yes ") || (line.contains(" — ") && line.ends_with(']')),
            "{line}"
        );
    }
    #[cfg(target_os = "linux")]
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("memory") && l.contains("yes  /proc/meminfo")),
        "{out}"
    );
    // About one line per second of reads, and the summary with its read count
    // (≈ 24 at 20 Hz over 1.2 s; a loaded machine may lose some).
    assert!(
        out.lines()
            .any(|l| l.starts_with("t ") && l.contains(" s | CPU ")),
        "{out}"
    );
    let reads: usize = out
        .lines()
        .find_map(|l| {
            l.split(" reads at 20 Hz")
                .next()
                .filter(|_| l.contains(" reads at 20 Hz"))?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no summary:\n{out}"));
    assert!((5..=26).contains(&reads), "{reads}");
    // A bad rate is a clear error, not a panic.
    let o = memwall(&db, &["sample", "--hz", "0"]);
    assert_eq!(o.status.code(), Some(1));
    let e = text(&o.stderr);
    assert!(e.contains("--hz 0: must be in 0.2…100"), "{e}");
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

/// The run id in a command's "stored as run N in …" line.
fn stored_run(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("stored as run "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no \"stored as run\" line in: {stderr}"))
        .to_string()
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
    // A three-prompt set, so that a gate over the whole set is quick.
    let set = d.path().join("set.jsonl");
    std::fs::write(
        &set,
        concat!(
            r#"{"id": "json-a", "category": "json", "format": "raw", "text": "{\"name\": \"Alice\", \"age\": "}"#,
            "\n",
            r#"{"id": "code-a", "category": "code", "format": "raw", "text": "def add(a, b):\n    return"}"#,
            "\n",
            r#"{"id": "code-b", "category": "code", "format": "raw", "text": "for i in range(10):\n    print("}"#,
            "\n"
        ),
    )
    .unwrap();
    let set = set.to_str().unwrap();
    let out = d.path().join("spec");
    let bench = [
        "spec",
        "bench",
        "--prompts",
        set,
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
    let gate = |extra: &[&str]| {
        let mut args = vec![
            "spec",
            "gate",
            "--prompts",
            set,
            "-k",
            "1",
            "--drafters",
            "ngram",
            "--sampling-trials",
            "0",
            "-t",
            "2",
        ];
        args.extend_from_slice(extra);
        let o = memwall(&db, &args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        (text(&o.stdout), stored_run(&text(&o.stderr)))
    };
    let refused = |want: &str| {
        let o = memwall(&db, &bench);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
        let e = text(&o.stderr);
        assert!(
            e.contains("no gate unlocks this bench") && e.contains(want),
            "{e}"
        );
        assert!(!out.join("spec.md").exists(), "refused before any timing");
    };
    // No gate yet: refused before any timing.
    refused("ngram ngram:1-3 k=1: no gate run stored");
    // A --limit gate is partial: it passes, is stored as partial and unlocks nothing.
    let (s, partial) = gate(&["--limit", "2", "-n", "4"]);
    assert!(s.contains("ngram       k=1: 2/2 identical"), "{s}");
    assert!(
        s.contains("partial gate: 2 of the prompt set's 3 prompts"),
        "{s}"
    );
    refused(&format!(
        "gate run {partial}: it covered 2 of the prompt set's 3 prompts (a --limit gate is partial)"
    ));
    // The whole set at fewer tokens than the bench uses unlocks nothing either.
    let (_, short) = gate(&["-n", "2"]);
    refused(&format!(
        "gate run {short}: it generated 2 tokens per prompt, the bench uses 4"
    ));
    // The whole set at the bench's tokens: the bench runs and stores.
    let (s, full) = gate(&["-n", "4"]);
    assert!(s.contains("ngram       k=1: 3/3 identical"), "{s}");
    assert!(
        s.contains("| code-b | code | raw |") && !s.contains("partial"),
        "{s}"
    );
    let o = memwall(&db, &bench);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let bench_run = stored_run(&text(&o.stderr));
    let s = text(&o.stdout);
    assert!(
        s.contains("| code | target only | — |") && s.contains("| code | ngram | 1 |"),
        "{s}"
    );
    assert!(!s.contains("1.000 ± 0.000"), "{s}");
    assert!(out.join("spec.md").is_file() && out.join("acceptance.png").is_file());
    // The gate that unlocked the stored speedups cannot be deleted alone.
    let o = memwall(&db, &["history", "--delete", &full, "--yes"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains(&format!(
            "run {full} is a speculative gate that unlocked the speedup rows of spec-bench run(s) {bench_run}"
        )),
        "{}",
        text(&o.stderr)
    );
    // The partial gate unlocked nothing: it deletes plainly.
    let o = memwall(&db, &["history", "--delete", &partial, "--yes"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// Stores a complete passed gate run and a spec-bench run whose speedup row it
/// unlocked, through the core API; returns (gate run, bench run).
fn gate_and_bench(db: &Path) -> (i64, i64) {
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
        let g = ss::insert_gate_run(&s, &run("spec-gate"), &prov, &prompts, &[gate], &[])
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
        let b = ss::insert_bench_run(&s, &run("spec-bench"), &mut rows)
            .await
            .unwrap();
        (g, b)
    })
}

#[test]
fn history_delete_refuses_a_gate_with_dependent_speedup_rows_unless_cascade() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("m.db");
    let (g, b) = gate_and_bench(&db);
    let ids = |db: &Path| -> Vec<i64> {
        let o = memwall(db, &["history", "--json"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let runs: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
        let mut v: Vec<i64> = runs.iter().map(|r| r["id"].as_i64().unwrap()).collect();
        v.sort();
        v
    };
    let gs = g.to_string();
    // Refused, naming the dependent run and the way out; nothing deleted.
    let o = memwall(&db, &["history", "--delete", &gs, "--yes"]);
    assert_eq!(o.status.code(), Some(1));
    let e = text(&o.stderr);
    assert!(
        e.contains(&format!(
            "run {g} is a speculative gate that unlocked the speedup rows of spec-bench run(s) {b}: delete those first, or delete them together with it (memwall history --delete {g} --cascade)"
        )),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
    assert_eq!(ids(&db), vec![g, b]);
    // --cascade deletes both and says so.
    let o = memwall(&db, &["history", "--delete", &gs, "--cascade", "--yes"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout).trim(),
        format!("deleted run {g} and the spec-bench run(s) {b} whose speedup rows it unlocked")
    );
    assert!(ids(&db).is_empty());
    // Deleting the bench run first, then the gate, needs no cascade.
    let (g, b) = gate_and_bench(&db);
    let o = memwall(&db, &["history", "--delete", &b.to_string(), "--yes"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = memwall(&db, &["history", "--delete", &g.to_string(), "--yes"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).trim(), format!("deleted run {g}"));
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
fn bench_takes_llama_bench_flags_and_defaults_and_n_seqs_for_sequences() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("x.db");
    let m = d.path().join("tiny.gguf");
    std::fs::write(&m, tiny_gguf(1)).unwrap();
    let m = m.to_str().unwrap();
    // The help shows llama-bench's defaults (cmd_params_defaults in llama.cpp's
    // tools/llama-bench/llama-bench.cpp: -p 512 -n 128 -r 5 -b 2048 -ub 512).
    let o = memwall(&db, &["bench", "--help"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let help = text(&o.stdout);
    for want in [
        "-p, --n-prompt <N_PROMPT>",
        "-b, --n-batch <N_BATCH>",
        "--n-ubatch <N_UBATCH>",
        "--n-seqs <N_SEQS>",
    ] {
        assert!(help.contains(want), "{want} missing from:\n{help}");
    }
    let default_of = |flag: &str| -> String {
        let i = help
            .find(flag)
            .unwrap_or_else(|| panic!("{flag} in {help}"));
        let rest = &help[i..];
        let j = rest.find("[default: ").expect("a default") + "[default: ".len();
        rest[j..j + rest[j..].find(']').unwrap()].to_string()
    };
    assert_eq!(default_of("--n-prompt <"), "512");
    assert_eq!(default_of("--n-gen <"), "128");
    assert_eq!(default_of("--reps <"), "5");
    assert_eq!(default_of("--n-batch <"), "2048");
    assert_eq!(default_of("--n-ubatch <"), "512");
    assert_eq!(default_of("--n-seqs <"), "1");
    assert_eq!(default_of("--ctk <"), "f16");
    assert_eq!(default_of("--fa <"), "auto");
    // --n-seqs is the parallel-sequence list; the plan check names it.
    let o = memwall(&db, &["bench", "-m", m, "-t", "1", "--n-seqs", "1,0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("--n-seqs (parallel sequences) must be within 1..=256"),
        "{}",
        text(&o.stderr)
    );
    // -b is n_batch, as in llama-bench.
    let o = memwall(&db, &["bench", "-m", m, "-t", "1", "-b", "0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("--n-batch and --n-ubatch must be positive"),
        "{}",
        text(&o.stderr)
    );
    // The old spelling is gone, not silently reinterpreted.
    let o = memwall(&db, &["bench", "-m", m, "--batch", "2"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("unexpected argument '--batch'"),
        "{}",
        text(&o.stderr)
    );
    // Nothing ran, nothing was stored.
    let o = memwall(&db, &["history", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let runs: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(runs.is_empty(), "{runs:?}");
    // calc names sequences the same way.
    let o = memwall(
        &db,
        &[
            "calc",
            "--preset",
            "qwen2.5-7b",
            "--device",
            "M4 Pro",
            "--n-seqs",
            "4",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("decode ceiling, batch 4"),
        "{}",
        text(&o.stdout)
    );
    let o = memwall(&db, &["calc", "--preset", "qwen2.5-7b", "-b", "4"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
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

#[test]
fn a_preset_takes_a_vocabulary_and_refuses_other_shape_flags() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("x.db");
    let params = |extra: &[&str]| {
        let mut a = vec![
            "calc",
            "--preset",
            "qwen2.5-0.5b",
            "-q",
            "F16",
            "--bandwidth",
            "100",
            "--json",
        ];
        a.extend_from_slice(extra);
        let o = memwall(&db, &a);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["model"]["n_params"].as_u64().unwrap()
    };
    // Qwen2.5-0.5B ties its embeddings: 128 more entries of 896 = 114,688 parameters
    // (its 151,936-entry vocabulary given the 14B's 152,064).
    assert_eq!(params(&["--vocab", "152064"]) - params(&[]), 128 * 896);
    let o = memwall(
        &db,
        &[
            "calc",
            "--preset",
            "qwen2.5-0.5b",
            "--layers",
            "3",
            "--bandwidth",
            "100",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("--layers does not combine with --preset"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn vs_llama_speculative_prints_no_auto_ratio_for_an_off_decision() {
    use memwall_core::experiments::speculative::store::{AUTO_OFF_PREDICTED, SpecBenchRow};
    if Command::new("python3").arg("--version").output().is_err() {
        testing::skip_or_fail(
            testing::Requirement::E2e,
            "python3 (for bench/vs_llama_speculative_table.py)",
            "install Debian's python3",
        );
        return;
    }
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/vs_llama_speculative_table.py");
    let d = tempfile::tempdir().unwrap();
    // llama.cpp at k = 4: speedup 0.5 in both categories.
    let ll = serde_json::json!([
        {"id": "json-01", "category": "json", "spec_tps": 20.0, "spec_std": 0.5, "accept_pct": 80.0, "tg_tps": 40.0, "speedup": 0.5},
        {"id": "code-01", "category": "code", "spec_tps": 20.0, "spec_std": 0.5, "accept_pct": 70.0, "tg_tps": 40.0, "speedup": 0.5},
    ]);
    // memwall: k = 2 (1.1) and k = 4 (0.9) measured in each category; auto chose
    // k = 2 for json (its row is k = 2's measurement) and off for code.
    let measured = |cat: &str, k: usize, sp: f64, auto: bool| SpecBenchRow {
        category: cat.into(),
        k,
        k_auto: auto,
        speedup_mean: Some(sp),
        speedup_std: Some(0.01),
        ..SpecBenchRow::example()
    };
    let mut rows = vec![];
    for cat in ["json", "code"] {
        rows.push(measured(cat, 2, 1.1, false));
        rows.push(measured(cat, 4, 0.9, false));
    }
    rows.push(measured("json", 2, 1.1, true));
    rows.push(SpecBenchRow {
        category: "code".into(),
        k: 0,
        k_auto: true,
        reps: 0,
        decision: Some(AUTO_OFF_PREDICTED.into()),
        tps_samples: None,
        tps_mean: None,
        tps_std: None,
        speedup_samples: None,
        speedup_mean: None,
        speedup_std: None,
        ..SpecBenchRow::example()
    });
    let (lp, mp) = (d.path().join("llama.json"), d.path().join("mw.json"));
    std::fs::write(&lp, ll.to_string()).unwrap();
    std::fs::write(&mp, serde_json::to_string(&rows).unwrap()).unwrap();
    let o = Command::new("python3")
        .arg(&script)
        .args([lp.to_str().unwrap(), mp.to_str().unwrap(), "4"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    // Ratios by hand: 0.9 ÷ 0.5 = 1.800 at k = 4; best fixed k = 2: 1.1 ÷ 0.5 = 2.200.
    assert!(
        s.contains("| json | 80.0 | 0.500 | 70.0 | 0.900 ± 0.010 | 1.800 | 1.100 (k=2) | 2.200 | 1.100 (k=2) | 2.200 |"),
        "{s}"
    );
    assert!(
        s.contains("| code | 70.0 | 0.500 | 70.0 | 0.900 ± 0.010 | 1.800 | 1.100 (k=2) | 2.200 | off (predicted ≤ 1): not measured | — (no measurement) |"),
        "{s}"
    );
    assert!(
        s.contains("memwall k=4 ÷ llama-speculative k=4, mean over categories: 1.800"),
        "{s}"
    );
    assert!(s.contains("code: --k auto decided off (predicted ≤ 1): a decision, not a measurement; no ratio to llama.cpp"), "{s}");
    // No summary of auto ÷ llama.cpp, and no speedup of 1 for the decision.
    assert!(
        !s.contains("auto ÷ llama-speculative") && !s.contains("1.000"),
        "{s}"
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

#[test]
fn a_postgres_db_works_for_every_command_through_a_pushed_back_copy() {
    let Some(pg) = testing::PgCluster::start() else {
        return;
    };
    let url = pg.database("lab");
    let db = Path::new(&url);
    let history = || {
        let o = memwall(db, &["history", "--json"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        serde_json::from_slice::<Vec<serde_json::Value>>(&o.stdout).unwrap()
    };
    assert!(history().is_empty());
    // A write command (engine-free): its run lands in the shared store once.
    let o = memwall(db, &["peak", "-t", "1"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("working on a local copy of"), "{err}");
    assert!(err.contains("pushed run 1 (peak, "), "{err}");
    let runs = history();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["kind"], "peak");
    // A second one adds one run; the first is not sent again.
    let o = memwall(db, &["peak", "-t", "1"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("pushed run 2 (peak, ") && !err.contains("pushed run 1 "),
        "{err}"
    );
    let runs = history();
    assert_eq!(
        runs.iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        [2, 1],
        "history lists the newest run first: {runs:?}"
    );
    // A read command pushes nothing.
    let o = memwall(db, &["history"]);
    assert!(
        o.status.success() && !text(&o.stderr).contains("pushed run"),
        "{}",
        text(&o.stderr)
    );
    assert!(text(&o.stdout).contains("peak"), "{}", text(&o.stdout));
    // Deleting a shared run is refused by name, and nothing changes.
    let o = memwall(db, &["history", "--delete", "1", "--yes"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr)
            .contains("memwall history --delete: --db (or MEMWALL_DB) names a PostgreSQL store"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(history().len(), 2);
}

#[test]
fn bench_split_flags_are_refused_with_the_fix_and_calc_shows_the_split_modes() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("x.db");
    let m = d.path().join("tiny.gguf");
    std::fs::write(&m, tiny_gguf(1)).unwrap();
    let m = m.to_str().unwrap();
    for (flags, want) in [
        (
            &["--split-mode", "tensor"][..],
            "--split-mode \"tensor\": use none, layer or row",
        ),
        (
            &["--tensor-split", "1,x"][..],
            "--tensor-split \"1,x\": \"x\" is not a number",
        ),
        (
            &["--split-mode", "none", "--tensor-split", "1,1"][..],
            "--tensor-split 1.00/1.00 has no effect with --split-mode none",
        ),
        // This machine's llama.cpp has no GPU back end.
        (
            &["--tensor-split", "1,1"][..],
            "--tensor-split 1.00/1.00 names 2 GPUs, llama.cpp sees 0",
        ),
        (
            &["--split-mode", "row"][..],
            "--split-mode row splits matrices over GPUs and llama.cpp sees none",
        ),
    ] {
        let mut args = vec!["bench", "-m", m, "-t", "1"];
        args.extend_from_slice(flags);
        let o = memwall(&db, &args);
        assert_eq!(o.status.code(), Some(1), "{flags:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(want),
            "{flags:?}: {}",
            text(&o.stderr)
        );
    }
    let o = memwall(&db, &["history", "--json"]);
    let runs: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(runs.is_empty(), "nothing ran: {runs:?}");
    // calc over two given cards: none, layer and row, each from the given parts.
    let two = [
        "calc",
        "--preset",
        "qwen2.5-14b",
        "--quant",
        "F16",
        "--gpu-bandwidth",
        "3000,3000",
        "--link-latency-us",
        "10",
        "--link-gbps",
        "40",
        "--json",
    ];
    let o = memwall(&db, &two);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["multi_gpu"]["rows"].as_array().unwrap();
    let modes: Vec<&str> = rows.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["none", "layer", "row"]);
    let tps: Vec<f64> = rows
        .iter()
        .map(|r| r["ceiling"]["ceiling_tps"].as_f64().unwrap())
        .collect();
    // Layer split on two equal cards is one card plus a hand-over; rows nearly double.
    assert!(tps[1] < tps[0] && tps[1] > 0.99 * tps[0], "{tps:?}");
    assert!(tps[2] > 1.7 * tps[0], "{tps:?}");
    // Text: every mode on its own line; without the link, layer and row say why.
    let o = memwall(&db, &two[..two.len() - 5]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("several GPUs: decode ceiling per split mode"),
        "{out}"
    );
    assert!(
        out.contains("  layer          — (multi-GPU roofline: no peer-copy time"),
        "{out}"
    );
    let o = memwall(&db, &two[..two.len() - 3]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("--link-latency-us and --link-gbps go together"),
        "{}",
        text(&o.stderr)
    );
}
