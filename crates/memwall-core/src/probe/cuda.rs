//! NVIDIA GPUs as the CUDA driver reports them: name, memory, compute capability,
//! multiprocessors, driver version, and the memory interface (bus width × clock) that
//! bounds any bandwidth measured on the device.
//!
//! The driver (`libcuda.so.1`) is loaded at run time, so memwall builds and runs on
//! machines without one: there [`cuda_devices`] says why nothing was found.

use crate::units::{Bytes, Gbps};
use cudarc::driver::{CudaContext, sys};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CudaDevice {
    /// Ordinal (`CUDA0` is 0).
    pub ordinal: usize,
    /// Name (`NVIDIA H200`).
    pub name: String,
    /// Device memory.
    pub memory: Bytes,
    /// Compute capability, `major.minor` (`9.0` for Hopper).
    pub compute_capability: String,
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// L2 cache size.
    pub l2: Bytes,
    /// Memory bus width, bits.
    pub memory_bus_bits: u32,
    /// Peak memory clock, kHz, as the driver reports it.
    pub memory_clock_khz: u32,
    /// The driver's CUDA version (`13.0`).
    pub driver_cuda_version: String,
}

impl CudaDevice {
    /// The memory interface's bound: 2 transfers per clock × clock × bus width ÷ 8,
    /// in decimal GB/s (the driver's clock attribute is the memory clock; DDR/HBM
    /// move data on both edges). A bandwidth measured above this is an error.
    pub fn interface_bandwidth(&self) -> Gbps {
        Gbps(2.0 * self.memory_clock_khz as f64 * 1e3 * (self.memory_bus_bits as f64 / 8.0) / 1e9)
    }
}

/// Why no CUDA device was listed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CudaProbeError {
    /// No driver library on this machine.
    #[error(
        "no NVIDIA driver: libcuda.so.1 is not loadable here (a machine without an NVIDIA GPU, or the driver's library is not on the loader's path)"
    )]
    NoDriver,
    /// The driver answered with an error.
    #[error("the CUDA driver failed: {0}")]
    Driver(String),
}

fn driver_err(e: cudarc::driver::DriverError) -> CudaProbeError {
    CudaProbeError::Driver(format!("{e:?}"))
}

/// Whether the CUDA driver library can be loaded (checked before any call into it,
/// because calling a missing library aborts).
pub fn driver_present() -> bool {
    // SAFETY: only tries `dlopen` on the candidate names.
    unsafe { sys::is_culib_present() }
}

/// Every CUDA device the driver lists.
///
/// # Errors
/// [`CudaProbeError`] when there is no driver or it fails.
pub fn cuda_devices() -> Result<Vec<CudaDevice>, CudaProbeError> {
    if !driver_present() {
        return Err(CudaProbeError::NoDriver);
    }
    let n = CudaContext::device_count().map_err(driver_err)?;
    let mut version: i32 = 0;
    // SAFETY: the library is present; `version` outlives the call.
    let rc = unsafe { sys::cuDriverGetVersion(&mut version) };
    if rc != sys::CUresult::CUDA_SUCCESS {
        return Err(CudaProbeError::Driver(format!(
            "cuDriverGetVersion: {rc:?}"
        )));
    }
    let driver_cuda_version = format!("{}.{}", version / 1000, (version % 1000) / 10);
    let mut out = Vec::new();
    for ordinal in 0..n.max(0) as usize {
        let ctx = CudaContext::new(ordinal).map_err(driver_err)?;
        let attr = |a| ctx.attribute(a).map_err(driver_err);
        use sys::CUdevice_attribute as A;
        let (major, minor) = ctx.compute_capability().map_err(driver_err)?;
        out.push(CudaDevice {
            ordinal,
            name: ctx.name().map_err(driver_err)?,
            memory: Bytes(ctx.total_mem().map_err(driver_err)? as u64),
            compute_capability: format!("{major}.{minor}"),
            multiprocessors: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            l2: Bytes(attr(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64),
            memory_bus_bits: attr(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)? as u32,
            memory_clock_khz: attr(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)? as u32,
            driver_cuda_version: driver_cuda_version.clone(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_bandwidth_is_two_transfers_per_clock_times_bus_bytes() {
        // Hand arithmetic: 2 × 2.619 GHz × 6144 bit ÷ 8 = 4022.8 GB/s.
        let d = CudaDevice {
            ordinal: 0,
            name: "test".into(),
            memory: Bytes(0),
            compute_capability: "9.0".into(),
            multiprocessors: 132,
            l2: Bytes(50 << 20),
            memory_bus_bits: 6144,
            memory_clock_khz: 2_619_000,
            driver_cuda_version: "13.0".into(),
        };
        assert!((d.interface_bandwidth().0 - 4022.784).abs() < 1e-6);
    }

    #[test]
    fn no_driver_is_an_error_that_says_so_not_an_empty_list() {
        if driver_present() {
            eprintln!("a CUDA driver is present here: the no-driver path is not exercised");
            return;
        }
        let e = cuda_devices().unwrap_err();
        assert!(e.to_string().contains("libcuda.so.1"), "{e}");
    }
}
