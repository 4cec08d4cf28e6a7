// Front-end end-to-end test without the Rust side: Debian's chromium (through
// playwright-core) loads the built ui/dist with Tauri's IPC replaced by canned
// replies shaped like memwall-core's records. It checks page wiring, live progress
// rows, streamed chat readouts (local engine and a URL), the speculative gate's
// outcome, the Serve page (start → live state → load test drawn → stop), the
// double-start guard and the delete confirmation.
// The real-app test is app-webdriver.mjs; this one needs no display stack or model.
// Skips loudly when chromium or playwright-core is absent (MEMWALL_REQUIRE_E2E=1 fails).
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
const dist = path.join(root, "ui/dist");
const OUT = process.env.E2E_ARTIFACTS ?? path.join(root, "target/e2e");
fs.mkdirSync(OUT, { recursive: true });
const skip = (why) => {
  console.error(`!!!!!!!! SKIPPED mocked UI test: ${why} !!!!!!!!`);
  process.exit(process.env.MEMWALL_REQUIRE_E2E === "1" ? 1 : 0);
};
let chromium;
try { ({ chromium } = createRequire(path.join(root, "ui/package.json"))("playwright-core")); } catch { skip("playwright-core not installed (npm --prefix ui ci)"); }
const exe = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].find((p) => fs.existsSync(p));
if (!exe) skip("no chromium");
if (!fs.existsSync(path.join(dist, "index.html"))) skip("ui/dist not built (npm --prefix ui run build)");

