//! `memwall model info`.

use super::{parse_cache, resolve_model};
use anyhow::Result;
use memwall_core::probe::model::{ModelFacts, TensorClass};

pub(crate) fn model_info(file: &str, json: bool, cache: &str) -> Result<()> {
    let path = resolve_model(file)?;
    let cache = parse_cache(cache)?;
    let f = ModelFacts::open(&path)?;
    if json {
        let mut v = serde_json::to_value(&f)?;
        v["kv_bytes_per_token"] = f.kv_bytes_per_token(cache).0.into();
        v["kv_cache_type"] = cache.name().into();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let kv_heads = {
        let mut h = f.n_head_kv.clone();
        h.dedup();
        h.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join("/")
    };
    println!("file           {}", f.path.display());
    println!("name           {}", f.name.as_deref().unwrap_or("—"));
    println!("architecture   {}", f.architecture);
    println!("quantization   {}", f.quant);
    if f.synthetic {
        println!(
            "SYNTHETIC      random weights written by `memwall model synth`: text is meaningless, speed is real"
        );
    }
    println!(
        "shape          n_layer {}  n_head {}  n_head_kv {}  head_dim {}{}  n_embd {}  n_ff {}",
        f.n_layer,
        f.n_head,
        kv_heads,
        f.head_dim_k,
        if f.head_dim_v != f.head_dim_k {
            format!("/{}", f.head_dim_v)
        } else {
            String::new()
        },
        f.n_embd,
        f.n_ff.map_or("—".into(), |x| x.to_string())
    );
    println!("vocab          {}", f.n_vocab);
    println!("context_length {}", f.n_ctx_train);
    match f.sliding_window {
        Some(w) => println!(
            "sliding_window {w} on {} of {} layers",
            f.swa_layers.iter().filter(|x| **x).count(),
            f.n_layer
        ),
        None => println!("sliding_window —"),
    }
    if let (Some(n), Some(u)) = (f.n_expert, f.n_expert_used) {
        println!("experts        {u} of {n} per token");
    }
    println!(
        "params         {} ({:.3} B)",
        f.n_params,
        f.n_params as f64 / 1e9
    );
    println!("file bytes     {} B = {}", f.file_bytes.0, f.file_bytes);
    println!("tensor bytes   {} B = {}", f.tensor_bytes.0, f.tensor_bytes);
    println!("bytes per tensor class:");
    for (c, t) in &f.classes {
        let note = match c {
            TensorClass::TokenEmbedding if f.tied_embeddings => {
                "tied: no output.weight, the head reads this whole matrix every step".to_string()
            }
            TensorClass::TokenEmbedding => format!(
                "gathered: one row ({} B) per token",
                f.token_embd_row_bytes.0
            ),
            _ => String::new(),
        };
        println!(
            "  {:<11} {:>14} B = {:<24} {:>4} tensors  {}",
            c.label(),
            t.bytes.0,
            t.bytes.to_string(),
            t.n_tensors,
            note
        );
    }
    println!(
        "streamed per decode step (weights, batch 1): {} B = {}",
        f.streamed_bytes.0, f.streamed_bytes
    );
    println!(
        "active matmul params: {} (≈ {:.2} GFLOP per token)",
        f.active_matmul_params,
        2.0 * f.active_matmul_params as f64 / 1e9
    );
    let kv = f.kv_bytes_per_token(cache);
    println!(
        "KV cache ({}): {} B per token of context = Σ layers kv_heads × (k_dim + v_dim) × {} B",
        cache.name(),
        kv.0,
        cache.bytes_per_element()
    );
    for d in [512u64, 2048, 8192] {
        if d <= f.n_ctx_train.max(d) {
            println!(
                "  read at depth {d:>5}: {}",
                f.kv_bytes_read_at_depth(d, cache)
            );
        }
    }
    let types: Vec<String> = f
        .type_counts
        .iter()
        .map(|(t, n)| format!("{t}×{n}"))
        .collect();
    println!("tensor types   {}", types.join(" "));
    Ok(())
}
