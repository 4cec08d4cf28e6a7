//! A sampler running on its own thread beside a measurement: start → phase marks and
//! timed intervals → stop → a [`Recording`] (the time series, the phases, the timed
//! intervals, the counter list), and per phase an [`EnergySummary`] (energy per token
//! over the timed intervals only, mean power, idle power and energy above it, peak
//! temperature, throttling, live bandwidth, other processes' CPU use).
//!
//! Any job can use it: `let s = SamplerSession::start(MachineSampler::detect(), 10.0);`
//! then `s.mark("tg128")` when a test begins, `s.marker().interval("tg128", rep, t0, t1)`
//! for each repetition's timed part, `s.end_phase()` when the test ends, and `s.stop()`
//! at the end. Energy is integrated over the intervals, never over the whole phase: a
//! phase also holds untimed work (a warm-up, the depth prefill between repetitions).
//! One read costs a few small file reads (and NVML calls on a GPU machine); at 10 Hz
//! that is well under 1 % of one core.

use super::{Counter, MachineSampler, Sample};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The default rate, reads per second.
pub const DEFAULT_HZ: f64 = 10.0;
/// The rates accepted, reads per second.
pub const HZ_RANGE: std::ops::RangeInclusive<f64> = 0.2..=100.0;
/// A sensor at or above this is hot, °C (where laptop and desktop CPUs and data-centre
/// GPUs start to cut clocks).
pub const HOT_C: f64 = 85.0;
/// A clock this far below the phase's highest, while hot, is throttling.
pub const CLOCK_DROP: f64 = 0.10;
/// Reads a timed interval must hold to be integrated: the energy of an interval is
/// the counters' rate between its first and last read inside it, times its length.
pub const MIN_READS_PER_INTERVAL: usize = 2;
/// The share of the timed time that the reads inside the intervals must span (their
/// first to last read, summed over intervals) for the energy to be given.
pub const MIN_COVERAGE: f64 = 0.5;
/// The idle baseline's phase: a few seconds with nothing running, before the first
/// test.
pub const IDLE_PHASE: &str = "idle";
/// Other processes using more than this many cores (CPU time ÷ wall time) during a
/// row's timed intervals, or the hypervisor stealing as much, mark the row contended.
pub const CONTENDED_CORES: f64 = 0.25;
/// Other processes' mean SM utilisation on the GPU above this share (percent) during
/// a row's timed intervals marks the row contended.
pub const CONTENDED_GPU_PCT: f64 = 10.0;

/// A named span of the run (a test's timed part), times since the sampler started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Phase {
    /// Name, e.g. `tg128` or `3 tg128`.
    pub name: String,
    /// Start, ns since the sampler started.
    #[ts(type = "number")]
    pub start_ns: u64,
    /// End, ns since the sampler started.
    #[ts(type = "number")]
    pub end_ns: u64,
}

/// The timed part of one repetition of a phase (the span its tok/s is computed
/// over), ns since the sampler started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Interval {
    /// The phase it belongs to.
    pub phase: String,
    /// Repetition, 1-based (0 for a phase timed once, such as the idle baseline).
    pub rep: u32,
    /// Start, ns since the sampler started.
    #[ts(type = "number")]
    pub start_ns: u64,
    /// End, ns since the sampler started.
    #[ts(type = "number")]
    pub end_ns: u64,
}

/// A timed span in ns since [`crate::util::epoch`] (how a job's timing loop hands its
/// repetitions' start and end to the sampler across threads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
pub struct TimedSpan {
    /// Start, ns since the process epoch.
    #[ts(type = "number")]
    pub start_ns: u64,
    /// End, ns since the process epoch.
    #[ts(type = "number")]
    pub end_ns: u64,
}

impl TimedSpan {
    /// The span from `start` to `end`.
    pub fn between(start: Instant, end: Instant) -> TimedSpan {
        let e = crate::util::epoch();
        let ns = |i: Instant| i.saturating_duration_since(e).as_nanos() as u64;
        TimedSpan {
            start_ns: ns(start),
            end_ns: ns(end).max(ns(start)),
        }
    }

    /// Its length, ns.
    pub fn len_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// What a session recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Recording {
    /// Reads per second asked for.
    pub hz: f64,
    /// Every read, in time order.
    pub samples: Vec<Sample>,
    /// The marked phases, in order.
    pub phases: Vec<Phase>,
    /// The timed intervals, in order.
    #[serde(default)]
    pub intervals: Vec<Interval>,
    /// The machine's counters, available or not.
    pub counters: Vec<Counter>,
}

