//! Exporters: one trait, one implementation per format (CSV, JSON, JSONL,
//! Markdown, SQL), chosen by [`Format`] (llama-bench's printers; hyperfine's
//! `export/`). Every exporter walks [`BenchRecord::fields`]; none computes.
//!
//! CSV, JSON, JSONL and SQL are llama-bench's formats: its column names, types and
//! order first, its SQL table name (`llama_bench`), its JSON booleans and sample
//! arrays, so llama.cpp's `scripts/compare-llama-bench.py` reads them as it reads
//! llama-bench's own output; memwall's columns follow llama-bench's.

use crate::measure::sampler::session::EnergySummary;
use crate::store::record::{BenchRecord, ColumnRole, ColumnValue};
use crate::units::or_dash;
use std::io::{self, Write};

/// A bench row as exported: the record and the energy of its timed repetitions
/// (`None`: no live-sampler recording came with it).
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    /// The stored record.
    pub record: &'a BenchRecord,
    /// Its energy, thermals and contention.
    pub energy: Option<&'a EnergySummary>,
}

/// The energy reason of a row exported without a recording.
pub const NO_RECORDING: &str = "no live-sampler recording with this row";

/// The energy columns that follow the record's (after llama-bench's): mean power,
/// J/token, tokens per Wh, J/token above idle, idle power, what the energy covers,
/// why a figure is missing, and other processes' CPU use.
pub fn energy_fields(e: Option<&EnergySummary>) -> Vec<(&'static str, ColumnRole, ColumnValue)> {
    use ColumnRole::*;
    let real = |v: Option<f64>| {
        v.filter(|x| x.is_finite())
            .map_or(ColumnValue::Null, ColumnValue::Real)
    };
    let text = |v: Option<&str>| {
        v.filter(|x| !x.is_empty())
            .map_or(ColumnValue::Null, |x| ColumnValue::Text(x.to_string()))
    };
    vec![
        (
            "mean_power_w",
            Measure,
            real(e.and_then(|e| e.mean_power_w)),
        ),
        ("j_per_token", Measure, real(e.and_then(|e| e.j_per_token))),
        (
            "tokens_per_wh",
            Measure,
            real(e.and_then(|e| e.tokens_per_wh)),
        ),
        (
            "j_per_token_above_idle",
            Measure,
            real(e.and_then(|e| e.j_per_token_above_idle)),
        ),
        (
            "idle_power_w",
            Measure,
            real(e.and_then(|e| e.idle_power_w)),
        ),
        (
            "energy_scope",
            Provenance,
            text(e.map(|e| e.energy_scope.as_str())),
        ),
        (
            "energy_reason",
            Provenance,
            match e {
                None => ColumnValue::Text(NO_RECORDING.into()),
                Some(e) => text(e.reason.as_deref()),
            },
        ),
        (
            "other_cpu_cores",
            Measure,
            real(e.and_then(|e| e.other_cpu_cores)),
        ),
        (
            "other_gpu_util_pct",
            Measure,
            real(e.and_then(|e| e.other_gpu_util_pct)),
        ),
    ]
}

impl Row<'_> {
    /// The record's fields, then [`energy_fields`].
    pub fn fields(&self) -> Vec<(&'static str, ColumnRole, ColumnValue)> {
        let mut f = self.record.fields();
        f.extend(energy_fields(self.energy));
        f
    }
}

/// The exported column names in order: the record's, then the energy columns.
pub fn column_names() -> Vec<&'static str> {
    let mut c = BenchRecord::column_names();
    c.extend(energy_fields(None).into_iter().map(|(n, _, _)| n));
    c
}

