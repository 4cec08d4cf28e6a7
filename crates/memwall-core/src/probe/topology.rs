//! How the NVIDIA GPUs of this machine are connected: every GPU with its memory, and
//! the link between each pair (NVLink, or the PCIe path between them), as NVML reports
//! the topology — the matrix `nvidia-smi topo -m` prints.
//!
//! NVML (`libnvidia-ml.so.1`) is loaded at run time, as the energy sampler loads it
//! ([`crate::measure::sampler`]): memwall builds and runs without it, and there
//! [`probe`] says why nothing was read. Calls (NVML API reference,
//! <https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html>):
//! - `nvmlDeviceGetMemoryInfo` (total memory), `nvmlDeviceGetPciInfo_v3` (bus id);
//! - NVLink: `nvmlDeviceGetNvLinkState` over links `0..NVML_NVLINK_MAX_LINKS` and
//!   `nvmlDeviceGetNvLinkRemotePciInfo_v2`: a link whose far end is the other GPU
//!   counts for the pair; through an NVSwitch the far end is the switch, and
//!   `nvmlDeviceGetP2PStatus(…, NVML_P2P_CAPS_INDEX_NVLINK)` says the pair talks over
//!   NVLink (counted then as the GPU's active links, as `nvidia-smi topo -m` does);
//! - otherwise PCIe: `nvmlDeviceGetTopologyCommonAncestor`, the closest common
//!   ancestor of the two GPUs ([`PcieHop`]).
//!
//! NVML numbers GPUs in PCI bus order; CUDA's default order may differ
//! (`CUDA_DEVICE_ORDER=PCI_BUS_ID` makes them agree), so each GPU's bus id is listed.
//! The table itself is a pure function ([`render`]) over [`Topology`], tested with
//! made-up matrices.

use crate::units::Bytes;
use serde::{Deserialize, Serialize};

/// The PCIe path between two GPUs: NVML's `nvmlGpuTopologyLevel_t`, with the labels
/// `nvidia-smi topo -m` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PcieHop {
    /// `NVML_TOPOLOGY_INTERNAL` (0): both on one board.
    Board,
    /// `NVML_TOPOLOGY_SINGLE` (10), `PIX`: at most one PCIe bridge.
    Single,
    /// `NVML_TOPOLOGY_MULTIPLE` (20), `PXB`: several PCIe bridges, no host bridge.
    Multiple,
    /// `NVML_TOPOLOGY_HOSTBRIDGE` (30), `PHB`: through a PCIe host bridge (the CPU).
    HostBridge,
    /// `NVML_TOPOLOGY_NODE` (40), `NODE`: across host bridges within one NUMA node.
    Node,
    /// `NVML_TOPOLOGY_SYSTEM` (50), `SYS`: across NUMA nodes (the SMP interconnect).
    System,
}

impl PcieHop {
    /// From NVML's level code; `None` for a code NVML does not document.
    pub fn from_nvml(level: i32) -> Option<PcieHop> {
        Some(match level {
            0 => PcieHop::Board,
            10 => PcieHop::Single,
            20 => PcieHop::Multiple,
            30 => PcieHop::HostBridge,
            40 => PcieHop::Node,
            50 => PcieHop::System,
            _ => return None,
        })
    }

    /// `nvidia-smi topo -m`'s label.
    pub fn label(self) -> &'static str {
        match self {
            PcieHop::Board => "BOARD",
            PcieHop::Single => "PIX",
            PcieHop::Multiple => "PXB",
            PcieHop::HostBridge => "PHB",
            PcieHop::Node => "NODE",
            PcieHop::System => "SYS",
        }
    }
}

/// The link between two GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Link {
    /// The diagonal.
    Same,
    /// NVLink, `links` bonded links (`NV18`); `switched` when through an NVSwitch
    /// (then the count is the GPU's active links, as `nvidia-smi topo -m` shows it).
    NvLink {
        links: u32,
        /// Through an NVSwitch.
        switched: bool,
    },
    /// PCIe only, with the closest common ancestor.
    Pcie {
        /// The path.
        hop: PcieHop,
    },
    /// NVML did not say; the reason.
    Unknown { why: String },
}

impl Link {
    /// The matrix cell: `X`, `NV18`, `PIX` … `SYS`, `?`.
    pub fn label(&self) -> String {
        match self {
            Link::Same => "X".into(),
            Link::NvLink { links, .. } => format!("NV{links}"),
            Link::Pcie { hop } => hop.label().into(),
            Link::Unknown { .. } => "?".into(),
        }
    }
}

