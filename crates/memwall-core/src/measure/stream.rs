//! STREAM: sustainable memory bandwidth with the four kernels of McCalpin's
//! benchmark (<https://www.cs.virginia.edu/stream/ref.html>), plus a read-only kernel:
//!
//! | kernel | operation                | bytes counted per element |
//! |--------|--------------------------|---------------------------|
//! | Copy   | `c[i] = a[i]`            | 16 (2 arrays × 8)         |
//! | Scale  | `b[i] = s × c[i]`        | 16                        |
//! | Add    | `c[i] = a[i] + b[i]`     | 24 (3 arrays × 8)         |
//! | Triad  | `a[i] = b[i] + s × c[i]` | 24                        |
//! | Read   | `sum += a[i]`            | 8 (1 array)               |
//!
//! As in STREAM: f64 arrays, each at least 4× the last-level cache (so no kernel
//! runs from cache), the first pass discarded, the *best* rate of the remaining
//! passes reported (min time), GB/s = 10^9 bytes/s, and the arrays checked against
//! the closed-form expected values afterwards. Only the bytes the kernel asks for are
//! counted (STREAM's convention): the read-for-ownership that an ordinary store
//! causes (write-allocate) is real traffic that STREAM does not count.
//!
//! **Read** is not part of STREAM. Batch-1 decode reads every weight once per token
//! and writes almost nothing, while triad writes a third of its counted bytes (and
//! pays a hidden read for each of them), so decode ceilings are shown with both. Its
//! passes run right after initialisation, before any STREAM kernel changes `a`, so
//! every element is 2.0 and the expected sum `2 × n` is exact in f64 (every partial
//! sum is an even integer below 2^53): a wrong sum fails validation exactly.
//!
//! # Matching the reference `stream.c`
//! memwall is compared with McCalpin's `stream.c` (revision 5.10) built with
//! `gcc -O3 -march=native -fopenmp` (`bench/vs-stream-c.sh`). What that binary does:
//! - **Copy is a `memcpy` call.** gcc's loop distribution turns `c[j] = a[j]` into
//!   `memcpy`: `objdump -d` of the built binary shows `main._omp_fn.4` (copy) ending
//!   in `jmp memcpy@plt`, each thread copying its static chunk. glibc's memcpy
//!   switches to non-temporal stores above `x86_non_temporal_threshold` (3/4 of the
//!   per-thread share of the last-level cache, see `ld.so --list-tunables`), so the
//!   reference's copy moves 2 arrays of traffic for 2 counted. memwall's copy used to
//!   be an element loop that LLVM also turns into `memcpy`, but on smaller per-thread
//!   chunks (4× LLC split over the threads) that can sit *below* the threshold, where
//!   glibc copies with ordinary stores: 3 arrays of traffic (a read, c's
//!   read-for-ownership, c's write) for 2 counted, i.e. 2/3 of the rate. That is the
//!   0.685 copy ratio seen on a Zen 3 (glibc on AMD also stops `rep movsb` at the L2
//!   size, so the path between L2 size and the threshold is the ordinary-store loop).
//!   Seen on a quiet 16-core Xeon (glibc 2.39, threshold 158 MB, 1.26 GB arrays,
//!   OpenMP, best of 8): at 16 threads (79 MB per thread, below the threshold)
//!   `memcpy` 74.0 GB/s, an ordinary-store loop 70.6, non-temporal stores 111.1
//!   (0.67×); at 1 thread (above it) `memcpy` 18.0, non-temporal 17.9, ordinary 10.6.
//!   memwall's copy now always uses non-temporal stores (`_mm512_stream_pd`,
//!   `_mm256_stream_pd` or `_mm_stream_pd`, chosen at run time, then `sfence`), the
//!   reference's behaviour at its array size, independent of the C library's
//!   size heuristics.
//! - **Scale, Add and Triad use ordinary stores** (`vmovupd ymm`, gcc emits no
//!   non-temporal stores for them), so memwall keeps LLVM's vectorised loops with
//!   ordinary stores there: the same traffic as the reference.
//! - **The arrays are 32-byte aligned statics.** memwall's arrays came from `malloc`,
//!   which returns large blocks 16 bytes past a page boundary: every other 32-byte
//!   load and store straddled two cache lines. They are now page-aligned
//!   allocations with `a` and `c` at the start of a page and `b` 2 KiB into one
//!   (the reference's layout at its default 10^8 elements), so no vector access
//!   splits a line and no load runs into 4 KiB aliasing with a nearby pending store.
//! - **Threads wait by spinning** (libgomp spins before it sleeps). memwall's threads
//!   met at a `std::sync::Barrier`, a mutex and condition variable that puts waiting
//!   threads to sleep, so each timed pass could include a wake-up; they now meet at a
//!   spinning barrier that yields only after a long spin.
//!
//! Multi-threaded runs split each array into one contiguous chunk per thread, each
//! starting on a 64-byte line; each thread first-touches (initialises) its own chunk,
//! so on NUMA machines its pages live on its node, as OpenMP static scheduling does in
//! STREAM. Threads are not pinned (nor are OpenMP's unless `OMP_PROC_BIND` is set).

use crate::units::{Bytes, Gbps};
use serde::{Deserialize, Serialize};
use std::alloc::Layout;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// The scalar STREAM uses.
pub const SCALAR: f64 = 3.0;
/// Fallback array size when the OS does not report the last-level cache.
pub const FALLBACK_ARRAY_BYTES: u64 = 256 << 20;
/// STREAM's validation tolerance for f64 (`epsilon = 1.e-13`).
pub const EPSILON: f64 = 1e-13;
/// Value of every element of `a` when the read kernel runs (STREAM's `a = 2 × 1.0`).
pub const READ_VALUE: f64 = 2.0;
/// Largest `n_elements` for which `READ_VALUE × n` and every partial sum are exact in f64.
pub const MAX_ELEMENTS: usize = 1 << 50;

