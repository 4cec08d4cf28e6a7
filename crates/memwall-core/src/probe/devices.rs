//! The device catalogue (`catalog/devices.toml`, embedded at build time): spec-sheet
//! memory bandwidth, memory configurations and peak FLOP/s of Apple silicon and
//! common NVIDIA parts, each with its source. Units and conventions are stated at
//! the top of the data file: bandwidth in decimal GB/s, memory in binary GiB,
//! compute in dense TFLOP/s.

use crate::units::{Bytes, Gbps, Gflops};
use serde::{Deserialize, Serialize};

/// The catalogue text.
pub const DEVICES_TOML: &str = include_str!("../../../../catalog/devices.toml");

/// Errors of the device catalogue.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The data file does not parse or breaks a rule.
    #[error("catalog/devices.toml: {0}")]
    Parse(String),
    /// No device of that name.
    #[error(
        "no device {name:?} in catalog/devices.toml; known: {known}. Or pass --bandwidth GBPS [--peak GFLOPS]"
    )]
    Unknown {
        /// What was asked for.
        name: String,
        /// Known names.
        known: String,
    },
}

/// One catalogue entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    /// Name (`M4 Pro`, `RTX 4090`).
    pub name: String,
    /// Other spellings (`Apple M4 Pro`, the name `nvidia-smi` prints).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Apple, NVIDIA.
    pub vendor: String,
    /// M1…M4, RTX 40, H100, …
    pub family: String,
    /// Spec memory bandwidth, decimal GB/s.
    pub bandwidth_gbps: f64,
    /// Memory configurations sold, binary GiB.
    pub memory_gib: Vec<f64>,
    /// Dense fp16/bf16 matrix rate, TFLOP/s (absent when the vendor gives none).
    pub fp16_tflops: Option<f64>,
    /// fp32 (non-tensor) rate, TFLOP/s.
    pub fp32_tflops: Option<f64>,
    /// `spec` (printed by the vendor) or `derived` (arithmetic in `note`).
    pub basis: String,
    /// Caveats and the arithmetic of derived numbers.
    pub note: Option<String>,
    /// URL of the spec sheet / announcement.
    pub source: String,
}

/// A device's compute peak from its spec sheet ([`Device::peak`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpecPeak {
    /// The peak rate.
    pub gflops: Gflops,
    /// Which rate it is, as a row labels it: `fp16/bf16 matrix (spec, dense)` or `fp32 (spec)`.
    pub kind: &'static str,
}

impl Device {
    /// Spec bandwidth.
    pub fn bandwidth(&self) -> Gbps {
        Gbps(self.bandwidth_gbps)
    }
    /// The compute roof for prefill: the fp16/bf16 matrix rate, else fp32, with its label.
    pub fn peak(&self) -> Option<SpecPeak> {
        let peak = |tflops: f64, kind| SpecPeak {
            gflops: Gflops(tflops * 1000.0),
            kind,
        };
        self.fp16_tflops
            .map(|t| peak(t, "fp16/bf16 matrix (spec, dense)"))
            .or(self.fp32_tflops.map(|t| peak(t, "fp32 (spec)")))
    }
    /// Memory configurations in bytes.
    pub fn memory(&self) -> Vec<Bytes> {
        self.memory_gib
            .iter()
            .map(|g| Bytes((g * crate::units::GIB) as u64))
            .collect()
    }
    fn matches(&self, want: &str) -> bool {
        let n = norm(want);
        norm(&self.name) == n || self.aliases.iter().any(|a| norm(a) == n)
    }
}

fn norm(s: &str) -> String {
    s.to_ascii_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    device: Vec<Device>,
}

/// The catalogue.
#[derive(Debug, Clone, Serialize)]
pub struct Devices {
    /// Entries in file order.
    pub devices: Vec<Device>,
}

impl Devices {
    /// The embedded catalogue.
    ///
    /// # Errors
    /// [`DeviceError::Parse`] when the data file is broken (a build-time bug).
    pub fn builtin() -> Result<Devices, DeviceError> {
        Devices::parse(DEVICES_TOML)
    }

    /// Parses and checks a catalogue: every entry has a source URL, a positive
    /// bandwidth, at least one memory size and a known basis; names are unique.
    ///
    /// # Errors
    /// [`DeviceError::Parse`] naming the entry.
    pub fn parse(text: &str) -> Result<Devices, DeviceError> {
        let f: File = toml::from_str(text).map_err(|e| DeviceError::Parse(e.to_string()))?;
        let mut seen = std::collections::HashSet::new();
        for d in &f.device {
            let bad = |p: &str| Err(DeviceError::Parse(format!("device {:?}: {p}", d.name)));
            if !d.source.starts_with("https://") {
                return bad("source must be an https:// URL");
            }
            if d.bandwidth_gbps <= 0.0 || d.bandwidth_gbps.is_nan() {
                return bad("bandwidth_gbps must be > 0");
            }
            if d.memory_gib.is_empty() {
                return bad("memory_gib needs at least one size");
            }
            if d.basis != "spec" && d.basis != "derived" {
                return bad("basis must be \"spec\" or \"derived\"");
            }
            if d.basis == "derived" && d.note.is_none() {
                return bad("a derived entry must show its arithmetic in note");
            }
            for n in std::iter::once(&d.name).chain(&d.aliases) {
                if !seen.insert(norm(n)) {
                    return bad(&format!("name or alias {n:?} is used twice"));
                }
            }
        }
        Ok(Devices { devices: f.device })
    }

