//! The OpenAI wire format: request bodies, response objects, error bodies and the
//! server-sent-event framing of streamed responses, as pure functions of the
//! scheduler's [`Event`]s (so the bytes can be checked without a server).
//!
//! Streams follow OpenAI's API: `data: {chunk}\n\n` frames; the first content chunk
//! is preceded by one with `delta: {"role": "assistant", "content": ""}` (chat); the
//! last chunk carries `finish_reason` (with the final token's text when `max_tokens`
//! ended the request, else an empty `delta` after the end-of-generation token) and
//! llama-server's `timings`; a usage chunk with `choices: []` follows only when
//! `stream_options.include_usage` is true; every stream ends with `data: [DONE]`.

use super::scheduler::{Event, Finish, FinishReason, Timings};
use crate::measure::engine::ChatMessage;
use serde::{Deserialize, Serialize};

/// `stream_options`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StreamOptions {
    /// Send a usage chunk before `[DONE]`.
    #[serde(default)]
    pub include_usage: bool,
}

/// A chat message's content: a string, or an array of parts of which only `text`
/// parts are accepted.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts.
    Parts(Vec<ContentPart>),
}

/// One content part.
#[derive(Debug, Clone, Deserialize)]
pub struct ContentPart {
    /// Part type; only `text` is supported.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default)]
    pub text: Option<String>,
}

/// One message of a chat request.
#[derive(Debug, Clone, Deserialize)]
pub struct RequestMessage {
    /// `system`, `developer`, `user`, `assistant`, `tool`.
    pub role: String,
    /// The content (`null` for an assistant turn that only called tools).
    #[serde(default)]
    pub content: Option<Content>,
}

/// Fields common to both endpoints.
#[derive(Debug, Clone, Deserialize)]
pub struct Common {
    /// Model id (optional here, as llama-server; when given it must name this model).
    #[serde(default)]
    pub model: Option<String>,
    /// Most tokens to generate (`max_completion_tokens` is the newer spelling).
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Newer spelling of `max_tokens`.
    #[serde(default)]
    pub max_completion_tokens: Option<u32>,
    /// Stream as server-sent events.
    #[serde(default)]
    pub stream: bool,
    /// Stream options.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// Sampling temperature: only 0 (greedy) is served.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Number of choices: only 1.
    #[serde(default)]
    pub n: Option<u32>,
    /// Stop sequences: not supported (only `null` or empty).
    #[serde(default)]
    pub stop: Option<serde_json::Value>,
    /// llama-server's extension: never end at an end-of-generation token (greedy picks
    /// the best other token), so a request runs to `max_tokens` or the context; load
    /// testers send it to fix each request's output length.
    #[serde(default)]
    pub ignore_eos: bool,
}

/// `POST /v1/chat/completions` body.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<RequestMessage>,
    /// Common fields.
    #[serde(flatten)]
    pub common: Common,
}

/// A prompt: a string or an array of exactly one string.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    /// One prompt.
    One(String),
    /// A batch (only length 1 is served).
    Many(Vec<String>),
}

/// `POST /v1/completions` body.
#[derive(Debug, Clone, Deserialize)]
pub struct CompletionRequest {
    /// The prompt.
    pub prompt: Prompt,
    /// Common fields.
    #[serde(flatten)]
    pub common: Common,
}

/// A request the server cannot take, with its HTTP status and OpenAI error fields.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Human-readable message naming the field and the fix.
    pub message: String,
    /// OpenAI `type`.
    pub kind: &'static str,
    /// OpenAI `code`.
    pub code: Option<&'static str>,
    /// The field at fault.
    pub param: Option<&'static str>,
}

impl ApiError {
    /// 400 `invalid_request_error`.
    pub fn bad(message: impl Into<String>, param: Option<&'static str>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            code: None,
            param,
        }
    }

    /// OpenAI's error body `{"error": {message, type, param, code}}`.
    pub fn body(&self) -> String {
        #[derive(Serialize)]
        struct Inner<'a> {
            message: &'a str,
            #[serde(rename = "type")]
            kind: &'a str,
            param: Option<&'a str>,
            code: Option<&'a str>,
        }
        #[derive(Serialize)]
        struct Outer<'a> {
            error: Inner<'a>,
        }
        serde_json::to_string(&Outer {
            error: Inner {
                message: &self.message,
                kind: self.kind,
                param: self.param,
                code: self.code,
            },
        })
        .expect("serializable")
    }
}

