//! Measured peak compute of the CPU: the roof of the prefill roofline.
//!
//! Two in-register microbenchmarks, each running many independent accumulator
//! chains so that the FMA/dot-product pipes, not latency, bound the rate (the
//! method of Williams et al.'s "empirical roofline toolkit"; no memory traffic):
//!
//! - **f32 FMA**: `a ← a × x + y` on the widest vectors the CPU has
//!   (AVX-512F, else AVX2+FMA, else NEON on aarch64, else scalar `mul_add`);
//!   2 FLOPs per lane per FMA.
//! - **int8 dot**: `u8 × i8` multiply-accumulate into i32 (AVX-512 VNNI
//!   `vpdpbusd`, else AVX2 `vpmaddubsw`+`vpmaddwd`, NEON `sdot` with the dotprod
//!   extension, else scalar); 2 ops per MAC. This is the roof for llama.cpp's
//!   quantized CPU matmuls, which quantize activations to 8-bit blocks and use
//!   integer dot products (ggml-cpu `vec_dot_type` = Q8_0/Q8_K).
//!
//! **Every step depends on the previous one.** An f32 chain feeds its accumulator
//! back as the FMA's multiplicand; an int8 chain uses its accumulator's own bytes as
//! the unsigned operand of the next dot product. Nothing in a step is known before
//! the previous step has finished, so the compiler can neither hoist a product out
//! of the loop nor fold `n` steps into a closed form. (An earlier version computed
//! the AVX2 int8 product from two constants: LLVM hoisted it and the loop became
//! one `vpaddd` per step, reporting about 20× what the CPU can do.) Each path's
//! final state is compared with an independent scalar emulation in the tests.
//!
//! **Every peak has a plausibility bound**, `cores × clock × lanes × ops per lane ×
//! issue ports` ([`Bound`]); a rate above it is [`PeakError::AboveBound`], never a
//! stored row. [`Isa`] forces a path, so a lower one (AVX2, scalar) can be
//! measured on a CPU that has a higher one.
//!
//! Measured peaks are upper bounds for a kernel's arithmetic, not GEMM rates: a
//! real kernel also unpacks quantized blocks and moves data, so prefill sits below.

use crate::units::Gflops;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Which arithmetic a peak is for (defined with the roofline, which picks the
/// prefill roof by it).
pub use crate::units::PeakKind;

/// An instruction path of the peak kernels. `memwall peak --isa` forces one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isa {
    /// x86-64 AVX-512: `vfmadd231ps zmm` (AVX-512F) / `vpdpbusd zmm` (AVX-512 VNNI).
    Avx512,
    /// x86-64 AVX2: `vfmadd231ps ymm` (AVX2+FMA) / `vpmaddubsw`+`vpmaddwd ymm`.
    Avx2,
    /// AArch64 Advanced SIMD: `fmla v.4s` / `sdot v.4s` (dotprod extension).
    Neon,
    /// One lane per instruction: `mul_add` on f32, an integer multiply-add on i32.
    Scalar,
}

impl Isa {
    /// Every path, widest first.
    pub const ALL: [Isa; 4] = [Isa::Avx512, Isa::Avx2, Isa::Neon, Isa::Scalar];

