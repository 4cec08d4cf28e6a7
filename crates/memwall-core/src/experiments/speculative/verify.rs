//! The verification step of speculative decoding, as pure functions.
//!
//! Given `k` drafted tokens `x₁…x_k`, the drafter's distributions `q₁…q_k` and the
//! target's distributions `p₁…p_{k+1}` (all after the same sampling filters, see
//! [`super::sampling`]):
//!
//! - token `i` is accepted with probability `min(1, pᵢ(xᵢ) ÷ qᵢ(xᵢ))`;
//! - at the first rejection, the replacement is drawn from the normalized residual
//!   `max(0, pᵢ − qᵢ)`;
//! - when all `k` are accepted, a bonus token is drawn from `p_{k+1}`.
//!
//! Then every emitted token is distributed exactly as the target's `p` (Leviathan
//! et al. 2023, Theorem 3.5 / Appendix A.1; Chen et al. 2023, Theorem 1). A drafter
//! that proposes deterministically (the n-gram drafter) has `q = δ_x`, so
//! acceptance is with probability `p(x)` and the residual is `p` with `x` removed.
//!
//! Greedy decoding (temperature 0) is the special case with point masses: accept
//! while the draft token equals the target's argmax; the first mismatch (or the
//! bonus position) emits the target's argmax ([`verify_greedy`]).
//!
//! The uniform draws come from a caller-supplied source, consumed in a fixed order
//! (one per tested position, then one for the replacement or bonus), so tests can
//! integrate over them exactly.

use super::sampling::sample_with;
use crate::measure::engine::TokenId;

/// The drafter's distribution at one drafted position.
#[derive(Debug, Clone, PartialEq)]
pub enum QDist {
    /// Deterministic proposal: a point mass on the drafted token (n-gram lookup,
    /// greedy draft model).
    Delta,
    /// A full distribution over the shared support (sampled draft model).
    Dist(Vec<f64>),
}

impl QDist {
    fn at(&self, x: TokenId) -> f64 {
        match self {
            QDist::Delta => 1.0,
            QDist::Dist(q) => q.get(x as usize).copied().unwrap_or(0.0),
        }
    }
}

/// What one verification decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Drafted tokens accepted (a prefix of the draft), `0..=k`.
    pub n_accepted: usize,
    /// The token emitted after the accepted prefix: the replacement at the first
    /// rejection, or the bonus token when all were accepted.
    pub next: TokenId,
    /// Whether a rejection happened (`false` ⇔ all `k` accepted and `next` is the
    /// bonus token).
    pub rejected: bool,
}

/// Greedy verification: `target_argmax[i]` is the target's argmax at drafted
/// position `i` (length `draft.len() + 1`, the last being the bonus position).
///
/// # Panics
/// When `target_argmax.len() != draft.len() + 1` (a caller bug).
pub fn verify_greedy(draft: &[TokenId], target_argmax: &[TokenId]) -> Outcome {
    assert_eq!(target_argmax.len(), draft.len() + 1, "k + 1 target rows");
    let n = draft
        .iter()
        .zip(target_argmax)
        .take_while(|(d, t)| d == t)
        .count();
    Outcome {
        n_accepted: n,
        next: target_argmax[n],
        rejected: n < draft.len(),
    }
}

/// What one verification of a draft that ends at an end-of-generation token
/// decided ([`verify_greedy_final`], [`verify_sampled_final`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalOutcome {
    /// Drafted tokens accepted (a prefix of the draft), `0..=k`; `k` means the
    /// drafted end token itself was accepted and the generation ends there.
    pub n_accepted: usize,
    /// The replacement at the first rejection; `None` when all `k` were accepted
    /// (nothing follows the end, so there is no bonus token).
    pub next: Option<TokenId>,
}

/// Greedy verification of a draft whose **last** token ends generation:
/// `target_argmax` has one row per drafted token and no bonus row (the end token
/// is verified by the row before it and never fed to the target).
///
/// # Panics
/// When `draft` is empty or `target_argmax.len() != draft.len()` (a caller bug).
pub fn verify_greedy_final(draft: &[TokenId], target_argmax: &[TokenId]) -> FinalOutcome {
    assert!(!draft.is_empty(), "a draft ending at the end token");
    assert_eq!(target_argmax.len(), draft.len(), "k target rows");
    let n = draft
        .iter()
        .zip(target_argmax)
        .take_while(|(d, t)| d == t)
        .count();
    FinalOutcome {
        n_accepted: n,
        next: target_argmax.get(n).copied(),
    }
}

