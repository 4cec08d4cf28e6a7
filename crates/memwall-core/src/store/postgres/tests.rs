//! Tests of the shared store (PostgreSQL through `crate::testing::PgCluster`).

use super::fixture::{HostFixture, host_store};
use super::*;
use crate::store::record::BenchRecord;
use crate::testing::PgCluster;
use std::collections::BTreeMap;

/// Every user table of a migrated store: (table, column) → (type class, nullable).
type Schema = BTreeMap<(String, String), (String, bool)>;

async fn sqlite_schema(path: &Path) -> Schema {
    let mut c = any_sqlite(path).await.unwrap();
    let rows = sqlx::query(
            "SELECT m.name, p.name, p.type, p.\"notnull\", p.pk FROM sqlite_master m JOIN pragma_table_info(m.name) p
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> '_sqlx_migrations'",
        )
        .fetch_all(&mut c)
        .await
        .unwrap();
    rows.iter()
        .map(|r| {
            let ty: String = r.get(2);
            let class = match ty.as_str() {
                "INTEGER" => "integer",
                "REAL" => "real",
                "TEXT" => "text",
                other => panic!("unexpected SQLite type {other}"),
            };
            // An INTEGER PRIMARY KEY is the rowid: never NULL.
            let nullable = r.get::<i64, _>(3) == 0 && r.get::<i64, _>(4) == 0;
            ((r.get(0), r.get(1)), (class.to_string(), nullable))
        })
        .collect()
}

async fn pg_schema(url: &str) -> Schema {
    let mut pg = open_postgres(url).await.unwrap();
    let rows = sqlx::query(
            "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text FROM information_schema.columns
             WHERE table_schema = 'public' AND table_name <> '_sqlx_migrations'",
        )
        .fetch_all(&mut pg.conn)
        .await
        .unwrap();
    rows.iter()
        .map(|r| {
            let ty: String = r.get(2);
            let class = match ty.as_str() {
                "bigint" => "integer",
                "double precision" => "real",
                "text" => "text",
                other => other,
            };
            let nullable: String = r.get(3);
            ((r.get(0), r.get(1)), (class.to_string(), nullable == "YES"))
        })
        .collect()
}

/// The differences between two schemas, one line each (empty when in step).
fn schema_diff(sqlite: &Schema, pg: &Schema) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in sqlite {
        match pg.get(k) {
            None => out.push(format!("{}.{}: in SQLite only", k.0, k.1)),
            Some(w) if w != v => out.push(format!(
                "{}.{}: SQLite {} {}, PostgreSQL {} {}",
                k.0,
                k.1,
                v.0,
                if v.1 { "NULL" } else { "NOT NULL" },
                w.0,
                if w.1 { "NULL" } else { "NOT NULL" }
            )),
            _ => {}
        }
    }
    for k in pg.keys().filter(|k| !sqlite.contains_key(*k)) {
        out.push(format!("{}.{}: in PostgreSQL only", k.0, k.1));
    }
    out
}

/// Index and trigger names of each back end.
async fn sqlite_objects(path: &Path) -> Vec<String> {
    let mut c = any_sqlite(path).await.unwrap();
    let mut v: Vec<String> = sqlx::query_scalar(
            "SELECT type || ' ' || name FROM sqlite_master WHERE type IN ('index', 'trigger') AND name NOT LIKE 'sqlite_autoindex_%' AND name <> 'runs_get_a_uuid' AND name NOT LIKE '%_gets_a_row_key'",
        )
        .fetch_all(&mut c)
        .await
        .unwrap();
    v.sort();
    v
}

async fn pg_objects(url: &str) -> Vec<String> {
    let mut pg = open_postgres(url).await.unwrap();
    let mut v: Vec<String> = sqlx::query_scalar(
            "SELECT 'index ' || indexname::text FROM pg_indexes WHERE schemaname = 'public' AND indexname NOT IN (SELECT conname FROM pg_constraint)
             UNION SELECT DISTINCT 'trigger ' || trigger_name::text FROM information_schema.triggers WHERE trigger_schema = 'public'",
        )
        .fetch_all(&mut pg.conn)
        .await
        .unwrap();
    v.sort();
    v
}

async fn counts_sqlite(path: &Path) -> BTreeMap<String, i64> {
    let mut c = any_sqlite(path).await.unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> '_sqlx_migrations'",
        )
        .fetch_all(&mut c)
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    for t in tables {
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {t}")))
            .fetch_one(&mut c)
            .await
            .unwrap();
        out.insert(t, n);
    }
    out
}

async fn counts_pg(url: &str, tables: impl Iterator<Item = &String>) -> BTreeMap<String, i64> {
    let mut pg = open_postgres(url).await.unwrap();
    let mut out = BTreeMap::new();
    for t in tables {
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {t}")))
            .fetch_one(&mut pg.conn)
            .await
            .unwrap();
        out.insert(t.clone(), n);
    }
    out
}

