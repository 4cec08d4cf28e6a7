//! Quantization arms: one source GGUF re-quantized by llama.cpp's own quantizer
//! (`llama_model_quantize`, through `llama-cpp-sys-2`, with `allow_requantize`),
//! cached by `(source sha256, type)`.
//!
//! **What an arm carries.** Requantizing dequantizes every tensor of the source to
//! f32 and quantizes it again. An arm *above* the source's precision (F16, Q8_0, …
//! from a Q4_K_M source) therefore carries exactly the source's information, up to
//! rounding: its quality equals the source's and it isolates the pure
//! bytes-vs-speed effect. An arm *below* the source's precision (Q3_K_M, Q2_K)
//! shows real damage. With an F16/BF16 source every arm is a true quantization.
//! [`Relation`] is computed from the measured bits per weight of the two files.
//!
//! Cache: `$MEMWALL_QUANTS` (default `~/.cache/memwall/quants`), outside git. Each
//! arm is `<source stem>.<TYPE>.<key>.gguf` plus a `.json` sidecar with its
//! provenance ([`Arm`]); `key` = the first 16 hex digits of
//! `sha256("memwall-arm-v1\0<source sha256>\0<TYPE>")`. A quantization writes to a
//! temporary name and is renamed into place after the sidecar's facts are known, so
//! a killed `quant make` leaves no arm behind.
//!
//! **MLX arms** (`mlx-8bit`, `mlx-4bit`, feature `mlx`) are made by the MLX engine
//! at load time from the source itself (each tensor dequantized by llama.cpp's
//! `to_float`, then MLX `quantize`, affine, group 64): they have no file of their
//! own. Their sidecar records the bytes of the arrays MLX holds (measured by
//! loading the source into MLX once), and their cells are measured on MLX.

use crate::measure::engine::{Engine, EngineError, EngineKind};
use crate::probe::model::ModelFacts;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The arm types of the frontier, in order of decreasing precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum QuantType {
    /// 16-bit float (`LLAMA_FTYPE_MOSTLY_F16` = 1).
    F16,
    /// 8-bit blocks of 32 (`Q8_0` = 7).
    Q8_0,
    /// 6-bit k-quant (`Q6_K` = 18).
    Q6K,
    /// 5-bit k-quant mix, medium (`Q5_K_M` = 17).
    Q5KM,
    /// 4-bit k-quant mix, medium (`Q4_K_M` = 15).
    Q4KM,
    /// 4-bit blocks of 32 (`Q4_0` = 2).
    Q4_0,
    /// 3-bit k-quant mix, medium (`Q3_K_M` = 12).
    Q3KM,
    /// 2-bit k-quant (`Q2_K` = 10).
    Q2K,
    /// MLX affine 8-bit, group 64, made from the source at load time (`mlx-8bit`).
    Mlx8bit,
    /// MLX affine 4-bit, group 64, made from the source at load time (`mlx-4bit`).
    Mlx4bit,
}

impl QuantType {
    /// The MLX arms (they need a build with the `mlx` feature).
    pub const MLX: [QuantType; 2] = [QuantType::Mlx8bit, QuantType::Mlx4bit];

    /// Every llama.cpp arm type, most precise first (the default frontier grid).
    pub const ALL: [QuantType; 8] = [
        QuantType::F16,
        QuantType::Q8_0,
        QuantType::Q6K,
        QuantType::Q5KM,
        QuantType::Q4KM,
        QuantType::Q4_0,
        QuantType::Q3KM,
        QuantType::Q2K,
    ];

