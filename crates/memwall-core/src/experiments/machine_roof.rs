//! The machine's roof as a job: STREAM at each thread count plus the compute peaks,
//! stored as one `stream` run; the roof a bench uses (measured now or the latest
//! stored); this machine as a calculator device.

use super::{JobError, blocking};
use crate::measure::peak::{self, Peak, PeakKind};
use crate::measure::stream::{self, StreamConfig, StreamResult};
use crate::probe::hw::HostInfo;
use crate::roofline::{GpuPeak, MachineRoof};
use crate::store::{NewRun, Store, StoredStream};
use crate::units::{Gbps, Gflops, or_dash};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A STREAM job's result: one [`StreamResult`] per thread count, with store ids.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StreamOutcome {
    /// Store id of the run (a `runs` row).
    pub run_id: i64,
    /// Results per thread count.
    pub results: Vec<StreamResult>,
    /// Store ids, parallel to `results[i].kernels`.
    pub ids: Vec<Vec<i64>>,
    /// Peaks measured with it.
    pub peaks: Vec<Peak>,
}

/// Runs STREAM at each of `threads` (and, when `with_peaks`, the f32/int8 compute
/// peaks at the largest thread count), stores it as one `stream` run.
///
/// # Errors
/// [`JobError`].
pub async fn stream_job(
    store: &Store,
    host: &HostInfo,
    threads: Vec<usize>,
    quick: bool,
    with_peaks: bool,
    command: &str,
) -> Result<StreamOutcome, JobError> {
    stream_job_sized(store, host, threads, quick, with_peaks, None, command).await
}

/// As [`stream_job`] with `n_elements` per array instead of STREAM's sizing rule when
/// given. The caller checks the size against the rule: rows stored here become
/// ceilings.
///
/// # Errors
/// [`JobError`].
pub async fn stream_job_sized(
    store: &Store,
    host: &HostInfo,
    threads: Vec<usize>,
    quick: bool,
    with_peaks: bool,
    n_elements: Option<usize>,
    command: &str,
) -> Result<StreamOutcome, JobError> {
    let started = crate::util::now_rfc3339();
    let llc = host.llc;
    let (results, peaks) = blocking(
        move || -> Result<(Vec<StreamResult>, Vec<Peak>), JobError> {
            let mut out = Vec::new();
            for &t in &threads {
                let mut cfg = if quick {
                    StreamConfig::quick(llc, t)
                } else {
                    StreamConfig::standard(llc, t)
                };
                if let Some(n) = n_elements {
                    cfg.n_elements = n;
                }
                out.push(stream::run(&cfg)?);
            }
            let mut peaks = Vec::new();
            if with_peaks {
                let t = threads.iter().copied().max().unwrap_or(1);
                for k in PeakKind::ALL {
                    peaks.push(peak::measure(k, t, Duration::from_millis(200), 5)?);
                }
            }
            Ok((out, peaks))
        },
    )
    .await??;
    let run = NewRun {
        kind: "stream".into(),
        started_at: started,
        finished_at: crate::util::now_rfc3339(),
        command: command.to_string(),
        host: host.clone(),
        notes: String::new(),
        guard: None,
    };
    let crate::store::StoredStreamRun {
        run_id,
        kernel_ids: ids,
    } = store.insert_stream_run(&run, &results, &peaks).await?;
    Ok(StreamOutcome {
        run_id,
        results,
        ids,
        peaks,
    })
}

/// A GPU STREAM job's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GpuStreamOutcome {
    /// Store id of the run.
    pub run_id: i64,
    /// The device and its rates.
    pub result: crate::measure::gpu_stream::GpuStreamResult,
    /// Store ids, parallel to `result.stream.kernels`.
    pub ids: Vec<i64>,
}

