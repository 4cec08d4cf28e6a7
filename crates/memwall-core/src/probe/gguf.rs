//! A bounds-checked reader for GGUF headers (metadata and tensor infos), without
//! loading any weights.
//!
//! Format: <https://github.com/ggml-org/ggml/blob/master/docs/gguf.md>. A file is
//! `magic "GGUF" | version u32 | n_tensors u64 | n_kv u64 | kv pairs | tensor infos |
//! padding to general.alignment | tensor data`. Everything is little-endian.
//!
//! The file is treated as hostile input (the pattern of candle's `gguf_file.rs`):
//! every count and length is checked against a cap *and* against the bytes left in
//! the file before anything is allocated, arrays may nest at most
//! [`MAX_ARRAY_NESTING`] deep, sizes use checked arithmetic, and every error names
//! the file, the field and what to do about it. Memory grows only with bytes
//! actually read: no buffer is reserved from a count in the header, and at most
//! [`MAX_KEPT_ELEMENTS`] array elements are kept in all.
//!
//! The structural rules are those of llama.cpp's own reader
//! (`gguf_init_from_file_impl` in `ggml/src/gguf.cpp`), so a file this reader
//! accepts is not refused by llama.cpp for its layout: keys are non-empty and
//! unique, tensor names are unique and shorter than [`MAX_NAME_LEN`] bytes, and the
//! tensor data is packed in file order, each tensor padded to `general.alignment`.
//! On top of that the data must lie inside the file (llama.cpp only finds a
//! truncated download when it maps the weights).

use crate::units::Bytes;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// Largest accepted key length in bytes.
pub const MAX_KEY_LEN: u64 = 64 * 1024;
/// Largest accepted string value (chat templates are a few KiB; 16 MiB is generous).
pub const MAX_STRING_LEN: u64 = 16 * 1024 * 1024;
/// Deepest accepted nesting of arrays inside arrays.
pub const MAX_ARRAY_NESTING: usize = 3;
/// Arrays longer than this are counted but their elements are not kept (the
/// tokenizer's 150k strings are not needed for model facts).
pub const MAX_KEPT_ARRAY_LEN: u64 = 4096;
/// Most array elements kept across the whole file (each kept element costs a
/// [`Value`], ~40 bytes, however short it is in the file); later arrays are counted
/// but not kept. Real files keep a few thousand (per-layer arrays).
pub const MAX_KEPT_ELEMENTS: u64 = 1 << 16;
/// ggml's `GGML_MAX_DIMS`.
pub const MAX_DIMS: u32 = 4;
/// ggml's `GGML_MAX_NAME`: a tensor name must be shorter than this many bytes.
pub const MAX_NAME_LEN: u64 = 64;

/// A ggml tensor element type with its block geometry.
///
/// Block sizes and bytes per block are those of `ggml-common.h` (the
/// `static_assert(sizeof(block_*))` lines) in the llama.cpp that memwall links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
pub struct GgmlType(pub u32);

/// The block geometry of a ggml type (`ggml_type_traits` in `ggml.c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct TypeTraits {
    /// The name ggml prints (`Q4_K`).
    pub name: &'static str,
    /// Elements per block (1 for the plain float and integer types).
    pub block_size: u64,
    /// Bytes per block, scales included.
    pub type_size: u64,
}

impl TypeTraits {
    /// Whether the type is block-quantized (more than one element per block).
    pub fn is_block_quantized(self) -> bool {
        self.block_size > 1
    }
}

impl GgmlType {
    /// The type's name and block geometry, or `None` for ids ggml does not define.
    pub fn traits(self) -> Option<TypeTraits> {
        let (name, block_size, type_size) = match self.0 {
            0 => ("F32", 1, 4),
            1 => ("F16", 1, 2),
            2 => ("Q4_0", 32, 18),
            3 => ("Q4_1", 32, 20),
            6 => ("Q5_0", 32, 22),
            7 => ("Q5_1", 32, 24),
            8 => ("Q8_0", 32, 34),
            9 => ("Q8_1", 32, 36),
            10 => ("Q2_K", 256, 84),
            11 => ("Q3_K", 256, 110),
            12 => ("Q4_K", 256, 144),
            13 => ("Q5_K", 256, 176),
            14 => ("Q6_K", 256, 210),
            15 => ("Q8_K", 256, 292),
            16 => ("IQ2_XXS", 256, 66),
            17 => ("IQ2_XS", 256, 74),
            18 => ("IQ3_XXS", 256, 98),
            19 => ("IQ1_S", 256, 50),
            20 => ("IQ4_NL", 32, 18),
            21 => ("IQ3_S", 256, 110),
            22 => ("IQ2_S", 256, 82),
            23 => ("IQ4_XS", 256, 136),
            24 => ("I8", 1, 1),
            25 => ("I16", 1, 2),
            26 => ("I32", 1, 4),
            27 => ("I64", 1, 8),
            28 => ("F64", 1, 8),
            29 => ("IQ1_M", 256, 56),
            30 => ("BF16", 1, 2),
            34 => ("TQ1_0", 256, 54),
            35 => ("TQ2_0", 256, 66),
            39 => ("MXFP4", 32, 17),
            40 => ("NVFP4", 64, 36),
            41 => ("Q1_0", 128, 18),
            42 => ("Q2_0", 64, 18),
            _ => return None,
        };
        Some(TypeTraits {
            name,
            block_size,
            type_size,
        })
    }

