//! GPU-to-GPU copies, the interconnect part of the multi-GPU roofline
//! ([`crate::roofline::multi_gpu`]): for every ordered pair of CUDA devices, the bulk
//! peer-copy bandwidth and the time of small copies (the per-layer exchange of a
//! split model moves one hidden state, tens of KiB).
//!
//! Each copy is `cuMemcpyPeerAsync` (through cudarc's `memcpy_dtod` across
//! contexts: the copy engines llama.cpp's CUDA back end uses between cards), on the
//! destination's stream, timed by a pair of CUDA events around it; the first copy of
//! each size is a discarded warm-up, as STREAM discards its first pass. Peer access
//! is enabled first where `cuDeviceCanAccessPeer` allows (llama.cpp enables it for
//! small batches), so the copy goes over NVLink or PCIe peer-to-peer instead of
//! through host memory; the result says which. The CUDA driver is loaded at run time
//! (no toolkit is needed to build), as for `memwall stream --gpu`.
//!
//! Rates: bytes ÷ the fastest copy (decimal GB/s). A bulk rate above either
//! device's memory interface bound ([`CudaDevice::interface_bandwidth`]) is refused
//! as a broken timing. The small-copy time a [`PeerLink`] takes is the median of the
//! smallest size's copies.

use crate::probe::cuda::{CudaDevice, CudaProbeError, cuda_devices};
use crate::roofline::multi_gpu::PeerLink;
use crate::units::Gbps;
use cudarc::driver::{CudaContext, sys};
use serde::{Deserialize, Serialize};

/// What to copy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerCopyConfig {
    /// Bytes of the bulk copy.
    pub bulk_bytes: usize,
    /// Sizes of the small copies, bytes (ascending).
    pub small_bytes: Vec<usize>,
    /// Timed copies per size (after one warm-up).
    pub reps: usize,
}

impl Default for PeerCopyConfig {
    /// 256 MiB bulk copies; small copies of 256 B, 4 KiB, 16 KiB and 64 KiB (a
    /// hidden state of n_embd f32 values is 20 KiB at n_embd 5120, 32 KiB at 8192);
    /// 20 timed copies each.
    fn default() -> Self {
        PeerCopyConfig {
            bulk_bytes: 256 << 20,
            small_bytes: vec![256, 4 << 10, 16 << 10, 64 << 10],
            reps: 20,
        }
    }
}

/// The copies of one size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyTimes {
    /// Bytes per copy.
    pub bytes: usize,
    /// Every timed copy, ns.
    pub samples_ns: Vec<u64>,
}

impl CopyTimes {
    /// The fastest copy, ns.
    pub fn min_ns(&self) -> u64 {
        self.samples_ns.iter().copied().min().unwrap_or(0)
    }

    /// The median copy, ns (the mean of the middle two for an even count).
    pub fn median_ns(&self) -> f64 {
        let mut v = self.samples_ns.clone();
        v.sort_unstable();
        match v.len() {
            0 => f64::NAN,
            n if !n.is_multiple_of(2) => v[n / 2] as f64,
            n => (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0,
        }
    }

    /// `bytes ÷ fastest copy`, GB/s.
    pub fn best_gbps(&self) -> Gbps {
        Gbps(self.bytes as f64 / self.min_ns() as f64)
    }
}

/// Copies from one device to another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerPair {
    /// Source device ordinal.
    pub src: usize,
    /// Destination device ordinal.
    pub dst: usize,
    /// Whether peer access was enabled (direct NVLink/PCIe peer-to-peer); `false`:
    /// the driver staged the copies through host memory.
    pub peer_access: bool,
    /// The bulk copies.
    pub bulk: CopyTimes,
    /// The small copies, ascending size.
    pub small: Vec<CopyTimes>,
}

