//! The correctness gate (`memwall spec gate`).
//!
//! **Greedy equality** ([`greedy_gate`]): for every prompt of the frozen set, the
//! target's plain greedy output ([`target_greedy`], no speculative code involved)
//! is compared token for token with the speculative output of each configuration
//! (drafter × k). A configuration passes when all N prompts are identical; the
//! first differing position is reported otherwise, with the target's top-1 − top-2
//! logit margin there (a margin near 0 points at a numerical near-tie between the
//! one-position and the batched forward pass, a large one at a logic error).
//!
//! **Sampling** ([`sampling_check`]): from one prefix, many one-iteration
//! speculative runs at temperature > 0 (different seeds, real draft and target,
//! KV rollback between runs); the empirical distribution of the first emitted token
//! is compared with the target's `p` at that prefix by Pearson's χ² over the tokens
//! with expected count ≥ 5 (the rest pooled), at significance 10⁻³
//! (critical value by the Wilson–Hilferty approximation). The total-variation
//! distance is reported beside its expected size under `p`.

use super::SpecError;
use super::drafter::{DraftModel, Drafter, Ngram};
use super::prompts::{Category, Format};
use super::run::{
    GreedyOutput, SpecConfig, SpecOutput, SpecSession, SpecStats, TieBreak, target_greedy,
};
use super::sampling::SamplingParams;
use super::shape::{self, ShapeGap};
use super::tree::TreeShape;
use super::tree_loop::TreeDraftModel;
use crate::measure::engine::{Engine, TokenId};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "kebab-case")]
pub enum DrafterKind {
    DraftModel,
    /// Prompt lookup.
    Ngram,
}

impl DrafterKind {
    /// `draft-model` / `ngram`.
    pub fn name(self) -> &'static str {
        match self {
            DrafterKind::DraftModel => "draft-model",
            DrafterKind::Ngram => "ngram",
        }
    }
    /// Parses a name.
    pub fn parse(s: &str) -> Option<DrafterKind> {
        match s {
            "draft-model" | "draft" | "model" => Some(DrafterKind::DraftModel),
            "ngram" | "n-gram" | "lookup" => Some(DrafterKind::Ngram),
            _ => None,
        }
    }
}

/// A prompt after rendering and tokenization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenizedPrompt {
    /// Id of the prompt in the frozen set, e.g. `json-01`.
    pub id: String,
    /// Prompt category: `json`, `code` or `prose`.
    pub category: Category,
    /// Raw or chat.
    pub format: Format,
    /// Exact tokens (post-template).
    pub tokens: Vec<TokenId>,
}

/// What to gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GatePlan {
    /// Draft lengths.
    pub ks: Vec<usize>,
    /// Drafters to compare.
    pub drafters: Vec<DrafterKind>,
    /// Tokens generated per prompt.
    pub max_new: usize,
    /// The n-gram drafter's settings.
    pub ngram: Ngram,
    /// Near-tie tolerance, in logits (0: token for token): a verified position may
    /// take the target-only token where the verify pass's argmax leads it by at
    /// most this much ([`TieBreak`]); such positions are counted in each row's
    /// stats and named in its line.
    #[serde(default)]
    pub tie_tolerance: f32,
    /// The tolerance is each k's measured batch-shape gap ([`shape::measure`] on
    /// the first prompt, before any row runs) instead of `tie_tolerance`
    /// (`--tie-tolerance measured`). A `tie_tolerance` above the measured gap is
    /// refused (a tolerance must come from a measurement).
    #[serde(default)]
    pub tie_measured: bool,
}

/// Where a speculative output first left the reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct FirstDiff {
    /// Id of the prompt in the frozen set, e.g. `json-01`.
    pub prompt_id: String,
    /// 0-based position in the generated tokens.
    pub position: usize,
    /// The reference's token there (`None`: the reference had ended).
    pub want: Option<TokenId>,
    /// The speculative token there (`None`: the speculative output had ended).
    pub got: Option<TokenId>,
    /// The target's top-1 − top-2 logit margin at that position in the reference.
    pub target_margin: Option<f32>,
}

/// One configuration's gate result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct GateRow {
    /// Drafter identity (`draft:…`, `ngram:1-3`).
    pub drafter_key: String,
    pub drafter: DrafterKind,
    /// Draft length: tokens the drafter proposes per iteration.
    pub k: usize,
    /// Prompts run.
    pub n_prompts: usize,
    /// Prompts with identical output.
    pub n_identical: usize,
    /// The first difference (first prompt in set order that differed).
    pub first_diff: Option<FirstDiff>,
    /// Speculative counters summed over the prompts.
    #[ts(skip)]
    pub stats: SpecStats,
    /// The batch-shape gap of this k's verify passes, measured before the gate ran
    /// (`None`: no near-tie tolerance asked for, nothing measured).
    #[ts(skip)]
    #[serde(default)]
    pub shape_gap: Option<ShapeGap>,
    /// The near-tie tolerance this row ran with, in logits (0: token for token).
    #[ts(skip)]
    #[serde(default)]
    pub tie_tolerance: f32,
}

