//! Sending: one streamed request ([`send`], every SSE event stamped when the read
//! that completed it returned), the server probe ([`probe_server`]) and the two
//! drivers ([`run_level`]): closed loop (N client threads) and open loop (a seeded
//! schedule, one thread per in-flight request).

use super::LoadtestError;
use super::plan::{Endpoint, Load, LoadPlan, Target, arrival_offsets_s};
use super::sse::SseParser;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Streamed to `data: [DONE]` (or the end of the body after a finish reason).
    Ok,
    /// Refused with HTTP 429 (the server's queue was full).
    Rejected,
    /// Anything else: transport error, other status, malformed stream, timeout.
    Failed,
}

/// What one request measured. Times are milliseconds from the moment the request
/// was handed to the HTTP client (`send`), taken with a monotonic clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestSample {
    /// Index of the request in the level (its prompt and schedule slot).
    pub index: usize,
    /// Send time, ms since the level's start.
    pub start_ms: f64,
    /// How it ended.
    pub outcome: Outcome,
    /// Arrival time of each chunk that carried output text (content, text or
    /// reasoning content), ms since send; the first is TTFT.
    pub chunk_ms: Vec<f64>,
    /// Time the stream ended, ms since send (E2EL).
    pub e2el_ms: f64,
    /// `usage.prompt_tokens`, when the server sent usage.
    pub usage_prompt_tokens: Option<u64>,
    /// `usage.completion_tokens`, when the server sent usage.
    pub usage_completion_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens` (prefix-cache hits), when sent.
    pub cached_tokens: Option<u64>,
    /// The generated text (for counting tokens when the server sent no usage).
    #[serde(skip)]
    pub text: String,
    /// `finish_reason` of the last choice that had one.
    pub finish_reason: Option<String>,
    /// `Retry-After` of a 429, seconds.
    pub retry_after_s: Option<f64>,
    /// The error, for failed and rejected requests.
    pub error: Option<String>,
}

impl RequestSample {
    /// TTFT: send → first output chunk, ms.
    pub fn ttft_ms(&self) -> Option<f64> {
        self.chunk_ms.first().copied()
    }
}

/// What the server said about itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    /// Ids from `GET /v1/models`, in order.
    pub model_ids: Vec<String>,
    /// The `Server` header of its replies (`llama.cpp`, `uvicorn`, …), when sent.
    pub server_header: Option<String>,
    /// `system_fingerprint` of the last streamed chunk, when sent.
    pub system_fingerprint: Option<String>,
    /// `model` of the streamed chunks (what actually answered).
    pub reported_model: Option<String>,
    /// What a `memwall serve` publishes about itself at `/memwall/facts` (`None`:
    /// another server, or one that answered no such endpoint).
    pub facts: Option<crate::experiments::serve::facts::ServedFacts>,
}

fn agent(timeout_s: f64) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs_f64(timeout_s)))
        .timeout_connect(Some(Duration::from_secs(5)))
        .max_idle_connections(super::plan::MAX_CONCURRENCY)
        .max_idle_connections_per_host(super::plan::MAX_CONCURRENCY)
        .build()
        .into()
}

/// An agent that keeps no connection: each request opens its own.
fn fresh_agent(timeout_s: f64) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs_f64(timeout_s)))
        .timeout_connect(Some(Duration::from_secs(5)))
        .max_idle_connections(0)
        .build()
        .into()
}

/// The error of a socket the server had already closed: end of file, reset or
/// broken pipe before any reply arrived.
fn stale_connection(e: &ureq::Error) -> bool {
    matches!(e, ureq::Error::Io(io) if matches!(
        io.kind(),
        std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe
    ))
}

fn with_auth<B>(r: ureq::RequestBuilder<B>, key: &Option<String>) -> ureq::RequestBuilder<B> {
    match key {
        Some(k) => r.header("Authorization", &format!("Bearer {k}")),
        None => r,
    }
}

/// `GET /v1/models`: checks that the server is there and speaks OpenAI's API.
///
/// # Errors
/// [`LoadtestError::Unreachable`] (nothing listens), [`LoadtestError::NotOpenAi`]
/// (a status other than 200, or a body without `data[].id`), naming the URL.
pub fn probe_server(t: &Target) -> Result<ServerInfo, LoadtestError> {
    let url = format!("{}/v1/models", t.base());
    let resp = with_auth(agent(t.timeout_s.min(30.0)).get(&url), &t.api_key)
        .call()
        .map_err(|e| LoadtestError::Unreachable {
            url: url.clone(),
            msg: e.to_string(),
        })?;
    let status = resp.status().as_u16();
    let server_header = resp
        .headers()
        .get("server")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = resp
        .into_body()
        .with_config()
        .limit(1 << 20)
        .read_to_string()
        .unwrap_or_default();
    let not = |problem: String| LoadtestError::NotOpenAi {
        url: url.clone(),
        problem,
    };
    if status == 401 || status == 403 {
        return Err(not(format!(
            "HTTP {status} (the server wants an API key: pass --api-key): {}",
            snippet(&body)
        )));
    }
    if status != 200 {
        return Err(not(format!("HTTP {status}: {}", snippet(&body))));
    }
    let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| {
        not(format!(
            "the body is not JSON ({e}); it starts {:?}",
            snippet(&body)
        ))
    })?;
    let ids: Vec<String> = v
        .get("data")
        .and_then(|d| d.as_array())
        .ok_or_else(|| {
            not(format!(
                "expected {{\"data\": [{{\"id\": …}}]}}, got {}",
                snippet(&body)
            ))
        })?
        .iter()
        .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(str::to_string))
        .collect();
    Ok(ServerInfo {
        model_ids: ids,
        server_header,
        facts: served_facts(t),
        ..ServerInfo::default()
    })
}

/// The server's `/memwall/facts`, when it is a `memwall serve` that publishes them;
/// `None` for any other answer (another server's 404, HTML, other JSON).
pub fn served_facts(t: &Target) -> Option<crate::experiments::serve::facts::ServedFacts> {
    let url = format!(
        "{}{}",
        t.base(),
        crate::experiments::serve::facts::FACTS_PATH
    );
    let resp = with_auth(agent(t.timeout_s.min(30.0)).get(&url), &t.api_key)
        .call()
        .ok()?;
    if resp.status().as_u16() != 200 {
        return None;
    }
    let body = resp
        .into_body()
        .with_config()
        .limit(1 << 20)
        .read_to_string()
        .ok()?;
    let f: crate::experiments::serve::facts::ServedFacts = serde_json::from_str(&body).ok()?;
    (f.server == "memwall serve").then_some(f)
}

fn snippet(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The JSON body of one request.
pub fn request_body(
    endpoint: Endpoint,
    model: &str,
    prompt: &str,
    max_tokens: usize,
    ignore_eos: bool,
) -> serde_json::Value {
    let mut b = serde_json::json!({
        "model": model,
        "max_tokens": max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
        "temperature": 0.0,
    });
    match endpoint {
        Endpoint::Chat => b["messages"] = serde_json::json!([{"role": "user", "content": prompt}]),
        Endpoint::Completions => b["prompt"] = serde_json::json!(prompt),
    }
    if ignore_eos {
        b["ignore_eos"] = serde_json::json!(true);
    }
    b
}

/// Output text a chunk carries: `choices[].delta.content` / `.reasoning_content` /
/// `.reasoning` (chat) or `choices[].text` (completions).
fn chunk_text(v: &serde_json::Value) -> (String, Option<String>) {
    let mut text = String::new();
    let mut finish = None;
    if let Some(choices) = v.get("choices").and_then(|c| c.as_array()) {
        for c in choices {
            if let Some(d) = c.get("delta") {
                for k in ["reasoning_content", "reasoning", "content"] {
                    if let Some(s) = d.get(k).and_then(|x| x.as_str()) {
                        text.push_str(s);
                    }
                }
            }
            if let Some(s) = c.get("text").and_then(|x| x.as_str()) {
                text.push_str(s);
            }
            if let Some(f) = c.get("finish_reason").and_then(|x| x.as_str()) {
                finish = Some(f.to_string());
            }
        }
    }
    (text, finish)
}

/// Sends one streamed request and reads its events as they arrive. Never fails:
/// problems become [`Outcome::Failed`] / [`Outcome::Rejected`] with the error text.
pub fn send(
    agent: &ureq::Agent,
    t: &Target,
    body: &serde_json::Value,
    index: usize,
    level_start: Instant,
    info: &Mutex<ServerInfo>,
) -> RequestSample {
    let url = format!("{}{}", t.base(), t.endpoint.path());
    let t0 = Instant::now();
    let ms = |i: Instant| i.duration_since(t0).as_secs_f64() * 1e3;
    let mut s = RequestSample {
        index,
        start_ms: t0.duration_since(level_start).as_secs_f64() * 1e3,
        outcome: Outcome::Failed,
        chunk_ms: Vec::new(),
        e2el_ms: 0.0,
        usage_prompt_tokens: None,
        usage_completion_tokens: None,
        cached_tokens: None,
        text: String::new(),
        finish_reason: None,
        retry_after_s: None,
        error: None,
    };
    let fail = |mut s: RequestSample, e: String| {
        s.e2el_ms = ms(Instant::now());
        s.error = Some(e);
        s
    };
    let post = |a: &ureq::Agent| {
        with_auth(a.post(&url), &t.api_key)
            .header("Content-Type", "application/json")
            .send(body.to_string())
    };
    // A server may close a kept-alive connection after a streamed reply while still
    // announcing `Keep-Alive` (llama-server does); the pooled socket then fails before
    // any byte of a reply. Such a request never reached the server: it is sent once
    // more on a new connection, and its clock (`t0`) keeps running.
    let resp = match post(agent) {
        Ok(r) => r,
        Err(e) if stale_connection(&e) => match post(&fresh_agent(t.timeout_s)) {
            Ok(r) => r,
            Err(e) => return fail(s, format!("POST {url}: {e}")),
        },
        Err(e) => return fail(s, format!("POST {url}: {e}")),
    };
    let status = resp.status().as_u16();
    if let Some(h) = resp.headers().get("server").and_then(|v| v.to_str().ok()) {
        let mut i = info.lock().unwrap_or_else(|p| p.into_inner());
        i.server_header.get_or_insert_with(|| h.to_string());
    }
    if status != 200 {
        let retry = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok());
        let text = resp
            .into_body()
            .with_config()
            .limit(1 << 16)
            .read_to_string()
            .unwrap_or_default();
        if status == 429 {
            s.outcome = Outcome::Rejected;
            s.retry_after_s = retry;
        }
        return fail(s, format!("HTTP {status} from {url}: {}", snippet(&text)));
    }
    let mut reader = resp.into_body().into_reader();
    let mut parser = SseParser::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut done = false;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => return fail(s, format!("reading the stream from {url}: {e}")),
        };
        let at = ms(Instant::now());
        for ev in parser.feed(&buf[..n]) {
            let data = ev.data.trim();
            if data == "[DONE]" {
                done = true;
                continue;
            }
            let v: serde_json::Value = match serde_json::from_str(data) {
                Ok(v) => v,
                Err(e) => {
                    return fail(
                        s,
                        format!(
                            "{url} streamed an event that is not JSON ({e}): {:?}",
                            snippet(data)
                        ),
                    );
                }
            };
            if let Some(err) = v.get("error") {
                return fail(s, format!("{url} streamed an error: {err}"));
            }
            let (text, finish) = chunk_text(&v);
            if !text.is_empty() {
                s.chunk_ms.push(at);
                s.text.push_str(&text);
            }
            if finish.is_some() {
                s.finish_reason = finish;
            }
            if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
                s.usage_prompt_tokens = u.get("prompt_tokens").and_then(|x| x.as_u64());
                s.usage_completion_tokens = u.get("completion_tokens").and_then(|x| x.as_u64());
                s.cached_tokens = u
                    .pointer("/prompt_tokens_details/cached_tokens")
                    .and_then(|x| x.as_u64());
            }
            let mut i = info.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(m) = v.get("model").and_then(|x| x.as_str()) {
                i.reported_model = Some(m.to_string());
            }
            if let Some(f) = v.get("system_fingerprint").and_then(|x| x.as_str()) {
                i.system_fingerprint = Some(f.to_string());
            }
        }
    }
    s.e2el_ms = ms(Instant::now());
    if parser.pending() {
        return fail(s, format!("{url}: the stream was cut off inside an event"));
    }
    if !done && s.finish_reason.is_none() {
        return fail(
            s,
            format!("{url}: the stream ended without data: [DONE] or a finish_reason"),
        );
    }
    if s.chunk_ms.is_empty() {
        return fail(
            s,
            format!("{url}: the stream carried no output text (no token arrived, so no TTFT)"),
        );
    }
    s.outcome = Outcome::Ok;
    s
}

/// Longest wait a 429's `Retry-After` makes a closed-loop client wait before its
/// next request.
pub const MAX_RETRY_WAIT_S: f64 = 10.0;

/// What a level's run returned.
#[derive(Debug, Clone)]
pub struct LevelRun {
    /// Every measured request, in index order.
    pub samples: Vec<RequestSample>,
    /// Wall time from the level's start to its last request's end, s.
    pub duration_s: f64,
    /// The measured span itself (after the warm-up, to the last request's end): the
    /// sampler's timed interval for the level.
    pub span: crate::measure::sampler::session::TimedSpan,
}

/// Runs one load level: `plan.warmup` requests first (not returned), then up to
/// `plan.num_requests` measured ones (fewer when `plan.duration_s` runs out).
/// `on_done(done, total)` is called after each measured request.
pub fn run_level(
    plan: &LoadPlan,
    model: &str,
    load: Load,
    prompts: &[String],
    info: &Mutex<ServerInfo>,
    on_done: &(dyn Fn(usize, usize) + Sync),
) -> LevelRun {
    let t = &plan.target;
    let w = &plan.workload;
    let agent = agent(t.timeout_s);
    let body = |i: usize| {
        request_body(
            t.endpoint,
            model,
            &prompts[i % prompts.len()],
            w.output_tokens,
            w.ignore_eos,
        )
    };
    let width = match load {
        Load::Closed { concurrency } => concurrency,
        Load::Open { .. } => 1,
    };
    // Warm-up: the last prompts of the set, `width` at a time.
    let warm = AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for _ in 0..width.min(plan.warmup.max(1)) {
            sc.spawn(|| {
                loop {
                    let i = warm.fetch_add(1, Ordering::SeqCst);
                    if i >= plan.warmup {
                        break;
                    }
                    let _ = send(
                        &agent,
                        t,
                        &body(prompts.len() - 1 - i % prompts.len()),
                        i,
                        Instant::now(),
                        info,
                    );
                }
            });
        }
    });
    let n = plan.num_requests;
    let deadline = plan.duration_s.map(Duration::from_secs_f64);
    crate::util::epoch();
    let start = Instant::now();
    let out: Mutex<Vec<RequestSample>> = Mutex::new(Vec::with_capacity(n));
    let finished = AtomicUsize::new(0);
    let record = |s: RequestSample| {
        out.lock().unwrap_or_else(|p| p.into_inner()).push(s);
        on_done(finished.fetch_add(1, Ordering::SeqCst) + 1, n);
    };
    let expired = || deadline.is_some_and(|d| start.elapsed() >= d);
    match load {
        Load::Closed { concurrency } => {
            let next = AtomicUsize::new(0);
            std::thread::scope(|sc| {
                for _ in 0..concurrency {
                    sc.spawn(|| {
                        loop {
                            if expired() {
                                break;
                            }
                            let i = next.fetch_add(1, Ordering::SeqCst);
                            if i >= n {
                                break;
                            }
                            let s = send(&agent, t, &body(i), i, start, info);
                            let wait = s.retry_after_s;
                            record(s);
                            if let Some(r) = wait {
                                std::thread::sleep(Duration::from_secs_f64(
                                    r.clamp(0.0, MAX_RETRY_WAIT_S),
                                ));
                            }
                        }
                    });
                }
            });
        }
        Load::Open {
            rate_rps,
            burstiness,
        } => {
            let offsets = arrival_offsets_s(n, rate_rps, burstiness, w.seed);
            std::thread::scope(|sc| {
                for (i, off) in offsets.iter().enumerate() {
                    let at = start + Duration::from_secs_f64(*off);
                    if deadline.is_some_and(|d| at.duration_since(start) >= d) {
                        break;
                    }
                    let now = Instant::now();
                    if at > now {
                        std::thread::sleep(at - now);
                    }
                    let (agent, record, body) = (&agent, &record, &body);
                    sc.spawn(move || record(send(agent, t, &body(i), i, start, info)));
                }
            });
        }
    }
    let end = Instant::now();
    let duration_s = end.duration_since(start).as_secs_f64();
    let mut samples = out.into_inner().unwrap_or_else(|p| p.into_inner());
    samples.sort_by_key(|s| s.index);
    LevelRun {
        samples,
        duration_s,
        span: crate::measure::sampler::session::TimedSpan::between(start, end),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::{self, Fake};
    use super::super::metrics::{TokenSource, summarize};
    use super::super::plan::{Slo, Workload};
    use super::*;

    /// Scheduling slack on a loaded 2-core machine: a sleep of d ms on the fake's
    /// side arrives between d and d + this many ms later on ours.
    const SLACK_MS: f64 = 60.0;

    fn plan(url: &str, endpoint: Endpoint, load: Load, n: usize) -> LoadPlan {
        LoadPlan {
            target: Target {
                url: url.into(),
                model: None,
                api_key: None,
                endpoint,
                timeout_s: 30.0,
            },
            workload: Workload {
                input_tokens: 8,
                output_tokens: 5,
                shared_prefix_tokens: 0,
                ignore_eos: true,
                seed: 1,
            },
            loads: vec![load],
            num_requests: n,
            duration_s: None,
            warmup: 0,
            slo: Slo::default(),
            model_file: None,
            roof: Default::default(),
            cache_type: None,
            sampler: false,
        }
    }

    fn run(p: &LoadPlan) -> (LevelRun, ServerInfo) {
        let info = Mutex::new(ServerInfo::default());
        let prompts = super::super::plan::synthetic_prompts(p.num_requests + p.warmup, 8, 0, 1);
        let lr = run_level(p, "fake-model", p.loads[0], &prompts, &info, &|_, _| {});
        (lr, info.into_inner().unwrap())
    }

    /// A time since send: the fake slept at least `want`, so it is never earlier.
    fn within(x: f64, want: f64) -> bool {
        x >= want - 1.0 && x <= want + SLACK_MS
    }

    /// A gap between two late-able arrivals: a late chunk shortens the next gap.
    fn near(x: f64, want: f64) -> bool {
        (x - want).abs() <= SLACK_MS
    }

    #[test]
    fn a_kept_alive_connection_the_server_closed_is_not_a_failed_request() {
        // The fake announces Keep-Alive, then closes after each stream (as llama-server
        // does): the pooled socket is dead, yet every request completes, once each.
        let url = fake::start(Fake {
            ttft_ms: 5,
            gap_ms: 1,
            split: false,
            close_kept_alive: true,
            ..Fake::default()
        });
        let p = plan(&url, Endpoint::Chat, Load::Closed { concurrency: 1 }, 6);
        let (lr, _) = run(&p);
        assert_eq!(lr.samples.len(), 6);
        for s in &lr.samples {
            assert_eq!(s.outcome, Outcome::Ok, "{:?}", s.error);
            assert_eq!(s.chunk_ms.len(), 5);
        }
        // Without the second attempt the reused socket fails, as it did against
        // llama-server: the fake really does close what it kept alive.
        let a = agent(10.0);
        let t = &p.target;
        let body = request_body(t.endpoint, "fake-model", "hi", 5, true);
        let send_once = || {
            with_auth(a.post(&format!("{url}/v1/chat/completions")), &None)
                .header("Content-Type", "application/json")
                .send(body.to_string())
                .map(|r| r.into_body().read_to_string().map(|_| ()))
        };
        assert!(matches!(send_once(), Ok(Ok(()))));
        let second = send_once();
        assert!(
            matches!(&second, Err(e) if stale_connection(e)),
            "{second:?}"
        );
    }

    #[test]
    fn metrics_of_a_fake_server_match_its_chunk_timing() {
        // TTFT 100 ms, then 4 gaps of 20 ms: E2EL ≈ 180, TPOT = (180 − 100) / 4 = 20,
        // every ITL 20; 5 tokens per request from usage.
        for endpoint in [Endpoint::Chat, Endpoint::Completions] {
            let url = fake::start(Fake::default());
            let p = plan(&url, endpoint, Load::Closed { concurrency: 2 }, 4);
            let (lr, info) = run(&p);
            assert_eq!(lr.samples.len(), 4);
            for s in &lr.samples {
                assert_eq!(s.outcome, Outcome::Ok, "{:?}", s.error);
                assert_eq!(s.chunk_ms.len(), 5, "the role-only chunk is no token");
                assert!(within(s.ttft_ms().unwrap(), 100.0), "ttft {:?}", s.chunk_ms);
                for g in s.chunk_ms.windows(2) {
                    assert!(near(g[1] - g[0], 20.0), "itl {:?}", s.chunk_ms);
                }
            }
            let pt =
                summarize(p.loads[0], lr.samples, lr.duration_s, &Slo::default(), None).unwrap();
            assert_eq!(pt.token_source, TokenSource::Usage);
            assert_eq!(
                (pt.total_output_tokens, pt.total_input_tokens),
                (20, Some(48))
            );
            assert!(within(pt.ttft.median_ms.unwrap(), 100.0));
            // TPOT ≥ 20 ms: the four gaps after the first token add up to ≥ 80 ms.
            assert!(within(pt.tpot.median_ms.unwrap(), 20.0), "{:?}", pt.tpot);
            assert!(near(pt.itl.median_ms.unwrap(), 20.0));
            assert!(within(pt.e2el.median_ms.unwrap(), 180.0));
            // 2 clients × 2 rounds of ≥ 180 ms: duration ≥ 360 ms, each round late by
            // at most the slack.
            let d = pt.duration_s * 1e3;
            assert!((359.0..=360.0 + 2.0 * SLACK_MS).contains(&d), "{d}");
            assert_eq!(info.server_header.as_deref(), Some("fake"));
            assert_eq!(info.reported_model.as_deref(), Some("fake-model"));
            if endpoint == Endpoint::Chat {
                assert_eq!(info.system_fingerprint.as_deref(), Some("fp-1"));
            }
        }
    }

    #[test]
    fn without_usage_tokens_are_counted_and_say_so() {
        let url = fake::start(Fake {
            usage: false,
            ..Fake::default()
        });
        let p = plan(&url, Endpoint::Chat, Load::Closed { concurrency: 1 }, 1);
        let (lr, _) = run(&p);
        let pt = summarize(
            p.loads[0],
            lr.samples.clone(),
            lr.duration_s,
            &Slo::default(),
            None,
        )
        .unwrap();
        assert_eq!(
            (pt.token_source, pt.total_output_tokens),
            (TokenSource::Chunks, 5)
        );
        assert_eq!(lr.samples[0].text, "t0 t1 t2 t3 t4 ");
        let words = |t: &str| Some(t.split_whitespace().count() as u64);
        let pt = summarize(
            p.loads[0],
            lr.samples,
            lr.duration_s,
            &Slo::default(),
            Some(&words),
        )
        .unwrap();
        assert_eq!(pt.token_source, TokenSource::Tokenizer);
    }

    #[test]
    fn a_429_is_counted_as_rejected_and_its_retry_after_honoured() {
        let url = fake::start(Fake {
            reject_first: 1,
            ..Fake::default()
        });
        let p = plan(&url, Endpoint::Chat, Load::Closed { concurrency: 1 }, 2);
        let (lr, _) = run(&p);
        let s0 = &lr.samples[0];
        assert_eq!(
            (s0.outcome, s0.retry_after_s),
            (Outcome::Rejected, Some(1.0))
        );
        assert!(
            s0.error.as_deref().unwrap().contains("HTTP 429"),
            "{:?}",
            s0.error
        );
        assert_eq!(lr.samples[1].outcome, Outcome::Ok);
        // The client waited Retry-After (1 s) before the second request.
        assert!(
            lr.samples[1].start_ms >= 1000.0,
            "{}",
            lr.samples[1].start_ms
        );
        let pt = summarize(p.loads[0], lr.samples, lr.duration_s, &Slo::default(), None).unwrap();
        assert_eq!((pt.n_completed, pt.n_rejected, pt.n_failed), (1, 1, 0));
        assert_eq!(pt.retry_after_max_s, Some(1.0));
    }

    #[test]
    fn an_open_loop_level_starts_requests_on_its_schedule() {
        let url = fake::start(Fake {
            ttft_ms: 5,
            gap_ms: 1,
            n_chunks: 2,
            ..Fake::default()
        });
        let mut p = plan(
            &url,
            Endpoint::Completions,
            Load::Open {
                rate_rps: 20.0,
                burstiness: 1.0,
            },
            6,
        );
        p.workload.seed = 9;
        let (lr, _) = run(&p);
        let want = arrival_offsets_s(6, 20.0, 1.0, 9);
        for (s, t) in lr.samples.iter().zip(&want) {
            assert_eq!(s.outcome, Outcome::Ok);
            assert!(
                within(s.start_ms, t * 1e3),
                "start {} want {}",
                s.start_ms,
                t * 1e3
            );
        }
    }

    #[test]
    fn unreachable_and_non_openai_servers_are_named() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        drop(l);
        let t = plan(&url, Endpoint::Chat, Load::Closed { concurrency: 1 }, 1).target;
        let e = probe_server(&t).unwrap_err();
        assert!(matches!(e, LoadtestError::Unreachable { .. }), "{e}");
        assert!(
            e.to_string()
                .contains(&format!("cannot reach {url}/v1/models")),
            "{e}"
        );
        let html = fake::start(Fake {
            models_body: "<html>hello</html>".into(),
            ..Fake::default()
        });
        let t = plan(&html, Endpoint::Chat, Load::Closed { concurrency: 1 }, 1).target;
        let e = probe_server(&t).unwrap_err().to_string();
        assert!(
            e.contains("did not answer like an OpenAI-compatible server")
                && e.contains("<html>hello"),
            "{e}"
        );
        let ok = fake::start(Fake::default());
        let t = plan(&ok, Endpoint::Chat, Load::Closed { concurrency: 1 }, 1).target;
        assert_eq!(
            probe_server(&t).unwrap().model_ids,
            vec!["fake-model".to_string()]
        );
    }

    #[test]
    fn a_request_to_nowhere_fails_with_the_url() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        drop(l);
        let p = plan(&url, Endpoint::Chat, Load::Closed { concurrency: 1 }, 1);
        let (lr, _) = run(&p);
        assert_eq!(lr.samples[0].outcome, Outcome::Failed);
        assert!(lr.samples[0].error.as_deref().unwrap().contains(&url));
        let e =
            summarize(p.loads[0], lr.samples, lr.duration_s, &Slo::default(), None).unwrap_err();
        assert!(e.to_string().contains("all 1 requests failed"), "{e}");
    }
}
