//! STREAM: sustainable memory bandwidth with the four kernels of McCalpin's
//! benchmark (<https://www.cs.virginia.edu/stream/ref.html>):
//!
//! | kernel | operation            | bytes counted per element |
//! |--------|----------------------|---------------------------|
//! | Copy   | `c[i] = a[i]`        | 16 (2 arrays × 8)         |
//! | Scale  | `b[i] = s × c[i]`    | 16                        |
//! | Add    | `c[i] = a[i] + b[i]` | 24 (3 arrays × 8)         |
//! | Triad  | `a[i] = b[i] + s × c[i]` | 24                    |
//!
//! As in STREAM: f64 arrays, each at least 4× the last-level cache (so no kernel
//! runs from cache), the first pass discarded, the *best* rate of the remaining
//! passes reported (min time), GB/s = 10^9 bytes/s, and the arrays checked against
//! the closed-form expected values afterwards (write-allocate traffic is not counted,
//! exactly as STREAM does not count it).
//!
//! Multi-threaded runs split each array into one contiguous chunk per thread; each
//! thread first-touches (initializes) its own chunk, so on NUMA machines its pages
//! live on its node, as OpenMP static scheduling does in STREAM.

use crate::units::{Bytes, Gbps};
use serde::{Deserialize, Serialize};
use std::sync::Barrier;
use std::time::Instant;

/// The scalar STREAM uses.
pub const SCALAR: f64 = 3.0;
/// Fallback array size when the OS does not report the last-level cache.
pub const FALLBACK_ARRAY_BYTES: u64 = 256 << 20;
/// STREAM's validation tolerance for f64 (`epsilon = 1.e-13`).
pub const EPSILON: f64 = 1e-13;

/// One of STREAM's four kernels.
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
}

impl Kernel {
    /// All four, in STREAM's order.
    pub const ALL: [Kernel; 4] = [Kernel::Copy, Kernel::Scale, Kernel::Add, Kernel::Triad];

    /// Arrays touched per element (STREAM's byte-count convention: 2, 2, 3, 3).
    pub fn arrays(self) -> u64 {
        match self {
            Kernel::Copy | Kernel::Scale => 2,
            Kernel::Add | Kernel::Triad => 3,
        }
    }
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Copy => "copy",
            Kernel::Scale => "scale",
            Kernel::Add => "add",
            Kernel::Triad => "triad",
        }
    }
    /// Parses a name.
    pub fn parse(s: &str) -> Option<Kernel> {
        Kernel::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
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
    /// Kernels to run each pass. The arrays evolve as in STREAM only when all four
    /// run; validation simulates whatever subset runs.
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
}

impl StreamConfig {
    /// STREAM's sizing rule: each array ≥ 4× the last-level cache (`llc`), or
    /// [`FALLBACK_ARRAY_BYTES`] when the cache size is unknown; 10 passes; all kernels.
    pub fn standard(llc: Option<Bytes>, threads: usize) -> StreamConfig {
        let bytes = llc.map_or(FALLBACK_ARRAY_BYTES, |l| (4 * l.0).max(32 << 20));
        StreamConfig {
            n_elements: (bytes / 8) as usize,
            threads: threads.max(1),
            passes: 10,
            kernels: Kernel::ALL.to_vec(),
        }
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

    /// Bytes of one array.
    pub fn array_bytes(&self) -> Bytes {
        Bytes(self.n_elements as u64 * 8)
    }
}

/// Result of one kernel at one thread count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelResult {
    /// The kernel.
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
    /// One entry per kernel, in run order.
    pub kernels: Vec<KernelResult>,
    /// The arrays held the expected values afterwards (a failed check is an error, so
    /// this is always `true` in a returned result; it is stored for the record).
    pub validated: bool,
}

impl StreamResult {
    /// The result for `k`, when it ran.
    pub fn kernel(&self, k: Kernel) -> Option<&KernelResult> {
        self.kernels.iter().find(|r| r.kernel == k)
    }
}

#[inline(never)]
fn run_kernel(k: Kernel, a: &mut [f64], b: &mut [f64], c: &mut [f64]) {
    match k {
        Kernel::Copy => c.iter_mut().zip(a.iter()).for_each(|(c, a)| *c = *a),
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
    }
}

fn init_chunk(chunk: &mut [std::mem::MaybeUninit<f64>], v: f64) -> &mut [f64] {
    for x in chunk.iter_mut() {
        x.write(v);
    }
    // SAFETY: every element was written just above.
    unsafe { &mut *(chunk as *mut [std::mem::MaybeUninit<f64>] as *mut [f64]) }
}

