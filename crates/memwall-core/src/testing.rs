//! Test support for memwall-core's own unit tests: everything of the `memwall-testkit`
//! crate (models, the engine lock, PostgreSQL clusters, skips, the GGUF builders), plus
//! the fixtures that build this crate's own types. Those cannot live in the testkit: a
//! unit-test build is a second copy of memwall-core, whose types are not the ones the
//! testkit links.

pub use memwall_testkit::*;

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
