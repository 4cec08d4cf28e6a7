//! The speculative loop with tree drafts ([`super::tree`]): a drafter grows a tree
//! of the draft model's top tokens, the target verifies every node in one pass, and
//! the longest path the target agrees with is committed.
//!
//! **KV cache.** Both models need a context made with
//! [`EngineConfig::kv_unified`](crate::measure::engine::EngineConfig::kv_unified) and
//! `n_seq_max ≥ leaves + 1`. Sequence 0 holds the committed history; each
//! root-to-leaf path `ℓ` is sequence `1 + ℓ` for the length of one pass: the history
//! is copied into it (bookkeeping in a unified cache), a tree node is fed once with
//! the sequences of the leaves below it ([`SeqItem`]), and afterwards the accepted
//! path is copied into sequence 0 ([`Engine::kv_copy`] of the leaf below its last
//! node, cut at the path's end), every leaf sequence is parked in sequence
//! `leaves + 1` ([`Engine::kv_park`]) and then dropped ([`Engine::kv_truncate`] at 0).
//! The other branches' cells stay occupied: freed, they would be holes below the
//! accepted path's cells, and llama.cpp's CPU flash attention decodes a token placed
//! in such a hole wrongly (0.78 logits off plain decoding in
//! `tests/engine.rs::a_token_in_a_freed_cell_below_a_kept_cell`). Every new token
//! therefore lands above every kept cell; when the parked cells fill the context it
//! is cleared and the history prefilled again (`SpecStats::n_kv_compactions`), and
//! a generation ends with the target's cache cleared. Target contexts need
//! `n_seq_max ≥ leaves + 2`.
//!
//! **Rows.** The verify pass has `nodes + 1` rows, and it must be one pass: a tree
//! larger than [`SpecSession::max_rows_per_pass`] is refused (on llama.cpp's CPU
//! back end a pass of 8 or more rows computes logits unlike a 1-row pass, see
//! [`super::run::DEFAULT_MAX_ROWS_PER_PASS`]).
//!
//! **Acceptance.** Greedy: [`accept_greedy`]; sampled: [`accept_sampled`] (the
//! children are the draft's top tokens, deterministic proposals, so every emitted
//! token is a draw from the target's `p`). The drafter's proposals never depend on
//! the target.
//!
//! **Set acceptance.** [`TreeDraftModel::with_set_acceptance`] replaces the draft's
//! children at nodes that follow the target's reference output: the reference token
//! is placed at rank `r` with probability `α (1 − α)^r` ([`set_rank`]), the other
//! children are the draft's own top tokens other than it; the draft still pays
//! every forward pass of the tree. [`super::tree::expected_tokens`] is the tokens
//! per iteration that placement gives.

use super::drafter::{DraftCtx, KvSeq, ns_since};
use super::row::{IterBreakdown, argmax_max};
use super::run::{SpecConfig, SpecOutput, SpecSession, SpecStats};
use super::sampling::uniform;
use super::tree::{Tree, TreeShape, accept_greedy, accept_sampled, set_rank};
use super::{K_MAX, SpecError};
use crate::measure::engine::{Engine, SeqItem, TokenId};
use crate::measure::stats::Observations;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

/// The `n` largest entries of `row`, largest first; among equal values the lower
/// index first (as [`crate::measure::engine::argmax`] picks); NaN is never one.
///
/// Cost: a lane-wise maximum per block of 256 entries ([`super::row::block_max`]);
/// once `n` candidates are held, a block whose maximum does not beat the `n`-th is
/// skipped, so a 152,064-entry row is one SIMD pass plus a few scalar blocks.
pub fn top_n(row: &[f32], n: usize) -> Vec<TokenId> {
    const BLOCK: usize = 256;
    let mut best: Vec<(f32, usize)> = Vec::with_capacity(n + 1);
    if n == 0 {
        return Vec::new();
    }
    for (bi, block) in row.chunks(BLOCK).enumerate() {
        // `m <= floor` also skips an all-NaN block (m = −∞).
        if best.len() == n && super::row::block_max(block) <= best[n - 1].0 {
            continue;
        }
        for (j, &x) in block.iter().enumerate() {
            if x.is_nan() || (best.len() == n && x <= best[n - 1].0) {
                continue;
            }
            let at = best.iter().position(|&(v, _)| x > v).unwrap_or(best.len());
            best.insert(at, (x, bi * BLOCK + j));
            best.truncate(n);
        }
    }
    best.into_iter().map(|(_, i)| i as TokenId).collect()
}

