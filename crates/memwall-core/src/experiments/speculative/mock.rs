//! A deterministic toy engine for testing the loop without models.
//!
//! Its logits at a position are a pseudo-random function of the *whole* cached
//! prefix (a rolling hash of every token at positions `0..=pos`), so any stale or
//! missing KV entry changes every later row, as it would in a real transformer.
//! Writing to an occupied position without truncating first is an error, so a
//! rollback bug fails loudly instead of silently.
//!
//! A "draft" variant adds prefix-dependent noise of a chosen scale to the target's
//! logits: 0 gives a draft identical to the target (all accepted), large values
//! an unrelated one.

use crate::measure::engine::{BatchItem, Engine, EngineError, EngineInfo, TokenId, Vocab, argmax};

fn mix(mut z: u64) -> u64 {
    // splitmix64 finalizer.
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn unit(h: u64) -> f32 {
    (mix(h) >> 40) as f32 / (1u64 << 24) as f32 // [0, 1)
}

/// The toy engine.
pub struct Mock {
    /// Logit width.
    pub n_vocab: usize,
    /// Ids `>= n_real` get logit −12 (like untrained padding rows); `n_real <= n_vocab`.
    pub n_real: usize,
    /// Scale of the target logits.
    pub scale: f32,
    /// Draft noise scale (0 = the target itself).
    pub noise: f32,
    /// End-of-generation token.
    pub eog: Option<TokenId>,
    /// In passes that keep ≥ 2 logit rows, each row's runner-up is raised to lead
    /// its argmax by this many logits: a near-tie flipped by a batched kernel's
    /// summation order (`None`: every pass exact).
    pub batched_flip: Option<f32>,
    /// Batch size.
    pub n_batch: u32,
    /// What [`Engine::shape_change_is_costly`] answers (llama.cpp on CUDA: true).
    pub costly_shape_change: bool,
    hashes: Vec<u64>,
    out: Vec<Vec<f32>>,
    /// Forward passes run.
    pub passes: u64,
}

impl Mock {
    /// A target-like toy with `n_vocab` logits.
    pub fn new(n_vocab: usize, scale: f32) -> Mock {
        Mock {
            n_vocab,
            n_real: n_vocab,
            scale,
            noise: 0.0,
            eog: None,
            batched_flip: None,
            n_batch: 64,
            costly_shape_change: false,
            hashes: Vec::new(),
            out: Vec::new(),
            passes: 0,
        }
    }

    /// Test hook: adds 100 to logit 0 of the first kept row of the last pass.
    pub fn bump_first_row(&mut self) {
        if let Some(r) = self.out.first_mut() {
            r[0] += 100.0;
        }
    }

    /// The logits this toy gives after `prefix` (independent of any cache).
    pub fn logits_after(&self, prefix: &[TokenId]) -> Vec<f32> {
        let mut h = 0u64;
        for &t in prefix {
            h = mix(h ^ (t as u64).wrapping_mul(0x100_0000_01B3));
        }
        self.row(h)
    }

    fn row(&self, h: u64) -> Vec<f32> {
        (0..self.n_vocab)
            .map(|v| {
                if v >= self.n_real {
                    return -12.0;
                }
                let base = unit(h ^ (v as u64).wrapping_mul(0xA076_1D64_78BD_642F)) * self.scale;
                let noise =
                    (unit(!h ^ (v as u64).wrapping_mul(0xE703_7ED1_A0B4_28DB)) - 0.5) * self.noise;
                base + noise
            })
            .collect()
    }
}

impl Engine for Mock {
    fn shape_change_is_costly(&self) -> bool {
        self.costly_shape_change
    }
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "mock".into(),
            build: "test".into(),
            backends: "none".into(),
            system_info: String::new(),
        }
    }
    fn n_vocab(&self) -> usize {
        self.n_vocab
    }
    fn n_ctx(&self) -> u32 {
        1 << 16
    }
    fn n_batch(&self) -> u32 {
        self.n_batch
    }
    fn decode(&mut self, batch: &[BatchItem]) -> Result<(), EngineError> {
        if batch.len() > self.n_batch as usize {
            return Err(EngineError::Decode("batch too large".into()));
        }
        self.out.clear();
        self.passes += 1;
        for it in batch {
            let pos = it.pos as usize;
            if pos != self.hashes.len() {
                return Err(EngineError::Decode(format!(
                    "position {pos} written with {} cached (occupied or gap: a rollback bug)",
                    self.hashes.len()
                )));
            }
            let prev = self.hashes.last().copied().unwrap_or(0);
            let h = mix(prev ^ (it.token as u64).wrapping_mul(0x100_0000_01B3));
            self.hashes.push(h);
            if it.logits {
                self.out.push(self.row(h));
            }
        }
        if let Some(lead) = self.batched_flip.filter(|_| self.out.len() >= 2) {
            for r in &mut self.out {
                let top = argmax(r) as usize;
                let second = (0..r.len())
                    .filter(|&v| v != top)
                    .max_by(|&a, &b| r[a].total_cmp(&r[b]))
                    .expect("≥ 2 logits");
                r[second] = r[top] + lead;
            }
        }
        Ok(())
    }
    fn logits(&self, i: usize) -> Result<&[f32], EngineError> {
        self.out
            .get(i)
            .map(|v| v.as_slice())
            .ok_or(EngineError::NoLogits {
                index: i,
                kept: self.out.len(),
            })
    }
    fn kv_truncate(&mut self, _seq: i32, from_pos: u32) -> Result<(), EngineError> {
        self.hashes.truncate(from_pos as usize);
        Ok(())
    }
    fn kv_clear(&mut self) {
        self.hashes.clear();
    }
    fn synchronize(&mut self) {}
}

