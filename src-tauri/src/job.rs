//! The single measuring slot. Measuring work (STREAM, benchmarks, chat generation,
//! a model fetch) runs one at a time: two measurements at once would corrupt each
//! other's numbers, so a second start is refused with [`Busy`] instead of running
//! twice.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The kinds of job that hold the slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// "Measure bandwidth now" (a quick STREAM, stored).
    Stream,
    /// A benchmark from the Benchmarks page.
    Bench,
    /// A chat turn.
    Chat,
    /// A catalogue model fetch.
    Fetch,
    /// A speculative correctness gate from the Speculative page.
    SpecGate,
    /// A speculative bench from the Speculative page.
    SpecBench,
    /// A load test from the Serve page.
    Loadtest,
}

impl JobKind {
    /// The name the UI and the messages use (`bench`).
    pub fn name(self) -> &'static str {
        match self {
            JobKind::Stream => "stream",
            JobKind::Bench => "bench",
            JobKind::Chat => "chat",
            JobKind::Fetch => "fetch",
            JobKind::SpecGate => "spec_gate",
            JobKind::SpecBench => "spec_bench",
            JobKind::Loadtest => "loadtest",
        }
    }
}

impl fmt::Display for JobKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Refused: a job is running.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{running} is running: wait for it to finish or cancel it before starting {asked}")]
pub struct Busy {
    /// What runs.
    pub running: JobKind,
    /// What was asked (a job's name, or `delete`).
    pub asked: &'static str,
}

#[derive(Debug)]
struct Running {
    kind: JobKind,
    cancel: Arc<AtomicBool>,
}

/// The slot: empty, or the running job with its cancel flag.
#[derive(Debug, Default)]
pub struct JobSlot {
    running: Mutex<Option<Running>>,
}

/// Holds the slot; clears it when dropped (also on error or panic).
pub struct JobGuard<'a> {
    slot: &'a JobSlot,
    /// The job's cancel flag.
    pub cancel: Arc<AtomicBool>,
}

impl Drop for JobGuard<'_> {
    fn drop(&mut self) {
        *self.slot.lock() = None;
    }
}

impl JobSlot {
    /// The slot's contents. A panic while it was held cannot leave it inconsistent
    /// (the guard clears it on unwind), so a poisoned lock is taken as it is.
    fn lock(&self) -> MutexGuard<'_, Option<Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claims the slot for `kind`.
    ///
    /// # Errors
    /// [`Busy`] naming what is running.
    pub fn start(&self, kind: JobKind) -> Result<JobGuard<'_>, Busy> {
        let mut s = self.lock();
        if let Some(r) = s.as_ref() {
            return Err(Busy {
                running: r.kind,
                asked: kind.name(),
            });
        }
        let cancel = Arc::new(AtomicBool::new(false));
        *s = Some(Running {
            kind,
            cancel: cancel.clone(),
        });
        Ok(JobGuard { slot: self, cancel })
    }

    /// The running job's kind, if any.
    pub fn running(&self) -> Option<JobKind> {
        self.lock().as_ref().map(|r| r.kind)
    }

    /// Refuses `asked` (something that must not overlap a job) while one runs.
    ///
    /// # Errors
    /// [`Busy`].
    pub fn refuse_while_running(&self, asked: &'static str) -> Result<(), Busy> {
        match self.running() {
            Some(running) => Err(Busy { running, asked }),
            None => Ok(()),
        }
    }

    /// Asks the running job of `kind` to stop; `true` when one was running.
    pub fn cancel(&self, kind: JobKind) -> bool {
        match self.lock().as_ref() {
            Some(r) if r.kind == kind => {
                r.cancel.store(true, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }
}

/// The server the Serve page runs (at most one): a slot of its own beside the
/// measuring one, held by [`crate::state::AppState`] and used by `serve.rs`.
#[derive(Default)]
pub struct ServeSlot(
    pub(crate) tokio::sync::Mutex<Option<memwall_core::experiments::serve::session::ServeSession>>,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slot_holds_one_job_and_frees_itself() {
        let slot = JobSlot::default();
        let g = slot.start(JobKind::Fetch).unwrap();
        let busy = slot.start(JobKind::Chat).err().unwrap();
        assert_eq!(
            busy.to_string(),
            "fetch is running: wait for it to finish or cancel it before starting chat"
        );
        assert_eq!(
            slot.refuse_while_running("delete").unwrap_err().to_string(),
            "fetch is running: wait for it to finish or cancel it before starting delete"
        );
        assert!(!slot.cancel(JobKind::Bench));
        assert!(slot.cancel(JobKind::Fetch));
        assert!(g.cancel.load(Ordering::Relaxed));
        drop(g);
        assert_eq!(slot.running(), None);
        assert!(slot.refuse_while_running("delete").is_ok());
        // A panic while holding the slot frees it too.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = slot.start(JobKind::Stream).unwrap();
            panic!("job failed");
        }));
        assert!(r.is_err());
        assert_eq!(slot.running(), None);
    }

    #[test]
    fn kinds_travel_as_the_names_the_ui_sends() {
        for k in [
            JobKind::Stream,
            JobKind::Bench,
            JobKind::Chat,
            JobKind::Fetch,
            JobKind::SpecGate,
            JobKind::SpecBench,
            JobKind::Loadtest,
        ] {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.name()));
            assert_eq!(serde_json::from_str::<JobKind>(&json).unwrap(), k);
        }
        assert!(serde_json::from_str::<JobKind>("\"delete\"").is_err());
    }
}
