//! A finished instance becomes a [`BenchRecord`] in three named steps:
//!
//! 1. [`detect_warnings`]: what the row must carry as a caveat (no ceiling, outliers,
//!    high variance, a debug build, and the guard's battery, swapping and thermal
//!    findings);
//! 2. placement: every ceiling, the achieved fractions, the implied bandwidth and the
//!    arithmetic intensity, all from [`roofline::place`];
//! 3. [`Provenance`]: the build, engine, host and live state the row was measured on.
//!
//! [`make_record`] runs the three and lays the results out as the record's columns;
//! it computes nothing itself.

use super::{Instance, ModelRun, RunContext};
use crate::measure::engine::EngineInfo;
use crate::measure::guard::Findings;
use crate::measure::stats::Observations;
use crate::measure::warning::Warning;
use crate::probe::hw::LiveState;
use crate::roofline::{self, InstancePlacement, Workload};
use crate::store::record::{self, BenchRecord};
use crate::units::finite;

/// What measuring one instance produced, besides its configuration.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The engine that ran it.
    pub engine: EngineInfo,
    /// Every timed repetition, ns (at least one).
    pub samples_ns: Vec<u64>,
    /// UTC RFC 3339 time the test started.
    pub test_time: String,
    /// The machine's live state before the warm-up.
    pub before: LiveState,
    /// The machine's live state after the last repetition.
    pub after: LiveState,
}

/// The repetitions of one instance as time and rate samples.
#[derive(Debug, Clone)]
pub struct Timing {
    /// Time per repetition, ns.
    pub ns: Observations,
    /// Tokens/s per repetition (summed over the sequences), as llama-bench averages them.
    pub ts: Observations,
    /// The same rates as a list, for the record.
    pub samples_ts: Vec<f64>,
}

impl Timing {
    /// Rates of `samples_ns` for workload `w`: `n_prompt` tokens per pp repetition,
    /// `n_gen × n_seqs` per tg repetition.
    ///
    /// # Panics
    /// When `samples_ns` is empty (a plan runs at least one repetition, and every
    /// sample is at least 1 ns).
    pub fn new(w: &Workload, samples_ns: &[u64]) -> Timing {
        let tokens = if w.is_prefill() {
            w.n_prompt as f64
        } else {
            (w.n_gen * w.n_seqs) as f64
        };
        let samples_ts: Vec<f64> = samples_ns
            .iter()
            .map(|&ns| tokens * 1e9 / ns as f64)
            .collect();
        let ns = Observations::new(samples_ns.iter().map(|&x| x as f64).collect())
            .expect("reps ≥ 1, finite");
        let ts = Observations::new(samples_ts.clone()).expect("finite");
        Timing { ns, ts, samples_ts }
    }
}

/// The caveats of a measured instance, in the order a row shows them: a missing
/// ceiling first (with the roof that is missing), then the guard's findings between
/// `before` and `after`, outliers (MAD z-score), a coefficient of variation above
/// 5 %, a debug build. Also returns the pages swapped out during the test (`None`
/// when the OS does not report it).
pub fn detect_warnings(
    timing: &Timing,
    placement: &InstancePlacement,
    before: &LiveState,
    after: &LiveState,
) -> Findings {
    let Findings {
        mut warnings,
        swap_out_pages,
    } = crate::measure::guard::findings(before, after);
    if let Some(reason) = placement.missing_reason.clone() {
        warnings.insert(0, Warning::NoCeiling { reason });
    }
    let outliers = timing.ns.outliers().len();
    if outliers > 0 {
        warnings.push(Warning::Outliers { n: outliers });
    }
    let ts = &timing.ts;
    let cv = ts.std_dev() / ts.mean();
    if ts.len() > 1 && cv > 0.05 {
        warnings.push(Warning::HighVariance { cv });
    }
    if cfg!(debug_assertions) {
        warnings.push(Warning::DebugBuild);
    }
    Findings {
        warnings,
        swap_out_pages,
    }
}

/// Who, what and where a row was measured on: its provenance columns besides the
/// configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Provenance {
    /// memwall's commit.
    pub build_commit: String,
    /// memwall's build number.
    pub build_number: Option<i64>,
    /// The engine's name, build, back ends and system info.
    pub engine: EngineInfo,
    /// CPU brand string.
    pub cpu_info: String,
    /// GPUs, `, `-separated as llama-bench lists them.
    pub gpu_info: String,
    /// Logical CPUs of the machine (hardware threads).
    pub cores_logical: i64,
    /// Installed RAM, bytes.
    pub ram_bytes: i64,
    /// OS and version.
    pub os: String,
    /// OS kernel release (`uname -r`).
    pub kernel: String,
    /// Hostname of the machine that measured it.
    pub hostname: String,
    /// Thermal state before the test.
    pub thermal_before: String,
    /// Thermal state after the test.
    pub thermal_after: String,
    /// Power source after the test (`ac`, `battery`, `unknown`).
    pub power_source: String,
}

