//! `memwall hw`.

use anyhow::Result;
use memwall_core::probe::hw;

pub(crate) fn hw_cmd(json: bool) -> Result<()> {
    let h = hw::host_info();
    let l = hw::live_state();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"host": h, "live": l}))?
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
