//! A chat turn against any OpenAI-compatible server (memwall serve, llama-server,
//! vLLM, LM Studio): `POST /v1/chat/completions` streamed over SSE, with TTFT and
//! the decode rate **measured at the client** from the chunks' arrival times (the
//! same clock and definitions as the load test: TTFT = send → first content chunk;
//! decode rate = (n − 1) ÷ (last content chunk − first content chunk), n the
//! server's `usage.completion_tokens` once it arrives, else the content chunks
//! counted), and the server's own llama-server-style `timings` when its final
//! chunk carries them.

use super::LoadtestError;
use super::metrics::TokenSource;
use super::plan::{Endpoint, Target};
use super::run::probe_server;
use super::sse::SseParser;
use crate::experiments::{JobError, blocking};
use crate::measure::engine::ChatMessage;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Longest a turn may take, s.
pub const TURN_TIMEOUT_S: f64 = 600.0;

/// One chat turn sent to a URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct UrlChatRequest {
    /// Base URL, e.g. `http://127.0.0.1:8080` (a trailing `/v1` is accepted).
    pub url: String,
    /// `model` of the request; `None` or empty: the first id `GET /v1/models` lists.
    pub model: Option<String>,
    /// Bearer key, when the server wants one.
    pub api_key: Option<String>,
    /// The conversation so far, ending with the user's message.
    pub messages: Vec<ChatMessage>,
    pub max_tokens: u32,
}

/// llama-server's per-request `timings`, as the server sent them (memwall serve and
/// llama-server send them on the final chunk); each `None` when absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct ServerTimings {
    /// Prompt tokens reused from the server's cache.
    pub cache_n: Option<u64>,
    /// Prompt tokens the server prefilled.
    pub prompt_n: Option<u64>,
    /// The server's prefill time, ms.
    pub prompt_ms: Option<f64>,
    /// The server's prefill rate, tok/s.
    pub prompt_per_second: Option<f64>,
    /// Tokens the server generated.
    pub predicted_n: Option<u64>,
    /// The server's decode time, ms.
    pub predicted_ms: Option<f64>,
    /// The server's decode rate, tok/s.
    pub predicted_per_second: Option<f64>,
}

impl ServerTimings {
    fn of(v: &serde_json::Value) -> ServerTimings {
        let u = |k: &str| v.get(k).and_then(|x| x.as_u64());
        let f = |k: &str| v.get(k).and_then(|x| x.as_f64());
        ServerTimings {
            cache_n: u("cache_n"),
            prompt_n: u("prompt_n"),
            prompt_ms: f("prompt_ms"),
            prompt_per_second: f("prompt_per_second"),
            predicted_n: u("predicted_n"),
            predicted_ms: f("predicted_ms"),
            predicted_per_second: f("predicted_per_second"),
        }
    }
}

