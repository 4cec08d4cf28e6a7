//! A [`Report`] as Markdown, self-contained HTML and the `figures.json` sidecar (pure).
//!
//! Markdown: every table row ends with a footnote naming its table, row and run; a
//! missing value prints `—` and its reason follows the table. HTML: the same tables,
//! each cell's source in its hover title, charts embedded as `data:` SVG images (no
//! external asset). The sidecar lists every printed figure and claim with its source,
//! for the independent verifier.

use super::{Cell, Report, Src};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// One printed figure or claim, as the verifier reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    /// Section anchor.
    pub section: &'static str,
    pub table_caption: String,
    /// Column header.
    pub header: String,
    /// Source row (`None` for a claim over several rows).
    pub src: Option<Src>,
    /// The Markdown footnote of the row (`None` without a source).
    pub footnote: Option<String>,
    /// The printed cells of the row (its labels).
    pub labels: Vec<String>,
    #[serde(flatten)]
    pub cell: Cell,
}

/// Every figure and claim the report prints, in document order.
pub fn figures(r: &Report) -> Vec<Figure> {
    let mut out = Vec::new();
    for s in &r.sections {
        for t in &s.tables {
            for row in &t.rows {
                let labels: Vec<String> = row.cells.iter().map(|c| c.text().to_string()).collect();
                for (h, c) in t.headers.iter().zip(&row.cells) {
                    if matches!(c, Cell::Num { .. } | Cell::Claim { .. }) {
                        out.push(Figure {
                            section: s.id,
                            table_caption: t.caption.clone(),
                            header: h.clone(),
                            src: row.src.clone(),
                            footnote: row.src.as_ref().map(Src::label),
                            labels: labels.clone(),
                            cell: c.clone(),
                        });
                    }
                }
            }
        }
    }
    out
}

/// One printed table row as the verifier reads it: its printed cells and source.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrintedRow {
    /// Source row (`None` for a row of labels and claims over several rows).
    pub src: Option<Src>,
    /// The printed cells.
    pub labels: Vec<String>,
}

/// One printed table, as the verifier reads it (to check which rows a table holds,
/// and the label columns such as `host`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrintedTable {
    /// Section anchor.
    pub section: &'static str,
    pub caption: String,
    /// Column headers.
    pub headers: Vec<String>,
    /// Rows, in printed order.
    pub rows: Vec<PrintedRow>,
}

/// Every table the report prints, in document order.
pub fn tables(r: &Report) -> Vec<PrintedTable> {
    r.sections
        .iter()
        .flat_map(|s| {
            s.tables.iter().map(|t| PrintedTable {
                section: s.id,
                caption: t.caption.clone(),
                headers: t.headers.clone(),
                rows: t
                    .rows
                    .iter()
                    .map(|row| PrintedRow {
                        src: row.src.clone(),
                        labels: row.cells.iter().map(|c| c.text().to_string()).collect(),
                    })
                    .collect(),
            })
        })
        .collect()
}

/// The sidecar file's content: `{"db": …, "figures": [...], "tables": [...]}`,
/// pretty-printed.
pub fn figures_json(r: &Report) -> String {
    #[derive(Serialize)]
    struct Sidecar<'a> {
        db: &'a str,
        figures: Vec<Figure>,
        tables: Vec<PrintedTable>,
    }
    serde_json::to_string_pretty(&Sidecar {
        db: &r.db,
        figures: figures(r),
        tables: tables(r),
    })
    .expect("plain data serializes")
        + "\n"
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The table of contents: each section with the stored rows behind it.
pub fn contents(r: &Report) -> String {
    let mut s = String::from("| section | stored rows |\n| --- | --: |\n");
    for (i, sec) in r.sections.iter().enumerate() {
        s.push_str(&format!(
            "| [{}. {}](#{}) | {} |\n",
            i + 1,
            md_cell(&sec.title),
            sec.id,
            sec.n_rows
        ));
    }
    s
}