impl Common {
    /// Checks the sampling fields and resolves `max_tokens` against the slot's
    /// context: `prompt_tokens + max_tokens` must fit in `n_ctx_slot` (absent:
    /// everything left).
    ///
    /// # Errors
    /// [`ApiError`] 400, `context_length_exceeded` when the request does not fit.
    pub fn resolve_max_tokens(
        &self,
        prompt_tokens: usize,
        n_ctx_slot: u32,
    ) -> Result<u32, ApiError> {
        if let Some(t) = self.temperature
            && t != 0.0
        {
            return Err(ApiError::bad(
                format!(
                    "temperature {t}: memwall serve decodes greedily; send temperature 0 or leave it out"
                ),
                Some("temperature"),
            ));
        }
        if self.n.is_some_and(|n| n != 1) {
            return Err(ApiError::bad(
                "n: only 1 choice per request is served",
                Some("n"),
            ));
        }
        match &self.stop {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::Array(a)) if a.is_empty() => {}
            Some(_) => {
                return Err(ApiError::bad(
                    "stop: stop sequences are not supported; leave `stop` out",
                    Some("stop"),
                ));
            }
        }
        let ctx = n_ctx_slot as usize;
        let want = self.max_completion_tokens.or(self.max_tokens);
        if want == Some(0) {
            return Err(ApiError::bad(
                "max_tokens must be at least 1",
                Some("max_tokens"),
            ));
        }
        let too_long = |asked: usize| ApiError {
            status: 400,
            message: format!(
                "This model's maximum context length per slot is {ctx} tokens. However, you requested {} tokens ({prompt_tokens} in the messages, {asked} in the completion). Please reduce the length of the messages or completion (or start the server with a larger --ctx-size or fewer --parallel slots).",
                prompt_tokens + asked
            ),
            kind: "invalid_request_error",
            code: Some("context_length_exceeded"),
            param: Some("messages"),
        };
        match want {
            Some(m) if prompt_tokens + m as usize > ctx => Err(too_long(m as usize)),
            Some(m) => Ok(m),
            None if prompt_tokens >= ctx => Err(too_long(1)),
            None => Ok((ctx - prompt_tokens) as u32),
        }
    }

    /// Whether a usage chunk is wanted.
    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage)
    }
}

impl ChatRequest {
    /// The messages as the template sees them (text parts joined).
    ///
    /// # Errors
    /// [`ApiError`] 400 for no messages or a non-text part.
    pub fn chat_messages(&self) -> Result<Vec<ChatMessage>, ApiError> {
        if self.messages.is_empty() {
            return Err(ApiError::bad(
                "messages: at least one message is required",
                Some("messages"),
            ));
        }
        self.messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let content = match &m.content {
                    None => String::new(),
                    Some(Content::Text(s)) => s.clone(),
                    Some(Content::Parts(ps)) => {
                        let mut s = String::new();
                        for p in ps {
                            match (p.kind.as_str(), &p.text) {
                                ("text", Some(t)) => s.push_str(t),
                                (k, _) => {
                                    return Err(ApiError::bad(
                                        format!("messages[{i}].content: part type {k:?} is not supported (text only)"),
                                        Some("messages"),
                                    ));
                                }
                            }
                        }
                        s
                    }
                };
                Ok(ChatMessage {
                    role: m.role.clone(),
                    content,
                })
            })
            .collect()
    }
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Serialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens reused from the cache.
    pub cached_tokens: u32,
}

/// `usage`.
#[derive(Debug, Clone, Serialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Generated tokens.
    pub completion_tokens: u32,
    /// Their sum.
    pub total_tokens: u32,
    /// Cached prompt tokens.
    pub prompt_tokens_details: PromptTokensDetails,
}

