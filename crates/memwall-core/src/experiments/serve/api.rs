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
use serde_json::Value;
use std::borrow::Cow;

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
    pub prompt: Prompt,
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
    pub param: Option<Cow<'static, str>>,
}

impl ApiError {
    /// 400 `invalid_request_error`.
    pub fn bad(message: impl Into<String>, param: Option<&'static str>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            code: None,
            param: param.map(Cow::Borrowed),
        }
    }

    /// 400 `invalid_request_error` naming a field known only at run time.
    pub fn bad_field(message: impl Into<String>, param: String) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            code: None,
            param: Some(Cow::Owned(param)),
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
                param: self.param.as_deref(),
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
            param: Some(Cow::Borrowed("messages")),
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
    /// The messages as the template sees them (text parts joined; `developer` as
    /// `system`).
    ///
    /// # Errors
    /// [`ApiError`] 400 for no messages, a non-text part or a role other than
    /// system, developer, user, assistant and tool.
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
                let role = match m.role.as_str() {
                    "system" | "user" | "assistant" | "tool" => m.role.clone(),
                    // OpenAI's newer name for the system message; chat templates
                    // know `system` only (Qwen2.5's drops any other role).
                    "developer" => "system".into(),
                    r => {
                        return Err(ApiError::bad_field(
                            format!("messages[{i}].role {r:?}: memwall serve takes the roles system, developer (as system), user, assistant and tool; a message of another role would not reach the model"),
                            format!("messages[{i}].role"),
                        ));
                    }
                };
                Ok(ChatMessage { role, content })
            })
            .collect()
    }
}

/// What memwall serve does with a request field it knows.
#[derive(Debug, Clone, Copy)]
enum Rule {
    /// Read by the typed request and honoured (`temperature`, `n` and `stop` are
    /// checked there: [`Common::resolve_max_tokens`]).
    Served,
    /// Changes nothing memwall serve sends back (greedy decoding, one stateless
    /// server): accepted when its value is well-formed.
    NoEffect {
        /// A well-formed value.
        ok: fn(&Value) -> bool,
        /// What a well-formed value is.
        form: &'static str,
    },
    /// Would change what the client gets, and memwall serve does not implement it:
    /// accepted only at a value that asks for nothing.
    Unsupported {
        /// A value that asks for nothing.
        neutral: fn(&Value) -> bool,
        /// What is not implemented.
        what: &'static str,
        /// The values accepted.
        fix: &'static str,
    },
}

/// Which endpoint a field belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum On {
    Both,
    Chat,
    Completion,
}

fn null(v: &Value) -> bool {
    v.is_null()
}
fn null_or_false(v: &Value) -> bool {
    v.is_null() || v == &Value::Bool(false)
}
fn null_or_true(v: &Value) -> bool {
    v.is_null() || v == &Value::Bool(true)
}
fn null_or_bool(v: &Value) -> bool {
    v.is_null() || v.is_boolean()
}
fn null_or_string(v: &Value) -> bool {
    v.is_null() || v.is_string()
}
fn null_or_object(v: &Value) -> bool {
    v.is_null() || v.is_object()
}
fn null_or_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}
fn null_or_num(v: &Value, want: f64) -> bool {
    v.is_null() || v.as_f64() == Some(want)
}
fn null_or_zero(v: &Value) -> bool {
    null_or_num(v, 0.0)
}
fn null_or_one(v: &Value) -> bool {
    null_or_num(v, 1.0)
}
fn null_or_unit(v: &Value) -> bool {
    v.is_null() || v.as_f64().is_some_and(|x| (0.0..=1.0).contains(&x))
}
fn null_or_int(v: &Value) -> bool {
    v.is_null() || v.is_i64() || v.is_u64()
}
fn null_or_count(v: &Value) -> bool {
    v.is_null() || v.is_u64()
}
fn no_tool_choice(v: &Value) -> bool {
    v.is_null() || v == "none" || v == "auto"
}
fn text_format(v: &Value) -> bool {
    v.is_null() || v.get("type").is_some_and(|t| t == "text")
}
fn text_only(v: &Value) -> bool {
    v.is_null() || v.as_array().is_some_and(|a| a.iter().all(|m| m == "text"))
}

