//! `memwall calc`'s text report: what the command prints, beside the figures it
//! prints ([`super::CalcReport`], [`super::MultiGpuCalc`]) so that every front end
//! (the CLI, a test, the app) shows the same lines.

use super::{CalcParams, CalcReport, MultiGpuCalc, WeightBasis};
use crate::units::or_dash;

/// The several-GPU lines of the text report (`memwall calc --gpu-bandwidth A,B`).
pub fn render_multi_gpu(m: &MultiGpuCalc, p: &CalcParams) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nseveral GPUs: decode ceiling per split mode, batch {}, depth {} (docs/gpus.md)",
        p.batch, p.depth
    );
    for (i, c) in m.cards.iter().enumerate() {
        let _ = writeln!(s, "  card {i}         {} — {}", c.value, c.source);
    }
    match &m.link {
        Some(l) => {
            let _ = writeln!(
                s,
                "  link           {:.2} µs + bytes ÷ {} — {}",
                l.value.latency_s * 1e6,
                l.value.bandwidth,
                l.source
            );
        }
        None => {
            let _ = writeln!(
                s,
                "  link           — (not measured or given: --link-latency-us, --link-gbps)"
            );
        }
    }
    let _ = writeln!(
        s,
        "  tensor split   {}",
        if m.tensor_split.is_default() {
            "equal shares".to_string()
        } else {
            m.tensor_split.llama_bench_text()
        }
    );
    for r in &m.rows {
        let Some(c) = &r.ceiling else {
            let _ = writeln!(
                s,
                "  {:<14} — ({})",
                r.mode.name(),
                r.missing_reason.as_deref().unwrap_or("no ceiling")
            );
            continue;
        };
        let bytes: Vec<String> = c.card_bytes.iter().map(|b| b.to_string()).collect();
        let _ = writeln!(
            s,
            "  {:<14} {} per step on the cards; memory {:.3} ms + {} message(s) of {} B {:.3} ms = {:.3} ms → {}",
            r.mode.name(),
            bytes.join(" / "),
            c.step.memory_s * 1e3,
            c.messages,
            c.message_bytes,
            c.step.link_s * 1e3,
            c.step.total_s() * 1e3,
            tps(Some(c.ceiling_tps))
        );
    }
    let _ = writeln!(
        s,
        "  layer: Σ card bytes ÷ card GB/s + a hand-over per card boundary; row: max card bytes ÷ card GB/s + layers × {} exchange(s) × the link's message time",
        m.exchanges_per_layer
    );
    s
}

fn tps(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.1} tok/s"),
        _ => "—".into(),
    }
}

