//! `memwall serve` end to end on real models, over loopback HTTP with a raw HTTP/1.1
//! client (every byte the server sends is seen): the chat template against
//! llama.cpp's own, streamed == non-streamed text, prefix reuse, batched vs
//! one-at-a-time greedy outputs, 100 concurrent streaming clients, disconnects, and
//! the stock `openai` Python client. Serialized with the engine lock; models that
//! are absent skip loudly.
#![cfg(feature = "llama")]

use memwall_core::experiments::serve::job::{ServeHandle, ServeOptions, start};
use memwall_core::experiments::serve::template::ChatTemplate;
use memwall_core::measure::engine::llama::LlamaModelHandle;
use memwall_core::measure::engine::{ChatMessage, Vocab};
use memwall_testkit as testing;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn msg(role: &str, content: &str) -> ChatMessage {
    ChatMessage {
        role: role.into(),
        content: content.into(),
    }
}

#[test]
fn qwen_template_matches_llama_cpp_and_has_one_bos() {
    let Some(path) = testing::model("qwen2.5-coder-0.5b-q4_k_m") else {
        return;
    };
    let _lock = testing::engine_lock();
    let h = LlamaModelHandle::load(&path, 0).unwrap();
    let src = ChatTemplate::source_of(&path)
        .unwrap()
        .expect("Qwen2.5 carries a template");
    let (bos, eos) = h.bos_eos();
    let t = ChatTemplate::new(&src, &h.token_text(bos), &h.token_text(eos)).unwrap();
    let conv = [
        msg("system", "You are terse."),
        msg("user", "2+2?"),
        msg("assistant", "4"),
        msg("user", "And 3+3? é ✓"),
    ];
    let ours = t.render(&conv).unwrap();
    let theirs = h.apply_chat_template(&conv).unwrap();
    assert_eq!(ours, theirs);
    assert_eq!(
        h.tokenize(&ours, false).unwrap(),
        h.tokenize(&theirs, false).unwrap()
    );
    // Without a system message Qwen2.5's template adds its default one, which
    // llama.cpp's pattern matcher (plain chatml) does not: the reason to run the template.
    let ours = t.render(&conv[1..2]).unwrap();
    assert!(
        ours.starts_with("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud."),
        "{ours}"
    );
    assert!(ours.ends_with("<|im_start|>assistant\n"));
    // Qwen2.5 adds no BOS: the prompt's tokens start with <|im_start|>.
    assert_eq!(h.bos(), None);
}

/// One HTTP/1.1 exchange: status, header block, de-chunked body.
struct Resp {
    status: u16,
    headers: String,
    body: String,
}

fn request(method: &str, path: &str, body: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(i) = b.windows(2).position(|w| w == b"\r\n") {
        let n =
            usize::from_str_radix(std::str::from_utf8(&b[..i]).unwrap().trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.extend_from_slice(&b[i + 2..i + 2 + n]);
        b = &b[i + 2 + n + 2..];
    }
    out
}

fn parse(raw: &[u8]) -> Resp {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("header end");
    let headers = String::from_utf8(raw[..split].to_vec()).unwrap();
    let status = headers[9..12].parse().unwrap();
    let rest = &raw[split + 4..];
    let body = if headers
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    Resp {
        status,
        headers,
        body: String::from_utf8(body).expect("the server sends UTF-8 only"),
    }
}

async fn call(addr: SocketAddr, method: &str, path: &str, body: &str) -> Resp {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request(method, path, body).as_bytes())
        .await
        .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    parse(&raw)
}

/// Text of an SSE chat stream (concatenated `delta.content`), checking the framing.
fn stream_text(body: &str) -> (String, serde_json::Value) {
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let mut text = String::new();
    let mut last = serde_json::Value::Null;
    for frame in body.split("\n\n").filter(|f| !f.is_empty()) {
        let data = frame.strip_prefix("data: ").expect("data frame");
        if data == "[DONE]" {
            break;
        }
        let v: serde_json::Value = serde_json::from_str(data).unwrap();
        assert!(v.get("error").is_none(), "{data}");
        if let Some(c) = v["choices"][0]["delta"]["content"].as_str() {
            text.push_str(c);
        }
        if !v["choices"][0]["finish_reason"].is_null() {
            last = v;
        }
    }
    (text, last)
}

fn chat_body(messages: &[(&str, &str)], max_tokens: u32, stream: bool) -> String {
    let m: Vec<serde_json::Value> = messages
        .iter()
        .map(|(r, c)| serde_json::json!({"role": r, "content": c}))
        .collect();
    serde_json::json!({"messages": m, "max_tokens": max_tokens, "stream": stream}).to_string()
}

