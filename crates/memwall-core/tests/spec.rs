//! Speculative decoding on real models: both rollback edges (0 accepted, all
//! accepted) and the real pair, each checked token for token against plain
//! target-only greedy decoding. Serialized with the engine lock; loud skip when a
//! model is absent (MEMWALL_REQUIRE_MODELS=1 makes that a failure).
#![cfg(feature = "llama")]

use memwall_core::experiments::speculative::drafter::{DraftModel, Ngram, Pick};
use memwall_core::experiments::speculative::pair;
use memwall_core::experiments::speculative::run::{SpecConfig, SpecSession, target_greedy};
use memwall_core::measure::engine::llama::LlamaModelHandle;
use memwall_testkit as testing;

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
        let prompt = memwall_core::measure::engine::Vocab::tokenize(&target, text, true).unwrap();
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
        let prompt = memwall_core::measure::engine::Vocab::tokenize(&p.target, text, true).unwrap();
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
    // The batch-shape gap a gate's near-tie tolerance comes from: on llama.cpp's CPU
    // back end (weights not repacked, passes of at most 7 rows) a position's logits
    // are the same in a k + 1-row verify pass as in a 1-row pass, bit for bit.
    let prompt =
        memwall_core::measure::engine::Vocab::tokenize(&p.target, PROMPTS[0], true).unwrap();
    let n_shared = memwall_core::measure::engine::Engine::n_vocab(&p.target);
    for k in [2, 5, 8] {
        let g = memwall_core::experiments::speculative::shape::measure(
            &mut p.target,
            &prompt,
            n_shared,
            18,
            k + 1,
            s.max_rows_per_pass,
        )
        .unwrap();
        eprintln!("k = {k}: batch-shape gap {g:?}");
        assert_eq!(g.max_abs, 0.0, "k = {k}: {g:?}");
        assert_eq!(g.n_positions as usize, 2 * (18 / (k + 1)) * (k + 1));
    }
}

