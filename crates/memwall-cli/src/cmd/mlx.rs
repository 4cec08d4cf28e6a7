//! `memwall mlx`: the MLX engine's checks.

use crate::args::{MlxAgreeArgs, MlxCmd};
use anyhow::Result;

/// Runs an `mlx` subcommand.
pub fn mlx(cmd: MlxCmd) -> Result<()> {
    match cmd {
        MlxCmd::Agree(a) => agree(a),
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
    anyhow::bail!(
        "this memwall was built without the MLX engine: run scripts/setup-mlx.sh, then build with `--features mlx`"
    )
}
