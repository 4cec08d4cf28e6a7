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
//! `Authorization: Bearer KEY` (llama-server's public routes), compared in constant
//! time.
//!
//! A web page must not be able to drive the server ([`guard`], before any route): a
//! `Host` other than a loopback name or address, or the address the server is bound
//! to, is refused (DNS rebinding); a request carrying an `Origin` is refused unless
//! `--cors-origin` lists it (then its preflights are answered and its replies carry
//! `Access-Control-Allow-Origin`); a POST body must be `Content-Type:
//! application/json` (a form or `text/plain` POST is what a page can send without
//! asking). Every error, those of unknown paths, wrong methods and bodies over
//! [`BODY_LIMIT`] included, is OpenAI's JSON error object. Handlers talk to the
//! engine thread only through the [`Admission`] queue and each request's event
//! channel; dropping a response (client gone) closes the channel, which cancels the
//! request at the scheduler's next step.

use super::api::{
    ApiError, ChatRequest, Common, CompletionRequest, Endpoint, Ident, Prompt, SseWriter,
    check_fields, full_response,
};
use super::scheduler::{Admission, Event, GenRequest, Metrics};
use crate::measure::engine::{TokenId, Vocab};
use crate::measure::prompt::ChatFormat;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::borrow::Cow;
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Seconds a client is told to wait after a 429 (`Retry-After`).
pub const RETRY_AFTER_SECS: u32 = 1;

/// Largest request body, bytes (axum's default, 2 MiB); a larger one gets a 413.
pub const BODY_LIMIT: usize = 2 * 1024 * 1024;

/// Who may use the server from where: the `Host` names it answers to and the web
/// page origins allowed to call it (`--cors-origin`).
#[derive(Debug, Clone)]
pub struct Access {
    bound: IpAddr,
    hostname: Option<String>,
    cors_origins: Vec<String>,
}

/// `origin` as browsers send it (`scheme://host[:port]`, lower case, no path), or
/// why it is not one.
///
/// # Errors
/// A message naming the value when it is not an origin.
pub fn normalize_origin(origin: &str) -> Result<String, String> {
    let bad = |why: &str| {
        Err(format!(
            "{origin:?} is not a web origin ({why}): write it as a browser sends it, scheme://host[:port], e.g. http://localhost:3000"
        ))
    };
    let o = origin.trim().trim_end_matches('/');
    let Ok(u) = o.parse::<Uri>() else {
        return bad("it does not parse as a URL");
    };
    let (Some(scheme), Some(auth)) = (u.scheme_str(), u.authority()) else {
        return bad("no scheme or host");
    };
    if auth.as_str().contains('@') || u.query().is_some() || !matches!(u.path(), "" | "/") {
        return bad("an origin has no user, path or query");
    }
    Ok(format!("{scheme}://{}", auth.as_str()).to_ascii_lowercase())
}

