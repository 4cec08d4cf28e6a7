//! The frontier table: one row per arm, read from stored cells only (a cell not
//! measured prints `—`).

use super::{ArmInfo, FrontierCell, Measure, SpeedSummary, ppl_of, speed_of, task_of};
use crate::experiments::frontier::quant::Relation;
use crate::measure::evals::ppl::PplResult;
use crate::measure::evals::tasks::TaskResult;
use crate::units::{Bytes, or_dash};
use serde::{Deserialize, Serialize};

/// One arm's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrontierRow {
    /// Arm type (`Q8_0`).
    pub arm: String,
    /// Relation to the source's precision.
    pub relation: Relation,
    pub file_bytes: u64,
    /// Weight bytes streamed per decode step.
    pub streamed_bytes: u64,
    pub bits_per_weight: f64,
    /// sha256 of the arm's file.
    pub sha256: String,
    /// Speed cell.
    pub speed: Option<SpeedSummary>,
    /// Perplexity cells, per dataset.
    pub ppl: Vec<(String, Option<PplResult>)>,
    /// Task cells, per task.
    pub tasks: Vec<(String, Option<TaskResult>)>,
    /// Decode energy of the speed cell from the live sampler beside it (`None`
    /// without a speed cell).
    #[serde(default)]
    pub energy: Option<ArmEnergy>,
}

/// The decode (tg) energy of an arm's speed cell, read from the `row_energy` row
/// the live sampler wrote in the cell's transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmEnergy {
    /// The speed cell's run.
    pub run_id: i64,
    /// The tg bench row (`row_energy.row_id`); `None` without a recording.
    pub row_id: Option<i64>,
    /// Energy per generated token, J/token.
    pub j_per_token: Option<f64>,
    /// Tokens per watt-hour (3600 ÷ J/token), as stored.
    pub tokens_per_wh: Option<f64>,
    /// Mean power over the tg phase, W.
    pub mean_power_w: Option<f64>,
    /// The counters the energy sums (`RAPL package`, `NVML GPU`); empty without.
    pub energy_source: String,
    /// Why there is no energy figure, when there is none.
    pub reason: Option<String>,
}

/// The reason of a speed cell stored without a sampler recording.
pub const NO_RECORDING: &str = "no live sampler recording with this speed cell (measured with --no-sampler or by a version without the sampler beside the frontier)";

impl ArmEnergy {
    /// From the stored decode energy row of run `run_id` (`recorded`: the run has a
    /// sampler recording at all).
    pub fn from_stored(
        run_id: i64,
        e: Option<&crate::experiments::live::RowEnergy>,
        recorded: bool,
    ) -> ArmEnergy {
        match e {
            Some(e) => ArmEnergy {
                run_id,
                row_id: Some(e.row_id),
                j_per_token: e.energy.j_per_token,
                tokens_per_wh: e.energy.tokens_per_wh,
                mean_power_w: e.energy.mean_power_w,
                energy_source: e.energy.energy_source.clone(),
                reason: e.energy.reason.clone().or_else(|| {
                    e.energy
                        .j_per_token
                        .is_none()
                        .then(|| "the sampler gave no energy for the tg phase".to_string())
                }),
            },
            None => ArmEnergy {
                run_id,
                row_id: None,
                j_per_token: None,
                tokens_per_wh: None,
                mean_power_w: None,
                energy_source: String::new(),
                reason: Some(if recorded {
                    "the sampler recorded no phase for the tg test".into()
                } else {
                    NO_RECORDING.into()
                }),
            },
        }
    }

    /// Generated tokens per joule (1 ÷ J/token), when measured.
    pub fn tokens_per_joule(&self) -> Option<f64> {
        self.j_per_token.filter(|j| *j > 0.0).map(|j| 1.0 / j)
    }
}

impl FrontierRow {
    /// Builds a row from an arm and its (possibly missing) cells.
    pub fn from_cells(arm: &ArmInfo, cells: &[(Measure, Option<FrontierCell>)]) -> FrontierRow {
        let mut row = FrontierRow {
            arm: arm.arm.quant.clone(),
            relation: arm.arm.relation,
            file_bytes: arm.arm.file_bytes,
            streamed_bytes: arm.streamed_bytes,
            bits_per_weight: arm.arm.bits_per_weight,
            sha256: arm.arm.sha256.clone(),
            speed: None,
            ppl: vec![],
            tasks: vec![],
            energy: None,
        };
        for (m, c) in cells {
            match m {
                Measure::Speed => row.speed = c.as_ref().and_then(speed_of),
                Measure::Ppl(p) => row
                    .ppl
                    .push((p.dataset.clone(), c.as_ref().and_then(ppl_of))),
                Measure::Task(k, _) => row
                    .tasks
                    .push((k.name().to_string(), c.as_ref().and_then(task_of))),
            }
        }
        row
    }
}

fn dash() -> String {
    "—".into()
}