    /// The type's name as ggml prints it (`Q4_K`), or `type#N` for unknown ids.
    pub fn name(self) -> String {
        match self.traits() {
            Some(t) => t.name.to_string(),
            None => format!("type#{}", self.0),
        }
    }

    /// Looks a type up by its ggml name (case-insensitive).
    pub fn from_name(name: &str) -> Option<GgmlType> {
        (0..64).map(GgmlType).find(|t| {
            t.traits()
                .is_some_and(|x| x.name.eq_ignore_ascii_case(name))
        })
    }

    /// Bits per weight including block scales: `8 × bytes per block ÷ elements per block`.
    pub fn bits_per_weight(self) -> Option<f64> {
        self.traits()
            .map(|t| 8.0 * t.type_size as f64 / t.block_size as f64)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    /// Any unsigned integer type (u8, u16, u32, u64).
    U64(u64),
    /// Any signed integer type (i8, i16, i32, i64).
    I64(i64),
    /// f32 or f64.
    F64(f64),
    Bool(bool),
    /// UTF-8 string (invalid UTF-8 is replaced, lossy).
    Str(String),
    /// An array. `items` is `None` when it was longer than [`MAX_KEPT_ARRAY_LEN`].
    Array {
        /// GGUF element type id.
        elem_type: u32,
        /// Number of elements in the file.
        len: u64,
        /// The elements, when kept.
        items: Option<Vec<Value>>,
    },
}

impl Value {
    /// The value as u64 when it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U64(v) => Some(v),
            Value::I64(v) if v >= 0 => Some(v as u64),
            _ => None,
        }
    }
    /// The value as f64 when it is numeric.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::U64(v) => Some(v as f64),
            Value::I64(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }
    /// The value as a string slice.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    /// The array length, when an array.
    pub fn array_len(&self) -> Option<u64> {
        match self {
            Value::Array { len, .. } => Some(*len),
            _ => None,
        }
    }
}

/// One tensor's header entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TensorInfo {
    /// Tensor name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Dimensions, innermost first (`ne[0]` is the row length), 1 to 4 of them.
    pub dims: Vec<u64>,
    /// Element type.
    pub ggml_type: GgmlType,
    /// Offset of the data from the start of the data section.
    pub offset: u64,
}

impl TensorInfo {
    /// Number of elements (product of dims; saturates, which a parsed tensor never
    /// reaches: the reader checks the product).
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().fold(1u64, |a, &d| a.saturating_mul(d))
    }
    /// Bytes of data: `n_elements ÷ block size × bytes per block` (checked for
    /// overflow and against the file at parse time; saturates otherwise). Zero for a
    /// type ggml does not define, which the reader refuses.
    pub fn n_bytes(&self) -> Bytes {
        let Some(t) = self.ggml_type.traits() else {
            return Bytes(0);
        };
        Bytes((self.n_elements() / t.block_size).saturating_mul(t.type_size))
    }
    /// Bytes of one row (`ne[0]` elements), the cost of a gather such as an embedding lookup.
    pub fn row_bytes(&self) -> Bytes {
        let Some(t) = self.ggml_type.traits() else {
            return Bytes(0);
        };
        let ne0 = self.dims.first().copied().unwrap_or(0);
        Bytes((ne0 / t.block_size).saturating_mul(t.type_size))
    }
}

/// A parsed GGUF header.
#[derive(Debug, Clone, Serialize)]
pub struct Gguf {
    /// The file read.
    pub path: PathBuf,
    /// Size of the file in bytes.
    pub file_bytes: Bytes,
    /// GGUF version (2 or 3).
    pub version: u32,
    /// Metadata, sorted by key.
    pub metadata: BTreeMap<String, Value>,
    /// Tensor infos in file order.
    pub tensors: Vec<TensorInfo>,
    /// Offset of the tensor data section from the start of the file.
    pub data_offset: u64,
    /// `general.alignment` (32 when absent).
    pub alignment: u64,
}

