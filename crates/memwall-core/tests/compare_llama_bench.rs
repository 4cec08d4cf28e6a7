//! memwall's exports read by llama.cpp's own `scripts/compare-llama-bench.py`, the
//! tool llama-bench users compare two builds with: two stored runs with different
//! build commits, exported as sql (loaded with the `sqlite3` shell, as
//! `llama-bench -o sql | sqlite3 db` is), csv, json and jsonl, each fed to the script,
//! whose table must hold one row per test with both runs' t/s and the speedup
//! worked out here from the stored avg_ts.
//!
//! The script and its venv come from `scripts/setup-compare-venv.sh` (run by
//! `scripts/test.sh`); when they are absent the test skips with a loud message,
//! unless `MEMWALL_REQUIRE_LLAMA_TOOLS=1`, where absence fails.

use memwall_core::present::export::Format;
use memwall_core::probe::hw::HostInfo;
use memwall_core::store::record::BenchRecord;
use memwall_core::store::{NewRun, RowFilter, Store};
use memwall_core::units::Bytes;
use memwall_testkit as testing;
use std::path::{Path, PathBuf};
use std::process::Command;

const BASELINE: &str = "aaaaaaaaaaaa";
const COMPARE: &str = "bbbbbbbbbbbb";

/// `(build commit, n_prompt, n_gen, avg_ts)` of the hand-built rows.
const ROWS: [(&str, i64, i64, f64); 4] = [
    (BASELINE, 512, 0, 177.5),
    (BASELINE, 0, 128, 36.2),
    (COMPARE, 512, 0, 190.3),
    (COMPARE, 0, 128, 35.1),
];

fn skip_or_fail(what: &str, fix: &str) {
    testing::skip_or_fail(testing::Requirement::LlamaTools, what, fix);
}

/// The venv's python and the script, or `None` after a loud skip line.
fn compare_script() -> Option<(PathBuf, PathBuf)> {
    let venv = std::env::var_os("MEMWALL_COMPARE_VENV")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/memwall/venv-compare"))
        })?;
    let python = venv.join("bin/python");
    let script = venv.join("compare-llama-bench.py");
    if python.is_file() && script.is_file() {
        return Some((python, script));
    }
    skip_or_fail(
        &format!("compare-llama-bench.py and its venv in {}", venv.display()),
        "run scripts/setup-compare-venv.sh",
    );
    None
}

fn sqlite3_shell() -> bool {
    let ok = Command::new("sqlite3")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip_or_fail(
            "the sqlite3 shell",
            "install Debian's sqlite3 (scripts/setup.sh does)",
        );
    }
    ok
}

fn host() -> HostInfo {
    HostInfo {
        cpu_model: "Example CPU".into(),
        cores_physical: 2,
        cores_logical: 2,
        ram: Bytes(1 << 30),
        os: "Linux".into(),
        kernel: "6.1".into(),
        arch: "x86_64".into(),
        llc: None,
        gpus: vec![],
        hostname: "h".into(),
    }
}

/// Two bench runs, one per build commit, stored and read back through the store.
async fn stored_rows(dir: &Path) -> Vec<BenchRecord> {
    let store = Store::open(&dir.join("memwall.db")).await.unwrap();
    for commit in [BASELINE, COMPARE] {
        let mut rows: Vec<BenchRecord> = ROWS
            .iter()
            .filter(|r| r.0 == commit)
            .map(|&(c, n_prompt, n_gen, avg_ts)| BenchRecord {
                build_commit: c.into(),
                n_prompt,
                n_gen,
                avg_ts,
                test_time: if c == BASELINE {
                    "2026-01-01T00:00:00Z".into()
                } else {
                    "2026-01-02T00:00:00Z".into()
                },
                ..BenchRecord::example()
            })
            .collect();
        let run = NewRun {
            kind: "bench".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: "2026-01-01T00:01:00Z".into(),
            command: "memwall bench".into(),
            host: host(),
            notes: String::new(),
            guard: None,
        };
        store.insert_bench_run(&run, &mut rows).await.unwrap();
    }
    store.bench_rows(&RowFilter::default()).await.unwrap()
}