    /// The name `--isa` takes.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512",
            Isa::Avx2 => "avx2",
            Isa::Neon => "neon",
            Isa::Scalar => "scalar",
        }
    }

    /// Parses a `--isa` name.
    pub fn parse(s: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|i| i.name() == s)
    }

    /// The instruction path of `kind` on this ISA as stored in `peak_results.isa`
    /// (`avx512f`, `avx512vnni`, `avx2+fma`, `avx2`, `neon`, `neon+dotprod`, `scalar`).
    pub fn path(self, kind: PeakKind) -> &'static str {
        match (self, kind) {
            (Isa::Avx512, PeakKind::F32Fma) => "avx512f",
            (Isa::Avx512, PeakKind::Int8Dot) => "avx512vnni",
            (Isa::Avx2, PeakKind::F32Fma) => "avx2+fma",
            (Isa::Avx2, PeakKind::Int8Dot) => "avx2",
            (Isa::Neon, PeakKind::F32Fma) => "neon",
            (Isa::Neon, PeakKind::Int8Dot) => "neon+dotprod",
            (Isa::Scalar, _) => "scalar",
        }
    }

    /// The CPU features the path needs (for error messages).
    pub fn needs(self, kind: PeakKind) -> &'static str {
        match (self, kind) {
            (Isa::Avx512, PeakKind::F32Fma) => "x86-64 with avx512f",
            (Isa::Avx512, PeakKind::Int8Dot) => "x86-64 with avx512f and avx512vnni",
            (Isa::Avx2, PeakKind::F32Fma) => "x86-64 with avx2 and fma",
            (Isa::Avx2, PeakKind::Int8Dot) => "x86-64 with avx2",
            (Isa::Neon, PeakKind::F32Fma) => "aarch64 with neon",
            (Isa::Neon, PeakKind::Int8Dot) => "aarch64 with the dotprod extension",
            (Isa::Scalar, _) => "nothing",
        }
    }

    /// Whether this CPU runs `kind` on this path (run-time feature detection).
    pub fn supported(self, kind: PeakKind) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                is_x86_feature_detected!("avx512f")
                    && (kind == PeakKind::F32Fma || is_x86_feature_detected!("avx512vnni"))
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                is_x86_feature_detected!("avx2")
                    && (kind == PeakKind::Int8Dot || is_x86_feature_detected!("fma"))
            }
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => {
                std::arch::is_aarch64_feature_detected!("neon")
                    && (kind == PeakKind::F32Fma
                        || std::arch::is_aarch64_feature_detected!("dotprod"))
            }
            #[allow(unreachable_patterns)]
            _ => {
                let _ = kind;
                false
            }
        }
    }

    /// Per-core issue limits of this path for `kind`: the constants of [`Bound`].
    ///
    /// Sources: Agner Fog, *Instruction tables* (<https://www.agner.org/optimize/instruction_tables.pdf>),
    /// uops.info measurements (<https://uops.info/table.html>), Intel's *64 and IA-32
    /// Architectures Optimization Reference Manual*, AMD's *Software Optimization
    /// Guide* for family 19h (Zen 3, pub. 56665; Zen 4, pub. 57647), and Dougall
    /// Johnson's Apple Firestorm tables (<https://dougallj.github.io/applecpu/firestorm.html>).
    /// Where cores differ the largest value of any shipping core is taken, so the
    /// bound stays an upper bound:
    ///
    /// | path | instruction | lanes | ops/lane | ports | notes |
    /// | --- | --- | ---: | ---: | ---: | --- |
    /// | avx512f | `vfmadd231ps zmm` | 16 | 2 | 2 | Intel Xeon Gold 6xxx/Platinum, Ice Lake-SP, Sapphire Rapids: 2 × 512-bit FMA (p0+p1 fused, p5); some SKUs 1; Zen 4 splits a zmm FMA over its two 256-bit pipes (1/cycle); Zen 5 2 |
    /// | avx2+fma | `vfmadd231ps ymm` | 8 | 2 | 2 | Haswell and later p0/p1; Zen 2–5 two FMA pipes (FP0/FP1) |
    /// | neon | `fmla v.4s` | 4 | 2 | 6 | Apple Firestorm and Neoverse V1/V2: 4 × 128-bit; Cortex-X925 lists 6 × 128-bit SIMD pipes: 6 taken (generous) |
    /// | scalar f32 | `vfmadd231ss` / `fmadd s` | 1 | 2 | 2 (x86), 6 (aarch64) | same FMA pipes as the vectors |
    /// | avx512vnni | `vpdpbusd zmm` | 64 | 2 | 2 | Ice Lake-SP/Sapphire Rapids p0 (+p5 on 2-FMA SKUs); Zen 4 1/cycle |
    /// | avx2 int8 | `vpmaddubsw ymm` | 32 | 2 | 2 | Skylake+ p0/p1, Zen 3 two pipes; the `vpmaddwd` each step also needs shares those ports, so reachable is about half: generous |
    /// | neon+dotprod | `sdot v.4s, v.16b` | 16 | 2 | 6 | as `fmla` (generous) |
    /// | scalar int8 | `imul r32` / `madd w` | 1 | 2 | 2 (x86), 4 (aarch64) | Intel: one multiplier (p1); Zen 3/4 one; 2 taken (generous); Apple: 2 multiply pipes, 4 taken |
    ///
    /// Lanes count MACs per instruction (`vpdpbusd zmm`: 16 i32 lanes × 4 byte
    /// products = 64); ops per lane = 2 (multiply and add).
    pub fn limits(self, kind: PeakKind) -> PathLimits {
        let aarch64 = cfg!(target_arch = "aarch64");
        let (lanes, ports) = match (self, kind) {
            (Isa::Avx512, PeakKind::F32Fma) => (16, 2),
            (Isa::Avx512, PeakKind::Int8Dot) => (64, 2),
            (Isa::Avx2, PeakKind::F32Fma) => (8, 2),
            (Isa::Avx2, PeakKind::Int8Dot) => (32, 2),
            (Isa::Neon, PeakKind::F32Fma) => (4, 6),
            (Isa::Neon, PeakKind::Int8Dot) => (16, 6),
            (Isa::Scalar, PeakKind::F32Fma) => (1, if aarch64 { 6 } else { 2 }),
            (Isa::Scalar, PeakKind::Int8Dot) => (1, if aarch64 { 4 } else { 2 }),
        };
        PathLimits {
            lanes,
            ops_per_lane: 2,
            ports,
        }
    }
}

/// The paths this CPU supports for `kind`, widest first (scalar always).
pub fn supported_paths(kind: PeakKind) -> Vec<Isa> {
    Isa::ALL.into_iter().filter(|i| i.supported(kind)).collect()
}

/// The widest path this CPU supports for `kind`.
pub fn best_path(kind: PeakKind) -> Isa {
    supported_paths(kind)
        .into_iter()
        .next()
        .unwrap_or(Isa::Scalar)
}

/// Per-core, per-cycle issue limits of one path (see [`Isa::limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathLimits {
    /// MACs (FMAs) one instruction performs.
    pub lanes: u32,
    /// Operations counted per MAC (2: multiply and add).
    pub ops_per_lane: u32,
    /// Instructions of this kind a core can start per cycle.
    pub ports: u32,
}

/// Where the clock of a [`Bound`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// The largest `/sys/devices/system/cpu/cpu*/cpufreq/cpuinfo_max_freq`.
    SysfsMaxFreq,
    /// Timed chain of dependent integer adds (1 cycle each on every x86-64 and
    /// AArch64 core), best over threads and repetitions, plus
    /// [`MEASURED_CLOCK_MARGIN`].
    AddChain,
}

impl ClockSource {
    /// Stored spelling (`peak_results.clock_source`).
    pub fn name(self) -> &'static str {
        match self {
            ClockSource::SysfsMaxFreq => "sysfs cpuinfo_max_freq",
            ClockSource::AddChain => "measured dependent-add chain",
        }
    }
}

/// Added to a clock measured by the add chain. A measured clock can read low (the
/// core changed frequency or was shared with another process while the chain ran),
/// and a kernel that truly runs at its ports' limit must not be rejected for that.
/// 10 % is far below the 20× errors the bound exists to catch.
pub const MEASURED_CLOCK_MARGIN: f64 = 0.10;

/// The physical limit of a peak: `cores × clock × lanes × ops per lane × ports`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// The bound, GFLOP/s (GOP/s for int8).
    pub gflops: Gflops,
    /// Cores counted: the threads used, at most the logical CPUs (SMT siblings
    /// counted as cores: generous).
    pub cores: usize,
    pub clock_ghz: f64,
    /// Where the clock came from.
    pub clock_source: ClockSource,
    /// The path's per-core limits.
    pub limits: PathLimits,
}

impl Bound {
    /// `cores × clock × lanes × ops × ports`.
    pub fn new(cores: usize, clock: Clock, limits: PathLimits) -> Bound {
        let per_cycle = limits.lanes as f64 * limits.ops_per_lane as f64 * limits.ports as f64;
        Bound {
            gflops: Gflops(cores as f64 * clock.ghz * per_cycle),
            cores,
            clock_ghz: clock.ghz,
            clock_source: clock.source,
            limits,
        }
    }

