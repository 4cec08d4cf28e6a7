//! Host work on one logit row, inside the timed loop.
//!
//! Every drafted position and every verified row is a full logit row on the host
//! (152,064 `f32` for Qwen2.5-14B, 594 KB), and the loop picks a token from each.
//! [`crate::measure::engine::argmax`] scans it with one dependent compare per entry;
//! [`argmax_max`] gives the same index in two passes that the compiler turns into
//! SIMD (a lane-wise maximum, then the first entry equal to it), and hands back the
//! maximum so the discarded-mass statistic needs no third pass
//! ([`super::vocab::discarded_mass_with_max`]).
//!
//! [`crate::measure::engine::argmax`] stays the independent reference
//! ([`super::run::target_greedy`] uses it); the tests compare the two on rows with
//! ties, infinities and NaN.

use crate::measure::engine::TokenId;
use serde::{Deserialize, Serialize};

/// Lanes of the maximum pass (two AVX2 registers, one AVX-512 register).
const LANES: usize = 16;

/// Index of the largest entry of `row` (the first on ties) and its value: the index
/// [`crate::measure::engine::argmax`] returns for every row, NaN included (a NaN is
/// never larger than anything, so it is skipped, except at index 0, which then
/// wins as it does there). `(0, −∞)` for an empty row.
///
/// Cost: one pass over the row in `LANES`-wide blocks plus a scan up to the
/// maximum's first position.
pub fn argmax_max(row: &[f32]) -> (TokenId, f32) {
    let Some(&first) = row.first() else {
        return (0, f32::NEG_INFINITY);
    };
    if first.is_nan() {
        return (0, first);
    }
    // Lane-wise `if x > m { m = x }`: a NaN `x` never replaces `m` (as in the
    // scalar scan), and the select is one `maxps` per block.
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut blocks = row.chunks_exact(LANES);
    for b in &mut blocks {
        for i in 0..LANES {
            acc[i] = if b[i] > acc[i] { b[i] } else { acc[i] };
        }
    }
    let mut m = first;
    for &x in acc.iter().chain(blocks.remainder()) {
        if x > m {
            m = x;
        }
    }
    // The first entry equal to the maximum (±0 compare equal, as `>` treats them):
    // the scalar scan keeps the first of equal values.
    let mut base = 0;
    for b in row.chunks(LANES) {
        if b.iter().fold(false, |hit, &x| hit | (x == m)) {
            let i = b.iter().position(|&x| x == m).expect("a hit in this block");
            return ((base + i) as TokenId, m);
        }
        base += b.len();
    }
    unreachable!("m is an entry of the row")
}

/// The largest entry of `block` (NaN never is; `−∞` for an empty or all-NaN block),
/// lane-wise as [`argmax_max`]'s first pass: one `maxps` per `LANES` entries.
pub(crate) fn block_max(block: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut blocks = block.chunks_exact(LANES);
    for b in &mut blocks {
        for i in 0..LANES {
            acc[i] = if b[i] > acc[i] { b[i] } else { acc[i] };
        }
    }
    let mut m = f32::NEG_INFINITY;
    for &x in acc.iter().chain(blocks.remainder()) {
        if x > m {
            m = x;
        }
    }
    m
}

