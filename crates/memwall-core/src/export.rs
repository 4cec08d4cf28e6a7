//! Exporters: one trait, one implementation per format (CSV, JSON, JSONL,
//! Markdown, SQL), chosen by [`Format`] (llama-bench's printers; hyperfine's
//! `export/`). Every exporter walks [`BenchRecord::fields`]; none computes.

use crate::bench::record::{BenchRecord, Cell};
use crate::units::or_dash;
use std::io::{self, Write};

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Comma-separated, header row, lists space-separated (llama-bench style).
    Csv,
    /// One JSON array of objects.
    Json,
    /// One JSON object per line.
    Jsonl,
    /// A Markdown table for reading.
    Md,
    /// `CREATE TABLE IF NOT EXISTS` + `INSERT` statements (SQLite dialect).
    Sql,
}

impl Format {
    /// Parses `csv|json|jsonl|md|sql`.
    pub fn parse(s: &str) -> Option<Format> {
        Some(match s.to_ascii_lowercase().as_str() {
            "csv" => Format::Csv,
            "json" => Format::Json,
            "jsonl" => Format::Jsonl,
            "md" | "markdown" => Format::Md,
            "sql" => Format::Sql,
            _ => return None,
        })
    }
    /// File extension.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Jsonl => "jsonl",
            Format::Md => "md",
            Format::Sql => "sql",
        }
    }
    /// The exporter for this format.
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Format::Csv => Box::new(Csv),
            Format::Json => Box::new(Json),
            Format::Jsonl => Box::new(Jsonl),
            Format::Md => Box::new(Markdown),
            Format::Sql => Box::new(Sql),
        }
    }
}

/// Writes records in one format.
pub trait Exporter {
    /// Writes all `rows` to `out`.
    ///
    /// # Errors
    /// I/O errors of `out`.
    fn write(&self, rows: &[BenchRecord], out: &mut dyn Write) -> io::Result<()>;

    /// Renders to a string.
    fn render(&self, rows: &[BenchRecord]) -> String {
        let mut v = Vec::new();
        self.write(rows, &mut v)
            .expect("writing to a Vec cannot fail");
        String::from_utf8(v).expect("exporters write UTF-8")
    }
}

/// CSV exporter.
pub struct Csv;
impl Exporter for Csv {
    fn write(&self, rows: &[BenchRecord], out: &mut dyn Write) -> io::Result<()> {
        let mut w = csv::Writer::from_writer(out);
        w.write_record(BenchRecord::column_names())?;
        for r in rows {
            w.write_record(r.fields().iter().map(|(_, _, c)| c.to_text()))?;
        }
        w.flush()
    }
}

/// JSON array exporter.
pub struct Json;
impl Exporter for Json {
    fn write(&self, rows: &[BenchRecord], out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, rows)?;
        writeln!(out)
    }
}

/// JSON-lines exporter.
pub struct Jsonl;
impl Exporter for Jsonl {
    fn write(&self, rows: &[BenchRecord], out: &mut dyn Write) -> io::Result<()> {
        for r in rows {
            serde_json::to_writer(&mut *out, r)?;
            writeln!(out)?;
        }
        Ok(())
    }
}

/// Markdown table: llama-bench's columns plus the roofline placement.
pub struct Markdown;

/// The columns of the human table: `(header, right-aligned)`.
pub const TABLE_HEADERS: [(&str, bool); 13] = [
    ("model", false),
    ("size", true),
    ("params", true),
    ("backend", false),
    ("threads", true),
    ("test", false),
    ("t/s", true),
    ("ceiling t/s", true),
    ("achieved", true),
    ("read ceiling t/s", true),
    ("achieved (read)", true),
    ("implied GB/s", true),
    ("warnings", false),
];

/// One row of the human table, formatted.
pub fn table_row(r: &BenchRecord) -> Vec<String> {
    let backend = r.backend.split(';').next().unwrap_or("").trim().to_string();
    vec![
        if r.synthetic {
            format!("{} (SYNTHETIC)", r.model_type)
        } else {
            r.model_type.clone()
        },
        format!("{:.2} GiB", r.model_size as f64 / crate::units::GIB),
        format!("{:.2} B", r.model_n_params as f64 / 1e9),
        format!("{} {}", r.engine, backend),
        r.n_threads.to_string(),
        r.test_label(),
        if r.avg_ts.is_finite() {
            format!("{:.2} ± {:.2}", r.avg_ts, r.stddev_ts)
        } else {
            "—".into()
        },
        or_dash(Some(r.ceiling_ts), 1),
        if r.achieved.is_finite() {
            format!("{:.1}%", r.achieved * 100.0)
        } else {
            "—".into()
        },
        or_dash(r.decode_ceiling_ts_read, 1),
        r.achieved_read
            .filter(|x| x.is_finite())
            .map_or("—".into(), |x| format!("{:.1}%", x * 100.0)),
        or_dash(r.implied_bandwidth_gbps, 1),
        if r.warnings.is_empty() {
            "".into()
        } else {
            r.warnings.clone()
        },
    ]
}

