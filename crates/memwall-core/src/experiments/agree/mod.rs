//! Engine agreement: MLX against llama.cpp on the frozen prompt set, both from the
//! same weights (an F16 GGUF: llama.cpp reads it as is, the MLX engine holds the
//! same values as f16). Per prompt: the first [`N_GEN`] greedy tokens of each
//! engine, the first position where they differ, and the cosine of the two logit
//! rows at the first generated position. The check passes when at least
//! [`MIN_IDENTICAL_FRACTION`] of prompts give identical tokens and every cosine is
//! at least [`MIN_COSINE`].
//!
//! Slice: [`greedy`] (run) → [`compare`] (record) → [`Summary`] → [`table`] (report)
//! → [`agree_job`] (the one call the CLI makes).

use crate::experiments::speculative::prompts::PromptSet;
use crate::measure::engine::{Engine, EngineError, TokenId, argmax};
use serde::Serialize;

/// Greedy tokens compared per prompt.
pub const N_GEN: usize = 32;
/// Fraction of prompts whose first [`N_GEN`] tokens must be identical.
pub const MIN_IDENTICAL_FRACTION: f64 = 0.90;
/// Least logit cosine at the first generated position.
pub const MIN_COSINE: f64 = 0.999;

/// One engine's greedy continuation of a prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Greedy {
    /// The generated tokens (stops early only at end of generation).
    pub tokens: Vec<TokenId>,
    /// Logits at the first generated position.
    pub first_logits: Vec<f32>,
}

/// Prefills `prompt` into sequence 0 of an emptied cache and decodes `n` greedy tokens.
///
/// # Errors
/// The engine's.
pub fn greedy(e: &mut dyn Engine, prompt: &[TokenId], n: usize) -> Result<Greedy, EngineError> {
    e.kv_clear();
    e.prefill(prompt, 0, 0, true)?;
    let first_logits = e.logits(0)?.to_vec();
    let mut tokens = Vec::with_capacity(n);
    let mut next = argmax(&first_logits);
    let mut pos = prompt.len() as u32;
    while tokens.len() < n {
        tokens.push(next);
        if e.is_eog(next) || tokens.len() == n {
            break;
        }
        e.decode_one(next, pos, 0)?;
        pos += 1;
        next = argmax(e.logits(0)?);
    }
    Ok(Greedy {
        tokens,
        first_logits,
    })
}

/// Cosine similarity of two rows over their common length (`0` when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut ab, mut aa, mut bb) = (0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64, y as f64);
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        0.0
    } else {
        ab / (aa.sqrt() * bb.sqrt())
    }
}

/// One prompt's comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgreeRow {
    /// Prompt id.
    pub id: String,
    /// Prompt tokens.
    pub n_prompt: usize,
    /// First index (0-based, into the generated tokens) where the engines differ;
    /// `None` when identical.
    pub first_diff: Option<usize>,
    /// Logit cosine at the first generated position.
    pub cosine: f64,
    /// llama.cpp's tokens.
    pub llama: Vec<TokenId>,
    /// MLX's tokens.
    pub mlx: Vec<TokenId>,
}

/// Compares two continuations of prompt `id`.
pub fn compare(id: &str, n_prompt: usize, llama: &Greedy, mlx: &Greedy) -> AgreeRow {
    let n = llama.tokens.len().max(mlx.tokens.len());
    let first_diff = (0..n).find(|&i| llama.tokens.get(i) != mlx.tokens.get(i));
    AgreeRow {
        id: id.into(),
        n_prompt,
        first_diff,
        cosine: cosine(&llama.first_logits, &mlx.first_logits),
        llama: llama.tokens.clone(),
        mlx: mlx.tokens.clone(),
    }
}

/// The verdict over all prompts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Prompts compared.
    pub n: usize,
    /// Prompts with identical tokens.
    pub n_identical: usize,
    /// The smallest first-position cosine.
    pub min_cosine: f64,
    /// Both thresholds met.
    pub pass: bool,
}

impl Summary {
    /// Summarizes `rows` (`pass` is false for no rows).
    pub fn of(rows: &[AgreeRow]) -> Summary {
        let n = rows.len();
        let n_identical = rows.iter().filter(|r| r.first_diff.is_none()).count();
        let min_cosine = rows.iter().map(|r| r.cosine).fold(f64::INFINITY, f64::min);
        let pass = n > 0
            && n_identical as f64 >= MIN_IDENTICAL_FRACTION * n as f64
            && min_cosine >= MIN_COSINE;
        Summary {
            n,
            n_identical,
            min_cosine: if n == 0 { f64::NAN } else { min_cosine },
            pass,
        }
    }
}

