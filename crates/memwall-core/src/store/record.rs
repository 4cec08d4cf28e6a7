//! The flat benchmark record: one row per test instance, with configuration,
//! hardware, build, timestamps, raw samples and the roofline placement side by
//! side (llama-bench's `test` struct).
//!
//! [`BenchRecord::fields`] is the one field list that the store, every exporter
//! and the charts walk. It starts with llama-bench's columns, with llama-bench's
//! names, types, encodings and order (`test::get_fields()` in llama.cpp's
//! `tools/llama-bench/llama-bench.cpp`, then `samples_ns` and `samples_ts` as its
//! JSON printers append them), so that llama.cpp's `scripts/compare-llama-bench.py`
//! reads memwall's exports; memwall's own columns follow, each carrying its unit in
//! its name.

use serde::{Deserialize, Deserializer, Serialize};

/// Rows written before `bandwidth_kernel` existed used triad.
fn triad() -> String {
    "triad".into()
}

/// llama-bench's t/s columns are numbers in every export; a null read back (a row
/// whose value was not finite) is NaN there.
fn f64_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// The separator CSV and Markdown print between a row's warnings (and the one
/// exports written before warnings were a list used).
pub const WARNINGS_SEPARATOR: &str = "; ";

/// Reads warnings as a list, or as the `; `-joined text that exports written before
/// warnings were a list hold (empty text: no warnings).
fn warnings_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        List(Vec<String>),
        Joined(String),
    }
    Ok(match Either::deserialize(d)? {
        Either::List(v) => v,
        Either::Joined(s) if s.is_empty() => Vec::new(),
        Either::Joined(s) => s.split(WARNINGS_SEPARATOR).map(String::from).collect(),
    })
}

/// The typed value of one column of a [`BenchRecord`], as every exporter and the store read it.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnValue {
    /// Integer.
    Int(i64),
    Real(f64),
    Text(String),
    /// Not measured / not applicable (printed `—` in tables, NULL in SQL, empty in CSV).
    Null,
    /// Boolean: `true`/`false` in JSON, 1/0 in CSV and SQL (llama-bench's `BOOL` fields).
    Bool(bool),
    /// Integer list (samples_ns).
    Ints(Vec<u64>),
    /// Real list (samples_ts).
    Reals(Vec<f64>),
    /// Text list (warnings): a JSON array in JSON and SQL, `; `-joined in CSV and tables.
    Texts(Vec<String>),
}

impl ColumnValue {
    /// SQLite column type of this cell.
    pub fn sql_type(&self) -> &'static str {
        match self {
            ColumnValue::Int(_) | ColumnValue::Bool(_) => "INTEGER",
            ColumnValue::Real(_) => "REAL",
            _ => "TEXT",
        }
    }
    /// Plain-text rendering: number lists space-separated (llama-bench's CSV style),
    /// text lists `; `-joined, Null empty.
    pub fn to_text(&self) -> String {
        match self {
            ColumnValue::Int(v) => v.to_string(),
            ColumnValue::Bool(v) => (*v as i64).to_string(),
            ColumnValue::Real(v) => format!("{v}"),
            ColumnValue::Text(s) => s.clone(),
            ColumnValue::Null => String::new(),
            ColumnValue::Ints(v) => v
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            ColumnValue::Reals(v) => v
                .iter()
                .map(|x| format!("{x:.6}"))
                .collect::<Vec<_>>()
                .join(" "),
            ColumnValue::Texts(v) => v.join(WARNINGS_SEPARATOR),
        }
    }
}

/// llama-bench's columns in its order (`test::get_fields()` of llama.cpp's
/// `tools/llama-bench/llama-bench.cpp`, as vendored by llama-cpp-python 0.3.36), then
/// the two sample lists its JSON printers append. [`BenchRecord::fields`] starts with
/// exactly these.
pub const LLAMA_BENCH_COLUMNS: [&str; 44] = [
    "build_commit",
    "build_number",
    "cpu_info",
    "gpu_info",
    "backends",
    "model_filename",
    "model_type",
    "model_size",
    "model_n_params",
    "n_batch",
    "n_ubatch",
    "n_threads",
    "cpu_mask",
    "cpu_strict",
    "poll",
    "type_k",
    "type_v",
    "n_gpu_layers",
    "n_cpu_moe",
    "split_mode",
    "main_gpu",
    "no_kv_offload",
    "flash_attn",
    "devices",
    "tensor_split",
    "tensor_buft_overrides",
    "load_mode",
    "lazy_mode",
    "embeddings",
    "no_op_offload",
    "no_host",
    "repack",
    "fit_target",
    "fit_min_ctx",
    "n_prompt",
    "n_gen",
    "n_depth",
    "test_time",
    "avg_ns",
    "stddev_ns",
    "avg_ts",
    "stddev_ts",
    "samples_ns",
    "samples_ts",
];

