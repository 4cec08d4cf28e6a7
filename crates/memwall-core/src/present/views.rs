//! View models for the desktop app's pages and tray, built from stored records and
//! probes only (the `present` stage: nothing here measures). The front end renders
//! these as they are: every figure, ceiling and roof line is computed here, and a
//! missing figure is `None` (the UI prints `—`), never a guess.
//!
//! - [`TrayStatus`]: the tray menu lines (last bandwidth with its age, thermal, power
//!   with the battery refusal explained, memory pressure).
//! - [`RooflineView`]: measured points (arithmetic intensity, achieved GFLOP/s) with
//!   their provenance, against the bandwidth diagonal and the compute roof.
//! - [`FrontierView`]: per model/arm, the measured speed and the quality cells that
//!   exist; the rest `None`.
//! - [`BenchRow`]: a bench record with its test label, as the tables show it.
//! - [`compare_runs`]: two runs side by side, matched on the key columns.
//! - [`export_path`]: validates a file name the UI asks to export to.

use crate::measure::sampler::{Counter, Sample};
use crate::probe::hw::{LiveState, PowerSource};
use crate::roofline;
use crate::store::record::BenchRecord;
use crate::store::{FrontierCellValue, Store, StoreError, StoredStream};
use crate::units::{Gbps, Gflops, finite};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The tray menu's status lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct TrayStatus {
    /// `Bandwidth: 44.1 GB/s (triad, 2 threads, 3 min ago)` or `Bandwidth: — (never measured)`.
    pub bandwidth: String,
    /// `Thermal: nominal 54.0C`.
    pub thermal: String,
    /// `Power: AC` or the battery refusal.
    pub power: String,
    /// `Memory: 3.2 / 23.4 GiB used · swap 0.0 / 0.0 GiB`.
    pub memory: String,
}

/// A UTC instant.
pub type Now = chrono::DateTime<chrono::Utc>;

/// The current UTC instant.
pub fn now() -> Now {
    chrono::Utc::now()
}

/// `12 s ago`, `3 min ago`, `2 h ago`, `5 d ago`; `in the future` for clock skew;
/// `—` when `measured_at` is not RFC 3339.
pub fn age(measured_at: &str, now: chrono::DateTime<chrono::Utc>) -> String {
    let Ok(t) = chrono::DateTime::parse_from_rfc3339(measured_at) else {
        return "—".into();
    };
    let s = (now - t.with_timezone(&chrono::Utc)).num_seconds();
    match s {
        s if s < 0 => "in the future".into(),
        s if s < 60 => format!("{s} s ago"),
        s if s < 3600 => format!("{} min ago", s / 60),
        s if s < 86_400 => format!("{} h ago", s / 3600),
        s => format!("{} d ago", s / 86_400),
    }
}

impl TrayStatus {
    /// Builds the lines from the latest stored triad (if any) and a live sample.
    pub fn new(
        last: Option<&StoredStream>,
        live: &LiveState,
        now: chrono::DateTime<chrono::Utc>,
    ) -> TrayStatus {
        let bandwidth = match last {
            Some(s) => format!(
                "Bandwidth: {} ({}, {} thread{}, {})",
                Gbps(s.best_gbps),
                s.kernel,
                s.threads,
                if s.threads == 1 { "" } else { "s" },
                age(&s.measured_at, now)
            ),
            None => "Bandwidth: — (never measured)".into(),
        };
        let power = match &live.power {
            PowerSource::Battery { .. } => format!(
                "Power: {} — benchmarks refuse to record (clocks and bandwidth drop on battery)",
                live.power
            ),
            p => format!("Power: {p}"),
        };
        let m = &live.mem;
        let memory = if m.total.0 == 0 {
            "Memory: —".into()
        } else {
            format!(
                "Memory: {:.1} / {:.1} GiB used · swap {:.1} / {:.1} GiB",
                m.used().gib(),
                m.total.gib(),
                m.swap_used.gib(),
                m.swap_total.gib()
            )
        };
        TrayStatus {
            bandwidth,
            thermal: format!("Thermal: {}", live.thermal.label()),
            power,
            memory,
        }
    }
}

/// The decode a job is running now, for the tray's verdict: its test and the implied
/// bandwidth of its latest finished measurement (tok/s × bytes per token).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct DecodeNow {
    /// The test, e.g. `tg128`.
    pub label: String,
    /// Implied bandwidth, GB/s.
    pub implied_gbps: f64,
}

/// `decode at 62 % of measured bandwidth (tg128: 27.3 of 44.1 GB/s)`: the running
/// decode's implied bandwidth over the stored STREAM figure.
pub fn decode_verdict(d: &DecodeNow, stream_gbps: f64) -> String {
    format!(
        "decode at {:.0} % of measured bandwidth ({}: {:.1} of {:.1} GB/s)",
        100.0 * d.implied_gbps / stream_gbps,
        d.label,
        d.implied_gbps,
        stream_gbps
    )
}

/// A counter's reason, shortened for a menu line (its first clause).
fn short_reason(counters: &[Counter], names: &[&str]) -> String {
    let r = counters
        .iter()
        .filter(|c| names.contains(&c.name.as_str()))
        .find_map(|c| c.reason.clone())
        .unwrap_or_else(|| "no reading yet".into());
    let cut = r.find([':', ';', '(']).unwrap_or(r.len());
    r[..cut].trim().to_string()
}