/// One GPU as NVML lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopoGpu {
    /// NVML's index (PCI bus order).
    pub index: u32,
    /// Name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Total memory (`None`: NVML did not say).
    pub memory: Option<Bytes>,
    /// PCI bus id (`00000000:18:00.0`).
    pub pci_bus_id: String,
}

/// The GPUs and the link between each pair (`links[i][j]`, square, diagonal
/// [`Link::Same`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// The GPUs, in NVML's order.
    pub gpus: Vec<TopoGpu>,
    /// The pairwise links.
    pub links: Vec<Vec<Link>>,
}

/// A topology that cannot be shown or NVML's failure.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TopologyError {
    /// NVML is not on this machine or failed.
    #[error("{0}")]
    Nvml(String),
    /// The link matrix does not match the GPU list.
    #[error("topology: {0}")]
    Shape(String),
}

impl Topology {
    /// Checks that `links` is square over `gpus` with [`Link::Same`] on the diagonal
    /// and nowhere else.
    ///
    /// # Errors
    /// [`TopologyError::Shape`] naming the row.
    pub fn check(&self) -> Result<(), TopologyError> {
        let n = self.gpus.len();
        if self.links.len() != n {
            return Err(TopologyError::Shape(format!(
                "{} GPUs but {} rows of links",
                n,
                self.links.len()
            )));
        }
        for (i, row) in self.links.iter().enumerate() {
            if row.len() != n {
                return Err(TopologyError::Shape(format!(
                    "row {i} has {} links for {n} GPUs",
                    row.len()
                )));
            }
            for (j, l) in row.iter().enumerate() {
                if (i == j) != (*l == Link::Same) {
                    return Err(TopologyError::Shape(format!(
                        "link {i}→{j} is {}: only the diagonal is X",
                        l.label()
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The table `memwall hw` prints: one line per GPU (index, name, memory, bus id),
/// then the link matrix with `nvidia-smi topo -m`'s labels and the legend of the
/// labels that occur. No GPU: one line saying so.
///
/// # Errors
/// [`TopologyError::Shape`] when the matrix does not match the GPUs ([`Topology::check`]).
pub fn render(t: &Topology) -> Result<String, TopologyError> {
    use std::fmt::Write;
    t.check()?;
    let mut s = String::new();
    if t.gpus.is_empty() {
        s.push_str("gpus       — (NVML lists none)\n");
        return Ok(s);
    }
    for g in &t.gpus {
        let mem = g.memory.map_or("memory —".to_string(), |m| {
            format!("{:.1} GiB ({:.1} GB)", m.gib(), m.gb())
        });
        let _ = writeln!(
            s,
            "gpu{:<7} {}, {mem}, PCI {}",
            g.index, g.name, g.pci_bus_id
        );
    }
    let cells: Vec<Vec<String>> = t
        .links
        .iter()
        .map(|r| r.iter().map(Link::label).collect())
        .collect();
    let w = cells
        .iter()
        .flatten()
        .map(|c| c.len())
        .chain(t.gpus.iter().map(|g| format!("GPU{}", g.index).len()))
        .max()
        .unwrap_or(1);
    let _ = write!(s, "{:<10}", "links");
    for g in &t.gpus {
        let _ = write!(s, " {:>w$}", format!("GPU{}", g.index));
    }
    s.push('\n');
    for (g, row) in t.gpus.iter().zip(&cells) {
        let _ = write!(s, "{:<10}", format!("GPU{}", g.index));
        for c in row {
            let _ = write!(s, " {c:>w$}");
        }
        s.push('\n');
    }
    let mut legend: Vec<String> = Vec::new();
    let mut add = |l: String| {
        if !legend.contains(&l) {
            legend.push(l);
        }
    };
    for l in t.links.iter().flatten() {
        match l {
            Link::Same => {}
            Link::NvLink { switched, .. } => add(format!(
                "NV# = # bonded NVLinks{}",
                if *switched {
                    " (through an NVSwitch)"
                } else {
                    ""
                }
            )),
            Link::Pcie { hop } => add(format!(
                "{} = {}",
                hop.label(),
                match hop {
                    PcieHop::Board => "PCIe on one board",
                    PcieHop::Single => "PCIe through at most one bridge",
                    PcieHop::Multiple => "PCIe through several bridges (no host bridge)",
                    PcieHop::HostBridge => "PCIe through the host bridge (the CPU)",
                    PcieHop::Node => "PCIe across host bridges of one NUMA node",
                    PcieHop::System => "PCIe across NUMA nodes",
                }
            )),
            Link::Unknown { why } => add(format!("? = not reported: {why}")),
        }
    }
    for l in legend {
        let _ = writeln!(s, "           {l}");
    }
    Ok(s)
}

/// Reads the topology through NVML.
///
/// # Errors
/// [`TopologyError::Nvml`] when the library is missing or a call fails.
pub fn probe() -> Result<Topology, TopologyError> {
    nvml::read().map_err(TopologyError::Nvml)
}

mod nvml {
    //! The NVML calls, loaded with `dlopen` (no link-time dependency).
    use super::{Link, PcieHop, TopoGpu, Topology};
    use crate::units::Bytes;
    use std::ffi::{CStr, c_char, c_int, c_uint, c_void};

    const LIBRARY: &str = "libnvidia-ml.so.1";
    /// `NVML_NVLINK_MAX_LINKS` (nvml.h, NVML 12/13).
    const MAX_LINKS: c_uint = 18;
    /// `NVML_P2P_CAPS_INDEX_NVLINK`.
    const P2P_NVLINK: c_int = 2;
    /// `NVML_P2P_STATUS_OK`.
    const P2P_OK: c_int = 0;
    /// `NVML_FEATURE_ENABLED`.
    const ENABLED: c_int = 1;
    /// `sizeof(nvmlPciInfo_t)`: busIdLegacy[16], domain, bus, device, pciDeviceId,
    /// pciSubSystemId (u32 each), busId[32] = 68 bytes; read through a larger zeroed
    /// buffer at those offsets.
    const PCI_INFO_BYTES: usize = 128;
    const PCI_DOMAIN: usize = 16;
    const PCI_BUS: usize = 20;
    const PCI_DEVICE: usize = 24;
    const PCI_BUS_ID: usize = 36;

    type Dev = *mut c_void;
    type Ret = c_int;

    #[repr(C)]
    #[derive(Default)]
    struct Memory {
        total: u64,
        free: u64,
        used: u64,
    }

    struct Lib(*mut c_void);

    impl Drop for Lib {
        fn drop(&mut self) {
            // SAFETY: a live dlopen handle, closed once.
            unsafe {
                libc::dlclose(self.0);
            }
        }
    }

    unsafe fn sym<T: Copy>(lib: &Lib, name: &CStr) -> Result<T, String> {
        // SAFETY: a live dlopen handle; T is the symbol's function-pointer type.
        let p = unsafe { libc::dlsym(lib.0, name.as_ptr()) };
        if p.is_null() {
            return Err(format!("{LIBRARY} has no {}", name.to_string_lossy()));
        }
        // SAFETY: a non-null symbol of NVML's documented signature.
        Ok(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
    }

    fn pci_key(buf: &[u8; PCI_INFO_BYTES]) -> (u32, u32, u32) {
        let u = |o: usize| u32::from_ne_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
        (u(PCI_DOMAIN), u(PCI_BUS), u(PCI_DEVICE))
    }

    fn pci_bus_id(buf: &[u8; PCI_INFO_BYTES]) -> String {
        let s = &buf[PCI_BUS_ID..PCI_BUS_ID + 32];
        let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
        String::from_utf8_lossy(&s[..end]).into_owned()
    }

    pub(super) fn read() -> Result<Topology, String> {
        let path = std::ffi::CString::new(LIBRARY).expect("no NUL");
        // SAFETY: dlopen with a valid C string.
        let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            return Err(format!(
                "no NVIDIA driver: {LIBRARY} not found (a machine without an NVIDIA GPU)"
            ));
        }
        let lib = Lib(h);
        // SAFETY: NVML's documented C API, called with valid pointers into live
        // buffers of the documented sizes; nvmlShutdown matches the successful init.
        unsafe {
            let init: unsafe extern "C" fn() -> Ret = sym(&lib, c"nvmlInit_v2")?;
            let shutdown: unsafe extern "C" fn() -> Ret = sym(&lib, c"nvmlShutdown")?;
            let count: unsafe extern "C" fn(*mut c_uint) -> Ret =
                sym(&lib, c"nvmlDeviceGetCount_v2")?;
            let handle: unsafe extern "C" fn(c_uint, *mut Dev) -> Ret =
                sym(&lib, c"nvmlDeviceGetHandleByIndex_v2")?;
            let name: unsafe extern "C" fn(Dev, *mut c_char, c_uint) -> Ret =
                sym(&lib, c"nvmlDeviceGetName")?;
            let memory: unsafe extern "C" fn(Dev, *mut Memory) -> Ret =
                sym(&lib, c"nvmlDeviceGetMemoryInfo")?;
            let pci: unsafe extern "C" fn(Dev, *mut u8) -> Ret =
                sym(&lib, c"nvmlDeviceGetPciInfo_v3")?;
            let ancestor: unsafe extern "C" fn(Dev, Dev, *mut c_int) -> Ret =
                sym(&lib, c"nvmlDeviceGetTopologyCommonAncestor")?;
            let p2p: unsafe extern "C" fn(Dev, Dev, c_int, *mut c_int) -> Ret =
                sym(&lib, c"nvmlDeviceGetP2PStatus")?;
            let nvlink_state: unsafe extern "C" fn(Dev, c_uint, *mut c_int) -> Ret =
                sym(&lib, c"nvmlDeviceGetNvLinkState")?;
            let nvlink_remote: unsafe extern "C" fn(Dev, c_uint, *mut u8) -> Ret =
                sym(&lib, c"nvmlDeviceGetNvLinkRemotePciInfo_v2")?;
            let r = init();
            if r != 0 {
                return Err(format!("nvmlInit_v2 returned {r} (driver not loaded?)"));
            }
            let out: Result<Topology, String> = 'query: {
                let mut n: c_uint = 0;
                if count(&mut n) != 0 {
                    break 'query Err("nvmlDeviceGetCount_v2 failed".to_string());
                }
                let mut devs = Vec::new();
                let mut gpus = Vec::new();
                let mut keys = Vec::new();
                for i in 0..n {
                    let mut d: Dev = std::ptr::null_mut();
                    if handle(i, &mut d) != 0 {
                        break 'query Err(format!("nvmlDeviceGetHandleByIndex_v2({i}) failed"));
                    }
                    let mut buf = [0 as c_char; 96];
                    let nm = if name(d, buf.as_mut_ptr(), buf.len() as c_uint) == 0 {
                        CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
                    } else {
                        format!("GPU {i}")
                    };
                    let mut m = Memory::default();
                    let mem = (memory(d, &mut m) == 0).then_some(Bytes(m.total));
                    let mut p = [0u8; PCI_INFO_BYTES];
                    let (bus_id, key) = if pci(d, p.as_mut_ptr()) == 0 {
                        (pci_bus_id(&p), Some(pci_key(&p)))
                    } else {
                        ("—".to_string(), None)
                    };
                    devs.push(d);
                    keys.push(key);
                    gpus.push(TopoGpu {
                        index: i,
                        name: nm,
                        memory: mem,
                        pci_bus_id: bus_id,
                    });
                }
                // Active NVLinks of each GPU and the PCI key of each link's far end.
                let mut far: Vec<Vec<Option<(u32, u32, u32)>>> = Vec::new();
                for &d in &devs {
                    let mut ends = Vec::new();
                    for l in 0..MAX_LINKS {
                        let mut st: c_int = 0;
                        if nvlink_state(d, l, &mut st) != 0 || st != ENABLED {
                            continue;
                        }
                        let mut p = [0u8; PCI_INFO_BYTES];
                        ends.push((nvlink_remote(d, l, p.as_mut_ptr()) == 0).then(|| pci_key(&p)));
                    }
                    far.push(ends);
                }
                let mut links = Vec::new();
                for i in 0..devs.len() {
                    let mut row = Vec::new();
                    for j in 0..devs.len() {
                        if i == j {
                            row.push(Link::Same);
                            continue;
                        }
                        let direct = keys[j].map_or(0, |k| {
                            far[i].iter().filter(|e| **e == Some(k)).count() as u32
                        });
                        let mut st: c_int = -1;
                        let via_nvlink =
                            p2p(devs[i], devs[j], P2P_NVLINK, &mut st) == 0 && st == P2P_OK;
                        let mut level: c_int = -1;
                        row.push(if direct > 0 {
                            Link::NvLink {
                                links: direct,
                                switched: false,
                            }
                        } else if via_nvlink && !far[i].is_empty() {
                            Link::NvLink {
                                links: far[i].len() as u32,
                                switched: true,
                            }
                        } else if ancestor(devs[i], devs[j], &mut level) == 0 {
                            match PcieHop::from_nvml(level) {
                                Some(hop) => Link::Pcie { hop },
                                None => Link::Unknown {
                                    why: format!("NVML topology level {level}"),
                                },
                            }
                        } else {
                            Link::Unknown {
                                why: "nvmlDeviceGetTopologyCommonAncestor failed".into(),
                            }
                        });
                    }
                    links.push(row);
                }
                Ok(Topology { gpus, links })
            };
            shutdown();
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(i: u32, gib: u64) -> TopoGpu {
        TopoGpu {
            index: i,
            name: "NVIDIA H100 80GB HBM3".into(),
            memory: Some(Bytes(gib << 30)),
            pci_bus_id: format!("00000000:{:02X}:00.0", 0x18 + i),
        }
    }

    fn nv(links: u32, switched: bool) -> Link {
        Link::NvLink { links, switched }
    }

    #[test]
    fn nvml_levels_map_to_nvidia_smi_labels() {
        // nvml.h's nvmlGpuTopologyLevel_t values, and nvidia-smi topo -m's legend.
        let want = [
            (0, "BOARD"),
            (10, "PIX"),
            (20, "PXB"),
            (30, "PHB"),
            (40, "NODE"),
            (50, "SYS"),
        ];
        for (code, label) in want {
            assert_eq!(PcieHop::from_nvml(code).unwrap().label(), label, "{code}");
        }
        assert_eq!(PcieHop::from_nvml(35), None);
    }

    #[test]
    fn two_gpus_over_nvlink_print_as_nvidia_smi_does() {
        let t = Topology {
            gpus: vec![gpu(0, 80), gpu(1, 80)],
            links: vec![
                vec![Link::Same, nv(18, true)],
                vec![nv(18, true), Link::Same],
            ],
        };
        let s = render(&t).unwrap();
        let want = "\
gpu0       NVIDIA H100 80GB HBM3, 80.0 GiB (85.9 GB), PCI 00000000:18:00.0
gpu1       NVIDIA H100 80GB HBM3, 80.0 GiB (85.9 GB), PCI 00000000:19:00.0
links      GPU0 GPU1
GPU0          X NV18
GPU1       NV18    X
           NV# = # bonded NVLinks (through an NVSwitch)
";
        assert_eq!(s, want);
    }

    #[test]
    fn a_mixed_four_gpu_box_gets_every_label_and_its_legend_once() {
        // Two NVLink-bridged pairs (0–1, 2–3) on two NUMA nodes: 0–2 and 1–3 cross
        // the nodes (SYS), 0–3 and 1–2 too; one pair NVML could not place.
        let pcie = |hop| Link::Pcie { hop };
        let sys = pcie(PcieHop::System);
        let t = Topology {
            gpus: (0..4).map(|i| gpu(i, 48)).collect(),
            links: vec![
                vec![Link::Same, nv(4, false), sys.clone(), sys.clone()],
                vec![nv(4, false), Link::Same, pcie(PcieHop::Node), sys.clone()],
                vec![
                    sys.clone(),
                    pcie(PcieHop::Node),
                    Link::Same,
                    Link::Unknown {
                        why: "NVML topology level 35".into(),
                    },
                ],
                vec![
                    sys.clone(),
                    sys.clone(),
                    Link::Unknown {
                        why: "NVML topology level 35".into(),
                    },
                    Link::Same,
                ],
            ],
        };
        let s = render(&t).unwrap();
        assert!(s.contains("GPU0          X  NV4  SYS  SYS\n"), "{s}");
        assert!(s.contains("GPU2        SYS NODE    X    ?\n"), "{s}");
        assert!(s.contains("48.0 GiB (51.5 GB)"), "{s}");
        for l in [
            "NV# = # bonded NVLinks\n",
            "SYS = PCIe across NUMA nodes",
            "NODE = PCIe across host bridges of one NUMA node",
            "? = not reported: NVML topology level 35",
        ] {
            assert_eq!(s.matches(l).count(), 1, "{l}\n{s}");
        }
    }

    #[test]
    fn a_matrix_that_does_not_match_the_gpus_is_refused() {
        let mut t = Topology {
            gpus: vec![gpu(0, 80), gpu(1, 80)],
            links: vec![vec![Link::Same, nv(18, true)]],
        };
        assert_eq!(
            render(&t).unwrap_err().to_string(),
            "topology: 2 GPUs but 1 rows of links"
        );
        t.links.push(vec![Link::Same, Link::Same]);
        assert_eq!(
            render(&t).unwrap_err().to_string(),
            "topology: link 1→0 is X: only the diagonal is X"
        );
        let empty = Topology {
            gpus: vec![],
            links: vec![],
        };
        assert_eq!(render(&empty).unwrap(), "gpus       — (NVML lists none)\n");
    }

    #[test]
    fn without_nvml_the_probe_says_why() {
        let path = std::ffi::CString::new("libnvidia-ml.so.1").unwrap();
        // SAFETY: dlopen probe only; closed at once.
        let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if !h.is_null() {
            // SAFETY: the handle just opened.
            unsafe { libc::dlclose(h) };
            eprintln!("NVML is present here: `memwall hw` shows the real topology");
            return;
        }
        let e = probe().unwrap_err().to_string();
        assert!(e.contains("libnvidia-ml.so.1 not found"), "{e}");
    }
}
