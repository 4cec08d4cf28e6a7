//! Slots, continuous batching, chunked prefill, strict-FIFO admission, prefix-cache
//! reuse and cancellation, on any [`Engine`].
//!
//! - **Slots.** `n_slots` sequences (ids `0..n_slots`) share one engine context; each
//!   holds at most one request. Each slot remembers the tokens whose KV entries its
//!   sequence holds ([`Slot`]), also after its request ended.
//! - **Continuous batching.** Every [`Scheduler::step`] is one forward pass over every
//!   active sequence: one token per decoding slot, then prompt tokens of slots still
//!   prefilling, up to [`SchedConfig::chunk`] tokens in all
//!   ([`PREFILL_CHUNK_TOKENS`] by default). A new request joins between two steps;
//!   a long prompt is prefilled over several steps, so running decodes keep going.
//!   A step in which no request decodes stalls nobody, so it takes up to
//!   [`SchedConfig::batch`] tokens ([`IDLE_PASS_TOKENS`], llama-server's `-b`): a burst
//!   reaching an idle server is prefilled in one pass and its requests stay in step.
//!   That pass runs as engine calls of `chunk` tokens, and a request whose prompt ends
//!   in one gets its first token when that call returns (llama-server returns all of
//!   them after the whole batch).
//! - **Admission.** Requests wait in a bounded queue ([`Admission`]); a full queue
//!   refuses at once ([`QueueFull`]); slots take requests in strict arrival order.
//! - **Prefix reuse.** A request goes to the free slot whose cache shares the longest
//!   prefix with its prompt; when another slot (busy or free) shares a longer one, that
//!   prefix is copied into the chosen slot's sequence ([`Engine::kv_copy`]), which is how a
//!   shared system prompt is prefilled once. At least the prompt's last token is always
//!   prefilled (its logits give the first token).
//! - **Cancellation.** A request whose event receiver is gone (the client
//!   disconnected) leaves its slot at the start of the next step: no forward pass
//!   runs for it after the one in flight.
//!
//! Sampling is greedy ([`argmax`]). The end-of-generation token ends a request and is
//! neither emitted nor counted in `completion_tokens`; a request with `ignore_eos`
//! (llama-server's extension, sent by load testers) never samples one: its greedy
//! token is the best that is not end-of-generation, as llama-server's −∞ logit bias on
//! those tokens gives.

use crate::measure::engine::{BatchItem, Engine, EngineError, TokenId, Utf8Stream, argmax};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// Tokens one step feeds at most (decode tokens of running requests first, then
/// prompt tokens of requests still prefilling): llama.cpp's default physical batch
/// (`n_ubatch` 512), so a step is one micro-batch.
pub const PREFILL_CHUNK_TOKENS: u32 = 512;

/// Tokens a step feeds at most when no request is decoding ([`SchedConfig::batch`]):
/// llama.cpp's default logical batch (`n_batch` 2048, llama-server's `-b`), fed as
/// engine calls of [`SchedConfig::chunk`] tokens (each request's first token comes
/// when the call that ends its prompt returns). Nothing waits on such a
/// step, and a burst of prompts that ends prefill in one pass decodes in step (at
/// concurrency 16 × 128-token prompts, four 512-token passes let the first four
/// requests run ahead and the closed loop drift apart).
pub const IDLE_PASS_TOKENS: u32 = 2048;

/// How long an idle scheduler waits for the next request of a burst before its first
/// pass ([`SchedConfig::burst_gap`]): requests sent together (clients in step, a
/// batch job) arrive within a fraction of a millisecond of each other on loopback,
/// and are then prefilled in one pass and decoded in step, as llama-server does. A
/// lone request on an idle server waits this long once.
pub const BURST_GAP: Duration = Duration::from_millis(2);

/// Settings of a [`Scheduler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedConfig {
    /// Slots (parallel sequences), ≥ 1.
    pub n_slots: usize,
    /// Context of one slot, tokens (prompt + generated must fit).
    pub n_ctx_slot: u32,
    /// Most tokens fed per step while any request decodes ([`PREFILL_CHUNK_TOKENS`]);
    /// must be ≥ `n_slots`.
    pub chunk: u32,
    /// Most tokens fed by a step in which no request decodes ([`IDLE_PASS_TOKENS`]);
    /// at least `chunk` (a smaller value counts as `chunk`).
    pub batch: u32,
    /// When a request reaches an idle scheduler, more that follow it within this gap
    /// of each other join its first pass ([`BURST_GAP`]; zero: start at once).
    pub burst_gap: Duration,
}

/// What the scheduler reports to one request, in order: `Started`, any number of
/// `Text`, then `Done` or `Failed`.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The request has a slot.
    Started {
        /// The slot (sequence id).
        slot: usize,
        /// 0-based order in which requests got slots (strict FIFO).
        start_seq: u64,
        /// Prompt tokens whose KV entries were reused, not prefilled.
        cached_tokens: u32,
    },
    /// New generated text: complete UTF-8 only (a token ending inside a character is
    /// held back until the character is complete).
    Text(String),
    /// The request ended (with its last text piece).
    Done(Finish),
    /// The engine failed while the request ran.
    Failed(String),
}

/// Why a request ended (OpenAI's `finish_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model emitted its end-of-generation token.
    Stop,
    /// `max_tokens` reached, or the slot's context is full.
    Length,
}

/// llama-server's per-request `timings` (milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Timings {
    /// Prompt tokens reused from the cache.
    pub cache_n: u32,
    /// Prompt tokens prefilled.
    pub prompt_n: u32,
    /// From the request's first prefill chunk to its first generated token, ms.
    pub prompt_ms: f64,
    /// `prompt_n ÷ prompt_ms × 1000`; `None` when either is 0.
    pub prompt_per_second: Option<f64>,
    /// Generated tokens (EOG excluded).
    pub predicted_n: u32,
    /// From the first generated token to the last, ms.
    pub predicted_ms: f64,
    /// `(predicted_n − 1) ÷ predicted_ms × 1000` (token gaps per second); `None`
    /// below 2 tokens.
    pub predicted_per_second: Option<f64>,
}

impl Timings {
    /// Builds the timings and their rates from counts and durations.
    pub fn new(
        cache_n: u32,
        prompt_n: u32,
        prompt: Duration,
        predicted_n: u32,
        predicted: Duration,
    ) -> Timings {
        let prompt_ms = prompt.as_secs_f64() * 1e3;
        let predicted_ms = predicted.as_secs_f64() * 1e3;
        Timings {
            cache_n,
            prompt_n,
            prompt_ms,
            prompt_per_second: (prompt_n > 0 && prompt_ms > 0.0)
                .then(|| prompt_n as f64 / prompt_ms * 1e3),
            predicted_n,
            predicted_ms,
            predicted_per_second: (predicted_n >= 2 && predicted_ms > 0.0)
                .then(|| (predicted_n - 1) as f64 / predicted_ms * 1e3),
        }
    }
}

