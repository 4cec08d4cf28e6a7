//! Tree drafts: several continuations drafted at once and verified in one target
//! pass.
//!
//! A chain draft proposes one token per position; when the target rejects the first
//! one, the whole draft is lost. A **tree** keeps the draft's top `b` tokens at each
//! of the first `m` depths and continues every branch as a chain to depth `k`
//! ([`TreeShape`]). The target verifies every node in one pass: each node is fed at
//! its depth's position and attends to its ancestors only (in llama.cpp, each leaf
//! path is a sequence id and a node belongs to the sequences of the leaves below it,
//! [`Tree::leaves_under`]; the speculative example in llama.cpp verifies several
//! drafts the same way). The longest path that the target agrees with is accepted.
//!
//! **Acceptance.** Greedy ([`accept_greedy`]): from the root, descend into the child
//! that equals the target's argmax; stop at the first node with no such child and
//! emit the argmax (a bonus token at a leaf). Sampled ([`accept_sampled`]): the
//! tree's children are deterministic proposals (the draft's top tokens, `q = δ`), so
//! the multi-draft rule of SpecInfer (Miao et al. 2024, §4.2) reduces to one draw per
//! visited node: draw `y ~ p` from the target's distribution there; descend if `y` is
//! a child, else emit `y` and stop. Every emitted token is then distributed exactly as
//! the target's `p` (each is a draw from `p` at its position, whatever the tree).
//!
//! **Expected length under set acceptance** ([`expected_tokens`]). The set-acceptance
//! model of [`super::synth`] places the target's token at each drafted position with
//! probability `α`. For a node with `b` children, the tree's drafter places it at
//! rank `r` with probability `α (1 − α)^(r − 1)` ([`set_rank`]): found among the
//! children with probability `s_b = 1 − (1 − α)^b`. With `s_j` the probability at
//! depth `j` (`b` children at `j ≤ m`, one after), the tokens emitted per iteration
//! are `E = 1 + Σ_{d=1..k} Π_{j=1..d} s_j`, which for `b = 1` is the chain's
//! `(1 − α^(k+1)) ÷ (1 − α)` ([`super::cost::expected_tokens`]).
//!
//! The verify pass has [`TreeShape::n_nodes`] `+ 1` rows (the root is the last
//! committed token); the draft runs one pass per depth over that depth's parents
//! ([`TreeShape::draft_pass_widths`]). [`iteration_ns`] and [`predicted_speedup`] are
//! the cost model of [`super::cost`] for a tree, with the loop's measured terms.

use super::K_MAX;
use super::cost::{LoopOverhead, Timings, TreeOverhead};
use super::sampling::sample_with;
use crate::measure::engine::TokenId;
use serde::{Deserialize, Serialize};

/// The most nodes a tree may have: a verify pass of `n_nodes + 1` rows must stay in
/// one micro-batch and within the sequences a context is made with.
pub const MAX_NODES: usize = 64;

/// A tree's shape: depth `k`, branching `b` at each of the first `m` depths, then a
/// chain per branch. `b = 1` (or `m = 0`) is a chain of `k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeShape {
    /// Depth: tokens drafted along each root-to-leaf path.
    pub k: usize,
    /// Children per node at the first `m` depths (the draft's top `b` tokens).
    pub b: usize,
    /// Depths that branch (`0..=k`).
    pub m: usize,
}

impl TreeShape {
    /// A chain of `k` drafted tokens.
    pub fn chain(k: usize) -> TreeShape {
        TreeShape { k, b: 1, m: 0 }
    }

    /// Checks the ranges: `1 ≤ k ≤ K_MAX`, `b ≥ 1`, `m ≤ k`, at most [`MAX_NODES`]
    /// nodes.
    ///
    /// # Errors
    /// A message naming the field and its allowed range.
    pub fn validate(&self) -> Result<(), String> {
        if self.k == 0 || self.k > K_MAX {
            return Err(format!("tree depth k = {} must be in 1..={K_MAX}", self.k));
        }
        if self.b == 0 {
            return Err("tree branching b must be ≥ 1".into());
        }
        if self.m > self.k {
            return Err(format!(
                "tree branching depths m = {} must be ≤ k = {}",
                self.m, self.k
            ));
        }
        let n = self.n_nodes();
        if n > MAX_NODES {
            return Err(format!(
                "tree k = {}, b = {}, m = {} has {n} nodes, more than {MAX_NODES}: lower b or m",
                self.k, self.b, self.m
            ));
        }
        Ok(())
    }

    /// Children per node at depth `d` (1-based): `b` for `d ≤ m`, else 1.
    pub fn branching_at(&self, d: usize) -> usize {
        if d <= self.m { self.b } else { 1 }
    }

    /// Nodes at each depth `1..=k`.
    pub fn level_widths(&self) -> Vec<usize> {
        let mut w = 1usize;
        (1..=self.k)
            .map(|d| {
                w = w.saturating_mul(self.branching_at(d));
                w
            })
            .collect()
    }

