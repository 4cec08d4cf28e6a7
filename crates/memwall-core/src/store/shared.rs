//! The shared store: the same schema on PostgreSQL (a lab's machines pushing into one
//! database), and the copy that moves runs between a store and another.
//!
//! - [`open_postgres`] connects and applies `crates/memwall-core/migrations-pg` (kept in
//!   step with the SQLite migrations by this module's tests, which migrate both and
//!   compare tables, columns, nullability and types).
//! - [`push_job`] copies the runs of a local SQLite store to a PostgreSQL one: one
//!   transaction per run (a run that fails leaves nothing), runs whose `uuid` is
//!   already there are skipped, and every id is remapped (the run's rows, and rows that
//!   name rows of other runs: a bench row's `stream_id`, a speculative row's `gate_id`).
//! - [`snapshot`] copies a PostgreSQL store into a new SQLite file keeping every id,
//!   so that readers written for SQLite (`memwall report`, its verifier) read it and
//!   the ids they print are the shared store's.
//! - [`checkout`] / [`Checkout::check_in`]: any command on a shared store, through a
//!   snapshot it works on and a push of the runs it added.
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
enum Cell {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<String>),
}

impl Cell {
    fn int(&self) -> Option<i64> {
        match self {
            Cell::Int(v) => *v,
            _ => None,
        }
    }
}