impl Access {
    /// A server bound to `bound` that lets pages of `cors_origins` call it.
    ///
    /// # Errors
    /// A message naming a value of `cors_origins` that is not an origin.
    pub fn new(bound: IpAddr, cors_origins: &[String]) -> Result<Access, String> {
        Ok(Access {
            bound,
            hostname: sysinfo::System::host_name().ok().filter(|h| !h.is_empty()),
            cors_origins: cors_origins
                .iter()
                .map(|o| normalize_origin(o).map_err(|e| format!("--cors-origin {e}")))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Whether a request whose `Host` header is `host` is meant for this server:
    /// `localhost` and the other loopback names (`*.localhost`, `ip6-localhost`,
    /// `ip6-loopback`), a loopback address, the bound address; bound to every
    /// interface (`0.0.0.0`, `::`), any address and this machine's own name (and
    /// `NAME.local`); bound beyond loopback, the machine's name. Another name, as
    /// after DNS rebinding (a page's own domain now resolving to this machine), is not.
    pub fn host_allowed(&self, host: &str) -> bool {
        let Ok(a) = host.parse::<axum::http::uri::Authority>() else {
            return false;
        };
        let h = a.host().trim_end_matches('.').to_ascii_lowercase();
        let h = h.trim_start_matches('[').trim_end_matches(']');
        if h == "localhost"
            || h.ends_with(".localhost")
            || h == "ip6-localhost"
            || h == "ip6-loopback"
        {
            return true;
        }
        if let Ok(ip) = h.parse::<IpAddr>() {
            return ip.is_loopback() || ip == self.bound || self.bound.is_unspecified();
        }
        !self.bound.is_loopback()
            && self.hostname.as_deref().is_some_and(|n| {
                let n = n.to_ascii_lowercase();
                h == n || h.strip_suffix(".local") == Some(n.as_str())
            })
    }

    /// Whether a page of `origin` may call the server (`--cors-origin` lists it).
    pub fn origin_allowed(&self, origin: &str) -> bool {
        normalize_origin(origin).is_ok_and(|o| self.cors_origins.contains(&o))
    }
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
    /// How chat messages and completion prompts become tokens: the one prompt path
    /// every command takes ([`ChatFormat`]).
    pub format: ChatFormat,
    /// The model's vocabulary, without the engine's context: callable from any
    /// handler.
    pub tokenizer: Arc<dyn Vocab + Send + Sync>,
    /// Context of one slot, tokens.
    pub n_ctx_slot: u32,
    /// Unix seconds when loaded.
    pub created: u64,
    /// What `/memwall/facts` publishes (engine, placement, bytes per token at the
    /// server's KV type, the roof).
    pub facts: super::facts::ServedFacts,
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
    /// Which `Host` names and page origins are served ([`guard`]).
    pub access: Access,
    next_id: AtomicU64,
}

impl ServerState {
    /// State before loading.
    pub fn new(
        admission: Arc<Admission>,
        metrics: Arc<Metrics>,
        api_key: Option<String>,
        n_slots: usize,
        access: Access,
    ) -> ServerState {
        ServerState {
            loaded: OnceLock::new(),
            admission,
            metrics,
            api_key,
            n_slots,
            access,
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
        .route(super::facts::FACTS_PATH, get(facts))
        .route("/v1/completions", post(completions))
        .route("/completions", post(completions))
        .route("/v1/chat/completions", post(chat))
        .route("/chat/completions", post(chat))
        // After the routes: it applies to those already added.
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

fn forbidden(message: String, code: &'static str) -> ApiError {
    ApiError {
        status: 403,
        message,
        kind: "permission_error",
        code: Some(code),
        param: None,
    }
}

/// Whether `headers` declare a JSON body (`application/json`, parameters allowed).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// Refuses what a web page could send on its own (see the module docs): a foreign
/// `Host`, an `Origin` that `--cors-origin` does not list, a POST body that is not
/// declared JSON; answers the preflights of a listed origin and marks its replies.
pub async fn guard(State(st): State<Arc<ServerState>>, req: Request, next: Next) -> Response {
    let h = req.headers();
    if let Some(host) = h.get(header::HOST) {
        let text = String::from_utf8_lossy(host.as_bytes());
        if !st.access.host_allowed(&text) {
            return error_response(&forbidden(
                format!(
                    "Host {text:?} is not this server's name: memwall serve answers requests addressed to localhost, a loopback address or the address it is bound to ({}), so that a web page's own domain re-pointed at this machine (DNS rebinding) cannot reach it; use http://127.0.0.1:PORT or http://localhost:PORT",
                    st.access.bound
                ),
                "host_not_allowed",
            ));
        }
    }
    let origin = h
        .get(header::ORIGIN)
        .map(|o| String::from_utf8_lossy(o.as_bytes()).into_owned());
    if let Some(o) = &origin {
        if !st.access.origin_allowed(o) {
            return error_response(&forbidden(
                format!(
                    "Origin {o:?} is not allowed: a web page may not use this server (any site the browser visits could make the model generate and read its replies); to let pages of that origin use it, start memwall serve with --cors-origin {o}"
                ),
                "origin_not_allowed",
            ));
        }
        if req.method() == Method::OPTIONS && h.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
        {
            return preflight(o, h);
        }
    }
    if req.method() == Method::POST && !is_json(h) {
        let ct = h
            .get(header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        return error_response(&ApiError {
            status: 415,
            message: format!(
                "Content-Type {}: a request body must be JSON; send `Content-Type: application/json` (curl: -H 'Content-Type: application/json' or --json)",
                ct.map_or("missing".into(), |c| format!("{c:?}"))
            ),
            kind: "invalid_request_error",
            code: Some("unsupported_media_type"),
            param: None,
        });
    }
    let mut r = next.run(req).await;
    if let Some(o) = origin.and_then(|o| HeaderValue::from_str(&o).ok()) {
        let hs = r.headers_mut();
        hs.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
        hs.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("Retry-After"),
        );
        hs.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    r
}

/// The answer to a CORS preflight from an allowed `origin`.
fn preflight(origin: &str, h: &HeaderMap) -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    let hs = r.headers_mut();
    if let Ok(o) = HeaderValue::from_str(origin) {
        hs.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
    }
    hs.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST"),
    );
    hs.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        h.get(header::ACCESS_CONTROL_REQUEST_HEADERS)
            .cloned()
            .unwrap_or_else(|| HeaderValue::from_static("authorization, content-type")),
    );
    hs.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    hs.insert(
        header::VARY,
        HeaderValue::from_static(
            "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
        ),
    );
    r
}

async fn not_found(method: Method, uri: Uri) -> Response {
    error_response(&ApiError {
        status: 404,
        message: format!(
            "Invalid URL ({method} {}): memwall serve has /v1/chat/completions, /v1/completions, /v1/models, /health, /metrics and /memwall/facts",
            uri.path()
        ),
        kind: "invalid_request_error",
        code: Some("unknown_url"),
        param: None,
    })
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let want = if method == Method::GET { "POST" } else { "GET" };
    error_response(&ApiError {
        status: 405,
        message: format!(
            "Method {method} is not allowed on {}: use {want} (the Allow header names the methods)",
            uri.path()
        ),
        kind: "invalid_request_error",
        code: Some("method_not_allowed"),
        param: None,
    })
}

/// A body the server would not read: over [`BODY_LIMIT`] (413) or cut short.
fn body_error(e: &BytesRejection) -> ApiError {
    let status = e.status().as_u16();
    ApiError {
        status,
        message: if status == 413 {
            format!(
                "the request body is over {BODY_LIMIT} bytes (2 MiB), the most memwall serve reads"
            )
        } else {
            format!("the request body could not be read: {}", e.body_text())
        },
        kind: "invalid_request_error",
        code: (status == 413).then_some("request_too_large"),
        param: None,
    }
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
        .map(|v| v.as_bytes())
        .and_then(|v| (v.len() > 7 && v[..7].eq_ignore_ascii_case(b"bearer ")).then(|| &v[7..]));
    if given.is_some_and(|g| same_key(g, key.as_bytes())) {
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

/// Whether `given` is `key`, in time that does not depend on where they differ: both
/// are hashed (SHA-256) and the digests compared without an early exit.
pub fn same_key(given: &[u8], key: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    let (a, b) = (Sha256::digest(given), Sha256::digest(key));
    let diff = a.iter().zip(b.iter()).fold(0u8, |d, (x, y)| d | (x ^ y));
    std::hint::black_box(diff) == 0
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

/// `GET /memwall/facts`: [`super::facts::ServedFacts`] (under the API key, as the
/// model list is).
async fn facts(State(st): State<Arc<ServerState>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&st, &headers) {
        return error_response(&e);
    }
    let Ok(l) = loaded(&st) else {
        return error_response(&loading());
    };
    json_response(
        StatusCode::OK,
        serde_json::to_string(&l.facts).expect("facts serialize"),
    )
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
    /// Tokens generated, each counted as it is decoded: those of requests that were
    /// cancelled or failed included. (llama-server adds a request's tokens when it
    /// ends, so its count leaves out the tokens of cancelled requests.)
    pub tokens_predicted_total: u64,
    /// Decode time (first to last token), summed per request, cancelled and failed
    /// ones included, s.
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
            "Number of generation tokens processed (memwall: every token decoded, those of cancelled and failed requests included; llama-server counts finished requests only).",
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

/// The request in `body`: JSON, every field one memwall serve implements or one
/// that changes nothing ([`check_fields`]), then the typed request.
fn parse<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    ep: Endpoint,
) -> Result<T, ApiError> {
    let body = body.map_err(|e| body_error(&e))?;
    let v: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad(format!("the request body is not valid JSON: {e}"), None))?;
    check_fields(&v, ep)?;
    serde_json::from_value(v).map_err(|e| {
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
            param: Some(Cow::Borrowed("model")),
        }),
        _ => Ok(()),
    }
}

async fn chat(
    State(st): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let run = async {
        authorize(&st, &headers)?;
        let req: ChatRequest = parse(body, Endpoint::Chat)?;
        let l = loaded(&st)?;
        check_model(&l, &req.common)?;
        let messages = req.chat_messages()?;
        let p = l
            .format
            .chat(&*l.tokenizer, &messages)
            .map_err(|e| ApiError::bad(e.to_string(), Some("messages")))?;
        Ok::<_, ApiError>((l, req.common, p.tokens, p.text))
    };
    match run.await {
        Ok((l, common, tokens, text)) => {
            respond(&st, &l, Endpoint::Chat, common, tokens, &text).await
        }
        Err(e) => error_response(&e),
    }
}

async fn completions(
    State(st): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let run = async {
        authorize(&st, &headers)?;
        let req: CompletionRequest = parse(body, Endpoint::Completion)?;
        let l = loaded(&st)?;
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
        // Special-token text parsed (as llama-server does), exactly one BOS.
        let tokens = l
            .format
            .text(&*l.tokenizer, &prompt)
            .map_err(|e| ApiError::bad(e.to_string(), Some("prompt")))?;
        Ok::<_, ApiError>((l, req.common, tokens, prompt))
    };
    match run.await {
        Ok((l, common, tokens, text)) => {
            respond(&st, &l, Endpoint::Completion, common, tokens, &text).await
        }
        Err(e) => error_response(&e),
    }
}

/// Queues a checked request (its prompt `tokens`, rendered from `text`) and answers
/// with its stream or its full reply.
async fn respond(
    st: &ServerState,
    l: &Loaded,
    ep: Endpoint,
    common: Common,
    tokens: Vec<TokenId>,
    text: &str,
) -> Response {
    let max_tokens = match common.resolve_max_tokens(tokens.len(), l.n_ctx_slot) {
        Ok(m) => m,
        Err(e) => return error_response(&e),
    };
    let n = st.next_id.fetch_add(1, Ordering::Relaxed);
    // `-v`: the prompt exactly as the model gets it (after the chat template).
    tracing::debug!(
        "request {n}: {} prompt tokens, max_tokens {max_tokens}{}, prompt {text:?}",
        tokens.len(),
        if common.stream { ", streamed" } else { "" }
    );
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
    let job = GenRequest {
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

#[cfg(test)]
mod tests {
    //! The guard and the error bodies over a real socket, on a server whose model is
    //! not loaded: a request that passes every check reaches its handler and gets
    //! the 503 "Loading model" (or 401 without the key); one that does not is refused
    //! before any handler runs.
    use super::*;
    use crate::experiments::serve::scheduler::{Admission, Metrics};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn access(bound: &str, cors: &[&str]) -> Access {
        let cors: Vec<String> = cors.iter().map(|s| s.to_string()).collect();
        Access::new(bound.parse().unwrap(), &cors).unwrap()
    }

    async fn server(bound: &str, cors: &[&str], key: Option<&str>) -> std::net::SocketAddr {
        let st = Arc::new(ServerState::new(
            Arc::new(Admission::new(1)),
            Arc::new(Metrics::default()),
            key.map(str::to_string),
            1,
            access(bound, cors),
        ));
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, router(st)).await });
        a
    }

    struct Reply {
        status: u16,
        headers: String,
        body: String,
    }

    impl Reply {
        fn header(&self, name: &str) -> Option<String> {
            self.headers.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        }
        /// The OpenAI error object of the body (panics when it is not one).
        fn error(&self) -> serde_json::Value {
            let v: serde_json::Value = serde_json::from_str(&self.body)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body));
            let e = v["error"].clone();
            for k in ["message", "type", "param", "code"] {
                assert!(e.get(k).is_some(), "no error.{k}: {}", self.body);
            }
            assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()));
            e
        }
    }

    /// One HTTP/1.1 exchange: `method path`, the given header lines, `body`.
    async fn send(
        a: std::net::SocketAddr,
        method: &str,
        path: &str,
        headers: &[&str],
        body: &[u8],
    ) -> Reply {
        let mut s = tokio::net::TcpStream::connect(a).await.unwrap();
        let mut req = format!("{method} {path} HTTP/1.1\r\n");
        for h in headers {
            req += h;
            req += "\r\n";
        }
        req += &format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        // A refused large body may be cut short by the server: the reply still comes.
        let _ = s.write_all(body).await;
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw).await;
        let raw = String::from_utf8(raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").expect("a reply");
        Reply {
            status: head[9..12].parse().unwrap(),
            headers: head.to_string(),
            body: body.to_string(),
        }
    }

    const CHAT: &str = r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}"#;
    const JSON: &str = "Content-Type: application/json";

    #[test]
    fn host_names_a_server_answers_to() {
        let lo = access("127.0.0.1", &[]);
        for ok in [
            "localhost",
            "localhost:8080",
            "LocalHost.:8080",
            "app.localhost:3000",
            "127.0.0.1:8080",
            "127.3.4.5",
            "[::1]:8080",
            "ip6-localhost",
        ] {
            assert!(lo.host_allowed(ok), "{ok} is loopback");
        }
        for no in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "192.168.1.5:8080",
            "",
            "a b",
        ] {
            assert!(!lo.host_allowed(no), "{no} is not this server");
        }
        // Bound to one LAN address: that address too, not another one.
        let lan = access("192.168.1.5", &[]);
        assert!(lan.host_allowed("192.168.1.5:8080"));
        assert!(lan.host_allowed("localhost:8080"));
        assert!(!lan.host_allowed("192.168.1.6:8080"));
        assert!(!lan.host_allowed("evil.example:8080"));
        // Bound to every interface: any address (a name is what rebinding needs).
        let any = access("0.0.0.0", &[]);
        assert!(any.host_allowed("10.1.2.3:8080"));
        assert!(any.host_allowed("[fe80::1]:8080"));
        assert!(!any.host_allowed("evil.example:8080"));
    }

    #[test]
    fn origins_are_normalized_and_bad_ones_named() {
        assert_eq!(
            normalize_origin("HTTP://LocalHost:3000/").unwrap(),
            "http://localhost:3000"
        );
        assert_eq!(
            normalize_origin("tauri://localhost").unwrap(),
            "tauri://localhost"
        );
        for bad in [
            "localhost:3000",
            "http://localhost:3000/app",
            "http://u@localhost",
            "null",
            "",
        ] {
            let e = normalize_origin(bad).unwrap_err();
            assert!(e.contains("scheme://host[:port]"), "{bad}: {e}");
        }
        let e = Access::new("127.0.0.1".parse().unwrap(), &["localhost:3000".into()]).unwrap_err();
        assert!(e.starts_with("--cors-origin \"localhost:3000\""), "{e}");
        let a = access("127.0.0.1", &["http://localhost:3000"]);
        assert!(a.origin_allowed("http://localhost:3000"));
        assert!(a.origin_allowed("http://LOCALHOST:3000"));
        assert!(!a.origin_allowed("http://localhost:3001"));
        assert!(!a.origin_allowed("https://localhost:3000"));
        assert!(!a.origin_allowed("null"));
    }

    #[test]
    fn keys_compare_whole() {
        assert!(same_key(b"s3cret", b"s3cret"));
        assert!(!same_key(b"s3cres", b"s3cret"));
        assert!(!same_key(b"s3cret ", b"s3cret"));
        assert!(!same_key(b"", b"s3cret"));
        assert!(!same_key(b"S3cret", b"s3cret"));
    }

    #[tokio::test]
    async fn what_a_web_page_could_send_is_refused() {
        let a = server("127.0.0.1", &[], None).await;
        let host = format!("Host: {a}");
        // The baseline: curl-style JSON reaches the handler (503: nothing loaded).
        let r = send(
            a,
            "POST",
            "/v1/chat/completions",
            &[&host, JSON],
            CHAT.as_bytes(),
        )
        .await;
        assert_eq!(r.status, 503, "{}", r.body);
        // A page's "simple" POST (text/plain, no preflight) from a foreign origin.
        let r = send(
            a,
            "POST",
            "/v1/chat/completions",
            &[
                &host,
                "Content-Type: text/plain",
                "Origin: http://evil.example",
            ],
            CHAT.as_bytes(),
        )
        .await;
        assert_eq!(r.status, 403, "{}", r.body);
        assert_eq!(r.error()["code"], "origin_not_allowed");
        assert!(
            r.error()["message"]
                .as_str()
                .unwrap()
                .contains("--cors-origin http://evil.example")
        );
        assert_eq!(r.header("access-control-allow-origin"), None);
        // The same body as text/plain without an Origin: not JSON, not parsed.
        for ct in [
            "Content-Type: text/plain",
            "Content-Type: application/x-www-form-urlencoded",
            "Content-Type: multipart/form-data; boundary=x",
        ] {
            let r = send(
                a,
                "POST",
                "/v1/chat/completions",
                &[&host, ct],
                CHAT.as_bytes(),
            )
            .await;
            assert_eq!(r.status, 415, "{ct}: {}", r.body);
            assert_eq!(r.error()["code"], "unsupported_media_type");
        }
        let r = send(a, "POST", "/v1/completions", &[&host], b"{}").await;
        assert_eq!(r.status, 415, "no Content-Type: {}", r.body);
        assert!(r.error()["message"].as_str().unwrap().contains("missing"));
        // JSON with parameters is JSON.
        let r = send(
            a,
            "POST",
            "/v1/chat/completions",
            &[&host, "Content-Type: Application/JSON; charset=utf-8"],
            CHAT.as_bytes(),
        )
        .await;
        assert_eq!(r.status, 503, "{}", r.body);
        // A foreign origin's JSON request and its preflight.
        let r = send(
            a,
            "POST",
            "/v1/chat/completions",
            &[&host, JSON, "Origin: http://evil.example"],
            CHAT.as_bytes(),
        )
        .await;
        assert_eq!(r.status, 403, "{}", r.body);
        let r = send(
            a,
            "OPTIONS",
            "/v1/chat/completions",
            &[
                &host,
                "Origin: http://evil.example",
                "Access-Control-Request-Method: POST",
                "Access-Control-Request-Headers: content-type",
            ],
            b"",
        )
        .await;
        assert_eq!(r.status, 403, "{}", r.body);
        assert_eq!(r.error()["code"], "origin_not_allowed");
        assert_eq!(r.header("access-control-allow-origin"), None);
        // DNS rebinding: a page's own name now pointing here reads nothing.
        for path in ["/v1/models", "/metrics", "/health", "/memwall/facts"] {
            let r = send(a, "GET", path, &["Host: evil.example:8080"], b"").await;
            assert_eq!(r.status, 403, "{path}: {}", r.body);
            assert_eq!(r.error()["code"], "host_not_allowed");
        }
        let r = send(a, "GET", "/v1/models", &["Host: localhost:8080"], b"").await;
        assert_eq!(r.status, 503, "{}", r.body);
    }

    #[tokio::test]
    async fn a_listed_origin_gets_its_preflight_and_cors_headers() {
        let a = server("127.0.0.1", &["http://localhost:3000"], None).await;
        let host = format!("Host: {a}");
        let r = send(
            a,
            "OPTIONS",
            "/v1/chat/completions",
            &[
                &host,
                "Origin: http://localhost:3000",
                "Access-Control-Request-Method: POST",
                "Access-Control-Request-Headers: authorization, content-type",
            ],
            b"",
        )
        .await;
        assert_eq!(r.status, 204, "{}", r.headers);
        assert_eq!(
            r.header("access-control-allow-origin").as_deref(),
            Some("http://localhost:3000")
        );
        assert_eq!(
            r.header("access-control-allow-methods").as_deref(),
            Some("GET, POST")
        );
        assert_eq!(
            r.header("access-control-allow-headers").as_deref(),
            Some("authorization, content-type")
        );
        let r = send(
            a,
            "POST",
            "/v1/chat/completions",
            &[&host, JSON, "Origin: http://localhost:3000"],
            CHAT.as_bytes(),
        )
        .await;
        assert_eq!(r.status, 503, "past the guard: {}", r.body);
        assert_eq!(
            r.header("access-control-allow-origin").as_deref(),
            Some("http://localhost:3000")
        );
        assert!(r.header("vary").is_some_and(|v| v.contains("Origin")));
        // Listed, but still JSON only, and other origins still refused.
        let r = send(
            a,
            "POST",
            "/v1/chat/completions",
            &[
                &host,
                "Content-Type: text/plain",
                "Origin: http://localhost:3000",
            ],
            CHAT.as_bytes(),
        )
        .await;
        assert_eq!(r.status, 415, "{}", r.body);
        let r = send(
            a,
            "OPTIONS",
            "/v1/chat/completions",
            &[
                &host,
                "Origin: http://localhost:3001",
                "Access-Control-Request-Method: POST",
            ],
            b"",
        )
        .await;
        assert_eq!(r.status, 403, "{}", r.body);
    }

    #[tokio::test]
    async fn with_a_key_a_text_body_is_refused_unread_and_keys_must_match() {
        let a = server("127.0.0.1", &[], Some("k3y")).await;
        let host = format!("Host: {a}");
        let r = send(
            a,
            "POST",
            "/v1/chat/completions",
            &[
                &host,
                "Content-Type: text/plain",
                "Authorization: Bearer k3y",
            ],
            CHAT.as_bytes(),
        )
        .await;
        assert_eq!(r.status, 415, "{}", r.body);
        for auth in [
            "Authorization: Bearer k3x",
            "Authorization: Bearer k3y2",
            "Authorization: k3y",
        ] {
            let r = send(
                a,
                "POST",
                "/v1/chat/completions",
                &[&host, JSON, auth],
                CHAT.as_bytes(),
            )
            .await;
            assert_eq!(r.status, 401, "{auth}: {}", r.body);
            assert_eq!(r.error()["code"], "invalid_api_key");
        }
        let r = send(
            a,
            "POST",
            "/v1/chat/completions",
            &[&host, JSON, "Authorization: bearer k3y"],
            CHAT.as_bytes(),
        )
        .await;
        assert_eq!(r.status, 503, "{}", r.body);
    }

    #[tokio::test]
    async fn every_error_is_an_openai_error_object() {
        let a = server("127.0.0.1", &[], None).await;
        let host = format!("Host: {a}");
        let r = send(a, "GET", "/v1/nope", &[&host], b"").await;
        assert_eq!(r.status, 404);
        assert_eq!(r.error()["code"], "unknown_url");
        assert!(
            r.error()["message"]
                .as_str()
                .unwrap()
                .contains("GET /v1/nope")
        );
        let r = send(a, "GET", "/v1/chat/completions", &[&host], b"").await;
        assert_eq!(r.status, 405);
        assert_eq!(r.error()["code"], "method_not_allowed");
        assert_eq!(r.header("allow").as_deref(), Some("POST"));
        let r = send(a, "POST", "/v1/models", &[&host, JSON], b"{}").await;
        assert_eq!(r.status, 405);
        assert!(r.header("allow").unwrap().contains("GET"));
        let big = format!(r#"{{"prompt":"{}"}}"#, "x".repeat(BODY_LIMIT + 1));
        let r = send(a, "POST", "/v1/completions", &[&host, JSON], big.as_bytes()).await;
        assert_eq!(r.status, 413, "{}", r.body);
        assert_eq!(r.error()["code"], "request_too_large");
        let r = send(a, "POST", "/v1/completions", &[&host, JSON], b"[1]").await;
        assert_eq!(r.status, 400);
        assert!(
            r.error()["message"]
                .as_str()
                .unwrap()
                .contains("JSON object")
        );
        // Field checks run before the model is needed: each names its field.
        for (body, param) in [
            (r#"{"prompt":"x","logprobs":2}"#, "logprobs"),
            (r#"{"prompt":"x","echo":true}"#, "echo"),
            (r#"{"prompt":"x","best_of":3}"#, "best_of"),
            (r#"{"prompt":"x","suffix":"y"}"#, "suffix"),
            (r#"{"prompt":"x","frobnicate":1}"#, "frobnicate"),
        ] {
            let r = send(
                a,
                "POST",
                "/v1/completions",
                &[&host, JSON],
                body.as_bytes(),
            )
            .await;
            assert_eq!(r.status, 400, "{body}: {}", r.body);
            assert_eq!(r.error()["param"], param, "{body}");
        }
    }
}
