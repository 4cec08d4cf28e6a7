//! A streaming chat turn on any [`Engine`]: applies the model's own chat template
//! (from the GGUF), prefills the prompt, decodes greedily token by token and reports
//! live figures after every token:
//!
//! - **TTFT** (time to first token, ms): from the start of the prompt's prefill to the
//!   first generated token being chosen (prefill + the first argmax), tokenization
//!   excluded, as llama.cpp's server reports `prompt_ms`.
//! - **prefill tok/s** = prompt tokens ÷ prefill seconds.
//! - **decode tok/s** = tokens decoded after the first ÷ seconds since the first token
//!   (each decode step is a forward pass of one token: ITL's reciprocal).
//! - **% of ceiling** = decode tok/s ÷ the roofline ceiling for this model at this
//!   context ([`chat_ceiling_tps`]); `None` (shown `—`) when no bandwidth is stored.
//!
//! Cancellation is checked before every forward pass, so a stop request ends the
//! turn within one token. The desktop app's Chat page calls [`chat_job`] once per
//! turn and keeps the [`ChatSession`] it returns (the loaded model) for the next;
//! tests drive [`generate`] with a scripted fake engine.

pub use crate::measure::engine::ChatMessage;
use crate::measure::engine::{Engine, EngineError, TokenId, Utf8Stream, Vocab, argmax};
use crate::probe::model::{CacheType, ModelFacts};
use crate::roofline;
use crate::units::Gbps;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Context of a chat session, tokens: the whole conversation must fit in it, and no
/// turn generates more.
pub const CHAT_N_CTX: u32 = 4096;

/// Largest message a turn accepts, bytes.
pub const MAX_MESSAGE_BYTES: usize = 100_000;

/// Errors of a chat turn.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChatError {
    /// No messages, or one longer than [`MAX_MESSAGE_BYTES`].
    #[error("chat needs 1+ messages of at most 100 kB")]
    Request,
    /// The model file failed the GGUF checks.
    #[error(transparent)]
    Model(#[from] crate::probe::gguf::GgufError),
    /// The engine failed (loading, templating, a forward pass).
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl crate::experiments::SliceError for ChatError {}

/// Checks a turn's messages: at least one, none over [`MAX_MESSAGE_BYTES`].
///
/// # Errors
/// [`ChatError::Request`].
pub fn check_messages(messages: &[ChatMessage]) -> Result<(), ChatError> {
    if messages.is_empty() || messages.iter().any(|m| m.content.len() > MAX_MESSAGE_BYTES) {
        return Err(ChatError::Request);
    }
    Ok(())
}

/// Settings of one turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatConfig {
    /// Most tokens to generate (≥ 1).
    pub max_tokens: u32,
    /// Least time between two [`ChatEvent::Token`] events: the text of the tokens
    /// decoded in between travels in one event (the first token and the end of the
    /// turn are sent at once). Zero sends every token. A window that repaints for
    /// every token takes CPU from the decode it shows (the app sends
    /// [`CHAT_EMIT_EVERY`]).
    #[serde(skip, default)]
    pub emit_every: Duration,
}

/// The app's [`ChatConfig::emit_every`]: 20 updates a second at most, so the window
/// repaints far less often than a small model decodes.
pub const CHAT_EMIT_EVERY: Duration = Duration::from_millis(50);

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model emitted an end-of-generation token.
    EndOfGeneration,
    /// `max_tokens` reached.
    MaxTokens,
    /// The user pressed stop.
    Cancelled,
    ContextFull,
}

