//! macOS probes through the system's own tools: `sysctl`, `pmset`, `vm_stat`,
//! `system_profiler`. Kept to one small file so the Apple path stays reviewable.
//! (Not built on the Linux CI; the parsers are plain functions.)

use super::{Platform, PowerSource, Thermal, ThermalState};
use crate::units::Bytes;
use std::process::Command;

pub(super) struct Os;

fn run(cmd: &str, args: &[&str]) -> Option<String> {
    let o = Command::new(cmd).args(args).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

impl Platform for Os {
    fn llc_bytes() -> Option<Bytes> {
        // Apple Silicon has no L3 visible to sysctl; the P-cluster L2 is the LLC the CPU sees.
        [
            "hw.l3cachesize",
            "hw.perflevel0.l2cachesize",
            "hw.l2cachesize",
        ]
        .iter()
        .find_map(|k| {
            run("sysctl", &["-n", k])?
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|&v| v > 0)
        })
        .map(Bytes)
    }

    fn power_source() -> PowerSource {
        match run("pmset", &["-g", "batt"]) {
            Some(s) if s.contains("'Battery Power'") => {
                let pct = s
                    .split('%')
                    .next()
                    .and_then(|h| h.rsplit('\t').next())
                    .and_then(|p| p.trim().parse().ok());
                PowerSource::Battery { percent: pct }
            }
            Some(s) if s.contains("'AC Power'") => PowerSource::Ac,
            _ => PowerSource::Unknown,
        }
    }

    fn thermal() -> Thermal {
        // `pmset -g therm` prints "CPU_Speed_Limit = 100" when not throttled.
        let state = match run("pmset", &["-g", "therm"]) {
            Some(s) => match s.lines().find_map(|l| l.split("CPU_Speed_Limit").nth(1)) {
                Some(v) => match v.trim_start_matches([' ', '=']).trim().parse::<u32>() {
                    Ok(100) => ThermalState::Nominal,
                    Ok(_) => ThermalState::Throttling,
                    Err(_) => ThermalState::Unknown,
                },
                None => ThermalState::Nominal,
            },
            None => ThermalState::Unknown,
        };
        Thermal {
            state,
            max_celsius: None,
        }
    }

    fn swap_out_pages() -> Option<u64> {
        let s = run("vm_stat", &[])?;
        s.lines()
            .find_map(|l| l.strip_prefix("Swapouts:"))
            .and_then(|v| v.trim().trim_end_matches('.').parse().ok())
    }

    fn gpus() -> Vec<String> {
        run("sysctl", &["-n", "machdep.cpu.brand_string"])
            .map(|s| vec![format!("{} GPU (unified memory)", s.trim())])
            .unwrap_or_default()
    }
}
