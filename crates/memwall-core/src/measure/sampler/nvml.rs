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

/// `nvmlProcessUtilizationSample_t`: one process's utilisation over one sample
/// period (percent of the period; `time_stamp` in µs, CPU clock).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct ProcessSample {
    pid: c_uint,
    time_stamp: c_ulonglong,
    sm_util: c_uint,
    mem_util: c_uint,
    enc_util: c_uint,
    dec_util: c_uint,
}

/// `nvmlDeviceGetProcessUtilization(device, samples, count, last_seen_µs)`.
type ProcUtilFn = unsafe extern "C" fn(Dev, *mut ProcessSample, *mut c_uint, c_ulonglong) -> Ret;

const NVML_ERROR_NOT_FOUND: Ret = 6;
const NVML_ERROR_INSUFFICIENT_SIZE: Ret = 7;

/// Other processes' SM utilisation, percent, from one device's process samples
/// `(pid, sm %)`: each process's mean over its samples, summed over every pid but
/// `own`, capped at 100 (a process's samples cover successive periods since the last
/// read, so its mean is its share of that span).
pub fn other_sm_util(samples: &[(u32, u32)], own: u32) -> f64 {
    let mut per: std::collections::BTreeMap<u32, (f64, u32)> = Default::default();
    for &(pid, sm) in samples.iter().filter(|s| s.0 != own) {
        let e = per.entry(pid).or_insert((0.0, 0));
        e.0 += sm as f64;
        e.1 += 1;
    }
    per.values()
        .map(|(s, n)| s / *n as f64)
        .sum::<f64>()
        .min(100.0)
}

