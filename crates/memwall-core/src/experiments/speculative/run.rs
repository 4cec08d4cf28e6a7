//! The speculative loop and the target-only greedy reference.
//!
//! State between iterations: the committed history `hist` (prompt + emitted
//! tokens). The target's cache holds `hist[..n−1]`; each iteration feeds the last
//! committed token and the `k'` drafted tokens in **one** forward pass with logits
//! at all `k' + 1` positions, verifies, and commits `accepted + 1` tokens. The
//! target's cache then holds `k'+1` new positions of which only `accepted + 1`
//! stay valid; [`KvSeq::feed`] truncates the rest at the next iteration (the same
//! prefix rule as the draft model's, see [`super::drafter`]).
//!
//! `k' = min(k, remaining − 1)` so that no iteration drafts past `max_new`.
//! Generation stops after `max_new` tokens or at the first end-of-generation token
//! (which is emitted).
//!
//! **End of generation.** Nothing after the end is counted, fed or kept, whatever
//! the drafter: a draft is cut after its first end-of-generation token (the
//! target's [`Engine::is_eog`]), so drafted tokens past it are neither verified nor
//! counted; a draft that ends at that token is verified without a bonus row (the
//! end token is checked by the row before it and never fed to the target,
//! [`verify_greedy_final`], [`verify_sampled_final`]); and once the generation
//! ends, the target's cache and the drafter's ([`Drafter::end`]) are cut back to
//! committed tokens, the end token excluded. So `n_accepted ≤ n_emitted` always,
//! and `n_emitted = n_accepted + n_iterations`, less one when the generation ended
//! on an accepted drafted end token (that iteration had no bonus token).

use super::drafter::{DraftCtx, Drafter, KvSeq, ns_since};
use super::row::argmax_max;
use super::sampling::{SamplingParams, uniform};
use super::verify::{verify_greedy, verify_greedy_final, verify_sampled, verify_sampled_final};
use super::vocab::{MassStats, discarded_mass, discarded_mass_with_max};
use super::{K_MAX, SpecError};
use crate::measure::engine::{Engine, TokenId, argmax};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Settings of one speculative generation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpecConfig {
    /// Draft length per iteration (0 = target-only decoding through the same loop).
    pub k: usize,
    /// Tokens to generate at most.
    pub max_new: usize,
    /// Sampling filters (shared by target and draft).
    pub sampling: SamplingParams,
    /// Seed of the ChaCha8 generator (draft sampling and verification draws).
    pub seed: u64,
    /// Stop after this many iterations (0 = no limit; the sampling check uses 1).
    #[serde(default)]
    pub max_iterations: usize,
}

impl SpecConfig {
    /// Greedy decoding with draft length `k`.
    pub fn greedy(k: usize, max_new: usize) -> SpecConfig {
        SpecConfig {
            k,
            max_new,
            sampling: SamplingParams::greedy(),
            seed: 0,
            max_iterations: 0,
        }
    }
}

