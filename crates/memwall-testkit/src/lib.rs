//! memwall's test support, a crate of its own so that it is no part of memwall-core's
//! API: the workspace's tests take it as a dev-dependency, and memwall-core's own
//! unit tests reach it through their `crate::testing` (which adds the fixtures that
//! build memwall-core's types, `host` and `new_run`).
//!
//! - [`model`] finds a catalogue model on disk; when it is absent the test is
//!   skipped with a loud message on stderr, unless `MEMWALL_REQUIRE_MODELS=1`
//!   (set by CI after fetching every model), where absence is a failure.
//! - [`engine_lock`] serializes engine tests across threads *and* processes (a file
//!   lock in the temp dir): llama.cpp's OpenMP threads collapse to a few tok/s
//!   when two engine workloads share the cores.
//! - [`PgCluster`]: a throwaway PostgreSQL cluster (`initdb` in a temp dir, `pg_ctl`
//!   on a free loopback port, its socket inside the temp dir), stopped on drop; when
//!   PostgreSQL is not installed the test is skipped loudly, unless
//!   `MEMWALL_REQUIRE_E2E=1` (CI), where that is a failure.
//! - [`skip_or_fail`]: the one way a test skips for a missing prerequisite (a loud
//!   SKIP line), or fails when the [`Requirement`] CI sets for it is on.
//! - [`fuzz`]: the GGUF mutation fuzzer (`examples/fuzz_gguf.rs` drives it) and the
//!   GGUF byte builders the reader's tests use.

pub mod fuzz;

use std::path::PathBuf;

/// A class of test prerequisite, named by the variable that `.ci/run` sets to `1` so
/// that its absence fails instead of skipping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// Catalogue models, datasets and files derived from them: `MEMWALL_REQUIRE_MODELS`.
    Models,
    /// llama.cpp's own tools (llama-bench, llama-server, compare-llama-bench.py …):
    /// `MEMWALL_REQUIRE_LLAMA_TOOLS`.
    LlamaTools,
    /// End-to-end prerequisites (python3, node, chromium, PostgreSQL, the openai
    /// client): `MEMWALL_REQUIRE_E2E`.
    E2e,
    /// Process isolation for generated code (bubblewrap): `MEMWALL_REQUIRE_SANDBOX`.
    Sandbox,
}

impl Requirement {
    /// The environment variable that turns a skip into a failure.
    pub fn var(self) -> &'static str {
        match self {
            Requirement::Models => "MEMWALL_REQUIRE_MODELS",
            Requirement::LlamaTools => "MEMWALL_REQUIRE_LLAMA_TOOLS",
            Requirement::E2e => "MEMWALL_REQUIRE_E2E",
            Requirement::Sandbox => "MEMWALL_REQUIRE_SANDBOX",
        }
    }

    /// Whether the variable is `1` here (as in CI).
    pub fn required(self) -> bool {
        std::env::var(self.var()).as_deref() == Ok("1")
    }
}

/// A test's prerequisite `what` is missing: prints a loud SKIP line naming `fix`, so
/// the caller can return; under `req`'s variable (CI) that is a failure instead.
///
/// # Panics
/// When [`Requirement::required`] holds for `req`.
pub fn skip_or_fail(req: Requirement, what: &str, fix: &str) {
    if req.required() {
        panic!("{what} is required ({}=1) but missing: {fix}", req.var());
    }
    eprintln!(
        "\n!!!!!!!! SKIP: {what} missing — {fix} (CI sets {}=1 so nothing is skipped there) !!!!!!!!\n",
        req.var()
    );
}

/// Path of catalogue model `name` when fetched. `None` (after printing a loud
/// SKIP line) when it is absent and `MEMWALL_REQUIRE_MODELS` is not `1`.
///
/// # Panics
/// When the model is absent and `MEMWALL_REQUIRE_MODELS=1`, or `name` is not in
/// the catalogue.
pub fn model(name: &str) -> Option<PathBuf> {
    let cat = memwall_core::probe::catalog::Catalog::builtin().expect("built-in catalogue parses");
    let e = cat
        .get(name)
        .unwrap_or_else(|_| panic!("{name} is not a catalogue model"));
    let p = e.path();
    if p.is_file() {
        return Some(p);
    }
    skip_or_fail(
        Requirement::Models,
        &format!("model {name} at {}", p.display()),
        &format!("run `memwall models fetch {name}` (or `memwall models fetch --all`)"),
    );
    None
}

/// A held cross-process lock; engine work is exclusive while it lives.
pub struct EngineLock {
    _guard: fd_lock::RwLockWriteGuard<'static, std::fs::File>,
}