impl GateRow {
    /// Counts one prompt's speculative output `out` against target-only decoding
    /// `want` (with its top-1 − top-2 `margins`), keeping the first difference.
    fn record(&mut self, prompt_id: &str, want: &[TokenId], margins: &[f32], out: &SpecOutput) {
        self.n_prompts += 1;
        self.stats.merge(&out.stats);
        if out.tokens == want {
            self.n_identical += 1;
        } else if self.first_diff.is_none() {
            let pos = want
                .iter()
                .zip(&out.tokens)
                .take_while(|(a, b)| a == b)
                .count();
            self.first_diff = Some(FirstDiff {
                prompt_id: prompt_id.to_string(),
                position: pos,
                want: want.get(pos).copied(),
                got: out.tokens.get(pos).copied(),
                target_margin: margins.get(pos).copied(),
            });
        }
    }

    /// All N identical?
    pub fn passed(&self) -> bool {
        self.n_identical == self.n_prompts && self.n_prompts > 0
    }
    /// The report line: `draft-model k=4: 54/54 identical` or with the first difference.
    pub fn line(&self) -> String {
        let mut s = match tree_of_key(&self.drafter_key) {
            Some(t) => format!(
                "tree {t}: {}/{} identical",
                self.n_identical, self.n_prompts
            ),
            None => format!(
                "{:<11} k={}: {}/{} identical",
                self.drafter.name(),
                self.k,
                self.n_identical,
                self.n_prompts
            ),
        };
        if let Some(d) = &self.first_diff {
            let tok = |t: Option<TokenId>| t.map_or("end".to_string(), |t| t.to_string());
            s.push_str(&format!(
                "; first difference: prompt {} at generated position {} (target {}, speculative {}; target top-1−top-2 logit margin {})",
                d.prompt_id,
                d.position,
                tok(d.want),
                tok(d.got),
                d.target_margin.map_or("—".into(), |m| format!("{m:.4}"))
            ));
        }
        if let Some(a) = self.stats.alpha_hat() {
            s.push_str(&format!(
                "; α̂ {a:.3} ({} accepted of {} tested, {} drafted, {} emitted)",
                self.stats.n_accepted,
                self.stats.n_tested(),
                self.stats.n_drafted,
                self.stats.n_emitted
            ));
        }
        if self.stats.n_tie_breaks > 0 {
            s.push_str(&format!(
                "; {} near-ties of {} emitted tokens took the target-only token (verify argmax ahead by at most {:.3e} logits)",
                self.stats.n_tie_breaks, self.stats.n_emitted, self.stats.tie_gap_max
            ));
        }
        if let Some(g) = &self.shape_gap {
            s.push_str(&format!(
                "; batch-shape gap {:.3e} logits ({}-row vs 1-row passes, {} positions), near-tie tolerance {:.3e}",
                g.max_abs, g.rows, g.n_positions, self.tie_tolerance
            ));
        }
        s
    }
}

/// The drafter key of tree drafts of `shape` by the draft model keyed `draft_key`:
/// `tree k3 b2 m1|draft:…`. A gate row under it unlocks that shape only.
pub fn tree_key(shape: &TreeShape, draft_key: &str) -> String {
    format!("tree {}|{draft_key}", shape.label())
}

/// The shape label of a [`tree_key`] (`None` for a chain's key).
pub fn tree_of_key(key: &str) -> Option<&str> {
    key.strip_prefix("tree ")?.split('|').next()
}

