//! GGUF tensors → MLX arrays: each tensor is dequantized to f32 with ggml's own
//! `to_float` (the type traits of the llama.cpp memwall links, so every GGUF type
//! llama.cpp reads is read the same way here), then held as f16 or quantized by MLX
//! (`quantize`, group 64, affine: the mlx-4bit / mlx-8bit arms).

use super::MlxError;
use crate::probe::gguf::{Gguf, TensorInfo};
use mlx_rs::ops::indexing::IndexOp;
use mlx_rs::{Array, Device, Dtype, Stream};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

/// How the engine holds its matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MlxQuant {
    /// f16 weights (the agreement check's arm).
    F16,
    /// MLX affine 8-bit, group 64 (`mlx-8bit`).
    Q8,
    /// MLX affine 4-bit, group 64 (`mlx-4bit`).
    Q4,
}

/// MLX's quantization group size for both quantized arms (mlx-lm's default).
pub const GROUP_SIZE: i32 = 64;

impl MlxQuant {
    /// The arm's name: `mlx-f16`, `mlx-8bit`, `mlx-4bit`.
    pub fn name(self) -> &'static str {
        match self {
            MlxQuant::F16 => "mlx-f16",
            MlxQuant::Q8 => "mlx-8bit",
            MlxQuant::Q4 => "mlx-4bit",
        }
    }

    /// The arm of an MLX engine kind (llama.cpp's kind, which MLX does not run,
    /// maps to the default 4-bit arm: [`crate::measure::engine::Model::load`] only
    /// asks for MLX kinds).
    pub fn of(kind: crate::measure::engine::EngineKind) -> MlxQuant {
        use crate::measure::engine::EngineKind;
        match kind {
            EngineKind::Mlx8bit => MlxQuant::Q8,
            EngineKind::MlxF16 => MlxQuant::F16,
            EngineKind::Mlx4bit | EngineKind::Llama => MlxQuant::Q4,
        }
    }

    /// Parses `f16`, `8bit`/`q8`, `4bit`/`q4` (with or without the `mlx-` prefix).
    pub fn from_name(s: &str) -> Option<MlxQuant> {
        match s.trim().trim_start_matches("mlx-") {
            "f16" => Some(MlxQuant::F16),
            "8bit" | "q8" | "8" => Some(MlxQuant::Q8),
            "4bit" | "q4" | "4" => Some(MlxQuant::Q4),
            _ => None,
        }
    }

    fn bits(self) -> Option<i32> {
        match self {
            MlxQuant::F16 => None,
            MlxQuant::Q8 => Some(8),
            MlxQuant::Q4 => Some(4),
        }
    }
}

/// MLX's CPU back end runs every op of a stream on that stream's one thread, and its
/// quantized matmul is a scalar loop: one stream decodes at ≈ 3 GFLOP/s here, on one
/// core. The engine therefore splits each quantized matrix by output rows into one
/// shard per lane (an MLX CPU stream of its own, one per physical core) and
/// concatenates the shards' products: every output element is the same loop over
/// the same weights, so the result is bit-identical to one unsplit matmul (tested),
/// and the lanes' threads run at once. MLX's streams belong to the thread that made
/// them, so each thread driving an engine makes its own lanes on first use. On macOS
/// (Metal) and wherever the default device is not the CPU, there is one lane: the
/// default stream.
fn with_lanes<T>(f: impl FnOnce(&[Option<Stream>]) -> T) -> T {
    thread_local! {
        static LANES: Vec<Option<Stream>> = {
            let n = n_lanes();
            if n == 1 {
                vec![None]
            } else {
                (0..n).map(|_| Some(Stream::new_with_device(&Device::cpu()))).collect()
            }
        };
    }
    LANES.with(|l| f(l))
}

/// How many lanes (and shards per quantized matrix): `MEMWALL_MLX_LANES` when set
/// (1 = MLX's own single stream, as mlx-lm runs: for a like-for-like comparison),
/// else one per physical core when MLX's default device is the CPU, else one.
/// Decided once per process.
pub fn n_lanes() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        if let Ok(v) = std::env::var("MEMWALL_MLX_LANES") {
            match v.trim().parse::<usize>() {
                Ok(n) if n >= 1 => return n.min(MAX_LANES),
                _ => tracing::warn!(
                    "MEMWALL_MLX_LANES={v:?} is not a whole number ≥ 1: ignored (one lane per physical core)"
                ),
            }
        }
        if super::device() == "cpu" {
            sysinfo::System::physical_core_count()
                .unwrap_or(1)
                .clamp(1, MAX_LANES)
        } else {
            1
        }
    })
}