impl Vocab for Mock {
    fn tokenize(&self, _: &str, _: bool) -> Result<Vec<TokenId>, EngineError> {
        Err(EngineError::Unsupported("mock tokenizer"))
    }
    fn token_bytes(&self, t: TokenId) -> Vec<u8> {
        format!("<{t}>").into_bytes()
    }
    fn is_eog(&self, t: TokenId) -> bool {
        self.eog == Some(t)
    }
    fn bos(&self) -> Option<TokenId> {
        None
    }
}

/// A toy whose greedy next token is scripted by position: with `L` tokens cached,
/// the row it computes puts logit 60 on `script[L]` and 0 elsewhere (token 0 past the
/// script's end), so at any temperature ≤ 1 its distribution is a point mass in
/// f64 (e⁻⁶⁰ · n_vocab vanishes beside 1). It keeps the tokens it caches
/// ([`Scripted::cached`]), refuses a write at an occupied position (a rollback bug)
/// and counts passes, so a test can read exactly what each cache holds.
pub struct Scripted {
    /// Logit width.
    pub n_vocab: usize,
    /// The token its row after `L` cached tokens predicts: `script[L]`.
    pub script: Vec<TokenId>,
    /// End-of-generation token.
    pub eog: Option<TokenId>,
    /// The token at each cached position.
    pub cached: Vec<TokenId>,
    /// Forward passes run.
    pub passes: u64,
    out: Vec<Vec<f32>>,
}

impl Scripted {
    /// A toy predicting `script` with `n_vocab` logits and end token `eog`.
    pub fn new(n_vocab: usize, script: Vec<TokenId>, eog: Option<TokenId>) -> Scripted {
        Scripted {
            n_vocab,
            script,
            eog,
            cached: Vec::new(),
            passes: 0,
            out: Vec::new(),
        }
    }
}