/// A flash-attention choice (`None` = llama.cpp decides) in llama.cpp's
/// `llama_flash_attn_type` values, as llama-bench writes them: -1 auto, 0 off, 1 on.
pub fn flash_attn_value(choice: Option<bool>) -> i64 {
    match choice {
        None => -1,
        Some(false) => 0,
        Some(true) => 1,
    }
}

/// Whether a column identifies the configuration (compare runs on it) or holds a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnRole {
    /// Configuration identity (llama-bench's key properties).
    Key,
    /// Measured or derived value.
    Measure,
    /// Provenance (who/when/where).
    Provenance,
}

/// The llama.cpp parameters that memwall leaves at llama.cpp's defaults (all but the
/// split mode and tensor split, which `memwall bench` passes through), as llama-bench
/// writes them. llama-bench's key columns must all be present and non-null: its
/// `compare-llama-bench.py` pairs two builds' rows on every one of them.
///
/// [`Default`] is what memwall's engine runs with: `llama_model_default_params()` and
/// `llama_context_default_params()` with only the fields memwall sets (threads,
/// batch sizes, cache types, GPU layers, flash attention) changed, no CPU mask and no
/// custom thread pool (ggml's `ggml_threadpool_params_init` polls at 50).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct LlamaDefaults {
    /// CPU affinity mask, hex (`0x0` = none).
    pub cpu_mask: String,
    /// Strict CPU placement.
    pub cpu_strict: bool,
    /// Thread-pool polling level, 0–100.
    pub poll: i64,
    /// MoE expert layers kept on the CPU.
    pub n_cpu_moe: i64,
    /// Multi-GPU split mode (`none`, `layer`, `row`, `tensor`): `memwall bench
    /// --split-mode` sets it (llama.cpp's default `layer` otherwise).
    pub split_mode: String,
    /// The GPU used when the split mode is `none`.
    pub main_gpu: i64,
    /// KV cache kept off the GPU.
    pub no_kv_offload: bool,
    /// Devices used, `/`-separated (`auto` = llama.cpp's choice).
    pub devices: String,
    /// Tensor split over GPUs, `/`-separated proportions as llama-bench prints them
    /// (`1.00/1.00`; `0.00` = llama.cpp's default): `memwall bench --tensor-split` sets it.
    pub tensor_split: String,
    /// Tensor buffer-type overrides (`none`).
    pub tensor_buft_overrides: String,
    /// Model loading mode (`auto`, `none`, `mmap`, `mlock`, `mmap+mlock`, `dio`).
    pub load_mode: String,
    /// On-demand tensor reading (`off`, `auto`, `on`).
    pub lazy_mode: String,
    /// Embeddings output.
    pub embeddings: bool,
    /// Host tensor operations not offloaded to the device (llama-bench writes it as an integer).
    pub no_op_offload: i64,
    /// Host buffer bypassed.
    pub no_host: bool,
    /// Weight repacking into extra buffer types (`use_extra_bufts`).
    pub repack: bool,
    /// Memory margin for fitting parameters to the device, bytes (0 = not fitted).
    pub fit_target: i64,
    /// Minimum context when fitting parameters (0 = not fitted).
    pub fit_min_ctx: i64,
}

