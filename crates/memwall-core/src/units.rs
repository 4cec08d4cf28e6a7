//! Units that carry their scale in the type.
//!
//! Bandwidth specs are decimal (1 GB/s = 10^9 B/s); memory sizes are often quoted in
//! binary GiB (2^30 B). Mixing them is a silent 7 % error, so every byte count is a
//! [`Bytes`] and every conversion names its base.

use serde::{Deserialize, Serialize};
use std::fmt;

/// 10^9: one decimal gigabyte (GB), the unit of bandwidth spec sheets.
pub const GB: f64 = 1e9;
/// 2^30: one binary gibibyte (GiB), the unit most OS tools and llama.cpp print.
pub const GIB: f64 = 1_073_741_824.0;

/// A count of bytes.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    Serialize,
    Deserialize,
    ts_rs::TS,
)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl Bytes {
    /// Decimal gigabytes (bytes ÷ 10^9).
    pub fn gb(self) -> f64 {
        self.0 as f64 / GB
    }
    /// Binary gibibytes (bytes ÷ 2^30).
    pub fn gib(self) -> f64 {
        self.0 as f64 / GIB
    }
    /// Binary mebibytes (bytes ÷ 2^20).
    pub fn mib(self) -> f64 {
        self.0 as f64 / 1_048_576.0
    }
    /// Sum that saturates instead of wrapping.
    pub fn saturating_add(self, other: Bytes) -> Bytes {
        Bytes(self.0.saturating_add(other.0))
    }
}

impl std::ops::Add for Bytes {
    type Output = Bytes;
    fn add(self, rhs: Bytes) -> Bytes {
        Bytes(self.0 + rhs.0)
    }
}

impl std::iter::Sum for Bytes {
    fn sum<I: Iterator<Item = Bytes>>(iter: I) -> Bytes {
        Bytes(iter.map(|b| b.0).sum())
    }
}

impl fmt::Display for Bytes {
    /// Prints both bases, labelled: `4.37 GB (4.07 GiB)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 100_000_000 {
            write!(f, "{:.2} GB ({:.2} GiB)", self.gb(), self.gib())
        } else {
            write!(f, "{:.1} MB ({:.1} MiB)", self.0 as f64 / 1e6, self.mib())
        }
    }
}

/// A bandwidth in decimal gigabytes per second (10^9 B/s).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize, ts_rs::TS)]
#[serde(transparent)]
pub struct Gbps(pub f64);

impl Gbps {
    /// Bytes per second.
    pub fn bytes_per_s(self) -> f64 {
        self.0 * GB
    }
}

impl fmt::Display for Gbps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} GB/s", self.0)
    }
}

/// A compute rate in 10^9 operations per second (GFLOP/s for floating point,
/// GOP/s for integer dot products).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize, ts_rs::TS)]
#[serde(transparent)]
pub struct Gflops(pub f64);

impl Gflops {
    /// Operations per second.
    pub fn per_s(self) -> f64 {
        self.0 * 1e9
    }
}

impl fmt::Display for Gflops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} GFLOP/s", self.0)
    }
}

/// A value as measured, or `None` where it is not a finite number (what a record
/// stores for "not measured").
pub fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Formats an optional measured value, or `—` when it was not measured.
pub fn or_dash(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.decimals$}"),
        _ => "—".to_string(),
    }
}

/// Which arithmetic a compute peak is for; it sets the rate's unit (GFLOP/s or
/// GOP/s). [`crate::roofline`] picks the kind a model's prefill runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakKind {
    /// f32 fused multiply-add (GFLOP/s).
    F32Fma,
    /// 8-bit integer dot product (GOP/s, 2 ops per MAC).
    Int8Dot,
}

impl PeakKind {
    /// Both kinds, in table order.
    pub const ALL: [PeakKind; 2] = [PeakKind::F32Fma, PeakKind::Int8Dot];

    /// Label for tables.
    pub fn label(self) -> &'static str {
        match self {
            PeakKind::F32Fma => "f32 FMA",
            PeakKind::Int8Dot => "int8 dot",
        }
    }

    /// Unit of the rate: `GFLOP/s` or `GOP/s` (10^9 per second).
    pub fn unit(self) -> &'static str {
        match self {
            PeakKind::F32Fma => "GFLOP/s",
            PeakKind::Int8Dot => "GOP/s",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gb_and_gib_are_different_bases() {
        // 4.68 GiB = 5.03 GB (the seed's Qwen3-8B Q4_K_M file).
        let b = Bytes((4.68 * GIB) as u64);
        assert!((b.gb() - 5.025).abs() < 0.001, "{}", b.gb());
        assert_eq!(Bytes(1_000_000_000).gb(), 1.0);
        assert_eq!(Bytes(1 << 30).gib(), 1.0);
        assert_eq!(format!("{}", Bytes(1 << 30)), "1.07 GB (1.00 GiB)");
    }

    #[test]
    fn missing_values_print_as_dash() {
        assert_eq!(or_dash(None, 2), "—");
        assert_eq!(or_dash(Some(f64::NAN), 2), "—");
        assert_eq!(or_dash(Some(1.234), 1), "1.2");
    }
}
