#![allow(non_upper_case_globals)]
#![allow(non_camel_case_types)]
#![allow(non_snake_case)]
#![allow(clippy::all)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

/// mlx-rs seeds its default random key from `mach_approximate_time`, a macOS call;
/// elsewhere this stands in for it (nanoseconds since the Unix epoch).
#[cfg(not(target_vendor = "apple"))]
#[no_mangle]
pub extern "C" fn mach_approximate_time() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(target_os = "linux")]
extern "C" {
    /// OpenBLAS's configuration string (version, threading, kernel). build.rs links
    /// Debian's OpenBLAS so that libmlx's `cblas_*` calls resolve to it instead of the
    /// mlx-cpu wheel's bundled reference BLAS; a binary keeps that link only when it
    /// references a symbol of it, so call this once (memwall puts it in provenance).
    pub fn openblas_get_config() -> *const std::os::raw::c_char;
}