impl Default for LlamaDefaults {
    fn default() -> Self {
        LlamaDefaults {
            cpu_mask: "0x0".into(),
            cpu_strict: false,
            poll: 50,
            n_cpu_moe: 0,
            split_mode: "layer".into(),
            main_gpu: 0,
            no_kv_offload: false,
            devices: "auto".into(),
            tensor_split: "0.00".into(),
            tensor_buft_overrides: "none".into(),
            load_mode: "auto".into(),
            lazy_mode: "auto".into(),
            embeddings: false,
            no_op_offload: 0,
            no_host: false,
            repack: true,
            fit_target: 0,
            fit_min_ctx: 0,
        }
    }
}

/// llama-bench's name of a test: `pp512` for a prefill of 512 tokens, `tg128` for
/// 128 decode steps, then memwall's ` x4` when 4 sequences decode together and
/// llama-bench's ` @ d512` when 512 tokens are already in the KV cache
/// (`tg128 x4 @ d512`). The one definition behind [`BenchRecord::test_label`], the
/// bench plan's instance labels and every label the app shows.
pub fn test_label(n_prompt: i64, n_gen: i64, n_seqs: i64, n_depth: i64) -> String {
    let mut s = if n_prompt > 0 {
        format!("pp{n_prompt}")
    } else {
        format!("tg{n_gen}")
    };
    if n_seqs > 1 {
        s.push_str(&format!(" x{n_seqs}"));
    }
    if n_depth > 0 {
        s.push_str(&format!(" @ d{n_depth}"));
    }
    s
}

