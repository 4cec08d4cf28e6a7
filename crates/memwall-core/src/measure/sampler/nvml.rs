//! NVIDIA GPUs through NVML, loaded at run time with `dlopen("libnvidia-ml.so.1")`
//! (the library ships with the driver; memwall neither links it nor needs it to
//! build). Read per GPU: board power (`nvmlDeviceGetPowerUsage`, mW), the total
//! energy counter since driver load (`nvmlDeviceGetTotalEnergyConsumption`, mJ,
//! Volta and newer), GPU temperature, SM and memory clocks (MHz) and
//! memory-controller utilisation (`nvmlDeviceGetUtilizationRates().memory`, the
//! percent of the last sample period in which device memory was read or written).
//! Power and energy are summed over the GPUs, temperature and utilisation are the
//! highest, clocks are the first GPU's. Reference: NVML API reference,
//! <https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html>.

use super::{Counter, Sample, Sampler, plausible};
use std::ffi::{CStr, c_char, c_int, c_uint, c_ulonglong, c_void};

/// The library's file name.
pub const LIBRARY: &str = "libnvidia-ml.so.1";
/// The largest board power accepted per GPU, W (a misread above it).
const MAX_GPU_W: f64 = 3_000.0;

type Dev = *mut c_void;
type Ret = c_int;

#[repr(C)]
#[derive(Default)]
struct Utilization {
    gpu: c_uint,
    memory: c_uint,
}

struct Api {
    lib: *mut c_void,
    shutdown: unsafe extern "C" fn() -> Ret,
    power: unsafe extern "C" fn(Dev, *mut c_uint) -> Ret,
    energy: unsafe extern "C" fn(Dev, *mut c_ulonglong) -> Ret,
    temp: unsafe extern "C" fn(Dev, c_int, *mut c_uint) -> Ret,
    clock: unsafe extern "C" fn(Dev, c_int, *mut c_uint) -> Ret,
    util: unsafe extern "C" fn(Dev, *mut Utilization) -> Ret,
    devs: Vec<Dev>,
    names: Vec<String>,
}

// SAFETY: NVML is thread-safe (its documentation says so); the handles are opaque
// pointers owned by the library and used from one thread at a time here.
unsafe impl Send for Api {}

const NVML_TEMPERATURE_GPU: c_int = 0;
const NVML_CLOCK_SM: c_int = 1;
const NVML_CLOCK_MEM: c_int = 2;

