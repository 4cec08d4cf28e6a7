//! `memwall push`.

use crate::args::PushArgs;
use anyhow::{Result, bail};
use memwall_core::store::postgres::push_job;

pub(crate) async fn push(db: &std::path::Path, a: PushArgs) -> Result<()> {
    let out = push_job(db, &a.to, |m| eprintln!("{m}")).await?;
    println!("{out}");
    if !out.failed.is_empty() {
        bail!(
            "{} run(s) could not be pushed and were rolled back (their errors are above); the others were pushed",
            out.failed.len()
        );
    }
    Ok(())
}