    /// The arithmetic, for tables and errors.
    pub fn formula(&self) -> String {
        format!(
            "{} cores × {:.2} GHz ({}) × {} lanes × {} ops × {} ports",
            self.cores,
            self.clock_ghz,
            self.clock_source.name(),
            self.limits.lanes,
            self.limits.ops_per_lane,
            self.limits.ports
        )
    }
}

/// A CPU clock with its source.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Clock {
    pub ghz: f64,
    /// Where it came from.
    pub source: ClockSource,
}

/// One measured peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    /// The arithmetic.
    pub kind: PeakKind,
    /// Best rate over the repetitions, all threads together.
    pub gflops: Gflops,
    pub threads: usize,
    /// The instruction path used (see [`Isa::path`]).
    pub isa: String,
    /// Its plausibility bound (the rate is at most this).
    pub bound: Bound,
}

/// Errors of a peak measurement.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PeakError {
    /// The forced path is not available on this CPU.
    #[error(
        "{kind} cannot run on the {isa} path here (it needs {needs}); paths on this CPU: {supported}"
    )]
    Unsupported {
        /// `f32 FMA` / `int8 dot`.
        kind: &'static str,
        /// The `--isa` name asked for.
        isa: &'static str,
        /// What the path needs.
        needs: &'static str,
        /// The `--isa` names this CPU supports for `kind`.
        supported: String,
    },
    /// The measured rate is physically impossible: the kernel did not do the work
    /// it counts (or the path's constants are wrong). Nothing is stored.
    #[error(
        "{kind} on {path}: measured {measured:.1} {unit} is above the physical bound {bound:.1} {unit} ({formula}); the kernel did not do the work it counts, so nothing was stored"
    )]
    AboveBound {
        /// `f32 FMA` / `int8 dot`.
        kind: &'static str,
        /// Instruction path.
        path: &'static str,
        /// `GFLOP/s` / `GOP/s`.
        unit: &'static str,
        /// The measured rate.
        measured: f64,
        bound: f64,
        /// The bound's arithmetic.
        formula: String,
    },
    /// No clock to bound the rate with.
    #[error(
        "cannot bound the {0} peak: no cpufreq in sysfs and no cycle-timed add chain on this architecture; not measured"
    )]
    NoClock(&'static str),
}

/// Steps of the calibration run.
const ITERS: u64 = 1 << 20;

/// Independent accumulator chains per kernel: enough to cover FMA/dot latency
/// (4–5 cycles) × 2 ports with room, few enough to stay in 16 registers.
const CHAINS: usize = 12;

/// f32 step `a ← a × X + Y`: converges to `Y / (1 − X) = 0.1` over ~10^7 steps, so
/// values stay normal and every step changes the result in the last bits.
const X: f32 = 0.999_999;
/// See [`X`].
const Y: f32 = 1e-7;

/// Signed multiplicands of the int8 kernels, all in 1..=63 and `S[0]` even. With
/// unsigned bytes `vpmaddubsw` never saturates (2 × 255 × 63 < 32767), a SIMD step
/// adds 0 only when all four bytes of a lane are 0, and the scalar step
/// `a ← a + (a mod 256) × S[0]` maps an odd low byte to an odd one (× odd `1 + S[0]`),
/// so no chain reaches a fixed point.
const S: [i8; 64] = {
    let mut s = [0i8; 64];
    let mut i = 0;
    while i < 64 {
        s[i] = ((i * 29 + 7) % 63 + 1) as i8;
        i += 1;
    }
    s
};

/// Keeps `v` in a register and hides its value from the optimizer, at no
/// instruction cost: an empty `asm!` that claims to read and rewrite it (no memory
/// is touched). The scalar kernels apply it to every chain after every step, so
/// LLVM can neither fold the chain nor pack the independent scalar chains into
/// one SIMD instruction (each must sit in its own scalar register here), which
/// would make the "scalar" path a vector one.
#[inline(always)]
fn opaque_f32(v: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        let mut v = v;
        // SAFETY: an empty instruction sequence.
        unsafe {
            std::arch::asm!("/* {0} */", inout(xmm_reg) v, options(nomem, nostack, preserves_flags))
        };
        v
    }
    #[cfg(target_arch = "aarch64")]
    {
        let mut v = v;
        // SAFETY: an empty instruction sequence.
        unsafe {
            std::arch::asm!("/* {0:s} */", inout(vreg) v, options(nomem, nostack, preserves_flags))
        };
        v
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // Other architectures: black_box may go through memory (slower, still bounded).
        std::hint::black_box(v)
    }
}

