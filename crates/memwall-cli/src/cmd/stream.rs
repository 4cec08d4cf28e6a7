//! `memwall stream` and `memwall peak`.

use super::{command_line, open_store};
use crate::args::{IsaArg, PeakArgs, StreamArgs};
use anyhow::{Result, bail};
use memwall_core::experiments::machine_roof;
use memwall_core::measure::peak::{self, PeakKind};
use memwall_core::measure::stream::{self, StreamConfig, StreamResult};
use memwall_core::probe::hw;
use memwall_core::units::Bytes;

pub(crate) async fn stream(db: &std::path::Path, a: StreamArgs) -> Result<()> {
    let host = hw::host_info();
    if a.peer {
        return peer_copy(&a);
    }
    if a.gpu {
        return gpu_stream(db, &host, &a).await;
    }
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
        let n = a.array_size.expect("below the rule only when given");
        let results = machine_roof::stream_unstored_job(threads, a.quick, n).await?;
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
    let out = machine_roof::stream_job_sized(
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
        println!(
            "peak {}: {:.1} {unit} ({} threads, {}; bound {:.1} {unit})",
            p.kind.label(),
            p.gflops.0,
            p.threads,
            p.isa,
            p.bound.gflops.0,
            unit = p.kind.unit()
        );
    }
    println!(
        "validated: arrays hold STREAM's expected values. GB/s = 10^9 B/s. stored: run {}",
        out.run_id
    );
    Ok(())
}

async fn gpu_stream(db: &std::path::Path, host: &hw::HostInfo, a: &StreamArgs) -> Result<()> {
    if a.array_size.is_some_and(|n| n < 2) {
        bail!("--array-size must be at least 2 elements");
    }
    eprintln!(
        "GPU STREAM on CUDA device {}: 3 device arrays, best of 10 passes…",
        a.gpu_device
    );
    let store = open_store(db).await?;
    let out = machine_roof::gpu_stream_job(
        &store,
        host,
        a.gpu_device,
        a.array_size,
        10,
        &command_line(),
    )
    .await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let d = &out.result.device;
    println!(
        "device: {} (CUDA{}, compute capability {}, {} SMs, L2 {}, memory {}, interface bound {:.0} GB/s)",
        d.name,
        d.ordinal,
        d.compute_capability,
        d.multiprocessors,
        d.l2,
        d.memory,
        d.interface_bandwidth().0
    );
    print_table(std::slice::from_ref(&out.result.stream));
    println!(
        "kernels: CUDA C compiled by NVRTC, {} doubles per thread, {} threads per block, timed with CUDA events. validated: arrays hold STREAM's expected values. GB/s = 10^9 B/s. stored: run {} as device {:?}",
        memwall_core::measure::gpu_stream::VECTOR,
        memwall_core::measure::gpu_stream::BLOCK,
        out.run_id,
        out.result.device_label()
    );
    Ok(())
}

/// `memwall stream --gpu --peer`: copies between every ordered pair of CUDA devices.
fn peer_copy(a: &StreamArgs) -> Result<()> {
    use memwall_core::measure::peer_copy::{self, PeerCopyConfig};
    let cfg = PeerCopyConfig::default();
    eprintln!(
        "peer copies between every pair of CUDA devices: {} MiB bulk and {:?} B small copies, {} timed each…",
        cfg.bulk_bytes >> 20,
        cfg.small_bytes,
        cfg.reps
    );
    let r = peer_copy::run(&cfg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    print!("{}", peer_copy::render(&r));
    println!(
        "cuMemcpyPeerAsync on the destination's stream, timed with CUDA events; GB/s = 10^9 B/s. not stored (no table holds peer copies yet): keep the --json output; `memwall calc --link-latency-us --link-gbps` takes a pair's figures"
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
        let copy = if isa == stream::Isa::Portable {
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
    let forced = match a.isa {
        IsaArg::Auto => None,
        IsaArg::Avx512 => Some(peak::Isa::Avx512),
        IsaArg::Avx2 => Some(peak::Isa::Avx2),
        IsaArg::Neon => Some(peak::Isa::Neon),
        IsaArg::Scalar => Some(peak::Isa::Scalar),
    };
    let store = open_store(db).await?;
    let out = machine_roof::peak_job(&store, &host, t, forced, &command_line()).await?;
    let (peaks, lacking) = (&out.peaks, &out.lacking);
    let stored = match out.run_id {
        None => "not stored (a forced lower path is not this CPU's roof)".to_string(),
        Some(id) if out.lower_not_stored => {
            format!("stored: run {id} (forced lower paths not stored)")
        }
        Some(id) => format!("stored: run {id}"),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&peaks)?);
        return Ok(());
    }
    println!("| peak | path | threads | measured | bound | bound arithmetic |");
    println!("| ---- | ---- | ------: | -------: | ----: | ---------------- |");
    for p in peaks {
        println!(
            "| {} | {} | {} | {:.1} {unit} | {:.1} {unit} | {} |",
            p.kind.label(),
            p.isa,
            p.threads,
            p.gflops.0,
            p.bound.gflops.0,
            p.bound.formula(),
            unit = p.kind.unit()
        );
    }
    for (k, i) in lacking {
        println!(
            "| {} | {} | {t} | — | — | not measured: the path needs {} |",
            k.label(),
            i.path(*k),
            i.needs(*k)
        );
    }
    let paths = PeakKind::ALL
        .iter()
        .map(|&k| {
            let names: Vec<_> = peak::supported_paths(k).iter().map(|i| i.name()).collect();
            format!("{} {}", k.label(), names.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ");
    println!("paths on this CPU (force one with --isa): {paths}");
    println!(
        "bound = cores × clock × lanes × ops per lane × issue ports (see memwall_core::measure::peak::Isa::limits); a rate above it is refused. {stored}"
    );
    Ok(())
}
