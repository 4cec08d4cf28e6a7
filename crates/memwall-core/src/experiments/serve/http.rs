//! The HTTP side (axum): routes, authentication, request checks, streaming.
//!
//! | route | what |
//! |---|---|
//! | `GET /health` | 200 `{"status":"ok"}`, 503 while the model loads (llama-server's body) |
//! | `GET /v1/models` | the one model served |
//! | `POST /v1/completions` | text completion, streamed (SSE) or not |
//! | `POST /v1/chat/completions` | chat completion, streamed (SSE) or not |
//! | `GET /metrics` | Prometheus text, llama-server's metric names |
//!
//! With an API key every route but `/health` and `/v1/models` wants
//! `Authorization: Bearer KEY` (llama-server's public routes). Handlers talk to the
//! engine thread only through the [`Admission`] queue and each request's event
//! channel; dropping a response (client gone) closes the channel, which cancels the
//! request at the scheduler's next step.

use super::api::{
    ApiError, ChatRequest, Common, CompletionRequest, Endpoint, Ident, Prompt, SseWriter,
    full_response,
};
use super::scheduler::{Admission, Event, Job, Metrics};
use super::template::{ChatTemplate, one_bos};
use crate::measure::engine::{ChatMessage, EngineError, TokenId};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Seconds a client is told to wait after a 429 (`Retry-After`).
pub const RETRY_AFTER_SECS: u32 = 1;

/// Tokenization without the engine's context, callable from any handler.
pub trait PromptTokenizer: Send + Sync {
    /// Tokenizes `text`, parsing special tokens; `add_special` adds BOS where the
    /// model wants one.
    ///
    /// # Errors
    /// [`EngineError::Tokenize`].
    fn tokenize(&self, text: &str, add_special: bool) -> Result<Vec<TokenId>, EngineError>;
    /// The BOS token when the model adds one.
    fn bos(&self) -> Option<TokenId>;
    /// llama.cpp's built-in chat format `name` applied to `messages`.
    ///
    /// # Errors
    /// [`EngineError::Tokenize`].
    fn builtin_template(&self, name: &str, messages: &[ChatMessage])
    -> Result<String, EngineError>;
}

