//! The decode roofline of one model spread over several GPUs, for llama.cpp's split
//! modes (`llama_model_params::split_mode`, llama-bench's `-sm`), and the settings
//! themselves ([`SplitMode`], [`TensorSplit`]: llama-bench's `-sm` and `-ts`).
//!
//! **Layer split** (`layer`, llama.cpp's default): each card holds whole layers, and a
//! token visits the cards in turn. A decode step reads every card's bytes one card
//! after the other, and hands the hidden state over at each card boundary:
//!
//! ```text
//! t_step = Σ_i bytes_i ÷ bw_i  +  (cards holding bytes − 1) × t_msg(hidden state)
//! ```
//!
//! A second card adds capacity, not decode speed: the bytes still stream at one
//! card's bandwidth at a time ([`layer_split_step`]).
//!
//! **Row split** (`row`): every weight matrix is split by rows over the cards, and
//! all cards read their share at once. The memory time is the slowest card's, and
//! the partial results are exchanged over the interconnect, layer by layer:
//!
//! ```text
//! t_step = max_i bytes_i ÷ bw_i  +  n_layer × exchanges per layer × t_msg(hidden state)
//! ```
//!
//! ([`row_split_step`]). The decode ceiling is `n_seqs ÷ t_step` tokens/s.
//!
//! **Inputs are measured parts**, never constants: `bw_i` is card i's own STREAM
//! triad (`memwall stream --gpu --gpu-device i`), and `t_msg(b) = latency + b ÷ link
//! bandwidth` is the peer copy measured between the cards (`memwall stream --gpu
//! --peer`, [`PeerLink`]). The message is one hidden state per sequence, `n_embd`
//! f32 values (llama.cpp's activations between layers are f32).
//!
//! **Where llama.cpp puts the bytes** (`llama_model::load_tensors` in
//! `src/llama-model.cpp` of the llama.cpp that llama-cpp-sys-2 0.1.161 vendors):
//! - layer: the tensor split is normalised into cumulative split points `s_i`; with
//!   every layer offloaded, layer `il` (0-based) goes to the first card with
//!   `s_i > il ÷ (n_layer + 1)`, and the output head is placed as layer `n_layer`
//!   ([`layer_cards`]). The token embedding stays on the CPU (one row per token, not
//!   counted on any card). A layer's KV cache lives on its layer's card.
//! - row: each card holds its fraction of every split matrix (the layers' matmul
//!   weights and the output head); the norms, the KV cache and attention stay on the
//!   main GPU (card 0 here, llama.cpp's default `main_gpu`) ([`row_split_bytes`]).
//!
//! Worked example (the test `worked_example_two_cards_layer_vs_row` repeats it):
//! 48 layers of 600 MB plus a 1.2 GB output head (30.0 GB per step, depth 0), on two
//! cards whose STREAM reads 3000 and 3300 GB/s, a peer copy of 10 µs latency at
//! 40 GB/s, n_embd 5120, tensor split 1,1:
//!
//! ```text
//! hidden state  5120 × 4 B = 20,480 B; t_msg = 10 µs + 20,480 B ÷ 40 GB/s = 10.512 µs
//! layer split   split points 0.5, 1.0: layers 0–24 (il ÷ 49 < 0.5) on card 0 = 25 × 0.6 = 15.0 GB;
//!               layers 25–47 + head on card 1 = 23 × 0.6 + 1.2 = 15.0 GB
//!               t = 15.0/3000 + 15.0/3300 s + 1 × 10.512 µs = 5.000 + 4.545 + 0.011 ms = 9.556 ms → 104.6 tok/s
//! row split     each card 0.5 × 30.0 = 15.0 GB; t = max(5.000, 4.545) ms + 48 × 1 × 10.512 µs
//!               = 5.000 + 0.505 ms = 5.505 ms → 181.7 tok/s
//! one card      30.0 GB ÷ 3000 GB/s = 10.0 ms → 100.0 tok/s
//! ```

use crate::probe::model::{CacheType, ModelFacts, TensorClass};
use crate::units::{Bytes, Gbps};
use serde::{Deserialize, Serialize};

/// The most devices llama.cpp splits over (`LLAMA_MAX_DEVICES`, `llama_max_devices()`).
pub const MAX_DEVICES: usize = 16;

/// Bytes of one f32 activation value (llama.cpp passes f32 hidden states between layers).
pub const ACTIVATION_BYTES: u64 = 4;