impl TrayStatus {
    /// The lines with the live sampler's read added: bandwidth now (live counter,
    /// last STREAM beside it as the ceiling, the verdict while a decode runs),
    /// power (watts from the energy counters), temperatures with the thermal
    /// state, memory with swap traffic. `—` with a short reason for what this
    /// machine does not give.
    pub fn with_live(
        mut self,
        last: Option<&StoredStream>,
        sample: Option<&Sample>,
        counters: &[Counter],
        decode: Option<&DecodeNow>,
        now: Now,
    ) -> TrayStatus {
        use crate::units::or_dash;
        let ceiling = match last {
            Some(s) => format!(
                "ceiling {} (STREAM {}, {})",
                Gbps(s.best_gbps),
                s.kernel,
                age(&s.measured_at, now)
            ),
            None => "ceiling — (STREAM never measured)".into(),
        };
        let live = match sample.and_then(|x| x.dram_gbps) {
            Some(g) => format!("{g:.1} GB/s (uncore counters)"),
            None => format!("— ({})", short_reason(counters, &["dram_bandwidth"])),
        };
        let mut bw = format!("Bandwidth now: {live} · {ceiling}");
        if let (Some(d), Some(s)) = (decode, last) {
            bw.push_str(" · ");
            bw.push_str(&decode_verdict(d, s.best_gbps));
        }
        if let Some(u) = sample.and_then(|x| x.gpu_mem_util_pct) {
            bw.push_str(&format!(" · GPU memory controller {u:.0} % busy"));
        }
        self.bandwidth = bw;
        let watts: Vec<String> = [
            ("CPU", sample.and_then(|x| x.cpu_power_w)),
            ("DRAM", sample.and_then(|x| x.dram_power_w)),
            ("GPU", sample.and_then(|x| x.gpu_power_w)),
        ]
        .iter()
        .filter_map(|(n, w)| Some(format!("{n} {:.1} W", (*w)?)))
        .collect();
        let w = if watts.is_empty() {
            format!(
                "— W ({})",
                short_reason(counters, &["cpu_package_energy", "gpu_power"])
            )
        } else {
            watts.join(" · ")
        };
        self.power = format!("{} · {w}", self.power);
        let temps: Vec<String> = [
            ("CPU", sample.and_then(|x| x.cpu_temp_c)),
            ("GPU", sample.and_then(|x| x.gpu_temp_c)),
        ]
        .iter()
        .filter_map(|(n, t)| Some(format!("{n} {:.0} °C", (*t)?)))
        .collect();
        let t = if temps.is_empty() {
            format!("— °C ({})", short_reason(counters, &["cpu_temperature"]))
        } else {
            temps.join(" · ")
        };
        self.thermal = format!("{} · {t}", self.thermal);
        if let Some(x) = sample {
            self.memory = format!(
                "{} · swapped in/out {}/{} pages",
                self.memory,
                or_dash(x.swap_in_pages.map(|p| p as f64), 0),
                or_dash(x.swap_out_pages.map(|p| p as f64), 0)
            );
        }
        self
    }
}

/// One measured point of the roofline chart, with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct RooflinePoint {
    /// Bench row id.
    pub row_id: i64,
    /// Store id of the run (a `runs` row).
    pub run_id: i64,
    /// Index of its roof in [`RooflineView::roofs`].
    pub roof: usize,
    /// Arithmetic intensity, FLOP/byte.
    pub intensity: f64,
    pub achieved_gflops: f64,
    /// Attainable GFLOP/s at this intensity under its own roof.
    pub attainable_gflops: f64,
    /// `pp` or `tg`.
    pub phase: String,
    /// Series label: model type.
    pub series: String,
    /// `qwen2 494M Q4_K_M · tg128 @ d512 · 2 threads · 61.2 tok/s · run 3 row 17 · 2026-…`.
    pub provenance: String,
}

/// One roof of the roofline chart: one host and placement (its CPU, or the GPU its
/// layers were offloaded to), from the rows measured there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct RoofLine {
    /// `host (CPU, N cores[, GPUs]) · CPU` or `… · GPU`: the machine
    /// ([`crate::store::host::HostKey`]) and where the layers ran.
    pub label: String,
    /// STREAM bandwidth of the roof, GB/s (the largest among its rows).
    pub bandwidth_gbps: Option<f64>,
    /// Compute peak of the roof, GFLOP/s (GOP/s for int8; None where none is stored).
    pub peak_gflops: Option<f64>,
    pub peak_kind: String,
    /// Ridge point, FLOP/byte.
    pub ridge: Option<f64>,
    /// The roof as a polyline of `(intensity, GFLOP/s)`: diagonal up to the ridge,
    /// then flat. Empty without a bandwidth.
    pub roof: Vec<(f64, f64)>,
}

/// The roofline chart's data: one roof per host and placement, so a GPU's points sit
/// under the GPU's roof and a CPU's under the CPU's, side by side on one chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct RooflineView {
    /// The roofs, in label order.
    pub roofs: Vec<RoofLine>,
    /// Measured points.
    pub points: Vec<RooflinePoint>,
    /// Decode tok/s vs depth: `(series, depth, measured tok/s, ceiling tok/s)` (no
    /// ceiling where the row has none).
    pub decode_vs_depth: Vec<(String, i64, f64, Option<f64>)>,
    /// The per-token floors these rows allow: one fit of `t = t0 + bytes ÷ BW_eff`
    /// per machine, weight format and placement with three models or more. Empty from
    /// [`roofline_view`]; the experiments stage's `evidence::floor::views` fills it.
    pub floors: Vec<FloorView>,
}