fn add(a: &BTreeMap<String, i64>, b: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    a.iter().map(|(k, v)| (k.clone(), v + b[k])).collect()
}

fn host(name: &str, triad: f64, tg: f64) -> HostFixture {
    HostFixture::new(name, triad, tg)
}

#[tokio::test]
async fn the_copy_carries_every_table_the_migrations_create() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("s.db");
    Store::open(&p).await.unwrap();
    let tables: std::collections::BTreeSet<String> = sqlite_schema(&p)
        .await
        .into_keys()
        .map(|(t, _)| t)
        .collect();
    let carried: std::collections::BTreeSet<String> = NOT_UNDER_RUNS
        .iter()
        .copied()
        .chain(CARRIED.iter().map(|c| c.table))
        .map(String::from)
        .collect();
    assert_eq!(
        tables, carried,
        "store::postgres::CARRIED must list every table (a new table needs its place in the copy)"
    );
}

#[tokio::test]
async fn old_runs_get_a_uuid_and_new_runs_get_one_at_insert() {
    let d = tempfile::tempdir().unwrap();
    let s = host_store(&d.path().join("s.db"), &host("a", 40.0, 20.0)).await;
    let uuids: Vec<String> = sqlx::query_scalar("SELECT uuid FROM runs ORDER BY id")
        .fetch_all(s.pool())
        .await
        .unwrap();
    assert_eq!(uuids.len(), 9);
    let distinct: std::collections::BTreeSet<&String> = uuids.iter().collect();
    assert_eq!(distinct.len(), uuids.len(), "uuids are unique: {uuids:?}");
    for u in &uuids {
        // 8-4-4-4-12 lowercase hex, version 4, RFC 4122 variant.
        let parts: Vec<&str> = u.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12],
            "{u}"
        );
        assert!(
            u.chars()
                .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c)),
            "{u}"
        );
        assert!(
            parts[2].starts_with('4') && "89ab".contains(&parts[3][..1]),
            "{u}"
        );
    }
    let dup =
        sqlx::query("UPDATE runs SET uuid = (SELECT uuid FROM runs WHERE id = 1) WHERE id = 2")
            .execute(s.pool())
            .await;
    assert!(dup.is_err(), "two runs cannot share a uuid");
}

#[tokio::test]
async fn postgres_migrations_keep_in_step_with_sqlite() {
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.database("parity");
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("s.db");
    Store::open(&p).await.unwrap();
    let (lite, post) = (sqlite_schema(&p).await, pg_schema(&url).await);
    assert!(lite.len() > 350, "read only {} SQLite columns", lite.len());
    let diff = schema_diff(&lite, &post);
    assert!(
        diff.is_empty(),
        "the two schemas differ:\n{}",
        diff.join("\n")
    );
    assert_eq!(sqlite_objects(&p).await, pg_objects(&url).await);
    // Opening again applies nothing and keeps the schema.
    assert_eq!(pg_schema(&url).await, post);

    // The comparison catches a column added on one side and a changed nullability.
    let mut c = open_postgres(&url).await.unwrap();
    for q in [
        "ALTER TABLE runs ADD COLUMN extra BIGINT",
        "ALTER TABLE peak_results ALTER COLUMN gflops DROP NOT NULL",
        "ALTER TABLE stream_results ALTER COLUMN best_gbps TYPE TEXT",
    ] {
        sqlx::query(q).execute(&mut c.conn).await.unwrap();
    }
    let diff = schema_diff(&lite, &pg_schema(&url).await);
    assert_eq!(
        diff,
        [
            "peak_results.gflops: SQLite real NOT NULL, PostgreSQL real NULL",
            "stream_results.best_gbps: SQLite real NOT NULL, PostgreSQL text NOT NULL",
            "runs.extra: in PostgreSQL only",
        ]
    );
}