/// A turn's figures, measured at the client (times from the moment the request was
/// handed to the HTTP client, monotonic clock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct UrlChatStats {
    /// The model the request named.
    pub model: String,
    /// `model` the chunks reported (what answered), when sent.
    pub server_model: Option<String>,
    /// Chunks that carried output text so far.
    pub n_chunks: u32,
    /// `usage.completion_tokens`, once the server sent usage (the last chunks).
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens`, once sent.
    pub prompt_tokens: Option<u64>,
    /// Where the decode rate's token count comes from: `usage` or `chunks`.
    pub token_source: TokenSource,
    /// Send → first content chunk, ms.
    pub ttft_ms: Option<f64>,
    /// Send → the latest content chunk, ms.
    pub last_chunk_ms: Option<f64>,
    /// Send → end of the stream (E2EL), ms; `None` while streaming.
    pub e2el_ms: Option<f64>,
    /// (n − 1) ÷ (last − first content chunk), tok/s; `None` below 2 tokens.
    pub decode_tps: Option<f64>,
    /// `finish_reason` of the last choice that had one.
    pub finish_reason: Option<String>,
    /// The turn was stopped from the client.
    pub cancelled: bool,
    /// The server's own `timings` (final chunk), when it sent them.
    pub timings: Option<ServerTimings>,
}

impl UrlChatStats {
    /// Recomputes the decode rate from the counts and times so far.
    fn rate(&mut self) {
        let n = match self.completion_tokens {
            Some(n) => {
                self.token_source = TokenSource::Usage;
                n
            }
            None => {
                self.token_source = TokenSource::Chunks;
                self.n_chunks as u64
            }
        };
        self.decode_tps = match (self.ttft_ms, self.last_chunk_ms) {
            (Some(a), Some(b)) if n >= 2 && b > a => Some((n - 1) as f64 / ((b - a) / 1e3)),
            _ => None,
        };
    }
}

/// What a turn reports while it streams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum UrlChatEvent {
    /// The request was sent.
    Started {
        /// The base URL.
        url: String,
        /// The model asked for.
        model: String,
    },
    /// New output text and the figures so far.
    Token {
        /// Text to append.
        text: String,
        /// Figures after this chunk.
        stats: UrlChatStats,
    },
    /// The stream ended.
    Done {
        /// Final figures (usage and the server's timings when sent).
        stats: UrlChatStats,
    },
}

fn target(r: &UrlChatRequest) -> Result<Target, LoadtestError> {
    let t = Target {
        url: r.url.trim().to_string(),
        model: r.model.clone().filter(|m| !m.trim().is_empty()),
        api_key: r.api_key.clone().filter(|k| !k.is_empty()),
        endpoint: Endpoint::Chat,
        timeout_s: TURN_TIMEOUT_S,
    };
    let base = t.base();
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(LoadtestError::Options(format!(
            "URL {:?}: give an http:// or https:// base URL, e.g. http://127.0.0.1:8080",
            r.url
        )));
    }
    if r.messages.is_empty() {
        return Err(LoadtestError::Options(
            "no messages: type a message first".into(),
        ));
    }
    if r.max_tokens == 0 {
        return Err(LoadtestError::Options(
            "max tokens 0: use at least 1".into(),
        ));
    }
    Ok(t)
}

/// Sends one streamed chat turn to `r.url` and reads it as it arrives, calling
/// `on_event` with [`UrlChatEvent::Token`] for each content chunk. `cancel` stops
/// reading (the connection is closed, which memwall serve and llama-server take as
/// a cancel) after the current read.
///
/// # Errors
/// [`LoadtestError::Options`] (bad URL, no messages), [`LoadtestError::Unreachable`],
/// [`LoadtestError::NotOpenAi`] (a status other than 200, a stream that is not
/// OpenAI-shaped, an error event, a stream cut off).
pub fn chat_url(
    r: &UrlChatRequest,
    cancel: &AtomicBool,
    on_event: &mut dyn FnMut(UrlChatEvent),
) -> Result<UrlChatStats, LoadtestError> {
    let t = target(r)?;
    let model = match &t.model {
        Some(m) => m.clone(),
        None => probe_server(&t)?
            .model_ids
            .into_iter()
            .next()
            .ok_or_else(|| LoadtestError::NotOpenAi {
                url: format!("{}/v1/models", t.base()),
                problem: "it lists no model; name one in the model field".into(),
            })?,
    };
    let url = format!("{}{}", t.base(), t.endpoint.path());
    let body = serde_json::json!({
        "model": model,
        "messages": r.messages,
        "max_tokens": r.max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
        "temperature": 0.0,
    });
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs_f64(t.timeout_s)))
        .timeout_connect(Some(Duration::from_secs(5)))
        .build()
        .into();
    let mut req = agent.post(&url).header("Content-Type", "application/json");
    if let Some(k) = &t.api_key {
        req = req.header("Authorization", &format!("Bearer {k}"));
    }
    let not = |problem: String| LoadtestError::NotOpenAi {
        url: url.clone(),
        problem,
    };
    let t0 = Instant::now();
    let ms = |i: Instant| i.duration_since(t0).as_secs_f64() * 1e3;
    on_event(UrlChatEvent::Started {
        url: t.base(),
        model: model.clone(),
    });
    let resp = req
        .send(body.to_string())
        .map_err(|e| LoadtestError::Unreachable {
            url: url.clone(),
            msg: e.to_string(),
        })?;
    let status = resp.status().as_u16();
    if status != 200 {
        let text = resp
            .into_body()
            .with_config()
            .limit(1 << 16)
            .read_to_string()
            .unwrap_or_default();
        let hint = match status {
            401 | 403 => " (the server wants an API key: fill in the key field)",
            404 => " (wrong model name, or the URL is not the server's base URL)",
            _ => "",
        };
        return Err(not(format!("HTTP {status}{hint}: {}", text.trim())));
    }
    let mut s = UrlChatStats {
        model,
        server_model: None,
        n_chunks: 0,
        completion_tokens: None,
        prompt_tokens: None,
        token_source: TokenSource::Chunks,
        ttft_ms: None,
        last_chunk_ms: None,
        e2el_ms: None,
        decode_tps: None,
        finish_reason: None,
        cancelled: false,
        timings: None,
    };
    let mut reader = resp.into_body().into_reader();
    let mut parser = SseParser::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut done = false;
    loop {
        if cancel.load(Ordering::Relaxed) {
            s.cancelled = true;
            break;
        }
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => return Err(not(format!("reading the stream: {e}"))),
        };
        let at = ms(Instant::now());
        for ev in parser.feed(&buf[..n]) {
            let data = ev.data.trim();
            if data == "[DONE]" {
                done = true;
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(data)
                .map_err(|e| not(format!("an event is not JSON ({e}): {data:?}")))?;
            if let Some(err) = v.get("error") {
                return Err(not(format!("the server streamed an error: {err}")));
            }
            let mut text = String::new();
            for c in v
                .get("choices")
                .and_then(|c| c.as_array())
                .into_iter()
                .flatten()
            {
                for k in ["reasoning_content", "reasoning", "content"] {
                    if let Some(x) = c.pointer(&format!("/delta/{k}")).and_then(|x| x.as_str()) {
                        text.push_str(x);
                    }
                }
                if let Some(f) = c.get("finish_reason").and_then(|x| x.as_str()) {
                    s.finish_reason = Some(f.to_string());
                }
            }
            if let Some(m) = v.get("model").and_then(|x| x.as_str()) {
                s.server_model = Some(m.to_string());
            }
            if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
                s.completion_tokens = u.get("completion_tokens").and_then(|x| x.as_u64());
                s.prompt_tokens = u.get("prompt_tokens").and_then(|x| x.as_u64());
            }
            if let Some(tm) = v.get("timings").filter(|x| x.is_object()) {
                s.timings = Some(ServerTimings::of(tm));
            }
            if !text.is_empty() {
                s.n_chunks += 1;
                s.ttft_ms.get_or_insert(at);
                s.last_chunk_ms = Some(at);
                s.rate();
                on_event(UrlChatEvent::Token {
                    text,
                    stats: s.clone(),
                });
            }
        }
        if done {
            break;
        }
    }
    s.e2el_ms = Some(ms(Instant::now()));
    s.rate();
    if !s.cancelled {
        if parser.pending() {
            return Err(not("the stream was cut off inside an event".into()));
        }
        if !done && s.finish_reason.is_none() {
            return Err(not(
                "the stream ended without data: [DONE] or a finish_reason".into(),
            ));
        }
    }
    on_event(UrlChatEvent::Done { stats: s.clone() });
    Ok(s)
}

/// [`chat_url`] on tokio's blocking pool: the one call of the app's chat page when
/// it talks to a URL.
///
/// # Errors
/// As [`chat_url`].
pub async fn url_chat_job(
    r: UrlChatRequest,
    cancel: Arc<AtomicBool>,
    mut on_event: impl FnMut(UrlChatEvent) + Send + 'static,
) -> Result<UrlChatStats, JobError> {
    Ok(blocking(move || chat_url(&r, &cancel, &mut on_event)).await??)
}

#[cfg(test)]
mod tests {
    use super::super::fake::{self, Fake};
    use super::*;

    fn req(url: String) -> UrlChatRequest {
        UrlChatRequest {
            url,
            model: None,
            api_key: None,
            messages: vec![ChatMessage {
                role: "user".into(),
                content: "hi".into(),
            }],
            max_tokens: 8,
        }
    }

    /// Against the fake (first chunk after 100 ms, then one every 20 ms, 5 chunks,
    /// usage at the end): the text is the chunks joined, TTFT is at least the fake's
    /// delay, the decode rate is (5 − 1) ÷ (last − first) from the stamped times and
    /// cannot exceed 4 ÷ 80 ms = 50 tok/s, and the count comes from usage at the end.
    #[test]
    fn a_streamed_turn_is_timed_at_the_client() {
        let url = fake::start(Fake {
            ttft_ms: 100,
            gap_ms: 20,
            ..Fake::default()
        });
        let mut text = String::new();
        let mut events = Vec::new();
        let s = chat_url(&req(url), &AtomicBool::new(false), &mut |e| {
            if let UrlChatEvent::Token { text: t, stats } = &e {
                text.push_str(t);
                assert_eq!(stats.token_source, TokenSource::Chunks, "no usage yet");
            }
            events.push(e);
        })
        .unwrap();
        assert_eq!(text, "t0 t1 t2 t3 t4 ");
        assert_eq!(s.model, "fake-model", "the first id /v1/models lists");
        assert_eq!(s.n_chunks, 5);
        assert_eq!((s.completion_tokens, s.prompt_tokens), (Some(5), Some(12)));
        assert_eq!(s.token_source, TokenSource::Usage);
        let (ttft, last, e2el) = (
            s.ttft_ms.unwrap(),
            s.last_chunk_ms.unwrap(),
            s.e2el_ms.unwrap(),
        );
        assert!(ttft >= 100.0 && ttft < last && last <= e2el, "{s:?}");
        assert!(last - ttft >= 80.0, "four 20 ms gaps: {s:?}");
        let want = 4.0 / ((last - ttft) / 1e3);
        assert!((s.decode_tps.unwrap() - want).abs() < 1e-9);
        assert!(s.decode_tps.unwrap() <= 50.0);
        assert_eq!(s.finish_reason.as_deref(), Some("length"));
        assert_eq!(s.timings, None, "the fake sends no timings");
        assert!(matches!(events.first(), Some(UrlChatEvent::Started { .. })));
        assert!(matches!(events.last(), Some(UrlChatEvent::Done { stats }) if *stats == s));
        assert_eq!(events.len(), 7);
    }

    #[test]
    fn a_cancelled_turn_stops_reading_and_says_so() {
        let url = fake::start(Fake {
            ttft_ms: 10,
            gap_ms: 100,
            n_chunks: 20,
            ..Fake::default()
        });
        let cancel = AtomicBool::new(false);
        let s = chat_url(&req(url), &cancel, &mut |e| {
            if let UrlChatEvent::Token { stats, .. } = e
                && stats.n_chunks == 2
            {
                cancel.store(true, Ordering::Relaxed);
            }
        })
        .unwrap();
        assert!(s.cancelled);
        assert!(s.n_chunks < 20, "{s:?}");
    }

    #[test]
    fn bad_input_is_named_before_anything_is_sent() {
        let e = chat_url(
            &req("localhost:8080".into()),
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("\"localhost:8080\"") && e.contains("http://"),
            "{e}"
        );
        let mut r = req("http://127.0.0.1:9".into());
        r.messages.clear();
        let e = chat_url(&r, &AtomicBool::new(false), &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("no messages"), "{e}");
        let e = chat_url(
            &req("http://127.0.0.1:9".into()),
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("cannot reach http://127.0.0.1:9/v1/models"),
            "{e}"
        );
    }
}