/// The decode time of the loop's iterations, part by part, ns summed over
/// iterations. Each part is a span timed on its own, with the engines synchronised
/// at its edges ([`Engine::synchronize`](crate::measure::engine::Engine::synchronize) after every forward pass: the logit fetch
/// and the host work that follow start on a finished pass). A span's own
/// bookkeeping is its length less the parts inside it (`draft_other_ns`,
/// `verify_other_ns`). The spans follow one another with only clock reads between
/// them, so [`IterBreakdown::sum_ns`] can be checked against
/// [`SpecStats::decode_ns`](super::run::SpecStats::decode_ns), measured by its own clock around the whole loop
/// ([`IterBreakdown::coverage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IterBreakdown {
    /// Draft-model forward passes: the catch-up pass over the tokens committed since
    /// the last proposal, then one pass per further drafted token.
    #[serde(default)]
    pub draft_forward_ns: u64,
    /// Reading the draft's logit rows ([`Engine::logits`](crate::measure::engine::Engine::logits)).
    #[serde(default)]
    pub draft_fetch_ns: u64,
    /// Host work on each draft row: argmax or sampling, the set-acceptance draw,
    /// the discarded mass.
    #[serde(default)]
    pub draft_pick_ns: u64,
    /// Rolling the draft's KV cache back to the committed history
    /// ([`Engine::kv_truncate`](crate::measure::engine::Engine::kv_truncate)).
    #[serde(default)]
    pub draft_rollback_ns: u64,
    /// The rest of the drafter's time (its bookkeeping; the n-gram lookup).
    #[serde(default)]
    pub draft_other_ns: u64,
    /// The target's verify passes (`k' + 1` rows, or chunks of
    /// [`SpecSession::max_rows_per_pass`](super::run::SpecSession::max_rows_per_pass)).
    #[serde(default)]
    pub verify_forward_ns: u64,
    /// Reading the verify pass's logit rows.
    #[serde(default)]
    pub verify_fetch_ns: u64,
    /// Host work on each verified row: argmax (and near-tie check) or the target's
    /// distribution.
    #[serde(default)]
    pub verify_pick_ns: u64,
    /// The discarded mass of each verified row ([`discarded_mass`]).
    #[serde(default)]
    pub verify_mass_ns: u64,
    /// Rolling the target's KV cache back (the rejected rows of the last pass).
    #[serde(default)]
    pub target_rollback_ns: u64,
    /// The rest of the verify feed (building the batch).
    #[serde(default)]
    pub verify_other_ns: u64,
    /// Accept/reject of the drafted tokens, with the residual or bonus draw.
    #[serde(default)]
    pub accept_ns: u64,
    /// The loop's own bookkeeping between those spans: draft length, end-of-text
    /// cut, counters, committing tokens.
    #[serde(default)]
    pub other_ns: u64,
}