/// Energy and thermals of one phase's timed intervals. `None` figures carry their
/// reason in [`EnergySummary::reason`] (energy) or are simply unmeasured (no sensor).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct EnergySummary {
    /// Reads inside the timed intervals.
    #[ts(type = "number")]
    pub samples: u64,
    /// Mean power over the timed intervals (energy ÷ timed time), W.
    pub mean_power_w: Option<f64>,
    /// Energy of the timed work: per interval, the counters' rate between its first
    /// and last read inside it × its length, summed, J.
    pub energy_j: Option<f64>,
    /// Energy per generated or processed token, J/token.
    pub j_per_token: Option<f64>,
    /// Tokens per watt-hour (3600 ÷ J/token).
    pub tokens_per_wh: Option<f64>,
    /// Which counters the energy sums (`RAPL package + RAPL DRAM`, `NVML GPU energy`).
    pub energy_source: String,
    /// What the energy covers: `CPU package`, `CPU package + DRAM`, `GPU board`, or
    /// CPU and GPU together; empty without energy.
    #[serde(default)]
    pub energy_scope: String,
    /// Why there is no energy, when there is none.
    pub reason: Option<String>,
    /// The tokens the energy is divided by.
    #[serde(default)]
    #[ts(type = "number")]
    pub tokens: u64,
    /// Timed time: the intervals' lengths summed, ns.
    #[serde(default)]
    #[ts(type = "number")]
    pub timed_ns: u64,
    /// The part of the timed time between the first and last read inside each
    /// interval, summed, ns (what the counters' rates were read over).
    #[serde(default)]
    #[ts(type = "number")]
    pub covered_ns: u64,
    /// Mean power of the run's idle baseline over the same counters, W; `None` without
    /// a baseline or without energy.
    #[serde(default)]
    pub idle_power_w: Option<f64>,
    /// (energy − idle power × timed time) ÷ tokens, J/token.
    #[serde(default)]
    pub j_per_token_above_idle: Option<f64>,
    /// Other processes' CPU use during the intervals (their CPU time ÷ wall time over
    /// the covered part), cores; `None` where `/proc` gives no CPU times.
    #[serde(default)]
    pub other_cpu_cores: Option<f64>,
    /// CPU time the hypervisor gave other guests during the intervals, cores.
    #[serde(default)]
    pub steal_cores: Option<f64>,
    /// Other processes' SM utilisation on the busiest GPU during the intervals,
    /// percent (mean of the reads inside them); `None` without NVML's process query.
    #[serde(default)]
    pub other_gpu_util_pct: Option<f64>,
    /// Hottest reading in the phase (CPU or GPU), °C.
    pub peak_temp_c: Option<f64>,
    /// A clock fell more than [`CLOCK_DROP`] below the phase's highest while a
    /// sensor read ≥ [`HOT_C`]; `None` without both a temperature and a clock.
    pub throttled: Option<bool>,
    /// Mean live DRAM traffic from the uncore counters, GB/s.
    pub live_dram_gbps: Option<f64>,
    /// Mean GPU memory-controller utilisation, %.
    pub gpu_mem_util_pct: Option<f64>,
}

struct Shared {
    phases: Vec<Phase>,
    intervals: Vec<Interval>,
    open: Option<(String, u64)>,
    latest: Option<Sample>,
}

/// Marks phases of a running [`SamplerSession`]; cheap to clone and `Send`.
#[derive(Clone)]
pub struct PhaseMarker {
    shared: Arc<Mutex<Shared>>,
    t0: Instant,
}

impl PhaseMarker {
    /// Begins phase `name` now (ending the open one).
    pub fn mark(&self, name: &str) {
        let t = self.t0.elapsed().as_nanos() as u64;
        if let Ok(mut g) = self.shared.lock() {
            if let Some((n, s)) = g.open.take() {
                g.phases.push(Phase {
                    name: n,
                    start_ns: s,
                    end_ns: t,
                });
            }
            g.open = Some((name.to_string(), t));
        }
    }

    /// Ends the open phase now.
    pub fn end_phase(&self) {
        let t = self.t0.elapsed().as_nanos() as u64;
        if let Ok(mut g) = self.shared.lock()
            && let Some((n, s)) = g.open.take()
        {
            g.phases.push(Phase {
                name: n,
                start_ns: s,
                end_ns: t,
            });
        }
    }

    /// Records repetition `rep` of phase `phase` as timed from `start` to `end`.
    pub fn interval(&self, phase: &str, rep: u32, start: Instant, end: Instant) {
        let ns = |i: Instant| i.saturating_duration_since(self.t0).as_nanos() as u64;
        let (a, b) = (ns(start), ns(end));
        if let Ok(mut g) = self.shared.lock() {
            g.intervals.push(Interval {
                phase: phase.to_string(),
                rep,
                start_ns: a,
                end_ns: b.max(a),
            });
        }
    }

    /// Applies `ev` (a phase mark or a timed span).
    pub fn apply(&self, ev: PhaseEvent<'_>) {
        match ev {
            PhaseEvent::Begin(n) => self.mark(n),
            PhaseEvent::Timed { phase, rep, span } => self.span(phase, rep, span),
            PhaseEvent::End => self.end_phase(),
        }
    }

    /// [`PhaseMarker::interval`] from a span in ns since the process epoch.
    pub fn span(&self, phase: &str, rep: u32, s: TimedSpan) {
        self.interval(
            phase,
            rep,
            crate::util::epoch_instant(s.start_ns),
            crate::util::epoch_instant(s.end_ns),
        )
    }
}

/// What a timing loop on another thread tells the sampler: a phase begins, one of
/// its repetitions was timed over a span, the phase ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PhaseEvent<'a> {
    /// Phase `name` begins (ending the open one).
    Begin(&'a str),
    /// Repetition `rep` of phase `phase` was timed over `span`.
    Timed {
        phase: &'a str,
        /// Repetition (or prompt) within the phase, 1-based.
        rep: u32,
        /// The timed span.
        span: TimedSpan,
    },
    /// The open phase ends.
    End,
}

impl PhaseEvent<'_> {
    /// `Some(Some(name))` for a begin, `Some(None)` for an end, `None` for a timed
    /// span: the phase marks alone.
    pub fn mark(&self) -> Option<Option<&str>> {
        match self {
            PhaseEvent::Begin(n) => Some(Some(n)),
            PhaseEvent::End => Some(None),
            PhaseEvent::Timed { .. } => None,
        }
    }
}

/// A sampler running on a thread.
pub struct SamplerSession {
    stop: Arc<AtomicBool>,
    shared: Arc<Mutex<Shared>>,
    t0: Instant,
    handle: Option<JoinHandle<Vec<Sample>>>,
    counters: Vec<Counter>,
    hz: f64,
}

