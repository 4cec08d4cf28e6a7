//! The provenance store: SQLite through `sqlx`, migrations embedded from
//! `crates/memwall-core/migrations`. Every run is written in one transaction, so a
//! killed run leaves no partial rows.
//!
//! Several processes may share one database (benches writing while the app reads
//! history): WAL mode lets readers run beside the one writer, write transactions
//! start with `BEGIN IMMEDIATE` (a transaction that read first and then tries to write
//! could fail at once with SQLITE_BUSY instead of waiting), every connection waits up
//! to [`BUSY_TIMEOUT`] for a lock, and migrations run inside one such transaction so
//! that processes opening a new file together apply them once. WAL needs shared
//! memory between the processes, which network file systems do not provide
//! (<https://www.sqlite.org/wal.html>, "WAL does not work over a network
//! filesystem"): a database on one (see [`network_filesystem`]) gets a rollback
//! journal instead, with a warning.
//!
//! Default location: `$MEMWALL_DB`, else the user's data directory
//! (`~/.local/share/memwall/memwall.db` on Linux,
//! `~/Library/Application Support/memwall/memwall.db` on macOS).

pub mod energy;
pub mod host;
pub mod postgres;
pub mod record;

use crate::measure::peak::Peak;
use crate::measure::stream::StreamResult;
use crate::probe::hw::HostInfo;
use crate::store::record::{BenchRecord, ColumnValue};
use serde::{Deserialize, Serialize};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
};
use sqlx::{Column, Connection, Row, Sqlite, Transaction};
use std::path::{Path, PathBuf};
use std::str::FromStr;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite failed.
    #[error("store {path}: {source}")]
    Sql {
        /// Database file.
        path: String,
        /// The SQLite driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// A migration failed.
    #[error(
        "store {path}: migration failed: {source}. If this database was written by a newer memwall, upgrade memwall or pass --db to use another file"
    )]
    Migrate {
        /// Database file.
        path: String,
        /// The migrator's error.
        #[source]
        source: sqlx::migrate::MigrateError,
    },
    /// A stored row could not be decoded.
    #[error("store {path}: table {table}, row {id}: {problem}")]
    Decode {
        /// Database file.
        path: String,
        table: &'static str,
        /// Store id of the row.
        id: i64,
        /// What is wrong.
        problem: String,
    },
    /// The directory could not be created.
    #[error("store {path}: {source}")]
    Io {
        /// Path of the file or directory the error is about.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Something asked for does not exist.
    #[error("store: {0}")]
    NotFound(String),
    /// Copying runs between stores failed (see [`postgres`]).
    #[error("store copy: {0}")]
    Copy(String),
    /// A PostgreSQL URL where a SQLite file is needed.
    #[error(
        "store {url}: this is a PostgreSQL store, which only `memwall report --db postgres://…` reads and `memwall push --to postgres://…` writes; this command (and the app) needs a SQLite file: pass --db PATH or set MEMWALL_DB to a file"
    )]
    PostgresUrl {
        /// The URL, password redacted.
        url: String,
    },
    /// A run cannot be deleted alone: other runs' rows rest on it.
    #[error(
        "store {path}: run {run} is a speculative gate that unlocked the speedup rows of spec-bench run(s) {}: delete those first, or delete them together with it (memwall history --delete {run} --cascade)",
        dependents.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
    )]
    Dependents {
        /// Database file.
        path: String,
        /// The run asked to be deleted.
        run: i64,
        /// Runs whose rows rest on it.
        dependents: Vec<i64>,
    },
}

#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
    path: PathBuf,
    journal: SqliteJournalMode,
}

/// A run to record (the parent of stream/peak/bench rows).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewRun {
    /// `bench`, `stream`, …
    pub kind: String,
    /// UTC RFC 3339.
    pub started_at: String,
    /// UTC RFC 3339.
    pub finished_at: String,
    /// The command line as typed.
    pub command: String,
    /// Machine facts.
    pub host: HostInfo,
    /// Free-form notes.
    pub notes: String,
    /// What the measuring guard saw (power, thermal before/after, swap-outs,
    /// capacity checks); `None` for runs that measured nothing under it.
    #[serde(default)]
    pub guard: Option<crate::measure::guard::GuardReport>,
}