/// llama.cpp's split mode (`enum llama_split_mode`), as llama-bench's `-sm` spells it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SplitMode {
    /// One GPU (`main_gpu`) holds everything (`LLAMA_SPLIT_MODE_NONE`).
    None,
    /// Whole layers per GPU (`LLAMA_SPLIT_MODE_LAYER`, llama.cpp's default).
    #[default]
    Layer,
    /// Every matrix split by rows over the GPUs (`LLAMA_SPLIT_MODE_ROW`).
    Row,
}

impl SplitMode {
    /// The name llama-bench writes in its `split_mode` column (`split_mode_str`).
    pub fn name(self) -> &'static str {
        match self {
            SplitMode::None => "none",
            SplitMode::Layer => "layer",
            SplitMode::Row => "row",
        }
    }

    /// Parses `none`, `layer` or `row` (llama-bench's `-sm` values; `tensor`, llama.cpp's
    /// experimental mode, is refused: memwall has no roofline for it).
    ///
    /// # Errors
    /// [`SplitError::Mode`] naming the value and the accepted ones.
    pub fn parse(s: &str) -> Result<SplitMode, SplitError> {
        match s.trim() {
            "none" => Ok(SplitMode::None),
            "layer" => Ok(SplitMode::Layer),
            "row" => Ok(SplitMode::Row),
            other => Err(SplitError::Mode(other.to_string())),
        }
    }
}

/// llama.cpp's `tensor_split`: the proportion of the model each GPU gets, in device
/// order. Empty: llama.cpp's default (proportional to each device's free memory).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TensorSplit(pub Vec<f32>);

impl TensorSplit {
    /// Parses `3,1` (llama.cpp's `--tensor-split`) or `3/1` (llama-bench's `-ts`): one
    /// finite, non-negative proportion per GPU, at least one positive, at most
    /// [`MAX_DEVICES`].
    ///
    /// # Errors
    /// [`SplitError::TensorSplit`] naming the value and what is wrong with it.
    pub fn parse(s: &str) -> Result<TensorSplit, SplitError> {
        let bad = |why: String| SplitError::TensorSplit {
            given: s.to_string(),
            why,
        };
        let parts: Vec<&str> = s.split([',', '/']).map(str::trim).collect();
        if parts.len() > MAX_DEVICES {
            return Err(bad(format!(
                "{} proportions, llama.cpp splits over at most {MAX_DEVICES} devices",
                parts.len()
            )));
        }
        let mut v = Vec::with_capacity(parts.len());
        for p in parts {
            let x: f32 = p
                .parse()
                .map_err(|_| bad(format!("{p:?} is not a number")))?;
            if !x.is_finite() || x < 0.0 {
                return Err(bad(format!("{p} is not a finite proportion ≥ 0")));
            }
            v.push(x);
        }
        if !v.iter().any(|&x| x > 0.0) {
            return Err(bad("every proportion is 0".into()));
        }
        Ok(TensorSplit(v))
    }

    /// `true` for llama.cpp's default split (nothing given).
    pub fn is_default(&self) -> bool {
        self.0.iter().all(|&x| x == 0.0)
    }

    /// The text llama-bench writes in its `tensor_split` column (`test::get_values`):
    /// each proportion as `%.2f`, `/`-separated, up to the last positive one; `0.00`
    /// for the default.
    pub fn llama_bench_text(&self) -> String {
        let last = self.0.iter().rposition(|&x| x > 0.0).unwrap_or(0);
        (0..=last)
            .map(|i| format!("{:.2}", f64::from(self.0.get(i).copied().unwrap_or(0.0))))
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The proportions over `n_cards` cards, normalised to sum to 1 (missing entries
    /// are 0; the default split is equal shares, what llama.cpp's split by free memory
    /// gives on identical idle cards).
    pub fn fractions(&self, n_cards: usize) -> Vec<f64> {
        let n = n_cards.max(1);
        if self.is_default() {
            return vec![1.0 / n as f64; n];
        }
        let v: Vec<f64> = (0..n)
            .map(|i| f64::from(self.0.get(i).copied().unwrap_or(0.0)))
            .collect();
        let sum: f64 = v.iter().sum();
        if sum > 0.0 {
            v.iter().map(|x| x / sum).collect()
        } else {
            vec![1.0 / n as f64; n]
        }
    }
}

/// The multi-GPU settings of a run: llama.cpp's split mode and tensor split.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuSplit {
    /// `--split-mode`.
    #[serde(default)]
    pub mode: SplitMode,
    #[serde(default)]
    pub tensor_split: TensorSplit,
}

impl GpuSplit {
    /// `true` when nothing was changed from llama.cpp's defaults (layer, default split).
    pub fn is_default(&self) -> bool {
        self.mode == SplitMode::Layer && self.tensor_split.is_default()
    }