impl SamplerSession {
    /// Starts `sampler` at `hz` reads per second (clamped to [`HZ_RANGE`]) on a
    /// new thread; the first read happens now.
    pub fn start(mut sampler: MachineSampler, hz: f64) -> SamplerSession {
        let hz = hz.clamp(*HZ_RANGE.start(), *HZ_RANGE.end());
        let counters = sampler.counters();
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Mutex::new(Shared {
            phases: vec![],
            intervals: vec![],
            open: None,
            latest: None,
        }));
        sampler.start();
        // The process epoch (TimedSpan's timebase) is fixed no later than the session
        // starts, so every span timed during the session lies after it.
        crate::util::epoch();
        let t0 = Instant::now();
        let (st, sh) = (stop.clone(), shared.clone());
        let period = Duration::from_secs_f64(1.0 / hz);
        let handle = std::thread::Builder::new()
            .name("memwall-sampler".into())
            .spawn(move || {
                let mut out = Vec::new();
                let mut next = Instant::now();
                loop {
                    let s = sampler.read();
                    if let Ok(mut g) = sh.lock() {
                        g.latest = Some(s.clone());
                    }
                    out.push(s);
                    if st.load(Ordering::Relaxed) {
                        break;
                    }
                    next += period;
                    let now = Instant::now();
                    if next > now {
                        // Sleep in short steps so stop() returns quickly.
                        while Instant::now() < next && !st.load(Ordering::Relaxed) {
                            std::thread::sleep(
                                (next - Instant::now()).min(Duration::from_millis(20)),
                            );
                        }
                    } else {
                        next = now;
                    }
                }
                sampler.stop();
                out
            })
            .ok();
        SamplerSession {
            stop,
            shared,
            t0,
            handle,
            counters,
            hz,
        }
    }

    /// Begins phase `name` now (ending the open one).
    pub fn mark(&self, name: &str) {
        self.marker().mark(name)
    }

    /// Ends the open phase now.
    pub fn end_phase(&self) {
        self.marker().end_phase()
    }

    /// A handle that marks phases from another thread (a job's progress callback).
    pub fn marker(&self) -> PhaseMarker {
        PhaseMarker {
            shared: self.shared.clone(),
            t0: self.t0,
        }
    }

    /// The latest read (for live views).
    pub fn latest(&self) -> Option<Sample> {
        self.shared.lock().ok()?.latest.clone()
    }

    /// The counters, available or not.
    pub fn counters(&self) -> &[Counter] {
        &self.counters
    }

    /// Stops the thread (after one last read) and returns what it recorded.
    pub fn stop(mut self) -> Recording {
        self.end_phase();
        self.stop.store(true, Ordering::Relaxed);
        let samples = self
            .handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let (phases, intervals) = self
            .shared
            .lock()
            .map(|mut g| {
                (
                    std::mem::take(&mut g.phases),
                    std::mem::take(&mut g.intervals),
                )
            })
            .unwrap_or_default();
        Recording {
            hz: self.hz,
            samples,
            phases,
            intervals,
            counters: std::mem::take(&mut self.counters),
        }
    }
}

impl Drop for SamplerSession {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

impl Recording {
    /// The phase named `name` (the first, when repeated).
    pub fn phase(&self, name: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == name)
    }

    /// The reads inside `[start_ns, end_ns]`.
    pub fn samples_in(&self, p: &Phase) -> Vec<&Sample> {
        self.samples
            .iter()
            .filter(|s| s.t_ns >= p.start_ns && s.t_ns <= p.end_ns)
            .collect()
    }

    /// The timed intervals of phase `name`, as `(start_ns, end_ns)`.
    pub fn windows(&self, name: &str) -> Vec<(u64, u64)> {
        self.intervals
            .iter()
            .filter(|i| i.phase == name)
            .map(|i| (i.start_ns, i.end_ns))
            .collect()
    }

    /// The energy of phase `name` over its timed intervals ([`Recording::energy_over`]).
    pub fn energy(&self, name: &str, tokens: u64) -> EnergySummary {
        self.energy_over(&self.windows(name), tokens)
    }