/// Live figures of a turn. Every rate is `None` until it has a denominator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, ts_rs::TS)]
pub struct ChatStats {
    /// Prompt tokens after templating.
    pub prompt_tokens: u32,
    /// Tokens generated so far.
    pub n_gen: u32,
    /// Time to first token, ms.
    pub ttft_ms: Option<f64>,
    /// Prompt tokens per second of prefill.
    pub prefill_tps: Option<f64>,
    /// Decode tokens per second after the first token.
    pub decode_tps: Option<f64>,
    /// The decode ceiling, tok/s.
    pub ceiling_tps: Option<f64>,
    /// decode_tps ÷ ceiling_tps × 100.
    pub pct_of_ceiling: Option<f64>,
    /// The measuring guard's warnings for the turn (battery, swapping, thermal),
    /// set on the final stats the caller returns; empty while streaming.
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl ChatStats {
    /// Computes the figures from raw timings: `prefill` (the forward pass over the
    /// prompt), `ttft` (prefill + choosing the first token), `since_first` (time from
    /// the first token to the latest), and `n_gen` tokens generated.
    pub fn from_times(
        prompt_tokens: u32,
        prefill: Duration,
        ttft: Option<Duration>,
        since_first: Duration,
        n_gen: u32,
        ceiling_tps: Option<f64>,
    ) -> ChatStats {
        let secs = |d: Duration| d.as_secs_f64();
        let prefill_tps = (secs(prefill) > 0.0 && prompt_tokens > 0)
            .then(|| prompt_tokens as f64 / secs(prefill));
        let decode_tps =
            (n_gen >= 2 && secs(since_first) > 0.0).then(|| (n_gen - 1) as f64 / secs(since_first));
        let pct_of_ceiling = match (decode_tps, ceiling_tps) {
            (Some(d), Some(c)) if c > 0.0 && c.is_finite() => Some(d / c * 100.0),
            _ => None,
        };
        ChatStats {
            prompt_tokens,
            n_gen,
            ttft_ms: ttft.map(|t| secs(t) * 1e3),
            prefill_tps,
            decode_tps,
            ceiling_tps,
            pct_of_ceiling,
            warnings: Vec::new(),
        }
    }
}

/// What a turn reports while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ChatEvent {
    /// The prompt was templated and tokenized.
    Started { prompt_tokens: u32 },
    /// New text (complete UTF-8 only) and the figures so far.
    Token {
        /// The text to append.
        text: String,
        /// Figures after this token.
        stats: ChatStats,
    },
    /// The turn ended.
    Done {
        /// Why generation stopped.
        reason: StopReason,
        /// Final figures.
        stats: ChatStats,
    },
}

/// The decode ceiling for chatting with `facts` at `context` tokens of KV cache:
/// `bandwidth ÷ (weights streamed + KV read at that depth)` ([`roofline`]).
/// `None` when the bandwidth is unknown (never measured).
pub fn chat_ceiling_tps(facts: &ModelFacts, bandwidth: Option<Gbps>, context: u64) -> Option<f64> {
    let bw = bandwidth.filter(|b| b.0.is_finite() && b.0 > 0.0)?;
    let bytes = roofline::bytes_per_step(facts, context, 1, CacheType::F16);
    Some(roofline::decode_ceiling_tps(bw, bytes))
}

/// The tokens a chat turn feeds the model for `messages`: the one prompt path every
/// command takes ([`crate::measure::prompt::ChatFormat::chat`]: the GGUF's own template, exactly one BOS,
/// special tokens parsed in the template's text only), so a chat turn runs the prompt
/// `memwall serve`, `memwall spec` and the task evaluations run for the same messages.
///
/// # Errors
/// Template or tokenizer errors.
pub fn prompt_tokens<V: Vocab + ?Sized>(
    v: &V,
    messages: &[ChatMessage],
) -> Result<Vec<TokenId>, EngineError> {
    Ok(v.chat_format()?.chat(v, messages)?.tokens)
}

