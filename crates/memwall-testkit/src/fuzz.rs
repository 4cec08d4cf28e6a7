//! A mutation fuzzer for the GGUF reader and the model facts derived from it.
//!
//! cargo-fuzz needs a nightly toolchain, so this is a plain deterministic engine
//! that `examples/fuzz_gguf.rs` drives for a time budget and a unit test drives for
//! a few thousand cases. A case is a seed header (synthetic, built here, or the
//! header region of a real model file) with one structure-aware mutation (a
//! count or length field set to a boundary value, a metadata pair or tensor info
//! duplicated) and a few byte-level ones (bit flips, byte sets, truncations,
//! inserted or deleted ranges), plus the file length the reader is told. Each case
//! runs [`Gguf::parse`], [`ModelFacts::from_gguf`] and the calculator under
//! `catch_unwind`: a panic, or facts that break an invariant the reader promises,
//! is a finding.
//!
//! The byte builders ([`GgufBuilder`]) are also what the reader's unit tests use.

use memwall_core::experiments::calc::{self, CalcModel, CalcParams, Roof, Sourced, WeightBasis};
use memwall_core::probe::gguf::{Gguf, GgufError, MAX_KEPT_ARRAY_LEN, Value};
use memwall_core::probe::model::{CacheType, ModelFacts, TensorClass};
use memwall_core::units::{Bytes, Gbps, Gflops};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

/// Appends a GGUF string (u64 length, then the bytes).
pub fn push_str(out: &mut Vec<u8>, v: &str) {
    out.extend((v.len() as u64).to_le_bytes());
    out.extend(v.as_bytes());
}

/// Builds GGUF v3 bytes piece by piece: metadata pairs, tensor infos, padding to 32
/// bytes and `data_len` zero bytes of tensor data. Offsets are given as written,
/// so malformed files are as easy to make as valid ones.
#[derive(Debug, Clone, Default)]
pub struct GgufBuilder {
    /// Encoded metadata pairs.
    pub kv: Vec<u8>,
    /// Number of pairs in `kv`.
    pub n_kv: u64,
    /// Encoded tensor infos.
    pub tensors: Vec<u8>,
    /// Number of infos in `tensors`.
    pub n_tensors: u64,
    /// Bytes of (zero) tensor data after the padded header.
    pub data_len: u64,
}

