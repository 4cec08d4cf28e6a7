//! Linux counters, read from sysfs and procfs under a root folder (`/` for the
//! machine, a temp dir of hand-written files in tests):
//!
//! - RAPL (`sys/class/powercap/intel-rapl:N` package zones, `intel-rapl:N:M` named
//!   `dram`): `energy_uj` is a µJ counter that wraps to 0 after
//!   `max_energy_range_uj`; a read smaller than the previous one is a wrap, so the
//!   delta is `(max − previous) + now` ([`wrap_delta`]). AMD's RAPL uses the same
//!   interface (package zones only). Since Linux 5.10 `energy_uj` is readable by
//!   root only.
//! - Temperatures: hwmon chips named `coretemp`, `k10temp`, `zenpower` or
//!   `cpu_thermal` (`temp*_input`, m°C), else every `sys/class/thermal/thermal_zone*`.
//! - CPU clock: the mean of `cpufreq/scaling_cur_freq` (kHz) over the CPUs, else the
//!   mean `cpu MHz` of `proc/cpuinfo`.
//! - Memory (`proc/meminfo`) and swap traffic (`proc/vmstat` `pswpin`/`pswpout`).
//! - DRAM bandwidth: the uncore memory-controller PMUs under
//!   `sys/bus/event_source/devices` (`uncore_imc*` with `cas_count_read/write` or
//!   `data_reads/writes`), counted system-wide with `perf_event_open`; the byte
//!   scale comes from the event's `.scale` and `.unit` files (64 B per CAS when
//!   absent). AMD's `amd_umc`/`amd_df` PMUs publish no named DRAM events, so they
//!   are listed with that reason.

use super::{Counter, Sample, Sampler, plausible};
use std::path::{Path, PathBuf};

/// The largest CPU package + DRAM power accepted from RAPL, W: above any socket
/// made (a misread counter).
const MAX_RAPL_W: f64 = 2_000.0;
/// The largest DRAM traffic accepted from the uncore counters, GB/s.
const MAX_DRAM_GBPS: f64 = 10_000.0;
/// hwmon chip names that are CPU sensors.
const CPU_HWMON: [&str; 4] = ["coretemp", "k10temp", "zenpower", "cpu_thermal"];

/// Energy counted since the previous read of a counter that wraps to 0 after `max`
/// (both in µJ): `now − last`, or `(max − last) + now` when it wrapped.
///
/// ```
/// use memwall_core::measure::sampler::linux::wrap_delta;
/// assert_eq!(wrap_delta(100, 250, 1000), 150);
/// assert_eq!(wrap_delta(900, 50, 1000), 150); // wrapped: 100 to the top, then 50
/// ```
pub fn wrap_delta(last: u64, now: u64, max: u64) -> u64 {
    if now >= last {
        now - last
    } else {
        max.saturating_sub(last) + now
    }
}

fn read_trim(p: &Path) -> std::io::Result<String> {
    std::fs::read_to_string(p).map(|s| s.trim().to_string())
}

fn read_u64(p: &Path) -> Option<u64> {
    read_trim(p).ok()?.parse().ok()
}