/// At most this many lanes (streams, threads), however many cores.
pub const MAX_LANES: usize = 16;

/// A quantized matrix multiplying this many rows or more (a prefill chunk, a
/// perplexity window) is dequantized to f32, shard by shard, and multiplied through
/// BLAS (OpenBLAS here) instead of MLX's quantized matmul, whose cost grows with the
/// rows: measured here for a 4864×896 4-bit matrix, 512 rows took 1,468 ms quantized
/// and 27 ms dequantized (165 GFLOP/s); the two meet near 4–7 rows. Decode steps,
/// batched decode of fewer sequences and speculative verify batches (k + 1 ≤ 9 rows)
/// stay below it, so they use the very kernel a single decode step uses and their
/// logits do not depend on the batch's shape. On the CPU only: on a GPU MLX's own
/// quantized matmul kernels serve every row count.
pub const DEQUANT_ROWS: i32 = 16;

fn on_lane<T>(lane: &Option<Stream>, f: impl FnOnce() -> T) -> T {
    match lane {
        Some(s) => mlx_rs::with_stream(s, f),
        None => f(),
    }
}

/// One shard of a quantized matrix: output rows `start..start + rows`.
pub struct Shard {
    w: Array,
    scales: Array,
    biases: Array,
    start: i32,
    rows: i32,
}

/// A matrix `[out, in]` (PyTorch `Linear` layout) as the engine holds it.
pub enum Matrix {
    /// Plain f16.
    Dense(Array),
    /// MLX affine quantization along `in`, split by output rows across the lanes.
    Quantized {
        /// The shards, in row order; one per lane.
        shards: Vec<Shard>,
        /// 4 or 8.
        bits: i32,
        /// Output rows in all.
        rows: i32,
    },
}

impl Matrix {
    /// Quantizes `w` (`[out, in]`) at `bits`, split into one shard per lane.
    fn quantized(w: &Array, bits: i32) -> Result<Matrix, mlx_rs::error::Exception> {
        Matrix::quantized_in(w, bits, n_lanes())
    }

    /// As [`Matrix::quantized`], in `n` shards (taking the lanes in turn).
    fn quantized_in(w: &Array, bits: i32, n: usize) -> Result<Matrix, mlx_rs::error::Exception> {
        let (wq, scales, biases) = mlx_rs::ops::quantize(w, GROUP_SIZE, bits)?;
        let rows = w.shape()[0];
        let n = (n as i32).min(rows).max(1);
        let mut shards = Vec::with_capacity(n as usize);
        for i in 0..n {
            let (a, b) = (rows * i / n, rows * (i + 1) / n);
            // Row slices of a row-major array: views of the one quantized buffer.
            let take = |x: &Array| x.index((a..b, ..));
            shards.push(Shard {
                w: take(&wq),
                scales: take(&scales),
                biases: take(&biases),
                start: a,
                rows: b - a,
            });
        }
        mlx_rs::transforms::eval(shards.iter().flat_map(|s| [&s.w, &s.scales, &s.biases]))?;
        Ok(Matrix::Quantized { shards, bits, rows })
    }

    /// Output rows.
    pub fn out_rows(&self) -> i32 {
        match self {
            Matrix::Dense(w) => w.shape()[0],
            Matrix::Quantized { rows, .. } => *rows,
        }
    }

    /// `x @ self^T` for `x` of shape `[.., in]`.
    pub fn apply(&self, x: &Array) -> Result<Array, mlx_rs::error::Exception> {
        match self {
            Matrix::Dense(w) => x.matmul(w.t()),
            Matrix::Quantized { shards, bits, .. } => {
                let shape = x.shape();
                let m: i32 = shape[..shape.len() - 1].iter().product();
                let mut outs = Vec::with_capacity(shards.len());
                with_lanes(|lanes| -> Result<(), mlx_rs::error::Exception> {
                    for (s, lane) in shards.iter().zip(lanes.iter().cycle()) {
                        outs.push(on_lane(lane, || {
                            if m >= DEQUANT_ROWS && super::device() == "cpu" {
                                // f32 scales and biases: the weights come out
                                // as scale × q + bias in f32, not rounded to f16.
                                let w = mlx_rs::ops::dequantize(
                                    &s.w,
                                    s.scales.as_dtype(Dtype::Float32)?,
                                    &s.biases.as_dtype(Dtype::Float32)?,
                                    GROUP_SIZE,
                                    *bits,
                                )?;
                                x.matmul(w.t())
                            } else {
                                mlx_rs::ops::quantized_matmul(
                                    x, &s.w, &s.scales, &s.biases, true, GROUP_SIZE, *bits,
                                )
                            }
                        })?);
                    }
                    Ok(())
                })?;
                if outs.len() == 1 {
                    Ok(outs.pop().expect("one shard"))
                } else {
                    mlx_rs::ops::concatenate(&outs, -1)
                }
            }
        }
    }

