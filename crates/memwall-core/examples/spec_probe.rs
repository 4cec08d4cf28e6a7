//! Probe: are the target's logits for one position the same whatever the batch
//! shape of the passes that computed it? (Diagnoses greedy-gate differences.)
//! usage: cargo run --release --example spec_probe -- MODEL.gguf "text" [fa: on|off|auto]
use memwall_core::measure::engine::llama::LlamaModelHandle;
use memwall_core::measure::engine::{BatchItem, Engine, EngineConfig, Vocab, argmax};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let fa = match a.get(3).map(String::as_str) {
        Some("on") => Some(true),
        Some("off") => Some(false),
        _ => None,
    };
    let path = std::path::Path::new(&a[1]);
    let h = if a.get(4).map(String::as_str) == Some("norepack") {
        LlamaModelHandle::load_no_repack(path).unwrap()
    } else {
        LlamaModelHandle::load(path, 0).unwrap()
    };
    let cfg = EngineConfig {
        n_ctx: 512,
        n_batch: 512,
        n_ubatch: 512,
        n_threads: 2,
        n_threads_batch: 2,
        flash_attn: fa,
        ..Default::default()
    };
    let mut e = h.engine(&cfg).unwrap();
    let toks = e.tokenize(&a[2], true).unwrap();
    let n = toks.len();
    let row = |e: &mut memwall_core::measure::engine::llama::LlamaEngine,
               split: usize,
               extra: usize|
     -> Vec<f32> {
        e.kv_clear();
        if split > 0 {
            e.prefill(&toks[..split], 0, 0, false).unwrap();
        }
        let mut items: Vec<BatchItem> = (split..n)
            .map(|i| BatchItem {
                token: toks[i],
                pos: i as u32,
                seq: 0,
                logits: i == n - 1,
            })
            .collect();
        for j in 0..extra {
            items.push(BatchItem {
                token: toks[j % n],
                pos: (n + j) as u32,
                seq: 0,
                logits: false,
            });
        }
        e.decode(&items).unwrap();
        e.logits(0).unwrap().to_vec()
    };
    let reference = row(&mut e, 0, 0);
    println!(
        "n = {n}, fa = {fa:?}, {:?}, reference argmax {}",
        a.get(4),
        argmax(&reference)
    );
    for (split, extra) in [
        (n - 1, 0),
        (n - 1, 4),
        (n - 1, 5),
        (n - 1, 6),
        (n - 1, 7),
        (n - 1, 8),
        (n - 1, 15),
        (n - 9, 0),
        (n - 8, 0),
        (n - 7, 0),
        (n - 6, 0),
        (0, 1),
    ] {
        let r = row(&mut e, split, extra);
        let d = r
            .iter()
            .zip(&reference)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        println!(
            "prefill {split:>3} then batch of {:>2} (+{extra} after): max |Δlogit| {d:.6}, argmax {}",
            n - split + extra,
            argmax(&r)
        );
    }
}
