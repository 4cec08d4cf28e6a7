//! Perplexity and KL divergence on a fixed text slice, with llama-perplexity's
//! semantics (llama.cpp `tools/perplexity/perplexity.cpp`, `perplexity()` and
//! `kl_divergence()`):
//!
//! - the whole file is tokenized once (BOS added where the model adds one);
//! - it is cut into consecutive windows of `n_ctx` tokens; window `i` is
//!   tokens `[i·n_ctx, (i+1)·n_ctx)`; only the first `n_chunks` windows are used
//!   (`--chunks N`), so the slice is "the first `n_chunks × n_ctx` tokens";
//! - each window is evaluated from an empty KV cache, its first token replaced by
//!   BOS when the model adds one;
//! - the **second half** is scored: the logits at positions `n_ctx/2 … n_ctx−2`
//!   predict tokens `n_ctx/2+1 … n_ctx−1`, so each window scores `n_ctx − 1 − n_ctx/2`
//!   tokens;
//! - PPL = `exp(mean NLL)`, uncertainty `PPL × stderr(NLL)`.
//!
//! KL divergence runs a reference engine **in lockstep** on the same windows
//! (no logits file): per scored token, `KLD = Σ_v p_ref(v) (ln p_ref(v) − ln p(v))`
//! over the whole vocabulary in f64, "same top" = equal argmax, `Δp` = the
//! arm's minus the reference's probability of the actual next token. llama.cpp's
//! KLD mode instead reads the reference from a file of 16-bit-quantized
//! log-probabilities and skips reference probabilities below e^−16; ours is exact,
//! so its figures can differ from llama.cpp's in the last digits.

use super::{Estimate, EvalError, LogSumExp, log_sum_exp, mean_and_uncertainty};
use crate::measure::engine::{BatchItem, Engine, TokenId, argmax};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};

/// Settings of a perplexity measurement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PplConfig {
    /// Dataset name (`wiki`, `code`, `c4`).
    pub dataset: String,
    /// Window (context) length in tokens (llama-perplexity `-c`).
    pub n_ctx: u32,
    /// Windows to score (llama-perplexity `--chunks`); 0 = every whole window.
    pub n_chunks: u32,
}

/// KL-divergence statistics vs a reference, the figures llama-perplexity's KLD
/// mode prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KldStats {
    /// Tokens compared.
    pub n: u64,
    /// Mean KLD (nats).
    pub mean: f64,
    /// Standard error of the mean.
    pub mean_unc: f64,
    /// Median KLD.
    pub median: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest per-token KLD.
    pub max: f64,
    /// Same top token, percent.
    pub same_top_pct: f64,
    /// Its binomial standard error, percent.
    pub same_top_unc_pct: f64,
    /// RMS of Δp (arm − reference probability of the actual token), percent.
    pub rms_dp_pct: f64,
    /// Reference perplexity over the same tokens.
    pub ppl_ref: f64,
    /// Mean ln(PPL/PPL_ref).
    pub ln_ppl_ratio: f64,
}

/// A finished perplexity (and optional KLD) measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PplResult {
    /// The settings the evaluation ran with.
    pub config: PplConfig,
    /// sha256 of the text file.
    pub text_sha256: String,
    /// Tokens in the whole file.
    pub n_tokens_file: u64,
    /// Windows scored.
    pub n_chunks: u32,
    /// Tokens scored.
    pub n_scored: u64,
    /// Perplexity, exp(mean NLL per scored token).
    pub ppl: f64,
    /// Its uncertainty (PPL × stderr of the NLL), llama-perplexity's `+/-`.
    pub ppl_unc: f64,
    /// Mean negative log-likelihood (nats/token).
    pub nll_mean: f64,
    /// KLD vs the reference, when one was given.
    pub kld: Option<KldStats>,
    /// Wall time, ns.
    pub elapsed_ns: u64,
}

