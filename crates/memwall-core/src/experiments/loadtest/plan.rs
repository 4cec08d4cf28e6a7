//! The load test's plan: what `memwall loadtest` was asked, validated once
//! ([`LoadPlan::validate`]), plus the two seeded generators it needs: the open-loop
//! arrival schedule ([`arrival_offsets_s`]) and the synthetic prompts
//! ([`synthetic_prompts`]).

use super::LoadtestError;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Which OpenAI route requests go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// `POST /v1/chat/completions` (one user message; the server's chat template
    /// adds its own tokens to the prompt).
    Chat,
    /// `POST /v1/completions` (the prompt as sent).
    Completions,
}

impl Endpoint {
    /// The route, e.g. `/v1/chat/completions`.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
        }
    }

    /// Parses `chat`, `completions` or the route itself.
    ///
    /// # Errors
    /// A sentence naming `--endpoint` and the accepted values.
    pub fn parse(s: &str) -> Result<Endpoint, LoadtestError> {
        match s.trim_start_matches('/') {
            "chat" | "v1/chat/completions" | "chat/completions" => Ok(Endpoint::Chat),
            "completions" | "v1/completions" => Ok(Endpoint::Completions),
            _ => Err(LoadtestError::Options(format!(
                "--endpoint {s:?}: use chat (/v1/chat/completions) or completions (/v1/completions)"
            ))),
        }
    }
}

/// One load level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Load {
    /// Closed loop: `concurrency` clients, each sending its next request when the
    /// previous one ended.
    Closed {
        /// Requests in flight at once.
        concurrency: usize,
    },
    /// Open loop: requests start on a seeded schedule with mean rate `rate_rps`
    /// whatever the server's state; inter-arrival gaps are gamma-distributed with
    /// shape `burstiness` (1 = Poisson), as in `vllm bench serve`.
    Open {
        /// Mean requests per second.
        rate_rps: f64,
        /// Gamma shape of the gaps: 1 Poisson, < 1 burstier, > 1 more uniform.
        burstiness: f64,
    },
}

impl Load {
    /// `concurrency 4` or `rate 2/s (burstiness 1)`.
    pub fn label(&self) -> String {
        match self {
            Load::Closed { concurrency } => format!("concurrency {concurrency}"),
            Load::Open {
                rate_rps,
                burstiness,
            } => format!("rate {rate_rps}/s (burstiness {burstiness})"),
        }
    }
}

/// Service-level objectives for goodput (vLLM's `--goodput ttft:MS tpot:MS`): a
/// request is good when each metric given is at most its bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// TTFT bound, ms.
    pub ttft_ms: Option<f64>,
    /// TPOT bound, ms.
    pub tpot_ms: Option<f64>,
    /// E2EL bound, ms.
    pub e2el_ms: Option<f64>,
}

impl Slo {
    /// Parses `ttft:500,tpot:50` (also `e2el:MS`; comma- or space-separated).
    ///
    /// # Errors
    /// A sentence naming `--slo`, the bad item and the expected form.
    pub fn parse(s: &str) -> Result<Slo, LoadtestError> {
        let mut slo = Slo::default();
        for item in s.split([',', ' ']).filter(|x| !x.is_empty()) {
            let bad = || {
                LoadtestError::Options(format!(
                    "--slo {s:?}: item {item:?} should be NAME:MS with NAME ttft, tpot or e2el and MS a positive number of milliseconds (e.g. --slo ttft:500,tpot:50)"
                ))
            };
            let (name, v) = item.split_once(':').ok_or_else(bad)?;
            let ms: f64 = v.parse().map_err(|_| bad())?;
            if !(ms.is_finite() && ms > 0.0) {
                return Err(bad());
            }
            match name {
                "ttft" => slo.ttft_ms = Some(ms),
                "tpot" => slo.tpot_ms = Some(ms),
                "e2el" => slo.e2el_ms = Some(ms),
                _ => return Err(bad()),
            }
        }
        Ok(slo)
    }

    /// True when no bound is set (goodput is then not reported).
    pub fn is_empty(&self) -> bool {
        self.ttft_ms.is_none() && self.tpot_ms.is_none() && self.e2el_ms.is_none()
    }

    /// `ttft:500,tpot:50`, or `` when empty.
    pub fn label(&self) -> String {
        let mut v = Vec::new();
        for (n, x) in [
            ("ttft", self.ttft_ms),
            ("tpot", self.tpot_ms),
            ("e2el", self.e2el_ms),
        ] {
            if let Some(x) = x {
                v.push(format!("{n}:{x}"));
            }
        }
        v.join(",")
    }
}

