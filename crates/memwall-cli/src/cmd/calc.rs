//! `memwall calc`: the ceiling calculator.

use super::{open_store, parse_cache, resolve_model};
use crate::args::{CalcArgs, ShapeArgs};
use anyhow::{Context, Result, bail};
use memwall_core::experiments::calc::{
    self, CalcModel, CalcParams, CalcReport, Roof, Sourced, WeightBasis,
};
use memwall_core::experiments::roof;
use memwall_core::probe::devices::Devices;
use memwall_core::probe::model::ModelFacts;
use memwall_core::probe::shape::{self, Arch, ModelShape, Recipe};
use memwall_core::units::{Bytes, Gbps, Gflops, or_dash};

/// A shape (with its recipe and name) from preset or flags, if the args give one.
pub(crate) fn shape_from_args(a: &ShapeArgs) -> Result<Option<(ModelShape, Recipe, String)>> {
    let recipe = Recipe::parse(&a.quant)?;
    let layout = |mut s: ModelShape| {
        if a.untied {
            s.tied_embeddings = false;
        }
        if a.lexicographic {
            s.lexicographic_order = true;
        }
        s
    };
    if let Some(p) = &a.preset {
        // A preset's shape is whole: only the vocabulary may change (a draft given its
        // target's vocabulary); any other shape flag would be silently dropped.
        let other = [
            ("--layers", a.layers.is_some()),
            ("--hidden", a.hidden.is_some()),
            ("--heads", a.heads.is_some()),
            ("--kv-heads", a.kv_heads.is_some()),
            ("--head-dim", a.head_dim.is_some()),
            ("--ffn", a.ffn.is_some()),
            ("--tied", a.tied),
            ("--experts", a.experts.is_some()),
            ("--experts-used", a.experts_used.is_some()),
            ("--ffn-expert", a.ffn_expert.is_some()),
            ("--sliding-window", a.sliding_window.is_some()),
        ];
        if let Some((flag, _)) = other.iter().find(|(_, given)| *given) {
            bail!(
                "{flag} does not combine with --preset (a preset's shape is fixed; only --vocab, --untied and --lexicographic change it): give the whole shape by flags (--arch --layers …) instead"
            );
        }
        let p = shape::preset(p)?;
        let mut s = layout(p.shape);
        let mut title = p.title.to_string();
        if let Some(v) = a.vocab {
            s.n_vocab = v;
            s.validate()?;
            title = format!("{title} (vocab {v})");
        }
        return Ok(Some((s, recipe, title)));
    }
    let Some(arch) = &a.arch else {
        return Ok(None);
    };
    let arch = Arch::parse(arch)?;
    let need = |v: Option<u32>, flag: &str| {
        v.with_context(|| format!("a shape given by flags needs {flag} (or use --preset NAME)"))
    };
    let heads = need(a.heads, "--heads")?;
    let s = ModelShape {
        arch,
        n_layer: need(a.layers, "--layers")?,
        n_embd: need(a.hidden, "--hidden")?,
        n_head: heads,
        n_head_kv: a.kv_heads.unwrap_or(heads),
        head_dim: a.head_dim,
        n_ff: a.ffn.unwrap_or(0),
        n_vocab: a.vocab.context("a shape given by flags needs --vocab")?,
        tied_embeddings: a.tied,
        n_expert: a.experts.unwrap_or(0),
        n_expert_used: a.experts_used.unwrap_or(0),
        n_ff_exp: a.ffn_expert.unwrap_or(0),
        sliding_window: a.sliding_window,
        n_ctx_train: 32768,
        lexicographic_order: false,
    };
    let s = layout(s);
    s.validate()?;
    let name = format!("{} shape {}L {}d", arch.name(), s.n_layer, s.n_embd);
    Ok(Some((s, recipe, name)))
}