    /// Drafted tokens in the tree (rows of the verify pass less the root's).
    pub fn n_nodes(&self) -> usize {
        self.level_widths()
            .iter()
            .fold(0usize, |a, &w| a.saturating_add(w))
    }

    /// Root-to-leaf paths.
    pub fn n_leaves(&self) -> usize {
        self.level_widths().last().copied().unwrap_or(1)
    }

    /// Rows of each draft pass, one pass per depth: the parents whose children it
    /// proposes (the root for depth 1, then the nodes of depth `d − 1`).
    pub fn draft_pass_widths(&self) -> Vec<usize> {
        let w = self.level_widths();
        std::iter::once(1)
            .chain(w.iter().copied().take(self.k.saturating_sub(1)))
            .collect()
    }

    /// Parses a label as [`TreeShape::label`] writes it, spaces optional: `k3b2m1`,
    /// `k3 b2 m1`, `k4` (a chain). The shape is validated.
    ///
    /// # Errors
    /// A message naming the text and the form expected.
    pub fn parse(text: &str) -> Result<TreeShape, String> {
        let bad = || {
            format!(
                "tree shape `{text}`: expected k<depth>[b<branching>m<branching depths>], e.g. k3b2m1 or k2b2m2"
            )
        };
        let t: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let mut vals = [None::<usize>; 3];
        let mut rest = t.as_str();
        while !rest.is_empty() {
            let i = match rest.as_bytes()[0] {
                b'k' => 0,
                b'b' => 1,
                b'm' => 2,
                _ => return Err(bad()),
            };
            let digits = rest[1..].bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 || vals[i].is_some() {
                return Err(bad());
            }
            vals[i] = Some(rest[1..=digits].parse().map_err(|_| bad())?);
            rest = &rest[1 + digits..];
        }
        let shape = match vals {
            [Some(k), None, None] => TreeShape::chain(k),
            [Some(k), Some(b), Some(m)] => TreeShape { k, b, m },
            _ => return Err(bad()),
        };
        shape
            .validate()
            .map_err(|e| format!("tree shape `{text}`: {e}"))?;
        Ok(shape)
    }

    /// `k4` for a chain, `k4 b2 m2` for a tree.
    pub fn label(&self) -> String {
        if self.b == 1 || self.m == 0 {
            format!("k{}", self.k)
        } else {
            format!("k{} b{} m{}", self.k, self.b, self.m)
        }
    }
}

/// A drafted tree. Nodes are stored level by level (every node after its parent);
/// the root, the last committed token, is not a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    /// Each node's token.
    pub token: Vec<TokenId>,
    /// Each node's parent (`None`: a child of the root).
    pub parent: Vec<Option<usize>>,
    /// Each node's depth (1 for the root's children).
    pub depth: Vec<usize>,
}

impl Tree {
    /// Grows a tree of `shape` level by level. `propose(parents, n)` gets the parents
    /// of one level (`[None]` for depth 1) and returns, for each, up to `n` tokens in
    /// the draft's order (its top `n`); a repeated token under one parent is dropped
    /// (it could only be accepted where the first one is). Stops early at a level
    /// where nothing was proposed.
    pub fn grow(
        shape: &TreeShape,
        mut propose: impl FnMut(&[Option<usize>], usize) -> Vec<Vec<TokenId>>,
    ) -> Tree {
        let mut t = Tree::default();
        let mut parents: Vec<Option<usize>> = vec![None];
        for d in 1..=shape.k {
            let proposed = propose(&parents, shape.branching_at(d));
            let mut next = Vec::new();
            for (&p, toks) in parents.iter().zip(&proposed) {
                let mut seen: Vec<TokenId> = Vec::new();
                for &tok in toks.iter().take(shape.branching_at(d)) {
                    if seen.contains(&tok) {
                        continue;
                    }
                    seen.push(tok);
                    next.push(Some(t.push(p, tok)));
                }
            }
            if next.is_empty() {
                break;
            }
            parents = next;
        }
        t
    }

    /// Adds a node under `parent` (which must already be a node) and returns its index.
    ///
    /// # Panics
    /// When `parent` is not an existing node (a caller bug).
    pub fn push(&mut self, parent: Option<usize>, token: TokenId) -> usize {
        let depth = match parent {
            None => 1,
            Some(p) => {
                assert!(p < self.len(), "parent {p} of a new node is not a node");
                self.depth[p] + 1
            }
        };
        self.token.push(token);
        self.parent.push(parent);
        self.depth.push(depth);
        self.token.len() - 1
    }

    /// Nodes in the tree.
    pub fn len(&self) -> usize {
        self.token.len()
    }

    /// No nodes (nothing drafted).
    pub fn is_empty(&self) -> bool {
        self.token.is_empty()
    }

