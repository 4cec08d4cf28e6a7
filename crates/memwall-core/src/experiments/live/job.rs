//! The sampler's jobs: [`RunSampler`] beside a bench-shaped job, [`sample_job`] for
//! `memwall sample`, and [`LiveProbe`] for the tray's and Machine page's live lines.

use super::{Counter, Recording, RowEnergy, Sample, phase_name, row_energies};
use crate::experiments::progress::Progress;
use crate::experiments::{JobError, blocking};
use crate::measure::sampler::MachineSampler;
use crate::measure::sampler::session::{
    DEFAULT_HZ, EnergySummary, HZ_RANGE, IDLE_PHASE, Phase, PhaseMarker, SamplerSession,
};
use crate::store::record::BenchRecord;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long the idle baseline lasts: long enough for 30 reads at the default rate.
pub const IDLE_BASELINE: Duration = Duration::from_secs(3);

/// The sampler beside a bench-shaped job: each test (from the end of its warm-up to
/// its record) is one phase, named [`phase_name`], and each repetition's timed part
/// one interval of it; energy is integrated over the intervals.
pub struct RunSampler {
    session: SamplerSession,
    done: Arc<Mutex<Vec<String>>>,
}

impl RunSampler {
    /// Starts the machine's sampler at [`DEFAULT_HZ`].
    pub fn start() -> RunSampler {
        RunSampler {
            session: SamplerSession::start(MachineSampler::detect(), DEFAULT_HZ),
            done: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Takes the idle baseline: [`IDLE_BASELINE`] of nothing, as the phase
    /// [`IDLE_PHASE`] with one interval (call before the first test; it sleeps the
    /// calling task).
    pub async fn idle_baseline(&self) {
        idle_baseline(&self.session.marker()).await
    }

    /// `progress` with phase marks added: a phase begins at a test's repetition 0
    /// (its warm-up done) and ends at its `TestDone`; each timed repetition adds its
    /// interval.
    pub fn wrap<F: FnMut(Progress) + Send + 'static>(
        &self,
        mut progress: F,
    ) -> impl FnMut(Progress) + Send + 'static {
        let mut observe = self.observer();
        move |p: Progress| {
            observe(&p);
            progress(p)
        }
    }

    /// The phase marking of [`RunSampler::wrap`] alone, for a caller whose progress
    /// callback borrows (the frontier's speed cell): call it with every event of
    /// [`crate::experiments::bench::run_plan`].
    pub fn observer(&self) -> impl FnMut(&Progress) + Send + 'static {
        let marker: PhaseMarker = self.session.marker();
        let done = self.done.clone();
        let mut current = String::new();
        move |p: &Progress| match p {
            Progress::TestStarted { index, label, .. } => current = phase_name(*index, label),
            Progress::Repetition { rep: 0, .. } => marker.mark(&current),
            Progress::Repetition {
                rep,
                timed: Some(span),
                ..
            } => marker.span(&current, *rep, *span),
            Progress::TestDone { .. } => {
                marker.end_phase();
                if let Ok(mut d) = done.lock() {
                    d.push(current.clone());
                }
            }
            _ => {}
        }
    }

    /// Stops the sampler now, before the rows have store ids: the recording and the
    /// phase names of the finished tests in order; [`row_energies`] pairs them with
    /// the rows once they are stored.
    pub fn stop(self) -> (Recording, Vec<String>) {
        let names = self.done.lock().map(|d| d.clone()).unwrap_or_default();
        (self.session.stop(), names)
    }

    /// Stops the sampler; the recording and each row's energy (rows in the order
    /// their tests finished, with their store ids set).
    pub fn finish(self, rows: &[BenchRecord]) -> (Recording, Vec<RowEnergy>) {
        let (rec, names) = self.stop();
        let e = row_energies(&rec, rows, &names);
        (rec, e)
    }
}