impl GgufBuilder {
    /// A u32 pair.
    pub fn kv_u32(mut self, k: &str, v: u32) -> Self {
        push_str(&mut self.kv, k);
        self.kv.extend(4u32.to_le_bytes());
        self.kv.extend(v.to_le_bytes());
        self.n_kv += 1;
        self
    }
    /// A u64 pair.
    pub fn kv_u64(mut self, k: &str, v: u64) -> Self {
        push_str(&mut self.kv, k);
        self.kv.extend(10u32.to_le_bytes());
        self.kv.extend(v.to_le_bytes());
        self.n_kv += 1;
        self
    }
    /// A string pair.
    pub fn kv_str(mut self, k: &str, v: &str) -> Self {
        push_str(&mut self.kv, k);
        self.kv.extend(8u32.to_le_bytes());
        push_str(&mut self.kv, v);
        self.n_kv += 1;
        self
    }
    /// A pair of value type `ty` whose encoded value is `payload`.
    pub fn kv_raw(mut self, k: &str, ty: u32, payload: &[u8]) -> Self {
        push_str(&mut self.kv, k);
        self.kv.extend(ty.to_le_bytes());
        self.kv.extend(payload);
        self.n_kv += 1;
        self
    }
    /// A tensor info: name, dims (`ne[0]` first), ggml type id, data offset.
    pub fn tensor(mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> Self {
        push_str(&mut self.tensors, name);
        self.tensors.extend((dims.len() as u32).to_le_bytes());
        for d in dims {
            self.tensors.extend(d.to_le_bytes());
        }
        self.tensors.extend(ty.to_le_bytes());
        self.tensors.extend(offset.to_le_bytes());
        self.n_tensors += 1;
        self
    }
    /// Sets the bytes of tensor data.
    pub fn data(mut self, n: u64) -> Self {
        self.data_len = n;
        self
    }
    /// The file's bytes.
    pub fn build(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend(self.n_tensors.to_le_bytes());
        out.extend(self.n_kv.to_le_bytes());
        out.extend(&self.kv);
        out.extend(&self.tensors);
        while !out.len().is_multiple_of(32) {
            out.push(0);
        }
        out.extend(std::iter::repeat_n(0u8, self.data_len as usize));
        out
    }
}

/// A GGUF header serialized without its tensor data ([`header_bytes`]).
#[derive(Debug, Clone, PartialEq)]
pub struct HeaderBytes {
    /// The header bytes: magic, version, counts, metadata, tensor infos, padding to 32.
    pub bytes: Vec<u8>,
    /// Length in bytes of the whole file the header describes (header + tensor data),
    /// the length a reader is told the file has.
    pub file_len: u64,
}

/// Serializes a parsed (or shape-built) header back to GGUF bytes, without tensor
/// data. Integers are written as u32/i32 when they fit (as converters do), floats as
/// f32; an array whose elements were not kept is written empty. Returns the bytes
/// and the length of the whole file the header describes (header + data).
pub fn header_bytes(g: &Gguf) -> HeaderBytes {
    let mut kv = Vec::new();
    for (k, v) in &g.metadata {
        push_str(&mut kv, k);
        let ty = scalar_type(v);
        kv.extend(ty.to_le_bytes());
        write_value(&mut kv, ty, v);
    }
    let mut b = GgufBuilder {
        kv,
        n_kv: g.metadata.len() as u64,
        ..GgufBuilder::default()
    };
    for t in &g.tensors {
        b = b.tensor(&t.name, &t.dims, t.ggml_type.0, t.offset);
    }
    let bytes = b.build();
    let end = g
        .tensors
        .last()
        .map_or(0, |t| t.offset.saturating_add(t.n_bytes().0));
    let file_len = (bytes.len() as u64).saturating_add(end);
    HeaderBytes { bytes, file_len }
}

fn scalar_type(v: &Value) -> u32 {
    match v {
        Value::U64(x) if *x <= u32::MAX as u64 => 4,
        Value::U64(_) => 10,
        Value::I64(x) if i32::try_from(*x).is_ok() => 5,
        Value::I64(_) => 11,
        Value::F64(_) => 6,
        Value::Bool(_) => 7,
        Value::Str(_) => 8,
        Value::Array { .. } => 9,
    }
}

fn write_value(out: &mut Vec<u8>, ty: u32, v: &Value) {
    let u = v.as_u64().unwrap_or(0);
    let i = match v {
        Value::I64(x) => *x,
        _ => u as i64,
    };
    let f = v.as_f64().unwrap_or(0.0);
    match ty {
        0 => out.push(u as u8),
        1 => out.push(i as i8 as u8),
        2 => out.extend((u as u16).to_le_bytes()),
        3 => out.extend((i as i16).to_le_bytes()),
        4 => out.extend((u as u32).to_le_bytes()),
        5 => out.extend((i as i32).to_le_bytes()),
        6 => out.extend((f as f32).to_le_bytes()),
        7 => out.push(matches!(v, Value::Bool(true)) as u8),
        8 => push_str(out, v.as_str().unwrap_or("")),
        9 => {
            let (et, items) = match v {
                Value::Array {
                    elem_type, items, ..
                } => (*elem_type, items.as_deref().unwrap_or(&[])),
                _ => (0, &[][..]),
            };
            out.extend(et.to_le_bytes());
            out.extend((items.len() as u64).to_le_bytes());
            for it in items {
                write_value(out, et, it);
            }
        }
        10 => out.extend(u.to_le_bytes()),
        11 => out.extend(i.to_le_bytes()),
        _ => out.extend(f.to_le_bytes()),
    }
}

/// A count or length field of a seed: `width` (4 or 8) little-endian bytes at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Byte offset.
    pub at: usize,
    /// 4 or 8.
    pub width: u8,
}

/// Where a seed's fields and entries are, found by walking its bytes.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    /// Counts, lengths, type ids, dims and offsets (u32/u64 fields).
    pub fields: Vec<Field>,
    /// Byte ranges of the metadata pairs.
    pub kv: Vec<Range<usize>>,
    /// Byte ranges of the tensor infos.
    pub tensors: Vec<Range<usize>>,
}

/// Array elements whose fields are recorded per array (the walk still steps over all).
const FIELDS_PER_ARRAY: u64 = 64;

struct Walk<'a> {
    b: &'a [u8],
    pos: usize,
    out: Layout,
}

