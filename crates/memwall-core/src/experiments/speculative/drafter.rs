//! Drafters: who proposes the `k` tokens the target verifies.
//!
//! - [`DraftModel`]: a smaller model with the target's tokenizer, run on its own
//!   [`Engine`]. It proposes autoregressively and keeps its distributions `q`.
//!   Its KV cache is kept equal to a *mirror* token list ([`KvSeq`]); before each
//!   proposal the mirror is compared with the committed history and the cache is
//!   truncated at the first difference. That one rule covers both rollback edges:
//!   after `n < k` accepted, the rejected proposals are dropped; after all `k`
//!   accepted, the draft never fed its own last proposal `x_k`, so `x_k` and the
//!   bonus token are replayed in one batch.
//! - [`Ngram`]: prompt lookup (no model): the longest suffix n-gram of the history
//!   (`max_n` down to `min_n` tokens) that occurred earlier proposes the tokens that
//!   followed its most recent earlier occurrence. Deterministic (`q = δ`).

use super::row::IterBreakdown;
use super::row::argmax_max;
use super::sampling::{SamplingParams, sample_with, uniform};
use super::verify::QDist;
use super::vocab::{MassStats, discarded_mass, discarded_mass_with_max};
use super::{K_MAX, SpecError};
use crate::measure::engine::{BatchItem, Engine, EngineError, TokenId, argmax};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

/// Time a [`KvSeq`] spent in its engine since [`KvSeq::take_times`] last read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KvTimes {
    /// Forward passes ([`KvSeq::feed`], [`KvSeq::feed_chunked`]), each followed by
    /// [`Engine::synchronize`], ns.
    pub forward_ns: u64,
    /// Cache rollback ([`Engine::kv_truncate`] of positions that disagree with the
    /// history) before a feed, ns.
    pub rollback_ns: u64,
}

/// Nanoseconds since `t`.
pub(crate) fn ns_since(t: Instant) -> u64 {
    t.elapsed().as_nanos() as u64
}

/// How a drafter catches up on the tokens committed since its last proposal before
/// it drafts: one token after a rejection, two (its own last proposal and the bonus
/// token) after a fully accepted draft.
///
/// llama.cpp with layers on a CUDA device re-captures its CUDA graph whenever a pass's
/// shape differs from the last one and runs the next passes without a graph, so a
/// two-row catch-up between one-row draft steps costs more than its own forward:
/// measured on an H100 (results/h100/spec-calls4-7.md, 14B F16 target, 0.5B
/// F16 draft), a draft pass took 1.56 to 1.75 ms with batched catch-up and 1.37 ms
/// with one-row passes, and the speedup at α = 0.9, k = 6 rose in
/// each of three same-call pairs (2.180–2.186 to 2.222–2.228). On the CPU a two-row pass costs about what a
/// one-row pass does, so one more pass after a full acceptance is the dearer choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CatchUp {
    /// The tokens in one pass.
    Batch,
    /// One pass per token, each keeping its row's logits as a draft step does.
    OneRow,
}

impl CatchUp {
    /// The choice for `engine`: `MEMWALL_SPEC_CATCHUP=one-row|batch` when set (an A/B
    /// switch: `scripts/gpu-bundle/run.sh`'s SPEC_AB_ENV), else one-row passes where
    /// the engine says a change of pass shape is costly
    /// ([`Engine::shape_change_is_costly`]), batched elsewhere.
    pub fn for_engine<E: Engine + ?Sized>(engine: &E) -> CatchUp {
        match std::env::var("MEMWALL_SPEC_CATCHUP").as_deref() {
            Ok("one-row") => CatchUp::OneRow,
            Ok("batch") => CatchUp::Batch,
            _ if engine.shape_change_is_costly() => CatchUp::OneRow,
            _ => CatchUp::Batch,
        }
    }
    /// The name rows and notes use: `batch`, `one-row`.
    pub fn name(self) -> &'static str {
        match self {
            CatchUp::Batch => "batch",
            CatchUp::OneRow => "one-row",
        }
    }
}

/// A KV-cache sequence (sequence 0) and the tokens it holds, position by position.
#[derive(Debug, Clone, Default)]
pub struct KvSeq {
    /// Token at each cached position `0..len`.
    pub cached: Vec<TokenId>,
    /// Whether `cached` is known to describe the engine's cache (false for a new
    /// mirror: the first sync empties the engine's cache).
    valid: bool,
    /// Time spent in the engine by feeds since the last [`KvSeq::take_times`].
    times: KvTimes,
}