/// The report as Markdown. Charts are linked as `charts/<stem>.svg` (and `.png`).
pub fn markdown(r: &Report) -> String {
    let mut out = String::from("# memwall report\n\n");
    out.push_str(&format!(
        "Generated from the store `{}`: every figure below is read from a stored row (its \
         table, row and run are in the row's footnote) or computed from that row's columns; \
         `—` marks a value that was not measured, with the reason under its table.\n\n",
        r.db
    ));
    out.push_str("## Contents\n\n");
    out.push_str(&contents(r));
    let mut sources = BTreeSet::new();
    for (i, sec) in r.sections.iter().enumerate() {
        out.push_str(&format!(
            "\n<a id=\"{}\"></a>\n\n## {}. {}\n\n",
            sec.id,
            i + 1,
            sec.title
        ));
        if let Some(why) = &sec.not_measured {
            out.push_str(&format!("**Not measured:** {why}.\n"));
            continue;
        }
        for p in &sec.text {
            out.push_str(p);
            out.push_str("\n\n");
        }
        for t in &sec.tables {
            out.push_str(&format!("**{}**\n\n", t.caption));
            out.push_str(&format!(
                "| {} | source |\n",
                t.headers
                    .iter()
                    .map(|h| md_cell(h))
                    .collect::<Vec<_>>()
                    .join(" | ")
            ));
            out.push_str(&format!(
                "|{}---|\n",
                t.headers.iter().map(|_| " --- |").collect::<String>()
            ));
            let mut reasons = BTreeSet::new();
            for row in &t.rows {
                let cells: Vec<String> = row
                    .cells
                    .iter()
                    .map(|c| {
                        if let Cell::Missing { reason } = c {
                            reasons.insert(reason.clone());
                        }
                        md_cell(c.text())
                    })
                    .collect();
                let src = match &row.src {
                    Some(s) => {
                        sources.insert(s.clone());
                        format!("[^{}]", s.label())
                    }
                    None => "computed from the rows above".into(),
                };
                out.push_str(&format!("| {} | {} |\n", cells.join(" | "), src));
            }
            out.push('\n');
            for why in reasons {
                out.push_str(&format!("—: {why}.  \n"));
            }
            out.push('\n');
        }
        for c in &sec.charts {
            out.push_str(&format!(
                "![{}](charts/{}.svg)  \n*{}* (runs {}; also [PNG](charts/{}.png))\n\n",
                c.title,
                c.stem,
                c.title,
                join(&c.runs),
                c.stem
            ));
        }
    }
    if !sources.is_empty() {
        out.push_str("\n## Sources\n\n");
        for s in &sources {
            out.push_str(&format!("[^{}]: {}\n", s.label(), s.describe()));
        }
    }
    out
}