    /// The children of `node` (`None`: the root), in the order they were added.
    pub fn children(&self, node: Option<usize>) -> impl Iterator<Item = usize> + '_ {
        self.parent
            .iter()
            .enumerate()
            .filter(move |(_, p)| **p == node)
            .map(|(i, _)| i)
    }

    /// Nodes without children, in order; leaf `ℓ` is the `ℓ`-th of them.
    pub fn leaves(&self) -> Vec<usize> {
        (0..self.len())
            .filter(|&i| self.children(Some(i)).next().is_none())
            .collect()
    }

    /// For each node, the leaves (indices into [`Tree::leaves`]) at or below it: the
    /// sequences the node belongs to in the verify pass (the root belongs to all).
    pub fn leaves_under(&self) -> Vec<Vec<usize>> {
        let mut under = vec![Vec::new(); self.len()];
        for (l, &leaf) in self.leaves().iter().enumerate() {
            let mut n = Some(leaf);
            while let Some(i) = n {
                under[i].push(l);
                n = self.parent[i];
            }
        }
        under
    }

    /// The nodes from the root's child down to `node`.
    pub fn path_to(&self, node: usize) -> Vec<usize> {
        let mut path = Vec::with_capacity(self.depth[node]);
        let mut n = Some(node);
        while let Some(i) = n {
            path.push(i);
            n = self.parent[i];
        }
        path.reverse();
        path
    }

    /// The tokens along `path`.
    pub fn tokens_of(&self, path: &[usize]) -> Vec<TokenId> {
        path.iter().map(|&i| self.token[i]).collect()
    }

    fn child_with(&self, node: Option<usize>, token: TokenId) -> Option<usize> {
        self.children(node).find(|&c| self.token[c] == token)
    }
}

/// What one verification of a tree decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeOutcome {
    /// The accepted nodes, from depth 1 down (empty: none accepted).
    pub path: Vec<usize>,
    /// The token emitted after the accepted path: the target's own at the first node
    /// where no child matched, or the bonus token after a leaf.
    pub next: TokenId,
    /// Whether the walk stopped at a node that had children (`false`: it reached a
    /// leaf, or the tree is empty and `next` is a plain target step).
    pub rejected: bool,
}

/// Greedy verification: `root_argmax` is the target's argmax on the root's row,
/// `node_argmax[i]` on node `i`'s row.
///
/// # Panics
/// When `node_argmax` does not have one entry per node (a caller bug).
pub fn accept_greedy(tree: &Tree, root_argmax: TokenId, node_argmax: &[TokenId]) -> TreeOutcome {
    assert_eq!(node_argmax.len(), tree.len(), "one target row per node");
    let mut path = Vec::new();
    let mut at = None;
    let mut want = root_argmax;
    while let Some(c) = tree.child_with(at, want) {
        path.push(c);
        at = Some(c);
        want = node_argmax[c];
    }
    let rejected = tree.children(at).next().is_some();
    TreeOutcome {
        path,
        next: want,
        rejected,
    }
}

/// Stochastic verification of a tree of deterministic proposals: `p_root` is the
/// target's distribution (after the sampling filters) on the root's row, `p_node[i]`
/// on node `i`'s. One uniform draw per visited node, in walk order.
///
/// # Panics
/// When `p_node` does not have one row per node, or a visited row has no mass (a
/// caller bug: the filters always keep one token).
pub fn accept_sampled(
    tree: &Tree,
    p_root: &[f64],
    p_node: &[Vec<f64>],
    u: &mut dyn FnMut() -> f64,
) -> TreeOutcome {
    assert_eq!(p_node.len(), tree.len(), "one target row per node");
    let mut path = Vec::new();
    let mut at: Option<usize> = None;
    loop {
        let p = match at {
            None => p_root,
            Some(i) => &p_node[i],
        };
        let y = sample_with(p, u()).expect("a target distribution with mass");
        match tree.child_with(at, y) {
            Some(c) => {
                path.push(c);
                at = Some(c);
            }
            None => {
                let rejected = tree.children(at).next().is_some();
                return TreeOutcome {
                    path,
                    next: y,
                    rejected,
                };
            }
        }
    }
}

/// Expected tokens emitted per iteration (accepted + the one after) for `shape` under
/// set acceptance `alpha`, with the tree drafter's placement ([`set_rank`]): `1 +
/// Σ_{d=1..k} Π_{j=1..d} (1 − (1 − α)^{b_j})`.
pub fn expected_tokens(shape: &TreeShape, alpha: f64) -> f64 {
    let a = alpha.clamp(0.0, 1.0);
    let mut reach = 1.0;
    let mut e = 1.0;
    for d in 1..=shape.k {
        reach *= 1.0 - (1.0 - a).powi(shape.branching_at(d) as i32);
        e += reach;
    }
    e
}

/// Where the set-acceptance tree drafter places the target's token among `b`
/// children: rank `r` (0-based) when draw `r` is the first below `alpha`, `None` when
/// none is (the children are all wrong). `u(r)` gives draw `r`. Rank `r` then has
/// probability `α (1 − α)^r`.
pub fn set_rank(alpha: f64, b: usize, u: &mut dyn FnMut() -> f64) -> Option<usize> {
    (0..b).find(|_| u() < alpha)
}

