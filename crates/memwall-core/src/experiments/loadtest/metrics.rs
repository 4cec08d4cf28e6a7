//! Per-request samples → one load point, with vLLM's definitions
//! (`vllm/benchmarks/serve.py`, `calculate_metrics`):
//!
//! - **TTFT**: send → first chunk carrying output text (reasoning text counts).
//! - **TPOT** per request: `(E2EL − TTFT) ÷ (n_output − 1)`, for requests with more
//!   than one output token.
//! - **ITL**: every gap between consecutive output chunks, pooled over requests.
//! - **E2EL**: send → end of the stream.
//! - Request throughput `completed ÷ duration`; output-token throughput
//!   `Σ n_output ÷ duration`; goodput `requests meeting every SLO ÷ duration`.
//!
//! Percentiles are numpy's default (linear interpolation between closest ranks:
//! rank `p/100 · (n − 1)`), as vLLM reports them.
//!
//! The bandwidth columns: output-token throughput × bytes one token's decode reads
//! alone (weights + its KV at the mean depth, at the server's KV-cache type:
//! [`roofline::bytes_per_step`] at batch 1) is the bandwidth the server would need if
//! it read the weights once per token. A server cannot read faster than the memory
//! its weights stream from, so an implied bandwidth above that roof shows batching
//! shares each weight read among several sequences. The roof must be the server's:
//! `memwall serve` publishes its own (`/memwall/facts`); another server's is the one
//! the user names (`--roof`), else the share is `—`.

use super::LoadtestError;
use super::plan::{Load, Slo};
use super::run::{Outcome, RequestSample};
use crate::measure::sampler::session::EnergySummary;
use crate::probe::model::{CacheType, ModelFacts};
use crate::roofline;
use serde::{Deserialize, Serialize};

/// numpy's default percentile of `sorted` (ascending, non-empty): linear
/// interpolation at rank `p/100 · (n − 1)`.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let r = p / 100.0 * (sorted.len() - 1) as f64;
    let lo = r.floor() as usize;
    let hi = r.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (r - lo as f64)
}

/// Mean, median, p90 and p99 of a metric, ms; all `None` when no request had it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Dist {
    pub mean_ms: Option<f64>,
    /// Median (p50), ms.
    pub median_ms: Option<f64>,
    /// 90th percentile, ms.
    pub p90_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
}

impl Dist {
    /// The statistics of `x` (any order).
    pub fn of(x: &[f64]) -> Dist {
        if x.is_empty() {
            return Dist::default();
        }
        let mut s = x.to_vec();
        s.sort_by(f64::total_cmp);
        Dist {
            mean_ms: Some(s.iter().sum::<f64>() / s.len() as f64),
            median_ms: Some(percentile(&s, 50.0)),
            p90_ms: Some(percentile(&s, 90.0)),
            p99_ms: Some(percentile(&s, 99.0)),
        }
    }
}

/// Where output token counts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server's `usage.completion_tokens` (every completed request had it).
    Usage,
    /// The model's tokenizer (llama.cpp vocab-only load) on the streamed text, for
    /// requests without usage.
    Tokenizer,
    /// Neither usage nor a tokenizer: one output chunk counted as one token.
    Chunks,
}

impl TokenSource {
    /// `usage`, `tokenizer` or `chunks`.
    pub fn name(self) -> &'static str {
        match self {
            TokenSource::Usage => "usage",
            TokenSource::Tokenizer => "tokenizer",
            TokenSource::Chunks => "chunks",
        }
    }
}

/// The bandwidth-normalised columns of a load point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct Bandwidth {
    /// Bytes one token's decode reads alone: weights + its KV at the mean depth.
    pub bytes_per_token: Option<f64>,
    /// Output-token throughput × bytes per token, GB/s (1e9 B/s).
    pub implied_gbps: Option<f64>,
    /// The server's roof: the STREAM triad (best) of the memory its weights stream
    /// from, GB/s (published by memwall serve, or named with `--roof`).
    pub stream_gbps: Option<f64>,
    /// Implied ÷ the server's roof, percent; above 100 shows weight reads are shared
    /// (batching).
    pub pct_of_stream: Option<f64>,
    /// Why a column is `—`, when one is.
    pub note: Option<String>,
    /// Where the roof came from (`memwall serve: cpu STREAM triad #3 …`, `--roof 4300
    /// GB/s (declared)`).
    #[serde(default)]
    pub roof_source: Option<String>,
    /// The KV-cache type the bytes per token assume, the server's own (`f16`, …).
    #[serde(default)]
    pub kv_type: Option<String>,
}

