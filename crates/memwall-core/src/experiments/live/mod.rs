//! Live machine state as a slice: the sampler beside a run (phase per test,
//! energy per row), the stored time series, its charts, `memwall sample`, and the
//! tray's live lines.
//!
//! - [`job`]: [`job::RunSampler`] (start beside a job, wrap its progress so each
//!   test's timed part is a phase, finish into a recording and per-row energy),
//!   [`job::sample_job`] (the `memwall sample` command), [`job::live_lines`] (the
//!   tray's and Machine page's lines).
//! - [`store`]: `sampler_counters`, `sampler_phases`, `sampler_series`,
//!   `row_energy`.
//! - [`chart`]: a run's time series with its phases (tokens per joule against the
//!   frontier's arms is drawn by `frontier::chart`).

pub mod chart;
pub mod job;
pub mod store;

pub use crate::measure::sampler::session::{EnergySummary, Phase, Recording};
pub use crate::measure::sampler::{Counter, Sample};

use crate::store::record::BenchRecord;
use serde::{Deserialize, Serialize};

/// A bench row's energy and thermals, from its phase of the run's recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct RowEnergy {
    /// The bench row (`bench_results.id`).
    pub row_id: i64,
    /// Its run.
    pub run_id: i64,
    /// The phase's name in the recording.
    pub phase: String,
    /// Mean power, energy, J/token, tokens per Wh, peak temperature, throttling,
    /// live bandwidth.
    pub energy: EnergySummary,
    /// The row's implied bandwidth (tok/s × bytes per token), GB/s, beside the live
    /// counter.
    pub implied_bandwidth_gbps: Option<f64>,
}

/// Tokens one timed repetition of `r` processes: `n_prompt` for a prefill test,
/// `n_gen × n_seqs` for a decode test (how the row's tok/s counts them).
pub fn tokens_per_rep(r: &BenchRecord) -> u64 {
    if r.n_prompt > 0 {
        r.n_prompt as u64
    } else {
        (r.n_gen * r.n_seqs).max(0) as u64
    }
}

/// The phase name of plan test `index` labelled `label`: `#3 tg128`.
pub fn phase_name(index: usize, label: &str) -> String {
    format!("#{index} {label}")
}

/// Each row's energy from `rec`, the rows paired in order with the phases they
/// ran in. A row whose phase is missing (no mark) gets none.
pub fn row_energies(rec: &Recording, rows: &[BenchRecord], phases: &[String]) -> Vec<RowEnergy> {
    rows.iter()
        .zip(phases)
        .filter_map(|(r, name)| {
            let p = rec.phase(name)?;
            let timed_ns: u64 = r.samples_ns.iter().sum();
            let tokens = tokens_per_rep(r) * r.samples_ns.len() as u64;
            Some(RowEnergy {
                row_id: r.id,
                run_id: r.run_id,
                phase: name.clone(),
                energy: rec.summary(p, timed_ns, tokens),
                implied_bandwidth_gbps: r.implied_bandwidth_gbps,
            })
        })
        .collect()
}

/// The energy table printed under a bench run: one line per row with its test,
/// tok/s, mean power, J/token, tokens per Wh, peak temperature, throttling, live
/// and implied bandwidth; `—` for what was not measured, and the reasons once below.
pub fn table(rows: &[BenchRecord], energy: &[RowEnergy]) -> String {
    use crate::units::or_dash;
    let mut s = String::from(
        "| test | tok/s | mean W | J/token | tokens/Wh | peak °C | throttled | live GB/s | implied GB/s | energy from |\n\
         |---|---:|---:|---:|---:|---:|---|---:|---:|---|\n",
    );
    let mut reasons: Vec<String> = Vec::new();
    for e in energy {
        let Some(r) = rows.iter().find(|r| r.id == e.row_id) else {
            continue;
        };
        let x = &e.energy;
        if let Some(why) = &x.reason {
            if !reasons.contains(why) {
                reasons.push(why.clone());
            }
        }
        s.push_str(&format!(
            "| {} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.test_label(),
            r.avg_ts,
            or_dash(x.mean_power_w, 1),
            or_dash(x.j_per_token, 4),
            or_dash(x.tokens_per_wh, 0),
            or_dash(x.peak_temp_c, 1),
            match x.throttled {
                Some(true) => "yes",
                Some(false) => "no",
                None => "—",
            },
            or_dash(x.live_dram_gbps, 1),
            or_dash(e.implied_bandwidth_gbps, 1),
            if x.energy_source.is_empty() {
                "—"
            } else {
                &x.energy_source
            },
        ));
    }
    for why in reasons {
        s.push_str(&format!("\nenergy —: {why}"));
    }
    s
}