/// One per-token floor fit, as the Roofline page shows it (milliseconds, GB).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct FloorView {
    /// The machine ([`crate::store::host::HostKey`] label).
    pub host: String,
    /// Weight format.
    pub quant: String,
    /// `GPU <name>` or `CPU, N threads`.
    pub placement: String,
    /// Fixed cost per token, ms.
    pub t0_ms: f64,
    /// Half-width of t0's 95 % interval, ms.
    pub t0_half95_ms: f64,
    /// Bandwidth beyond the floor, GB/s (null: a non-positive slope).
    pub bw_eff_gbps: Option<f64>,
    /// BW_eff's 95 % interval, GB/s (upper null: unbounded).
    pub bw_eff_95_gbps: (Option<f64>, Option<f64>),
    /// The largest |leave-one-out error|, % (null below four models).
    pub worst_loo_pct: Option<f64>,
    /// One point per model, by bytes.
    pub points: Vec<FloorPointView>,
}

/// One model under a floor fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct FloorPointView {
    /// Model type label.
    pub model_type: String,
    /// Bytes one batch-1 step at depth 0 reads, GB.
    pub gb_per_token: f64,
    /// Measured time per token, ms.
    pub measured_ms: f64,
    /// The full fit's time, ms.
    pub fit_ms: f64,
    /// Predicted from a fit of the other models, ms (null below four models).
    pub loo_ms: Option<f64>,
    /// `(leave-one-out − measured) ÷ measured`, %.
    pub loo_error_pct: Option<f64>,
    /// Measured rate ÷ the STREAM ceiling, %.
    pub achieved_pct: f64,
    /// The bench row(s) behind the point.
    pub row_ids: Vec<i64>,
}

/// The roof a row was measured under: its machine (hostname, CPU, logical cores and
/// GPUs: two machines may share a hostname) and placement.
fn roof_label(r: &BenchRecord) -> String {
    let host = crate::store::host::HostKey::of_bench(r).label();
    if r.n_gpu_layers > 0 && !r.gpu_info.trim().is_empty() {
        format!("{host} · GPU")
    } else {
        format!("{host} · CPU")
    }
}

/// Builds the roofline view from bench rows: per host and placement, the roof of the
/// largest stored bandwidth and compute peak among its rows; every roof spans the
/// x-range of all points and ridges.
pub fn roofline_view(rows: &[BenchRecord]) -> RooflineView {
    let mut labels: Vec<String> = rows.iter().map(roof_label).collect();
    labels.sort();
    labels.dedup();
    let mut roofs: Vec<RoofLine> = labels
        .iter()
        .map(|label| {
            let mine = rows.iter().filter(|r| &roof_label(r) == label);
            let bw = mine
                .clone()
                .filter_map(|r| r.bandwidth_gbps)
                .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
            let peak_row = mine
                .filter_map(|r| r.peak_gflops.filter(|&p| p > 0.0).map(|p| (r, p)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            let peak = peak_row.map(|(_, p)| p);
            RoofLine {
                label: label.clone(),
                bandwidth_gbps: bw,
                peak_gflops: peak,
                peak_kind: peak_row
                    .map(|(r, _)| r.peak_kind.clone())
                    .unwrap_or_default(),
                ridge: match (peak, bw) {
                    (Some(p), Some(b)) => Some(roofline::ridge_point(Gflops(p), Gbps(b))),
                    _ => None,
                },
                roof: vec![],
            }
        })
        .collect();
    let mut points = Vec::new();
    for r in rows {
        let (Some(i), Some(g)) = (r.intensity, r.achieved_gflops) else {
            continue;
        };
        if i <= 0.0 || g <= 0.0 {
            continue;
        }
        let label = roof_label(r);
        let k = labels.iter().position(|l| *l == label).unwrap_or(0);
        let rf = &roofs[k];
        let att = match (rf.peak_gflops, rf.bandwidth_gbps) {
            (Some(p), Some(b)) => roofline::attainable(Gflops(p), Gbps(b), i).0,
            (None, Some(b)) => i * b,
            _ => f64::NAN,
        };
        points.push(RooflinePoint {
            row_id: r.id,
            run_id: r.run_id,
            roof: k,
            intensity: i,
            achieved_gflops: g,
            attainable_gflops: att,
            phase: if r.is_decode() { "tg" } else { "pp" }.into(),
            series: r.model_type.clone(),
            provenance: format!(
                "{} · {} · {} · {} threads · {:.1} ± {:.1} tok/s · ceiling {} tok/s · STREAM {} GB/s · run {} row {} · {} · {}",
                label,
                r.model_type,
                split_label(r),
                r.n_threads,
                r.avg_ts,
                r.stddev_ts,
                crate::units::or_dash(r.ceiling_ts, 1),
                crate::units::or_dash(r.bandwidth_gbps, 1),
                r.run_id,
                r.id,
                r.test_time,
                r.build_commit
            ),
        });
    }
    let lo = points
        .iter()
        .map(|p| p.intensity)
        .fold(f64::INFINITY, f64::min)
        .min(0.1);
    let hi = points
        .iter()
        .map(|p| p.intensity)
        .chain(roofs.iter().filter_map(|r| r.ridge))
        .fold(0.0, f64::max)
        * 4.0;
    let hi = hi.max(lo * 100.0);
    for rf in &mut roofs {
        let Some(b) = rf.bandwidth_gbps else { continue };
        match (rf.peak_gflops, rf.ridge) {
            (Some(p), Some(x)) => rf.roof = vec![(lo, lo * b), (x, p), (hi.max(x * 4.0), p)],
            _ => rf.roof = vec![(lo, lo * b), (hi, hi * b)],
        }
    }
    let mut decode_vs_depth: Vec<(String, i64, f64, Option<f64>)> = rows
        .iter()
        .filter(|r| r.is_decode() && r.n_seqs == 1)
        .map(|r| (r.model_type.clone(), r.n_depth, r.avg_ts, r.ceiling_ts))
        .collect();
    decode_vs_depth.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    RooflineView {
        roofs,
        points,
        decode_vs_depth,
        floors: Vec::new(),
    }
}

/// A bench row's stored energy, as the Frontier page needs it (the app reads the
/// `row_energy` rows and hands these over).
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeEnergy {
    /// The bench row.
    pub row_id: i64,
    /// J per generated token, when measured.
    pub j_per_token: Option<f64>,
    /// Tokens per watt-hour, as stored.
    pub tokens_per_wh: Option<f64>,
    /// The counters the energy sums.
    pub energy_source: String,
    /// What the energy covers (`CPU package + DRAM`, `GPU board`).
    pub energy_scope: String,
    /// Why there is no energy figure, when there is none.
    pub reason: Option<String>,
}

/// One row of the Frontier page: one stored run's values for one model file.
/// Rows of different runs (or hosts) are never merged: a newer run does not hide
/// behind an older, faster one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct FrontierViewRow {
    /// The run the values come from.
    pub run_id: i64,
    /// The host that run measured.
    pub host: String,
    /// Model file name (a frontier arm's own file).
    pub model: String,
    /// Quantization (arm) label.
    pub quant: String,
    /// Decode tok/s of this run (tg, depth 0, one sequence, the run's largest thread count).
    pub decode_tps: Option<f64>,
    pub decode_ceiling_tps: Option<f64>,
    /// Prefill tok/s of this run (pp, depth 0, the run's largest thread count).
    pub prefill_tps: Option<f64>,
    /// Energy per generated token of that decode row, J/token, from the live
    /// sampler's `row_energy` row beside it (null: not measured, see `decode_energy_note`).
    pub decode_j_per_token: Option<f64>,
    /// Tokens per watt-hour of that row, as stored.
    pub decode_tokens_per_wh: Option<f64>,
    /// The energy's counter with its scope (`CPU package + DRAM (RAPL package + RAPL DRAM)`) or why there is none.
    pub decode_energy_note: String,
    /// Quality values, parallel to [`FrontierView::measures`]: PPL or accuracy (0..1).
    pub quality: Vec<Option<f64>>,
}

/// The Frontier page: speed from bench rows, quality from stored frontier cells,
/// newest run first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct FrontierView {
    /// Quality measures that have at least one stored cell (`ppl:wikitext`, `task:mmlu`).
    pub measures: Vec<String>,
    pub rows: Vec<FrontierViewRow>,
}