    /// llama.cpp's name (`Q4_K_M`), as `llama-quantize` spells it and as
    /// [`ModelFacts::quant`] reports `general.file_type`.
    pub fn name(self) -> &'static str {
        match self {
            QuantType::F16 => "F16",
            QuantType::Q8_0 => "Q8_0",
            QuantType::Q6K => "Q6_K",
            QuantType::Q5KM => "Q5_K_M",
            QuantType::Q4KM => "Q4_K_M",
            QuantType::Q4_0 => "Q4_0",
            QuantType::Q3KM => "Q3_K_M",
            QuantType::Q2K => "Q2_K",
            QuantType::Mlx8bit => "mlx-8bit",
            QuantType::Mlx4bit => "mlx-4bit",
        }
    }

    /// The engine kind of an MLX arm (`None` for llama.cpp's types).
    pub fn mlx_engine(self) -> Option<EngineKind> {
        match self {
            QuantType::Mlx8bit => Some(EngineKind::Mlx8bit),
            QuantType::Mlx4bit => Some(EngineKind::Mlx4bit),
            _ => None,
        }
    }

    /// The `llama_ftype` value (llama.h); `None` for an MLX arm, which llama.cpp
    /// does not make.
    pub fn ftype(self) -> Option<u32> {
        Some(match self {
            QuantType::F16 => 1,
            QuantType::Q8_0 => 7,
            QuantType::Q6K => 18,
            QuantType::Q5KM => 17,
            QuantType::Q4KM => 15,
            QuantType::Q4_0 => 2,
            QuantType::Q3KM => 12,
            QuantType::Q2K => 10,
            QuantType::Mlx8bit | QuantType::Mlx4bit => return None,
        })
    }

    /// Parses llama.cpp's name or an MLX arm's (`mlx-8bit`, `mlx-4bit`),
    /// case-insensitively.
    ///
    /// # Errors
    /// [`QuantError::UnknownType`] listing the valid names.
    pub fn parse(s: &str) -> Result<QuantType, QuantError> {
        QuantType::ALL
            .into_iter()
            .chain(QuantType::MLX)
            .find(|t| t.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| QuantError::UnknownType(s.to_string()))
    }
}

impl std::fmt::Display for QuantType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Errors of quantization and the arm cache.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QuantError {
    /// Not an arm type.
    #[error(
        "unknown quantization type {0:?}: use F16, Q8_0, Q6_K, Q5_K_M, Q4_K_M, Q4_0, Q3_K_M or Q2_K (llama.cpp), or mlx-8bit, mlx-4bit (MLX)"
    )]
    UnknownType(String),
    /// llama.cpp's quantizer failed.
    #[error(
        "llama_model_quantize({input} → {ty}) failed with code {code}; run `memwall model info {input}` to check the source, or try llama-quantize on it"
    )]
    Quantize {
        /// Source file.
        input: String,
        /// Target type.
        ty: String,
        /// Return code.
        code: u32,
    },
    /// The source could not be read.
    #[error(transparent)]
    Gguf(#[from] crate::probe::gguf::GgufError),
    /// The engine back end failed to initialize.
    #[error(transparent)]
    Engine(#[from] crate::measure::engine::EngineError),
    /// No arm matches.
    #[error("no cached arm matches {0:?}: `memwall quant list` shows the keys")]
    NotFound(String),
    /// A sidecar is malformed.
    #[error("{path}: {problem}; delete the arm with `memwall quant rm` and make it again")]
    Sidecar {
        /// Path of the file the error is about.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// The build has no llama.cpp.
    #[error("this build has no llama.cpp engine (feature `llama`): cannot quantize")]
    NoEngine,
    /// An MLX arm in a build without MLX.
    #[error(
        "{0}: this memwall was built without the MLX engine: run scripts/setup-mlx.sh, then build with `--features mlx`"
    )]
    NoMlx(String),
    /// I/O.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Where an arm stands relative to its source's precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// More bits per weight than the source: carries only the source's
    /// information (quality = source's up to rounding); isolates bytes vs speed.
    Above,
    /// The source file itself.
    Source,
    /// Fewer bits per weight than the source: real quantization damage.
    Below,
}

impl Relation {
    /// Short label for tables.
    pub fn label(self) -> &'static str {
        match self {
            Relation::Above => "above source (source info only)",
            Relation::Source => "source",
            Relation::Below => "below source (real damage)",
        }
    }

    /// Compares bits per weight: `arm` vs `source`.
    pub fn of(arm_bpw: f64, source_bpw: f64, is_source: bool) -> Relation {
        if is_source {
            Relation::Source
        } else if arm_bpw > source_bpw {
            Relation::Above
        } else {
            Relation::Below
        }
    }
}