/// Tokens of the first `n_chunks` windows (all whole windows when 0).
///
/// # Errors
/// [`EvalError::Config`] when the text is shorter than two windows (llama-perplexity's
/// rule) or than the windows asked for.
pub fn windows(tokens: &[TokenId], cfg: &PplConfig) -> Result<u32, EvalError> {
    let n_ctx = cfg.n_ctx as usize;
    if n_ctx < 8 {
        return Err(EvalError::Config(format!(
            "--ppl-ctx {} is too small (at least 8)",
            cfg.n_ctx
        )));
    }
    if tokens.len() < 2 * n_ctx {
        return Err(EvalError::Config(format!(
            "the text tokenizes to {} tokens; a context of {n_ctx} needs at least {}",
            tokens.len(),
            2 * n_ctx
        )));
    }
    let max = (tokens.len() / n_ctx) as u32;
    if cfg.n_chunks > max {
        return Err(EvalError::Config(format!(
            "--ppl-chunks {}: the text has only {max} windows of {n_ctx}",
            cfg.n_chunks
        )));
    }
    Ok(if cfg.n_chunks == 0 { max } else { cfg.n_chunks })
}

/// Evaluates window `w` on `e`: one batch with logits from position `n_ctx/2` on.
fn eval_window<E: Engine>(
    e: &mut E,
    tokens: &[TokenId],
    w: usize,
    n_ctx: usize,
) -> Result<(), EvalError> {
    let first = n_ctx / 2;
    let start = w * n_ctx;
    let bos = e.bos();
    let items: Vec<BatchItem> = (0..n_ctx)
        .map(|k| BatchItem {
            token: if k == 0 {
                bos.unwrap_or(tokens[start])
            } else {
                tokens[start + k]
            },
            pos: k as u32,
            seq: 0,
            logits: k >= first,
        })
        .collect();
    e.kv_clear();
    e.decode(&items)?;
    e.synchronize();
    Ok(())
}

/// Per-token figures of one scored position.
#[derive(Debug, Clone, Copy, Default)]
struct TokStat {
    nll: f64,
    nll_ref: f64,
    kld: f64,
    same_top: bool,
    dp: f64,
}

fn score(row: &[f32], rref: Option<&[f32]>, tok: usize) -> TokStat {
    let LogSumExp { max: m, ln_sum: l } = log_sum_exp(row);
    let nll = (m as f64 + l) - row[tok] as f64;
    let Some(r) = rref else {
        return TokStat {
            nll,
            ..Default::default()
        };
    };
    let LogSumExp {
        max: mr,
        ln_sum: lr,
    } = log_sum_exp(r);
    let (zr, zq) = (mr as f64 + lr, m as f64 + l);
    let mut kld = 0.0f64;
    for (&rv, &qv) in r.iter().zip(row) {
        let lp_ref = rv as f64 - zr;
        let lp = qv as f64 - zq;
        kld += lp_ref.exp() * (lp_ref - lp);
    }
    let nll_ref = zr - r[tok] as f64;
    TokStat {
        nll,
        nll_ref,
        kld: kld.max(0.0),
        same_top: argmax(row) == argmax(r),
        dp: (-nll).exp() - (-nll_ref).exp(),
    }
}

fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    // llama-perplexity's linear interpolation.
    if sorted.is_empty() {
        return f64::NAN;
    }
    let p = fraction * (sorted.len() - 1) as f64;
    let ip = p as usize;
    let f = p - ip as f64;
    (1.0 - f) * sorted[ip] + f * sorted[(ip + 1).min(sorted.len() - 1)]
}

