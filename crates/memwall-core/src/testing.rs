//! Helpers for tests that need real models or the engine.
//!
//! - [`model`] finds a catalogue model on disk; when it is absent the test is
//!   skipped with a loud message on stderr, unless `MEMWALL_REQUIRE_MODELS=1`
//!   (set by CI after fetching every model), where absence is a failure.
//! - [`engine_lock`] serializes engine tests across threads *and* processes (a file
//!   lock in the temp dir): llama.cpp's OpenMP threads collapse to a few tok/s
//!   when two engine workloads share the cores.
//! - [`host`] and [`new_run`]: the fixed host and run that store tests insert.

use std::path::PathBuf;

/// Path of catalogue model `name` when fetched. `None` (after printing a loud
/// SKIP line) when it is absent and `MEMWALL_REQUIRE_MODELS` is not `1`.
///
/// # Panics
/// When the model is absent and `MEMWALL_REQUIRE_MODELS=1`, or `name` is not in
/// the catalogue.
pub fn model(name: &str) -> Option<PathBuf> {
    let cat = crate::probe::catalog::Catalog::builtin().expect("built-in catalogue parses");
    let e = cat
        .get(name)
        .unwrap_or_else(|_| panic!("{name} is not a catalogue model"));
    let p = e.path();
    if p.is_file() {
        return Some(p);
    }
    if std::env::var("MEMWALL_REQUIRE_MODELS").as_deref() == Ok("1") {
        panic!(
            "model {name} is required (MEMWALL_REQUIRE_MODELS=1) but missing at {}: run `memwall models fetch --all`",
            p.display()
        );
    }
    eprintln!(
        "\n!!!!!!!! SKIP: model {name} not found at {} — run `memwall models fetch {name}` (CI sets MEMWALL_REQUIRE_MODELS=1 so nothing is skipped there) !!!!!!!!\n",
        p.display()
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

/// A fixed 2-core host named `h` (store and roof tests).
pub fn host() -> crate::probe::hw::HostInfo {
    crate::probe::hw::HostInfo {
        cpu_model: "cpu".into(),
        cores_physical: 2,
        cores_logical: 2,
        ram: crate::units::Bytes(1 << 30),
        os: "os".into(),
        kernel: "k".into(),
        arch: "x86_64".into(),
        llc: None,
        gpus: vec![],
        hostname: "h".into(),
    }
}

/// A run of `kind` on [`host`], started 2026-01-01T00:00:00Z, as the command
/// `memwall test`.
pub fn new_run(kind: &str) -> crate::store::NewRun {
    crate::store::NewRun {
        kind: kind.into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        finished_at: "2026-01-01T00:01:00Z".into(),
        command: "memwall test".into(),
        host: host(),
        notes: String::new(),
        guard: None,
    }
}