#[tokio::test]
async fn push_twice_copies_each_run_once_with_remapped_ids() {
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.database("lab");
    let d = tempfile::tempdir().unwrap();
    let (pa, pb) = (d.path().join("a.db"), d.path().join("b.db"));
    host_store(&pa, &host("a", 40.0, 20.0)).await;
    host_store(&pb, &host("b", 80.0, 50.0)).await;
    // b first, so a's rows get other ids in the shared store than at home.
    let ob = push_job(&pb, &url, |_| {}).await.unwrap();
    let oa = push_job(&pa, &url, |_| {}).await.unwrap();
    assert_eq!(
        (oa.copied.len(), oa.already_there.len(), oa.failed.len()),
        (9, 0, 0),
        "{oa}: {:?}",
        oa.failed
    );
    assert_eq!((ob.copied.len(), ob.sheets_copied), (9, 1));
    assert!(
        oa.copied.iter().all(|r| r.to_id == r.from_id + 9),
        "{:?}",
        oa.copied
    );
    let (ca, cb) = (counts_sqlite(&pa).await, counts_sqlite(&pb).await);
    assert!(
        ca.values().all(|n| *n > 0),
        "the fixture fills every table: {ca:?}"
    );
    let want = add(&ca, &cb);
    assert_eq!(counts_pg(&url, want.keys()).await, want);

    // A second push adds nothing.
    let again = push_job(&pa, &url, |_| {}).await.unwrap();
    assert_eq!(
        (
            again.copied.len(),
            again.already_there.len(),
            again.sheets_copied
        ),
        (0, 9, 0)
    );
    assert!(
        again
            .already_there
            .iter()
            .all(|r| r.to_id == r.from_id + 9 && r.new_rows.is_empty())
    );
    assert_eq!(counts_pg(&url, want.keys()).await, want);

    // Every reference lands on the row of the same run it named at home.
    let mut c = open_postgres(&url).await.unwrap();
    let q = |sql: &'static str| sqlx::query_scalar::<Any, String>(sql);
    let at_home = |sql: &'static str| sqlx::query_scalar::<Any, String>(sql);
    let mut la = any_sqlite(&pa).await.unwrap();
    for (shared, home) in [
        (
            "SELECT r.uuid || ' ' || s.kernel || ' ' || b.hostname FROM bench_results b JOIN stream_results s ON s.id = b.stream_id JOIN runs r ON r.id = s.run_id ORDER BY b.id",
            "SELECT r.uuid || ' ' || s.kernel || ' ' || b.hostname FROM bench_results b JOIN stream_results s ON s.id = b.stream_id JOIN runs r ON r.id = s.run_id ORDER BY b.id",
        ),
        (
            "SELECT r.uuid || ' ' || g.hostname FROM spec_bench b JOIN spec_gates g ON g.id = b.gate_id JOIN runs r ON r.id = g.run_id ORDER BY b.id",
            "SELECT r.uuid || ' ' || g.hostname FROM spec_bench b JOIN spec_gates g ON g.id = b.gate_id JOIN runs r ON r.id = g.run_id ORDER BY b.id",
        ),
        (
            "SELECT r.uuid || ' ' || b.test_time FROM row_energy e JOIN bench_results b ON b.id = e.row_id JOIN runs r ON r.id = e.run_id AND r.id = b.run_id ORDER BY e.row_id",
            "SELECT r.uuid || ' ' || b.test_time FROM row_energy e JOIN bench_results b ON b.id = e.row_id JOIN runs r ON r.id = e.run_id AND r.id = b.run_id ORDER BY e.row_id",
        ),
        (
            "SELECT r.uuid || ' ' || i.item_id FROM frontier_items i JOIN frontier_cells c ON c.id = i.cell_id JOIN runs r ON r.id = c.run_id ORDER BY i.id",
            "SELECT r.uuid || ' ' || i.item_id FROM frontier_items i JOIN frontier_cells c ON c.id = i.cell_id JOIN runs r ON r.id = c.run_id ORDER BY i.id",
        ),
        (
            "SELECT r.uuid || ' ' || s.sha256 FROM prediction_scores p JOIN prediction_sheets s ON s.id = p.sheet_id JOIN runs r ON r.id = p.run_id ORDER BY r.id",
            "SELECT r.uuid || ' ' || s.sha256 FROM prediction_scores p JOIN prediction_sheets s ON s.id = p.sheet_id JOIN runs r ON r.id = p.run_id ORDER BY r.id",
        ),
    ] {
        let there = q(shared).fetch_all(&mut c.conn).await.unwrap();
        let home = at_home(home).fetch_all(&mut la).await.unwrap();
        assert!(!home.is_empty());
        for h in &home {
            assert!(there.contains(h), "{h} not in {there:?} ({shared})");
        }
        assert_eq!(there.len(), 2 * home.len(), "{shared}");
    }
    // Values travel unchanged (a REAL, a NULL, a JSON text).
    let v: Vec<(f64, Option<f64>, String)> = sqlx::query_as::<Any, (f64, Option<f64>, String)>(
            "SELECT avg_ts, swap_out_pages::float8, samples_ns FROM bench_results b JOIN runs r ON r.id = b.run_id WHERE r.hostname = 'a'",
        )
        .fetch_all(&mut c.conn)
        .await
        .unwrap();
    let home: Vec<(f64, Option<f64>, String)> = sqlx::query_as::<Any, (f64, Option<f64>, String)>(
        "SELECT avg_ts, CAST(swap_out_pages AS REAL), samples_ns FROM bench_results",
    )
    .fetch_all(&mut la)
    .await
    .unwrap();
    assert_eq!(v, home);
}