/// How chat messages become a prompt.
pub enum Prompter {
    /// The GGUF's Jinja template.
    Jinja(ChatTemplate),
    /// llama.cpp's built-in format of this name (the file has none).
    Builtin(&'static str),
}

/// What the server knows once the model is loaded.
pub struct Loaded {
    /// The id `/v1/models` lists and responses carry.
    pub model_id: String,
    /// Other names a request's `model` may use (the name given on the command line,
    /// the file name).
    pub aliases: Vec<String>,
    /// `system_fingerprint`: memwall's commit and the template source.
    pub fingerprint: String,
    /// Chat formatting.
    pub prompter: Prompter,
    /// Tokenizer.
    pub tokenizer: Arc<dyn PromptTokenizer>,
    /// Context of one slot, tokens.
    pub n_ctx_slot: u32,
    /// Unix seconds when loaded.
    pub created: u64,
}

/// Shared state of the routes.
pub struct ServerState {
    /// Set once the model is loaded (`/health` is 503 before).
    pub loaded: OnceLock<Arc<Loaded>>,
    /// The admission queue.
    pub admission: Arc<Admission>,
    /// The scheduler's counters.
    pub metrics: Arc<Metrics>,
    /// Required Bearer key, if any.
    pub api_key: Option<String>,
    /// Slots (for messages and `/metrics`).
    pub n_slots: usize,
    next_id: AtomicU64,
}

impl ServerState {
    /// State before loading.
    pub fn new(
        admission: Arc<Admission>,
        metrics: Arc<Metrics>,
        api_key: Option<String>,
        n_slots: usize,
    ) -> ServerState {
        ServerState {
            loaded: OnceLock::new(),
            admission,
            metrics,
            api_key,
            n_slots,
            next_id: AtomicU64::new(0),
        }
    }
}

/// The router over `state`.
pub fn router(state: Arc<ServerState>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/v1/health", get(health))
        .route("/v1/models", get(models))
        .route("/models", get(models))
        .route("/metrics", get(metrics))
        .route("/v1/completions", post(completions))
        .route("/completions", post(completions))
        .route("/v1/chat/completions", post(chat))
        .route("/chat/completions", post(chat))
        .with_state(state)
}

fn json_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

fn error_response(e: &ApiError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = json_response(status, e.body());
    if e.status == 429 {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    }
    r
}

fn loading() -> ApiError {
    ApiError {
        status: 503,
        message: "Loading model".into(),
        kind: "unavailable_error",
        code: None,
        param: None,
    }
}

fn authorize(st: &ServerState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(key) = &st.api_key else {
        return Ok(());
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given == Some(key.as_str()) {
        Ok(())
    } else {
        Err(ApiError {
            status: 401,
            message: "Invalid API key: send `Authorization: Bearer KEY` with the key the server was started with (--api-key)".into(),
            kind: "authentication_error",
            code: Some("invalid_api_key"),
            param: None,
        })
    }
}

fn loaded(st: &ServerState) -> Result<Arc<Loaded>, ApiError> {
    st.loaded.get().cloned().ok_or_else(loading)
}

async fn health(State(st): State<Arc<ServerState>>) -> Response {
    match st.loaded.get() {
        Some(_) => json_response(StatusCode::OK, r#"{"status":"ok"}"#.into()),
        None => {
            // llama-server's body while loading.
            json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                r#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#
                    .into(),
            )
        }
    }
}

async fn models(State(st): State<Arc<ServerState>>) -> Response {
    let Ok(l) = loaded(&st) else {
        return error_response(&loading());
    };
    let body = serde_json::json!({
        "object": "list",
        "data": [{
            "id": l.model_id,
            "object": "model",
            "created": l.created,
            "owned_by": "memwall",
            "meta": { "n_ctx_slot": l.n_ctx_slot, "n_slots": st.n_slots },
        }]
    });
    json_response(StatusCode::OK, body.to_string())
}

/// The server's counters at one moment: what `/metrics` prints and the app's Serve
/// page shows, from the same reads.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize, ts_rs::TS,
)]
pub struct MetricsSnapshot {
    /// Prompt tokens prefilled (cached ones excluded).
    pub prompt_tokens_total: u64,
    /// Prefill time, summed per request, s.
    pub prompt_seconds_total: f64,
    /// Tokens generated.
    pub tokens_predicted_total: u64,
    /// Decode time (first to last token), summed per request, s.
    pub tokens_predicted_seconds_total: f64,
    /// Forward passes.
    pub n_decode_total: u64,
    /// Busy slots per forward pass, mean; `None` before the first pass.
    pub n_busy_slots_per_decode: Option<f64>,
    /// `prompt_tokens_total ÷ prompt_seconds_total`, tok/s; `None` before any prefill.
    pub prompt_tokens_seconds: Option<f64>,
    /// `tokens_predicted_total ÷ tokens_predicted_seconds_total`, tok/s (per request,
    /// as llama-server); `None` before any decode.
    pub predicted_tokens_seconds: Option<f64>,
    /// Requests holding a slot now (busy slots).
    pub requests_processing: u64,
    /// Requests waiting in the admission queue now.
    pub requests_deferred: u64,
    /// Requests that ended because their client left.
    pub requests_cancelled_total: u64,
    /// Requests that ran to their end.
    pub requests_served_total: u64,
}

/// Reads the server's counters now.
pub fn snapshot(st: &ServerState) -> MetricsSnapshot {
    let m = &st.metrics;
    let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let n_decode = g(&m.n_decode_total);
    let prompt_s = g(&m.prompt_us_total) as f64 / 1e6;
    let pred_s = g(&m.tokens_predicted_us_total) as f64 / 1e6;
    let rate = |n: u64, s: f64| (s > 0.0).then(|| n as f64 / s);
    MetricsSnapshot {
        prompt_tokens_total: g(&m.prompt_tokens_total),
        prompt_seconds_total: prompt_s,
        tokens_predicted_total: g(&m.tokens_predicted_total),
        tokens_predicted_seconds_total: pred_s,
        n_decode_total: n_decode,
        n_busy_slots_per_decode: (n_decode > 0)
            .then(|| g(&m.n_busy_slots_total) as f64 / n_decode as f64),
        prompt_tokens_seconds: rate(g(&m.prompt_tokens_total), prompt_s),
        predicted_tokens_seconds: rate(g(&m.tokens_predicted_total), pred_s),
        requests_processing: g(&m.requests_processing),
        requests_deferred: st.admission.waiting() as u64,
        requests_cancelled_total: g(&m.requests_cancelled_total),
        requests_served_total: g(&m.requests_served_total),
    }
}