/// [`opaque_f32`] for a general-purpose register.
#[inline(always)]
fn opaque_i32(v: i32) -> i32 {
    #[cfg(target_arch = "x86_64")]
    {
        let mut v = v;
        // SAFETY: an empty instruction sequence.
        unsafe {
            std::arch::asm!("/* {0:e} */", inout(reg) v, options(nomem, nostack, preserves_flags))
        };
        v
    }
    #[cfg(target_arch = "aarch64")]
    {
        let mut v = v;
        // SAFETY: an empty instruction sequence.
        unsafe {
            std::arch::asm!("/* {0:w} */", inout(reg) v, options(nomem, nostack, preserves_flags))
        };
        v
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        std::hint::black_box(v)
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! Each kernel loads its chains from `st` (f32 bits or i32, chain-major), runs
    //! `iters` steps in registers and stores the chains back: no memory traffic
    //! inside the loop.
    use super::{CHAINS, S, X, Y};
    use std::arch::x86_64::*;

    /// 12 zmm chains of `a ← fma(a, x, y)`. The accumulator is an input of its own
    /// next FMA, so step n + 1 cannot start before step n ends, and IEEE rounding
    /// after every step forbids LLVM from rewriting n steps as a closed form (it
    /// may not reassociate floating point).
    #[target_feature(enable = "avx512f")]
    pub unsafe fn fma_avx512(iters: u64, st: &mut [u32]) {
        assert_eq!(st.len(), CHAINS * 16);
        let p = st.as_mut_ptr() as *mut f32;
        let (x, y) = (_mm512_set1_ps(X), _mm512_set1_ps(Y));
        let mut acc = [_mm512_setzero_ps(); CHAINS];
        for (c, a) in acc.iter_mut().enumerate() {
            // SAFETY: c * 16 + 16 <= st.len().
            *a = unsafe { _mm512_loadu_ps(p.add(c * 16)) };
        }
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_ps(*a, x, y);
            }
        }
        for (c, a) in acc.iter().enumerate() {
            // SAFETY: as above.
            unsafe { _mm512_storeu_ps(p.add(c * 16), *a) };
        }
    }

    /// As [`fma_avx512`] on ymm.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn fma_avx2(iters: u64, st: &mut [u32]) {
        assert_eq!(st.len(), CHAINS * 8);
        let p = st.as_mut_ptr() as *mut f32;
        let (x, y) = (_mm256_set1_ps(X), _mm256_set1_ps(Y));
        let mut acc = [_mm256_setzero_ps(); CHAINS];
        for (c, a) in acc.iter_mut().enumerate() {
            // SAFETY: c * 8 + 8 <= st.len().
            *a = unsafe { _mm256_loadu_ps(p.add(c * 8)) };
        }
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm256_fmadd_ps(*a, x, y);
            }
        }
        for (c, a) in acc.iter().enumerate() {
            // SAFETY: as above.
            unsafe { _mm256_storeu_ps(p.add(c * 8), *a) };
        }
    }

    /// 12 zmm chains of `a ← vpdpbusd(a, bytes(a), s)`: the unsigned operand is the
    /// accumulator's own bytes, so each step's 64 products need the previous
    /// step's sums; there is nothing loop-invariant to hoist.
    #[target_feature(enable = "avx512f,avx512vnni")]
    pub unsafe fn dot_vnni512(iters: u64, st: &mut [u32]) {
        assert_eq!(st.len(), CHAINS * 16);
        let p = st.as_mut_ptr() as *mut __m512i;
        // SAFETY: S has 64 bytes.
        let s = unsafe { _mm512_loadu_si512(S.as_ptr() as *const __m512i) };
        let mut acc = [_mm512_setzero_si512(); CHAINS];
        for (c, a) in acc.iter_mut().enumerate() {
            // SAFETY: 64-byte chunk c of st (CHAINS × 16 words).
            *a = unsafe { _mm512_loadu_si512(p.add(c)) };
        }
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm512_dpbusd_epi32(*a, *a, s);
            }
        }
        for (c, a) in acc.iter().enumerate() {
            // SAFETY: as above.
            unsafe { _mm512_storeu_si512(p.add(c), *a) };
        }
    }

    /// 12 ymm chains of `a ← a + vpmaddwd(vpmaddubsw(bytes(a), s), 1)` (llama.cpp's
    /// AVX2 `mul_sum_us8_pairs_float` idiom): the unsigned bytes are the
    /// accumulator's own, so both multiplies of a step wait for the previous add.
    #[target_feature(enable = "avx2")]
    pub unsafe fn dot_avx2(iters: u64, st: &mut [u32]) {
        assert_eq!(st.len(), CHAINS * 8);
        let p = st.as_mut_ptr() as *mut __m256i;
        // SAFETY: S has 64 bytes; the first 32 are read.
        let s = unsafe { _mm256_loadu_si256(S.as_ptr() as *const __m256i) };
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_si256(); CHAINS];
        for (c, a) in acc.iter_mut().enumerate() {
            // SAFETY: 32-byte chunk c of st (CHAINS × 8 words).
            *a = unsafe { _mm256_loadu_si256(p.add(c)) };
        }
        for _ in 0..iters {
            for a in acc.iter_mut() {
                let pairs = _mm256_maddubs_epi16(*a, s);
                let mut sums = _mm256_madd_epi16(pairs, ones);
                // With target-cpu=native on a CPU with AVX-VNNI, LLVM fuses the
                // `vpmaddwd` + `vpaddd` below into one `vpdpwssd`, which an AVX2-only
                // CPU does not have; this empty asm (no instruction, no memory)
                // keeps the forced AVX2 path the instruction stream such a CPU runs.
                // SAFETY: an empty instruction sequence.
                unsafe {
                    std::arch::asm!("/* {0} */", inout(ymm_reg) sums, options(nomem, nostack, preserves_flags))
                };
                *a = _mm256_add_epi32(*a, sums);
            }
        }
        for (c, a) in acc.iter().enumerate() {
            // SAFETY: as above.
            unsafe { _mm256_storeu_si256(p.add(c), *a) };
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    //! As the x86 kernels, on 128-bit NEON registers (16 chains: AArch64 has 32).
    use super::{S, X, Y};
    use std::arch::aarch64::*;

    /// NEON chains per kernel.
    pub const NEON_CHAINS: usize = 16;

    /// 16 chains of `a ← y + a × x` (`fmla`): the accumulator is the next FMA's
    /// multiplicand; see `fma_avx512` for why this cannot be folded.
    #[target_feature(enable = "neon")]
    pub unsafe fn fma_neon(iters: u64, st: &mut [u32]) {
        assert_eq!(st.len(), NEON_CHAINS * 4);
        let p = st.as_mut_ptr() as *mut f32;
        let (x, y) = (vdupq_n_f32(X), vdupq_n_f32(Y));
        let mut acc = [vdupq_n_f32(0.0); NEON_CHAINS];
        for (c, a) in acc.iter_mut().enumerate() {
            // SAFETY: c * 4 + 4 <= st.len().
            *a = unsafe { vld1q_f32(p.add(c * 4)) };
        }
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = vfmaq_f32(y, *a, x);
            }
        }
        for (c, a) in acc.iter().enumerate() {
            // SAFETY: as above.
            unsafe { vst1q_f32(p.add(c * 4), *a) };
        }
    }

    /// 16 chains of `a ← sdot(a, bytes(a), s)` (signed × signed, 16 MACs per
    /// instruction, the dotprod extension llama.cpp's Q8_0 path uses through
    /// `vdotq_s32`). `vdotq_s32` is not stable Rust yet, so the one instruction is
    /// written as `asm!`, which the optimizer cannot look into at all; the chain
    /// dependency is the same as on x86.
    #[target_feature(enable = "neon,dotprod")]
    pub unsafe fn dot_sdot(iters: u64, st: &mut [u32]) {
        assert_eq!(st.len(), NEON_CHAINS * 4);
        let p = st.as_mut_ptr() as *mut i32;
        // SAFETY: S has 64 bytes; the first 16 are read.
        let s = unsafe { vld1q_s8(S.as_ptr()) };
        let mut acc = [vdupq_n_s32(0); NEON_CHAINS];
        for (c, a) in acc.iter_mut().enumerate() {
            // SAFETY: c * 4 + 4 <= st.len().
            *a = unsafe { vld1q_s32(p.add(c * 4)) };
        }
        for _ in 0..iters {
            for a in acc.iter_mut() {
                // SAFETY: sdot on registers only; the feature is checked by the caller.
                unsafe {
                    std::arch::asm!(
                        ".arch_extension dotprod",
                        "sdot {a:v}.4s, {a:v}.16b, {s:v}.16b",
                        a = inout(vreg) *a,
                        s = in(vreg) s,
                        options(nomem, nostack, preserves_flags),
                    )
                };
            }
        }
        for (c, a) in acc.iter().enumerate() {
            // SAFETY: as above.
            unsafe { vst1q_s32(p.add(c * 4), *a) };
        }
    }
}