/// The Markdown table of `rows` and the summary line.
pub fn table(rows: &[AgreeRow]) -> String {
    let mut s = String::from(
        "| prompt | n_prompt | identical | first differing position | logit cosine |\n|---|---:|:---:|---:|---:|\n",
    );
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {} | {:.6} |\n",
            r.id,
            r.n_prompt,
            if r.first_diff.is_none() { "yes" } else { "no" },
            r.first_diff.map_or("—".into(), |p| p.to_string()),
            r.cosine
        );
    }
    let sm = Summary::of(rows);
    let n_gen = rows
        .iter()
        .map(|r| r.llama.len().max(r.mlx.len()))
        .max()
        .unwrap_or(0);
    s += &format!(
        "\n{}/{} prompts identical over up to {n_gen} tokens (need ≥ {:.0} %), min cosine {:.6} (need ≥ {MIN_COSINE}): {}\n",
        sm.n_identical,
        sm.n,
        MIN_IDENTICAL_FRACTION * 100.0,
        sm.min_cosine,
        if sm.pass { "PASS" } else { "FAIL" }
    );
    s
}

/// Runs both engines over `prompts` (tokenized by the llama.cpp engine; the MLX
/// engine shares its vocabulary), `limit` prompts at most.
///
/// # Errors
/// An engine's error, naming the prompt.
pub fn run(
    llama: &mut dyn Engine,
    mlx: &mut dyn Engine,
    prompts: &PromptSet,
    limit: usize,
    n_gen: usize,
    mut progress: impl FnMut(&AgreeRow),
) -> Result<Vec<AgreeRow>, EngineError> {
    let mut rows = Vec::new();
    for p in prompts.prompts.iter().take(limit) {
        let toks = p
            .tokens(&*llama)
            .map_err(|e| EngineError::Tokenize(format!("prompt {}: {e}", p.id)))?;
        let a = greedy(llama, &toks, n_gen)?;
        let b = greedy(mlx, &toks, n_gen)?;
        let row = compare(&p.id, toks.len(), &a, &b);
        progress(&row);
        rows.push(row);
    }
    Ok(rows)
}

/// The agreement job: loads `model` (an F16 GGUF for the check proper) in
/// llama.cpp (CPU, no repacking) and in MLX at f16, and compares them on the
/// built-in prompts (`limit` of them).
///
/// # Errors
/// A load or engine error naming the file or prompt.
#[cfg(feature = "mlx")]
pub fn agree_job(
    model: &std::path::Path,
    limit: usize,
    progress: impl FnMut(&AgreeRow),
) -> Result<Vec<AgreeRow>, EngineError> {
    use crate::measure::engine::{EngineConfig, EngineKind, open};
    let prompts = PromptSet::builtin().map_err(|e| EngineError::Setup(e.to_string()))?;
    let cfg = EngineConfig {
        n_ctx: 2048,
        n_batch: 512,
        n_gpu_layers: 0,
        repack: false,
        ..Default::default()
    };
    let mut llama = open(EngineKind::Llama, model, &cfg)?;
    let mut mlx = open(EngineKind::MlxF16, model, &cfg)?;
    run(&mut llama, &mut mlx, &prompts, limit, N_GEN, progress)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_matches_hand_values() {
        // (1,0)·(1,1) / (1 · √2) = 0.70710678
        assert!((cosine(&[1.0, 0.0], &[1.0, 1.0]) - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-12);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
        assert!((cosine(&[2.0, -3.0], &[2.0, -3.0]) - 1.0).abs() < 1e-12);
    }

    fn g(t: &[TokenId], l: &[f32]) -> Greedy {
        Greedy {
            tokens: t.to_vec(),
            first_logits: l.to_vec(),
        }
    }

    #[test]
    fn first_difference_and_verdict() {
        let a = g(&[1, 2, 3], &[1.0, 0.0]);
        let same = compare("p", 5, &a, &g(&[1, 2, 3], &[1.0, 0.0]));
        assert_eq!(same.first_diff, None);
        let diff = compare("q", 5, &a, &g(&[1, 9, 3], &[1.0, 0.0]));
        assert_eq!(diff.first_diff, Some(1));
        // A shorter continuation (stopped at end of generation) differs where it ends.
        let short = compare("r", 5, &a, &g(&[1, 2], &[1.0, 0.0]));
        assert_eq!(short.first_diff, Some(2));
        // 9 of 10 identical passes; 8 of 10 fails; one low cosine fails.
        let mut rows = vec![same.clone(); 9];
        rows.push(diff.clone());
        assert!(Summary::of(&rows).pass);
        rows[0] = diff.clone();
        assert!(!Summary::of(&rows).pass);
        let mut low = same.clone();
        low.cosine = 0.99;
        assert!(!Summary::of(&[same, low]).pass);
        assert!(!Summary::of(&[]).pass);
    }
}