/// A draft whose vocabulary differs from the target's past the first 1,000 ids is
/// refused before anything runs, the first differing id named: a token's text
/// (`▁t1100` → `▁x1100`, same length, so the file stays valid), or a token's
/// special flag alone (type normal → control). Both files are the same tiny
/// synthetic model, written by `probe::synth` and edited byte for byte; the probe
/// text tokenizes alike in all three, so only the whole-range comparison sees it.
#[test]
fn a_draft_whose_vocabulary_differs_past_id_999_is_refused_naming_the_id() {
    use memwall_core::probe::shape::{Arch, ModelShape, Recipe};
    let shape = ModelShape {
        arch: Arch::Qwen2,
        n_layer: 1,
        n_embd: 64,
        n_head: 2,
        n_head_kv: 1,
        head_dim: None,
        n_ff: 128,
        n_vocab: 1200,
        tied_embeddings: true,
        n_expert: 0,
        n_expert_used: 0,
        n_ff_exp: 0,
        sliding_window: None,
        n_ctx_train: 2048,
        lexicographic_order: false,
    };
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("target.gguf");
    let recipe = Recipe::parse("F16").unwrap();
    memwall_core::probe::synth::write(&shape, &recipe, "vocab", 1, &target, |_, _| {}).unwrap();
    let bytes = std::fs::read(&target).unwrap();
    let find = |hay: &[u8], needle: &[u8]| {
        let at: Vec<usize> = hay
            .windows(needle.len())
            .enumerate()
            .filter(|(_, w)| *w == needle)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(at.len(), 1, "{:?} once", String::from_utf8_lossy(needle));
        at[0]
    };
    // Token 1100's text.
    let mut text = bytes.clone();
    let at = find(&text, "\u{2581}t1100".as_bytes());
    text[at + 3] = b'x';
    let renamed = d.path().join("renamed.gguf");
    std::fs::write(&renamed, &text).unwrap();
    // Token 1150's type: key, then u32 array type, u32 element type, u64 count, i32s.
    let mut flag = bytes.clone();
    let at = find(&flag, b"tokenizer.ggml.token_type") + "tokenizer.ggml.token_type".len();
    let t1150 = at + 4 + 4 + 8 + 4 * 1150;
    assert_eq!(flag[t1150..t1150 + 4], 1i32.to_le_bytes(), "normal");
    flag[t1150..t1150 + 4].copy_from_slice(&3i32.to_le_bytes());
    let control = d.path().join("control.gguf");
    std::fs::write(&control, &flag).unwrap();

    let _lock = testing::engine_lock();
    let refusal = |draft: &std::path::Path| match pair::load(&target, Some(draft), 256, 2) {
        Ok(_) => panic!("{} was accepted as a draft", draft.display()),
        Err(e) => e.to_string(),
    };
    let e = refusal(&renamed);
    assert!(
        e.starts_with("draft and target tokenizers differ: ")
            && e.ends_with(": token 1100: target `▁t1100`, draft `▁x1100`"),
        "{e}"
    );
    let e = refusal(&control);
    assert!(
        e.contains(": token 1150: text `▁t1150`: attributes 0x4 in the target, 0x8 in the draft"),
        "{e}"
    );
    // The unedited file is its own valid draft.
    assert!(pair::load(&target, Some(&target), 256, 2).is_ok());
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
        let prompt = memwall_core::measure::engine::Vocab::tokenize(&target, text, true).unwrap();
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

/// The gate's job on MLX (4-bit arm) with a real, different draft: the 1.5B target
/// and the 0.5B draft, both held as mlx-4bit. The greedy gate reproduces
/// target-only decoding token for token while the draft is rejected at times (α̂ <
/// 1, so rollback and replacement run); the sampling check on the same pair at T = 1
/// draws first tokens from the residual in some runs (a draft equal to the target
/// never does) and passes χ²; the stored rows carry the MLX build and arm (a
/// llama.cpp gate of the same file does not unlock an MLX bench, nor one MLX arm
/// another).
#[cfg(feature = "mlx")]
#[test]
fn the_gate_passes_on_mlx_with_a_real_draft() {
    use memwall_core::experiments::bench::BenchEngine;
    use memwall_core::experiments::speculative::gate::DrafterKind;
    use memwall_core::experiments::speculative::job::{self, GateJobOptions, PairOptions};
    use memwall_core::experiments::speculative::store as sstore;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    let (Some(target), Some(draft)) = (
        testing::model("qwen2.5-coder-1.5b-q4_k_m"),
        testing::model("qwen2.5-coder-0.5b-q4_k_m"),
    ) else {
        return;
    };
    let _lock = testing::engine_lock();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let d = tempfile::tempdir().unwrap();
    let store = rt
        .block_on(memwall_core::store::Store::open(&d.path().join("m.db")))
        .unwrap();
    let pair_opts = PairOptions {
        target: target.clone(),
        draft: Some(draft.clone()),
        prompts: None,
        n_threads: Some(2),
        n_gpu_layers: 0,
        engine: BenchEngine::Mlx4bit,
        n_seq: 1,
    };
    // Small enough for the suite (MLX's CPU back end runs a 1.5B 4-bit pass at ~1
    // t/s here): the full record is results/mlx/gate-real-draft.md (3 prompts × 32
    // tokens at k = 2 and 4: α̂ 0.71; 200 sampling runs, 42 first tokens from the
    // residual, χ² 1.46 on 3 df, p = 0.69). The sampling check looks at the first
    // position only, so k = 2 tests the same rule as k = 4 at half the draft steps;
    // at its ~21 % rate of first-position rejections, 30 runs all accepted at the
    // first position would have odds 8e-4.
    let opts = GateJobOptions {
        ks: vec![4],
        drafters: vec![DrafterKind::DraftModel],
        max_new: 16,
        limit: Some(2),
        sampling_trials: 30,
        sampling_k: 2,
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
        eprintln!(
            "{} (α̂ {:?}, {} accepted of {} tested)",
            r.line(),
            r.stats.alpha_hat(),
            r.stats.n_accepted,
            r.stats.n_tested()
        );
    }
    assert!(out.passed(), "failed: {:?}", out.failed);
    assert_eq!(out.greedy.len(), 1, "draft model at k = 4");
    for r in &out.greedy {
        assert_eq!((r.n_identical, r.n_prompts), (2, 2), "{}", r.line());
        assert!(r.drafter_key.ends_with(":mlx-4bit"), "{}", r.drafter_key);
        // A different model: accepted often, not always.
        let a = r.stats.alpha_hat().unwrap();
        assert!(a > 0.0 && a < 1.0, "{}: α̂ = {a}", r.line());
        assert!(r.stats.n_accepted <= r.stats.n_emitted);
    }
    let c = &out.sampling[0];
    eprintln!(
        "sampling check: χ² = {:.2} on {} df, p = {:?}, α̂ {:?}, first token from the residual in {} of {} runs",
        c.chi2, c.df, c.p_value, c.alpha_hat, c.n_first_rejected, c.trials
    );
    assert!(c.passed, "{c:?}");
    let a = c.alpha_hat.unwrap();
    assert!(a > 0.0 && a < 1.0, "sampling α̂ = {a}");
    assert!(c.n_first_rejected > 0, "{c:?}");
    // Stored under the MLX build and arm, not llama.cpp's.
    let sha = memwall_core::util::sha256_file(&target).unwrap();
    let build = format!(
        "{}, mlx-4bit",
        memwall_core::measure::engine::mlx::engine_build()
    );
    let set_sha = out.prompt_set_sha256.clone();
    let rows = rt
        .block_on(sstore::greedy_gates(&store, &sha, &build, &set_sha))
        .unwrap();
    assert_eq!(rows.len(), 1, "gate rows stored under {build}");
    assert!(build.starts_with("mlx "), "{build}");
    let llama = memwall_core::measure::engine::engine_build();
    let none = rt
        .block_on(sstore::greedy_gates(&store, &sha, &llama, &set_sha))
        .unwrap();
    assert!(none.is_empty(), "no row under llama.cpp's build {llama}");
}

/// Engines for tree drafts: one unified KV cache with room for `n_seq` sequences.
fn tree_cfg(n_seq: u32) -> memwall_core::measure::engine::EngineConfig {
    memwall_core::measure::engine::EngineConfig {
        n_ctx: 1024,
        n_batch: 512,
        n_ubatch: 512,
        n_threads: 2,
        n_threads_batch: 2,
        n_seq_max: n_seq,
        kv_unified: true,
        ..Default::default()
    }
}

/// Tree drafts on the real pair (1.5B target, 0.5B draft), greedy: the output is
/// target-only decoding's, token for token, for a chain and
/// two trees that fit one verify pass (≤ 7 rows), and with set acceptance too.
#[test]
fn tree_drafts_on_the_real_pair_are_output_identical() {
    use memwall_core::experiments::speculative::tree::{TreeShape, expected_tokens};
    use memwall_core::experiments::speculative::tree_loop::TreeDraftModel;
    use memwall_core::measure::engine::Vocab;
    let (Some(t), Some(d)) = (
        testing::model("qwen2.5-coder-1.5b-q4_k_m"),
        testing::model("qwen2.5-coder-0.5b-q4_k_m"),
    ) else {
        return;
    };
    let _lock = testing::engine_lock();
    let shapes = [
        TreeShape::chain(3),
        TreeShape { k: 3, b: 2, m: 1 },
        TreeShape { k: 2, b: 2, m: 2 },
    ];
    let n_seq = 1 + shapes.iter().map(|s| s.n_leaves()).max().unwrap() as u32;
    let th = LlamaModelHandle::load_no_repack(&t).unwrap();
    // The target parks rejected nodes in one more sequence.
    let mut target = th.engine(&tree_cfg(n_seq + 1)).unwrap();
    let dh = LlamaModelHandle::load(&d, 0).unwrap();
    let mut draft = TreeDraftModel::new(dh.engine(&tree_cfg(n_seq)).unwrap(), "draft".into());
    let mut s = SpecSession::new();
    for text in PROMPTS {
        let prompt = Vocab::tokenize(&target, text, true).unwrap();
        let g = target_greedy(&mut target, &prompt, 24).unwrap();
        s.invalidate();
        for shape in &shapes {
            let out = s
                .generate_tree(
                    &mut target,
                    &mut draft,
                    &prompt,
                    shape,
                    &SpecConfig::greedy(shape.k, 24),
                )
                .unwrap();
            let st = &out.stats;
            eprintln!(
                "{}: {} iterations, {} accepted of {} drafted, {:.2} tokens per target pass",
                shape.label(),
                st.n_iterations,
                st.n_accepted,
                st.n_drafted,
                st.tokens_per_target_pass().unwrap()
            );
            assert_eq!(out.tokens, g.tokens, "{}", shape.label());
            assert!(st.n_accepted <= st.n_emitted);
            assert_eq!(st.n_target_passes, st.n_iterations);
        }
    }
    // Set acceptance α = 0.5 on a tree of k 2, b 2, m 2: output identical, the draws'
    // realised rate a rate, and E[tokens per iteration] = 1 + 0.75 + 0.5625.
    let shape = TreeShape { k: 2, b: 2, m: 2 };
    assert!((expected_tokens(&shape, 0.5) - 2.3125).abs() < 1e-12);
    let prompt = Vocab::tokenize(&target, PROMPTS[0], true).unwrap();
    let g = target_greedy(&mut target, &prompt, 24).unwrap();
    s.invalidate();
    let mut reference = prompt.clone();
    reference.extend(&g.tokens);
    let mut set = TreeDraftModel::new(draft.into_engine(), "set".into())
        .with_set_acceptance(0.5, reference, 1);
    let out = s
        .generate_tree(
            &mut target,
            &mut set,
            &prompt,
            &shape,
            &SpecConfig::greedy(shape.k, 24),
        )
        .unwrap();
    assert_eq!(out.tokens, g.tokens, "set acceptance");
    let a = set.alpha_realised().unwrap();
    assert!(a > 0.0 && a < 1.0, "realised rate {a}");
    eprintln!(
        "set acceptance α 0.5, {}: realised {a:.3}, {:.2} tokens per iteration (formula {:.4})",
        shape.label(),
        out.stats.n_emitted as f64 / out.stats.n_iterations as f64,
        expected_tokens(&shape, 0.5)
    );
    // The draft's pass time by width (a tree level's shape), for the cost model.
    let rows = memwall_core::experiments::speculative::tree_loop::measure_draft_rows(
        set.engine(),
        &prompt,
        shape.n_leaves(),
        shape.b,
        2,
    )
    .unwrap();
    set.invalidate();
    eprintln!(
        "draft pass by width, ms: {:?}",
        rows.iter().map(|x| x / 1e6).collect::<Vec<_>>()
    );
    assert_eq!(rows.len(), shape.n_leaves());
    assert!(rows.iter().all(|x| x.is_finite() && *x > 0.0), "{rows:?}");
}

/// The target's parked cells fill a 256-cell context during a long greedy tree
/// generation (SmolLM2 135M drafting for itself): the cache is cleared and the
/// history prefilled again, and the output is still target-only decoding's.
#[test]
fn tree_drafts_stay_exact_when_parked_cells_fill_the_context() {
    use memwall_core::experiments::speculative::tree::TreeShape;
    use memwall_core::experiments::speculative::tree_loop::TreeDraftModel;
    use memwall_core::measure::engine::{Engine, Vocab};
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let _lock = testing::engine_lock();
    let shape = TreeShape { k: 2, b: 2, m: 2 };
    let h = LlamaModelHandle::load_no_repack(&path).unwrap();
    let small = |n_seq| memwall_core::measure::engine::EngineConfig {
        n_ctx: 256,
        ..tree_cfg(n_seq)
    };
    let mut target = h.engine(&small(6)).unwrap();
    assert_eq!(target.n_ctx(), 256);
    let mut draft = TreeDraftModel::new(h.engine(&tree_cfg(5)).unwrap(), "self".into());
    let prompt = Vocab::tokenize(&target, "def fibonacci(n):", true).unwrap();
    let n_new = 160;
    let g = target_greedy(&mut target, &prompt, n_new).unwrap();
    let mut s = SpecSession::new();
    let out = s
        .generate_tree(
            &mut target,
            &mut draft,
            &prompt,
            &shape,
            &SpecConfig::greedy(shape.k, n_new),
        )
        .unwrap();
    let st = &out.stats;
    eprintln!(
        "{} new tokens in {} iterations, {} cache compactions",
        out.tokens.len(),
        st.n_iterations,
        st.n_kv_compactions
    );
    assert!(st.n_kv_compactions >= 1, "the context never filled");
    assert_eq!(out.tokens, g.tokens);
}

/// The near-tie break reaches tree drafts as it does chains: with a reference that
/// is not the target's output and a tolerance no logit gap exceeds, every verified
/// position takes the reference's token (each counted); without one, the output is
/// target-only decoding's.
#[test]
fn a_tree_takes_the_references_token_within_the_tie_tolerance() {
    use memwall_core::experiments::speculative::run::TieBreak;
    use memwall_core::experiments::speculative::tree::TreeShape;
    use memwall_core::experiments::speculative::tree_loop::TreeDraftModel;
    use memwall_core::measure::engine::Vocab;
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let _lock = testing::engine_lock();
    let shape = TreeShape { k: 2, b: 2, m: 2 };
    let h = LlamaModelHandle::load_no_repack(&path).unwrap();
    let mut target = h.engine(&tree_cfg(6)).unwrap();
    let mut draft = TreeDraftModel::new(h.engine(&tree_cfg(5)).unwrap(), "self".into());
    let prompt = Vocab::tokenize(&target, "The capital of France is", true).unwrap();
    let other =
        Vocab::tokenize(&target, " one two three four five six seven eight", false).unwrap();
    let g = target_greedy(&mut target, &prompt, other.len()).unwrap();
    assert_ne!(g.tokens, other);
    let mut reference = prompt.clone();
    reference.extend(&other);
    let mut s = SpecSession::new();
    let cfg = SpecConfig::greedy(shape.k, other.len());
    s.set_tie_break(Some(TieBreak {
        reference,
        tolerance: 1e9,
    }));
    let out = s
        .generate_tree(&mut target, &mut draft, &prompt, &shape, &cfg)
        .unwrap();
    assert_eq!(out.tokens, other);
    assert!(out.stats.n_tie_breaks > 0 && out.stats.tie_gap_max > 0.0);
    s.set_tie_break(None);
    let out = s
        .generate_tree(&mut target, &mut draft, &prompt, &shape, &cfg)
        .unwrap();
    assert_eq!(out.tokens, g.tokens);
    assert_eq!(out.stats.n_tie_breaks, 0);
}

/// The set-acceptance bench with a tree beside a chain (SmolLM2 135M drafting for
/// itself, 2 repetitions): the calibration times the draft's passes by width and
/// predicts the tree before any timed run; the timed tree cell reproduces target-only
/// decoding, counts its placement draws, and becomes a row under the tree's own
/// drafter key with that prediction, whose phases carry the tree's name.
#[test]
fn the_set_acceptance_bench_measures_a_tree_beside_a_chain() {
    use memwall_core::experiments::speculative::gate::{TokenizedPrompt, tree_key};
    use memwall_core::experiments::speculative::prompts::{Category, Format};
    use memwall_core::experiments::speculative::synth::{self, SetAcceptance, SynthPlan};
    use memwall_core::experiments::speculative::tree::TreeShape;
    use memwall_core::measure::engine::Vocab;
    use std::sync::atomic::AtomicBool;
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let _lock = testing::engine_lock();
    let shape = TreeShape { k: 2, b: 2, m: 2 };
    let h = LlamaModelHandle::load_no_repack(&path).unwrap();
    let mut target = h.engine(&tree_cfg(6)).unwrap();
    let draft = h.engine(&tree_cfg(6)).unwrap();
    let mut d = SetAcceptance::new(draft, "draft:self".into(), 0.0, 3).unwrap();
    let prompts: Vec<TokenizedPrompt> = PROMPTS[..2]
        .iter()
        .enumerate()
        .map(|(i, t)| TokenizedPrompt {
            id: format!("p{i}"),
            category: Category::Prose,
            format: Format::Raw,
            tokens: Vocab::tokenize(&target, t, true).unwrap(),
        })
        .collect();
    let plan = SynthPlan {
        alphas: vec![0.7],
        ks: vec![2],
        reps: 2,
        max_new: 24,
        timing_reps: 2,
        seed: 9,
        auto_k: false,
        tie_tolerance: 0.0,
        trees: vec![shape],
    };
    let cal = synth::calibrate(&mut target, &mut d, &prompts[0], &plan, 7).unwrap();
    // One draft pass per width up to the widest level's parents (2 here) and the
    // longest catch-up (k + 1 = 3 rows).
    assert_eq!(cal.timings.draft_rows_ns.len(), 3, "{:?}", cal.timings);
    assert!(cal.timings.t_verify_ns.len() > shape.n_nodes());
    let tp = cal
        .predictions
        .iter()
        .find(|p| p.tree == Some(shape))
        .expect("the tree is predicted before the run");
    assert!(tp.predicted_speedup.is_finite() && tp.predicted_speedup > 0.0);
    assert_eq!(tp.k, 2);
    // The tree's own loop cost, from its untimed run before the timed runs, is in
    // the stored prediction: E[tokens] · (t_verify(1) + c_base) ÷ (c_tree + the
    // 7-row verify + the 2-row draft pass + the catch-up of a + 1 rows, a accepted
    // with P(a) = 0.09, 0.91·0.09, 0.91²), by hand.
    let t = &cal.timings;
    let c = t
        .tree_overheads
        .iter()
        .find(|o| o.shape == shape.label() && o.alpha == 0.7)
        .expect("the tree's calibration run");
    let o = t.overhead_at(Some(0.7));
    let reach = 1.0 - 0.3f64 * 0.3;
    let e = 1.0 + reach + reach * reach;
    let r = &t.draft_rows_ns;
    let catch_up = (1.0 - reach) * r[0] + reach * (1.0 - reach) * r[1] + reach * reach * r[2];
    let iter = c.iter_ns + t.t_verify_ns[6] + r[1] + catch_up;
    let want = e * (t.t_verify_ns[0] + o.base_ns) / iter;
    assert!(
        (tp.predicted_speedup - want).abs() <= 1e-9 * want,
        "{} vs {want}",
        tp.predicted_speedup
    );
    assert!(synth::calibration_md(&cal).contains("| α=0.7 tree k2 b2 m2 |"));
    let pairs = synth::chosen(&plan, &cal);
    assert_eq!(pairs, vec![(0.7, 2)], "chosen lists chains only");
    let mut phases = Vec::new();
    let cells = synth::run_synth_bench(
        &mut target,
        &mut d,
        &prompts,
        &plan,
        &pairs,
        &mut |_| {},
        &mut |ev| {
            if let memwall_core::measure::sampler::session::PhaseEvent::Begin(l) = ev {
                phases.push(l.to_string());
            }
        },
        &AtomicBool::new(false),
    )
    .unwrap();
    assert_eq!(cells.len(), 3, "target-only, the chain, the tree");
    let tc = cells.iter().find(|c| c.tree == Some(shape)).unwrap();
    assert_eq!(tc.tps.len(), 2);
    assert_eq!(tc.speedup.as_ref().unwrap().len(), 2);
    assert!(
        tc.n_draws > 0 && tc.n_right <= tc.n_draws,
        "{} {}",
        tc.n_draws,
        tc.n_right
    );
    assert!(tc.stats.n_accepted > 0 && tc.stats.n_iterations > 0);
    // The tree loop times its parts: they sum to its decode clock.
    let bd = &tc.stats.breakdown;
    let cov = bd.coverage(tc.stats.decode_ns).unwrap();
    println!(
        "tree breakdown: sum {} ns of {} ns decode ({cov:.5}); draft forward {}, verify forward {}, KV {}",
        bd.sum_ns(),
        tc.stats.decode_ns,
        bd.draft_forward_ns,
        bd.verify_forward_ns,
        bd.target_rollback_ns
    );
    assert!((0.98..=1.0).contains(&cov), "sum ÷ clock {cov}");
    assert!(bd.draft_forward_ns > 0 && bd.verify_forward_ns > 0 && bd.target_rollback_ns > 0);
    assert!(bd.draft_pick_ns > 0 && bd.verify_pick_ns > 0 && bd.accept_ns > 0);
    assert!(
        phases.contains(&"α=0.7 tree k2 b2 m2 #2".to_string()),
        "{phases:?}"
    );
    let prov = synth::SynthProvenance {
        target_file: "t".into(),
        target_sha256: "T".into(),
        draft_file: "d".into(),
        drafter_key: "draft:self".into(),
        prompt_set_sha256: "P".into(),
        prompt_set: "test".into(),
        engine_build: "B".into(),
        n_threads: 2,
        n_gpu_layers: 0,
        measured_at: "now".into(),
        hostname: "h".into(),
        cpu_info: "c".into(),
        gpu_info: None,
    };
    let ids: Vec<i64> = (1..=cal.predictions.len() as i64).collect();
    let ids_of = ["p0".to_string(), "p1".to_string()];
    let rows = synth::to_rows(&cells, &cal, Some(&ids), &plan, &ids_of, &prov);
    let tr = rows
        .iter()
        .find(|r| r.drafter_key == tree_key(&shape, "draft:self"))
        .expect("the tree's row under its own key");
    assert_eq!(tr.predicted_speedup, Some(tp.predicted_speedup));
    let pi = cal
        .predictions
        .iter()
        .position(|p| p.tree == Some(shape))
        .unwrap();
    assert_eq!(tr.prediction_id, Some(ids[pi]));
    assert_eq!(tr.predicted_after, None, "no after-the-run model for trees");
    assert_eq!(synth::row_label(tr), "α=0.7 tree k2 b2 m2");
    let chain = rows
        .iter()
        .find(|r| r.drafter_key == "draft:self" && r.k == 2)
        .unwrap();
    assert_eq!(synth::row_label(chain), "α=0.7 k=2");
    assert!(synth::table_md(&rows).contains("| tree k2 b2 m2 |"));
}

/// Tree drafts sampled at temperature 1 (SmolLM2 135M as target and as its own
/// draft, one iteration per trial): the first emitted token follows the target's `p`
/// after the prompt, and where it is the tree's top child `c`, the second follows the
/// target's `p` after prompt + `c`, each computed by a plain pass (χ², p > 0.001).
#[test]
fn sampled_tree_drafts_emit_the_targets_distribution() {
    use memwall_core::experiments::speculative::gate::{chi_square, chi2_sf};
    use memwall_core::experiments::speculative::sampling::SamplingParams;
    use memwall_core::experiments::speculative::tree::TreeShape;
    use memwall_core::experiments::speculative::tree_loop::TreeDraftModel;
    use memwall_core::measure::engine::{Engine, Vocab, argmax};
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let _lock = testing::engine_lock();
    let shape = TreeShape { k: 2, b: 2, m: 2 };
    let h = LlamaModelHandle::load_no_repack(&path).unwrap();
    let mut target = h.engine(&tree_cfg(6)).unwrap();
    let mut draft = TreeDraftModel::new(h.engine(&tree_cfg(5)).unwrap(), "self".into());
    let mut plain = h.engine(&tree_cfg(1)).unwrap();
    let prompt = Vocab::tokenize(&target, "The capital of France is", true).unwrap();
    let sampling = SamplingParams {
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
    };
    // The target's p after the prompt, and after prompt + its argmax c (the draft's
    // top child: the draft is the same model).
    let n = prompt.len();
    plain.prefill(&prompt, 0, 0, true).unwrap();
    let row = plain.logits(0).unwrap().to_vec();
    let p1 = sampling.distribution(&row);
    let c = argmax(&row);
    plain.decode_one(c, n as u32, 0).unwrap();
    let p2 = sampling.distribution(plain.logits(0).unwrap());
    let mut s = SpecSession::new();
    let (mut first, mut second) = (vec![0u64; p1.len()], vec![0u64; p2.len()]);
    let trials = 600;
    for seed in 0..trials {
        let cfg = SpecConfig {
            k: shape.k,
            max_new: 3,
            sampling,
            seed,
            max_iterations: 1,
        };
        let out = s
            .generate_tree(&mut target, &mut draft, &prompt, &shape, &cfg)
            .unwrap();
        first[out.tokens[0] as usize] += 1;
        if out.tokens[0] == c && out.tokens.len() > 1 {
            second[out.tokens[1] as usize] += 1;
        }
    }
    for (what, p, counts) in [("first", &p1, &first), ("second after c", &p2, &second)] {
        let x = chi_square(p, counts);
        let pv = chi2_sf(x.chi2, x.df);
        eprintln!(
            "{what}: {} draws, χ² {:.2} on {} df, p = {pv:.3}",
            counts.iter().sum::<u64>(),
            x.chi2,
            x.df
        );
        assert!(counts.iter().sum::<u64>() >= 40, "{what}: too few draws");
        assert!(pv > 1e-3, "{what}: χ² {} on {} df, p = {pv}", x.chi2, x.df);
    }
}
