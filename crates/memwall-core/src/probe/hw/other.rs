//! Fallback for platforms without a probe module: every OS-only fact is unknown.

use super::{LoadAverage, Platform, PowerSource, Thermal, ThermalState};
use crate::units::Bytes;

pub(super) struct Os;

impl Platform for Os {
    fn llc_bytes() -> Option<Bytes> {
        None
    }
    fn power_source() -> PowerSource {
        PowerSource::Unknown
    }
    fn thermal() -> Thermal {
        Thermal {
            state: ThermalState::Unknown,
            max_celsius: None,
        }
    }
    fn swap_out_pages() -> Option<u64> {
        None
    }
    fn gpus() -> Vec<String> {
        vec![]
    }
    fn load_average() -> Option<LoadAverage> {
        None
    }
}