fn sorted_dir(p: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(p) {
        Ok(d) => d.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => vec![],
    };
    v.sort();
    v
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What a RAPL zone measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaplKind {
    /// A CPU package (`package-N`).
    Package,
    /// DRAM attached to a package.
    Dram,
}

/// One RAPL zone being counted.
#[derive(Debug, Clone)]
pub struct RaplZone {
    /// The zone folder.
    pub dir: PathBuf,
    /// Package or DRAM.
    pub kind: RaplKind,
    /// `max_energy_range_uj`.
    pub max_uj: u64,
    last_uj: u64,
    acc_uj: u64,
}

/// The RAPL zones under `root`, or why there are none usable.
pub fn rapl_zones(root: &Path) -> Result<Vec<RaplZone>, String> {
    let base = root.join("sys/class/powercap");
    if !base.is_dir() {
        let pmu = root.join("sys/bus/event_source/devices/power/events");
        let listed: Vec<String> = sorted_dir(&pmu)
            .iter()
            .map(|p| file_name(p))
            .filter(|n| n.starts_with("energy-") && !n.contains('.'))
            .collect();
        let also = match listed.is_empty() {
            true => String::new(),
            false => format!(
                "; the perf `power` PMU lists {} (memwall reads RAPL through powercap only)",
                listed.join(", ")
            ),
        };
        return Err(format!(
            "RAPL not readable here: {} absent (no powercap driver; usual in a VM){also}",
            base.display()
        ));
    }
    let mut zones = Vec::new();
    let mut denied = None;
    for dir in sorted_dir(&base) {
        let n = file_name(&dir);
        let Some(rest) = n.strip_prefix("intel-rapl:") else {
            continue;
        };
        let name = read_trim(&dir.join("name")).unwrap_or_default();
        let top = !rest.contains(':');
        let kind = match (top, name.as_str()) {
            (true, s) if s.starts_with("package") => RaplKind::Package,
            (_, "dram") => RaplKind::Dram,
            _ => continue, // core/uncore sub-zones are inside the package; psys spans more
        };
        let energy = dir.join("energy_uj");
        let now = match read_trim(&energy) {
            Ok(s) => match s.parse::<u64>() {
                Ok(v) => v,
                Err(_) => return Err(format!("{}: not a number: {s:?}", energy.display())),
            },
            Err(e) => {
                denied = Some(format!(
                    "{}: {e} (root-only since Linux 5.10; run as root or `chmod a+r` it)",
                    energy.display()
                ));
                continue;
            }
        };
        let max_path = dir.join("max_energy_range_uj");
        let Some(max_uj) = read_u64(&max_path) else {
            return Err(format!("{}: missing or not a number", max_path.display()));
        };
        zones.push(RaplZone {
            dir,
            kind,
            max_uj,
            last_uj: now,
            acc_uj: 0,
        });
    }
    match (zones.is_empty(), denied) {
        (true, Some(d)) => Err(d),
        (true, None) => Err(format!("{} has no intel-rapl package zone", base.display())),
        (false, _) => Ok(zones),
    }
}

/// CPU temperature inputs (m°C files) and their description, or why none.
pub fn temp_inputs(root: &Path) -> Result<(Vec<PathBuf>, String), String> {
    let hw = root.join("sys/class/hwmon");
    let mut files = Vec::new();
    let mut chips = Vec::new();
    for dir in sorted_dir(&hw) {
        let name = read_trim(&dir.join("name")).unwrap_or_default();
        if !CPU_HWMON.contains(&name.as_str()) {
            continue;
        }
        let before = files.len();
        for f in sorted_dir(&dir) {
            let n = file_name(&f);
            if n.starts_with("temp") && n.ends_with("_input") {
                files.push(f);
            }
        }
        if files.len() > before {
            chips.push(format!("hwmon {name}"));
        }
    }
    if !files.is_empty() {
        return Ok((files, chips.join(", ")));
    }
    let th = root.join("sys/class/thermal");
    let mut types = Vec::new();
    for dir in sorted_dir(&th) {
        if !file_name(&dir).starts_with("thermal_zone") {
            continue;
        }
        let t = dir.join("temp");
        if t.is_file() {
            types.push(read_trim(&dir.join("type")).unwrap_or_else(|_| file_name(&dir)));
            files.push(t);
        }
    }
    if files.is_empty() {
        return Err(format!(
            "no CPU temperature sensor: no {} chip under {} and no thermal_zone under {} (usual in a VM)",
            CPU_HWMON.join("/"),
            hw.display(),
            th.display()
        ));
    }
    Ok((files, format!("{} ({})", th.display(), types.join(", "))))
}

/// Where the CPU clock is read.
#[derive(Debug, Clone)]
pub enum FreqSource {
    /// `scaling_cur_freq` files, kHz.
    Cpufreq(Vec<PathBuf>),
    /// `cpu MHz` lines of this cpuinfo file.
    Cpuinfo(PathBuf),
}

/// The CPU clock's source, or why none.
pub fn freq_source(root: &Path) -> Result<FreqSource, String> {
    let cpus = root.join("sys/devices/system/cpu");
    let files: Vec<PathBuf> = sorted_dir(&cpus)
        .into_iter()
        .filter(|d| {
            let n = file_name(d);
            n.strip_prefix("cpu")
                .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|d| d.join("cpufreq/scaling_cur_freq"))
        .filter(|f| f.is_file())
        .collect();
    if !files.is_empty() {
        return Ok(FreqSource::Cpufreq(files));
    }
    let ci = root.join("proc/cpuinfo");
    match cpuinfo_mhz(&read_trim(&ci).unwrap_or_default()) {
        Some(_) => Ok(FreqSource::Cpuinfo(ci)),
        None => Err(format!(
            "no cpufreq driver under {} and no `cpu MHz` in {}",
            cpus.display(),
            ci.display()
        )),
    }
}

/// Mean of the `cpu MHz` lines of a cpuinfo text.
pub fn cpuinfo_mhz(text: &str) -> Option<f64> {
    let v: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse().ok())
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// `(total, available, swap_total, swap_free)` in bytes from a meminfo text.
pub fn meminfo(text: &str) -> Option<(u64, u64, u64, u64)> {
    let kb = |key: &str| -> Option<u64> {
        let l = text.lines().find(|l| l.starts_with(key))?;
        let v: u64 = l[key.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(v * 1024)
    };
    Some((
        kb("MemTotal:")?,
        kb("MemAvailable:")?,
        kb("SwapTotal:")?,
        kb("SwapFree:")?,
    ))
}

/// `(pswpin, pswpout)` from a vmstat text.
pub fn vmstat_swap(text: &str) -> Option<(u64, u64)> {
    let get = |key: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
    };
    Some((get("pswpin")?, get("pswpout")?))
}

/// `(busy, steal)` clock ticks of all CPUs together from a `/proc/stat` text: busy =
/// user + nice + system + irq + softirq of the `cpu ` line (guest time is already
/// inside user, idle and iowait are not busy), steal = the hypervisor's time for other
/// guests (0 when the kernel prints no steal column).
pub fn proc_stat_ticks(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal guest guest_nice
    if v.len() < 7 {
        return None;
    }
    let busy = v[0] + v[1] + v[2] + v[5] + v[6];
    Some((busy, v.get(7).copied().unwrap_or(0)))
}

/// utime + stime clock ticks of a process from its `/proc/<pid>/stat` text (fields 14
/// and 15, counted after the command name, which may hold spaces and parentheses).
pub fn pid_stat_ticks(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14 → index 11, stime index 12.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Clock ticks per second of `/proc`'s CPU times (`sysconf(_SC_CLK_TCK)`, 100 on
/// Linux).
fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf reads a constant of the C library.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// One uncore event to count: PMU type and config, the CPU to count on, bytes
/// per count.
#[derive(Debug, Clone, PartialEq)]
pub struct UncoreEvent {
    /// PMU folder name (`uncore_imc_0`).
    pub pmu: String,
    /// Event name (`cas_count_read`).
    pub event: String,
    /// `perf_event_attr.type`.
    pub pmu_type: u32,
    /// `perf_event_attr.config`.
    pub config: u64,
    /// First CPU of the PMU's `cpumask`.
    pub cpu: i32,
    pub bytes_per_count: f64,
}

/// Builds `perf_event_attr.config` from an event string (`event=0x04,umask=0x03`)
/// and the PMU's `format/` files (`config:0-7`, `config:8-15`, `config:21`).
///
/// # Errors
/// A field without a format file, a format outside `config`, or a bad number.
pub fn event_config(pmu_dir: &Path, spec: &str) -> Result<u64, String> {
    let mut config = 0u64;
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (field, val) = part.split_once('=').unwrap_or((part, "1"));
        let v = match val.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16),
            None => val.parse(),
        }
        .map_err(|_| format!("event {spec:?}: bad value {val:?} of {field}"))?;
        let fmt_path = pmu_dir.join("format").join(field);
        let fmt = read_trim(&fmt_path).map_err(|e| format!("{}: {e}", fmt_path.display()))?;
        let bits = fmt
            .strip_prefix("config:")
            .ok_or_else(|| format!("{}: {fmt:?} is not in config", fmt_path.display()))?;
        let (lo, hi) = match bits.split_once('-') {
            Some((a, b)) => (a.parse::<u32>(), b.parse::<u32>()),
            None => (bits.parse(), bits.parse()),
        };
        let (Ok(lo), Ok(hi)) = (lo, hi) else {
            return Err(format!("{}: bad bit range {bits:?}", fmt_path.display()));
        };
        if hi < lo || hi > 63 {
            return Err(format!("{}: bad bit range {bits:?}", fmt_path.display()));
        }
        let width = hi - lo + 1;
        let mask = if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        config |= (v & mask) << lo;
    }
    Ok(config)
}

