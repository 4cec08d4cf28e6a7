//! Vocabulary mismatch between draft and target.
//!
//! Two models with the same tokenizer can still have logit rows of different
//! widths: Qwen2.5-7B has 152064 logits, Qwen2.5-0.5B 151936, for a 151665-entry
//! tokenizer (the rest is padding). The verifier needs `p` and `q` on one support,
//! so both rows are truncated to the shared prefix `0..min(n_target, n_draft)` and
//! renormalized there. That changes the distributions by the mass that was cut
//! off, so it is *measured* at every step ([`discarded_mass`]) and summarized
//! ([`MassStats`]: max and mean) instead of assumed negligible. With equal widths
//! nothing is cut and the recorded mass is exactly 0.

use crate::measure::engine::TokenEntry;
use serde::{Deserialize, Serialize};

/// Compares a draft's vocabulary with its target's over the whole shared id range
/// `0..min(n_target, n_draft)`: each id's stored text, rendered piece, attribute
/// bits (control, user-defined, byte, …) and end-of-generation flag must agree, or
/// a drafted id would stand for another token. A draft with more or fewer ids is
/// not refused for that (logit rows are cut to the shared support and the cut mass
/// measured, [`discarded_mass`]).
///
/// # Errors
/// The first differing id and what differs, e.g. ``token 30000: target `}/{`,
/// draft `~Q~` ``.
pub fn compare_vocabularies(target: &[TokenEntry], draft: &[TokenEntry]) -> Result<(), String> {
    let show = |b: &[u8]| format!("`{}`", String::from_utf8_lossy(b).escape_debug());
    for (id, (t, d)) in target.iter().zip(draft).enumerate() {
        if t == d {
            continue;
        }
        let ends = |e: bool| {
            if e {
                "ends generation"
            } else {
                "does not end generation"
            }
        };
        let what = if t.text != d.text {
            format!("target {}, draft {}", show(&t.text), show(&d.text))
        } else if t.attr != d.attr {
            format!(
                "text {}: attributes {:#x} in the target, {:#x} in the draft (LLAMA_TOKEN_ATTR_* bits: 4 = normal, 8 = control, 16 = user-defined, 32 = byte)",
                show(&t.text),
                t.attr,
                d.attr
            )
        } else if t.eog != d.eog {
            format!(
                "text {}: {} in the target, {} in the draft",
                show(&t.text),
                ends(t.eog),
                ends(d.eog)
            )
        } else {
            format!(
                "text {} decodes to {} in the target, {} in the draft",
                show(&t.text),
                show(&t.piece),
                show(&d.piece)
            )
        };
        return Err(format!("token {id}: {what}"));
    }
    Ok(())
}

/// Probability mass (softmax at `temperature`, 1 when greedy) of `logits[n_shared..]`:
/// what truncating the row to the shared support throws away. 0 when
/// `n_shared >= logits.len()`.
pub fn discarded_mass(logits: &[f32], n_shared: usize, temperature: f32) -> f64 {
    if n_shared >= logits.len() {
        return 0.0;
    }
    let max_shared = logits[..n_shared]
        .iter()
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    discarded_mass_with_max(logits, n_shared, temperature, max_shared)
}

/// [`discarded_mass`] when the maximum of the shared part `logits[..n_shared]` is
/// already known (the greedy pick found it, [`super::row::argmax_max`]): the same
/// value, one pass over the row fewer. `max_shared` must be that maximum (NaN
/// entries skipped; a NaN `max_shared` is recomputed).
pub fn discarded_mass_with_max(
    logits: &[f32],
    n_shared: usize,
    temperature: f32,
    max_shared: f32,
) -> f64 {
    if n_shared >= logits.len() {
        return 0.0;
    }
    let t = if temperature > 0.0 { temperature } else { 1.0 };
    // A NaN first entry makes the pick's maximum NaN; f32::max skips NaN.
    let max_shared = if max_shared.is_nan() {
        logits[..n_shared]
            .iter()
            .copied()
            .fold(f32::NEG_INFINITY, f32::max)
    } else {
        max_shared
    };
    let max = logits[n_shared..]
        .iter()
        .copied()
        .fold(max_shared, f32::max);
    let cut = sum_exp(&logits[n_shared..], max, 1.0 / t);
    let all = sum_exp(&logits[..n_shared], max, 1.0 / t) + cut;
    cut / all
}

