//! The llama.cpp engine on real models: logits indexing, KV rollback, batch verify
//! vs sequential greedy, and a tiny benchmark plan. Serialized with the engine lock.
#![cfg(feature = "llama")]

use memwall_core::experiments::bench::{BenchPlan, RunContext};
use memwall_core::measure::engine::llama::LlamaModelHandle;
use memwall_core::measure::engine::{BatchItem, ChatMessage, Engine, EngineConfig, Vocab, argmax};
use memwall_core::probe::model::CacheType;
use memwall_core::roofline::MachineRoof;
use memwall_core::units::{Gbps, Gflops};
use memwall_testkit as testing;
use std::sync::atomic::AtomicBool;

fn cfg(n_ctx: u32) -> EngineConfig {
    EngineConfig {
        n_ctx,
        n_batch: 512,
        n_ubatch: 512,
        ..Default::default()
    }
}

#[test]
fn rollback_and_batched_verify_match_sequential_greedy() {
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let _lock = testing::engine_lock();
    let h = LlamaModelHandle::load(&path, 0).unwrap();
    let mut e = h.engine(&cfg(512)).unwrap();
    let prompt = e.tokenize("The capital of France is", true).unwrap();
    assert!(prompt.len() > 3);
    let text: Vec<u8> = prompt.iter().flat_map(|&t| e.token_bytes(t)).collect();
    assert!(String::from_utf8_lossy(&text).contains("capital of France"));

    // Sequential greedy: 8 tokens.
    e.kv_clear();
    e.prefill(&prompt, 0, 0, true).unwrap();
    let mut seq = vec![argmax(e.logits(0).unwrap())];
    let first_logits = e.logits(0).unwrap().to_vec();
    for i in 0..7 {
        e.decode_one(*seq.last().unwrap(), (prompt.len() + i) as u32, 0)
            .unwrap();
        seq.push(argmax(e.logits(0).unwrap()));
    }

    // Rollback: drop the 7 decoded positions, decode the first token again: same logits.
    let n = prompt.len() as u32;
    e.kv_truncate(0, n).unwrap();
    e.decode_one(seq[0], n, 0).unwrap();
    let again = argmax(e.logits(0).unwrap());
    assert_eq!(
        again, seq[1],
        "after rollback the next token must be the same"
    );

    // Batched verify: prompt + seq[..7] in one pass, logits at every new position.
    e.kv_clear();
    e.prefill(&prompt[..prompt.len() - 1], 0, 0, false).unwrap();
    let mut items = vec![BatchItem {
        token: *prompt.last().unwrap(),
        pos: n - 1,
        seq: 0,
        logits: true,
    }];
    for (i, &t) in seq[..7].iter().enumerate() {
        items.push(BatchItem {
            token: t,
            pos: n + i as u32,
            seq: 0,
            logits: true,
        });
    }
    e.decode(&items).unwrap();
    let verify: Vec<i32> = (0..8).map(|i| argmax(e.logits(i).unwrap())).collect();
    assert_eq!(
        verify, seq,
        "argmax of the verify batch must equal sequential greedy"
    );
    let max_diff = first_logits
        .iter()
        .zip(e.logits(0).unwrap())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(
        max_diff < 0.05,
        "same position, same context: logits differ by {max_diff}"
    );
    assert!(e.logits(8).is_err(), "only 8 outputs were kept");
}

#[test]
fn chat_template_comes_from_the_gguf() {
    let Some(path) = testing::model("qwen2.5-coder-0.5b-q4_k_m") else {
        return;
    };
    let _lock = testing::engine_lock();
    let h = LlamaModelHandle::load(&path, 0).unwrap();
    let e = h.engine(&cfg(256)).unwrap();
    let s = e
        .chat_format()
        .unwrap()
        .chat(
            &e,
            &[ChatMessage {
                role: "user".into(),
                content: "hi".into(),
            }],
        )
        .unwrap()
        .text;
    assert!(s.contains("<|im_start|>user\nhi<|im_end|>"), "{s}");
    assert!(s.ends_with("<|im_start|>assistant\n"), "{s}");
}