/// One benchmark test instance (pp, tg, or a batched tg) with full provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
pub struct BenchRecord {
    /// Row id in the store (0 before storing).
    pub id: i64,
    /// The run this row belongs to.
    pub run_id: i64,
    /// memwall git commit (embedded at build time; `-dirty` when built from a modified tree).
    pub build_commit: String,
    /// memwall's build number: the commit count of its history (`git rev-list --count
    /// HEAD`, as llama.cpp numbers its builds); `None` when git could not tell (no git,
    /// or a shallow clone whose count would be wrong).
    pub build_number: Option<i64>,
    /// Engine name (`llama.cpp`).
    pub engine: String,
    /// Engine build (`llama-cpp-sys-2 0.1.161`).
    pub engine_build: String,
    /// llama.cpp's registered back ends other than the CPU, `,`-separated, or `CPU`
    /// when there are none (llama-bench's `backends`: `CPU`, `CUDA`, `Metal`, …).
    pub backends: String,
    /// llama.cpp's `llama_print_system_info()`: the CPU features it was built with
    /// (`CPU : SSE3 = 1 | AVX2 = 1 | …`).
    pub system_info: String,
    /// CPU brand string.
    pub cpu_info: String,
    /// Accelerators, `, `-separated as llama-bench writes them, empty when none.
    pub gpu_info: String,
    /// Model path as given.
    pub model_filename: String,
    /// `arch size quant`, e.g. `qwen2 494M Q4_K_M`.
    pub model_type: String,
    /// Tensor bytes (llama-bench's `model_size`).
    pub model_size: i64,
    /// Parameters.
    pub model_n_params: i64,
    /// sha256 of the file.
    pub model_sha256: String,
    /// File size in bytes.
    pub model_file_bytes: i64,
    /// Quantization label.
    pub quant: String,
    /// Rows from a synthetic (random-weight) model are marked.
    pub synthetic: bool,
    /// Logical batch.
    pub n_batch: i64,
    /// Micro-batch.
    pub n_ubatch: i64,
    /// Threads (cores used).
    pub n_threads: i64,
    /// Layers offloaded to the GPU (llama-bench's `-ngl`).
    pub n_gpu_layers: i64,
    /// llama.cpp parameters memwall leaves at their defaults, in llama-bench's encoding.
    #[serde(flatten, default)]
    pub llama: LlamaDefaults,
    /// K cache type.
    pub type_k: String,
    /// V cache type.
    pub type_v: String,
    /// Flash attention in llama.cpp's `llama_flash_attn_type` (llama-bench's integer
    /// encoding): -1 = auto (llama.cpp decides), 0 = off, 1 = on.
    pub flash_attn: i64,
    /// Prompt tokens (pp test), 0 for tg.
    pub n_prompt: i64,
    /// Generated tokens per sequence (tg test), 0 for pp.
    pub n_gen: i64,
    /// Context depth before the test.
    pub n_depth: i64,
    /// Parallel sequences decoded together (1 = plain llama-bench tg).
    pub n_seqs: i64,
    /// UTC RFC 3339 time the test started.
    pub test_time: String,
    /// Mean time per repetition, ns.
    pub avg_ns: i64,
    /// Std of time per repetition, ns.
    pub stddev_ns: i64,
    /// Mean tokens/s (aggregate over sequences), averaged per sample as llama-bench does.
    #[serde(deserialize_with = "f64_or_nan")]
    #[ts(type = "number | null")]
    pub avg_ts: f64,
    /// Std of tokens/s.
    #[serde(deserialize_with = "f64_or_nan")]
    #[ts(type = "number | null")]
    pub stddev_ts: f64,
    /// Slowest repetition, tokens/s.
    #[serde(deserialize_with = "f64_or_nan")]
    #[ts(type = "number | null")]
    pub min_ts: f64,
    /// Fastest repetition, tokens/s.
    #[serde(deserialize_with = "f64_or_nan")]
    #[ts(type = "number | null")]
    pub max_ts: f64,
    /// Every repetition's time, ns.
    pub samples_ns: Vec<u64>,
    /// Every repetition's tokens/s.
    pub samples_ts: Vec<f64>,
    /// STREAM bandwidth used for the ceiling (triad, best), GB/s (10^9 B/s).
    #[serde(default)]
    #[ts(type = "number | null")]
    pub bandwidth_gbps: Option<f64>,
    /// Store id of the STREAM result used.
    pub stream_id: i64,
    /// Measured compute peak used for the prefill ceiling, GFLOP/s (or GOP/s for int8).
    #[serde(default)]
    #[ts(type = "number | null")]
    pub peak_gflops: Option<f64>,
    /// Which peak (`f32 FMA`, `int8 dot`).
    pub peak_kind: String,
    /// Weight bytes streamed per decode step.
    pub streamed_bytes: i64,
    /// KV-cache bytes per token of context (capacity, all layers).
    pub kv_bytes_per_token: i64,
    /// Mean bytes read per step over the test (weights + KV at the step's depth).
    #[serde(default)]
    #[ts(type = "number | null")]
    pub bytes_per_step: Option<f64>,
    /// Roofline ceiling for this test, tokens/s.
    #[serde(default)]
    #[ts(type = "number | null")]
    pub ceiling_ts: Option<f64>,
    /// avg_ts ÷ ceiling_ts.
    #[serde(default)]
    #[ts(type = "number | null")]
    pub achieved: Option<f64>,
    /// Mean FLOPs per token of the test: 2 × active matmul params + attention FLOPs
    /// at the token's context.
    #[serde(default)]
    #[ts(type = "number | null")]
    pub flops_per_token: Option<f64>,
    /// Arithmetic intensity of the test, FLOP per byte read from memory.
    #[serde(default)]
    #[ts(type = "number | null")]
    pub intensity: Option<f64>,
    /// Achieved compute: avg_ts × flops_per_token ÷ 1e9, GFLOP/s.
    #[serde(default)]
    #[ts(type = "number | null")]
    pub achieved_gflops: Option<f64>,
    /// The STREAM kernel behind `bandwidth_gbps`, `ceiling_ts` and `achieved` (`triad`).
    #[serde(default = "triad")]
    pub bandwidth_kernel: String,
    /// STREAM read kernel (best) of the same STREAM run and thread count, GB/s; None
    /// when that run measured no read kernel.
    #[serde(default)]
    pub read_bandwidth_gbps: Option<f64>,
    /// Decode ceiling with the read bandwidth instead of triad, tokens/s (tg rows; None
    /// for pp rows and when no read bandwidth was measured).
    #[serde(default)]
    pub decode_ceiling_ts_read: Option<f64>,
    /// avg_ts ÷ decode_ceiling_ts_read.
    #[serde(default)]
    pub achieved_read: Option<f64>,
    /// Bandwidth implied by the measured rate: avg_ts × bytes per token, GB/s (tg rows;
    /// None for pp rows, where it is not meaningful).
    pub implied_bandwidth_gbps: Option<f64>,
    /// Logical CPUs on the machine.
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
    /// `ac`, `battery`, `unknown`.
    pub power_source: String,
    /// Pages swapped out during the test (None when the OS does not report it).
    pub swap_out_pages: Option<i64>,
    /// Warnings (swapping, battery, outliers, high variance …), each the readable text
    /// of a [`crate::measure::warning::Warning`].
    #[serde(deserialize_with = "warnings_list")]
    pub warnings: Vec<String>,
}

