//! The shared store: the same schema on PostgreSQL (a lab's machines pushing into one
//! database), and the copy that moves runs between a store and another.
//!
//! - [`open_postgres`] connects and applies `crates/memwall-core/migrations-pg` (kept in
//!   step with the SQLite migrations by this module's tests, which migrate both and
//!   compare tables, columns, nullability and types).
//! - [`push_job`] copies the runs of a local SQLite store to a PostgreSQL one, row by
//!   row: a run is the same run when its `uuid` is, a row the same row when its
//!   `row_key` is (migration 0025: every row under a run has one, carried unchanged
//!   by every copy). What the destination lacks of a run (the whole run, or rows added
//!   under it after an earlier push, such as a `predict score` scorecard) goes up in
//!   one transaction per run, which holds PostgreSQL's advisory lock on the run's uuid:
//!   two pushers of one run take turns, and the second finds it there. A run that
//!   fails leaves nothing of this push. Every id is remapped (the run's rows, and rows
//!   that name rows of other runs: a bench row's `stream_id`, a speculative row's
//!   `gate_id`, found by `row_key`).
//! - [`snapshot`] copies a PostgreSQL store into a new SQLite file keeping every id
//!   and key, reading it inside one `REPEATABLE READ` transaction (one moment of the
//!   store, while others push), so that readers written for SQLite (`memwall report`,
//!   its verifier) read it and the ids they print are the shared store's.
//! - [`checkout`] / [`Checkout::check_in`]: any command on a shared store, through a
//!   snapshot it works on and a push of what it added (new runs and new rows under
//!   the shared store's runs).
//!
//! Host facts are columns of each run (`hostname`, `cpu_info`, `cores_logical`,
//! `host_json`), not a table of their own: a run carries its host with it and there is
//! no host row to deduplicate; [`crate::store::host::HostKey`] tells machines apart
//! from them.

use crate::store::{Store, StoreError};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions, AnyRow};
use sqlx::{Any, AnyConnection, Connection, Row};
use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;

/// Whether `db` names a PostgreSQL database (`postgres://…` or `postgresql://…`)
/// rather than a SQLite file.
pub fn is_postgres_url(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

/// `url` with its password replaced by `***`, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (auth, host) = match rest.rsplit_once('@') {
        Some((a, h)) => (a, h),
        None => return url.to_string(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

fn sql_err(at: &str, source: sqlx::Error) -> StoreError {
    StoreError::Sql {
        path: at.to_string(),
        source,
    }
}

/// A connection to a PostgreSQL store, migrated.
#[derive(Debug)]
pub struct PgStore {
    conn: AnyConnection,
    url: String,
}

/// Connects to the PostgreSQL database at `url` and applies pending migrations
/// (`migrations-pg/`; sqlx takes PostgreSQL's advisory lock, so machines migrating
/// together apply them once).
///
/// # Errors
/// [`StoreError::Sql`] (cannot connect) or [`StoreError::Migrate`], naming the URL
/// without its password.
pub async fn open_postgres(url: &str) -> Result<PgStore, StoreError> {
    sqlx::any::install_default_drivers();
    let shown = redact(url);
    let opts = AnyConnectOptions::from_str(url).map_err(|e| sql_err(&shown, e))?;
    let mut conn = AnyConnection::connect_with(&opts)
        .await
        .map_err(|e| sql_err(&shown, e))?;
    // The PostgreSQL driver itself migrates (sqlx's `Any` has no migration support).
    let mut pg = sqlx::PgConnection::connect(url)
        .await
        .map_err(|e| sql_err(&shown, e))?;
    sqlx::migrate!("./migrations-pg")
        .run_direct(None, &mut pg, false)
        .await
        .map_err(|source| StoreError::Migrate {
            path: shown.clone(),
            source,
        })?;
    pg.close().await.map_err(|e| sql_err(&shown, e))?;
    sqlx::query("SELECT 1")
        .execute(&mut conn)
        .await
        .map_err(|e| sql_err(&shown, e))?;
    Ok(PgStore { conn, url: shown })
}

impl PgStore {
    /// The URL, password redacted.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Runs in the store.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn count_runs(&mut self) -> Result<i64, StoreError> {
        sqlx::query_scalar::<Any, i64>("SELECT COUNT(*) FROM runs")
            .fetch_one(&mut self.conn)
            .await
            .map_err(|e| sql_err(&self.url, e))
    }
}

/// Opens the SQLite file at `path` through sqlx's `Any` driver (after [`Store::open`]
/// has migrated it).
async fn any_sqlite(path: &Path) -> Result<AnyConnection, StoreError> {
    sqlx::any::install_default_drivers();
    let at = path.display().to_string();
    let opts = AnyConnectOptions::from_str(&format!("sqlite://{}", path.display()))
        .map_err(|e| sql_err(&at, e))?;
    let pool = AnyPoolOptions::new()
        .max_connections(1)
        .connect_with(opts)
        .await
        .map_err(|e| sql_err(&at, e))?;
    let mut conn = pool.acquire().await.map_err(|e| sql_err(&at, e))?.detach();
    sqlx::query("PRAGMA foreign_keys = ON")
        .execute(&mut conn)
        .await
        .map_err(|e| sql_err(&at, e))?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "PRAGMA busy_timeout = {}",
        crate::store::BUSY_TIMEOUT.as_millis()
    )))
    .execute(&mut conn)
    .await
    .map_err(|e| sql_err(&at, e))?;
    Ok(conn)
}