/// The end of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    /// The last piece of text (the final token's, when `max_tokens` ended the
    /// request, plus any held-back bytes), sent with the end so the last content
    /// chunk carries `finish_reason`; often empty.
    pub text: String,
    /// Why it ended.
    pub reason: FinishReason,
    /// Prompt tokens (cached + prefilled).
    pub prompt_tokens: u32,
    /// Generated tokens (EOG excluded).
    pub completion_tokens: u32,
    pub timings: Timings,
}

/// A tokenized request as the scheduler sees it.
#[derive(Debug)]
pub struct GenRequest {
    /// Caller's id (for logs and tests).
    pub id: u64,
    /// Prompt tokens (≥ 1; BOS already placed).
    pub prompt: Vec<TokenId>,
    /// Most tokens to generate (≥ 1).
    pub max_tokens: u32,
    /// Never end at an end-of-generation token (llama-server's `ignore_eos`): the
    /// greedy choice is the best token that is not one.
    pub ignore_eos: bool,
    /// Where the request's events go; a closed receiver cancels the request.
    pub events: UnboundedSender<Event>,
}

/// The admission queue was full: the request is handed back.
#[derive(Debug)]
pub struct QueueFull(pub GenRequest);

/// The bounded strict-FIFO admission queue, shared by the HTTP handlers (which
/// [`Admission::submit`]) and the engine thread (which takes requests as slots free).
#[derive(Debug)]
pub struct Admission {
    state: Mutex<AdmState>,
    wake: Condvar,
    capacity: usize,
    /// Slots the scheduler has free (it sets this after every change): a request
    /// that a free slot will take at the next step does not count against the bound.
    free_slots: AtomicUsize,
}

#[derive(Debug, Default)]
struct AdmState {
    queue: VecDeque<GenRequest>,
    shutdown: bool,
}

impl Admission {
    /// A queue that holds at most `capacity` waiting requests.
    pub fn new(capacity: usize) -> Admission {
        Admission {
            state: Mutex::new(AdmState::default()),
            wake: Condvar::new(),
            capacity,
            free_slots: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, AdmState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `job`, or hands it back when `capacity` requests already wait
    /// beyond the slots that are free.
    ///
    /// # Errors
    /// [`QueueFull`].
    pub fn submit(&self, job: GenRequest) -> Result<(), QueueFull> {
        let mut st = self.lock();
        if st.queue.len() >= self.capacity + self.free_slots.load(Ordering::Relaxed) {
            return Err(QueueFull(job));
        }
        st.queue.push_back(job);
        drop(st);
        self.wake.notify_all();
        Ok(())
    }

    /// Requests waiting for a slot (llama-server's `requests_deferred`).
    pub fn waiting(&self) -> usize {
        self.lock().queue.len()
    }

    /// The queue's bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Asks the engine loop to stop; waiting requests are dropped (their clients see
    /// the stream end).
    pub fn shutdown(&self) {
        let mut st = self.lock();
        st.shutdown = true;
        st.queue.clear();
        drop(st);
        self.wake.notify_all();
    }

    /// Whether [`Admission::shutdown`] was called.
    pub fn is_shutdown(&self) -> bool {
        self.lock().shutdown
    }

    /// Takes the oldest waiting request whose client is still there (requests whose
    /// client left while queued are dropped here).
    fn pop(&self) -> Option<GenRequest> {
        let mut st = self.lock();
        while let Some(j) = st.queue.pop_front() {
            if !j.events.is_closed() {
                return Some(j);
            }
        }
        None
    }

    /// Blocks until a request arrives, shutdown, or `timeout` (at once when one waits).
    fn wait(&self, timeout: Duration) {
        let st = self.lock();
        if st.queue.is_empty() && !st.shutdown {
            let _ = self.wake.wait_timeout(st, timeout);
        }
    }
}

/// Live counters with llama-server's meanings (its `/metrics`), updated by the
/// engine thread and read by `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Prompt tokens prefilled (cached ones excluded).
    pub prompt_tokens_total: AtomicU64,
    /// Wall time of steps that prefilled, summed per request, µs.
    pub prompt_us_total: AtomicU64,
    /// Every token generated, counted as it is decoded: those of requests that were
    /// cancelled or failed included (the denominator of the server's energy per
    /// token). llama-server's counter of this name adds a request's tokens when it
    /// ends, leaving out cancelled ones.
    pub tokens_predicted_total: AtomicU64,
    /// Decode time, first to last token, summed per request (cancelled and failed
    /// ones included, as their tokens are), µs.
    pub tokens_predicted_us_total: AtomicU64,
    /// Forward passes.
    pub n_decode_total: AtomicU64,
    /// Busy slots summed over forward passes (÷ `n_decode_total` = busy slots per pass).
    pub n_busy_slots_total: AtomicU64,
    /// Requests holding a slot now.
    pub requests_processing: AtomicU64,
    /// Requests that ended because their client left.
    pub requests_cancelled_total: AtomicU64,
    /// Requests that ran to their end (a stop token or `max_tokens`).
    pub requests_served_total: AtomicU64,
}

/// One sequence of the context.
#[derive(Debug)]
pub struct Slot {
    /// Tokens whose KV entries the sequence holds, positions `0..cache.len()`.
    cache: Vec<TokenId>,
    active: Option<Active>,
    /// When a request last started here (1 + its start order; 0: never).
    used: u64,
}

/// A free slot takes a request for its own cached prefix only when that prefix is at
/// least this share of the prompt (llama-server's `--slot-prompt-similarity`, 0.5).
/// Otherwise the least recently used free slot takes it, so the other slots' cached
/// conversations survive (a BOS token in common is no reason to overwrite one), and a
/// longer prefix held anywhere is still copied in.
const SLOT_SIMILARITY: f64 = 0.5;

#[derive(Debug)]
struct Active {
    job: GenRequest,
    start_seq: u64,
    /// Next prompt index to prefill.
    prompt_next: usize,
    cached: u32,
    /// Sampled but not yet fed token.
    next: Option<TokenId>,
    n_gen: u32,
    utf8: Utf8Stream,
    t_prefill: Option<Instant>,
    t_first: Option<Instant>,
    t_last: Option<Instant>,
}

/// What a scheduler step did (for tests and metrics).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepReport {
    /// Decode tokens fed (one per decoding slot).
    pub n_decode: usize,
    /// Prompt tokens fed.
    pub n_prefill: usize,
}

/// The scheduler: slots over one engine.
pub struct Scheduler<E: Engine> {
    engine: E,
    cfg: SchedConfig,
    slots: Vec<Slot>,
    next_start: u64,
    /// Shared counters.
    pub metrics: std::sync::Arc<Metrics>,
}