/// The uncore DRAM read/write events of the memory-controller PMUs, or why none.
pub fn uncore_events(root: &Path) -> Result<Vec<UncoreEvent>, String> {
    let base = root.join("sys/bus/event_source/devices");
    let mut out = Vec::new();
    let mut amd = Vec::new();
    for dir in sorted_dir(&base) {
        let pmu = file_name(&dir);
        if pmu.starts_with("amd_umc") || pmu == "amd_df" {
            amd.push(pmu);
            continue;
        }
        if !pmu.starts_with("uncore_imc") {
            continue;
        }
        let pair = [
            ("cas_count_read", "cas_count_write"),
            ("data_reads", "data_writes"),
        ]
        .into_iter()
        .find(|(r, _)| dir.join("events").join(r).is_file());
        let Some((r, w)) = pair else { continue };
        let pmu_type = read_u64(&dir.join("type"))
            .ok_or_else(|| format!("{}: missing or not a number", dir.join("type").display()))?
            as u32;
        let cpu = read_trim(&dir.join("cpumask"))
            .ok()
            .and_then(|m| m.split([',', '-']).next()?.trim().parse::<i32>().ok())
            .unwrap_or(0);
        for ev in [r, w] {
            let e = dir.join("events").join(ev);
            let spec = read_trim(&e).map_err(|x| format!("{}: {x}", e.display()))?;
            let config = event_config(&dir, &spec)?;
            let scale = read_trim(&dir.join("events").join(format!("{ev}.scale")))
                .ok()
                .and_then(|s| s.parse::<f64>().ok());
            let unit = read_trim(&dir.join("events").join(format!("{ev}.unit"))).ok();
            let bytes_per_count = match (scale, unit.as_deref()) {
                (Some(s), Some("MiB")) => s * 1_048_576.0,
                (Some(s), Some("Bytes") | Some("bytes") | None) => s,
                (Some(_), Some(u)) => return Err(format!("{}: unknown unit {u:?}", e.display())),
                (None, _) => 64.0,
            };
            out.push(UncoreEvent {
                pmu: pmu.clone(),
                event: ev.to_string(),
                pmu_type,
                config,
                cpu,
                bytes_per_count,
            });
        }
    }
    if !out.is_empty() {
        return Ok(out);
    }
    if !amd.is_empty() {
        return Err(format!(
            "{} publish no named DRAM read/write events; counting them needs per-family event codes, not implemented",
            amd.join(", ")
        ));
    }
    Err(format!(
        "no memory-controller PMU (uncore_imc*, amd_umc*, amd_df) under {} (the kernel or hypervisor exposes none; usual in a VM)",
        base.display()
    ))
}