/// What a table's rows hang from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parent {
    /// A `run_id` column.
    Run,
    /// `frontier_items.cell_id` (a frontier cell of the run).
    FrontierCell,
}

/// One table the copy carries, in the order it is copied (a row is copied after every
/// row it names).
#[derive(Debug, Clone, Copy)]
struct Carried {
    table: &'static str,
    parent: Parent,
    /// Columns naming a row of another table: (column, that table).
    refs: &'static [(&'static str, &'static str)],
    /// The table has an `id` column (else its key is another column).
    has_id: bool,
    /// Order of its rows.
    order: &'static str,
}

/// Every table under `runs`, in copy order. The tests check that this list covers
/// every table the migrations create (a new table must be added here).
const CARRIED: &[Carried] = &[
    Carried {
        table: "stream_results",
        parent: Parent::Run,
        refs: &[],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "peak_results",
        parent: Parent::Run,
        refs: &[],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "bench_results",
        parent: Parent::Run,
        refs: &[("stream_id", "stream_results")],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "kv_verify_results",
        parent: Parent::Run,
        refs: &[],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "spec_gates",
        parent: Parent::Run,
        refs: &[],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "spec_gate_prompts",
        parent: Parent::Run,
        refs: &[],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "spec_bench",
        parent: Parent::Run,
        refs: &[("gate_id", "spec_gates")],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "frontier_cells",
        parent: Parent::Run,
        refs: &[],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "frontier_items",
        parent: Parent::FrontierCell,
        refs: &[("cell_id", "frontier_cells")],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "prediction_scores",
        parent: Parent::Run,
        refs: &[("sheet_id", "prediction_sheets")],
        has_id: false,
        order: "sheet_id",
    },
    Carried {
        table: "sampler_counters",
        parent: Parent::Run,
        refs: &[],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "sampler_phases",
        parent: Parent::Run,
        refs: &[],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "sampler_intervals",
        parent: Parent::Run,
        refs: &[],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "sampler_series",
        parent: Parent::Run,
        refs: &[],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "row_energy",
        parent: Parent::Run,
        refs: &[("row_id", "bench_results")],
        has_id: false,
        order: "row_id",
    },
    Carried {
        table: "serve_energy",
        parent: Parent::Run,
        refs: &[],
        has_id: false,
        order: "run_id",
    },
    Carried {
        table: "loadtest_points",
        parent: Parent::Run,
        refs: &[],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "loadtest_energy",
        parent: Parent::Run,
        refs: &[("point_id", "loadtest_points")],
        has_id: false,
        order: "point_id",
    },
    Carried {
        table: "spec_bench_energy",
        parent: Parent::Run,
        refs: &[("row_id", "spec_bench")],
        has_id: false,
        order: "row_id",
    },
    Carried {
        table: "spec_synth",
        parent: Parent::Run,
        refs: &[
            ("prediction_id", "spec_synth_predictions"),
            ("gate_id", "spec_gates"),
        ],
        has_id: true,
        order: "id",
    },
    Carried {
        table: "spec_synth_energy",
        parent: Parent::Run,
        refs: &[("row_id", "spec_synth")],
        has_id: false,
        order: "row_id",
    },
];

/// Tables copied on their own, not under a run: prediction sheets (matched by their
/// `sha256`, which is unique), and the runs themselves.
const NOT_UNDER_RUNS: &[&str] = &["runs", "prediction_sheets", "spec_synth_predictions"];

/// The storage class of a column (SQLite's declared type; PostgreSQL's is the matching
/// BIGINT, DOUBLE PRECISION or TEXT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Int,
    Real,
    Text,
}

/// One value on its way between stores.
#[derive(Debug, Clone, PartialEq)]
enum SqlValue {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<String>),
}

impl SqlValue {
    fn int(&self) -> Option<i64> {
        match self {
            SqlValue::Int(v) => *v,
            _ => None,
        }
    }
}

fn bind<'q>(
    q: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>,
    c: SqlValue,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments> {
    match c {
        SqlValue::Int(v) => q.bind(v),
        SqlValue::Real(v) => q.bind(v),
        SqlValue::Text(v) => q.bind(v),
    }
}

/// Which ids the copy gives the rows it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ids {
    /// New ids from the destination (a push into a store that has other rows).
    Remap,
    /// The source's ids (a snapshot into a new, empty file).
    Keep,
}

/// A run the copy wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct CopiedRun {
    /// Its id in the source.
    pub from_id: i64,
    /// Its id in the destination.
    pub to_id: i64,
    pub uuid: String,
    /// `bench`, `stream`, …
    pub kind: String,
    /// The machine that measured it.
    pub hostname: String,
    /// Rows copied with it, per table (tables with none left out).
    pub rows: Vec<(&'static str, usize)>,
}

/// A run the destination already had (by UUID): the copy added the rows under it
/// that the destination lacked (by `row_key`), if any.
#[derive(Debug, Clone, PartialEq)]
pub struct AlreadyThere {
    /// Its id in the source.
    pub from_id: i64,
    /// Its id in the destination.
    pub to_id: i64,
    pub uuid: String,
    /// `bench`, `stream`, …
    pub kind: String,
    /// The machine that measured it.
    pub hostname: String,
    /// Rows added under it, per table (empty: nothing new).
    pub new_rows: Vec<(&'static str, usize)>,
}

/// A run whose copy failed and was rolled back (nothing of it is in the destination).
#[derive(Debug, Clone, PartialEq)]
pub struct FailedRun {
    /// Its id in the source.
    pub from_id: i64,
    pub uuid: String,
    /// Why.
    pub error: String,
}

/// What a copy did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CopyOutcome {
    /// Source and destination, for messages (passwords redacted).
    pub from: String,
    /// Destination.
    pub to: String,
    /// Prediction sheets copied (sheets already there, by `sha256`, are not).
    pub sheets_copied: usize,
    /// Runs written.
    pub copied: Vec<CopiedRun>,
    /// Runs already there, with the rows added under them.
    pub already_there: Vec<AlreadyThere>,
    /// Runs that failed (rolled back).
    pub failed: Vec<FailedRun>,
}