/// Takes the idle baseline on any sampler session through its `marker`:
/// [`IDLE_BASELINE`] of nothing, as the phase [`IDLE_PHASE`] with one interval (call
/// before the first measured work; it sleeps the calling task).
pub async fn idle_baseline(marker: &PhaseMarker) {
    marker.mark(IDLE_PHASE);
    let t0 = std::time::Instant::now();
    tokio::time::sleep(IDLE_BASELINE).await;
    marker.interval(IDLE_PHASE, 0, t0, std::time::Instant::now());
    marker.end_phase();
}

/// Options of `memwall sample`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SampleOptions {
    /// How long to sample, s.
    pub seconds: f64,
    /// Reads per second.
    pub hz: f64,
}

/// What `memwall sample` reports as it goes.
#[derive(Debug, Clone)]
pub enum SampleEvent {
    /// The counter list (first).
    Counters(Vec<Counter>),
    /// The latest read, about once a second (boxed: a read is ~15× the other variant).
    Sample(Box<Sample>),
}

/// A finished `memwall sample`: the recording and the whole window's summary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SampleOutcome {
    /// Everything read.
    pub recording: Recording,
    /// Mean power, peak temperature, live bandwidth over the window (no tokens).
    pub summary: EnergySummary,
}

/// Reads the machine's counters for `opts.seconds` at `opts.hz`, reporting the
/// counter list, then the latest read about once a second.
///
/// # Errors
/// [`JobError::Results`] for a bad option (a rate outside [`HZ_RANGE`] or a
/// duration outside 0.1 s … 24 h); [`JobError::Join`].
pub async fn sample_job(
    opts: SampleOptions,
    mut on_event: impl FnMut(SampleEvent) + Send + 'static,
) -> Result<SampleOutcome, JobError> {
    let bad = |m: String| JobError::Results {
        path: "memwall sample".into(),
        msg: m,
    };
    if !HZ_RANGE.contains(&opts.hz) {
        return Err(bad(format!(
            "--hz {}: must be in {}…{}",
            opts.hz,
            HZ_RANGE.start(),
            HZ_RANGE.end()
        )));
    }
    if !(0.1..=86_400.0).contains(&opts.seconds) {
        return Err(bad(format!(
            "--seconds {}: must be in 0.1…86400",
            opts.seconds
        )));
    }
    blocking(move || {
        let s = SamplerSession::start(MachineSampler::detect(), opts.hz);
        on_event(SampleEvent::Counters(s.counters().to_vec()));
        s.mark("sample");
        let end = std::time::Instant::now() + Duration::from_secs_f64(opts.seconds);
        loop {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_secs(1)));
            if let Some(x) = s.latest() {
                on_event(SampleEvent::Sample(Box::new(x)));
            }
        }
        let recording = s.stop();
        let p = recording.phases.first().cloned().unwrap_or(Phase {
            name: "sample".into(),
            start_ns: 0,
            end_ns: u64::MAX,
        });
        let summary = recording.energy_over(&[(p.start_ns, p.end_ns)], 0);
        SampleOutcome { recording, summary }
    })
    .await
}

/// A sampler kept open between the tray's refreshes: each read's rates (power,
/// bandwidth) cover the time since the previous refresh. One read costs a few
/// small file reads.
pub struct LiveProbe {
    sampler: Mutex<MachineSampler>,
    counters: Vec<Counter>,
}

impl LiveProbe {
    /// Detects and starts the machine's counters.
    pub fn start() -> LiveProbe {
        let mut s = MachineSampler::detect();
        s.start();
        let counters = s.counters();
        LiveProbe {
            sampler: Mutex::new(s),
            counters,
        }
    }

    /// Reads the counters now.
    pub fn read(&self) -> Option<Sample> {
        Some(self.sampler.lock().ok()?.read())
    }

    /// The counters, available or not.
    pub fn counters(&self) -> &[Counter] {
        &self.counters
    }
}