const FIELDS: &[(&str, On, Rule)] = &[
    ("model", On::Both, Rule::Served),
    ("messages", On::Chat, Rule::Served),
    ("prompt", On::Completion, Rule::Served),
    ("max_tokens", On::Both, Rule::Served),
    ("max_completion_tokens", On::Both, Rule::Served),
    ("stream", On::Both, Rule::Served),
    ("stream_options", On::Both, Rule::Served),
    ("temperature", On::Both, Rule::Served),
    ("n", On::Both, Rule::Served),
    ("stop", On::Both, Rule::Served),
    ("ignore_eos", On::Both, Rule::Served),
    // Greedy decoding takes the most likely token: it is inside any nucleus, any top
    // k ≥ 1 and above any min-p share, and no random number is drawn.
    (
        "top_p",
        On::Both,
        Rule::NoEffect {
            ok: null_or_unit,
            form: "a number from 0 to 1 (the greedy token is always inside the nucleus)",
        },
    ),
    (
        "top_k",
        On::Both,
        Rule::NoEffect {
            ok: null_or_count,
            form: "a whole number ≥ 0 (the greedy token is always among the top k)",
        },
    ),
    (
        "min_p",
        On::Both,
        Rule::NoEffect {
            ok: null_or_unit,
            form: "a number from 0 to 1 (the greedy token always passes min-p)",
        },
    ),
    (
        "seed",
        On::Both,
        Rule::NoEffect {
            ok: null_or_int,
            form: "an integer (greedy decoding draws no random numbers)",
        },
    ),
    (
        "user",
        On::Both,
        Rule::NoEffect {
            ok: null_or_string,
            form: "a string",
        },
    ),
    (
        "safety_identifier",
        On::Both,
        Rule::NoEffect {
            ok: null_or_string,
            form: "a string",
        },
    ),
    (
        "prompt_cache_key",
        On::Both,
        Rule::NoEffect {
            ok: null_or_string,
            form: "a string (memwall serve reuses any cached prefix by itself)",
        },
    ),
    (
        "service_tier",
        On::Both,
        Rule::NoEffect {
            ok: null_or_string,
            form: "a string",
        },
    ),
    (
        "metadata",
        On::Both,
        Rule::NoEffect {
            ok: null_or_object,
            form: "an object",
        },
    ),
    (
        "parallel_tool_calls",
        On::Chat,
        Rule::NoEffect {
            ok: null_or_bool,
            form: "true or false (no tools are served)",
        },
    ),
    (
        "cache_prompt",
        On::Both,
        Rule::Unsupported {
            neutral: null_or_true,
            what: "turning prefix reuse off (a cached prefix is always reused)",
            fix: "true",
        },
    ),
    (
        "presence_penalty",
        On::Both,
        Rule::Unsupported {
            neutral: null_or_zero,
            what: "presence penalties (tokens are taken greedily from the model's own logits)",
            fix: "0",
        },
    ),
    (
        "frequency_penalty",
        On::Both,
        Rule::Unsupported {
            neutral: null_or_zero,
            what: "frequency penalties (tokens are taken greedily from the model's own logits)",
            fix: "0",
        },
    ),
    (
        "repeat_penalty",
        On::Both,
        Rule::Unsupported {
            neutral: null_or_one,
            what: "repetition penalties",
            fix: "1",
        },
    ),
    (
        "repetition_penalty",
        On::Both,
        Rule::Unsupported {
            neutral: null_or_one,
            what: "repetition penalties",
            fix: "1",
        },
    ),
    (
        "logit_bias",
        On::Both,
        Rule::Unsupported {
            neutral: null_or_empty,
            what: "logit biases",
            fix: "{}",
        },
    ),
    (
        "store",
        On::Both,
        Rule::Unsupported {
            neutral: null_or_false,
            what: "stored completions",
            fix: "false",
        },
    ),
    (
        "logprobs",
        On::Chat,
        Rule::Unsupported {
            neutral: null_or_false,
            what: "log probabilities",
            fix: "false",
        },
    ),
    (
        "top_logprobs",
        On::Chat,
        Rule::Unsupported {
            neutral: null_or_zero,
            what: "log probabilities",
            fix: "0",
        },
    ),
    (
        "logprobs",
        On::Completion,
        Rule::Unsupported {
            neutral: null,
            what: "log probabilities",
            fix: "null",
        },
    ),
    (
        "echo",
        On::Completion,
        Rule::Unsupported {
            neutral: null_or_false,
            what: "echoing the prompt",
            fix: "false",
        },
    ),
    (
        "best_of",
        On::Completion,
        Rule::Unsupported {
            neutral: null_or_one,
            what: "several candidates per request",
            fix: "1",
        },
    ),
    (
        "suffix",
        On::Completion,
        Rule::Unsupported {
            neutral: null_or_empty,
            what: "suffixes (fill-in-the-middle)",
            fix: "null",
        },
    ),
    (
        "response_format",
        On::Chat,
        Rule::Unsupported {
            neutral: text_format,
            what: "structured output (JSON mode, JSON schemas): the reply is free text",
            fix: "{\"type\": \"text\"}",
        },
    ),
    (
        "tools",
        On::Chat,
        Rule::Unsupported {
            neutral: null_or_empty,
            what: "tools (the chat template is not given them and no tool calls are parsed)",
            fix: "[]",
        },
    ),
    (
        "tool_choice",
        On::Chat,
        Rule::Unsupported {
            neutral: no_tool_choice,
            what: "tool calls",
            fix: "\"none\" or \"auto\"",
        },
    ),
    (
        "functions",
        On::Chat,
        Rule::Unsupported {
            neutral: null_or_empty,
            what: "functions (the chat template is not given them and no calls are parsed)",
            fix: "[]",
        },
    ),
    (
        "function_call",
        On::Chat,
        Rule::Unsupported {
            neutral: no_tool_choice,
            what: "function calls",
            fix: "\"none\" or \"auto\"",
        },
    ),
    (
        "modalities",
        On::Chat,
        Rule::Unsupported {
            neutral: text_only,
            what: "output other than text",
            fix: "[\"text\"]",
        },
    ),
    (
        "audio",
        On::Chat,
        Rule::Unsupported {
            neutral: null,
            what: "audio output",
            fix: "null",
        },
    ),
    (
        "prediction",
        On::Chat,
        Rule::Unsupported {
            neutral: null,
            what: "predicted outputs",
            fix: "null",
        },
    ),
    (
        "reasoning_effort",
        On::Chat,
        Rule::Unsupported {
            neutral: null,
            what: "reasoning effort (the chat template is not given it)",
            fix: "null",
        },
    ),
    (
        "verbosity",
        On::Chat,
        Rule::Unsupported {
            neutral: null,
            what: "verbosity (the chat template is not given it)",
            fix: "null",
        },
    ),
    (
        "web_search_options",
        On::Chat,
        Rule::Unsupported {
            neutral: null,
            what: "web search",
            fix: "null",
        },
    ),
];

