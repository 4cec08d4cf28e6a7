//! Shape-exact synthetic models against real ones: the synthesized twin of the
//! catalogue's Qwen2.5-Coder-0.5B Q4_K_M has the real file's tensors byte for byte
//! in size and type, llama.cpp loads it and decodes it, and every synthesized preset
//! that fits loads and decodes. Serialized with the engine lock.
#![cfg(feature = "llama")]

use memwall_core::measure::engine::llama::LlamaModelHandle;
use memwall_core::measure::engine::{Engine, EngineConfig, argmax};
use memwall_core::probe::gguf::Gguf;
use memwall_core::probe::model::ModelFacts;
use memwall_core::probe::shape::{Recipe, preset};
use memwall_core::probe::synth;
use memwall_testkit as testing;

fn decode_a_few(path: &std::path::Path) {
    let h = LlamaModelHandle::load(path, 0).unwrap();
    let mut e = h
        .engine(&EngineConfig {
            n_ctx: 128,
            n_batch: 64,
            n_ubatch: 64,
            ..Default::default()
        })
        .unwrap();
    let prompt: Vec<i32> = (300..316).collect();
    e.prefill(&prompt, 0, 0, true).unwrap();
    let mut tok = argmax(e.logits(0).unwrap());
    for i in 0..8 {
        let l = e.logits(0).unwrap();
        assert!(l.iter().all(|x| x.is_finite()), "non-finite logits");
        e.decode_one(tok, (prompt.len() + i) as u32, 0).unwrap();
        tok = argmax(e.logits(0).unwrap());
    }
    assert!((tok as usize) < e.n_vocab());
}

#[test]
fn synthetic_twin_of_qwen_coder_0_5b_matches_the_real_file_and_runs() {
    let Some(real) = testing::model("qwen2.5-coder-0.5b-q4_k_m") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("twin.gguf");
    let mut s = preset("qwen2.5-0.5b").unwrap().shape;
    // The two known layout differences of Qwen's own GGUF (see shape.rs tests).
    s.tied_embeddings = false;
    s.lexicographic_order = true;
    let r = Recipe::parse("Q4_K_M").unwrap();
    let f = synth::write(&s, &r, "twin", 42, &out, |_, _| {}).unwrap();
    let real_f = ModelFacts::open(&real).unwrap();
    assert!(f.synthetic && !real_f.synthetic);
    assert_eq!(f.tensor_bytes, real_f.tensor_bytes);
    assert_eq!(f.streamed_bytes, real_f.streamed_bytes);
    assert_eq!(f.n_params, real_f.n_params);
    assert_eq!(f.type_counts, real_f.type_counts);
    // Tensor by tensor: same names, dims, types. (The order inside the file differs:
    // Qwen's file puts output/token_embd first and orders each block's tensors its own
    // way; only the block order matters to the quantizer, and none of it to the compute.)
    let (a, b) = (Gguf::open(&out).unwrap(), Gguf::open(&real).unwrap());
    let key = |g: &Gguf| -> Vec<(String, Vec<u64>, u32)> {
        let mut v: Vec<_> = g
            .tensors
            .iter()
            .map(|t| (t.name.clone(), t.dims.clone(), t.ggml_type.0))
            .collect();
        v.sort();
        v
    };
    assert_eq!(key(&a), key(&b));
    let _lock = testing::engine_lock();
    decode_a_few(&out);
}

#[test]
fn small_presets_synthesize_load_and_decode() {
    if testing::model("qwen2.5-coder-0.5b-q4_k_m").is_none() {
        // Same gate as the other engine tests: CI fetches models and builds llama.cpp.
        return;
    }
    let d = tempfile::tempdir().unwrap();
    for (p, q) in [
        ("qwen2.5-0.5b", "Q4_K_M"),
        ("qwen2.5-0.5b", "Q8_0"),
        ("gemma-3-270m", "Q4_K_M"),
        ("qwen2.5-1.5b", "Q4_0"),
    ] {
        let s = preset(p).unwrap().shape;
        let out = d.path().join(format!("{p}-{q}.gguf"));
        let f = synth::write(&s, &Recipe::parse(q).unwrap(), p, 1, &out, |_, _| {}).unwrap();
        assert!(f.synthetic);
        let _lock = testing::engine_lock();
        decode_a_few(&out);
        std::fs::remove_file(&out).unwrap();
    }
}
