//! `memwall report`: one document regenerated from the store, every figure traced to
//! the row it came from.
//!
//! The slice: [`store`] reads every table the report draws from → [`build`] turns the
//! rows into [`Section`]s of [`Table`]s whose numeric cells carry their table, row,
//! run and column → [`render`] writes them as Markdown (a footnote per source row),
//! self-contained HTML (a hover title per cell, charts embedded as SVG) and
//! `figures.json`, the machine-readable sidecar the independent verifier
//! (`tools/verify/verify.py`) checks against the database → [`job`] draws the charts
//! and writes the folder ([`report_job`]); [`manifest`] re-runs the experiments a
//! manifest names first (`--rerun`).
//!
//! A value that is not in the store prints as `—` with its reason; nothing is typed or
//! estimated. The output is deterministic: rows are sorted, floats have a fixed number
//! of decimals per column, and no clock time is printed.

pub mod build;
pub mod job;
pub mod manifest;
pub mod render;
pub mod store;

pub use job::{ReportOptions, ReportOutcome, report_job, report_job_at, verify_job};

use serde::Serialize;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A chart could not be drawn.
    #[error("report chart {stem}: {msg}")]
    Chart {
        /// The chart's file stem.
        stem: String,
        /// What failed.
        msg: String,
    },
    /// A file could not be written or read.
    #[error("report {path}: {msg}")]
    Io {
        /// The file or folder.
        path: String,
        /// What failed.
        msg: String,
    },
    /// A stored row holds a value that cannot be (a JSON column that does not parse).
    #[error("report: table {table}, row {row_id}: {problem}")]
    BadRow {
        table: &'static str,
        row_id: i64,
        /// What is wrong, and the fix.
        problem: String,
    },
    /// The manifest of `--rerun` is malformed.
    #[error("manifest {path}: {problem}")]
    Manifest {
        /// The manifest file.
        path: String,
        /// What is wrong, and the fix.
        problem: String,
    },
    /// A re-run experiment failed.
    #[error("manifest {path}: experiment {name:?} failed: {msg}")]
    Rerun {
        /// The manifest file.
        path: String,
        /// The experiment's name in the manifest.
        name: String,
        /// Its exit status and last lines of output.
        msg: String,
    },
    /// The verifier could not run, or found a figure that does not match its row.
    #[error("verifier: {0}")]
    Verify(String),
}

/// Where a table row's figures come from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Src {
    /// The table (`bench_results`, `stream_results`, …).
    pub table: &'static str,
    /// The row's id (`prediction_scores`: the sheet id).
    pub row_id: i64,
    /// The run the row belongs to.
    pub run_id: i64,
}

impl Src {
    /// The Markdown footnote label of the row (`bench_results-34`).
    pub fn label(&self) -> String {
        match self.table {
            "prediction_scores" => format!("{}-{}-{}", self.table, self.row_id, self.run_id),
            t => format!("{t}-{}", self.row_id),
        }
    }

    /// The footnote's text.
    pub fn describe(&self) -> String {
        match self.table {
            "prediction_scores" => format!(
                "prediction_scores: sheet {} scored against run {}",
                self.row_id, self.run_id
            ),
            t => format!("{t} row {}, run {}", self.row_id, self.run_id),
        }
    }
}

/// One table cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "cell", rename_all = "snake_case")]
pub enum Cell {
    /// A label (host, model, test).
    Text(String),
    /// A number from the row: `value` is the stored (or derived) value, `text` is
    /// `value × scale` with `decimals` decimals.
    Num {
        /// Printed text.
        text: String,
        /// The stored or derived value, unscaled.
        value: f64,
        /// Printed = value × scale (100 for a fraction shown in %, 1e-6 for MB).
        scale: f64,
        /// Decimals printed.
        decimals: usize,
        /// The column (`avg_ts`), `derived:<name>` for a value the report computes
        /// from the row's columns, or `result_json:<path>` inside a JSON column.
        column: String,
    },
    /// A yes/no conclusion computed from the row (memory-bound, amortized, gate
    /// passed, monotone).
    Claim {
        /// Printed text (`yes` / `no`).
        text: String,
        /// Which conclusion.
        claim: String,
        value: bool,
    },
    /// Not measured: prints `—`.
    Missing {
        /// Why.
        reason: String,
    },
}

impl Cell {
    /// The printed text (`—` for a missing value).
    pub fn text(&self) -> &str {
        match self {
            Cell::Text(s) => s,
            Cell::Num { text, .. } | Cell::Claim { text, .. } => text,
            Cell::Missing { .. } => "—",
        }
    }
}

/// A number cell: `value × scale` with `decimals` decimals; `—` with `missing` as the
/// reason when the value is absent (NULL in the store) or not finite.
pub fn num(value: Option<f64>, scale: f64, decimals: usize, column: &str, missing: &str) -> Cell {
    match value.filter(|v| v.is_finite()) {
        Some(v) => Cell::Num {
            text: fixed(v * scale, decimals),
            value: v,
            scale,
            decimals,
            column: column.to_string(),
        },
        None => Cell::Missing {
            reason: missing.to_string(),
        },
    }
}

/// A yes/no claim cell.
pub fn claim(name: &str, value: bool) -> Cell {
    Cell::Claim {
        text: if value { "yes" } else { "no" }.into(),
        claim: name.into(),
        value,
    }
}

/// `x` with `decimals` decimals; `-0.00` prints as `0.00`.
pub fn fixed(x: f64, decimals: usize) -> String {
    let s = format!("{x:.decimals$}");
    if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
        s[1..].to_string()
    } else {
        s
    }
}

/// One row of a table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Where its figures come from (`None` for a row of labels and claims only).
    pub src: Option<Src>,
    /// The cells, one per header.
    pub cells: Vec<Cell>,
}

/// A table of a section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table {
    /// Caption above it.
    pub caption: String,
    /// Column headers, units included.
    pub headers: Vec<String>,
    /// Rows, sorted.
    pub rows: Vec<Row>,
}

/// A chart of a section: `charts/<stem>.png` and `charts/<stem>.svg`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChartRef {
    /// File stem.
    pub stem: String,
    /// Caption.
    pub title: String,
    /// The runs whose rows it draws.
    pub runs: Vec<i64>,
}

/// One section of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Section {
    /// Anchor (`machines`, `bench`, …).
    pub id: &'static str,
    /// Heading.
    pub title: String,
    /// Stored rows behind the section (the table of contents' count).
    pub n_rows: usize,
    /// Paragraphs before the tables.
    pub text: Vec<String>,
    pub tables: Vec<Table>,
    pub charts: Vec<ChartRef>,
    /// Set when nothing is stored for this section: why, and the command that measures it.
    pub not_measured: Option<String>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The database it was generated from, as given.
    pub db: String,
    /// Sections in order.
    pub sections: Vec<Section>,
}
