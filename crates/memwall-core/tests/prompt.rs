//! One prompt path: the same chat messages give the same token ids
//! through the app's chat, `memwall spec`, the task evaluations and `memwall serve`,
//! on every catalogue model present (absent ones skip loudly); `/v1/completions`
//! gives one BOS to a prompt that starts with the BOS's text; a GGUF without a chat
//! template gets the documented fallback and says so.
//!
//! The reference each path is checked against is llama.cpp's own tokenizer on the
//! rendered text (`tokenize(text, parse_special = true)` with one BOS), not the
//! prompt module's splitting; the template's output is checked against llama.cpp's
//! built-in matcher where that matcher knows the format (ChatML).
#![cfg(feature = "llama")]

use memwall_core::experiments::chat::{self, ChatConfig, ChatEvent};
use memwall_core::experiments::serve::job::{ServeOptions, start};
use memwall_core::experiments::speculative::prompts::{Category, Format, Prompt, PromptSet};
use memwall_core::measure::engine::llama::LlamaModelHandle;
use memwall_core::measure::engine::{ChatMessage, EngineConfig, TokenId, Vocab};
use memwall_core::measure::evals::tasks::{self, ItemBody, TaskConfig, TaskItem, TaskKind};
use memwall_core::measure::prompt::{TemplateSource, one_bos};
use memwall_testkit as testing;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MODELS: [&str; 4] = [
    "qwen2.5-coder-0.5b-q4_k_m",
    "qwen2.5-coder-1.5b-q4_k_m",
    "smollm2-135m-q4_1",
    "gemma-3-270m-q4_k_m",
];

fn msg(role: &str, content: &str) -> ChatMessage {
    ChatMessage {
        role: role.into(),
        content: content.into(),
    }
}

/// An MMLU-style item: its prompt is `tasks::user_message`'s wording.
fn item() -> TaskItem {
    TaskItem {
        id: "prompt-test/0".into(),
        body: ItemBody::Choice {
            topic: Some("astronomy".into()),
            question: "Which planet is closest to the Sun?".into(),
            labels: vec!["A".into(), "B".into(), "C".into(), "D".into()],
            choices: vec![
                "Venus".into(),
                "Mercury".into(),
                "Earth".into(),
                "Mars".into(),
            ],
            answer: "B".into(),
        },
    }
}

/// The message lists every path is given (`json-10` of the frozen set, a
/// conversation with a system message and non-ASCII text, the task item's).
fn conversations() -> Vec<(String, Vec<ChatMessage>)> {
    let set = PromptSet::builtin().unwrap();
    let json10 = set
        .prompts
        .iter()
        .find(|p| p.id == "json-10")
        .and_then(|p| p.messages.clone())
        .expect("json-10 is a chat prompt of the frozen set");
    vec![
        ("json-10".into(), json10),
        (
            "conversation".into(),
            vec![
                msg("system", "You are terse."),
                msg("user", "2+2?"),
                msg("assistant", "4"),
                msg("user", "And 3+3? é ✓"),
            ],
        ),
        (
            "mmlu item".into(),
            vec![msg("user", &tasks::user_message(&item()))],
        ),
    ]
}

/// llama.cpp's own reading of `text` (special-token text parsed), one BOS in front.
fn reference(h: &LlamaModelHandle, text: &str) -> Vec<TokenId> {
    one_bos(h.tokenize(text, false).unwrap(), h.bos())
}

async fn call(addr: SocketAddr, path: &str, body: &str) -> (u16, serde_json::Value) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a header block");
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );
    (
        head[9..12].parse().unwrap(),
        serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
    )
}

async fn ready(path: &std::path::Path) -> memwall_core::experiments::serve::job::ServeHandle {
    let mut o = ServeOptions::new(path.to_path_buf());
    o.port = 0;
    o.parallel = 1;
    o.queue = 1;
    o.ctx_size = 1024;
    o.threads = 2;
    o.sampler = false;
    let h = start(o, |_| {}).await.unwrap();
    let t0 = Instant::now();
    while h.state().loaded.get().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(180),
            "model never loaded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    h
}