    /// Rows `ids` (an embedding lookup), dequantized to `dtype`, shape `[n, in]`.
    pub fn rows(&self, ids: &[i32], dtype: Dtype) -> Result<Array, mlx_rs::error::Exception> {
        let n = ids.len() as i32;
        match self {
            Matrix::Dense(w) => w
                .take_axis(Array::from_slice(ids, &[n]), 0)?
                .as_dtype(dtype),
            Matrix::Quantized { shards, bits, .. } => {
                // Each shard dequantizes the rows it holds; `order` puts them back.
                let mut parts = Vec::new();
                let mut order = vec![0i32; ids.len()];
                let mut k = 0i32;
                for s in shards {
                    let mut local = Vec::new();
                    for (p, &id) in ids.iter().enumerate() {
                        if (s.start..s.start + s.rows).contains(&id) {
                            local.push(id - s.start);
                            order[p] = k;
                            k += 1;
                        }
                    }
                    if local.is_empty() {
                        continue;
                    }
                    let l = Array::from_slice(&local, &[local.len() as i32]);
                    parts.push(mlx_rs::ops::dequantize(
                        s.w.take_axis(&l, 0)?,
                        s.scales.take_axis(&l, 0)?,
                        &s.biases.take_axis(&l, 0)?,
                        GROUP_SIZE,
                        *bits,
                    )?);
                }
                if k != n {
                    return Err(mlx_rs::error::Exception::custom(format!(
                        "token id out of range 0..{}",
                        self.out_rows()
                    )));
                }
                let all = if parts.len() == 1 {
                    parts.pop().expect("one part")
                } else {
                    mlx_rs::ops::concatenate(&parts, 0)?
                };
                all.take_axis(Array::from_slice(&order, &[n]), 0)?
                    .as_dtype(dtype)
            }
        }
    }

    /// Rows at the token ids of `ids` (an embedding lookup on the device: the ids
    /// need not be evaluated), dequantized to `dtype`, shape `[n, in]`; the same
    /// values as [`Matrix::rows`]. `None` for a matrix split into several shards
    /// (the CPU's lanes), whose lookup needs the ids on the host.
    pub fn rows_on_device(
        &self,
        ids: &Array,
        dtype: Dtype,
    ) -> Result<Option<Array>, mlx_rs::error::Exception> {
        match self {
            Matrix::Dense(w) => Ok(Some(w.take_axis(ids, 0)?.as_dtype(dtype)?)),
            Matrix::Quantized { shards, bits, .. } if shards.len() == 1 => {
                let s = &shards[0];
                let rows = mlx_rs::ops::dequantize(
                    s.w.take_axis(ids, 0)?,
                    s.scales.take_axis(ids, 0)?,
                    &s.biases.take_axis(ids, 0)?,
                    GROUP_SIZE,
                    *bits,
                )?;
                Ok(Some(rows.as_dtype(dtype)?))
            }
            Matrix::Quantized { .. } => Ok(None),
        }
    }

    /// Bytes of one output row of the arrays held (its weights and its groups'
    /// scales and biases): what gathering one row (an embedding lookup) reads.
    pub fn row_bytes(&self) -> u64 {
        match self.out_rows() {
            0 => 0,
            rows => self.nbytes() / rows as u64,
        }
    }

    /// Bytes of the arrays held (weights + scales + biases).
    pub fn nbytes(&self) -> u64 {
        match self {
            Matrix::Dense(w) => w.nbytes() as u64,
            Matrix::Quantized { shards, .. } => shards
                .iter()
                .map(|s| (s.w.nbytes() + s.scales.nbytes() + s.biases.nbytes()) as u64)
                .sum(),
        }
    }
}

/// Reads tensors of one GGUF file.
pub struct TensorReader<'a> {
    gguf: &'a Gguf,
    file: File,
}

