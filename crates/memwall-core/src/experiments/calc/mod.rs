//! The ceiling calculator: what the memory wall allows for a model on a device,
//! before anything runs. Pure arithmetic over [`ModelFacts`] (from a GGUF file or a
//! [`crate::probe::shape::ModelShape`]) or a bare parameter count, and a [`Roof`] (a
//! catalogue device, this machine's stored measurements, or numbers given).
//!
//! Formulas (all in [`crate::roofline`]):
//! - decode at batch 1: `bandwidth ÷ (streamed weight bytes + KV bytes read at depth d)`;
//! - aggregate decode at batch b: `b × bandwidth ÷ (W + b × kv(d))` (the weights are read
//!   once per step for the whole batch);
//! - prefill: `peak FLOP/s ÷ FLOPs per prompt token` (compute roof only);
//! - intensity: decode FLOPs per byte read, against the ridge `peak ÷ bandwidth`;
//! - fits: weights + KV(d) × b + headroom (1 GiB + 10 % of weights) ≤ memory.

pub mod text;

use crate::probe::model::{CacheType, ModelFacts};
use crate::roofline;
use crate::units::{Bytes, Gbps, Gflops};
use serde::{Deserialize, Serialize};

/// Where the weight bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightBasis {
    /// Tensor bytes of a real GGUF file (exact).
    File,
    /// A shape under a quantization recipe (an estimate; a real file beats it).
    Recipe,
    /// Parameters × bits ÷ 8, weights only (no scales, no KV unless a shape is given).
    Params,
}

/// The model side of a calculation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CalcModel {
    /// Label (`Qwen2.5-7B`, file name).
    pub label: String,
    /// Precision label (`Q4_K_M`, `8-bit`).
    pub precision: String,
    /// Where the bytes come from.
    pub basis: WeightBasis,
    /// Resident weight bytes.
    pub weight_bytes: Bytes,
    /// Weight bytes one decode step reads at batch 1 (active experts only; the token
    /// embedding is a one-row gather unless tied).
    pub streamed_bytes: Bytes,
    /// Parameters multiplied per token (2 FLOPs each).
    pub active_matmul_params: u64,
    /// Total parameters.
    pub n_params: u64,
    /// Shape facts for the KV cache and attention FLOPs (absent for bare parameter counts).
    pub facts: Option<ModelFacts>,
}

impl CalcModel {
    /// From facts (a file, or a shape under a recipe).
    pub fn from_facts(f: ModelFacts, basis: WeightBasis, label: &str) -> CalcModel {
        CalcModel {
            label: label.to_string(),
            precision: f.quant.clone(),
            basis,
            weight_bytes: f.tensor_bytes,
            streamed_bytes: f.streamed_bytes,
            active_matmul_params: f.active_matmul_params,
            n_params: f.n_params,
            facts: Some(f),
        }
    }

    /// From a bare parameter count: `params × bits ÷ 8` resident, `active × bits ÷ 8`
    /// streamed (weights only, no KV). Example: 27 B at 8 bits = 27.0 GB.
    pub fn from_params(total: f64, active: f64, bits: f64) -> CalcModel {
        CalcModel {
            label: format!("{:.1} B params ({:.1} B active)", total / 1e9, active / 1e9),
            precision: format!("{bits} bits/weight"),
            basis: WeightBasis::Params,
            weight_bytes: Bytes((total * bits / 8.0).round() as u64),
            streamed_bytes: Bytes((active * bits / 8.0).round() as u64),
            active_matmul_params: active as u64,
            n_params: total as u64,
            facts: None,
        }
    }

    /// KV bytes per token of context (0 without a shape).
    pub fn kv_bytes_per_token(&self, cache: CacheType) -> Bytes {
        self.facts
            .as_ref()
            .map_or(Bytes(0), |f| f.kv_bytes_per_token(cache))
    }

    /// KV bytes one sequence reads (and stores) at depth `d` (0 without a shape).
    pub fn kv_bytes_at(&self, depth: u64, cache: CacheType) -> Bytes {
        self.facts
            .as_ref()
            .map_or(Bytes(0), |f| f.kv_bytes_read_at_depth(depth, cache))
    }

    fn flops_per_token(&self, context: u64) -> f64 {
        2.0 * self.active_matmul_params as f64
            + self
                .facts
                .as_ref()
                .map_or(0.0, |f| f.attention_flops_per_token(context))
    }