/// 12 scalar chains of `a ← a × x + y` (`mul_add`, one FMA instruction where the
/// CPU has FMA), each made opaque after every step (see [`opaque_f32`]).
fn fma_scalar(iters: u64, st: &mut [u32]) {
    assert_eq!(st.len(), CHAINS);
    let mut acc = [0f32; CHAINS];
    for (a, w) in acc.iter_mut().zip(st.iter()) {
        *a = f32::from_bits(*w);
    }
    let (x, y) = (std::hint::black_box(X), std::hint::black_box(Y));
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = opaque_f32(a.mul_add(x, y));
        }
    }
    for (a, w) in acc.iter().zip(st.iter_mut()) {
        *w = a.to_bits();
    }
}

/// 12 scalar chains of `a ← a + (a mod 256) × s`: one u8 × i8 MAC per step whose
/// unsigned byte is the accumulator's own low byte; `s` is hidden from the
/// optimizer before the loop (so the multiply stays a multiply) and every chain is
/// made opaque after every step (see [`opaque_f32`]).
fn dot_scalar(iters: u64, st: &mut [u32]) {
    assert_eq!(st.len(), CHAINS);
    let mut acc = [0i32; CHAINS];
    for (a, w) in acc.iter_mut().zip(st.iter()) {
        *a = *w as i32;
    }
    let s = std::hint::black_box(S[0]) as i32;
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = opaque_i32(a.wrapping_add((*a as u8) as i32 * s));
        }
    }
    for (a, w) in acc.iter().zip(st.iter_mut()) {
        *w = *a as u32;
    }
}

/// One runnable kernel.
#[derive(Clone, Copy)]
struct Kernel {
    /// Instruction path name.
    path: &'static str,
    /// Accumulator words (f32 bits or i32), chain-major.
    words: usize,
    /// Operations of one step over all chains: 2 × MACs (FMAs).
    ops_per_step: u64,
    /// Runs `iters` steps in place.
    run: unsafe fn(u64, &mut [u32]),
}

impl Kernel {
    /// Runs `iters` steps on `st`.
    fn run(&self, iters: u64, st: &mut [u32]) {
        // SAFETY: `kernel` only returns kernels whose CPU features were detected.
        unsafe { (self.run)(iters, st) }
    }
}

/// The kernel of `kind` on `isa`, when this CPU supports it.
fn kernel(kind: PeakKind, isa: Isa) -> Option<Kernel> {
    if !isa.supported(kind) {
        return None;
    }
    let path = isa.path(kind);
    let k = |words: usize, macs: usize, run: unsafe fn(u64, &mut [u32])| Kernel {
        path,
        words,
        ops_per_step: 2 * macs as u64,
        run,
    };
    match (isa, kind) {
        (Isa::Scalar, PeakKind::F32Fma) => Some(k(CHAINS, CHAINS, fma_scalar)),
        (Isa::Scalar, PeakKind::Int8Dot) => Some(k(CHAINS, CHAINS, dot_scalar)),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, PeakKind::F32Fma) => Some(k(CHAINS * 16, CHAINS * 16, x86::fma_avx512)),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, PeakKind::Int8Dot) => Some(k(CHAINS * 16, CHAINS * 64, x86::dot_vnni512)),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, PeakKind::F32Fma) => Some(k(CHAINS * 8, CHAINS * 8, x86::fma_avx2)),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, PeakKind::Int8Dot) => Some(k(CHAINS * 8, CHAINS * 32, x86::dot_avx2)),
        #[cfg(target_arch = "aarch64")]
        (Isa::Neon, PeakKind::F32Fma) => {
            Some(k(arm::NEON_CHAINS * 4, arm::NEON_CHAINS * 4, arm::fma_neon))
        }
        #[cfg(target_arch = "aarch64")]
        (Isa::Neon, PeakKind::Int8Dot) => Some(k(
            arm::NEON_CHAINS * 4,
            arm::NEON_CHAINS * 16,
            arm::dot_sdot,
        )),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// The starting state of every kernel: distinct per word, so every lane runs its
/// own chain. f32: `1 + i / 1024`; i32: an odd hash of `i` (odd: see [`S`]).
fn initial_state(kind: PeakKind, words: usize) -> Vec<u32> {
    (0..words as u32)
        .map(|i| match kind {
            PeakKind::F32Fma => (1.0f32 + i as f32 / 1024.0).to_bits(),
            PeakKind::Int8Dot => i.wrapping_mul(0x9E37_79B1).wrapping_add(0x1234_5678) | 1,
        })
        .collect()
}

