import { api, errText } from "../ipc";
import { esc, meanStd, num, parseList, pct } from "../format";
import { Jobs } from "../jobs";
import type { BenchRequest, BenchRow } from "../types";
import { chartInto, exportBar } from "./common";

const jobs = new Jobs();

// `r.test` is core's label (`tg128 x4 @ d512`): the page never rebuilds it.
function rowHtml(r: BenchRow): string {
  const warn = [...r.warnings, r.power_source === "battery" ? "battery" : "", (r.swap_out_pages ?? 0) > 0 ? `swap ${r.swap_out_pages} pages` : "",
    r.thermal_after && !r.thermal_after.startsWith("nominal") && !r.thermal_after.startsWith("unknown") ? `thermal ${r.thermal_after}` : ""]
    .filter((s) => s).join("; ");
  return `<tr data-id="${r.id}"><td>${esc(r.model_type)}</td><td>${esc(r.test)}</td><td>${esc(r.engine)}</td><td class="n">${r.n_threads}</td>
    <td class="n">${meanStd(r.avg_ts, r.stddev_ts, 2)}</td><td class="n">${num(r.ceiling_ts)}</td><td class="n">${pct(r.achieved)}</td>
    <td class="n">${num(r.bandwidth_gbps)}</td><td class="warn">${esc(warn) || ""}</td></tr>`;
}

const HEAD = `<thead><tr><th>model</th><th>test</th><th>engine</th><th>threads</th><th>tok/s (mean ± std)</th><th>ceiling tok/s</th><th>achieved</th><th>STREAM GB/s</th><th>warnings</th></tr></thead>`;

export async function benchPage(root: HTMLElement) {
  const models = await api.models();
  const present = models.filter((m) => m.present);
  root.innerHTML = `
    <h1>Benchmarks</h1>
    <div class="form">
      <label>Models <select id="models" multiple size="${Math.max(2, Math.min(5, models.length))}">
        ${models.map((m) => `<option value="${esc(m.name)}" ${m.present ? "" : "disabled"}>${esc(m.name)}${m.present ? "" : " (not fetched)"}</option>`).join("")}
      </select></label>
      <label>prompt tokens (-p) <input id="p" value="64"></label>
      <label>gen tokens (-n) <input id="n" value="32"></label>
      <label>depths (-d) <input id="d" value="0"></label>
      <label>sequences (--n-seqs) <input id="s" value="1"></label>
      <label>threads (-t) <input id="t" value="2"></label>
      <label>repetitions (-r) <input id="r" value="5"></label>
      <label>engines (--engine) <select id="engines" multiple size="4">
        <option value="llama" selected>llama</option><option value="mlx-4bit">mlx-4bit</option>
        <option value="mlx-8bit">mlx-8bit</option><option value="mlx-f16">mlx-f16</option>
      </select></label>
      <label><span><input type="checkbox" id="reuse" checked> reuse stored STREAM</span></label>
    </div>
    <div class="row"><button id="run" class="primary">Run</button><button id="cancel" disabled>Cancel</button>
      <progress id="prog" value="0" max="1"></progress><span id="plabel" class="muted"></span></div>
    <p id="berr" class="error"></p>
    <table id="results">${HEAD}<tbody></tbody></table>
    <p id="bout" class="muted"></p>
    <h2>Decode vs depth (latest run)</h2>
    <div id="chart" class="chart-img"></div>
  `;
  const $ = <T extends HTMLElement>(s: string) => root.querySelector(s) as T;
  const sel = $<HTMLSelectElement>("#models");
  const smallest = present.find((m) => /135m|smol/i.test(m.name)) ?? present[0];
  for (const o of Array.from(sel.options)) o.selected = !!smallest && o.value === smallest.name;
  let lastRun: number | null = null;
  const runs = await api.runs();
  const lastBench = runs.find((r) => r.kind === "bench" && r.n_bench_rows > 0);
  const tbody = $("#results tbody");
  if (lastBench) {
    lastRun = lastBench.id;
    tbody.innerHTML = (await api.rows(lastRun)).map(rowHtml).join("");
    $("#bout").textContent = `run ${lastRun} (stored ${lastBench.started_at})`;
    await chartInto($("#chart"), "decode_vs_depth", lastRun);
  }
  exportBar(root, "decode_vs_depth", () => lastRun, "decode_vs_depth");
  const run = $<HTMLButtonElement>("#run"), cancel = $<HTMLButtonElement>("#cancel");
  cancel.addEventListener("click", () => api.cancel("bench"));
  run.addEventListener("click", async () => {
    $("#berr").textContent = "";
    const lists = { p: parseList($<HTMLInputElement>("#p").value, "prompt"), n: parseList($<HTMLInputElement>("#n").value, "gen"),
      d: parseList($<HTMLInputElement>("#d").value, "depths"), s: parseList($<HTMLInputElement>("#s").value, "sequences"), t: parseList($<HTMLInputElement>("#t").value, "threads", false),
      r: parseList($<HTMLInputElement>("#r").value, "repetitions", false) };
    const bad = Object.values(lists).find((v) => typeof v === "string");
    if (bad) { $("#berr").textContent = bad as string; return; }
    const req: BenchRequest = { models: Array.from(sel.selectedOptions).map((o) => o.value), n_prompt: lists.p as number[],
      n_gen: lists.n as number[], n_depth: lists.d as number[], n_seqs: lists.s as number[], n_threads: lists.t as number[], reps: (lists.r as number[])[0],
      reuse_stream: $<HTMLInputElement>("#reuse").checked,
      engines: Array.from($<HTMLSelectElement>("#engines").selectedOptions).map((o) => o.value) };
    run.disabled = true; cancel.disabled = false;
    tbody.innerHTML = "";
    const prog = $<HTMLProgressElement>("#prog"), label = $("#plabel");
    let testing = ""; // core's label of the test now running (from test_started)
    try {
      const out = await jobs.once("bench", () => api.runBench(req, (p) => {
        if (p.event === "loading") label.textContent = `loading ${p.model}`;
        if (p.event === "test_started") { testing = p.label; prog.max = p.total; prog.value = p.index; label.textContent = `${p.label} (${p.index + 1}/${p.total})`; }
        if (p.event === "repetition") label.textContent = label.textContent!.replace(/ · rep.*$/, "") + ` · rep ${p.rep === 0 ? "warm-up" : p.rep + "/" + p.reps}`;
        if (p.event === "test_done") { tbody.insertAdjacentHTML("beforeend", rowHtml({ ...p.record, test: testing })); prog.value = prog.value + 1; }
      }));
      if (out) {
        lastRun = out.run_id;
        tbody.innerHTML = (await api.rows(out.run_id)).map(rowHtml).join("");
        $("#bout").innerHTML = `run ${out.run_id} stored${out.results_dir ? ` · results in <code>${esc(out.results_dir)}</code>` : ""}`;
        label.textContent = "done";
        await chartInto($("#chart"), "decode_vs_depth", lastRun);
      }
    } catch (e) {
      $("#berr").textContent = errText(e);
      label.textContent = "";
    } finally {
      run.disabled = false; cancel.disabled = true;
    }
  });
}