/// A stored run, as listed by the History page and `memwall history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct RunSummary {
    /// Store id of the run (a `runs` row).
    pub id: i64,
    pub kind: String,
    /// Start time.
    pub started_at: String,
    /// Git commit of the memwall build that measured it.
    pub build_commit: String,
    pub command: String,
    /// Hostname of the machine that measured it.
    pub hostname: String,
    /// CPU model name as the OS reports it.
    pub cpu_info: String,
    /// Bench rows in the run.
    pub n_bench_rows: i64,
    /// Distinct models in the run, `; `-separated file names.
    pub models: String,
}

/// A stored STREAM kernel result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct StoredStream {
    /// Row id (what bench rows reference as `stream_id`).
    pub id: i64,
    /// Store id of the run (a `runs` row).
    pub run_id: i64,
    /// When it was measured, UTC RFC 3339.
    pub measured_at: String,
    pub kernel: String,
    /// Threads that ran the STREAM kernels.
    pub threads: i64,
    pub array_bytes: i64,
    /// Best rate, GB/s.
    pub best_gbps: f64,
    /// Mean rate, GB/s.
    pub avg_gbps: f64,
    /// Hostname of the machine that measured it.
    pub hostname: String,
}

/// A stored peak-compute measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct StoredPeak {
    /// Store id of the row.
    pub id: i64,
    /// When it was measured, UTC RFC 3339.
    pub measured_at: String,
    /// `f32 FMA` or `int8 dot`.
    pub kind: String,
    /// Threads that ran the STREAM kernels.
    pub threads: i64,
    /// GFLOP/s (GOP/s).
    pub gflops: f64,
    /// Instruction path.
    pub isa: String,
    /// Plausibility bound of this peak, GFLOP/s (GOP/s).
    pub bound_gflops: f64,
    /// The bound's clock, GHz.
    pub clock_ghz: f64,
    /// Where that clock came from.
    pub clock_source: String,
}

/// A stored frontier cell's headline value with its run and host, as the Frontier
/// page needs it (the `frontier_cells` table belongs to the frontier experiment; this
/// read sits here so that the `present` stage can build the page).
#[derive(Debug, Clone, PartialEq)]
pub struct FrontierCellValue {
    /// The frontier run.
    pub run_id: i64,
    pub host: String,
    pub arm_file: String,
    /// The arm's quantization.
    pub arm_quant: String,
    /// `speed`, `ppl:<dataset>` or `task:<name>`.
    pub measure: String,
    /// Headline value (tok/s, PPL or accuracy).
    pub value: Option<f64>,
}

/// Which bench rows to read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RowFilter {
    /// Only this run.
    pub run_id: Option<i64>,
    /// Only rows whose model file name contains this.
    pub model: Option<String>,
    /// Only this engine.
    pub engine: Option<String>,
    /// Only rows at or after this RFC 3339 time.
    pub since: Option<String>,
}

/// Which runs to list (the History page's filters). A blank or absent field does not
/// filter; with any field set, a run is listed when at least one of its bench rows
/// matches every set field (runs without bench rows, such as STREAM runs, are then
/// left out).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct RunFilter {
    /// Model file name contains this.
    pub model: Option<String>,
    /// Engine equals this (`llama.cpp`).
    pub engine: Option<String>,
    /// Bench rows at or after this UTC time (RFC 3339, or a `YYYY-MM-DD` prefix of one).
    pub since: Option<String>,
}

impl RunFilter {
    /// The filter with blank fields removed and the rest trimmed.
    fn normalized(&self) -> RunFilter {
        let f = |v: &Option<String>| {
            v.as_deref()
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
        };
        RunFilter {
            model: f(&self.model),
            engine: f(&self.engine),
            since: f(&self.since),
        }
    }
}

/// The default database path: `$MEMWALL_DB`, else `<data dir>/memwall/memwall.db`.
pub fn default_path() -> PathBuf {
    if let Ok(p) = std::env::var("MEMWALL_DB")
        && !p.is_empty()
    {
        return PathBuf::from(p);
    }
    directories::ProjectDirs::from("", "", "memwall")
        .map(|d| d.data_dir().join("memwall.db"))
        .unwrap_or_else(|| PathBuf::from("memwall.db"))
}