/// A server's roof and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerRoof {
    /// GB/s.
    pub gbps: f64,
    /// Where it came from.
    pub source: String,
}

/// What a token's decode reads, from the server's published facts or from the model
/// file at the KV-cache type the user named.
#[derive(Debug, Clone, Copy)]
pub enum BytesFrom<'a> {
    /// memwall serve's `/memwall/facts`.
    Served(&'a crate::experiments::serve::facts::ServedFacts),
    /// The model file's facts at a named KV-cache type.
    File(&'a ModelFacts, CacheType),
}

impl BytesFrom<'_> {
    fn at(&self, depth: u64) -> f64 {
        match self {
            BytesFrom::Served(f) => f.bytes_per_token(depth),
            BytesFrom::File(m, kv) => roofline::bytes_per_step(m, depth, 1, *kv).0 as f64,
        }
    }

    fn kv_type(&self) -> String {
        match self {
            BytesFrom::Served(f) => f.kv_type.clone(),
            BytesFrom::File(_, kv) => kv.name().to_string(),
        }
    }
}

/// One load level's result: the row `memwall loadtest` prints and stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadPoint {
    /// The load level.
    pub load: Load,
    /// Measured requests sent.
    pub n_sent: u64,
    /// Completed (streamed to the end).
    pub n_completed: u64,
    /// Refused with 429.
    pub n_rejected: u64,
    /// Failed otherwise.
    pub n_failed: u64,
    /// Largest `Retry-After` a 429 carried, s.
    pub retry_after_max_s: Option<f64>,
    /// Level start → last request's end, s.
    pub duration_s: f64,
    /// Σ prompt tokens of completed requests (server usage; `None` when not sent).
    pub total_input_tokens: Option<u64>,
    /// Σ output tokens of completed requests.
    pub total_output_tokens: u64,
    /// Where the output counts came from.
    pub token_source: TokenSource,
    /// Completed requests per second.
    pub request_throughput_rps: f64,
    /// Output tokens per second, all requests together.
    pub output_throughput_tps: f64,
    pub ttft: Dist,
    pub tpot: Dist,
    pub itl: Dist,
    pub e2el: Dist,
    /// Requests meeting every SLO per second (`None` without `--slo`).
    pub goodput_rps: Option<f64>,
    /// Mean `cached_tokens` the server reported (prefix-cache reuse), when it did.
    pub mean_cached_tokens: Option<f64>,
    /// The bandwidth columns.
    pub bandwidth: Bandwidth,
    /// The first error of a failed or rejected request.
    pub first_error: Option<String>,
    /// Mean power, energy and J per output token over the level, from the live
    /// sampler (the whole machine's counters); `None` when the sampler did not run.
    #[serde(default)]
    pub energy: Option<EnergySummary>,
    /// Every measured request (raw samples: the statistics above derive from them).
    pub samples: Vec<RequestSample>,
}

/// Counts output tokens of a text (the model's tokenizer).
pub type TokenCounter<'a> = &'a (dyn Fn(&str) -> Option<u64> + Sync);

/// Output tokens of `s` and where the count came from.
fn n_output(s: &RequestSample, counter: Option<TokenCounter>) -> (u64, TokenSource) {
    if let Some(n) = s.usage_completion_tokens {
        return (n, TokenSource::Usage);
    }
    if let Some(n) = counter.and_then(|c| c(&s.text)) {
        return (n, TokenSource::Tokenizer);
    }
    (s.chunk_ms.len() as u64, TokenSource::Chunks)
}

