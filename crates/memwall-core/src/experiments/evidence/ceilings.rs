//! Which memory roof decode sits under: STREAM triad or the read kernel.
//!
//! Triad reads two arrays and writes one (and each ordinary store also reads its line
//! first), while batch-1 decode reads the weights and writes almost nothing. Both
//! ceilings divide the same bytes per step, `b × bandwidth ÷ (W + b × KV)`, so the
//! one a measured rate sits closer to (smaller |t/s − ceiling|) is the one whose
//! bandwidth is closer to the bandwidth decode implies (t/s × bytes per step ÷ b).
//! Rows whose STREAM run had no read kernel show `—` and no verdict.

use crate::store::record::BenchRecord;
use serde::{Deserialize, Serialize};

/// One decode row under both roofs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CeilingRow {
    /// Model type label.
    pub model_type: String,
    /// Test label (`tg128 x4 @ d512`).
    pub test: String,
    /// CPU threads the engine ran with (llama-bench's `-t`).
    pub n_threads: i64,
    /// Measured tok/s (aggregate), mean.
    pub tps: f64,
    /// Std of the tok/s.
    pub std: f64,
    /// Triad bandwidth, GB/s.
    pub triad_gbps: Option<f64>,
    /// Read bandwidth, GB/s (None: not measured).
    pub read_gbps: Option<f64>,
    /// Ceiling with triad, tok/s.
    pub ceiling_triad: Option<f64>,
    /// Ceiling with read, tok/s (None: not measured).
    pub ceiling_read: Option<f64>,
    /// tps ÷ ceiling_triad.
    pub achieved_triad: Option<f64>,
    /// tps ÷ ceiling_read.
    pub achieved_read: Option<f64>,
    /// `triad` or `read`: the ceiling the measured rate is closer to (None without a
    /// read ceiling or a finite rate).
    pub closer_to: Option<String>,
    /// Store id of the row.
    pub row_id: i64,
}

/// The ceiling `tps` is closer to: `triad` or `read` (ties go to triad, the
/// established roof); None when a value is missing or not finite.
pub fn closer_to(
    tps: f64,
    ceiling_triad: Option<f64>,
    ceiling_read: Option<f64>,
) -> Option<&'static str> {
    let (ceiling_triad, read) = (ceiling_triad?, ceiling_read?);
    if !(tps.is_finite() && ceiling_triad.is_finite() && read.is_finite()) {
        return None;
    }
    Some(if (tps - read).abs() < (tps - ceiling_triad).abs() {
        "read"
    } else {
        "triad"
    })
}

/// One row per decode (tg) record, in the records' order.
pub fn analyze(rows: &[BenchRecord]) -> Vec<CeilingRow> {
    rows.iter()
        .filter(|r| r.is_decode())
        .map(|r| CeilingRow {
            model_type: r.model_type.clone(),
            test: r.test_label(),
            n_threads: r.n_threads,
            tps: r.avg_ts,
            std: r.stddev_ts,
            triad_gbps: r.bandwidth_gbps,
            read_gbps: r.read_bandwidth_gbps,
            ceiling_triad: r.ceiling_ts,
            ceiling_read: r.decode_ceiling_ts_read,
            achieved_triad: r.achieved,
            achieved_read: r.achieved_read,
            closer_to: closer_to(r.avg_ts, r.ceiling_ts, r.decode_ceiling_ts_read)
                .map(String::from),
            row_id: r.id,
        })
        .collect()
}

/// Markdown table of [`analyze`]'s rows.
pub fn table(rows: &[CeilingRow]) -> String {
    use crate::units::or_dash;
    let pct = |x: Option<f64>| {
        x.filter(|v| v.is_finite())
            .map_or("—".to_string(), |v| format!("{:.1}%", v * 100.0))
    };
    let mut s = String::from(
        "| model | test | threads | t/s | triad GB/s | read GB/s | ceiling t/s (triad) | ceiling t/s (read) | achieved (triad) | achieved (read) | closer to |\n\
         | ----- | ---- | ------: | --: | ---------: | --------: | ------------------: | -----------------: | ---------------: | --------------: | --------- |\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {:.2} ± {:.2} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.model_type,
            r.test,
            r.n_threads,
            r.tps,
            r.std,
            or_dash(r.triad_gbps, 1),
            or_dash(r.read_gbps, 1),
            or_dash(r.ceiling_triad, 1),
            or_dash(r.ceiling_read, 1),
            pct(r.achieved_triad),
            pct(r.achieved_read),
            r.closer_to.as_deref().unwrap_or("—"),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_follows_the_nearer_ceiling() {
        // Triad ceiling 99.8, read 119.8: 64 t/s is 35.8 below triad and 55.8 below read.
        assert_eq!(closer_to(64.0, Some(99.8), Some(119.8)), Some("triad"));
        // 112 t/s is 12.2 above triad and 7.8 below read.
        assert_eq!(closer_to(112.0, Some(99.8), Some(119.8)), Some("read"));
        assert_eq!(closer_to(64.0, Some(99.8), None), None);
        assert_eq!(closer_to(f64::NAN, Some(99.8), Some(119.8)), None);
    }

    #[test]
    fn only_decode_rows_and_missing_read_stays_missing() {
        let tg = BenchRecord::example();
        let pp = BenchRecord {
            n_prompt: 512,
            n_gen: 0,
            decode_ceiling_ts_read: None,
            achieved_read: None,
            ..BenchRecord::example()
        };
        let old = BenchRecord {
            id: 7,
            read_bandwidth_gbps: None,
            decode_ceiling_ts_read: None,
            achieved_read: None,
            ..BenchRecord::example()
        };
        let rows = analyze(&[tg, pp, old]);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].closer_to.as_deref(), Some("triad"));
        assert_eq!(rows[1].closer_to, None);
        let t = table(&rows);
        assert!(
            t.contains("| 40.0 | 48.0 | 99.8 | 119.8 | 64.1% | 53.4% | triad |"),
            "{t}"
        );
        assert!(t.contains("| 40.0 | — | 99.8 | — | 64.1% | — | — |"), "{t}");
    }
}