/// Measures perplexity of `arm` on `tokens` (the tokenized file), and, with
/// `reference`, the KL divergence of `arm` from it on the same tokens in
/// lockstep. Both engines need `n_batch ≥ n_ctx` and `n_ctx ≥ cfg.n_ctx`.
/// `on_window(done, total)` reports progress.
///
/// # Errors
/// [`EvalError`] for bad settings, engine failures or cancellation.
pub fn perplexity<E: Engine, R: Engine>(
    arm: &mut E,
    mut reference: Option<&mut R>,
    tokens: &[TokenId],
    text_sha256: &str,
    cfg: &PplConfig,
    cancel: &AtomicBool,
    on_window: &mut dyn FnMut(u32, u32),
) -> Result<PplResult, EvalError> {
    let t0 = std::time::Instant::now();
    let n_chunks = windows(tokens, cfg)?;
    let n_ctx = cfg.n_ctx as usize;
    for (name, nb, nc) in std::iter::once(("arm", arm.n_batch(), arm.n_ctx())).chain(
        reference
            .as_ref()
            .map(|r| ("reference", r.n_batch(), r.n_ctx())),
    ) {
        if (nb as usize) < n_ctx || (nc as usize) < n_ctx {
            return Err(EvalError::Config(format!(
                "{name} engine has n_batch {nb}, n_ctx {nc}; perplexity needs both ≥ {n_ctx}"
            )));
        }
    }
    let first = n_ctx / 2;
    let n_score = n_ctx - 1 - first;
    let mut stats: Vec<TokStat> = Vec::with_capacity(n_chunks as usize * n_score);
    let n_threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    for w in 0..n_chunks as usize {
        if cancel.load(Ordering::Relaxed) {
            return Err(EvalError::Cancelled);
        }
        eval_window(arm, tokens, w, n_ctx)?;
        if let Some(r) = reference.as_deref_mut() {
            eval_window(r, tokens, w, n_ctx)?;
        }
        let rows: Vec<&[f32]> = (0..n_score)
            .map(|j| arm.logits(j))
            .collect::<Result<_, _>>()?;
        let rrows: Option<Vec<&[f32]>> = match reference.as_deref() {
            Some(r) => Some(
                (0..n_score)
                    .map(|j| r.logits(j))
                    .collect::<Result<_, _>>()?,
            ),
            None => None,
        };
        let start = w * n_ctx + first;
        let mut out = vec![TokStat::default(); n_score];
        let per = n_score.div_ceil(n_threads);
        std::thread::scope(|s| {
            for (ci, chunk) in out.chunks_mut(per).enumerate() {
                let (rows, rrows) = (&rows, &rrows);
                s.spawn(move || {
                    for (k, slot) in chunk.iter_mut().enumerate() {
                        let j = ci * per + k;
                        let tok = tokens[start + j + 1] as usize;
                        *slot = score(rows[j], rrows.as_ref().map(|v| v[j]), tok);
                    }
                });
            }
        });
        stats.extend(out);
        on_window(w as u32 + 1, n_chunks);
    }
    let n = stats.len() as u64;
    let (s, s2) = stats
        .iter()
        .fold((0.0, 0.0), |(a, b), t| (a + t.nll, b + t.nll * t.nll));
    let Estimate {
        value: nll_mean,
        uncertainty: nll_unc,
    } = mean_and_uncertainty(s, s2, n);
    let ppl = nll_mean.exp();
    let kld = reference.is_some().then(|| {
        let (ks, ks2) = stats
            .iter()
            .fold((0.0, 0.0), |(a, b), t| (a + t.kld, b + t.kld * t.kld));
        let Estimate {
            value: mean,
            uncertainty: mean_unc,
        } = mean_and_uncertainty(ks, ks2, n);
        let mut sorted: Vec<f64> = stats.iter().map(|t| t.kld).collect();
        sorted.sort_by(f64::total_cmp);
        let same = stats.iter().filter(|t| t.same_top).count() as f64 / n as f64;
        let (rs, _) = stats
            .iter()
            .fold((0.0, 0.0), |(a, b), t| (a + t.nll_ref, b));
        let dp2: f64 = stats.iter().map(|t| t.dp * t.dp).sum::<f64>() / n as f64;
        KldStats {
            n,
            mean,
            mean_unc,
            median: percentile(&sorted, 0.5),
            p90: percentile(&sorted, 0.90),
            p95: percentile(&sorted, 0.95),
            p99: percentile(&sorted, 0.99),
            max: *sorted.last().unwrap_or(&f64::NAN),
            same_top_pct: 100.0 * same,
            same_top_unc_pct: 100.0 * (same * (1.0 - same) / (n.max(2) - 1) as f64).sqrt(),
            rms_dp_pct: 100.0 * dp2.sqrt(),
            ppl_ref: (rs / n as f64).exp(),
            ln_ppl_ratio: nll_mean - rs / n as f64,
        }
    });
    Ok(PplResult {
        config: cfg.clone(),
        text_sha256: text_sha256.to_string(),
        n_tokens_file: tokens.len() as u64,
        n_chunks,
        n_scored: n,
        ppl,
        ppl_unc: ppl * nll_unc,
        nll_mean,
        kld,
        elapsed_ns: t0.elapsed().as_nanos() as u64,
    })
}