/// The greedy gate of tree drafts: for every prompt, target-only decoding, then each
/// shape's output ([`SpecSession::generate_tree`]) compared token for token. With
/// `plan.tie_measured` or a `plan.tie_tolerance`, each shape's tolerance is its
/// verify pass's batch-shape gap (`nodes + 1` rows against 1-row passes, measured on
/// the first prompt before any row runs, as [`greedy_gate`] does for a chain's
/// `k + 1`); a tolerance above the gap is refused. Rows are keyed by [`tree_key`],
/// with `k` the tree's depth; `plan.ks` and `plan.drafters` are not read.
/// `target` and the drafter's engine need llama.cpp's unified KV cache and
/// `n_seq_max ≥ leaves + 2` (the target) and `≥ leaves + 1` (the draft).
///
/// # Errors
/// Engine errors (a tree on an engine without shared tokens); [`SpecError::Config`]
/// for a shape that does not fit one verify pass; [`SpecError::Cancelled`].
pub fn tree_gate<T: Engine, D: Engine>(
    target: &mut T,
    drafter: &mut TreeDraftModel<D>,
    prompts: &[TokenizedPrompt],
    shapes: &[TreeShape],
    plan: &GatePlan,
    on_prompt: &mut dyn FnMut(usize, usize, &str),
    cancel: &AtomicBool,
) -> Result<Vec<GateRow>, SpecError> {
    let max_new = plan.max_new;
    let mut rows: Vec<GateRow> = shapes
        .iter()
        .map(|s| GateRow {
            drafter_key: tree_key(s, drafter.key()),
            drafter: DrafterKind::DraftModel,
            k: s.k,
            n_prompts: 0,
            n_identical: 0,
            first_diff: None,
            stats: SpecStats::default(),
            shape_gap: None,
            tie_tolerance: 0.0,
        })
        .collect();
    let mut session = SpecSession::for_target(target);
    if plan.tie_measured || plan.tie_tolerance > 0.0 {
        let n_shared = drafter.engine().n_vocab().min(target.n_vocab());
        let first = prompts
            .first()
            .ok_or_else(|| SpecError::Config("the gate has no prompts".into()))?;
        for (row, shape) in rows.iter_mut().zip(shapes) {
            let r = shape.n_nodes() + 1;
            let g = shape::measure(
                target,
                &first.tokens,
                n_shared,
                max_new.max(r),
                r,
                session.max_rows_per_pass,
            )?;
            if !plan.tie_measured && f64::from(plan.tie_tolerance) > g.max_abs {
                return Err(SpecError::Config(format!(
                    "--tie-tolerance {} is more than the batch-shape gap measured for the tree {}: {:.3e} logits ({r}-row vs 1-row passes): use --tie-tolerance measured",
                    plan.tie_tolerance,
                    shape.label(),
                    g.max_abs
                )));
            }
            row.shape_gap = Some(g);
            row.tie_tolerance = if plan.tie_measured {
                g.max_abs as f32
            } else {
                plan.tie_tolerance
            };
        }
    }
    for (pi, p) in prompts.iter().enumerate() {
        if cancel.load(Ordering::Relaxed) {
            return Err(SpecError::Cancelled);
        }
        on_prompt(pi, prompts.len(), &p.id);
        let GreedyOutput {
            tokens: want,
            margins,
        } = target_greedy(target, &p.tokens, max_new)?;
        session.invalidate();
        drafter.invalidate();
        let reference: Vec<TokenId> = p.tokens.iter().chain(&want).copied().collect();
        for (row, shape) in rows.iter_mut().zip(shapes) {
            session.set_tie_break((row.tie_tolerance > 0.0).then(|| TieBreak {
                reference: reference.clone(),
                tolerance: row.tie_tolerance,
            }));
            let cfg = SpecConfig::greedy(shape.k, max_new);
            let out = session.generate_tree(target, drafter, &p.tokens, shape, &cfg)?;
            row.record(&p.id, &want, &margins, &out);
        }
    }
    Ok(rows)
}

/// Runs the greedy gate. `draft` is needed when the plan has the draft-model
/// drafter. `on_prompt(i, n, id)` reports progress; `cancel` is read before each
/// prompt.
///
/// # Errors
/// Engine errors; [`SpecError::Config`] when a draft model is needed but absent;
/// [`SpecError::Cancelled`] once `cancel` is set.
pub fn greedy_gate<T: Engine, D: Engine>(
    target: &mut T,
    mut draft: Option<&mut DraftModel<D>>,
    prompts: &[TokenizedPrompt],
    plan: &GatePlan,
    on_prompt: &mut dyn FnMut(usize, usize, &str),
    cancel: &AtomicBool,
) -> Result<Vec<GateRow>, SpecError> {
    if plan.drafters.contains(&DrafterKind::DraftModel) && draft.is_none() {
        return Err(SpecError::Config(
            "the draft-model drafter needs a draft model".into(),
        ));
    }
    let mut ngram = plan.ngram;
    let mut rows: Vec<GateRow> = Vec::new();
    for &dk in &plan.drafters {
        for &k in &plan.ks {
            let key = match dk {
                DrafterKind::DraftModel => draft.as_ref().map(|d| d.key()).unwrap_or_default(),
                DrafterKind::Ngram => ngram.key(),
            };
            rows.push(GateRow {
                drafter_key: key,
                drafter: dk,
                k,
                n_prompts: 0,
                n_identical: 0,
                first_diff: None,
                stats: SpecStats::default(),
                shape_gap: None,
                tie_tolerance: 0.0,
            });
        }
    }
    let mut session = SpecSession::for_target(target);
    // Near-ties may be allowed only as far as the target's logits move between a
    // 1-row pass and a verify pass of each k's shape: measured here, on the first
    // prompt, before any row runs, and stored with the rows.
    if plan.tie_measured || plan.tie_tolerance > 0.0 {
        let n_target = target.n_vocab();
        let n_shared = draft
            .as_ref()
            .and_then(|d| d.n_vocab())
            .map_or(n_target, |d| d.min(n_target));
        let first = prompts
            .first()
            .ok_or_else(|| SpecError::Config("the gate has no prompts".into()))?;
        let mut gaps: Vec<(usize, ShapeGap)> = Vec::new();
        for &k in &plan.ks {
            if k == 0 || gaps.iter().any(|(kk, _)| *kk == k) {
                continue;
            }
            let g = shape::measure(
                target,
                &first.tokens,
                n_shared,
                plan.max_new.max(k + 1),
                k + 1,
                session.max_rows_per_pass,
            )?;
            if !plan.tie_measured && f64::from(plan.tie_tolerance) > g.max_abs {
                return Err(SpecError::Config(format!(
                    "--tie-tolerance {} is more than the batch-shape gap measured at k = {k}: {:.3e} logits \
                     (the target's logits in {}-row passes vs 1-row passes at the same {} positions of prompt {}); \
                     a gate may allow no more than that: use --tie-tolerance measured",
                    plan.tie_tolerance, g.max_abs, g.rows, g.n_positions, first.id
                )));
            }
            gaps.push((k, g));
        }
        for row in rows.iter_mut() {
            if let Some((_, g)) = gaps.iter().find(|(k, _)| *k == row.k) {
                row.shape_gap = Some(*g);
                row.tie_tolerance = if plan.tie_measured {
                    g.max_abs as f32
                } else {
                    plan.tie_tolerance
                };
            }
        }
    }
    for (pi, p) in prompts.iter().enumerate() {
        if cancel.load(Ordering::Relaxed) {
            return Err(SpecError::Cancelled);
        }
        on_prompt(pi, prompts.len(), &p.id);
        let GreedyOutput {
            tokens: want,
            margins,
        } = target_greedy(target, &p.tokens, plan.max_new)?;
        session.invalidate();
        let reference: Vec<TokenId> = p.tokens.iter().chain(&want).copied().collect();
        for row in rows.iter_mut() {
            session.set_tie_break((row.tie_tolerance > 0.0).then(|| TieBreak {
                reference: reference.clone(),
                tolerance: row.tie_tolerance,
            }));
            let cfg = SpecConfig::greedy(row.k, plan.max_new);
            let drafter: &mut dyn Drafter = match row.drafter {
                DrafterKind::DraftModel => *draft.as_mut().expect("checked above"),
                DrafterKind::Ngram => &mut ngram,
            };
            let out = session.generate(target, drafter, &p.tokens, &cfg)?;
            row.record(&p.id, &want, &margins, &out);
        }
    }
    Ok(rows)
}