/// Fields of one chat message.
const MESSAGE_FIELDS: &[(&str, Rule)] = &[
    ("role", Rule::Served),
    ("content", Rule::Served),
    (
        "tool_call_id",
        Rule::NoEffect {
            ok: null_or_string,
            form: "a string",
        },
    ),
    (
        "annotations",
        Rule::NoEffect {
            ok: null_or_empty,
            form: "null or [] (a reply's own field, sent back)",
        },
    ),
    (
        "name",
        Rule::Unsupported {
            neutral: null,
            what: "participant names (the chat template is not given them)",
            fix: "null",
        },
    ),
    (
        "tool_calls",
        Rule::Unsupported {
            neutral: null_or_empty,
            what: "tool calls (the chat template is not given them)",
            fix: "[]",
        },
    ),
    (
        "function_call",
        Rule::Unsupported {
            neutral: null,
            what: "function calls (the chat template is not given them)",
            fix: "null",
        },
    ),
    (
        "refusal",
        Rule::Unsupported {
            neutral: null,
            what: "refusals (the chat template is given `content` only)",
            fix: "null",
        },
    ),
    (
        "reasoning_content",
        Rule::Unsupported {
            neutral: null_or_empty,
            what: "reasoning text (the chat template is given `content` only)",
            fix: "null",
        },
    ),
    (
        "audio",
        Rule::Unsupported {
            neutral: null,
            what: "audio",
            fix: "null",
        },
    ),
];

