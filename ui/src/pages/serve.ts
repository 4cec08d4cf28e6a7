import { api, errText } from "../ipc";
import { esc, num, parseList } from "../format";
import { Jobs } from "../jobs";
import type { Dist, LoadProgress, LoadRow, LoadView, ServeLive } from "../types";

const jobs = new Jobs();
/** How often the page re-reads the server's counters, ms. */
export const POLL_MS = 1000;

const phaseText: Record<ServeLive["phase"], string> = {
  loading: "loading the model (/health answers 503)",
  ready: "ready (/health answers 200)",
  ended: "ended by itself: press Stop to see why",
};

function p3(d: Dist): string {
  return `${num(d.median_ms, 0)} / ${num(d.p90_ms, 0)} / ${num(d.p99_ms, 0)}`;
}

function rowHtml(r: LoadRow): string {
  const b = r.bandwidth;
  return `<tr><td>${esc(r.label)}</td><td class="n">${r.n_completed}/${r.n_sent}</td><td class="n">${r.n_rejected}</td>
    <td class="n">${num(r.output_throughput_tps)}</td><td class="n">${num(r.request_throughput_rps, 2)}</td>
    <td class="n">${p3(r.ttft)}</td><td class="n">${p3(r.tpot)}</td><td class="n">${num(r.itl.median_ms, 1)}</td>
    <td class="n">${num(b.implied_gbps)}</td><td class="n">${num(b.stream_gbps)}</td><td class="n">${b.pct_of_stream == null ? "—" : `${num(b.pct_of_stream, 0)}%`}</td>
    <td>${esc(r.token_source)}</td></tr>`;
}

const LOAD_HEAD = `<thead><tr><th>load</th><th>done/sent</th><th>429</th><th>output tok/s</th><th>req/s</th>
  <th>TTFT p50/p90/p99 ms</th><th>TPOT p50/p90/p99 ms</th><th>ITL p50 ms</th><th>implied GB/s</th><th>server's roof GB/s</th><th>% of the roof</th><th>tokens from</th></tr></thead>`;

function viewHtml(v: LoadView): string {
  const notes = [...new Set(v.rows.map((r) => r.bandwidth.note).filter((n): n is string => !!n))];
  const errs = v.rows.filter((r) => r.first_error).map((r) => `${r.label}: ${r.first_error}`);
  return `<p>run ${v.run_id} · ${esc(v.url)} · server model ${esc(v.server_model ?? "—")} · ${esc(v.server_header ?? "no Server header")}
      · bandwidth columns from ${esc(v.model_file ?? "— (no model file)")}</p>
    <table id="lt-rows">${LOAD_HEAD}<tbody>${v.rows.map(rowHtml).join("")}</tbody></table>
    ${notes.map((n) => `<p class="muted bw-note">${esc(n)}</p>`).join("")}
    ${errs.map((e) => `<p class="error">${esc(e)}</p>`).join("")}
    <p class="muted">TTFT = send → first token; TPOT = (E2EL − TTFT) ÷ (tokens − 1); ITL = gaps between chunks (vLLM's definitions).
      Implied GB/s = output tok/s × bytes read per token; above 100% of STREAM, batched requests share each weight read.</p>
    <div class="charts">${v.charts.map((c) => `<div class="chart" data-stem="${esc(c.stem)}">${c.svg}</div>`).join("")}</div>`;
}

function progressText(p: LoadProgress): string {
  switch (p.event) {
    case "server": return `server lists ${p.model_ids.join(", ") || "no model"}`;
    case "level": return `${p.label} (level ${p.index + 1}/${p.total}, ${p.n_requests} requests)`;
    case "request": return `${p.done}/${p.total} requests done`;
  }
}