/// Renders the rows as a Markdown table with a legend; `—` = not measured.
pub fn render_markdown(rows: &[FrontierRow]) -> String {
    let Some(first) = rows.first() else {
        return "(no arms)\n".into();
    };
    let mut head = vec![
        "arm".to_string(),
        "vs source".into(),
        "bits/weight".into(),
        "file GB (GiB)".into(),
        "streamed GB/token".into(),
        "tg tok/s ± std (n)".into(),
        "tg % of ceiling".into(),
        "tg J/token".into(),
        "tg tokens/Wh".into(),
        "pp tok/s ± std".into(),
        "pp % of ceiling".into(),
    ];
    for (ds, _) in &first.ppl {
        head.push(format!("PPL {ds} ±"));
        head.push(format!("KLD {ds} mean ± / median / p99"));
        head.push(format!("same top {ds} %"));
    }
    for (t, _) in &first.tasks {
        head.push(format!("{t} % [95% CI] (n)"));
    }
    let mut out = format!(
        "| {} |\n|{}|\n",
        head.join(" | "),
        head.iter().map(|_| "---").collect::<Vec<_>>().join("|")
    );
    let mut reasons: Vec<String> = Vec::new();
    for r in rows {
        let b = Bytes(r.file_bytes);
        let rel = match r.relation {
            Relation::Above => "above",
            Relation::Source => "source",
            Relation::Below => "below",
        };
        let mut cols = vec![
            r.arm.clone(),
            rel.into(),
            format!("{:.2}", r.bits_per_weight),
            format!("{:.3} ({:.3})", b.gb(), b.gib()),
            format!("{:.3}", r.streamed_bytes as f64 / 1e9),
        ];
        match &r.speed {
            Some(s) => {
                cols.push(format!("{:.2} ± {:.2} ({})", s.tg_tps, s.tg_std, s.tg_n));
                cols.push(pct(s.tg_achieved));
                let e = r.energy.as_ref();
                cols.push(or_dash(e.and_then(|e| e.j_per_token), 4));
                cols.push(or_dash(e.and_then(|e| e.tokens_per_wh), 0));
                if let Some(why) = e.and_then(|e| e.reason.clone())
                    && !reasons.contains(&why)
                {
                    reasons.push(why);
                }
                cols.push(format!("{:.1} ± {:.1}", s.pp_tps, s.pp_std));
                cols.push(pct(s.pp_achieved));
            }
            None => cols.extend([dash(), dash(), dash(), dash(), dash(), dash()]),
        }
        for (_, p) in &r.ppl {
            match p {
                Some(p) => {
                    cols.push(format!("{:.4} ± {:.4}", p.ppl, p.ppl_unc));
                    match &p.kld {
                        Some(k) => {
                            cols.push(format!(
                                "{:.5} ± {:.5} / {:.5} / {:.4}",
                                k.mean, k.mean_unc, k.median, k.p99
                            ));
                            cols.push(format!("{:.2} ± {:.2}", k.same_top_pct, k.same_top_unc_pct));
                        }
                        None => cols.extend(["reference".to_string(), "reference".to_string()]),
                    }
                }
                None => cols.extend([dash(), dash(), dash()]),
            }
        }
        for (_, t) in &r.tasks {
            cols.push(match t {
                Some(t) => format!(
                    "{:.1} [{:.1}, {:.1}] ({}/{})",
                    t.accuracy * 100.0,
                    t.ci_low * 100.0,
                    t.ci_high * 100.0,
                    t.correct,
                    t.n
                ),
                None => dash(),
            });
        }
        out.push_str(&format!("| {} |\n", cols.join(" | ")));
    }
    out.push_str(
        "\nvs source: `above` = more bits per weight than the source; requantized from it, such an arm carries only the source's information (its quality equals the source's up to rounding) and isolates bytes vs speed. `below` = real quantization damage. `—` = not measured.\n",
    );
    for why in &reasons {
        out.push_str(&format!("energy —: {why}\n"));
    }
    out.push_str("GB = 10^9 B, GiB = 2^30 B. Streamed = weight bytes read per decode step. Ceilings: STREAM bandwidth ÷ bytes per step (tg), compute/bandwidth roof (pp). KLD vs the source, in nats, over the same tokens as the PPL. tg J/token: the live sampler's energy over the tg test's timed repetitions ÷ the tokens they generated; tokens/Wh = 3600 ÷ J/token.\n");
    out
}

fn pct(x: Option<f64>) -> String {
    match x {
        Some(x) if x.is_finite() => format!("{:.1}%", x * 100.0),
        _ => dash(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmeasured_cells_print_dashes() {
        let r = FrontierRow {
            arm: "Q8_0".into(),
            relation: Relation::Above,
            file_bytes: 1_650_000_000,
            streamed_bytes: 1_500_000_000,
            bits_per_weight: 8.5,
            sha256: "00".into(),
            speed: None,
            ppl: vec![("wiki".into(), None)],
            tasks: vec![("gsm8k".into(), None)],
            energy: None,
        };
        let md = render_markdown(&[r]);
        let line = md.lines().nth(2).unwrap();
        assert_eq!(
            line,
            "| Q8_0 | above | 8.50 | 1.650 (1.537) | 1.500 | — | — | — | — | — | — | — | — | — | — |"
        );
        assert!(md.lines().next().unwrap().contains("gsm8k % [95% CI] (n)"));
    }
}