/// Counters and timings of speculative runs (summable over prompts with
/// [`SpecStats::merge`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpecStats {
    /// Verify iterations (= target forward passes during decode).
    pub n_iterations: u64,
    /// Iterations that had at least one drafted token.
    #[serde(default)]
    pub n_draft_iterations: u64,
    /// Tokens drafted.
    pub n_drafted: u64,
    /// Drafted tokens accepted.
    pub n_accepted: u64,
    /// Iterations that ended in a rejection (each tested one more position than it
    /// accepted).
    pub n_rejections: u64,
    /// Tokens emitted (committed), the end-of-generation token included; never
    /// fewer than `n_accepted` (nothing after the end is counted).
    pub n_emitted: u64,
    /// Target forward passes during decode.
    pub n_target_passes: u64,
    /// Draft-model forward passes during decode.
    pub n_draft_passes: u64,
    /// Iterations by accepted length: `accept_hist[a]` = iterations that accepted `a`.
    pub accept_hist: Vec<u64>,
    /// Iterations by draft length: `draft_len_hist[m]` = iterations whose drafter
    /// proposed `m` tokens (`m < k` when an n-gram match runs out of history or the
    /// generation is within `k` tokens of its end; `m = 0` when nothing matched).
    /// Feeds [`cost::predicted_speedup_hist`](super::cost::predicted_speedup_hist).
    #[serde(default)]
    pub draft_len_hist: Vec<u64>,
    /// Discarded mass of target rows (vocabulary mismatch).
    pub p_mass: MassStats,
    /// Discarded mass of draft rows.
    pub q_mass: MassStats,
    /// Prefill of prompt into target and draft, ns (not in `decode_ns`).
    pub prefill_ns: u64,
    /// Decode phase wall time, ns (drafting + verifying + bookkeeping).
    pub decode_ns: u64,
    /// Of which in the drafter, ns.
    pub draft_ns: u64,
    /// Of which in the target pass and verification, ns.
    pub verify_ns: u64,
    /// Verified positions whose argmax led the reference's token by at most the
    /// near-tie tolerance, where the reference's token was taken
    /// ([`SpecSession::set_tie_break`]; 0 without one).
    #[serde(default)]
    pub n_tie_breaks: u64,
    /// The largest such lead, in logits (0 without a tie break).
    #[serde(default)]
    pub tie_gap_max: f64,
    /// Where the decode time went, part by part ([`IterBreakdown`]; all zero in
    /// rows stored before it was kept).
    #[serde(default)]
    pub breakdown: IterBreakdown,
    /// Tree drafts: times the target's cache was cleared and the history prefilled
    /// again because parked cells filled the context (inside `decode_ns`; 0 for
    /// chains).
    #[serde(default)]
    pub n_kv_compactions: u64,
}

pub use super::row::IterBreakdown;

impl SpecStats {
    /// Acceptance rate: accepted ÷ drafted (`None` when nothing was drafted).
    pub fn acceptance_rate(&self) -> Option<f64> {
        (self.n_drafted > 0).then(|| self.n_accepted as f64 / self.n_drafted as f64)
    }
    /// Per-position acceptance probability α̂ = accepted ÷ (accepted + rejections):
    /// the maximum-likelihood α of the i.i.d. model behind the cost model, from the
    /// positions that were actually tested (drafted tokens after a rejection never
    /// are). `None` when nothing was tested.
    pub fn alpha_hat(&self) -> Option<f64> {
        let tested = self.n_tested();
        (tested > 0).then(|| self.n_accepted as f64 / tested as f64)
    }
    /// Drafted positions that were tested against the target: accepted + rejections
    /// (the `n` behind [`alpha_hat`](Self::alpha_hat) and its confidence bound).
    pub fn n_tested(&self) -> u64 {
        self.n_accepted + self.n_rejections
    }
    /// Mean accepted drafted tokens per iteration.
    pub fn mean_accepted_per_iteration(&self) -> Option<f64> {
        (self.n_iterations > 0).then(|| self.n_accepted as f64 / self.n_iterations as f64)
    }
    /// Tokens emitted per target forward pass during decode.
    pub fn tokens_per_target_pass(&self) -> Option<f64> {
        (self.n_target_passes > 0).then(|| self.n_emitted as f64 / self.n_target_passes as f64)
    }
    /// Fraction of iterations that had a draft (1 for a draft model; less for the
    /// n-gram drafter when no n-gram matched).
    pub fn draft_fraction(&self) -> Option<f64> {
        (self.n_iterations > 0).then(|| self.n_draft_iterations as f64 / self.n_iterations as f64)
    }
    /// Decode tokens per second.
    pub fn decode_tps(&self) -> Option<f64> {
        (self.decode_ns > 0).then(|| self.n_emitted as f64 / (self.decode_ns as f64 * 1e-9))
    }
    /// Adds another run's counters.
    pub fn merge(&mut self, o: &SpecStats) {
        self.n_iterations += o.n_iterations;
        self.n_draft_iterations += o.n_draft_iterations;
        self.n_drafted += o.n_drafted;
        self.n_accepted += o.n_accepted;
        self.n_rejections += o.n_rejections;
        self.n_emitted += o.n_emitted;
        self.n_target_passes += o.n_target_passes;
        self.n_draft_passes += o.n_draft_passes;
        add_hist(&mut self.accept_hist, &o.accept_hist);
        add_hist(&mut self.draft_len_hist, &o.draft_len_hist);
        self.p_mass.merge(&o.p_mass);
        self.q_mass.merge(&o.q_mass);
        self.prefill_ns += o.prefill_ns;
        self.decode_ns += o.decode_ns;
        self.draft_ns += o.draft_ns;
        self.verify_ns += o.verify_ns;
        self.n_tie_breaks += o.n_tie_breaks;
        self.tie_gap_max = self.tie_gap_max.max(o.tie_gap_max);
        self.breakdown.add(&o.breakdown);
    }
}