impl<'a> TensorReader<'a> {
    /// Opens the file behind `gguf` (already checked by memwall's reader).
    pub fn new(gguf: &'a Gguf) -> Result<Self, MlxError> {
        let file = File::open(&gguf.path).map_err(|e| MlxError::Weights {
            path: gguf.path.display().to_string(),
            tensor: String::new(),
            reason: format!("cannot open: {e}"),
        })?;
        Ok(TensorReader { gguf, file })
    }

    fn info(&self, name: &str) -> Result<&'a TensorInfo, MlxError> {
        self.gguf.tensor(name).ok_or_else(|| MlxError::Weights {
            path: self.gguf.path.display().to_string(),
            tensor: name.into(),
            reason: "tensor missing (is this a Qwen2 GGUF?)".into(),
        })
    }

    /// Whether the file has a tensor `name`.
    pub fn has(&self, name: &str) -> bool {
        self.gguf.tensor(name).is_some()
    }

    /// Tensor `name` as f32 values (row-major, ggml `ne0` fastest) and its shape with
    /// the slowest dimension first (ggml `ne` reversed).
    pub fn f32(&mut self, name: &str) -> Result<(Vec<f32>, Vec<i32>), MlxError> {
        let info = self.info(name)?;
        let err = |reason: String| MlxError::Weights {
            path: self.gguf.path.display().to_string(),
            tensor: name.into(),
            reason,
        };
        let n = info.n_elements() as usize;
        let bytes = info.n_bytes().0 as usize;
        let mut raw = vec![0u8; bytes];
        self.file
            .seek(SeekFrom::Start(self.gguf.data_offset + info.offset))
            .and_then(|_| self.file.read_exact(&mut raw))
            .map_err(|e| err(format!("cannot read {bytes} bytes: {e}")))?;
        let mut out = vec![0f32; n];
        to_f32(info.ggml_type.0, &raw, &mut out).map_err(err)?;
        let shape = info.dims.iter().rev().map(|&d| d as i32).collect();
        Ok((out, shape))
    }

    /// A 1-D tensor (norm weight, bias) as an array of `dtype` (the activations').
    pub fn vector(&mut self, name: &str, dtype: Dtype) -> Result<Array, MlxError> {
        let (v, shape) = self.f32(name)?;
        let a = Array::from_slice(&v, &shape);
        if dtype == Dtype::Float32 {
            return Ok(a);
        }
        let err = |e: mlx_rs::error::Exception| MlxError::Weights {
            path: self.gguf.path.display().to_string(),
            tensor: name.into(),
            reason: e.to_string(),
        };
        let a = a.as_dtype(dtype).map_err(err)?;
        a.eval().map_err(err)?;
        Ok(a)
    }

    /// A 2-D tensor as a [`Matrix`] held as `quant` says.
    pub fn matrix(&mut self, name: &str, quant: MlxQuant) -> Result<Matrix, MlxError> {
        let (v, shape) = self.f32(name)?;
        let path = self.gguf.path.display().to_string();
        let mlx_err = |e: mlx_rs::error::Exception| MlxError::Weights {
            path: path.clone(),
            tensor: name.into(),
            reason: e.to_string(),
        };
        let w = Array::from_slice(&v, &shape)
            .as_dtype(Dtype::Float16)
            .map_err(mlx_err)?;
        drop(v);
        match quant.bits() {
            None => {
                w.eval().map_err(mlx_err)?;
                Ok(Matrix::Dense(w))
            }
            Some(bits) => Matrix::quantized(&w, bits).map_err(mlx_err),
        }
    }
}