impl Usage {
    /// From a finished request.
    pub fn of(f: &Finish) -> Usage {
        Usage {
            prompt_tokens: f.prompt_tokens,
            completion_tokens: f.completion_tokens,
            total_tokens: f.prompt_tokens + f.completion_tokens,
            prompt_tokens_details: PromptTokensDetails {
                cached_tokens: f.timings.cache_n,
            },
        }
    }
}

/// Which endpoint a response belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completion,
}

/// Identity fields every response object repeats.
#[derive(Debug, Clone)]
pub struct Ident {
    /// `chatcmpl-N` / `cmpl-N`.
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    /// Model id.
    pub model: String,
    /// `system_fingerprint`.
    pub fingerprint: String,
}

#[derive(Serialize)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
}

#[derive(Serialize)]
struct ChatChoiceChunk<'a> {
    index: u32,
    delta: Delta<'a>,
    logprobs: Option<()>,
    finish_reason: Option<FinishReason>,
}

#[derive(Serialize)]
struct TextChoice<'a> {
    index: u32,
    text: &'a str,
    logprobs: Option<()>,
    finish_reason: Option<FinishReason>,
}

#[derive(Serialize)]
struct ChatMessageOut<'a> {
    role: &'a str,
    content: &'a str,
}

#[derive(Serialize)]
struct ChatChoice<'a> {
    index: u32,
    message: ChatMessageOut<'a>,
    logprobs: Option<()>,
    finish_reason: FinishReason,
}

#[derive(Serialize)]
struct Object<'a, C: Serialize> {
    id: &'a str,
    object: &'a str,
    created: u64,
    model: &'a str,
    system_fingerprint: &'a str,
    choices: Vec<C>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timings: Option<Timings>,
}

fn frame(json: &str) -> String {
    format!("data: {json}\n\n")
}

/// The last frame of every stream.
pub const DONE_FRAME: &str = "data: [DONE]\n\n";

/// Turns one request's events into SSE frames.
#[derive(Debug)]
pub struct SseWriter {
    ep: Endpoint,
    ident: Ident,
    include_usage: bool,
    role_sent: bool,
    ended: bool,
}

impl SseWriter {
    /// A writer for one streamed response.
    pub fn new(ep: Endpoint, ident: Ident, include_usage: bool) -> SseWriter {
        SseWriter {
            ep,
            ident,
            include_usage,
            role_sent: false,
            ended: false,
        }
    }

    /// Whether `[DONE]` was written.
    pub fn ended(&self) -> bool {
        self.ended
    }

    fn object<C: Serialize>(
        &self,
        choices: Vec<C>,
        usage: Option<Usage>,
        timings: Option<Timings>,
    ) -> String {
        let object = match self.ep {
            Endpoint::Chat => "chat.completion.chunk",
            Endpoint::Completion => "text_completion",
        };
        serde_json::to_string(&Object {
            id: &self.ident.id,
            object,
            created: self.ident.created,
            model: &self.ident.model,
            system_fingerprint: &self.ident.fingerprint,
            choices,
            usage,
            timings,
        })
        .expect("serializable")
    }

    fn content(&mut self, text: &str, finish: Option<&Finish>) -> String {
        let mut out = String::new();
        let reason = finish.map(|f| f.reason);
        let timings = finish.map(|f| f.timings);
        match self.ep {
            Endpoint::Chat => {
                if !self.role_sent {
                    self.role_sent = true;
                    out += &frame(&self.object(
                        vec![ChatChoiceChunk {
                            index: 0,
                            delta: Delta {
                                role: Some("assistant"),
                                content: Some(""),
                            },
                            logprobs: None,
                            finish_reason: None,
                        }],
                        None,
                        None,
                    ));
                }
                let delta = Delta {
                    role: None,
                    content: (!text.is_empty() || finish.is_none()).then_some(text),
                };
                out += &frame(&self.object(
                    vec![ChatChoiceChunk {
                        index: 0,
                        delta,
                        logprobs: None,
                        finish_reason: reason,
                    }],
                    None,
                    timings,
                ));
            }
            Endpoint::Completion => {
                out += &frame(&self.object(
                    vec![TextChoice {
                        index: 0,
                        text,
                        logprobs: None,
                        finish_reason: reason,
                    }],
                    None,
                    timings,
                ));
            }
        }
        out
    }