/// Runs llama.cpp's `llama-perplexity` on the same file and settings
/// (`-f FILE -c n_ctx -b n_ctx --chunks n_chunks -t threads -ngl 0`) and returns
/// its final estimate (PPL and its ±), parsed from `Final estimate: PPL = X +/- Y`.
///
/// # Errors
/// [`EvalError::Tool`] when the tool fails or prints no estimate.
pub fn llama_perplexity_reference(
    tool: &std::path::Path,
    model: &std::path::Path,
    text: &std::path::Path,
    cfg: &PplConfig,
    threads: u32,
) -> Result<Estimate, EvalError> {
    let terr = |p: String| EvalError::Tool {
        tool: tool.display().to_string(),
        problem: p,
    };
    let out = std::process::Command::new(tool)
        .arg("-m")
        .arg(model)
        .arg("-f")
        .arg(text)
        .args([
            "-c",
            &cfg.n_ctx.to_string(),
            "-b",
            &cfg.n_ctx.to_string(),
            "--chunks",
            &cfg.n_chunks.to_string(),
        ])
        .args(["-t", &threads.to_string(), "-ngl", "0"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            terr(format!(
                "cannot run it: {e} (build it with scripts/build-llama-tools.sh)"
            ))
        })?;
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        let tail: String = all
            .lines()
            .rev()
            .take(8)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(terr(format!("exited with {}: {tail}", out.status)));
    }
    parse_final_estimate(&all)
        .ok_or_else(|| terr("no `Final estimate: PPL = X +/- Y` line in its output".into()))
}

/// Parses llama-perplexity's `Final estimate: PPL = 9.1234 +/- 0.12345`.
pub fn parse_final_estimate(s: &str) -> Option<Estimate> {
    let l = s.lines().find(|l| l.contains("Final estimate: PPL ="))?;
    let rest = l.split("PPL =").nth(1)?;
    let mut it = rest.split("+/-");
    let ppl = it.next()?.trim().parse().ok()?;
    let unc = it.next()?.trim().parse().ok()?;
    Some(Estimate {
        value: ppl,
        uncertainty: unc,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_estimate_is_parsed() {
        let s = "perplexity: 1.2 seconds per pass\n[1]9.1,[2]9.3,\nFinal estimate: PPL = 9.3087 +/- 0.41521\n";
        assert_eq!(
            parse_final_estimate(s),
            Some(Estimate {
                value: 9.3087,
                uncertainty: 0.41521
            })
        );
        assert_eq!(parse_final_estimate("nothing"), None);
    }

    #[test]
    fn windows_follow_llama_perplexity_rules() {
        let toks: Vec<TokenId> = (0..1100).collect();
        let cfg = |n_ctx, n_chunks| PplConfig {
            dataset: "x".into(),
            n_ctx,
            n_chunks,
        };
        assert_eq!(windows(&toks, &cfg(512, 0)).unwrap(), 2);
        assert_eq!(windows(&toks, &cfg(256, 3)).unwrap(), 3);
        assert!(
            windows(&toks, &cfg(600, 0))
                .unwrap_err()
                .to_string()
                .contains("needs at least 1200")
        );
        assert!(
            windows(&toks, &cfg(256, 5))
                .unwrap_err()
                .to_string()
                .contains("only 4 windows")
        );
    }

    #[test]
    fn kld_of_identical_rows_is_zero_and_positive_otherwise() {
        let a = [1.0f32, 2.0, 3.0, 0.5];
        let t = score(&a, Some(&a), 2);
        assert!(t.kld.abs() < 1e-12 && t.same_top && t.dp.abs() < 1e-12);
        // Two-token closed form: p = softmax([0, 0]) = (.5, .5), q = softmax([0, ln 3]) = (.25, .75):
        // KL(p‖q) = .5 ln(.5/.25) + .5 ln(.5/.75) = 0.143841.
        let t = score(&[0.0, 3f32.ln()], Some(&[0.0, 0.0]), 0);
        assert!((t.kld - 0.143_841_036).abs() < 1e-6, "{}", t.kld);
        assert!((t.nll - 4f64.ln()).abs() < 1e-6);
        assert!((t.dp - (0.25 - 0.5)).abs() < 1e-6);
    }

    #[test]
    fn percentiles_interpolate_like_llama_perplexity() {
        let v = [0.0, 1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 0.5), 2.0);
        assert!((percentile(&v, 0.99) - 3.96).abs() < 1e-12);
    }
}