    /// Energy, thermals and contention over the timed `windows` (ns since the
    /// sampler started), whose work produced `tokens`.
    ///
    /// Per window, only the reads inside it count: each energy source's rate between
    /// the window's first and last read (a counter delta ÷ the time between them; for
    /// a GPU without NVML's energy counter, the mean board power of those reads) times
    /// the window's length. Energy = the sum over windows and sources; mean power =
    /// energy ÷ timed time; J/token = energy ÷ `tokens`; tokens per Wh = 3600 ÷ J/token.
    /// The energy is `None`, with the reason, when no energy counter exists, when a
    /// window holds fewer than [`MIN_READS_PER_INTERVAL`] reads, or when the reads
    /// span less than [`MIN_COVERAGE`] of the timed time: such windows are too short
    /// for the sampler's rate, and a figure from the power around them would be the
    /// untimed work's. A source enters only when it answered in every window.
    ///
    /// The idle power is the same integral over the [`IDLE_PHASE`] intervals, for the
    /// same sources; J/token above idle = (energy − idle power × timed time) ÷ tokens.
    /// Other processes' CPU use = Σ (Δ busy − Δ own CPU time) ÷ Σ covered time over
    /// the windows' first and last reads, in cores; steal likewise.
    pub fn energy_over(&self, windows: &[(u64, u64)], tokens: u64) -> EnergySummary {
        let timed_ns: u64 = windows.iter().map(|(a, b)| b.saturating_sub(*a)).sum();
        let inside: Vec<Vec<&Sample>> = windows
            .iter()
            .map(|&(a, b)| {
                self.samples
                    .iter()
                    .filter(|s| s.t_ns >= a && s.t_ns <= b)
                    .collect()
            })
            .collect();
        let reads = inside.iter().map(Vec::len).sum::<usize>();
        let covered_ns: u64 = inside
            .iter()
            .filter(|v| v.len() >= MIN_READS_PER_INTERVAL)
            .map(|v| v[v.len() - 1].t_ns - v[0].t_ns)
            .sum();
        let (energy, sources, reason) = self.integrate(windows, &inside, timed_ns, covered_ns);
        let energy_j = energy;
        let timed_s = timed_ns as f64 / 1e9;
        let mean_power_w = energy_j.filter(|_| timed_ns > 0).map(|e| e / timed_s);
        let j_per_token = energy_j.filter(|_| tokens > 0).map(|e| e / tokens as f64);
        let tokens_per_wh = j_per_token.filter(|j| *j > 0.0).map(|j| 3600.0 / j);
        let idle_power_w = energy_j.and_then(|_| self.idle_power(&sources));
        let j_per_token_above_idle = match (energy_j, idle_power_w) {
            (Some(e), Some(w)) => above_idle(e, w, timed_s, tokens),
            _ => None,
        };
        let all: Vec<&Sample> = inside.iter().flatten().copied().collect();
        let peak_temp_c = all
            .iter()
            .flat_map(|s| [s.cpu_temp_c, s.gpu_temp_c])
            .flatten()
            .reduce(f64::max);
        type Pair = fn(&Sample) -> (Option<f64>, Option<f64>);
        let pairs: [Pair; 2] = [
            |s| (s.cpu_temp_c, s.cpu_mhz),
            |s| (s.gpu_temp_c, s.gpu_sm_mhz),
        ];
        let mut throttled = None;
        for get in pairs {
            let known: Vec<(f64, f64)> = all
                .iter()
                .filter_map(|s| match get(s) {
                    (Some(t), Some(m)) => Some((t, m)),
                    _ => None,
                })
                .collect();
            if known.is_empty() {
                continue;
            }
            let top = known.iter().map(|k| k.1).fold(f64::MIN, f64::max);
            let seen = known
                .iter()
                .any(|&(t, m)| t >= HOT_C && m < (1.0 - CLOCK_DROP) * top);
            throttled = Some(throttled.unwrap_or(false) || seen);
        }
        let (other_cpu_cores, steal_cores) = contention(&inside);
        EnergySummary {
            samples: reads as u64,
            mean_power_w,
            energy_j,
            j_per_token,
            tokens_per_wh,
            energy_source: sources
                .iter()
                .map(|s| s.source)
                .collect::<Vec<_>>()
                .join(" + "),
            energy_scope: scope(&sources),
            reason,
            tokens,
            timed_ns,
            covered_ns,
            idle_power_w,
            j_per_token_above_idle,
            peak_temp_c,
            throttled,
            live_dram_gbps: mean(all.iter().filter_map(|s| s.dram_gbps)),
            gpu_mem_util_pct: mean(all.iter().filter_map(|s| s.gpu_mem_util_pct)),
            other_cpu_cores,
            steal_cores,
            other_gpu_util_pct: mean(all.iter().filter_map(|s| s.gpu_other_util_pct)),
        }
    }

    /// The energy over `windows` (reads `inside` each), the sources it sums, and the
    /// reason when there is none.
    fn integrate(
        &self,
        windows: &[(u64, u64)],
        inside: &[Vec<&Sample>],
        timed_ns: u64,
        covered_ns: u64,
    ) -> (Option<f64>, Vec<Source>, Option<String>) {
        let energy_counters: Vec<&Counter> = self
            .counters
            .iter()
            .filter(|c| {
                matches!(
                    c.name.as_str(),
                    "cpu_package_energy" | "dram_energy" | "gpu_energy" | "gpu_power"
                )
            })
            .collect();
        if !energy_counters.iter().any(|c| c.available) {
            let why = energy_counters
                .iter()
                .filter_map(|c| c.reason.as_deref().map(|r| format!("{}: {r}", c.name)))
                .collect::<Vec<_>>()
                .join("; ");
            let why = if why.is_empty() {
                "no energy counter on this machine".to_string()
            } else {
                why
            };
            return (None, vec![], Some(why));
        }
        if windows.is_empty() || timed_ns == 0 {
            return (None, vec![], Some("no timed interval recorded".into()));
        }
        if let Some((i, v)) = inside
            .iter()
            .enumerate()
            .find(|(_, v)| v.len() < MIN_READS_PER_INTERVAL)
        {
            let (a, b) = windows[i];
            return (
                None,
                vec![],
                Some(format!(
                    "timed interval {} of {} lasts {:.3} s and holds {} read(s) at {} Hz: too short to integrate (each needs {MIN_READS_PER_INTERVAL} reads inside)",
                    i + 1,
                    windows.len(),
                    (b - a) as f64 / 1e9,
                    v.len(),
                    self.hz
                )),
            );
        }
        let coverage = covered_ns as f64 / timed_ns as f64;
        if coverage < MIN_COVERAGE {
            return (
                None,
                vec![],
                Some(format!(
                    "the reads inside the timed intervals span {:.0} % of their {:.3} s (needs {:.0} %): too sparse at {} Hz to integrate",
                    coverage * 100.0,
                    timed_ns as f64 / 1e9,
                    MIN_COVERAGE * 100.0,
                    self.hz
                )),
            );
        }
        let (joules, sources, backwards) = sum_sources(windows, inside, &SOURCES);
        if let Some(j) = backwards {
            return (
                None,
                vec![],
                Some(format!(
                    "energy counters went backwards ({j:.3} J): a misread"
                )),
            );
        }
        if sources.is_empty() {
            return (
                None,
                vec![],
                Some("no energy counter answered in every timed interval".into()),
            );
        }
        (Some(joules), sources, None)
    }