export async function servePage(root: HTMLElement) {
  const models = (await api.models()).filter((m) => m.present);
  const def = models.find((m) => m.default) ?? models[0];
  root.innerHTML = `
    <h1>Serve</h1>
    <p class="muted">Runs <code>memwall serve</code> inside the app: an OpenAI-compatible server on 127.0.0.1 with continuous batching
      and prefix-cache reuse. The live figures are the server's own counters (what its <code>/metrics</code> prints).</p>
    <div class="form">
      <label>Model <select id="smodel">${models.map((m) => `<option value="${esc(m.name)}" ${m.name === def?.name ? "selected" : ""}>${esc(m.name)}</option>`).join("")}</select></label>
      <label>slots (--parallel) <input id="sslots" value="2" size="4"></label>
      <label>queue (--queue) <input id="squeue" value="16" size="4"></label>
      <label>port (--port) <input id="sport" value="8080" size="6"></label>
      <label>engine (--engine) <select id="sengine">
        <option value="llama" selected>llama</option><option value="mlx-4bit">mlx-4bit</option>
        <option value="mlx-8bit">mlx-8bit</option><option value="mlx-f16">mlx-f16</option>
      </select></label>
    </div>
    <div class="row"><button id="sstart" class="primary">Start server</button><button id="sstop" disabled>Stop server</button>
      <span id="sphase" class="muted">not running</span></div>
    <p id="sserr" class="error"></p>
    <div class="cards" id="slive">
      <div class="card"><div class="k">Health</div><div class="v" id="shealth">—</div><div class="muted" id="surl">—</div></div>
      <div class="card"><div class="k">Busy slots</div><div class="v" id="sbusy">—</div><div class="muted" id="sbusyd">per decode —</div></div>
      <div class="card"><div class="k">Queue</div><div class="v" id="squeued">—</div><div class="muted" id="squeuecap">waiting</div></div>
      <div class="card"><div class="k">Requests served</div><div class="v" id="sserved">—</div><div class="muted" id="scancel">cancelled —</div></div>
      <div class="card"><div class="k">Prompt</div><div class="v" id="sptps">—</div><div class="muted">tok/s (llamacpp:prompt_tokens_seconds)</div></div>
      <div class="card"><div class="k">Predicted</div><div class="v" id="sgtps">—</div><div class="muted">tok/s (llamacpp:predicted_tokens_seconds)</div></div>
    </div>
    <p id="swarn" class="muted"></p>
    <h2>Load test</h2>
    <p class="muted">Closed loop against this server or any OpenAI-compatible URL (<code>memwall loadtest</code>); stored as a run.
      Each request asks for the output length with <code>ignore_eos</code>; one warm-up request per level is not counted.</p>
    <div class="form">
      <label>URL <input id="lurl" size="28" placeholder="http://127.0.0.1:8080"></label>
      <label>model <input id="lmodel" size="16" placeholder="first /v1/models id"></label>
      <label>API key <input id="lkey" type="password" size="10" placeholder="optional"></label>
      <label>concurrency <input id="lconc" value="1,2,4" size="10"></label>
      <label>requests per level <input id="lnum" value="8" size="4"></label>
      <label>input tokens <input id="lin" value="64" size="5"></label>
      <label>output tokens <input id="lout" value="32" size="5"></label>
    </div>
    <div class="row"><button id="lrun" class="primary">Run load test</button><span id="llabel" class="muted"></span></div>
    <p id="lerr" class="error"></p>
    <div id="lview"><p class="muted">No load test stored yet.</p></div>`;
  const $ = <T extends HTMLElement>(s: string) => root.querySelector(s) as T;
  if (models.length === 0) $("#sserr").textContent = "No model is fetched: run `memwall models fetch`.";
  const startBtn = $<HTMLButtonElement>("#sstart"), stopBtn = $<HTMLButtonElement>("#sstop");

  // What the last stop returned stays on the page until the next start: a poll that
  // finds no server must not wipe it, and a poll answered before a start or stop
  // finished (its generation is older) is dropped.
  let stoppedText = "";
  let generation = 0;
  const show = (l: ServeLive | null) => {
    startBtn.disabled = l !== null;
    stopBtn.disabled = l === null;
    if (!l) {
      $("#sphase").textContent = stoppedText || "not running";
      for (const id of ["#shealth", "#sbusy", "#squeued", "#sserved", "#sptps", "#sgtps"]) $(id).textContent = "—";
      $("#surl").textContent = "—";
      return;
    }
    const m = l.metrics;
    $("#sphase").textContent = `${l.model_id ?? l.model_file} · ${phaseText[l.phase]}`;
    $("#shealth").textContent = l.phase;
    $("#surl").textContent = l.url;
    $("#sbusy").textContent = `${m.requests_processing} / ${l.n_slots}`;
    $("#sbusyd").textContent = `per decode ${num(m.n_busy_slots_per_decode, 2)}${l.n_ctx_slot ? ` · ${l.n_ctx_slot} tokens per slot` : ""}`;
    $("#squeued").textContent = `${m.requests_deferred} / ${l.queue_capacity}`;
    $("#sserved").textContent = `${m.requests_served_total}`;
    $("#scancel").textContent = `cancelled ${m.requests_cancelled_total} · ${m.tokens_predicted_total} tokens generated`;
    $("#sptps").textContent = num(m.prompt_tokens_seconds);
    $("#sgtps").textContent = num(m.predicted_tokens_seconds);
    $("#swarn").textContent = l.warnings.join(" · ");
    const lurl = $<HTMLInputElement>("#lurl");
    if (!lurl.value) lurl.value = l.url;
  };
  let busy = false;
  const poll = async () => {
    if (busy) return;
    const g = generation;
    try {
      const l = await api.serveState();
      if (!busy && g === generation) show(l);
    } catch (e) { $("#sserr").textContent = errText(e); }
  };

  startBtn.addEventListener("click", async () => {
    $("#sserr").textContent = "";
    const n = (id: string, name: string) => {
      const v = parseList($<HTMLInputElement>(id).value, name, false);
      return typeof v === "string" ? v : v.length > 1 ? `${name}: give one number` : v[0];
    };
    const [parallel, queue, port] = [n("#sslots", "slots"), n("#squeue", "queue"), n("#sport", "port")];
    const bad = [parallel, queue, port].find((v) => typeof v === "string");
    if (bad) { $("#sserr").textContent = bad as string; return; }
    busy = true;
    generation++;
    stoppedText = "";
    startBtn.disabled = true;
    try {
      show(await api.serveStart({ model: $<HTMLSelectElement>("#smodel").value, parallel: parallel as number, queue: queue as number,
        port: port as number, ctx_per_slot: null, engine: $<HTMLSelectElement>("#sengine").value }));
    } catch (e) {
      $("#sserr").textContent = errText(e);
      startBtn.disabled = false;
    } finally { busy = false; generation++; }
  });
  stopBtn.addEventListener("click", async () => {
    busy = true;
    generation++;
    stopBtn.disabled = true;
    try {
      const s = await api.serveStop();
      stoppedText = s ? `stopped: ${s.tokens_predicted} tokens generated${s.run_id === null ? "" : `, stored as run ${s.run_id}`}` : "";
      show(null);
    } catch (e) {
      show(null);
      $("#sserr").textContent = errText(e);
    } finally { busy = false; generation++; }
  });

  $("#lrun").addEventListener("click", async () => {
    $("#lerr").textContent = "";
    const list = (id: string, name: string) => parseList($<HTMLInputElement>(id).value, name, false);
    const conc = list("#lconc", "concurrency"), num1 = list("#lnum", "requests per level"), tin = list("#lin", "input tokens"), tout = list("#lout", "output tokens");
    const bad = [conc, num1, tin, tout].find((v) => typeof v === "string");
    if (bad) { $("#lerr").textContent = bad as string; return; }
    const one = (v: number[] | string) => (v as number[])[0];
    const model = $<HTMLInputElement>("#lmodel").value.trim(), key = $<HTMLInputElement>("#lkey").value;
    $<HTMLButtonElement>("#lrun").disabled = true;
    try {
      const v = await jobs.once("loadtest", () => api.loadtest({ url: $<HTMLInputElement>("#lurl").value.trim(), model: model || null, api_key: key || null,
        concurrency: conc as number[], num_requests: one(num1), input_tokens: one(tin), output_tokens: one(tout), model_file: null },
        (p) => { $("#llabel").textContent = progressText(p); }));
      if (v) {
        $("#lview").innerHTML = viewHtml(v);
        $("#llabel").textContent = "done";
      }
    } catch (e) {
      $("#lerr").textContent = errText(e);
      $("#llabel").textContent = "";
    } finally {
      $<HTMLButtonElement>("#lrun").disabled = false;
    }
  });

  try {
    const v = await api.loadtestView(null);
    if (v) $("#lview").innerHTML = viewHtml(v);
  } catch (e) {
    $("#lerr").textContent = errText(e);
  }
  await poll();
  const timer = setInterval(() => { if (!root.isConnected) clearInterval(timer); else if (!root.hidden) poll(); }, POLL_MS);
}
