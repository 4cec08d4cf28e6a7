//! `memwall predict` and `memwall bench --predict`: predictions in ink.

use super::{command_line, open_store};
use crate::args::PredictCmd;
use anyhow::{Context, Result, bail};
use memwall_core::experiments::bench::BenchPlan;
use memwall_core::experiments::predict::{self, Sheet};
use memwall_core::experiments::roof;
use memwall_core::probe::model::ModelFacts;
use memwall_core::store::Store;

/// Computes the predictions for `plan` from this machine's *stored* STREAM triad and
/// peaks, records them (hashed, chained) and prints the sheet. Nothing is measured.
pub(crate) async fn make_sheet(store: &Store, plan: &BenchPlan, efficiency: f64) -> Result<Sheet> {
    if !(efficiency > 0.0 && efficiency <= 1.5) {
        bail!(
            "--efficiency {efficiency}: give the fraction of the ceiling you expect, in (0, 1.5]"
        );
    }
    let host = memwall_core::probe::hw::host_info();
    let threads = plan.n_threads.iter().copied().max().unwrap_or(1) as usize;
    let roof = roof::machine_roof(store, &host, threads, true, &command_line())
        .await
        .context(
            "predictions use the roof measured *before* the run: run `memwall stream` once first",
        )?;
    let mut models = Vec::new();
    for p in &plan.models {
        let f = ModelFacts::open(p)?;
        let sha = memwall_core::util::sha256_file(p)
            .with_context(|| format!("hashing {}", p.display()))?;
        models.push((f, sha));
    }
    let payload = predict::build_payload(
        plan,
        &models,
        &roof.roof,
        &roof.provenance,
        &host.hostname,
        efficiency,
        &command_line(),
    );
    let sheet = predict::record_sheet(store, &payload).await?;
    eprintln!(
        "predictions recorded before the run: sheet {} at {}\n  sha256 {}\n  roof: {} ({:.1} GB/s); efficiency {}",
        sheet.id,
        sheet.created_at,
        sheet.sha256,
        roof.provenance,
        roof.roof.bandwidth.0,
        efficiency
    );
    for t in &sheet.payload.tests {
        let o = |v: Option<f64>| memwall_core::units::or_dash(v, 2);
        eprintln!(
            "  {:<40} {:<16} t{:<3} predicted {:>9} t/s (ceiling {}){}",
            t.model_filename,
            t.test,
            t.n_threads,
            o(t.predicted_tps),
            o(t.ceiling_tps),
            t.no_ceiling
                .as_ref()
                .map_or(String::new(), |r| format!(": {r}"))
        );
    }
    for r in &sheet.payload.ratios {
        eprintln!(
            "  ratio {} ÷ {} {:<12} predicted {:.3}",
            r.numerator, r.denominator, r.test, r.predicted_ratio
        );
    }
    Ok(sheet)
}

pub(crate) async fn predict(db: &std::path::Path, cmd: PredictCmd) -> Result<()> {
    let store = open_store(db).await?;
    match cmd {
        PredictCmd::Make { bench } => {
            let plan = super::bench::plan_from_args(&bench)?;
            let s = make_sheet(&store, &plan, bench.efficiency).await?;
            println!("{}", s.id);
        }
        PredictCmd::Score { sheet, run, json } => {
            let card = predict::score_run(&store, sheet, run).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&card)?);
            } else {
                print!("{}", predict::table(&card));
            }
        }
        PredictCmd::Show { sheet: Some(id) } => {
            let s = predict::load_sheet(&store, id).await?;
            println!("{}", serde_json::to_string_pretty(&s)?);
        }
        PredictCmd::Show { sheet: None } => {
            println!("| sheet | recorded | sha256 | verified |");
            println!("| ---: | --- | --- | --- |");
            for (id, at, sha) in predict::list_sheets(&store).await? {
                let ok = match predict::load_sheet(&store, id).await {
                    Ok(_) => "yes".to_string(),
                    Err(e) => format!("NO: {e}"),
                };
                println!("| {id} | {at} | {sha} | {ok} |");
            }
        }
    }
    Ok(())
}