    /// Mean power of the idle baseline ([`IDLE_PHASE`]) over exactly `sources`;
    /// `None` without a baseline, or when one of them did not answer in it.
    pub fn idle_power(&self, sources: &[Source]) -> Option<f64> {
        let windows = self.windows(IDLE_PHASE);
        if windows.is_empty() || sources.is_empty() {
            return None;
        }
        let inside: Vec<Vec<&Sample>> = windows
            .iter()
            .map(|&(a, b)| {
                self.samples
                    .iter()
                    .filter(|s| s.t_ns >= a && s.t_ns <= b)
                    .collect()
            })
            .collect();
        if inside.iter().any(|v| v.len() < MIN_READS_PER_INTERVAL) {
            return None;
        }
        let (joules, used, backwards) = sum_sources(&windows, &inside, sources);
        let timed_ns: u64 = windows.iter().map(|(a, b)| b - a).sum();
        (backwards.is_none() && used.len() == sources.len() && timed_ns > 0)
            .then(|| joules / (timed_ns as f64 / 1e9))
    }
}

/// One energy source of the series: how to read it, its counter, its scope.
#[derive(Debug, Clone, Copy)]
pub struct Source {
    /// The counter's name in the energy source column.
    pub source: &'static str,
    /// What it covers: `CPU package`, `DRAM`, `GPU board`.
    pub scope: &'static str,
    /// Cumulative energy since start, J (an energy counter) …
    energy: Option<fn(&Sample) -> Option<f64>>,
    /// … or power at the read, W (integrated as mean power × time).
    power: Option<fn(&Sample) -> Option<f64>>,
}

/// The sources in the order they are summed. The GPU's board power enters only where
/// NVML gives no energy counter (pre-Volta GPUs): the two cover the same board.
pub const SOURCES: [Source; 4] = [
    Source {
        source: "RAPL package",
        scope: "CPU package",
        energy: Some(|s| s.cpu_energy_j),
        power: None,
    },
    Source {
        source: "RAPL DRAM",
        scope: "DRAM",
        energy: Some(|s| s.dram_energy_j),
        power: None,
    },
    Source {
        source: "NVML GPU energy",
        scope: "GPU board",
        energy: Some(|s| s.gpu_energy_j),
        power: None,
    },
    Source {
        source: "NVML GPU power",
        scope: "GPU board",
        energy: None,
        power: Some(|s| s.gpu_power_w),
    },
];

/// Σ over `windows` of each source's energy (rate between the first and last read
/// inside × length); sources that did not answer in every window are left out, and a
/// board power is left out when the same board's energy counter entered. Returns the
/// total, the sources used, and the total of a source whose counter went backwards.
fn sum_sources(
    windows: &[(u64, u64)],
    inside: &[Vec<&Sample>],
    sources: &[Source],
) -> (f64, Vec<Source>, Option<f64>) {
    let mut total = 0.0;
    let mut used: Vec<Source> = Vec::new();
    for src in sources {
        if used.iter().any(|u| u.scope == src.scope) {
            continue;
        }
        let mut sum = 0.0;
        let mut every = true;
        for (&(a, b), v) in windows.iter().zip(inside) {
            let len_s = (b - a) as f64 / 1e9;
            let (first, last) = (v[0], v[v.len() - 1]);
            let part = if let Some(get) = src.energy {
                match (get(first), get(last)) {
                    (Some(x), Some(y)) if last.t_ns > first.t_ns => {
                        Some((y - x) / ((last.t_ns - first.t_ns) as f64 / 1e9) * len_s)
                    }
                    _ => None,
                }
            } else if let Some(get) = src.power {
                mean(v.iter().filter_map(|s| get(s))).map(|w| w * len_s)
            } else {
                None
            };
            match part {
                Some(p) => sum += p,
                None => {
                    every = false;
                    break;
                }
            }
        }
        if !every {
            continue;
        }
        if sum < 0.0 {
            return (0.0, vec![], Some(sum));
        }
        total += sum;
        used.push(*src);
    }
    (total, used, None)
}

/// `CPU package + DRAM`, `GPU board`, … from the sources used.
fn scope(sources: &[Source]) -> String {
    sources
        .iter()
        .map(|s| s.scope)
        .collect::<Vec<_>>()
        .join(" + ")
}

/// Other processes' CPU use and steal over the windows' reads, cores: Σ (Δ busy −
/// Δ own) ÷ Σ Δt and Σ Δ steal ÷ Σ Δt between each window's first and last read.
fn contention(inside: &[Vec<&Sample>]) -> (Option<f64>, Option<f64>) {
    let (mut others, mut steal, mut secs) = (0.0, 0.0, 0.0);
    for v in inside.iter().filter(|v| v.len() >= MIN_READS_PER_INTERVAL) {
        let (a, b) = (v[0], v[v.len() - 1]);
        if let (Some(b0), Some(b1), Some(o0), Some(o1), Some(s0), Some(s1)) = (
            a.cpu_busy_s,
            b.cpu_busy_s,
            a.own_cpu_s,
            b.own_cpu_s,
            a.cpu_steal_s,
            b.cpu_steal_s,
        ) {
            others += (b1 - b0) - (o1 - o0);
            steal += s1 - s0;
            secs += (b.t_ns - a.t_ns) as f64 / 1e9;
        }
    }
    if secs > 0.0 {
        (non_negative(others / secs), non_negative(steal / secs))
    } else {
        (None, None)
    }
}