    /// The frames for `ev` (empty for `Started`).
    pub fn on_event(&mut self, ev: &Event) -> String {
        if self.ended {
            return String::new();
        }
        match ev {
            Event::Started { .. } => String::new(),
            Event::Text(t) => self.content(t, None),
            Event::Done(f) => {
                let mut out = self.content(&f.text, Some(f));
                if self.include_usage {
                    out += &frame(&self.object::<()>(Vec::new(), Some(Usage::of(f)), None));
                }
                out += DONE_FRAME;
                self.ended = true;
                out
            }
            Event::Failed(msg) => self.error(&ApiError {
                status: 500,
                message: msg.clone(),
                kind: "server_error",
                code: None,
                param: None,
            }),
        }
    }

    /// An error frame and `[DONE]` (a stream that fails after it started).
    pub fn error(&mut self, e: &ApiError) -> String {
        self.ended = true;
        frame(&e.body()) + DONE_FRAME
    }
}

/// The non-streamed response for a finished request whose text is `text`.
pub fn full_response(ep: Endpoint, ident: &Ident, text: &str, f: &Finish) -> String {
    let w = SseWriter::new(ep, ident.clone(), false);
    let usage = Some(Usage::of(f));
    let timings = Some(f.timings);
    let json = match ep {
        Endpoint::Chat => serde_json::to_string(&Object {
            id: &ident.id,
            object: "chat.completion",
            created: ident.created,
            model: &ident.model,
            system_fingerprint: &ident.fingerprint,
            choices: vec![ChatChoice {
                index: 0,
                message: ChatMessageOut {
                    role: "assistant",
                    content: text,
                },
                logprobs: None,
                finish_reason: f.reason,
            }],
            usage,
            timings,
        }),
        Endpoint::Completion => serde_json::to_string(&Object {
            id: &ident.id,
            object: "text_completion",
            created: ident.created,
            model: &ident.model,
            system_fingerprint: &ident.fingerprint,
            choices: vec![TextChoice {
                index: 0,
                text,
                logprobs: None,
                finish_reason: Some(f.reason),
            }],
            usage,
            timings,
        }),
    };
    drop(w);
    json.expect("serializable")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ident() -> Ident {
        Ident {
            id: "chatcmpl-7".into(),
            created: 1700000000,
            model: "m".into(),
            fingerprint: "fp".into(),
        }
    }

    fn finish(reason: FinishReason, text: &str) -> Finish {
        Finish {
            text: text.into(),
            reason,
            prompt_tokens: 10,
            completion_tokens: 2,
            timings: Timings::new(
                4,
                6,
                Duration::from_millis(30),
                2,
                Duration::from_millis(20),
            ),
        }
    }

    const TIMINGS: &str = r#""timings":{"cache_n":4,"prompt_n":6,"prompt_ms":30.0,"prompt_per_second":200.0,"predicted_n":2,"predicted_ms":20.0,"predicted_per_second":50.0}"#;

    #[test]
    fn chat_stream_frames_are_openais() {
        let mut w = SseWriter::new(Endpoint::Chat, ident(), true);
        let mut out = String::new();
        for ev in [
            Event::Started {
                slot: 0,
                start_seq: 0,
                cached_tokens: 4,
            },
            Event::Text("Hi".into()),
            Event::Done(finish(FinishReason::Length, "!")),
        ] {
            out += &w.on_event(&ev);
        }
        let head = r#"{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1700000000,"model":"m","system_fingerprint":"fp","choices":"#;
        let want = format!(
            "data: {head}[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n\
             data: {head}[{{\"index\":0,\"delta\":{{\"content\":\"Hi\"}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n\
             data: {head}[{{\"index\":0,\"delta\":{{\"content\":\"!\"}},\"logprobs\":null,\"finish_reason\":\"length\"}}],{TIMINGS}}}\n\n\
             data: {head}[],\"usage\":{{\"prompt_tokens\":10,\"completion_tokens\":2,\"total_tokens\":12,\"prompt_tokens_details\":{{\"cached_tokens\":4}}}}}}\n\n\
             data: [DONE]\n\n"
        );
        assert_eq!(out, want);
        assert!(w.ended());
    }

    #[test]
    fn a_stop_after_the_last_token_sends_an_empty_delta_and_no_usage_unless_asked() {
        let mut w = SseWriter::new(Endpoint::Chat, ident(), false);
        let mut out = w.on_event(&Event::Text("a".into()));
        out += &w.on_event(&Event::Done(finish(FinishReason::Stop, "")));
        let frames: Vec<&str> = out.split("\n\n").filter(|s| !s.is_empty()).collect();
        assert_eq!(frames.len(), 4, "{out}");
        assert!(
            frames[2].contains(r#""delta":{},"logprobs":null,"finish_reason":"stop""#),
            "{}",
            frames[2]
        );
        assert!(!out.contains("usage"));
        assert_eq!(frames[3], "data: [DONE]");
    }

    #[test]
    fn completion_stream_frames() {
        let mut w = SseWriter::new(
            Endpoint::Completion,
            Ident {
                id: "cmpl-1".into(),
                ..ident()
            },
            false,
        );
        let out = w.on_event(&Event::Text("x".into()))
            + &w.on_event(&Event::Done(finish(FinishReason::Stop, "")));
        let head = r#"{"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"m","system_fingerprint":"fp","choices":"#;
        let want = format!(
            "data: {head}[{{\"index\":0,\"text\":\"x\",\"logprobs\":null,\"finish_reason\":null}}]}}\n\n\
             data: {head}[{{\"index\":0,\"text\":\"\",\"logprobs\":null,\"finish_reason\":\"stop\"}}],{TIMINGS}}}\n\n\
             data: [DONE]\n\n"
        );
        assert_eq!(out, want);
    }

    #[test]
    fn full_chat_response_and_error_body() {
        let s = full_response(
            Endpoint::Chat,
            &ident(),
            "Hi!",
            &finish(FinishReason::Stop, ""),
        );
        assert_eq!(
            s,
            format!(
                "{{\"id\":\"chatcmpl-7\",\"object\":\"chat.completion\",\"created\":1700000000,\"model\":\"m\",\"system_fingerprint\":\"fp\",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"Hi!\"}},\"logprobs\":null,\"finish_reason\":\"stop\"}}],\"usage\":{{\"prompt_tokens\":10,\"completion_tokens\":2,\"total_tokens\":12,\"prompt_tokens_details\":{{\"cached_tokens\":4}}}},{TIMINGS}}}"
            )
        );
        let e = ApiError::bad("bad", Some("messages"));
        assert_eq!(
            e.body(),
            r#"{"error":{"message":"bad","type":"invalid_request_error","param":"messages","code":null}}"#
        );
    }

    #[test]
    fn max_tokens_must_fit_the_slot() {
        let c: Common = serde_json::from_str(r#"{"max_tokens": 10}"#).unwrap();
        assert_eq!(c.resolve_max_tokens(90, 100), Ok(10));
        let e = c.resolve_max_tokens(91, 100).unwrap_err();
        assert_eq!(e.code, Some("context_length_exceeded"));
        assert!(
            e.message
                .contains("101 tokens (91 in the messages, 10 in the completion)"),
            "{}",
            e.message
        );
        let c: Common = serde_json::from_str("{}").unwrap();
        assert_eq!(c.resolve_max_tokens(90, 100), Ok(10));
        assert!(c.resolve_max_tokens(100, 100).is_err());
        let c: Common = serde_json::from_str(r#"{"temperature": 0.7}"#).unwrap();
        assert!(
            c.resolve_max_tokens(1, 100)
                .unwrap_err()
                .message
                .contains("greedily")
        );
        let c: Common =
            serde_json::from_str(r#"{"temperature": 0, "stop": null, "n": 1}"#).unwrap();
        assert_eq!(c.resolve_max_tokens(1, 100), Ok(99));
    }
}
