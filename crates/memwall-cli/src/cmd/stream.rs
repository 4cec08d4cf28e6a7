//! `memwall stream` and `memwall peak`.

use super::{command_line, open_store};
use crate::args::{PeakArgs, StreamArgs};
use anyhow::{Result, bail};
use memwall_core::hw;
use memwall_core::jobs;
use memwall_core::peak::{self, PeakKind};
use memwall_core::stream::{self, Isa, StreamConfig, StreamResult};
use memwall_core::units::Bytes;

pub(crate) async fn stream(db: &std::path::Path, a: StreamArgs) -> Result<()> {
    let host = hw::host_info();
    let threads = if a.threads.is_empty() {
        let mut t = vec![1, host.cores_logical];
        t.dedup();
        t
    } else {
        a.threads.clone()
    };
    if threads.contains(&0) {
        bail!("-t needs positive thread counts");
    }
    if a.array_size == Some(0) {
        bail!("--array-size must be at least 1 element");
    }
    let rule = StreamConfig::rule_bytes(host.llc);
    let array = a.array_size.map_or(rule, |n| Bytes(n as u64 * 8));
    let below_rule = array < rule;
    eprintln!(
        "STREAM: 3 arrays × {array} (last-level cache {}), best of {} passes…",
        host.llc
            .map_or("unknown → fallback size".to_string(), |b| b.to_string()),
        if a.quick { 5 } else { 10 }
    );
    if below_rule {
        if a.peaks {
            bail!("--peaks needs a stored run: drop it, or use an --array-size of at least {rule}");
        }
        eprintln!(
            "--array-size: {array} per array is below STREAM's rule (≥ 4 × last-level cache = {rule}): the arrays may be served from cache, so these rates are not stored and no ceiling uses them"
        );
        let (n, quick) = (
            a.array_size.expect("below the rule only when given"),
            a.quick,
        );
        let results: Vec<StreamResult> = tokio::task::spawn_blocking(move || {
            threads
                .iter()
                .map(|&t| {
                    let mut cfg = if quick {
                        StreamConfig::quick(None, t)
                    } else {
                        StreamConfig::standard(None, t)
                    };
                    cfg.n_elements = n;
                    stream::run(&cfg)
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .await??;
        if a.json {
            let out = serde_json::json!({ "stored": false, "results": results });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            print_table(&results);
            println!(
                "validated: arrays hold STREAM's expected values. GB/s = 10^9 B/s. not stored (below STREAM's sizing rule)"
            );
        }
        return Ok(());
    }
    let store = open_store(db).await?;
    let out = jobs::stream_job_sized(
        &store,
        &host,
        threads,
        a.quick,
        a.peaks,
        a.array_size,
        &command_line(),
    )
    .await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    print_table(&out.results);
    for p in &out.peaks {
        let unit = if p.kind == PeakKind::Int8Dot {
            "GOP/s"
        } else {
            "GFLOP/s"
        };
        println!(
            "peak {}: {:.1} {unit} ({} threads, {})",
            p.kind.label(),
            p.gflops.0,
            p.threads,
            p.isa
        );
    }
    println!(
        "validated: arrays hold STREAM's expected values. GB/s = 10^9 B/s. stored: run {}",
        out.run_id
    );
    Ok(())
}

fn print_table(results: &[StreamResult]) {
    println!("| kernel | threads | best GB/s | avg GB/s | worst GB/s | bytes/elt | array |");
    println!("| ------ | ------: | --------: | -------: | ---------: | --------: | ----- |");
    for r in results {
        for k in &r.kernels {
            println!(
                "| {:<6} | {:>7} | {:>9.2} | {:>8.2} | {:>10.2} | {:>9} | {} |",
                k.kernel.name(),
                r.config.threads,
                k.best_gbps.0,
                k.avg_gbps.0,
                k.worst_gbps.0,
                k.kernel.arrays() * 8,
                r.config.array_bytes()
            );
        }
    }
    if let Some(isa) = results.first().and_then(|r| r.isa) {
        let copy = if isa == Isa::Portable {
            "the C library's memcpy"
        } else {
            "non-temporal stores"
        };
        println!(
            "copy: {copy}; read: vector sum ({} path); scale/add/triad: ordinary stores. read is not a STREAM kernel: it reads one array and writes nothing",
            isa.name()
        );
    }
}

pub(crate) async fn peak_cmd(db: &std::path::Path, a: PeakArgs) -> Result<()> {
    let host = hw::host_info();
    let t = a.threads.unwrap_or(host.cores_logical).max(1);
    let peaks: Vec<_> = tokio::task::spawn_blocking(move || {
        [PeakKind::F32Fma, PeakKind::Int8Dot]
            .into_iter()
            .map(|k| peak::measure(k, t, std::time::Duration::from_millis(200), 5))
            .collect()
    })
    .await?;
    let store = open_store(db).await?;
    let run = memwall_core::store::NewRun {
        kind: "peak".into(),
        started_at: memwall_core::util::now_rfc3339(),
        finished_at: memwall_core::util::now_rfc3339(),
        command: command_line(),
        host,
        notes: String::new(),
        guard: None,
    };
    let (id, _) = store.insert_stream_run(&run, &[], &peaks).await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&peaks)?);
    } else {
        for p in &peaks {
            println!(
                "{:<9} {:>9.1} G{}/s  ({} threads, {})",
                p.kind.label(),
                p.gflops.0,
                if p.kind == PeakKind::Int8Dot {
                    "OP"
                } else {
                    "FLOP"
                },
                p.threads,
                p.isa
            );
        }
        println!("stored: run {id}");
    }
    Ok(())
}