/// Runs the script on `input` and returns its table's cells (pipe format), header first.
/// The script infers the tool only from an SQLite file's table; for CSV, JSON and JSONL
/// it needs `--tool llama-bench` (without it, it stops at an `assert False`, with
/// llama-bench's own files too).
fn compare(
    python: &Path,
    script: &Path,
    cwd: &Path,
    input: &Path,
    sqlite: bool,
) -> Vec<Vec<String>> {
    let mut cmd = Command::new(python);
    cmd.arg(script);
    if !sqlite {
        cmd.args(["--tool", "llama-bench"]);
    }
    let out = cmd
        .args(["-b", BASELINE, "-c", COMPARE, "-i"])
        .arg(input)
        .current_dir(cwd)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "compare-llama-bench.py -i {} failed:\n{stderr}\n{stdout}",
        input.display()
    );
    eprintln!("compare-llama-bench.py -i {}:\n{stdout}", input.display());
    stdout
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|:") && !l.starts_with("|-"))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn compare_llama_bench_reads_every_export() {
    let Some((python, script)) = compare_script() else {
        return;
    };
    if !sqlite3_shell() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rows = stored_rows(dir.path()).await;
    assert_eq!(rows.len(), ROWS.len());

    // The expected table, worked out here: one row per test, the baseline's and the
    // compared build's avg_ts, and their ratio, as the script prints them (2 decimals).
    let ts = |commit: &str, n_prompt: i64| {
        ROWS.iter()
            .find(|r| r.0 == commit && r.1 == n_prompt)
            .unwrap()
            .3
    };
    let expect_row = |test: &str, n_prompt: i64| -> Vec<String> {
        let (a, b) = (ts(BASELINE, n_prompt), ts(COMPARE, n_prompt));
        vec![
            "Example CPU".into(),
            "qwen2 494M Q4_K_M".into(),
            test.into(),
            format!("{a:.2}"),
            format!("{b:.2}"),
            format!("{:.2}", b / a),
        ]
    };
    let expected = vec![
        vec![
            "CPU".to_string(),
            "Model".into(),
            "Test".into(),
            format!("t/s {BASELINE}"),
            format!("t/s {COMPARE}"),
            "Speedup".into(),
        ],
        expect_row("pp512", 512),
        expect_row("tg128", 0),
    ];
    // The hand arithmetic, spelled out once: 190.3 / 177.5 and 35.1 / 36.2.
    assert_eq!(expected[1][5], "1.07");
    assert_eq!(expected[2][5], "0.97");

    for format in [Format::Sql, Format::Csv, Format::Json, Format::Jsonl] {
        let text = format.exporter().render(&rows);
        let export = dir.path().join(format!("memwall.{}", format.extension()));
        std::fs::write(&export, &text).unwrap();
        let input = if format == Format::Sql {
            let db = dir.path().join("llama-bench.sqlite");
            let _ = std::fs::remove_file(&db);
            let out = Command::new("sqlite3")
                .arg(&db)
                .stdin(std::fs::File::open(&export).unwrap())
                .output()
                .unwrap();
            assert!(
                out.status.success() && out.stderr.is_empty(),
                "sqlite3 refused the sql export: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            db
        } else {
            export
        };
        let table = compare(&python, &script, dir.path(), &input, format == Format::Sql);
        assert_eq!(table, expected, "{format:?} export");
    }
}