/// Alignment of each array's allocation: a 4 KiB page.
const PAGE: usize = 4096;
/// Byte offset of `a`, `b` and `c` into their first page (see the module docs).
const ARRAY_OFFSETS: [usize; 3] = [0, 2048, 0];
/// Per-thread chunks start on a multiple of this many elements (one 64-byte line).
const CHUNK_ALIGN: usize = 8;
/// Spins of a waiting thread at the barrier before it starts yielding its core.
const SPINS_BEFORE_YIELD: u32 = 1 << 20;

/// A STREAM kernel, or the read-only kernel memwall adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Kernel {
    /// `c = a`
    Copy,
    /// `b = s·c`
    Scale,
    /// `c = a + b`
    Add,
    /// `a = b + s·c`
    Triad,
    /// `sum(a)` (not in STREAM: reads one array, writes nothing)
    Read,
}

impl Kernel {
    /// STREAM's four, in STREAM's order.
    pub const STREAM: [Kernel; 4] = [Kernel::Copy, Kernel::Scale, Kernel::Add, Kernel::Triad];
    /// Every kernel memwall runs: STREAM's four, then read.
    pub const ALL: [Kernel; 5] = [
        Kernel::Copy,
        Kernel::Scale,
        Kernel::Add,
        Kernel::Triad,
        Kernel::Read,
    ];

    /// Arrays touched per element (STREAM's byte-count convention: 2, 2, 3, 3; read 1).
    pub fn arrays(self) -> u64 {
        match self {
            Kernel::Copy | Kernel::Scale => 2,
            Kernel::Add | Kernel::Triad => 3,
            Kernel::Read => 1,
        }
    }
    /// Bytes counted for one pass over `n` elements: `arrays × 8 × n`.
    pub fn bytes_counted(self, n: usize) -> Bytes {
        Bytes(self.arrays() * 8 * n as u64)
    }
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Copy => "copy",
            Kernel::Scale => "scale",
            Kernel::Add => "add",
            Kernel::Triad => "triad",
            Kernel::Read => "read",
        }
    }
    /// Parses a name.
    pub fn parse(s: &str) -> Option<Kernel> {
        Kernel::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
    }
}

/// The instruction path of the copy (non-temporal stores) and read (sum) kernels.
/// Scale, add and triad are plain loops that the compiler vectorises for the build's
/// target CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isa {
    /// 512-bit: `_mm512_stream_pd`, zmm sums (x86-64 with AVX-512F).
    Avx512,
    /// 256-bit: `_mm256_stream_pd`, ymm sums (x86-64 with AVX).
    Avx,
    /// 128-bit: `_mm_stream_pd`, xmm sums (every x86-64).
    Sse2,
    /// Portable Rust: `copy_from_slice` (the C library's `memcpy`) and an 8-way
    /// unrolled sum the compiler vectorises (every other architecture).
    Portable,
}

impl Isa {
    /// Name as stored and printed.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512",
            Isa::Avx => "avx",
            Isa::Sse2 => "sse2",
            Isa::Portable => "portable",
        }
    }

    /// Whether this CPU can run the path.
    pub fn is_supported(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx => std::arch::is_x86_feature_detected!("avx"),
            #[cfg(target_arch = "x86_64")]
            Isa::Sse2 => true,
            Isa::Portable => true,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// Every path this CPU can run, widest first.
    pub fn supported() -> Vec<Isa> {
        [Isa::Avx512, Isa::Avx, Isa::Sse2, Isa::Portable]
            .into_iter()
            .filter(|i| i.is_supported())
            .collect()
    }

    /// The widest supported path (what [`run`] uses).
    pub fn detected() -> Isa {
        Isa::supported()[0]
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamConfig {
    /// Elements per array (f64).
    pub n_elements: usize,
    /// Worker threads.
    pub threads: usize,
    /// Timed passes per kernel (STREAM's NTIMES; the first pass is discarded on top of these).
    pub passes: usize,
    /// Kernels to run each pass. The arrays evolve as in STREAM only when its four
    /// run; validation simulates whatever subset runs. Read, when listed, runs all its
    /// passes first (it changes nothing).
    pub kernels: Vec<Kernel>,
}

/// Errors of a STREAM run.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// Bad configuration.
    #[error("stream: {0}")]
    Config(String),
    /// The arrays did not hold the expected values afterwards.
    #[error(
        "stream: validation failed for array {array}: element {index} is {got}, expected {expected} (relative error {rel:e} > {EPSILON:e}); the machine or the kernel is broken, results are discarded"
    )]
    Validation {
        /// `a`, `b` or `c`.
        array: char,
        /// First failing element.
        index: usize,
        /// Value found.
        got: f64,
        /// Value expected.
        expected: f64,
        /// Relative error.
        rel: f64,
    },
    /// The read kernel's sum was not the closed form.
    #[error(
        "stream: validation failed for the read kernel: pass {pass} summed array a to {got}, expected {expected} ({n} elements × {READ_VALUE}, exact in f64); the machine or the kernel is broken, results are discarded"
    )]
    ReadSum {
        /// Pass (0 = the discarded first pass).
        pass: usize,
        /// Elements summed.
        n: usize,
        /// Sum found.
        got: f64,
        /// `READ_VALUE × n`.
        expected: f64,
    },
}