/// J/token above the idle baseline: (energy − idle W × timed s) ÷ tokens; `None` when
/// no token was produced or the row drew less than the baseline (then the baseline is
/// not this row's floor, and a negative figure would not be a measurement).
pub fn above_idle(energy_j: f64, idle_w: f64, timed_s: f64, tokens: u64) -> Option<f64> {
    let above = energy_j - idle_w * timed_s;
    (tokens > 0 && above >= 0.0).then(|| above / tokens as f64)
}

/// How far below zero a share of cores may read from the kernel's tick counters
/// (`/proc/stat` against `/proc/self/stat`, in 1/USER_HZ steps, read one after the
/// other) before the two counters are taken to disagree: 0.1 core, ten ticks a second.
/// A share read on an H100 host (16 cores, 0.05 s intervals) came out −0.03.
pub const TICK_SLACK_CORES: f64 = 0.1;

/// A share of cores as measured: a small negative (the counters' resolution) is 0,
/// one below [`TICK_SLACK_CORES`] is not a measurement (`None`): nothing uses
/// negative CPU time.
fn non_negative(cores: f64) -> Option<f64> {
    if cores >= 0.0 {
        Some(cores)
    } else if cores >= -TICK_SLACK_CORES {
        Some(0.0)
    } else {
        None
    }
}