/// Runs one chat turn: template → tokenize → prefill → greedy decode, calling
/// `on_event` with a [`ChatEvent::Token`] after the first token and then at most
/// every [`ChatConfig::emit_every`] (every token when zero), the last one before
/// [`ChatEvent::Done`]. The KV cache is cleared
/// first (the whole conversation is re-prefilled each turn). `ceiling(prompt_tokens)`
/// gives the decode ceiling (tok/s) at the turn's context, `None` when unknown.
///
/// # Errors
/// [`EngineError`] from templating, tokenizing or a forward pass (a full context
/// ends the turn with [`StopReason::ContextFull`] instead).
pub fn generate<E: Engine + ?Sized>(
    engine: &mut E,
    messages: &[ChatMessage],
    cfg: &ChatConfig,
    ceiling: &dyn Fn(u32) -> Option<f64>,
    cancel: &AtomicBool,
    mut on_event: impl FnMut(ChatEvent),
) -> Result<ChatStats, EngineError> {
    let tokens = prompt_tokens(&*engine, messages)?;
    if tokens.is_empty() {
        return Err(EngineError::Tokenize(
            "the templated prompt is empty".into(),
        ));
    }
    let n_ctx = engine.n_ctx() as usize;
    if tokens.len() >= n_ctx {
        return Err(EngineError::Tokenize(format!(
            "the conversation is {} tokens but the context holds {n_ctx}: start a new chat",
            tokens.len()
        )));
    }
    let prompt_tokens = tokens.len() as u32;
    let ceiling_tps = ceiling(prompt_tokens);
    on_event(ChatEvent::Started { prompt_tokens });
    engine.kv_clear();
    let mut utf8 = Utf8Stream::default();
    let done = |reason, stats: ChatStats, on_event: &mut dyn FnMut(ChatEvent)| {
        on_event(ChatEvent::Done {
            reason,
            stats: stats.clone(),
        });
        Ok(stats)
    };
    if cancel.load(Ordering::Relaxed) {
        let s = ChatStats::from_times(
            prompt_tokens,
            Duration::ZERO,
            None,
            Duration::ZERO,
            0,
            ceiling_tps,
        );
        return done(StopReason::Cancelled, s, &mut on_event);
    }
    let t0 = Instant::now();
    engine.prefill(&tokens, 0, 0, true)?;
    engine.synchronize();
    let prefill = t0.elapsed();
    let mut next: TokenId = argmax(engine.logits(0)?);
    let ttft = t0.elapsed();
    let t_first = Instant::now();
    let mut pos = tokens.len() as u32;
    let mut n_gen = 0u32;
    let mut stats = ChatStats::from_times(
        prompt_tokens,
        prefill,
        Some(ttft),
        Duration::ZERO,
        0,
        ceiling_tps,
    );
    // Text decoded since the last Token event, and when that event was sent.
    let mut pending = String::new();
    let mut last_emit: Option<Instant> = None;
    // Sends what is pending (with `tail`, the UTF-8 stream's remainder at the end).
    let flush = |pending: &mut String, stats: &ChatStats, on_event: &mut dyn FnMut(ChatEvent)| {
        if !pending.is_empty() {
            on_event(ChatEvent::Token {
                text: std::mem::take(pending),
                stats: stats.clone(),
            });
        }
    };
    loop {
        if engine.is_eog(next) {
            pending.push_str(&utf8.finish());
            flush(&mut pending, &stats, &mut on_event);
            return done(StopReason::EndOfGeneration, stats, &mut on_event);
        }
        n_gen += 1;
        stats = ChatStats::from_times(
            prompt_tokens,
            prefill,
            Some(ttft),
            t_first.elapsed(),
            n_gen,
            ceiling_tps,
        );
        pending.push_str(&utf8.push(&engine.token_bytes(next)));
        if !pending.is_empty() && last_emit.is_none_or(|t| t.elapsed() >= cfg.emit_every) {
            flush(&mut pending, &stats, &mut on_event);
            last_emit = Some(Instant::now());
        }
        let stop = if n_gen >= cfg.max_tokens.max(1) {
            Some(StopReason::MaxTokens)
        } else if cancel.load(Ordering::Relaxed) {
            Some(StopReason::Cancelled)
        } else if pos as usize + 1 >= n_ctx {
            Some(StopReason::ContextFull)
        } else {
            None
        };
        if let Some(reason) = stop {
            flush(&mut pending, &stats, &mut on_event);
            return done(reason, stats, &mut on_event);
        }
        engine.decode_one(next, pos, 0)?;
        engine.synchronize();
        pos += 1;
        next = argmax(engine.logits(0)?);
    }
}