/// Builds a load point from its samples.
///
/// # Errors
/// [`LoadtestError::AllFailed`] when no request completed;
/// [`LoadtestError::Impossible`] for times that cannot be (a chunk before the send or
/// after the end, chunks out of order, output tokens fewer than output chunks
/// reported by usage as zero).
pub fn summarize(
    load: Load,
    samples: Vec<RequestSample>,
    duration_s: f64,
    slo: &Slo,
    counter: Option<TokenCounter>,
) -> Result<LoadPoint, LoadtestError> {
    let ok: Vec<&RequestSample> = samples
        .iter()
        .filter(|s| s.outcome == Outcome::Ok)
        .collect();
    let first_error = samples.iter().find_map(|s| s.error.clone());
    if ok.is_empty() {
        return Err(LoadtestError::AllFailed {
            level: load.label(),
            n: samples.len(),
            first: first_error.unwrap_or_else(|| "no request was sent".into()),
        });
    }
    if !(duration_s.is_finite() && duration_s > 0.0) {
        return Err(LoadtestError::Impossible(format!(
            "{}: duration {duration_s} s",
            load.label()
        )));
    }
    let (mut ttft, mut tpot, mut itl, mut e2el) = (vec![], vec![], vec![], vec![]);
    let mut total_out = 0u64;
    let mut total_in = Some(0u64);
    let mut source = TokenSource::Usage;
    let mut good = 0u64;
    let mut cached = Vec::new();
    for s in &ok {
        let t0 = s.chunk_ms[0];
        let end = s.e2el_ms;
        if t0 < 0.0
            || s.chunk_ms.windows(2).any(|w| w[1] < w[0])
            || *s.chunk_ms.last().unwrap() > end
        {
            return Err(LoadtestError::Impossible(format!(
                "{}: request {} has chunk times {:?} ms and ends at {end} ms (they must rise from ≥ 0 to ≤ the end)",
                load.label(),
                s.index,
                s.chunk_ms
            )));
        }
        let (n, src) = n_output(s, counter);
        if n == 0 {
            return Err(LoadtestError::Impossible(format!(
                "{}: request {} streamed {} chunks of text but its token count is 0",
                load.label(),
                s.index,
                s.chunk_ms.len()
            )));
        }
        source = match (source, src) {
            (TokenSource::Chunks, _) | (_, TokenSource::Chunks) => TokenSource::Chunks,
            (TokenSource::Tokenizer, _) | (_, TokenSource::Tokenizer) => TokenSource::Tokenizer,
            _ => TokenSource::Usage,
        };
        total_out += n;
        total_in = match (total_in, s.usage_prompt_tokens) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        if let Some(c) = s.cached_tokens {
            cached.push(c as f64);
        }
        ttft.push(t0);
        e2el.push(end);
        let req_tpot = (n > 1).then(|| (end - t0) / (n - 1) as f64);
        if let Some(x) = req_tpot {
            tpot.push(x);
        }
        itl.extend(s.chunk_ms.windows(2).map(|w| w[1] - w[0]));
        let meets = |v: Option<f64>, b: Option<f64>| match b {
            None => true,
            Some(b) => v.unwrap_or(0.0) <= b,
        };
        if meets(Some(t0), slo.ttft_ms)
            && meets(req_tpot, slo.tpot_ms)
            && meets(Some(end), slo.e2el_ms)
        {
            good += 1;
        }
    }
    let count = |o: Outcome| samples.iter().filter(|s| s.outcome == o).count() as u64;
    Ok(LoadPoint {
        load,
        n_sent: samples.len() as u64,
        n_completed: ok.len() as u64,
        n_rejected: count(Outcome::Rejected),
        n_failed: count(Outcome::Failed),
        retry_after_max_s: samples
            .iter()
            .filter_map(|s| s.retry_after_s)
            .reduce(f64::max),
        duration_s,
        total_input_tokens: total_in,
        total_output_tokens: total_out,
        token_source: source,
        request_throughput_rps: ok.len() as f64 / duration_s,
        output_throughput_tps: total_out as f64 / duration_s,
        ttft: Dist::of(&ttft),
        tpot: Dist::of(&tpot),
        itl: Dist::of(&itl),
        e2el: Dist::of(&e2el),
        goodput_rps: (!slo.is_empty()).then(|| good as f64 / duration_s),
        mean_cached_tokens: (!cached.is_empty())
            .then(|| cached.iter().sum::<f64>() / cached.len() as f64),
        bandwidth: Bandwidth::default(),
        first_error,
        energy: None,
        samples,
    })
}