unsafe fn sym<T: Copy>(lib: *mut c_void, name: &CStr) -> Result<T, String> {
    // SAFETY: lib is a live dlopen handle; T is the function's pointer type.
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    if p.is_null() {
        return Err(format!("{LIBRARY} has no {}", name.to_string_lossy()));
    }
    // SAFETY: a non-null symbol of the documented signature.
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

fn load_api() -> Result<Api, String> {
    let path = std::ffi::CString::new(LIBRARY).expect("no NUL");
    // SAFETY: dlopen with a valid C string.
    let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if lib.is_null() {
        return Err(format!("no NVIDIA driver: {LIBRARY} not found"));
    }
    // SAFETY: symbols of NVML's documented C API, called with valid pointers.
    unsafe {
        let init: unsafe extern "C" fn() -> Ret = sym(lib, c"nvmlInit_v2")?;
        let count: unsafe extern "C" fn(*mut c_uint) -> Ret = sym(lib, c"nvmlDeviceGetCount_v2")?;
        let handle: unsafe extern "C" fn(c_uint, *mut Dev) -> Ret =
            sym(lib, c"nvmlDeviceGetHandleByIndex_v2")?;
        let name: unsafe extern "C" fn(Dev, *mut c_char, c_uint) -> Ret =
            sym(lib, c"nvmlDeviceGetName")?;
        let r = init();
        if r != 0 {
            libc::dlclose(lib);
            return Err(format!("nvmlInit_v2 returned {r} (driver not loaded?)"));
        }
        let mut n: c_uint = 0;
        let api = Api {
            lib,
            shutdown: sym(lib, c"nvmlShutdown")?,
            power: sym(lib, c"nvmlDeviceGetPowerUsage")?,
            energy: sym(lib, c"nvmlDeviceGetTotalEnergyConsumption")?,
            temp: sym(lib, c"nvmlDeviceGetTemperature")?,
            clock: sym(lib, c"nvmlDeviceGetClockInfo")?,
            util: sym(lib, c"nvmlDeviceGetUtilizationRates")?,
            devs: vec![],
            names: vec![],
        };
        let mut api = api;
        if count(&mut n) != 0 || n == 0 {
            return Err("NVML loaded but reports no GPU".into());
        }
        for i in 0..n {
            let mut d: Dev = std::ptr::null_mut();
            if handle(i, &mut d) == 0 {
                let mut buf = [0 as c_char; 96];
                let nm = if name(d, buf.as_mut_ptr(), buf.len() as c_uint) == 0 {
                    CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
                } else {
                    format!("GPU {i}")
                };
                api.devs.push(d);
                api.names.push(nm);
            }
        }
        Ok(api)
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        // SAFETY: matched with the successful nvmlInit_v2 and dlopen.
        unsafe {
            (self.shutdown)();
            libc::dlclose(self.lib);
        }
    }
}

/// The NVML part; every counter is unavailable, with the reason, when the
/// library does not load.
pub struct NvmlSampler {
    api: Result<Api, String>,
    /// Which counters answered at load: (power, energy, temperature, clocks, util).
    ok: [bool; 5],
    energy_base_mj: Vec<u64>,
}

impl NvmlSampler {
    /// Loads NVML and probes each query once on the first GPU.
    pub fn load() -> NvmlSampler {
        let api = load_api();
        let mut ok = [false; 5];
        if let Ok(a) = &api {
            let d = a.devs[0];
            let (mut u, mut e, mut util) = (0, 0, Utilization::default());
            // SAFETY: valid device handle and out-pointers.
            unsafe {
                ok[0] = (a.power)(d, &mut u) == 0;
                ok[1] = (a.energy)(d, &mut e) == 0;
                ok[2] = (a.temp)(d, NVML_TEMPERATURE_GPU, &mut u) == 0;
                ok[3] = (a.clock)(d, NVML_CLOCK_SM, &mut u) == 0;
                ok[4] = (a.util)(d, &mut util) == 0;
            }
        }
        NvmlSampler {
            api,
            ok,
            energy_base_mj: vec![],
        }
    }

    fn energies(&self, a: &Api) -> Vec<Option<u64>> {
        a.devs
            .iter()
            .map(|&d| {
                let mut e = 0;
                // SAFETY: valid handle and out-pointer.
                (unsafe { (a.energy)(d, &mut e) } == 0).then_some(e)
            })
            .collect()
    }
}

impl Sampler for NvmlSampler {
    fn counters(&self) -> Vec<Counter> {
        let names = [
            "gpu_power",
            "gpu_energy",
            "gpu_temperature",
            "gpu_clocks",
            "gpu_memory_utilisation",
        ];
        match &self.api {
            Err(r) => names
                .iter()
                .map(|n| Counter::unavailable(n, LIBRARY, r.clone()))
                .collect(),
            Ok(a) => {
                let src = format!("NVML ({})", a.names.join(", "));
                names
                    .iter()
                    .zip(self.ok)
                    .map(|(n, ok)| match ok {
                        true => Counter::available(n, &src),
                        false => Counter::unavailable(
                            n,
                            &src,
                            "the NVML query is not supported on this GPU",
                        ),
                    })
                    .collect()
            }
        }
    }

    fn start(&mut self) {
        if let Ok(a) = &self.api {
            self.energy_base_mj = self
                .energies(a)
                .into_iter()
                .map(|e| e.unwrap_or(0))
                .collect();
        }
    }

    fn read(&mut self, s: &mut Sample, _dt_s: Option<f64>) {
        let Ok(a) = &self.api else { return };
        if self.ok[1] {
            let e = self.energies(a);
            if e.iter().all(Option::is_some) && e.len() == self.energy_base_mj.len() {
                let sum: u64 = e
                    .iter()
                    .zip(&self.energy_base_mj)
                    .map(|(e, b)| e.unwrap_or(0).saturating_sub(*b))
                    .sum();
                s.gpu_energy_j = Some(sum as f64 / 1e3);
            }
        }
        let mut power = 0.0;
        let mut power_ok = self.ok[0];
        let (mut temp, mut util): (Option<f64>, Option<f64>) = (None, None);
        for (i, &d) in a.devs.iter().enumerate() {
            let mut u: c_uint = 0;
            // SAFETY: valid handle and out-pointers throughout.
            unsafe {
                if self.ok[0] {
                    if (a.power)(d, &mut u) == 0 {
                        power += u as f64 / 1e3;
                    } else {
                        power_ok = false;
                    }
                }
                if self.ok[2] && (a.temp)(d, NVML_TEMPERATURE_GPU, &mut u) == 0 {
                    temp = Some(temp.map_or(u as f64, |t| t.max(u as f64)));
                }
                let mut ut = Utilization::default();
                if self.ok[4] && (a.util)(d, &mut ut) == 0 {
                    let m = ut.memory as f64;
                    util = Some(util.map_or(m, |x| x.max(m)));
                }
                if i == 0 && self.ok[3] {
                    if (a.clock)(d, NVML_CLOCK_SM, &mut u) == 0 {
                        s.gpu_sm_mhz = Some(u as f64);
                    }
                    if (a.clock)(d, NVML_CLOCK_MEM, &mut u) == 0 {
                        s.gpu_mem_mhz = Some(u as f64);
                    }
                }
            }
        }
        if power_ok {
            s.gpu_power_w = plausible(power, 0.0, MAX_GPU_W * a.devs.len() as f64);
        }
        s.gpu_temp_c = temp.and_then(|t| plausible(t, -40.0, 150.0));
        s.gpu_mem_util_pct = util.and_then(|u| plausible(u, 0.0, 100.0));
    }

    fn stop(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_driver_every_gpu_counter_says_why() {
        let s = NvmlSampler::load();
        let c = s.counters();
        assert_eq!(c.len(), 5);
        if std::path::Path::new("/proc/driver/nvidia").exists() {
            return; // a machine with the driver: covered by `memwall sample` there
        }
        for x in &c {
            assert!(!x.available);
            assert!(
                x.reason.as_deref().unwrap().contains("no NVIDIA driver"),
                "{x:?}"
            );
        }
    }
}