/// How long a connection waits for another's lock before failing with "database is locked".
pub const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The statement every write transaction starts with: takes the write lock up front
/// (waiting up to [`BUSY_TIMEOUT`]), so the transaction never has to upgrade a read.
pub const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";

/// The name of a network file system from its `statfs` `f_type` magic number (Linux,
/// `linux/magic.h` and `fs/smb/client/cifsglob.h`), or `None` for any other.
pub fn network_filesystem(f_type: u32) -> Option<&'static str> {
    Some(match f_type {
        0x6969 => "NFS",
        0x517B => "SMB",
        0xFF53_4D42 => "CIFS",
        0xFE53_4D42 => "SMB2",
        0x6573_5546 => "FUSE (e.g. sshfs)",
        0x0102_1997 => "9p",
        _ => return None,
    })
}

/// The name of a network file system from the `f_fstypename` of macOS's `statfs`, or
/// `None` for any other.
pub fn network_filesystem_by_name(fstypename: &str) -> Option<&'static str> {
    Some(match fstypename {
        "nfs" => "NFS",
        "smbfs" => "SMB",
        "afpfs" => "AFP",
        "webdav" => "WebDAV",
        "macfuse" | "osxfuse" | "fusefs" => "FUSE",
        _ => return None,
    })
}

/// The network file system holding `dir`, if it is on one (`None` when local or when
/// the file system cannot be asked).
#[cfg(target_os = "linux")]
fn network_filesystem_of(dir: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: `c` is NUL-terminated; `st` is plain data that statfs fills.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    // f_type is a 32-bit magic number held in a wider (and on some targets signed) field.
    network_filesystem(st.f_type as u32)
}

/// The network file system holding `dir`, if it is on one.
#[cfg(target_os = "macos")]
fn network_filesystem_of(dir: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: as above; f_fstypename is a NUL-terminated C string inside `st`.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let name = unsafe { std::ffi::CStr::from_ptr(st.f_fstypename.as_ptr()) };
    network_filesystem_by_name(&name.to_string_lossy())
}

/// Other systems: not asked (WAL).
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn network_filesystem_of(_dir: &Path) -> Option<&'static str> {
    None
}

fn bind_cell<'q>(
    q: sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments>,
    c: ColumnValue,
) -> sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments> {
    match c {
        ColumnValue::Int(v) => q.bind(v),
        ColumnValue::Bool(v) => q.bind(v as i64),
        ColumnValue::Real(v) => q.bind(v),
        ColumnValue::Text(v) => q.bind(v),
        ColumnValue::Null => q.bind(Option::<i64>::None),
        ColumnValue::Ints(v) => q.bind(serde_json::to_string(&v).expect("ints serialize")),
        ColumnValue::Reals(v) => q.bind(serde_json::to_string(&v).expect("reals serialize")),
        ColumnValue::Texts(v) => q.bind(serde_json::to_string(&v).expect("texts serialize")),
    }
}

/// The ids [`Store::insert_stream_run`] gave the rows it stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredStreamRun {
    /// Store id of the run (a `runs` row).
    pub run_id: i64,
    /// Store ids of the `stream_results` rows: one list per result, parallel to its kernels.
    pub kernel_ids: Vec<Vec<i64>>,
}

impl Store {
    /// Opens (creating if needed) the database at `path`, with foreign keys on, and
    /// applies pending migrations. WAL mode, or a rollback journal (with a warning)
    /// when the file lies on a network file system.
    ///
    /// # Errors
    /// [`StoreError`] naming the file.
    pub async fn open(path: &Path) -> Result<Store, StoreError> {
        let text = path.to_string_lossy();
        if postgres::is_postgres_url(&text) {
            return Err(StoreError::PostgresUrl {
                url: postgres::redact(&text),
            });
        }
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let network = network_filesystem_of(dir.unwrap_or(Path::new(".")));
        if let Some(fs) = network {
            tracing::warn!(
                "store {}: the file is on a network file system ({fs}); SQLite's WAL mode needs shared memory that network file systems do not provide, so memwall uses a rollback journal (slower, and readers wait for writers). Pass --db (or set MEMWALL_DB) to a local path to avoid this.",
                path.display()
            );
        }
        Self::open_with_journal(path, network.is_some()).await
    }