#[tokio::test]
async fn a_run_that_fails_midway_leaves_nothing() {
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.database("lab");
    let d = tempfile::tempdir().unwrap();
    let pa = d.path().join("a.db");
    let s = host_store(&pa, &host("a", 40.0, 20.0)).await;
    // A run whose STREAM row copies and whose sampler counter then cannot: SQLite
    // stores a NUL inside text, PostgreSQL refuses it.
    let mut r = crate::testing::new_run("bench");
    r.host.hostname = "a".into();
    let mut rows = vec![BenchRecord::example()];
    let bad = s.insert_bench_run(&r, &mut rows).await.unwrap();
    sqlx::query("INSERT INTO sampler_counters (run_id, name, source, available, reason) VALUES (?, 'x', 'y', 0, ?)")
            .bind(bad)
            .bind("bad\0text")
            .execute(s.pool())
            .await
            .unwrap();
    let bad_uuid: String = sqlx::query_scalar("SELECT uuid FROM runs WHERE id = ?")
        .bind(bad)
        .fetch_one(s.pool())
        .await
        .unwrap();
    let mut lines = Vec::new();
    let out = push_job(&pa, &url, |m| lines.push(m.to_string()))
        .await
        .unwrap();
    assert_eq!((out.copied.len(), out.failed.len()), (9, 1), "{out}");
    assert_eq!(out.failed[0].from_id, bad);
    assert!(
        out.failed[0].error.contains("sampler_counters"),
        "{}",
        out.failed[0].error
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("FAILED run {bad} "))),
        "{lines:?}"
    );
    // Nothing of it: no run with its uuid, and every table holds exactly the rows
    // of the other runs.
    let mut c = open_postgres(&url).await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM runs WHERE uuid = $1")
        .bind(&bad_uuid)
        .fetch_one(&mut c.conn)
        .await
        .unwrap();
    assert_eq!(n, 0);
    let mut home = counts_sqlite(&pa).await;
    *home.get_mut("runs").unwrap() -= 1;
    *home.get_mut("bench_results").unwrap() -= 1;
    *home.get_mut("sampler_counters").unwrap() -= 1;
    assert_eq!(counts_pg(&url, home.keys()).await, home);
}

#[tokio::test]
async fn a_snapshot_keeps_the_shared_ids() {
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.database("lab");
    let d = tempfile::tempdir().unwrap();
    let (pa, pb) = (d.path().join("a.db"), d.path().join("b.db"));
    host_store(&pa, &host("a", 40.0, 20.0)).await;
    host_store(&pb, &host("b", 80.0, 50.0)).await;
    push_job(&pb, &url, |_| {}).await.unwrap();
    push_job(&pa, &url, |_| {}).await.unwrap();
    let snap = d.path().join("snap.db");
    let (s, out) = snapshot(&url, &snap).await.unwrap();
    assert_eq!((out.copied.len(), out.sheets_copied), (18, 2));
    assert!(out.copied.iter().all(|r| r.to_id == r.from_id));
    let mut c = open_postgres(&url).await.unwrap();
    let mut l = any_sqlite(s.path()).await.unwrap();
    for sql in [
        "SELECT id || ' ' || run_id || ' ' || stream_id || ' ' || hostname FROM bench_results ORDER BY id",
        "SELECT id || ' ' || run_id || ' ' || COALESCE(gate_id, 0) FROM spec_bench ORDER BY id",
        "SELECT id || ' ' || uuid FROM runs ORDER BY id",
    ] {
        let a: Vec<String> = sqlx::query_scalar(sql)
            .fetch_all(&mut c.conn)
            .await
            .unwrap();
        let b: Vec<String> = sqlx::query_scalar(sql).fetch_all(&mut l).await.unwrap();
        assert!(!a.is_empty());
        assert_eq!(a, b, "{sql}");
    }
    let err = snapshot(&url, &snap).await.unwrap_err().to_string();
    assert!(err.contains("snap.db") && err.contains("new file"), "{err}");
}

/// Records a prediction sheet in `s` for the fixture's tg128 row (predicted
/// 25 t/s) and scores it against bench run `run`, as `memwall predict score` does.
async fn score_the_bench_run(
    s: &Store,
    run: i64,
) -> (
    crate::experiments::predict::Sheet,
    crate::experiments::predict::Scorecard,
) {
    use crate::experiments::predict::{PredictedTest, SheetPayload, record_sheet, score_run};
    let payload = SheetPayload {
        hostname: "a".into(),
        roof_source: "given".into(),
        roof: crate::roofline::MachineRoof {
            bandwidth: crate::units::Gbps(40.0),
            stream_id: 0,
            read_bandwidth: None,
            peak_f32: None,
            peak_int8: None,
            gpu: None,
        },
        efficiency: 1.0,
        tests: vec![PredictedTest {
            model_filename: "m.gguf".into(),
            model_sha256: BenchRecord::example().model_sha256,
            test: "tg128".into(),
            n_prompt: 0,
            n_gen: 128,
            n_depth: 0,
            n_seqs: 1,
            n_threads: 2,
            ceiling_tps: Some(25.0),
            predicted_tps: Some(25.0),
            no_ceiling: None,
        }],
        ratios: vec![],
        note: "test".into(),
    };
    let sheet = record_sheet(s, &payload).await.unwrap();
    let card = score_run(s, sheet.id, run).await.unwrap();
    // The fixture's row measured 20 t/s: (20 − 25) ÷ 25 = −20 %.
    assert_eq!(card.tests[0].measured_tps, Some(20.0));
    assert_eq!(card.tests[0].error_pct, Some(-20.0));
    (sheet, card)
}

