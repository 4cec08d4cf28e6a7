//! Hardware probe: what machine this is (CPU, memory, caches, GPUs) and its live
//! state (power source, thermal state, memory pressure, swap activity).
//!
//! Portable facts come from `sysinfo`; facts only the OS knows (last-level cache,
//! power source, thermal state, swap-out counter) come from one small platform
//! module per OS implementing [`Platform`]: `linux.rs` reads `/sys` and `/proc`,
//! `macos.rs` asks `sysctl`, `pmset` and `vm_stat`.

use crate::units::Bytes;
use serde::{Deserialize, Serialize};
use std::fmt;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux::Os;
// The macOS parsers are plain functions: compiled (and tested) on every OS.
#[cfg(any(target_os = "macos", test))]
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
mod macos;
#[cfg(target_os = "macos")]
use macos::Os;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod other;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
use other::Os;

/// The OS-specific probes. Each returns `None` when the OS does not expose the fact
/// (a VM without thermal sensors, say); callers show `—`, never a guess.
pub trait Platform {
    /// Size of the largest (last-level) CPU cache.
    fn llc_bytes() -> Option<Bytes>;
    /// AC or battery.
    fn power_source() -> PowerSource;
    /// Temperatures and throttling state.
    fn thermal() -> Thermal;
    /// Cumulative pages swapped out since boot (Linux `pswpout`, macOS `Swapouts`).
    fn swap_out_pages() -> Option<u64>;
    /// Names of accelerators (GPUs) the OS reports.
    fn gpus() -> Vec<String>;
    /// The run-queue load averages.
    fn load_average() -> Option<LoadAverage>;
}

/// Where the power comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PowerSource {
    /// Mains power (or a desktop with no battery).
    Ac,
    /// Running on battery, with charge in percent when known.
    Battery {
        /// Charge level 0–100.
        percent: Option<f64>,
    },
    /// The OS did not say.
    Unknown,
}

impl PowerSource {
    /// `true` only when the OS reports running on battery.
    pub fn on_battery(&self) -> bool {
        matches!(self, PowerSource::Battery { .. })
    }
    /// Short label for records: `ac`, `battery`, `unknown`.
    pub fn label(&self) -> &'static str {
        match self {
            PowerSource::Ac => "ac",
            PowerSource::Battery { .. } => "battery",
            PowerSource::Unknown => "unknown",
        }
    }
}

impl fmt::Display for PowerSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PowerSource::Ac => f.write_str("AC"),
            PowerSource::Battery { percent: Some(p) } => write!(f, "battery ({p:.0}%)"),
            PowerSource::Battery { percent: None } => f.write_str("battery"),
            PowerSource::Unknown => f.write_str("unknown"),
        }
    }
}

/// Coarse thermal state, in the spirit of macOS's `ProcessInfo.ThermalState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum ThermalState {
    /// Below every passive trip point / no throttling reported.
    Nominal,
    /// At or above a passive trip point, or the OS reports a speed limit < 100 %.
    Throttling,
    /// At or above a critical trip point.
    Critical,
    /// No sensors.
    Unknown,
}

/// Temperatures and the thermal state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Thermal {
    /// Coarse state.
    pub state: ThermalState,
    /// Hottest sensor in °C, when any sensor exists.
    pub max_celsius: Option<f64>,
}

impl Thermal {
    /// Short label for records, e.g. `nominal 54.0C` or `unknown`.
    pub fn label(&self) -> String {
        let s = match self.state {
            ThermalState::Nominal => "nominal",
            ThermalState::Throttling => "throttling",
            ThermalState::Critical => "critical",
            ThermalState::Unknown => "unknown",
        };
        match self.max_celsius {
            Some(c) => format!("{s} {c:.1}C"),
            None => s.to_string(),
        }
    }
}

/// The run-queue load averages over the last 1, 5 and 15 minutes, as the OS
/// reports them (Linux `/proc/loadavg`, macOS `sysctl vm.loadavg`): the mean number
/// of runnable (and, on Linux, uninterruptible) threads. On an otherwise idle
/// machine they sit near 0; a value near the core count means other work shared
/// the cores while something was timed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadAverage {
    /// Over the last minute.
    pub one: f64,
    /// Over the last 5 minutes.
    pub five: f64,
    /// Over the last 15 minutes.
    pub fifteen: f64,
}