/// Result of the sampling check on a real pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct SamplingCheck {
    /// The drafter's identity: kind and settings (or draft model file).
    pub drafter_key: String,
    /// Draft length: tokens the drafter proposes per iteration.
    pub k: usize,
    /// Sampling settings (applied to p and q).
    #[ts(skip)]
    pub sampling: SamplingParams,
    /// Prefix length in tokens.
    pub n_prefix_tokens: usize,
    /// One-iteration speculative runs tallied.
    pub trials: usize,
    /// χ² bins (tokens with expected count ≥ 5, plus one pooled bin when it has mass).
    pub n_bins: usize,
    /// Degrees of freedom (bins − 1).
    pub df: usize,
    /// Pearson's χ².
    pub chi2: f64,
    /// Critical value at significance 10⁻³.
    pub chi2_crit: f64,
    /// P(χ²_df ≥ chi2): the p-value of the observed counts under `p`
    /// ([`chi2_sf`]); `None` in checks stored before it was kept.
    #[serde(default)]
    pub p_value: Option<f64>,
    /// Total-variation distance between the empirical and `p` over the bins.
    pub tv: f64,
    /// Expected TV under `p` is at most ½ Σ √(pᵢ(1−pᵢ)/n) over the bins (Jensen).
    pub tv_expected_max: f64,
    /// Acceptance over the runs (accepted ÷ drafted).
    pub acceptance_rate: Option<f64>,
    /// α̂ over the runs: accepted ÷ (accepted + rejections).
    #[serde(default)]
    pub alpha_hat: Option<f64>,
    /// Runs whose first drafted position was rejected, so that the first emitted
    /// token was drawn from the residual `max(0, p − q)`: how often the check
    /// exercised the path a draft equal to the target never takes (0 there).
    #[serde(default)]
    pub n_first_rejected: u64,
    /// χ² below the critical value?
    pub passed: bool,
    /// The five most likely tokens: `(token, p, observed frequency)`.
    #[ts(skip)]
    pub top: Vec<(TokenId, f64, f64)>,
}

/// χ² critical value at significance 10⁻³ by the Wilson–Hilferty approximation
/// `df·(1 − 2/(9df) + z·√(2/(9df)))³` with `z₀.₉₉₉ = 3.0902` (within 1 % of the
/// exact quantile for df ≥ 3).
pub fn chi2_crit_1e3(df: usize) -> f64 {
    let df = df.max(1) as f64;
    let z = 3.0902;
    df * (1.0 - 2.0 / (9.0 * df) + z * (2.0 / (9.0 * df)).sqrt()).powi(3)
}