impl Walk<'_> {
    fn take(&mut self, n: u64) -> Option<usize> {
        let at = self.pos;
        let end = at.checked_add(usize::try_from(n).ok()?)?;
        (end <= self.b.len()).then(|| {
            self.pos = end;
            at
        })
    }
    fn u32(&mut self, record: bool) -> Option<u32> {
        let at = self.take(4)?;
        if record {
            self.out.fields.push(Field { at, width: 4 });
        }
        Some(u32::from_le_bytes(self.b[at..at + 4].try_into().ok()?))
    }
    fn u64(&mut self, record: bool) -> Option<u64> {
        let at = self.take(8)?;
        if record {
            self.out.fields.push(Field { at, width: 8 });
        }
        Some(u64::from_le_bytes(self.b[at..at + 8].try_into().ok()?))
    }
    fn string(&mut self, record: bool) -> Option<()> {
        let n = self.u64(record)?;
        self.take(n).map(|_| ())
    }
    fn value(&mut self, ty: u32, record: bool, depth: u32) -> Option<()> {
        match ty {
            0 | 1 | 7 => self.take(1).map(|_| ()),
            2 | 3 => self.take(2).map(|_| ()),
            4..=6 => self.take(4).map(|_| ()),
            10..=12 => self.take(8).map(|_| ()),
            8 => self.string(record),
            9 if depth < 4 => {
                let et = self.u32(record)?;
                let n = self.u64(record)?;
                for i in 0..n {
                    self.value(et, record && i < FIELDS_PER_ARRAY, depth + 1)?;
                }
                Some(())
            }
            _ => None,
        }
    }
}

/// Walks a well-formed header and records its fields; `None` when it is not one.
pub fn layout(b: &[u8]) -> Option<Layout> {
    let mut w = Walk {
        b,
        pos: 0,
        out: Layout::default(),
    };
    w.take(4)?;
    w.u32(true)?;
    let n_tensors = w.u64(true)?;
    let n_kv = w.u64(true)?;
    for _ in 0..n_kv {
        let start = w.pos;
        w.string(true)?;
        let ty = w.u32(true)?;
        w.value(ty, true, 0)?;
        w.out.kv.push(start..w.pos);
    }
    for _ in 0..n_tensors {
        let start = w.pos;
        w.string(true)?;
        let n_dims = w.u32(true)?;
        for _ in 0..n_dims.min(8) {
            w.u64(true)?;
        }
        w.u32(true)?;
        w.u64(true)?;
        w.out.tensors.push(start..w.pos);
    }
    Some(w.out)
}

/// A starting point for mutations.
#[derive(Debug, Clone)]
pub struct Seed {
    /// Where it came from (`synthetic:tiny-llama`, a file name).
    pub name: String,
    /// The header bytes (and for synthetic seeds, all of the file).
    pub bytes: Vec<u8>,
    /// The file length the reader is told (a real header's file is longer than its bytes).
    pub claimed_len: u64,
    /// Its fields and entries.
    pub layout: Layout,
}

impl Seed {
    /// A seed from header bytes and the file length they describe.
    ///
    /// # Errors
    /// When the bytes are not a walkable GGUF header.
    pub fn new(name: &str, bytes: Vec<u8>, claimed_len: u64) -> Result<Seed, String> {
        let layout = layout(&bytes).ok_or_else(|| format!("{name}: not a walkable GGUF header"))?;
        Ok(Seed {
            name: name.to_string(),
            bytes,
            claimed_len,
            layout,
        })
    }

    /// Seeds from a real model: its header region exactly as in the file (when at
    /// most `max_header` bytes), and the same header re-serialized with the long
    /// arrays (tokenizer) emptied, which keeps every real key and tensor info but is
    /// small enough to mutate fast. Only the header is read.
    ///
    /// # Errors
    /// When the file cannot be read or is not a valid GGUF.
    pub fn from_model(path: &Path, max_header: u64) -> Result<Vec<Seed>, String> {
        use std::io::Read;
        let g = Gguf::open(path).map_err(|e| e.to_string())?;
        let stem = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut out = Vec::new();
        if g.data_offset <= max_header {
            let mut bytes = Vec::new();
            std::fs::File::open(path)
                .and_then(|f| f.take(g.data_offset).read_to_end(&mut bytes))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            out.push(Seed::new(
                &format!("{stem} (header)"),
                bytes,
                g.file_bytes.0,
            )?);
        }
        let HeaderBytes {
            bytes,
            file_len: len,
        } = header_bytes(&g);
        out.push(Seed::new(
            &format!("{stem} (header, long arrays emptied)"),
            bytes,
            len,
        )?);
        Ok(out)
    }
}