/// POSTs a non-streamed chat completion, asserts 200 and returns the parsed reply.
async fn post_chat_json(
    a: SocketAddr,
    conv: &[(&str, &str)],
    max_tokens: u32,
) -> serde_json::Value {
    let r = call(
        a,
        "POST",
        "/v1/chat/completions",
        &chat_body(conv, max_tokens, false),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    serde_json::from_str(&r.body).unwrap()
}

async fn metric(addr: SocketAddr, name: &str) -> f64 {
    let r = call(addr, "GET", "/metrics", "").await;
    r.body
        .lines()
        .find_map(|l| l.strip_prefix(&format!("llamacpp:{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {}", r.body))
        .parse()
        .unwrap()
}

async fn serve(path: std::path::PathBuf, parallel: u32, queue: u32) -> ServeHandle {
    let mut o = ServeOptions::new(path);
    o.port = 0;
    o.parallel = parallel;
    o.queue = queue;
    o.ctx_size = 1024 * parallel;
    o.threads = 2;
    let h = start(o, |_| {}).await.unwrap();
    let t0 = Instant::now();
    loop {
        let r = call(h.addr, "GET", "/health", "").await;
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 503, "{}", r.body);
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "model never loaded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    h
}

const SYSTEM: &str = "You are a careful assistant for a team of engineers. Answer in one short sentence, without lists, code or preamble. Prefer plain words.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_equals_non_streamed_prefix_is_reused_and_batching_is_measured() {
    let Some(path) = testing::model("qwen2.5-coder-0.5b-q4_k_m") else {
        return;
    };
    let _lock = testing::engine_lock();
    let h = serve(path, 4, 8).await;
    let a = h.addr;

    // Streamed == non-streamed, byte for byte (a prompt that invites accents).
    let conv = [
        ("system", SYSTEM),
        (
            "user",
            "Write the French word for coffee shop, with its accent.",
        ),
    ];
    let r = call(
        a,
        "POST",
        "/v1/chat/completions",
        &chat_body(&conv, 12, true),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.headers
            .to_ascii_lowercase()
            .contains("content-type: text/event-stream")
    );
    let (streamed, last) = stream_text(&r.body);
    assert!(
        last["timings"]["predicted_n"].as_u64().unwrap() >= 1,
        "{last}"
    );
    let v = post_chat_json(a, &conv, 12).await;
    let full = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(!full.is_empty());
    assert_eq!(streamed, full);
    assert!(!full.contains('\u{FFFD}'));
    // The second request shares the whole prompt but its last token.
    let cached = v["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    let prompt = v["usage"]["prompt_tokens"].as_u64().unwrap();
    assert_eq!(cached, prompt - 1, "{v}");

    // A new user turn after the same system prompt reuses the system prompt's tokens.
    let conv2 = [("system", SYSTEM), ("user", "Name one prime number.")];
    let r = call(
        a,
        "POST",
        "/v1/chat/completions",
        &chat_body(&conv2, 4, false),
    )
    .await;
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    let cached = v["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    assert!(cached >= 20, "the system prompt's tokens are reused: {v}");
    assert_eq!(v["timings"]["cache_n"].as_u64().unwrap(), cached);

    // Batched vs one at a time: greedy outputs of 4 prompts alone, then together.
    let users = [
        "Name a color.",
        "Name a fruit.",
        "Name a planet.",
        "Name a metal.",
    ];
    let mut alone = Vec::new();
    for u in users {
        let r = call(
            a,
            "POST",
            "/v1/chat/completions",
            &chat_body(&[("user", u)], 16, false),
        )
        .await;
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        alone.push(
            v["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let together = futures_join(users.iter().map(|u| {
        let body = chat_body(&[("user", u)], 16, false);
        async move {
            let r = call(a, "POST", "/v1/chat/completions", &body).await;
            let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
            v["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_string()
        }
    }))
    .await;
    let same = alone.iter().zip(&together).filter(|(x, y)| x == y).count();
    eprintln!(
        "batched vs one-at-a-time greedy outputs: {same}/{} identical (measured, not asserted: a difference is printed below; this test does not find its cause, and llama.cpp's CPU kernels are known here to give batch-shape-dependent logits)",
        users.len()
    );
    for (x, y) in alone.iter().zip(&together) {
        if x != y {
            eprintln!("  alone:    {x:?}\n  together: {y:?}");
        }
    }
    h.stop().await.unwrap();
}

async fn futures_join<F: std::future::Future<Output = T> + Send + 'static, T: Send + 'static>(
    fs: impl Iterator<Item = F>,
) -> Vec<T> {
    let hs: Vec<_> = fs.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in hs {
        out.push(h.await.unwrap());
    }
    out
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Served,
    Rejected,
    Disconnected,
}

/// One streaming client; `disconnect` drops the connection after the first content chunk.
async fn client(a: SocketAddr, i: usize, disconnect: bool) -> Outcome {
    let body = chat_body(&[("user", &format!("Count from {i}."))], 4, true);
    let mut s = TcpStream::connect(a).await.unwrap();
    s.write_all(request("POST", "/v1/chat/completions", &body).as_bytes())
        .await
        .unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        // The role chunk and the first content chunk.
        if disconnect && raw.windows(6).filter(|w| w == b"data: ").count() >= 2 {
            return Outcome::Disconnected;
        }
    }
    let r = parse(&raw);
    match r.status {
        200 => {
            stream_text(&r.body);
            Outcome::Served
        }
        429 => {
            assert!(
                r.headers.to_ascii_lowercase().contains("retry-after: 1"),
                "{}",
                r.headers
            );
            let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
            assert_eq!(v["error"]["code"], "rate_limit_exceeded");
            Outcome::Rejected
        }
        s => panic!("client {i}: status {s}: {}", r.body),
    }
}

/// How long a test waits for the server to reach a state before calling it stuck: a
/// hang guard, far above any step on a busy machine, never a speed bound.
const HANG_GUARD: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_streaming_clients_are_served_or_told_to_retry_and_disconnects_free_slots() {
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let _lock = testing::engine_lock();
    let h = serve(path, 4, 32).await;
    let a = h.addr;
    // Every 10th client leaves after its first token.
    let outcomes = futures_join((0..100).map(move |i| client(a, i, i % 10 == 0))).await;
    let served = outcomes.iter().filter(|o| **o == Outcome::Served).count();
    let rejected = outcomes.iter().filter(|o| **o == Outcome::Rejected).count();
    let left = outcomes
        .iter()
        .filter(|o| **o == Outcome::Disconnected)
        .count();
    eprintln!(
        "100 streaming clients, 4 slots, queue 32: {served} served, {rejected} got 429, {left} left mid-stream"
    );
    assert_eq!(served + rejected + left, 100);
    assert!(served + left >= 36, "4 slots + 32 queued must be taken");
    // Slots and queue empty again (a hang guard, not a speed bound: how fast slots
    // free is measured by bench/serve-disconnect.sh).
    let t0 = Instant::now();
    while metric(a, "requests_processing").await > 0.0 || metric(a, "requests_deferred").await > 0.0
    {
        assert!(t0.elapsed() < HANG_GUARD, "slots leaked");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // Disconnects: 4 long streams (400 tokens, end-of-generation ignored), each left
    // after its first tokens; each slot is freed by its client leaving: the request is
    // cancelled, not run to its 400 tokens, and every token it generated is counted.
    let cancelled0 = metric(a, "requests_cancelled_total").await;
    let served0 = metric(a, "requests_served_total").await;
    let tokens0 = metric(a, "tokens_predicted_total").await;
    let mut socks = Vec::new();
    for i in 0..4 {
        let mut body: serde_json::Value = serde_json::from_str(&chat_body(
            &[("user", &format!("Write a long story number {i}."))],
            400,
            true,
        ))
        .unwrap();
        body["ignore_eos"] = true.into();
        let body = body.to_string();
        let mut s = TcpStream::connect(a).await.unwrap();
        s.write_all(request("POST", "/v1/chat/completions", &body).as_bytes())
            .await
            .unwrap();
        socks.push(s);
    }
    // Content chunks the clients read (each carries at least one token's text).
    let mut content_chunks = 0.0;
    for s in &mut socks {
        let mut buf = [0u8; 4096];
        let mut seen = 0;
        while seen < 4 {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0);
            seen += buf[..n].windows(6).filter(|w| w == b"data: ").count();
        }
        // The first chunk is the role's.
        content_chunks += (seen - 1) as f64;
    }
    assert_eq!(metric(a, "requests_processing").await, 4.0);
    drop(socks);
    let t0 = Instant::now();
    while metric(a, "requests_processing").await > 0.0 {
        assert!(t0.elapsed() < HANG_GUARD, "slots leaked after disconnects");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(
        metric(a, "requests_cancelled_total").await - cancelled0,
        4.0,
        "each of the 4 slots must be freed by its client leaving (cancelled), not by finishing"
    );
    assert_eq!(metric(a, "requests_served_total").await, served0);
    let counted = metric(a, "tokens_predicted_total").await - tokens0;
    eprintln!(
        "4 cancelled streams: clients read {content_chunks} content chunks; tokens_predicted_total rose by {counted}"
    );
    assert!(
        counted >= content_chunks && counted < 4.0 * 400.0,
        "the tokens of cancelled requests are counted: {counted} counted, {content_chunks} chunks read"
    );
    // Still healthy (no panic on the engine thread or in a handler).
    assert_eq!(call(a, "GET", "/health", "").await.status, 200);
    let r = call(
        a,
        "POST",
        "/v1/chat/completions",
        &chat_body(&[("user", "Hi")], 2, false),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_openai_shaped() {
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let _lock = testing::engine_lock();
    let h = serve(path, 1, 1).await;
    let a = h.addr;
    let r = call(a, "POST", "/v1/chat/completions", "{\"messages\": [").await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("invalid_request_error"), "{}", r.body);
    let r = call(
        a,
        "POST",
        "/v1/chat/completions",
        r#"{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}"#,
    )
    .await;
    assert_eq!(r.status, 404);
    assert!(r.body.contains("model_not_found"), "{}", r.body);
    let r = call(
        a,
        "POST",
        "/v1/chat/completions",
        &chat_body(&[("user", "x")], 5000, false),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("context_length_exceeded"), "{}", r.body);
    let r = call(
        a,
        "POST",
        "/v1/completions",
        r#"{"prompt":"The sky is","max_tokens":3}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["usage"]["completion_tokens"].as_u64().unwrap(), 3);
    h.stop().await.unwrap();
}

/// The python of a venv with the stock `openai` client (`scripts/openai-venv.sh`,
/// pip install openai); `None` after a loud skip when it cannot be made.
fn openai_python() -> Option<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let made = std::process::Command::new("bash")
        .arg(root.join("scripts/openai-venv.sh"))
        .output()
        .unwrap();
    if !made.status.success() {
        // CI (MEMWALL_REQUIRE_E2E=1) skips nothing: a missing client is a failure there.
        testing::skip_or_fail(
            testing::Requirement::E2e,
            "a venv with the openai client",
            &format!(
                "scripts/openai-venv.sh failed (is PyPI reachable?): {}",
                String::from_utf8_lossy(&made.stderr).trim()
            ),
        );
        return None;
    }
    Some(String::from_utf8(made.stdout).unwrap().trim().to_string())
}

/// Runs `script` with `python`; returns its stdout after asserting it succeeded.
async fn run_python(python: String, script: String) -> String {
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&python)
            .arg("-c")
            .arg(&script)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The stock `openai` Python client streams a chat completion. Its venv comes from
/// `scripts/openai-venv.sh` (pip install openai); skipped loudly when it cannot be made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_python_client_streams_a_chat_completion() {
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let Some(python) = openai_python() else {
        return;
    };
    let _lock = testing::engine_lock();
    let h = serve(path, 2, 4).await;
    let script = format!(
        r#"
import openai
c = openai.OpenAI(base_url="http://{}/v1", api_key="unused")
s = c.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", messages=[{{"role": "user", "content": "Say hello."}}], max_tokens=6, stream=True, stream_options={{"include_usage": True}})
text, finish, usage = "", None, None
for ch in s:
    if ch.choices:
        text += ch.choices[0].delta.content or ""
        finish = ch.choices[0].finish_reason or finish
    if ch.usage:
        usage = ch.usage
assert text, "no text"
assert finish in ("stop", "length"), finish
assert usage.completion_tokens >= 1
print("OK", repr(text), finish, usage.completion_tokens)
"#,
        h.addr
    );
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&python)
            .arg("-c")
            .arg(&script)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("openai client: {stdout}");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("OK "));
    h.stop().await.unwrap();
}

/// What the stock `openai` client gets for each request field memwall serve does
/// not implement (a 400 naming the field, as the client's `BadRequestError.param`),
/// and for the fields that change nothing under greedy decoding (200, and the very
/// text of the same request without them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_client_is_told_what_the_server_does_not_do() {
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let Some(python) = openai_python() else {
        return;
    };
    let _lock = testing::engine_lock();
    let h = serve(path, 1, 4).await;
    let script = format!(
        r#"
import json, openai
c = openai.OpenAI(base_url="http://{}/v1", api_key="unused", max_retries=0)
M = [{{"role": "user", "content": "Name a color."}}]
TOOL = [{{"type": "function", "function": {{"name": "f", "parameters": {{"type": "object", "properties": {{}}}}}}}}]
def chat(**kw):
    kw.setdefault("messages", M)
    return c.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", max_tokens=6, **kw)
cases = [
    ("baseline", {{}}),
    ("baseline_warm", {{}}),
    ("response_format", dict(response_format={{"type": "json_object"}})),
    ("logprobs", dict(logprobs=True, top_logprobs=2)),
    ("tools", dict(tools=TOOL)),
    ("tool_choice", dict(tool_choice="required")),
    ("functions", dict(functions=[{{"name": "f", "parameters": {{"type": "object", "properties": {{}}}}}}])),
    ("presence_penalty", dict(presence_penalty=0.5)),
    ("frequency_penalty", dict(frequency_penalty=0.5)),
    ("logit_bias", dict(logit_bias={{"42": -100}})),
    ("temperature", dict(temperature=0.7)),
    ("n", dict(n=2)),
    ("stop", dict(stop=["\n"])),
    ("store", dict(store=True)),
    ("unknown_extra", dict(extra_body={{"guided_json": {{"type": "object"}}}})),
    ("wizard_role", dict(messages=[{{"role": "wizard", "content": "hi"}}] + M)),
    ("top_p", dict(top_p=0.5)),
    ("seed", dict(seed=1234)),
    ("user_metadata", dict(user="u-1", metadata={{"a": "b"}})),
    ("top_k_min_p", dict(extra_body={{"top_k": 40, "min_p": 0.05}})),
    ("developer_role", dict(messages=[{{"role": "developer", "content": "You are terse."}}] + M)),
    ("system_role", dict(messages=[{{"role": "system", "content": "You are terse."}}] + M)),
]
for name, kw in cases:
    try:
        r = chat(**kw)
        u = r.usage
        print(json.dumps({{"case": name, "status": 200, "text": r.choices[0].message.content, "prompt_tokens": u.prompt_tokens, "cached_tokens": u.prompt_tokens_details.cached_tokens}}))
    except openai.APIStatusError as e:
        print(json.dumps({{"case": name, "status": e.status_code, "param": e.param, "type": e.type, "message": e.message}}))
for name, kw in [("completions_logprobs", dict(logprobs=1)), ("completions_echo", dict(echo=True)), ("completions_ok", {{}})]:
    try:
        r = c.completions.create(model="SmolLM2-135M-Instruct.Q4_1", prompt="The sky is", max_tokens=4, **kw)
        print(json.dumps({{"case": name, "status": 200, "text": r.choices[0].text}}))
    except openai.APIStatusError as e:
        print(json.dumps({{"case": name, "status": e.status_code, "param": e.param, "type": e.type, "message": e.message}}))
"#,
        h.addr
    );
    let out = run_python(python, script).await;
    let rows: std::collections::BTreeMap<String, serde_json::Value> = out
        .lines()
        .map(|l| {
            eprintln!("openai client: {l}");
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["case"].as_str().unwrap().to_string(), v)
        })
        .collect();
    let refused = |case: &str, params: &[&str]| {
        let r = &rows[case];
        assert_eq!(r["status"], 400, "{case}: {r}");
        assert_eq!(r["type"], "invalid_request_error", "{case}: {r}");
        assert!(
            params.iter().any(|p| r["param"] == *p),
            "{case}: param {} not in {params:?}",
            r["param"]
        );
    };
    refused("response_format", &["response_format"]);
    refused("logprobs", &["logprobs", "top_logprobs"]);
    refused("tools", &["tools"]);
    refused("tool_choice", &["tool_choice"]);
    refused("functions", &["functions"]);
    refused("presence_penalty", &["presence_penalty"]);
    refused("frequency_penalty", &["frequency_penalty"]);
    refused("logit_bias", &["logit_bias"]);
    refused("temperature", &["temperature"]);
    refused("n", &["n"]);
    refused("stop", &["stop"]);
    refused("store", &["store"]);
    refused("unknown_extra", &["guided_json"]);
    refused("wizard_role", &["messages[0].role"]);
    refused("completions_logprobs", &["logprobs"]);
    refused("completions_echo", &["echo"]);
    // Greedy decoding: the same tokens with or without them. Compared with the
    // second, warm, baseline: refused requests never reach the slot, so each of these
    // reuses the same cached prefix and evaluates the last prompt token alone, as it
    // did (llama.cpp's CPU logits depend on the batch shape: see the URL chat test).
    let base = rows["baseline_warm"]["text"].as_str().unwrap();
    assert!(!base.is_empty());
    let n_prompt = &rows["baseline"]["prompt_tokens"];
    for case in [
        "baseline_warm",
        "top_p",
        "seed",
        "user_metadata",
        "top_k_min_p",
    ] {
        let r = &rows[case];
        assert_eq!(r["status"], 200, "{case}: {r}");
        assert_eq!(r["text"], base, "{case} changes nothing");
        assert_eq!(&r["prompt_tokens"], n_prompt, "{case}");
        assert_eq!(
            r["cached_tokens"].as_u64().unwrap(),
            n_prompt.as_u64().unwrap() - 1,
            "{case}: the baseline's prompt, all but its last token reused"
        );
    }
    // developer is the system message: the system request is the developer one's
    // prompt, token for token (all but its last token reused from the slot).
    let (d, sy) = (&rows["developer_role"], &rows["system_role"]);
    assert_eq!(d["status"], 200, "{d}");
    assert_eq!(sy["status"], 200, "{sy}");
    assert_eq!(d["prompt_tokens"], sy["prompt_tokens"]);
    assert_eq!(
        sy["cached_tokens"].as_u64().unwrap(),
        d["prompt_tokens"].as_u64().unwrap() - 1
    );
    assert_eq!(rows["completions_ok"]["status"], 200);
    h.stop().await.unwrap();
}