/// The calculator's model from the args: file, preset/shape, or bare parameters.
pub(crate) fn model_from_args(a: &ShapeArgs) -> Result<CalcModel> {
    let given = [
        a.model.is_some(),
        a.preset.is_some(),
        a.arch.is_some(),
        a.params.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if given != 1 {
        bail!(
            "give exactly one model: --model FILE, --preset NAME (--list-presets), a shape (--arch --layers --hidden --heads --kv-heads --ffn --vocab), or --params N --bits B"
        );
    }
    if let Some(m) = &a.model {
        let path = resolve_model(m)?;
        let f = ModelFacts::open(&path)?;
        let label = f.label();
        return Ok(CalcModel::from_facts(f, WeightBasis::File, &label));
    }
    if let Some(p) = a.params {
        let bits = a
            .bits
            .context("--params needs --bits (bits per weight, incl. scales: Q4_K = 4.5)")?;
        if p <= 0.0 || bits <= 0.0 {
            bail!("--params and --bits must be > 0");
        }
        return Ok(CalcModel::from_params(p, a.active.unwrap_or(p), bits));
    }
    let (s, r, name) = shape_from_args(a)?.expect("one of preset/arch given");
    let f = s.facts(&r, &name)?;
    Ok(CalcModel::from_facts(f, WeightBasis::Recipe, &name))
}

pub(crate) async fn calc_cmd(db: &std::path::Path, a: CalcArgs) -> Result<()> {
    let devices = Devices::builtin()?;
    if a.list_devices {
        println!(
            "| device | family | bandwidth GB/s | memory GiB | fp16 matrix TFLOP/s | fp32 TFLOP/s | basis | source |"
        );
        println!("| --- | --- | ---: | --- | ---: | ---: | --- | --- |");
        for d in &devices.devices {
            let mem: Vec<String> = d.memory_gib.iter().map(|m| format!("{m}")).collect();
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                d.name,
                d.family,
                d.bandwidth_gbps,
                mem.join("/"),
                or_dash(d.fp16_tflops, 1),
                or_dash(d.fp32_tflops, 1),
                d.basis,
                d.source
            );
        }
        return Ok(());
    }
    if a.list_presets {
        println!(
            "| preset | model | arch | layers | hidden | heads/kv | ffn | vocab | experts | source |"
        );
        println!("| --- | --- | --- | ---: | ---: | --- | ---: | ---: | --- | --- |");
        for p in shape::presets() {
            let s = &p.shape;
            println!(
                "| {} | {} | {} | {} | {} | {}/{} | {} | {} | {} | {} |",
                p.name,
                p.title,
                s.arch.name(),
                s.n_layer,
                s.n_embd,
                s.n_head,
                s.n_head_kv,
                if s.n_expert > 0 { s.n_ff_exp } else { s.n_ff },
                s.n_vocab,
                if s.n_expert > 0 {
                    format!("{} of {}", s.n_expert_used, s.n_expert)
                } else {
                    "—".into()
                },
                p.source
            );
        }
        return Ok(());
    }
    let model = model_from_args(&a.shape)?;
    if a.gpu && !matches!(a.device.as_deref(), Some(d) if d.eq_ignore_ascii_case("this")) {
        bail!("--gpu reads this machine's stored GPU STREAM: use it with --device this");
    }
    let cache = parse_cache(&a.cache_type)?;
    let mut this = None;
    let mut roof = match a.device.as_deref() {
        Some(d) if d.eq_ignore_ascii_case("this") => {
            let store = open_store(db).await?;
            let host = memwall_core::probe::hw::host_info();
            let t = roof::this_machine(&store, &host).await?;
            let r = t.roof(model.facts.as_ref(), a.gpu);
            this = Some(t);
            r
        }
        Some(d) => {
            let dev = devices.get(d)?;
            Roof {
                label: dev.name.clone(),
                bandwidth: Some(Sourced {
                    value: dev.bandwidth(),
                    source: format!("{}: {}", dev.basis, dev.source),
                }),
                peak: dev.peak().map(|p| Sourced {
                    value: p.gflops,
                    source: format!("{}, {}: {}", p.kind, dev.basis, dev.source),
                }),
                memory: dev.memory(),
                floor: None,
            }
        }
        None => {
            if a.bandwidth.is_none() && a.gpu_bandwidth.is_empty() {
                bail!(
                    "give --device NAME (--list-devices), --device this, --bandwidth GBPS [--peak GFLOPS], or --gpu-bandwidth A,B for several GPUs"
                );
            }
            Roof {
                label: "given".into(),
                // One card's roof: the first of --gpu-bandwidth unless --bandwidth is given.
                bandwidth: a.gpu_bandwidth.first().map(|&b| Sourced {
                    value: Gbps(b),
                    source: "given on the command line (--gpu-bandwidth, card 0)".into(),
                }),
                peak: None,
                memory: vec![],
                floor: None,
            }
        }
    };
    if let Some(b) = a.bandwidth {
        roof.bandwidth = Some(Sourced {
            value: Gbps(b),
            source: "given on the command line".into(),
        });
    }
    if let Some(p) = a.peak {
        roof.peak = Some(Sourced {
            value: Gflops(p),
            source: "given on the command line".into(),
        });
    }
    if !a.memory_gib.is_empty() {
        roof.memory = a
            .memory_gib
            .iter()
            .map(|g| Bytes((g * memwall_core::units::GIB) as u64))
            .collect();
    }
    let p = CalcParams {
        depth: a.depth,
        batch: a.n_seqs.max(1),
        cache,
        n_prompt: a.n_prompt,
    };
    let r = calc::calc(&model, &roof, &p);
    let multi = multi_gpu_from_args(db, &a, &model, &p).await?;
    if a.json {
        let mut v = serde_json::to_value(&r)?;
        if let Some(f) = v.get_mut("model").and_then(|m| m.get_mut("facts")) {
            // The per-class tables are in `memwall model info --json`; keep calc's JSON short.
            *f = serde_json::Value::Null;
        }
        if let Some(t) = &this {
            v["this_machine"] = serde_json::to_value(t)?;
        }
        if let Some(m) = &multi {
            v["multi_gpu"] = serde_json::to_value(m)?;
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    print!("{}", render(&r));
    if let Some(m) = &multi {
        print!("{}", render_multi_gpu(m, &p));
    }
    if let Some(t) = &this {
        print!("{}", render_this(t));
    }
    Ok(())
}

/// The several-GPU part, when asked for: cards from `--gpu-bandwidth` (given) or, with
/// `--device this --gpu` on a machine with two or more CUDA devices, each device's
/// latest stored STREAM triad; the link from `--link-latency-us` and `--link-gbps`.
async fn multi_gpu_from_args(
    db: &std::path::Path,
    a: &CalcArgs,
    model: &CalcModel,
    p: &CalcParams,
) -> Result<Option<calc::MultiGpuCalc>> {
    use memwall_core::roofline::multi_gpu::{PeerLink, TensorSplit};
    let given = "given on the command line";
    let mut cards: Vec<Sourced<Gbps>> = Vec::new();
    for &b in &a.gpu_bandwidth {
        if !(b.is_finite() && b > 0.0) {
            bail!("--gpu-bandwidth {b}: each card's bandwidth must be a positive GB/s figure");
        }
        cards.push(Sourced {
            value: Gbps(b),
            source: given.into(),
        });
    }
    let this = matches!(a.device.as_deref(), Some(d) if d.eq_ignore_ascii_case("this"));
    if cards.is_empty() && this && a.gpu {
        let devices = memwall_core::probe::cuda::cuda_devices().unwrap_or_default();
        if devices.len() >= 2 {
            let store = open_store(db).await?;
            let host = memwall_core::probe::hw::host_info();
            for d in &devices {
                let label = format!("CUDA{} {}", d.ordinal, d.name);
                let s = store
                    .latest_device_triad(&host.hostname, &label)
                    .await?
                    .with_context(|| {
                        format!(
                            "no stored STREAM triad for {label}: run `memwall stream --gpu --gpu-device {}` (or give --gpu-bandwidth)",
                            d.ordinal
                        )
                    })?;
                cards.push(Sourced {
                    value: Gbps(s.best_gbps),
                    source: format!(
                        "GPU STREAM triad #{} ({label}) measured {}",
                        s.id, s.measured_at
                    ),
                });
            }
        }
    }
    let asked = a.tensor_split.is_some() || a.link_latency_us.is_some() || a.link_gbps.is_some();
    if cards.is_empty() {
        if asked {
            bail!(
                "--tensor-split, --link-latency-us and --link-gbps describe several GPUs: give each card's bandwidth with --gpu-bandwidth A,B (or --device this --gpu on a machine with several)"
            );
        }
        return Ok(None);
    }
    let link = match (a.link_latency_us, a.link_gbps) {
        (None, None) => None,
        (Some(us), Some(gbps)) => {
            if !(us.is_finite() && us >= 0.0 && gbps.is_finite() && gbps > 0.0) {
                bail!(
                    "--link-latency-us must be ≥ 0 and --link-gbps > 0 (both from `memwall stream --gpu --peer`)"
                );
            }
            Some(Sourced {
                value: PeerLink {
                    latency_s: us * 1e-6,
                    bandwidth: Gbps(gbps),
                },
                source: given.into(),
            })
        }
        _ => bail!(
            "--link-latency-us and --link-gbps go together (a pair's small-copy µs and bulk GB/s from `memwall stream --gpu --peer`)"
        ),
    };
    if a.exchanges_per_layer == 0 {
        bail!(
            "--exchanges-per-layer must be at least 1 (row split exchanges partial results every layer)"
        );
    }
    let split = match &a.tensor_split {
        Some(t) => TensorSplit::parse(t)?,
        None => TensorSplit::default(),
    };
    Ok(Some(calc::calc_multi_gpu(
        model,
        p,
        cards,
        link,
        split,
        a.exchanges_per_layer,
    )))
}

/// The several-GPU lines of the text report.
pub(crate) fn render_multi_gpu(m: &calc::MultiGpuCalc, p: &CalcParams) -> String {
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

/// The text report.
pub(crate) fn render(r: &CalcReport) -> String {
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
            spare.unsigned_abs() as f64 / memwall_core::units::GIB
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

fn render_this(t: &roof::ThisMachine) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let spec = t.spec.as_ref();
    let _ = writeln!(
        s,
        "\nthis machine: spec vs measured ({}; spec from {})",
        t.host.cpu_model,
        spec.map_or(
            "— (CPU/GPU not in catalog/devices.toml)".to_string(),
            |d| format!("catalogue entry {:?}", d.name)
        )
    );
    let _ = writeln!(s, "| quantity | spec | measured | measured ÷ spec |");
    let _ = writeln!(s, "| --- | ---: | ---: | ---: |");
    let ratio = |m: Option<f64>, sp: Option<f64>| match (m, sp) {
        (Some(m), Some(sp)) if sp > 0.0 => format!("{:.2}", m / sp),
        _ => "—".into(),
    };
    let bw_m = t.triad.as_ref().map(|x| x.best_gbps);
    let bw_s = spec.map(|d| d.bandwidth_gbps);
    let _ = writeln!(
        s,
        "| memory bandwidth GB/s | {} | {} | {} |",
        or_dash(bw_s, 1),
        or_dash(bw_m, 1),
        ratio(bw_m, bw_s)
    );
    let f32_m = t.peak_f32.as_ref().map(|x| x.gflops);
    let f32_s = spec.and_then(|d| d.fp32_tflops).map(|x| x * 1000.0);
    let _ = writeln!(
        s,
        "| fp32 GFLOP/s | {} | {} | {} |",
        or_dash(f32_s, 0),
        or_dash(f32_m, 0),
        ratio(f32_m, f32_s)
    );
    let i8_m = t.peak_int8.as_ref().map(|x| x.gflops);
    let _ = writeln!(s, "| int8 dot GOP/s | — | {} | — |", or_dash(i8_m, 0));
    let _ = writeln!(
        s,
        "| memory GiB | {} | {:.1} (installed) | — |",
        spec.map_or("—".to_string(), |d| d
            .memory_gib
            .iter()
            .map(|m| m.to_string())
            .collect::<Vec<_>>()
            .join("/")),
        t.host.ram.gib()
    );
    if t.triad.is_none() || t.peak_f32.is_none() {
        let _ = writeln!(
            s,
            "— = not measured on this host yet: run `memwall stream` (STREAM + compute peaks) first."
        );
    }
    let _ = writeln!(
        s,
        "A spec sheet is not the bandwidth a program gets: the ratio is itself a measurement."
    );
    s
}

/// `memwall model synth`.
pub(crate) fn synth_cmd(a: crate::args::SynthArgs) -> Result<()> {
    if a.shape.model.is_some() || a.shape.params.is_some() {
        bail!(
            "model synth takes a shape: --preset NAME or --arch/--layers/… (not --model or --params)"
        );
    }
    let (s, r, name) = shape_from_args(&a.shape)?
        .context("give --preset NAME (--list-presets on `memwall calc`) or a shape (--arch --layers --hidden --heads --kv-heads --ffn --vocab)")?;
    if a.out.exists() && !a.force {
        bail!("{} exists: pass --force to overwrite", a.out.display());
    }
    let est = s.facts(&r, &name)?;
    let avail = memwall_core::probe::hw::available_memory();
    eprintln!(
        "writing SYNTHETIC {name} {} to {}: {} of random weights (seed {}); {} free in memory",
        r.name,
        a.out.display(),
        est.tensor_bytes,
        a.seed,
        avail
    );
    let pb = indicatif::ProgressBar::new(est.file_bytes.0);
    pb.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} {bytes_per_sec}")
            .expect("valid template"),
    );
    let f = memwall_core::probe::synth::write(
        &s,
        &r,
        &format!("synthetic {name}"),
        a.seed,
        &a.out,
        |w, _| pb.set_position(w),
    )?;
    pb.finish_and_clear();
    println!("wrote {}", a.out.display());
    println!(
        "SYNTHETIC: random weights, the text it generates is meaningless; decode speed is real (dense models)."
    );
    println!(
        "tensors {}  params {}  tensor bytes {} B = {}  streamed/step {} B  types {}",
        f.classes.values().map(|c| c.n_tensors).sum::<u64>(),
        f.n_params,
        f.tensor_bytes.0,
        f.tensor_bytes,
        f.streamed_bytes.0,
        f.type_counts
            .iter()
            .map(|(t, n)| format!("{t}×{n}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    if f.tensor_bytes != est.tensor_bytes || f.streamed_bytes != est.streamed_bytes {
        bail!("read-back facts differ from the calculator's: a bug, please report it");
    }
    println!("read back with memwall's GGUF reader: equals `memwall calc` for this shape");
    Ok(())
}