/// The bench run of a fixture store (the one holding the tg128 row).
async fn bench_run(s: &Store) -> (i64, String) {
    sqlx::query_as("SELECT r.id, r.uuid FROM runs r JOIN bench_results b ON b.run_id = r.id")
        .fetch_one(s.pool())
        .await
        .unwrap()
}

/// The scorecards in PostgreSQL of the sheet with hash `sha`: (run uuid, sheet
/// hash, result_json, row_key).
async fn pg_scores(url: &str, sha: &str) -> Vec<(String, String, String, String)> {
    let mut c = open_postgres(url).await.unwrap();
    sqlx::query_as::<Any, (String, String, String, String)>(
            "SELECT r.uuid, s.sha256, p.result_json, p.row_key FROM prediction_scores p JOIN prediction_sheets s ON s.id = p.sheet_id JOIN runs r ON r.id = p.run_id WHERE s.sha256 = $1",
        )
        .bind(sha)
        .fetch_all(&mut c.conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn every_table_under_runs_has_a_unique_row_key_filled_at_insert() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("a.db");
    let s = host_store(&p, &host("a", 40.0, 20.0)).await;
    let mut c = any_sqlite(&p).await.unwrap();
    for t in CARRIED.iter().map(|c| c.table) {
        let cols = sqlite_columns(&mut c, "a.db", t).await.unwrap();
        assert!(
            cols.iter()
                .any(|(n, k)| n == "row_key" && *k == Class::Text),
            "{t} has no row_key TEXT column"
        );
        let unique: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM pragma_index_list($1) l JOIN pragma_index_info(l.name) i WHERE l.\"unique\" = 1 AND i.name = 'row_key' AND l.name = $1 || '_row_key'",
            )
            .bind(t)
            .fetch_one(&mut c)
            .await
            .unwrap();
        assert_eq!(unique, 1, "{t}: no unique index {t}_row_key on row_key");
        // The fixture inserts without a key: every row got one, each its own.
        let (n, keyed, distinct): (i64, i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*), COUNT(row_key), COUNT(DISTINCT row_key) FROM {t}"
        )))
        .fetch_one(s.pool())
        .await
        .unwrap();
        assert_eq!((keyed, distinct), (n, n), "{t}");
    }
    // A re-scored card keeps its key (it is the same row); the write-once tables
    // still refuse edits once the key is there.
    let (run, _) = bench_run(&s).await;
    let (sheet, _) = score_the_bench_run(&s, run).await;
    let key = "SELECT row_key FROM prediction_scores WHERE sheet_id = ?";
    let before: String = sqlx::query_scalar(key)
        .bind(sheet.id)
        .fetch_one(s.pool())
        .await
        .unwrap();
    crate::experiments::predict::score_run(&s, sheet.id, run)
        .await
        .unwrap();
    let after: String = sqlx::query_scalar(key)
        .bind(sheet.id)
        .fetch_one(s.pool())
        .await
        .unwrap();
    assert_eq!(after, before);
    for (table, sql) in [
        ("spec_bench", "UPDATE spec_bench SET tps_mean = 1"),
        ("spec_gates", "UPDATE spec_gates SET passed = 0"),
        ("spec_bench", "UPDATE spec_bench SET row_key = NULL"),
    ] {
        let e = sqlx::query(sql).execute(s.pool()).await.unwrap_err();
        assert!(e.to_string().contains("write-once"), "{table}: {e}");
    }
}