/// The text report (`memwall calc`).
pub fn render(r: &CalcReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let m = &r.model;
    let p = &r.params;
    let _ = writeln!(s, "model      {} — {}", m.label, m.precision);
    let basis = match m.basis {
        WeightBasis::File => "exact: tensor bytes of the GGUF file",
        WeightBasis::Recipe => {
            "ESTIMATE from the shape and llama.cpp's quantization recipe (a real file's bytes beat it: pass --model FILE)"
        }
        WeightBasis::Params => {
            "params × bits ÷ 8, weights only (no per-tensor recipe, no KV without a shape)"
        }
    };
    let _ = writeln!(s, "           {basis}");
    if m.facts.as_ref().is_some_and(|f| f.synthetic) {
        let _ = writeln!(
            s,
            "           SYNTHETIC model: random weights, meaningless text, real speed"
        );
    }
    let _ = writeln!(s, "device     {}", r.roof.label);
    match &r.roof.bandwidth {
        Some(b) => {
            let _ = writeln!(s, "bandwidth  {} — {}", b.value, b.source);
        }
        None => {
            let _ = writeln!(s, "bandwidth  — (not measured / not given)");
        }
    }
    match &r.roof.peak {
        Some(b) => {
            let _ = writeln!(s, "peak       {} — {}", b.value, b.source);
        }
        None => {
            let _ = writeln!(
                s,
                "peak       — (no stated or measured peak: pass --peak GFLOPS)"
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "weights            {} ({} params, {:.3} bits/weight incl. scales)",
        r.weight_bytes,
        human_params(m.n_params),
        r.bits_per_weight
    );
    let _ = writeln!(
        s,
        "streamed per step  {} (weights read by one batch-1 decode step)",
        m.streamed_bytes
    );
    if m.facts.is_some() {
        let _ = writeln!(
            s,
            "KV cache ({})     {} B/token; at depth {} × batch {}: {}",
            p.cache.name(),
            r.kv_bytes_per_token.0,
            p.depth,
            p.batch,
            r.kv_bytes
        );
    } else {
        let _ = writeln!(s, "KV cache           — (no shape given: weights only)");
    }
    let _ = writeln!(
        s,
        "resident           {} (weights + KV); + headroom {} (1 GiB + 10 % of weights)",
        r.resident_bytes, r.headroom_bytes
    );
    for f in &r.fits {
        let spare = f.spare_bytes;
        let _ = writeln!(
            s,
            "  in {:>6.1} GiB    {} — {} {:.2} GiB",
            f.memory.gib(),
            if f.fits {
                "fits        "
            } else {
                "DOES NOT FIT"
            },
            if spare >= 0 { "spare" } else { "short by" },
            spare.unsigned_abs() as f64 / crate::units::GIB
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "decode ceiling, batch 1, depth {:<6} {}",
        p.depth,
        tps(r.decode_b1_tps)
    );
    if let Some(f) = &r.roof.floor {
        let fit = &f.value;
        let _ = writeln!(
            s,
            "  with the fitted per-token floor:  {} (t0 = {:.3} ms ± {:.3}, BW_eff = {} GB/s; worst leave-one-out error {} %)\n  floor {}",
            tps(r.decode_b1_floor_tps),
            fit.t0_seconds * 1e3,
            fit.t0_half95_seconds * 1e3,
            or_dash(fit.bw_eff_gbps, 0),
            or_dash(fit.worst_loo_pct(), 1),
            f.source
        );
    }
    if p.depth > 0 {
        let frac = match (r.decode_b1_tps, r.decode_b1_depth0_tps) {
            (Some(a), Some(b)) => format!("{:.1} %", 100.0 * a / b),
            _ => "—".into(),
        };
        let _ = writeln!(
            s,
            "  (depth 0: {}; at depth {} decode falls to {frac} of that)",
            tps(r.decode_b1_depth0_tps),
            p.depth
        );
    }
    if p.batch > 1 {
        let per = r.decode_aggregate_tps.map(|x| x / p.batch as f64);
        let _ = writeln!(
            s,
            "decode ceiling, batch {:<3} aggregate {} ({} per sequence)",
            p.batch,
            tps(r.decode_aggregate_tps),
            tps(per)
        );
    }
    let _ = writeln!(
        s,
        "prefill ceiling (compute, pp{})  {} ({:.2} GFLOP per token)",
        p.n_prompt,
        tps(r.prefill_tps),
        r.prefill_flops_per_token / 1e9
    );
    let _ = writeln!(
        s,
        "decode intensity   {:.2} FLOP/byte at batch {} vs ridge {} FLOP/byte → {}",
        r.decode_intensity,
        p.batch,
        or_dash(r.ridge, 1),
        match r.ridge {
            Some(x) if r.decode_intensity < x => "memory-bound",
            Some(_) => "compute-bound",
            None => "—",
        }
    );
    let _ = writeln!(
        s,
        "\nCeilings are upper bounds (bandwidth ÷ bytes, peak ÷ FLOPs), not forecasts; GB = 10^9 B, GiB = 2^30 B."
    );
    s
}

fn human_params(n: u64) -> String {
    let b = n as f64 / 1e9;
    if b >= 1.0 {
        format!("{b:.2} B")
    } else {
        format!("{:.0} M", b * 1000.0)
    }
}
