//! Small file helpers shared by the store, the model fetcher and exporters.

use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

/// sha256 of a file, lower-case hex. Streams the file in 1 MiB chunks.
///
/// # Errors
/// I/O errors, with the path in the message.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = File::open(path).map_err(|e| with_path(e, path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| with_path(e, path))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// sha256 of bytes, lower-case hex.
pub fn sha256_bytes(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// Adds the path to an I/O error's message.
pub fn with_path(e: std::io::Error, path: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory,
/// fsync, then rename. A crash leaves either the old file or the new one, never a
/// half-written one.
///
/// # Errors
/// I/O errors, with the path in the message.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| with_path(e, dir))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| with_path(e, dir))?;
    tmp.write_all(bytes).map_err(|e| with_path(e, path))?;
    tmp.as_file().sync_all().map_err(|e| with_path(e, path))?;
    make_readable(tmp.as_file());
    tmp.persist(path).map_err(|e| with_path(e.error, path))?;
    Ok(())
}

/// Gives a finished output file the usual 0644 mode (temporary files start 0600).
pub fn make_readable(f: &std::fs::File) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = f.set_permissions(std::fs::Permissions::from_mode(0o644));
    }
    #[cfg(not(unix))]
    let _ = f;
}

/// Current UTC time as RFC 3339 with seconds precision (`2026-11-29T13:34:17Z`).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The process's monotonic epoch: the first call's [`std::time::Instant`]. Times that
/// travel between threads in plain numbers (a timed repetition's start and end in a
/// progress event, matched against the live sampler's clock) count from it.
pub fn epoch() -> std::time::Instant {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now)
}

/// Now, in ns since [`epoch`] (the epoch is fixed first, so this never saturates).
pub fn epoch_now_ns() -> u64 {
    let e = epoch();
    std::time::Instant::now().duration_since(e).as_nanos() as u64
}

/// The instant `ns` nanoseconds after [`epoch`].
pub fn epoch_instant(ns: u64) -> std::time::Instant {
    epoch() + std::time::Duration::from_nanos(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_input() {
        // sha256("abc") from FIPS 180-2, appendix B.1.
        assert_eq!(
            sha256_bytes(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x");
        write_atomic(&p, b"abc").unwrap();
        assert_eq!(sha256_file(&p).unwrap(), sha256_bytes(b"abc"));
        let e = sha256_file(&d.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing"), "{e}");
    }
}