fn common_prefix(a: &[TokenId], b: &[TokenId]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

impl<E: Engine> Scheduler<E> {
    /// A scheduler with empty slots on `engine`.
    pub fn new(engine: E, cfg: SchedConfig, metrics: std::sync::Arc<Metrics>) -> Scheduler<E> {
        let chunk = cfg.chunk.max(cfg.n_slots.max(1) as u32 + 1);
        let cfg = SchedConfig {
            n_slots: cfg.n_slots.max(1),
            chunk,
            // A pass never exceeds what the engine's context takes in one decode.
            batch: cfg.batch.min(engine.n_batch()).max(chunk),
            ..cfg
        };
        Scheduler {
            engine,
            cfg,
            slots: (0..cfg.n_slots)
                .map(|_| Slot {
                    cache: Vec::new(),
                    active: None,
                    used: 0,
                })
                .collect(),
            next_start: 0,
            metrics,
        }
    }

    /// The engine (for tests).
    pub fn engine(&self) -> &E {
        &self.engine
    }

    /// Slots holding a request.
    pub fn busy(&self) -> usize {
        self.slots.iter().filter(|s| s.active.is_some()).count()
    }

    /// Drops requests whose clients left; frees their slots (their KV entries stay
    /// for reuse).
    pub fn reap(&mut self) {
        for s in &mut self.slots {
            if s.active.as_ref().is_some_and(|a| a.job.events.is_closed()) {
                let a = s.active.take().expect("active");
                self.metrics
                    .requests_cancelled_total
                    .fetch_add(1, Ordering::Relaxed);
                Self::charge_decode(&self.metrics, &a);
                tracing::info!(
                    "request {} cancelled (its client left) after {} of {} tokens generated",
                    a.job.id,
                    a.n_gen,
                    a.job.max_tokens
                );
            }
        }
        self.publish();
    }

    /// Adds the decode time of `a` (first to last token) to the counters: its
    /// tokens were counted as they were decoded.
    fn charge_decode(m: &Metrics, a: &Active) {
        if let (Some(first), Some(last)) = (a.t_first, a.t_last) {
            m.tokens_predicted_us_total.fetch_add(
                micros(last.saturating_duration_since(first)),
                Ordering::Relaxed,
            );
        }
    }

    /// Ends `a` with the engine's error `msg` (its tokens so far stay counted).
    fn fail(m: &Metrics, a: Active, msg: String) {
        Self::charge_decode(m, &a);
        tracing::warn!(
            "request {} failed after {} tokens generated: {msg}",
            a.job.id,
            a.n_gen
        );
        let _ = a.job.events.send(Event::Failed(msg));
    }

    fn publish(&self) {
        self.metrics
            .requests_processing
            .store(self.busy() as u64, Ordering::Relaxed);
    }

    /// Moves waiting requests into free slots, oldest first; then tells `adm` how
    /// many slots are left free.
    pub fn admit(&mut self, adm: &Admission) {
        while self.slots.iter().any(|s| s.active.is_none()) {
            let Some(job) = adm.pop() else { break };
            self.start(job);
        }
        self.publish();
        adm.free_slots
            .store(self.slots.len() - self.busy(), Ordering::Relaxed);
    }

    fn start(&mut self, job: GenRequest) {
        let prompt = &job.prompt;
        // Reuse at most all but the last prompt token (its logits start generation).
        let limit = prompt.len().saturating_sub(1);
        let free: Vec<(usize, usize)> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.active.is_none())
            .map(|(i, s)| (i, common_prefix(&s.cache, prompt).min(limit)))
            .collect();
        let by_prefix = free
            .iter()
            .copied()
            .max_by_key(|&(i, l)| (l, std::cmp::Reverse(i)));
        let (slot, mut reuse) = match by_prefix {
            Some((i, l)) if l > 0 && l as f64 >= SLOT_SIMILARITY * prompt.len() as f64 => (i, l),
            _ => free
                .iter()
                .copied()
                .min_by_key(|&(i, _)| (self.slots[i].used, i))
                .expect("start is called only with a free slot"),
        };
        // A longer prefix in another slot (busy or free) is copied over.
        let donor = self
            .slots
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != slot)
            .map(|(i, s)| (i, common_prefix(&s.cache, prompt).min(limit)))
            .max_by_key(|&(i, l)| (l, std::cmp::Reverse(i)));
        let mut ok = true;
        if let Some((src, l)) = donor.filter(|&(_, l)| l > reuse) {
            match self.engine.kv_copy(src as i32, slot as i32, l as u32) {
                Ok(()) => {
                    let c = self.slots[src].cache[..l].to_vec();
                    self.slots[slot].cache = c;
                    reuse = l;
                }
                Err(EngineError::Unsupported(_)) => {}
                Err(_) => ok = false,
            }
        }
        if ok && self.engine.kv_truncate(slot as i32, reuse as u32).is_err() {
            ok = false;
        }
        if !ok {
            // Start cold: an empty sequence is always valid.
            reuse = 0;
            let _ = self.engine.kv_truncate(slot as i32, 0);
        }
        self.slots[slot].cache.truncate(reuse);
        let start_seq = self.next_start;
        self.next_start += 1;
        self.slots[slot].used = start_seq + 1;
        let _ = job.events.send(Event::Started {
            slot,
            start_seq,
            cached_tokens: reuse as u32,
        });
        self.slots[slot].active = Some(Active {
            job,
            start_seq,
            prompt_next: reuse,
            cached: reuse as u32,
            next: None,
            n_gen: 0,
            utf8: Utf8Stream::default(),
            t_prefill: None,
            t_first: None,
            t_last: None,
        });
    }

    /// Whether no slot holds a request.
    pub fn idle(&self) -> bool {
        self.busy() == 0
    }

    /// One forward pass over every active sequence (see the module docs); then
    /// samples, emits and ends requests. Engine errors end the requests of the
    /// failed pass with [`Event::Failed`] and clear their sequences.
    pub fn step(&mut self) -> StepReport {
        self.reap();
        let mut batch: Vec<BatchItem> = Vec::new();
        // (slot, is the item's logits row) for each item that keeps logits, in order.
        let mut outs: Vec<usize> = Vec::new();
        let mut in_pass: Vec<usize> = Vec::new();
        let mut rep = StepReport::default();
        for (i, s) in self.slots.iter_mut().enumerate() {
            let Some(a) = s.active.as_mut() else { continue };
            if let Some(t) = a.next.take() {
                batch.push(BatchItem {
                    token: t,
                    pos: s.cache.len() as u32,
                    seq: i as i32,
                    logits: true,
                });
                s.cache.push(t);
                outs.push(i);
                in_pass.push(i);
                rep.n_decode += 1;
            }
        }
        // The chunk bounds what running decodes wait for; with none running, a pass
        // may take the whole logical batch.
        let cap = if batch.is_empty() {
            self.cfg.batch.max(self.cfg.chunk)
        } else {
            self.cfg.chunk
        };
        let mut budget = (cap as usize).saturating_sub(batch.len());
        let mut prefilling: Vec<(u64, usize)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let a = s.active.as_ref()?;
                (a.next.is_none() && a.t_first.is_none() && a.prompt_next < a.job.prompt.len())
                    .then_some((a.start_seq, i))
            })
            .collect();
        prefilling.sort();
        let now = Instant::now();
        for (_, i) in prefilling {
            if budget == 0 {
                break;
            }
            let s = &mut self.slots[i];
            let a = s.active.as_mut().expect("active");
            let n = budget.min(a.job.prompt.len() - a.prompt_next);
            a.t_prefill.get_or_insert(now);
            for k in 0..n {
                let idx = a.prompt_next + k;
                let last = idx + 1 == a.job.prompt.len();
                batch.push(BatchItem {
                    token: a.job.prompt[idx],
                    pos: s.cache.len() as u32,
                    seq: i as i32,
                    logits: last,
                });
                s.cache.push(a.job.prompt[idx]);
                if last {
                    outs.push(i);
                }
            }
            a.prompt_next += n;
            budget -= n;
            rep.n_prefill += n;
            in_pass.push(i);
            self.metrics
                .prompt_tokens_total
                .fetch_add(n as u64, Ordering::Relaxed);
        }
        if batch.is_empty() {
            return rep;
        }
        // A pass with decodes is one engine call of at most `chunk` tokens. A pass
        // without runs as calls of `chunk` tokens each (the micro-batches llama.cpp
        // would run inside one call of the whole batch), and a request whose prompt
        // ends in one takes its first token as soon as that call returns, not when
        // the whole burst is prefilled; the burst's requests then decode in step.
        let part_len = if rep.n_decode == 0 {
            self.cfg.chunk as usize
        } else {
            batch.len()
        };
        let mut outs_left: &[usize] = &outs;
        for part in batch.chunks(part_len.max(1)) {
            let t0 = Instant::now();
            let res = self.engine.decode(part).map(|()| self.engine.synchronize());
            self.metrics.n_decode_total.fetch_add(1, Ordering::Relaxed);
            self.metrics
                .n_busy_slots_total
                .fetch_add(self.busy() as u64, Ordering::Relaxed);
            if let Err(e) = res {
                for &i in &in_pass {
                    let s = &mut self.slots[i];
                    if let Some(a) = s.active.take() {
                        Self::fail(&self.metrics, a, e.to_string());
                    }
                    s.cache.clear();
                    let _ = self.engine.kv_truncate(i as i32, 0);
                }
                self.publish();
                return rep;
            }
            if rep.n_prefill > 0 {
                // Prefill time is charged for every call of a pass that prefilled.
                self.metrics
                    .prompt_us_total
                    .fetch_add(micros(t0.elapsed()), Ordering::Relaxed);
            }
            let n_out = part.iter().filter(|it| it.logits).count();
            let (mine, rest) = outs_left.split_at(n_out.min(outs_left.len()));
            outs_left = rest;
            let now = Instant::now();
            for (k, &i) in mine.iter().enumerate() {
                let ignore_eos = self.slots[i]
                    .active
                    .as_ref()
                    .is_some_and(|a| a.job.ignore_eos);
                let engine = &self.engine;
                let tok = match engine.logits(k) {
                    Ok(l) => greedy(l, ignore_eos, |t| engine.is_eog(t)),
                    Err(e) => {
                        if let Some(a) = self.slots[i].active.take() {
                            Self::fail(&self.metrics, a, e.to_string());
                        }
                        continue;
                    }
                };
                self.accept(i, tok, now);
            }
        }
        self.publish();
        rep
    }

    fn accept(&mut self, i: usize, tok: TokenId, now: Instant) {
        let n_ctx_slot = self.cfg.n_ctx_slot as usize;
        let eog = self.engine.is_eog(tok);
        let bytes = (!eog).then(|| self.engine.token_bytes(tok));
        let s = &mut self.slots[i];
        let a = s.active.as_mut().expect("active");
        if a.t_first.is_none() {
            a.t_first = Some(now);
        }
        let reason = if eog {
            Some(FinishReason::Stop)
        } else {
            a.n_gen += 1;
            self.metrics
                .tokens_predicted_total
                .fetch_add(1, Ordering::Relaxed);
            a.t_last = Some(now);
            let text = a.utf8.push(bytes.as_deref().unwrap_or_default());
            if a.n_gen >= a.job.max_tokens || s.cache.len() >= n_ctx_slot {
                // The last token's text travels with the end (one final chunk).
                let a = s.active.take().expect("active");
                self.finish(a, FinishReason::Length, text);
                return;
            }
            if !text.is_empty() {
                let _ = a.job.events.send(Event::Text(text));
            }
            a.next = Some(tok);
            None
        };
        if let Some(reason) = reason {
            let a = s.active.take().expect("active");
            self.finish(a, reason, String::new());
        }
    }

    fn finish(&self, mut a: Active, reason: FinishReason, mut text: String) {
        text.push_str(&a.utf8.finish());
        let t_first = a.t_first.unwrap_or_else(Instant::now);
        let prompt = t_first.saturating_duration_since(a.t_prefill.unwrap_or(t_first));
        let predicted = a
            .t_last
            .map_or(Duration::ZERO, |l| l.saturating_duration_since(t_first));
        let m = &self.metrics;
        // Its tokens were counted as they were decoded.
        m.tokens_predicted_us_total
            .fetch_add(micros(predicted), Ordering::Relaxed);
        m.requests_served_total.fetch_add(1, Ordering::Relaxed);
        let prompt_tokens = a.job.prompt.len() as u32;
        tracing::debug!(
            "request {} done ({}): {prompt_tokens} prompt tokens ({} cached), {} generated",
            a.job.id,
            match reason {
                FinishReason::Stop => "stop",
                FinishReason::Length => "length",
            },
            a.cached,
            a.n_gen
        );
        let _ = a.job.events.send(Event::Done(Finish {
            text,
            reason,
            prompt_tokens,
            completion_tokens: a.n_gen,
            timings: Timings::new(
                a.cached,
                prompt_tokens - a.cached,
                prompt,
                a.n_gen,
                predicted,
            ),
        }));
    }

    /// After a request reached an idle scheduler: admits the requests that follow
    /// within [`SchedConfig::burst_gap`] of each other, until the slots are full, so a
    /// burst starts in one pass. A closed loop whose clients were in step stays in
    /// step (its requests end in the same pass and return together); started one by
    /// one, they would drift apart and every prompt would be prefilled in a pass of
    /// its own beside the others' decodes.
    fn gather(&mut self, adm: &Admission) {
        let gap = self.cfg.burst_gap;
        if gap.is_zero() {
            return;
        }
        let mut last = Instant::now();
        while self.busy() < self.slots.len() && !adm.is_shutdown() {
            let waited = last.elapsed();
            if waited >= gap {
                break;
            }
            let before = self.busy();
            adm.wait(gap - waited);
            self.admit(adm);
            if self.busy() > before {
                last = Instant::now();
            }
        }
    }

    /// Runs until [`Admission::shutdown`]: admit, step, and sleep on the queue while
    /// no slot is busy.
    pub fn run(&mut self, adm: &Admission) {
        while !adm.is_shutdown() {
            self.reap();
            let was_idle = self.idle();
            self.admit(adm);
            if self.idle() {
                adm.wait(Duration::from_millis(100));
                continue;
            }
            if was_idle {
                self.gather(adm);
            }
            self.step();
        }
        // Pending requests see their streams end; their tokens stay counted.
        for s in &mut self.slots {
            if let Some(a) = s.active.take() {
                Self::charge_decode(&self.metrics, &a);
                tracing::info!(
                    "request {} ended by the server's shutdown after {} tokens generated",
                    a.job.id,
                    a.n_gen
                );
            }
        }
        self.publish();
    }
}