/// `rows` without energy (each exported with [`NO_RECORDING`]).
pub fn bare(rows: &[BenchRecord]) -> Vec<Row<'_>> {
    rows.iter()
        .map(|record| Row {
            record,
            energy: None,
        })
        .collect()
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Comma-separated, header row, lists space-separated (llama-bench style).
    Csv,
    /// One JSON array of objects, keys in column order.
    Json,
    /// One JSON object per line.
    Jsonl,
    /// A Markdown table for reading.
    Md,
    /// `CREATE TABLE IF NOT EXISTS llama_bench` + `INSERT` statements (SQLite dialect).
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
    /// Writes all `rows`, with their energy, to `out`.
    ///
    /// # Errors
    /// I/O errors of `out`.
    fn write_rows(&self, rows: &[Row<'_>], out: &mut dyn Write) -> io::Result<()>;

    /// Writes records without energy (their energy columns say [`NO_RECORDING`]).
    ///
    /// # Errors
    /// I/O errors of `out`.
    fn write(&self, rows: &[BenchRecord], out: &mut dyn Write) -> io::Result<()> {
        self.write_rows(&bare(rows), out)
    }

    /// Renders rows with their energy to a string.
    fn render_rows(&self, rows: &[Row<'_>]) -> String {
        let mut v = Vec::new();
        self.write_rows(rows, &mut v)
            .expect("writing to a Vec cannot fail");
        String::from_utf8(v).expect("exporters write UTF-8")
    }

    /// Renders records without energy to a string.
    fn render(&self, rows: &[BenchRecord]) -> String {
        self.render_rows(&bare(rows))
    }
}

/// CSV exporter.
pub struct Csv;
impl Exporter for Csv {
    fn write_rows(&self, rows: &[Row<'_>], out: &mut dyn Write) -> io::Result<()> {
        let mut w = csv::Writer::from_writer(out);
        w.write_record(column_names())?;
        for r in rows {
            w.write_record(r.fields().iter().map(|(_, _, c)| c.to_text()))?;
        }
        w.flush()
    }
}

/// A cell as a JSON value: numbers, `true`/`false`, `null` for not measured, arrays
/// for the samples (llama-bench's `format_json_value`) and the warnings.
fn json_value(c: &ColumnValue) -> String {
    let s = match c {
        ColumnValue::Int(v) => serde_json::to_string(v),
        ColumnValue::Real(v) => serde_json::to_string(v),
        ColumnValue::Bool(v) => serde_json::to_string(v),
        ColumnValue::Null => Ok("null".into()),
        ColumnValue::Text(v) => serde_json::to_string(v),
        ColumnValue::Ints(v) => serde_json::to_string(v),
        ColumnValue::Reals(v) => serde_json::to_string(v),
        ColumnValue::Texts(v) => serde_json::to_string(v),
    };
    s.expect("finite numbers and strings serialize")
}

/// One row as `"name": value` pairs in column order.
fn json_pairs(r: &Row<'_>) -> Vec<String> {
    r.fields()
        .iter()
        .map(|(n, _, c)| format!("\"{n}\": {}", json_value(c)))
        .collect()
}

/// JSON array exporter.
pub struct Json;
impl Exporter for Json {
    fn write_rows(&self, rows: &[Row<'_>], out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "[")?;
        for (i, r) in rows.iter().enumerate() {
            let sep = if i + 1 < rows.len() { "," } else { "" };
            writeln!(
                out,
                "  {{\n    {}\n  }}{sep}",
                json_pairs(r).join(",\n    ")
            )?;
        }
        writeln!(out, "]")
    }
}

/// JSON-lines exporter.
pub struct Jsonl;
impl Exporter for Jsonl {
    fn write_rows(&self, rows: &[Row<'_>], out: &mut dyn Write) -> io::Result<()> {
        for r in rows {
            writeln!(out, "{{{}}}", json_pairs(r).join(", "))?;
        }
        Ok(())
    }
}

/// Markdown table: llama-bench's columns plus the roofline placement.
pub struct Markdown;

/// The columns of the human table: `(header, right-aligned)`.
pub const TABLE_HEADERS: [(&str, bool); 17] = [
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
    ("mean W", true),
    ("J/token", true),
    ("tokens/Wh", true),
    ("energy scope", false),
    ("warnings", false),
];

/// One row of the human table, formatted (energy `—` where not measured).
pub fn table_row(row: &Row<'_>) -> Vec<String> {
    let r = row.record;
    let e = row.energy;
    vec![
        if r.synthetic {
            format!("{} (SYNTHETIC)", r.model_type)
        } else {
            r.model_type.clone()
        },
        format!("{:.2} GiB", r.model_size as f64 / crate::units::GIB),
        format!("{:.2} B", r.model_n_params as f64 / 1e9),
        format!("{} {}", r.engine, r.backends),
        r.n_threads.to_string(),
        r.test_label(),
        if r.avg_ts.is_finite() {
            format!("{:.2} ± {:.2}", r.avg_ts, r.stddev_ts)
        } else {
            "—".into()
        },
        or_dash(r.ceiling_ts, 1),
        r.achieved
            .map_or_else(|| "—".into(), |a| format!("{:.1}%", a * 100.0)),
        or_dash(r.decode_ceiling_ts_read, 1),
        r.achieved_read
            .filter(|x| x.is_finite())
            .map_or("—".into(), |x| format!("{:.1}%", x * 100.0)),
        or_dash(r.implied_bandwidth_gbps, 1),
        or_dash(e.and_then(|e| e.mean_power_w), 1),
        or_dash(e.and_then(|e| e.j_per_token), 4),
        or_dash(e.and_then(|e| e.tokens_per_wh), 0),
        e.map(|e| e.energy_scope.as_str())
            .filter(|s| !s.is_empty())
            .unwrap_or("—")
            .to_string(),
        r.warnings.join(crate::store::record::WARNINGS_SEPARATOR),
    ]
}

impl Exporter for Markdown {
    fn write_rows(&self, rows: &[Row<'_>], out: &mut dyn Write) -> io::Result<()> {
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

/// SQL exporter: llama-bench's table.
pub struct Sql;

/// The table llama-bench's SQL printer writes and compare-llama-bench.py reads.
pub const SQL_TABLE: &str = "llama_bench";

fn sql_literal(c: &ColumnValue) -> String {
    match c {
        ColumnValue::Int(v) => v.to_string(),
        ColumnValue::Bool(v) => (*v as i64).to_string(),
        ColumnValue::Real(v) => format!("{v}"),
        ColumnValue::Null => "NULL".into(),
        ColumnValue::Text(s) => format!("'{}'", s.replace('\'', "''")),
        ColumnValue::Ints(v) => format!("'{}'", serde_json::to_string(v).expect("serialize")),
        ColumnValue::Reals(v) => format!("'{}'", serde_json::to_string(v).expect("serialize")),
        ColumnValue::Texts(v) => format!(
            "'{}'",
            serde_json::to_string(v)
                .expect("serialize")
                .replace('\'', "''")
        ),
    }
}

impl Exporter for Sql {
    fn write_rows(&self, rows: &[Row<'_>], out: &mut dyn Write) -> io::Result<()> {
        let ex = BenchRecord::example();
        let full = EnergySummary {
            mean_power_w: Some(1.0),
            j_per_token: Some(1.0),
            tokens_per_wh: Some(1.0),
            j_per_token_above_idle: Some(1.0),
            idle_power_w: Some(1.0),
            energy_scope: "x".into(),
            reason: Some("x".into()),
            other_cpu_cores: Some(1.0),
            other_gpu_util_pct: Some(1.0),
            ..EnergySummary::default()
        };
        let cols: Vec<String> = Row {
            record: &ex,
            energy: Some(&full),
        }
        .fields()
        .iter()
        .map(|(n, _, c)| format!("  {n} {}", c.sql_type()))
        .collect();
        writeln!(
            out,
            "CREATE TABLE IF NOT EXISTS {SQL_TABLE} (\n{}\n);",
            cols.join(",\n")
        )?;
        for r in rows {
            let f = r.fields();
            writeln!(
                out,
                "INSERT INTO {SQL_TABLE} ({}) VALUES ({});",
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
        assert_eq!(h.iter().collect::<Vec<_>>(), column_names());
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
    fn json_and_jsonl_follow_llama_bench_encoding() {
        let s = Json.render(&rows()[..1]);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        let o = &v[0];
        assert_eq!(o["flash_attn"], serde_json::json!(-1));
        assert_eq!(o["cpu_strict"], serde_json::json!(false));
        assert_eq!(o["repack"], serde_json::json!(true));
        assert_eq!(o["backends"], serde_json::json!("CPU"));
        assert_eq!(
            o["samples_ns"],
            serde_json::json!([1_990_000_000u64, 2_010_000_000u64])
        );
        assert_eq!(o["samples_ts"], serde_json::json!([64.32, 63.68]));
        // Keys in column order: llama-bench's first.
        let keys: Vec<&str> = s
            .lines()
            .filter_map(|l| l.trim().strip_prefix('"'))
            .map(|l| l.split('"').next().unwrap())
            .collect();
        assert_eq!(keys, column_names());
        let l = Jsonl.render(&rows());
        assert_eq!(l.lines().count(), 2);
        assert!(
            l.starts_with("{\"build_commit\": \"abc123\", \"build_number\": 100, \"cpu_info\": "),
            "{l}"
        );
        assert_eq!(Json.render(&[]), "[\n]\n");
    }

    #[test]
    fn markdown_snapshot() {
        let s = Markdown.render(&rows()[..1]);
        let expected = "\
| model             |     size | params | backend       | threads | test  |          t/s | ceiling t/s | achieved | read ceiling t/s | achieved (read) | implied GB/s | mean W | J/token | tokens/Wh | energy scope | warnings |
| ----------------- | -------: | -----: | ------------- | ------: | ----- | -----------: | ----------: | -------: | ---------------: | --------------: | -----------: | -----: | ------: | --------: | ------------ | -------- |
| qwen2 494M Q4_K_M | 0.00 GiB | 0.00 B | llama.cpp CPU |       2 | tg128 | 64.00 ± 0.50 |        99.8 |    64.1% |            119.8 |           53.4% |         25.6 |      — |       — |         — | —            |          |
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
            sqlx::query_as("SELECT COUNT(*), MAX(model_filename) FROM llama_bench")
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!((n, name.as_str()), (2, "m.gguf"));
        assert!(s.starts_with(
            "CREATE TABLE IF NOT EXISTS llama_bench (\n  build_commit TEXT,\n  build_number INTEGER,\n  cpu_info TEXT,"
        ));
        // SQLite's own view of the stored types: llama-bench's INT and BOOL are integers.
        let types: (String, String, String, String) = sqlx::query_as(
            "SELECT typeof(flash_attn), typeof(cpu_strict), typeof(avg_ts), typeof(backends) FROM llama_bench LIMIT 1",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(
            types,
            (
                "integer".into(),
                "integer".into(),
                "real".into(),
                "text".into()
            )
        );
    }

    #[tokio::test]
    async fn warnings_are_arrays_in_json_and_sql_and_joined_in_csv_and_tables() {
        let r = BenchRecord {
            warnings: vec![
                "outliers: 1 repetition(s) with |modified z| > 3.5".into(),
                "thermal: it's hot".into(),
            ],
            ..BenchRecord::example()
        };
        let joined = "outliers: 1 repetition(s) with |modified z| > 3.5; thermal: it's hot";
        let csv = Csv.render(std::slice::from_ref(&r));
        let mut rdr = csv::Reader::from_reader(csv.as_bytes());
        let h = rdr.headers().unwrap().clone();
        let rec = rdr.records().next().unwrap().unwrap();
        let i = h.iter().position(|x| x == "warnings").unwrap();
        assert_eq!(&rec[i], joined);
        assert_eq!(
            bare(std::slice::from_ref(&r))
                .iter()
                .map(table_row)
                .next()
                .unwrap()
                .last()
                .unwrap(),
            joined
        );
        assert!(Markdown.render(std::slice::from_ref(&r)).contains(joined));
        let want = serde_json::json!([
            "outliers: 1 repetition(s) with |modified z| > 3.5",
            "thermal: it's hot"
        ]);
        let v: serde_json::Value =
            serde_json::from_str(&Json.render(std::slice::from_ref(&r))).unwrap();
        assert_eq!(v[0]["warnings"], want);
        let l: serde_json::Value =
            serde_json::from_str(Jsonl.render(std::slice::from_ref(&r)).trim()).unwrap();
        assert_eq!(l["warnings"], want);
        // SQL holds the JSON array as text, quotes escaped, and SQLite reads it as one.
        let pool = sqlx::SqlitePool::connect("sqlite::memory:").await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(Sql.render(std::slice::from_ref(&r))))
            .execute(&pool)
            .await
            .unwrap();
        let (n, second): (i64, String) = sqlx::query_as(
            "SELECT json_array_length(warnings), json_extract(warnings, '$[1]') FROM llama_bench",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!((n, second.as_str()), (2, "thermal: it's hot"));
    }

    #[tokio::test]
    async fn energy_columns_follow_the_records_in_every_format() {
        // 25 W over 256 tokens in 2.56 s: 0.25 J/token, 3600 / 0.25 = 14400 tokens/Wh.
        let e = EnergySummary {
            mean_power_w: Some(25.0),
            j_per_token: Some(0.25),
            tokens_per_wh: Some(14400.0),
            j_per_token_above_idle: Some(0.125),
            idle_power_w: Some(12.5),
            energy_scope: "CPU package + DRAM".into(),
            other_cpu_cores: Some(0.02),
            ..EnergySummary::default()
        };
        let none = EnergySummary {
            reason: Some("cpu_package_energy: no RAPL in this VM".into()),
            ..EnergySummary::default()
        };
        let (a, b, c) = (
            BenchRecord::example(),
            BenchRecord::example(),
            BenchRecord::example(),
        );
        let rows = [
            Row {
                record: &a,
                energy: Some(&e),
            },
            Row {
                record: &b,
                energy: Some(&none),
            },
            Row {
                record: &c,
                energy: None,
            },
        ];
        let n = BenchRecord::column_names().len();
        assert_eq!(
            &column_names()[n..],
            [
                "mean_power_w",
                "j_per_token",
                "tokens_per_wh",
                "j_per_token_above_idle",
                "idle_power_w",
                "energy_scope",
                "energy_reason",
                "other_cpu_cores",
                "other_gpu_util_pct"
            ]
        );
        let csv = Csv.render_rows(&rows);
        let mut rdr = csv::Reader::from_reader(csv.as_bytes());
        let h = rdr.headers().unwrap().clone();
        let recs: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
        let i = |c: &str| h.iter().position(|x| x == c).unwrap();
        assert_eq!(&recs[0][i("j_per_token")], "0.25");
        assert_eq!(&recs[0][i("tokens_per_wh")], "14400");
        assert_eq!(&recs[0][i("energy_scope")], "CPU package + DRAM");
        assert_eq!(&recs[0][i("energy_reason")], "");
        assert_eq!(&recs[1][i("j_per_token")], "");
        assert_eq!(
            &recs[1][i("energy_reason")],
            "cpu_package_energy: no RAPL in this VM"
        );
        assert_eq!(&recs[2][i("energy_reason")], NO_RECORDING);
        let v: serde_json::Value = serde_json::from_str(&Json.render_rows(&rows)).unwrap();
        assert_eq!(v[0]["mean_power_w"], serde_json::json!(25.0));
        assert_eq!(v[1]["j_per_token"], serde_json::Value::Null);
        let l = Jsonl.render_rows(&rows);
        let first: serde_json::Value = serde_json::from_str(l.lines().next().unwrap()).unwrap();
        assert_eq!(first["j_per_token_above_idle"], serde_json::json!(0.125));
        let md = Markdown.render_rows(&rows);
        assert!(
            md.contains("|   25.0 |  0.2500 |     14400 | CPU package + DRAM |"),
            "{md}"
        );
        let pool = sqlx::SqlitePool::connect("sqlite::memory:").await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(Sql.render_rows(&rows)))
            .execute(&pool)
            .await
            .unwrap();
        let got: Vec<(Option<f64>, Option<String>)> =
            sqlx::query_as("SELECT j_per_token, energy_reason FROM llama_bench ORDER BY rowid")
                .fetch_all(&pool)
                .await
                .unwrap();
        assert_eq!(got[0], (Some(0.25), None));
        assert_eq!(got[2].1.as_deref(), Some(NO_RECORDING));
    }

    #[test]
    fn formats_parse() {
        for f in ["csv", "json", "jsonl", "md", "sql"] {
            assert_eq!(Format::parse(f).unwrap().extension(), f);
        }
        assert!(Format::parse("xml").is_none());
    }
}
