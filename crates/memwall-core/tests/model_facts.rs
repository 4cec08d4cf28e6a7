//! Model facts of the four catalogue models against values computed independently
//! by llama.cpp's gguf-py (`tests/fixtures/gguf_reference.py` →
//! `tests/fixtures/model_facts.json`).

use memwall_core::probe::model::{CacheType, ModelFacts, TensorClass};
use memwall_testkit as testing;

const MODELS: [(&str, &str); 4] = [
    (
        "qwen2.5-coder-0.5b-q4_k_m",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    ),
    (
        "qwen2.5-coder-1.5b-q4_k_m",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    ),
    ("smollm2-135m-q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    ("gemma-3-270m-q4_k_m", "gemma-3-270m-q4_k_m.gguf"),
];

fn reference() -> serde_json::Value {
    serde_json::from_str(include_str!("../../../tests/fixtures/model_facts.json")).unwrap()
}

#[test]
fn facts_match_gguf_py_on_all_four_models() {
    let refs = reference();
    for (name, file) in MODELS {
        let Some(path) = testing::model(name) else {
            continue;
        };
        let f = ModelFacts::open(&path).unwrap();
        let r = &refs[file];
        let u = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{file}: {k}"));
        assert_eq!(
            f.architecture,
            r["architecture"].as_str().unwrap(),
            "{file}"
        );
        assert_eq!(f.tensor_bytes.0, u("tensor_bytes"), "{file} tensor bytes");
        assert_eq!(
            f.class_bytes(TensorClass::TokenEmbedding).0,
            u("token_embd_bytes"),
            "{file} token_embd"
        );
        assert_eq!(
            f.token_embd_row_bytes.0,
            u("token_embd_row_bytes"),
            "{file} row"
        );
        assert_eq!(
            f.tied_embeddings,
            r["tied_embeddings"].as_bool().unwrap(),
            "{file} tied"
        );
        assert_eq!(f.streamed_bytes.0, u("streamed_bytes"), "{file} streamed");
        assert_eq!(f.n_params, u("n_params"), "{file} params");
        assert_eq!(f.n_layer as u64, u("n_layer"));
        assert_eq!(f.n_head as u64, u("n_head"));
        assert!(
            f.n_head_kv.iter().all(|&h| h as u64 == u("n_head_kv")),
            "{file} kv heads"
        );
        assert_eq!(f.head_dim_k as u64, u("head_dim_k"));
        assert_eq!(f.head_dim_v as u64, u("head_dim_v"));
        assert_eq!(
            f.kv_bytes_per_token(CacheType::F16).0,
            u("kv_bytes_per_token_f16"),
            "{file} kv"
        );
        assert_eq!(
            f.sliding_window,
            r["sliding_window"].as_u64(),
            "{file} window"
        );
        assert_eq!(f.n_vocab, u("n_vocab"));
        assert_eq!(f.file_bytes.0, u("file_bytes"));
    }
}

#[test]
fn qwen_1_5b_values_from_the_issue() {
    let Some(path) = testing::model("qwen2.5-coder-1.5b-q4_k_m") else {
        return;
    };
    let f = ModelFacts::open(path).unwrap();
    assert_eq!(f.tensor_bytes.0, 1_111_370_240);
    assert_eq!(f.class_bytes(TensorClass::TokenEmbedding).0, 131_272_704);
    assert!(!f.tied_embeddings);
    // Hand: 28 layers × 2 KV heads × (128 + 128) × 2 B = 28,672 B per token.
    assert_eq!(f.kv_bytes_per_token(CacheType::F16).0, 28_672);
}

#[test]
fn gemma3_window_limits_the_kv_read() {
    let Some(path) = testing::model("gemma-3-270m-q4_k_m") else {
        return;
    };
    let f = ModelFacts::open(path).unwrap();
    // 18 layers, 1 KV head, 256+256, f16 = 1024 B/layer/token; layers 5, 11, 17 global.
    assert_eq!(f.swa_layers.iter().filter(|l| !**l).count(), 3);
    // At depth 2048: 15 local layers read 512 tokens, 3 global read 2048.
    assert_eq!(
        f.kv_bytes_read_at_depth(2048, CacheType::F16).0,
        1024 * (15 * 512 + 3 * 2048)
    );
    // Below the window every layer reads d.
    assert_eq!(
        f.kv_bytes_read_at_depth(100, CacheType::F16).0,
        1024 * 18 * 100
    );
}