/// The split flags as llama-bench writes them: `memwall bench --split-mode row
/// --tensor-split 1,1` lands in the row as llama-bench's `-sm row -ts 1/1` does
/// (`split_mode` `row` and `tensor_split` `1.00/1.00`: llama-bench.cpp's
/// `split_mode_str` and its `%.2f`-per-device, `/`-joined `test::get_values`), and the
/// script, whose key properties include both, keeps the modes apart: one table row per
/// split, each paired across the two builds, with the split shown.
#[tokio::test]
async fn split_modes_are_key_columns_for_compare_llama_bench() {
    use memwall_core::roofline::multi_gpu::{SplitMode, TensorSplit};
    let row_mode = SplitMode::parse("row").unwrap().name().to_string();
    let row_split = TensorSplit::parse("1,1").unwrap().llama_bench_text();
    assert_eq!(
        (row_mode.as_str(), row_split.as_str()),
        ("row", "1.00/1.00")
    );
    let Some((python, script)) = compare_script() else {
        return;
    };
    if !sqlite3_shell() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("memwall.db")).await.unwrap();
    // (build, split mode, tensor split, tg128 t/s).
    let cells = [
        (BASELINE, "layer", "0.00", 100.0),
        (BASELINE, row_mode.as_str(), row_split.as_str(), 180.0),
        (COMPARE, "layer", "0.00", 101.0),
        (COMPARE, row_mode.as_str(), row_split.as_str(), 171.0),
    ];
    for commit in [BASELINE, COMPARE] {
        let mut rows: Vec<BenchRecord> = cells
            .iter()
            .filter(|c| c.0 == commit)
            .map(|&(c, sm, ts, avg_ts)| {
                let mut r = BenchRecord {
                    build_commit: c.into(),
                    n_prompt: 0,
                    n_gen: 128,
                    avg_ts,
                    test_time: if c == BASELINE {
                        "2026-01-01T00:00:00Z".into()
                    } else {
                        "2026-01-02T00:00:00Z".into()
                    },
                    ..BenchRecord::example()
                };
                r.llama.split_mode = sm.into();
                r.llama.tensor_split = ts.into();
                r
            })
            .collect();
        let run = NewRun {
            kind: "bench".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: "2026-01-01T00:01:00Z".into(),
            command: "memwall bench".into(),
            host: host(),
            notes: String::new(),
            guard: None,
        };
        store.insert_bench_run(&run, &mut rows).await.unwrap();
    }
    let rows = store.bench_rows(&RowFilter::default()).await.unwrap();
    assert_eq!(rows.len(), 4);
    // Worked out here: 171 / 180 = 0.95 and 101 / 100 = 1.01.
    let expect = |sm: &str, ts: &str, a: f64, b: f64| -> Vec<String> {
        vec![
            "Example CPU".into(),
            "qwen2 494M Q4_K_M".into(),
            sm.into(),
            ts.into(),
            "tg128".into(),
            format!("{a:.2}"),
            format!("{b:.2}"),
            format!("{:.2}", b / a),
        ]
    };
    let header: Vec<String> = [
        "CPU",
        "Model",
        "Split mode",
        "Tensor split",
        "Test",
        &format!("t/s {BASELINE}"),
        &format!("t/s {COMPARE}"),
        "Speedup",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut body = vec![
        expect("layer", "0.00", 100.0, 101.0),
        expect("row", "1.00/1.00", 180.0, 171.0),
    ];
    body.sort();
    assert_eq!(body[1][7], "0.95");
    for format in [Format::Sql, Format::Csv, Format::Json, Format::Jsonl] {
        let text = format.exporter().render(&rows);
        let export = dir.path().join(format!("split.{}", format.extension()));
        std::fs::write(&export, &text).unwrap();
        let input = if format == Format::Sql {
            let db = dir.path().join("split.sqlite");
            let _ = std::fs::remove_file(&db);
            let out = Command::new("sqlite3")
                .arg(&db)
                .stdin(std::fs::File::open(&export).unwrap())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            db
        } else {
            export
        };
        let mut table = compare(&python, &script, dir.path(), &input, format == Format::Sql);
        assert_eq!(table[0], header, "{format:?} export");
        let mut got = table.split_off(1);
        got.sort();
        assert_eq!(got, body, "{format:?} export");
    }
}
