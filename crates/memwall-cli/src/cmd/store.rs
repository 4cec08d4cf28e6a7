//! `memwall export` and `memwall history`.

use super::open_store;
use crate::args::{ExportArgs, HistoryArgs};
use anyhow::{Context, Result};
use memwall_core::present::export::Format;
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
    let text =
        memwall_core::experiments::live::store::render_with_energy(&store, &rows, format).await?;
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
        let deps = if a.cascade {
            store.dependent_runs(id).await?
        } else {
            Vec::new()
        };
        let list = |v: &[i64]| {
            v.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !a.yes {
            if deps.is_empty() {
                eprint!("delete run {id} and all its rows? [y/N] ");
            } else {
                eprint!(
                    "delete run {id}, all its rows, and the spec-bench run(s) {} whose speedups it unlocked? [y/N] ",
                    list(&deps)
                );
            }
            let mut s = String::new();
            std::io::stdin().read_line(&mut s)?;
            if !matches!(s.trim(), "y" | "Y" | "yes") {
                eprintln!("kept.");
                return Ok(());
            }
        }
        if a.cascade {
            let deleted = store.delete_run_cascade(id).await?;
            if deleted.is_empty() {
                println!("deleted run {id}");
            } else {
                println!(
                    "deleted run {id} and the spec-bench run(s) {} whose speedup rows it unlocked",
                    list(&deleted)
                );
            }
        } else {
            store.delete_run(id).await?;
            println!("deleted run {id}");
        }
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