/// Dequantizes `raw` (ggml type `ty`) into `out` with llama.cpp's `to_float`.
pub fn to_f32(ty: u32, raw: &[u8], out: &mut [f32]) -> Result<(), String> {
    if ty == 0 {
        // F32: ggml has no to_float for it.
        if raw.len() != out.len() * 4 {
            return Err(format!(
                "F32 tensor of {} bytes for {} values",
                raw.len(),
                out.len()
            ));
        }
        for (o, c) in out.iter_mut().zip(raw.chunks_exact(4)) {
            *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        return Ok(());
    }
    // SAFETY: a table lookup; the returned pointer is to a static struct (or null).
    let traits = unsafe { llama_cpp_sys_2::ggml_get_type_traits(ty as _) };
    let Some(traits) = (unsafe { traits.as_ref() }) else {
        return Err(format!("ggml type {ty} unknown to this llama.cpp"));
    };
    let Some(to_float) = traits.to_float else {
        return Err(format!("ggml type {ty} has no to_float"));
    };
    let blck = traits.blck_size.max(1) as usize;
    if !out.len().is_multiple_of(blck) || raw.len() != out.len() / blck * traits.type_size {
        return Err(format!(
            "{} bytes for {} values of ggml type {ty} (block {blck}, {} bytes a block)",
            raw.len(),
            out.len(),
            traits.type_size
        ));
    }
    // SAFETY: sizes checked above: `raw` holds out.len()/blck whole blocks.
    unsafe { to_float(raw.as_ptr().cast(), out.as_mut_ptr(), out.len() as i64) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic `[rows, cols]` f16 matrix with values in about ±1.
    fn matrix(rows: i32, cols: i32, seed: u32) -> Array {
        let v: Vec<f32> = (0..rows * cols)
            .map(|i| {
                let x = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8;
                (x % 2001) as f32 / 1000.0 - 1.0
            })
            .collect();
        Array::from_slice(&v, &[rows, cols])
            .as_dtype(Dtype::Float16)
            .unwrap()
    }

    fn to_vec(a: &Array) -> Vec<f32> {
        let a = a.as_dtype(Dtype::Float32).unwrap();
        a.eval().unwrap();
        a.as_slice::<f32>().to_vec()
    }

    #[test]
    fn sharded_matrices_multiply_bit_identically_to_one_quantized_matmul() {
        let (rows, cols) = (301, 256);
        let w = matrix(rows, cols, 7);
        for bits in [4, 8] {
            let (wq, scales, biases) = mlx_rs::ops::quantize(&w, GROUP_SIZE, bits).unwrap();
            let whole = |x: &Array| {
                mlx_rs::ops::quantized_matmul(x, &wq, &scales, &biases, true, GROUP_SIZE, bits)
                    .unwrap()
            };
            for n in [1, 2, 3] {
                let m = Matrix::quantized_in(&w, bits, n).unwrap();
                assert_eq!(m.out_rows(), rows);
                let Matrix::Quantized { shards, .. } = &m else {
                    panic!("quantized")
                };
                assert_eq!(shards.len(), n);
                assert_eq!(shards.iter().map(|s| s.rows).sum::<i32>(), rows);
                // Bytes held: the unsplit arrays' bytes, whatever the split.
                assert_eq!(
                    m.nbytes(),
                    (wq.nbytes() + scales.nbytes() + biases.nbytes()) as u64
                );
                // Below DEQUANT_ROWS: the same kernel per output element, bit for bit.
                for r in [1, 7] {
                    let x = matrix(r, cols, 11).as_dtype(Dtype::Float32).unwrap();
                    assert_eq!(
                        to_vec(&m.apply(&x).unwrap()),
                        to_vec(&whole(&x)),
                        "{bits} bits, {n} shards, {r} rows"
                    );
                }
                // At or above it: dequantized f32 through BLAS, equal to the quantized
                // matmul up to f32 summation order.
                let x = matrix(DEQUANT_ROWS + 3, cols, 13)
                    .as_dtype(Dtype::Float32)
                    .unwrap();
                let (a, b) = (to_vec(&m.apply(&x).unwrap()), to_vec(&whole(&x)));
                assert_eq!(a.len(), ((DEQUANT_ROWS + 3) * rows) as usize);
                let worst = a
                    .iter()
                    .zip(&b)
                    .map(|(p, q)| (p - q).abs())
                    .fold(0f32, f32::max);
                assert!(worst < 1e-3, "{bits} bits, {n} shards: max |diff| {worst}");
                // Embedding rows across shard borders come back in the asked order,
                // equal to dequantizing the whole matrix and taking them.
                let ids = [300, 0, 150, 100, 101, 200, 0];
                let full = mlx_rs::ops::dequantize(&wq, &scales, &biases, GROUP_SIZE, bits)
                    .unwrap()
                    .take_axis(Array::from_slice(&ids, &[ids.len() as i32]), 0)
                    .unwrap();
                assert_eq!(
                    to_vec(&m.rows(&ids, Dtype::Float32).unwrap()),
                    to_vec(&full)
                );
                assert!(m.rows(&[rows], Dtype::Float32).is_err());
                // The device lookup (ids as an array, as a greedy step's argmax
                // leaves them): the same rows from one shard; several shards defer
                // to the host lookup.
                let dev = m
                    .rows_on_device(
                        &Array::from_slice(&ids, &[ids.len() as i32]),
                        Dtype::Float32,
                    )
                    .unwrap();
                if n == 1 {
                    assert_eq!(to_vec(&dev.expect("one shard")), to_vec(&full));
                } else {
                    assert!(dev.is_none(), "{n} shards");
                }
            }
        }
    }
}