/// Runs STREAM. Cost: `3 × n_elements × 8` bytes of memory and
/// `(passes + 1) × kernels` sweeps over the arrays.
///
/// # Errors
/// [`StreamError::Config`] for zero sizes or threads; [`StreamError::Validation`]
/// when the arrays do not hold STREAM's expected values afterwards.
pub fn run(cfg: &StreamConfig) -> Result<StreamResult, StreamError> {
    if cfg.n_elements == 0 || cfg.threads == 0 || cfg.passes == 0 || cfg.kernels.is_empty() {
        return Err(StreamError::Config(format!(
            "n_elements, threads, passes and kernels must be non-zero: {cfg:?}"
        )));
    }
    let n = cfg.n_elements;
    let t = cfg.threads.min(n);
    let chunk = n.div_ceil(t);
    let mut a: Vec<f64> = Vec::with_capacity(n);
    let mut b: Vec<f64> = Vec::with_capacity(n);
    let mut c: Vec<f64> = Vec::with_capacity(n);
    let n_passes = cfg.passes + 1; // first pass discarded
    let barrier = Barrier::new(t);
    let mut times = vec![vec![0u64; n_passes]; cfg.kernels.len()];
    {
        let a_chunks = a.spare_capacity_mut()[..n].chunks_mut(chunk);
        let b_chunks = b.spare_capacity_mut()[..n].chunks_mut(chunk);
        let c_chunks = c.spare_capacity_mut()[..n].chunks_mut(chunk);
        let barrier = &barrier;
        let kernels = &cfg.kernels;
        std::thread::scope(|s| {
            let mut handles = Vec::new();
            for (i, ((ac, bc), cc)) in a_chunks.zip(b_chunks).zip(c_chunks).enumerate() {
                handles.push(s.spawn(move || {
                    // STREAM's initialization: a = 1, b = 2, c = 0, then a = 2a (first touch).
                    let a = init_chunk(ac, 1.0);
                    let b = init_chunk(bc, 2.0);
                    let c = init_chunk(cc, 0.0);
                    a.iter_mut().for_each(|x| *x *= 2.0);
                    let mut my_times = vec![vec![0u64; n_passes]; kernels.len()];
                    for pass in 0..n_passes {
                        for (ki, &k) in kernels.iter().enumerate() {
                            barrier.wait();
                            let t0 = Instant::now();
                            run_kernel(k, a, b, c);
                            barrier.wait();
                            if i == 0 {
                                my_times[ki][pass] = t0.elapsed().as_nanos() as u64;
                            }
                        }
                    }
                    my_times
                }));
            }
            for (i, h) in handles.into_iter().enumerate() {
                let r = h.join().expect("stream worker panicked");
                if i == 0 {
                    times = r;
                }
            }
        });
    }
    // SAFETY: the threads initialized every element of [0, n) (the chunks cover it).
    unsafe {
        a.set_len(n);
        b.set_len(n);
        c.set_len(n);
    }
    validate(cfg, &a, &b, &c)?;
    let kernels = cfg
        .kernels
        .iter()
        .zip(times)
        .map(|(&k, ts)| {
            let samples_ns: Vec<u64> = ts[1..].to_vec();
            let bytes = (k.arrays() * 8 * n as u64) as f64;
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
        })
        .collect();
    Ok(StreamResult {
        config: cfg.clone(),
        kernels,
        validated: true,
    })
}

/// Expected `(a, b, c)` after the run, from STREAM's scalar recurrence
/// (`checkSTREAMresults`).
pub fn expected_values(cfg: &StreamConfig) -> (f64, f64, f64) {
    let (mut a, mut b, mut c) = (2.0f64, 2.0f64, 0.0f64);
    for _ in 0..cfg.passes + 1 {
        for &k in &cfg.kernels {
            match k {
                Kernel::Copy => c = a,
                Kernel::Scale => b = SCALAR * c,
                Kernel::Add => c = a + b,
                Kernel::Triad => a = b + SCALAR * c,
            }
        }
    }
    (a, b, c)
}

fn validate(cfg: &StreamConfig, a: &[f64], b: &[f64], c: &[f64]) -> Result<(), StreamError> {
    let (ea, eb, ec) = expected_values(cfg);
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
    fn byte_counting_is_streams() {
        assert_eq!(Kernel::ALL.map(Kernel::arrays), [2, 2, 3, 3]);
    }

    #[test]
    fn expected_values_match_stream_c() {
        // stream.c with NTIMES = 2 (all four kernels): hand-iterated
        // pass 1: c=2, b=6, c=8, a=6+24=30; pass 2: c=30, b=90, c=120, a=90+360=450.
        let cfg = StreamConfig {
            n_elements: 10,
            threads: 1,
            passes: 1,
            kernels: Kernel::ALL.to_vec(),
        };
        assert_eq!(expected_values(&cfg), (450.0, 90.0, 120.0));
    }

    #[test]
    fn small_run_validates_on_several_threads() {
        for threads in [1, 3] {
            let cfg = StreamConfig {
                n_elements: 10_007,
                threads,
                passes: 3,
                kernels: Kernel::ALL.to_vec(),
            };
            let r = run(&cfg).unwrap();
            assert!(r.validated);
            assert_eq!(r.kernels.len(), 4);
            for k in &r.kernels {
                assert_eq!(k.samples_ns.len(), 3, "first pass is discarded");
                assert!(k.best_gbps.0 >= k.avg_gbps.0 && k.avg_gbps.0 >= k.worst_gbps.0);
            }
        }
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
        assert_eq!(expected_values(&cfg), (2.0, 2.0, 0.0));
        assert!(run(&cfg).is_ok());
    }

    #[test]
    fn sizing_rule_is_four_times_llc() {
        let c = StreamConfig::standard(Some(Bytes(32 << 20)), 2);
        assert_eq!(c.array_bytes(), Bytes(128 << 20));
        assert_eq!(
            StreamConfig::standard(None, 2).array_bytes(),
            Bytes(FALLBACK_ARRAY_BYTES)
        );
        assert!(run(&StreamConfig { n_elements: 0, ..c }).is_err());
    }
}