impl Engine for Scripted {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "scripted".into(),
            build: "test".into(),
            backends: "none".into(),
            system_info: String::new(),
        }
    }
    fn n_vocab(&self) -> usize {
        self.n_vocab
    }
    fn n_ctx(&self) -> u32 {
        1 << 12
    }
    fn n_batch(&self) -> u32 {
        64
    }
    fn decode(&mut self, batch: &[BatchItem]) -> Result<(), EngineError> {
        self.out.clear();
        self.passes += 1;
        for it in batch {
            if it.pos as usize != self.cached.len() {
                return Err(EngineError::Decode(format!(
                    "position {} written with {} cached (occupied or gap: a rollback bug)",
                    it.pos,
                    self.cached.len()
                )));
            }
            self.cached.push(it.token);
            if it.logits {
                let mut row = vec![0f32; self.n_vocab];
                let next = self.script.get(self.cached.len()).copied().unwrap_or(0);
                row[next as usize] = 60.0;
                self.out.push(row);
            }
        }
        Ok(())
    }
    fn logits(&self, i: usize) -> Result<&[f32], EngineError> {
        self.out
            .get(i)
            .map(|v| v.as_slice())
            .ok_or(EngineError::NoLogits {
                index: i,
                kept: self.out.len(),
            })
    }
    fn kv_truncate(&mut self, _seq: i32, from_pos: u32) -> Result<(), EngineError> {
        self.cached.truncate(from_pos as usize);
        Ok(())
    }
    fn kv_clear(&mut self) {
        self.cached.clear();
    }
    fn synchronize(&mut self) {}
}

impl Vocab for Scripted {
    fn tokenize(&self, _: &str, _: bool) -> Result<Vec<TokenId>, EngineError> {
        Err(EngineError::Unsupported("scripted tokenizer"))
    }
    fn token_bytes(&self, t: TokenId) -> Vec<u8> {
        format!("<{t}>").into_bytes()
    }
    fn is_eog(&self, t: TokenId) -> bool {
        self.eog == Some(t)
    }
    fn bos(&self) -> Option<TokenId> {
        None
    }
}

/// A target rigged to diverge: its batched passes (≥ 2 positions with logits) move
/// the first row's argmax to token 0, while one-position passes and prefills stay
/// exact. So plain greedy decoding is correct and every speculative verify pass is
/// wrong: what a broken batched kernel or a missed KV rollback would look like.
pub struct Diverging(pub Mock);

impl Engine for Diverging {
    fn info(&self) -> EngineInfo {
        self.0.info()
    }
    fn n_vocab(&self) -> usize {
        self.0.n_vocab()
    }
    fn n_ctx(&self) -> u32 {
        self.0.n_ctx()
    }
    fn n_batch(&self) -> u32 {
        self.0.n_batch()
    }
    fn decode(&mut self, b: &[BatchItem]) -> Result<(), EngineError> {
        self.0.decode(b)?;
        if b.iter().filter(|i| i.logits).count() >= 2 {
            self.0.bump_first_row();
        }
        Ok(())
    }
    fn logits(&self, i: usize) -> Result<&[f32], EngineError> {
        self.0.logits(i)
    }
    fn kv_truncate(&mut self, s: i32, p: u32) -> Result<(), EngineError> {
        self.0.kv_truncate(s, p)
    }
    fn kv_clear(&mut self) {
        self.0.kv_clear()
    }
    fn synchronize(&mut self) {}
}

impl Vocab for Diverging {
    fn tokenize(&self, t: &str, a: bool) -> Result<Vec<TokenId>, EngineError> {
        self.0.tokenize(t, a)
    }
    fn token_bytes(&self, t: TokenId) -> Vec<u8> {
        self.0.token_bytes(t)
    }
    fn is_eog(&self, t: TokenId) -> bool {
        self.0.is_eog(t)
    }
    fn bos(&self) -> Option<TokenId> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::speculative::drafter::{DraftModel, Drafter, Ngram, NoDraft, Pick};
    use crate::experiments::speculative::run::{
        SpecConfig, SpecOutput, SpecSession, target_greedy,
    };
    use crate::experiments::speculative::sampling::SamplingParams;
    use crate::experiments::speculative::synth::SetAcceptance;

    fn greedy(k: usize, max_new: usize) -> SpecConfig {
        SpecConfig::greedy(k, max_new)
    }

    fn draft(noise: f32) -> DraftModel<Mock> {
        let mut m = Mock::new(40, 4.0);
        m.noise = noise;
        DraftModel::new(m, "draft:mock".into())
    }