/// `T_iter` of a tree in the loop, ns: one draft pass per depth over its parents
/// ([`TreeShape::draft_pass_widths`]; `draft_rows_ns[w − 1]` for a pass of `w` rows,
/// plus the loop's `δ_step` per pass), one target pass over `nodes + 1` rows
/// (`t.t_verify_ns`), plus the loop's `c_iter` ([`LoopOverhead`]). For a chain
/// (`b = 1`, `draft_rows_ns[0] = t_draft`) this is [`Timings::iteration_ns_at`].
/// `None` where the timings do not reach the shape's widths or rows.
pub fn iteration_ns(
    t: &Timings,
    draft_rows_ns: &[f64],
    shape: &TreeShape,
    o: &LoopOverhead,
) -> Option<f64> {
    let mut ns = o.iter_ns + *t.t_verify_ns.get(shape.n_nodes())?;
    for w in shape.draft_pass_widths() {
        ns += draft_rows_ns.get(w.checked_sub(1)?)? + o.draft_step_ns;
    }
    Some(ns)
}

impl TreeOverhead {
    /// `c_tree` from a run of the tree loop (`spec`) against the timed passes:
    /// `(decode_ns − Σ_{d ≥ 1} h[d] · P(shape cut to depth d) − Σ_a A[a] ·
    /// draft_rows_ns[a] − h[0] · (t_verify(1) + c_base)) ÷ Σ_{d ≥ 1} h[d]`, `h` the
    /// run's histogram of tree depths (the loop cuts the last iterations' trees
    /// short), `P` the timed passes of a shape after its catch-up ([`iteration_ns`]
    /// with no loop terms, less its first pass), `A` the histogram of accepted path
    /// lengths (a catch-up of `a + 1` rows follows each; the run's first catch-up, one
    /// row, stands in for the one its last iteration never runs), `c_base` from `o`.
    /// With it, the model summed over the run's iterations is its decode time again.
    /// `None` when no iteration had a draft or a shape is beyond the timings.
    pub fn from_run(
        t: &Timings,
        draft_rows_ns: &[f64],
        shape: &TreeShape,
        alpha: f64,
        o: &LoopOverhead,
        spec: &super::run::SpecStats,
    ) -> Option<TreeOverhead> {
        let none = LoopOverhead {
            iter_ns: 0.0,
            draft_step_ns: 0.0,
            ..*o
        };
        let h = &spec.draft_len_hist;
        let mut passes = h.first().copied().unwrap_or(0) as f64 * t.base_ns_at(o)?;
        let mut with_draft = 0.0;
        for (d, &n) in h.iter().enumerate().skip(1) {
            if n > 0 {
                let cut = TreeShape {
                    k: d,
                    b: shape.b,
                    m: shape.m.min(d),
                };
                passes += n as f64
                    * (iteration_ns(t, draft_rows_ns, &cut, &none)? - draft_rows_ns.first()?);
                with_draft += n as f64;
            }
        }
        for (a, &n) in spec.accept_hist.iter().enumerate() {
            if n > 0 {
                passes += n as f64 * draft_rows_ns.get(a)?;
            }
        }
        (with_draft > 0.0).then(|| TreeOverhead {
            shape: shape.label(),
            alpha,
            iter_ns: (spec.decode_ns as f64 - passes) / with_draft,
        })
    }

    /// The loop terms for [`predicted_speedup`] of this shape: `c_tree` as the
    /// iteration's term, no per-pass term (it is in `c_tree`), `c_base` from `o`.
    pub fn loop_terms(&self, o: &LoopOverhead) -> LoopOverhead {
        LoopOverhead {
            iter_ns: self.iter_ns,
            draft_step_ns: 0.0,
            ..*o
        }
    }
}

impl Timings {
    /// The tree overhead measured for `shape` at the set rate nearest `alpha`
    /// (`None` when that shape has none).
    pub fn tree_overhead_at(&self, shape: &TreeShape, alpha: f64) -> Option<TreeOverhead> {
        let label = shape.label();
        self.tree_overheads
            .iter()
            .filter(|o| o.shape == label)
            .min_by(|a, b| (a.alpha - alpha).abs().total_cmp(&(b.alpha - alpha).abs()))
            .cloned()
    }
}

/// The accepted path's length `a` under set acceptance `alpha`: `P(a)` for
/// `a = 0..=k`, from `P(a ≥ d) = Π_{j ≤ d} (1 − (1 − α)^{b_j})` (as
/// [`expected_tokens`]: `Σ_a P(a) · (a + 1)` is its value).
pub fn accepted_len_probs(shape: &TreeShape, alpha: f64) -> Vec<f64> {
    let a = alpha.clamp(0.0, 1.0);
    let mut reach = vec![1.0];
    for d in 1..=shape.k {
        let r = reach[d - 1] * (1.0 - (1.0 - a).powi(shape.branching_at(d) as i32));
        reach.push(r);
    }
    reach.push(0.0);
    (0..=shape.k).map(|i| reach[i] - reach[i + 1]).collect()
}

