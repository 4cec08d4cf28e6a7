//! STREAM on an NVIDIA GPU: copy, scale, add and triad over device arrays, with the
//! same byte counting, pass structure and validation as the CPU instrument
//! ([`super::stream`]).
//!
//! The kernels are CUDA C compiled at run time by NVRTC (no CUDA toolkit is needed to
//! build memwall; the driver and `libnvrtc` are loaded when the command runs). Each
//! pass of each kernel is timed with a pair of CUDA events on one stream; the first
//! pass is discarded as STREAM does, and the reported rate is the counted bytes over
//! the minimum time. Arrays are at least 4 × the device's L2 and at least 1 GiB each.
//! Afterwards the three arrays are copied back and every element is checked against
//! STREAM's scalar recurrence; a rate above the memory interface's bound
//! ([`CudaDevice::interface_bandwidth`]) is refused as impossible.
//!
//! Apple silicon (design, not built yet): the same four kernels as Metal compute
//! shaders compiled at run time (`MTLDevice::newLibraryWithSource`), arrays in
//! `MTLStorageModePrivate` buffers ≥ 4 × the SLC and ≥ 1 GiB, each pass timed by the
//! command buffer's `GPUStartTime`/`GPUEndTime`, validation by reading the arrays
//! back through a shared buffer, and the bound from the device catalogue's spec
//! bandwidth (the OS does not report the LPDDR bus). The GPU shares its memory with
//! the CPU there, so its STREAM is a second reading of the same DRAM: rows would
//! carry `device = 'Metal <chip>'` like CUDA's.

use super::stream::{self, Kernel, StreamConfig, StreamError, StreamResult};
use crate::probe::cuda::{CudaDevice, CudaProbeError, cuda_devices};
use crate::units::Bytes;
use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg, sys};
use serde::{Deserialize, Serialize};

/// Elements each CUDA thread moves (one 16-byte `double2` load per array).
pub const VECTOR: usize = 2;
/// CUDA threads per block.
pub const BLOCK: u32 = 256;
/// The smallest array the rule allows, whatever the L2: 1 GiB.
pub const MIN_ARRAY_BYTES: u64 = 1 << 30;

const SOURCE: &str = r#"
extern "C" __global__ void fill(double* __restrict__ x, double v, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}
#define IDX unsigned long long i = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) * 2ull;
extern "C" __global__ void copy(double* __restrict__ c, const double* __restrict__ a, unsigned long long n) {
    IDX
    if (i + 1 < n) { *(double2*)(c + i) = *(const double2*)(a + i); }
    else if (i < n) { c[i] = a[i]; }
}
extern "C" __global__ void scale(double* __restrict__ b, const double* __restrict__ c, double s, unsigned long long n) {
    IDX
    if (i + 1 < n) { double2 x = *(const double2*)(c + i); x.x *= s; x.y *= s; *(double2*)(b + i) = x; }
    else if (i < n) { b[i] = s * c[i]; }
}
extern "C" __global__ void add(double* __restrict__ c, const double* __restrict__ a, const double* __restrict__ b, unsigned long long n) {
    IDX
    if (i + 1 < n) {
        double2 x = *(const double2*)(a + i); double2 y = *(const double2*)(b + i);
        x.x += y.x; x.y += y.y; *(double2*)(c + i) = x;
    } else if (i < n) { c[i] = a[i] + b[i]; }
}
extern "C" __global__ void triad(double* __restrict__ a, const double* __restrict__ b, const double* __restrict__ c, double s, unsigned long long n) {
    IDX
    if (i + 1 < n) {
        double2 x = *(const double2*)(b + i); double2 y = *(const double2*)(c + i);
        x.x += s * y.x; x.y += s * y.y; *(double2*)(a + i) = x;
    } else if (i < n) { a[i] = b[i] + s * c[i]; }
}
"#;

/// Errors of a GPU STREAM run.
#[derive(Debug, thiserror::Error)]
pub enum GpuStreamError {
    /// No device to run on.
    #[error(transparent)]
    Probe(#[from] CudaProbeError),
    /// No device with that ordinal.
    #[error("stream --gpu: no CUDA device {ordinal}; this machine has {count} (pass --gpu-device 0…{max})", max = count.saturating_sub(1))]
    NoSuchDevice {
        /// Asked for.
        ordinal: usize,
        /// Devices present.
        count: usize,
    },
    /// NVRTC is missing or the kernels did not compile.
    #[error(
        "stream --gpu: the kernels did not compile with NVRTC: {0} (libnvrtc.so must be on the loader's path, e.g. /usr/local/cuda/lib64)"
    )]
    Compile(String),
    /// A driver call failed.
    #[error("stream --gpu: CUDA driver call failed: {0}")]
    Driver(String),
    /// The arrays do not fit.
    #[error(
        "stream --gpu: three arrays of {array} do not fit in the device's free memory ({free})"
    )]
    TooLarge {
        /// Bytes per array.
        array: Bytes,
        /// Free device memory.
        free: Bytes,
    },
    /// Validation failed (same check as the CPU run).
    #[error(transparent)]
    Validation(#[from] StreamError),
    /// A rate above what the memory interface can carry.
    #[error("stream --gpu: {kernel} measured {got:.0} GB/s, above the memory interface's bound {bound:.0} GB/s ({bus} bit × {clock_mhz} MHz × 2): the timing is broken, results are discarded", kernel = kernel.name())]
    Impossible {
        kernel: Kernel,
        /// Rate measured.
        got: f64,
        bound: f64,
        /// Bus width, bits.
        bus: u32,
        /// Memory clock, MHz.
        clock_mhz: u32,
    },
}

