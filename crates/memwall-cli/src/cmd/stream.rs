//! `memwall stream` and `memwall peak`.

use super::{command_line, open_store};
use crate::args::{PeakArgs, StreamArgs};
use anyhow::{Result, bail};
use memwall_core::hw;
use memwall_core::jobs;
use memwall_core::peak::{self, PeakKind};

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
    let store = open_store(db).await?;
    eprintln!(
        "STREAM: 3 arrays × {} (last-level cache {}), best of {} passes…",
        memwall_core::stream::StreamConfig::standard(host.llc, 1).array_bytes(),
        host.llc
            .map_or("unknown → fallback size".to_string(), |b| b.to_string()),
        if a.quick { 5 } else { 10 }
    );
    let out = jobs::stream_job(&store, &host, threads, a.quick, a.peaks, &command_line()).await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("| kernel | threads | best GB/s | avg GB/s | worst GB/s | bytes/elt | array |");
    println!("| ------ | ------: | --------: | -------: | ---------: | --------: | ----- |");
    for r in &out.results {
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