/// Headers built in code, so the fuzzer runs without any model: small llama,
/// gemma3 (per-layer arrays, sliding window), MoE, tied/untied, and two presets'
/// full tensor lists (Qwen2.5-0.5B Q4_K_M, Qwen3-30B-A3B Q8_0) without their data.
pub fn synthetic_seeds() -> Vec<Seed> {
    let mut out = Vec::new();
    let u32_arr = |vals: &[u32]| {
        let mut p = 4u32.to_le_bytes().to_vec();
        p.extend((vals.len() as u64).to_le_bytes());
        for v in vals {
            p.extend(v.to_le_bytes());
        }
        p
    };
    let str_arr = |vals: &[&str]| {
        let mut p = 8u32.to_le_bytes().to_vec();
        p.extend((vals.len() as u64).to_le_bytes());
        for v in vals {
            push_str(&mut p, v);
        }
        p
    };
    // 2-layer llama, F32, untied, with a small tokenizer.
    let mut b = GgufBuilder::default()
        .kv_str("general.architecture", "llama")
        .kv_str("general.name", "tiny")
        .kv_u32("general.file_type", 0)
        .kv_u32("llama.block_count", 2)
        .kv_u32("llama.embedding_length", 64)
        .kv_u32("llama.attention.head_count", 4)
        .kv_u32("llama.attention.head_count_kv", 2)
        .kv_u32("llama.feed_forward_length", 128)
        .kv_u64("llama.context_length", 2048)
        .kv_raw(
            "tokenizer.ggml.tokens",
            9,
            &str_arr(&["<s>", "</s>", "a", "b"]),
        )
        .tensor("token_embd.weight", &[64, 4], 0, 0)
        .tensor("output.weight", &[64, 4], 0, 1024);
    let mut off = 2048;
    for il in 0..2 {
        for (n, dims) in [
            ("attn_norm.weight", vec![64]),
            ("attn_q.weight", vec![64, 64]),
            ("attn_k.weight", vec![64, 32]),
            ("attn_v.weight", vec![64, 32]),
            ("attn_output.weight", vec![64, 64]),
            ("ffn_up.weight", vec![64, 128]),
            ("ffn_down.weight", vec![128, 64]),
        ] {
            b = b.tensor(&format!("blk.{il}.{n}"), &dims, 0, off);
            off += dims.iter().product::<u64>() * 4;
        }
    }
    let b = b.data(off);
    out.push(("synthetic:tiny-llama", b.build()));
    // Gemma3-like: per-layer KV heads and a sliding-window pattern array, Q8_0
    // weights, tied embedding, a nested array.
    let mut b = GgufBuilder::default()
        .kv_str("general.architecture", "gemma3")
        .kv_u32("gemma3.block_count", 3)
        .kv_u32("gemma3.embedding_length", 64)
        .kv_u32("gemma3.attention.head_count", 4)
        .kv_raw("gemma3.attention.head_count_kv", 9, &u32_arr(&[1, 2, 1]))
        .kv_u32("gemma3.attention.key_length", 16)
        .kv_u32("gemma3.attention.value_length", 16)
        .kv_u32("gemma3.attention.sliding_window", 8)
        .kv_raw("gemma3.attention.sliding_window_pattern", 9, &{
            let mut p = 7u32.to_le_bytes().to_vec();
            p.extend(3u64.to_le_bytes());
            p.extend([1u8, 1, 0]);
            p
        })
        .kv_raw("x.nested", 9, &{
            let mut p = 9u32.to_le_bytes().to_vec();
            p.extend(2u64.to_le_bytes());
            p.extend(u32_arr(&[1, 2]));
            p.extend(u32_arr(&[3]));
            p
        })
        .kv_raw("x.bool", 7, &[1])
        .kv_raw("x.f64", 12, &1.5f64.to_le_bytes())
        .kv_raw("x.i16", 3, &(-3i16).to_le_bytes())
        .tensor("token_embd.weight", &[64, 8], 8, 0);
    let mut off = 544; // Q8_0 [64, 8]: 16 blocks × 34 bytes
    for il in 0..3 {
        for (n, dims, ty) in [
            ("attn_norm.weight", vec![64], 0),
            ("attn_q.weight", vec![64, 64], 8),
            ("attn_k.weight", vec![64, 32], 8),
            ("attn_v.weight", vec![64, 32], 8),
            ("post_ffw_norm.weight", vec![64], 0),
        ] {
            b = b.tensor(&format!("blk.{il}.{n}"), &dims, ty, off);
            let bytes = if ty == 8 {
                dims.iter().product::<u64>() / 32 * 34
            } else {
                dims.iter().product::<u64>() * 4
            };
            off += bytes.div_ceil(32) * 32;
        }
    }
    out.push(("synthetic:gemma3-arrays", b.data(off).build()));
    let mut seeds: Vec<Seed> = out
        .into_iter()
        .map(|(n, b)| {
            let len = b.len() as u64;
            Seed::new(n, b, len).expect("built seeds walk")
        })
        .collect();
    // Preset shapes: real tensor lists and recipes, data absent (the length says it).
    for (p, q) in [("qwen2.5-0.5b", "Q4_K_M"), ("qwen3-30b-a3b", "Q8_0")] {
        let shape = memwall_core::probe::shape::preset(p).expect("preset").shape;
        let recipe = memwall_core::probe::shape::Recipe::parse(q).expect("recipe");
        let g = shape.header(&recipe, p).expect("preset header");
        let HeaderBytes {
            bytes,
            file_len: len,
        } = header_bytes(&g);
        seeds.push(Seed::new(&format!("synthetic:{p} {q}"), bytes, len).expect("walks"));
    }
    seeds
}

