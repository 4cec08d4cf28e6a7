//! Tests of the SQLite store.

use super::*;
use crate::store::record::ColumnRole;
use crate::units::Bytes;

use crate::testing::new_run as run;

/// A validated 1000-element STREAM triad on `threads` threads (2 passes).
fn small_triad(threads: usize) -> crate::measure::stream::StreamResult {
    crate::measure::stream::run(&crate::measure::stream::StreamConfig {
        n_elements: 1000,
        threads,
        passes: 2,
        kernels: vec![crate::measure::stream::Kernel::Triad],
    })
    .unwrap()
}

/// A store at `path` migrated only up to `version`, holding one `bench` run (id 1).
async fn old_store(path: &Path, version: i64) -> SqlitePool {
    let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
        .unwrap()
        .create_if_missing(true);
    let pool = SqlitePool::connect_with(opts).await.unwrap();
    sqlx::migrate!("./migrations")
        .run_to(version, &pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO runs (kind, started_at, finished_at, build_commit, command, cpu_info, cores_logical, ram_bytes, os, kernel, hostname, host_json) VALUES ('bench', '', '', '', '', '', 2, 0, '', '', '', '{}')")
            .execute(&pool)
            .await
            .unwrap();
    pool
}

/// Inserts one `bench_results` row of the named cells.
async fn insert_cells(pool: &SqlitePool, fields: Vec<(&str, ColumnRole, ColumnValue)>) {
    let names: Vec<&str> = fields.iter().map(|(n, _, _)| *n).collect();
    let sql = format!(
        "INSERT INTO bench_results ({}) VALUES ({})",
        names.join(", "),
        vec!["?"; names.len()].join(", ")
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    for (_, _, c) in fields {
        q = bind_cell(q, c);
    }
    q.execute(pool).await.unwrap();
}

/// The columns `bench_results` has in `pool`'s schema.
async fn bench_columns(pool: &SqlitePool) -> Vec<String> {
    sqlx::query("SELECT name FROM pragma_table_info('bench_results')")
        .fetch_all(pool)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<String, _>("name"))
        .collect()
}

async fn store() -> (tempfile::TempDir, Store) {
    let d = tempfile::tempdir().unwrap();
    let s = Store::open(&d.path().join("sub/m.db")).await.unwrap();
    (d, s)
}

#[tokio::test]
async fn frontier_cell_values_carry_their_run_host_and_a_missing_value() {
    let (_d, s) = store().await;
    let mut tx = s.begin().await.unwrap();
    let mut other = run("frontier");
    other.host.hostname = "other".into();
    let a = s.insert_run_tx(&mut tx, &run("frontier")).await.unwrap();
    let b = s.insert_run_tx(&mut tx, &other).await.unwrap();
    for (run_id, quant, measure, value) in [
        (a, "Q8_0", "speed", Some(41.5)),
        (b, "Q4_K_M", "ppl:wiki", None),
    ] {
        sqlx::query(
                "INSERT INTO frontier_cells (run_id, source_file, source_sha256, source_quant, arm_quant, arm_file, arm_sha256, arm_relation,
                    arm_file_bytes, arm_streamed_bytes, measure, config_key, config_json, value, result_json, started_at, finished_at,
                    build_commit, engine_build, n_threads, hostname, cpu_info)
                 VALUES (?, 's.gguf', 'ss', 'Q4_K_M', ?, ?, 'aa', 'above', 1, 1, ?, 'k', '{}', ?, '{}', '', '', '', '', 2, 'cell-host', '')",
            )
            .bind(run_id)
            .bind(quant)
            .bind(format!("/m/{quant}.gguf"))
            .bind(measure)
            .bind(value)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    let got = s.frontier_cell_values().await.unwrap();
    // The host is the run's, not the cell's own column.
    assert_eq!(
        got,
        vec![
            FrontierCellValue {
                run_id: a,
                host: "h".into(),
                arm_file: "/m/Q8_0.gguf".into(),
                arm_quant: "Q8_0".into(),
                measure: "speed".into(),
                value: Some(41.5),
            },
            FrontierCellValue {
                run_id: b,
                host: "other".into(),
                arm_file: "/m/Q4_K_M.gguf".into(),
                arm_quant: "Q4_K_M".into(),
                measure: "ppl:wiki".into(),
                value: None,
            },
        ]
    );
    assert_eq!(
        s.run_started_at(a).await.unwrap().as_deref(),
        Some("2026-01-01T00:00:00Z")
    );
    assert_eq!(s.run_started_at(b + 1).await.unwrap(), None);
}

#[tokio::test]
async fn bench_rows_round_trip_exactly() {
    let (_d, s) = store().await;
    let mut rows = vec![
        BenchRecord::example(),
        BenchRecord {
            n_depth: 512,
            implied_bandwidth_gbps: None,
            swap_out_pages: None,
            ..BenchRecord::example()
        },
    ];
    let run_id = s.insert_bench_run(&run("bench"), &mut rows).await.unwrap();
    assert!(rows[0].id > 0 && rows[1].id > rows[0].id);
    let back = s
        .bench_rows(&RowFilter {
            run_id: Some(run_id),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(back, rows);
    let runs = s.runs().await.unwrap();
    assert_eq!(runs[0].n_bench_rows, 2);
    assert_eq!(runs[0].models, "m.gguf");
}

#[tokio::test]
async fn run_filters_are_one_query_over_the_bench_rows() {
    let (_d, s) = store().await;
    let mut tx = s.begin().await.unwrap();
    let stream_run = s.insert_run_tx(&mut tx, &run("stream")).await.unwrap();
    tx.commit().await.unwrap();
    let mut rows = vec![BenchRecord {
        model_filename: "/models/SmolLM2-135M.Q4_1.gguf".into(),
        test_time: "2026-03-02T10:00:00Z".into(),
        ..BenchRecord::example()
    }];
    let bench_run = s.insert_bench_run(&run("bench"), &mut rows).await.unwrap();
    let ids = |f: RunFilter| {
        let s = &s;
        async move {
            let runs = s.runs_matching(&f).await.unwrap();
            runs.iter().map(|r| r.id).collect::<Vec<i64>>()
        }
    };
    let some = |v: &str| Some(v.to_string());
    // No filter, or only blank fields: every run, newest first.
    assert_eq!(ids(RunFilter::default()).await, [bench_run, stream_run]);
    let blank = RunFilter {
        model: some("  "),
        engine: some(""),
        since: None,
    };
    assert_eq!(ids(blank).await, [bench_run, stream_run]);
    // Model: a substring of the file name, ASCII case ignored (SQLite's LIKE).
    let model = |m: &str| RunFilter {
        model: some(m),
        ..Default::default()
    };
    assert_eq!(ids(model("smollm2")).await, [bench_run]);
    assert!(ids(model("qwen")).await.is_empty());
    // Engine: equal, not a substring.
    let engine = |e: &str| RunFilter {
        engine: some(e),
        ..Default::default()
    };
    assert_eq!(ids(engine("llama.cpp")).await, [bench_run]);
    assert!(ids(engine("llama")).await.is_empty());
    // Since: a date prefix or a full time, inclusive.
    let since = |t: &str| RunFilter {
        since: some(t),
        ..Default::default()
    };
    assert_eq!(ids(since("2026-03-02")).await, [bench_run]);
    assert_eq!(ids(since("2026-03-02T10:00:00Z")).await, [bench_run]);
    assert!(ids(since("2026-03-03")).await.is_empty());
    // All fields must hold for the same row.
    let both = RunFilter {
        model: some("smollm2"),
        engine: some("mlx"),
        since: None,
    };
    assert!(ids(both).await.is_empty());
}

#[tokio::test]
async fn warnings_are_stored_as_a_json_array_and_read_back_as_a_list() {
    let (_d, s) = store().await;
    let two = vec![
        "outliers: 1 repetition(s) with |modified z| > 3.5".to_string(),
        "variance: std is 7.0% of the mean".to_string(),
    ];
    let mut rows = vec![
        BenchRecord {
            warnings: two.clone(),
            ..BenchRecord::example()
        },
        BenchRecord::example(),
    ];
    let run_id = s.insert_bench_run(&run("bench"), &mut rows).await.unwrap();
    let stored: Vec<String> =
        sqlx::query("SELECT warnings FROM bench_results WHERE run_id = ? ORDER BY id")
            .bind(run_id)
            .fetch_all(s.pool())
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>("warnings"))
            .collect();
    assert_eq!(
        stored,
        [
            r#"["outliers: 1 repetition(s) with |modified z| > 3.5","variance: std is 7.0% of the mean"]"#,
            "[]"
        ]
    );
    let back = s.bench_rows(&RowFilter::default()).await.unwrap();
    assert_eq!(back[0].warnings, two);
    assert!(back[1].warnings.is_empty());
}

#[tokio::test]
async fn warnings_joined_before_the_list_migrate_to_one_item_each() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("old.db");
    {
        // The schema before migration 13, with rows whose warnings are "; "-joined text.
        let pool = old_store(&path, 12).await;
        let joined = [
            "",
            "swapping: 3 pages swapped out during the test (a disk measurement)",
            "ceiling —: no compute peak measured: no int8 dot peak is stored for this host (run `memwall peak`); outliers: 2 repetition(s) with |modified z| > 3.5; variance: std is 6.1% of the mean",
        ];
        let have = bench_columns(&pool).await;
        for w in joined {
            let fields: Vec<_> = BenchRecord::example()
                .fields()
                .into_iter()
                .filter(|(n, _, _)| have.iter().any(|h| h == n) && *n != "id" && *n != "warnings")
                .chain([("warnings", ColumnRole::Measure, ColumnValue::Text(w.into()))])
                .collect();
            insert_cells(&pool, fields).await;
        }
        pool.close().await;
    }
    let s = Store::open(&path).await.unwrap();
    let back: Vec<Vec<String>> = s
        .bench_rows(&RowFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.warnings)
        .collect();
    assert_eq!(
            back,
            [
                vec![],
                vec!["swapping: 3 pages swapped out during the test (a disk measurement)".to_string()],
                vec![
                    "ceiling —: no compute peak measured: no int8 dot peak is stored for this host (run `memwall peak`)".to_string(),
                    "outliers: 2 repetition(s) with |modified z| > 3.5".to_string(),
                    "variance: std is 6.1% of the mean".to_string(),
                ],
            ]
        );
}

#[tokio::test]
async fn a_failed_transaction_leaves_nothing() {
    let (_d, s) = store().await;
    let mut tx = s.begin().await.unwrap();
    let run_id = s.insert_run_tx(&mut tx, &run("bench")).await.unwrap();
    let mut rows = vec![BenchRecord::example()];
    s.insert_bench_rows_tx(&mut tx, run_id, &mut rows)
        .await
        .unwrap();
    drop(tx); // killed before commit
    assert!(s.runs().await.unwrap().is_empty());
    assert!(
        s.bench_rows(&RowFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn delete_cascades_and_reports_missing() {
    let (_d, s) = store().await;
    let mut rows = vec![BenchRecord::example()];
    let id = s.insert_bench_run(&run("bench"), &mut rows).await.unwrap();
    s.delete_run(id).await.unwrap();
    assert!(
        s.bench_rows(&RowFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
    let e = s.delete_run(id).await.unwrap_err().to_string();
    assert!(e.contains(&format!("no run with id {id}")), "{e}");
}

#[tokio::test]
async fn latest_triad_is_found() {
    let (_d, s) = store().await;
    let res = small_triad(2);
    let ids = s
        .insert_stream_run(&run("stream"), std::slice::from_ref(&res), &[])
        .await
        .unwrap()
        .kernel_ids;
    let t = s.latest_triad("h", None).await.unwrap().unwrap();
    assert_eq!(t.id, ids[0][0]);
    assert_eq!(t.best_gbps, res.kernels[0].best_gbps.0);
    assert!(s.latest_triad("other", None).await.unwrap().is_none());
}

#[tokio::test]
async fn a_gpu_stream_row_is_never_the_cpu_ceiling() {
    let (_d, s) = store().await;
    let cpu = small_triad(1);
    let cpu_id = s
        .insert_stream_run(&run("stream"), &[cpu], &[])
        .await
        .unwrap()
        .kernel_ids[0][0];
    // A later, faster row measured on a GPU of the same host.
    let mut gpu = small_triad(1);
    gpu.kernels[0].best_gbps = crate::units::Gbps(4000.0);
    let gpu_id = s
        .insert_stream_run_on(&run("stream"), "CUDA0 NVIDIA H200", &[gpu], &[])
        .await
        .unwrap()
        .kernel_ids[0][0];
    assert_eq!(s.latest_triad("h", None).await.unwrap().unwrap().id, cpu_id);
    let g = s
        .latest_device_triad("h", "CUDA0 NVIDIA H200")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((g.id, g.best_gbps), (gpu_id, 4000.0));
    assert!(
        s.latest_device_triad("h", "CUDA1 NVIDIA H200")
            .await
            .unwrap()
            .is_none()
    );
}

/// A peak is stored with its bound and read back; a row without a bound (stored
/// before bounds existed, by kernels the compiler could hoist) is not a roof.
#[tokio::test]
async fn only_peaks_with_a_bound_are_a_roof() {
    use crate::measure::peak::{Bound, Clock, ClockSource, Isa, Peak, PeakKind};
    use crate::units::Gflops;
    let (_d, s) = store().await;
    // An old row, as migration 0001 stored it: no bound.
    let old_run = s
        .insert_stream_run(&run("peak"), &[], &[])
        .await
        .unwrap()
        .run_id;
    sqlx::query(
            "INSERT INTO peak_results (run_id, measured_at, kind, threads, gflops, isa, cpu_info, hostname) VALUES (?, 't', 'int8 dot', 2, 16428.2, 'avx2', 'cpu', 'h')",
        )
        .bind(old_run)
        .execute(s.pool())
        .await
        .unwrap();
    assert_eq!(s.latest_peak("h", "int8 dot").await.unwrap(), None);
    let clock = Clock {
        ghz: 3.0,
        source: ClockSource::AddChain,
    };
    let p = Peak {
        kind: PeakKind::Int8Dot,
        gflops: Gflops(300.0),
        threads: 2,
        isa: "avx2".into(),
        bound: Bound::new(2, clock, Isa::Avx2.limits(PeakKind::Int8Dot)),
    };
    s.insert_stream_run(&run("peak"), &[], &[p]).await.unwrap();
    let got = s.latest_peak("h", "int8 dot").await.unwrap().unwrap();
    assert_eq!((got.gflops, got.isa.as_str()), (300.0, "avx2"));
    assert_eq!(got.bound_gflops, 768.0); // 2 × 3 GHz × 32 × 2 × 2
    assert_eq!(
        (got.clock_ghz, got.clock_source.as_str()),
        (3.0, "measured dependent-add chain")
    );
}

#[tokio::test]
async fn rows_stored_before_the_llama_bench_columns_migrate() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("old.db");
    {
        // The schema as it was before migration 12 (llama-bench's columns), with one row in it.
        let pool = old_store(&path, 11).await;
        // Every record column the old table has (the row as memwall stored it
        // then); the columns later migrations re-encode get their old encodings.
        let have = bench_columns(&pool).await;
        let changed = ["id", "flash_attn", "gpu_info", "warnings"];
        let old = BenchRecord::example();
        let mut fields: Vec<_> = old
            .fields()
            .into_iter()
            .filter(|(n, _, _)| have.iter().any(|h| h == n) && !changed.contains(n))
            .collect();
        fields.push((
            "warnings",
            ColumnRole::Measure,
            ColumnValue::Text(String::new()),
        ));
        fields.push((
            "backend",
            ColumnRole::Key,
            ColumnValue::Text("CPU; CPU : AVX2 = 1 | FMA = 1 |".into()),
        ));
        fields.push((
            "flash_attn",
            ColumnRole::Key,
            ColumnValue::Text("on".into()),
        ));
        fields.push((
            "gpu_info",
            ColumnRole::Key,
            ColumnValue::Text("GPU A; GPU B".into()),
        ));
        insert_cells(&pool, fields).await;
        pool.close().await;
    }
    let s = Store::open(&path).await.unwrap();
    let back = s.bench_rows(&RowFilter::default()).await.unwrap();
    assert_eq!(back.len(), 1);
    let r = &back[0];
    assert_eq!(r.backends, "CPU");
    assert_eq!(r.system_info, "CPU : AVX2 = 1 | FMA = 1 |");
    assert_eq!(r.flash_attn, 1);
    assert_eq!(r.gpu_info, "GPU A, GPU B");
    assert_eq!(r.build_number, None);
    assert_eq!(r.llama, crate::store::record::LlamaDefaults::default());
    assert_eq!(r.avg_ts, BenchRecord::example().avg_ts);
}

#[test]
fn network_filesystems_are_recognised_by_magic_number() {
    // statfs(2) f_type values from linux/magic.h and the SMB client's cifsglob.h.
    assert_eq!(network_filesystem(0x6969), Some("NFS"));
    assert_eq!(network_filesystem(0x517B), Some("SMB"));
    assert_eq!(network_filesystem(0xFF53_4D42), Some("CIFS"));
    assert_eq!(network_filesystem(0xFE53_4D42), Some("SMB2"));
    assert_eq!(network_filesystem(0x6573_5546), Some("FUSE (e.g. sshfs)"));
    assert_eq!(network_filesystem(0x0102_1997), Some("9p"));
    // Local ones: ext4, tmpfs, btrfs, xfs, overlayfs.
    for local in [0xEF53, 0x0102_1994, 0x9123_683E, 0x5846_5342, 0x794C_7630] {
        assert_eq!(network_filesystem(local), None, "{local:#x}");
    }
    // A signed 64-bit f_type holding CIFS's magic number truncates to the same u32.
    assert_eq!(network_filesystem(0xFF53_4D42_i64 as u32), Some("CIFS"));
    assert_eq!(network_filesystem_by_name("smbfs"), Some("SMB"));
    assert_eq!(network_filesystem_by_name("nfs"), Some("NFS"));
    assert_eq!(network_filesystem_by_name("apfs"), None);
}

#[tokio::test]
async fn a_database_on_a_network_file_system_gets_a_rollback_journal() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(
        network_filesystem_of(d.path()),
        None,
        "the temp dir is local"
    );
    let local = Store::open(&d.path().join("local.db")).await.unwrap();
    let remote = Store::open_with_journal(&d.path().join("remote.db"), true)
        .await
        .unwrap();
    for (s, want) in [(&local, "wal"), (&remote, "delete")] {
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(s.pool())
            .await
            .unwrap();
        assert_eq!((mode.as_str(), s.journal_mode()), (want, want));
    }
    let mut rows = vec![BenchRecord::example()];
    remote
        .insert_bench_run(&run("bench"), &mut rows)
        .await
        .unwrap();
    assert_eq!(
        remote.bench_rows(&RowFilter::default()).await.unwrap(),
        rows
    );
}

#[tokio::test]
async fn a_write_transaction_that_reads_first_holds_the_write_lock() {
    // A deferred transaction that reads and then writes fails at once with
    // SQLITE_BUSY (a stale snapshot) when another connection commits in between;
    // `begin` takes the write lock up front, so the other writer waits instead.
    let (_d, s1) = store().await;
    let s2 = Store::open(s1.path()).await.unwrap();
    let mut tx = s1.begin().await.unwrap();
    let before: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM runs")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    let other = tokio::spawn(async move {
        let mut rows = vec![BenchRecord::example()];
        s2.insert_bench_run(&run("bench"), &mut rows).await
    });
    // Give the other writer the chance it would have without the lock.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    s1.insert_run_tx(&mut tx, &run("bench")).await.unwrap();
    tx.commit().await.unwrap();
    other.await.unwrap().unwrap();
    assert_eq!(before, 0);
    assert_eq!(s1.runs().await.unwrap().len(), 2);
}

const WRITERS: usize = 8;
/// Set in a re-invoked test binary: `<writer index>`; the binary is then one writer.
const WRITER_ENV: &str = "MEMWALL_STORE_TEST_WRITER";
const DB_ENV: &str = "MEMWALL_STORE_TEST_DB";

/// One writer process: `n_rows` bench rows, each in its own transaction (a run and
/// its row), on host `writer-<i>`. Fails listing every error.
async fn writer(i: usize, db: &Path, rollback_journal: bool, n_rows: usize) {
    let s = Store::open_with_journal(db, rollback_journal)
        .await
        .unwrap();
    let mut errors = Vec::new();
    for j in 0..n_rows {
        let mut r = run("bench");
        r.host.hostname = format!("writer-{i}");
        let mut rows = vec![BenchRecord {
            hostname: format!("writer-{i}"),
            model_filename: format!("w{i}-{j}.gguf"),
            ..BenchRecord::example()
        }];
        if let Err(e) = s.insert_bench_run(&r, &mut rows).await {
            errors.push(e.to_string());
        }
    }
    assert!(
        errors.is_empty(),
        "writer {i}: {} errors, first: {:?}",
        errors.len(),
        errors.first()
    );
}

/// Eight processes (this test binary, re-invoked as writers) write `n_rows` rows
/// each into one new database while this process lists history in a loop; every
/// row arrives and nobody sees an error.
async fn eight_processes_write_while_history_reads(
    test_name: &str,
    rollback_journal: bool,
    n_rows: usize,
) {
    if let Ok(i) = std::env::var(WRITER_ENV) {
        let db = PathBuf::from(std::env::var(DB_ENV).expect("the parent sets the db"));
        return writer(i.parse().unwrap(), &db, rollback_journal, n_rows).await;
    }
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("shared.db");
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<_> = (0..WRITERS)
        .map(|i| {
            std::process::Command::new(&exe)
                .args([test_name, "--exact", "--test-threads=1"])
                .env(WRITER_ENV, i.to_string())
                .env(DB_ENV, &db)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // The reader opens the new file together with the writers (migrations race too).
    let reader = Store::open_with_journal(&db, rollback_journal)
        .await
        .unwrap();
    let (mut reads, mut read_errors) = (0usize, Vec::new());
    loop {
        match reader.runs().await {
            Ok(_) => reads += 1,
            Err(e) => read_errors.push(e.to_string()),
        }
        if children.iter_mut().all(|c| c.try_wait().unwrap().is_some()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    for (i, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "writer {i} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        read_errors.is_empty(),
        "{} of {} history reads failed, first: {:?}",
        read_errors.len(),
        reads + read_errors.len(),
        read_errors.first()
    );
    let runs = reader.runs().await.unwrap();
    let rows = reader.bench_rows(&RowFilter::default()).await.unwrap();
    assert_eq!(runs.len(), WRITERS * n_rows);
    assert_eq!(rows.len(), WRITERS * n_rows);
    for i in 0..WRITERS {
        let host = format!("writer-{i}");
        let mine: Vec<&BenchRecord> = rows.iter().filter(|r| r.hostname == host).collect();
        assert_eq!(mine.len(), n_rows, "{host}");
        assert!(
            runs.iter()
                .filter(|r| r.hostname == host)
                .all(|r| r.n_bench_rows == 1)
        );
    }
    eprintln!(
        "{} writers × {n_rows} rows = {} rows, {} runs; {reads} history reads, 0 errors (journal {})",
        WRITERS,
        rows.len(),
        runs.len(),
        reader.journal_mode()
    );
}

#[tokio::test]
async fn eight_processes_write_while_history_reads_wal() {
    eight_processes_write_while_history_reads(
        "store::tests::eight_processes_write_while_history_reads_wal",
        false,
        200,
    )
    .await
}

/// The network-file-system configuration. A commit with a rollback journal costs
/// several fsyncs (creating, syncing and deleting the journal besides the database
/// itself): fewer rows per writer keep the test short.
#[tokio::test]
async fn eight_processes_write_while_history_reads_rollback_journal() {
    eight_processes_write_while_history_reads(
        "store::tests::eight_processes_write_while_history_reads_rollback_journal",
        true,
        25,
    )
    .await
}

#[tokio::test]
async fn the_guard_report_is_stored_with_its_run() {
    use crate::measure::guard::{Guard, GuardOptions};
    use crate::probe::hw::{LiveState, MemState, PowerSource, Thermal, ThermalState};
    let (_d, s) = store().await;
    let live = |swapped| LiveState {
        power: PowerSource::Unknown,
        thermal: Thermal {
            state: ThermalState::Nominal,
            max_celsius: Some(50.0),
        },
        mem: MemState {
            total: Bytes(1 << 30),
            available: Bytes(1 << 29),
            swap_total: Bytes(0),
            swap_used: Bytes(0),
        },
        swap_out_pages: Some(swapped),
    };
    let report = Guard::begin_at(live(7), GuardOptions::default())
        .unwrap()
        .finish_at(live(9));
    let mut with = run("kv");
    with.guard = Some(report.clone());
    let mut tx = s.begin().await.unwrap();
    let a = s.insert_run_tx(&mut tx, &with).await.unwrap();
    let b = s.insert_run_tx(&mut tx, &run("stream")).await.unwrap();
    tx.commit().await.unwrap();
    let back = s.run_guard(a).await.unwrap().unwrap();
    assert_eq!(back, report);
    assert_eq!(back.swap_out_pages, Some(2));
    assert_eq!(back.thermal_after, "nominal 50.0C");
    assert_eq!(s.run_guard(b).await.unwrap(), None);
    assert!(s.run_guard(b + 1).await.is_err());
}

#[tokio::test]
async fn migrated_columns_match_the_record() {
    let (_d, s) = store().await;
    let mut have: Vec<String> = sqlx::query("SELECT name FROM pragma_table_info('bench_results')")
        .fetch_all(s.pool())
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<String, _>("name"))
        .collect();
    let mut want: Vec<String> = BenchRecord::column_names()
        .into_iter()
        .map(String::from)
        .collect();
    // The row's identity across stores (migration 0025), kept by the store and its
    // copies, not a measurement.
    have.retain(|c| c != "row_key");
    have.sort();
    want.sort();
    assert_eq!(
        have, want,
        "every record field is a column and every column a field"
    );
}
