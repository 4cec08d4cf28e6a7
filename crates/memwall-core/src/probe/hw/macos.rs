//! macOS probes through the system's own tools: `sysctl`, `pmset`, `vm_stat`,
//! `system_profiler`. Kept to one small file so the Apple path stays reviewable.
//! The parsers are plain functions, compiled and tested on every OS; only the
//! [`Platform`] implementation runs the tools.

use super::{LoadAverage, Platform, PowerSource, Thermal, ThermalState};
use crate::units::Bytes;
use std::process::Command;

pub(super) struct Os;

fn run(cmd: &str, args: &[&str]) -> Option<String> {
    let o = Command::new(cmd).args(args).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The power source from `pmset -g batt` (`None`: pmset did not run). "Now drawing
/// from 'Battery Power'" → battery (with the percentage of the first battery line);
/// 'AC Power' → AC; anything else (no output, another source such as 'UPS Power'
/// without a battery line, garbage) → unknown.
pub(crate) fn parse_pmset_batt(out: Option<&str>) -> PowerSource {
    match out {
        Some(s) if s.contains("'Battery Power'") => {
            let pct = s
                .split('%')
                .next()
                .and_then(|h| h.rsplit(['\t', ' ']).next())
                .and_then(|p| p.trim().parse().ok());
            PowerSource::Battery { percent: pct }
        }
        Some(s) if s.contains("'AC Power'") => PowerSource::Ac,
        _ => PowerSource::Unknown,
    }
}

/// The thermal state from `pmset -g therm` (`None`: pmset did not run).
/// `CPU_Speed_Limit = 100` → nominal, below 100 → throttling. When pmset prints no
/// speed limit (Apple Silicon prints only "No thermal warning level has been
/// recorded" notes), or nothing, or garbage, the state is unknown: silence is not
/// evidence of a cool machine.
pub(crate) fn parse_pmset_therm(out: Option<&str>) -> ThermalState {
    let Some(s) = out else {
        return ThermalState::Unknown;
    };
    match s.lines().find_map(|l| l.split("CPU_Speed_Limit").nth(1)) {
        Some(v) => match v.trim_start_matches([' ', '\t', '=']).trim().parse::<u32>() {
            Ok(100) => ThermalState::Nominal,
            Ok(n) if n < 100 => ThermalState::Throttling,
            _ => ThermalState::Unknown,
        },
        None => ThermalState::Unknown,
    }
}

/// The load averages from `sysctl -n vm.loadavg` (`{ 1.92 2.06 2.13 }`).
pub(crate) fn parse_sysctl_loadavg(out: &str) -> Option<LoadAverage> {
    LoadAverage::from_fields(out.trim().trim_start_matches('{').trim_end_matches('}'))
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
        parse_pmset_batt(run("pmset", &["-g", "batt"]).as_deref())
    }

    fn thermal() -> Thermal {
        Thermal {
            state: parse_pmset_therm(run("pmset", &["-g", "therm"]).as_deref()),
            max_celsius: None,
        }
    }

    fn swap_out_pages() -> Option<u64> {
        let s = run("vm_stat", &[])?;
        s.lines()
            .find_map(|l| l.strip_prefix("Swapouts:"))
            .and_then(|v| v.trim().trim_end_matches('.').parse().ok())
    }

    fn load_average() -> Option<LoadAverage> {
        parse_sysctl_loadavg(&run("sysctl", &["-n", "vm.loadavg"])?)
    }

    fn gpus() -> Vec<String> {
        run("sysctl", &["-n", "machdep.cpu.brand_string"])
            .map(|s| vec![format!("{} GPU (unified memory)", s.trim())])
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctl_loadavg() {
        let l = parse_sysctl_loadavg("{ 1.92 2.06 2.13 }\n").unwrap();
        assert_eq!((l.one, l.five, l.fifteen), (1.92, 2.06, 2.13));
        assert_eq!(l.to_string(), "1.92/2.06/2.13");
        for bad in ["", "{ }", "{ 1.92 2.06 }", "garbage"] {
            assert_eq!(parse_sysctl_loadavg(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn thermal_is_unknown_when_pmset_says_nothing() {
        for out in [
            None,
            Some(""),
            Some("\n\n"),
            Some("garbage \u{1}\u{2} output"),
            Some("CPU_Speed_Limit = lots"),
            Some("CPU_Speed_Limit = 250"),
            // Apple Silicon: notes only, no speed limit.
            Some(
                "Note: No thermal warning level has been recorded\nNote: No performance warning level has been recorded\nNote: No CPU power status has been recorded\n",
            ),
        ] {
            assert_eq!(parse_pmset_therm(out), ThermalState::Unknown, "{out:?}");
        }
        let intel = "Note: No thermal warning level has been recorded\nNote: No performance warning level has been recorded\n2026-01-01 CPU Power notify\n\tCPU_Scheduler_Limit \t= 100\n\tCPU_Available_CPUs \t= 8\n\tCPU_Speed_Limit \t= 100\n";
        assert_eq!(parse_pmset_therm(Some(intel)), ThermalState::Nominal);
        assert_eq!(
            parse_pmset_therm(Some(
                &intel.replace("Speed_Limit \t= 100", "Speed_Limit \t= 63")
            )),
            ThermalState::Throttling
        );
    }

    #[test]
    fn power_is_unknown_when_pmset_says_nothing() {
        for out in [
            None,
            Some(""),
            Some("garbage"),
            Some("Now drawing from 'UPS Power'\n"),
        ] {
            assert_eq!(parse_pmset_batt(out), PowerSource::Unknown, "{out:?}");
        }
        assert_eq!(
            parse_pmset_batt(Some(
                "Now drawing from 'AC Power'\n -InternalBattery-0 (id=4653155)\t100%; charged; 0:00 remaining present: true\n"
            )),
            PowerSource::Ac
        );
        assert_eq!(
            parse_pmset_batt(Some(
                "Now drawing from 'Battery Power'\n -InternalBattery-0 (id=4653155)\t85%; discharging; 4:51 remaining present: true\n"
            )),
            PowerSource::Battery {
                percent: Some(85.0)
            }
        );
    }
}