/// `T_iter` of a tree at set acceptance `alpha`, ns: [`iteration_ns`] with its first
/// draft pass (one row) replaced by the catch-up pass that really runs there: after
/// an iteration that accepted a path of `a` nodes, the draft feeds those `a` tokens
/// and the target's next one in one pass of `a + 1` rows (the tree's nodes lived in
/// the leaves' sequences, which are dropped), expected cost
/// `Σ_a P(a) · draft_rows_ns[a]` ([`accepted_len_probs`]). `None` where the timings
/// do not reach `k + 1` rows, the shape's widths or its verify rows.
pub fn iteration_ns_at(
    t: &Timings,
    draft_rows_ns: &[f64],
    shape: &TreeShape,
    alpha: f64,
    o: &LoopOverhead,
) -> Option<f64> {
    let mut catch_up = 0.0;
    for (a, p) in accepted_len_probs(shape, alpha).into_iter().enumerate() {
        catch_up += p * draft_rows_ns.get(a)?;
    }
    Some(iteration_ns(t, draft_rows_ns, shape, o)? - draft_rows_ns.first()? + catch_up)
}

/// Predicted speedup of `shape` over target-only decoding in the loop at set
/// acceptance `alpha`: `E[tokens] · (t_verify(1) + c_base) ÷ T_iter`
/// ([`expected_tokens`], [`iteration_ns_at`]).
pub fn predicted_speedup(
    t: &Timings,
    draft_rows_ns: &[f64],
    shape: &TreeShape,
    alpha: f64,
    o: &LoopOverhead,
) -> Option<f64> {
    Some(
        expected_tokens(shape, alpha) * t.base_ns_at(o)?
            / iteration_ns_at(t, draft_rows_ns, shape, alpha, o)?,
    )
}

#[cfg(test)]
mod tests {
    use super::super::cost;
    use super::super::verify::verify_greedy;
    use super::*;

    #[test]
    fn a_shape_parses_from_its_label_and_bad_text_is_refused() {
        for shape in [
            TreeShape { k: 3, b: 2, m: 1 },
            TreeShape { k: 2, b: 2, m: 2 },
            TreeShape::chain(4),
        ] {
            assert_eq!(TreeShape::parse(&shape.label()), Ok(shape));
        }
        assert_eq!(
            TreeShape::parse("k3b2m1"),
            Ok(TreeShape { k: 3, b: 2, m: 1 })
        );
        for bad in [
            "", "3x2x1", "k3b2", "k3 k4", "k0", "k3b2m4", "b2m1", "k3b2m1x",
        ] {
            let e = TreeShape::parse(bad).unwrap_err();
            assert!(e.contains(&format!("`{bad}`")), "{bad}: {e}");
        }
    }
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn shapes_count_their_nodes_leaves_and_draft_passes() {
        let s = TreeShape { k: 4, b: 2, m: 2 };
        s.validate().unwrap();
        assert_eq!(s.level_widths(), vec![2, 4, 4, 4]);
        assert_eq!((s.n_nodes(), s.n_leaves()), (14, 4));
        assert_eq!(s.draft_pass_widths(), vec![1, 2, 4, 4]);
        assert_eq!(s.label(), "k4 b2 m2");
        let c = TreeShape::chain(5);
        assert_eq!(c.level_widths(), vec![1; 5]);
        assert_eq!((c.n_nodes(), c.n_leaves(), c.label()), (5, 1, "k5".into()));
        assert_eq!(c.draft_pass_widths(), vec![1; 5]);
        // Branching at every depth: 3 + 9 + 27 = 39 nodes.
        assert_eq!(TreeShape { k: 3, b: 3, m: 3 }.n_nodes(), 39);
        for (bad, needle) in [
            (TreeShape { k: 0, b: 1, m: 0 }, "k = 0"),
            (TreeShape { k: 3, b: 0, m: 1 }, "b must"),
            (TreeShape { k: 2, b: 2, m: 3 }, "m = 3"),
            (TreeShape { k: 6, b: 2, m: 6 }, "nodes"),
        ] {
            let e = bad.validate().unwrap_err();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
    }

    /// A tree of k 3, b 2, m 1 whose proposals are `10 × parent + rank` (the root's
    /// children 1 and 2).
    fn fixture() -> Tree {
        let s = TreeShape { k: 3, b: 2, m: 1 };
        Tree::grow(&s, |parents, n| {
            parents
                .iter()
                .map(|p| {
                    let base = p.map_or(0, |i| 10 * (i as TokenId + 1));
                    (1..=n as TokenId).map(|r| base + r).collect()
                })
                .collect()
        })
    }

    #[test]
    fn a_grown_tree_has_its_parents_depths_and_sequences() {
        let t = fixture();
        // Level 1: nodes 0, 1 (tokens 1, 2); level 2: 2 under 0, 3 under 1; level 3:
        // 4 under 2, 5 under 3.
        assert_eq!(t.token, vec![1, 2, 11, 21, 31, 41]);
        assert_eq!(
            t.parent,
            vec![None, None, Some(0), Some(1), Some(2), Some(3)]
        );
        assert_eq!(t.depth, vec![1, 1, 2, 2, 3, 3]);
        assert_eq!(t.leaves(), vec![4, 5]);
        assert_eq!(
            t.leaves_under(),
            vec![vec![0], vec![1], vec![0], vec![1], vec![0], vec![1]]
        );
        assert_eq!(t.path_to(5), vec![1, 3, 5]);
        assert_eq!(t.tokens_of(&t.path_to(5)), vec![2, 21, 41]);
        // A repeated proposal under one parent is dropped; an empty level stops.
        let s = TreeShape { k: 3, b: 3, m: 1 };
        let mut calls = 0;
        let t = Tree::grow(&s, |parents, _| {
            calls += 1;
            if calls == 1 {
                vec![vec![7, 7, 8]]
            } else {
                parents.iter().map(|_| vec![]).collect()
            }
        });
        assert_eq!((t.token.clone(), calls), (vec![7, 8], 2));
        // Branching at two depths: the shared node belongs to both leaves below it.
        let s = TreeShape { k: 2, b: 2, m: 2 };
        let t = Tree::grow(&s, |parents, n| {
            parents
                .iter()
                .map(|_| (0..n as TokenId).collect())
                .collect()
        });
        assert_eq!(t.len(), s.n_nodes());
        let under = t.leaves_under();
        assert_eq!(
            (under[0].clone(), under[1].clone()),
            (vec![0, 1], vec![2, 3])
        );
    }

    #[test]
    fn greedy_acceptance_takes_the_longest_agreeing_path() {
        let t = fixture();
        // The target wants 2, then 21, then 41, then 99 (bonus after the leaf).
        let mut am = vec![0; t.len()];
        am[1] = 21;
        am[3] = 41;
        am[5] = 99;
        let o = accept_greedy(&t, 2, &am);
        assert_eq!(
            (o.path.clone(), o.next, o.rejected),
            (vec![1, 3, 5], 99, false)
        );
        // It wants 2, then 22: node 1 accepted, its child 21 rejected, 22 emitted.
        am[1] = 22;
        let o = accept_greedy(&t, 2, &am);
        assert_eq!((o.path.clone(), o.next, o.rejected), (vec![1], 22, true));
        // It wants 3 at the root: nothing accepted.
        let o = accept_greedy(&t, 3, &am);
        assert_eq!((o.path.clone(), o.next, o.rejected), (vec![], 3, true));
        // An empty tree is a plain target step.
        let o = accept_greedy(&Tree::default(), 5, &[]);
        assert_eq!((o.path.clone(), o.next, o.rejected), (vec![], 5, false));
    }

    #[test]
    fn a_chain_tree_verifies_as_the_chain_verifier_does() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..2000 {
            let k = rng.random_range(1..=6usize);
            let draft: Vec<TokenId> = (0..k).map(|_| rng.random_range(0..3)).collect();
            let target: Vec<TokenId> = (0..=k).map(|_| rng.random_range(0..3)).collect();
            let mut t = Tree::default();
            let mut p = None;
            for &x in &draft {
                p = Some(t.push(p, x));
            }
            let o = accept_greedy(&t, target[0], &target[1..]);
            let c = verify_greedy(&draft, &target);
            assert_eq!(
                (o.path.len(), o.next, o.rejected),
                (c.n_accepted, c.next, c.rejected),
                "draft {draft:?}, target {target:?}"
            );
        }
    }