/// Adds histogram `b` into `a` bin by bin, growing `a` to `b`'s length.
fn add_hist(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// Tokens and statistics of one generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecOutput {
    /// Emitted tokens (prompt excluded).
    pub tokens: Vec<TokenId>,
    /// Counters and timings.
    pub stats: SpecStats,
    /// The decode's timed span (`stats.decode_ns` is its length): the live sampler
    /// integrates energy over it.
    #[serde(default)]
    pub decode_span: Option<crate::measure::sampler::session::TimedSpan>,
}

/// Most rows per target pass by default: llama.cpp's CPU back end computes a row
/// with different kernels once a pass holds 8 or more rows (measured with
/// `examples/spec_probe.rs`: on Qwen2.5-Coder-1.5B Q4_K_M without weight repacking,
/// the logits of one position are bit-identical for passes of 1…7 rows and differ
/// by up to ≈ 0.5 from passes of ≥ 8 rows). One-token decoding is a 1-row pass, so
/// verify passes are kept at ≤ 7 rows; `k = 7, 8` then take two passes.
pub const DEFAULT_MAX_ROWS_PER_PASS: usize = 7;

/// Reusable target-side state of the loop (the target's KV mirror).
#[derive(Debug)]
pub struct SpecSession {
    pub(super) kv: KvSeq,
    /// Most rows per target verify pass ([`DEFAULT_MAX_ROWS_PER_PASS`]).
    pub max_rows_per_pass: usize,
    pub(super) tie: Option<TieBreak>,
}

/// Greedy verification that tolerates near-ties against a known output: where the
/// history follows `reference` and the reference's next token trails the row's
/// argmax by at most `tolerance` logits, the reference's token is the target's
/// choice. For targets whose top logits are near-ties (random-weight synthetic
/// models), where a kernel that sums in another order for a k + 1-row pass than for
/// a 1-row one flips the argmax: the run then stays on the reference, and each such
/// position is counted ([`SpecStats::n_tie_breaks`], [`SpecStats::tie_gap_max`]). A
/// wrong KV cache or kernel moves logits by far more than a tolerance of
/// rounding size and still changes the output.
#[derive(Debug, Clone, PartialEq)]
pub struct TieBreak {
    /// The prompt followed by the target-only output.
    pub reference: Vec<TokenId>,
    /// Largest lead of the argmax over the reference's token that counts as a tie,
    /// in logits (≥ 0).
    pub tolerance: f32,
}

impl Default for SpecSession {
    fn default() -> Self {
        SpecSession {
            kv: KvSeq::default(),
            max_rows_per_pass: DEFAULT_MAX_ROWS_PER_PASS,
            tie: None,
        }
    }
}