impl EnergySummary {
    /// `contended: other processes used 61 % of a core during this test` when other
    /// processes (or the hypervisor's other guests) used more than
    /// [`CONTENDED_CORES`] during the timed intervals.
    pub fn contended(&self) -> Option<String> {
        let o = self.other_cpu_cores.filter(|c| *c > CONTENDED_CORES);
        let s = self.steal_cores.filter(|c| *c > CONTENDED_CORES);
        let mut parts = Vec::new();
        if let Some(c) = o {
            parts.push(format!("other processes used {:.0} % of a core", c * 100.0));
        }
        if let Some(c) = s {
            parts.push(format!(
                "the hypervisor gave {:.0} % of a core to other guests",
                c * 100.0
            ));
        }
        if let Some(u) = self.other_gpu_util_pct.filter(|u| *u > CONTENDED_GPU_PCT) {
            parts.push(format!("other processes kept the GPU's SMs {u:.0} % busy"));
        }
        (!parts.is_empty()).then(|| format!("{} during the timed repetitions", parts.join(" and ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::sampler::{Sampler, linux::LinuxSampler};

    /// The package energy counter at `t`, J: ∫ power, in closed form per piece. Power:
    /// idle 10 W for 0–1 s, untimed work (warm-up, depth prefill) at 100 W for 1–2,
    /// 4–5 and 7–8 s, the timed repetitions at 20 W for 2–4 and 5–7 s.
    fn joules_at(t: f64) -> f64 {
        let pieces = [
            (0.0, 1.0, 10.0),
            (1.0, 2.0, 100.0),
            (2.0, 4.0, 20.0),
            (4.0, 5.0, 100.0),
            (5.0, 7.0, 20.0),
            (7.0, 100.0, 100.0),
        ];
        pieces
            .iter()
            .map(|&(a, b, w): &(f64, f64, f64)| w * (t.min(b) - a).max(0.0))
            .sum()
    }

    /// Reads every 0.5 s from 0 to 8 s, with the package counter, a temperature and
    /// a clock, and CPU times: the machine busy 1.8 cores, memwall 1.2, steal 0.1.
    fn series() -> Vec<Sample> {
        (0..=16)
            .map(|i| {
                let t = i as f64 * 0.5;
                Sample {
                    t_ns: (t * 1e9).round() as u64,
                    cpu_energy_j: Some(joules_at(t)),
                    cpu_temp_c: Some(50.0 + t),
                    cpu_mhz: Some(3000.0),
                    cpu_busy_s: Some(1.8 * t),
                    own_cpu_s: Some(1.2 * t),
                    cpu_steal_s: Some(0.1 * t),
                    ..Sample::default()
                }
            })
            .collect()
    }

    fn ns(s: f64) -> u64 {
        (s * 1e9).round() as u64
    }

    fn rec(samples: Vec<Sample>, energy: bool, intervals: &[(&str, u32, f64, f64)]) -> Recording {
        let c = |n: &str| match energy {
            true => Counter::available(n, "fixture"),
            false => Counter::unavailable(n, "fixture", "RAPL not readable in this VM"),
        };
        Recording {
            hz: 2.0,
            samples,
            phases: vec![Phase {
                name: "#0 tg128".into(),
                start_ns: ns(1.0),
                end_ns: ns(8.0),
            }],
            intervals: intervals
                .iter()
                .map(|&(p, rep, a, b)| Interval {
                    phase: p.into(),
                    rep,
                    start_ns: ns(a),
                    end_ns: ns(b),
                })
                .collect(),
            counters: vec![c("cpu_package_energy"), c("dram_energy")],
        }
    }

    #[test]
    fn energy_counts_the_timed_intervals_only() {
        // Two repetitions timed 2.2–3.9 s and 5.2–6.9 s (1.7 s each). Inside each the
        // reads at 2.5, 3.0, 3.5 (and 5.5, 6.0, 6.5) see 20 W: 20 J over 1.0 s, so
        // 20 W × 1.7 s = 34 J per repetition, 68 J over 3.4 s timed, 256 tokens:
        // 68 / 256 = 0.265625 J/token. Idle 0–1 s: 10 J in 1 s = 10 W; above idle
        // (68 − 10 × 3.4) / 256 = 0.1328125 J/token. The phase (1–8 s) holds 380 J in
        // 7 s: the old "phase mean power × timed time" gave 54.29 W × 3.4 s = 184.6 J,
        // 2.7× too much, all of it from the untimed prefills.
        let r = rec(
            series(),
            true,
            &[
                ("idle", 0, 0.0, 1.0),
                ("#0 tg128", 1, 2.2, 3.9),
                ("#0 tg128", 2, 5.2, 6.9),
            ],
        );
        let e = r.energy("#0 tg128", 256);
        assert_eq!(e.samples, 6);
        assert_eq!(e.timed_ns, ns(3.4));
        assert_eq!(e.covered_ns, ns(2.0));
        assert!((e.energy_j.unwrap() - 68.0).abs() < 1e-6, "{e:?}");
        assert!((e.mean_power_w.unwrap() - 20.0).abs() < 1e-6);
        assert!((e.j_per_token.unwrap() - 0.265625).abs() < 1e-8);
        assert!((e.tokens_per_wh.unwrap() - 3600.0 / 0.265625).abs() < 1e-3);
        assert!((e.idle_power_w.unwrap() - 10.0).abs() < 1e-6);
        assert!((e.j_per_token_above_idle.unwrap() - 0.1328125).abs() < 1e-8);
        assert_eq!(e.energy_source, "RAPL package");
        assert_eq!(e.energy_scope, "CPU package");
        assert_eq!(e.tokens, 256);
        assert_eq!(e.reason, None);
        // Hottest read inside the intervals: 50 + 6.5.
        assert_eq!(e.peak_temp_c, Some(56.5));
        assert_eq!(e.throttled, Some(false));
        // Others: (1.8 − 1.2) cores; steal 0.1 core.
        assert!((e.other_cpu_cores.unwrap() - 0.6).abs() < 1e-9);
        assert!((e.steal_cores.unwrap() - 0.1).abs() < 1e-9);
        assert_eq!(
            e.contended().unwrap(),
            "other processes used 60 % of a core during the timed repetitions"
        );
        // The phase mean the old formula used, for the record above.
        let phase_w = (joules_at(8.0) - joules_at(1.0)) / 7.0;
        assert!((phase_w * 3.4 - 184.571_428).abs() < 1e-3);
    }

    #[test]
    fn a_share_of_cores_below_zero_is_zero_within_the_tick_slack_and_absent_beyond() {
        // memwall's own CPU time grows faster than the whole machine's busy time by
        // 0.05 core (tick rounding): others read 0; by 0.5 core: the counters disagree.
        for (excess, want) in [(0.05, Some(0.0)), (0.5, None)] {
            let mut v = series();
            for s in &mut v {
                let t = s.t_ns as f64 / 1e9;
                s.own_cpu_s = Some((1.8 + excess) * t);
            }
            let r = rec(v, true, &[("#0 tg128", 1, 2.2, 3.9)]);
            let e = r.energy("#0 tg128", 10);
            assert_eq!(e.other_cpu_cores, want, "excess {excess}");
            assert_eq!(e.contended(), None);
            // Steal is read the same way and stays as measured (0.1 core).
            assert!((e.steal_cores.unwrap() - 0.1).abs() < 1e-9);
        }
        assert_eq!(non_negative(0.3), Some(0.3));
    }

    #[test]
    fn energy_above_idle_is_absent_where_the_row_drew_less_than_the_baseline() {
        // 68 J over 3.4 s for 256 tokens: 10 W idle leaves 34 J (0.1328125 J/token);
        // 25 W idle would leave −17 J: no figure.
        assert_eq!(above_idle(68.0, 10.0, 3.4, 256), Some(0.1328125));
        assert_eq!(above_idle(68.0, 20.0, 3.4, 256), Some(0.0));
        assert_eq!(above_idle(68.0, 25.0, 3.4, 256), None);
        assert_eq!(above_idle(68.0, 10.0, 3.4, 0), None);
    }

    #[test]
    fn a_short_or_sparse_interval_has_no_energy_and_says_why() {
        // 2.2–2.45 s holds no read at 2 Hz.
        let r = rec(series(), true, &[("#0 tg128", 1, 2.2, 2.45)]);
        let e = r.energy("#0 tg128", 10);
        assert_eq!(
            (e.energy_j, e.j_per_token, e.mean_power_w),
            (None, None, None)
        );
        let why = e.reason.unwrap();
        assert!(
            why.contains("interval 1 of 1 lasts 0.250 s and holds 0 read(s) at 2 Hz"),
            "{why}"
        );
        // 2.01–3.49 s: reads at 2.5 and 3.0 span 0.5 s of 1.48 s (34 %).
        let r = rec(series(), true, &[("#0 tg128", 1, 2.01, 3.49)]);
        let why = r.energy("#0 tg128", 10).reason.unwrap();
        assert!(why.contains("span 34 % of their 1.480 s"), "{why}");
        // No interval at all.
        let r = rec(series(), true, &[]);
        assert_eq!(
            r.energy("#0 tg128", 10).reason.as_deref(),
            Some("no timed interval recorded")
        );
    }

    #[test]
    fn no_counter_means_no_energy_with_the_reason() {
        let mut v = series();
        for s in &mut v {
            s.cpu_energy_j = None;
        }
        let r = rec(v, false, &[("#0 tg128", 1, 2.2, 3.9)]);
        let e = r.energy("#0 tg128", 10);
        assert_eq!(
            (e.mean_power_w, e.energy_j, e.j_per_token, e.tokens_per_wh),
            (None, None, None, None)
        );
        assert!(
            e.reason
                .unwrap()
                .contains("cpu_package_energy: RAPL not readable in this VM")
        );
        assert_eq!(e.energy_scope, "");
        // Contention does not need an energy counter.
        assert!((e.other_cpu_cores.unwrap() - 0.6).abs() < 1e-9);
    }

    #[test]
    fn other_processes_on_the_gpu_are_averaged_over_the_intervals_and_flag_the_row() {
        // Another process keeps the SMs 40 % busy from 2.0 s on, 0 % before; memwall's
        // CPU share is the fixture's (0.6 other cores, 0.1 steal: both flagged).
        let mut v = series();
        for s in &mut v {
            let t = s.t_ns as f64 / 1e9;
            s.gpu_other_util_pct = Some(if t >= 2.0 { 40.0 } else { 0.0 });
        }
        // Reads inside 1.4–2.6 s: 1.5 (0 %), 2.0 (40 %), 2.5 (40 %): mean 80 ÷ 3.
        let r = rec(v.clone(), true, &[("#0 tg128", 1, 1.4, 2.6)]);
        let e = r.energy("#0 tg128", 10);
        assert!((e.other_gpu_util_pct.unwrap() - 80.0 / 3.0).abs() < 1e-9);
        let why = e.contended().unwrap();
        assert!(
            why.contains("other processes kept the GPU's SMs 27 % busy"),
            "{why}"
        );
        // Below the 10 % bound the GPU part says nothing; no NVML reading: None.
        for s in &mut v {
            s.gpu_other_util_pct = s.gpu_other_util_pct.map(|_| 5.0);
            s.cpu_busy_s = s.own_cpu_s;
            s.cpu_steal_s = Some(0.0);
        }
        let r = rec(v.clone(), true, &[("#0 tg128", 1, 1.4, 2.6)]);
        let e = r.energy("#0 tg128", 10);
        assert_eq!(e.other_gpu_util_pct, Some(5.0));
        assert_eq!(e.contended(), None);
        for s in &mut v {
            s.gpu_other_util_pct = None;
        }
        let r = rec(v, true, &[("#0 tg128", 1, 1.4, 2.6)]);
        assert_eq!(r.energy("#0 tg128", 10).other_gpu_util_pct, None);
    }

    #[test]
    fn backwards_counters_and_gpu_board_power() {
        let mut v = series();
        v[6].cpu_energy_j = Some(0.0); // t = 3.0 s reads below t = 2.5 s
        let r = rec(v, true, &[("#0 tg128", 1, 2.4, 3.1)]);
        assert!(
            r.energy("#0 tg128", 10)
                .reason
                .unwrap()
                .contains("went backwards")
        );
        // A GPU with board power but no energy counter: 300 W and 340 W read inside
        // 0.9–2.1 s (reads at 1.0, 1.5, 2.0 with 300, 320, 340 W): mean 320 W × 1.2 s
        // = 384 J. The CPU counter absent here.
        let mut v = series();
        for (i, s) in v.iter_mut().enumerate() {
            s.cpu_energy_j = None;
            s.gpu_power_w = Some(260.0 + 20.0 * i as f64);
        }
        let mut r = rec(v, true, &[("#0 tg128", 1, 0.9, 2.1)]);
        r.counters.push(Counter::available("gpu_power", "fixture"));
        let e = r.energy("#0 tg128", 384);
        assert!((e.energy_j.unwrap() - 384.0).abs() < 1e-9, "{e:?}");
        assert_eq!(e.energy_source, "NVML GPU power");
        assert_eq!(e.energy_scope, "GPU board");
        assert!((e.j_per_token.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(e.idle_power_w, None, "no idle phase in this recording");
    }

    #[test]
    fn a_marked_interval_lands_in_the_sampler_timebase() {
        let parts: Vec<Box<dyn Sampler>> = vec![];
        let s = SamplerSession::start(MachineSampler::from_parts(parts), 50.0);
        let m = s.marker();
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        let t1 = Instant::now();
        m.interval("a", 1, t0, t1);
        m.span("b", 2, TimedSpan::between(t0, t1));
        let r = s.stop();
        assert_eq!(r.intervals.len(), 2);
        let (a, b) = (&r.intervals[0], &r.intervals[1]);
        assert_eq!(
            (a.phase.as_str(), a.rep, b.phase.as_str(), b.rep),
            ("a", 1, "b", 2)
        );
        let len = (t1 - t0).as_nanos() as u64;
        assert_eq!(a.end_ns - a.start_ns, len);
        // Through the epoch's whole nanoseconds: equal within rounding of 2 ns.
        assert!(a.start_ns.abs_diff(b.start_ns) <= 2 && a.end_ns.abs_diff(b.end_ns) <= 2);
        assert_eq!(r.windows("a"), vec![(a.start_ns, a.end_ns)]);
    }

    #[test]
    fn a_session_reads_at_its_rate_and_keeps_the_phases() {
        // The real machine's Linux counters (whatever exists here) at 50 Hz for ≈ 0.3 s.
        let parts: Vec<Box<dyn Sampler>> =
            vec![Box::new(LinuxSampler::new(std::path::Path::new("/")))];
        let s = SamplerSession::start(MachineSampler::from_parts(parts), 50.0);
        std::thread::sleep(Duration::from_millis(100));
        s.mark("a");
        std::thread::sleep(Duration::from_millis(150));
        s.mark("b");
        std::thread::sleep(Duration::from_millis(50));
        let r = s.stop();
        let names: Vec<&str> = r.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(r.phases[0].end_ns == r.phases[1].start_ns);
        assert!(r.phases[0].end_ns - r.phases[0].start_ns >= 150_000_000);
        // ≈ 15 reads in 0.3 s at 50 Hz; a loaded machine may lose some.
        assert!((5..=20).contains(&r.samples.len()), "{}", r.samples.len());
        assert!(r.samples.windows(2).all(|w| w[0].t_ns < w[1].t_ns));
        assert!(r.samples_in(&r.phases[0]).len() >= 3);
        #[cfg(target_os = "linux")]
        assert!(
            r.samples[0].mem_total_bytes.is_some(),
            "/proc/meminfo is always there"
        );
    }
}