const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css" };
const server = http.createServer((req, res) => {
  const p = path.join(dist, decodeURIComponent(new URL(req.url, "http://x").pathname));
  const f = p.endsWith("/") ? path.join(p, "index.html") : p;
  if (!f.startsWith(dist) || !fs.existsSync(f)) { res.writeHead(404); res.end(); return; }
  res.writeHead(200, { "content-type": types[path.extname(f)] ?? "application/octet-stream" });
  fs.createReadStream(f).pipe(res);
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const url = `http://127.0.0.1:${server.address().port}/index.html`;

// Runs in the page before the app's script: a fake __TAURI_INTERNALS__.
function installMock() {
  const cbs = new Map();
  let next = 1;
  const calls = (window.__calls = []);
  // A bench row as the run_rows command sends it: core's test label beside the record.
  const row = (id, tg, depth, ts) => ({ test: tg ? "tg16" : "pp64", id, run_id: 2, build_commit: "abc1234", engine: "llama.cpp", model_filename: "/m/SmolLM2-135M-Instruct-Q4_1.gguf",
    model_type: "llama 135M Q4_1", quant: "Q4_1", n_threads: 2, n_prompt: tg ? 0 : 64, n_gen: tg ? 16 : 0, n_depth: depth, n_seqs: 1,
    test_time: "2026-11-30T23:00:00Z", avg_ts: ts, stddev_ts: 1.5, samples_ts: [ts], bandwidth_gbps: 44.0, ceiling_ts: tg ? 400.0 : 2000.0,
    achieved: tg ? ts / 400 : ts / 2000, power_source: "ac", thermal_before: "unknown", thermal_after: "unknown", swap_out_pages: 0, warnings: [], hostname: "h" });
  const stats = (n) => ({ prompt_tokens: 20, n_gen: n, ttft_ms: 42.4, prefill_tps: 470.0, decode_tps: n > 1 ? 150.0 : null, ceiling_tps: 400.0, pct_of_ceiling: n > 1 ? 37.5 : null });
  const send = (ch, i, message) => cbs.get(ch.id)?.({ index: i, message });
  const replies = {
    machine: () => ({ host: { cpu_model: "Mock CPU", cores_physical: 2, cores_logical: 2, ram: 24e9, os: "Debian 12", kernel: "6.1", arch: "x86_64", llc: 32e6, gpus: [], hostname: "h" },
      live: { power: { kind: "ac" }, thermal: { state: "unknown", max_celsius: null }, mem: { total: 24e9, available: 20e9, swap_total: 0, swap_used: 0 }, swap_out_pages: null },
      tray: { bandwidth: "Bandwidth: 44.0 GB/s (triad, 2 threads, 1 min ago)", thermal: "Thermal: unknown", power: "Power: AC", memory: "Memory: 3.7 / 22.4 GiB used · swap 0.0 / 0.0 GiB" },
      streams: [{ id: 1, run_id: 1, measured_at: "2026-11-30T22:59:00Z", kernel: "triad", threads: 2, array_bytes: 8e8, best_gbps: 44.0, avg_gbps: 43.0, hostname: "h" }],
      peaks: [], spec_gbps: null, spec_device: null, spec_source: null,
      counters: [{ name: "cpu_package_energy", source: "/sys/class/powercap", available: false, reason: "RAPL not readable here: /sys/class/powercap absent" },
        { name: "memory", source: "/proc/meminfo", available: true, reason: null }],
      live_series: [], live_chart_svg: "<svg id=\"mock-live\"></svg>" }),
    live: () => ({ bandwidth: "Bandwidth: 44.0 GB/s (triad, 2 threads, 1 min ago)", thermal: "Thermal: unknown", power: "Power: AC", memory: "Memory: 3.7 / 22.4 GiB used" }),
    models: () => [{ name: "smollm2-135m", title: "SmolLM2 135M", bytes: 1e8, present: true, default: false }, { name: "qwen-7b", title: "Qwen 7B", bytes: 5e9, present: false, default: true }],
    runs: () => [{ id: 2, kind: "bench", started_at: "2026-11-30T23:00:00Z", build_commit: "abc", command: "app: bench", hostname: "h", cpu_info: "Mock CPU", n_bench_rows: 2, models: "SmolLM2-135M-Instruct-Q4_1.gguf" },
      { id: 1, kind: "stream", started_at: "2026-11-30T22:59:00Z", build_commit: "abc", command: "app: measure", hostname: "h", cpu_info: "Mock CPU", n_bench_rows: 0, models: "" }],
    run_rows: () => [row(10, false, 0, 480.0), row(11, true, 0, 150.0)],
    compare_runs: () => [{ model: "llama 135M Q4_1", test: "tg16", n_threads: 2, a: [150, 1.5], b: null, change_pct: null }],
    delete_run: () => null,
    roofline_view: () => ({ roofs: [
        { label: "h · CPU", bandwidth_gbps: 44, peak_gflops: 400, peak_kind: "int8 dot", ridge: 9.09, roof: [[0.1, 4.4], [9.09, 400], [100, 400]] },
        { label: "vm · GPU NVIDIA H200", bandwidth_gbps: 4400, peak_gflops: null, peak_kind: "", ridge: null, roof: [[0.1, 440], [100, 440000]] }],
      points: [{ row_id: 11, run_id: 2, roof: 0, intensity: 1.2, achieved_gflops: 40, attainable_gflops: 52.8, phase: "tg", series: "llama 135M Q4_1", provenance: "h · CPU · llama 135M Q4_1 · tg16 · run 2 row 11" },
        { row_id: 10, run_id: 2, roof: 0, intensity: 60, achieved_gflops: 130, attainable_gflops: 400, phase: "pp", series: "llama 135M Q4_1", provenance: "h · CPU · llama 135M Q4_1 · pp64 · run 2 row 10" },
        { row_id: 42, run_id: 9, roof: 1, intensity: 1.0, achieved_gflops: 2800, attainable_gflops: 4400, phase: "tg", series: "qwen2 7.6B F16", provenance: "vm · GPU NVIDIA H200 · qwen2 7.6B F16 · tg128 · run 9 row 42" }],
      decode_vs_depth: [],
      floors: [{ host: "vm (Xeon, 16 cores, NVIDIA H200)", quant: "F16", placement: "GPU NVIDIA H200", t0_ms: 1.229, t0_half95_ms: 0.345, bw_eff_gbps: 3574, bw_eff_95_gbps: [3300, 3900], worst_loo_pct: 28.7,
        points: [[0.989, 1.314, 1.505, 1.691, 28.7, 17.1, 71], [3.09, 2.354, 2.093, 1.915, -18.7, 29.8, 72], [14.146, 5.09, 5.187, 5.221, 2.6, 63.2, 73], [27.997, 9.089, 9.062, 8.924, -1.8, 70.0, 74]]
          .map(([gb, m, f, l, e, a, id]) => ({ model_type: `qwen2 ${gb} GB F16`, gb_per_token: gb, measured_ms: m, fit_ms: f, loo_ms: l, loo_error_pct: e, achieved_pct: a, row_ids: [id] })) }] }),
    frontier_view: () => ({ measures: [], rows: [{ run_id: 4, host: "lab-1", model: "SmolLM2-135M-Instruct-Q4_1.gguf", quant: "Q4_1", decode_tps: 150, decode_ceiling_tps: 400, prefill_tps: null,
      decode_j_per_token: null, decode_tokens_per_wh: null, decode_energy_note: "row #11: cpu_package_energy: RAPL not readable here", quality: [] }] }),
    chart_svg: () => `<svg xmlns="http://www.w3.org/2000/svg" width="1000" height="600"><text x="20" y="40">mock decode vs depth</text></svg>`,
    export_chart: (a) => ({ path: `/exports/${a.name}`, bytes: 1234 }),
    export_rows: (a) => ({ path: `/exports/${a.name}`, bytes: 99 }),
    cancel_job: () => true,
    chat_stop: () => { window.__stop = true; return true; },
    "plugin:event|listen": () => 1,
    // The Serve page: no server, then loading, then ready with the server's counters.
    serve_state: () => {
      const t = window.__serve;
      if (!t) return null;
      t.polls++;
      const ready = t.polls > 1;
      return { url: "http://127.0.0.1:8080", model_file: "/m/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", started_at: "2026-12-02T03:00:00Z",
        phase: ready ? "ready" : "loading", model_id: ready ? "qwen2.5-coder-0.5b-instruct-q4_k_m" : null, template: ready ? "jinja" : null,
        n_slots: t.request.parallel, n_ctx_slot: ready ? 1024 : null, queue_capacity: t.request.queue,
        metrics: { prompt_tokens_total: 640, prompt_seconds_total: 2.0, tokens_predicted_total: 320, tokens_predicted_seconds_total: 6.4,
          n_decode_total: 200, n_busy_slots_per_decode: 1.6, prompt_tokens_seconds: ready ? 320.0 : null, predicted_tokens_seconds: ready ? 50.0 : null,
          requests_processing: ready ? 2 : 0, requests_deferred: ready ? 3 : 0, requests_cancelled_total: 1, requests_served_total: ready ? 10 : 0 },
        warnings: [] };
    },
    serve_start: (a) => { window.__serve = { request: a.request, polls: 0 }; return replies.serve_state(); },
    serve_stop: () => { window.__serve = null; return { run_id: 13, tokens_predicted: 320, energy: null }; },
    loadtest_view: () => window.__loadView ?? null,
    loadtest_run: async (a) => {
      window.__loadRequest = a.request;
      const ch = a.onProgress;
      send(ch, 0, { event: "server", model_ids: ["qwen2.5-coder-0.5b-instruct-q4_k_m"] });
      let k = 1;
      for (const [i, c] of a.request.concurrency.entries()) {
        send(ch, k++, { event: "level", label: `concurrency ${c}`, index: i, total: a.request.concurrency.length, n_requests: a.request.num_requests });
        await new Promise((r) => setTimeout(r, 100));
        send(ch, k++, { event: "request", done: a.request.num_requests, total: a.request.num_requests });
      }
      const d = (m) => ({ mean_ms: m, median_ms: m, p90_ms: m * 1.2, p99_ms: m * 1.5 });
      const lrow = (c) => ({ label: `concurrency ${c}`, concurrency: c, rate_rps: null, n_sent: 8, n_completed: 8, n_rejected: 0, n_failed: 0,
        output_throughput_tps: 40 * c, request_throughput_rps: 1.25 * c, token_source: "usage", ttft: d(100 * c), tpot: d(20 + c), itl: d(20 + c), e2el: d(700),
        mean_cached_tokens: null, bandwidth: { bytes_per_token: 4.0e8, implied_gbps: 16 * c, stream_gbps: 44.0, pct_of_stream: (1600 * c) / 44, note: null }, first_error: null });
      window.__loadView = { run_id: 12, url: a.request.url, server_model: "qwen2.5-coder-0.5b-instruct-q4_k_m", server_header: null, model_file: "/m/q.gguf",
        rows: a.request.concurrency.map(lrow),
        charts: [{ stem: "percentiles-vs-concurrency", title: "TTFT and TPOT percentiles vs concurrency", svg: `<svg xmlns="http://www.w3.org/2000/svg" id="mock-pct" width="900" height="480"><text x="20" y="40">mock percentiles</text></svg>` },
          { stem: "bandwidth-vs-concurrency", title: "Implied bandwidth vs measured STREAM", svg: `<svg xmlns="http://www.w3.org/2000/svg" id="mock-bw" width="900" height="480"><text x="20" y="40">mock bandwidth</text></svg>` }],
        report: "| level |" };
      return window.__loadView;
    },
    chat_url_start: async (a) => {
      window.__chatUrlRequest = a.request;
      const ch = a.onEvent;
      window.__stop = false;
      send(ch, 0, { event: "started", url: a.request.url, model: "qwen2.5-coder-0.5b-instruct-q4_k_m" });
      const base = { model: "qwen2.5-coder-0.5b-instruct-q4_k_m", server_model: "qwen2.5-coder-0.5b-instruct-q4_k_m", completion_tokens: null, prompt_tokens: null,
        token_source: "chunks", e2el_ms: null, finish_reason: null, cancelled: false, timings: null };
      const words = ["Le ", "café ", "est ", "ouvert."];
      let st = null;
      for (let i = 0; i < words.length; i++) {
        await new Promise((r) => setTimeout(r, 80));
        st = { ...base, n_chunks: i + 1, ttft_ms: 61.7, last_chunk_ms: 61.7 + 25 * i, decode_tps: i === 0 ? null : i / (25 * i / 1000) };
        send(ch, i + 1, { event: "token", text: words[i], stats: st });
      }
      const fin = { ...st, completion_tokens: 5, prompt_tokens: 30, token_source: "usage", decode_tps: 4 / 0.075, e2el_ms: 140.2, finish_reason: "stop",
        timings: { cache_n: 0, prompt_n: 30, prompt_ms: 50.1, prompt_per_second: 598.8, predicted_n: 5, predicted_ms: 74.0, predicted_per_second: 54.1 } };
      send(ch, words.length + 1, { event: "done", stats: fin });
      return fin;
    },
    run_bench: async (a) => {
      window.__benchRequest = a.request;
      const ch = a.onProgress;
      send(ch, 0, { event: "test_started", index: 0, total: 2, label: "pp64" });
      await new Promise((r) => setTimeout(r, 300));
      // test_done carries the bare record (no label): the page labels it from test_started.
      const bare = ({ test, ...record }) => record;
      send(ch, 1, { event: "test_done", record: bare(row(10, false, 0, 480.0)) });
      send(ch, 2, { event: "test_started", index: 1, total: 2, label: "tg16" });
      await new Promise((r) => setTimeout(r, 300));
      send(ch, 3, { event: "test_done", record: bare(row(11, true, 0, 150.0)) });
      return { run_id: 2, records: [row(10, false, 0, 480.0), row(11, true, 0, 150.0)], results_dir: "/exports/results/run-0002", files: [] };
    },
    spec_gate: async (a) => {
      const ch = a.onProgress;
      window.__specRequest = a.request;
      send(ch, 0, { event: "loading", target: "/m/target.gguf", draft: "/m/draft.gguf", n_threads: 2, n_ctx: 4096 });
      send(ch, 1, { event: "gate_prompt", index: 0, total: 2, id: "json-01" });
      await new Promise((r) => setTimeout(r, 300));
      send(ch, 2, { event: "gate_prompt", index: 1, total: 2, id: "code-01" });
      send(ch, 3, { event: "gate_done", total: 2 });
      const stats = {};
      return { run_id: 7, target_file: "target.gguf", draft_file: "draft.gguf", prompt_set: "builtin:prompts/spec.jsonl", prompt_set_sha256: "ab".repeat(32),
        n_prompts_set: 54, partial: true, max_new: 8, prompts: [{ id: "json-01", category: "json", format: "raw", n_prompt_tokens: 40 }, { id: "code-01", category: "code", format: "raw", n_prompt_tokens: 30 }],
        greedy: [{ drafter_key: "draft:abc", drafter: "draft-model", k: 4, n_prompts: 2, n_identical: 2, first_diff: null, stats },
          { drafter_key: "ngram:1-3", drafter: "ngram", k: 4, n_prompts: 2, n_identical: 1, first_diff: { prompt_id: "code-01", position: 3, want: 11, got: 12, target_margin: 0.01 }, stats }],
        sampling: [], sampling_prefix: "Here is a list of fruits: apple, banana,", sampling_top_text: [], guard: {}, failed: ["ngram k=4"] };
    },
    chat_start: async (a) => {
      const ch = a.onEvent;
      window.__stop = false;
      send(ch, 0, { event: "started", prompt_tokens: 20 });
      const words = ["Memory ", "bandwidth ", "is ", "the ", "rate ", "…"];
      let i = 0;
      for (; i < words.length && !window.__stop; i++) {
        await new Promise((r) => setTimeout(r, 120));
        send(ch, i + 1, { event: "token", text: words[i], stats: stats(i + 1) });
      }
      send(ch, i + 1, { event: "done", reason: window.__stop ? "cancelled" : "end_of_generation", stats: stats(i) });
      return stats(i);
    },
  };
  window.__TAURI_INTERNALS__ = {
    transformCallback: (cb) => { const id = next++; cbs.set(id, cb); return id; },
    unregisterCallback: (id) => cbs.delete(id),
    invoke: async (cmd, args) => {
      calls.push(cmd);
      const f = replies[cmd];
      if (!f) throw `mock: no reply for ${cmd}`;
      return f(args ?? {});
    },
  };
  window.__TAURI_EVENT_PLUGIN_INTERNALS__ = { unregisterListener: () => {} };
}

const browser = await chromium.launch({ executablePath: exe, headless: true, args: ["--no-sandbox"] });
let ok = false;
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.addInitScript(installMock);
  const check = (c, what) => { if (!c) throw new Error(what); console.log("[ui-mocked] ok:", what); };
  await page.goto(url + "#machine");
  await page.waitForSelector("#page-machine #stream-table");
  check((await page.textContent("#bw")).includes("44.0 GB/s"), "machine shows the stored triad");
  check((await page.textContent("#status")).includes("Bandwidth: 44.0 GB/s"), "status lines from core");
  check(!!(await page.$("#live-chart #mock-live")), "machine page embeds core's live chart");
  check((await page.textContent("#counters")).includes("RAPL not readable here"), "machine page lists unavailable counters with reasons");

  await page.goto(url + "#benchmarks");
  await page.waitForSelector("#page-benchmarks #run");
  check(await page.$eval("#models", (s) => s.value) === "smollm2-135m", "smallest fetched model preselected");
  await page.click("#run");
  await page.click("#run", { force: true }).catch(() => {});
  await page.waitForFunction(() => document.querySelector("#plabel").textContent === "done");
  const benchCalls = await page.evaluate(() => window.__calls.filter((c) => c === "run_bench").length);
  check(benchCalls === 1, "a double click starts one run");
  check((await page.$$("#results tbody tr")).length === 2, "rows shown");
  check((await page.textContent("#results")).includes("150.00 ± 1.50"), "mean ± std");
  check((await page.$$eval("#results tbody tr td:nth-child(2)", (tds) => tds.map((t) => t.textContent))).join(",") === "pp64,tg16", "test labels as core sent them");
  const req = await page.evaluate(() => window.__benchRequest);
  check(JSON.stringify(req.n_seqs) === "[1]" && !("batch" in req), "the request names parallel sequences n_seqs");
  check(JSON.stringify(req.engines) === '["llama"]', "the request names its engines, llama.cpp by default");
  check((await page.$$eval("#results tbody tr td:nth-child(3)", (tds) => tds.map((t) => t.textContent))).join(",") === "llama.cpp,llama.cpp", "rows name their engine");
  await page.click('#page-benchmarks .exports button[data-x="png"]');
  await page.waitForSelector("#page-benchmarks .exported");
  check((await page.textContent("#page-benchmarks .exported")).endsWith(".png"), "export reports the file");
  await page.screenshot({ path: path.join(OUT, "mocked-benchmarks.png") });

  await page.goto(url + "#roofline");
  await page.waitForSelector("#page-roofline svg.plot");
  await page.hover("#page-roofline .pt >> nth=0");
  check((await page.textContent("#prov")).includes("run 2 row 11"), "hover shows provenance");
  check((await page.$$("#page-roofline path.roof")).length === 2, "one roof per host and placement (CPU and H200)");
  const sums = await page.$$eval("#page-roofline .roof-sum", (xs) => xs.map((x) => x.textContent));
  check(sums.length === 2 && sums[1].startsWith("vm · GPU NVIDIA H200: STREAM 4400.0 GB/s"), "the H200's roof is summarised beside the CPU's: " + JSON.stringify(sums));
  check(sums[1]?.includes("1 points"), "the H200 roof counts its own points");
  const floor = await page.textContent("#floors");
  check(floor.includes("t0 = 1.229 ms ± 0.345 (95 %) · BW_eff = 3574 GB/s") && floor.includes("#74"), "the per-token floor prints its fit and rows");
  check((await page.$$("#floors svg.floor circle")).length === 4, "one dot per model under the floor's line");
  await page.screenshot({ path: path.join(OUT, "mocked-roofline.png"), fullPage: true });

  await page.goto(url + "#frontier");
  await page.waitForSelector("#frontier");
  check((await page.textContent("#frontier")).includes("—"), "frontier prints — for unmeasured");
  check((await page.textContent("#frontier tbody tr")).startsWith("4lab-1"), "frontier row names its run id and host");
  check((await page.textContent(".energy-why")).includes("run 4: cpu_package_energy: RAPL not readable here"), "frontier says why J/token is a dash");

  await page.goto(url + "#speculative");
  await page.waitForSelector("#page-speculative #sgate");
  await page.fill("#sk", "4");
  await page.fill("#sn", "8");
  await page.fill("#slimit", "2");
  await page.fill("#strials", "0");
  await page.click("#sgate");
  await page.click("#sgate", { force: true }).catch(() => {});
  await page.waitForFunction(() => document.querySelector("#slabel").textContent === "done");
  check(await page.evaluate(() => window.__calls.filter((c) => c === "spec_gate").length) === 1, "a double click starts one gate");
  const specReq = await page.evaluate(() => window.__specRequest);
  check(specReq.target === "smollm2-135m" && specReq.draft === "smollm2-135m", "only fetched catalogue models are offered (names, not paths)");
  check(JSON.stringify(specReq.options) === JSON.stringify({ ks: [4], drafters: ["draft-model", "ngram"], max_new: 8, limit: 2, sampling_trials: 0 }),
    `typed fields reach core, empty ones are left to core's defaults: ${JSON.stringify(specReq.options)}`);
  check((await page.$$("#gate-rows tbody tr")).length === 2, "one gate row per drafter × k");
  check((await page.textContent("#gate-rows")).includes("prompt code-01, generated position 3"), "the first difference is shown");
  const verdict = await page.textContent("#verdict");
  check(verdict.includes("failed for ngram k=4") && verdict.includes("partial (2 of 54 prompts)") && verdict.includes("stored as run 7"), `gate verdict: ${verdict}`);
  await page.screenshot({ path: path.join(OUT, "mocked-speculative.png") });

  await page.goto(url + "#chat");
  await page.waitForSelector("#page-chat #send");
  await page.fill("#msg", "hi");
  await page.click("#send");
  await page.waitForFunction(() => document.querySelector("#why").textContent === "finished");
  check((await page.textContent("#ttft")) === "42", "TTFT readout");
  check((await page.textContent("#pct")) === "38%", "% of ceiling readout");
  check((await page.textContent(".msg.assistant")).includes("Memory bandwidth is the rate"), "streamed text");
  await page.fill("#msg", "again");
  await page.click("#send");
  await page.waitForFunction(() => Number(document.querySelector("#ntok").textContent) >= 2);
  await page.click("#stop");
  await page.waitForFunction(() => document.querySelector("#why").textContent === "stopped by you");
  check(true, "stop ends the turn");
  await page.screenshot({ path: path.join(OUT, "mocked-chat.png") });

  // The chat page pointed at a URL: client-measured TTFT and rate, the server's timings.
  await page.selectOption("#cmode", "url");
  check(await page.isVisible("#curl") && !(await page.isVisible("#cmodel")), "URL mode shows the URL fields instead of the model picker");
  await page.fill("#curl", "http://127.0.0.1:8080");
  await page.fill("#msg", "Le mot pour coffee shop ?");
  await page.click("#send");
  await page.waitForFunction(() => document.querySelector("#dec-u").textContent.startsWith("chunks/s"));
  check(true, "while streaming, the rate counts chunks (no usage yet) and says so");
  await page.waitForFunction(() => document.querySelector("#why").textContent === "finished");
  const cu = await page.evaluate(() => window.__chatUrlRequest);
  check(cu.url === "http://127.0.0.1:8080" && cu.model === null && cu.api_key === null && cu.messages.length === 1 && cu.messages[0].role === "user",
    `the URL turn sends the conversation, no empty assistant message: ${JSON.stringify(cu)}`);
  check((await page.textContent("#ttft")) === "62" && (await page.textContent("#ttft-u")).includes("measured at the client"), "URL TTFT measured at the client");
  check((await page.textContent("#dec")) === "53.3" && (await page.textContent("#dec-u")) === "tok/s, measured at the client", "decode rate from usage, measured at the client");
  check((await page.textContent("#srv-dec")) === "54.1" && (await page.textContent("#srv")).includes("prefill 598.8 tok/s"), "the server's own timings are shown");
  check((await page.textContent("#ntok")) === "5", "token count from the server's usage");
  check((await page.textContent(".msg.assistant")).includes("Le café est ouvert."), "streamed URL text");
  await page.screenshot({ path: path.join(OUT, "mocked-chat-url.png") });

  // The Serve page: start → live state → load test drawn → stop.
  await page.goto(url + "#serve");
  await page.waitForSelector("#page-serve #sstart");
  check((await page.textContent("#sphase")) === "not running" && (await page.isDisabled("#sstop")), "no server at first");
  await page.fill("#sslots", "2");
  await page.fill("#squeue", "8");
  await page.click("#sstart");
  await page.waitForFunction(() => document.querySelector("#shealth").textContent === "ready", null, { timeout: 5000 });
  const sreq = await page.evaluate(() => window.__serve.request);
  check(JSON.stringify(sreq) === JSON.stringify({ model: "smollm2-135m", parallel: 2, queue: 8, port: 8080, ctx_per_slot: null, engine: "llama" }), `start request: ${JSON.stringify(sreq)}`);
  check((await page.textContent("#sbusy")) === "2 / 2" && (await page.textContent("#squeued")) === "3 / 8", "busy slots and queue depth from the server's counters");
  check((await page.textContent("#sserved")) === "10" && (await page.textContent("#sgtps")) === "50.0" && (await page.textContent("#sptps")) === "320.0", "requests served and token rates");
  check((await page.inputValue("#lurl")) === "http://127.0.0.1:8080", "the load test targets the running server by default");
  await page.fill("#lconc", "1,2,4");
  await page.fill("#lnum", "8");
  await page.click("#lrun");
  await page.click("#lrun", { force: true }).catch(() => {});
  await page.waitForFunction(() => document.querySelector("#llabel").textContent === "done");
  check(await page.evaluate(() => window.__calls.filter((c) => c === "loadtest_run").length) === 1, "a double click starts one load test");
  const lreq = await page.evaluate(() => window.__loadRequest);
  check(JSON.stringify(lreq.concurrency) === "[1,2,4]" && lreq.num_requests === 8 && lreq.input_tokens === 64 && lreq.output_tokens === 32, `load request: ${JSON.stringify(lreq)}`);
  check((await page.$$("#lt-rows tbody tr")).length === 3, "one row per concurrency level");
  const r4 = await page.$$eval("#lt-rows tbody tr:nth-child(3) td", (tds) => tds.map((t) => t.textContent));
  check(r4[0] === "concurrency 4" && r4[3] === "160.0" && r4[5] === "400 / 480 / 600" && r4[8] === "64.0" && r4[9] === "44.0" && r4[10] === "145%",
    `the row shows core's figures: ${JSON.stringify(r4)}`);
  check(!!(await page.$("#lview #mock-pct")) && !!(await page.$("#lview #mock-bw")), "the percentile and bandwidth-vs-STREAM charts are drawn");
  await page.screenshot({ path: path.join(OUT, "mocked-serve.png"), fullPage: true });
  await page.click("#sstop");
  await page.waitForFunction(() => document.querySelector("#sphase").textContent.startsWith("stopped"));
  check((await page.textContent("#sphase")).includes("stored as run 13") && (await page.isEnabled("#sstart")), "stop ends the server and says what was stored");
  await page.waitForTimeout(1200);
  check((await page.textContent("#shealth")) === "—", "after stop the page polls no server");
  check((await page.textContent("#sphase")).includes("stored as run 13"), "a poll that finds no server keeps what the stop stored on the page");

  await page.goto(url + "#history");
  await page.waitForSelector("#runs tbody tr[data-id]");
  await page.click('.del[data-id="1"]');
  check(!(await page.evaluate(() => window.__calls.includes("delete_run"))), "delete waits for confirmation");
  await page.click('.yes[data-id="1"]');
  await page.waitForFunction(() => window.__calls.includes("delete_run"));
  check(true, "confirmed delete calls delete_run");
  check(errors.length === 0, `no page errors ${errors.join("; ")}`);
  ok = true;
} catch (e) {
  console.error("[ui-mocked] FAILED:", e.message);
} finally {
  await browser.close();
  server.close();
}
console.log(ok ? "[ui-mocked] PASS" : "[ui-mocked] FAIL");
process.exit(ok ? 0 : 1);