impl KvSeq {
    /// Empties the engine's cache and the mirror.
    pub fn reset<E: Engine + ?Sized>(&mut self, e: &mut E) {
        e.kv_clear();
        self.cached.clear();
        self.valid = true;
    }

    /// The forward and rollback time of the feeds since the last call, and zeroes it.
    pub fn take_times(&mut self) -> KvTimes {
        std::mem::take(&mut self.times)
    }

    /// Makes the cache hold `hist ++ extra` and keeps the logits of the last
    /// `n_logits` fed items (readable as `e.logits(0..n_logits)`). Cached positions
    /// that agree with `hist` are kept (at least the last token of `hist` is always
    /// fed, so its logits exist); the first disagreeing position and everything
    /// after it are removed with [`Engine::kv_truncate`]. Returns the number of
    /// forward passes run.
    ///
    /// # Errors
    /// Engine errors; [`EngineError::Decode`] when `n_logits` is 0, exceeds the fed
    /// items or the engine's batch, or `hist` is empty.
    pub fn feed<E: Engine + ?Sized>(
        &mut self,
        e: &mut E,
        hist: &[TokenId],
        extra: &[TokenId],
        n_logits: usize,
    ) -> Result<u32, EngineError> {
        let keep = self.sync_for_feed(e, hist)?;
        let toks: Vec<TokenId> = hist[keep..].iter().chain(extra).copied().collect();
        let nb = e.n_batch().max(1) as usize;
        if n_logits == 0 || n_logits > toks.len() || n_logits > nb {
            return Err(EngineError::Decode(format!(
                "asked for {n_logits} logit rows from {} fed tokens (batch {nb})",
                toks.len()
            )));
        }
        let tail_len = toks.len().min(nb);
        let (head, tail) = toks.split_at(toks.len() - tail_len);
        let base = (keep + head.len()) as u32;
        let items: Vec<BatchItem> = tail
            .iter()
            .enumerate()
            .map(|(i, &t)| BatchItem {
                token: t,
                pos: base + i as u32,
                seq: 0,
                logits: i + n_logits >= tail.len(),
            })
            .collect();
        let mut passes = 0;
        let t0 = Instant::now();
        if !head.is_empty() {
            e.prefill(head, keep as u32, 0, false)?;
            passes += head.len().div_ceil(nb) as u32;
        }
        // Only the two-token catch-up after a fully accepted draft: a longer feed (a
        // prompt) is a prefill and goes in one pass whatever the engine.
        if n_logits == 1 && items.len() == 2 && CatchUp::for_engine(e) == CatchUp::OneRow {
            // Every pass keeps its row's logits, as a draft step does: the same shape.
            for it in &items {
                e.decode(&[BatchItem {
                    logits: true,
                    ..*it
                }])?;
                passes += 1;
            }
            passes -= 1;
        } else {
            e.decode(&items)?;
        }
        e.synchronize();
        self.times.forward_ns += ns_since(t0);
        passes += 1;
        self.cached.extend_from_slice(&toks);
        Ok(passes)
    }

    /// Truncates the cache at the first position that disagrees with `hist`
    /// (keeping at most `hist.len() − 1` positions); returns how many are kept.
    fn sync_for_feed<E: Engine + ?Sized>(
        &mut self,
        e: &mut E,
        hist: &[TokenId],
    ) -> Result<usize, EngineError> {
        if hist.is_empty() {
            return Err(EngineError::Decode(
                "nothing to feed (empty history)".into(),
            ));
        }
        if !self.valid {
            return Err(EngineError::Kv(
                "KV mirror not synced (call sync_prefix first)".into(),
            ));
        }
        let common = self
            .cached
            .iter()
            .zip(hist)
            .take_while(|(a, b)| a == b)
            .count();
        let keep = common.min(hist.len() - 1);
        if self.cached.len() > keep {
            let t0 = Instant::now();
            e.kv_truncate(0, keep as u32)?;
            self.times.rollback_ns += ns_since(t0);
            self.cached.truncate(keep);
        }
        Ok(keep)
    }