impl BenchRecord {
    /// llama-bench's test label: `pp512`, `tg128`, with ` @ d512` for depth and
    /// ` x4` for parallel sequences ([`test_label`]).
    pub fn test_label(&self) -> String {
        test_label(self.n_prompt, self.n_gen, self.n_seqs, self.n_depth)
    }

    /// `true` for a decode (tg) test.
    pub fn is_decode(&self) -> bool {
        self.n_gen > 0 && self.n_prompt == 0
    }

    /// The field list in column order: `(name, role, value)`. llama-bench's columns come
    /// first, in its order and encoding (see [`LLAMA_BENCH_COLUMNS`]); memwall's own follow.
    pub fn fields(&self) -> Vec<(&'static str, ColumnRole, ColumnValue)> {
        use ColumnRole::*;
        use ColumnValue::*;
        let opt_i = |v: Option<i64>| v.map_or(Null, Int);
        let opt_r = |v: Option<f64>| v.filter(|x| x.is_finite()).map_or(Null, Real);
        let real = |v: f64| if v.is_finite() { Real(v) } else { Null };
        let text = |v: &String| Text(v.clone());
        let l = &self.llama;
        vec![
            // llama-bench's columns (`test::get_fields()`), then its JSON samples.
            ("build_commit", Key, text(&self.build_commit)),
            ("build_number", Provenance, opt_i(self.build_number)),
            ("cpu_info", Key, text(&self.cpu_info)),
            ("gpu_info", Key, text(&self.gpu_info)),
            ("backends", Key, text(&self.backends)),
            ("model_filename", Key, text(&self.model_filename)),
            ("model_type", Key, text(&self.model_type)),
            ("model_size", Key, Int(self.model_size)),
            ("model_n_params", Key, Int(self.model_n_params)),
            ("n_batch", Key, Int(self.n_batch)),
            ("n_ubatch", Key, Int(self.n_ubatch)),
            ("n_threads", Key, Int(self.n_threads)),
            ("cpu_mask", Key, text(&l.cpu_mask)),
            ("cpu_strict", Key, Bool(l.cpu_strict)),
            ("poll", Key, Int(l.poll)),
            ("type_k", Key, text(&self.type_k)),
            ("type_v", Key, text(&self.type_v)),
            ("n_gpu_layers", Key, Int(self.n_gpu_layers)),
            ("n_cpu_moe", Key, Int(l.n_cpu_moe)),
            ("split_mode", Key, text(&l.split_mode)),
            ("main_gpu", Key, Int(l.main_gpu)),
            ("no_kv_offload", Key, Bool(l.no_kv_offload)),
            ("flash_attn", Key, Int(self.flash_attn)),
            ("devices", Key, text(&l.devices)),
            ("tensor_split", Key, text(&l.tensor_split)),
            ("tensor_buft_overrides", Key, text(&l.tensor_buft_overrides)),
            ("load_mode", Key, text(&l.load_mode)),
            ("lazy_mode", Key, text(&l.lazy_mode)),
            ("embeddings", Key, Bool(l.embeddings)),
            ("no_op_offload", Key, Int(l.no_op_offload)),
            ("no_host", Key, Bool(l.no_host)),
            ("repack", Key, Bool(l.repack)),
            ("fit_target", Key, Int(l.fit_target)),
            ("fit_min_ctx", Key, Int(l.fit_min_ctx)),
            ("n_prompt", Key, Int(self.n_prompt)),
            ("n_gen", Key, Int(self.n_gen)),
            ("n_depth", Key, Int(self.n_depth)),
            ("test_time", Provenance, text(&self.test_time)),
            ("avg_ns", Measure, Int(self.avg_ns)),
            ("stddev_ns", Measure, Int(self.stddev_ns)),
            ("avg_ts", Measure, real(self.avg_ts)),
            ("stddev_ts", Measure, real(self.stddev_ts)),
            ("samples_ns", Measure, Ints(self.samples_ns.clone())),
            ("samples_ts", Measure, Reals(self.samples_ts.clone())),
            // memwall's own columns.
            ("id", Provenance, Int(self.id)),
            ("run_id", Provenance, Int(self.run_id)),
            ("engine", Key, text(&self.engine)),
            ("engine_build", Key, text(&self.engine_build)),
            ("system_info", Provenance, text(&self.system_info)),
            ("model_sha256", Key, text(&self.model_sha256)),
            ("model_file_bytes", Key, Int(self.model_file_bytes)),
            ("quant", Key, text(&self.quant)),
            ("synthetic", Key, Bool(self.synthetic)),
            ("n_seqs", Key, Int(self.n_seqs)),
            ("min_ts", Measure, real(self.min_ts)),
            ("max_ts", Measure, real(self.max_ts)),
            ("bandwidth_gbps", Measure, opt_r(self.bandwidth_gbps)),
            ("stream_id", Provenance, Int(self.stream_id)),
            ("peak_gflops", Measure, opt_r(self.peak_gflops)),
            ("peak_kind", Provenance, text(&self.peak_kind)),
            ("streamed_bytes", Measure, Int(self.streamed_bytes)),
            ("kv_bytes_per_token", Measure, Int(self.kv_bytes_per_token)),
            ("bytes_per_step", Measure, opt_r(self.bytes_per_step)),
            ("ceiling_ts", Measure, opt_r(self.ceiling_ts)),
            ("achieved", Measure, opt_r(self.achieved)),
            (
                "implied_bandwidth_gbps",
                Measure,
                opt_r(self.implied_bandwidth_gbps),
            ),
            ("flops_per_token", Measure, opt_r(self.flops_per_token)),
            ("intensity", Measure, opt_r(self.intensity)),
            ("achieved_gflops", Measure, opt_r(self.achieved_gflops)),
            (
                "bandwidth_kernel",
                Provenance,
                Text(self.bandwidth_kernel.clone()),
            ),
            (
                "read_bandwidth_gbps",
                Measure,
                opt_r(self.read_bandwidth_gbps),
            ),
            (
                "decode_ceiling_ts_read",
                Measure,
                opt_r(self.decode_ceiling_ts_read),
            ),
            ("achieved_read", Measure, opt_r(self.achieved_read)),
            ("cores_logical", Provenance, Int(self.cores_logical)),
            ("ram_bytes", Provenance, Int(self.ram_bytes)),
            ("os", Provenance, text(&self.os)),
            ("kernel", Provenance, text(&self.kernel)),
            ("hostname", Provenance, text(&self.hostname)),
            ("thermal_before", Provenance, text(&self.thermal_before)),
            ("thermal_after", Provenance, text(&self.thermal_after)),
            ("power_source", Provenance, text(&self.power_source)),
            ("swap_out_pages", Measure, opt_i(self.swap_out_pages)),
            ("warnings", Measure, Texts(self.warnings.clone())),
        ]
    }