/// Where and how to send.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// Base URL, e.g. `http://127.0.0.1:8080` (a trailing `/v1` is accepted).
    pub url: String,
    /// `model` field of each request; `None`: the first id of `GET /v1/models`.
    pub model: Option<String>,
    /// Bearer token.
    #[serde(skip_serializing)]
    pub api_key: Option<String>,
    /// The route.
    pub endpoint: Endpoint,
    /// Seconds one request may take before it counts as failed.
    pub timeout_s: f64,
}

impl Target {
    /// The base URL without a trailing `/` or `/v1`.
    pub fn base(&self) -> String {
        let u = self.url.trim_end_matches('/');
        u.strip_suffix("/v1").unwrap_or(u).to_string()
    }
}

/// What each request asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// Synthetic prompt length in words (≈ tokens; the counts the server reports are
    /// recorded), after the shared prefix.
    pub input_tokens: usize,
    /// `max_tokens` of each request.
    pub output_tokens: usize,
    /// Words of a prefix shared by every request (0: none).
    pub shared_prefix_tokens: usize,
    /// Ask the server to ignore end-of-sequence (`ignore_eos`, understood by
    /// llama-server, vLLM and memwall serve), so that every request generates
    /// `output_tokens`.
    pub ignore_eos: bool,
    /// Seed of the prompts and the arrival schedule.
    pub seed: u64,
}

/// The validated plan of one `memwall loadtest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadPlan {
    /// Where to send.
    pub target: Target,
    /// What to send.
    pub workload: Workload,
    /// The load levels, run in order.
    pub loads: Vec<Load>,
    /// Measured requests per load level.
    pub num_requests: usize,
    /// Stop starting requests at a level after this many seconds (`None`: no limit).
    pub duration_s: Option<f64>,
    /// Requests sent before each level and not counted.
    pub warmup: usize,
    /// Goodput bounds.
    pub slo: Slo,
    /// The model file the server runs, for the bandwidth columns.
    pub model_file: Option<PathBuf>,
    /// The roof of a server that does not publish its own (`--roof`): memwall serve
    /// publishes it at `/memwall/facts`; any other server gets a bandwidth share only
    /// when the user names it.
    #[serde(default)]
    pub roof: RoofChoice,
    /// The KV-cache type of a server that does not publish its own (`--cache-type`).
    #[serde(default)]
    pub cache_type: Option<crate::probe::model::CacheType>,
    /// Run the live sampler beside the levels (each level's mean power, energy and
    /// J per output token, and the run's time series).
    #[serde(default)]
    pub sampler: bool,
}

/// The roof the user names for a server that does not publish one (`--roof`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoofChoice {
    /// Not named: a foreign server's share is `—`.
    #[default]
    Unknown,
    /// `--roof GBPS`: the bandwidth of the memory the server's weights stream from.
    Gbps(f64),
    /// `--roof cpu`: the server reads its weights from this machine's DRAM; its roof
    /// is this host's latest stored STREAM triad.
    ThisCpu,
}

impl RoofChoice {
    /// Parses `cpu` or a positive number of GB/s.
    ///
    /// # Errors
    /// [`LoadtestError::Options`] naming the value.
    pub fn parse(s: &str) -> Result<RoofChoice, LoadtestError> {
        if s.trim().eq_ignore_ascii_case("cpu") {
            return Ok(RoofChoice::ThisCpu);
        }
        match s.trim().parse::<f64>() {
            Ok(g) if g.is_finite() && g > 0.0 => Ok(RoofChoice::Gbps(g)),
            _ => Err(LoadtestError::Options(format!(
                "--roof {s:?}: give the GB/s of the memory the server's weights stream from (its STREAM triad, e.g. 4300 for an H200), or `cpu` when the server runs on this machine's CPU"
            ))),
        }
    }
}

/// Most in-flight requests (threads) a level may have.
pub const MAX_CONCURRENCY: usize = 1024;