    /// [`Store::open`] with the journal chosen by the caller: a rollback journal
    /// (`journal_mode=DELETE`) when `rollback_journal`, else WAL.
    async fn open_with_journal(path: &Path, rollback_journal: bool) -> Result<Store, StoreError> {
        let ps = path.display().to_string();
        let sql = |source| StoreError::Sql {
            path: ps.clone(),
            source,
        };
        let journal = if rollback_journal {
            SqliteJournalMode::Delete
        } else {
            SqliteJournalMode::Wal
        };
        let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
            .map_err(sql)?
            .create_if_missing(true)
            .journal_mode(journal)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(opts)
            .await
            .map_err(sql)?;
        // sqlx's migration lock is a no-op on SQLite: processes opening a new file
        // together would each create the tables. One write transaction around the
        // whole migration serializes them; the later ones find nothing to apply.
        let mut conn = pool.acquire().await.map_err(sql)?;
        let mut tx = conn.begin_with(BEGIN_WRITE).await.map_err(sql)?;
        // `run_direct` takes the connection itself: `run(&mut *tx)` goes through sqlx's
        // `Acquire`, whose bound rustc cannot prove for every lifetime once this future
        // is awaited inside a `Send` one (the app's commands).
        sqlx::migrate!("./migrations")
            .run_direct(None, &mut *tx, false)
            .await
            .map_err(|source| StoreError::Migrate {
                path: ps.clone(),
                source,
            })?;
        tx.commit().await.map_err(sql)?;
        drop(conn);
        Ok(Store {
            pool,
            path: path.to_path_buf(),
            journal,
        })
    }