/// Takes the engine lock (blocking until free).
///
/// # Panics
/// When the lock file cannot be opened.
pub fn engine_lock() -> EngineLock {
    let path = std::env::temp_dir().join("memwall-engine-tests.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lock: &'static mut fd_lock::RwLock<std::fs::File> =
        Box::leak(Box::new(fd_lock::RwLock::new(file)));
    EngineLock {
        _guard: lock.write().expect("engine lock"),
    }
}

/// The directory holding PostgreSQL's `initdb`, `pg_ctl` and `createdb`: where the
/// `initdb` on `PATH` really lies (links followed), else Debian's
/// `/usr/lib/postgresql/<version>/bin` (the newest version).
pub fn postgres_bin_dir() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .filter_map(|d| std::fs::canonicalize(d.join("initdb")).ok())
            .filter_map(|f| f.parent().map(PathBuf::from))
            .find(|d| d.join("pg_ctl").is_file() && d.join("createdb").is_file())
    });
    if on_path.is_some() {
        return on_path;
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, b)| b)
}

/// A throwaway PostgreSQL cluster: trust authentication for the user `memwall`,
/// listening on a free loopback port and on a socket in its own temp dir; stopped
/// (`pg_ctl stop -m immediate`) and deleted on drop.
pub struct PgCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    /// The user the server runs as when the tests run as root (PostgreSQL refuses
    /// root): `postgres`.
    run_as: Option<String>,
}

impl PgCluster {
    /// Starts a cluster, or `None` (after a loud SKIP line) when PostgreSQL is not
    /// installed and `MEMWALL_REQUIRE_E2E` is not `1`.
    ///
    /// # Panics
    /// When PostgreSQL is missing under `MEMWALL_REQUIRE_E2E=1`, or installed but the
    /// cluster does not start (the message holds the server's log).
    pub fn start() -> Option<PgCluster> {
        let Some(bin) = postgres_bin_dir() else {
            skip_or_fail(
                Requirement::E2e,
                "PostgreSQL (initdb on PATH or under /usr/lib/postgresql/*/bin)",
                "install Debian's postgresql package (scripts/setup-tests.sh does)",
            );
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("memwall-pg-")
            .tempdir()
            .expect("temp dir for the PostgreSQL cluster");
        // SAFETY: geteuid has no preconditions.
        let run_as = (unsafe { libc::geteuid() } == 0).then(|| "postgres".to_string());
        if let Some(user) = &run_as {
            let ok = std::process::Command::new("chown")
                .args(["-R", user])
                .arg(dir.path())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            assert!(
                ok,
                "chown {user} {}: the server cannot run as root",
                dir.path().display()
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let c = PgCluster {
            dir,
            bin,
            port,
            run_as,
        };
        let data = c.dir.path().join("data");
        c.pg(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-A".as_ref(),
                "trust".as_ref(),
                "-U".as_ref(),
                "memwall".as_ref(),
                "--no-sync".as_ref(),
            ],
        );
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            c.port,
            c.dir.path().display()
        );
        let log = c.dir.path().join("server.log");
        c.pg(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-o".as_ref(),
                opts.as_ref(),
                "-l".as_ref(),
                log.as_os_str(),
                "-w".as_ref(),
                "start".as_ref(),
            ],
        );
        Some(c)
    }

    /// `tool` of the cluster's PostgreSQL, as the cluster's user when the tests run as root.
    fn command(&self, tool: &str) -> std::process::Command {
        let exe = self.bin.join(tool);
        match &self.run_as {
            Some(user) => {
                let mut c = std::process::Command::new(runuser());
                c.args(["-u", user, "--"]).arg(&exe);
                c
            }
            None => std::process::Command::new(&exe),
        }
    }

    fn pg(&self, tool: &str, args: &[&std::ffi::OsStr]) {
        let mut cmd = self.command(tool);
        let out = cmd
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "{:?} {:?}: {e}",
                    cmd.get_program(),
                    cmd.get_args().collect::<Vec<_>>()
                )
            });
        if !out.status.success() {
            let log =
                std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
            panic!(
                "{tool} failed: {}\n{}\nserver log:\n{log}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// A URL of a new, empty database `name` in the cluster (created here).
    ///
    /// # Panics
    /// When `createdb` fails.
    pub fn database(&self, name: &str) -> String {
        let host = self.dir.path().display().to_string();
        let port = self.port.to_string();
        self.pg(
            "createdb",
            &[
                "-h".as_ref(),
                host.as_ref(),
                "-p".as_ref(),
                port.as_ref(),
                "-U".as_ref(),
                "memwall".as_ref(),
                name.as_ref(),
            ],
        );
        format!("postgres://memwall@127.0.0.1:{}/{name}", self.port)
    }
}

/// util-linux's `runuser`, which lives in `/usr/sbin` (not on every user's PATH).
fn runuser() -> std::path::PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(std::path::PathBuf::from))
        .map(|d| d.join("runuser"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| "runuser".into())
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .args(["-m", "immediate", "stop"])
            .output();
    }
}