/// One arm: a GGUF file of a given type made from a source, with provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Arm {
    /// Cache key (16 hex digits), empty for the source itself.
    pub key: String,
    /// Arm type name (`Q8_0`).
    pub quant: String,
    /// The arm's file.
    pub path: PathBuf,
    /// sha256 of the arm's file.
    pub sha256: String,
    /// Size of the arm's file, bytes; for an MLX arm, the bytes of the arrays MLX
    /// holds (weights, scales and biases).
    pub file_bytes: u64,
    /// An MLX arm: the bytes one decode step streams from the arrays MLX holds
    /// ([`crate::probe::model::decode_step_bytes`], the rule llama.cpp's rows use:
    /// an untied embedding is a one-row gather). `None` for a llama.cpp arm, whose
    /// GGUF's facts say it, and in a sidecar written before this field (such an MLX
    /// arm is measured again).
    #[serde(default)]
    pub streamed_bytes: Option<u64>,
    /// Bits per weight: tensor bytes × 8 ÷ parameters.
    pub bits_per_weight: f64,
    /// The source file.
    pub source_path: PathBuf,
    /// sha256 of the source file.
    pub source_sha256: String,
    /// The source's type (`general.file_type`).
    pub source_quant: String,
    pub source_bits_per_weight: f64,
    /// Relation to the source's precision.
    pub relation: Relation,
    /// UTC RFC 3339 time the arm was made (empty for the source).
    pub made_at: String,
    /// Wall time of the quantization, ns (0 for the source).
    pub quantize_ns: u64,
    /// llama.cpp build that quantized it (MLX's build for an MLX arm).
    pub engine_build: String,
}

impl Arm {
    /// The arm's type (`None` for a source of a type outside the grid).
    pub fn quant_type(&self) -> Option<QuantType> {
        QuantType::parse(&self.quant).ok()
    }

    /// The engine kind of an MLX arm; `None` for a llama.cpp arm.
    pub fn mlx_engine(&self) -> Option<EngineKind> {
        self.quant_type().and_then(QuantType::mlx_engine)
    }

    /// The engine the arm runs on: its MLX kind, else llama.cpp.
    pub fn engine_kind(&self) -> EngineKind {
        self.mlx_engine().unwrap_or(EngineKind::Llama)
    }

    /// The sidecar of a cached arm: `<source stem>.<TYPE>.<key>.json` in
    /// [`quants_dir`] (beside the GGUF for a llama.cpp arm).
    pub fn sidecar_path(&self) -> PathBuf {
        quants_dir().join(format!(
            "{}.{}.{}.json",
            stem(&self.source_path),
            self.quant,
            self.key
        ))
    }
}

/// The arm cache directory (`$MEMWALL_QUANTS`, default `~/.cache/memwall/quants`).
pub fn quants_dir() -> PathBuf {
    crate::probe::catalog::env_dir("MEMWALL_QUANTS", "quants")
}

/// The cache key of `(source sha256, type)`: 16 hex digits of
/// `sha256("memwall-arm-v1\0<source sha256>\0<TYPE>")`.
pub fn arm_key(source_sha256: &str, ty: QuantType) -> String {
    crate::util::sha256_bytes(format!("memwall-arm-v1\0{source_sha256}\0{}", ty.name()).as_bytes())
        [..16]
        .to_string()
}

fn bpw(f: &ModelFacts) -> f64 {
    if f.n_params == 0 {
        f64::NAN
    } else {
        f.tensor_bytes.0 as f64 * 8.0 / f.n_params as f64
    }
}