impl StreamConfig {
    /// STREAM's sizing rule: each array ≥ 4× the last-level cache (`llc`), or
    /// [`FALLBACK_ARRAY_BYTES`] when the cache size is unknown; 10 passes; all kernels
    /// (STREAM's four and read).
    pub fn standard(llc: Option<Bytes>, threads: usize) -> StreamConfig {
        StreamConfig {
            n_elements: (Self::rule_bytes(llc).0 / 8) as usize,
            threads: threads.max(1),
            passes: 10,
            kernels: Kernel::ALL.to_vec(),
        }
    }

    /// The smallest array STREAM's rule allows: 4× the last-level cache (at least
    /// 32 MiB), or [`FALLBACK_ARRAY_BYTES`] when the cache size is unknown.
    pub fn rule_bytes(llc: Option<Bytes>) -> Bytes {
        Bytes(llc.map_or(FALLBACK_ARRAY_BYTES, |l| (4 * l.0).max(32 << 20)))
    }

    /// A short triad-only run for a quick reading (tray, chat page): same array
    /// rule, 5 passes. Takes well under 2 s on any machine with ≥ 5 GB/s.
    pub fn quick(llc: Option<Bytes>, threads: usize) -> StreamConfig {
        StreamConfig {
            passes: 5,
            kernels: vec![Kernel::Triad],
            ..Self::standard(llc, threads)
        }
    }

    pub fn array_bytes(&self) -> Bytes {
        Bytes(self.n_elements as u64 * 8)
    }
}

/// Result of one kernel at one thread count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelResult {
    pub kernel: Kernel,
    /// Best rate (from the minimum time), STREAM's reported figure.
    pub best_gbps: Gbps,
    /// Rate from the mean time.
    pub avg_gbps: Gbps,
    /// Rate from the maximum time.
    pub worst_gbps: Gbps,
    /// Time of every counted pass, nanoseconds (first pass excluded).
    pub samples_ns: Vec<u64>,
}

/// A STREAM run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    /// The configuration run.
    pub config: StreamConfig,
    /// One entry per kernel, in the configuration's order.
    pub kernels: Vec<KernelResult>,
    /// The arrays held the expected values afterwards (a failed check is an error, so
    /// this is always `true` in a returned result; it is stored for the record).
    pub validated: bool,
    /// Instruction path of the copy and read kernels (absent in results written
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isa: Option<Isa>,
}

impl StreamResult {
    /// The result for `k`, when it ran.
    pub fn kernel(&self, k: Kernel) -> Option<&KernelResult> {
        self.kernels.iter().find(|r| r.kernel == k)
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! Non-temporal copies and sums. Each function needs its target feature: callers
    //! check it at run time ([`super::Isa::is_supported`]).
    use std::arch::x86_64::*;

    /// f64 elements in a 4 KiB page: the non-temporal copies interleave four pages.
    const PAGE_F64: usize = 4096 / 8;

    /// Elements of `dst` before `p` reaches an `align`-byte boundary (at most `len`).
    fn head(p: *const f64, align: usize, len: usize) -> usize {
        let mis = (p as usize) % align;
        if mis == 0 {
            0
        } else {
            ((align - mis) / 8).min(len)
        }
    }

    /// Calls `line(k, page)` for every 8-element line of `0..body` (`body` a multiple
    /// of 8): four pages at a time, one line from each page in turn (glibc's
    /// `large_memcpy_4x` order, which stream.c's copy runs above the non-temporal
    /// threshold: four concurrent streams keep more misses in flight than one), then
    /// the lines after the last whole four-page block in order. `page` (0–3) is the
    /// line's page within its block (in the tail: 0–3 in groups of four lines, then 0),
    /// so a kernel can keep one accumulator per stream; every `page` is a constant
    /// after unrolling, so accumulators stay in registers. Inlined into each kernel,
    /// so `line` compiles with that kernel's target features.
    #[inline(always)]
    fn four_page_lines(body: usize, mut line: impl FnMut(usize, usize)) {
        let blocks = body / (4 * PAGE_F64) * (4 * PAGE_F64);
        let mut b = 0;
        while b < blocks {
            let mut off = 0;
            while off < PAGE_F64 {
                for page in 0..4 {
                    line(b + page * PAGE_F64 + off, page);
                }
                off += 8;
            }
            b += 4 * PAGE_F64;
        }
        let mut k = blocks;
        while k + 32 <= body {
            for page in 0..4 {
                line(k + 8 * page, page);
            }
            k += 32;
        }
        while k < body {
            line(k, 0);
            k += 8;
        }
    }

    /// `dst = src` with 64-byte non-temporal stores on the aligned body.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn copy_nt_avx512(dst: &mut [f64], src: &[f64]) {
        let n = dst.len();
        let h = head(dst.as_ptr(), 64, n);
        let body = (n - h) / 8 * 8;
        dst[..h].copy_from_slice(&src[..h]);
        let (d, s) = (dst[h..].as_mut_ptr(), src[h..].as_ptr());
        four_page_lines(body, |k, _| {
            // SAFETY: k + 8 ≤ body ≤ n − h = the length behind d and s; d + k is
            // 64-byte aligned (head, k a multiple of 8); the caller guarantees AVX-512F.
            unsafe { _mm512_stream_pd(d.add(k), _mm512_loadu_pd(s.add(k))) }
        });
        _mm_sfence();
        dst[h + body..].copy_from_slice(&src[h + body..]);
    }