#[test]
fn tiny_plan_runs_and_respects_the_roofline() {
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let _lock = testing::engine_lock();
    let plan = BenchPlan {
        models: vec![path],
        n_prompt: vec![64],
        n_gen: vec![16],
        n_depth: vec![0, 64],
        n_seqs: vec![1, 2],
        n_threads: vec![std::thread::available_parallelism().unwrap().get() as u32],
        n_batch: 512,
        n_ubatch: 512,
        n_gpu_layers: 0,
        type_k: CacheType::F16,
        type_v: CacheType::F16,
        flash_attn: None,
        reps: 2,
        seed: 1,
        allow_battery: true,
        engines: Vec::new(),
        skip_capacity_check: false,
        split: Default::default(),
    }
    .validate()
    .unwrap();
    let host = memwall_core::probe::hw::host_info();
    // A fixed roof, not a fresh STREAM: on a shared 2-core machine a STREAM taken
    // now can read low while the decode runs fast, so "decode below STREAM" is a
    // benchmark (bench/vs-llama-bench.sh), not a test. Here the roofline arithmetic
    // of every row is checked against the roof it was given.
    let roof = MachineRoof {
        bandwidth: Gbps(1000.0),
        stream_id: 0,
        read_bandwidth: None,
        peak_f32: Some(Gflops(1e3)),
        peak_int8: Some(Gflops(4e3)),
        gpu: None,
    };
    let cancel = AtomicBool::new(false);
    let cx = RunContext {
        plan: &plan,
        host: &host,
        roof: &roof,
        run_id: 0,
        cancel: &cancel,
    };
    let mut events = 0;
    let recs = memwall_core::experiments::bench::run_plan(&cx, &mut |_| events += 1).unwrap();
    let labels: Vec<String> = recs.iter().map(|r| r.test_label()).collect();
    assert_eq!(
        labels,
        [
            "pp64",
            "tg16",
            "tg16 x2",
            "pp64 @ d64",
            "tg16 @ d64",
            "tg16 x2 @ d64"
        ]
    );
    assert!(events >= recs.len() * 3);
    for r in &recs {
        assert_eq!(r.samples_ns.len(), 2);
        assert!(r.avg_ts > 0.0 && r.avg_ts.is_finite(), "{r:?}");
        assert_eq!(
            r.model_sha256,
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
        );
    }
    // tg: ceiling = bandwidth ÷ bytes per step; achieved = tok/s ÷ ceiling;
    // implied bandwidth = tok/s × bytes per step (1000 GB/s given above).
    let tg = &recs[1];
    assert_eq!(tg.bandwidth_gbps, Some(1000.0));
    let bytes = tg.bytes_per_step.unwrap();
    let ceiling = 1000.0e9 / bytes;
    assert!(
        (tg.ceiling_ts.unwrap() - ceiling).abs() <= 1e-9 * ceiling,
        "{tg:?}"
    );
    assert!(
        (tg.achieved.unwrap() - tg.avg_ts / ceiling).abs() <= 1e-9,
        "{tg:?}"
    );
    let implied = tg.avg_ts * bytes / 1e9;
    let got = tg.implied_bandwidth_gbps.unwrap();
    assert!(
        (got - implied).abs() <= 1e-9 * implied,
        "{got} vs {implied}"
    );
}