/// Wall time of `threads` workers each running `iters` steps of `k` at once: from
/// the first worker's start to the last worker's end, each read by the worker
/// itself. (A clock started by the spawning thread after the barrier could start
/// late, when that thread is descheduled while the workers already run, and
/// report a too-short time.)
fn timed(k: Kernel, kind: PeakKind, iters: u64, threads: usize) -> f64 {
    let barrier = std::sync::Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let b = &barrier;
                s.spawn(move || {
                    let mut st = initial_state(kind, k.words);
                    b.wait();
                    let start = Instant::now();
                    k.run(iters, &mut st);
                    let end = Instant::now();
                    std::hint::black_box(&st);
                    (start, end)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("a peak worker panicked"))
            .collect()
    });
    let start = spans.iter().map(|s| s.0).min().expect("threads ≥ 1");
    let end = spans.iter().map(|s| s.1).max().expect("threads ≥ 1");
    (end - start).as_secs_f64()
}

/// Measures the peak of `kind` on the widest path here (see [`measure_with`]).
///
/// # Errors
/// As [`measure_with`].
pub fn measure(
    kind: PeakKind,
    threads: usize,
    duration: Duration,
    reps: usize,
) -> Result<Peak, PeakError> {
    measure_with(kind, best_path(kind), threads, duration, reps)
}

/// Measures the peak of `kind` on `isa` with `threads` workers: each worker runs
/// the kernel for about `duration`, repeated `reps` times; the best aggregate rate
/// is kept and checked against its [`Bound`].
/// Cost: `reps × duration` of wall time on all `threads` cores, plus ~30 ms for the clock.
///
/// # Errors
/// [`PeakError::Unsupported`] when this CPU lacks the path;
/// [`PeakError::AboveBound`] when the rate is physically impossible;
/// [`PeakError::NoClock`] when no clock can be found to bound it.
pub fn measure_with(
    kind: PeakKind,
    isa: Isa,
    threads: usize,
    duration: Duration,
    reps: usize,
) -> Result<Peak, PeakError> {
    let k = kernel(kind, isa).ok_or_else(|| PeakError::Unsupported {
        kind: kind.label(),
        isa: isa.name(),
        needs: isa.needs(kind),
        supported: supported_paths(kind)
            .iter()
            .map(|i| i.name())
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    let threads = threads.max(1);
    // Calibrate steps for ~duration on one thread.
    let per_step = timed(k, kind, ITERS / 16, 1) / (ITERS / 16) as f64;
    let iters = ((duration.as_secs_f64() / per_step.max(1e-12)) as u64).clamp(1 << 10, 1 << 34);
    let mut best = 0.0f64;
    for _ in 0..reps.max(1) {
        let secs = timed(k, kind, iters, threads);
        let rate = (iters * k.ops_per_step * threads as u64) as f64 / secs / 1e9;
        best = best.max(rate);
    }
    // The clock after the kernel: the cores have left any idle frequency by now.
    let clock = cpu_clock(threads).ok_or(PeakError::NoClock(kind.label()))?;
    let cores = threads.min(
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(threads),
    );
    let bound = Bound::new(cores, clock, isa.limits(kind));
    check_bound(kind, k.path, Gflops(best), &bound)?;
    Ok(Peak {
        kind,
        gflops: Gflops(best),
        threads,
        isa: k.path.to_string(),
        bound,
    })
}

/// `measured ≤ bound`, else [`PeakError::AboveBound`] (a NaN rate fails too).
///
/// # Errors
/// [`PeakError::AboveBound`].
pub fn check_bound(
    kind: PeakKind,
    path: &'static str,
    measured: Gflops,
    bound: &Bound,
) -> Result<(), PeakError> {
    if measured.0 <= bound.gflops.0 {
        Ok(())
    } else {
        Err(PeakError::AboveBound {
            kind: kind.label(),
            path,
            unit: kind.unit(),
            measured: measured.0,
            bound: bound.gflops.0,
            formula: bound.formula(),
        })
    }
}

/// The clock for a [`Bound`] on `threads` workers: sysfs `cpuinfo_max_freq` when
/// present, else the add-chain measurement plus [`MEASURED_CLOCK_MARGIN`]. When both
/// exist and the chain runs faster than sysfs says (acpi-cpufreq reports the
/// highest non-boost P-state on many AMD systems), the measurement wins: the bound
/// must stay an upper bound. `None` when neither exists (architectures other than
/// x86-64 and AArch64 without cpufreq).
pub fn cpu_clock(threads: usize) -> Option<Clock> {
    let sys = sysfs_max_freq_hz();
    let chain = add_chain_hz(threads.max(1));
    let measured = |hz: f64| Clock {
        ghz: hz * (1.0 + MEASURED_CLOCK_MARGIN) / 1e9,
        source: ClockSource::AddChain,
    };
    match (sys, chain) {
        (Some(s), Some(c)) if c > s => Some(measured(c)),
        (Some(s), _) => Some(Clock {
            ghz: s / 1e9,
            source: ClockSource::SysfsMaxFreq,
        }),
        (None, Some(c)) => Some(measured(c)),
        (None, None) => None,
    }
}

/// The largest `cpuinfo_max_freq` (kHz) of any CPU, in Hz.
fn sysfs_max_freq_hz() -> Option<f64> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu").ok()?;
    dir.filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.strip_prefix("cpu")
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("cpufreq/cpuinfo_max_freq")).ok())
        .filter_map(|s| s.trim().parse::<f64>().ok())
        .filter(|&khz| khz > 0.0)
        .map(|khz| khz * 1e3)
        .reduce(f64::max)
}

/// Dependent adds per loop iteration of the clock chain.
const CHAIN_UNROLL: u64 = 8;

