//! Speculative decoding on real models: both rollback edges (0 accepted, all
//! accepted) and the real pair, each checked token for token against plain
//! target-only greedy decoding. Serialized with the engine lock; loud skip when a
//! model is absent (MEMWALL_REQUIRE_MODELS=1 makes that a failure).
#![cfg(feature = "llama")]

use memwall_core::experiments::speculative::drafter::{DraftModel, Ngram, Pick};
use memwall_core::experiments::speculative::pair;
use memwall_core::experiments::speculative::run::{SpecConfig, SpecSession, target_greedy};
use memwall_core::measure::engine::llama::LlamaModelHandle;
use memwall_core::testing;

const PROMPTS: [&str; 2] = [
    "def fibonacci(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "{\"users\": [{\"id\": 1, \"name\": \"Alice\"}, {\"id\": 2, \"name\": ",
];

#[test]
fn rollback_edges_on_a_real_model() {
    let Some(path) = testing::model("qwen2.5-coder-0.5b-q4_k_m") else {
        return;
    };
    let _lock = testing::engine_lock();
    let cfg = pair::engine_config(512, 2);
    let mut target = LlamaModelHandle::load_no_repack(&path)
        .unwrap()
        .engine(&cfg)
        .unwrap();
    let dh = LlamaModelHandle::load_no_repack(&path).unwrap();
    for text in PROMPTS {
        let prompt = memwall_core::measure::engine::Engine::tokenize(&target, text, true).unwrap();
        let want = target_greedy(&mut target, &prompt, 24).unwrap().tokens;
        // All accepted: the draft is the target's own model (same kernels).
        for k in [1, 4, 8] {
            let mut d = DraftModel::new(dh.engine(&cfg).unwrap(), "draft:self".into());
            let mut s = SpecSession::new();
            let out = s
                .generate(&mut target, &mut d, &prompt, &SpecConfig::greedy(k, 24))
                .unwrap();
            assert_eq!(out.tokens, want, "all-accepted edge, k = {k}");
            let st = &out.stats;
            assert_eq!(
                st.n_accepted, st.n_drafted,
                "k = {k}: every draft token accepted"
            );
            assert_eq!(st.n_rejections, 0);
            assert_eq!(st.n_emitted, st.n_accepted + st.n_iterations);
        }
        // None accepted: the draft proposes its least likely token every time.
        for k in [1, 4, 8] {
            let mut d = DraftModel::new(dh.engine(&cfg).unwrap(), "draft:worst".into())
                .with_pick(Pick::Worst);
            let mut s = SpecSession::new();
            let out = s
                .generate(&mut target, &mut d, &prompt, &SpecConfig::greedy(k, 24))
                .unwrap();
            assert_eq!(out.tokens, want, "0-accepted edge, k = {k}");
            assert_eq!(out.stats.n_accepted, 0);
            assert_eq!(out.stats.n_iterations, 24, "one token per iteration");
        }
    }
}

#[test]
fn the_real_pair_is_output_identical() {
    let (Some(t), Some(d)) = (
        testing::model("qwen2.5-coder-1.5b-q4_k_m"),
        testing::model("qwen2.5-coder-0.5b-q4_k_m"),
    ) else {
        return;
    };
    let _lock = testing::engine_lock();
    let mut p = pair::load(&t, Some(&d), 512, 2).unwrap();
    let mut draft = p.draft.take().unwrap();
    let mut ngram = Ngram::default();
    let mut s = SpecSession::new();
    for text in PROMPTS {
        let prompt =
            memwall_core::measure::engine::Engine::tokenize(&p.target, text, true).unwrap();
        let want = target_greedy(&mut p.target, &prompt, 24).unwrap().tokens;
        s.invalidate();
        for k in [2, 5, 8] {
            let out = s
                .generate(
                    &mut p.target,
                    &mut draft,
                    &prompt,
                    &SpecConfig::greedy(k, 24),
                )
                .unwrap();
            assert_eq!(out.tokens, want, "draft model, k = {k}");
            let a = out.stats.acceptance_rate().unwrap();
            assert!(a > 0.0 && a <= 1.0, "{a}");
            let out = s
                .generate(
                    &mut p.target,
                    &mut ngram,
                    &prompt,
                    &SpecConfig::greedy(k, 24),
                )
                .unwrap();
            assert_eq!(out.tokens, want, "n-gram, k = {k}");
        }
    }
}

#[test]
fn set_acceptance_on_a_real_model_is_output_identical_and_hits_its_rate() {
    use memwall_core::experiments::speculative::synth::SetAcceptance;
    let Some(path) = testing::model("qwen2.5-coder-0.5b-q4_k_m") else {
        return;
    };
    let _lock = testing::engine_lock();
    let cfg = pair::engine_config(512, 2);
    let mut target = LlamaModelHandle::load_no_repack(&path)
        .unwrap()
        .engine(&cfg)
        .unwrap();
    // The draft pays a real forward of the same model per drafted token; only its
    // proposal is set.
    let draft = LlamaModelHandle::load(&path, 0)
        .unwrap()
        .engine(&cfg)
        .unwrap();
    let mut d = SetAcceptance::new(draft, "draft:self".into(), 0.7, 5).unwrap();
    let mut s = SpecSession::new();
    let (mut tested, mut accepted) = (0u64, 0u64);
    for text in PROMPTS {
        let prompt = memwall_core::measure::engine::Engine::tokenize(&target, text, true).unwrap();
        let want = target_greedy(&mut target, &prompt, 48).unwrap().tokens;
        s.invalidate();
        let mut full = prompt.clone();
        full.extend(&want);
        d.set_reference(full);
        for k in [3, 6] {
            let out = s
                .generate(&mut target, &mut d, &prompt, &SpecConfig::greedy(k, 48))
                .unwrap();
            assert_eq!(out.tokens, want, "set acceptance 0.7, k = {k}");
            let st = &out.stats;
            assert_eq!(st.n_emitted, st.n_accepted + st.n_iterations);
            assert!(
                st.n_draft_passes >= st.n_drafted,
                "a real draft pass per token"
            );
            tested += st.n_tested();
            accepted += st.n_accepted;
        }
    }
    // Every tested position is a Bernoulli(0.7) draw: within 4 standard deviations.
    let n = tested as f64;
    let a_hat = accepted as f64 / n;
    let bound = 4.0 * (0.7f64 * 0.3 / n).sqrt();
    assert!(
        (a_hat - 0.7).abs() <= bound,
        "α̂ = {a_hat} over {tested} tested positions, bound ±{bound}"
    );
}

/// The gate's job on MLX (4-bit arm), the default model as its own draft: every
/// drafter × k reproduces target-only greedy decoding on MLX token for token, and
/// the stored gate rows carry the MLX build and arm (a llama.cpp gate of the same
/// file does not unlock an MLX bench, nor one MLX arm another).
#[cfg(feature = "mlx")]
#[test]
fn the_gate_passes_on_mlx_with_self_speculation() {
    use memwall_core::experiments::bench::BenchEngine;
    use memwall_core::experiments::speculative::gate::DrafterKind;
    use memwall_core::experiments::speculative::job::{self, GateJobOptions, PairOptions};
    use memwall_core::experiments::speculative::store as sstore;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    let Some(path) = testing::model("qwen2.5-coder-0.5b-q4_k_m") else {
        return;
    };
    let _lock = testing::engine_lock();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let d = tempfile::tempdir().unwrap();
    let store = rt
        .block_on(memwall_core::store::Store::open(&d.path().join("m.db")))
        .unwrap();
    let pair_opts = PairOptions {
        target: path.clone(),
        draft: Some(path.clone()),
        prompts: None,
        n_threads: Some(2),
        n_gpu_layers: 0,
        engine: BenchEngine::Mlx4bit,
    };
    let opts = GateJobOptions {
        ks: vec![1, 2, 4, 6],
        drafters: vec![DrafterKind::DraftModel, DrafterKind::Ngram],
        max_new: 16,
        limit: Some(3),
        sampling_trials: 0,
        guard: memwall_core::measure::guard::GuardOptions {
            allow_battery: true,
            skip_capacity_check: false,
        },
        command: "test".into(),
        ..GateJobOptions::default()
    };
    let out = rt
        .block_on(job::gate_job(
            Some(&store),
            pair_opts,
            opts,
            |_| {},
            Arc::new(AtomicBool::new(false)),
        ))
        .unwrap();
    for r in &out.greedy {
        eprintln!("{}", r.line());
    }
    assert!(out.passed(), "failed: {:?}", out.failed);
    assert_eq!(out.greedy.len(), 8, "2 drafters × 4 k");
    for r in &out.greedy {
        assert_eq!(r.n_prompts, 3, "{}", r.line());
        assert_eq!(r.n_identical, 3, "{}", r.line());
    }
    // Self-speculation: the draft is the target's own model on the same arm, so it
    // drafts the target's greedy tokens and most are accepted.
    let dm = out
        .greedy
        .iter()
        .find(|r| r.drafter == DrafterKind::DraftModel && r.k == 4)
        .unwrap();
    assert!(dm.drafter_key.ends_with(":mlx-4bit"), "{}", dm.drafter_key);
    let a = dm.stats.acceptance_rate().unwrap();
    assert!(a > 0.9, "self-speculation accepted {a}");
    // Stored under the MLX build and arm, not llama.cpp's.
    let sha = memwall_core::util::sha256_file(&path).unwrap();
    let build = format!(
        "{}, mlx-4bit",
        memwall_core::measure::engine::mlx::engine_build()
    );
    let set_sha = out.prompt_set_sha256.clone();
    let rows = rt
        .block_on(sstore::greedy_gates(&store, &sha, &build, &set_sha))
        .unwrap();
    assert_eq!(rows.len(), 8, "gate rows stored under {build}");
    assert!(build.starts_with("mlx "), "{build}");
    let llama = memwall_core::measure::engine::engine_build();
    let none = rt
        .block_on(sstore::greedy_gates(&store, &sha, &llama, &set_sha))
        .unwrap();
    assert!(none.is_empty(), "no row under llama.cpp's build {llama}");
}