/// The `b` children of the node whose path is `path` from `cands`, the draft's top
/// `b + 1` tokens there, largest first: the first `b` of them, unless set acceptance
/// (`pl`) applies at a node that follows the reference, where the reference's token
/// is placed at rank [`set_rank`] among the draft's own other tokens (or left out).
fn place(
    pl: Option<&mut Placement>,
    hist: &[TokenId],
    path: &[TokenId],
    mut cands: Vec<TokenId>,
    b: usize,
) -> Vec<TokenId> {
    let Some(pl) = pl else {
        cands.truncate(b);
        return cands;
    };
    let at = hist.len() + path.len();
    let follows = pl.reference.len() > at
        && pl.reference.starts_with(hist)
        && pl.reference[hist.len()..at] == *path;
    if !follows {
        cands.truncate(b);
        return cands;
    }
    let want = pl.reference[at];
    let mut kids: Vec<TokenId> = cands.into_iter().filter(|&t| t != want).take(b).collect();
    let mut draws = 0u64;
    let rank = {
        let rng = &mut pl.rng;
        let mut u = || {
            draws += 1;
            uniform(rng)
        };
        set_rank(pl.alpha, b, &mut u)
    };
    pl.draws += draws;
    if let Some(r) = rank {
        pl.hits += 1;
        if r < kids.len() {
            kids[r] = want;
        } else {
            kids.push(want);
        }
    }
    kids
}

/// One tree proposal.
#[derive(Debug, Clone, Default)]
pub struct TreeDraft {
    /// The tree.
    pub tree: Tree,
    /// Draft-model forward passes it took.
    pub passes: u32,
    /// The drafter's parts ([`IterBreakdown`]'s draft fields: forward passes, logit
    /// fetches, the top-`b` pick with the set-acceptance placement, and the leaf
    /// sequences' copies and drops as its KV rollback).
    pub times: IterBreakdown,
}

/// The set-acceptance placement of [`TreeDraftModel::with_set_acceptance`].
#[derive(Debug, Clone)]
struct Placement {
    alpha: f64,
    /// The prompt followed by the target-only output.
    reference: Vec<TokenId>,
    rng: ChaCha8Rng,
    draws: u64,
    hits: u64,
}

/// The draft model proposing trees: its top `b` tokens at each of the first `m`
/// depths, its argmax after (greedy proposals whatever the sampling: a tree's
/// children are deterministic).
pub struct TreeDraftModel<E: Engine> {
    engine: E,
    kv: KvSeq,
    key: String,
    placement: Option<Placement>,
}

impl<E: Engine> TreeDraftModel<E> {
    /// A drafter on `engine` (made with `kv_unified` and enough `n_seq_max` for the
    /// shapes it will be asked for), named `key` in rows.
    pub fn new(engine: E, key: String) -> TreeDraftModel<E> {
        TreeDraftModel {
            engine,
            kv: KvSeq::default(),
            key,
            placement: None,
        }
    }

    /// Set acceptance `alpha` against `reference` (the prompt and the target-only
    /// output), draws from a ChaCha8 seeded with `seed`.
    pub fn with_set_acceptance(
        mut self,
        alpha: f64,
        reference: Vec<TokenId>,
        seed: u64,
    ) -> TreeDraftModel<E> {
        self.placement = Some(Placement {
            alpha,
            reference,
            rng: ChaCha8Rng::seed_from_u64(seed),
            draws: 0,
            hits: 0,
        });
        self
    }

    /// The realised per-draw rate of the set-acceptance placement: reference tokens
    /// placed ÷ draws made (`None` without placement or draws).
    pub fn alpha_realised(&self) -> Option<f64> {
        self.placement
            .as_ref()
            .filter(|p| p.draws > 0)
            .map(|p| p.hits as f64 / p.draws as f64)
    }

    /// The set-acceptance placement's draws and the reference tokens placed
    /// (`(0, 0)` without placement).
    pub fn draws(&self) -> (u64, u64) {
        self.placement
            .as_ref()
            .map_or((0, 0), |p| (p.draws, p.hits))
    }