/// Open uncore counters (file descriptors), closed on drop.
struct OpenUncore {
    fds: Vec<(i32, f64)>,
    last: Vec<u64>,
}

impl Drop for OpenUncore {
    fn drop(&mut self) {
        for (fd, _) in &self.fds {
            // SAFETY: fd came from perf_event_open and is closed once.
            unsafe { libc::close(*fd) };
        }
    }
}

#[cfg(target_os = "linux")]
fn perf_open(ev: &UncoreEvent) -> Result<i32, String> {
    // perf_event_attr as of PERF_ATTR_SIZE_VER0 (64 bytes): type, size, config,
    // then fields left 0 (counting, enabled, no sampling).
    #[repr(C)]
    struct Attr {
        type_: u32,
        size: u32,
        config: u64,
        rest: [u64; 6],
    }
    let attr = Attr {
        type_: ev.pmu_type,
        size: std::mem::size_of::<Attr>() as u32,
        config: ev.config,
        rest: [0; 6],
    };
    // SAFETY: attr is a valid perf_event_attr prefix of the size it states.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const Attr,
            -1 as libc::pid_t,
            ev.cpu,
            -1 as libc::c_int,
            0 as libc::c_ulong,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        let paranoid = read_trim(Path::new("/proc/sys/kernel/perf_event_paranoid"))
            .unwrap_or_else(|_| "?".into());
        return Err(format!(
            "perf_event_open {}/{}: {e} (perf_event_paranoid = {paranoid}; system-wide uncore counters need ≤ 0 or CAP_PERFMON)",
            ev.pmu, ev.event
        ));
    }
    Ok(fd as i32)
}

#[cfg(not(target_os = "linux"))]
fn perf_open(_ev: &UncoreEvent) -> Result<i32, String> {
    Err("perf_event_open exists on Linux only".into())
}

fn perf_read(fd: i32) -> Option<u64> {
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into a u64 from an open perf fd.
    let n = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    (n == 8).then_some(v)
}

/// The Linux part: RAPL, temperatures, clock, memory, swap, uncore bandwidth.
pub struct LinuxSampler {
    root: PathBuf,
    rapl: Result<Vec<RaplZone>, String>,
    temps: Result<(Vec<PathBuf>, String), String>,
    freq: Result<FreqSource, String>,
    uncore: Result<OpenUncore, String>,
    uncore_source: String,
    swap_base: Option<(u64, u64)>,
    /// `(busy, steal, own)` ticks at start.
    cpu_base: Option<(u64, u64, u64)>,
}

impl LinuxSampler {
    /// Discovers the counters under `root` (`/` for this machine) and opens the
    /// uncore counters when they exist.
    pub fn new(root: &Path) -> LinuxSampler {
        let events = uncore_events(root);
        let uncore_source = match &events {
            Ok(ev) => {
                let mut p: Vec<&str> = ev.iter().map(|e| e.pmu.as_str()).collect();
                p.dedup();
                format!("perf_event_open on {}", p.join(", "))
            }
            Err(_) => root
                .join("sys/bus/event_source/devices")
                .display()
                .to_string(),
        };
        let uncore = events.and_then(|ev| {
            let mut open = OpenUncore {
                fds: vec![],
                last: vec![],
            };
            for e in &ev {
                open.fds.push((perf_open(e)?, e.bytes_per_count));
            }
            Ok(open)
        });
        LinuxSampler {
            root: root.to_path_buf(),
            rapl: rapl_zones(root),
            temps: temp_inputs(root),
            freq: freq_source(root),
            uncore,
            uncore_source,
            swap_base: None,
            cpu_base: None,
        }
    }

    fn proc(&self, name: &str) -> String {
        read_trim(&self.root.join("proc").join(name)).unwrap_or_default()
    }

