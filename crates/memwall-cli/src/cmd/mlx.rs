//! `memwall mlx`: the MLX engine's checks.

use crate::args::{MlxAgreeArgs, MlxCmd, MlxGenerateArgs};
use anyhow::Result;

/// Runs an `mlx` subcommand.
pub fn mlx(cmd: MlxCmd) -> Result<()> {
    match cmd {
        MlxCmd::Agree(a) => agree(a),
        MlxCmd::Generate(a) => generate(a),
    }
}

#[cfg(feature = "mlx")]
fn agree(a: MlxAgreeArgs) -> Result<()> {
    use memwall_core::experiments::agree;
    let model = super::resolve_model(&a.model)?;
    let limit = a.limit.unwrap_or(usize::MAX);
    let rows = agree::agree_job(&model, limit, |r| {
        eprintln!(
            "{}: {} (cosine {:.6})",
            r.id,
            r.first_diff
                .map_or("identical".to_string(), |p| format!("differs at {p}")),
            r.cosine
        )
    })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", agree::table(&rows));
    }
    if !agree::Summary::of(&rows).pass {
        anyhow::bail!("MLX and llama.cpp disagree beyond the thresholds (see the table)");
    }
    Ok(())
}

#[cfg(not(feature = "mlx"))]
fn agree(_: MlxAgreeArgs) -> Result<()> {
    no_mlx()
}

#[cfg(not(feature = "mlx"))]
fn no_mlx() -> Result<()> {
    anyhow::bail!(
        "this memwall was built without the MLX engine: run scripts/setup-mlx.sh, then build with `--features mlx`"
    )
}

#[cfg(feature = "mlx")]
fn generate(a: MlxGenerateArgs) -> Result<()> {
    use memwall_core::experiments::mlx_tg::generate_job;
    let model = super::resolve_model(&a.model)?;
    let t = generate_job(&model, &a.engine, a.n_gen as usize, a.repetitions as usize)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&t)?);
    } else {
        println!("{}", t.system_info);
        println!(
            "| model | engine | test | t/s (pipelined greedy) | TTFT ms |\n|---|---|---|---:|---:|\n| {} | {} | tg{} | {:.2} ± {:.2} | {:.1} |",
            model.file_name().map_or_else(
                || model.display().to_string(),
                |f| f.to_string_lossy().into()
            ),
            t.engine,
            t.n_gen,
            t.avg_ts,
            t.stddev_ts,
            t.samples_ttft_ms.iter().sum::<f64>() / t.samples_ttft_ms.len() as f64
        );
    }
    Ok(())
}

#[cfg(not(feature = "mlx"))]
fn generate(_: MlxGenerateArgs) -> Result<()> {
    no_mlx()
}
