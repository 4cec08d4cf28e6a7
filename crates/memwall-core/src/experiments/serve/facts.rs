//! What `memwall serve` publishes about itself at `GET /memwall/facts`: the engine and
//! where its weights live, the model file's bytes per decode step at the server's
//! own KV-cache type, and the roof (the STREAM triad of the memory the weights
//! stream from) the server runs under. A load test divides its implied bandwidth by
//! this roof, not by the STREAM of whatever machine runs the client.

use crate::probe::model::{CacheType, ModelFacts};
use serde::{Deserialize, Serialize};

/// The path of the facts endpoint.
pub const FACTS_PATH: &str = "/memwall/facts";

/// The STREAM triad a server's weights stream at: a stored measurement of the
/// server's own host and memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServedRoof {
    /// `cpu`, or the GPU's label (`CUDA0 NVIDIA H200`).
    pub device: String,
    /// The STREAM kernel (`triad`).
    pub kernel: String,
    /// Best rate, GB/s (1e9 B/s).
    pub gbps: f64,
    /// Threads of a CPU measurement (0 on a GPU).
    pub threads: i64,
    /// Its `stream_results` id in the server's store.
    pub stream_id: i64,
    /// When it was measured, UTC RFC 3339.
    pub measured_at: String,
    /// The host that measured it.
    pub hostname: String,
}

/// The facts a running `memwall serve` publishes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServedFacts {
    /// Always `memwall serve` (how a client tells this endpoint from another's).
    pub server: String,
    /// memwall's commit.
    pub build_commit: String,
    /// `llama.cpp` or `mlx`.
    pub engine: String,
    /// The engine's arm (`llama`, `mlx-4bit`, …).
    pub arm: String,
    /// Where the weights are read from: `cpu` or `gpu`.
    pub placement: String,
    /// The model file served.
    pub model_file: String,
    /// Its quantization as the engine holds it.
    pub quant: String,
    /// Weight bytes one decode step streams (the embedding a one-row gather unless
    /// tied to the output head).
    pub streamed_bytes: u64,
    /// The KV cache's element type as the server holds it (`f16`, `f32`, `q8_0`, …).
    pub kv_type: String,
    /// KV bytes per cached token of the full-attention layers, at `kv_type`.
    pub kv_full_bytes_per_token: f64,
    /// KV bytes per cached token of the sliding-window layers, at `kv_type`.
    pub kv_window_bytes_per_token: f64,
    /// The sliding window of those layers, tokens (`None`: no such layers).
    pub sliding_window: Option<u64>,
    /// Context of one slot, tokens.
    pub n_ctx_slot: u32,
    /// The roof; `None` with [`ServedFacts::roof_missing`] when the server's store
    /// holds no STREAM of the memory it reads from.
    pub roof: Option<ServedRoof>,
    /// Why there is no roof.
    pub roof_missing: Option<String>,
}

impl ServedFacts {
    /// The facts of `model` (as the engine holds it) served at `kv` with `n_ctx_slot`
    /// tokens per slot.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        engine: &str,
        arm: &str,
        placement: &str,
        model_file: &str,
        model: &ModelFacts,
        kv: CacheType,
        n_ctx_slot: u32,
        roof: Result<ServedRoof, String>,
    ) -> ServedFacts {
        let per_layer = model.kv_layer_bytes(kv);
        let (mut full, mut window) = (0.0, 0.0);
        for (il, b) in per_layer.iter().enumerate() {
            let local = model.swa_layers.get(il).copied().unwrap_or(false);
            if local && model.sliding_window.is_some() {
                window += b;
            } else {
                full += b;
            }
        }
        let (roof, roof_missing) = match roof {
            Ok(r) => (Some(r), None),
            Err(why) => (None, Some(why)),
        };
        ServedFacts {
            server: "memwall serve".into(),
            build_commit: crate::BUILD_COMMIT.into(),
            engine: engine.into(),
            arm: arm.into(),
            placement: placement.into(),
            model_file: model_file.into(),
            quant: model.quant.clone(),
            streamed_bytes: model.streamed_bytes.0,
            kv_type: kv.name().into(),
            kv_full_bytes_per_token: full,
            kv_window_bytes_per_token: window,
            sliding_window: model.sliding_window.filter(|_| window > 0.0),
            n_ctx_slot,
            roof,
            roof_missing,
        }
    }

    /// Bytes one sequence's decode step reads at context `depth`: the weights plus
    /// its KV cache (full-attention layers read `depth` tokens, sliding-window layers
    /// `min(depth, window)`), as [`crate::roofline::bytes_per_step`] at batch 1.
    pub fn bytes_per_token(&self, depth: u64) -> f64 {
        let windowed = self.sliding_window.map_or(depth, |w| depth.min(w));
        let kv = self.kv_full_bytes_per_token * depth as f64
            + self.kv_window_bytes_per_token * windowed as f64;
        self.streamed_bytes as f64 + kv.trunc()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::model::one_layer_test_facts;
    use crate::roofline;

    #[test]
    fn published_bytes_match_the_roofline_at_the_servers_kv_type() {
        // The one-layer fixture (256 B/token of KV at F16), as a full-attention layer
        // and as a 512-token sliding-window layer.
        let full = one_layer_test_facts("m.gguf");
        let mut swa = full.clone();
        swa.swa_layers = vec![true];
        swa.sliding_window = Some(512);
        let f = ServedFacts::new(
            "e",
            "a",
            "cpu",
            "m",
            &swa,
            CacheType::F16,
            1,
            Err(String::new()),
        );
        assert_eq!(
            f.bytes_per_token(5000),
            full.streamed_bytes.0 as f64 + 256.0 * 512.0
        );
        assert_eq!(
            f.bytes_per_token(100),
            full.streamed_bytes.0 as f64 + 256.0 * 100.0
        );
        for (m, kv) in [
            (&full, CacheType::F16),
            (&full, CacheType::F32),
            (&full, CacheType::Q8_0),
            (&swa, CacheType::F16),
            (&swa, CacheType::Q4_0),
        ] {
            let f = ServedFacts::new(
                "llama.cpp",
                "llama",
                "cpu",
                "m.gguf",
                m,
                kv,
                2048,
                Err("no STREAM".into()),
            );
            for d in [0, 1, 100, 5000] {
                let want = roofline::bytes_per_step(m, d, 1, kv).0 as f64;
                assert_eq!(f.bytes_per_token(d), want, "{kv:?} at depth {d}");
            }
            assert_eq!(f.kv_type, kv.name());
            assert_eq!(f.roof, None);
            assert_eq!(f.roof_missing.as_deref(), Some("no STREAM"));
        }
        // F32 doubles F16's KV bytes: the type is the server's, not an assumed F16.
        let a = ServedFacts::new(
            "e",
            "a",
            "cpu",
            "m",
            &full,
            CacheType::F16,
            1,
            Err(String::new()),
        );
        let b = ServedFacts::new(
            "e",
            "a",
            "cpu",
            "m",
            &full,
            CacheType::F32,
            1,
            Err(String::new()),
        );
        assert_eq!(
            b.bytes_per_token(1000) - b.streamed_bytes as f64,
            2.0 * (a.bytes_per_token(1000) - a.streamed_bytes as f64)
        );
    }
}