    /// `(busy, steal, own)` ticks now: the machine's from `proc/stat`, this process's
    /// from `proc/self/stat`.
    fn cpu_ticks(&self) -> Option<(u64, u64, u64)> {
        let (busy, steal) = proc_stat_ticks(&self.proc("stat"))?;
        Some((busy, steal, pid_stat_ticks(&self.proc("self/stat"))?))
    }
}

impl Sampler for LinuxSampler {
    fn counters(&self) -> Vec<Counter> {
        let powercap = self.root.join("sys/class/powercap").display().to_string();
        let rapl = |kind: RaplKind, name: &str| match &self.rapl {
            Ok(z) => {
                let dirs: Vec<String> = z
                    .iter()
                    .filter(|z| z.kind == kind)
                    .map(|z| z.dir.display().to_string())
                    .collect();
                if dirs.is_empty() {
                    Counter::unavailable(
                        name,
                        &powercap,
                        "no RAPL zone of this kind (AMD's RAPL has no DRAM domain)",
                    )
                } else {
                    Counter::available(name, dirs.join(", "))
                }
            }
            Err(r) => Counter::unavailable(name, &powercap, r.clone()),
        };
        let mut c = vec![
            rapl(RaplKind::Package, "cpu_package_energy"),
            rapl(RaplKind::Dram, "dram_energy"),
        ];
        c.push(match &self.temps {
            Ok((_, src)) => Counter::available("cpu_temperature", src.clone()),
            Err(r) => Counter::unavailable(
                "cpu_temperature",
                "sys/class/hwmon, sys/class/thermal",
                r.clone(),
            ),
        });
        c.push(match &self.freq {
            Ok(FreqSource::Cpufreq(f)) => Counter::available(
                "cpu_frequency",
                format!("cpufreq scaling_cur_freq ({} CPUs)", f.len()),
            ),
            Ok(FreqSource::Cpuinfo(p)) => Counter::available(
                "cpu_frequency",
                format!(
                    "{} `cpu MHz` (no cpufreq driver: may be a fixed nominal figure)",
                    p.display()
                ),
            ),
            Err(r) => Counter::unavailable("cpu_frequency", "sys/devices/system/cpu", r.clone()),
        });
        let mi = self.root.join("proc/meminfo");
        c.push(match meminfo(&self.proc("meminfo")) {
            Some(_) => Counter::available("memory", mi.display().to_string()),
            None => Counter::unavailable(
                "memory",
                mi.display().to_string(),
                "unreadable or missing MemTotal/MemAvailable/SwapTotal/SwapFree",
            ),
        });
        let st = self.root.join("proc/stat");
        c.push(match self.cpu_ticks() {
            Some(_) => Counter::available(
                "cpu_time",
                format!(
                    "{} (all CPUs), {}",
                    st.display(),
                    self.root.join("proc/self/stat").display()
                ),
            ),
            None => Counter::unavailable(
                "cpu_time",
                st.display().to_string(),
                "no `cpu ` line in proc/stat or no utime/stime in proc/self/stat",
            ),
        });
        let vm = self.root.join("proc/vmstat");
        c.push(match vmstat_swap(&self.proc("vmstat")) {
            Some(_) => Counter::available("swap", format!("{} pswpin/pswpout", vm.display())),
            None => {
                Counter::unavailable("swap", vm.display().to_string(), "no pswpin/pswpout lines")
            }
        });
        c.push(match &self.uncore {
            Ok(_) => Counter::available("dram_bandwidth", self.uncore_source.clone()),
            Err(r) => Counter::unavailable("dram_bandwidth", self.uncore_source.clone(), r.clone()),
        });
        c
    }

    fn start(&mut self) {
        if let Ok(z) = &mut self.rapl {
            for z in z.iter_mut() {
                if let Some(v) = read_u64(&z.dir.join("energy_uj")) {
                    z.last_uj = v;
                }
                z.acc_uj = 0;
            }
        }
        self.swap_base = vmstat_swap(&self.proc("vmstat"));
        self.cpu_base = self.cpu_ticks();
        if let Ok(u) = &mut self.uncore {
            u.last = u
                .fds
                .iter()
                .map(|(fd, _)| perf_read(*fd).unwrap_or(0))
                .collect();
        }
    }

