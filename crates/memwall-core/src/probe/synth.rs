//! Shape-exact synthetic models: a valid GGUF with the exact tensor names, dims
//! and ggml types of a [`ModelShape`] under a [`Recipe`], seeded random weights, and
//! a minimal tokenizer, so llama.cpp loads it and runs it.
//!
//! Decode speed of a dense model does not depend on the weight values (the same
//! bytes are streamed and the same kernels run), so a synthetic model measures a
//! shape's roofline without downloading its weights. **The weights are random and
//! the text is meaningless**: the file carries `memwall.synthetic = true`, which
//! [`ModelFacts::synthetic`] reads and every bench row and export carries.
//!
//! **Blocks.** Weights are generated directly as well-formed ggml blocks: every byte
//! of a block is random except its f16 scale fields (`d`, `dmin`), which are set to a
//! small normal f16 (2⁻¹³) so every dequantized value is finite and small. Layouts
//! (`ggml-common.h`): Q4_0 `{d, qs[16]}`, Q4_1 `{d, m, qs[16]}`, Q5_0 `{d, qh[4],
//! qs[16]}`, Q5_1 `{d, m, qh[4], qs[16]}`, Q8_0 `{d, qs[32]}`, Q2_K `{scales[16],
//! qs[64], d, dmin}`, Q3_K `{hmask[32], qs[64], scales[12], d}`, Q4_K/Q5_K `{d, dmin,
//! …}`, Q6_K `{ql[128], qh[64], scales[16], d}`. F16/BF16 weights are random with
//! magnitude ≤ 2⁻⁶; norms are 1.0 and biases 0.0 (F32).
//!
//! **Tokenizer.** A SentencePiece-style (`tokenizer.ggml.model = "llama"`) vocabulary
//! of exactly `n_vocab` tokens: `<unk>`, `<s>`, `</s>`, the 256 byte tokens
//! `<0x00>`…`<0xFF>`, then `▁t259`, `▁t260`, … so token ids cover the embedding rows.

use crate::probe::gguf::{GgmlType, Value};
use crate::probe::model::ModelFacts;
use crate::probe::shape::{ModelShape, Recipe, ShapeError};
use std::io::{BufWriter, Write};
use std::path::Path;

/// Errors of the synthesizer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SynthError {
    /// The shape or recipe is invalid.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// A format the synthesizer cannot write.
    #[error("{0}")]
    Unsupported(String),
    /// Writing failed.
    #[error("{path}: {source}")]
    Io {
        /// Path of the file the error is about.
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The written file did not read back.
    #[error("reading back {0}")]
    ReadBack(#[from] crate::probe::gguf::GgufError),
}

/// The f16 bits of 2⁻¹³ (exponent 2, mantissa 0): the scale of every synthetic block.
pub const BLOCK_SCALE_F16: u16 = 0x0800;

/// Byte offsets of the f16 scale fields in one block of `ty`, or `None` when the
/// synthesizer does not know the layout.
pub fn scale_offsets(ty: GgmlType) -> Option<&'static [usize]> {
    Some(match ty.0 {
        2 | 6 | 8 => &[0],  // Q4_0, Q5_0, Q8_0: d first
        3 | 7 => &[0, 2],   // Q4_1, Q5_1: d, m
        10 => &[80, 82],    // Q2_K: d, dmin last
        11 => &[108],       // Q3_K: d last
        12 | 13 => &[0, 2], // Q4_K, Q5_K: d, dmin first
        14 => &[208],       // Q6_K: d last
        _ => return None,
    })
}

/// SplitMix64 (Steele, Lea & Flood 2014): a fast seeded generator; every byte of
/// the file follows from the seed.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

/// How a tensor's bytes are generated.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fill {
    /// Every f32 the same (norm weights 1, biases 0): no draws.
    F32Const(f32),
    /// f32 uniform in ±0.01: one draw per 4 bytes.
    F32,
    /// f16 of magnitude 2^-8…2^-6, random sign and mantissa: one draw per 2 bytes.
    F16,
    /// bf16 likewise.
    Bf16,
    /// Random bytes (quantized blocks, scales set after): one draw per 8 bytes.
    Bytes,
}

impl Fill {
    /// Bytes per draw (`None`: no draws).
    fn stride(self) -> Option<usize> {
        match self {
            Fill::F32Const(_) => None,
            Fill::F32 => Some(4),
            Fill::F16 | Fill::Bf16 => Some(2),
            Fill::Bytes => Some(8),
        }
    }