#[test]
fn kv_state_growth_equals_the_formula_exactly() {
    let _lock = testing::engine_lock();
    for name in ["smollm2-135m-q4_1", "gemma-3-270m-q4_k_m"] {
        let Some(path) = testing::model(name) else {
            continue;
        };
        let mut guard = memwall_core::measure::guard::Guard::begin(
            memwall_core::measure::guard::GuardOptions {
                allow_battery: true,
                skip_capacity_check: false,
            },
        )
        .unwrap();
        let rows = memwall_core::experiments::evidence::run_kv_verify(
            &[path],
            &[CacheType::F16, CacheType::Q8_0],
            640,
            2,
            &mut guard,
            &mut |_| {},
        )
        .unwrap();
        // The model's fit was checked (and recorded) before it was loaded.
        assert_eq!(guard.finish().capacity.len(), 1);
        for r in &rows {
            // Independent value: 2 × layers × kv_heads × head_dim × bytes per element, over the
            // layers that still grow between n and 2n (Gemma-3: 3 global layers past the 512 window).
            let expected = match (name, r.cache_type.as_str()) {
                ("smollm2-135m-q4_1", "f16") => 2.0 * 30.0 * 3.0 * 64.0 * 2.0,
                ("smollm2-135m-q4_1", _) => 2.0 * 30.0 * 3.0 * 64.0 * 34.0 / 32.0,
                (_, "f16") => 2.0 * 3.0 * 1.0 * 256.0 * 2.0,
                _ => 2.0 * 3.0 * 1.0 * 256.0 * 34.0 / 32.0,
            };
            assert_eq!(
                r.predicted_bytes_per_token, expected,
                "{name} {}",
                r.cache_type
            );
            assert_eq!(
                r.measured_kv_bytes_per_token, expected,
                "{name} {}: state growth {}",
                r.cache_type, r.measured_state_bytes_per_token
            );
            assert_eq!(r.ratio, 1.0);
            // The wrong method is shown beside it, never used: compute buffers grow with the
            // prompt (it overstates: Gemma-3's cache grows in 3 global layers only, and one
            // CI run read 15.8), and pages that earlier work in this process freed are
            // reused (it understates; CI runs read 0.918 and 0.989 for SmolLM2), so where it
            // lands depends on what ran before (docs/evidence.md). Asserted here: it was
            // measured (a finite, positive ratio); the exact method's rows are above.
            let rss = r.rss_ratio.unwrap();
            assert!(
                rss.is_finite() && rss > 0.0,
                "{name}: RSS ratio {rss}: the peak-RSS method measured nothing"
            );
        }
    }
}

fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// A draft tree verified in one pass (tokens shared by the sequences of the leaves
/// below them, llama.cpp's unified KV cache) gives every node the logits that a
/// pass over its own root-to-leaf path alone gives; with two nodes' sequences
/// swapped (their children attending to the wrong parent) it does not. Then the accepted path is kept as the
/// main sequence and the leaves dropped: the next token's logits are those of
/// plain decoding of that path.
#[test]
fn a_tree_pass_gives_each_node_the_logits_of_its_path_alone() {
    use memwall_core::experiments::speculative::tree::{Tree, TreeShape};
    use memwall_core::measure::engine::SeqItem;
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let _lock = testing::engine_lock();
    let h = LlamaModelHandle::load_no_repack(&path).unwrap();
    // 2 + 4 nodes and the root: 7 rows, the most whose logits llama.cpp's CPU back
    // end computes as a 1-row pass does (run::DEFAULT_MAX_ROWS_PER_PASS).
    let shape = TreeShape { k: 2, b: 2, m: 2 };
    let n_leaves = shape.n_leaves();
    let mut te = h
        .engine(&EngineConfig {
            n_seq_max: n_leaves as u32 + 2,
            kv_unified: true,
            ..cfg(512)
        })
        .unwrap();
    let mut ce = h.engine(&cfg(512)).unwrap();
    let prompt = te.tokenize("The capital of France is", true).unwrap();
    let pool = te
        .tokenize(" one two three four five six seven eight nine ten", false)
        .unwrap();
    let n = prompt.len();
    let mut c = 0usize;
    let tree = Tree::grow(&shape, |parents, nb| {
        let mut out = Vec::new();
        for _ in parents {
            let mut kids = Vec::new();
            for _ in 0..nb {
                kids.push(pool[c % pool.len()]);
                c += 1;
            }
            out.push(kids);
        }
        out
    });
    assert_eq!(tree.len(), shape.n_nodes());
    assert_eq!(tree.leaves().len(), n_leaves);

    // The tree pass: the prefix in sequence 0 and copied to each leaf's sequence
    // 1..=L; the root (last prompt token) in all of them, each node in its leaves'.
    let tree_pass = |e: &mut memwall_core::measure::engine::llama::LlamaEngine,
                     under: &[Vec<i32>]|
     -> Vec<Vec<f32>> {
        e.kv_clear();
        e.prefill(&prompt[..n - 1], 0, 0, false).unwrap();
        for l in 0..n_leaves {
            e.kv_copy(0, 1 + l as i32, (n - 1) as u32).unwrap();
        }
        let all: Vec<i32> = (0..=n_leaves as i32).collect();
        let mut items = vec![SeqItem {
            token: prompt[n - 1],
            pos: (n - 1) as u32,
            seqs: &all[..],
            logits: true,
        }];
        for (i, seqs) in under.iter().enumerate() {
            items.push(SeqItem {
                token: tree.token[i],
                pos: (n - 1 + tree.depth[i]) as u32,
                seqs: seqs.as_slice(),
                logits: true,
            });
        }
        e.decode_seqs(&items).unwrap();
        (0..items.len())
            .map(|i| e.logits(i).unwrap().to_vec())
            .collect()
    };
    let under: Vec<Vec<i32>> = tree
        .leaves_under()
        .iter()
        .map(|ls| ls.iter().map(|&l| 1 + l as i32).collect())
        .collect();
    let rows = tree_pass(&mut te, &under);
    // The two depth-1 nodes' sequences swapped: each depth-2 node then attends to
    // its parent's sibling instead of its parent.
    let mut swapped = under.clone();
    swapped.swap(0, 1);
    assert_eq!((tree.depth[0], tree.depth[1]), (1, 1));
    let wrong = tree_pass(&mut te, &swapped);

    // Each leaf's path alone, in a plain context.
    let (mut gap, mut wrong_gap) = (0f32, 0f32);
    for &leaf in &tree.leaves() {
        let p = tree.path_to(leaf);
        ce.kv_clear();
        ce.prefill(&prompt[..n - 1], 0, 0, false).unwrap();
        let mut b = vec![BatchItem {
            token: prompt[n - 1],
            pos: (n - 1) as u32,
            seq: 0,
            logits: true,
        }];
        for (j, &node) in p.iter().enumerate() {
            b.push(BatchItem {
                token: tree.token[node],
                pos: (n + j) as u32,
                seq: 0,
                logits: true,
            });
        }
        ce.decode(&b).unwrap();
        gap = gap.max(max_abs(&rows[0], ce.logits(0).unwrap()));
        for (j, &node) in p.iter().enumerate() {
            let alone = ce.logits(1 + j).unwrap();
            gap = gap.max(max_abs(&rows[1 + node], alone));
            wrong_gap = wrong_gap.max(max_abs(&wrong[1 + node], alone));
        }
    }
    let range = rows[0].iter().fold(0f32, |m, x| m.max(x.abs()));
    eprintln!(
        "tree pass vs each path alone: max |Δlogit| {gap:.3e}; with two nodes' sequences swapped {wrong_gap:.3e} (logits up to {range:.1})"
    );
    // The batch shapes differ (7 rows against 3) and the tree's cache holds the other
    // branches' cells (masked out): the same arithmetic up to summation order, far
    // below what attending to a sibling changes.
    let tol = 1e-3 * range;
    assert!(
        gap <= tol,
        "tree pass differs from its paths by {gap} > {tol}"
    );
    assert!(
        wrong_gap > 10.0 * tol,
        "the wrong mask went unseen: {wrong_gap}"
    );

    // Accept leaf 2's path to depth 1 (its first node, shared with leaf 3): sequence 0
    // becomes prefix + root + that node, the leaves' cells are parked in sequence
    // L + 1 and their sequences dropped (the commit of tree_loop.rs), and decoding
    // goes on in sequence 0, twice.
    let _ = tree_pass(&mut te, &under);
    let leaf = tree.leaves()[2];
    let p = tree.path_to(leaf);
    let a = 1;
    te.kv_copy(3, 0, (n + a) as u32).unwrap();
    for l in 0..n_leaves {
        te.kv_park(1 + l as i32, n_leaves as i32 + 1).unwrap();
        te.kv_truncate(1 + l as i32, 0).unwrap();
    }
    let mut plain: Vec<_> = prompt.clone();
    plain.extend(tree.tokens_of(&p[..a]));
    ce.kv_clear();
    ce.prefill(&plain, 0, 0, false).unwrap();
    let mut g = 0f32;
    for &x in &pool[..2] {
        te.decode_one(x, plain.len() as u32, 0).unwrap();
        ce.decode_one(x, plain.len() as u32, 0).unwrap();
        g = g.max(max_abs(te.logits(0).unwrap(), ce.logits(0).unwrap()));
        plain.push(x);
    }
    eprintln!("after keeping the accepted path: max |Δlogit| {g:.3e}");
    assert!(g <= tol, "the kept path decodes differently: {g} > {tol}");
}