    fn read(&mut self, s: &mut Sample, dt_s: Option<f64>) {
        if let Ok(zones) = &mut self.rapl {
            let (mut pkg, mut dram, mut dpkg, mut ddram) = (0u64, 0u64, 0u64, 0u64);
            let (mut has_pkg, mut has_dram) = (false, false);
            for z in zones.iter_mut() {
                let Some(now) = read_u64(&z.dir.join("energy_uj")) else {
                    continue;
                };
                let d = wrap_delta(z.last_uj, now, z.max_uj);
                z.last_uj = now;
                z.acc_uj += d;
                match z.kind {
                    RaplKind::Package => (pkg, dpkg, has_pkg) = (pkg + z.acc_uj, dpkg + d, true),
                    RaplKind::Dram => (dram, ddram, has_dram) = (dram + z.acc_uj, ddram + d, true),
                }
            }
            let power = |d: u64| {
                dt_s.filter(|t| *t > 0.0)
                    .and_then(|t| plausible(d as f64 / 1e6 / t, 0.0, MAX_RAPL_W))
            };
            if has_pkg {
                s.cpu_energy_j = Some(pkg as f64 / 1e6);
                s.cpu_power_w = power(dpkg);
            }
            if has_dram {
                s.dram_energy_j = Some(dram as f64 / 1e6);
                s.dram_power_w = power(ddram);
            }
        }
        if let Ok((files, _)) = &self.temps {
            s.cpu_temp_c = files
                .iter()
                .filter_map(|f| read_trim(f).ok()?.parse::<f64>().ok())
                .map(|m| m / 1000.0)
                .filter(|c| (-40.0..=150.0).contains(c))
                .reduce(f64::max);
        }
        s.cpu_mhz = match &self.freq {
            Ok(FreqSource::Cpufreq(files)) => {
                let v: Vec<f64> = files
                    .iter()
                    .filter_map(|f| read_u64(f))
                    .map(|k| k as f64 / 1000.0)
                    .collect();
                (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
            }
            Ok(FreqSource::Cpuinfo(p)) => cpuinfo_mhz(&read_trim(p).unwrap_or_default()),
            Err(_) => None,
        };
        if let Some((total, avail, st, sf)) = meminfo(&self.proc("meminfo")) {
            s.mem_total_bytes = Some(total);
            s.mem_used_bytes = Some(total.saturating_sub(avail));
            s.swap_used_bytes = Some(st.saturating_sub(sf));
        }
        if let (Some((i0, o0)), Some((i, o))) = (self.swap_base, vmstat_swap(&self.proc("vmstat")))
        {
            s.swap_in_pages = Some(i.saturating_sub(i0));
            s.swap_out_pages = Some(o.saturating_sub(o0));
        }
        if let (Some((b0, st0, o0)), Some((b, st, o))) = (self.cpu_base, self.cpu_ticks()) {
            let hz = clock_ticks_per_s();
            s.cpu_busy_s = Some(b.saturating_sub(b0) as f64 / hz);
            s.cpu_steal_s = Some(st.saturating_sub(st0) as f64 / hz);
            s.own_cpu_s = Some(o.saturating_sub(o0) as f64 / hz);
        }
        if let Ok(u) = &mut self.uncore {
            let mut bytes = 0.0;
            let mut ok = true;
            for (i, (fd, per)) in u.fds.iter().enumerate() {
                match perf_read(*fd) {
                    Some(v) => {
                        bytes += v.saturating_sub(u.last[i]) as f64 * per;
                        u.last[i] = v;
                    }
                    None => ok = false,
                }
            }
            s.dram_gbps = match (ok, dt_s) {
                (true, Some(t)) if t > 0.0 => plausible(bytes / t / 1e9, 0.0, MAX_DRAM_GBPS),
                _ => None,
            };
        }
    }

    fn stop(&mut self) {
        if self.uncore.is_ok() {
            self.uncore = Err("stopped".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// A machine with one package (with core and dram sub-zones), coretemp, two
    /// CPUs with cpufreq, meminfo, vmstat and an Intel IMC PMU.
    fn fixture() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let pc = "sys/class/powercap";
        put(r, &format!("{pc}/intel-rapl:0/name"), "package-0\n");
        put(r, &format!("{pc}/intel-rapl:0/energy_uj"), "262143000000\n");
        put(
            r,
            &format!("{pc}/intel-rapl:0/max_energy_range_uj"),
            "262143328850\n",
        );
        put(r, &format!("{pc}/intel-rapl:0:0/name"), "core\n");
        put(r, &format!("{pc}/intel-rapl:0:0/energy_uj"), "5\n");
        put(
            r,
            &format!("{pc}/intel-rapl:0:0/max_energy_range_uj"),
            "262143328850\n",
        );
        put(r, &format!("{pc}/intel-rapl:0:1/name"), "dram\n");
        put(r, &format!("{pc}/intel-rapl:0:1/energy_uj"), "1000000\n");
        put(
            r,
            &format!("{pc}/intel-rapl:0:1/max_energy_range_uj"),
            "65712999613\n",
        );
        put(r, "sys/class/hwmon/hwmon0/name", "nvme\n");
        put(r, "sys/class/hwmon/hwmon0/temp1_input", "99000\n");
        put(r, "sys/class/hwmon/hwmon1/name", "coretemp\n");
        put(r, "sys/class/hwmon/hwmon1/temp1_input", "54000\n");
        put(r, "sys/class/hwmon/hwmon1/temp2_input", "61500\n");
        put(
            r,
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq",
            "3000000\n",
        );
        put(
            r,
            "sys/devices/system/cpu/cpu1/cpufreq/scaling_cur_freq",
            "2000000\n",
        );
        put(
            r,
            "sys/devices/system/cpu/cpufreq/policy0/scaling_cur_freq",
            "9\n",
        );
        put(
            r,
            "proc/meminfo",
            "MemTotal:       16000 kB\nMemFree: 1 kB\nMemAvailable:    6000 kB\nSwapTotal:  4000 kB\nSwapFree:   3000 kB\n",
        );
        put(
            r,
            "proc/vmstat",
            "nr_free_pages 5\npswpin 100\npswpout 200\n",
        );
        put(
            r,
            "proc/stat",
            "cpu  1000 10 200 50000 30 5 7 40 0 0\ncpu0 500 5 100 25000 15 2 3 20 0 0\n",
        );
        put(
            r,
            "proc/self/stat",
            "4242 (memwall (x) y) R 1 2 3 4 5 6 7 8 9 10 300 60 0 0 20 0 9 0\n",
        );
        let imc = "sys/bus/event_source/devices/uncore_imc_0";
        put(r, &format!("{imc}/type"), "13\n");
        put(r, &format!("{imc}/cpumask"), "0,28\n");
        put(r, &format!("{imc}/format/event"), "config:0-7\n");
        put(r, &format!("{imc}/format/umask"), "config:8-15\n");
        put(
            r,
            &format!("{imc}/events/cas_count_read"),
            "event=0x04,umask=0x03\n",
        );
        put(
            r,
            &format!("{imc}/events/cas_count_read.scale"),
            "6.103515625e-5\n",
        );
        put(r, &format!("{imc}/events/cas_count_read.unit"), "MiB\n");
        put(
            r,
            &format!("{imc}/events/cas_count_write"),
            "event=0x04,umask=0x0c\n",
        );
        d
    }

    #[test]
    fn rapl_counts_across_a_wrap_and_sums_packages_and_dram_apart() {
        let d = fixture();
        let r = d.path();
        let mut s = LinuxSampler::new(r);
        s.start();
        // The package counter wraps: 262143000000 → top (262143328850) → 671150.
        // Energy = (262143328850 − 262143000000) + 671150 = 1_000_000 µJ = 1 J.
        put(r, "sys/class/powercap/intel-rapl:0/energy_uj", "671150\n");
        // DRAM: 1_000_000 → 1_500_000 µJ = 0.5 J.
        put(
            r,
            "sys/class/powercap/intel-rapl:0:1/energy_uj",
            "1500000\n",
        );
        let mut x = Sample::default();
        s.read(&mut x, Some(0.5));
        assert_eq!(x.cpu_energy_j, Some(1.0));
        assert_eq!(x.dram_energy_j, Some(0.5));
        assert_eq!(x.cpu_power_w, Some(2.0)); // 1 J in 0.5 s
        assert_eq!(x.dram_power_w, Some(1.0));
        // Next read: package +2 J, energy accumulates.
        put(r, "sys/class/powercap/intel-rapl:0/energy_uj", "2671150\n");
        let mut y = Sample::default();
        s.read(&mut y, Some(1.0));
        assert_eq!(y.cpu_energy_j, Some(3.0));
        assert_eq!(y.cpu_power_w, Some(2.0));
    }

    #[test]
    fn temperatures_clock_memory_and_swap_come_from_their_files() {
        let d = fixture();
        let r = d.path();
        let mut s = LinuxSampler::new(r);
        s.start();
        put(r, "proc/vmstat", "pswpin 130\npswpout 201\n");
        let mut x = Sample::default();
        s.read(&mut x, None);
        assert_eq!(x.cpu_temp_c, Some(61.5)); // coretemp only: the 99 °C NVMe is not the CPU
        assert_eq!(x.cpu_mhz, Some(2500.0)); // (3000 + 2000) / 2; policy0 is not a CPU
        assert_eq!(x.mem_total_bytes, Some(16000 * 1024));
        assert_eq!(x.mem_used_bytes, Some(10000 * 1024));
        assert_eq!(x.swap_used_bytes, Some(1000 * 1024));
        assert_eq!((x.swap_in_pages, x.swap_out_pages), (Some(30), Some(1)));
        assert_eq!(x.cpu_power_w, None, "no interval on the first read");
    }

    #[test]
    fn uncore_events_are_built_from_the_pmu_format_files() {
        let d = fixture();
        let ev = uncore_events(d.path()).unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].event, "cas_count_read");
        assert_eq!(ev[0].pmu_type, 13);
        assert_eq!(ev[0].config, 0x0304);
        assert_eq!(ev[0].cpu, 0);
        assert_eq!(ev[0].bytes_per_count, 64.0); // 6.103515625e-5 MiB
        assert_eq!(ev[1].config, 0x0c04);
        assert_eq!(ev[1].bytes_per_count, 64.0); // no scale file: one cache line
        // A bit field outside config is refused with the file named.
        put(
            d.path(),
            "sys/bus/event_source/devices/uncore_imc_0/format/umask",
            "config1:0-7\n",
        );
        let e = uncore_events(d.path()).unwrap_err();
        assert!(
            e.contains("format/umask") && e.contains("not in config"),
            "{e}"
        );
    }

    #[test]
    fn missing_counters_are_listed_with_reasons() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(r, "proc/cpuinfo", "processor: 0\ncpu MHz\t\t: 2599.998\n");
        put(r, "sys/bus/event_source/devices/amd_df/type", "11\n");
        put(
            r,
            "sys/bus/event_source/devices/power/events/energy-psys",
            "event=0x05\n",
        );
        put(
            r,
            "sys/bus/event_source/devices/power/events/energy-psys.scale",
            "2.3e-10\n",
        );
        let s = LinuxSampler::new(r);
        let c = s.counters();
        let by = |n: &str| c.iter().find(|c| c.name == n).unwrap().clone();
        assert!(
            by("cpu_package_energy")
                .reason
                .unwrap()
                .contains("powercap absent")
        );
        assert!(
            by("cpu_temperature")
                .reason
                .unwrap()
                .contains("no CPU temperature sensor")
        );
        assert!(
            by("dram_bandwidth")
                .reason
                .unwrap()
                .contains("amd_df publish no named DRAM")
        );
        assert!(by("memory").reason.is_some());
        let f = by("cpu_frequency");
        assert!(f.available && f.source.contains("cpu MHz"), "{f:?}");
        // RAPL present but root-only: the reason names the file. (Tests run as a
        // user who may be root, so the denial is planted as a directory.)
        put(r, "sys/class/powercap/intel-rapl:0/name", "package-0\n");
        std::fs::create_dir_all(r.join("sys/class/powercap/intel-rapl:0/energy_uj")).unwrap();
        let e = rapl_zones(r).unwrap_err();
        assert!(
            e.contains("intel-rapl:0/energy_uj") && e.contains("root-only"),
            "{e}"
        );
    }

