//! A sampler running on its own thread beside a measurement: start → phase marks →
//! stop → a [`Recording`] (the time series, the phases, the counter list), and per
//! phase an [`EnergySummary`] (mean power, energy per token, peak temperature,
//! throttling, live bandwidth).
//!
//! Any job can use it: `let s = SamplerSession::start(MachineSampler::detect(), 10.0);`
//! then `s.mark("tg128")` when the timed part begins and `s.end_phase()` when it
//! ends, and `s.stop()` at the end. One read costs a few small file reads (and NVML
//! calls on a GPU machine); at 10 Hz that is well under 1 % of one core.

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

/// What a session recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Recording {
    /// Reads per second asked for.
    pub hz: f64,
    /// Every read, in time order.
    pub samples: Vec<Sample>,
    /// The marked phases, in order.
    pub phases: Vec<Phase>,
    /// The machine's counters, available or not.
    pub counters: Vec<Counter>,
}

/// Energy and thermals of one phase. `None` figures carry their reason in
/// [`EnergySummary::reason`] (energy) or are simply unmeasured (no sensor).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct EnergySummary {
    /// Reads inside the phase.
    #[ts(type = "number")]
    pub samples: u64,
    /// Mean power over the phase from the energy counters, W.
    pub mean_power_w: Option<f64>,
    /// Energy of the timed work: mean power × timed time, J.
    pub energy_j: Option<f64>,
    /// Energy per generated or processed token, J/token.
    pub j_per_token: Option<f64>,
    /// Tokens per watt-hour (3600 ÷ J/token).
    pub tokens_per_wh: Option<f64>,
    /// Which counters the energy sums (`RAPL package + RAPL DRAM`, `NVML GPU`).
    pub energy_source: String,
    /// Why there is no energy, when there is none.
    pub reason: Option<String>,
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
        if let Ok(mut g) = self.shared.lock() {
            if let Some((n, s)) = g.open.take() {
                g.phases.push(Phase {
                    name: n,
                    start_ns: s,
                    end_ns: t,
                });
            }
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
            open: None,
            latest: None,
        }));
        sampler.start();
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
        let phases = self
            .shared
            .lock()
            .map(|mut g| std::mem::take(&mut g.phases))
            .unwrap_or_default();
        Recording {
            hz: self.hz,
            samples,
            phases,
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

    /// Summarises phase `p`, whose timed work took `timed_ns` and produced `tokens`.
    ///
    /// Mean power = (energy at the last read − energy at the first read) ÷ the time
    /// between them, over every energy counter that answered in both reads (CPU
    /// package, DRAM, GPU); energy = mean power × `timed_ns`; J/token = energy ÷
    /// `tokens`; tokens per Wh = 3600 ÷ J/token. Without an energy counter, or with
    /// fewer than two reads in the phase, the energy figures are `None` and
    /// [`EnergySummary::reason`] says why.
    pub fn summary(&self, p: &Phase, timed_ns: u64, tokens: u64) -> EnergySummary {
        let inside = self.samples_in(p);
        let energy_counters: Vec<&Counter> = self
            .counters
            .iter()
            .filter(|c| {
                matches!(
                    c.name.as_str(),
                    "cpu_package_energy" | "dram_energy" | "gpu_energy"
                )
            })
            .collect();
        type Get = fn(&Sample) -> Option<f64>;
        let parts: [(&str, Get); 3] = [
            ("RAPL package", |s| s.cpu_energy_j),
            ("RAPL DRAM", |s| s.dram_energy_j),
            ("NVML GPU", |s| s.gpu_energy_j),
        ];
        let mut source = Vec::new();
        let mut reason = None;
        let mut mean_power_w = None;
        match (inside.first(), inside.last()) {
            _ if !energy_counters.iter().any(|c| c.available) => {
                reason = Some(
                    energy_counters
                        .iter()
                        .filter_map(|c| c.reason.as_deref().map(|r| format!("{}: {r}", c.name)))
                        .collect::<Vec<_>>()
                        .join("; "),
                );
            }
            (Some(a), Some(b)) if inside.len() >= 2 && b.t_ns > a.t_ns => {
                let dt = (b.t_ns - a.t_ns) as f64 / 1e9;
                let mut joules = 0.0;
                for (name, get) in parts {
                    if let (Some(x), Some(y)) = (get(a), get(b)) {
                        joules += y - x;
                        source.push(name);
                    }
                }
                if source.is_empty() {
                    reason = Some("no energy counter answered inside the phase".into());
                } else if joules < 0.0 {
                    reason = Some(format!(
                        "energy counters went backwards ({joules:.3} J): a misread"
                    ));
                    source.clear();
                } else {
                    mean_power_w = Some(joules / dt);
                }
            }
            _ => {
                reason = Some(format!(
                    "phase shorter than two reads ({} read(s) at {} Hz)",
                    inside.len(),
                    self.hz
                ));
            }
        }
        let energy_j = mean_power_w.map(|w| w * timed_ns as f64 / 1e9);
        let j_per_token = energy_j.filter(|_| tokens > 0).map(|e| e / tokens as f64);
        let tokens_per_wh = j_per_token.filter(|j| *j > 0.0).map(|j| 3600.0 / j);
        let peak_temp_c = inside
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
            let known: Vec<(f64, f64)> = inside
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
        EnergySummary {
            samples: inside.len() as u64,
            mean_power_w,
            energy_j,
            j_per_token,
            tokens_per_wh,
            energy_source: source.join(" + "),
            reason,
            peak_temp_c,
            throttled,
            live_dram_gbps: mean(inside.iter().filter_map(|s| s.dram_gbps)),
            gpu_mem_util_pct: mean(inside.iter().filter_map(|s| s.gpu_mem_util_pct)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::sampler::{Sampler, linux::LinuxSampler};

    const EPS: f64 = 1e-9;

    fn rec(samples: Vec<Sample>, energy: bool) -> Recording {
        let c = |n: &str| match energy {
            true => Counter::available(n, "fixture"),
            false => Counter::unavailable(n, "fixture", "RAPL not readable in this VM"),
        };
        Recording {
            hz: 10.0,
            samples,
            phases: vec![Phase {
                name: "tg128".into(),
                start_ns: 1_000_000_000,
                end_ns: 3_000_000_000,
            }],
            counters: vec![c("cpu_package_energy"), c("dram_energy"), c("gpu_energy")],
        }
    }

    fn at(t_s: f64, cpu_j: f64, dram_j: f64, temp: f64, mhz: f64) -> Sample {
        Sample {
            t_ns: (t_s * 1e9) as u64,
            cpu_energy_j: Some(cpu_j),
            dram_energy_j: Some(dram_j),
            cpu_temp_c: Some(temp),
            cpu_mhz: Some(mhz),
            dram_gbps: Some(40.0 + t_s),
            ..Sample::default()
        }
    }

    #[test]
    fn energy_per_token_from_counters_in_the_phase() {
        // Outside reads (t = 0.5 s, 3.5 s) are ignored. Inside: 1.0 s → 3.0 s,
        // package 10 → 70 J, DRAM 2 → 12 J: 70 J in 2 s = 35 W. Timed 1.5 s with
        // 96 tokens: 52.5 J, 0.546875 J/token, 3600 / 0.546875 = 6582.857… tokens/Wh.
        let r = rec(
            vec![
                at(0.5, 0.0, 0.0, 50.0, 3000.0),
                at(1.0, 10.0, 2.0, 60.0, 3000.0),
                at(2.0, 40.0, 7.0, 90.0, 2500.0),
                at(3.0, 70.0, 12.0, 70.0, 3000.0),
                at(3.5, 99.0, 99.0, 99.0, 1000.0),
            ],
            true,
        );
        let s = r.summary(&r.phases[0], 1_500_000_000, 96);
        assert_eq!(s.samples, 3);
        assert!((s.mean_power_w.unwrap() - 35.0).abs() < EPS);
        assert!((s.energy_j.unwrap() - 52.5).abs() < EPS);
        assert!((s.j_per_token.unwrap() - 0.546875).abs() < EPS);
        assert!((s.tokens_per_wh.unwrap() - 3600.0 / 0.546875).abs() < 1e-6);
        assert_eq!(s.energy_source, "RAPL package + RAPL DRAM");
        assert_eq!(s.peak_temp_c, Some(90.0));
        // 2500 < 0.9 × 3000 while at 90 °C ≥ 85 °C.
        assert_eq!(s.throttled, Some(true));
        assert!((s.live_dram_gbps.unwrap() - 42.0).abs() < EPS); // mean of 41, 42, 43
        assert_eq!(s.reason, None);
    }

    #[test]
    fn no_counter_means_no_energy_with_the_reason() {
        let mut v = vec![
            at(1.0, 0.0, 0.0, 60.0, 3000.0),
            at(2.0, 0.0, 0.0, 60.0, 2000.0),
        ];
        for s in &mut v {
            s.cpu_energy_j = None;
            s.dram_energy_j = None;
        }
        let r = rec(v, false);
        let s = r.summary(&r.phases[0], 1_000_000_000, 10);
        assert_eq!(
            (s.mean_power_w, s.energy_j, s.j_per_token, s.tokens_per_wh),
            (None, None, None, None)
        );
        assert!(
            s.reason
                .unwrap()
                .contains("cpu_package_energy: RAPL not readable in this VM")
        );
        assert_eq!(
            s.throttled,
            Some(false),
            "clock drop while cool is not throttling"
        );
    }

    #[test]
    fn a_phase_with_one_read_or_backwards_counters_has_no_energy() {
        let r = rec(vec![at(2.0, 5.0, 1.0, 50.0, 3000.0)], true);
        let s = r.summary(&r.phases[0], 1_000_000_000, 10);
        assert!(s.reason.unwrap().contains("shorter than two reads"));
        let r = rec(
            vec![
                at(1.0, 5.0, 1.0, 50.0, 3000.0),
                at(2.0, 4.0, 1.0, 50.0, 3000.0),
            ],
            true,
        );
        let s = r.summary(&r.phases[0], 1_000_000_000, 10);
        assert!(s.reason.unwrap().contains("went backwards"));
        assert_eq!(s.mean_power_w, None);
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