/// What went wrong while reading a GGUF file. The message names the file, the
/// field and a fix.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {field}: {problem}. {fix}")]
pub struct GgufError {
    /// Path of the GGUF file as opened.
    pub path: PathBuf,
    /// The field being read (e.g. `header.magic`, `metadata[llama.block_count]`, `tensor[3].dims`).
    pub field: String,
    /// What is wrong.
    pub problem: String,
    /// What to do about it.
    pub fix: &'static str,
}

const FIX_TRUNCATED: &str = "The file is truncated or not a GGUF model: re-download it (`memwall models verify` checks sha256)";
const FIX_CORRUPT: &str = "The file is corrupt or not a GGUF model: re-download or re-convert it";

struct Cursor<R: Read> {
    r: R,
    pos: u64,
    len: u64,
    path: PathBuf,
    /// Array elements that may still be kept (see [`MAX_KEPT_ELEMENTS`]).
    kept_left: u64,
}

impl<R: Read> Cursor<R> {
    fn err(&self, field: &str, problem: impl Into<String>, fix: &'static str) -> GgufError {
        GgufError {
            path: self.path.clone(),
            field: field.to_string(),
            problem: problem.into(),
            fix,
        }
    }
    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }
    fn bytes(&mut self, n: u64, field: &str) -> Result<Vec<u8>, GgufError> {
        if n > self.remaining() {
            return Err(self.err(
                field,
                format!(
                    "needs {n} bytes at offset {} but only {} remain",
                    self.pos,
                    self.remaining()
                ),
                FIX_TRUNCATED,
            ));
        }
        // Grows with the bytes that arrive, not with the length the file claims.
        let mut buf = Vec::new();
        let got = (&mut self.r).take(n).read_to_end(&mut buf).map_err(|e| {
            self.err(
                field,
                format!("read failed at offset {}: {e}", self.pos),
                FIX_TRUNCATED,
            )
        })?;
        if got as u64 != n {
            return Err(self.err(
                field,
                format!(
                    "needs {n} bytes at offset {} but the file ends after {got}",
                    self.pos
                ),
                FIX_TRUNCATED,
            ));
        }
        self.pos += n;
        Ok(buf)
    }
    fn skip(&mut self, n: u64, field: &str) -> Result<(), GgufError> {
        if n > self.remaining() {
            return Err(self.err(
                field,
                format!(
                    "needs {n} bytes at offset {} but only {} remain",
                    self.pos,
                    self.remaining()
                ),
                FIX_TRUNCATED,
            ));
        }
        let copied = std::io::copy(&mut (&mut self.r).take(n), &mut std::io::sink())
            .map_err(|e| self.err(field, format!("read failed: {e}"), FIX_TRUNCATED))?;
        if copied != n {
            return Err(self.err(field, "unexpected end of file", FIX_TRUNCATED));
        }
        self.pos += n;
        Ok(())
    }
    fn arr<const N: usize>(&mut self, field: &str) -> Result<[u8; N], GgufError> {
        if N as u64 > self.remaining() {
            return Err(self.err(
                field,
                format!(
                    "needs {N} bytes at offset {} but only {} remain",
                    self.pos,
                    self.remaining()
                ),
                FIX_TRUNCATED,
            ));
        }
        let mut a = [0u8; N];
        self.r.read_exact(&mut a).map_err(|e| {
            self.err(
                field,
                format!("read failed at offset {}: {e}", self.pos),
                FIX_TRUNCATED,
            )
        })?;
        self.pos += N as u64;
        Ok(a)
    }
    fn u32(&mut self, field: &str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.arr(field)?))
    }
    fn u64(&mut self, field: &str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.arr(field)?))
    }
    fn string(&mut self, field: &str, cap: u64) -> Result<String, GgufError> {
        let n = self.u64(field)?;
        if n > cap {
            return Err(self.err(
                field,
                format!("string length {n} exceeds the cap of {cap} bytes"),
                FIX_CORRUPT,
            ));
        }
        let b = self.bytes(n, field)?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }
    fn skip_string(&mut self, field: &str) -> Result<(), GgufError> {
        let n = self.u64(field)?;
        if n > MAX_STRING_LEN {
            return Err(self.err(
                field,
                format!("string length {n} exceeds the cap"),
                FIX_CORRUPT,
            ));
        }
        self.skip(n, field)
    }
}

