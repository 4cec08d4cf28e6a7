//! `memwall export` and `memwall history`.

use super::open_store;
use crate::args::{ExportArgs, HistoryArgs};
use anyhow::{Context, Result};
use memwall_core::export::Format;
use memwall_core::store::RowFilter;
use std::io::Write;

pub(crate) async fn export(db: &std::path::Path, a: ExportArgs) -> Result<()> {
    let format = Format::parse(&a.format)
        .with_context(|| format!("--format {}: use csv, json, jsonl, md or sql", a.format))?;
    let store = open_store(db).await?;
    let rows = store
        .bench_rows(&RowFilter {
            run_id: a.run,
            model: a.model,
            ..Default::default()
        })
        .await?;
    let text = format.exporter().render(&rows);
    match a.out {
        Some(p) => {
            memwall_core::util::write_atomic(&p, text.as_bytes())?;
            eprintln!("wrote {} rows to {}", rows.len(), p.display());
        }
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(())
}

pub(crate) async fn history(db: &std::path::Path, a: HistoryArgs) -> Result<()> {
    let store = open_store(db).await?;
    if let Some(id) = a.delete {
        if !a.yes {
            eprint!("delete run {id} and all its rows? [y/N] ");
            let mut s = String::new();
            std::io::stdin().read_line(&mut s)?;
            if !matches!(s.trim(), "y" | "Y" | "yes") {
                eprintln!("kept.");
                return Ok(());
            }
        }
        store.delete_run(id).await?;
        println!("deleted run {id}");
        return Ok(());
    }
    let runs = store.runs().await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
        return Ok(());
    }
    for r in runs {
        println!(
            "{:>5}  {:<7} {}  {:>3} rows  {}  {}",
            r.id, r.kind, r.started_at, r.n_bench_rows, r.models, r.command
        );
    }
    Ok(())
}
