//! Linux probes: `/sys/devices/system/cpu`, `/sys/class/power_supply`,
//! `/sys/class/thermal`, `/proc/vmstat`, and `nvidia-smi` when installed.

use super::{LoadAverage, Platform, PowerSource, Thermal, ThermalState};
use crate::units::Bytes;
use std::fs;
use std::path::Path;

pub(super) struct Os;

fn read(p: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// Parses sysfs cache sizes such as `32768K`, `1024K`, `2M`.
pub(crate) fn parse_cache_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1024),
        'M' => (&s[..s.len() - 1], 1024 * 1024),
        'G' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

/// Parses `/proc/vmstat` for `pswpout`.
pub(crate) fn parse_pswpout(vmstat: &str) -> Option<u64> {
    vmstat.lines().find_map(|l| {
        l.strip_prefix("pswpout ")
            .and_then(|v| v.trim().parse().ok())
    })
}

/// Parses `/proc/loadavg` (`0.52 0.61 0.70 1/234 5678`): its first three fields.
pub(crate) fn parse_loadavg(s: &str) -> Option<LoadAverage> {
    LoadAverage::from_fields(s)
}

/// The power source from a `/sys/class/power_supply`-shaped directory: each entry
/// has a `type` (`Mains`, `USB`, `Battery`, …), mains/USB an `online` flag,
/// batteries a `status` and a `capacity` in percent.
///
/// - a mains or USB supply online → AC;
/// - otherwise a battery `Discharging` → battery; `Charging`, `Full` or
///   `Not charging` (a charger is attached) → AC;
/// - anything else (no supply at all, as in most VMs and many desktops; only
///   offline supplies; a battery in state `Unknown`) → unknown: the OS did not say.
pub(crate) fn power_source_at(dir: &Path) -> PowerSource {
    let Ok(entries) = fs::read_dir(dir) else {
        return PowerSource::Unknown;
    };
    let mut mains_online = false;
    let mut battery: Option<(String, Option<f64>)> = None;
    for e in entries.filter_map(Result::ok) {
        let p = e.path();
        match read(p.join("type")).as_deref() {
            Some("Mains") | Some("USB") if read(p.join("online")).as_deref() == Some("1") => {
                mains_online = true;
            }
            Some("Battery") => {
                let status = read(p.join("status")).unwrap_or_default();
                let pct = read(p.join("capacity")).and_then(|c| c.parse().ok());
                // A discharging battery wins over one that is not (two-battery laptops).
                if battery.as_ref().is_none_or(|(s, _)| s != "Discharging") {
                    battery = Some((status, pct));
                }
            }
            _ => {}
        }
    }
    if mains_online {
        return PowerSource::Ac;
    }
    match battery {
        Some((status, pct)) if status == "Discharging" => PowerSource::Battery { percent: pct },
        Some((status, _)) if matches!(status.as_str(), "Charging" | "Full" | "Not charging") => {
            PowerSource::Ac
        }
        _ => PowerSource::Unknown,
    }
}

impl Platform for Os {
    fn llc_bytes() -> Option<Bytes> {
        let dir = fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
        dir.filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
            .filter_map(|e| {
                let p = e.path();
                let level: u32 = read(p.join("level"))?.parse().ok()?;
                let ty = read(p.join("type")).unwrap_or_default();
                if ty == "Instruction" {
                    return None;
                }
                Some((level, parse_cache_size(&read(p.join("size"))?)?))
            })
            .max_by_key(|(level, _)| *level)
            .map(|(_, size)| Bytes(size))
    }

    fn power_source() -> PowerSource {
        power_source_at(Path::new("/sys/class/power_supply"))
    }