/// Size in bytes of a fixed-width GGUF value type, or `None` for string/array.
fn fixed_size(t: u32) -> Option<u64> {
    match t {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

fn read_value<R: Read>(
    c: &mut Cursor<R>,
    t: u32,
    field: &str,
    depth: usize,
) -> Result<Value, GgufError> {
    Ok(match t {
        0 => Value::U64(c.arr::<1>(field)?[0] as u64),
        1 => Value::I64(c.arr::<1>(field)?[0] as i8 as i64),
        2 => Value::U64(u16::from_le_bytes(c.arr(field)?) as u64),
        3 => Value::I64(i16::from_le_bytes(c.arr(field)?) as i64),
        4 => Value::U64(u32::from_le_bytes(c.arr(field)?) as u64),
        5 => Value::I64(i32::from_le_bytes(c.arr(field)?) as i64),
        6 => Value::F64(f32::from_le_bytes(c.arr(field)?) as f64),
        7 => {
            let b = c.arr::<1>(field)?[0];
            if b > 1 {
                return Err(c.err(field, format!("bool byte is {b}, not 0 or 1"), FIX_CORRUPT));
            }
            Value::Bool(b == 1)
        }
        8 => Value::Str(c.string(field, MAX_STRING_LEN)?),
        9 => {
            if depth >= MAX_ARRAY_NESTING {
                return Err(c.err(
                    field,
                    format!("arrays nested deeper than {MAX_ARRAY_NESTING} levels"),
                    FIX_CORRUPT,
                ));
            }
            let et = c.u32(field)?;
            let len = c.u64(field)?;
            // Each element needs at least one byte (8 for a string length prefix).
            let min_elem = match et {
                8 => 8,
                9 => 12,
                t => fixed_size(t).ok_or_else(|| {
                    c.err(
                        field,
                        format!("array element type {t} is not a GGUF value type"),
                        FIX_CORRUPT,
                    )
                })?,
            };
            let need = len.saturating_mul(min_elem);
            if need > c.remaining() {
                return Err(c.err(
                    field,
                    format!("array claims {len} elements ({need} bytes or more) but only {} bytes remain", c.remaining()),
                    FIX_TRUNCATED,
                ));
            }
            if len <= MAX_KEPT_ARRAY_LEN && len <= c.kept_left {
                c.kept_left -= len;
                let mut items = Vec::with_capacity(len as usize);
                for _ in 0..len {
                    items.push(read_value(c, et, field, depth + 1)?);
                }
                Value::Array {
                    elem_type: et,
                    len,
                    items: Some(items),
                }
            } else {
                match (et, fixed_size(et)) {
                    (_, Some(sz)) => c.skip(len * sz, field)?,
                    (8, None) => {
                        for _ in 0..len {
                            c.skip_string(field)?;
                        }
                    }
                    _ => {
                        for _ in 0..len {
                            read_value(c, et, field, depth + 1)?;
                        }
                    }
                }
                Value::Array {
                    elem_type: et,
                    len,
                    items: None,
                }
            }
        }
        10 => Value::U64(c.u64(field)?),
        11 => Value::I64(i64::from_le_bytes(c.arr(field)?)),
        12 => Value::F64(f64::from_le_bytes(c.arr(field)?)),
        other => {
            return Err(c.err(
                field,
                format!("value type {other} is not a GGUF value type (0..=12)"),
                FIX_CORRUPT,
            ));
        }
    })
}

impl Gguf {
    /// Reads the header of the GGUF file at `path`. Cost: the metadata and tensor
    /// infos only (a few MB at most for a 150k-token vocabulary); weights are not read.
    ///
    /// # Errors
    /// [`GgufError`] naming the field when the file cannot be opened, has the wrong
    /// magic or version, is truncated, or holds a count, length, type or shape that
    /// is out of bounds.
    pub fn open(path: impl AsRef<Path>) -> Result<Gguf, GgufError> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|e| GgufError {
            path: path.clone(),
            field: "file".into(),
            problem: format!("cannot open: {e}"),
            fix: "Check the path; `memwall models list` shows where fetched models live",
        })?;
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        Self::parse(BufReader::with_capacity(1 << 20, file), len, path)
    }

    /// Parses a GGUF header from any reader whose total length is `len` bytes.
    ///
    /// # Errors
    /// As [`Gguf::open`].
    pub fn parse<R: Read>(r: R, len: u64, path: PathBuf) -> Result<Gguf, GgufError> {
        let mut c = Cursor {
            r,
            pos: 0,
            len,
            path: path.clone(),
            kept_left: MAX_KEPT_ELEMENTS,
        };
        let magic = c.arr::<4>("header.magic")?;
        if &magic != b"GGUF" {
            return Err(c.err(
                "header.magic",
                format!("expected \"GGUF\", found {:?}", String::from_utf8_lossy(&magic)),
                "This is not a GGUF file: pass a .gguf model (convert with llama.cpp's convert_hf_to_gguf.py)",
            ));
        }
        let version = c.u32("header.version")?;
        if !(2..=3).contains(&version) {
            return Err(c.err(
                "header.version",
                format!("version {version} is not supported (2 or 3)"),
                "Re-convert the model with a current llama.cpp",
            ));
        }
        let n_tensors = c.u64("header.n_tensors")?;
        let n_kv = c.u64("header.n_kv")?;
        // A kv pair is at least 8 (key len) + 4 (type) + 1 bytes; a tensor info at least 8 + 4 + 8 + 4 + 8.
        if n_kv.saturating_mul(13) > c.remaining() {
            return Err(c.err(
                "header.n_kv",
                format!("{n_kv} pairs cannot fit in {} bytes", c.remaining()),
                FIX_CORRUPT,
            ));
        }
        if n_tensors.saturating_mul(32) > c.remaining() {
            return Err(c.err(
                "header.n_tensors",
                format!(
                    "{n_tensors} tensor infos cannot fit in {} bytes",
                    c.remaining()
                ),
                FIX_CORRUPT,
            ));
        }
        let mut metadata = BTreeMap::new();
        for i in 0..n_kv {
            let key = c.string(&format!("metadata[{i}].key"), MAX_KEY_LEN)?;
            if key.is_empty() {
                return Err(c.err(
                    &format!("metadata[{i}].key"),
                    "the key is empty",
                    FIX_CORRUPT,
                ));
            }
            let field = format!("metadata[{key}]");
            if metadata.contains_key(&key) {
                return Err(c.err(
                    &field,
                    format!("duplicate key: pair {i} repeats an earlier pair's key"),
                    FIX_CORRUPT,
                ));
            }
            let t = c.u32(&field)?;
            let v = read_value(&mut c, t, &field, 0)?;
            metadata.insert(key, v);
        }
        let alignment = match metadata.get("general.alignment") {
            None => 32,
            Some(v) => match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() && a <= 1 << 20 => a,
                _ => {
                    return Err(c.err(
                        "metadata[general.alignment]",
                        format!("{v:?} is not a power of two up to 1 MiB"),
                        FIX_CORRUPT,
                    ));
                }
            },
        };
        // Reserve nothing from the count: each entry read has consumed at least 32
        // bytes of the file, so the list grows only as the file justifies it.
        let mut tensors: Vec<TensorInfo> = Vec::new();
        let mut seen_names: HashMap<String, u64> = HashMap::new();
        // Where the next tensor's data must start, relative to the data section:
        // llama.cpp requires the tensors packed in file order, each padded to the
        // alignment (`gguf_init_from_file_impl`: "tensor '…' has offset …, expected …").
        let mut expected_offset = 0u64;
        for i in 0..n_tensors {
            let field = format!("tensor[{i}]");
            let name = c.string(&format!("{field}.name"), MAX_KEY_LEN)?;
            if name.len() as u64 >= MAX_NAME_LEN {
                return Err(c.err(
                    &format!("{field}.name"),
                    format!(
                        "name of {} bytes is too long for ggml (at most {})",
                        name.len(),
                        MAX_NAME_LEN - 1
                    ),
                    FIX_CORRUPT,
                ));
            }
            let field = format!("tensor[{i}:{name}]");
            if let Some(first) = seen_names.get(&name) {
                return Err(c.err(
                    &format!("{field}.name"),
                    format!("duplicate tensor name: tensor[{first}] has the same name"),
                    FIX_CORRUPT,
                ));
            }
            let n_dims = c.u32(&format!("{field}.n_dims"))?;
            if n_dims == 0 || n_dims > MAX_DIMS {
                return Err(c.err(
                    &format!("{field}.n_dims"),
                    format!("{n_dims} dims (1..={MAX_DIMS})"),
                    FIX_CORRUPT,
                ));
            }
            let mut dims = Vec::with_capacity(n_dims as usize);
            for _ in 0..n_dims {
                dims.push(c.u64(&format!("{field}.dims"))?);
            }
            let ty = GgmlType(c.u32(&format!("{field}.type"))?);
            let offset = c.u64(&format!("{field}.offset"))?;
            let Some(TypeTraits {
                name: tname,
                block_size: blck,
                type_size: size,
            }) = ty.traits()
            else {
                return Err(c.err(
                    &format!("{field}.type"),
                    format!("ggml type id {} is unknown to this memwall", ty.0),
                    "Update memwall, or requantize the model to a standard type",
                ));
            };
            let n_el = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
            let Some(n_el) = n_el.filter(|_| !dims.contains(&0)) else {
                return Err(c.err(
                    &format!("{field}.dims"),
                    format!("shape {dims:?} is empty or overflows"),
                    FIX_CORRUPT,
                ));
            };
            if dims[0] % blck != 0 {
                return Err(c.err(
                    &format!("{field}.dims"),
                    format!(
                        "row length {} is not a multiple of the {tname} block size {blck}",
                        dims[0]
                    ),
                    FIX_CORRUPT,
                ));
            }
            // elements ÷ block size × bytes per block, then padded to the alignment.
            let padded = (n_el / blck)
                .checked_mul(size)
                .and_then(|b| b.checked_next_multiple_of(alignment));
            let Some(padded) = padded else {
                return Err(c.err(
                    &format!("{field}.dims"),
                    format!(
                        "shape {dims:?} of {tname} ({n_el} elements × {size} bytes per {blck}) overflows a 64-bit byte count"
                    ),
                    FIX_CORRUPT,
                ));
            };
            if offset != expected_offset {
                return Err(c.err(
                    &format!("{field}.offset"),
                    format!(
                        "offset {offset}, expected {expected_offset} (llama.cpp requires the tensor data packed in file order, each tensor padded to {alignment} bytes)"
                    ),
                    FIX_CORRUPT,
                ));
            }
            let Some(next) = expected_offset.checked_add(padded) else {
                return Err(c.err(
                    &format!("{field}.dims"),
                    "the tensor data section's size overflows a 64-bit byte count",
                    FIX_CORRUPT,
                ));
            };
            expected_offset = next;
            seen_names.insert(name.clone(), i);
            tensors.push(TensorInfo {
                name,
                dims,
                ggml_type: ty,
                offset,
            });
        }
        let data_offset = c.pos.div_ceil(alignment) * alignment;
        // The data is packed in order, so the last tensor ends last.
        if let Some((i, t)) = tensors.iter().enumerate().next_back() {
            let end = data_offset
                .checked_add(t.offset)
                .and_then(|o| o.checked_add(t.n_bytes().0));
            if end.is_none_or(|e| e > len) {
                let end = end.map_or_else(|| "past 2^64".to_string(), |e| e.to_string());
                return Err(c.err(
                    &format!("tensor[{i}:{}]", t.name),
                    format!(
                        "the file is truncated: tensor data ends at byte {end} but the file has {len} bytes"
                    ),
                    FIX_TRUNCATED,
                ));
            }
        }
        Ok(Gguf {
            path,
            file_bytes: Bytes(len),
            version,
            metadata,
            tensors,
            data_offset,
            alignment,
        })
    }

    /// A metadata value by key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Option<&str> {
        self.get("general.architecture").and_then(Value::as_str)
    }

    /// A tensor by name.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Tiny GGUF byte builders for malformed-input tests (shared with the fuzzer).
    pub use memwall_testkit::fuzz::GgufBuilder;
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    /// Parses `b` as `t.gguf`, expecting a refusal whose message contains `needle`;
    /// returns the message.
    #[track_caller]
    fn assert_refused(b: &[u8], needle: &str) -> String {
        let e = parse(b).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
        e
    }

    fn parse(b: &[u8]) -> Result<Gguf, GgufError> {
        Gguf::parse(b, b.len() as u64, PathBuf::from("t.gguf"))
    }

    #[test]
    fn type_table_matches_bits_per_weight_of_the_formats() {
        // bpw including scales, as quoted in llama.cpp's quantize help.
        let bpw = |n: &str| GgmlType::from_name(n).unwrap().bits_per_weight().unwrap();
        assert_eq!(bpw("Q4_0"), 4.5);
        assert_eq!(bpw("Q4_K"), 4.5);
        assert_eq!(bpw("Q5_K"), 5.5);
        assert_eq!(bpw("Q6_K"), 6.5625);
        assert_eq!(bpw("Q8_0"), 8.5);
        assert_eq!(bpw("F16"), 16.0);
        assert_eq!(bpw("BF16"), 16.0);
        assert_eq!(bpw("Q2_K"), 2.625);
        assert_eq!(GgmlType(5).traits(), None, "Q4_2 was removed from ggml");
    }

    #[test]
    fn well_formed_minimal_file_parses() {
        let b = GgufBuilder::default()
            .kv_str("general.architecture", "llama")
            .kv_u32("llama.block_count", 2)
            .tensor("token_embd.weight", &[64, 10], 8, 0) // Q8_0: 2 blocks × 34 × 10 rows = 680
            .tensor("output_norm.weight", &[64], 0, 704) // 680 rounded up to 32 = 704
            .data(704 + 256)
            .build();
        let g = parse(&b).unwrap();
        assert_eq!(g.architecture(), Some("llama"));
        assert_eq!(g.get("llama.block_count").and_then(Value::as_u64), Some(2));
        assert_eq!(g.tensors[0].n_bytes(), Bytes(680));
        assert_eq!(g.tensors[0].row_bytes(), Bytes(68));
        assert_eq!(g.tensors[1].n_bytes(), Bytes(256));
        assert_eq!(g.data_offset % 32, 0);
    }

    #[test]
    fn bad_magic_is_named() {
        let mut b = GgufBuilder::default().build();
        b[0] = b'X';
        assert_refused(&b, "t.gguf: header.magic: expected \"GGUF\"");
    }

    #[test]
    fn huge_array_count_is_refused_before_allocating() {
        // An array of u32 claiming 2^60 elements in a 100-byte file.
        let mut payload = 4u32.to_le_bytes().to_vec();
        payload.extend((1u64 << 60).to_le_bytes());
        let b = GgufBuilder::default().kv_raw("x.arr", 9, &payload).build();
        assert_refused(
            &b,
            "metadata[x.arr]: array claims 1152921504606846976 elements",
        );
    }

    #[test]
    fn huge_string_is_refused() {
        let mut payload = Vec::new();
        payload.extend((u64::MAX / 2).to_le_bytes());
        let b = GgufBuilder::default().kv_raw("x.s", 8, &payload).build();
        let e = assert_refused(&b, "metadata[x.s]: string length");
        assert!(e.contains("exceeds the cap"), "{e}");
    }

    #[test]
    fn deep_nesting_is_refused() {
        // array<array<array<array<u8>>>> with one element each.
        let mut payload = Vec::new();
        for _ in 0..4 {
            payload.extend(9u32.to_le_bytes());
            payload.extend(1u64.to_le_bytes());
        }
        // innermost: replace last header with u8 array of len 1
        payload.extend(0u32.to_le_bytes());
        payload.extend(1u64.to_le_bytes());
        payload.push(7);
        let b = GgufBuilder::default()
            .kv_raw("x.deep", 9, &payload)
            .data(64)
            .build();
        assert_refused(&b, "nested deeper than 3");
    }

    #[test]
    fn truncated_tensor_data_is_named() {
        // Header 24 + tensor info 41 = 65 bytes, padded to 96; 100 data bytes follow.
        let b = GgufBuilder::default()
            .tensor("w", &[32, 4], 0, 0)
            .data(100)
            .build();
        assert_eq!(b.len(), 196);
        let e = parse(&b).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "t.gguf: tensor[0:w]: the file is truncated: tensor data ends at byte 608 but the file has 196 bytes. The file is truncated"
            ),
            "{e}"
        );
        // One byte short of complete is refused; complete parses.
        let ok = GgufBuilder::default()
            .tensor("w", &[32, 4], 0, 0)
            .data(512)
            .build();
        assert!(parse(&ok).is_ok());
        let e = parse(&ok[..ok.len() - 1]).unwrap_err().to_string();
        assert!(
            e.contains("ends at byte 608 but the file has 607 bytes"),
            "{e}"
        );
    }

    #[test]
    fn duplicate_and_empty_keys_are_refused_by_name() {
        let b = GgufBuilder::default()
            .kv_str("general.architecture", "llama")
            .kv_u32("llama.block_count", 2)
            .kv_u32("llama.block_count", 3)
            .build();
        let e = parse(&b).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "t.gguf: metadata[llama.block_count]: duplicate key: pair 2 repeats an earlier pair's key. The file is corrupt"
            ),
            "{e}"
        );
        let b = GgufBuilder::default().kv_u32("", 1).build();
        assert_refused(&b, "t.gguf: metadata[0].key: the key is empty");
    }

    #[test]
    fn duplicate_tensor_names_are_refused_by_name() {
        let b = GgufBuilder::default()
            .tensor("blk.0.attn_q.weight", &[32], 0, 0)
            .tensor("blk.0.attn_q.weight", &[32], 0, 128)
            .data(256)
            .build();
        assert_refused(
            &b,
            "t.gguf: tensor[1:blk.0.attn_q.weight].name: duplicate tensor name: tensor[0] has the same name",
        );
    }

    #[test]
    fn tensor_data_must_be_packed_in_order_as_llama_cpp_requires() {
        // F32 [32] = 128 bytes, so the second tensor must start at 128.
        let b = GgufBuilder::default()
            .tensor("a", &[32], 0, 0)
            .tensor("b", &[32], 0, 256)
            .data(512)
            .build();
        assert_refused(
            &b,
            "tensor[1:b].offset: offset 256, expected 128 (llama.cpp requires",
        );
        // Two tensors on the same bytes (each would otherwise be counted in full).
        let b = GgufBuilder::default()
            .tensor("a", &[32], 0, 0)
            .tensor("b", &[32], 0, 0)
            .data(512)
            .build();
        assert_refused(&b, "tensor[1:b].offset: offset 0, expected 128");
        // Q8_0 [64] = 68 bytes, padded to 96.
        let b = GgufBuilder::default()
            .tensor("a", &[64], 8, 0)
            .tensor("b", &[32], 0, 96)
            .data(224)
            .build();
        assert!(parse(&b).is_ok());
    }

    #[test]
    fn byte_size_overflow_names_the_tensor() {
        // 2^31 × 2^31 F32 elements: 2^62 elements fit in u64, 2^64 bytes do not.
        let b = GgufBuilder::default()
            .tensor("w", &[1 << 31, 1 << 31], 0, 0)
            .data(64)
            .build();
        assert_refused(
            &b,
            "t.gguf: tensor[0:w].dims: shape [2147483648, 2147483648] of F32 (4611686018427387904 elements × 4 bytes per 1) overflows a 64-bit byte count",
        );
        // I8 of 2^64 - 6 bytes: fits, but padding it to 32 does not.
        let b = GgufBuilder::default()
            .tensor("w", &[u64::MAX - 5], 24, 0)
            .data(64)
            .build();
        assert_refused(&b, "tensor[0:w].dims: shape [18446744073709551610] of I8");
    }

    #[test]
    fn long_tensor_names_are_refused_as_ggml_would() {
        let name = "x".repeat(64);
        let b = GgufBuilder::default()
            .tensor(&name, &[32], 0, 0)
            .data(128)
            .build();
        assert_refused(
            &b,
            "tensor[0].name: name of 64 bytes is too long for ggml (at most 63)",
        );
        let b = GgufBuilder::default()
            .tensor(&name[..63], &[32], 0, 0)
            .data(128)
            .build();
        assert!(parse(&b).is_ok());
    }

    #[test]
    fn kept_array_elements_have_a_file_wide_budget() {
        // 17 arrays of 4096 u8: each is short enough to keep, but all 17 are 69,632
        // elements, over the 65,536 budget: the 17th is counted, not kept.
        let mut b = GgufBuilder::default();
        for i in 0..17 {
            let mut p = 0u32.to_le_bytes().to_vec();
            p.extend(4096u64.to_le_bytes());
            p.extend(std::iter::repeat_n(1u8, 4096));
            b = b.kv_raw(&format!("x.a{i:02}"), 9, &p);
        }
        let g = parse(&b.build()).unwrap();
        let kept = |k: &str| match g.get(k) {
            Some(Value::Array { items, len, .. }) => {
                assert_eq!(*len, 4096);
                items.as_ref().map_or(0, Vec::len)
            }
            v => panic!("{k}: {v:?}"),
        };
        for i in 0..16 {
            assert_eq!(kept(&format!("x.a{i:02}")), 4096);
        }
        assert_eq!(kept("x.a16"), 0);
    }

    #[test]
    fn counts_reserve_nothing_before_the_bytes_arrive() {
        // A header claiming 2^34 tensors in a "file" said to be 2^40 bytes long, of
        // which 24 exist: the count passes the size check (32 × 2^34 ≤ 2^40), so a
        // reader that reserved from it would ask for ~1 TiB and abort.
        let mut b = GgufBuilder::default().build();
        b[8..16].copy_from_slice(&(1u64 << 34).to_le_bytes());
        b.truncate(24);
        let e = Gguf::parse(&b[..], 1 << 40, PathBuf::from("t.gguf"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("t.gguf: tensor[0].name: read failed at offset 24"),
            "{e}"
        );
    }

    #[test]
    fn bad_shapes_and_types_are_named() {
        let b = GgufBuilder::default()
            .tensor("w", &[33], 2, 0)
            .data(64)
            .build();
        assert_refused(
            &b,
            "row length 33 is not a multiple of the Q4_0 block size 32",
        );
        let b = GgufBuilder::default()
            .tensor("w", &[32], 99, 0)
            .data(64)
            .build();
        assert_refused(&b, "tensor[0:w].type: ggml type id 99 is unknown");
        let b = GgufBuilder::default()
            .tensor("w", &[1 << 40, 1 << 40], 0, 0)
            .data(64)
            .build();
        assert_refused(&b, "is empty or overflows");
        let b = GgufBuilder::default()
            .tensor("w", &[1, 1, 1, 1, 1], 0, 0)
            .data(64)
            .build();
        assert_refused(&b, "n_dims: 5 dims");
    }

    #[test]
    fn every_prefix_of_a_valid_file_errors_without_panicking() {
        let b = GgufBuilder::default()
            .kv_str("general.architecture", "llama")
            .kv_raw("a", 9, &{
                let mut p = 8u32.to_le_bytes().to_vec();
                p.extend(2u64.to_le_bytes());
                for w in ["ab", "cd"] {
                    p.extend((w.len() as u64).to_le_bytes());
                    p.extend(w.as_bytes());
                }
                p
            })
            .tensor("w", &[32], 0, 0)
            .data(128)
            .build();
        assert!(parse(&b).is_ok());
        for n in 0..b.len() {
            let r = parse(&b[..n]);
            assert!(r.is_err(), "prefix of {n} bytes parsed");
        }
    }
}
