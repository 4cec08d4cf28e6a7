//! Loading a model over several GPUs: llama.cpp's `split_mode` and `tensor_split`
//! (`llama_model_params`; llama-bench's `-sm` and `-ts`). llama-cpp-2 0.1.160 has a
//! setter for the split mode but none for the tensor split, so a model with a split
//! other than llama.cpp's default is loaded through the C API, as
//! [`LlamaModelHandle::load_no_repack_ngl`] is.

use super::{LlamaModelHandle, backend, check_model};
use crate::measure::engine::EngineError;
use crate::roofline::multi_gpu::{GpuSplit, SplitMode};
use std::path::Path;
use std::sync::Arc;

/// The GPUs llama.cpp sees: its registered devices of type GPU (discrete or
/// integrated); 0 on a CPU-only build.
pub fn gpu_count() -> usize {
    // SAFETY: registry queries with indices below the count.
    unsafe {
        (0..llama_cpp_sys_2::ggml_backend_dev_count())
            .filter(|&i| {
                let t = llama_cpp_sys_2::ggml_backend_dev_type(
                    llama_cpp_sys_2::ggml_backend_dev_get(i),
                );
                t == llama_cpp_sys_2::GGML_BACKEND_DEVICE_TYPE_GPU
                    || t == llama_cpp_sys_2::GGML_BACKEND_DEVICE_TYPE_IGPU
            })
            .count()
    }
}

fn split_mode(m: SplitMode) -> llama_cpp_sys_2::llama_split_mode {
    match m {
        SplitMode::None => llama_cpp_sys_2::LLAMA_SPLIT_MODE_NONE,
        SplitMode::Layer => llama_cpp_sys_2::LLAMA_SPLIT_MODE_LAYER,
        SplitMode::Row => llama_cpp_sys_2::LLAMA_SPLIT_MODE_ROW,
    }
}

impl LlamaModelHandle {
    /// Loads the model at `path` with `n_gpu_layers` offloaded, split over the GPUs
    /// as `split` says, with llama.cpp's weight repacking on or off (`repack`; see
    /// [`LlamaModelHandle::load_no_repack`]). llama.cpp's defaults (layer split,
    /// default tensor split) take the usual loaders.
    ///
    /// # Errors
    /// [`EngineError::Setup`] naming the flag when the split does not fit the GPUs
    /// llama.cpp sees ([`GpuSplit::check_devices`]); as [`LlamaModelHandle::load`]
    /// otherwise.
    pub fn load_split(
        path: &Path,
        n_gpu_layers: u32,
        repack: bool,
        split: &GpuSplit,
    ) -> Result<LlamaModelHandle, EngineError> {
        if split.is_default() {
            return if repack {
                Self::load(path, n_gpu_layers)
            } else {
                Self::load_no_repack_ngl(path, n_gpu_layers)
            };
        }
        check_model(path)?;
        let _backend = backend()?;
        split
            .validate()
            .and_then(|()| split.check_devices(gpu_count()))
            .map_err(|e| EngineError::Setup(e.to_string()))?;
        let load_err = |reason: String| EngineError::Load {
            path: path.display().to_string(),
            reason,
        };
        let cpath = std::ffi::CString::new(path.to_string_lossy().as_bytes())
            .map_err(|e| load_err(format!("path has a NUL byte: {e}")))?;
        // llama.cpp copies llama_max_devices() floats from the pointer (and keeps its
        // own copy): the buffer has at least that many.
        // SAFETY: a plain query.
        let max = unsafe { llama_cpp_sys_2::llama_max_devices() };
        let mut ts = vec![0.0f32; max.max(split.tensor_split.0.len())];
        ts[..split.tensor_split.0.len()].copy_from_slice(&split.tensor_split.0);
        // SAFETY: plain C calls; `cpath` and `ts` outlive the call; the returned
        // pointer is owned by the `LlamaModel` built below, which frees it on drop.
        let raw = unsafe {
            let mut p = llama_cpp_sys_2::llama_model_default_params();
            p.n_gpu_layers = n_gpu_layers.min(i32::MAX as u32) as i32;
            p.use_extra_bufts = repack;
            p.split_mode = split_mode(split.mode);
            if !split.tensor_split.is_default() {
                p.tensor_split = ts.as_ptr();
            }
            llama_cpp_sys_2::llama_model_load_from_file(cpath.as_ptr(), p)
        };
        let nn = std::ptr::NonNull::new(raw).ok_or_else(|| {
            load_err(format!(
                "llama.cpp returned no model with --split-mode {} --tensor-split {} (does the model fit the GPUs? MEMWALL_LLAMA_LOG=1 shows llama.cpp's reason)",
                split.mode.name(),
                split.tensor_split.llama_bench_text()
            ))
        })?;
        // SAFETY: `LlamaModel` is `#[repr(transparent)]` over `NonNull<llama_model>`
        // (see `load_no_repack_ngl`; the version is pinned with `=` in Cargo.toml).
        let model: llama_cpp_2::model::LlamaModel = unsafe { std::mem::transmute(nn) };
        Ok(LlamaModelHandle {
            model: Arc::new(model),
            n_gpu_layers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roofline::multi_gpu::TensorSplit;

    /// On a CPU-only build llama.cpp sees no GPU: a tensor split over two, or row
    /// split, is refused naming the flag before anything is loaded; `none` loads.
    #[cfg(not(any(feature = "cuda", feature = "metal")))]
    #[test]
    fn splits_are_checked_against_the_gpus_llama_cpp_sees() {
        backend().unwrap();
        assert_eq!(gpu_count(), 0);
        let Some(path) = crate::testing::model("smollm2-135m-q4_1") else {
            return;
        };
        let two = GpuSplit {
            mode: SplitMode::Layer,
            tensor_split: TensorSplit::parse("1,1").unwrap(),
        };
        let e = LlamaModelHandle::load_split(&path, 0, true, &two)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("--tensor-split 1.00/1.00 names 2 GPUs, llama.cpp sees 0"),
            "{e}"
        );
        let row = GpuSplit {
            mode: SplitMode::Row,
            tensor_split: TensorSplit::default(),
        };
        let e = LlamaModelHandle::load_split(&path, 0, true, &row)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("--split-mode row splits matrices over GPUs"),
            "{e}"
        );
        let _lock = crate::testing::engine_lock();
        let none = GpuSplit {
            mode: SplitMode::None,
            tensor_split: TensorSplit::default(),
        };
        let h = LlamaModelHandle::load_split(&path, 0, true, &none).unwrap();
        assert!(h.n_vocab() > 0);
    }
}