/// STREAM's four kernels on CUDA device `ordinal` (arrays by the rule unless
/// `n_elements`), stored as a `stream` run whose rows carry the device's label, so
/// they become that device's ceiling and never the CPU's.
///
/// # Errors
/// [`JobError::GpuStream`], [`JobError::Store`].
pub async fn gpu_stream_job(
    store: &Store,
    host: &HostInfo,
    ordinal: usize,
    n_elements: Option<usize>,
    passes: usize,
    command: &str,
) -> Result<GpuStreamOutcome, JobError> {
    let started = crate::util::now_rfc3339();
    let result =
        blocking(move || crate::measure::gpu_stream::run(ordinal, n_elements, passes)).await??;
    let d = &result.device;
    let run = NewRun {
        kind: "stream".into(),
        started_at: started,
        finished_at: crate::util::now_rfc3339(),
        command: command.to_string(),
        host: host.clone(),
        notes: format!(
            "GPU STREAM on CUDA{} {}: compute capability {}, {} SMs, {} MiB L2, {}-bit memory bus at {} MHz (interface bound {:.0} GB/s), driver CUDA {}; kernels compiled by NVRTC, timed with CUDA events",
            d.ordinal,
            d.name,
            d.compute_capability,
            d.multiprocessors,
            d.l2.0 >> 20,
            d.memory_bus_bits,
            d.memory_clock_khz / 1000,
            d.interface_bandwidth().0,
            d.driver_cuda_version
        ),
        guard: None,
    };
    let stored = store
        .insert_stream_run_on(
            &run,
            &result.device_label(),
            std::slice::from_ref(&result.stream),
            &[],
        )
        .await?;
    Ok(GpuStreamOutcome {
        run_id: stored.run_id,
        ids: stored.kernel_ids.into_iter().next().unwrap_or_default(),
        result,
    })
}

/// The roof of a bench whose layers are offloaded to CUDA device `ordinal`: that
/// device's STREAM triad (measured now, or the latest stored when `reuse`), and the
/// device catalogue's compute figure, labelled spec, as the prefill roof (memwall
/// does not measure GPU compute peaks yet).
///
/// # Errors
/// [`JobError`]; [`JobError::NoStoredStream`] when `reuse` finds no row.
pub async fn gpu_roof(
    store: &Store,
    host: &HostInfo,
    ordinal: usize,
    reuse: bool,
    command: &str,
) -> Result<RoofSource, JobError> {
    let devices = crate::probe::cuda::cuda_devices()
        .map_err(crate::measure::gpu_stream::GpuStreamError::from)?;
    let dev = devices.get(ordinal).cloned().ok_or(
        crate::measure::gpu_stream::GpuStreamError::NoSuchDevice {
            ordinal,
            count: devices.len(),
        },
    )?;
    let label = format!("CUDA{} {}", dev.ordinal, dev.name);
    if !reuse {
        gpu_stream_job(store, host, ordinal, None, 10, command).await?;
    }
    let s = store
        .latest_device_triad(&host.hostname, &label)
        .await?
        .ok_or_else(|| JobError::NoStoredStream(format!("{} ({label})", host.hostname)))?;
    let cat = crate::probe::devices::Devices::builtin().ok();
    let spec = cat.as_ref().and_then(|c| c.find_in(&dev.name));
    let gpu = Some(match spec {
        Some(d) => GpuPeak {
            device: d.name.clone(),
            gflops: d.peak().map(|p| p.gflops),
            basis: d
                .peak()
                .map_or("no compute figure".to_string(), |p| p.kind.to_string()),
        },
        None => GpuPeak {
            device: dev.name.clone(),
            gflops: None,
            basis: "not in catalog/devices.toml".to_string(),
        },
    });
    let provenance = format!(
        "{} STREAM triad #{} ({label}) measured {}",
        if reuse { "stored GPU" } else { "GPU" },
        s.id,
        s.measured_at
    );
    Ok(RoofSource {
        roof: MachineRoof {
            bandwidth: Gbps(s.best_gbps),
            stream_id: s.id,
            read_bandwidth: None,
            peak_f32: None,
            peak_int8: None,
            gpu,
        },
        stream: s,
        provenance,
    })
}

