//! `memwall kv verify` and `memwall analyze batch|depth|threads|ceilings`.

use super::{command_line, open_store, parse_cache, physical_cores, print_guard, resolve_model};
use crate::args::{AnalyzeArgs, AnalyzeKind, KvVerifyArgs};
use anyhow::{Result, bail};
use memwall_core::experiments::evidence::chart as charts;
use memwall_core::experiments::evidence::{self, batch, ceilings, depth, kv::KvVerify, threads};
use memwall_core::probe::catalog::Catalog;
use memwall_core::store::RowFilter;
use std::path::PathBuf;

pub(crate) async fn kv_verify(db: &std::path::Path, a: KvVerifyArgs) -> Result<()> {
    let models: Vec<PathBuf> = if a.model.is_empty() {
        let cat = Catalog::builtin()?;
        let present: Vec<PathBuf> = cat
            .models
            .iter()
            .map(|m| m.path())
            .filter(|p| p.is_file())
            .collect();
        if present.is_empty() {
            bail!(
                "no catalogue model is fetched: run `memwall models fetch --all`, or pass -m FILE"
            );
        }
        present
    } else {
        a.model
            .iter()
            .map(|m| resolve_model(m))
            .collect::<Result<_>>()?
    };
    let caches = a
        .cache_types
        .iter()
        .map(|c| parse_cache(c))
        .collect::<Result<Vec<_>>>()?;
    let store = open_store(db).await?;
    let n = a.n;
    let out = evidence::kv_verify_job(
        &store,
        evidence::KvVerifyOptions {
            models,
            caches,
            n,
            threads: a.threads.unwrap_or_else(physical_cores),
            guard: a.guard.options(),
            command: command_line(),
        },
        |m| eprintln!("kv verify: {m}…"),
    )
    .await?;
    print_guard(&out.guard);
    let (run_id, rows) = (out.run_id, out.rows);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!(
            "| model | cache | formula B/token (all layers) | predicted growth B/token | measured state growth B/token | − cell metadata | measured KV B/token | measured ÷ predicted | peak-RSS growth B/token | RSS ÷ predicted |"
        );
        println!("| ----- | ----- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
        for r in &rows {
            println!(
                "| {} | {} | {} | {:.1} | {:.2} | {:.0} | {:.2} | {:.4} | {} | {} |",
                std::path::Path::new(&r.model)
                    .file_name()
                    .map_or(r.model.clone(), |f| f.to_string_lossy().into_owned()),
                r.cache_type,
                r.formula_bytes_per_token,
                r.predicted_bytes_per_token,
                r.measured_state_bytes_per_token,
                r.metadata_bytes_per_token,
                r.measured_kv_bytes_per_token,
                r.ratio,
                r.rss_bytes_per_token
                    .map_or("—".into(), |v| format!("{v:.0}")),
                r.rss_ratio.map_or("—".into(), |v| format!("{v:.2}")),
            );
        }
        println!(
            "\nmeasured = (state after 2n − state after n) ÷ n tokens, n = {n}: constant overheads cancel; llama.cpp also writes \
             {} B of cell metadata (pos, seq count, seq id) per cached token per KV cache, subtracted above. Sliding-window \
             layers keep only their window, so past it only full-attention layers grow (the prediction accounts for that).\n\
             The wrong method: peak process RSS from creating a context for n tokens to the end of their prefill, ÷ n. \
             It also counts the compute (activation) buffers, which scale with the prompt length (overstating), and \
             misses memory the allocator hands back from earlier work in the same process (understating){} — do not \
             measure the KV cache from RSS.",
            memwall_core::experiments::evidence::kv::STATE_META_BYTES_PER_CELL,
            rss_range(&rows)
        );
    }
    if let Some(dir) = a.chart {
        let memwall_core::present::chart::ChartFiles { png, svg } =
            charts::kv(&dir.join("kv_verify"), &rows)?;
        eprintln!("charts: {} {}", png.display(), svg.display());
    }
    eprintln!("stored: run {run_id} in {}", store.path().display());
    Ok(())
}

/// ": here it gave 0.60× to 11.50× the cache", from the rows' RSS ratios (empty when none).
fn rss_range(rows: &[KvVerify]) -> String {
    let ratios: Vec<f64> = rows.iter().filter_map(|r| r.rss_ratio).collect();
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if ratios.is_empty() {
        String::new()
    } else {
        format!(": here it gave {lo:.2}× to {hi:.2}× the cache")
    }
}

pub(crate) async fn analyze(db: &std::path::Path, a: AnalyzeArgs) -> Result<()> {
    let store = open_store(db).await?;
    let run_id = match a.run {
        Some(r) => r,
        None => store
            .runs()
            .await?
            .into_iter()
            .find(|r| r.kind == "bench" && r.n_bench_rows > 0)
            .map(|r| r.id)
            .ok_or_else(|| anyhow::anyhow!("no stored bench run: run `memwall bench` first"))?,
    };
    let rows = store
        .bench_rows(&RowFilter {
            run_id: Some(run_id),
            ..Default::default()
        })
        .await?;
    if rows.is_empty() {
        bail!("run {run_id} has no bench rows (`memwall history` lists runs)");
    }
    println!("run {run_id}: {} rows", rows.len());
    match a.kind {
        AnalyzeKind::Batch => {
            let t = batch::analyze(&rows);
            println!("{}", batch::table(&t));
            if let Some(dir) = &a.chart {
                charts::batch(&dir.join("batch"), &t)?;
                let r0 = &rows[0];
                match r0.peak_gflops {
                    Some(peak) => {
                        charts::batch_roofline(
                            &dir.join("batch_roofline"),
                            &t,
                            peak,
                            &r0.peak_kind,
                        )?;
                    }
                    None => eprintln!(
                        "batch roofline —: run {run_id} stored no {} peak (run `memwall peak`)",
                        r0.peak_kind
                    ),
                }
            }
        }
        AnalyzeKind::Depth => {
            let t = depth::analyze(&rows);
            if t.is_empty() {
                bail!(
                    "run {run_id} has no depth sweep (needs a depth-0 row and deeper rows of the same test)"
                );
            }
            println!("{}", depth::table(&t));
            if let Some(dir) = &a.chart {
                charts::depth(&dir.join("depth_decomposed"), &t)?;
            }
        }
        AnalyzeKind::Ceilings => {
            let t = ceilings::analyze(&rows);
            if t.is_empty() {
                bail!("run {run_id} has no decode (tg) rows");
            }
            println!("{}", ceilings::table(&t));
        }
        AnalyzeKind::Threads => {
            let streams = store.stream_siblings(rows[0].stream_id).await?;
            let at = |t: i64| {
                streams
                    .iter()
                    .find(|x| x.threads == t && x.kernel == "triad")
                    .map(|x| x.best_gbps)
            };
            let t = threads::analyze(&rows, &at);
            println!("{}", threads::table(&t));
            if let Some(dir) = &a.chart {
                charts::threads(&dir.join("threads"), &t)?;
            }
        }
    }
    if let Some(dir) = &a.chart {
        eprintln!("charts written to {}", dir.display());
    }
    Ok(())
}
