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
/// ran in: integrated over the phase's timed intervals (one per repetition), divided
/// by the row's tokens. A row whose phase is missing (no mark) gets none.
pub fn row_energies(rec: &Recording, rows: &[BenchRecord], phases: &[String]) -> Vec<RowEnergy> {
    rows.iter()
        .zip(phases)
        .filter_map(|(r, name)| {
            rec.phase(name)?;
            let tokens = tokens_per_rep(r) * r.samples_ns.len() as u64;
            Some(RowEnergy {
                row_id: r.id,
                run_id: r.run_id,
                phase: name.clone(),
                energy: rec.energy(name, tokens),
                implied_bandwidth_gbps: r.implied_bandwidth_gbps,
            })
        })
        .collect()
}

/// `rows` paired with their energy (by row id) for the exporters: a row without an
/// energy row is exported with [`crate::present::export::NO_RECORDING`].
pub fn export_rows<'a>(
    rows: &'a [BenchRecord],
    energy: &'a [RowEnergy],
) -> Vec<crate::present::export::Row<'a>> {
    rows.iter()
        .map(|record| crate::present::export::Row {
            record,
            energy: energy
                .iter()
                .find(|e| e.row_id == record.id)
                .map(|e| &e.energy),
        })
        .collect()
}

/// Adds a [`Warning::Contended`](crate::measure::warning::Warning::Contended) to
/// each row (paired in order with its phase, as in [`row_energies`]) whose timed
/// repetitions shared the CPUs with other processes; returns `test: what` for each
/// row flagged, for printing at the end of the run.
pub fn flag_contended(rec: &Recording, rows: &mut [BenchRecord], phases: &[String]) -> Vec<String> {
    let mut flagged = Vec::new();
    for (r, name) in rows.iter_mut().zip(phases) {
        let Some(what) = rec.energy(name, 0).contended() else {
            continue;
        };
        let w = crate::measure::warning::Warning::Contended { what: what.clone() }.to_string();
        if !r.warnings.contains(&w) {
            r.warnings.push(w);
        }
        flagged.push(format!("{}: {what}", r.test_label()));
    }
    flagged
}

/// The energy table printed under a bench run: one line per row with its test,
/// tok/s, the timed time and the reads inside it, mean power, J/token (total and
/// above the idle baseline), tokens per Wh, what the energy covers, other processes'
/// CPU use, peak temperature, throttling, live and implied bandwidth; `—` for what
/// was not measured, and the reasons once below, with the idle baseline.
pub fn table(rows: &[BenchRecord], energy: &[RowEnergy]) -> String {
    use crate::units::or_dash;
    let mut s = String::from(
        "| test | tok/s | timed s | reads | mean W | J/token | J/token above idle | tokens/Wh | energy scope | others' CPU (cores) | peak °C | throttled | live GB/s | implied GB/s |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---:|\n",
    );
    let mut reasons: Vec<String> = Vec::new();
    let mut idle: Option<(f64, String)> = None;
    let mut below_idle: Vec<String> = Vec::new();
    for e in energy {
        let Some(r) = rows.iter().find(|r| r.id == e.row_id) else {
            continue;
        };
        let x = &e.energy;
        if let Some(why) = &x.reason
            && !reasons.contains(why)
        {
            reasons.push(why.clone());
        }
        if let (None, Some(w)) = (&idle, x.idle_power_w) {
            idle = Some((w, x.energy_scope.clone()));
        }
        if let (Some(m), Some(w), None) = (x.mean_power_w, x.idle_power_w, x.j_per_token_above_idle)
        {
            below_idle.push(format!(
                "J/token above idle —: {} drew {m:.1} W, below the idle baseline of {w:.1} W (the baseline is not this row's floor)",
                r.test_label()
            ));
        }
        s.push_str(&format!(
            "| {} | {:.2} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.test_label(),
            r.avg_ts,
            x.timed_ns as f64 / 1e9,
            x.samples,
            or_dash(x.mean_power_w, 1),
            or_dash(x.j_per_token, 4),
            or_dash(x.j_per_token_above_idle, 4),
            or_dash(x.tokens_per_wh, 0),
            if x.energy_scope.is_empty() {
                "—"
            } else {
                &x.energy_scope
            },
            or_dash(x.other_cpu_cores, 2),
            or_dash(x.peak_temp_c, 1),
            match x.throttled {
                Some(true) => "yes",
                Some(false) => "no",
                None => "—",
            },
            or_dash(x.live_dram_gbps, 1),
            or_dash(e.implied_bandwidth_gbps, 1),
        ));
    }
    match idle {
        Some((w, scope)) => s.push_str(&format!(
            "\nidle baseline (before the first test): {w:.1} W ({scope})"
        )),
        None if !energy.is_empty() => s.push_str("\nidle baseline: —"),
        None => {}
    }
    for why in reasons {
        s.push_str(&format!("\nenergy —: {why}"));
    }
    for line in below_idle {
        s.push_str(&format!("\n{line}"));
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
        // tg128, 2 sequences, 3 reps of 2 s each (timed 1–3, 4–6, 7–9 s): 768 tokens
        // in 6 s. Inside each repetition the counter rises 100 J in 2 s (50 W); between
        // them 200 J per second of untimed depth prefill, which must not count:
        // 3 × 100 J = 300 J, 300 / 768 J/token, 50 W.
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
        let joules = [
            0.0, 200.0, 250.0, 300.0, 500.0, 550.0, 600.0, 800.0, 850.0, 900.0, 1100.0,
        ];
        let rec = Recording {
            hz: 1.0,
            samples: joules
                .iter()
                .enumerate()
                .map(|(i, &j)| s(i as u64 * 1_000_000_000, j))
                .collect(),
            phases: vec![Phase {
                name: phase_name(0, "tg128"),
                start_ns: 0,
                end_ns: 10_000_000_000,
            }],
            intervals: (0..3)
                .map(|i| crate::measure::sampler::session::Interval {
                    phase: phase_name(0, "tg128"),
                    rep: i + 1,
                    start_ns: (1 + 3 * i as u64) * 1_000_000_000,
                    end_ns: (3 + 3 * i as u64) * 1_000_000_000,
                })
                .collect(),
            counters: vec![Counter::available("cpu_package_energy", "fixture")],
        };
        let e = row_energies(&rec, &[r], &["#0 tg128".into()]);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].energy.mean_power_w, Some(50.0));
        assert_eq!(e[0].energy.energy_j, Some(300.0));
        assert_eq!(e[0].energy.timed_ns, 6_000_000_000);
        assert_eq!(e[0].energy.tokens, 768);
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
            ..EnergySummary::default()
        };
        let e = RowEnergy {
            row_id: 7,
            run_id: 1,
            phase: "#0 tg128".into(),
            energy: none.clone(),
            implied_bandwidth_gbps: Some(24.5),
        };
        let t = table(
            std::slice::from_ref(&r),
            &[e.clone(), RowEnergy { row_id: 8, ..e }],
        );
        assert!(
            t.contains("| tg128 | 61.25 | 0.00 | 30 | — | — | — | — | — | — | — | — | — | 24.5 |"),
            "{t}"
        );
        assert!(t.contains("idle baseline: —"), "{t}");
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
