//! Stage 4, **present**: renderers of stored records. They compute nothing that is
//! not already in a record.
//!
//! - [`export`]: one exporter per format (md, csv, json, jsonl, sql), llama-bench's
//!   column names first.
//! - [`chart`]: the shared plotters code (fonts, errors, decode vs depth) and the
//!   app's charts.
//! - [`views`]: the app's and tray's view models (roofline points, frontier table,
//!   run comparison, tray lines).

pub mod chart;
pub mod export;
pub mod views;
