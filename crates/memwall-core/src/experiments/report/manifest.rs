//! `memwall report --rerun MANIFEST`: the experiments to re-run before the report is
//! regenerated (the study's `make all`). A manifest is TOML:
//!
//! ```toml
//! [[experiment]]
//! name = "stream"                 # unique, for progress and errors
//! args = ["stream", "-t", "2"]    # a memwall command line, without `memwall` and `--db`
//! ```
//!
//! Each experiment runs as `memwall --db <the report's store> <args…>`, so it goes
//! through the same job, guard and store as when typed; the first failure stops the
//! re-run with its exit status and output.

use super::ReportError;
use serde::Deserialize;
use std::path::Path;

/// A parsed, validated manifest.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The experiments, in the order they run.
    #[serde(default)]
    pub experiment: Vec<Experiment>,
}

/// One experiment of a manifest.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    /// Its name (unique in the manifest).
    pub name: String,
    /// The memwall command line, without the program name and `--db`.
    pub args: Vec<String>,
}

/// Commands a manifest may run: the ones that measure or score.
pub const RERUNNABLE: &[&str] = &[
    "stream", "peak", "bench", "kv", "frontier", "spec", "predict",
];

impl Manifest {
    /// Parses and checks a manifest: at least one experiment, unique names, each a
    /// command that measures (`RERUNNABLE`), no `--db` of its own.
    ///
    /// # Errors
    /// [`ReportError::Manifest`] naming the file, the experiment and the fix.
    pub fn parse(path: &Path, text: &str) -> Result<Manifest, ReportError> {
        let bad = |problem: String| ReportError::Manifest {
            path: path.display().to_string(),
            problem,
        };
        let m: Manifest = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        if m.experiment.is_empty() {
            return Err(bad(
                "no [[experiment]]: add one with name = \"…\" and args = [\"bench\", …]".into(),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for e in &m.experiment {
            if !seen.insert(e.name.as_str()) {
                return Err(bad(format!(
                    "experiment name {:?} appears twice: names must be unique",
                    e.name
                )));
            }
            match e.args.first() {
                Some(c) if RERUNNABLE.contains(&c.as_str()) => {}
                Some(c) => {
                    return Err(bad(format!(
                        "experiment {:?}: args start with {c:?}, which is not a measuring command; use one of {}",
                        e.name,
                        RERUNNABLE.join(", ")
                    )));
                }
                None => {
                    return Err(bad(format!(
                        "experiment {:?}: args is empty: give the command line, e.g. [\"bench\", \"-p\", \"512\"]",
                        e.name
                    )));
                }
            }
            if e.args.iter().any(|a| a == "--db" || a.starts_with("--db=")) {
                return Err(bad(format!(
                    "experiment {:?}: remove --db: every experiment writes to the report's store",
                    e.name
                )));
            }
        }
        Ok(m)
    }

    /// Reads and parses `path`.
    ///
    /// # Errors
    /// [`ReportError::Manifest`].
    pub fn load(path: &Path) -> Result<Manifest, ReportError> {
        let text = std::fs::read_to_string(path).map_err(|e| ReportError::Manifest {
            path: path.display().to_string(),
            problem: e.to_string(),
        })?;
        Manifest::parse(path, &text)
    }
}

/// Runs one experiment: `exe --db db args…`, waiting for it (its output is captured).
///
/// # Errors
/// [`ReportError::Rerun`] with its exit status and the last lines of its output.
pub fn run_one(manifest: &Path, exe: &Path, db: &Path, e: &Experiment) -> Result<(), ReportError> {
    let out = std::process::Command::new(exe)
        .arg("--db")
        .arg(db)
        .args(&e.args)
        .output()
        .map_err(|err| ReportError::Rerun {
            path: manifest.display().to_string(),
            name: e.name.clone(),
            msg: format!("cannot start {}: {err}", exe.display()),
        })?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = err.lines().rev().take(8).collect();
    Err(ReportError::Rerun {
        path: manifest.display().to_string(),
        name: e.name.clone(),
        msg: format!(
            "{}: {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Manifest::parse(Path::new("m.toml"), text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_manifest_lists_measuring_commands_with_unique_names() {
        let m = Manifest::parse(
            Path::new("m.toml"),
            "[[experiment]]\nname = \"s\"\nargs = [\"stream\"]\n[[experiment]]\nname = \"b\"\nargs = [\"bench\", \"-p\", \"32\"]\n",
        )
        .unwrap();
        assert_eq!(m.experiment.len(), 2);
        assert_eq!(m.experiment[1].args, ["bench", "-p", "32"]);
        assert!(err("").contains("no [[experiment]]"));
        assert!(
            err("[[experiment]]\nname = \"a\"\nargs = [\"report\"]\n")
                .contains("not a measuring command")
        );
        assert!(err("[[experiment]]\nname = \"a\"\nargs = []\n").contains("args is empty"));
        assert!(
            err("[[experiment]]\nname = \"a\"\nargs = [\"stream\"]\n[[experiment]]\nname = \"a\"\nargs = [\"peak\"]\n")
                .contains("appears twice")
        );
        assert!(
            err("[[experiment]]\nname = \"a\"\nargs = [\"stream\", \"--db\", \"x\"]\n")
                .contains("remove --db")
        );
        assert!(err("[[experiment]]\nname = \"a\"\nargz = [\"stream\"]\n").contains("m.toml"));
    }
}