fn file_name(p: &str) -> String {
    Path::new(p)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.to_string())
}

/// Builds the Frontier page from bench rows and frontier cell values: one row per
/// (run, host, model file, quant), never a maximum across runs.
///
/// `energy`: the stored `row_energy` rows; the decode row that speaks for a run
/// brings its J/token, or the reason there is none.
pub fn frontier_view(
    rows: &[BenchRecord],
    cells: &[FrontierCellValue],
    energy: &[DecodeEnergy],
) -> FrontierView {
    let mut measures: Vec<String> = cells
        .iter()
        .filter(|c| c.measure != "speed")
        .map(|c| c.measure.clone())
        .collect();
    measures.sort();
    measures.dedup();
    let mut out: Vec<FrontierViewRow> = Vec::new();
    let get = |run_id: i64,
               host: &str,
               model: String,
               quant: &str,
               out: &mut Vec<FrontierViewRow>|
     -> usize {
        if let Some(i) = out.iter().position(|r| {
            r.run_id == run_id && r.host == host && r.model == model && r.quant == quant
        }) {
            return i;
        }
        out.push(FrontierViewRow {
            run_id,
            host: host.to_string(),
            model,
            quant: quant.to_string(),
            decode_tps: None,
            decode_ceiling_tps: None,
            prefill_tps: None,
            decode_j_per_token: None,
            decode_tokens_per_wh: None,
            decode_energy_note: "no decode row measured".into(),
            quality: vec![None; measures.len()],
        });
        out.len() - 1
    };
    // Within one run, the row with the most threads (then the first stored) speaks
    // for the run; values of other runs never compete with it.
    let mut threads_seen: Vec<(usize, bool, i64)> = Vec::new();
    for r in rows.iter().filter(|r| r.n_depth == 0 && r.n_seqs == 1) {
        let i = get(
            r.run_id,
            &r.hostname,
            file_name(&r.model_filename),
            &r.quant,
            &mut out,
        );
        let decode = r.is_decode();
        let prev = threads_seen
            .iter_mut()
            .find(|(j, d, _)| *j == i && *d == decode);
        match prev {
            Some((_, _, t)) if *t >= r.n_threads => continue,
            Some((_, _, t)) => *t = r.n_threads,
            None => threads_seen.push((i, decode, r.n_threads)),
        }
        let row = &mut out[i];
        if decode {
            row.decode_tps = finite(r.avg_ts);
            row.decode_ceiling_tps = r.ceiling_ts;
            let e = energy.iter().find(|e| e.row_id == r.id);
            row.decode_j_per_token = e.and_then(|e| e.j_per_token).and_then(finite);
            row.decode_tokens_per_wh = e.and_then(|e| e.tokens_per_wh).and_then(finite);
            row.decode_energy_note = match e {
                None => format!("row #{}: no live sampler recording beside it", r.id),
                Some(e) if row.decode_j_per_token.is_some() => {
                    format!("row #{}: {} ({})", r.id, e.energy_scope, e.energy_source)
                }
                Some(e) => format!(
                    "row #{}: {}",
                    r.id,
                    e.reason
                        .as_deref()
                        .unwrap_or("the sampler gave no energy for the tg phase")
                ),
            };
        } else {
            row.prefill_tps = finite(r.avg_ts);
        }
    }
    for c in cells {
        let i = get(
            c.run_id,
            &c.host,
            file_name(&c.arm_file),
            &c.arm_quant,
            &mut out,
        );
        if c.measure == "speed" {
            if out[i].decode_tps.is_none() {
                out[i].decode_tps = c.value.and_then(finite);
            }
        } else if let Some(k) = measures.iter().position(|m| *m == c.measure) {
            out[i].quality[k] = c.value.and_then(finite);
        }
    }
    out.sort_by_key(|r| std::cmp::Reverse(r.run_id));
    FrontierView {
        measures,
        rows: out,
    }
}

