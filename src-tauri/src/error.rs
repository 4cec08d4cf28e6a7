//! The app's command error: a thiserror enum serialized as its message, so the UI
//! shows the same text the CLI would print.

use crate::job::Busy;
use serde::{Serialize, Serializer};

/// Errors of the app's commands.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A measuring job is already running.
    #[error(transparent)]
    Busy(#[from] Busy),
    /// A job failed (a measurement, a benchmark, a chat turn).
    #[error(transparent)]
    Job(#[from] memwall_core::experiments::JobError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] memwall_core::store::StoreError),
    /// A chart failed.
    #[error(transparent)]
    Chart(#[from] memwall_core::present::chart::ChartError),
    /// A bad export name.
    #[error(transparent)]
    Export(#[from] memwall_core::present::views::ExportPathError),
    /// The catalogue failed.
    #[error(transparent)]
    Catalog(#[from] memwall_core::probe::catalog::CatalogError),
    /// The device catalogue (`catalog/devices.toml`) failed to parse.
    #[error(transparent)]
    Devices(#[from] memwall_core::probe::devices::DeviceError),
    /// The report failed.
    #[error(transparent)]
    Report(#[from] memwall_core::experiments::report::ReportError),
    /// Bad input from the UI.
    #[error("{0}")]
    Invalid(String),
}

impl Serialize for AppError {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}