    #[test]
    fn cpu_times_count_from_start_in_seconds() {
        let d = fixture();
        let r = d.path();
        let mut s = LinuxSampler::new(r);
        s.start();
        // Later: busy +(100 user + 2 nice + 50 system + 3 irq + 5 softirq) = +160 ticks,
        // steal +25, idle +900 (not busy); this process +40 utime +20 stime = +60.
        put(r, "proc/stat", "cpu  1100 12 250 50900 30 8 12 65 0 0\n");
        put(
            r,
            "proc/self/stat",
            "4242 (memwall (x) y) R 1 2 3 4 5 6 7 8 9 10 340 80 0 0 20 0 9 0\n",
        );
        let mut x = Sample::default();
        s.read(&mut x, Some(1.0));
        let hz = clock_ticks_per_s();
        assert_eq!(x.cpu_busy_s, Some(160.0 / hz));
        assert_eq!(x.cpu_steal_s, Some(25.0 / hz));
        assert_eq!(x.own_cpu_s, Some(60.0 / hz));
        let c = s.counters();
        assert!(c.iter().any(|c| c.name == "cpu_time" && c.available));
    }

    #[test]
    fn wrap_delta_handles_the_top_of_the_range() {
        assert_eq!(wrap_delta(0, 0, 10), 0);
        assert_eq!(wrap_delta(10, 0, 10), 0);
        assert_eq!(wrap_delta(7, 2, 10), 5);
    }

    #[test]
    fn parsers_refuse_what_they_cannot_read() {
        assert_eq!(cpuinfo_mhz("model name: x\n"), None);
        assert_eq!(meminfo("MemTotal: 5 kB\n"), None);
        assert_eq!(vmstat_swap("pswpin 3\n"), None);
        assert_eq!(
            vmstat_swap("pswpin 3\npswpout 4\npswpin_x 9\n"),
            Some((3, 4))
        );
        assert_eq!(proc_stat_ticks("cpu0 1 2 3 4 5 6 7\n"), None);
        assert_eq!(proc_stat_ticks("cpu  1 2 3 4 5\n"), None);
        // Kernels before 2.6.11 print no steal column.
        assert_eq!(
            proc_stat_ticks("cpu  1 2 3 4 5 6 7\n"),
            Some((1 + 2 + 3 + 6 + 7, 0))
        );
        assert_eq!(pid_stat_ticks("1 (a) R 1 2"), None);
        assert_eq!(
            pid_stat_ticks("1 (a b) R 1 2 3 4 5 6 7 8 9 10 11 12 13"),
            Some(11 + 12)
        );
    }
}