impl PeerPair {
    /// The link the roofline uses: the smallest copy's median time as the latency,
    /// the bulk copy's best rate as the bandwidth.
    pub fn link(&self) -> Option<PeerLink> {
        let small = self.small.first()?;
        Some(PeerLink {
            latency_s: small.median_ns() / 1e9,
            bandwidth: self.bulk.best_gbps(),
        })
    }
}

/// Every ordered pair's copies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerCopyResult {
    /// The devices, by ordinal.
    pub devices: Vec<CudaDevice>,
    /// The configuration.
    pub config: PeerCopyConfig,
    /// One entry per ordered pair (src ≠ dst).
    pub pairs: Vec<PeerPair>,
}

/// Errors of a peer-copy run.
#[derive(Debug, thiserror::Error)]
pub enum PeerCopyError {
    /// No CUDA device.
    #[error(transparent)]
    Probe(#[from] CudaProbeError),
    /// Fewer than two devices.
    #[error(
        "stream --gpu --peer: peer copies need two CUDA devices; this machine has {0} (on one GPU, `memwall stream --gpu` measures its memory)"
    )]
    NeedTwo(usize),
    /// A bad configuration.
    #[error("stream --gpu --peer: {0}")]
    Config(String),
    /// A driver call failed.
    #[error("stream --gpu --peer: CUDA driver call failed: {0}")]
    Driver(String),
    /// A rate no link can carry.
    #[error(
        "stream --gpu --peer: CUDA{src} → CUDA{dst} copied {got:.0} GB/s, above the slower device's memory interface bound {bound:.0} GB/s: the timing is broken, results are discarded"
    )]
    Impossible {
        /// Source.
        src: usize,
        /// Destination.
        dst: usize,
        /// Rate measured.
        got: f64,
        bound: f64,
    },
}

fn drv(e: cudarc::driver::DriverError) -> PeerCopyError {
    PeerCopyError::Driver(format!("{e:?}"))
}

/// Checks the configuration (before any device is touched).
///
/// # Errors
/// [`PeerCopyError::Config`].
pub fn check_config(cfg: &PeerCopyConfig) -> Result<(), PeerCopyError> {
    let bad = |m: &str| Err(PeerCopyError::Config(m.to_string()));
    if cfg.reps == 0 {
        return bad("need at least one timed copy per size");
    }
    if cfg.small_bytes.is_empty() || cfg.small_bytes.contains(&0) {
        return bad("need at least one small copy size, each > 0 bytes");
    }
    if cfg.small_bytes.windows(2).any(|w| w[0] >= w[1]) {
        return bad("small copy sizes must ascend");
    }
    if cfg.bulk_bytes < *cfg.small_bytes.last().expect("not empty") {
        return bad("the bulk copy must be at least the largest small copy");
    }
    Ok(())
}

/// Refuses a bulk rate above the slower device's memory interface bound.
///
/// # Errors
/// [`PeerCopyError::Impossible`].
pub fn check_plausible(
    pair: &PeerPair,
    src: &CudaDevice,
    dst: &CudaDevice,
) -> Result<(), PeerCopyError> {
    let bound = src.interface_bandwidth().0.min(dst.interface_bandwidth().0);
    let got = pair.bulk.best_gbps().0;
    if got > bound {
        return Err(PeerCopyError::Impossible {
            src: pair.src,
            dst: pair.dst,
            got,
            bound,
        });
    }
    Ok(())
}

