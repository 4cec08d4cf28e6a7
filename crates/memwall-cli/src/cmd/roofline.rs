//! `memwall roofline`.

use super::{command_line, default_model, open_store, parse_cache, resolve_model};
use crate::args::RooflineArgs;
use anyhow::{Result, bail};
use memwall_core::experiments::machine_roof;
use memwall_core::probe::hw;
use memwall_core::probe::model::ModelFacts;
use memwall_core::roofline;
use memwall_core::units::{Gbps, Gflops};

pub(crate) async fn roofline_cmd(db: &std::path::Path, a: RooflineArgs) -> Result<()> {
    let path = match &a.model {
        Some(m) => resolve_model(m)?,
        None => default_model()?,
    };
    let cache = parse_cache(&a.cache_type)?;
    let f = ModelFacts::open(&path)?;
    let host = hw::host_info();
    // The peak is `None` when none is measured: prefill ceilings and the ridge are then `—`.
    let (bw, bw_src, pk, pk_src) = {
        let mut bw = a
            .bandwidth
            .map(|b| (Gbps(b), "given on the command line".to_string()));
        let mut pk = a
            .peak
            .map(|p| (Some(Gflops(p)), "given on the command line".to_string()));
        if bw.is_none() || pk.is_none() {
            if !a.measured {
                bail!(
                    "give --bandwidth GBPS and --peak GFLOPS, or --measured to use this machine's stored STREAM/peaks"
                );
            }
            let store = open_store(db).await?;
            let has = store.latest_triad(&host.hostname, None).await?.is_some();
            let threads = host.cores_logical;
            let src =
                machine_roof::machine_roof(&store, &host, threads, has, &command_line()).await?;
            // `memwall roofline` models CPU inference (no offload).
            let peak = src.roof.peak_for(&f, 0);
            bw = bw.or(Some((src.roof.bandwidth, src.provenance.clone())));
            let what = peak
                .missing_reason()
                .unwrap_or_else(|| format!("measured {} peak", peak.kind));
            pk = pk.or(Some((peak.gflops, what)));
        }
        let (bw, bs) = bw.expect("set above");
        let (pk, ps) = pk.expect("set above");
        (bw, bs, pk, ps)
    };
    let rows: Vec<serde_json::Value> = a
        .depths
        .iter()
        .map(|&d| {
            let bytes = roofline::bytes_per_step(&f, d, 1, cache);
            let dec = roofline::decode_ceiling_tps(bw, bytes);
            let pf = roofline::prefill_flops_per_token(&f, a.n_prompt, d);
            let pre = pk.map(|pk| roofline::prefill_ceiling_tps(pk, pf));
            let ai = roofline::decode_intensity(&f, d, 1, cache);
            serde_json::json!({
                "n_depth": d, "bytes_per_step": bytes.0, "decode_ceiling_tps": dec,
                "prefill_flops_per_token": pf, "prefill_ceiling_tps": pre, "decode_intensity_flop_per_byte": ai,
            })
        })
        .collect();
    let ridge = pk.map(|pk| roofline::ridge_point(pk, bw));
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "model": path.display().to_string(), "bandwidth_gbps": bw.0, "bandwidth_source": bw_src,
                "peak_gflops": pk.map(|p| p.0), "peak_source": pk_src, "ridge_flop_per_byte": ridge, "rows": rows,
            }))?
        );
        return Ok(());
    }
    println!("model      {} ({})", path.display(), f.model_type());
    println!("bandwidth  {bw} — {bw_src}");
    let dash = memwall_core::units::or_dash;
    println!("peak       {} GFLOP/s — {pk_src}", dash(pk.map(|p| p.0), 1));
    println!("ridge      {} FLOP/byte (peak ÷ bandwidth)", dash(ridge, 1));
    println!(
        "weights streamed per step {}; KV ({}) {} B/token",
        f.streamed_bytes,
        cache.name(),
        f.kv_bytes_per_token(cache).0
    );
    println!();
    println!(
        "| depth | bytes/step | decode ceiling t/s | decode AI FLOP/B | pp{} ceiling t/s (compute) |",
        a.n_prompt
    );
    println!(
        "| ----: | ---------: | -----------------: | ---------------: | ------------------------: |"
    );
    for r in &rows {
        println!(
            "| {:>5} | {:>10.1} MB | {:>18.1} | {:>16.2} | {:>25} |",
            r["n_depth"],
            r["bytes_per_step"].as_f64().unwrap_or(0.0) / 1e6,
            r["decode_ceiling_tps"].as_f64().unwrap_or(f64::NAN),
            r["decode_intensity_flop_per_byte"]
                .as_f64()
                .unwrap_or(f64::NAN),
            dash(r["prefill_ceiling_tps"].as_f64(), 1)
        );
    }
    println!(
        "\ndecode AI is far left of the ridge: decode is memory-bound; the decode ceiling is bandwidth ÷ bytes/step."
    );
    Ok(())
}