/// The χ² survival function `P(χ²_df ≥ x)` (a p-value): the regularized upper
/// incomplete gamma function `Q(df/2, x/2)`, by its series below `a + 1` and its
/// continued fraction (modified Lentz) above (Numerical Recipes, 3rd ed., §6.2),
/// with `ln Γ` by Lanczos (g = 7, 9 terms). Closed forms it meets: df = 2 gives
/// `e^(−x/2)`; df = 1 gives `erfc(√(x/2))`.
pub fn chi2_sf(x: f64, df: usize) -> f64 {
    if df == 0 || x.is_nan() {
        return f64::NAN;
    }
    if x <= 0.0 {
        return 1.0;
    }
    let a = df as f64 / 2.0;
    let x = x / 2.0;
    let front = (a * x.ln() - x - ln_gamma(a)).exp();
    if x < a + 1.0 {
        // P(a, x) = front · Σ xⁿ / (a (a+1) … (a+n)).
        let (mut term, mut sum, mut ap) = (1.0 / a, 1.0 / a, a);
        for _ in 0..1000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-16 {
                break;
            }
        }
        (1.0 - front * sum).clamp(0.0, 1.0)
    } else {
        // Q(a, x) = front · 1 / (x + 1 − a − 1·(1−a) / (x + 3 − a − …)).
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..1000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        (front * h).clamp(0.0, 1.0)
    }
}

/// `ln Γ(z)` for z > 0 (Lanczos, g = 7, n = 9; relative error ≈ 1e-15).
fn ln_gamma(z: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if z < 0.5 {
        // Reflection: Γ(z) Γ(1 − z) = π / sin(πz).
        return (std::f64::consts::PI / (std::f64::consts::PI * z).sin()).ln() - ln_gamma(1.0 - z);
    }
    let z = z - 1.0;
    let mut x = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        x += c / (z + i as f64);
    }
    let t = z + G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (z + 0.5) * t.ln() - t + x.ln()
}

/// A χ² goodness-of-fit comparison of observed counts with a distribution ([`chi_square`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChiSquare {
    /// Bins compared: tokens with expected count ≥ 5, plus one pooled bin for the rest.
    pub n_bins: usize,
    /// Degrees of freedom, `n_bins − 1`.
    pub df: usize,
    /// The χ² statistic, Σ (observed − expected)² ÷ expected over the bins.
    pub chi2: f64,
    /// Total variation distance between the observed frequencies and `p`, over the bins.
    pub tv: f64,
    /// The TV expected from sampling noise alone, Σ √(p(1−p)/n) ÷ 2 over the bins.
    pub tv_expected_max: f64,
}

/// Compares `counts` (over `p`'s support, length = `p.len()`) with `p` by χ²
/// (bins with expected ≥ 5, the rest pooled).
pub fn chi_square(p: &[f64], counts: &[u64]) -> ChiSquare {
    let n: u64 = counts.iter().sum();
    let nf = n as f64;
    let (mut chi2, mut tv, mut tvb) = (0.0, 0.0, 0.0);
    let mut bins = 0usize;
    let (mut pool_p, mut pool_c) = (0.0, 0u64);
    let mut add = |pp: f64, c: u64| {
        let e = pp * nf;
        chi2 += (c as f64 - e).powi(2) / e;
        tv += (c as f64 / nf - pp).abs() / 2.0;
        tvb += (pp * (1.0 - pp) / nf).sqrt() / 2.0;
    };
    for (i, &pi) in p.iter().enumerate() {
        if pi * nf >= 5.0 {
            add(pi, counts[i]);
            bins += 1;
        } else {
            pool_p += pi;
            pool_c += counts[i];
        }
    }
    if pool_p > 0.0 {
        add(pool_p, pool_c);
        bins += 1;
    }
    ChiSquare {
        n_bins: bins,
        df: bins.saturating_sub(1),
        chi2,
        tv,
        tv_expected_max: tvb,
    }
}