    /// The draft engine.
    pub fn engine(&mut self) -> &mut E {
        &mut self.engine
    }

    /// The draft engine back (its cache as the last generation left it).
    pub fn into_engine(self) -> E {
        self.engine
    }

    /// Marks the draft's cache unknown (something else used the engine).
    pub fn invalidate(&mut self) {
        self.kv.invalidate();
    }

    /// Drafter key for rows.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Prefills the prompt (all but its last token).
    ///
    /// # Errors
    /// Engine errors.
    pub fn begin(&mut self, prompt: &[TokenId]) -> Result<(), SpecError> {
        let n = prompt.len().saturating_sub(1);
        self.kv.sync_prefix(&mut self.engine, &prompt[..n])?;
        Ok(())
    }

    /// Cuts the cache back to committed tokens at the end of a generation.
    ///
    /// # Errors
    /// Engine errors.
    pub fn end(&mut self, hist: &[TokenId]) -> Result<(), SpecError> {
        let n = hist.len().saturating_sub(1);
        self.kv.trim(&mut self.engine, &hist[..n])?;
        Ok(())
    }

    /// The children of the node whose path from the root is `path` (tokens), from
    /// `cands`, the draft's top `b + 1` tokens there ([`place`]).
    fn children(
        &mut self,
        hist: &[TokenId],
        path: &[TokenId],
        cands: Vec<TokenId>,
        b: usize,
    ) -> Vec<TokenId> {
        place(self.placement.as_mut(), hist, path, cands, b)
    }

    /// The draft's top `b + 1` tokens in logit row `i` of its last pass (over the
    /// shared vocabulary), read in place: fetch and pick timed into `t`.
    fn candidates(
        &mut self,
        i: usize,
        shared: usize,
        b: usize,
        t: &mut IterBreakdown,
    ) -> Result<Vec<TokenId>, SpecError> {
        let t0 = Instant::now();
        let row = self.engine.logits(i)?;
        let t1 = Instant::now();
        let c = top_n(&row[..shared.min(row.len())], b + 1);
        t.draft_fetch_ns += (t1 - t0).as_nanos() as u64;
        t.draft_pick_ns += ns_since(t1);
        Ok(c)
    }

    /// Grows a tree of `shape` after `hist`: a catch-up pass over the committed
    /// tokens the draft has not seen (its last row proposes depth 1), then one pass
    /// per further depth over the previous depth's nodes, each in the sequences of
    /// the leaves below it.
    ///
    /// # Errors
    /// [`SpecError::Config`] for a shape out of range or a row without `b` distinct
    /// candidates; engine errors.
    pub fn propose_tree(
        &mut self,
        hist: &[TokenId],
        shape: &TreeShape,
        cx: &DraftCtx,
    ) -> Result<TreeDraft, SpecError> {
        shape.validate().map_err(SpecError::Config)?;
        let mut d = TreeDraft::default();
        let t0 = Instant::now();
        d.passes += self.kv.feed(&mut self.engine, hist, &[], 1)?;
        self.engine.synchronize();
        d.times.draft_forward_ns += ns_since(t0);
        let n = hist.len();
        let n_leaves = shape.n_leaves();
        let widths = shape.level_widths();
        // Depth 1 from the catch-up's last row.
        let b1 = shape.branching_at(1);
        let cands = self.candidates(0, cx.n_shared, b1, &mut d.times)?;
        let tp = Instant::now();
        for t in self.children(hist, &[], cands, b1) {
            d.tree.push(None, t);
        }
        d.times.draft_pick_ns += ns_since(tp);
        let full = |d: &TreeDraft, depth: usize| {
            d.tree.depth.iter().filter(|&&x| x == depth).count() == widths[depth - 1]
        };
        if !full(&d, 1) {
            return Err(SpecError::Config(format!(
                "the draft's row has fewer than {b1} distinct candidates for a tree of {}",
                shape.label()
            )));
        }
        if shape.k > 1 {
            let tk = Instant::now();
            for l in 0..n_leaves {
                self.engine.kv_copy(0, 1 + l as i32, n as u32)?;
            }
            d.times.draft_rollback_ns += ns_since(tk);
        }
        for depth in 2..=shape.k {
            let parents: Vec<usize> = (0..d.tree.len())
                .filter(|&i| d.tree.depth[i] == depth - 1)
                .collect();
            let w = widths[depth - 2];
            let per = n_leaves / w;
            let seqs: Vec<Vec<i32>> = (0..parents.len())
                .map(|j| (j * per..(j + 1) * per).map(|l| 1 + l as i32).collect())
                .collect();
            let items: Vec<SeqItem<'_>> = parents
                .iter()
                .zip(&seqs)
                .map(|(&p, s)| SeqItem {
                    token: d.tree.token[p],
                    pos: (n - 1 + depth - 1) as u32,
                    seqs: s.as_slice(),
                    logits: true,
                })
                .collect();
            let t1 = Instant::now();
            self.engine.decode_seqs(&items)?;
            self.engine.synchronize();
            d.times.draft_forward_ns += ns_since(t1);
            d.passes += 1;
            let b = shape.branching_at(depth);
            for (j, &p) in parents.iter().enumerate() {
                let cands = self.candidates(j, cx.n_shared, b, &mut d.times)?;
                let tp = Instant::now();
                let path = d.tree.tokens_of(&d.tree.path_to(p));
                for t in self.children(hist, &path, cands, b) {
                    d.tree.push(Some(p), t);
                }
                d.times.draft_pick_ns += ns_since(tp);
            }
            if !full(&d, depth) {
                return Err(SpecError::Config(format!(
                    "the draft's rows have fewer than {b} distinct candidates for a tree of {}",
                    shape.label()
                )));
            }
        }
        let tk = Instant::now();
        for l in 0..n_leaves {
            self.engine.kv_truncate(1 + l as i32, 0)?;
        }
        d.times.draft_rollback_ns += ns_since(tk);
        Ok(d)
    }
}