    /// The joint law of the first two emitted tokens, integrated exactly on a grid of
    /// the first two uniform draws (midpoints: each cell's token is the one an
    /// inverse-CDF draw gives there), equals the target's `p_root(a) · p_a(b)` where
    /// the walk goes on after `a`. Only the first two draws matter for two tokens.
    #[test]
    fn sampled_acceptance_emits_the_targets_distribution() {
        let t = fixture();
        let p_root = vec![0.1, 0.45, 0.15, 0.3]; // tokens 0..3; children 1 and 2
        // Node rows: a distribution over 0..50 that puts mass on the child tokens.
        let row = |hot: &[(usize, f64)]| {
            let mut p = vec![0.0; 50];
            let rest = 1.0 - hot.iter().map(|(_, w)| w).sum::<f64>();
            p[0] = rest;
            for &(i, w) in hot {
                p[i] = w;
            }
            p
        };
        let p_node = vec![
            row(&[(11, 0.6), (12, 0.1)]), // node 0 (token 1): child 11
            row(&[(21, 0.2), (22, 0.5)]), // node 1 (token 2): child 21
            row(&[(31, 0.7)]),
            row(&[(41, 0.4)]),
            row(&[(5, 1.0)]),
            row(&[(6, 1.0)]),
        ];
        let n = 400;
        let mut joint = std::collections::HashMap::<(TokenId, Option<TokenId>), f64>::new();
        for i in 0..n {
            for j in 0..n {
                let draws = [(i as f64 + 0.5) / n as f64, (j as f64 + 0.5) / n as f64];
                let mut c = 0;
                let mut u = || {
                    let v = draws.get(c).copied().unwrap_or(0.5);
                    c += 1;
                    v
                };
                let o = accept_sampled(&t, &p_root, &p_node, &mut u);
                let mut emitted = t.tokens_of(&o.path);
                emitted.push(o.next);
                let key = (emitted[0], emitted.get(1).copied());
                *joint.entry(key).or_default() += 1.0 / (n * n) as f64;
            }
        }
        let cell = 2.0 / n as f64;
        for (a, &pa) in p_root.iter().enumerate() {
            match t.child_with(None, a as TokenId) {
                // Accepted into node c: the second token is a draw from p_node[c].
                Some(c) => {
                    for (b, &pb) in p_node[c].iter().enumerate() {
                        let got = joint.get(&(a as TokenId, Some(b as TokenId))).copied();
                        let want = pa * pb;
                        assert!(
                            (got.unwrap_or(0.0) - want).abs() <= cell,
                            "P({a}, {b}) = {got:?}, want {want}"
                        );
                    }
                }
                // Emitted at the root: the iteration ends there.
                None => {
                    let got = joint.get(&(a as TokenId, None)).copied().unwrap_or(0.0);
                    assert!((got - pa).abs() <= cell, "P({a}) = {got}, want {pa}");
                }
            }
        }
        let total: f64 = joint.values().sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
    }