/// Runs the sampling check: `trials` one-iteration speculative runs from `prefix`
/// with seeds `seed..seed+trials`, first emitted token tallied against the
/// target's `p` at `prefix` (computed from the target alone).
///
/// # Errors
/// Engine errors; [`SpecError::Config`] for greedy settings.
pub fn sampling_check<T: Engine + ?Sized>(
    target: &mut T,
    drafter: &mut dyn Drafter,
    prefix: &[TokenId],
    k: usize,
    sampling: SamplingParams,
    trials: usize,
    seed: u64,
) -> Result<SamplingCheck, SpecError> {
    if sampling.is_greedy() || trials == 0 {
        return Err(SpecError::Config(
            "the sampling check needs temperature > 0 and trials > 0".into(),
        ));
    }
    let n_t = target.n_vocab();
    let n_shared = drafter.n_vocab().map_or(n_t, |d| d.min(n_t));
    if prefix.is_empty() {
        return Err(SpecError::Config("empty prefix".into()));
    }
    // p as the loop sees it: prefix but the last token prefilled, the last decoded alone.
    target.kv_clear();
    let n = prefix.len();
    target.prefill(&prefix[..n - 1], 0, 0, false)?;
    target.decode_one(prefix[n - 1], (n - 1) as u32, 0)?;
    let logits = target.logits(0)?;
    let p = sampling.distribution(&logits[..n_shared.min(logits.len())]);
    let mut counts = vec![0u64; p.len()];
    let mut session = SpecSession::for_target(target);
    let mut stats = SpecStats::default();
    let mut n_first_rejected = 0u64;
    for t in 0..trials {
        let cfg = SpecConfig {
            k,
            max_new: k + 1,
            sampling,
            seed: seed.wrapping_add(t as u64),
            max_iterations: 1,
        };
        let out = session.generate(target, drafter, prefix, &cfg)?;
        n_first_rejected += out.stats.accept_hist.first().copied().unwrap_or(0)
            * (out.stats.n_rejections > 0 && out.stats.n_drafted > 0) as u64;
        stats.merge(&out.stats);
        if let Some(&first) = out.tokens.first()
            && let Some(c) = counts.get_mut(first as usize)
        {
            *c += 1;
        }
    }
    let ChiSquare {
        n_bins,
        df,
        chi2,
        tv,
        tv_expected_max: tvb,
    } = chi_square(&p, &counts);
    let crit = chi2_crit_1e3(df);
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&a, &b| p[b].total_cmp(&p[a]));
    let top = order
        .iter()
        .take(5)
        .map(|&i| (i as TokenId, p[i], counts[i] as f64 / trials as f64))
        .collect();
    Ok(SamplingCheck {
        drafter_key: drafter.key(),
        k,
        sampling,
        n_prefix_tokens: prefix.len(),
        trials,
        n_bins,
        df,
        chi2,
        chi2_crit: crit,
        p_value: (df > 0).then(|| chi2_sf(chi2, df)),
        tv,
        tv_expected_max: tvb,
        acceptance_rate: stats.acceptance_rate(),
        alpha_hat: stats.alpha_hat(),
        n_first_rejected,
        passed: df == 0 || chi2 < crit,
        top,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::speculative::mock::Mock;

    #[test]
    fn wilson_hilferty_matches_tables() {
        // χ²₀.₉₉₉ quantiles (standard tables): df 1 10.828, df 10 29.588, df 50 86.661.
        assert!(
            (chi2_crit_1e3(10) - 29.588).abs() / 29.588 < 0.01,
            "{}",
            chi2_crit_1e3(10)
        );
        assert!((chi2_crit_1e3(50) - 86.661).abs() / 86.661 < 0.005);
    }

    #[test]
    fn chi2_p_values_match_closed_forms_and_tables() {
        // df = 2: Q = e^(−x/2) exactly.
        for x in [0.1, 1.0, 4.083_333, 13.8155, 40.0] {
            let want = (-x / 2.0f64).exp();
            assert!(
                (chi2_sf(x, 2) - want).abs() < 1e-12 * want.max(1e-300),
                "x {x}"
            );
        }
        // df = 1: erfc(√(x/2)); χ²₀.₉₅ = 3.841459 and χ²₀.₉₉₉ = 10.827566 (tables).
        assert!((chi2_sf(3.841_459, 1) - 0.05).abs() < 1e-6);
        assert!((chi2_sf(10.827_566, 1) - 1e-3).abs() < 1e-8);
        // df 10 and 50 at their 10⁻³ quantiles (29.588, 86.661) and df 5 at its median 4.35146.
        assert!((chi2_sf(29.588_298, 10) - 1e-3).abs() < 1e-6);
        assert!((chi2_sf(86.660_8, 50) - 1e-3).abs() < 1e-5);
        assert!((chi2_sf(4.351_460, 5) - 0.5).abs() < 1e-6);
        assert_eq!(chi2_sf(0.0, 3), 1.0);
    }

    #[test]
    fn chi_square_by_hand() {
        // p = (.5,.3,.2), n = 100, counts (60, 25, 15):
        // χ² = 100/50 + 25/30 + 25/20 = 2 + 0.8333 + 1.25 = 4.0833; TV = (.1+.05+.05)/2 = .1.
        let ChiSquare {
            n_bins: bins,
            df,
            chi2,
            tv,
            ..
        } = chi_square(&[0.5, 0.3, 0.2], &[60, 25, 15]);
        assert_eq!((bins, df), (3, 2));
        assert!((chi2 - 4.083333).abs() < 1e-5 && (tv - 0.1).abs() < 1e-12);
        // Small cells are pooled: .01 and .01 at n = 100 (expected 1 each) → one bin.
        let bins = chi_square(&[0.49, 0.49, 0.01, 0.01], &[50, 48, 1, 1]).n_bins;
        assert_eq!(bins, 3);
    }

    fn tokenized(n: usize) -> Vec<TokenizedPrompt> {
        (0..n)
            .map(|i| TokenizedPrompt {
                id: format!("p{i}"),
                category: Category::Code,
                format: Format::Raw,
                tokens: (0..(2 + i))
                    .map(|j| ((i * 5 + j * 11) % 30) as TokenId)
                    .collect(),
            })
            .collect()
    }

    #[test]
    fn the_gate_stops_before_the_next_prompt_once_cancelled() {
        let mut t = Mock::new(30, 4.0);
        let plan = GatePlan {
            ks: vec![2],
            drafters: vec![DrafterKind::Ngram],
            max_new: 8,
            ngram: Ngram::default(),
            tie_tolerance: 0.0,
            tie_measured: false,
        };
        let stop = AtomicBool::new(false);
        let mut seen = Vec::new();
        let r = greedy_gate::<_, Mock>(
            &mut t,
            None,
            &tokenized(5),
            &plan,
            &mut |i, _, id| {
                seen.push(id.to_string());
                if i == 1 {
                    stop.store(true, Ordering::Relaxed);
                }
            },
            &stop,
        );
        assert!(matches!(r, Err(SpecError::Cancelled)), "{r:?}");
        assert_eq!(seen, ["p0", "p1"]);
    }

    #[test]
    fn the_gate_passes_a_correct_loop_and_counts_n_of_n() {
        let mut t = Mock::new(30, 4.0);
        let mut dm = DraftModel::new(
            {
                let mut m = Mock::new(30, 4.0);
                m.noise = 1.0;
                m
            },
            "draft:mock".into(),
        );
        let plan = GatePlan {
            ks: vec![1, 4, 8],
            drafters: vec![DrafterKind::DraftModel, DrafterKind::Ngram],
            max_new: 24,
            ngram: Ngram::default(),
            tie_tolerance: 0.0,
            tie_measured: false,
        };
        let mut seen = 0;
        let rows = greedy_gate(
            &mut t,
            Some(&mut dm),
            &tokenized(9),
            &plan,
            &mut |_, _, _| seen += 1,
            &AtomicBool::new(false),
        )
        .unwrap();
        assert_eq!(seen, 9);
        assert_eq!(rows.len(), 6);
        for r in &rows {
            assert!(r.passed(), "{}", r.line());
            assert_eq!((r.n_identical, r.n_prompts), (9, 9));
            assert!(r.line().contains("9/9 identical"), "{}", r.line());
            // The line says how often the draft was right where it was tested.
            let a = r.stats.alpha_hat().unwrap();
            let named = format!(
                "; α̂ {a:.3} ({} accepted of {} tested, ",
                r.stats.n_accepted,
                r.stats.n_accepted + r.stats.n_rejections
            );
            assert!(r.line().contains(&named), "{}", r.line());
        }
    }

    /// A broken drafter wrapper that forgets to roll the target back is impossible
    /// to build from outside; instead, show the gate *detects* a wrong output: a
    /// target whose greedy choice differs between single and batched passes.
    #[test]
    fn the_gate_reports_the_first_difference() {
        let mut t = crate::experiments::speculative::mock::Diverging(Mock::new(30, 4.0));
        let plan = GatePlan {
            ks: vec![2],
            drafters: vec![DrafterKind::DraftModel],
            max_new: 16,
            ngram: Ngram::default(),
            tie_tolerance: 0.0,
            tie_measured: false,
        };
        let mut dm = DraftModel::new(Mock::new(30, 4.0), "draft:mock".into());
        let prompts = tokenized(3);
        let rows = greedy_gate(
            &mut t,
            Some(&mut dm),
            &prompts,
            &plan,
            &mut |_, _, _| {},
            &AtomicBool::new(false),
        )
        .unwrap();
        let r = &rows[0];
        assert!(!r.passed());
        assert_eq!(r.n_identical, 0);
        let d = r.first_diff.as_ref().unwrap();
        assert_eq!(d.prompt_id, "p0");
        assert_eq!(d.position, 0, "the first verify pass is batched");
        assert_eq!(d.got, Some(0));
        assert!(
            r.line()
                .contains("0/3 identical; first difference: prompt p0 at generated position 0")
        );
    }

    #[test]
    fn near_ties_pass_only_within_the_tolerance_and_a_real_divergence_never() {
        // Batched passes raise each row's runner-up 1e-4 logits above its argmax.
        let flipping = || {
            let mut m = Mock::new(30, 4.0);
            m.batched_flip = Some(1e-4);
            m
        };
        // One draft-model gate at k = 3 over 3 prompts, at the given tolerance.
        fn gate<T: Engine>(target: &mut T, tolerance: f32) -> GateRow {
            let mut dm = DraftModel::new(Mock::new(30, 4.0), "draft:mock".into());
            let plan = GatePlan {
                ks: vec![3],
                drafters: vec![DrafterKind::DraftModel],
                max_new: 16,
                ngram: Ngram::default(),
                tie_tolerance: tolerance,
                tie_measured: false,
            };
            greedy_gate(
                target,
                Some(&mut dm),
                &tokenized(3),
                &plan,
                &mut |_, _, _| {},
                &AtomicBool::new(false),
            )
            .unwrap()
            .remove(0)
        }
        for tolerance in [0.0, 5e-5] {
            let r = gate(&mut flipping(), tolerance);
            assert!(!r.passed(), "tolerance {tolerance}: {}", r.line());
            assert_eq!(r.stats.n_tie_breaks, 0);
        }
        let r = gate(&mut flipping(), 1e-3);
        assert!(r.passed(), "{}", r.line());
        assert!(r.stats.n_tie_breaks > 0);
        assert!((r.stats.tie_gap_max - 1e-4).abs() < 1e-5);
        assert!(
            r.line().contains("3/3 identical; ")
                && r.line().contains(" near-ties of 48 emitted tokens")
                && r.line().contains("at most 9.99"),
            "{}",
            r.line()
        );
        // A batched pass that moves the argmax by 100 logits fails at any such tolerance.
        let r = gate(
            &mut crate::experiments::speculative::mock::Diverging(Mock::new(30, 4.0)),
            1.0,
        );
        assert_eq!(
            (r.n_identical, r.stats.n_tie_breaks),
            (0, 0),
            "{}",
            r.line()
        );
    }

    #[test]
    fn a_tolerance_comes_from_the_measured_batch_shape_gap() {
        fn plan(tolerance: f32, measured: bool) -> GatePlan {
            GatePlan {
                ks: vec![3],
                drafters: vec![DrafterKind::DraftModel],
                max_new: 16,
                ngram: Ngram::default(),
                tie_tolerance: tolerance,
                tie_measured: measured,
            }
        }
        let run = |target: &mut Mock, p: &GatePlan| {
            let mut dm = DraftModel::new(Mock::new(30, 4.0), "draft:mock".into());
            greedy_gate(
                target,
                Some(&mut dm),
                &tokenized(3),
                p,
                &mut |_, _, _| {},
                &AtomicBool::new(false),
            )
        };
        // An exact engine: its gap is 0, so any tolerance above 0 is refused.
        let err = run(&mut Mock::new(30, 4.0), &plan(1e-3, false)).unwrap_err();
        assert!(
            err.to_string()
                .contains("--tie-tolerance 0.001 is more than the batch-shape gap measured at k = 3: 0.000e0 logits"),
            "{err}"
        );
        // `measured` there is token for token, and says so in the line.
        let r = run(&mut Mock::new(30, 4.0), &plan(0.0, true))
            .unwrap()
            .remove(0);
        assert!(r.passed(), "{}", r.line());
        assert_eq!((r.tie_tolerance, r.shape_gap.unwrap().max_abs), (0.0, 0.0));
        assert!(
            r.line()
                .contains("batch-shape gap 0.000e0 logits (4-row vs 1-row passes, 32 positions)"),
            "{}",
            r.line()
        );
        // A flipping engine: the tolerance is its gap, the same figure shape::measure
        // gives on the first prompt, and the near-ties pass within it.
        let flipping = || {
            let mut m = Mock::new(30, 4.0);
            m.batched_flip = Some(1e-4);
            m
        };
        let want = shape::measure(&mut flipping(), &tokenized(3)[0].tokens, 30, 16, 4, 7).unwrap();
        assert!(want.max_abs > 1e-4);
        let r = run(&mut flipping(), &plan(0.0, true)).unwrap().remove(0);
        assert_eq!(r.shape_gap, Some(want));
        assert_eq!(r.tie_tolerance, want.max_abs as f32);
        assert!(r.passed() && r.stats.n_tie_breaks > 0, "{}", r.line());
        // No tolerance asked for: nothing measured, nothing stored.
        let r = run(&mut Mock::new(30, 4.0), &plan(0.0, false))
            .unwrap()
            .remove(0);
        assert_eq!((r.shape_gap, r.tie_tolerance), (None, 0.0));
    }

    #[test]
    fn sampling_check_accepts_a_correct_loop() {
        let sp = SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
        };
        let mut t = Mock::new(8, 2.0);
        let mut dm = DraftModel::new(
            {
                let mut m = Mock::new(8, 2.0);
                m.noise = 2.0;
                m
            },
            "draft:mock".into(),
        );
        let c = sampling_check(&mut t, &mut dm, &[3, 1, 4], 3, sp, 4000, 11).unwrap();
        assert!(c.passed, "{c:?}");
        assert_eq!(c.n_bins, 8);
        assert!(c.tv < 4.0 * c.tv_expected_max, "{c:?}");
        let a = c.acceptance_rate.unwrap();
        assert!(a > 0.0 && a < 1.0, "{a}");
        let alpha = c.alpha_hat.unwrap();
        assert!(alpha > 0.0 && alpha < 1.0, "{alpha}");
        // A noisy draft is rejected at the first position in some runs: the
        // residual path was exercised; a p-value consistent with the pass.
        assert!(c.n_first_rejected > 0 && c.n_first_rejected < 4000, "{c:?}");
        assert!(c.p_value.unwrap() > 1e-3, "{c:?}");
        // A draft equal to the target never takes that path (accepted ≡ 1).
        let mut same = DraftModel::new(Mock::new(8, 2.0), "draft:same".into());
        let c = sampling_check(&mut t, &mut same, &[3, 1, 4], 3, sp, 500, 11).unwrap();
        assert_eq!((c.n_first_rejected, c.alpha_hat), (0, Some(1.0)), "{c:?}");
    }
}