    /// Checks the combination.
    ///
    /// # Errors
    /// [`SplitError::SplitWithoutSplitting`] for a tensor split with `--split-mode none`.
    pub fn validate(&self) -> Result<(), SplitError> {
        if self.mode == SplitMode::None && !self.tensor_split.is_default() {
            return Err(SplitError::SplitWithoutSplitting(
                self.tensor_split.llama_bench_text(),
            ));
        }
        Ok(())
    }

    /// Checks the settings against the GPUs llama.cpp sees (`n_gpus`).
    ///
    /// # Errors
    /// [`SplitError::TooFewGpus`] when the tensor split names more cards than there
    /// are, or `row` is asked for without a GPU.
    pub fn check_devices(&self, n_gpus: usize) -> Result<(), SplitError> {
        let named = self.tensor_split.0.len();
        if !self.tensor_split.is_default() && named > n_gpus {
            return Err(SplitError::TooFewGpus(format!(
                "--tensor-split {} names {named} GPUs, llama.cpp sees {n_gpus}: give at most {n_gpus} proportions",
                self.tensor_split.llama_bench_text()
            )));
        }
        if self.mode == SplitMode::Row && n_gpus == 0 {
            return Err(SplitError::TooFewGpus(
                "--split-mode row splits matrices over GPUs and llama.cpp sees none (a CPU-only build?): use --split-mode layer or none".into(),
            ));
        }
        Ok(())
    }
}

/// A bad multi-GPU setting, naming the flag and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SplitError {
    /// Not a split mode memwall runs.
    #[error(
        "--split-mode {0:?}: use none, layer or row (llama.cpp's split modes, llama-bench's -sm; llama.cpp's experimental `tensor` mode is not supported)"
    )]
    Mode(String),
    /// A tensor split that is not a list of proportions.
    #[error(
        "--tensor-split {given:?}: {why} (give one proportion per GPU, comma-separated, e.g. --tensor-split 1,1 for two equal shares)"
    )]
    TensorSplit {
        given: String,
        /// What is wrong.
        why: String,
    },
    /// A tensor split with split mode none.
    #[error(
        "--tensor-split {0} has no effect with --split-mode none (one GPU holds the whole model): drop --tensor-split, or use --split-mode layer or row"
    )]
    SplitWithoutSplitting(String),
    /// More cards asked for than present.
    #[error("{0}")]
    TooFewGpus(String),
    /// The cards and the split do not match, or a part is missing.
    #[error("multi-GPU roofline: {0}")]
    Inputs(String),
}

/// The measured peer copy between two cards: `t(bytes) = latency + bytes ÷ bandwidth`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PeerLink {
    /// Time of the smallest measured copy, seconds (the small-message latency).
    pub latency_s: f64,
    /// Bulk peer-copy bandwidth, GB/s.
    pub bandwidth: Gbps,
}

impl PeerLink {
    /// Time to move `bytes` from one card to the other: `latency + bytes ÷ bandwidth`.
    ///
    /// Example: 20,480 B at 10 µs and 40 GB/s: 10 µs + 0.512 µs = 10.512 µs.
    pub fn message_s(&self, bytes: u64) -> f64 {
        self.latency_s + bytes as f64 / self.bandwidth.bytes_per_s()
    }
}

/// One card's share of a decode step: the bytes it reads and its measured bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CardPart {
    /// Bytes this card reads per decode step.
    pub bytes: Bytes,
    /// This card's STREAM bandwidth.
    pub bandwidth: Gbps,
}

impl CardPart {
    /// `bytes ÷ bandwidth`, seconds.
    pub fn read_s(&self) -> f64 {
        self.bytes.0 as f64 / self.bandwidth.bytes_per_s()
    }
}

/// One decode step's time, split into its memory and interconnect parts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepTime {
    /// Time reading memory, seconds.
    pub memory_s: f64,
    /// Time moving activations between cards, seconds.
    pub link_s: f64,
}

impl StepTime {
    /// `memory_s + link_s`.
    pub fn total_s(&self) -> f64 {
        self.memory_s + self.link_s
    }

    /// Decode ceiling, tokens/s summed over `n_seqs` sequences: `n_seqs ÷ t_step`.
    pub fn tps(&self, n_seqs: u64) -> f64 {
        n_seqs as f64 / self.total_s()
    }
}