/// Most rows per target verify pass on `target`: [`DEFAULT_MAX_ROWS_PER_PASS`] where
/// a change of pass shape is cheap (llama.cpp's CPU back end, whose ≥ 8-row passes
/// compute other logits than a 1-row pass), the target's batch where it is costly
/// (llama.cpp with layers on CUDA, [`Engine::shape_change_is_costly`]): there every
/// verify shape's logits are measured against 1-row passes by the gate (its
/// batch-shape gap, stored with it, bounds any tolerance), and a second pass would
/// cost a whole weight read. `MEMWALL_SPEC_MAX_ROWS=N` overrides it (an A/B switch).
pub fn max_rows_for<E: Engine + ?Sized>(target: &E) -> usize {
    if let Some(n) = std::env::var("MEMWALL_SPEC_MAX_ROWS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n >= 1)
    {
        return n;
    }
    if target.shape_change_is_costly() {
        (target.n_batch() as usize).max(DEFAULT_MAX_ROWS_PER_PASS)
    } else {
        DEFAULT_MAX_ROWS_PER_PASS
    }
}

impl SpecSession {
    /// A fresh session.
    pub fn new() -> SpecSession {
        SpecSession::default()
    }

    /// A fresh session whose verify passes hold at most [`max_rows_for`] `target`
    /// rows.
    pub fn for_target<E: Engine + ?Sized>(target: &E) -> SpecSession {
        SpecSession {
            max_rows_per_pass: max_rows_for(target),
            ..SpecSession::default()
        }
    }

    /// Empties the target's cache and the mirror: call after the target engine was
    /// used outside this session (e.g. by [`target_greedy`]).
    pub fn invalidate(&mut self) {
        self.kv.invalidate();
    }

    /// Sets (or clears) the near-tie tolerance of greedy verification for the
    /// following generations ([`TieBreak`]).
    pub fn set_tie_break(&mut self, tie: Option<TieBreak>) {
        self.tie = tie;
    }

    /// Generates from `prompt` with `drafter` proposing and `target` verifying.
    ///
    /// # Errors
    /// [`SpecError::Config`] for an empty prompt, `k > K_MAX`, `k + 1` over the
    /// target's batch, or bad sampling settings; engine errors.
    pub fn generate<T: Engine + ?Sized>(
        &mut self,
        target: &mut T,
        drafter: &mut dyn Drafter,
        prompt: &[TokenId],
        cfg: &SpecConfig,
    ) -> Result<SpecOutput, SpecError> {
        if prompt.is_empty() {
            return Err(SpecError::Config("empty prompt".into()));
        }
        if cfg.k > K_MAX {
            return Err(SpecError::Config(format!(
                "k = {} exceeds the maximum {K_MAX}",
                cfg.k
            )));
        }
        if cfg.k as u32 + 1 > target.n_batch() {
            return Err(SpecError::Config(format!(
                "k + 1 = {} exceeds the target's batch {}",
                cfg.k + 1,
                target.n_batch()
            )));
        }
        cfg.sampling.validate().map_err(SpecError::Config)?;
        let n_target = target.n_vocab();
        let n_shared = drafter.n_vocab().map_or(n_target, |d| d.min(n_target));
        let cx = DraftCtx {
            sampling: cfg.sampling,
            n_shared,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let mut st = SpecStats {
            accept_hist: vec![0; cfg.k + 1],
            draft_len_hist: vec![0; cfg.k + 1],
            ..Default::default()
        };

        let t0 = Instant::now();
        self.kv.sync_prefix(target, &prompt[..prompt.len() - 1])?;
        drafter.begin(prompt)?;
        target.synchronize();
        st.prefill_ns = t0.elapsed().as_nanos() as u64;

        let mut hist = prompt.to_vec();
        let mut out = Vec::with_capacity(cfg.max_new);
        crate::util::epoch();
        let t1 = Instant::now();
        let mut bd = IterBreakdown::default();
        self.kv.take_times();
        'outer: while out.len() < cfg.max_new {
            let ts = Instant::now();
            if cfg.max_iterations > 0 && st.n_iterations >= cfg.max_iterations as u64 {
                break;
            }
            let k = cfg.k.min(cfg.max_new - out.len() - 1);
            let td = Instant::now();
            bd.other_ns += (td - ts).as_nanos() as u64;
            let mut draft = if k > 0 {
                drafter.propose(&hist, k, &cx, &mut rng)?
            } else {
                Default::default()
            };
            let tv = Instant::now();
            let span = (tv - td).as_nanos() as u64;
            st.draft_ns += span;
            bd.add_draft(&std::mem::take(&mut draft.times), span);
            if draft.tokens.len() > k {
                return Err(SpecError::Config(format!(
                    "drafter {} proposed {} tokens when asked for at most {k}",
                    drafter.key(),
                    draft.tokens.len()
                )));
            }
            // Nothing after the end of generation is verified or counted.
            let ends = draft.tokens.iter().position(|&t| target.is_eog(t));
            if let Some(i) = ends {
                draft.tokens.truncate(i + 1);
                draft.q.truncate(i + 1);
            }
            let d = draft.tokens.len();
            // A draft ending at the end token needs no bonus row: rows 0..d verify
            // the d drafted tokens, and the end token itself is not fed.
            let n_rows = if ends.is_some() { d } else { d + 1 };
            let greedy = cfg.sampling.is_greedy();
            let temp = cfg.sampling.temperature;
            let (mut am, mut p) = (Vec::with_capacity(d + 1), Vec::with_capacity(d + 1));
            let p_mass = &mut st.p_mass;
            // The reference's tokens at rows 0..=d, as far as history + draft follow it.
            let ref_next: Vec<TokenId> = match (&self.tie, greedy) {
                (Some(tb), true) if tb.reference.starts_with(&hist) => {
                    let r = &tb.reference[hist.len()..];
                    let follow = draft
                        .tokens
                        .iter()
                        .zip(r)
                        .take_while(|(a, b)| a == b)
                        .count();
                    r.iter().take(follow + 1).copied().collect()
                }
                _ => Vec::new(),
            };
            let tolerance = self.tie.as_ref().map_or(0.0, |t| t.tolerance);
            let (mut n_ties, mut tie_gap) = (0u64, 0f64);
            let (mut fetch, mut pick, mut mass) = (0u64, 0u64, 0u64);
            let tf = Instant::now();
            bd.other_ns += (tf - tv).as_nanos() as u64;
            st.n_target_passes += self.kv.feed_chunked(
                target,
                &hist,
                &draft.tokens[..n_rows - 1],
                n_rows,
                self.max_rows_per_pass,
                &mut |e, j| {
                    let t0 = Instant::now();
                    let logits = e.logits(j)?;
                    let t1 = Instant::now();
                    let shared = n_shared.min(logits.len());
                    if greedy {
                        let (mut t, max) = argmax_max(&logits[..shared]);
                        if let Some(&r) = ref_next.get(am.len()) {
                            let gap = logits[t as usize]
                                - logits.get(r as usize).copied().unwrap_or(f32::NEG_INFINITY);
                            if r != t && (r as usize) < shared && gap <= tolerance {
                                n_ties += 1;
                                tie_gap = tie_gap.max(f64::from(gap));
                                t = r;
                            }
                        }
                        am.push(t);
                        let t2 = Instant::now();
                        p_mass.add(discarded_mass_with_max(logits, shared, temp, max));
                        pick += (t2 - t1).as_nanos() as u64;
                        mass += ns_since(t2);
                    } else {
                        p.push(cfg.sampling.distribution(&logits[..shared]));
                        let t2 = Instant::now();
                        p_mass.add(discarded_mass(logits, shared, temp));
                        pick += (t2 - t1).as_nanos() as u64;
                        mass += ns_since(t2);
                    }
                    fetch += (t1 - t0).as_nanos() as u64;
                    Ok(())
                },
            )? as u64;
            let ta = Instant::now();
            let kt = self.kv.take_times();
            bd.verify_forward_ns += kt.forward_ns;
            bd.target_rollback_ns += kt.rollback_ns;
            bd.verify_fetch_ns += fetch;
            bd.verify_pick_ns += pick;
            bd.verify_mass_ns += mass;
            bd.verify_other_ns += ((ta - tf).as_nanos() as u64)
                .saturating_sub(kt.forward_ns + kt.rollback_ns + fetch + pick + mass);
            // (accepted, the token after them, whether a rejection happened)
            let (n_accepted, next, rejected) = match (ends.is_some(), greedy) {
                (false, true) => {
                    let o = verify_greedy(&draft.tokens, &am);
                    (o.n_accepted, Some(o.next), o.rejected)
                }
                (false, false) => {
                    let o = verify_sampled(&draft.tokens, &draft.q, &p, &mut || uniform(&mut rng));
                    (o.n_accepted, Some(o.next), o.rejected)
                }
                (true, true) => {
                    let o = verify_greedy_final(&draft.tokens, &am);
                    (o.n_accepted, o.next, o.next.is_some())
                }
                (true, false) => {
                    let o = verify_sampled_final(&draft.tokens, &draft.q, &p, &mut || {
                        uniform(&mut rng)
                    });
                    (o.n_accepted, o.next, o.next.is_some())
                }
            };
            let tc = Instant::now();
            bd.accept_ns += (tc - ta).as_nanos() as u64;
            st.verify_ns += (tc - tv).as_nanos() as u64;
            st.n_tie_breaks += n_ties;
            st.tie_gap_max = st.tie_gap_max.max(tie_gap);
            st.n_iterations += 1;
            st.n_drafted += d as u64;
            st.n_draft_iterations += (d > 0) as u64;
            st.n_accepted += n_accepted as u64;
            st.n_rejections += rejected as u64;
            st.n_draft_passes += draft.passes as u64;
            st.q_mass.merge(&draft.q_mass);
            st.accept_hist[n_accepted] += 1;
            st.draft_len_hist[d] += 1;
            let commit = draft.tokens[..n_accepted].iter().copied().chain(next);
            let mut done = false;
            for t in commit {
                out.push(t);
                hist.push(t);
                st.n_emitted += 1;
                if target.is_eog(t) || out.len() >= cfg.max_new {
                    done = true;
                    break;
                }
            }
            bd.other_ns += ns_since(tc);
            if done {
                break 'outer;
            }
        }
        let te = Instant::now();
        target.synchronize();
        bd.other_ns += ns_since(te);
        st.breakdown = bd;
        let span = crate::measure::sampler::session::TimedSpan::between(t1, Instant::now());
        st.decode_ns = span.len_ns();
        // Both caches keep committed tokens only (rejected rows, and the end token
        // and anything after it, go); the next generation's sync would cut them too.
        self.kv.trim(target, &hist[..hist.len() - 1])?;
        drafter.end(&hist)?;
        Ok(SpecOutput {
            tokens: out,
            stats: st,
            decode_span: Some(span),
        })
    }
}

/// The target's plain greedy output ([`target_greedy`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GreedyOutput {
    /// The generated tokens, an end-of-generation token included when one came.
    pub tokens: Vec<TokenId>,
    /// Top-1 − top-2 logit margin at each step, one per token (how close the
    /// greedy choice was to a tie).
    pub margins: Vec<f32>,
}