    #[test]
    fn expected_tokens_is_the_chains_for_one_branch_and_matches_simulation() {
        for &a in &[0.0, 0.3, 0.5, 0.7, 0.9, 1.0] {
            for k in 1..=8 {
                let tree = expected_tokens(&TreeShape::chain(k), a);
                let chain = cost::expected_tokens(a, k);
                assert!(
                    (tree - chain).abs() < 1e-12,
                    "α {a}, k {k}: {tree} vs {chain}"
                );
            }
        }
        // k 4, b 2, m 2 at α 0.5 by hand: s = 0.75, 0.75, 0.5, 0.5;
        // E = 1 + 0.75 + 0.5625 + 0.28125 + 0.140625.
        let s = TreeShape { k: 4, b: 2, m: 2 };
        assert!((expected_tokens(&s, 0.5) - 2.734375).abs() < 1e-12);
        // Simulated walks with the set-acceptance placement: the mean tokens per
        // iteration is within 4 standard errors of the formula.
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        for (shape, alpha) in [(s, 0.5), (TreeShape { k: 3, b: 3, m: 1 }, 0.7)] {
            let trials = 200_000;
            let (mut sum, mut sum2) = (0.0, 0.0);
            for _ in 0..trials {
                let mut tokens = 1.0;
                for d in 1..=shape.k {
                    let mut u = || rng.random::<f64>();
                    if set_rank(alpha, shape.branching_at(d), &mut u).is_none() {
                        break;
                    }
                    tokens += 1.0;
                }
                sum += tokens;
                sum2 += tokens * tokens;
            }
            let mean = sum / trials as f64;
            let se = ((sum2 / trials as f64 - mean * mean) / trials as f64).sqrt();
            let want = expected_tokens(&shape, alpha);
            assert!(
                (mean - want).abs() < 4.0 * se,
                "{}: simulated {mean} ± {se}, formula {want}",
                shape.label()
            );
        }
    }

    /// Loop terms and timings by hand: c_iter 1.5, δ_step 0.25, c_base 0.5;
    /// t_verify(j) = 9 + j for j = 1…7, t_draft 2.0.
    fn hand_timings() -> (LoopOverhead, Timings) {
        let o = LoopOverhead {
            alpha: Some(0.7),
            k: 3,
            iter_ns: 1.5,
            draft_step_ns: 0.25,
            base_ns: 0.5,
        };
        let t = Timings {
            t_verify_ns: vec![10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0],
            t_draft_ns: 2.0,
            depth: 0,
            overheads: vec![o],
            draft_rows_ns: Vec::new(),
            tree_overheads: Vec::new(),
        };
        (o, t)
    }

    #[test]
    fn the_trees_cost_is_the_chains_for_one_branch_and_adds_up_by_hand() {
        let (o, t) = hand_timings();
        let rows = [2.0, 2.5, 3.0, 3.5];
        // Draft passes that cost t_draft at any width: the catch-up is one draft step
        // whatever its length, and a chain is the chain's model.
        let flat = [2.0; 9];
        for k in 1..=6 {
            let chain = TreeShape::chain(k);
            assert_eq!(
                iteration_ns(&t, &rows, &chain, &o),
                t.iteration_ns_at(k, &o),
                "k = {k}"
            );
            let a = predicted_speedup(&t, &flat, &chain, 0.7, &o).unwrap();
            let b = cost::predicted_speedup(&t, 0.7, k).unwrap();
            assert!((a - b).abs() < 1e-12, "k = {k}: {a} vs {b}");
        }
        // k 2, b 2, m 2: draft passes of 1 and 2 rows, a verify pass of 7 rows.
        let s = TreeShape { k: 2, b: 2, m: 2 };
        let want = 1.5 + 16.0 + (2.0 + 0.25) + (2.5 + 0.25);
        assert_eq!(iteration_ns(&t, &rows, &s, &o), Some(want));
        // At α = 0.5 a node continues with 1 − 0.5² = 0.75: P(a) = 0.25, 0.1875,
        // 0.5625, and the catch-up of a + 1 rows costs 0.25·2.0 + 0.1875·2.5 +
        // 0.5625·3.0 = 2.65625 in place of the 1-row pass's 2.0.
        let p = accepted_len_probs(&s, 0.5);
        assert!(
            (p[0] - 0.25).abs() < 1e-15
                && (p[1] - 0.1875).abs() < 1e-15
                && (p[2] - 0.5625).abs() < 1e-15,
            "{p:?}"
        );
        let at = want - 2.0 + 2.65625;
        assert_eq!(iteration_ns_at(&t, &rows, &s, 0.5, &o), Some(at));
        let sp = predicted_speedup(&t, &rows, &s, 0.5, &o).unwrap();
        assert!((sp - 2.3125 * 10.5 / at).abs() < 1e-12, "{sp}");
        // Σ P(a) (a + 1) = E[tokens].
        let e: f64 = p.iter().enumerate().map(|(a, q)| q * (a + 1) as f64).sum();
        assert!((e - expected_tokens(&s, 0.5)).abs() < 1e-12);
        // The catch-up needs k + 1 rows timed.
        assert_eq!(iteration_ns_at(&t, &rows[..2], &s, 0.5, &o), None);
        // Beyond the timed rows or widths: no prediction.
        assert_eq!(
            iteration_ns(&t, &rows, &TreeShape { k: 3, b: 2, m: 2 }, &o),
            None
        );
        assert_eq!(iteration_ns(&t, &rows[..1], &s, &o), None);
    }