fn prompt_tokens(v: &serde_json::Value) -> usize {
    v["usage"]["prompt_tokens"]
        .as_u64()
        .unwrap_or_else(|| panic!("no usage in {v}")) as usize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_messages_give_the_same_tokens_through_every_command() {
    let present: Vec<(&str, std::path::PathBuf)> = MODELS
        .iter()
        .filter_map(|m| testing::model(m).map(|p| (*m, p)))
        .collect();
    if present.is_empty() {
        return;
    }
    let _lock = testing::engine_lock();
    let mut table = vec![
        "| model | messages | old path (llama.cpp matcher + tokenize(add_bos)) | chat | spec | evals | serve | /v1/chat/completions | /v1/completions (rendered text) |".to_string(),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|".to_string(),
    ];
    for (name, path) in &present {
        let h = LlamaModelHandle::load(path, 0).unwrap();
        let mut e = h
            .engine(&EngineConfig {
                n_ctx: 1024,
                n_batch: 512,
                n_threads: 2,
                n_threads_batch: 2,
                ..EngineConfig::default()
            })
            .unwrap();
        let server = ready(path).await;
        let loaded = server.state().loaded.get().unwrap().clone();
        let fmt = h.chat_format().unwrap();
        // gemma-3-270m (the base model) carries no template: it gets the fallback.
        let fallback = fmt.source() == TemplateSource::Fallback;
        println!("{name}: chat format {}", fmt.source().tag());
        for (label, messages) in conversations() {
            // Serve: the loaded server's own format and tokenizer (what its handler calls).
            let served = loaded.format.chat(&*loaded.tokenizer, &messages).unwrap();
            let text = served.text.clone();
            let want = reference(&h, &text);
            assert_eq!(served.tokens, want, "{name} {label}: serve");
            // The app's chat: the tokens `generate` feeds, and the count it reports.
            let ids_chat = chat::prompt_tokens(&e, &messages).unwrap();
            assert_eq!(ids_chat, want, "{name} {label}: chat");
            let mut started = None;
            chat::generate(
                &mut e,
                &messages,
                &ChatConfig {
                    max_tokens: 1,
                    emit_every: Duration::ZERO,
                },
                &|_| None,
                &AtomicBool::new(false),
                |ev| {
                    if let ChatEvent::Started { prompt_tokens } = ev {
                        started = Some(prompt_tokens as usize);
                    }
                },
            )
            .unwrap();
            assert_eq!(started, Some(want.len()), "{name} {label}: chat turn");
            // spec: a chat prompt of a prompt set.
            let p = Prompt {
                id: label.clone(),
                category: Category::Prose,
                format: Format::Chat,
                text: None,
                messages: Some(messages.clone()),
            };
            assert_eq!(p.tokens(&e).unwrap(), want, "{name} {label}: spec");
            assert_eq!(p.render(&e).unwrap(), text, "{name} {label}: spec text");
            // Evaluations: a one-item task run, for the item's own message.
            let n_evals = if label == "mmlu item" {
                let r = tasks::run_task(
                    &mut e,
                    TaskKind::Mmlu,
                    &[item()],
                    &TaskConfig {
                        n_items: 1,
                        seed: 0,
                        max_new_tokens: 1,
                        sandbox: Default::default(),
                    },
                    &AtomicBool::new(false),
                    &mut |_, _| {},
                )
                .unwrap();
                assert_eq!(r.items[0].prompt, text, "{name} {label}: evals text");
                assert_eq!(
                    r.items[0].n_prompt_tokens as usize,
                    want.len(),
                    "{name} {label}: evals"
                );
                r.items[0].n_prompt_tokens.to_string()
            } else {
                "—".into()
            };
            // Over HTTP: the count the server reports for the chat request, and for
            // the rendered text sent as a raw prompt.
            let body = serde_json::json!({"messages": messages, "max_tokens": 1}).to_string();
            let (st, v) = call(server.addr, "/v1/chat/completions", &body).await;
            assert_eq!(st, 200, "{v}");
            assert_eq!(prompt_tokens(&v), want.len(), "{name} {label}: HTTP chat");
            let body = serde_json::json!({"prompt": text, "max_tokens": 1}).to_string();
            let (st, v) = call(server.addr, "/v1/completions", &body).await;
            assert_eq!(st, 200, "{v}");
            assert_eq!(
                prompt_tokens(&v),
                want.len(),
                "{name} {label}: HTTP completions"
            );
            // The path every command took before, for the table only.
            let old = match memwall_core::measure::prompt::ChatTemplate::source_of(path).unwrap() {
                Some(src) => h
                    .apply_builtin_template(&src, &messages)
                    .and_then(|t| h.tokenize(&t, true))
                    .map_or_else(|e| format!("— ({e})"), |t| t.len().to_string()),
                None => "— (no template)".into(),
            };
            table.push(format!(
                "| {name} | {label} | {old} | {} | {} | {n_evals} | {} | {} | {} |",
                want.len(),
                want.len(),
                served.tokens.len(),
                want.len(),
                want.len()
            ));
        }
        // A user who writes the model's end-of-turn text gets those characters, not
        // the end of their turn: the template's own end tokens are all there is.
        if fallback {
            server.stop().await.unwrap();
            continue;
        }
        let eot = fmt_end_text(&h);
        let plain = loaded
            .format
            .chat(&*loaded.tokenizer, &[msg("user", "Quote: done")])
            .unwrap();
        let quoted = loaded
            .format
            .chat(
                &*loaded.tokenizer,
                &[msg("user", &format!("Quote: {eot} done"))],
            )
            .unwrap();
        let id = h.tokenize(&eot, false).unwrap();
        assert_eq!(id.len(), 1, "{name}: {eot} is one special token");
        let count = |t: &[TokenId]| t.iter().filter(|&&x| x == id[0]).count();
        assert_eq!(count(&quoted.tokens), count(&plain.tokens), "{name}");
        assert!(quoted.tokens.len() > plain.tokens.len() + 1, "{name}");
        assert_eq!(
            chat::prompt_tokens(&e, &[msg("user", &format!("Quote: {eot} done"))]).unwrap(),
            quoted.tokens,
            "{name}: chat"
        );
        println!(
            "{name}: user text {eot:?}: {} tokens, the template's {eot} {} times (as without it)",
            quoted.tokens.len(),
            count(&quoted.tokens)
        );
        server.stop().await.unwrap();
    }
    println!("\n{}\n", table.join("\n"));
}

/// The text of the token that ends a turn in the model's template (`<|im_end|>`,
/// `<end_of_turn>`): the first special token the template writes after a message.
fn fmt_end_text(h: &LlamaModelHandle) -> String {
    let f = h.chat_format().unwrap();
    let t = f.chat(h, &[msg("user", "QQQ")]).unwrap().text;
    let after = &t[t.find("QQQ").unwrap() + 3..];
    let start = after.find('<').unwrap();
    let end = start + after[start..].find('>').unwrap() + 1;
    after[start..end].to_string()
}

/// A GGUF without a chat template (a tiny synthetic model: SentencePiece vocabulary,
/// BOS `<s>` added): chat gets the fallback ChatML with one BOS and the warning;
/// `/v1/completions` gives a prompt that starts with `<s>` one BOS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_template_gets_the_fallback_and_a_literal_bos_gets_one_bos() {
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
    let h = LlamaModelHandle::load(&model, 0).unwrap();
    let bos = h.bos().expect("a SentencePiece vocabulary adds BOS");
    let f = h.chat_format().unwrap();
    assert_eq!(f.source(), TemplateSource::Fallback);
    let note = f.fallback_note(&model.display().to_string()).unwrap();
    assert!(
        note.ends_with("no-template.gguf has no tokenizer.chat_template: chat prompts used memwall's fallback ChatML template (<|im_start|>role\\ncontent<|im_end|>)"),
        "{note}"
    );
    let conv = [msg("system", "S"), msg("user", "hi")];
    let p = f.chat(&h, &conv).unwrap();
    // The fallback writes what llama.cpp's built-in `chatml` writes.
    assert_eq!(p.text, h.apply_builtin_template("chatml", &conv).unwrap());
    assert_eq!(p.tokens, reference(&h, &p.text));
    assert_eq!(p.tokens[0], bos);
    assert_eq!(p.tokens.iter().filter(|&&t| t == bos).count(), 1);
    // spec's runs store the same warning in their notes when the set has chat
    // prompts (pair::template_note), and none for a set of raw prompts only.
    {
        use memwall_core::experiments::speculative::pair::template_note;
        let e = h
            .engine(&EngineConfig {
                n_ctx: 256,
                n_batch: 64,
                n_threads: 2,
                n_threads_batch: 2,
                ..EngineConfig::default()
            })
            .unwrap();
        let set = PromptSet::builtin().unwrap();
        assert!(set.prompts.iter().any(|p| p.format == Format::Chat));
        assert_eq!(template_note(&e, &model, &set).unwrap(), Some(note.clone()));
        let raw = PromptSet {
            prompts: set
                .prompts
                .iter()
                .filter(|p| p.format == Format::Raw)
                .cloned()
                .collect(),
            ..set.clone()
        };
        assert!(!raw.prompts.is_empty());
        assert_eq!(template_note(&e, &model, &raw).unwrap(), None);
    }
    // The same through the server, and its warning.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut o = ServeOptions::new(model.clone());
    o.port = 0;
    o.parallel = 1;
    o.queue = 1;
    o.ctx_size = 512;
    o.threads = 2;
    o.sampler = false;
    let server = start(o, move |s| {
        let _ = tx.send(s);
    })
    .await
    .unwrap();
    let t0 = Instant::now();
    while server.state().loaded.get().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "model never loaded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut warned = Vec::new();
    while let Ok(s) = rx.try_recv() {
        warned.push(format!("{s:?}"));
    }
    assert!(
        warned
            .iter()
            .any(|w| w.contains("has no tokenizer.chat_template")),
        "{warned:?}"
    );
    let body =
        serde_json::json!({"messages": conv, "max_tokens": 1, "ignore_eos": true}).to_string();
    let (st, v) = call(server.addr, "/v1/chat/completions", &body).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(prompt_tokens(&v), p.tokens.len());
    assert!(
        v["system_fingerprint"]
            .as_str()
            .unwrap()
            .ends_with("-fallback-chatml"),
        "{v}"
    );
    // /v1/completions: "<s>" written at the start is the BOS, not a second one.
    let plain = h.tokenize("Hello", true).unwrap();
    assert_eq!(plain[0], bos);
    for prompt in ["Hello", "<s>Hello", "<s><s>Hello"] {
        let body =
            serde_json::json!({"prompt": prompt, "max_tokens": 1, "ignore_eos": true}).to_string();
        let (st, v) = call(server.addr, "/v1/completions", &body).await;
        assert_eq!(st, 200, "{v}");
        println!(
            "/v1/completions {prompt:?}: {} prompt tokens (llama.cpp's tokenize(\"Hello\", add_bos): {})",
            prompt_tokens(&v),
            plain.len()
        );
        assert_eq!(prompt_tokens(&v), plain.len(), "{prompt:?}");
    }
    server.stop().await.unwrap();
}