impl LoadPlan {
    /// Checks every value once.
    ///
    /// # Errors
    /// [`LoadtestError::Options`] naming the flag and the fix.
    pub fn validate(&self) -> Result<(), LoadtestError> {
        let opt = |m: String| Err(LoadtestError::Options(m));
        let base = self.target.base();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return opt(format!(
                "--url {:?}: give an http:// or https:// base URL, e.g. http://127.0.0.1:8080",
                self.target.url
            ));
        }
        if self.loads.is_empty() {
            return opt("give --concurrency N[,N…] or --rate R[,R…]".into());
        }
        for l in &self.loads {
            match *l {
                Load::Closed { concurrency }
                    if concurrency == 0 || concurrency > MAX_CONCURRENCY =>
                {
                    return opt(format!(
                        "--concurrency {concurrency}: use 1..={MAX_CONCURRENCY}"
                    ));
                }
                Load::Open { rate_rps, .. } if !(rate_rps.is_finite() && rate_rps > 0.0) => {
                    return opt(format!(
                        "--rate {rate_rps}: use a positive number of requests per second"
                    ));
                }
                Load::Open { burstiness, .. } if !(burstiness.is_finite() && burstiness > 0.0) => {
                    return opt(format!(
                        "--burstiness {burstiness}: use a positive gamma shape (1 = Poisson)"
                    ));
                }
                _ => {}
            }
        }
        if self.num_requests == 0 {
            return opt("--num-requests 0: use at least 1".into());
        }
        if let Some(d) = self.duration_s
            && !(d.is_finite() && d > 0.0)
        {
            return opt(format!("--duration {d}: use a positive number of seconds"));
        }
        if self.workload.output_tokens == 0 {
            return opt("--output-tokens 0: use at least 1 (TTFT needs a first token)".into());
        }
        if self.workload.input_tokens + self.workload.shared_prefix_tokens == 0 {
            return opt("--input-tokens 0 with no shared prefix: the prompt would be empty".into());
        }
        if !(self.target.timeout_s.is_finite() && self.target.timeout_s > 0.0) {
            return opt(format!(
                "--timeout {}: use a positive number of seconds",
                self.target.timeout_s
            ));
        }
        Ok(())
    }
}

