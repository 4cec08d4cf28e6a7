//! `memwall report`.

use crate::args::ReportArgs;
use anyhow::{Context, Result};
use memwall_core::experiments::report::{ReportOptions, report_job_at};

pub(crate) async fn report(db: &std::path::Path, a: ReportArgs) -> Result<()> {
    let rerun = match a.rerun {
        Some(m) => Some((
            m,
            std::env::current_exe().context("finding the memwall executable to re-run")?,
        )),
        None => None,
    };
    let out = report_job_at(
        db,
        ReportOptions {
            out: a.out,
            rerun,
            verify: a.verify,
        },
        |m| eprintln!("{m}"),
    )
    .await?;
    println!(
        "{}",
        memwall_core::experiments::report::render::contents(&out.report)
    );
    if let Some(v) = &out.verify {
        print!("{v}");
    }
    eprintln!(
        "wrote {} files to {} (report.md, report.html, figures.json, charts/)",
        out.files.len(),
        out.dir.display()
    );
    Ok(())
}
