//! An incremental Server-Sent Events parser (WHATWG HTML, "Server-sent events",
//! §9.2.6 "Interpreting an event stream"): bytes go in as they arrive, in pieces cut
//! anywhere (inside a line, inside a UTF-8 character, between `\r` and `\n`), and
//! each event comes out as soon as the blank line that ends it has arrived, so the
//! caller can stamp it with the arrival time of the read that completed it.
//!
//! Only what OpenAI-style streams use is kept: `data:` lines (joined with `\n`) and
//! the `event:` name; comments (`:` lines), `id:` and `retry:` are skipped.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when the server sent one.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n` (a single leading space after the colon is
    /// dropped, as the spec says).
    pub data: String,
}

/// The parser's state between reads.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Option<String>,
    event: Option<String>,
    /// The previous byte was `\r`: a following `\n` belongs to the same line end.
    after_cr: bool,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds the next bytes; returns the events they completed, in order.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut out);
                }
                b'\n' => self.end_line(&mut out),
                _ => self.line.push(b),
            }
        }
        out
    }

    /// True when bytes of an unfinished event are buffered (a stream that ends here
    /// was cut off mid-event).
    pub fn pending(&self) -> bool {
        !self.line.is_empty() || self.data.is_some()
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
        if line.is_empty() {
            if let Some(data) = self.data.take() {
                out.push(SseEvent {
                    event: self.event.take(),
                    data,
                });
            }
            self.event = None;
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.find(':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (line.as_str(), ""),
        };
        match field {
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "event" => self.event = Some(value.to_string()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str = "data: {\"a\":1}\n\n: keep-alive comment\n\nevent: done\ndata: x\ndata:y\r\n\r\ndata: [DONE]\r\r";

    fn whole() -> Vec<SseEvent> {
        vec![
            SseEvent {
                event: None,
                data: "{\"a\":1}".into(),
            },
            SseEvent {
                event: Some("done".into()),
                data: "x\ny".into(),
            },
            SseEvent {
                event: None,
                data: "[DONE]".into(),
            },
        ]
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let bytes = STREAM.as_bytes();
        for i in 0..=bytes.len() {
            for j in i..=bytes.len() {
                let mut p = SseParser::new();
                let mut got = p.feed(&bytes[..i]);
                got.extend(p.feed(&bytes[i..j]));
                got.extend(p.feed(&bytes[j..]));
                assert_eq!(got, whole(), "split at {i}, {j}");
                assert!(!p.pending());
            }
        }
    }

    #[test]
    fn an_event_is_returned_by_the_read_that_completes_it() {
        let mut p = SseParser::new();
        assert!(p.feed(b"data: {\"a\"").is_empty());
        assert!(p.feed(b":1}\n").is_empty(), "no blank line yet");
        assert!(p.pending());
        assert_eq!(p.feed(b"\n").len(), 1);
        assert!(!p.pending());
    }

    #[test]
    fn a_multibyte_character_split_across_reads_survives() {
        let s = "data: é€😀\n\n".as_bytes();
        let mut p = SseParser::new();
        let mut got = Vec::new();
        for b in s {
            got.extend(p.feed(std::slice::from_ref(b)));
        }
        assert_eq!(got[0].data, "é€😀");
    }
}