impl Provenance {
    /// The provenance of a test run by `engine` in `cx`, between `before` and `after`.
    pub fn of(
        cx: &RunContext<'_>,
        engine: &EngineInfo,
        before: &LiveState,
        after: &LiveState,
    ) -> Provenance {
        Provenance {
            build_commit: crate::BUILD_COMMIT.to_string(),
            build_number: crate::build_number(),
            engine: engine.clone(),
            cpu_info: cx.host.cpu_model.clone(),
            gpu_info: cx.host.gpus.join(", "),
            cores_logical: cx.host.cores_logical as i64,
            ram_bytes: cx.host.ram.0 as i64,
            os: cx.host.os.clone(),
            kernel: cx.host.kernel.clone(),
            hostname: cx.host.hostname.clone(),
            thermal_before: before.thermal.label(),
            thermal_after: after.thermal.label(),
            power_source: after.power.label().into(),
        }
    }
}

/// Builds the record of a finished instance: [`detect_warnings`], placement
/// ([`roofline::place`]) and [`Provenance`], laid out as the record's columns.
pub fn make_record(
    cx: &RunContext<'_>,
    mr: &ModelRun,
    inst: &Instance,
    measured: Measured,
) -> BenchRecord {
    let plan = cx.plan;
    let facts = &mr.facts;
    let w = inst.workload(plan);
    let timing = Timing::new(&w, &measured.samples_ns);
    let placement = roofline::place(facts, &w, cx.roof, timing.ts.mean());
    let Findings {
        warnings,
        swap_out_pages: swapped,
    } = detect_warnings(&timing, &placement, &measured.before, &measured.after);
    let prov = Provenance::of(cx, &measured.engine, &measured.before, &measured.after);
    let (ns, ts) = (&timing.ns, &timing.ts);
    BenchRecord {
        id: 0,
        run_id: cx.run_id,
        build_commit: prov.build_commit,
        build_number: prov.build_number,
        engine: prov.engine.name,
        engine_build: prov.engine.build,
        backends: prov.engine.backends,
        system_info: prov.engine.system_info,
        cpu_info: prov.cpu_info,
        gpu_info: prov.gpu_info,
        model_filename: facts.path.display().to_string(),
        model_type: facts.model_type(),
        model_size: facts.tensor_bytes.0 as i64,
        model_n_params: facts.n_params as i64,
        model_sha256: mr.sha256.clone(),
        model_file_bytes: facts.file_bytes.0 as i64,
        quant: facts.quant.clone(),
        synthetic: facts.synthetic,
        n_batch: plan.n_batch as i64,
        n_ubatch: plan.n_ubatch as i64,
        n_threads: inst.n_threads as i64,
        n_gpu_layers: plan.n_gpu_layers as i64,
        llama: record::LlamaDefaults {
            split_mode: plan.split.mode.name().into(),
            tensor_split: plan.split.tensor_split.llama_bench_text(),
            ..record::LlamaDefaults::default()
        },
        type_k: plan.type_k.name().into(),
        type_v: plan.type_v.name().into(),
        flash_attn: record::flash_attn_value(plan.flash_attn),
        n_prompt: inst.n_prompt as i64,
        n_gen: inst.n_gen as i64,
        n_depth: inst.n_depth as i64,
        n_seqs: inst.n_seqs as i64,
        test_time: measured.test_time,
        avg_ns: ns.mean().round() as i64,
        stddev_ns: ns.std_dev().round() as i64,
        avg_ts: ts.mean(),
        stddev_ts: ts.std_dev(),
        min_ts: ts.min(),
        max_ts: ts.max(),
        samples_ns: measured.samples_ns,
        samples_ts: timing.samples_ts,
        bandwidth_gbps: finite(cx.roof.bandwidth.0),
        stream_id: cx.roof.stream_id,
        peak_gflops: placement.peak.gflops.and_then(|g| finite(g.0)),
        peak_kind: placement.peak.kind,
        streamed_bytes: facts.streamed_bytes.0 as i64,
        kv_bytes_per_token: facts.kv_bytes_per_token(plan.type_k).0 as i64,
        bytes_per_step: finite(placement.bytes_per_step),
        ceiling_ts: placement.triad.and_then(|p| finite(p.ceiling_tps)),
        achieved: placement.triad.and_then(|p| finite(p.achieved)),
        implied_bandwidth_gbps: placement.implied_bandwidth.map(|g| g.0),
        flops_per_token: finite(placement.compute.flops_per_token),
        intensity: finite(placement.compute.arithmetic_intensity),
        achieved_gflops: finite(placement.achieved_compute.0),
        bandwidth_kernel: "triad".into(),
        read_bandwidth_gbps: cx.roof.read_bandwidth.map(|b| b.0),
        decode_ceiling_ts_read: placement.read.map(|p| p.ceiling_tps),
        achieved_read: placement.read.map(|p| p.achieved),
        cores_logical: prov.cores_logical,
        ram_bytes: prov.ram_bytes,
        os: prov.os,
        kernel: prov.kernel,
        hostname: prov.hostname,
        thermal_before: prov.thermal_before,
        thermal_after: prov.thermal_after,
        power_source: prov.power_source,
        swap_out_pages: swapped.map(|p| p as i64),
        warnings: warnings.iter().map(|w| w.to_string()).collect(),
    }
}
