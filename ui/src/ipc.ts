// The only bridge to Rust: typed wrappers over the app's own commands.
import { Channel, invoke } from "@tauri-apps/api/core";
import { listen } from "@tauri-apps/api/event";
import type * as T from "./types";
import { STORE_CHANGED } from "./types";

export const api = {
  machine: () => invoke<T.MachineView>("machine"),
  live: () => invoke<T.TrayStatus>("live"),
  models: () => invoke<T.ModelItem[]>("models"),
  measureBandwidth: () => invoke<unknown>("measure_bandwidth"),
  fetchModel: (name: string, onProgress: (p: T.FetchProgress) => void) => {
    const ch = new Channel<T.FetchProgress>();
    ch.onmessage = onProgress;
    return invoke<string>("fetch_model", { name, onProgress: ch });
  },
  runBench: (request: T.BenchRequest, onProgress: (p: T.Progress) => void) => {
    const ch = new Channel<T.Progress>();
    ch.onmessage = onProgress;
    return invoke<T.BenchOutcome>("run_bench", { request, onProgress: ch });
  },
  specGate: (request: T.SpecGateRequest, onProgress: (p: T.SpecProgress) => void) => {
    const ch = new Channel<T.SpecProgress>();
    ch.onmessage = onProgress;
    return invoke<T.GateOutcome>("spec_gate", { request, onProgress: ch });
  },
  specBench: (request: T.SpecBenchRequest, onProgress: (p: T.SpecProgress) => void) => {
    const ch = new Channel<T.SpecProgress>();
    ch.onmessage = onProgress;
    return invoke<T.SpecBenchOutcome>("spec_bench", { request, onProgress: ch });
  },
  cancel: (kind: T.JobKind) => invoke<boolean>("cancel_job", { kind }),
  chat: (request: T.ChatRequest, onEvent: (e: T.ChatEvent) => void) => {
    const ch = new Channel<T.ChatEvent>();
    ch.onmessage = onEvent;
    return invoke<T.ChatStats>("chat_start", { request, onEvent: ch });
  },
  chatStop: () => invoke<boolean>("chat_stop"),
  chatUrl: (request: T.UrlChatRequest, onEvent: (e: T.UrlChatEvent) => void) => {
    const ch = new Channel<T.UrlChatEvent>();
    ch.onmessage = onEvent;
    return invoke<T.UrlChatStats>("chat_url_start", { request, onEvent: ch });
  },
  serveStart: (request: T.ServeRequest) => invoke<T.ServeLive>("serve_start", { request }),
  serveState: () => invoke<T.ServeLive | null>("serve_state"),
  serveStop: () => invoke<T.ServeSummary | null>("serve_stop"),
  loadtest: (request: T.LoadtestRequest, onProgress: (p: T.LoadProgress) => void) => {
    const ch = new Channel<T.LoadProgress>();
    ch.onmessage = onProgress;
    return invoke<T.LoadView>("loadtest_run", { request, onProgress: ch });
  },
  loadtestView: (runId: number | null) => invoke<T.LoadView | null>("loadtest_view", { runId }),
  runs: (filter: T.RunFilter = { model: null, engine: null, since: null }) => invoke<T.RunSummary[]>("runs", { filter }),
  rows: (runId: number | null) => invoke<T.BenchRow[]>("run_rows", { runId }),
  compare: (a: number, b: number) => invoke<T.CompareRow[]>("compare_runs", { a, b }),
  deleteRun: (id: number) => invoke<void>("delete_run", { id }),
  roofline: (runId: number | null) => invoke<T.RooflineView>("roofline_view", { runId }),
  frontier: () => invoke<T.FrontierView>("frontier_view"),
  chartSvg: (chart: T.AppChart, runId: number | null) => invoke<string>("chart_svg", { chart, runId }),
  exportChart: (chart: T.AppChart, runId: number | null, name: string) =>
    invoke<T.Exported>("export_chart", { chart, runId, name }),
  exportRows: (runId: number | null, name: string) => invoke<T.Exported>("export_rows", { runId, name }),
  exportReport: () => invoke<T.ReportExport>("export_report"),
  onStoreChanged: (f: () => void) => listen(STORE_CHANGED, f),
};

export function errText(e: unknown): string {
  return typeof e === "string" ? e : e instanceof Error ? e.message : JSON.stringify(e);
}