fn bind<'q>(
    q: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>,
    c: Cell,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments> {
    match c {
        Cell::Int(v) => q.bind(v),
        Cell::Real(v) => q.bind(v),
        Cell::Text(v) => q.bind(v),
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
    /// Its UUID.
    pub uuid: String,
    /// `bench`, `stream`, …
    pub kind: String,
    /// The machine that measured it.
    pub hostname: String,
    /// Rows copied with it, per table (tables with none left out).
    pub rows: Vec<(&'static str, usize)>,
}

/// A run the copy left alone because the destination has its UUID.
#[derive(Debug, Clone, PartialEq)]
pub struct SkippedRun {
    /// Its id in the source.
    pub from_id: i64,
    /// Its id in the destination.
    pub to_id: i64,
    /// Its UUID.
    pub uuid: String,
}

/// A run whose copy failed and was rolled back (nothing of it is in the destination).
#[derive(Debug, Clone, PartialEq)]
pub struct FailedRun {
    /// Its id in the source.
    pub from_id: i64,
    /// Its UUID.
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
    /// Runs already there.
    pub skipped: Vec<SkippedRun>,
    /// Runs that failed (rolled back).
    pub failed: Vec<FailedRun>,
}

/// The copy between two open connections.
struct Copy<'a> {
    src: &'a mut AnyConnection,
    src_at: String,
    dst: &'a mut AnyConnection,
    dst_at: String,
    ids: Ids,
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
                            "column {table}.{name} has declared type {other:?}; the copy knows INTEGER, REAL and TEXT (add the type to store::shared)"
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
) -> Result<Vec<Cell>, String> {
    cols.iter()
        .enumerate()
        .map(|(i, (name, class))| {
            let bad = |e: sqlx::Error| format!("{at}: table {table}, column {name}: {e}");
            Ok(match class {
                Class::Int => Cell::Int(r.try_get(i).map_err(bad)?),
                Class::Real => Cell::Real(r.try_get(i).map_err(bad)?),
                Class::Text => Cell::Text(r.try_get(i).map_err(bad)?),
            })
        })
        .collect()
}

impl Copy<'_> {
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
    ) -> Result<Vec<Vec<Cell>>, String> {
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
        row: Vec<Cell>,
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

    /// The destination id of source row `id` of `table`, for a row the copy did not
    /// write in this session (it belongs to a run that was already there): the row at
    /// the same position among its run's rows, in the run with the same UUID.
    async fn resolve(&mut self, table: &'static str, id: i64) -> Result<i64, String> {
        let at = self.src_at.clone();
        let q = format!(
            "SELECT t.run_id, r.uuid, (SELECT COUNT(*) FROM {table} u WHERE u.run_id = t.run_id AND u.id < t.id) FROM {table} t JOIN runs r ON r.id = t.run_id WHERE t.id = $1"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(q))
            .bind(id)
            .fetch_optional(&mut *self.src)
            .await
            .map_err(|e| format!("{at}: reading {table} row {id}: {e}"))?
            .ok_or_else(|| {
                format!("{at}: a row names {table} row {id}, which is not in this store (its run was deleted): the reference cannot be carried")
            })?;
        let run_id: i64 = row.try_get(0).map_err(|e| e.to_string())?;
        let uuid: String = row.try_get(1).map_err(|e| e.to_string())?;
        let pos: i64 = row.try_get(2).map_err(|e| e.to_string())?;
        let q = format!(
            "SELECT t.id FROM {table} t JOIN runs r ON r.id = t.run_id WHERE r.uuid = $1 ORDER BY t.id LIMIT 1 OFFSET $2"
        );
        let found = sqlx::query(sqlx::AssertSqlSafe(q))
            .bind(&uuid)
            .bind(pos)
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

    /// Copies one run and its rows inside the destination's open transaction; returns
    /// its destination id, rows per table and the ids it gave.
    async fn run_rows(
        &mut self,
        run: Vec<Cell>,
        from_id: i64,
    ) -> Result<
        (
            i64,
            Vec<(&'static str, usize)>,
            Vec<((&'static str, i64), i64)>,
        ),
        String,
    > {
        let mut staged: Vec<((&'static str, i64), i64)> = Vec::new();
        let to_run = self.insert("runs", run, true).await?.expect("runs has id");
        let mut counts = Vec::new();
        for c in CARRIED {
            let (filter, arg) = match c.parent {
                Parent::Run => ("run_id = $1", from_id),
                Parent::FrontierCell => (
                    "cell_id IN (SELECT id FROM frontier_cells WHERE run_id = $1)",
                    from_id,
                ),
            };
            let rows = self.src_rows(c.table, filter, c.order, Some(arg)).await?;
            if rows.is_empty() {
                continue;
            }
            counts.push((c.table, rows.len()));
            let cols = self.cols(c.table).to_vec();
            let at = |n: &str| cols.iter().position(|(x, _)| x == n);
            for mut row in rows {
                let from_row = at("id").and_then(|i| row[i].int());
                if self.ids == Ids::Remap {
                    if let Some(i) = at("run_id") {
                        row[i] = Cell::Int(Some(to_run));
                    }
                    for (col, target) in c.refs {
                        let i = at(col).expect("carried column exists");
                        // NULL and 0 name no row (`stream_id` 0: no STREAM row).
                        let Some(v) = row[i].int().filter(|v| *v > 0) else {
                            continue;
                        };
                        let mapped = match staged.iter().find(|(k, _)| *k == (*target, v)) {
                            Some((_, to)) => *to,
                            None => match self.map.get(&(*target, v)) {
                                Some(to) => *to,
                                None => self.resolve(target, v).await?,
                            },
                        };
                        row[i] = Cell::Int(Some(mapped));
                    }
                }
                let to_row = self.insert(c.table, row, c.has_id).await?;
                if let (Some(f), Some(t)) = (from_row, to_row) {
                    staged.push(((c.table, f), t));
                }
            }
        }
        Ok((to_run, counts, staged))
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
                Cell::Text(Some(s)) => s.clone(),
                _ => String::new(),
            };
            let (uuid, kind, hostname) = (text(uuid_at), text(kind_at), text(host_at));
            if uuid.is_empty() {
                out.failed.push(FailedRun {
                    from_id,
                    uuid,
                    error: format!("{}: run {from_id} has no uuid", self.src_at),
                });
                continue;
            }
            let there = sqlx::query("SELECT id FROM runs WHERE uuid = $1")
                .bind(&uuid)
                .fetch_optional(&mut *self.dst)
                .await
                .map_err(|e| sql_err(&dst_at, e))?;
            if let Some(r) = there {
                let to_id = r.try_get::<i64, _>(0).map_err(|e| sql_err(&dst_at, e))?;
                progress(&format!(
                    "skipped run {from_id} ({kind}, {hostname}): already there as run {to_id}"
                ));
                out.skipped.push(SkippedRun {
                    from_id,
                    to_id,
                    uuid,
                });
                continue;
            }
            sqlx::query("BEGIN")
                .execute(&mut *self.dst)
                .await
                .map_err(|e| sql_err(&dst_at, e))?;
            match self.run_rows(run, from_id).await {
                Ok((to_id, rows, staged)) => {
                    sqlx::query("COMMIT")
                        .execute(&mut *self.dst)
                        .await
                        .map_err(|e| sql_err(&dst_at, e))?;
                    self.map.extend(staged);
                    self.map.insert(("runs", from_id), to_id);
                    let n: usize = rows.iter().map(|(_, n)| n).sum();
                    progress(&format!(
                        "pushed run {from_id} ({kind}, {hostname}) as run {to_id}: {n} rows"
                    ));
                    out.copied.push(CopiedRun {
                        from_id,
                        to_id,
                        uuid,
                        kind,
                        hostname,
                        rows,
                    });
                }
                Err(error) => {
                    sqlx::query("ROLLBACK")
                        .execute(&mut *self.dst)
                        .await
                        .map_err(|e| sql_err(&dst_at, e))?;
                    progress(&format!(
                        "FAILED run {from_id} ({kind}, {hostname}), nothing of it written: {error}"
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
    let mut c = Copy {
        src,
        src_at: src_at.clone(),
        dst,
        dst_at: dst_at.clone(),
        ids,
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
            "draft_key",
            "alpha_set",
            "k",
        ],
    )
    .await?;
    c.runs(&mut out, progress).await?;
    Ok(out)
}

/// `memwall push`: copies every run of the SQLite store `local` (and every row under it) to the
/// PostgreSQL store at `url`, skipping runs whose UUID is there; one transaction per
/// run. `progress` gets one line per run.
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
/// must not exist), keeping every id; returns the opened copy.
///
/// # Errors
/// [`StoreError`]; a run that could not be copied is an error here (a snapshot is all
/// or nothing).
pub async fn snapshot(url: &str, path: &Path) -> Result<(Store, CopyOutcome), StoreError> {
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
    let out = copy(
        &mut pg.conn,
        src_at,
        &mut dst,
        path.display().to_string(),
        false,
        Ids::Keep,
        |_| {},
    )
    .await?;
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
/// into a new SQLite file in a temporary folder (ids kept, as [`snapshot`]); the
/// command reads and writes that file; [`Checkout::check_in`] pushes back the runs the
/// command added ([`push_job`]: one transaction per run, runs already there by UUID
/// skipped, so the copied runs are not sent again). Changing or deleting rows that
/// were already shared is not carried back: commands that do either refuse a shared
/// store. The folder is removed when the checkout is dropped.
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

    /// Pushes the runs the command added to the shared store (and the prediction
    /// sheets it recorded), then removes the local copy. `progress` gets one line per
    /// run pushed or failed (runs already there are not listed).
    ///
    /// # Errors
    /// [`StoreError`] when either store cannot be opened; a run that fails is rolled
    /// back and listed in [`CopyOutcome::failed`].
    pub async fn check_in(self, mut progress: impl FnMut(&str)) -> Result<CheckIn, StoreError> {
        let out = push_job(&self.path, &self.url, |m| {
            if !m.starts_with("skipped ") {
                progress(m)
            }
        })
        .await;
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
    /// The push of the local copy (new runs copied; the shared store's own runs
    /// skipped).
    pub pushed: CopyOutcome,
    /// Where the local copy was kept because a run could not be pushed (else it is
    /// removed).
    pub kept: Option<std::path::PathBuf>,
}

impl std::fmt::Display for CopyOutcome {
    /// One summary line: runs copied (with their rows), skipped and failed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rows: usize = self
            .copied
            .iter()
            .flat_map(|r| r.rows.iter().map(|(_, n)| n))
            .sum();
        write!(
            f,
            "{} → {}: {} run(s) copied with {rows} row(s), {} skipped (already there by uuid), {} failed (rolled back); {} prediction sheet(s) copied",
            self.from,
            self.to,
            self.copied.len(),
            self.skipped.len(),
            self.failed.len(),
            self.sheets_copied
        )
    }
}

/// Test fixtures shared with the report's tests: a SQLite store holding a run of
/// every kind of row the copy carries, measured on one host.
#[cfg(test)]
pub(crate) mod fixture {
    use crate::store::Store;
    use crate::store::record::BenchRecord;
    use std::path::Path;

    /// What one host's fixture holds, to compute expected values from.
    #[derive(Debug, Clone)]
    pub(crate) struct HostFixture {
        /// Hostname.
        pub host: String,
        /// CPU brand string of every run.
        pub cpu: String,
        /// Logical cores of every run.
        pub cores: i64,
        /// GPUs as the probe lists them (`NVIDIA H200, 143771 MiB`).
        pub gpus: Vec<String>,
        /// Its triad, GB/s.
        pub triad_gbps: f64,
        /// Its tg128 tok/s.
        pub tg_tps: f64,
        /// Bytes read per decode step.
        pub bytes_per_step: f64,
    }

    impl HostFixture {
        /// A 2-core host without GPUs whose CPU is `cpu of <host>`, reading
        /// 400.8 MB per decode step.
        pub fn new(host: &str, triad_gbps: f64, tg_tps: f64) -> HostFixture {
            HostFixture {
                host: host.into(),
                cpu: format!("cpu of {host}"),
                cores: 2,
                gpus: vec![],
                triad_gbps,
                tg_tps,
                bytes_per_step: 400_800_000.0,
            }
        }

        /// The decode ceiling, tok/s: bandwidth ÷ bytes per step.
        pub fn ceiling_ts(&self) -> f64 {
            self.triad_gbps * 1e9 / self.bytes_per_step
        }
    }

    async fn exec(s: &Store, sql: &str) -> i64 {
        sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
            .execute(s.pool())
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .last_insert_rowid()
    }

    async fn run(s: &Store, kind: &str, f: &HostFixture) -> i64 {
        let json = serde_json::json!({ "hostname": f.host, "cpu_model": f.cpu, "cores_logical": f.cores, "gpus": f.gpus });
        sqlx::query("INSERT INTO runs (kind, started_at, finished_at, build_commit, command, cpu_info, cores_logical, ram_bytes, os, kernel, hostname, host_json) VALUES (?, '2026-01-01T00:00:00Z', '2026-01-01T00:01:00Z', 'c', 'memwall test', ?, ?, 1073741824, 'os', 'k', ?, ?)")
            .bind(kind)
            .bind(&f.cpu)
            .bind(f.cores)
            .bind(&f.host)
            .bind(json.to_string())
            .execute(s.pool())
            .await
            .unwrap_or_else(|e| panic!("inserting a {kind} run: {e}"))
            .last_insert_rowid()
    }

    /// A store at `path` with, for host `f.host`: a STREAM run (copy + triad rows, a
    /// peak), a bench run (one tg128 row naming the triad row, its energy row, a
    /// sampler counter, phase and series point), a speculative gate run and a bench
    /// run whose speedup row names that gate, a frontier run (a cell and an item), a
    /// KV run, a load-test run and a prediction sheet scored against the bench run.
    pub(crate) async fn host_store(path: &Path, f: &HostFixture) -> Store {
        let s = Store::open(path).await.unwrap();
        let h = &f.host;
        let stream = run(&s, "stream", f).await;
        exec(&s, &format!("INSERT INTO stream_results (run_id, measured_at, kernel, threads, array_bytes, passes, best_gbps, avg_gbps, worst_gbps, samples_ns, validated, cpu_info, hostname) VALUES ({stream}, 'm', 'copy', 2, 800000000, 10, {0}, {0}, {0}, '[1,2]', 1, 'cpu', '{h}')", f.triad_gbps * 0.9)).await;
        let triad = exec(&s, &format!("INSERT INTO stream_results (run_id, measured_at, kernel, threads, array_bytes, passes, best_gbps, avg_gbps, worst_gbps, samples_ns, validated, cpu_info, hostname) VALUES ({stream}, 'm', 'triad', 2, 800000000, 10, {0}, {0}, {0}, '[1,2]', 1, 'cpu', '{h}')", f.triad_gbps)).await;
        exec(&s, &format!("INSERT INTO peak_results (run_id, measured_at, kind, threads, gflops, isa, cpu_info, hostname, bound_gflops, clock_ghz, clock_source) VALUES ({stream}, 'm', 'f32 FMA', 2, 100.0, 'avx2', 'cpu', '{h}', 150.0, 3.0, 'sysfs')")).await;

        let mut r = crate::testing::new_run("bench");
        r.host.hostname = h.clone();
        r.host.cpu_model = f.cpu.clone();
        r.host.cores_logical = f.cores as usize;
        r.host.gpus = f.gpus.clone();
        let ceiling = f.ceiling_ts();
        let mut rows = vec![BenchRecord {
            hostname: h.clone(),
            cpu_info: f.cpu.clone(),
            cores_logical: f.cores,
            gpu_info: f.gpus.join(", "),
            n_gpu_layers: if f.gpus.is_empty() { 0 } else { 99 },
            // Every derived column consistent with the rate, as the verifier recomputes
            // them (one sequence: a token reads the whole step).
            samples_ts: vec![f.tg_tps, f.tg_tps],
            achieved_gflops: f.tg_tps * 1.0e9 / 1e9,
            flops_per_token: 1.0e9,
            intensity: 1.0e9 / f.bytes_per_step,
            read_bandwidth_gbps: None,
            decode_ceiling_ts_read: None,
            achieved_read: None,
            implied_bandwidth_gbps: Some(f.tg_tps * f.bytes_per_step / 1e9),
            stream_id: triad,
            avg_ts: f.tg_tps,
            bandwidth_gbps: f.triad_gbps,
            bytes_per_step: f.bytes_per_step,
            ceiling_ts: ceiling,
            achieved: f.tg_tps / ceiling,
            ..BenchRecord::example()
        }];
        let bench = s.insert_bench_run(&r, &mut rows).await.unwrap();
        let row = rows[0].id;
        exec(&s, &format!("INSERT INTO row_energy (row_id, run_id, phase, samples, energy_source, reason) VALUES ({row}, {bench}, 'tg128', 3, 'rapl', 'no RAPL in this VM')")).await;
        exec(&s, &format!("INSERT INTO sampler_counters (run_id, name, source, available, reason) VALUES ({bench}, 'cpu_energy', 'rapl', 0, 'no RAPL')")).await;
        exec(&s, &format!("INSERT INTO sampler_phases (run_id, name, start_ns, end_ns) VALUES ({bench}, 'tg128', 0, 10)")).await;
        exec(&s, &format!("INSERT INTO sampler_series (run_id, hz, t_ns, cpu_temp_c) VALUES ({bench}, 10.0, 5, 51.5)")).await;

        let gate_run = run(&s, "spec-gate", f).await;
        let gate = exec(&s, &format!("INSERT INTO spec_gates (run_id, mode, target_file, target_sha256, drafter_kind, drafter_key, k, prompt_set_sha256, n_prompts, n_identical, max_new, passed, detail_json, engine_build, build_commit, measured_at, hostname, cpu_info, n_prompts_set) VALUES ({gate_run}, 'greedy', 't', 'T', 'draft-model', 'dk', 4, 'P', 6, 6, 32, 1, '{{}}', 'B', 'c', 'm', '{h}', 'c', 6)")).await;
        exec(&s, &format!("INSERT INTO spec_gate_prompts (run_id, prompt_set_sha256, prompt_id, category, format, n_prompt_tokens) VALUES ({gate_run}, 'P', 'p1', 'code', 'raw', 17)")).await;
        let spec_run = run(&s, "spec-bench", f).await;
        exec(&s, &format!("INSERT INTO spec_bench (run_id,target_file,target_sha256,drafter_kind,drafter_key,k,k_auto,category,prompt_set_sha256,prompt_ids,max_new,reps,n_threads,tps_samples,tps_mean,tps_std,speedup_samples,speedup_mean,speedup_std,predicted_speedup,n_drafted,n_accepted,n_iterations,n_emitted,n_output_mismatch,p_mass_max,p_mass_mean,q_mass_max,q_mass_mean,stats_json,engine_build,build_commit,measured_at,hostname,cpu_info,gate_id) VALUES
            ({spec_run},'t','T','none','target-only',0,0,'code','P','[]',32,2,2,'[30,31]',30.5,0.7,NULL,NULL,NULL,NULL,0,0,10,10,0,0,0,0,0,'{{}}','B','c','m','{h}','c',NULL),
            ({spec_run},'t','T','draft-model','dk',4,0,'code','P','[]',32,2,2,'[27,27.9]',27.45,0.6,'[0.9,0.9]',0.9,0.0,0.95,8,4,3,7,0,0,0,0,0,'{{}}','B','c','m','{h}','c',{gate})")).await;

        exec(&s, &format!("INSERT INTO spec_bench_energy (row_id, run_id, samples, energy_source, reason) VALUES ((SELECT MAX(id) FROM spec_bench WHERE run_id = {spec_run}), {spec_run}, 3, 'rapl', 'no RAPL in this VM')")).await;
        let synth_run = run(&s, "spec-synth", f).await;
        let pred = exec(&s, &format!("INSERT INTO spec_synth_predictions (created_at, hostname, target_sha256, draft_key, engine_build, alpha_set, k, predicted_speedup, timings_json) VALUES ('2026-01-01T00:00:00Z', '{h}', 'T', 'dk', 'B', 0.5, 4, 1.25, '{{}}')")).await;
        let synth = exec(&s, &format!("INSERT INTO spec_synth (run_id, prediction_id, alpha_set, k, target_file, target_sha256, draft_file, draft_key, seed, prompt_set_sha256, prompt_ids, max_new, reps, n_threads, n_gpu_layers, tps_samples, tps_mean, tps_std, speedup_samples, speedup_mean, speedup_std, predicted_speedup, predicted_after, alpha_hat, n_tested, n_drafted, n_accepted, n_iterations, n_emitted, n_draft_passes, n_draws, n_right, stats_json, timings_json, engine_build, build_commit, measured_at, hostname, cpu_info, gpu_info, gate_id) VALUES ({synth_run}, {pred}, 0.5, 4, 't', 'T', 'd', 'dk', 7, 'P', '[]', 32, 2, 2, 0, '[33,34]', 33.5, 0.7071067811865476, '[1.1,1.12]', 1.11, 0.014142135623730963, 1.25, 1.2, 0.5, 40, 40, 20, 12, 32, 12, 40, 20, '{{}}', '{{}}', 'B', 'c', '2026-01-01T00:05:00Z', '{h}', 'c', NULL, {gate})")).await;
        exec(&s, &format!("INSERT INTO spec_synth_energy (row_id, run_id, samples, energy_source, reason) VALUES ({synth}, {synth_run}, 3, 'rapl', 'no RAPL in this VM')")).await;

        let fr = run(&s, "frontier", f).await;
        let cell = exec(&s, &format!("INSERT INTO frontier_cells (run_id, source_file, source_sha256, source_quant, arm_quant, arm_file, arm_sha256, arm_relation, arm_file_bytes, arm_streamed_bytes, arm_bits_per_weight, measure, config_key, config_json, value, value_unc, ci_low, ci_high, n, result_json, started_at, finished_at, build_commit, engine_build, n_threads, hostname, cpu_info) VALUES ({fr}, 's.gguf', 'S', 'Q4_K_M', 'Q8_0', 'a.gguf', 'A', 'above', 100, 90, 8.5, 'task:arc', 'key', '{{}}', 0.5, NULL, 0.2, 0.8, 2, '{{}}', 'a', 'b', 'c', 'B', 2, '{h}', 'c')")).await;
        for i in 0..2 {
            exec(&s, &format!("INSERT INTO frontier_items (cell_id, item_id, prompt, n_prompt_tokens, output, n_gen_tokens, extracted, expected, correct) VALUES ({cell}, 'item{i}', 'p', 3, 'o', 1, 'A', 'A', {})", 1 - i)).await;
        }
        let kv = run(&s, "kv", f).await;
        exec(&s, &format!("INSERT INTO kv_verify_results (run_id, model_filename, cache_type, n, predicted_bytes_per_token, formula_bytes_per_token, state_n, state_2n, measured_state_bytes_per_token, metadata_bytes_per_token, measured_kv_bytes_per_token, ratio, build_commit) VALUES ({kv}, 'm.gguf', 'f16', 64, 12288.0, 12288, 800000, 1587200, 12300.0, 12.0, 12288.0, 1.0, 'c')")).await;
        let lt = run(&s, "loadtest", f).await;
        let point = exec(&s, &format!("INSERT INTO loadtest_points (run_id, url, endpoint, request_model, mode, concurrency, input_tokens, output_tokens, shared_prefix_tokens, ignore_eos, seed, slo, build_commit, measured_at, hostname, n_sent, n_completed, n_rejected, n_failed, duration_s, total_output_tokens, token_source, request_throughput_rps, output_throughput_tps, samples_json) VALUES ({lt}, 'http://x', '/v1/completions', 'm', 'closed', 2, 16, 8, 0, 1, 0, '', 'c', 'm', '{h}', 4, 4, 0, 0, 2.0, 32, 'usage', 2.0, 16.0, '[]')")).await;
        exec(&s, &format!("INSERT INTO loadtest_energy (point_id, run_id, phase, samples, energy_source, reason) VALUES ({point}, {lt}, 'c=2', 3, 'rapl', 'no RAPL in this VM')")).await;
        let sheet = exec(&s, &format!("INSERT INTO prediction_sheets (created_at, hostname, prev_sha256, payload_json, sha256) VALUES ('2026-01-01T00:00:00.000Z', '{h}', 'genesis', '{{}}', 'sheet-of-{h}')")).await;
        // A scorecard with nothing to score (the sheet predicted no test of this run).
        exec(&s, &format!("INSERT INTO prediction_scores (sheet_id, run_id, scored_at, result_json) VALUES ({sheet}, {bench}, 'now', '{{\"sheet_id\":{sheet},\"sheet_sha256\":\"sheet-of-{h}\",\"predicted_at\":\"2026-01-01T00:00:00.000Z\",\"run_id\":{bench},\"run_started_at\":\"2026-01-01T00:00:00Z\",\"recorded_before_run\":true,\"tests\":[],\"ratios\":[],\"mean_abs_error_pct\":null}}')")).await;
        s
    }
}

#[cfg(test)]
mod tests {
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
            "SELECT type || ' ' || name FROM sqlite_master WHERE type IN ('index', 'trigger') AND name NOT LIKE 'sqlite_autoindex_%' AND name <> 'runs_get_a_uuid'",
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
            let n: i64 =
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {t}")))
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
            let n: i64 =
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {t}")))
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
            "store::shared::CARRIED must list every table (a new table needs its place in the copy)"
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
        assert_eq!(uuids.len(), 8);
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
            (oa.copied.len(), oa.skipped.len(), oa.failed.len()),
            (8, 0, 0),
            "{oa}: {:?}",
            oa.failed
        );
        assert_eq!((ob.copied.len(), ob.sheets_copied), (8, 1));
        assert!(
            oa.copied.iter().all(|r| r.to_id == r.from_id + 8),
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
            (again.copied.len(), again.skipped.len(), again.sheets_copied),
            (0, 8, 0)
        );
        assert!(again.skipped.iter().all(|r| r.to_id == r.from_id + 8));
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
        let home: Vec<(f64, Option<f64>, String)> =
            sqlx::query_as::<Any, (f64, Option<f64>, String)>(
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
        assert_eq!((out.copied.len(), out.failed.len()), (8, 1), "{out}");
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
        assert_eq!((out.copied.len(), out.sheets_copied), (16, 2));
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
}