#[tokio::test]
async fn a_score_added_after_a_push_reaches_postgres_on_the_next_push() {
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.database("lab");
    let d = tempfile::tempdir().unwrap();
    let pa = d.path().join("a.db");
    let s = host_store(&pa, &host("a", 40.0, 20.0)).await;
    let first = push_job(&pa, &url, |_| {}).await.unwrap();
    assert_eq!(first.copied.len(), 9, "{first}");
    let pushed = counts_pg(&url, counts_sqlite(&pa).await.keys()).await;

    // `predict score` after the push: a new row under a run that is there.
    let (run, uuid) = bench_run(&s).await;
    let (sheet, card) = score_the_bench_run(&s, run).await;
    let mut lines = Vec::new();
    let out = push_job(&pa, &url, |m| lines.push(m.to_string()))
        .await
        .unwrap();
    assert_eq!(
        (out.copied.len(), out.already_there.len(), out.failed.len()),
        (0, 9, 0),
        "{out}"
    );
    assert_eq!((out.sheets_copied, out.new_rows()), (1, 1), "{out}");
    let to = first.copied.iter().find(|r| r.uuid == uuid).unwrap().to_id;
    assert_eq!(lines.len(), 9, "one line per run: {lines:?}");
    assert!(
            lines.contains(&format!(
                "run {run} (bench, a): already there as run {to}, 1 new row(s) added (prediction_scores 1)"
            )),
            "{lines:?}"
        );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.ends_with(", nothing new"))
            .count(),
        8,
        "{lines:?}"
    );
    assert!(out.to_string().contains(
        "9 run(s) already there (by uuid): 1 new row(s) added under 1 of them, nothing new in 8"
    ));
    // The scorecard in PostgreSQL: under the same run, of the same sheet, as stored.
    let home: (String, String) =
        sqlx::query_as("SELECT result_json, row_key FROM prediction_scores WHERE sheet_id = ?")
            .bind(sheet.id)
            .fetch_one(s.pool())
            .await
            .unwrap();
    let there = pg_scores(&url, &sheet.sha256).await;
    assert_eq!(
        there,
        [(uuid.clone(), sheet.sha256.clone(), home.0.clone(), home.1)]
    );
    let back: crate::experiments::predict::Scorecard = serde_json::from_str(&there[0].2).unwrap();
    assert_eq!(back.tests, card.tests);
    let mut want = pushed.clone();
    *want.get_mut("prediction_scores").unwrap() += 1;
    *want.get_mut("prediction_sheets").unwrap() += 1;
    assert_eq!(counts_pg(&url, want.keys()).await, want);

    // Again: nothing new. Re-scoring keeps the row (and its key): still nothing.
    crate::experiments::predict::score_run(&s, sheet.id, run)
        .await
        .unwrap();
    let mut lines = Vec::new();
    let again = push_job(&pa, &url, |m| lines.push(m.to_string()))
        .await
        .unwrap();
    assert_eq!((again.new_rows(), again.sheets_copied), (0, 0), "{again}");
    assert!(!again.changed_anything());
    assert_eq!(lines.len(), 9);
    assert!(
        lines.iter().all(|l| l.ends_with(", nothing new")),
        "{lines:?}"
    );
    assert_eq!(counts_pg(&url, want.keys()).await, want);
}