/// Copies between every ordered pair of CUDA devices.
///
/// # Errors
/// [`PeerCopyError`].
pub fn run(cfg: &PeerCopyConfig) -> Result<PeerCopyResult, PeerCopyError> {
    check_config(cfg)?;
    let devices = cuda_devices()?;
    if devices.len() < 2 {
        return Err(PeerCopyError::NeedTwo(devices.len()));
    }
    let ctxs = (0..devices.len())
        .map(CudaContext::new)
        .collect::<Result<Vec<_>, _>>()
        .map_err(drv)?;
    // Peer access, where the driver allows it.
    let n = ctxs.len();
    let mut peer = vec![vec![false; n]; n];
    for (i, ci) in ctxs.iter().enumerate() {
        for (j, cj) in ctxs.iter().enumerate() {
            if i == j {
                continue;
            }
            let mut can: std::ffi::c_int = 0;
            // SAFETY: the driver is loaded (cuda_devices succeeded); `can` outlives the call.
            let rc =
                unsafe { sys::cuDeviceCanAccessPeer(&mut can, ci.cu_device(), cj.cu_device()) };
            if rc != sys::CUresult::CUDA_SUCCESS || can == 0 {
                continue;
            }
            ci.bind_to_thread().map_err(drv)?;
            // SAFETY: `ci` is current; `cj`'s context is live for the whole run.
            let rc = unsafe { sys::cuCtxEnablePeerAccess(cj.cu_ctx(), 0) };
            peer[i][j] = matches!(
                rc,
                sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
            );
        }
    }
    let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    let mut pairs = Vec::new();
    for src in 0..n {
        for dst in 0..n {
            if src == dst {
                continue;
            }
            let s_src = ctxs[src].default_stream();
            let s_dst = ctxs[dst].default_stream();
            let a = s_src.alloc_zeros::<u8>(cfg.bulk_bytes).map_err(drv)?;
            let mut b = s_dst.alloc_zeros::<u8>(cfg.bulk_bytes).map_err(drv)?;
            s_src.synchronize().map_err(drv)?;
            s_dst.synchronize().map_err(drv)?;
            let mut time = |bytes: usize| -> Result<CopyTimes, PeerCopyError> {
                let mut samples_ns = Vec::with_capacity(cfg.reps);
                for rep in 0..=cfg.reps {
                    let start = ctxs[dst].new_event(timing).map_err(drv)?;
                    let end = ctxs[dst].new_event(timing).map_err(drv)?;
                    start.record(&s_dst).map_err(drv)?;
                    s_dst
                        .memcpy_dtod(&a.slice(0..bytes), &mut b.slice_mut(0..bytes))
                        .map_err(drv)?;
                    end.record(&s_dst).map_err(drv)?;
                    s_dst.synchronize().map_err(drv)?;
                    let ms = start.elapsed_ms(&end).map_err(drv)?;
                    if rep > 0 {
                        samples_ns.push(((ms as f64) * 1e6).round().max(1.0) as u64);
                    }
                }
                Ok(CopyTimes { bytes, samples_ns })
            };
            let bulk = time(cfg.bulk_bytes)?;
            let small = cfg
                .small_bytes
                .iter()
                .map(|&s| time(s))
                .collect::<Result<Vec<_>, _>>()?;
            let pair = PeerPair {
                src,
                dst,
                peer_access: peer[src][dst],
                bulk,
                small,
            };
            check_plausible(&pair, &devices[src], &devices[dst])?;
            pairs.push(pair);
        }
    }
    Ok(PeerCopyResult {
        devices,
        config: cfg.clone(),
        pairs,
    })
}

