//! macOS (reviewed, not run on the Linux machines memwall is tested on). This part
//! reads what [`crate::probe::hw::live_state`] already reads on macOS: the thermal
//! state (`NSProcessInfo.thermalState` as `pmset -g therm` reports it), memory and
//! swap. Energy, temperatures and DRAM bandwidth are listed as unavailable with
//! the reason, never estimated.
//!
//! Where they would come from (the design for a later, tested part; channel names
//! as tools such as mactop, asitop and Anubis read them, to be re-checked on each
//! machine because Apple does not document IOReport):
//! - Energy: `IOReportCopyChannelsInGroup("Energy Model")` from
//!   `/usr/lib/libIOReport.dylib`, sampled twice with `IOReportCreateSamples` and
//!   differenced with `IOReportCreateSamplesDelta`; channels such as `CPU Energy`,
//!   `GPU Energy`, `ANE`, `DRAM`; the unit is per channel
//!   (`IOReportChannelGetUnitLabel`: mJ, µJ or nJ), and channel names have changed
//!   between M1, M2 and M3/M4 generations (per-cluster names on newer chips), so the
//!   part must match names found at run time, not a fixed list.
//! - DRAM bandwidth: the `AMC Stats` group (`Perf Counters`) on M1-generation chips;
//!   newer chips and macOS versions moved these to `PMP` channels (`DCS` read/write
//!   bytes), and some releases stopped publishing them to unprivileged processes.
//! - Temperatures: the SMC keys (`Tp0*`, `Tg0*` …) through `AppleSMC`, or the HID
//!   event system's temperature sensors; key names differ per chip.
//! - Thermal state: `NSProcessInfo.thermalState` (nominal / fair / serious /
//!   critical), read today through `pmset`.

use super::{Counter, Sample, Sampler};
use crate::probe::hw::ThermalState;

/// Why the IOReport-backed counters give nothing yet.
const NOT_READ: &str =
    "IOReport/SMC reading is not implemented in this build (design in measure/sampler/macos.rs)";

/// The macOS part.
pub struct MacSampler;

impl MacSampler {
    /// The part (nothing to open).
    pub fn new() -> MacSampler {
        MacSampler
    }
}

impl Default for MacSampler {
    fn default() -> Self {
        MacSampler::new()
    }
}

impl Sampler for MacSampler {
    fn counters(&self) -> Vec<Counter> {
        let mut c: Vec<Counter> = [
            "cpu_package_energy",
            "dram_energy",
            "cpu_temperature",
            "dram_bandwidth",
        ]
        .iter()
        .map(|n| Counter::unavailable(n, "IOReport / SMC", NOT_READ))
        .collect();
        c.push(Counter::available(
            "thermal_state",
            "pmset -g therm (NSProcessInfo.thermalState)",
        ));
        c.push(Counter::available(
            "memory",
            "host_statistics64 through sysinfo",
        ));
        c
    }

    fn start(&mut self) {}

    fn read(&mut self, s: &mut Sample, _dt_s: Option<f64>) {
        let live = crate::probe::hw::live_state();
        s.thermal_state = match live.thermal.state {
            ThermalState::Nominal => Some("nominal".into()),
            ThermalState::Throttling => Some("throttling".into()),
            ThermalState::Critical => Some("critical".into()),
            ThermalState::Unknown => None,
        };
        if live.mem.total.0 > 0 {
            s.mem_total_bytes = Some(live.mem.total.0);
            s.mem_used_bytes = Some(live.mem.used().0);
            s.swap_used_bytes = Some(live.mem.swap_used.0);
        }
    }
}