    /// The journal mode in use: `wal`, or `delete` (a rollback journal) on a network
    /// file system.
    pub fn journal_mode(&self) -> &'static str {
        match self.journal {
            SqliteJournalMode::Delete => "delete",
            _ => "wal",
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The pool, for modules that own their own tables.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// `source` as a [`StoreError::Sql`] naming this database, for the slices' own
    /// store modules.
    pub(crate) fn sql(&self, source: sqlx::Error) -> StoreError {
        StoreError::Sql {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// Begins a write transaction ([`BEGIN_WRITE`]: holds the write lock from the start,
    /// waiting up to [`BUSY_TIMEOUT`] for another writer to finish).
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn begin(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.pool
            .begin_with(BEGIN_WRITE)
            .await
            .map_err(|e| self.sql(e))
    }

    /// Inserts the run row inside `tx`; returns its id.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn insert_run_tx(
        &self,
        tx: &mut Transaction<'static, Sqlite>,
        run: &NewRun,
    ) -> Result<i64, StoreError> {
        let host_json = serde_json::to_string(&run.host).expect("host serializes");
        let guard_json = run
            .guard
            .as_ref()
            .map(|g| serde_json::to_string(g).expect("guard report serializes"));
        let r = sqlx::query(
            "INSERT INTO runs (kind, started_at, finished_at, build_commit, command, cpu_info, cores_logical, ram_bytes, os, kernel, hostname, host_json, notes, guard_json)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&run.kind)
        .bind(&run.started_at)
        .bind(&run.finished_at)
        .bind(crate::BUILD_COMMIT)
        .bind(&run.command)
        .bind(&run.host.cpu_model)
        .bind(run.host.cores_logical as i64)
        .bind(run.host.ram.0 as i64)
        .bind(&run.host.os)
        .bind(&run.host.kernel)
        .bind(&run.host.hostname)
        .bind(host_json)
        .bind(&run.notes)
        .bind(guard_json)
        .execute(&mut **tx)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(r.last_insert_rowid())
    }

    /// Stores a STREAM measurement (and optionally compute peaks) as one run, in one
    /// transaction, and returns the ids it gave them.
    ///
    /// # Errors
    /// [`StoreError::Sql`]; nothing is written on error.
    pub async fn insert_stream_run(
        &self,
        run: &NewRun,
        results: &[StreamResult],
        peaks: &[Peak],
    ) -> Result<StoredStreamRun, StoreError> {
        self.insert_stream_run_on(run, "cpu", results, peaks).await
    }

    /// As [`Store::insert_stream_run`] for the memory of `device`: `cpu`, or a GPU
    /// label (`CUDA0 NVIDIA H200`) for STREAM measured on that device.
    ///
    /// # Errors
    /// [`StoreError::Sql`]; nothing is stored on error.
    pub async fn insert_stream_run_on(
        &self,
        run: &NewRun,
        device: &str,
        results: &[StreamResult],
        peaks: &[Peak],
    ) -> Result<StoredStreamRun, StoreError> {
        let mut tx = self.begin().await?;
        let run_id = self.insert_run_tx(&mut tx, run).await?;
        let mut ids = Vec::new();
        for res in results {
            let mut kid = Vec::new();
            for k in &res.kernels {
                let r = sqlx::query(
                    "INSERT INTO stream_results (run_id, measured_at, kernel, threads, array_bytes, passes, best_gbps, avg_gbps, worst_gbps, samples_ns, validated, cpu_info, hostname, device)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                )
                .bind(run_id)
                .bind(&run.finished_at)
                .bind(k.kernel.name())
                .bind(res.config.threads as i64)
                .bind(res.config.array_bytes().0 as i64)
                .bind(res.config.passes as i64)
                .bind(k.best_gbps.0)
                .bind(k.avg_gbps.0)
                .bind(k.worst_gbps.0)
                .bind(serde_json::to_string(&k.samples_ns).expect("serialize"))
                .bind(res.validated as i64)
                .bind(&run.host.cpu_model)
                .bind(&run.host.hostname)
                .bind(device)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.sql(e))?;
                kid.push(r.last_insert_rowid());
            }
            ids.push(kid);
        }
        for p in peaks {
            sqlx::query(
                "INSERT INTO peak_results (run_id, measured_at, kind, threads, gflops, isa, cpu_info, hostname, bound_gflops, clock_ghz, clock_source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(run_id)
            .bind(&run.finished_at)
            .bind(p.kind.label())
            .bind(p.threads as i64)
            .bind(p.gflops.0)
            .bind(&p.isa)
            .bind(&run.host.cpu_model)
            .bind(&run.host.hostname)
            .bind(p.bound.gflops.0)
            .bind(p.bound.clock_ghz)
            .bind(p.bound.clock_source.name())
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
        }
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(StoredStreamRun {
            run_id,
            kernel_ids: ids,
        })
    }

    /// Inserts bench records inside `tx`, setting each record's `run_id` and `id`.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn insert_bench_rows_tx(
        &self,
        tx: &mut Transaction<'static, Sqlite>,
        run_id: i64,
        rows: &mut [BenchRecord],
    ) -> Result<(), StoreError> {
        for rec in rows.iter_mut() {
            rec.run_id = run_id;
            let fields: Vec<_> = rec
                .fields()
                .into_iter()
                .filter(|(n, _, _)| *n != "id")
                .collect();
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
            let r = q.execute(&mut **tx).await.map_err(|e| self.sql(e))?;
            rec.id = r.last_insert_rowid();
        }
        Ok(())
    }

    /// Stores a bench run and its rows in one transaction; sets ids on the rows.
    ///
    /// # Errors
    /// [`StoreError::Sql`]; nothing is written on error.
    pub async fn insert_bench_run(
        &self,
        run: &NewRun,
        rows: &mut [BenchRecord],
    ) -> Result<i64, StoreError> {
        let mut tx = self.begin().await?;
        let run_id = self.insert_run_tx(&mut tx, run).await?;
        self.insert_bench_rows_tx(&mut tx, run_id, rows).await?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(run_id)
    }

    /// Reads bench rows, oldest first.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn bench_rows(&self, f: &RowFilter) -> Result<Vec<BenchRecord>, StoreError> {
        let mut sql = "SELECT * FROM bench_results WHERE 1=1".to_string();
        if f.run_id.is_some() {
            sql.push_str(" AND run_id = ?");
        }
        if f.model.is_some() {
            sql.push_str(" AND model_filename LIKE ?");
        }
        if f.engine.is_some() {
            sql.push_str(" AND engine = ?");
        }
        if f.since.is_some() {
            sql.push_str(" AND test_time >= ?");
        }
        sql.push_str(" ORDER BY id");
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        if let Some(r) = f.run_id {
            q = q.bind(r);
        }
        if let Some(m) = &f.model {
            q = q.bind(format!("%{m}%"));
        }
        if let Some(e) = &f.engine {
            q = q.bind(e.clone());
        }
        if let Some(s) = &f.since {
            q = q.bind(s.clone());
        }
        let rows = q.fetch_all(&self.pool).await.map_err(|e| self.sql(e))?;
        rows.iter().map(|r| self.decode_bench(r)).collect()
    }

    fn decode_bench(&self, row: &SqliteRow) -> Result<BenchRecord, StoreError> {
        let example = serde_json::to_value(BenchRecord::example()).expect("serialize");
        let example = example.as_object().expect("object");
        let id: i64 = row.try_get("id").unwrap_or(-1);
        let bad = |problem: String| StoreError::Decode {
            path: self.path.display().to_string(),
            table: "bench_results",
            id,
            problem,
        };
        let mut map = serde_json::Map::new();
        for col in row.columns() {
            let name = col.name();
            let Some(proto) = example.get(name) else {
                continue;
            };
            let v: serde_json::Value = match proto {
                serde_json::Value::Bool(_) => serde_json::Value::Bool(
                    row.try_get::<i64, _>(name)
                        .map_err(|e| bad(e.to_string()))?
                        != 0,
                ),
                serde_json::Value::Array(_) => {
                    let s: String = row.try_get(name).map_err(|e| bad(e.to_string()))?;
                    serde_json::from_str(&s).map_err(|e| bad(format!("column {name}: {e}")))?
                }
                serde_json::Value::String(_) => row
                    .try_get::<Option<String>, _>(name)
                    .map_err(|e| bad(e.to_string()))?
                    .into(),
                serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => row
                    .try_get::<Option<i64>, _>(name)
                    .map_err(|e| bad(e.to_string()))?
                    .into(),
                _ => match row
                    .try_get::<Option<f64>, _>(name)
                    .map_err(|e| bad(e.to_string()))?
                {
                    Some(x) => x.into(),
                    None => serde_json::Value::Null,
                },
            };
            map.insert(name.to_string(), v);
        }
        serde_json::from_value(serde_json::Value::Object(map)).map_err(|e| bad(e.to_string()))
    }

    /// The most recent STREAM triad row on host `hostname` with `threads` threads
    /// (any thread count when `None`, preferring the most threads).
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn latest_triad(
        &self,
        hostname: &str,
        threads: Option<i64>,
    ) -> Result<Option<StoredStream>, StoreError> {
        let row = sqlx::query(
            "SELECT id, run_id, measured_at, kernel, threads, array_bytes, best_gbps, avg_gbps, hostname FROM stream_results
             WHERE kernel = 'triad' AND device = 'cpu' AND hostname = ? AND (? IS NULL OR threads = ?)
             ORDER BY measured_at DESC, threads DESC, id DESC LIMIT 1",
        )
        .bind(hostname)
        .bind(threads)
        .bind(threads)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(row.map(|r| stream_from_row(&r)))
    }

    /// The most recent STREAM triad row of GPU `device` (its label, `CUDA0 NVIDIA
    /// H200`) on host `hostname`.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn latest_device_triad(
        &self,
        hostname: &str,
        device: &str,
    ) -> Result<Option<StoredStream>, StoreError> {
        let row = sqlx::query(
            "SELECT id, run_id, measured_at, kernel, threads, array_bytes, best_gbps, avg_gbps, hostname FROM stream_results
             WHERE kernel = 'triad' AND device = ? AND hostname = ?
             ORDER BY measured_at DESC, id DESC LIMIT 1",
        )
        .bind(device)
        .bind(hostname)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(row.map(|r| stream_from_row(&r)))
    }

    /// The latest STREAM triad any accelerator (a device other than `cpu`) of
    /// `hostname` measured, with its device label.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn latest_accelerator_triad(
        &self,
        hostname: &str,
    ) -> Result<Option<(String, StoredStream)>, StoreError> {
        let row = sqlx::query(
            "SELECT id, run_id, measured_at, kernel, threads, array_bytes, best_gbps, avg_gbps, hostname, device FROM stream_results
             WHERE kernel = 'triad' AND device <> 'cpu' AND hostname = ?
             ORDER BY measured_at DESC, id DESC LIMIT 1",
        )
        .bind(hostname)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(row.map(|r| (r.get("device"), stream_from_row(&r))))
    }