    /// As [`KvSeq::feed`], but the items that keep logits are fed in passes of at
    /// most `max_rows` rows, and `on_row(engine, j)` is called after each pass for
    /// each of its logit rows in order (`j` indexes [`Engine::logits`] of that pass).
    /// Everything before the logit items is prefilled first (in batches of
    /// [`Engine::n_batch`]). The last pass's logits stay readable afterwards.
    ///
    /// Why: llama.cpp's CPU kernels compute a row differently depending on how many
    /// rows share the pass (see [`super::run`]); bounding the verify pass keeps every
    /// verified row in the same kernel class as one-token decoding.
    ///
    /// # Errors
    /// As [`KvSeq::feed`]; errors from `on_row`.
    pub fn feed_chunked<E: Engine + ?Sized>(
        &mut self,
        e: &mut E,
        hist: &[TokenId],
        extra: &[TokenId],
        n_logits: usize,
        max_rows: usize,
        on_row: &mut dyn FnMut(&E, usize) -> Result<(), EngineError>,
    ) -> Result<u32, EngineError> {
        let keep = self.sync_for_feed(e, hist)?;
        let toks: Vec<TokenId> = hist[keep..].iter().chain(extra).copied().collect();
        let nb = e.n_batch().max(1) as usize;
        let max_rows = max_rows.clamp(1, nb);
        if n_logits == 0 || n_logits > toks.len() {
            return Err(EngineError::Decode(format!(
                "asked for {n_logits} logit rows from {} fed tokens",
                toks.len()
            )));
        }
        let (head, tail) = toks.split_at(toks.len() - n_logits);
        let mut passes = 0;
        if !head.is_empty() {
            let t0 = Instant::now();
            e.prefill(head, keep as u32, 0, false)?;
            e.synchronize();
            self.times.forward_ns += ns_since(t0);
            passes += head.len().div_ceil(nb) as u32;
        }
        let mut base = (keep + head.len()) as u32;
        let mut items: Vec<BatchItem> = Vec::with_capacity(max_rows.min(tail.len()));
        for chunk in tail.chunks(max_rows) {
            items.clear();
            items.extend(chunk.iter().enumerate().map(|(i, &t)| BatchItem {
                token: t,
                pos: base + i as u32,
                seq: 0,
                logits: true,
            }));
            let t0 = Instant::now();
            e.decode(&items)?;
            e.synchronize();
            self.times.forward_ns += ns_since(t0);
            passes += 1;
            for j in 0..chunk.len() {
                on_row(e, j)?;
            }
            base += chunk.len() as u32;
        }
        self.cached.extend_from_slice(&toks);
        Ok(passes)
    }

    /// Makes the cache hold exactly `tokens` (no logits kept): keeps the longest
    /// cached prefix that agrees, truncates the rest, prefills the remainder (a
    /// prefix cache: a repeated prompt costs no prefill).
    ///
    /// # Errors
    /// Engine errors.
    pub fn sync_prefix<E: Engine + ?Sized>(
        &mut self,
        e: &mut E,
        tokens: &[TokenId],
    ) -> Result<(), EngineError> {
        if !self.valid {
            self.reset(e);
        }
        let common = self
            .cached
            .iter()
            .zip(tokens)
            .take_while(|(a, b)| a == b)
            .count();
        if self.cached.len() > common {
            e.kv_truncate(0, common as u32)?;
            self.cached.truncate(common);
        }
        if tokens.len() > common {
            e.prefill(&tokens[common..], common as u32, 0, false)?;
            self.cached.extend_from_slice(&tokens[common..]);
        }
        Ok(())
    }

    /// Cuts the cache back to its longest prefix that agrees with `tokens` (no
    /// prefill): what is left is committed history only. Nothing to do on a
    /// mirror that is not synced.
    ///
    /// # Errors
    /// [`Engine::kv_truncate`]'s.
    pub fn trim<E: Engine + ?Sized>(
        &mut self,
        e: &mut E,
        tokens: &[TokenId],
    ) -> Result<(), EngineError> {
        if !self.valid {
            return Ok(());
        }
        let common = self
            .cached
            .iter()
            .zip(tokens)
            .take_while(|(a, b)| a == b)
            .count();
        if self.cached.len() > common {
            e.kv_truncate(0, common as u32)?;
            self.cached.truncate(common);
        }
        Ok(())
    }

    /// Marks the mirror unknown: the next [`KvSeq::sync_prefix`] empties the
    /// engine's cache and prefills from position 0. Needed when something else used
    /// the engine meanwhile.
    pub fn invalidate(&mut self) {
        self.valid = false;
        self.cached.clear();
    }
}