impl Exporter for Markdown {
    fn write(&self, rows: &[BenchRecord], out: &mut dyn Write) -> io::Result<()> {
        let cells: Vec<Vec<String>> = rows.iter().map(table_row).collect();
        let mut widths: Vec<usize> = TABLE_HEADERS
            .iter()
            .map(|(h, _)| h.chars().count())
            .collect();
        for row in &cells {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |vals: Vec<String>| -> String {
            let parts: Vec<String> = vals
                .iter()
                .zip(&widths)
                .zip(TABLE_HEADERS.iter())
                .map(|((v, w), (_, right))| {
                    let pad = w - v.chars().count();
                    if *right {
                        format!("{}{v}", " ".repeat(pad))
                    } else {
                        format!("{v}{}", " ".repeat(pad))
                    }
                })
                .collect();
            format!("| {} |", parts.join(" | "))
        };
        writeln!(
            out,
            "{}",
            line(TABLE_HEADERS.iter().map(|(h, _)| h.to_string()).collect())
        )?;
        let sep: Vec<String> = widths
            .iter()
            .zip(TABLE_HEADERS.iter())
            .map(|(w, (_, right))| {
                if *right {
                    format!("{}:", "-".repeat(w - 1))
                } else {
                    "-".repeat(*w)
                }
            })
            .collect();
        writeln!(out, "| {} |", sep.join(" | "))?;
        for row in cells {
            writeln!(out, "{}", line(row))?;
        }
        Ok(())
    }
}

/// SQL exporter.
pub struct Sql;

fn sql_literal(c: &Cell) -> String {
    match c {
        Cell::Int(v) => v.to_string(),
        Cell::Real(v) => format!("{v}"),
        Cell::Null => "NULL".into(),
        Cell::Text(s) => format!("'{}'", s.replace('\'', "''")),
        Cell::Ints(v) => format!("'{}'", serde_json::to_string(v).expect("serialize")),
        Cell::Reals(v) => format!("'{}'", serde_json::to_string(v).expect("serialize")),
    }
}

impl Exporter for Sql {
    fn write(&self, rows: &[BenchRecord], out: &mut dyn Write) -> io::Result<()> {
        let ex = BenchRecord::example();
        let cols: Vec<String> = ex
            .fields()
            .iter()
            .map(|(n, _, c)| format!("  {n} {}", c.sql_type()))
            .collect();
        writeln!(
            out,
            "CREATE TABLE IF NOT EXISTS bench_results (\n{}\n);",
            cols.join(",\n")
        )?;
        for r in rows {
            let f = r.fields();
            writeln!(
                out,
                "INSERT INTO bench_results ({}) VALUES ({});",
                f.iter().map(|(n, _, _)| *n).collect::<Vec<_>>().join(", "),
                f.iter()
                    .map(|(_, _, c)| sql_literal(c))
                    .collect::<Vec<_>>()
                    .join(", ")
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<BenchRecord> {
        let a = BenchRecord::example();
        let b = BenchRecord {
            id: 2,
            n_prompt: 512,
            n_gen: 0,
            implied_bandwidth_gbps: None,
            model_filename: "it's.gguf".into(),
            ..BenchRecord::example()
        };
        vec![a, b]
    }

    #[test]
    fn csv_has_llama_bench_header_and_space_separated_samples() {
        let s = Csv.render(&rows());
        let mut rdr = csv::Reader::from_reader(s.as_bytes());
        let h = rdr.headers().unwrap().clone();
        assert_eq!(h.iter().collect::<Vec<_>>(), BenchRecord::column_names());
        let recs: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
        let idx = |n: &str| h.iter().position(|x| x == n).unwrap();
        assert_eq!(&recs[0][idx("samples_ns")], "1990000000 2010000000");
        assert_eq!(&recs[0][idx("avg_ts")], "64");
        assert_eq!(
            &recs[1][idx("implied_bandwidth_gbps")],
            "",
            "not measured → empty"
        );
    }

    #[test]
    fn json_and_jsonl_round_trip() {
        let r = rows();
        let back: Vec<BenchRecord> = serde_json::from_str(&Json.render(&r)).unwrap();
        assert_eq!(back, r);
        let lines: Vec<BenchRecord> = Jsonl
            .render(&r)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines, r);
    }

    #[test]
    fn markdown_snapshot() {
        let s = Markdown.render(&rows()[..1]);
        let expected = "\
| model             |     size | params | backend       | threads | test  |          t/s | ceiling t/s | achieved | read ceiling t/s | achieved (read) | implied GB/s | warnings |
| ----------------- | -------: | -----: | ------------- | ------: | ----- | -----------: | ----------: | -------: | ---------------: | --------------: | -----------: | -------- |
| qwen2 494M Q4_K_M | 0.00 GiB | 0.00 B | llama.cpp CPU |       2 | tg128 | 64.00 ± 0.50 |        99.8 |    64.1% |            119.8 |           53.4% |         25.6 |          |
";
        assert_eq!(s, expected);
    }

    #[tokio::test]
    async fn sql_quotes_and_loads_into_sqlite() {
        let s = Sql.render(&rows());
        assert!(s.contains("'it''s.gguf'"));
        let pool = sqlx::SqlitePool::connect("sqlite::memory:").await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(s.clone()))
            .execute(&pool)
            .await
            .unwrap();
        let (n, name): (i64, String) =
            sqlx::query_as("SELECT COUNT(*), MAX(model_filename) FROM bench_results")
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!((n, name.as_str()), (2, "m.gguf"));
    }

    #[test]
    fn formats_parse() {
        for f in ["csv", "json", "jsonl", "md", "sql"] {
            assert_eq!(Format::parse(f).unwrap().extension(), f);
        }
        assert!(Format::parse("xml").is_none());
    }
}