/// The table `memwall stream --gpu --peer` prints: one line per ordered pair.
pub fn render(r: &PeerCopyResult) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| src → dst | peer access | bulk {} MiB GB/s (best) | {} |",
        r.config.bulk_bytes >> 20,
        r.config
            .small_bytes
            .iter()
            .map(|b| format!("{b} B µs (median)"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(
        s,
        "| --- | --- | ---: |{}",
        " ---: |".repeat(r.config.small_bytes.len())
    );
    for p in &r.pairs {
        let _ = writeln!(
            s,
            "| CUDA{} → CUDA{} | {} | {:.1} | {} |",
            p.src,
            p.dst,
            if p.peer_access {
                "yes"
            } else {
                "no (staged through host memory)"
            },
            p.bulk.best_gbps().0,
            p.small
                .iter()
                .map(|c| format!("{:.2}", c.median_ns() / 1e3))
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(bytes: usize, ns: &[u64]) -> CopyTimes {
        CopyTimes {
            bytes,
            samples_ns: ns.to_vec(),
        }
    }

    #[test]
    fn rates_and_the_link_come_from_the_samples() {
        // 256 MiB in 5.0 ms best = 268,435,456 ÷ 5,000,000 ns = 53.687 GB/s.
        let bulk = times(256 << 20, &[5_200_000, 5_000_000, 5_100_000]);
        assert!((bulk.best_gbps().0 - 53.687_091_2).abs() < 1e-6);
        // Median of 4: (9,000 + 11,000) ÷ 2; of 3: the middle.
        let small = times(256, &[12_000, 9_000, 8_000, 11_000]);
        assert_eq!(small.median_ns(), 10_000.0);
        assert_eq!(times(1, &[3, 1, 2]).median_ns(), 2.0);
        let p = PeerPair {
            src: 0,
            dst: 1,
            peer_access: true,
            bulk,
            small: vec![small, times(4096, &[20_000])],
        };
        let l = p.link().unwrap();
        assert_eq!(l.latency_s, 10e-6);
        assert!((l.bandwidth.0 - 53.687_091_2).abs() < 1e-6);
        let table = render(&PeerCopyResult {
            devices: vec![],
            config: PeerCopyConfig {
                bulk_bytes: 256 << 20,
                small_bytes: vec![256, 4096],
                reps: 4,
            },
            pairs: vec![p],
        });
        assert!(
            table.contains("| CUDA0 → CUDA1 | yes | 53.7 | 10.00 | 20.00 |"),
            "{table}"
        );
    }

    #[test]
    fn bad_configurations_and_impossible_rates_are_refused() {
        let ok = PeerCopyConfig::default();
        assert!(check_config(&ok).is_ok());
        for (cfg, why) in [
            (
                PeerCopyConfig {
                    reps: 0,
                    ..ok.clone()
                },
                "at least one timed copy",
            ),
            (
                PeerCopyConfig {
                    small_bytes: vec![4096, 256],
                    ..ok.clone()
                },
                "must ascend",
            ),
            (
                PeerCopyConfig {
                    bulk_bytes: 1024,
                    ..ok.clone()
                },
                "at least the largest small copy",
            ),
        ] {
            let e = check_config(&cfg).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
        // A 6144-bit bus at 2.619 GHz bounds a device at 4022.8 GB/s (hand arithmetic
        // in probe::cuda); 4100 GB/s between two such devices is impossible.
        let dev = |ordinal| CudaDevice {
            ordinal,
            name: "test".into(),
            memory: crate::units::Bytes(0),
            compute_capability: "9.0".into(),
            multiprocessors: 132,
            l2: crate::units::Bytes(50 << 20),
            memory_bus_bits: 6144,
            memory_clock_khz: 2_619_000,
            driver_cuda_version: "13.0".into(),
        };
        let fast = PeerPair {
            src: 0,
            dst: 1,
            peer_access: true,
            bulk: times(4_100_000, &[1_000]),
            small: vec![],
        };
        let e = check_plausible(&fast, &dev(0), &dev(1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("copied 4100 GB/s, above"), "{e}");
        let slow = PeerPair {
            bulk: times(400_000, &[1_000]),
            ..fast
        };
        assert!(check_plausible(&slow, &dev(0), &dev(1)).is_ok());
    }

    #[test]
    fn without_two_devices_the_error_says_why() {
        match run(&PeerCopyConfig::default()) {
            Err(PeerCopyError::Probe(e)) => {
                assert!(e.to_string().contains("libcuda.so.1"), "{e}")
            }
            Err(PeerCopyError::NeedTwo(n)) => assert!(n < 2),
            other => eprintln!("two CUDA devices here: {:?}", other.map(|r| r.pairs.len())),
        }
    }
}