impl CopyOutcome {
    /// Rows added under runs that were already there.
    pub fn new_rows(&self) -> usize {
        self.already_there
            .iter()
            .flat_map(|r| r.new_rows.iter().map(|(_, n)| n))
            .sum()
    }

    /// Whether the copy wrote anything or failed somewhere (else every run was
    /// already there with nothing new, and no sheet was new).
    pub fn changed_anything(&self) -> bool {
        !self.copied.is_empty()
            || !self.failed.is_empty()
            || self.new_rows() > 0
            || self.sheets_copied > 0
    }
}

/// The copy between two open connections.
struct Copier<'a> {
    src: &'a mut AnyConnection,
    src_at: String,
    dst: &'a mut AnyConnection,
    dst_at: String,
    ids: Ids,
    /// The destination is PostgreSQL (take advisory locks there).
    pg_dst: bool,
    /// Column names and classes per table, read from the SQLite side.
    columns: HashMap<&'static str, Vec<(String, Class)>>,
    /// Source id → destination id per table, for committed rows.
    map: HashMap<(&'static str, i64), i64>,
}

/// The columns of `table` (name, class) in a migrated SQLite store.
async fn sqlite_columns(
    conn: &mut AnyConnection,
    at: &str,
    table: &str,
) -> Result<Vec<(String, Class)>, StoreError> {
    let rows = sqlx::query("SELECT name, type FROM pragma_table_info($1) ORDER BY cid")
        .bind(table)
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| sql_err(at, e))?;
    rows.iter()
        .map(|r| {
            let name: String = r.try_get(0).map_err(|e| sql_err(at, e))?;
            let ty: String = r.try_get(1).map_err(|e| sql_err(at, e))?;
            let class = match ty.to_ascii_uppercase().as_str() {
                "INTEGER" => Class::Int,
                "REAL" => Class::Real,
                "TEXT" => Class::Text,
                other => {
                    return Err(StoreError::Decode {
                        path: at.to_string(),
                        table: "sqlite_master",
                        id: -1,
                        problem: format!(
                            "column {table}.{name} has declared type {other:?}; the copy knows INTEGER, REAL and TEXT (add the type to store::postgres)"
                        ),
                    });
                }
            };
            Ok((name, class))
        })
        .collect()
}

fn decode(
    r: &AnyRow,
    cols: &[(String, Class)],
    at: &str,
    table: &str,
) -> Result<Vec<SqlValue>, String> {
    cols.iter()
        .enumerate()
        .map(|(i, (name, class))| {
            let bad = |e: sqlx::Error| format!("{at}: table {table}, column {name}: {e}");
            Ok(match class {
                Class::Int => SqlValue::Int(r.try_get(i).map_err(bad)?),
                Class::Real => SqlValue::Real(r.try_get(i).map_err(bad)?),
                Class::Text => SqlValue::Text(r.try_get(i).map_err(bad)?),
            })
        })
        .collect()
}