struct Api {
    lib: *mut c_void,
    /// Absent in old drivers: other processes' GPU use is then unknown.
    proc_util: Option<ProcUtilFn>,
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
            proc_util: sym(lib, c"nvmlDeviceGetProcessUtilization").ok(),
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

/// How long after the newest process sample a read without a newer one still means
/// "the driver has not sampled again yet" rather than "no process ran a kernel".
/// Seen on an H100 (driver 580): the driver samples process utilisation about every
/// 0.2 s, so a 10 Hz sampler found no newer sample at every other read, and reading
/// those as 0 % halved the mean (48 % for a loop that pmon showed at 99 %).
pub const PROCESS_SAMPLE_STALE_US: u64 = 1_000_000;

/// One read of other processes' SM utilisation, percent: `new` is what the samples
/// newer than the last read gave (`None`: there were none), `seen_us` the newest sample
/// time stamp seen so far (0: none since the sampler started), `now_us` the wall clock
/// (NVML stamps samples with it, µs since the epoch). No newer sample is 0 % once the
/// newest is older than [`PROCESS_SAMPLE_STALE_US`] (nothing ran), and not a reading
/// (`None`) while it is younger (the driver has not sampled again yet).
pub fn other_reading(new: Option<f64>, seen_us: u64, now_us: u64) -> Option<f64> {
    match new {
        Some(u) => Some(u),
        None if seen_us == 0 || now_us.saturating_sub(seen_us) >= PROCESS_SAMPLE_STALE_US => {
            Some(0.0)
        }
        None => None,
    }
}

/// The NVML part; every counter is unavailable, with the reason, when the
/// library does not load.
pub struct NvmlSampler {
    api: Result<Api, String>,
    /// Which counters answered at load: (power, energy, temperature, clocks, util,
    /// other processes' utilisation).
    ok: [bool; 6],
    energy_base_mj: Vec<u64>,
    /// The newest process-sample time stamp seen per device, µs (0 before the first).
    proc_seen_us: Vec<u64>,
}

impl Api {
    /// Other processes' SM utilisation on device `d` since `last_us`, percent (`None`
    /// when the driver has no sample newer than `last_us`: NVML's NOT_FOUND), and the
    /// newest time stamp; `None` when the query fails. [`other_reading`] decides what
    /// "no newer sample" means.
    fn other_util(&self, d: Dev, last_us: u64) -> Option<(Option<f64>, u64)> {
        let f = self.proc_util?;
        let mut n: c_uint = 0;
        // SAFETY: a NULL buffer with count 0 asks for the needed size (NVML's API).
        let r = unsafe { f(d, std::ptr::null_mut(), &mut n, last_us) };
        match r {
            NVML_ERROR_INSUFFICIENT_SIZE => {}
            0 | NVML_ERROR_NOT_FOUND => return Some((None, last_us)),
            _ => return None,
        }
        let mut buf = vec![ProcessSample::default(); n as usize + 8];
        let mut n = buf.len() as c_uint;
        // SAFETY: buffer of `n` elements, valid handle and out-pointer.
        let r = unsafe { f(d, buf.as_mut_ptr(), &mut n, last_us) };
        if r == NVML_ERROR_NOT_FOUND {
            return Some((None, last_us));
        }
        if r != 0 {
            return None;
        }
        let got = &buf[..(n as usize).min(buf.len())];
        let newest = got.iter().map(|s| s.time_stamp).max().unwrap_or(last_us);
        let pairs: Vec<(u32, u32)> = got.iter().map(|s| (s.pid, s.sm_util)).collect();
        Some((
            (!got.is_empty()).then(|| other_sm_util(&pairs, std::process::id())),
            newest.max(last_us),
        ))
    }
}

impl NvmlSampler {
    /// Loads NVML and probes each query once on the first GPU.
    pub fn load() -> NvmlSampler {
        let api = load_api();
        let mut ok = [false; 6];
        if let Ok(a) = &api {
            ok[5] = a.other_util(a.devs[0], 0).is_some();
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
            proc_seen_us: vec![],
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
            "gpu_other_processes",
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
                        false if *n == "gpu_other_processes" => Counter::unavailable(
                            n,
                            &src,
                            "nvmlDeviceGetProcessUtilization is missing or refused on this driver/GPU: other processes' GPU use is unknown",
                        ),
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
            // Samples from before the start are not this run's.
            self.proc_seen_us = a
                .devs
                .iter()
                .map(|&d| a.other_util(d, 0).map_or(0, |x| x.1))
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
        if self.ok[5] && self.proc_seen_us.len() == a.devs.len() {
            let mut busiest: Option<f64> = None;
            let now_us = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |t| t.as_micros() as u64);
            for (i, &d) in a.devs.iter().enumerate() {
                match a.other_util(d, self.proc_seen_us[i]).and_then(|(u, seen)| {
                    let r = other_reading(u, seen, now_us);
                    self.proc_seen_us[i] = seen;
                    r
                }) {
                    Some(u) => busiest = Some(busiest.map_or(u, |b| b.max(u))),
                    None => {
                        busiest = None;
                        break;
                    }
                }
            }
            s.gpu_other_util_pct = busiest.and_then(|u| plausible(u, 0.0, 100.0));
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
    fn a_read_without_a_newer_process_sample_is_no_reading_until_the_last_one_is_stale() {
        let seen = 1_700_000_000_000_000;
        // Samples newer than the last read: what they say, whenever they came.
        assert_eq!(other_reading(Some(99.0), seen, seen + 100_000), Some(99.0));
        assert_eq!(other_reading(Some(0.0), seen, seen + 100_000), Some(0.0));
        // None newer, the newest 0.1 s old (the H100's driver samples about every
        // 0.2 s): the driver has not sampled again, so this read says nothing.
        assert_eq!(other_reading(None, seen, seen + 100_000), None);
        assert_eq!(other_reading(None, seen, seen + 999_999), None);
        // None newer for a whole second, or never one: nothing ran a kernel.
        assert_eq!(other_reading(None, seen, seen + 1_000_000), Some(0.0));
        assert_eq!(other_reading(None, 0, seen), Some(0.0));
        // A stamp ahead of the clock (clock stepped back) is recent, not stale.
        assert_eq!(other_reading(None, seen + 5, seen), None);
    }

    #[test]
    fn other_processes_sm_use_is_their_mean_share_summed_without_ours() {
        let own = 4242;
        // Ours alone: nothing from others.
        assert_eq!(other_sm_util(&[(own, 90), (own, 95)], own), 0.0);
        // pid 7 at 30 % and 50 % over two periods (mean 40), pid 9 at 10 %; ours ignored.
        let got = other_sm_util(&[(7, 30), (own, 60), (7, 50), (9, 10)], own);
        assert!((got - 50.0).abs() < 1e-12, "{got}");
        // Capped at 100 % (NVML's shares of overlapping periods can add past it).
        assert_eq!(other_sm_util(&[(7, 80), (9, 70)], own), 100.0);
        assert_eq!(other_sm_util(&[], own), 0.0);
    }

    #[test]
    fn without_a_driver_every_gpu_counter_says_why() {
        let s = NvmlSampler::load();
        let c = s.counters();
        assert_eq!(c.len(), 6);
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