/// Quantizes `input` into `output` as `ty` with llama.cpp's quantizer
/// (`llama_model_quantize_default_params()` + `ftype`, `allow_requantize = true`,
/// `nthread = threads`; 0 = all cores), exactly what `llama-quantize
/// --allow-requantize IN OUT TYPE` does.
///
/// # Errors
/// [`QuantError::Quantize`] with llama.cpp's return code.
#[cfg(feature = "llama")]
pub fn quantize_file(
    input: &Path,
    output: &Path,
    ty: QuantType,
    threads: u32,
) -> Result<(), QuantError> {
    crate::measure::engine::llama::backend()?;
    let cstr = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{}: path contains NUL", p.display()),
            )
        })
    };
    let (cin, cout) = (cstr(input)?, cstr(output)?);
    // SAFETY: the default parameters are plain data; the strings outlive the call.
    let code = unsafe {
        let mut p = llama_cpp_sys_2::llama_model_quantize_default_params();
        p.nthread = threads as i32;
        p.ftype = ty
            .ftype()
            .ok_or_else(|| QuantError::NoMlx(ty.name().into()))? as _;
        p.allow_requantize = true;
        llama_cpp_sys_2::llama_model_quantize(cin.as_ptr(), cout.as_ptr(), &p)
    };
    if code != 0 {
        return Err(QuantError::Quantize {
            input: input.display().to_string(),
            ty: ty.name().into(),
            code,
        });
    }
    Ok(())
}

/// Without llama.cpp there is no quantizer.
///
/// # Errors
/// Always [`QuantError::NoEngine`].
#[cfg(not(feature = "llama"))]
pub fn quantize_file(
    _input: &Path,
    _output: &Path,
    _ty: QuantType,
    _threads: u32,
) -> Result<(), QuantError> {
    Err(QuantError::NoEngine)
}

/// A source file with its facts and hash, computed once per frontier.
#[derive(Debug, Clone)]
pub struct Source {
    /// Path of the GGUF file as opened.
    pub path: PathBuf,
    /// Facts read from the file's GGUF header (shape, bytes per step, quant).
    pub facts: ModelFacts,
    /// sha256 of the file, hex.
    pub sha256: String,
}

impl Source {
    /// Reads the header and hashes the file (≈ 1 s per GB).
    ///
    /// # Errors
    /// [`QuantError`] naming the file.
    pub fn open(path: &Path) -> Result<Source, QuantError> {
        let facts = ModelFacts::open(path)?;
        let sha256 = crate::util::sha256_file(path)?;
        Ok(Source {
            path: path.to_path_buf(),
            facts,
            sha256,
        })
    }

    /// The arm of type `ty` when it is already available (the source itself, or a
    /// cached arm), without quantizing.
    ///
    /// # Errors
    /// [`QuantError::Sidecar`] for a malformed cache entry.
    pub fn cached(&self, ty: QuantType) -> Result<Option<Arm>, QuantError> {
        if self.facts.quant == ty.name() {
            let b = bpw(&self.facts);
            return Ok(Some(Arm {
                key: String::new(),
                quant: ty.name().into(),
                path: self.path.clone(),
                sha256: self.sha256.clone(),
                file_bytes: self.facts.file_bytes.0,
                streamed_bytes: None,
                bits_per_weight: b,
                source_path: self.path.clone(),
                source_sha256: self.sha256.clone(),
                source_quant: self.facts.quant.clone(),
                source_bits_per_weight: b,
                relation: Relation::Source,
                made_at: String::new(),
                quantize_ns: 0,
                engine_build: String::new(),
            }));
        }
        let key = arm_key(&self.sha256, ty);
        let sidecar = quants_dir().join(format!("{}.{}.{key}.json", stem(&self.path), ty.name()));
        if !sidecar.is_file() {
            return Ok(None);
        }
        let arm = read_sidecar(&sidecar)?;
        if ty.mlx_engine().is_some() {
            // No file of its own: the source is its file. A sidecar without the
            // streamed bytes (written before they were kept) is measured again.
            return Ok((arm.source_sha256 == self.sha256
                && self.path.is_file()
                && arm.streamed_bytes.is_some())
            .then_some(arm));
        }
        if !arm.path.is_file() || std::fs::metadata(&arm.path)?.len() != arm.file_bytes {
            return Ok(None);
        }
        Ok(Some(arm))
    }