    /// `dst = src` with 32-byte non-temporal stores on the aligned body.
    #[target_feature(enable = "avx")]
    pub unsafe fn copy_nt_avx(dst: &mut [f64], src: &[f64]) {
        let n = dst.len();
        let h = head(dst.as_ptr(), 32, n);
        let body = (n - h) / 8 * 8;
        dst[..h].copy_from_slice(&src[..h]);
        let (d, s) = (dst[h..].as_mut_ptr(), src[h..].as_ptr());
        four_page_lines(body, |k, _| {
            // SAFETY: as in copy_nt_avx512, with 32-byte alignment and AVX.
            unsafe {
                _mm256_stream_pd(d.add(k), _mm256_loadu_pd(s.add(k)));
                _mm256_stream_pd(d.add(k + 4), _mm256_loadu_pd(s.add(k + 4)));
            }
        });
        _mm_sfence();
        dst[h + body..].copy_from_slice(&src[h + body..]);
    }

    /// `dst = src` with 16-byte non-temporal stores on the aligned body.
    #[target_feature(enable = "sse2")]
    pub unsafe fn copy_nt_sse2(dst: &mut [f64], src: &[f64]) {
        let n = dst.len();
        let h = head(dst.as_ptr(), 16, n);
        let body = (n - h) / 8 * 8;
        dst[..h].copy_from_slice(&src[..h]);
        // SAFETY: as in copy_nt_avx512, with 16-byte alignment; SSE2 is part of x86-64.
        unsafe {
            let (d, s) = (dst.as_mut_ptr().add(h), src.as_ptr().add(h));
            let mut i = 0;
            while i < body {
                for j in [0, 2, 4, 6] {
                    _mm_stream_pd(d.add(i + j), _mm_loadu_pd(s.add(i + j)));
                }
                i += 8;
            }
            _mm_sfence();
        }
        dst[h + body..].copy_from_slice(&src[h + body..]);
    }

    /// Sum with four independent zmm accumulators, one per page stream.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn sum_avx512(x: &[f64]) -> f64 {
        let body = x.len() / 8 * 8;
        let p = x.as_ptr();
        let mut acc = [_mm512_setzero_pd(); 4];
        four_page_lines(body, |k, page| {
            // SAFETY: k + 8 ≤ body ≤ len.
            acc[page] = _mm512_add_pd(acc[page], unsafe { _mm512_loadu_pd(p.add(k)) });
        });
        let v = _mm512_add_pd(_mm512_add_pd(acc[0], acc[1]), _mm512_add_pd(acc[2], acc[3]));
        _mm512_reduce_add_pd(v) + x[body..].iter().sum::<f64>()
    }

    /// Sum with four independent ymm accumulators, one per page stream.
    #[target_feature(enable = "avx")]
    pub unsafe fn sum_avx(x: &[f64]) -> f64 {
        let body = x.len() / 8 * 8;
        let p = x.as_ptr();
        let mut acc = [_mm256_setzero_pd(); 4];
        four_page_lines(body, |k, page| {
            // SAFETY: k + 8 ≤ body ≤ len.
            let (lo, hi) = unsafe { (_mm256_loadu_pd(p.add(k)), _mm256_loadu_pd(p.add(k + 4))) };
            acc[page] = _mm256_add_pd(_mm256_add_pd(acc[page], lo), hi);
        });
        let v = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
        let mut lanes = [0f64; 4];
        // SAFETY: lanes holds 4 f64.
        unsafe { _mm256_storeu_pd(lanes.as_mut_ptr(), v) };
        lanes.iter().sum::<f64>() + x[body..].iter().sum::<f64>()
    }

    /// Sum with four independent xmm accumulators.
    #[target_feature(enable = "sse2")]
    pub unsafe fn sum_sse2(x: &[f64]) -> f64 {
        let body = x.len() / 8 * 8;
        let p = x.as_ptr();
        let mut acc = [_mm_setzero_pd(); 4];
        let mut i = 0;
        while i < body {
            for (j, a) in acc.iter_mut().enumerate() {
                // SAFETY: i + 2j + 2 ≤ body ≤ len; SSE2 is part of x86-64.
                *a = _mm_add_pd(*a, unsafe { _mm_loadu_pd(p.add(i + 2 * j)) });
            }
            i += 8;
        }
        let v = _mm_add_pd(_mm_add_pd(acc[0], acc[1]), _mm_add_pd(acc[2], acc[3]));
        let mut lanes = [0f64; 2];
        // SAFETY: lanes holds 2 f64.
        unsafe { _mm_storeu_pd(lanes.as_mut_ptr(), v) };
        lanes.iter().sum::<f64>() + x[body..].iter().sum::<f64>()
    }
}

/// Sum with eight independent accumulators (vectorised by the compiler).
fn sum_portable(x: &[f64]) -> f64 {
    let mut acc = [0f64; 8];
    let mut it = x.chunks_exact(8);
    for c in &mut it {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += *v;
        }
    }
    acc.iter().sum::<f64>() + it.remainder().iter().sum::<f64>()
}