impl Copier<'_> {
    fn cols(&self, table: &str) -> &[(String, Class)] {
        &self.columns[table]
    }

    fn select(&self, table: &str, filter: &str, order: &str) -> String {
        let names: Vec<&str> = self.cols(table).iter().map(|(n, _)| n.as_str()).collect();
        format!(
            "SELECT {} FROM {table} WHERE {filter} ORDER BY {order}",
            names.join(", ")
        )
    }

    async fn src_rows(
        &mut self,
        table: &'static str,
        filter: &str,
        order: &str,
        arg: Option<i64>,
    ) -> Result<Vec<Vec<SqlValue>>, String> {
        let sql = self.select(table, filter, order);
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        if let Some(a) = arg {
            q = q.bind(a);
        }
        let rows = q
            .fetch_all(&mut *self.src)
            .await
            .map_err(|e| format!("{}: reading {table}: {e}", self.src_at))?;
        let cols = self.cols(table).to_vec();
        rows.iter()
            .map(|r| decode(r, &cols, &self.src_at, table))
            .collect()
    }

    /// Inserts one row into `table` inside the destination's open transaction; returns
    /// the destination id when the table has one.
    async fn insert(
        &mut self,
        table: &'static str,
        row: Vec<SqlValue>,
        has_id: bool,
    ) -> Result<Option<i64>, String> {
        let cols = self.cols(table).to_vec();
        let keep_id = self.ids == Ids::Keep || !has_id;
        let mut names = Vec::new();
        let mut vals = Vec::new();
        for ((name, _), cell) in cols.iter().zip(row) {
            if name == "id" && !keep_id {
                continue;
            }
            names.push(name.as_str());
            vals.push(cell);
        }
        let params: Vec<String> = (1..=names.len()).map(|i| format!("${i}")).collect();
        let returning = if has_id { " RETURNING id" } else { "" };
        let sql = format!(
            "INSERT INTO {table} ({}) VALUES ({}){returning}",
            names.join(", "),
            params.join(", ")
        );
        // Not a cached prepared statement: sqlx's `Any` sends a NULL with the type of its
        // Rust value, and sqlx 0.9 sends `Option::<f64>::None` as a float4 (its
        // PostgreSQL mapping swaps REAL and DOUBLE), so a statement prepared on a row
        // with NULL there would refuse the next row's f64. Each insert is parsed with
        // its own values' types (PostgreSQL assigns a float4 NULL to a DOUBLE column).
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(false);
        for v in vals {
            q = bind(q, v);
        }
        let err = |e: sqlx::Error| format!("{}: inserting into {table}: {e}", self.dst_at);
        if has_id {
            let r = q.fetch_one(&mut *self.dst).await.map_err(err)?;
            Ok(Some(r.try_get::<i64, _>(0).map_err(err)?))
        } else {
            q.execute(&mut *self.dst).await.map_err(err)?;
            Ok(None)
        }
    }

    /// Takes PostgreSQL's transaction-level advisory lock `name` (released when the
    /// destination's open transaction ends), so that two copies into the same store
    /// take turns on a run or a keyed table instead of both finding it missing; calls
    /// `waiting` once when another session holds it. It asks with
    /// `pg_try_advisory_xact_lock` every [`LOCK_POLL`] rather than waiting inside one
    /// statement (which sqlx would report as a slow statement). Nothing on a SQLite
    /// destination (a snapshot's new file, written by this copy alone).
    async fn lock(&mut self, name: &str, mut waiting: impl FnMut()) -> Result<(), String> {
        if !self.pg_dst {
            return Ok(());
        }
        let mut told = false;
        loop {
            let got = sqlx::query_scalar::<Any, bool>(
                "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))",
            )
            .bind(lock_name(name))
            .fetch_one(&mut *self.dst)
            .await
            .map_err(|e| format!("{}: taking the lock on {name}: {e}", self.dst_at))?;
            if got {
                return Ok(());
            }
            if !told {
                waiting();
                told = true;
            }
            tokio::time::sleep(LOCK_POLL).await;
        }
    }

    /// The destination id of source row `id` of `table`, for a row the copy did not
    /// write or meet in this session (it belongs to another run, copied before): the
    /// row with the same `row_key`.
    async fn resolve(&mut self, table: &'static str, id: i64) -> Result<i64, String> {
        let at = self.src_at.clone();
        let q = format!(
            "SELECT t.row_key, t.run_id, r.uuid FROM {table} t JOIN runs r ON r.id = t.run_id WHERE t.id = $1"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(q))
            .bind(id)
            .fetch_optional(&mut *self.src)
            .await
            .map_err(|e| format!("{at}: reading {table} row {id}: {e}"))?
            .ok_or_else(|| {
                format!("{at}: a row names {table} row {id}, which is not in this store (its run was deleted): the reference cannot be carried")
            })?;
        let key: Option<String> = row.try_get(0).map_err(|e| e.to_string())?;
        let run_id: i64 = row.try_get(1).map_err(|e| e.to_string())?;
        let uuid: String = row.try_get(2).map_err(|e| e.to_string())?;
        let key = key.ok_or_else(|| format!("{at}: {table} row {id} has no row_key"))?;
        let q = format!("SELECT id FROM {table} WHERE row_key = $1");
        let found = sqlx::query(sqlx::AssertSqlSafe(q))
            .bind(&key)
            .fetch_optional(&mut *self.dst)
            .await
            .map_err(|e| format!("{}: reading {table}: {e}", self.dst_at))?;
        match found {
            Some(r) => r.try_get::<i64, _>(0).map_err(|e| e.to_string()),
            None => Err(format!(
                "{at}: a row names {table} row {id} of run {run_id} ({uuid}), which is not in {}: push that run first",
                self.dst_at
            )),
        }
    }

    /// Copies the prediction sheets the destination lacks (by `sha256`), in one
    /// transaction, and maps every source sheet to its destination id.
    async fn sheets(&mut self) -> Result<usize, StoreError> {
        self.keyed("prediction_sheets", &["sha256"]).await
    }

    /// Copies the rows of `table` (a table not under a run) that the destination lacks,
    /// a row being the same when every `key` column is equal, in one transaction, and
    /// maps every source row to its destination id.
    async fn keyed(&mut self, table: &'static str, key: &[&str]) -> Result<usize, StoreError> {
        let rows = self
            .src_rows(table, "1=1", "id", None)
            .await
            .map_err(StoreError::Copy)?;
        let cols = self.cols(table).to_vec();
        let col = |n: &str| cols.iter().position(|(c, _)| c == n).expect("column");
        let id_at = col("id");
        let key_at: Vec<usize> = key.iter().map(|k| col(k)).collect();
        let find = format!(
            "SELECT id FROM {table} WHERE {}",
            key.iter()
                .enumerate()
                .map(|(i, k)| format!("{k} = ${}", i + 1))
                .collect::<Vec<_>>()
                .join(" AND ")
        );
        let dst_at = self.dst_at.clone();
        sqlx::query("BEGIN")
            .execute(&mut *self.dst)
            .await
            .map_err(|e| sql_err(&dst_at, e))?;
        if let Err(e) = self.lock(table, || {}).await {
            let _ = sqlx::query("ROLLBACK").execute(&mut *self.dst).await;
            return Err(StoreError::Copy(e));
        }
        let mut n = 0;
        let mut staged = Vec::new();
        for row in rows {
            let from = row[id_at].int().unwrap_or(-1);
            let mut q = sqlx::query(sqlx::AssertSqlSafe(find.clone())).persistent(false);
            for &k in &key_at {
                q = bind(q, row[k].clone());
            }
            let there = q
                .fetch_optional(&mut *self.dst)
                .await
                .map_err(|e| sql_err(&dst_at, e))?;
            let to = match there {
                Some(r) => r.try_get::<i64, _>(0).map_err(|e| sql_err(&dst_at, e))?,
                None => {
                    n += 1;
                    match self.insert(table, row, true).await {
                        Ok(id) => id.expect("has id"),
                        Err(e) => {
                            let _ = sqlx::query("ROLLBACK").execute(&mut *self.dst).await;
                            return Err(StoreError::Copy(e));
                        }
                    }
                }
            };
            staged.push((from, to));
        }
        sqlx::query("COMMIT")
            .execute(&mut *self.dst)
            .await
            .map_err(|e| sql_err(&dst_at, e))?;
        for (from, to) in staged {
            self.map.insert((table, from), to);
        }
        Ok(n)
    }

    /// The `row_key`s (with their ids, for tables that have one) of the destination's
    /// rows of `c.table` under destination run `to_run`.
    async fn dst_keys(
        &mut self,
        c: &Carried,
        filter: &str,
        to_run: i64,
    ) -> Result<HashMap<String, Option<i64>>, String> {
        let id = if c.has_id { ", id" } else { "" };
        let q = format!("SELECT row_key{id} FROM {} WHERE {filter}", c.table);
        let rows = sqlx::query(sqlx::AssertSqlSafe(q))
            .bind(to_run)
            .fetch_all(&mut *self.dst)
            .await
            .map_err(|e| format!("{}: reading {}: {e}", self.dst_at, c.table))?;
        rows.iter()
            .map(|r| {
                let key: Option<String> = r.try_get(0).map_err(|e| e.to_string())?;
                let id = if c.has_id {
                    Some(r.try_get::<i64, _>(1).map_err(|e| e.to_string())?)
                } else {
                    None
                };
                Ok((key.unwrap_or_default(), id))
            })
            .collect()
    }

    /// Copies one run inside the destination's open transaction, holding the run's
    /// lock: the run itself when the destination lacks its uuid, and every row under
    /// it whose `row_key` the destination lacks.
    async fn run_rows(
        &mut self,
        run: Vec<SqlValue>,
        from_id: i64,
        uuid: &str,
        waiting: impl FnMut(),
    ) -> Result<RunCopy, String> {
        self.lock(&format!("run {uuid}"), waiting).await?;
        let there = sqlx::query("SELECT id FROM runs WHERE uuid = $1")
            .bind(uuid)
            .fetch_optional(&mut *self.dst)
            .await
            .map_err(|e| format!("{}: reading runs: {e}", self.dst_at))?;
        let (to_run, was_there) = match there {
            Some(r) => (r.try_get::<i64, _>(0).map_err(|e| e.to_string())?, true),
            None => (
                self.insert("runs", run, true).await?.expect("runs has id"),
                false,
            ),
        };
        let mut staged: HashMap<(&'static str, i64), i64> = HashMap::new();
        let mut added = Vec::new();
        for c in CARRIED {
            let filter = match c.parent {
                Parent::Run => "run_id = $1",
                Parent::FrontierCell => {
                    "cell_id IN (SELECT id FROM frontier_cells WHERE run_id = $1)"
                }
            };
            let rows = self
                .src_rows(c.table, filter, c.order, Some(from_id))
                .await?;
            if rows.is_empty() {
                continue;
            }
            let have = if was_there {
                self.dst_keys(c, filter, to_run).await?
            } else {
                HashMap::new()
            };
            let cols = self.cols(c.table).to_vec();
            let at = |n: &str| cols.iter().position(|(x, _)| x == n);
            let key_at = at("row_key").expect("checked by copy()");
            let mut n = 0;
            for mut row in rows {
                let from_row = at("id").and_then(|i| row[i].int());
                let key = match &row[key_at] {
                    SqlValue::Text(Some(k)) => k.clone(),
                    _ => {
                        return Err(format!(
                            "{}: a {} row of run {from_id} has no row_key (migration 0025 gives every row one)",
                            self.src_at, c.table
                        ));
                    }
                };
                if let Some(to) = have.get(&key) {
                    if let (Some(f), Some(t)) = (from_row, *to) {
                        staged.insert((c.table, f), t);
                    }
                    continue;
                }
                if self.ids == Ids::Remap {
                    if let Some(i) = at("run_id") {
                        row[i] = SqlValue::Int(Some(to_run));
                    }
                    for (col, target) in c.refs {
                        let i = at(col).expect("carried column exists");
                        // NULL and 0 name no row (`stream_id` 0: no STREAM row).
                        let Some(v) = row[i].int().filter(|v| *v > 0) else {
                            continue;
                        };
                        let mapped = match staged.get(&(*target, v)) {
                            Some(to) => *to,
                            None => match self.map.get(&(*target, v)) {
                                Some(to) => *to,
                                None => self.resolve(target, v).await?,
                            },
                        };
                        row[i] = SqlValue::Int(Some(mapped));
                    }
                }
                let to_row = self.insert(c.table, row, c.has_id).await?;
                if let (Some(f), Some(t)) = (from_row, to_row) {
                    staged.insert((c.table, f), t);
                }
                n += 1;
            }
            if n > 0 {
                added.push((c.table, n));
            }
        }
        Ok(RunCopy {
            to_id: to_run,
            was_there,
            rows: added,
            staged,
        })
    }

    async fn runs(
        &mut self,
        out: &mut CopyOutcome,
        mut progress: impl FnMut(&str),
    ) -> Result<(), StoreError> {
        let runs = self
            .src_rows("runs", "1=1", "id", None)
            .await
            .map_err(StoreError::Copy)?;
        let cols = self.cols("runs").to_vec();
        let at = |n: &str| cols.iter().position(|(x, _)| x == n).expect("runs column");
        let (id_at, uuid_at, kind_at, host_at) = (at("id"), at("uuid"), at("kind"), at("hostname"));
        let dst_at = self.dst_at.clone();
        for run in runs {
            let from_id = run[id_at].int().unwrap_or(-1);
            let text = |i: usize| match &run[i] {
                SqlValue::Text(Some(s)) => s.clone(),
                _ => String::new(),
            };
            let (uuid, kind, hostname) = (text(uuid_at), text(kind_at), text(host_at));
            if uuid.is_empty() {
                let error = format!("{}: run {from_id} has no uuid", self.src_at);
                progress(&format!(
                    "FAILED run {from_id} ({kind}, {hostname}): {error}"
                ));
                out.failed.push(FailedRun {
                    from_id,
                    uuid,
                    error,
                });
                continue;
            }
            sqlx::query("BEGIN")
                .execute(&mut *self.dst)
                .await
                .map_err(|e| sql_err(&dst_at, e))?;
            let waiting = || {
                progress(&format!(
                    "run {from_id} ({kind}, {hostname}): another push of this run is under way; waiting for it"
                ))
            };
            let copied = self.run_rows(run, from_id, &uuid, waiting).await;
            match copied {
                Ok(rc) => {
                    sqlx::query("COMMIT")
                        .execute(&mut *self.dst)
                        .await
                        .map_err(|e| sql_err(&dst_at, e))?;
                    self.map.extend(rc.staged);
                    self.map.insert(("runs", from_id), rc.to_id);
                    let n: usize = rc.rows.iter().map(|(_, n)| n).sum();
                    let to_id = rc.to_id;
                    if !rc.was_there {
                        progress(&format!(
                            "pushed run {from_id} ({kind}, {hostname}) as run {to_id}: {n} rows"
                        ));
                        out.copied.push(CopiedRun {
                            from_id,
                            to_id,
                            uuid,
                            kind,
                            hostname,
                            rows: rc.rows,
                        });
                        continue;
                    }
                    let what = if n == 0 {
                        "nothing new".to_string()
                    } else {
                        let per: Vec<String> =
                            rc.rows.iter().map(|(t, n)| format!("{t} {n}")).collect();
                        format!("{n} new row(s) added ({})", per.join(", "))
                    };
                    progress(&format!(
                        "run {from_id} ({kind}, {hostname}): already there as run {to_id}, {what}"
                    ));
                    out.already_there.push(AlreadyThere {
                        from_id,
                        to_id,
                        uuid,
                        kind,
                        hostname,
                        new_rows: rc.rows,
                    });
                }
                Err(error) => {
                    sqlx::query("ROLLBACK")
                        .execute(&mut *self.dst)
                        .await
                        .map_err(|e| sql_err(&dst_at, e))?;
                    progress(&format!(
                        "FAILED run {from_id} ({kind}, {hostname}), rolled back (nothing of it written by this copy): {error}"
                    ));
                    out.failed.push(FailedRun {
                        from_id,
                        uuid,
                        error,
                    });
                }
            }
        }
        Ok(())
    }
}