/// Layer split: `Σ_i bytes_i ÷ bw_i + (k − 1) × hand_over_s`, `k` the cards that
/// hold bytes (a card without layers is not visited).
pub fn layer_split_step(cards: &[CardPart], hand_over_s: f64) -> StepTime {
    let used: Vec<&CardPart> = cards.iter().filter(|c| c.bytes.0 > 0).collect();
    StepTime {
        memory_s: used.iter().map(|c| c.read_s()).sum(),
        link_s: used.len().saturating_sub(1) as f64 * hand_over_s,
    }
}

/// Row split: `max_i bytes_i ÷ bw_i + n_exchanges × exchange_s`; no exchange when a
/// single card holds every byte.
pub fn row_split_step(cards: &[CardPart], n_exchanges: u64, exchange_s: f64) -> StepTime {
    let used = cards.iter().filter(|c| c.bytes.0 > 0).count();
    StepTime {
        memory_s: cards.iter().map(|c| c.read_s()).fold(0.0, f64::max),
        link_s: if used > 1 {
            n_exchanges as f64 * exchange_s
        } else {
            0.0
        },
    }
}

/// The card of each layer under layer split, llama.cpp's rule with every layer
/// offloaded: entry `il` (0 ≤ il ≤ n_layer; `n_layer` is the output head) is the
/// first card whose cumulative split point exceeds `il ÷ (n_layer + 1)`, computed in
/// f32 as llama.cpp does.
///
/// Example: 48 layers, split 1,1 (points 0.5, 1.0): layers 0–24 on card 0 (24 ÷ 49 =
/// 0.49 < 0.5), layers 25–47 and the head on card 1.
pub fn layer_cards(n_layer: u32, fractions: &[f64]) -> Vec<usize> {
    let n = fractions.len().max(1);
    let sum: f32 = fractions.iter().map(|&f| f as f32).sum();
    let mut acc = 0.0f32;
    let points: Vec<f32> = fractions
        .iter()
        .map(|&f| {
            acc += f as f32;
            acc / sum
        })
        .collect();
    let act = n_layer as f32 + 1.0;
    (0..=n_layer)
        .map(|il| {
            let x = il as f32 / act;
            points
                .iter()
                .position(|&p| p > x)
                .unwrap_or(n - 1)
                .min(n - 1)
        })
        .collect()
}

/// Bytes of the output head one decode step reads (the token embedding read whole
/// when tied, else `output.weight`).
fn head_bytes(facts: &ModelFacts) -> u64 {
    let class = if facts.tied_embeddings {
        TensorClass::TokenEmbedding
    } else {
        TensorClass::OutputHead
    };
    facts.classes.get(&class).map_or(0, |c| c.bytes.0)
}

/// The token embedding row the CPU gathers per token (0 when tied: the head reads
/// the whole matrix on a card, counted there).
fn embedding_row_bytes(facts: &ModelFacts) -> u64 {
    if facts.tied_embeddings {
        0
    } else {
        facts.token_embd_row_bytes.0
    }
}

/// Per-card bytes of a layer-split decode step: each layer's weights
/// (`(streamed − head − embedding row) ÷ n_layer`, the layers taken as equal) and its
/// share `kv ÷ n_layer` of the KV bytes read, on the layer's card ([`layer_cards`]);
/// the head on its card.
pub fn layer_split_bytes(facts: &ModelFacts, kv: Bytes, fractions: &[f64]) -> Vec<Bytes> {
    let n_layer = facts.n_layer.max(1);
    let head = head_bytes(facts);
    let layers = facts
        .streamed_bytes
        .0
        .saturating_sub(head)
        .saturating_sub(embedding_row_bytes(facts));
    let per_layer = (layers as f64 + kv.0 as f64) / n_layer as f64;
    let cards = layer_cards(n_layer, fractions);
    let mut out = vec![0.0f64; fractions.len().max(1)];
    for (il, &c) in cards.iter().enumerate() {
        out[c] += if il == n_layer as usize {
            head as f64
        } else {
            per_layer
        };
    }
    out.iter().map(|&b| Bytes(b.round() as u64)).collect()
}

/// Per-card bytes of a row-split decode step: card i reads fraction `f_i` of the
/// split weights (everything streamed but the norms and the CPU's embedding row); the
/// main GPU (card 0) also reads the norms and the KV bytes.
pub fn row_split_bytes(facts: &ModelFacts, kv: Bytes, fractions: &[f64]) -> Vec<Bytes> {
    let norms = facts
        .classes
        .get(&TensorClass::Norm)
        .map_or(0, |c| c.bytes.0);
    let split = facts
        .streamed_bytes
        .0
        .saturating_sub(norms)
        .saturating_sub(embedding_row_bytes(facts));
    fractions
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let main = if i == 0 { norms + kv.0 } else { 0 };
            Bytes((split as f64 * f).round() as u64 + main)
        })
        .collect()
}