/// One proposal.
#[derive(Debug, Clone, Default)]
pub struct Draft {
    /// Drafted tokens (at most `k`; may be fewer or none).
    pub tokens: Vec<TokenId>,
    /// The drafter's distribution at each drafted position.
    pub q: Vec<QDist>,
    /// Forward passes of the draft model this proposal took.
    pub passes: u32,
    /// Discarded mass of the draft's rows (vocabulary mismatch).
    pub q_mass: MassStats,
    /// Where the proposal's time went: the `draft_*` parts of an
    /// [`IterBreakdown`] (forward passes, logit fetch, host pick, rollback; zero for
    /// a drafter without a model). The loop adds the proposal's remaining time to
    /// `draft_other_ns`.
    pub times: IterBreakdown,
}

/// Settings a drafter needs for one proposal.
#[derive(Debug, Clone, Copy)]
pub struct DraftCtx {
    /// Shared sampling filters.
    pub sampling: SamplingParams,
    /// Width of the shared logit support.
    pub n_shared: usize,
}

/// A source of proposals.
pub trait Drafter {
    /// Identity of the drafter for gates and records (`draft:<sha256 prefix>`,
    /// `ngram:1-3`).
    fn key(&self) -> String;
    /// Logit width of the drafter's model, `None` for model-free drafters.
    fn n_vocab(&self) -> Option<usize>;
    /// Prepares for a new prompt (prefill; untimed by the caller's decode clock).
    ///
    /// # Errors
    /// Engine errors.
    fn begin(&mut self, prompt: &[TokenId]) -> Result<(), SpecError>;
    /// Proposes up to `k` tokens continuing `hist` (the committed tokens). The loop
    /// cuts a proposal after its first end-of-generation token: what follows it is
    /// never verified or counted.
    ///
    /// # Errors
    /// Engine errors.
    fn propose(
        &mut self,
        hist: &[TokenId],
        k: usize,
        cx: &DraftCtx,
        rng: &mut ChaCha8Rng,
    ) -> Result<Draft, SpecError>;
    /// The generation ended with `hist` committed (prompt + output, an end token
    /// last when one came): a drafter with a cache cuts it back to committed
    /// tokens, never keeping the end token or a proposal after it.
    ///
    /// # Errors
    /// Engine errors.
    fn end(&mut self, _hist: &[TokenId]) -> Result<(), SpecError> {
        Ok(())
    }
}

/// No drafter: every iteration is one plain target decode (the target-only baseline
/// run through the same loop).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDraft;

impl Drafter for NoDraft {
    fn key(&self) -> String {
        "none".into()
    }
    fn n_vocab(&self) -> Option<usize> {
        None
    }
    fn begin(&mut self, _: &[TokenId]) -> Result<(), SpecError> {
        Ok(())
    }
    fn propose(
        &mut self,
        _: &[TokenId],
        _: usize,
        _: &DraftCtx,
        _: &mut ChaCha8Rng,
    ) -> Result<Draft, SpecError> {
        Ok(Draft::default())
    }
}

/// How the draft model picks its proposals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// Argmax when greedy, else a draw from `q` (the algorithm).
    Model,
    /// The *least* likely token (argmin): a drafter that is always rejected, to test
    /// the 0-accepted rollback edge on real models. Not for measurement.
    Worst,
}

/// The draft-model drafter.
pub struct DraftModel<E: Engine> {
    engine: E,
    kv: KvSeq,
    key: String,
    pick: Pick,
}

impl<E: Engine> DraftModel<E> {
    /// Wraps a draft engine; `key` identifies the draft model (use
    /// [`DraftModel::key_for`] with its sha256).
    pub fn new(engine: E, key: String) -> DraftModel<E> {
        DraftModel {
            engine,
            kv: KvSeq::default(),
            key,
            pick: Pick::Model,
        }
    }
    /// The drafter key of a draft model file with this sha256.
    pub fn key_for(sha256: &str) -> String {
        format!("draft:{}", &sha256[..sha256.len().min(16)])
    }
    /// Changes the pick rule (tests).
    pub fn with_pick(mut self, pick: Pick) -> DraftModel<E> {
        self.pick = pick;
        self
    }
    /// The draft engine (call [`DraftModel::invalidate`] after using it directly).
    pub fn engine(&mut self) -> &mut E {
        &mut self.engine
    }
    /// How this drafter catches up ([`CatchUp::for_engine`] of its engine).
    pub fn catch_up(&self) -> CatchUp {
        CatchUp::for_engine(&self.engine)
    }
    /// Marks the draft's KV mirror unknown (the engine was used outside the drafter).
    pub fn invalidate(&mut self) {
        self.kv.invalidate();
    }
    /// The draft engine, the drafter dropped (another drafter takes it over).
    pub fn into_engine(self) -> E {
        self.engine
    }
}

