//! How far a target's logits move with the shape of the pass that computes them:
//! the measurement a greedy gate's near-tie tolerance must come from.
//!
//! A verify pass computes k + 1 rows at once; target-only decoding computes each row
//! in a pass of its own. On a GPU the two sum in another order, so the same position
//! gets slightly different logits, and a near-tie can flip ("batch-shape effect").
//! [`measure`] takes the target's greedy continuation of a prompt by 1-row passes,
//! keeps every row, then recomputes the same positions in passes of k + 1 rows
//! (chunked as the verify loop chunks them, at most `max_rows` rows a pass) and
//! reports the largest absolute logit difference over the shared vocabulary. After
//! each window the 1-row passes are run again, so every window starts from the
//! cache the reference had, and their rows are compared too: an engine that is not
//! run-to-run deterministic shows up in the same figure.
//!
//! A gate may then allow near-ties of at most that gap (`--tie-tolerance measured`),
//! and stores it with its rows.

use super::SpecError;
use crate::measure::engine::{BatchItem, Engine, TokenId, argmax};
use serde::{Deserialize, Serialize};

/// The batch-shape gap measured for one verify shape.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ShapeGap {
    /// Rows of the verify pass measured (k + 1).
    pub rows: usize,
    /// Positions whose rows were compared (each against its 1-row reference).
    pub n_positions: u64,
    /// Largest |logit difference| at any compared position and shared id.
    pub max_abs: f64,
}

/// Measures the batch-shape gap of `rows`-row verify passes on `prompt`: `n_new`
/// greedy positions after it, windows of `rows` positions (a last partial window is
/// left out), passes of at most `max_rows` rows, ids `0..n_shared` compared. Clears
/// `e`'s cache first and leaves it holding the prompt and the reference.
///
/// # Errors
/// [`SpecError::Config`] when the prompt is empty, `rows` is 0 or `n_new < rows`
/// (nothing to compare); engine errors.
pub fn measure<E: Engine + ?Sized>(
    e: &mut E,
    prompt: &[TokenId],
    n_shared: usize,
    n_new: usize,
    rows: usize,
    max_rows: usize,
) -> Result<ShapeGap, SpecError> {
    if prompt.is_empty() || rows == 0 || n_new < rows {
        return Err(SpecError::Config(format!(
            "batch-shape gap: a {}-token prompt, {rows}-row windows and {n_new} positions leave nothing to compare",
            prompt.len()
        )));
    }
    let p = prompt.len() - 1;
    e.kv_clear();
    e.prefill(&prompt[..p], 0, 0, false)?;
    // The reference: one position per pass; fed[i] is the token fed at p + i.
    let mut fed = Vec::with_capacity(n_new);
    let mut reference: Vec<Vec<f32>> = Vec::with_capacity(n_new);
    let mut x = prompt[p];
    for i in 0..n_new {
        e.decode_one(x, (p + i) as u32, 0)?;
        let row = e.logits(0)?;
        let row = &row[..n_shared.min(row.len())];
        fed.push(x);
        x = argmax(row);
        reference.push(row.to_vec());
    }
    e.synchronize();
    let max_rows = max_rows.clamp(1, e.n_batch().max(1) as usize);
    let mut gap = ShapeGap {
        rows,
        n_positions: 0,
        max_abs: 0.0,
    };
    let compare = |got: &[f32], want: &[f32], gap: &mut ShapeGap| {
        let d = got
            .iter()
            .zip(want)
            .map(|(a, b)| f64::from((a - b).abs()))
            .fold(0.0, f64::max);
        // A NaN on either side is as far apart as rows can be.
        let d = if got.iter().zip(want).any(|(a, b)| a.is_nan() != b.is_nan()) {
            f64::INFINITY
        } else {
            d
        };
        gap.max_abs = gap.max_abs.max(d);
        gap.n_positions += 1;
    };
    let mut items: Vec<BatchItem> = Vec::with_capacity(max_rows);
    for s in (0..=n_new - rows).step_by(rows) {
        let start = (p + s) as u32;
        e.kv_truncate(0, start)?;
        for (c, chunk) in fed[s..s + rows].chunks(max_rows).enumerate() {
            items.clear();
            let base = start + (c * max_rows) as u32;
            items.extend(chunk.iter().enumerate().map(|(j, &t)| BatchItem {
                token: t,
                pos: base + j as u32,
                seq: 0,
                logits: true,
            }));
            e.decode(&items)?;
            for j in 0..chunk.len() {
                let got = e.logits(j)?;
                compare(
                    &got[..n_shared.min(got.len())],
                    &reference[s + c * max_rows + j],
                    &mut gap,
                );
            }
        }
        // Back to the reference's own cache for the next window, one row a pass.
        e.kv_truncate(0, start)?;
        for j in 0..rows {
            e.decode_one(fed[s + j], start + j as u32, 0)?;
            let got = e.logits(0)?;
            compare(&got[..n_shared.min(got.len())], &reference[s + j], &mut gap);
        }
    }
    e.synchronize();
    Ok(gap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::speculative::mock::Mock;

    /// The mock's batched passes raise each row's runner-up to its argmax + `lead`:
    /// the gap is, over the compared positions, the largest `top − second + lead` of
    /// the 1-row logits there (computed here from `logits_after`, independently of
    /// the measurement's passes); 1-row passes are exact, so a plain mock gives 0.
    #[test]
    fn the_gap_is_the_largest_change_a_batched_pass_makes() {
        let prompt: Vec<TokenId> = vec![3, 1, 4, 1, 5];
        let (n_new, rows) = (12, 3);
        let mut exact = Mock::new(50, 8.0);
        let g = measure(&mut exact, &prompt, 50, n_new, rows, 7).unwrap();
        assert_eq!(g.max_abs, 0.0);
        // 4 windows of 3 rows, each compared batched and again 1-row.
        assert_eq!(g.n_positions, 24);

        let lead = 0.25f32;
        let mut flip = Mock::new(50, 8.0);
        flip.batched_flip = Some(lead);
        let g = measure(&mut flip, &prompt, 50, n_new, rows, 7).unwrap();
        let mut hist = prompt.clone();
        let mut want = 0f64;
        for _ in 0..n_new {
            let r = flip.logits_after(&hist);
            let top = argmax(&r) as usize;
            let second = (0..r.len())
                .filter(|&v| v != top)
                .map(|v| r[v])
                .fold(f32::NEG_INFINITY, f32::max);
            want = want.max(f64::from(r[top] + lead - second));
            hist.push(top as TokenId);
        }
        assert!((g.max_abs - want).abs() < 1e-6, "{} vs {want}", g.max_abs);
        assert!(g.max_abs > f64::from(lead));
        // One row per pass (max_rows 1) is the reference's own shape: no gap.
        let mut one = Mock::new(50, 8.0);
        one.batched_flip = Some(lead);
        assert_eq!(
            measure(&mut one, &prompt, 50, n_new, rows, 1)
                .unwrap()
                .max_abs,
            0.0
        );
    }

    #[test]
    fn nothing_to_compare_is_an_error() {
        let mut m = Mock::new(10, 1.0);
        assert!(measure(&mut m, &[], 10, 8, 2, 7).is_err());
        assert!(measure(&mut m, &[1], 10, 1, 2, 7).is_err());
        assert!(measure(&mut m, &[1], 10, 8, 0, 7).is_err());
    }
}