/// `dst = src` on `isa`'s path: non-temporal stores on x86-64, the C library's
/// `memcpy` on [`Isa::Portable`]. An unsupported `isa` takes the portable path.
///
/// # Panics
/// When the lengths differ.
pub fn copy(isa: Isa, dst: &mut [f64], src: &[f64]) {
    assert_eq!(dst.len(), src.len(), "copy: slices of different lengths");
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the guard checks the feature.
        Isa::Avx512 if isa.is_supported() => unsafe { x86::copy_nt_avx512(dst, src) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the guard checks the feature.
        Isa::Avx if isa.is_supported() => unsafe { x86::copy_nt_avx(dst, src) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SSE2 is part of x86-64.
        Isa::Sse2 => unsafe { x86::copy_nt_sse2(dst, src) },
        _ => dst.copy_from_slice(src),
    }
}

/// Sum of `x` on `isa`'s path (several independent accumulators, so the adds do
/// not serialise on one register). An unsupported `isa` takes the portable path.
#[inline(never)]
pub fn read_sum(isa: Isa, x: &[f64]) -> f64 {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the guard checks the feature.
        Isa::Avx512 if isa.is_supported() => unsafe { x86::sum_avx512(x) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the guard checks the feature.
        Isa::Avx if isa.is_supported() => unsafe { x86::sum_avx(x) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SSE2 is part of x86-64.
        Isa::Sse2 => unsafe { x86::sum_sse2(x) },
        _ => sum_portable(x),
    }
}

/// Checks a read pass's total against the closed form `READ_VALUE × n`.
///
/// # Errors
/// [`StreamError::ReadSum`] when they differ at all (the sum is exact, see the module docs).
pub fn check_read_sum(pass: usize, n: usize, got: f64) -> Result<(), StreamError> {
    let expected = READ_VALUE * n as f64;
    if got == expected {
        Ok(())
    } else {
        Err(StreamError::ReadSum {
            pass,
            n,
            got,
            expected,
        })
    }
}

#[inline(never)]
fn run_kernel(isa: Isa, k: Kernel, a: &mut [f64], b: &mut [f64], c: &mut [f64]) {
    match k {
        Kernel::Copy => copy(isa, c, a),
        Kernel::Scale => b
            .iter_mut()
            .zip(c.iter())
            .for_each(|(b, c)| *b = SCALAR * *c),
        Kernel::Add => c
            .iter_mut()
            .zip(a.iter().zip(b.iter()))
            .for_each(|(c, (a, b))| *c = *a + *b),
        Kernel::Triad => a
            .iter_mut()
            .zip(b.iter().zip(c.iter()))
            .for_each(|(a, (b, c))| *a = *b + SCALAR * *c),
        Kernel::Read => {
            std::hint::black_box(read_sum(isa, a));
        }
    }
}

/// One f64 array in its own page-aligned allocation, starting `offset` bytes into it.
struct Array {
    base: *mut u8,
    layout: Layout,
    data: *mut MaybeUninit<f64>,
    len: usize,
}

impl Array {
    fn new(len: usize, offset: usize) -> Result<Array, StreamError> {
        let too_big = || {
            StreamError::Config(format!(
                "cannot allocate an array of {len} f64 elements: lower --array-size"
            ))
        };
        let bytes = len
            .checked_mul(8)
            .and_then(|b| b.checked_add(offset))
            .ok_or_else(too_big)?;
        let layout = Layout::from_size_align(bytes.max(1), PAGE).map_err(|_| too_big())?;
        // SAFETY: the layout has a non-zero size. The memory is left untouched here, so
        // its pages are first touched by the thread that initialises each chunk.
        let base = unsafe { std::alloc::alloc(layout) };
        if base.is_null() {
            return Err(StreamError::Config(format!(
                "out of memory allocating one array of {}: lower --array-size",
                Bytes(bytes as u64)
            )));
        }
        Ok(Array {
            base,
            layout,
            // SAFETY: offset + 8 × len ≤ bytes, and offset is a multiple of 8.
            data: unsafe { base.add(offset) }.cast(),
            len,
        })
    }

    fn uninit(&mut self) -> &mut [MaybeUninit<f64>] {
        // SAFETY: data..data + len lies in the allocation, which self owns.
        unsafe { std::slice::from_raw_parts_mut(self.data, self.len) }
    }

    /// # Safety
    /// Every element must have been written.
    unsafe fn assume_init(&self) -> &[f64] {
        // SAFETY: the caller guarantees initialisation; MaybeUninit<f64> has f64's layout.
        unsafe { std::slice::from_raw_parts(self.data.cast::<f64>(), self.len) }
    }
}

impl Drop for Array {
    fn drop(&mut self) {
        // SAFETY: allocated in Array::new with this layout.
        unsafe { std::alloc::dealloc(self.base, self.layout) }
    }
}

/// A barrier whose waiting threads spin (then yield), so a released thread starts
/// within nanoseconds instead of a scheduler wake-up.
struct SpinBarrier {
    n: usize,
    count: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    fn new(n: usize) -> SpinBarrier {
        SpinBarrier {
            n,
            count: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
        }
    }

    fn wait(&self) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.count.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if spins < SPINS_BEFORE_YIELD {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Chunk boundaries: `t + 1` indices from 0 to `n`, inner ones rounded down to
/// [`CHUNK_ALIGN`] elements, so every chunk but the first starts on a 64-byte line
/// (arrays start on a line). Chunks may be empty when `n` is tiny.
fn chunk_bounds(n: usize, t: usize) -> Vec<usize> {
    (0..=t)
        .map(|i| {
            if i == t {
                n
            } else {
                (i * (n / t) + i.min(n % t)) / CHUNK_ALIGN * CHUNK_ALIGN
            }
        })
        .collect()
}

fn split_chunks<'a, T>(mut s: &'a mut [T], bounds: &[usize]) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(bounds.len() - 1);
    for w in bounds.windows(2) {
        let (head, rest) = std::mem::take(&mut s).split_at_mut(w[1] - w[0]);
        out.push(head);
        s = rest;
    }
    out
}

fn init_chunk(chunk: &mut [MaybeUninit<f64>], v: f64) -> &mut [f64] {
    for x in chunk.iter_mut() {
        x.write(v);
    }
    // SAFETY: every element was written just above.
    unsafe { &mut *(chunk as *mut [MaybeUninit<f64>] as *mut [f64]) }
}

/// Runs STREAM (and read, when listed) on the widest instruction path this CPU has.
/// Cost: `3 × n_elements × 8` bytes of memory and `(passes + 1) × kernels` sweeps
/// over the arrays.
///
/// # Errors
/// [`StreamError::Config`] for zero sizes or threads, or arrays that cannot be
/// allocated; [`StreamError::Validation`] when the arrays do not hold STREAM's
/// expected values afterwards; [`StreamError::ReadSum`] when a read pass's sum is wrong.
pub fn run(cfg: &StreamConfig) -> Result<StreamResult, StreamError> {
    run_on(cfg, Isa::detected())
}

/// [`run`] on a given instruction path (tests run every supported one).
///
/// # Errors
/// As [`run`], and [`StreamError::Config`] when the CPU cannot run `isa`.
pub fn run_on(cfg: &StreamConfig, isa: Isa) -> Result<StreamResult, StreamError> {
    if cfg.n_elements == 0 || cfg.threads == 0 || cfg.passes == 0 || cfg.kernels.is_empty() {
        return Err(StreamError::Config(format!(
            "n_elements, threads, passes and kernels must be non-zero: {cfg:?}"
        )));
    }
    if cfg.n_elements > MAX_ELEMENTS {
        return Err(StreamError::Config(format!(
            "n_elements {} is above {MAX_ELEMENTS} (2^50): lower --array-size",
            cfg.n_elements
        )));
    }
    if !isa.is_supported() {
        return Err(StreamError::Config(format!(
            "this CPU cannot run the {} path",
            isa.name()
        )));
    }
    let n = cfg.n_elements;
    let t = cfg.threads.min(n);
    let bounds = chunk_bounds(n, t);
    let mut arrays = [
        Array::new(n, ARRAY_OFFSETS[0])?,
        Array::new(n, ARRAY_OFFSETS[1])?,
        Array::new(n, ARRAY_OFFSETS[2])?,
    ];
    let n_passes = cfg.passes + 1; // first pass discarded
    let barrier = SpinBarrier::new(t);
    let read_index = cfg.kernels.iter().position(|&k| k == Kernel::Read);
    let mut times = vec![vec![0u64; n_passes]; cfg.kernels.len()];
    let mut read_sums = vec![0f64; if read_index.is_some() { n_passes } else { 0 }];
    {
        let [aa, ba, ca] = &mut arrays;
        let a_chunks = split_chunks(aa.uninit(), &bounds);
        let b_chunks = split_chunks(ba.uninit(), &bounds);
        let c_chunks = split_chunks(ca.uninit(), &bounds);
        let barrier = &barrier;
        let kernels = &cfg.kernels;
        std::thread::scope(|s| {
            let mut handles = Vec::new();
            for (i, ((ac, bc), cc)) in a_chunks.into_iter().zip(b_chunks).zip(c_chunks).enumerate()
            {
                handles.push(s.spawn(move || {
                    // STREAM's initialisation: a = 1, b = 2, c = 0, then a = 2a (first touch).
                    let a = init_chunk(ac, 1.0);
                    let b = init_chunk(bc, 2.0);
                    let c = init_chunk(cc, 0.0);
                    a.iter_mut().for_each(|x| *x *= 2.0);
                    let mut my_times = vec![vec![0u64; n_passes]; kernels.len()];
                    let mut my_sums = vec![0f64; if read_index.is_some() { n_passes } else { 0 }];
                    if let Some(ri) = read_index {
                        for (pass, sum) in my_sums.iter_mut().enumerate() {
                            barrier.wait();
                            let t0 = Instant::now();
                            *sum = std::hint::black_box(read_sum(isa, a));
                            barrier.wait();
                            if i == 0 {
                                my_times[ri][pass] = t0.elapsed().as_nanos() as u64;
                            }
                        }
                    }
                    // `pass` indexes the inner dimension of my_times[kernel][pass]: an
                    // iterator over it would need the table transposed.
                    #[allow(clippy::needless_range_loop)]
                    for pass in 0..n_passes {
                        for (ki, &k) in kernels.iter().enumerate() {
                            if k == Kernel::Read {
                                continue;
                            }
                            barrier.wait();
                            let t0 = Instant::now();
                            run_kernel(isa, k, a, b, c);
                            barrier.wait();
                            if i == 0 {
                                my_times[ki][pass] = t0.elapsed().as_nanos() as u64;
                            }
                        }
                    }
                    (my_times, my_sums)
                }));
            }
            for (i, h) in handles.into_iter().enumerate() {
                let (ts, sums) = h.join().expect("stream worker panicked");
                if i == 0 {
                    times = ts;
                }
                for (total, s) in read_sums.iter_mut().zip(sums) {
                    *total += s;
                }
            }
        });
    }
    for (pass, &sum) in read_sums.iter().enumerate() {
        check_read_sum(pass, n, sum)?;
    }
    // SAFETY: the threads initialised every element of [0, n) (the chunks cover it).
    let (a, b, c) = unsafe {
        (
            arrays[0].assume_init(),
            arrays[1].assume_init(),
            arrays[2].assume_init(),
        )
    };
    validate(cfg, a, b, c)?;
    let kernels = cfg
        .kernels
        .iter()
        .zip(times)
        .map(|(&k, ts)| kernel_result(k, n, ts[1..].iter().map(|&x| x.max(1)).collect()))
        .collect();
    Ok(StreamResult {
        config: StreamConfig {
            threads: t,
            ..cfg.clone()
        },
        kernels,
        validated: true,
        isa: Some(isa),
    })
}

/// One kernel's rates from its counted passes' times (`samples_ns`, first pass
/// already discarded, non-empty): STREAM's best (minimum time), mean and worst.
pub(crate) fn kernel_result(k: Kernel, n: usize, samples_ns: Vec<u64>) -> KernelResult {
    let bytes = k.bytes_counted(n).0 as f64;
    let min = *samples_ns.iter().min().expect("passes > 0") as f64;
    let max = *samples_ns.iter().max().expect("passes > 0") as f64;
    let avg = samples_ns.iter().sum::<u64>() as f64 / samples_ns.len() as f64;
    KernelResult {
        kernel: k,
        best_gbps: Gbps(bytes / min),
        avg_gbps: Gbps(bytes / avg),
        worst_gbps: Gbps(bytes / max),
        samples_ns,
    }
}

/// The value every element of each STREAM array holds after a run ([`expected_values`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpectedValues {
    /// Array `a` (written by triad).
    pub a: f64,
    /// Array `b` (written by scale).
    pub b: f64,
    /// Array `c` (written by copy and add).
    pub c: f64,
}

/// Expected values of `a`, `b` and `c` after the run, from STREAM's scalar recurrence
/// (`checkSTREAMresults`). Read changes nothing.
pub fn expected_values(cfg: &StreamConfig) -> ExpectedValues {
    let (mut a, mut b, mut c) = (2.0f64, 2.0f64, 0.0f64);
    for _ in 0..cfg.passes + 1 {
        for &k in &cfg.kernels {
            match k {
                Kernel::Copy => c = a,
                Kernel::Scale => b = SCALAR * c,
                Kernel::Add => c = a + b,
                Kernel::Triad => a = b + SCALAR * c,
                Kernel::Read => {}
            }
        }
    }
    ExpectedValues { a, b, c }
}

pub(crate) fn validate(
    cfg: &StreamConfig,
    a: &[f64],
    b: &[f64],
    c: &[f64],
) -> Result<(), StreamError> {
    let ExpectedValues {
        a: ea,
        b: eb,
        c: ec,
    } = expected_values(cfg);
    for (name, arr, e) in [('a', a, ea), ('b', b, eb), ('c', c, ec)] {
        for (i, &x) in arr.iter().enumerate() {
            let rel = if e == 0.0 {
                x.abs()
            } else {
                ((x - e) / e).abs()
            };
            if rel > EPSILON || !x.is_finite() {
                return Err(StreamError::Validation {
                    array: name,
                    index: i,
                    got: x,
                    expected: e,
                    rel,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counting_is_streams_plus_read() {
        assert_eq!(Kernel::STREAM.map(Kernel::arrays), [2, 2, 3, 3]);
        // Hand arithmetic for n = 1000 elements of 8 bytes: copy/scale 2 arrays =
        // 16 000 B, add/triad 3 arrays = 24 000 B, read 1 array = 8 000 B.
        assert_eq!(
            Kernel::ALL.map(|k| k.bytes_counted(1000).0),
            [16_000, 16_000, 24_000, 24_000, 8_000]
        );
        assert_eq!(Kernel::parse("READ"), Some(Kernel::Read));
    }

    #[test]
    fn reported_rate_is_counted_bytes_over_the_best_time() {
        // 4096 elements on one thread: every rate must be bytes_counted ÷ min(samples).
        let cfg = StreamConfig {
            n_elements: 4096,
            threads: 1,
            passes: 3,
            kernels: Kernel::ALL.to_vec(),
        };
        let r = run(&cfg).unwrap();
        for k in &r.kernels {
            let min = *k.samples_ns.iter().min().unwrap() as f64;
            let want = k.kernel.arrays() as f64 * 8.0 * 4096.0 / min;
            assert!(
                (k.best_gbps.0 - want).abs() <= 1e-12 * want,
                "{:?}",
                k.kernel
            );
        }
    }

    #[test]
    fn expected_values_match_stream_c() {
        // stream.c with NTIMES = 2 (all four kernels): hand-iterated
        // pass 1: c=2, b=6, c=8, a=6+24=30; pass 2: c=30, b=90, c=120, a=90+360=450.
        let cfg = StreamConfig {
            n_elements: 10,
            threads: 1,
            passes: 1,
            kernels: Kernel::STREAM.to_vec(),
        };
        assert_eq!(
            expected_values(&cfg),
            ExpectedValues {
                a: 450.0,
                b: 90.0,
                c: 120.0
            }
        );
        // Read changes nothing.
        let with_read = StreamConfig {
            kernels: Kernel::ALL.to_vec(),
            ..cfg
        };
        assert_eq!(
            expected_values(&with_read),
            ExpectedValues {
                a: 450.0,
                b: 90.0,
                c: 120.0
            }
        );
    }

    #[test]
    fn small_run_validates_on_several_threads_and_every_path() {
        for isa in Isa::supported() {
            for threads in [1, 3] {
                let cfg = StreamConfig {
                    n_elements: 10_007,
                    threads,
                    passes: 3,
                    kernels: Kernel::ALL.to_vec(),
                };
                let r = run_on(&cfg, isa).unwrap();
                assert!(r.validated);
                assert_eq!(r.isa, Some(isa));
                assert_eq!(r.kernels.len(), 5);
                for k in &r.kernels {
                    assert_eq!(k.samples_ns.len(), 3, "first pass is discarded");
                    assert!(k.best_gbps.0 >= k.avg_gbps.0 && k.avg_gbps.0 >= k.worst_gbps.0);
                }
            }
        }
    }

    #[test]
    fn copy_matches_on_every_path_and_alignment() {
        // Odd lengths and every start offset within a line exercise head, body and tail;
        // lengths past 4 pages (2048 elements) the four-page interleaved blocks too.
        let src: Vec<f64> = (0..5000).map(|i| i as f64 * 0.5 - 7.0).collect();
        for isa in Isa::supported() {
            for start in 0..8 {
                for len in [0, 1, 7, 8, 9, 63, 64, 65, 250, 2047, 2048, 2049, 4096 + 13] {
                    let mut dst = vec![f64::NAN; 5000];
                    copy(isa, &mut dst[start..start + len], &src[start..start + len]);
                    assert_eq!(
                        &dst[start..start + len],
                        &src[start..start + len],
                        "{isa:?}"
                    );
                    assert!(
                        dst[..start].iter().all(|x| x.is_nan()),
                        "{isa:?} wrote before"
                    );
                    assert!(
                        dst[start + len..].iter().all(|x| x.is_nan()),
                        "{isa:?} wrote after"
                    );
                }
            }
        }
    }

    #[test]
    fn read_sum_is_exact_on_every_path() {
        // Integers: every partial sum is exact, so each path must equal the closed form
        // n(n+1)/2 exactly, at every length (tails) and start offset (alignment).
        for isa in Isa::supported() {
            for start in 0..4 {
                for n in [0usize, 1, 5, 31, 32, 33, 1000, 4099] {
                    let x: Vec<f64> = (1..=n).map(|i| i as f64).collect();
                    let mut buf = vec![0.0; start];
                    buf.extend(&x);
                    let want = (n * (n + 1) / 2) as f64;
                    assert_eq!(read_sum(isa, &buf[start..]), want, "{isa:?} n={n}");
                }
            }
        }
    }

    #[test]
    fn a_wrong_read_sum_fails_validation() {
        assert!(check_read_sum(0, 1000, 2000.0).is_ok());
        // One element missed (or read twice) is off by exactly READ_VALUE.
        for got in [1998.0, 2002.0, 0.0, f64::NAN] {
            let e = check_read_sum(3, 1000, got).unwrap_err().to_string();
            assert!(e.contains("read kernel: pass 3 summed array a to"), "{e}");
            assert!(e.contains("expected 2000 (1000 elements × 2"), "{e}");
        }
        // A sum over the array with one element changed is caught.
        let mut a = vec![READ_VALUE; 4099];
        a[4097] = 0.0;
        for isa in Isa::supported() {
            assert!(
                check_read_sum(1, a.len(), read_sum(isa, &a)).is_err(),
                "{isa:?}"
            );
        }
    }

    #[test]
    fn read_only_run_validates() {
        let cfg = StreamConfig {
            n_elements: 5000,
            threads: 2,
            passes: 2,
            kernels: vec![Kernel::Read],
        };
        let r = run(&cfg).unwrap();
        assert_eq!(r.kernels[0].kernel, Kernel::Read);
        assert_eq!(r.kernels[0].samples_ns.len(), 2);
    }

    #[test]
    fn chunks_cover_the_array_and_start_on_lines() {
        for (n, t) in [(10_007, 3), (16, 3), (1, 1), (100, 7), (1 << 20, 16)] {
            let b = chunk_bounds(n, t);
            assert_eq!((b[0], b[t], b.len()), (0, n, t + 1));
            assert!(b.windows(2).all(|w| w[0] <= w[1]), "{b:?}");
            assert!(b[..t].iter().all(|x| x % CHUNK_ALIGN == 0), "{b:?}");
        }
        // Large n: each thread gets n / t within one line.
        let b = chunk_bounds(1 << 20, 16);
        assert!(
            b.windows(2)
                .all(|w| (w[1] - w[0]).abs_diff(1 << 16) < CHUNK_ALIGN)
        );
    }

    #[test]
    fn arrays_are_line_aligned_with_the_reference_offsets() {
        let mut a = Array::new(1000, ARRAY_OFFSETS[1]).unwrap();
        let p = a.uninit().as_ptr() as usize;
        assert_eq!(p % PAGE, 2048);
        assert_eq!(p % 64, 0);
    }

    #[test]
    fn triad_only_run_validates() {
        let cfg = StreamConfig {
            n_elements: 1000,
            threads: 2,
            passes: 2,
            kernels: vec![Kernel::Triad],
        };
        // a = b + 3c = 2 + 0 = 2 every pass.
        assert_eq!(
            expected_values(&cfg),
            ExpectedValues {
                a: 2.0,
                b: 2.0,
                c: 0.0
            }
        );
        assert!(run(&cfg).is_ok());
    }

    #[test]
    fn sizing_rule_is_four_times_llc() {
        let c = StreamConfig::standard(Some(Bytes(32 << 20)), 2);
        assert_eq!(c.array_bytes(), Bytes(128 << 20));
        assert_eq!(c.kernels, Kernel::ALL);
        assert_eq!(
            StreamConfig::standard(None, 2).array_bytes(),
            Bytes(FALLBACK_ARRAY_BYTES)
        );
        assert!(run(&StreamConfig { n_elements: 0, ..c }).is_err());
    }
}