/// One mutation, named for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mutation {
    /// A count, length, type, dim or offset field set to a boundary value.
    FieldBoundary,
    /// A metadata pair repeated (and `n_kv` raised to match).
    DuplicateKv,
    /// A tensor info repeated (and `n_tensors` raised to match).
    DuplicateTensor,
    /// One bit flipped.
    BitFlip,
    /// One byte set to 0x00, 0xff, 0x7f, 0x80 or a random value.
    ByteSet,
    /// The bytes cut short (the told length follows, or not).
    Truncate,
    /// Random bytes inserted.
    Insert,
    /// A range deleted.
    Delete,
    /// The told file length set to a boundary value.
    ClaimedLen,
}

/// A mutated input.
#[derive(Debug, Clone)]
pub struct Case {
    /// Index of the seed in the fuzzer's list.
    pub seed: usize,
    pub bytes: Vec<u8>,
    /// The file length the reader is told.
    pub claimed_len: u64,
    /// What was done to the seed, in order.
    pub mutations: Vec<Mutation>,
}

fn boundary(rng: &mut ChaCha8Rng, len: u64, width: u8) -> u64 {
    let cands = [
        0,
        1,
        u64::MAX,
        u64::MAX - 1,
        1 << 31,
        (1 << 31) - 1,
        1 << 32,
        (1 << 32) - 1,
        1 << 63,
        len,
        len.saturating_sub(1),
        len + 1,
        len / 2,
        4_000_000_000,
        rng.random_range(0..64),
    ];
    let v = cands[rng.random_range(0..cands.len())];
    if width == 4 { v & 0xffff_ffff } else { v }
}

fn add_count(bytes: &mut [u8], at: usize, by: u64) {
    if let Some(s) = bytes.get_mut(at..at + 8) {
        let v = u64::from_le_bytes(s.try_into().expect("8 bytes")).wrapping_add(by);
        s.copy_from_slice(&v.to_le_bytes());
    }
}

/// Seeds longer than this are drawn less often (see [`make_case`]).
const BIG_SEED: usize = 256 << 10;

/// Makes case `index` of run `seed` from `seeds`: the same (seed, index) always
/// gives the same case, so a finding is replayed by its number alone.
pub fn make_case(seeds: &[Seed], seed: u64, index: u64) -> Case {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(index);
    // Whole real headers (megabytes of tokenizer) are slow to copy and walk: draw
    // them about one time in eight they come up, so the small seeds get the cases.
    let mut si = rng.random_range(0..seeds.len());
    for _ in 0..4 {
        if seeds[si].bytes.len() <= BIG_SEED || rng.random_range(0..8) == 0 {
            break;
        }
        si = rng.random_range(0..seeds.len());
    }
    let s = &seeds[si];
    let mut bytes = s.bytes.clone();
    let mut claimed = s.claimed_len;
    let mut muts = Vec::new();
    let synthetic_len = claimed == bytes.len() as u64;
    // One structure-aware mutation (most cases), on the seed's own layout.
    match rng.random_range(0..10) {
        0..=5 if !s.layout.fields.is_empty() => {
            for _ in 0..rng.random_range(1..=2) {
                let f = s.layout.fields[rng.random_range(0..s.layout.fields.len())];
                let v = boundary(&mut rng, claimed, f.width);
                let w = f.width as usize;
                bytes[f.at..f.at + w].copy_from_slice(&v.to_le_bytes()[..w]);
                muts.push(Mutation::FieldBoundary);
            }
        }
        6 if !s.layout.kv.is_empty() => {
            let r = s.layout.kv[rng.random_range(0..s.layout.kv.len())].clone();
            let at = s.layout.kv.last().map_or(r.end, |l| l.end);
            let entry = bytes[r].to_vec();
            bytes.splice(at..at, entry.iter().copied());
            add_count(&mut bytes, 16, 1);
            if synthetic_len {
                claimed += entry.len() as u64;
            }
            muts.push(Mutation::DuplicateKv);
        }
        7 if !s.layout.tensors.is_empty() => {
            let r = s.layout.tensors[rng.random_range(0..s.layout.tensors.len())].clone();
            let at = s.layout.tensors.last().map_or(r.end, |l| l.end);
            let entry = bytes[r].to_vec();
            bytes.splice(at..at, entry.iter().copied());
            add_count(&mut bytes, 8, 1);
            if synthetic_len {
                claimed += entry.len() as u64;
            }
            muts.push(Mutation::DuplicateTensor);
        }
        _ => {}
    }
    // Then zero to three byte-level mutations.
    for _ in 0..rng.random_range(0..=3) {
        if bytes.is_empty() {
            break;
        }
        let n = bytes.len();
        match rng.random_range(0..8) {
            0 | 1 => {
                let i = rng.random_range(0..n);
                bytes[i] ^= 1 << rng.random_range(0..8);
                muts.push(Mutation::BitFlip);
            }
            2 | 3 => {
                let i = rng.random_range(0..n);
                bytes[i] = [0x00, 0xff, 0x7f, 0x80, rng.random::<u8>()][rng.random_range(0..5)];
                muts.push(Mutation::ByteSet);
            }
            4 => {
                let cut = rng.random_range(0..n);
                bytes.truncate(cut);
                if synthetic_len || rng.random_bool(0.5) {
                    claimed = cut as u64;
                }
                muts.push(Mutation::Truncate);
            }
            5 => {
                let i = rng.random_range(0..=n);
                let k = rng.random_range(1..=16);
                let ins: Vec<u8> = (0..k).map(|_| rng.random::<u8>()).collect();
                bytes.splice(i..i, ins);
                if synthetic_len {
                    claimed += k as u64;
                }
                muts.push(Mutation::Insert);
            }
            6 => {
                let i = rng.random_range(0..n);
                let k = rng.random_range(1..=64).min(n - i);
                bytes.drain(i..i + k);
                if synthetic_len {
                    claimed = claimed.saturating_sub(k as u64);
                }
                muts.push(Mutation::Delete);
            }
            _ => {
                claimed = boundary(&mut rng, claimed, 8);
                muts.push(Mutation::ClaimedLen);
            }
        }
    }
    Case {
        seed: si,
        bytes,
        claimed_len: claimed,
        mutations: muts,
    }
}