const STREAM_OPTION_FIELDS: &[(&str, Rule)] = &[
    ("include_usage", Rule::Served),
    (
        "include_obfuscation",
        Rule::NoEffect {
            ok: null_or_bool,
            form: "true or false (chunks carry no obfuscation padding)",
        },
    ),
    // vLLM's extension (GuideLLM sends it): usage in every chunk. memwall serve
    // sends usage in the usage chunk only (`include_usage`); a client sees which.
    (
        "continuous_usage_stats",
        Rule::NoEffect {
            ok: null_or_bool,
            form: "true or false (usage comes in the usage chunk only, with include_usage)",
        },
    ),
];

fn check_rule(name: &str, rule: Rule, v: &Value) -> Result<(), ApiError> {
    match rule {
        Rule::Served => Ok(()),
        Rule::NoEffect { ok, form } => {
            if ok(v) {
                Ok(())
            } else {
                Err(ApiError::bad_field(
                    format!("{name}: {v} is not valid; send {form}"),
                    name.to_string(),
                ))
            }
        }
        Rule::Unsupported { neutral, what, fix } => {
            if neutral(v) {
                Ok(())
            } else {
                Err(ApiError::bad_field(
                    format!(
                        "{name}: memwall serve does not implement {what}; leave `{name}` out or send {fix}"
                    ),
                    name.to_string(),
                ))
            }
        }
    }
}

fn unknown(name: &str) -> ApiError {
    ApiError::bad_field(
        format!(
            "Unrecognized request argument supplied: {name} (memwall serve refuses what it does not implement rather than ignore it; the fields it takes are listed in docs/serving.md)"
        ),
        name.to_string(),
    )
}