    /// Fills `b` with draws from `rng` in order (`b.len()` a multiple of 4 for
    /// f32, of 2 for f16/bf16; `Bytes` draws once per started 8 bytes).
    fn fill(self, b: &mut [u8], rng: &mut SplitMix) {
        match self {
            Fill::F32Const(v) => {
                for c in b.chunks_mut(4) {
                    c.copy_from_slice(&v.to_le_bytes());
                }
            }
            Fill::F32 => {
                for c in b.chunks_mut(4) {
                    let v = ((rng.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.02;
                    c.copy_from_slice(&v.to_le_bytes());
                }
            }
            Fill::F16 => {
                for c in b.chunks_mut(2) {
                    // sign | exponent 7..=9 (2^-8 … 2^-6) | random mantissa
                    let r = rng.next();
                    let bits = ((r & 1) << 15) | ((7 + (r >> 1) % 3) << 10) | ((r >> 8) & 0x3FF);
                    c.copy_from_slice(&(bits as u16).to_le_bytes());
                }
            }
            Fill::Bf16 => {
                for c in b.chunks_mut(2) {
                    let r = rng.next();
                    let bits = ((r & 1) << 15) | ((119 + (r >> 1) % 3) << 7) | ((r >> 8) & 0x7F);
                    c.copy_from_slice(&(bits as u16).to_le_bytes());
                }
            }
            Fill::Bytes => rng.fill(b),
        }
    }
}

/// [`Fill::fill`] of each `unit`-byte piece of `b` in turn (the last may be shorter),
/// on `threads` threads: each piece starts from the generator state the pieces
/// before it leave (SplitMix's state after `n` draws is `state + n·γ`; a piece of
/// random bytes draws once per started 8 bytes), so the bytes are those of one
/// sequential pass, piece by piece; `rng` ends where that pass would leave it.
fn fill_units(b: &mut [u8], unit: usize, kind: Fill, rng: &mut SplitMix, threads: usize) {
    let Some(stride) = kind.stride() else {
        kind.fill(b, rng);
        return;
    };
    let pieces: Vec<&mut [u8]> = b.chunks_mut(unit.max(1)).collect();
    let mut starts = Vec::with_capacity(pieces.len());
    let mut state = rng.0;
    for p in &pieces {
        starts.push(state);
        state = state.wrapping_add((p.len().div_ceil(stride) as u64).wrapping_mul(GAMMA));
    }
    let per = pieces.len().div_ceil(threads.max(1)).max(1);
    let mut work: Vec<(u64, &mut [u8])> = starts.into_iter().zip(pieces).collect();
    if threads <= 1 || work.len() <= 1 {
        for (st, p) in work {
            kind.fill(p, &mut SplitMix(st));
        }
    } else {
        std::thread::scope(|sc| {
            while !work.is_empty() {
                let mine: Vec<(u64, &mut [u8])> = work.drain(..per.min(work.len())).collect();
                sc.spawn(move || {
                    for (st, p) in mine {
                        kind.fill(p, &mut SplitMix(st));
                    }
                });
            }
        });
    }
    rng.0 = state;
}

/// SplitMix64's increment.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// GGUF value type ids (gguf.md).
mod vt {
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// Appends one metadata pair. Unsigned integers that fit are written as u32 and
/// floats as f32, the types llama.cpp's loader asks for.
fn put_kv(out: &mut Vec<u8>, key: &str, v: &Value) {
    put_str(out, key);
    match v {
        Value::U64(x) if *x <= u32::MAX as u64 => {
            out.extend(vt::U32.to_le_bytes());
            out.extend((*x as u32).to_le_bytes());
        }
        Value::U64(x) => {
            out.extend(vt::U64.to_le_bytes());
            out.extend(x.to_le_bytes());
        }
        Value::I64(x) => {
            out.extend(vt::I32.to_le_bytes());
            out.extend((*x as i32).to_le_bytes());
        }
        Value::F64(x) => {
            out.extend(vt::F32.to_le_bytes());
            out.extend((*x as f32).to_le_bytes());
        }
        Value::Bool(b) => {
            out.extend(vt::BOOL.to_le_bytes());
            out.push(*b as u8);
        }
        Value::Str(s) => {
            out.extend(vt::STRING.to_le_bytes());
            put_str(out, s);
        }
        Value::Array { .. } => unreachable!("arrays are written by put_tokenizer"),
    }
}

fn put_tokenizer(out: &mut Vec<u8>, n_vocab: u64) -> u64 {
    let mut n_kv = 0;
    put_kv(out, "tokenizer.ggml.model", &Value::Str("llama".into()));
    n_kv += 1;
    let token = |i: u64| -> String {
        match i {
            0 => "<unk>".into(),
            1 => "<s>".into(),
            2 => "</s>".into(),
            3..=258 => format!("<0x{:02X}>", i - 3),
            _ => format!("\u{2581}t{i}"),
        }
    };
    put_str(out, "tokenizer.ggml.tokens");
    out.extend(vt::ARRAY.to_le_bytes());
    out.extend(vt::STRING.to_le_bytes());
    out.extend(n_vocab.to_le_bytes());
    for i in 0..n_vocab {
        put_str(out, &token(i));
    }
    put_str(out, "tokenizer.ggml.scores");
    out.extend(vt::ARRAY.to_le_bytes());
    out.extend(vt::F32.to_le_bytes());
    out.extend(n_vocab.to_le_bytes());
    for i in 0..n_vocab {
        let s = if i < 259 { 0.0f32 } else { -(i as f32) };
        out.extend(s.to_le_bytes());
    }
    put_str(out, "tokenizer.ggml.token_type");
    out.extend(vt::ARRAY.to_le_bytes());
    out.extend(vt::I32.to_le_bytes());
    out.extend(n_vocab.to_le_bytes());
    for i in 0..n_vocab {
        // llama_token_type: 1 normal, 2 unknown, 3 control, 6 byte.
        let t: i32 = match i {
            0 => 2,
            1 | 2 => 3,
            3..=258 => 6,
            _ => 1,
        };
        out.extend(t.to_le_bytes());
    }
    n_kv += 3;
    for (k, v) in [
        ("tokenizer.ggml.unknown_token_id", 0u64),
        ("tokenizer.ggml.bos_token_id", 1),
        ("tokenizer.ggml.eos_token_id", 2),
    ] {
        put_kv(out, k, &Value::U64(v));
        n_kv += 1;
    }
    n_kv
}

/// Writes the synthetic GGUF for `shape` under `recipe` to `out` (atomically: a
/// temporary name renamed into place) and returns the facts read back from it.
/// `progress(bytes_written, total)` is called after each tensor.
///
/// Cost: one pass of writing `tensor_bytes` (≈ 4.7 GB for a 7B Q4_K_M).
///
/// # Errors
/// [`SynthError::Unsupported`] for MLX recipes (not GGUF), vocabularies under 259
/// tokens or types without a known block layout; [`SynthError::Io`] naming the file.
pub fn write(
    shape: &ModelShape,
    recipe: &Recipe,
    name: &str,
    seed: u64,
    out: &Path,
    progress: impl FnMut(u64, u64),
) -> Result<ModelFacts, SynthError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    write_with_threads(shape, recipe, name, seed, out, threads, progress)
}

/// [`write`] with the weights generated on `threads` threads (the same bytes for
/// any count).
///
/// # Errors
/// As [`write`].
pub fn write_with_threads(
    shape: &ModelShape,
    recipe: &Recipe,
    name: &str,
    seed: u64,
    out: &Path,
    threads: usize,
    mut progress: impl FnMut(u64, u64),
) -> Result<ModelFacts, SynthError> {
    let threads = threads.max(1);
    if recipe.mlx {
        return Err(SynthError::Unsupported(format!(
            "{} is an MLX format, not GGUF: synthesize a GGUF recipe (Q4_0 has the same 4.5 bits/weight)",
            recipe.name
        )));
    }
    if shape.n_vocab < 259 {
        return Err(SynthError::Unsupported(
            "--vocab must be ≥ 259 (3 special + 256 byte tokens)".into(),
        ));
    }
    let header = shape.header(recipe, name)?;
    for t in &header.tensors {
        let blck = t.ggml_type.traits().map_or(1, |x| x.block_size);
        if blck > 1 && scale_offsets(t.ggml_type).is_none() {
            return Err(SynthError::Unsupported(format!(
                "{}: no synthetic block layout for {}",
                t.name, t.ggml_type
            )));
        }
    }
    let io = |e: std::io::Error, p: &Path| SynthError::Io {
        path: p.display().to_string(),
        source: e,
    };
    let tmp = out.with_extension("gguf.partial");
    let file = std::fs::File::create(&tmp).map_err(|e| io(e, &tmp))?;
    let mut w = BufWriter::with_capacity(8 << 20, file);

    let mut kv = Vec::new();
    let mut n_kv = 0u64;
    for (k, v) in shape.metadata(recipe, name) {
        put_kv(&mut kv, &k, &v);
        n_kv += 1;
    }
    for (k, v) in [
        ("memwall.synthetic", Value::Bool(true)),
        ("memwall.synthetic.seed", Value::U64(seed)),
        (
            "memwall.synthetic.note",
            Value::Str(
                "random weights written by `memwall model synth`: the text is meaningless, the speed is real"
                    .into(),
            ),
        ),
        ("general.alignment", Value::U64(32)),
    ] {
        put_kv(&mut kv, k, &v);
        n_kv += 1;
    }
    n_kv += put_tokenizer(&mut kv, shape.n_vocab);

    let mut head = b"GGUF".to_vec();
    head.extend(3u32.to_le_bytes());
    head.extend((header.tensors.len() as u64).to_le_bytes());
    head.extend(n_kv.to_le_bytes());
    head.extend(kv);
    for t in &header.tensors {
        put_str(&mut head, &t.name);
        head.extend((t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            head.extend(d.to_le_bytes());
        }
        head.extend(t.ggml_type.0.to_le_bytes());
        head.extend(t.offset.to_le_bytes());
    }
    while !head.len().is_multiple_of(32) {
        head.push(0);
    }
    w.write_all(&head).map_err(|e| io(e, &tmp))?;

    let total = header.file_bytes.0;
    let mut rng = SplitMix(seed ^ 0x6D65_6D77_616C_6C21);
    let mut written = 0u64;
    // Weights are generated in units of whole blocks ≤ 1 MiB; with threads, 64 units
    // at a time, spread over them (fill_units: the same bytes as one thread).
    const UNIT: u64 = 1 << 20;
    let group: u64 = if threads > 1 { 64 } else { 1 };
    let mut buf = vec![0u8; (UNIT * group) as usize];
    for t in &header.tensors {
        let traits = t.ggml_type.traits().expect("header types are known");
        let (blck, bsize) = (traits.block_size, traits.type_size);
        let n_bytes = t.n_bytes().0;
        let scales = scale_offsets(t.ggml_type);
        let kind = match (t.ggml_type.0, blck) {
            (0, _) if t.name.contains("_norm.weight") => Fill::F32Const(1.0),
            (0, _) if t.name.ends_with(".bias") => Fill::F32Const(0.0),
            (0, _) => Fill::F32,
            (1, _) => Fill::F16,
            (30, _) => Fill::Bf16,
            _ => Fill::Bytes,
        };
        let mut left = n_bytes;
        while left > 0 {
            // Whole blocks per unit.
            let unit = UNIT / bsize * bsize;
            let chunk = (unit * group).min(left) as usize;
            let b = &mut buf[..chunk];
            fill_units(b, unit as usize, kind, &mut rng, threads);
            if kind == Fill::Bytes {
                let offs = scales.expect("checked above");
                for blk in b.chunks_mut(bsize as usize) {
                    for &o in offs {
                        blk[o..o + 2].copy_from_slice(&BLOCK_SCALE_F16.to_le_bytes());
                    }
                }
            }
            w.write_all(b).map_err(|e| io(e, &tmp))?;
            left -= chunk as u64;
        }
        let pad = n_bytes.div_ceil(32) * 32 - n_bytes;
        w.write_all(&vec![0u8; pad as usize])
            .map_err(|e| io(e, &tmp))?;
        written += n_bytes + pad;
        progress(written, total);
    }
    let file = w.into_inner().map_err(|e| io(e.into_error(), &tmp))?;
    file.sync_all().map_err(|e| io(e, &tmp))?;
    drop(file);
    std::fs::rename(&tmp, out).map_err(|e| io(e, out))?;
    Ok(ModelFacts::open(out)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::gguf::Gguf;
    use crate::probe::model::CacheType;
    use crate::probe::shape::{Arch, preset};

    fn tiny() -> ModelShape {
        ModelShape {
            arch: Arch::Qwen2,
            n_layer: 2,
            n_embd: 256,
            n_head: 4,
            n_head_kv: 2,
            head_dim: None,
            n_ff: 512,
            n_vocab: 300,
            tied_embeddings: false,
            n_expert: 0,
            n_expert_used: 0,
            n_ff_exp: 0,
            sliding_window: None,
            n_ctx_train: 2048,
            lexicographic_order: false,
        }
    }

    #[test]
    fn synthetic_file_reads_back_as_the_calculator_predicts() {
        let d = tempfile::tempdir().unwrap();
        for q in ["Q4_K_M", "Q8_0", "F16", "Q6_K", "Q4_0", "BF16"] {
            let r = Recipe::parse(q).unwrap();
            let p = d.path().join(format!("t-{q}.gguf"));
            let f = write(&tiny(), &r, "tiny", 7, &p, |_, _| {}).unwrap();
            let calc = tiny().facts(&r, "tiny").unwrap();
            assert!(f.synthetic, "{q}");
            assert_eq!(f.tensor_bytes, calc.tensor_bytes, "{q}");
            assert_eq!(f.streamed_bytes, calc.streamed_bytes, "{q}");
            assert_eq!(f.n_params, calc.n_params, "{q}");
            assert_eq!(f.type_counts, calc.type_counts, "{q}");
            assert_eq!(
                f.kv_bytes_per_token(CacheType::F16),
                calc.kv_bytes_per_token(CacheType::F16)
            );
            assert_eq!(f.quant, q);
            let g = Gguf::open(&p).unwrap();
            assert_eq!(
                g.get("tokenizer.ggml.tokens").and_then(Value::array_len),
                Some(300)
            );
            // Data section = header offset + every tensor padded to 32.
            let len = std::fs::metadata(&p).unwrap().len();
            assert_eq!(len, g.data_offset + calc.file_bytes.0, "{q}");
        }
    }

    #[test]
    fn same_seed_same_bytes_and_scales_are_set() {
        let d = tempfile::tempdir().unwrap();
        let r = Recipe::parse("Q4_K_M").unwrap();
        let (a, b) = (d.path().join("a.gguf"), d.path().join("b.gguf"));
        write(&tiny(), &r, "t", 1, &a, |_, _| {}).unwrap();
        write(&tiny(), &r, "t", 1, &b, |_, _| {}).unwrap();
        let (ba, bb) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        assert_eq!(ba, bb);
        // First Q4_K block of blk.0.attn_q.weight starts with d = dmin = 2^-13.
        let g = Gguf::open(&a).unwrap();
        let t = g.tensor("blk.0.attn_q.weight").unwrap();
        assert_eq!(t.ggml_type.name(), "Q4_K");
        let o = (g.data_offset + t.offset) as usize;
        assert_eq!(&ba[o..o + 4], &[0x00, 0x08, 0x00, 0x08]);
    }

    /// Weights generated on several threads are the bytes of one thread, for every
    /// type the recipes use (f32 norms and biases, f16, bf16, quantized blocks), with
    /// tensors larger than one thread's share.
    #[test]
    fn threads_write_the_bytes_of_one_thread() {
        let d = tempfile::tempdir().unwrap();
        let mut shape = tiny();
        shape.n_vocab = 70_000;
        for q in ["F16", "BF16", "Q4_K_M", "Q8_0"] {
            let r = Recipe::parse(q).unwrap();
            let (a, b) = (d.path().join("a.gguf"), d.path().join("b.gguf"));
            write_with_threads(&shape, &r, "t", 7, &a, 1, |_, _| {}).unwrap();
            write_with_threads(&shape, &r, "t", 7, &b, 5, |_, _| {}).unwrap();
            let (ba, bb) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
            assert_eq!(ba.len(), bb.len(), "{q}");
            assert!(
                ba == bb,
                "{q}: the 5-thread file differs from the 1-thread one"
            );
        }
    }

    #[test]
    fn refuses_mlx_and_tiny_vocab() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.gguf");
        let e = write(
            &tiny(),
            &Recipe::parse("mlx-4bit").unwrap(),
            "t",
            1,
            &p,
            |_, _| {},
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("not GGUF"), "{e}");
        let mut s = tiny();
        s.n_vocab = 100;
        let e = write(&s, &Recipe::parse("Q8_0").unwrap(), "t", 1, &p, |_, _| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("--vocab"), "{e}");
        assert!(preset("qwen2.5-0.5b").is_ok());
    }
}