    /// Column names in order.
    pub fn column_names() -> Vec<&'static str> {
        Self::example()
            .fields()
            .into_iter()
            .map(|(n, _, _)| n)
            .collect()
    }

    /// A fully populated record with made-up values, for snapshot tests and column
    /// discovery. Never stored or shown as a measurement.
    pub fn example() -> BenchRecord {
        BenchRecord {
            id: 1,
            run_id: 1,
            build_commit: "abc123".into(),
            build_number: Some(100),
            engine: "llama.cpp".into(),
            engine_build: "llama-cpp-sys-2 0.0.0".into(),
            backends: "CPU".into(),
            system_info: "CPU : AVX2 = 1 |".into(),
            cpu_info: "Example CPU".into(),
            gpu_info: String::new(),
            model_filename: "m.gguf".into(),
            model_type: "qwen2 494M Q4_K_M".into(),
            model_size: 1000,
            model_n_params: 2000,
            model_sha256: "00".into(),
            model_file_bytes: 1100,
            quant: "Q4_K_M".into(),
            synthetic: false,
            n_batch: 2048,
            n_ubatch: 512,
            n_threads: 2,
            n_gpu_layers: 0,
            llama: LlamaDefaults::default(),
            type_k: "f16".into(),
            type_v: "f16".into(),
            flash_attn: -1,
            n_prompt: 0,
            n_gen: 128,
            n_depth: 0,
            n_seqs: 1,
            test_time: "2026-01-01T00:00:00Z".into(),
            avg_ns: 2_000_000_000,
            stddev_ns: 10_000_000,
            avg_ts: 64.0,
            stddev_ts: 0.5,
            min_ts: 63.5,
            max_ts: 64.5,
            samples_ns: vec![1_990_000_000, 2_010_000_000],
            samples_ts: vec![64.32, 63.68],
            bandwidth_gbps: Some(40.0),
            stream_id: 1,
            peak_gflops: Some(500.0),
            peak_kind: "int8 dot".into(),
            streamed_bytes: 400_000_000,
            kv_bytes_per_token: 12288,
            bytes_per_step: Some(400_800_000.0),
            ceiling_ts: Some(99.8),
            achieved: Some(0.641),
            implied_bandwidth_gbps: Some(25.65),
            flops_per_token: Some(1.0e9),
            intensity: Some(2.5),
            achieved_gflops: Some(64.0),
            bandwidth_kernel: "triad".into(),
            read_bandwidth_gbps: Some(48.0),
            decode_ceiling_ts_read: Some(119.76),
            achieved_read: Some(0.534),
            cores_logical: 2,
            ram_bytes: 1 << 34,
            os: "Linux".into(),
            kernel: "6.1".into(),
            hostname: "host".into(),
            thermal_before: "unknown".into(),
            thermal_after: "unknown".into(),
            power_source: "ac".into(),
            swap_out_pages: Some(0),
            warnings: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_struct_field_is_a_column_and_vice_versa() {
        let json = serde_json::to_value(BenchRecord::example()).unwrap();
        let mut from_serde: Vec<String> = json.as_object().unwrap().keys().cloned().collect();
        let mut from_fields: Vec<String> = BenchRecord::column_names()
            .into_iter()
            .map(String::from)
            .collect();
        from_serde.sort();
        from_fields.sort();
        assert_eq!(from_serde, from_fields);
    }

    #[test]
    fn labels_follow_llama_bench() {
        let mut r = BenchRecord::example();
        assert_eq!(r.test_label(), "tg128");
        r.n_depth = 512;
        assert_eq!(r.test_label(), "tg128 @ d512");
        r.n_prompt = 512;
        r.n_gen = 0;
        r.n_depth = 0;
        assert_eq!(r.test_label(), "pp512");
        r.n_prompt = 0;
        r.n_gen = 32;
        r.n_seqs = 4;
        assert_eq!(r.test_label(), "tg32 x4");
        // Sequences before depth, as the app shows it (the check the UI's own copy had).
        assert_eq!(test_label(0, 128, 4, 512), "tg128 x4 @ d512");
        assert_eq!(test_label(512, 0, 1, 0), "pp512");
    }

    #[test]
    fn read_bandwidth_columns_are_exported() {
        use crate::present::export::Format;
        let cols = BenchRecord::column_names();
        for c in [
            "bandwidth_kernel",
            "read_bandwidth_gbps",
            "decode_ceiling_ts_read",
            "achieved_read",
        ] {
            assert!(cols.contains(&c), "missing {c}");
        }
        let old = BenchRecord {
            read_bandwidth_gbps: None,
            decode_ceiling_ts_read: None,
            achieved_read: None,
            ..BenchRecord::example()
        };
        let csv = Format::Csv
            .exporter()
            .render(&[BenchRecord::example(), old]);
        let mut rdr = csv::Reader::from_reader(csv.as_bytes());
        let h = rdr.headers().unwrap().clone();
        let recs: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
        let idx = |n: &str| h.iter().position(|x| x == n).unwrap();
        assert_eq!(&recs[0][idx("bandwidth_kernel")], "triad");
        assert_eq!(&recs[0][idx("read_bandwidth_gbps")], "48");
        assert_eq!(&recs[0][idx("decode_ceiling_ts_read")], "119.76");
        assert_eq!(
            &recs[1][idx("decode_ceiling_ts_read")],
            "",
            "not measured → empty"
        );
        let json: serde_json::Value =
            serde_json::from_str(&Format::Json.exporter().render(&[BenchRecord::example()]))
                .unwrap();
        assert_eq!(json[0]["decode_ceiling_ts_read"], 119.76);
        assert_eq!(json[0]["bandwidth_kernel"], "triad");
        // Rows written before these columns existed read back as triad with no read ceiling.
        let mut v = serde_json::to_value(BenchRecord::example()).unwrap();
        for k in [
            "bandwidth_kernel",
            "read_bandwidth_gbps",
            "decode_ceiling_ts_read",
            "achieved_read",
        ] {
            v.as_object_mut().unwrap().remove(k);
        }
        let back: BenchRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back.bandwidth_kernel, "triad");
        assert_eq!(back.decode_ceiling_ts_read, None);
    }

    #[test]
    fn llama_bench_columns_come_first_with_its_types() {
        let f = BenchRecord::example().fields();
        let names: Vec<&str> = f.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(names[..LLAMA_BENCH_COLUMNS.len()], LLAMA_BENCH_COLUMNS);
        // llama-bench's `test::get_field_type`, transcribed: these are INT, these BOOL,
        // these FLOAT, every other field STRING; the samples are number arrays.
        const INT: [&str; 19] = [
            "build_number",
            "n_batch",
            "n_ubatch",
            "n_threads",
            "poll",
            "model_size",
            "model_n_params",
            "n_gpu_layers",
            "main_gpu",
            "n_prompt",
            "n_gen",
            "n_depth",
            "avg_ns",
            "stddev_ns",
            "no_op_offload",
            "n_cpu_moe",
            "fit_target",
            "fit_min_ctx",
            "flash_attn",
        ];
        const BOOL: [&str; 5] = [
            "no_kv_offload",
            "cpu_strict",
            "embeddings",
            "no_host",
            "repack",
        ];
        const FLOAT: [&str; 2] = ["avg_ts", "stddev_ts"];
        for (name, _, cell) in &f[..LLAMA_BENCH_COLUMNS.len() - 2] {
            let want = if INT.contains(name) {
                "INT"
            } else if BOOL.contains(name) {
                "BOOL"
            } else if FLOAT.contains(name) {
                "FLOAT"
            } else {
                "STRING"
            };
            let got = match cell {
                ColumnValue::Int(_) => "INT",
                ColumnValue::Bool(_) => "BOOL",
                ColumnValue::Real(_) => "FLOAT",
                ColumnValue::Text(_) => "STRING",
                other => panic!("{name}: {other:?}"),
            };
            assert_eq!(got, want, "column {name}");
        }
        assert!(
            matches!(f[42].2, ColumnValue::Ints(_)) && matches!(f[43].2, ColumnValue::Reals(_))
        );
    }

    #[test]
    fn warnings_read_from_a_list_or_from_the_joined_text_of_older_exports() {
        let mut v = serde_json::to_value(BenchRecord::example()).unwrap();
        assert_eq!(v["warnings"], serde_json::json!([]));
        v["warnings"] = serde_json::json!(["a: x", "b: y"]);
        let r: BenchRecord = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(r.warnings, ["a: x", "b: y"]);
        v["warnings"] = serde_json::json!("a: x; b: y");
        let r: BenchRecord = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(r.warnings, ["a: x", "b: y"]);
        v["warnings"] = serde_json::json!("");
        let r: BenchRecord = serde_json::from_value(v.clone()).unwrap();
        assert!(r.warnings.is_empty());
        v["warnings"] = serde_json::json!(3);
        assert!(serde_json::from_value::<BenchRecord>(v).is_err());
        assert_eq!(
            ColumnValue::Texts(vec!["a: x".into(), "b: y".into()]).to_text(),
            "a: x; b: y"
        );
    }

    #[test]
    fn flash_attn_uses_llama_cpp_values() {
        // llama.h: LLAMA_FLASH_ATTN_TYPE_AUTO = -1, _DISABLED = 0, _ENABLED = 1.
        assert_eq!(flash_attn_value(None), -1);
        assert_eq!(flash_attn_value(Some(false)), 0);
        assert_eq!(flash_attn_value(Some(true)), 1);
    }
}