/// Start offsets (seconds from the level's start) of `n` open-loop requests: the
/// cumulative sum of gamma(shape = `burstiness`, scale = 1 ÷ (`rate` × `burstiness`))
/// gaps, so the mean gap is 1 ÷ `rate` and the gaps' coefficient of variation is
/// 1 ÷ √`burstiness` (1 at burstiness 1: exponential gaps, a Poisson process). The
/// first request starts after the first gap, as in `vllm bench serve`.
pub fn arrival_offsets_s(n: usize, rate_rps: f64, burstiness: f64, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let scale = 1.0 / (rate_rps * burstiness);
    let mut t = 0.0;
    (0..n)
        .map(|_| {
            t += gamma(&mut rng, burstiness) * scale;
            t
        })
        .collect()
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// A gamma(shape, 1) draw: Marsaglia & Tsang 2000, "A simple method for generating
/// gamma variables" (ACM TOMS 26(3)), with their boost `G(a) = G(a+1) · U^(1/a)` for
/// shape < 1.
fn gamma(rng: &mut ChaCha8Rng, shape: f64) -> f64 {
    if shape < 1.0 {
        let u: f64 = 1.0 - rng.random::<f64>();
        return gamma(rng, shape + 1.0) * u.powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u: f64 = 1.0 - rng.random::<f64>();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// Common English words that byte-pair tokenizers (Llama, Qwen, GPT) keep as one
/// token each when preceded by a space, so a prompt of `n` of them is close to `n`
/// tokens; the count the server reports is what gets recorded.
const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "an",
    "it",
    "be",
    "are",
    "were",
    "this",
    "which",
    "or",
    "had",
    "not",
    "but",
    "first",
    "one",
    "their",
    "new",
    "after",
    "also",
    "who",
    "they",
    "two",
    "has",
    "been",
    "other",
    "when",
    "time",
    "all",
    "during",
    "there",
    "into",
    "school",
    "more",
    "may",
    "years",
    "over",
    "only",
    "year",
    "most",
    "would",
    "world",
    "city",
    "some",
    "where",
    "between",
    "later",
    "three",
    "state",
    "such",
    "then",
    "national",
    "used",
    "made",
    "known",
    "under",
    "many",
    "university",
    "united",
    "while",
    "part",
    "season",
    "team",
    "these",
    "American",
    "than",
    "film",
    "second",
    "born",
    "south",
    "became",
    "states",
    "war",
    "through",
    "being",
    "including",
    "both",
    "before",
    "north",
    "high",
    "however",
    "people",
    "family",
    "early",
    "history",
    "album",
    "area",
    "since",
    "music",
    "work",
    "house",
    "game",
    "river",
    "water",
    "light",
    "small",
];

/// The prompts of `n` requests: a shared prefix of `shared_prefix` words (the same
/// for every request and every seed-`seed` run), then `input` words drawn per request.
pub fn synthetic_prompts(n: usize, input: usize, shared_prefix: usize, seed: u64) -> Vec<String> {
    let draw = |rng: &mut ChaCha8Rng, k: usize| -> Vec<&str> {
        (0..k)
            .map(|_| WORDS[rng.random_range(0..WORDS.len())])
            .collect()
    };
    let mut prefix_rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_0f9e_f1c5);
    let prefix = draw(&mut prefix_rng, shared_prefix);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let mut w = prefix.clone();
            w.extend(draw(&mut rng, input));
            w.join(" ")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Relative tolerance of a sample statistic over 20 000 draws (the standard
    /// error of a mean of exponential gaps is 1/√20000 ≈ 0.7 %; 3 % is > 4 σ).
    const STAT_TOL: f64 = 0.03;

    fn gaps(offsets: &[f64]) -> Vec<f64> {
        let mut prev = 0.0;
        offsets
            .iter()
            .map(|&t| {
                let g = t - prev;
                prev = t;
                g
            })
            .collect()
    }

    fn mean_cv(x: &[f64]) -> (f64, f64) {
        let n = x.len() as f64;
        let m = x.iter().sum::<f64>() / n;
        let var = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0);
        (m, var.sqrt() / m)
    }

    #[test]
    fn poisson_schedule_has_the_asked_mean_rate_and_cv_1() {
        let t = arrival_offsets_s(20_000, 4.0, 1.0, 7);
        assert!(t.windows(2).all(|w| w[1] > w[0]), "increasing");
        let (m, cv) = mean_cv(&gaps(&t));
        assert!((1.0 / m - 4.0).abs() / 4.0 < STAT_TOL, "rate {}", 1.0 / m);
        assert!((cv - 1.0).abs() < STAT_TOL, "cv {cv}");
        assert_eq!(t, arrival_offsets_s(20_000, 4.0, 1.0, 7), "seeded");
        assert_ne!(t, arrival_offsets_s(20_000, 4.0, 1.0, 8));
    }

    #[test]
    fn gamma_schedule_cv_is_one_over_sqrt_burstiness() {
        for (b, want_cv) in [(0.25, 2.0), (4.0, 0.5)] {
            let t = arrival_offsets_s(20_000, 10.0, b, 3);
            let (m, cv) = mean_cv(&gaps(&t));
            assert!(
                (1.0 / m - 10.0).abs() / 10.0 < 2.0 * STAT_TOL,
                "b {b}: rate {}",
                1.0 / m
            );
            assert!(
                (cv - want_cv).abs() / want_cv < 2.0 * STAT_TOL,
                "b {b}: cv {cv}"
            );
        }
    }

    #[test]
    fn prompts_share_the_prefix_and_have_the_asked_word_count() {
        let p = synthetic_prompts(3, 5, 4, 1);
        for x in &p {
            assert_eq!(x.split(' ').count(), 9);
        }
        let pre = |s: &str| s.split(' ').take(4).collect::<Vec<_>>().join(" ");
        assert_eq!(pre(&p[0]), pre(&p[1]));
        assert_ne!(p[0], p[1]);
        assert_eq!(p, synthetic_prompts(3, 5, 4, 1));
    }

    #[test]
    fn slo_parses_and_names_bad_items() {
        let s = Slo::parse("ttft:500,tpot:50").unwrap();
        assert_eq!(
            (s.ttft_ms, s.tpot_ms, s.e2el_ms),
            (Some(500.0), Some(50.0), None)
        );
        assert_eq!(s.label(), "ttft:500,tpot:50");
        let e = Slo::parse("ttft=5").unwrap_err().to_string();
        assert!(e.contains("--slo") && e.contains("\"ttft=5\""), "{e}");
        assert!(Slo::parse("itl:5").is_err());
        assert!(Slo::parse("ttft:-1").is_err());
    }

    #[test]
    fn endpoint_and_base_url() {
        assert_eq!(Endpoint::parse("chat").unwrap(), Endpoint::Chat);
        assert_eq!(
            Endpoint::parse("/v1/completions").unwrap(),
            Endpoint::Completions
        );
        assert!(
            Endpoint::parse("embeddings")
                .unwrap_err()
                .to_string()
                .contains("--endpoint")
        );
        let t = Target {
            url: "http://h:1/v1/".into(),
            model: None,
            api_key: None,
            endpoint: Endpoint::Chat,
            timeout_s: 1.0,
        };
        assert_eq!(t.base(), "http://h:1");
    }
}