/// Stochastic verification of a draft whose **last** token ends generation: `p`
/// has one row per drafted token (no bonus row). Each position is tested as in
/// [`verify_sampled`] (accept with probability `min(1, p ÷ q)`, else a draw from
/// the residual), so every emitted token, the end token included, is distributed
/// as the target's `p`; when all `k` are accepted nothing more is drawn.
///
/// # Panics
/// When the lengths disagree or the draft is empty (a caller bug).
pub fn verify_sampled_final(
    draft: &[TokenId],
    q: &[QDist],
    p: &[Vec<f64>],
    u: &mut dyn FnMut() -> f64,
) -> FinalOutcome {
    let k = draft.len();
    assert!(k > 0, "a draft ending at the end token");
    assert_eq!(q.len(), k, "one q row per drafted token");
    assert_eq!(p.len(), k, "k target rows");
    match first_rejection(draft, q, p, u) {
        Some(o) => FinalOutcome {
            n_accepted: o.n_accepted,
            next: Some(o.next),
        },
        None => FinalOutcome {
            n_accepted: k,
            next: None,
        },
    }
}

/// Stochastic verification (speculative sampling). `q[i]` and `p[i]` are the
/// drafter's and the target's distributions at drafted position `i`; `p` has one
/// more row (the bonus position). `u` yields uniform draws in [0, 1).
///
/// # Panics
/// When the lengths disagree (a caller bug).
pub fn verify_sampled(
    draft: &[TokenId],
    q: &[QDist],
    p: &[Vec<f64>],
    u: &mut dyn FnMut() -> f64,
) -> Outcome {
    let k = draft.len();
    assert_eq!(q.len(), k, "one q row per drafted token");
    assert_eq!(p.len(), k + 1, "k + 1 target rows");
    if let Some(o) = first_rejection(draft, q, p, u) {
        return o;
    }
    let draw = u();
    Outcome {
        n_accepted: k,
        next: sample_with(&p[k], draw).unwrap_or(0),
        rejected: false,
    }
}

/// Tests the drafted positions in order; the outcome at the first rejection (its
/// replacement drawn from the residual), `None` when all are accepted.
fn first_rejection(
    draft: &[TokenId],
    q: &[QDist],
    p: &[Vec<f64>],
    u: &mut dyn FnMut() -> f64,
) -> Option<Outcome> {
    for i in 0..draft.len() {
        let x = draft[i];
        let px = p[i].get(x as usize).copied().unwrap_or(0.0);
        let qx = q[i].at(x);
        // Accept with probability min(1, p/q): u < p/q, written without division.
        if u() * qx < px {
            continue;
        }
        let residual = residual(&p[i], &q[i], x);
        let draw = u();
        // The residual is empty only through rounding (rejection needs p(x) < q(x),
        // which leaves mass where p > q); fall back to p itself then.
        let next = sample_with(&residual, draw)
            .or_else(|| sample_with(&p[i], draw))
            .unwrap_or(x);
        return Some(Outcome {
            n_accepted: i,
            next,
            rejected: true,
        });
    }
    None
}