#[tokio::test]
async fn a_command_on_a_shared_store_pushes_back_rows_it_adds_under_shared_runs() {
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.database("lab");
    let d = tempfile::tempdir().unwrap();
    let pb = d.path().join("b.db");
    let pa = d.path().join("a.db");
    host_store(&pb, &host("b", 80.0, 50.0)).await;
    host_store(&pa, &host("a", 40.0, 20.0)).await;
    push_job(&pb, &url, |_| {}).await.unwrap();
    push_job(&pa, &url, |_| {}).await.unwrap();
    // `memwall --db postgres://… predict score`: on a copy of the shared store.
    let co = checkout(&url).await.unwrap();
    assert_eq!(co.runs(), 18);
    let copy = co.path().to_path_buf();
    let s = Store::open(&copy).await.unwrap();
    let (run, uuid): (i64, String) = sqlx::query_as(
            "SELECT r.id, r.uuid FROM runs r JOIN bench_results b ON b.run_id = r.id WHERE r.hostname = 'a'",
        )
        .fetch_one(s.pool())
        .await
        .unwrap();
    let (sheet, _) = score_the_bench_run(&s, run).await;
    s.pool().close().await;
    let mut lines = Vec::new();
    let back = co.check_in(|m| lines.push(m.to_string())).await.unwrap();
    assert_eq!(back.kept, None);
    assert!(
        !copy.exists(),
        "the copy is removed once all of it is pushed"
    );
    assert_eq!(
        (
            back.pushed.copied.len(),
            back.pushed.already_there.len(),
            back.pushed.new_rows(),
            back.pushed.sheets_copied
        ),
        (0, 18, 1, 1),
        "{}",
        back.pushed
    );
    // The ids are the shared store's: the line names the run by its id there.
    assert!(
            lines.contains(&format!(
                "run {run} (bench, a): already there as run {run}, 1 new row(s) added (prediction_scores 1)"
            )),
            "{lines:?}"
        );
    assert_eq!(lines.len(), 18, "every run has its line: {lines:?}");
    let there = pg_scores(&url, &sheet.sha256).await;
    assert_eq!(there.len(), 1);
    assert_eq!(there[0].0, uuid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn two_pushers_of_one_run_at_once_copy_it_once_and_both_succeed() {
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.database("lab");
    let d = tempfile::tempdir().unwrap();
    let pa = d.path().join("a.db");
    let s = host_store(&pa, &host("a", 40.0, 20.0)).await;
    let (first_id, first_uuid): (i64, String) =
        sqlx::query_as("SELECT id, uuid FROM runs ORDER BY id LIMIT 1")
            .fetch_one(s.pool())
            .await
            .unwrap();
    // Hold the first run's lock, start both pushers, and let go only once both wait
    // for it: they reach the run at the same time.
    let mut holder = open_postgres(&url).await.unwrap();
    sqlx::query("BEGIN")
        .execute(&mut holder.conn)
        .await
        .unwrap();
    sqlx::query("SELECT 1 FROM pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(lock_name(&format!("run {first_uuid}")))
        .execute(&mut holder.conn)
        .await
        .unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let pusher = |n: usize| {
        let (pa, url, lines) = (pa.clone(), url.clone(), lines.clone());
        tokio::spawn(async move {
            push_job(&pa, &url, |m| {
                lines.lock().unwrap().push(format!("pusher {n}: {m}"))
            })
            .await
        })
    };
    let (one, two) = (pusher(1), pusher(2));
    let wait_line = format!(
        "run {first_id} (stream, a): another push of this run is under way; waiting for it"
    );
    let both_wait = || {
        let l = lines.lock().unwrap();
        (1..=2).all(|n| l.contains(&format!("pusher {n}: {wait_line}")))
    };
    for _ in 0..1200 {
        if both_wait() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        both_wait(),
        "both pushers wait for the run's lock: {lines:?}"
    );
    sqlx::query("COMMIT")
        .execute(&mut holder.conn)
        .await
        .unwrap();
    let (o1, o2) = (one.await.unwrap().unwrap(), two.await.unwrap().unwrap());
    assert!(o1.failed.is_empty() && o2.failed.is_empty(), "{o1}\n{o2}");
    // Every run copied by exactly one of them; the other found it there, complete.
    let uuids: Vec<String> = sqlx::query_scalar("SELECT uuid FROM runs ORDER BY id")
        .fetch_all(s.pool())
        .await
        .unwrap();
    for u in &uuids {
        let copied = [&o1, &o2]
            .iter()
            .filter(|o| o.copied.iter().any(|r| &r.uuid == u))
            .count();
        let there = [&o1, &o2]
            .iter()
            .filter(|o| {
                o.already_there
                    .iter()
                    .any(|r| &r.uuid == u && r.new_rows.is_empty())
            })
            .count();
        assert_eq!((copied, there), (1, 1), "run {u}: {o1}\n{o2}");
    }
    // Of the first run: both waited, then one copied it and the other found it there.
    let lines = lines.lock().unwrap().clone();
    let of_first: Vec<&String> = lines
        .iter()
        .filter(|l| {
            l.contains(&format!(": run {first_id} (stream, a): already there"))
                || l.contains(&format!(": pushed run {first_id} (stream, a)"))
        })
        .collect();
    assert_eq!(of_first.len(), 2, "{lines:#?}");
    assert!(
        of_first
            .iter()
            .any(|l| l.contains(&format!("pushed run {first_id} (stream, a) as run 1: "))),
        "{of_first:?}"
    );
    assert!(
        of_first.iter().any(|l| l.ends_with(&format!(
            "run {first_id} (stream, a): already there as run 1, nothing new"
        ))),
        "{of_first:?}"
    );
    // One copy of everything.
    let home = counts_sqlite(&pa).await;
    assert_eq!(counts_pg(&url, home.keys()).await, home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_reads_one_moment_of_the_store() {
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.database("lab");
    let d = tempfile::tempdir().unwrap();
    let pa = d.path().join("a.db");
    host_store(&pa, &host("a", 40.0, 20.0)).await;
    push_job(&pa, &url, |_| {}).await.unwrap();
    let tables = counts_sqlite(&pa).await;
    let before = counts_pg(&url, tables.keys()).await;
    // While the snapshot copies its first run, another client adds a row under the
    // last run and a scorecard under the bench run.
    let mut other = open_postgres(&url).await.unwrap();
    let mut wrote = false;
    let snap = d.path().join("snap.db");
    let (store, out) = snapshot_observed(&url, &snap, |_| {
            if wrote {
                return;
            }
            wrote = true;
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(async {
                    for q in [
                        "INSERT INTO sampler_phases (run_id, name, start_ns, end_ns) VALUES ((SELECT MAX(id) FROM runs), 'late', 0, 1)",
                        "INSERT INTO prediction_sheets (created_at, hostname, prev_sha256, payload_json, sha256) VALUES ('x', 'a', 'y', '{}', 'late-sheet')",
                        "INSERT INTO prediction_scores (sheet_id, run_id, scored_at, result_json) VALUES ((SELECT id FROM prediction_sheets WHERE sha256 = 'late-sheet'), (SELECT run_id FROM bench_results LIMIT 1), 'now', '{}')",
                    ] {
                        sqlx::query(q).execute(&mut other.conn).await.unwrap();
                    }
                })
            });
        })
        .await
        .unwrap();
    assert!(wrote);
    assert_eq!(out.copied.len(), 9);
    store.pool().close().await;
    let mut grown = before.clone();
    for t in ["sampler_phases", "prediction_sheets", "prediction_scores"] {
        *grown.get_mut(t).unwrap() += 1;
    }
    assert_eq!(
        counts_pg(&url, tables.keys()).await,
        grown,
        "the writes landed"
    );
    assert_eq!(
        counts_sqlite(&snap).await,
        before,
        "the snapshot is the store before them"
    );
}

#[tokio::test]
async fn rows_shared_before_row_keys_existed_are_matched_after_both_migrate() {
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.database("lab");
    let d = tempfile::tempdir().unwrap();
    let pa = d.path().join("old.db");
    // A local store and a shared one as they were before migration 0025 (PostgreSQL
    // 0008), every earlier migration applied: the run with its two STREAM rows and
    // its sheet pushed, then (not carried by the old push) a third STREAM row and a
    // scorecard added locally.
    let opts = sqlx::sqlite::SqliteConnectOptions::from_str(&format!("sqlite://{}", pa.display()))
        .unwrap()
        .create_if_missing(true);
    let lite = sqlx::SqlitePool::connect_with(opts).await.unwrap();
    sqlx::migrate!("./migrations")
        .run_to(24, &lite)
        .await
        .unwrap();
    let mut pgc = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::migrate!("./migrations-pg")
        .run_to(7, &mut pgc)
        .await
        .unwrap();
    let run = "INSERT INTO runs (kind, started_at, finished_at, build_commit, command, cpu_info, cores_logical, ram_bytes, os, kernel, hostname, host_json, uuid) VALUES ('stream', 's', 'f', 'c', 'memwall stream', 'cpu', 2, 1, 'os', 'k', 'a', '{}', '6f1c0f5e-0000-4000-8000-000000000001')";
    let stream = |kernel: &str| {
        format!(
            "INSERT INTO stream_results (run_id, measured_at, kernel, threads, array_bytes, passes, best_gbps, avg_gbps, worst_gbps, samples_ns, validated, cpu_info, hostname) VALUES ((SELECT MAX(id) FROM runs), 'm', '{kernel}', 2, 8, 10, 1.5, 1.5, 1.5, '[1]', 1, 'cpu', 'a')"
        )
    };
    let sheet = "INSERT INTO prediction_sheets (created_at, hostname, prev_sha256, payload_json, sha256) VALUES ('t', 'a', 'genesis', '{}', 'old-sheet')";
    let score = "INSERT INTO prediction_scores (sheet_id, run_id, scored_at, result_json) VALUES ((SELECT MAX(id) FROM prediction_sheets), (SELECT MAX(id) FROM runs), 'now', '{}')";
    for q in [
        run.to_string(),
        stream("copy"),
        stream("triad"),
        sheet.into(),
        stream("add"),
        score.into(),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(q))
            .execute(&lite)
            .await
            .unwrap();
    }
    lite.close().await;
    // The shared store holds another machine's run first: other ids there.
    let other = run.replace("0001'", "0002'");
    for q in [
        other,
        run.to_string(),
        stream("copy"),
        stream("triad"),
        sheet.into(),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(q))
            .execute(&mut pgc)
            .await
            .unwrap();
    }
    pgc.close().await.unwrap();
    // Both migrate (push opens both); the shared rows are recognised, the two
    // local ones go up.
    let mut lines = Vec::new();
    let out = push_job(&pa, &url, |m| lines.push(m.to_string()))
        .await
        .unwrap();
    assert_eq!(
        lines,
        [
            "run 1 (stream, a): already there as run 2, 2 new row(s) added (stream_results 1, prediction_scores 1)"
        ],
        "{out}"
    );
    let mut c = open_postgres(&url).await.unwrap();
    let kernels: Vec<String> =
        sqlx::query_scalar("SELECT kernel FROM stream_results WHERE run_id = 2 ORDER BY id")
            .fetch_all(&mut c.conn)
            .await
            .unwrap();
    assert_eq!(kernels, ["copy", "triad", "add"]);
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM prediction_scores WHERE run_id = 2")
        .fetch_one(&mut c.conn)
        .await
        .unwrap();
    assert_eq!(n, 1);
    let again = push_job(&pa, &url, |_| {}).await.unwrap();
    assert!(!again.changed_anything(), "{again}");
}

#[test]
fn urls_are_told_apart_and_passwords_hidden() {
    assert!(is_postgres_url("postgres://u@h/db") && is_postgres_url("postgresql://h/db"));
    assert!(!is_postgres_url("/tmp/postgres.db") && !is_postgres_url("memwall.db"));
    assert_eq!(
        redact("postgres://u:secret@h:5432/db"),
        "postgres://u:***@h:5432/db"
    );
    assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
}

#[tokio::test]
async fn a_postgres_url_is_never_opened_as_a_sqlite_file() {
    let d = tempfile::tempdir().unwrap();
    let cwd = std::env::current_dir().unwrap();
    let err = Store::open(Path::new("postgres://u:pw@127.0.0.1:1/db"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("postgres://u:***@127.0.0.1:1/db")
            && err.contains("SQLite file")
            && !err.contains("pw"),
        "{err}"
    );
    assert!(!cwd.join("postgres:").exists() && !d.path().join("postgres:").exists());
    let err = push_job(&d.path().join("a.db"), "/tmp/x.db", |_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--to /tmp/x.db: not a PostgreSQL URL"),
        "{err}"
    );
}
