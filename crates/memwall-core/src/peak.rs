//! Measured peak compute of the CPU: the roof of the prefill roofline.
//!
//! Two in-register microbenchmarks, each running many independent accumulator
//! chains so that the FMA/dot-product pipes, not latency, bound the rate (the
//! method of Williams et al.'s "empirical roofline toolkit"; no memory traffic):
//!
//! - **f32 FMA**: `acc = acc × x + y` on the widest vectors the CPU has
//!   (AVX-512F, else AVX2+FMA, else NEON on aarch64, else scalar `mul_add`);
//!   2 FLOPs per lane per FMA.
//! - **int8 dot**: `u8 × i8` multiply-accumulate into i32 (AVX-512 VNNI
//!   `vpdpbusd`, else AVX2 `vpmaddubsw`+`vpmaddwd`); 2 ops per MAC. This is the
//!   roof for llama.cpp's quantized CPU matmuls, which quantize activations to
//!   8-bit blocks and use integer dot products (ggml-cpu `vec_dot_type` = Q8_0/Q8_K).
//!
//! Measured peaks are upper bounds for a kernel's arithmetic, not GEMM rates: a
//! real kernel also unpacks quantized blocks and moves data, so prefill sits below.

use crate::units::Gflops;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Which arithmetic a peak is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakKind {
    /// f32 fused multiply-add (GFLOP/s).
    F32Fma,
    /// 8-bit integer dot product (GOP/s, 2 ops per MAC).
    Int8Dot,
}

impl PeakKind {
    /// Label for tables.
    pub fn label(self) -> &'static str {
        match self {
            PeakKind::F32Fma => "f32 FMA",
            PeakKind::Int8Dot => "int8 dot",
        }
    }
}

/// One measured peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    /// The arithmetic.
    pub kind: PeakKind,
    /// Best rate over the repetitions, all threads together.
    pub gflops: Gflops,
    /// Threads used.
    pub threads: usize,
    /// The instruction path used (e.g. `avx512f`, `avx512vnni`, `avx2`, `neon`, `scalar`).
    pub isa: String,
}

const ITERS: u64 = 1 << 20;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// 12 independent zmm FMA chains × ITERS. Returns the checksum (prevents DCE).
    #[target_feature(enable = "avx512f")]
    pub unsafe fn fma_avx512(iters: u64) -> f32 {
        let x = _mm512_set1_ps(0.999_999);
        let y = _mm512_set1_ps(1e-7);
        let mut acc = [_mm512_set1_ps(1.0); 12];
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_ps(*a, x, y);
            }
        }
        let mut s = _mm512_setzero_ps();
        for a in acc {
            s = _mm512_add_ps(s, a);
        }
        _mm512_reduce_add_ps(s)
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn fma_avx2(iters: u64) -> f32 {
        let x = _mm256_set1_ps(0.999_999);
        let y = _mm256_set1_ps(1e-7);
        let mut acc = [_mm256_set1_ps(1.0); 12];
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm256_fmadd_ps(*a, x, y);
            }
        }
        let mut out = [0f32; 8];
        let mut s = _mm256_setzero_ps();
        for a in acc {
            s = _mm256_add_ps(s, a);
        }
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), s) };
        out.iter().sum()
    }

    #[target_feature(enable = "avx512f,avx512vnni")]
    pub unsafe fn dot_vnni512(iters: u64) -> i32 {
        let u = _mm512_set1_epi8(3);
        let s = _mm512_set1_epi8(-2);
        let mut acc = [_mm512_setzero_si512(); 12];
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm512_dpbusd_epi32(*a, u, s);
            }
        }
        let mut t = _mm512_setzero_si512();
        for a in acc {
            t = _mm512_add_epi32(t, a);
        }
        _mm512_reduce_add_epi32(t)
    }

    #[target_feature(enable = "avx2")]
    pub unsafe fn dot_avx2(iters: u64) -> i32 {
        let u = _mm256_set1_epi8(3);
        let s = _mm256_set1_epi8(-2);
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_si256(); 8];
        for _ in 0..iters {
            for a in acc.iter_mut() {
                let p = _mm256_maddubs_epi16(u, s);
                *a = _mm256_add_epi32(*a, _mm256_madd_epi16(p, ones));
            }
        }
        let mut t = _mm256_setzero_si256();
        for a in acc {
            t = _mm256_add_epi32(t, a);
        }
        let mut out = [0i32; 8];
        unsafe { _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, t) };
        out.iter().sum()
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use std::arch::aarch64::*;

    #[target_feature(enable = "neon")]
    pub unsafe fn fma_neon(iters: u64) -> f32 {
        let x = vdupq_n_f32(0.999_999);
        let y = vdupq_n_f32(1e-7);
        let mut acc = [vdupq_n_f32(1.0); 16];
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = vfmaq_f32(y, *a, x);
            }
        }
        acc.iter().map(|a| vaddvq_f32(*a)).sum()
    }
}