/// The live sampler runs beside the server: at shutdown its recording (one
/// `serving` phase) is stored as a `serve` run, and the summary counts exactly the
/// tokens generated; its energy is measured, or `—` with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_stores_its_sampler_series_at_shutdown() {
    use memwall_core::experiments::serve::job::{SERVING_PHASE, finish};
    let Some(path) = testing::model("smollm2-135m-q4_1") else {
        return;
    };
    let _lock = testing::engine_lock();
    let h = serve(path.clone(), 1, 1).await;
    let r = call(
        h.addr,
        "POST",
        "/v1/completions",
        r#"{"prompt":"The sky is","max_tokens":5,"ignore_eos":true}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // What the server publishes about itself: its engine and placement, the file's
    // bytes per step as the GGUF reader gives them, its own KV type, and why it has
    // no roof (started without a store to look one up in).
    let f = call(h.addr, "GET", "/memwall/facts", "").await;
    assert_eq!(f.status, 200, "{}", f.body);
    let f: serde_json::Value = serde_json::from_str(&f.body).unwrap();
    let m = memwall_core::probe::model::ModelFacts::open(&path).unwrap();
    assert_eq!(f["server"], "memwall serve");
    assert_eq!(f["engine"], "llama.cpp");
    assert_eq!(f["placement"], "cpu");
    assert_eq!(f["kv_type"], "f16");
    assert_eq!(f["streamed_bytes"], m.streamed_bytes.0);
    assert_eq!(
        f["kv_full_bytes_per_token"].as_f64().unwrap(),
        m.kv_bytes_per_token(memwall_core::probe::model::CacheType::F16)
            .0 as f64
    );
    assert!(f["roof"].is_null());
    assert!(
        f["roof_missing"].as_str().unwrap().contains("not asked"),
        "{f}"
    );
    let d = tempfile::tempdir().unwrap();
    let store = memwall_core::store::Store::open(&d.path().join("m.db"))
        .await
        .unwrap();
    let s = finish(&store, "memwall serve", h, None).await.unwrap();
    assert_eq!(s.tokens_predicted, 5);
    let run_id = s.run_id.expect("stored");
    let runs = store.runs().await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].kind, "serve");
    let rec = memwall_core::experiments::live::store::recording(&store, run_id)
        .await
        .unwrap()
        .expect("the series is stored");
    assert_eq!(rec.phases.len(), 1);
    assert_eq!(rec.phases[0].name, SERVING_PHASE);
    assert!(!rec.samples.is_empty());
    // The serving window is the energy's interval, and the summary is stored.
    assert_eq!(
        rec.windows(SERVING_PHASE),
        vec![(rec.phases[0].start_ns, rec.phases[0].end_ns)]
    );
    let stored = memwall_core::experiments::serve::store::serve_energy(&store, run_id)
        .await
        .unwrap()
        .expect("serve_energy row");
    assert_eq!(stored.tokens, 5);
    let e = s.energy.expect("a summary of the serving phase");
    assert_eq!(stored, e);
    match e.j_per_token {
        Some(j) => assert!((j - e.energy_j.unwrap() / 5.0).abs() <= 1e-9 * j.max(1.0)),
        None => assert!(e.reason.is_some(), "{e:?}"),
    }
}