/// How often [`Copier::lock`] asks again for a lock another session holds.
const LOCK_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// The text PostgreSQL's advisory lock of `what` (`run <uuid>`, or a keyed table's
/// name) is hashed from.
fn lock_name(what: &str) -> String {
    format!("memwall push: {what}")
}

/// What [`Copier::run_rows`] did with one run.
struct RunCopy {
    /// The run's id in the destination.
    to_id: i64,
    /// The destination had the run before.
    was_there: bool,
    /// Rows written under it, per table.
    rows: Vec<(&'static str, usize)>,
    /// Source → destination ids of its rows (written or already there).
    staged: HashMap<(&'static str, i64), i64>,
}

async fn copy(
    src: &mut AnyConnection,
    src_at: String,
    dst: &mut AnyConnection,
    dst_at: String,
    sqlite_side_is_src: bool,
    ids: Ids,
    progress: impl FnMut(&str),
) -> Result<CopyOutcome, StoreError> {
    let mut columns = HashMap::new();
    let tables = NOT_UNDER_RUNS
        .iter()
        .copied()
        .chain(CARRIED.iter().map(|c| c.table));
    for t in tables {
        let cols = if sqlite_side_is_src {
            sqlite_columns(src, &src_at, t).await?
        } else {
            sqlite_columns(dst, &dst_at, t).await?
        };
        columns.insert(t, cols);
    }
    let side = if sqlite_side_is_src { &src_at } else { &dst_at };
    for c in CARRIED {
        if !columns[c.table].iter().any(|(n, _)| n == "row_key") {
            return Err(StoreError::Copy(format!(
                "{side}: table {} has no row_key column: every table under runs needs one (a unique key filled at insert, as migration 0025 gives the others) so that a copy can tell which of its rows the other store has",
                c.table
            )));
        }
    }
    let mut c = Copier {
        src,
        src_at: src_at.clone(),
        dst,
        dst_at: dst_at.clone(),
        ids,
        pg_dst: sqlite_side_is_src,
        columns,
        map: HashMap::new(),
    };
    let mut out = CopyOutcome {
        from: src_at,
        to: dst_at,
        ..Default::default()
    };
    out.sheets_copied = c.sheets().await?;
    // Set-acceptance predictions are written before their run exists: copied on their
    // own, the same prediction being the same (time, host, target, draft, α, k).
    c.keyed(
        "spec_synth_predictions",
        &[
            "created_at",
            "hostname",
            "target_sha256",
            "drafter_key",
            "alpha_set",
            "k",
        ],
    )
    .await?;
    c.runs(&mut out, progress).await?;
    Ok(out)
}

/// `memwall push`: copies every run of the SQLite store `local` (and every row under it) to the
/// PostgreSQL store at `url`: runs the store lacks (by UUID) whole, and under runs it
/// has, the rows it lacks (by `row_key`); one transaction per run, under the run's
/// advisory lock. `progress` gets one line per run: pushed, already there with the
/// rows added or with nothing new, or failed.
///
/// # Errors
/// [`StoreError`] when either store cannot be opened or read; a run that fails to copy
/// is rolled back and listed in [`CopyOutcome::failed`] (the others are still copied).
pub async fn push_job(
    local: &Path,
    url: &str,
    progress: impl FnMut(&str),
) -> Result<CopyOutcome, StoreError> {
    if !is_postgres_url(url) {
        return Err(StoreError::Copy(format!(
            "--to {url}: not a PostgreSQL URL: use postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
        )));
    }
    // Opening migrates the local file (older runs get their uuid here).
    let local = Store::open(local).await?;
    let mut pg = open_postgres(url).await?;
    let mut src = any_sqlite(local.path()).await?;
    let dst_at = pg.url.clone();
    copy(
        &mut src,
        local.path().display().to_string(),
        &mut pg.conn,
        dst_at,
        true,
        Ids::Remap,
        progress,
    )
    .await
}

/// Copies the whole PostgreSQL store at `url` into a new SQLite file at `path` (which
/// must not exist), keeping every id and `row_key`; returns the opened copy. Every
/// table is read inside one `REPEATABLE READ READ ONLY` transaction: the copy is the
/// store as of one moment, whatever others push while it is taken.
///
/// # Errors
/// [`StoreError`]; a run that could not be copied is an error here (a snapshot is all
/// or nothing).
pub async fn snapshot(url: &str, path: &Path) -> Result<(Store, CopyOutcome), StoreError> {
    snapshot_observed(url, path, |_| {}).await
}

/// [`snapshot`], telling `progress` each run it copied (tests act between runs).
async fn snapshot_observed(
    url: &str,
    path: &Path,
    progress: impl FnMut(&str),
) -> Result<(Store, CopyOutcome), StoreError> {
    if path.exists() {
        return Err(StoreError::Io {
            path: path.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "a snapshot is written into a new file only",
            ),
        });
    }
    let mut pg = open_postgres(url).await?;
    let store = Store::open(path).await?;
    let mut dst = any_sqlite(path).await?;
    let src_at = pg.url.clone();
    // PostgreSQL takes the transaction's snapshot at its first read, and every later
    // read sees that same snapshot.
    sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .execute(&mut pg.conn)
        .await
        .map_err(|e| sql_err(&src_at, e))?;
    let out = copy(
        &mut pg.conn,
        src_at.clone(),
        &mut dst,
        path.display().to_string(),
        false,
        Ids::Keep,
        progress,
    )
    .await;
    let end = if out.is_ok() { "COMMIT" } else { "ROLLBACK" };
    sqlx::query(end)
        .execute(&mut pg.conn)
        .await
        .map_err(|e| sql_err(&src_at, e))?;
    let out = out?;
    if let Some(f) = out.failed.first() {
        return Err(StoreError::Copy(format!(
            "copying {} into {}: run {} ({}): {}",
            out.from, out.to, f.from_id, f.uuid, f.error
        )));
    }
    Ok((store, out))
}

/// A PostgreSQL store worked on through a local SQLite copy, so that every command
/// written for SQLite works on a shared store: [`checkout`] copies the shared store
/// into a new SQLite file in a temporary folder (ids and row keys kept, as
/// [`snapshot`]); the command reads and writes that file; [`Checkout::check_in`]
/// pushes back what the command added ([`push_job`]: the runs it wrote, and the rows
/// it wrote under the shared store's runs, such as a `predict score` scorecard; the
/// copied rows are found there by `row_key` and not sent again). Changing or deleting
/// rows that were already shared is not carried back: commands that do either refuse a
/// shared store (a re-scored scorecard keeps its first copy there). The folder is
/// removed once everything was pushed, and kept when anything could not be.
#[derive(Debug)]
pub struct Checkout {
    dir: tempfile::TempDir,
    path: std::path::PathBuf,
    url: String,
    runs: usize,
}

/// Copies the PostgreSQL store at `url` into a new SQLite file in a temporary folder;
/// see [`Checkout`].
///
/// # Errors
/// [`StoreError`] when the shared store cannot be read or the copy written.
pub async fn checkout(url: &str) -> Result<Checkout, StoreError> {
    let dir = tempfile::Builder::new()
        .prefix("memwall-shared-")
        .tempdir()
        .map_err(|source| StoreError::Io {
            path: std::env::temp_dir().display().to_string(),
            source,
        })?;
    let path = dir.path().join("shared-store.db");
    let (store, out) = snapshot(url, &path).await?;
    store.pool().close().await;
    Ok(Checkout {
        dir,
        path,
        url: url.to_string(),
        runs: out.copied.len(),
    })
}

impl Checkout {
    /// The local copy to run the command on.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs copied from the shared store.
    pub fn runs(&self) -> usize {
        self.runs
    }

