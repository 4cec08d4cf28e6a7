//! Stage 1, **probe**: what this machine and this model are, read without measuring.
//!
//! - [`hw`]: CPU, cores, memory, caches, GPUs, power source, thermal state (one `cfg`'d
//!   module per OS).
//! - [`cuda`]: NVIDIA GPUs as the CUDA driver lists them (loaded at run time);
//!   [`topology`]: how they are connected (NVLink or PCIe), as NVML reports it.
//! - [`gguf`]: the hostile-input GGUF header reader; [`model`]: the facts the roofline
//!   needs (bytes streamed per decode step, KV bytes per token, FLOPs).
//! - [`shape`] and [`synth`]: model shapes and shape-exact synthetic GGUF files.
//! - [`catalog`], [`devices`], [`datasets`]: the built-in model, device and data-set
//!   catalogues and their sha256-checked fetchers.
//!
//! Imports nothing from a later stage.

pub mod catalog;
pub mod cuda;
pub mod datasets;
pub mod devices;
pub mod gguf;
pub mod hw;
pub mod model;
pub mod shape;
pub mod synth;
pub mod topology;
