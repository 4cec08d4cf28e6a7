//! `memwall calc`: the ceiling calculator.

use super::{open_store, parse_cache, resolve_model};
use crate::args::{CalcArgs, ShapeArgs};
use anyhow::{Context, Result, bail};
use memwall_core::experiments::calc::{self, CalcModel, CalcParams, Roof, Sourced, WeightBasis};
use memwall_core::experiments::machine_roof;
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
            let t = machine_roof::this_machine(&store, &host).await?;
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
    print!("{}", calc::text::render(&r));
    if let Some(m) = &multi {
        print!("{}", calc::text::render_multi_gpu(m, &p));
    }
    if let Some(t) = &this {
        print!("{}", machine_roof::render_this(t));
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