    #[test]
    fn a_trees_own_loop_cost_gives_its_calibration_runs_time_back() {
        let (o, t) = hand_timings();
        let rows = [2.0, 2.5, 3.0];
        let s = TreeShape { k: 2, b: 2, m: 2 };
        // 7 iterations of the whole tree (after its catch-up: a 2-row pass 2.5 and
        // t_verify(7) = 16.0, 18.5 each), 2 cut to depth 1 (k 1 b 2: the catch-up only,
        // and a verify of 3 rows, 12.0), 1 without a draft (t_verify(1) + c_base =
        // 10.5); catch-ups after 3, 4 and 3 iterations that accepted 0, 1 and 2 nodes
        // (1, 2 and 3 rows: 3·2.0 + 4·2.5 + 3·3.0 = 25.0); and 40.0 of the loop's own:
        // decode = 129.5 + 24.0 + 10.5 + 25.0 + 40.0 = 229.0.
        let spec = crate::experiments::speculative::run::SpecStats {
            draft_len_hist: vec![1, 2, 7],
            accept_hist: vec![3, 4, 3],
            decode_ns: 229,
            ..Default::default()
        };
        let c = TreeOverhead::from_run(&t, &rows, &s, 0.7, &o, &spec).unwrap();
        assert_eq!((c.shape.as_str(), c.alpha), ("k2 b2 m2", 0.7));
        assert!((c.iter_ns - 40.0 / 9.0).abs() < 1e-12, "{}", c.iter_ns);
        // The model gives the run's time back: Σ iterations = decode.
        let l = c.loop_terms(&o);
        assert_eq!((l.draft_step_ns, l.base_ns), (0.0, 0.5));
        let cut = TreeShape { k: 1, b: 2, m: 1 };
        let back = 7.0 * (iteration_ns(&t, &rows, &s, &l).unwrap() - 2.0)
            + 2.0 * (iteration_ns(&t, &rows, &cut, &l).unwrap() - 2.0)
            + t.base_ns_at(&l).unwrap()
            + 25.0;
        assert!((back - 229.0).abs() < 1e-9, "{back}");
        let t2 = Timings {
            tree_overheads: vec![
                c.clone(),
                TreeOverhead {
                    alpha: 0.9,
                    iter_ns: 9.0,
                    ..c.clone()
                },
            ],
            ..t.clone()
        };
        assert_eq!(t2.tree_overhead_at(&s, 0.75), Some(c));
        assert_eq!(t2.tree_overhead_at(&s, 0.85).map(|x| x.iter_ns), Some(9.0));
        assert_eq!(t2.tree_overhead_at(&cut, 0.7), None);
        // No iteration with a draft: no term.
        let plain = crate::experiments::speculative::run::SpecStats {
            draft_len_hist: vec![4, 0, 0],
            accept_hist: vec![4, 0, 0],
            decode_ns: 42,
            ..Default::default()
        };
        assert_eq!(TreeOverhead::from_run(&t, &rows, &s, 0.7, &o, &plain), None);
    }

    #[test]
    fn set_rank_places_the_token_at_rank_r_with_its_probability() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (alpha, b, trials) = (0.4, 3, 300_000);
        let mut counts = [0usize; 4];
        for _ in 0..trials {
            let mut u = || rng.random::<f64>();
            counts[set_rank(alpha, b, &mut u).unwrap_or(b)] += 1;
        }
        for (r, &c) in counts.iter().enumerate() {
            let want = if r < b {
                alpha * (1.0 - alpha).powi(r as i32)
            } else {
                (1.0 - alpha).powi(b as i32)
            };
            let got = c as f64 / trials as f64;
            let se = (want * (1.0 - want) / trials as f64).sqrt();
            assert!((got - want).abs() < 4.0 * se, "rank {r}: {got} vs {want}");
        }
    }
}