/// The greedy token: the argmax, or with `ignore_eos` the best token that is not
/// end-of-generation (the vocabulary is scanned again only when the argmax is one).
fn greedy(logits: &[f32], ignore_eos: bool, is_eog: impl Fn(TokenId) -> bool) -> TokenId {
    let best = argmax(logits);
    if !ignore_eos || !is_eog(best) {
        return best;
    }
    let mut keep: Option<(usize, f32)> = None;
    for (t, &v) in logits.iter().enumerate() {
        if !is_eog(t as TokenId) && keep.is_none_or(|(_, b)| v > b) {
            keep = Some((t, v));
        }
    }
    // A vocabulary of end-of-generation tokens only: nothing else can be chosen.
    keep.map_or(best, |(t, _)| t as TokenId)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::engine::{EngineInfo, Vocab};
    use std::sync::Arc;
    use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

    const V: usize = 64;
    const EOG: TokenId = 0;

    type NextFn = Box<dyn Fn(&[TokenId]) -> TokenId + Send>;

    /// A fake engine whose KV cache is the token list of each sequence: a pass
    /// must append at exactly the next position, and the next token is a function
    /// of the sequence's whole history, so a wrong cache changes the output.
    struct Fake {
        kv: Vec<Vec<TokenId>>,
        next: NextFn,
        logits: Vec<Vec<f32>>,
        /// Per pass: (seq, items) in batch order.
        passes: Vec<Vec<(i32, usize)>>,
        copies: usize,
        /// The pass (0-based) whose decode fails, if any.
        fail_at: Option<usize>,
    }

    fn hash_next(h: &[TokenId]) -> TokenId {
        let mut x: u64 = 1469598103934665603;
        for &t in h {
            x = (x ^ t as u64).wrapping_mul(1099511628211);
        }
        (x % (V as u64 - 3)) as TokenId + 3
    }

    fn fake(n_seq: usize) -> Fake {
        Fake {
            kv: vec![Vec::new(); n_seq],
            next: Box::new(hash_next),
            logits: Vec::new(),
            passes: Vec::new(),
            copies: 0,
            fail_at: None,
        }
    }

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
            V
        }
        fn n_ctx(&self) -> u32 {
            4096
        }
        fn n_batch(&self) -> u32 {
            512
        }
        fn decode(&mut self, batch: &[BatchItem]) -> Result<(), EngineError> {
            if self.fail_at == Some(self.passes.len()) {
                return Err(EngineError::Decode("injected failure".into()));
            }
            if batch.len() > self.n_batch() as usize {
                return Err(EngineError::Decode(format!(
                    "batch of {} exceeds n_batch {}",
                    batch.len(),
                    self.n_batch()
                )));
            }
            self.logits.clear();
            let mut pass: Vec<(i32, usize)> = Vec::new();
            for it in batch {
                let kv = &mut self.kv[it.seq as usize];
                if it.pos as usize != kv.len() {
                    return Err(EngineError::Decode(format!(
                        "seq {} pos {} but cache holds {}",
                        it.seq,
                        it.pos,
                        kv.len()
                    )));
                }
                kv.push(it.token);
                if it.logits {
                    // The next token, and a runner-up 7 ids on (what
                    // `ignore_eos` takes when the next is end-of-generation).
                    let mut l = vec![0.0; V];
                    let t = (self.next)(kv) as usize;
                    l[t] = 1.0;
                    l[(t + 7) % V] = 0.5;
                    self.logits.push(l);
                }
                match pass.last_mut() {
                    Some((s, n)) if *s == it.seq => *n += 1,
                    _ => pass.push((it.seq, 1)),
                }
            }
            self.passes.push(pass);
            Ok(())
        }
        fn logits(&self, i: usize) -> Result<&[f32], EngineError> {
            self.logits
                .get(i)
                .map(|v| v.as_slice())
                .ok_or(EngineError::NoLogits {
                    index: i,
                    kept: self.logits.len(),
                })
        }
        fn kv_truncate(&mut self, seq: i32, from: u32) -> Result<(), EngineError> {
            self.kv[seq as usize].truncate(from as usize);
            Ok(())
        }
        fn kv_copy(&mut self, src: i32, dst: i32, n: u32) -> Result<(), EngineError> {
            self.copies += 1;
            self.kv[dst as usize] = self.kv[src as usize][..n as usize].to_vec();
            Ok(())
        }
        fn kv_clear(&mut self) {
            self.kv.iter_mut().for_each(Vec::clear);
        }
        fn synchronize(&mut self) {}
    }

    impl Vocab for Fake {
        fn tokenize(&self, _: &str, _: bool) -> Result<Vec<TokenId>, EngineError> {
            Ok(vec![])
        }
        fn token_bytes(&self, t: TokenId) -> Vec<u8> {
            match t {
                1 => vec![0xC3],
                2 => vec![0xA9],
                t => vec![b'a' + (t as u8 % 26)],
            }
        }
        fn is_eog(&self, t: TokenId) -> bool {
            t == EOG
        }
        fn bos(&self) -> Option<TokenId> {
            None
        }
    }

    fn sched(e: Fake, slots: usize, chunk: u32) -> Scheduler<Fake> {
        sched_with_batch(e, slots, chunk, chunk)
    }

    fn sched_with_batch(e: Fake, slots: usize, chunk: u32, batch: u32) -> Scheduler<Fake> {
        Scheduler::new(
            e,
            SchedConfig {
                n_slots: slots,
                n_ctx_slot: 1024,
                chunk,
                batch,
                burst_gap: Duration::ZERO,
            },
            Arc::new(Metrics::default()),
        )
    }

    fn job(
        id: u64,
        prompt: Vec<TokenId>,
        max_tokens: u32,
    ) -> (GenRequest, UnboundedReceiver<Event>) {
        let (tx, rx) = unbounded_channel();
        (
            GenRequest {
                id,
                prompt,
                max_tokens,
                ignore_eos: false,
                events: tx,
            },
            rx,
        )
    }

    /// Steps until every slot and the queue are empty (bounded).
    fn drain(s: &mut Scheduler<Fake>, adm: &Admission) {
        for _ in 0..100_000 {
            s.reap();
            s.admit(adm);
            if s.idle() && adm.waiting() == 0 {
                return;
            }
            s.step();
        }
        panic!("scheduler did not drain");
    }

    fn events(rx: &mut UnboundedReceiver<Event>) -> Vec<Event> {
        let mut v = Vec::new();
        while let Ok(e) = rx.try_recv() {
            v.push(e);
        }
        v
    }

    fn text_and_finish(evs: &[Event]) -> (String, Finish) {
        let mut t = String::new();
        let mut fin = None;
        for e in evs {
            match e {
                Event::Text(x) => t.push_str(x),
                Event::Done(f) => {
                    t.push_str(&f.text);
                    fin = Some(f.clone());
                }
                _ => {}
            }
        }
        (t, fin.expect("a Done event"))
    }

    /// The output of `prompt` alone on a fresh one-slot scheduler.
    fn alone(prompt: &[TokenId], max_tokens: u32) -> String {
        let mut s = sched(fake(1), 1, 512);
        let adm = Admission::new(4);
        let (j, mut rx) = job(0, prompt.to_vec(), max_tokens);
        adm.submit(j).unwrap();
        drain(&mut s, &adm);
        text_and_finish(&events(&mut rx)).0
    }

    #[test]
    fn fifty_requests_start_in_submission_order() {
        let mut s = sched(fake(3), 3, 512);
        let adm = Admission::new(64);
        let mut rxs = Vec::new();
        for id in 0..50u64 {
            // Different lengths, so requests end out of order.
            let (j, rx) = job(
                id,
                vec![5 + id as TokenId % 7; 1 + (id as usize * 7) % 13],
                1 + (id as u32 * 5) % 9,
            );
            adm.submit(j).unwrap();
            rxs.push(rx);
        }
        drain(&mut s, &adm);
        let mut started: Vec<(u64, u64)> = Vec::new();
        for (id, rx) in rxs.iter_mut().enumerate() {
            let evs = events(rx);
            let Some(Event::Started { start_seq, .. }) = evs.first() else {
                panic!("request {id} never started: {evs:?}");
            };
            started.push((*start_seq, id as u64));
            assert!(
                matches!(evs.last(), Some(Event::Done(_))),
                "request {id}: {evs:?}"
            );
        }
        started.sort();
        let order: Vec<u64> = started.iter().map(|&(_, id)| id).collect();
        assert_eq!(order, (0..50).collect::<Vec<_>>());
    }

    /// Runs `run` on a thread with `gap`, submits 3 requests `spacing` apart to the idle
    /// scheduler, and returns the sequences of its first pass.
    fn first_pass_of_a_burst(gap: Duration, spacing: Duration) -> Vec<i32> {
        let mut s = sched(fake(4), 4, 512);
        s.cfg.burst_gap = gap;
        let adm = Arc::new(Admission::new(8));
        let runner = {
            let adm = adm.clone();
            std::thread::spawn(move || {
                s.run(&adm);
                s
            })
        };
        let mut rxs = Vec::new();
        for id in 0..3u64 {
            if id > 0 {
                std::thread::sleep(spacing);
            }
            let (j, rx) = job(id, vec![3 + id as TokenId, 4, 5, 6], 4);
            adm.submit(j).unwrap();
            rxs.push(rx);
        }
        // Every request ends (Done), then the loop stops.
        for rx in &mut rxs {
            let t0 = Instant::now();
            while !events(rx).iter().any(|e| matches!(e, Event::Done(_))) {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "request did not finish"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        adm.shutdown();
        let s = runner.join().unwrap();
        let mut seqs: Vec<i32> = s.engine().passes[0].iter().map(|&(q, _)| q).collect();
        seqs.dedup();
        seqs
    }

    #[test]
    fn a_burst_reaching_an_idle_scheduler_is_prefilled_in_one_pass() {
        // Arrivals 5 ms apart, within a 200 ms gap: one first pass holds all three
        // prompts (4 tokens each).
        let seqs = first_pass_of_a_burst(Duration::from_millis(200), Duration::from_millis(5));
        assert_eq!(seqs.len(), 3, "first pass sequences {seqs:?}");
        // No gap: the first request starts alone (the next arrives 100 ms later,
        // after the fake's instant passes have finished it).
        let seqs = first_pass_of_a_burst(Duration::ZERO, Duration::from_millis(100));
        assert_eq!(seqs.len(), 1, "first pass sequences {seqs:?}");
    }

    #[test]
    fn a_full_queue_refuses_and_hands_the_request_back() {
        let adm = Admission::new(2);
        let keep: Vec<_> = (0..2)
            .map(|i| {
                let (j, rx) = job(i, vec![3], 1);
                adm.submit(j).unwrap();
                rx
            })
            .collect();
        let (j, _rx) = job(9, vec![3], 1);
        let QueueFull(back) = adm.submit(j).unwrap_err();
        assert_eq!(back.id, 9);
        assert_eq!(adm.waiting(), 2);
        drop(keep);
    }

    #[test]
    fn free_slots_take_requests_beyond_the_queue_bound() {
        // 3 free slots + a queue of 2: 5 requests are taken, the 6th is refused,
        // and the 5 all start as soon as slots free.
        let mut s = sched(fake(3), 3, 512);
        let adm = Admission::new(2);
        s.admit(&adm);
        let mut rxs = Vec::new();
        for i in 0..5 {
            let (j, rx) = job(i, vec![3 + i as TokenId], 2);
            adm.submit(j).unwrap();
            rxs.push(rx);
        }
        let (j, _rx) = job(5, vec![3], 2);
        assert!(adm.submit(j).is_err());
        drain(&mut s, &adm);
        for rx in &mut rxs {
            assert!(matches!(events(rx).last(), Some(Event::Done(_))));
        }
    }

    #[test]
    fn a_disconnected_client_frees_its_slot_within_one_step() {
        let mut s = sched(fake(1), 1, 512);
        let adm = Admission::new(4);
        let (j, rx) = job(0, vec![3, 4, 5], 1000);
        adm.submit(j).unwrap();
        s.admit(&adm);
        for _ in 0..5 {
            s.step();
        }
        assert_eq!(s.busy(), 1);
        let passes = s.engine().passes.len();
        // What the client received before it left: one character per token here.
        let mut rx = rx;
        let seen: usize = events(&mut rx)
            .iter()
            .map(|e| match e {
                Event::Text(t) => t.chars().count(),
                _ => 0,
            })
            .sum();
        assert_eq!(seen, 5, "a prefill step and 4 decode steps, one token each");
        drop(rx);
        let rep = s.step();
        assert_eq!(s.busy(), 0);
        assert_eq!(rep, StepReport::default());
        assert_eq!(
            s.engine().passes.len(),
            passes,
            "no pass ran for the cancelled request"
        );
        assert_eq!(
            s.metrics.requests_cancelled_total.load(Ordering::Relaxed),
            1
        );
        // Its tokens are counted, and so is their decode time.
        assert_eq!(
            s.metrics.tokens_predicted_total.load(Ordering::Relaxed),
            seen as u64
        );
        assert_eq!(s.metrics.requests_served_total.load(Ordering::Relaxed), 0);
        // A request queued behind it takes the slot at once.
        let (j, mut rx2) = job(1, vec![3, 4, 5], 2);
        adm.submit(j).unwrap();
        drain(&mut s, &adm);
        assert!(matches!(events(&mut rx2).last(), Some(Event::Done(_))));
    }

    #[test]
    fn a_failed_requests_tokens_stay_counted() {
        let mut e = fake(1);
        // Pass 0 prefills (first token), passes 1 and 2 decode, pass 3 fails.
        e.fail_at = Some(3);
        let mut s = sched(e, 1, 512);
        let adm = Admission::new(4);
        let (j, mut rx) = job(0, vec![3, 4, 5], 1000);
        adm.submit(j).unwrap();
        s.admit(&adm);
        for _ in 0..4 {
            s.step();
        }
        let evs = events(&mut rx);
        let seen: usize = evs
            .iter()
            .map(|e| match e {
                Event::Text(t) => t.chars().count(),
                _ => 0,
            })
            .sum();
        assert_eq!(seen, 3);
        assert!(matches!(evs.last(), Some(Event::Failed(m)) if m.contains("injected")));
        assert_eq!(s.busy(), 0);
        let m = &s.metrics;
        assert_eq!(m.tokens_predicted_total.load(Ordering::Relaxed), 3);
        assert_eq!(m.requests_served_total.load(Ordering::Relaxed), 0);
        assert_eq!(m.requests_cancelled_total.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_request_joins_a_running_decode_between_steps() {
        let mut s = sched(fake(2), 2, 512);
        let adm = Admission::new(4);
        let pa: Vec<TokenId> = vec![3, 4, 5, 6];
        let pb: Vec<TokenId> = vec![7, 8, 9];
        let (a, mut rxa) = job(0, pa.clone(), 20);
        adm.submit(a).unwrap();
        s.admit(&adm);
        for _ in 0..4 {
            s.step();
        }
        let (b, mut rxb) = job(1, pb.clone(), 20);
        adm.submit(b).unwrap();
        s.admit(&adm);
        s.step();
        // That pass decoded A's next token and prefilled all of B together.
        assert_eq!(s.engine().passes.last().unwrap(), &vec![(0, 1), (1, 3)]);
        s.step();
        assert_eq!(s.engine().passes.last().unwrap(), &vec![(0, 1), (1, 1)]);
        drain(&mut s, &adm);
        // Batching does not change a sequence's output.
        assert_eq!(text_and_finish(&events(&mut rxa)).0, alone(&pa, 20));
        assert_eq!(text_and_finish(&events(&mut rxb)).0, alone(&pb, 20));
    }

    #[test]
    fn a_long_prompt_is_prefilled_in_chunks_while_decodes_go_on() {
        let chunk = 8u32;
        let mut s = sched(fake(2), 2, chunk);
        let adm = Admission::new(4);
        let (a, _rxa) = job(0, vec![3, 4], 50);
        adm.submit(a).unwrap();
        s.admit(&adm);
        s.step();
        // Shares no prefix with A (else the shared part would be copied, not prefilled).
        let long: Vec<TokenId> = (0..30).map(|i| 10 + i % 50).collect();
        let (b, mut rxb) = job(1, long.clone(), 3);
        adm.submit(b).unwrap();
        s.admit(&adm);
        let before = s.engine().passes.len();
        let mut prefilled = 0;
        while prefilled < long.len() {
            let rep = s.step();
            assert_eq!(rep.n_decode, 1, "A decodes in every step");
            assert!(rep.n_decode + rep.n_prefill <= chunk as usize);
            prefilled += rep.n_prefill;
        }
        // 30 prompt tokens, 7 per step next to A's decode token: 5 steps.
        assert_eq!(s.engine().passes.len() - before, 5);
        drain(&mut s, &adm);
        let (t, f) = text_and_finish(&events(&mut rxb));
        assert_eq!(t, alone(&long, 3));
        assert_eq!(f.prompt_tokens, 30);
        assert_eq!(f.reason, FinishReason::Length);
    }

    #[test]
    fn a_pass_without_decodes_takes_the_logical_batch_and_a_pass_with_decodes_the_chunk() {
        // Four 6-token prompts (no shared prefix) reach an idle scheduler together.
        let prompts: Vec<Vec<TokenId>> = (0..4)
            .map(|j| (0..6).map(|i| 3 + j * 10 + i).collect())
            .collect();
        let burst = |batch: u32| {
            let mut s = sched_with_batch(fake(5), 5, 8, batch);
            let adm = Admission::new(8);
            let mut rxs = Vec::new();
            for (id, p) in prompts.iter().enumerate() {
                let (j, rx) = job(id as u64, p.clone(), 40);
                adm.submit(j).unwrap();
                rxs.push(rx);
            }
            s.admit(&adm);
            let first = s.step();
            (s, adm, rxs, first)
        };
        // batch 32: all 24 prompt tokens in the first pass, run as three engine calls
        // of chunk (8) tokens; every request has its first token after the pass, and
        // the next pass decodes all four in one call.
        let (mut s, adm, mut rxs, first) = burst(32);
        assert_eq!((first.n_decode, first.n_prefill), (0, 24));
        assert_eq!(
            s.engine().passes,
            vec![
                vec![(0, 6), (1, 2)],
                vec![(1, 4), (2, 4)],
                vec![(2, 2), (3, 6)]
            ]
        );
        // Request 0's first token was sampled right after the first call: every call
        // replaces the fake's logits, so a row read later would not be its own.
        // Each request's text equals its run alone.
        let second = s.step();
        assert_eq!((second.n_decode, second.n_prefill), (4, 0));
        assert_eq!(s.engine().passes.len(), 4);
        // A prompt arriving while they decode is fed at most chunk − 4 = 4 per pass.
        let long: Vec<TokenId> = (0..10).map(|i| 50 + i).collect();
        let (e, mut rxe) = job(9, long.clone(), 2);
        adm.submit(e).unwrap();
        s.admit(&adm);
        let third = s.step();
        assert_eq!((third.n_decode, third.n_prefill), (4, 4));
        drain(&mut s, &adm);
        let (t, _) = text_and_finish(&events(&mut rxe));
        assert_eq!(t, alone(&long, 2));
        for (p, rx) in prompts.iter().zip(rxs.iter_mut()) {
            assert_eq!(text_and_finish(&events(rx)).0, alone(p, 40));
        }
        // batch = chunk (8): the old behaviour, the burst takes 3 passes.
        let (mut s, _adm, _rxs, first) = burst(8);
        assert_eq!((first.n_decode, first.n_prefill), (0, 8));
        let second = s.step();
        assert_eq!((second.n_decode, second.n_prefill), (1, 7));
        // The logical batch never exceeds the engine's n_batch (the fake's is 512).
        let s = sched_with_batch(fake(2), 2, 8, 4096);
        assert_eq!(s.cfg.batch, 512);
    }

    #[test]
    fn an_unrelated_prompt_takes_the_least_recently_used_slot_and_spares_a_cached_one() {
        // Both prompts start with the same BOS-like token 1 and share nothing else.
        let a: Vec<TokenId> = [1].into_iter().chain((0..20).map(|i| 3 + i)).collect();
        let b: Vec<TokenId> = [1].into_iter().chain((0..20).map(|i| 40 + i)).collect();
        let mut s = sched(fake(3), 3, 512);
        let adm = Admission::new(8);
        let run = |s: &mut Scheduler<_>, id, p: &Vec<TokenId>| {
            let (j, mut rx) = job(id, p.clone(), 2);
            adm.submit(j).unwrap();
            drain(s, &adm);
            let evs = events(&mut rx);
            let Event::Started {
                slot,
                cached_tokens,
                ..
            } = evs[0]
            else {
                panic!("{evs:?}")
            };
            (slot, cached_tokens)
        };
        assert_eq!(run(&mut s, 0, &a), (0, 0));
        // One token in common (1 of 21 < 0.5): B goes to a slot never used, not over A.
        assert_eq!(
            run(&mut s, 1, &b),
            (1, 1),
            "B starts in slot 1, the BOS copied in"
        );
        // A again: its own slot still holds it (all but the last token reused).
        assert_eq!(run(&mut s, 2, &a), (0, 20));
        assert_eq!(run(&mut s, 3, &b), (1, 20));
    }

    #[test]
    fn a_shared_prefix_is_reused_from_the_own_slot_and_copied_to_another() {
        let sys: Vec<TokenId> = (0..40).map(|i| 3 + i % 50).collect();
        let p = |u: TokenId| {
            let mut v = sys.clone();
            v.extend([u, u + 1]);
            v
        };
        let mut s = sched(fake(2), 2, 512);
        let adm = Admission::new(8);
        // 1: cold.
        let (j, mut rx) = job(0, p(10), 4);
        adm.submit(j).unwrap();
        drain(&mut s, &adm);
        let (_, f) = text_and_finish(&events(&mut rx));
        assert_eq!(f.timings.cache_n, 0);
        // 2: the same slot's history shares the system prompt.
        let (j, mut rx) = job(1, p(20), 4);
        adm.submit(j).unwrap();
        drain(&mut s, &adm);
        let (t, f) = text_and_finish(&events(&mut rx));
        assert_eq!(f.timings.cache_n, 40);
        assert_eq!(f.timings.prompt_n, 2);
        assert_eq!(t, alone(&p(20), 4));
        // 3: while slot 0 is busy with a long request, a new one gets slot 1 and the
        // prefix is copied over from slot 0.
        let (long, _rl) = job(2, p(30), 500);
        adm.submit(long).unwrap();
        s.admit(&adm);
        s.step();
        s.step();
        let (j, mut rx) = job(3, p(40), 4);
        adm.submit(j).unwrap();
        s.admit(&adm);
        for _ in 0..10 {
            s.step();
        }
        let evs = events(&mut rx);
        assert!(
            matches!(
                evs[0],
                Event::Started {
                    slot: 1,
                    cached_tokens: 40,
                    ..
                }
            ),
            "{evs:?}"
        );
        assert!(s.engine().copies >= 1);
        let (t, f) = text_and_finish(&evs);
        assert_eq!(f.timings.cache_n, 40);
        assert_eq!(t, alone(&p(40), 4));
    }

    #[test]
    fn a_split_character_is_held_back_never_replaced() {
        // Token 1 = 0xC3, token 2 = 0xA9: "é" over two tokens; then EOG.
        let mut e = fake(1);
        e.next = Box::new(|h: &[TokenId]| match h.len() {
            2 => 5,
            3 => 1,
            4 => 2,
            5 => 6,
            _ => EOG,
        });
        let mut s = sched(e, 1, 512);
        let adm = Admission::new(2);
        let (j, mut rx) = job(0, vec![3, 4], 50);
        adm.submit(j).unwrap();
        drain(&mut s, &adm);
        let evs = events(&mut rx);
        let texts: Vec<&str> = evs
            .iter()
            .filter_map(|e| {
                if let Event::Text(t) = e {
                    Some(t.as_str())
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(texts, ["f", "\u{e9}", "g"]);
        let (t, f) = text_and_finish(&evs);
        assert_eq!(t, "f\u{e9}g");
        assert!(!t.contains('\u{FFFD}'));
        assert_eq!(f.reason, FinishReason::Stop);
        assert_eq!(f.completion_tokens, 4);
    }

    #[test]
    fn ignore_eos_runs_to_max_tokens_on_the_best_token_that_is_not_end_of_generation() {
        let run = |ignore_eos: bool| {
            let mut e = fake(1);
            // Every step's argmax is EOG; the runner-up is token 7 ('h').
            e.next = Box::new(|_: &[TokenId]| EOG);
            let mut s = sched(e, 1, 512);
            let adm = Admission::new(2);
            let (tx, mut rx) = unbounded_channel();
            let j = GenRequest {
                id: 0,
                prompt: vec![3, 4],
                max_tokens: 5,
                ignore_eos,
                events: tx,
            };
            adm.submit(j).unwrap();
            drain(&mut s, &adm);
            text_and_finish(&events(&mut rx))
        };
        let (t, f) = run(false);
        assert_eq!(
            (t.as_str(), f.reason, f.completion_tokens),
            ("", FinishReason::Stop, 0)
        );
        let (t, f) = run(true);
        assert_eq!(
            (t.as_str(), f.reason, f.completion_tokens),
            ("hhhhh", FinishReason::Length, 5)
        );
        // Directly: the argmax when it is not end-of-generation or ignore_eos is off.
        assert_eq!(greedy(&[0.9, 0.1, 0.5], true, |t| t == 0), 2);
        assert_eq!(greedy(&[0.9, 0.1, 0.5], false, |t| t == 0), 0);
        assert_eq!(greedy(&[0.1, 0.9, 0.5], true, |t| t == 0), 1);
        assert_eq!(greedy(&[0.9], true, |t| t == 0), 0);
    }

    #[test]
    fn timings_follow_their_definitions() {
        // 6 tokens in 30 ms → 200 tok/s; 11 tokens, 10 gaps in 250 ms → 40 tok/s.
        let t = Timings::new(
            2,
            6,
            Duration::from_millis(30),
            11,
            Duration::from_millis(250),
        );
        assert!((t.prompt_per_second.unwrap() - 200.0).abs() < 1e-9);
        assert!((t.predicted_per_second.unwrap() - 40.0).abs() < 1e-9);
        let t = Timings::new(0, 0, Duration::ZERO, 1, Duration::ZERO);
        assert_eq!((t.prompt_per_second, t.predicted_per_second), (None, None));
    }
}