#[cfg(feature = "llama")]
pub use session::{ChatSession, ChatTurn, chat_job};

#[cfg(feature = "llama")]
mod session {
    use super::*;
    use crate::experiments::{JobError, blocking};
    use crate::measure::engine::{BoxedEngine, EngineConfig, EngineKind};
    use crate::measure::guard::Guard;
    use crate::store::Store;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    /// A model loaded for chatting (CPU, [`CHAT_N_CTX`] tokens of context), kept by
    /// its caller between turns: loading takes seconds, a turn re-prefills the whole
    /// conversation anyway.
    pub struct ChatSession {
        path: PathBuf,
        facts: ModelFacts,
        engine: BoxedEngine,
    }

    impl ChatSession {
        /// Loads the model at `path`, whose `facts` the caller read first (for the
        /// memory check). Blocks for the load.
        ///
        /// # Errors
        /// [`ChatError::Engine`] when llama.cpp refuses the file or the context.
        pub fn load(path: &Path, facts: ModelFacts) -> Result<ChatSession, ChatError> {
            let cfg = EngineConfig {
                n_ctx: CHAT_N_CTX,
                n_batch: 512,
                n_gpu_layers: 0,
                ..EngineConfig::default()
            };
            let engine = crate::measure::engine::open(EngineKind::Llama, path, &cfg)?;
            Ok(ChatSession {
                path: path.to_path_buf(),
                facts,
                engine,
            })
        }

        /// The model file this session holds.
        pub fn path(&self) -> &Path {
            &self.path
        }

        /// One turn on this session ([`generate`]); the ceiling uses `bandwidth`
        /// (`None`: never measured, so no % of ceiling).
        ///
        /// # Errors
        /// [`ChatError::Engine`].
        pub fn turn(
            &mut self,
            messages: &[ChatMessage],
            cfg: &ChatConfig,
            bandwidth: Option<Gbps>,
            cancel: &AtomicBool,
            on_event: impl FnMut(ChatEvent),
        ) -> Result<ChatStats, ChatError> {
            let facts = &self.facts;
            let ceiling = |ctx: u32| chat_ceiling_tps(facts, bandwidth, ctx as u64);
            Ok(generate(
                &mut self.engine,
                messages,
                cfg,
                &ceiling,
                cancel,
                on_event,
            )?)
        }
    }

    /// A session to reuse, or a model to load (its facts already read).
    enum Ready {
        Kept(ChatSession),
        Load(PathBuf, ModelFacts),
    }

    /// What one chat turn leaves behind ([`chat_job`]).
    pub struct ChatTurn {
        /// The loaded model to keep for the next turn (`None` when none is loaded,
        /// also after a failed load).
        pub session: Option<ChatSession>,
        /// The turn's stats, or why it failed.
        pub result: Result<ChatStats, JobError>,
    }

