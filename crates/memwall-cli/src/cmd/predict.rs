//! `memwall predict`: make, score and show prediction sheets (the sheet job, which
//! `memwall bench --predict` calls too, is in core).

use super::{command_line, open_store};
use crate::args::PredictCmd;
use anyhow::Result;
use memwall_core::experiments::predict::{self, job::sheet_job};

pub(crate) async fn predict(db: &std::path::Path, cmd: PredictCmd) -> Result<()> {
    let store = open_store(db).await?;
    match cmd {
        PredictCmd::Make { bench } => {
            let plan = super::bench::plan_from_args(&bench)?;
            let s = sheet_job(&store, &plan, bench.efficiency, &command_line()).await?;
            eprint!("{}", predict::sheet_text(&s));
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
