//! Live machine state: power and energy, temperatures, clocks, memory, swap and
//! DRAM bandwidth, read from the counters the platform exposes while a run goes.
//!
//! One [`Sampler`] trait (start, read, stop) with small per-platform parts:
//!
//! - [`linux`]: RAPL package/DRAM energy (`/sys/class/powercap/intel-rapl*`, AMD's
//!   RAPL through the same interface, with counter wrap handled through
//!   `max_energy_range_uj`), hwmon and `/sys/class/thermal` temperatures, CPU
//!   frequency (`cpufreq/scaling_cur_freq`, else `/proc/cpuinfo`), `/proc/vmstat`
//!   swap-in/out, `/proc/meminfo`, and live DRAM bandwidth through `perf_event_open`
//!   on the uncore memory-controller PMUs when the kernel and permissions allow.
//! - [`nvml`]: NVIDIA's NVML, loaded at run time (`libnvidia-ml.so.1`): board power,
//!   the total-energy counter, GPU temperature, SM and memory clocks,
//!   memory-controller utilisation.
//! - `macos` (compiled only on macOS; reviewed, not run here): the thermal state and
//!   memory, with the IOReport channels for energy and bandwidth documented.
//!
//! Every counter says where it comes from ([`Counter::source`]); one the platform
//! does not give is listed with the reason ([`Counter::reason`]) and its values stay
//! `None` (printed `—`), never a guess. [`MachineSampler::detect`] assembles the parts
//! this machine has; [`session::SamplerSession`] runs one on a thread beside a
//! measurement, with phase marks, and [`session::Recording::summary`] turns a phase's
//! samples into mean power, energy per token, peak temperature and throttling.

pub mod linux;
#[cfg(target_os = "macos")]
pub mod macos;
pub mod nvml;
pub mod session;

use serde::{Deserialize, Serialize};
use std::time::Instant;

/// One counter of the machine, available or not, with its source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
pub struct Counter {
    /// What it measures: `cpu_package_energy`, `dram_energy`, `cpu_temperature`,
    /// `cpu_frequency`, `cpu_time`, `memory`, `swap`, `dram_bandwidth`, `gpu_power`,
    /// `gpu_energy`, `gpu_temperature`, `gpu_clocks`, `gpu_memory_utilisation`.
    pub name: String,
    /// Where the values come from (a path, a PMU, a library), or where they were
    /// looked for when unavailable.
    pub source: String,
    /// Whether values are read.
    pub available: bool,
    /// Why not, when unavailable.
    pub reason: Option<String>,
}

impl Counter {
    /// An available counter.
    pub fn available(name: &str, source: impl Into<String>) -> Counter {
        Counter {
            name: name.into(),
            source: source.into(),
            available: true,
            reason: None,
        }
    }

    /// An unavailable counter with the reason.
    pub fn unavailable(
        name: &str,
        source: impl Into<String>,
        reason: impl Into<String>,
    ) -> Counter {
        Counter {
            name: name.into(),
            source: source.into(),
            available: false,
            reason: Some(reason.into()),
        }
    }

    /// `cpu_package_energy  yes  /sys/class/powercap/intel-rapl:0` or
    /// `dram_bandwidth  —  (no uncore PMU …)`: one line of the availability list.
    pub fn line(&self) -> String {
        match &self.reason {
            None => format!("{:<24} yes  {}", self.name, self.source),
            Some(r) => format!("{:<24} —    {r} [{}]", self.name, self.source),
        }
    }
}