/// Prometheus text with llama-server's names where the meaning matches (a rate
/// with no time behind it prints 0, as llama-server's does).
pub fn metrics_text(st: &ServerState) -> String {
    let m = snapshot(st);
    let z = |v: Option<f64>| v.unwrap_or(0.0).to_string();
    let rows: [(&str, &str, &str, String); 12] = [
        (
            "prompt_tokens_total",
            "counter",
            "Number of prompt tokens processed.",
            m.prompt_tokens_total.to_string(),
        ),
        (
            "prompt_seconds_total",
            "counter",
            "Prompt process time",
            m.prompt_seconds_total.to_string(),
        ),
        (
            "tokens_predicted_total",
            "counter",
            "Number of generation tokens processed.",
            m.tokens_predicted_total.to_string(),
        ),
        (
            "tokens_predicted_seconds_total",
            "counter",
            "Predict process time",
            m.tokens_predicted_seconds_total.to_string(),
        ),
        (
            "n_decode_total",
            "counter",
            "Total number of llama_decode() calls",
            m.n_decode_total.to_string(),
        ),
        (
            "n_busy_slots_per_decode",
            "counter",
            "Average number of busy slots per llama_decode() call",
            z(m.n_busy_slots_per_decode),
        ),
        (
            "prompt_tokens_seconds",
            "gauge",
            "Average prompt throughput in tokens/s.",
            z(m.prompt_tokens_seconds),
        ),
        (
            "predicted_tokens_seconds",
            "gauge",
            "Average generation throughput in tokens/s.",
            z(m.predicted_tokens_seconds),
        ),
        (
            "requests_processing",
            "gauge",
            "Number of requests processing.",
            m.requests_processing.to_string(),
        ),
        (
            "requests_deferred",
            "gauge",
            "Number of requests deferred.",
            m.requests_deferred.to_string(),
        ),
        (
            "requests_cancelled_total",
            "counter",
            "Requests ended because the client disconnected (memwall).",
            m.requests_cancelled_total.to_string(),
        ),
        (
            "requests_served_total",
            "counter",
            "Requests that ran to their end (memwall).",
            m.requests_served_total.to_string(),
        ),
    ];
    let mut out = String::new();
    for (name, kind, help, v) in rows {
        out += &format!(
            "# HELP llamacpp:{name} {help}\n# TYPE llamacpp:{name} {kind}\nllamacpp:{name} {v}\n"
        );
    }
    out
}

async fn metrics(State(st): State<Arc<ServerState>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&st, &headers) {
        return error_response(&e);
    }
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4"),
        )],
        metrics_text(&st),
    )
        .into_response()
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad(
            format!("the request body is not a valid request: {e}"),
            None,
        )
    })
}

fn check_model(l: &Loaded, c: &Common) -> Result<(), ApiError> {
    match &c.model {
        Some(m) if *m != l.model_id && !l.aliases.contains(m) => Err(ApiError {
            status: 404,
            message: format!(
                "The model `{m}` does not exist: this server serves `{}` (GET /v1/models)",
                l.model_id
            ),
            kind: "invalid_request_error",
            code: Some("model_not_found"),
            param: Some("model"),
        }),
        _ => Ok(()),
    }
}

fn tokenize_err(e: EngineError) -> ApiError {
    ApiError::bad(e.to_string(), Some("messages"))
}

async fn chat(State(st): State<Arc<ServerState>>, headers: HeaderMap, body: Bytes) -> Response {
    let run = async {
        authorize(&st, &headers)?;
        let l = loaded(&st)?;
        let req: ChatRequest = parse(&body)?;
        check_model(&l, &req.common)?;
        let messages = req.chat_messages()?;
        let text = match &l.prompter {
            Prompter::Jinja(t) => t
                .render(&messages)
                .map_err(|e| ApiError::bad(e.to_string(), Some("messages")))?,
            Prompter::Builtin(name) => l
                .tokenizer
                .builtin_template(name, &messages)
                .map_err(tokenize_err)?,
        };
        let tokens = one_bos(
            l.tokenizer.tokenize(&text, false).map_err(tokenize_err)?,
            l.tokenizer.bos(),
        );
        Ok::<_, ApiError>((l, req.common, tokens))
    };
    match run.await {
        Ok((l, common, tokens)) => respond(&st, &l, Endpoint::Chat, common, tokens).await,
        Err(e) => error_response(&e),
    }
}