fn argmin(row: &[f32]) -> TokenId {
    let mut best = 0usize;
    for (i, &v) in row.iter().enumerate() {
        if v < row[best] {
            best = i;
        }
    }
    best as TokenId
}

impl<E: Engine> Drafter for DraftModel<E> {
    fn key(&self) -> String {
        self.key.clone()
    }
    fn end(&mut self, hist: &[TokenId]) -> Result<(), SpecError> {
        let n = hist.len().saturating_sub(1);
        self.kv.trim(&mut self.engine, &hist[..n])?;
        Ok(())
    }
    fn n_vocab(&self) -> Option<usize> {
        Some(self.engine.n_vocab())
    }
    fn begin(&mut self, prompt: &[TokenId]) -> Result<(), SpecError> {
        let n = prompt.len().saturating_sub(1);
        self.kv.sync_prefix(&mut self.engine, &prompt[..n])?;
        Ok(())
    }
    fn propose(
        &mut self,
        hist: &[TokenId],
        k: usize,
        cx: &DraftCtx,
        rng: &mut ChaCha8Rng,
    ) -> Result<Draft, SpecError> {
        let mut d = Draft::default();
        if k == 0 {
            return Ok(d);
        }
        if k > K_MAX {
            return Err(SpecError::Config(format!("k = {k} exceeds {K_MAX}")));
        }
        d.passes += self.kv.feed(&mut self.engine, hist, &[], 1)?;
        let (mut fetch, mut pick, mut forward) = (0u64, 0u64, 0u64);
        for i in 0..k {
            let t0 = Instant::now();
            let logits = self.engine.logits(0)?;
            let t1 = Instant::now();
            let shared = cx.n_shared.min(logits.len());
            let row = &logits[..shared];
            let temp = cx.sampling.temperature;
            let (tok, q, mass) = match self.pick {
                Pick::Worst => (
                    argmin(row),
                    QDist::Delta,
                    discarded_mass(logits, shared, temp),
                ),
                Pick::Model if cx.sampling.is_greedy() => {
                    let (t, m) = argmax_max(row);
                    (
                        t,
                        QDist::Delta,
                        discarded_mass_with_max(logits, shared, temp, m),
                    )
                }
                Pick::Model => {
                    let dist = cx.sampling.distribution(row);
                    let t = sample_with(&dist, uniform(rng)).unwrap_or_else(|| argmax(row));
                    (t, QDist::Dist(dist), discarded_mass(logits, shared, temp))
                }
            };
            d.q_mass.add(mass);
            fetch += (t1 - t0).as_nanos() as u64;
            pick += ns_since(t1);
            d.tokens.push(tok);
            d.q.push(q);
            if i + 1 == k || self.engine.is_eog(tok) {
                break;
            }
            let pos = self.kv.cached.len() as u32;
            let t2 = Instant::now();
            self.engine.decode_one(tok, pos, 0)?;
            self.engine.synchronize();
            forward += ns_since(t2);
            self.kv.cached.push(tok);
            d.passes += 1;
        }
        let kt = self.kv.take_times();
        d.times = IterBreakdown {
            draft_forward_ns: forward + kt.forward_ns,
            draft_fetch_ns: fetch,
            draft_pick_ns: pick,
            draft_rollback_ns: kt.rollback_ns,
            ..Default::default()
        };
        Ok(d)
    }
}

/// Prompt-lookup (n-gram) drafting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ngram {
    /// Longest n-gram tried first.
    pub max_n: usize,
    /// Shortest n-gram tried.
    pub min_n: usize,
}

impl Default for Ngram {
    /// `max_n = 3, min_n = 1` (Hugging Face's `prompt_lookup` default n-gram size 3).
    fn default() -> Self {
        Ngram { max_n: 3, min_n: 1 }
    }
}