/// The machine's state at one instant. Cumulative figures (energies, swap pages)
/// count from the sampler's start; rates (power, bandwidth) cover the interval since
/// the previous read. `None`: the counter is unavailable (see the sampler's
/// [`Counter`] list for why) or this is the first read of a rate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Sample {
    /// Time since the sampler started, ns.
    #[ts(type = "number")]
    pub t_ns: u64,
    /// CPU package energy since start (all packages, RAPL), J.
    pub cpu_energy_j: Option<f64>,
    /// DRAM energy since start (RAPL DRAM domain), J.
    pub dram_energy_j: Option<f64>,
    /// GPU energy since start (NVML total-energy counter, all GPUs), J.
    pub gpu_energy_j: Option<f64>,
    /// CPU package power over the last interval, W.
    pub cpu_power_w: Option<f64>,
    /// DRAM power over the last interval, W.
    pub dram_power_w: Option<f64>,
    /// GPU board power as NVML reports it (all GPUs), W.
    pub gpu_power_w: Option<f64>,
    /// Hottest CPU sensor, °C.
    pub cpu_temp_c: Option<f64>,
    /// Hottest GPU, °C.
    pub gpu_temp_c: Option<f64>,
    /// Mean CPU clock over the logical CPUs, MHz.
    pub cpu_mhz: Option<f64>,
    /// SM clock of the first GPU, MHz.
    pub gpu_sm_mhz: Option<f64>,
    /// Memory clock of the first GPU, MHz.
    pub gpu_mem_mhz: Option<f64>,
    /// Memory-controller utilisation (busiest GPU), percent of the sample period
    /// during which device memory was read or written (NVML's definition).
    pub gpu_mem_util_pct: Option<f64>,
    /// Other processes' SM utilisation on the busiest GPU over the last sample
    /// period, percent: the sum over every process but memwall of its SM share
    /// (`nvmlDeviceGetProcessUtilization`), capped at 100.
    #[serde(default)]
    pub gpu_other_util_pct: Option<f64>,
    /// DRAM traffic (reads + writes) over the last interval from the uncore
    /// counters, GB/s (1e9 B/s).
    pub dram_gbps: Option<f64>,
    /// Memory in use (total − available), bytes.
    #[ts(type = "number | null")]
    pub mem_used_bytes: Option<u64>,
    /// Installed memory, bytes.
    #[ts(type = "number | null")]
    pub mem_total_bytes: Option<u64>,
    /// Swap in use, bytes.
    #[ts(type = "number | null")]
    pub swap_used_bytes: Option<u64>,
    /// Pages swapped in since start.
    #[ts(type = "number | null")]
    pub swap_in_pages: Option<u64>,
    /// Pages swapped out since start.
    #[ts(type = "number | null")]
    pub swap_out_pages: Option<u64>,
    /// The OS's coarse thermal state, where it reports one (`nominal`,
    /// `throttling`, `critical`).
    pub thermal_state: Option<String>,
    /// CPU time every logical CPU spent busy since start (user, nice, system, irq,
    /// softirq of `/proc/stat`; guest time is inside user), s.
    #[serde(default)]
    pub cpu_busy_s: Option<f64>,
    /// CPU time the hypervisor gave other guests since start (`/proc/stat` steal), s.
    #[serde(default)]
    pub cpu_steal_s: Option<f64>,
    /// CPU time memwall's own process used since start, all its threads
    /// (`/proc/self/stat` utime + stime), s. Other processes' use during a span is
    /// Δ`cpu_busy_s` − Δ`own_cpu_s`.
    #[serde(default)]
    pub own_cpu_s: Option<f64>,
}

/// One platform's part of the machine's counters.
pub trait Sampler: Send {
    /// The counters this part covers, available or not, with sources and reasons.
    fn counters(&self) -> Vec<Counter>;
    /// Takes the baselines of cumulative counters (energy, swap) now.
    fn start(&mut self);
    /// Reads the counters now into the fields of `s` this part owns. `dt_s` is the
    /// time since the previous read (None on the first), for rates.
    fn read(&mut self, s: &mut Sample, dt_s: Option<f64>);
    /// Releases what `start` opened (perf file descriptors, the NVML handle).
    fn stop(&mut self) {}
}

/// The parts this machine has, read together into one [`Sample`].
pub struct MachineSampler {
    parts: Vec<Box<dyn Sampler>>,
    t0: Instant,
    last: Option<Instant>,
}

impl MachineSampler {
    /// The parts of this machine: Linux's sysfs/procfs/perf counters (on Linux), the
    /// macOS part (on macOS), and NVML when the NVIDIA driver's library loads.
    // The pushes are gated per OS, which a vec![] literal cannot express.
    #[allow(clippy::vec_init_then_push)]
    pub fn detect() -> MachineSampler {
        let mut parts: Vec<Box<dyn Sampler>> = Vec::new();
        #[cfg(target_os = "linux")]
        parts.push(Box::new(linux::LinuxSampler::new(std::path::Path::new(
            "/",
        ))));
        #[cfg(target_os = "macos")]
        parts.push(Box::new(macos::MacSampler::new()));
        parts.push(Box::new(nvml::NvmlSampler::load()));
        MachineSampler::from_parts(parts)
    }

    /// A sampler over the given parts (tests, fixtures).
    pub fn from_parts(parts: Vec<Box<dyn Sampler>>) -> MachineSampler {
        MachineSampler {
            parts,
            t0: Instant::now(),
            last: None,
        }
    }

    /// Every counter of every part.
    pub fn counters(&self) -> Vec<Counter> {
        self.parts.iter().flat_map(|p| p.counters()).collect()
    }

    /// Takes the baselines; time counts from here.
    pub fn start(&mut self) {
        for p in &mut self.parts {
            p.start();
        }
        self.t0 = Instant::now();
        self.last = None;
    }

    /// Reads every part now.
    pub fn read(&mut self) -> Sample {
        let now = Instant::now();
        let dt = self.last.map(|l| now.duration_since(l).as_secs_f64());
        self.last = Some(now);
        let mut s = Sample {
            t_ns: now.duration_since(self.t0).as_nanos() as u64,
            ..Sample::default()
        };
        for p in &mut self.parts {
            p.read(&mut s, dt);
        }
        s
    }

    /// Stops every part.
    pub fn stop(&mut self) {
        for p in &mut self.parts {
            p.stop();
        }
    }
}

/// `x` when it is a finite value in `[lo, hi]`: a counter reading outside what the
/// hardware can do is a misread and is dropped, not shown.
pub(crate) fn plausible(x: f64, lo: f64, hi: f64) -> Option<f64> {
    (x.is_finite() && x >= lo && x <= hi).then_some(x)
}