    fn prefill_flops_per_token(&self, n_prompt: u64, depth: u64) -> f64 {
        match &self.facts {
            Some(f) => roofline::prefill_flops_per_token(f, n_prompt, depth),
            None => 2.0 * self.active_matmul_params as f64,
        }
    }
}

/// One roof figure and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sourced<T> {
    /// The figure, in the unit of `T`.
    pub value: T,
    /// `spec: <url>`, `measured: STREAM triad #12 …`, `given`.
    pub source: String,
}

/// The device side: bandwidth, compute peak and memory sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Roof {
    /// Device name as the report shows it.
    pub label: String,
    /// Memory bandwidth used for decode.
    pub bandwidth: Option<Sourced<Gbps>>,
    /// Compute peak used for prefill.
    pub peak: Option<Sourced<Gflops>>,
    /// Memory sizes to check the fit against (configurations sold, or this machine's total).
    pub memory: Vec<Bytes>,
    /// The per-token floor fitted from this device's stored decode rows for the
    /// model's format, when the store holds one (catalogue and given roofs: None).
    #[serde(default)]
    pub floor: Option<Sourced<crate::experiments::evidence::floor::FloorFit>>,
}

/// What to calculate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CalcParams {
    /// Context depth per sequence.
    pub depth: u64,
    /// Sequences decoded together.
    pub batch: u64,
    /// KV cache element type.
    pub cache: CacheType,
    /// Prompt length of the prefill ceiling.
    pub n_prompt: u64,
}

impl Default for CalcParams {
    fn default() -> Self {
        CalcParams {
            depth: 0,
            batch: 1,
            cache: CacheType::F16,
            n_prompt: 512,
        }
    }
}

/// Fit against one memory size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// The memory size.
    pub memory: Bytes,
    /// Weights + KV + headroom.
    pub needed: Bytes,
    /// `needed ≤ memory`.
    pub fits: bool,
    /// `memory − needed` (negative: short by).
    pub spare_bytes: i64,
}

/// The calculator's answer. Every rate is a ceiling (an upper bound), not a forecast
/// of what an engine achieves.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CalcReport {
    /// The model's sizes the ceilings divide by.
    pub model: CalcModel,
    /// The device's bandwidth and compute peak.
    pub roof: Roof,
    /// Context, batch and cache settings the report was computed for.
    pub params: CalcParams,
    /// Resident weight bytes.
    pub weight_bytes: Bytes,
    /// Bits per weight of the whole file (weights ÷ params × 8).
    pub bits_per_weight: f64,
    /// KV cache bytes per token of context.
    pub kv_bytes_per_token: Bytes,
    /// KV cache for `batch` sequences at `depth`.
    pub kv_bytes: Bytes,
    /// Headroom kept free (1 GiB + 10 % of weights).
    pub headroom_bytes: Bytes,
    /// Weights + KV.
    pub resident_bytes: Bytes,
    /// One entry per memory size.
    pub fits: Vec<Fit>,
    /// Bytes one batch-1 step reads at `depth`.
    pub step_bytes_b1: Bytes,
    /// Decode ceiling at batch 1 and `depth`, tok/s.
    pub decode_b1_tps: Option<f64>,
    /// Decode ceiling at batch 1, depth 0, tok/s.
    pub decode_b1_depth0_tps: Option<f64>,
    /// Batch-1 decode at `depth` as the fitted per-token floor predicts it,
    /// `1 ÷ (t0 + bytes ÷ BW_eff)`, tok/s (None without a stored fit).
    pub decode_b1_floor_tps: Option<f64>,
    /// Aggregate decode ceiling at `batch` sequences, tok/s summed over the batch.
    pub decode_aggregate_tps: Option<f64>,
    /// FLOPs per prompt token of a prefill of `n_prompt`.
    pub prefill_flops_per_token: f64,
    /// Prefill (compute) ceiling, tok/s.
    pub prefill_tps: Option<f64>,
    /// Decode arithmetic intensity at `batch`, FLOP/byte.
    pub decode_intensity: f64,
    /// Ridge point, FLOP/byte.
    pub ridge: Option<f64>,
}