/// Runs `n` iterations of [`CHAIN_UNROLL`] dependent register adds (each needs the
/// previous one's result: 1 cycle apiece), returning the seconds taken.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn add_chain_secs(n: u64) -> f64 {
    assert!(n > 0);
    let mut x: u64 = 0;
    let y: u64 = std::hint::black_box(1);
    let t = Instant::now();
    // SAFETY: register arithmetic and a counted loop; n > 0.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!(
            "2:",
            "add {x}, {y}", "add {x}, {y}", "add {x}, {y}", "add {x}, {y}",
            "add {x}, {y}", "add {x}, {y}", "add {x}, {y}", "add {x}, {y}",
            "dec {n}",
            "jnz 2b",
            x = inout(reg) x,
            y = in(reg) y,
            n = inout(reg) n => _,
            options(nomem, nostack),
        )
    };
    // SAFETY: as above.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        std::arch::asm!(
            "2:",
            "add {x}, {x}, {y}", "add {x}, {x}, {y}", "add {x}, {x}, {y}", "add {x}, {x}, {y}",
            "add {x}, {x}, {y}", "add {x}, {x}, {y}", "add {x}, {x}, {y}", "add {x}, {x}, {y}",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            x = inout(reg) x,
            y = in(reg) y,
            n = inout(reg) n => _,
            options(nomem, nostack),
        )
    };
    let secs = t.elapsed().as_secs_f64();
    std::hint::black_box(x);
    secs
}

/// Iterations of one timed chain run: 2^14 × [`CHAIN_UNROLL`] cycles, ~50 µs at
/// 2.5 GHz. Runs are short so that many finish without a pause: a run that spans a
/// pause (the core lent to another thread, or to another guest of a virtual
/// machine's host) reads a clock that is too low, and with 3 ms runs every run on a
/// busy VM spanned one, reading 1.9–2.45 GHz on a core that ran at 2.45.
/// The timer's own cost (~25 ns) is 0.05 % of a run.
const CHAIN_RUN: u64 = 1 << 14;

/// Timed chain runs per worker (~30 ms in all).
const CHAIN_RUNS: usize = 600;

/// Cycles per second: `threads` workers each time the add chain (a warm-up run,
/// then [`CHAIN_RUNS`] short runs of [`CHAIN_RUN`]); the fastest run of any worker
/// counts (a run can only be slowed, by sharing the core or a lower frequency, never
/// sped up). `None` on architectures without the chain. Costs ~30 ms per worker.
/// [`cpu_clock`] uses it; `examples/add_chain_clock.rs` (bench/add-chain-clock.sh)
/// measures how much its readings move alone and beside busy threads.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub fn add_chain_hz(threads: usize) -> Option<f64> {
    const N: u64 = CHAIN_RUN;
    let best = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    add_chain_secs(N);
                    (0..CHAIN_RUNS)
                        .map(|_| (N * CHAIN_UNROLL) as f64 / add_chain_secs(N))
                        .fold(0.0f64, f64::max)
                })
            })
            .collect();
        hs.into_iter()
            .filter_map(|h| h.join().ok())
            .fold(0.0f64, f64::max)
    });
    (best.is_finite() && best > 0.0).then_some(best)
}