/// What one case did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Parsed, and the facts were derived and checked.
    FactsOk,
    /// Parsed; the facts refused it (the kind of error).
    FactsErr(&'static str),
    /// The reader refused it (the kind of error).
    ReadErr(&'static str),
    /// A panic: a finding.
    Panic(String),
    /// Accepted, but a promised invariant does not hold: a finding.
    Invariant(String),
}

impl Outcome {
    /// A panic or a broken invariant.
    pub fn is_finding(&self) -> bool {
        matches!(self, Outcome::Panic(_) | Outcome::Invariant(_))
    }
}

/// Sorts a reader or facts error into a small set of kinds by its field and text.
pub fn error_kind(e: &GgufError) -> &'static str {
    let (f, p) = (e.field.as_str(), e.problem.as_str());
    let has = |s: &str| p.contains(s);
    match () {
        _ if f == "header.magic" => "bad magic",
        _ if f == "header.version" && !has("remain") => "bad version",
        _ if has("cannot fit in") => "header count too large",
        _ if has("the file is truncated") => "tensor data past the end",
        _ if has("remain")
            || has("the file ends")
            || has("read failed")
            || has("unexpected end") =>
        {
            "short read"
        }
        _ if has("duplicate key") => "duplicate key",
        _ if has("duplicate tensor name") => "duplicate tensor name",
        _ if has("key is empty") => "empty key",
        _ if has("exceeds the cap") || has("too long for ggml") => "length over cap",
        _ if has("array claims") => "array count too large",
        _ if has("nested deeper") => "array nesting",
        _ if has("not a GGUF value type") => "bad value type",
        _ if has("bool byte") => "bad bool",
        _ if f.contains("general.alignment") => "bad alignment",
        _ if f.ends_with(".n_dims") => "bad n_dims",
        _ if f.ends_with(".type") => "unknown ggml type",
        _ if has("overflows a 64-bit") || has("is empty or overflows") => "shape overflow",
        _ if f.ends_with(".dims") => "bad shape",
        _ if f.ends_with(".offset") => "tensor offset not packed",
        _ if has("exceeds the tensors present") => "facts: block_count over tensors",
        _ if has("does not fit in 32 bits") => "facts: value over u32",
        _ if has("missing or not a number") => "facts: missing key",
        _ if has("zero") => "facts: zero heads or layers",
        _ if has("not kept") => "facts: per-layer array not kept",
        _ => "other",
    }
}