/// Runs the calculator.
pub fn calc(model: &CalcModel, roof: &Roof, p: &CalcParams) -> CalcReport {
    let batch = p.batch.max(1);
    let kv_seq = model.kv_bytes_at(p.depth, p.cache);
    let kv = Bytes(kv_seq.0 * batch);
    let headroom = roofline::default_headroom(model.weight_bytes);
    let resident = model.weight_bytes + kv;
    let needed = resident + headroom;
    let fits = roof
        .memory
        .iter()
        .map(|&m| Fit {
            memory: m,
            needed,
            fits: needed <= m,
            spare_bytes: m.0 as i64 - needed.0 as i64,
        })
        .collect();
    let step_b1 = model.streamed_bytes + kv_seq;
    let step_b = Bytes(model.streamed_bytes.0 + kv.0);
    let bw = roof.bandwidth.as_ref().map(|b| b.value);
    let pk = roof.peak.as_ref().map(|b| b.value);
    let pf = model.prefill_flops_per_token(p.n_prompt, p.depth);
    let flops_b = batch as f64 * model.flops_per_token(p.depth.max(1));
    CalcReport {
        model: model.clone(),
        roof: roof.clone(),
        params: *p,
        weight_bytes: model.weight_bytes,
        bits_per_weight: if model.n_params == 0 {
            f64::NAN
        } else {
            model.weight_bytes.0 as f64 * 8.0 / model.n_params as f64
        },
        kv_bytes_per_token: model.kv_bytes_per_token(p.cache),
        kv_bytes: kv,
        headroom_bytes: headroom,
        resident_bytes: resident,
        fits,
        step_bytes_b1: step_b1,
        decode_b1_tps: bw.map(|b| roofline::decode_ceiling_tps(b, step_b1)),
        decode_b1_depth0_tps: bw.map(|b| roofline::decode_ceiling_tps(b, model.streamed_bytes)),
        decode_b1_floor_tps: roof
            .floor
            .as_ref()
            .map(|f| f.value.predict_tps(step_b1.0 as f64)),
        decode_aggregate_tps: bw.map(|b| batch as f64 * roofline::decode_ceiling_tps(b, step_b)),
        prefill_flops_per_token: pf,
        prefill_tps: pk.map(|k| roofline::prefill_ceiling_tps(k, pf)),
        decode_intensity: flops_b / step_b.0 as f64,
        ridge: match (pk, bw) {
            (Some(k), Some(b)) => Some(roofline::ridge_point(k, b)),
            _ => None,
        },
    }
}

/// One split mode's decode ceiling over several GPUs, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiGpuRow {
    /// The split mode (`none`: card 0 alone).
    pub mode: roofline::multi_gpu::SplitMode,
    /// The ceiling and its parts (`None`: a part is missing).
    pub ceiling: Option<roofline::multi_gpu::MultiGpuCeiling>,
    /// Why `ceiling` is `None`.
    pub missing_reason: Option<String>,
}

/// The calculator over several GPUs: the decode ceiling of each split mode from the
/// cards' bandwidths and the link between them ([`roofline::multi_gpu`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiGpuCalc {
    /// Each card's bandwidth and where it comes from, in device order.
    pub cards: Vec<Sourced<Gbps>>,
    /// The peer link (small-copy latency, bulk bandwidth) and its source; `None`: not
    /// measured or given.
    pub link: Option<Sourced<roofline::multi_gpu::PeerLink>>,
    /// The tensor split (empty: equal shares).
    pub tensor_split: roofline::multi_gpu::TensorSplit,
    /// Exchanges per layer under row split.
    pub exchanges_per_layer: u32,
    /// `none`, `layer`, `row`.
    pub rows: Vec<MultiGpuRow>,
}