/// Median time of one draft pass over `w` rows for `w = 1..=max_w`, ns (index
/// `w − 1`): `w` tokens at the position after all but the prompt's last token, each in its own
/// sequence `1..=w` (a tree level's shape), logits kept and the top `b` of each row
/// taken, the engine synchronised. `reps` timed rounds after one warm-up round, the
/// widths interleaved within each round as the chain's timings are.
/// The engine needs `kv_unified` and `n_seq_max > max_w`.
///
/// # Errors
/// [`SpecError::Config`] for a prompt under 2 tokens; engine errors.
pub fn measure_draft_rows<E: Engine + ?Sized>(
    e: &mut E,
    prompt: &[TokenId],
    max_w: usize,
    b: usize,
    reps: usize,
) -> Result<Vec<f64>, SpecError> {
    if prompt.len() < 2 {
        return Err(SpecError::Config(
            "timing needs a prompt of ≥ 2 tokens".into(),
        ));
    }
    let n = prompt.len() - 1;
    e.kv_clear();
    e.prefill(&prompt[..n], 0, 0, false)?;
    let seqs: Vec<[i32; 1]> = (1..=max_w as i32).map(|s| [s]).collect();
    let mut xs: Vec<Vec<f64>> = vec![Vec::with_capacity(reps); max_w];
    for r in 0..=reps {
        for w in 1..=max_w {
            for s in 1..=w as i32 {
                e.kv_copy(0, s, n as u32)?;
            }
            let items: Vec<SeqItem<'_>> = (0..w)
                .map(|i| SeqItem {
                    token: prompt[(n + i) % prompt.len()],
                    pos: n as u32,
                    seqs: &seqs[i][..],
                    logits: true,
                })
                .collect();
            let t0 = Instant::now();
            e.decode_seqs(&items)?;
            e.synchronize();
            for i in 0..w {
                std::hint::black_box(top_n(e.logits(i)?, b));
            }
            let ns = ns_since(t0) as f64;
            if r > 0 {
                xs[w - 1].push(ns);
            }
            for s in 1..=w as i32 {
                e.kv_truncate(s, 0)?;
            }
        }
    }
    // Medians (reps ≥ 1 samples each; none: NaN, as the chain's timings give).
    Ok(xs
        .into_iter()
        .map(|v| Observations::new(v).map_or(f64::NAN, |o| o.median()))
        .collect())
}