impl LoadAverage {
    /// The three averages from the first three numbers of `s`, each finite and
    /// non-negative (`None` otherwise).
    pub(crate) fn from_fields(s: &str) -> Option<LoadAverage> {
        let mut v = s
            .split_whitespace()
            .map(|f| f.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0));
        Some(LoadAverage {
            one: v.next()??,
            five: v.next()??,
            fifteen: v.next()??,
        })
    }
}

impl fmt::Display for LoadAverage {
    /// `1-min/5-min/15-min` with two decimals, as `/proc/loadavg` prints them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.2}/{:.2}/{:.2}", self.one, self.five, self.fifteen)
    }
}

/// Memory and swap, right now.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct MemState {
    /// Installed RAM.
    pub total: Bytes,
    /// Memory the OS could hand out without swapping (`MemAvailable`).
    pub available: Bytes,
    /// Swap configured.
    pub swap_total: Bytes,
    /// Swap in use.
    pub swap_used: Bytes,
}

impl MemState {
    /// Used memory = total − available.
    pub fn used(&self) -> Bytes {
        Bytes(self.total.0.saturating_sub(self.available.0))
    }
}

/// Static facts about the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct HostInfo {
    /// CPU brand string.
    pub cpu_model: String,
    /// Physical cores (falls back to logical when the OS does not say).
    pub cores_physical: usize,
    /// Logical CPUs of the machine (hardware threads).
    pub cores_logical: usize,
    /// Installed RAM.
    pub ram: Bytes,
    /// OS name and version.
    pub os: String,
    /// Kernel version.
    pub kernel: String,
    /// CPU architecture (`x86_64`, `aarch64`).
    pub arch: String,
    /// Last-level cache size, when known.
    pub llc: Option<Bytes>,
    /// Accelerators the OS reports.
    pub gpus: Vec<String>,
    /// Hostname of the machine.
    pub hostname: String,
}

/// Live state sampled at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct LiveState {
    /// Power source.
    pub power: PowerSource,
    /// Thermal state.
    pub thermal: Thermal,
    /// Memory and swap.
    pub mem: MemState,
    /// Cumulative swap-out pages since boot.
    pub swap_out_pages: Option<u64>,
}

fn sys_memory() -> MemState {
    match sysinfo::System::new() {
        Ok(mut s) => {
            s.refresh_memory();
            MemState {
                total: Bytes(s.total_memory()),
                available: Bytes(s.available_memory()),
                swap_total: Bytes(s.total_swap()),
                swap_used: Bytes(s.used_swap()),
            }
        }
        Err(_) => MemState {
            total: Bytes(0),
            available: Bytes(0),
            swap_total: Bytes(0),
            swap_used: Bytes(0),
        },
    }
}

/// Probes the static facts. Cost: a few file reads (≈ 10 ms, most of it sysinfo's CPU list).
pub fn host_info() -> HostInfo {
    let mut cpu_model = String::new();
    let mut cores_logical = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if let Ok(mut s) = sysinfo::System::new() {
        s.refresh_cpu_all();
        if let Some(c) = s.cpus().first() {
            cpu_model = c.brand().trim().to_string();
        }
        if !s.cpus().is_empty() {
            cores_logical = s.cpus().len();
        }
    }
    if cpu_model.is_empty() {
        cpu_model = "unknown CPU".into();
    }
    HostInfo {
        cpu_model,
        cores_physical: sysinfo::System::physical_core_count().unwrap_or(cores_logical),
        cores_logical,
        ram: sys_memory().total,
        os: sysinfo::System::long_os_version().unwrap_or_else(|_| std::env::consts::OS.to_string()),
        kernel: sysinfo::System::kernel_version().unwrap_or_default(),
        arch: std::env::consts::ARCH.to_string(),
        llc: Os::llc_bytes(),
        gpus: Os::gpus(),
        hostname: sysinfo::System::host_name().unwrap_or_default(),
    }
}

/// Samples the live state. Cheap (a handful of small file reads), safe to call every
/// few seconds from the tray.
pub fn live_state() -> LiveState {
    LiveState {
        power: Os::power_source(),
        thermal: Os::thermal(),
        mem: sys_memory(),
        swap_out_pages: Os::swap_out_pages(),
    }
}

/// The load averages now; `None` where the OS does not report them (callers show
/// `—`). Cheap: one small file read on Linux, one `sysctl` on macOS.
pub fn load_average() -> Option<LoadAverage> {
    Os::load_average()
}

/// Memory the OS can hand out now (`MemAvailable`).
pub fn available_memory() -> Bytes {
    sys_memory().available
}