fn check_facts(g: &Gguf, f: &ModelFacts) -> Result<(), String> {
    if f.n_layer as usize > g.tensors.len() {
        return Err(format!(
            "n_layer {} > {} tensors",
            f.n_layer,
            g.tensors.len()
        ));
    }
    if f.tensor_bytes.0 > g.file_bytes.0 {
        return Err(format!(
            "tensor bytes {} > file bytes {}",
            f.tensor_bytes.0, g.file_bytes.0
        ));
    }
    if f.streamed_bytes.0 > f.tensor_bytes.0 {
        return Err(format!(
            "streamed bytes {} > tensor bytes {}",
            f.streamed_bytes.0, f.tensor_bytes.0
        ));
    }
    let cap = (f.n_layer as u64).max(MAX_KEPT_ARRAY_LEN) as usize;
    if f.n_head_kv.len() > cap || f.swa_layers.len() > cap {
        return Err(format!(
            "per-layer lists of {} / {} entries for {} layers",
            f.n_head_kv.len(),
            f.swa_layers.len(),
            f.n_layer
        ));
    }
    let classes: u64 = f.classes.values().map(|c| c.bytes.0).sum();
    if classes != f.tensor_bytes.0 {
        return Err(format!(
            "class bytes {classes} ≠ tensor bytes {}",
            f.tensor_bytes.0
        ));
    }
    Ok(())
}

fn check_header(g: &Gguf) -> Result<(), String> {
    let mut names = std::collections::HashSet::new();
    for t in &g.tensors {
        if !names.insert(t.name.as_str()) {
            return Err(format!("duplicate tensor {} accepted", t.name));
        }
        let end = g
            .data_offset
            .checked_add(t.offset)
            .and_then(|o| o.checked_add(t.n_bytes().0));
        if end.is_none_or(|e| e > g.file_bytes.0) {
            return Err(format!("tensor {} ends past the file", t.name));
        }
    }
    Ok(())
}

/// Uses the facts the way `model info`, `calc` and the roofline do.
fn exercise(f: &ModelFacts) -> usize {
    let mut n = 0usize;
    for c in [
        CacheType::F16,
        CacheType::Bf16,
        CacheType::F32,
        CacheType::Q8_0,
        CacheType::Q4_0,
    ] {
        n += f.kv_bytes_per_token(c).0 as usize;
        n += f.kv_bytes_read_at_depth(4096, c).0 as usize;
    }
    n += f.attention_flops_per_token(4096) as usize;
    n += f.model_type().len() + f.label().len();
    n += f.dominant_type().map_or(0, |t| t.0 as usize);
    n += f.class_bytes(TensorClass::Attention).0 as usize;
    let roof = Roof {
        label: "fuzz".into(),
        bandwidth: Some(Sourced {
            value: Gbps(100.0),
            source: "given".into(),
        }),
        peak: Some(Sourced {
            value: Gflops(1000.0),
            source: "given".into(),
        }),
        memory: vec![Bytes(16 << 30)],
        floor: None,
    };
    let p = CalcParams {
        depth: 4096,
        batch: 4,
        cache: CacheType::F16,
        n_prompt: 512,
    };
    let r = calc::calc(
        &CalcModel::from_facts(f.clone(), WeightBasis::File, "fuzz"),
        &roof,
        &p,
    );
    n += r.fits.len();
    n += serde_json::to_string(f).map_or(0, |s| s.len());
    n
}

/// Runs the reader and the facts on one input. Panics are caught and returned.
pub fn run_case(bytes: &[u8], claimed_len: u64) -> Outcome {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let g = match Gguf::parse(bytes, claimed_len, PathBuf::from("fuzz.gguf")) {
            Ok(g) => g,
            Err(e) => return Outcome::ReadErr(error_kind(&e)),
        };
        if let Err(m) = check_header(&g) {
            return Outcome::Invariant(m);
        }
        let f = match ModelFacts::from_gguf(&g) {
            Ok(f) => f,
            Err(e) => return Outcome::FactsErr(error_kind(&e)),
        };
        if let Err(m) = check_facts(&g, &f) {
            return Outcome::Invariant(m);
        }
        std::hint::black_box(exercise(&f));
        Outcome::FactsOk
    }));
    r.unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic".into());
        Outcome::Panic(msg)
    })
}

/// Counters of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Cases run.
    pub cases: u64,
    /// Cases whose facts were derived and checked.
    pub facts_ok: u64,
    pub panics: u64,
    /// Broken invariants.
    pub invariants: u64,
    /// Refusals by kind (reader and facts).
    pub errors: BTreeMap<&'static str, u64>,
    /// Cases per mutation kind.
    pub mutations: BTreeMap<Mutation, u64>,
}

impl Stats {
    /// Counts one case.
    pub fn add(&mut self, case: &Case, o: &Outcome) {
        self.cases += 1;
        for m in &case.mutations {
            *self.mutations.entry(*m).or_default() += 1;
        }
        match o {
            Outcome::FactsOk => self.facts_ok += 1,
            Outcome::FactsErr(k) | Outcome::ReadErr(k) => *self.errors.entry(k).or_default() += 1,
            Outcome::Panic(_) => self.panics += 1,
            Outcome::Invariant(_) => self.invariants += 1,
        }
    }