/// What a multi-GPU decode ceiling needs besides the model: the measured parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiGpuParts {
    /// Each card's STREAM bandwidth, in device order (measured).
    pub cards: Vec<Gbps>,
    /// The peer copy between the cards (measured); `None`: not measured, and every
    /// ceiling that moves data between cards is `None`.
    pub link: Option<PeerLink>,
    /// Exchanges of partial results per layer under row split (1: the formula's
    /// one exchange per layer).
    pub exchanges_per_layer: u32,
}

/// A multi-GPU decode ceiling and its parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiGpuCeiling {
    /// The split mode.
    pub mode: SplitMode,
    /// Each card's share of the model (normalised tensor split).
    pub fractions: Vec<f64>,
    /// Bytes each card reads per step.
    pub card_bytes: Vec<Bytes>,
    /// Bytes of one message between cards (the hidden states of the batch).
    pub message_bytes: u64,
    /// Messages per step (card boundaries, or layers × exchanges).
    pub messages: u64,
    /// The step's time.
    pub step: StepTime,
    /// Decode ceiling, tokens/s summed over the sequences.
    pub ceiling_tps: f64,
}

/// The decode ceiling of `facts` at depth `depth` with `n_seqs` sequences (weights
/// read once per step, each sequence's KV) under `mode` and `split` over the measured
/// `parts`. `None` mode puts everything on card 0 (its bandwidth alone).
///
/// # Errors
/// [`SplitError::Inputs`] for no card, a tensor split naming more cards than given,
/// a bandwidth that is not positive, or a split over several cards without a
/// measured peer link.
pub fn decode_ceiling(
    facts: &ModelFacts,
    depth: u64,
    n_seqs: u64,
    cache: CacheType,
    mode: SplitMode,
    split: &TensorSplit,
    parts: &MultiGpuParts,
) -> Result<MultiGpuCeiling, SplitError> {
    let bad = |m: String| Err(SplitError::Inputs(m));
    if parts.cards.is_empty() {
        return bad(
            "no card bandwidth (measure each card: memwall stream --gpu --gpu-device N)".into(),
        );
    }
    if let Some(b) = parts.cards.iter().find(|b| !(b.0.is_finite() && b.0 > 0.0)) {
        return bad(format!(
            "card bandwidth {} GB/s is not a positive rate",
            b.0
        ));
    }
    let n = match mode {
        SplitMode::None => 1,
        _ => parts.cards.len(),
    };
    if split.0.len() > n && !split.is_default() {
        return bad(format!(
            "the tensor split {} names {} cards, {n} given",
            split.llama_bench_text(),
            split.0.len()
        ));
    }
    let n_seqs = n_seqs.max(1);
    let kv = Bytes(n_seqs * facts.kv_bytes_read_at_depth(depth, cache).0);
    let fractions = split.fractions(n);
    let card_bytes = match mode {
        SplitMode::None => vec![Bytes(
            facts
                .streamed_bytes
                .0
                .saturating_sub(embedding_row_bytes(facts))
                + kv.0,
        )],
        SplitMode::Layer => layer_split_bytes(facts, kv, &fractions),
        SplitMode::Row => row_split_bytes(facts, kv, &fractions),
    };
    let cards: Vec<CardPart> = card_bytes
        .iter()
        .zip(&parts.cards)
        .map(|(&bytes, &bandwidth)| CardPart { bytes, bandwidth })
        .collect();
    let used = cards.iter().filter(|c| c.bytes.0 > 0).count();
    let message_bytes = n_seqs * u64::from(facts.n_embd) * ACTIVATION_BYTES;
    let msg_s = match (parts.link, used > 1) {
        (_, false) => 0.0,
        (Some(l), true) => l.message_s(message_bytes),
        (None, true) => {
            return bad(
                "no peer-copy time between the cards (measure it: memwall stream --gpu --peer)"
                    .into(),
            );
        }
    };
    let (step, messages) = match mode {
        SplitMode::None => (layer_split_step(&cards, 0.0), 0),
        SplitMode::Layer => (
            layer_split_step(&cards, msg_s),
            used.saturating_sub(1) as u64,
        ),
        SplitMode::Row => {
            let m = if used > 1 {
                u64::from(facts.n_layer) * u64::from(parts.exchanges_per_layer)
            } else {
                0
            };
            (row_split_step(&cards, m, msg_s), m)
        }
    };
    Ok(MultiGpuCeiling {
        mode,
        fractions,
        card_bytes,
        message_bytes,
        messages,
        step,
        ceiling_tps: step.tps(n_seqs),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Relative tolerance for hand-computed values (rounded to 4–6 digits by hand).
    const REL: f64 = 1e-5;

    fn close(a: f64, b: f64) -> bool {
        ((a - b) / b).abs() < REL
    }

    fn card(gb: f64, gbps: f64) -> CardPart {
        CardPart {
            bytes: Bytes((gb * 1e9) as u64),
            bandwidth: Gbps(gbps),
        }
    }

    /// The module doc's worked example, by hand:
    /// t_msg = 10 µs + 20,480 B ÷ 40e9 B/s = 10.512 µs.
    /// layer: 15.0e9/3000e9 + 15.0e9/3300e9 + 10.512e-6 = 0.005 + 0.00454545… + 0.000010512
    ///        = 0.0095559665 s → 104.64666 tok/s.
    /// row:   max(0.005, 0.0045454) + 48 × 10.512e-6 = 0.005504576 s → 181.66703 tok/s.
    #[test]
    fn worked_example_two_cards_layer_vs_row() {
        let link = PeerLink {
            latency_s: 10e-6,
            bandwidth: Gbps(40.0),
        };
        let msg = link.message_s(5120 * 4);
        assert!(close(msg, 10.512e-6), "{msg}");
        let cards = [card(15.0, 3000.0), card(15.0, 3300.0)];
        let layer = layer_split_step(&cards, msg);
        assert!(close(layer.total_s(), 0.009_555_966_5), "{layer:?}");
        assert!(close(layer.tps(1), 104.646_66), "{}", layer.tps(1));
        let row = row_split_step(&cards, 48, msg);
        assert!(close(row.memory_s, 0.005), "{row:?}");
        assert!(close(row.link_s, 48.0 * 10.512e-6), "{row:?}");
        assert!(close(row.tps(1), 181.667_03), "{}", row.tps(1));
        // One card with all 30 GB at 3000 GB/s: 10 ms → 100 tok/s; layer split is
        // barely faster (the second card is the faster one), row split nearly twice.
        let one = layer_split_step(&[card(30.0, 3000.0)], msg);
        assert!(close(one.tps(1), 100.0) && one.link_s == 0.0, "{one:?}");
    }

    #[test]
    fn equal_cards_layer_split_equals_one_card_plus_hand_overs() {
        // Closed form: k equal cards of bandwidth B sharing W bytes: Σ (W/k)/B = W/B,
        // plus (k − 1) hand-overs. 4 cards, 40 GB at 2000 GB/s, 5 µs: 20 ms + 15 µs.
        let cards = [card(10.0, 2000.0); 4];
        let t = layer_split_step(&cards, 5e-6);
        assert!(close(t.total_s(), 0.020_015), "{t:?}");
        // Row split of the same: (W/k)/B = 5 ms plus 80 layers × 2 exchanges × 5 µs = 0.8 ms.
        let r = row_split_step(&cards, 160, 5e-6);
        assert!(close(r.total_s(), 0.0058), "{r:?}");
        // A card without bytes is not visited and costs no hand-over.
        let t2 = layer_split_step(&[card(40.0, 2000.0), card(0.0, 2000.0)], 5e-6);
        assert_eq!(t2.link_s, 0.0);
        assert!(close(t2.total_s(), 0.02));
        let r2 = row_split_step(&[card(40.0, 2000.0), card(0.0, 2000.0)], 160, 5e-6);
        assert_eq!(r2.link_s, 0.0);
    }

    #[test]
    fn layers_land_where_llama_cpp_puts_them() {
        // Hand: 48 layers + head = 49 slots; split 1,1 → points 0.5, 1.0; il ÷ 49 < 0.5
        // for il ≤ 24: 25 layers on card 0; 23 layers and the head (il = 48) on card 1.
        let c = layer_cards(48, &[0.5, 0.5]);
        assert_eq!(c.len(), 49);
        assert_eq!(c.iter().filter(|&&x| x == 0).count(), 25);
        assert_eq!(c[24], 0);
        assert_eq!(c[25], 1);
        assert_eq!(c[48], 1);
        // Split 3,1 → points 0.75, 1.0: il ÷ 49 < 0.75 for il ≤ 36: 37 on card 0.
        let c = layer_cards(48, &[0.75, 0.25]);
        assert_eq!(c.iter().filter(|&&x| x == 0).count(), 37);
        // One card: everything on it.
        assert!(layer_cards(24, &[1.0]).iter().all(|&x| x == 0));
        // A zero share gets nothing: 0,1 → points 0.0, 1.0.
        assert!(layer_cards(10, &[0.0, 1.0]).iter().all(|&x| x == 1));
    }

    #[test]
    fn split_flags_parse_and_print_as_llama_bench() {
        assert_eq!(SplitMode::parse("row").unwrap(), SplitMode::Row);
        assert_eq!(SplitMode::parse("none").unwrap().name(), "none");
        assert_eq!(SplitMode::default().name(), "layer");
        let e = SplitMode::parse("tensor").unwrap_err().to_string();
        assert!(
            e.starts_with("--split-mode \"tensor\": use none, layer or row"),
            "{e}"
        );
        // llama-bench's `-ts 3/1` prints 3.00/1.00; `1,1,0` stops at the last positive.
        assert_eq!(
            TensorSplit::parse("3,1").unwrap().llama_bench_text(),
            "3.00/1.00"
        );
        assert_eq!(
            TensorSplit::parse("3/1").unwrap(),
            TensorSplit(vec![3.0, 1.0])
        );
        assert_eq!(
            TensorSplit::parse("1,1,0").unwrap().llama_bench_text(),
            "1.00/1.00"
        );
        assert_eq!(
            TensorSplit::parse("0,0.5").unwrap().llama_bench_text(),
            "0.00/0.50"
        );
        assert_eq!(TensorSplit::default().llama_bench_text(), "0.00");
        assert_eq!(
            TensorSplit::parse("3,1").unwrap().fractions(2),
            [0.75, 0.25]
        );
        assert_eq!(TensorSplit::default().fractions(4), [0.25; 4]);
        for (bad, why) in [
            ("1,x", "\"x\" is not a number"),
            ("1,-1", "-1 is not a finite proportion"),
            ("0,0", "every proportion is 0"),
            ("1,inf", "inf is not a finite proportion"),
            ("", "\"\" is not a number"),
        ] {
            let e = TensorSplit::parse(bad).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--tensor-split {bad:?}: {why}")),
                "{e}"
            );
            assert!(e.contains("e.g. --tensor-split 1,1"), "{e}");
        }
        let seventeen = ["1"; 17].join(",");
        assert!(
            TensorSplit::parse(&seventeen)
                .unwrap_err()
                .to_string()
                .contains("at most 16 devices")
        );
    }

    #[test]
    fn split_settings_are_checked_against_each_other_and_the_devices() {
        let s = GpuSplit {
            mode: SplitMode::None,
            tensor_split: TensorSplit::parse("1,1").unwrap(),
        };
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("has no effect with --split-mode none"), "{e}");
        let s = GpuSplit {
            mode: SplitMode::Layer,
            tensor_split: TensorSplit::parse("1,1").unwrap(),
        };
        assert!(s.validate().is_ok());
        let e = s.check_devices(1).unwrap_err().to_string();
        assert!(e.contains("names 2 GPUs, llama.cpp sees 1"), "{e}");
        assert!(s.check_devices(2).is_ok());
        let row = GpuSplit {
            mode: SplitMode::Row,
            ..GpuSplit::default()
        };
        assert!(
            row.check_devices(0)
                .unwrap_err()
                .to_string()
                .contains("sees none")
        );
        assert!(GpuSplit::default().is_default() && GpuSplit::default().check_devices(0).is_ok());
    }

    /// A model the byte split can be checked on by hand: 4 layers, n_embd 64, untied.
    fn facts() -> ModelFacts {
        use crate::probe::gguf::testutil::GgufBuilder;
        // F32 tensors: each layer one 64 × 64 attn_q (16,384 B) and a 64 norm (256 B);
        // embedding 64 × 10 (2,560 B: one row 256 B), output 64 × 10 (2,560 B).
        let mut b = GgufBuilder::default()
            .kv_str("general.architecture", "llama")
            .kv_u32("llama.block_count", 4)
            .kv_u32("llama.embedding_length", 64)
            .kv_u32("llama.attention.head_count", 4)
            .tensor("token_embd.weight", &[64, 10], 0, 0)
            .tensor("output.weight", &[64, 10], 0, 2560);
        let mut off = 5120;
        for il in 0..4 {
            b = b
                .tensor(&format!("blk.{il}.attn_q.weight"), &[64, 64], 0, off)
                .tensor(&format!("blk.{il}.attn_norm.weight"), &[64], 0, off + 16384);
            off += 16384 + 256;
        }
        let bytes = b.data(off).build();
        let g = crate::probe::gguf::Gguf::parse(&bytes[..], bytes.len() as u64, "m.gguf".into())
            .unwrap();
        ModelFacts::from_gguf(&g).unwrap()
    }

    #[test]
    fn bytes_per_card_follow_the_placement_rules() {
        let f = facts();
        // Streamed: 4 × (16,384 + 256) + 2,560 (head) + 256 (embedding row) = 69,376.
        assert_eq!(f.streamed_bytes, Bytes(69_376));
        // Layer split 1,1 over 4 layers + head = 5 slots: il ÷ 5 < 0.5 for il ≤ 2 →
        // layers 0–2 on card 0 (3 × 16,640 = 49,920), layer 3 + head on card 1
        // (16,640 + 2,560 = 19,200); with 400 B of KV, 100 B more per layer.
        assert_eq!(
            layer_split_bytes(&f, Bytes(0), &[0.5, 0.5]),
            [Bytes(49_920), Bytes(19_200)]
        );
        assert_eq!(
            layer_split_bytes(&f, Bytes(400), &[0.5, 0.5]),
            [Bytes(50_220), Bytes(19_300)]
        );
        // Row split 3,1: split weights 69,376 − 1,024 (norms) − 256 (row) = 68,096;
        // card 0: 0.75 × 68,096 + 1,024 + KV 400 = 51,072 + 1,424 = 52,496; card 1: 17,024.
        assert_eq!(
            row_split_bytes(&f, Bytes(400), &[0.75, 0.25]),
            [Bytes(52_496), Bytes(17_024)]
        );
    }

    #[test]
    fn the_ceiling_needs_every_measured_part() {
        let f = facts();
        let parts = MultiGpuParts {
            cards: vec![Gbps(1.0), Gbps(1.0)],
            link: None,
            exchanges_per_layer: 1,
        };
        let split = TensorSplit::default();
        let e = decode_ceiling(&f, 0, 1, CacheType::F16, SplitMode::Row, &split, &parts)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no peer-copy time"), "{e}");
        // One card (split none) needs no link: 69,120 B (no CPU row) at 1 GB/s.
        let one =
            decode_ceiling(&f, 0, 1, CacheType::F16, SplitMode::None, &split, &parts).unwrap();
        assert_eq!(one.card_bytes, [Bytes(69_120)]);
        assert!(close(one.ceiling_tps, 1e9 / 69_120.0));
        let parts = MultiGpuParts {
            link: Some(PeerLink {
                latency_s: 1e-6,
                bandwidth: Gbps(1.0),
            }),
            ..parts
        };
        // Row split, equal shares: card 0 = 34,048 + 1,024 = 35,072 B; message 64 × 4 =
        // 256 B → 1 µs + 0.256 µs; 4 layers × 1 exchange. t = 35.072 µs + 5.024 µs.
        let r = decode_ceiling(&f, 0, 1, CacheType::F16, SplitMode::Row, &split, &parts).unwrap();
        assert_eq!(r.card_bytes, [Bytes(35_072), Bytes(34_048)]);
        assert_eq!((r.message_bytes, r.messages), (256, 4));
        assert!(close(r.step.total_s(), 40.096e-6), "{:?}", r.step);
        // Layer split: 49,920 + 19,200 B at 1 GB/s + one hand-over of 1.256 µs.
        let l = decode_ceiling(&f, 0, 1, CacheType::F16, SplitMode::Layer, &split, &parts).unwrap();
        assert_eq!(l.messages, 1);
        assert!(close(l.step.total_s(), 69.12e-6 + 1.256e-6), "{:?}", l.step);
        // A split naming three cards over two is refused; so is a zero bandwidth.
        let e = decode_ceiling(
            &f,
            0,
            1,
            CacheType::F16,
            SplitMode::Layer,
            &TensorSplit(vec![1.0, 1.0, 1.0]),
            &parts,
        )
        .unwrap_err();
        assert!(e.to_string().contains("names 3 cards, 2 given"), "{e}");
        let zero = MultiGpuParts {
            cards: vec![Gbps(0.0)],
            ..parts
        };
        assert!(decode_ceiling(&f, 0, 1, CacheType::F16, SplitMode::None, &split, &zero).is_err());
    }
}