async fn completions(
    State(st): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let run = async {
        authorize(&st, &headers)?;
        let l = loaded(&st)?;
        let req: CompletionRequest = parse(&body)?;
        check_model(&l, &req.common)?;
        let prompt = match req.prompt {
            Prompt::One(s) => s,
            Prompt::Many(mut v) if v.len() == 1 => v.remove(0),
            Prompt::Many(_) => {
                return Err(ApiError::bad(
                    "prompt: send one string (batches of prompts are not served)",
                    Some("prompt"),
                ));
            }
        };
        if prompt.is_empty() {
            return Err(ApiError::bad("prompt: must not be empty", Some("prompt")));
        }
        let tokens = l.tokenizer.tokenize(&prompt, true).map_err(tokenize_err)?;
        Ok::<_, ApiError>((l, req.common, tokens))
    };
    match run.await {
        Ok((l, common, tokens)) => respond(&st, &l, Endpoint::Completion, common, tokens).await,
        Err(e) => error_response(&e),
    }
}

async fn respond(
    st: &ServerState,
    l: &Loaded,
    ep: Endpoint,
    common: Common,
    tokens: Vec<TokenId>,
) -> Response {
    let max_tokens = match common.resolve_max_tokens(tokens.len(), l.n_ctx_slot) {
        Ok(m) => m,
        Err(e) => return error_response(&e),
    };
    let n = st.next_id.fetch_add(1, Ordering::Relaxed);
    let ident = Ident {
        id: match ep {
            Endpoint::Chat => format!("chatcmpl-{n}"),
            Endpoint::Completion => format!("cmpl-{n}"),
        },
        created: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        model: l.model_id.clone(),
        fingerprint: l.fingerprint.clone(),
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let job = Job {
        id: n,
        prompt: tokens,
        max_tokens,
        ignore_eos: common.ignore_eos,
        events: tx,
    };
    if st.admission.submit(job).is_err() {
        return error_response(&ApiError {
            status: 429,
            message: format!(
                "The server is busy: {} requests already wait for {} slots (--queue bounds the wait); retry after {RETRY_AFTER_SECS} s",
                st.admission.capacity(),
                st.n_slots
            ),
            kind: "rate_limit_error",
            code: Some("rate_limit_exceeded"),
            param: None,
        });
    }
    let gone = || ApiError {
        status: 503,
        message: "the server stopped before the request finished".into(),
        kind: "server_error",
        code: None,
        param: None,
    };
    if common.stream {
        let writer = SseWriter::new(ep, ident, common.include_usage());
        let stream =
            futures_util::stream::unfold((rx, writer), move |(mut rx, mut w)| async move {
                if w.ended() {
                    return None;
                }
                let frames = loop {
                    let f = match rx.recv().await {
                        Some(ev) => w.on_event(&ev),
                        None => w.error(&gone()),
                    };
                    if !f.is_empty() {
                        break f;
                    }
                };
                Some((Ok::<_, Infallible>(Bytes::from(frames)), (rx, w)))
            });
        return (
            StatusCode::OK,
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/event-stream"),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            ],
            Body::from_stream(stream),
        )
            .into_response();
    }
    let mut text = String::new();
    loop {
        match rx.recv().await {
            Some(Event::Started { .. }) => {}
            Some(Event::Text(t)) => text.push_str(&t),
            Some(Event::Done(f)) => {
                text.push_str(&f.text);
                return json_response(StatusCode::OK, full_response(ep, &ident, &text, &f));
            }
            Some(Event::Failed(msg)) => {
                return error_response(&ApiError {
                    status: 500,
                    message: msg,
                    kind: "server_error",
                    code: None,
                    param: None,
                });
            }
            None => return error_response(&gone()),
        }
    }
}