    fn thermal() -> Thermal {
        let Ok(dir) = fs::read_dir("/sys/class/thermal") else {
            return Thermal {
                state: ThermalState::Unknown,
                max_celsius: None,
            };
        };
        let mut max_c: Option<f64> = None;
        let mut state = ThermalState::Unknown;
        for e in dir.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with("thermal_zone") {
                continue;
            }
            let p = e.path();
            let Some(t) = read(p.join("temp")).and_then(|t| t.parse::<f64>().ok()) else {
                continue;
            };
            let c = t / 1000.0;
            max_c = Some(max_c.map_or(c, |m: f64| m.max(c)));
            if state == ThermalState::Unknown {
                state = ThermalState::Nominal;
            }
            for i in 0..16 {
                let (Some(ty), Some(trip)) = (
                    read(p.join(format!("trip_point_{i}_type"))),
                    read(p.join(format!("trip_point_{i}_temp")))
                        .and_then(|t| t.parse::<f64>().ok()),
                ) else {
                    break;
                };
                if trip <= 0.0 || t < trip {
                    continue;
                }
                match ty.as_str() {
                    "critical" | "hot" => state = ThermalState::Critical,
                    "passive" if state != ThermalState::Critical => {
                        state = ThermalState::Throttling
                    }
                    _ => {}
                }
            }
        }
        Thermal {
            state,
            max_celsius: max_c,
        }
    }

    fn swap_out_pages() -> Option<u64> {
        parse_pswpout(&fs::read_to_string("/proc/vmstat").ok()?)
    }

    fn load_average() -> Option<LoadAverage> {
        parse_loadavg(&fs::read_to_string("/proc/loadavg").ok()?)
    }

    fn gpus() -> Vec<String> {
        let out = std::process::Command::new("nvidia-smi")
            .args(["--query-gpu=name,memory.total", "--format=csv,noheader"])
            .output();
        match out {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect(),
            _ => vec![],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_loadavg() {
        let l = parse_loadavg("0.52 0.61 1.70 1/234 5678\n").unwrap();
        assert_eq!((l.one, l.five, l.fifteen), (0.52, 0.61, 1.70));
        assert_eq!(l.to_string(), "0.52/0.61/1.70");
        for bad in [
            "",
            "0.52 0.61",
            "0.52 x 0.70 1/2 3",
            "-1 0 0 1/2 3",
            "NaN 0 0",
        ] {
            assert_eq!(parse_loadavg(bad), None, "{bad:?}");
        }
        // This machine's own file parses (Linux always has it).
        let own = std::fs::read_to_string("/proc/loadavg").unwrap();
        assert!(parse_loadavg(&own).is_some(), "{own:?}");
    }

    #[test]
    fn sysfs_cache_sizes() {
        assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("x"), None);
    }

    /// A fake `/sys/class/power_supply`: (entry, [(file, content)]).
    fn sysfs(entries: &[(&str, &[(&str, &str)])]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (name, files) in entries {
            let e = d.path().join(name);
            fs::create_dir(&e).unwrap();
            for (f, v) in *files {
                fs::write(e.join(f), format!("{v}\n")).unwrap();
            }
        }
        d
    }

    #[test]
    fn no_battery_and_no_mains_is_unknown_not_ac() {
        // A VM: the directory exists and is empty.
        assert_eq!(power_source_at(sysfs(&[]).path()), PowerSource::Unknown);
        // No directory at all.
        assert_eq!(
            power_source_at(Path::new("/nonexistent/power_supply")),
            PowerSource::Unknown
        );
        // Only an offline mains supply, no battery: nothing says what powers it.
        let d = sysfs(&[("AC", &[("type", "Mains"), ("online", "0")])]);
        assert_eq!(power_source_at(d.path()), PowerSource::Unknown);
        // A battery whose state is unknown, no mains entry.
        let d = sysfs(&[("BAT0", &[("type", "Battery"), ("status", "Unknown")])]);
        assert_eq!(power_source_at(d.path()), PowerSource::Unknown);
    }

    #[test]
    fn mains_and_batteries_are_read() {
        let d = sysfs(&[("AC", &[("type", "Mains"), ("online", "1")])]);
        assert_eq!(power_source_at(d.path()), PowerSource::Ac);
        let d = sysfs(&[
            ("AC", &[("type", "Mains"), ("online", "0")]),
            (
                "BAT0",
                &[
                    ("type", "Battery"),
                    ("status", "Discharging"),
                    ("capacity", "57"),
                ],
            ),
        ]);
        assert_eq!(
            power_source_at(d.path()),
            PowerSource::Battery {
                percent: Some(57.0)
            }
        );
        // Two batteries, the second discharging.
        let d = sysfs(&[
            ("BAT0", &[("type", "Battery"), ("status", "Not charging")]),
            ("BAT1", &[("type", "Battery"), ("status", "Discharging")]),
        ]);
        assert_eq!(
            power_source_at(d.path()),
            PowerSource::Battery { percent: None }
        );
        for s in ["Charging", "Full", "Not charging"] {
            let d = sysfs(&[("BAT0", &[("type", "Battery"), ("status", s)])]);
            assert_eq!(power_source_at(d.path()), PowerSource::Ac, "{s}");
        }
        // USB-C power delivery online while the battery reports discharging: the supply wins.
        let d = sysfs(&[
            (
                "ucsi-source-psy-USBC000:001",
                &[("type", "USB"), ("online", "1")],
            ),
            ("BAT0", &[("type", "Battery"), ("status", "Discharging")]),
        ]);
        assert_eq!(power_source_at(d.path()), PowerSource::Ac);
    }

    #[test]
    fn vmstat_pswpout() {
        assert_eq!(parse_pswpout("pswpin 3\npswpout 42\npgfault 1"), Some(42));
        assert_eq!(parse_pswpout("pswpin 3"), None);
    }
}