impl IterBreakdown {
    /// The parts with their names, in loop order.
    pub fn parts(&self) -> [(&'static str, u64); 13] {
        [
            ("draft forward", self.draft_forward_ns),
            ("draft logits fetch", self.draft_fetch_ns),
            ("draft pick (argmax / sampling)", self.draft_pick_ns),
            ("draft KV rollback", self.draft_rollback_ns),
            ("draft other", self.draft_other_ns),
            ("verify forward", self.verify_forward_ns),
            ("verify logits fetch", self.verify_fetch_ns),
            ("verify pick (argmax / distribution)", self.verify_pick_ns),
            ("verify discarded mass", self.verify_mass_ns),
            ("target KV rollback", self.target_rollback_ns),
            ("verify other", self.verify_other_ns),
            ("accept / reject", self.accept_ns),
            ("loop other", self.other_ns),
        ]
    }
    /// Sum of the parts, ns.
    pub fn sum_ns(&self) -> u64 {
        self.parts().iter().map(|(_, v)| v).sum()
    }
    /// The drafter's parts together, ns.
    pub fn draft_ns(&self) -> u64 {
        self.draft_forward_ns
            + self.draft_fetch_ns
            + self.draft_pick_ns
            + self.draft_rollback_ns
            + self.draft_other_ns
    }
    /// Sum of the parts ÷ the decode clock (`None` without decode time or parts):
    /// 1 when the parts account for every nanosecond of the loop.
    pub fn coverage(&self, decode_ns: u64) -> Option<f64> {
        (decode_ns > 0 && self.sum_ns() > 0).then(|| self.sum_ns() as f64 / decode_ns as f64)
    }
    /// Adds a drafter's parts (`dt`'s draft fields) from a proposal that took
    /// `span_ns` in all; the rest of the span is the drafter's own bookkeeping
    /// (`draft_other_ns`).
    pub fn add_draft(&mut self, dt: &IterBreakdown, span_ns: u64) {
        self.draft_forward_ns += dt.draft_forward_ns;
        self.draft_fetch_ns += dt.draft_fetch_ns;
        self.draft_pick_ns += dt.draft_pick_ns;
        self.draft_rollback_ns += dt.draft_rollback_ns;
        self.draft_other_ns += span_ns.saturating_sub(dt.draft_ns());
    }
    /// Adds another breakdown part by part.
    pub fn add(&mut self, o: &IterBreakdown) {
        self.draft_forward_ns += o.draft_forward_ns;
        self.draft_fetch_ns += o.draft_fetch_ns;
        self.draft_pick_ns += o.draft_pick_ns;
        self.draft_rollback_ns += o.draft_rollback_ns;
        self.draft_other_ns += o.draft_other_ns;
        self.verify_forward_ns += o.verify_forward_ns;
        self.verify_fetch_ns += o.verify_fetch_ns;
        self.verify_pick_ns += o.verify_pick_ns;
        self.verify_mass_ns += o.verify_mass_ns;
        self.target_rollback_ns += o.target_rollback_ns;
        self.verify_other_ns += o.verify_other_ns;
        self.accept_ns += o.accept_ns;
        self.other_ns += o.other_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::engine::argmax;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn same_index_as_the_scalar_argmax_on_hand_rows() {
        let rows: Vec<Vec<f32>> = vec![
            vec![],
            vec![1.0],
            vec![0.0, 3.0, 1.0, 3.0],
            vec![f32::NAN, 5.0, 7.0],
            vec![1.0, f32::NAN, 7.0, f32::NAN],
            vec![f32::NEG_INFINITY; 40],
            vec![-0.0, 0.0, -0.0],
            vec![0.0, -0.0, 0.0],
            (0..37).map(|i| (i % 5) as f32).collect(),
            (0..64).map(|i| if i == 63 { 9.0 } else { 1.0 }).collect(),
            (0..64)
                .map(|i| if i == 16 || i == 48 { 9.0 } else { 1.0 })
                .collect(),
            vec![f32::INFINITY, f32::INFINITY],
        ];
        for r in &rows {
            let (i, m) = argmax_max(r);
            assert_eq!(i, argmax(r), "{r:?}");
            if let Some(&v) = r.get(i as usize)
                && !v.is_nan()
            {
                assert_eq!(m, v, "{r:?}");
            }
        }
        assert_eq!(argmax_max(&[]), (0, f32::NEG_INFINITY));
        assert_eq!(argmax_max(&[0.0, 3.0, 1.0, 3.0]), (1, 3.0));
    }

    #[test]
    fn same_index_as_the_scalar_argmax_on_random_rows_with_ties_and_nan() {
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        for case in 0..2000 {
            let n = rng.random_range(1..300usize);
            // Few distinct values: ties everywhere; some rows with NaN / ±∞.
            let levels = rng.random_range(1..6u32);
            let mut r: Vec<f32> = (0..n)
                .map(|_| rng.random_range(0..levels) as f32 - 2.0)
                .collect();
            if case % 3 == 0 {
                let j = rng.random_range(0..n);
                r[j] = f32::NAN;
            }
            if case % 7 == 0 {
                let j = rng.random_range(0..n);
                r[j] = f32::NEG_INFINITY;
            }
            if case % 11 == 0 {
                let j = rng.random_range(0..n);
                r[j] = f32::INFINITY;
            }
            assert_eq!(argmax_max(&r).0, argmax(&r), "case {case}: {r:?}");
        }
        // A full-width row of random logits.
        let r: Vec<f32> = (0..152_064)
            .map(|_| rng.random_range(-20.0..20.0f32))
            .collect();
        let (i, m) = argmax_max(&r);
        assert_eq!(i, argmax(&r));
        assert_eq!(m, r.iter().copied().fold(f32::NEG_INFINITY, f32::max));
    }

    #[test]
    fn discarded_mass_from_the_picks_maximum_is_bit_identical() {
        use crate::experiments::speculative::vocab::{discarded_mass, discarded_mass_with_max};
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for case in 0..50 {
            let n = rng.random_range(2..3000usize);
            let shared = rng.random_range(1..n);
            let mut r: Vec<f32> = (0..n).map(|_| rng.random_range(-12.0..12.0f32)).collect();
            if case % 5 == 0 {
                r[0] = f32::NAN;
            }
            if case % 4 == 0 {
                // The largest logit in the cut part.
                r[n - 1] = 30.0;
            }
            for t in [0.0f32, 0.7, 1.0] {
                let m = argmax_max(&r[..shared]).1;
                let a = discarded_mass_with_max(&r, shared, t, m);
                let b = discarded_mass(&r, shared, t);
                assert_eq!(a.to_bits(), b.to_bits(), "case {case} t {t}: {a} vs {b}");
            }
        }
    }
}
