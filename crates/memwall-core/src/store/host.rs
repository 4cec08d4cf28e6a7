//! Which machine a stored row was measured on.
//!
//! A hostname alone does not tell machines apart: cloud VMs and containers are often
//! all called `vm` or `localhost`. A [`HostKey`] is what each run stores about its
//! machine and what makes a roof: the hostname, the CPU model, the logical core count
//! and the names of the GPUs. Two runs are on the same machine when all four agree.
//! Nothing is guessed: every part comes from columns the run (or bench row) already
//! holds (`hostname`, `cpu_info`, `cores_logical`, and `host_json.gpus` or
//! `gpu_info`), so rows stored before this key existed get the same key as new ones.
//!
//! The key prints as a readable label, the same one the report, the roofline view and
//! the independent verifier (`tools/verify/verify.py`, which writes these rules out
//! again) use:
//!
//! ```
//! use memwall_core::store::host::HostKey;
//! let cpu = HostKey::new("vm", "Intel(R) Xeon(R) Processor", 2, "");
//! let gpu = HostKey::new("vm", "Intel(R) Xeon(R) Processor", 16, "NVIDIA H200, 143771 MiB");
//! assert_eq!(cpu.label(), "vm (Intel(R) Xeon(R) Processor, 2 cores)");
//! assert_eq!(gpu.label(), "vm (Intel(R) Xeon(R) Processor, 16 cores, NVIDIA H200)");
//! assert_ne!(cpu, gpu);
//! ```

use crate::store::record::BenchRecord;
use serde::Serialize;

/// One machine, as its stored rows describe it. Ordered by hostname, CPU, cores, GPUs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct HostKey {
    /// `hostname` as stored.
    pub hostname: String,
    /// The CPU brand string (`cpu_info`).
    pub cpu: String,
    /// Logical CPUs (`cores_logical`).
    pub cores_logical: i64,
    /// GPU names ([`gpu_names`] of the stored GPU list), in stored order.
    pub gpus: Vec<String>,
}

impl HostKey {
    /// The key of a machine from its stored facts; `gpu_info` is the stored GPU list
    /// (`bench_results.gpu_info`, or `host_json.gpus` joined with `", "`).
    pub fn new(hostname: &str, cpu: &str, cores_logical: i64, gpu_info: &str) -> HostKey {
        HostKey {
            hostname: hostname.trim().to_string(),
            cpu: cpu.trim().to_string(),
            cores_logical,
            gpus: gpu_names(gpu_info),
        }
    }

    /// The machine a bench row was measured on, from the row's own columns.
    pub fn of_bench(r: &BenchRecord) -> HostKey {
        HostKey::new(&r.hostname, &r.cpu_info, r.cores_logical, &r.gpu_info)
    }