/// Reads every stored frontier cell's headline value with its run and host
/// ([`Store::frontier_cell_values`]).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn frontier_cells(store: &Store) -> Result<Vec<FrontierCellValue>, StoreError> {
    store.frontier_cell_values().await
}

/// A bench row as the app's tables show it: the stored record and its test label
/// (`tg128 x4 @ d512`, [`BenchRecord::test_label`]), so no page rebuilds the label.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct BenchRow {
    /// llama-bench's test label.
    pub test: String,
    /// The record, its fields at the top level of the JSON beside `test`.
    #[serde(flatten)]
    pub record: BenchRecord,
}

impl From<BenchRecord> for BenchRow {
    fn from(record: BenchRecord) -> BenchRow {
        BenchRow {
            test: record.test_label(),
            record,
        }
    }
}

/// One matched pair of rows of two runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct CompareRow {
    /// Model type.
    pub model: String,
    /// Test label, e.g. `tg128` or `pp512 @ d4096`, with the GPU split when it is not
    /// llama.cpp's default (`tg128 · split row 1.00/1.00`).
    pub test: String,
    /// CPU threads the engine ran with (llama-bench's `-t`).
    pub n_threads: i64,
    /// Run A tok/s (mean, std).
    pub a: Option<(f64, f64)>,
    /// Run B tok/s (mean, std).
    pub b: Option<(f64, f64)>,
    /// (B − A) ÷ A × 100, when both exist.
    pub change_pct: Option<f64>,
}

/// Matches the rows of two runs on (model type, test label and GPU split, threads) —
/// the key columns that make two measurements comparable — in A's order, then B's
/// extras.
pub fn compare_runs(a: &[BenchRecord], b: &[BenchRecord]) -> Vec<CompareRow> {
    let key = |r: &BenchRecord| (r.model_type.clone(), split_label(r), r.n_threads);
    let mut out: Vec<CompareRow> = Vec::new();
    for r in a {
        let (model, test, n_threads) = key(r);
        let m = b.iter().find(|x| key(x) == key(r));
        out.push(CompareRow {
            model,
            test,
            n_threads,
            a: Some((r.avg_ts, r.stddev_ts)),
            b: m.map(|x| (x.avg_ts, x.stddev_ts)),
            change_pct: m
                .filter(|_| r.avg_ts > 0.0)
                .map(|x| (x.avg_ts - r.avg_ts) / r.avg_ts * 100.0),
        });
    }
    for x in b {
        if !a.iter().any(|r| key(r) == key(x)) {
            let (model, test, n_threads) = key(x);
            out.push(CompareRow {
                model,
                test,
                n_threads,
                a: None,
                b: Some((x.avg_ts, x.stddev_ts)),
                change_pct: None,
            });
        }
    }
    out
}

/// A row's test label with its split mode and tensor split when they are not
/// llama.cpp's defaults (`layer`, `0.00`): `tg128 · split row 1.00/1.00`.
pub fn split_label(r: &BenchRecord) -> String {
    let l = &r.llama;
    if l.split_mode == "layer" && l.tensor_split == "0.00" {
        r.test_label()
    } else {
        format!(
            "{} · split {} {}",
            r.test_label(),
            l.split_mode,
            l.tensor_split
        )
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ExportPathError {
    /// The name is not a plain file name.
    #[error(
        "export file name {0:?} is not allowed: use letters, digits, '.', '_' or '-' only (no folders), at most 100 characters"
    )]
    BadName(String),
    /// The extension does not match the format.
    #[error("export file name {name:?} must end in .{ext} for this format")]
    BadExtension {
        name: String,
        /// The extension wanted.
        ext: String,
    },
}

