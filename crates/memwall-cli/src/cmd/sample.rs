//! `memwall sample`: the live counters for a few seconds, with the availability
//! list (what this machine gives, and why the rest is `—`).

use crate::args::SampleArgs;
use anyhow::Result;
use memwall_core::experiments::live::job::{SampleEvent, SampleOptions, sample_job};
use memwall_core::experiments::live::sample_line;
use memwall_core::units::or_dash;

pub(crate) async fn sample(a: SampleArgs) -> Result<()> {
    let json = a.json;
    let opts = SampleOptions {
        seconds: a.seconds,
        hz: a.hz,
    };
    let out = sample_job(opts, move |ev| {
        if json {
            return;
        }
        match ev {
            SampleEvent::Counters(c) => {
                println!("counters on this machine:");
                for x in &c {
                    println!("  {}", x.line());
                }
                println!();
            }
            SampleEvent::Sample(x) => println!("{}", sample_line(&x)),
        }
    })
    .await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let s = &out.summary;
    println!(
        "\n{} reads at {} Hz; mean power {} W ({}); peak temperature {} °C; throttling {}; live DRAM {} GB/s",
        out.recording.samples.len(),
        out.recording.hz,
        or_dash(s.mean_power_w, 1),
        if s.energy_source.is_empty() {
            s.reason.clone().unwrap_or_else(|| "—".into())
        } else {
            s.energy_source.clone()
        },
        or_dash(s.peak_temp_c, 1),
        match s.throttled {
            Some(true) => "seen",
            Some(false) => "not seen",
            None => "— (needs a temperature and a clock)",
        },
        or_dash(s.live_dram_gbps, 1),
    );
    Ok(())
}