/// Plain greedy decoding on the target alone, independent of the speculative code:
/// prefill all prompt tokens but the last in one batch, then one `decode_one` per
/// token from the last prompt token on, argmax over the full logit row. (The last
/// prompt token is decoded alone because llama.cpp's CPU kernels compute a row of a
/// large batch differently from a one-row pass, see [`DEFAULT_MAX_ROWS_PER_PASS`];
/// one-token decoding is the reference the speculative loop must reproduce.) Also returns the top-1 − top-2 logit margin at each step (how close
/// the greedy choice was to a tie). Stops after `max_new` tokens or at an
/// end-of-generation token (emitted).
///
/// # Errors
/// Engine errors.
pub fn target_greedy<E: Engine + ?Sized>(
    e: &mut E,
    prompt: &[TokenId],
    max_new: usize,
) -> Result<GreedyOutput, SpecError> {
    if prompt.is_empty() {
        return Err(SpecError::Config("empty prompt".into()));
    }
    e.kv_clear();
    let n = prompt.len();
    e.prefill(&prompt[..n - 1], 0, 0, false)?;
    e.decode_one(prompt[n - 1], (n - 1) as u32, 0)?;
    let mut out = Vec::with_capacity(max_new);
    let mut margins = Vec::with_capacity(max_new);
    while out.len() < max_new {
        let logits = e.logits(0)?;
        let t = argmax(logits);
        margins.push(top2_margin(logits));
        out.push(t);
        if e.is_eog(t) || out.len() >= max_new {
            break;
        }
        e.decode_one(t, (prompt.len() + out.len() - 1) as u32, 0)?;
    }
    Ok(GreedyOutput {
        tokens: out,
        margins,
    })
}