impl SpecSession {
    /// Generates from `prompt` with trees of `shape` drafted by `drafter` and verified
    /// by `target` (both made with `kv_unified`; `n_seq_max ≥ leaves + 1` for the
    /// drafter, `≥ leaves + 2` for the target).
    /// `cfg.k` is ignored: the shape's depth is the draft length, cut near
    /// `cfg.max_new` so that no iteration drafts past it.
    ///
    /// # Errors
    /// [`SpecError::Config`] for an empty prompt, a shape out of range or a verify
    /// pass of more than [`SpecSession::max_rows_per_pass`] rows; engine errors.
    pub fn generate_tree<T: Engine + ?Sized, D: Engine>(
        &mut self,
        target: &mut T,
        drafter: &mut TreeDraftModel<D>,
        prompt: &[TokenId],
        shape: &TreeShape,
        cfg: &SpecConfig,
    ) -> Result<SpecOutput, SpecError> {
        if prompt.is_empty() {
            return Err(SpecError::Config("empty prompt".into()));
        }
        shape.validate().map_err(SpecError::Config)?;
        if shape.k > K_MAX {
            return Err(SpecError::Config(format!(
                "tree depth {} > {K_MAX}",
                shape.k
            )));
        }
        let rows = shape.n_nodes() + 1;
        if rows > self.max_rows_per_pass || rows as u32 > target.n_batch() {
            return Err(SpecError::Config(format!(
                "a tree of {} has {rows} verify rows; at most {} fit one pass here (batch {}): lower b, m or k",
                shape.label(),
                self.max_rows_per_pass,
                target.n_batch()
            )));
        }
        cfg.sampling.validate().map_err(SpecError::Config)?;
        let n_target = target.n_vocab();
        let n_shared = drafter.engine.n_vocab().min(n_target);
        let cx = DraftCtx {
            sampling: cfg.sampling,
            n_shared,
        };
        let greedy = cfg.sampling.is_greedy();
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let mut st = SpecStats {
            accept_hist: vec![0; shape.k + 1],
            draft_len_hist: vec![0; shape.k + 1],
            ..Default::default()
        };
        let t0 = Instant::now();
        self.kv.sync_prefix(target, &prompt[..prompt.len() - 1])?;
        drafter.begin(prompt)?;
        target.synchronize();
        st.prefill_ns = ns_since(t0);

        // The rejected nodes' cells are parked in the sequence after the leaves'.
        let park = 1 + shape.n_leaves() as i32;
        let mut parked = 0usize;
        let mut hist = prompt.to_vec();
        let mut out = Vec::with_capacity(cfg.max_new);
        crate::util::epoch();
        let t1 = Instant::now();
        let mut bd = IterBreakdown::default();
        // Every span below starts where the last ended (one clock read between), so
        // the parts sum to the decode clock (`IterBreakdown::coverage`).
        let mut ts = Instant::now();
        while out.len() < cfg.max_new {
            if cfg.max_iterations > 0 && st.n_iterations >= cfg.max_iterations as u64 {
                break;
            }
            let left = cfg.max_new - out.len() - 1;
            let n = hist.len();
            if n + parked + shape.n_nodes() + 1 > target.n_ctx() as usize {
                let tk = Instant::now();
                bd.other_ns += (tk - ts).as_nanos() as u64;
                // The parked cells fill the context: start it again from the history,
                // the prompt as it was prefilled and the generated tokens in passes
                // of at most max_rows_per_pass rows, the shapes their cells were
                // computed in (a larger pass computes them slightly differently).
                target.kv_clear();
                self.kv.cached.clear();
                parked = 0;
                st.n_kv_compactions += 1;
                let p = prompt.len() - 1;
                self.kv.sync_prefix(target, &hist[..p])?;
                let mut end = p;
                while end < n - 1 {
                    end = (end + self.max_rows_per_pass).min(n - 1);
                    self.kv.sync_prefix(target, &hist[..end])?;
                }
                target.synchronize();
                ts = Instant::now();
                bd.target_rollback_ns += (ts - tk).as_nanos() as u64;
            }
            self.kv.sync_prefix(target, &hist[..n - 1])?;
            let td = Instant::now();
            bd.other_ns += (td - ts).as_nanos() as u64;
            let mut draft = if left > 0 {
                let s = TreeShape {
                    k: shape.k.min(left),
                    b: shape.b,
                    m: shape.m.min(shape.k.min(left)),
                };
                drafter.propose_tree(&hist, &s, &cx)?
            } else {
                TreeDraft::default()
            };
            let tv = Instant::now();
            let span = (tv - td).as_nanos() as u64;
            st.draft_ns += span;
            bd.add_draft(&std::mem::take(&mut draft.times), span);
            let tree = &draft.tree;
            let leaves = tree.leaves();
            let n_leaves = leaves.len();
            let under: Vec<Vec<i32>> = tree
                .leaves_under()
                .iter()
                .map(|ls| ls.iter().map(|&l| 1 + l as i32).collect())
                .collect();
            let tki = Instant::now();
            for l in 0..n_leaves {
                target.kv_copy(0, 1 + l as i32, (n - 1) as u32)?;
            }
            let tb = Instant::now();
            let mut kv_ns = (tb - tki).as_nanos() as u64;
            let all: Vec<i32> = (0..=n_leaves as i32).collect();
            let mut items = vec![SeqItem {
                token: hist[n - 1],
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
            let tf = Instant::now();
            target.decode_seqs(&items)?;
            target.synchronize();
            let tr = Instant::now();
            bd.verify_forward_ns += (tr - tf).as_nanos() as u64;
            st.n_target_passes += 1;
            let (mut fetch, mut pick) = (0u64, 0u64);
            let acc: u64;
            let outcome = if greedy {
                // With a tie break (SpecSession::set_tie_break): a row whose path
                // follows the reference takes the reference's next token where the
                // row's argmax leads it by at most the tolerance, as the chain does.
                let tie = self.tie.as_ref().filter(|t| t.reference.starts_with(&hist));
                let mut am = Vec::with_capacity(items.len());
                for i in 0..items.len() {
                    let t0 = Instant::now();
                    let row = target.logits(i)?;
                    let t1 = Instant::now();
                    let shared = n_shared.min(row.len());
                    let (mut t, _) = argmax_max(&row[..shared]);
                    if let Some(tb) = tie {
                        let path = if i == 0 {
                            Vec::new()
                        } else {
                            tree.tokens_of(&tree.path_to(i - 1))
                        };
                        let at = n + path.len();
                        if tb.reference.len() > at && tb.reference[n..at] == path[..] {
                            let r = tb.reference[at];
                            let gap = row[t as usize]
                                - row.get(r as usize).copied().unwrap_or(f32::NEG_INFINITY);
                            if r != t && (r as usize) < shared && gap <= tb.tolerance {
                                st.n_tie_breaks += 1;
                                st.tie_gap_max = st.tie_gap_max.max(f64::from(gap));
                                t = r;
                            }
                        }
                    }
                    am.push(t);
                    fetch += (t1 - t0).as_nanos() as u64;
                    pick += ns_since(t1);
                }
                let ta = Instant::now();
                let o = accept_greedy(tree, am[0], &am[1..]);
                acc = ns_since(ta);
                o
            } else {
                let mut p = Vec::with_capacity(items.len());
                for i in 0..items.len() {
                    let t0 = Instant::now();
                    let row = target.logits(i)?;
                    let t1 = Instant::now();
                    p.push(cfg.sampling.distribution(&row[..n_shared.min(row.len())]));
                    fetch += (t1 - t0).as_nanos() as u64;
                    pick += ns_since(t1);
                }
                let ta = Instant::now();
                let o = accept_sampled(tree, &p[0], &p[1..], &mut || uniform(&mut rng));
                acc = ns_since(ta);
                o
            };
            bd.verify_fetch_ns += fetch;
            bd.verify_pick_ns += pick;
            bd.accept_ns += acc;
            // Sequence 0 keeps the root and the accepted path; the other nodes' cells
            // are parked, not freed, so the next token lands above every kept cell
            // (module docs, "KV cache").
            let tko = Instant::now();
            let a = outcome.path.len();
            if let Some(&last) = outcome.path.last() {
                let leaf = under[last][0];
                target.kv_copy(leaf, 0, (n + a) as u32)?;
            }
            for l in 0..n_leaves {
                target.kv_park(1 + l as i32, park)?;
                target.kv_truncate(1 + l as i32, 0)?;
            }
            let tc = Instant::now();
            kv_ns += (tc - tko).as_nanos() as u64;
            bd.target_rollback_ns += kv_ns;
            // The verify span's own work: the leaves' sequences, building the batch,
            // and what ran between the picks and the acceptance.
            bd.verify_other_ns += (tki - tv).as_nanos() as u64
                + (tf - tb).as_nanos() as u64
                + ((tko - tr).as_nanos() as u64).saturating_sub(fetch + pick + acc);
            parked += tree.len() - a;
            self.kv.cached.truncate(n - 1);
            self.kv.cached.push(hist[n - 1]);
            self.kv.cached.extend(tree.tokens_of(&outcome.path));
            st.verify_ns += (tc - tv).as_nanos() as u64;
            st.n_iterations += 1;
            st.n_drafted += tree.len() as u64;
            st.n_draft_iterations += (!tree.is_empty()) as u64;
            st.n_draft_passes += draft.passes as u64;
            st.draft_len_hist[tree.depth.iter().copied().max().unwrap_or(0)] += 1;
            let commit = tree
                .tokens_of(&outcome.path)
                .into_iter()
                .chain(std::iter::once(outcome.next));
            let (mut done, mut emitted) = (false, 0usize);
            for t in commit {
                out.push(t);
                hist.push(t);
                emitted += 1;
                st.n_emitted += 1;
                if target.is_eog(t) || out.len() >= cfg.max_new {
                    done = true;
                    break;
                }
            }
            // Nothing after the end of generation counts as accepted, or rejected.
            let accepted = a.min(emitted);
            st.n_rejections += (outcome.rejected && emitted > a) as u64;
            st.n_accepted += accepted as u64;
            st.accept_hist[accepted] += 1;
            ts = tc;
            if done {
                break;
            }
        }
        target.synchronize();
        let te = Instant::now();
        bd.other_ns += (te - ts).as_nanos() as u64;
        st.breakdown = bd;
        let span = crate::measure::sampler::session::TimedSpan::between(t1, te);
        st.decode_ns = span.len_ns();
        // Freeing the parked cells would leave holes below kept cells: the next
        // generation starts from an empty cache.
        target.kv_clear();
        self.kv.cached.clear();
        drafter.end(&hist)?;
        Ok(SpecOutput {
            tokens: out,
            stats: st,
            decode_span: Some(span),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_n_takes_the_largest_first_and_the_lower_index_on_ties() {
        let row = [0.5, 2.0, -1.0, 2.0, 1.5, f32::NAN, 3.0];
        assert_eq!(top_n(&row, 3), vec![6, 1, 3]);
        assert_eq!(top_n(&[0.5, 2.0, -1.0, 2.0], 1), vec![1]);
        assert_eq!(top_n(&row, 0), Vec::<TokenId>::new());
        assert_eq!(top_n(&row, 10).len(), 6, "NaN is never a candidate");
        assert_eq!(top_n(&[1.0, 1.0, 1.0], 2), vec![0, 1]);
    }

    /// The block-skipping scan against a full sort (value descending, index
    /// ascending, NaN dropped) on rows long enough to span many 256-entry blocks,
    /// with few distinct values (ties across blocks), NaN, ±∞ and −0.
    #[test]
    fn top_n_equals_a_full_sort_on_long_rows() {
        use rand::{RngExt, SeedableRng};
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for trial in 0..300 {
            let len = rng.random_range(1..3000usize);
            let levels = rng.random_range(1..40u32);
            let row: Vec<f32> = (0..len)
                .map(|_| match rng.random_range(0..100u32) {
                    0 => f32::NAN,
                    1 => f32::INFINITY,
                    2 => f32::NEG_INFINITY,
                    3 => -0.0,
                    _ => rng.random_range(0..levels) as f32 - levels as f32 / 2.0,
                })
                .collect();
            let mut all: Vec<(f32, usize)> = row
                .iter()
                .copied()
                .enumerate()
                .filter(|(_, x)| !x.is_nan())
                .map(|(i, x)| (x, i))
                .collect();
            // ±0 compare equal, as `>` treats them: the lower index first.
            all.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
            for n in [1usize, 2, 3, 5, 9] {
                let want: Vec<TokenId> = all.iter().take(n).map(|&(_, i)| i as TokenId).collect();
                assert_eq!(top_n(&row, n), want, "trial {trial}, n {n}, len {len}");
            }
        }
    }
}