/// Why a tree's rejected nodes are parked, not freed (tree_loop.rs): with llama.cpp's
/// unified KV cache and flash attention (on by default on the CPU), a token placed in
/// a freed cell *below* a kept cell of its sequence decodes unlike plain decoding.
/// Token a (sequence 1) and b (sequence 0) share one position in one pass, a in the
/// lower cell; sequence 1 is then dropped (a's cell freed) or first parked in
/// sequence 2 (a's cell kept), and x is decoded in sequence 0. Parked: the logits of
/// plain decoding of prompt + b + x. Freed: 0.78 off (pinned llama.cpp, this model);
/// when that assertion fails, llama.cpp decodes such holes right and parking can go.
#[test]
fn a_token_in_a_freed_cell_below_a_kept_cell() {
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let _lock = testing::engine_lock();
    let h = LlamaModelHandle::load_no_repack(&path).unwrap();
    let mut te = h
        .engine(&EngineConfig {
            n_seq_max: 3,
            kv_unified: true,
            ..cfg(512)
        })
        .unwrap();
    let mut ce = h.engine(&cfg(512)).unwrap();
    let prompt = te.tokenize("The capital of France is", true).unwrap();
    let pool = te.tokenize(" one two three four five", false).unwrap();
    let n = prompt.len();
    let (a, b, x) = (pool[0], pool[1], pool[2]);
    let mut plain = prompt.clone();
    plain.push(b);
    ce.prefill(&plain, 0, 0, false).unwrap();
    ce.decode_one(x, plain.len() as u32, 0).unwrap();
    let want = ce.logits(0).unwrap().to_vec();
    let range = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    let mut gap = |park: bool| {
        te.kv_clear();
        te.prefill(&prompt, 0, 0, false).unwrap();
        let item = |token, seq| BatchItem {
            token,
            pos: n as u32,
            seq,
            logits: false,
        };
        te.decode(&[item(a, 1), item(b, 0)]).unwrap();
        if park {
            te.kv_park(1, 2).unwrap();
        }
        te.kv_truncate(1, 0).unwrap();
        te.decode_one(x, (n + 1) as u32, 0).unwrap();
        max_abs(te.logits(0).unwrap(), &want)
    };
    let (freed, parked) = (gap(false), gap(true));
    eprintln!(
        "x after a freed cell below b: max |Δlogit| {freed:.3e}; a's cell parked: {parked:.3e} (logits up to {range:.1})"
    );
    let tol = 1e-3 * range;
    assert!(parked <= tol, "parked layout differs: {parked} > {tol}");
    assert!(
        freed > 10.0 * tol,
        "llama.cpp now decodes a token in a freed cell below a kept cell right ({freed}): tree_loop.rs may free rejected nodes instead of parking them"
    );
}