/// Checks every field of a request body against what memwall serve implements: a
/// field it serves is read by the typed request; a field that changes nothing it
/// sends back (greedy decoding: `top_p`, `top_k`, `min_p`, `seed`; `user`,
/// `metadata`, …) is accepted when well-formed; a field that would change what the
/// client gets and is not implemented (`response_format`, `logprobs`, `tools`,
/// penalties, `logit_bias`, …) is accepted only at a value that asks for nothing;
/// any other field is refused, as OpenAI's API refuses it. The same for each chat
/// message's fields and for `stream_options`.
///
/// # Errors
/// [`ApiError`] 400 naming the field (`param`).
pub fn check_fields(body: &Value, ep: Endpoint) -> Result<(), ApiError> {
    let Some(obj) = body.as_object() else {
        return Err(ApiError::bad(
            "the request body must be a JSON object",
            None,
        ));
    };
    for (k, v) in obj {
        let rule = FIELDS.iter().find(|(n, on, _)| {
            n == k
                && match on {
                    On::Both => true,
                    On::Chat => ep == Endpoint::Chat,
                    On::Completion => ep == Endpoint::Completion,
                }
        });
        match rule {
            Some((name, _, rule)) => check_rule(name, *rule, v)?,
            None => return Err(unknown(k)),
        }
    }
    if let Some(so) = obj.get("stream_options").and_then(Value::as_object) {
        for (k, v) in so {
            match STREAM_OPTION_FIELDS.iter().find(|(n, _)| n == k) {
                Some((_, rule)) => check_rule(&format!("stream_options.{k}"), *rule, v)?,
                None => return Err(unknown(&format!("stream_options.{k}"))),
            }
        }
    }
    if ep == Endpoint::Chat
        && let Some(ms) = obj.get("messages").and_then(Value::as_array)
    {
        for (i, m) in ms.iter().enumerate() {
            let Some(m) = m.as_object() else { continue };
            for (k, v) in m {
                let name = format!("messages[{i}].{k}");
                match MESSAGE_FIELDS.iter().find(|(n, _)| n == k) {
                    Some((_, rule)) => check_rule(&name, *rule, v)?,
                    None => return Err(unknown(&name)),
                }
            }
        }
    }
    Ok(())
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Serialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens reused from the cache.
    pub cached_tokens: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct Usage {
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

    fn chat_with(extra: &str) -> Value {
        serde_json::from_str(&format!(
            r#"{{"messages":[{{"role":"user","content":"hi"}}]{extra}}}"#
        ))
        .unwrap()
    }

    fn refused(v: &Value, ep: Endpoint) -> ApiError {
        let e = check_fields(v, ep).expect_err("refused");
        assert_eq!(e.status, 400, "{e:?}");
        assert_eq!(e.kind, "invalid_request_error");
        e
    }

    #[test]
    fn fields_that_would_change_the_reply_are_refused_by_name() {
        // (field, a value asking for something, a value asking for nothing)
        let cases = [
            (
                "response_format",
                r#"{"type":"json_object"}"#,
                r#"{"type":"text"}"#,
            ),
            ("logprobs", "true", "false"),
            ("top_logprobs", "3", "0"),
            (
                "tools",
                r#"[{"type":"function","function":{"name":"f"}}]"#,
                "[]",
            ),
            ("tool_choice", r#""required""#, r#""none""#),
            ("functions", r#"[{"name":"f"}]"#, "[]"),
            ("function_call", r#"{"name":"f"}"#, r#""auto""#),
            ("presence_penalty", "0.5", "0"),
            ("frequency_penalty", "-1", "0.0"),
            ("repeat_penalty", "1.1", "1"),
            ("repetition_penalty", "1.1", "1.0"),
            ("logit_bias", r#"{"50256":-100}"#, "{}"),
            ("store", "true", "false"),
            ("cache_prompt", "false", "true"),
            ("modalities", r#"["text","audio"]"#, r#"["text"]"#),
            ("audio", r#"{"voice":"alloy"}"#, "null"),
            ("reasoning_effort", r#""high""#, "null"),
            ("prediction", r#"{"type":"content","content":"x"}"#, "null"),
        ];
        for (field, asks, neutral) in cases {
            let e = refused(&chat_with(&format!(r#","{field}":{asks}"#)), Endpoint::Chat);
            assert_eq!(e.param.as_deref(), Some(field), "{e:?}");
            assert!(
                e.message.starts_with(&format!("{field}: ")),
                "{}",
                e.message
            );
            assert!(e.message.contains("does not implement"), "{}", e.message);
            check_fields(
                &chat_with(&format!(r#","{field}":{neutral}"#)),
                Endpoint::Chat,
            )
            .unwrap_or_else(|e| panic!("{field}: {neutral} asks for nothing: {e:?}"));
            check_fields(&chat_with(&format!(r#","{field}":null"#)), Endpoint::Chat)
                .unwrap_or_else(|e| panic!("{field}: null: {e:?}"));
        }
        let comp = |extra: &str| -> Value {
            serde_json::from_str(&format!(r#"{{"prompt":"x"{extra}}}"#)).unwrap()
        };
        for (field, asks) in [
            ("logprobs", "0"),
            ("echo", "true"),
            ("best_of", "2"),
            ("suffix", r#""}""#),
        ] {
            let e = refused(
                &comp(&format!(r#","{field}":{asks}"#)),
                Endpoint::Completion,
            );
            assert_eq!(e.param.as_deref(), Some(field));
        }
        // Chat-only fields are unknown to /v1/completions.
        let e = refused(
            &comp(r#","response_format":{"type":"text"}"#),
            Endpoint::Completion,
        );
        assert!(
            e.message
                .starts_with("Unrecognized request argument supplied: response_format")
        );
    }

    #[test]
    fn fields_that_change_nothing_under_greedy_decoding_are_accepted() {
        for ok in [
            r#","top_p":0.1,"top_k":40,"min_p":0.05,"seed":42"#,
            r#","top_p":1,"top_k":0,"seed":-7"#,
            r#","user":"u-1","metadata":{"a":"b"},"safety_identifier":"s","prompt_cache_key":"k","service_tier":"auto""#,
            r#","parallel_tool_calls":false,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true,"include_obfuscation":false}"#,
            r#","temperature":0,"n":1,"stop":null,"ignore_eos":true,"max_completion_tokens":4,"model":"m""#,
        ] {
            check_fields(&chat_with(ok), Endpoint::Chat).unwrap_or_else(|e| panic!("{ok}: {e:?}"));
        }
        for (bad, param) in [
            (r#","top_p":1.5"#, "top_p"),
            (r#","top_k":-1"#, "top_k"),
            (r#","seed":"x""#, "seed"),
            (r#","metadata":"x""#, "metadata"),
        ] {
            let e = refused(&chat_with(bad), Endpoint::Chat);
            assert_eq!(e.param.as_deref(), Some(param), "{bad}");
        }
    }

    #[test]
    fn unknown_fields_and_roles_are_refused() {
        let e = refused(&chat_with(r#","guided_json":{}"#), Endpoint::Chat);
        assert_eq!(e.param.as_deref(), Some("guided_json"));
        let e = refused(
            &chat_with(r#","stream_options":{"chunk_usage":true}"#),
            Endpoint::Chat,
        );
        assert_eq!(e.param.as_deref(), Some("stream_options.chunk_usage"));
        let v: Value =
            serde_json::from_str(r#"{"messages":[{"role":"user","content":"hi","name":"bob"}]}"#)
                .unwrap();
        assert_eq!(
            refused(&v, Endpoint::Chat).param.as_deref(),
            Some("messages[0].name")
        );
        let v: Value = serde_json::from_str(
            r#"{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1"}]}]}"#,
        )
        .unwrap();
        assert_eq!(
            refused(&v, Endpoint::Chat).param.as_deref(),
            Some("messages[0].tool_calls")
        );
        // What the openai client sends back of a reply's message: all null.
        let v: Value = serde_json::from_str(
            r#"{"messages":[{"role":"assistant","content":"x","refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":null},{"role":"tool","content":"r","tool_call_id":"c1"}]}"#,
        )
        .unwrap();
        check_fields(&v, Endpoint::Chat).unwrap();
        // Roles: an unknown one is refused, developer is the system message.
        let r: ChatRequest = serde_json::from_str(
            r#"{"messages":[{"role":"developer","content":"be brief"},{"role":"wizard","content":"x"}]}"#,
        )
        .unwrap();
        let e = r.chat_messages().unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages[1].role"));
        assert!(e.message.contains("\"wizard\""), "{}", e.message);
        let r: ChatRequest =
            serde_json::from_str(r#"{"messages":[{"role":"developer","content":"be brief"}]}"#)
                .unwrap();
        assert_eq!(r.chat_messages().unwrap()[0].role, "system");
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