/// Validates `name` (a bare file name from the UI) and joins it to `dir`: only
/// `[A-Za-z0-9._-]`, no leading dot, ≤ 100 characters, ending in `.ext`. So a UI
/// request can never write outside the exports folder.
///
/// # Errors
/// [`ExportPathError`] naming the problem.
pub fn export_path(dir: &Path, name: &str, ext: &str) -> Result<PathBuf, ExportPathError> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !ok {
        return Err(ExportPathError::BadName(name.to_string()));
    }
    let want = format!(".{ext}");
    if !name.to_ascii_lowercase().ends_with(&want) || name.len() == want.len() {
        return Err(ExportPathError::BadExtension {
            name: name.to_string(),
            ext: ext.to_string(),
        });
    }
    Ok(dir.join(name))
}

/// The folder exports go to: `$MEMWALL_EXPORTS`, else `<data dir>/memwall/exports`.
pub fn exports_dir() -> PathBuf {
    if let Ok(p) = std::env::var("MEMWALL_EXPORTS")
        && !p.is_empty()
    {
        return PathBuf::from(p);
    }
    directories::ProjectDirs::from("", "", "memwall")
        .map(|d| d.data_dir().join("exports"))
        .unwrap_or_else(|| PathBuf::from("exports"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::hw::{MemState, Thermal, ThermalState};
    use crate::units::Bytes;

    fn now() -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc)
    }

    fn live(power: PowerSource) -> LiveState {
        LiveState {
            power,
            thermal: Thermal {
                state: ThermalState::Nominal,
                max_celsius: Some(54.0),
            },
            mem: MemState {
                total: Bytes(16 << 30),
                available: Bytes(12 << 30),
                swap_total: Bytes(2 << 30),
                swap_used: Bytes(1 << 29),
            },
            swap_out_pages: Some(0),
        }
    }

    fn triad(at: &str) -> StoredStream {
        StoredStream {
            id: 1,
            run_id: 1,
            measured_at: at.into(),
            kernel: "triad".into(),
            threads: 2,
            array_bytes: 1,
            best_gbps: 44.06,
            avg_gbps: 43.0,
            hostname: "h".into(),
        }
    }

    #[test]
    fn ages_read_naturally() {
        assert_eq!(age("2026-11-30T11:59:48Z", now()), "12 s ago");
        assert_eq!(age("2026-11-30T11:57:00Z", now()), "3 min ago");
        assert_eq!(age("2026-11-30T10:00:00Z", now()), "2 h ago");
        assert_eq!(age("2026-11-25T12:00:00Z", now()), "5 d ago");
        assert_eq!(age("2026-11-30T12:00:05Z", now()), "in the future");
        assert_eq!(age("yesterday", now()), "—");
    }

    #[test]
    fn live_tray_lines_carry_counters_ceiling_and_verdict() {
        let last = triad("2026-11-30T11:57:00Z");
        let base = || TrayStatus::new(Some(&last), &live(PowerSource::Ac), now());
        let x = Sample {
            dram_gbps: Some(27.3),
            cpu_power_w: Some(35.25),
            cpu_temp_c: Some(61.0),
            swap_in_pages: Some(0),
            swap_out_pages: Some(3),
            ..Sample::default()
        };
        // 27.3 / 44.06 = 61.96… %: "62 %".
        let d = DecodeNow {
            label: "tg128".into(),
            implied_gbps: 27.3,
        };
        let t = base().with_live(Some(&last), Some(&x), &[], Some(&d), now());
        assert_eq!(
            t.bandwidth,
            "Bandwidth now: 27.3 GB/s (uncore counters) · ceiling 44.1 GB/s (STREAM triad, 3 min ago) · decode at 62 % of measured bandwidth (tg128: 27.3 of 44.1 GB/s)"
        );
        assert_eq!(t.power, "Power: AC · CPU 35.2 W");
        assert_eq!(t.thermal, "Thermal: nominal 54.0C · CPU 61 °C");
        assert!(
            t.memory.ends_with("swapped in/out 0/3 pages"),
            "{}",
            t.memory
        );
        // Nothing measured: dashes with the counters' first clause.
        let c = [
            Counter::unavailable(
                "dram_bandwidth",
                "x",
                "no memory-controller PMU (uncore_imc*) under …",
            ),
            Counter::unavailable(
                "cpu_package_energy",
                "x",
                "RAPL not readable here: /sys/class/powercap absent",
            ),
            Counter::unavailable("cpu_temperature", "x", "no CPU temperature sensor: none"),
        ];
        let t = base().with_live(None, Some(&Sample::default()), &c, None, now());
        assert_eq!(
            t.bandwidth,
            "Bandwidth now: — (no memory-controller PMU) · ceiling — (STREAM never measured)"
        );
        assert_eq!(t.power, "Power: AC · — W (RAPL not readable here)");
        assert_eq!(
            t.thermal,
            "Thermal: nominal 54.0C · — °C (no CPU temperature sensor)"
        );
    }

    #[test]
    fn tray_lines_show_measured_values_or_dash() {
        let t = TrayStatus::new(
            Some(&triad("2026-11-30T11:57:00Z")),
            &live(PowerSource::Ac),
            now(),
        );
        assert_eq!(
            t.bandwidth,
            "Bandwidth: 44.1 GB/s (triad, 2 threads, 3 min ago)"
        );
        assert_eq!(t.thermal, "Thermal: nominal 54.0C");
        assert_eq!(t.power, "Power: AC");
        assert_eq!(t.memory, "Memory: 4.0 / 16.0 GiB used · swap 0.5 / 2.0 GiB");
        let t = TrayStatus::new(
            None,
            &live(PowerSource::Battery {
                percent: Some(40.0),
            }),
            now(),
        );
        assert_eq!(t.bandwidth, "Bandwidth: — (never measured)");
        assert!(
            t.power
                .starts_with("Power: battery (40%) — benchmarks refuse"),
            "{}",
            t.power
        );
    }

    fn row(id: i64, tg: bool, depth: i64, intensity: f64, gflops: f64) -> BenchRecord {
        let mut r = BenchRecord::example();
        r.id = id;
        r.n_depth = depth;
        r.n_prompt = if tg { 0 } else { 512 };
        r.n_gen = if tg { 128 } else { 0 };
        r.intensity = Some(intensity);
        r.achieved_gflops = Some(gflops);
        r.bandwidth_gbps = Some(40.0);
        r.peak_gflops = Some(400.0);
        r
    }

    #[test]
    fn roofline_roof_is_min_of_diagonal_and_peak() {
        let v = roofline_view(&[row(1, true, 0, 2.0, 30.0), row(2, false, 0, 200.0, 300.0)]);
        assert_eq!(v.roofs.len(), 1);
        let rf = &v.roofs[0];
        // ridge = 400 GFLOP/s ÷ 40 GB/s = 10 FLOP/byte
        assert_eq!(rf.ridge, Some(10.0));
        assert_eq!(rf.roof[1], (10.0, 400.0));
        let (x0, y0) = rf.roof[0];
        assert!((y0 - x0 * 40.0).abs() < 1e-9);
        assert_eq!(rf.roof[2].1, 400.0);
        // attainable: tg at I=2 → 80 GFLOP/s; pp at I=200 → the 400 peak
        assert_eq!(v.points[0].attainable_gflops, 80.0);
        assert_eq!(v.points[1].attainable_gflops, 400.0);
        assert_eq!(v.points[0].phase, "tg");
        assert!(
            v.points[1].provenance.contains("pp512"),
            "{}",
            v.points[1].provenance
        );
        assert_eq!(v.decode_vs_depth.len(), 1);
    }

    #[test]
    fn roofline_without_rows_has_no_roof() {
        let v = roofline_view(&[]);
        assert!(v.roofs.is_empty() && v.points.is_empty());
    }

    #[test]
    fn a_gpu_host_and_a_cpu_host_each_get_their_own_roof() {
        let cpu = row(1, true, 0, 2.0, 30.0);
        let mut gpu = row(2, true, 0, 1.0, 3000.0);
        // Both machines are called the same: the GPU machine's cores and GPU tell it apart.
        assert_eq!(gpu.hostname, cpu.hostname);
        gpu.cores_logical = 16;
        gpu.n_gpu_layers = 99;
        gpu.gpu_info = "NVIDIA H200, 143771 MiB".into();
        gpu.bandwidth_gbps = Some(4400.0);
        gpu.peak_gflops = None;
        let v = roofline_view(&[cpu.clone(), gpu]);
        let labels: Vec<&str> = v.roofs.iter().map(|r| r.label.as_str()).collect();
        let h = &cpu.hostname;
        let c = &cpu.cpu_info;
        assert_eq!(
            labels,
            [
                format!("{h} ({c}, 16 cores, NVIDIA H200) · GPU"),
                format!("{h} ({c}, 2 cores) · CPU"),
            ]
        );
        // Each point under its own roof (roofs in label order: the GPU machine's
        // first): the GPU's at I = 1 is 1 × 4400 GB/s = 4400 GFLOP/s attainable (no
        // compute peak stored), the CPU's at I = 2 is 2 × 40 = 80.
        assert_eq!(v.points[0].roof, 1);
        assert_eq!(v.points[0].attainable_gflops, 80.0);
        assert_eq!(v.points[1].roof, 0);
        assert_eq!(v.points[1].attainable_gflops, 4400.0);
        assert_eq!(v.roofs[0].ridge, None);
        assert!(
            v.points[1]
                .provenance
                .starts_with(&format!("{h} ({c}, 16 cores, NVIDIA H200) · GPU · ")),
            "{}",
            v.points[1].provenance
        );
    }

    #[test]
    fn frontier_shows_only_what_is_measured() {
        let mut tg = row(1, true, 0, 2.0, 30.0);
        tg.avg_ts = 61.0;
        tg.ceiling_ts = Some(90.0);
        let cells = vec![FrontierCellValue {
            run_id: 7,
            host: "lab-2".into(),
            arm_file: "/m/other.Q8_0.gguf".into(),
            arm_quant: "Q8_0".into(),
            measure: "ppl:wikitext".into(),
            value: Some(12.5),
        }];
        let v = frontier_view(&[tg.clone()], &cells, &[]);
        assert_eq!(v.measures, vec!["ppl:wikitext"]);
        assert_eq!(v.rows.len(), 2);
        // newest run first
        assert_eq!((v.rows[0].run_id, v.rows[0].host.as_str()), (7, "lab-2"));
        assert_eq!(v.rows[0].model, "other.Q8_0.gguf");
        assert_eq!(v.rows[0].quality, vec![Some(12.5)]);
        assert_eq!(v.rows[0].decode_tps, None);
        assert_eq!(v.rows[1].run_id, tg.run_id);
        assert_eq!(v.rows[1].decode_tps, Some(61.0));
        assert_eq!(v.rows[1].decode_ceiling_tps, Some(90.0));
        assert_eq!(v.rows[1].prefill_tps, None);
        assert_eq!(v.rows[1].quality, vec![None]);
    }

    #[test]
    fn frontier_rows_carry_their_decode_rows_energy_or_why_not() {
        let mut a = row(1, true, 0, 2.0, 30.0);
        a.run_id = 4;
        a.avg_ts = 50.0;
        let mut b = a.clone();
        b.id = 2;
        b.run_id = 5;
        let mut c = a.clone();
        c.id = 3;
        c.run_id = 6;
        let energy = |row_id, j: Option<f64>, reason: Option<&str>| DecodeEnergy {
            row_id,
            j_per_token: j,
            tokens_per_wh: j.map(|j| 3600.0 / j),
            energy_source: if j.is_some() {
                "NVML GPU energy".into()
            } else {
                String::new()
            },
            energy_scope: if j.is_some() {
                "GPU board".into()
            } else {
                String::new()
            },
            reason: reason.map(str::to_string),
        };
        let v = frontier_view(
            &[a, b, c],
            &[],
            &[
                energy(1, Some(2.0), None),
                energy(2, None, Some("cpu_package_energy: RAPL not readable here")),
            ],
        );
        let got: Vec<(i64, Option<f64>, Option<f64>, &str)> = v
            .rows
            .iter()
            .map(|r| {
                (
                    r.run_id,
                    r.decode_j_per_token,
                    r.decode_tokens_per_wh,
                    r.decode_energy_note.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (6, None, None, "row #3: no live sampler recording beside it"),
                (
                    5,
                    None,
                    None,
                    "row #2: cpu_package_energy: RAPL not readable here"
                ),
                (
                    4,
                    Some(2.0),
                    Some(1800.0),
                    "row #1: GPU board (NVML GPU energy)"
                ),
            ]
        );
    }

    #[test]
    fn frontier_keeps_each_run_apart_instead_of_taking_the_maximum() {
        // Two runs of the same file: an old fast one and a new slow one. Each is a
        // row of its own with its own value; the new one is not replaced by the old.
        let mut old = row(1, true, 0, 2.0, 30.0);
        old.run_id = 3;
        old.avg_ts = 80.0;
        let mut new = old.clone();
        new.run_id = 9;
        new.avg_ts = 55.0;
        // Within run 9, the 1-thread row does not speak for the run: the most threads do.
        let mut new_1t = new.clone();
        new_1t.n_threads = 1;
        new_1t.avg_ts = 99.0;
        let mut other_host = new.clone();
        other_host.hostname = "elsewhere".into();
        other_host.avg_ts = 12.0;
        let v = frontier_view(&[old, new_1t, new.clone(), other_host], &[], &[]);
        let got: Vec<(i64, &str, Option<f64>)> = v
            .rows
            .iter()
            .map(|r| (r.run_id, r.host.as_str(), r.decode_tps))
            .collect();
        assert_eq!(
            got,
            vec![
                (9, new.hostname.as_str(), Some(55.0)),
                (9, "elsewhere", Some(12.0)),
                (3, new.hostname.as_str(), Some(80.0)),
            ]
        );
    }

    #[test]
    fn compare_matches_key_columns() {
        let mut a1 = row(1, true, 0, 1.0, 1.0);
        a1.avg_ts = 50.0;
        let mut b1 = a1.clone();
        b1.avg_ts = 55.0;
        let mut b2 = row(3, false, 0, 1.0, 1.0);
        b2.avg_ts = 300.0;
        let c = compare_runs(&[a1], &[b1, b2]);
        assert_eq!(c.len(), 2);
        assert!((c[0].change_pct.unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(c[1].a, None);
        assert_eq!(c[1].test, "pp512");
        // Rows of another split mode are another configuration: never paired.
        let mut a_row = row(1, true, 0, 1.0, 1.0);
        a_row.llama.split_mode = "row".into();
        a_row.llama.tensor_split = "1.00/1.00".into();
        let layer = row(1, true, 0, 1.0, 1.0);
        let c = compare_runs(&[a_row.clone()], &[layer, a_row]);
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c[0].test, "tg128 · split row 1.00/1.00");
        assert!(c[0].a.is_some() && c[0].b.is_some());
        assert_eq!((c[1].test.as_str(), c[1].a), ("tg128", None));
    }

    #[test]
    fn a_bench_row_sends_the_record_with_its_label_beside_it() {
        let mut r = row(7, true, 512, 1.0, 1.0);
        r.n_seqs = 4;
        let label = r.test_label();
        let v = serde_json::to_value(BenchRow::from(r.clone())).unwrap();
        assert_eq!(v["test"], label.as_str());
        assert!(label.ends_with(" x4 @ d512"), "{label}");
        // Every field of the record, flattened, and nothing else but the label.
        let rec = serde_json::to_value(&r).unwrap();
        let rec = rec.as_object().unwrap();
        let row = v.as_object().unwrap();
        assert_eq!(row.len(), rec.len() + 1);
        for (k, x) in rec {
            assert_eq!(&row[k], x, "{k}");
        }
    }

    #[test]
    fn export_names_cannot_escape_the_folder() {
        let d = Path::new("/x/exports");
        assert_eq!(
            export_path(d, "roof.png", "png").unwrap(),
            d.join("roof.png")
        );
        for bad in [
            "../a.png",
            "a/b.png",
            "",
            ".png",
            ".hidden.png",
            "a b.png",
            "/etc/x.png",
        ] {
            assert!(export_path(d, bad, "png").is_err(), "{bad}");
        }
        assert_eq!(
            export_path(d, "a.svg", "png").unwrap_err(),
            ExportPathError::BadExtension {
                name: "a.svg".into(),
                ext: "png".into()
            }
        );
    }
}