    /// The machine of a `runs` row: its columns and the GPU list in its `host_json`
    /// (a `host_json` without `gpus` means none were recorded).
    ///
    /// # Errors
    /// The reason, when `host_json` is not a JSON object or its `gpus` is not a list of
    /// strings.
    pub fn of_run(
        hostname: &str,
        cpu: &str,
        cores_logical: i64,
        host_json: &str,
    ) -> Result<HostKey, String> {
        let v: serde_json::Value =
            serde_json::from_str(host_json).map_err(|e| format!("host_json is not JSON ({e})"))?;
        let obj = v
            .as_object()
            .ok_or("host_json is not a JSON object (the run's HostInfo)")?;
        let gpus: Vec<&str> = match obj.get("gpus") {
            None | Some(serde_json::Value::Null) => vec![],
            Some(serde_json::Value::Array(a)) => a
                .iter()
                .map(|g| {
                    g.as_str()
                        .ok_or("host_json.gpus holds a value that is not a string")
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("host_json.gpus is not a list".into()),
        };
        Ok(HostKey::new(hostname, cpu, cores_logical, &gpus.join(", ")))
    }

    /// `hostname (CPU, N cores[, GPUs])`: `vm (Intel(R) Xeon(R) Processor, 16 cores,
    /// NVIDIA H200)`. Repeated GPUs print once with a count (`2× NVIDIA H200`).
    pub fn label(&self) -> String {
        let mut parts = Vec::new();
        if !self.cpu.is_empty() {
            parts.push(self.cpu.clone());
        }
        parts.push(match self.cores_logical {
            1 => "1 core".to_string(),
            n => format!("{n} cores"),
        });
        let mut seen: Vec<(&str, usize)> = Vec::new();
        for g in &self.gpus {
            match seen.iter_mut().find(|(n, _)| *n == g) {
                Some((_, c)) => *c += 1,
                None => seen.push((g, 1)),
            }
        }
        for (g, c) in seen {
            parts.push(if c > 1 {
                format!("{c}× {g}")
            } else {
                g.to_string()
            });
        }
        format!("{} ({})", self.hostname, parts.join(", "))
    }

    /// The label as a file-name part: ASCII letters and digits, runs of anything else
    /// as one `-` (`vm-Intel-R-Xeon-R-Processor-16-cores-NVIDIA-H200`).
    pub fn slug(&self) -> String {
        let mut out = String::new();
        for c in self.label().chars() {
            if c.is_ascii_alphanumeric() {
                out.push(c);
            } else if !out.ends_with('-') {
                out.push('-');
            }
        }
        out.trim_matches('-').to_string()
    }
}

impl std::fmt::Display for HostKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

/// The GPU names in a stored GPU list. memwall stores each GPU as `nvidia-smi`'s
/// `name, memory.total` (`NVIDIA H200, 143771 MiB`), several joined with `", "`, so
/// the list is split at commas and the memory sizes (a number and a unit) are left
/// out; other entries (`Apple M2 Max GPU (unified memory)`) are kept whole.
pub fn gpu_names(gpu_info: &str) -> Vec<String> {
    gpu_info
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty() && !is_memory_size(p))
        .map(String::from)
        .collect()
}

/// `143771 MiB`, `80 GB`, `16.0 GiB`.
fn is_memory_size(p: &str) -> bool {
    let Some((n, unit)) = p.split_once(' ') else {
        return false;
    };
    n.parse::<f64>().is_ok() && ["KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB"].contains(&unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_machines_called_vm_are_two_hosts() {
        // What the two machines memwall has run on store (runs.host_json of
        // results/h200/call3 and of this 2-core VM's store).
        let h200 = HostKey::of_run(
            "vm",
            "Intel(R) Xeon(R) Processor",
            16,
            r#"{"cpu_model":"Intel(R) Xeon(R) Processor","cores_logical":16,"gpus":["NVIDIA H200, 143771 MiB"],"hostname":"vm"}"#,
        )
        .unwrap();
        let small = HostKey::of_run(
            "vm",
            "Intel(R) Xeon(R) Processor",
            2,
            r#"{"cpu_model":"Intel(R) Xeon(R) Processor","cores_logical":2,"gpus":[],"hostname":"vm"}"#,
        )
        .unwrap();
        assert_ne!(h200, small);
        assert_eq!(
            h200.label(),
            "vm (Intel(R) Xeon(R) Processor, 16 cores, NVIDIA H200)"
        );
        assert_eq!(small.label(), "vm (Intel(R) Xeon(R) Processor, 2 cores)");
        assert_eq!(
            h200.slug(),
            "vm-Intel-R-Xeon-R-Processor-16-cores-NVIDIA-H200"
        );
        // A bench row of the H200 (gpu_info = the GPU list joined) has its run's key.
        let b = BenchRecord {
            hostname: "vm".into(),
            cpu_info: "Intel(R) Xeon(R) Processor".into(),
            cores_logical: 16,
            gpu_info: "NVIDIA H200, 143771 MiB".into(),
            ..BenchRecord::example()
        };
        assert_eq!(HostKey::of_bench(&b), h200);
    }

    #[test]
    fn gpu_lists_keep_names_and_drop_memory_sizes() {
        assert_eq!(
            gpu_names("NVIDIA H200, 143771 MiB, NVIDIA H200, 143771 MiB"),
            ["NVIDIA H200", "NVIDIA H200"]
        );
        assert_eq!(
            HostKey::new(
                "n",
                "c",
                1,
                "NVIDIA H200, 143771 MiB, NVIDIA H200, 143771 MiB"
            )
            .label(),
            "n (c, 1 core, 2× NVIDIA H200)"
        );
        assert_eq!(
            gpu_names("Apple M2 Max GPU (unified memory)"),
            ["Apple M2 Max GPU (unified memory)"]
        );
        assert!(gpu_names("").is_empty() && gpu_names(" , ").is_empty());
        assert_eq!(HostKey::new("h", "", 4, "").label(), "h (4 cores)");
    }

    #[test]
    fn a_host_json_that_is_not_a_host_is_an_error_naming_the_field() {
        assert_eq!(
            HostKey::of_run("h", "c", 2, "{}").unwrap(),
            HostKey::new("h", "c", 2, "")
        );
        for (bad, want) in [
            ("not json", "host_json is not JSON"),
            ("[1]", "not a JSON object"),
            (r#"{"gpus": "H200"}"#, "host_json.gpus is not a list"),
            (r#"{"gpus": [1]}"#, "not a string"),
        ] {
            let e = HostKey::of_run("h", "c", 2, bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }
}