/// Σ exp((x − max) · inv_t): blocks of 512 summed in 8 f32 lanes (which the
/// compiler vectorizes), the blocks in f64. It runs on every verified row inside
/// the timed loop: a scalar f64 `exp` over a 152k-wide row took about 1 ms, as
/// long as a 14B target's whole forward pass on an H200 takes per row.
fn sum_exp(xs: &[f32], max: f32, inv_t: f32) -> f64 {
    let mut total = 0f64;
    for block in xs.chunks(512) {
        let mut acc = [0f32; 8];
        let mut lanes = block.chunks_exact(8);
        for c in &mut lanes {
            for i in 0..8 {
                acc[i] += exp_neg((c[i] - max) * inv_t);
            }
        }
        let mut s: f32 = acc.iter().sum();
        for &x in lanes.remainder() {
            s += exp_neg((x - max) * inv_t);
        }
        total += f64::from(s);
    }
    total
}

/// `exp(x)` for `x ≤ 0`, branch-free (Cephes' `expf`: Cody–Waite reduction by ln 2
/// and a degree-5 polynomial, within 2 ulp); `exp(−87)` below −87 (and for NaN).
///
/// Written so that the 8-lane loop in [`sum_exp`] compiles to vector code: the clamp
/// is a compare-and-select (`f32::max`'s NaN rule is not), and `2ⁿ` comes from the
/// bits of the rounding sum itself (`1.5 · 2²³ + n` holds `n` in its low mantissa
/// bits) instead of a saturating float-to-int cast. On an H100 host the old form
/// took about 0.4 ms per 152k-wide row, 2.6 ms of a 28 ms iteration at k = 6
/// (results/h100/spec-call2); this one is about 3× faster, with identical values.
#[inline(always)]
fn exp_neg(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    // 1.5 · 2²³: adding and subtracting it rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let x = if x > -87.0 { x } else { -87.0 };
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let r = x - n * C1 - n * C2;
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 5e-1;
    let e = p * r * r + r + 1.0;
    // t's bits: exponent of 2²³ and, in the low 22 mantissa bits, 2²² + n (n in
    // −126..=0 here). Shifting (bits + 127) left by 23 keeps (n + 127) mod 2⁹ as
    // the new exponent field: 2ⁿ.
    e * f32::from_bits(t.to_bits().wrapping_add(127) << 23)
}

/// Running max and mean of the discarded mass over steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MassStats {
    /// Rows measured.
    pub n: u64,
    /// Sum of the discarded masses.
    pub sum: f64,
    /// Largest discarded mass.
    pub max: f64,
}