/// The app's Serve page and its chat page pointed at a URL, on a real server: the
/// session reports loading then ready; the URL chat client's concatenated deltas
/// equal the non-streamed reply byte for byte, its TTFT (measured at the client) is
/// positive and below the stream's end, and it relays the server's own `timings`;
/// the session's live counters match the usage the replies reported and what
/// `/metrics` prints; stopping frees the port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_url_chat_client_and_the_app_session_on_a_real_server() {
    use memwall_core::experiments::loadtest::url_chat::{UrlChatRequest, chat_url};
    use memwall_core::experiments::serve::session::{ServePhase, serve_start_job, serve_stop_job};
    let Some(path) = testing::model("qwen2.5-coder-0.5b-q4_k_m") else {
        return;
    };
    let _lock = testing::engine_lock();
    let mut o = ServeOptions::new(path.clone());
    o.port = 0;
    o.parallel = 2;
    o.queue = 4;
    o.ctx_size = 2048;
    o.threads = 2;
    let d = tempfile::tempdir().unwrap();
    let store = memwall_core::store::Store::open(&d.path().join("m.db"))
        .await
        .unwrap();
    let session = serve_start_job(&store, o).await.unwrap();
    let a = session.addr();
    let first = session.live();
    assert_eq!(first.url, format!("http://{a}"));
    assert_eq!((first.n_slots, first.queue_capacity), (2, 4));
    let t0 = Instant::now();
    while session.live().phase != ServePhase::Ready {
        assert_ne!(session.live().phase, ServePhase::Ended, "the load failed");
        assert_eq!(call(a, "GET", "/health", "").await.status, 503);
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "model never loaded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(call(a, "GET", "/health", "").await.status, 200);
    let live = session.live();
    assert_eq!(
        live.template.as_deref(),
        Some("jinja"),
        "the GGUF's own template"
    );
    assert_eq!(live.n_ctx_slot, Some(1024));

    let conv = [
        ("system", SYSTEM),
        (
            "user",
            "Name the French word for coffee shop, with its accent.",
        ),
    ];
    // The first request is cold (its whole prompt prefilled in one chunk); every later
    // one with this prompt reuses the slot's cached prefix and evaluates only the last
    // prompt token, a 1-row batch. llama.cpp's CPU kernels depend on the batch shape
    // (results/serving/prefix-cache.md: cold vs warm 3/4 identical on both servers, and
    // this prompt flipped on a Zen 3 machine), so the text compared with the stream is
    // the second, warm, non-streamed reply: same cached cells, same batch shapes.
    let v = post_chat_json(a, &conv, 16).await;
    let n_cold = v["usage"]["completion_tokens"].as_u64().unwrap();
    let v = post_chat_json(a, &conv, 16).await;
    assert!(
        v["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
            > 0,
        "the second request reuses the first one's prefix: {v}"
    );
    let whole = v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let n_whole = v["usage"]["completion_tokens"].as_u64().unwrap();

    let req = UrlChatRequest {
        url: format!("http://{a}/v1"),
        model: None,
        api_key: None,
        messages: conv.iter().map(|(r, c)| msg(r, c)).collect(),
        max_tokens: 16,
    };
    let (text, s) = tokio::task::spawn_blocking(move || {
        let mut text = String::new();
        let s = chat_url(&req, &std::sync::atomic::AtomicBool::new(false), &mut |e| {
            if let memwall_core::experiments::loadtest::url_chat::UrlChatEvent::Token {
                text: t,
                ..
            } = e
            {
                text.push_str(&t);
            }
        })
        .unwrap();
        (text, s)
    })
    .await
    .unwrap();
    assert_eq!(text, whole, "concatenated deltas == the non-streamed text");
    assert!(!text.is_empty());
    assert_eq!(s.completion_tokens, Some(n_whole));
    let (ttft, e2el) = (s.ttft_ms.unwrap(), s.e2el_ms.unwrap());
    assert!(ttft > 0.0 && ttft < e2el, "TTFT {ttft} ms, E2EL {e2el} ms");
    let t = s.timings.clone().expect("memwall serve sends timings");
    assert_eq!(t.predicted_n, Some(n_whole));
    assert!(t.prompt_n.unwrap() + t.cache_n.unwrap() > 0);
    if n_whole >= 2 {
        let want = (n_whole - 1) as f64 / ((s.last_chunk_ms.unwrap() - ttft) / 1e3);
        assert!((s.decode_tps.unwrap() - want).abs() < 1e-9, "{s:?}");
    }

    // Served, not invented: the session's counters are the replies' usage and
    // what /metrics prints.
    // The slot is released just after the last chunk ([DONE]) reaches the client, so
    // the counters are read once the server has let go of it (waiting at most
    // HANG_GUARD: a hang guard, not a speed bound).
    let t0 = std::time::Instant::now();
    let mut m = session.live().metrics;
    while (m.requests_processing, m.requests_deferred) != (0, 0) && t0.elapsed() < HANG_GUARD {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        m = session.live().metrics;
    }
    assert_eq!(m.requests_served_total, 3);
    assert_eq!(m.tokens_predicted_total, n_cold + 2 * n_whole);
    assert_eq!((m.requests_processing, m.requests_deferred), (0, 0));
    assert_eq!(
        metric(a, "tokens_predicted_total").await,
        m.tokens_predicted_total as f64
    );
    assert_eq!(metric(a, "requests_served_total").await, 3.0);
    let pred = metric(a, "predicted_tokens_seconds").await;
    assert!((m.predicted_tokens_seconds.unwrap() - pred).abs() <= 1e-9 * pred.max(1.0));

    let d = tempfile::tempdir().unwrap();
    let store = memwall_core::store::Store::open(&d.path().join("m.db"))
        .await
        .unwrap();
    let sum = serve_stop_job(&store, "app: serve", session).await.unwrap();
    assert_eq!(sum.tokens_predicted, n_cold + 2 * n_whole);
    std::net::TcpListener::bind(a).expect("stopping frees the port");
}

/// `memwall serve --engine mlx`: the same server on the MLX engine. A completion
/// served alone equals the greedy decode of the engine driven directly (the
/// independent reference: the engine's own prefill/decode loop, no server), and four
/// requests decoded together in one MLX pass per step give the texts each gets alone.
#[cfg(feature = "mlx")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_runs_on_mlx_and_batched_slots_match_the_engine_alone() {
    use memwall_core::measure::engine::EngineKind;
    use memwall_core::measure::engine::mlx::{MlxEngine, MlxQuant};
    use memwall_core::measure::engine::{Engine, Vocab, argmax};
    let Some(path) = testing::model("qwen2.5-coder-0.5b-q4_k_m") else {
        return;
    };
    let _lock = testing::engine_lock();
    const N: usize = 12;
    let prompts = [
        "def fibonacci(n):",
        "The capital of France is",
        "SELECT name FROM users WHERE",
        "Roses are red, violets are",
    ];
    // The reference: greedy tokens from the engine itself, one prompt at a time.
    let reference: Vec<String> = {
        let mut e = MlxEngine::load(&path, MlxQuant::Q4, 256, 256).unwrap();
        prompts
            .iter()
            .map(|p| {
                e.kv_clear();
                let toks = e.tokenize(p, true).unwrap();
                e.prefill(&toks, 0, 0, true).unwrap();
                let mut bytes = Vec::new();
                for pos in (toks.len() as u32..).take(N) {
                    let t = argmax(e.logits(0).unwrap());
                    if e.is_eog(t) {
                        break;
                    }
                    bytes.extend(e.token_bytes(t));
                    e.decode_one(t, pos, 0).unwrap();
                }
                String::from_utf8(bytes).unwrap()
            })
            .collect()
    };
    let mut o = ServeOptions::new(path);
    o.port = 0;
    o.parallel = 4;
    o.queue = 8;
    o.ctx_size = 1024;
    o.threads = 2;
    o.sampler = false;
    o.engine = EngineKind::Mlx4bit;
    let h = start(o, |_| {}).await.unwrap();
    let t0 = Instant::now();
    while call(h.addr, "GET", "/health", "").await.status != 200 {
        assert!(
            t0.elapsed() < Duration::from_secs(180),
            "model never loaded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let a = h.addr;
    let body =
        |p: &str| serde_json::json!({"prompt": p, "max_tokens": N, "temperature": 0}).to_string();
    let text = |r: Resp| -> String {
        assert_eq!(r.status, 200, "{}", r.body);
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        assert!(
            v["system_fingerprint"]
                .as_str()
                .unwrap()
                .contains("mlx-4bit"),
            "{v}"
        );
        v["choices"][0]["text"].as_str().unwrap().to_string()
    };
    let mut alone = Vec::new();
    for p in prompts {
        alone.push(text(call(a, "POST", "/v1/completions", &body(p)).await));
    }
    assert_eq!(
        alone, reference,
        "served alone vs the engine driven directly"
    );
    let together = futures_join(prompts.iter().map(|p| {
        let b = body(p);
        async move { call(a, "POST", "/v1/completions", &b).await }
    }))
    .await;
    let together: Vec<String> = together.into_iter().map(text).collect();
    let same = alone.iter().zip(&together).filter(|(x, y)| x == y).count();
    eprintln!(
        "MLX: batched vs one-at-a-time greedy outputs: {same}/{} identical",
        prompts.len()
    );
    for (x, y) in alone.iter().zip(&together) {
        if x != y {
            eprintln!("  alone:    {x:?}\n  together: {y:?}");
        }
    }
    // One MLX pass per step for all slots changes only the summation order of the
    // matrix products; greedy text may still flip on a near-tie, so most, not all.
    assert!(same >= 3, "{same}/4 identical");
    h.stop().await.unwrap();
}

/// `memwall serve` stopped by SIGTERM (what `kill`, systemd and docker send) stores
/// its run and returns its summary as Ctrl-C does, every token generated counted;
/// the run's notes say what stopped it, and that chat prompts used memwall's
/// fallback ChatML because the file has no chat template (a tiny synthetic model,
/// which carries none).
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stores_the_serve_run_and_a_file_without_a_template_says_so() {
    use memwall_core::experiments::serve::job::{ServeStatus, serve_job};
    use memwall_core::probe::shape::{Arch, ModelShape, Recipe};
    let shape = ModelShape {
        arch: Arch::Qwen2,
        n_layer: 1,
        n_embd: 64,
        n_head: 2,
        n_head_kv: 1,
        head_dim: None,
        n_ff: 128,
        n_vocab: 1200,
        tied_embeddings: true,
        n_expert: 0,
        n_expert_used: 0,
        n_ff_exp: 0,
        sliding_window: None,
        n_ctx_train: 2048,
        lexicographic_order: false,
    };
    let d = tempfile::tempdir().unwrap();
    let model = d.path().join("no-template.gguf");
    memwall_core::probe::synth::write(
        &shape,
        &Recipe::parse("F16").unwrap(),
        "no-template",
        1,
        &model,
        |_, _| {},
    )
    .unwrap();
    let _lock = testing::engine_lock();
    // This process's own SIGTERM listener, registered before any SIGTERM is sent:
    // the signal then reaches serve_job's listener without ending the test binary.
    let mut own = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM listener");
    let store = memwall_core::store::Store::open(&d.path().join("m.db"))
        .await
        .unwrap();
    let mut o = ServeOptions::new(model.clone());
    o.port = 0;
    o.parallel = 1;
    o.queue = 1;
    o.ctx_size = 512;
    o.threads = 2;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let job = tokio::spawn(async move {
        let r = serve_job(&store, "memwall serve (test)", o, move |s| {
            let _ = tx.send(s);
        })
        .await;
        (r, store)
    });
    let mut addr = None;
    let mut warned = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(120), rx.recv())
            .await
            .expect("the server reports")
            .expect("a status")
        {
            ServeStatus::Listening(a) => addr = Some(a),
            ServeStatus::Warning(w) => warned.push(w),
            ServeStatus::Ready { template, .. } => {
                assert_eq!(template, "fallback-chatml");
                break;
            }
        }
    }
    assert!(
        warned
            .iter()
            .any(|w| w.contains("has no tokenizer.chat_template")),
        "{warned:?}"
    );
    let a = addr.expect("listening before ready");
    let r = call(
        a,
        "POST",
        "/v1/chat/completions",
        r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"ignore_eos":true}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["usage"]["completion_tokens"], 3);
    // SAFETY: kill(2) on this process with a signal both listeners above catch.
    assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGTERM) }, 0);
    own.recv().await;
    let (summary, store) = tokio::time::timeout(HANG_GUARD, job)
        .await
        .expect("SIGTERM stops the server")
        .unwrap();
    let summary = summary.unwrap();
    assert_eq!(summary.tokens_predicted, 3);
    let run_id = summary.run_id.expect("the run is stored");
    let (kind, notes): (String, String) =
        sqlx::query_as("SELECT kind, notes FROM runs WHERE id = ?")
            .bind(run_id)
            .fetch_one(store.pool())
            .await
            .unwrap();
    eprintln!("stored run {run_id} ({kind}): {notes}");
    assert_eq!(kind, "serve");
    assert!(
        notes.starts_with("3 tokens generated; stopped by SIGTERM; "),
        "{notes}"
    );
    assert!(
        notes.contains("no-template.gguf has no tokenizer.chat_template: chat prompts used memwall's fallback ChatML template (<|im_start|>role\\ncontent<|im_end|>)"),
        "{notes}"
    );
    std::net::TcpListener::bind(a).expect("stopping frees the port");
}
