//! `memwall hw`.

use anyhow::Result;
use memwall_core::probe::{hw, topology};

pub(crate) fn hw_cmd(json: bool) -> Result<()> {
    let h = hw::host_info();
    let l = hw::live_state();
    let cuda = memwall_core::probe::cuda::cuda_devices();
    let topo = topology::probe();
    if json {
        let cuda = match &cuda {
            Ok(d) => serde_json::json!({ "devices": d }),
            Err(e) => serde_json::json!({ "devices": [], "why_none": e.to_string() }),
        };
        let topo = match &topo {
            Ok(t) => serde_json::to_value(t)?,
            Err(e) => serde_json::json!({ "gpus": [], "links": [], "why_none": e.to_string() }),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"host": h, "live": l, "cuda": cuda, "topology": topo})
            )?
        );
        return Ok(());
    }
    println!(
        "cpu        {} ({} physical / {} logical cores, {})",
        h.cpu_model, h.cores_physical, h.cores_logical, h.arch
    );
    println!(
        "memory     {} installed; {} available; swap {} of {} used",
        h.ram, l.mem.available, l.mem.swap_used, l.mem.swap_total
    );
    println!(
        "llc        {}",
        h.llc.map_or("— (not reported)".into(), |b| b.to_string())
    );
    println!(
        "gpus       {}",
        if h.gpus.is_empty() {
            "—".into()
        } else {
            h.gpus.join("; ")
        }
    );
    match &cuda {
        Ok(devices) if !devices.is_empty() => {
            let cat = memwall_core::probe::devices::Devices::builtin().ok();
            for d in devices {
                let spec = cat.as_ref().and_then(|c| c.find_in(&d.name)).map_or(
                    "not in catalog/devices.toml".to_string(),
                    |s| {
                        format!(
                            "spec {} GB/s, {} (catalog/devices.toml)",
                            s.bandwidth_gbps,
                            s.peak()
                                .map_or("no compute figure".to_string(), |p| format!(
                                    "{:.1} TFLOP/s {}",
                                    p.gflops.0 / 1000.0,
                                    p.kind
                                ))
                        )
                    },
                );
                println!(
                    "cuda{}      {}: {} memory, compute capability {}, {} SMs, L2 {}, {}-bit bus at {} MHz (interface bound {:.0} GB/s), driver CUDA {}; {spec}",
                    d.ordinal,
                    d.name,
                    d.memory,
                    d.compute_capability,
                    d.multiprocessors,
                    d.l2,
                    d.memory_bus_bits,
                    d.memory_clock_khz / 1000,
                    d.interface_bandwidth().0,
                    d.driver_cuda_version
                );
            }
        }
        Ok(_) => println!("cuda       — (the driver lists no device)"),
        Err(e) => println!("cuda       — ({e})"),
    }
    match &topo {
        Ok(t) => print!("{}", topology::render(t)?),
        Err(e) => println!("links      — ({e})"),
    }
    println!("os         {} (kernel {})", h.os, h.kernel);
    println!("power      {}", l.power);
    println!("thermal    {}", l.thermal.label());
    println!(
        "swap-outs  {} pages since boot",
        l.swap_out_pages.map_or("—".into(), |p| p.to_string())
    );
    println!("memwall    {}", memwall_core::BUILD_COMMIT);
    Ok(())
}