/// Decode ceilings at `p`'s depth and batch for `none` (card 0), `layer` and `row`
/// over `cards` joined by `link`. A model without a shape (bare parameter count) has
/// no per-layer bytes: every row says so.
pub fn calc_multi_gpu(
    model: &CalcModel,
    p: &CalcParams,
    cards: Vec<Sourced<Gbps>>,
    link: Option<Sourced<roofline::multi_gpu::PeerLink>>,
    tensor_split: roofline::multi_gpu::TensorSplit,
    exchanges_per_layer: u32,
) -> MultiGpuCalc {
    use roofline::multi_gpu::{MultiGpuParts, SplitMode, decode_ceiling};
    let parts = MultiGpuParts {
        cards: cards.iter().map(|c| c.value).collect(),
        link: link.as_ref().map(|l| l.value),
        exchanges_per_layer,
    };
    let rows = [SplitMode::None, SplitMode::Layer, SplitMode::Row]
        .into_iter()
        .map(|mode| {
            let got = match &model.facts {
                None => Err(
                    "needs the model's layers: give --model FILE, --preset NAME or a shape".into(),
                ),
                Some(f) => {
                    let split = if mode == SplitMode::None {
                        roofline::multi_gpu::TensorSplit::default()
                    } else {
                        tensor_split.clone()
                    };
                    decode_ceiling(f, p.depth, p.batch.max(1), p.cache, mode, &split, &parts)
                        .map_err(|e| e.to_string())
                }
            };
            match got {
                Ok(c) => MultiGpuRow {
                    mode,
                    ceiling: Some(c),
                    missing_reason: None,
                },
                Err(why) => MultiGpuRow {
                    mode,
                    ceiling: None,
                    missing_reason: Some(why),
                },
            }
        })
        .collect();
    MultiGpuCalc {
        cards,
        link,
        tensor_split,
        exchanges_per_layer,
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::shape::{Recipe, preset};
    use crate::units::GIB;

    /// Relative tolerance for "≈" figures quoted to 2–3 significant digits in
    /// public write-ups (model cards, vendor pages, blog posts).
    const QUOTED: f64 = 0.01;

    fn roof(gbps: f64) -> Roof {
        Roof {
            label: "test".into(),
            bandwidth: Some(Sourced {
                value: Gbps(gbps),
                source: "given".into(),
            }),
            peak: None,
            memory: vec![Bytes(16 << 30)],
            floor: None,
        }
    }

    fn close(got: f64, want: f64) -> bool {
        ((got - want) / want).abs() < QUOTED
    }

    #[test]
    fn dense_27b_at_8_bits_on_273_gbps_is_about_10_tps() {
        let m = CalcModel::from_params(27e9, 27e9, 8.0);
        let r = calc(&m, &roof(273.0), &CalcParams::default());
        // Hand: 273e9 / 27e9 = 10.11.
        let t = r.decode_b1_tps.unwrap();
        assert!(close(t, 273.0 / 27.0), "{t}");
        assert!((t - 10.0).abs() < 0.2, "{t}");
    }

    #[test]
    fn three_b_active_at_4_bits_is_1_5_gb_and_about_180_tps() {
        let m = CalcModel::from_params(30e9, 3e9, 4.0);
        assert_eq!(m.streamed_bytes, Bytes(1_500_000_000));
        let r = calc(&m, &roof(273.0), &CalcParams::default());
        let t = r.decode_b1_tps.unwrap();
        // Hand: 273 / 1.5 = 182.
        assert!(close(t, 182.0), "{t}");
    }

    #[test]
    fn twenty_seven_b_weights_in_gib() {
        // 27e9 × 4 / 8 = 13.5e9 B = 12.57 GiB; × 8 / 8 = 27e9 B = 25.15 GiB.
        let w4 = CalcModel::from_params(27e9, 27e9, 4.0).weight_bytes;
        let w8 = CalcModel::from_params(27e9, 27e9, 8.0).weight_bytes;
        assert!((w4.gib() - 12.6).abs() < 0.05, "{}", w4.gib());
        assert!((w8.gib() - 25.0).abs() < 0.2, "{}", w8.gib());
        assert!(close(w4.gib(), 13.5e9 / GIB));
    }

    #[test]
    fn decode_of_a_5_03_gb_model_at_120_gbps() {
        let mut m = CalcModel::from_params(8.19e9, 8.19e9, 4.9);
        m.streamed_bytes = Bytes(5_030_000_000);
        let t = calc(&m, &roof(120.0), &CalcParams::default())
            .decode_b1_tps
            .unwrap();
        assert!(close(t, 23.9), "{t}");
    }

    #[test]
    fn qwen3_8b_kv_at_8192_costs_a_fifth_of_decode() {
        // Weights as the published Q4_K_M file's 5.03 GB; KV from the preset's shape.
        let f = preset("qwen3-8b")
            .unwrap()
            .shape
            .facts(&Recipe::parse("Q4_K_M").unwrap(), "Qwen3-8B")
            .unwrap();
        let mut m = CalcModel::from_facts(f, WeightBasis::Recipe, "Qwen3-8B");
        m.streamed_bytes = Bytes(5_030_000_000);
        let p = CalcParams {
            depth: 8192,
            ..CalcParams::default()
        };
        let r = calc(&m, &roof(120.0), &p);
        // 8192 × 147,456 = 1,207,959,552 B ≈ 1.21 GB (exact, by hand).
        assert_eq!(r.kv_bytes, Bytes(8192 * 147_456));
        let frac = r.decode_b1_tps.unwrap() / r.decode_b1_depth0_tps.unwrap();
        // Hand: 5.03 / (5.03 + 1.208) = 0.8064.
        assert!(close(frac, 0.806), "{frac}");
    }

    #[test]
    fn batch_shares_the_weight_read_and_intensity_grows() {
        let f = preset("qwen2.5-7b")
            .unwrap()
            .shape
            .facts(&Recipe::parse("Q4_K_M").unwrap(), "7B")
            .unwrap();
        let m = CalcModel::from_facts(f, WeightBasis::Recipe, "7B");
        let mut rf = roof(100.0);
        rf.peak = Some(Sourced {
            value: Gflops(10_000.0),
            source: "given".into(),
        });
        let p1 = calc(&m, &rf, &CalcParams::default());
        let p8 = calc(
            &m,
            &rf,
            &CalcParams {
                batch: 8,
                ..CalcParams::default()
            },
        );
        // At depth 0 there is no KV: 8 sequences share one weight read → 8×.
        let ratio = p8.decode_aggregate_tps.unwrap() / p1.decode_aggregate_tps.unwrap();
        assert!((ratio - 8.0).abs() < 1e-9, "{ratio}");
        assert!((p8.decode_intensity / p1.decode_intensity - 8.0).abs() < 1e-6);
        // Ridge = 10 TFLOP/s ÷ 100 GB/s = 100 FLOP/B; batch-1 decode sits far left of it.
        assert_eq!(p1.ridge, Some(100.0));
        // Batch-1 intensity at depth 0 = 2 × active params ÷ streamed bytes (≈ 3.2 for
        // ≈ 4.9-bit weights: 2 × 8 ÷ 4.9), far left of the ridge.
        let hand = 2.0 * m.active_matmul_params as f64 / m.streamed_bytes.0 as f64;
        assert!(
            (p1.decode_intensity - hand).abs() / hand < 1e-3,
            "{}",
            p1.decode_intensity
        );
        assert!(p1.decode_intensity < p1.ridge.unwrap() / 10.0);
    }

    #[test]
    fn a_stored_floor_predicts_decode_below_the_ceiling() {
        use crate::experiments::evidence::floor::{self, FloorPoint, FloorScope};
        // Points on t = 1.2 ms + bytes ÷ 3500 GB/s.
        let pts = [1e9, 3e9, 14e9, 28e9]
            .iter()
            .map(|&b| FloorPoint {
                model_type: "m".into(),
                bytes_per_token: b,
                seconds_per_token: 1.2e-3 + b / 3500e9,
                row_ids: vec![1],
                stream_gbps: 4400.0,
            })
            .collect();
        let scope = FloorScope {
            hostname: "h".into(),
            quant: "F16".into(),
            placement: "GPU x".into(),
        };
        let mut rf = roof(4400.0);
        rf.floor = Some(Sourced {
            value: floor::fit(scope, pts).unwrap(),
            source: "fitted".into(),
        });
        let m = CalcModel::from_params(7e9, 7e9, 16.0);
        let r = calc(&m, &rf, &CalcParams::default());
        // Hand: 14 GB → 1.2 ms + 4.0 ms = 5.2 ms → 192.31 tok/s; ceiling 4400 ÷ 14 = 314.3.
        let got = r.decode_b1_floor_tps.unwrap();
        assert!((got - 1.0 / 5.2e-3).abs() < 1e-6, "{got}");
        assert!(got < r.decode_b1_tps.unwrap());
        assert_eq!(
            calc(&m, &roof(4400.0), &CalcParams::default()).decode_b1_floor_tps,
            None
        );
    }

    #[test]
    fn two_cards_by_layer_and_by_rows() {
        use crate::experiments::calc::MultiGpuRow;
        use crate::roofline::multi_gpu::{PeerLink, SplitMode, TensorSplit};
        let f = preset("qwen2.5-14b")
            .unwrap()
            .shape
            .facts(&Recipe::parse("F16").unwrap(), "14B")
            .unwrap();
        assert_eq!((f.n_layer, f.n_embd, f.tied_embeddings), (48, 5120, false));
        let m = CalcModel::from_facts(f.clone(), WeightBasis::Recipe, "14B");
        fn given<T>(value: T) -> Sourced<T> {
            Sourced {
                value,
                source: "given".into(),
            }
        }
        let cards = vec![given(Gbps(3000.0)), given(Gbps(3000.0))];
        let link = PeerLink {
            latency_s: 10e-6,
            bandwidth: Gbps(40.0),
        };
        let r = calc_multi_gpu(
            &m,
            &CalcParams::default(),
            cards.clone(),
            Some(given(link)),
            TensorSplit::default(),
            1,
        );
        let ceiling = |r: &MultiGpuRow| r.ceiling.as_ref().unwrap().ceiling_tps;
        // Closed forms at depth 0 on two equal cards of B = 3000 GB/s, W the bytes the
        // cards read (streamed less the CPU's embedding row), t = 10 µs + 5120 × 4 B ÷ 40 GB/s:
        // none = B ÷ W; layer = 1 ÷ (W ÷ B + t) (Σ of the halves is W ÷ B, one hand-over);
        // row = 1 ÷ (max share ÷ B + 48 layers × t).
        let w = (f.streamed_bytes.0 - f.token_embd_row_bytes.0) as f64;
        let t = 10e-6 + 5120.0 * 4.0 / 40e9;
        assert_eq!(r.rows[0].mode, SplitMode::None);
        assert!((ceiling(&r.rows[0]) - 3000e9 / w).abs() < 1e-9 * 3000e9 / w);
        let layer = 1.0 / (w / 3000e9 + t);
        assert!(
            (ceiling(&r.rows[1]) - layer).abs() < 1e-6 * layer,
            "{:?}",
            r.rows[1]
        );
        let c = r.rows[2].ceiling.as_ref().unwrap();
        let max_share = c.card_bytes.iter().map(|b| b.0).max().unwrap() as f64;
        let row = 1.0 / (max_share / 3000e9 + 48.0 * t);
        assert!((c.ceiling_tps - row).abs() < 1e-9 * row, "{c:?}");
        // Rows beat layers by nearly the card count when the exchanges are small.
        assert!(c.ceiling_tps > 1.7 * ceiling(&r.rows[1]));
        // Without a measured link, only `none` has a ceiling, and the others say why.
        let r = calc_multi_gpu(
            &m,
            &CalcParams::default(),
            cards,
            None,
            TensorSplit::default(),
            1,
        );
        assert!(r.rows[0].ceiling.is_some());
        for row in &r.rows[1..] {
            assert!(
                row.missing_reason
                    .as_ref()
                    .unwrap()
                    .contains("no peer-copy time")
            );
        }
        // A bare parameter count has no layers to place.
        let bare = CalcModel::from_params(14e9, 14e9, 16.0);
        let r = calc_multi_gpu(
            &bare,
            &CalcParams::default(),
            vec![],
            None,
            TensorSplit::default(),
            1,
        );
        assert!(r.rows.iter().all(|x| {
            x.missing_reason
                .as_ref()
                .unwrap()
                .contains("needs the model's layers")
        }));
    }

    #[test]
    fn fp16_7b_does_not_fit_beside_an_os_in_16_gib() {
        // The capacity finding: Qwen2.5-7B at F16 = 15.2 GB of weights.
        let f = preset("qwen2.5-7b")
            .unwrap()
            .shape
            .facts(&Recipe::parse("F16").unwrap(), "7B")
            .unwrap();
        assert!(
            (f.tensor_bytes.gb() - 15.2).abs() < 0.1,
            "{}",
            f.tensor_bytes
        );
        let m = CalcModel::from_facts(f, WeightBasis::Recipe, "7B");
        let r = calc(&m, &roof(100.0), &CalcParams::default());
        assert!(!r.fits[0].fits);
    }
}