    /// The arm of type `ty`: the source itself when it already is that type, a
    /// cached arm, or a fresh quantization (with `threads`; 0 = all cores).
    ///
    /// # Errors
    /// [`QuantError`].
    pub fn arm(&self, ty: QuantType, threads: u32) -> Result<Arm, QuantError> {
        if let Some(a) = self.cached(ty)? {
            return Ok(a);
        }
        let dir = quants_dir();
        std::fs::create_dir_all(&dir).map_err(|e| crate::util::with_path(e, &dir))?;
        if ty.mlx_engine().is_some() {
            return self.mlx_arm(ty);
        }
        let key = arm_key(&self.sha256, ty);
        let name = format!("{}.{}.{key}", stem(&self.path), ty.name());
        let dest = dir.join(format!("{name}.gguf"));
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".partial")
            .tempfile_in(&dir)?;
        let t0 = std::time::Instant::now();
        quantize_file(&self.path, tmp.path(), ty, threads)?;
        let quantize_ns = t0.elapsed().as_nanos() as u64;
        let facts = ModelFacts::open(tmp.path())?;
        let arm = Arm {
            key,
            quant: ty.name().into(),
            path: dest.clone(),
            sha256: crate::util::sha256_file(tmp.path())?,
            file_bytes: facts.file_bytes.0,
            streamed_bytes: None,
            bits_per_weight: bpw(&facts),
            source_path: self.path.clone(),
            source_sha256: self.sha256.clone(),
            source_quant: self.facts.quant.clone(),
            source_bits_per_weight: bpw(&self.facts),
            relation: Relation::of(bpw(&facts), bpw(&self.facts), false),
            made_at: crate::util::now_rfc3339(),
            quantize_ns,
            engine_build: crate::measure::engine::engine_build(),
        };
        crate::util::make_readable(tmp.as_file());
        tmp.persist(&dest)
            .map_err(|e| crate::util::with_path(e.error, &dest))?;
        let json = serde_json::to_vec_pretty(&arm).expect("arm serializes");
        crate::util::write_atomic(&dir.join(format!("{name}.json")), &json)?;
        Ok(arm)
    }
}

impl Source {
    /// An MLX arm: loads the source into MLX at the arm's precision once to measure
    /// the bytes of the arrays it holds, and writes the sidecar.
    fn mlx_arm(&self, ty: QuantType) -> Result<Arm, QuantError> {
        let kind = ty.mlx_engine().ok_or(QuantError::NoMlx(ty.name().into()))?;
        let t0 = std::time::Instant::now();
        let cfg = crate::measure::engine::EngineConfig {
            n_ctx: 1,
            n_batch: 1,
            ..Default::default()
        };
        let e = crate::measure::engine::open(kind, &self.path, &cfg)?;
        let held = e
            .held_model()
            .ok_or(QuantError::Engine(EngineError::Unsupported(
                "the held arrays' bytes (an MLX arm on an engine that runs the file as it is)",
            )))?;
        let engine_build = e.info().build;
        let quantize_ns = t0.elapsed().as_nanos() as u64;
        drop(e);
        let arm_bpw = if self.facts.n_params == 0 {
            f64::NAN
        } else {
            held.weight_bytes as f64 * 8.0 / self.facts.n_params as f64
        };
        let arm = Arm {
            key: arm_key(&self.sha256, ty),
            quant: ty.name().into(),
            path: self.path.clone(),
            sha256: self.sha256.clone(),
            file_bytes: held.weight_bytes,
            streamed_bytes: Some(held.streamed_bytes),
            bits_per_weight: arm_bpw,
            source_path: self.path.clone(),
            source_sha256: self.sha256.clone(),
            source_quant: self.facts.quant.clone(),
            source_bits_per_weight: bpw(&self.facts),
            relation: Relation::of(arm_bpw, bpw(&self.facts), false),
            made_at: crate::util::now_rfc3339(),
            quantize_ns,
            engine_build,
        };
        let json = serde_json::to_vec_pretty(&arm).expect("arm serializes");
        crate::util::write_atomic(&arm.sidecar_path(), &json)?;
        Ok(arm)
    }
}