    /// One chat turn as the app runs it: checks the messages, reads this host's
    /// latest stored STREAM triad for the ceiling, reuses `kept` when it holds
    /// `model` (else loads `model` after the guard's memory check), runs the turn on
    /// a blocking thread and returns the guard's warnings in the final stats
    /// (battery power refused, swapping and thermal state compared after the turn).
    /// `max_tokens` is clamped to 1..=[`CHAT_N_CTX`].
    ///
    /// Returns the session to keep for the next turn (also after a failed turn, when
    /// the model is still loaded) with the turn's result.
    #[allow(clippy::too_many_arguments)]
    pub async fn chat_job(
        store: &Store,
        hostname: &str,
        kept: Option<ChatSession>,
        model: &Path,
        messages: Vec<ChatMessage>,
        cfg: ChatConfig,
        cancel: Arc<AtomicBool>,
        on_event: impl FnMut(ChatEvent) + Send + 'static,
    ) -> ChatTurn {
        if let Err(e) = check_messages(&messages) {
            return ChatTurn {
                session: kept,
                result: Err(e.into()),
            };
        }
        let bandwidth = match store.latest_triad(hostname, None).await {
            Ok(s) => s.map(|s| Gbps(s.best_gbps)),
            Err(e) => {
                return ChatTurn {
                    session: kept,
                    result: Err(e.into()),
                };
            }
        };
        // Another model's session is dropped before this one loads.
        let kept = kept.filter(|s| s.path == model);
        let mut guard = match Guard::begin(Default::default()) {
            Ok(g) => g,
            Err(e) => {
                return ChatTurn {
                    session: kept,
                    result: Err(e.into()),
                };
            }
        };
        let ready = match kept {
            Some(s) => Ready::Kept(s),
            None => {
                let facts = match ModelFacts::open(model) {
                    Ok(f) => f,
                    Err(e) => {
                        return ChatTurn {
                            session: None,
                            result: Err(ChatError::from(e).into()),
                        };
                    }
                };
                if let Err(e) = guard.check_fit(&[(&facts, CHAT_N_CTX as u64)], CacheType::F16) {
                    return ChatTurn {
                        session: None,
                        result: Err(e.into()),
                    };
                }
                Ready::Load(model.to_path_buf(), facts)
            }
        };
        let cfg = ChatConfig {
            max_tokens: cfg.max_tokens.clamp(1, CHAT_N_CTX),
            emit_every: cfg.emit_every,
        };
        let ran = blocking(move || {
            let mut session = match ready {
                Ready::Kept(s) => s,
                Ready::Load(path, facts) => match ChatSession::load(&path, facts) {
                    Ok(s) => s,
                    Err(e) => return (None, Err(e)),
                },
            };
            let out = session.turn(&messages, &cfg, bandwidth, &cancel, on_event);
            (Some(session), out)
        })
        .await;
        match ran {
            Ok((session, Ok(mut stats))) => {
                stats.warnings = guard.finish().warnings;
                ChatTurn {
                    session,
                    result: Ok(stats),
                }
            }
            Ok((session, Err(e))) => ChatTurn {
                session,
                result: Err(e.into()),
            },
            Err(e) => ChatTurn {
                session: None,
                result: Err(e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::engine::{BatchItem, EngineInfo, Vocab};

    /// A scripted engine: after a forward pass whose last item is at position p, the
    /// argmax is `script[p + 1 - prompt_len]` (or EOG past the end). Token t's bytes
    /// are `pieces[t]`.
    struct Fake {
        prompt_len: usize,
        script: Vec<TokenId>,
        pieces: Vec<Vec<u8>>,
        logits: Vec<f32>,
        passes: usize,
        n_ctx: u32,
    }
    const EOG: TokenId = 0;

    impl Engine for Fake {
        fn info(&self) -> EngineInfo {
            EngineInfo {
                name: "fake".into(),
                build: "0".into(),
                backends: "none".into(),
                system_info: String::new(),
            }
        }
        fn n_vocab(&self) -> usize {
            self.pieces.len()
        }
        fn n_ctx(&self) -> u32 {
            self.n_ctx
        }
        fn n_batch(&self) -> u32 {
            512
        }
        fn decode(&mut self, batch: &[BatchItem]) -> Result<(), EngineError> {
            self.passes += 1;
            let last = batch.last().unwrap().pos as usize;
            let k = last + 1 - self.prompt_len;
            let tok = self.script.get(k).copied().unwrap_or(EOG);
            self.logits = vec![0.0; self.pieces.len()];
            self.logits[tok as usize] = 1.0;
            Ok(())
        }
        fn logits(&self, _i: usize) -> Result<&[f32], EngineError> {
            Ok(&self.logits)
        }
        fn kv_truncate(&mut self, _: i32, _: u32) -> Result<(), EngineError> {
            Ok(())
        }
        fn kv_clear(&mut self) {}
        fn synchronize(&mut self) {}
    }

    impl Vocab for Fake {
        fn tokenize(&self, text: &str, _: bool) -> Result<Vec<TokenId>, EngineError> {
            Ok(text.bytes().map(|_| 1).collect())
        }
        fn token_bytes(&self, t: TokenId) -> Vec<u8> {
            self.pieces[t as usize].clone()
        }
        fn is_eog(&self, t: TokenId) -> bool {
            t == EOG
        }
        fn bos(&self) -> Option<TokenId> {
            None
        }
        fn tokenize_plain(&self, text: &str) -> Result<Vec<TokenId>, EngineError> {
            Ok(text.bytes().map(|_| 1).collect())
        }
        fn prompt_vocab(&self) -> Result<crate::measure::prompt::PromptVocab, EngineError> {
            Ok(crate::measure::prompt::PromptVocab {
                template: Some("<u>{{ messages[0].content }}</u><a>".into()),
                ..Default::default()
            })
        }
    }

    fn fake(script: Vec<TokenId>) -> Fake {
        // "é" split over two tokens (0xC3, 0xA9) to exercise the UTF-8 buffer.
        let pieces = vec![
            b"".to_vec(),
            b"Hel".to_vec(),
            b"lo".to_vec(),
            vec![0xC3],
            vec![0xA9],
            b"!".to_vec(),
        ];
        let prompt_len = "<u>hi</u><a>".len();
        Fake {
            prompt_len,
            script,
            pieces,
            logits: vec![],
            passes: 0,
            n_ctx: 64,
        }
    }

    fn user(s: &str) -> Vec<ChatMessage> {
        vec![ChatMessage {
            role: "user".into(),
            content: s.into(),
        }]
    }

    fn cfg(max: u32) -> ChatConfig {
        ChatConfig {
            max_tokens: max,
            emit_every: Duration::ZERO,
        }
    }

    #[test]
    fn streams_the_script_and_stops_at_end_of_generation() {
        let mut e = fake(vec![1, 2, 3, 4, 5]);
        let mut text = String::new();
        let mut last = None;
        let s = generate(
            &mut e,
            &user("hi"),
            &cfg(50),
            &|_| Some(100.0),
            &AtomicBool::new(false),
            |ev| match ev {
                ChatEvent::Token { text: t, .. } => text.push_str(&t),
                ChatEvent::Done { reason, .. } => last = Some(reason),
                ChatEvent::Started { prompt_tokens } => assert_eq!(prompt_tokens, 12),
            },
        )
        .unwrap();
        assert_eq!(text, "Hello\u{e9}!");
        assert_eq!(last, Some(StopReason::EndOfGeneration));
        assert_eq!(s.n_gen, 5);
        assert_eq!(s.prompt_tokens, 12);
        assert!(s.ttft_ms.is_some());
        assert_eq!(s.ceiling_tps, Some(100.0));
        // one prefill + one decode per generated token (the last decode yields EOG)
        assert_eq!(e.passes, 1 + 5);
    }

    #[test]
    fn coalesced_events_carry_the_same_text_in_two_events() {
        // Every token alone (emit_every 0), then with a window longer than the turn:
        // the first token at once, the rest in one event before Done, the same bytes.
        let run = |every: Duration| {
            let mut e = fake(vec![1, 2, 3, 4, 5]);
            let mut tokens: Vec<(String, u32)> = vec![];
            let mut done = None;
            generate(
                &mut e,
                &user("hi"),
                &ChatConfig {
                    max_tokens: 50,
                    emit_every: every,
                },
                &|_| None,
                &AtomicBool::new(false),
                |ev| match ev {
                    ChatEvent::Token { text, stats } => tokens.push((text, stats.n_gen)),
                    ChatEvent::Done { stats, .. } => done = Some(stats.n_gen),
                    ChatEvent::Started { .. } => {}
                },
            )
            .unwrap();
            (tokens, done, e.passes)
        };
        let (each, done_each, passes_each) = run(Duration::ZERO);
        let (two, done_two, passes_two) = run(Duration::from_secs(3600));
        let text = |v: &[(String, u32)]| v.iter().map(|(t, _)| t.as_str()).collect::<String>();
        assert_eq!(text(&each), "Hello\u{e9}!");
        assert_eq!(text(&two), text(&each));
        assert!(each.len() >= 3, "per-token events: {each:?}");
        assert_eq!(two.len(), 2, "coalesced events: {two:?}");
        assert_eq!(two[0], each[0], "the first token is sent at once");
        // the last event carries the final figures
        assert_eq!(two[1].1, done_two.unwrap());
        assert_eq!(done_two, done_each);
        assert_eq!(passes_two, passes_each);
    }

    #[test]
    fn max_tokens_caps_the_turn() {
        let mut e = fake(vec![1, 2, 5, 5, 5, 5]);
        let s = generate(
            &mut e,
            &user("hi"),
            &cfg(3),
            &|_| None,
            &AtomicBool::new(false),
            |_| {},
        )
        .unwrap();
        assert_eq!(s.n_gen, 3);
        assert_eq!(e.passes, 1 + 2);
    }

    #[test]
    fn stop_ends_the_turn_within_one_token() {
        let mut e = fake(vec![5; 40]);
        let cancel = AtomicBool::new(false);
        let mut tokens_after_stop = 0;
        let mut stopped = false;
        let mut reason = None;
        generate(
            &mut e,
            &user("hi"),
            &cfg(40),
            &|_| None,
            &cancel,
            |ev| match ev {
                ChatEvent::Token { stats, .. } => {
                    if stopped {
                        tokens_after_stop += 1;
                    }
                    if stats.n_gen == 3 {
                        cancel.store(true, Ordering::Relaxed);
                        stopped = true;
                    }
                }
                ChatEvent::Done { reason: r, .. } => reason = Some(r),
                _ => {}
            },
        )
        .unwrap();
        assert_eq!(tokens_after_stop, 0);
        assert_eq!(reason, Some(StopReason::Cancelled));
        // no forward pass after the stop request
        assert_eq!(e.passes, 1 + 2);
    }

    #[test]
    fn a_full_context_ends_the_turn() {
        let mut e = fake(vec![5; 100]);
        e.n_ctx = 16; // prompt 12 → positions 12..15 left
        let mut reason = None;
        generate(
            &mut e,
            &user("hi"),
            &cfg(100),
            &|_| None,
            &AtomicBool::new(false),
            |ev| {
                if let ChatEvent::Done { reason: r, .. } = ev {
                    reason = Some(r)
                }
            },
        )
        .unwrap();
        assert_eq!(reason, Some(StopReason::ContextFull));
    }

    #[test]
    fn too_long_a_prompt_is_a_clear_error() {
        let mut e = fake(vec![]);
        e.n_ctx = 8;
        let err = generate(
            &mut e,
            &user("hi"),
            &cfg(4),
            &|_| None,
            &AtomicBool::new(false),
            |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("12 tokens but the context holds 8"), "{err}");
    }

    #[test]
    fn figures_follow_their_definitions() {
        // 100 prompt tokens in 0.5 s → 200 tok/s; TTFT 0.52 s; 11 tokens, 10 decode
        // steps in 0.25 s → 40 tok/s; ceiling 80 → 50 %.
        let s = ChatStats::from_times(
            100,
            Duration::from_millis(500),
            Some(Duration::from_millis(520)),
            Duration::from_millis(250),
            11,
            Some(80.0),
        );
        assert!((s.prefill_tps.unwrap() - 200.0).abs() < 1e-9);
        assert!((s.ttft_ms.unwrap() - 520.0).abs() < 1e-9);
        assert!((s.decode_tps.unwrap() - 40.0).abs() < 1e-9);
        assert!((s.pct_of_ceiling.unwrap() - 50.0).abs() < 1e-9);
        // one token: no decode rate yet; no ceiling: no percentage
        let s = ChatStats::from_times(5, Duration::from_millis(1), None, Duration::ZERO, 1, None);
        assert_eq!(s.decode_tps, None);
        assert_eq!(s.pct_of_ceiling, None);
        assert_eq!(s.ttft_ms, None);
    }
}