fn drv(e: cudarc::driver::DriverError) -> GpuStreamError {
    GpuStreamError::Driver(format!("{e:?}"))
}

/// What a GPU STREAM run measured, and on which device.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GpuStreamResult {
    pub device: CudaDevice,
    /// The rates, in the CPU instrument's shape (`threads` is 1: one host thread
    /// drives the device; `isa` is absent).
    pub stream: StreamResult,
}

impl GpuStreamResult {
    /// The device label rows carry (`CUDA0 NVIDIA H200`).
    pub fn device_label(&self) -> String {
        format!("CUDA{} {}", self.device.ordinal, self.device.name)
    }
}

/// Elements per array by the rule: ≥ 4 × L2 and ≥ [`MIN_ARRAY_BYTES`].
pub fn rule_elements(l2: Bytes) -> usize {
    ((4 * l2.0).max(MIN_ARRAY_BYTES) / 8) as usize
}

/// Runs STREAM's four kernels on device `ordinal`, `passes` counted passes (plus the
/// discarded first), `n_elements` per array (the rule's size when `None`).
///
/// # Errors
/// [`GpuStreamError`].
pub fn run(
    ordinal: usize,
    n_elements: Option<usize>,
    passes: usize,
) -> Result<GpuStreamResult, GpuStreamError> {
    let devices = cuda_devices()?;
    let device = devices
        .get(ordinal)
        .cloned()
        .ok_or(GpuStreamError::NoSuchDevice {
            ordinal,
            count: devices.len(),
        })?;
    let n = n_elements.unwrap_or_else(|| rule_elements(device.l2));
    if n < 2 || passes == 0 {
        return Err(StreamError::Config("need ≥ 2 elements and ≥ 1 pass".into()).into());
    }
    let cfg = StreamConfig {
        n_elements: n,
        threads: 1,
        passes,
        kernels: Kernel::STREAM.to_vec(),
    };
    let ctx = CudaContext::new(ordinal).map_err(drv)?;
    let (free, _) = ctx.mem_get_info().map_err(drv)?;
    if 3 * cfg.array_bytes().0 > free as u64 {
        return Err(GpuStreamError::TooLarge {
            array: cfg.array_bytes(),
            free: Bytes(free as u64),
        });
    }
    // SAFETY: only `dlopen`s the candidate names.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(GpuStreamError::Compile("libnvrtc not loadable".into()));
    }
    let (major, minor) = ctx.compute_capability().map_err(drv)?;
    let arch: &'static str = Box::leak(format!("compute_{major}{minor}").into_boxed_str());
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(
        SOURCE,
        cudarc::nvrtc::CompileOptions {
            arch: Some(arch),
            ..Default::default()
        },
    )
    .map_err(|e| GpuStreamError::Compile(format!("{e:?}")))?;
    let module = ctx.load_module(ptx).map_err(drv)?;
    let f = |name| module.load_function(name).map_err(drv);
    let (fill, copy, scale, add, triad) =
        (f("fill")?, f("copy")?, f("scale")?, f("add")?, f("triad")?);
    let stream = ctx.default_stream();
    let mut a = stream.alloc_zeros::<f64>(n).map_err(drv)?;
    let mut b = stream.alloc_zeros::<f64>(n).map_err(drv)?;
    let mut c = stream.alloc_zeros::<f64>(n).map_err(drv)?;
    let n64 = n as u64;
    let s = stream::SCALAR;
    // STREAM's arrays after its timing test: a = 2, b = 2, c = 0.
    let one_per_thread = LaunchConfig {
        grid_dim: (n.div_ceil(BLOCK as usize) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    for (x, v) in [(&mut a, 2.0f64), (&mut b, 2.0), (&mut c, 0.0)] {
        // SAFETY: `fill(double*, double, u64)` matches the arguments; the grid covers n.
        unsafe {
            stream
                .launch_builder(&fill)
                .arg(x)
                .arg(&v)
                .arg(&n64)
                .launch(one_per_thread)
        }
        .map_err(drv)?;
    }
    let lc = LaunchConfig {
        grid_dim: (n.div_ceil(VECTOR * BLOCK as usize) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    let mut events = Vec::new();
    for _ in 0..passes + 1 {
        for k in Kernel::STREAM {
            let start = ctx.new_event(timing).map_err(drv)?;
            let end = ctx.new_event(timing).map_err(drv)?;
            start.record(&stream).map_err(drv)?;
            // SAFETY: each kernel's signature matches the arguments pushed; the grid
            // covers n elements, VECTOR per thread; the arrays hold n elements.
            let launched = unsafe {
                match k {
                    Kernel::Copy => stream
                        .launch_builder(&copy)
                        .arg(&mut c)
                        .arg(&a)
                        .arg(&n64)
                        .launch(lc),
                    Kernel::Scale => stream
                        .launch_builder(&scale)
                        .arg(&mut b)
                        .arg(&c)
                        .arg(&s)
                        .arg(&n64)
                        .launch(lc),
                    Kernel::Add => stream
                        .launch_builder(&add)
                        .arg(&mut c)
                        .arg(&a)
                        .arg(&b)
                        .arg(&n64)
                        .launch(lc),
                    Kernel::Triad => stream
                        .launch_builder(&triad)
                        .arg(&mut a)
                        .arg(&b)
                        .arg(&c)
                        .arg(&s)
                        .arg(&n64)
                        .launch(lc),
                    Kernel::Read => unreachable!("not in Kernel::STREAM"),
                }
            };
            launched.map_err(drv)?;
            end.record(&stream).map_err(drv)?;
            events.push((k, start, end));
        }
    }
    stream.synchronize().map_err(drv)?;
    let mut times: Vec<Vec<u64>> = vec![Vec::new(); 4];
    for (i, (k, start, end)) in events.iter().enumerate() {
        let ms = start.elapsed_ms(end).map_err(drv)?;
        if i >= 4 {
            let slot = Kernel::STREAM
                .iter()
                .position(|x| x == k)
                .expect("STREAM kernel");
            times[slot].push(((ms as f64) * 1e6).round().max(1.0) as u64);
        }
    }
    let (ha, hb, hc) = (
        stream.clone_dtoh(&a).map_err(drv)?,
        stream.clone_dtoh(&b).map_err(drv)?,
        stream.clone_dtoh(&c).map_err(drv)?,
    );
    stream::validate(&cfg, &ha, &hb, &hc)?;
    let kernels: Vec<_> = Kernel::STREAM
        .iter()
        .zip(times)
        .map(|(&k, ts)| stream::kernel_result(k, n, ts))
        .collect();
    let bound = device.interface_bandwidth().0;
    if let Some(k) = kernels.iter().find(|k| k.best_gbps.0 > bound) {
        return Err(GpuStreamError::Impossible {
            kernel: k.kernel,
            got: k.best_gbps.0,
            bound,
            bus: device.memory_bus_bits,
            clock_mhz: device.memory_clock_khz / 1000,
        });
    }
    Ok(GpuStreamResult {
        device,
        stream: StreamResult {
            config: cfg,
            kernels,
            validated: true,
            isa: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_follow_the_rule_four_l2_and_at_least_one_gib() {
        // H200: 60 MiB of L2 → 4 × 60 MiB = 240 MiB < 1 GiB, so 1 GiB = 134 217 728 doubles.
        assert_eq!(rule_elements(Bytes(60 << 20)), 134_217_728);
        // A 512 MiB L2 would need 2 GiB per array.
        assert_eq!(rule_elements(Bytes(512 << 20)), 268_435_456);
    }

    #[test]
    fn without_a_driver_the_error_names_the_missing_library() {
        if crate::probe::cuda::driver_present() {
            eprintln!("a CUDA driver is present: run `memwall stream --gpu` for the real check");
            return;
        }
        let e = run(0, Some(1024), 2).unwrap_err();
        assert!(e.to_string().contains("libcuda.so.1"), "{e}");
    }

    #[test]
    fn the_kernels_follow_streams_recurrence() {
        // The CUDA source's arithmetic, evaluated in f64 on the host, must land on
        // STREAM's expected values (a = 2, b = 2, c = 0 before the first pass).
        let cfg = StreamConfig {
            n_elements: 4,
            threads: 1,
            passes: 3,
            kernels: Kernel::STREAM.to_vec(),
        };
        let (mut a, mut b, mut c) = (2.0f64, 2.0f64, 0.0f64);
        for _ in 0..cfg.passes + 1 {
            c = a; // copy
            b = stream::SCALAR * c; // scale
            c = a + b; // add
            a = b + stream::SCALAR * c; // triad
        }
        let e = stream::expected_values(&cfg);
        assert_eq!((a, b, c), (e.a, e.b, e.c));
        for (name, body) in [
            ("copy", "*(double2*)(c + i) = *(const double2*)(a + i)"),
            ("scale", "x.x *= s"),
            ("add", "x.x += y.x"),
            ("triad", "x.x += s * y.x"),
        ] {
            assert!(SOURCE.contains(&format!("void {name}(")), "{name}");
            assert!(SOURCE.contains(body), "{name}: {body}");
        }
    }
}