    /// Every STREAM row measured in the same run as row `stream_id` (all kernels and
    /// thread counts of that measurement).
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn stream_siblings(&self, stream_id: i64) -> Result<Vec<StoredStream>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, run_id, measured_at, kernel, threads, array_bytes, best_gbps, avg_gbps, hostname FROM stream_results
             WHERE run_id = (SELECT run_id FROM stream_results WHERE id = ?) ORDER BY id",
        )
        .bind(stream_id)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(rows.iter().map(stream_from_row).collect())
    }

    /// STREAM rows, newest first (at most `limit`).
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn stream_rows(&self, limit: i64) -> Result<Vec<StoredStream>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, run_id, measured_at, kernel, threads, array_bytes, best_gbps, avg_gbps, hostname FROM stream_results ORDER BY id DESC LIMIT ?",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(rows.iter().map(stream_from_row).collect())
    }

    /// The most recent peak of `kind` on `hostname` that carries its plausibility
    /// bound (rows stored before bounds existed are not trusted as a roof: see
    /// migration 0011).
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn latest_peak(
        &self,
        hostname: &str,
        kind: &str,
    ) -> Result<Option<StoredPeak>, StoreError> {
        let row = sqlx::query(
            "SELECT id, measured_at, kind, threads, gflops, isa, bound_gflops, clock_ghz, clock_source FROM peak_results
             WHERE hostname = ? AND kind = ? AND bound_gflops IS NOT NULL AND gflops <= bound_gflops ORDER BY id DESC LIMIT 1",
        )
        .bind(hostname)
        .bind(kind)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(row.map(|r| StoredPeak {
            id: r.get("id"),
            measured_at: r.get("measured_at"),
            kind: r.get("kind"),
            threads: r.get("threads"),
            gflops: r.get("gflops"),
            isa: r.get("isa"),
            bound_gflops: r.get("bound_gflops"),
            clock_ghz: r.get("clock_ghz"),
            clock_source: r.get("clock_source"),
        }))
    }

    /// Every run, newest first.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.runs_matching(&RunFilter::default()).await
    }

    /// Stored runs that `filter` keeps ([`RunFilter`]), newest first: one query, the
    /// matching done by SQLite.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn runs_matching(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        let f = filter.normalized();
        let rows = sqlx::query(
            "SELECT r.id, r.kind, r.started_at, r.build_commit, r.command, r.hostname, r.cpu_info,
                    (SELECT COUNT(*) FROM bench_results b WHERE b.run_id = r.id) AS n,
                    (SELECT group_concat(m, '; ') FROM (SELECT DISTINCT model_filename AS m FROM bench_results b WHERE b.run_id = r.id)) AS models
             FROM runs r
             WHERE (?1 IS NULL AND ?2 IS NULL AND ?3 IS NULL)
                OR EXISTS (SELECT 1 FROM bench_results b WHERE b.run_id = r.id
                           AND (?1 IS NULL OR b.model_filename LIKE '%' || ?1 || '%')
                           AND (?2 IS NULL OR b.engine = ?2)
                           AND (?3 IS NULL OR b.test_time >= ?3))
             ORDER BY r.id DESC",
        )
        .bind(f.model)
        .bind(f.engine)
        .bind(f.since)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(rows
            .iter()
            .map(|r| RunSummary {
                id: r.get("id"),
                kind: r.get("kind"),
                started_at: r.get("started_at"),
                build_commit: r.get("build_commit"),
                command: r.get("command"),
                hostname: r.get("hostname"),
                cpu_info: r.get("cpu_info"),
                n_bench_rows: r.get("n"),
                models: r
                    .try_get::<Option<String>, _>("models")
                    .ok()
                    .flatten()
                    .unwrap_or_default(),
            })
            .collect())
    }

    /// The guard's findings stored with a run (`None`: measured nothing under the guard).
    ///
    /// # Errors
    /// [`StoreError::Sql`]; [`StoreError::NotFound`] for an unknown run.
    pub async fn run_guard(
        &self,
        run_id: i64,
    ) -> Result<Option<crate::measure::guard::GuardReport>, StoreError> {
        let json: Option<Option<String>> =
            sqlx::query_scalar("SELECT guard_json FROM runs WHERE id = ?")
                .bind(run_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| self.sql(e))?;
        let json = json.ok_or_else(|| StoreError::NotFound(format!("run {run_id}")))?;
        json.map(|j| {
            serde_json::from_str(&j).map_err(|e| StoreError::Decode {
                path: self.path.display().to_string(),
                table: "runs",
                id: run_id,
                problem: format!("guard_json: {e}"),
            })
        })
        .transpose()
    }

    /// When run `id` started (UTC RFC 3339), or `None` when there is no such run.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn run_started_at(&self, id: i64) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar("SELECT started_at FROM runs WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.sql(e))
    }

    /// Every stored frontier cell's headline value with its run and host, in insertion
    /// order.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn frontier_cell_values(&self) -> Result<Vec<FrontierCellValue>, StoreError> {
        let rows = sqlx::query(
            "SELECT c.run_id, r.hostname, c.arm_file, c.arm_quant, c.measure, c.value \
             FROM frontier_cells c JOIN runs r ON r.id = c.run_id ORDER BY c.id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(rows
            .iter()
            .map(|r| FrontierCellValue {
                run_id: r.get("run_id"),
                host: r.get("hostname"),
                arm_file: r.get("arm_file"),
                arm_quant: r.get("arm_quant"),
                measure: r.get("measure"),
                value: r.get("value"),
            })
            .collect())
    }

    /// Runs whose rows rest on run `id`: the spec-bench runs with speedup rows that
    /// a gate of run `id` unlocked (`spec_bench.gate_id`, `spec_synth.gate_id`), ascending.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub async fn dependent_runs(&self, id: i64) -> Result<Vec<i64>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.sql(e))?;
        dependents(&mut conn, id).await.map_err(|e| self.sql(e))
    }

    /// Deletes a run and (by cascade) every row that belongs to it, in one
    /// transaction. Refuses a gate run whose gates unlocked speedup rows of other
    /// runs (see [`Store::delete_run_cascade`]).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] when there is no such run; [`StoreError::Dependents`]
    /// naming the runs that rest on it (nothing is deleted then).
    pub async fn delete_run(&self, id: i64) -> Result<(), StoreError> {
        self.delete_run_with(id, false).await.map(|_| ())
    }

    /// Deletes a run together with the runs whose rows rest on it
    /// ([`Store::dependent_runs`]), in one transaction; returns those runs' ids.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] when there is no such run.
    pub async fn delete_run_cascade(&self, id: i64) -> Result<Vec<i64>, StoreError> {
        self.delete_run_with(id, true).await
    }

    async fn delete_run_with(&self, id: i64, cascade: bool) -> Result<Vec<i64>, StoreError> {
        let mut tx = self.begin().await?;
        let deps = dependents(&mut tx, id).await.map_err(|e| self.sql(e))?;
        if !deps.is_empty() && !cascade {
            return Err(StoreError::Dependents {
                path: self.path.display().to_string(),
                run: id,
                dependents: deps,
            });
        }
        for &d in &deps {
            sqlx::query("DELETE FROM runs WHERE id = ?")
                .bind(d)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.sql(e))?;
        }
        let n = sqlx::query("DELETE FROM runs WHERE id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?
            .rows_affected();
        if n == 0 {
            return Err(StoreError::NotFound(format!("no run with id {id}")));
        }
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(deps)
    }
}

async fn dependents(conn: &mut sqlx::SqliteConnection, id: i64) -> Result<Vec<i64>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT DISTINCT run_id FROM (
           SELECT b.run_id AS run_id FROM spec_bench b JOIN spec_gates g ON g.id = b.gate_id
           WHERE g.run_id = ? AND b.run_id <> ?
           UNION SELECT s.run_id AS run_id FROM spec_synth s JOIN spec_gates g ON g.id = s.gate_id
           WHERE g.run_id = ? AND s.run_id <> ?) ORDER BY run_id",
    )
    .bind(id)
    .bind(id)
    .bind(id)
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows.iter().map(|r| r.get("run_id")).collect())
}

fn stream_from_row(r: &SqliteRow) -> StoredStream {
    StoredStream {
        id: r.get("id"),
        run_id: r.get("run_id"),
        measured_at: r.get("measured_at"),
        kernel: r.get("kernel"),
        threads: r.get("threads"),
        array_bytes: r.get("array_bytes"),
        best_gbps: r.get("best_gbps"),
        avg_gbps: r.get("avg_gbps"),
        hostname: r.get("hostname"),
    }
}

#[cfg(test)]
mod tests;
