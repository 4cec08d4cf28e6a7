//! GGUF tensors → MLX arrays: each tensor is dequantized to f32 with ggml's own
//! `to_float` (the type traits of the llama.cpp memwall links, so every GGUF type
//! llama.cpp reads is read the same way here), then held as f16 or quantized by MLX
//! (`quantize`, group 64, affine: the mlx-4bit / mlx-8bit arms).

use super::MlxError;
use crate::probe::gguf::{Gguf, TensorInfo};
use mlx_rs::{Array, Dtype};
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

/// A matrix `[out, in]` (PyTorch `Linear` layout) as the engine holds it.
pub enum Matrix {
    /// Plain f16.
    Dense(Array),
    /// MLX affine quantization along `in`.
    Quantized {
        /// Packed weights (`u32`).
        w: Array,
        /// Per-group scales.
        scales: Array,
        /// Per-group biases.
        biases: Array,
        /// 4 or 8.
        bits: i32,
    },
}

impl Matrix {
    /// `x @ self^T` for `x` of shape `[.., in]`.
    pub fn apply(&self, x: &Array) -> Result<Array, mlx_rs::error::Exception> {
        match self {
            Matrix::Dense(w) => x.matmul(w.t()),
            Matrix::Quantized {
                w,
                scales,
                biases,
                bits,
            } => mlx_rs::ops::quantized_matmul(x, w, scales, biases, true, GROUP_SIZE, *bits),
        }
    }

    /// Rows `ids` (an embedding lookup), dequantized to f32, shape `[n, in]`.
    pub fn rows(&self, ids: &Array) -> Result<Array, mlx_rs::error::Exception> {
        match self {
            Matrix::Dense(w) => w.take_axis(ids, 0)?.as_dtype(Dtype::Float32),
            Matrix::Quantized {
                w,
                scales,
                biases,
                bits,
            } => mlx_rs::ops::dequantize(
                w.take_axis(ids, 0)?,
                scales.take_axis(ids, 0)?,
                &biases.take_axis(ids, 0)?,
                GROUP_SIZE,
                *bits,
            )?
            .as_dtype(Dtype::Float32),
        }
    }

    /// Bytes of the arrays held (weights + scales + biases).
    pub fn nbytes(&self) -> u64 {
        match self {
            Matrix::Dense(w) => w.nbytes() as u64,
            Matrix::Quantized {
                w, scales, biases, ..
            } => (w.nbytes() + scales.nbytes() + biases.nbytes()) as u64,
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

    /// A 1-D tensor (norm weight, bias) as an f32 array.
    pub fn vector(&mut self, name: &str) -> Result<Array, MlxError> {
        let (v, shape) = self.f32(name)?;
        Ok(Array::from_slice(&v, &shape))
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
        let m = match quant.bits() {
            None => Matrix::Dense(w),
            Some(bits) => {
                let (w, scales, biases) =
                    mlx_rs::ops::quantize(&w, GROUP_SIZE, bits).map_err(mlx_err)?;
                Matrix::Quantized {
                    w,
                    scales,
                    biases,
                    bits,
                }
            }
        };
        match &m {
            Matrix::Dense(w) => w.eval(),
            Matrix::Quantized {
                w, scales, biases, ..
            } => mlx_rs::transforms::eval([w, scales, biases]),
        }
        .map_err(mlx_err)?;
        Ok(m)
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
    if out.len() % blck != 0 || raw.len() != out.len() / blck * traits.type_size {
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