/// One read as a line for `memwall sample`: every quantity, `—` where unmeasured.
pub fn sample_line(x: &Sample) -> String {
    use crate::units::or_dash;
    let gib = |b: Option<u64>| or_dash(b.map(|b| b as f64 / (1u64 << 30) as f64), 1);
    let pages = |p: Option<u64>| p.map_or("—".into(), |p| p.to_string());
    format!(
        "t {:>6.1} s | CPU {} W DRAM {} W GPU {} W | CPU {} °C GPU {} °C | CPU {} MHz GPU SM {} MHz mem {} MHz | DRAM {} GB/s GPU mem-ctl {} % | mem {} / {} GiB swap {} GiB, in/out {}/{} pages",
        x.t_ns as f64 / 1e9,
        or_dash(x.cpu_power_w, 1),
        or_dash(x.dram_power_w, 1),
        or_dash(x.gpu_power_w, 1),
        or_dash(x.cpu_temp_c, 1),
        or_dash(x.gpu_temp_c, 0),
        or_dash(x.cpu_mhz, 0),
        or_dash(x.gpu_sm_mhz, 0),
        or_dash(x.gpu_mem_mhz, 0),
        or_dash(x.dram_gbps, 1),
        or_dash(x.gpu_mem_util_pct, 0),
        gib(x.mem_used_bytes),
        gib(x.mem_total_bytes),
        gib(x.swap_used_bytes),
        pages(x.swap_in_pages),
        pages(x.swap_out_pages),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rows_energy_uses_its_timed_reps_and_tokens() {
        // tg128, 2 sequences, 3 reps of 2 s each: 768 tokens in 6 s. The phase's
        // counters: 0 → 100 J over 2 s = 50 W; 50 W × 6 s = 300 J; 300 / 768 J/token.
        let r = BenchRecord {
            n_prompt: 0,
            n_gen: 128,
            n_seqs: 2,
            samples_ns: vec![2_000_000_000; 3],
            implied_bandwidth_gbps: Some(30.0),
            ..BenchRecord::example()
        };
        assert_eq!(tokens_per_rep(&r), 256);
        let s = |t: u64, j: f64| Sample {
            t_ns: t,
            cpu_energy_j: Some(j),
            ..Sample::default()
        };
        let rec = Recording {
            hz: 10.0,
            samples: vec![s(1_000_000_000, 0.0), s(3_000_000_000, 100.0)],
            phases: vec![Phase {
                name: phase_name(0, "tg128"),
                start_ns: 1_000_000_000,
                end_ns: 3_000_000_000,
            }],
            counters: vec![Counter::available("cpu_package_energy", "fixture")],
        };
        let e = row_energies(&rec, &[r], &["#0 tg128".into()]);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].energy.mean_power_w, Some(50.0));
        assert_eq!(e[0].energy.energy_j, Some(300.0));
        assert!((e[0].energy.j_per_token.unwrap() - 300.0 / 768.0).abs() < 1e-12);
        assert_eq!(e[0].implied_bandwidth_gbps, Some(30.0));
        // pp512: n_prompt tokens per rep.
        let pp = BenchRecord {
            n_prompt: 512,
            n_gen: 0,
            ..BenchRecord::example()
        };
        assert_eq!(tokens_per_rep(&pp), 512);
    }

    #[test]
    fn the_table_shows_dashes_and_the_reason_once() {
        let r = BenchRecord {
            id: 7,
            n_prompt: 0,
            n_gen: 128,
            avg_ts: 61.25,
            ..BenchRecord::example()
        };
        let none = EnergySummary {
            samples: 30,
            mean_power_w: None,
            energy_j: None,
            j_per_token: None,
            tokens_per_wh: None,
            energy_source: String::new(),
            reason: Some("cpu_package_energy: RAPL not readable here".into()),
            peak_temp_c: None,
            throttled: None,
            live_dram_gbps: None,
            gpu_mem_util_pct: None,
        };
        let e = RowEnergy {
            row_id: 7,
            run_id: 1,
            phase: "#0 tg128".into(),
            energy: none.clone(),
            implied_bandwidth_gbps: Some(24.5),
        };
        let t = table(&[r.clone()], &[e.clone(), RowEnergy { row_id: 8, ..e }]);
        assert!(
            t.contains("| tg128 | 61.25 | — | — | — | — | — | — | 24.5 | — |"),
            "{t}"
        );
        assert_eq!(t.matches("RAPL not readable here").count(), 1);
        let line = sample_line(&Sample {
            t_ns: 1_500_000_000,
            cpu_mhz: Some(2600.0),
            ..Sample::default()
        });
        assert!(line.starts_with("t    1.5 s | CPU — W"), "{line}");
        assert!(line.contains("CPU 2600 MHz"));
    }
}