    /// `kind n, kind n, …`, most frequent first.
    pub fn errors_line(&self) -> String {
        let mut v: Vec<_> = self.errors.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        v.iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Runs cases `range` of run `seed`; `on_finding` sees every panic or broken
/// invariant with its case number and case. (The caller decides what the panic
/// hook prints.)
pub fn run_range(
    seeds: &[Seed],
    seed: u64,
    range: Range<u64>,
    stats: &mut Stats,
    mut on_finding: impl FnMut(u64, &Case, &Outcome),
) {
    for i in range {
        let case = make_case(seeds, seed, i);
        let o = run_case(&case.bytes, case.claimed_len);
        stats.add(&case, &o);
        if o.is_finding() {
            on_finding(i, &case, &o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_is_a_valid_model_and_walks() {
        for s in synthetic_seeds() {
            assert_eq!(
                run_case(&s.bytes, s.claimed_len),
                Outcome::FactsOk,
                "{}",
                s.name
            );
            let n_kv = u64::from_le_bytes(s.bytes[16..24].try_into().unwrap());
            assert_eq!(s.layout.kv.len() as u64, n_kv, "{}", s.name);
            assert!(s.layout.fields.len() > 10, "{}", s.name);
        }
    }

    #[test]
    fn header_bytes_round_trips_a_shape_through_the_reader() {
        // The preset's facts computed in memory vs. from the serialized header
        // read back by the reader with the file length it describes.
        let shape = memwall_core::probe::shape::preset("qwen2.5-0.5b")
            .unwrap()
            .shape;
        let r = memwall_core::probe::shape::Recipe::parse("Q4_K_M").unwrap();
        let direct = shape.facts(&r, "x").unwrap();
        let HeaderBytes {
            bytes,
            file_len: len,
        } = header_bytes(&shape.header(&r, "x").unwrap());
        let g = Gguf::parse(&bytes[..], len, PathBuf::from("x.gguf")).unwrap();
        let f = ModelFacts::from_gguf(&g).unwrap();
        assert_eq!(f.n_params, direct.n_params);
        assert_eq!(f.tensor_bytes, direct.tensor_bytes);
        assert_eq!(f.streamed_bytes, direct.streamed_bytes);
        assert_eq!(f.n_head_kv, direct.n_head_kv);
        assert_eq!(g.data_offset + direct.tensor_bytes.0, len + pad_sum(&g));
    }

    /// Padding bytes between tensors (the data section is packed with padding).
    fn pad_sum(g: &Gguf) -> u64 {
        let last = g.tensors.last().unwrap();
        let packed_end = last.offset + last.n_bytes().0;
        g.tensors.iter().map(|t| t.n_bytes().0).sum::<u64>() - packed_end
    }

    #[test]
    fn a_few_thousand_cases_find_nothing_and_reach_every_check() {
        let seeds = synthetic_seeds();
        let mut st = Stats::default();
        let mut found = Vec::new();
        run_range(&seeds, 7, 0..4000, &mut st, |i, c, o| {
            found.push(format!(
                "case {i} ({}, {:?}): {o:?}",
                seeds[c.seed].name, c.mutations
            ))
        });
        assert!(found.is_empty(), "{}", found.join("\n"));
        assert_eq!(st.cases, 4000);
        assert_eq!(st.panics + st.invariants, 0);
        // The mutations are not degenerate: some cases survive to the facts, and
        // the refusals spread over the reader's checks.
        assert!(st.facts_ok > 40, "{st:?}");
        for k in [
            "short read",
            "header count too large",
            "duplicate key",
            "duplicate tensor name",
            "tensor data past the end",
            "tensor offset not packed",
            "unknown ggml type",
            "bad value type",
            "length over cap",
        ] {
            assert!(st.errors.contains_key(k), "no {k:?}: {}", st.errors_line());
        }
        for m in [
            Mutation::FieldBoundary,
            Mutation::DuplicateKv,
            Mutation::DuplicateTensor,
            Mutation::Truncate,
            Mutation::ClaimedLen,
        ] {
            assert!(st.mutations.get(&m).is_some_and(|&n| n > 0), "{m:?}");
        }
        // Deterministic: the same run seed gives the same cases.
        let mut again = Stats::default();
        run_range(&seeds, 7, 0..4000, &mut again, |_, _, _| {});
        assert_eq!(st, again);
        let (a, b) = (make_case(&seeds, 7, 123), make_case(&seeds, 7, 123));
        assert_eq!((a.bytes, a.claimed_len), (b.bytes, b.claimed_len));
    }
}