/// STREAM at `n_elements` per array, measured and validated but not stored: for
/// arrays below STREAM's sizing rule (≥ 4 × the last-level cache), whose rates may
/// come from cache and so must never become a ceiling.
///
/// # Errors
/// [`JobError::Stream`] (validation, allocation).
pub async fn stream_unstored_job(
    threads: Vec<usize>,
    quick: bool,
    n_elements: usize,
) -> Result<Vec<StreamResult>, JobError> {
    Ok(blocking(move || {
        threads
            .iter()
            .map(|&t| {
                let mut cfg = if quick {
                    StreamConfig::quick(None, t)
                } else {
                    StreamConfig::standard(None, t)
                };
                cfg.n_elements = n_elements;
                stream::run(&cfg)
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .await??)
}

/// A `memwall peak` job's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeakOutcome {
    /// Every peak measured (the forced path's, or this CPU's widest).
    pub peaks: Vec<Peak>,
    /// Kinds the forced path does not support: (kind, path), not measured.
    pub lacking: Vec<(PeakKind, peak::Isa)>,
    /// The stored `peak` run; `None` when only forced lower paths ran (they are not
    /// this CPU's roof).
    pub run_id: Option<i64>,
    /// Some peaks ran on a forced lower path and were not stored.
    pub lower_not_stored: bool,
}

/// Measures the f32 FMA and int8 dot peaks at `threads` on the widest path this CPU
/// has, or on `forced`; each kind the forced path lacks is listed as not measured.
/// Only the widest path's peaks are stored (a `peak` run): the latest stored peak of
/// a kind is what prefill ceilings use, and a forced lower path is not the roof.
///
/// # Errors
/// [`JobError::Peak`] when the path supports neither kind, or a rate is above its
/// physical bound; [`JobError::Store`].
pub async fn peak_job(
    store: &Store,
    host: &HostInfo,
    threads: usize,
    forced: Option<peak::Isa>,
    command: &str,
) -> Result<PeakOutcome, JobError> {
    let (run, lacking): (Vec<_>, Vec<_>) = PeakKind::ALL
        .into_iter()
        .map(|k| (k, forced.unwrap_or_else(|| peak::best_path(k))))
        .partition(|&(k, i)| i.supported(k));
    if run.is_empty() {
        let (k, i) = lacking[0];
        return Err(peak::measure_with(k, i, 1, Duration::ZERO, 1)
            .expect_err("unsupported path")
            .into());
    }
    let t = threads.max(1);
    let peaks: Vec<Peak> = blocking(move || {
        run.into_iter()
            .map(|(k, i)| peak::measure_with(k, i, t, Duration::from_millis(200), 5))
            .collect::<Result<Vec<_>, _>>()
    })
    .await??;
    let (roof, lower): (Vec<_>, Vec<_>) = peaks
        .iter()
        .cloned()
        .partition(|p| p.isa == peak::best_path(p.kind).path(p.kind));
    let run_id = if roof.is_empty() {
        None
    } else {
        let now = crate::util::now_rfc3339();
        let run = NewRun {
            kind: "peak".into(),
            started_at: now.clone(),
            finished_at: now,
            command: command.to_string(),
            host: host.clone(),
            notes: String::new(),
            guard: None,
        };
        Some(store.insert_stream_run(&run, &[], &roof).await?.run_id)
    };
    Ok(PeakOutcome {
        peaks,
        lacking,
        run_id,
        lower_not_stored: !lower.is_empty(),
    })
}

/// Where the roof came from, for the report line under the table.
#[derive(Debug, Clone, Serialize, Deserialize, ts_rs::TS)]
pub struct RoofSource {
    /// The bandwidth and compute peak the ceilings are computed from.
    pub roof: MachineRoof,
    /// The STREAM row used.
    pub stream: StoredStream,
    /// `measured in this run` or `stored run N from <time>`.
    pub provenance: String,
}

/// Measures the roof now (STREAM all kernels at `threads`, plus peaks) or, with
/// `reuse`, takes the latest stored triad and peaks of this host.
///
/// # Errors
/// [`JobError::NoStoredStream`] when reusing and nothing is stored.
pub async fn machine_roof(
    store: &Store,
    host: &HostInfo,
    threads: usize,
    reuse: bool,
    command: &str,
) -> Result<RoofSource, JobError> {
    machine_roof_at(store, host, &[threads], reuse, command).await
}

/// As [`machine_roof`], measuring STREAM at each of `thread_counts` (the ceiling uses
/// the largest), so thread sweeps can compare each count with what it can pull.
///
/// # Errors
/// As [`machine_roof`].
pub async fn machine_roof_at(
    store: &Store,
    host: &HostInfo,
    thread_counts: &[usize],
    reuse: bool,
    command: &str,
) -> Result<RoofSource, JobError> {
    let threads = thread_counts.iter().copied().max().unwrap_or(1);
    if !reuse {
        let mut t = thread_counts.to_vec();
        t.sort_unstable();
        t.dedup();
        stream_job(store, host, t, false, true, command).await?;
    }
    let s = store
        .latest_triad(&host.hostname, Some(threads as i64))
        .await?
        .or(store.latest_triad(&host.hostname, None).await?)
        .ok_or_else(|| JobError::NoStoredStream(host.hostname.clone()))?;
    // The read kernel of the same run and thread count as the triad (absent in runs
    // stored before memwall measured it: the read ceilings then stay NULL).
    let read = store
        .stream_siblings(s.id)
        .await?
        .into_iter()
        .find(|x| x.kernel == "read" && x.threads == s.threads);
    let f32p = store
        .latest_peak(&host.hostname, PeakKind::F32Fma.label())
        .await?;
    let i8p = store
        .latest_peak(&host.hostname, PeakKind::Int8Dot.label())
        .await?;
    let provenance = if reuse {
        format!(
            "stored STREAM triad #{} ({} threads) measured {}",
            s.id, s.threads, s.measured_at
        )
    } else {
        format!(
            "STREAM triad #{} ({} threads) measured in this run",
            s.id, s.threads
        )
    };
    Ok(RoofSource {
        roof: MachineRoof {
            bandwidth: Gbps(s.best_gbps),
            stream_id: s.id,
            read_bandwidth: read.map(|r| Gbps(r.best_gbps)),
            peak_f32: f32p.map(|p| Gflops(p.gflops)),
            peak_int8: i8p.map(|p| Gflops(p.gflops)),
            gpu: gpu_spec_peak(host),
        },
        stream: s,
        provenance,
    })
}

/// The prefill roof of this host's GPU when it is not measured: on macOS llama.cpp
/// runs offloaded layers on the Metal GPU, whose peak memwall does not measure yet,
/// so the device catalogue's figure is used, labelled spec (or none, when the
/// catalogue has no figure for this chip).
#[cfg(target_os = "macos")]
pub fn gpu_spec_peak(host: &HostInfo) -> Option<GpuPeak> {
    let cat = crate::probe::devices::Devices::builtin().ok();
    Some(match cat.as_ref().and_then(|c| c.for_host(host)) {
        Some(d) => GpuPeak {
            device: d.name.clone(),
            gflops: d.peak().map(|p| p.gflops),
            basis: match d.peak() {
                Some(p) if d.basis == "derived" => {
                    format!("{}, derived in catalog/devices.toml", p.kind)
                }
                Some(p) => p.kind.to_string(),
                None => "no compute figure".to_string(),
            },
        },
        None => GpuPeak {
            device: host.cpu_model.clone(),
            gflops: None,
            basis: "not in catalog/devices.toml".to_string(),
        },
    })
}

/// Elsewhere no GPU spec figure is used: the prefill roof is the CPU's measured peak.
#[cfg(not(target_os = "macos"))]
pub fn gpu_spec_peak(_host: &HostInfo) -> Option<GpuPeak> {
    None
}

/// This machine as a calculator device: the latest stored STREAM triad and peaks
/// (absent ones stay `None`, printed `—`), plus the catalogue's spec for the CPU/GPU
/// brand when it names a catalogued part, for the spec-vs-measured comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThisMachine {
    /// The machine the run is on (CPU, RAM, OS).
    pub host: HostInfo,
    /// Latest STREAM triad (best, most threads) on this host.
    pub triad: Option<StoredStream>,
    /// Latest f32 FMA peak.
    pub peak_f32: Option<crate::store::StoredPeak>,
    /// Latest int8 dot peak.
    pub peak_int8: Option<crate::store::StoredPeak>,
    /// Catalogue entry matching the CPU/GPU brand, if any.
    pub spec: Option<crate::probe::devices::Device>,
    /// Latest STREAM triad of an accelerator on this host, with its device label
    /// (`CUDA0 NVIDIA H200`): the roof of offloaded decode.
    pub gpu_triad: Option<(String, StoredStream)>,
    /// The per-token floors this host's stored decode rows allow, one per format
    /// and placement ([`crate::experiments::evidence::floor`]).
    pub floors: Vec<crate::experiments::evidence::floor::FloorFit>,
}

impl ThisMachine {
    /// The calculator roof from the measurements; the compute peak is the one
    /// llama.cpp's CPU path uses for `facts` (int8 dot for block-quantized weights,
    /// f32 FMA otherwise; see [`MachineRoof::peak_for`]).
    ///
    /// With `gpu`, the roof of fully offloaded decode: the host's latest accelerator
    /// STREAM triad as bandwidth (None when none is stored) and no compute peak
    /// (memwall measures no GPU compute peak yet). The per-token floor is the one
    /// fitted for the model's format and that placement, when the store holds one.
    pub fn roof(
        &self,
        facts: Option<&crate::probe::model::ModelFacts>,
        gpu: bool,
    ) -> crate::experiments::calc::Roof {
        use crate::experiments::calc::Sourced;
        let floor = facts.and_then(|f| {
            crate::experiments::evidence::floor::for_model(
                &self.floors,
                &self.host.hostname,
                &f.quant,
                gpu,
            )
            .map(|fit| Sourced {
                value: fit.clone(),
                source: format!(
                    "fitted: {} {} decode rows of {} models on {} ({})",
                    fit.row_ids().len(),
                    fit.scope.quant,
                    fit.points.len(),
                    fit.scope.hostname,
                    fit.scope.placement
                ),
            })
        });
        if gpu {
            return crate::experiments::calc::Roof {
                label: match &self.gpu_triad {
                    Some((d, _)) => format!("this machine's {d}"),
                    None => "this machine's GPU (no GPU STREAM stored)".into(),
                },
                bandwidth: self.gpu_triad.as_ref().map(|(d, s)| Sourced {
                    value: Gbps(s.best_gbps),
                    source: format!(
                        "measured: GPU STREAM triad #{} ({d}) at {}",
                        s.id, s.measured_at
                    ),
                }),
                peak: None,
                memory: vec![],
                floor,
            };
        }
        let pk = match facts.map_or(PeakKind::F32Fma, PeakKind::for_model) {
            PeakKind::Int8Dot => self.peak_int8.as_ref(),
            PeakKind::F32Fma => self.peak_f32.as_ref(),
        };
        crate::experiments::calc::Roof {
            label: format!("this machine ({})", self.host.cpu_model),
            bandwidth: self.triad.as_ref().map(|s| Sourced {
                value: Gbps(s.best_gbps),
                source: format!(
                    "measured: STREAM triad #{} ({} threads) at {}",
                    s.id, s.threads, s.measured_at
                ),
            }),
            peak: pk.map(|p| Sourced {
                value: Gflops(p.gflops),
                source: format!(
                    "measured: {} peak #{} ({} threads, {}) at {}",
                    p.kind, p.id, p.threads, p.isa, p.measured_at
                ),
            }),
            memory: vec![self.host.ram],
            floor,
        }
    }
}

/// Reads [`ThisMachine`] from the store. Measures nothing.
///
/// # Errors
/// [`JobError`] when the store cannot be read.
pub async fn this_machine(store: &Store, host: &HostInfo) -> Result<ThisMachine, JobError> {
    let spec = crate::probe::devices::Devices::builtin()
        .ok()
        .and_then(|d| d.for_host(host).cloned());
    Ok(ThisMachine {
        host: host.clone(),
        triad: store.latest_triad(&host.hostname, None).await?,
        peak_f32: store
            .latest_peak(&host.hostname, PeakKind::F32Fma.label())
            .await?,
        peak_int8: store
            .latest_peak(&host.hostname, PeakKind::Int8Dot.label())
            .await?,
        spec,
        gpu_triad: store.latest_accelerator_triad(&host.hostname).await?,
        floors: crate::experiments::evidence::floor::analyze(
            &store
                .bench_rows(&crate::store::RowFilter::default())
                .await?
                .into_iter()
                .filter(|r| r.hostname == host.hostname)
                .collect::<Vec<_>>(),
        ),
    })
}

/// The "spec vs measured" table `memwall calc --device this` prints.
pub fn render_this(t: &ThisMachine) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let spec = t.spec.as_ref();
    let _ = writeln!(
        s,
        "\nthis machine: spec vs measured ({}; spec from {})",
        t.host.cpu_model,
        spec.map_or(
            "— (CPU/GPU not in catalog/devices.toml)".to_string(),
            |d| format!("catalogue entry {:?}", d.name)
        )
    );
    let _ = writeln!(s, "| quantity | spec | measured | measured ÷ spec |");
    let _ = writeln!(s, "| --- | ---: | ---: | ---: |");
    let ratio = |m: Option<f64>, sp: Option<f64>| match (m, sp) {
        (Some(m), Some(sp)) if sp > 0.0 => format!("{:.2}", m / sp),
        _ => "—".into(),
    };
    let bw_m = t.triad.as_ref().map(|x| x.best_gbps);
    let bw_s = spec.map(|d| d.bandwidth_gbps);
    let _ = writeln!(
        s,
        "| memory bandwidth GB/s | {} | {} | {} |",
        or_dash(bw_s, 1),
        or_dash(bw_m, 1),
        ratio(bw_m, bw_s)
    );
    let f32_m = t.peak_f32.as_ref().map(|x| x.gflops);
    let f32_s = spec.and_then(|d| d.fp32_tflops).map(|x| x * 1000.0);
    let _ = writeln!(
        s,
        "| fp32 GFLOP/s | {} | {} | {} |",
        or_dash(f32_s, 0),
        or_dash(f32_m, 0),
        ratio(f32_m, f32_s)
    );
    let i8_m = t.peak_int8.as_ref().map(|x| x.gflops);
    let _ = writeln!(s, "| int8 dot GOP/s | — | {} | — |", or_dash(i8_m, 0));
    let _ = writeln!(
        s,
        "| memory GiB | {} | {:.1} (installed) | — |",
        spec.map_or("—".to_string(), |d| d
            .memory_gib
            .iter()
            .map(|m| m.to_string())
            .collect::<Vec<_>>()
            .join("/")),
        t.host.ram.gib()
    );
    if t.triad.is_none() || t.peak_f32.is_none() {
        let _ = writeln!(
            s,
            "— = not measured on this host yet: run `memwall stream` (STREAM + compute peaks) first."
        );
    }
    let _ = writeln!(
        s,
        "A spec sheet is not the bandwidth a program gets: the ratio is itself a measurement."
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stream::Kernel;

    use crate::testing::host;

    async fn store_run(store: &Store, kernels: Vec<Kernel>) -> StreamResult {
        let cfg = StreamConfig {
            n_elements: 4096,
            threads: 2,
            passes: 2,
            kernels,
        };
        let res = stream::run(&cfg).unwrap();
        let run = crate::testing::new_run("stream");
        store
            .insert_stream_run(&run, std::slice::from_ref(&res), &[])
            .await
            .unwrap();
        res
    }

    #[tokio::test]
    async fn roof_takes_the_read_kernel_of_the_triad_run_or_none() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("m.db")).await.unwrap();
        let res = store_run(&store, vec![Kernel::Triad, Kernel::Read]).await;
        let roof = machine_roof(&store, &host(), 2, true, "t")
            .await
            .unwrap()
            .roof;
        assert_eq!(roof.bandwidth, res.kernel(Kernel::Triad).unwrap().best_gbps);
        assert_eq!(
            roof.read_bandwidth,
            Some(res.kernel(Kernel::Read).unwrap().best_gbps)
        );
        // A later triad-only run (as stored before the read kernel existed): its roof
        // has no read bandwidth, not the older run's.
        store_run(&store, vec![Kernel::Triad]).await;
        let roof = machine_roof(&store, &host(), 2, true, "t")
            .await
            .unwrap()
            .roof;
        assert_eq!(roof.read_bandwidth, None);
    }
}