/// Fills `p.bandwidth`: bytes per token at the point's mean depth (mean prompt
/// tokens + half the mean output; the prompt is the requested
/// `fallback_prompt_tokens` when the server sent no usage) from `bytes` (the server's
/// facts, or the model file at a named KV type), and the share of the server's
/// `roof`. Each `Err` is the reason its columns are `—`.
pub fn add_bandwidth(
    p: &mut LoadPoint,
    bytes: Result<BytesFrom<'_>, &str>,
    fallback_prompt_tokens: u64,
    roof: Result<&ServerRoof, &str>,
) {
    let mut notes = Vec::new();
    let (per_token, kv_type) = match bytes {
        Ok(b) => {
            let n = p.n_completed.max(1) as f64;
            let prompt = p
                .total_input_tokens
                .map_or(fallback_prompt_tokens as f64, |t| t as f64 / n);
            let depth = (prompt + p.total_output_tokens as f64 / n / 2.0).round() as u64;
            (Some(b.at(depth)), Some(b.kv_type()))
        }
        Err(why) => {
            notes.push(why.to_string());
            (None, None)
        }
    };
    let implied = per_token.map(|b| p.output_throughput_tps * b / 1e9);
    let (gbps, source) = match roof {
        Ok(r) => (Some(r.gbps), Some(r.source.clone())),
        Err(why) => {
            notes.push(why.to_string());
            (None, None)
        }
    };
    p.bandwidth = Bandwidth {
        bytes_per_token: per_token,
        implied_gbps: implied,
        stream_gbps: gbps,
        pct_of_stream: implied.zip(gbps).map(|(i, s)| 100.0 * i / s),
        note: (!notes.is_empty()).then(|| notes.join("; ")),
        roof_source: source,
        kv_type,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Float tolerance of hand arithmetic.
    const EPS: f64 = 1e-9;

    fn sample(index: usize, chunks: &[f64], end: f64, usage: Option<u64>) -> RequestSample {
        RequestSample {
            index,
            start_ms: 0.0,
            outcome: Outcome::Ok,
            chunk_ms: chunks.to_vec(),
            e2el_ms: end,
            usage_prompt_tokens: usage.map(|_| 10),
            usage_completion_tokens: usage,
            cached_tokens: None,
            text: "a b c".into(),
            finish_reason: Some("length".into()),
            retry_after_s: None,
            error: None,
        }
    }

    #[test]
    fn percentiles_match_numpy() {
        // numpy.percentile([1, 2, 3, 4], [50, 90, 99]) = [2.5, 3.7, 3.97]
        let s = [1.0, 2.0, 3.0, 4.0];
        assert!((percentile(&s, 50.0) - 2.5).abs() < EPS);
        assert!((percentile(&s, 90.0) - 3.7).abs() < EPS);
        assert!((percentile(&s, 99.0) - 3.97).abs() < EPS);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
    }

    #[test]
    fn the_report_counts_requests_that_stopped_short_and_only_those() {
        let table = |samples: Vec<RequestSample>| {
            let p = summarize(
                Load::Closed { concurrency: 2 },
                samples,
                0.5,
                &Slo::default(),
                None,
            );
            crate::experiments::loadtest::report::table(&[p.unwrap()])
        };
        let mut short = sample(1, &[200.0, 210.0], 260.0, Some(3));
        short.finish_reason = Some("stop".into());
        let t = table(vec![
            sample(0, &[100.0, 120.0, 150.0], 160.0, Some(4)),
            short,
        ]);
        assert!(
            t.contains("1 of 2 requests ended at end-of-generation"),
            "{t}"
        );
        let t = table(vec![sample(0, &[100.0, 120.0, 150.0], 160.0, Some(4))]);
        assert!(!t.contains("end-of-generation"), "{t}");
    }

    #[test]
    fn metrics_follow_vllm_definitions_by_hand() {
        // Request 0: chunks at 100, 120, 150 ms, ends 160, 4 tokens (usage).
        //   TTFT 100, TPOT (160-100)/3 = 20, ITLs 20, 30, E2EL 160.
        // Request 1: chunks at 200, 210 ms, ends 260, 3 tokens.
        //   TTFT 200, TPOT (260-200)/2 = 30, ITL 10, E2EL 260.
        // Request 2: 429 rejected, Retry-After 2.
        let mut rej = sample(2, &[], 5.0, None);
        rej.outcome = Outcome::Rejected;
        rej.retry_after_s = Some(2.0);
        rej.error = Some("HTTP 429".into());
        let samples = vec![
            sample(0, &[100.0, 120.0, 150.0], 160.0, Some(4)),
            sample(1, &[200.0, 210.0], 260.0, Some(3)),
            rej,
        ];
        let slo = Slo {
            ttft_ms: Some(150.0),
            tpot_ms: Some(25.0),
            e2el_ms: None,
        };
        let p = summarize(Load::Closed { concurrency: 2 }, samples, 0.5, &slo, None).unwrap();
        assert_eq!(
            (p.n_sent, p.n_completed, p.n_rejected, p.n_failed),
            (3, 2, 1, 0)
        );
        assert_eq!(p.retry_after_max_s, Some(2.0));
        assert_eq!(p.token_source, TokenSource::Usage);
        assert_eq!((p.total_output_tokens, p.total_input_tokens), (7, Some(20)));
        assert!((p.request_throughput_rps - 4.0).abs() < EPS); // 2 / 0.5 s
        assert!((p.output_throughput_tps - 14.0).abs() < EPS); // 7 / 0.5 s
        let ttft = p.ttft;
        assert!((ttft.mean_ms.unwrap() - 150.0).abs() < EPS);
        assert!((ttft.median_ms.unwrap() - 150.0).abs() < EPS);
        assert!((ttft.p90_ms.unwrap() - 190.0).abs() < EPS); // 100 + 0.9·100
        assert!((ttft.p99_ms.unwrap() - 199.0).abs() < EPS);
        assert!((p.tpot.mean_ms.unwrap() - 25.0).abs() < EPS); // (20 + 30) / 2
        // ITLs pooled: 20, 30, 10 → mean 20, median 20, p90 = 20 + 0.8·10 = 28.
        assert!((p.itl.mean_ms.unwrap() - 20.0).abs() < EPS);
        assert!((p.itl.median_ms.unwrap() - 20.0).abs() < EPS);
        assert!((p.itl.p90_ms.unwrap() - 28.0).abs() < EPS);
        assert!((p.e2el.mean_ms.unwrap() - 210.0).abs() < EPS);
        // Only request 0 meets ttft ≤ 150 and tpot ≤ 25: goodput 1 / 0.5 s.
        assert!((p.goodput_rps.unwrap() - 2.0).abs() < EPS);
        assert_eq!(p.first_error.as_deref(), Some("HTTP 429"));
    }

    #[test]
    fn token_counts_fall_back_to_the_tokenizer_then_to_chunks() {
        let s = || vec![sample(0, &[10.0, 20.0], 30.0, None)];
        let p = summarize(
            Load::Closed { concurrency: 1 },
            s(),
            1.0,
            &Slo::default(),
            None,
        )
        .unwrap();
        assert_eq!(
            (p.token_source, p.total_output_tokens),
            (TokenSource::Chunks, 2)
        );
        assert_eq!(p.goodput_rps, None, "no SLO, no goodput");
        let count = |t: &str| Some(t.split(' ').count() as u64);
        let p = summarize(
            Load::Closed { concurrency: 1 },
            s(),
            1.0,
            &Slo::default(),
            Some(&count),
        )
        .unwrap();
        assert_eq!(
            (p.token_source, p.total_output_tokens),
            (TokenSource::Tokenizer, 3)
        );
        assert!((p.tpot.mean_ms.unwrap() - 10.0).abs() < EPS); // (30 - 10) / 2
    }

    #[test]
    fn impossible_times_and_all_failed_are_errors() {
        let bad = vec![sample(0, &[30.0, 20.0], 40.0, Some(2))];
        let e = summarize(
            Load::Closed { concurrency: 1 },
            bad,
            1.0,
            &Slo::default(),
            None,
        )
        .unwrap_err();
        assert!(matches!(e, LoadtestError::Impossible(_)), "{e}");
        let mut f = sample(0, &[], 1.0, None);
        f.outcome = Outcome::Failed;
        f.error = Some("POST x: connection refused".into());
        let e = summarize(
            Load::Closed { concurrency: 1 },
            vec![f],
            1.0,
            &Slo::default(),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("all 1 requests failed") && e.contains("connection refused"),
            "{e}"
        );
    }
}