/// Per-call `(flops, checksum)` of one worker for `kind` on the best path here,
/// plus the path name.
fn kernel(kind: PeakKind) -> (fn(u64) -> f64, u64, &'static str) {
    #[cfg(target_arch = "x86_64")]
    {
        match kind {
            PeakKind::F32Fma if is_x86_feature_detected!("avx512f") => {
                // SAFETY: feature checked at run time.
                (
                    |n| unsafe { x86::fma_avx512(n) } as f64,
                    12 * 16 * 2,
                    "avx512f",
                )
            }
            PeakKind::F32Fma
                if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") =>
            {
                (
                    |n| unsafe { x86::fma_avx2(n) } as f64,
                    12 * 8 * 2,
                    "avx2+fma",
                )
            }
            PeakKind::Int8Dot
                if is_x86_feature_detected!("avx512vnni")
                    && is_x86_feature_detected!("avx512f") =>
            {
                (
                    |n| unsafe { x86::dot_vnni512(n) } as f64,
                    12 * 64 * 2,
                    "avx512vnni",
                )
            }
            PeakKind::Int8Dot if is_x86_feature_detected!("avx2") => {
                (|n| unsafe { x86::dot_avx2(n) } as f64, 8 * 32 * 2, "avx2")
            }
            _ => scalar(kind),
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        match kind {
            // SAFETY: NEON is mandatory on aarch64.
            PeakKind::F32Fma => (|n| unsafe { arm::fma_neon(n) } as f64, 16 * 4 * 2, "neon"),
            PeakKind::Int8Dot => scalar(kind),
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        scalar(kind)
    }
}

fn scalar(kind: PeakKind) -> (fn(u64) -> f64, u64, &'static str) {
    match kind {
        PeakKind::F32Fma => (
            |n| {
                let mut acc = [1.0f32; 16];
                for _ in 0..n {
                    for a in acc.iter_mut() {
                        *a = a.mul_add(0.999_999, 1e-7);
                    }
                }
                acc.iter().sum::<f32>() as f64
            },
            16 * 2,
            "scalar",
        ),
        PeakKind::Int8Dot => (
            |n| {
                let mut acc = [0i32; 16];
                for _ in 0..n {
                    for a in acc.iter_mut() {
                        *a = a.wrapping_add(
                            std::hint::black_box(3u8) as i32 * std::hint::black_box(-2i8) as i32,
                        );
                    }
                }
                acc.iter().map(|&x| x as f64).sum()
            },
            16 * 2,
            "scalar",
        ),
    }
}

/// Measures the peak of `kind` with `threads` workers: each worker runs the kernel
/// for about `duration`, repeated `reps` times; the best aggregate rate is kept.
/// Cost: `reps × duration` of wall time on all `threads` cores.
pub fn measure(kind: PeakKind, threads: usize, duration: Duration, reps: usize) -> Peak {
    let (f, ops_per_iter, isa) = kernel(kind);
    let threads = threads.max(1);
    // Calibrate iterations for ~duration on one thread.
    let t0 = Instant::now();
    std::hint::black_box(f(ITERS / 16));
    let per_iter = t0.elapsed().as_secs_f64() / (ITERS / 16) as f64;
    let iters = ((duration.as_secs_f64() / per_iter.max(1e-12)) as u64).clamp(1 << 10, 1 << 34);
    let mut best = 0.0f64;
    for _ in 0..reps.max(1) {
        let barrier = std::sync::Barrier::new(threads + 1);
        let secs = std::thread::scope(|s| {
            for _ in 0..threads {
                let b = &barrier;
                s.spawn(move || {
                    b.wait();
                    std::hint::black_box(f(iters));
                });
            }
            barrier.wait();
            let t = Instant::now();
            // scope joins all workers before returning
            t
        })
        .elapsed()
        .as_secs_f64();
        let rate = (iters * ops_per_iter * threads as u64) as f64 / secs / 1e9;
        best = best.max(rate);
    }
    Peak {
        kind,
        gflops: Gflops(best),
        threads,
        isa: isa.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_compute_what_they_claim() {
        // The int8 kernels accumulate 3 × (−2) per MAC: checksum = −6 × MACs.
        let (f, ops, isa) = kernel(PeakKind::Int8Dot);
        let macs_per_iter = ops / 2;
        assert_eq!(f(10), -6.0 * (10 * macs_per_iter) as f64, "isa {isa}");
        // FMA chains converge to y/(1−x) = 0.1 from 1.0; with one step: 0.999999 + 1e-7 per lane.
        let (f, ops, _) = kernel(PeakKind::F32Fma);
        let lanes = ops / 2;
        let one = f(1) / lanes as f64;
        assert!((one - (0.999_999 + 1e-7)).abs() < 1e-6, "{one}");
    }

    #[test]
    fn measure_returns_a_positive_rate() {
        let p = measure(PeakKind::F32Fma, 1, Duration::from_millis(5), 1);
        assert!(p.gflops.0 > 0.0 && p.gflops.0.is_finite());
    }
}