    /// Finds a device by name or alias (case, spaces and punctuation ignored).
    ///
    /// # Errors
    /// [`DeviceError::Unknown`] listing the names.
    pub fn get(&self, name: &str) -> Result<&Device, DeviceError> {
        self.devices
            .iter()
            .find(|d| d.matches(name))
            .ok_or_else(|| DeviceError::Unknown {
                name: name.to_string(),
                known: self
                    .devices
                    .iter()
                    .map(|d| d.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// The catalogue entry of this host: the first of its CPU brand, then its GPUs, that
    /// [`Devices::find_in`] recognises (`None` for a CPU/GPU the catalogue does not list,
    /// e.g. a server CPU).
    pub fn for_host(&self, host: &crate::probe::hw::HostInfo) -> Option<&Device> {
        std::iter::once(host.cpu_model.as_str())
            .chain(host.gpus.iter().map(String::as_str))
            .find_map(|b| self.find_in(b))
    }

    /// The entry whose name or alias occurs in a CPU/GPU brand string
    /// (`Apple M4 Pro` → `M4 Pro`), preferring the longest match.
    pub fn find_in(&self, brand: &str) -> Option<&Device> {
        let b = format!(" {} ", brand.to_ascii_lowercase());
        self.devices
            .iter()
            .flat_map(|d| {
                std::iter::once(&d.name)
                    .chain(&d.aliases)
                    .map(move |n| (d, n))
            })
            .filter(|(_, n)| b.contains(&format!(" {} ", n.to_ascii_lowercase())))
            .max_by_key(|(_, n)| n.len())
            .map(|(d, _)| d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_catalogue_is_valid_and_covers_the_families() {
        let c = Devices::builtin().unwrap();
        for fam in [
            "M1", "M2", "M3", "M4", "RTX 30", "RTX 40", "RTX 50", "A100", "H100", "H200", "GB10",
        ] {
            assert!(
                c.devices.iter().any(|d| d.family == fam),
                "no device of family {fam}"
            );
        }
        for tier in [
            "M1 Pro",
            "M2 Max",
            "M3 Ultra",
            "M4 Pro",
            "H100 PCIe",
            "H100 SXM",
        ] {
            c.get(tier).unwrap();
        }
    }

    #[test]
    fn lookup_ignores_case_and_punctuation() {
        let c = Devices::builtin().unwrap();
        assert_eq!(c.get("m4pro").unwrap().bandwidth_gbps, 273.0);
        assert_eq!(c.get("Apple M4 Pro").unwrap().name, "M4 Pro");
        let e = c.get("M9 Mega").unwrap_err().to_string();
        assert!(e.contains("M4 Pro") && e.contains("--bandwidth"), "{e}");
        assert_eq!(c.find_in("Apple M4 Pro").unwrap().name, "M4 Pro");
        assert_eq!(
            c.find_in("NVIDIA GeForce RTX 4090").unwrap().name,
            "RTX 4090"
        );
        assert!(c.find_in("AMD EPYC 9654 96-Core Processor").is_none());
    }

    #[test]
    fn a_host_is_matched_by_its_cpu_then_its_gpus() {
        let c = Devices::builtin().unwrap();
        let host = |cpu: &str, gpus: &[&str]| crate::probe::hw::HostInfo {
            cpu_model: cpu.into(),
            cores_physical: 1,
            cores_logical: 1,
            ram: Bytes(1),
            os: String::new(),
            kernel: String::new(),
            arch: String::new(),
            llc: None,
            gpus: gpus.iter().map(|g| g.to_string()).collect(),
            hostname: String::new(),
        };
        let mac = host("Apple M4 Pro", &[]);
        assert_eq!(c.for_host(&mac).unwrap().name, "M4 Pro");
        let rig = host(
            "AMD EPYC 9654 96-Core Processor",
            &["NVIDIA GeForce RTX 4090"],
        );
        assert_eq!(c.for_host(&rig).unwrap().name, "RTX 4090");
        let bare = host("AMD EPYC 9654 96-Core Processor", &[]);
        assert!(c.for_host(&bare).is_none());
    }

    #[test]
    fn broken_entries_are_refused_by_name() {
        let t = r#"[[device]]
name = "X"
vendor = "V"
family = "F"
bandwidth_gbps = 100
memory_gib = [8]
basis = "spec"
source = "somewhere"
"#;
        let e = Devices::parse(t).unwrap_err().to_string();
        assert!(e.contains("\"X\"") && e.contains("https"), "{e}");
        let t2 = t
            .replace("somewhere", "https://x")
            .replace("\"spec\"", "\"derived\"");
        let e = Devices::parse(&t2).unwrap_err().to_string();
        assert!(e.contains("note"), "{e}");
    }
}