    /// The shared store's URL, password redacted.
    pub fn url(&self) -> String {
        redact(&self.url)
    }

    /// Pushes what the command added to the shared store (new runs, new rows under its
    /// runs, the prediction sheets it recorded), then removes the local copy; keeps it
    /// when anything failed. `progress` gets one line per run (pushed, already there
    /// with the rows added or with nothing new, failed).
    ///
    /// # Errors
    /// [`StoreError`] when either store cannot be opened; a run that fails is rolled
    /// back and listed in [`CopyOutcome::failed`].
    pub async fn check_in(self, progress: impl FnMut(&str)) -> Result<CheckIn, StoreError> {
        let out = push_job(&self.path, &self.url, progress).await;
        let keep = |dir: tempfile::TempDir| dir.keep().join("shared-store.db");
        match out {
            Ok(pushed) if pushed.failed.is_empty() => Ok(CheckIn { pushed, kept: None }),
            Ok(pushed) => Ok(CheckIn {
                pushed,
                kept: Some(keep(self.dir)),
            }),
            Err(e) => {
                let kept = keep(self.dir);
                Err(StoreError::Copy(format!(
                    "{e}; the runs this command wrote are kept in {}: push them with `memwall --db {} push --to URL`",
                    kept.display(),
                    kept.display()
                )))
            }
        }
    }
}

/// What [`Checkout::check_in`] did.
#[derive(Debug, Clone)]
pub struct CheckIn {
    /// The push of the local copy (new runs copied; rows the command added under the
    /// shared store's runs added to them).
    pub pushed: CopyOutcome,
    /// Where the local copy was kept because a run could not be pushed (else it is
    /// removed).
    pub kept: Option<std::path::PathBuf>,
}

/// Runs `work` on a local SQLite copy of the PostgreSQL store at `url` ([`checkout`])
/// and pushes back the runs and rows it added ([`Checkout::check_in`]), whether the
/// work succeeded or not: what a command wrote before it failed is kept too. `say`
/// gets the copy's line before the work, one line per pushed run and the push's
/// summary. Returns the work's own result.
///
/// # Errors
/// [`ThroughCopyError`]: the shared store could not be copied (the work did not run);
/// the push failed; or some runs could not be pushed (rolled back there, the copy
/// kept, the error says where and how to push it again, and the work's error if it
/// failed too).
pub async fn through_copy<T, E: std::fmt::Display>(
    url: &str,
    mut say: impl FnMut(&str),
    work: impl AsyncFnOnce(&Path) -> Result<T, E>,
) -> Result<Result<T, E>, ThroughCopyError> {
    let co = checkout(url)
        .await
        .map_err(|source| ThroughCopyError::Checkout {
            url: redact(url),
            source,
        })?;
    say(&format!(
        "working on a local copy of {} ({} runs, ids kept); the runs and rows this command adds are pushed back",
        co.url(),
        co.runs()
    ));
    let result = work(co.path()).await;
    let back = co
        .check_in(&mut say)
        .await
        .map_err(ThroughCopyError::CheckIn)?;
    say(&back.pushed.to_string());
    match back.kept {
        Some(kept) => Err(ThroughCopyError::NotPushed {
            failed: back.pushed.failed.len(),
            kept,
            work: result.err().map_or(String::new(), |e| {
                format!("; the command itself failed: {e:#}")
            }),
        }),
        None => Ok(result),
    }
}

/// Why [`through_copy`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ThroughCopyError {
    /// The shared store could not be copied; nothing ran.
    #[error("copying the shared store {url}")]
    Checkout {
        /// The store's URL, password redacted.
        url: String,
        /// What failed.
        source: StoreError,
    },
    /// Pushing back failed as a whole (the message names the kept copy).
    #[error(transparent)]
    CheckIn(StoreError),
    /// Some runs could not be pushed: they were rolled back in the shared store and
    /// the local copy is kept.
    #[error(
        "{failed} run(s) could not be pushed to the shared store and were rolled back there (errors above); the local copy is kept in {path}: push it again with `memwall --db {path} push --to URL`{work}",
        path = kept.display()
    )]
    NotPushed {
        /// Runs not pushed.
        failed: usize,
        /// The kept local copy.
        kept: std::path::PathBuf,
        /// `; the command itself failed: …` when the work failed too, else empty.
        work: String,
    },
}

impl std::fmt::Display for CopyOutcome {
    /// One summary line: runs copied (with their rows), runs already there (with the
    /// rows added under them), runs failed, sheets copied.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rows: usize = self
            .copied
            .iter()
            .flat_map(|r| r.rows.iter().map(|(_, n)| n))
            .sum();
        let grown = self
            .already_there
            .iter()
            .filter(|r| !r.new_rows.is_empty())
            .count();
        write!(
            f,
            "{} → {}: {} run(s) copied with {rows} row(s); {} run(s) already there (by uuid): {} new row(s) added under {grown} of them, nothing new in {}; {} failed (rolled back); {} prediction sheet(s) copied",
            self.from,
            self.to,
            self.copied.len(),
            self.already_there.len(),
            self.new_rows(),
            self.already_there.len() - grown,
            self.failed.len(),
            self.sheets_copied
        )
    }
}

#[cfg(test)]
pub(crate) mod fixture;

#[cfg(test)]
mod tests;