    fn prompts() -> Vec<Vec<TokenId>> {
        (0..12)
            .map(|i| {
                (0..(1 + i * 3))
                    .map(|j| ((i * 7 + j * 3) % 40) as TokenId)
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_toy_depends_on_the_whole_prefix() {
        let m = Mock::new(10, 1.0);
        assert_ne!(m.logits_after(&[1, 2, 3]), m.logits_after(&[0, 2, 3]));
        let mut e = Mock::new(10, 1.0);
        e.prefill(&[1, 2, 3], 0, 0, true).unwrap();
        assert_eq!(e.logits(0).unwrap(), m.logits_after(&[1, 2, 3]).as_slice());
        // Overwriting without truncation is refused.
        assert!(e.decode_one(4, 1, 0).is_err());
    }

    #[test]
    fn greedy_spec_equals_target_greedy_for_every_k_and_drafter() {
        for noise in [0.0f32, 0.7, 2.0, 50.0] {
            for k in 0..=8 {
                for (pi, p) in prompts().iter().enumerate() {
                    let mut reference = Mock::new(40, 4.0);
                    let want = target_greedy(&mut reference, p, 40).unwrap().tokens;
                    let mut t = Mock::new(40, 4.0);
                    let mut d = draft(noise);
                    let got = SpecSession::new()
                        .generate(&mut t, &mut d, p, &greedy(k, 40))
                        .unwrap();
                    assert_eq!(got.tokens, want, "noise {noise} k {k} prompt {pi}");
                    let mut ng = Ngram::default();
                    let got = SpecSession::new()
                        .generate(&mut t, &mut ng, p, &greedy(k, 40))
                        .unwrap();
                    assert_eq!(got.tokens, want, "ngram k {k} prompt {pi}");
                }
            }
        }
    }

    #[test]
    fn verify_passes_split_into_bounded_chunks_give_the_same_output() {
        let p: Vec<TokenId> = vec![9, 8, 7, 6];
        let mut reference = Mock::new(40, 4.0);
        let want = target_greedy(&mut reference, &p, 30).unwrap().tokens;
        for rows in [1, 2, 3, 7] {
            let mut t = Mock::new(40, 4.0);
            let mut d = draft(0.0);
            let mut s = SpecSession::new();
            s.max_rows_per_pass = rows;
            let got = s.generate(&mut t, &mut d, &p, &greedy(8, 30)).unwrap();
            assert_eq!(got.tokens, want, "rows {rows}");
            // 30 tokens, all accepted: iterations verify 9, 9, 9 and 3 rows.
            let want_passes = 3 * 9u64.div_ceil(rows as u64) + 3u64.div_ceil(rows as u64);
            assert_eq!(got.stats.n_target_passes, want_passes, "rows {rows}");
            assert_eq!(got.stats.n_accepted, got.stats.n_drafted, "draft = target");
            // Draft lengths 8, 8, 8 and 2 (the last iteration has 3 tokens left).
            let mut hist = vec![0u64; 9];
            hist[8] = 3;
            hist[2] = 1;
            assert_eq!(got.stats.draft_len_hist, hist, "rows {rows}");
        }
    }

    #[test]
    fn all_accepted_edge_replays_the_last_proposal() {
        // Draft = target: every drafted token is accepted; the draft must replay x_k.
        let p: Vec<TokenId> = vec![3, 1, 4, 1, 5];
        let mut reference = Mock::new(40, 4.0);
        let want = target_greedy(&mut reference, &p, 33).unwrap().tokens;
        for k in 1..=8 {
            let mut t = Mock::new(40, 4.0);
            let mut d = draft(0.0);
            let got = SpecSession::new()
                .generate(&mut t, &mut d, &p, &greedy(k, 33))
                .unwrap();
            assert_eq!(got.tokens, want, "k {k}");
            let s = &got.stats;
            assert_eq!(s.n_accepted, s.n_drafted, "k {k}: all accepted");
            assert_eq!(s.n_rejections, 0);
            // Every iteration emits accepted + 1 tokens.
            assert_eq!(s.n_emitted, s.n_accepted + s.n_iterations);
            assert_eq!(s.n_iterations, 33u64.div_ceil(k as u64 + 1), "k {k}");
        }
    }

    #[test]
    fn zero_accepted_edge_rolls_back_every_proposal() {
        let p: Vec<TokenId> = vec![2, 7, 1, 8];
        let mut reference = Mock::new(40, 4.0);
        let want = target_greedy(&mut reference, &p, 20).unwrap().tokens;
        for k in 1..=8 {
            let mut t = Mock::new(40, 4.0);
            let mut d = draft(0.0).with_pick(Pick::Worst);
            let got = SpecSession::new()
                .generate(&mut t, &mut d, &p, &greedy(k, 20))
                .unwrap();
            assert_eq!(got.tokens, want, "k {k}");
            assert_eq!(got.stats.n_accepted, 0);
            assert_eq!(got.stats.n_iterations, 20, "one token per iteration");
            assert_eq!(got.stats.accept_hist[0], 20);
        }
    }

    #[test]
    fn eog_stops_generation_and_is_emitted() {
        let p: Vec<TokenId> = vec![5, 6];
        let mut reference = Mock::new(40, 4.0);
        let free = target_greedy(&mut reference, &p, 30).unwrap().tokens;
        let stop = free[7];
        let first = free.iter().position(|&t| t == stop).unwrap();
        let mut reference = Mock::new(40, 4.0);
        reference.eog = Some(stop);
        let want = target_greedy(&mut reference, &p, 30).unwrap().tokens;
        assert_eq!(want, free[..=first]);
        for k in [1, 4, 8] {
            let mut t = Mock::new(40, 4.0);
            t.eog = Some(stop);
            let mut d = draft(0.3);
            let got = SpecSession::new()
                .generate(&mut t, &mut d, &p, &greedy(k, 30))
                .unwrap();
            assert_eq!(got.tokens, want, "k {k}");
        }
    }

    /// An answer of a few tokens ("Say OK"): the answer ends two tokens in, and the n-gram
    /// drafter copies an earlier occurrence of it that goes on past the end token.
    /// Prompt `P` (13 tokens) holds `5 7 | 10 11 99 12 13 14 15 16`; its suffix
    /// `5 7` matches at 0, so the drafter proposes `10 11 99 12 13 14 15 16`. The
    /// target answers `10 11 99` (99 ends generation) and would go on `12 13 …`.
    const OK_PROMPT: [TokenId; 13] = [5, 7, 10, 11, 99, 12, 13, 14, 15, 16, 3, 5, 7];
    const EOG: TokenId = 99;

    /// The prompt followed by the target's continuation `answer` and, after it,
    /// what the drafter's earlier occurrence continues with.
    fn ok_script(answer: &[TokenId]) -> Vec<TokenId> {
        let mut s = OK_PROMPT.to_vec();
        s.extend_from_slice(answer);
        s.extend_from_slice(&[12, 13, 14, 15, 16, 17, 18, 19, 20]);
        s
    }

    fn sampled() -> SamplingParams {
        SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
        }
    }

    #[test]
    fn nothing_after_the_end_token_is_counted_by_hand() {
        // (k, iterations, drafted, accepted, emitted, rejections): k = 1 drafts 10
        // (bonus 11), then 99 alone (accepted: no bonus row); k = 2 drafts 10 11, the
        // bonus is 99; k ≥ 3 drafts 10 11 99 (cut there), all accepted, no bonus.
        // Before the cut, k = 8 counted 8 drafted and 8 accepted for 3 emitted.
        let want = [
            (1, 2, 2, 2, 3, 0),
            (2, 1, 2, 2, 3, 0),
            (3, 1, 3, 3, 3, 0),
            (8, 1, 3, 3, 3, 0),
        ];
        for sampling in [SamplingParams::greedy(), sampled()] {
            for (k, it, dr, acc, em, rej) in want {
                let mut t = Scripted::new(128, ok_script(&[10, 11, EOG]), Some(EOG));
                let cfg = SpecConfig {
                    sampling,
                    ..greedy(k, 32)
                };
                let out = SpecSession::new()
                    .generate(&mut t, &mut Ngram::default(), &OK_PROMPT, &cfg)
                    .unwrap();
                let s = &out.stats;
                assert_eq!(out.tokens, [10, 11, EOG], "k {k}");
                assert_eq!(
                    (
                        s.n_iterations,
                        s.n_drafted,
                        s.n_accepted,
                        s.n_emitted,
                        s.n_rejections
                    ),
                    (it, dr, acc, em, rej),
                    "k {k} {sampling:?}"
                );
                // The target's cache: the prompt and the answer, the end token not fed.
                assert_eq!(t.cached, ok_script(&[10, 11])[..15], "k {k}");
            }
        }
        // The target rejects at the drafted 11 and ends right there (10 99): one
        // iteration, 3 drafted (cut at 99), 1 accepted, 2 emitted; the rejected 11
        // does not stay in the cache.
        let mut t = Scripted::new(128, ok_script(&[10, EOG]), Some(EOG));
        let out = SpecSession::new()
            .generate(&mut t, &mut Ngram::default(), &OK_PROMPT, &greedy(8, 32))
            .unwrap();
        let s = &out.stats;
        assert_eq!(out.tokens, [10, EOG]);
        assert_eq!(
            (
                s.n_iterations,
                s.n_drafted,
                s.n_accepted,
                s.n_emitted,
                s.n_rejections
            ),
            (1, 3, 1, 2, 1)
        );
        assert_eq!(t.cached, [&OK_PROMPT[..], &[10]].concat());
    }

    /// Every drafter, every k, greedy and sampled, an end token at each of the
    /// first positions: the output stops at the end token and equals the target's;
    /// accepted ≤ emitted; emitted = accepted + iterations, less one when the
    /// generation ended on an accepted drafted end token; and afterwards neither
    /// cache holds the end token or anything past it.
    #[test]
    fn every_drafter_stops_counting_and_caching_at_the_end_token() {
        let answer_full: Vec<TokenId> = vec![10, 11, 21, 22, 23, 24];
        for end_at in 0..4 {
            let mut answer = answer_full[..end_at].to_vec();
            answer.push(EOG);
            let script = ok_script(&answer);
            let mut reference = Scripted::new(128, script.clone(), Some(EOG));
            let want = target_greedy(&mut reference, &OK_PROMPT, 32)
                .unwrap()
                .tokens;
            assert_eq!(want, answer);
            let committed = [&OK_PROMPT[..], &answer[..end_at]].concat();
            for sampling in [SamplingParams::greedy(), sampled()] {
                for k in 1..=8 {
                    let cfg = SpecConfig {
                        sampling,
                        ..greedy(k, 32)
                    };
                    let check = |name: &str, out: &SpecOutput, cache: &[TokenId]| {
                        let s = &out.stats;
                        let at = format!("{name} k {k} end at {end_at} {sampling:?}");
                        assert_eq!(out.tokens, want, "{at}");
                        assert_eq!(s.n_emitted, want.len() as u64, "{at}");
                        assert!(s.n_accepted <= s.n_emitted, "{at}: {s:?}");
                        assert!(s.n_tested() <= s.n_emitted, "{at}: {s:?}");
                        assert!(s.n_emitted <= s.n_accepted + s.n_iterations, "{at}: {s:?}");
                        let gap = s.n_accepted + s.n_iterations - s.n_emitted;
                        assert!(gap <= 1, "{at}: {s:?}");
                        assert!(committed.starts_with(cache), "{at}: cache {cache:?}");
                    };
                    // The target's own script as a draft model (it knows the end
                    // token), and one that does not (it drafts past it).
                    for draft_eog in [Some(EOG), None] {
                        let mut t = Scripted::new(128, script.clone(), Some(EOG));
                        let mut d = DraftModel::new(
                            Scripted::new(128, script.clone(), draft_eog),
                            "draft:scripted".into(),
                        );
                        let out = SpecSession::new()
                            .generate(&mut t, &mut d, &OK_PROMPT, &cfg)
                            .unwrap();
                        check("target", &out, &t.cached);
                        check("draft model", &out, &d.engine().cached);
                    }
                    let mut t = Scripted::new(128, script.clone(), Some(EOG));
                    let out = SpecSession::new()
                        .generate(&mut t, &mut Ngram::default(), &OK_PROMPT, &cfg)
                        .unwrap();
                    check("ngram", &out, &t.cached);
                    let mut t = Scripted::new(128, script.clone(), Some(EOG));
                    let out = SpecSession::new()
                        .generate(&mut t, &mut NoDraft, &OK_PROMPT, &cfg)
                        .unwrap();
                    check("none", &out, &t.cached);
                    assert_eq!(out.stats.n_drafted, 0);
                    // Set acceptance (α = 1: always the target's token), a draft
                    // engine that does not know the end token.
                    let mut t = Scripted::new(128, script.clone(), Some(EOG));
                    let mut sa = SetAcceptance::new(
                        Scripted::new(128, script.clone(), None),
                        "draft:scripted".into(),
                        1.0,
                        1,
                    )
                    .unwrap();
                    sa.set_reference(script.clone());
                    let out = SpecSession::new()
                        .generate(&mut t, &mut sa, &OK_PROMPT, &cfg)
                        .unwrap();
                    check("set acceptance", &out, &t.cached);
                    check("set acceptance draft", &out, &sa.engine().cached);
                }
            }
        }
    }

    #[test]
    fn sampled_spec_keeps_the_targets_law_when_the_end_token_is_drafted() {
        // Token 2 ends generation. The law of (first, second) is p(a)·p(b | a) for
        // a ≠ 2 and p(2) for (2, end); the n-gram drafter proposes 2 4 after the
        // prompt's last 1 (cut after the 2: an end-token-final draft), the draft
        // model samples its own (the end token among them).
        let v = 6usize;
        let end = 2 as TokenId;
        let sp = sampled();
        let prompt: Vec<TokenId> = vec![1, 2, 4, 1];
        let law_t = Mock::new(v, 2.0);
        let p0 = sp.distribution(&law_t.logits_after(&prompt));
        // Cells a·(v+1) + b, b = v meaning "ended".
        let mut exact = vec![0.0; v * (v + 1)];
        for a in 0..v {
            if a as TokenId == end {
                exact[a * (v + 1) + v] = p0[a];
                continue;
            }
            let mut pre = prompt.clone();
            pre.push(a as TokenId);
            let p1 = sp.distribution(&law_t.logits_after(&pre));
            for b in 0..v {
                exact[a * (v + 1) + b] = p0[a] * p1[b];
            }
        }
        for (name, ngram) in [("draft", false), ("ngram", true)] {
            let n = 20_000u64;
            let mut counts = vec![0u64; v * (v + 1)];
            let mut t = Mock::new(v, 2.0);
            t.eog = Some(end);
            let mut dm = {
                let mut m = Mock::new(v, 2.0);
                m.noise = 1.5;
                m.eog = Some(end);
                DraftModel::new(m, "draft:mock".into())
            };
            let mut ng = Ngram { max_n: 1, min_n: 1 };
            let mut session = SpecSession::new();
            let mut accepted_end = 0u64;
            for seed in 0..n {
                let cfg = SpecConfig {
                    k: 3,
                    max_new: 3,
                    sampling: sp,
                    seed,
                    max_iterations: 0,
                };
                let drafter: &mut dyn Drafter = if ngram { &mut ng } else { &mut dm };
                let out = session.generate(&mut t, drafter, &prompt, &cfg).unwrap();
                let s = &out.stats;
                assert!(s.n_accepted <= s.n_emitted, "{name} seed {seed}: {s:?}");
                accepted_end += (s.n_accepted + s.n_iterations > s.n_emitted) as u64;
                let b = out.tokens.get(1).map_or(v, |&b| b as usize);
                counts[out.tokens[0] as usize * (v + 1) + b] += 1;
            }
            assert!(accepted_end > 0, "{name}: a drafted end token was accepted");
            let (mut chi2, mut df) = (0.0, -1.0);
            for i in 0..exact.len() {
                if exact[i] == 0.0 {
                    assert_eq!(counts[i], 0, "{name}: cell {i} is impossible");
                    continue;
                }
                let e = exact[i] * n as f64;
                chi2 += (counts[i] as f64 - e).powi(2) / e;
                df += 1.0;
            }
            assert!(
                chi2 < chi2_crit(df),
                "{name}: χ² = {chi2} ≥ {} (df {df})",
                chi2_crit(df)
            );
        }
    }

    #[test]
    fn vocabulary_mismatch_is_truncated_and_its_mass_recorded() {
        // Target 44 logits (4 padding rows at −12), draft 40: shared support 40.
        let p: Vec<TokenId> = vec![1, 2, 3];
        let mk_t = || {
            let mut t = Mock::new(44, 4.0);
            t.n_real = 40;
            t
        };
        let mut reference = mk_t();
        let want = target_greedy(&mut reference, &p, 16).unwrap().tokens;
        let mut t = mk_t();
        let mut d = draft(0.5);
        let got = SpecSession::new()
            .generate(&mut t, &mut d, &p, &greedy(4, 16))
            .unwrap();
        assert_eq!(got.tokens, want);
        let s = &got.stats;
        assert_eq!(s.q_mass.max, 0.0, "the draft row is not cut");
        assert!(s.p_mass.n > 0 && s.p_mass.max > 0.0);
        // Independent bound: 4 rows at −12 against ≥ 40 rows with logits ≥ 0
        // (max softmax tail 4e^-12 / (4e^-12 + 40 e^0)).
        let bound = 4.0 * (-12f64).exp() / (4.0 * (-12f64).exp() + 40.0);
        assert!(s.p_mass.max <= bound * 1.0001, "{} > {bound}", s.p_mass.max);
        // With equal widths nothing is cut: exactly 0.
        let mut t = Mock::new(40, 4.0);
        let got = SpecSession::new()
            .generate(&mut t, &mut draft(0.5), &p, &greedy(4, 16))
            .unwrap();
        assert_eq!((got.stats.p_mass.max, got.stats.q_mass.max), (0.0, 0.0));
    }

    /// χ² critical value at significance 1e-3 (Wilson–Hilferty, z = 3.0902).
    fn chi2_crit(df: f64) -> f64 {
        let z = 3.0902;
        df * (1.0 - 2.0 / (9.0 * df) + z * (2.0 / (9.0 * df)).sqrt()).powi(3)
    }

    #[test]
    fn sampled_spec_emits_the_targets_two_token_distribution() {
        // Small vocabulary; the exact law of the first two tokens is
        // p(a | prompt) · p(b | prompt, a), computed from the toy directly.
        let v = 6usize;
        let sp = SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
        };
        let prompt: Vec<TokenId> = vec![1, 4, 2];
        let law_t = Mock::new(v, 2.0);
        let p0 = sp.distribution(&law_t.logits_after(&prompt));
        let mut exact = vec![0.0; v * v];
        for a in 0..v {
            let mut pre = prompt.clone();
            pre.push(a as TokenId);
            let p1 = sp.distribution(&law_t.logits_after(&pre));
            for b in 0..v {
                exact[a * v + b] = p0[a] * p1[b];
            }
        }
        for (name, noise, ngram) in [("draft", 1.5f32, false), ("ngram", 0.0, true)] {
            let n = 20_000u64;
            let mut counts = vec![0u64; v * v];
            let mut t = Mock::new(v, 2.0);
            let mut dm = {
                let mut m = Mock::new(v, 2.0);
                m.noise = noise;
                DraftModel::new(m, "draft:mock".into())
            };
            let mut ng = Ngram { max_n: 1, min_n: 1 };
            let mut session = SpecSession::new();
            for seed in 0..n {
                let cfg = SpecConfig {
                    k: 3,
                    max_new: 2,
                    sampling: sp,
                    seed,
                    max_iterations: 0,
                };
                let drafter: &mut dyn Drafter = if ngram { &mut ng } else { &mut dm };
                let out = session.generate(&mut t, drafter, &prompt, &cfg).unwrap();
                counts[out.tokens[0] as usize * v + out.tokens[1] as usize] += 1;
            }
            let mut chi2 = 0.0;
            let mut df = 0.0;
            for i in 0..v * v {
                let e = exact[i] * n as f64;
                chi2 += (counts[i] as f64 - e).powi(2) / e;
                df += 1.0;
            }
            df -= 1.0;
            assert!(
                chi2 < chi2_crit(df),
                "{name}: χ² = {chi2} ≥ {} (df {df})",
                chi2_crit(df)
            );
        }
        let _ = NoDraft;
    }
}