/// Largest minus second-largest logit (0 on a tie).
pub fn top2_margin(logits: &[f32]) -> f32 {
    let (mut a, mut b) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
    for &x in logits {
        if x > a {
            b = a;
            a = x;
        } else if x > b {
            b = x;
        }
    }
    a - b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::speculative::drafter::{DraftModel, NoDraft};
    use crate::experiments::speculative::mock::Mock;

    #[test]
    fn breakdown_parts_lie_inside_the_decode_clock() {
        let prompt: Vec<TokenId> = (0..6).map(|j| (j * 7 % 30) as TokenId).collect();
        let mut target = Mock::new(30, 4.0);
        let mut draft = Mock::new(30, 4.0);
        draft.noise = 8.0;
        let mut dm = DraftModel::new(draft, "draft:mock".into());
        let mut s = SpecSession::new();
        let out = s
            .generate(&mut target, &mut dm, &prompt, &SpecConfig::greedy(4, 40))
            .unwrap();
        let (st, b) = (&out.stats, &out.stats.breakdown);
        // Disjoint spans inside the loop's clock: never more than it.
        assert!(b.sum_ns() <= st.decode_ns, "{b:?} vs {}", st.decode_ns);
        assert!(b.coverage(st.decode_ns).unwrap() <= 1.0);
        // Both models ran forward passes inside their spans; the drafter's parts
        // are its span (draft_ns) exactly.
        assert!(st.n_draft_passes > 0 && b.draft_forward_ns > 0 && b.verify_forward_ns > 0);
        assert_eq!(b.draft_ns(), st.draft_ns);
        // A rejection rolls both caches back.
        assert!(st.n_rejections > 0, "{st:?}");
        // Target-only: no drafter time at all.
        let out = s
            .generate(
                &mut target,
                &mut NoDraft,
                &prompt,
                &SpecConfig::greedy(0, 20),
            )
            .unwrap();
        let b0 = out.stats.breakdown;
        assert_eq!(
            (
                b0.draft_forward_ns,
                b0.draft_fetch_ns,
                b0.draft_pick_ns,
                b0.draft_rollback_ns
            ),
            (0, 0, 0, 0)
        );
        assert!(b0.verify_forward_ns > 0 && b0.sum_ns() <= out.stats.decode_ns);
        // Merging adds part by part.
        let mut m = st.clone();
        m.merge(&out.stats);
        assert_eq!(m.breakdown.sum_ns(), b.sum_ns() + b0.sum_ns());
        assert_eq!(
            m.breakdown.verify_forward_ns,
            b.verify_forward_ns + b0.verify_forward_ns
        );
    }

    #[test]
    fn stats_stored_before_the_breakdown_still_read() {
        // A stats_json of a row stored before the breakdown existed (call12).
        let old = r#"{"n_iterations":123,"n_draft_iterations":119,"n_drafted":687,"n_accepted":453,"n_rejections":67,"n_emitted":576,"n_target_passes":123,"n_draft_passes":687,"accept_hist":[19,11,14,11,8,11,49],"draft_len_hist":[4,1,1,5,1,1,110],"p_mass":{"n":810,"sum":0.703524407567366,"max":0.001388602757448017},"q_mass":{"n":0,"sum":0.0,"max":0.0},"prefill_ns":197229774,"decode_ns":3320587479,"draft_ns":1235989009,"verify_ns":2084136543,"n_tie_breaks":6,"tie_gap_max":0.0078887939453125}"#;
        let st: SpecStats = serde_json::from_str(old).unwrap();
        assert_eq!(st.n_iterations, 123);
        assert_eq!(st.breakdown, IterBreakdown::default());
        assert_eq!(st.breakdown.coverage(st.decode_ns), None);
    }

    #[test]
    fn merge_sums_counters_and_histograms_of_different_lengths() {
        let mut a = SpecStats {
            n_iterations: 3,
            n_drafted: 2,
            accept_hist: vec![1, 2],
            draft_len_hist: vec![1, 2],
            ..Default::default()
        };
        let b = SpecStats {
            n_iterations: 4,
            n_drafted: 8,
            accept_hist: vec![0, 1, 1, 2],
            draft_len_hist: vec![0, 0, 0, 4],
            ..Default::default()
        };
        a.merge(&b);
        assert_eq!(a.n_iterations, 7);
        assert_eq!(a.n_drafted, 10);
        assert_eq!(a.accept_hist, vec![1, 3, 1, 2]);
        assert_eq!(a.draft_len_hist, vec![1, 2, 0, 4]);
        // Merging a shorter histogram keeps the longer length.
        a.merge(&SpecStats {
            draft_len_hist: vec![5],
            ..Default::default()
        });
        assert_eq!(a.draft_len_hist, vec![6, 2, 0, 4]);
    }
}