impl MassStats {
    /// Records one row's discarded mass.
    pub fn add(&mut self, m: f64) {
        self.n += 1;
        self.sum += m;
        self.max = self.max.max(m);
    }
    /// Mean discarded mass (0 when nothing was recorded).
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum / self.n as f64
        }
    }
    /// Merges another summary.
    pub fn merge(&mut self, o: &MassStats) {
        self.n += o.n;
        self.sum += o.sum;
        self.max = self.max.max(o.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference form (f32::max clamp, float-to-int cast for 2ⁿ) that
    /// [`exp_neg`] replaced; both must agree bit for bit on every input ≤ 0.
    fn exp_neg_reference(x: f32) -> f32 {
        const LOG2E: f32 = std::f32::consts::LOG2_E;
        let x = x.max(-87.0);
        let n = (x * LOG2E + 12_582_912.0) - 12_582_912.0;
        let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
        let p = 1.987_569_1e-4_f32;
        let p = p * r + 1.398_199_9e-3;
        let p = p * r + 8.333_452e-3;
        let p = p * r + 4.166_579_6e-2;
        let p = p * r + 1.666_666_5e-1;
        let p = p * r + 5e-1;
        let e = p * r * r + r + 1.0;
        e * f32::from_bits((((n as i32) + 127) as u32) << 23)
    }

    #[test]
    fn exp_neg_matches_the_reference_form_and_libm() {
        // Every 1/1024 step of 0 … −100, the clamp edge, −0, −∞ and NaN.
        let mut xs: Vec<f32> = (0..=102_400).map(|i| -(i as f32) / 1024.0).collect();
        xs.extend([-0.0, -86.999, -87.0, -87.001, f32::NEG_INFINITY, f32::NAN]);
        for x in xs {
            let (a, b) = (exp_neg(x), exp_neg_reference(x));
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "exp_neg({x}) = {a}, reference {b}"
            );
            if x >= -87.0 {
                let e = f64::from(x).exp();
                assert!(
                    (f64::from(a) - e).abs() <= 4.0 * e * f64::from(f32::EPSILON),
                    "exp_neg({x}) = {a}, exp = {e}"
                );
            }
        }
    }

    #[test]
    fn discarded_mass_is_the_softmax_tail() {
        // logits ln(1), ln(2), ln(3), ln(4): cutting the last two drops 7/10.
        let l = [1.0f32.ln(), 2.0f32.ln(), 3.0f32.ln(), 4.0f32.ln()];
        assert!((discarded_mass(&l, 2, 1.0) - 0.7).abs() < 1e-6);
        assert!(
            (discarded_mass(&l, 2, 0.0) - 0.7).abs() < 1e-6,
            "greedy measures at T=1"
        );
        // T = 2: weights 1, √2, √3, 2.
        let w = [1.0, 2f64.sqrt(), 3f64.sqrt(), 2.0];
        let want = (w[2] + w[3]) / w.iter().sum::<f64>();
        assert!((discarded_mass(&l, 2, 2.0) - want).abs() < 1e-6);
        assert_eq!(discarded_mass(&l, 4, 1.0), 0.0);
        assert_eq!(discarded_mass(&l, 9, 1.0), 0.0);
    }

    #[test]
    fn the_fast_sum_matches_f64_exp_on_a_wide_row() {
        // A 152064-wide row of logits in [−30, 10) from a fixed LCG, and the exact
        // f64 reference: relative error below 1e-5 at T = 1 and 0.7.
        let mut z = 12345u64;
        let row: Vec<f32> = (0..152_064)
            .map(|_| {
                z = z
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((z >> 40) as f32 / (1u64 << 24) as f32) * 40.0 - 30.0
            })
            .collect();
        for t in [1.0f32, 0.7] {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
            let e: Vec<f64> = row
                .iter()
                .map(|&l| ((l as f64 - max) / t as f64).exp())
                .collect();
            let want = e[151_936..].iter().sum::<f64>() / e.iter().sum::<f64>();
            let got = discarded_mass(&row, 151_936, t);
            assert!((got - want).abs() < 1e-5 * want, "T {t}: {got} vs {want}");
        }
        // exp itself, from 0 down to underflow.
        for i in 0..2000 {
            let x = -(i as f32) * 0.05;
            let want = (x as f64).exp();
            let got = exp_neg(x) as f64;
            assert!(
                (got - want).abs() <= 3e-7 * want + 1e-37,
                "exp({x}) = {got}, want {want}"
            );
        }
    }

    /// A 40,000-entry vocabulary with special tokens at the top.
    fn table() -> Vec<TokenEntry> {
        (0..40_000u32)
            .map(|i| {
                let special = i >= 39_990;
                let text = if i == 30_000 {
                    b"}/{".to_vec()
                } else if special {
                    format!("<|s{i}|>").into_bytes()
                } else {
                    format!("t{i}").into_bytes()
                };
                TokenEntry {
                    piece: text.clone(),
                    text,
                    attr: if special { 8 } else { 4 },
                    eog: i == 39_999,
                }
            })
            .collect()
    }

    #[test]
    fn vocabularies_are_compared_over_the_whole_shared_range() {
        let t = table();
        assert_eq!(compare_vocabularies(&t, &t.clone()), Ok(()));
        // A draft with fewer ids (or more) is compared on the ids both have.
        assert_eq!(compare_vocabularies(&t, &t[..35_000]), Ok(()));
        // The planted change, far past the first 1,000 ids.
        let mut d = t.clone();
        d[30_000].text = b"~Q~".to_vec();
        d[30_000].piece = b"~Q~".to_vec();
        assert_eq!(
            compare_vocabularies(&t, &d),
            Err("token 30000: target `}/{`, draft `~Q~`".into())
        );
        // The first difference is named, not a later one.
        d[35_000].attr = 8;
        assert!(
            compare_vocabularies(&t, &d)
                .unwrap_err()
                .starts_with("token 30000: ")
        );
        // A special-token flag alone: a normal token turned control.
        let mut d = t.clone();
        d[35_000].attr = 8;
        assert_eq!(
            compare_vocabularies(&t, &d),
            Err("token 35000: text `t35000`: attributes 0x4 in the target, 0x8 in the draft (LLAMA_TOKEN_ATTR_* bits: 4 = normal, 8 = control, 16 = user-defined, 32 = byte)".into())
        );
        // The end-of-generation flag alone.
        let mut d = t.clone();
        d[39_999].eog = false;
        assert_eq!(
            compare_vocabularies(&t, &d),
            Err("token 39999: text `<|s39999|>`: ends generation in the target, does not end generation in the draft".into())
        );
        // The same text rendering differently.
        let mut d = t.clone();
        d[12_345].piece = b" x".to_vec();
        assert_eq!(
            compare_vocabularies(&t, &d),
            Err(
                "token 12345: text `t12345` decodes to `t12345` in the target, ` x` in the draft"
                    .into()
            )
        );
    }

    #[test]
    fn mass_stats() {
        let mut m = MassStats::default();
        assert_eq!(m.mean(), 0.0);
        m.add(0.1);
        m.add(0.3);
        assert!((m.mean() - 0.2).abs() < 1e-12);
        assert_eq!(m.max, 0.3);
    }
}