fn join(v: &[i64]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const CSS: &str = "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1em;font-size:13px}\
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}\
td.t,th{text-align:left}td.m{color:#888}caption{text-align:left;font-weight:bold;padding:4px 0}\
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}.nm{color:#a40}";

/// The report as one self-contained HTML page: `svg` maps each chart stem to its SVG
/// text, embedded as a `data:` image.
pub fn html(r: &Report, svg: &BTreeMap<String, String>) -> String {
    let mut out = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<title>memwall report</title><style>");
    out.push_str(CSS);
    out.push_str("</style></head><body>\n<h1>memwall report</h1>\n");
    out.push_str(&format!(
        "<p>Generated from the store <code>{}</code>. Hover a figure for the table, row and run it came from; \
         — marks a value that was not measured (hover for the reason).</p>\n",
        esc(&r.db)
    ));
    out.push_str("<h2>Contents</h2>\n<table><tr><th>section</th><th>stored rows</th></tr>\n");
    for (i, s) in r.sections.iter().enumerate() {
        out.push_str(&format!(
            "<tr><td class=\"t\"><a href=\"#{}\">{}. {}</a></td><td>{}</td></tr>\n",
            s.id,
            i + 1,
            esc(&s.title),
            s.n_rows
        ));
    }
    out.push_str("</table>\n");
    for (i, s) in r.sections.iter().enumerate() {
        out.push_str(&format!(
            "<section id=\"{}\"><h2>{}. {}</h2>\n",
            s.id,
            i + 1,
            esc(&s.title)
        ));
        if let Some(why) = &s.not_measured {
            out.push_str(&format!(
                "<p class=\"nm\"><b>Not measured:</b> {}.</p></section>\n",
                esc(why)
            ));
            continue;
        }
        for p in &s.text {
            out.push_str(&format!("<p>{}</p>\n", esc(p)));
        }
        for t in &s.tables {
            out.push_str(&format!(
                "<table><caption>{}</caption><tr>",
                esc(&t.caption)
            ));
            for h in &t.headers {
                out.push_str(&format!("<th>{}</th>", esc(h)));
            }
            out.push_str("<th>source</th></tr>\n");
            for row in &t.rows {
                out.push_str("<tr>");
                for c in &row.cells {
                    let (class, title) = match (c, &row.src) {
                        (Cell::Text(_), _) => ("t", String::new()),
                        (Cell::Num { column, .. }, Some(src)) => (
                            "n",
                            format!(
                                "{}.{} · row {} · run {}",
                                src.table, column, src.row_id, src.run_id
                            ),
                        ),
                        (Cell::Num { column, .. }, None) => ("n", column.clone()),
                        (Cell::Claim { claim, .. }, Some(src)) => {
                            ("t", format!("{claim}, computed from {}", src.describe()))
                        }
                        (Cell::Claim { claim, .. }, None) => {
                            ("t", format!("{claim}, computed from the rows above"))
                        }
                        (Cell::Missing { reason }, _) => ("m", reason.clone()),
                    };
                    if title.is_empty() {
                        out.push_str(&format!("<td class=\"{class}\">{}</td>", esc(c.text())));
                    } else {
                        out.push_str(&format!(
                            "<td class=\"{class}\" title=\"{}\">{}</td>",
                            esc(&title),
                            esc(c.text())
                        ));
                    }
                }
                let src = row
                    .src
                    .as_ref()
                    .map_or_else(|| "computed".to_string(), |s| s.describe());
                out.push_str(&format!("<td class=\"t\">{}</td></tr>\n", esc(&src)));
            }
            out.push_str("</table>\n");
        }
        for c in &s.charts {
            let data = svg
                .get(&c.stem)
                .map(|s| base64(s.as_bytes()))
                .unwrap_or_default();
            out.push_str(&format!(
                "<figure><img data-chart=\"{stem}\" alt=\"{t}\" title=\"{t} (runs {runs})\" src=\"data:image/svg+xml;base64,{data}\"><figcaption>{t} (runs {runs})</figcaption></figure>\n",
                stem = esc(&c.stem),
                t = esc(&c.title),
                runs = join(&c.runs),
            ));
        }
        out.push_str("</section>\n");
    }
    out.push_str("</body></html>\n");
    out
}

/// The text of `<dir>/report.html`, as [`super::report_job`] wrote it.
///
/// # Errors
/// [`super::ReportError::Io`] naming the file.
pub fn html_of(dir: &std::path::Path) -> Result<String, super::ReportError> {
    let p = dir.join("report.html");
    std::fs::read_to_string(&p).map_err(|e| super::ReportError::Io {
        path: p.display().to_string(),
        msg: e.to_string(),
    })
}

/// Standard base64 (RFC 4648, with padding).
pub fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        s.push(A[(n >> 18) as usize & 63] as char);
        s.push(A[(n >> 12) as usize & 63] as char);
        s.push(if c.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        s.push(if c.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_test_vectors() {
        // RFC 4648 §10.
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o);
        }
    }
}
