//! A tiny OpenAI-style server on loopback for tests: fixed chunk timing, so the
//! metrics of a run can be checked against hand-computed values.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How the fake answers.
#[derive(Debug, Clone)]
pub struct Fake {
    /// Delay before the first chunk, ms.
    pub ttft_ms: u64,
    /// Delay between chunks, ms.
    pub gap_ms: u64,
    /// Output chunks (one token each).
    pub n_chunks: usize,
    /// Send a usage chunk.
    pub usage: bool,
    /// The first this-many completion requests get 429 with `Retry-After: 1`.
    pub reject_first: usize,
    /// Body of `GET /v1/models` (HTTP 200).
    pub models_body: String,
    /// Write each event in two pieces (split inside the JSON) with a flush between.
    pub split: bool,
    /// Stream with chunked encoding and `Keep-Alive`, then close the socket anyway
    /// once the next request arrives on it (what llama-server does, a moment after the
    /// stream): a client that reuses the connection finds it dead.
    pub close_kept_alive: bool,
}

impl Default for Fake {
    fn default() -> Fake {
        Fake {
            ttft_ms: 100,
            gap_ms: 20,
            n_chunks: 5,
            usage: true,
            reject_first: 0,
            models_body: r#"{"object":"list","data":[{"id":"fake-model","object":"model"}]}"#
                .into(),
            split: true,
            close_kept_alive: false,
        }
    }
}

/// Starts the fake on a free loopback port; returns its base URL. The server lives
/// until the test process ends.
pub fn start(f: Fake) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let f = Arc::new(f);
    let seen = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let (f, seen) = (f.clone(), seen.clone());
            std::thread::spawn(move || {
                let _ = serve(c, &f, &seen);
            });
        }
    });
    url
}

fn serve(c: TcpStream, f: &Fake, seen: &AtomicUsize) -> std::io::Result<()> {
    let mut r = BufReader::new(c.try_clone()?);
    let mut w = c;
    let mut first = String::new();
    r.read_line(&mut first)?;
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        r.read_line(&mut h)?;
        if h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    if first.starts_with("GET /v1/models") {
        let b = &f.models_body;
        let ctype = if b.starts_with('{') {
            "application/json"
        } else {
            "text/html"
        };
        write!(
            w,
            "HTTP/1.1 200 OK\r\nServer: fake\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
            b.len()
        )?;
        return Ok(());
    }
    if seen.fetch_add(1, Ordering::SeqCst) < f.reject_first {
        let b = r#"{"error":{"message":"queue full","type":"server_error","code":429}}"#;
        write!(
            w,
            "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
            b.len()
        )?;
        return Ok(());
    }
    let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let chat = req.get("messages").is_some();
    if f.close_kept_alive {
        write!(
            w,
            "HTTP/1.1 200 OK\r\nServer: fake\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nKeep-Alive: timeout=5, max=100\r\n\r\n"
        )?;
    } else {
        write!(
            w,
            "HTTP/1.1 200 OK\r\nServer: fake\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        )?;
    }
    w.flush()?;
    let ev = |w: &mut TcpStream, data: String| -> std::io::Result<()> {
        let mut s = format!("data: {data}\n\n");
        if f.close_kept_alive {
            s = format!("{:x}\r\n{s}\r\n", s.len());
            if data == "[DONE]" {
                s.push_str("0\r\n\r\n");
            }
        }
        if f.split {
            let mid = s.len() / 2;
            w.write_all(&s.as_bytes()[..mid])?;
            w.flush()?;
            w.write_all(&s.as_bytes()[mid..])?;
        } else {
            w.write_all(s.as_bytes())?;
        }
        w.flush()
    };
    // A role-only chunk first (no text: must not count as the first token).
    if chat {
        ev(&mut w, r#"{"object":"chat.completion.chunk","model":"fake-model","choices":[{"index":0,"delta":{"role":"assistant"}}]}"#.into())?;
    }
    for i in 0..f.n_chunks {
        std::thread::sleep(Duration::from_millis(if i == 0 {
            f.ttft_ms
        } else {
            f.gap_ms
        }));
        let fin = if i + 1 == f.n_chunks {
            r#""length""#
        } else {
            "null"
        };
        let d = if chat {
            format!(
                r#"{{"object":"chat.completion.chunk","model":"fake-model","system_fingerprint":"fp-1","choices":[{{"index":0,"delta":{{"content":"t{i} "}},"finish_reason":{fin}}}]}}"#
            )
        } else {
            format!(
                r#"{{"object":"text_completion","model":"fake-model","choices":[{{"index":0,"text":"t{i} ","finish_reason":{fin}}}]}}"#
            )
        };
        ev(&mut w, d)?;
    }
    if f.usage {
        ev(
            &mut w,
            format!(
                r#"{{"model":"fake-model","choices":[],"usage":{{"prompt_tokens":12,"completion_tokens":{},"total_tokens":{}}}}}"#,
                f.n_chunks,
                12 + f.n_chunks
            ),
        )?;
    }
    ev(&mut w, "[DONE]".into())?;
    if f.close_kept_alive {
        // Close only once the client has sent its next request on this connection:
        // the race that llama-server's late close loses, made certain.
        let mut next = String::new();
        r.read_line(&mut next)?;
    }
    Ok(())
}