fn stem(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into())
}

fn read_sidecar(p: &Path) -> Result<Arm, QuantError> {
    let text = std::fs::read_to_string(p).map_err(|e| crate::util::with_path(e, p))?;
    serde_json::from_str(&text).map_err(|e| QuantError::Sidecar {
        path: p.display().to_string(),
        problem: e.to_string(),
    })
}

/// Every cached arm (sidecars in [`quants_dir`]), sorted by source then precision.
///
/// # Errors
/// [`QuantError::Sidecar`] for a malformed sidecar.
pub fn list() -> Result<Vec<Arm>, QuantError> {
    let dir = quants_dir();
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Ok(vec![]);
    };
    let mut out = Vec::new();
    for e in rd {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "json") {
            out.push(read_sidecar(&p)?);
        }
    }
    out.sort_by(|a, b| {
        (a.source_path.clone(), -a.bits_per_weight)
            .partial_cmp(&(b.source_path.clone(), -b.bits_per_weight))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    Ok(out)
}

/// Deletes cached arms whose key, file name or type equals `what` (a type removes
/// that type for every source). Returns the deleted GGUF paths.
///
/// # Errors
/// [`QuantError::NotFound`] when nothing matches.
pub fn remove(what: &str) -> Result<Vec<PathBuf>, QuantError> {
    let dir = quants_dir();
    let mut gone = Vec::new();
    for a in list()? {
        let fname = a
            .path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if a.key == what || fname == what || a.quant.eq_ignore_ascii_case(what) {
            let sidecar = a.sidecar_path();
            // Sidecar first: a half-finished removal leaves an orphan GGUF, never a
            // sidecar that points at nothing.
            std::fs::remove_file(&sidecar).map_err(|e| crate::util::with_path(e, &sidecar))?;
            // An MLX arm's path is its source: only its sidecar goes.
            if a.mlx_engine().is_none() && a.path.starts_with(&dir) && a.path.exists() {
                std::fs::remove_file(&a.path).map_err(|e| crate::util::with_path(e, &a.path))?;
            }
            gone.push(a.path);
        }
    }
    if gone.is_empty() {
        return Err(QuantError::NotFound(what.to_string()));
    }
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_round_trip_and_match_llama_h() {
        for t in QuantType::ALL {
            assert_eq!(QuantType::parse(&t.name().to_lowercase()).unwrap(), t);
        }
        // llama.h: LLAMA_FTYPE_MOSTLY_Q4_K_M = 15, Q2_K = 10, Q6_K = 18.
        assert_eq!(QuantType::Q4KM.ftype(), Some(15));
        assert_eq!(QuantType::Q2K.ftype(), Some(10));
        assert_eq!(QuantType::Q6K.ftype(), Some(18));
        // MLX arms parse by their bench names and are not llama.cpp types.
        for t in QuantType::MLX {
            assert_eq!(QuantType::parse(&t.name().to_uppercase()).unwrap(), t);
            assert_eq!(t.ftype(), None);
        }
        assert_eq!(QuantType::Mlx8bit.mlx_engine(), Some(EngineKind::Mlx8bit));
        assert_eq!(QuantType::Q8_0.mlx_engine(), None);
        assert!(
            QuantType::parse("Q9")
                .unwrap_err()
                .to_string()
                .contains("use F16, Q8_0")
        );
    }

    #[test]
    fn keys_depend_on_source_and_type() {
        let a = arm_key("aa", QuantType::Q8_0);
        assert_eq!(a.len(), 16);
        assert_ne!(a, arm_key("ab", QuantType::Q8_0));
        assert_ne!(a, arm_key("aa", QuantType::Q6K));
        assert_eq!(a, arm_key("aa", QuantType::Q8_0));
    }

    #[test]
    fn relation_follows_bits_per_weight() {
        assert_eq!(Relation::of(16.0, 4.9, false), Relation::Above);
        assert_eq!(Relation::of(4.5, 4.9, false), Relation::Below);
        assert_eq!(Relation::of(4.9, 4.9, true), Relation::Source);
    }
}