/// No cycle-timed chain on other architectures.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub fn add_chain_hz(_threads: usize) -> Option<f64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent emulation of one step of one accumulator word on `isa`, written
    /// from the instruction set manuals' definitions (not from the kernels).
    /// `lane` is the word's index within its vector register.
    fn reference_step(kind: PeakKind, isa: Isa, w: u32, lane: usize) -> u32 {
        match kind {
            PeakKind::F32Fma => f32::from_bits(w).mul_add(X, Y).to_bits(),
            PeakKind::Int8Dot => {
                let a = w as i32;
                let b = w.to_le_bytes();
                let s = &S[4 * lane..4 * lane + 4];
                let prod = |k: usize| b[k] as i32 * s[k] as i32; // u8 × i8
                let add = match isa {
                    // vpdpbusd: Σ of 4 u8 × i8 products, no saturation.
                    Isa::Avx512 => (0..4).map(prod).sum::<i32>(),
                    // vpmaddubsw: pairs summed with i16 saturation; vpmaddwd with 1s: the two pairs summed.
                    Isa::Avx2 => {
                        let sat = |v: i32| v.clamp(i16::MIN as i32, i16::MAX as i32);
                        sat(prod(0) + prod(1)) + sat(prod(2) + prod(3))
                    }
                    // sdot: Σ of 4 i8 × i8 products.
                    Isa::Neon => (0..4).map(|k| b[k] as i8 as i32 * s[k] as i32).sum(),
                    // One MAC of the low byte.
                    Isa::Scalar => b[0] as i32 * S[0] as i32,
                };
                a.wrapping_add(add) as u32
            }
        }
    }

    /// Lanes per vector register of a path (words sharing one instruction).
    fn lanes_per_register(isa: Isa) -> usize {
        match isa {
            Isa::Avx512 => 16,
            Isa::Avx2 => 8,
            Isa::Neon => 4,
            Isa::Scalar => 1,
        }
    }

    fn reference(kind: PeakKind, isa: Isa, steps: u64, words: usize) -> Vec<u32> {
        let l = lanes_per_register(isa);
        let mut st = initial_state(kind, words);
        for _ in 0..steps {
            for (i, w) in st.iter_mut().enumerate() {
                *w = reference_step(kind, isa, *w, i % l);
            }
        }
        st
    }

    /// Catches hoisting and folding on every path this CPU runs: the kernel's final
    /// state after n steps must equal the independent emulation of n steps, word for
    /// word, and differ from n − 1 steps (so a kernel that skipped or merged steps, or
    /// computed a product once, could not match). An int8 chain can reach a fixed
    /// point of its own arithmetic (`a + dot(bytes(a), s) = a` when the dot product
    /// is 0: seen on the sdot path, run under qemu-aarch64): such a word still has to
    /// match the emulation, but cannot show the last step, so every register must
    /// keep at least one moving word and at most a quarter of all words may rest.
    #[test]
    fn every_path_does_every_step() {
        const N: u64 = 1000;
        let mut ran = Vec::new();
        for kind in PeakKind::ALL {
            for isa in supported_paths(kind) {
                let k = kernel(kind, isa).expect("supported");
                let mut st = initial_state(kind, k.words);
                k.run(N, &mut st);
                let want = reference(kind, isa, N, k.words);
                let before = reference(kind, isa, N - 1, k.words);
                for (i, (got, want)) in st.iter().zip(&want).enumerate() {
                    assert_eq!(got, want, "{} on {}: word {i}", kind.label(), k.path);
                }
                let l = lanes_per_register(isa);
                let resting: Vec<usize> = (0..k.words).filter(|&i| want[i] == before[i]).collect();
                assert!(
                    resting.len() * 4 <= k.words,
                    "{} on {}: words {resting:?} of {} did not change in the last step",
                    kind.label(),
                    k.path,
                    k.words
                );
                for reg in 0..k.words / l {
                    assert!(
                        (reg * l..(reg + 1) * l).any(|i| want[i] != before[i]),
                        "{} on {}: register {reg} did not change in the last step",
                        kind.label(),
                        k.path
                    );
                }
                ran.push(k.path);
            }
        }
        eprintln!("paths checked: {ran:?}");
        assert!(ran.contains(&"scalar"));
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            assert!(ran.contains(&"avx2"), "{ran:?}");
        }
    }

    /// Each path's measured rate is positive, at most its physical bound, and the
    /// vector paths are at least as fast as the scalar path of the same kind timed
    /// the same way (one thread, best of 3).
    #[test]
    fn every_path_is_within_its_bound_and_above_scalar() {
        for kind in PeakKind::ALL {
            let scalar = measure_with(kind, Isa::Scalar, 1, Duration::from_millis(30), 3)
                .expect("scalar always runs and stays within its bound");
            for isa in supported_paths(kind) {
                let p = measure_with(kind, isa, 1, Duration::from_millis(30), 3)
                    .unwrap_or_else(|e| panic!("{e}"));
                eprintln!(
                    "{} {:<12} {:>9.1} {} (bound {:.1}: {})",
                    kind.label(),
                    p.isa,
                    p.gflops.0,
                    kind.unit(),
                    p.bound.gflops.0,
                    p.bound.formula()
                );
                assert!(p.gflops.0 > 0.0 && p.gflops.0 <= p.bound.gflops.0);
                assert!(
                    p.gflops.0 >= scalar.gflops.0 || isa == Isa::Scalar,
                    "{} on {}: {:.1} below scalar {:.1}",
                    kind.label(),
                    p.isa,
                    p.gflops.0,
                    scalar.gflops.0
                );
            }
        }
    }

    #[test]
    fn a_rate_above_the_bound_is_an_error() {
        let clock = Clock {
            ghz: 3.0,
            source: ClockSource::SysfsMaxFreq,
        };
        let b = Bound::new(2, clock, Isa::Avx2.limits(PeakKind::Int8Dot));
        // 2 cores × 3 GHz × 32 lanes × 2 ops × 2 ports = 768 GOP/s.
        assert!((b.gflops.0 - 768.0).abs() < 1e-9);
        assert!(check_bound(PeakKind::Int8Dot, "avx2", Gflops(700.0), &b).is_ok());
        // The figure the hoisted AVX2 kernel printed on a 2-core Zen 3.
        let e = check_bound(PeakKind::Int8Dot, "avx2", Gflops(16428.2), &b)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("measured 16428.2 GOP/s is above the physical bound 768.0 GOP/s")
                && e.contains(
                    "2 cores × 3.00 GHz (sysfs cpuinfo_max_freq) × 32 lanes × 2 ops × 2 ports"
                )
                && e.contains("nothing was stored"),
            "{e}"
        );
        assert!(check_bound(PeakKind::Int8Dot, "avx2", Gflops(f64::NAN), &b).is_err());
    }

    #[test]
    fn a_path_this_cpu_lacks_is_refused_by_name() {
        let missing = Isa::ALL
            .into_iter()
            .find(|i| !i.supported(PeakKind::Int8Dot))
            .expect("no CPU has both x86 and aarch64 paths");
        let e = measure_with(PeakKind::Int8Dot, missing, 1, Duration::from_millis(1), 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("on the {} path here", missing.name()))
                && e.contains("paths on this CPU:")
                && e.contains("scalar"),
            "{e}"
        );
    }

    /// The add chain measures a clock in the range of real CPUs (0.3–7 GHz); the
    /// clock a bound uses is in that range too.
    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn the_add_chain_reads_a_plausible_clock() {
        let hz = add_chain_hz(1).expect("x86-64 and AArch64 time the chain");
        assert!((0.3e9..7e9).contains(&hz), "{hz}");
        let c = cpu_clock(1).expect("clock");
        eprintln!(
            "add chain {:.3} GHz; bound clock {:.3} GHz ({})",
            hz / 1e9,
            c.ghz,
            c.source.name()
        );
        assert!((0.3..8.0).contains(&c.ghz), "{c:?}");
    }

    /// Beside twice as many spinning threads as cores (as a parallel test run has),
    /// the chain still gives a reading, and one in the range of real CPUs. How much
    /// readings move alone against busy (they must stay within
    /// [`MEASURED_CLOCK_MARGIN`]; 1.9–2.45 GHz on one busy VM made a true scalar FMA
    /// peak fail its bound) is timing on a shared machine, measured by
    /// bench/add-chain-clock.sh, not asserted here.
    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn the_add_chain_reads_a_plausible_clock_beside_busy_threads() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let stop = AtomicBool::new(false);
        let hz = std::thread::scope(|s| {
            for _ in 0..2 * cores {
                s.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                });
            }
            let hz: Vec<Option<f64>> = (0..3).map(|_| add_chain_hz(1)).collect();
            stop.store(true, Ordering::Relaxed);
            hz
        });
        eprintln!("add chain beside {} spinning threads: {hz:?}", 2 * cores);
        for h in hz {
            let h = h.expect("x86-64 and AArch64 time the chain");
            assert!((0.3e9..7e9).contains(&h), "{h}");
        }
    }

    #[test]
    fn isa_names_round_trip() {
        for i in Isa::ALL {
            assert_eq!(Isa::parse(i.name()), Some(i));
        }
        assert_eq!(Isa::parse("sse"), None);
        assert!(Isa::Scalar.supported(PeakKind::F32Fma));
        assert_eq!(
            best_path(PeakKind::F32Fma),
            supported_paths(PeakKind::F32Fma)[0]
        );
    }
}