impl Ngram {
    /// The proposal for `hist`: up to `k` tokens following the most recent earlier
    /// occurrence of the longest matching suffix n-gram; empty when none matches.
    pub fn lookup(&self, hist: &[TokenId], k: usize) -> Vec<TokenId> {
        let len = hist.len();
        for n in (self.min_n.max(1)..=self.max_n).rev() {
            if len <= n {
                continue;
            }
            let suffix = &hist[len - n..];
            // Earlier occurrences start at j ≤ len − n − 1 (the suffix itself excluded).
            for j in (0..len - n).rev() {
                if &hist[j..j + n] == suffix {
                    let from = j + n;
                    let to = (from + k).min(len);
                    return hist[from..to].to_vec();
                }
            }
        }
        Vec::new()
    }
}

impl Drafter for Ngram {
    fn key(&self) -> String {
        format!("ngram:{}-{}", self.min_n, self.max_n)
    }
    fn n_vocab(&self) -> Option<usize> {
        None
    }
    fn begin(&mut self, _: &[TokenId]) -> Result<(), SpecError> {
        Ok(())
    }
    fn propose(
        &mut self,
        hist: &[TokenId],
        k: usize,
        _: &DraftCtx,
        _: &mut ChaCha8Rng,
    ) -> Result<Draft, SpecError> {
        let tokens = self.lookup(hist, k);
        Ok(Draft {
            q: vec![QDist::Delta; tokens.len()],
            tokens,
            passes: 0,
            q_mass: MassStats::default(),
            times: IterBreakdown::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_two_token_catch_up_runs_one_row_passes_only_where_a_shape_change_is_costly() {
        use super::super::mock::Mock;
        // As after a fully accepted draft: 8 tokens cached, then the draft's own last
        // proposal and the bonus token come in, one logit row wanted. (The first token
        // goes in through `sync_prefix`, as a drafter's `begin` does.)
        let hist: Vec<TokenId> = (1..=8).collect();
        let more: Vec<TokenId> = (1..=10).collect();
        let mut rows = Vec::new();
        for costly in [false, true] {
            let mut m = Mock::new(40, 3.0);
            m.costly_shape_change = costly;
            let expect = if costly {
                CatchUp::OneRow
            } else {
                CatchUp::Batch
            };
            assert_eq!(CatchUp::for_engine(&m), expect);
            let mut kv = KvSeq::default();
            kv.sync_prefix(&mut m, &[1]).unwrap();
            // Seven tokens at once are a prefill: one pass either way.
            let before = m.passes;
            assert_eq!(kv.feed(&mut m, &hist, &[], 1).unwrap(), 1);
            assert_eq!(m.passes - before, 1);
            let before = m.passes;
            let counted = kv.feed(&mut m, &more, &[], 1).unwrap();
            let ran = m.passes - before;
            // One pass of two rows, or two passes of one row; the count the drafter
            // reports is the engine's own.
            assert_eq!(ran, if costly { 2 } else { 1 });
            assert_eq!(counted as u64, ran);
            assert_eq!(kv.cached, more);
            rows.push(m.logits(0).unwrap().to_vec());
        }
        // The row the next draft step starts from is the same either way, and it is the
        // row after all ten tokens.
        assert_eq!(rows[0], rows[1]);
        assert_eq!(rows[0], Mock::new(40, 3.0).logits_after(&more));
    }

    #[test]
    fn ngram_takes_the_longest_most_recent_match() {
        let g = Ngram::default();
        // suffix [1,2,3] occurs at 0 → proposes what followed: 9, 8.
        assert_eq!(g.lookup(&[1, 2, 3, 9, 8, 5, 1, 2, 3], 2), vec![9, 8]);
        // most recent of two occurrences wins.
        assert_eq!(g.lookup(&[7, 1, 7, 2, 7], 3), vec![2, 7]);
        // the continuation stops at the end of the history.
        assert_eq!(g.lookup(&[4, 5, 4], 8), vec![5, 4]);
        // no match at any n.
        assert!(g.lookup(&[1, 2, 3], 4).is_empty());
        assert!(g.lookup(&[], 4).is_empty());
        // 3-gram preferred over a more recent 1-gram match.
        assert_eq!(g.lookup(&[1, 2, 3, 4, 0, 3, 6, 1, 2, 3], 1), vec![4]);
    }
}