/// The unnormalized residual `max(0, p − q)` ([`sample_with`] normalizes).
pub fn residual(p: &[f64], q: &QDist, x: TokenId) -> Vec<f64> {
    match q {
        QDist::Delta => {
            let mut r = p.to_vec();
            if let Some(v) = r.get_mut(x as usize) {
                *v = 0.0;
            }
            r
        }
        QDist::Dist(q) => p
            .iter()
            .enumerate()
            .map(|(i, &pi)| (pi - q.get(i).copied().unwrap_or(0.0)).max(0.0))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::speculative::sampling::uniform;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// Tolerance of the deterministic quadrature: a G×G midpoint grid misplaces at
    /// most a 1/G strip of mass per decision boundary; one acceptance boundary and
    /// at most 3 residual boundaries with G = 1000 bound the error by 4e-3.
    const QUAD_TOL: f64 = 4e-3;

    /// Exact output distribution of one verification with k = 1 by midpoint
    /// quadrature over the two uniforms it consumes: entries `0..n` are "rejected,
    /// emitted y", entries `n + x·n + y` are "accepted x, bonus y".
    fn quadrature_k1(p0: &[f64], q0: &QDist, p1: &[f64], draft: TokenId) -> Vec<f64> {
        let g = 1000usize;
        let n = p0.len();
        let p = [p0.to_vec(), p1.to_vec()];
        let mut out = vec![0.0; n + n * n];
        let w = 1.0 / (g * g) as f64;
        for a in 0..g {
            for b in 0..g {
                let us = [(a as f64 + 0.5) / g as f64, (b as f64 + 0.5) / g as f64];
                let mut i = 0;
                let mut u = || {
                    i += 1;
                    us[i - 1]
                };
                let o = verify_sampled(&[draft], std::slice::from_ref(q0), &p, &mut u);
                if o.n_accepted == 0 {
                    out[o.next as usize] += w;
                } else {
                    out[n + draft as usize * n + o.next as usize] += w;
                }
            }
        }
        out
    }

    #[test]
    fn first_token_is_distributed_as_p_exactly_when_the_draft_is_sampled_from_q() {
        // p, q over 4 tokens; the draft token x ~ q. P(first emitted = y) must be p(y):
        // Σ_x q(x) [x accepted and y = x, or rejected and y from residual].
        let p = [0.1, 0.4, 0.2, 0.3];
        let q = [0.4, 0.1, 0.3, 0.2];
        let p1 = [0.25, 0.25, 0.25, 0.25];
        let mut first = [0.0; 4];
        let mut pair = [0.0; 16];
        for x in 0..4 {
            let d = quadrature_k1(&p, &QDist::Dist(q.to_vec()), &p1, x as TokenId);
            for y in 0..4 {
                first[y] += q[x] * d[y];
            }
            for y in 0..4 {
                first[x] += q[x] * d[4 + x * 4 + y];
                pair[x * 4 + y] += q[x] * d[4 + x * 4 + y];
            }
        }
        for y in 0..4 {
            assert!(
                (first[y] - p[y]).abs() < QUAD_TOL,
                "y={y}: {first:?} vs {p:?}"
            );
        }
        // Closed form: P(accept x) = min(q(x), p(x)); the bonus is then uniform (p1).
        for x in 0..4 {
            let acc = q[x].min(p[x]);
            for y in 0..4 {
                assert!((pair[x * 4 + y] - acc * 0.25).abs() < QUAD_TOL);
            }
        }
    }

    #[test]
    fn delta_proposals_emit_p_exactly() {
        // n-gram drafter: x is fixed; accepted w.p. p(x); else drawn from p without x.
        let p = [0.5, 0.2, 0.3];
        let d = quadrature_k1(&p, &QDist::Delta, &[1.0, 0.0, 0.0], 2);
        let first: Vec<f64> = (0..3)
            .map(|y| d[y] + if y == 2 { d[3 + 2 * 3] } else { 0.0 })
            .collect();
        for y in 0..3 {
            assert!((first[y] - p[y]).abs() < QUAD_TOL, "{first:?}");
        }
        assert!(
            (d[3 + 2 * 3] - 0.3).abs() < QUAD_TOL,
            "accepted w.p. p(x) = 0.3"
        );
    }

    /// χ² critical value at significance 1e-3 by the Wilson–Hilferty approximation
    /// (z₀.₉₉₉ = 3.0902).
    fn chi2_crit(df: f64) -> f64 {
        let z = 3.0902;
        df * (1.0 - 2.0 / (9.0 * df) + z * (2.0 / (9.0 * df)).sqrt()).powi(3)
    }

    #[test]
    fn monte_carlo_k3_sequences_follow_p_chi_square() {
        // A context-free target/draft per position: 3 drafted positions, 3 tokens.
        // The first two emitted tokens of each verification must follow p₀ × p₁.
        let p: Vec<Vec<f64>> = vec![
            vec![0.6, 0.3, 0.1],
            vec![0.2, 0.2, 0.6],
            vec![0.1, 0.8, 0.1],
            vec![0.3, 0.3, 0.4],
        ];
        let q: Vec<Vec<f64>> = vec![
            vec![0.2, 0.5, 0.3],
            vec![0.3, 0.4, 0.3],
            vec![0.6, 0.2, 0.2],
        ];
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let n = 200_000;
        let mut counts = [0u64; 9];
        for _ in 0..n {
            let draft: Vec<TokenId> = q
                .iter()
                .map(|qi| sample_with(qi, uniform(&mut rng)).unwrap())
                .collect();
            let qd: Vec<QDist> = q.iter().map(|qi| QDist::Dist(qi.clone())).collect();
            let o = verify_sampled(&draft, &qd, &p, &mut || uniform(&mut rng));
            let mut emitted: Vec<TokenId> = draft[..o.n_accepted].to_vec();
            emitted.push(o.next);
            if emitted.len() < 2 {
                // Token 2 would come from the next iteration at p₁ (context-free here).
                emitted.push(sample_with(&p[1], uniform(&mut rng)).unwrap());
            }
            counts[emitted[0] as usize * 3 + emitted[1] as usize] += 1;
        }
        let mut chi2 = 0.0;
        for a in 0..3 {
            for b in 0..3 {
                let e = n as f64 * p[0][a] * p[1][b];
                let o = counts[a * 3 + b] as f64;
                chi2 += (o - e) * (o - e) / e;
            }
        }
        assert!(
            chi2 < chi2_crit(8.0),
            "χ² = {chi2} ≥ {} (df 8)",
            chi2_crit(8.0)
        );
    }

    #[test]
    fn greedy_special_case() {
        // All accepted: bonus is the last argmax.
        let o = verify_greedy(&[5, 6, 7], &[5, 6, 7, 8]);
        assert_eq!((o.n_accepted, o.next, o.rejected), (3, 8, false));
        // First rejected: the target's argmax replaces it.
        let o = verify_greedy(&[5, 6, 7], &[9, 6, 7, 8]);
        assert_eq!((o.n_accepted, o.next, o.rejected), (0, 9, true));
        let o = verify_greedy(&[5, 6, 7], &[5, 6, 1, 8]);
        assert_eq!((o.n_accepted, o.next, o.rejected), (2, 1, true));
        // k = 0 degenerates to plain greedy decoding.
        let o = verify_greedy(&[], &[4]);
        assert_eq!((o.n_accepted, o.next, o.rejected), (0, 4, false));
    }

    #[test]
    fn a_draft_ending_at_the_end_token_has_no_bonus_row() {
        // The end token (7) accepted: nothing follows, no bonus.
        let o = verify_greedy_final(&[5, 6, 7], &[5, 6, 7]);
        assert_eq!((o.n_accepted, o.next), (3, None));
        // Rejected at the end token: the target's own token replaces it.
        let o = verify_greedy_final(&[5, 6, 7], &[5, 6, 4]);
        assert_eq!((o.n_accepted, o.next), (2, Some(4)));
        let o = verify_greedy_final(&[7], &[3]);
        assert_eq!((o.n_accepted, o.next), (0, Some(3)));
        // Sampled, δ proposals: position i is accepted iff u < p(x). p(end) = 0.25 at
        // the last row: u = 0.1 accepts it (no further draw), u = 0.9 rejects and
        // draws from p without x, (0.5, 0.25, 0): the draw 0.3 × 0.75 = 0.225 falls in
        // token 0's 0.5.
        let p = vec![vec![0.0, 1.0, 0.0], vec![0.5, 0.25, 0.25]];
        let q = [QDist::Delta, QDist::Delta];
        let mut us = [0.5, 0.1].into_iter();
        let o = verify_sampled_final(&[1, 2], &q, &p, &mut || us.next().unwrap());
        assert_eq!((o.n_accepted, o.next), (2, None));
        assert_eq!(us.next(), None, "two draws, none for a bonus");
        let mut us = [0.5, 0.9, 0.3].into_iter();
        let o = verify_sampled_final(&[1, 2], &q, &p, &mut || us.next().unwrap());
        assert_eq!((o.n_accepted, o.next), (1, Some(0)));
    }

    #[test]
    fn greedy_agrees_with_sampled_on_point_masses() {
        // Point masses: p/q ratios are 0 or 1, so the sampled verifier is the greedy one.
        let one = |i: usize| {
            let mut v = vec![0.0; 4];
            v[i] = 1.0;
            v
        };
        let p = vec![one(1), one(2), one(0)];
        let q = vec![QDist::Dist(one(1)), QDist::Dist(one(3))];
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..100 {
            let o = verify_sampled(&[1, 3], &q, &p, &mut || uniform(&mut rng));
            assert_eq!(o, verify_greedy(&[1, 3], &[1, 2, 0]));
        }
    }

    #[test]
    fn residual_is_max_p_minus_q() {
        let r = residual(&[0.5, 0.3, 0.2], &QDist::Dist(vec![0.2, 0.6, 0.2]), 1);
        assert!((r[0] - 0.3).abs() < 1e-12 && r[1] == 0.0 && r[2].abs() < 1e-12);
        assert_eq!(
            residual(&[0.5, 0.3, 0.2], &QDist::Delta, 0),
            vec![0.0, 0.3, 0.2]
        );
    }
}
